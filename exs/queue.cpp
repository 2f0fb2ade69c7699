// SPDX-License-Identifier: MIT
// libexs: event queues. Every operation reserves its event's slot when it
// is posted, so an event is never dropped for lack of room; a thread asleep
// in exs_qdequeue first drives progress itself for up to EXS_SPIN_US
// (library::spin), then sleeps until an event is queued (a condition
// variable, no polling).
#include "exs_impl.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>

namespace exs {

queue* find_queue(exs_qhandle_t qh) {
  auto& qs = lib().queues;
  auto it = qs.find(qh);
  return it == qs.end() ? nullptr : it->second;
}

void push_event(queue* q, const exs_event_t& ev) {
  q->reserved--;
  q->events.push_back(ev);
  q->cv.notify_all();
}

}  // namespace exs

using namespace exs;

EXS_API exs_qhandle_t exs_qcreate(int depth) {
  if (depth <= 0) return errno = EINVAL, EXS_QHANDLE_INVALID;
  library& L = lib();
  std::lock_guard g{L.m};
  auto* q = new (std::nothrow) queue;
  if (!q) return errno = ENOMEM, EXS_QHANDLE_INVALID;
  q->handle = L.next_q++;
  q->depth = depth;
  L.queues[q->handle] = q;
  return q->handle;
}

EXS_API int exs_qdelete(exs_qhandle_t qh) {
  library& L = lib();
  std::lock_guard g{L.m};
  queue* q = find_queue(qh);
  if (!q) return fail(EINVAL);
  // Operations that will complete here, or a thread waiting: refused,
  // so no event is ever written to a freed queue.
  if (q->reserved > 0 || q->waiters > 0) return fail(EBUSY);
  L.queues.erase(qh);
  delete q;
  return 0;
}

EXS_API int exs_qdequeue(exs_qhandle_t qh, exs_event_t* events, int nevents,
                         const struct timespec* timeout) {
  if (!events || nevents <= 0) return fail(EINVAL);
  if (timeout && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1000000000))
    return fail(EINVAL);
  library& L = lib();
  std::unique_lock lk{L.m};
  queue* q = find_queue(qh);
  if (!q) return fail(EINVAL);
  if (q->events.empty() && !(timeout && timeout->tv_sec == 0 && timeout->tv_nsec == 0)) {
    auto deadline = std::chrono::steady_clock::now();
    if (timeout)
      deadline += std::chrono::seconds(timeout->tv_sec) + std::chrono::nanoseconds(timeout->tv_nsec);
    q->waiters++;
    const auto start = std::chrono::steady_clock::now();
    bool slept = false;
    if (L.spin.count() > 0 && L.thread_started) {
      // Drive progress from here for a while (EXS_SPIN_US; library::spin
      // says why), the lock let go between passes. The progress thread is
      // kept off by the lease, and kicked if we give up and sleep.
      q->spin = std::clamp(q->spin, L.spin, 10 * L.spin);
      auto end = start + q->spin;
      if (timeout) end = std::min(end, deadline);
      constexpr auto lease = std::chrono::milliseconds(2);
      for (auto now = start;; now = std::chrono::steady_clock::now()) {
        L.spin_lease = std::max(L.spin_lease, now + lease);
        progress_pass(L);
        if (!q->events.empty() || now >= end) break;
        lk.unlock();
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        lk.lock();
      }
      if (q->events.empty()) {
        L.spin_lease = {};
        kick();
        slept = true;
      }
    }
    while (q->events.empty()) {
      if (!timeout) {
        q->cv.wait(lk);
      } else if (q->cv.wait_until(lk, deadline) == std::cv_status::timeout) {
        break;
      }
    }
    q->waiters--;
    // The spin follows the waits: one that ended soon after this thread
    // gave up would have been caught by a longer spin (a 1 MiB message
    // takes longer than EXS_SPIN_US to arrive, and while this thread slept
    // the sender's side woke this core again and again as the bytes came
    // in); a long idle wait puts it back to EXS_SPIN_US.
    if (L.spin.count() > 0 && L.thread_started && !q->events.empty()) {
      const auto waited = std::chrono::steady_clock::now() - start;
      const auto cap = 10 * L.spin;
      if (!slept)
        q->spin = std::max(waited + waited / 4, q->spin - q->spin / 8);
      else
        q->spin = waited < cap ? waited + waited / 4 : L.spin;
      q->spin = std::clamp(q->spin, L.spin, cap);
    }
  }
  int n = 0;
  while (n < nevents && !q->events.empty()) {
    events[n++] = q->events.front();
    q->events.pop_front();
  }
  return n;
}
