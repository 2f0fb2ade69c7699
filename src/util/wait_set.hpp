// SPDX-License-Identifier: MIT
// weft — wait sets (fi_wait_open, fi_wait, fi_trywait) and poll sets
// (fi_poll_open, fi_poll_add/del, fi_poll): one place to sleep on, or to poll,
// several CQs, counters and EQs.
//
// Both see their members through a `wait_member`, a small description each
// object hands out of itself, so that this file knows nothing of how a CQ, a
// counter or an EQ stores its entries:
//  - a wait set lists the objects opened with FI_WAIT_SET. Each holds a
//    `wait_set_binding` (a counted reference, so closing the set while one is
//    attached answers -FI_EBUSY) and calls notify() after each write. The set
//    nests each member's wait_fd in its own epoll set, so the provider sockets
//    registered on a member wake a thread in fi_wait as well.
//  - a poll set lists CQs and counters added by the application. It holds no
//    reference on them (applications close their CQs before the poll set, and
//    fi_close must succeed); instead each pollable object embeds a
//    `poll_links`, whose destructor takes the object out of every poll set.
#pragma once

#include "util/fabric.hpp"
#include "util/object.hpp"
#include "util/progress.hpp"
#include "util/wait.hpp"

#include <rdma/fi_eq.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

namespace weft::util {

class domain;
class poll_set;
class poll_links;

// How a wait set, a poll set and fi_trywait see a CQ, counter or EQ.
struct wait_member {
  // The object's fid; its context is what fi_poll reports.
  struct fid* owner = nullptr;
  // The object's kernel wait object, or null (FI_WAIT_NONE, FI_WAIT_YIELD).
  wait_fd* waiter = nullptr;
  // Run before asking has_event, or null.
  progress_list* progress = nullptr;
  // Whether a read of the object would return something now. For a counter:
  // whether its value or error count changed since it last said so (asking
  // consumes the change, as fi_poll's contract for counters requires).
  bool (*has_event)(struct fid* owner) noexcept = nullptr;
  // The object's domain, which a poll set must share; null: not checked.
  const domain* dom = nullptr;
  // Where poll sets register; null: the object cannot join a poll set.
  poll_links* links = nullptr;
};

// The numeric value of an application-supplied wait object, read without
// assuming it is one of the enumerators (it is checked before it is used).
inline int raw_wait_obj(const fi_wait_obj& w) noexcept {
  int v;
  static_assert(sizeof v == sizeof w);
  std::memcpy(&v, &w, sizeof v);
  return v;
}

// The descriptions of the classes this file does not own, defined next to
// each class (cq.cpp, cntr.cpp; eq.cpp for the EQ). `f` has been checked to
// be of the class in the name.
wait_member cq_wait_member(struct fid* f) noexcept;
wait_member cntr_wait_member(struct fid* f) noexcept;
wait_member eq_wait_member(struct fid* f) noexcept;

// Runs the member's progress and asks it whether it has something to read:
// the check behind fi_trywait, fi_wait and fi_poll. With `drain`, first
// consumes the pending wakeups of its wait object, so that a wait object left
// readable by writes the application has since read does not wake a sleeper
// again (fi_trywait, fi_wait); fi_poll leaves it alone.
bool member_ready(const wait_member& m, bool drain) noexcept;

class wait_set : public fid_object<wait_set, fid_wait> {
 public:
  static int open(fabric& fab, fi_wait_attr* attr, fid_wait** out) noexcept;
  // fi_trywait: -FI_EAGAIN if any of the fids (CQs, counters, EQs, wait sets)
  // has something to read, 0 if it is safe to block on their wait objects.
  static int trywait(fabric& fab, struct fid** fids, int count) noexcept;

  wait_set(fabric& fab, fi_wait_obj obj);
  ~wait_set() override;

  // ---- members (CQs, counters, EQs opened with FI_WAIT_SET) ----
  // Use wait_set_binding rather than these two directly.
  errc attach(const wait_member& m) noexcept;
  void detach(const struct fid* owner) noexcept;
  // Called by a member after each write. Costs one atomic instruction when
  // nobody sleeps on the set and nobody holds its wait object.
  void notify() noexcept {
    // A read-modify-write, not a load: it orders the member's write (which
    // may be a plain store under null_lock) before the look at watchers_,
    // and pairs with the increment a sleeper makes before it checks the
    // members. Either the sleeper sees the write, or we see the sleeper.
    if (watchers_.fetch_add(0, std::memory_order_seq_cst)) wake();
  }
  fabric& fab() const noexcept { return *fabric_; }
  fi_wait_obj wait_obj() const noexcept { return obj_; }

  // Drains, progresses and checks every member: true if one has an event.
  bool ready() noexcept;

  // ---- the ops tables ----
  int wait(int timeout) noexcept;
  int control(int command, void* arg);
  int close();

 private:
  void wake() noexcept;
  void exported() noexcept;

  ref<fabric> fabric_;
  fi_wait_obj obj_;
  wait_fd wait_;  // closed for FI_WAIT_YIELD
  std::mutex m_;
  std::vector<wait_member> members_;
  // Threads in fi_wait plus one once the application holds the wait object.
  std::atomic<int> watchers_{0};
  std::atomic<bool> exported_{false};
  mutex_cond cond_;  // FI_WAIT_MUTEX_COND
};

// A member's attachment to its wait set: attaches on bind, detaches and drops
// the reference when destroyed (declare it after what the member's
// wait_member points at, so that it goes first).
class wait_set_binding {
 public:
  wait_set_binding() = default;
  wait_set_binding(const wait_set_binding&) = delete;
  wait_set_binding& operator=(const wait_set_binding&) = delete;
  ~wait_set_binding() { reset(); }

  errc bind(wait_set& set, const wait_member& m) noexcept {
    reset();
    if (errc e = set.attach(m); e != errc::ok) return e;
    set_.reset(&set);
    owner_ = m.owner;
    return errc::ok;
  }
  void reset() noexcept {
    if (set_) set_->detach(owner_);
    set_.reset();
  }
  void notify() const noexcept {
    if (set_) set_->notify();
  }
  wait_set* get() const noexcept { return set_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(set_); }

 private:
  ref<wait_set> set_;
  const struct fid* owner_ = nullptr;
};

// Embedded in each CQ and counter: the poll sets that list it. Destroying it
// takes the owner out of them, so a CQ closed before its poll set leaves no
// dangling member behind. Declare it last in the owner (destroyed first).
class poll_links {
 public:
  poll_links() = default;
  poll_links(const poll_links&) = delete;
  poll_links& operator=(const poll_links&) = delete;
  ~poll_links();

 private:
  friend class poll_set;
  std::vector<poll_set*> sets_;  // guarded by the poll-set membership lock
};

class poll_set : public fid_object<poll_set, fid_poll> {
 public:
  static int open(domain& dom, fi_poll_attr* attr, fid_poll** out) noexcept;
  explicit poll_set(domain& dom);
  ~poll_set() override;

  // ---- the ops tables ----
  int poll(void** context, int count) noexcept;
  int poll_add(struct fid* event_fid, uint64_t flags) noexcept;
  int poll_del(struct fid* event_fid, uint64_t flags) noexcept;
  int close();

  // poll_add once the fid is resolved: lists `m` (idempotent). 0, or
  // -FI_EINVAL for a member of another domain or one that cannot be polled.
  int add_member(const wait_member& m) noexcept;

 private:
  friend class poll_links;
  void forget(const poll_links* l) noexcept;

  ref<domain> domain_;
  std::mutex m_;  // members_; fi_poll holds only this one
  std::vector<wait_member> members_;
};

}  // namespace weft::util
