// SPDX-License-Identifier: MIT
// weft — the completion counter.
#include "util/cntr.hpp"

#include <sched.h>
#include <sys/epoll.h>

#include <cstring>
#include <memory>

#include "core/log.hpp"
#include "util/yield.hpp"

namespace weft::util {

namespace {

// The value of an enum field as the application stored it: C lets it hold
// any int, and loading an out-of-range value as the C++ enum is undefined.
template <class E>
int raw(const E& field) noexcept {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &field, sizeof v);
  return v;
}

// The fi_ops_cntr table of one lock-policy instantiation. The policy only
// matters for the progress list that read, readerr and wait drive; the
// counts themselves are atomics under every threading model.
template <class Lock>
struct cntr_ops {
  static uint64_t read(fid_cntr* c) noexcept { return cntr::from(c)->read<Lock>(); }
  static uint64_t readerr(fid_cntr* c) noexcept { return cntr::from(c)->readerr<Lock>(); }
  static int add(fid_cntr* c, uint64_t v) noexcept { return cntr::from(c)->app_add(v); }
  static int set(fid_cntr* c, uint64_t v) noexcept { return cntr::from(c)->app_set(v); }
  static int wait(fid_cntr* c, uint64_t threshold, int timeout) noexcept {
    return cntr::from(c)->wait<Lock>(threshold, timeout);
  }
  static int adderr(fid_cntr* c, uint64_t v) noexcept { return cntr::from(c)->app_adderr(v); }
  static int seterr(fid_cntr* c, uint64_t v) noexcept { return cntr::from(c)->app_seterr(v); }
  static constexpr fi_ops_cntr table = {
      .size = sizeof(fi_ops_cntr),
      .read = read,
      .readerr = readerr,
      .add = add,
      .set = set,
      .wait = wait,
      .adderr = adderr,
      .seterr = seterr,
  };
};

// The fi_ops_cntr table of a peer counter: the owner reads (which drives
// progress and passes the counts on); nothing else applies.
template <class Lock>
struct peer_cntr_ops {
  static uint64_t read(fid_cntr* c) noexcept { return cntr::from(c)->peer_read<Lock>(); }
  static uint64_t readerr(fid_cntr* c) noexcept {
    cntr::from(c)->peer_read<Lock>();
    return cntr::from(c)->errors();
  }
  static int refuse(fid_cntr* c, const char* what) noexcept {
    WEFT_WARN(cntr::from(c)->dom().provider(), FI_LOG_CNTR, "%s on a peer counter: its owner counts",
              what);
    return to_fi(errc::nosys);
  }
  static int add(fid_cntr* c, uint64_t) noexcept { return refuse(c, "fi_cntr_add"); }
  static int set(fid_cntr* c, uint64_t) noexcept { return refuse(c, "fi_cntr_set"); }
  static int wait(fid_cntr* c, uint64_t, int) noexcept { return refuse(c, "fi_cntr_wait"); }
  static int adderr(fid_cntr* c, uint64_t) noexcept { return refuse(c, "fi_cntr_adderr"); }
  static int seterr(fid_cntr* c, uint64_t) noexcept { return refuse(c, "fi_cntr_seterr"); }
  static constexpr fi_ops_cntr table = {
      .size = sizeof(fi_ops_cntr),
      .read = read,
      .readerr = readerr,
      .add = add,
      .set = set,
      .wait = wait,
      .adderr = adderr,
      .seterr = seterr,
  };
};

// The owner's fid_peer_cntr from fi_cntr_open's context, or null (logged).
fid_peer_cntr* peer_owner(const fi_provider* prov, void* context) noexcept {
  auto* pc = static_cast<fi_peer_cntr_context*>(context);
  const char* why = !pc                                      ? "no fi_peer_cntr_context"
                    : pc->size < sizeof(fi_peer_cntr_context) ? "fi_peer_cntr_context too small"
                    : !pc->cntr                              ? "no fid_peer_cntr"
                    : !pc->cntr->owner_ops || pc->cntr->owner_ops->size < sizeof(fi_ops_cntr_owner) ||
                            !pc->cntr->owner_ops->inc || !pc->cntr->owner_ops->incerr
                        ? "owner_ops without inc/incerr"
                        : nullptr;
  if (why) {
    WEFT_WARN(prov, FI_LOG_CNTR, "fi_cntr_open with FI_PEER: %s in the context", why);
    return nullptr;
  }
  return pc->cntr;
}

// What fi_cntr_open accepts as a wait object (fi_cntr(3) lists NONE, UNSPEC,
// SET, FD, MUTEX_COND and YIELD). Returns ok, or the error to answer; `set`
// receives the wait set for FI_WAIT_SET.
errc check_wait_obj(const domain& dom, const fi_cntr_attr& a, wait_set** set) noexcept {
  auto* prov = dom.provider();
  switch (raw(a.wait_obj)) {
    case FI_WAIT_NONE:
    case FI_WAIT_UNSPEC:
    case FI_WAIT_FD:
    case FI_WAIT_MUTEX_COND:
    case FI_WAIT_YIELD:
      return errc::ok;
    case FI_WAIT_SET:
      if (!a.wait_set || !is_class(&a.wait_set->fid, FI_CLASS_WAIT)) {
        WEFT_WARN(prov, FI_LOG_CNTR, "FI_WAIT_SET without a wait set in attr->wait_set");
        return errc::inval;
      }
      *set = wait_set::from(a.wait_set);
      if (&(*set)->fab() != &dom.fab()) {
        WEFT_WARN(prov, FI_LOG_CNTR, "the wait set belongs to another fabric");
        return errc::inval;
      }
      return errc::ok;
    case FI_WAIT_POLLFD:
      WEFT_WARN(prov, FI_LOG_CNTR, "FI_WAIT_POLLFD is not a counter wait object");
      return errc::nosys;
    default:
      WEFT_WARN(prov, FI_LOG_CNTR, "unknown counter wait object %d", raw(a.wait_obj));
      return errc::inval;
  }
}

bool cntr_has_event(struct fid* f) noexcept {
  return cntr::from(f)->take_change();
}

}  // namespace

wait_member cntr_wait_member(struct fid* f) noexcept {
  return cntr::from(f)->member();
}

int cntr::open(domain& dom, fi_cntr_attr* attr, fid_cntr** out, void* context) noexcept {
  auto* prov = dom.provider();
  if (!out) {
    WEFT_WARN(prov, FI_LOG_CNTR, "fi_cntr_open needs a result pointer");
    return to_fi(errc::inval);
  }
  fi_cntr_attr a{};
  a.events = FI_CNTR_EVENTS_COMP;
  a.wait_obj = FI_WAIT_NONE;
  if (attr) a = *attr;
  if (raw(a.events) != FI_CNTR_EVENTS_COMP) {
    bool known = raw(a.events) == FI_CNTR_EVENTS_BYTES;
    WEFT_WARN(prov, FI_LOG_CNTR, "counter events %d %s", raw(a.events),
              known ? "(FI_CNTR_EVENTS_BYTES) are not supported" : "are unknown");
    return to_fi(known ? errc::nosys : errc::inval);
  }
  if (a.flags & ~static_cast<uint64_t>(FI_PEER)) {
    WEFT_WARN(prov, FI_LOG_CNTR, "counter flags other than FI_PEER are reserved, not 0x%llx",
              static_cast<unsigned long long>(a.flags));
    return to_fi(errc::badflags);
  }
  fid_peer_cntr* owner = nullptr;
  if ((a.flags & FI_PEER) && !(owner = peer_owner(prov, context))) return to_fi(errc::inval);
  wait_set* set = nullptr;
  if (errc e = check_wait_obj(dom, a, &set); e != errc::ok) return to_fi(e);
  return abi_guard([&]() -> int {
    auto c = std::make_unique<cntr>(dom, a.wait_obj, context);
    // YIELD spins; NONE never waits; the others sleep in the kernel. A wait
    // set member keeps an epoll set too: the set nests it, so that provider
    // sockets registered on the counter wake a thread in fi_wait.
    if (a.wait_obj != FI_WAIT_NONE && a.wait_obj != FI_WAIT_YIELD) {
      if (errc e = c->wait_.open(); e != errc::ok) return to_fi(e);
    }
    if (set) {
      if (errc e = c->set_.bind(*set, c->member()); e != errc::ok) {
        WEFT_WARN(prov, FI_LOG_CNTR, "cannot attach the counter to its wait set");
        return to_fi(e);
      }
      // The set may have a sleeper at any time: every update notifies it.
      c->waiters_.fetch_add(1, std::memory_order_seq_cst);
    }
    c->owner_ = owner;
    if (owner) c->trigger_at_.store(0, std::memory_order_seq_cst);  // check_trigger
    c->ops = const_cast<fi_ops_cntr*>(
        with_lock_kind(dom.locks(), [&]<class Lock>() -> const fi_ops_cntr* {
          return owner ? &peer_cntr_ops<Lock>::table : &cntr_ops<Lock>::table;
        }));
    *out = c.release();
    return 0;
  });
}

cntr::cntr(domain& dom, fi_wait_obj wait_obj, void* context)
    : fid_object(FI_CLASS_CNTR, context), domain_(&dom), wait_obj_(wait_obj) {
  progress_.fire_triggers(&dom.triggers());
}

cntr::~cntr() = default;

int cntr::close() {
  if (busy()) return close_if_unused(domain_->provider(), FI_LOG_CNTR, "counter");
  // Work waiting on this counter, or counting into it, cannot run any more.
  domain_->triggers().flush_cntr(this);
  return close_if_unused(domain_->provider(), FI_LOG_CNTR, "counter");
}

void cntr::trigger_reached(uint64_t n, bool err) noexcept {
  if (owner_) {
    fi_ops_cntr_owner* ops = owner_->owner_ops;
    for (; n; --n) err ? ops->incerr(owner_) : ops->inc(owner_);
    return;
  }
  if (value() >= trigger_at_.load(std::memory_order_seq_cst)) domain_->triggers().mark_ready();
}

errc cntr::add_wait_fd(int fd) noexcept {
  return wait_.is_open() ? wait_.add(fd, EPOLLIN) : errc::ok;
}

void cntr::remove_wait_fd(int fd) noexcept {
  if (wait_.is_open()) wait_.remove(fd);
}

void cntr::wake_slow() noexcept {
  // fi_cntr_wait is invalid on a wait set member: only the set can have a
  // sleeper, and notify() wakes it only if it has one.
  if (wait_obj_ == FI_WAIT_SET) {
    set_.notify();
    return;
  }
  if (wait_.is_open()) wait_.signal();
  if (wait_obj_ == FI_WAIT_MUTEX_COND && exported_.load(std::memory_order_acquire))
    cond_.broadcast();
}

wait_member cntr::member() noexcept {
  wait_member m;
  m.owner = as_fid();
  m.waiter = wait_.is_open() ? &wait_ : nullptr;
  m.progress = &progress_;
  m.has_event = cntr_has_event;
  m.dom = domain_.get();
  m.links = &links_;
  return m;
}

bool cntr::take_change() noexcept {
  uint64_t c = count();
  uint64_t e = errors();
  bool count_changed = seen_count_.exchange(c, std::memory_order_acq_rel) != c;
  bool errors_changed = seen_errors_.exchange(e, std::memory_order_acq_rel) != e;
  return count_changed || errors_changed;
}

// The application's own updates wake waiters too: fi_cntr_set can satisfy a
// threshold, and any change of the error value ends fi_cntr_wait.
// The application calls these holding no provider lock: work they make due
// is issued here.
int cntr::app_add(uint64_t value) noexcept {
  add(value);
  domain_->triggers().fire_if_ready();
  return 0;
}
int cntr::app_adderr(uint64_t value) noexcept {
  add_err(value);
  domain_->triggers().fire_if_ready();
  return 0;
}
int cntr::app_set(uint64_t value) noexcept {
  set(value);
  domain_->triggers().fire_if_ready();
  return 0;
}
int cntr::app_seterr(uint64_t value) noexcept {
  errors_.store(value, std::memory_order_seq_cst);
  check_trigger(0, false);
  wake();
  domain_->triggers().fire_if_ready();
  return 0;
}

void cntr::sleep(int timeout_ms) noexcept {
  if (wait_obj_ == FI_WAIT_YIELD) {
    give_up_core();
    return;
  }
  // EINTR and spurious wakeups just send the caller round its loop again;
  // a hard epoll failure would spin, so it is logged once per call.
  if (wait_.wait(timeout_ms) == errc::other)
    WEFT_WARN(domain_->provider(), FI_LOG_CNTR, "waiting on the counter's epoll set failed");
}

// fi_cntr(3): returns 0 once the count is >= threshold; -FI_EAVAIL as soon as
// the error value differs from what it was on entry (errors counted before
// the call do not end it); -FI_ETIMEDOUT after `timeout` ms (negative: no
// limit). Invalid on FI_WAIT_NONE and FI_WAIT_SET counters: they have no wait
// object of their own, and the answer is -FI_ENOSYS as for a missing op.
template <class Lock>
int cntr::wait(uint64_t threshold, int timeout) noexcept {
  if (wait_obj_ == FI_WAIT_NONE || wait_obj_ == FI_WAIT_SET) {
    WEFT_WARN(domain_->provider(), FI_LOG_CNTR,
              "fi_cntr_wait on a counter opened without its own wait object");
    return to_fi(errc::nosys);
  }
  const uint64_t start = now_ns();
  const uint64_t errors_on_entry = errors_.load(std::memory_order_seq_cst);
  // Announce the sleeper before looking at the counts (see wake()).
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  int ret;
  for (;;) {
    progress_.run<Lock>();
    if (count_.load(std::memory_order_seq_cst) >= threshold) {
      ret = 0;
      break;
    }
    if (errors_.load(std::memory_order_seq_cst) != errors_on_entry) {
      ret = to_fi(errc::avail);
      break;
    }
    int left = remaining_ms(timeout, start);
    if (left == 0) {
      ret = to_fi(errc::timedout);
      break;
    }
    sleep(left);
  }
  waiters_.fetch_sub(1, std::memory_order_seq_cst);
  return ret;
}

template <class Lock>
uint64_t cntr::peer_read() noexcept {
  progress_.run<Lock>();
  return count();
}

template uint64_t cntr::peer_read<null_lock>() noexcept;
template uint64_t cntr::peer_read<mutex_lock>() noexcept;
template uint64_t cntr::peer_read<handoff_lock>() noexcept;

int cntr::control(int command, void* arg) {
  auto* prov = domain_->provider();
  switch (command) {
    case FI_GETOPSFLAG:
      // Counters carry no operation flags; fi_cntr(3) still lists the command.
      if (!arg) return to_fi(errc::inval);
      *static_cast<uint64_t*>(arg) = 0;
      return 0;
    case FI_SETOPSFLAG:
      if (!arg) return to_fi(errc::inval);
      if (*static_cast<uint64_t*>(arg)) {
        WEFT_WARN(prov, FI_LOG_CNTR, "counters take no operation flags");
        return to_fi(errc::badflags);
      }
      return 0;
    case FI_GETWAITOBJ:
    case FI_GETWAIT: {
      int ret = wait_control(command, arg, wait_obj_, wait_, cond_);
      if (ret == to_fi(errc::nosys))
        WEFT_WARN(prov, FI_LOG_CNTR, "the counter has no wait object of its own (wait_obj %d)",
                  static_cast<int>(wait_obj_));
      // From now on the application may sleep on it: writers must signal.
      if (ret == 0 && command == FI_GETWAIT && !exported_.exchange(true, std::memory_order_acq_rel))
        waiters_.fetch_add(1, std::memory_order_seq_cst);
      return ret;
    }
    default:
      return to_fi(errc::nosys);
  }
}

}  // namespace weft::util
