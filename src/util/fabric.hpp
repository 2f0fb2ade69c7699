// SPDX-License-Identifier: MIT
// weft — the fabric object every provider uses; the provider supplies how its
// domains and passive endpoints open.
#pragma once

#include "util/object.hpp"
#include "util/progress_thread.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/providers/fi_prov.h>

#include <string>

namespace weft::util {

class fabric;

// What a provider adds to the shared fabric: static, one per provider.
struct fabric_hooks {
  int (*domain)(fabric& fab, fi_info* info, fid_domain** dom, void* context);
  int (*passive_ep)(fabric& fab, fi_info* info, fid_pep** pep, void* context);  // may be null
};

class fabric : public fid_object<fabric, fid_fabric> {
 public:
  fabric(const fi_provider* prov, const fabric_hooks* hooks, const fi_fabric_attr& attr,
         void* context);

  // fi_fabric for a provider whose fabrics need no more than this class.
  static int open(const fi_provider* prov, const fabric_hooks* hooks, fi_fabric_attr* attr,
                  fid_fabric** out, void* context) noexcept;

  const fi_provider* provider() const noexcept { return prov_; }
  uint32_t api() const noexcept { return api_version_; }
  const std::string& name() const noexcept { return name_; }
  const fabric_hooks& hooks() const noexcept { return *hooks_; }
  // Automatic control progress (FI_PROGRESS_AUTO in control_progress) for
  // the objects that belong to the fabric rather than a domain: passive
  // endpoints register their listening sockets here. Started on first use.
  progress_thread& control_progress() noexcept { return control_; }

 private:
  const fi_provider* prov_;
  const fabric_hooks* hooks_;
  uint32_t api_version_;
  std::string name_;
  progress_thread control_;  // last: joined before the rest goes
};

// Whether `a` asks control operations to progress by themselves:
// FI_PROGRESS_AUTO, or 2.x's FI_PROGRESS_CONTROL_UNIFIED (control progresses
// with data) together with automatic data progress.
inline bool control_is_auto(const fi_domain_attr* a) noexcept {
  if (!a) return false;
  return a->control_progress == FI_PROGRESS_AUTO ||
         (a->control_progress == FI_PROGRESS_CONTROL_UNIFIED &&
          a->data_progress == FI_PROGRESS_AUTO);
}

}  // namespace weft::util
