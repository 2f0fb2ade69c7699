// SPDX-License-Identifier: MIT
// weft — a provider as a peer provider's receiving side (fi_peer(3)): the
// shared receive context another provider owns. The owner opens it on our
// domain with FI_PEER in attr->op_flags and a fi_peer_srx_context naming its
// fid_peer_srx; we check the owner's operations and put our provider's
// callbacks (start/discard) in the owner's peer_ops. Endpoints bound to the
// context match arriving messages through the owner (util::srx_port::share)
// from fi_enable on. Receives are the owner's to post: every data operation
// here is -FI_ENOSYS. The application's own shared receive context (no
// FI_PEER) is util::srx_ctx, on the same road.
#pragma once

#include "util/domain.hpp"
#include "util/endpoint.hpp"

#include <rdma/providers/fi_peer.h>

namespace weft::util {

class peer_srx : public endpoint_object<peer_srx> {
 public:
  // `peer_ops`: the provider's callbacks, of the lock policy its endpoints
  // on `dom` use. -FI_EINVAL (logged) when `context` names no usable owner.
  static int open(domain& dom, const fi_provider* prov, const fi_ops_srx_peer* peer_ops,
                  fid_ep** out, void* context) noexcept;
  peer_srx(domain& dom, const fi_provider* prov, fid_peer_srx* owner, void* context);
  int close();
  // Whether f is a peer_srx (checked before any cast).
  static bool is(const struct fid* f) noexcept;
  fid_peer_srx* owner() const noexcept { return owner_; }
  domain& dom() const noexcept { return *domain_; }
  const fi_provider* prov() const noexcept { return prov_; }

 private:
  ref<domain> domain_;
  const fi_provider* prov_;
  fid_peer_srx* owner_;
};

// A provider's fi_srx_context: with FI_PEER in attr->op_flags, a context
// another provider owns (peer_srx), only on a domain opened with FI_PEER in
// its caps (else -FI_ENOSYS, logged: the provider offers FI_PEER only for
// endpoint types that can match through an owner); without, the
// application's own (srx_ctx, `default_size` deep when attr->size is 0).
// `peer_ops` is of the lock policy of dom.lock_threading() for both: the
// owner may start a match while the domain's progress thread runs.
int open_srx_context(domain& dom, const fi_provider* prov, const fi_rx_attr* attr,
                     size_t default_size, const fi_ops_srx_peer* peer_ops, fid_ep** out,
                     void* context) noexcept;

}  // namespace weft::util
