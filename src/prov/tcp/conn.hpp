// SPDX-License-Identifier: MIT
// weft — tcp connections (conn.cpp): socket helpers, the transmit entries
// and their pool, one connection's state, and unexpected-message buffers.
#pragma once

#include "core/errc.hpp"
#include "prov/tcp/frame.hpp"
#include "prov/tcp/local_stream.hpp"
#include "prov/tcp/params.hpp"
#include "prov/tcp/proto.hpp"
#include "util/fd.hpp"

#include <rdma/fabric.h>
#include <rdma/providers/fi_peer.h>

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <string>

namespace weft::tcp {

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
// Whether the established socket's two ends are on this host.
bool same_host_socket(int fd) noexcept;
// A listening socket bound to `addr` (port 0: any); errc of the failure,
// logged.
errc listen_socket(const sockaddr* addr, int backlog, util::unique_fd& out) noexcept;
// The same, quiet: errno of the failure, 0 on success (a search that tries
// ports in turn logs only its outcome).
int try_listen(const sockaddr* addr, int backlog, util::unique_fd& out) noexcept;
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
  bool quiet;         // util::op_quiet: no endpoint counter counts it
  uint8_t dst_count;  // request: where the answer's payload goes (read data, prior values)
  uint32_t msg_id;    // request: the id its answer carries
  uint64_t dst_len;   // bytes the answer must carry
  iovec iov[tx_max_iov];
  iovec dst[max_iov];
  alignas(8) std::byte hdr[proto::max_hdr_v1];
  alignas(8) std::byte inject[atomic_max_bytes];
};
static_assert(inject_size <= atomic_max_bytes);

// The endpoint's transmit entries: tx_attr->size of them, reserved at
// open but touched only as they are first used (an entry is about 700
// bytes; a server with a thousand accepted endpoints that each send little
// must not pay 700 KB for each).
class tx_pool {
 public:
  explicit tx_pool(size_t n);
  tx_entry* take() noexcept {
    tx_entry* t = free_;
    if (t) {
      free_ = t->next;
    } else {
      if (carved_ == size_) return nullptr;
      t = new (&slab_[carved_++]) tx_entry();  // first use: zeroed, as the pool was
    }
    --avail_;
    return t;
  }
  void put(tx_entry* t) noexcept {
    t->next = free_;
    free_ = t;
    ++avail_;
  }
  size_t available() const noexcept { return avail_; }
  // Every entry is back: nothing sent through the pool is outstanding.
  bool all_free() const noexcept { return avail_ == size_; }

 private:
  struct alignas(tx_entry) storage {
    std::byte b[sizeof(tx_entry)];
  };
  static_assert(std::is_trivially_default_constructible_v<tx_entry> &&
                std::is_trivially_destructible_v<tx_entry>);
  std::unique_ptr<storage[]> slab_;  // uninitialised: untouched pages stay unallocated
  size_t size_;
  size_t carved_ = 0;  // entries handed out at least once
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
  // Bytes one sendmsg is asked to take at most. The socket stays locked
  // for a whole call, and the peer's acknowledgements wait in its backlog
  // meanwhile: calls of many MiB (16 queued 1 MiB sends) carried a stream
  // across two namespaces well below the rate of calls of 256 KiB
  // (docs/decisions.md, docs/performance.md "Session 24").
  static constexpr size_t write_max = 256 * 1024;
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
  // recv straight into a buffer (a large payload's): the same results.
  ssize_t read_into(void* buf, size_t len) noexcept;

  // ---- the same-host stream (local_stream.hpp, docs/decisions.md) ----
  // Once in use, every frame both ways goes through `stream`; the socket
  // carries only wake bytes and the end of the connection.
  bool local() const noexcept { return local_; }
  local_stream stream;          // active: created and offered; passive: attached
  util::unique_fd stream_memfd; // active: the file offered, until cm_resp answers
  uint32_t offer_pid = 0;       // passive: the offer in cm_req (0: none)
  int32_t offer_fd = -1;
  uint64_t offer_cookie = 0;
  bool stream_wakes = false;    // what want_wakes last stored
  bool peer_eof = false;        // the socket ended; acted on once the stream is read out
  int eof_err = 0;              // its errno (0: a clean end of stream)
  // Stream calls in a row that found the pipe full with bytes to write, or
  // empty in the middle of a frame: the peer is what we wait for. Past a
  // bound, progress gives up the core (endpoint::progress_local), so a peer
  // that shares it, as on a busy or oversubscribed machine, gets to run.
  uint32_t stream_waits = 0;
  // From now on (active), or once the control frame now queued is out on
  // the socket (passive: cm_resp), bytes go through the stream.
  void use_stream() noexcept { local_ = true; }
  void use_stream_after_ctrl() noexcept { stream_after_ctrl_ = true; }
  // A local connection's socket: takes the pending wake and reads the wake
  // bytes; 1 when it is empty, 0 at end of stream, -errno.
  int drain_socket() noexcept;

  // ---- owner's state ----
  conn_state state;
  bool active;
  uint32_t events = 0;         // epoll interest now registered
  fi_addr_t addr = FI_ADDR_NOTAVAIL;  // RDM: the peer in the AV
  bool mapped = false;         // RDM: endpoint::peers_[addr] is this connection
  bool standby = false;        // RDM: the peer reconnected while ours to it is established;
                               // mapped once the peer sends here (ep_rdm.cpp, on_hello)
  bool stalled = false;        // staged bytes wait for the CQ to drain
  // RDM, passive: the peer's hello said feature_one_way (a transmit context
  // of a scalable endpoint): it names a sender, never serves our sends.
  bool one_way = false;
  // RDM, active: opened to a receive context of a peer (fi_rx_addr), listed
  // in endpoint::rx_peers_ under rx_dest, never in peers_.
  bool rx_keyed = false;
  fi_addr_t rx_dest = FI_ADDR_NOTAVAIL;
  // Sends gathered for the next progress call (msg.cpp, endpoint::send):
  // `corked` while in the endpoint's corked_ list; cork_frames / cork_bytes
  // count the queued frames no write was tried for yet.
  bool corked = false;
  uint16_t cork_frames = 0;
  uint32_t cork_bytes = 0;
  bool cork_more = false;      // a gathered send carried FI_MORE: the next without it flushes
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
  void send_wake() noexcept;
  ssize_t write_out(const iovec* v, size_t k) noexcept;

  util::unique_fd sock_;
  size_t write_cap_ = 0;  // write_max, or no bound within the host (0: not known yet)
  bool local_ = false;
  bool stream_after_ctrl_ = false;
  std::unique_ptr<std::byte[]> rx_buf_;
  size_t rx_head_ = 0, rx_tail_ = 0;
  tx_entry* tx_head_ = nullptr;
  tx_entry* tx_tail_ = nullptr;
  uint16_t ctrl_len_ = 0, ctrl_off_ = 0;
  alignas(8) std::byte ctrl_[proto::max_hdr_len + proto::cm_data_max];
};

class endpoint;

// An unexpected message's buffer, in peer_context of its srx entry.
struct unexp_buf {
  static constexpr size_t small = 4096;  // pooled size class
  unexp_buf* next;  // the free list
  // The endpoint the message arrived on: the srx peer callbacks find it here
  // (under a shared receive context the face's context is the context).
  endpoint* ep;
  // Under a shared receive context, the endpoint's list of messages queued
  // at the owner (under its aux_), withdrawn when it closes; `queued` is the
  // entry while listed, else null.
  fi_peer_rx_entry* queued;
  unexp_buf* q_prev;
  unexp_buf* q_next;
  size_t cap;  // bytes of data; `small` for pooled buffers
  size_t len;  // the message's bytes
  // RDM: who sent it, so that a message queued while its sender was not in
  // the AV gets the sender's fi_addr once it is inserted (endpoint::relabel).
  peer_name from;
  alignas(16) std::byte data[];
};

}  // namespace weft::tcp
