// SPDX-License-Identifier: MIT
// weft — the one hints validator: matches an application's fi_getinfo hints
// against a provider's static capability template, per `man fi_getinfo`.
#pragma once

#include <rdma/fabric.h>
#include <rdma/providers/fi_prov.h>

#include <cstdint>

namespace weft::util {

// Capability bits by the category fi_getinfo(3) gives them.
inline constexpr uint64_t primary_caps = FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_MULTICAST |
                                         FI_NAMED_RX_CTX | FI_DIRECTED_RECV | FI_VARIABLE_MSG |
                                         FI_HMEM | FI_COLLECTIVE | FI_XPU;
inline constexpr uint64_t primary_modifiers =
    FI_READ | FI_WRITE | FI_RECV | FI_SEND | FI_REMOTE_READ | FI_REMOTE_WRITE;
inline constexpr uint64_t secondary_caps = FI_MULTI_RECV | FI_SOURCE | FI_RMA_EVENT |
                                           FI_SHARED_AV | FI_TRIGGER | FI_FENCE | FI_LOCAL_COMM |
                                           FI_REMOTE_COMM | FI_SOURCE_ERR | FI_RMA_PMEM;
// Secondary capabilities a provider reports even when not asked: they cost
// nothing (fi_getinfo(3) allows it "if doing so would not compromise
// performance or security").
inline constexpr uint64_t free_secondary_caps = FI_LOCAL_COMM | FI_REMOTE_COMM;

// Options of a match.
// match_any_progress: the provider progresses data and control operations
// manually or automatically, as the application asks; the template's
// progress values are only the defaults for hints that leave them open.
inline constexpr uint32_t match_any_progress = 1;

// A copy of `tmpl` shaped by `hints` (nullptr: the template as it is), or
// nullptr when the template cannot satisfy the hints (the reason is logged
// at FI_LOG_INFO) or memory ran out (`*nomem` is set).
fi_info* match_info(const fi_provider* prov, uint32_t version, const fi_info& tmpl,
                    const fi_info* hints, bool* nomem, uint32_t options = 0) noexcept;

// Checks the attributes an application passes to fi_domain / fi_endpoint
// against what the provider offers (same rules as fi_getinfo).
bool info_fits(const fi_provider* prov, uint32_t version, const fi_info& tmpl,
               const fi_info& wanted, uint32_t options = 0) noexcept;

}  // namespace weft::util
