// SPDX-License-Identifier: MIT
// weft — reliable datagrams: held acknowledgements and their keeper thread
// (rd_held_ack.hpp says why and the contract).
#include "util/rd_held_ack.hpp"
#include "util/sys.hpp"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

namespace weft::util::rd {

namespace {

// One per process: the endpoints that held something, and the thread that
// sends what they keep holding. The thread lives from the first hold until
// the library is unloaded (the static's destructor joins it), asleep while
// nothing is held; a forked child starts its own at its first hold.
class keeper {
 public:
  keeper() { pthread_atfork(nullptr, nullptr, &keeper::in_child); }
  ~keeper() {
    {
      std::lock_guard lk(m_);
      if (!started_) return;
      stop_ = true;
    }
    cv_.notify_all();
    pthread_join(thread_, nullptr);
  }
  bool add(held_ack* s) noexcept {
    std::lock_guard lk(m_);
    try {
      slots_.push_back(s);
    } catch (const std::bad_alloc&) {
      return false;
    }
    if (!started_) {
      if (pthread_create(&thread_, nullptr, &keeper::main, this) != 0) {
        slots_.pop_back();
        return false;
      }
      started_ = true;
    }
    return true;
  }
  void remove(held_ack* s) noexcept {
    std::lock_guard lk(m_);
    std::erase(slots_, s);
  }
  // After a hold (seq_cst, like the keeper's own store before its last look).
  void wake_if_asleep() noexcept {
    if (!asleep_.load(std::memory_order_seq_cst)) return;
    {
      std::lock_guard lk(m_);
      asleep_.store(false, std::memory_order_relaxed);
    }
    cv_.notify_one();
  }
  static keeper& get() noexcept {
    static keeper k;
    return k;
  }

 private:
  static void* main(void* self) {
    static_cast<keeper*>(self)->run();
    return nullptr;
  }
  void run() noexcept {
    std::unique_lock lk(m_);
    uint64_t quiet_us = 0, sleep_us = keeper_tick_us;
    while (!stop_) {
      bool any = false;
      for (held_ack* s : slots_) any |= s->tick();
      if (any) {
        quiet_us = 0;
        sleep_us = keeper_tick_us;  // to send it if it is still held then
      } else {
        quiet_us += sleep_us;
        sleep_us = std::min(2 * sleep_us, keeper_slow_us);
      }
      if (quiet_us < keeper_quiet_us) {
        cv_.wait_for(lk, std::chrono::microseconds(sleep_us), [&] { return stop_; });
        continue;
      }
      // Quiet: asleep until a hold. A hold after this store sees it and
      // wakes us; one before it is seen by the look that follows.
      asleep_.store(true, std::memory_order_seq_cst);
      bool held = false;
      for (held_ack* s : slots_) held |= s->held();
      if (!held) cv_.wait(lk, [&] { return stop_ || !asleep_.load(std::memory_order_relaxed); });
      asleep_.store(false, std::memory_order_relaxed);
      quiet_us = 0;
      sleep_us = keeper_tick_us;
    }
  }
  // The thread is not in the child, and its lock may have been held.
  static void in_child() noexcept {
    keeper& k = get();
    new (&k.m_) std::mutex;
    new (&k.cv_) std::condition_variable;
    k.started_ = false;
    k.stop_ = false;
    k.asleep_.store(false, std::memory_order_relaxed);
  }

  std::mutex m_;
  std::condition_variable cv_;
  std::vector<held_ack*> slots_;
  pthread_t thread_{};
  bool started_ = false;
  bool stop_ = false;
  std::atomic<bool> asleep_{false};
};

}  // namespace

bool held_ack::hold(const void* peer, const dgram& h, const sockaddr* to, socklen_t len) noexcept {
  if (fd_ < 0 || len > sizeof to_) return false;
  if (!registered_) {
    if (!keeper::get().add(this)) return false;
    registered_ = true;
  }
  const uint32_t w = word_.load(std::memory_order_acquire);
  if ((w & 3) != empty_state) return false;  // the keeper still sends the last one
  h_ = h;
  std::memcpy(&to_, to, len);
  len_ = len;
  peer_ = peer;
  word_.store((((w >> 2) + 1) << 2) | held_state, std::memory_order_seq_cst);
  keeper::get().wake_if_asleep();
  return true;
}

const void* held_ack::take() noexcept {
  const void* p = peer_;
  if (!p) return nullptr;
  peer_ = nullptr;
  uint32_t w = word_.load(std::memory_order_relaxed);
  if ((w & 3) != held_state) return nullptr;  // the keeper sent it (or sends it now)
  if (!word_.compare_exchange_strong(w, w & ~3u, std::memory_order_relaxed)) return nullptr;
  return p;
}

void held_ack::close() noexcept {
  if (!registered_) return;
  keeper::get().remove(this);  // waits for a tick under way
  registered_ = false;
}

bool held_ack::tick() noexcept {
  uint32_t w = word_.load(std::memory_order_acquire);
  bool is_held = (w & 3) == held_state;
  // Held since the last tick: the endpoint has not taken it back for a
  // whole tick. Claimed first, so that the endpoint neither takes it back
  // nor writes a new one while it is copied.
  if (is_held && w == seen_ &&
      word_.compare_exchange_strong(w, (w & ~3u) | claimed_state, std::memory_order_acquire)) {
    const dgram h = h_;
    sockaddr_storage to;
    std::memcpy(&to, &to_, len_);
    const socklen_t len = len_;
    word_.store(w & ~3u, std::memory_order_release);
    // Lost like any datagram if the socket is full: the peer resends and
    // hears the acknowledgement then.
    (void)sys::send_to(fd_, &h, sizeof h, MSG_DONTWAIT | MSG_NOSIGNAL,
                   reinterpret_cast<const sockaddr*>(&to), len);
    is_held = false;
    w &= ~3u;
  }
  seen_ = w;
  return is_held;
}

}  // namespace weft::util::rd
