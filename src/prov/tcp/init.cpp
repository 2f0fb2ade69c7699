// SPDX-License-Identifier: MIT
// weft — the tcp provider's registration, parameters and fi_getinfo.
#include "core/info.hpp"
#include "core/log.hpp"
#include "prov/tcp/tcp.hpp"
#include "util/ip_getinfo.hpp"
#include "util/info_match.hpp"
#include "util/ip_codec.hpp"
#include "util/net.hpp"

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
    fi_provider* p = &provider();
    fi_param_define(p, "iface", FI_PARAM_STRING,
                    "Restrict the tcp provider to the named network interface (default: all)");
    fi_param_define(p, "conn_timeout", FI_PARAM_INT,
                    "Milliseconds a connection may take to be established, handshake included, "
                    "before its operations fail with FI_ETIMEDOUT (default: 10000)");
    fi_param_define(p, "keepalive", FI_PARAM_INT,
                    "Seconds a connection may stay silent before the peer is probed; a peer "
                    "that does not answer (its host is gone) fails the connection after about "
                    "2.5 times as long, unacknowledged data too. 0: never (default: 10)");
    fi_param_define(p, "unexp_limit", FI_PARAM_SIZE_T,
                    "Bytes of unexpected messages an endpoint buffers before it stops reading "
                    "from its peers until receives are posted (default: 268435456)");
    fi_param_define(p, "local_cc", FI_PARAM_STRING,
                    "TCP congestion control of connections within this host (loopback, or one "
                    "of its own addresses), where there is no congestion to control and a "
                    "pacing algorithm such as bbr slows bulk transfers down; empty: the "
                    "system's default (default: reno)");
    fi_param_define(p, "local_stream", FI_PARAM_BOOL,
                    "Carry FI_EP_MSG connections whose two ends are on this host and belong to "
                    "one user through shared memory after the TCP handshake (the socket then "
                    "only wakes a sleeping peer and ends the connection); manual progress "
                    "only (default: 1)");
    char* value = nullptr;
    if (fi_param_get_str(p, "iface", &value) == 0 && value) the_config.iface = value;
    value = nullptr;
    if (fi_param_get_str(p, "local_cc", &value) == 0 && value) the_config.local_cc = value;
    int ms = 0;
    if (fi_param_get_int(p, "conn_timeout", &ms) == 0 && ms > 0) the_config.conn_timeout_ms = ms;
    int keepalive = 0;
    if (fi_param_get_int(p, "keepalive", &keepalive) == 0 && keepalive >= 0)
      the_config.keepalive_s = keepalive;
    int local_stream = 1;
    if (fi_param_get_bool(p, "local_stream", &local_stream) == 0)
      the_config.local_stream = local_stream != 0;
    size_t limit = 0;
    if (fi_param_get_size_t(p, "unexp_limit", &limit) == 0 && limit > 0)
      the_config.unexp_limit = limit;
    return true;
  }();
  (void)defined;
  return &provider();
}
