// SPDX-License-Identifier: MIT
// weft — the completion queue every provider uses.
//
// Completions live in a ring of internal entries sized at open (never grown,
// never dropped: a provider checks room before it starts an operation that
// will complete). Errors go to a side queue, with a marker in the ring so that
// fi_cq_read answers -FI_EAVAIL exactly when the oldest completion is an error.
// The read path is instantiated per entry format and lock policy; the ops table
// of the right instantiation is installed at open.
//
// A peer CQ (fi_peer(3): fi_cq_open with FI_PEER and a fi_peer_cq_context)
// is the same object with another ops table. Providers write into it as into
// any CQ; the write takes the branch it already has for rare cases (the
// `divert_` word, which also carries trigger claims) and hands the completion
// straight to the owner's fid_peer_cq (owner_ops->write / writeerr): one
// write into the owner, no copy here (an owner that is util's own,
// cq_forward, is written into directly, below, and endpoints bound to the
// peer CQ may write into its CQ themselves: write_target). Only when the
// owner answers -FI_EAGAIN
// (its CQ is full) does the completion wait in this CQ's ring, and every
// later one behind it, so the owner sees them in order; the owner's
// fi_cq_read(cq, NULL, 0), which drives progress, hands them over. A full
// ring then pushes back on the provider through has_room, as for any CQ.
// Reading a peer CQ any other way is -FI_ENOSYS.
#pragma once

#include "core/hot.hpp"
#include "util/domain.hpp"
#include "util/fast_mutex.hpp"
#include "util/lock.hpp"
#include "util/object.hpp"
#include "util/progress.hpp"
#include "util/wait.hpp"
#include "util/wait_set.hpp"

#include <rdma/fi_eq.h>
#include <rdma/providers/fi_peer.h>

#include <atomic>
#include <deque>
#include <memory>
#include <vector>

namespace weft::util {

// One completion as providers write it; 64 bytes, one cache line.
struct cq_entry {
  void* op_context;
  uint64_t flags;
  size_t len;
  void* buf;
  uint64_t data;
  uint64_t tag;
  fi_addr_t src;
  uint64_t error;  // nonzero: a marker for the next entry of the error queue
};
static_assert(sizeof(cq_entry) == 64);

class cq : public fid_object<cq, fid_cq> {
 public:
  static int open(domain& dom, fi_cq_attr* attr, fid_cq** out, void* context) noexcept;
  cq(domain& dom, const fi_cq_attr& attr, void* context);
  ~cq() override;

  // ---- producer side (providers), under the domain's lock policy ----
  template <class Lock>
  bool has_room(size_t n = 1) noexcept {
    [[maybe_unused]] auto g = guard<Lock>();
    return tail_ - head_ + n <= mask_ + 1;
  }
  // Appends a completion; false (and nothing written) when the ring is full.
  template <class Lock>
  WEFT_ALWAYS_INLINE bool write(const cq_entry& e) noexcept {
    if (uint32_t d = divert_.load(std::memory_order_acquire)) [[unlikely]]
      return write_diverted<Lock>(e, d);
    {
      [[maybe_unused]] auto g = guard<Lock>();
      if (tail_ - head_ > mask_) return false;
      ring_[tail_ & mask_] = e;
      ++tail_;
    }
    wake();
    return true;
  }
  // Queues an error completion (err_data is copied); false if out of room.
  template <class Lock>
  bool write_error(const fi_cq_err_entry& e) noexcept {
    if (uint32_t d = divert_.load(std::memory_order_acquire)) [[unlikely]] {
      if ((d & claim_mask) && domain_->triggers().claim(e.op_context, true)) return true;
      if (d & to_owner) return write_error_to_owner<Lock>(e);
    }
    bool ok;
    {
      [[maybe_unused]] auto g = guard<Lock>();
      ok = push_error(e);
    }
    if (ok) wake();
    return ok;
  }

  // Deferred transfers in flight whose completion lands here (trigger.hpp):
  // while any is, each write first lets the trigger engine claim it (count
  // its completion counter, and keep it off this CQ unless the request
  // asked for FI_COMPLETION). One load and a branch otherwise.
  void add_claim() noexcept { divert_.fetch_add(1, std::memory_order_acq_rel); }
  void drop_claim() noexcept { divert_.fetch_sub(1, std::memory_order_acq_rel); }

  // Where endpoints bound to this CQ register their progress hooks: its
  // own list, or, for a peer CQ whose owner is util's and asked for it
  // (cq_forward::share_progress), the owner's CQ's, so that reading the
  // owner drives the endpoint with no read of this CQ between.
  progress_list& progress() noexcept { return *hooks_; }
  // A file descriptor whose readiness means progress may complete something.
  errc add_wait_fd(int fd) noexcept;
  void remove_wait_fd(int fd) noexcept;
  domain& dom() const noexcept { return *domain_; }
  fi_cq_format format() const noexcept { return format_; }
  // Whether a read would return something now (entries or an error).
  // (Under the handoff policy writers hold the domain's handoff, not the
  // mutex: so does this look.)
  bool has_events() noexcept {
    if (domain_->locks() == lock_kind::handoff) {
      handoff::guard g{domain_->handoff()};
      return head_ != tail_;
    }
    std::lock_guard g{mutex_};
    return head_ != tail_;
  }

  // ---- consumer side (the ops table) ----
  template <class Lock, fi_cq_format F>
  WEFT_ALWAYS_INLINE ssize_t read(void* buf, size_t count, fi_addr_t* src) noexcept;
  template <class Lock>
  ssize_t readerr(fi_cq_err_entry* buf, uint64_t flags) noexcept;
  template <class Lock, fi_cq_format F>
  ssize_t sread(void* buf, size_t count, fi_addr_t* src, const void* cond, int timeout) noexcept;
  int signal() noexcept;
  const char* strerror(int prov_errno, const void* err_data, char* buf, size_t len) noexcept;

  // ---- peer CQ: fi_cq_read(NULL, 0) from the owner ----
  template <class Lock>
  ssize_t peer_progress(const void* buf, size_t count) noexcept;
  // The owner's CQ, or null for a CQ the application reads.
  fid_peer_cq* owner() const noexcept { return owner_; }
  // The CQ an endpoint bound to this one writes its completions and asks
  // for room in: this one, or, for a peer CQ whose owner is util's own
  // (cq_forward) and takes the same lock policy, the owner's CQ itself
  // (fi_ep_bind, ep_bindings). No copy, no call and no queue between: when
  // that CQ is full the endpoint holds back as it would on its own CQ.
  cq* write_target() noexcept { return direct_target_ ? direct_target_ : this; }

  int control(int command, void* arg);
  int close();

  // Bindings to a wait set: the set watches this CQ's wait fd.
  wait_fd* waiter() noexcept { return wait_.is_open() ? &wait_ : nullptr; }
  // Someone may be asleep on this CQ now: a thread in fi_cq_sread, a wait
  // set holding it, or an application given its fd. Providers whose data
  // arrives without a system call wake such a sleeper through an fd of theirs.
  bool may_sleep() const noexcept { return signal_on_write_.load(std::memory_order_seq_cst) != 0; }

 private:
  template <class Lock>
  auto guard() noexcept {
    if constexpr (std::is_same_v<Lock, null_lock>)
      return null_guard{};
    else if constexpr (std::is_same_v<Lock, handoff_lock>)
      return handoff::guard{domain_->handoff()};
    else
      return std::unique_lock<fast_mutex>{mutex_};
  }
  struct null_guard {};
  // FI_PEER, at open: an owner that is a cq_forward is written straight into.
  void forward_to(fid_peer_cq& owner) noexcept;

  bool push_error(const fi_cq_err_entry& e) noexcept;
  // Hands queued completions to the owner, oldest first, until the ring is
  // empty or the owner asks to wait (-FI_EAGAIN).
  template <class Lock>
  void flush_to_owner() noexcept;
  // write() when divert_ is set: a trigger claim, else the owner.
  template <class Lock>
  bool write_diverted(const cq_entry& e, uint32_t d) noexcept;
  template <class Lock>
  bool write_error_to_owner(const fi_cq_err_entry& e) noexcept;
  WEFT_ALWAYS_INLINE void wake() noexcept {
    if (signal_on_write_.load(std::memory_order_relaxed)) wake_slow();
  }
  void wake_slow() noexcept;

  struct error_record {
    fi_cq_err_entry entry;
    std::vector<uint8_t> data;
  };

  ref<domain> domain_;
  fi_cq_format format_;
  fi_wait_obj wait_obj_;
  std::unique_ptr<cq_entry[]> ring_;
  uint64_t mask_ = 0;
  uint64_t head_ = 0;
  uint64_t tail_ = 0;
  // fi_cq_read calls in a row that found nothing. A thread polling an empty
  // CQ waits for another thread or process; past idle_yield_reads it gives
  // up the core once, so with more busy threads than cores the one it waits
  // for gets to run (docs/decisions.md). Under the CQ's lock.
  uint32_t idle_reads_ = 0;
  static constexpr uint32_t idle_yield_reads = 512;
  std::deque<error_record> errors_;
  size_t errors_taken_ = 0;      // errors read ahead of their ring marker
  std::vector<uint8_t> err_buf_;  // err_data returned to callers who gave none
  fast_mutex mutex_;
  progress_list progress_;
  wait_fd wait_;
  // Writers signal the wait object only when someone can be waiting on it:
  // a thread in sread, or an application holding the fd (FI_GETWAIT).
  std::atomic<int> signal_on_write_{0};
  // Non-zero sends writes the slow way: the count of trigger claims (see
  // add_claim) in the low bits, and to_owner for a peer CQ.
  static constexpr uint32_t to_owner = 1u << 31;
  static constexpr uint32_t claim_mask = to_owner - 1;
  std::atomic<uint32_t> divert_{0};
  std::atomic<bool> fd_exported_{false};
  std::atomic<bool> signaled_{false};
  mutex_cond export_cond_;  // FI_WAIT_MUTEX_COND: recursive, see wait.hpp
  fid_peer_cq* owner_ = nullptr;  // FI_PEER: where completions go
  // FI_PEER with an owner that is util's own (cq_forward): its CQ, written
  // through the owner's lock policy, and the flag a refusal sets.
  cq* fwd_target_ = nullptr;
  bool (*fwd_write_)(cq& target, const cq_entry& e) noexcept = nullptr;
  std::atomic<bool>* fwd_refused_ = nullptr;
  // fwd_target_ again when it takes this CQ's lock policy (write_target).
  cq* direct_target_ = nullptr;
  progress_list* hooks_ = &progress_;  // progress()
  std::mutex flush_mutex_;        // one flusher at a time keeps the owner's order
  wait_set_binding wait_set_;  // FI_WAIT_SET
  friend wait_member cq_wait_member(struct fid* f) noexcept;
  poll_links poll_links_;  // last: leaves every poll set first
};

// An owner CQ that is util's own: lnx's, over its cores' peer CQs. A
// fid_peer_cq whose owner_ops is forward_ops<Lock>() (Lock: the target's
// policy) writes into `target`, and sets `refused` when it is full (the
// owner then reads every peer CQ until none holds a completion back). A
// peer CQ of util whose owner is one, of its own lock policy, gives the
// endpoints bound to it the target itself to write into (write_target);
// of another policy, it writes each completion straight into the target
// (cq::write_diverted): one call with the entry as it is, instead of
// owner_ops->write's eight arguments and the entry rebuilt on the other
// side. Any other owner gets owner_ops, as fi_peer(3) says.
//
// With share_progress (set by the owner before the peer CQ's open), a util
// peer CQ of the same lock policy as the target registers the hooks of the
// endpoints bound to it on the target's progress list (cq::progress), and
// says so in progress_shared: reading the target then drives those
// endpoints, and the owner need not read the peer CQ for that (only to hand
// over what a full target refused).
struct cq_forward : fid_peer_cq {
  cq* target = nullptr;
  std::atomic<bool>* refused = nullptr;
  bool share_progress = false;
  bool progress_shared = false;
  fi_peer_cq_context ctx{sizeof(fi_peer_cq_context), nullptr};  // ctx.cq: this
  template <class Lock>
  static fi_ops_cq_owner* forward_ops() noexcept;
};

}  // namespace weft::util
