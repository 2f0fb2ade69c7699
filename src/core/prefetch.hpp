// SPDX-License-Identifier: MIT
// weft — prefetching a cache line for writing.
//
// A line another core is polling sits shared in both caches; storing to it
// first costs a round trip that takes the other copy away. Asking for the
// line exclusive ahead of the store (x86 PREFETCHW) moves that round trip
// off the store's path. The compiler's __builtin_prefetch(p, 1) is a read
// prefetch unless the build targets a CPU with PREFETCHW, which a
// distribution build does not; so the instruction is issued directly, on
// CPUs whose CPUID says they have it (checked once), and the compiler's
// hint elsewhere. Either is only a hint: it never faults, whatever `p` is.
#pragma once

namespace weft {

// CPUID's PRFCHW bit; computed once.
bool cpu_has_prefetchw() noexcept;

inline void prefetch_for_write(const void* p, bool have_prefetchw) noexcept {
#if defined(__x86_64__)
  if (have_prefetchw) {
    __asm__ volatile("prefetchw (%0)" : : "r"(p));
    return;
  }
#endif
  (void)have_prefetchw;
  __builtin_prefetch(p, 1, 3);
}

}  // namespace weft
