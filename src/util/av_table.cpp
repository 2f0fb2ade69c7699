// SPDX-License-Identifier: MIT
// weft — the storage behind the address vector: entries in chunks, the
// reverse index, and user ids (see av.hpp).
#include "util/av.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>

namespace weft::util {

// ---- zeroed_block --------------------------------------------------------

zeroed_block::zeroed_block(size_t bytes) {
  if (bytes < huge) {
    p_ = std::calloc(1, bytes);
    if (!p_) throw std::bad_alloc{};
    bytes_ = bytes;
    return;
  }
  // Over-map by 2 MiB and trim, so the block starts on a huge-page boundary.
  size_t size = (bytes + huge - 1) & ~(huge - 1);
  void* raw =
      mmap(nullptr, size + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc{};
  auto base = reinterpret_cast<uintptr_t>(raw);
  uintptr_t aligned = (base + huge - 1) & ~(huge - 1);
  if (aligned > base) munmap(raw, aligned - base);
  if (size_t tail = base + size + huge - (aligned + size))
    munmap(reinterpret_cast<void*>(aligned + size), tail);
  p_ = reinterpret_cast<void*>(aligned);
  bytes_ = size;
  madvise(p_, size, MADV_HUGEPAGE);  // a request: without THP, plain pages
}

zeroed_block::~zeroed_block() {
  if (!p_) return;
  if (bytes_ < huge)
    std::free(p_);
  else
    munmap(p_, bytes_);
}

// ---- av_table ----------------------------------------------------------

namespace {

template <size_t N>
bool equal_n(const uint8_t* a, const uint8_t* b, size_t) noexcept {
  return std::memcmp(a, b, N) == 0;
}
bool equal_any(const uint8_t* a, const uint8_t* b, size_t size) noexcept {
  return std::memcmp(a, b, size) == 0;
}

}  // namespace

av_table::av_table(const av_codec& codec)
    : codec_(codec),
      entry_size_(codec.entry_size),
      live_offset_(codec.live_offset),
      equal_(entry_size_ == 6    ? equal_n<6>
             : entry_size_ == 22 ? equal_n<22>
                                 : equal_any) {}

av_table::~av_table() = default;

size_t av_table::bytes() const noexcept {
  size_t b = chunks_.size() * chunk_entries * entry_size_;
  b += chunks_.capacity() * sizeof(chunks_[0]);
  b += id_chunks_.size() * chunk_entries * sizeof(fi_addr_t);
  b += id_chunks_.capacity() * sizeof(id_chunks_[0]);
  b += dirs_bytes_ + dirs_.capacity() * sizeof(dirs_[0]);
  b += block_.bytes();
  b += free_.capacity() * sizeof(uint32_t);
  return b;
}

void av_table::reserve(size_t n) {
  size_t fresh = n > free_.size() ? n - free_.size() : 0;
  size_t need = size_t{bound_.load(std::memory_order_relaxed)} + fresh;
  if (need > chunks_.size() * chunk_entries) grow_chunks(need);
  uint64_t want = 2 * uint64_t{live() + n};
  if (want > cap_) {
    uint64_t c = std::max<uint64_t>({want, cap_ + cap_ / 5, 64});
    // Whole huge pages once the index is that large, else 64-slot steps.
    uint64_t step = c * sizeof(uint32_t) >= zeroed_block::huge ? zeroed_block::huge / 4 : 64;
    rehash((c + step - 1) / step * step, bound_.load(std::memory_order_relaxed));
  }
}

namespace {

// A chunk of user ids, each entry's id its own index until one is set.
std::unique_ptr<fi_addr_t[]> fresh_ids(size_t chunk, size_t n) {
  auto ids = std::make_unique_for_overwrite<fi_addr_t[]>(n);
  for (size_t j = 0; j < n; ++j) ids[j] = chunk * n + j;
  return ids;
}

}  // namespace

void av_table::grow_chunks(size_t entries) {
  if (ext_) {
    // The directory covers the caller's memory already; the caller checks
    // the capacity before it inserts.
    if (entries > ext_cap_) throw std::bad_alloc{};
    return;
  }
  size_t want = (entries + chunk_entries - 1) >> chunk_shift;
  size_t have = chunks_.size();
  const bool ids = ids_on_.load(std::memory_order_relaxed);
  // Allocate everything first; the commit below cannot throw.
  std::vector<std::unique_ptr<uint8_t[]>> fresh;
  std::vector<std::unique_ptr<fi_addr_t[]>> fresh_id;
  fresh.reserve(want - have);
  for (size_t i = have; i < want; ++i)
    fresh.push_back(std::make_unique<uint8_t[]>(size_t{chunk_entries} * entry_size_));  // zeroed
  if (ids) {
    fresh_id.reserve(want - have);
    for (size_t i = have; i < want; ++i) fresh_id.push_back(fresh_ids(i, chunk_entries));
    id_chunks_.reserve(want);
  }
  chunks_.reserve(want);
  std::unique_ptr<chunk_ref[]> bigger;
  size_t bigger_cap = 0;
  if (want > dir_cap_) {
    bigger_cap = std::max<size_t>({want, dir_cap_ * 2, 4});
    bigger = std::make_unique<chunk_ref[]>(bigger_cap);
    dirs_.reserve(dirs_.size() + 1);
  }

  chunk_ref* dir = bigger ? bigger.get() : dirs_.back().get();
  if (bigger && have) std::copy_n(dirs_.back().get(), have, dir);
  for (size_t k = 0; k < fresh.size(); ++k) {
    // Beyond bound_: no reader looks here yet.
    dir[chunks_.size()] = {fresh[k].get(), ids ? fresh_id[k].get() : nullptr};
    chunks_.push_back(std::move(fresh[k]));
    if (ids) id_chunks_.push_back(std::move(fresh_id[k]));
  }
  if (bigger) {
    dirs_.push_back(std::move(bigger));
    dir_cap_ = bigger_cap;
    dirs_bytes_ += bigger_cap * sizeof(chunk_ref);
    dir_.store(dir, std::memory_order_release);
  }
}

void av_table::enable_ids() {
  if (ids_on_.load(std::memory_order_relaxed)) return;
  // Ids are per process; a named AV (the av refuses them) has none.
  if (ext_) throw std::bad_alloc{};
  size_t have = chunks_.size();
  if (have) {
    // Readers may be in the current directory: a new one carries the ids.
    std::vector<std::unique_ptr<fi_addr_t[]>> fresh;
    fresh.reserve(have);
    for (size_t i = 0; i < have; ++i) fresh.push_back(fresh_ids(i, chunk_entries));
    auto dir = std::make_unique<chunk_ref[]>(dir_cap_);
    dirs_.reserve(dirs_.size() + 1);
    id_chunks_.reserve(have);
    const chunk_ref* cur = dirs_.back().get();
    for (size_t i = 0; i < have; ++i) dir[i] = {cur[i].entries, fresh[i].get()};
    for (auto& f : fresh) id_chunks_.push_back(std::move(f));
    dir_.store(dir.get(), std::memory_order_release);
    dirs_.push_back(std::move(dir));
    dirs_bytes_ += dir_cap_ * sizeof(chunk_ref);
  }
  ids_on_.store(true, std::memory_order_release);
}

void av_table::set_user_id(uint32_t i, fi_addr_t id) noexcept {
  fi_addr_t* ids = dir_.load(std::memory_order_relaxed)[i >> chunk_shift].ids;
  std::atomic_ref<fi_addr_t>(ids[i & (chunk_entries - 1)]).store(id, std::memory_order_relaxed);
}

void av_table::use_storage(uint8_t* base, size_t entries) {
  size_t n = entries >> chunk_shift;
  auto dir = std::make_unique<chunk_ref[]>(n);
  for (size_t k = 0; k < n; ++k)
    dir[k] = {base + k * size_t{chunk_entries} * entry_size_, nullptr};
  dirs_.push_back(std::move(dir));
  dir_cap_ = n;
  dirs_bytes_ += n * sizeof(chunk_ref);
  ext_ = base;
  ext_cap_ = n * chunk_entries;
  dir_.store(dirs_.back().get(), std::memory_order_release);
}

void av_table::follow(uint32_t bound, size_t live) const noexcept {
  uint32_t cur = bound_.load(std::memory_order_relaxed);
  // Two threads may follow at once: the larger bound wins. Never beyond the
  // directory, whatever the other process wrote.
  bound = static_cast<uint32_t>(std::min<size_t>(bound, ext_cap_));
  while (cur < bound && !bound_.compare_exchange_weak(cur, bound, std::memory_order_release,
                                                       std::memory_order_relaxed)) {
  }
  live_.store(live, std::memory_order_relaxed);
}

uint32_t av_table::index_published(uint32_t from, bool all) {
  // One snapshot: follow() may raise the bound meanwhile, and what lies
  // beyond it is indexed next time, exactly once.
  uint32_t bound = bound_.load(std::memory_order_acquire);
  // Sized for every index ever handed out (a bound on the live ones, which
  // the other process may change while we read): probing always ends.
  uint64_t want = 2 * uint64_t{bound};
  if (all || want > cap_) {
    // A rebuild alone keeps the size: removals do not grow the index.
    uint64_t c = want > cap_ ? std::max<uint64_t>({want, cap_ + cap_ / 5, 64}) : cap_;
    uint64_t step = c * sizeof(uint32_t) >= zeroed_block::huge ? zeroed_block::huge / 4 : 64;
    rehash((c + step - 1) / step * step, bound);
    return bound;
  }
  for (uint32_t i = from; i < bound; ++i) {
    const uint8_t* e = slot_of(i);
    if (e[live_offset_] | e[live_offset_ + 1]) index_insert_at(i, home(e));
  }
  return bound;
}

void av_table::rehash(uint64_t new_cap, uint32_t bound) {
  zeroed_block fresh(new_cap * sizeof(uint32_t));
  block_ = std::move(fresh);
  slots_ = static_cast<uint32_t*>(block_.get());
  cap_ = new_cap;
  // Entries in order, homes computed a group ahead and their slots
  // prefetched: the misses overlap instead of queueing behind each probe.
  constexpr uint32_t group = 16;
  uint64_t homes[group];
  for (uint32_t base = 0; base < bound; base += group) {
    uint32_t n = std::min(group, bound - base);
    for (uint32_t k = 0; k < n; ++k) {
      const uint8_t* e = slot_of(base + k);
      homes[k] = (e[live_offset_] | e[live_offset_ + 1]) ? home(e) : cap_;
      if (homes[k] != cap_) __builtin_prefetch(&slots_[homes[k]], 1);
    }
    for (uint32_t k = 0; k < n; ++k)
      if (homes[k] != cap_) index_insert_at(base + k, homes[k]);
  }
}

void av_table::index_insert_at(uint32_t i, uint64_t pos) noexcept {
  // No duplicate check (fi_av(3) leaves duplicates undefined): finding a
  // free slot reads only the index, never other entries.
  while (slots_[pos]) pos = next(pos);
  slots_[pos] = i + 1;
}

void av_table::prefetch(const uint8_t* entry) const noexcept {
  if (cap_) __builtin_prefetch(&slots_[home(entry)], 1);
}

uint32_t av_table::add(const uint8_t* entry) noexcept {
  uint32_t bound = bound_.load(std::memory_order_relaxed);
  uint32_t i = bound;
  if (!free_.empty()) {
    std::pop_heap(free_.begin(), free_.end(), std::greater<>{});
    i = free_.back();
    free_.pop_back();
  }
  uint8_t* dst = slot_of(i);
  std::memcpy(dst, entry, entry_size_);
  index_insert_at(i, home(dst));
  if (ids_on_.load(std::memory_order_relaxed)) set_user_id(i, i);  // a reused index forgets its id
  live_.store(live() + 1, std::memory_order_relaxed);  // one writer at a time
  // Publishes the entry to lock-free readers of get().
  if (i == bound) bound_.store(bound + 1, std::memory_order_release);
  return i;
}

bool av_table::remove(uint64_t i) noexcept {
  if (!get(i)) return false;
  uint32_t idx = static_cast<uint32_t>(i);
  uint8_t* e = slot_of(idx);
  uint64_t hole = home(e);
  while (slots_[hole] != idx + 1) hole = next(hole);
  // Backward-shift deletion: pull later members of the probe run into the
  // hole unless that would put one before its home slot.
  for (uint64_t j = next(hole);; j = next(j)) {
    uint32_t s = slots_[j];
    if (!s) break;
    uint64_t h = home(slot_of(s - 1));
    bool stays = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
    if (stays) continue;
    slots_[hole] = s;
    hole = j;
  }
  slots_[hole] = 0;
  std::memset(e, 0, entry_size_);
  live_.store(live() - 1, std::memory_order_relaxed);
  free_.push_back(idx);  // capacity reserved by the caller (reserve_removals)
  std::push_heap(free_.begin(), free_.end(), std::greater<>{});
  return true;
}

void av_table::reserve_removals(size_t n) {
  free_.reserve(free_.size() + std::min(n, live()));
}

uint32_t av_table::find(const uint8_t* entry) const noexcept {
  if (!cap_) return none;
  for (uint64_t pos = home(entry);; pos = next(pos)) {
    uint32_t s = slots_[pos];
    if (!s) return none;
    if (equal_(slot_of(s - 1), entry, entry_size_)) return s - 1;
  }
}

}  // namespace weft::util
