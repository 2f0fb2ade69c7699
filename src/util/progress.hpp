// SPDX-License-Identifier: MIT
// weft — manual progress: the endpoints bound to a CQ, counter or EQ register
// a hook, and reading or waiting on that object drives them. After the hooks
// (no provider lock held any more) the domain's triggered work that became
// due is issued (util/trigger.hpp).
#pragma once

#include "util/fast_mutex.hpp"
#include "util/lock.hpp"
#include "util/trigger.hpp"

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <vector>

namespace weft::util {

struct progress_hook {
  void (*fn)(void* obj) noexcept;
  void* obj;
  // A source whose events must come after those its fellow sources had
  // already received (a passive endpoint: a connection request after the end
  // of an earlier connection whose FIN arrived first) gathers its input
  // here, before every hook's fn runs, and announces in fn, which runs after
  // the others': such hooks are kept last.
  void (*gather)(void* obj) noexcept = nullptr;
};

class progress_list {
 public:
  void add(progress_hook h) {
    std::lock_guard g{m_};
    for (const auto& x : hooks_)
      if (x.obj == h.obj) return;  // bound twice (tx and rx): drive it once
    for (const auto& x : gatherers_)
      if (x.obj == h.obj) return;
    if (h.gather)
      gatherers_.push_back(h);
    else
      hooks_.push_back({h.fn, h.obj});
  }
  void remove(void* obj) noexcept {
    std::lock_guard g{m_};
    std::erase_if(hooks_, [&](const plain_hook& h) { return h.obj == obj; });
    std::erase_if(gatherers_, [&](const progress_hook& h) { return h.obj == obj; });
  }
  // Drives every bound source. Under a threading model that shares the object
  // between threads the list is guarded; otherwise the caller is alone.
  template <class Lock>
  void run() noexcept {
    if constexpr (std::is_same_v<Lock, null_lock>) {
      run_hooks();
    } else if constexpr (std::is_same_v<Lock, handoff_lock>) {
      // The application alone adds and removes hooks (binding, closing,
      // which FI_THREAD_DOMAIN keeps apart from its other calls on the
      // object), and otherwise only reads the list: its runs need no lock,
      // even from several threads (contexts of a scalable endpoint). A weft
      // thread's run (a triggered operation's counter read) only reads the
      // list, beside the application's runs, and excludes its changes.
      if (tl_internal_thread) [[unlikely]]
        run_locked_hooks();
      else
        run_hooks();
    } else {
      std::lock_guard g{m_};
      run_hooks();
    }
    if (triggers_) triggers_->fire_if_ready();
  }
  // The engine whose ready work run() issues (CQs and counters: their
  // domain's; EQs have none).
  void fire_triggers(trigger_engine* t) noexcept { triggers_ = t; }
  // For control paths that do not know the policy (fi_wait on a wait set).
  void run_locked() noexcept { run<mutex_lock>(); }
  bool empty() const noexcept { return hooks_.empty() && gatherers_.empty(); }

 private:
  // Hooks without a gather step, apart: the loop every fi_cq_read runs
  // walks 16-byte entries and tests nothing else (a gathering hook is a
  // passive endpoint's, on its EQ).
  struct plain_hook {
    void (*fn)(void* obj) noexcept;
    void* obj;
  };
  [[gnu::noinline]] void run_locked_hooks() noexcept {
    std::lock_guard g{m_};
    run_hooks();
  }
  void run_hooks() noexcept {
    if (!gatherers_.empty()) [[unlikely]]
      return run_with_gatherers();
    for (const auto& h : hooks_) h.fn(h.obj);
  }
  void run_with_gatherers() noexcept {
    for (const auto& g : gatherers_) g.gather(g.obj);
    for (const auto& h : hooks_) h.fn(h.obj);
    for (const auto& g : gatherers_) g.fn(g.obj);  // after the others' (progress_hook)
  }
  // Taken on every fi_cq_read under FI_THREAD_SAFE (a ping-pong's every
  // hop): the inline futex lock, not std::mutex's two library calls.
  fast_mutex m_;
  std::vector<plain_hook> hooks_;
  std::vector<progress_hook> gatherers_;  // hooks with a gather step
  trigger_engine* triggers_ = nullptr;
};

}  // namespace weft::util
