// SPDX-License-Identifier: MIT
// weft — the tcp data path, the posting side: the fi_ops_msg / fi_ops_tagged
// tables, sends (one frame each: header and payload in one sendmsg when the
// socket takes them), and the completions of sends and receives, held back
// in order while the CQ is full. The receiving side is recv.cpp.
#include "util/fence.hpp"
#include "util/trigger.hpp"
#include "util/iov.hpp"
#include "util/msg_ops.hpp"
#include "core/log.hpp"
#include "prov/tcp/tcp.hpp"
#include "util/wait.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace weft::tcp {

namespace {

constexpr uint64_t rx_report = FI_MSG | FI_TAGGED | FI_RECV | FI_MULTI_RECV | FI_REMOTE_CQ_DATA;


// The fi_ops_msg and fi_ops_tagged slots of one (lock policy, endpoint
// type): util's (msg_ops.hpp), funnelled into endpoint::send<Lock, Rdm> /
// post_msg / post_tag, with tcp's fence (endpoint::fence).
template <class Lock, bool Rdm>
using data_ops = util::msg_ops<endpoint, Lock, std::bool_constant<Rdm>>;

// An endpoint bound to a shared receive context: its receives are the
// context's to post (util/srx_port.hpp).
template <class Lock, bool Rdm>
using shared_rx_ops = util::shared_rx_tables<data_ops<Lock, Rdm>::msg_table,
                                             data_ops<Lock, Rdm>::tagged_table, provider>;

constexpr fi_ops_tagged tagged_badstate_table = {
    .size = sizeof(fi_ops_tagged),
    WEFT_FAIL(opbadstate, fi_ops_tagged, recv),    WEFT_FAIL(opbadstate, fi_ops_tagged, recvv),
    WEFT_FAIL(opbadstate, fi_ops_tagged, recvmsg), WEFT_FAIL(opbadstate, fi_ops_tagged, send),
    WEFT_FAIL(opbadstate, fi_ops_tagged, sendv),   WEFT_FAIL(opbadstate, fi_ops_tagged, sendmsg),
    WEFT_FAIL(opbadstate, fi_ops_tagged, inject),  WEFT_FAIL(opbadstate, fi_ops_tagged, senddata),
    WEFT_FAIL(opbadstate, fi_ops_tagged, injectdata),
};

template <class Lock>
constexpr fi_ops_srx_peer peer_ops = {
    .size = sizeof(fi_ops_srx_peer),
    .start_msg = endpoint::start<Lock>,
    .start_tag = endpoint::start<Lock>,
    .discard_msg = endpoint::discard<Lock>,
    .discard_tag = endpoint::discard<Lock>,
};

}  // namespace

template <class Lock, bool Rdm>
const fi_ops_msg* endpoint::msg_table(bool shared_rx) noexcept {
  return shared_rx ? &shared_rx_ops<Lock, Rdm>::msg : &data_ops<Lock, Rdm>::msg_table;
}
template <class Lock, bool Rdm>
const fi_ops_tagged* endpoint::tagged_table(bool shared_rx) noexcept {
  return shared_rx ? &shared_rx_ops<Lock, Rdm>::tagged : &data_ops<Lock, Rdm>::tagged_table;
}
const fi_ops_tagged* endpoint::tagged_badstate() noexcept { return &tagged_badstate_table; }
const fi_ops_srx_peer* endpoint::peer_table(bool locked) noexcept {
  return locked ? &peer_ops<util::mutex_lock> : &peer_ops<util::null_lock>;
}

// ---- sends ----

template <class Lock, bool Rdm>
ssize_t endpoint::send(const iovec* iov, size_t count, fi_addr_t dest, void* context,
                       uint64_t flags, uint64_t tag, uint64_t data) noexcept {
  if (util::iov_refused(&provider(), "send", iov, count, max_iov))
    return to_fi(errc::inval);
  size_t len = util::iov_total(iov, count);
  if (len > max_msg_ || ((flags & FI_INJECT) && len > inject_size)) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "send of %zu bytes exceeds %s %zu", len,
              len > max_msg_ ? "max_msg_size" : "inject_size",
              len > max_msg_ ? max_msg_ : inject_size);
    return to_fi(errc::msgsize);
  }
  util::cq* cq = bound_.tx_cq.get();
  bool completion = cq && !(flags & no_completion) &&
                    (!bound_.tx_selective || (flags & FI_COMPLETION));
  [[maybe_unused]] auto g = guard<Lock>();
  conn* c;
  if constexpr (Rdm) {
    int err = 0;
    c = conn_to<Lock>(dest, &err);
    if (!c) return err;
  } else {
    c = msg_conn_;
    if (!c || c->state != conn_state::connected || shutdown_)
      return to_fi(shutdown_ ? errc::notconn : errc::opbadstate);
  }
  if (completion && !cq->has_room<Lock>()) return to_fi(errc::again);
  tx_entry* t = txp_.take();
  if (!t) return to_fi(errc::again);
  bool tagged = flags & FI_TAGGED, with_data = flags & FI_REMOTE_CQ_DATA;
  proto::op op = tagged ? (with_data ? proto::op::tagged_data : proto::op::tagged)
                        : (with_data ? proto::op::msg_data : proto::op::msg);
  // Transmit and delivery complete: the send completes when the target says
  // the message was processed (proto.hpp: flag_ack). Writing to the socket
  // only makes it inject complete.
  const bool acked = !(flags & no_completion) &&
                     (flags & (FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE));
  t->kind = acked ? tx_entry::request : tx_entry::send;
  t->heap = false;
  t->msg_id = acked ? c->next_id++ : 0;
  t->dst_count = 0;
  t->dst_len = 0;
  size_t hl = build_msg_header(t->hdr, op, acked ? proto::flag_ack : 0,
                               static_cast<uint32_t>(len), t->msg_id, tag, data);
  t->context = context;
  t->cq_flags = FI_SEND | (tagged ? FI_TAGGED : FI_MSG);
  t->complete = completion;
  t->report = !(flags & no_completion);
  t->quiet = flags & util::op_quiet;
  t->iov[0] = {t->hdr, hl};
  std::copy_n(iov, count, t->iov + 1);
  t->count = static_cast<uint8_t>(1 + count);
  t->first = 0;
  t->left = hl + len;
  const bool idle = c->state == conn_state::connected && c->tx_idle();
  c->push(t);
  const bool now =
      write_now(*c, idle, flags & FI_MORE, true, len, static_cast<uint32_t>(hl + len));
  if (now) {
    flush<Lock>(*c);
    if (c->state == conn_state::closed || c->tx_empty()) return 0;
  }
  if ((flags & FI_INJECT) && !c->tx_empty()) {
    // Still queued (this entry is the tail): keep what is left of the
    // payload in the entry, so the caller may reuse its buffer.
    size_t off = 0;
    unsigned first = std::max<unsigned>(t->first, 1);
    for (unsigned i = first; i < t->count; ++i) {
      // An empty iovec may have a null base (a 0-byte inject from NULL):
      // memcpy must not see it, even for 0 bytes.
      if (!t->iov[i].iov_len) continue;
      std::memcpy(t->inject + off, t->iov[i].iov_base, t->iov[i].iov_len);
      off += t->iov[i].iov_len;
    }
    t->iov[1] = {t->inject, off};
    t->count = 2;
    if (t->first > 1) t->first = 1;
  }
  return 0;
}

template <class Lock>
ssize_t endpoint::post_msg(const iovec* iov, void** desc, size_t count, fi_addr_t src,
                           void* context, uint64_t flags) noexcept {
  if (shutdown_) return to_fi(errc::notconn);
  return srx_->post_msg<Lock>(iov, desc, count, src, context, flags);
}

template <class Lock>
ssize_t endpoint::post_tag(const iovec* iov, void** desc, size_t count, fi_addr_t src,
                           uint64_t tag, uint64_t ignore, void* context, uint64_t flags) noexcept {
  if (shutdown_ && !(flags & (FI_PEEK | FI_CLAIM))) return to_fi(errc::notconn);
  return srx_->post_tag<Lock>(iov, desc, count, src, tag, ignore, context, flags);
}

template <class Lock>
void endpoint::flush(conn& c) noexcept {
  tx_entry* done = nullptr;
  int err = 0;
  conn::io st = c.flush(c.state == conn_state::connected, &done, &err);
  while (done) {
    tx_entry* next = done->next;
    switch (done->kind) {
      case tx_entry::send: complete_tx<Lock>(done); break;
      case tx_entry::request: c.await(done); break;  // complete when answered
      case tx_entry::response: put_tx(done); break;
    }
    done = next;
  }
  if (st == conn::io::error) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "tcp peer %s: write failed: %s",
              describe(c.peer).c_str(), std::strerror(err));
    if (type_ == FI_EP_MSG)
      msg_lost<Lock>(c, FI_ECONNRESET, false);
    else
      fail_conn<Lock>(c, static_cast<int>(errc_of_errno(err)));
    return;
  }
  if (!c.ctrl_pending()) {
    if (c.state == conn_state::closing) {
      retire(c);
      return;
    }
    if (c.event_pending) {
      c.event_pending = false;
      cm_event(FI_CONNECTED, nullptr, 0);
    }
  }
  // A local connection's socket is always writable: its stream is retried
  // on every progress call instead (progress_local).
  want_out(c, (st == conn::io::blocked && !c.local()) || c.state == conn_state::connecting);
}

bool endpoint::write_now(conn& c, bool idle, bool more, bool guess, size_t len,
                         uint32_t frame_len) noexcept {
  // FI_MORE (fi_msg(3), fi_rma(3), fi_atomic(3)): the application says more
  // requests follow at once; under manual progress this one waits for them,
  // and the first request without the flag takes the whole batch out (as
  // does a cap, or the next progress call).
  bool now = false;
  if (idle) {
    // A send since the last progress call already went out on its own: this
    // one and those that follow wait for the next progress call (or the
    // caps) and leave together. Otherwise it leaves in this call, straight
    // from the application's buffers.
    // Only under manual progress: under automatic progress no progress call
    // of the application's would come back for a held frame.
    if (cork_ok_ && (more || (guess && c.sent_epoch == epoch_ && len <= cork_max_len)) &&
        cork(c)) {
      c.cork_frames = 1;
      c.cork_bytes = frame_len;
      c.cork_more = more;
      return false;
    }
    c.sent_epoch = epoch_;
    now = true;
  } else if (c.cork_frames) {
    // Behind gathered frames: a large one takes them all out now, and so
    // does reaching a cap (bounded batches, bounded iovec gathering), and
    // the first request without FI_MORE after one with it.
    ++c.cork_frames;
    c.cork_bytes += frame_len;
    now = len > cork_max_len || c.cork_frames >= cork_max_frames ||
          c.cork_bytes >= cork_max_bytes || (c.cork_more && !more);
    c.cork_more |= more;
  }
  if (now) {
    c.cork_frames = 0;
    c.cork_bytes = 0;
    c.cork_more = false;
  }
  return now;
}

bool endpoint::cork(conn& c) noexcept {
  if (c.corked) return true;
  if (corked_.size() == corked_.capacity()) return false;  // no allocation here
  corked_.push_back(&c);
  c.corked = true;
  return true;
}

template <class Lock>
void endpoint::uncork_all() noexcept {
  // A failing write closes its connection (retire) but frees nothing before
  // the sweep, so every pointer in the list stays valid through the loop.
  for (conn* c : corked_) {
    c->corked = false;
    if (!c->cork_frames) continue;
    c->cork_frames = 0;
    c->cork_bytes = 0;
    c->cork_more = false;
    if (c->state == conn_state::connected && c->fd() >= 0) flush<Lock>(*c);
  }
  corked_.clear();
}

// ---- completions ----

namespace {

// fi_cntr(3): sends count on the send counter, RMA reads and fetching
// atomics on the read counter, RMA writes and other atomics on the write
// counter.
util::cntr* counter_of(const util::ep_bindings& b, uint64_t cq_flags) noexcept {
  if (!(cq_flags & (FI_RMA | FI_ATOMIC))) return b.send_cntr.get();
  return (cq_flags & FI_READ) ? b.read_cntr.get() : b.write_cntr.get();
}

}  // namespace

template <class Lock>
bool endpoint::complete_tx(tx_entry* t) noexcept {
  if (t->complete) {
    util::cq_entry ce{};
    ce.op_context = t->context;
    ce.flags = t->cq_flags;
    ce.src = FI_ADDR_NOTAVAIL;
    if (tx_deferred_head_ || !bound_.tx_cq->write<Lock>(ce)) {
      // The CQ filled since the send checked: the entry waits for room.
      t->next = nullptr;
      if (tx_deferred_tail_)
        tx_deferred_tail_->next = t;
      else
        tx_deferred_head_ = t;
      tx_deferred_tail_ = t;
      return false;
    }
  }
  if (util::cntr* c = t->quiet ? nullptr : counter_of(bound_, t->cq_flags)) c->inc();
  put_tx(t);
  return true;
}

template <class Lock>
void endpoint::fail_tx(tx_entry* t, int err) noexcept {
  if (t->kind == tx_entry::response) {  // an answer of ours: no one to tell
    put_tx(t);
    return;
  }
  util::cq* cq = bound_.tx_cq.get();
  if (cq && t->report) {
    fi_cq_err_entry e{};
    e.op_context = t->context;
    e.flags = t->cq_flags;
    e.err = err;
    e.prov_errno = err;
    e.src_addr = FI_ADDR_NOTAVAIL;
    if (!cq->write_error<Lock>(e))
      WEFT_WARN(&provider(), FI_LOG_EP_DATA, "transmit CQ full: error %d for %p lost", err,
                t->context);
  }
  if (util::cntr* c = t->quiet ? nullptr : counter_of(bound_, t->cq_flags)) c->inc_err();
  put_tx(t);
}

template <class Lock>
bool endpoint::write_rx(fi_peer_rx_entry* e) noexcept {
  util::cq* cq = bound_.rx_cq.get();
  if (!cq) return true;
  size_t total = util::iov_total(e->iov, e->count);
  size_t len = std::min(e->msg_size, total);
  uint64_t flags = e->flags & rx_report;
  uint64_t data = (flags & FI_REMOTE_CQ_DATA) ? e->cq_data : 0;
  void* buf = e->count ? e->iov[0].iov_base : nullptr;
  if (e->msg_size > total) {
    fi_cq_err_entry err{};
    err.op_context = e->context;
    err.flags = flags;
    err.len = len;
    err.buf = buf;
    err.data = data;
    err.tag = e->tag;
    err.olen = e->msg_size - len;
    err.err = FI_ETRUNC;
    err.prov_errno = FI_ETRUNC;
    err.src_addr = e->addr;
    return cq->write_error<Lock>(err);
  }
  if (bound_.rx_selective && !(e->flags & (FI_COMPLETION | FI_MULTI_RECV))) return true;
  return cq->write<Lock>({e->context, flags, len, buf, data, e->tag, e->addr, 0});
}

template <class Lock>
void endpoint::done_rx(fi_peer_rx_entry* e, bool ok) noexcept {
  if (util::cntr* c = util::counted(bound_.recv_cntr.get(), e->flags)) ok ? c->inc() : c->inc_err();
  rx_.free_entry<Lock>(e);
}

template <class Lock>
bool endpoint::finish_rx(fi_peer_rx_entry* e) noexcept {
  {
    [[maybe_unused]] auto g = aux_guard<Lock>();
    if (deferred_head_) {
      // Completions keep their order: this one queues behind the others.
      e->peer_context = nullptr;
      deferred_tail_->peer_context = e;
      deferred_tail_ = e;
      return false;
    }
  }
  if (!write_rx<Lock>(e)) {
    [[maybe_unused]] auto g = aux_guard<Lock>();
    e->peer_context = nullptr;
    if (deferred_tail_)
      deferred_tail_->peer_context = e;
    else
      deferred_head_ = e;
    deferred_tail_ = e;
    return false;
  }
  done_rx<Lock>(e, e->msg_size <= util::iov_total(e->iov, e->count));
  return true;
}

template <class Lock>
void endpoint::fail_rx(fi_peer_rx_entry* e, int err) noexcept {
  if (util::cq* cq = bound_.rx_cq.get()) {
    fi_cq_err_entry ce{};
    ce.op_context = e->context;
    ce.flags = e->flags & rx_report;
    ce.tag = e->tag;
    ce.err = err;
    ce.prov_errno = err;
    ce.src_addr = e->addr;
    if (!cq->write_error<Lock>(ce))
      WEFT_WARN(&provider(), FI_LOG_EP_DATA, "receive CQ full: error %d for %p lost", err,
                e->context);
  }
  done_rx<Lock>(e, false);
}

template <class Lock>
void endpoint::complete_deferred() noexcept {
  while (tx_entry* t = tx_deferred_head_) {
    util::cq_entry ce{};
    ce.op_context = t->context;
    ce.flags = t->cq_flags;
    ce.src = FI_ADDR_NOTAVAIL;
    if (!bound_.tx_cq->write<Lock>(ce)) break;
    tx_deferred_head_ = t->next;
    if (!tx_deferred_head_) tx_deferred_tail_ = nullptr;
    if (util::cntr* c = t->quiet ? nullptr : counter_of(bound_, t->cq_flags)) c->inc();
    put_tx(t);
  }
  for (;;) {
    fi_peer_rx_entry* e;
    {
      [[maybe_unused]] auto g = aux_guard<Lock>();
      e = deferred_head_;
    }
    if (!e || !write_rx<Lock>(e)) return;
    {
      [[maybe_unused]] auto g = aux_guard<Lock>();
      deferred_head_ = static_cast<fi_peer_rx_entry*>(e->peer_context);
      if (!deferred_head_) deferred_tail_ = nullptr;
    }
    done_rx<Lock>(e, e->msg_size <= util::iov_total(e->iov, e->count));
  }
}

#define WEFT_TCP_INSTANTIATE(L)                                                                \
  template const fi_ops_msg* endpoint::msg_table<L, true>(bool) noexcept;                      \
  template const fi_ops_msg* endpoint::msg_table<L, false>(bool) noexcept;                     \
  template const fi_ops_tagged* endpoint::tagged_table<L, true>(bool) noexcept;                \
  template const fi_ops_tagged* endpoint::tagged_table<L, false>(bool) noexcept;               \
  template void endpoint::flush<L>(conn&) noexcept;                                            \
  template void endpoint::uncork_all<L>() noexcept;                                            \
  template void endpoint::complete_deferred<L>() noexcept;                                     \
  template bool endpoint::finish_rx<L>(fi_peer_rx_entry*) noexcept;                            \
  template void endpoint::fail_rx<L>(fi_peer_rx_entry*, int) noexcept;                         \
  template void endpoint::fail_tx<L>(tx_entry*, int) noexcept;                                 \
  template bool endpoint::complete_tx<L>(tx_entry*) noexcept;

WEFT_TCP_INSTANTIATE(util::null_lock)
WEFT_TCP_INSTANTIATE(util::mutex_lock)

}  // namespace weft::tcp
