// SPDX-License-Identifier: MIT
// weft — unit tests of util::fast_mutex and util::fast_recursive_mutex: mutual
// exclusion under contention (so that ThreadSanitizer, too, sees every
// access ordered), a contended locker that sleeps until the holder lets go,
// try_lock, and re-entry by the holder only.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "util/fast_mutex.hpp"

using weft::util::fast_mutex;
using weft::util::fast_recursive_mutex;

namespace {

// Threads add to a plain counter under the lock; a lost update (two
// holders at once) shows as a short total.
template <class M, class Section>
uint64_t hammer(M& m, int threads, int rounds, Section section) {
  uint64_t count = 0;
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < rounds; ++i) section(m, count);
    });
  for (auto& t : ts) t.join();
  return count;
}

// True when another thread that locks `m` while we hold it waits (past the
// spin, asleep) and gets it once we let go.
template <class M>
bool blocks_while_held(M& m) {
  std::atomic<bool> got{false};
  m.lock();
  std::thread other([&] {
    std::lock_guard g{m};
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // past the spin: it sleeps
  const bool early = got.load();
  m.unlock();
  other.join();
  return !early && got.load();
}

// Whether another thread can take `m` now (it lets go at once if it can).
template <class M>
bool another_thread_gets(M& m) {
  bool got = false;
  std::thread([&] {
    got = m.try_lock();
    if (got) m.unlock();
  }).join();
  return got;
}

}  // namespace

TEST(fast_mutex, excludes_under_contention) {
  fast_mutex m;
  const uint64_t total = hammer(m, 4, 100000, [](fast_mutex& mu, uint64_t& c) {
    std::lock_guard g{mu};
    uint64_t v = c;  // read, then write: two holders at once lose one
    c = v + 1;
  });
  EXPECT_EQ(total, 400000u);
}

TEST(fast_mutex, a_contended_locker_waits_for_the_holder) {
  fast_mutex m;
  EXPECT_TRUE(blocks_while_held(m));
  // And the lock is free again afterwards, uncontended.
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

TEST(fast_mutex, try_lock_fails_while_another_holds_it) {
  fast_mutex m;
  m.lock();
  EXPECT_FALSE(another_thread_gets(m));
  m.unlock();
  EXPECT_TRUE(another_thread_gets(m));
}

TEST(fast_recursive_mutex, the_holder_reenters_and_others_wait_for_the_last_unlock) {
  fast_recursive_mutex m;
  m.lock();
  m.lock();
  EXPECT_TRUE(m.try_lock());  // a third level
  EXPECT_FALSE(another_thread_gets(m));
  m.unlock();
  m.unlock();
  EXPECT_FALSE(another_thread_gets(m)) << "released before the outermost unlock";
  m.unlock();
  EXPECT_TRUE(another_thread_gets(m));
}

TEST(fast_recursive_mutex, excludes_under_contention_with_nesting) {
  fast_recursive_mutex m;
  const uint64_t total = hammer(m, 4, 50000, [](fast_recursive_mutex& mu, uint64_t& c) {
    std::lock_guard outer{mu};
    uint64_t v = c;
    {
      std::lock_guard inner{mu};
      c = v + 1;
    }
    c = c + 1;
  });
  EXPECT_EQ(total, 400000u);
  EXPECT_TRUE(blocks_while_held(m));
}
