// SPDX-License-Identifier: MIT
// weft — the shared transmit context (stx_ctx.hpp).
#include "util/stx_ctx.hpp"

#include "core/log.hpp"

namespace weft::util {

namespace {

// fid_stx's fi_ops_ep: a shared transmit context takes no operations of
// its own (fi_endpoint(3): operations are posted to the endpoints).
ssize_t stx_cancel(fid*, void*) noexcept { return to_fi(errc::nosys); }
int stx_getopt(fid*, int, int, void*, size_t*) noexcept { return to_fi(errc::noprotoopt); }
int stx_setopt(fid*, int, int, const void*, size_t) noexcept { return to_fi(errc::noprotoopt); }
int stx_tx_ctx(fid_ep*, int, fi_tx_attr*, fid_ep**, void*) noexcept { return to_fi(errc::nosys); }
int stx_rx_ctx(fid_ep*, int, fi_rx_attr*, fid_ep**, void*) noexcept { return to_fi(errc::nosys); }
ssize_t stx_size_left(fid_ep*) noexcept { return to_fi(errc::nosys); }

constexpr fi_ops_ep stx_ops = {
    .size = sizeof(fi_ops_ep),
    .cancel = stx_cancel,
    .getopt = stx_getopt,
    .setopt = stx_setopt,
    .tx_ctx = stx_tx_ctx,
    .rx_ctx = stx_rx_ctx,
    .rx_size_left = stx_size_left,
    .tx_size_left = stx_size_left,
};

// One attribute asked for against the domain's: 0 takes the domain's value;
// more than it is refused.
bool take_at_most(const fi_provider* prov, const char* name, size_t asked, size_t offered,
                  size_t& out) noexcept {
  if (asked > offered) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "fi_stx_context: attr->%s %zu is more than the domain's %zu",
              name, asked, offered);
    return false;
  }
  out = asked ? asked : offered;
  return true;
}

bool take_subset(const fi_provider* prov, const char* name, uint64_t asked, uint64_t offered,
                 uint64_t& out) noexcept {
  if (asked & ~offered) {
    WEFT_WARN(prov, FI_LOG_DOMAIN,
              "fi_stx_context: attr->%s asks 0x%llx, which the domain does not offer", name,
              static_cast<unsigned long long>(asked & ~offered));
    return false;
  }
  out = asked ? asked : offered;
  return true;
}

}  // namespace

int stx_ctx::open(domain& dom, const fi_tx_attr* attr, fid_stx** out, void* context) noexcept {
  const fi_provider* prov = dom.provider();
  if (!dom.max_ep_stx_ctx()) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "fi_stx_context: this domain offers no shared transmit context");
    return to_fi(errc::nosys);
  }
  if (!out) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "fi_stx_context: null stx");
    return to_fi(errc::inval);
  }
  const fi_tx_attr& d = dom.tx_attr();
  fi_tx_attr a = d;
  if (attr) {
    bool ok = take_subset(prov, "caps", attr->caps, d.caps, a.caps) &&
              take_subset(prov, "msg_order", attr->msg_order, d.msg_order, a.msg_order) &&
              take_subset(prov, "comp_order", attr->comp_order, d.comp_order, a.comp_order) &&
              take_at_most(prov, "inject_size", attr->inject_size, d.inject_size, a.inject_size) &&
              take_at_most(prov, "size", attr->size, d.size, a.size) &&
              take_at_most(prov, "iov_limit", attr->iov_limit, d.iov_limit, a.iov_limit) &&
              take_at_most(prov, "rma_iov_limit", attr->rma_iov_limit, d.rma_iov_limit,
                           a.rma_iov_limit);
    if (!ok) return to_fi(errc::inval);
    // The transmit operations are posted on the endpoints, with theirs.
    a.op_flags = attr->op_flags;
    a.mode = attr->mode;
    a.tclass = attr->tclass;
  }
  return abi_guard([&] {
    *out = new stx_ctx(dom, a, context);
    return 0;
  });
}

stx_ctx::stx_ctx(domain& dom, const fi_tx_attr& attr, void* context)
    : fid_object(FI_CLASS_STX_CTX, context),
      domain_(&dom),
      attr_(attr),
      max_bound_(dom.max_ep_stx_ctx()) {
  ops = const_cast<fi_ops_ep*>(&stx_ops);
}

bool stx_ctx::is(const struct fid* f) noexcept {
  return is_class(f, FI_CLASS_STX_CTX) && f->ops == &fid_thunks<stx_ctx, fid_stx>::table;
}

int stx_ctx::close() {
  return close_if_unused(domain_->provider(), FI_LOG_DOMAIN, "shared transmit context");
}

bool stx_ctx::admit(const fi_provider* prov) const noexcept {
  // Every bound endpoint holds one reference (and nothing else does).
  if (static_cast<size_t>(refs()) < max_bound_) return true;
  WEFT_WARN(prov, FI_LOG_EP_CTRL,
            "fi_ep_bind: the shared transmit context already has %zu endpoints (max_ep_stx_ctx)",
            max_bound_);
  return false;
}

}  // namespace weft::util
