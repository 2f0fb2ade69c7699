// SPDX-License-Identifier: MIT
// weft — waking an shm endpoint that sleeps: a FIFO next to its region.
//
// A thread blocked in fi_cq_sread, fi_cntr_wait or on the CQ's fd sleeps in
// the kernel; messages arrive by plain stores into shared memory, which wake
// no one. So each endpoint owns a FIFO, weft-shmw-<same suffix as its
// region>, in the region directory (mode 0600): its read end is in the
// endpoint's wait set, and a sender whose doorbell finds the owner asleep
// (proto.hpp, "Waking the owner") writes one byte into it. A FIFO, not an
// eventfd or a socket: anyone who may open the region may open it, with no
// ptrace rights and across network namespaces, as containers sharing
// /dev/shm need. The owner holds a write end too, so that the read end
// never reports a hangup while no sender has it open.
#pragma once

#include "core/errc.hpp"
#include "util/fd.hpp"

#include <rdma/providers/fi_prov.h>

#include <string>

namespace weft::shm {

// The FIFO's file name for a region's file name (weft-shm-... -> weft-shmw-...).
std::string wake_name(const std::string& region_name);

class wake_fifo {
 public:
  wake_fifo() = default;
  wake_fifo(const wake_fifo&) = delete;
  wake_fifo& operator=(const wake_fifo&) = delete;
  ~wake_fifo();  // unlinks it

  // Makes dir/wake_name(region_name), mode 0600, and opens both ends
  // (non-blocking). Logged on failure; the endpoint then wakes by its timer.
  errc create(const std::string& dir, const std::string& region_name, const fi_provider* log) noexcept;
  int fd() const noexcept { return rd_.get(); }
  bool valid() const noexcept { return rd_.valid(); }
  // Reads every byte written so far (the read end is level-triggered).
  void drain() noexcept;
  // The owner wakes itself (automatic progress with work left over): one
  // byte through its own write end.
  void signal() noexcept;

 private:
  std::string path_;
  util::unique_fd rd_, wr_;
};

// A sender's way to wake the owner of region `region_name` in `dir`: opens
// its FIFO once into `fd` and writes a byte. false when it cannot (no such
// FIFO: the owner is gone or predates it); a full FIFO already wakes.
bool wake_owner(util::unique_fd& fd, const std::string& dir, const std::string& region_name) noexcept;

// Unlinks weft-shmw-* FIFOs of this uid and PID namespace whose region file
// is gone (its owner was killed between the two unlinks). Returns how many.
size_t reclaim_stale_fifos(const std::string& dir, const fi_provider* log) noexcept;

}  // namespace weft::shm
