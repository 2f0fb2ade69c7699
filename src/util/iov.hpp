// SPDX-License-Identifier: MIT
// weft — iovec lists as the application hands them in.
#pragma once

#include "core/log.hpp"

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
