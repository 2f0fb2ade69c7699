// SPDX-License-Identifier: MIT
// weft — the receive-matching engine, endpoint side: posting, peeking,
// claiming and cancelling receives (see srx.hpp for the peer contract; the
// peer side is in srx_peer.cpp).
//
// Matching is a scan of one ordered queue, oldest first: O(queue length).
// Tagged receives, directed or not, share one list so post order holds across
// them. A faster shape, when long queues show up in profiles: hash buckets by
// exact tag (ignore == 0) and by source, each entry stamped with a post
// sequence number, the wildcard receives on their own list, and a match taking
// the lowest sequence among the heads that qualify; unexpected messages
// bucketed the same way by (source, tag).
#include "util/srx.hpp"

#include "core/log.hpp"
#include "util/av.hpp"
#include "util/iov.hpp"
#include "util/trigger.hpp"

#include <algorithm>
#include <climits>

namespace weft::util {

namespace {
constexpr size_t max_prealloc = 16384;  // posted entries grown at construction, at most
// A posting's flags a posted receive keeps for its completion: selective
// completion, and a deferred receive's "no endpoint counter" (op_quiet).
constexpr uint64_t kept_flags = FI_COMPLETION | op_quiet;
}  // namespace

// ---- pool ----

bool srx_pool::grow(size_t n) noexcept {
  try {
    chunks_.reserve(chunks_.size() + 1);
    auto chunk = std::make_unique_for_overwrite<storage[]>(n);
    // What the previous chunk has not handed out yet goes to the free list.
    for (; carve_left_; --carve_left_) {
      srx_entry* e = new (carve_++) srx_entry();
      e->rx.next = free_;
      free_ = &e->rx;
    }
    carve_ = chunk.get();
    carve_left_ = n;
    chunks_.push_back(std::move(chunk));  // cannot throw after reserve
  } catch (...) {
    return false;
  }
  capacity_ += n;
  available_ += n;
  return true;
}

// ---- setup ----

srx::srx(const srx_attr& a)
    : prov_(a.prov),
      cq_(a.rx_cq),
      size_(a.size ? a.size : SIZE_MAX),
      min_multi_recv_(a.min_multi_recv),
      directed_(a.directed_recv),
      av_(a.av),
      owner_ops_(owner_table(a.locks())),
      serialized_(a.serialized),
      handoff_(a.handoff),
      pool_(a.chunk) {
  // Posted receives never wait on the allocator; unexpected ones grow the pool.
  if (a.size && a.prealloc) pool_.grow(std::min(a.size, max_prealloc));
}

srx::~srx() = default;

// ---- helpers, under the lock ----

fi_peer_rx_entry* srx::match_unexpected(const srx_entry& want, bool ready_only) noexcept {
  const fi_addr_t addr = want.rx.addr;
  if (want.tagged) {
    const uint64_t tag = want.rx.tag, ignore = want.ignore;
    return unexp_tag_.find([&](const srx_entry* u) {
      return (!ready_only || u->state == srx_state::unexp_ready) &&
             srx_addr_match(addr, u->rx.addr) && srx_tag_match(tag, ignore, u->rx.tag);
    });
  }
  return unexp_msg_.find([&](const srx_entry* u) {
    return (!ready_only || u->state == srx_state::unexp_ready) && srx_addr_match(addr, u->rx.addr);
  });
}

bool srx::carve(srx_entry& m, srx_entry& slice, size_t msg_size) noexcept {
  size_t n = std::min(msg_size, m.iov[0].iov_len);
  slice.iov[0] = {m.iov[0].iov_base, n};
  slice.desc[0] = m.desc[0];
  slice.rx.iov = slice.iov;
  slice.rx.desc = slice.desc;
  slice.rx.count = 1;
  slice.rx.context = m.rx.context;
  m.iov[0].iov_base = static_cast<char*>(m.iov[0].iov_base) + n;
  m.iov[0].iov_len -= n;
  // m.ignore holds the minimum in force when the buffer was posted.
  bool last = m.iov[0].iov_len == 0 || m.iov[0].iov_len < m.ignore;
  slice.post_flags = (m.rx.flags & ~FI_MULTI_RECV) | (last ? FI_MULTI_RECV : 0);
  return last;
}

void srx::attach(srx_entry& e, const srx_entry& want) noexcept {
  size_t n = want.rx.count;
  std::copy_n(want.iov, n, e.iov);
  std::copy_n(want.desc, n, e.desc);
  e.rx.iov = e.iov;
  e.rx.desc = e.desc;
  e.rx.count = n;
  e.rx.context = want.rx.context;
  e.post_flags = want.rx.flags;
}

void srx::start_all(rx_queue& q, bool discard) noexcept {
  while (fi_peer_rx_entry* e = q.front()) {
    rx_queue::unlink(e);
    bool tagged = srx_entry::from(e)->tagged;
    fi_ops_srx_peer* ops = e->srx->peer_ops;
    if (discard)
      tagged ? ops->discard_tag(e) : ops->discard_msg(e);
    else
      tagged ? ops->start_tag(e) : ops->start_msg(e);
  }
}

template <class Lock>
void srx::complete(const cq_entry& c) noexcept {
  if (cq_ && !cq_->write<Lock>(c))
    WEFT_WARN(prov_, FI_LOG_EP_DATA, "receive CQ overrun: completion of %p lost", c.op_context);
}

template <class Lock>
void srx::complete_error(void* context, uint64_t flags, uint64_t tag, int err) noexcept {
  fi_cq_err_entry e{};
  e.op_context = context;
  e.flags = flags;
  e.tag = tag;
  e.err = err;
  e.prov_errno = err;
  e.src_addr = FI_ADDR_NOTAVAIL;
  if (cq_ && !cq_->write_error<Lock>(e))
    WEFT_WARN(prov_, FI_LOG_EP_DATA, "receive CQ overrun: error %d for %p lost", err, context);
}

// ---- endpoint side ----

namespace {

// The receive as posted, in an entry on the stack.
srx_entry describe(const iovec* iov, void** desc, size_t count, fi_addr_t src, void* context,
                   uint64_t flags) noexcept {
  srx_entry w{};
  w.rx.addr = src;
  w.rx.context = context;
  w.rx.flags = flags;
  w.rx.count = count;
  for (size_t i = 0; i < count; ++i) {
    w.iov[i] = iov[i];
    w.desc[i] = desc ? desc[i] : nullptr;
    w.rx.msg_size += iov[i].iov_len;
  }
  return w;
}

}  // namespace

// A source given with receive-context bits (fi_rx_addr) is the endpoint
// without them: messages name their sender, never one of its contexts.
fi_addr_t srx::report(fi_addr_t src) const noexcept {
  return av_->report(av_->strip_rx(src));
}

template <class Lock>
ssize_t srx::post_msg(const iovec* iov, void** desc, size_t count, fi_addr_t src, void* context,
                      uint64_t flags) noexcept {
  if (iov_refused(prov_, "receive", iov, count, srx_entry::max_iov))
    return to_fi(errc::inval);
  if (flags & (FI_PEEK | FI_CLAIM | FI_DISCARD)) {
    WEFT_WARN(prov_, FI_LOG_EP_DATA, "FI_PEEK/FI_CLAIM/FI_DISCARD apply to tagged receives");
    return to_fi(errc::badflags);
  }
  if ((flags & FI_MULTI_RECV) && count != 1) {
    WEFT_WARN(prov_, FI_LOG_EP_DATA, "FI_MULTI_RECV takes exactly one buffer, not %zu", count);
    return to_fi(errc::inval);
  }
  if (!(flags & FI_MULTI_RECV) && count <= 1) {
    ssize_t rc = post_one<Lock>(iov, desc, count, src, 0, 0, context,
                                recv_msg | (flags & kept_flags), false);
    if (rc != to_fi(errc::inprogress)) return rc;
  }
  srx_entry w = describe(iov, desc, count, source_filter(src), context,
                         recv_msg | (flags & (kept_flags | FI_MULTI_RECV)));
  w.ignore = min_multi_recv_;  // multi-receive buffers keep the minimum of their posting
  return post<Lock>(w);
}

template <class Lock>
ssize_t srx::post_tag(const iovec* iov, void** desc, size_t count, fi_addr_t src, uint64_t tag,
                      uint64_t ignore, void* context, uint64_t flags) noexcept {
  if (flags & FI_MULTI_RECV) {
    WEFT_WARN(prov_, FI_LOG_EP_DATA, "FI_MULTI_RECV is not supported on tagged receives");
    return to_fi(errc::badflags);
  }
  if ((flags & FI_DISCARD) && !(flags & (FI_PEEK | FI_CLAIM))) {
    WEFT_WARN(prov_, FI_LOG_EP_DATA, "FI_DISCARD goes with FI_PEEK or FI_CLAIM");
    return to_fi(errc::inval);
  }
  if ((flags & FI_CLAIM) && !context) {
    WEFT_WARN(prov_, FI_LOG_EP_DATA, "FI_CLAIM needs a struct fi_context as context");
    return to_fi(errc::inval);
  }
  // Peeks and discards ignore the buffers (fi_tagged(3)).
  if (flags & (FI_PEEK | FI_DISCARD)) count = 0;
  if (iov_refused(prov_, "tagged receive", iov, count, srx_entry::max_iov))
    return to_fi(errc::inval);
  if (!(flags & (FI_PEEK | FI_CLAIM)) && count <= 1) {
    ssize_t rc = post_one<Lock>(iov, desc, count, src, tag, ignore, context,
                                recv_tag | (flags & kept_flags), true);
    if (rc != to_fi(errc::inprogress)) return rc;
  }
  srx_entry w = describe(iov, desc, count, source_filter(src), context,
                         recv_tag | (flags & kept_flags));
  w.rx.tag = tag;
  w.ignore = ignore;
  w.tagged = true;
  if (flags & FI_PEEK) return peek<Lock>(w, flags);
  if (flags & FI_CLAIM) return claim<Lock>(w, flags);
  return post<Lock>(w);
}

template <class Lock>
ssize_t srx::post(srx_entry& w) noexcept {
  rx_queue started;
  {
    [[maybe_unused]] auto g = guard<Lock>();
    const bool multi = w.rx.flags & FI_MULTI_RECV;
    srx_entry* mine = nullptr;
    if (multi) {
      // Room first: a buffer that consumed messages must not then fail.
      if (posted_ >= size_) return to_fi(errc::again);
      if (!(mine = pool_.take())) return to_fi(errc::nomem);
    }
    bool done = false;
    while (!done) {
      fi_peer_rx_entry* u = match_unexpected(w, false);
      if (!u) break;
      rx_queue::unlink(u);
      --unexpected_;
      srx_entry& m = *srx_entry::from(u);
      if (multi) {
        done = carve(w, m, m.rx.msg_size);
      } else {
        attach(m, w);
        done = true;
      }
      if (m.state == srx_state::unexp_ready) {
        settle(m);
        m.state = srx_state::peer;
        started.push_back(u);
      } else {
        m.state = srx_state::matched_pending;  // queue_* will start it
      }
    }
    if (done) {
      if (mine) release(mine);
    } else {
      // Nothing consumed yet unless multi, which already holds its entry.
      if (!mine) {
        if (posted_ >= size_) return to_fi(errc::again);
        if (!(mine = pool_.take())) return to_fi(errc::nomem);
      }
      *mine = w;
      mine->rx.iov = mine->iov;
      mine->rx.desc = mine->desc;
      mine->state = srx_state::posted;
      (w.tagged ? posted_tag_ : posted_msg_).push_back(&mine->rx);
      ++posted_;
    }
  }
  start_all(started, false);
  return 0;
}

template <class Lock>
ssize_t srx::peek(const srx_entry& w, uint64_t flags) noexcept {
  if (cq_ && !cq_->has_room<Lock>()) return to_fi(errc::again);
  cq_entry c{};
  bool hit = false;
  fi_peer_rx_entry* drop = nullptr;
  {
    [[maybe_unused]] auto g = guard<Lock>();
    if (fi_peer_rx_entry* u = match_unexpected(w, true)) {
      srx_entry& m = *srx_entry::from(u);
      hit = true;
      uint64_t data_flag = m.rx.flags & FI_REMOTE_CQ_DATA;
      c = {w.rx.context,
           recv_tag | data_flag,
           m.rx.msg_size,
           nullptr,
           data_flag ? m.rx.cq_data : 0,
           m.rx.tag,
           m.rx.addr,
           0};
      if (flags & (FI_DISCARD | FI_CLAIM)) {
        rx_queue::unlink(u);
        --unexpected_;
      }
      if (flags & FI_DISCARD) {
        m.state = srx_state::peer;
        drop = u;
      } else if (flags & FI_CLAIM) {
        // The paired FI_CLAIM receive finds it by its fi_context.
        m.state = srx_state::claimed;
        m.rx.context = w.rx.context;
        claimed_.push_back(u);
        ++claimed_count_;
      }
    }
  }
  if (!hit) {
    complete_error<Lock>(w.rx.context, recv_tag, w.rx.tag, FI_ENOMSG);
    return 0;
  }
  if (drop) drop->srx->peer_ops->discard_tag(drop);
  complete<Lock>(c);
  return 0;
}

template <class Lock>
ssize_t srx::claim(const srx_entry& w, uint64_t flags) noexcept {
  const bool discard = flags & FI_DISCARD;
  if (discard && cq_ && !cq_->has_room<Lock>()) return to_fi(errc::again);
  fi_peer_rx_entry* u;
  {
    [[maybe_unused]] auto g = guard<Lock>();
    void* ctx = w.rx.context;
    u = claimed_.find([&](const srx_entry* e) { return e->rx.context == ctx; });
    if (!u) {
      WEFT_WARN(prov_, FI_LOG_EP_DATA, "FI_CLAIM with context %p: no message claimed by it", ctx);
      return to_fi(errc::inval);
    }
    rx_queue::unlink(u);
    --claimed_count_;
    srx_entry& m = *srx_entry::from(u);
    m.state = srx_state::peer;
    if (!discard) {
      attach(m, w);
      settle(m);
    }
  }
  if (!discard) {
    u->srx->peer_ops->start_tag(u);
    return 0;
  }
  uint64_t tag = u->tag;
  fi_addr_t addr = u->addr;
  u->srx->peer_ops->discard_tag(u);
  complete<Lock>({w.rx.context, recv_tag, 0, nullptr, 0, tag, addr, 0});
  return 0;
}

template <class Lock>
ssize_t srx::cancel(void* context) noexcept {
  if (!context) return to_fi(errc::noent);  // fi_endpoint(3): no context, no cancel
  if (cq_ && !cq_->has_room<Lock>()) return to_fi(errc::again);
  uint64_t flags, tag;
  {
    [[maybe_unused]] auto g = guard<Lock>();
    auto same = [&](const srx_entry* e) { return e->rx.context == context; };
    fi_peer_rx_entry* p = posted_msg_.find(same);
    if (!p) p = posted_tag_.find(same);
    if (!p) return to_fi(errc::noent);
    rx_queue::unlink(p);
    --posted_;
    flags = p->flags & report_mask;
    tag = p->tag;
    release(srx_entry::from(p));
  }
  complete_error<Lock>(context, flags, tag, FI_ECANCELED);
  return 0;
}

template <class Lock>
size_t srx::cancel_all() noexcept {
  size_t n = 0;
  for (;;) {
    void* context;
    uint64_t flags, tag;
    {
      // One at a time: the completion is written without the lock held.
      [[maybe_unused]] auto g = guard<Lock>();
      fi_peer_rx_entry* p = posted_msg_.front();
      fi_peer_rx_entry* t = posted_tag_.front();
      if (!p) p = t;
      if (!p) break;
      rx_queue::unlink(p);
      --posted_;
      context = p->context;
      flags = p->flags & report_mask;
      tag = p->tag;
      release(srx_entry::from(p));
    }
    complete_error<Lock>(context, flags, tag, FI_ECANCELED);
    ++n;
  }
  return n;
}

template <class Lock>
ssize_t srx::rx_size_left() noexcept {
  [[maybe_unused]] auto g = guard<Lock>();
  return static_cast<ssize_t>(std::min<size_t>(size_ - posted_, SSIZE_MAX));
}

template <class Lock>
void srx::shutdown() noexcept {
  rx_queue dropped;
  {
    [[maybe_unused]] auto g = guard<Lock>();
    for (rx_queue* q : {&posted_msg_, &posted_tag_}) {
      while (fi_peer_rx_entry* e = q->front()) {
        rx_queue::unlink(e);
        release(srx_entry::from(e));
      }
    }
    posted_ = 0;
    for (rx_queue* q : {&unexp_msg_, &unexp_tag_, &claimed_}) {
      for (fi_peer_rx_entry* e = q->front(); e && e != q->end();) {
        fi_peer_rx_entry* next = e->next;
        srx_entry& m = *srx_entry::from(e);
        if (m.state != srx_state::unexp_pending) {
          if (m.state == srx_state::claimed)
            --claimed_count_;
          else
            --unexpected_;
          rx_queue::unlink(e);
          m.state = srx_state::peer;
          dropped.push_back(e);
        }
        e = next;
      }
    }
  }
  start_all(dropped, true);
}

template <class Lock>
srx_stats srx::stats() noexcept {
  [[maybe_unused]] auto g = guard<Lock>();
  return {posted_, unexpected_, claimed_count_, pool_.capacity(), pool_.available()};
}

#define WEFT_SRX_INSTANTIATE(L)                                                                  \
  template ssize_t srx::post_msg<L>(const iovec*, void**, size_t, fi_addr_t, void*,              \
                                    uint64_t) noexcept;                                          \
  template ssize_t srx::post_tag<L>(const iovec*, void**, size_t, fi_addr_t, uint64_t, uint64_t, \
                                    void*, uint64_t) noexcept;                                   \
  template ssize_t srx::cancel<L>(void*) noexcept;                                               \
  template size_t srx::cancel_all<L>() noexcept;                                              \
  template ssize_t srx::rx_size_left<L>() noexcept;                                              \
  template void srx::shutdown<L>() noexcept;                                                     \
  template srx_stats srx::stats<L>() noexcept;                                                   \
  template void srx::complete_error<L>(void*, uint64_t, uint64_t, int) noexcept;

WEFT_SRX_INSTANTIATE(null_lock)
WEFT_SRX_INSTANTIATE(mutex_lock)
WEFT_SRX_INSTANTIATE(handoff_lock)

}  // namespace weft::util
