// SPDX-License-Identifier: MIT
// weft — the kernel-backed wait object.
#include "util/wait.hpp"

#include "core/log.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

namespace weft::util {

namespace {
errc from_errno(int e) noexcept {
  switch (e) {
    case EMFILE:
    case ENFILE: return errc::mfile;
    case ENOMEM: return errc::nomem;
    case EEXIST: return errc::already;
    case EBADF: return errc::badf;
    default: return errc::other;
  }
}
}  // namespace

errc wait_fd::open() noexcept {
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  event_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!epoll_.valid() || !event_.valid()) {
    int e = errno;
    WEFT_WARN(core::core_provider(), FI_LOG_CORE, "cannot create a wait object: %s",
              std::strerror(e));
    epoll_.reset();
    event_.reset();
    return from_errno(e);
  }
  return add(event_.get(), EPOLLIN);
}

errc wait_fd::add(int fd, uint32_t events) noexcept {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) == 0) return errc::ok;
  int e = errno;
  if (e == EEXIST) return errc::ok;
  WEFT_WARN(core::core_provider(), FI_LOG_CORE, "epoll_ctl add fd %d: %s", fd, std::strerror(e));
  return from_errno(e);
}

void wait_fd::remove(int fd) noexcept {
  if (epoll_.valid()) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
}

void wait_fd::signal() noexcept {
  uint64_t one = 1;
  // A full counter (2^64-2 pending wakeups) already wakes everyone.
  [[maybe_unused]] ssize_t r = ::write(event_.get(), &one, sizeof one);
}

void wait_fd::drain() noexcept {
  uint64_t v;
  [[maybe_unused]] ssize_t r = ::read(event_.get(), &v, sizeof v);
}

errc wait_fd::wait(int timeout_ms) noexcept {
  epoll_event evs[8];
  int n = epoll_wait(epoll_.get(), evs, 8, timeout_ms);
  if (n < 0) return errno == EINTR ? errc::intr : errc::other;
  if (n == 0) return errc::timedout;
  for (int i = 0; i < n; ++i)
    if (evs[i].data.fd == event_.get()) drain();
  return errc::ok;
}

int wait_control(int command, void* arg, fi_wait_obj obj, wait_fd& fd, mutex_cond& mc) noexcept {
  if (command != FI_GETWAITOBJ && command != FI_GETWAIT) return 1;
  if (!arg) return to_fi(errc::inval);
  if (command == FI_GETWAITOBJ) {
    *static_cast<fi_wait_obj*>(arg) = obj == FI_WAIT_UNSPEC ? FI_WAIT_FD : obj;
    return 0;
  }
  switch (obj) {
    case FI_WAIT_UNSPEC:
    case FI_WAIT_FD: *static_cast<int*>(arg) = fd.fd(); return 0;
    case FI_WAIT_MUTEX_COND: {
      auto* m = static_cast<fi_mutex_cond*>(arg);
      m->mutex = mc.mutex();
      m->cond = mc.cond();
      return 0;
    }
    case FI_WAIT_POLLFD: {
      // One descriptor that never changes: the epoll set.
      auto* p = static_cast<fi_wait_pollfd*>(arg);
      p->change_index = 1;
      if (p->nfds < 1 || !p->fd) {
        p->nfds = 1;
        return to_fi(errc::toosmall);
      }
      p->fd[0] = pollfd{fd.fd(), POLLIN, 0};
      p->nfds = 1;
      return 0;
    }
    default: return to_fi(errc::nosys);
  }
}

const char* error_text(int prov_errno, char* buf, size_t len) noexcept {
  const char* text = fi_strerror(prov_errno);
  if (!buf || !len) return text;
  std::snprintf(buf, len, "%s", text);
  return buf;
}

uint64_t now_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

int remaining_ms(int timeout_ms, uint64_t start_ns) noexcept {
  if (timeout_ms < 0) return -1;
  uint64_t spent = (now_ns() - start_ns) / 1000000ull;
  return spent >= static_cast<uint64_t>(timeout_ms) ? 0 : timeout_ms - static_cast<int>(spent);
}

}  // namespace weft::util
