// SPDX-License-Identifier: MIT
// weft — the udp provider's fabric and domain: util's objects with udp's
// endpoint and address codec plugged in.
#include "core/log.hpp"
#include "prov/udp/rdm.hpp"
#include "prov/udp/udp.hpp"
#include "util/info_match.hpp"
#include "util/ip_codec.hpp"

#include <rdma/fi_domain.h>

namespace weft::udp {

namespace {

int open_domain(util::fabric& fab, fi_info* info, fid_domain** out, void* context) {
  if (!offers(fab.api(), *info)) {
    WEFT_WARN(&provider(), FI_LOG_DOMAIN, "the fi_info passed to fi_domain is not one udp offers");
    return to_fi(errc::nodata);
  }
  return util::domain::open(fab, &domain_hooks, *info, out, context);
}

int open_endpoint(util::domain& dom, fi_info* info, fid_ep** out, void* context) {
  if (info && info->ep_attr && info->ep_attr->type == FI_EP_RDM)
    return rdm_endpoint::open(dom, *info, out, context);
  return endpoint::open(dom, *info, out, context);
}

const util::av_codec* codec_for(const util::domain& dom) {
  return util::ip_codec(dom.addr_format());
}

// fi_query_atomic: what the RDM endpoint's atomics carry (rdm_rma.cpp); a
// domain opened for what offers no atomics (FI_EP_DGRAM) has none.
int query_atomic(util::domain& dom, int datatype, int op, fi_atomic_attr* attr,
                 uint64_t flags) noexcept {
  if (!(dom.caps() & FI_ATOMIC)) {
    WEFT_WARN(&provider(), FI_LOG_DOMAIN, "fi_query_atomic on a domain opened without FI_ATOMIC");
    return to_fi(errc::nosys);
  }
  return util::query_atomic_logged(&provider(), datatype, op, attr, flags, rdm_atomic_max);
}

// fi_srx_context for FI_EP_RDM endpoints (a domain opened for FI_EP_DGRAM
// answers max_ep_srx_ctx 0: util's domain refuses it before this): with
// FI_PEER, a context another provider owns (fi_peer(3), util::peer_srx);
// without, the application's own (util::srx_ctx).
int open_srx(util::domain& dom, fi_rx_attr* attr, fid_ep** out, void* context) {
  return util::open_srx_context(
      dom, &provider(), attr, rdm_template().rx_attr->size,
      rdm_endpoint::peer_table(util::shared_objects_need_lock(dom.lock_threading())), out,
      context);
}

}  // namespace

const util::fabric_hooks fabric_hooks = {
    .domain = open_domain,
    .passive_ep = nullptr,
};

const util::domain_hooks domain_hooks = {
    .endpoint = open_endpoint,
    .codec = codec_for,
    .query_atomic = query_atomic,
    .srx_ctx = open_srx,
    .scalable_ep = open_sep,  // FI_EP_RDM: sep.cpp
};

}  // namespace weft::udp
