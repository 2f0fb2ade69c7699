// SPDX-License-Identifier: MIT
// weft — the wake FIFO of an shm endpoint (see wake.hpp).
#include "prov/shm/wake.hpp"

#include "core/log.hpp"
#include "prov/shm/peer.hpp"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>

namespace weft::shm {

namespace {
constexpr char region_prefix[] = "weft-shm-";
constexpr char fifo_prefix[] = "weft-shmw-";

// One byte into a sender's end of an owner's FIFO. An owner that closed its
// endpoint (or died) leaves no reader: write fails with EPIPE and the kernel
// sends this thread SIGPIPE, whose default action kills the application. A
// library may not change the process's disposition, so the signal is
// blocked in this thread for the write and a SIGPIPE it raised is taken
// back before the mask is restored (one that was pending before is left).
// Only sleeping owners are woken, so this is off the fast path.
ssize_t write_quietly(int fd) noexcept {
  sigset_t pipe, old, pending;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  sigemptyset(&pending);
  ::pthread_sigmask(SIG_BLOCK, &pipe, &old);
  ::sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE);
  char b = 1;
  ssize_t r = ::write(fd, &b, 1);
  const int err = errno;
  if (r < 0 && err == EPIPE && !was_pending) {
    timespec none{0, 0};
    while (::sigtimedwait(&pipe, nullptr, &none) < 0 && errno == EINTR) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = err;
  return r;
}
}  // namespace

std::string wake_name(const std::string& region_name) {
  constexpr size_t n = sizeof region_prefix - 1;
  if (region_name.compare(0, n, region_prefix) != 0) return region_name + "-wake";
  return fifo_prefix + region_name.substr(n);
}

wake_fifo::~wake_fifo() {
  if (!path_.empty()) ::unlink(path_.c_str());
}

errc wake_fifo::create(const std::string& dir, const std::string& region_name,
                       const fi_provider* log) noexcept try {
  std::string path = dir + "/" + wake_name(region_name);
  // A FIFO of a dead process of ours under this name (the region was made
  // O_EXCL just before, so the name is ours now).
  ::unlink(path.c_str());
  if (::mkfifo(path.c_str(), 0600) != 0) {
    WEFT_WARN(log, FI_LOG_EP_CTRL, "mkfifo %s: %s (blocking reads wake by a timer instead)",
              path.c_str(), std::strerror(errno));
    return errc::io;
  }
  path_ = path;
  // mkfifo honours the umask; the mode must be exactly 0600 all the same.
  if (::chmod(path.c_str(), 0600) != 0) return errc::io;
  rd_.reset(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (rd_.valid()) wr_.reset(::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
  if (!rd_.valid() || !wr_.valid()) {
    int err = errno;
    WEFT_WARN(log, FI_LOG_EP_CTRL, "opening %s: %s (blocking reads wake by a timer instead)",
              path.c_str(), std::strerror(err));
    rd_.reset();
    wr_.reset();
    return errc::io;
  }
  return errc::ok;
} catch (const std::bad_alloc&) {
  return errc::nomem;
}

void wake_fifo::drain() noexcept {
  char buf[256];
  while (::read(rd_.get(), buf, sizeof buf) == static_cast<ssize_t>(sizeof buf)) {
  }
}

void wake_fifo::signal() noexcept {
  char b = 1;
  // Full (EAGAIN): it is readable already, which is all a byte is for.
  [[maybe_unused]] ssize_t r = ::write(wr_.get(), &b, 1);
}

bool wake_owner(util::unique_fd& fd, const std::string& dir,
                const std::string& region_name) noexcept try {
  if (!fd.valid()) {
    std::string path = dir + "/" + wake_name(region_name);
    // O_NOFOLLOW, and a FIFO owned by us only: the name is in a shared directory.
    fd.reset(::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW));
    struct stat sb;
    if (!fd.valid() || ::fstat(fd.get(), &sb) != 0 || !S_ISFIFO(sb.st_mode) ||
        sb.st_uid != ::geteuid()) {
      fd.reset();
      return false;
    }
  }
  // Full (EAGAIN): it is awake already. EPIPE: the owner is gone.
  return write_quietly(fd.get()) == 1 || errno == EAGAIN;
} catch (const std::bad_alloc&) {
  return false;
}

size_t reclaim_stale_fifos(const std::string& dir, const fi_provider* log) noexcept try {
  std::unique_ptr<DIR, int (*)(DIR*)> d{::opendir(dir.c_str()), ::closedir};
  if (!d) return 0;
  char prefix[64];
  int plen = std::snprintf(prefix, sizeof prefix, "%s%u-%" PRIu64 "-", fifo_prefix,
                           static_cast<unsigned>(::geteuid()), pid_namespace_id());
  int dfd = ::dirfd(d.get());
  size_t removed = 0;
  while (dirent* e = ::readdir(d.get())) {
    if (std::strncmp(e->d_name, prefix, static_cast<size_t>(plen)) != 0) continue;
    // Its region: the same suffix after "weft-shm-". The owner makes the
    // region first and the FIFO second, and unlinks them the other way
    // round, so a FIFO without its region is left over.
    std::string region = std::string(region_prefix) + (e->d_name + sizeof fifo_prefix - 1);
    struct stat sb;
    if (::fstatat(dfd, region.c_str(), &sb, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT) continue;
    if (::fstatat(dfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISFIFO(sb.st_mode) ||
        sb.st_uid != ::geteuid())
      continue;
    if (::unlinkat(dfd, e->d_name, 0) == 0) {
      ++removed;
      WEFT_INFO(log, FI_LOG_EP_CTRL, "removed %s/%s: its region is gone", dir.c_str(), e->d_name);
    }
  }
  return removed;
} catch (const std::bad_alloc&) {
  return 0;
}

}  // namespace weft::shm
