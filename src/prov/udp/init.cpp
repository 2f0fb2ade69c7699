// SPDX-License-Identifier: MIT
// weft — the udp provider's registration, parameters and fi_getinfo.
#include "core/log.hpp"
#include "prov/udp/udp.hpp"
#include "util/info_match.hpp"
#include "util/ip_getinfo.hpp"
#include "util/params.hpp"

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

// A duration in milliseconds of at least Min; more than a week is taken as
// a week (max_param_ms), logged.
template <uint64_t config::*Field, long long Min>
const char* millis(config& c, const util::param_value& v) {
  if (v.number < Min) return Min ? "it must be at least 1" : "it must not be negative";
  uint64_t ms = static_cast<uint64_t>(v.number);
  if (ms > max_param_ms) {
    WEFT_WARN(&provider(), FI_LOG_CORE, "%s=%llu is more than a week: a week is taken", v.env,
              static_cast<unsigned long long>(ms));
    ms = max_param_ms;
  }
  c.*Field = ms;
  return nullptr;
}

// The parameters (fi_info -e), into the_config at registration; the
// defaults are config's (udp.hpp).
constexpr util::param<config> params[] = {
    {"iface", FI_PARAM_STRING,
     "Restrict the udp provider to the named network interface (default: all)",
     util::store<&config::iface>},
    {"rdm_peer_timeout_ms", FI_PARAM_SIZE_T,
     "FI_EP_RDM: milliseconds without an acknowledgement, while data is in "
     "flight, after which a peer is gone and its operations fail (default: 10000)",
     millis<&config::rdm_peer_timeout_ms, 1>},
    {"rdm_unexp_limit", FI_PARAM_SIZE_T,
     "FI_EP_RDM: bytes of unexpected messages an endpoint holds before new "
     "messages wait at their senders (default: 268435456)",
     util::store<&config::rdm_unexp_limit>},
    {"rdm_peer_idle_ms", FI_PARAM_SIZE_T,
     "FI_EP_RDM: milliseconds a peer may be idle (nothing in flight either way, "
     "nothing heard) before its reliability state is reclaimed; it comes back "
     "with the next message, nothing lost. 0: never. At least twice "
     "rdm_peer_timeout_ms (default: 60000)",
     millis<&config::rdm_peer_idle_ms, 0>},
    {"rdm_ack_hold", FI_PARAM_BOOL,
     "FI_EP_RDM under manual progress: hold the acknowledgement a progress "
     "call owes one peer until the next call or a datagram to that peer "
     "carries it, or a keeper thread sends it within about 8.5 ms; 0 sends "
     "it at the end of the call (default: 1)",
     util::store<&config::rdm_ack_hold>},
};

}  // namespace

const config& cfg() noexcept { return the_config; }

fi_provider& provider() noexcept { return the_provider; }

int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
            const fi_info* hints, fi_info** info) noexcept {
  const fi_info* templates[] = {&info_template(), &rdm_template()};
  return util::ip_getinfo(
      {&provider(), templates, SOCK_DGRAM, cfg().iface, util::match_any_progress}, version, node,
      service, flags, hints, info);
}

}  // namespace weft::udp

// The registry's entry point (src/library.cpp).
fi_provider* weft_udp_provider() noexcept {
  using namespace weft::udp;
  static bool defined = [] {
    weft::util::load_params(&provider(), params, the_config);
    return true;
  }();
  (void)defined;
  return &provider();
}
