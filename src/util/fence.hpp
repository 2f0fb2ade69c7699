// SPDX-License-Identifier: MIT
// weft — FI_FENCE (fi_endpoint(3)): a fenced transmit, and whatever is posted
// after it, waits until every earlier transmit of the endpoint has
// completed. Providers that offer the FI_FENCE capability (shm, tcp)
// implement the wait by refusing: the fenced call answers -FI_EAGAIN while
// the endpoint has transmit operations outstanding, and the application
// drives progress and calls again, as for any -FI_EAGAIN; it is accepted
// once the earlier ones are done, so nothing posted after it can pass it.
// Providers without it refuse the flag with -FI_EINVAL rather than ignore
// it (docs/decisions.md).
#pragma once

#include "core/errc.hpp"
#include "core/log.hpp"

#include <rdma/fabric.h>

namespace weft::util {

// True (logged) when `flags` carries FI_FENCE; `call` names the call. For
// providers that never offer the capability.
inline bool fence_refused(const fi_provider* prov, const char* call, uint64_t flags) noexcept {
  if (!(flags & FI_FENCE)) [[likely]]
    return false;
  WEFT_WARN(prov, FI_LOG_EP_DATA, "%s: FI_FENCE is not supported", call);
  return true;
}

// For an endpoint of a provider that offers FI_FENCE, with capabilities
// `caps`: ok to go on; inval (logged) when the endpoint was not opened with
// the capability; again while `idle` says transmits are still outstanding.
// Call with FI_FENCE in `flags` only (the caller tests the bit first).
inline errc fence_gate(const fi_provider* prov, const char* call, uint64_t caps,
                       bool idle) noexcept {
  if (!(caps & FI_FENCE)) {
    WEFT_WARN(prov, FI_LOG_EP_DATA, "%s: FI_FENCE on an endpoint opened without the FI_FENCE "
              "capability", call);
    return errc::inval;
  }
  return idle ? errc::ok : errc::again;
}

}  // namespace weft::util
