// SPDX-License-Identifier: MIT
// weft — the host's IP interfaces.
#include "util/net.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace weft::util {

namespace {

int prefix_len(const sockaddr* mask) {
  int bits = 0;
  const uint8_t* p;
  size_t n;
  if (mask->sa_family == AF_INET) {
    p = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in*>(mask)->sin_addr);
    n = 4;
  } else {
    p = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in6*>(mask)->sin6_addr);
    n = 16;
  }
  for (size_t i = 0; i < n; ++i) bits += __builtin_popcount(p[i]);
  return bits;
}

std::string network_of(const sockaddr* addr, const sockaddr* mask) {
  char buf[INET6_ADDRSTRLEN];
  int bits = mask ? prefix_len(mask) : (addr->sa_family == AF_INET ? 32 : 128);
  if (addr->sa_family == AF_INET) {
    uint32_t a = ntohl(reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr);
    uint32_t m = bits ? ~uint32_t{0} << (32 - bits) : 0;
    in_addr net{htonl(a & m)};
    inet_ntop(AF_INET, &net, buf, sizeof buf);
  } else {
    in6_addr net = reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
    for (int i = 0; i < 16; ++i) {
      int keep = std::clamp(bits - 8 * i, 0, 8);
      net.s6_addr[i] &= static_cast<uint8_t>(0xff00 >> keep);
    }
    inet_ntop(AF_INET6, &net, buf, sizeof buf);
  }
  return std::string(buf) + "/" + std::to_string(bits);
}

}  // namespace

socklen_t sockaddr_len(const sockaddr* sa) noexcept {
  if (!sa) return 0;
  if (sa->sa_family == AF_INET) return sizeof(sockaddr_in);
  if (sa->sa_family == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

std::vector<ip_iface> list_ip_ifaces() {
  std::vector<ip_iface> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    ip_iface f;
    f.name = i->ifa_name;
    f.addrlen = sockaddr_len(i->ifa_addr);
    std::memcpy(&f.addr, i->ifa_addr, f.addrlen);
    f.network = network_of(i->ifa_addr, i->ifa_netmask);
    f.loopback = i->ifa_flags & IFF_LOOPBACK;
    out.push_back(std::move(f));
  }
  freeifaddrs(list);
  std::stable_sort(out.begin(), out.end(), [](const ip_iface& a, const ip_iface& b) {
    if (a.loopback != b.loopback) return !a.loopback;
    return a.addr.ss_family == AF_INET && b.addr.ss_family != AF_INET;
  });
  return out;
}

std::string format_sockaddr(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN];
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
    return std::string(buf) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
    return "[" + std::string(buf) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "(unknown family)";
}

bool same_host(const sockaddr* a, const sockaddr* b) noexcept {
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    auto x = reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr;
    auto y = reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
    return x == y || x == htonl(INADDR_ANY) || y == htonl(INADDR_ANY);
  }
  auto& x = reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr;
  auto& y = reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr;
  return IN6_ARE_ADDR_EQUAL(&x, &y) || IN6_IS_ADDR_UNSPECIFIED(&x) || IN6_IS_ADDR_UNSPECIFIED(&y);
}

uint16_t sockaddr_port(const sockaddr* sa) noexcept {
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  return 0;
}

void set_sockaddr_port(sockaddr* sa, uint16_t port) noexcept {
  if (sa->sa_family == AF_INET) reinterpret_cast<sockaddr_in*>(sa)->sin_port = htons(port);
  if (sa->sa_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(sa)->sin6_port = htons(port);
}

bool is_any_addr(const sockaddr* sa) noexcept {
  if (sa->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr == htonl(INADDR_ANY);
  return sa->sa_family == AF_INET6 &&
         IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
}

bool route_source(const sockaddr* dest, sockaddr_storage& out) noexcept {
  socklen_t len = sockaddr_len(dest);
  if (!len) return false;
  int s = ::socket(dest->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  // A datagram connect picks the route and the source address, and sends
  // nothing; port 0 is refused by some kernels, so one is lent.
  sockaddr_storage to{};
  std::memcpy(&to, dest, len);
  if (to.ss_family == AF_INET && !reinterpret_cast<sockaddr_in&>(to).sin_port)
    reinterpret_cast<sockaddr_in&>(to).sin_port = htons(9);
  if (to.ss_family == AF_INET6 && !reinterpret_cast<sockaddr_in6&>(to).sin6_port)
    reinterpret_cast<sockaddr_in6&>(to).sin6_port = htons(9);
  socklen_t outlen = sizeof out;
  bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&to), len) == 0 &&
            ::getsockname(s, reinterpret_cast<sockaddr*>(&out), &outlen) == 0;
  ::close(s);
  return ok;
}

namespace {

bool is_loopback(const sockaddr* sa) noexcept {
  if (sa->sa_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family != AF_INET6) return false;
  auto& a = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
  if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
  return IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127;
}

// "host.example.org" names the host "host" too, and the other way round.
bool same_name(const char* a, const char* b) {
  if (strcasecmp(a, b) == 0) return true;
  size_t la = std::strcspn(a, "."), lb = std::strcspn(b, ".");
  return la == lb && strncasecmp(a, b, la) == 0 && (!a[la] || !b[lb]);
}

}  // namespace

bool is_local_address(const sockaddr* sa) noexcept {
  if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6) return false;
  if (is_loopback(sa) || is_any_addr(sa)) return true;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* i = list; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != sa->sa_family) continue;
    if (sa->sa_family == AF_INET)
      found = reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr ==
              reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
    else
      found = IN6_ARE_ADDR_EQUAL(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr,
                                 &reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr);
  }
  freeifaddrs(list);
  return found;
}

bool names_this_host(const char* node, bool numeric_only) {
  if (!node || !*node) return false;
  if (!numeric_only) {
    char host[256] = {};
    if (strcasecmp(node, "localhost") == 0) return true;
    if (::gethostname(host, sizeof host - 1) == 0 && same_name(node, host)) return true;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;  // one entry per address, not per socket type
  if (numeric_only) hints.ai_flags |= AI_NUMERICHOST;
  addrinfo* res = nullptr;
  if (::getaddrinfo(node, nullptr, &hints, &res) != 0 || !res) return false;
  bool local = false;
  for (addrinfo* r = res; r && !local; r = r->ai_next) local = is_local_address(r->ai_addr);
  freeaddrinfo(res);
  return local;
}

}  // namespace weft::util
