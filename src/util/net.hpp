// SPDX-License-Identifier: MIT
// weft — the host's IP interfaces, for providers that run over sockets.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <string>
#include <vector>

namespace weft::util {

struct ip_iface {
  std::string name;          // "lo", "eth0"
  sockaddr_storage addr{};   // the interface address (port 0)
  socklen_t addrlen = 0;
  std::string network;       // "127.0.0.0/8": the fabric name
  bool loopback = false;
};

// The interfaces that are up and carry IPv4 or IPv6 addresses; non-loopback
// first, IPv4 before IPv6 within each, so the first entry is the likely choice.
std::vector<ip_iface> list_ip_ifaces();

// "a.b.c.d:port" / "[v6]:port".
std::string format_sockaddr(const sockaddr* sa);

// Length of a sockaddr of this family (0 for families we do not speak).
socklen_t sockaddr_len(const sockaddr* sa) noexcept;

// Same family and address (ports ignored); the any-address matches all.
bool same_host(const sockaddr* a, const sockaddr* b) noexcept;

// The port of an IPv4 or IPv6 address, in host order (0 for other families).
uint16_t sockaddr_port(const sockaddr* sa) noexcept;
// Sets it (host order; other families are left as they are).
void set_sockaddr_port(sockaddr* sa, uint16_t port) noexcept;

// The any-address (0.0.0.0 or ::), whatever the port.
bool is_any_addr(const sockaddr* sa) noexcept;

// The address the kernel would send from to reach `dest` (a datagram
// socket connected to it; nothing is sent). False when it has no route.
bool route_source(const sockaddr* dest, sockaddr_storage& out) noexcept;

// Whether an address is one of this host's: loopback (127.0.0.0/8, ::1 and
// their IPv4-mapped forms), the any-address, or an address of one of its
// interfaces (up or not).
bool is_local_address(const sockaddr* sa) noexcept;

// Whether `node` names this host: "localhost", its host name (with or
// without domain), or a name or address that resolves to a local address.
// numeric_only (FI_NUMERICHOST): node must be a numeric address; nothing
// is looked up.
bool names_this_host(const char* node, bool numeric_only);

}  // namespace weft::util
