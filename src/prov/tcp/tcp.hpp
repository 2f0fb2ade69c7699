// SPDX-License-Identifier: MIT
// weft — the tcp provider: FI_EP_MSG and FI_EP_RDM messaging over TCP/IPv4
// and IPv6, with the wire format of proto.hpp.
//
// Shape: one endpoint class serves both endpoint types. It owns an epoll set
// of its sockets (the RDM listener, its connections, a timerfd for connect
// deadlines) whose descriptor joins the wait objects of the CQs, counters
// and EQ it is bound to, so a thread asleep in fi_cq_sread wakes when a
// socket has data, room, or a deadline passes. Manual progress: reading those
// objects runs the endpoint's progress (progress.cpp). Receives are matched
// by util::srx (the one matching engine); tcp is its peer: a message header
// asks get_msg / get_tag, and the payload is received straight into the
// posted buffer, or into an unexpected buffer the size of the message.
//
// Locks: `lock_` (the endpoint, under the domain's lock policy) guards the
// connections, the transmit pool and the sockets. The srx peer callbacks
// (start_* / discard_*) run from the application's receive calls without
// it; what they touch besides the entry they own (unexpected buffers, the
// deferred-completion list) is guarded by `aux_` (same policy). Order:
// lock_ -> aux_ -> srx -> CQ.
#pragma once

#include "prov/tcp/frame.hpp"
#include "prov/tcp/proto.hpp"
#include "util/domain.hpp"
#include "util/endpoint.hpp"
#include "util/fabric.hpp"
#include "util/fd.hpp"
#include "util/lock.hpp"
#include "util/rma_ops.hpp"
#include "util/srx.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>

#include <sys/socket.h>
#include <sys/uio.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

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
};
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

// ---- sockets (conn.cpp) ----

// The canonical form of an address in hello frames and tie-breaks: the
// IPv4 (6 bytes) or IPv6 (22 bytes) AV entry of util/ip_codec.hpp.
struct peer_name {
  uint8_t len = 0;
  uint8_t bytes[proto::hello_addr_max] = {};
  bool operator==(const peer_name& o) const noexcept;
  // proto.hpp's tie-break order: memcmp, a shorter name first.
  bool operator<(const peer_name& o) const noexcept;
};
bool name_of(const sockaddr* sa, peer_name& out) noexcept;
bool sockaddr_of(const peer_name& n, sockaddr_storage& out) noexcept;

// A non-blocking TCP socket with TCP_NODELAY; invalid (logged) on failure.
util::unique_fd stream_socket(int family) noexcept;
// The options every connection's socket carries (accepted ones included):
// TCP_NODELAY, and keepalive probes plus a bound on unacknowledged data
// (TCP_USER_TIMEOUT) from FI_TCP_KEEPALIVE, so a peer whose host vanished
// without a word fails its connection instead of holding it forever.
void tune_stream(int fd) noexcept;
// A connection whose two ends are on this host (loopback, or one of the
// host's own addresses) uses FI_TCP_LOCAL_CC: there is no congestion to
// control there, and a pacing algorithm (bbr, a common system default)
// spaces out a bulk transfer on a path that would take it at once (a 1 MiB
// ping-pong over loopback takes about 3x as long under bbr as under reno).
// Called once the connection is established (before, there is no peer).
void tune_local(int fd) noexcept;
// A listening socket bound to `addr` (port 0: any); errc of the failure.
errc listen_socket(const sockaddr* addr, int backlog, util::unique_fd& out) noexcept;
errc errc_of_errno(int e) noexcept;
std::string describe(const sockaddr_storage& ss);

// One transmit: a frame header and the payload's iovecs, written with
// sendmsg and resumed where the kernel stopped. Pooled per endpoint.
//
// Most complete once written. A request that the target answers (an RMA,
// an atomic, a send asking for delivery complete) then waits on its
// connection's `awaiting` list for the answer with its msg_id; an answer we
// send (kind response) is just returned to the pool.
struct tx_entry {
  enum kind_t : uint8_t { send, request, response };
  tx_entry* next;
  void* context;
  uint64_t cq_flags;  // FI_SEND | FI_MSG or FI_TAGGED; FI_RMA/FI_ATOMIC | FI_READ/FI_WRITE
  size_t left;        // bytes of the frame not yet written
  uint8_t count;      // iovecs in use, the header first
  uint8_t first;      // the first iovec with bytes left
  bool complete;      // a CQ entry on success
  bool report;        // a CQ error entry on failure (not for fi_inject)
  kind_t kind;
  bool heap;          // a response allocated beyond the pool: deleted when written
  uint8_t dst_count;  // request: where the answer's payload goes (read data, prior values)
  uint32_t msg_id;    // request: the id its answer carries
  uint64_t dst_len;   // bytes the answer must carry
  iovec iov[tx_max_iov];
  iovec dst[max_iov];
  alignas(8) std::byte hdr[proto::max_hdr_v1];
  alignas(8) std::byte inject[atomic_max_bytes];
};
static_assert(inject_size <= atomic_max_bytes);

class tx_pool {
 public:
  explicit tx_pool(size_t n);
  tx_entry* take() noexcept {
    tx_entry* t = free_;
    if (t) free_ = t->next, --avail_;
    return t;
  }
  void put(tx_entry* t) noexcept {
    t->next = free_;
    free_ = t;
    ++avail_;
  }
  size_t available() const noexcept { return avail_; }

 private:
  std::unique_ptr<tx_entry[]> slab_;
  tx_entry* free_ = nullptr;
  size_t avail_ = 0;
};

enum class conn_state : uint8_t {
  connecting,  // active: the TCP connect is in flight
  handshake,   // hello (RDM) or cm_req / cm_resp (MSG) exchange
  accepting,   // MSG passive: cm_req read, waiting for fi_accept
  waiting,     // RDM active: the peer keeps its own connection to us (no socket)
  connected,
  closing,     // a last control frame (a refusal) is written, then close
  draining,    // MSG after a shutdown: what arrives is dropped until EOF
  closed,      // no socket; freed by the next sweep
};

// One connection. The owner (endpoint or passive endpoint) drives it; this
// class does the socket I/O: the control frame and the transmit queue out,
// a staging buffer and the frame reader in.
class conn {
 public:
  static constexpr size_t staging = 16 * 1024;
  enum class io : uint8_t { ok, blocked, error };

  conn(util::unique_fd s, bool active, const frame_limits& lim);
  int fd() const noexcept { return sock_.get(); }
  void close_socket() noexcept;
  // Whether what arrives is still read (closing: a refusal is on its way out).
  bool readable() const noexcept {
    return fd() >= 0 && state != conn_state::closed && state != conn_state::waiting &&
           state != conn_state::closing;
  }

  // ---- transmit ----
  // The control frame (hello, cm_req, cm_resp, shutdown) written before any
  // queued data; one at a time. Returns false if one is still pending.
  bool set_ctrl(const frame& f, const void* data, size_t len) noexcept;
  bool ctrl_pending() const noexcept { return ctrl_off_ < ctrl_len_; }
  bool tx_empty() const noexcept { return !tx_head_; }
  bool tx_idle() const noexcept { return tx_empty() && !ctrl_pending(); }
  // No frame is half written: a control frame may go next.
  bool at_frame_boundary() const noexcept;
  void push(tx_entry* t) noexcept;
  // Removes and returns the whole queue (linked through next).
  tx_entry* take_queue() noexcept;
  // Unlinks and returns the queued transmit of `context` not yet begun
  // (an application's: not an answer); null if none.
  tx_entry* cancel(void* context) noexcept;
  // Writes the control frame, then queued entries if `data`; finished
  // entries are linked into *done (in order). errno in *err on error.
  io flush(bool data, tx_entry** done, int* err) noexcept;

  // ---- receive ----
  frame_reader reader;
  std::byte* staged() noexcept { return rx_buf_.get() + rx_head_; }
  size_t staged_len() const noexcept { return rx_tail_ - rx_head_; }
  void consume(size_t n) noexcept { rx_head_ += n; }
  // recv into the staging buffer: bytes read, 0 at end of stream, -errno.
  ssize_t fill() noexcept;

  // ---- owner's state ----
  conn_state state;
  bool active;
  uint32_t events = 0;         // epoll interest now registered
  fi_addr_t addr = FI_ADDR_NOTAVAIL;  // RDM: the peer in the AV
  bool mapped = false;         // RDM: endpoint::peers_[addr] is this connection
  bool standby = false;        // RDM: the peer reconnected while ours to it is established;
                               // mapped once the peer sends here (ep_rdm.cpp, on_hello)
  bool stalled = false;        // staged bytes wait for the CQ to drain
  // Sends gathered for the next progress call (msg.cpp, endpoint::send):
  // `corked` while in the endpoint's corked_ list; cork_frames / cork_bytes
  // count the queued frames no write was tried for yet.
  bool corked = false;
  uint16_t cork_frames = 0;
  uint32_t cork_bytes = 0;
  uint32_t sent_epoch = 0;     // the endpoint's progress epoch of its last send written at once
  bool event_pending = false;  // MSG passive: FI_CONNECTED once cm_resp is out
  uint64_t deadline_ns = 0;    // connecting / handshake / waiting: give up then
  int connect_errno = 0;       // connect(2) failed at once: reported by progress
  sockaddr_storage peer{};     // the remote socket address
  peer_name name;              // RDM: the peer's listening address (hello)
  uint8_t av_entry[24];        // RDM, mapped: the AV entry of addr when mapped
  // The receive in progress: a posted (or multi-receive slice) entry, or an
  // unexpected one whose buffer is in peer_context.
  fi_peer_rx_entry* rx = nullptr;
  bool rx_unexp = false;
  uint8_t rx_iov = 0;
  uint16_t cm_len = 0;  // private data of a cm frame being read
  uint8_t cm_data[proto::cm_data_max];
  // Requests of ours waiting for their answers, in the order sent (answers
  // come back in that order unless a target fails some early).
  tx_entry* awaiting = nullptr;
  tx_entry* awaiting_tail = nullptr;
  uint32_t next_id = 1;
  // The request or answer being received (rma_write, atomics, responses):
  // the local ranges its payload goes to, and what to answer.
  tx_entry* rx_answer = nullptr;  // a response frame of ours: its request
  iovec rx_dst[proto::max_rma_iov * util::mr_iov_limit];
  uint8_t rx_dst_n = 0, rx_dst_i = 0;
  bool rx_rma = false;  // an rma_write / atomic / response is being received
  int rx_err = 0;       // the request failed at the checks (FI_E*): answer so
  alignas(16) std::byte atomic_in[2 * atomic_max_bytes];  // operands, compare values
  void await(tx_entry* t) noexcept;
  // The awaiting request with this id, unlinked; null if none.
  tx_entry* answered(uint32_t id) noexcept;
  conn* next = nullptr;  // the owner's list of connections
  conn* prev = nullptr;

 private:
  util::unique_fd sock_;
  std::unique_ptr<std::byte[]> rx_buf_;
  size_t rx_head_ = 0, rx_tail_ = 0;
  tx_entry* tx_head_ = nullptr;
  tx_entry* tx_tail_ = nullptr;
  uint16_t ctrl_len_ = 0, ctrl_off_ = 0;
  alignas(8) std::byte ctrl_[proto::max_hdr_len + proto::cm_data_max];
};

// An unexpected message's buffer, in peer_context of its srx entry.
struct unexp_buf {
  static constexpr size_t small = 4096;  // pooled size class
  unexp_buf* next;
  size_t cap;  // bytes of data; `small` for pooled buffers
  size_t len;  // the message's bytes
  alignas(16) std::byte data[];
};

// ---- the passive endpoint (pep.cpp) ----

class pep;

// The handle of an FI_CONNREQ event (info->handle): the accepted socket
// with its cm_req read, until fi_endpoint takes it or fi_reject refuses it.
struct connreq {
  struct fid fid;  // first: &fid converts back
  pep* owner;
  std::unique_ptr<conn> c;
  bool announced = false;
  static connreq* from(struct fid* f) noexcept { return reinterpret_cast<connreq*>(f); }
};

class pep : public util::fid_object<pep, fid_pep> {
 public:
  static int open(util::fabric& fab, fi_info* info, fid_pep** out, void* context) noexcept;
  pep(util::fabric& fab, fi_info* info, void* context);
  ~pep() override;

  int close();
  int bind(struct fid* bfid, uint64_t flags);
  int control(int command, void* arg);
  int getname(void* addr, size_t* addrlen);
  int setname(const void* addr, size_t addrlen);
  int listen();
  int reject(struct fid* handle, const void* param, size_t len);
  int getopt(int level, int name, void* val, size_t* len);

  // fi_endpoint with info->handle == the request: the connection leaves.
  std::unique_ptr<conn> take(connreq* r) noexcept;
  void progress() noexcept;
  static void progress_thunk(void* obj) noexcept { static_cast<pep*>(obj)->progress(); }

 private:
  void accept_all() noexcept;
  void read_request(connreq& r) noexcept;
  bool announce(connreq& r) noexcept;
  void drop(connreq& r, const char* why) noexcept;
  errc open_socket(const sockaddr* addr);

  util::ref<util::fabric> fabric_;
  fi_info* info_;  // owned copy, the template of every FI_CONNREQ info
  util::unique_fd sock_;
  util::unique_fd epoll_;
  sockaddr_storage local_{};
  util::ref<util::eq> eq_;
  int backlog_ = 128;
  bool listening_ = false;
  std::mutex m_;
  std::vector<std::unique_ptr<connreq>> reqs_;
};

// ---- the active endpoint (ep.cpp, ep_msg.cpp, ep_rdm.cpp, msg.cpp, recv.cpp,
// progress.cpp, rma.cpp) ----

// The variant of the data path chosen at fi_enable: lock policy and
// endpoint type, one type so util::rma_ops can carry it as its `Lock`.
template <class Lock, bool Rdm>
struct ep_policy {
  using lock = Lock;
  static constexpr bool rdm = Rdm;
};

class endpoint : public util::endpoint_object<endpoint> {
 public:
  static int open(util::domain& dom, const fi_info& info, fid_ep** out, void* context) noexcept;
  endpoint(util::domain& dom, const fi_info& info, void* context);
  ~endpoint() override;

  // fi_ops / fi_ops_ep
  int close();
  int bind(struct fid* bfid, uint64_t flags);
  int control(int command, void* arg);
  ssize_t cancel(void* context);
  int getopt(int level, int name, void* val, size_t* len);
  int setopt(int level, int name, const void* val, size_t len);
  ssize_t rx_size_left();
  ssize_t tx_size_left();
  // fi_ops_cm
  int getname(void* addr, size_t* addrlen);
  int setname(const void* addr, size_t addrlen);
  int getpeer(void* addr, size_t* addrlen);
  int connect(const void* addr, const void* param, size_t len);
  int accept(const void* param, size_t len);
  int shutdown(uint64_t flags);

  // ---- the data path (msg.cpp), one instantiation per lock policy and
  // endpoint type ----
  template <class Lock, bool Rdm>
  ssize_t send(const iovec* iov, size_t count, fi_addr_t dest, void* context, uint64_t flags,
               uint64_t tag, uint64_t data) noexcept;
  template <class Lock>
  ssize_t post_msg(const iovec* iov, void** desc, size_t count, fi_addr_t src, void* context,
                   uint64_t flags) noexcept;
  template <class Lock>
  ssize_t post_tag(const iovec* iov, void** desc, size_t count, fi_addr_t src, uint64_t tag,
                   uint64_t ignore, void* context, uint64_t flags) noexcept;
  template <class Lock>
  void progress() noexcept {
    (void)run_progress<Lock>();
  }
  // One progress pass; false when work is left that only the application
  // can unblock (a full CQ), so automatic progress backs off.
  template <class Lock>
  bool run_progress() noexcept;
  template <class Lock>
  static void progress_thunk(void* obj) noexcept {
    static_cast<endpoint*>(obj)->progress<Lock>();
  }
  template <class Lock>
  static bool auto_work(void* obj) noexcept {
    return static_cast<endpoint*>(obj)->run_progress<Lock>();
  }
  template <class Lock, bool Rdm>
  static const fi_ops_msg* msg_table() noexcept;
  template <class Lock, bool Rdm>
  static const fi_ops_tagged* tagged_table() noexcept;
  // srx peer callbacks (recv.cpp): a queued unexpected message got a buffer,
  // or is dropped.
  template <class Lock>
  static int start(fi_peer_rx_entry* e) noexcept;
  template <class Lock>
  static int discard(fi_peer_rx_entry* e) noexcept;
  static const fi_ops_srx_peer* peer_table(bool locked) noexcept;
  static const fi_ops_tagged* tagged_badstate() noexcept;

  uint64_t tx_op_flags() const noexcept { return tx_op_flags_; }
  uint64_t rx_op_flags() const noexcept { return rx_op_flags_; }
  const fi_provider* prov() const noexcept { return &provider(); }

  // ---- RMA and atomics (rma.cpp). `P` is an ep_policy: the lock policy
  // and the endpoint type, as util::rma_ops passes it through. ----
  template <class P>
  ssize_t post_rma(const util::rma_request& r) noexcept;
  template <class P>
  ssize_t post_atomic(const util::atomic_request& r) noexcept;
  size_t atomic_max_bytes() const noexcept { return tcp::atomic_max_bytes; }
  template <class Lock, bool Rdm>
  static const fi_ops_rma* rma_table() noexcept;
  template <class Lock, bool Rdm>
  static const fi_ops_atomic* atomic_table() noexcept;

 private:
  friend class pep;
  int enable();
  errc open_listener(const sockaddr* addr);
  template <class Lock>
  auto guard() noexcept {
    if constexpr (std::is_same_v<Lock, util::null_lock>)
      return 0;
    else
      return std::unique_lock<std::mutex>{lock_.m};
  }
  template <class Lock>
  auto aux_guard() noexcept {
    if constexpr (std::is_same_v<Lock, util::null_lock>)
      return 0;
    else
      return std::unique_lock<std::mutex>{aux_.m};
  }

  // Calls f.template operator()<Lock>() with the endpoint's lock policy.
  template <class F>
  decltype(auto) with_lock(F&& f) {
    if (locked_) return f.template operator()<util::mutex_lock>();
    return f.template operator()<util::null_lock>();
  }

  // ---- connections (ep.cpp) ----
  conn* adopt(std::unique_ptr<conn> c, uint32_t events) noexcept;
  void watch(conn& c, uint32_t events) noexcept;
  void want_out(conn& c, bool on) noexcept;
  void arm_timer(uint64_t deadline_ns) noexcept;
  // Leaves epoll and closes the socket; the object stays.
  void close_fd(conn& c) noexcept;
  // Closes `c` for good (unmapped, freed by the next sweep).
  void retire(conn& c) noexcept;
  void stall(conn& c) noexcept;
  void sweep() noexcept;
  template <class Lock>
  void teardown() noexcept;

  // ---- transmit and completions (msg.cpp), receive (recv.cpp) ----
  template <class Lock>
  void flush(conn& c) noexcept;
  // A send queued on an idle connection waits for the next progress call,
  // with the sends that follow it, so a burst leaves in one sendmsg; false
  // when it may not (the list of corked connections is full).
  bool cork(conn& c) noexcept;
  // Writes what every corked connection gathered.
  template <class Lock>
  void uncork_all() noexcept;
  template <class Lock>
  bool complete_tx(tx_entry* t) noexcept;
  template <class Lock>
  void fail_tx(tx_entry* t, int err) noexcept;
  template <class Lock>
  bool finish_rx(fi_peer_rx_entry* e) noexcept;
  template <class Lock>
  void fail_rx(fi_peer_rx_entry* e, int err) noexcept;
  template <class Lock>
  void complete_deferred() noexcept;
  template <class Lock>
  bool on_message(conn& c) noexcept;
  void next_target(conn& c) noexcept;
  template <class Lock>
  void message_done(conn& c) noexcept;
  template <class Lock>
  unexp_buf* alloc_unexp(size_t n) noexcept;
  template <class Lock>
  void free_unexp(unexp_buf* b) noexcept;
  template <class Lock>
  bool write_rx(fi_peer_rx_entry* e) noexcept;
  template <class Lock>
  void done_rx(fi_peer_rx_entry* e, bool ok) noexcept;
  template <class Lock>
  bool rx_blocked() noexcept;
  // Fails every operation on `c` (queued sends, the receive in progress)
  // with `err` and closes it; the cause is logged by the caller.
  template <class Lock>
  void fail_conn(conn& c, int err) noexcept;
  // Fails every request of `c` still waiting for its answer.
  template <class Lock>
  void fail_awaiting(conn& c, int err) noexcept;

  // ---- RMA and atomics, both sides (rma.cpp) ----
  template <class Lock, bool Rdm>
  conn* tx_conn(fi_addr_t dest, int* err) noexcept;
  // Queues an initiator's request frame (header built in t->hdr) on `c`.
  template <class Lock>
  void post_request(conn& c, tx_entry* t, bool inject) noexcept;
  template <class Lock>
  bool on_rma_header(conn& c) noexcept;
  template <class Lock>
  bool on_rma_done(conn& c) noexcept;
  // An answer to a request of `c`'s peer: ack (err 0) or error frame, or a
  // payload-carrying response of `op` from `iov`.
  // `copy`: the payload is copied into the answer (at most atomic_max_bytes),
  // else sent from where `iov` points.
  template <class Lock>
  bool answer(conn& c, proto::op op, uint32_t id, uint8_t req_op, int err, const iovec* iov,
              size_t count, bool copy = false) noexcept;
  template <class Lock>
  void finish_request(tx_entry* t, int err) noexcept;
  template <class Lock>
  void remote_event(uint64_t kind_flags, uint16_t req_flags, uint64_t data, fi_addr_t src) noexcept {
    bound_.remote_event<Lock>(&provider(), kind_flags, req_flags & proto::flag_cq_data, data, src);
  }
  tx_entry* take_response() noexcept;
  void put_tx(tx_entry* t) noexcept;

  // ---- receiving (progress.cpp) ----
  template <class Lock>
  void pump(conn& c) noexcept;
  template <class Lock>
  bool handle(conn& c, frame_reader::status st) noexcept;
  template <class Lock>
  bool on_header(conn& c) noexcept;
  template <class Lock>
  bool on_done(conn& c) noexcept;
  template <class Lock>
  void on_writable(conn& c) noexcept;
  template <class Lock>
  void on_eof(conn& c, int err) noexcept;
  template <class Lock>
  void check_deadlines() noexcept;
  template <class Lock>
  void setup_failed(conn& c, int err) noexcept;
  template <class Lock>
  void protocol_error(conn& c, const char* what) noexcept;

  // ---- FI_EP_RDM (ep_rdm.cpp) ----
  template <class Lock>
  conn* conn_to(fi_addr_t dest, int* err) noexcept;
  template <class Lock>
  conn* connect_to(fi_addr_t dest, int* err) noexcept;
  void accept_incoming() noexcept;
  template <class Lock>
  bool on_hello(conn& c) noexcept;
  template <class Lock>
  bool on_refusal(conn& c, int status) noexcept;
  template <class Lock>
  void connected(conn& c) noexcept;
  void map(conn& c, fi_addr_t a) noexcept;
  void unmap(conn& c) noexcept;
  fi_addr_t lookup(const peer_name& n) noexcept;

  // ---- FI_EP_MSG (ep_msg.cpp) ----
  template <class Lock>
  bool on_cm_resp(conn& c) noexcept;
  template <class Lock>
  void msg_lost(conn& c, int err, bool graceful) noexcept;
  void cm_error(int err, const void* data, size_t len) noexcept;
  void cm_event(uint32_t event, const void* data, size_t len) noexcept;

  util::ref<util::domain> domain_;
  util::ep_bindings bound_;
  fi_ep_type type_;
  uint64_t caps_;
  uint64_t tx_op_flags_;
  uint64_t rx_op_flags_;
  size_t max_msg_;
  bool locked_;
  bool enabled_ = false;
  util::progress_hook hook_;
  util::unique_fd epoll_;
  util::unique_fd timer_;
  uint64_t timer_at_ = 0;  // the deadline the timer is armed for, 0: none
  frame_limits limits_;
  tx_pool txp_;
  size_t heap_responses_ = 0;  // responses allocated beyond the pool
  std::unique_ptr<util::srx> srx_;
  fid_peer_srx* face_ = nullptr;
  util::mutex_lock lock_;
  util::mutex_lock aux_;
  // Under aux_: completions waiting for CQ room (linked through next), the
  // free small unexpected buffers, and the bytes unexpected messages hold.
  fi_peer_rx_entry* deferred_head_ = nullptr;
  fi_peer_rx_entry* deferred_tail_ = nullptr;
  unexp_buf* unexp_free_ = nullptr;
  size_t unexp_free_count_ = 0;
  size_t unexp_bytes_ = 0;
  // Under lock_: send completions waiting for CQ room.
  tx_entry* tx_deferred_head_ = nullptr;
  tx_entry* tx_deferred_tail_ = nullptr;
  conn* conns_ = nullptr;  // every connection, linked through next/prev
  std::vector<conn*> stalled_, stalled_work_;
  // Send batching (manual progress only: under automatic progress nothing
  // would come back for a corked send). The first send after a progress
  // call is written at once, so a ping-pong waits for nothing; the sends
  // that follow it before the next progress call are gathered and written
  // together by that call, or at once when they reach the caps below.
  bool cork_ok_ = false;
  uint32_t epoch_ = 1;         // progress calls, wrapping
  std::vector<conn*> corked_;  // capacity reserved at open: never grows on the data path
  static constexpr size_t cork_conns = 64;
  static constexpr size_t cork_max_len = 4096;  // a larger send takes the gathered ones out
  static constexpr uint16_t cork_max_frames = 64;
  static constexpr uint32_t cork_max_bytes = 64 * 1024;
  bool sweep_needed_ = false;
  // Progress calls since the last epoll_wait while one peer is read directly.
  static constexpr uint32_t epoll_every = 16;
  uint32_t direct_polls_ = 0;
  // RDM
  util::unique_fd listener_;
  sockaddr_storage local_{};
  peer_name local_name_;
  std::vector<conn*> peers_;  // fi_addr -> connection in use
  size_t av_entry_size_ = 0;  // the bound AV's entry size
  // MSG
  conn* msg_conn_ = nullptr;
  bool connect_called_ = false;
  bool shutdown_ = false;   // fi_shutdown called, or the peer went away
  sockaddr_storage src_{};  // fi_info src_addr (MSG active side)
  bool src_set_ = false;    // fi_setname: the active socket binds to src_
};

bool is_class_ep(const fid* f) noexcept;
extern const fi_ops_cm ep_cm_ops;
// The next piece of an RMA frame's payload (rma.cpp).
void rma_next_target(conn& c) noexcept;

}  // namespace weft::tcp
