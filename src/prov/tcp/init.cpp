// SPDX-License-Identifier: MIT
// weft — the tcp provider's registration, parameters and fi_getinfo.
#include "core/info.hpp"
#include "core/log.hpp"
#include "prov/tcp/tcp.hpp"
#include "util/ip_getinfo.hpp"
#include "util/info_match.hpp"
#include "util/ip_codec.hpp"
#include "util/net.hpp"
#include "util/params.hpp"

#include <netdb.h>

#include <cstring>
#include <memory>
#include <string>
#include <utility>

namespace weft::tcp {

namespace {

int fabric_open(fi_fabric_attr* attr, fid_fabric** fab, void* context) {
  return util::fabric::open(&provider(), &fabric_hooks, attr, fab, context);
}

config the_config;

fi_provider the_provider = {
    .version = FI_VERSION(0, 1),
    .fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
    .context = {},
    .name = "tcp",
    .getinfo = getinfo,
    .fabric = fabric_open,
    .cleanup = nullptr,
};

// The parameters (fi_info -e), into the_config at registration; the
// defaults are config's (params.hpp).
constexpr util::param<config> params[] = {
    {"iface", FI_PARAM_STRING,
     "Restrict the tcp provider to the named network interface (default: all)",
     util::store<&config::iface>},
    {"conn_timeout", FI_PARAM_INT,
     "Milliseconds a connection may take to be established, handshake included, "
     "before its operations fail with FI_ETIMEDOUT (default: 10000)",
     util::at_least<&config::conn_timeout_ms, 1>},
    {"keepalive", FI_PARAM_INT,
     "Seconds a connection may stay silent before the peer is probed; a peer "
     "that does not answer (its host is gone) fails the connection after about "
     "2.5 times as long, unacknowledged data too. 0: never (default: 10)",
     util::at_least<&config::keepalive_s, 0>},
    {"unexp_limit", FI_PARAM_SIZE_T,
     "Bytes of unexpected messages an endpoint buffers before it stops reading "
     "from its peers until receives are posted (default: 268435456)",
     util::at_least<&config::unexp_limit, 1>},
    {"local_cc", FI_PARAM_STRING,
     "TCP congestion control of connections within this host (loopback, or one "
     "of its own addresses), where there is no congestion to control and a "
     "pacing algorithm such as bbr slows bulk transfers down; empty: the "
     "system's default (default: reno)",
     util::store<&config::local_cc>},
    {"local_stream", FI_PARAM_BOOL,
     "Carry FI_EP_MSG connections whose two ends are on this host and belong to "
     "one user through shared memory after the TCP handshake (the socket then "
     "only wakes a sleeping peer and ends the connection); manual progress "
     "only (default: 1)",
     util::store<&config::local_stream>},
};

}  // namespace

const config& cfg() noexcept { return the_config; }

fi_provider& provider() noexcept { return the_provider; }

int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
            const fi_info* hints, fi_info** info) noexcept {
  const fi_info* templates[] = {&rdm_template(), &msg_template()};
  // Progress is manual unless the application asks for automatic progress
  // (one thread per domain, progress_thread.hpp).
  return util::ip_getinfo(
      {&provider(), templates, SOCK_STREAM, cfg().iface, util::match_any_progress}, version,
      node, service, flags, hints, info);
}

}  // namespace weft::tcp

// The registry's entry point (src/library.cpp).
fi_provider* weft_tcp_provider() noexcept {
  using namespace weft::tcp;
  static bool defined = [] {
    weft::util::load_params(&provider(), params, the_config);
    return true;
  }();
  (void)defined;
  return &provider();
}
