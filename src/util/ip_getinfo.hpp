// SPDX-License-Identifier: MIT
// weft — fi_getinfo for providers over IP sockets: one answer per usable
// interface and template, shaped by node/service/FI_SOURCE and the hints.
#pragma once

#include <rdma/fabric.h>
#include <rdma/providers/fi_prov.h>

#include <cstdint>
#include <span>
#include <string>

namespace weft::util {

struct ip_getinfo_args {
  const fi_provider* prov;
  std::span<const fi_info* const> templates;  // e.g. one per endpoint type
  int socktype;                               // SOCK_DGRAM / SOCK_STREAM, for resolution
  const std::string& iface;                   // only this interface; empty: all
  uint32_t match_options = 0;                 // match_info's options
};

// For each interface that is up (and matches the pinned source address,
// the destination's family and the address-format hint) and each template
// the hints accept: an fi_info with the interface as domain, its network as
// fabric, src_addr the interface (port from FI_SOURCE/src_addr) and
// dest_addr the resolved node/service or hints->dest_addr. node may be an
// FI_ADDR_STR address (service then NULL). -FI_ENODATA when nothing fits.
int ip_getinfo(const ip_getinfo_args& a, uint32_t version, const char* node,
               const char* service, uint64_t flags, const fi_info* hints,
               fi_info** info) noexcept;

}  // namespace weft::util
