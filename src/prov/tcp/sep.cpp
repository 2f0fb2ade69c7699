// SPDX-License-Identifier: MIT
// weft — tcp's scalable endpoints (FI_EP_RDM): util::scalable_ep with tcp
// endpoints as its contexts.
//
// The endpoint's one address is its IP and the first port of a block it
// holds: receive context i listens on that port + i, so a sender reaches
// it by arithmetic (fi_rx_addr), with no lookup and nothing per peer. The
// block is taken whole at fi_scalable_ep, every port listening at once, so
// no other socket can take one of them meanwhile; each receive context
// takes its listener when it opens. A transmit context listens nowhere: its
// connections are one-way (proto.hpp, feature_one_way) and name the
// scalable endpoint, so receivers see the one address the application
// inserted, whichever context sends (docs/decisions.md, "Scalable
// endpoints").
#include "core/log.hpp"
#include "prov/tcp/tcp.hpp"
#include "util/net.hpp"

#include <netinet/in.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

namespace weft::tcp {

namespace {

// The block: the endpoint's name and the listeners its receive contexts
// have not taken yet (a context closed and opened again listens anew).
struct port_block {
  sockaddr_storage name{};
  std::mutex mutex;
  std::vector<util::unique_fd> listeners;
};

constexpr int backlog = 512;
constexpr int search_attempts = 64;

port_block* block_of(const util::scalable_ep& sep) noexcept {
  return reinterpret_cast<port_block*>(sep.cookie());
}

sockaddr_storage with_port(const sockaddr_storage& ss, unsigned port) noexcept {
  sockaddr_storage out = ss;
  util::set_sockaddr_port(reinterpret_cast<sockaddr*>(&out), static_cast<uint16_t>(port));
  return out;
}

// Listens on `n` consecutive ports from `first` (0: any the kernel gives
// the first, then the next ones); errno of the first refusal, 0 when all are
// held.
int listen_block(const sockaddr_storage& at, unsigned first, size_t n, port_block& b) noexcept {
  std::vector<util::unique_fd> got;
  try {
    got.reserve(n);
  } catch (...) {
    return ENOMEM;
  }
  sockaddr_storage a = with_port(at, first);
  util::unique_fd s;
  if (int e = try_listen(reinterpret_cast<sockaddr*>(&a), backlog, s)) return e;
  socklen_t len = sizeof b.name;
  ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&b.name), &len);
  const unsigned base = util::sockaddr_port(reinterpret_cast<sockaddr*>(&b.name));
  got.push_back(std::move(s));
  for (size_t i = 1; i < n; ++i) {
    if (base + i > 65535) return EADDRINUSE;
    sockaddr_storage next = with_port(at, static_cast<unsigned>(base + i));
    util::unique_fd t;
    if (int e = try_listen(reinterpret_cast<sockaddr*>(&next), backlog, t)) return e;
    got.push_back(std::move(t));
  }
  b.listeners = std::move(got);
  return 0;
}

int open_ctx(util::scalable_ep& sep, bool tx, int index, const fi_info& info,
             std::unique_ptr<util::sep_slot> slot, fid_ep** out, void* context) {
  port_block& b = *block_of(sep);
  util::unique_fd listener;
  if (!tx) {
    {
      std::lock_guard<std::mutex> g(b.mutex);
      listener = std::move(b.listeners[static_cast<size_t>(index)]);
    }
    if (!listener.valid()) {
      // Opened before and closed: its port is listened on again (logged
      // if another socket took it meanwhile).
      sockaddr_storage at = with_port(
          b.name, util::sockaddr_port(reinterpret_cast<sockaddr*>(&b.name)) + unsigned(index));
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
  if (!addrlen) return to_fi(errc::inval);
  const sockaddr_storage& name = block_of(sep)->name;
  const size_t need = util::sockaddr_len(reinterpret_cast<const sockaddr*>(&name));
  const size_t have = *addrlen;
  *addrlen = need;
  if (!addr || have < need) return to_fi(errc::toosmall);
  std::memcpy(addr, &name, need);
  return 0;
}

void release(uint64_t cookie) noexcept { delete reinterpret_cast<port_block*>(cookie); }

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
  const size_t nrx = info->ep_attr->rx_ctx_cnt ? info->ep_attr->rx_ctx_cnt : 1;
  const size_t ntx = info->ep_attr->tx_ctx_cnt ? info->ep_attr->tx_ctx_cnt : 1;
  if (nrx > max_contexts || ntx > max_contexts)  // util refuses them, logged
    return util::scalable_ep::open(dom, *info, max_contexts, max_contexts, &hooks, 0, out,
                                   context);
  auto* src = static_cast<const sockaddr*>(info->src_addr);
  if (src && (!util::sockaddr_len(src) || info->src_addrlen < util::sockaddr_len(src))) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_scalable_ep: the source address is not an IP address");
    return to_fi(errc::inval);
  }
  sockaddr_storage at{};
  if (src)
    std::memcpy(&at, src, util::sockaddr_len(src));
  else
    at.ss_family = info->addr_format == FI_SOCKADDR_IN6 ? AF_INET6 : AF_INET;
  auto block = std::unique_ptr<port_block>(new (std::nothrow) port_block);
  if (!block) return to_fi(errc::nomem);
  const unsigned asked = util::sockaddr_port(reinterpret_cast<sockaddr*>(&at));
  int e = 0;
  // A port asked for fixes the block; port 0 searches for a free one.
  for (int attempt = 0; attempt < (asked ? 1 : search_attempts); ++attempt)
    if (!(e = listen_block(at, asked, nrx, *block))) break;
  if (e) {
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
