// SPDX-License-Identifier: MIT
// weft — the kernel-backed wait object behind FI_WAIT_FD, _UNSPEC, _MUTEX_COND
// and wait sets: an epoll set holding a wakeup eventfd and any fds (sockets)
// whose readiness means progress may produce an event.
#pragma once

#include "core/errc.hpp"
#include "util/fd.hpp"

#include <rdma/fi_eq.h>

#include <atomic>
#include <cstdint>
#include <pthread.h>

namespace weft::util {

class wait_fd {
 public:
  // Returns errc::ok or the cause (EMFILE, ENOMEM) of failing to create it.
  errc open() noexcept;
  bool is_open() const noexcept { return epoll_.valid(); }

  errc add(int fd, uint32_t events) noexcept;
  void remove(int fd) noexcept;

  // Wakes a sleeper (or makes the epoll fd readable for one to come).
  void signal() noexcept;
  // Consumes pending wakeups so the epoll fd reads idle again.
  void drain() noexcept;

  // Sleeps until something in the set is ready, a signal, or timeout_ms
  // passes (-1: forever). ok, timedout, or intr.
  errc wait(int timeout_ms) noexcept;

  int fd() const noexcept { return epoll_.get(); }

 private:
  unique_fd epoll_;
  unique_fd event_;
};

// The pthread mutex and condition variable an object hands out for
// FI_WAIT_MUTEX_COND (FI_GETWAIT). The mutex is recursive: an application may
// hold it while it reads the object or calls fi_trywait, and the progress
// those run may write an event whose broadcast takes the mutex again on the
// same thread.
class mutex_cond {
 public:
  mutex_cond() noexcept {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&mutex_, &a);
    pthread_mutexattr_destroy(&a);
    pthread_cond_init(&cond_, nullptr);
  }
  mutex_cond(const mutex_cond&) = delete;
  mutex_cond& operator=(const mutex_cond&) = delete;
  ~mutex_cond() {
    pthread_cond_destroy(&cond_);
    pthread_mutex_destroy(&mutex_);
  }

  // Wakes every thread in pthread_cond_wait on it. Taking the mutex orders
  // the broadcast after a waiter's check made under it, so none is missed.
  void broadcast() noexcept {
    pthread_mutex_lock(&mutex_);
    pthread_cond_broadcast(&cond_);
    pthread_mutex_unlock(&mutex_);
  }
  pthread_mutex_t* mutex() noexcept { return &mutex_; }
  pthread_cond_t* cond() noexcept { return &cond_; }

 private:
  pthread_mutex_t mutex_;
  pthread_cond_t cond_;
};

// FI_GETWAITOBJ and FI_GETWAIT for an object with wait object `obj`, one
// implementation for CQs, counters, EQs and wait sets: the wait object as the
// application asked for it (FI_WAIT_UNSPEC reports FI_WAIT_FD), the epoll fd,
// the mutex/cond pair, or the one-fd pollfd set. 0, -FI_EINVAL (no arg),
// -FI_ETOOSMALL (pollfd array too short; nfds says how many), -FI_ENOSYS
// (no wait object of its own: NONE, SET, YIELD), or 1 for "not a wait
// command" so the caller handles its other commands.
int wait_control(int command, void* arg, fi_wait_obj obj, wait_fd& fd, mutex_cond& mc) noexcept;

// fi_cq_strerror / fi_eq_strerror: weft's providers report FI_E* values as
// prov_errno; the text goes to buf when the caller gives one.
const char* error_text(int prov_errno, char* buf, size_t len) noexcept;

// Milliseconds left of a timeout that started at `start_ns` (-1 stays -1).
int remaining_ms(int timeout_ms, uint64_t start_ns) noexcept;
uint64_t now_ns() noexcept;

}  // namespace weft::util
