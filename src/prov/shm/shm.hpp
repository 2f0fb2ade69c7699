// SPDX-License-Identifier: MIT
// weft — the shm provider: FI_EP_RDM between endpoints of one host, over the
// shared-memory regions of region.hpp (layout and protocols in proto.hpp).
//
// An endpoint owns one region (its inbound side). Sending to a peer attaches
// the peer's region and claims a ring there on first contact (a `conn`);
// receiving reads the rings of the own region (an `inbound` per claimed
// ring). Messages up to inline_max bytes travel in the ring; larger ones send
// a rendezvous header: the receiver pulls the data with process_vm_readv once
// a receive matched it and acknowledges through its conn to the sender, or,
// where single copy is refused, the sender streams it through the ring's
// bounce segments. Matching is util::srx's, or that of the owner of a peer
// shared receive context (fi_peer(3)); this provider is its peer.
#pragma once

#include "core/hot.hpp"
#include "core/prefetch.hpp"
#include "util/fence.hpp"
#include "prov/shm/peer.hpp"
#include "prov/shm/proto.hpp"
#include "prov/shm/region.hpp"
#include "prov/shm/ring.hpp"
#include "prov/shm/wake.hpp"
#include "util/av.hpp"
#include "util/domain.hpp"
#include "util/endpoint.hpp"
#include "util/fabric.hpp"
#include "util/fast_mutex.hpp"
#include "util/fd.hpp"
#include "util/lock.hpp"
#include "util/rma_ops.hpp"
#include "util/sep.hpp"
#include "util/srx.hpp"
#include "util/peer_srx.hpp"
#include "util/srx_binding.hpp"
#include "util/srx_ctx.hpp"
#include "util/srx_port.hpp"

#include <rdma/fabric.h>
#include <rdma/providers/fi_peer.h>
#include <rdma/providers/fi_prov.h>

#include <sys/uio.h>

#include <array>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace weft::shm {

// Parameters (fi_info -e): FI_SHM_SINGLE_COPY, FI_SHM_SPLIT_COPY, FI_SHM_DIR.
struct config {
  // FI_SHM_AUTO_SPIN_US: under automatic progress, how long the thread keeps
  // polling after its last message before it sleeps (0: never).
  uint64_t auto_spin_ns = 50'000;
  bool single_copy = true;  // 0: every large message goes through bounce segments
  bool split_copy = true;   // 0: the receiver alone copies a large message (split.cpp)
  // FI_SHM_AUTO_HANDOFF: FI_THREAD_DOMAIN with automatic progress takes the
  // handoff policy (util/handoff.hpp); 0: a lock per object.
  bool auto_handoff = true;
  std::string dir = "/dev/shm";
};
const config& cfg() noexcept;
// The same, writable: the provider's parameters are read into it once, and
// unit tests set a field around a test (never while endpoints run).
config& cfg_for_tests() noexcept;
fi_provider& provider() noexcept;

const fi_info& info_template() noexcept;
bool offers(uint32_t version, const fi_info& wanted) noexcept;
int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
            const fi_info* hints, fi_info** info) noexcept;

extern const util::fabric_hooks fabric_hooks;
extern const util::domain_hooks domain_hooks;

inline constexpr size_t max_iov = proto::rts_max_iov;
// Messages up to this size travel inline (the inject size): 65 ring slots of
// the 128 a ring has, so a ring holds at least one at any moment.
inline constexpr size_t inline_max = 4096;
inline constexpr uint64_t max_msg = uint64_t{1} << 40;
inline constexpr uint32_t tx_depth = 1024;  // large sends in flight per endpoint
inline constexpr uint32_t rx_depth = 1024;  // receives posted per endpoint
// A peer that shows no sign of life for this long while we wait on it is
// looked up in the kernel (one check per stall_ns per peer, none otherwise).
inline constexpr uint64_t stall_ns = 10'000'000;
// Rings of senders that died quietly are looked for this often (in time),
// checked every sweep_every progress calls (so the clock is rarely read).
inline constexpr uint64_t sweep_ns = 1'000'000'000;
inline constexpr uint32_t sweep_every = 4096;

// Internal send flag: fi_inject asks for no completion whatever the flags.
inline constexpr uint64_t no_completion = 1ULL << 63;

// ---- addresses ---------------------------------------------------------------
//
// fi_getname gives "fi_shm://weft-shm-<uid>-<pidns>-<pid>-<index>" (the region
// name), NUL-padded to name_bytes so arrays of names have one stride. The AV
// keeps the 16 bytes needed to find the region again: the uid is always our
// own (regions of other users are never attached) and PID namespace inodes
// are 32-bit.
inline constexpr size_t name_bytes = 64;
inline constexpr char name_prefix[] = "fi_shm://";

struct addr_entry {
  uint32_t pid;
  uint32_t pidns;
  uint32_t index;
  uint16_t live;  // always 1: the AV zeroes it to mark a removed entry
  uint16_t reserved;
  // Two 8-byte compares, not five fields' worth of branches: the send path
  // checks its cached peer with this on every message.
  bool operator==(const addr_entry& o) const noexcept {
    uint64_t a[2], b[2];
    std::memcpy(a, this, sizeof a);
    std::memcpy(b, &o, sizeof b);
    return ((a[0] ^ b[0]) | (a[1] ^ b[1])) == 0;
  }
};
static_assert(sizeof(addr_entry) == 16 && std::is_trivially_copyable_v<addr_entry>);

// ---- scalable endpoints ------------------------------------------------------
//
// Each context of a scalable endpoint is a whole shm endpoint with its own
// region, named by an index taken from the endpoint's: the endpoint takes an
// ordinary index B (its name: what fi_getname gives and peers insert), and
// its contexts take B with a context number in the top byte:
// - receive context i (0 <= i < 128): B | i << 24, so context 0 is B itself
//   and fi_rx_addr(addr, i, bits) reaches B | i << 24 with no lookup;
// - transmit context t: B | (128 + t) << 24, which no fi_rx_addr names.
// Ordinary endpoints take indices below 2^24. A receiver names a sender by
// its index's low 24 bits (addr_entry_source), so whichever transmit context
// sent, FI_SOURCE and directed receives see the scalable endpoint's one
// address. An fi_rx_addr past the target's receive contexts names a region
// that does not exist: the send fails as to any endpoint that is gone.
inline constexpr uint32_t ctx_shift = 24;
inline constexpr uint32_t plain_index_limit = 1u << ctx_shift;
inline constexpr uint32_t max_contexts = 128;
constexpr uint32_t rx_ctx_index(uint32_t base, uint32_t i) noexcept { return base | i << ctx_shift; }
constexpr uint32_t tx_ctx_index(uint32_t base, uint32_t t) noexcept {
  return base | (max_contexts + t) << ctx_shift;
}
// The address a sender is known by: its scalable endpoint's, for a context.
inline addr_entry addr_entry_source(addr_entry id) noexcept {
  id.index &= plain_index_limit - 1;
  return id;
}
// fi_scalable_ep on an shm domain (sep.cpp).
int open_sep(util::domain& dom, fi_info* info, fid_ep** out, void* context);

extern const util::av_codec addr_codec;
// "fi_shm://..." (at most `len` bytes, NUL-terminated within them) -> entry.
bool parse_name(const char* s, size_t len, addr_entry& out) noexcept;
// The padded name of an entry into buf[name_bytes].
void format_name(const addr_entry& e, char* buf) noexcept;
std::string region_name_of(const addr_entry& e);

// ---- per-peer state ----------------------------------------------------------

struct conn;
struct inbound;

// An operation waiting for its peer: a large send (pulled by CMA until
// op_ack, or streamed through bounce segments until its last chunk is
// consumed), an RMA or atomic until the target answers, or (internal) the
// data of a read we serve, streamed back through bounce segments.
struct tx_entry {
  enum state_t : uint8_t { free, wait_ack, streaming, draining };
  enum kind_t : uint8_t { send, write, read, atomic, internal };
  uint64_t token = 0;  // index | generation << 32
  void* context = nullptr;
  uint64_t cq_flags = 0;
  conn* c = nullptr;
  iovec iov[max_iov]{};
  uint32_t count = 0;
  bool completion = false;
  bool quiet = false;  // util::op_quiet: no endpoint counter counts it
  state_t state = free;
  kind_t kind = send;
  bool acked = false;        // a streamed write's answer came before its last chunk drained
  uint64_t ack_status = 0;
  uint64_t total = 0, sent = 0, consumed = 0;
  tx_entry* next = nullptr;  // free list, or the conn's bounce queue
};

// This endpoint as a sender to one peer: the peer's region and our ring in it.
struct conn {
  addr_entry id{};
  region reg;
  uint32_t ring = 0;
  ring_producer prod;
  peer_liveness live;
  bool same_ns = false;
  bool dead = false;
  bool cma_refused = false;  // the peer cannot read us: bounce from now on
  bool split_refused = false;  // we cannot write into the peer: no help with split copies
  util::unique_fd wake;        // the peer's wake FIFO, opened the first time it sleeps
  bool wake_broken = false;    // it has none we may open: it wakes by its timer
  bool bounce_ready = false;
  bool logged = false;       // the protocol choice for this peer was logged
  bool listed = false;       // on the endpoint's busy list
  uint32_t outstanding = 0;  // tx entries waiting on this peer
  uint64_t chunks = 0;       // bounce chunks written so far
  tx_entry* queue_head = nullptr;  // bounce transfers not fully written, in order
  tx_entry* queue_tail = nullptr;
  tx_entry* seg_owner[proto::bounce_segments]{};
  uint32_t seg_bytes[proto::bounce_segments]{};
  uint64_t watch_ns = 0;   // last sign of life (or liveness check) while busy
  uint64_t full_ns = 0;    // when sends first found the ring full, 0 if not
  // Answers (op_ack, op_resp, op_read_bounce) waiting for room in the ring,
  // in order; only ever used when the ring is full.
  struct reply {
    uint16_t op;
    uint64_t token, status;
    std::vector<std::byte> payload;
  };
  std::deque<reply> replies;

  bool busy() const noexcept { return outstanding || !replies.empty(); }
};

// Unexpected messages, kept in the srx entry's peer_context until matched.
enum class rec_kind : uint8_t { inline_data, cma, bounce };

class endpoint;

// While its entry is queued at the receive context's owner, a record is on
// its endpoint's list (the owner's start/discard callbacks find the endpoint
// here; at close, what is still queued is withdrawn).
struct rec_base {
  rec_kind kind;
  endpoint* ep = nullptr;
  fi_peer_rx_entry* queued = nullptr;  // the entry, while queued
  // The sender, so that a message queued while it was not in the AV is
  // labelled with its fi_addr once it is inserted (endpoint::relabel).
  addr_entry from{};
  rec_base* q_prev = nullptr;
  rec_base* q_next = nullptr;
};

// A copy of an inline message: the payload follows the record.
struct inline_rec : rec_base {
  uint32_t size;
  std::byte* data() noexcept { return reinterpret_cast<std::byte*>(this + 1); }
  static inline_rec* make(uint32_t size) noexcept;
  static void destroy(inline_rec* r) noexcept;
};

// The header of a large message: pulled when a receive matches it.
struct cma_rec : rec_base {
  inbound* in = nullptr;  // the sender's ring while it lasts (null: gone)
  cma_rec* prev = nullptr;
  cma_rec* next = nullptr;
  addr_entry id{};
  pid_t pid = 0;
  uint64_t token = 0, total = 0;
  uint32_t count = 0;
  proto::rts_iov iov[max_iov]{};
};

// Data arriving through bounce segments, into a matched receive or, for an
// unexpected message, a staging buffer (the sender must be able to finish).
struct rx_xfer : rec_base {
  inbound* in = nullptr;
  uint64_t token = 0, total = 0, received = 0;
  fi_peer_rx_entry* entry = nullptr;  // the matched receive (or the queued entry)
  std::byte* staging = nullptr;       // malloc'ed, unexpected messages only
  bool matched = false;     // entry describes a receive buffer
  bool discarded = false;   // no one will take it: drain and drop
  bool done = false;        // every byte arrived (staged)
  int err = 0;              // the transfer failed (FI_E*)
  // RMA: the data lands in `dst` (a write we serve: the checked target
  // ranges; a read we issued: the read's buffers) instead of a receive.
  enum rma_t : uint8_t { none, write_target, read_result } rma = none;
  tx_entry* read = nullptr;  // read_result: the read it completes,
  uint64_t read_token = 0;   // while its token is this
  uint16_t req_flags = 0;    // write_target: the request's flags,
  uint64_t cq_data = 0;      // its remote CQ data,
  addr_entry id{};           // who to answer
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  size_t dst_count = 0;
  iovec dst[proto::rma_max_targets * util::mr_iov_limit]{};
  uint32_t key_count = 0;  // write_target: the regions written, for their counters
  uint64_t keys[proto::rma_max_targets]{};
  // split copies (never queued: a matched message): the sender's pid and
  // buffers, and the bytes to copy
  bool split = false;
  pid_t pid = 0;
  uint32_t src_count = 0;
  proto::rts_iov src_iov[proto::rts_max_iov]{};
  uint64_t len = 0;
  ~rx_xfer() { std::free(staging); }
};

// One claimed ring of this endpoint's region: a sender.
struct inbound {
  uint32_t ring = 0, generation = 0;
  ring_consumer cons;
  addr_entry id{};      // the sender's own region: where answers go
  addr_entry src_id{};  // what it is known by (addr_entry_source)
  bool same_ns = false;
  peer_liveness live;
  fi_addr_t src = FI_ADDR_NOTAVAIL;  // cached reverse lookup of src_id
  conn* back = nullptr;              // our conn to the sender, for acks
  bool listed = false;
  bool dead = false;  // the sender exited: its ring goes back once drained
  uint64_t watch_ns = 0;
  std::vector<rx_xfer*> xfers;  // bounce and split transfers under way
  cma_rec* records = nullptr;   // unexpected large messages of this sender
  rx_xfer* split = nullptr;     // the transfer using this ring's split line
  uint64_t split_seq = 0;       // the last one published there
  bool cma_proven = false;      // a process_vm_readv from this sender worked
};

// ---- shared receive contexts ------------------------------------------------

// fi_srx_context with FI_PEER (a context another provider owns, fi_peer(3))
// is util::peer_srx; the application's own is util::srx_ctx. Endpoints bound
// to either match through its face (util::srx_port::share).
using util::peer_srx;

// ---- the endpoint ------------------------------------------------------------

class alignas(64) endpoint : public util::endpoint_object<endpoint> {
 public:
  static int open(util::domain& dom, const fi_info& info, fid_ep** out, void* context) noexcept;
  // A context of a scalable endpoint (sep.cpp): class FI_CLASS_TX_CTX or
  // FI_CLASS_RX_CTX, region index `index`, named `name` (the scalable
  // endpoint's), holding `slot` until it closes.
  static int open_context(util::domain& dom, const fi_info& info, size_t fclass, uint32_t index,
                          const addr_entry& name, std::unique_ptr<util::sep_slot> slot,
                          fid_ep** out, void* context) noexcept;
  endpoint(util::domain& dom, const fi_info& info, size_t fclass, void* context);
  // An index for an ordinary endpoint's region; plain_index_limit when this
  // process has used them all.
  static uint32_t take_index() noexcept;
  ~endpoint() override;

  int close();
  int bind(struct fid* bfid, uint64_t flags);
  int control(int command, void* arg);
  ssize_t cancel(void* context);
  int setopt(int level, int name, const void* val, size_t len);
  ssize_t rx_size_left();
  ssize_t tx_size_left();
  // FI_FENCE (util/fence.hpp): nothing of ours awaits an answer or a match
  // (every transmit that is not complete at its call holds a tx entry; the
  // others, inline sends and injects, are ahead in the peer's ring, which
  // it reads in order).
  bool tx_idle() const noexcept { return tx_free_count_ == tx_count_; }
  // 0 when a fenced send may go now, -FI_EAGAIN until then, -FI_EINVAL
  // without the capability.
  template <class Lock>
  ssize_t fence(const char* call) noexcept {
    [[maybe_unused]] auto g = guard<Lock>();
    return to_fi(util::fence_gate(&provider(), call, caps_, tx_idle()));
  }
  int getname(void* addr, size_t* addrlen);

  // ---- the data path, one instantiation per lock policy (msg.cpp) ----
  template <class Lock>
  ssize_t post_recv(const iovec* iov, void** desc, size_t count, fi_addr_t src, void* context,
                    uint64_t flags) noexcept;
  template <class Lock>
  ssize_t post_trecv(const iovec* iov, void** desc, size_t count, fi_addr_t src, uint64_t tag,
                     uint64_t ignore, void* context, uint64_t flags) noexcept;
  // fi_recv / fi_trecv: the engine's inline post when it applies (one
  // buffer, no multi-receive, nothing unexpected waiting), else the general one.
  template <class Lock>
  WEFT_ALWAYS_INLINE ssize_t post_recv_one(void* buf, size_t len, void* desc, fi_addr_t src,
                                           uint64_t tag, uint64_t ignore, void* context,
                                           bool tagged) noexcept {
    // Our engine takes no lock of its own: every call into it holds ours
    // (srx_attr::serialized), which progress holds anyway.
    [[maybe_unused]] auto g = guard<Lock>();
    return srx_->post_single<Lock>(buf, len, desc, src, tag, ignore, context, rx_op_flags_, tagged);
  }
  // One send of any form. op_flags carries FI_TAGGED for tagged sends,
  // FI_REMOTE_CQ_DATA when `data` goes along.
  template <class Lock>
  ssize_t send(const iovec* iov, size_t count, fi_addr_t dest, void* context, uint64_t flags,
               uint64_t tag, uint64_t data) noexcept;
  template <class Lock>
  WEFT_ALWAYS_INLINE ssize_t send_one(const void* buf, size_t len, fi_addr_t dest, void* context, uint64_t flags,
                   uint64_t tag, uint64_t data) noexcept;
  // shared_rx: receives belong to a peer SRX's owner (the receive slots fail).
  template <class Lock>
  static const fi_ops_msg* msg_table(bool shared_rx) noexcept;
  template <class Lock>
  static const fi_ops_tagged* tagged_table(bool shared_rx) noexcept;

  // ---- RMA and atomics, initiator and target (rma.cpp) ----
  template <class Lock>
  ssize_t post_rma(const util::rma_request& r) noexcept;
  template <class Lock>
  ssize_t post_atomic(const util::atomic_request& r) noexcept;
  size_t atomic_max_bytes() const noexcept { return proto::atomic_max_bytes; }
  template <class Lock>
  static const fi_ops_rma* rma_table() noexcept;
  template <class Lock>
  static const fi_ops_atomic* atomic_table() noexcept;
  static const util::rma_limits limits;

  uint64_t tx_op_flags() const noexcept { return tx_op_flags_; }
  // FI_TRIGGER calls go to the domain's trigger engine (util/trigger.hpp).
  util::trigger_site trigger_site() noexcept { return {*domain_, bound_, caps_}; }
  uint64_t rx_op_flags() const noexcept { return rx_op_flags_; }

  // ---- progress (progress.cpp) ----
  template <class Lock>
  WEFT_ALWAYS_INLINE void progress() noexcept;
  // The progress hook; defined beside progress() so that it is one call.
  template <class Lock>
  static void progress_thunk(void* obj) noexcept;
  // A transmit context's hook: the pass only when something may need it.
  template <class Lock>
  static void tx_ctx_progress_thunk(void* obj) noexcept;
  template <class Lock>
  static void tx_ctx_pass(endpoint* ep) noexcept;
  // Automatic progress (FI_PROGRESS_AUTO): the domain's progress thread
  // runs this when the endpoint's wait set is readable (a sender's wake, our
  // timer). Work left over wakes the thread again at once; false when none
  // of it moved (only the application can unblock it: a full CQ, receives
  // used up), so the thread retries after its backoff instead of spinning.
  template <class Lock>
  static bool auto_work(void* obj) noexcept;
  // The srx peer callbacks (fi_ops_srx_peer) of one lock policy: the owner
  // finds the endpoint through the entry's peer_context (a rec_base).
  template <class Lock>
  static const fi_ops_srx_peer* peer_table() noexcept;
  template <class Lock>
  int start(fi_peer_rx_entry* e) noexcept;
  template <class Lock>
  int discard(fi_peer_rx_entry* e) noexcept;

 private:
  int enable();
  int bind_srx(struct fid* f, uint64_t flags);
  // Closing under a peer SRX: queued messages are withdrawn from the owner,
  // receives it matched to transfers still under way fail (FI_ECANCELED).
  template <class Lock>
  void retire_receives() noexcept;
  template <class Lock>
  void drop_record(rec_base* rec) noexcept;
  template <class Lock>
  WEFT_ALWAYS_INLINE auto guard() noexcept {
    if constexpr (std::is_same_v<Lock, util::null_lock>)
      return 0;
    else if constexpr (std::is_same_v<Lock, util::handoff_lock>)
      return util::handoff::guard{domain_->handoff()};
    else
      return std::unique_lock<util::fast_recursive_mutex>{mutex_};
  }

  // ---- peers (conn.cpp) ----
  // The conn for fi_addr `dest`, attached and claimed on first use; null with
  // `err` set when the address is unknown or the peer cannot be reached.
  conn* conn_for(fi_addr_t dest, errc& err) noexcept;
  // conn_for's path for an fi_addr with receive-context bits (fi_rx_addr).
  conn* conn_for_rx_ctx(fi_addr_t dest, errc& err) noexcept;
  // conn_for's hit, inline for the send path: the peer cached for `dest`
  // while the AV still holds that peer there; null otherwise.
  conn* conn_hit(fi_addr_t dest) const noexcept {
    if (dest >= by_addr_.size()) [[unlikely]] return rx_hit(dest);
    conn* c = by_addr_[dest];
    if (!c) return nullptr;
    const uint8_t* raw = bound_.av_->entry(dest);
    if (!raw) return nullptr;
    addr_entry id;
    std::memcpy(&id, raw, sizeof id);
    return id == c->id ? c : nullptr;
  }
  // conn_hit's for an fi_rx_addr destination (above by_addr_): the peer
  // cached for exactly that value while the AV still holds the same peer
  // at its base address. Inline too: a transmit context sending to receive
  // context i of a peer takes no call, as one sending to context 0 takes
  // none (bench/ctx_rate.py).
  struct rx_slot {
    fi_addr_t dest = FI_ADDR_NOTAVAIL;
    conn* c = nullptr;
    addr_entry base{};  // the AV's entry of the destination's base address when cached
  };
  static size_t rx_slot_of(fi_addr_t dest) noexcept { return (dest ^ (dest >> 40)) & 15; }
  conn* rx_hit(fi_addr_t dest) const noexcept {
    const rx_slot& s = by_rx_addr_[rx_slot_of(dest)];
    if (s.dest != dest || !s.c) return nullptr;
    const uint8_t* raw = bound_.av_->entry(bound_.av_->strip_rx(dest));
    if (!raw) return nullptr;
    addr_entry id;
    std::memcpy(&id, raw, sizeof id);
    return id == s.base ? s.c : nullptr;
  }
  conn* conn_to(const addr_entry& id, errc& err) noexcept;
  // Rings c's doorbell, and wakes its owner if it may be asleep.
  void ring(conn& c) noexcept {
    if (c.reg.ring_doorbell(c.ring)) wake_peer(c);
  }
  void wake_peer(conn& c) noexcept;
  // Owner: tells senders whether to wake us (someone may sleep on a bound
  // CQ or counter) and takes their wakes; paces the timer.
  void watch_sleepers() noexcept;
  bool peer_dead(conn& c) noexcept;      // asks the kernel (rate-limited by callers)
  void watch(conn& c) noexcept;          // puts c on the busy list
  void watch(inbound& in) noexcept;
  tx_entry* take_tx() noexcept;
  void put_tx(tx_entry* t) noexcept;
  tx_entry* tx_of(uint64_t token) noexcept;
  template <class Lock>
  void complete_tx(tx_entry* t, int err) noexcept;
  template <class Lock>
  void fail_conn(conn& c, int err) noexcept;
  template <class Lock>
  void service(uint64_t now) noexcept;
  // A send found no room in c's ring (or a corrupt one): -FI_EAGAIN while the
  // peer lives; once it has stayed full for stall_ns, asks whether it died.
  template <class Lock>
  ssize_t ring_full(conn& c, errc e) noexcept;
  static void enqueue_bounce(conn& c, tx_entry* t) noexcept;

  // ---- large transfers (xfer.cpp) ----
  template <class Lock>
  void pump_bounce(conn& c) noexcept;
  template <class Lock>
  void poll_bounce(inbound& in) noexcept;
  template <class Lock>
  void finish_xfer(rx_xfer* x) noexcept;
  template <class Lock>
  void pull(fi_peer_rx_entry* e, const cma_rec& r) noexcept;
  // ---- split copies (split.cpp; protocol in proto.hpp) ----
  // Starts pulling `len` bytes of r into e with the sender's help; false
  // when it cannot (the caller pulls alone).
  template <class Lock>
  bool split_pull(fi_peer_rx_entry* e, const cma_rec& r, uint64_t len) noexcept;
  // Copies what is left to copy of in's split transfer, finishes it when done.
  template <class Lock>
  void poll_split(inbound& in) noexcept;
  // As a sender: copies pieces of a split transfer the peer published for
  // one of our messages.
  void help_split(conn& c) noexcept;
  // Ends in's split transfer before every piece is in (see split.cpp).
  void seal_split(inbound& in) noexcept;
  // Completes in's split transfer now (before a later message of the same
  // sender completes): claims what is left, waits for the sender's piece.
  // false when the sender died meanwhile.
  template <class Lock>
  bool finish_split(inbound& in) noexcept;
  template <class Lock>
  void send_ack(conn* c, uint64_t token, uint64_t status) noexcept {
    send_reply(c, proto::op_ack, token, status, nullptr, 0);
  }
  // An answer to `c`'s owner, queued in order when its ring is full. The
  // payload is gathered from `iov` (at most inline_max bytes).
  void send_reply(conn* c, uint16_t op, uint64_t token, uint64_t status, const iovec* iov,
                  size_t count) noexcept;
  void flush_replies(conn& c) noexcept;
  bool use_cma(conn& c) noexcept;

  // ---- receiving (progress.cpp) ----
  inbound* open_inbound(uint32_t ring) noexcept;
  // Drops ring `ring`'s sender (it closed, or wrote garbage: `force`) and
  // gives the ring back to the region's free pool.
  template <class Lock>
  void close_inbound(uint32_t ring, bool force = false) noexcept;
  template <class Lock>
  WEFT_ALWAYS_INLINE bool drain(uint32_t ring, bool& got) noexcept;
  // Hot rings (proto.hpp): `ring` just delivered; true if it is hot now.
  bool heat(uint32_t ring) noexcept;
  // Every hot ring goes back to doorbells (still pending until drained).
  void cool_all() noexcept;
  template <class Lock>
  bool handle(inbound& in, const msg_view& v) noexcept;
  template <class Lock>
  WEFT_ALWAYS_INLINE void deliver_inline(inbound& in, const msg_view& v, util::srx_entry& p, fi_addr_t src,
                      bool tagged) noexcept;
  // deliver_inline's rare ending (a truncation, a CQ that refused the
  // entry), out of line so that the common one stays short.
  template <class Lock>
  void deliver_general(fi_peer_rx_entry* e, const msg_fields& f, size_t size, size_t n,
                       fi_addr_t src, bool tagged) noexcept;
  template <class Lock>
  bool handle_rts(inbound& in, const msg_view& v) noexcept;
  template <class Lock>
  bool handle_ack(inbound& in, const msg_view& v) noexcept;
  template <class Lock>
  bool handle_rma_write(inbound& in, const msg_view& v) noexcept;
  template <class Lock>
  bool handle_rma_read(inbound& in, const msg_view& v) noexcept;
  template <class Lock>
  bool handle_atomic(inbound& in, const msg_view& v) noexcept;
  template <class Lock>
  bool handle_resp(inbound& in, const msg_view& v) noexcept;
  template <class Lock>
  bool handle_read_bounce(inbound& in, const msg_view& v) noexcept;
  // A served write or atomic changed our memory: remote counters and the
  // remote CQ data completion (fi_cq(3): FI_REMOTE_CQ_DATA, no receive used).
  template <class Lock>
  void remote_event(uint64_t kind_flags, uint16_t req_flags, uint64_t data, fi_addr_t src,
                    size_t len) noexcept {
    bound_.remote_event<Lock>(&provider(), kind_flags, req_flags & proto::flag_data, data, src,
                              len);
  }
  fi_addr_t source_of(inbound& in) noexcept;
  // A served access completed on these targets: their regions' counters
  // (fi_mr_bind) count it.
  void count_region(const proto::rma_target* tg, size_t n, uint64_t kinds) noexcept {
    domain_->mrs().count_remote(n, [&](size_t i) { return tg[i].key; }, kinds);
  }
  // Through rx_ (util/srx_port.hpp): our own engine directly, or the owner.
  template <class Lock>
  int match(bool tagged, fi_addr_t src, size_t size, uint64_t tag, fi_peer_rx_entry** e) noexcept;
  // Queues an unexpected message from `from` whose peer_context is set.
  template <class Lock>
  int queue(fi_peer_rx_entry* e, bool tagged, const addr_entry& from) noexcept;
  // util::av::watch: the bound AV changed; queued messages whose sender was
  // unknown get its address, and after a remove every queued message is
  // labelled again (ep.cpp).
  static void av_changed(void* self, bool inserted_only) noexcept;
  // The source a queued message's sender has now (its peer_context is a
  // rec_base): fi_peer(3)'s get_addr for foreach_unspec_addr.
  static fi_addr_t queued_source(fi_peer_rx_entry* e) noexcept;
  template <class Lock>
  void free_entry(fi_peer_rx_entry* e) noexcept {
    rx_.free_entry<Lock>(e);
  }
  void unqueue(rec_base* r) noexcept;
  // A receive's completion (and its counter): false, nothing written, when
  // the receive CQ has no room.
  template <class Lock>
  bool complete_rx(fi_peer_rx_entry* e, size_t len, int err) noexcept;
  // A receive ends: its completion written and its entry freed, or, while
  // the CQ is full (a receive the owner started, a transfer finishing), both
  // kept in order in deferred_rx_ until a pass finds room.
  template <class Lock>
  void finish_rx(fi_peer_rx_entry* e, size_t len, int err) noexcept;
  template <class Lock>
  void flush_deferred_rx() noexcept;
  void tick() noexcept;
  void arm_timer(uint64_t period_ns) noexcept;
  // Under automatic progress: the thread sleeps on our wait set, senders
  // always wake us (fi_enable).
  errc start_auto() noexcept;
  // fi_endpoint / open_context: our region under `index`, its FIFO and
  // what senders record of us.
  errc create_region(uint32_t index) noexcept;
  // The messages taken from our rings so far, summed (auto_work: did a
  // pass move anything?).
  uint64_t consumed() noexcept;
  // The fd sleepers on our CQs and counters watch: the timer and the FIFO.
  int wait_source() const noexcept { return waitset_.valid() ? waitset_.get() : timer_.get(); }
  // Finds senders that died without a word (a large transfer would have
  // noticed): their rings go back to the pool. Once per sweep_ns at most.
  template <class Lock>
  void sweep_senders() noexcept;

  util::ref<util::domain> domain_;
  util::ep_bindings bound_;
  uint64_t caps_;
  uint64_t tx_op_flags_;
  uint64_t rx_op_flags_;
  const util::lock_kind locks_;  // the domain's policy (util/lock.hpp)
  // FI_PROGRESS_AUTO: the domain's thread progresses us; senders wake us
  // (wake_on_) unless the application is polling us itself or the thread is
  // polling for a moment after work (app_polling_, spinning_; progress.cpp,
  // auto_work).
  const bool auto_;
  // Automatic progress only. The application's progress passes since the
  // last tick of the timer; app_poll_min of them in one tick period mean it
  // polls (set at once, cleared at the first tick period with fewer), and
  // while it polls senders do not wake the thread: the application sees
  // their messages first. The thread's own passes set in_auto_.
  static constexpr uint32_t app_poll_min = 64;
  uint32_t app_passes_ = 0;
  bool app_polling_ = false;
  bool in_auto_ = false;
  bool spinning_ = false;
  bool enabled_ = false;
  bool want_source_ = false;
  util::progress_hook hook_;
  util::fast_recursive_mutex mutex_;

  addr_entry self_{};
  sender_identity me_{};  // what our claims in peers' regions record
  region region_;
  doorbell_set pending_;
  std::vector<std::unique_ptr<inbound>> in_;  // by ring index, nrings
  // The inbounds in_ holds, in no order: what consumed() walks. A sender's
  // ring index comes from its pid, so walking in_ up to the highest ring
  // claimed made the progress thread's spin slower the higher a sender's
  // index (in hand runs, ring 448 made puts to a sleeping target about 2.7x
  // slower than ring 0; docs/performance.md).
  std::vector<inbound*> open_in_;
  std::vector<std::unique_ptr<conn>> conns_;
  struct id_hash {
    size_t operator()(const addr_entry& e) const noexcept {
      return (uint64_t{e.pid} << 32 | e.index) * 0x9E3779B97F4A7C15ull ^ e.pidns;
    }
  };
  std::unordered_map<addr_entry, conn*, id_hash> conn_index_;  // peers by identity
  std::vector<conn*> by_addr_;                        // cache: fi_addr -> conn
  std::array<rx_slot, 16> by_rx_addr_{};  // cache: fi_rx_addr destinations (rx_hit)
  bool busy_ = false;  // a busy list may be non-empty: service() has work
  std::vector<conn*> busy_conns_;
  std::vector<inbound*> busy_in_;
  cma_cache cma_;

  std::unique_ptr<tx_entry[]> tx_;
  tx_entry* tx_free_ = nullptr;
  uint32_t tx_count_ = 0, tx_free_count_ = 0;
  size_t rx_size_ = rx_depth;

  // Matching: this endpoint's own engine, or (srx_ null) a peer SRX's owner.
  std::unique_ptr<util::srx> srx_;
  // The engine the per-message fast path takes posted receives from: srx_,
  // or the peer SRX owner's when that is a util::srx locking as we do (lnx:
  // util::srx::behind); null: every message goes through rx_.
  util::srx* fast_ = nullptr;
  util::srx_binding shared_;  // a shared receive context: the application's or a peer's owner
  fid_peer_srx* face_ = nullptr;
  util::srx_port rx_;           // the one dispatch to srx_ or the owner (fi_enable)
  rec_base* queued_ = nullptr;  // records of unexpected messages queued at the owner
  struct deferred_rx {
    fi_peer_rx_entry* e;
    size_t len;
    int err;
  };
  std::deque<deferred_rx> deferred_rx_;  // finished receives waiting for CQ room

  // Blocking reads: without an fd the transport could signal, a periodic
  // timer in the CQ's and counters' wait sets wakes sleepers every tick_ns
  // so they run progress (timerfd; armed only when a bound object can wait).
  util::unique_fd timer_;
  uint64_t tick_start_ns_ = 0;
  uint64_t next_tick_ns_ = 0;  // 0: the timer is not armed
  uint64_t tick_period_ns_ = 0;
  // Senders wake a sleeper through this FIFO (wake.hpp); with it the timer
  // only paces transfers under way and liveness checks. Both are in
  // waitset_, the fd bound to CQs and counters.
  wake_fifo wake_;
  util::unique_fd waitset_;
  bool wake_on_ = false;  // wake_wanted as last stored in our region
  // Hot rings (proto.hpp): polled without doorbells while they deliver.
  static constexpr uint32_t hot_max = 4;
  static constexpr uint32_t hot_idle_max = 512;  // progress calls without a message
  std::array<uint32_t, hot_max> hot_{};
  uint32_t hot_count_ = 0;
  uint32_t hot_idle_ = 0;
  uint32_t sweep_countdown_ = sweep_every;
  uint64_t last_sweep_ns_ = 0;
  // The next slot of the ring the last small send went to. A small message
  // that arrives is often answered there (a ping-pong, a request and its
  // reply): progress prefetches that line for writing as it starts
  // delivering, so the line's transfer from the peer (who polls it) overlaps
  // the delivery instead of stalling the reply's store. Only a hint: a
  // prefetch never faults, so a stale pointer costs nothing but the hint.
  // Kept and used without locked instructions only (progress.cpp says why).
  const std::byte* reply_slot_ = nullptr;
  const bool prefetchw_ = cpu_has_prefetchw();
  // A context of a scalable endpoint: its hold on the endpoint, released
  // when the context is destroyed.
  std::unique_ptr<util::sep_slot> sep_slot_;
  bool adopted_ = false;  // a receive context its transmit contexts drive
};
// No hidden sharing between contexts (issue 14): a context is an endpoint
// with its own lock, region and bindings, and endpoints begin on cache
// lines of their own, so the state of two contexts driven by two threads
// shares no line (a line written by both is the cost a2c06fa measured).
static_assert(alignof(endpoint) % proto::cache_line == 0);

bool is_class_ep(const fid* f) noexcept;
// The tagged table of an endpoint that is not enabled yet (msg.cpp).
extern const fi_ops_tagged tagged_badstate;

}  // namespace weft::shm
