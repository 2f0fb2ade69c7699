// SPDX-License-Identifier: MIT
// weft — the automatic-progress thread of a domain.
#include "util/progress_thread.hpp"

#include "util/handoff.hpp"
#include "util/wait.hpp"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace weft::util {

namespace {

errc from_errno(int e) noexcept {
  return e == ENOMEM ? errc::nomem : e == EMFILE || e == ENFILE ? errc::mfile : errc::io;
}

}  // namespace

progress_thread::~progress_thread() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard g{mutex_};
    stop_ = true;
  }
  uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(wake_.get(), &one, sizeof one);
  thread_.join();
}

errc progress_thread::start() noexcept {
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  wake_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_.valid() || !wake_.valid()) return from_errno(errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;  // the wake-up descriptor
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev) != 0) return from_errno(errno);
  try {
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    return errc::nomem;
  }
  // Named, so that top, a debugger, or a test measuring its idle cost
  // (/proc/self/task/*/comm) can tell it from the application's threads.
  pthread_setname_np(thread_.native_handle(), thread_name);
  return errc::ok;
}

errc progress_thread::add(int fd, work_fn fn, void* obj, bool last) noexcept {
  std::lock_guard g{mutex_};
  if (!thread_.joinable())
    if (errc e = start(); e != errc::ok) return e;
  try {
    auto s = std::make_unique<source>(source{next_id_++, fd, fn, obj, last, 0});
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLONESHOT;
    ev.data.u64 = s->id;
    sources_.reserve(sources_.size() + 1);
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) return from_errno(errno);
    sources_.push_back(std::move(s));
  } catch (...) {
    return errc::nomem;
  }
  return errc::ok;
}

void progress_thread::remove(void* obj) noexcept {
  // Taking the mutex waits for a run of the source's work to end.
  std::lock_guard g{mutex_};
  std::erase_if(sources_, [&](const std::unique_ptr<source>& s) {
    if (s->obj != obj) return false;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s->fd, nullptr);
    return true;
  });
}

void progress_thread::arm(source& s) noexcept {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLONESHOT;
  ev.data.u64 = s.id;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, s.fd, &ev);
}

void progress_thread::run() noexcept {
  // Every entry of this thread into a domain's handoff takes the heavy side
  // (handoff.hpp).
  tl_internal_thread = true;
  epoll_event evs[16];
  int timeout = -1;
  for (;;) {
    int n = ::epoll_wait(epoll_.get(), evs, 16, timeout);
    if (!pass(evs, n, timeout)) return;
    run_after();
  }
}

progress_thread::source* progress_thread::find(uint64_t id) noexcept {
  auto it = std::find_if(sources_.begin(), sources_.end(),
                         [&](const std::unique_ptr<source>& s) { return s->id == id; });
  return it == sources_.end() ? nullptr : it->get();  // null: removed since epoll_wait
}

void progress_thread::work(source& s) noexcept {
  if (s.fn(s.obj))
    arm(s);
  else
    s.rearm_at = now_ns() + backoff_ns;
}

void progress_thread::run_others_ready() noexcept {
  // mutex_ is held: we are inside pass(), in the calling source's work,
  // whose own descriptor is disarmed (one-shot) and so not reported here.
  epoll_event evs[16];
  int n = ::epoll_wait(epoll_.get(), evs, 16, 0);
  for (int i = 0; i < n; ++i) {
    uint64_t id = evs[i].data.u64;
    if (id == 0) continue;  // level-triggered: reported again at the next wait
    source* s = find(id);
    if (!s) continue;
    if (s->last)
      arm(*s);  // its readiness is reported again at the next wait
    else
      work(*s);
  }
}

bool progress_thread::pass(const epoll_event* evs, int n, int& timeout) noexcept {
  {
    std::lock_guard g{mutex_};
    if (stop_) return false;
    for (int i = 0; i < n; ++i) {
      uint64_t id = evs[i].data.u64;
      if (id == 0) {
        uint64_t v;
        [[maybe_unused]] ssize_t r = ::read(wake_.get(), &v, sizeof v);
        continue;
      }
      if (source* s = find(id)) work(*s);
    }
    // Blocked sources whose backoff ended are armed again; the next wait
    // lasts until the earliest of the others.
    uint64_t now = now_ns(), next = 0;
    for (auto& s : sources_) {
      if (!s->rearm_at) continue;
      if (s->rearm_at <= now) {
        s->rearm_at = 0;
        arm(*s);
      } else {
        next = next ? std::min(next, s->rearm_at) : s->rearm_at;
      }
    }
    timeout = next ? static_cast<int>((next - now + 999'999) / 1'000'000) : -1;
  }
  return true;
}

void progress_thread::add_after(after_fn fn, void* obj) {
  std::lock_guard g{after_mutex_};
  after_.push_back({fn, obj});
}

void progress_thread::remove_after(void* obj) noexcept {
  std::lock_guard g{after_mutex_};
  std::erase_if(after_, [obj](const after_hook& h) { return h.obj == obj; });
}

void progress_thread::run_after() noexcept {
  std::lock_guard g{after_mutex_};
  for (const after_hook& h : after_) h.fn(h.obj);
}

}  // namespace weft::util
