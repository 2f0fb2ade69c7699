// SPDX-License-Identifier: MIT
// weft — fi_info allocation, deep copy and release, for every ABI version.
#pragma once

#include <rdma/fabric.h>

#include <cstddef>
#include <cstdint>

namespace weft::core {

// How many bytes of each structure a caller of a given ABI version owns.
// Structures only ever grew at the end, so an older caller's struct is a
// prefix of ours: copy that prefix into a zeroed current-size struct.
struct abi_layout {
  size_t info, tx, rx, ep, domain, fabric;
};

// FABRIC_1.0 ... FABRIC_1.9; `current` is the layout of our headers.
extern const abi_layout abi_1_0, abi_1_1, abi_1_2, abi_1_3, abi_1_7, abi_1_8, abi_current;

// A deep copy of `src` (which may be an older caller's smaller structures),
// always in the current layout; nullptr gives a zeroed info with every
// attribute struct allocated (fi_allocinfo). Returns nullptr on ENOMEM.
fi_info* dup_info(const fi_info* src, const abi_layout& layout) noexcept;

// Deep copy of a whole list (only ours, current layout).
fi_info* dup_info_list(const fi_info* src) noexcept;

// Releases a list made by dup_info or a provider.
void free_info(fi_info* info) noexcept;

}  // namespace weft::core
