// SPDX-License-Identifier: MIT
// weft — tcp RMA and atomics, both sides (frames in proto.hpp).
//
// Initiator: every call form funnels (util::rma_ops) into post_rma /
// post_atomic, which build one frame: an rma_write carries its data straight
// from the application's buffers; a read request and the atomics carry their
// operands. A request then waits on its connection for its answer (ack,
// error, rma_read_resp, atomic_resp; matched by msg_id), and only then
// completes: delivery complete whatever level was asked, with the target's
// error when it refused. Injects (no completion) ask for no answer.
//
// Target: the frame reader has checked the frame's shape; here every target
// range is checked against the registrations (util::mr_map) before any byte
// is placed. A written payload is received straight into the registered
// memory; a read is answered from it without a copy; an atomic's operands
// are staged in the connection (at most atomic_max_bytes each) and applied
// by util::atomic_apply, the same engine every provider's atomics use.
// A refused request is answered with an error frame; the connection stays.
#include "core/log.hpp"
#include "prov/tcp/tcp.hpp"
#include "util/atomic.hpp"
#include "util/fence.hpp"
#include "util/mr.hpp"

#include <algorithm>
#include <cstring>
#include <new>

namespace weft::tcp {

namespace {

const util::rma_limits limits = {max_iov, proto::max_rma_iov, max_msg_size, inject_size,
                                 atomic_max_bytes, true};

// Responses beyond the transmit pool, per endpoint, before the endpoint stops
// reading new requests from its peers (a peer that never reads its answers
// cannot make us allocate without bound).
constexpr size_t heap_response_cap = 4096;

util::atomic_kind kind_of(proto::op op) noexcept {
  return op == proto::op::atomic_write   ? util::atomic_kind::base
         : op == proto::op::atomic_fetch ? util::atomic_kind::fetch
                                         : util::atomic_kind::compare;
}

}  // namespace

// ---- initiator --------------------------------------------------------------------

template <class Lock, bool Rdm>
conn* endpoint::tx_conn(fi_addr_t dest, int* err) noexcept {
  if constexpr (Rdm) {
    return conn_to<Lock>(dest, err);
  } else {
    if (!msg_conn_ || msg_conn_->state != conn_state::connected || shutdown_) {
      *err = to_fi(shutdown_ ? errc::notconn : errc::opbadstate);
      return nullptr;
    }
    return msg_conn_;
  }
}

template <class Lock>
void endpoint::post_request(conn& c, tx_entry* t, uint64_t flags) noexcept {
  const bool idle = c.state == conn_state::connected && c.tx_idle();
  c.push(t);
  // Requests batch only when the application says more follow: a read or
  // fetch waits for its answer, so holding one unasked would add latency.
  const bool inject = flags & FI_INJECT;
  if (write_now(c, idle, flags & FI_MORE, false, t->left, static_cast<uint32_t>(t->left))) {
    flush<Lock>(c);
    if (c.state == conn_state::closed || c.tx_empty()) return;
  }
  // FI_INJECT (fi_inject_*, or the flag with a completion): the caller may
  // reuse its buffers at once; a frame still queued keeps its own copy.
  if (inject && !c.tx_empty()) {
    // Still queued (this entry is the tail): keep the payload in the entry.
    size_t off = 0;
    unsigned first = std::max<unsigned>(t->first, 1);
    for (unsigned i = first; i < t->count; ++i) {
      std::memcpy(t->inject + off, t->iov[i].iov_base, t->iov[i].iov_len);
      off += t->iov[i].iov_len;
    }
    t->iov[1] = {t->inject, off};
    t->count = 2;
    if (t->first > 1) t->first = 1;
  }
}

template <class P>
ssize_t endpoint::post_rma(const util::rma_request& r) noexcept {
  using Lock = typename P::lock;
  auto* prov = &provider();
  uint64_t total = 0;
  if (errc e = util::check_rma(prov, r, limits, &total); e != errc::ok) return to_fi(e);
  if (total > max_msg_) {
    WEFT_WARN(prov, FI_LOG_EP_DATA, "RMA of %llu bytes exceeds max_msg_size %zu",
              static_cast<unsigned long long>(total), max_msg_);
    return to_fi(errc::msgsize);
  }
  util::cq* cq = bound_.tx_cq.get();
  const bool silent = r.flags & util::op_no_completion;
  const bool completion = cq && !silent && (!bound_.tx_selective || (r.flags & FI_COMPLETION));
  frame f{};
  f.op = r.write ? proto::op::rma_write : proto::op::rma_read_req;
  f.flags = static_cast<uint16_t>((r.write && !silent ? proto::flag_ack : 0) |
                                  ((r.flags & FI_REMOTE_CQ_DATA) ? proto::flag_cq_data : 0));
  f.payload_len = r.write ? static_cast<uint32_t>(total) : 0;
  f.cq_data = (r.flags & FI_REMOTE_CQ_DATA) ? r.data : 0;
  f.iov_count = static_cast<uint8_t>(r.rma_count);
  for (size_t i = 0; i < r.rma_count; ++i) f.iov[i] = {r.rma[i].addr, r.rma[i].len, r.rma[i].key};
  f.rma_len = total;
  if (frame_error fe = validate(f, limits_); fe != frame_error::none) {
    WEFT_WARN(prov, FI_LOG_EP_DATA, "RMA request refused: %s", to_string(fe));
    return to_fi(errc::inval);
  }

  [[maybe_unused]] auto g = guard<Lock>();
  if (r.flags & FI_FENCE) [[unlikely]]
    if (errc e = util::fence_gate(prov, r.write ? "fi_writemsg" : "fi_readmsg", caps_,
                                  txp_.all_free());
        e != errc::ok)
      return to_fi(e);
  int err = 0;
  conn* c = tx_conn<Lock, P::rdm>(r.addr, &err);
  if (!c) return err;
  tx_entry* t = txp_.take();
  if (!t) return to_fi(errc::again);
  f.msg_id = silent ? 0 : c->next_id++;
  size_t hl = build_header(f, {t->hdr, sizeof t->hdr});
  t->kind = silent ? tx_entry::send : tx_entry::request;
  t->heap = false;
  t->context = r.context;
  t->cq_flags = FI_RMA | (r.write ? FI_WRITE : FI_READ);
  t->complete = completion;
  t->report = !silent;
  t->quiet = r.flags & util::op_quiet;
  t->msg_id = f.msg_id;
  t->iov[0] = {t->hdr, hl};
  t->count = 1;
  t->dst_count = 0;
  t->dst_len = 0;
  if (r.write) {
    std::copy_n(r.iov, r.count, t->iov + 1);
    t->count = static_cast<uint8_t>(1 + r.count);
  } else {
    std::copy_n(r.iov, r.count, t->dst);
    t->dst_count = static_cast<uint8_t>(r.count);
    t->dst_len = total;
  }
  t->first = 0;
  t->left = hl + f.payload_len;
  post_request<Lock>(*c, t, r.flags);
  return 0;
}

template <class P>
ssize_t endpoint::post_atomic(const util::atomic_request& r) noexcept {
  using Lock = typename P::lock;
  auto* prov = &provider();
  size_t count = 0;
  if (errc e = util::check_atomic(prov, r, limits, &count); e != errc::ok) return to_fi(e);
  const size_t size = util::atomic_type_size(r.datatype);
  const size_t operand = r.op == FI_ATOMIC_READ ? 0 : count * size;
  const bool fetch = r.kind != util::atomic_kind::base;
  util::cq* cq = bound_.tx_cq.get();
  const bool silent = r.flags & util::op_no_completion;
  const bool completion = cq && !silent && (!bound_.tx_selective || (r.flags & FI_COMPLETION));
  frame f{};
  f.op = r.kind == util::atomic_kind::base    ? proto::op::atomic_write
         : r.kind == util::atomic_kind::fetch ? proto::op::atomic_fetch
                                              : proto::op::atomic_compare;
  f.flags = static_cast<uint16_t>((!fetch && !silent ? proto::flag_ack : 0) |
                                  ((r.flags & FI_REMOTE_CQ_DATA) ? proto::flag_cq_data : 0));
  f.cq_data = (r.flags & FI_REMOTE_CQ_DATA) ? r.data : 0;
  f.datatype = static_cast<uint8_t>(r.datatype);
  f.atomic_op = static_cast<uint8_t>(r.op);
  f.atomic_count = static_cast<uint32_t>(count);
  f.iov_count = static_cast<uint8_t>(r.rma_count);
  for (size_t i = 0; i < r.rma_count; ++i)
    f.iov[i] = {r.rma[i].addr, r.rma[i].count * size, r.rma[i].key};
  f.rma_len = count * size;
  f.payload_len = static_cast<uint32_t>(operand * (r.kind == util::atomic_kind::compare ? 2 : 1));
  if (frame_error fe = validate(f, limits_); fe != frame_error::none) {
    // e.g. a target address that is not a multiple of the element size.
    WEFT_WARN(prov, FI_LOG_EP_DATA, "atomic request refused: %s", to_string(fe));
    return to_fi(errc::inval);
  }

  [[maybe_unused]] auto g = guard<Lock>();
  if (r.flags & FI_FENCE) [[unlikely]]
    if (errc e = util::fence_gate(prov, "fi_atomicmsg", caps_, txp_.all_free()); e != errc::ok)
      return to_fi(e);
  int err = 0;
  conn* c = tx_conn<Lock, P::rdm>(r.addr, &err);
  if (!c) return err;
  tx_entry* t = txp_.take();
  if (!t) return to_fi(errc::again);
  f.msg_id = silent ? 0 : c->next_id++;
  size_t hl = build_header(f, {t->hdr, sizeof t->hdr});
  t->kind = silent ? tx_entry::send : tx_entry::request;
  t->heap = false;
  t->context = r.context;
  t->cq_flags = FI_ATOMIC | (fetch ? FI_READ : FI_WRITE);
  t->complete = completion;
  t->report = !silent;
  t->quiet = r.flags & util::op_quiet;
  t->msg_id = f.msg_id;
  t->iov[0] = {t->hdr, hl};
  t->count = 1;
  if (operand)
    for (size_t i = 0; i < r.src_count; ++i)
      t->iov[t->count++] = {r.src[i].addr, r.src[i].count * size};
  if (r.kind == util::atomic_kind::compare)
    for (size_t i = 0; i < r.cmp_count; ++i)
      t->iov[t->count++] = {r.cmp[i].addr, r.cmp[i].count * size};
  t->dst_count = 0;
  t->dst_len = fetch ? count * size : 0;
  if (fetch) {
    for (size_t i = 0; i < r.res_count; ++i) t->dst[i] = {r.res[i].addr, r.res[i].count * size};
    t->dst_count = static_cast<uint8_t>(r.res_count);
  }
  t->first = 0;
  t->left = hl + f.payload_len;
  post_request<Lock>(*c, t, r.flags);
  return 0;
}

// ---- completions of requests -------------------------------------------------------

template <class Lock>
void endpoint::finish_request(tx_entry* t, int err) noexcept {
  if (err)
    fail_tx<Lock>(t, err);
  else
    complete_tx<Lock>(t);
}

template <class Lock>
void endpoint::fail_awaiting(conn& c, int err) noexcept {
  if (tx_entry* t = std::exchange(c.rx_answer, nullptr)) fail_tx<Lock>(t, err);
  while (tx_entry* t = c.awaiting) {
    c.awaiting = t->next;
    fail_tx<Lock>(t, err);
  }
  c.awaiting_tail = nullptr;
}

tx_entry* endpoint::take_response() noexcept {
  if (tx_entry* t = txp_.take()) {
    t->heap = false;
    return t;
  }
  auto* t = new (std::nothrow) tx_entry{};
  if (!t) return nullptr;
  t->heap = true;
  ++heap_responses_;
  return t;
}

void endpoint::put_tx(tx_entry* t) noexcept {
  if (t->heap) {
    --heap_responses_;
    delete t;
    return;
  }
  txp_.put(t);
}

// ---- target -----------------------------------------------------------------------

template <class Lock>
bool endpoint::answer(conn& c, proto::op op, uint32_t id, uint8_t req_op, int err,
                      const iovec* iov, size_t count, bool copy) noexcept {
  tx_entry* t = take_response();
  if (!t) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "tcp peer %s: out of memory for an answer",
              describe(c.peer).c_str());
    fail_conn<Lock>(c, FI_ENOMEM);
    return false;
  }
  frame f{};
  f.op = err ? proto::op::error : op;
  f.msg_id = id;
  f.status = err;
  f.req_op = req_op;
  size_t payload = 0;
  t->count = 1;
  if (!err && copy) {
    for (size_t i = 0; i < count; ++i) {
      std::memcpy(t->inject + payload, iov[i].iov_base, iov[i].iov_len);  // <= atomic_max_bytes
      payload += iov[i].iov_len;
    }
    if (payload) t->iov[t->count++] = {t->inject, payload};
  } else if (!err) {
    for (size_t i = 0; i < count; ++i)
      if (iov[i].iov_len) t->iov[t->count++] = iov[i], payload += iov[i].iov_len;
  }
  f.payload_len = static_cast<uint32_t>(payload);
  size_t hl = build_header(f, {t->hdr, sizeof t->hdr});
  t->kind = tx_entry::response;
  t->context = nullptr;
  t->cq_flags = 0;
  t->complete = t->report = t->quiet = false;
  t->iov[0] = {t->hdr, hl};
  t->first = 0;
  t->left = hl + payload;
  bool now = c.state == conn_state::connected && c.tx_idle();
  c.push(t);
  if (now) flush<Lock>(c);
  return c.readable();
}

template <class Lock>
bool endpoint::on_rma_header(conn& c) noexcept {
  const frame& f = c.reader.current();
  if (c.state != conn_state::connected) {
    protocol_error<Lock>(c, "an RMA frame before the connection was established");
    return false;
  }
  c.rx_rma = true;
  c.rx_err = 0;
  c.rx_dst_n = c.rx_dst_i = 0;
  auto& mrs = domain_->mrs();
  switch (f.op) {
    case proto::op::rma_write: {
      size_t n = 0;
      for (unsigned i = 0; i < f.iov_count && !c.rx_err; ++i) {
        size_t k = std::size(c.rx_dst) - n;
        errc e = mrs.verify_iov(f.iov[i].key, f.iov[i].addr, f.iov[i].len, FI_REMOTE_WRITE,
                                c.rx_dst + n, &k);
        if (e != errc::ok) c.rx_err = static_cast<int>(e == errc::toosmall ? errc::inval : e);
        n += k;
      }
      c.rx_dst_n = c.rx_err ? 0 : static_cast<uint8_t>(n);
      break;
    }
    case proto::op::atomic_write:
    case proto::op::atomic_fetch:
    case proto::op::atomic_compare: {
      unsigned size = proto::atomic_type_size(f.datatype);
      if (!util::atomic_supported(f.atomic_op, f.datatype, kind_of(f.op)))
        c.rx_err = FI_EOPNOTSUPP;
      else if (uint64_t{f.atomic_count} * size > tcp::atomic_max_bytes)
        c.rx_err = FI_EMSGSIZE;
      if (!c.rx_err && f.payload_len) {
        c.rx_dst[0] = {c.atomic_in, f.payload_len};  // <= 2 * atomic_max_bytes
        c.rx_dst_n = 1;
      }
      break;
    }
    case proto::op::rma_read_resp:
    case proto::op::atomic_resp: {
      tx_entry* t = c.answered(f.msg_id);
      if (!t || t->dst_len != f.payload_len ||
          (t->cq_flags & FI_ATOMIC) != (f.op == proto::op::atomic_resp ? FI_ATOMIC : 0)) {
        if (t) fail_tx<Lock>(t, FI_EIO);
        protocol_error<Lock>(c, "an answer to no request of ours");
        return false;
      }
      c.rx_answer = t;
      std::copy_n(t->dst, t->dst_count, c.rx_dst);
      c.rx_dst_n = t->dst_count;
      break;
    }
    default:  // rma_read_req, ack, error: no payload
      break;
  }
  if (c.rx_err)
    WEFT_WARN(&provider(), FI_LOG_EP_DATA,
              "tcp peer %s: refused %s (key 0x%llx, address 0x%llx, %llu bytes): %s",
              describe(c.peer).c_str(),
              f.op == proto::op::rma_write ? "an RMA write" : "an atomic",
              static_cast<unsigned long long>(f.iov[0].key),
              static_cast<unsigned long long>(f.iov[0].addr),
              static_cast<unsigned long long>(f.iov[0].len), fi_strerror(c.rx_err));
  return true;
}

// The payload of an RMA frame goes to the next of c.rx_dst (dropped past
// them or after a refusal).
void rma_next_target(conn& c) noexcept {
  frame_reader& r = c.reader;
  size_t left = r.payload_left();
  while (c.rx_dst_i < c.rx_dst_n) {
    const iovec& v = c.rx_dst[c.rx_dst_i++];
    if (!v.iov_len) continue;
    r.set_target(v.iov_base, std::min(v.iov_len, left));
    return;
  }
  r.discard_rest();
}

template <class Lock>
bool endpoint::on_rma_done(conn& c) noexcept {
  const frame& f = c.reader.current();
  c.rx_rma = false;
  auto* prov = &provider();
  auto& mrs = domain_->mrs();
  const uint8_t req = static_cast<uint8_t>(f.op);
  switch (f.op) {
    case proto::op::rma_write: {
      if (!c.rx_err) {
        remote_event<Lock>(FI_RMA | FI_REMOTE_WRITE, f.flags, f.cq_data, source(c), f.rma_len);
        mrs.count_remote(f.iov_count, [&](size_t i) { return f.iov[i].key; }, FI_REMOTE_WRITE);
      }
      if (!(f.flags & proto::flag_ack)) return true;  // an inject: no answer
      return answer<Lock>(c, proto::op::ack, f.msg_id, req, c.rx_err, nullptr, 0);
    }
    case proto::op::rma_read_req: {
      iovec src[tx_max_iov - 1];
      size_t n = 0;
      int err = 0;
      for (unsigned i = 0; i < f.iov_count && !err; ++i) {
        size_t k = std::size(src) - n;
        errc e = mrs.verify_iov(f.iov[i].key, f.iov[i].addr, f.iov[i].len, FI_REMOTE_READ,
                                src + n, &k);
        if (e != errc::ok) err = static_cast<int>(e == errc::toosmall ? errc::inval : e);
        n += k;
      }
      if (err)
        WEFT_WARN(prov, FI_LOG_EP_DATA,
                  "tcp peer %s: refused an RMA read (key 0x%llx, address 0x%llx, %llu bytes): %s",
                  describe(c.peer).c_str(), static_cast<unsigned long long>(f.iov[0].key),
                  static_cast<unsigned long long>(f.iov[0].addr),
                  static_cast<unsigned long long>(f.iov[0].len), fi_strerror(err));
      else {
        remote_event<Lock>(FI_RMA | FI_REMOTE_READ, 0, 0, source(c), f.rma_len);
        mrs.count_remote(f.iov_count, [&](size_t i) { return f.iov[i].key; }, FI_REMOTE_READ);
      }
      // Answered straight from the registered memory, without a copy.
      return answer<Lock>(c, proto::op::rma_read_resp, f.msg_id, req, err, src, n);
    }
    case proto::op::atomic_write:
    case proto::op::atomic_fetch:
    case proto::op::atomic_compare: {
      const auto kind = kind_of(f.op);
      const unsigned size = proto::atomic_type_size(f.datatype);
      const bool writes = f.atomic_op != FI_ATOMIC_READ;
      const bool fetches = kind != util::atomic_kind::base;
      int err = c.rx_err;
      void* local[proto::max_rma_iov];
      for (unsigned i = 0; i < f.iov_count && !err; ++i) {
        errc e = mrs.verify(f.iov[i].key, f.iov[i].addr, f.iov[i].len,
                            (writes ? FI_REMOTE_WRITE : 0) | (fetches ? FI_REMOTE_READ : 0),
                            &local[i]);
        if (e != errc::ok) {
          err = static_cast<int>(e);
          WEFT_WARN(prov, FI_LOG_EP_DATA,
                    "tcp peer %s: refused an atomic (key 0x%llx, address 0x%llx, %llu bytes): %s",
                    describe(c.peer).c_str(), static_cast<unsigned long long>(f.iov[i].key),
                    static_cast<unsigned long long>(f.iov[i].addr),
                    static_cast<unsigned long long>(f.iov[i].len), fi_strerror(err));
        }
      }
      // The prior values are written where the answer is sent from.
      alignas(16) std::byte prior[tcp::atomic_max_bytes];
      const size_t bytes = err ? 0 : size_t{f.atomic_count} * size;
      const std::byte* operand = c.atomic_in;
      const std::byte* compare = c.atomic_in + (writes ? bytes : 0);
      size_t at = 0;
      for (unsigned i = 0; i < f.iov_count && !err; ++i) {
        errc e = util::atomic_apply(f.atomic_op, f.datatype, kind, local[i], operand + at,
                                    compare + at, prior + at, f.iov[i].len / size);
        if (e != errc::ok) err = static_cast<int>(e);
        at += f.iov[i].len;
      }
      // fi_endpoint(3) counts by family: base atomics are remote writes,
      // fetch and compare atomics (a fetch-add included) remote reads.
      if (!err) {
        remote_event<Lock>(FI_ATOMIC | (fetches ? FI_REMOTE_READ : FI_REMOTE_WRITE), f.flags,
                           f.cq_data, source(c), bytes);
        mrs.count_remote(f.iov_count, [&](size_t i) { return f.iov[i].key; },
                         util::region_events(kind, f.atomic_op));
      }
      if (!fetches) {
        if (!(f.flags & proto::flag_ack)) return true;
        return answer<Lock>(c, proto::op::ack, f.msg_id, req, err, nullptr, 0);
      }
      // The prior values travel in the answer's own entry (copied there).
      iovec pv{prior, bytes};
      return answer<Lock>(c, proto::op::atomic_resp, f.msg_id, req, err, &pv, 1, true);
    }
    case proto::op::rma_read_resp:
    case proto::op::atomic_resp: {
      tx_entry* t = std::exchange(c.rx_answer, nullptr);
      if (t) finish_request<Lock>(t, 0);
      return true;
    }
    case proto::op::ack:
    case proto::op::error: {
      tx_entry* t = c.answered(f.msg_id);
      if (!t) {
        WEFT_WARN(prov, FI_LOG_EP_DATA, "tcp peer %s: an answer (id %u) to no request of ours",
                  describe(c.peer).c_str(), f.msg_id);
        return true;
      }
      int err = 0;
      if (f.op == proto::op::error) err = f.status > 0 && f.status < 4096 ? f.status : FI_EIO;
      finish_request<Lock>(t, err);
      return true;
    }
    default:
      return true;
  }
}

template <class Lock, bool Rdm>
const fi_ops_rma* endpoint::rma_table() noexcept {
  return &util::rma_ops<endpoint, ep_policy<Lock, Rdm>>::rma_table;
}
template <class Lock, bool Rdm>
const fi_ops_atomic* endpoint::atomic_table() noexcept {
  return &util::rma_ops<endpoint, ep_policy<Lock, Rdm>>::atomic_table;
}

#define WEFT_TCP_INSTANTIATE(L)                                                              \
  template const fi_ops_rma* endpoint::rma_table<L, true>() noexcept;                        \
  template const fi_ops_rma* endpoint::rma_table<L, false>() noexcept;                       \
  template const fi_ops_atomic* endpoint::atomic_table<L, true>() noexcept;                  \
  template const fi_ops_atomic* endpoint::atomic_table<L, false>() noexcept;                 \
  template void endpoint::fail_awaiting<L>(conn&, int) noexcept;                             \
  template bool endpoint::on_rma_header<L>(conn&) noexcept;                                  \
  template bool endpoint::on_rma_done<L>(conn&) noexcept;                                    \
  template bool endpoint::answer<L>(conn&, proto::op, uint32_t, uint8_t, int, const iovec*,  \
                                    size_t, bool) noexcept;

WEFT_TCP_INSTANTIATE(util::null_lock)
WEFT_TCP_INSTANTIATE(util::mutex_lock)

}  // namespace weft::tcp
