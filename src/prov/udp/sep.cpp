// SPDX-License-Identifier: MIT
// weft — udp's scalable endpoints: util::scalable_ep with udp endpoints
// (FI_EP_RDM or FI_EP_DGRAM) as its contexts.
//
// As tcp's (prov/tcp/sep.cpp), the endpoint's one address is a block of
// ports (util/port_block.hpp): receive context i receives on its port + i.
// FI_EP_RDM: a transmit context sends from a port of its own, where its
// peers' acknowledgements come back, and every message it sends names the
// scalable endpoint's port (rd::msg::name_port), so receivers know it by
// the one address the application inserted. Each message also says which
// receive context it means (rd::msg::rx_index); one that reaches another
// is dropped there, logged. FI_EP_DGRAM sends bare datagrams, with no
// header to name a sender: a transmit context sends through a descriptor
// of the endpoint's first socket, so its datagrams come from the
// endpoint's address (docs/decisions.md, "Scalable endpoints").
#include "core/log.hpp"
#include "prov/udp/rdm.hpp"
#include "util/net.hpp"
#include "util/port_block.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace weft::udp {

namespace {

struct udp_block : util::port_block {
  fi_ep_type type = FI_EP_RDM;
  util::unique_fd first;  // DGRAM: the first socket, for transmit contexts
};

udp_block* block_of(const util::scalable_ep& sep) noexcept {
  return reinterpret_cast<udp_block*>(sep.cookie());
}

// A datagram socket bound to `at`; errno of the failure, 0 on success.
int bound_socket(const sockaddr_storage& at, util::unique_fd& out) noexcept {
  util::unique_fd s{::socket(at.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
  auto* sa = reinterpret_cast<const sockaddr*>(&at);
  if (!s.valid() || ::bind(s.get(), sa, util::sockaddr_len(sa)) != 0) return errno;
  out = std::move(s);
  return 0;
}

errc errc_of(int e) noexcept {
  return e == EADDRINUSE ? errc::addrinuse : e == EMFILE ? errc::mfile : errc::other;
}

int open_ctx(util::scalable_ep& sep, bool tx, int index, const fi_info& info,
             std::unique_ptr<util::sep_slot> slot, fid_ep** out, void* context) {
  udp_block& b = *block_of(sep);
  util::unique_fd s;
  sockaddr_storage at;
  if (tx && b.type == FI_EP_DGRAM) {
    s = util::unique_fd{::fcntl(b.first.get(), F_DUPFD_CLOEXEC, 0)};
    if (!s.valid()) {
      const int e = errno;
      WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_tx_context %d: %s", index, std::strerror(e));
      return to_fi(errc_of(e));
    }
    return endpoint::open_context(sep.dom(), info, FI_CLASS_TX_CTX, std::move(s), b.name,
                                  std::move(slot), out, context);
  }
  if (tx) {
    at = util::with_port(b.name, 0);  // a port of its own, where its acknowledgements come
  } else {
    s = b.take(size_t(index));
    at = b.address(size_t(index));  // opened before and closed: bound again below
  }
  if (!s.valid()) {
    if (int e = bound_socket(at, s)) {
      WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_%s_context %d: cannot bind a UDP socket on %s: %s",
                tx ? "tx" : "rx", index,
                util::format_sockaddr(reinterpret_cast<sockaddr*>(&at)).c_str(), std::strerror(e));
      return to_fi(errc_of(e));
    }
  }
  if (b.type == FI_EP_DGRAM)
    return endpoint::open_context(sep.dom(), info, FI_CLASS_RX_CTX, std::move(s), b.name,
                                  std::move(slot), out, context);
  return rdm_endpoint::open_context(sep.dom(), info, tx ? FI_CLASS_TX_CTX : FI_CLASS_RX_CTX,
                                    std::move(s), uint8_t(tx ? 0 : index), b.name,
                                    std::move(slot), out, context);
}

int getname(const util::scalable_ep& sep, void* addr, size_t* addrlen) {
  return block_of(sep)->getname(addr, addrlen);
}

void release(uint64_t cookie) noexcept { delete reinterpret_cast<udp_block*>(cookie); }

const util::sep_hooks hooks = {
    .open_ctx = open_ctx,
    .getname = getname,
    .release = release,
};

}  // namespace

int open_sep(util::domain& dom, fi_info* info, fid_ep** out, void* context) {
  auto* prov = &provider();
  if (!info || !info->ep_attr ||
      (info->ep_attr->type != FI_EP_RDM && info->ep_attr->type != FI_EP_DGRAM) ||
      !offers(dom.api_version(), *info)) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL,
              "fi_scalable_ep: the fi_info asks for more than udp offers (FI_EP_RDM, "
              "FI_EP_DGRAM)");
    return to_fi(errc::inval);
  }
  size_t ntx, nrx;
  sockaddr_storage at;
  if (int ret = util::scalable_ep::counts(prov, *info, max_contexts, max_contexts, ntx, nrx))
    return ret;
  if (int ret = util::sep_source(prov, *info, at)) return ret;
  auto block = std::unique_ptr<udp_block>(new (std::nothrow) udp_block);
  if (!block) return to_fi(errc::nomem);
  block->type = info->ep_attr->type;
  if (int e = block->reserve(at, nrx, bound_socket)) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_scalable_ep: no %zu consecutive UDP ports at %s (%s)",
              nrx, util::format_sockaddr(reinterpret_cast<sockaddr*>(&at)).c_str(),
              std::strerror(e));
    return to_fi(errc_of(e));
  }
  if (block->type == FI_EP_DGRAM && !(block->first = block->duplicate(0)).valid()) {
    const int e = errno;
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_scalable_ep: %s", std::strerror(e));
    return to_fi(errc_of(e));
  }
  int ret = util::scalable_ep::open(dom, *info, max_contexts, max_contexts, &hooks,
                                    reinterpret_cast<uint64_t>(block.get()), out, context);
  if (ret == 0) block.release();  // the endpoint's now (release)
  return ret;
}

}  // namespace weft::udp
