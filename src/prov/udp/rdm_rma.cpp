// SPDX-License-Identifier: MIT
// weft — udp RDM: RMA and atomics, both sides (messages in rdm_proto.hpp).
//
// Initiator: every call form funnels (util::rma_ops) into post_rma /
// post_atomic, which queue one message on the peer as a send does: an
// rma_write carries its data from the application's buffers (an injected
// one from the entry); an atomic's operands and compare values are copied
// into the entry (at most rdm_atomic_max bytes each), so FI_INJECT costs
// nothing more. Once the target has acknowledged a request's last datagram
// (rma_acked) the request waits for its rma_answer, which names it by id:
// the entry's index in the transmit pool and a generation bumped at every
// post, so an answer to no request of ours, to another peer's, or to an
// earlier use of the entry is dropped. The fire-and-forget forms
// (fi_inject_write*, fi_inject_atomic) ask for no answer and complete, as
// sends do, at the acknowledgement.
//
// Target: a request's first datagram is checked (parse_request) and every
// range it names looked up once in the domain's MR map for the rights the
// operation needs. What the request needs until its last datagram (the
// registered segments it reaches, a refusal, staged operands) lives in a
// response entry, from a pool of our own so that serving never waits for
// the application's sends; the same entry then carries the answer. Each
// in-order datagram of a write is copied straight into the registered
// memory; an atomic runs through util::atomic_apply at the last datagram
// (every atomic on the domain's memory, from any peer or provider, goes
// through that one engine); a read is answered from the registered memory
// without a copy. A refused request places nothing and is answered with
// its error.
#include "core/log.hpp"
#include "prov/udp/rdm.hpp"
#include "util/atomic.hpp"
#include "util/iov.hpp"
#include "util/mr.hpp"
#include "util/net.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

namespace weft::udp {

namespace rd = util::rd;

namespace {

// Requests served at once, per endpoint; past them a request waits at its
// initiator (it is not consumed) until an answer has been acknowledged.
constexpr size_t resp_pool_size = 256;

util::atomic_kind kind_of(uint8_t op) noexcept {
  return op == uint8_t(rdm_op::atomic)         ? util::atomic_kind::base
         : op == uint8_t(rdm_op::atomic_fetch) ? util::atomic_kind::fetch
                                               : util::atomic_kind::compare;
}

const char* op_name(uint8_t op) noexcept {
  switch (rdm_op(op)) {
    case rdm_op::rma_write: return "an RMA write";
    case rdm_op::rma_read: return "an RMA read";
    default: return "an atomic";
  }
}

// The rma_iov `i` of a request's header kept in a response entry's buffer.
rma_iov iov_at(const rdm_tx& r, size_t i) noexcept {
  rma_iov v;
  std::memcpy(&v, r.buf + sizeof(rma_hdr) + i * sizeof(rma_iov), sizeof v);
  return v;
}

// Writes a request's rma_hdr and its rma_iovs at `out`; their length.
template <class IovOf>
size_t put_header(std::byte* out, const rma_hdr& h, IovOf&& iov_of) noexcept {
  std::memcpy(out, &h, sizeof h);
  for (size_t i = 0; i < h.iov_count; ++i) {
    const rma_iov v = iov_of(i);
    std::memcpy(out + sizeof h + i * sizeof v, &v, sizeof v);
  }
  return sizeof h + h.iov_count * sizeof(rma_iov);
}

}  // namespace

const char* describe(rma_malformed m) noexcept {
  switch (m) {
    case rma_malformed::none: return "well-formed";
    case rma_malformed::short_header: return "its RMA header is not in its first datagram";
    case rma_malformed::bad_iov_count: return "no target range, or more than 4";
    case rma_malformed::bad_flags: return "unknown flags";
    case rma_malformed::bad_range: return "a target range that wraps";
    case rma_malformed::too_long: return "more bytes than one operation moves";
    case rma_malformed::bad_length: return "a payload of another length than its header says";
    case rma_malformed::bad_atomic: return "an atomic of no datatype, no elements or partial ones";
    case rma_malformed::reserved_set: return "atomic fields set on an RMA request";
    case rma_malformed::no_answer: return "a read that asks for no answer";
  }
  return "?";
}

template <class Lock>
const fi_ops_rma* rdm_endpoint::rma_table() noexcept {
  return &util::rma_ops<rdm_endpoint, Lock>::rma_table;
}
template <class Lock>
const fi_ops_atomic* rdm_endpoint::atomic_table() noexcept {
  return &util::rma_ops<rdm_endpoint, Lock>::atomic_table;
}

// ---- initiator ----------------------------------------------------------------------

void rdm_endpoint::enqueue(rdm_peer& p, rdm_tx* t) noexcept {
  t->hdr.rx_index = p.to_index;   // the receive context we mean (fi_rx_addr)
  t->hdr.name_port = name_port_;  // a context: its scalable endpoint's port
  t->next = nullptr;
  t->queued = 0;
  if (p.tail)
    p.tail->next = t;
  else
    p.head = t;
  p.tail = t;
  if (!p.unsent) p.unsent = t;
  mark_busy(p);
}

// The rest of a post, under the endpoint lock with t's message built: who
// completes it and how, its id, and off it goes.
template <class Lock>
ssize_t rdm_endpoint::post_entry(rdm_peer& p, rdm_tx* t, void* context, bool completion,
                                 bool silent, bool answer, uint64_t flags) noexcept {
  t->peer = &p;
  t->context = context;
  t->complete = completion;
  t->report = !silent;
  t->awaiting = false;
  t->err = 0;
  if (answer) {
    t->kind = rdm_tx_kind::request;
    ++t->gen;
    t->hdr.tag = uint64_t(t->gen) << 32 | uint64_t(t - tx_pool_.get());
  } else {
    t->kind = rdm_tx_kind::message;  // completes at its acknowledgement, as a send
    t->hdr.tag = 0;
  }
  enqueue(p, t);
  send_or_hold<Lock>(p, flags);  // FI_MORE (fi_rma(3), fi_atomic(3)) holds it
  return 0;
}

template <class Lock>
ssize_t rdm_endpoint::post_rma(const util::rma_request& r) noexcept {
  uint64_t total = 0;
  if (errc e = util::check_rma(&provider(), r, rma_limits(), &total); e != errc::ok) return to_fi(e);
  util::cq* cq = bound_.tx_cq.get();
  const bool silent = r.flags & util::op_no_completion;
  const bool completion = cq && !silent && (!bound_.tx_selective || (r.flags & FI_COMPLETION));
  // Reads always wait for their data; writes for the target's word, unless
  // fire-and-forget.
  const bool answer = !r.write || !silent;
  const bool with_data = r.flags & FI_REMOTE_CQ_DATA;
  [[maybe_unused]] auto g = guard<Lock>();
  int err = 0;
  rdm_peer* p = peer_for_send(r.addr, &err);
  if (!p) return err;
  rdm_tx* t = take_tx();
  if (!t) return to_fi(errc::again);
  const rma_hdr h{uint8_t(r.rma_count), answer ? rma_flag_answer : uint8_t(0), 0, 0, 0};
  const size_t hl = put_header(t->buf, h, [&](size_t i) {
    return rma_iov{r.rma[i].addr, r.rma[i].len, r.rma[i].key};
  });
  t->hdr = rd::msg{};
  t->hdr.op = uint8_t(r.write ? rdm_op::rma_write : rdm_op::rma_read) |
              (with_data ? rdm_op_with_data : 0);
  t->hdr.len = hl + (r.write ? total : 0);
  t->hdr.data = with_data ? r.data : 0;
  t->iov[0] = {t->buf, hl};
  t->count = 1;
  t->dst_count = 0;
  t->dst_len = 0;
  if (!r.write) {
    std::copy_n(r.iov, r.count, t->dst);
    t->dst_count = uint8_t(r.count);
    t->dst_len = total;
  } else if (r.flags & FI_INJECT) {
    // The caller may reuse its buffers at once: the data travels from here.
    size_t off = hl;
    for (size_t i = 0; i < r.count; ++i) {
      if (!r.iov[i].iov_len) continue;  // a 0-byte iovec may have no base
      std::memcpy(t->buf + off, r.iov[i].iov_base, r.iov[i].iov_len);
      off += r.iov[i].iov_len;
    }
    t->iov[0].iov_len = off;
  } else {
    std::copy_n(r.iov, r.count, t->iov + 1);
    t->count = uint8_t(1 + r.count);
  }
  t->cq_flags = FI_RMA | (r.write ? FI_WRITE : FI_READ);
  t->cntr = util::counted(r.write ? bound_.write_cntr.get() : bound_.read_cntr.get(), r.flags);
  return post_entry<Lock>(*p, t, r.context, completion, silent, answer, r.flags);
}

template <class Lock>
ssize_t rdm_endpoint::post_atomic(const util::atomic_request& r) noexcept {
  size_t count = 0;
  if (errc e = util::check_atomic(&provider(), r, rma_limits(), &count); e != errc::ok) return to_fi(e);
  const size_t size = util::atomic_type_size(r.datatype);
  const bool fetch = r.kind != util::atomic_kind::base;
  const size_t operand = r.op == FI_ATOMIC_READ ? 0 : count * size;
  util::cq* cq = bound_.tx_cq.get();
  const bool silent = r.flags & util::op_no_completion;
  const bool completion = cq && !silent && (!bound_.tx_selective || (r.flags & FI_COMPLETION));
  const bool answer = fetch || !silent;
  const bool with_data = r.flags & FI_REMOTE_CQ_DATA;
  [[maybe_unused]] auto g = guard<Lock>();
  int err = 0;
  rdm_peer* p = peer_for_send(r.addr, &err);
  if (!p) return err;
  rdm_tx* t = take_tx();
  if (!t) return to_fi(errc::again);
  const rma_hdr h{uint8_t(r.rma_count), answer ? rma_flag_answer : uint8_t(0),
                  uint8_t(r.datatype), uint8_t(r.op), uint32_t(count)};
  size_t off = put_header(t->buf, h, [&](size_t i) {
    return rma_iov{r.rma[i].addr, r.rma[i].count * size, r.rma[i].key};
  });
  // Operands, then compare values: at most 2 * rdm_atomic_max bytes
  // (check_atomic), copied so the caller's buffers are free at return.
  if (operand)
    for (size_t i = 0; i < r.src_count; ++i) {
      std::memcpy(t->buf + off, r.src[i].addr, r.src[i].count * size);
      off += r.src[i].count * size;
    }
  if (r.kind == util::atomic_kind::compare)
    for (size_t i = 0; i < r.cmp_count; ++i) {
      std::memcpy(t->buf + off, r.cmp[i].addr, r.cmp[i].count * size);
      off += r.cmp[i].count * size;
    }
  t->hdr = rd::msg{};
  t->hdr.op = uint8_t(r.kind == util::atomic_kind::base    ? rdm_op::atomic
                      : r.kind == util::atomic_kind::fetch ? rdm_op::atomic_fetch
                                                           : rdm_op::atomic_compare) |
              (with_data ? rdm_op_with_data : 0);
  t->hdr.len = off;
  t->hdr.data = with_data ? r.data : 0;
  t->iov[0] = {t->buf, off};
  t->count = 1;
  t->dst_count = 0;
  t->dst_len = 0;
  if (fetch) {
    for (size_t i = 0; i < r.res_count; ++i) t->dst[i] = {r.res[i].addr, r.res[i].count * size};
    t->dst_count = uint8_t(r.res_count);
    t->dst_len = count * size;
  }
  t->cq_flags = FI_ATOMIC | (fetch ? FI_READ : FI_WRITE);
  t->cntr = util::counted(fetch ? bound_.read_cntr.get() : bound_.write_cntr.get(), r.flags);
  return post_entry<Lock>(*p, t, r.context, completion, silent, answer, r.flags);
}

template <class Lock>
void rdm_endpoint::rma_acked(rdm_peer& p, rdm_tx* t) noexcept {
  if (t->kind == rdm_tx_kind::request) {
    // The target has the whole request; its answer follows on its stream.
    t->awaiting = true;
    ++p.awaiting;
    return;
  }
  put_response(t);  // our answer arrived
}

template <class Lock>
void rdm_endpoint::begin_answer(rdm_peer& p, const rd::view& v) noexcept {
  const uint64_t id = v.m.tag;
  const uint64_t index = id & 0xffffffffu;
  rdm_tx* t = index < tx_carved_ ? &tx_pool_[index] : nullptr;
  if (!t || t->kind != rdm_tx_kind::request || !t->awaiting || t->peer != &p ||
      t->gen != uint32_t(id >> 32)) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA,
              "udp RDM peer %s: an RMA answer (id 0x%llx) to no request of ours; dropped",
              util::format_sockaddr(p.sa()).c_str(), static_cast<unsigned long long>(id));
    return;
  }
  const uint64_t status = v.m.data;
  if (status ? v.m.len != 0 : v.m.len != t->dst_len) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA,
              "udp RDM peer %s: an RMA answer of %llu bytes (status %llu) to a request for %llu;"
              " the request fails",
              util::format_sockaddr(p.sa()).c_str(), static_cast<unsigned long long>(v.m.len),
              static_cast<unsigned long long>(status),
              static_cast<unsigned long long>(t->dst_len));
    finish_answer<Lock>(p, t, FI_EIO);
    return;
  }
  // A status is a positive FI_E* code; anything else is no code we know.
  t->err = status == 0 ? 0 : status < 4096 ? int32_t(status) : FI_EIO;
  t->rma_hdr_len = 0;
  p.rma = t;
  p.rx_as.begin(v.m.len);
}

template <class Lock>
void rdm_endpoint::finish_answer(rdm_peer& p, rdm_tx* t, int err) noexcept {
  t->awaiting = false;
  --p.awaiting;
  if (err)
    fail_tx<Lock>(t, err);
  else
    complete_tx<Lock>(t);
}

template <class Lock>
bool rdm_endpoint::begin_request(rdm_peer& p, const rd::view& v, uint8_t op) noexcept {
  auto* prov = &provider();
  rma_request q;
  if (rma_malformed m = parse_request(op, v.m, v.payload, v.h.bytes, q);
      m != rma_malformed::none) {
    WEFT_WARN(prov, FI_LOG_EP_DATA, "udp RDM peer %s: dropped %s request: %s",
              util::format_sockaddr(p.sa()).c_str(), op_name(op), describe(m));
    return true;
  }
  rdm_tx* r = take_response();
  if (!r) return false;  // every entry serves a request: this one waits at its sender
  r->kind = rdm_tx_kind::response;
  r->peer = &p;
  r->hdr = v.m;  // the request's, until the answer's replaces it
  r->rma_hdr_len = uint16_t(q.hdr_len);
  std::memcpy(r->buf, v.payload, q.hdr_len);  // for finish_request
  r->err = 0;
  r->count = 0;
  // Every range, once, here: the rights the operation needs, inside the
  // registration. Nothing is placed for a request refused.
  auto& mrs = domain_->mrs();
  size_t bad = 0;
  if (!is_atomic(op)) {
    const uint64_t access = op == uint8_t(rdm_op::rma_write) ? FI_REMOTE_WRITE : FI_REMOTE_READ;
    size_t n = 0;
    for (size_t i = 0; i < q.h.iov_count && !r->err; ++i) {
      size_t k = rdm_tx_iov - n;
      errc e = mrs.verify_iov(q.iov[i].key, q.iov[i].addr, q.iov[i].len, access, r->iov + n, &k);
      // More registered segments than an entry gathers: refused as tcp does.
      if (e != errc::ok) r->err = int32_t(e == errc::toosmall ? errc::inval : e), bad = i;
      n += k;
    }
    r->count = r->err ? 0 : uint8_t(n);
  } else {
    const util::atomic_kind kind = kind_of(op);
    const int aop = q.h.atomic_op;
    if (!util::atomic_supported(aop, q.h.datatype, kind)) {
      r->err = FI_EOPNOTSUPP;
    } else {
      const uint64_t access = (aop != FI_ATOMIC_READ ? FI_REMOTE_WRITE : 0) |
                              (kind != util::atomic_kind::base ? FI_REMOTE_READ : 0);
      for (size_t i = 0; i < q.h.iov_count && !r->err; ++i) {
        void* local = nullptr;
        errc e = mrs.verify(q.iov[i].key, q.iov[i].addr, q.iov[i].len, access, &local);
        if (e != errc::ok) r->err = int32_t(e), bad = i;
        r->iov[i] = {local, q.iov[i].len};
      }
      r->count = r->err ? 0 : q.h.iov_count;
    }
  }
  if (r->err)
    WEFT_WARN(prov, FI_LOG_EP_DATA,
              "udp RDM peer %s: refused %s (key 0x%llx, address 0x%llx, %llu bytes): %s",
              util::format_sockaddr(p.sa()).c_str(), op_name(op),
              static_cast<unsigned long long>(q.iov[bad].key),
              static_cast<unsigned long long>(q.iov[bad].addr),
              static_cast<unsigned long long>(q.iov[bad].len), fi_strerror(r->err));
  p.rma = r;
  p.rx_as.begin(v.m.len);
  return true;
}

template <class Lock>
void rdm_endpoint::finish_request(rdm_peer& p, rdm_tx* r) noexcept {
  rma_hdr h;
  std::memcpy(&h, r->buf, sizeof h);
  const uint8_t op = r->hdr.op & ~rdm_op_with_data;
  const bool with_data = r->hdr.op & rdm_op_with_data;
  const uint64_t id = r->hdr.tag, cq_data = r->hdr.data;
  auto& mrs = domain_->mrs();
  auto key_of = [&](size_t i) { return iov_at(*r, i).key; };
  uint64_t total = 0;
  for (size_t i = 0; i < h.iov_count; ++i) total += iov_at(*r, i).len;
  size_t payload = 0;
  if (op == uint8_t(rdm_op::rma_write)) {
    if (!r->err) {
      bound_.remote_event<Lock>(&provider(), FI_RMA | FI_REMOTE_WRITE, with_data, cq_data, p.src,
                                total);
      mrs.count_remote(h.iov_count, key_of, FI_REMOTE_WRITE);
    }
    r->count = 0;
  } else if (op == uint8_t(rdm_op::rma_read)) {
    if (!r->err) {
      bound_.remote_event<Lock>(&provider(), FI_RMA | FI_REMOTE_READ, false, 0, p.src, total);
      mrs.count_remote(h.iov_count, key_of, FI_REMOTE_READ);
      payload = total;  // answered from the segments in r->iov, without a copy
    }
  } else {
    const util::atomic_kind kind = kind_of(op);
    const bool fetches = kind != util::atomic_kind::base;
    std::byte* operand = r->buf + rma_hdr_max;  // staged, and the prior values in place
    if (!r->err) {
      const bool writes = h.atomic_op != FI_ATOMIC_READ;
      const size_t size = rdm_atomic_size(h.datatype);
      const std::byte* compare = operand + (writes ? total : 0);
      size_t at = 0;
      for (size_t i = 0; i < r->count && !r->err; ++i) {
        // Element by element, inputs read before the prior value is
        // written over them (util/atomic.hpp).
        errc e = util::atomic_apply(h.atomic_op, h.datatype, kind, r->iov[i].iov_base,
                                    operand + at, compare + at, fetches ? operand + at : nullptr,
                                    r->iov[i].iov_len / size);
        if (e != errc::ok) r->err = int32_t(e);
        at += r->iov[i].iov_len;
      }
    }
    if (!r->err) {
      // fi_endpoint(3) counts by family: base atomics are remote writes,
      // fetch and compare atomics remote reads.
      bound_.remote_event<Lock>(&provider(),
                                FI_ATOMIC | (fetches ? FI_REMOTE_READ : FI_REMOTE_WRITE),
                                with_data, cq_data, p.src, total);
      mrs.count_remote(h.iov_count, key_of, util::region_events(kind, h.atomic_op));
    }
    r->count = 0;
    if (fetches && !r->err) {
      r->iov[0] = {operand, total};
      r->count = 1;
      payload = total;
    }
  }
  if (!(h.flags & rma_flag_answer)) {
    put_response(r);
    return;
  }
  if (r->err) r->count = 0, payload = 0;
  r->hdr = rd::msg{};
  r->hdr.op = uint8_t(rdm_op::rma_answer);
  r->hdr.len = payload;
  r->hdr.tag = id;
  r->hdr.data = uint64_t(r->err);
  r->complete = r->report = false;
  r->cntr = nullptr;
  // Sent by progress once this datagram is consumed, so that the answer
  // acknowledges the whole request.
  enqueue(p, r);
}

// ---- both sides: the datagrams of an RMA message --------------------------------------

template <class Lock>
bool rdm_endpoint::take_rma(rdm_peer& p, const rd::view& v) noexcept {
  const rd::dgram& h = v.h;
  const bool last = h.flags & rd::flag_last;
  const bool first = h.flags & rd::flag_first;
  if (last) {
    // A request with remote CQ data completes at its last datagram: only
    // with room in the receive CQ (otherwise the peer sends it again).
    // Answers complete on the transmit CQ and never wait here.
    const bool data = first ? is_request(v.m.op & ~rdm_op_with_data) && (v.m.op & rdm_op_with_data)
                            : p.rma->kind == rdm_tx_kind::response &&
                                  (p.rma->hdr.op & rdm_op_with_data);
    util::cq* cq = bound_.rx_cq.get();
    if (data && cq && !cq->has_room<Lock>()) return false;
  }
  if (first) {
    const uint8_t op = v.m.op & ~rdm_op_with_data;
    if (op == uint8_t(rdm_op::rma_answer)) {
      begin_answer<Lock>(p, v);
    } else if (is_request(op)) {
      if (!begin_request<Lock>(p, v, op)) return false;
    } else {
      WEFT_WARN(&provider(), FI_LOG_EP_DATA,
                "udp RDM peer %s: dropped a message (operation %u, %llu bytes)",
                util::format_sockaddr(p.sa()).c_str(), unsigned(v.m.op),
                static_cast<unsigned long long>(v.m.len));
    }
    if (!p.rma) {  // dropped, and the rest of it with it
      p.rx_dropped = !last;
      return true;
    }
  }
  rdm_tx* t = p.rma;
  const uint64_t at = p.rx_as.off;
  const rd::assembly::fit fit = p.rx_as.add(h.bytes, last);
  if (fit == rd::assembly::fit::overflow) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA,
              "udp RDM peer %s: more data than the RMA message's %llu bytes; it is dropped",
              util::format_sockaddr(p.sa()).c_str(),
              static_cast<unsigned long long>(p.rx_as.len));
    drop_rma<Lock>(p, FI_EIO, false);
    p.rx_dropped = !last;
    return true;
  }
  // The data after the request's header (which lies in the first datagram).
  const size_t skip = at < t->rma_hdr_len ? t->rma_hdr_len - at : 0;
  if (h.bytes > skip && !t->err) {
    const uint64_t off = at + skip - t->rma_hdr_len;
    const std::byte* from = v.payload + skip;
    const size_t n = h.bytes - skip;
    if (t->kind == rdm_tx_kind::request)  // the answer's data: to the caller's buffers
      util::iov_copy_in(t->dst, t->dst_count, off, from, n);
    else if ((t->hdr.op & ~rdm_op_with_data) == uint8_t(rdm_op::rma_write))
      util::iov_copy_in(t->iov, t->count, off, from, n);  // straight into registered memory
    else
      std::memcpy(t->buf + rma_hdr_max + off, from, n);  // operands: <= 2 * rdm_atomic_max
  }
  if (fit == rd::assembly::fit::ok) return true;
  if (fit == rd::assembly::fit::short_end) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "udp RDM peer %s: an RMA message ended short",
              util::format_sockaddr(p.sa()).c_str());
    drop_rma<Lock>(p, FI_EIO, false);
    return true;
  }
  p.rma = nullptr;
  if (t->kind == rdm_tx_kind::request)
    finish_answer<Lock>(p, t, t->err);
  else
    finish_request<Lock>(p, t);
  return true;
}

template <class Lock>
void rdm_endpoint::drop_rma(rdm_peer& p, int err, bool awaiting) noexcept {
  if (rdm_tx* t = std::exchange(p.rma, nullptr)) {
    if (t->kind == rdm_tx_kind::response)
      put_response(t);  // a request we served: what it placed stays, it gets no answer
    else if (!awaiting)
      finish_answer<Lock>(p, t, err);  // an answer cut off: its request fails
  }
  if (!awaiting || !p.awaiting) return;
  // The peer is gone: every request of ours it has not answered fails. A
  // walk of the pool, on this rare path, keeps the peer small.
  for (size_t i = 0; i < tx_carved_ && p.awaiting; ++i) {
    rdm_tx* t = &tx_pool_[i];
    if (t->kind == rdm_tx_kind::request && t->awaiting && t->peer == &p)
      finish_answer<Lock>(p, t, err);
  }
}

rdm_tx* rdm_endpoint::take_response() noexcept {
  if (!resp_pool_) {
    resp_pool_.reset(new (std::nothrow) rdm_tx[resp_pool_size]);
    if (!resp_pool_) {
      WEFT_WARN(&provider(), FI_LOG_EP_DATA, "udp RDM: out of memory to serve RMA requests");
      return nullptr;
    }
    for (size_t i = 0; i < resp_pool_size; ++i) put_response(&resp_pool_[i]);
  }
  rdm_tx* r = resp_free_;
  if (r) resp_free_ = r->next, r->next = nullptr;
  return r;
}

void rdm_endpoint::put_response(rdm_tx* r) noexcept {
  r->next = resp_free_;
  resp_free_ = r;
}

#define WEFT_UDP_RDM_RMA_INSTANTIATE(L)                                                          \
  template const fi_ops_rma* rdm_endpoint::rma_table<L>() noexcept;                              \
  template const fi_ops_atomic* rdm_endpoint::atomic_table<L>() noexcept;                        \
  template bool rdm_endpoint::take_rma<L>(rdm_peer&, const rd::view&) noexcept;                  \
  template void rdm_endpoint::rma_acked<L>(rdm_peer&, rdm_tx*) noexcept;                         \
  template void rdm_endpoint::drop_rma<L>(rdm_peer&, int, bool) noexcept;

WEFT_UDP_RDM_RMA_INSTANTIATE(util::null_lock)
WEFT_UDP_RDM_RMA_INSTANTIATE(util::mutex_lock)

}  // namespace weft::udp
