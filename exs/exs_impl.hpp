// SPDX-License-Identifier: MIT
// libexs internals: sockets, queues, regions, the fabric contexts they run
// on, and the progress thread. Only the public API of libfabric.so.1
// (include/rdma) is used, like tools/.
//
// Locking: one library mutex (lib().m) guards every object below and every
// fabric call that reads or posts; the progress thread holds it while it
// reads completion and event queues and never while it sleeps.
#pragma once

#include <exs/exs.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#define EXS_API extern "C" __attribute__((visibility("default")))

namespace exs {

// The API version libexs is written for; a library older than it (Debian's
// libfabric 1.17) is asked for its own version instead: libexs runs there
// too (tests/compat/debian_exs.sh).
constexpr uint32_t fi_api_version = FI_VERSION(1, 18);
inline uint32_t api_version() {
  const uint32_t lib = fi_version();
  return lib < fi_api_version ? lib : fi_api_version;
}

// Remote CQ data of the writes that carry credits and the end of stream:
// [63:32] the receiving socket's id, [31:28] the kind, [27:0] its value:
// - data_credit: a count of buffers (seqpacket: messages; stream: buffers
//   of the receiver's chunk, from its cm_blob);
// - data_grant (stream): [27:24] count - 1 and [23:0] bytes: that many
//   buffers of that size, posted by the receiver in place of its ring
//   buffers (an application's receive, filled without a copy);
// - data_eof: the end of the stream.
// A stream sender uses its credits in the order granted, each for one piece
// of at most its size, and the provider fills posted buffers in the order
// posted: piece k lands in buffer k.
enum : uint64_t { data_credit = 1, data_eof = 2, data_grant = 3 };
inline uint64_t pack_data(uint32_t id, uint64_t kind, uint64_t n) {
  return (uint64_t(id) << 32) | (kind << 28) | (n & 0x0fffffffu);
}
constexpr size_t grant_max_bytes = (size_t(1) << 24) - 1;  // what data_grant can say
// What a receive posted in place is granted at most when the peer is on
// another host: a bigger receive completes with up to this much. Across two
// namespaces weft's tcp carried a stream of 1 MiB frames well below the
// rate of 256 KiB ones (the same bytes, 16 in flight); within a host the
// bound only cost (docs/decisions.md, "Extended sockets").
constexpr size_t grant_piece_bytes = size_t(256) << 10;
constexpr uint32_t grant_max_count = 16;

// A run of stream credits of one size, in the order granted.
struct credit_run {
  size_t bytes;
  uint64_t count;
};

// Connection private data, both directions.
struct cm_blob {
  uint32_t magic;      // cm_magic
  uint32_t type;       // SOCK_STREAM or SOCK_SEQPACKET
  uint32_t id;         // the sender's socket id, echoed in credit data
  uint32_t credits;    // credits granted at once (stream receive buffers)
  uint64_t chunk;      // bytes per credit (stream), 0 for seqpacket
  uint64_t key;        // the key of the sender's credit region
  uint64_t addr;       // its address (FI_MR_VIRT_ADDR) or 0
};
constexpr uint32_t cm_magic = 0x45585332;  // 'EXS2': data_grant (session 24)

struct fabric_ctx {
  std::string prov, fabric_name, domain_name;
  fi_info* info = nullptr;  // the entry the domain was opened with
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_eq* eq = nullptr;
  fid_cq* cq = nullptr;
  int eq_fd = -1, cq_fd = -1;
  size_t cq_size = 0;
  bool mr_local = false, mr_prov_key = false, mr_virt = false;
};

struct sock;
struct queue;
struct region;

enum class ctx_kind : uint8_t { op, rxbuf, credit, eof };

// First member of every context handed to libfabric: FI_CONTEXT2 space,
// then what it is.
struct ctx_hdr {
  fi_context2 fictx;
  ctx_kind kind;
  sock* s;
};

enum class op_type : uint8_t { send, recv, accept, connect };

struct op : ctx_hdr {
  op_type type;
  queue* q = nullptr;
  void* context = nullptr;
  iovec iov[EXS_IOV_MAX];
  region* rg[EXS_IOV_MAX] = {};
  int iovcnt = 0;
  size_t total = 0;
  size_t posted = 0;     // stream send: bytes handed to the provider
  size_t done = 0;       // bytes moved so far
  size_t cur_iov = 0, cur_off = 0;  // stream send cursor
  int prov_refs = 0;     // provider operations still holding this context
  bool at_provider = false;  // recv: posted to the provider (every seqpacket
                             // one; a stream one filled without a copy)
  bool finished = false;     // its event has been queued
  bool cancel_asked = false;
  // accept: the socket made for the caller, once connected
  int new_fd = -1;
  sockaddr_storage addr{};
  socklen_t addrlen = 0;
};

struct rxbuf : ctx_hdr {
  char* data = nullptr;
  size_t cap = 0, len = 0, off = 0;
  bool posted = false;
};

enum class sstate : uint8_t { fresh, bound, listening, connecting, connected, closed };

struct sock {
  int fd = -1;
  uint32_t id = 0;
  int type = 0;  // SOCK_STREAM / SOCK_SEQPACKET
  int family = 0;
  sstate state = sstate::fresh;
  std::string prov;  // chosen provider ("" = the first that works)
  fabric_ctx* fc = nullptr;
  fi_info* info = nullptr;  // the entry its endpoints are opened with
  fid_pep* pep = nullptr;
  fid_ep* ep = nullptr;
  fid_mr* credit_mr = nullptr;
  uint64_t credit_word = 0;  // the credit region (writes carry 0 bytes)
  sockaddr_storage local{}, peer{};
  socklen_t local_len = 0, peer_len = 0;
  bool bound_explicitly = false;
  // The provider names its passive endpoint only once it listens (it binds
  // at fi_listen): `local` holds the address asked for until then.
  bool name_at_listen = false;

  // listening
  int backlog = 16;
  std::deque<std::pair<fi_info*, cm_blob>> connreqs;  // requests waiting for an exs_accept
  std::deque<op*> accepts;        // exs_accept calls waiting for a request
  sock* listener = nullptr;       // accepted, not yet connected: whose
  op* accept_op = nullptr;        // ... and the exs_accept it answers

  // connected
  op* connect_op = nullptr;
  uint32_t peer_id = 0;
  uint64_t peer_key = 0, peer_addr = 0;
  uint64_t peer_chunk = 0;
  uint64_t send_credits = 0;   // messages (seqpacket) or pieces (stream) we may send
  std::deque<credit_run> grants;  // stream: the sizes of those pieces, in order
  uint64_t owed = 0;           // seqpacket: credits to grant to the peer
  std::deque<credit_run> owed_runs;  // stream: buffers posted, not yet granted
  uint64_t revoked = 0;        // credits granted for receives since cancelled
  size_t tx_inflight = 0, tx_max = 0;
  size_t data_inflight = 0;  // sends handed to the provider, not completed
  size_t iov_limit = 4, max_msg = 0;
  bool credit_inflight = false;
  ctx_hdr credit_ctx{}, eof_ctx{};
  bool shut_wr = false, shut_rd = false;  // local exs_shutdown
  bool eof_sent = false, eof_posted = false;
  bool peer_eof = false;   // the peer's end-of-stream marker arrived
  bool peer_gone = false;  // FI_SHUTDOWN or a connection error
  int so_error = 0;
  std::deque<op*> sends;   // not yet fully handed to the provider
  std::list<op*> live;     // every op not yet freed
  // seqpacket: posted, in order. stream: in order, those posted to the
  // provider (at_provider) first, then those waiting for the ring's bytes.
  std::deque<op*> recvs;

  // stream receive ring: 16 x 64 KiB by default (docs/decisions.md,
  // "Extended sockets"); its memory is left untouched until bytes land.
  int stream_bufs = 16;
  size_t stream_chunk = 65536;
  std::vector<rxbuf> ring;
  std::unique_ptr<char[]> ring_mem;
  size_t ring_bytes = 0;
  fid_mr* ring_mr = nullptr;
  std::deque<rxbuf*> ready;  // filled, not yet consumed, in arrival order
  int ring_posted = 0;       // ring buffers at the provider
  size_t grant_cap = 0;      // the most one receive posted in place is granted (0: not known yet)

  bool fd_signalled = false;
};

struct queue {
  exs_qhandle_t handle;
  int depth;
  int reserved = 0;  // operations posted that will complete here
  int waiters = 0;
  std::deque<exs_event_t> events;
  std::condition_variable cv;
  // How long exs_qdequeue spins on this queue before it sleeps: from
  // EXS_SPIN_US up to ten times that, following the waits it sees
  // (queue.cpp).
  std::chrono::steady_clock::duration spin{};
};

struct region {
  exs_mhandle_t handle;
  char* addr;
  size_t len;
  int access;
  int users = 0;  // operations outstanding on it
  std::map<fid_domain*, fid_mr*> mrs;  // FI_MR_LOCAL domains, registered when first used
};

struct library {
  std::mutex m;
  std::condition_variable state_cv;  // any socket's readiness may have changed
  std::unordered_map<int, sock*> socks;  // by descriptor
  std::unordered_map<uint32_t, sock*> by_id;
  std::unordered_map<exs_qhandle_t, queue*> queues;
  std::unordered_map<exs_mhandle_t, region*> regions;
  std::vector<fabric_ctx*> fabrics;
  std::vector<sock*> retry;  // sockets whose posts met FI_EAGAIN
  // Event queue entries name endpoints by fid, and an entry may outlive its
  // endpoint: fids are looked up here, never dereferenced.
  std::unordered_map<const fid*, uint32_t> fid_ids;
  bool draining = false;            // reading the EQ after closing an endpoint
  std::vector<uint32_t> serve_later;  // listeners whose requests wait for that
  uint32_t next_id = 1;
  exs_qhandle_t next_q = 1;
  exs_mhandle_t next_m = 1;
  uint64_t next_key = 1;
  int epfd = -1, kick_fd = -1;
  bool thread_started = false;
  // A thread waiting in exs_qdequeue first drives progress itself for up to
  // spin (EXS_SPIN_US): the event it waits for is then found with no
  // thread woken and no wait object written. While one does, until
  // spin_lease, the progress thread keeps off (its armed wait objects would
  // make every completion a system call and a wake-up on the spinner's
  // path); a spinner that gives up kicks it before it sleeps.
  std::chrono::steady_clock::duration spin{};
  std::chrono::steady_clock::time_point spin_lease{};
};

// One pass of progress over every fabric (the lock held): completions,
// connection events, and sockets whose posts met FI_EAGAIN (fabric.cpp).
void progress_pass(library& L);

library& lib();

// errno helpers
inline int fail(int e) { errno = e; return -1; }
int errno_of_fi(int fi_err);  // a positive FI_E* code

// setup (fabric.cpp)
fabric_ctx* fabric_for(const std::string& prov, int family, const sockaddr* src,
                       const sockaddr* dst, fi_info** out_info, int* err);
// Whether an address is this host's: loopback, or one of its interfaces'.
bool on_this_host(const sockaddr_storage& a);
void kick();  // wake the progress thread
// After a send or receive is posted: wakes the progress thread unless a
// spinner holds the lease (fabric.cpp says why).
void nudge();
void start_progress();

// queues (queue.cpp)
queue* find_queue(exs_qhandle_t qh);
void push_event(queue* q, const exs_event_t& ev);

// memory (mr.cpp)
region* find_region(exs_mhandle_t mh);
void* desc_for(region* r, fabric_ctx* fc);
uint64_t fresh_key();

// sockets (socket.cpp)
sock* find_sock(int fd);
void update_ready(sock* s);
short ready_events(const sock* s);
void destroy_sock(sock* s);

// transfers (xfer.cpp)
void pump(sock* s);
void finish_op(op* o, int err, size_t bytes, int flags);
void maybe_free(op* o);
void fail_all(sock* s, int send_err, int recv_err, int recv_flags);
int setup_connected(sock* s);  // credit MR and stream ring, before connect/accept
void handle_cq(fabric_ctx* fc);
void stream_deliver(sock* s);
// Posts `o`'s buffers to the provider as one receive (at_provider, a
// provider reference taken); fi_recvmsg's answer.
ssize_t recv_at_provider(sock* s, op* o);
uint64_t credit_key(sock* s);
sock* new_sock(int type, int family);  // with its descriptor, in by_id (not in socks)

// connection management (cm.cpp)
void handle_eq(fabric_ctx* fc);
int start_accept(sock* ls, fi_info* req, const cm_blob& peer, op* o);
void serve_accepts(sock* ls);
void close_fid(fabric_ctx* fc, fid* f);  // forgets it, closes it, drains the EQ

}  // namespace exs
