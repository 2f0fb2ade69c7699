// SPDX-License-Identifier: MIT
// weft — the locks of FI_THREAD_SAFE objects on the data path: a mutex whose
// uncontended lock and unlock are one atomic instruction each, inline, and
// a recursive form of it.
//
// Why not std::mutex: under FI_THREAD_SAFE (the default threading model of
// both libraries, so what fi_pingpong and applications that do not choose
// get) a small message takes three or four lock/unlock pairs on its way
// (the endpoint, the receive engine, the CQ). Each pthread pair is two calls
// through the PLT and a type dispatch around the two atomics; measured on
// the shm lean ping-pong, FI_THREAD_SAFE cost 0.045 us per hop over
// FI_THREAD_DOMAIN (0.18 us), most of it that overhead.
//
// The algorithm is the three-state futex mutex (0 free, 1 held, 2 held and
// maybe waited for): a contended locker spins briefly, then marks the word 2
// and sleeps in futex_wait; an unlock that finds 2 wakes one sleeper. The
// atomics carry acquire/release, so ThreadSanitizer sees the ordering (it
// does not know these are locks, so it reports no lock-order cycles).
#pragma once

#include <atomic>
#include <cstdint>

namespace weft::util {

// The spin-wait hint of a loop that waits for another core (pause on x86,
// yield on arm64), for util's spinning waiters.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

class fast_mutex {
 public:
  fast_mutex() = default;
  fast_mutex(const fast_mutex&) = delete;
  fast_mutex& operator=(const fast_mutex&) = delete;

  void lock() noexcept {
    uint32_t free = 0;
    if (state_.compare_exchange_strong(free, 1, std::memory_order_acquire,
                                       std::memory_order_relaxed)) [[likely]]
      return;
    lock_slow();
  }
  bool try_lock() noexcept {
    uint32_t free = 0;
    return state_.compare_exchange_strong(free, 1, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }
  void unlock() noexcept {
    if (state_.exchange(0, std::memory_order_release) == 2) [[unlikely]]
      wake_one();
  }

 private:
  void lock_slow() noexcept;
  void wake_one() noexcept;
  std::atomic<uint32_t> state_{0};
};

// The same, which the thread holding it may take again (the shm endpoint's
// lock, as std::recursive_mutex was before it).
class fast_recursive_mutex {
 public:
  void lock() noexcept {
    const uintptr_t me = self();
    if (owner_.load(std::memory_order_relaxed) == me) {
      ++depth_;
      return;
    }
    m_.lock();
    owner_.store(me, std::memory_order_relaxed);
    depth_ = 1;
  }
  bool try_lock() noexcept {
    const uintptr_t me = self();
    if (owner_.load(std::memory_order_relaxed) == me) {
      ++depth_;
      return true;
    }
    if (!m_.try_lock()) return false;
    owner_.store(me, std::memory_order_relaxed);
    depth_ = 1;
    return true;
  }
  void unlock() noexcept {
    if (--depth_) return;
    owner_.store(0, std::memory_order_relaxed);
    m_.unlock();
  }

 private:
  // The thread pointer: distinct for every live thread, read without a call.
  // Only the holder stores its own value, so reading it back means "mine".
  static uintptr_t self() noexcept { return reinterpret_cast<uintptr_t>(__builtin_thread_pointer()); }
  fast_mutex m_;
  std::atomic<uintptr_t> owner_{0};
  uint32_t depth_ = 0;  // the holder's alone
};

}  // namespace weft::util
