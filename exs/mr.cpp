// SPDX-License-Identifier: MIT
// libexs: registered memory. exs_mregister records a region; a domain whose
// provider wants local registration (FI_MR_LOCAL) registers it the first
// time an operation on that domain uses it.
#include "exs_impl.hpp"

#include <cerrno>

namespace exs {

region* find_region(exs_mhandle_t mh) {
  auto& rs = lib().regions;
  auto it = rs.find(mh);
  return it == rs.end() ? nullptr : it->second;
}

uint64_t fresh_key() { return lib().next_key++; }

void* desc_for(region* r, fabric_ctx* fc) {
  if (!r || !fc->mr_local) return nullptr;
  auto it = r->mrs.find(fc->domain);
  if (it != r->mrs.end()) return fi_mr_desc(it->second);
  fid_mr* mr = nullptr;
  if (fi_mr_reg(fc->domain, r->addr, r->len, FI_SEND | FI_RECV, 0, fresh_key(), 0, &mr, nullptr))
    return nullptr;
  r->mrs[fc->domain] = mr;
  return fi_mr_desc(mr);
}

}  // namespace exs

using namespace exs;

EXS_API exs_mhandle_t exs_mregister(const void* addr, size_t len, int access) {
  if (!addr || len == 0 || access == 0 || (access & ~(EXS_ACCESS_READ | EXS_ACCESS_WRITE)))
    return errno = EINVAL, EXS_MHANDLE_INVALID;
  library& L = lib();
  std::lock_guard g{L.m};
  auto* r = new (std::nothrow) region;
  if (!r) return errno = ENOMEM, EXS_MHANDLE_INVALID;
  r->handle = L.next_m++;
  r->addr = static_cast<char*>(const_cast<void*>(addr));
  r->len = len;
  r->access = access;
  L.regions[r->handle] = r;
  return r->handle;
}

EXS_API int exs_mderegister(exs_mhandle_t* mh) {
  if (!mh) return fail(EINVAL);
  library& L = lib();
  std::lock_guard g{L.m};
  region* r = find_region(*mh);
  if (!r) return fail(EINVAL);
  if (r->users > 0) return fail(EBUSY);  // operations still use it
  for (auto& [d, mr] : r->mrs) fi_close(&mr->fid);
  L.regions.erase(*mh);
  delete r;
  *mh = EXS_MHANDLE_INVALID;
  return 0;
}
