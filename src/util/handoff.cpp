// SPDX-License-Identifier: MIT
// weft — the domain handoff's slow paths (handoff.hpp says why and how).
#include "util/handoff.hpp"

#include "core/log.hpp"

#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace weft::util {

namespace {

// Waits until `done()`: spins a little (the other side's stay is a short
// call or a bounded pass), then gives the core up between looks, so that on
// a crowded machine the side it waits for gets to run.
template <class F>
void wait_until(F done) noexcept {
  for (unsigned i = 0; !done(); ++i) {
    if (i < 256)
      cpu_relax();
    else
      sched_yield();
  }
}

long membarrier(int cmd) noexcept { return ::syscall(SYS_membarrier, cmd, 0, 0); }

}  // namespace

bool handoff::available(const fi_provider* prov) noexcept {
#ifdef WEFT_HANDOFF_MUTEX
  (void)prov;
  return true;  // a mutex stands in for the barrier: always usable
#else
  // Registration is per process (a fork's child registers anew: the state
  // does not survive exec, and a child may be one).
  static std::atomic<int> registered_pid{0};
  const int pid = static_cast<int>(::getpid());
  if (registered_pid.load(std::memory_order_acquire) == pid) return true;
  const long cmds = membarrier(MEMBARRIER_CMD_QUERY);
  const char* why = nullptr;
  int err = 0;
  if (cmds < 0) {
    err = errno;
    why = "membarrier(2) is not offered";
  } else if (!(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) {
    why = "membarrier(2) has no private expedited command";
  } else if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0) {
    err = errno;
    why = "membarrier(2) registration failed";
  }
  if (why) {
    WEFT_INFO(prov ? prov : core::core_provider(), FI_LOG_DOMAIN,
              "FI_THREAD_DOMAIN with automatic progress locks every object: %s%s%s", why,
              err ? ": " : "", err ? std::strerror(err) : "");
    return false;
  }
  registered_pid.store(pid, std::memory_order_release);
  return true;
#endif
}

#ifdef WEFT_HANDOFF_MUTEX

void handoff::enter_heavy() noexcept {
  m_.lock();
  heavy_ = true;
}

void handoff::exit_heavy() noexcept {
  heavy_ = false;
  m_.unlock();
}

#else

void handoff::light_wait() noexcept {
  app_waits_.fetch_add(1, std::memory_order_relaxed);
  do {
    app_in_.store(0, std::memory_order_release);
    wait_until([this] { return state_.load(std::memory_order_acquire) == 0; });
    app_in_.store(1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } while (state_.load(std::memory_order_acquire) != 0);
  app_waits_.fetch_sub(1, std::memory_order_relaxed);
}

void handoff::enter_heavy() noexcept {
  heavy_mutex_.lock();
  state_.store(1, std::memory_order_relaxed);
  // Every thread of the process now runs a full barrier (this one included,
  // before the call): an application thread that stored app_in_ before it
  // has it visible to the load below; one that stores it after loads
  // state_ after it, and so sees 1. Registered in available(), which the
  // domain asked before choosing this policy, so it cannot fail with
  // EPERM; anything else would be a kernel without the command, refused
  // there too.
  membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
  wait_until([this] { return app_in_.load(std::memory_order_acquire) == 0; });
  heavy_ = true;
}

void handoff::exit_heavy() noexcept {
  heavy_ = false;
  state_.store(0, std::memory_order_release);
  heavy_mutex_.unlock();
}

#endif

}  // namespace weft::util
