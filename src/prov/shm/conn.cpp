// SPDX-License-Identifier: MIT
// weft — the shm endpoint's peers: attaching to a peer's region and claiming
// a ring there on first contact, the table of large sends in flight, and what
// happens when a peer stops answering.
#include "core/log.hpp"
#include "prov/shm/shm.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

namespace weft::shm {

inline_rec* inline_rec::make(uint32_t size) noexcept {
  void* p = std::malloc(sizeof(inline_rec) + size);
  if (!p) return nullptr;
  auto* r = new (p) inline_rec;
  r->kind = rec_kind::inline_data;
  r->size = size;
  return r;
}

void inline_rec::destroy(inline_rec* r) noexcept { std::free(r); }

conn* endpoint::conn_for(fi_addr_t dest, errc& err) noexcept {
  if (conn* c = conn_hit(dest)) return c;
  if (bound_.av_->rx_index(dest)) return conn_for_rx_ctx(dest, err);
  const uint8_t* raw = bound_.av_->entry(dest);
  if (!raw) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "send to fi_addr %llu: not in the address vector",
              static_cast<unsigned long long>(dest));
    err = errc::inval;
    return nullptr;
  }
  addr_entry id;
  std::memcpy(&id, raw, sizeof id);
  conn* c = conn_to(id, err);
  if (!c) return nullptr;
  try {
    if (dest >= by_addr_.size()) by_addr_.resize(dest + 1, nullptr);
    by_addr_[dest] = c;
  } catch (...) {
    // Not cached: the next send looks it up again.
  }
  return c;
}

conn* endpoint::conn_for_rx_ctx(fi_addr_t dest, errc& err) noexcept {
  const util::av& av = *bound_.av_;
  const uint64_t i = av.rx_index(dest);
  const fi_addr_t base = av.strip_rx(dest);
  const uint8_t* raw = av.entry(base);
  if (!raw) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "send to fi_addr %#llx: %llu is not in the address vector",
              static_cast<unsigned long long>(dest), static_cast<unsigned long long>(base));
    err = errc::inval;
    return nullptr;
  }
  addr_entry id;
  std::memcpy(&id, raw, sizeof id);
  const addr_entry base_id = id;
  if (i >= max_contexts || id.index >= plain_index_limit) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA,
              "send to fi_addr %#llx: receive context %llu%s (shm offers %u per endpoint)",
              static_cast<unsigned long long>(dest), static_cast<unsigned long long>(i),
              i >= max_contexts ? " is out of range" : " of an address that is a context itself",
              max_contexts);
    err = errc::inval;
    return nullptr;
  }
  id.index = rx_ctx_index(id.index, static_cast<uint32_t>(i));
  // A context sends to a few receive contexts over and over: conn_to's hash
  // lookup on every send held two threads sending through contexts to 0.81
  // of the rate of two through endpoints (bench/ctx_rate.py). The next
  // send to `dest` finds it in rx_hit, checked against the AV's entry as
  // conn_hit's are; conns live as long as the endpoint.
  conn* c = conn_to(id, err);  // by identity: conn_index_ holds every peer we reached
  if (c) by_rx_addr_[rx_slot_of(dest)] = rx_slot{dest, c, base_id};
  return c;
}

conn* endpoint::conn_to(const addr_entry& id, errc& err) noexcept {
  if (auto it = conn_index_.find(id); it != conn_index_.end()) return it->second;
  auto* prov = &provider();
  try {
    auto c = std::make_unique<conn>();
    c->id = id;
    std::string name = region_name_of(id);
    errc e = region::attach(cfg().dir, name, c->reg, prov);
    if (e != errc::ok) {
      // No region under that name: no endpoint there (any more).
      err = e == errc::noent ? errc::connrefused : e;
      if (e == errc::noent)
        WEFT_WARN(prov, FI_LOG_EP_DATA, "shm peer %s does not exist", name.c_str());
      return nullptr;
    }
    if (e = c->reg.claim(me_, c->ring); e != errc::ok) {
      err = e == errc::busy ? errc::again : e;
      return nullptr;
    }
    c->prod = c->reg.producer(c->ring);
    c->same_ns = c->reg.header().owner_pidns == self_.pidns;
    if (c->same_ns)
      c->live = peer_liveness(c->reg.owner_pid(), c->reg.owner_start_time(),
                              peer_liveness::default_interval, liveness_mode::proc);
    conns_.reserve(conns_.size() + 1);
    conn* raw = c.get();
    conn_index_.emplace(id, raw);
    conns_.push_back(std::move(c));
    return raw;
  } catch (...) {
    err = errc::nomem;
    return nullptr;
  }
}

bool endpoint::peer_dead(conn& c) noexcept {
  if (c.dead) return true;
  uint32_t state = std::atomic_ref<uint32_t>(const_cast<uint32_t&>(c.reg.header().state))
                       .load(std::memory_order_acquire);
  bool gone = state != proto::region_ready || (c.same_ns && !c.live.check_now());
  if (gone) {
    c.dead = true;
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "shm peer %s is gone (%s)",
              c.reg.name().c_str(),
              state != proto::region_ready ? "its endpoint closed" : "its process exited");
  }
  return gone;
}

void endpoint::watch(conn& c) noexcept {
  c.watch_ns = util::now_ns();
  if (c.listed) return;
  try {
    busy_conns_.push_back(&c);
    c.listed = true;
    busy_ = true;
  } catch (...) {
    // Unlisted, it is only looked at by the next send or ack: no stall check.
  }
}

void endpoint::watch(inbound& in) noexcept {
  in.watch_ns = util::now_ns();
  if (in.listed) return;
  try {
    busy_in_.push_back(&in);
    in.listed = true;
    busy_ = true;
  } catch (...) {
  }
}

tx_entry* endpoint::take_tx() noexcept {
  tx_entry* t = tx_free_;
  if (!t) return nullptr;
  tx_free_ = t->next;
  --tx_free_count_;
  t->next = nullptr;
  t->kind = tx_entry::send;
  t->acked = false;
  t->ack_status = 0;
  // A new generation in the high half: a late or forged ack for an earlier
  // use of this slot does not match.
  t->token += uint64_t{1} << 32;
  return t;
}

void endpoint::put_tx(tx_entry* t) noexcept {
  t->state = tx_entry::free;
  t->c = nullptr;
  t->next = tx_free_;
  tx_free_ = t;
  ++tx_free_count_;
}

tx_entry* endpoint::tx_of(uint64_t token) noexcept {
  uint32_t i = static_cast<uint32_t>(token);
  if (i >= tx_count_ || tx_[i].token != token || tx_[i].state == tx_entry::free) return nullptr;
  return &tx_[i];
}

void endpoint::enqueue_bounce(conn& c, tx_entry* t) noexcept {
  t->next = nullptr;
  if (c.queue_tail)
    c.queue_tail->next = t;
  else
    c.queue_head = t;
  c.queue_tail = t;
}

template <class Lock>
void endpoint::complete_tx(tx_entry* t, int err) noexcept {
  if (t->kind == tx_entry::internal) {  // data of a read we served: no one to tell
    if (t->c) --t->c->outstanding;
    put_tx(t);
    return;
  }
  util::cq* cq = bound_.tx_cq.get();
  // fi_cntr(3): sends count on the send counter, RMA reads and fetching
  // atomics on the read counter, RMA writes and other atomics on the write
  // counter.
  util::cntr* cntr = t->quiet                       ? nullptr
                     : t->kind == tx_entry::send      ? bound_.send_cntr.get()
                     : (t->cq_flags & FI_READ)      ? bound_.read_cntr.get()
                                                    : bound_.write_cntr.get();
  if (err) {
    if (cq) {
      fi_cq_err_entry e{};
      e.op_context = t->context;
      e.flags = t->cq_flags;
      e.err = err;
      e.prov_errno = err;
      e.src_addr = FI_ADDR_NOTAVAIL;
      if (!cq->write_error<Lock>(e))
        WEFT_WARN(&provider(), FI_LOG_EP_DATA, "transmit CQ overrun: error %d for %p lost", err,
                  t->context);
    }
    if (cntr) cntr->inc_err();
  } else {
    if (t->completion)
      cq->write<Lock>({t->context, t->cq_flags, 0, nullptr, 0, 0, FI_ADDR_NOTAVAIL, 0});
    if (cntr) cntr->inc();
  }
  if (t->c) --t->c->outstanding;
  put_tx(t);
}

template <class Lock>
void endpoint::fail_conn(conn& c, int err) noexcept {
  c.dead = true;
  c.queue_head = c.queue_tail = nullptr;
  for (auto& o : c.seg_owner) o = nullptr;
  c.replies.clear();
  for (uint32_t i = 0; i < tx_count_; ++i)
    if (tx_[i].state != tx_entry::free && tx_[i].c == &c) complete_tx<Lock>(&tx_[i], err);
}

template <class Lock>
ssize_t endpoint::ring_full(conn& c, errc e) noexcept {
  if (e == errc::again) {
    uint64_t now = util::now_ns();
    if (!c.full_ns) {
      c.full_ns = now;
    } else if (now - c.full_ns > stall_ns) {
      c.full_ns = now;
      if (peer_dead(c)) {
        fail_conn<Lock>(c, FI_ECONNRESET);
        return to_fi(errc::connreset);
      }
    }
    return to_fi(errc::again);
  }
  // Our position against the consumer's is impossible: the region is corrupt.
  WEFT_WARN(&provider(), FI_LOG_EP_DATA, "shm peer %s: ring %u is corrupt", c.reg.name().c_str(),
            c.ring);
  fail_conn<Lock>(c, FI_EIO);
  return to_fi(errc::io);
}

template <class Lock>
void endpoint::service(uint64_t now) noexcept {
  for (size_t i = 0; i < busy_conns_.size();) {
    conn& c = *busy_conns_[i];
    if (!c.dead) {
      if (!c.replies.empty()) flush_replies(c);
      if (c.outstanding) help_split(c);
      if (c.queue_head || c.seg_owner[0] || c.seg_owner[1]) pump_bounce<Lock>(c);
      if (c.outstanding && now - c.watch_ns > stall_ns) {
        c.watch_ns = now;
        if (peer_dead(c)) fail_conn<Lock>(c, FI_ECONNRESET);
      }
    }
    if (c.dead || !c.busy()) {
      c.listed = false;
      busy_conns_[i] = busy_conns_.back();
      busy_conns_.pop_back();
      continue;
    }
    ++i;
  }
  for (size_t i = 0; i < busy_in_.size();) {
    inbound& in = *busy_in_[i];
    if (in.split) poll_split<Lock>(in);
    if (!in.xfers.empty()) poll_bounce<Lock>(in);
    if (!in.xfers.empty() && now - in.watch_ns > stall_ns) {
      in.watch_ns = now;
      if (in.same_ns && !in.live.check_now()) {
        WEFT_WARN(&provider(), FI_LOG_EP_DATA,
                  "shm sender pid %u exited during a transfer to us", in.id.pid);
        while (!in.xfers.empty()) {
          rx_xfer* x = in.xfers.back();
          x->err = FI_ECONNRESET;
          x->done = true;
          finish_xfer<Lock>(x);
        }
        in.dead = true;
        pending_.set(in.ring);  // what it sent before dying is read, then its ring freed
      }
    }
    if (in.xfers.empty()) {
      in.listed = false;
      busy_in_[i] = busy_in_.back();
      busy_in_.pop_back();
      continue;
    }
    ++i;
  }
  busy_ = !busy_conns_.empty() || !busy_in_.empty();
}

#define WEFT_SHM_INSTANTIATE(L)                                              \
  template void endpoint::complete_tx<L>(tx_entry*, int) noexcept;           \
  template void endpoint::fail_conn<L>(conn&, int) noexcept;                 \
  template ssize_t endpoint::ring_full<L>(conn&, errc) noexcept;             \
  template void endpoint::service<L>(uint64_t) noexcept;

WEFT_SHM_INSTANTIATE(util::null_lock)
WEFT_SHM_INSTANTIATE(util::mutex_lock)
WEFT_SHM_INSTANTIATE(util::handoff_lock)

}  // namespace weft::shm
