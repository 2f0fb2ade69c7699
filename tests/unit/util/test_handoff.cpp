// SPDX-License-Identifier: MIT
// weft — unit tests of util::handoff (util/handoff.hpp): an application
// thread (light side) and weft threads (heavy side) never hold it at once,
// nested entries only count, an application thread that finds a weft
// thread in waits for it and is seen waiting, and the domain picks the
// policy only for FI_THREAD_DOMAIN with automatic progress on a provider
// that opts in.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "util/domain.hpp"
#include "util/handoff.hpp"
#include "util_env.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

using weft::util::handoff;

namespace {

// A section that loses updates when two threads run it at once: the read
// and the write are apart, with a pause between.
void slow_increment(volatile uint64_t& count) {
  uint64_t v = count;
  for (int i = 0; i < 20; ++i) std::atomic_signal_fence(std::memory_order_seq_cst);
  count = v + 1;
}

// The same, whose section lasts about as long as a barrier (a few
// microseconds), so that a thread let in early overlaps it.
void slower_increment(volatile uint64_t& count) {
  uint64_t v = count;
  for (int i = 0; i < 100; ++i) weft::util::cpu_relax();
  count = v + 1;
}

// Marks the calling thread as weft's own for its lifetime, as
// progress_thread::run does.
struct as_internal {
  as_internal() { weft::util::tl_internal_thread = true; }
  ~as_internal() { weft::util::tl_internal_thread = false; }
};

TEST(handoff, the_application_and_weft_threads_never_hold_it_at_once) {
  if (!handoff::available(nullptr)) GTEST_SKIP() << "membarrier(2) is not usable here";
  handoff h;
  volatile uint64_t count = 0;
  constexpr int app_rounds = 200000, thread_rounds = 2000, threads = 2;
  std::vector<std::thread> ts;
  // Two weft threads (two domains' progress threads reaching one object),
  // entering seldom, as progress threads do; the application all the time.
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      as_internal mark;
      for (int i = 0; i < thread_rounds; ++i) {
        h.enter();
        slow_increment(count);
        h.exit();
      }
    });
  for (int i = 0; i < app_rounds; ++i) {
    h.enter();
    slow_increment(count);
    h.exit();
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(count, uint64_t(app_rounds) + uint64_t(thread_rounds) * threads);
}

// Several application threads in one domain (threads on separate contexts
// of a scalable endpoint, which weft allows under FI_THREAD_DOMAIN) are
// excluded from each other as well as from weft threads: the light side is
// one thread's, the others come in through the mutex, and the bias moves
// and is finally dropped without a lost update. Many short rounds, each on
// a new handoff, so that the bias's moves (its first few hundred entries)
// are most of the run.
TEST(handoff, several_application_threads_and_a_weft_thread_never_hold_it_at_once) {
  if (!handoff::available(nullptr)) GTEST_SKIP() << "membarrier(2) is not usable here";
  constexpr int app_threads = 3, app_rounds = 500, thread_rounds = 100, rounds = 40;
  for (int round = 0; round < rounds; ++round) {
    handoff h;
    volatile uint64_t count = 0;
    std::vector<std::thread> ts;
    // All start together, so that the threads overlap.
    std::atomic<int> ready{0};
    auto gate = [&] {
      ++ready;
      while (ready < app_threads + 1) std::this_thread::yield();
    };
    ts.emplace_back([&] {
      as_internal mark;
      gate();
      for (int i = 0; i < thread_rounds; ++i) {
        h.enter();
        slower_increment(count);
        h.exit();
      }
    });
    for (int t = 0; t < app_threads; ++t)
      ts.emplace_back([&] {
        gate();
        for (int i = 0; i < app_rounds; ++i) {
          h.enter();
          h.enter();  // nested: only counts
          slower_increment(count);
          h.exit();
          h.exit();
        }
      });
    for (auto& t : ts) t.join();
    ASSERT_EQ(count, uint64_t(app_rounds) * app_threads + uint64_t(thread_rounds)) << "round " << round;
  }
}

// An application that hands the domain from one thread to the next (setup
// on one, traffic on another), each while a weft thread comes and goes:
// whoever has the light side, the exclusion holds.
TEST(handoff, the_domain_passes_from_one_application_thread_to_the_next) {
  if (!handoff::available(nullptr)) GTEST_SKIP() << "membarrier(2) is not usable here";
  handoff h;
  volatile uint64_t count = 0;
  std::atomic<bool> stop{false};
  uint64_t weft_rounds = 0;  // the weft thread's own: read after the join
  std::thread weft([&] {
    as_internal mark;
    while (!stop) {
      h.enter();
      slower_increment(count);
      h.exit();
      ++weft_rounds;
      std::this_thread::sleep_for(std::chrono::microseconds(20));  // seldom, as progress threads
    }
  });
  uint64_t mine = 0;
  for (int phase = 0; phase < 24; ++phase)  // more phases than the bias may move (16)
    std::thread([&] {
      for (int i = 0; i < 2000; ++i) {
        h.enter();
        slower_increment(count);
        ++mine;
        h.exit();
      }
    }).join();
  stop = true;
  weft.join();
  EXPECT_EQ(count, mine + weft_rounds);
}

TEST(handoff, nested_entries_only_count) {
  handoff h;
  EXPECT_FALSE(h.held());
  h.enter();
  h.enter();
  EXPECT_TRUE(h.held());
  h.exit();
  EXPECT_TRUE(h.held());  // still the outer entry's
  h.exit();
  EXPECT_FALSE(h.held());
  {
    handoff::guard outer{h};
    handoff::guard inner{h};
    EXPECT_TRUE(h.held());
  }
  EXPECT_FALSE(h.held());
}

TEST(handoff, another_thread_does_not_take_it_for_its_own) {
  handoff h;
  h.enter();
  bool held_there = true;
  std::thread([&] { held_there = h.held(); }).join();
  EXPECT_FALSE(held_there);
  h.exit();
}

TEST(handoff, an_application_thread_waits_for_a_weft_thread_and_is_seen_waiting) {
  if (!handoff::available(nullptr)) GTEST_SKIP() << "membarrier(2) is not usable here";
  handoff h;
  std::atomic<bool> in{false}, release{false}, seen{false};
  std::thread weft([&] {
    as_internal mark;
    h.enter();
    in = true;
    // Held until the application is seen waiting (or a generous bound).
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!release && std::chrono::steady_clock::now() < until) {
      if (h.app_waiting()) seen = true;
      std::this_thread::yield();
    }
    h.exit();
  });
  while (!in) std::this_thread::yield();
  std::atomic<bool> entered{false};
  std::thread app([&] {
    h.enter();
    entered = true;
    h.exit();
  });
#ifdef WEFT_HANDOFF_MUTEX  // under ThreadSanitizer a mutex stands in: no flag
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
#else
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!seen && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  EXPECT_TRUE(seen.load());
#endif
  EXPECT_FALSE(entered.load());  // not while the weft thread is in
  release = true;
  app.join();
  weft.join();
  EXPECT_TRUE(entered.load());
}

// The policy a domain of this provider, threading model and data progress
// picks (provider hooks that opt in or not).
weft::util::lock_kind locks_of(fi_threading t, fi_progress p, bool opt_in) {
  using namespace weft::util;
  static const domain_hooks in{.handoff = []() noexcept { return true; }};
  static const domain_hooks out{};
  fi_fabric_attr fa{};
  fa.api_version = FI_VERSION(1, 21);
  auto* fab = new fabric(test_env::provider(), nullptr, fa, nullptr);
  fi_domain_attr da{};
  da.threading = t;
  da.data_progress = p;
  fi_info info{};
  info.domain_attr = &da;
  auto* dom = new domain(*fab, opt_in ? &in : &out, info, nullptr);
  lock_kind k = dom->locks();
  EXPECT_EQ(fi_close(&dom->fid), 0);
  EXPECT_EQ(fi_close(&fab->fid), 0);
  return k;
}

TEST(handoff, only_thread_domain_with_automatic_progress_on_a_provider_that_opts_in_takes_it) {
  using weft::util::lock_kind;
  const lock_kind auto_domain = handoff::available(nullptr) ? lock_kind::handoff : lock_kind::mutex;
  EXPECT_EQ(locks_of(FI_THREAD_DOMAIN, FI_PROGRESS_AUTO, true), auto_domain);
  EXPECT_EQ(locks_of(FI_THREAD_DOMAIN, FI_PROGRESS_AUTO, false), lock_kind::mutex);
  EXPECT_EQ(locks_of(FI_THREAD_SAFE, FI_PROGRESS_AUTO, true), lock_kind::mutex);
  EXPECT_EQ(locks_of(FI_THREAD_COMPLETION, FI_PROGRESS_AUTO, true), lock_kind::mutex);
  EXPECT_EQ(locks_of(FI_THREAD_DOMAIN, FI_PROGRESS_MANUAL, true), lock_kind::none);
  EXPECT_EQ(locks_of(FI_THREAD_COMPLETION, FI_PROGRESS_MANUAL, true), lock_kind::none);
  EXPECT_EQ(locks_of(FI_THREAD_SAFE, FI_PROGRESS_MANUAL, true), lock_kind::mutex);
}

}  // namespace
