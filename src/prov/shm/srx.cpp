// SPDX-License-Identifier: MIT
// weft — shm as a peer provider's receiving side (fi_peer(3)): the shared
// receive context another provider owns. The owner opens it on an shm domain
// with FI_PEER in attr->op_flags and a fi_peer_srx_context naming its
// fid_peer_srx; shm checks the owner's operations, puts its own callbacks in
// the owner's peer_ops, and endpoints bound to the context match through the
// owner from fi_enable on.
#include "core/log.hpp"
#include "prov/shm/shm.hpp"

namespace weft::shm {

namespace {

// The owner's fid_peer_srx from fi_srx_context's context, or null (logged).
fid_peer_srx* owner_of(void* context) noexcept {
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
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_srx_context with FI_PEER: %s", why);
    return nullptr;
  }
  return pc->srx;
}

}  // namespace

int peer_srx::open(util::domain& dom, fi_rx_attr*, fid_ep** out, void* context) noexcept {
  fid_peer_srx* owner = owner_of(context);
  if (!owner) return to_fi(errc::inval);
  return abi_guard([&] {
    auto s = std::make_unique<peer_srx>(dom, owner, context);
    // fi_peer(3): the peer's callbacks are in place before this returns. The
    // table is repointed, never written: an owner's may be read-only.
    owner->peer_ops = const_cast<fi_ops_srx_peer*>(
        util::shared_objects_need_lock(dom.threading()) ? endpoint::peer_table<util::mutex_lock>()
                                                        : endpoint::peer_table<util::null_lock>());
    *out = s.release();
    return 0;
  });
}

peer_srx::peer_srx(util::domain& dom, fid_peer_srx* owner, void* context)
    : endpoint_object(FI_CLASS_SRX_CTX, context), domain_(&dom), owner_(owner) {}

int peer_srx::close() {
  return close_if_unused(&provider(), FI_LOG_EP_CTRL, "shared receive context");
}

bool peer_srx::is(const struct fid* f) noexcept {
  return util::is_class(f, FI_CLASS_SRX_CTX) &&
         f->ops == &util::fid_thunks<peer_srx, fid_ep>::table;
}

}  // namespace weft::shm
