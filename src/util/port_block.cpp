// SPDX-License-Identifier: MIT
// weft — a block of consecutive ports (port_block.hpp).
#include "util/port_block.hpp"

#include "core/errc.hpp"
#include "core/log.hpp"
#include "util/net.hpp"

#include <fcntl.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

namespace weft::util {

sockaddr_storage with_port(const sockaddr_storage& at, unsigned port) noexcept {
  sockaddr_storage out = at;
  set_sockaddr_port(reinterpret_cast<sockaddr*>(&out), static_cast<uint16_t>(port));
  return out;
}

int sep_source(const fi_provider* prov, const fi_info& info, sockaddr_storage& at) noexcept {
  at = sockaddr_storage{};
  auto* src = static_cast<const sockaddr*>(info.src_addr);
  if (!src) {
    at.ss_family = info.addr_format == FI_SOCKADDR_IN6 ? AF_INET6 : AF_INET;
    return 0;
  }
  const size_t len = sockaddr_len(src);
  if (!len || info.src_addrlen < len || len > sizeof at) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_scalable_ep: the source address is not an IP address");
    return to_fi(errc::inval);
  }
  std::memcpy(&at, src, len);
  return 0;
}

int port_block::try_once(const sockaddr_storage& at, size_t n, open_fn open_one) noexcept {
  std::vector<unique_fd> got;
  try {
    got.reserve(n);
  } catch (...) {
    return ENOMEM;
  }
  unique_fd s;
  if (int e = open_one(at, s)) return e;
  sockaddr_storage first{};
  socklen_t len = sizeof first;
  ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&first), &len);
  const unsigned base = sockaddr_port(reinterpret_cast<sockaddr*>(&first));
  got.push_back(std::move(s));
  for (size_t i = 1; i < n; ++i) {
    if (base + i > 65535) return EADDRINUSE;
    unique_fd t;
    if (int e = open_one(with_port(at, unsigned(base + i)), t)) return e;
    got.push_back(std::move(t));
  }
  name = first;
  sockets_ = std::move(got);
  return 0;
}

int port_block::reserve(const sockaddr_storage& at, size_t n, open_fn open_one,
                        int attempts) noexcept {
  const bool fixed = sockaddr_port(reinterpret_cast<const sockaddr*>(&at)) != 0;
  int e = 0;
  for (int i = 0; i < (fixed ? 1 : attempts); ++i)
    if (!(e = try_once(at, n, open_one))) return 0;
  return e;
}

unique_fd port_block::take(size_t i) noexcept {
  std::lock_guard<std::mutex> g(mutex_);
  return i < sockets_.size() ? std::move(sockets_[i]) : unique_fd{};
}

unique_fd port_block::duplicate(size_t i) noexcept {
  std::lock_guard<std::mutex> g(mutex_);
  if (i >= sockets_.size() || !sockets_[i].valid()) {
    errno = EBADF;
    return unique_fd{};
  }
  return unique_fd{::fcntl(sockets_[i].get(), F_DUPFD_CLOEXEC, 0)};
}

sockaddr_storage port_block::address(size_t i) const noexcept {
  return with_port(name, sockaddr_port(reinterpret_cast<const sockaddr*>(&name)) + unsigned(i));
}

int port_block::getname(void* addr, size_t* addrlen) const noexcept {
  if (!addrlen) return to_fi(errc::inval);
  const size_t need = sockaddr_len(reinterpret_cast<const sockaddr*>(&name));
  const size_t have = *addrlen;
  *addrlen = need;
  if (!addr || have < need) return to_fi(errc::toosmall);
  std::memcpy(addr, &name, need);
  return 0;
}

}  // namespace weft::util
