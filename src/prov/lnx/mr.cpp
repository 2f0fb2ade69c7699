// SPDX-License-Identifier: MIT
// weft — lnx memory regions: util's region on the lnx domain (the key and
// descriptor the application gets, its checks and its log lines), and the
// same memory registered with every core under that same key, so a remote
// key works whichever core carries the RMA. The cores are opened with
// mr_mode 0 (keys chosen by the registrant, addresses as offsets), as the
// lnx domain is: an RMA address means the same to lnx and to each core.
// Registration is eager, with every core at once: a target cannot know
// which core a peer's RMA will arrive on. Closing the region releases every
// core's registration (the companion goes with util's region). A counter
// bound to the region (FI_RMA_EVENT) is bound to every core's region too,
// through a core peer counter that forwards to it.
#include <rdma/fi_domain.h>

#include <vector>

#include "core/log.hpp"
#include "prov/lnx/ep.hpp"
#include "prov/lnx/lnx.hpp"
#include "util/mr.hpp"

namespace weft::lnx {

namespace {

struct core_regions : util::mr_companion {
  std::vector<fid_mr*> mrs;        // one per core domain, in the domain's order
  std::vector<fid_domain*> doms;   // the core domain of each
  // FI_RMA_EVENT: remote accesses are counted by the cores' regions, so a
  // counter bound to the lnx region is bound, as a core peer counter
  // forwarding to it, to every core's region too.
  struct bound {
    util::cntr* target;
    std::unique_ptr<cntr_owner> owner;
    std::vector<fid_cntr*> cntrs;  // one per core, as mrs
  };
  std::vector<bound> counters;
  int bind_counter(util::cntr& c, uint64_t flags) noexcept override {
    bound* b = nullptr;
    for (bound& x : counters)
      if (x.target == &c) b = &x;  // bound again: the cores count both kinds
    try {
      if (!b) {
        counters.push_back(bound{&c, make_cntr_owner(c), {}});
        b = &counters.back();
        b->cntrs.reserve(mrs.size());  // no allocation in the loop below
      }
    } catch (const std::bad_alloc&) {
      return to_fi(errc::nomem);
    }
    for (size_t i = 0; i < mrs.size(); ++i) {
      if (b->cntrs.size() <= i) {
        fid_cntr* cc = nullptr;
        if (int ret = open_core_cntr(doms[i], *b->owner, &cc)) {
          WEFT_WARN(&provider(), FI_LOG_MR, "fi_mr_bind: a core's peer counter: %s",
                    fi_strerror(-ret));
          return ret;
        }
        b->cntrs.push_back(cc);
      }
      if (int ret = fi_mr_bind(mrs[i], &b->cntrs[i]->fid, flags)) {
        WEFT_WARN(&provider(), FI_LOG_MR, "fi_mr_bind: a core refused the counter: %s",
                  fi_strerror(-ret));
        return ret;
      }
    }
    return 0;
  }
  ~core_regions() override {
    for (fid_mr* m : mrs)
      if (fi_close(&m->fid))
        WEFT_WARN(&provider(), FI_LOG_MR, "a core refused to close its registration");
    // After the regions that hold them.
    for (bound& b : counters)
      for (fid_cntr* c : b.cntrs)
        if (fi_close(&c->fid)) WEFT_WARN(&provider(), FI_LOG_MR, "a core refused to close a counter");
  }
};

}  // namespace

int mr_attach(util::domain& d, util::mr& m, const fi_mr_attr& attr, uint64_t flags) noexcept {
  return abi_guard([&]() -> int {
    auto regions = std::make_unique<core_regions>();
    for (auto& cd : static_cast<domain&>(d).cores()) {
      fi_mr_attr a = attr;
      a.requested_key = m.map_key();
      a.context = nullptr;
      fid_mr* cm = nullptr;
      if (int ret = fi_mr_regattr(cd->domain, &a, flags, &cm)) {
        WEFT_WARN(&provider(), FI_LOG_MR, "fi_mr_reg: the %s domain refused the region: %s",
                  cd->m.prov.c_str(), fi_strerror(-ret));
        return ret;  // the regions made so far go with `regions`
      }
      regions->mrs.push_back(cm);
      regions->doms.push_back(cd->domain);
    }
    m.attach(std::move(regions));
    return 0;
  });
}

}  // namespace weft::lnx
