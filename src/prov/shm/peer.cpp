// SPDX-License-Identifier: MIT
// weft — process identity, peer liveness and the single-copy probe.
#include "prov/shm/peer.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace weft::shm {

proc_status read_proc_status(pid_t pid) noexcept {
  proc_status st;
  if (pid <= 0) return st;
  char path[48];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  util::unique_fd fd{::open(path, O_RDONLY | O_CLOEXEC)};
  if (!fd.valid()) return st;
  char buf[1024];
  ssize_t n;
  do n = ::read(fd.get(), buf, sizeof buf - 1);
  while (n < 0 && errno == EINTR);
  if (n <= 0) return st;  // the process went away between open and read
  buf[n] = '\0';
  // Field 2 is the command name in parentheses and may itself contain spaces
  // and ')': the fields we want follow the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (!p || p[1] != ' ') return st;
  p += 2;
  char state = *p;
  // p is at field 3; field 22 is 19 separators further.
  for (int field = 3; field < 22; ++field) {
    p = std::strchr(p, ' ');
    if (!p) return st;
    ++p;
  }
  char* end = nullptr;
  unsigned long long start = std::strtoull(p, &end, 10);
  if (end == p) return st;
  st.exists = true;
  st.zombie = state == 'Z' || state == 'X' || state == 'x';
  st.start_time = start;
  return st;
}

uint64_t process_start_time(pid_t pid) noexcept {
  proc_status st = read_proc_status(pid);
  return st.exists ? st.start_time : 0;
}

uint64_t pid_namespace_id() noexcept {
  struct stat sb;
  if (::stat("/proc/self/ns/pid", &sb) != 0) return 0;
  return static_cast<uint64_t>(sb.st_ino);
}

// ---- peer_liveness -------------------------------------------------------------

namespace {

int open_pidfd(pid_t pid) noexcept {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  errno = ENOSYS;
  return -1;
#endif
}

}  // namespace

peer_liveness::peer_liveness(pid_t pid, uint64_t start_time, uint32_t interval,
                             liveness_mode mode) noexcept
    : pid_(pid), start_time_(start_time), interval_(interval ? interval : 1) {
  countdown_ = interval_;
  if (pid <= 0) return;  // alive_ stays false
  if (mode != liveness_mode::proc) {
    int fd = open_pidfd(pid);
    if (fd < 0 && errno == ESRCH) return;  // already gone
    pidfd_.reset(fd);                      // ENOSYS, EMFILE...: the proc method
  }
  // With a pidfd in hand, one look at the start time settles which process it
  // refers to: the pid cannot be recycled while we hold a pidfd to a live
  // process, and a process started after our pidfd_open cannot be the one
  // whose start time the peer recorded before we got here.
  alive_ = true;
  alive_ = check_proc();
}

bool peer_liveness::check_proc() noexcept {
  if (::kill(pid_, 0) != 0 && errno == ESRCH) return false;
  // EPERM means a process exists that we may not signal: not our peer (the
  // peer runs as our uid), unless it is and the start time says so.
  proc_status st = read_proc_status(pid_);
  if (!st.exists || st.zombie) return false;
  return start_time_ == 0 || st.start_time == start_time_;
}

bool peer_liveness::check_now() noexcept {
  countdown_ = interval_;
  if (!alive_) return false;
  if (pidfd_.valid()) {
    pollfd p{pidfd_.get(), POLLIN, 0};
    int n;
    do n = ::poll(&p, 1, 0);
    while (n < 0 && errno == EINTR);
    alive_ = n == 0;  // readable (or an error on the fd): the process has exited
  } else {
    alive_ = check_proc();
  }
  if (!alive_) pidfd_.reset();
  return alive_;
}

// ---- single copy ----------------------------------------------------------------

cma_status cma_probe(pid_t peer, const void* remote_addr) noexcept {
  if (peer <= 0) return cma_status::gone;
  unsigned char byte = 0;
  iovec local{&byte, 1};
  iovec remote{const_cast<void*>(remote_addr), 1};
  ssize_t n = ::process_vm_readv(peer, &local, 1, &remote, 1, 0);
  if (n == 1) return cma_status::available;
  switch (errno) {
    case EFAULT:  // the access check passed; only the address was bad
      return cma_status::available;
    case EPERM:
    case EACCES:
      return cma_status::denied;
    case ESRCH:
      return cma_status::gone;
    default:  // ENOSYS, or a seccomp filter's choice of error
      return cma_status::unsupported;
  }
}

cma_cache::entry* cma_cache::find(pid_t peer) noexcept {
  size_t h = (static_cast<uint32_t>(peer) * 0x9E3779B1u) & (capacity - 1);
  for (size_t i = 0; i < capacity; ++i) {
    entry& e = table_[(h + i) & (capacity - 1)];
    if (e.pid == peer || e.pid == 0) return &e;
  }
  return nullptr;  // full: the caller probes without remembering
}

cma_status cma_cache::status(pid_t peer) noexcept {
  if (peer <= 0) return cma_status::gone;
  entry* e = find(peer);
  if (e && e->pid == peer && e->status != cma_status::unknown) return e->status;
  ++probes_;
  cma_status s = cma_probe(peer);
  if (e && s != cma_status::gone) *e = entry{peer, s};
  return s;
}

void cma_cache::forget(pid_t peer) noexcept {
  // The slot keeps its pid (linear probing needs no holes) and is probed
  // again on the next question.
  if (entry* e = find(peer); e && e->pid == peer) e->status = cma_status::unknown;
}

}  // namespace weft::shm
