// SPDX-License-Identifier: MIT
// weft — copying between iovec lists, locally and across processes
// (process_vm_readv / process_vm_writev), for the shm provider's large
// messages and RMA.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "prov/shm/proto.hpp"

namespace weft::shm {

// Copies `len` bytes from `src` to offset `off` of an iovec list, clipped to
// its capacity.
inline void scatter(const iovec* iov, size_t count, uint64_t off, const std::byte* src,
                    uint64_t len) noexcept {
  for (size_t i = 0; i < count && len; ++i) {
    if (off >= iov[i].iov_len) {
      off -= iov[i].iov_len;
      continue;
    }
    size_t n = std::min<uint64_t>(len, iov[i].iov_len - off);
    std::memcpy(static_cast<std::byte*>(iov[i].iov_base) + off, src, n);
    src += n;
    len -= n;
    off = 0;
  }
}

// Copies `len` bytes from offset `off` of an iovec list to `dst`.
inline void gather(const iovec* iov, size_t count, uint64_t off, std::byte* dst,
                   uint64_t len) noexcept {
  for (size_t i = 0; i < count && len; ++i) {
    if (off >= iov[i].iov_len) {
      off -= iov[i].iov_len;
      continue;
    }
    size_t n = std::min<uint64_t>(len, iov[i].iov_len - off);
    std::memcpy(dst, static_cast<const std::byte*>(iov[i].iov_base) + off, n);
    dst += n;
    len -= n;
    off = 0;
  }
}

// An iovec list with a cursor, for a transfer the kernel may do in parts.
template <size_t N>
struct iov_cursor {
  iovec v[N];
  size_t n = 0, i = 0;
  // The first `limit` bytes of `src` (at most N entries; longer lists are
  // refused by the callers before they get here).
  void init(const iovec* src, size_t count, uint64_t limit) noexcept {
    for (size_t k = 0; k < count && limit && n < N; ++k) {
      size_t len = std::min<uint64_t>(src[k].iov_len, limit);
      if (len) v[n++] = {src[k].iov_base, len};
      limit -= len;
    }
  }
  void advance(size_t bytes) noexcept {
    while (bytes && i < n) {
      size_t take = std::min(bytes, v[i].iov_len);
      v[i].iov_base = static_cast<std::byte*>(v[i].iov_base) + take;
      v[i].iov_len -= take;
      bytes -= take;
      if (!v[i].iov_len) ++i;
    }
  }
};

inline constexpr size_t cma_max_iov = 16;

// Moves `len` bytes between our buffers `liov` and process `pid`'s buffers
// `riov`: from them to us (`write_remote` false, process_vm_readv) or from us
// to them (process_vm_writev), starting `off` bytes into both lists (a piece
// of a transfer). 0, or the errno that stopped it.
inline int cma_copy(pid_t pid, bool write_remote, const proto::rts_iov* riov, size_t rcount,
                    const iovec* liov, size_t lcount, uint64_t len, uint64_t off = 0) noexcept {
  iovec remote[cma_max_iov];
  size_t rn = std::min(rcount, cma_max_iov);
  for (size_t k = 0; k < rn; ++k)
    remote[k] = {reinterpret_cast<void*>(riov[k].addr), static_cast<size_t>(riov[k].len)};
  iov_cursor<cma_max_iov> l, r;
  l.init(liov, lcount, off + len);
  r.init(remote, rn, off + len);
  l.advance(static_cast<size_t>(off));
  r.advance(static_cast<size_t>(off));
  uint64_t done = 0;
  while (done < len) {
    ssize_t got = write_remote
                      ? ::process_vm_writev(pid, l.v + l.i, l.n - l.i, r.v + r.i, r.n - r.i, 0)
                      : ::process_vm_readv(pid, l.v + l.i, l.n - l.i, r.v + r.i, r.n - r.i, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (got == 0) return EFAULT;  // nothing more can be moved
    done += static_cast<uint64_t>(got);
    l.advance(static_cast<size_t>(got));
    r.advance(static_cast<size_t>(got));
  }
  return 0;
}

}  // namespace weft::shm
