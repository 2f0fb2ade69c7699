// SPDX-License-Identifier: MIT
#pragma once

namespace weft::util {

// Gives up the core to whoever else wants it, for a thread that has polled
// long enough to know that it waits for another thread or process.
//
// sched_yield alone can keep two busy waiters on one core while another core
// is idle: each runs only briefly between yields, so the scheduler's balancer
// sees both as cache-hot and leaves them together for tens of milliseconds
// (an unpinned fi_pingpong pair measured 2-4x slower in half the runs). So a
// thread whose yields keep handing its core to someone else, and still does
// on one more try, moves itself once: it takes its current CPU out of its
// affinity mask and puts the mask back at once, which leaves it on another
// CPU it was allowed (an idle one if there is one). A thread allowed a
// single CPU is never moved, and at most one move per millisecond per thread
// (docs/decisions.md, "A waiter that shares its core moves itself").
void give_up_core() noexcept;

}  // namespace weft::util
