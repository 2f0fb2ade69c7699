// SPDX-License-Identifier: MIT
// weft — give_up_core: a polling thread whose core is shared with another
// busy thread moves itself to another CPU it is allowed, and keeps its mask.
#include "util/yield.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <sched.h>
#include <thread>

namespace weft::util {
namespace {

cpu_set_t only(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return s;
}

// What the other side of a ping-pong does while it waits: polls for a while
// (a CQ's 512 empty reads), then yields.
void poll_then_yield() {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
  while (std::chrono::steady_clock::now() < until) {
  }
  sched_yield();
}

// The situation an unpinned ping-pong pair falls into when the scheduler
// starts both sides on one CPU: two threads taking turns on it through
// sched_yield while another CPU is free to take one of them.
TEST(yield_test, a_waiter_sharing_its_core_moves_to_another_it_is_allowed) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  if (CPU_COUNT(&allowed) < 2) GTEST_SKIP() << "needs two CPUs to move between";
  int c0 = 0;
  while (!CPU_ISSET(c0, &allowed)) ++c0;

  // The other busy thread: pinned to c0, so only the waiter can move.
  std::atomic<bool> started{false}, stop{false};
  std::thread other([&] {
    cpu_set_t s = only(c0);
    sched_setaffinity(0, sizeof s, &s);
    started.store(true);
    while (!stop.load(std::memory_order_relaxed)) poll_then_yield();
  });
  while (!started.load()) sched_yield();

  // The waiter starts on c0 too, then is allowed everything again: the
  // kernel leaves a thread where it is while its CPU stays allowed.
  cpu_set_t s = only(c0);
  ASSERT_EQ(sched_setaffinity(0, sizeof s, &s), 0);
  ASSERT_EQ(sched_setaffinity(0, sizeof allowed, &allowed), 0);
  int calls = 0;
  bool moved = false;
  for (; calls < 40 && !moved; ++calls) {
    give_up_core();
    moved = sched_getcpu() != c0;
  }
  stop.store(true);
  other.join();
  EXPECT_TRUE(moved) << "still on CPU " << c0 << " after " << calls
                     << " yields that each ran the other thread";

  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&after, &allowed)) << "the waiter's mask was not given back";
}

// A thread the application pinned to one CPU stays there, however crowded.
TEST(yield_test, a_pinned_waiter_stays_on_its_cpu) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  int c0 = 0;
  while (!CPU_ISSET(c0, &allowed)) ++c0;
  std::atomic<bool> started{false}, stop{false};
  std::thread other([&] {
    cpu_set_t s = only(c0);
    sched_setaffinity(0, sizeof s, &s);
    started.store(true);
    while (!stop.load(std::memory_order_relaxed)) poll_then_yield();
  });
  while (!started.load()) sched_yield();
  cpu_set_t s = only(c0);
  ASSERT_EQ(sched_setaffinity(0, sizeof s, &s), 0);
  for (int i = 0; i < 100; ++i) {
    give_up_core();
    ASSERT_EQ(sched_getcpu(), c0);
  }
  stop.store(true);
  other.join();
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&after, &s));
  ASSERT_EQ(sched_setaffinity(0, sizeof allowed, &allowed), 0);
}

}  // namespace
}  // namespace weft::util
