// SPDX-License-Identifier: MIT
// weft — iovec lists as the application hands them in.
#pragma once

#include <sys/uio.h>

#include <cstddef>

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

}  // namespace weft::util
