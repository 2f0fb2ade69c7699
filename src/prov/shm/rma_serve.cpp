// SPDX-License-Identifier: MIT
// weft — shm RMA and atomics, the target: requests arrive in the rings of our
// region; every named range is checked against the domain's registrations
// (util::mr_map) before a byte moves, then the data moves (in the ring, by
// process_vm_readv/writev, or through bounce segments) and the initiator is
// answered. Atomics execute through util::atomic_apply. Protocol:
// proto.hpp; the initiator's side: rma.cpp.
#include "core/log.hpp"
#include "prov/shm/iov.hpp"
#include "prov/shm/shm.hpp"
#include "util/atomic.hpp"
#include "util/mr.hpp"

namespace weft::shm {

namespace {

constexpr size_t max_local = proto::rma_max_targets * util::mr_iov_limit;

uint64_t ack_code(errc e) noexcept { return static_cast<uint64_t>(static_cast<int>(e)); }

// An RMA request as it arrived, copied out of the ring and checked for shape.
struct rma_req {
  proto::rma_payload p{};
  proto::rma_target tg[proto::rma_max_targets]{};
  proto::rts_iov local[max_iov]{};
  size_t data_off = 0;  // where inline data starts in the message
};

bool parse_rma(const msg_view& v, bool write, rma_req& q) noexcept {
  if (v.size < sizeof q.p) return false;
  v.copy_to(&q.p, sizeof q.p);
  const auto& p = q.p;
  if (!p.count || p.count > proto::rma_max_targets || p.lcount > max_iov ||
      p.mode > proto::rma_bounce || p.total > max_msg)
    return false;
  if ((p.mode == proto::rma_cma) != (p.lcount != 0)) return false;
  size_t off = sizeof p;
  v.copy_to(q.tg, p.count * sizeof(proto::rma_target), off);
  off += p.count * sizeof(proto::rma_target);
  v.copy_to(q.local, p.lcount * sizeof(proto::rts_iov), off);
  off += p.lcount * sizeof(proto::rts_iov);
  q.data_off = off;
  uint64_t expect = off + (write && p.mode == proto::rma_inline ? p.total : 0);
  if (v.size != expect) return false;
  if (p.mode == proto::rma_inline && p.total > inline_max) return false;
  uint64_t sum = 0;
  for (uint32_t i = 0; i < p.count; ++i) {
    if (q.tg[i].len > max_msg - sum) return false;
    sum += q.tg[i].len;
  }
  if (sum != p.total) return false;
  sum = 0;
  for (uint32_t i = 0; i < p.lcount; ++i) {
    if (q.local[i].len > max_msg - sum) return false;
    sum += q.local[i].len;
  }
  return !p.lcount || sum == p.total;
}

bool refused_by_kernel(int rc) noexcept { return rc == EPERM || rc == EACCES || rc == ENOSYS; }

int cma_error(int rc) noexcept {
  switch (rc) {
    case EFAULT: return FI_EFAULT;
    case ENOMEM: return FI_ENOMEM;
    case ESRCH: return FI_ECONNRESET;
    default: return FI_EIO;
  }
}

}  // namespace

// ---- target ---------------------------------------------------------------------------

namespace {

// The local memory behind the request's target ranges, every range checked.
errc resolve(util::mr_map& map, const proto::rma_target* tg, uint32_t n, uint64_t access,
             iovec* out, size_t& count) noexcept {
  count = 0;
  for (uint32_t i = 0; i < n; ++i) {
    size_t k = max_local - count;
    if (errc e = map.verify_iov(tg[i].key, tg[i].addr, tg[i].len, access, out + count, &k);
        e != errc::ok)
      return e == errc::toosmall ? errc::inval : e;
    count += k;
  }
  return errc::ok;
}

void log_refusal(const char* what, uint32_t pid, const proto::rma_target* tg, uint32_t n,
                 errc e) noexcept {
  WEFT_WARN(&provider(), FI_LOG_EP_DATA,
            "shm: %s from pid %u refused (%s): key 0x%llx address 0x%llx length %llu%s", what, pid,
            fi_strerror(static_cast<int>(e)), static_cast<unsigned long long>(tg[0].key),
            static_cast<unsigned long long>(tg[0].addr), static_cast<unsigned long long>(tg[0].len),
            n > 1 ? " (first of several ranges)" : "");
}

}  // namespace

template <class Lock>
bool endpoint::handle_rma_write(inbound& in, const msg_view& v) noexcept {
  rma_req q;
  const uint64_t token = v.fields.tag, data = v.fields.data;
  const uint16_t rflags = v.fields.flags;
  const bool reply = !(rflags & proto::flag_no_reply);
  if (!parse_rma(v, true, q)) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "shm sender pid %u: malformed RMA write", in.id.pid);
    in.cons.release(v);
    return true;
  }
  errc ignored;
  iovec dst[max_local];
  size_t nd = 0;
  errc e = resolve(domain_->mrs(), q.tg, q.p.count, FI_REMOTE_WRITE, dst, nd);
  if (e != errc::ok) {
    log_refusal("RMA write", in.id.pid, q.tg, q.p.count, e);
    // Data on its way through the bounce segments is drained first; the
    // answer follows it.
    if (q.p.mode != proto::rma_bounce) {
      in.cons.release(v);
      if (reply) send_ack<Lock>(conn_to(in.id, ignored), token, ack_code(e));
      return true;
    }
    nd = 0;
  }
  const fi_addr_t src = (rflags & proto::flag_data) ? source_of(in) : FI_ADDR_NOTAVAIL;
  if (q.p.mode == proto::rma_inline) {
    size_t off = q.data_off;
    for (size_t i = 0; i < nd; ++i) off += v.copy_to(dst[i].iov_base, dst[i].iov_len, off);
    in.cons.release(v);
    remote_event<Lock>(FI_RMA | FI_REMOTE_WRITE, rflags, data, src, q.p.total);
    count_region(q.tg, q.p.count, FI_REMOTE_WRITE);
    if (reply) send_ack<Lock>(conn_to(in.id, ignored), token, proto::ack_done);
    return true;
  }
  in.cons.release(v);
  int rc = 0;
  if (q.p.mode == proto::rma_cma) {
    rc = cma_copy(static_cast<pid_t>(in.id.pid), false, q.local, q.p.lcount, dst, nd, q.p.total);
    if (rc == 0) {
      remote_event<Lock>(FI_RMA | FI_REMOTE_WRITE, rflags, data, src, q.p.total);
      count_region(q.tg, q.p.count, FI_REMOTE_WRITE);
      send_ack<Lock>(conn_to(in.id, ignored), token, proto::ack_done);
      return true;
    }
    if (rc == ESRCH) {  // the initiator exited: no one to answer
      in.dead = true;
      pending_.set(in.ring);
      return true;
    }
    if (!refused_by_kernel(rc)) {
      WEFT_WARN(&provider(), FI_LOG_EP_DATA, "shm: RMA write from pid %u: %s", in.id.pid,
                std::strerror(rc));
      send_ack<Lock>(conn_to(in.id, ignored), token, static_cast<uint64_t>(cma_error(rc)));
      return true;
    }
    WEFT_INFO(&provider(), FI_LOG_EP_DATA,
              "process_vm_readv from pid %u refused (%s): bounce buffers for its RMA", in.id.pid,
              std::strerror(rc));
  }
  // Through bounce segments: now (rma_bounce) or after our answer (refused).
  auto* x = new (std::nothrow) rx_xfer;
  bool listed = false;
  if (x) {
    try {
      in.xfers.push_back(x);
      listed = true;
    } catch (...) {
    }
  }
  if (!listed) {
    delete x;
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "out of memory for an RMA write from pid %u",
              in.id.pid);
    // Already under way (rma_bounce), the data would have nowhere to go;
    // the initiator learns from the answer, and its chunks are dropped when
    // its ring is reclaimed.
    send_ack<Lock>(conn_to(in.id, ignored), token, FI_ENOMEM);
    return true;
  }
  x->kind = rec_kind::bounce;
  x->rma = rx_xfer::write_target;
  x->in = &in;
  x->token = token;
  x->total = q.p.total;
  x->matched = true;
  x->req_flags = rflags;
  x->cq_data = data;
  x->id = in.id;
  x->src = src;
  x->dst_count = nd;
  std::copy_n(dst, nd, x->dst);
  x->key_count = q.p.count;
  for (uint32_t i = 0; i < q.p.count; ++i) x->keys[i] = q.tg[i].key;
  if (e != errc::ok) x->err = static_cast<int>(e);
  watch(in);
  if (q.p.mode == proto::rma_cma) send_ack<Lock>(conn_to(in.id, ignored), token, proto::ack_use_bounce);
  if (!x->total) {
    x->done = true;
    finish_xfer<Lock>(x);
  } else {
    poll_bounce<Lock>(in);
  }
  return true;
}

template <class Lock>
bool endpoint::handle_rma_read(inbound& in, const msg_view& v) noexcept {
  rma_req q;
  const uint64_t token = v.fields.tag;
  if (!parse_rma(v, false, q) || (v.fields.flags & (proto::flag_no_reply | proto::flag_data))) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "shm sender pid %u: malformed RMA read", in.id.pid);
    in.cons.release(v);
    return true;
  }
  errc err;
  conn* back = conn_to(in.id, err);
  if (!back) {  // its region is gone: it left
    in.cons.release(v);
    return true;
  }
  iovec src[max_local];
  size_t ns = 0;
  errc e = resolve(domain_->mrs(), q.tg, q.p.count, FI_REMOTE_READ, src, ns);
  if (e != errc::ok) {
    log_refusal("RMA read", in.id.pid, q.tg, q.p.count, e);
    in.cons.release(v);
    send_reply(back, proto::op_resp, token, ack_code(e), nullptr, 0);
    return true;
  }
  if (q.p.mode == proto::rma_inline) {
    in.cons.release(v);
    send_reply(back, proto::op_resp, token, proto::ack_done, src, ns);
    remote_event<Lock>(FI_RMA | FI_REMOTE_READ, 0, 0, FI_ADDR_NOTAVAIL, 0);
    count_region(q.tg, q.p.count, FI_REMOTE_READ);
    return true;
  }
  if (q.p.mode == proto::rma_cma) {
    int rc = cma_copy(static_cast<pid_t>(in.id.pid), true, q.local, q.p.lcount, src, ns,
                      q.p.total);
    if (rc == 0 || !refused_by_kernel(rc)) {
      in.cons.release(v);
      if (rc == ESRCH) {
        in.dead = true;
        pending_.set(in.ring);
        return true;
      }
      if (rc)
        WEFT_WARN(&provider(), FI_LOG_EP_DATA, "shm: RMA read from pid %u: %s", in.id.pid,
                  std::strerror(rc));
      else {
        remote_event<Lock>(FI_RMA | FI_REMOTE_READ, 0, 0, FI_ADDR_NOTAVAIL, 0);
        count_region(q.tg, q.p.count, FI_REMOTE_READ);
      }
      send_reply(back, proto::op_ack, token,
                 rc ? static_cast<uint64_t>(cma_error(rc)) : proto::ack_done, nullptr, 0);
      return true;
    }
    WEFT_INFO(&provider(), FI_LOG_EP_DATA,
              "process_vm_writev to pid %u refused (%s): bounce buffers for its reads",
              in.id.pid, std::strerror(rc));
  }
  // Stream the data back through the bounce segments of our ring in the
  // initiator's region.
  if (ns > max_iov) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA,
              "shm: RMA read from pid %u spans %zu registered ranges; without single copy at "
              "most %zu",
              in.id.pid, ns, max_iov);
    in.cons.release(v);
    send_reply(back, proto::op_resp, token, FI_EOPNOTSUPP, nullptr, 0);
    return true;
  }
  tx_entry* t = take_tx();
  if (!t) return false;  // every entry busy: the request waits in the ring
  in.cons.release(v);
  t->kind = tx_entry::internal;
  t->context = nullptr;
  t->cq_flags = 0;
  t->c = back;
  t->count = static_cast<uint32_t>(ns);
  std::copy_n(src, ns, t->iov);
  t->completion = false;
  t->quiet = false;
  t->total = q.p.total;
  t->sent = t->consumed = 0;
  t->state = tx_entry::streaming;
  ++back->outstanding;
  proto::rts_payload head{t->token, q.p.total, 0, 0};
  iovec hv{&head, sizeof head};
  send_reply(back, proto::op_read_bounce, token, 0, &hv, 1);
  watch(*back);
  enqueue_bounce(*back, t);
  pump_bounce<Lock>(*back);
  remote_event<Lock>(FI_RMA | FI_REMOTE_READ, 0, 0, FI_ADDR_NOTAVAIL, 0);
  count_region(q.tg, q.p.count, FI_REMOTE_READ);
  return true;
}

template <class Lock>
bool endpoint::handle_atomic(inbound& in, const msg_view& v) noexcept {
  const uint64_t token = v.fields.tag, data = v.fields.data;
  const uint16_t rflags = v.fields.flags;
  const bool reply = !(rflags & proto::flag_no_reply);
  proto::atomic_payload p{};
  proto::rma_target tg[proto::rma_max_targets]{};
  size_t size = 0, operand = 0, compare = 0, off = sizeof p;
  bool ok = v.size >= sizeof p;
  if (ok) {
    v.copy_to(&p, sizeof p);
    ok = p.count && p.count <= proto::rma_max_targets && p.kind <= 2 &&
         util::atomic_supported(static_cast<int>(p.op), static_cast<int>(p.datatype),
                                static_cast<util::atomic_kind>(p.kind));
  }
  const auto kind = static_cast<util::atomic_kind>(p.kind);
  if (ok) {
    size = util::atomic_type_size(static_cast<int>(p.datatype));
    ok = size && p.elements && p.elements <= proto::atomic_max_bytes / size;
  }
  if (ok) {
    v.copy_to(tg, p.count * sizeof tg[0], off);
    off += p.count * sizeof tg[0];
    uint64_t sum = 0;
    for (uint32_t i = 0; i < p.count && ok; ++i) {
      ok = tg[i].len <= p.elements - sum;
      sum += tg[i].len;
    }
    operand = p.op == FI_ATOMIC_READ ? 0 : p.elements * size;
    compare = kind == util::atomic_kind::compare ? p.elements * size : 0;
    ok = ok && sum == p.elements && v.size == off + operand + compare;
    // Only fetch and compare atomics answer with values; a base one that asks
    // for no answer may not fetch either.
    ok = ok && (reply || kind == util::atomic_kind::base);
  }
  if (!ok) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "shm sender pid %u: malformed atomic", in.id.pid);
    in.cons.release(v);
    return true;
  }
  const bool writes = p.op != FI_ATOMIC_READ;
  const bool fetches = kind != util::atomic_kind::base;
  const uint64_t access = (writes ? FI_REMOTE_WRITE : 0) | (fetches ? FI_REMOTE_READ : 0);
  errc ignored;
  // Every range is checked before any is changed.
  void* local[proto::rma_max_targets];
  errc e = errc::ok;
  for (uint32_t i = 0; i < p.count && e == errc::ok; ++i)
    e = domain_->mrs().verify(tg[i].key, tg[i].addr, tg[i].len * size, access, &local[i]);
  if (e != errc::ok) {
    log_refusal("atomic", in.id.pid, tg, p.count, e);
    in.cons.release(v);
    if (reply)
      send_reply(conn_to(in.id, ignored), proto::op_resp, token, ack_code(e), nullptr, 0);
    return true;
  }
  alignas(64) std::byte opnd[proto::atomic_max_bytes];
  alignas(64) std::byte cmp[proto::atomic_max_bytes];
  alignas(64) std::byte prior[proto::atomic_max_bytes];
  v.copy_to(opnd, operand, off);
  v.copy_to(cmp, compare, off + operand);
  const fi_addr_t src = (rflags & proto::flag_data) ? source_of(in) : FI_ADDR_NOTAVAIL;
  in.cons.release(v);
  size_t at = 0;
  for (uint32_t i = 0; i < p.count && e == errc::ok; ++i) {
    e = util::atomic_apply(static_cast<int>(p.op), static_cast<int>(p.datatype), kind, local[i],
                           opnd + at, cmp + at, prior + at, tg[i].len);
    at += tg[i].len * size;
  }
  // fi_endpoint(3) counts by family, not by what the operation did to the
  // memory: base atomics are remote writes, fetch and compare atomics
  // (a fetch-add included) remote reads, as their initiator's FI_READ.
  if (e == errc::ok) {
    remote_event<Lock>(FI_ATOMIC | (fetches ? FI_REMOTE_READ : FI_REMOTE_WRITE), rflags, data, src,
                       at);
    count_region(tg, p.count, util::region_events(kind, static_cast<int>(p.op)));
  }
  if (!reply) return true;
  conn* back = conn_to(in.id, ignored);
  if (e != errc::ok || !fetches) {
    send_reply(back, fetches ? proto::op_resp : proto::op_ack, token,
               e == errc::ok ? proto::ack_done : ack_code(e), nullptr, 0);
  } else {
    iovec pv{prior, p.elements * size};
    send_reply(back, proto::op_resp, token, proto::ack_done, &pv, 1);
  }
  return true;
}

#define WEFT_SHM_INSTANTIATE(L)                                                              \
  template bool endpoint::handle_rma_write<L>(inbound&, const msg_view&) noexcept;           \
  template bool endpoint::handle_rma_read<L>(inbound&, const msg_view&) noexcept;            \
  template bool endpoint::handle_atomic<L>(inbound&, const msg_view&) noexcept;

WEFT_SHM_INSTANTIATE(util::null_lock)
WEFT_SHM_INSTANTIATE(util::mutex_lock)
WEFT_SHM_INSTANTIATE(util::handoff_lock)

}  // namespace weft::shm
