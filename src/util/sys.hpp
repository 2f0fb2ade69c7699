// SPDX-License-Identifier: MIT
// weft — socket calls of the data path, straight to the kernel.
//
// Why. glibc's recv, recvfrom, recvmsg, sendto, sendmsg, sendmmsg and
// epoll_wait are cancellation points: once a process has a second thread
// (every MPI process, libexs's, any weft process with a provider thread
// such as the keeper of util/rd_held_ack.hpp) each call switches the
// thread's cancellation type on and off around the system call, two atomic
// read-modify-writes that showed in a udp RDM ping-pong's profile. weft
// calls these only on non-blocking sockets, with MSG_DONTWAIT or with a
// timeout of 0, never where an application would expect a cancellation
// point, so they enter the kernel through syscall(2), which is none.
//
// Sanitizer builds keep libc's functions: AddressSanitizer checks the
// buffers in its interceptors, and ThreadSanitizer orders a datagram's
// receipt after its send only through them (recvmsg; it models no order for
// recvfrom, so recv_from is recvmsg there).
#pragma once

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define WEFT_SYS_LIBC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define WEFT_SYS_LIBC 1
#endif
#endif

namespace weft::util::sys {

inline ssize_t recv_from(int fd, void* buf, size_t len, int flags, sockaddr* from,
                         socklen_t* fromlen) noexcept {
#ifdef WEFT_SYS_LIBC
  iovec v{buf, len};
  msghdr m{};
  m.msg_name = from;
  m.msg_namelen = from ? *fromlen : 0;
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  const ssize_t r = ::recvmsg(fd, &m, flags);
  if (r >= 0 && from) *fromlen = m.msg_namelen;
  return r;
#else
  return ::syscall(SYS_recvfrom, fd, buf, len, flags, from, fromlen);
#endif
}

inline ssize_t recv(int fd, void* buf, size_t len, int flags) noexcept {
#ifdef WEFT_SYS_LIBC
  return ::recv(fd, buf, len, flags);
#else
  return ::syscall(SYS_recvfrom, fd, buf, len, flags, nullptr, nullptr);
#endif
}

inline ssize_t recv_msg(int fd, msghdr* m, int flags) noexcept {
#ifdef WEFT_SYS_LIBC
  return ::recvmsg(fd, m, flags);
#else
  return ::syscall(SYS_recvmsg, fd, m, flags);
#endif
}

inline ssize_t send_to(int fd, const void* buf, size_t len, int flags, const sockaddr* to,
                       socklen_t tolen) noexcept {
#ifdef WEFT_SYS_LIBC
  return ::sendto(fd, buf, len, flags, to, tolen);
#else
  return ::syscall(SYS_sendto, fd, buf, len, flags, to, tolen);
#endif
}

inline ssize_t send_msg(int fd, const msghdr* m, int flags) noexcept {
#ifdef WEFT_SYS_LIBC
  return ::sendmsg(fd, m, flags);
#else
  return ::syscall(SYS_sendmsg, fd, m, flags);
#endif
}

inline int send_mmsg(int fd, mmsghdr* v, unsigned n, int flags) noexcept {
#ifdef WEFT_SYS_LIBC
  return ::sendmmsg(fd, v, n, flags);
#else
  return int(::syscall(SYS_sendmmsg, fd, v, n, flags));
#endif
}

// A poll of ready descriptors that never waits (timeout 0): the data
// path's. Sleeping waits keep libc's epoll_wait, a cancellation point there
// as the application may expect.
inline int epoll_poll(int epfd, epoll_event* evs, int n) noexcept {
#ifdef WEFT_SYS_LIBC
  return ::epoll_wait(epfd, evs, n, 0);
#else
  return int(::syscall(SYS_epoll_wait, epfd, evs, n, 0));
#endif
}

}  // namespace weft::util::sys
