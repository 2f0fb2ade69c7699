// SPDX-License-Identifier: MIT
// weft — the receive-matching engine: the one shared receive context every
// provider matches through, and the owner side of the peer SRX (fi_peer(3)).
//
// Two sides meet here:
//  - the endpoint (the application's fi_recv / fi_trecv / *msg calls) posts
//    receives with post_msg / post_tag and cancels them with cancel. The
//    engine itself writes the completions that no message produces: peek
//    hits and misses (FI_ENOMSG), claim-discards, cancels (FI_ECANCELED);
//  - a provider that received a message (the "peer": shm, tcp, or the owner
//    itself running alone) asks for a match with get_msg / get_tag, through
//    a fid_peer_srx (add_peer) whose owner_ops land in this class.
//
// Contract with the peer (beyond fi_peer(3) and include/rdma/providers/fi_peer.h):
//  * get_*: 0 hands back a posted receive: iov/desc/count/context/flags are
//    the receive's (a slice of the buffer for FI_MULTI_RECV), addr/msg_size/
//    tag the message's. -FI_ENOENT hands back a fresh entry for an unexpected
//    message: the peer sets peer_context, and cq_data plus FI_REMOTE_CQ_DATA
//    in flags if the message carries data (the one exception to "only the
//    owner writes the fields"), then calls queue_* (or free_entry to drop the
//    message). From get_* to queue_*, next/prev belong to the engine: the
//    entry already holds the message's place in arrival order, so a receive
//    posted in between still takes messages in order. -FI_ENOMEM: no entry.
//  * queue_* may call start_* on the same entry before it returns, when a
//    receive matched the message between get_* and queue_*: the peer must not
//    hold, across queue_*, a lock that its start_* takes.
//  * start_* (and a 0 from get_*): the entry describes a posted buffer; the
//    peer moves the data (truncating to the buffer, with an FI_ETRUNC error
//    completion) and writes the completion: op_context = context, flags =
//    flags & (FI_MSG | FI_TAGGED | FI_RECV | FI_MULTI_RECV | FI_REMOTE_CQ_DATA),
//    buf = iov[0].iov_base, tag, cq_data, src = addr; then free_entry.
//    FI_COMPLETION in flags is the posting's, for FI_SELECTIVE_COMPLETION.
//  * discard_*: drop the message, no completion (the engine writes whatever
//    completion the application's request needs), then free_entry.
//  * Ownership passes on start_* / discard_* whatever they return; while the
//    peer holds an entry, next/prev are the peer's.
//  * free_entry on a queued entry (before start_* / discard_*) withdraws the
//    message: a peer endpoint closing gives back what it queued.
//  * The engine calls start_* / discard_* without holding its lock.
#pragma once

#include "core/hot.hpp"
#include "util/cq.hpp"
#include "util/fast_mutex.hpp"
#include "util/lock.hpp"

#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_peer.h>

#include <cstddef>
#include <memory>
#include <new>
#include <mutex>
#include <type_traits>
#include <vector>

namespace weft::util {

// The matching rules. A receive's source FI_ADDR_UNSPEC takes any sender
// (the endpoint passes FI_ADDR_UNSPEC unless FI_DIRECTED_RECV is on).
inline bool srx_addr_match(fi_addr_t want, fi_addr_t have) noexcept {
  return want == FI_ADDR_UNSPEC || want == have;
}
// fi_tagged(3): send_tag & ~ignore == recv_tag & ~ignore.
inline bool srx_tag_match(uint64_t want, uint64_t ignore, uint64_t have) noexcept {
  return ((want ^ have) & ~ignore) == 0;
}
// A message's source the receiver could not name: its sender was not in the
// AV. weft's providers report FI_ADDR_NOTAVAIL (what FI_SOURCE completions
// say); fi_peer(3)'s foreach_unspec_addr speaks of FI_ADDR_UNSPEC.
inline bool srx_unknown_source(fi_addr_t a) noexcept {
  return a == FI_ADDR_NOTAVAIL || a == FI_ADDR_UNSPEC;
}

// Where an entry is; only the engine reads it.
enum class srx_state : uint8_t {
  free,             // in the pool
  posted,           // on a posted queue
  unexp_pending,    // on an unexpected queue, the peer has not called queue_* yet
  unexp_ready,      // on an unexpected queue, queued by the peer
  matched_pending,  // matched by a receive before queue_*: queue_* starts it
  claimed,          // taken by FI_PEEK | FI_CLAIM, waiting for its FI_CLAIM receive
  peer,             // handed to the peer until free_entry
};

// One posted receive or unexpected message. The peer's view comes first, so
// the fi_peer_rx_entry* the peer holds converts back (pointer-interconvertible).
struct srx_entry {
  static constexpr size_t max_iov = 4;

  fi_peer_rx_entry rx;
  uint64_t ignore;      // tagged posted receives: bits of tag that do not count;
                        // multi-receive buffers: the minimum left when posted
  uint64_t post_flags;  // flags of the receive matched to a message; merged into
                        // rx.flags under the lock once the peer is done with them
  srx_state state;
  bool tagged;
  iovec iov[max_iov];   // rx.iov points here when a buffer is attached
  void* desc[max_iov];  // rx.desc likewise

  static srx_entry* from(fi_peer_rx_entry* e) noexcept { return reinterpret_cast<srx_entry*>(e); }
};
static_assert(std::is_standard_layout_v<srx_entry>);
static_assert(sizeof(srx_entry) <= 256, "an unexpected message costs one small entry");

// Intrusive doubly linked list over fi_peer_rx_entry::next/prev, circular
// around a sentinel: O(1) append and unlink, no allocation.
class rx_queue {
 public:
  rx_queue() noexcept { head_.next = head_.prev = &head_; }
  rx_queue(const rx_queue&) = delete;
  rx_queue& operator=(const rx_queue&) = delete;

  bool empty() const noexcept { return head_.next == &head_; }
  fi_peer_rx_entry* front() noexcept { return empty() ? nullptr : head_.next; }
  fi_peer_rx_entry* end() noexcept { return &head_; }
  void push_back(fi_peer_rx_entry* e) noexcept {
    e->prev = head_.prev;
    e->next = &head_;
    head_.prev->next = e;
    head_.prev = e;
  }
  static void unlink(fi_peer_rx_entry* e) noexcept {
    e->prev->next = e->next;
    e->next->prev = e->prev;
    e->next = e->prev = nullptr;
  }
  // The oldest entry satisfying `pred`, or nullptr.
  template <class P>
  fi_peer_rx_entry* find(P&& pred) noexcept {
    for (fi_peer_rx_entry* e = head_.next; e != &head_; e = e->next)
      if (pred(srx_entry::from(e))) return e;
    return nullptr;
  }

 private:
  fi_peer_rx_entry head_{};
};

// Entries, grown in chunks and reused through a free list: the match path
// allocates only when every entry is in use. A chunk's storage is reserved
// whole but its entries are handed out (first touched) one by one, so the
// thousand entries every endpoint reserves for its posted receives cost
// memory only as they are used (an entry is about 240 bytes).
class srx_pool {
 public:
  explicit srx_pool(size_t chunk) noexcept : chunk_(chunk ? chunk : 1) {}
  // An entry (the caller assigns every field); nullptr when memory is
  // exhausted.
  srx_entry* take() noexcept {
    if (fi_peer_rx_entry* e = free_) {
      free_ = e->next;
      --available_;
      return srx_entry::from(e);
    }
    if (!carve_left_ && !grow(chunk_)) return nullptr;
    --carve_left_;
    --available_;
    return new (carve_++) srx_entry();  // zeroed, as the whole chunk was before
  }
  void put(srx_entry* e) noexcept {
    e->state = srx_state::free;
    e->rx.next = free_;
    free_ = &e->rx;
    ++available_;
  }
  bool grow(size_t n) noexcept;
  size_t capacity() const noexcept { return capacity_; }
  size_t available() const noexcept { return available_; }

 private:
  struct alignas(srx_entry) storage {
    std::byte b[sizeof(srx_entry)];
  };
  static_assert(std::is_trivially_destructible_v<srx_entry>);
  size_t chunk_;
  std::vector<std::unique_ptr<storage[]>> chunks_;  // uninitialised until carved
  storage* carve_ = nullptr;  // the newest chunk's first entry never handed out
  size_t carve_left_ = 0;
  fi_peer_rx_entry* free_ = nullptr;  // singly linked through next
  size_t capacity_ = 0;
  size_t available_ = 0;
};

struct srx_attr {
  const fi_provider* prov = nullptr;          // names the provider in log lines
  cq* rx_cq = nullptr;                        // for peek, claim-discard and cancel completions
  fi_threading threading = FI_THREAD_DOMAIN;  // picks the peer faces' lock policy
  // Set: the handoff policy instead (the domain's handoff, lock.hpp), which
  // the engine's guards enter.
  class handoff* handoff = nullptr;
  lock_kind locks() const noexcept {
    if (handoff) return lock_kind::handoff;
    return shared_objects_need_lock(threading) ? lock_kind::mutex : lock_kind::none;
  }
  size_t size = 0;                            // most receives posted at once; 0: no limit
  // Entries for `size` receives made at construction (up to a bound), so
  // posting never allocates; false: grown in chunks as used (an engine of
  // many, each of which may never be used: lnx endpoints).
  bool prealloc = true;
  size_t min_multi_recv = 64;                 // FI_OPT_MIN_MULTI_RECV
  bool directed_recv = false;                 // FI_DIRECTED_RECV: honour a receive's src_addr
  // The AV whose addresses receives name. Messages arrive named as
  // completions report them (user ids, FI_AV_USER_ID, where set): a directed
  // receive's src_addr is turned into that form when posted. Null: addresses
  // are compared as they are (an owner whose peers report its own addresses).
  const class av* av = nullptr;
  size_t chunk = 256;                         // entries added when the pool runs dry
  // The owner makes every call into the engine under a lock of its own (a
  // provider endpoint whose private engine this is): the engine takes none
  // of its own, and completions still take the CQ's. Spares a locked
  // endpoint two lock pairs per delivered message.
  bool serialized = false;
};

struct srx_stats {
  size_t posted, unexpected, claimed, pool_capacity, pool_available;
};

class srx {
 public:
  explicit srx(const srx_attr& attr);
  ~srx();
  srx(const srx&) = delete;
  srx& operator=(const srx&) = delete;

  // A fid_peer_srx for one peer (fi_peer_srx_context::srx): owner_ops lead
  // here under the lock policy of attr.threading; peer_ops points at a table
  // the face owns, filled from `ops` (or with stubs that drop the entry) and
  // which the peer may overwrite or repoint. Control path; lives as long as
  // the engine. Throws std::bad_alloc.
  fid_peer_srx* add_peer(const fi_ops_srx_peer* ops = nullptr, void* context = nullptr);

  // ---- endpoint side: Lock must be the policy of attr.threading ----
  // fi_recv / fi_recvv / fi_recvmsg. flags: FI_MULTI_RECV (one iov),
  // FI_COMPLETION (passed to the peer). -FI_EAGAIN when `size` are posted.
  template <class Lock>
  ssize_t post_msg(const iovec* iov, void** desc, size_t count, fi_addr_t src, void* context,
                   uint64_t flags) noexcept;
  // fi_trecv / fi_trecvv / fi_trecvmsg, with FI_PEEK, FI_CLAIM, FI_DISCARD.
  template <class Lock>
  ssize_t post_tag(const iovec* iov, void** desc, size_t count, fi_addr_t src, uint64_t tag,
                   uint64_t ignore, void* context, uint64_t flags) noexcept;
  // The common receive, inline for the providers' single-buffer thunks: one
  // buffer (or none, count 0), flags only FI_COMPLETION besides FI_MSG or
  // FI_TAGGED | FI_RECV (the caller checks), and no unexpected message of
  // its kind waiting. The entry is filled in place, field by field: building
  // it on the stack and copying it in (what post() does for the general
  // case) costs twice the stores. -FI_EINPROGRESS, having done nothing, when
  // it is not that case: post_msg / post_tag then decide.
  // fi_recv / fi_trecv with the endpoint's default `flags`: post_one when
  // it applies (one buffer, no multi-receive, peek or claim, nothing
  // unexpected waiting), else post_msg / post_tag. Inline, for the callers'
  // per-message path (shm's and lnx's endpoints).
  template <class Lock>
  WEFT_ALWAYS_INLINE ssize_t post_single(void* buf, size_t len, void* desc, fi_addr_t src,
                                         uint64_t tag, uint64_t ignore, void* context,
                                         uint64_t flags, bool tagged) noexcept {
    iovec iov{buf, len};
    if (!(flags & (FI_MULTI_RECV | FI_PEEK | FI_CLAIM | FI_DISCARD)) && (buf || !len)) [[likely]] {
      const uint64_t kind = tagged ? recv_tag : recv_msg;
      ssize_t rc = post_one<Lock>(&iov, &desc, 1, src, tag, ignore, context,
                                  kind | (flags & (FI_COMPLETION | op_quiet)), tagged);
      if (rc != to_fi(errc::inprogress)) return rc;
    }
    return tagged ? post_tag<Lock>(&iov, &desc, 1, src, tag, ignore, context, flags)
                  : post_msg<Lock>(&iov, &desc, 1, src, context, flags);
  }
  template <class Lock>
  WEFT_ALWAYS_INLINE ssize_t post_one(const iovec* iov, void** desc, size_t count, fi_addr_t src,
                                      uint64_t tag, uint64_t ignore, void* context,
                                      uint64_t flags, bool tagged) noexcept {
    const fi_addr_t want = source_filter(src);
    [[maybe_unused]] auto g = guard<Lock>();
    if (!(tagged ? unexp_tag_ : unexp_msg_).empty()) return to_fi(errc::inprogress);
    if (posted_ >= size_) return to_fi(errc::again);
    srx_entry* e = pool_.take();
    if (!e) return to_fi(errc::nomem);
    e->rx.srx = nullptr;
    e->rx.addr = want;
    e->rx.tag = tag;
    e->rx.cq_data = 0;
    e->rx.flags = flags;
    e->rx.context = context;
    e->rx.count = count;
    e->rx.peer_context = nullptr;
    e->rx.owner_context = nullptr;
    e->rx.iov = e->iov;
    e->rx.desc = e->desc;
    if (count) {
      e->iov[0] = iov[0];
      e->desc[0] = desc ? desc[0] : nullptr;
      e->rx.msg_size = iov[0].iov_len;
    } else {
      e->rx.msg_size = 0;
    }
    e->ignore = ignore;
    e->post_flags = flags;
    e->state = srx_state::posted;
    e->tagged = tagged;
    (tagged ? posted_tag_ : posted_msg_).push_back(&e->rx);
    ++posted_;
    return 0;
  }
  // fi_cancel: the posted receive with this context gets an FI_ECANCELED
  // error completion. -FI_ENOENT when none is posted (fi_cancel answers 0).
  template <class Lock>
  ssize_t cancel(void* context) noexcept;
  // Every posted receive gets an FI_ECANCELED error completion (message
  // receives first, then tagged ones, each in post order): fi_shutdown, or a
  // connection-oriented endpoint losing its peer. Returns how many.
  // Unexpected messages stay queued.
  template <class Lock>
  size_t cancel_all() noexcept;
  template <class Lock>
  ssize_t rx_size_left() noexcept;
  // Discards every queued unexpected and claimed message through its peer
  // and drops posted receives without completions: the owner calls it at
  // close, while the peers are still open. Messages a peer got from get_*
  // but has not queued stay the peer's.
  template <class Lock>
  void shutdown() noexcept;
  template <class Lock>
  srx_stats stats() noexcept;

  // ---- peer side (owner_ops; the owner provider may call these directly) ----
  template <class Lock>
  int get_msg(fid_peer_srx* face, const fi_peer_match_attr& attr, fi_peer_rx_entry** out) noexcept;
  template <class Lock>
  int get_tag(fid_peer_srx* face, const fi_peer_match_attr& attr, fi_peer_rx_entry** out) noexcept;
  template <class Lock>
  int queue_msg(fi_peer_rx_entry* e) noexcept {
    return queue<Lock>(e, false);
  }
  template <class Lock>
  int queue_tag(fi_peer_rx_entry* e) noexcept {
    return queue<Lock>(e, true);
  }
  template <class Lock>
  void free_entry(fi_peer_rx_entry* e) noexcept;
  // A peer endpoint closing takes back a message it queued, only if no
  // receive has taken it: true when withdrawn (the entry is released), false
  // when a receive matched it and its start_* / discard_* is running or
  // about to (free_entry cannot tell the two apart: it would release an
  // entry start_* is given).
  template <class Lock>
  bool withdraw(fi_peer_rx_entry* e) noexcept;
  template <class Lock>
  void foreach_unspec_addr(fid_peer_srx* face, fi_addr_t (*get_addr)(fi_peer_rx_entry*)) noexcept;

  // ---- sources that change after a message was queued ----
  // A message from a peer that was not in the AV when it arrived is queued
  // with an unknown source (srx_unknown_source: FI_ADDR_NOTAVAIL, as weft's
  // providers label it, or FI_ADDR_UNSPEC, as fi_peer(3) peers may). When the
  // AV changes, the provider gives each queued message its source again:
  // `source(entry)` answers the address the message's sender has now, or an
  // unknown one. Unexpected and claimed messages are relabelled under the
  // engine's lock, so a receive posted after this returns matches the new
  // labels. `all`: every queued message (after fi_av_remove, whose removed
  // peers' messages become unknown again); else only the unknown ones, and
  // nothing at all is scanned while none was queued (the common insert).
  template <class Lock, class F>
  void relabel(F&& source, bool all) noexcept {
    [[maybe_unused]] auto g = guard<Lock>();
    if (!all && !unknown_) return;
    size_t still = 0;
    for (rx_queue* q : {&unexp_msg_, &unexp_tag_, &claimed_}) {
      for (fi_peer_rx_entry* e = q->front(); e && e != q->end(); e = e->next) {
        if (all || srx_unknown_source(e->addr)) {
          fi_addr_t a = source(e);
          // An answer of "unknown" keeps the label the peer gave.
          if (!srx_unknown_source(a) || !srx_unknown_source(e->addr)) e->addr = a;
        }
        still += srx_unknown_source(e->addr);
      }
    }
    unknown_ = still;
  }

  // ---- the owner's own peer, fast path ----
  // A provider matching through an engine it owns, or through its owner's
  // engine when that is one of these (behind()), may take a posted receive
  // for a message directly: the oldest posted receive
  // that a message from `addr` with `tag` matches, off its queue and the
  // caller's until recycle(); nullptr when none does, or when the match is a
  // multi-receive buffer, and then get_* decides (it queues an unexpected
  // message or carves the buffer). The entry keeps the receive's fields:
  // rx.addr, msg_size and tag are not the message's.
  template <class Lock>
  srx_entry* take_posted(fi_addr_t addr, uint64_t tag, bool tagged) noexcept {
    [[maybe_unused]] auto g = guard<Lock>();
    rx_queue& q = tagged ? posted_tag_ : posted_msg_;
    fi_peer_rx_entry* p = q.front();
    if (!p) return nullptr;
    const srx_entry* f = srx_entry::from(p);
    // The oldest receive takes most messages; a scan only when it does not.
    if (!srx_addr_match(p->addr, addr) || (tagged && !srx_tag_match(p->tag, f->ignore, tag))) {
      fi_peer_match_attr a{addr, 0, tag};
      if (!(p = match_posted(a, tagged))) return nullptr;
    }
    if (p->flags & FI_MULTI_RECV) return nullptr;
    rx_queue::unlink(p);
    --posted_;
    srx_entry* e = srx_entry::from(p);
    e->state = srx_state::peer;
    return e;
  }
  // An entry from take_posted, done with.
  template <class Lock>
  void recycle(srx_entry* e) noexcept {
    [[maybe_unused]] auto g = guard<Lock>();
    release(e);
  }

  // Control path: before receives are posted, or between them.
  void set_cq(cq* c) noexcept { cq_ = c; }
  bool directed() const noexcept { return directed_; }  // srx_attr::directed_recv
  // The AV whose reported values name senders (srx_attr::av), given after
  // construction: an application's shared context learns it from its first
  // endpoint (srx_ctx::attach). Directed receives posted before it name
  // their source as the application gave it, and are translated now.
  template <class Lock>
  void name_sources_by(const class av* a) noexcept {
    [[maybe_unused]] auto g = guard<Lock>();
    av_ = a;
    if (!directed_ || !a) return;
    for (rx_queue* q : {&posted_msg_, &posted_tag_})
      for (fi_peer_rx_entry* e = q->front(); e && e != q->end(); e = e->next)
        if (e->addr != FI_ADDR_UNSPEC) e->addr = report(e->addr);
  }
  void set_min_multi_recv(size_t n) noexcept { min_multi_recv_ = n; }
  const fi_provider* provider() const noexcept { return prov_; }

  // The engine behind a face handed out by add_peer.
  static srx* of(fid_peer_srx* face) noexcept;
  // The engine behind `face` when it is one of this class's faces whose
  // owner_ops lock as a caller under threading model `t` would (the same
  // policy): a peer provider may then use the fast path (take_posted,
  // recycle) on its owner's engine as on its own. Null otherwise (another
  // owner, or another lock policy).
  static srx* behind(fid_peer_srx* face, lock_kind k) noexcept;
  // The engine behind `face` when it is one of this class's faces, whatever
  // its policy; null for another owner's.
  static srx* engine_behind(fid_peer_srx* face) noexcept;

 private:
  // One peer's fid_peer_srx, with the peer_ops table the owner provides.
  struct face : fid_peer_srx {
    srx* engine;
    fi_ops_srx_peer table;
  };
  struct null_guard {};
  static constexpr uint64_t recv_msg = FI_MSG | FI_RECV;
  static constexpr uint64_t recv_tag = FI_TAGGED | FI_RECV;
  static constexpr uint64_t report_mask = FI_MSG | FI_TAGGED | FI_RECV | FI_MULTI_RECV;
  static const fi_ops_srx_owner* owner_table(lock_kind k) noexcept;
  template <class Lock>
  auto guard() noexcept {
    if constexpr (std::is_same_v<Lock, null_lock>)
      return null_guard{};
    else if constexpr (std::is_same_v<Lock, handoff_lock>)
      return handoff::guard{*handoff_};  // nested (so cheap) when serialized
    else
      return serialized_ ? std::unique_lock<fast_mutex>{} : std::unique_lock<fast_mutex>{mutex_};
  }

  // The source a receive posted with src_addr `src` accepts: FI_ADDR_UNSPEC
  // (anyone) without FI_DIRECTED_RECV, else src as messages name it.
  fi_addr_t source_filter(fi_addr_t src) const noexcept {
    if (!directed_) return FI_ADDR_UNSPEC;
    return av_ && src != FI_ADDR_UNSPEC ? report(src) : src;
  }
  fi_addr_t report(fi_addr_t src) const noexcept;  // av_->report, out of line (av.hpp)
  template <class Lock>
  int queue(fi_peer_rx_entry* e, bool tagged) noexcept;
  template <class Lock>
  ssize_t post(srx_entry& want) noexcept;
  template <class Lock>
  ssize_t peek(const srx_entry& want, uint64_t flags) noexcept;
  template <class Lock>
  ssize_t claim(const srx_entry& want, uint64_t flags) noexcept;
  template <class Lock>
  int get(fid_peer_srx* face, const fi_peer_match_attr& attr, fi_peer_rx_entry** out,
          bool tagged) noexcept;

  // Under the lock. The oldest posted receive the message `a` matches.
  fi_peer_rx_entry* match_posted(const fi_peer_match_attr& a, bool tagged) noexcept;
  // Under the lock. The oldest unexpected message `want` matches; `ready_only`
  // skips messages the peer has not queued yet (peeks see only those).
  fi_peer_rx_entry* match_unexpected(const srx_entry& want, bool ready_only) noexcept;
  // Moves the next piece of multi-receive buffer `m` into `slice`; true when
  // that releases `m` (what is left is below min_multi_recv).
  bool carve(srx_entry& m, srx_entry& slice, size_t msg_size) noexcept;
  // Gives `e` the buffer, context and flags of the receive `want`.
  static void attach(srx_entry& e, const srx_entry& want) noexcept;
  // rx.flags of a matched message: the receive's, and the peer's FI_REMOTE_CQ_DATA.
  static void settle(srx_entry& e) noexcept {
    e.rx.flags = e.post_flags | (e.rx.flags & FI_REMOTE_CQ_DATA);
  }
  void release(srx_entry* e) noexcept { pool_.put(e); }
  // Hands entries collected under the lock to their peers' start_* (or discard_*).
  static void start_all(rx_queue& q, bool discard) noexcept;
  template <class Lock>
  void complete(const cq_entry& c) noexcept;
  template <class Lock>
  void complete_error(void* context, uint64_t flags, uint64_t tag, int err) noexcept;

  const fi_provider* prov_;
  cq* cq_;
  size_t size_;
  size_t min_multi_recv_;
  bool directed_;
  const class av* av_;
  const fi_ops_srx_owner* owner_ops_;
  const bool serialized_;  // srx_attr::serialized
  class handoff* handoff_;  // srx_attr::handoff
  fast_mutex mutex_;
  srx_pool pool_;
  rx_queue posted_msg_, posted_tag_;
  rx_queue unexp_msg_, unexp_tag_;
  rx_queue claimed_;
  size_t posted_ = 0, unexpected_ = 0, claimed_count_ = 0;
  // Messages queued with an unknown source since the last relabel counted
  // them: an upper bound (they are not counted out as receives take them),
  // so an insert scans only while some may be waiting.
  size_t unknown_ = 0;
  std::vector<std::unique_ptr<face>> faces_;
  fast_mutex faces_mutex_;  // add_peer's
};

}  // namespace weft::util
