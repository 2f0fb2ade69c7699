// SPDX-License-Identifier: MIT
// weft — large messages: the single-copy pull (process_vm_readv) with its
// acknowledgement, and the segmented copy through bounce segments where the
// kernel refuses single copy (protocols in proto.hpp).
#include "core/log.hpp"
#include "prov/shm/iov.hpp"
#include "prov/shm/shm.hpp"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace weft::shm {

namespace {

// Messages from this size on are copied by both sides when they can. Below
// it a piece would be under split_piece_min, whose copy costs little more
// than the second copier's start-up (seeing the transfer, a system call).
// Measured with fi_pingpong: 64 KiB is 25% faster split, 32 KiB 15%.
constexpr uint64_t split_min = 32 * 1024;

uint64_t capacity(const fi_peer_rx_entry* e) noexcept {
  uint64_t n = 0;
  for (size_t i = 0; i < e->count; ++i) n += e->iov[i].iov_len;
  return n;
}

}  // namespace

bool endpoint::use_cma(conn& c) noexcept {
  const char* why = nullptr;
  if (!cfg().single_copy) why = "FI_SHM_SINGLE_COPY=0";
  else if (c.cma_refused) why = "the peer cannot read our memory";
  else if (!c.same_ns) why = "the peer is in another PID namespace";
  else if (!cma_.cma_available(static_cast<pid_t>(c.id.pid))) why = "process_vm_readv is refused";
  if (!c.logged) {
    c.logged = true;
    if (why)
      WEFT_INFO(&provider(), FI_LOG_EP_DATA, "shm peer %s: large messages through bounce buffers (%s)",
                c.reg.name().c_str(), why);
    else
      WEFT_INFO(&provider(), FI_LOG_EP_DATA, "shm peer %s: large messages by single copy",
                c.reg.name().c_str());
  }
  return !why;
}

// ---- answers ---------------------------------------------------------------------

void endpoint::send_reply(conn* c, uint16_t op, uint64_t token, uint64_t status, const iovec* iov,
                          size_t count) noexcept {
  if (!c || c->dead) return;  // no one to tell
  msg_fields f{op, 0, token, status};
  if (c->replies.empty() && c->prod.try_sendv(f, iov, count) == errc::ok) {
    ring(*c);
    return;
  }
  // Its ring is full: keep the order, retry from progress. (Never wait: the
  // peer may be waiting for room in our ring just the same.)
  try {
    size_t total = 0;
    for (size_t i = 0; i < count; ++i) total += iov[i].iov_len;
    conn::reply r{op, token, status, std::vector<std::byte>(total)};
    gather(iov, count, 0, r.payload.data(), total);
    c->replies.push_back(std::move(r));
    watch(*c);
  } catch (...) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "out of memory: an answer to %s is lost",
              c->reg.name().c_str());
  }
}

void endpoint::flush_replies(conn& c) noexcept {
  bool sent = false;
  while (!c.replies.empty()) {
    auto& r = c.replies.front();
    msg_fields f{r.op, 0, r.token, r.status};
    iovec one{r.payload.data(), r.payload.size()};
    if (c.prod.try_sendv(f, &one, one.iov_len ? 1 : 0) != errc::ok) break;
    c.replies.pop_front();
    sent = true;
  }
  if (sent) ring(c);
}

// ---- single copy ------------------------------------------------------------------

template <class Lock>
void endpoint::pull(fi_peer_rx_entry* e, const cma_rec& r) noexcept {
  errc ignored;
  if (!r.in) {
    // The sender detached before we matched its message: its buffer is no
    // longer promised to us.
    finish_rx<Lock>(e, 0, FI_ECONNRESET);
    return;
  }
  // An earlier message of this sender still being copied by both sides
  // completes before this one (split.cpp).
  if (r.in->split && !finish_split<Lock>(*r.in)) {
    // It died meanwhile: its buffer is no longer promised to us.
    finish_rx<Lock>(e, 0, FI_ECONNRESET);
    return;
  }
  uint64_t len = std::min(capacity(e), r.total);
  // Once single copy from this sender is known to work, large messages are
  // copied by both sides (split.cpp); the first one proves it alone.
  if (r.in->cma_proven && len >= split_min && cfg().split_copy && split_pull<Lock>(e, r, len))
    return;
  int rc = len ? cma_copy(r.pid, false, r.iov, r.count, e->iov, e->count, len) : 0;
  if (rc == 0 && len) r.in->cma_proven = true;
  if (rc == EPERM || rc == EACCES || rc == ENOSYS) {
    // Refused after all: the sender streams it through bounce segments.
    WEFT_INFO(&provider(), FI_LOG_EP_DATA,
              "process_vm_readv from pid %d refused (%s): bounce buffers for this peer",
              static_cast<int>(r.pid), std::strerror(rc));
    rx_xfer* x = new (std::nothrow) rx_xfer;
    if (x) {
      x->kind = rec_kind::bounce;
      x->in = r.in;
      x->token = r.token;
      x->total = r.total;
      x->entry = e;
      x->matched = true;
      try {
        r.in->xfers.push_back(x);
        watch(*r.in);
        send_ack<Lock>(conn_to(r.id, ignored), r.token, proto::ack_use_bounce);
        return;
      } catch (...) {
        delete x;
      }
    }
    rc = ENOMEM;
  }
  int err = 0;
  switch (rc) {
    case 0: break;
    case ESRCH:  // the sender exited
      err = FI_ECONNRESET;
      r.in->dead = true;
      pending_.set(r.in->ring);
      break;
    case EFAULT: err = FI_EFAULT; break;     // a buffer is not mapped
    case ENOMEM: err = FI_ENOMEM; break;
    default: err = FI_EIO; break;
  }
  if (err)
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "pulling %llu bytes from pid %d: %s",
              static_cast<unsigned long long>(len), static_cast<int>(r.pid), std::strerror(rc));
  finish_rx<Lock>(e, err ? 0 : len, err);
  if (rc != ESRCH)
    send_ack<Lock>(conn_to(r.id, ignored), r.token, err ? static_cast<uint64_t>(err) : proto::ack_done);
}

// ---- bounce segments: sender -------------------------------------------------------

template <class Lock>
void endpoint::pump_bounce(conn& c) noexcept {
  if (c.dead) return;
  if (!c.bounce_ready) {
    if (errc e = c.reg.reserve_bounce(c.ring); e != errc::ok) {
      // No room for the segments (logged): what waits for them fails.
      while (tx_entry* t = c.queue_head) {
        c.queue_head = t->next;
        complete_tx<Lock>(t, static_cast<int>(e));
      }
      c.queue_tail = nullptr;
      return;
    }
    c.bounce_ready = true;
  }
  for (uint32_t s = 0; s < proto::bounce_segments; ++s) {
    tx_entry* t = c.seg_owner[s];
    if (!t) continue;
    auto& bc = c.reg.bounce_ctrl(c.ring, s);
    if (std::atomic_ref<uint64_t>(bc.state).load(std::memory_order_acquire) != 0) continue;
    c.seg_owner[s] = nullptr;
    c.watch_ns = util::now_ns();
    t->consumed += c.seg_bytes[s];
    if (t->state == tx_entry::draining && t->consumed == t->total) {
      // A send is complete once received; a write waits for the target's
      // answer (it may have come already), which says whether it landed.
      if (t->kind != tx_entry::write)
        complete_tx<Lock>(t, 0);
      else if (t->acked)
        complete_tx<Lock>(t, static_cast<int>(t->ack_status));
      else
        t->state = tx_entry::wait_ack;
    }
  }
  bool wrote = false;
  while (tx_entry* t = c.queue_head) {
    uint32_t s = 0;
    while (s < proto::bounce_segments && c.seg_owner[s]) ++s;
    if (s == proto::bounce_segments) break;
    auto& bc = c.reg.bounce_ctrl(c.ring, s);
    std::atomic_ref<uint64_t> state(bc.state);
    if (state.load(std::memory_order_acquire) != 0) break;  // not ours to write yet
    uint64_t n = std::min<uint64_t>(proto::bounce_segment_bytes, t->total - t->sent);
    gather(t->iov, t->count, t->sent, c.reg.bounce_segment(c.ring, s), n);
    bc.xfer = t->token;
    bc.offset = t->sent;
    ++c.chunks;
    state.store((c.chunks & 0xffffffffu) << 32 | n, std::memory_order_release);
    c.seg_owner[s] = t;
    c.seg_bytes[s] = static_cast<uint32_t>(n);
    t->sent += n;
    wrote = true;
    if (t->sent == t->total) {
      t->state = tx_entry::draining;
      c.queue_head = t->next;
      if (!c.queue_head) c.queue_tail = nullptr;
      t->next = nullptr;
    }
  }
  if (wrote) ring(c);
}

// ---- bounce segments: receiver -----------------------------------------------------

template <class Lock>
void endpoint::poll_bounce(inbound& in) noexcept {
  for (uint32_t s = 0; s < proto::bounce_segments; ++s) {
    auto& bc = region_.bounce_ctrl(in.ring, s);
    std::atomic_ref<uint64_t> state(bc.state);
    uint64_t st = state.load(std::memory_order_acquire);
    if (!st) continue;
    uint64_t token = bc.xfer, off = bc.offset, bytes = st & 0xffffffffu;
    auto it = std::find_if(in.xfers.begin(), in.xfers.end(),
                           [&](const rx_xfer* x) { return x->token == token; });
    if (it == in.xfers.end()) continue;  // its header is still in the ring
    rx_xfer* x = *it;
    bool corrupt = bytes > proto::bounce_segment_bytes || off > x->total ||
                   bytes > x->total - off || bytes > x->total - x->received;
    if (corrupt) {
      WEFT_WARN(&provider(), FI_LOG_EP_DATA, "shm sender pid %u: corrupt bounce chunk", in.id.pid);
      x->err = FI_EIO;
    } else {
      // A failed transfer (no memory to stage it, a refused RMA target) is
      // still drained to its end, so that the sender can finish.
      if (!x->err) {
        const std::byte* src = region_.bounce_segment(in.ring, s);
        if (x->staging)
          std::memcpy(x->staging + off, src, bytes);
        else if (x->rma != rx_xfer::none)
          scatter(x->dst, x->dst_count, off, src, bytes);
        else if (x->matched && x->entry)
          scatter(x->entry->iov, x->entry->count, off, src, bytes);
      }
      x->received += bytes;
    }
    state.store(0, std::memory_order_release);
    in.watch_ns = util::now_ns();
    if (corrupt || x->received == x->total) {
      x->done = true;
      finish_xfer<Lock>(x);
    }
  }
}

template <class Lock>
void endpoint::finish_xfer(rx_xfer* x) noexcept {
  if (x->in && x->in->split == x) seal_split(*x->in);  // cut short: the sender lets go first
  if (x->in) {
    auto& v = x->in->xfers;
    v.erase(std::remove(v.begin(), v.end(), x), v.end());
    x->in = nullptr;
  }
  if (x->discarded) {
    delete x;
    return;
  }
  if (x->rma == rx_xfer::read_result) {
    // Unless the read already failed with its peer (fail_conn).
    if (tx_of(x->read_token) == x->read) complete_tx<Lock>(x->read, x->err);
    delete x;
    return;
  }
  if (x->rma == rx_xfer::write_target) {
    if (!x->err) {
      remote_event<Lock>(FI_RMA | FI_REMOTE_WRITE, x->req_flags, x->cq_data, x->src, x->total);
      domain_->mrs().count_remote(x->key_count, [&](size_t i) { return x->keys[i]; },
                                  FI_REMOTE_WRITE);
    }
    // A sender that died is not answered; any other outcome is.
    if (x->err != FI_ECONNRESET) {
      errc ignored;
      send_ack<Lock>(conn_to(x->id, ignored), x->token,
                     x->err ? static_cast<uint64_t>(x->err) : proto::ack_done);
    }
    delete x;
    return;
  }
  if (!x->matched) return;  // staged; start_* finishes it
  fi_peer_rx_entry* e = x->entry;
  uint64_t len = std::min(capacity(e), x->total);
  if (!x->err && x->staging) scatter(e->iov, e->count, 0, x->staging, len);
  finish_rx<Lock>(e, x->err ? 0 : len, x->err);
  // A split copy is answered as a plain pull is, unless its sender died.
  if (x->split && x->err != FI_ECONNRESET) {
    errc ignored;
    send_ack<Lock>(conn_to(x->id, ignored), x->token,
                   x->err ? static_cast<uint64_t>(x->err) : proto::ack_done);
  }
  delete x;
}

#define WEFT_SHM_INSTANTIATE(L)                                              \
  template void endpoint::pull<L>(fi_peer_rx_entry*, const cma_rec&) noexcept; \
  template void endpoint::pump_bounce<L>(conn&) noexcept;                    \
  template void endpoint::poll_bounce<L>(inbound&) noexcept;                 \
  template void endpoint::finish_xfer<L>(rx_xfer*) noexcept;

WEFT_SHM_INSTANTIATE(util::null_lock)
WEFT_SHM_INSTANTIATE(util::mutex_lock)
WEFT_SHM_INSTANTIATE(util::handoff_lock)

}  // namespace weft::shm
