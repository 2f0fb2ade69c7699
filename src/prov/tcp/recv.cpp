// SPDX-License-Identifier: MIT
// weft — the tcp data path, the receiving side: a message header asks
// util::srx for a match; a posted receive gets the payload straight into its
// buffer, anything else lands in an unexpected buffer the size of the message
// (pooled when small) until a receive claims it (start) or it is dropped
// (discard). A connection that fails takes down what it owed.
#include "util/iov.hpp"
#include "core/log.hpp"
#include "prov/tcp/tcp.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace weft::tcp {

namespace {


}  // namespace

template <class Lock>
bool endpoint::rx_blocked() noexcept {
  [[maybe_unused]] auto g = aux_guard<Lock>();
  if (deferred_head_ || unexp_bytes_ > cfg().unexp_limit) return true;
  // No new frame while no answer could be queued for it, or while a remote
  // CQ data completion could not be written.
  util::cq* cq = bound_.rx_cq.get();
  return heap_responses_ >= 4096 || (cq && !cq->has_room<Lock>());
}

// ---- unexpected buffers ----

template <class Lock>
unexp_buf* endpoint::alloc_unexp(size_t n) noexcept {
  unexp_buf* b = nullptr;
  {
    [[maybe_unused]] auto g = aux_guard<Lock>();
    if (n <= unexp_buf::small && unexp_free_) {
      b = unexp_free_;
      unexp_free_ = b->next;
      --unexp_free_count_;
    }
    unexp_bytes_ += n;
  }
  if (!b) {
    size_t cap = n <= unexp_buf::small ? unexp_buf::small : n;
    b = static_cast<unexp_buf*>(std::malloc(sizeof(unexp_buf) + cap));
    if (!b) {
      [[maybe_unused]] auto g = aux_guard<Lock>();
      unexp_bytes_ -= n;
      return nullptr;
    }
    b->cap = cap;
  }
  b->len = n;
  return b;
}

template <class Lock>
void endpoint::free_unexp(unexp_buf* b) noexcept {
  if (!b) return;
  {
    [[maybe_unused]] auto g = aux_guard<Lock>();
    unlink_queued(b);  // listed (shared context): unlisted as it goes
    unexp_bytes_ -= b->len;
    // Small buffers are kept (up to a bound) so the warm path never allocates.
    if (b->cap == unexp_buf::small && unexp_free_count_ < 1024) {
      b->next = unexp_free_;
      unexp_free_ = b;
      ++unexp_free_count_;
      return;
    }
  }
  std::free(b);
}

// ---- receives ----

template <class Lock>
bool endpoint::on_message(conn& c) noexcept {
  const frame& f = c.reader.current();
  if (c.state != conn_state::connected) {
    protocol_error<Lock>(c, "a message before the connection was established");
    return false;
  }
  bool tagged = f.op == proto::op::tagged || f.op == proto::op::tagged_data;
  bool with_data = f.op == proto::op::msg_data || f.op == proto::op::tagged_data;
  if (c.addr == FI_ADDR_NOTAVAIL && type_ == FI_EP_RDM && c.name.len) {
    // A peer that was not in the AV when it connected may be by now.
    c.addr = lookup(c.name);
    if (c.addr != FI_ADDR_NOTAVAIL && (c.addr >= peers_.size() || !peers_[c.addr])) map(c, c.addr);
  }
  fi_peer_match_attr a{source(c), f.payload_len, f.tag};
  fi_peer_rx_entry* e = nullptr;
  int r = rx_.get<Lock>(tagged, a, &e);
  if (r != 0 && r != to_fi(errc::noent)) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "tcp peer %s: no receive entry for a message: %s",
              describe(c.peer).c_str(), fi_strerror(-r));
    fail_conn<Lock>(c, FI_ENOMEM);
    return false;
  }
  if (with_data) {
    e->cq_data = f.cq_data;
    e->flags |= FI_REMOTE_CQ_DATA;
  }
  c.rx = e;
  c.rx_iov = 0;
  c.rx_unexp = r != 0;
  if (c.rx_unexp) {
    unexp_buf* b = alloc_unexp<Lock>(f.payload_len);
    if (!b) {
      WEFT_WARN(&provider(), FI_LOG_EP_DATA,
                "tcp peer %s: out of memory for an unexpected message of %u bytes",
                describe(c.peer).c_str(), f.payload_len);
      c.rx = nullptr;
      rx_.free_entry<Lock>(e);
      fail_conn<Lock>(c, FI_ENOMEM);
      return false;
    }
    b->from = c.name;
    b->ep = this;
    b->queued = nullptr;
    e->peer_context = b;
  }
  return true;
}

void endpoint::next_target(conn& c) noexcept {
  if (c.rx_rma) {
    rma_next_target(c);
    return;
  }
  frame_reader& r = c.reader;
  size_t left = r.payload_left();
  if (!left) return;
  fi_peer_rx_entry* e = c.rx;
  if (!e) {
    r.discard_rest();
    return;
  }
  if (c.rx_unexp) {
    auto* b = static_cast<unexp_buf*>(e->peer_context);
    r.set_target(b->data + (b->len - left), left);
    return;
  }
  while (c.rx_iov < e->count) {
    const iovec& v = e->iov[c.rx_iov++];
    if (!v.iov_len) continue;
    r.set_target(v.iov_base, std::min(v.iov_len, left));
    return;
  }
  r.discard_rest();  // longer than the buffer: FI_ETRUNC at the end
}

template <class Lock>
void endpoint::message_done(conn& c) noexcept {
  fi_peer_rx_entry* e = std::exchange(c.rx, nullptr);
  if (!e) return;
  if (!c.rx_unexp) {
    finish_rx<Lock>(e);
    return;
  }
  // Under a shared context the endpoint keeps what it queued, to withdraw
  // it at close (listed first: queue_* may start it at once).
  if (!rx_.owned()) list_queued<Lock>(static_cast<unexp_buf*>(e->peer_context), e);
  // queue_* may hand the entry straight to start() when a receive was
  // posted meanwhile; start takes no lock this thread holds.
  rx_.queue<Lock>(e, (e->flags & FI_TAGGED) != 0);
}

template <class Lock>
void endpoint::list_queued(unexp_buf* b, fi_peer_rx_entry* e) noexcept {
  [[maybe_unused]] auto g = aux_guard<Lock>();
  b->queued = e;
  b->q_prev = nullptr;
  b->q_next = queued_;
  if (queued_) queued_->q_prev = b;
  queued_ = b;
}

template <class Lock>
void endpoint::begin_start(unexp_buf* b) noexcept {
  if (rx_.owned()) return;  // our own engine: nothing is listed, nobody waits
  [[maybe_unused]] auto g = aux_guard<Lock>();
  in_start_.fetch_add(1, std::memory_order_relaxed);
  unlink_queued(b);
}

template <class Lock>
int endpoint::start(fi_peer_rx_entry* e) noexcept {
  auto* b = static_cast<unexp_buf*>(e->peer_context);
  endpoint* ep = b->ep;
  ep->begin_start<Lock>(b);
  size_t left = std::min(e->msg_size, util::iov_total(e->iov, e->count));
  const std::byte* from = b->data;
  for (size_t i = 0; i < e->count && left; ++i) {
    size_t n = std::min(left, e->iov[i].iov_len);
    if (n) std::memcpy(e->iov[i].iov_base, from, n);
    from += n;
    left -= n;
  }
  e->peer_context = nullptr;
  ep->free_unexp<Lock>(b);
  ep->finish_rx<Lock>(e);
  if (!ep->rx_.owned()) ep->in_start_.fetch_sub(1, std::memory_order_release);  // last touch
  return 0;
}

template <class Lock>
int endpoint::discard(fi_peer_rx_entry* e) noexcept {
  auto* b = static_cast<unexp_buf*>(e->peer_context);
  endpoint* ep = b->ep;
  ep->begin_start<Lock>(b);
  ep->free_unexp<Lock>(b);
  e->peer_context = nullptr;
  ep->rx_.free_entry<Lock>(e);
  if (!ep->rx_.owned()) ep->in_start_.fetch_sub(1, std::memory_order_release);  // last touch
  return 0;
}

template <class Lock>
void endpoint::fail_conn(conn& c, int err) noexcept {
  if (fi_peer_rx_entry* e = std::exchange(c.rx, nullptr)) {
    if (c.rx_unexp) {
      free_unexp<Lock>(static_cast<unexp_buf*>(e->peer_context));
      e->peer_context = nullptr;
      rx_.free_entry<Lock>(e);
    } else {
      fail_rx<Lock>(e, err == FI_ECANCELED ? err : FI_EIO);
    }
  }
  for (tx_entry* t = c.take_queue(); t;) {
    tx_entry* next = t->next;
    fail_tx<Lock>(t, err);
    t = next;
  }
  fail_awaiting<Lock>(c, err);
  retire(c);
}

#define WEFT_TCP_INSTANTIATE(L)                                        \
  template bool endpoint::rx_blocked<L>() noexcept;                    \
  template unexp_buf* endpoint::alloc_unexp<L>(size_t) noexcept;       \
  template void endpoint::free_unexp<L>(unexp_buf*) noexcept;          \
  template bool endpoint::on_message<L>(conn&) noexcept;               \
  template void endpoint::message_done<L>(conn&) noexcept;             \
  template void endpoint::list_queued<L>(unexp_buf*, fi_peer_rx_entry*) noexcept; \
  template int endpoint::start<L>(fi_peer_rx_entry*) noexcept;         \
  template int endpoint::discard<L>(fi_peer_rx_entry*) noexcept;       \
  template void endpoint::fail_conn<L>(conn&, int) noexcept;

WEFT_TCP_INSTANTIATE(util::null_lock)
WEFT_TCP_INSTANTIATE(util::mutex_lock)

}  // namespace weft::tcp
