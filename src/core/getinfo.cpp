// SPDX-License-Identifier: MIT
// weft — fi_getinfo over the built-in providers, and fi_fabric.
#include "core/getinfo.hpp"

#include "core/errc.hpp"
#include "core/info.hpp"
#include "core/log.hpp"
#include "core/refusal.hpp"
#include "core/registry.hpp"

#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include <cstdio>
#include <cstring>
#include <memory>

namespace weft::core {

namespace {

// FI_RESCAN (API 2.x) asks for the network interfaces to be looked up
// again; every call already lists them afresh (util::list_ip_ifaces), so
// the flag is accepted and changes nothing.
constexpr uint64_t getinfo_flags = FI_NUMERICHOST | FI_SOURCE | FI_PROV_ATTR_ONLY | FI_RESCAN;
constexpr uint64_t mr_basic_bits = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;

struct info_deleter {
  void operator()(fi_info* i) const noexcept { free_info(i); }
};
using info_ptr = std::unique_ptr<fi_info, info_deleter>;

// How a caller speaks of memory registration (fi_mr(3), fi_domain(3)):
// in mr_mode bits (API 1.5 and later), or in the old values: FI_MR_BASIC
// (the bits FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY), FI_MR_SCALABLE
// (none of them), and, before 1.5 only, FI_MR_UNSPEC (either), each with
// local registration as the mode bit FI_LOCAL_MR. Providers speak the bits;
// the core translates on the way in and answers in the caller's terms.
enum class mr_speech { bits, basic, scalable, either };

struct mr_request {
  mr_speech speech = mr_speech::bits;
  char error[120] = {};  // set: the hints' mr_mode is not one the man pages allow
};

mr_request read_mr_request(uint32_t version, const fi_info* hints) {
  mr_request r;
  bool old_api = !FI_VERSION_GE(version, FI_VERSION(1, 5));
  int mode = hints && hints->domain_attr ? hints->domain_attr->mr_mode : FI_MR_UNSPEC;
  if (mode == FI_MR_BASIC) r.speech = mr_speech::basic;
  else if (mode == FI_MR_SCALABLE) r.speech = mr_speech::scalable;
  else if (old_api && mode == FI_MR_UNSPEC) r.speech = mr_speech::either;
  else if (old_api)
    std::snprintf(r.error, sizeof r.error,
                  "API %u.%u callers name FI_MR_UNSPEC, FI_MR_BASIC or FI_MR_SCALABLE, not %d",
                  FI_MAJOR(version), FI_MINOR(version), mode);
  else if (mode & (FI_MR_BASIC | FI_MR_SCALABLE))
    std::snprintf(r.error, sizeof r.error,
                  "FI_MR_BASIC and FI_MR_SCALABLE may not be combined with other bits (0x%x)",
                  static_cast<unsigned>(mode));
  return r;
}

// ...translated on the way in: what the application accepts, in bits...
void hints_to_bits(const mr_request& r, fi_info& h) {
  if (r.speech == mr_speech::bits || !h.domain_attr) return;
  int bits = r.speech == mr_speech::scalable ? 0 : static_cast<int>(mr_basic_bits);
  if (h.mode & FI_LOCAL_MR) bits |= FI_MR_LOCAL;
  h.domain_attr->mr_mode = bits;
}

// ...and back on the way out: the old value the caller asked for (fi_mr(3):
// FI_MR_BASIC asked is never cleared), or, where it left the choice, the
// one the provider's needs fit; local registration as FI_LOCAL_MR.
void result_from_bits(const mr_request& r, fi_info& i) {
  if (r.speech == mr_speech::bits || !i.domain_attr) return;
  int bits = i.domain_attr->mr_mode;
  int value = FI_MR_SCALABLE;
  if (r.speech == mr_speech::basic || (r.speech == mr_speech::either && (bits & mr_basic_bits)))
    value = FI_MR_BASIC;
  i.domain_attr->mr_mode = value;
  if (bits & FI_MR_LOCAL) i.mode |= FI_LOCAL_MR;
}

// The one line fi_getinfo(3) callers get, at FI_LOG_INFO, for each provider
// that passed over their hints: the first field it rejected.
void log_refusal(const fi_provider& p, int ret) {
  const refusal& r = last_refusal();
  if (r.set)
    WEFT_INFO(&p, FI_LOG_CORE, "%s rejects the hints at %s: %s", p.name, r.field, r.detail);
  else
    WEFT_INFO(&p, FI_LOG_CORE, "%s offers nothing for the hints (%s)", p.name, fi_strerror(-ret));
}

fi_info* attr_only_entry(const fi_provider& p, uint32_t version) {
  fi_info* i = dup_info(nullptr, abi_current);
  if (!i) return nullptr;
  i->fabric_attr->prov_name = strdup(p.name);
  i->fabric_attr->prov_version = p.version;
  i->fabric_attr->api_version = version;
  if (!i->fabric_attr->prov_name) {
    free_info(i);
    return nullptr;
  }
  return i;
}

}  // namespace

int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
            const fi_info* hints, fi_info** info) noexcept {
  if (!info) return to_fi(errc::inval);
  *info = nullptr;
  if (FI_VERSION_LT(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), version) ||
      version < FI_VERSION(1, 0)) {
    WEFT_WARN(core_provider(), FI_LOG_CORE, "API version %u.%u is not one weft implements",
              FI_MAJOR(version), FI_MINOR(version));
    return to_fi(errc::nosys);
  }
  if (flags & ~getinfo_flags) {
    WEFT_WARN(core_provider(), FI_LOG_CORE, "unknown fi_getinfo flags 0x%llx",
              static_cast<unsigned long long>(flags & ~getinfo_flags));
    return to_fi(errc::badflags);
  }

  const mr_request mr = read_mr_request(version, hints);
  info_ptr local_hints;
  if (hints && mr.speech != mr_speech::bits && !mr.error[0]) {
    local_hints.reset(dup_info(hints, abi_current));
    if (!local_hints) return to_fi(errc::nomem);
    hints_to_bits(mr, *local_hints);
    hints = local_hints.get();
  }
  const char* want = hints && hints->fabric_attr ? hints->fabric_attr->prov_name : nullptr;

  fi_info* head = nullptr;
  fi_info** tail = &head;
  info_ptr result_guard;
  for (fi_provider* p : active_providers()) {
    if (want && !provider_name_matches(want, *p)) continue;
    fi_info* list = nullptr;
    if (flags & FI_PROV_ATTR_ONLY) {
      list = attr_only_entry(*p, version);
      if (!list) return free_info(head), to_fi(errc::nomem);
    } else {
      refusal_reset();
      int ret = to_fi(errc::nodata);
      if (mr.error[0]) refuse(0, "domain_attr->mr_mode", "%s", mr.error);  // for every provider
      else ret = p->getinfo(version, node, service, flags, hints, &list);
      if (ret == to_fi(errc::nomem)) return free_info(head), ret;
      if (ret) {  // this provider has nothing that fits
        log_refusal(*p, ret);
        continue;
      }
    }
    for (fi_info* i = list; i; i = i->next) {
      if (!i->fabric_attr->prov_name && !(i->fabric_attr->prov_name = strdup(p->name))) {
        free_info(head);
        free_info(list);
        return to_fi(errc::nomem);
      }
      i->fabric_attr->prov_version = p->version;
      i->fabric_attr->api_version = version;
      result_from_bits(mr, *i);
    }
    *tail = list;
    while (*tail) tail = &(*tail)->next;
  }
  if (!head) return to_fi(errc::nodata);
  *info = head;
  return 0;
}

int open_fabric(fi_fabric_attr* attr, fid_fabric** fabric, void* context) noexcept {
  if (!attr || !fabric || !attr->prov_name) {
    WEFT_WARN(core_provider(), FI_LOG_FABRIC, "fi_fabric needs attributes naming a provider");
    return to_fi(errc::inval);
  }
  fi_provider* p = find_provider(attr->prov_name);
  if (!p) {
    WEFT_WARN(core_provider(), FI_LOG_FABRIC, "no provider named %s", attr->prov_name);
    return to_fi(errc::nodev);
  }
  if (!attr->api_version) attr->api_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
  return p->fabric(attr, fabric, context);
}

}  // namespace weft::core
