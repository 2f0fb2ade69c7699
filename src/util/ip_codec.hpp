// SPDX-License-Identifier: MIT
// weft — AV codecs for IP peers (udp, tcp).
//
// Entry layouts, everything in network byte order except the scope id, so an
// entry holds exactly what the wire needs and compares with memcmp:
//   IPv4 (FI_SOCKADDR_IN):             addr[4]  port[2]               6 bytes
//   IPv6 (FI_SOCKADDR_IN6, FI_SOCKADDR): addr[16] port[2] scope_id[4]  22 bytes
// Under FI_SOCKADDR an IPv4 peer is stored v4-mapped (::ffff:a.b.c.d), so the
// peer has one entry whether it is inserted as sockaddr_in or seen as the
// sockaddr_in6 a dual-stack socket reports; lookup gives it back as
// sockaddr_in. Under FI_SOCKADDR_IN6 every entry decodes to sockaddr_in6.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "util/av.hpp"

namespace weft::util {

inline constexpr size_t ipv4_entry_size = 6;
inline constexpr size_t ipv6_entry_size = 22;

extern const av_codec ipv4_codec;      // FI_SOCKADDR_IN
extern const av_codec ipv6_codec;      // FI_SOCKADDR_IN6
extern const av_codec sockaddr_codec;  // FI_SOCKADDR: sockaddr_in or sockaddr_in6

// The codec for a domain's addr_format; nullptr for formats that are not IP.
const av_codec* ip_codec(uint32_t addr_format) noexcept;

// Splits an FI_ADDR_STR IP address ("fi_sockaddr_in://10.0.0.1:7471",
// "fi_sockaddr_in6://[fe80::1%eth0]:7471", "fi_sockaddr://host:7471") into
// host, port and the family its scheme names (AF_UNSPEC for fi_sockaddr).
// False when it is not one of the IP formats or has no port.
bool split_addr_str(std::string_view s, std::string& host, std::string& port, int& family);

// Data-path helpers: the destination of a send, without a call through the
// codec. The entry must come from the matching codec.
inline void ipv4_entry_to_sockaddr(const uint8_t* e, sockaddr_in* sa) noexcept {
  std::memset(sa, 0, sizeof *sa);
  sa->sin_family = AF_INET;
  std::memcpy(&sa->sin_addr, e, 4);
  std::memcpy(&sa->sin_port, e + 4, 2);
}
// Always an AF_INET6 form (v4-mapped for IPv4 peers): what a dual-stack
// socket sends to.
inline void ipv6_entry_to_sockaddr6(const uint8_t* e, sockaddr_in6* sa) noexcept {
  std::memset(sa, 0, sizeof *sa);
  sa->sin6_family = AF_INET6;
  std::memcpy(&sa->sin6_addr, e, 16);
  std::memcpy(&sa->sin6_port, e + 16, 2);
  std::memcpy(&sa->sin6_scope_id, e + 18, 4);
}

}  // namespace weft::util
