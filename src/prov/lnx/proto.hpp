// SPDX-License-Identifier: MIT
// weft — the lnx address: what fi_getname gives for an lnx endpoint and what
// fi_av_insert takes. Version 1.
//
// An lnx endpoint is reachable through each provider of its link (shm for
// processes on its host, tcp for the others); its address carries each of
// their addresses and the identity of the host, so an inserting process can
// decide once which provider reaches it:
//
//   header  (16 bytes)  magic, version, part count, length, host identity
//   part    (4 bytes + len, padded to 4) one per linked provider: which
//                       provider, the length of its address, the address
//                       (the bytes that provider's fi_getname gave)
//   zeroes  up to addr_bytes
//
// Every address is addr_bytes long whatever it holds, so arrays of them have
// one stride (fi_av_insert's). Integers are in the host's byte order: the
// host identity already confines shm to one host, and tcp parts are the
// provider's own sockaddr bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace weft::lnx::proto {

inline constexpr uint32_t magic = 0x786e6c77;  // "wlnx" read little-endian
inline constexpr uint8_t version = 1;

// Providers a part may name. Values are wire values: never renumbered.
enum class prov_id : uint8_t {
  shm = 1,
  tcp = 2,
  udp = 3,
};
inline constexpr uint8_t max_prov_id = 3;

struct addr_header {
  uint32_t magic;   // proto::magic
  uint8_t version;  // proto::version
  uint8_t parts;    // 1..max_parts
  uint16_t length;  // bytes used, header included; never 0 (the AV's live field)
  uint64_t host;    // host identity (host_identity()): same value, same host
};
static_assert(sizeof(addr_header) == 16 && std::is_trivially_copyable_v<addr_header>);
static_assert(offsetof(addr_header, length) == 6);

struct part_header {
  uint8_t prov;      // prov_id
  uint8_t reserved;  // 0
  uint16_t len;      // bytes of the provider's address that follow
};
static_assert(sizeof(part_header) == 4);

inline constexpr size_t addr_bytes = 128;
inline constexpr size_t max_parts = 4;
// shm's names are 64 bytes, tcp's sockaddr_in6 28: both fit with room.
inline constexpr size_t max_part_len = addr_bytes - sizeof(addr_header) - sizeof(part_header);

inline constexpr size_t pad4(size_t n) noexcept {
  return (n + 3) & ~size_t{3};
}

}  // namespace weft::lnx::proto
