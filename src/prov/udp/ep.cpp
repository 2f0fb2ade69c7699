// SPDX-License-Identifier: MIT
// weft — the udp endpoint: socket, names, bindings, enable, cancel, close.
#include "core/log.hpp"
#include "prov/udp/udp.hpp"
#include "util/info_match.hpp"
#include "util/net.hpp"
#include "util/progress_thread.hpp"

#include <fcntl.h>
#include <rdma/fi_cm.h>

#include <bit>
#include <type_traits>
#include <cerrno>
#include <cstring>

namespace weft::udp {

namespace {

// fi_ops_cm: a datagram endpoint has a name and nothing to connect.
int cm_getname(fid_t f, void* addr, size_t* addrlen) noexcept {
  if (!is_class_ep(f)) return to_fi(errc::inval);
  return endpoint::from(f)->getname(addr, addrlen);
}
int cm_setname(fid_t f, void* addr, size_t addrlen) noexcept {
  if (!is_class_ep(f)) return to_fi(errc::inval);
  return endpoint::from(f)->setname(addr, addrlen);
}

}  // namespace

bool is_class_ep(const fid* f) noexcept {
  return util::is_class(f, FI_CLASS_EP) || util::is_class(f, FI_CLASS_TX_CTX) ||
         util::is_class(f, FI_CLASS_RX_CTX);
}

const fi_ops_cm cm_ops = util::cm_name_only(cm_getname, cm_setname);

int endpoint::open(util::domain& dom, const fi_info& info, fid_ep** out, void* context) noexcept {
  auto* prov = &provider();
  if (!info.ep_attr || info.ep_attr->type != FI_EP_DGRAM) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "udp offers FI_EP_DGRAM endpoints only");
    return to_fi(errc::inval);
  }
  if (!offers(dom.api_version(), info)) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "the endpoint attributes ask for more than udp offers");
    return to_fi(errc::inval);
  }
  if (info.src_addr && !util::sockaddr_len(static_cast<const sockaddr*>(info.src_addr))) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "the source address is not an IP address");
    return to_fi(errc::inval);
  }
  // Several contexts are a scalable endpoint's (fi_scalable_ep).
  if (int ret = util::refuse_several_contexts(prov, info)) return ret;
  return abi_guard([&]() -> int {
    auto ep = std::make_unique<endpoint>(dom, info, FI_CLASS_EP, context);
    const sockaddr* src = static_cast<const sockaddr*>(info.src_addr);
    sockaddr_storage any{};
    if (!src) {
      any.ss_family = info.addr_format == FI_SOCKADDR_IN6 ? AF_INET6 : AF_INET;
      src = reinterpret_cast<sockaddr*>(&any);
    }
    if (errc e = ep->open_socket(src, util::sockaddr_len(src)); e != errc::ok) return to_fi(e);
    *out = ep.release();
    return 0;
  });
}

int endpoint::open_context(util::domain& dom, const fi_info& info, size_t fclass,
                           util::unique_fd s, const sockaddr_storage& name,
                           std::unique_ptr<util::sep_slot> slot, fid_ep** out,
                           void* context) noexcept {
  return abi_guard([&]() -> int {
    auto ep = std::make_unique<endpoint>(dom, info, fclass, context);
    ep->family_ = name.ss_family;
    ep->sock_ = std::move(s);
    ep->sep_slot_ = std::move(slot);
    ep->tx_ctx_ = fclass == FI_CLASS_TX_CTX;
    // fi_getname on a context: the scalable endpoint's.
    ep->local_ = name;
    ep->local_len_ = util::sockaddr_len(reinterpret_cast<const sockaddr*>(&name));
    if (ep->tx_ctx_)  // before any bind registers the hook
      ep->hook_.fn = ep->locked_ ? &tx_ctx_progress_thunk<util::mutex_lock>
                                 : &tx_ctx_progress_thunk<util::null_lock>;
    *out = ep.release();
    return 0;
  });
}

endpoint::endpoint(util::domain& dom, const fi_info& info, size_t fclass, void* context)
    : endpoint_object(fclass, context),
      domain_(&dom),
      family_(AF_INET),
      caps_(info.caps),
      tx_op_flags_(info.tx_attr ? info.tx_attr->op_flags : 0),
      rx_op_flags_(info.rx_attr ? info.rx_attr->op_flags : 0),
      max_msg_(info.ep_attr->max_msg_size ? info.ep_attr->max_msg_size : proto::max_payload),
      // Under automatic progress the domain's thread is a second user of the
      // endpoint: it locks whatever the application's threading model.
      locked_(util::shared_objects_need_lock(dom.lock_threading())),
      auto_(dom.progress() == FI_PROGRESS_AUTO) {
  size_t rx_size = info.rx_attr && info.rx_attr->size ? info.rx_attr->size : 1024;
  size_t cap = std::bit_ceil(rx_size);
  // Every field is written when a receive is posted: the ring's pages are
  // touched only as far as receives have reached (an idle endpoint costs
  // no 80 KB of zeroes).
  static_assert(std::is_trivially_default_constructible_v<rx_entry>);
  rx_ = std::make_unique_for_overwrite<rx_entry[]>(cap);
  rx_mask_ = cap - 1;
  hook_ = locked_ ? util::progress_hook{&progress_thunk<util::mutex_lock>, this}
                  : util::progress_hook{&progress_thunk<util::null_lock>, this};
  cm = const_cast<fi_ops_cm*>(&cm_ops);
  msg = util::writable(util::msg_badstate);
}

endpoint::~endpoint() = default;

errc endpoint::open_socket(const sockaddr* addr, socklen_t len) {
  util::unique_fd s{::socket(addr->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
  if (!s.valid() || ::bind(s.get(), addr, len) != 0) {
    int e = errno;
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "cannot open a UDP socket on %s: %s",
              util::format_sockaddr(addr).c_str(), std::strerror(e));
    return e == EADDRINUSE ? errc::addrinuse : e == EADDRNOTAVAIL ? errc::addrnotavail
           : e == EMFILE                      ? errc::mfile
                                              : errc::other;
  }
  local_len_ = sizeof local_;
  ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&local_), &local_len_);
  family_ = addr->sa_family;
  sock_ = std::move(s);
  return errc::ok;
}

int endpoint::close() {
  if (busy()) return to_fi(errc::busy);
  // The domain's thread lets go of us first (remove waits for a run under way).
  if (enabled_ && auto_ && !tx_ctx_) domain_->auto_progress().remove(this);
  if (adopted_) sep_slot_->sep().disown(this);  // likewise our transmit contexts
  bound_.unbind(this, watch_fd());
  delete this;
  return 0;
}

int endpoint::bind(struct fid* bfid, uint64_t flags) {
  if (enabled_) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_ep_bind after fi_enable");
    return to_fi(errc::opbadstate);
  }
  if (bfid && bfid->fclass == FI_CLASS_AV && sep_slot_ && !sep_slot_->admits_av(&fid))
    return to_fi(errc::inval);  // logged
  return bound_.bind(*domain_, bfid, flags, hook_, watch_fd());
}

int endpoint::control(int command, void* arg) {
  switch (command) {
    case FI_ENABLE: return enable();
    default: {
      int ret = util::ops_flags_control(&provider(), command, arg, tx_op_flags_, rx_op_flags_);
      return ret == 1 ? to_fi(errc::nosys) : ret;
    }
  }
}

int endpoint::enable() {
  if (enabled_) return 0;
  auto* prov = &provider();
  if (int ret = bound_.check_enable(prov, FI_EP_DGRAM,
                                    util::caps_needing_bindings(fid.fclass, caps_)))
    return ret;
  want_source_ = (caps_ & FI_SOURCE) != 0;
  msg = const_cast<fi_ops_msg*>(locked_ ? msg_table<util::mutex_lock>()
                                        : msg_table<util::null_lock>());
  enabled_ = true;
  // A receive context that no CQ or counter drives is driven by its
  // transmit contexts under manual progress.
  if (sep_slot_)
    if (int ret = sep_slot_->adopt_if_undriven(fid.fclass, auto_, bound_, hook_, adopted_)) {
      enabled_ = false;
      return ret;
    }
  if (auto_ && !tx_ctx_) {
    // Last: from here on the domain's thread may receive for us. It sleeps
    // on the socket itself.
    util::progress_thread::work_fn fn =
        locked_ ? &auto_work<util::mutex_lock> : &auto_work<util::null_lock>;
    if (errc e = domain_->auto_progress().add(sock_.get(), fn, this); e != errc::ok) {
      WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_enable: cannot start automatic progress: %s",
                fi_strerror(static_cast<int>(e)));
      enabled_ = false;
      return to_fi(e);
    }
  }
  return 0;
}

int endpoint::getname(void* addr, size_t* addrlen) {
  if (!addrlen) return to_fi(errc::inval);
  size_t need = local_len_;
  if (!addr || *addrlen < need) {
    *addrlen = need;
    return to_fi(errc::toosmall);
  }
  std::memcpy(addr, &local_, need);
  *addrlen = need;
  return 0;
}

int endpoint::setname(const void* addr, size_t addrlen) {
  auto* sa = static_cast<const sockaddr*>(addr);
  if (!addr || addrlen < util::sockaddr_len(sa) || !util::sockaddr_len(sa)) return to_fi(errc::inval);
  if (enabled_) return to_fi(errc::opbadstate);
  if (sep_slot_) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL,
              "fi_setname: a context is named by its scalable endpoint");
    return to_fi(errc::opbadstate);
  }
  // Rebinding moves the socket: leave the wait sets the old one joined.
  int old = sock_.get();
  util::unique_fd keep{sock_.release()};
  if (errc e = open_socket(sa, util::sockaddr_len(sa)); e != errc::ok) {
    sock_ = std::move(keep);
    return to_fi(e);
  }
  for (util::cq* c : {bound_.tx_bound(), bound_.rx_bound()})
    if (c) c->remove_wait_fd(old), c->add_wait_fd(sock_.get());
  return 0;
}

ssize_t endpoint::cancel(void* context) {
  auto g = std::unique_lock<util::fast_mutex>{lock_.m, std::defer_lock};
  if (locked_) g.lock();
  for (uint64_t i = rx_head_; i != rx_tail_; ++i) {
    rx_entry& e = rx_[i & rx_mask_];
    if (e.canceled || e.context != context) continue;
    e.canceled = true;
    if (bound_.rx_cq) {
      fi_cq_err_entry err{};
      err.op_context = context;
      err.flags = FI_RECV | FI_MSG | (e.flags & FI_MULTI_RECV);
      err.err = FI_ECANCELED;
      err.prov_errno = -FI_ECANCELED;
      err.src_addr = FI_ADDR_NOTAVAIL;
      bool ok = locked_ ? bound_.rx_cq->write_error<util::mutex_lock>(err)
                        : bound_.rx_cq->write_error<util::null_lock>(err);
      (void)ok;  // a full CQ: the receive is gone either way, as fi_cancel allows
    }
    return 0;
  }
  return to_fi(errc::noent);
}

ssize_t endpoint::rx_size_left() {
  if (!enabled_) return to_fi(errc::opbadstate);
  return static_cast<ssize_t>(rx_mask_ + 1 - (rx_tail_ - rx_head_));
}

ssize_t endpoint::tx_size_left() {
  if (!enabled_) return to_fi(errc::opbadstate);
  return 1024;  // sends complete at once: never queued
}

}  // namespace weft::udp
