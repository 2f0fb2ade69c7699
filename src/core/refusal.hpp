// SPDX-License-Identifier: MIT
// weft — why a provider passed over fi_getinfo hints. A provider may try
// several templates on several interfaces; each refusal is noted here while
// it decides, and the core logs one line per provider afterwards (and hands
// the line to an imported logger: `fi_info --explain`).
#pragma once

#include <cstddef>

namespace weft::core {

struct refusal {
  bool set = false;
  unsigned depth = 0;     // checks passed before this one failed
  char field[48] = {};    // the hint, as a C path: "ep_attr->type"
  char detail[200] = {};  // asked and offered, where that is short
};

// Starts a provider's turn; the core calls it before each provider.
void refusal_reset() noexcept;

// Notes that `field` of the hints was rejected after `depth` checks passed.
// Of competing refusals (templates, interfaces) the one that came furthest
// is kept, so a template of another endpoint type does not hide the reason
// the matching one gave; among equals, the first.
void refuse(unsigned depth, const char* field, const char* fmt, ...) noexcept
    __attribute__((format(printf, 3, 4)));

// What this thread's current turn noted.
const refusal& last_refusal() noexcept;

// Puts back a refusal saved from last_refusal() (a nested check is done).
void restore_refusal(const refusal& r) noexcept;

}  // namespace weft::core
