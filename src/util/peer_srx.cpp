// SPDX-License-Identifier: MIT
// weft — the shared receive context another provider owns (peer_srx.hpp).
#include "util/peer_srx.hpp"

#include "core/log.hpp"
#include "util/srx_ctx.hpp"

#include <memory>

namespace weft::util {

namespace {

// The owner's fid_peer_srx from fi_srx_context's context, or null (logged).
fid_peer_srx* owner_of(const fi_provider* prov, void* context) noexcept {
  auto* pc = static_cast<fi_peer_srx_context*>(context);
  const fi_ops_srx_owner* o = pc && pc->size >= sizeof *pc && pc->srx ? pc->srx->owner_ops : nullptr;
  const char* why = !pc                                ? "no fi_peer_srx_context"
                    : pc->size < sizeof *pc            ? "fi_peer_srx_context too small"
                    : !pc->srx                         ? "no fid_peer_srx"
                    : !o || o->size < sizeof *o        ? "no owner_ops"
                    : !o->get_msg || !o->get_tag || !o->queue_msg || !o->queue_tag ||
                            !o->free_entry
                        ? "owner_ops without get/queue/free_entry"
                        : nullptr;
  if (why) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_srx_context with FI_PEER: %s", why);
    return nullptr;
  }
  return pc->srx;
}

}  // namespace

int peer_srx::open(domain& dom, const fi_provider* prov, const fi_ops_srx_peer* peer_ops,
                   fid_ep** out, void* context) noexcept {
  fid_peer_srx* owner = owner_of(prov, context);
  if (!owner) return to_fi(errc::inval);
  return abi_guard([&] {
    auto s = std::make_unique<peer_srx>(dom, prov, owner, context);
    // fi_peer(3): the peer's callbacks are in place before this returns. The
    // table is repointed, never written: an owner's may be read-only.
    owner->peer_ops = const_cast<fi_ops_srx_peer*>(peer_ops);
    *out = s.release();
    return 0;
  });
}

peer_srx::peer_srx(domain& dom, const fi_provider* prov, fid_peer_srx* owner, void* context)
    : endpoint_object(FI_CLASS_SRX_CTX, context), domain_(&dom), prov_(prov), owner_(owner) {}

int peer_srx::close() { return close_if_unused(prov_, FI_LOG_EP_CTRL, "shared receive context"); }

bool peer_srx::is(const struct fid* f) noexcept {
  return is_class(f, FI_CLASS_SRX_CTX) && f->ops == &fid_thunks<peer_srx, fid_ep>::table;
}

int open_srx_context(domain& dom, const fi_provider* prov, const fi_rx_attr* attr,
                     size_t default_size, const fi_ops_srx_peer* peer_ops, fid_ep** out,
                     void* context) noexcept {
  if (!(attr && (attr->op_flags & FI_PEER)))
    return srx_ctx::open(dom, prov, attr, default_size, peer_ops, out, context);
  if (!(dom.caps() & FI_PEER)) {
    WEFT_WARN(prov, FI_LOG_DOMAIN,
              "fi_srx_context with FI_PEER: the domain was not opened with FI_PEER "
              "(%s offers it for FI_EP_RDM)",
              prov->name);
    return to_fi(errc::nosys);
  }
  return peer_srx::open(dom, prov, peer_ops, out, context);
}

}  // namespace weft::util
