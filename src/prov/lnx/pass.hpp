// SPDX-License-Identifier: MIT
// weft — how lnx passes a transmit through to a core: the destination's
// route names the core endpoint and the peer's fi_addr in that core's AV,
// and the call is the same call there. Shared by messages (xfer.cpp) and
// RMA and atomics (rma.cpp).
#pragma once

#include "core/log.hpp"
#include "prov/lnx/ep.hpp"
#include "util/iov.hpp"

namespace weft::lnx {

// Flags a transmit (*msg forms) may not carry on `e`: FI_FENCE on an
// endpoint opened without it. FI_FENCE otherwise passes to the core: every
// operation to a peer goes through the one core endpoint its route names,
// so the core's fence (every earlier transmit of that endpoint completed
// first) covers all earlier operations to that peer, which is what
// fi_endpoint(3) asks.
WEFT_ALWAYS_INLINE bool refused(fid_ep* e, uint64_t flags) noexcept {
  return (flags & FI_FENCE) && (flags & endpoint::from(e)->refused_tx_flags());
}

inline ssize_t refuse_flags(fid_ep* e, const char* call, uint64_t flags) noexcept {
  WEFT_WARN(&provider(), FI_LOG_EP_DATA,
            "%s: FI_FENCE on an endpoint opened without the FI_FENCE capability", call);
  (void)e, (void)flags;
  return to_fi(errc::inval);
}

// A *msg call with FI_TRIGGER: to the domain's engine (util/trigger.hpp).
// When it fires, the engine calls the same slot without FI_TRIGGER (with
// util::op_quiet where the request asked for no completion: the core,
// weft's own, then leaves its peer counters alone, as fi_trigger(3) asks).
WEFT_ALWAYS_INLINE bool triggered(uint64_t flags) noexcept { return flags & FI_TRIGGER; }
inline ssize_t trigger(fid_ep* e, const util::trigger_call& call) noexcept {
  return util::trigger_intercept(endpoint::from(e)->trigger_site(), e, call);
}

// The call `f` on the core endpoint and the core's fi_addr that reach `dest`.
template <class F>
WEFT_ALWAYS_INLINE ssize_t via(fid_ep* e, fi_addr_t dest, F&& f) noexcept {
  fid_ep* c;
  fi_addr_t a;
  if (!endpoint::from(e)->route(dest, c, a)) return to_fi(errc::inval);
  return f(c, a);
}

// `via`, for `bytes` of payload: beyond what lnx advertises (max_msg_size,
// or inject_size for an inject) it is -FI_EMSGSIZE whichever core would
// carry it.
template <class F>
WEFT_ALWAYS_INLINE ssize_t via_sized(fid_ep* e, fi_addr_t dest, size_t bytes, bool inject,
                                     F&& f) noexcept {
  if (!endpoint::from(e)->fits(bytes, inject)) [[unlikely]]
    return to_fi(errc::msgsize);
  return via(e, dest, f);
}
// The fast path of a single-buffer transmit: the core endpoint and fi_addr
// when the route is made and the size within the limits, with no call on
// the way (endpoint::quick_route). Its op then ends in the core's call, and
// otherwise in a call of its slow twin with its own arguments (via_sized):
// both tail calls, so the op saves no registers.
WEFT_ALWAYS_INLINE bool quick(fid_ep* e, fi_addr_t dest, size_t bytes, bool inject, fid_ep*& c,
                              fi_addr_t& a) noexcept {
  return endpoint::from(e)->quick_route(dest, bytes, inject, c, a);
}

// The bytes of an iovec list (a null list counts none: the core refuses it).
inline size_t total(const iovec* iov, size_t count) noexcept {
  return iov ? util::iov_total(iov, count) : 0;
}

}  // namespace weft::lnx
