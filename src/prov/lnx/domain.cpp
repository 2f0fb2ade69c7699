// SPDX-License-Identifier: MIT
// weft — the lnx fabric and domain: util's objects, and for each provider of
// the link a fabric and domain of that provider, opened through its
// fi_provider entry points (as the core opens any provider's), so
// FI_PROVIDER=lnx does not hide the cores from lnx.
#include <rdma/fi_domain.h>

#include <algorithm>

#include "core/info.hpp"
#include "core/log.hpp"
#include "core/registry.hpp"
#include "util/mr.hpp"
#include "prov/lnx/ep.hpp"
#include "prov/lnx/lnx.hpp"

namespace weft::lnx {

namespace {

int open_domain(util::fabric& fab, fi_info* info, fid_domain** out, void* context) {
  auto* prov = &provider();
  if (!info || !out || !info->domain_attr || !info->domain_attr->name || !info->ep_attr ||
      !info->tx_attr || !info->rx_attr) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "fi_domain needs an fi_info from fi_getinfo for lnx");
    return to_fi(errc::inval);
  }
  if (raw_enum(info->ep_attr->type) != FI_EP_RDM && raw_enum(info->ep_attr->type) != FI_EP_UNSPEC) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "lnx offers FI_EP_RDM only");
    return to_fi(errc::nodata);
  }
  if (info->caps & ~offered_caps) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "fi_domain: caps 0x%llx are not offered by lnx",
              static_cast<unsigned long long>(info->caps & ~offered_caps));
    return to_fi(errc::nodata);
  }
  return abi_guard([&]() -> int {
    auto d = std::make_unique<domain>(fab, *info, context);
    if (int ret = d->open_cores(*info)) return ret;
    *out = d.release();
    return 0;
  });
}

// fi_srx_context: util's application context, whose engine lnx endpoints
// bound to it match through (endpoint::enable). Not FI_PEER: lnx owns
// receive contexts, it is no one's peer (util::open_srx_context refuses it).
int open_srx(util::domain& dom, fi_rx_attr* attr, fid_ep** out, void* context) {
  return util::open_srx_context(dom, &provider(), attr, static_cast<domain&>(dom).rx_size(),
                                nullptr, out, context);
}

int open_endpoint(util::domain& dom, fi_info* info, fid_ep** out, void* context) {
  return endpoint::open(static_cast<domain&>(dom), info, out, context);
}

const util::av_codec* codec_for(const util::domain&) {
  return &codec();
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
    .scalable_ep = open_sep,
    .control_on_data_path = false,
    .mr_attach = mr_attach,
};

core_domain::~core_domain() {
  if (domain && fi_close(&domain->fid))
    WEFT_WARN(&lnx::provider(), FI_LOG_DOMAIN, "closing the %s domain failed", m.prov.c_str());
  if (fabric && fi_close(&fabric->fid))
    WEFT_WARN(&lnx::provider(), FI_LOG_DOMAIN, "closing the %s fabric failed", m.prov.c_str());
  core::free_info(info);
}

domain::domain(util::fabric& fab, const fi_info& info, void* context)
    : util::domain(fab, &lnx::domain_hooks, info, context) {}

size_t domain::rx_size() const noexcept {
  // What lnx advertises (init.cpp): the smallest of its cores'.
  size_t n = 0;
  for (const auto& c : cores_)
    if (c->info && c->info->rx_attr && c->info->rx_attr->size)
      n = n ? std::min(n, c->info->rx_attr->size) : c->info->rx_attr->size;
  return n;
}

domain::~domain() {
  // The cores' domains go before their fabrics, the last link member first.
  while (!cores_.empty()) cores_.pop_back();
}

int domain::open_cores(const fi_info& info) noexcept {
  auto* prov = &lnx::provider();
  // The domain's name is the link it joins, as fi_getinfo wrote it.
  config c = parse_links(info.domain_attr->name);
  if (!c.error.empty() || c.links.size() != 1) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "fi_domain: '%s' does not name an lnx link: %s",
              info.domain_attr->name, c.error.c_str());
    return to_fi(errc::inval);
  }
  for (const member& m : c.links.front().members) {
    auto cd = std::make_unique<core_domain>();
    cd->m = m;
    fi_info* list = nullptr;
    if (int ret = core_getinfo(m, &info, &list); ret || !list) {
      WEFT_WARN(prov, FI_LOG_DOMAIN, "fi_domain: %s offers nothing lnx can use", m.prov.c_str());
      return ret ? ret : to_fi(errc::nodata);
    }
    // The first answer: the provider's choice, or the named domain.
    cd->info = list;
    if (list->next) {
      core::free_info(list->next);
      list->next = nullptr;
    }
    // RMA addresses mean the same to the core as to lnx (mr.cpp): virtual
    // addresses where the lnx domain uses them (FI_MR_VIRT_ADDR, or the
    // old FI_MR_BASIC an API 1.4 caller asked for), else offsets. Keys are
    // always lnx's, given to the core as requested keys.
    cd->info->domain_attr->mr_mode =
        util::effective_mr_mode(info.domain_attr->mr_mode) & FI_MR_VIRT_ADDR;
    fi_provider* p = core::find_builtin_provider(m.prov);
    if (int ret = p->fabric(cd->info->fabric_attr, &cd->fabric, nullptr)) {
      WEFT_WARN(prov, FI_LOG_DOMAIN, "fi_domain: the %s fabric did not open: %s", m.prov.c_str(),
                fi_strerror(-ret));
      return ret;
    }
    if (int ret = fi_domain(cd->fabric, cd->info, &cd->domain, nullptr)) {
      WEFT_WARN(prov, FI_LOG_DOMAIN, "fi_domain: the %s domain did not open: %s", m.prov.c_str(),
                fi_strerror(-ret));
      return ret;
    }
    cores_.push_back(std::move(cd));
  }
  return 0;
}

}  // namespace weft::lnx
