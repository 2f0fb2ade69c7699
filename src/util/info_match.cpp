// SPDX-License-Identifier: MIT
// weft — the one hints validator.
//
// fi_getinfo(3): a non-zero hint must be supported or the provider does not
// match; zeroed hints are wildcards, except mode bits, where zero means the
// application supports no mode. Sizes and limits in hints are lower bounds.
#include "util/info_match.hpp"

#include "core/info.hpp"
#include "core/log.hpp"
#include "core/refusal.hpp"
#include "core/tostr.hpp"
#include "util/mr.hpp"
#include "util/object.hpp"

#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>

namespace weft::util {

namespace {

using core::tostr::flag_set;

// Flag names for a log line ("FI_COLLECTIVE"), the value in hex where no
// name is known.
struct flag_text {
  char buf[160];
  flag_text(flag_set set, uint64_t v) {
    core::tostr::text_out out(buf, sizeof buf);
    core::tostr::put_flags(out, set, v);
    if (!out.size()) std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  }
};

struct matcher {
  const fi_provider* prov;
  bool ok = true;
  unsigned passed = 0;  // checks passed so far: how far this template came

  // Notes the first hint this template rejects (core/refusal.hpp); the core
  // logs one line per provider, since not matching is an answer, not an error.
  template <class... A>
  bool fail(const char* field, const char* fmt, A... args) {
    if (ok) {
      core::refuse(passed, field, fmt, args...);
      WEFT_DBG(prov, FI_LOG_CORE, "a template of %s passed over at %s", prov->name, field);
    }
    ok = false;
    return false;
  }
  bool pass() {
    ++passed;
    return true;
  }
  bool subset(uint64_t want, uint64_t have, const char* field, flag_set set) {
    if (want & ~have) return fail(field, "%s not offered", flag_text(set, want & ~have).buf);
    return pass();
  }
  bool at_most(uint64_t want, uint64_t have, const char* field) {
    if (want > have)
      return fail(field, "asked %llu, offers at most %llu", static_cast<unsigned long long>(want),
                  static_cast<unsigned long long>(have));
    return pass();
  }
  // The provider needs these mode bits; the application must support them.
  bool modes(uint64_t required, uint64_t supported, const char* field, flag_set set) {
    if (required & ~supported)
      return fail(field, "the provider needs %s, which the hints do not accept",
                  flag_text(set, required & ~supported).buf);
    return pass();
  }
  bool same_or_unspec(int want, int have, const char* field, core::tostr::enum_set set) {
    if (want && want != have)
      return fail(field, "asked %s, offers %s", core::tostr::enum_name(set, want),
                  core::tostr::enum_name(set, have));
    return pass();
  }
  // An enumerated hint read as an int (C callers may store anything there):
  // false, noted, when it is not one of the values 0..last.
  bool in_range(int v, int last, const char* field) {
    if (v < 0 || v > last) return fail(field, "%d is not a valid value", v);
    return pass();
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
  // Field names as C paths ("tx_attr->caps"): what a log reader looks for.
  char field[40];
  auto name = [&](const char* member) {
    std::snprintf(field, sizeof field, "%s_attr->%s", dir, member);
    return field;
  };
  m.subset(h->caps, t.caps, name("caps"), flag_set::caps);
  if (h->mode) m.modes(t.mode, h->mode, name("mode"), flag_set::mode);
  m.subset(h->msg_order, t.msg_order, name("msg_order"), flag_set::msg_order);
  m.subset(h->comp_order, t.comp_order, name("comp_order"), flag_set::msg_order);
  m.at_most(h->size, t.size, name("size"));
  m.at_most(h->iov_limit, t.iov_limit, name("iov_limit"));
  if (h->caps) out.caps = result_caps(h->caps, t.caps) & t.caps;
  // No provider implements fences (util/fence.hpp): not a default either.
  m.subset(h->op_flags & FI_FENCE, 0, name("op_flags"), flag_set::op_flags);
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
  m.at_most(h->inject_size, t.inject_size, "tx_attr->inject_size");
  m.at_most(h->rma_iov_limit, t.rma_iov_limit, "tx_attr->rma_iov_limit");
  out.tclass = h->tclass;
}

void match_rx(matcher& m, const fi_rx_attr& t, const fi_rx_attr* h, uint64_t caps,
              fi_rx_attr& out) {
  match_queue(m, t, h, caps, out, "rx");
  if (!h) return;
  m.at_most(h->total_buffered_recv, t.total_buffered_recv, "rx_attr->total_buffered_recv");
}

// What a template is: endpoint type, address format, fabric and domain
// names. Checked before anything else, so that of a provider's templates
// the one of the asked kind comes furthest and its refusal is the one told.
void match_identity(matcher& m, const fi_info& t, const fi_info& h) {
  using core::tostr::enum_set;
  if (h.ep_attr && m.in_range(raw_enum(h.ep_attr->type), FI_EP_SOCK_DGRAM, "ep_attr->type"))
    m.same_or_unspec(raw_enum(h.ep_attr->type), t.ep_attr->type, "ep_attr->type", enum_set::ep_type);
  if (h.addr_format && t.addr_format && h.addr_format != t.addr_format &&
      !(h.addr_format == FI_SOCKADDR &&
        (t.addr_format == FI_SOCKADDR_IN || t.addr_format == FI_SOCKADDR_IN6)))
    m.fail("addr_format", "asked %s, offers %s",
           core::tostr::enum_name(enum_set::addr_format, h.addr_format),
           core::tostr::enum_name(enum_set::addr_format, t.addr_format));
  else m.pass();
  if (h.fabric_attr && !names_match(h.fabric_attr->name, t.fabric_attr->name))
    m.fail("fabric_attr->name", "asked %s, offers %s", h.fabric_attr->name, t.fabric_attr->name);
  else m.pass();
  if (h.domain_attr && !names_match(h.domain_attr->name, t.domain_attr->name))
    m.fail("domain_attr->name", "asked %s, offers %s", h.domain_attr->name, t.domain_attr->name);
  else m.pass();
}

// `stx_offered` / `srx_offered`: the provider's domain shares transmit /
// receive contexts (max_ep_stx_ctx / max_ep_srx_ctx > 0), so tx_ctx_cnt /
// rx_ctx_cnt = FI_SHARED_CONTEXT may be asked for and is answered as asked
// (fi_endpoint(3)). `max_tx` / `max_rx`: the domain's max_ep_tx_ctx /
// max_ep_rx_ctx, the most contexts a scalable endpoint may have.
void match_ep(matcher& m, const fi_ep_attr& t, const fi_ep_attr* h, fi_ep_attr& out,
              bool stx_offered, bool srx_offered, size_t max_tx, size_t max_rx) {
  out = t;
  out.auth_key = nullptr;
  out.auth_key_size = 0;
  if (!h) return;
  m.same_or_unspec(static_cast<int>(h->protocol), static_cast<int>(t.protocol),
                   "ep_attr->protocol", core::tostr::enum_set::protocol);
  if (h->protocol_version && h->protocol_version > t.protocol_version)
    m.fail("ep_attr->protocol_version", "asked %u, offers %u", h->protocol_version,
           t.protocol_version);
  m.at_most(h->max_msg_size, t.max_msg_size, "ep_attr->max_msg_size");
  m.at_most(h->max_order_raw_size, t.max_order_raw_size, "ep_attr->max_order_raw_size");
  m.at_most(h->max_order_war_size, t.max_order_war_size, "ep_attr->max_order_war_size");
  m.at_most(h->max_order_waw_size, t.max_order_waw_size, "ep_attr->max_order_waw_size");
  // Several contexts are a scalable endpoint's (max_ep_tx_ctx /
  // max_ep_rx_ctx); the count asked for is the one answered.
  if (h->tx_ctx_cnt != FI_SHARED_CONTEXT) {
    m.at_most(h->tx_ctx_cnt, std::max(t.tx_ctx_cnt, max_tx), "ep_attr->tx_ctx_cnt");
    if (h->tx_ctx_cnt) out.tx_ctx_cnt = h->tx_ctx_cnt;
  } else if (stx_offered)
    out.tx_ctx_cnt = FI_SHARED_CONTEXT;
  else m.fail("ep_attr->tx_ctx_cnt", "shared transmit contexts are not offered");
  if (h->rx_ctx_cnt != FI_SHARED_CONTEXT) {
    m.at_most(h->rx_ctx_cnt, std::max(t.rx_ctx_cnt, max_rx), "ep_attr->rx_ctx_cnt");
    if (h->rx_ctx_cnt) out.rx_ctx_cnt = h->rx_ctx_cnt;
  } else if (srx_offered)
    out.rx_ctx_cnt = FI_SHARED_CONTEXT;
  else m.fail("ep_attr->rx_ctx_cnt", "shared receive contexts are not offered");
  if (h->auth_key_size || h->auth_key)
    m.fail("ep_attr->auth_key", "authorization keys are not offered");
  if (h->mem_tag_format) out.mem_tag_format = h->mem_tag_format;
}

void match_domain(matcher& m, uint32_t version, const fi_domain_attr& t, const fi_domain_attr* h,
                  fi_domain_attr& out, uint32_t options) {
  using core::tostr::enum_set;
  out = t;
  out.name = nullptr;
  out.auth_key = nullptr;
  out.auth_key_size = 0;
  out.domain = nullptr;
  if (!h) return;
  int threading = raw_enum(h->threading), cprog = raw_enum(h->control_progress),
      dprog = raw_enum(h->data_progress), rm = raw_enum(h->resource_mgmt),
      av = raw_enum(h->av_type);
  if (!m.in_range(threading, FI_THREAD_ENDPOINT, "domain_attr->threading") ||
      !m.in_range(cprog, FI_PROGRESS_CONTROL_UNIFIED, "domain_attr->control_progress") ||
      !m.in_range(dprog, FI_PROGRESS_MANUAL, "domain_attr->data_progress") ||
      !m.in_range(rm, FI_RM_ENABLED, "domain_attr->resource_mgmt") ||
      !m.in_range(av, FI_AV_TABLE, "domain_attr->av_type"))
    return;
  // Every threading model is served (the lock policy follows it).
  if (threading) out.threading = h->threading;
  auto progress = [&](int want_raw, fi_progress have, fi_progress& res, const char* field) {
    if (!want_raw) return;
    auto want = static_cast<fi_progress>(want_raw);
    if ((options & match_any_progress) && (want == FI_PROGRESS_AUTO || want == FI_PROGRESS_MANUAL)) {
      res = want;
      return;
    }
    // An automatic-progress provider also serves manual-progress callers.
    if (want != have && !(have == FI_PROGRESS_AUTO && want == FI_PROGRESS_MANUAL))
      m.fail(field, "asked %s, offers %s", core::tostr::enum_name(enum_set::progress, want),
             core::tostr::enum_name(enum_set::progress, have));
    else res = want;
  };
  // FI_PROGRESS_CONTROL_UNIFIED (2.x) asks that control operations progress
  // with data operations: what a provider without control operations does.
  if (cprog == FI_PROGRESS_CONTROL_UNIFIED) cprog = 0;
  progress(cprog, t.control_progress, out.control_progress, "domain_attr->control_progress");
  progress(dprog, t.data_progress, out.data_progress, "domain_attr->data_progress");
  if (rm) out.resource_mgmt = h->resource_mgmt;
  if (av) {
    if (t.av_type && av != t.av_type)
      m.fail("domain_attr->av_type", "asked %s, offers %s",
             core::tostr::enum_name(enum_set::av_type, av),
             core::tostr::enum_name(enum_set::av_type, t.av_type));
    out.av_type = h->av_type;
  }
  // Memory registration: the provider's requirements must be ones the
  // application accepts. An fi_info handed back to fi_domain may carry the
  // old FI_MR_BASIC / FI_MR_SCALABLE (fi_getinfo reports them so to callers
  // that asked that way): they stand for the bits fi_mr(3) gives them.
  (void)version;
  m.modes(static_cast<uint64_t>(t.mr_mode), static_cast<uint64_t>(effective_mr_mode(h->mr_mode)),
          "domain_attr->mr_mode", flag_set::mr_mode);
  m.at_most(h->mr_key_size, t.mr_key_size, "domain_attr->mr_key_size");
  m.at_most(h->cq_data_size, t.cq_data_size, "domain_attr->cq_data_size");
  m.at_most(h->cq_cnt, t.cq_cnt, "domain_attr->cq_cnt");
  m.at_most(h->ep_cnt, t.ep_cnt, "domain_attr->ep_cnt");
  m.at_most(h->tx_ctx_cnt, t.tx_ctx_cnt, "domain_attr->tx_ctx_cnt");
  m.at_most(h->rx_ctx_cnt, t.rx_ctx_cnt, "domain_attr->rx_ctx_cnt");
  m.at_most(h->max_ep_tx_ctx, t.max_ep_tx_ctx, "domain_attr->max_ep_tx_ctx");
  m.at_most(h->max_ep_rx_ctx, t.max_ep_rx_ctx, "domain_attr->max_ep_rx_ctx");
  m.at_most(h->max_ep_stx_ctx, t.max_ep_stx_ctx, "domain_attr->max_ep_stx_ctx");
  m.at_most(h->max_ep_srx_ctx, t.max_ep_srx_ctx, "domain_attr->max_ep_srx_ctx");
  m.at_most(h->cntr_cnt, t.cntr_cnt, "domain_attr->cntr_cnt");
  m.at_most(h->mr_iov_limit, t.mr_iov_limit, "domain_attr->mr_iov_limit");
  m.subset(h->caps, t.caps, "domain_attr->caps", flag_set::caps);
  m.modes(t.mode, h->mode, "domain_attr->mode", flag_set::mode);
  if (h->auth_key_size || h->auth_key)
    m.fail("domain_attr->auth_key", "authorization keys are not offered");
  m.at_most(h->max_err_data, t.max_err_data, "domain_attr->max_err_data");
  m.at_most(h->mr_cnt, t.mr_cnt, "domain_attr->mr_cnt");
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
    match_identity(m, tmpl, *hints);
    m.subset(hints->caps, tmpl.caps, "caps", flag_set::caps);
    m.modes(tmpl.mode, hints->mode, "mode", flag_set::mode);
    if (hints->handle) o.handle = hints->handle;
  }
  o.caps = caps & tmpl.caps;
  char* dom_name = o.domain_attr->name;  // the copy's own strings survive
  match_tx(m, *tmpl.tx_attr, hints ? hints->tx_attr : nullptr, o.caps, *o.tx_attr);
  match_rx(m, *tmpl.rx_attr, hints ? hints->rx_attr : nullptr, o.caps, *o.rx_attr);
  uint8_t* ep_key = o.ep_attr->auth_key;
  match_ep(m, *tmpl.ep_attr, hints ? hints->ep_attr : nullptr, *o.ep_attr,
           tmpl.domain_attr && tmpl.domain_attr->max_ep_stx_ctx > 0,
           tmpl.domain_attr && tmpl.domain_attr->max_ep_srx_ctx > 0,
           tmpl.domain_attr ? tmpl.domain_attr->max_ep_tx_ctx : 1,
           tmpl.domain_attr ? tmpl.domain_attr->max_ep_rx_ctx : 1);
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
  // The reason goes into this call's log line, not into a getinfo turn that
  // may be under way on this thread: that one's refusal is put back.
  const core::refusal outer = core::last_refusal();
  core::refusal_reset();
  bool nomem = false;
  fi_info* r = match_info(prov, version, tmpl, &wanted, &nomem, options);
  core::free_info(r);
  if (!r && !nomem) {
    const core::refusal& why = core::last_refusal();
    WEFT_INFO(prov, FI_LOG_CORE, "%s: the attributes do not fit at %s: %s", prov->name,
              why.set ? why.field : "?", why.set ? why.detail : "");
  }
  core::restore_refusal(outer);
  return r != nullptr;
}

}  // namespace weft::util
