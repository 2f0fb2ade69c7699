// SPDX-License-Identifier: MIT
// weft — an endpoint's shared receive context, whichever kind it is: the
// application's (fi_srx_context, util::srx_ctx) or a peer provider owner's
// (fi_srx_context with FI_PEER, util::peer_srx, fi_peer(3)). One fi_ep_bind
// check and one fi_enable step for every provider that takes both, so the
// rules (no flags, one context, this provider's and this domain's) are
// written once.
#pragma once

#include "util/peer_srx.hpp"
#include "util/srx_ctx.hpp"

namespace weft::util {

class srx_binding {
 public:
  // fi_ep_bind of `f` (FI_CLASS_SRX_CTX) to an endpoint of `prov` on `dom`:
  // no flags (-FI_EBADFLAGS); a context `prov` opened on `dom`, and only one
  // per endpoint (-FI_EINVAL); each logged.
  int bind(const fi_provider* prov, const domain& dom, struct fid* f, uint64_t flags) noexcept;
  bool bound() const noexcept { return app_ || peer_; }
  // fi_enable of the endpoint, with its receive CQ and AV: the face it
  // matches through from now on (util::srx_port::share), null when nothing
  // is bound. An application's context checks the AV (srx_ctx::attach):
  // its error is returned, with `face` untouched.
  int attach(cq* rx_cq, av* a, fid_peer_srx** face) noexcept;
  srx_ctx* app() const noexcept { return app_.get(); }
  peer_srx* peer() const noexcept { return peer_.get(); }
  // The engine the context's receives are matched by, when it is util's:
  // an application's context, or a peer SRX whose owner is util's engine
  // (lnx's). An endpoint closing withdraws what it queued there
  // (srx::withdraw), because another thread may be posting to that engine
  // and handing our messages to our start_* meanwhile: lnx's engine may be
  // an application's shared context. Null for another owner, which has no
  // withdraw (its messages go back through free_entry).
  srx* engine() const noexcept;

 private:
  ref<srx_ctx> app_;
  ref<peer_srx> peer_;
};

}  // namespace weft::util
