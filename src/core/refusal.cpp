// SPDX-License-Identifier: MIT
// weft — the refusal a provider noted during its fi_getinfo turn.
#include "core/refusal.hpp"

#include <cstdarg>
#include <cstdio>

namespace weft::core {

namespace {

// Per thread: concurrent fi_getinfo calls explain themselves separately.
thread_local refusal current;

}  // namespace

void refusal_reset() noexcept { current = refusal{}; }

void refuse(unsigned depth, const char* field, const char* fmt, ...) noexcept {
  if (current.set && depth <= current.depth) return;
  current.set = true;
  current.depth = depth;
  std::snprintf(current.field, sizeof current.field, "%s", field);
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(current.detail, sizeof current.detail, fmt, ap);
  va_end(ap);
}

const refusal& last_refusal() noexcept { return current; }

void restore_refusal(const refusal& r) noexcept { current = r; }

}  // namespace weft::core
