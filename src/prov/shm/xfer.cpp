// SPDX-License-Identifier: MIT
// weft — large messages: the single-copy pull (process_vm_readv) with its
// acknowledgement, and the segmented copy through bounce segments where the
// kernel refuses single copy (protocols in proto.hpp).
#include "core/log.hpp"
#include "prov/shm/shm.hpp"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace weft::shm {

namespace {

// Copies `len` bytes from `src` to offset `off` of an iovec list, clipped to
// its capacity.
void scatter(const iovec* iov, size_t count, uint64_t off, const std::byte* src, uint64_t len) {
  for (size_t i = 0; i < count && len; ++i) {
    if (off >= iov[i].iov_len) {
      off -= iov[i].iov_len;
      continue;
    }
    size_t n = std::min<uint64_t>(len, iov[i].iov_len - off);
    std::memcpy(static_cast<std::byte*>(iov[i].iov_base) + off, src, n);
    src += n;
    len -= n;
    off = 0;
  }
}

// Copies `len` bytes from offset `off` of an iovec list to `dst`.
void gather(const iovec* iov, size_t count, uint64_t off, std::byte* dst, uint64_t len) {
  for (size_t i = 0; i < count && len; ++i) {
    if (off >= iov[i].iov_len) {
      off -= iov[i].iov_len;
      continue;
    }
    size_t n = std::min<uint64_t>(len, iov[i].iov_len - off);
    std::memcpy(dst, static_cast<const std::byte*>(iov[i].iov_base) + off, n);
    dst += n;
    len -= n;
    off = 0;
  }
}

uint64_t capacity(const fi_peer_rx_entry* e) noexcept {
  uint64_t n = 0;
  for (size_t i = 0; i < e->count; ++i) n += e->iov[i].iov_len;
  return n;
}

// An iovec list with a cursor, for a transfer the kernel may do in parts.
struct iov_cursor {
  iovec v[max_iov];
  size_t n = 0, i = 0;
  // The first `limit` bytes of `src`.
  void init(const iovec* src, size_t count, uint64_t limit) {
    for (size_t k = 0; k < count && limit; ++k) {
      size_t len = std::min<uint64_t>(src[k].iov_len, limit);
      if (len) v[n++] = {src[k].iov_base, len};
      limit -= len;
    }
  }
  void advance(size_t bytes) {
    while (bytes && i < n) {
      size_t take = std::min(bytes, v[i].iov_len);
      v[i].iov_base = static_cast<std::byte*>(v[i].iov_base) + take;
      v[i].iov_len -= take;
      bytes -= take;
      if (!v[i].iov_len) ++i;
    }
  }
};

// Reads `len` bytes of the sender's buffers into ours: 0 or an errno.
int cma_read(pid_t pid, const proto::rts_iov* riov, uint32_t rcount, const iovec* liov,
             size_t lcount, uint64_t len) noexcept {
  iovec remote[max_iov];
  for (uint32_t k = 0; k < rcount; ++k)
    remote[k] = {reinterpret_cast<void*>(riov[k].addr), static_cast<size_t>(riov[k].len)};
  iov_cursor l, r;
  l.init(liov, lcount, len);
  r.init(remote, rcount, len);
  uint64_t done = 0;
  while (done < len) {
    ssize_t got = ::process_vm_readv(pid, l.v + l.i, l.n - l.i, r.v + r.i, r.n - r.i, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (got == 0) return EFAULT;  // nothing more can be read
    done += static_cast<uint64_t>(got);
    l.advance(static_cast<size_t>(got));
    r.advance(static_cast<size_t>(got));
  }
  return 0;
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

// ---- acknowledgements ---------------------------------------------------------

template <class Lock>
void endpoint::send_ack(conn* c, uint64_t token, uint64_t status) noexcept {
  if (!c || c->dead) return;  // no one to tell
  if (c->acks.empty()) {
    msg_fields f{proto::op_ack, 0, token, status};
    if (c->prod.try_send(f, nullptr, 0) == errc::ok) {
      c->reg.ring_doorbell(c->ring);
      return;
    }
  }
  // Its ring is full: keep the order, retry from progress.
  try {
    c->acks.emplace_back(token, status);
    watch(*c);
  } catch (...) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "out of memory: acknowledgement to %s lost",
              c->reg.name().c_str());
  }
}

void endpoint::flush_acks(conn& c) noexcept {
  bool sent = false;
  while (!c.acks.empty()) {
    auto [token, status] = c.acks.front();
    msg_fields f{proto::op_ack, 0, token, status};
    if (c.prod.try_send(f, nullptr, 0) != errc::ok) break;
    c.acks.pop_front();
    sent = true;
  }
  if (sent) c.reg.ring_doorbell(c.ring);
}

// ---- single copy ------------------------------------------------------------------

template <class Lock>
void endpoint::pull(fi_peer_rx_entry* e, const cma_rec& r) noexcept {
  errc ignored;
  if (!r.in) {
    // The sender detached before we matched its message: its buffer is no
    // longer promised to us.
    complete_rx<Lock>(e, 0, FI_ECONNRESET);
    srx_->free_entry<Lock>(e);
    return;
  }
  uint64_t len = std::min(capacity(e), r.total);
  int rc = len ? cma_read(r.pid, r.iov, r.count, e->iov, e->count, len) : 0;
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
  complete_rx<Lock>(e, err ? 0 : len, err);
  srx_->free_entry<Lock>(e);
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
    if (t->state == tx_entry::draining && t->consumed == t->total) complete_tx<Lock>(t, 0);
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
  if (wrote) c.reg.ring_doorbell(c.ring);
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
    if (bytes > proto::bounce_segment_bytes || off > x->total || bytes > x->total - off ||
        bytes > x->total - x->received) {
      WEFT_WARN(&provider(), FI_LOG_EP_DATA, "shm sender pid %u: corrupt bounce chunk", in.id.pid);
      x->err = FI_EIO;
    } else if (!x->err) {
      const std::byte* src = region_.bounce_segment(in.ring, s);
      if (x->staging)
        std::memcpy(x->staging + off, src, bytes);
      else if (x->matched && x->entry)
        scatter(x->entry->iov, x->entry->count, off, src, bytes);
      x->received += bytes;
    }
    state.store(0, std::memory_order_release);
    in.watch_ns = util::now_ns();
    if (x->err || x->received == x->total) {
      x->done = true;
      finish_xfer<Lock>(x);
    }
  }
}

template <class Lock>
void endpoint::finish_xfer(rx_xfer* x) noexcept {
  if (x->in) {
    auto& v = x->in->xfers;
    v.erase(std::remove(v.begin(), v.end(), x), v.end());
    x->in = nullptr;
  }
  if (x->discarded) {
    delete x;
    return;
  }
  if (!x->matched) return;  // staged; start_* finishes it
  fi_peer_rx_entry* e = x->entry;
  uint64_t len = std::min(capacity(e), x->total);
  if (!x->err && x->staging) scatter(e->iov, e->count, 0, x->staging, len);
  complete_rx<Lock>(e, x->err ? 0 : len, x->err);
  srx_->free_entry<Lock>(e);
  delete x;
}

#define WEFT_SHM_INSTANTIATE(L)                                              \
  template void endpoint::send_ack<L>(conn*, uint64_t, uint64_t) noexcept;   \
  template void endpoint::pull<L>(fi_peer_rx_entry*, const cma_rec&) noexcept; \
  template void endpoint::pump_bounce<L>(conn&) noexcept;                    \
  template void endpoint::poll_bounce<L>(inbound&) noexcept;                 \
  template void endpoint::finish_xfer<L>(rx_xfer*) noexcept;

WEFT_SHM_INSTANTIATE(util::null_lock)
WEFT_SHM_INSTANTIATE(util::mutex_lock)

}  // namespace weft::shm
