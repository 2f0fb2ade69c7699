// SPDX-License-Identifier: MIT
// weft — the shm provider's registration, parameters and fi_getinfo.
#include "core/info.hpp"
#include "core/log.hpp"
#include "core/refusal.hpp"
#include "prov/shm/shm.hpp"
#include "util/info_match.hpp"
#include "util/ip_codec.hpp"
#include "util/net.hpp"
#include "util/params.hpp"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

namespace weft::shm {

namespace {

int fabric_open(fi_fabric_attr* attr, fid_fabric** fab, void* context) {
  return util::fabric::open(&provider(), &fabric_hooks, attr, fab, context);
}

config the_config;

fi_provider the_provider = {
    .version = FI_VERSION(0, 1),
    .fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
    .context = {},
    .name = "shm",
    .getinfo = getinfo,
    .fabric = fabric_open,
    .cleanup = nullptr,
};

struct info_deleter {
  void operator()(fi_info* i) const noexcept { core::free_info(i); }
};
using info_ptr = std::unique_ptr<fi_info, info_deleter>;

// A padded copy of a checked name, as info->dest_addr holds it.
bool set_name(void*& field, size_t& len, const addr_entry& e) {
  std::free(field);
  field = std::malloc(name_bytes);
  len = field ? name_bytes : 0;
  if (!field) return false;
  format_name(e, static_cast<char*>(field));
  return true;
}

// node as a host: a name or address, or an IP address in FI_ADDR_STR form
// ("fi_sockaddr_in://127.0.0.1:4711").
bool names_local_host(const char* node, uint64_t flags) {
  std::string host, port;
  int family = AF_UNSPEC;
  if (std::strstr(node, "://")) {
    if (!util::split_addr_str(node, host, port, family)) return false;
    node = host.c_str();
  }
  return util::names_this_host(node, flags & FI_NUMERICHOST);
}

// FI_SHM_AUTO_SPIN_US, kept in nanoseconds.
const char* spin_us(config& c, const util::param_value& v) {
  if (v.number < 0) return "it must not be negative";
  c.auto_spin_ns = static_cast<uint64_t>(v.number) * 1000u;
  return nullptr;
}

static_assert(inline_max == 4096, "single_copy's help names the inline limit");

// The parameters (fi_info -e), into the_config at registration; the
// defaults are config's (shm.hpp).
constexpr util::param<config> params[] = {
    {"single_copy", FI_PARAM_BOOL,
     "Move messages larger than 4096 bytes with one copy (process_vm_readv); "
     "0 sends them through shared bounce buffers instead (default: 1, falling "
     "back per peer when the kernel refuses)",
     util::store<&config::single_copy>},
    {"split_copy", FI_PARAM_BOOL,
     "Let sender and receiver each copy part of a large single-copy message, "
     "on their own cores (default: 1; 0: the receiver copies it alone)",
     util::store<&config::split_copy>},
    {"auto_spin_us", FI_PARAM_INT,
     "Under automatic progress (FI_PROGRESS_AUTO), how long the progress thread "
     "keeps polling an endpoint after its last message before it sleeps, in "
     "microseconds (default: 50; 0: it sleeps at once)",
     spin_us},
    {"auto_handoff", FI_PARAM_BOOL,
     "Under FI_THREAD_DOMAIN with automatic progress, let the application and "
     "the progress thread take turns through one handoff per domain, which "
     "costs the application thread it is biased to no atomic instruction "
     "(default: 1; 0: a lock per object, as under FI_THREAD_SAFE)",
     util::store<&config::auto_handoff>},
    {"dir", FI_PARAM_STRING, "Directory of the shared-memory regions (default: /dev/shm)",
     util::not_empty<&config::dir>},
};

}  // namespace

const config& cfg() noexcept { return the_config; }
config& cfg_for_tests() noexcept { return the_config; }

fi_provider& provider() noexcept { return the_provider; }

int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
            const fi_info* hints, fi_info** info) noexcept {
  return abi_guard([&]() -> int {
    // node may be a peer's FI_ADDR_STR name (fi_getinfo(3)): the
    // destination. shm does not let the application choose its own name.
    addr_entry dest{};
    bool have_dest = false;
    if (node && std::strncmp(node, name_prefix, sizeof name_prefix - 1) == 0) {
      if (service || (flags & FI_SOURCE) || !parse_name(node, std::strlen(node) + 1, dest)) {
        core::refuse(0, "node", "%s%s is not a peer's name shm can reach%s", node,
                     service ? " with a service" : "",
                     flags & FI_SOURCE ? " (shm names its endpoints itself: no FI_SOURCE)" : "");
        return to_fi(errc::nodata);
      }
      have_dest = true;
    } else if (node || service) {
      // A host (and a port) name no shm endpoint, but a client that names
      // this host is one shm can serve: accepted, and the answer keeps shm's
      // own addressing (docs/decisions.md). A service alone names no host.
      if (node && !names_local_host(node, flags)) {
        core::refuse(0, "node", "%s names no address of this host%s: shm reaches this host only",
                     node, flags & FI_NUMERICHOST ? " (FI_NUMERICHOST: numeric only)" : "");
        return to_fi(errc::nodata);
      }
    }
    if (!have_dest && hints && hints->dest_addr &&
        (hints->addr_format == FI_ADDR_STR || hints->addr_format == FI_FORMAT_UNSPEC)) {
      if (!parse_name(static_cast<const char*>(hints->dest_addr), hints->dest_addrlen, dest)) {
        core::refuse(0, "dest_addr", "not an fi_shm:// name");
        return to_fi(errc::nodata);
      }
      have_dest = true;
    }
    bool nomem = false;
    info_ptr match{util::match_info(&provider(), version, info_template(), hints, &nomem,
                                     util::match_any_progress)};
    if (nomem) return to_fi(errc::nomem);
    if (!match) return to_fi(errc::nodata);
    if (have_dest && !set_name(match->dest_addr, match->dest_addrlen, dest))
      return to_fi(errc::nomem);
    *info = match.release();
    return 0;
  });
}

}  // namespace weft::shm

// The registry's entry point (src/library.cpp).
fi_provider* weft_shm_provider() noexcept {
  using namespace weft::shm;
  static bool defined = [] {
    weft::util::load_params(&provider(), params, the_config);
    return true;
  }();
  (void)defined;
  return &provider();
}
