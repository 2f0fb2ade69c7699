// SPDX-License-Identifier: MIT
// weft — shared-memory regions: create, attach, claim, reclaim, cleanup.
#include "prov/shm/region.hpp"

#include "core/log.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

namespace weft::shm {

namespace {

using ull = unsigned long long;

const fi_provider* or_core(const fi_provider* p) noexcept { return p ? p : core::core_provider(); }

// An mmap'ed range, unmapped unless released.
struct mapping {
  void* addr = MAP_FAILED;
  size_t len = 0;
  mapping(int fd, size_t n) noexcept
      : addr(::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)), len(n) {}
  mapping(const mapping&) = delete;
  ~mapping() {
    if (addr != MAP_FAILED) ::munmap(addr, len);
  }
  bool ok() const noexcept { return addr != MAP_FAILED; }
  std::byte* release() noexcept { return static_cast<std::byte*>(std::exchange(addr, MAP_FAILED)); }
};

// Removes a file we created unless the creation completed.
struct unlink_guard {
  std::string path;
  bool armed = true;
  ~unlink_guard() {
    if (armed) ::unlink(path.c_str());
  }
};

errc from_errno(int e) noexcept {
  switch (e) {
    case ENOENT: return errc::noent;
    case EACCES: return errc::access;
    case EPERM: return errc::perm;
    case ENOSPC: return errc::nospc;
    case EDQUOT: return errc::nospc;
    case ENOMEM: return errc::nomem;
    case EMFILE:
    case ENFILE: return errc::mfile;
    case EEXIST: return errc::addrinuse;
    default: return errc::io;
  }
}

uint64_t free_bytes(const std::string& dir) noexcept {
  struct statvfs sv;
  if (::statvfs(dir.c_str(), &sv) != 0) return 0;
  return static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize;
}

// fallocate, or posix_fallocate on a file system without it. errno-style.
int allocate_range(int fd, uint64_t off, uint64_t len) noexcept {
  int rc;
  do rc = ::fallocate(fd, 0, static_cast<off_t>(off), static_cast<off_t>(len));
  while (rc != 0 && errno == EINTR);
  if (rc == 0) return 0;
  if (errno != EOPNOTSUPP && errno != ENOSYS) return errno;
  return ::posix_fallocate(fd, static_cast<off_t>(off), static_cast<off_t>(len));
}

// Gives the pages lying entirely inside [off, off + len) back to the system.
void punch_range(int fd, uint64_t off, uint64_t len) noexcept {
  uint64_t first = proto::round_up(off, proto::page_bytes);
  uint64_t last = (off + len) / proto::page_bytes * proto::page_bytes;
  if (last > first)
    (void)::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(first),
                      static_cast<off_t>(last - first));
}

// Everything in a header but its state, checked against the file.
errc check_header(const proto::region_header& h, uint64_t file_bytes) noexcept {
  if (h.magic != proto::magic) return errc::inval;
  if (h.version != proto::version) return errc::opnotsupp;
  if (h.header_bytes != sizeof h || h.slot_bytes != proto::slot_bytes ||
      h.bounce_segments != proto::bounce_segments ||
      h.bounce_segment_bytes != proto::bounce_segment_bytes ||
      !proto::valid_shape(h.nrings, h.ring_slots))
    return errc::inval;
  proto::geometry g = proto::compute_geometry(h.nrings, h.ring_slots);
  if (h.fixed_bytes != g.fixed_bytes || h.control_offset != g.control_offset ||
      h.claim_bitmap_offset != g.claim_bitmap_offset || h.doorbell_offset != g.doorbell_offset ||
      h.blocks_offset != g.blocks_offset || h.block_bytes != g.block_bytes ||
      h.bounce_offset != g.bounce_offset || h.region_bytes != g.region_bytes ||
      h.region_bytes != file_bytes)
    return errc::inval;
  return errc::ok;
}

// Reads the header of an open region file without mapping it.
bool read_header(int fd, proto::region_header& h) noexcept {
  ssize_t n;
  do n = ::pread(fd, &h, sizeof h, 0);
  while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(sizeof h);
}

// Whether the region in `fd` (named with `pid`) belongs to a dead process.
bool region_is_stale(int fd, pid_t pid) noexcept {
  proc_status owner = read_proc_status(pid);
  if (!owner.exists || owner.zombie) return true;
  struct stat sb;
  proto::region_header h;
  if (::fstat(fd, &sb) != 0 || !read_header(fd, h)) return false;
  if (check_header(h, static_cast<uint64_t>(sb.st_size)) != errc::ok) return false;
  // A header naming another pid than the file name is not ours to judge.
  return h.owner_pid == pid && h.owner_start_time != owner.start_time;
}

// Parses "<pid>-<index>" exactly.
bool parse_pid_index(const char* s, pid_t& pid) noexcept {
  char* end = nullptr;
  errno = 0;
  long p = std::strtol(s, &end, 10);
  if (end == s || *end != '-' || p <= 0 || errno) return false;
  const char* idx = end + 1;
  unsigned long i = std::strtoul(idx, &end, 10);
  if (end == idx || *end != '\0' || i > UINT32_MAX) return false;
  pid = static_cast<pid_t>(p);
  return true;
}

}  // namespace

// ---- names and identities -------------------------------------------------------

std::string region_name(uint32_t uid, uint64_t pidns, pid_t pid, uint32_t endpoint_index) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "weft-shm-%" PRIu32 "-%" PRIu64 "-%d-%" PRIu32, uid, pidns,
                static_cast<int>(pid), endpoint_index);
  return buf;
}

sender_identity sender_identity::self(uint32_t endpoint_index, uint64_t cookie) noexcept {
  pid_t pid = ::getpid();
  return {pid, static_cast<uint32_t>(::geteuid()), pid_namespace_id(), process_start_time(pid),
          endpoint_index, cookie};
}

// ---- lifetime ---------------------------------------------------------------------

region::region(region&& o) noexcept { *this = std::move(o); }

region& region::operator=(region&& o) noexcept {
  if (this == &o) return *this;
  release_mapping();
  dir_ = std::move(o.dir_);
  name_ = std::move(o.name_);
  base_ = std::exchange(o.base_, nullptr);
  bytes_ = std::exchange(o.bytes_, 0);
  fd_ = std::move(o.fd_);
  dev_ = o.dev_;
  ino_ = o.ino_;
  geo_ = o.geo_;
  nrings_ = o.nrings_;
  ring_slots_ = o.ring_slots_;
  cache_layout();
  owner_ = std::exchange(o.owner_, false);
  log_ = o.log_;
  return *this;
}

region::~region() { release_mapping(); }

void region::release_mapping() noexcept {
  if (!base_) return;
  if (owner_) {
    std::atomic_ref<uint32_t>(hdr()->state).store(proto::region_closing, std::memory_order_release);
    // Unlink only the file we created: after a wrongful reclaim by someone
    // else the name may already belong to another region.
    struct stat sb;
    std::string p = dir_ + "/" + name_;
    if (::stat(p.c_str(), &sb) == 0 && sb.st_dev == dev_ && sb.st_ino == ino_) ::unlink(p.c_str());
  }
  ::munmap(base_, bytes_);
  base_ = nullptr;
  fd_.reset();
  owner_ = false;
}

// ---- create -------------------------------------------------------------------------

errc region::create(const region_params& p, region& out) noexcept try {
  const fi_provider* log = or_core(p.log);
  if (!proto::valid_shape(p.nrings, p.ring_slots)) {
    WEFT_WARN(log, FI_LOG_EP_CTRL,
              "shm region shape %" PRIu32 " rings x %" PRIu32 " slots: rings must be a multiple"
              " of 64 up to %" PRIu32 ", slots a power of two in [%" PRIu32 ", %" PRIu32 "]",
              p.nrings, p.ring_slots, proto::max_rings, proto::min_ring_slots,
              proto::max_ring_slots);
    return errc::inval;
  }
  proto::geometry g = proto::compute_geometry(p.nrings, p.ring_slots);
  if (p.reclaim_stale) reclaim_stale_regions(p.dir, log);

  struct statvfs sv;
  if (::statvfs(p.dir.c_str(), &sv) != 0) {
    int e = errno;
    WEFT_WARN(log, FI_LOG_EP_CTRL, "cannot statvfs %s: %s", p.dir.c_str(), std::strerror(e));
    return from_errno(e);
  }
  uint64_t avail = static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize;
  uint64_t need = g.fixed_bytes + p.headroom_bytes;
  if (avail < need) {
    WEFT_WARN(log, FI_LOG_EP_CTRL,
              "%s has %llu bytes free; a shm region needs %llu (%llu fixed + %llu for peers' "
              "rings): enlarge it (mount -o remount,size=...)",
              p.dir.c_str(), ull(avail), ull(need), ull(g.fixed_bytes), ull(p.headroom_bytes));
    return errc::nospc;
  }

  pid_t pid = ::getpid();
  uint32_t uid = static_cast<uint32_t>(::geteuid());
  uint64_t pidns = pid_namespace_id();
  uint64_t start = process_start_time(pid);
  std::string name = region_name(uid, pidns, pid, p.endpoint_index);
  std::string path = p.dir + "/" + name;

  util::unique_fd fd;
  for (int attempt = 0; attempt < 2 && !fd.valid(); ++attempt) {
    fd.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (fd.valid()) break;
    int e = errno;
    if (e == EEXIST && attempt == 0) {
      // Same uid, namespace, pid and index: a predecessor that had our pid
      // (stale: remove it) or this very process (the index is in use).
      util::unique_fd old{::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)};
      struct stat osb;
      if (!old.valid() || ::fstat(old.get(), &osb) != 0 || !S_ISREG(osb.st_mode) ||
          osb.st_uid != uid) {
        WEFT_WARN(log, FI_LOG_EP_CTRL, "%s exists and is not a region of this user",
                  path.c_str());
        return errc::addrinuse;
      }
      proto::region_header h;
      if (read_header(old.get(), h) && h.magic == proto::magic && h.owner_pid == pid &&
          h.owner_start_time == start) {
        WEFT_WARN(log, FI_LOG_EP_CTRL, "shm region %s exists: endpoint index %" PRIu32
                  " is already in use by this process", path.c_str(), p.endpoint_index);
        return errc::addrinuse;
      }
      WEFT_INFO(log, FI_LOG_EP_CTRL, "removing %s, left by an earlier process with pid %d",
                path.c_str(), static_cast<int>(pid));
      ::unlink(path.c_str());
      continue;
    }
    WEFT_WARN(log, FI_LOG_EP_CTRL, "cannot create %s: %s", path.c_str(), std::strerror(e));
    return from_errno(e);
  }
  if (!fd.valid()) return errc::addrinuse;
  unlink_guard guard{path};

  // The mode given to open was masked by the umask; set it exactly.
  if (::fchmod(fd.get(), 0600) != 0 || ::ftruncate(fd.get(), static_cast<off_t>(g.region_bytes)) != 0) {
    int e = errno;
    WEFT_WARN(log, FI_LOG_EP_CTRL, "cannot size %s to %llu bytes: %s", path.c_str(),
              ull(g.region_bytes), std::strerror(e));
    return from_errno(e);
  }
  if (int e = allocate_range(fd.get(), 0, g.fixed_bytes); e != 0) {
    WEFT_WARN(log, FI_LOG_EP_CTRL,
              "cannot allocate the %llu fixed bytes of %s: %s (%llu bytes free)",
              ull(g.fixed_bytes), path.c_str(), std::strerror(e), ull(free_bytes(p.dir)));
    return from_errno(e);
  }
  mapping map(fd.get(), g.region_bytes);
  if (!map.ok()) {
    int e = errno;
    WEFT_WARN(log, FI_LOG_EP_CTRL, "cannot map %s (%llu bytes): %s", path.c_str(),
              ull(g.region_bytes), std::strerror(e));
    return from_errno(e);
  }
  struct stat sb;
  if (::fstat(fd.get(), &sb) != 0) return from_errno(errno);

  auto* h = static_cast<proto::region_header*>(map.addr);
  h->magic = proto::magic;
  h->version = proto::version;
  h->header_bytes = sizeof *h;
  h->owner_uid = uid;
  h->owner_pid = pid;
  h->endpoint_index = p.endpoint_index;
  h->owner_pidns = pidns;
  h->owner_start_time = start;
  h->nrings = p.nrings;
  h->ring_slots = p.ring_slots;
  h->slot_bytes = proto::slot_bytes;
  h->bounce_segments = proto::bounce_segments;
  h->bounce_segment_bytes = proto::bounce_segment_bytes;
  h->fixed_bytes = g.fixed_bytes;
  h->control_offset = g.control_offset;
  h->claim_bitmap_offset = g.claim_bitmap_offset;
  h->doorbell_offset = g.doorbell_offset;
  h->blocks_offset = g.blocks_offset;
  h->block_bytes = g.block_bytes;
  h->bounce_offset = g.bounce_offset;
  h->region_bytes = g.region_bytes;
  std::atomic_ref<uint32_t>(h->state).store(proto::region_ready, std::memory_order_release);

  region r;
  r.dir_ = p.dir;
  r.name_ = std::move(name);
  r.bytes_ = g.region_bytes;
  r.base_ = map.release();
  r.fd_ = std::move(fd);
  r.dev_ = sb.st_dev;
  r.ino_ = sb.st_ino;
  r.geo_ = g;
  r.nrings_ = p.nrings;
  r.ring_slots_ = p.ring_slots;
  r.cache_layout();
  r.owner_ = true;
  r.log_ = log;
  guard.armed = false;
  out = std::move(r);
  return errc::ok;
} catch (const std::bad_alloc&) {
  return errc::nomem;
}

// ---- attach ---------------------------------------------------------------------------

errc region::attach(const std::string& dir, const std::string& name, region& out,
                    const fi_provider* log_prov) noexcept try {
  const fi_provider* log = or_core(log_prov);
  std::string path = dir + "/" + name;
  util::unique_fd fd{::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC)};
  if (!fd.valid()) {
    int e = errno;
    // No region is no endpoint: the caller says so, in its own terms (one
    // line per refusal).
    if (e != ENOENT)
      WEFT_WARN(log, FI_LOG_EP_CTRL, "cannot open shm region %s: %s", path.c_str(), std::strerror(e));
    return from_errno(e);
  }
  struct stat sb;
  if (::fstat(fd.get(), &sb) != 0) return from_errno(errno);
  if (!S_ISREG(sb.st_mode) || sb.st_uid != ::geteuid()) {
    WEFT_WARN(log, FI_LOG_EP_CTRL, "%s is not a region of this user", path.c_str());
    return errc::access;
  }
  if (static_cast<size_t>(sb.st_size) < proto::page_bytes * 2) return errc::again;  // being made
  mapping map(fd.get(), static_cast<size_t>(sb.st_size));
  if (!map.ok()) {
    int e = errno;
    WEFT_WARN(log, FI_LOG_EP_CTRL, "cannot map %s: %s", path.c_str(), std::strerror(e));
    return from_errno(e);
  }
  auto* h = static_cast<proto::region_header*>(map.addr);
  uint32_t state = std::atomic_ref<uint32_t>(h->state).load(std::memory_order_acquire);
  if (state == proto::region_initialising) return errc::again;
  if (state != proto::region_ready) return errc::noent;  // closing
  if (errc e = check_header(*h, static_cast<uint64_t>(sb.st_size)); e != errc::ok) {
    WEFT_WARN(log, FI_LOG_EP_CTRL, "%s: %s", path.c_str(),
              e == errc::opnotsupp ? "a region of another protocol version"
                                   : "not a valid shm region");
    return e;
  }
  if (h->owner_pidns == pid_namespace_id()) {
    proc_status owner = read_proc_status(h->owner_pid);
    if (!owner.exists || owner.zombie || owner.start_time != h->owner_start_time) {
      WEFT_INFO(log, FI_LOG_EP_CTRL, "%s: its owner (pid %d) is gone", path.c_str(),
                static_cast<int>(h->owner_pid));
      return errc::noent;
    }
  }
  region r;
  r.dir_ = dir;
  r.name_ = name;
  r.bytes_ = static_cast<size_t>(sb.st_size);
  r.geo_ = proto::compute_geometry(h->nrings, h->ring_slots);
  r.nrings_ = h->nrings;
  r.ring_slots_ = h->ring_slots;
  r.base_ = map.release();
  r.cache_layout();
  r.dev_ = sb.st_dev;
  r.ino_ = sb.st_ino;
  r.log_ = log;
  out = std::move(r);  // fd closes here: a peer holds no descriptor per region
  return errc::ok;
} catch (const std::bad_alloc&) {
  return errc::nomem;
}

// ---- space -------------------------------------------------------------------------------

errc region::allocate(uint64_t off, uint64_t len, const char* what) noexcept {
  util::unique_fd reopened;
  int fd = fd_.get();
  if (!fd_.valid()) {
    std::string p = dir_ + "/" + name_;
    reopened.reset(::open(p.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
    struct stat sb;
    if (!reopened.valid() || ::fstat(reopened.get(), &sb) != 0 || sb.st_dev != dev_ ||
        sb.st_ino != ino_) {
      WEFT_INFO(log_, FI_LOG_EP_CTRL, "shm region %s was removed", p.c_str());
      return errc::noent;
    }
    fd = reopened.get();
  }
  if (int e = allocate_range(fd, off, len); e != 0) {
    WEFT_WARN(log_, FI_LOG_EP_CTRL,
              "cannot allocate %s (%llu bytes) in %s/%s: %s (%llu bytes free)", what, ull(len),
              dir_.c_str(), name_.c_str(), std::strerror(e), ull(free_bytes(dir_)));
    return from_errno(e);
  }
  return errc::ok;
}

// ---- claims -------------------------------------------------------------------------------

errc region::claim(const sender_identity& me, uint32_t& ring) noexcept {
  uint32_t words = nrings_ / 64;
  // Start each sender at a different word so that many first contacts at
  // once do not all fight over word 0.
  uint32_t first = (static_cast<uint32_t>(me.pid) * 0x9E3779B1u + me.endpoint_index) % words;
  for (uint32_t i = 0; i < words; ++i) {
    uint32_t w = (first + i) % words;
    std::atomic_ref<uint64_t> bitmap(claim_word(w));
    uint64_t cur = bitmap.load(std::memory_order_relaxed);
    while (~cur) {
      uint64_t bit = ~cur & (cur + 1);  // lowest clear bit
      uint64_t old = bitmap.fetch_or(bit, std::memory_order_acq_rel);
      if (old & bit) {
        cur = old | bit;
        continue;
      }
      uint32_t r = w * 64 + static_cast<uint32_t>(std::countr_zero(bit));
      if (errc e = allocate(geo_.blocks_offset + r * geo_.block_bytes, geo_.block_bytes, "a ring");
          e != errc::ok) {
        bitmap.fetch_and(~bit, std::memory_order_release);
        return e;
      }
      proto::ring_block_ctrl& b = block(r);
      std::atomic_ref<uint32_t> state(b.claim.state);
      state.store(proto::claim_claiming, std::memory_order_relaxed);
      b.claim.generation += 1;
      b.claim.sender_pid = me.pid;
      b.claim.sender_uid = me.uid;
      b.claim.sender_pidns = me.pidns;
      b.claim.sender_start_time = me.start_time;
      b.claim.sender_endpoint = me.endpoint_index;
      b.claim.sender_cookie = me.cookie;
      for (auto& seg : b.bounce) {
        std::atomic_ref<uint64_t>(seg.state).store(0, std::memory_order_relaxed);
        seg.xfer = seg.offset = 0;
      }
      // No split transfer: seq 0 is never published (a previous sender's
      // may have been cut short).
      std::atomic_ref<uint64_t>(b.split.claim).store(0, std::memory_order_relaxed);
      ring_init(ring_mem(r));
      // Before the claim is published: the owner then scans this word.
      std::atomic_ref<uint64_t>(hwm_line()->claimed_words)
          .fetch_or(uint64_t{1} << w, std::memory_order_release);
      std::atomic_ref<uint32_t> hwm(hwm_line()->claim_hwm);
      uint32_t h = hwm.load(std::memory_order_relaxed);
      while (h < r + 1 && !hwm.compare_exchange_weak(h, r + 1, std::memory_order_release,
                                                     std::memory_order_relaxed)) {
      }
      state.store(proto::claim_active, std::memory_order_release);
      ring = r;
      return errc::ok;
    }
  }
  WEFT_WARN(log_, FI_LOG_EP_CTRL, "shm region %s: all %" PRIu32 " rings are claimed",
            name_.c_str(), nrings_);
  return errc::busy;
}

void region::close_ring(uint32_t ring) noexcept {
  std::atomic_ref<uint32_t>(block(ring).claim.state)
      .store(proto::claim_closed, std::memory_order_release);
  (void)ring_doorbell(ring);  // no wake: the owner reclaims the ring at its leisure
}

errc region::reserve_bounce(uint32_t ring) noexcept {
  return allocate(geo_.bounce_offset + ring * geo_.bounce_ring_bytes, geo_.bounce_ring_bytes,
                  "bounce buffers");
}

errc region::reclaim_ring(uint32_t ring, bool sender_dead) noexcept {
  if (!owner_) return errc::perm;
  if (ring >= nrings_) return errc::inval;
  uint64_t bit = uint64_t{1} << (ring % 64);
  std::atomic_ref<uint64_t> bitmap(claim_word(ring / 64));
  if (!(bitmap.load(std::memory_order_acquire) & bit)) return errc::ok;  // free already
  std::atomic_ref<uint32_t> state(block(ring).claim.state);
  uint32_t s = state.load(std::memory_order_acquire);
  if (s != proto::claim_closed && !sender_dead) return errc::busy;
  // The ring's control lines stay (the generation counts on); its slots and
  // bounce segments go back to the system until the next claim allocates.
  uint64_t off = geo_.blocks_offset + ring * geo_.block_bytes;
  punch_range(fd_.get(), off + sizeof(proto::ring_block_ctrl),
              geo_.block_bytes - sizeof(proto::ring_block_ctrl));
  punch_range(fd_.get(), geo_.bounce_offset + ring * geo_.bounce_ring_bytes,
              geo_.bounce_ring_bytes);
  std::atomic_ref<uint64_t>(doorbell(ring / 64).bits).fetch_and(~bit, std::memory_order_relaxed);
  state.store(proto::claim_free, std::memory_order_relaxed);
  bitmap.fetch_and(~bit, std::memory_order_release);
  return errc::ok;
}

// ---- stale regions ---------------------------------------------------------------------

size_t reclaim_stale_regions(const std::string& dir, const fi_provider* log_prov) noexcept try {
  const fi_provider* log = or_core(log_prov);
  std::unique_ptr<DIR, int (*)(DIR*)> d{::opendir(dir.c_str()), ::closedir};
  if (!d) return 0;
  char prefix[64];
  int plen = std::snprintf(prefix, sizeof prefix, "weft-shm-%u-%" PRIu64 "-",
                           static_cast<unsigned>(::geteuid()), pid_namespace_id());
  int dfd = ::dirfd(d.get());
  size_t removed = 0;
  while (dirent* e = ::readdir(d.get())) {
    if (std::strncmp(e->d_name, prefix, static_cast<size_t>(plen)) != 0) continue;
    pid_t pid;
    if (!parse_pid_index(e->d_name + plen, pid)) continue;
    util::unique_fd fd{::openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)};
    struct stat sb, now;
    if (!fd.valid() || ::fstat(fd.get(), &sb) != 0 || !S_ISREG(sb.st_mode) ||
        sb.st_uid != ::geteuid() || !region_is_stale(fd.get(), pid))
      continue;
    // Unlink what we judged, not a file that replaced it meanwhile.
    if (::fstatat(dfd, e->d_name, &now, AT_SYMLINK_NOFOLLOW) != 0 || now.st_ino != sb.st_ino ||
        now.st_dev != sb.st_dev)
      continue;
    if (::unlinkat(dfd, e->d_name, 0) == 0) {
      ++removed;
      WEFT_INFO(log, FI_LOG_EP_CTRL, "removed %s/%s: its owner (pid %d) is gone (exited, or the pid now names another process)", dir.c_str(),
                e->d_name, static_cast<int>(pid));
    }
  }
  return removed;
} catch (const std::bad_alloc&) {
  return 0;
}

}  // namespace weft::shm
