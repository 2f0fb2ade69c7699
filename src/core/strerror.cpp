// SPDX-License-Identifier: MIT
// weft — fi_strerror: the text for every FI_E* code.
#include "core/api.hpp"

#include <rdma/fi_errno.h>

#include <cstdlib>
#include <cstring>

namespace {

// The codes above the errno range are libfabric's own; the rest are errno's.
const char* own_text(int code) noexcept {
  switch (code) {
    case FI_EOTHER: return "Unspecified error";
    case FI_ETOOSMALL: return "Provided buffer is too small";
    case FI_EOPBADSTATE: return "Operation not permitted in the object's current state";
    case FI_EAVAIL: return "Error details are available (read the error queue)";
    case FI_EBADFLAGS: return "Flags not supported";
    case FI_ENOEQ: return "Missing or unavailable event queue";
    case FI_EDOMAIN: return "Invalid resource domain";
    case FI_ENOCQ: return "Missing or unavailable completion queue";
    case FI_ECRC: return "CRC error";
    case FI_ETRUNC: return "Message truncated";
    case FI_ENOKEY: return "Required key not available";
    case FI_ENOAV: return "Missing or unavailable address vector";
    case FI_EOVERRUN: return "Queue has been overrun";
    case FI_ENORX: return "No receive buffer available";
    case FI_ENOMR: return "Memory registration limit exceeded";
    default: return nullptr;
  }
}

}  // namespace

extern "C" WEFT_EXPORT const char* fi_strerror(int errnum) {
  int code = std::abs(errnum);
  if (const char* t = own_text(code)) return t;
  if (code < FI_ERRNO_OFFSET) return std::strerror(code);
  return "Unknown error";
}
