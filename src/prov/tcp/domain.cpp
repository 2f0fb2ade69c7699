// SPDX-License-Identifier: MIT
// weft — the tcp provider's fabric and domain: util's objects with tcp's
// endpoints, passive endpoints and address codec plugged in.
#include "core/log.hpp"
#include "prov/tcp/tcp.hpp"
#include "util/ip_codec.hpp"

#include <rdma/fi_domain.h>

namespace weft::tcp {

namespace {

int open_domain(util::fabric& fab, fi_info* info, fid_domain** out, void* context) {
  if (!offers(fab.api(), *info)) {
    WEFT_WARN(&provider(), FI_LOG_DOMAIN, "the fi_info passed to fi_domain is not one tcp offers");
    return to_fi(errc::nodata);
  }
  return util::domain::open(fab, &domain_hooks, *info, out, context);
}

int open_pep(util::fabric& fab, fi_info* info, fid_pep** out, void* context) {
  return pep::open(fab, info, out, context);
}

int open_endpoint(util::domain& dom, fi_info* info, fid_ep** out, void* context) {
  return endpoint::open(dom, *info, out, context);
}

const util::av_codec* codec_for(const util::domain& dom) {
  return util::ip_codec(dom.addr_format());
}

int query_atomic(util::domain&, int datatype, int op, fi_atomic_attr* attr,
                 uint64_t flags) noexcept {
  return util::query_atomic_logged(&provider(), datatype, op, attr, flags, atomic_max_bytes);
}

// fi_srx_context: with FI_PEER, a context another provider owns (fi_peer(3));
// without, the application's own (util::open_srx_context). Bound endpoints
// match through its face and finish its matches through their peer
// callbacks. Only RDM endpoints match through an owner (attr.cpp).
int open_srx(util::domain& dom, fi_rx_attr* attr, fid_ep** out, void* context) {
  return util::open_srx_context(
      dom, &provider(), attr, default_queue_size,
      endpoint::peer_table(util::shared_objects_need_lock(dom.lock_threading())), out, context);
}

}  // namespace

const util::fabric_hooks fabric_hooks = {
    .domain = open_domain,
    .passive_ep = open_pep,
};

const util::domain_hooks domain_hooks = {
    .endpoint = open_endpoint,
    .codec = codec_for,
    .query_atomic = query_atomic,
    .srx_ctx = open_srx,
    .scalable_ep = open_sep,  // FI_EP_RDM: sep.cpp
    .control_on_data_path = true,
};

}  // namespace weft::tcp
