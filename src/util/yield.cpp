// SPDX-License-Identifier: MIT
#include "util/yield.hpp"
#include "util/wait.hpp"
#include <cstdint>
#include <sched.h>

namespace weft::util {
namespace {

// A yield that took longer than this ran someone else: an uncontended
// sched_yield is a system call of well under a microsecond here.
constexpr uint64_t ran_other_ns = 3000;
// Yields in a row that ran someone else before the thread moves itself.
constexpr uint32_t crowded_move_after = 4;
// A thread that is oversubscribed everywhere would otherwise move on every
// fourth yield; once a millisecond is enough to find an idle core.
constexpr uint64_t move_every_ns = 1000000;

// Per thread: whether the core is shared is a property of where this thread
// runs, not of the object it polls.
thread_local uint32_t crowded = 0;
thread_local uint64_t last_move = 0;

// Yields once; whether someone else ran meanwhile.
bool yield_ran_other() noexcept {
  const uint64_t t0 = now_ns();
  sched_yield();
  return now_ns() - t0 >= ran_other_ns;
}

// Moves the calling thread off its current CPU, within its own mask, which
// it gets back unchanged.
void move_off_this_cpu() noexcept {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2) return;
  const int here = sched_getcpu();
  if (here < 0 || here >= CPU_SETSIZE || !CPU_ISSET(here, &allowed)) return;
  cpu_set_t others = allowed;
  CPU_CLR(here, &others);
  if (sched_setaffinity(0, sizeof others, &others) == 0)
    sched_setaffinity(0, sizeof allowed, &allowed);
}

}  // namespace

void give_up_core() noexcept {
  if (!yield_ran_other()) {
    crowded = 0;  // nobody else wanted this core
    return;
  }
  if (++crowded < crowded_move_after) return;
  crowded = 0;
  // The thread we shared the core with may just have moved away itself
  // (both sides of a ping-pong count alike): only a yield that still hands
  // the core to someone says it is shared now.
  if (!yield_ran_other()) return;
  const uint64_t now = now_ns();
  if (now - last_move < move_every_ns) return;
  last_move = now;
  move_off_this_cpu();
}

}  // namespace weft::util
