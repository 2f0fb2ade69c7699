// SPDX-License-Identifier: MIT
// weft — the shm provider's registration, parameters and fi_getinfo.
#include "core/info.hpp"
#include "core/log.hpp"
#include "core/refusal.hpp"
#include "prov/shm/shm.hpp"
#include "util/info_match.hpp"

#include <cstdlib>
#include <cstring>
#include <memory>
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

}  // namespace

const config& cfg() noexcept { return the_config; }

fi_provider& provider() noexcept { return the_provider; }

int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
            const fi_info* hints, fi_info** info) noexcept {
  return abi_guard([&]() -> int {
    // node may be a peer's FI_ADDR_STR name (fi_getinfo(3)); shm has no
    // services and does not let the application choose its own name.
    addr_entry dest{};
    bool have_dest = false;
    if (node || service) {
      if (service || !node || (flags & FI_SOURCE) || !parse_name(node, std::strlen(node) + 1, dest)) {
        core::refuse(0, node ? "node" : "service", "node %s service %s is not a peer's fi_shm:// name",
                     node ? node : "(none)", service ? service : "(none)");
        return to_fi(errc::nodata);
      }
      have_dest = true;
    } else if (hints && hints->dest_addr &&
               (hints->addr_format == FI_ADDR_STR || hints->addr_format == FI_FORMAT_UNSPEC)) {
      if (!parse_name(static_cast<const char*>(hints->dest_addr), hints->dest_addrlen, dest)) {
        core::refuse(0, "dest_addr", "not an fi_shm:// name");
        return to_fi(errc::nodata);
      }
      have_dest = true;
    }
    bool nomem = false;
    info_ptr match{util::match_info(&provider(), version, info_template(), hints, &nomem)};
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
    fi_param_define(&provider(), "single_copy", FI_PARAM_BOOL,
                    "Move messages larger than %zu bytes with one copy (process_vm_readv); "
                    "0 sends them through shared bounce buffers instead (default: 1, falling "
                    "back per peer when the kernel refuses)",
                    inline_max);
    fi_param_define(&provider(), "split_copy", FI_PARAM_BOOL,
                    "Let sender and receiver each copy part of a large single-copy message, "
                    "on their own cores (default: 1; 0: the receiver copies it alone)");
    fi_param_define(&provider(), "dir", FI_PARAM_STRING,
                    "Directory of the shared-memory regions (default: /dev/shm)");
    int b = 1;
    if (fi_param_get_bool(&provider(), "single_copy", &b) == 0) the_config.single_copy = b != 0;
    b = 1;
    if (fi_param_get_bool(&provider(), "split_copy", &b) == 0) the_config.split_copy = b != 0;
    char* value = nullptr;
    if (fi_param_get_str(&provider(), "dir", &value) == 0 && value && *value) the_config.dir = value;
    return true;
  }();
  (void)defined;
  return &provider();
}
