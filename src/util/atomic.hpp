// SPDX-License-Identifier: MIT
// weft — the one engine that executes OFI atomics at the target
// (`man fi_atomic`), for every provider, and the helpers behind
// fi_atomicvalid / fi_fetch_atomicvalid / fi_compare_atomicvalid and
// fi_query_atomic.
//
// Providers execute an atomic in the process that owns the target memory
// (shm at the receiver of the request, tcp at the peer that reads the
// frame), so every update of a target region goes through atomic_apply in
// that one process. That is what makes the two update paths below atomic
// with respect to each other:
//  - elements of 1, 2, 4 or 8 bytes whose address is a multiple of their
//    size are updated with the CPU's atomic instructions (native fetch-add /
//    -or / -and / -xor / exchange for integers, a compare-and-swap loop on the
//    bit pattern otherwise), so they are also atomic against the
//    application's own __atomic/std::atomic accesses to that memory;
//  - every other element (16- and 32-byte types: long double, double
//    complex, long double complex, 128-bit integers; and small elements at a
//    misaligned address) is updated under one of a small table of spinlocks
//    chosen by the element's address. Such an element is atomic only with
//    respect to other atomic_apply calls.
// An element is always updated the same way when addressed with the same
// datatype, since its address decides. Overlapping accesses with different
// datatypes (an int32 inside an int64, a double inside a double complex) are
// not atomic with respect to each other, as fi_atomic(3) only promises
// atomicity per datatype element.
//
// Semantics are those of fi_atomic(3), element by element, with the target
// value `addr`, the operand `buf` and the compare value `compare`:
//  - integers wrap on overflow (two's complement), like the CPU's add;
//  - floating-point and complex values compare and compute arithmetically
//    (-0.0 == +0.0 for the CSWAP family, NaN compares unequal and unordered,
//    so MIN/MAX/CSWAP_* with a NaN never write);
//  - the logical operations LOR, LAND and LXOR take the C meaning the
//    man page's pseudo-code has (`addr || buf` etc.): a value is true when
//    it is nonzero — for a complex value, when either part is nonzero — and
//    the result is 1 or 0 of the element type (1 + 0i for complex). C
//    defines these operators on every arithmetic type, so they are offered
//    for every datatype, complex included;
//  - ordering (MIN, MAX, CSWAP_LE/LT/GE/GT) has no meaning for complex
//    values and bitwise operations (BOR, BAND, BXOR, MSWAP) none for
//    floating-point ones: those combinations are not supported;
//  - long double is 16 bytes in memory on x86-64 with 10 significant: it is
//    compared and computed as long double, and a value moved unchanged
//    (ATOMIC_WRITE, a CSWAP that swaps, MIN/MAX that take the operand) is
//    copied with all its bytes, as is every result.
// The 2.x datatypes FI_FLOAT16, FI_BFLOAT16, FI_FLOAT8_E4M3, FI_FLOAT8_E5M2
// and the FI_DIFF operation are not supported.
#pragma once

#include <rdma/fi_atomic.h>

#include <cstddef>
#include <cstdint>

#include "core/errc.hpp"

namespace weft::util {

// Which family of fi_atomic calls an operation comes from: fi_atomic*
// (base), fi_fetch_atomic* (fetch) or fi_compare_atomic* (compare).
enum class atomic_kind : uint8_t { base, fetch, compare };

// The elements an fi_ioc list holds (a null list holds none).
inline size_t ioc_elements(const fi_ioc* v, size_t n) noexcept {
  size_t c = 0;
  for (size_t i = 0; v && i < n; ++i) c += v[i].count;
  return c;
}

// What an atomic of this kind and operation does to the target region, as
// events counted on it (fi_mr_bind): base atomics modify it; fetching ones
// read it and, except FI_ATOMIC_READ, modify it; compare ones read it and
// may modify it.
inline uint64_t region_events(atomic_kind kind, int op) noexcept {
  if (kind == atomic_kind::base) return FI_REMOTE_WRITE;
  if (kind == atomic_kind::fetch && op == FI_ATOMIC_READ) return FI_REMOTE_READ;
  return FI_REMOTE_READ | FI_REMOTE_WRITE;
}

// Datatypes and operations arrive as plain ints (from the wire or from a C
// caller, where any value is possible); out-of-range values are unsupported.

// Bytes of one element of `datatype` in memory, or 0 for a datatype the
// engine does not support.
size_t atomic_type_size(int datatype) noexcept;

// Whether atomic_apply executes `op` on `datatype` for calls of `kind`.
bool atomic_supported(int op, int datatype, atomic_kind kind) noexcept;

// Applies `op` to `count` consecutive elements of `datatype` at `target`,
// element i using operand[i] and, for compare kinds, compare[i]. For fetch
// and compare kinds, result[i] receives the bytes target[i] held just before
// its update (for ATOMIC_READ, its current value). Buffers need no alignment.
// `operand` may be null for ATOMIC_READ, `compare` for base and fetch kinds,
// `result` for the base kind. Element i's inputs are read before result[i]
// is written, so `result` may be the very same buffer as `operand` or
// `compare` (a reply built in place); other overlaps are not allowed.
// Returns errc::opnotsupp for a combination atomic_supported refuses
// (nothing is touched), errc::inval for a missing buffer or a count whose
// byte size overflows, errc::ok otherwise (also for count == 0). Never logs:
// the provider knows whom to blame. No allocation, no system call (a thread
// that waits for a contended spinlock yields the CPU after a short spin).
errc atomic_apply(int op, int datatype, atomic_kind kind, void* target, const void* operand,
                  const void* compare, void* result, size_t count) noexcept;

// For fi_atomicvalid and friends: the number of elements one call may carry
// when a provider moves at most `max_bytes` of operand data per atomic.
// Returns 0 and sets *count; -FI_EINVAL for a null `count`; -FI_EOPNOTSUPP
// when the combination is unsupported or not even one element fits.
// *count is written only on success.
int atomic_valid(int op, int datatype, atomic_kind kind, size_t max_bytes, size_t* count) noexcept;

// For fi_query_atomic once its flags are decoded: attr->size = bytes of one
// element, attr->count as atomic_valid. Returns 0, -FI_EINVAL for a null
// `attr`, -FI_EOPNOTSUPP as atomic_valid. *attr is written only on success.
int atomic_query(int op, int datatype, atomic_kind kind, size_t max_bytes,
                 fi_atomic_attr* attr) noexcept;

// Decodes the flags of fi_query_atomic: 0 asks about base atomics,
// FI_FETCH_ATOMIC about fetch atomics, FI_COMPARE_ATOMIC about compare
// atomics. Returns 0 and sets *kind; -FI_EINVAL for a null `kind`;
// -FI_EBADFLAGS for an unknown bit or FI_FETCH_ATOMIC with FI_COMPARE_ATOMIC
// (the man page forbids both); -FI_EOPNOTSUPP for FI_TAGGED (atomics on
// tagged receive buffers) and FI_COLLECTIVE (atomics within collectives),
// which weft does not offer.
int query_atomic_flags(uint64_t flags, atomic_kind* kind) noexcept;

// The whole of a provider's fi_query_atomic: query_atomic_flags, then
// atomic_query. Same return values; the provider logs the failure.
int query_atomic(int op, int datatype, uint64_t flags, size_t max_bytes,
                 fi_atomic_attr* attr) noexcept;

}  // namespace weft::util
