// SPDX-License-Identifier: MIT
// weft — the shm data path, sending side: every form of fi_send / fi_tsend
// funnels into endpoint::send; receives go straight to the matching engine.
//
// A message up to inline_max bytes is copied into the peer's ring and is
// complete at once: no lock beyond the policy's, no system call, no
// allocation. A larger one sends a rendezvous header and completes when the
// receiver has pulled it (op_ack) or consumed its last bounce chunk.
#include "core/log.hpp"
#include "prov/shm/shm.hpp"
#include "util/fence.hpp"
#include "util/trigger.hpp"
#include "util/iov.hpp"

#include <rdma/fi_tagged.h>

#include <cstring>

namespace weft::shm {

namespace {

// Operation flags a send may carry; anything else is refused.
constexpr uint64_t send_op_flags = FI_REMOTE_CQ_DATA | FI_COMPLETION | FI_MORE | FI_INJECT |
                                   FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE |
                                   FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE | FI_TRANSMIT |
                                   FI_MSG | FI_SEND | util::op_quiet;

// The fi_ops_msg and fi_ops_tagged slots of one lock policy.
template <class Lock>
struct data_ops {
  static endpoint* ep(fid_ep* e) noexcept { return endpoint::from(e); }

  // ---- fi_ops_msg ----
  static ssize_t recv(fid_ep* e, void* buf, size_t len, void* desc, fi_addr_t src,
                      void* ctx) noexcept {
    return ep(e)->post_recv_one<Lock>(buf, len, desc, src, 0, 0, ctx, false);
  }
  static ssize_t recvv(fid_ep* e, const iovec* iov, void** desc, size_t count, fi_addr_t src,
                       void* ctx) noexcept {
    return ep(e)->post_recv<Lock>(iov, desc, count, src, ctx, ep(e)->rx_op_flags());
  }
  static ssize_t recvmsg(fid_ep* e, const fi_msg* m, uint64_t flags) noexcept {
    if (!m) return to_fi(errc::inval);
    if (flags & FI_TRIGGER) [[unlikely]]
      return util::trigger_intercept(ep(e)->trigger_site(), e,
                                     {.type = FI_OP_RECV, .msg = m, .flags = flags});
    return ep(e)->post_recv<Lock>(m->msg_iov, m->desc, m->iov_count, m->addr, m->context, flags);
  }
  static ssize_t send(fid_ep* e, const void* buf, size_t len, void*, fi_addr_t dest,
                      void* ctx) noexcept {
    return ep(e)->send_one<Lock>(buf, len, dest, ctx, ep(e)->tx_op_flags(), 0, 0);
  }
  static ssize_t sendv(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t dest,
                       void* ctx) noexcept {
    return ep(e)->send<Lock>(iov, count, dest, ctx, ep(e)->tx_op_flags(), 0, 0);
  }
  static ssize_t sendmsg(fid_ep* e, const fi_msg* m, uint64_t flags) noexcept {
    if (!m) return to_fi(errc::inval);
    if (flags & (FI_FENCE | FI_TRIGGER)) [[unlikely]] {
      if (flags & FI_TRIGGER)
        return util::trigger_intercept(ep(e)->trigger_site(), e,
                                       {.type = FI_OP_SEND, .msg = m, .flags = flags});
      if (ssize_t r = ep(e)->fence<Lock>("fi_sendmsg")) return r;
      flags &= ~FI_FENCE;
    }
    if (flags & ~send_op_flags) return to_fi(errc::badflags);
    return ep(e)->send<Lock>(m->msg_iov, m->iov_count, m->addr, m->context, flags & ~FI_MSG, 0,
                             m->data);
  }
  static ssize_t inject(fid_ep* e, const void* buf, size_t len, fi_addr_t dest) noexcept {
    // fi_inject never generates a completion.
    return ep(e)->send_one<Lock>(buf, len, dest, nullptr, FI_INJECT | no_completion, 0, 0);
  }
  static ssize_t senddata(fid_ep* e, const void* buf, size_t len, void*, uint64_t data,
                          fi_addr_t dest, void* ctx) noexcept {
    return ep(e)->send_one<Lock>(buf, len, dest, ctx, ep(e)->tx_op_flags() | FI_REMOTE_CQ_DATA,
                                 0, data);
  }
  static ssize_t injectdata(fid_ep* e, const void* buf, size_t len, uint64_t data,
                            fi_addr_t dest) noexcept {
    return ep(e)->send_one<Lock>(buf, len, dest, nullptr,
                                 FI_INJECT | FI_REMOTE_CQ_DATA | no_completion, 0, data);
  }

  // ---- fi_ops_tagged ----
  static ssize_t trecv(fid_ep* e, void* buf, size_t len, void* desc, fi_addr_t src, uint64_t tag,
                       uint64_t ignore, void* ctx) noexcept {
    return ep(e)->post_recv_one<Lock>(buf, len, desc, src, tag, ignore, ctx, true);
  }
  static ssize_t trecvv(fid_ep* e, const iovec* iov, void** desc, size_t count, fi_addr_t src,
                        uint64_t tag, uint64_t ignore, void* ctx) noexcept {
    return ep(e)->post_trecv<Lock>(iov, desc, count, src, tag, ignore, ctx, ep(e)->rx_op_flags());
  }
  static ssize_t trecvmsg(fid_ep* e, const fi_msg_tagged* m, uint64_t flags) noexcept {
    if (!m) return to_fi(errc::inval);
    if (flags & FI_TRIGGER) [[unlikely]]
      return util::trigger_intercept(ep(e)->trigger_site(), e,
                                     {.type = FI_OP_TRECV, .tagged = m, .flags = flags});
    return ep(e)->post_trecv<Lock>(m->msg_iov, m->desc, m->iov_count, m->addr, m->tag, m->ignore,
                                   m->context, flags);
  }
  static ssize_t tsend(fid_ep* e, const void* buf, size_t len, void*, fi_addr_t dest, uint64_t tag,
                       void* ctx) noexcept {
    return ep(e)->send_one<Lock>(buf, len, dest, ctx, ep(e)->tx_op_flags() | FI_TAGGED, tag, 0);
  }
  static ssize_t tsendv(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t dest,
                        uint64_t tag, void* ctx) noexcept {
    return ep(e)->send<Lock>(iov, count, dest, ctx, ep(e)->tx_op_flags() | FI_TAGGED, tag, 0);
  }
  static ssize_t tsendmsg(fid_ep* e, const fi_msg_tagged* m, uint64_t flags) noexcept {
    if (!m) return to_fi(errc::inval);
    if (flags & (FI_FENCE | FI_TRIGGER)) [[unlikely]] {
      if (flags & FI_TRIGGER)
        return util::trigger_intercept(ep(e)->trigger_site(), e,
                                       {.type = FI_OP_TSEND, .tagged = m, .flags = flags});
      if (ssize_t r = ep(e)->fence<Lock>("fi_tsendmsg")) return r;
      flags &= ~FI_FENCE;
    }
    if (flags & ~(send_op_flags | FI_TAGGED)) return to_fi(errc::badflags);
    return ep(e)->send<Lock>(m->msg_iov, m->iov_count, m->addr, m->context,
                             (flags & ~FI_MSG) | FI_TAGGED, m->tag, m->data);
  }
  static ssize_t tinject(fid_ep* e, const void* buf, size_t len, fi_addr_t dest,
                         uint64_t tag) noexcept {
    return ep(e)->send_one<Lock>(buf, len, dest, nullptr, FI_INJECT | FI_TAGGED | no_completion,
                                 tag, 0);
  }
  static ssize_t tsenddata(fid_ep* e, const void* buf, size_t len, void*, uint64_t data,
                           fi_addr_t dest, uint64_t tag, void* ctx) noexcept {
    return ep(e)->send_one<Lock>(buf, len, dest, ctx,
                                 ep(e)->tx_op_flags() | FI_TAGGED | FI_REMOTE_CQ_DATA, tag, data);
  }
  static ssize_t tinjectdata(fid_ep* e, const void* buf, size_t len, uint64_t data,
                             fi_addr_t dest, uint64_t tag) noexcept {
    return ep(e)->send_one<Lock>(buf, len, dest, nullptr,
                                 FI_INJECT | FI_TAGGED | FI_REMOTE_CQ_DATA | no_completion, tag,
                                 data);
  }

  // Under a peer SRX, receives are posted to its owner.
  static ssize_t owned(fid_ep*) noexcept {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA,
              "receives of an endpoint bound to a shared receive context are posted to the context");
    return to_fi(errc::nosys);
  }
  static ssize_t recv_owned(fid_ep* e, void*, size_t, void*, fi_addr_t, void*) noexcept {
    return owned(e);
  }
  static ssize_t recvv_owned(fid_ep* e, const iovec*, void**, size_t, fi_addr_t, void*) noexcept {
    return owned(e);
  }
  static ssize_t recvmsg_owned(fid_ep* e, const fi_msg*, uint64_t) noexcept { return owned(e); }
  static ssize_t trecv_owned(fid_ep* e, void*, size_t, void*, fi_addr_t, uint64_t, uint64_t,
                             void*) noexcept {
    return owned(e);
  }
  static ssize_t trecvv_owned(fid_ep* e, const iovec*, void**, size_t, fi_addr_t, uint64_t,
                              uint64_t, void*) noexcept {
    return owned(e);
  }
  static ssize_t trecvmsg_owned(fid_ep* e, const fi_msg_tagged*, uint64_t) noexcept {
    return owned(e);
  }

  static constexpr fi_ops_msg msg = {
      .size = sizeof(fi_ops_msg),
      .recv = recv,
      .recvv = recvv,
      .recvmsg = recvmsg,
      .send = send,
      .sendv = sendv,
      .sendmsg = sendmsg,
      .inject = inject,
      .senddata = senddata,
      .injectdata = injectdata,
  };
  static constexpr fi_ops_tagged tagged = {
      .size = sizeof(fi_ops_tagged),
      .recv = trecv,
      .recvv = trecvv,
      .recvmsg = trecvmsg,
      .send = tsend,
      .sendv = tsendv,
      .sendmsg = tsendmsg,
      .inject = tinject,
      .senddata = tsenddata,
      .injectdata = tinjectdata,
  };
};

}  // namespace

const fi_ops_tagged tagged_badstate = {
    .size = sizeof(fi_ops_tagged),
    WEFT_FAIL(opbadstate, fi_ops_tagged, recv),     WEFT_FAIL(opbadstate, fi_ops_tagged, recvv),
    WEFT_FAIL(opbadstate, fi_ops_tagged, recvmsg),  WEFT_FAIL(opbadstate, fi_ops_tagged, send),
    WEFT_FAIL(opbadstate, fi_ops_tagged, sendv),    WEFT_FAIL(opbadstate, fi_ops_tagged, sendmsg),
    WEFT_FAIL(opbadstate, fi_ops_tagged, inject),   WEFT_FAIL(opbadstate, fi_ops_tagged, senddata),
    WEFT_FAIL(opbadstate, fi_ops_tagged, injectdata),
};

namespace {

template <class Lock>
struct shared_rx_ops {
  using d = data_ops<Lock>;
  static constexpr fi_ops_msg msg = [] {
    fi_ops_msg t = d::msg;
    t.recv = d::recv_owned;
    t.recvv = d::recvv_owned;
    t.recvmsg = d::recvmsg_owned;
    return t;
  }();
  static constexpr fi_ops_tagged tagged = [] {
    fi_ops_tagged t = d::tagged;
    t.recv = d::trecv_owned;
    t.recvv = d::trecvv_owned;
    t.recvmsg = d::trecvmsg_owned;
    return t;
  }();
};

}  // namespace

template <class Lock>
const fi_ops_msg* endpoint::msg_table(bool shared_rx) noexcept {
  return shared_rx ? &shared_rx_ops<Lock>::msg : &data_ops<Lock>::msg;
}
template <class Lock>
const fi_ops_tagged* endpoint::tagged_table(bool shared_rx) noexcept {
  return shared_rx ? &shared_rx_ops<Lock>::tagged : &data_ops<Lock>::tagged;
}
template const fi_ops_msg* endpoint::msg_table<util::null_lock>(bool) noexcept;
template const fi_ops_msg* endpoint::msg_table<util::mutex_lock>(bool) noexcept;
template const fi_ops_tagged* endpoint::tagged_table<util::null_lock>(bool) noexcept;
template const fi_ops_tagged* endpoint::tagged_table<util::mutex_lock>(bool) noexcept;
template const fi_ops_msg* endpoint::msg_table<util::handoff_lock>(bool) noexcept;
template const fi_ops_tagged* endpoint::tagged_table<util::handoff_lock>(bool) noexcept;

template <class Lock>
ssize_t endpoint::post_recv(const iovec* iov, void** desc, size_t count, fi_addr_t src,
                            void* context, uint64_t flags) noexcept {
  [[maybe_unused]] auto g = guard<Lock>();  // the engine's lock (srx_attr::serialized)
  return srx_->post_msg<Lock>(iov, desc, count, src, context, flags);
}

template <class Lock>
ssize_t endpoint::post_trecv(const iovec* iov, void** desc, size_t count, fi_addr_t src,
                             uint64_t tag, uint64_t ignore, void* context,
                             uint64_t flags) noexcept {
  [[maybe_unused]] auto g = guard<Lock>();  // the engine's lock (srx_attr::serialized)
  return srx_->post_tag<Lock>(iov, desc, count, src, tag, ignore, context, flags);
}

// The single-buffer forms: a message that travels inline in the ring, the
// common case, skips the iovec walks of send(); anything else (rendezvous,
// delivery completion, errors to report) goes to send(), which decides.
template <class Lock>
ssize_t endpoint::send_one(const void* buf, size_t len, fi_addr_t dest, void* context,
                           uint64_t flags, uint64_t tag, uint64_t data) noexcept {
  if (len > inline_max || (flags & FI_DELIVERY_COMPLETE) || (!buf && len)) [[unlikely]] {
    iovec iov{const_cast<void*>(buf), len};
    return send<Lock>(&iov, 1, dest, context, flags, tag, data);
  }
  util::cq* cq = bound_.tx_cq.get();
  const bool completion =
      cq && !(flags & no_completion) && (!bound_.tx_selective || (flags & FI_COMPLETION));
  const bool tagged = flags & FI_TAGGED;
  const bool has_data = flags & FI_REMOTE_CQ_DATA;
  const msg_fields f{proto::op_inline,
                     static_cast<uint16_t>((tagged ? proto::flag_tagged : 0) |
                                           (has_data ? proto::flag_data : 0)),
                     tagged ? tag : 0, has_data ? data : 0};
  [[maybe_unused]] auto g = guard<Lock>();
  conn* c = conn_hit(dest);
  if (!c) [[unlikely]] {
    errc err;
    if (!(c = conn_for(dest, err))) return to_fi(err);
  }
  if (c->dead) return to_fi(errc::connreset);
  if (completion && !cq->has_room<Lock>()) return to_fi(errc::again);
  if (errc e = c->prod.try_send(f, buf, len); e != errc::ok) [[unlikely]]
    return ring_full<Lock>(*c, e);
  c->full_ns = 0;
  if constexpr (!std::is_same_v<Lock, util::mutex_lock>) reply_slot_ = c->prod.next_slot();
  ring(*c);
  if (completion)
    cq->write<Lock>({context, FI_SEND | (tagged ? FI_TAGGED : FI_MSG), 0, nullptr, 0, 0,
                     FI_ADDR_NOTAVAIL, 0});
  if (util::cntr* n = util::counted(bound_.send_cntr.get(), flags)) n->inc();
  return 0;
}

template <class Lock>
ssize_t endpoint::send(const iovec* iov, size_t count, fi_addr_t dest, void* context,
                       uint64_t flags, uint64_t tag, uint64_t data) noexcept {
  auto* prov = &provider();
  if (util::iov_refused(prov, "send", iov, count, max_iov))
    return to_fi(errc::inval);
  uint64_t len = 0;
  for (size_t i = 0; i < count; ++i) {
    if (iov[i].iov_len > max_msg - len) {
      WEFT_WARN(prov, FI_LOG_EP_DATA, "send of more than max_msg_size %llu bytes",
                static_cast<unsigned long long>(max_msg));
      return to_fi(errc::msgsize);
    }
    len += iov[i].iov_len;
  }
  const bool inject = flags & FI_INJECT;
  if (inject && len > inline_max) {
    WEFT_WARN(prov, FI_LOG_EP_DATA, "inject of %llu bytes exceeds inject_size %zu",
              static_cast<unsigned long long>(len), inline_max);
    return to_fi(errc::msgsize);
  }
  util::cq* cq = bound_.tx_cq.get();
  const bool completion =
      cq && !(flags & no_completion) && (!bound_.tx_selective || (flags & FI_COMPLETION));
  const bool tagged = flags & FI_TAGGED;
  msg_fields f;
  f.flags = static_cast<uint16_t>((tagged ? proto::flag_tagged : 0) |
                                  ((flags & FI_REMOTE_CQ_DATA) ? proto::flag_data : 0));
  f.tag = tagged ? tag : 0;
  f.data = (flags & FI_REMOTE_CQ_DATA) ? data : 0;
  const uint64_t cq_flags = FI_SEND | (tagged ? FI_TAGGED : FI_MSG);
  // Delivery completion of a small message takes the acknowledged path.
  const bool rendezvous = len > inline_max || (!inject && len && (flags & FI_DELIVERY_COMPLETE));

  [[maybe_unused]] auto g = guard<Lock>();
  errc err;
  conn* c = conn_for(dest, err);
  if (!c) return to_fi(err);
  if (c->dead) return to_fi(errc::connreset);
  if (completion && !cq->has_room<Lock>()) return to_fi(errc::again);
  if (!rendezvous) {
    f.op = proto::op_inline;
    if (errc e = c->prod.try_sendv(f, iov, count); e != errc::ok) return ring_full<Lock>(*c, e);
    c->full_ns = 0;
    ring(*c);
    if (completion) cq->write<Lock>({context, cq_flags, 0, nullptr, 0, 0, FI_ADDR_NOTAVAIL, 0});
    if (util::cntr* n = util::counted(bound_.send_cntr.get(), flags)) n->inc();
    return 0;
  }
  tx_entry* t = take_tx();
  if (!t) return to_fi(errc::again);
  const bool cma = use_cma(*c);
  struct {
    proto::rts_payload head;
    proto::rts_iov iov[max_iov];
  } rts{};
  rts.head.token = t->token;
  rts.head.total = len;
  rts.head.count = cma ? static_cast<uint32_t>(count) : 0;
  for (size_t i = 0; i < count; ++i) {
    t->iov[i] = iov[i];
    rts.iov[i] = {reinterpret_cast<uint64_t>(iov[i].iov_base), iov[i].iov_len};
  }
  f.op = cma ? proto::op_rts_cma : proto::op_rts_bounce;
  size_t bytes = sizeof rts.head + rts.head.count * sizeof(proto::rts_iov);
  if (errc e = c->prod.try_send(f, &rts, bytes); e != errc::ok) {
    put_tx(t);
    return ring_full<Lock>(*c, e);
  }
  c->full_ns = 0;
  ring(*c);
  t->context = context;
  t->cq_flags = cq_flags;
  t->c = c;
  t->count = static_cast<uint32_t>(count);
  t->completion = completion;
  t->quiet = flags & util::op_quiet;
  t->total = len;
  t->sent = t->consumed = 0;
  ++c->outstanding;
  watch(*c);
  if (cma) {
    t->state = tx_entry::wait_ack;
  } else {
    t->state = tx_entry::streaming;
    enqueue_bounce(*c, t);
    pump_bounce<Lock>(*c);
  }
  return 0;
}

#define WEFT_SHM_INSTANTIATE(L)                                                                 \
  template ssize_t endpoint::post_recv<L>(const iovec*, void**, size_t, fi_addr_t, void*,      \
                                          uint64_t) noexcept;                                  \
  template ssize_t endpoint::post_trecv<L>(const iovec*, void**, size_t, fi_addr_t, uint64_t,  \
                                           uint64_t, void*, uint64_t) noexcept;                \
  template ssize_t endpoint::send<L>(const iovec*, size_t, fi_addr_t, void*, uint64_t,         \
                                     uint64_t, uint64_t) noexcept;

WEFT_SHM_INSTANTIATE(util::null_lock)
WEFT_SHM_INSTANTIATE(util::mutex_lock)
WEFT_SHM_INSTANTIATE(util::handoff_lock)

}  // namespace weft::shm
