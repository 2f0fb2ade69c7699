// SPDX-License-Identifier: MIT
// weft — the one hints validator.
//
// fi_getinfo(3): a non-zero hint must be supported or the provider does not
// match; zeroed hints are wildcards, except mode bits, where zero means the
// application supports no mode. Sizes and limits in hints are lower bounds.
#include "util/info_match.hpp"

#include "core/info.hpp"
#include "core/log.hpp"
#include "util/object.hpp"

#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <cstdio>
#include <cstring>
#include <memory>

namespace weft::util {

namespace {

struct matcher {
  const fi_provider* prov;
  bool ok = true;

  // Logs why a template was passed over; FI_LOG_INFO, since not matching is
  // an answer, not an error.
  template <class... A>
  bool fail(const char* fmt, A... args) {
    WEFT_INFO(prov, FI_LOG_CORE, fmt, args...);
    ok = false;
    return false;
  }
  bool subset(uint64_t want, uint64_t have, const char* what) {
    if (want & ~have)
      return fail("%s 0x%llx not offered (offers 0x%llx)", what,
                  static_cast<unsigned long long>(want), static_cast<unsigned long long>(have));
    return true;
  }
  bool at_most(uint64_t want, uint64_t have, const char* what) {
    if (want > have)
      return fail("%s %llu exceeds the limit %llu", what, static_cast<unsigned long long>(want),
                  static_cast<unsigned long long>(have));
    return true;
  }
  // The provider needs these mode bits; the application must support them.
  bool modes(uint64_t required, uint64_t supported, const char* what) {
    if (required & ~supported)
      return fail("%s: provider needs mode 0x%llx", what,
                  static_cast<unsigned long long>(required & ~supported));
    return true;
  }
  bool same_or_unspec(int want, int have, const char* what) {
    if (want && want != have) return fail("%s %d not offered (%d)", what, want, have);
    return true;
  }
  // An enumerated hint read as an int (C callers may store anything there):
  // false, logged, when it is not one of the values 0..last.
  bool in_range(int v, int last, const char* what) {
    if (v < 0 || v > last) return fail("%s %d is not a valid value", what, v);
    return true;
  }
};

// A template without a name (the provider checks names itself) matches any.
bool names_match(const char* want, const char* have) {
  return !want || !have || std::strcmp(want, have) == 0;
}

// Result caps: the primary capabilities asked for (all when none are), the
// modifiers asked for (all relevant ones when none are), the secondary
// capabilities asked for, plus the free ones.
uint64_t result_caps(uint64_t want, uint64_t have) {
  if (!want) return have;
  uint64_t prim = want & primary_caps;
  if (!prim) prim = have & primary_caps;
  uint64_t mods = want & primary_modifiers;
  if (!mods) mods = have & primary_modifiers;
  uint64_t sec = (want & secondary_caps) | (have & free_secondary_caps);
  uint64_t other = want & ~(primary_caps | primary_modifiers | secondary_caps);
  return prim | mods | sec | other;
}

// What transmit and receive attributes share: capabilities, the modes the
// provider needs (checked against the application's when it states any here;
// otherwise fi_info.mode, checked once, speaks for them), orders, queue size
// and iov limit. Results take the application's values where it gave some.
template <class A>
void match_queue(matcher& m, const A& t, const A* h, uint64_t caps, A& out, const char* dir) {
  out = t;
  out.caps = t.caps & (caps | primary_modifiers);
  if (!h) return;
  char what[32];
  std::snprintf(what, sizeof what, "%s caps", dir);
  m.subset(h->caps, t.caps, what);
  std::snprintf(what, sizeof what, "%s mode", dir);
  if (h->mode) m.modes(t.mode, h->mode, what);
  std::snprintf(what, sizeof what, "%s msg_order", dir);
  m.subset(h->msg_order, t.msg_order, what);
  std::snprintf(what, sizeof what, "%s comp_order", dir);
  m.subset(h->comp_order, t.comp_order, what);
  std::snprintf(what, sizeof what, "%s size", dir);
  m.at_most(h->size, t.size, what);
  std::snprintf(what, sizeof what, "%s iov_limit", dir);
  m.at_most(h->iov_limit, t.iov_limit, what);
  if (h->caps) out.caps = result_caps(h->caps, t.caps) & t.caps;
  out.op_flags = h->op_flags;
  if (h->msg_order) out.msg_order = h->msg_order;
  if (h->comp_order) out.comp_order = h->comp_order;
  if (h->size) out.size = h->size;
  if (h->iov_limit) out.iov_limit = h->iov_limit;
}

void match_tx(matcher& m, const fi_tx_attr& t, const fi_tx_attr* h, uint64_t caps,
              fi_tx_attr& out) {
  match_queue(m, t, h, caps, out, "tx");
  if (!h) return;
  m.at_most(h->inject_size, t.inject_size, "inject_size");
  m.at_most(h->rma_iov_limit, t.rma_iov_limit, "rma_iov_limit");
  out.tclass = h->tclass;
}

void match_rx(matcher& m, const fi_rx_attr& t, const fi_rx_attr* h, uint64_t caps,
              fi_rx_attr& out) {
  match_queue(m, t, h, caps, out, "rx");
  if (!h) return;
  m.at_most(h->total_buffered_recv, t.total_buffered_recv, "total_buffered_recv");
}

void match_ep(matcher& m, const fi_ep_attr& t, const fi_ep_attr* h, fi_ep_attr& out) {
  out = t;
  out.auth_key = nullptr;
  out.auth_key_size = 0;
  if (!h) return;
  if (m.in_range(raw_enum(h->type), FI_EP_SOCK_DGRAM, "endpoint type"))
    m.same_or_unspec(raw_enum(h->type), t.type, "endpoint type");
  m.same_or_unspec(static_cast<int>(h->protocol), static_cast<int>(t.protocol), "protocol");
  if (h->protocol_version && h->protocol_version > t.protocol_version)
    m.fail("protocol version %u not offered", h->protocol_version);
  m.at_most(h->max_msg_size, t.max_msg_size, "max_msg_size");
  m.at_most(h->max_order_raw_size, t.max_order_raw_size, "max_order_raw_size");
  m.at_most(h->max_order_war_size, t.max_order_war_size, "max_order_war_size");
  m.at_most(h->max_order_waw_size, t.max_order_waw_size, "max_order_waw_size");
  if (h->tx_ctx_cnt != FI_SHARED_CONTEXT) m.at_most(h->tx_ctx_cnt, t.tx_ctx_cnt, "tx_ctx_cnt");
  else m.fail("shared transmit contexts are not offered");
  if (h->rx_ctx_cnt != FI_SHARED_CONTEXT) m.at_most(h->rx_ctx_cnt, t.rx_ctx_cnt, "rx_ctx_cnt");
  else m.fail("shared receive contexts are not offered");
  if (h->auth_key_size || h->auth_key) m.fail("authorization keys are not offered");
  if (h->mem_tag_format) out.mem_tag_format = h->mem_tag_format;
}

void match_domain(matcher& m, uint32_t version, const fi_domain_attr& t, const fi_domain_attr* h,
                  fi_domain_attr& out, uint32_t options) {
  out = t;
  out.name = nullptr;
  out.auth_key = nullptr;
  out.auth_key_size = 0;
  out.domain = nullptr;
  if (!h) return;
  if (!names_match(h->name, t.name)) m.fail("domain %s not offered", h->name);
  int threading = raw_enum(h->threading), cprog = raw_enum(h->control_progress),
      dprog = raw_enum(h->data_progress), rm = raw_enum(h->resource_mgmt),
      av = raw_enum(h->av_type);
  if (!m.in_range(threading, FI_THREAD_ENDPOINT, "threading") ||
      !m.in_range(cprog, FI_PROGRESS_CONTROL_UNIFIED, "control progress") ||
      !m.in_range(dprog, FI_PROGRESS_MANUAL, "data progress") ||
      !m.in_range(rm, FI_RM_ENABLED, "resource management") ||
      !m.in_range(av, FI_AV_TABLE, "av_type"))
    return;
  // Every threading model is served (the lock policy follows it).
  if (threading) out.threading = h->threading;
  auto progress = [&](int want_raw, fi_progress have, fi_progress& res, const char* what) {
    if (!want_raw) return;
    auto want = static_cast<fi_progress>(want_raw);
    if ((options & match_any_progress) && (want == FI_PROGRESS_AUTO || want == FI_PROGRESS_MANUAL)) {
      res = want;
      return;
    }
    // An automatic-progress provider also serves manual-progress callers.
    if (want != have && !(have == FI_PROGRESS_AUTO && want == FI_PROGRESS_MANUAL))
      m.fail("%s %d not offered", what, int(want));
    else res = want;
  };
  // FI_PROGRESS_CONTROL_UNIFIED (2.x) asks that control operations progress
  // with data operations: what a provider without control operations does.
  if (cprog == FI_PROGRESS_CONTROL_UNIFIED) cprog = 0;
  progress(cprog, t.control_progress, out.control_progress, "control progress");
  progress(dprog, t.data_progress, out.data_progress, "data progress");
  if (rm) out.resource_mgmt = h->resource_mgmt;
  if (av) {
    if (t.av_type && av != t.av_type) m.fail("av_type %d not offered", av);
    out.av_type = h->av_type;
  }
  // Memory registration: the provider's requirements must be ones the
  // application accepts. (Callers older than API 1.5 were translated by core.)
  (void)version;
  m.modes(static_cast<uint64_t>(t.mr_mode), static_cast<uint64_t>(h->mr_mode), "mr_mode");
  m.at_most(h->mr_key_size, t.mr_key_size, "mr_key_size");
  m.at_most(h->cq_data_size, t.cq_data_size, "cq_data_size");
  m.at_most(h->cq_cnt, t.cq_cnt, "cq_cnt");
  m.at_most(h->ep_cnt, t.ep_cnt, "ep_cnt");
  m.at_most(h->tx_ctx_cnt, t.tx_ctx_cnt, "domain tx_ctx_cnt");
  m.at_most(h->rx_ctx_cnt, t.rx_ctx_cnt, "domain rx_ctx_cnt");
  m.at_most(h->max_ep_tx_ctx, t.max_ep_tx_ctx, "max_ep_tx_ctx");
  m.at_most(h->max_ep_rx_ctx, t.max_ep_rx_ctx, "max_ep_rx_ctx");
  m.at_most(h->max_ep_stx_ctx, t.max_ep_stx_ctx, "max_ep_stx_ctx");
  m.at_most(h->max_ep_srx_ctx, t.max_ep_srx_ctx, "max_ep_srx_ctx");
  m.at_most(h->cntr_cnt, t.cntr_cnt, "cntr_cnt");
  m.at_most(h->mr_iov_limit, t.mr_iov_limit, "mr_iov_limit");
  m.subset(h->caps, t.caps, "domain caps");
  m.modes(t.mode, h->mode, "domain mode");
  if (h->auth_key_size || h->auth_key) m.fail("authorization keys are not offered");
  m.at_most(h->max_err_data, t.max_err_data, "max_err_data");
  m.at_most(h->mr_cnt, t.mr_cnt, "mr_cnt");
  if (h->caps) out.caps = h->caps | (t.caps & free_secondary_caps);
  out.tclass = h->tclass;
}

}  // namespace

fi_info* match_info(const fi_provider* prov, uint32_t version, const fi_info& tmpl,
                    const fi_info* hints, bool* nomem, uint32_t options) noexcept {
  *nomem = false;
  matcher m{prov};
  std::unique_ptr<fi_info, void (*)(fi_info*)> out{core::dup_info(&tmpl, core::abi_current),
                                                   core::free_info};
  if (!out) {
    *nomem = true;
    return nullptr;
  }
  fi_info& o = *out;
  uint64_t caps = hints ? result_caps(hints->caps, tmpl.caps) : tmpl.caps;
  if (hints) {
    m.subset(hints->caps, tmpl.caps, "caps");
    m.modes(tmpl.mode, hints->mode, "mode");
    if (hints->addr_format && tmpl.addr_format && hints->addr_format != tmpl.addr_format &&
        !(hints->addr_format == FI_SOCKADDR &&
          (tmpl.addr_format == FI_SOCKADDR_IN || tmpl.addr_format == FI_SOCKADDR_IN6)))
      m.fail("address format %u not offered", hints->addr_format);
    if (hints->fabric_attr && !names_match(hints->fabric_attr->name, tmpl.fabric_attr->name))
      m.fail("fabric %s not offered", hints->fabric_attr->name);
    if (hints->handle) o.handle = hints->handle;
  }
  o.caps = caps & tmpl.caps;
  char* dom_name = o.domain_attr->name;  // the copy's own strings survive
  match_tx(m, *tmpl.tx_attr, hints ? hints->tx_attr : nullptr, o.caps, *o.tx_attr);
  match_rx(m, *tmpl.rx_attr, hints ? hints->rx_attr : nullptr, o.caps, *o.rx_attr);
  uint8_t* ep_key = o.ep_attr->auth_key;
  match_ep(m, *tmpl.ep_attr, hints ? hints->ep_attr : nullptr, *o.ep_attr);
  o.ep_attr->auth_key = ep_key;
  uint8_t* dom_key = o.domain_attr->auth_key;
  match_domain(m, version, *tmpl.domain_attr, hints ? hints->domain_attr : nullptr,
               *o.domain_attr, options);
  o.domain_attr->name = dom_name;
  o.domain_attr->auth_key = dom_key;
  if (!m.ok) return nullptr;
  return out.release();
}

bool info_fits(const fi_provider* prov, uint32_t version, const fi_info& tmpl,
               const fi_info& wanted, uint32_t options) noexcept {
  bool nomem = false;
  fi_info* r = match_info(prov, version, tmpl, &wanted, &nomem, options);
  core::free_info(r);
  return r != nullptr;
}

}  // namespace weft::util
