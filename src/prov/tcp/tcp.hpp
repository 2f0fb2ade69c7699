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

#include "prov/tcp/conn.hpp"
#include "prov/tcp/frame.hpp"
#include "prov/tcp/params.hpp"
#include "prov/tcp/pep.hpp"
#include "prov/tcp/proto.hpp"
#include "util/domain.hpp"
#include "util/endpoint.hpp"
#include "util/fence.hpp"
#include "util/fabric.hpp"
#include "util/fd.hpp"
#include "util/lock.hpp"
#include "util/rma_ops.hpp"
#include "util/sep.hpp"
#include "util/srx.hpp"
#include "util/srx_binding.hpp"
#include "util/srx_ctx.hpp"
#include "util/srx_port.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>

#include <sys/socket.h>
#include <sys/uio.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace weft::tcp {

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
  // A context of a scalable endpoint (sep.cpp): class FI_CLASS_TX_CTX or
  // FI_CLASS_RX_CTX, named `name` (the scalable endpoint's). A receive
  // context listens on `listener` (its endpoint's port + `rx_index`); a
  // transmit context listens nowhere and opens one-way connections.
  static int open_context(util::domain& dom, const fi_info& info, size_t fclass,
                          util::unique_fd listener, uint8_t rx_index,
                          const sockaddr_storage& name, std::unique_ptr<util::sep_slot> slot,
                          fid_ep** out, void* context) noexcept;
  endpoint(util::domain& dom, const fi_info& info, size_t fclass, void* context);
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
  // FI_FENCE (util/fence.hpp): 0 when a fenced send may go now (nothing of
  // ours in the transmit pool: every send, request and answer is done),
  // -FI_EAGAIN until then, -FI_EINVAL without the capability.
  template <class Lock>
  ssize_t fence(const char* call) noexcept {
    [[maybe_unused]] auto g = guard<Lock>();
    return to_fi(util::fence_gate(&provider(), call, caps_, txp_.all_free()));
  }
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
  // A transmit context's hook: its pass, then the receive contexts nothing
  // else drives (util::scalable_ep::adopt).
  template <class Lock>
  static void tx_ctx_progress_thunk(void* obj) noexcept {
    auto* ep = static_cast<endpoint*>(obj);
    ep->progress<Lock>();
    ep->sep_slot_->sep().progress_orphans();
  }
  // `shared_rx`: bound to a shared receive context, whose receives are
  // posted on the context: the endpoint's receive calls are -FI_ENOSYS.
  template <class Lock, bool Rdm>
  static const fi_ops_msg* msg_table(bool shared_rx) noexcept;
  template <class Lock, bool Rdm>
  static const fi_ops_tagged* tagged_table(bool shared_rx) noexcept;
  // srx peer callbacks (recv.cpp): a queued unexpected message got a buffer,
  // or is dropped.
  template <class Lock>
  static int start(fi_peer_rx_entry* e) noexcept;
  template <class Lock>
  static int discard(fi_peer_rx_entry* e) noexcept;
  static const fi_ops_srx_peer* peer_table(bool locked) noexcept;
  static const fi_ops_tagged* tagged_badstate() noexcept;

  uint64_t tx_op_flags() const noexcept { return tx_op_flags_; }
  // FI_TRIGGER calls go to the domain's trigger engine (util/trigger.hpp).
  util::trigger_site trigger_site() noexcept { return {*domain_, bound_, caps_}; }
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
  int bind_srx(struct fid* f, uint64_t flags);
  // The endpoint's own matching engine, naming senders as `av` reports
  // them (null: as they are); replaces the one before.
  void make_engine(const util::av* av);
  // A sender as completions and the receive context name it: its fi_addr,
  // or the user id the AV holds for it (FI_AV_USER_ID). FI_ADDR_NOTAVAIL
  // stays; one predictable branch while no user id is set.
  fi_addr_t source(const conn& c) const noexcept {
    return bound_.av_ ? bound_.av_->report(c.addr) : c.addr;
  }
  // Under a shared receive context, at close while the CQ is still bound:
  // receives of the context this endpoint was filling fail with
  // FI_ECANCELED, and the messages it queued at the context are withdrawn.
  template <class Lock>
  void retire_receives() noexcept;
  // Lists / unlists an unexpected message queued at a shared context's owner.
  template <class Lock>
  void list_queued(unexp_buf* b, fi_peer_rx_entry* e) noexcept;
  errc open_listener(const sockaddr* addr);
  template <class Lock>
  auto guard() noexcept {
    if constexpr (std::is_same_v<Lock, util::null_lock>)
      return 0;
    else
      return std::unique_lock<util::fast_mutex>{lock_.m};
  }
  template <class Lock>
  auto aux_guard() noexcept {
    if constexpr (std::is_same_v<Lock, util::null_lock>)
      return 0;
    else
      return std::unique_lock<util::fast_mutex>{aux_.m};
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
  // Leaves epoll, the socket staying open (a local connection whose peer
  // ended: its stream is read out first).
  void unwatch(conn& c) noexcept;
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
  // Whether a frame of `frame_len` bytes (`len` of payload) just queued on
  // `c` is written now, or waits in the connection's batch: `idle` says
  // the connection had nothing queued before it, `more` the caller's
  // FI_MORE, `guess` that an idle connection may batch without FI_MORE
  // (sends: a send since the last progress call already left alone).
  bool write_now(conn& c, bool idle, bool more, bool guess, size_t len,
                 uint32_t frame_len) noexcept;
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
  // Queues an initiator's request frame (header built in t->hdr) on `c`;
  // with FI_MORE in `flags` it waits for the requests that follow.
  template <class Lock>
  void post_request(conn& c, tx_entry* t, uint64_t flags) noexcept;
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
  void remote_event(uint64_t kind_flags, uint16_t req_flags, uint64_t data, fi_addr_t src,
                    size_t len) noexcept {
    bound_.remote_event<Lock>(&provider(), kind_flags, req_flags & proto::flag_cq_data, data, src,
                              len);
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
  // Answers a connection in its handshake with cm_resp(`status`) and closes
  // it once that is written (the cause is logged by the caller).
  template <class Lock>
  void refuse(conn& c, int status) noexcept;

  // ---- FI_EP_RDM (ep_rdm.cpp) ----
  template <class Lock>
  conn* conn_to(fi_addr_t dest, int* err) noexcept;
  template <class Lock>
  conn* connect_to(fi_addr_t dest, int* err) noexcept;
  // A send to a receive context of a peer (fi_rx_addr, an AV with
  // rx_ctx_bits): its own connection, to the peer's port + the index.
  template <class Lock>
  conn* conn_for_rx_ctx(fi_addr_t dest, int* err) noexcept;
  // Opens a connection to `to`, named `want`, meaning the peer's receive
  // context `rx_index`; the hello is queued.
  conn* open_conn(const sockaddr_storage& to, const peer_name& want, uint8_t rx_index,
                  int* err) noexcept;
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
  // util::av::watch: the bound AV changed. Connections and queued messages
  // of peers that were unknown get their address; after a remove, those of
  // a removed peer are unknown again (ep_rdm.cpp).
  static void av_changed(void* self, bool inserted_only) noexcept;
  // The source a queued message's sender has now (its peer_context is an
  // unexp_buf): srx relabel's and fi_peer(3) foreach_unspec_addr's get_addr.
  static fi_addr_t queued_source(fi_peer_rx_entry* e) noexcept;
  template <class Lock>
  void relabel(bool inserted_only) noexcept;

  // ---- FI_EP_MSG (ep_msg.cpp) ----
  template <class Lock>
  bool on_cm_resp(conn& c) noexcept;
  template <class Lock>
  void msg_lost(conn& c, int err, bool graceful) noexcept;
  void cm_error(int err, const void* data, size_t len) noexcept;
  // The same-host stream of a MSG connection (ep_msg.cpp): whether this end
  // may use one; the active side's cm_req (with an offer when it may); the
  // passive side's attach at fi_accept; the wake-up words.
  bool stream_allowed(const conn& c) const noexcept;
  void send_cm_req(conn& c) noexcept;
  bool attach_stream(conn& c) noexcept;
  // A bound CQ or counter may have a sleeper: the peer must then send wake
  // bytes (local_stream::want_wakes), as shm's endpoints ask of theirs.
  void watch_sleepers(conn& c) noexcept;
  // One call's work on a local connection: wakes, its socket (`drain`, or
  // while a thread may sleep), writes, reads (progress.cpp).
  template <class Lock>
  bool progress_local(conn& c, bool drain) noexcept;
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
  size_t rx_size_;             // the own engine's receive depth
  size_t heap_responses_ = 0;  // responses allocated beyond the pool
  // Matching: the endpoint's own engine (srx_, asked through face_), or,
  // bound to a shared receive context (shared_: the application's, or a
  // peer provider owner's, fi_peer(3)), that context's face with srx_ null.
  // rx_ is the one dispatch between the two.
  std::unique_ptr<util::srx> srx_;
  fid_peer_srx* face_ = nullptr;
  util::srx_binding shared_;
  util::srx_port rx_;
  util::mutex_lock lock_;
  util::mutex_lock aux_;
  // Under aux_: completions waiting for CQ room (linked through their
  // peer_context, the one field of an entry that is ours: an owner's entries
  // keep their list links, fi_peer(3)), the
  // free small unexpected buffers, and the bytes unexpected messages hold.
  fi_peer_rx_entry* deferred_head_ = nullptr;
  fi_peer_rx_entry* deferred_tail_ = nullptr;
  unexp_buf* unexp_free_ = nullptr;
  unexp_buf* queued_ = nullptr;  // shared context: messages queued at its owner
  // start_* / discard_* under way for messages we queued (a thread posting
  // to the context runs them): a closing endpoint waits for them to leave.
  std::atomic<int> in_start_{0};
  // A start_* / discard_* takes its message off our list (under the list's
  // lock, before anything releases its entry) and counts itself in.
  template <class Lock>
  void begin_start(unexp_buf* b) noexcept;
  // Takes b off the list of queued messages if it is on it (the list's
  // lock, aux_guard, held).
  void unlink_queued(unexp_buf* b) noexcept {
    if (!b->queued) return;
    if (b->q_prev)
      b->q_prev->q_next = b->q_next;
    else
      queued_ = b->q_next;
    if (b->q_next) b->q_next->q_prev = b->q_prev;
    b->q_prev = b->q_next = nullptr;
    b->queued = nullptr;
  }
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
  // Stream calls that found the peer not moving before progress yields the
  // core (conn::stream_waits): a few microseconds of spinning, longer than a
  // peer running on the other core takes to free or fill 4 KiB.
  static constexpr uint32_t stream_yield_after = 64;
  uint32_t direct_polls_ = 0;
  bool wakes_on_ = false;  // the local stream's peer is asked for wake bytes
  // Scalable endpoints (sep.cpp): a context's hold on its endpoint; the
  // receive context index a receive context answers hellos for; whether
  // our connections are one-way (a transmit context's); receive-context
  // connections by destination (conn_for_rx_ctx); whether a scalable
  // endpoint drives us (a receive context with no CQ or counter).
  std::unique_ptr<util::sep_slot> sep_slot_;
  uint8_t rx_index_ = 0;
  bool one_way_ = false;
  bool adopted_ = false;
  std::unordered_map<fi_addr_t, conn*> rx_peers_;
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
// fi_scalable_ep on a tcp domain (sep.cpp): FI_EP_RDM only.
int open_sep(util::domain& dom, fi_info* info, fid_ep** out, void* context);
// The most contexts of each kind a scalable endpoint has (max_ep_tx_ctx,
// max_ep_rx_ctx): a receive context's index travels in a hello's byte, and
// each takes a port of its endpoint's block.
inline constexpr size_t max_contexts = 64;
extern const fi_ops_cm ep_cm_ops;
// The next piece of an RMA frame's payload (rma.cpp).
void rma_next_target(conn& c) noexcept;

}  // namespace weft::tcp
