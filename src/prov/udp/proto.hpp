// SPDX-License-Identifier: MIT
// weft — the udp provider's wire format.
//
// Version 0: none. One datagram carries exactly one message, byte for byte,
// with no header: the application's data is the UDP payload. That keeps the
// data path to one sendmsg/recvmsg, interoperates with any peer that sends
// plain datagrams, and is what FI_EP_DGRAM promises (unreliable, unordered,
// message boundaries kept). A datagram larger than the posted buffer
// completes the receive with FI_ETRUNC.
#pragma once

#include <cstddef>

namespace weft::udp::proto {

inline constexpr unsigned version = 0;
// The largest UDP payload over IPv4: 65535 - 20 (IP header) - 8 (UDP header).
inline constexpr size_t max_payload = 65507;

}  // namespace weft::udp::proto
