// SPDX-License-Identifier: MIT
// weft — shm RMA and atomics, the initiator (protocol in proto.hpp, version 2;
// the target's side is rma_serve.cpp).
//
// The initiator sends a request through its ring in the target's region; the
// target checks every named range against its registrations (util::mr_map)
// before touching a byte and then moves the data itself: small writes and
// reads travel in the ring, large ones by one process_vm_readv/writev
// between the initiator's buffers and the registered memory, or, where the
// kernel refuses that, through the bounce segments. Atomics execute at the
// target through util::atomic_apply, so every update of a region, from any
// peer, goes through one atomic engine. Each operation completes at the
// initiator when the target has answered: delivery complete, whatever
// completion level was asked, and an error completion when the target
// refused it.
#include "core/log.hpp"
#include "prov/shm/iov.hpp"
#include "prov/shm/shm.hpp"
#include "util/atomic.hpp"
#include "util/fence.hpp"
#include "util/mr.hpp"

namespace weft::shm {

const util::rma_limits endpoint::limits = {max_iov, proto::rma_max_targets, max_msg, inline_max,
                                           proto::atomic_max_bytes, true};

namespace {

// Appends to a reserved ring message.
struct writer {
  const ring_reservation& r;
  size_t off = 0;
  void put(const void* p, size_t n) noexcept {
    if (n) r.write(off, p, n);
    off += n;
  }
};

uint16_t request_flags(uint64_t flags, bool silent) noexcept {
  return static_cast<uint16_t>(((flags & FI_REMOTE_CQ_DATA) ? proto::flag_data : 0) |
                               (silent ? proto::flag_no_reply : 0));
}

}  // namespace

// ---- initiator -------------------------------------------------------------------

template <class Lock>
ssize_t endpoint::post_rma(const util::rma_request& r) noexcept {
  auto* prov = &provider();
  uint64_t total = 0;
  if (errc e = util::check_rma(prov, r, limits, &total); e != errc::ok) return to_fi(e);
  util::cq* cq = bound_.tx_cq.get();
  const bool silent = r.flags & util::op_no_completion;
  const bool completion = cq && !silent && (!bound_.tx_selective || (r.flags & FI_COMPLETION));

  [[maybe_unused]] auto g = guard<Lock>();
  if (r.flags & FI_FENCE) [[unlikely]]
    if (errc e = util::fence_gate(prov, r.write ? "fi_writemsg" : "fi_readmsg", caps_, tx_idle());
        e != errc::ok)
      return to_fi(e);
  errc err;
  conn* c = conn_for(r.addr, err);
  if (!c) return to_fi(err);
  if (c->dead) return to_fi(errc::connreset);
  // An inject is at most inject_size bytes: always inline.
  const uint32_t mode = total <= inline_max ? proto::rma_inline
                        : use_cma(*c)       ? proto::rma_cma
                                            : proto::rma_bounce;
  proto::rma_payload head{total, static_cast<uint32_t>(r.rma_count),
                          mode == proto::rma_cma ? static_cast<uint32_t>(r.count) : 0, mode, 0};
  const bool carry = r.write && mode == proto::rma_inline;
  size_t bytes = sizeof head + r.rma_count * sizeof(proto::rma_target) +
                 head.lcount * sizeof(proto::rts_iov) + (carry ? total : 0);
  tx_entry* t = nullptr;
  if (!silent && !(t = take_tx())) return to_fi(errc::again);
  ring_reservation res;
  if (errc e = c->prod.reserve(bytes, res); e != errc::ok) {
    if (t) put_tx(t);
    return ring_full<Lock>(*c, e);
  }
  writer w{res};
  w.put(&head, sizeof head);
  for (size_t i = 0; i < r.rma_count; ++i) {
    proto::rma_target tg{r.rma[i].addr, r.rma[i].len, r.rma[i].key};
    w.put(&tg, sizeof tg);
  }
  for (size_t i = 0; i < head.lcount; ++i) {
    proto::rts_iov l{reinterpret_cast<uint64_t>(r.iov[i].iov_base), r.iov[i].iov_len};
    w.put(&l, sizeof l);
  }
  if (carry)
    for (size_t i = 0; i < r.count; ++i) w.put(r.iov[i].iov_base, r.iov[i].iov_len);
  c->prod.publish(res, msg_fields{r.write ? proto::op_rma_write : proto::op_rma_read,
                                  request_flags(r.flags, silent), t ? t->token : 0,
                                  (r.flags & FI_REMOTE_CQ_DATA) ? r.data : 0});
  c->full_ns = 0;
  ring(*c);
  if (!t) {
    // fi_inject_write: no completion, but the write counter counts it.
    if (util::cntr* n = bound_.write_cntr.get()) n->inc();
    return 0;
  }
  t->kind = r.write ? tx_entry::write : tx_entry::read;
  t->context = r.context;
  t->cq_flags = FI_RMA | (r.write ? FI_WRITE : FI_READ);
  t->c = c;
  t->count = static_cast<uint32_t>(r.count);
  std::copy_n(r.iov, r.count, t->iov);
  t->completion = completion;
  t->quiet = r.flags & util::op_quiet;
  t->total = total;
  t->sent = t->consumed = 0;
  ++c->outstanding;
  watch(*c);
  if (r.write && mode == proto::rma_bounce) {
    t->state = tx_entry::streaming;
    enqueue_bounce(*c, t);
    pump_bounce<Lock>(*c);
  } else {
    t->state = tx_entry::wait_ack;
  }
  return 0;
}

template <class Lock>
ssize_t endpoint::post_atomic(const util::atomic_request& r) noexcept {
  auto* prov = &provider();
  size_t count = 0;
  if (errc e = util::check_atomic(prov, r, limits, &count); e != errc::ok) return to_fi(e);
  const size_t size = util::atomic_type_size(r.datatype);
  const size_t operand = r.op == FI_ATOMIC_READ ? 0 : count * size;
  const size_t compare = r.kind == util::atomic_kind::compare ? count * size : 0;
  util::cq* cq = bound_.tx_cq.get();
  const bool silent = r.flags & util::op_no_completion;
  const bool completion = cq && !silent && (!bound_.tx_selective || (r.flags & FI_COMPLETION));

  [[maybe_unused]] auto g = guard<Lock>();
  if (r.flags & FI_FENCE) [[unlikely]]
    if (errc e = util::fence_gate(prov, "fi_atomicmsg", caps_, tx_idle()); e != errc::ok)
      return to_fi(e);
  errc err;
  conn* c = conn_for(r.addr, err);
  if (!c) return to_fi(err);
  if (c->dead) return to_fi(errc::connreset);
  proto::atomic_payload head{static_cast<uint32_t>(r.op), static_cast<uint32_t>(r.datatype),
                             static_cast<uint32_t>(r.kind), static_cast<uint32_t>(r.rma_count),
                             count};
  size_t bytes = sizeof head + r.rma_count * sizeof(proto::rma_target) + operand + compare;
  tx_entry* t = nullptr;
  if (!silent && !(t = take_tx())) return to_fi(errc::again);
  ring_reservation res;
  if (errc e = c->prod.reserve(bytes, res); e != errc::ok) {
    if (t) put_tx(t);
    return ring_full<Lock>(*c, e);
  }
  writer w{res};
  w.put(&head, sizeof head);
  for (size_t i = 0; i < r.rma_count; ++i) {
    proto::rma_target tg{r.rma[i].addr, r.rma[i].count, r.rma[i].key};
    w.put(&tg, sizeof tg);
  }
  if (operand)
    for (size_t i = 0; i < r.src_count; ++i) w.put(r.src[i].addr, r.src[i].count * size);
  if (compare)
    for (size_t i = 0; i < r.cmp_count; ++i) w.put(r.cmp[i].addr, r.cmp[i].count * size);
  c->prod.publish(res, msg_fields{proto::op_atomic, request_flags(r.flags, silent),
                                  t ? t->token : 0, (r.flags & FI_REMOTE_CQ_DATA) ? r.data : 0});
  c->full_ns = 0;
  ring(*c);
  const bool fetch = r.kind != util::atomic_kind::base;
  if (!t) {
    if (util::cntr* n = bound_.write_cntr.get()) n->inc();
    return 0;
  }
  t->kind = tx_entry::atomic;
  t->context = r.context;
  t->cq_flags = FI_ATOMIC | (fetch ? FI_READ : FI_WRITE);
  t->c = c;
  t->count = fetch ? static_cast<uint32_t>(r.res_count) : 0;
  for (size_t i = 0; i < t->count; ++i) t->iov[i] = {r.res[i].addr, r.res[i].count * size};
  t->completion = completion;
  t->quiet = r.flags & util::op_quiet;
  t->total = fetch ? count * size : 0;  // the prior values the answer carries
  t->sent = t->consumed = 0;
  t->state = tx_entry::wait_ack;
  ++c->outstanding;
  watch(*c);
  return 0;
}

// ---- initiator: answers -------------------------------------------------------------

template <class Lock>
bool endpoint::handle_resp(inbound& in, const msg_view& v) noexcept {
  util::cq* tcq = bound_.tx_cq.get();
  if (tcq && !tcq->has_room<Lock>()) return false;
  const uint64_t token = v.fields.tag, status = v.fields.data;
  tx_entry* t = tx_of(token);
  if (!t || t->state != tx_entry::wait_ack || !t->c || !(t->c->id == in.id) ||
      (t->kind != tx_entry::read && t->kind != tx_entry::atomic)) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "shm: stray answer from pid %u", in.id.pid);
    in.cons.release(v);
    return true;
  }
  t->c->watch_ns = util::now_ns();
  int err = 0;
  if (status != proto::ack_done) {
    err = status < 4096 ? static_cast<int>(status) : FI_EIO;
  } else if (v.size != t->total) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "shm peer pid %u answered %u bytes for %llu",
              in.id.pid, v.size, static_cast<unsigned long long>(t->total));
    err = FI_EIO;
  } else {
    size_t off = 0;
    for (uint32_t i = 0; i < t->count; ++i)
      off += v.copy_to(t->iov[i].iov_base, t->iov[i].iov_len, off);
  }
  in.cons.release(v);
  complete_tx<Lock>(t, err);
  return true;
}

template <class Lock>
bool endpoint::handle_read_bounce(inbound& in, const msg_view& v) noexcept {
  proto::rts_payload p{};
  tx_entry* t = tx_of(v.fields.tag);
  bool ok = v.size == sizeof p;
  if (ok) v.copy_to(&p, sizeof p);
  if (!ok || p.count || !t || t->kind != tx_entry::read || t->state != tx_entry::wait_ack ||
      !t->c || !(t->c->id == in.id) || p.total != t->total) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "shm: stray or malformed read data from pid %u",
              in.id.pid);
    in.cons.release(v);
    return true;
  }
  auto* x = new (std::nothrow) rx_xfer;
  if (x) {
    try {
      in.xfers.push_back(x);
    } catch (...) {
      delete x;
      x = nullptr;
    }
  }
  if (!x) return false;  // try again later; the data waits in the segments
  in.cons.release(v);
  x->kind = rec_kind::bounce;
  x->rma = rx_xfer::read_result;
  x->read = t;
  x->read_token = t->token;
  x->in = &in;
  x->token = p.token;
  x->total = p.total;
  x->matched = true;
  x->dst_count = t->count;
  std::copy_n(t->iov, t->count, x->dst);
  watch(in);
  if (!x->total) {
    x->done = true;
    finish_xfer<Lock>(x);
  } else {
    poll_bounce<Lock>(in);
  }
  return true;
}

template <class Lock>
const fi_ops_rma* endpoint::rma_table() noexcept {
  return &util::rma_ops<endpoint, Lock>::rma_table;
}
template <class Lock>
const fi_ops_atomic* endpoint::atomic_table() noexcept {
  return &util::rma_ops<endpoint, Lock>::atomic_table;
}

#define WEFT_SHM_INSTANTIATE(L)                                                          \
  template ssize_t endpoint::post_rma<L>(const util::rma_request&) noexcept;             \
  template ssize_t endpoint::post_atomic<L>(const util::atomic_request&) noexcept;       \
  template bool endpoint::handle_resp<L>(inbound&, const msg_view&) noexcept;            \
  template bool endpoint::handle_read_bounce<L>(inbound&, const msg_view&) noexcept;     \
  template const fi_ops_rma* endpoint::rma_table<L>() noexcept;                          \
  template const fi_ops_atomic* endpoint::atomic_table<L>() noexcept;

WEFT_SHM_INSTANTIATE(util::null_lock)
WEFT_SHM_INSTANTIATE(util::mutex_lock)
WEFT_SHM_INSTANTIATE(util::handoff_lock)

}  // namespace weft::shm
