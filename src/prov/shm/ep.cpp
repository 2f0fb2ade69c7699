// SPDX-License-Identifier: MIT
// weft — the shm endpoint: its region, name, bindings, enable, cancel, close.
#include "core/log.hpp"
#include "prov/shm/shm.hpp"

#include <rdma/fi_cm.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace weft::shm {

namespace {

// Endpoint indices name regions; never reused within a process, so a stale
// AV entry cannot reach a later endpoint of the same process.
std::atomic<uint32_t> next_index{0};

int cm_getname(fid_t f, void* addr, size_t* addrlen) noexcept {
  if (!is_class_ep(f)) return to_fi(errc::inval);
  return endpoint::from(f)->getname(addr, addrlen);
}

// No setname: regions are named by process and index.
const fi_ops_cm cm_ops = util::cm_name_only(cm_getname);

// The timer's period while transfers are under way (bounce chunks and
// liveness checks need progress that no message announces) and otherwise
// (only the sweep for dead senders; messages wake a sleeper through the
// FIFO). Without a FIFO, the fast one always.
constexpr uint64_t busy_tick_ns = 1'000'000;
constexpr uint64_t idle_tick_ns = 100'000'000;
// Under automatic progress while the application polls (and nothing else
// needs the fast tick), the tick only notices when it stops: the period
// starts at busy_tick_ns and doubles at each tick that finds it still
// polling, up to this. Every tick wakes the progress thread, which preempts
// a core the application spins on: in hand runs of bench/auto_progress.c
// a 1 ms tick was most of what automatic progress still cost the 8-byte
// ping-pong after the handoff, a 10 ms one little of it.
constexpr uint64_t poll_tick_max_ns = 8'000'000;

void add_to(int epfd, int fd) noexcept {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  ::epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

}  // namespace

bool is_class_ep(const fid* f) noexcept {
  return util::is_class(f, FI_CLASS_EP) || util::is_class(f, FI_CLASS_TX_CTX) ||
         util::is_class(f, FI_CLASS_RX_CTX);
}

namespace {

// What fi_endpoint and fi_tx_context / fi_rx_context check alike.
int check_open(util::domain& dom, const fi_info& info, uint64_t& pidns) noexcept {
  auto* prov = &provider();
  if (!info.ep_attr || info.ep_attr->type != FI_EP_RDM) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "shm offers FI_EP_RDM endpoints only");
    return to_fi(errc::inval);
  }
  if (!offers(dom.api_version(), info)) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "the endpoint attributes ask for more than shm offers");
    return to_fi(errc::inval);
  }
  pidns = pid_namespace_id();
  if (pidns > UINT32_MAX) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "PID namespace inode %llu does not fit an shm address",
              static_cast<unsigned long long>(pidns));
    return to_fi(errc::nosys);
  }
  return 0;
}

}  // namespace

uint32_t endpoint::take_index() noexcept {
  uint32_t i = next_index.fetch_add(1, std::memory_order_relaxed);
  return i < plain_index_limit ? i : plain_index_limit;
}

int endpoint::open(util::domain& dom, const fi_info& info, fid_ep** out, void* context) noexcept {
  auto* prov = &provider();
  uint64_t pidns;
  if (int ret = check_open(dom, info, pidns)) return ret;
  // Several contexts are a scalable endpoint's (fi_scalable_ep).
  if (int ret = util::refuse_several_contexts(prov, info)) return ret;
  return abi_guard([&]() -> int {
    auto ep = std::make_unique<endpoint>(dom, info, FI_CLASS_EP, context);
    errc e = errc::addrinuse;
    uint32_t index = 0;
    for (int attempt = 0; attempt < 4 && e == errc::addrinuse; ++attempt) {
      if ((index = take_index()) == plain_index_limit) {
        WEFT_WARN(prov, FI_LOG_EP_CTRL,
                  "fi_endpoint: this process has opened %u shm endpoints, the most one may",
                  plain_index_limit);
        return to_fi(errc::nospc);
      }
      e = ep->create_region(index);
    }
    if (e != errc::ok) return to_fi(e);  // logged by create
    ep->self_ = addr_entry{static_cast<uint32_t>(::getpid()), static_cast<uint32_t>(pidns), index,
                           1, 0};
    *out = ep.release();
    return 0;
  });
}

int endpoint::open_context(util::domain& dom, const fi_info& info, size_t fclass, uint32_t index,
                           const addr_entry& name, std::unique_ptr<util::sep_slot> slot,
                           fid_ep** out, void* context) noexcept {
  uint64_t pidns;
  if (int ret = check_open(dom, info, pidns)) return ret;
  return abi_guard([&]() -> int {
    auto ep = std::make_unique<endpoint>(dom, info, fclass, context);
    ep->sep_slot_ = std::move(slot);
    if (fclass == FI_CLASS_TX_CTX)  // before any bind registers the hook
      ep->hook_.fn = util::with_lock_kind(ep->locks_, []<class L>() { return &tx_ctx_progress_thunk<L>; });
    if (errc e = ep->create_region(index); e != errc::ok) return to_fi(e);
    ep->self_ = name;  // fi_getname on a context: the scalable endpoint's
    *out = ep.release();
    return 0;
  });
}

errc endpoint::create_region(uint32_t index) noexcept {
  auto* prov = &provider();
  region_params p;
  p.dir = cfg().dir;
  p.log = prov;
  p.endpoint_index = index;
  errc e = region::create(p, region_);
  if (e != errc::ok) return e;  // logged by create
  // Without its FIFO (logged) the endpoint still works: sleepers wake by the timer.
  reclaim_stale_fifos(p.dir, prov);
  if (wake_.create(p.dir, region_.name(), prov) == errc::ok && waitset_.valid())
    add_to(waitset_.get(), wake_.fd());
  me_ = sender_identity::self(index);
  in_.resize(region_.nrings());
  return errc::ok;
}

endpoint::endpoint(util::domain& dom, const fi_info& info, size_t fclass, void* context)
    : endpoint_object(fclass, context),
      domain_(&dom),
      caps_(info.caps),
      tx_op_flags_(info.tx_attr ? info.tx_attr->op_flags : 0),
      rx_op_flags_(info.rx_attr ? info.rx_attr->op_flags : 0),
      // Under automatic progress the domain's thread is a second user of
      // the endpoint: it locks whatever the application's threading model,
      // or takes turns with the application (the handoff, util/handoff.hpp).
      locks_(dom.locks()),
      auto_(dom.progress() == FI_PROGRESS_AUTO) {
  uint32_t depth = info.tx_attr && info.tx_attr->size ? static_cast<uint32_t>(info.tx_attr->size)
                                                       : tx_depth;
  tx_ = std::make_unique<tx_entry[]>(depth);
  for (uint32_t i = depth; i-- > 0;) {
    tx_[i].token = i;
    tx_[i].next = tx_free_;
    tx_free_ = &tx_[i];
  }
  tx_count_ = tx_free_count_ = depth;
  rx_size_ = info.rx_attr && info.rx_attr->size ? info.rx_attr->size : rx_depth;
  hook_ = util::progress_hook{util::with_lock_kind(locks_, []<class L>() { return &progress_thunk<L>; }),
                              this};
  timer_.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  waitset_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (waitset_.valid() && timer_.valid()) add_to(waitset_.get(), timer_.get());
  cm = const_cast<fi_ops_cm*>(&cm_ops);
  msg = util::writable(util::msg_badstate);
  tagged = util::writable(tagged_badstate);
}

endpoint::~endpoint() {
  if (srx_) {
    // Finished receives still waiting for CQ room end without a completion;
    // queued unexpected messages go back through discard (acks included).
    util::with_lock_kind(locks_, [&]<class L>() {
      for (const deferred_rx& d : deferred_rx_) free_entry<L>(d.e);
      srx_->shutdown<L>();
    });
  }
  for (auto& in : in_) {
    if (!in) continue;
    for (cma_rec* r = in->records; r; r = r->next) r->in = nullptr;
    // A sender writing a piece of a split copy into a receive buffer lets
    // go of it before the application may free it.
    seal_split(*in);
    for (rx_xfer* x : in->xfers) delete x;  // matched ones: the engine goes with us
  }
  for (auto& c : conns_)
    if (c->reg.valid() && !c->dead) c->reg.close_ring(c->ring);
}

int endpoint::close() {
  if (busy()) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_close: the endpoint is still referenced");
    return to_fi(errc::busy);
  }
  // The domain's thread lets go of us first (remove waits for a run of our
  // progress under way), so nothing progresses us from here on but this.
  if (enabled_ && auto_) domain_->auto_progress().remove(this);
  if (adopted_) sep_slot_->sep().disown(this);  // likewise our transmit contexts
  // Under a peer SRX the owner outlives us: what it holds of ours goes back
  // now, while the CQ can still take the receives' errors.
  if (enabled_ && !srx_) {
    util::with_lock_kind(locks_, [&]<class L>() { retire_receives<L>(); });
  }
  bound_.unbind(this, wait_source());
  delete this;
  return 0;
}

int endpoint::bind(struct fid* bfid, uint64_t flags) {
  if (enabled_) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_ep_bind after fi_enable");
    return to_fi(errc::opbadstate);
  }
  if (bfid->fclass == FI_CLASS_SRX_CTX) return bind_srx(bfid, flags);
  if (bfid->fclass == FI_CLASS_AV && sep_slot_ && !sep_slot_->admits_av(&fid))
    return to_fi(errc::inval);
  return bound_.bind(*domain_, bfid, flags, hook_, wait_source());
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
  if (int ret = bound_.check_enable(prov, FI_EP_RDM, util::caps_needing_bindings(fid.fclass, caps_)))
    return ret;
  const bool shared_rx = shared_.bound();
  if (shared_rx) {
    if (int ret = shared_.attach(bound_.rx_cq.get(), bound_.av_.get(), &face_)) return ret;
  } else {
    util::srx_attr a;
    a.prov = prov;
    a.rx_cq = bound_.rx_cq.get();
    a.threading = domain_->lock_threading();
    if (locks_ == util::lock_kind::handoff) a.handoff = &domain_->handoff();
    a.size = rx_size_;
    a.min_multi_recv = min_multi_recv_;
    a.directed_recv = (caps_ & FI_DIRECTED_RECV) != 0;
    a.av = bound_.av_.get();
    // Every call into our own engine is made under this endpoint's lock
    // (posting, cancel, rx_size_left, progress and the callbacks): it needs
    // none of its own.
    a.serialized = true;
    srx_ = std::make_unique<util::srx>(a);
    face_ = srx_->add_peer(util::with_lock_kind(locks_, []<class L>() { return peer_table<L>(); }),
                           this);
  }
  if (srx_)
    rx_.own(srx_.get(), face_);
  else
    rx_.share(face_);
  fast_ = srx_ ? srx_.get() : util::srx::behind(face_, locks_);
  // Senders are named where a completion (FI_SOURCE: their fi_addr or user
  // id) or the receive context (FI_DIRECTED_RECV) needs them.
  want_source_ = (caps_ & (FI_SOURCE | FI_DIRECTED_RECV)) != 0;
  // Someone may sleep on a bound CQ or counter: wake them to run progress.
  bool sleeper = false;
  for (util::cq* c : {bound_.tx_bound(), bound_.rx_bound()})
    if (c && c->waiter()) sleeper = true;
  for (util::cntr* c : {bound_.send_cntr.get(), bound_.recv_cntr.get()})
    if (c && c->waiter()) sleeper = true;
  if (sleeper) arm_timer(busy_tick_ns);
  util::with_lock_kind(locks_, [&]<class L>() {
    msg = const_cast<fi_ops_msg*>(msg_table<L>(shared_rx));
    tagged = const_cast<fi_ops_tagged*>(tagged_table<L>(shared_rx));
    // RMA and atomics only where the endpoint asked for them (fi_getinfo(3)
    // caps): the others keep the -FI_ENOSYS tables.
    if (caps_ & FI_RMA) rma = const_cast<fi_ops_rma*>(rma_table<L>());
    if (caps_ & FI_ATOMIC) atomic = const_cast<fi_ops_atomic*>(atomic_table<L>());
  });
  if (want_source_) {
    try {
      bound_.av_->watch(this, &av_changed);  // unwatched by bound_.unbind
    } catch (const std::bad_alloc&) {
      return to_fi(errc::nomem);
    }
  }
  enabled_ = true;
  if (auto_) {
    // Last: from here on the domain's thread may run our progress.
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

errc endpoint::start_auto() noexcept {
  auto* prov = &provider();
  // The thread sleeps on our wait set: the wake FIFO and the timer, which
  // must run (it paces transfers under way, and it is what makes progress
  // take the FIFO's bytes: watch_sleepers).
  if (!next_tick_ns_) arm_timer(busy_tick_ns);
  if (!waitset_.valid() || !next_tick_ns_) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL,
              "fi_enable: automatic progress needs the endpoint's epoll set and timer, which "
              "could not be made");
    return errc::mfile;
  }
  if (!wake_.valid())  // why was logged by wake_fifo::create
    WEFT_WARN(prov, FI_LOG_EP_CTRL,
              "automatic progress without a wake FIFO: the progress thread polls every %llu us",
              static_cast<unsigned long long>(busy_tick_ns / 1000));
  // Senders always wake us (proto.hpp, "Waking the owner"): the thread
  // sleeps whenever it has nothing to do. No ring is hot (heat()), so every
  // message rings its doorbell.
  cool_all();
  region_.want_wakes(true);
  wake_on_ = true;
  util::progress_thread::work_fn fn =
      util::with_lock_kind(locks_, []<class L>() { return &auto_work<L>; });
  if (errc e = domain_->auto_progress().add(waitset_.get(), fn, this); e != errc::ok) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_enable: cannot start automatic progress: %s",
              fi_strerror(static_cast<int>(e)));
    return e;
  }
  return errc::ok;
}

void endpoint::av_changed(void* self, bool inserted_only) noexcept {
  auto* ep = static_cast<endpoint*>(self);
  auto run = [&]<class Lock>() {
    [[maybe_unused]] auto g = ep->guard<Lock>();  // progress queues under it
    ep->rx_.relabel<Lock>(queued_source, !inserted_only);
  };
  util::with_lock_kind(ep->locks_, run);
}

void endpoint::arm_timer(uint64_t period) noexcept {
  if (!timer_.valid()) return;
  // Read before the timer starts: it then never expires before the tick
  // computed from it, so a readable timer is always read (tick()), and a
  // thread sleeping on it never finds it readable and left unread.
  const uint64_t start = util::now_ns();
  itimerspec its{};
  its.it_interval.tv_sec = static_cast<time_t>(period / 1'000'000'000);
  its.it_interval.tv_nsec = static_cast<long>(period % 1'000'000'000);
  its.it_value = its.it_interval;
  if (::timerfd_settime(timer_.get(), 0, &its, nullptr) != 0) return;
  tick_period_ns_ = period;
  tick_start_ns_ = start;
  next_tick_ns_ = tick_start_ns_ + period;
}

void endpoint::tick() noexcept {
  uint64_t now = util::now_ns();
  bool expired = false;
  if (now >= next_tick_ns_) {
    uint64_t expirations;
    // Level-triggered in the wait sets: read it once per expiry, or a
    // sleeper would spin. Not yet readable (the timer's slack): next time.
    if (::read(timer_.get(), &expirations, sizeof expirations) == sizeof expirations) {
      expired = true;
      next_tick_ns_ = tick_start_ns_ + ((now - tick_start_ns_) / tick_period_ns_ + 1) * tick_period_ns_;
      if (auto_) {
        app_polling_ = app_passes_ >= app_poll_min;
        app_passes_ = 0;
      }
    }
  }
  // Fast while something waits on a peer, slow otherwise (if the FIFO wakes).
  // Under automatic progress, fast while the application polls: the tick is
  // what notices that it stopped (fewer than app_poll_min passes in a
  // period), so that senders wake the thread again; slower the longer it
  // keeps polling (poll_tick_max_ns says why).
  const bool waits = !busy_conns_.empty() || !busy_in_.empty() || !wake_.valid();
  uint64_t want = waits ? busy_tick_ns : idle_tick_ns;
  if (!waits && app_polling_) {
    if (tick_period_ns_ < busy_tick_ns || tick_period_ns_ > poll_tick_max_ns)
      want = busy_tick_ns;  // it has just started polling
    else if (expired)
      want = std::min(tick_period_ns_ * 2, poll_tick_max_ns);
    else
      want = tick_period_ns_;
  }
  if (want != tick_period_ns_) arm_timer(want);
}

void endpoint::watch_sleepers() noexcept {
  // The progress thread sleeps whenever it has nothing to do, unless the
  // application polls us (it sees messages first) or the thread polls for a
  // moment after work (auto_work).
  bool want = auto_ && !app_polling_ && !spinning_;
  for (util::cq* c : {bound_.tx_bound(), bound_.rx_bound()})
    if (c && c->may_sleep()) want = true;
  for (util::cntr* c : {bound_.send_cntr.get(), bound_.recv_cntr.get()})
    if (c && c->may_sleep()) want = true;
  if (want != wake_on_) {
    region_.want_wakes(want);
    wake_on_ = want;
    if (want) cool_all();  // a sleeper cannot poll: every ring rings again
  }
  if (region_.take_wake()) wake_.drain();
}

void endpoint::wake_peer(conn& c) noexcept {
  if (c.wake_broken) return;
  if (!wake_owner(c.wake, c.reg.dir(), c.reg.name())) {
    c.wake_broken = true;
    WEFT_INFO(&provider(), FI_LOG_EP_DATA,
              "shm peer %s has no wake FIFO we may open: it wakes by its timer",
              c.reg.name().c_str());
  }
}

int endpoint::getname(void* addr, size_t* addrlen) {
  if (!addrlen) return to_fi(errc::inval);
  if (!addr || *addrlen < name_bytes) {
    *addrlen = name_bytes;
    return to_fi(errc::toosmall);
  }
  format_name(self_, static_cast<char*>(addr));
  *addrlen = name_bytes;
  return 0;
}

ssize_t endpoint::cancel(void* context) {
  if (!srx_) return to_fi(errc::noent);
  return util::with_lock_kind(locks_, [&]<class L>() {
    [[maybe_unused]] auto g = guard<L>();  // srx_attr::serialized
    return srx_->cancel<L>(context);
  });
}

int endpoint::setopt(int level, int name, const void* val, size_t len) {
  int ret = endpoint_object::setopt(level, name, val, len);
  if (ret == 0 && name == FI_OPT_MIN_MULTI_RECV && srx_) srx_->set_min_multi_recv(min_multi_recv_);
  return ret;
}

ssize_t endpoint::rx_size_left() {
  if (!enabled_) return to_fi(errc::opbadstate);
  if (!srx_) return to_fi(errc::nosys);  // receives are the peer SRX owner's
  return util::with_lock_kind(locks_, [&]<class L>() {
    [[maybe_unused]] auto g = guard<L>();  // srx_attr::serialized
    return srx_->rx_size_left<L>();
  });
}

ssize_t endpoint::tx_size_left() {
  if (!enabled_) return to_fi(errc::opbadstate);
  // Inline sends take no entry; large ones one each. (Progress gives
  // entries back, on another thread under automatic progress.)
  return util::with_lock_kind(locks_, [&]<class L>() {
    [[maybe_unused]] auto g = guard<L>();
    return static_cast<ssize_t>(tx_free_count_);
  });
}

}  // namespace weft::shm
