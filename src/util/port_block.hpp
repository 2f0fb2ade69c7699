// SPDX-License-Identifier: MIT
// weft — a block of consecutive ports behind one address: what a network
// provider's scalable endpoint is (prov/tcp/sep.cpp, prov/udp/sep.cpp).
//
// The endpoint's address is an IP and the block's first port; receive
// context i takes the socket at port + i, so a sender reaches it by
// arithmetic (fi_rx_addr) with nothing per peer. Every port is held from
// the start, so no other socket takes one between fi_scalable_ep and the
// context's fi_rx_context; a context closed and opened again binds its port
// anew (docs/decisions.md, "Scalable endpoints").
#pragma once

#include "util/fd.hpp"

#include <rdma/fabric.h>
#include <rdma/providers/fi_prov.h>

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace weft::util {

// `at` with port `port` (host order).
sockaddr_storage with_port(const sockaddr_storage& at, unsigned port) noexcept;
// The address fi_scalable_ep holds its block at: `info.src_addr`, or the
// any-address of its addr_format; -FI_EINVAL (logged) when src_addr is not
// an IP address, or 0.
int sep_source(const fi_provider* prov, const fi_info& info, sockaddr_storage& at) noexcept;

struct port_block {
  // A socket bound (a listener: listening) to `at`; errno, or 0.
  using open_fn = int (*)(const sockaddr_storage& at, unique_fd& out) noexcept;

  // Holds `n` consecutive ports at `at`, one socket from `open_one` each.
  // A port in `at` fixes the first; port 0 lets the kernel pick it, and
  // the search tries again (up to `attempts` times) when a following port
  // is taken. errno of the last refusal, or 0.
  int reserve(const sockaddr_storage& at, size_t n, open_fn open_one, int attempts = 64) noexcept;
  // The socket of port + i, if nothing took it yet (empty otherwise).
  unique_fd take(size_t i) noexcept;
  // Another descriptor of the socket of port + i, not yet taken (udp
  // DGRAM's transmit contexts send through the first); empty, errno set,
  // when there is none.
  unique_fd duplicate(size_t i) noexcept;
  // The address of port + i.
  sockaddr_storage address(size_t i) const noexcept;
  // fi_getname: the block's address (-FI_ETOOSMALL with the size needed).
  int getname(void* addr, size_t* addrlen) const noexcept;

  sockaddr_storage name{};  // the IP and the first port

 private:
  int try_once(const sockaddr_storage& at, size_t n, open_fn open_one) noexcept;
  std::mutex mutex_;
  std::vector<unique_fd> sockets_;
};

}  // namespace weft::util
