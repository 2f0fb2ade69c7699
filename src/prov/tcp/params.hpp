// SPDX-License-Identifier: MIT
// weft — the tcp provider's parameters (fi_info -e), limits and entry points
// (attr.cpp, init.cpp): what every other tcp header builds on.
#pragma once

#include "util/domain.hpp"
#include "util/fabric.hpp"

#include <rdma/fabric.h>
#include <rdma/providers/fi_prov.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::tcp {

// Parameters (fi_info -e), read once when the provider is first loaded.
struct config {
  std::string iface;            // FI_TCP_IFACE: restrict to this interface; empty: all
  int conn_timeout_ms = 10000;  // FI_TCP_CONN_TIMEOUT: connect + handshake deadline
  size_t unexp_limit = size_t{256} << 20;  // FI_TCP_UNEXP_LIMIT: bytes buffered per endpoint
  int keepalive_s = 10;  // FI_TCP_KEEPALIVE: a silent peer is given up after about 2.5x this
  // FI_TCP_LOCAL_CC: congestion control of connections within the host
  // (tune_local); empty: the system's default.
  std::string local_cc = "reno";
  // FI_TCP_LOCAL_STREAM: same-host FI_EP_MSG connections through shared
  // memory (local_stream.hpp, docs/decisions.md).
  bool local_stream = true;
};
// Each direction's pipe of a same-host stream starts at local_pipe_bytes:
// the stream (two pipes and a page of header, shared by both ends) and the
// connection's staging buffer keep an idle connection under 64 KiB. A pipe
// grows (local_stream.hpp) up to local_pipe_max_bytes when a writer has
// more queued than fits: a window of 16 messages of 64 KiB then crosses in
// one turn instead of a sleep and a wake every 16 KiB (docs/decisions.md).
inline constexpr size_t local_pipe_bytes = 16 * 1024;
inline constexpr size_t local_pipe_max_bytes = 1024 * 1024;
const config& cfg() noexcept;
fi_provider& provider() noexcept;

inline constexpr size_t max_iov = 4;
inline constexpr size_t inject_size = 128;
inline constexpr size_t max_msg_size = size_t{64} << 20;
inline constexpr size_t default_queue_size = 1024;
inline constexpr size_t msg_hdr_max = 32;  // tagged_data: base + tag + cq_data
// Operand bytes one atomic carries (and compare values, and prior values):
// small enough that a target stages them in the connection and answers from
// the transmit entry, with no allocation.
inline constexpr size_t atomic_max_bytes = 256;
// Frame iovecs of one transmit: the header, up to max_iov operands and
// max_iov compare values (atomics), or up to 2 * max_iov pieces of
// registered memory (a read response).
inline constexpr size_t tx_max_iov = 1 + 2 * max_iov;

// attr.cpp: the static capability templates and the check of an fi_info an
// application passes to fi_domain / fi_endpoint / fi_passive_ep.
const fi_info& msg_template() noexcept;
const fi_info& rdm_template() noexcept;
bool offers(uint32_t version, const fi_info& wanted) noexcept;
int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
            const fi_info* hints, fi_info** info) noexcept;

extern const util::fabric_hooks fabric_hooks;
extern const util::domain_hooks domain_hooks;

// Internal send flag: fi_inject / fi_injectdata never complete. Bit 63 is
// not an operation flag of the API.
inline constexpr uint64_t no_completion = 1ULL << 63;

}  // namespace weft::tcp
