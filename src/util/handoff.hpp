// SPDX-License-Identifier: MIT
// weft — the domain handoff: the lock policy of FI_THREAD_DOMAIN with
// automatic progress (lock.hpp, handoff_lock).
//
// Why. Under FI_THREAD_DOMAIN the application promises that one of its
// threads at a time calls into a domain; automatic progress adds exactly one
// more user, the domain's progress thread. Locking every object for that
// (mutex_lock) costs the application a compare-and-swap and an exchange per
// object it touches, several per message: on the shm ping-pong most of what
// automatic progress cost over manual (issue 19; docs/performance.md). The
// two users are not alike, though: the application enters all the time, the
// thread seldom (a sender's wake-up, a timer tick, a sleeping target's
// operation). So the domain has one handoff, and the two sides pay unevenly:
//
// - the application (light side) stores "in", and, with only a compiler
//   barrier between, loads the thread's state; it leaves with a plain
//   store. No atomic read-modify-write, no fence.
// - the thread (heavy side) stores "wants in", then makes every running
//   thread of the process execute a full barrier (membarrier(2),
//   MEMBARRIER_CMD_PRIVATE_EXPEDITED), then waits until the application is
//   out. The barrier is what makes the application's plain store and load a
//   Dekker handshake: either the application sees the thread's flag and
//   steps back, or the thread sees the application in and waits. (The
//   scheme is the asymmetric barrier of userspace RCU and folly's hazard
//   pointers.) While the thread wants in or is in, an application entering
//   steps back and waits for it to leave; its work is a bounded pass.
//
// Nesting. An object's guard under this policy enters the domain's handoff;
// one object's guard taken inside another's (a completion written while the
// endpoint's guard is held) finds the handoff its own and only counts. The
// owner word tells whose it is: only the holder stores its own thread
// pointer there, so reading back one's own means "mine".
//
// Who is heavy. A thread weft starts to run providers' work (progress_thread)
// marks itself internal; every entry from such a thread takes the heavy side,
// whichever domain it touches, so a progress thread that reaches another
// domain's object (a triggered operation's counter) is still excluded from
// that domain's application correctly.
//
// The rules the policy relies on (decisions.md, "The domain handoff"):
// 1. Application threads enter one at a time (FI_THREAD_DOMAIN).
// 2. Nobody holds the handoff while waiting for a progress thread (no guard
//    is held across a sleep, a progress_thread::remove or a join).
// 3. Only providers that opt in use it (domain_hooks::handoff), only when
//    membarrier is available, and never in ThreadSanitizer builds, which
//    cannot see the barrier: there every entry takes a mutex instead, so the
//    nesting and the guards' placement are still checked.
#pragma once

#include "util/fast_mutex.hpp"

#include <atomic>
#include <cstdint>

#if defined(__SANITIZE_THREAD__)
#define WEFT_HANDOFF_MUTEX 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WEFT_HANDOFF_MUTEX 1
#endif
#endif

struct fi_provider;

namespace weft::util {

// Set once on each thread weft starts to run providers' work.
inline thread_local bool tl_internal_thread [[gnu::tls_model("initial-exec")]] = false;

class handoff {
 public:
  // Whether the process can use handoffs: membarrier's private expedited
  // command is offered and this process is registered for it (registered on
  // the process's first call; a yes is kept, a no is asked again and logged
  // at info at each call). `prov` names who asks in the log line.
  static bool available(const fi_provider* prov) noexcept;

  handoff() = default;
  handoff(const handoff&) = delete;
  handoff& operator=(const handoff&) = delete;

  [[gnu::always_inline]] void enter() noexcept {
    const uintptr_t me = self();
    if (owner_.load(std::memory_order_relaxed) == me) {
      ++depth_;
      return;
    }
    if (tl_internal_thread) [[unlikely]]
      enter_heavy();
    else
      enter_light();
    owner_.store(me, std::memory_order_relaxed);
    depth_ = 1;
  }
  [[gnu::always_inline]] void exit() noexcept {
    if (--depth_) return;
    owner_.store(0, std::memory_order_relaxed);
    if (heavy_) [[unlikely]]
      exit_heavy();
    else
      exit_light();
  }
  // From the heavy holder: whether an application thread waits to enter
  // (a thread polling for a while under the handoff lets it in).
  bool app_waiting() const noexcept { return app_waits_.load(std::memory_order_relaxed) != 0; }
  // Whether the calling thread holds it.
  bool held() const noexcept { return owner_.load(std::memory_order_relaxed) == self(); }

  class guard {
   public:
    [[gnu::always_inline]] explicit guard(handoff& h) noexcept : h_(&h) { h.enter(); }
    [[gnu::always_inline]] ~guard() { h_->exit(); }
    // Returned by value from the objects' guard<Lock>() (a prvalue: no copy).
    guard(const guard&) = delete;
    guard& operator=(const guard&) = delete;

   private:
    handoff* h_;
  };

 private:
  static uintptr_t self() noexcept { return reinterpret_cast<uintptr_t>(__builtin_thread_pointer()); }
#ifdef WEFT_HANDOFF_MUTEX
  void enter_light() noexcept { m_.lock(); }
  void exit_light() noexcept { m_.unlock(); }
  fast_mutex m_;
#else
  [[gnu::always_inline]] void enter_light() noexcept {
    app_in_.store(1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the heavy side's membarrier does the rest
    if (state_.load(std::memory_order_acquire) != 0) [[unlikely]]
      light_wait();
  }
  [[gnu::always_inline]] void exit_light() noexcept { app_in_.store(0, std::memory_order_release); }
  void light_wait() noexcept;
#endif
  void enter_heavy() noexcept;
  void exit_heavy() noexcept;

  std::atomic<uintptr_t> owner_{0};
  uint32_t depth_ = 0;  // the holder's
  bool heavy_ = false;  // the holder's: it entered as the thread
#ifndef WEFT_HANDOFF_MUTEX
  std::atomic<uint32_t> app_in_{0};  // the application is in (light side)
  std::atomic<uint32_t> state_{0};   // a thread wants in, or is in (heavy side)
#endif
  std::atomic<uint32_t> app_waits_{0};
  fast_mutex heavy_mutex_;  // one heavy user at a time (several progress threads)
};

}  // namespace weft::util
