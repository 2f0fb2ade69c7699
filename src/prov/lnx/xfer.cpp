// SPDX-License-Identifier: MIT
// weft — the lnx data path. Sends: the destination's route, then the same
// call on the core endpoint. Receives: straight into lnx's engine, which the
// cores match through. Descriptors the application passes are lnx's, not a
// core's, so none reaches a core (the cores lnx links need none for
// messages; fi_getinfo asks them for mr_mode 0).
#include <rdma/fi_tagged.h>

#include "core/log.hpp"
#include "prov/lnx/pass.hpp"
#include "util/srx_port.hpp"

namespace weft::lnx {

namespace {

// (util::op_quiet: a deferred receive that asked for no completion, which
// the engine counts on no endpoint counter.)
constexpr uint64_t post_mask =
    FI_COMPLETION | FI_MULTI_RECV | FI_PEEK | FI_CLAIM | FI_DISCARD | util::op_quiet;

template <class Lock>
struct lnx_ops {
  static endpoint* self(fid_ep* e) noexcept { return endpoint::from(e); }

  // ---- sends: passed through ----
  // (The single-buffer forms take pass.hpp's quick path, each with a slow
  // twin for a route not made yet or a size beyond the limits.)
  static ssize_t send(fid_ep* e, const void* buf, size_t len, void* desc, fi_addr_t dest,
                      void* ctx) noexcept {
    fid_ep* c;
    fi_addr_t a;
    if (quick(e, dest, len, false, c, a)) [[likely]]
      return fi_send(c, buf, len, nullptr, a, ctx);
    return send_slow(e, buf, len, desc, dest, ctx);
  }
  [[gnu::noinline]] static ssize_t send_slow(fid_ep* e, const void* buf, size_t len, void*,
                                             fi_addr_t dest, void* ctx) noexcept {
    return via_sized(e, dest, len, false,
                     [&](fid_ep* c, fi_addr_t a) { return fi_send(c, buf, len, nullptr, a, ctx); });
  }
  static ssize_t sendv(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t dest,
                       void* ctx) noexcept {
    return via_sized(e, dest, total(iov, count), false, [&](fid_ep* c, fi_addr_t a) {
      return fi_sendv(c, iov, nullptr, count, a, ctx);
    });
  }
  static ssize_t sendmsg(fid_ep* e, const fi_msg* m, uint64_t flags) noexcept {
    if (!m) return to_fi(errc::inval);
    if (triggered(flags)) [[unlikely]]
      return trigger(e, {.type = FI_OP_SEND, .msg = m, .flags = flags});
    if (refused(e, flags)) [[unlikely]]
      return refuse_flags(e, "fi_sendmsg", flags);
    return via_sized(e, m->addr, total(m->msg_iov, m->iov_count), flags & FI_INJECT,
                     [&](fid_ep* c, fi_addr_t a) {
      fi_msg cm = *m;
      cm.addr = a;
      cm.desc = nullptr;
      return fi_sendmsg(c, &cm, flags);
    });
  }
  static ssize_t inject(fid_ep* e, const void* buf, size_t len, fi_addr_t dest) noexcept {
    fid_ep* c;
    fi_addr_t a;
    if (quick(e, dest, len, true, c, a)) [[likely]]
      return fi_inject(c, buf, len, a);
    return inject_slow(e, buf, len, dest);
  }
  [[gnu::noinline]] static ssize_t inject_slow(fid_ep* e, const void* buf, size_t len,
                                               fi_addr_t dest) noexcept {
    return via_sized(e, dest, len, true,
                     [&](fid_ep* c, fi_addr_t a) { return fi_inject(c, buf, len, a); });
  }
  static ssize_t senddata(fid_ep* e, const void* buf, size_t len, void*, uint64_t data,
                          fi_addr_t dest, void* ctx) noexcept {
    return via_sized(e, dest, len, false, [&](fid_ep* c, fi_addr_t a) {
      return fi_senddata(c, buf, len, nullptr, data, a, ctx);
    });
  }
  static ssize_t injectdata(fid_ep* e, const void* buf, size_t len, uint64_t data,
                            fi_addr_t dest) noexcept {
    return via_sized(e, dest, len, true,
                     [&](fid_ep* c, fi_addr_t a) { return fi_injectdata(c, buf, len, data, a); });
  }
  static ssize_t tsend(fid_ep* e, const void* buf, size_t len, void* desc, fi_addr_t dest,
                       uint64_t tag, void* ctx) noexcept {
    fid_ep* c;
    fi_addr_t a;
    if (quick(e, dest, len, false, c, a)) [[likely]]
      return fi_tsend(c, buf, len, nullptr, a, tag, ctx);
    return tsend_slow(e, buf, len, desc, dest, tag, ctx);
  }
  [[gnu::noinline]] static ssize_t tsend_slow(fid_ep* e, const void* buf, size_t len, void*,
                                              fi_addr_t dest, uint64_t tag, void* ctx) noexcept {
    return via_sized(e, dest, len, false, [&](fid_ep* c, fi_addr_t a) {
      return fi_tsend(c, buf, len, nullptr, a, tag, ctx);
    });
  }
  static ssize_t tsendv(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t dest,
                        uint64_t tag, void* ctx) noexcept {
    return via_sized(e, dest, total(iov, count), false, [&](fid_ep* c, fi_addr_t a) {
      return fi_tsendv(c, iov, nullptr, count, a, tag, ctx);
    });
  }
  static ssize_t tsendmsg(fid_ep* e, const fi_msg_tagged* m, uint64_t flags) noexcept {
    if (!m) return to_fi(errc::inval);
    if (triggered(flags)) [[unlikely]]
      return trigger(e, {.type = FI_OP_TSEND, .tagged = m, .flags = flags});
    if (refused(e, flags)) [[unlikely]]
      return refuse_flags(e, "fi_tsendmsg", flags);
    return via_sized(e, m->addr, total(m->msg_iov, m->iov_count), flags & FI_INJECT,
                     [&](fid_ep* c, fi_addr_t a) {
      fi_msg_tagged cm = *m;
      cm.addr = a;
      cm.desc = nullptr;
      return fi_tsendmsg(c, &cm, flags);
    });
  }
  static ssize_t tinject(fid_ep* e, const void* buf, size_t len, fi_addr_t dest,
                         uint64_t tag) noexcept {
    fid_ep* c;
    fi_addr_t a;
    if (quick(e, dest, len, true, c, a)) [[likely]]
      return fi_tinject(c, buf, len, a, tag);
    return tinject_slow(e, buf, len, dest, tag);
  }
  [[gnu::noinline]] static ssize_t tinject_slow(fid_ep* e, const void* buf, size_t len,
                                                fi_addr_t dest, uint64_t tag) noexcept {
    return via_sized(e, dest, len, true,
                     [&](fid_ep* c, fi_addr_t a) { return fi_tinject(c, buf, len, a, tag); });
  }
  static ssize_t tsenddata(fid_ep* e, const void* buf, size_t len, void*, uint64_t data,
                           fi_addr_t dest, uint64_t tag, void* ctx) noexcept {
    return via_sized(e, dest, len, false, [&](fid_ep* c, fi_addr_t a) {
      return fi_tsenddata(c, buf, len, nullptr, data, a, tag, ctx);
    });
  }
  static ssize_t tinjectdata(fid_ep* e, const void* buf, size_t len, uint64_t data, fi_addr_t dest,
                             uint64_t tag) noexcept {
    return via_sized(e, dest, len, true, [&](fid_ep* c, fi_addr_t a) {
      return fi_tinjectdata(c, buf, len, data, a, tag);
    });
  }

  // ---- receives: into the engine ----
  // (Descriptors are lnx's: none reaches the engine, whose receives the
  // cores fill.)
  static ssize_t recv(fid_ep* e, void* buf, size_t len, void*, fi_addr_t src, void* ctx) noexcept {
    return self(e)->engine().template post_single<Lock>(buf, len, nullptr, src, 0, 0, ctx,
                                                        self(e)->rx_op_flags() & post_mask, false);
  }
  static ssize_t recvv(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t src,
                       void* ctx) noexcept {
    return self(e)->engine().template post_msg<Lock>(iov, nullptr, count, src, ctx,
                                                     self(e)->rx_op_flags() & post_mask);
  }
  static ssize_t recvmsg(fid_ep* e, const fi_msg* m, uint64_t flags) noexcept {
    if (!m) return to_fi(errc::inval);
    if (triggered(flags)) [[unlikely]]
      return trigger(e, {.type = FI_OP_RECV, .msg = m, .flags = flags});
    return self(e)->engine().template post_msg<Lock>(m->msg_iov, nullptr, m->iov_count, m->addr,
                                                     m->context, flags & post_mask);
  }
  static uint64_t tag_flags(fid_ep* e) noexcept {
    return self(e)->rx_op_flags() & post_mask & ~uint64_t{FI_MULTI_RECV};
  }
  static ssize_t trecv(fid_ep* e, void* buf, size_t len, void*, fi_addr_t src, uint64_t tag,
                       uint64_t ignore, void* ctx) noexcept {
    return self(e)->engine().template post_single<Lock>(buf, len, nullptr, src, tag, ignore, ctx,
                                                        tag_flags(e), true);
  }
  static ssize_t trecvv(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t src,
                        uint64_t tag, uint64_t ignore, void* ctx) noexcept {
    return self(e)->engine().template post_tag<Lock>(iov, nullptr, count, src, tag, ignore, ctx,
                                                     tag_flags(e));
  }
  static ssize_t trecvmsg(fid_ep* e, const fi_msg_tagged* m, uint64_t flags) noexcept {
    if (!m) return to_fi(errc::inval);
    if (triggered(flags)) [[unlikely]]
      return trigger(e, {.type = FI_OP_TRECV, .tagged = m, .flags = flags});
    return self(e)->engine().template post_tag<Lock>(m->msg_iov, nullptr, m->iov_count, m->addr,
                                                     m->tag, m->ignore, m->context,
                                                     flags & post_mask);
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

// Under an application's shared receive context the receive slots answer
// -FI_ENOSYS: receives are posted on the context (util/srx_port.hpp).
template <class Lock>
using shared_lnx_ops =
    util::shared_rx_tables<lnx_ops<Lock>::msg, lnx_ops<Lock>::tagged, provider>;

template <class Lock>
const fi_ops_msg* endpoint::msg_table(bool shared_rx) noexcept {
  return shared_rx ? &shared_lnx_ops<Lock>::msg : &lnx_ops<Lock>::msg;
}
template <class Lock>
const fi_ops_tagged* endpoint::tagged_table(bool shared_rx) noexcept {
  return shared_rx ? &shared_lnx_ops<Lock>::tagged : &lnx_ops<Lock>::tagged;
}
template const fi_ops_msg* endpoint::msg_table<util::null_lock>(bool) noexcept;
template const fi_ops_msg* endpoint::msg_table<util::mutex_lock>(bool) noexcept;
template const fi_ops_tagged* endpoint::tagged_table<util::null_lock>(bool) noexcept;
template const fi_ops_tagged* endpoint::tagged_table<util::mutex_lock>(bool) noexcept;

}  // namespace weft::lnx
