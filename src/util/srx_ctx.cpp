// SPDX-License-Identifier: MIT
// weft — the application's shared receive context (srx_ctx.hpp).
#include "util/srx_ctx.hpp"

#include "core/log.hpp"

#include <mutex>

namespace weft::util {

namespace {

// The receive forms of fi_msg(3) and fi_tagged(3) on the context, straight
// into the engine; the transmit forms stay -FI_ENOSYS (a receive context).
template <class Lock>
struct srx_ctx_ops {
  static srx_ctx* self(fid_ep* e) noexcept { return srx_ctx::from(e); }
  // What a posting may carry into the engine; FI_TRIGGER is refused before.
  static constexpr uint64_t post_mask =
      FI_COMPLETION | FI_MULTI_RECV | FI_PEEK | FI_CLAIM | FI_DISCARD;
  static bool trigger_refused(fid_ep* e, uint64_t flags) noexcept {
    if (!(flags & FI_TRIGGER)) [[likely]]
      return false;
    WEFT_WARN(self(e)->prov(), FI_LOG_EP_DATA,
              "FI_TRIGGER is not supported on a shared receive context");
    return true;
  }
  static ssize_t recv(fid_ep* e, void* buf, size_t len, void* desc, fi_addr_t src,
                      void* ctx) noexcept {
    iovec iov{buf, len};
    return self(e)->engine().post_msg<Lock>(&iov, &desc, 1, src, ctx, self(e)->rx_op_flags());
  }
  static ssize_t recvv(fid_ep* e, const iovec* iov, void** desc, size_t count, fi_addr_t src,
                       void* ctx) noexcept {
    return self(e)->engine().post_msg<Lock>(iov, desc, count, src, ctx, self(e)->rx_op_flags());
  }
  static ssize_t recvmsg(fid_ep* e, const fi_msg* m, uint64_t flags) noexcept {
    if (!m) return to_fi(errc::inval);
    if (trigger_refused(e, flags)) return to_fi(errc::nosys);
    return self(e)->engine().post_msg<Lock>(m->msg_iov, m->desc, m->iov_count, m->addr,
                                            m->context, flags & post_mask);
  }
  static ssize_t trecv(fid_ep* e, void* buf, size_t len, void* desc, fi_addr_t src, uint64_t tag,
                       uint64_t ignore, void* ctx) noexcept {
    iovec iov{buf, len};
    return self(e)->engine().post_tag<Lock>(&iov, &desc, 1, src, tag, ignore, ctx,
                                            self(e)->rx_op_flags() & ~uint64_t{FI_MULTI_RECV});
  }
  static ssize_t trecvv(fid_ep* e, const iovec* iov, void** desc, size_t count, fi_addr_t src,
                        uint64_t tag, uint64_t ignore, void* ctx) noexcept {
    return self(e)->engine().post_tag<Lock>(iov, desc, count, src, tag, ignore, ctx,
                                            self(e)->rx_op_flags() & ~uint64_t{FI_MULTI_RECV});
  }
  static ssize_t trecvmsg(fid_ep* e, const fi_msg_tagged* m, uint64_t flags) noexcept {
    if (!m) return to_fi(errc::inval);
    if (trigger_refused(e, flags)) return to_fi(errc::nosys);
    return self(e)->engine().post_tag<Lock>(m->msg_iov, m->desc, m->iov_count, m->addr, m->tag,
                                            m->ignore, m->context, flags & post_mask);
  }
  static constexpr fi_ops_msg msg = [] {
    fi_ops_msg t = msg_nosys;
    t.recv = recv;
    t.recvv = recvv;
    t.recvmsg = recvmsg;
    return t;
  }();
  static constexpr fi_ops_tagged tagged = [] {
    fi_ops_tagged t = tagged_nosys;
    t.recv = trecv;
    t.recvv = trecvv;
    t.recvmsg = trecvmsg;
    return t;
  }();
};

}  // namespace

int srx_ctx::open(domain& dom, const fi_provider* prov, const fi_rx_attr* attr,
                  size_t default_size, const fi_ops_srx_peer* peer_ops, fid_ep** out,
                  void* context) noexcept {
  if (!out) return to_fi(errc::inval);
  srx_attr a;
  a.prov = prov;
  // Endpoints on different CQs may run at once under FI_THREAD_COMPLETION
  // (and anything but FI_THREAD_DOMAIN): the engine they share then locks.
  a.threading = dom.lock_threading() == FI_THREAD_DOMAIN ? FI_THREAD_DOMAIN : FI_THREAD_SAFE;
  if (dom.locks() == lock_kind::handoff) a.handoff = &dom.handoff();
  a.size = attr && attr->size ? attr->size : default_size;
  a.directed_recv = attr && (attr->caps & FI_DIRECTED_RECV);
  // Endpoints report senders as their own AVs name them; a directed
  // receive's src_addr is compared as given.
  a.av = nullptr;
  // Default flags of fi_recv / fi_trecv on the context: only those that
  // shape a receive.
  uint64_t op_flags = attr ? attr->op_flags & (FI_COMPLETION | FI_MULTI_RECV) : 0;
  return abi_guard([&] {
    auto s = std::make_unique<srx_ctx>(dom, prov, a, op_flags, peer_ops, context);
    *out = s.release();
    return 0;
  });
}

srx_ctx::srx_ctx(domain& dom, const fi_provider* prov, const srx_attr& a, uint64_t op_flags,
                 const fi_ops_srx_peer* peer_ops, void* context)
    : endpoint_object(FI_CLASS_SRX_CTX, context),
      domain_(&dom),
      prov_(prov),
      op_flags_(op_flags),
      locks_(a.locks()),
      engine_(std::make_unique<srx>(a)) {
  face_ = engine_->add_peer(peer_ops, this);
  with_lock_kind(locks_, [&]<class L>() {
    msg = const_cast<fi_ops_msg*>(&srx_ctx_ops<L>::msg);
    tagged = const_cast<fi_ops_tagged*>(&srx_ctx_ops<L>::tagged);
  });
}

srx_ctx::~srx_ctx() {
  // Every endpoint is gone (each held a reference) and withdrew what it
  // queued: what is left are posted receives, dropped without completions.
  with_lock_kind(locks_, [&]<class L>() { engine_->shutdown<L>(); });
}

bool srx_ctx::is(const struct fid* f) noexcept {
  return is_class(f, FI_CLASS_SRX_CTX) && f->ops == &fid_thunks<srx_ctx, fid_ep>::table;
}

int srx_ctx::attach(cq* c, av* a, bool names_by_av) noexcept {
  std::lock_guard g(ctl_);
  if (attached_ && av_.get() != a) {
    WEFT_WARN(prov_, FI_LOG_EP_CTRL,
              "fi_enable: endpoints sharing a receive context must share their AV");
    return to_fi(errc::inval);
  }
  if (!attached_) {
    attached_ = true;
    av_.reset(a);
    if (names_by_av) with_lock_kind(locks_, [&]<class L>() { engine_->name_sources_by<L>(a); });
  }
  if (c && !cq_) {
    cq_.reset(c);
    engine_->set_cq(c);
  }
  return 0;
}

int srx_ctx::close() {
  return close_if_unused(prov_, FI_LOG_EP_CTRL, "shared receive context");
}

ssize_t srx_ctx::cancel(void* context) {
  std::lock_guard g(ctl_);
  // -FI_ENOENT when no receive with this context is posted, as on endpoints.
  return with_lock_kind(locks_, [&]<class L>() { return engine_->cancel<L>(context); });
}

int srx_ctx::setopt(int level, int name, const void* val, size_t len) {
  int ret = endpoint_object::setopt(level, name, val, len);
  if (ret == 0 && name == FI_OPT_MIN_MULTI_RECV) engine_->set_min_multi_recv(min_multi_recv_);
  return ret;
}

ssize_t srx_ctx::rx_size_left() {
  return with_lock_kind(locks_, [&]<class L>() { return engine_->rx_size_left<L>(); });
}

int srx_ctx::control(int command, void* arg) {
  uint64_t tx_flags = 0;  // a receive context has no transmit side
  int ret = ops_flags_control(prov_, command, arg, tx_flags, op_flags_);
  return ret == 1 ? to_fi(errc::nosys) : ret;
}

}  // namespace weft::util
