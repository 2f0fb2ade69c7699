// SPDX-License-Identifier: MIT
// weft — the fi_ops_msg and fi_ops_tagged tables, generated once for any
// provider endpoint (as rma_ops.hpp does for RMA and atomics).
//
// fi_msg(3) and fi_tagged(3) give each direction nine call forms. They all
// funnel into three members of the endpoint class Ep:
//
//   template <class Lock> ssize_t Ep::send(const iovec*, size_t count,
//       fi_addr_t dest, void* context, uint64_t flags, uint64_t tag,
//       uint64_t data) noexcept;        // flags carry FI_TAGGED,
//                                       // FI_REMOTE_CQ_DATA, FI_INJECT,
//                                       // op_no_completion
//   template <class Lock> ssize_t Ep::post_msg(const iovec*, void** desc,
//       size_t count, fi_addr_t src, void* context, uint64_t flags) noexcept;
//   template <class Lock> ssize_t Ep::post_tag(const iovec*, void** desc,
//       size_t count, fi_addr_t src, uint64_t tag, uint64_t ignore,
//       void* context, uint64_t flags) noexcept;
//   uint64_t Ep::tx_op_flags() const noexcept;  // fi_send's default flags
//   uint64_t Ep::rx_op_flags() const noexcept;
//   const fi_provider* Ep::prov() noexcept;  // names it in log lines (may be static)
//   util::trigger_site Ep::trigger_site() noexcept;  // for FI_TRIGGER
//
// and, where the provider offers FI_FENCE (fence.hpp),
//
//   template <class Lock> ssize_t Ep::fence(const char* call) noexcept;
//                                       // 0: the fenced send may go now
//
// (without it, FI_FENCE is refused with -FI_EINVAL). `Variant`, when not
// void, is a std::integral_constant passed on to the send as a second
// template argument: Ep::send<Lock, Variant::value> (tcp: whether the
// endpoint is FI_EP_RDM).
//
// The argument checks every form shares (a null fi_msg, FI_FENCE, the
// internal completion bit an application cannot set) are made here, so
// providers cannot drift apart in them. A *msg call with FI_TRIGGER goes to
// the domain's trigger engine (util/trigger.hpp).
#pragma once

#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>

#include <type_traits>

#include "core/errc.hpp"
#include "util/fence.hpp"
#include "util/rma_ops.hpp"
#include "util/trigger.hpp"

namespace weft::util {

template <class Ep, class Lock, class Variant = void>
struct msg_ops {
  static Ep* ep(fid_ep* e) noexcept { return Ep::from(e); }
  static ssize_t tx(fid_ep* e, const iovec* iov, size_t n, fi_addr_t dest, void* ctx,
                    uint64_t flags, uint64_t tag, uint64_t data) noexcept {
    if constexpr (std::is_void_v<Variant>)
      return ep(e)->template send<Lock>(iov, n, dest, ctx, flags, tag, data);
    else
      return ep(e)->template send<Lock, Variant::value>(iov, n, dest, ctx, flags, tag, data);
  }
  static constexpr bool fences = requires(Ep& x) { x.template fence<Lock>(""); };
  // A *msg call with FI_FENCE or FI_TRIGGER (`call` names it). Without fence
  // support FI_FENCE is refused at the call, triggered or not; with it, a
  // triggered call keeps the flag for when it is issued.
  // true: answered, with `ret` (refused, queued for its trigger, or a fence
  // that must wait); false: go on.
  static bool gate(fid_ep* e, const char* call, uint64_t& flags, const trigger_call& c,
                   ssize_t& ret) noexcept {
    if constexpr (!fences)
      if (fence_refused(ep(e)->prov(), call, flags)) return ret = to_fi(errc::inval), true;
    if (flags & FI_TRIGGER) return ret = trig(e, c), true;
    if constexpr (fences)
      if ((ret = ep(e)->template fence<Lock>(call))) return true;
    flags &= ~uint64_t{FI_FENCE};
    return false;
  }
  // The default flags of a plain send: never the operation's own bits.
  static uint64_t txf(fid_ep* e) noexcept {
    return ep(e)->tx_op_flags() & ~uint64_t{FI_TAGGED | FI_REMOTE_CQ_DATA};
  }
  static constexpr uint64_t inject_flags = FI_INJECT | op_no_completion;
  static iovec one(const void* buf, size_t len) noexcept { return {const_cast<void*>(buf), len}; }
  static ssize_t trig(fid_ep* e, const trigger_call& c) noexcept {
    return trigger_intercept(ep(e)->trigger_site(), e, c);
  }

  // ---- fi_ops_msg ----
  static ssize_t recv(fid_ep* e, void* buf, size_t len, void* desc, fi_addr_t src,
                      void* ctx) noexcept {
    iovec iov{buf, len};
    return ep(e)->template post_msg<Lock>(&iov, &desc, 1, src, ctx, ep(e)->rx_op_flags());
  }
  static ssize_t recvv(fid_ep* e, const iovec* iov, void** desc, size_t count, fi_addr_t src,
                       void* ctx) noexcept {
    return ep(e)->template post_msg<Lock>(iov, desc, count, src, ctx, ep(e)->rx_op_flags());
  }
  static ssize_t recvmsg(fid_ep* e, const fi_msg* m, uint64_t flags) noexcept {
    if (!m) return to_fi(errc::inval);
    if (flags & FI_TRIGGER) [[unlikely]]
      return trig(e, {.type = FI_OP_RECV, .msg = m, .flags = flags});
    return ep(e)->template post_msg<Lock>(m->msg_iov, m->desc, m->iov_count, m->addr, m->context,
                                          flags);
  }
  static ssize_t send(fid_ep* e, const void* buf, size_t len, void*, fi_addr_t dest,
                      void* ctx) noexcept {
    iovec iov = one(buf, len);
    return tx(e, &iov, 1, dest, ctx, txf(e), 0, 0);
  }
  static ssize_t sendv(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t dest,
                       void* ctx) noexcept {
    return tx(e, iov, count, dest, ctx, txf(e), 0, 0);
  }
  static ssize_t sendmsg(fid_ep* e, const fi_msg* m, uint64_t flags) noexcept {
    if (!m) return to_fi(errc::inval);
    ssize_t r;
    if (flags & (FI_FENCE | FI_TRIGGER)) [[unlikely]]
      if (gate(e, "fi_sendmsg", flags, {.type = FI_OP_SEND, .msg = m, .flags = flags}, r)) return r;
    return tx(e, m->msg_iov, m->iov_count, m->addr, m->context,
              flags & ~uint64_t{FI_TAGGED | op_no_completion}, 0, m->data);
  }
  static ssize_t inject(fid_ep* e, const void* buf, size_t len, fi_addr_t dest) noexcept {
    iovec iov = one(buf, len);
    return tx(e, &iov, 1, dest, nullptr, inject_flags, 0, 0);
  }
  static ssize_t senddata(fid_ep* e, const void* buf, size_t len, void*, uint64_t data,
                          fi_addr_t dest, void* ctx) noexcept {
    iovec iov = one(buf, len);
    return tx(e, &iov, 1, dest, ctx, txf(e) | FI_REMOTE_CQ_DATA, 0, data);
  }
  static ssize_t injectdata(fid_ep* e, const void* buf, size_t len, uint64_t data,
                            fi_addr_t dest) noexcept {
    iovec iov = one(buf, len);
    return tx(e, &iov, 1, dest, nullptr, inject_flags | FI_REMOTE_CQ_DATA, 0, data);
  }

  // ---- fi_ops_tagged ----
  static ssize_t trecv(fid_ep* e, void* buf, size_t len, void* desc, fi_addr_t src, uint64_t tag,
                       uint64_t ignore, void* ctx) noexcept {
    iovec iov{buf, len};
    return ep(e)->template post_tag<Lock>(&iov, &desc, 1, src, tag, ignore, ctx,
                                          ep(e)->rx_op_flags());
  }
  static ssize_t trecvv(fid_ep* e, const iovec* iov, void** desc, size_t count, fi_addr_t src,
                        uint64_t tag, uint64_t ignore, void* ctx) noexcept {
    return ep(e)->template post_tag<Lock>(iov, desc, count, src, tag, ignore, ctx,
                                          ep(e)->rx_op_flags());
  }
  static ssize_t trecvmsg(fid_ep* e, const fi_msg_tagged* m, uint64_t flags) noexcept {
    if (!m) return to_fi(errc::inval);
    if (flags & FI_TRIGGER) [[unlikely]]
      return trig(e, {.type = FI_OP_TRECV, .tagged = m, .flags = flags});
    return ep(e)->template post_tag<Lock>(m->msg_iov, m->desc, m->iov_count, m->addr, m->tag,
                                          m->ignore, m->context, flags);
  }
  static ssize_t tsend(fid_ep* e, const void* buf, size_t len, void*, fi_addr_t dest, uint64_t tag,
                       void* ctx) noexcept {
    iovec iov = one(buf, len);
    return tx(e, &iov, 1, dest, ctx, txf(e) | FI_TAGGED, tag, 0);
  }
  static ssize_t tsendv(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t dest,
                        uint64_t tag, void* ctx) noexcept {
    return tx(e, iov, count, dest, ctx, txf(e) | FI_TAGGED, tag, 0);
  }
  static ssize_t tsendmsg(fid_ep* e, const fi_msg_tagged* m, uint64_t flags) noexcept {
    if (!m) return to_fi(errc::inval);
    ssize_t r;
    if (flags & (FI_FENCE | FI_TRIGGER)) [[unlikely]]
      if (gate(e, "fi_tsendmsg", flags, {.type = FI_OP_TSEND, .tagged = m, .flags = flags}, r))
        return r;
    return tx(e, m->msg_iov, m->iov_count, m->addr, m->context,
              (flags & ~op_no_completion) | FI_TAGGED, m->tag, m->data);
  }
  static ssize_t tinject(fid_ep* e, const void* buf, size_t len, fi_addr_t dest,
                         uint64_t tag) noexcept {
    iovec iov = one(buf, len);
    return tx(e, &iov, 1, dest, nullptr, inject_flags | FI_TAGGED, tag, 0);
  }
  static ssize_t tsenddata(fid_ep* e, const void* buf, size_t len, void*, uint64_t data,
                           fi_addr_t dest, uint64_t tag, void* ctx) noexcept {
    iovec iov = one(buf, len);
    return tx(e, &iov, 1, dest, ctx, txf(e) | FI_TAGGED | FI_REMOTE_CQ_DATA, tag, data);
  }
  static ssize_t tinjectdata(fid_ep* e, const void* buf, size_t len, uint64_t data, fi_addr_t dest,
                             uint64_t tag) noexcept {
    iovec iov = one(buf, len);
    return tx(e, &iov, 1, dest, nullptr, inject_flags | FI_TAGGED | FI_REMOTE_CQ_DATA, tag, data);
  }

  static constexpr fi_ops_msg msg_table = {
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
  static constexpr fi_ops_tagged tagged_table = {
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

}  // namespace weft::util
