// SPDX-License-Identifier: MIT
// weft — FI_FENCE is not implemented: every data-transfer call that takes
// flags refuses it with -FI_EINVAL (one log line), rather than ignoring it,
// and no provider advertises it (docs/decisions.md).
#pragma once

#include "core/errc.hpp"
#include "core/log.hpp"

#include <rdma/fabric.h>

namespace weft::util {

// True (logged) when `flags` carries FI_FENCE; `call` names the call.
inline bool fence_refused(const fi_provider* prov, const char* call, uint64_t flags) noexcept {
  if (!(flags & FI_FENCE)) [[likely]]
    return false;
  WEFT_WARN(prov, FI_LOG_EP_DATA, "%s: FI_FENCE is not supported", call);
  return true;
}

}  // namespace weft::util
