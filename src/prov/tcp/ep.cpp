// SPDX-License-Identifier: MIT
// weft — the tcp endpoint's life: open, bindings, enable, options, names,
// cancel, close, and the bookkeeping of its connections and epoll set.
#include "core/log.hpp"
#include "prov/tcp/tcp.hpp"
#include "util/net.hpp"
#include "util/wait.hpp"

#include <sys/epoll.h>
#include <sys/timerfd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <thread>

namespace weft::tcp {

namespace {

endpoint* self(fid_t f) noexcept { return endpoint::from(f); }

int cm_getname(fid_t f, void* addr, size_t* addrlen) noexcept {
  if (!is_class_ep(f)) return to_fi(errc::inval);
  return abi_guard([&] { return self(f)->getname(addr, addrlen); });
}
int cm_setname(fid_t f, void* addr, size_t addrlen) noexcept {
  if (!is_class_ep(f)) return to_fi(errc::inval);
  return abi_guard([&] { return self(f)->setname(addr, addrlen); });
}
int cm_getpeer(fid_ep* e, void* addr, size_t* addrlen) noexcept {
  return abi_guard([&] { return endpoint::from(e)->getpeer(addr, addrlen); });
}
int cm_connect(fid_ep* e, const void* addr, const void* param, size_t len) noexcept {
  return abi_guard([&] { return endpoint::from(e)->connect(addr, param, len); });
}
int cm_accept(fid_ep* e, const void* param, size_t len) noexcept {
  return abi_guard([&] { return endpoint::from(e)->accept(param, len); });
}
int cm_shutdown(fid_ep* e, uint64_t flags) noexcept {
  return abi_guard([&] { return endpoint::from(e)->shutdown(flags); });
}

}  // namespace

bool is_class_ep(const fid* f) noexcept {
  return util::is_class(f, FI_CLASS_EP) || util::is_class(f, FI_CLASS_TX_CTX) ||
         util::is_class(f, FI_CLASS_RX_CTX);
}

const fi_ops_cm ep_cm_ops = {
    .size = sizeof(fi_ops_cm),
    .setname = cm_setname,
    .getname = cm_getname,
    .getpeer = cm_getpeer,
    .connect = cm_connect,
    WEFT_NOSYS(fi_ops_cm, listen),
    .accept = cm_accept,
    WEFT_NOSYS(fi_ops_cm, reject),
    .shutdown = cm_shutdown,
    WEFT_NOSYS(fi_ops_cm, join),
};

int endpoint::open(util::domain& dom, const fi_info& info, fid_ep** out, void* context) noexcept {
  auto* prov = &provider();
  if (!info.ep_attr || (info.ep_attr->type != FI_EP_MSG && info.ep_attr->type != FI_EP_RDM)) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "tcp offers FI_EP_MSG and FI_EP_RDM endpoints only");
    return to_fi(errc::inval);
  }
  if (!offers(dom.api_version(), info)) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "the endpoint attributes ask for more than tcp offers");
    return to_fi(errc::inval);
  }
  auto* src = static_cast<const sockaddr*>(info.src_addr);
  if (src && (!util::sockaddr_len(src) || info.src_addrlen < util::sockaddr_len(src))) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "the source address is not an IP address");
    return to_fi(errc::inval);
  }
  if (info.handle && !util::is_class(info.handle, FI_CLASS_CONNREQ)) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "info->handle is not a connection request (class %zu)",
              info.handle->fclass);
    return to_fi(errc::inval);
  }
  if (info.handle && info.ep_attr->type != FI_EP_MSG) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "a connection request is accepted by an FI_EP_MSG endpoint");
    return to_fi(errc::inval);
  }
  // Several contexts are a scalable endpoint's (fi_scalable_ep).
  if (int ret = util::refuse_several_contexts(prov, info)) return ret;
  return abi_guard([&]() -> int {
    auto ep = std::make_unique<endpoint>(dom, info, FI_CLASS_EP, context);
    if (!ep->epoll_.valid() || !ep->timer_.valid()) return to_fi(errc_of_errno(errno));
    sockaddr_storage any{};
    any.ss_family = info.addr_format == FI_SOCKADDR_IN6 ? AF_INET6 : AF_INET;
    if (ep->type_ == FI_EP_RDM) {
      const sockaddr* at = src ? src : reinterpret_cast<sockaddr*>(&any);
      if (errc e = ep->open_listener(at); e != errc::ok) return to_fi(e);
    } else if (src) {
      // fi_endpoint(3): the endpoint takes its info's source address. An
      // unpinned one (any address, port 0) leaves the choice to connect.
      std::memcpy(&ep->src_, src, util::sockaddr_len(src));
      ep->src_set_ = !util::is_any_addr(src) || util::sockaddr_port(src) != 0;
    }
    if (info.handle) {
      connreq* r = connreq::from(info.handle);
      std::unique_ptr<conn> c = r->owner->take(r);
      if (!c) {
        WEFT_WARN(prov, FI_LOG_EP_CTRL, "the connection request was already used or refused");
        return to_fi(errc::inval);
      }
      c->state = conn_state::accepting;
      c->deadline_ns = 0;
      ep->msg_conn_ = ep->adopt(std::move(c), EPOLLIN | EPOLLRDHUP);
    }
    *out = ep.release();
    return 0;
  });
}

int endpoint::open_context(util::domain& dom, const fi_info& info, size_t fclass,
                           util::unique_fd listener, uint8_t rx_index,
                           const sockaddr_storage& name, std::unique_ptr<util::sep_slot> slot,
                           fid_ep** out, void* context) noexcept {
  return abi_guard([&]() -> int {
    auto ep = std::make_unique<endpoint>(dom, info, fclass, context);
    if (!ep->epoll_.valid() || !ep->timer_.valid()) return to_fi(errc_of_errno(errno));
    peer_name n;
    if (!name_of(reinterpret_cast<const sockaddr*>(&name), n)) return to_fi(errc::addrnotavail);
    ep->sep_slot_ = std::move(slot);
    ep->listener_ = std::move(listener);  // none for a transmit context
    ep->rx_index_ = rx_index;
    ep->one_way_ = fclass == FI_CLASS_TX_CTX;
    ep->local_ = name;  // fi_getname on a context: the scalable endpoint's
    ep->local_name_ = n;
    if (ep->one_way_)  // before any bind registers the hook
      ep->hook_.fn = ep->locked_ ? &tx_ctx_progress_thunk<util::mutex_lock>
                                 : &tx_ctx_progress_thunk<util::null_lock>;
    *out = ep.release();
    return 0;
  });
}

endpoint::endpoint(util::domain& dom, const fi_info& info, size_t fclass, void* context)
    : endpoint_object(fclass, context),
      domain_(&dom),
      type_(info.ep_attr->type),
      caps_(info.caps),
      tx_op_flags_(info.tx_attr ? info.tx_attr->op_flags : 0),
      rx_op_flags_(info.rx_attr ? info.rx_attr->op_flags : 0),
      max_msg_(info.ep_attr->max_msg_size ? std::min(info.ep_attr->max_msg_size, max_msg_size)
                                          : max_msg_size),
      locked_(util::shared_objects_need_lock(dom.lock_threading())),
      epoll_(epoll_create1(EPOLL_CLOEXEC)),
      timer_(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)),
      txp_(info.tx_attr && info.tx_attr->size ? info.tx_attr->size : default_queue_size),
      rx_size_(info.rx_attr && info.rx_attr->size ? info.rx_attr->size : default_queue_size) {
  limits_.max_payload = static_cast<uint32_t>(max_msg_);
  limits_.max_rma_iov = proto::max_rma_iov;
  make_engine(nullptr);
  stalled_.reserve(16);
  stalled_work_.reserve(16);
  corked_.reserve(cork_conns);
  hook_ = locked_ ? util::progress_hook{&progress_thunk<util::mutex_lock>, this}
                  : util::progress_hook{&progress_thunk<util::null_lock>, this};
  if (epoll_.valid() && timer_.valid()) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &timer_;
    epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, timer_.get(), &ev);
  }
  cm = const_cast<fi_ops_cm*>(&ep_cm_ops);
  msg = util::writable(util::msg_badstate);
  tagged = const_cast<fi_ops_tagged*>(tagged_badstate());
}

endpoint::~endpoint() = default;

void endpoint::make_engine(const util::av* av) {
  util::srx_attr a;
  a.prov = &provider();
  a.threading = domain_->lock_threading();
  a.size = rx_size_;
  a.min_multi_recv = min_multi_recv_;
  a.directed_recv = type_ == FI_EP_RDM && (caps_ & FI_DIRECTED_RECV);
  a.av = av;
  srx_ = std::make_unique<util::srx>(a);
  face_ = srx_->add_peer(peer_table(locked_), this);
  rx_.own(srx_.get(), face_);
}

errc endpoint::open_listener(const sockaddr* addr) {
  util::unique_fd s;
  if (errc e = listen_socket(addr, 512, s); e != errc::ok) return e;
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&local), &len);
  peer_name n;
  if (!name_of(reinterpret_cast<sockaddr*>(&local), n)) return errc::addrnotavail;
  listener_ = std::move(s);
  local_ = local;
  local_name_ = n;
  return errc::ok;
}

// ---- connections ----

conn* endpoint::adopt(std::unique_ptr<conn> c, uint32_t events) noexcept {
  conn* p = c.release();
  p->prev = nullptr;
  p->next = conns_;
  if (conns_) conns_->prev = p;
  conns_ = p;
  watch(*p, events);
  if (p->staged_len()) stall(*p);  // bytes read by the passive endpoint
  return p;
}

void endpoint::watch(conn& c, uint32_t events) noexcept {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = &c;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c.fd(), &ev) == 0)
    c.events = events;
  else
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "epoll_ctl add fd %d: %s", c.fd(), std::strerror(errno));
}

void endpoint::want_out(conn& c, bool on) noexcept {
  uint32_t ev = on ? (c.events | EPOLLOUT) : (c.events & ~uint32_t{EPOLLOUT});
  if (ev == c.events || c.fd() < 0) return;
  epoll_event e{};
  e.events = ev;
  e.data.ptr = &c;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd(), &e) == 0) c.events = ev;
}

void endpoint::arm_timer(uint64_t deadline_ns) noexcept {
  if (!deadline_ns || (timer_at_ && timer_at_ <= deadline_ns)) return;
  itimerspec t{};
  t.it_value.tv_sec = static_cast<time_t>(deadline_ns / 1000000000u);
  t.it_value.tv_nsec = static_cast<long>(deadline_ns % 1000000000u);
  if (timerfd_settime(timer_.get(), TFD_TIMER_ABSTIME, &t, nullptr) == 0) timer_at_ = deadline_ns;
}

void endpoint::unwatch(conn& c) noexcept {
  if (c.fd() >= 0 && c.events) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.fd(), nullptr);
  c.events = 0;
}

void endpoint::close_fd(conn& c) noexcept {
  // Wake bytes left unread would make our close a reset to the peer, which
  // it would take for a lost connection, not an end.
  if (c.local() && c.fd() >= 0 && !c.peer_eof) c.drain_socket();
  if (c.fd() >= 0) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.fd(), nullptr);
  c.close_socket();
  c.events = 0;
}

void endpoint::retire(conn& c) noexcept {
  close_fd(c);
  unmap(c);
  c.state = conn_state::closed;
  c.deadline_ns = 0;
  sweep_needed_ = true;
}

void endpoint::stall(conn& c) noexcept {
  if (c.stalled) return;
  try {
    stalled_.push_back(&c);
    c.stalled = true;
  } catch (...) {
    // Out of memory: the bytes wait for the socket's next readiness.
  }
}

void endpoint::sweep() noexcept {
  sweep_needed_ = false;
  for (conn* c = conns_; c;) {
    conn* next = c->next;
    if (c->state == conn_state::closed && c != msg_conn_) {
      if (c->prev) c->prev->next = c->next;
      else conns_ = c->next;
      if (c->next) c->next->prev = c->prev;
      if (c->stalled) std::erase(stalled_, c);
      if (c->corked) std::erase(corked_, c);
      delete c;
    }
    c = next;
  }
}

template <class Lock>
void endpoint::teardown() noexcept {
  for (conn* c = conns_; c;) {
    conn* next = c->next;
    if (fi_peer_rx_entry* e = std::exchange(c->rx, nullptr)) {
      if (c->rx_unexp) free_unexp<Lock>(static_cast<unexp_buf*>(e->peer_context));
      rx_.free_entry<Lock>(e);
    }
    // Pool entries go with the pool; answers allocated beyond it are freed.
    for (tx_entry* t = c->take_queue(); t;) {
      tx_entry* n = t->next;
      if (t->heap) put_tx(t);
      t = n;
    }
    close_fd(*c);
    delete c;
    c = next;
  }
  conns_ = nullptr;
  msg_conn_ = nullptr;
  while (fi_peer_rx_entry* e = deferred_head_) {
    deferred_head_ = static_cast<fi_peer_rx_entry*>(e->peer_context);
    rx_.free_entry<Lock>(e);
  }
  // Unexpected messages still queued come back through discard() (under a
  // shared context retire_receives withdrew them).
  if (srx_) srx_->shutdown<Lock>();
  while (unexp_buf* b = unexp_free_) {
    unexp_free_ = b->next;
    std::free(b);
  }
}

template <class Lock>
void endpoint::retire_receives() noexcept {
  [[maybe_unused]] auto g = guard<Lock>();
  // A receive of the context this endpoint was filling: the context lives
  // on, so its owner hears of it (on our CQ, still bound).
  for (conn* c = conns_; c; c = c->next) {
    if (!c->rx || c->rx_unexp) continue;
    fail_rx<Lock>(std::exchange(c->rx, nullptr), FI_ECANCELED);
  }
  // Messages queued at the context are withdrawn: no receive of the context
  // will take them. One a receive took meanwhile (a thread posting to the
  // context) is being finished by its start_* / discard_*, which unlists it:
  // wait for that (it takes no lock held here). The list's lock is held
  // across the withdrawal: a start_* finishing meanwhile would otherwise
  // release the entry, which another message could take before we ask for
  // it. The context's engine locks here whatever the policy: a control path.
  // A start_* that took its message off the list may still be writing
  // its completion: wait for it to leave too (in_start_).
  // (util::srx_binding::engine: the application's context, or a peer
  // owner's engine that is util's, lnx's, which may be shared too.)
  util::srx* shared = shared_.engine();
  if (!shared) {
    // A peer provider's owner (fi_peer(3)) has no withdraw: what we queued
    // goes back through its free_entry (discard ends with it). The owner
    // does not start an entry of an endpoint it is closing (it serialises
    // its receive context against the close it asked for).
    for (;;) {
      unexp_buf* b;
      {
        [[maybe_unused]] auto a = aux_guard<Lock>();
        b = queued_;
        if (!b && !in_start_.load(std::memory_order_acquire)) break;
      }
      if (b)
        discard<Lock>(b->queued);
      else
        std::this_thread::yield();
    }
    return;
  }
  util::srx& engine = *shared;
  for (;;) {
    unexp_buf* b;
    bool withdrawn = false;
    {
      [[maybe_unused]] auto a = aux_guard<Lock>();
      b = queued_;
      if (!b && !in_start_.load(std::memory_order_acquire)) break;
      if (b) withdrawn = engine.withdraw<util::mutex_lock>(b->queued);
    }
    if (withdrawn) {
      free_unexp<Lock>(b);  // unlists it (nothing else holds it now)
      continue;
    }
    std::this_thread::yield();
  }
}

// ---- fi_close, fi_ep_bind, fi_control, fi_enable ----

int endpoint::close() {
  if (busy()) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_close: the endpoint is still referenced");
    return to_fi(errc::busy);
  }
  // No progress runs once the hooks are gone (and the domain's thread has
  // let go of this endpoint: remove waits for a run under way).
  if (enabled_ && domain_->progress() == FI_PROGRESS_AUTO) domain_->auto_progress().remove(this);
  if (adopted_) sep_slot_->sep().disown(this);  // likewise our transmit contexts
  // Sends still gathered leave as they would have without batching (their
  // completions go to the CQ, still bound).
  with_lock([&]<class Lock>() {
    [[maybe_unused]] auto g = guard<Lock>();
    uncork_all<Lock>();
  });
  if (enabled_ && !srx_) with_lock([&]<class Lock>() { retire_receives<Lock>(); });
  bound_.unbind(this, epoll_.get());
  with_lock([&]<class Lock>() { teardown<Lock>(); });
  delete this;
  return 0;
}

int endpoint::bind(struct fid* bfid, uint64_t flags) {
  if (enabled_) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_ep_bind after fi_enable");
    return to_fi(errc::opbadstate);
  }
  if (bfid && bfid->fclass == FI_CLASS_SRX_CTX) return bind_srx(bfid, flags);
  if (bfid && bfid->fclass == FI_CLASS_AV && sep_slot_ && !sep_slot_->admits_av(&fid))
    return to_fi(errc::inval);  // logged
  return bound_.bind(*domain_, bfid, flags, hook_, epoll_.get());
}

int endpoint::bind_srx(struct fid* f, uint64_t flags) {
  return shared_.bind(&provider(), *domain_, f, flags);
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
  if (int ret = bound_.check_enable(prov, type_, util::caps_needing_bindings(fid.fclass, caps_)))
    return ret;
  if (type_ == FI_EP_RDM && listener_.valid()) {  // a transmit context listens nowhere
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &listener_;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener_.get(), &ev) != 0) {
      WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_enable: epoll_ctl: %s", std::strerror(errno));
      return to_fi(errc_of_errno(errno));
    }
  }
  if (bound_.av_) {
    av_entry_size_ = bound_.av_->codec().entry_size;
    try {
      bound_.av_->watch(this, &av_changed);  // unwatched by bound_.unbind
    } catch (const std::bad_alloc&) {
      return to_fi(errc::nomem);
    }
  }
  const bool shared_rx = shared_.bound();
  if (shared_rx) {
    // The context's engine (or its owner's) matches for us; ours is not
    // needed. (Nothing was posted to it: the receive calls were
    // -FI_EOPBADSTATE until now.)
    fid_peer_srx* face = nullptr;
    if (int ret = shared_.attach(bound_.rx_cq.get(), bound_.av_.get(), &face)) return ret;
    rx_.share(face);
    srx_.reset();
    face_ = nullptr;
  } else {
    // Messages arrive named by their senders' user ids where the AV holds
    // some (source): the engine turns a directed receive's address into
    // that form, so it needs the AV, bound only now. Nothing was posted to
    // the first one.
    if (bound_.av_) make_engine(bound_.av_.get());
    srx_->set_cq(bound_.rx_cq.get());
    srx_->set_min_multi_recv(min_multi_recv_);
  }
  bool rdm = type_ == FI_EP_RDM;
  with_lock([&]<class Lock>() {
    msg = const_cast<fi_ops_msg*>(rdm ? msg_table<Lock, true>(shared_rx)
                                      : msg_table<Lock, false>(shared_rx));
    tagged = const_cast<fi_ops_tagged*>(rdm ? tagged_table<Lock, true>(shared_rx)
                                            : tagged_table<Lock, false>(shared_rx));
    // RMA and atomics only where the endpoint asked for them (fi_getinfo(3)
    // caps): the others keep the -FI_ENOSYS tables.
    if (caps_ & FI_RMA)
      rma = const_cast<fi_ops_rma*>(rdm ? rma_table<Lock, true>() : rma_table<Lock, false>());
    if (caps_ & FI_ATOMIC)
      atomic = const_cast<fi_ops_atomic*>(rdm ? atomic_table<Lock, true>()
                                              : atomic_table<Lock, false>());
  });
  enabled_ = true;
  cork_ok_ = domain_->progress() != FI_PROGRESS_AUTO;
  if (domain_->progress() == FI_PROGRESS_AUTO) {
    // The domain's thread sleeps on our epoll set and progresses us when a
    // socket or deadline is ready; the application's reads still may. (Added
    // last: from here on the thread may run our progress.)
    util::progress_thread::work_fn fn =
        locked_ ? &auto_work<util::mutex_lock> : &auto_work<util::null_lock>;
    if (errc e = domain_->auto_progress().add(epoll_.get(), fn, this); e != errc::ok) {
      WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_enable: cannot start automatic progress: %s",
                fi_strerror(static_cast<int>(e)));
      enabled_ = false;
      return to_fi(e);
    }
  }
  // A receive context that no CQ or counter drives is driven by its
  // transmit contexts under manual progress.
  if (sep_slot_)
    if (int ret = sep_slot_->adopt_if_undriven(fid.fclass, domain_->progress() == FI_PROGRESS_AUTO, bound_, hook_, adopted_)) {
      enabled_ = false;
      return ret;
    }
  return 0;
}

// ---- options ----

int endpoint::getopt(int level, int name, void* val, size_t* len) {
  if (level == FI_OPT_ENDPOINT && name == FI_OPT_CM_DATA_SIZE && type_ == FI_EP_MSG) {
    if (!val || !len) return to_fi(errc::inval);
    if (*len < sizeof(size_t)) return *len = sizeof(size_t), to_fi(errc::toosmall);
    *static_cast<size_t*>(val) = proto::cm_data_max;
    *len = sizeof(size_t);
    return 0;
  }
  return endpoint_object::getopt(level, name, val, len);
}

int endpoint::setopt(int level, int name, const void* val, size_t len) {
  int r = endpoint_object::setopt(level, name, val, len);
  // Under a shared context the option is the context's (fi_setopt on it).
  if (r == 0 && name == FI_OPT_MIN_MULTI_RECV && srx_) srx_->set_min_multi_recv(min_multi_recv_);
  return r;
}

ssize_t endpoint::cancel(void* context) {
  return with_lock([&]<class Lock>() -> ssize_t {
    // Receives posted to a shared context are cancelled on the context.
    ssize_t r = srx_ ? srx_->cancel<Lock>(context) : to_fi(errc::noent);
    if (r != to_fi(errc::noent) || !context) return r;
    // A transmit still queued and not begun (a frame half written must be
    // finished, or the stream would be torn) is cancelled; one on the wire
    // or awaiting its answer runs to completion.
    [[maybe_unused]] auto g = guard<Lock>();
    // A gathered send is as good as written: batching must not make one
    // cancellable that would have left at once without it.
    uncork_all<Lock>();
    for (conn* c = conns_; c; c = c->next) {
      if (tx_entry* t = c->cancel(context)) {
        fail_tx<Lock>(t, FI_ECANCELED);
        return 0;
      }
    }
    return r;
  });
}

ssize_t endpoint::rx_size_left() {
  if (!enabled_) return to_fi(errc::opbadstate);
  if (!srx_) return to_fi(errc::nosys);  // receives are the shared context's (fi_rx_size_left on it)
  return with_lock([&]<class Lock>() -> ssize_t { return srx_->rx_size_left<Lock>(); });
}

ssize_t endpoint::tx_size_left() {
  if (!enabled_) return to_fi(errc::opbadstate);
  return with_lock([&]<class Lock>() -> ssize_t {
    [[maybe_unused]] auto g = guard<Lock>();
    return static_cast<ssize_t>(txp_.available());
  });
}

// ---- names ----

namespace {

int copy_name(const sockaddr_storage& ss, void* addr, size_t* addrlen) {
  if (!addrlen) return to_fi(errc::inval);
  size_t need = util::sockaddr_len(reinterpret_cast<const sockaddr*>(&ss));
  if (!need) return to_fi(errc::opbadstate);
  size_t have = *addrlen;
  *addrlen = need;
  if (!addr || have < need) {
    if (addr && have) std::memcpy(addr, &ss, have);
    return to_fi(errc::toosmall);
  }
  std::memcpy(addr, &ss, need);
  return 0;
}

}  // namespace

int endpoint::getname(void* addr, size_t* addrlen) {
  if (type_ == FI_EP_RDM) return copy_name(local_, addr, addrlen);
  return with_lock([&]<class Lock>() -> int {
    [[maybe_unused]] auto g = guard<Lock>();
    sockaddr_storage ss = src_;
    if (msg_conn_ && msg_conn_->fd() >= 0) {
      socklen_t len = sizeof ss;
      ::getsockname(msg_conn_->fd(), reinterpret_cast<sockaddr*>(&ss), &len);
    }
    return copy_name(ss, addr, addrlen);
  });
}

int endpoint::getpeer(void* addr, size_t* addrlen) {
  if (type_ != FI_EP_MSG) return to_fi(errc::nosys);
  return with_lock([&]<class Lock>() -> int {
    [[maybe_unused]] auto g = guard<Lock>();
    if (!msg_conn_ || msg_conn_->state == conn_state::connecting) return to_fi(errc::notconn);
    return copy_name(msg_conn_->peer, addr, addrlen);
  });
}

int endpoint::setname(const void* addr, size_t addrlen) {
  auto* sa = static_cast<const sockaddr*>(addr);
  if (!addr || !util::sockaddr_len(sa) || addrlen < util::sockaddr_len(sa)) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_setname: not an IP address");
    return to_fi(errc::inval);
  }
  if (enabled_ || connect_called_ || msg_conn_) return to_fi(errc::opbadstate);
  if (sep_slot_) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL,
              "fi_setname: a context is named by its scalable endpoint");
    return to_fi(errc::opbadstate);
  }
  if (type_ == FI_EP_MSG) {
    std::memcpy(&src_, sa, util::sockaddr_len(sa));
    src_set_ = true;
    return 0;
  }
  util::unique_fd keep{listener_.release()};
  if (errc e = open_listener(sa); e != errc::ok) {
    listener_ = std::move(keep);
    return to_fi(e);
  }
  return 0;
}

template void endpoint::retire_receives<util::null_lock>() noexcept;
template void endpoint::retire_receives<util::mutex_lock>() noexcept;

}  // namespace weft::tcp
