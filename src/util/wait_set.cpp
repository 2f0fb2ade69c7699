// SPDX-License-Identifier: MIT
// weft — wait sets and fi_trywait.
#include "util/wait_set.hpp"

#include "core/log.hpp"
#include "util/yield.hpp"

#include <algorithm>
#include <memory>
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>

namespace weft::util {

namespace {

int wait_thunk(fid_wait* w, int timeout) noexcept {
  return abi_guard([&] { return wait_set::from(w)->wait(timeout); });
}

constexpr fi_ops_wait wait_ops = {
    .size = sizeof(fi_ops_wait),
    .wait = wait_thunk,
};

bool waitable_class(size_t fclass) noexcept {
  switch (fclass) {
    case FI_CLASS_CQ:
    case FI_CLASS_CNTR:
    case FI_CLASS_EQ:
    case FI_CLASS_WAIT: return true;
    default: return false;
  }
}

// `f` is a CQ, counter or EQ (checked by the caller).
wait_member member_of(struct fid* f) noexcept {
  switch (f->fclass) {
    case FI_CLASS_CQ: return cq_wait_member(f);
    case FI_CLASS_CNTR: return cntr_wait_member(f);
    default: return eq_wait_member(f);
  }
}

}  // namespace

bool member_ready(const wait_member& m, bool drain) noexcept {
  if (drain && m.waiter) m.waiter->drain();
  if (m.progress) m.progress->run_locked();
  return m.has_event && m.has_event(m.owner);
}

// ---- fi_wait_open / fi_close ----

int wait_set::open(fabric& fab, fi_wait_attr* attr, fid_wait** out) noexcept {
  auto* prov = fab.provider();
  if (!attr || !out) {
    WEFT_WARN(prov, FI_LOG_FABRIC, "fi_wait_open needs attributes and a result pointer");
    return to_fi(errc::inval);
  }
  if (attr->flags) {
    // The man page reserves the field: it must be 0.
    WEFT_WARN(prov, FI_LOG_FABRIC, "wait set flags 0x%llx are reserved and must be 0",
              static_cast<unsigned long long>(attr->flags));
    return to_fi(errc::badflags);
  }
  const int wait_obj = raw_wait_obj(attr->wait_obj);
  switch (wait_obj) {
    case FI_WAIT_UNSPEC:
    case FI_WAIT_FD:
    case FI_WAIT_MUTEX_COND:
    case FI_WAIT_YIELD:
    case FI_WAIT_POLLFD: break;
    default:
      WEFT_WARN(prov, FI_LOG_FABRIC, "a wait set cannot use wait object %d", wait_obj);
      return to_fi(errc::inval);
  }
  return abi_guard([&]() -> int {
    auto s = std::make_unique<wait_set>(fab, attr->wait_obj);
    if (s->obj_ != FI_WAIT_YIELD) {
      if (errc e = s->wait_.open(); e != errc::ok) return to_fi(e);
    }
    *out = s.release();
    return 0;
  });
}

wait_set::wait_set(fabric& fab, fi_wait_obj obj)
    : fid_object(FI_CLASS_WAIT, nullptr), fabric_(&fab), obj_(obj) {
  ops = const_cast<fi_ops_wait*>(&wait_ops);
}

wait_set::~wait_set() = default;

int wait_set::close() {
  if (busy()) {
    WEFT_WARN(fabric_->provider(), FI_LOG_FABRIC, "wait set still has %d objects attached",
              refs());
    return to_fi(errc::busy);
  }
  delete this;
  return 0;
}

// ---- members ----

errc wait_set::attach(const wait_member& m) noexcept {
  if (!m.owner || !m.has_event) return errc::inval;
  std::lock_guard g{m_};
  try {
    members_.reserve(members_.size() + 1);
  } catch (const std::bad_alloc&) {
    return errc::nomem;
  }
  // The member's own epoll set holds the provider sockets that feed it:
  // nesting it here lets their readiness wake a thread in fi_wait.
  if (m.waiter && wait_.is_open()) {
    if (errc e = wait_.add(m.waiter->fd(), EPOLLIN); e != errc::ok) return e;
  }
  members_.push_back(m);
  return errc::ok;
}

void wait_set::detach(const struct fid* owner) noexcept {
  std::lock_guard g{m_};
  auto it = std::find_if(members_.begin(), members_.end(),
                         [owner](const wait_member& m) { return m.owner == owner; });
  if (it == members_.end()) return;
  if (it->waiter && wait_.is_open()) wait_.remove(it->waiter->fd());
  members_.erase(it);
}

void wait_set::wake() noexcept {
  if (wait_.is_open()) wait_.signal();
  if (obj_ == FI_WAIT_MUTEX_COND && exported_) cond_.broadcast();
}

void wait_set::exported() noexcept {
  // From now on the application may sleep on the wait object itself, so
  // every write must reach it.
  if (!exported_.exchange(true)) watchers_.fetch_add(1, std::memory_order_seq_cst);
}

bool wait_set::ready() noexcept {
  // Wakeups are consumed before the members are asked, so that a write after
  // the question leaves the wait object readable again.
  if (wait_.is_open()) wait_.drain();
  std::lock_guard g{m_};
  bool any = false;
  for (const auto& m : members_) any |= member_ready(m, true);
  return any;
}

// ---- fi_wait ----

int wait_set::wait(int timeout) noexcept {
  uint64_t start = now_ns();
  watchers_.fetch_add(1, std::memory_order_seq_cst);
  int ret;
  for (;;) {
    if (ready()) {
      ret = 0;
      break;
    }
    int left = remaining_ms(timeout, start);
    if (left == 0) {
      ret = to_fi(errc::timedout);
      break;
    }
    if (obj_ == FI_WAIT_YIELD) {
      give_up_core();
      continue;
    }
    errc e = wait_.wait(left);
    if (e == errc::intr || e == errc::other) {
      ret = to_fi(e);
      break;
    }
  }
  watchers_.fetch_sub(1, std::memory_order_relaxed);
  return ret;
}

int wait_set::control(int command, void* arg) {
  auto* prov = fabric_->provider();
  int ret = wait_control(command, arg, obj_, wait_, cond_);
  if (ret == to_fi(errc::nosys))
    WEFT_WARN(prov, FI_LOG_FABRIC, "a wait set using FI_WAIT_YIELD has no wait object");
  if (ret == 0 && command == FI_GETWAIT) exported();
  if (ret != 1) return ret;
  WEFT_WARN(prov, FI_LOG_FABRIC, "wait sets do not support fi_control command %d", command);
  return to_fi(errc::nosys);
}

// ---- fi_trywait ----

int wait_set::trywait(fabric& fab, struct fid** fids, int count) noexcept {
  auto* prov = fab.provider();
  if (count < 0 || (count > 0 && !fids)) {
    WEFT_WARN(prov, FI_LOG_FABRIC, "fi_trywait: %d fids at %p", count, static_cast<void*>(fids));
    return to_fi(errc::inval);
  }
  // Check every fid before driving any of them.
  for (int i = 0; i < count; ++i) {
    struct fid* f = fids[i];
    if (!f || !waitable_class(f->fclass)) {
      WEFT_WARN(prov, FI_LOG_FABRIC, "fi_trywait: fid %d is %s", i,
                f ? "not a CQ, counter, EQ or wait set" : "NULL");
      return to_fi(errc::inval);
    }
    if (f->fclass == FI_CLASS_WAIT && &wait_set::from(f)->fab() != &fab) {
      WEFT_WARN(prov, FI_LOG_FABRIC, "fi_trywait: wait set %d belongs to another fabric", i);
      return to_fi(errc::inval);
    }
  }
  return abi_guard([&]() -> int {
    for (int i = 0; i < count; ++i) {
      struct fid* f = fids[i];
      bool busy = f->fclass == FI_CLASS_WAIT ? wait_set::from(f)->ready()
                                             : member_ready(member_of(f), true);
      if (busy) return to_fi(errc::again);
    }
    return 0;
  });
}

}  // namespace weft::util
