// SPDX-License-Identifier: MIT
// weft — automatic progress (FI_PROGRESS_AUTO): one thread per domain that
// sleeps in epoll on the descriptors of the domain's endpoints and runs an
// endpoint's progress when its descriptor is ready.
//
// A source is a descriptor that is readable when the source has work (a
// provider endpoint passes its own epoll set, which is readable while any of
// its sockets or timers is ready) and a function that does the work. Each
// source is armed one-shot: after its function ran it is re-armed, at once
// when the function says it is done, or after `backoff` when it says it is
// blocked (say, its completion queue is full and only the application can
// make room), so a blocked source never turns the thread into a spinning
// one. Idle, the thread sleeps in epoll_wait without a timeout: no CPU.
//
// remove() is synchronous: when it returns, the thread is not running the
// source's function and never will again, so the owner may be destroyed.
#pragma once

#include "core/errc.hpp"
#include "util/fd.hpp"

#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

struct epoll_event;

namespace weft::util {

class progress_thread {
 public:
  // The work of a source: false when it is blocked on something only the
  // application can resolve (re-armed after the backoff), true otherwise.
  using work_fn = bool (*)(void* obj) noexcept;
  static constexpr uint64_t backoff_ns = 1'000'000;
  // The thread's name (at most 15 characters: the kernel's limit).
  static constexpr char thread_name[] = "weft-progress";

  progress_thread() = default;
  ~progress_thread();
  progress_thread(const progress_thread&) = delete;
  progress_thread& operator=(const progress_thread&) = delete;

  // Starts the thread on first use. errc of the failure (logged by caller).
  // A source added `last` announces what must follow the events its fellow
  // sources already have (a passive endpoint's connection requests): its
  // work gathers, calls run_others_ready, then announces.
  errc add(int fd, work_fn fn, void* obj, bool last = false) noexcept;
  void remove(void* obj) noexcept;
  // From a `last` source's work, on the thread: runs at once every other
  // source that is ready now, so that what reached them before what the
  // caller gathered is reported first. Other `last` sources stay armed for
  // the next pass.
  void run_others_ready() noexcept;
  // Work run after every pass, holding none of the thread's locks (a
  // domain's triggered work, util/trigger.hpp). remove_after is synchronous
  // like remove.
  using after_fn = void (*)(void* obj) noexcept;
  void add_after(after_fn fn, void* obj);
  void remove_after(void* obj) noexcept;

 private:
  struct source {
    uint64_t id;  // epoll's data: events of a source removed meanwhile find nothing
    int fd;
    work_fn fn;
    void* obj;
    bool last;
    uint64_t rearm_at = 0;  // blocked: re-armed then
  };
  errc start() noexcept;
  void run() noexcept;
  // One round of the sources epoll_wait reported; false once stopping.
  bool pass(const epoll_event* evs, int n, int& timeout) noexcept;
  // The source of epoll's id, if still there, or null; runs one's work.
  source* find(uint64_t id) noexcept;
  void work(source& s) noexcept;
  void run_after() noexcept;
  void arm(source& s) noexcept;

  std::mutex mutex_;  // sources_, and held while a source's work runs
  std::vector<std::unique_ptr<source>> sources_;
  unique_fd epoll_;
  unique_fd wake_;  // eventfd: stop, or a kick
  std::thread thread_;
  bool stop_ = false;
  uint64_t next_id_ = 1;
  struct after_hook {
    after_fn fn;
    void* obj;
  };
  std::mutex after_mutex_;  // after_, and held while they run
  std::vector<after_hook> after_;
};

}  // namespace weft::util
