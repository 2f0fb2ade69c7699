// SPDX-License-Identifier: MIT
// weft — fi_getinfo over the built-in providers, and fi_fabric.
#pragma once

#include <rdma/fabric.h>

#include <cstdint>

namespace weft::core {

// fi_getinfo with hints already in the current layout (or nullptr).
int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
            const fi_info* hints, fi_info** info) noexcept;

// fi_fabric with the attributes in the current layout.
int open_fabric(fi_fabric_attr* attr, fid_fabric** fabric, void* context) noexcept;

}  // namespace weft::core
