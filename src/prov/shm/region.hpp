// SPDX-License-Identifier: MIT
// weft — an endpoint's shared-memory region: creation, attachment, ring
// claims, doorbells, and the cleanup of regions whose owner died.
//
// The owner (the receiving endpoint) creates the region; every local peer
// that sends to it attaches, claims one ring on first contact, and from then
// on sends with a ring_producer and ring_doorbell(). The owner collects the
// doorbells and reads each signalled ring with a ring_consumer. Layout and
// protocols: proto.hpp.
//
// Files are named weft-shm-<uid>-<pidns inode>-<pid>-<endpoint index>, so two
// users, two PID namespaces sharing a /dev/shm, and two endpoints of one
// process never collide, and a dead owner's files can be recognised by name.
// They are created O_EXCL, mode exactly 0600 (fchmod after the umask-masked
// open), never world- or group-accessible, and only files owned by our uid
// are ever attached or reclaimed.
#pragma once

#include "core/errc.hpp"
#include "core/hot.hpp"
#include "prov/shm/peer.hpp"
#include "prov/shm/proto.hpp"
#include "prov/shm/ring.hpp"
#include "util/fd.hpp"

#include <rdma/providers/fi_prov.h>

#include <sys/types.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <string>

namespace weft::shm {

// Who is claiming a ring: recorded in the claim entry for the owner.
struct sender_identity {
  pid_t pid = 0;
  uint32_t uid = 0;
  uint64_t pidns = 0;
  uint64_t start_time = 0;
  uint32_t endpoint_index = 0;
  uint64_t cookie = 0;  // opaque: the provider's own use

  // This process, for its endpoint `endpoint_index`.
  static sender_identity self(uint32_t endpoint_index, uint64_t cookie = 0) noexcept;
};

// "weft-shm-<uid>-<pidns>-<pid>-<endpoint index>"
std::string region_name(uint32_t uid, uint64_t pidns, pid_t pid, uint32_t endpoint_index);

struct region_params {
  std::string dir = "/dev/shm";
  uint32_t endpoint_index = 0;
  uint32_t nrings = proto::default_rings;
  uint32_t ring_slots = proto::default_ring_slots;
  // statvfs must show the fixed part plus this much free.
  uint64_t headroom_bytes = proto::default_headroom;
  // Scan `dir` for regions of dead processes first (reclaim_stale_regions).
  bool reclaim_stale = true;
  const fi_provider* log = nullptr;  // who logs; nullptr: the core
};

// The owner's private list of rings that may hold messages: filled from the
// shared doorbell by collect_doorbells, emptied by the owner as it finds
// rings drained. 520 bytes, no allocation. `words` has bit w set when
// bits[w] may be non-zero, so an idle or single-peer endpoint looks at one
// word, not 64, on every progress call.
struct doorbell_set {
  static_assert(proto::max_rings / 64 <= 64);
  std::array<uint64_t, proto::max_rings / 64> bits{};
  uint64_t words = 0;
  // Hot rings: the owner polls them directly and leaves their shared bits
  // set, so that their senders' doorbells cost a load, not a locked write
  // (collect_doorbells takes every other bit). Always also in `bits`.
  std::array<uint64_t, proto::max_rings / 64> keep{};

  bool test(uint32_t ring) const noexcept { return bits[ring / 64] >> (ring % 64) & 1; }
  void set(uint32_t ring) noexcept {
    bits[ring / 64] |= uint64_t{1} << (ring % 64);
    words |= uint64_t{1} << (ring / 64);
  }
  void merge(uint32_t w, uint64_t x) noexcept {
    bits[w] |= x;
    words |= uint64_t{1} << w;
  }
  void clear(uint32_t ring) noexcept { bits[ring / 64] &= ~(uint64_t{1} << (ring % 64)); }
  bool any() const noexcept {
    for (uint64_t m = words; m; m &= m - 1)
      if (bits[static_cast<size_t>(std::countr_zero(m))]) return true;
    return false;
  }
  // Calls f(ring) for each ring in the set but the hot ones (in `keep`,
  // polled apart), lowest first, and clears the ring when f returns true
  // (at once: f may set rings, that one included).
  template <class F>
  WEFT_ALWAYS_INLINE void drain_each(F&& f) {
    for (uint64_t m = words; m; m &= m - 1) {
      const uint32_t w = static_cast<uint32_t>(std::countr_zero(m));
      for (uint64_t x = bits[w] & ~keep[w]; x; x &= x - 1) {
        const int b = std::countr_zero(x);
        if (f(w * 64 + static_cast<uint32_t>(b))) bits[w] &= ~(uint64_t{1} << b);
      }
      if (!bits[w]) words &= ~(uint64_t{1} << w);
    }
  }
  // Calls f(ring) for each ring in the set, lowest first; f may clear it.
  template <class F>
  void for_each(F&& f) {
    for (uint64_t m = words; m; m &= m - 1) {
      uint32_t w = static_cast<uint32_t>(std::countr_zero(m));
      for (uint64_t x = bits[w]; x; x &= x - 1) f(w * 64 + static_cast<uint32_t>(std::countr_zero(x)));
      if (!bits[w]) words &= ~(uint64_t{1} << w);
    }
  }
};

class region {
 public:
  region() = default;
  region(region&& o) noexcept;
  region& operator=(region&& o) noexcept;
  ~region();

  // Creates this process's region for endpoint p.endpoint_index. Errors:
  // inval (bad shape), nospc (statvfs or fallocate: not enough room in
  // p.dir, logged with the sizes), addrinuse (this process already has that
  // index), access/noent/io (the file system's answer, logged).
  static errc create(const region_params& p, region& out) noexcept;
  // Maps a peer's region. Errors: noent (no such region), again (its owner
  // is still creating it), opnotsupp (another protocol version), access
  // (not ours), inval (not a region, or corrupt).
  static errc attach(const std::string& dir, const std::string& name, region& out,
                     const fi_provider* log = nullptr) noexcept;

  bool valid() const noexcept { return base_ != nullptr; }
  bool is_owner() const noexcept { return owner_; }
  const std::string& name() const noexcept { return name_; }
  std::string path() const { return dir_ + "/" + name_; }
  const proto::region_header& header() const noexcept { return *hdr(); }
  const proto::geometry& geometry() const noexcept { return geo_; }
  uint32_t nrings() const noexcept { return nrings_; }
  uint32_t ring_slots() const noexcept { return ring_slots_; }
  // The owner's liveness identity (for peer_liveness).
  pid_t owner_pid() const noexcept { return hdr()->owner_pid; }
  uint64_t owner_start_time() const noexcept { return hdr()->owner_start_time; }

  // ---- sender side --------------------------------------------------------
  // Claims a free ring for `me` and allocates its memory (proto.hpp, claim
  // protocol). Errors: busy (every ring taken), nospc (no room in the file
  // system for the ring block, logged), noent (the region was removed).
  errc claim(const sender_identity& me, uint32_t& ring) noexcept;
  ring_producer producer(uint32_t ring) noexcept { return ring_producer(ring_mem(ring)); }
  // After publishing: tells the owner ring `ring` has something (proto.hpp).
  // True when the owner may be asleep and this call is the one to wake it
  // (proto.hpp, "Waking the owner"): the caller writes its FIFO.
  bool ring_doorbell(uint32_t ring) noexcept {
    std::atomic_ref<uint64_t> w(doorbell(ring / 64).bits);
    uint64_t bit = uint64_t{1} << (ring % 64);
    if (w.load(std::memory_order_seq_cst) & bit) return false;
    w.fetch_or(bit, std::memory_order_seq_cst);
    if (!std::atomic_ref<uint32_t>(hwm_->wake_wanted).load(std::memory_order_seq_cst)) return false;
    return claim_wake();
  }
  // True when no wake is in flight and this call is the one to send it
  // (one byte in the owner's FIFO at a time, however many ring).
  bool claim_wake() noexcept {
    return std::atomic_ref<uint32_t>(hwm_->wake_pending).exchange(1, std::memory_order_acq_rel) == 0;
  }
  // The sender is done with the ring; the owner will reclaim it.
  void close_ring(uint32_t ring) noexcept;
  // Allocates the ring's bounce segments (once, before the first segmented
  // copy). nospc when the file system is full.
  errc reserve_bounce(uint32_t ring) noexcept;
  // The split line of a ring (proto.hpp): the owner publishes there, the
  // ring's sender helps.
  proto::split_line& split(uint32_t ring) noexcept { return block(ring).split; }
  std::byte* bounce_segment(uint32_t ring, uint32_t seg) noexcept {
    return base_ + geo_.bounce_offset + ring * geo_.bounce_ring_bytes +
           seg * proto::bounce_segment_bytes;
  }
  proto::bounce_ctrl& bounce_ctrl(uint32_t ring, uint32_t seg) noexcept {
    return block(ring).bounce[seg];
  }

  // ---- owner side ---------------------------------------------------------
  // Moves the shared doorbell bits into `pending`; true if any was set.
  // Policy for the owner: rings in `pending` may be polled directly, as often
  // as it likes, without collecting (a busy sender then finds its bit still
  // set and its doorbell costs one cached load). A ring may leave `pending`
  // only when a drain that follows a collect_doorbells call finds it empty:
  // whatever its sender published before that collect is then seen by the
  // drain, and whatever it publishes after sets the shared bit again.
  // (Inline by force: with three lock policies instantiating the progress
  // pass the compiler stopped inlining it, +29 instructions per message.)
  WEFT_ALWAYS_INLINE bool collect_doorbells(doorbell_set& pending) noexcept {
    uint64_t mask =
        std::atomic_ref<uint64_t>(hwm_->claimed_words).load(std::memory_order_acquire) &
        words_mask_;
    uint64_t got = 0;
    for (; mask; mask &= mask - 1) {
      uint32_t w = static_cast<uint32_t>(std::countr_zero(mask));
      std::atomic_ref<uint64_t> bits(doorbell(w).bits);
      const uint64_t keep = pending.keep[w];
      if ((bits.load(std::memory_order_relaxed) & ~keep) == 0) continue;
      uint64_t x = keep ? bits.fetch_and(keep, std::memory_order_seq_cst)
                        : bits.exchange(0, std::memory_order_seq_cst);
      pending.merge(w, x);
      got |= x;
    }
    if (got) seq_cst_fence();
    return got != 0;
  }
  // Owner: whether senders should wake us (stored before the collect that
  // precedes a sleep), and taking a wake (true: read the FIFO empty).
  void want_wakes(bool on) noexcept {
    std::atomic_ref<uint32_t>(hwm_->wake_wanted).store(on, std::memory_order_seq_cst);
  }
  bool take_wake() noexcept {
    std::atomic_ref<uint32_t> p(hwm_->wake_pending);
    if (!p.load(std::memory_order_relaxed)) return false;
    p.store(0, std::memory_order_seq_cst);
    return true;
  }
  const std::string& dir() const noexcept { return dir_; }
  // The ring's claim state (proto::claim_state), with acquire: after seeing
  // claim_active, claim_info() and consumer() are safe to use.
  // 1 + the highest ring index ever claimed.
  uint32_t claim_hwm() noexcept {
    return std::atomic_ref<uint32_t>(hwm_line()->claim_hwm).load(std::memory_order_acquire);
  }
  uint32_t claim_state(uint32_t ring) const noexcept {
    return std::atomic_ref<uint32_t>(block(ring).claim.state).load(std::memory_order_acquire);
  }
  proto::claim_entry claim_info(uint32_t ring) const noexcept { return block(ring).claim; }
  uint32_t claim_generation(uint32_t ring) const noexcept { return block(ring).claim.generation; }
  ring_consumer consumer(uint32_t ring) noexcept { return ring_consumer(ring_mem(ring)); }
  // Returns a ring to the free pool: its sender closed it, or is dead
  // (`sender_dead`: the caller checked with peer_liveness). The owner must
  // have dropped its consumer. busy: the sender is active and not dead.
  errc reclaim_ring(uint32_t ring, bool sender_dead = false) noexcept;

  ring_memory ring_mem(uint32_t ring) noexcept {
    proto::ring_block_ctrl& b = block(ring);
    return {&b.prod, &b.cons, reinterpret_cast<std::byte*>(&b + 1), ring_slots_};
  }

 private:
  proto::region_header* hdr() const noexcept { return reinterpret_cast<proto::region_header*>(base_); }
  proto::hwm_line* hwm_line() const noexcept {
    return reinterpret_cast<proto::hwm_line*>(base_ + geo_.control_offset);
  }
  uint64_t& claim_word(uint32_t w) const noexcept {
    return reinterpret_cast<uint64_t*>(base_ + geo_.claim_bitmap_offset)[w];
  }
  proto::doorbell_line& doorbell(uint32_t w) const noexcept { return bells_[w]; }
  // What the per-message path would otherwise compute from base_ and geo_
  // on every call; set whenever those change.
  void cache_layout() noexcept {
    hwm_ = base_ ? hwm_line() : nullptr;
    bells_ = base_ ? reinterpret_cast<proto::doorbell_line*>(base_ + geo_.doorbell_offset) : nullptr;
    words_mask_ = nrings_ / 64 < 64 ? (uint64_t{1} << (nrings_ / 64)) - 1 : ~uint64_t{0};
  }
  proto::ring_block_ctrl& block(uint32_t ring) const noexcept {
    return *reinterpret_cast<proto::ring_block_ctrl*>(base_ + geo_.blocks_offset +
                                                       ring * geo_.block_bytes);
  }
  errc allocate(uint64_t off, uint64_t len, const char* what) noexcept;
  void release_mapping() noexcept;

  std::string dir_, name_;
  std::byte* base_ = nullptr;
  size_t bytes_ = 0;
  util::unique_fd fd_;  // the owner's; attachers reopen by name when they must
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  proto::geometry geo_{};
  uint32_t nrings_ = 0, ring_slots_ = 0;
  proto::hwm_line* hwm_ = nullptr;
  proto::doorbell_line* bells_ = nullptr;
  uint64_t words_mask_ = 0;
  bool owner_ = false;
  const fi_provider* log_ = nullptr;
};

// Unlinks the regions in `dir` left by dead processes of this uid and this
// PID namespace: the owner pid no longer exists, is a zombie, or is now a
// different process (its start time differs from the one in the header).
// Regions of live owners, of other users and other namespaces, and files
// whose header is not (yet) readable while their pid lives, are left alone.
// Returns how many were removed.
size_t reclaim_stale_regions(const std::string& dir = "/dev/shm",
                             const fi_provider* log = nullptr) noexcept;

}  // namespace weft::shm
