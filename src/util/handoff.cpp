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

void handoff::enter_slow(uintptr_t me) noexcept {
  const bool app = !tl_internal_thread;
  if (!mutex_.try_lock()) {
    // Seen by a weft thread that holds it and polls (app_waiting()).
    if (app) app_waits_.fetch_add(1, std::memory_order_relaxed);
    mutex_.lock();
    if (app) app_waits_.fetch_sub(1, std::memory_order_relaxed);
  }
#ifndef WEFT_HANDOFF_MUTEX
  // Only a holder of mutex_ moves the bias, so it is stable here.
  bias* const b = bias_.load(std::memory_order_relaxed);
  const bool mine = b && b->thread == me;
  if (b && !mine) {
    // Exclude the biased thread. Every thread of the process now runs a
    // full barrier (this one included, before the call): if the biased
    // thread raised its flag before it, the load below sees it and waits;
    // if after, its load of state_ comes after the barrier and sees 1.
    // Registered in available(), which the domain asked before choosing
    // this policy, so it cannot fail with EPERM.
    state_.store(1, std::memory_order_relaxed);
    membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
    wait_until([b] { return b->in.load(std::memory_order_acquire) == 0; });
    fenced_ = true;
  }
  if (app && !mine) rebias(me);
#endif
  owner_.store(me, std::memory_order_relaxed);
  depth_ = 1;
  slow_ = true;
}

void handoff::exit_slow() noexcept {
  slow_ = false;
#ifndef WEFT_HANDOFF_MUTEX
  if (fenced_) {
    fenced_ = false;
    // Release: a thread whose load of state_ sees this 0 also sees the
    // bias as it was left (the light side reads it after state_).
    state_.store(0, std::memory_order_release);
  }
#endif
  mutex_.unlock();
}

#ifndef WEFT_HANDOFF_MUTEX
void handoff::rebias(uintptr_t me) noexcept {
  // The first application thread takes the bias, and each later one that
  // comes in by the mutex takes it over (its barrier already excluded the
  // old holder), up to kBiasMoves moves. Each move cost the mover a
  // barrier, so threads that keep taking turns (several application
  // threads on one domain's scalable-endpoint contexts, or under the
  // application's own lock) soon leave the handoff a plain mutex for good:
  // one atomic per entry for everyone, still less than a lock per object.
  // A slot is never given twice: a thread that read the bias as its own
  // before it moved raises and lowers only its old flag, which no holder
  // waits on any more.
  if (dropped_) return;
  if (biases_used_ == std::size(biases_)) {
    dropped_ = true;
    bias_.store(nullptr, std::memory_order_relaxed);
    return;
  }
  bias* const next = &biases_[biases_used_++];
  next->thread = me;
  bias_.store(next, std::memory_order_release);
}
#endif

}  // namespace weft::util
