// SPDX-License-Identifier: MIT
// weft — the shared transmit context (fi_stx_context, fi_endpoint(3)).
//
// fi_endpoint(3) makes a shared transmit context "mostly opaque": the
// application opens it, binds it to endpoints, and still posts every
// transmit on the endpoint; completions go to the endpoint's CQs and
// counters, and the context has none of its own. weft's endpoints each keep
// their own transmit machinery (a socket per peer on tcp, the peer's ring on
// shm, one socket on udp), which needs no sharing to be correct or cheap, so
// the context is the object the API names and nothing on the data path:
// - it checks its attributes against what the domain offers at open;
// - an endpoint bound to it may use only a subset of them (caps, checked at
//   fi_enable): "the reverse of the requirement for transmit contexts for
//   scalable endpoints";
// - at most max_ep_stx_ctx endpoints are bound at once;
// - it cannot close while an endpoint holds it (-FI_EBUSY).
// docs/decisions.md, "Shared transmit contexts", says why.
#pragma once

#include "util/domain.hpp"
#include "util/object.hpp"

#include <rdma/fi_endpoint.h>

namespace weft::util {

class stx_ctx : public fid_object<stx_ctx, fid_stx> {
 public:
  // fi_stx_context on `dom`: -FI_ENOSYS (logged) where the domain shares no
  // transmit context (max_ep_stx_ctx 0); -FI_EINVAL (logged) for attributes
  // beyond the domain's. A null `attr`, or a zero field, takes the domain's.
  static int open(domain& dom, const fi_tx_attr* attr, fid_stx** out, void* context) noexcept;
  stx_ctx(domain& dom, const fi_tx_attr& attr, void* context);

  // Whether f is one of weft's stx contexts (checked before any cast).
  static bool is(const struct fid* f) noexcept;

  int close();
  domain& dom() const noexcept { return *domain_; }
  const fi_tx_attr& attr() const noexcept { return attr_; }
  // Whether one more endpoint may bind (false, logged, past
  // max_ep_stx_ctx). Each bound endpoint holds a ref<stx_ctx> until it
  // closes, and those are the context's only references.
  bool admit(const fi_provider* prov) const noexcept;

 private:
  ref<domain> domain_;
  fi_tx_attr attr_;
  size_t max_bound_;
};

}  // namespace weft::util
