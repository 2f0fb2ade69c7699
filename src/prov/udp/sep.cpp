// SPDX-License-Identifier: MIT
// weft — udp's scalable endpoints: util::scalable_ep with udp endpoints
// (FI_EP_RDM or FI_EP_DGRAM) as its contexts.
//
// As tcp's (prov/tcp/sep.cpp): the endpoint's one address is its IP and the
// first port of a block of consecutive ports, bound from fi_scalable_ep on;
// receive context i receives on that port + i, so fi_rx_addr reaches it by
// arithmetic. A transmit context sends from a port of its own, where its
// peers' acknowledgements come back, and every message it sends names the
// scalable endpoint's port (rd::msg::name_port): receivers know it by the
// one address the application inserted. Each message also says which
// receive context it means (rd::msg::rx_index); one that reaches another
// is dropped there, logged (docs/decisions.md, "Scalable endpoints").
// FI_EP_DGRAM sends bare datagrams, with no header to name a sender: a
// transmit context sends through a descriptor of the endpoint's first
// socket, so its datagrams come from the endpoint's address.
#include "core/log.hpp"
#include "prov/udp/rdm.hpp"
#include "util/net.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

namespace weft::udp {

namespace {

struct port_block {
  sockaddr_storage name{};
  fi_ep_type type = FI_EP_RDM;
  std::mutex mutex;
  std::vector<util::unique_fd> sockets;  // not yet taken by their receive contexts
  util::unique_fd first;                 // DGRAM: the first socket, for transmit contexts
};

constexpr int search_attempts = 64;

port_block* block_of(const util::scalable_ep& sep) noexcept {
  return reinterpret_cast<port_block*>(sep.cookie());
}

sockaddr_storage with_port(const sockaddr_storage& ss, unsigned port) noexcept {
  sockaddr_storage out = ss;
  util::set_sockaddr_port(reinterpret_cast<sockaddr*>(&out), static_cast<uint16_t>(port));
  return out;
}

// A datagram socket bound to `at`; errno of the failure, 0 on success.
int bound_socket(const sockaddr_storage& at, util::unique_fd& out) noexcept {
  util::unique_fd s{::socket(at.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
  auto* sa = reinterpret_cast<const sockaddr*>(&at);
  if (!s.valid() || ::bind(s.get(), sa, util::sockaddr_len(sa)) != 0) return errno;
  out = std::move(s);
  return 0;
}

// Binds `n` consecutive ports from `first` (0: the kernel's choice, then
// the next ones); errno of the first refusal, 0 when all are held.
int bind_block(const sockaddr_storage& at, unsigned first, size_t n, port_block& b) noexcept {
  std::vector<util::unique_fd> got;
  try {
    got.reserve(n);
  } catch (...) {
    return ENOMEM;
  }
  util::unique_fd s;
  if (int e = bound_socket(with_port(at, first), s)) return e;
  socklen_t len = sizeof b.name;
  ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&b.name), &len);
  const unsigned base = util::sockaddr_port(reinterpret_cast<sockaddr*>(&b.name));
  got.push_back(std::move(s));
  for (size_t i = 1; i < n; ++i) {
    if (base + i > 65535) return EADDRINUSE;
    util::unique_fd t;
    if (int e = bound_socket(with_port(at, unsigned(base + i)), t)) return e;
    got.push_back(std::move(t));
  }
  b.sockets = std::move(got);
  return 0;
}

int open_ctx(util::scalable_ep& sep, bool tx, int index, const fi_info& info,
             std::unique_ptr<util::sep_slot> slot, fid_ep** out, void* context) {
  port_block& b = *block_of(sep);
  util::unique_fd s;
  sockaddr_storage at = b.name;
  if (tx && b.type == FI_EP_DGRAM) {
    s = util::unique_fd{::fcntl(b.first.get(), F_DUPFD_CLOEXEC, 0)};
    if (!s.valid()) {
      WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_tx_context %d: %s", index, std::strerror(errno));
      return to_fi(errno == EMFILE ? errc::mfile : errc::other);
    }
    return endpoint::open_context(sep.dom(), info, FI_CLASS_TX_CTX, std::move(s), b.name,
                                  std::move(slot), out, context);
  }
  if (tx) {
    at = with_port(b.name, 0);  // a port of its own, where its acknowledgements come
  } else {
    std::lock_guard<std::mutex> g(b.mutex);
    s = std::move(b.sockets[size_t(index)]);
    // Opened before and closed: its port is bound again below.
    at = with_port(b.name, util::sockaddr_port(reinterpret_cast<sockaddr*>(&b.name)) +
                               unsigned(index));
  }
  if (!s.valid()) {
    if (int e = bound_socket(at, s)) {
      WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_%s_context %d: cannot bind a UDP socket on %s: %s",
                tx ? "tx" : "rx", index,
                util::format_sockaddr(reinterpret_cast<sockaddr*>(&at)).c_str(), std::strerror(e));
      return to_fi(e == EADDRINUSE ? errc::addrinuse : errc::other);
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
  if (!info || !info->ep_attr ||
      (info->ep_attr->type != FI_EP_RDM && info->ep_attr->type != FI_EP_DGRAM) ||
      !offers(dom.api_version(), *info)) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL,
              "fi_scalable_ep: the fi_info asks for more than udp offers (FI_EP_RDM, "
              "FI_EP_DGRAM)");
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
  block->type = info->ep_attr->type;
  const unsigned asked = util::sockaddr_port(reinterpret_cast<sockaddr*>(&at));
  int e = 0;
  for (int attempt = 0; attempt < (asked ? 1 : search_attempts); ++attempt)
    if (!(e = bind_block(at, asked, nrx, *block))) break;
  if (e) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_scalable_ep: no %zu consecutive UDP ports at %s (%s)",
              nrx, util::format_sockaddr(reinterpret_cast<sockaddr*>(&at)).c_str(),
              std::strerror(e));
    return to_fi(e == EADDRINUSE ? errc::addrinuse : errc::other);
  }
  if (block->type == FI_EP_DGRAM) {
    block->first = util::unique_fd{::fcntl(block->sockets[0].get(), F_DUPFD_CLOEXEC, 0)};
    if (!block->first.valid()) {
      WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_scalable_ep: %s", std::strerror(errno));
      return to_fi(errno == EMFILE ? errc::mfile : errc::other);
    }
  }
  int ret = util::scalable_ep::open(dom, *info, max_contexts, max_contexts, &hooks,
                                    reinterpret_cast<uint64_t>(block.get()), out, context);
  if (ret == 0) block.release();  // the endpoint's now (release)
  return ret;
}

}  // namespace weft::udp
