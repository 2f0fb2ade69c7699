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
// - the thread (heavy side) takes a mutex, stores "wants in", then makes
//   every running thread of the process execute a full barrier
//   (membarrier(2), MEMBARRIER_CMD_PRIVATE_EXPEDITED), then waits until the
//   application is out. The barrier is what makes the application's plain
//   store and load a Dekker handshake: either the application sees the
//   thread's flag and steps back, or the thread sees the application in and
//   waits. (The scheme is the asymmetric barrier of userspace RCU and
//   folly's hazard pointers.) While the thread wants in or is in, an
//   application entering steps back and waits on the mutex; the thread's
//   work is a bounded pass.
//
// One application thread: the bias. The light side is sound for one thread
// only, and an application may use several in one domain: weft lets threads
// drive separate contexts of a scalable endpoint at once under
// FI_THREAD_DOMAIN (as under the other models), and an application may hand
// the domain from thread to thread under its own lock. So the light side
// belongs to one thread, the one the handoff is biased to (as a JVM's biased
// lock): the first application thread to enter. Any other thread enters as
// the heavy side does, through the mutex and, while some thread has the
// bias, the barrier. An application thread that comes in that way takes the
// bias over (its barrier already excluded the old holder); after
// kBiasMoves such moves the bias is dropped for good and the handoff is a
// plain mutex for every thread: one atomic per entry, still cheaper than a
// lock per object. Each holder of the bias gets a flag of its own, never
// reused: a thread that read the bias as its own just before it moved
// raises and lowers only its old flag, which nobody waits on any more (one
// shared flag would let it lower the new holder's).
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
// that domain's application correctly. Weft threads never take the bias.
//
// The rules the policy relies on (decisions.md, "The domain handoff"):
// 1. Nobody holds the handoff while waiting for a progress thread (no guard
//    is held across a sleep, a progress_thread::remove or a join).
// 2. Only providers that opt in use it (domain_hooks::handoff), only when
//    membarrier is available, and never in ThreadSanitizer builds, which
//    cannot see the barrier: there every entry takes the mutex, so the
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
#ifndef WEFT_HANDOFF_MUTEX
    // The light side, for the thread the handoff is biased to. Only that
    // thread writes its slot's flag; the bias is read again after the
    // state, so a thread that read it before the bias moved on, and stores
    // its (old) flag after the move, sees it gone (handoff.cpp).
    if (bias* b = bias_.load(std::memory_order_acquire); b && b->thread == me) [[likely]] {
      b->in.store(1, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);  // the heavy side's membarrier does the rest
      const uint32_t s = state_.load(std::memory_order_acquire);
      if (s == 0 && bias_.load(std::memory_order_relaxed) == b) [[likely]] {
        owner_.store(me, std::memory_order_relaxed);
        depth_ = 1;
        return;
      }
      b->in.store(0, std::memory_order_release);
    }
#endif
    enter_slow(me);
  }
  [[gnu::always_inline]] void exit() noexcept {
    if (--depth_) return;
    owner_.store(0, std::memory_order_relaxed);
#ifndef WEFT_HANDOFF_MUTEX
    if (!slow_) [[likely]] {
      // In by the light side: the bias cannot move while its flag is up.
      bias_.load(std::memory_order_relaxed)->in.store(0, std::memory_order_release);
      return;
    }
#endif
    exit_slow();
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
  void enter_slow(uintptr_t me) noexcept;
  void exit_slow() noexcept;
  // How often the bias may pass from one application thread to another
  // before the handoff drops it for good (handoff.cpp, rebias).
  static constexpr uint32_t kBiasMoves = 16;
  // One per thread the bias was ever given to, never reused: a thread that
  // read the bias as its own before it moved on writes only its own flag.
  struct bias {
    uintptr_t thread = 0;
    std::atomic<uint32_t> in{0};  // the thread is in by the light side
  };
  void rebias(uintptr_t me) noexcept;

  std::atomic<uintptr_t> owner_{0};
  uint32_t depth_ = 0;   // the holder's
  bool slow_ = false;    // the holder's: it entered through mutex_
  bool fenced_ = false;  // the holder's: it raised state_ (and must lower it)
#ifndef WEFT_HANDOFF_MUTEX
  std::atomic<uint32_t> state_{0};    // a slow-side holder excludes the light side
  std::atomic<bias*> bias_{nullptr};  // whose the light side is; null: nobody's
  uint32_t biases_used_ = 0;          // under mutex_: of biases_
  bool dropped_ = false;              // under mutex_: the bias is gone for good
  bias biases_[kBiasMoves + 1];  // the first holder and each move
#endif
  std::atomic<uint32_t> app_waits_{0};
  fast_mutex mutex_;  // the slow side: weft threads, and application threads without the bias
};

}  // namespace weft::util
