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

// fi_srx_context: the application's shared receive context (util::srx_ctx),
// whose bound endpoints match through its face. FI_PEER (a context owned by
// another provider, fi_peer(3)) is not offered by tcp.
int open_srx(util::domain& dom, fi_rx_attr* attr, fid_ep** out, void* context) {
  if (attr && (attr->op_flags & FI_PEER)) {
    WEFT_WARN(&provider(), FI_LOG_DOMAIN,
              "fi_srx_context: tcp does not take a peer provider's receive context (FI_PEER)");
    return to_fi(errc::nosys);
  }
  const fi_ops_srx_peer* ops =
      endpoint::peer_table(util::shared_objects_need_lock(dom.lock_threading()));
  return util::srx_ctx::open(dom, &provider(), attr, default_queue_size, ops, out, context);
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
    .control_on_data_path = true,
};

}  // namespace weft::tcp
