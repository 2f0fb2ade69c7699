// SPDX-License-Identifier: MIT
// weft — the address vector every provider uses.
//
// A provider describes how it stores a peer with an av_codec (a fixed number
// of bytes per peer: 6 for an IPv4 address and port); the AV keeps those
// entries in fixed-size chunks indexed by fi_addr_t, plus an open-addressing
// hash of 32-bit indices for the reverse lookup (FI_SOURCE). An IPv4 table of
// a million peers costs about 6 bytes of entries and 8-10 bytes of index per
// peer. Both AV types hand out indices: for FI_AV_TABLE that is the contract
// (0, 1, 2, ... in insertion order, removed indices reused lowest first); for
// FI_AV_MAP it is this implementation's choice, and applications must treat
// the values as opaque.
#pragma once

#include <rdma/fi_domain.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "util/domain.hpp"
#include "util/lock.hpp"
#include "util/object.hpp"

namespace weft::util {

// How a provider stores peer addresses. Static data, one per address format.
struct av_codec {
  uint32_t addr_format;  // FI_SOCKADDR_IN, ... : what fi_av_insert takes
  uint16_t entry_size;   // bytes per peer in the AV
  // Offset of a 2-byte field (the port) that encode never leaves zero: the
  // AV zeroes it to mark a removed entry, so liveness costs no extra memory.
  uint16_t live_offset;
  size_t max_addrlen;  // the largest address decode produces

  // Distance between consecutive addresses of an fi_av_insert array whose
  // first element is `first` (formats such as FI_SOCKADDR size by family).
  size_t (*stride)(const void* first) noexcept;
  // User address -> entry: 0, or -FI_EINVAL for a wrong family or port 0.
  // Also used on the data path to turn a received source address into an
  // entry for av::reverse.
  int (*encode)(const void* addr, uint8_t* entry) noexcept;
  // Entry -> user address (fi_av_lookup): copies at most `len` bytes and
  // returns the full length.
  size_t (*decode)(const uint8_t* entry, void* addr, size_t len) noexcept;
  // Length of the user address decode gives for this entry.
  size_t (*addrlen)(const uint8_t* entry) noexcept;
  // fi_av_straddr of a user address (which need not be insertable: port 0
  // prints): writes at most `len` bytes, always NUL-terminated when len > 0,
  // and returns the size needed including the NUL; 0 when the address is
  // not of this format.
  size_t (*straddr)(const void* addr, char* buf, size_t len) noexcept;
  // A well-mixed hash of an entry (all 32 bits usable).
  uint32_t (*hash)(const uint8_t* entry) noexcept;

  // Name resolution for fi_av_insertsvc / insertsym; null: -FI_ENOSYS.
  // node and service as fi_getinfo(3) takes them (node may be an
  // FI_ADDR_STR address, service then null). Blocking. 0, or a negative
  // FI_E* code (-FI_EINVAL malformed, -FI_EADDRNOTAVAIL did not resolve).
  int (*resolve)(const char* node, const char* service, uint8_t* entry);
  // The node `step` places after `node` in an fi_av_insertsym range, into
  // out[len]: 0, or -FI_EINVAL when node has no numeric part to step.
  int (*step_node)(const char* node, size_t step, char* out, size_t len);
  // Entries mean the same in every process on the node (no pointers, no
  // per-process handles): named AVs (fi_av(3) `name`) may share them.
  bool shareable = false;
};

// Zeroed memory for the reverse index. Large blocks are mapped on 2 MiB
// boundaries with transparent huge pages requested: every insert and lookup
// lands on a random slot, and with 4 KiB pages most would miss the TLB.
class zeroed_block {
 public:
  static constexpr size_t huge = size_t{2} << 20;
  zeroed_block() = default;
  explicit zeroed_block(size_t bytes);  // throws std::bad_alloc
  zeroed_block(zeroed_block&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  zeroed_block& operator=(zeroed_block&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~zeroed_block();
  void* get() const noexcept { return p_; }
  size_t bytes() const noexcept { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// The storage behind an AV: entries and the reverse index. Not locked: the
// av class below serialises writers according to its lock policy.
//
// Entries live in chunks of `chunk_entries` that never move once allocated,
// reached through a directory of chunk pointers. When the directory grows,
// the old one is kept until close (they sum to less than the current one),
// so a reader holding no lock always sees a valid directory: get() is safe
// while another thread adds. The reverse index does move when it grows, so
// find() needs the writers' lock under a locking policy.
class av_table {
 public:
  static constexpr uint32_t chunk_shift = 10;
  static constexpr uint32_t chunk_entries = 1u << chunk_shift;
  // Slots are 32-bit indices and the index keeps its load <= 1/2 of at most
  // 2^32 slots.
  static constexpr size_t max_entries = size_t{1} << 31;
  static constexpr uint32_t none = UINT32_MAX;  // find(): no such entry

  explicit av_table(const av_codec& codec);
  av_table(const av_table&) = delete;
  av_table& operator=(const av_table&) = delete;
  ~av_table();

  // Named AVs: entries live in caller-owned memory (a shared file mapping)
  // of `entries` entries (a multiple of chunk_entries), chunk k at
  // base + k * chunk bytes, instead of allocated chunks; the table never
  // holds more. Called once, on a fresh table; throws bad_alloc.
  void use_storage(uint8_t* base, size_t entries);
  // Indices ever handed out, and what bound() will be after n more add()s.
  uint32_t bound() const noexcept { return bound_.load(std::memory_order_acquire); }
  size_t span_after(size_t n) const noexcept {
    return bound() + (n > free_.size() ? n - free_.size() : 0);
  }
  size_t free_count() const noexcept { return free_.size(); }
  // A reader of storage another process writes: adopts the bound and live
  // count it published (the bound never moves back). Lock-free; what get()
  // and live() read is cached state of the writer's, hence const.
  void follow(uint32_t bound, size_t live) const noexcept;
  // A reader: puts the published entries [from, bound()) into the reverse
  // index, or rebuilds it from all of them (`all`: some were removed or
  // reused). Returns the bound indexed up to (the next call's `from`).
  // Throws bad_alloc with the index unchanged.
  uint32_t index_published(uint32_t from, bool all);

  // Makes room so that `n` more add() calls cannot fail; throws bad_alloc
  // (with no entry changed) when memory runs out. n <= max_entries - live().
  void reserve(size_t n);
  // Stores an encoded entry at the lowest free index and returns it.
  uint32_t add(const uint8_t* entry) noexcept;
  // Makes room so that `n` following remove() calls cannot fail.
  void reserve_removals(size_t n);
  // Starts loading the index slot add(entry) will probe: a batch that
  // prefetches a few entries ahead overlaps their cache misses.
  void prefetch(const uint8_t* entry) const noexcept;
  // Frees index i; false when i is not a live entry.
  bool remove(uint64_t i) noexcept;

  // The entry at i, or nullptr when i was never handed out or was removed.
  // Lock-free, allocation-free, O(1).
  const uint8_t* get(uint64_t i) const noexcept {
    if (i >= bound_.load(std::memory_order_acquire)) return nullptr;
    const uint8_t* e = slot_of(static_cast<uint32_t>(i));
    return (e[live_offset_] | e[live_offset_ + 1]) ? e : nullptr;
  }
  // The index holding an entry equal to `entry`, or none. O(1) expected.
  uint32_t find(const uint8_t* entry) const noexcept;

  // User ids (FI_AV_USER_ID). Stored only once the first is set: until then
  // every entry's id is its index and no memory is spent on them.
  // enable_ids() throws bad_alloc with nothing changed; set_user_id takes a
  // live index. Writers serialise as for add().
  void enable_ids();
  bool ids_enabled() const noexcept { return ids_on_.load(std::memory_order_acquire); }
  void set_user_id(uint32_t i, fi_addr_t id) noexcept;
  // The id of index i (i itself when none was set, or when i is not an index
  // this table handed out, FI_ADDR_NOTAVAIL included). Lock-free, O(1).
  fi_addr_t user_id(uint64_t i) const noexcept {
    if (!ids_on_.load(std::memory_order_acquire) || i >= bound_.load(std::memory_order_acquire))
      return i;
    fi_addr_t* ids = dir_.load(std::memory_order_acquire)[i >> chunk_shift].ids;
    if (!ids) return i;
    return std::atomic_ref<fi_addr_t>(ids[i & (chunk_entries - 1)]).load(std::memory_order_relaxed);
  }

  size_t live() const noexcept { return live_.load(std::memory_order_relaxed); }
  // Memory held by the table, from container capacities (not just use).
  size_t bytes() const noexcept;

 private:
  // One chunk as readers find it: its entries and, once user ids are on,
  // its ids.
  struct chunk_ref {
    uint8_t* entries;
    fi_addr_t* ids;
  };
  const uint8_t* slot_of(uint32_t i) const noexcept {
    const chunk_ref* dir = dir_.load(std::memory_order_acquire);
    return dir[i >> chunk_shift].entries + size_t{i & (chunk_entries - 1)} * entry_size_;
  }
  uint8_t* slot_of(uint32_t i) noexcept {
    return const_cast<uint8_t*>(std::as_const(*this).slot_of(i));
  }
  uint64_t home(const uint8_t* entry) const noexcept {
    return (uint64_t{codec_.hash(entry)} * cap_) >> 32;
  }
  uint64_t next(uint64_t pos) const noexcept { return pos + 1 == cap_ ? 0 : pos + 1; }
  void grow_chunks(size_t entries);
  void rehash(uint64_t new_cap, uint32_t bound);
  void index_insert_at(uint32_t i, uint64_t pos) noexcept;

  const av_codec& codec_;
  const uint32_t entry_size_;
  const uint32_t live_offset_;
  // Entry comparison, inlined for the sizes of the IP codecs (a call to
  // memcmp costs as much as the rest of a lookup).
  bool (*equal_)(const uint8_t* a, const uint8_t* b, size_t size) noexcept;

  // Named AVs: the caller's memory holding every chunk, and its size.
  uint8_t* ext_ = nullptr;
  size_t ext_cap_ = 0;
  // Entries: the directory readers see, every directory ever published (the
  // last is current), and the chunks.
  std::atomic<const chunk_ref*> dir_{nullptr};
  std::vector<std::unique_ptr<chunk_ref[]>> dirs_;
  size_t dir_cap_ = 0;
  size_t dirs_bytes_ = 0;
  std::vector<std::unique_ptr<uint8_t[]>> chunks_;
  std::vector<std::unique_ptr<fi_addr_t[]>> id_chunks_;  // parallel to chunks_ once ids are on
  std::atomic<bool> ids_on_{false};
  mutable std::atomic<uint32_t> bound_{0};  // indices ever handed out (follow: a reader's cache)
  // Removed indices, a min-heap: the man page places an insert at the
  // lowest unused index.
  std::vector<uint32_t> free_;

  // Reverse index: open addressing, linear probing, load <= 1/2, slots hold
  // entry index + 1 (0 when empty, so fresh zeroed pages need no fill);
  // backward-shift deletion, so removals leave no tombstones. Any multiple of
  // 64 slots (of 2 MiB once huge pages apply), not a power of two, grown by
  // 1/5: it stays within 2-2.4 slots per peer.
  zeroed_block block_;
  uint32_t* slots_ = nullptr;
  uint64_t cap_ = 0;
  mutable std::atomic<size_t> live_{0};  // atomic: providers may read count() anywhere
};

class av_file;

// A named AV (fi_av(3) `name`, FI_SHARED_AV) keeps its entries in a file
// every process opening the name maps (av_shared.hpp): one read-write opener
// inserts and removes, FI_READ openers see its fi_addr values. fi_addr
// values are indices whatever map_addr is; map_addr reports where this
// process mapped the file and is otherwise ignored.
class av : public fid_object<av, fid_av> {
 public:
  static int open(domain& dom, fi_av_attr* attr, fid_av** out, void* context) noexcept;
  av(domain& dom, const av_codec& codec, const fi_av_attr& attr, void* context,
     std::unique_ptr<av_file> file = nullptr);
  ~av() override;

  // ---- data path (providers) ----
  // The stored entry for fi_addr a; nullptr when a is not a live address.
  // Lock-free under every policy (see av_table). An FI_READ AV catches up
  // with its writer on a miss only: a hit costs what it costs unshared.
  const uint8_t* entry(fi_addr_t a) const noexcept {
    if (const uint8_t* e = table_.get(a)) [[likely]]
      return e;
    return reader_ ? follow(a) : nullptr;
  }
  // The fi_addr_t of a peer given as an entry (codec().encode of a received
  // source address); FI_ADDR_NOTAVAIL when unknown. Takes the writers' lock
  // under a locking policy: the policy's variant is chosen at open.
  fi_addr_t reverse(const uint8_t* e) const noexcept { return reverse_(*this, e); }
  // What a completion reports as the source fi_addr a: the user id given
  // with FI_AV_USER_ID or fi_av_set_user_id, else a itself (FI_ADDR_NOTAVAIL
  // stays). Lock-free; one predictable branch while no user id is set.
  fi_addr_t report(fi_addr_t a) const noexcept { return table_.user_id(a); }
  const av_codec& codec() const noexcept { return *codec_; }
  // fi_av_attr::rx_ctx_bits: the top bits of an fi_addr that name a receive
  // context of a scalable endpoint (fi_rx_addr), 0 when none do.
  static constexpr int max_rx_ctx_bits = 32;
  int rx_bits() const noexcept { return rx_bits_; }
  // The receive context an fi_addr names (0 without rx bits), and the
  // address without it.
  uint64_t rx_index(fi_addr_t a) const noexcept { return rx_bits_ ? a >> (64 - rx_bits_) : 0; }
  fi_addr_t strip_rx(fi_addr_t a) const noexcept {
    return rx_bits_ && a != FI_ADDR_NOTAVAIL ? a & (~uint64_t{0} >> rx_bits_) : a;
  }
  // Live addresses.
  size_t count() const noexcept { return table_.live(); }
  domain& dom() const noexcept { return *domain_; }
  fi_av_type type() const noexcept { return type_; }
  bool shared() const noexcept { return shared_ != nullptr; }
  bool read_only() const noexcept { return reader_; }
  const av_table& table() const noexcept { return table_; }

  // ---- fi_ops_av, instantiated per lock policy ----
  template <class Lock>
  int insert(const void* addr, size_t count, fi_addr_t* fi_addr, uint64_t flags, void* context);
  template <class Lock>
  int insertsvc(const char* node, const char* service, fi_addr_t* fi_addr, uint64_t flags,
                void* context);
  template <class Lock>
  int insertsym(const char* node, size_t nodecnt, const char* service, size_t svccnt,
                fi_addr_t* fi_addr, uint64_t flags, void* context);
  template <class Lock>
  int remove(fi_addr_t* fi_addr, size_t count, uint64_t flags);
  template <class Lock>
  int lookup(fi_addr_t fi_addr, void* addr, size_t* addrlen);
  template <class Lock>
  int set_user_id(fi_addr_t fi_addr, fi_addr_t user_id, uint64_t flags);
  const char* straddr(const void* addr, char* buf, size_t* len) noexcept;

  int bind(struct fid* bfid, uint64_t flags);
  int close();

  // ---- endpoints that queue messages by source ----
  // An endpoint bound to this AV that labels queued messages with their
  // senders' fi_addr learns of every change, after the AV's own lock is
  // released: `inserted_only` when addresses were only added (a sender that
  // was unknown may now have an address), false after a remove or a user id
  // change (any label may be stale). Control path: the watcher list has a
  // lock of its own, held across the calls, so unwatch() returns only once
  // no call to that endpoint is under way. A watcher must not call into this
  // AV's insert or remove from its callback.
  using watch_fn = void (*)(void* obj, bool inserted_only) noexcept;
  void watch(void* obj, watch_fn fn);  // throws bad_alloc
  void unwatch(void* obj) noexcept;
  void notify(bool inserted_only) noexcept;

 private:
  template <class Lock>
  auto guard() const noexcept {
    if constexpr (std::is_same_v<Lock, null_lock>)
      return 0;
    else if constexpr (std::is_same_v<Lock, handoff_lock>)
      return handoff::guard{*handoff_};
    else
      return std::unique_lock<std::mutex>{mutex_};
  }
  template <class Lock>
  static fi_addr_t reverse_as(const av& self, const uint8_t* e) noexcept;
  template <class Lock>
  static fi_addr_t reverse_shared(const av& self, const uint8_t* e) noexcept;
  // FI_READ: adopts what the writer published, then looks again.
  const uint8_t* follow(fi_addr_t a) const noexcept;
  // A writer of a named AV: readers see the table as it is now.
  void publish(bool reshaped) noexcept;
  bool refuse_read_only(const char* what) const noexcept;  // logs
  int check_insert_flags(uint64_t flags, void* context, const fi_addr_t* fi_addr) const noexcept;
  bool user_ids_offered() const noexcept;  // logs when not
  // Adds n addresses; source(i, entry) encodes the i-th into `entry` and
  // returns 0 or a positive FI_E* code. Reports per fi_av(3), and logs the
  // failures unless the caller `warned` already.
  template <class Lock, class Source>
  int add_all(size_t n, Source&& source, fi_addr_t* fi_addr, uint64_t flags, void* context,
              bool warned = false);
  template <class Lock>
  int report(size_t n, const std::vector<std::pair<size_t, int>>& failed, size_t ok,
             fi_addr_t* fi_addr, void* context);
  template <class Lock>
  int add_resolved(const std::vector<uint8_t>& entries, const std::vector<int>& errs,
                   fi_addr_t* fi_addr, uint64_t flags, void* context, bool warned = false);

  ref<domain> domain_;
  const av_codec* codec_;
  fi_av_type type_;
  bool events_;  // FI_EVENT: inserts report to the bound EQ
  int rx_bits_;  // fi_av_attr::rx_ctx_bits
  fi_addr_t (*reverse_)(const av&, const uint8_t*) noexcept;
  mutable std::mutex mutex_;
  class handoff* handoff_ = nullptr;  // the handoff policy: the domain's
  ref<class eq> eq_;
  // Named AVs: the file, whether we only read it, and (readers, under the
  // lock) how far the reverse index has caught up with the writer.
  std::unique_ptr<av_file> shared_;
  bool reader_ = false;
  uint32_t indexed_bound_ = 0;
  uint64_t indexed_gen_ = 0;
  av_table table_;
  std::mutex watch_mutex_;
  std::vector<std::pair<void*, watch_fn>> watchers_;
};

}  // namespace weft::util
