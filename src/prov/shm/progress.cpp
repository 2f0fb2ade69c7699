// SPDX-License-Identifier: MIT
// weft — the shm data path, receiving side: manual progress reads the rings
// the doorbells point at and hands each message to the matching engine
// (util::srx, whose peer this endpoint is); the engine's start/discard
// callbacks finish messages that were unexpected.
#include "core/log.hpp"
#include "core/prefetch.hpp"
#include "prov/shm/shm.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

namespace weft::shm {

namespace {

constexpr int drain_budget = 64;  // messages per ring per progress call: fairness

constexpr uint64_t rx_report = FI_MSG | FI_TAGGED | FI_RECV | FI_MULTI_RECV | FI_REMOTE_CQ_DATA;

// Copies a ring message into an iovec list; returns the bytes copied.
// (Empty iovecs are skipped: their base may be null.)
size_t copy_out(const msg_view& v, const iovec* iov, size_t count) noexcept {
  size_t off = 0;
  for (size_t i = 0; i < count && off < v.size; ++i)
    if (iov[i].iov_len) off += v.copy_to(iov[i].iov_base, iov[i].iov_len, off);
  return off;
}

size_t copy_out(const std::byte* src, size_t size, const iovec* iov, size_t count) noexcept {
  size_t off = 0;
  for (size_t i = 0; i < count && off < size; ++i) {
    size_t n = std::min(size - off, iov[i].iov_len);
    if (n) std::memcpy(iov[i].iov_base, src + off, n);
    off += n;
  }
  return off;
}

void set_data(fi_peer_rx_entry* e, const msg_fields& f) noexcept {
  if (f.flags & proto::flag_data) {
    e->cq_data = f.data;
    e->flags |= FI_REMOTE_CQ_DATA;
  }
}

template <class Lock>
struct peer_ops {
  // Every entry handed back was queued by an endpoint, which its record names.
  static endpoint* ep(fi_peer_rx_entry* e) noexcept {
    return static_cast<rec_base*>(e->peer_context)->ep;
  }
  static int start(fi_peer_rx_entry* e) noexcept { return ep(e)->start<Lock>(e); }
  static int discard(fi_peer_rx_entry* e) noexcept { return ep(e)->discard<Lock>(e); }
  static constexpr fi_ops_srx_peer table = {
      .size = sizeof(fi_ops_srx_peer),
      .start_msg = start,
      .start_tag = start,
      .discard_msg = discard,
      .discard_tag = discard,
  };
};

}  // namespace

template <class Lock>
const fi_ops_srx_peer* endpoint::peer_table() noexcept {
  return &peer_ops<Lock>::table;
}

// ---- progress -------------------------------------------------------------------

template <class Lock>
void endpoint::progress() noexcept {
  [[maybe_unused]] auto g = guard<Lock>();
  if (!enabled_) return;
  if (!deferred_rx_.empty()) [[unlikely]] flush_deferred_rx<Lock>();
  if (next_tick_ns_) {  // a bound CQ or counter can sleep, or automatic progress
    // Under automatic progress the application's passes are counted; while
    // it polls, the thread does the ticks (it sleeps on the timer too) and
    // the application's passes read no clock.
    if (auto_ && !in_auto_ && app_polling_) {
      ++app_passes_;
    } else {
      // (The pass that finds the application polling ticks once more: the
      // timer goes to its fast period, which is what notices it stopping.)
      if (auto_ && !in_auto_ && ++app_passes_ >= app_poll_min) app_polling_ = true;
      tick();
    }
    watch_sleepers();  // before the collect: see proto.hpp, "Waking the owner"
  }
  region_.collect_doorbells(pending_);
  // Hot rings first, by their next slot's stamp: an empty one costs a load.
  // The full drain's checks of the claim (a closed ring, another sender's
  // generation) wait for a message or for the ring to cool, at most
  // hot_idle_max calls later: only we reclaim our rings, so a closed one
  // stays closed, not reused, until then. They stay in `pending` (their
  // bits kept) while hot.
  for (uint32_t h = 0; h < hot_count_; ++h) {
    const uint32_t r = hot_[h];
    const inbound* in = in_[r].get();
    if (in && !in->dead && in->cons.empty()) continue;
    bool got = false;
    drain<Lock>(r, got);
    if (got) hot_idle_ = 0;
  }
  pending_.drain_each([&](uint32_t r) __attribute__((always_inline)) {
    bool got = false;
    const bool empty = drain<Lock>(r, got);
    return got ? !heat(r) && empty : empty;
  });
  // Hot rings that delivered nothing for a while go back to doorbells.
  if (hot_count_ && ++hot_idle_ >= hot_idle_max) cool_all();
  if (busy_) service<Lock>(util::now_ns());
  if (--sweep_countdown_ == 0) {
    sweep_countdown_ = sweep_every;
    sweep_senders<Lock>();
  }
}

bool endpoint::heat(uint32_t r) noexcept {
  if (hot_count_ == hot_max || wake_on_) return false;
  // Its bit is clear now (the collect took it); the next doorbell sets it,
  // and then it stays set while the ring is hot.
  hot_[hot_count_++] = r;
  pending_.keep[r / 64] |= uint64_t{1} << (r % 64);
  hot_idle_ = 0;
  return true;
}

void endpoint::cool_all() noexcept {
  // Each ring stays in `pending`: the next collect takes its shared bit
  // (no longer kept), the drain after it may let it go (proto.hpp).
  for (uint32_t h = 0; h < hot_count_; ++h) {
    const uint32_t r = hot_[h];
    pending_.keep[r / 64] &= ~(uint64_t{1} << (r % 64));
  }
  hot_count_ = 0;
}

template <class Lock>
void endpoint::progress_thunk(void* obj) noexcept {
  static_cast<endpoint*>(obj)->progress<Lock>();
}

// A transmit context's hook (chosen at open): it also drives the receive
// contexts that nothing else drives (util::scalable_ep::adopt). Outside our
// lock: they take theirs.
template <class Lock>
void endpoint::tx_ctx_progress_thunk(void* obj) noexcept {
  auto* ep = static_cast<endpoint*>(obj);
  // A transmit context hears only answers to what it sent: senders address
  // receive contexts, and name a transmit context's region only to answer
  // it. While nothing it sent waits for an answer (every transmit entry
  // free: what waits for a reply, an acknowledgement or read data holds
  // one, whether or not a busy list took it) and nothing of its own is
  // left (no busy list, no ring pending, hot ones included: their bits
  // stay in pending_ while hot; no timer to read; it takes no receives, so
  // none is deferred), a pass would find nothing it needs;
  // what else comes (a closing sender's goodbye) waits for the next pass
  // that runs. A message sent through a context then costs about what one
  // through an endpoint does (bench/instructions.sh with COMPARE=contexts).
  bool quiet;
  {
    [[maybe_unused]] auto g = ep->guard<Lock>();
    quiet = (uint64_t{ep->busy_} | (ep->tx_free_count_ ^ ep->tx_count_) | ep->next_tick_ns_ |
             ep->pending_.words) == 0;
  }
  if (!quiet) [[unlikely]] return tx_ctx_pass<Lock>(ep);
  ep->sep_slot_->sep().progress_orphans();
}

template <class Lock>
__attribute__((noinline)) void endpoint::tx_ctx_pass(endpoint* ep) noexcept {
  ep->progress<Lock>();
  ep->sep_slot_->sep().progress_orphans();
}

// The progress thread's call (automatic progress only; the manual path
// above is untouched). A pass leaves rings in `pending` when a ring held
// more than its drain budget, or when what it holds waits for the
// application (the receive CQ full, no receive entry left). Either way
// nothing announces it again, so the thread is woken through our own FIFO
// (as a sender would): at once when the pass moved something, after the
// thread's backoff when it moved nothing, so a blocked endpoint is retried
// every millisecond rather than spun on.
//
// After a pass that moved something, while the application is not polling,
// the thread keeps polling for cfg().auto_spin_ns after the last message
// (spinning_: senders do not wake it meanwhile, so each costs them no system
// call), then stores wake_wanted again and makes one more pass, which
// collects the doorbells after that store (proto.hpp), before it sleeps. A
// target that computes while an initiator issues operations back to back
// so serves each without a wake-up of its thread; an idle one costs
// nothing, because the polling only follows work.
//
// Under the handoff policy (util/handoff.hpp) the whole call is one turn of
// the thread, one barrier: its passes' guards nest inside it. The spin then
// also ends when an application thread waits to enter, which it cannot
// while the thread holds its turn.
template <class Lock>
bool endpoint::auto_work(void* obj) noexcept {
  auto* ep = static_cast<endpoint*>(obj);
  constexpr bool handoff = std::is_same_v<Lock, util::handoff_lock>;
  [[maybe_unused]] auto turn = [ep]() noexcept {
    if constexpr (handoff)
      return util::handoff::guard{ep->domain_->handoff()};
    else
      return 0;
  }();
  auto app_waits = [ep]() noexcept {
    if constexpr (handoff)
      return ep->domain_->handoff().app_waiting();
    else
      return false;
  };
  // One pass of the thread; whether it took messages from our rings.
  auto pass = [ep]() noexcept {
    [[maybe_unused]] auto g = ep->guard<Lock>();
    ep->in_auto_ = true;
    const uint64_t before = ep->consumed();
    ep->progress<Lock>();
    ep->in_auto_ = false;
    return ep->consumed() != before;
  };
  // The FIFO is read here whatever wake_pending says: a sender between its
  // exchange of wake_pending and its write may have had its flag taken by
  // an earlier pass (ours or the application's), and its byte, arriving
  // after that pass read the FIFO, would keep the wait set readable, the
  // thread spinning. Reading first loses nothing: the pass below collects
  // the doorbells after it (proto.hpp, "Waking the owner").
  if (ep->wake_.valid()) ep->wake_.drain();
  bool moved = pass();
  if (moved && cfg().auto_spin_ns && ep->enabled_) {
    uint64_t until = util::now_ns() + cfg().auto_spin_ns;
    {
      [[maybe_unused]] auto g = ep->guard<Lock>();
      ep->spinning_ = !ep->app_polling_;
    }
    while (ep->spinning_) {
      cpu_relax();
      const bool more = pass();
      const uint64_t now = util::now_ns();
      if (more) until = now + cfg().auto_spin_ns;
      [[maybe_unused]] auto g = ep->guard<Lock>();
      if (now >= until || ep->app_polling_ || !ep->enabled_ || app_waits()) ep->spinning_ = false;
    }
    pass();  // wake_wanted stored again, then the doorbells collected
  }
  [[maybe_unused]] auto g = ep->guard<Lock>();
  if (!ep->enabled_ || !ep->pending_.any()) return true;
  if (ep->wake_.valid() && ep->region_.claim_wake()) ep->wake_.signal();
  return moved;
}

uint64_t endpoint::consumed() noexcept {
  uint64_t sum = 0;
  for (const inbound* in : open_in_) sum += in->cons.position();
  return sum;
}

template <class Lock>
void endpoint::sweep_senders() noexcept {
  uint64_t now = util::now_ns();
  if (now - last_sweep_ns_ < sweep_ns) return;
  last_sweep_ns_ = now;
  uint32_t hwm = std::min(region_.claim_hwm(), region_.nrings());
  for (uint32_t r = 0; r < hwm; ++r) {
    inbound* in = in_[r].get();
    if (!in) {
      // Claimed, but nothing ever arrived (or only a closed ring's goodbye,
      // which the doorbell brings anyway).
      if (region_.claim_state(r) != proto::claim_active) continue;
      if (!(in = open_inbound(r))) continue;
    }
    if (in->dead || !in->same_ns || !in->xfers.empty()) continue;
    if (in->live.check_now()) continue;
    WEFT_INFO(&provider(), FI_LOG_EP_DATA, "shm sender pid %u exited: its ring %u is reclaimed",
              in->id.pid, r);
    in->dead = true;
    pending_.set(r);  // what it sent before dying is read first, then the ring is freed
  }
}

// Reads ring r; true when it was found empty (it may leave the pending set).
// `got`: it held a message this time.
template <class Lock>
bool endpoint::drain(uint32_t r, bool& got) noexcept {
  // r < nrings = in_.size(): doorbell words are masked to the region's
  // rings (a multiple of 64), and every other source names a claimed ring.
  inbound* in = in_[r].get();
  if (in && in->generation != region_.claim_generation(r)) {
    close_inbound<Lock>(r);  // its sender left and another claimed the ring
    in = nullptr;
  }
  if (!in) {
    const uint32_t state = region_.claim_state(r);
    if (state != proto::claim_active && state != proto::claim_closed) return true;
    if (!(in = open_inbound(r))) return false;
  }
  util::cq* rcq = bound_.rx_cq.get();
  for (int budget = drain_budget; budget > 0; --budget) {
    msg_view v;
    errc e = in->cons.peek(v);
    // A message may complete a receive: leave it in the ring while the CQ
    // has no room for that.
    if (e == errc::ok && rcq && !rcq->has_room<Lock>()) return false;
    if (e == errc::again) {
      // Closed after its last message (release/acquire): empty now is empty
      // for good. A sender found dead publishes nothing more either.
      if (in->dead)
        close_inbound<Lock>(r, true);
      else if (region_.claim_state(r) == proto::claim_closed && in->cons.empty())
        close_inbound<Lock>(r);
      got = budget != drain_budget;
      return true;
    }
    if (e != errc::ok) {
      WEFT_WARN(&provider(), FI_LOG_EP_DATA, "shm sender pid %u wrote a corrupt message header",
                in->id.pid);
      close_inbound<Lock>(r, true);
      return true;
    }
    if (v.fields.op == proto::op_inline && fast_) [[likely]] {
      // A small message and a receive posted for it, in our own engine (or
      // our owner's, when it is util's: fast_): the per-message path,
      // without handle's dispatch.
      //
      // Its answer, if it gets one, likely goes where our last one went
      // (reply_slot_): that line is asked for now, to arrive while this one
      // is delivered. Only without locked instructions (none, or the
      // handoff's plain stores): measured in a ping-pong, the hint takes
      // 0.185 us to 0.155 under FI_THREAD_DOMAIN, but 0.23 to 0.28 under
      // FI_THREAD_SAFE, wherever it is placed. The lock instructions seem to
      // wait for the line, and the peer's polling takes it back before the
      // answer is written.
      if constexpr (!std::is_same_v<Lock, util::mutex_lock>)
        prefetch_for_write(reply_slot_, prefetchw_);
      const bool tagged = v.fields.flags & proto::flag_tagged;
      const fi_addr_t src = want_source_ ? source_of(*in) : FI_ADDR_NOTAVAIL;
      if (util::srx_entry* p = fast_->take_posted<Lock>(src, v.fields.tag, tagged)) {
        // Freed through rx_ if it ends the general way (deliver_general):
        // an owner's engine finds its entries by their face.
        p->rx.srx = face_;
        deliver_inline<Lock>(*in, v, *p, src, tagged);
        continue;
      }
    }
    if (!handle<Lock>(*in, v)) return false;
  }
  got = true;
  return false;
}

inbound* endpoint::open_inbound(uint32_t r) noexcept {
  proto::claim_entry ce = region_.claim_info(r);
  try {
    auto in = std::make_unique<inbound>();
    in->ring = r;
    in->generation = ce.generation;
    in->cons = region_.consumer(r);
    in->id = addr_entry{static_cast<uint32_t>(ce.sender_pid),
                        static_cast<uint32_t>(ce.sender_pidns), ce.sender_endpoint, 1, 0};
    in->src_id = addr_entry_source(in->id);
    in->same_ns = ce.sender_pidns == self_.pidns;
    if (in->same_ns)
      in->live = peer_liveness(ce.sender_pid, ce.sender_start_time,
                               peer_liveness::default_interval, liveness_mode::proc);
    open_in_.push_back(in.get());
    in_[r] = std::move(in);
    return in_[r].get();
  } catch (...) {
    return nullptr;
  }
}

template <class Lock>
void endpoint::close_inbound(uint32_t r, bool force) noexcept {
  inbound* in = in_[r].get();
  if (!in) return;
  // Unexpected large messages of this sender can no longer be pulled.
  for (cma_rec* rec = in->records; rec; rec = rec->next) rec->in = nullptr;
  while (!in->xfers.empty()) {
    rx_xfer* x = in->xfers.back();
    x->err = FI_ECONNRESET;
    x->done = true;
    finish_xfer<Lock>(x);
  }
  if (in->listed) std::erase(busy_in_, in);
  std::erase(open_in_, in);
  in_[r].reset();
  region_.reclaim_ring(r, force);
}

// The sender as completions (and the receive context) name it: its fi_addr,
// or the user id the AV holds for it (FI_AV_USER_ID).
fi_addr_t endpoint::source_of(inbound& in) noexcept {
  if (!want_source_) return FI_ADDR_NOTAVAIL;
  util::av& av = *bound_.av_;
  if (in.src != FI_ADDR_NOTAVAIL) {
    const uint8_t* e = av.entry(in.src);
    if (e && std::memcmp(e, &in.src_id, sizeof in.src_id) == 0) return av.report(in.src);
  }
  in.src = av.reverse(reinterpret_cast<const uint8_t*>(&in.src_id));
  return av.report(in.src);
}

fi_addr_t endpoint::queued_source(fi_peer_rx_entry* e) noexcept {
  auto* r = static_cast<const rec_base*>(e->peer_context);
  if (!r || !r->ep || !r->ep->want_source_) return FI_ADDR_NOTAVAIL;
  util::av& av = *r->ep->bound_.av_;
  return av.report(av.reverse(reinterpret_cast<const uint8_t*>(&r->from)));
}

template <class Lock>
int endpoint::match(bool tagged, fi_addr_t src, size_t size, uint64_t tag,
                    fi_peer_rx_entry** e) noexcept {
  fi_peer_match_attr a{src, size, tag};
  return rx_.get<Lock>(tagged, a, e);
}

template <class Lock>
int endpoint::queue(fi_peer_rx_entry* e, bool tagged, const addr_entry& from) noexcept {
  auto* r = static_cast<rec_base*>(e->peer_context);
  r->ep = this;
  r->from = from;
  r->queued = e;
  r->q_prev = nullptr;
  r->q_next = queued_;
  if (queued_) queued_->q_prev = r;
  queued_ = r;
  // The owner may start it before this returns (a receive came meanwhile).
  return rx_.queue<Lock>(e, tagged);
}

void endpoint::unqueue(rec_base* r) noexcept {
  if (!r->queued) return;
  if (r->q_prev)
    r->q_prev->q_next = r->q_next;
  else
    queued_ = r->q_next;
  if (r->q_next) r->q_next->q_prev = r->q_prev;
  r->q_prev = r->q_next = nullptr;
  r->queued = nullptr;
}

template <class Lock>
bool endpoint::handle(inbound& in, const msg_view& v) noexcept {
  switch (v.fields.op) {
    case proto::op_inline: {
      bool tagged = v.fields.flags & proto::flag_tagged;
      const fi_addr_t src = source_of(in);
      fi_peer_rx_entry* e = nullptr;
      int rc = match<Lock>(tagged, src, v.size, v.fields.tag, &e);
      if (rc == 0) {
        set_data(e, v.fields);
        size_t n = copy_out(v, e->iov, e->count);
        in.cons.release(v);
        finish_rx<Lock>(e, n, 0);
        return true;
      }
      if (rc != -FI_ENOENT) return false;  // no entry: try again later
      inline_rec* u = inline_rec::make(v.size);
      if (!u) {
        free_entry<Lock>(e);  // withdrawn; the message stays in the ring
        return false;
      }
      v.copy_to(u->data(), v.size);
      set_data(e, v.fields);
      e->peer_context = static_cast<rec_base*>(u);
      in.cons.release(v);
      queue<Lock>(e, tagged, in.src_id);
      return true;
    }
    case proto::op_rts_cma:
    case proto::op_rts_bounce: return handle_rts<Lock>(in, v);
    case proto::op_ack: return handle_ack<Lock>(in, v);
    case proto::op_rma_write: return handle_rma_write<Lock>(in, v);
    case proto::op_rma_read: return handle_rma_read<Lock>(in, v);
    case proto::op_atomic: return handle_atomic<Lock>(in, v);
    case proto::op_resp: return handle_resp<Lock>(in, v);
    case proto::op_read_bounce: return handle_read_bounce<Lock>(in, v);
    default:
      WEFT_WARN(&provider(), FI_LOG_EP_DATA, "shm sender pid %u: unknown message op %u",
                in.id.pid, v.fields.op);
      in.cons.release(v);
      return true;
  }
}

// A small message for a receive taken straight from our own engine: copied,
// its slots released, its completion written, in one pass (the per-message
// path; get_msg / complete_rx / free_entry do the same in general).
template <class Lock>
void endpoint::deliver_inline(inbound& in, const msg_view& v, util::srx_entry& p, fi_addr_t src,
                              bool tagged) noexcept {
  fi_peer_rx_entry* e = &p.rx;
  size_t n = 0;
  if (e->count == 1) [[likely]] {
    if (e->iov[0].iov_len) n = v.copy_to(e->iov[0].iov_base, e->iov[0].iov_len);
  } else {
    n = copy_out(v, e->iov, e->count);
  }
  in.cons.release(v);
  if (n == v.size) [[likely]] {
    util::cq* cq = bound_.rx_cq.get();
    const bool data = v.fields.flags & proto::flag_data;
    // The drain checked the CQ for room before it took the message, but an
    // endpoint sharing the CQ (FI_THREAD_SAFE) may have filled it since: a
    // refused write goes the general way below, which keeps it in order.
    if (!cq || (bound_.rx_selective && !(e->flags & FI_COMPLETION)) ||
        cq->write<Lock>({e->context, (e->flags & rx_report) | (data ? FI_REMOTE_CQ_DATA : 0), n,
                         e->count ? e->iov[0].iov_base : nullptr, data ? v.fields.data : 0,
                         tagged ? v.fields.tag : 0, src, 0})) [[likely]] {
      if (util::cntr* c = util::counted(bound_.recv_cntr.get(), e->flags)) c->inc();
      fast_->recycle<Lock>(&p);
      return;
    }
  }
  deliver_general<Lock>(e, v.fields, v.size, n, src, tagged);
}

// Truncated (an error entry), or refused by a full CQ: the general
// completion, which defers it while the CQ has no room and frees the entry
// once it is written.
template <class Lock>
__attribute__((noinline)) void endpoint::deliver_general(fi_peer_rx_entry* e,
                                                         const msg_fields& f, size_t size,
                                                         size_t n, fi_addr_t src,
                                                         bool tagged) noexcept {
  e->addr = src;
  e->msg_size = size;
  e->tag = tagged ? f.tag : 0;
  set_data(e, f);
  finish_rx<Lock>(e, n, 0);
}

template <class Lock>
bool endpoint::handle_rts(inbound& in, const msg_view& v) noexcept {
  const bool cma = v.fields.op == proto::op_rts_cma;
  proto::rts_payload p{};
  proto::rts_iov iov[max_iov]{};
  bool ok = v.size >= sizeof p;
  if (ok) {
    v.copy_to(&p, sizeof p);
    ok = cma ? (p.count <= max_iov && v.size == sizeof p + p.count * sizeof(proto::rts_iov))
             : (p.count == 0 && v.size == sizeof p);
  }
  if (ok && cma) {
    v.copy_to(iov, p.count * sizeof(proto::rts_iov), sizeof p);
    uint64_t sum = 0;
    for (uint32_t i = 0; i < p.count && ok; ++i) {
      ok = iov[i].len <= max_msg - sum;
      sum += iov[i].len;
    }
    ok = ok && sum == p.total;
  }
  if (!ok || p.total > max_msg) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "shm sender pid %u: malformed large-message header",
              in.id.pid);
    in.cons.release(v);
    return true;
  }
  bool tagged = v.fields.flags & proto::flag_tagged;
  fi_peer_rx_entry* e = nullptr;
  int rc = match<Lock>(tagged, source_of(in), p.total, v.fields.tag, &e);
  if (rc != 0 && rc != -FI_ENOENT) return false;
  const bool unexpected = rc == -FI_ENOENT;
  set_data(e, v.fields);
  if (cma) {
    cma_rec local;
    cma_rec* r = unexpected ? new (std::nothrow) cma_rec : &local;
    if (!r) {
      free_entry<Lock>(e);
      return false;
    }
    r->kind = rec_kind::cma;
    r->in = &in;
    r->id = in.id;
    r->pid = static_cast<pid_t>(in.id.pid);
    r->token = p.token;
    r->total = p.total;
    r->count = p.count;
    std::copy_n(iov, p.count, r->iov);
    in.cons.release(v);
    if (!unexpected) {
      pull<Lock>(e, *r);
      return true;
    }
    // Only the header waits: the data is pulled when a receive matches it.
    r->next = in.records;
    if (in.records) in.records->prev = r;
    in.records = r;
    e->peer_context = static_cast<rec_base*>(r);
    queue<Lock>(e, tagged, in.src_id);
    return true;
  }
  rx_xfer* x = new (std::nothrow) rx_xfer;
  if (x) {
    try {
      in.xfers.reserve(in.xfers.size() + 1);
    } catch (...) {
      delete x;
      x = nullptr;
    }
  }
  if (!x) {
    free_entry<Lock>(e);
    return false;
  }
  x->kind = rec_kind::bounce;
  x->in = &in;
  x->token = p.token;
  x->total = p.total;
  x->entry = e;
  x->matched = !unexpected;
  if (unexpected && p.total) {
    // The sender can only finish when we drain its segments: stage the data.
    x->staging = static_cast<std::byte*>(std::malloc(p.total));
    if (!x->staging) {
      WEFT_WARN(&provider(), FI_LOG_EP_DATA, "no memory to stage an unexpected %llu-byte message",
                static_cast<unsigned long long>(p.total));
      x->err = FI_ENOMEM;  // drained and dropped; its receive gets the error
    }
  }
  in.cons.release(v);
  in.xfers.push_back(x);
  watch(in);
  if (unexpected) {
    e->peer_context = static_cast<rec_base*>(x);
    queue<Lock>(e, tagged, in.src_id);
  }
  if (!p.total) {
    x->done = true;
    finish_xfer<Lock>(x);
  } else {
    poll_bounce<Lock>(in);
  }
  return true;
}

template <class Lock>
bool endpoint::handle_ack(inbound& in, const msg_view& v) noexcept {
  util::cq* tcq = bound_.tx_cq.get();
  if (tcq && !tcq->has_room<Lock>()) return false;
  uint64_t token = v.fields.tag, status = v.fields.data;
  in.cons.release(v);
  tx_entry* t = tx_of(token);
  if (!t || !t->c || !(t->c->id == in.id) || t->kind == tx_entry::internal ||
      (t->state != tx_entry::wait_ack && t->kind != tx_entry::write)) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "shm: stray acknowledgement from pid %u", in.id.pid);
    return true;
  }
  conn& c = *t->c;
  c.watch_ns = util::now_ns();
  if (t->state != tx_entry::wait_ack) {
    // A streamed write answered before we saw its last segment drained:
    // pump_bounce completes it then.
    t->acked = true;
    t->ack_status = status == proto::ack_done ? 0 : status < 4096 ? status : FI_EIO;
    return true;
  }
  if (status == proto::ack_done) {
    complete_tx<Lock>(t, 0);
  } else if (status == proto::ack_use_bounce &&
             (t->kind == tx_entry::send || t->kind == tx_entry::write)) {
    if (!c.cma_refused)
      WEFT_INFO(&provider(), FI_LOG_EP_DATA, "shm peer %s cannot read our memory: bounce buffers",
                c.reg.name().c_str());
    c.cma_refused = true;
    t->state = tx_entry::streaming;
    enqueue_bounce(c, t);
    pump_bounce<Lock>(c);
  } else {
    // A positive FI_E* code; anything else from a peer is an I/O error.
    complete_tx<Lock>(t, status < 4096 ? static_cast<int>(status) : FI_EIO);
  }
  return true;
}

template <class Lock>
bool endpoint::complete_rx(fi_peer_rx_entry* e, size_t len, int err) noexcept {
  util::cq* cq = bound_.rx_cq.get();
  uint64_t flags = e->flags & rx_report;
  void* buf = e->count ? e->iov[0].iov_base : nullptr;
  uint64_t data = (flags & FI_REMOTE_CQ_DATA) ? e->cq_data : 0;
  uint64_t tag = (flags & FI_TAGGED) ? e->tag : 0;
  if (!err && e->msg_size > len) err = FI_ETRUNC;
  if (err) {
    if (cq) {
      fi_cq_err_entry ee{};
      ee.op_context = e->context;
      ee.flags = flags;
      ee.len = len;
      ee.buf = buf;
      ee.data = data;
      ee.tag = tag;
      ee.olen = e->msg_size > len ? e->msg_size - len : 0;
      ee.err = err;
      ee.prov_errno = err;
      ee.src_addr = e->addr;
      if (!cq->write_error<Lock>(ee)) return false;
    }
    if (util::cntr* n = util::counted(bound_.recv_cntr.get(), e->flags)) n->inc_err();
    return true;
  }
  if (cq && (!bound_.rx_selective || (e->flags & (FI_COMPLETION | FI_MULTI_RECV))))
    if (!cq->write<Lock>({e->context, flags, len, buf, data, tag, e->addr, 0})) return false;
  if (util::cntr* n = util::counted(bound_.recv_cntr.get(), e->flags)) n->inc();
  return true;
}

template <class Lock>
void endpoint::finish_rx(fi_peer_rx_entry* e, size_t len, int err) noexcept {
  // Behind completions already waiting, to keep their order.
  if (deferred_rx_.empty() && complete_rx<Lock>(e, len, err)) [[likely]] {
    free_entry<Lock>(e);
    return;
  }
  try {
    deferred_rx_.push_back({e, len, err});
    return;
  } catch (...) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "receive CQ full and no memory: completion of %p lost",
              e->context);
  }
  free_entry<Lock>(e);
}

template <class Lock>
void endpoint::flush_deferred_rx() noexcept {
  while (!deferred_rx_.empty()) {
    const deferred_rx d = deferred_rx_.front();
    if (!complete_rx<Lock>(d.e, d.len, d.err)) return;
    deferred_rx_.pop_front();
    free_entry<Lock>(d.e);
  }
}

// ---- the engine's callbacks ---------------------------------------------------------

template <class Lock>
int endpoint::start(fi_peer_rx_entry* e) noexcept {
  [[maybe_unused]] auto g = guard<Lock>();
  auto* rec = static_cast<rec_base*>(e->peer_context);
  e->peer_context = nullptr;
  unqueue(rec);
  switch (rec->kind) {
    case rec_kind::inline_data: {
      auto* u = static_cast<inline_rec*>(rec);
      size_t n = copy_out(u->data(), u->size, e->iov, e->count);
      inline_rec::destroy(u);
      finish_rx<Lock>(e, n, 0);
      return 0;
    }
    case rec_kind::cma: {
      auto* r = static_cast<cma_rec*>(rec);
      if (r->in) {
        if (r->prev) r->prev->next = r->next;
        else r->in->records = r->next;
        if (r->next) r->next->prev = r->prev;
      }
      pull<Lock>(e, *r);
      delete r;
      return 0;
    }
    case rec_kind::bounce: {
      auto* x = static_cast<rx_xfer*>(rec);
      x->entry = e;
      x->matched = true;
      if (x->done) finish_xfer<Lock>(x);  // else the last chunk finishes it
      return 0;
    }
  }
  return 0;
}

template <class Lock>
int endpoint::discard(fi_peer_rx_entry* e) noexcept {
  [[maybe_unused]] auto g = guard<Lock>();
  auto* rec = static_cast<rec_base*>(e->peer_context);
  e->peer_context = nullptr;
  unqueue(rec);
  drop_record<Lock>(rec);
  free_entry<Lock>(e);
  return 0;
}

// What a message queued here held goes, its entry aside (discard, and a
// withdrawal at close).
template <class Lock>
void endpoint::drop_record(rec_base* rec) noexcept {
  switch (rec->kind) {
    case rec_kind::inline_data: inline_rec::destroy(static_cast<inline_rec*>(rec)); break;
    case rec_kind::cma: {
      auto* r = static_cast<cma_rec*>(rec);
      if (r->in) {
        if (r->prev) r->prev->next = r->next;
        else r->in->records = r->next;
        if (r->next) r->next->prev = r->prev;
        // Delivered, and dropped by the receiver's choice: the send is done.
        errc ignored;
        send_ack<Lock>(conn_to(r->id, ignored), r->token, proto::ack_done);
      }
      delete r;
      break;
    }
    case rec_kind::bounce: {
      auto* x = static_cast<rx_xfer*>(rec);
      x->entry = nullptr;
      x->discarded = true;
      if (x->done) delete x;  // else the last chunk drops it
      break;
    }
  }
}

template <class Lock>
void endpoint::retire_receives() noexcept {
  if (util::srx* shared = shared_.engine()) {
    // Messages queued at a context whose engine is util's (the
    // application's, or lnx's, which may itself be an application's shared
    // context) are withdrawn: no receive of the context will take them. One
    // a receive took meanwhile (another thread posting to the context) is
    // being given to our start / discard, which take our lock and unlist
    // it: let go of the lock and wait for that. (free_entry cannot tell the
    // two apart, and would release an entry start is being given.) The
    // context's engine locks here whatever the policy: a control path.
    util::srx& engine = *shared;
    for (;;) {
      {
        [[maybe_unused]] auto g = guard<Lock>();
        rec_base* rec = queued_;
        if (!rec) break;
        if (engine.withdraw<util::mutex_lock>(rec->queued)) {
          unqueue(rec);
          drop_record<Lock>(rec);
          continue;
        }
      }
      std::this_thread::yield();
    }
  }
  [[maybe_unused]] auto g = guard<Lock>();
  // Under a peer SRX, withdrawn through the owner's free_entry (discard ends
  // with it).
  while (queued_) discard<Lock>(queued_->queued);
  for (auto& in : in_) {
    if (!in) continue;
    for (rx_xfer* x : in->xfers) {
      if (x->rma != rx_xfer::none || !x->matched || !x->entry) continue;
      finish_rx<Lock>(x->entry, 0, FI_ECANCELED);
      x->entry = nullptr;
      x->discarded = true;  // the destructor drops it with its ring
    }
  }
  // Finished receives still waiting for CQ room: what room there is takes
  // them; the others' entries go back to the context without a completion
  // (the endpoint, and its CQ binding, end here).
  flush_deferred_rx<Lock>();
  if (!deferred_rx_.empty())
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL,
              "fi_close: %zu receive completions dropped, the CQ being full",
              deferred_rx_.size());
  for (const deferred_rx& d : deferred_rx_) free_entry<Lock>(d.e);
  deferred_rx_.clear();
}

#define WEFT_SHM_INSTANTIATE(L)                                                         \
  template const fi_ops_srx_peer* endpoint::peer_table<L>() noexcept;                   \
  template void endpoint::progress_thunk<L>(void*) noexcept;                            \
  template void endpoint::tx_ctx_progress_thunk<L>(void*) noexcept;                     \
  template void endpoint::tx_ctx_pass<L>(endpoint*) noexcept;                           \
  template void endpoint::deliver_general<L>(fi_peer_rx_entry*, const msg_fields&, size_t,      \
                                             size_t, fi_addr_t, bool) noexcept;               \
  template bool endpoint::auto_work<L>(void*) noexcept;                                 \
  template bool endpoint::complete_rx<L>(fi_peer_rx_entry*, size_t, int) noexcept;      \
  template void endpoint::finish_rx<L>(fi_peer_rx_entry*, size_t, int) noexcept;        \
  template int endpoint::start<L>(fi_peer_rx_entry*) noexcept;                          \
  template int endpoint::discard<L>(fi_peer_rx_entry*) noexcept;                       \
  template void endpoint::retire_receives<L>() noexcept;

WEFT_SHM_INSTANTIATE(util::null_lock)
WEFT_SHM_INSTANTIATE(util::mutex_lock)
WEFT_SHM_INSTANTIATE(util::handoff_lock)

}  // namespace weft::shm
