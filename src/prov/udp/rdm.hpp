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
//    now take;
//  - RMA and atomics (rdm_rma.cpp, rdm_proto.hpp) are messages too: a
//    request served at the target, answered by a message that completes it.
// Datagrams carry at most `seg` payload bytes (the path's MTU, from the
// kernel's route to the peer), so nothing is fragmented by IP on a real
// network; on loopback one datagram carries 60 KiB.
#pragma once

#include "prov/udp/rdm_proto.hpp"
#include "prov/udp/udp.hpp"
#include "util/rd_held_ack.hpp"
#include "util/rd_link.hpp"
#include "util/rma_ops.hpp"
#include "util/sep.hpp"
#include "util/srx.hpp"
#include "util/srx_binding.hpp"
#include "util/srx_ctx.hpp"
#include "util/srx_port.hpp"

#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_peer.h>

#include <netinet/in.h>

#include <atomic>
#include <deque>
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
static_assert(rdm_max_msg == rdm_rma_max);

// Buffers a transmit entry gathers: a request's header and the
// application's iovec; at a target, the registered segments a read's
// ranges cover (a range may span the segments of one registration).
inline constexpr size_t rdm_tx_iov = 1 + 2 * max_iov;
// Bytes a transmit entry holds itself: an injected message; an RMA
// request's header with injected data or an atomic's operands and compare
// values; at a target, a request's header and the operands it stages.
inline constexpr size_t rdm_tx_buf = rma_hdr_max + 2 * rdm_atomic_max;
static_assert(rdm_tx_buf >= rma_hdr_max + rdm_inject_size);

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
    // FNV-1a over 8-byte words (the bytes past len are zero).
    static_assert(sizeof k.bytes % 4 == 0);
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i = 0;
    for (; i + 8 <= sizeof k.bytes; i += 8) {
      uint64_t w;
      std::memcpy(&w, k.bytes + i, 8);
      h = (h ^ w) * 0x100000001b3ull;
    }
    uint32_t tail = 0;
    if (i < sizeof k.bytes) std::memcpy(&tail, k.bytes + i, 4);
    h = (h ^ tail) * 0x100000001b3ull;
    return size_t(h ^ (h >> 29) ^ k.len);
  }
};

// What a transmit entry is (rdm_rma.cpp for the last two).
enum class rdm_tx_kind : uint8_t {
  message,   // a send, or an RMA write or atomic that asks for no answer
  request,   // an RMA or atomic that completes with the target's rma_answer
  response,  // at a target: a request being received, then its rma_answer
};

// One message being sent, from fi_send to its acknowledgement (a request:
// to its answer).
struct rdm_tx {
  rdm_tx* next;          // in its peer's queue, or the free list
  rdm_peer* peer;
  util::rd::msg hdr;
  iovec iov[rdm_tx_iov];
  uint8_t count;
  bool complete;         // write a completion on the transmit CQ
  bool report;           // count it (not for fi_inject's internal form)
  rdm_tx_kind kind;
  bool awaiting;         // request: sent and acknowledged, its answer not yet in
  uint8_t dst_count;     // request: where the answer's payload goes
  uint16_t rma_hdr_len;  // response: the request's rma_hdr and rma_iovs, in buf
  uint32_t gen;          // request: the high half of its id (ids of reused entries differ)
  int32_t err;           // request, response: the FI_E* code of a refusal, or 0
  util::cntr* cntr;      // the counter its completion counts on
  uint64_t cq_flags;
  void* context;
  uint64_t queued;       // payload bytes handed to datagrams so far
  uint64_t dst_len;      // request: bytes its answer carries
  iovec dst[max_iov];
  alignas(16) std::byte buf[rdm_tx_buf];
};

// What an endpoint knows of one peer. Idle (nothing in flight) it is this
// struct in a node of the endpoint's peer table (a little under 256 bytes
// with its key, checked below): the link's ring is released by trim().
struct rdm_peer {
  util::rd::link link;
  const peer_key* key = nullptr;    // its address: the table's key
  uint32_t seg = 0;                 // payload bytes per datagram to this peer
  // Lists of the endpoint this peer is on (an index, or -1).
  int32_t busy_at = -1;             // something in flight or unsent: timers and sends to run
  fi_addr_t src = FI_ADDR_NOTAVAIL;  // how completions name it (FI_ADDR_NOTAVAIL: not in the AV)
  rdm_tx* head = nullptr;           // messages not yet acknowledged, oldest first
  rdm_tx* tail = nullptr;
  rdm_tx* unsent = nullptr;         // the first with datagrams still to send
  // The message being received from this peer: a receive's, or an RMA
  // message's (a request we serve, or the answer to one of ours).
  fi_peer_rx_entry* rx = nullptr;
  rdm_tx* rma = nullptr;
  util::rd::assembly rx_as;         // its length and how much has come
  uint64_t heard_ns = 0;            // when its last datagram came
  uint32_t awaiting = 0;            // our requests acknowledged by it and not yet answered
  // Its unexpected messages held (they point here); freed by a thread
  // posting to a shared context too, without our lock.
  std::atomic<uint32_t> unexp{0};
  bool rx_unexp = false;
  bool rx_dropped = false;          // no entry: its datagrams are acknowledged and dropped
  bool ack_listed = false;
  bool refused_listed = false;      // in the endpoint's refused_ list
  // Scalable endpoints: the receive context of it we send to
  // (rd::msg::rx_index; fi_rx_addr), and the port it is known by when not
  // its socket's (a transmit context's: rd::msg::name_port; 0: its own).
  // (In the padding after the flags: an idle peer stays within 256 bytes.)
  uint8_t to_index = 0;
  bool more_listed = false;         // in the endpoint's more_ list (FI_MORE)
  uint16_t name_port = 0;

  // Something of it is half-received, or answers of it are owed to us.
  bool waited_for() const noexcept { return rx || rma || awaiting; }
  // Nothing of it anywhere but in this struct: its link holds nothing
  // either way, no list or message points to it.
  bool idle() const noexcept {
    return busy_at < 0 && !head && !waited_for() && !link.in_flight() && !link.ack_due() &&
           !link.refusing() && !ack_listed && !refused_listed && !more_listed &&
           unexp.load(std::memory_order_acquire) == 0;
  }
  const sockaddr* sa() const noexcept { return key->sa(); }
  socklen_t sa_len() const noexcept { return key->len; }
};
// A node of the peer table holds the hash, the key and the peer.
static_assert(sizeof(rdm_peer) + sizeof(peer_key) + 2 * sizeof(void*) <= 240,
              "an idle peer costs at most 256 bytes with the allocator's header");

// An unexpected message's bytes, until a receive takes them.
class rdm_endpoint;
struct rdm_unexp {
  size_t len;
  rdm_peer* from;     // its sender (peers live as long as the endpoint)
  rdm_endpoint* ep;   // the endpoint it came to (the peer callbacks find it here)
  // Under a shared receive context: its place in the endpoint's list of
  // messages queued at the context (withdrawn when the endpoint closes).
  fi_peer_rx_entry* queued;
  rdm_unexp* q_prev;
  rdm_unexp* q_next;
  std::byte data[];
};

class rdm_endpoint : public util::endpoint_object<rdm_endpoint> {
 public:
  static int open(util::domain& dom, const fi_info& info, fid_ep** out, void* context) noexcept;
  // A context of a scalable endpoint (sep.cpp): class FI_CLASS_TX_CTX or
  // FI_CLASS_RX_CTX on socket `s` (a receive context: its endpoint's port +
  // `rx_index`; a transmit context: a port of its own), named `name` (the
  // scalable endpoint's).
  static int open_context(util::domain& dom, const fi_info& info, size_t fclass,
                          util::unique_fd s, uint8_t rx_index, const sockaddr_storage& name,
                          std::unique_ptr<util::sep_slot> slot, fid_ep** out,
                          void* context) noexcept;
  rdm_endpoint(util::domain& dom, const fi_info& info, size_t fclass, void* context);
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
  // Peers with reliability state (created at their first datagram); the
  // AV's other peers cost only their AV entries.
  size_t peers_with_state() const noexcept { return peers_.size(); }

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
  // A transmit context's hook: its pass, then the receive contexts nothing
  // else drives (util::scalable_ep::adopt).
  template <class Lock>
  static void tx_ctx_progress_thunk(void* obj) noexcept {
    auto* ep = static_cast<rdm_endpoint*>(obj);
    ep->progress<Lock>();
    ep->sep_slot_->sep().progress_orphans();
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

  // shared_rx: bound to a shared receive context (receives are its).
  template <class Lock>
  static const fi_ops_msg* msg_table(bool shared_rx) noexcept;
  template <class Lock>
  static const fi_ops_tagged* tagged_table(bool shared_rx) noexcept;
  static const fi_ops_srx_peer* peer_table(bool locked) noexcept;

  // What check_rma / check_atomic hold this endpoint's RMA to.
  util::rma_limits rma_limits() const noexcept {
    return {max_iov, rdm_max_rma_iov, max_msg_, rdm_inject_size, rdm_atomic_max};
  }
  // RMA and atomics (rdm_rma.cpp): every call form of fi_rma(3) and
  // fi_atomic(3) ends in these (util::rma_ops).
  template <class Lock>
  ssize_t post_rma(const util::rma_request& r) noexcept;
  template <class Lock>
  ssize_t post_atomic(const util::atomic_request& r) noexcept;
  size_t atomic_max_bytes() const noexcept { return rdm_atomic_max; }
  template <class Lock>
  static const fi_ops_rma* rma_table() noexcept;
  template <class Lock>
  static const fi_ops_atomic* atomic_table() noexcept;

  static const fi_provider* prov() noexcept;
  uint64_t tx_op_flags() const noexcept { return tx_op_flags_; }
  // FI_TRIGGER calls go to the domain's trigger engine (util/trigger.hpp).
  util::trigger_site trigger_site() noexcept { return {*domain_, bound_, caps_}; }
  uint64_t rx_op_flags() const noexcept { return rx_op_flags_; }

 private:
  int enable();
  errc open_socket(const sockaddr* addr, socklen_t len);
  // Makes `s` (bound) the endpoint's socket: buffers, window, name.
  void take_socket(util::unique_fd s) noexcept;
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
  // A send to receive context i of a peer (an AV with rx_ctx_bits): the
  // peer's port + i (sep.cpp), looked up by socket address.
  rdm_peer* peer_for_rx_ctx(fi_addr_t dest, int* err) noexcept;
  // How completions name p: by its name port when it has one.
  fi_addr_t name_of(const rdm_peer& p) const noexcept;
  rdm_peer* peer_from(const sockaddr_storage& from, socklen_t len) noexcept;
  uint32_t next_epoch() noexcept;
  void mark_busy(rdm_peer& p) noexcept;
  // Sends what p's window takes; false when the socket is full.
  template <class Lock>
  bool pump(rdm_peer& p, uint64_t now) noexcept;
  // FI_MORE (fi_msg(3)): a send with it waits, its peer listed in more_,
  // for the first send without it or the next progress call; those send
  // what every listed peer's window takes, gathered into sendmmsg calls of
  // up to more_batch datagrams (one system call where each datagram took
  // one). Manual progress only: under automatic progress nothing of the
  // application's would come to send them.
  template <class Lock>
  void flush_more(uint64_t now) noexcept;
  // After a message is queued on p: holds it (FI_MORE in `flags`, manual
  // progress, room in the list) or sends what was held and then p's.
  template <class Lock>
  void send_or_hold(rdm_peer& p, uint64_t flags) noexcept;
  // Builds the iovecs of one data datagram (headers, a slice of t's
  // payload) into v; their count.
  static size_t datagram_iov(iovec* v, const util::rd::dgram& h, const rdm_tx& t, uint64_t off,
                             uint32_t bytes) noexcept;
  struct more_slot {  // one gathered datagram: its header and iovecs
    util::rd::dgram h;
    iovec v[2 + rdm_tx_iov];
  };
  static constexpr size_t more_batch = 32;
  static constexpr size_t more_peers = 64;
  std::vector<rdm_peer*> more_;
  std::unique_ptr<more_slot[]> more_slots_;  // made at the first FI_MORE
  // Payload bytes up to which a datagram is copied whole and sent with
  // sendto (send_datagram).
  static constexpr uint32_t small_datagram = 256;
  // One data datagram (first send or resend) of `t` at payload offset `off`.
  bool send_datagram(rdm_peer& p, const util::rd::dgram& h, const rdm_tx& t, uint64_t off,
                     uint32_t bytes) noexcept;
  // A bare acknowledgement to p, stamped now (sent whether or not one is
  // due); drops one held for p.
  void send_ack(rdm_peer& p) noexcept;
  // Under manual progress the acknowledgement a progress call owes is held
  // (util/rd_held_ack.hpp) for the answer that would carry it: one peer's,
  // until our next progress call, a datagram to that peer, or the keeper.
  util::rd::held_ack held_;
  bool hold_acks_ = false;
  // A datagram to p went out and carried its acknowledgement, or p's link
  // was reset: what is held for p is dropped.
  void unhold(rdm_peer& p) noexcept {
    if (held_.holds(&p)) held_.take();
  }
  // The end of a progress call: what it owes goes now or is held.
  void answer_acks() noexcept;
  // Operations finished (a send or a receive), for progress to tell sparse
  // traffic from dense. A shared receive context's posting thread finishes
  // receives too, without our lock: a relaxed load and store, no
  // read-modify-write (a lost count only costs a system call).
  std::atomic<uint32_t> finished_{0};
  void finished() noexcept {
    finished_.store(finished_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  // take_data refused a message meant for another receive context: neither
  // taken nor refused for room (no acknowledgement at all).
  bool misaddressed_ = false;
  uint64_t misaddressed_logged_ns_ = 0;
  bool stopped_early_ = false;  // the last progress call left the socket undrained
  bool dense_ = false;          // data waits when we look: drain the socket
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
  // A receive ends: completion, counter, entry freed; while the CQ is full,
  // kept in rx_deferred_ until progress finds room (flush_rx_deferred).
  template <class Lock>
  void finish_rx(fi_peer_rx_entry* e) noexcept;
  template <class Lock>
  void count_and_free_rx(fi_peer_rx_entry* e) noexcept;
  template <class Lock>
  void flush_rx_deferred() noexcept;
  template <class Lock>
  auto deferred_guard() noexcept {
    if constexpr (std::is_same_v<Lock, util::null_lock>)
      return 0;
    else
      return std::unique_lock<util::fast_mutex>{rx_deferred_lock_.m};
  }
  template <class Lock>
  void fail_rx(fi_peer_rx_entry* e, int err) noexcept;
  template <class Lock>
  void complete_deferred() noexcept;
  template <class Lock>
  void drop_rx(rdm_peer& p, int err) noexcept;
  // RMA messages (rdm_rma.cpp). take_rma takes each datagram of one (a
  // request we serve, or the answer to ours; take_data dispatches on the
  // first datagram's op); false leaves it unconsumed, as take_data.
  template <class Lock>
  bool take_rma(rdm_peer& p, const util::rd::view& v) noexcept;
  template <class Lock>
  bool begin_request(rdm_peer& p, const util::rd::view& v, uint8_t op) noexcept;
  template <class Lock>
  void begin_answer(rdm_peer& p, const util::rd::view& v) noexcept;
  template <class Lock>
  void finish_request(rdm_peer& p, rdm_tx* r) noexcept;
  // The last datagram of a request (or a fire-and-forget write) of ours was
  // acknowledged: it waits for its answer, or completes.
  template <class Lock>
  void rma_acked(rdm_peer& p, rdm_tx* t) noexcept;
  // Drops the RMA message half-received from p (a request: its data; an
  // answer: its request fails with `err`) and, with `awaiting`, fails the
  // requests still waiting for p's answers.
  template <class Lock>
  void drop_rma(rdm_peer& p, int err, bool awaiting) noexcept;
  // Appends t to p's queue of messages to send.
  void enqueue(rdm_peer& p, rdm_tx* t) noexcept;
  template <class Lock>
  ssize_t post_entry(rdm_peer& p, rdm_tx* t, void* context, bool completion, bool silent,
                     bool answer, uint64_t flags) noexcept;
  template <class Lock>
  void finish_answer(rdm_peer& p, rdm_tx* t, int err) noexcept;
  rdm_tx* take_response() noexcept;
  void put_response(rdm_tx* t) noexcept;
  rdm_unexp* alloc_unexp(size_t len, rdm_peer* from) noexcept;
  void free_unexp(rdm_unexp* b) noexcept;
  // The AV changed: peers and queued messages are named again.
  static void av_changed(void* self, bool inserted_only) noexcept;
  template <class Lock>
  void relabel(bool inserted_only) noexcept;
  rdm_tx* take_tx() noexcept;
  void put_tx(rdm_tx* t) noexcept;
  void drop_peers() noexcept;
  // A peer's fresh link says nothing of ours reached it (rd::verdict::
  // renewed): its queue goes again from the start under new numbers.
  void renew_peer(rdm_peer& p) noexcept;
  // Frees the state of peers idle for idle_ns_ (their AV entries stay): at
  // most every idle_ns_ / 4, from progress.
  void reclaim_idle(uint64_t now) noexcept;
  uint64_t idle_ns_ = 0;  // 0: never
  uint64_t next_reclaim_ns_ = 0;

  util::ref<util::domain> domain_;
  util::ep_bindings bound_;
  // Scalable endpoints (sep.cpp): a context's hold on its endpoint; the
  // receive context index we answer to (a datagram meaning another is
  // dropped); the port we are known by (0: our socket's); whether the
  // endpoint drives us (a receive context with no CQ or counter).
  std::unique_ptr<util::sep_slot> sep_slot_;
  uint8_t rx_index_ = 0;
  uint16_t name_port_ = 0;
  bool adopted_ = false;
  util::unique_fd sock_;
  // The descriptor our CQs, counters and the progress thread sleep on: an
  // epoll set of the socket and a timer that ticks while anything is in
  // flight (retransmissions, silent peers) and someone may sleep.
  util::unique_fd waitset_, timer_;
  bool timer_armed_ = false;
  uint64_t timer_start_ns_ = 0, timer_next_ns_ = 0;  // manual progress: when it is due
  errc open_waitset() noexcept;
  errc start_auto() noexcept;
  void tick_for_sleepers(uint64_t now) noexcept;
  bool sleeper_bound() const noexcept;
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
  std::unique_ptr<util::srx> srx_;  // made at fi_enable, with the AV (none under a shared context)
  fid_peer_srx* face_ = nullptr;
  util::srx_port rx_;               // the one dispatch to srx_ or the context (fi_enable)
  util::srx_binding shared_;  // the fi_srx_context bound to us, if any
  // Messages queued at the shared context (under q_lock_: the context's
  // posting thread finishes them through start/discard).
  util::fast_mutex q_lock_;
  rdm_unexp* queued_ = nullptr;
  // start / discard under way for messages we queued (a thread posting to
  // the context runs them): a closing endpoint waits for them to leave.
  std::atomic<int> in_start_{0};
  void list_queued(rdm_unexp* b, fi_peer_rx_entry* e) noexcept;
  // start / discard of a message we queued at a shared context: off the
  // list (before anything releases its entry) and counted in in_start_.
  void begin_start(rdm_unexp* b) noexcept;
  // Takes b off that list if it is on it (q_lock_ held).
  void unlink_queued(rdm_unexp* b) noexcept {
    if (!b->queued) return;
    if (b->q_prev) b->q_prev->q_next = b->q_next;
    else queued_ = b->q_next;
    if (b->q_next) b->q_next->q_prev = b->q_prev;
    b->q_prev = b->q_next = nullptr;
    b->queued = nullptr;
  }
  int bind_srx(struct fid* f, uint64_t flags);
  // Closing under a shared context: what we were filling fails
  // (FI_ECANCELED) and what we queued is withdrawn.
  template <class Lock>
  void retire_receives() noexcept;
  // Peers by socket address (nodes do not move: pointers to peers stay
  // valid), and the ones sent to by fi_addr (an AV index).
  std::unordered_map<peer_key, rdm_peer, peer_key_hash> peers_;
  rdm_peer* last_from_ = nullptr;  // peer_from's last answer (reset when peers are freed)
  std::vector<rdm_peer*> by_fi_;
  std::vector<rdm_peer*> busy_;      // peers with something in flight or unsent
  std::vector<rdm_peer*> ack_list_;  // peers owed an acknowledgement
  // Peers whose next datagram we could not take (no receive entry,
  // unexpected data at its bound, a full CQ): told "no room" (rd::link::
  // refuse) and told again when room may have come: a receive was posted
  // or unexpected data was taken (room_ moved), or nudge_ns passed.
  std::vector<rdm_peer*> refused_;
  std::atomic<bool> refusing_{false};  // refused_ is not empty: posting bumps room_
  std::atomic<uint32_t> room_{0};
  uint32_t room_seen_ = 0;
  uint64_t nudged_ns_ = 0;
  static constexpr uint64_t nudge_ns = 10'000'000;
  // A receive was posted or unexpected data freed while a peer waits for room.
  void room_made() noexcept {
    if (refusing_.load(std::memory_order_relaxed)) room_.fetch_add(1, std::memory_order_relaxed);
  }
  template <class Lock>
  void reopen_refused(uint64_t now) noexcept;
  // Transmit entries: tx_size_ of them, reserved at open, each first
  // touched when first taken (an entry is about 1 KB; an endpoint that
  // sends little must not pay 1 MB): only the first tx_carved_ are entries.
  std::unique_ptr<rdm_tx[]> tx_pool_;
  size_t tx_carved_ = 0;
  rdm_tx* tx_free_ = nullptr;
  size_t tx_free_count_ = 0;
  // Entries for the requests we serve (rdm_rma.cpp), apart from the
  // application's so that answering never waits for its sends; allocated
  // when the first request arrives.
  std::unique_ptr<rdm_tx[]> resp_pool_;
  rdm_tx* resp_free_ = nullptr;
  rdm_tx* tx_deferred_head_ = nullptr;  // acknowledged, waiting for room in the CQ
  rdm_tx* tx_deferred_tail_ = nullptr;
  // Finished receives waiting for room in the CQ, in order (finish_rx).
  // Under rx_deferred_lock_: start() finishes receives without our lock.
  std::deque<fi_peer_rx_entry*> rx_deferred_;
  util::mutex_lock rx_deferred_lock_;
  std::atomic<bool> rx_deferred_any_{false};
  // Bytes held for unexpected messages (bounded by FI_UDP_RDM_UNEXP_LIMIT);
  // a receive posted by another thread frees them (start) without our lock.
  std::atomic<size_t> unexp_bytes_{0};
  std::unique_ptr<std::byte[]> rxbuf_;  // one datagram
  util::mutex_lock lock_;
};

}  // namespace weft::udp
