// SPDX-License-Identifier: MIT
// weft — the udp provider: FI_EP_DGRAM messaging over UDP/IPv4 and IPv6.
#pragma once

#include "util/domain.hpp"
#include "util/endpoint.hpp"
#include "util/fabric.hpp"
#include "util/fd.hpp"
#include "util/lock.hpp"
#include "util/sep.hpp"
#include "prov/udp/proto.hpp"

#include <rdma/fabric.h>
#include <rdma/providers/fi_prov.h>

#include <sys/socket.h>
#include <sys/uio.h>

#include <memory>
#include <string>

namespace weft::udp {

// Parameters (fi_info -e): FI_UDP_IFACE, FI_UDP_RDM_PEER_TIMEOUT_MS,
// FI_UDP_RDM_UNEXP_LIMIT.
struct config {
  std::string iface;  // restrict to this interface name; empty: all
  // FI_EP_RDM: a peer that acknowledges nothing for this long while data is
  // in flight to it is gone, and what was owed to it fails.
  uint64_t rdm_peer_timeout_ms = 10000;
  // FI_EP_RDM: bytes of unexpected messages held per endpoint; past it a
  // new message waits at its sender until receives take what is held.
  size_t rdm_unexp_limit = size_t{256} << 20;
  // FI_EP_RDM: a peer silent and idle both ways for this long has its
  // reliability state reclaimed (its AV entry stays); 0: never. At least
  // twice the peer timeout (rdm_endpoint::reclaim_idle says why).
  uint64_t rdm_peer_idle_ms = 60000;
  // FI_EP_RDM, manual progress: an acknowledgement waits for the answer that
  // would carry it (util/rd_held_ack.hpp).
  bool rdm_ack_hold = true;
};
const config& cfg() noexcept;
// The most a duration parameter in milliseconds may say: a week. More would
// overflow as nanoseconds (a timeout of 2^64 ms + 1 would become half a
// millisecond); a larger value is taken as a week, logged.
inline constexpr size_t max_param_ms = size_t{7} * 24 * 3600 * 1000;
fi_provider& provider() noexcept;

// The static capability templates (attr.cpp: FI_EP_DGRAM, FI_EP_RDM) and
// their per-interface copies.
const fi_info& info_template() noexcept;
const fi_info& rdm_template() noexcept;
// Whether `wanted` (an fi_info passed to fi_domain / fi_endpoint) asks for
// nothing beyond what udp offers.
bool offers(uint32_t version, const fi_info& wanted) noexcept;
int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
            const fi_info* hints, fi_info** info) noexcept;

extern const util::fabric_hooks fabric_hooks;
extern const util::domain_hooks domain_hooks;

inline constexpr size_t max_iov = 4;

bool is_class_ep(const fid* f) noexcept;
// fi_scalable_ep on a udp domain (sep.cpp): FI_EP_RDM and FI_EP_DGRAM.
int open_sep(util::domain& dom, fi_info* info, fid_ep** out, void* context);
// The most contexts of each kind a scalable endpoint has (max_ep_tx_ctx,
// max_ep_rx_ctx): a receive context's index travels in a message header's
// byte, and each takes a port of its endpoint's block.
inline constexpr size_t max_contexts = 64;

// Internal send flag: fi_inject asks for no completion whatever the flags.
// Bit 63 is not an operation flag of the API.
inline constexpr uint64_t no_completion = 1ULL << 63;

// A posted receive: where the next datagram lands.
struct rx_entry {
  iovec iov[max_iov];
  size_t count;
  void* context;
  uint64_t flags;
  size_t offset;  // FI_MULTI_RECV: bytes of the buffer already used
  bool canceled;
};

class endpoint : public util::endpoint_object<endpoint> {
 public:
  static int open(util::domain& dom, const fi_info& info, fid_ep** out, void* context) noexcept;
  // A context of a scalable endpoint (sep.cpp): class FI_CLASS_TX_CTX or
  // FI_CLASS_RX_CTX on socket `s`, named `name` (the scalable endpoint's).
  // A receive context's socket is its endpoint's port + its index; a
  // transmit context's is a descriptor of the endpoint's first socket, so
  // what it sends comes from the endpoint's address (a bare datagram has no
  // header to name its sender). A transmit context receives nothing: no
  // wait object or progress thread watches that shared socket for it.
  static int open_context(util::domain& dom, const fi_info& info, size_t fclass,
                          util::unique_fd s, const sockaddr_storage& name,
                          std::unique_ptr<util::sep_slot> slot, fid_ep** out,
                          void* context) noexcept;
  endpoint(util::domain& dom, const fi_info& info, size_t fclass, void* context);
  ~endpoint() override;

  int close();
  int bind(struct fid* bfid, uint64_t flags);
  int control(int command, void* arg);
  ssize_t cancel(void* context);
  ssize_t rx_size_left();
  ssize_t tx_size_left();

  int getname(void* addr, size_t* addrlen);
  int setname(const void* addr, size_t addrlen);

  // The data path, one instantiation per lock policy.
  template <class Lock>
  ssize_t post_recv(const iovec* iov, size_t count, void* context, uint64_t flags) noexcept;
  template <class Lock>
  ssize_t send(const iovec* iov, size_t count, fi_addr_t dest, void* context,
               uint64_t flags) noexcept;
  // Receives what the socket holds into posted receives; false when it
  // stopped with receives still wanted but none posted or no room in the CQ
  // (only the application can change that).
  template <class Lock>
  bool progress() noexcept;

  template <class Lock>
  static void progress_thunk(void* obj) noexcept {
    static_cast<endpoint*>(obj)->progress<Lock>();
  }
  // A transmit context's hook: the receive contexts nothing else drives
  // (util::scalable_ep::adopt); it receives nothing itself.
  template <class Lock>
  static void tx_ctx_progress_thunk(void* obj) noexcept {
    static_cast<endpoint*>(obj)->sep_slot_->sep().progress_orphans();
  }
  // FI_PROGRESS_AUTO: the domain's thread runs this when the socket is
  // readable (util/progress_thread.hpp).
  template <class Lock>
  static bool auto_work(void* obj) noexcept {
    return static_cast<endpoint*>(obj)->progress<Lock>();
  }
  // The fi_ops_msg table of one lock policy (msg.cpp).
  template <class Lock>
  static const fi_ops_msg* msg_table() noexcept;

  uint64_t tx_op_flags() const noexcept { return tx_op_flags_; }
  // FI_TRIGGER calls go to the domain's trigger engine (util/trigger.hpp).
  util::trigger_site trigger_site() noexcept { return {*domain_, bound_, caps_}; }
  uint64_t rx_op_flags() const noexcept { return rx_op_flags_; }

 private:
  int enable();
  errc open_socket(const sockaddr* addr, socklen_t len);
  template <class Lock>
  auto guard() noexcept {
    if constexpr (std::is_same_v<Lock, util::null_lock>)
      return 0;
    else
      return std::unique_lock<util::fast_mutex>{lock_.m};
  }
  template <class Lock>
  void complete_recv(rx_entry& e, void* buf, size_t len, const sockaddr_storage& from,
                     bool trunc, size_t full_len, bool last) noexcept;

  // The descriptor wait objects and the progress thread watch: the socket,
  // or none for a transmit context (its socket is its endpoint's first).
  int watch_fd() const noexcept { return tx_ctx_ ? -1 : sock_.get(); }

  util::ref<util::domain> domain_;
  util::ep_bindings bound_;
  // Scalable endpoints: a context's hold on its endpoint; whether we are a
  // transmit context; whether the endpoint drives us (a receive context
  // with no CQ or counter).
  std::unique_ptr<util::sep_slot> sep_slot_;
  bool tx_ctx_ = false;
  bool adopted_ = false;
  util::unique_fd sock_;
  sockaddr_storage local_{};
  socklen_t local_len_ = 0;
  int family_;
  uint64_t caps_;
  uint64_t tx_op_flags_;
  uint64_t rx_op_flags_;
  size_t max_msg_;
  bool locked_;
  bool auto_;  // FI_PROGRESS_AUTO: the domain's thread progresses us too
  bool enabled_ = false;
  bool want_source_ = false;
  util::progress_hook hook_;
  std::unique_ptr<rx_entry[]> rx_;
  uint64_t rx_mask_;
  uint64_t rx_head_ = 0;
  uint64_t rx_tail_ = 0;
  util::mutex_lock lock_;
};

}  // namespace weft::udp
