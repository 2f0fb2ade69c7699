// SPDX-License-Identifier: MIT
// weft — the same-host byte stream (local_stream.hpp).
#include "prov/tcp/local_stream.hpp"

#include "core/log.hpp"
#include "prov/tcp/params.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <string_view>
#include <utility>

namespace weft::tcp {

namespace {

using local_layout::header;
using local_layout::pipe_ctl;

errc from_errno(int e) noexcept {
  switch (e) {
    case ENOENT: return errc::noent;
    case EACCES: return errc::access;
    case EPERM: return errc::perm;
    case ENOMEM: return errc::nomem;
    case ENOSPC: return errc::nospc;
    case EMFILE:
    case ENFILE: return errc::mfile;
    default: return errc::io;
  }
}

template <class T>
std::atomic_ref<T> shared(T& x) noexcept {
  return std::atomic_ref<T>(x);
}

constexpr size_t publish_step = 4096;
constexpr std::string_view memfd_name = "weft-tcp-local";
constexpr int required_seals = F_SEAL_SHRINK | F_SEAL_GROW;

size_t total_bytes(size_t pipe_bytes) noexcept {
  return local_layout::data_offset + 2 * pipe_bytes;
}

// Copies `len` bytes into the ring at position `pos`, wrapping.
void ring_put(std::byte* ring, uint64_t mask, uint64_t pos, const std::byte* src,
              size_t len) noexcept {
  size_t at = static_cast<size_t>(pos & mask);
  size_t first = std::min(len, static_cast<size_t>(mask + 1 - at));
  std::memcpy(ring + at, src, first);
  if (len > first) std::memcpy(ring, src + first, len - first);
}

void ring_get(const std::byte* ring, uint64_t mask, uint64_t pos, std::byte* dst,
              size_t len) noexcept {
  size_t at = static_cast<size_t>(pos & mask);
  size_t first = std::min(len, static_cast<size_t>(mask + 1 - at));
  std::memcpy(dst, ring + at, first);
  if (len > first) std::memcpy(dst + first, ring, len - first);
}

}  // namespace

local_stream::local_stream(local_stream&& o) noexcept { *this = std::move(o); }

local_stream& local_stream::operator=(local_stream&& o) noexcept {
  if (this != &o) {
    release();
    base_ = std::exchange(o.base_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    out_data_ = std::exchange(o.out_data_, nullptr);
    in_data_ = std::exchange(o.in_data_, nullptr);
    mask_ = o.mask_;
    cap_ = o.cap_;
    span_ = o.span_;
    in_min_ = o.in_min_;
    in_cap_ = o.in_cap_;
    out_ = o.out_;
    tail_ = o.tail_;
    head_ = o.head_;
    head_seen_ = o.head_seen_;
    tail_seen_ = o.tail_seen_;
    grow_refused_ = o.grow_refused_;
    corrupt_ = o.corrupt_;
    wake_check_ = o.wake_check_;
  }
  return *this;
}

local_stream::~local_stream() { release(); }

void local_stream::release() noexcept {
  if (base_) ::munmap(base_, map_bytes_);
  base_ = nullptr;
}

errc local_stream::create(size_t pipe_bytes, size_t max_bytes, uint64_t cookie,
                          local_stream& out, util::unique_fd& memfd) noexcept {
  auto bad = [](size_t n) {
    return n < local_layout::min_pipe || n > local_layout::max_pipe || !std::has_single_bit(n);
  };
  if (bad(pipe_bytes) || bad(max_bytes) || pipe_bytes > max_bytes) return errc::inval;
  util::unique_fd fd(::memfd_create(memfd_name.data(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return from_errno(errno);
  // The whole span is the file's size (a hole costs nothing); what the
  // pipes start with is reserved now: a full tmpfs or memory limit is this
  // error, not a SIGBUS when a page is first touched in the middle of a
  // transfer. The header's page and pipe 0's first pages are one range.
  const size_t total = total_bytes(max_bytes);
  if (::ftruncate(fd.get(), static_cast<off_t>(total)) != 0) return from_errno(errno);
  for (size_t at : {size_t{0}, local_layout::data_offset + max_bytes}) {
    const size_t len = (at ? 0 : local_layout::data_offset) + pipe_bytes;
    if (int e = ::posix_fallocate(fd.get(), static_cast<off_t>(at), static_cast<off_t>(len));
        e != 0)
      return from_errno(e);
  }
  // The header goes in with one write (positions and flags stay the fresh
  // file's zeros); map() then reads it back through the checks every side
  // passes. The peer learns of the file only afterwards, through the socket.
  header h{};
  h.magic = local_layout::magic;
  h.version = local_layout::version;
  h.header_bytes = sizeof(header);
  h.pipe_bytes = max_bytes;
  h.pipe_min = pipe_bytes;
  h.cookie = cookie;
  h.pipe[0].cap = h.pipe[1].cap = pipe_bytes;
  if (::pwrite(fd.get(), &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h)) return errc::io;
  // Its size is fixed for good: neither end can shrink the file under the
  // other's mapping (a SIGBUS there) or grow it.
  if (::fcntl(fd.get(), F_ADD_SEALS, required_seals | F_SEAL_SEAL) != 0) return from_errno(errno);
  if (errc e = map(fd.get(), true, cookie, out); e != errc::ok) return e;
  memfd = std::move(fd);
  return errc::ok;
}

errc local_stream::attach(pid_t pid, int fd, uint64_t cookie, local_stream& out) noexcept {
  if (pid <= 0 || fd < 0) return errc::inval;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/fd/%d", static_cast<int>(pid), fd);
  // What the peer names is looked at before it is opened: only one of our
  // streams (a regular file, a memfd of our name, of our user) is; opening
  // anything else (a device) could have effects of its own.
  struct stat before{};
  if (::stat(path, &before) != 0) return from_errno(errno);
  if (!S_ISREG(before.st_mode)) return errc::inval;
  if (before.st_uid != ::geteuid()) return errc::access;
  // A memfd's link reads "/memfd:<name> (deleted)".
  char target[64] = {};
  ssize_t n = ::readlink(path, target, sizeof target - 1);
  if (n < 0) return from_errno(errno);
  const std::string_view link(target, static_cast<size_t>(n));
  if (!link.starts_with("/memfd:") || !link.substr(7).starts_with(memfd_name)) return errc::inval;
  util::unique_fd f(::open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!f.valid()) return from_errno(errno);
  struct stat st{};
  if (::fstat(f.get(), &st) != 0) return from_errno(errno);
  if (st.st_dev != before.st_dev || st.st_ino != before.st_ino) return errc::inval;  // replaced meanwhile
  return attach_fd(f.get(), cookie, out);
}

errc local_stream::attach_fd(int memfd, uint64_t cookie, local_stream& out) noexcept {
  // Sealed against shrinking and growing (which also proves a memfd).
  int seals = ::fcntl(memfd, F_GET_SEALS);
  if (seals < 0 || (seals & required_seals) != required_seals) return errc::inval;
  return map(memfd, false, cookie, out);
}

errc local_stream::map(int memfd, bool creator, uint64_t cookie, local_stream& out) noexcept {
  struct stat st{};
  if (::fstat(memfd, &st) != 0) return from_errno(errno);
  // Sized before it is mapped: a huge file would only cost address space,
  // but it is no stream either.
  if (!S_ISREG(st.st_mode) || st.st_size < static_cast<off_t>(local_layout::data_offset) ||
      st.st_size > static_cast<off_t>(total_bytes(local_layout::max_pipe)))
    return errc::inval;
  const auto size = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (p == MAP_FAILED) return from_errno(errno);
  auto* h = static_cast<header*>(p);
  // Everything the stream uses from the header is checked here, once, and
  // copied: the peer may change the shared copy afterwards.
  const uint64_t pipe_bytes = h->pipe_bytes;
  const uint64_t pipe_min = h->pipe_min;
  const int out_pipe = creator ? 0 : 1;
  // Our own ring starts at pipe_min: the creator made the file so, and
  // reserved that much of both pipes (an attacher that found otherwise
  // would write with a size its reader does not expect).
  const bool ok = shared(h->magic).load(std::memory_order_acquire) == local_layout::magic &&
                  h->version == local_layout::version && h->header_bytes == sizeof(header) &&
                  pipe_bytes >= local_layout::min_pipe && pipe_bytes <= local_layout::max_pipe &&
                  std::has_single_bit(pipe_bytes) && total_bytes(pipe_bytes) == size &&
                  pipe_min >= local_layout::min_pipe && pipe_min <= pipe_bytes &&
                  std::has_single_bit(pipe_min) &&
                  shared(h->pipe[out_pipe].cap).load(std::memory_order_acquire) == pipe_min &&
                  h->cookie == cookie;
  if (!ok) {
    ::munmap(p, size);
    return errc::inval;
  }
  local_stream s;
  s.base_ = static_cast<std::byte*>(p);
  s.map_bytes_ = size;
  s.cap_ = pipe_min;
  s.mask_ = pipe_min - 1;
  s.span_ = pipe_bytes;
  s.in_min_ = pipe_min;
  s.in_cap_ = pipe_min;
  s.out_ = out_pipe;
  std::byte* data = s.base_ + local_layout::data_offset;
  s.out_data_ = data + s.out_ * pipe_bytes;
  s.in_data_ = data + (1 - s.out_) * pipe_bytes;
  // Whatever the peer wrote before we attached is still ahead of us.
  s.tail_ = shared(s.out_ctl().tail).load(std::memory_order_acquire);
  s.head_ = shared(s.in_ctl().head).load(std::memory_order_acquire);
  s.head_seen_ = shared(s.out_ctl().head).load(std::memory_order_acquire);
  s.tail_seen_ = s.head_;  // nothing seen yet: the first load checks the peer's ring
  if (s.tail_ - s.head_seen_ > s.cap_)
    s.corrupt_ = true;  // refused at the first call, like any corrupt position
  out = std::move(s);
  return errc::ok;
}

pipe_ctl& local_stream::out_ctl() const noexcept {
  return reinterpret_cast<header*>(base_)->pipe[out_];
}

pipe_ctl& local_stream::in_ctl() const noexcept {
  return reinterpret_cast<header*>(base_)->pipe[1 - out_];
}

bool local_stream::peer_tail(uint64_t& tail, uint64_t& cap) noexcept {
  // seq_cst: after want_wakes' store (a plain load on x86).
  tail = shared(in_ctl().tail).load(std::memory_order_seq_cst);
  // After the tail: the ring size the bytes up to it were written with
  // (local_stream.hpp). It only grows, within what is mapped, and not while
  // bytes we saw at the last load are still unread.
  cap = shared(in_ctl().cap).load(std::memory_order_acquire);
  if (cap != in_cap_) {
    if (cap < in_cap_ || cap > span_ || !std::has_single_bit(cap) || head_ != tail_seen_)
      corrupt_ = true;
    in_cap_ = cap;
  }
  tail_seen_ = tail;
  if (tail - head_ > cap) corrupt_ = true;  // also a tail behind our head
  return !corrupt_;
}

void local_stream::grow(size_t more) noexcept {
  // At least double (few steps to the top), at once to what the caller has
  // queued (a window of large messages), never past the pipe's span.
  const uint64_t fit = std::bit_ceil(std::min<uint64_t>(more, span_));
  const uint64_t next = std::min(span_, std::max(cap_ * 2, fit));
  // Our own pipe's new pages, reserved through our mapping: an error here
  // (no memory, a kernel without MADV_POPULATE_WRITE) rather than a SIGBUS
  // at a copy. Refused once, the ring keeps its size: no system call is
  // retried on every write that finds the pipe empty.
  if (::madvise(out_data_ + cap_, static_cast<size_t>(next - cap_), MADV_POPULATE_WRITE) != 0) {
    grow_refused_ = true;
    WEFT_INFO(&provider(), FI_LOG_EP_DATA, "tcp: the same-host stream's pipe stays at %zu "
              "bytes (reserving %zu failed: %s)", static_cast<size_t>(cap_),
              static_cast<size_t>(next), std::strerror(errno));
    return;
  }
  // Stored before any tail that covers bytes written with it: the release
  // store of that tail then carries it to the reader that loads the tail.
  shared(out_ctl().cap).store(next, std::memory_order_release);
  cap_ = next;
  mask_ = next - 1;
}

ssize_t local_stream::writev(const iovec* iov, int count) noexcept {
  if (corrupt_) return -EIO;
  size_t want = 0;
  for (int i = 0; i < count; ++i) want += iov[i].iov_len;
  if (!want) return 0;  // only empty iovecs
  size_t done = 0;
  int at = 0;
  size_t at_off = 0;
  bool blocked_said = false;
  for (;;) {
    // The reader's position is loaded only when the last one seen leaves
    // no room: its line then stays with the reader instead of moving on
    // every write.
    if (cap_ - (tail_ - head_seen_) < std::min<uint64_t>(want - done, cap_)) {
      const uint64_t head = shared(out_ctl().head).load(std::memory_order_seq_cst);
      if (tail_ - head > cap_) {  // also a head beyond what we wrote
        corrupt_ = true;
        return -EIO;
      }
      head_seen_ = head;
    }
    // The pipe is empty (the reader took all we wrote) and the rest does
    // not fit: the one moment the ring may change size (local_stream.hpp).
    if (head_seen_ == tail_ && want - done > cap_ && cap_ < span_ && !grow_refused_)
      grow(want - done);
    size_t room = static_cast<size_t>(cap_ - (tail_ - head_seen_));
    size_t put = 0;
    for (; at < count && room; ++at, at_off = 0) {
      size_t n = std::min(room, iov[at].iov_len - at_off);
      const auto* src = static_cast<const std::byte*>(iov[at].iov_base) + at_off;
      for (size_t k = 0; k < n;) {
        // A large copy is published piece by piece, so the reader copies
        // out one piece while we copy in the next (a small pipe then still
        // streams at memory speed).
        size_t step = std::min(n - k, publish_step);
        ring_put(out_data_, mask_, tail_ + put + k, src + k, step);
        k += step;
        if (k < n) shared(out_ctl().tail).store(tail_ + put + k, std::memory_order_release);
      }
      put += n;
      room -= n;
      if (at_off + n < iov[at].iov_len) {
        at_off += n;
        break;
      }
    }
    if (put) {
      tail_ += put;
      done += put;
      // seq_cst: before take_wake_due's look at the peer's `sleeping`.
      shared(out_ctl().tail).store(tail_, std::memory_order_seq_cst);
      wake_check_ = true;
    }
    if (done == want || blocked_said) break;
    // No room for the rest: say so, then look at the reader's position once
    // more (a reader that freed room after this store sees it and wakes us).
    shared(out_ctl().writer_blocked).store(1, std::memory_order_seq_cst);
    blocked_said = true;
    head_seen_ = tail_ - cap_;  // force the reload above
  }
  return done ? static_cast<ssize_t>(done) : -EAGAIN;
}

ssize_t local_stream::read(void* buf, size_t len) noexcept {
  uint64_t tail, cap;
  if (!peer_tail(tail, cap)) return -EIO;
  const uint64_t mask = cap - 1;
  const size_t avail = static_cast<size_t>(tail - head_);
  if (avail == 0) return -EAGAIN;
  const size_t n = std::min(avail, len);
  if (!n) return 0;
  auto* dst = static_cast<std::byte*>(buf);
  for (size_t k = 0; k < n;) {
    // Room is given back piece by piece (see writev).
    size_t step = std::min(n - k, publish_step);
    ring_get(in_data_, mask, head_, dst + k, step);
    head_ += step;
    k += step;
    if (k < n) shared(in_ctl().head).store(head_, std::memory_order_release);
  }
  // seq_cst: before the look at writer_blocked (the writer stores that,
  // then looks at this).
  shared(in_ctl().head).store(head_, std::memory_order_seq_cst);
  if (shared(in_ctl().writer_blocked).load(std::memory_order_seq_cst) &&
      shared(in_ctl().writer_blocked).exchange(0, std::memory_order_seq_cst))
    wake_check_ = true;
  return static_cast<ssize_t>(n);
}

size_t local_stream::readable() noexcept {
  uint64_t tail, cap;
  return peer_tail(tail, cap) ? static_cast<size_t>(tail - head_) : 0;
}

void local_stream::want_wakes(bool on) noexcept {
  shared(in_ctl().sleeping).store(on ? 1 : 0, std::memory_order_seq_cst);
}

bool local_stream::take_wake_due() noexcept {
  if (!wake_check_) return false;
  wake_check_ = false;
  if (!base_ || !shared(out_ctl().sleeping).load(std::memory_order_seq_cst)) return false;
  return shared(out_ctl().wake_pending).exchange(1, std::memory_order_seq_cst) == 0;
}

void local_stream::take_wake() noexcept {
  shared(in_ctl().wake_pending).store(0, std::memory_order_seq_cst);
}

}  // namespace weft::tcp
