// SPDX-License-Identifier: MIT
// weft — iovec lists as the application hands them in.
#pragma once

#include "core/log.hpp"

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace weft::util {

// The bytes an iovec list holds.
inline size_t iov_total(const iovec* iov, size_t count) noexcept {
  size_t n = 0;
  for (size_t i = 0; i < count; ++i) n += iov[i].iov_len;
  return n;
}

// False when an entry has a length but no base. Refused where a transfer is
// posted: a provider that copies in user space would fault on it, in the
// application's call or later, inside progress (the kernel answers EFAULT
// to the socket providers, too late to name the culprit).
inline bool iov_bases_ok(const iovec* iov, size_t count) noexcept {
  for (size_t i = 0; i < count; ++i)
    if (iov[i].iov_len && !iov[i].iov_base) return false;
  return true;
}

// Copies `len` bytes from `src` into the list, starting `off` bytes into
// it; what lies past the list's end is cut. The bytes copied.
inline size_t iov_copy_in(const iovec* iov, size_t count, uint64_t off, const void* src,
                          size_t len) noexcept {
  const char* from = static_cast<const char*>(src);
  size_t left = len;
  for (size_t i = 0; i < count && left; ++i) {
    const size_t l = iov[i].iov_len;
    if (off >= l) {
      off -= l;
      continue;
    }
    const size_t n = l - off < left ? l - off : left;
    std::memcpy(static_cast<char*>(iov[i].iov_base) + off, from, n);
    from += n;
    left -= n;
    off = 0;
  }
  return len - left;
}

// Whether an iovec list the application posts is unusable: more than `max`
// entries, entries but no list, or a null buffer with a length. Says so in
// one log line (`what`: "send", "receive", ...); the caller answers
// -FI_EINVAL.
inline bool iov_refused(const fi_provider* prov, const char* what, const iovec* iov, size_t count,
                        size_t max) noexcept {
  if (count <= max && (!count || iov) && iov_bases_ok(iov, count)) [[likely]]
    return false;
  WEFT_WARN(prov, FI_LOG_EP_DATA,
            "%s with %zu iovecs (at most %zu, non-null, no null buffer with a length)", what, count,
            max);
  return true;
}

}  // namespace weft::util
