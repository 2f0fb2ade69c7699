// SPDX-License-Identifier: MIT
// weft — the scalable endpoint (sep.hpp).
#include "util/sep.hpp"

#include "core/log.hpp"

#include <rdma/fi_cm.h>

namespace weft::util {

namespace {

// Capabilities that only a receiver, or only a transmitter, uses. A context
// keeps its direction's (fi_endpoint(3): "conceptually a transmit context
// behaves similar to a send-only endpoint").
constexpr uint64_t rx_only = FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_DIRECTED_RECV |
                             FI_MULTI_RECV | FI_SOURCE | FI_SOURCE_ERR | FI_RMA_EVENT;
constexpr uint64_t tx_only = FI_SEND | FI_READ | FI_WRITE | FI_NAMED_RX_CTX | FI_TRIGGER | FI_FENCE;
constexpr uint64_t dirs = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

uint64_t narrow(uint64_t caps, bool tx) noexcept {
  // A set without direction bits means every direction (fi_getinfo(3)).
  if (!(caps & dirs)) caps |= dirs;
  caps &= tx ? ~rx_only : ~tx_only;
  return caps;
}

int cm_getname(fid_t f, void* addr, size_t* addrlen) noexcept {
  return scalable_ep::from(f)->getname(addr, addrlen);
}

const fi_ops_cm sep_cm = cm_name_only(cm_getname);

// One asked attribute against the endpoint's: 0 takes the endpoint's value;
// more than it is refused (logged by the caller's name).
bool at_most(const fi_provider* prov, const char* call, const char* name, size_t asked,
             size_t offered, size_t& out) noexcept {
  if (asked > offered) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "%s: attr->%s %zu is more than the endpoint's %zu", call, name,
              asked, offered);
    return false;
  }
  out = asked ? asked : offered;
  return true;
}

bool subset(const fi_provider* prov, const char* call, const char* name, uint64_t asked,
            uint64_t offered, uint64_t& out) noexcept {
  if (asked & ~offered) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "%s: attr->%s asks 0x%llx, which the endpoint does not have",
              call, name, static_cast<unsigned long long>(asked & ~offered));
    return false;
  }
  out = asked ? asked : offered;
  return true;
}

}  // namespace

sep_slot::sep_slot(scalable_ep& sep, bool tx, int index) noexcept
    : sep_(&sep), tx_(tx), index_(index) {}

sep_slot::~sep_slot() { sep_->vacate(tx_, index_); }

int sep_slot::adopt_if_undriven(size_t fclass, bool auto_progress, const ep_bindings& b,
                                progress_hook h, bool& adopted) noexcept {
  if (fclass != FI_CLASS_RX_CTX || auto_progress || b.rx_cq || b.recv_cntr || b.rem_read_cntr ||
      b.rem_write_cntr)
    return 0;
  try {
    sep_->adopt(h);
  } catch (const std::bad_alloc&) {
    return to_fi(errc::nomem);
  }
  adopted = true;
  return 0;
}

int refuse_several_contexts(const fi_provider* prov, const fi_info& info) noexcept {
  if (!info.ep_attr) return 0;
  for (size_t n : {info.ep_attr->tx_ctx_cnt, info.ep_attr->rx_ctx_cnt})
    if (n > 1 && n != FI_SHARED_CONTEXT) {
      WEFT_WARN(prov, FI_LOG_EP_CTRL,
                "fi_endpoint: %zu contexts asked (ep_attr tx_ctx_cnt / rx_ctx_cnt): an endpoint "
                "has one; several are opened with fi_scalable_ep",
                n);
      return to_fi(errc::inval);
    }
  return 0;
}

bool sep_slot::admits_av(const struct fid* ctx) const noexcept {
  if (sep_->binding_.load(std::memory_order_acquire) == ctx) return true;
  WEFT_WARN(sep_->domain_->provider(), FI_LOG_EP_CTRL,
            "fi_ep_bind: a %s context takes its address vector from its scalable endpoint "
            "(fi_scalable_ep_bind)",
            tx_ ? "transmit" : "receive");
  return false;
}

int scalable_ep::bind_av_to(fid_ep* ctx, struct fid* av_fid) noexcept {
  binding_.store(&ctx->fid, std::memory_order_release);
  int ret = fi_ep_bind(ctx, av_fid, 0);
  binding_.store(nullptr, std::memory_order_release);
  return ret;
}

bool scalable_ep::is(const struct fid* f) noexcept {
  return f && f->fclass == FI_CLASS_SEP &&
         f->ops == &fid_thunks<scalable_ep, fid_ep>::table;
}

int scalable_ep::counts(const fi_provider* prov, const fi_info& info, size_t max_tx,
                        size_t max_rx, size_t& ntx, size_t& nrx) noexcept {
  ntx = info.ep_attr ? info.ep_attr->tx_ctx_cnt : 0;
  nrx = info.ep_attr ? info.ep_attr->rx_ctx_cnt : 0;
  if (ntx == FI_SHARED_CONTEXT || nrx == FI_SHARED_CONTEXT) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL,
              "fi_scalable_ep: FI_SHARED_CONTEXT as a context count is not offered with "
              "scalable endpoints");
    return to_fi(errc::inval);
  }
  // Not specified (0): one context (fi_endpoint(3), tx_ctx_cnt / rx_ctx_cnt).
  if (!ntx) ntx = 1;
  if (!nrx) nrx = 1;
  if (ntx > max_tx || nrx > max_rx) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL,
              "fi_scalable_ep: %zu transmit and %zu receive contexts asked, the domain offers at "
              "most %zu and %zu (max_ep_tx_ctx, max_ep_rx_ctx)",
              ntx, nrx, max_tx, max_rx);
    return to_fi(errc::inval);
  }
  return 0;
}

int scalable_ep::open(domain& dom, const fi_info& info, size_t max_tx, size_t max_rx,
                      const sep_hooks* hooks, uint64_t cookie, fid_ep** out,
                      void* context) noexcept {
  if (!out) return to_fi(errc::inval);
  size_t ntx, nrx;
  if (int ret = counts(dom.provider(), info, max_tx, max_rx, ntx, nrx)) return ret;
  return abi_guard([&]() -> int {
    fi_info* copy = fi_dupinfo(&info);
    if (!copy) return to_fi(errc::nomem);
    *out = new scalable_ep(dom, hooks, cookie, copy, ntx, nrx, context);
    WEFT_INFO(dom.provider(), FI_LOG_EP_CTRL,
              "fi_scalable_ep: %zu transmit and %zu receive contexts", ntx, nrx);
    return 0;
  });
}

scalable_ep::scalable_ep(domain& dom, const sep_hooks* hooks, uint64_t cookie, fi_info* info,
                         size_t ntx, size_t nrx, void* context)
    : endpoint_object(FI_CLASS_SEP, context),
      domain_(&dom),
      hooks_(hooks),
      cookie_(cookie),
      info_(info, fi_freeinfo),
      ntx_(ntx),
      nrx_(nrx),
      tx_(ntx, nullptr),
      rx_(nrx, nullptr) {
  cm = const_cast<fi_ops_cm*>(&sep_cm);
}

scalable_ep::~scalable_ep() {
  if (hooks_->release) hooks_->release(cookie_);
}

int scalable_ep::close() {
  return close_if_unused(domain_->provider(), FI_LOG_EP_CTRL,
                         "scalable endpoint (a transmit or receive context is open)");
}

int scalable_ep::bind(struct fid* bfid, uint64_t flags) {
  const fi_provider* prov = domain_->provider();
  if (!bfid || bfid->fclass != FI_CLASS_AV) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL,
              "fi_scalable_ep_bind: a scalable endpoint binds an address vector only (class "
              "%zu given); its contexts bind their CQs and counters",
              bfid ? bfid->fclass : size_t{0});
    return to_fi(errc::inval);
  }
  if (flags) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_scalable_ep_bind: flags 0x%llx with an AV",
              static_cast<unsigned long long>(flags));
    return to_fi(errc::badflags);
  }
  av* a = av::from(bfid);
  if (&a->dom() != domain_.get()) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_scalable_ep_bind: the AV belongs to another domain");
    return to_fi(errc::inval);
  }
  std::lock_guard<std::mutex> g(mutex_);
  if (av_) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_scalable_ep_bind: an AV is already bound");
    return to_fi(errc::inval);
  }
  // Implicitly bound to the contexts already open (fi_endpoint(3)).
  for (auto* slots : {&tx_, &rx_})
    for (fid_ep* c : *slots)
      if (c && c != opening())
        if (int ret = bind_av_to(c, bfid)) return ret;  // logged by the context
  av_.reset(a);
  return 0;
}

int scalable_ep::control(int command, void*) {
  if (command != FI_ENABLE) return to_fi(errc::nosys);
  std::lock_guard<std::mutex> g(mutex_);
  if (!av_) {
    WEFT_WARN(domain_->provider(), FI_LOG_EP_CTRL,
              "fi_enable: a scalable endpoint needs an address vector (fi_scalable_ep_bind)");
    return to_fi(errc::noav);
  }
  enabled_ = true;
  return 0;
}

bool scalable_ep::check_index(const char* call, int index, size_t count) const noexcept {
  if (index < 0 || static_cast<size_t>(index) >= count) {
    WEFT_WARN(domain_->provider(), FI_LOG_EP_CTRL,
              "%s: index %d is outside the endpoint's %zu contexts", call, index, count);
    return false;
  }
  return true;
}

int scalable_ep::tx_ctx(int index, fi_tx_attr* attr, fid_ep** out, void* context) {
  constexpr const char* call = "fi_tx_context";
  const fi_provider* prov = domain_->provider();
  if (!out || !check_index(call, index, ntx_)) return to_fi(errc::inval);
  return abi_guard([&]() -> int {
    std::unique_ptr<fi_info, void (*)(fi_info*)> ci(fi_dupinfo(info_.get()), fi_freeinfo);
    if (!ci) return to_fi(errc::nomem);
    fi_tx_attr& t = *ci->tx_attr;
    uint64_t caps = ci->caps;
    if (attr) {
      bool ok = subset(prov, call, "caps", attr->caps, t.caps ? t.caps : caps, t.caps) &&
                subset(prov, call, "msg_order", attr->msg_order, t.msg_order, t.msg_order) &&
                subset(prov, call, "comp_order", attr->comp_order, t.comp_order, t.comp_order) &&
                at_most(prov, call, "inject_size", attr->inject_size, t.inject_size,
                        t.inject_size) &&
                at_most(prov, call, "size", attr->size, t.size, t.size) &&
                at_most(prov, call, "iov_limit", attr->iov_limit, t.iov_limit, t.iov_limit) &&
                at_most(prov, call, "rma_iov_limit", attr->rma_iov_limit, t.rma_iov_limit,
                        t.rma_iov_limit);
      if (!ok) return to_fi(errc::inval);
      if (attr->caps) caps = attr->caps;
    }
    ci->caps = narrow(caps, true);
    // One context each: the counts are the scalable endpoint's business.
    ci->ep_attr->tx_ctx_cnt = 1;
    ci->ep_attr->rx_ctx_cnt = 0;
    t.caps = narrow(t.caps ? t.caps : ci->caps, true);
    if (int ret = open_context(true, index, *ci, out, context)) return ret;
    // The attributes the context has (fi_endpoint(3)).
    if (attr) *attr = t;
    return 0;
  });
}

int scalable_ep::rx_ctx(int index, fi_rx_attr* attr, fid_ep** out, void* context) {
  constexpr const char* call = "fi_rx_context";
  const fi_provider* prov = domain_->provider();
  if (!out || !check_index(call, index, nrx_)) return to_fi(errc::inval);
  return abi_guard([&]() -> int {
    std::unique_ptr<fi_info, void (*)(fi_info*)> ci(fi_dupinfo(info_.get()), fi_freeinfo);
    if (!ci) return to_fi(errc::nomem);
    fi_rx_attr& r = *ci->rx_attr;
    uint64_t caps = ci->caps;
    if (attr) {
      bool ok = subset(prov, call, "caps", attr->caps, r.caps ? r.caps : caps, r.caps) &&
                subset(prov, call, "msg_order", attr->msg_order, r.msg_order, r.msg_order) &&
                subset(prov, call, "comp_order", attr->comp_order, r.comp_order, r.comp_order) &&
                at_most(prov, call, "total_buffered_recv", attr->total_buffered_recv,
                        r.total_buffered_recv, r.total_buffered_recv) &&
                at_most(prov, call, "size", attr->size, r.size, r.size) &&
                at_most(prov, call, "iov_limit", attr->iov_limit, r.iov_limit, r.iov_limit);
      if (!ok) return to_fi(errc::inval);
      if (attr->caps) caps = attr->caps;
    }
    ci->caps = narrow(caps, false);
    ci->ep_attr->tx_ctx_cnt = 0;
    ci->ep_attr->rx_ctx_cnt = 1;
    r.caps = narrow(r.caps ? r.caps : ci->caps, false);
    if (int ret = open_context(false, index, *ci, out, context)) return ret;
    if (attr) *attr = r;
    return 0;
  });
}

int scalable_ep::open_context(bool tx, int index, const fi_info& info, fid_ep** out,
                              void* context) {
  const fi_provider* prov = domain_->provider();
  std::vector<fid_ep*>& slots = tx ? tx_ : rx_;
  const auto i = static_cast<size_t>(index);
  {
    std::lock_guard<std::mutex> g(mutex_);
    if (slots[i]) {
      WEFT_WARN(prov, FI_LOG_EP_CTRL, "%s: context %d is already open",
                tx ? "fi_tx_context" : "fi_rx_context", index);
      return to_fi(errc::busy);
    }
    slots[i] = opening();  // taken; bind() skips it
  }
  // Not under the lock: a context that fails to open frees its slot
  // (~sep_slot takes the lock).
  fid_ep* ctx = nullptr;
  int ret = hooks_->open_ctx(*this, tx, index, info, std::make_unique<sep_slot>(*this, tx, index),
                             &ctx, context);
  if (ret) return ret;
  {
    std::lock_guard<std::mutex> g(mutex_);
    slots[i] = ctx;
    // Implicitly bound to the AV bound before (fi_endpoint(3)).
    if (av_) ret = bind_av_to(ctx, &av_->fid);
  }
  if (ret) {
    fi_close(&ctx->fid);  // frees the slot
    return ret;
  }
  *out = ctx;
  return 0;
}

void scalable_ep::adopt(progress_hook h) {
  std::lock_guard<std::mutex> g(orphan_mutex_);
  orphan_hooks_.push_back(h);
  orphans_.store(static_cast<uint32_t>(orphan_hooks_.size()), std::memory_order_release);
}

void scalable_ep::disown(void* obj) noexcept {
  std::lock_guard<std::mutex> g(orphan_mutex_);
  std::erase_if(orphan_hooks_, [obj](const progress_hook& h) { return h.obj == obj; });
  orphans_.store(static_cast<uint32_t>(orphan_hooks_.size()), std::memory_order_release);
}

void scalable_ep::run_orphans() noexcept {
  // Another transmit context running them now is as good as this one.
  std::unique_lock<std::mutex> g(orphan_mutex_, std::try_to_lock);
  if (!g) return;
  for (const progress_hook& h : orphan_hooks_) h.fn(h.obj);
}

void scalable_ep::vacate(bool tx, int index) noexcept {
  std::lock_guard<std::mutex> g(mutex_);
  (tx ? tx_ : rx_)[static_cast<size_t>(index)] = nullptr;
}

}  // namespace weft::util
