// SPDX-License-Identifier: MIT
// weft — lnx memory regions: util's region on the lnx domain (the key and
// descriptor the application gets, its checks and its log lines), and the
// same memory registered with every core under that same key, so a remote
// key works whichever core carries the RMA. The cores are opened with
// mr_mode 0 (keys chosen by the registrant, addresses as offsets), as the
// lnx domain is: an RMA address means the same to lnx and to each core.
// Registration is eager, with every core at once: a target cannot know
// which core a peer's RMA will arrive on. Closing the region releases every
// core's registration (the companion goes with util's region).
#include <rdma/fi_domain.h>

#include <vector>

#include "core/log.hpp"
#include "prov/lnx/lnx.hpp"
#include "util/mr.hpp"

namespace weft::lnx {

namespace {

struct core_regions : util::mr_companion {
  std::vector<fid_mr*> mrs;
  ~core_regions() override {
    for (fid_mr* m : mrs)
      if (fi_close(&m->fid))
        WEFT_WARN(&provider(), FI_LOG_MR, "a core refused to close its registration");
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
    }
    m.attach(std::move(regions));
    return 0;
  });
}

}  // namespace weft::lnx
