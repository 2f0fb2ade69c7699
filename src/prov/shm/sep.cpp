// SPDX-License-Identifier: MIT
// weft — shm's scalable endpoints: util::scalable_ep with shm endpoints as
// its contexts, each in a region whose index names the context
// (shm.hpp, "scalable endpoints").
#include "core/log.hpp"
#include "prov/shm/shm.hpp"

#include <unistd.h>

#include <cstring>

namespace weft::shm {

namespace {

// The endpoint's name: the index its contexts derive theirs from (cookie).
addr_entry name_of(const util::scalable_ep& sep) noexcept {
  return addr_entry{static_cast<uint32_t>(::getpid()), static_cast<uint32_t>(pid_namespace_id()),
                    static_cast<uint32_t>(sep.cookie()), 1, 0};
}

int open_ctx(util::scalable_ep& sep, bool tx, int index, const fi_info& info,
             std::unique_ptr<util::sep_slot> slot, fid_ep** out, void* context) {
  const auto base = static_cast<uint32_t>(sep.cookie());
  const auto i = static_cast<uint32_t>(index);
  return endpoint::open_context(sep.dom(), info, tx ? FI_CLASS_TX_CTX : FI_CLASS_RX_CTX,
                                tx ? tx_ctx_index(base, i) : rx_ctx_index(base, i), name_of(sep),
                                std::move(slot), out, context);
}

int getname(const util::scalable_ep& sep, void* addr, size_t* addrlen) {
  if (!addrlen) return to_fi(errc::inval);
  if (!addr || *addrlen < name_bytes) {
    *addrlen = name_bytes;
    return to_fi(errc::toosmall);
  }
  format_name(name_of(sep), static_cast<char*>(addr));
  *addrlen = name_bytes;
  return 0;
}

const util::sep_hooks hooks = {
    .open_ctx = open_ctx,
    .getname = getname,
};

}  // namespace

int open_sep(util::domain& dom, fi_info* info, fid_ep** out, void* context) {
  auto* prov = &provider();
  if (!info->ep_attr || info->ep_attr->type != FI_EP_RDM || !offers(dom.api_version(), *info)) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL,
              "fi_scalable_ep: the fi_info asks for more than shm offers (FI_EP_RDM)");
    return to_fi(errc::inval);
  }
  if (pid_namespace_id() > UINT32_MAX) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "PID namespace inode does not fit an shm address");
    return to_fi(errc::nosys);
  }
  uint32_t base = endpoint::take_index();
  if (base == plain_index_limit) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL,
              "fi_scalable_ep: this process has opened %u shm endpoints, the most one may",
              plain_index_limit);
    return to_fi(errc::nospc);
  }
  return util::scalable_ep::open(dom, *info, max_contexts, max_contexts, &hooks, base, out,
                                 context);
}

}  // namespace weft::shm
