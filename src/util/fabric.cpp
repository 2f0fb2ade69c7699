// SPDX-License-Identifier: MIT
// weft — the fabric object.
#include "util/fabric.hpp"

#include "core/log.hpp"
#include "util/eq.hpp"
#include "util/wait_set.hpp"

#include <new>

namespace weft::util {

namespace {

int domain(fid_fabric* f, fi_info* info, fid_domain** dom, void* context) noexcept {
  if (!info || !dom || !info->domain_attr) return to_fi(errc::inval);
  auto* fab = fabric::from(f);
  return abi_guard([&] { return fab->hooks().domain(*fab, info, dom, context); });
}

int domain2(fid_fabric* f, fi_info* info, fid_domain** dom, uint64_t flags,
            void* context) noexcept {
  if (flags) return to_fi(errc::badflags);
  return domain(f, info, dom, context);
}

int passive_ep(fid_fabric* f, fi_info* info, fid_pep** pep, void* context) noexcept {
  auto* fab = fabric::from(f);
  if (!fab->hooks().passive_ep) return to_fi(errc::nosys);
  if (!info || !pep) return to_fi(errc::inval);
  return abi_guard([&] { return fab->hooks().passive_ep(*fab, info, pep, context); });
}

int eq_open(fid_fabric* f, fi_eq_attr* attr, fid_eq** eq, void* context) noexcept {
  return eq::open(*fabric::from(f), attr, eq, context);
}

int wait_open(fid_fabric* f, fi_wait_attr* attr, fid_wait** waitset) noexcept {
  return wait_set::open(*fabric::from(f), attr, waitset);
}

int trywait(fid_fabric* f, fid** fids, int count) noexcept {
  return wait_set::trywait(*fabric::from(f), fids, count);
}

constexpr fi_ops_fabric fabric_ops = {
    .size = sizeof(fi_ops_fabric),
    .domain = domain,
    .passive_ep = passive_ep,
    .eq_open = eq_open,
    .wait_open = wait_open,
    .trywait = trywait,
    .domain2 = domain2,
};

}  // namespace

fabric::fabric(const fi_provider* prov, const fabric_hooks* hooks, const fi_fabric_attr& attr,
               void* context)
    : fid_object(FI_CLASS_FABRIC, context),
      prov_(prov),
      hooks_(hooks),
      api_version_(attr.api_version),
      name_(attr.name ? attr.name : "") {
  ops = const_cast<fi_ops_fabric*>(&fabric_ops);
  api_version = api_version_;
}

int fabric::open(const fi_provider* prov, const fabric_hooks* hooks, fi_fabric_attr* attr,
                 fid_fabric** out, void* context) noexcept {
  if (!attr || !out) return to_fi(errc::inval);
  return abi_guard([&] {
    *out = new fabric(prov, hooks, *attr, context);
    return 0;
  });
}

}  // namespace weft::util
