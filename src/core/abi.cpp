// SPDX-License-Identifier: MIT
// weft — the exported entry points of libfabric.so.1 with their symbol versions.
//
// Binaries bind to a versioned name (Debian's 1.17 tools import
// fi_getinfo@FABRIC_1.3). Each version reads the caller's structures with the
// size that version knew and always hands back current-layout objects, which
// older callers can read because fields were only ever appended.
#include "core/api.hpp"
#include "core/errc.hpp"
#include "core/getinfo.hpp"
#include "core/info.hpp"
#include "core/log.hpp"

#include <rdma/fi_domain.h>

#include <cstring>

using namespace weft;
using namespace weft::core;

namespace {

struct hints_copy {
  fi_info* info = nullptr;
  ~hints_copy() { free_info(info); }
};

int getinfo_abi(const abi_layout& l, uint32_t version, const char* node, const char* service,
                uint64_t flags, const fi_info* hints, fi_info** info) noexcept {
  if (!hints || &l == &abi_current) return getinfo(version, node, service, flags, hints, info);
  hints_copy copy;
  copy.info = dup_info(hints, l);
  if (!copy.info) return to_fi(errc::nomem);
  return getinfo(version, node, service, flags, copy.info, info);
}

fi_info* dupinfo_abi(const abi_layout& l, const fi_info* info) noexcept {
  return dup_info(info, l);
}

int fabric_abi(size_t attr_size, fi_fabric_attr* attr, fid_fabric** fabric,
               void* context) noexcept {
  if (!attr) return open_fabric(nullptr, fabric, context);
  fi_fabric_attr local{};
  std::memcpy(&local, attr, attr_size);
  if (attr_size <= offsetof(fi_fabric_attr, api_version)) local.api_version = FI_VERSION(1, 0);
  return open_fabric(&local, fabric, context);
}

}  // namespace

extern "C" {

#ifdef WEFT_STATIC
// The static archive for unit tests has no version script: plain names, the
// current layout.
int fi_getinfo(uint32_t v, const char* n, const char* s, uint64_t f, const fi_info* h,
               fi_info** i) {
  return getinfo_abi(abi_current, v, n, s, f, h, i);
}
fi_info* fi_dupinfo(const fi_info* i) { return dupinfo_abi(abi_current, i); }
void fi_freeinfo(fi_info* info) { free_info(info); }
int fi_fabric(fi_fabric_attr* attr, fid_fabric** fabric, void* context) {
  return fabric_abi(sizeof(fi_fabric_attr), attr, fabric, context);
}
#else
#define WEFT_VERSIONED(node) __attribute__((symver(node)))

// fi_getinfo: one body per layout; the default is the current one.
WEFT_EXPORT WEFT_VERSIONED("fi_getinfo@@FABRIC_1.9") int weft_getinfo_1_9(
    uint32_t v, const char* n, const char* s, uint64_t f, const fi_info* h, fi_info** i) {
  return getinfo_abi(abi_current, v, n, s, f, h, i);
}
WEFT_EXPORT WEFT_VERSIONED("fi_getinfo@FABRIC_1.8") int weft_getinfo_1_8(
    uint32_t v, const char* n, const char* s, uint64_t f, const fi_info* h, fi_info** i) {
  return getinfo_abi(abi_1_8, v, n, s, f, h, i);
}
WEFT_EXPORT WEFT_VERSIONED("fi_getinfo@FABRIC_1.7") int weft_getinfo_1_7(
    uint32_t v, const char* n, const char* s, uint64_t f, const fi_info* h, fi_info** i) {
  return getinfo_abi(abi_1_7, v, n, s, f, h, i);
}
WEFT_EXPORT WEFT_VERSIONED("fi_getinfo@FABRIC_1.3") int weft_getinfo_1_3(
    uint32_t v, const char* n, const char* s, uint64_t f, const fi_info* h, fi_info** i) {
  return getinfo_abi(abi_1_3, v, n, s, f, h, i);
}
WEFT_EXPORT WEFT_VERSIONED("fi_getinfo@FABRIC_1.2") int weft_getinfo_1_2(
    uint32_t v, const char* n, const char* s, uint64_t f, const fi_info* h, fi_info** i) {
  return getinfo_abi(abi_1_2, v, n, s, f, h, i);
}
WEFT_EXPORT WEFT_VERSIONED("fi_getinfo@FABRIC_1.1") int weft_getinfo_1_1(
    uint32_t v, const char* n, const char* s, uint64_t f, const fi_info* h, fi_info** i) {
  return getinfo_abi(abi_1_1, v, n, s, f, h, i);
}
WEFT_EXPORT WEFT_VERSIONED("fi_getinfo@FABRIC_1.0") int weft_getinfo_1_0(
    uint32_t v, const char* n, const char* s, uint64_t f, const fi_info* h, fi_info** i) {
  return getinfo_abi(abi_1_0, v, n, s, f, h, i);
}

// fi_dupinfo: reads the caller's info with its version's sizes.
WEFT_EXPORT WEFT_VERSIONED("fi_dupinfo@@FABRIC_1.9") fi_info* weft_dupinfo_1_9(const fi_info* i) {
  return dupinfo_abi(abi_current, i);
}
WEFT_EXPORT WEFT_VERSIONED("fi_dupinfo@FABRIC_1.8") fi_info* weft_dupinfo_1_8(const fi_info* i) {
  return dupinfo_abi(abi_1_8, i);
}
WEFT_EXPORT WEFT_VERSIONED("fi_dupinfo@FABRIC_1.7") fi_info* weft_dupinfo_1_7(const fi_info* i) {
  return dupinfo_abi(abi_1_7, i);
}
WEFT_EXPORT WEFT_VERSIONED("fi_dupinfo@FABRIC_1.3") fi_info* weft_dupinfo_1_3(const fi_info* i) {
  return dupinfo_abi(abi_1_3, i);
}
WEFT_EXPORT WEFT_VERSIONED("fi_dupinfo@FABRIC_1.2") fi_info* weft_dupinfo_1_2(const fi_info* i) {
  return dupinfo_abi(abi_1_2, i);
}
WEFT_EXPORT WEFT_VERSIONED("fi_dupinfo@FABRIC_1.1") fi_info* weft_dupinfo_1_1(const fi_info* i) {
  return dupinfo_abi(abi_1_1, i);
}
WEFT_EXPORT WEFT_VERSIONED("fi_dupinfo@FABRIC_1.0") fi_info* weft_dupinfo_1_0(const fi_info* i) {
  return dupinfo_abi(abi_1_0, i);
}

// fi_freeinfo: what we hand out is always current-layout, so one body.
WEFT_EXPORT WEFT_VERSIONED("fi_freeinfo@@FABRIC_1.9") WEFT_VERSIONED("fi_freeinfo@FABRIC_1.8")
    WEFT_VERSIONED("fi_freeinfo@FABRIC_1.7") WEFT_VERSIONED("fi_freeinfo@FABRIC_1.3")
        WEFT_VERSIONED("fi_freeinfo@FABRIC_1.2") WEFT_VERSIONED("fi_freeinfo@FABRIC_1.1")
            WEFT_VERSIONED("fi_freeinfo@FABRIC_1.0") void weft_freeinfo(fi_info* info) {
  free_info(info);
}

WEFT_EXPORT WEFT_VERSIONED("fi_fabric@@FABRIC_1.1") int weft_fabric_1_1(fi_fabric_attr* attr,
                                                                         fid_fabric** fabric,
                                                                         void* context) {
  return fabric_abi(sizeof(fi_fabric_attr), attr, fabric, context);
}
WEFT_EXPORT WEFT_VERSIONED("fi_fabric@FABRIC_1.0") int weft_fabric_1_0(fi_fabric_attr* attr,
                                                                        fid_fabric** fabric,
                                                                        void* context) {
  return fabric_abi(offsetof(fi_fabric_attr, api_version), attr, fabric, context);
}

#endif  // WEFT_STATIC

WEFT_EXPORT int fi_fabric2(fi_info* info, fid_fabric** fabric, uint64_t flags, void* context) {
  if (!info || !info->fabric_attr) return to_fi(errc::inval);
  if (flags) return to_fi(errc::badflags);
  return fabric_abi(sizeof(fi_fabric_attr), info->fabric_attr, fabric, context);
}

WEFT_EXPORT uint32_t fi_version(void) { return FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION); }

WEFT_EXPORT int fi_open(uint32_t version, const char* name, void* attr, size_t attr_len,
                        uint64_t flags, struct fid** fid, void* context) {
  (void)version, (void)attr, (void)attr_len, (void)context;
  if (!name || !fid) return to_fi(errc::inval);
  if (std::strcmp(name, "logging") == 0) {
    if (flags) return to_fi(errc::badflags);
    *fid = logging_fid();
    return 0;
  }
  // No other named, domain-less objects yet ("mr_cache"): clients treat
  // ENOSYS as "not available here" and carry on.
  WEFT_INFO(core_provider(), FI_LOG_CORE, "fi_open: no object named %s", name);
  return to_fi(errc::nosys);
}

}  // extern "C"
