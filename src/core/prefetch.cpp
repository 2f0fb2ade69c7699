// SPDX-License-Identifier: MIT
// weft — whether this CPU has PREFETCHW (prefetch.hpp).
#include "core/prefetch.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace weft {

bool cpu_has_prefetchw() noexcept {
#if defined(__x86_64__)
  static const bool have = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    // Extended leaf 0x80000001, ECX bit 8: PRFCHW (AMD's 3DNowPrefetch).
    return __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 8)) != 0;
  }();
  return have;
#else
  return false;
#endif
}

}  // namespace weft
