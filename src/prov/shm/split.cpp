// SPDX-License-Identifier: MIT
// weft — split copies: a large single-copy message moved by both processes
// at once, the receiver reading pieces with process_vm_readv while the
// sender writes others with process_vm_writev, each on its own core (the
// protocol is in proto.hpp, "Split copy").
//
// Why: one process_vm_readv of a large message runs at the speed of one
// core copying; the sender meanwhile only waits for its op_ack, polling.
// Two copiers take about half the time, and nothing changes for a sender
// that is not polling: the receiver then takes every piece itself, in a few
// calls (each piece is half of what is left).
#include "core/log.hpp"
#include "prov/shm/iov.hpp"
#include "prov/shm/shm.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace weft::shm {

namespace {

using proto::split_line;
constexpr uint64_t sealed = proto::split_offset_mask;  // every piece claimed

uint64_t seq_of(uint64_t w) noexcept { return w >> proto::split_offset_bits; }
uint64_t off_of(uint64_t w) noexcept { return w & proto::split_offset_mask; }

// Claims the next piece of transfer `seq` (len bytes): for R half of what
// is left, at least split_piece_min; for S (`greedy`) all of it, since R is
// busy with its own piece when S comes, and one call each is what makes a
// split worth it. False when none is left or the line has moved on to
// another transfer.
bool claim_piece(split_line& l, uint64_t seq, uint64_t len, uint64_t& off, uint64_t& n,
                 bool greedy) noexcept {
  std::atomic_ref<uint64_t> claim(l.claim);
  uint64_t w = claim.load(std::memory_order_acquire);
  for (;;) {
    if (seq_of(w) != seq || off_of(w) == sealed || off_of(w) >= len) return false;
    off = off_of(w);
    uint64_t left = len - off;
    n = greedy ? left : std::min(left, std::max(proto::split_piece_min, left / 2));
    uint64_t next = seq << proto::split_offset_bits | (off + n == len ? sealed : off + n);
    if (claim.compare_exchange_weak(w, next, std::memory_order_acq_rel,
                                    std::memory_order_acquire))
      return true;
  }
}

// The line's plain fields, read and written relaxed: the claim word's
// release/acquire orders them, and a sender may read len while the owner
// already writes the next transfer's (a claim then fails; see proto.hpp).
template <class T>
T get(T& field) noexcept {
  return std::atomic_ref<T>(field).load(std::memory_order_relaxed);
}
template <class T>
void put(T& field, T v) noexcept {
  std::atomic_ref<T>(field).store(v, std::memory_order_relaxed);
}

void add_done(split_line& l, uint64_t n) noexcept {
  std::atomic_ref<uint64_t>(l.done).fetch_add(n, std::memory_order_release);
}

// The first error wins.
void set_error(split_line& l, int err) noexcept {
  uint32_t none = 0;
  std::atomic_ref<uint32_t>(l.error).compare_exchange_strong(none, static_cast<uint32_t>(err),
                                                             std::memory_order_relaxed);
}

// R's first piece, claimed as it publishes the transfer: half, and a few
// KiB more for R's head start (S sees the transfer a fraction of a
// microsecond later).
uint64_t first_piece(uint64_t len) noexcept {
  const uint64_t head_start = std::min<uint64_t>(len / 16, 8 * 1024);
  return std::min(len, std::max(proto::split_piece_min, (len / 2 + head_start) & ~uint64_t{4095}));
}

int fi_error_of(int rc) noexcept {
  switch (rc) {
    case ESRCH: return FI_ECONNRESET;
    case EFAULT: return FI_EFAULT;
    case ENOMEM: return FI_ENOMEM;
    default: return FI_EIO;
  }
}

}  // namespace

// ---- receiver ------------------------------------------------------------------------

template <class Lock>
bool endpoint::split_pull(fi_peer_rx_entry* e, const cma_rec& r, uint64_t len) noexcept {
  inbound& in = *r.in;
  if (in.split || e->count > proto::rts_max_iov || len < 2 * proto::split_piece_min) return false;
  auto* x = new (std::nothrow) rx_xfer;
  if (!x) return false;
  x->kind = rec_kind::cma;
  x->split = true;
  x->in = &in;
  x->token = r.token;
  x->total = r.total;
  x->len = len;
  x->entry = e;
  x->matched = true;
  x->id = r.id;
  x->pid = r.pid;
  x->src_count = r.count;
  std::copy_n(r.iov, r.count, x->src_iov);
  try {
    in.xfers.push_back(x);
  } catch (...) {
    delete x;
    return false;
  }
  split_line& l = region_.split(in.ring);
  put(l.token, r.token);
  put(l.len, len);
  put(l.count, static_cast<uint32_t>(e->count));
  for (size_t i = 0; i < e->count; ++i) {
    put(l.dst[i].addr, reinterpret_cast<uint64_t>(e->iov[i].iov_base));
    put(l.dst[i].len, uint64_t{e->iov[i].iov_len});
  }
  std::atomic_ref<uint64_t>(l.done).store(0, std::memory_order_relaxed);
  std::atomic_ref<uint32_t>(l.error).store(0, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(l.orphan).store(0, std::memory_order_relaxed);
  in.split_seq = (in.split_seq + 1) & (~uint64_t{0} >> proto::split_offset_bits);
  if (!in.split_seq) in.split_seq = 1;  // 0 is "never published"
  // Published with R's first piece already claimed: a polling sender would
  // otherwise often win the first CAS and, greedy, take the whole message.
  const uint64_t first = first_piece(len);
  std::atomic_ref<uint64_t>(l.claim).store(
      in.split_seq << proto::split_offset_bits | (first == len ? sealed : first),
      std::memory_order_release);
  in.split = x;
  watch(in);
  int rc = cma_copy(x->pid, false, x->src_iov, x->src_count, e->iov, e->count, first, 0);
  if (rc) set_error(l, fi_error_of(rc));
  add_done(l, first);
  poll_split<Lock>(in);
  return true;
}

template <class Lock>
void endpoint::poll_split(inbound& in) noexcept {
  rx_xfer* x = in.split;
  if (!x) return;
  split_line& l = region_.split(in.ring);
  fi_peer_rx_entry* e = x->entry;
  uint64_t off, n;
  while (claim_piece(l, in.split_seq, x->len, off, n, false)) {
    int rc = cma_copy(x->pid, false, x->src_iov, x->src_count, e->iov, e->count, n, off);
    if (rc) set_error(l, fi_error_of(rc));
    add_done(l, n);
  }
  // A piece the sender claimed but could not write.
  std::atomic_ref<uint64_t> orphan(l.orphan);
  if (uint64_t o = orphan.load(std::memory_order_acquire)) {
    orphan.store(0, std::memory_order_relaxed);
    const uint64_t given = get(l.orphan_len);
    uint64_t olen = std::min(given, x->len - std::min(x->len, o - 1));
    int rc = cma_copy(x->pid, false, x->src_iov, x->src_count, e->iov, e->count, olen, o - 1);
    if (rc) set_error(l, fi_error_of(rc));
    add_done(l, given);
  }
  uint64_t done = std::atomic_ref<uint64_t>(l.done).load(std::memory_order_acquire);
  if (done < x->len) return;  // the sender is still copying its piece
  if (done > x->len) set_error(l, FI_EIO);  // a confused (or hostile) sender
  x->err = static_cast<int>(std::atomic_ref<uint32_t>(l.error).load(std::memory_order_relaxed));
  x->done = true;
  in.split = nullptr;  // every piece is in: nothing to seal
  if (x->err == FI_ECONNRESET) {
    in.dead = true;
    pending_.set(in.ring);
  }
  finish_xfer<Lock>(x);
}

// A later message of in's sender was matched while a split copy of an
// earlier one is still under way (the sender is copying a piece of it, or
// has yet to: poll_split left it open). The earlier one completes first,
// so that one sender's messages complete in the order they matched, as
// they do when the receiver copies alone: what is left is claimed here,
// and the piece the sender holds is one system call of its own, so the
// wait is short. A sender that dies, or leaves its piece for a second,
// fails that transfer; false when it died.
template <class Lock>
bool endpoint::finish_split(inbound& in) noexcept {
  const uint64_t start = util::now_ns();
  bool dead = false;
  for (;;) {
    poll_split<Lock>(in);
    if (!in.split) return true;
    const uint64_t now = util::now_ns();
    if (now - start > stall_ns && in.same_ns && !in.live.check_now()) {
      dead = true;
      break;
    }
    if (now - start > 1'000'000'000ull) break;
    sched_yield();
  }
  rx_xfer* x = in.split;
  seal_split(in);
  x->err = dead ? FI_ECONNRESET : FI_EIO;
  x->done = true;
  if (dead) {
    in.dead = true;
    pending_.set(in.ring);
  }
  finish_xfer<Lock>(x);
  return !dead;
}

// Ends in's split transfer early (its receive is about to complete with an
// error): no piece may be claimed any more, and the pieces the sender holds
// must land before the receive buffer goes back to the application. The
// sender finishes a piece in one call, so the wait is short; a sender that
// died writes nothing more.
void endpoint::seal_split(inbound& in) noexcept {
  rx_xfer* x = in.split;
  in.split = nullptr;
  if (!x) return;
  split_line& l = region_.split(in.ring);
  uint64_t w = std::atomic_ref<uint64_t>(l.claim).exchange(
      in.split_seq << proto::split_offset_bits | sealed, std::memory_order_acq_rel);
  if (seq_of(w) != in.split_seq) return;
  uint64_t claimed = off_of(w) == sealed ? x->len : off_of(w);
  std::atomic_ref<uint64_t> done(l.done);
  uint64_t deadline = util::now_ns() + 1'000'000'000ull;
  while (done.load(std::memory_order_acquire) < claimed && util::now_ns() < deadline) {
    if (in.same_ns && !in.live.check_now()) break;
    sched_yield();
  }
}

// ---- sender -----------------------------------------------------------------------

void endpoint::help_split(conn& c) noexcept {
  if (c.split_refused || c.dead || !c.outstanding) return;
  split_line& l = c.reg.split(c.ring);
  uint64_t w = std::atomic_ref<uint64_t>(l.claim).load(std::memory_order_acquire);
  uint64_t seq = seq_of(w);
  if (!seq || off_of(w) == sealed) return;  // nothing published, or nothing left
  const pid_t pid = c.reg.owner_pid();
  uint64_t off, n;
  // l.len belongs to transfer `seq` while a claim of it can succeed (see
  // proto.hpp): read it once, and the rest after the first claim.
  const uint64_t len = get(l.len);
  while (claim_piece(l, seq, len, off, n, true)) {
    // Claimed: the transfer is current and its fields are stable.
    tx_entry* t = tx_of(get(l.token));
    const uint32_t count = get(l.count);
    if (!t || t->c != &c || t->state != tx_entry::wait_ack || t->kind != tx_entry::send ||
        count > proto::rts_max_iov || t->total < len) {
      WEFT_WARN(&provider(), FI_LOG_EP_DATA,
                "shm peer %s: split copy of a message we are not sending", c.reg.name().c_str());
      set_error(l, FI_EIO);
      add_done(l, n);
      return;
    }
    proto::rts_iov dst[proto::rts_max_iov];
    for (uint32_t i = 0; i < count; ++i) dst[i] = {get(l.dst[i].addr), get(l.dst[i].len)};
    int rc = cma_copy(pid, true, dst, count, t->iov, t->count, n, off);
    if (rc == EPERM || rc == EACCES || rc == ENOSYS) {
      // The receiver may read us but we may not write it: it takes the piece back.
      WEFT_INFO(&provider(), FI_LOG_EP_DATA,
                "process_vm_writev to pid %d refused (%s): the receiver copies alone",
                static_cast<int>(pid), std::strerror(rc));
      c.split_refused = true;
      put(l.orphan_len, n);
      std::atomic_ref<uint64_t>(l.orphan).store(off + 1, std::memory_order_release);
      return;
    }
    if (rc == ESRCH) return;  // the receiver is gone; the send fails with its peer
    if (rc) set_error(l, fi_error_of(rc));
    add_done(l, n);
  }
}

#define WEFT_SHM_INSTANTIATE(L)                                                             \
  template bool endpoint::split_pull<L>(fi_peer_rx_entry*, const cma_rec&, uint64_t) noexcept; \
  template void endpoint::poll_split<L>(inbound&) noexcept;                                 \
  template bool endpoint::finish_split<L>(inbound&) noexcept;

WEFT_SHM_INSTANTIATE(util::null_lock)
WEFT_SHM_INSTANTIATE(util::mutex_lock)
WEFT_SHM_INSTANTIATE(util::handoff_lock)

}  // namespace weft::shm
