// SPDX-License-Identifier: MIT
// weft — tcp's scalable endpoints (FI_EP_RDM): util::scalable_ep with tcp
// endpoints as its contexts.
//
// The endpoint's one address is a block of ports (util/port_block.hpp):
// receive context i listens on its port + i, every port listening from
// fi_scalable_ep on. A transmit context listens nowhere: its
// connections are one-way (proto.hpp, feature_one_way) and name the
// scalable endpoint, so receivers see the one address the application
// inserted, whichever context sends (docs/decisions.md, "Scalable
// endpoints").
#include "core/log.hpp"
#include "prov/tcp/tcp.hpp"
#include "util/net.hpp"
#include "util/port_block.hpp"

#include <netinet/in.h>

#include <cerrno>
#include <cstring>

namespace weft::tcp {

namespace {

constexpr int backlog = 512;

int listen_on(const sockaddr_storage& at, util::unique_fd& out) noexcept {
  return try_listen(reinterpret_cast<const sockaddr*>(&at), backlog, out);
}

util::port_block* block_of(const util::scalable_ep& sep) noexcept {
  return reinterpret_cast<util::port_block*>(sep.cookie());
}

int open_ctx(util::scalable_ep& sep, bool tx, int index, const fi_info& info,
             std::unique_ptr<util::sep_slot> slot, fid_ep** out, void* context) {
  util::port_block& b = *block_of(sep);
  util::unique_fd listener;
  if (!tx) {
    listener = b.take(size_t(index));
    if (!listener.valid()) {
      // Opened before and closed: its port is listened on again (logged
      // if another socket took it meanwhile).
      sockaddr_storage at = b.address(size_t(index));
      if (errc e = listen_socket(reinterpret_cast<sockaddr*>(&at), backlog, listener);
          e != errc::ok)
        return to_fi(e);
    }
  }
  return endpoint::open_context(sep.dom(), info, tx ? FI_CLASS_TX_CTX : FI_CLASS_RX_CTX,
                                std::move(listener), static_cast<uint8_t>(tx ? 0 : index), b.name,
                                std::move(slot), out, context);
}

int getname(const util::scalable_ep& sep, void* addr, size_t* addrlen) {
  return block_of(sep)->getname(addr, addrlen);
}

void release(uint64_t cookie) noexcept { delete reinterpret_cast<util::port_block*>(cookie); }

const util::sep_hooks hooks = {
    .open_ctx = open_ctx,
    .getname = getname,
    .release = release,
};

}  // namespace

int open_sep(util::domain& dom, fi_info* info, fid_ep** out, void* context) {
  auto* prov = &provider();
  if (!info || !info->ep_attr || info->ep_attr->type != FI_EP_RDM ||
      !offers(dom.api_version(), *info)) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL,
              "fi_scalable_ep: the fi_info asks for more than tcp offers (FI_EP_RDM)");
    return to_fi(errc::inval);
  }
  size_t ntx, nrx;
  sockaddr_storage at;
  if (int ret = util::scalable_ep::counts(prov, *info, max_contexts, max_contexts, ntx, nrx))
    return ret;
  if (int ret = util::sep_source(prov, *info, at)) return ret;
  auto block = std::unique_ptr<util::port_block>(new (std::nothrow) util::port_block);
  if (!block) return to_fi(errc::nomem);
  if (int e = block->reserve(at, nrx, listen_on)) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL,
              "fi_scalable_ep: no %zu consecutive ports to listen on at %s (%s)", nrx,
              util::format_sockaddr(reinterpret_cast<sockaddr*>(&at)).c_str(),
              std::strerror(e));
    return to_fi(errc_of_errno(e));
  }
  int ret = util::scalable_ep::open(dom, *info, max_contexts, max_contexts, &hooks,
                                    reinterpret_cast<uint64_t>(block.get()), out, context);
  if (ret == 0) block.release();  // the endpoint's now (release)
  return ret;
}

}  // namespace weft::tcp
