// SPDX-License-Identifier: MIT
// weft — memory regions (`man fi_mr`) and the per-domain key map that the
// RMA and atomic data paths consult on every remote access.
//
// Registration is synchronous and purely software: a region remembers its
// address ranges, access rights and key; the provider validates each remote
// access with mr_map::verify (or find + mr::check) and copies through the
// returned local pointer. Nothing is pinned, so fi_mr_refresh has nothing to
// update.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <sys/uio.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <unordered_map>

#include "core/errc.hpp"
#include "util/object.hpp"

namespace weft::util {

class cntr;
class domain;
class mr;

// The most address ranges one registration may name (the domain's
// mr_iov_limit).
inline constexpr size_t mr_iov_limit = 4;
// Keys are 8 bytes (mr_key_size); raw keys are the same 8 bytes.
inline constexpr size_t mr_key_size = sizeof(uint64_t);
// The access bits fi_mr(3) defines; any other bit is an invalid argument.
inline constexpr uint64_t mr_access_bits =
    FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_COLLECTIVE;

// The FI_MR_* bits a domain's mr_mode stands for: the pre-1.5 values
// FI_MR_BASIC and FI_MR_SCALABLE become the bits fi_mr(3) equates them with.
constexpr int effective_mr_mode(int mode) noexcept {
  if (mode == FI_MR_BASIC) return FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  if (mode == FI_MR_SCALABLE) return 0;
  return mode;
}

// The domain's registered regions by key.
//
// Locking: under FI_THREAD_DOMAIN the application serialises every call on
// the domain and its objects, and with manual progress the provider only
// looks keys up from inside those calls, so the map takes no lock at all.
// Every other model lets a thread register or close an MR while another
// drives progress on an endpoint of the same domain (under
// FI_THREAD_COMPLETION too: MRs are domain objects, not tied to a completion
// context), so there lookups take a reader lock and registration a writer
// lock. A reader lock does not serialise readers against each other, and an
// unordered_map lookup never allocates. The choice is made once, here.
class mr_map {
 public:
  explicit mr_map(fi_threading threading, fi_progress data_progress = FI_PROGRESS_MANUAL) noexcept;
  mr_map(const mr_map&) = delete;
  mr_map& operator=(const mr_map&) = delete;

  // ---- data path (providers) ----
  // The region registered under `key`, or null. Without a lock policy the
  // pointer is stable; with one, it stays valid only while the application
  // cannot close that MR (use verify() to check and translate atomically).
  const mr* find(uint64_t key) const noexcept;
  // find + mr::check under the map's lock: the one call a provider makes to
  // serve a remote read/write/atomic. Unknown keys answer errc::access, like
  // every other protection failure (see mr::check).
  errc verify(uint64_t key, uint64_t addr, size_t len, uint64_t access,
              void** local) const noexcept;
  errc verify_iov(uint64_t key, uint64_t addr, size_t len, uint64_t access, iovec* iov,
                  size_t* count) const noexcept;

  // A served remote access completed on the regions `keys` name (several
  // may name one region): each region counts it once on every counter bound
  // to it (fi_mr_bind, FI_RMA_EVENT) whose flags meet `kinds` (FI_REMOTE_WRITE
  // for what modified the region, FI_REMOTE_READ for what read it). While no
  // region of the domain has a counter, this is one load and a branch.
  // `key_of(i)` gives the key of the operation's i-th range, i < n.
  static constexpr size_t max_counted_ranges = 16;
  template <class KeyOf>
  void count_remote(size_t n, KeyOf&& key_of, uint64_t kinds) const noexcept {
    if (bound_.load(std::memory_order_relaxed) == 0) [[likely]]
      return;
    uint64_t keys[max_counted_ranges];
    n = n < max_counted_ranges ? n : max_counted_ranges;
    for (size_t i = 0; i < n; ++i) keys[i] = key_of(i);
    count_remote_slow(keys, n, kinds);
  }

  size_t size() const noexcept;
  bool locked() const noexcept { return locked_; }

 private:
  friend class mr;
  void count_remote_slow(const uint64_t* keys, size_t n, uint64_t kinds) const noexcept;
  std::atomic<size_t> bound_{0};  // counter bindings over the domain's regions
  // Enters `m` under a key of the provider's choosing (prov_key) or under
  // `requested` (errc::nokey if taken). May throw std::bad_alloc.
  errc insert(mr& m, bool prov_key, uint64_t requested, uint64_t* key);
  void erase(uint64_t key) noexcept;
  const mr* lookup(uint64_t key) const noexcept;

  bool locked_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<uint64_t, mr*> by_key_;
  uint64_t next_key_ = 1;
};

// What a provider keeps beside a region for as long as it lives (a link
// provider's registrations with its cores); destroyed with the region.
struct mr_companion {
  virtual ~mr_companion() = default;
  // fi_mr_bind of counter `c` with `flags` (FI_REMOTE_WRITE / FI_REMOTE_READ),
  // checked by util and about to be recorded: a provider whose accesses
  // are counted elsewhere (lnx: by its cores' regions) binds it there too.
  // 0, or the -FI_E* that refuses the bind.
  virtual int bind_counter(cntr& c, uint64_t flags) noexcept {
    (void)c, (void)flags;
    return 0;
  }
};

// One registered region. mem_desc (fi_mr_desc) points at the mr itself;
// key (fi_mr_key) is the key in the domain's map, or FI_KEY_NOTAVAIL when
// the domain uses FI_MR_RAW (fi_mr_raw_attr then gives it).
class mr : public fid_object<mr, fid_mr> {
 public:
  // fi_mr_reg / fi_mr_regv / fi_mr_regattr all end here; the domain's
  // thunks build `attr` (only the fields the caller's API version has).
  static int reg(domain& dom, const fi_mr_attr& attr, uint64_t flags, fid_mr** out) noexcept;
  // The domain's fi_control(FI_MAP_RAW_MR) and (FI_UNMAP_KEY): a raw key is
  // the 8-byte little-endian encoding of the key, so mapping only decodes.
  static int map_raw(const domain& dom, struct fi_mr_map_raw* arg) noexcept;
  static int unmap_key(const domain& dom, const uint64_t* key) noexcept;

  // The region behind a descriptor the application passed as `desc` (the
  // value fi_mr_desc returned); null stays null. A descriptor whose fid does
  // not carry this class's ops table (another object, another provider's
  // region) gives null rather than a wrong cast.
  static const mr* from_desc(const void* desc) noexcept {
    auto* f = static_cast<const fid_mr*>(desc);
    if (!f || f->fid.ops != &fid_thunks<mr, fid_mr>::table) return nullptr;
    return static_cast<const mr*>(f);
  }

  struct segment {
    uint64_t addr;  // virtual address
    uint64_t len;
  };

  mr(domain& dom, const fi_mr_attr& attr, uint64_t flags, const segment* segs, size_t nsegs);
  ~mr() override;

  // ---- data path (providers) ----
  // A remote access of `len` bytes at RMA address `addr` that needs the
  // rights in `access` (FI_REMOTE_READ, FI_REMOTE_WRITE, ...).
  // Addresses: with FI_MR_VIRT_ADDR an address is the target's virtual
  // address and the range must lie inside one registered range (adjacent
  // ranges are joined at registration); otherwise it is a byte offset into
  // the concatenation of the registered ranges, in registration order.
  // Errors (fi_mr(3) calls the key a "remote protection key": every failure
  // to be covered by it is a protection failure, reported as permission
  // denied): errc::access for missing rights, a disabled region, or any byte
  // outside the region (computed without overflow); errc::toosmall when the
  // range spans more registered ranges than the caller's iov array holds
  // (*count is set to the number needed; check() holds one).
  errc check(uint64_t addr, size_t len, uint64_t access, void** local) const noexcept;
  errc check_iov(uint64_t addr, size_t len, uint64_t access, iovec* iov,
                 size_t* count) const noexcept;
  // A local buffer given with this region as its desc (FI_MR_LOCAL): the
  // range must lie in one registered range and the rights (FI_SEND,
  // FI_RECV, FI_READ, FI_WRITE) must have been granted.
  errc check_local(const void* buf, size_t len, uint64_t access) const noexcept;

  uint64_t map_key() const noexcept { return map_key_; }
  uint64_t access() const noexcept { return access_; }
  uint64_t reg_flags() const noexcept { return flags_; }
  // The RMA address of the region's first byte: its virtual address with
  // FI_MR_VIRT_ADDR, else 0.
  uint64_t rma_base() const noexcept { return virt_addr_ ? segs_[0].addr : 0; }
  uint64_t length() const noexcept { return total_; }
  const segment* segments() const noexcept { return segs_.data(); }
  size_t segment_count() const noexcept { return nsegs_; }
  bool enabled() const noexcept { return enabled_.load(std::memory_order_acquire); }
  domain& dom() const noexcept { return *domain_; }
  // The provider's companion (domain_hooks::mr_attach), or null.
  mr_companion* companion() const noexcept { return companion_.get(); }
  void attach(std::unique_ptr<mr_companion> c) noexcept { companion_ = std::move(c); }

  // ---- the fid ops ----
  int close();
  int bind(struct fid* bfid, uint64_t flags);
  int control(int command, void* arg);

 private:
  friend class mr_map;
  int raw_attr(struct fi_mr_raw_attr* arg) const noexcept;
  int bind_counter(cntr& c, uint64_t flags);
  // mr_map::count_remote, for this region: under the map's reader lock.
  void count(uint64_t kinds) const noexcept;

  ref<domain> domain_;
  uint64_t access_;
  uint64_t flags_;
  uint64_t total_ = 0;
  uint64_t map_key_ = 0;
  bool in_map_ = false;
  bool virt_addr_;
  std::atomic<bool> enabled_{true};
  size_t nsegs_;
  std::array<segment, mr_iov_limit> segs_{};
  // fi_mr_bind counters, each with the events it counts; written under the
  // map's writer lock, read under its reader lock.
  struct counter_binding {
    ref<cntr> counter;
    uint64_t flags = 0;
  };
  static constexpr size_t max_counters = 4;
  std::array<counter_binding, max_counters> counters_{};
  size_t ncounters_ = 0;
  std::unique_ptr<mr_companion> companion_;
};

}  // namespace weft::util
