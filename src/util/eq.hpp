// SPDX-License-Identifier: MIT
// weft — the event queue every provider uses: connection management events,
// asynchronous MR and AV completions, and their errors.
//
// EQs are control path: one std::mutex guards the queue and entries are
// allocated as they are written. Each entry keeps its event number and a byte
// copy of what was written (fi_eq_entry, fi_eq_cm_entry with its trailing
// connection data, ...), errors included, in one FIFO: fi_eq_read answers
// -FI_EAVAIL exactly when the oldest entry is an error. The queue never grows
// past its size and never drops: a write to a full EQ is -FI_EAGAIN.
#pragma once

#include "util/fabric.hpp"
#include "util/object.hpp"
#include "util/progress.hpp"
#include "util/wait.hpp"
#include "util/wait_set.hpp"

#include <rdma/fi_eq.h>

#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

namespace weft::util {

class eq : public fid_object<eq, fid_eq> {
 public:
  // attr->size 0 gives this many entries. Entries are allocated as written,
  // so the size bounds the queue without costing memory up front.
  static constexpr size_t default_size = 1024;
  // The largest entry fi_eq_write and write_event accept: a CM entry with far
  // more connection data than any transport carries.
  static constexpr size_t max_entry_size = 64 * 1024;

  static int open(fabric& fab, fi_eq_attr* attr, fid_eq** out, void* context) noexcept;
  eq(fabric& fab, const fi_eq_attr& attr, void* context);
  ~eq() override;

  // ---- provider side ----
  // Queues an event: `buf` holds `len` bytes starting with a fi_eq_entry or
  // fi_eq_cm_entry. `flags` must be 0. Returns 0, -FI_EAGAIN when the EQ is
  // full (nothing is queued), -FI_EINVAL for an empty or oversized entry.
  // For FI_CONNREQ, FI_CONNECTED and FI_SHUTDOWN entries the EQ owns the
  // entry's `info` until the application reads the event; an EQ closed with
  // the event unread releases it with fi_freeinfo.
  int write_event(uint32_t event, const void* buf, size_t len, uint64_t flags) noexcept;
  // Queues an error (err_data is copied). 0 or -FI_EAGAIN when full.
  int write_error(const fi_eq_err_entry& e) noexcept;

  // Bound endpoints (and passive endpoints) register here: reading or
  // waiting on the EQ drives them.
  progress_list& progress() noexcept { return progress_; }
  // A file descriptor whose readiness means progress may produce an event
  // (a CM socket, a listening socket): a thread in fi_eq_sread or fi_wait
  // wakes when it is readable.
  errc add_wait_fd(int fd) noexcept;
  void remove_wait_fd(int fd) noexcept;

  fabric& fab() const noexcept { return *fabric_; }
  bool has_events() noexcept;
  // How wait sets and fi_trywait see this EQ.
  wait_member member() noexcept;

  // ---- the ops tables ----
  ssize_t read(uint32_t* event, void* buf, size_t len, uint64_t flags) noexcept;
  ssize_t readerr(fi_eq_err_entry* buf, uint64_t flags) noexcept;
  ssize_t write(uint32_t event, const void* buf, size_t len, uint64_t flags) noexcept;
  ssize_t sread(uint32_t* event, void* buf, size_t len, int timeout, uint64_t flags) noexcept;
  const char* strerror(int prov_errno, const void* err_data, char* buf, size_t len) noexcept;
  int control(int command, void* arg);
  int close();

 private:
  struct record {
    uint32_t event;
    bool error;
    bool owns_info;              // a provider's CM event: free its info if unread
    fi_eq_err_entry err;         // error entries
    std::vector<uint8_t> bytes;  // the entry as written; err_data for errors
  };

  ssize_t enqueue(uint32_t event, const void* buf, size_t len, uint64_t flags,
                  bool from_provider) noexcept;
  ssize_t push(record&& r) noexcept;
  ssize_t take(uint32_t* event, void* buf, size_t len, uint64_t flags) noexcept;
  void wake() noexcept;
  const fi_provider* prov() const noexcept { return fabric_->provider(); }

  ref<fabric> fabric_;
  size_t size_;
  uint64_t flags_;
  fi_wait_obj wait_obj_;
  std::mutex m_;
  std::deque<record> queue_;
  std::vector<uint8_t> err_buf_;  // err_data handed to callers who gave no buffer
  progress_list progress_;
  wait_fd wait_;  // open unless FI_WAIT_NONE or FI_WAIT_YIELD
  mutex_cond cond_;  // FI_WAIT_MUTEX_COND
  // Last: detaches from the wait set before the wait object above closes.
  wait_set_binding set_;
};

}  // namespace weft::util
