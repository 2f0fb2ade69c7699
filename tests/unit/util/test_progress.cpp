// SPDX-License-Identifier: MIT
// weft — the order progress gives its sources: a source that announces
// (a passive endpoint's connection requests) does so after its fellow
// sources have reported what reached them first, on the manual path (an
// EQ's progress_list) and on the automatic one (progress_thread).
#include "util/progress.hpp"
#include "util/progress_thread.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

namespace weft::util {
namespace {

struct journal {
  std::mutex m;
  std::string s;
  void add(char c) {
    std::lock_guard g{m};
    s += c;
  }
  std::string get() {
    std::lock_guard g{m};
    return s;
  }
};

// progress_list: a hook with a gather step gathers before every other hook
// runs and announces after them, whatever the order of binding.
TEST(progress_list, an_announcing_hook_gathers_first_and_announces_last) {
  journal j;
  struct src {
    journal* j;
    char name;
  };
  src ep1{&j, 'e'}, pep{&j, 'P'}, ep2{&j, 'f'};
  auto fn = [](void* o) noexcept {
    auto* s = static_cast<src*>(o);
    s->j->add(s->name);
  };
  auto gather = [](void* o) noexcept { static_cast<src*>(o)->j->add('g'); };
  progress_list list;
  list.add({fn, &ep1});
  list.add({fn, &pep, gather});  // bound before the second endpoint
  list.add({fn, &ep2});
  list.run_locked();
  EXPECT_EQ(j.get(), "gefP");
  list.remove(&pep);
  list.add({fn, &ep1});  // twice: driven once
  list.run_locked();
  EXPECT_EQ(j.get(), "gefPef");
}

// progress_thread: a `last` source that finds work calls run_others_ready,
// which runs first the sources that are ready by then: here the endpoint
// whose descriptor became readable just before the announcement.
TEST(progress_thread, a_last_source_lets_ready_sources_run_before_it_announces) {
  int ep_pipe[2], pep_pipe[2];
  ASSERT_EQ(::pipe(ep_pipe), 0);
  ASSERT_EQ(::pipe(pep_pipe), 0);
  journal j;
  std::atomic<int> rounds{0};
  struct ctx {
    journal* j;
    int ep_rd, ep_wr, pep_rd;
    progress_thread* t;
    std::atomic<int>* rounds;
  };
  progress_thread t;
  ctx c{&j, ep_pipe[0], ep_pipe[1], pep_pipe[0], &t, &rounds};
  auto ep_work = [](void* o) noexcept -> bool {
    auto* x = static_cast<ctx*>(o);
    char b;
    if (::read(x->ep_rd, &b, 1) == 1) x->j->add('e');
    return true;
  };
  auto pep_work = [](void* o) noexcept -> bool {
    auto* x = static_cast<ctx*>(o);
    char b;
    if (::read(x->pep_rd, &b, 1) != 1) return true;
    // What reached the endpoint before the request we just gathered.
    [[maybe_unused]] ssize_t w = ::write(x->ep_wr, "x", 1);
    x->t->run_others_ready();
    x->j->add('P');
    x->rounds->fetch_add(1);
    return true;
  };
  ASSERT_EQ(t.add(ep_pipe[0], ep_work, &c), errc::ok);
  ASSERT_EQ(t.add(pep_pipe[0], pep_work, &c, true), errc::ok);
  for (int i = 0; i < 3; ++i) {
    int before = rounds.load();
    ASSERT_EQ(::write(pep_pipe[1], "r", 1), 1);
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (rounds.load() == before && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  t.remove(&c);  // both sources
  EXPECT_EQ(j.get(), "ePePeP");
  for (int fd : {ep_pipe[0], ep_pipe[1], pep_pipe[0], pep_pipe[1]}) ::close(fd);
}

}  // namespace
}  // namespace weft::util
