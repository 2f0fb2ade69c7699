// SPDX-License-Identifier: MIT
// weft — the udp provider's FI_EP_RDM endpoint: reliable, ordered messages
// over one UDP socket, with no connection and no kernel state per peer.
//
// Reliability is util's (util/rd_link.hpp, one link per peer); matching is
// util's one engine (util/srx.hpp). This endpoint joins them to the socket:
//  - a send queues a message on its peer and sends as many of its datagrams
//    as the peer's window takes, straight from the application's buffers
//    (sendmsg gathers the headers and a slice of the iovec); it completes
//    when the peer has acknowledged its last datagram (transmit complete);
//  - progress reads datagrams, lets the peer's link classify them, matches a
//    message's first datagram, copies each in-order datagram into the
//    matched buffer (or an unexpected buffer the size of the message), and
//    acknowledges; then it runs the links' timers and sends what windows
//    now take.
// Datagrams carry at most `seg` payload bytes (the path's MTU, from the
// kernel's route to the peer), so nothing is fragmented by IP on a real
// network; on loopback one datagram carries 60 KiB.
#pragma once

#include "prov/udp/udp.hpp"
#include "util/rd_link.hpp"
#include "util/srx.hpp"

#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_peer.h>

#include <netinet/in.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace weft::udp {

inline constexpr size_t rdm_inject_size = 256;
// Payload bytes of one datagram: the protocol headers come first.
inline constexpr size_t rdm_headers = sizeof(util::rd::dgram) + sizeof(util::rd::msg);
inline constexpr size_t rdm_max_seg = proto::max_payload - rdm_headers;
inline constexpr size_t rdm_max_msg = size_t{1} << 30;  // 1 GiB

// The rd::msg op codes of this provider.
enum class rdm_op : uint8_t { msg = 1, tagged = 2 };
inline constexpr uint8_t rdm_op_with_data = 0x80;  // remote CQ data in msg.data

struct rdm_peer;

// A peer's socket address as the key of the endpoint's peer table: the
// sockaddr_in or sockaddr_in6 bytes, zero-padded.
struct alignas(8) peer_key {
  uint8_t bytes[sizeof(sockaddr_in6)] = {};
  socklen_t len = 0;
  bool operator==(const peer_key& o) const noexcept {
    return len == o.len && std::memcmp(bytes, o.bytes, sizeof bytes) == 0;
  }
  const sockaddr* sa() const noexcept { return reinterpret_cast<const sockaddr*>(bytes); }
};
struct peer_key_hash {
  size_t operator()(const peer_key& k) const noexcept {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
    for (uint8_t b : k.bytes) h = (h ^ b) * 0x100000001b3ull;
    return size_t(h ^ k.len);
  }
};

// One message being sent, from fi_send to its acknowledgement.
struct rdm_tx {
  rdm_tx* next;          // in its peer's queue, or the free list
  rdm_peer* peer;
  util::rd::msg hdr;
  iovec iov[max_iov];
  uint8_t count;
  bool complete;         // write a completion on the transmit CQ
  bool report;           // count it (not for fi_inject's internal form)
  uint64_t cq_flags;
  void* context;
  uint64_t queued;       // payload bytes handed to datagrams so far
  std::byte inject[rdm_inject_size];
};

// What an endpoint knows of one peer. Idle (nothing in flight) it is this
// struct in a node of the endpoint's peer table (a little under 256 bytes
// with its key, checked below): the link's ring is released by trim().
struct rdm_peer {
  util::rd::link link;
  const peer_key* key = nullptr;    // its address: the table's key
  uint32_t seg = 0;                 // payload bytes per datagram to this peer
  fi_addr_t src = FI_ADDR_NOTAVAIL;  // how completions name it (FI_ADDR_NOTAVAIL: not in the AV)
  rdm_tx* head = nullptr;           // messages not yet acknowledged, oldest first
  rdm_tx* tail = nullptr;
  rdm_tx* unsent = nullptr;         // the first with datagrams still to send
  // The message being received from this peer.
  fi_peer_rx_entry* rx = nullptr;
  bool rx_unexp = false;
  bool rx_dropped = false;          // no entry: its datagrams are acknowledged and dropped
  util::rd::assembly rx_as;         // its length and how much has come
  uint64_t heard_ns = 0;            // when its last datagram came
  // Lists of the endpoint this peer is on (an index, or -1).
  int32_t busy_at = -1;             // something in flight or unsent: timers and sends to run
  bool ack_listed = false;

  const sockaddr* sa() const noexcept { return key->sa(); }
  socklen_t sa_len() const noexcept { return key->len; }
};
// A node of the peer table holds the hash, the key and the peer.
static_assert(sizeof(rdm_peer) + sizeof(peer_key) + 2 * sizeof(void*) <= 240,
              "an idle peer costs at most 256 bytes with the allocator's header");

// An unexpected message's bytes, until a receive takes them.
struct rdm_unexp {
  size_t len;
  rdm_peer* from;  // its sender (peers live as long as the endpoint)
  std::byte data[];
};

class rdm_endpoint : public util::endpoint_object<rdm_endpoint> {
 public:
  static int open(util::domain& dom, const fi_info& info, fid_ep** out, void* context) noexcept;
  rdm_endpoint(util::domain& dom, const fi_info& info, void* context);
  ~rdm_endpoint() override;

  int close();
  int bind(struct fid* bfid, uint64_t flags);
  int control(int command, void* arg);
  ssize_t cancel(void* context);
  int setopt(int level, int name, const void* val, size_t len);
  ssize_t rx_size_left();
  ssize_t tx_size_left();
  int getname(void* addr, size_t* addrlen);
  int setname(const void* addr, size_t addrlen);

  // The data path (rdm_data.cpp), one instantiation per lock policy.
  template <class Lock>
  ssize_t send(const iovec* iov, size_t count, fi_addr_t dest, void* context, uint64_t flags,
               uint64_t tag, uint64_t data) noexcept;
  template <class Lock>
  ssize_t post_msg(const iovec* iov, void** desc, size_t count, fi_addr_t src, void* context,
                   uint64_t flags) noexcept;
  template <class Lock>
  ssize_t post_tag(const iovec* iov, void** desc, size_t count, fi_addr_t src, uint64_t tag,
                   uint64_t ignore, void* context, uint64_t flags) noexcept;
  template <class Lock>
  void progress() noexcept;
  template <class Lock>
  static void progress_thunk(void* obj) noexcept {
    static_cast<rdm_endpoint*>(obj)->progress<Lock>();
  }
  // FI_PROGRESS_AUTO: the domain's thread runs this when the socket or the
  // retransmission timer is ready (util/progress_thread.hpp).
  template <class Lock>
  static bool auto_work(void* obj) noexcept;
  // util::srx peer ops: a receive takes (start) or drops (discard) an
  // unexpected message.
  template <class Lock>
  static int start(fi_peer_rx_entry* e) noexcept;
  template <class Lock>
  static int discard(fi_peer_rx_entry* e) noexcept;

  template <class Lock>
  static const fi_ops_msg* msg_table() noexcept;
  template <class Lock>
  static const fi_ops_tagged* tagged_table() noexcept;
  static const fi_ops_srx_peer* peer_table(bool locked) noexcept;

  static const fi_provider* prov() noexcept;
  uint64_t tx_op_flags() const noexcept { return tx_op_flags_; }
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
  template <class F>
  void with_lock(F&& f) {
    if (locked_)
      f.template operator()<util::mutex_lock>();
    else
      f.template operator()<util::null_lock>();
  }

  // Peers (rdm_data.cpp). Under the endpoint lock.
  rdm_peer* peer_for_send(fi_addr_t dest, int* err) noexcept;
  rdm_peer* peer_from(const sockaddr_storage& from, socklen_t len) noexcept;
  uint32_t next_epoch() noexcept;
  void mark_busy(rdm_peer& p) noexcept;
  // Sends what p's window takes; false when the socket is full.
  template <class Lock>
  bool pump(rdm_peer& p, uint64_t now) noexcept;
  // One data datagram (first send or resend) of `t` at payload offset `off`.
  bool send_datagram(rdm_peer& p, const util::rd::dgram& h, const rdm_tx& t, uint64_t off,
                     uint32_t bytes) noexcept;
  void send_ack(rdm_peer& p) noexcept;
  template <class Lock>
  void on_datagram(const std::byte* buf, size_t n, const sockaddr_storage& from,
                   socklen_t fromlen, uint64_t now) noexcept;
  // Takes an in-order data datagram; false to leave it unconsumed (no room
  // now: the peer sends it again).
  template <class Lock>
  bool take_data(rdm_peer& p, const util::rd::view& v) noexcept;
  template <class Lock>
  void acked(rdm_peer& p, const util::rd::flight& f) noexcept;
  template <class Lock>
  void fail_peer(rdm_peer& p, int err, const char* why) noexcept;
  template <class Lock>
  void complete_tx(rdm_tx* t) noexcept;
  template <class Lock>
  void fail_tx(rdm_tx* t, int err) noexcept;
  template <class Lock>
  bool write_rx(fi_peer_rx_entry* e) noexcept;
  template <class Lock>
  void finish_rx(fi_peer_rx_entry* e) noexcept;
  template <class Lock>
  void fail_rx(fi_peer_rx_entry* e, int err) noexcept;
  template <class Lock>
  void complete_deferred() noexcept;
  template <class Lock>
  void drop_rx(rdm_peer& p, int err) noexcept;
  rdm_unexp* alloc_unexp(size_t len, rdm_peer* from) noexcept;
  void free_unexp(rdm_unexp* b) noexcept;
  // The AV changed: peers and queued messages are named again.
  static void av_changed(void* self, bool inserted_only) noexcept;
  template <class Lock>
  void relabel(bool inserted_only) noexcept;
  rdm_tx* take_tx() noexcept;
  void put_tx(rdm_tx* t) noexcept;
  void drop_peers() noexcept;

  util::ref<util::domain> domain_;
  util::ep_bindings bound_;
  util::unique_fd sock_;
  // Automatic progress: an epoll set of the socket and a timer that ticks
  // while anything is in flight (retransmissions, silent peers).
  util::unique_fd waitset_, timer_;
  bool timer_armed_ = false;
  errc start_auto() noexcept;
  sockaddr_storage local_{};
  socklen_t local_len_ = 0;
  uint64_t caps_;
  uint64_t tx_op_flags_;
  uint64_t rx_op_flags_;
  size_t max_msg_;
  size_t tx_size_;
  size_t rx_size_;
  bool locked_;
  bool auto_;  // FI_PROGRESS_AUTO: the domain's thread progresses us too
  bool enabled_ = false;
  bool want_source_ = false;
  util::rd::config rd_cfg_;
  uint64_t epoch_seed_;
  util::progress_hook hook_;
  std::unique_ptr<util::srx> srx_;  // made at fi_enable, with the AV
  fid_peer_srx* face_ = nullptr;
  // Peers by socket address (nodes do not move: pointers to peers stay
  // valid), and the ones sent to by fi_addr (an AV index).
  std::unordered_map<peer_key, rdm_peer, peer_key_hash> peers_;
  std::vector<rdm_peer*> by_fi_;
  std::vector<rdm_peer*> busy_;      // peers with something in flight or unsent
  std::vector<rdm_peer*> ack_list_;  // peers owed an acknowledgement
  // Transmit entries: tx_size_ of them, allocated at open.
  std::unique_ptr<rdm_tx[]> tx_pool_;
  rdm_tx* tx_free_ = nullptr;
  size_t tx_free_count_ = 0;
  rdm_tx* tx_deferred_head_ = nullptr;  // acknowledged, waiting for room in the CQ
  rdm_tx* tx_deferred_tail_ = nullptr;
  // Bytes held for unexpected messages (bounded by FI_UDP_RDM_UNEXP_LIMIT);
  // a receive posted by another thread frees them (start) without our lock.
  std::atomic<size_t> unexp_bytes_{0};
  std::unique_ptr<std::byte[]> rxbuf_;  // one datagram
  util::mutex_lock lock_;
};

}  // namespace weft::udp
