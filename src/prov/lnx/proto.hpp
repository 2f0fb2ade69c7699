// SPDX-License-Identifier: MIT
// weft — the lnx address: what fi_getname gives for an lnx endpoint and what
// fi_av_insert takes. Version 2.
//
// An lnx endpoint is reachable through each provider of its link (shm for
// processes on its host, tcp for the others); its address carries each of
// their addresses and the identity of the host, so an inserting process can
// decide once which provider reaches it:
//
//   header  (8 bytes)   marker, version, host identity (6 bytes)
//   part    (1 + len)   one per linked provider's domain: a byte with the
//                       provider (2 bits) and the length (6 bits), then
//                       that provider's address in a compact form (below);
//                       a provider with several domains (rails, "tcp:eth0,
//                       eth1") has one part per rail, next to each other,
//                       in the link's order
//   zeroes  up to addr_bytes (a zero byte where a part would start ends
//           the parts)
//
// Every address is addr_bytes = 64 long, whatever it holds: arrays of them
// have one stride (fi_av_insert's), and 64 is what applications that size
// their fi_getname buffer by libfabric's FI_NAME_MAX (Open MPI 4.1's mtl
// ofi, for one) can take. So that shm's and tcp's addresses fit, a part
// holds a compact form of the bytes that provider's fi_getname gave,
// chosen by the provider's documented addr_format (part.cpp):
//   FI_ADDR_STR        the string without its "fi_<prov>://" prefix;
//   FI_SOCKADDR_IN     port and address (6 bytes);
//   FI_SOCKADDR_IN6    port and address (18 bytes), and the scope id when
//                      it is not 0 (22);
//   anything else      the bytes, trailing zeroes left out.
// The inserting side rebuilds the provider's address from its own core's
// addr_format. Integers are in the host's byte order: the host identity
// already confines shm to one host; ports and addresses stay in network
// order as sockaddrs hold them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace weft::lnx::proto {

inline constexpr uint8_t marker = 0xa7;
inline constexpr uint8_t version = 2;

// Providers a part may name. Values are wire values: never renumbered.
enum class prov_id : uint8_t {
  shm = 1,
  tcp = 2,
  udp = 3,
};
inline constexpr uint8_t max_prov_id = 3;

struct addr_header {
  uint8_t marker;   // proto::marker; with version, the AV's never-zero live field
  uint8_t version;  // proto::version
  uint8_t host[6];  // host identity (host_identity(), its low 48 bits): same value, same host
};
static_assert(sizeof(addr_header) == 8 && std::is_trivially_copyable_v<addr_header>);

// A part's first byte: provider << 6 | length (1..63).
inline constexpr uint8_t part_byte(prov_id p, size_t len) noexcept {
  return static_cast<uint8_t>(static_cast<uint8_t>(p) << 6 | (len & 0x3f));
}
inline constexpr unsigned part_prov(uint8_t b) noexcept { return b >> 6; }
inline constexpr size_t part_len(uint8_t b) noexcept { return b & 0x3f; }

inline constexpr size_t addr_bytes = 64;
inline constexpr size_t max_rails = 4;  // domains of one provider in a link
inline constexpr size_t max_parts = 1 + max_rails;  // shm, and the rails of one network provider
inline constexpr size_t max_part_len = 63;

}  // namespace weft::lnx::proto
