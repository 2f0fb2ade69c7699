// SPDX-License-Identifier: MIT
// weft — the domain object every provider uses.
#include "util/domain.hpp"

#include "core/log.hpp"
#include "util/av.hpp"
#include "util/cntr.hpp"
#include "util/cq.hpp"
#include "util/eq.hpp"
#include "util/stx_ctx.hpp"
#include "util/wait_set.hpp"

#include <sys/uio.h>

namespace weft::util {

namespace {

domain* self(fid_domain* d) noexcept { return domain::from(d); }

int av_open(fid_domain* d, fi_av_attr* attr, fid_av** out, void* context) noexcept {
  return av::open(*self(d), attr, out, context);
}
int cq_open(fid_domain* d, fi_cq_attr* attr, fid_cq** out, void* context) noexcept {
  return cq::open(*self(d), attr, out, context);
}
int endpoint(fid_domain* d, fi_info* info, fid_ep** ep, void* context) noexcept {
  if (!info || !ep) return to_fi(errc::inval);
  return abi_guard([&] { return self(d)->hooks().endpoint(*self(d), info, ep, context); });
}
int endpoint2(fid_domain* d, fi_info* info, fid_ep** ep, uint64_t flags, void* context) noexcept {
  if (flags) return to_fi(errc::badflags);
  return endpoint(d, info, ep, context);
}
int scalable_ep(fid_domain* d, fi_info* info, fid_ep** sep, void* context) noexcept {
  domain& dom = *self(d);
  if (!dom.offers_contexts()) {
    // Such a provider (or endpoint type) answers max_ep_tx_ctx = max_ep_rx_ctx = 1.
    WEFT_WARN(dom.provider(), FI_LOG_DOMAIN,
              "fi_scalable_ep: scalable endpoints are not offered (max_ep_tx_ctx 1)");
    return to_fi(errc::nosys);
  }
  if (!info || !sep) return to_fi(errc::inval);
  return abi_guard([&] { return dom.hooks().scalable_ep(dom, info, sep, context); });
}
int cntr_open(fid_domain* d, fi_cntr_attr* attr, fid_cntr** out, void* context) noexcept {
  return cntr::open(*self(d), attr, out, context);
}
int poll_open(fid_domain* d, fi_poll_attr* attr, fid_poll** out) noexcept {
  return poll_set::open(*self(d), attr, out);
}
int stx_open(fid_domain* d, fi_tx_attr* attr, fid_stx** stx, void* context) noexcept {
  return stx_ctx::open(*self(d), attr, stx, context);
}
int srx_ctx(fid_domain* d, fi_rx_attr* attr, fid_ep** rx, void* context) noexcept {
  auto* dom = self(d);
  const bool peer = attr && (attr->op_flags & FI_PEER);
  if (!dom->hooks().srx_ctx || (!peer && !dom->max_ep_srx_ctx())) {
    WEFT_WARN(dom->provider(), FI_LOG_DOMAIN,
              "fi_srx_context: this %s offers no shared receive context",
              dom->hooks().srx_ctx ? "domain (max_ep_srx_ctx 0)" : "provider");
    return to_fi(errc::nosys);
  }
  if (!attr || !rx) {
    WEFT_WARN(dom->provider(), FI_LOG_DOMAIN, "fi_srx_context: null %s", !rx ? "rx_ep" : "attr");
    return to_fi(errc::inval);
  }
  return abi_guard([&] { return dom->hooks().srx_ctx(*dom, attr, rx, context); });
}
int query_atomic(fid_domain* d, fi_datatype datatype, fi_op op, fi_atomic_attr* attr,
                 uint64_t flags) noexcept {
  auto* dom = self(d);
  if (!dom->hooks().query_atomic) return to_fi(errc::nosys);
  if (!attr) return to_fi(errc::inval);
  return abi_guard([&] {
    return dom->hooks().query_atomic(*dom, raw_enum(datatype), raw_enum(op), attr, flags);
  });
}
int query_collective(fid_domain*, fi_collective_op, fi_collective_attr*, uint64_t) noexcept {
  return to_fi(errc::nosys);
}

constexpr fi_ops_domain domain_ops = {
    .size = sizeof(fi_ops_domain),
    .av_open = av_open,
    .cq_open = cq_open,
    .endpoint = endpoint,
    .scalable_ep = scalable_ep,
    .cntr_open = cntr_open,
    .poll_open = poll_open,
    .stx_ctx = stx_open,
    .srx_ctx = srx_ctx,
    .query_atomic = query_atomic,
    .query_collective = query_collective,
    .endpoint2 = endpoint2,
};

// Memory registration: every form funnels into mr::reg with an fi_mr_attr.
domain* mr_domain(fid* f) noexcept {
  return is_class(f, FI_CLASS_DOMAIN) ? domain::from(f) : nullptr;
}

// mr::reg, then the provider's part (domain_hooks::mr_attach).
int reg(domain& dom, const fi_mr_attr& a, uint64_t flags, fid_mr** out) noexcept {
  int ret = mr::reg(dom, a, flags, out);
  auto attach = dom.mr_attach_hook();
  if (ret || !attach) return ret;
  ret = attach(dom, *mr::from(*out), a, flags);
  if (ret) {
    fi_close(&(*out)->fid);
    *out = nullptr;
  }
  return ret;
}

int mr_regattr(fid* f, const fi_mr_attr* attr, uint64_t flags, fid_mr** out) noexcept {
  domain* dom = mr_domain(f);
  if (!dom || !attr || !out) return to_fi(errc::inval);
  // Older callers' fi_mr_attr ends at `device` (80 bytes before API 1.20):
  // read no further, into a zeroed full-size copy.
  fi_mr_attr a{};
  std::memcpy(&a, attr, offsetof(fi_mr_attr, iface));
  if (FI_VERSION_GE(dom->api_version(), FI_VERSION(1, 5))) {
    a.iface = attr->iface;
    a.device = attr->device;
  }
  int ret = reg(*dom, a, flags, out);
  if (ret == 0) dom->registered(*out, a.context);
  return ret;
}

int mr_regv(fid* f, const iovec* iov, size_t count, uint64_t access, uint64_t offset,
            uint64_t requested_key, uint64_t flags, fid_mr** out, void* context) noexcept {
  fi_mr_attr a{};
  a.mr_iov = iov;
  a.iov_count = count;
  a.access = access;
  a.offset = offset;
  a.requested_key = requested_key;
  a.context = context;
  domain* dom = mr_domain(f);
  if (!dom || !out) return to_fi(errc::inval);
  int ret = reg(*dom, a, flags, out);
  if (ret == 0) dom->registered(*out, context);
  return ret;
}

int mr_reg(fid* f, const void* buf, size_t len, uint64_t access, uint64_t offset,
           uint64_t requested_key, uint64_t flags, fid_mr** out, void* context) noexcept {
  iovec iov{const_cast<void*>(buf), len};
  return mr_regv(f, &iov, 1, access, offset, requested_key, flags, out, context);
}

constexpr fi_ops_mr mr_ops = {
    .size = sizeof(fi_ops_mr),
    .reg = mr_reg,
    .regv = mr_regv,
    .regattr = mr_regattr,
};

}  // namespace

int domain::open(fabric& fab, const domain_hooks* hooks, const fi_info& info, fid_domain** out,
                 void* context) noexcept {
  return abi_guard([&] {
    *out = new domain(fab, hooks, info, context);
    return 0;
  });
}

namespace {

lock_kind choose_locks(const domain_hooks* hooks, fi_threading t, fi_progress p,
                       const fi_provider* prov) noexcept {
  if (p != FI_PROGRESS_AUTO) return shared_objects_need_lock(t) ? lock_kind::mutex : lock_kind::none;
  if (t == FI_THREAD_DOMAIN && hooks && hooks->handoff && hooks->handoff() &&
      handoff::available(prov))
    return lock_kind::handoff;
  return lock_kind::mutex;
}

}  // namespace

domain::domain(fabric& fab, const domain_hooks* hooks, const fi_info& info, void* context)
    : fid_object(FI_CLASS_DOMAIN, context),
      fabric_(&fab),
      hooks_(hooks),
      threading_(info.domain_attr->threading),
      progress_(hooks && hooks->control_on_data_path && control_is_auto(info.domain_attr)
                    ? FI_PROGRESS_AUTO
                    : info.domain_attr->data_progress),
      locks_(choose_locks(hooks, threading_, progress_, fab.provider())),
      av_type_(info.domain_attr->av_type),
      mr_mode_(info.domain_attr->mr_mode),
      addr_format_(info.addr_format),
      caps_(info.caps),
      cq_data_size_(info.domain_attr->cq_data_size),
      max_ep_stx_ctx_(info.domain_attr->max_ep_stx_ctx),
      max_ep_srx_ctx_(info.domain_attr->max_ep_srx_ctx),
      max_ep_tx_ctx_(info.domain_attr->max_ep_tx_ctx),
      max_ep_rx_ctx_(info.domain_attr->max_ep_rx_ctx),
      name_(info.domain_attr->name ? info.domain_attr->name : ""),
      mrs_(threading_, progress_) {
  ops = const_cast<fi_ops_domain*>(&domain_ops);
  mr = const_cast<fi_ops_mr*>(&mr_ops);
  if (info.tx_attr) tx_attr_ = *info.tx_attr;
  else tx_attr_.caps = info.caps;
  // Counters advanced by the progress thread make work due that nothing else
  // would issue: the thread issues it after each pass, holding no lock.
  if (progress_ == FI_PROGRESS_AUTO)
    auto_progress().add_after(
        [](void* t) noexcept { static_cast<trigger_engine*>(t)->fire_if_ready(); }, &triggers_);
}

domain::~domain() {
  if (progress_ == FI_PROGRESS_AUTO) auto_progress().remove_after(&triggers_);
}

int domain::close() { return close_if_unused(provider(), FI_LOG_DOMAIN, "domain"); }

int domain::bind(struct fid* bfid, uint64_t flags) {
  if (!is_class(bfid, FI_CLASS_EQ)) {
    WEFT_WARN(provider(), FI_LOG_DOMAIN, "a domain binds only to an event queue");
    return to_fi(errc::inval);
  }
  // FI_REG_MR: registrations complete with an FI_MR_COMPLETE event on the EQ
  // (they are synchronous; the event follows at once).
  if (flags & ~static_cast<uint64_t>(FI_REG_MR)) return to_fi(errc::badflags);
  if (eq_) return to_fi(errc::already);
  eq_.reset(eq::from(bfid));
  mr_events_ = flags & FI_REG_MR;
  return 0;
}

int domain::control(int command, void* arg) {
  switch (command) {
    case FI_MAP_RAW_MR: return mr::map_raw(*this, static_cast<struct fi_mr_map_raw*>(arg));
    case FI_UNMAP_KEY: return mr::unmap_key(*this, static_cast<const uint64_t*>(arg));
    case FI_QUEUE_WORK: return triggers_.queue_work(static_cast<fi_deferred_work*>(arg));
    case FI_CANCEL_WORK: return triggers_.cancel_work(static_cast<fi_deferred_work*>(arg));
    case FI_FLUSH_WORK: return triggers_.flush_work(static_cast<fi_deferred_work*>(arg));
    default: return to_fi(errc::nosys);
  }
}

void domain::registered(fid_mr* m, void* context) noexcept {
  if (!mr_events_ || !eq_) return;
  fi_eq_entry e{};
  e.fid = &m->fid;
  e.context = context;
  // A full EQ loses the event but not the registration, which has succeeded.
  if (eq_->write_event(FI_MR_COMPLETE, &e, sizeof e, 0) != 0)
    WEFT_WARN(provider(), FI_LOG_MR, "EQ full: FI_MR_COMPLETE event dropped");
}

}  // namespace weft::util
