// SPDX-License-Identifier: MIT
// weft — lnx's scalable endpoints: util::scalable_ep over one scalable
// endpoint per core, opened with the same context counts.
//
// - Address: the lnx address of the cores' scalable endpoints (their names
//   need no enabled context), so a peer reaches receive context j of it by
//   fi_rx_addr(fi_addr, j, bits): the route of fi_addr, and receive context
//   j of the core that carries it (router::attach gives the core AVs the
//   lnx AV's rx_ctx_bits).
// - Contexts: transmit context i is an lnx endpoint whose cores are the
//   transmit contexts i of the core scalable endpoints; receive context j
//   likewise, with its own matching engine that its cores match through
//   (each core's receive context j binds a peer SRX on a face of it). Each
//   context binds its own CQs and counters, as a plain lnx endpoint does.
// - Routes: one router for all the contexts, whose core AVs are bound to
//   the core scalable endpoints (so to each of their contexts).
// - Progress: a receive context with no CQ or counter is driven by its
//   cores' transmit contexts (util::sep_slot::adopt_if_undriven, in the
//   cores), which the lnx transmit contexts drive.
#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>

#include <memory>
#include <vector>

#include "core/log.hpp"
#include "prov/lnx/ep.hpp"
#include "prov/lnx/router.hpp"

namespace weft::lnx {

namespace {

// What the scalable endpoint's cookie holds: its cores' scalable endpoints
// and its router.
struct sep_cores {
  std::vector<core_domain*> cds;
  std::vector<fid_ep*> seps;  // one per core, in the domain's order
  std::unique_ptr<router> routes;

  ~sep_cores() {
    // The AV calls the router no more; the core AVs close after what they
    // are bound to.
    if (routes) routes->stop();
    for (size_t k = 0; k < seps.size(); ++k)
      if (seps[k] && fi_close(&seps[k]->fid))
        WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "closing the %s scalable endpoint failed",
                  cds[k]->m.prov.c_str());
    routes.reset();
  }
};

sep_cores* cores_of(uint64_t cookie) noexcept {
  return reinterpret_cast<sep_cores*>(cookie);
}

int open_ctx(util::scalable_ep& sep, bool tx, int index, const fi_info& info,
             std::unique_ptr<util::sep_slot> slot, fid_ep** out, void* context) {
  sep_cores& s = *cores_of(sep.cookie());
  return endpoint::open_context(static_cast<domain&>(sep.dom()), info, tx, index, s.seps,
                                *s.routes, std::move(slot), out, context);
}

// The cores' scalable endpoints, as get_address names them.
std::vector<fid*> named(const sep_cores& s) {
  std::vector<fid*> v;
  for (fid_ep* e : s.seps) v.push_back(&e->fid);
  return v;
}

int getname(const util::scalable_ep& sep, void* addr, size_t* addrlen) {
  const sep_cores& s = *cores_of(sep.cookie());
  return get_address(s.cds, named(s), addr, addrlen);
}

void release(uint64_t cookie) noexcept {
  delete cores_of(cookie);
}

const util::sep_hooks hooks = {
    .open_ctx = open_ctx,
    .getname = getname,
    .release = release,
};

}  // namespace

int open_sep(util::domain& d, fi_info* info, fid_ep** out, void* context) {
  auto* p = &provider();
  auto& dom = static_cast<domain&>(d);
  if (int ret = endpoint::check_info("fi_scalable_ep", info, out)) return ret;
  // The most contexts: what every core offers.
  size_t max_tx = SIZE_MAX, max_rx = SIZE_MAX;
  for (auto& cd : dom.cores()) {
    max_tx = std::min(max_tx, cd->info->domain_attr->max_ep_tx_ctx);
    max_rx = std::min(max_rx, cd->info->domain_attr->max_ep_rx_ctx);
  }
  size_t ntx, nrx;
  if (int ret = util::scalable_ep::counts(p, *info, max_tx, max_rx, ntx, nrx)) return ret;
  return abi_guard([&]() -> int {
    auto s = std::make_unique<sep_cores>();
    for (auto& cd : dom.cores()) {
      s->cds.push_back(cd.get());
      fi_info* ci = core_info(*cd, *info);
      if (!ci) return to_fi(errc::nomem);
      ci->caps |= FI_NAMED_RX_CTX;
      ci->tx_attr->caps |= FI_NAMED_RX_CTX;
      ci->ep_attr->tx_ctx_cnt = ntx;
      ci->ep_attr->rx_ctx_cnt = nrx;
      fid_ep* e = nullptr;
      int ret = fi_scalable_ep(cd->domain, ci, &e, nullptr);
      fi_freeinfo(ci);
      if (ret) {
        WEFT_WARN(p, FI_LOG_EP_CTRL, "fi_scalable_ep: the %s scalable endpoint did not open: %s",
                  cd->m.prov.c_str(), fi_strerror(-ret));
        return ret;
      }
      s->seps.push_back(e);
    }
    s->routes = std::make_unique<router>(s->cds, dom.lock_threading() != FI_THREAD_DOMAIN);
    for (size_t k = 0; k < s->seps.size(); ++k) s->routes->set_holder(k, s->seps[k]);
    // The address must hold every core's: found out here rather than by
    // the application's first fi_getname.
    uint8_t name[proto::addr_bytes];
    size_t len = sizeof name;
    if (int ret = get_address(s->cds, named(*s), name, &len)) return ret;
    int ret = util::scalable_ep::open(dom, *info, max_tx, max_rx, &hooks,
                                      reinterpret_cast<uint64_t>(s.get()), out, context);
    if (ret == 0) s.release();  // the endpoint's now (release)
    return ret;
  });
}

}  // namespace weft::lnx
