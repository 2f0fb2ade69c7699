// SPDX-License-Identifier: MIT
// weft — the udp provider's registration, parameters and fi_getinfo.
#include "core/log.hpp"
#include "prov/udp/udp.hpp"
#include "util/ip_getinfo.hpp"


namespace weft::udp {

namespace {

int fabric_open(fi_fabric_attr* attr, fid_fabric** fab, void* context) {
  return util::fabric::open(&provider(), &fabric_hooks, attr, fab, context);
}

config the_config;

fi_provider the_provider = {
    .version = FI_VERSION(0, 1),
    .fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
    .context = {},
    .name = "udp",
    .getinfo = getinfo,
    .fabric = fabric_open,
    .cleanup = nullptr,
};

}  // namespace

const config& cfg() noexcept { return the_config; }

fi_provider& provider() noexcept { return the_provider; }

int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
            const fi_info* hints, fi_info** info) noexcept {
  const fi_info* templates[] = {&info_template()};
  return util::ip_getinfo({&provider(), templates, SOCK_DGRAM, cfg().iface}, version, node,
                          service, flags, hints, info);
}

}  // namespace weft::udp

// The registry's entry point (src/library.cpp).
fi_provider* weft_udp_provider() noexcept {
  using namespace weft::udp;
  static bool defined = [] {
    fi_param_define(&provider(), "iface", FI_PARAM_STRING,
                    "Restrict the udp provider to the named network interface (default: all)");
    char* value = nullptr;
    if (fi_param_get_str(&provider(), "iface", &value) == 0 && value) the_config.iface = value;
    return true;
  }();
  (void)defined;
  return &provider();
}
