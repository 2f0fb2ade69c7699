// SPDX-License-Identifier: MIT
// weft — triggered operations and deferred work (fi_trigger(3)), once for
// every provider.
//
// A transfer posted with FI_TRIGGER (its context a fi_triggered_context of
// type FI_TRIGGER_THRESHOLD), or a fi_deferred_work queued on the domain
// with fi_control(FI_QUEUE_WORK), becomes an entry of the domain's
// trigger_engine: a copy of the call (the message and its iov / rma_iov /
// ioc arrays) waiting for a counter of the domain to reach a threshold.
//
// Crossing a threshold only marks the engine ready. Counters are advanced
// by providers from inside their progress, under endpoint locks, and
// issuing a transfer there would take an endpoint lock again; so cntr::add
// costs one load and a branch while nothing waits on the counter (its
// trigger_at is UINT64_MAX) and sets a flag otherwise. The ready work is
// issued by fire(), which runs where no provider lock is held: at the end
// of manual progress (progress_list::run: fi_cq_read, fi_cntr_read,
// fi_cntr_wait, ...), after each pass of the automatic-progress thread,
// in fi_cntr_add / fi_cntr_set, and when the work is queued. It issues
// through the endpoint's own ops table (the call without FI_TRIGGER), in
// threshold order per counter, ties in submission order; a call answering
// -FI_EAGAIN stays first in line and is retried at the next of those
// points.
//
// Provider endpoints intercept FI_TRIGGER in their *msg calls (one
// unlikely branch on a flag they inspect anyway) and hand the call here
// with their trigger_site. Deferred data transfers reach the engine the
// same way: FI_QUEUE_WORK calls the endpoint's *msg call with FI_TRIGGER
// while this thread is queuing that request, so the endpoint, its domain
// and its capability are checked in one place.
#pragma once

#include "core/errc.hpp"

#include <rdma/fi_trigger.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace weft::util {

// Internal operation flag (a provider-specific bit): a deferred transfer
// whose request did not ask for FI_COMPLETION. fi_trigger(3): its endpoint
// reports nothing, neither on its CQ (trigger_engine::claim drops the
// entry) nor on its counters, unless the counter is the request's
// completion_cntr (the engine counts that one). Providers carry the bit
// with the operation (transmit entries, posted receives) and skip their
// endpoint counters for it: counted().
inline constexpr uint64_t op_quiet = 1ULL << 62;

class cntr;

// The endpoint counter `c` an operation with `flags` updates: none for a
// quiet one.
inline cntr* counted(cntr* c, uint64_t flags) noexcept {
  return (flags & op_quiet) ? nullptr : c;
}
class cq;
class domain;
struct ep_bindings;

// What an endpoint tells the engine about itself when it hands over a call.
struct trigger_site {
  domain& dom;
  ep_bindings& bound;
  uint64_t caps;  // the endpoint's capabilities (FI_TRIGGER must be among them)
};

// One intercepted *msg call: its kind and the caller's structures (only read
// during the call).
struct trigger_call {
  fi_op_type type;
  const fi_msg* msg = nullptr;          // FI_OP_SEND, FI_OP_RECV
  const fi_msg_tagged* tagged = nullptr;  // FI_OP_TSEND, FI_OP_TRECV
  const fi_msg_rma* rma = nullptr;      // FI_OP_READ, FI_OP_WRITE
  const fi_msg_atomic* atomic = nullptr;  // the three atomic kinds
  const fi_ioc* cmp = nullptr;          // compare kind
  void** cmp_desc = nullptr;
  size_t cmp_count = 0;
  fi_ioc* res = nullptr;  // fetch and compare kinds
  void** res_desc = nullptr;
  size_t res_count = 0;
  uint64_t flags = 0;
};

class trigger_engine {
 public:
  explicit trigger_engine(domain& dom) noexcept;
  ~trigger_engine();
  trigger_engine(const trigger_engine&) = delete;
  trigger_engine& operator=(const trigger_engine&) = delete;

  // An endpoint's *msg call carrying FI_TRIGGER (or a deferred transfer on
  // its way in). 0, or the error (logged); nothing is queued on error.
  ssize_t queue(const trigger_site& site, fid_ep* ep, const trigger_call& call) noexcept;

  // fi_control on the domain.
  int queue_work(fi_deferred_work* work) noexcept;
  int cancel_work(fi_deferred_work* work) noexcept;
  // Null: everything queued; otherwise what waits on work->triggering_cntr.
  int flush_work(fi_deferred_work* work) noexcept;

  // Closing objects: work that names them is cancelled first.
  void flush_owner(ep_bindings* owner) noexcept;
  void flush_cntr(cntr* c) noexcept;

  // A counter reached its next threshold (any thread, any lock held).
  void mark_ready() noexcept { ready_.store(true, std::memory_order_release); }
  const std::atomic<bool>& ready_flag() const noexcept { return ready_; }
  // Issues what is ready. Only where no provider lock is held.
  void fire() noexcept;
  void fire_if_ready() noexcept {
    if (ready_.load(std::memory_order_acquire)) [[unlikely]]
      fire();
  }
  // For tests and the close paths: entries queued now.
  size_t queued() noexcept;

  // A completion written to a CQ with claims (cq::add_claim): true when it
  // is a deferred transfer's that the application did not ask to see (the
  // completion counter has counted it; the CQ drops it). Any thread, any
  // provider lock held: takes only claims_m_.
  bool claim(void* op_context, bool error) noexcept;

 private:
  struct entry;
  using entry_ptr = std::unique_ptr<entry>;

  ssize_t admit(entry_ptr e) noexcept;
  // One pass over the queue; true when a call answered -FI_EAGAIN.
  bool fire_pass() noexcept;
  ssize_t issue(entry& e) noexcept;
  // Cancels (FI_ECANCELED) or fails an entry: an error completion for a
  // transfer; the entry is freed by the caller.
  void report(entry& e, int err) noexcept;
  // Removes every entry `pick` selects, reporting FI_ECANCELED; the count.
  template <class Pick>
  size_t cancel_if(Pick pick) noexcept;
  // Recomputes each counter's next threshold; under m_.
  void rearm(cntr* c) noexcept;

  // A deferred transfer issued with its completion watched (fi_trigger(3):
  // the completion counter counts its completion, and the endpoint reports
  // nothing unless the request asked for FI_COMPLETION).
  struct watched {
    void* context;       // what its completion carries
    cq* where;           // the endpoint's CQ it lands in
    cntr* completion;    // null: none, or closed since
    ep_bindings* owner;  // its endpoint
    bool hide;           // keep it off the CQ
  };
  // Registers before the transfer is issued (it may complete in the call);
  // false when out of memory (then it is counted when issued instead).
  bool watch(const watched& w) noexcept;
  void unwatch(void* context) noexcept;
  // For a deferred transfer about to be issued: its completion watched (and
  // its context and flags set for that); the context watched, or null when
  // it is counted at issue instead.
  void* watch_completion(entry& e) noexcept;

  domain& dom_;
  std::mutex claims_m_;           // watched_ only; never held while calling out
  std::vector<watched> watched_;  // few at a time: a linear search
  std::mutex m_;  // the queue; held while ready work is issued
  std::vector<entry_ptr> queue_;  // by (threshold, submission)
  uint64_t seq_ = 0;
  std::atomic<bool> ready_{false};
  std::atomic<bool> firing_{false};
};

// The call forms of a provider's *msg slots: FI_TRIGGER handed to the
// domain's engine. `ctx` checks happen there.
ssize_t trigger_intercept(const trigger_site& site, fid_ep* ep, const trigger_call& call) noexcept;

}  // namespace weft::util
