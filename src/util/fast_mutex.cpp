// SPDX-License-Identifier: MIT
// weft — fast_mutex's contended paths: a short spin, then futex sleep.
#include "util/fast_mutex.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace weft::util {

namespace {

void futex(std::atomic<uint32_t>& word, int op, uint32_t val) noexcept {
  // The kernel reads the word as a plain 32-bit int; std::atomic<uint32_t>
  // is one (lock-free, same size and alignment, checked below).
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  static_assert(std::atomic<uint32_t>::is_always_lock_free);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), op | FUTEX_PRIVATE_FLAG, val, nullptr,
            nullptr, 0);
}

}  // namespace

void fast_mutex::lock_slow() noexcept {
  // A holder on another core usually lets go within a few hundred cycles
  // (the data-path sections are short): spin on a load before sleeping.
  for (int i = 0; i < 128; ++i) {
    cpu_relax();
    uint32_t free = 0;
    if (state_.load(std::memory_order_relaxed) == 0 &&
        state_.compare_exchange_strong(free, 1, std::memory_order_acquire,
                                       std::memory_order_relaxed))
      return;
  }
  // Mark it waited-for and sleep while it stays held; whoever unlocks a 2
  // wakes one of us, and a woken locker takes it as 2 (others may wait).
  while (state_.exchange(2, std::memory_order_acquire) != 0) futex(state_, FUTEX_WAIT, 2);
}

void fast_mutex::wake_one() noexcept { futex(state_, FUTEX_WAKE, 1); }

}  // namespace weft::util
