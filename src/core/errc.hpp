// SPDX-License-Identifier: MIT
// weft — the internal error vocabulary: one enumerator per FI_E* code.
#pragma once

#include <rdma/fi_errno.h>

#include <cstddef>
#include <cstring>
#include <new>
#include <sys/types.h>

namespace weft {

// Typed error inside the library; becomes a negative FI_E* at the C boundary.
enum class errc : int {
  ok = 0,
  perm = FI_EPERM,
  noent = FI_ENOENT,
  intr = FI_EINTR,
  io = FI_EIO,
  toobig = FI_E2BIG,
  badf = FI_EBADF,
  again = FI_EAGAIN,
  nomem = FI_ENOMEM,
  access = FI_EACCES,
  fault = FI_EFAULT,
  busy = FI_EBUSY,
  nodev = FI_ENODEV,
  inval = FI_EINVAL,
  mfile = FI_EMFILE,
  nospc = FI_ENOSPC,
  nosys = FI_ENOSYS,
  wouldblock = FI_EWOULDBLOCK,
  nomsg = FI_ENOMSG,
  nodata = FI_ENODATA,
  overflow = FI_EOVERFLOW,
  msgsize = FI_EMSGSIZE,
  noprotoopt = FI_ENOPROTOOPT,
  opnotsupp = FI_EOPNOTSUPP,
  addrinuse = FI_EADDRINUSE,
  addrnotavail = FI_EADDRNOTAVAIL,
  netdown = FI_ENETDOWN,
  netunreach = FI_ENETUNREACH,
  connaborted = FI_ECONNABORTED,
  connreset = FI_ECONNRESET,
  nobufs = FI_ENOBUFS,
  isconn = FI_EISCONN,
  notconn = FI_ENOTCONN,
  shutdown = FI_ESHUTDOWN,
  timedout = FI_ETIMEDOUT,
  connrefused = FI_ECONNREFUSED,
  hostdown = FI_EHOSTDOWN,
  hostunreach = FI_EHOSTUNREACH,
  already = FI_EALREADY,
  inprogress = FI_EINPROGRESS,
  remoteio = FI_EREMOTEIO,
  canceled = FI_ECANCELED,
  keyrejected = FI_EKEYREJECTED,
  other = FI_EOTHER,
  toosmall = FI_ETOOSMALL,
  opbadstate = FI_EOPBADSTATE,
  avail = FI_EAVAIL,
  badflags = FI_EBADFLAGS,
  noeq = FI_ENOEQ,
  domain = FI_EDOMAIN,
  nocq = FI_ENOCQ,
  crc = FI_ECRC,
  trunc = FI_ETRUNC,
  nokey = FI_ENOKEY,
  noav = FI_ENOAV,
  overrun = FI_EOVERRUN,
  norx = FI_ENORX,
};

// The negative return value the C API uses for this error.
constexpr int to_fi(errc e) noexcept { return -static_cast<int>(e); }

// An enum field or argument written by a C caller may hold any int; reading
// it through the C++ enum type would be undefined for out-of-range values, so
// what the application hands in is read as a plain int before validation.
template <class E>
int raw_enum(const E& e) noexcept {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// Runs an API body and keeps exceptions (only allocation failure is expected)
// from crossing the C boundary.
template <class F>
auto abi_guard(F&& body) noexcept -> decltype(body()) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return to_fi(errc::nomem);
  } catch (...) {
    return to_fi(errc::other);
  }
}

}  // namespace weft
