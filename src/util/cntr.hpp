// SPDX-License-Identifier: MIT
// weft — the completion counter every provider uses (`man fi_cntr`).
//
// A counter is two 64-bit atomics: completions and errors. Providers bump
// them once per completed operation with a single atomic add; the wait object
// is only touched when someone can be sleeping on it (a thread inside
// fi_cntr_wait, an application that took the native wait object with
// FI_GETWAIT, or a wait set the counter belongs to), like cq::wake(). The
// paths that run manual progress (read, readerr, wait) are instantiated per
// lock policy and the matching ops table is installed at open.
//
// A peer counter (fi_peer(3): fi_cntr_open with FI_PEER and a
// fi_peer_cntr_context) counts the same way, with another ops table. Each
// increment is also passed to the owner's inc / incerr at once, through the
// branch the trigger check already has (trigger_at_ is 0 for good on a peer
// counter): no lock, no batching. The owner's fi_cntr_read / fi_cntr_readerr
// only drive progress. The counter's value belongs to the owner: add, set and
// wait are -FI_ENOSYS.
#pragma once

#include <rdma/fi_eq.h>
#include <rdma/providers/fi_peer.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "util/domain.hpp"
#include "util/lock.hpp"
#include "util/object.hpp"
#include "util/progress.hpp"
#include "util/wait.hpp"
#include "util/wait_set.hpp"

namespace weft::util {

class cntr : public fid_object<cntr, fid_cntr> {
 public:
  // fi_cntr_open. A null `attr` means the defaults of fi_cntr(3):
  // FI_CNTR_EVENTS_COMP, FI_WAIT_NONE, no flags.
  static int open(domain& dom, fi_cntr_attr* attr, fid_cntr** out, void* context) noexcept;
  cntr(domain& dom, fi_wait_obj wait_obj, void* context);
  ~cntr() override;

  // ---- producer side (providers): any thread, no lock, no allocation, no
  // system call unless someone may be asleep on the counter ----
  // One successful completion.
  void inc() noexcept { add(1); }
  // `n` successful completions at once.
  void add(uint64_t n) noexcept {
    count_.fetch_add(n, std::memory_order_seq_cst);
    check_trigger(n, false);
    wake();
  }
  // One operation that completed in error (fi_cntr_readerr counts these).
  void inc_err() noexcept { add_err(1); }
  void add_err(uint64_t n) noexcept {
    errors_.fetch_add(n, std::memory_order_seq_cst);
    check_trigger(n, true);
    wake();
  }
  // Sets the value (fi_cntr_set, and FI_OP_CNTR_SET from the trigger engine).
  void set(uint64_t v) noexcept {
    count_.store(v, std::memory_order_seq_cst);
    check_trigger(0, false);
    wake();
  }

  // ---- triggered work (util/trigger.hpp) ----
  static constexpr uint64_t no_trigger = UINT64_MAX;
  // The lowest threshold queued on this counter (no_trigger: none), set by
  // the domain's trigger engine. A peer counter keeps its 0 (check_trigger;
  // no work is queued on a counter the application cannot see).
  void set_trigger_at(uint64_t t) noexcept {
    if (!owner_) trigger_at_.store(t, std::memory_order_seq_cst);
  }
  // What thresholds are compared with: successes plus errors (fi_trigger(3)).
  uint64_t value() const noexcept {
    return count_.load(std::memory_order_seq_cst) + errors_.load(std::memory_order_seq_cst);
  }

  // Endpoints bound to this counter register their progress here (manual
  // progress: read, readerr and wait drive it).
  progress_list& progress() noexcept { return progress_; }
  // A file descriptor (socket) whose readiness means progress may complete
  // something: a thread in fi_cntr_wait, or in fi_wait on the counter's wait
  // set, sleeps on it too. No-op without a kernel wait object (FI_WAIT_NONE,
  // FI_WAIT_YIELD).
  errc add_wait_fd(int fd) noexcept;
  void remove_wait_fd(int fd) noexcept;
  // The kernel wait object (an epoll set), or null for FI_WAIT_NONE and
  // FI_WAIT_YIELD.
  wait_fd* waiter() noexcept { return wait_.is_open() ? &wait_ : nullptr; }
  // Someone may be asleep on this counter now (see cq::may_sleep).
  bool may_sleep() const noexcept { return waiters_.load(std::memory_order_seq_cst) != 0; }
  domain& dom() const noexcept { return *domain_; }
  fi_wait_obj wait_obj() const noexcept { return wait_obj_; }

  // Current values without running progress.
  uint64_t count() const noexcept { return count_.load(std::memory_order_acquire); }
  uint64_t errors() const noexcept { return errors_.load(std::memory_order_acquire); }

  // How wait sets, poll sets and fi_trywait see this counter. Its has_event
  // answers whether the value or the error value changed since it last said
  // so, and consumes the change (fi_poll's rule for counters).
  wait_member member() noexcept;
  bool take_change() noexcept;

  // ---- consumer side (the ops table) ----
  template <class Lock>
  uint64_t read() noexcept {
    progress_.run<Lock>();
    return count();
  }
  template <class Lock>
  uint64_t readerr() noexcept {
    progress_.run<Lock>();
    return errors();
  }
  // Peer counter: progress (the owner has every increment already);
  // returns the local count.
  template <class Lock>
  uint64_t peer_read() noexcept;
  fid_peer_cntr* owner() const noexcept { return owner_; }
  int app_add(uint64_t value) noexcept;
  int app_adderr(uint64_t value) noexcept;
  int app_set(uint64_t value) noexcept;
  int app_seterr(uint64_t value) noexcept;
  template <class Lock>
  int wait(uint64_t threshold, int timeout) noexcept;

  int control(int command, void* arg);
  int close();

 private:
  // The store-then-check on both sides (writer: count, then waiters_; a
  // sleeper: waiters_, then count) is sequentially consistent so that one of
  // the two always sees the other: no lost wakeup. On x86 a seq_cst RMW is
  // the same `lock xadd` as a relaxed one, and a seq_cst load a plain load.
  void wake() noexcept {
    if (waiters_.load(std::memory_order_seq_cst)) wake_slow();
  }
  void wake_slow() noexcept;
  void sleep(int timeout_ms) noexcept;
  // While nothing is queued on the counter this is one load and a branch;
  // otherwise a reached threshold marks the engine ready, and a peer
  // counter passes the `n` successes (or errors) just counted to its owner.
  // Issuing happens elsewhere: providers count under their endpoint locks.
  void check_trigger(uint64_t n, bool err) noexcept {
    if (trigger_at_.load(std::memory_order_seq_cst) != no_trigger) [[unlikely]]
      trigger_reached(n, err);
  }
  void trigger_reached(uint64_t n, bool err) noexcept;

  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> errors_{0};
  // Nonzero while anyone may be asleep: threads in fi_cntr_wait, plus one
  // for good once the wait object is handed out or a wait set holds the
  // counter.
  std::atomic<int> waiters_{0};
  std::atomic<uint64_t> trigger_at_{no_trigger};
  // The values has_event last reported, for wait sets, poll sets, trywait.
  std::atomic<uint64_t> seen_count_{0};
  std::atomic<uint64_t> seen_errors_{0};

  ref<domain> domain_;
  fi_wait_obj wait_obj_;
  std::atomic<bool> exported_{false};  // FI_GETWAIT handed the wait object out
  fid_peer_cntr* owner_ = nullptr;     // FI_PEER: where the counts go
  progress_list progress_;
  wait_fd wait_;     // open unless FI_WAIT_NONE or FI_WAIT_YIELD
  mutex_cond cond_;  // FI_WAIT_MUTEX_COND
  // After what member() points at: detaches from the wait set first.
  wait_set_binding set_;
  // Last: leaves every poll set before anything else goes.
  poll_links links_;
};

}  // namespace weft::util
