// SPDX-License-Identifier: MIT
// weft — an endpoint's shared receive context (srx_binding.hpp).
#include "util/srx_binding.hpp"

#include "core/log.hpp"

namespace weft::util {

int srx_binding::bind(const fi_provider* prov, const domain& dom, struct fid* f,
                      uint64_t flags) noexcept {
  if (flags) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "binding a shared receive context takes no flags");
    return to_fi(errc::badflags);
  }
  const bool app = srx_ctx::is(f) && srx_ctx::from(f)->prov() == prov;
  const bool peer = !app && peer_srx::is(f) && peer_srx::from(f)->prov() == prov;
  if (!app && !peer) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "the shared receive context was not opened on %s",
              prov && prov->name ? prov->name : "this provider");
    return to_fi(errc::inval);
  }
  const domain& owner = app ? srx_ctx::from(f)->dom() : peer_srx::from(f)->dom();
  if (&owner != &dom || bound()) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "%s",
              bound() ? "the endpoint already has a shared receive context"
                      : "the shared receive context belongs to another domain");
    return to_fi(errc::inval);
  }
  if (app)
    app_.reset(srx_ctx::from(f));
  else
    peer_.reset(peer_srx::from(f));
  return 0;
}

srx* srx_binding::engine() const noexcept {
  if (app_) return &app_->engine();
  return peer_ ? srx::engine_behind(peer_->owner()) : nullptr;
}

int srx_binding::attach(cq* rx_cq, av* a, fid_peer_srx** face) noexcept {
  if (app_) {
    if (int ret = app_->attach(rx_cq, a)) return ret;
    *face = app_->face();
  } else {
    *face = peer_ ? peer_->owner() : nullptr;
  }
  return 0;
}

}  // namespace weft::util
