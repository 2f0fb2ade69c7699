// SPDX-License-Identifier: MIT
// weft — memory regions and the key map.
#include "util/mr.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>

#include "core/log.hpp"
#include "util/cntr.hpp"
#include "util/domain.hpp"

namespace weft::util {

namespace {

// Registration flags this implementation understands. FI_RMA_EVENT only marks
// the region as one that counters will watch; everything else (FI_MR_DMABUF,
// FI_RMA_PMEM, the FI_HMEM_* placement flags, FI_MR_SINGLE_USE) needs support
// weft does not have, and fi_mr(3) answers -FI_EBADFLAGS for that.
constexpr uint64_t supported_reg_flags = FI_RMA_EVENT;

// Raw keys travel as 8 little-endian bytes whatever the host order.
void encode_key(uint64_t key, uint8_t* out) noexcept {
  for (size_t i = 0; i < mr_key_size; ++i) out[i] = static_cast<uint8_t>(key >> (8 * i));
}
uint64_t decode_key(const uint8_t* in) noexcept {
  uint64_t key = 0;
  for (size_t i = 0; i < mr_key_size; ++i) key |= static_cast<uint64_t>(in[i]) << (8 * i);
  return key;
}

// Validates the address ranges of a registration and joins ranges that
// follow each other in memory. Returns the number of segments, 0 on error.
size_t collect_segments(const fi_provider* prov, const fi_mr_attr& attr, mr::segment* segs) {
  if (attr.iov_count == 0 || attr.iov_count > mr_iov_limit) {
    WEFT_WARN(prov, FI_LOG_MR, "%zu address ranges; a registration takes 1 to %zu", attr.iov_count,
              mr_iov_limit);
    return 0;
  }
  if (!attr.mr_iov) {
    WEFT_WARN(prov, FI_LOG_MR, "registration without its address ranges (mr_iov is NULL)");
    return 0;
  }
  size_t n = 0;
  uint64_t total = 0;
  for (size_t i = 0; i < attr.iov_count; ++i) {
    auto base = reinterpret_cast<uintptr_t>(attr.mr_iov[i].iov_base);
    uint64_t len = attr.mr_iov[i].iov_len;
    // fi_mr(3): the length "must be > 0". Address 0 is never user memory.
    if (!base || !len) {
      WEFT_WARN(prov, FI_LOG_MR, "address range %zu is empty or NULL (%p, %zu bytes)", i,
                attr.mr_iov[i].iov_base, attr.mr_iov[i].iov_len);
      return 0;
    }
    if (len > UINTPTR_MAX - base) {
      WEFT_WARN(prov, FI_LOG_MR, "address range %zu (%p, %zu bytes) wraps around memory", i,
                attr.mr_iov[i].iov_base, attr.mr_iov[i].iov_len);
      return 0;
    }
    // Overlapping ranges could add up past 2^64 and defeat the bounds check
    // on offsets, which relies on the total length.
    if (len > UINT64_MAX - total) {
      WEFT_WARN(prov, FI_LOG_MR, "the address ranges add up to more than 2^64 bytes");
      return 0;
    }
    total += len;
    if (n && segs[n - 1].addr + segs[n - 1].len == base) {
      segs[n - 1].len += len;  // cannot overflow: base + len did not
    } else {
      segs[n++] = {base, len};
    }
  }
  return n;
}

// Everything in `attr` and `flags` that fi_mr(3) constrains, apart from the
// address ranges and the key.
errc check_attr(const domain& dom, const fi_mr_attr& attr, uint64_t flags) noexcept {
  auto* prov = dom.provider();
  if (flags & ~supported_reg_flags) {
    WEFT_WARN(prov, FI_LOG_MR, "unsupported registration flags 0x%llx",
              static_cast<unsigned long long>(flags & ~supported_reg_flags));
    return errc::badflags;
  }
  if (attr.access & ~mr_access_bits) {
    WEFT_WARN(prov, FI_LOG_MR, "unknown access bits 0x%llx",
              static_cast<unsigned long long>(attr.access & ~mr_access_bits));
    return errc::inval;
  }
  if (attr.offset) {
    WEFT_WARN(prov, FI_LOG_MR, "offset is reserved and must be 0, not %llu",
              static_cast<unsigned long long>(attr.offset));
    return errc::inval;
  }
  // fi_mr(3): auth_key is ignored before API 1.5, iface without FI_HMEM.
  if (FI_VERSION_GE(dom.api_version(), FI_VERSION(1, 5)) && attr.auth_key_size) {
    WEFT_WARN(prov, FI_LOG_MR, "per-region authorization keys are not supported");
    return errc::nosys;
  }
  int iface;  // read as an int: C lets the enum field hold any value
  std::memcpy(&iface, &attr.iface, sizeof iface);
  if ((dom.caps() & FI_HMEM) && iface != FI_HMEM_SYSTEM) {
    WEFT_WARN(prov, FI_LOG_MR, "device memory (iface %d) is not supported", iface);
    return errc::nosys;
  }
  return errc::ok;
}

}  // namespace

// ---------------------------------------------------------------- mr_map

mr_map::mr_map(fi_threading threading, fi_progress data_progress) noexcept
    : locked_(!(threading == FI_THREAD_DOMAIN && data_progress != FI_PROGRESS_AUTO)) {}

const mr* mr_map::lookup(uint64_t key) const noexcept {
  auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : it->second;
}

const mr* mr_map::find(uint64_t key) const noexcept {
  if (!locked_) return lookup(key);
  std::shared_lock g{mutex_};
  return lookup(key);
}

errc mr_map::verify(uint64_t key, uint64_t addr, size_t len, uint64_t access,
                    void** local) const noexcept {
  std::shared_lock g{mutex_, std::defer_lock};
  if (locked_) g.lock();
  const mr* m = lookup(key);
  return m ? m->check(addr, len, access, local) : errc::access;
}

errc mr_map::verify_iov(uint64_t key, uint64_t addr, size_t len, uint64_t access, iovec* iov,
                        size_t* count) const noexcept {
  std::shared_lock g{mutex_, std::defer_lock};
  if (locked_) g.lock();
  const mr* m = lookup(key);
  return m ? m->check_iov(addr, len, access, iov, count) : errc::access;
}

size_t mr_map::size() const noexcept {
  std::shared_lock g{mutex_, std::defer_lock};
  if (locked_) g.lock();
  return by_key_.size();
}

errc mr_map::insert(mr& m, bool prov_key, uint64_t requested, uint64_t* key) {
  std::unique_lock g{mutex_, std::defer_lock};
  if (locked_) g.lock();
  uint64_t k = requested;
  if (prov_key) {
    // Keys are handed out in sequence, so a closed region's key is not given
    // to the next one (a stale key at a peer fails rather than hitting new
    // memory) until 2^64 registrations later; FI_KEY_NOTAVAIL is skipped.
    do {
      k = next_key_++;
    } while (k == FI_KEY_NOTAVAIL || by_key_.contains(k));
  }
  if (!by_key_.try_emplace(k, &m).second) return errc::nokey;
  *key = k;
  return errc::ok;
}

void mr_map::erase(uint64_t key) noexcept {
  std::unique_lock g{mutex_, std::defer_lock};
  if (locked_) g.lock();
  by_key_.erase(key);
}

// -------------------------------------------------------------------- mr

int mr::reg(domain& dom, const fi_mr_attr& attr, uint64_t flags, fid_mr** out) noexcept {
  auto* prov = dom.provider();
  if (!out) {
    WEFT_WARN(prov, FI_LOG_MR, "memory registration needs a result pointer");
    return to_fi(errc::inval);
  }
  if (errc e = check_attr(dom, attr, flags); e != errc::ok) return to_fi(e);
  segment segs[mr_iov_limit];
  size_t nsegs = collect_segments(prov, attr, segs);
  if (!nsegs) return to_fi(errc::inval);

  const int mode = effective_mr_mode(dom.mr_mode());
  const bool prov_key = mode & FI_MR_PROV_KEY;
  // With FI_MR_PROV_KEY the requested key is ignored (fi_mr(3)). Otherwise
  // any 8-byte key is in range except the one fi_mr_key uses to say "no key".
  if (!prov_key && attr.requested_key == FI_KEY_NOTAVAIL) {
    WEFT_WARN(prov, FI_LOG_MR, "requested key FI_KEY_NOTAVAIL cannot name a region");
    return to_fi(errc::keyrejected);
  }
  return abi_guard([&]() -> int {
    auto m = std::make_unique<mr>(dom, attr, flags, segs, nsegs);
    if (errc e = dom.mrs().insert(*m, prov_key, attr.requested_key, &m->map_key_); e != errc::ok) {
      WEFT_WARN(prov, FI_LOG_MR, "requested key %llu is already in use",
                static_cast<unsigned long long>(attr.requested_key));
      return to_fi(e);
    }
    m->in_map_ = true;
    m->key = (mode & FI_MR_RAW) ? FI_KEY_NOTAVAIL : m->map_key_;
    // FI_MR_ENDPOINT regions, and FI_MR_RMA_EVENT regions that counters will
    // watch, start disabled: fi_mr(3) wants them enabled after binding.
    if ((mode & FI_MR_ENDPOINT) || ((mode & FI_MR_RMA_EVENT) && (flags & FI_RMA_EVENT)))
      m->enabled_.store(false, std::memory_order_release);
    *out = m.release();
    return 0;
  });
}

mr::mr(domain& dom, const fi_mr_attr& attr, uint64_t flags, const segment* segs, size_t nsegs)
    : fid_object(FI_CLASS_MR, attr.context),
      domain_(&dom),
      access_(attr.access),
      flags_(flags),
      virt_addr_(effective_mr_mode(dom.mr_mode()) & FI_MR_VIRT_ADDR),
      nsegs_(nsegs) {
  for (size_t i = 0; i < nsegs; ++i) {
    segs_[i] = segs[i];
    total_ += segs[i].len;  // collect_segments checked that the sum fits
  }
  mem_desc = static_cast<fid_mr*>(this);
}

mr::~mr() {
  if (in_map_) domain_->mrs().erase(map_key_);
  domain_->mrs().bound_.fetch_sub(ncounters_, std::memory_order_relaxed);
}

void mr::count(uint64_t kinds) const noexcept {
  for (size_t i = 0; i < ncounters_; ++i)
    if (counters_[i].flags & kinds) counters_[i].counter->inc();
}

void mr_map::count_remote_slow(const uint64_t* keys, size_t n, uint64_t kinds) const noexcept {
  std::shared_lock g{mutex_, std::defer_lock};
  if (locked_) g.lock();
  for (size_t i = 0; i < n; ++i) {
    // An operation counts once per region, however many of its ranges
    // fall in it.
    if (std::find(keys, keys + i, keys[i]) != keys + i) continue;
    if (const mr* m = lookup(keys[i])) m->count(kinds);
  }
}

int mr::bind_counter(cntr& c, uint64_t flags) {
  auto* prov = domain_->provider();
  mr_map& map = domain_->mrs();
  std::unique_lock g{map.mutex_, std::defer_lock};
  if (map.locked_) g.lock();
  for (size_t i = 0; i < ncounters_; ++i)
    if (counters_[i].counter.get() == &c) {
      counters_[i].flags |= flags;  // bound again: it counts both kinds
      return 0;
    }
  if (ncounters_ == max_counters) {
    WEFT_WARN(prov, FI_LOG_MR, "a memory region takes at most %zu counters", max_counters);
    return to_fi(errc::nospc);
  }
  counters_[ncounters_].counter.reset(&c);
  counters_[ncounters_].flags = flags;
  ++ncounters_;
  map.bound_.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

int mr::close() { return close_if_unused(domain_->provider(), FI_LOG_MR, "memory region"); }

int mr::bind(struct fid* bfid, uint64_t flags) {
  auto* prov = domain_->provider();
  if (!is_class(bfid, FI_CLASS_CNTR) && !is_class(bfid, FI_CLASS_EP)) {
    WEFT_WARN(prov, FI_LOG_MR, "an MR binds to a counter or an endpoint, not class %zu",
              bfid->fclass);
    return to_fi(errc::inval);
  }
  // fi_mr(3): -FI_ENOSYS when events on access to regions are not reported.
  if (is_class(bfid, FI_CLASS_EP)) {
    WEFT_WARN(prov, FI_LOG_MR, "binding MRs to endpoints (FI_MR_ENDPOINT) is not supported");
    return to_fi(errc::nosys);
  }
  constexpr uint64_t events = FI_REMOTE_WRITE | FI_REMOTE_READ;
  if (!flags || (flags & ~events)) {
    WEFT_WARN(prov, FI_LOG_MR,
              "MR to counter bind flags are FI_REMOTE_WRITE and/or FI_REMOTE_READ, not %#llx",
              static_cast<unsigned long long>(flags));
    return to_fi(errc::badflags);
  }
  if (!(domain_->caps() & FI_RMA_EVENT)) {
    WEFT_WARN(prov, FI_LOG_MR, "this domain reports no events on access to its regions "
              "(no FI_RMA_EVENT): a counter cannot be bound to a region");
    return to_fi(errc::nosys);
  }
  // Only a counter of this library (its ops table) is a cntr to cast to.
  if (bfid->ops != &fid_thunks<cntr, fid_cntr>::table) {
    WEFT_WARN(prov, FI_LOG_MR, "the counter is not one this provider opened");
    return to_fi(errc::inval);
  }
  auto& c = *cntr::from(bfid);
  if (&c.dom() != domain_.get()) {
    WEFT_WARN(prov, FI_LOG_MR, "the counter belongs to another domain");
    return to_fi(errc::inval);
  }
  if (companion_)
    if (int ret = companion_->bind_counter(c, flags)) return ret;
  return bind_counter(c, flags);
}

int mr::raw_attr(struct fi_mr_raw_attr* arg) const noexcept {
  auto* prov = domain_->provider();
  if (!arg || !arg->key_size) {
    WEFT_WARN(prov, FI_LOG_MR, "fi_mr_raw_attr needs key_size");
    return to_fi(errc::inval);
  }
  if (arg->flags) {
    WEFT_WARN(prov, FI_LOG_MR, "fi_mr_raw_attr takes no flags");
    return to_fi(errc::badflags);
  }
  // fi_mr(3): too small a buffer answers -FI_ETOOSMALL with the size needed.
  if (*arg->key_size < mr_key_size) {
    *arg->key_size = mr_key_size;
    return to_fi(errc::toosmall);
  }
  if (!arg->raw_key) {
    WEFT_WARN(prov, FI_LOG_MR, "fi_mr_raw_attr needs a raw_key buffer");
    return to_fi(errc::inval);
  }
  encode_key(map_key_, arg->raw_key);
  *arg->key_size = mr_key_size;
  if (arg->base_addr) *arg->base_addr = rma_base();
  return 0;
}

int mr::control(int command, void* arg) {
  auto* prov = domain_->provider();
  switch (command) {
    case FI_GET_RAW_MR:
      return raw_attr(static_cast<struct fi_mr_raw_attr*>(arg));
    case FI_REFRESH: {
      // Nothing is pinned: every access goes through the virtual address, so
      // there are no page mappings to update.
      auto* mod = static_cast<fi_mr_modify*>(arg);
      if (!mod) return to_fi(errc::inval);
      if (mod->flags) {
        WEFT_WARN(prov, FI_LOG_MR, "fi_mr_refresh takes no flags");
        return to_fi(errc::badflags);
      }
      return 0;
    }
    case FI_ENABLE:
      enabled_.store(true, std::memory_order_release);
      return 0;
    default:
      return to_fi(errc::nosys);
  }
}

int mr::map_raw(const domain& dom, struct fi_mr_map_raw* arg) noexcept {
  auto* prov = dom.provider();
  if (!arg || !arg->raw_key || !arg->key) {
    WEFT_WARN(prov, FI_LOG_MR, "fi_mr_map_raw needs raw_key and key");
    return to_fi(errc::inval);
  }
  if (arg->flags) {
    WEFT_WARN(prov, FI_LOG_MR, "fi_mr_map_raw takes no flags");
    return to_fi(errc::badflags);
  }
  if (arg->key_size != mr_key_size) {
    WEFT_WARN(prov, FI_LOG_MR, "raw keys are %zu bytes, not %zu", mr_key_size, arg->key_size);
    return to_fi(errc::inval);
  }
  *arg->key = decode_key(arg->raw_key);
  return 0;
}

int mr::unmap_key(const domain& dom, const uint64_t* key) noexcept {
  if (!key) {
    WEFT_WARN(dom.provider(), FI_LOG_MR, "fi_mr_unmap_key needs a key");
    return to_fi(errc::inval);
  }
  return 0;  // mapping allocated nothing
}

// ------------------------------------------------------------- data path

errc mr::check_iov(uint64_t addr, size_t len, uint64_t access, iovec* iov,
                   size_t* count) const noexcept {
  if ((access & ~access_) || !enabled()) return errc::access;
  if (virt_addr_) {
    const segment* hit = nullptr;
    for (size_t i = 0; i < nsegs_ && !hit; ++i) {
      const segment& s = segs_[i];
      if (addr >= s.addr && addr - s.addr <= s.len && len <= s.len - (addr - s.addr)) hit = &s;
    }
    if (!hit) return errc::access;
    if (!len) {
      *count = 0;
      return errc::ok;
    }
    if (*count < 1) {
      *count = 1;
      return errc::toosmall;
    }
    iov[0] = {reinterpret_cast<void*>(static_cast<uintptr_t>(addr)), len};
    *count = 1;
    return errc::ok;
  }
  if (addr > total_ || len > total_ - addr) return errc::access;
  if (!len) {
    *count = 0;
    return errc::ok;
  }
  // Offsets run through the ranges in registration order; addr < total_ here.
  size_t i = 0;
  uint64_t off = addr;
  while (off >= segs_[i].len) off -= segs_[i++].len;
  size_t n = 0;
  const size_t room = *count;
  for (uint64_t left = len; left; ++i, off = 0) {
    uint64_t chunk = std::min<uint64_t>(left, segs_[i].len - off);
    if (n < room)
      iov[n] = {reinterpret_cast<void*>(static_cast<uintptr_t>(segs_[i].addr + off)),
                static_cast<size_t>(chunk)};
    ++n;
    left -= chunk;
  }
  *count = n;
  return n > room ? errc::toosmall : errc::ok;
}

errc mr::check(uint64_t addr, size_t len, uint64_t access, void** local) const noexcept {
  iovec one;
  size_t n = 1;
  if (errc e = check_iov(addr, len, access, &one, &n); e != errc::ok) return e;
  if (n) {
    *local = one.iov_base;
    return errc::ok;
  }
  // A zero-length access still gets a real address inside (or at the end
  // of) the region, so that a memcpy of 0 bytes has a valid pointer.
  if (virt_addr_) {
    *local = reinterpret_cast<void*>(static_cast<uintptr_t>(addr));
    return errc::ok;
  }
  uint64_t off = addr;
  size_t i = 0;
  while (i + 1 < nsegs_ && off >= segs_[i].len) off -= segs_[i++].len;
  *local = reinterpret_cast<void*>(static_cast<uintptr_t>(segs_[i].addr + off));
  return errc::ok;
}

errc mr::check_local(const void* buf, size_t len, uint64_t access) const noexcept {
  if ((access & ~access_) || !enabled()) return errc::access;
  auto addr = reinterpret_cast<uintptr_t>(buf);
  for (size_t i = 0; i < nsegs_; ++i) {
    const segment& s = segs_[i];
    if (addr >= s.addr && addr - s.addr <= s.len && len <= s.len - (addr - s.addr)) return errc::ok;
  }
  return errc::access;
}

}  // namespace weft::util
