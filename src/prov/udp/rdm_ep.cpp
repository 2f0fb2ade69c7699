// SPDX-License-Identifier: MIT
// weft — the udp RDM endpoint: socket, names, bindings, enable, cancel, close.
#include "core/log.hpp"
#include "prov/udp/rdm.hpp"
#include "util/av.hpp"
#include "util/info_match.hpp"
#include "util/net.hpp"
#include "util/progress_thread.hpp"
#include "util/wait.hpp"

#include <rdma/fi_cm.h>

#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <random>
#include <type_traits>

namespace weft::udp {

namespace {

bool is_rdm_ep(const fid* f) noexcept {
  return util::is_class(f, FI_CLASS_EP) || util::is_class(f, FI_CLASS_TX_CTX) ||
         util::is_class(f, FI_CLASS_RX_CTX);
}

int cm_getname(fid_t f, void* addr, size_t* addrlen) noexcept {
  if (!is_rdm_ep(f)) return to_fi(errc::inval);
  return rdm_endpoint::from(f)->getname(addr, addrlen);
}
int cm_setname(fid_t f, void* addr, size_t addrlen) noexcept {
  if (!is_rdm_ep(f)) return to_fi(errc::inval);
  return rdm_endpoint::from(f)->setname(addr, addrlen);
}

const fi_ops_cm rdm_cm_ops = util::cm_name_only(cm_getname, cm_setname);

constexpr fi_ops_tagged tagged_badstate_table = {
    .size = sizeof(fi_ops_tagged),
    WEFT_FAIL(opbadstate, fi_ops_tagged, recv),    WEFT_FAIL(opbadstate, fi_ops_tagged, recvv),
    WEFT_FAIL(opbadstate, fi_ops_tagged, recvmsg), WEFT_FAIL(opbadstate, fi_ops_tagged, send),
    WEFT_FAIL(opbadstate, fi_ops_tagged, sendv),   WEFT_FAIL(opbadstate, fi_ops_tagged, sendmsg),
    WEFT_FAIL(opbadstate, fi_ops_tagged, inject),  WEFT_FAIL(opbadstate, fi_ops_tagged, senddata),
    WEFT_FAIL(opbadstate, fi_ops_tagged, injectdata),
};

// The socket buffers asked for: the kernel clamps them to net.core.rmem_max
// and wmem_max. What the receive buffer really holds bounds the window we
// advertise.
constexpr int socket_buffer = 4 << 20;

}  // namespace

int rdm_endpoint::open(util::domain& dom, const fi_info& info, fid_ep** out,
                       void* context) noexcept {
  auto* prov = &provider();
  if (!offers(dom.api_version(), info)) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "the endpoint attributes ask for more than udp RDM offers");
    return to_fi(errc::inval);
  }
  if (info.src_addr && !util::sockaddr_len(static_cast<const sockaddr*>(info.src_addr))) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "the source address is not an IP address");
    return to_fi(errc::inval);
  }
  // Several contexts are a scalable endpoint's (fi_scalable_ep).
  if (int ret = util::refuse_several_contexts(prov, info)) return ret;
  return abi_guard([&]() -> int {
    auto ep = std::make_unique<rdm_endpoint>(dom, info, FI_CLASS_EP, context);
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

int rdm_endpoint::open_context(util::domain& dom, const fi_info& info, size_t fclass,
                               util::unique_fd s, uint8_t rx_index, const sockaddr_storage& name,
                               std::unique_ptr<util::sep_slot> slot, fid_ep** out,
                               void* context) noexcept {
  return abi_guard([&]() -> int {
    auto ep = std::make_unique<rdm_endpoint>(dom, info, fclass, context);
    ep->take_socket(std::move(s));
    ep->sep_slot_ = std::move(slot);
    ep->rx_index_ = rx_index;
    ep->name_port_ = util::sockaddr_port(reinterpret_cast<const sockaddr*>(&name));
    // fi_getname on a context: the scalable endpoint's.
    ep->local_ = name;
    ep->local_len_ = util::sockaddr_len(reinterpret_cast<const sockaddr*>(&name));
    if (fclass == FI_CLASS_TX_CTX)  // before any bind registers the hook
      ep->hook_.fn = ep->locked_ ? &tx_ctx_progress_thunk<util::mutex_lock>
                                 : &tx_ctx_progress_thunk<util::null_lock>;
    *out = ep.release();
    return 0;
  });
}

rdm_endpoint::rdm_endpoint(util::domain& dom, const fi_info& info, size_t fclass, void* context)
    : endpoint_object(fclass, context),
      domain_(&dom),
      caps_(info.caps),
      tx_op_flags_(info.tx_attr ? info.tx_attr->op_flags : 0),
      rx_op_flags_(info.rx_attr ? info.rx_attr->op_flags : 0),
      max_msg_(info.ep_attr->max_msg_size ? std::min(info.ep_attr->max_msg_size, rdm_max_msg)
                                          : rdm_max_msg),
      tx_size_(info.tx_attr && info.tx_attr->size ? info.tx_attr->size : 1024),
      // Under automatic progress the domain's thread is a second user of the
      // endpoint: it locks whatever the application's threading model.
      locked_(util::shared_objects_need_lock(dom.lock_threading())),
      auto_(dom.progress() == FI_PROGRESS_AUTO) {
  std::random_device rd;
  epoch_seed_ = (uint64_t(rd()) << 32) ^ rd() ^ util::now_ns();
  rd_cfg_.peer_timeout_ns = cfg().rdm_peer_timeout_ms * 1'000'000ull;
  // Several resend rounds must fit in the peer timeout, or two losses in a
  // row at the largest back-off would be taken for a dead peer.
  rd_cfg_.rto_max_us = uint32_t(std::clamp<uint64_t>(cfg().rdm_peer_timeout_ms * 1000 / 8,
                                                      rd_cfg_.rto_min_us, rd_cfg_.rto_max_us));
  // This endpoint on the wire, for its whole life (rd_proto.hpp).
  rd_cfg_.instance = uint32_t(rd()) | 1u;
  hold_acks_ = !auto_ && cfg().rdm_ack_hold;
  if (cfg().rdm_peer_idle_ms)
    idle_ns_ = std::max(cfg().rdm_peer_idle_ms, 2 * cfg().rdm_peer_timeout_ms) * 1'000'000ull;
  rx_size_ = info.rx_attr && info.rx_attr->size ? info.rx_attr->size : 1024;
  static_assert(std::is_trivially_default_constructible_v<rdm_tx> &&
                std::is_trivially_destructible_v<rdm_tx>);
  tx_pool_ = std::make_unique_for_overwrite<rdm_tx[]>(tx_size_);  // untouched
  tx_free_count_ = tx_size_;
  rxbuf_ = std::make_unique_for_overwrite<std::byte[]>(proto::max_payload + 1);  // untouched until used
  busy_.reserve(64);
  ack_list_.reserve(64);
  hook_ = locked_ ? util::progress_hook{&progress_thunk<util::mutex_lock>, this}
                  : util::progress_hook{&progress_thunk<util::null_lock>, this};
  cm = const_cast<fi_ops_cm*>(&rdm_cm_ops);
  msg = util::writable(util::msg_badstate);
  tagged = const_cast<fi_ops_tagged*>(&tagged_badstate_table);
}

rdm_endpoint::~rdm_endpoint() = default;

errc rdm_endpoint::open_socket(const sockaddr* addr, socklen_t len) {
  util::unique_fd s{::socket(addr->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
  if (!s.valid() || ::bind(s.get(), addr, len) != 0) {
    int e = errno;
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "cannot open a UDP socket on %s: %s",
              util::format_sockaddr(addr).c_str(), std::strerror(e));
    return e == EADDRINUSE ? errc::addrinuse : e == EADDRNOTAVAIL ? errc::addrnotavail
           : e == EMFILE                      ? errc::mfile
                                              : errc::other;
  }
  take_socket(std::move(s));
  return errc::ok;
}

void rdm_endpoint::take_socket(util::unique_fd s) noexcept {
  int size = socket_buffer;
  setsockopt(s.get(), SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  setsockopt(s.get(), SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  int got = 0;
  socklen_t gl = sizeof got;
  getsockopt(s.get(), SOL_SOCKET, SO_RCVBUF, &got, &gl);
  // Advertise what the receive buffer holds of full datagrams: the kernel
  // charges a datagram about twice its payload against the buffer's
  // (doubled) size. At least the protocol's minimum; a burst beyond what the
  // buffer takes is lost and sent again.
  rd_cfg_.window = std::clamp<uint32_t>(uint32_t(got) / (2 * uint32_t(rdm_max_seg + 1024)),
                                        util::rd::min_window, 256);
  local_len_ = sizeof local_;
  ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&local_), &local_len_);
  sock_ = std::move(s);
  held_.set_socket(sock_.get());
}

int rdm_endpoint::close() {
  if (busy()) return to_fi(errc::busy);
  // The domain's thread lets go of us first (remove waits for a run under way).
  if (enabled_ && auto_) domain_->auto_progress().remove(this);
  if (adopted_) sep_slot_->sep().disown(this);  // likewise our transmit contexts
  // A held acknowledgement goes now (a peer may wait for it), and the keeper
  // lets go of our socket.
  with_lock([&]<class Lock>() {
    [[maybe_unused]] auto g = guard<Lock>();
    if (auto* p = static_cast<rdm_peer*>(const_cast<void*>(held_.take()))) send_ack(*p);
  });
  held_.close();
  // Under a shared context (which outlives us): what we were filling fails
  // and what we queued is withdrawn, while our CQ is still bound.
  if (enabled_ && !srx_) with_lock([&]<class Lock>() { retire_receives<Lock>(); });
  // Finished receives still waiting for CQ room: what room there is takes
  // them; the others' entries go back without a completion.
  with_lock([&]<class Lock>() {
    flush_rx_deferred<Lock>();
    if (!rx_deferred_.empty())
      WEFT_WARN(&provider(), FI_LOG_EP_CTRL,
                "fi_close: %zu receive completions dropped, the CQ being full",
                rx_deferred_.size());
    for (fi_peer_rx_entry* e : std::exchange(rx_deferred_, {})) rx_.free_entry<Lock>(e);
  });
  bound_.unbind(this, waitset_.valid() ? waitset_.get() : -1);
  if (srx_) with_lock([&]<class Lock>() {
    // Messages half-received or queued unexpected go back to the engine
    // while this endpoint's peer face is still valid.
    for (auto& [key, p] : peers_) {
      if (fi_peer_rx_entry* e = std::exchange(p.rx, nullptr)) {
        if (p.rx_unexp) {
          free_unexp(static_cast<rdm_unexp*>(e->peer_context));
          e->peer_context = nullptr;
          srx_->free_entry<Lock>(e);
        }
      }
    }
    srx_->shutdown<Lock>();
  });
  delete this;
  return 0;
}

int rdm_endpoint::bind(struct fid* bfid, uint64_t flags) {
  if (enabled_) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_ep_bind after fi_enable");
    return to_fi(errc::opbadstate);
  }
  if (bfid && bfid->fclass == FI_CLASS_SRX_CTX) return bind_srx(bfid, flags);
  if (bfid && bfid->fclass == FI_CLASS_AV && sep_slot_ && !sep_slot_->admits_av(&fid))
    return to_fi(errc::inval);  // logged
  // A CQ or counter someone may sleep on watches our wait set (the socket
  // and the timer: tick_for_sleepers). The set is opened with the first
  // such binding, so an endpoint only polled costs one descriptor.
  const bool sleepable =
      bfid && ((bfid->fclass == FI_CLASS_CQ && util::cq::from(bfid)->waiter()) ||
               (bfid->fclass == FI_CLASS_CNTR && util::cntr::from(bfid)->waiter()));
  if (sleepable && !waitset_.valid())
    if (errc e = open_waitset(); e != errc::ok) return to_fi(e);
  return bound_.bind(*domain_, bfid, flags, hook_, waitset_.valid() ? waitset_.get() : -1);
}

int rdm_endpoint::bind_srx(struct fid* f, uint64_t flags) {
  return shared_.bind(&provider(), *domain_, f, flags);
}

int rdm_endpoint::control(int command, void* arg) {
  switch (command) {
    case FI_ENABLE: return enable();
    default: {
      int ret = util::ops_flags_control(&provider(), command, arg, tx_op_flags_, rx_op_flags_);
      return ret == 1 ? to_fi(errc::nosys) : ret;
    }
  }
}

int rdm_endpoint::enable() {
  if (enabled_) return 0;
  if (int ret = bound_.check_enable(&provider(), FI_EP_RDM,
                                    util::caps_needing_bindings(fid.fclass, caps_)))
    return ret;
  want_source_ = (caps_ & FI_SOURCE) != 0;
  if (bound_.av_) {
    try {
      bound_.av_->watch(this, &av_changed);  // unwatched by bound_.unbind
    } catch (const std::bad_alloc&) {
      return to_fi(errc::nomem);
    }
  }
  // The matching engine is made here, once the AV is bound: a directed
  // receive's source is turned into the form completions report (the user
  // id under FI_AV_USER_ID).
  // Under a shared receive context its engine matches for us (the
  // context's first endpoint fixes the AV every other one must use).
  const bool shared_rx = shared_.bound();
  if (shared_rx) {
    fid_peer_srx* face = nullptr;
    if (int ret = shared_.attach(bound_.rx_cq.get(), bound_.av_.get(), &face)) return ret;
    rx_.share(face);
  } else {
    try {
      util::srx_attr a;
      a.prov = &provider();
      a.rx_cq = bound_.rx_cq.get();
      a.threading = domain_->lock_threading();
      a.size = rx_size_;
      a.min_multi_recv = min_multi_recv_;
      a.directed_recv = (caps_ & FI_DIRECTED_RECV) != 0;
      a.av = bound_.av_.get();
      srx_ = std::make_unique<util::srx>(a);
      face_ = srx_->add_peer(peer_table(locked_), this);
      rx_.own(srx_.get(), face_);
    } catch (const std::bad_alloc&) {
      return to_fi(errc::nomem);
    }
  }
  with_lock([&]<class Lock>() {
    msg = const_cast<fi_ops_msg*>(msg_table<Lock>(shared_rx));
    tagged = const_cast<fi_ops_tagged*>(tagged_table<Lock>(shared_rx));
    // RMA and atomics where the endpoint asked for them; the others keep
    // the -FI_ENOSYS tables.
    if (caps_ & FI_RMA) rma = const_cast<fi_ops_rma*>(rma_table<Lock>());
    if (caps_ & FI_ATOMIC) atomic = const_cast<fi_ops_atomic*>(atomic_table<Lock>());
  });
  enabled_ = true;
  if (auto_) {
    if (errc e = start_auto(); e != errc::ok) {
      enabled_ = false;
      return to_fi(e);
    }
  }
  // A receive context that no CQ or counter drives is driven by its
  // transmit contexts under manual progress.
  if (sep_slot_)
    if (int ret = sep_slot_->adopt_if_undriven(fid.fclass, auto_, bound_, hook_, adopted_)) {
      enabled_ = false;
      return ret;
    }
  return 0;
}

errc rdm_endpoint::open_waitset() noexcept {
  util::unique_fd set{::epoll_create1(EPOLL_CLOEXEC)};
  util::unique_fd timer{::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)};
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (!set.valid() || !timer.valid() ||
      ::epoll_ctl(set.get(), EPOLL_CTL_ADD, sock_.get(), &ev) != 0 ||
      ::epoll_ctl(set.get(), EPOLL_CTL_ADD, timer.get(), &ev) != 0) {
    const int e = errno;
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL,
              "udp RDM: an endpoint that may be slept on needs an epoll set and a timer: %s",
              std::strerror(e));
    return e == ENOMEM ? errc::nomem : errc::mfile;
  }
  waitset_ = std::move(set);
  timer_ = std::move(timer);
  return errc::ok;
}

errc rdm_endpoint::start_auto() noexcept {
  if (!waitset_.valid())
    if (errc e = open_waitset(); e != errc::ok) return e;
  // Last: from here on the domain's thread may run our progress.
  util::progress_thread::work_fn fn =
      locked_ ? &auto_work<util::mutex_lock> : &auto_work<util::null_lock>;
  if (errc e = domain_->auto_progress().add(waitset_.get(), fn, this); e != errc::ok) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_enable: cannot start automatic progress: %s",
              fi_strerror(static_cast<int>(e)));
    return e;
  }
  return errc::ok;
}

int rdm_endpoint::setopt(int level, int name, const void* val, size_t len) {
  int r = endpoint_object::setopt(level, name, val, len);
  if (r == 0 && name == FI_OPT_MIN_MULTI_RECV && srx_) srx_->set_min_multi_recv(min_multi_recv_);
  return r;
}

int rdm_endpoint::getname(void* addr, size_t* addrlen) {
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

int rdm_endpoint::setname(const void* addr, size_t addrlen) {
  auto* sa = static_cast<const sockaddr*>(addr);
  if (!addr || addrlen < util::sockaddr_len(sa) || !util::sockaddr_len(sa)) return to_fi(errc::inval);
  if (enabled_) return to_fi(errc::opbadstate);
  if (sep_slot_) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL,
              "fi_setname: a context is named by its scalable endpoint");
    return to_fi(errc::opbadstate);
  }
  int old = sock_.get();
  const sockaddr_storage old_local = local_;
  const socklen_t old_len = local_len_;
  const uint32_t old_window = rd_cfg_.window;
  util::unique_fd keep{sock_.release()};
  if (errc e = open_socket(sa, util::sockaddr_len(sa)); e != errc::ok) {
    sock_ = std::move(keep);
    return to_fi(e);
  }
  if (!waitset_.valid()) return 0;
  // Sleepers wait on the set, which now watches the new socket.
  epoll_event ev{};
  ev.events = EPOLLIN;
  ::epoll_ctl(waitset_.get(), EPOLL_CTL_DEL, old, nullptr);
  if (::epoll_ctl(waitset_.get(), EPOLL_CTL_ADD, sock_.get(), &ev) != 0) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_setname: cannot watch the new socket: %s",
              std::strerror(errno));
    ::epoll_ctl(waitset_.get(), EPOLL_CTL_ADD, old, &ev);
    sock_ = std::move(keep);
    local_ = old_local;
    local_len_ = old_len;
    rd_cfg_.window = old_window;
    return to_fi(errc::mfile);
  }
  return 0;
}

ssize_t rdm_endpoint::cancel(void* context) {
  if (!srx_) return to_fi(errc::noent);
  ssize_t r = 0;
  with_lock([&]<class Lock>() { r = srx_->cancel<Lock>(context); });
  // -FI_ENOENT when no receive has that context (as every weft endpoint
  // answers). Sends are not cancelled: once queued they are the peer's to
  // acknowledge.
  return r;
}

ssize_t rdm_endpoint::rx_size_left() {
  if (!enabled_) return to_fi(errc::opbadstate);
  if (!srx_) return to_fi(errc::nosys);  // receives are the shared context's (fi_rx_size_left on it)
  ssize_t r = 0;
  with_lock([&]<class Lock>() { r = srx_->rx_size_left<Lock>(); });
  return r;
}

ssize_t rdm_endpoint::tx_size_left() {
  if (!enabled_) return to_fi(errc::opbadstate);
  auto g = std::unique_lock<util::fast_mutex>{lock_.m, std::defer_lock};
  if (locked_) g.lock();
  return static_cast<ssize_t>(tx_free_count_);
}

rdm_tx* rdm_endpoint::take_tx() noexcept {
  rdm_tx* t = tx_free_;
  if (t) {
    tx_free_ = t->next;
  } else {
    if (tx_carved_ == tx_size_) return nullptr;
    t = new (&tx_pool_[tx_carved_++]) rdm_tx();  // first use: zeroed, as the pool was
  }
  --tx_free_count_;
  t->next = nullptr;
  return t;
}

void rdm_endpoint::put_tx(rdm_tx* t) noexcept {
  t->next = tx_free_;
  tx_free_ = t;
  ++tx_free_count_;
}

}  // namespace weft::udp
