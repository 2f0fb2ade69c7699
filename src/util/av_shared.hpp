// SPDX-License-Identifier: MIT
// weft — the file behind a named (shared) address vector, fi_av(3) `name`.
//
// A named AV keeps its entries in /dev/shm/weft-av-<uid>-<name>, mode 0600:
// one page of header, then `capacity` entries of the codec's size, laid out
// exactly as av_table's chunks are, so the table's directory points straight
// into the mapping and entry(fi_addr) costs what it costs for a private AV.
//
// One writer at a time: the process that opened the name read-write holds an
// exclusive flock(2) on the file for as long as it has the AV open. A second
// read-write open of the same name, from this process or another, gets
// -FI_EBUSY while that lock is held; the kernel drops the lock when the
// writer dies, so the file of a dead writer is recognised as stale and
// replaced by a fresh one. Readers (FI_READ) take no lock; they see what the
// writer publishes: entries are written in place, then `bound` (indices ever
// handed out) is raised, and `gen` is bumped whenever an index is removed or
// reused, so a reader knows when its reverse index must be rebuilt.
//
// The writer unlinks the file when it closes the AV: readers that have it
// open keep their mapping (and the entries as last published); later
// FI_READ opens get -FI_ENOENT.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/providers/fi_prov.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/errc.hpp"
#include "util/fd.hpp"

namespace weft::util {

struct av_codec;

struct av_file_header {
  uint64_t magic;
  uint32_t version;
  uint32_t header_bytes;
  uint32_t addr_format;
  uint32_t entry_size;
  uint32_t live_offset;
  int32_t type;        // fi_av_type
  uint64_t capacity;   // entries the file holds at most
  uint64_t file_bytes; // header_bytes + capacity * entry_size
  int32_t writer_pid;  // for log lines only: liveness is the flock
  uint32_t reserved;
  alignas(64) std::atomic<uint32_t> bound;  // indices ever handed out
  std::atomic<uint64_t> live;               // live entries
  std::atomic<uint64_t> gen;                // removals and reuses so far
};
static_assert(std::atomic<uint64_t>::is_always_lock_free &&
              std::atomic<uint32_t>::is_always_lock_free);

class av_file {
 public:
  static constexpr size_t header_bytes = 4096;
  static constexpr size_t min_capacity = size_t{1} << 16;
  static constexpr size_t max_capacity = size_t{1} << 28;

  // The path for an AV name: <dir>/weft-av-<euid>-<name>, every byte of the
  // name outside [A-Za-z0-9._-] written as %XX. Empty when the name is empty
  // or too long for a file name.
  static std::string path_for(const char* name);

  // Read-write: creates the file (replacing a stale one) for `count` entries
  // (a hint: clamped to [min_capacity, max_capacity]) of type `type`, or
  // errc::busy while another opener writes it. Read-only: opens an existing
  // file (errc::noent when there is none) whose entries have this codec's
  // size and format; `type` in: the type asked for (FI_AV_UNSPEC: any),
  // out: the file's. Logs its failures.
  static errc open(const char* name, bool writer, const av_codec& codec, fi_av_type& type,
                   size_t count, const fi_provider* log, std::unique_ptr<av_file>& out) noexcept;
  av_file(const av_file&) = delete;
  av_file& operator=(const av_file&) = delete;
  ~av_file();

  uint8_t* entries() const noexcept { return base_ + header_bytes; }
  size_t capacity() const noexcept { return capacity_; }
  void* base() const noexcept { return base_; }
  const std::string& path() const noexcept { return path_; }
  av_file_header& header() const noexcept { return *reinterpret_cast<av_file_header*>(base_); }

  // Writer: backs entries [0, n) with allocated pages (n <= capacity), so
  // a full /dev/shm shows as errc::nospc here and never as SIGBUS later.
  errc ensure(size_t n) noexcept;
  // Writer: makes the table's state visible to readers; `reshaped` when an
  // index was removed or reused since the last call.
  void publish(uint32_t bound, size_t live, bool reshaped) noexcept;

 private:
  av_file() = default;
  static errc create(const std::string& path, const av_codec& codec, fi_av_type type,
                     size_t capacity, const fi_provider* log, std::unique_ptr<av_file>& out);
  static errc attach(const std::string& path, const av_codec& codec, fi_av_type& type,
                     const fi_provider* log, std::unique_ptr<av_file>& out);

  std::string path_;
  unique_fd fd_;
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
  size_t capacity_ = 0;
  size_t entry_size_ = 0;
  size_t allocated_ = 0;  // entries backed by ensure()
  bool writer_ = false;
  uint64_t dev_ = 0, ino_ = 0;
};

}  // namespace weft::util
