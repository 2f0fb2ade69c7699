// SPDX-License-Identifier: MIT
// weft — the file behind a named address vector (see av_shared.hpp).
#include "util/av_shared.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <new>

#include "core/log.hpp"
#include "util/av.hpp"

namespace weft::util {

namespace {

constexpr char dir[] = "/dev/shm";
constexpr uint64_t magic = 0x3130766174666577ull;  // "weftav01"
constexpr uint32_t version = 1;

errc from_errno(int e) noexcept {
  switch (e) {
    case ENOENT: return errc::noent;
    case EACCES: return errc::access;
    case EPERM: return errc::perm;
    case ENOSPC:
    case EDQUOT: return errc::nospc;
    case ENOMEM: return errc::nomem;
    case EMFILE:
    case ENFILE: return errc::mfile;
    default: return errc::io;
  }
}

// fallocate (posix_fallocate where the file system lacks it); errno-style.
int allocate(int fd, uint64_t off, uint64_t len) noexcept {
  int rc;
  do rc = ::fallocate(fd, 0, static_cast<off_t>(off), static_cast<off_t>(len));
  while (rc != 0 && errno == EINTR);
  if (rc == 0) return 0;
  if (errno != EOPNOTSUPP && errno != ENOSYS) return errno;
  return ::posix_fallocate(fd, static_cast<off_t>(off), static_cast<off_t>(len));
}

// Only a regular file of our own, not writable by others, is trusted.
bool ours(const struct stat& sb) noexcept {
  return S_ISREG(sb.st_mode) && sb.st_uid == ::geteuid() && !(sb.st_mode & 077);
}

bool same_file(const std::string& path, uint64_t dev, uint64_t ino) noexcept {
  struct stat sb;
  return ::lstat(path.c_str(), &sb) == 0 && sb.st_dev == dev && sb.st_ino == ino;
}

// An unnamed file in `dir` (O_TMPFILE), or a uniquely named one that the
// caller unlinks once it has been linked under its real name.
unique_fd make_unnamed(std::string& tmp_name) noexcept {
  unique_fd fd{::open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)};
  if (fd.valid()) return fd;
  tmp_name = std::string{dir} + "/weft-av-tmp-XXXXXX";
  fd.reset(::mkostemp(tmp_name.data(), O_CLOEXEC));
  if (!fd.valid()) tmp_name.clear();
  return fd;
}

// Gives the file in fd the name `path` unless that name exists (EEXIST).
int link_as(int fd, const std::string& tmp_name, const std::string& path) noexcept {
  int rc;
  if (tmp_name.empty()) {
    char proc[64];
    std::snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    rc = ::linkat(AT_FDCWD, proc, AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW);
  } else {
    rc = ::link(tmp_name.c_str(), path.c_str());
  }
  return rc == 0 ? 0 : errno;
}

}  // namespace

std::string av_file::path_for(const char* name) {
  if (!name || !*name) return {};
  std::string s = std::string{dir} + "/weft-av-" + std::to_string(::geteuid()) + "-";
  const size_t dir_part = sizeof dir;  // "<dir>/"
  static constexpr char hex[] = "0123456789abcdef";
  for (const char* p = name; *p; ++p) {
    auto c = static_cast<unsigned char>(*p);
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
    if (plain) {
      s += static_cast<char>(c);
    } else {
      s += '%';
      s += hex[c >> 4];
      s += hex[c & 15];
    }
    if (s.size() - dir_part > 255) return {};  // NAME_MAX
  }
  return s;
}

errc av_file::open(const char* name, bool writer, const av_codec& codec, fi_av_type& type,
                   size_t count, const fi_provider* log, std::unique_ptr<av_file>& out) noexcept
    try {
  std::string path = path_for(name);
  if (path.empty()) {
    WEFT_WARN(log, FI_LOG_AV, "AV name \"%s\" is empty or too long for a file name", name);
    return errc::inval;
  }
  if (!writer) return attach(path, codec, type, log, out);
  size_t cap = std::clamp(count, min_capacity, max_capacity);
  cap = (cap + av_table::chunk_entries - 1) / av_table::chunk_entries * av_table::chunk_entries;
  return create(path, codec, type, cap, log, out);
} catch (const std::bad_alloc&) {
  return errc::nomem;
}

errc av_file::create(const std::string& path, const av_codec& codec, fi_av_type type,
                     size_t capacity, const fi_provider* log, std::unique_ptr<av_file>& out) {
  // A bounded number of rounds: each lost race means another opener made
  // progress (created the file, or replaced a stale one).
  for (int round = 0; round < 8; ++round) {
    unique_fd stale{::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC)};
    if (stale.valid()) {
      struct stat sb;
      if (::fstat(stale.get(), &sb) != 0 || !ours(sb)) {
        WEFT_WARN(log, FI_LOG_AV, "%s exists and is not a shared AV file of this user",
                  path.c_str());
        return errc::access;
      }
      if (::flock(stale.get(), LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK) return from_errno(errno);
        int32_t pid = 0;
        if (::pread(stale.get(), &pid, sizeof pid, offsetof(av_file_header, writer_pid)) !=
            static_cast<ssize_t>(sizeof pid))
          pid = 0;
        WEFT_WARN(log, FI_LOG_AV,
                  "shared AV %s is open read-write by another opener (pid %d): one writer at a "
                  "time; open it with FI_READ",
                  path.c_str(), pid);
        return errc::busy;
      }
      // Its writer is gone. Holding its lock, we are the only one allowed
      // to remove it; readers that still map it keep their copy.
      WEFT_INFO(log, FI_LOG_AV, "replacing %s, left by a writer that exited", path.c_str());
      if (same_file(path, sb.st_dev, sb.st_ino)) ::unlink(path.c_str());
      // `stale` stays locked until the new file has its name, so a racing
      // opener of the old file cannot take it for stale again and unlink ours.
    } else if (errno != ENOENT) {
      int e = errno;
      WEFT_WARN(log, FI_LOG_AV, "cannot open %s: %s", path.c_str(), std::strerror(e));
      return e == ELOOP ? errc::access : from_errno(e);
    }

    std::string tmp_name;
    unique_fd fd = make_unnamed(tmp_name);
    if (!fd.valid()) {
      int e = errno;
      WEFT_WARN(log, FI_LOG_AV, "cannot create a file in %s: %s", dir, std::strerror(e));
      return from_errno(e);
    }
    struct tmp_guard {
      std::string& n;
      ~tmp_guard() {
        if (!n.empty()) ::unlink(n.c_str());
      }
    } guard{tmp_name};
    size_t bytes = header_bytes + capacity * codec.entry_size;
    // Uncontended: nobody can see the file yet. Taken before it has a name.
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0 || ::fchmod(fd.get(), 0600) != 0 ||
        ::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
      int e = errno;
      WEFT_WARN(log, FI_LOG_AV, "cannot set up %s: %s", path.c_str(), std::strerror(e));
      return from_errno(e);
    }
    if (int e = allocate(fd.get(), 0, header_bytes)) {
      WEFT_WARN(log, FI_LOG_AV, "cannot allocate the header of %s: %s", path.c_str(),
                std::strerror(e));
      return from_errno(e);
    }
    void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (base == MAP_FAILED) {
      int e = errno;
      WEFT_WARN(log, FI_LOG_AV, "cannot map %s: %s", path.c_str(), std::strerror(e));
      return from_errno(e);
    }
    std::unique_ptr<av_file> f{new av_file};
    f->base_ = static_cast<uint8_t*>(base);
    f->bytes_ = bytes;
    f->capacity_ = capacity;
    f->entry_size_ = codec.entry_size;
    f->writer_ = true;
    auto* h = new (base) av_file_header{};
    h->magic = magic;
    h->version = version;
    h->header_bytes = header_bytes;
    h->addr_format = codec.addr_format;
    h->entry_size = codec.entry_size;
    h->live_offset = codec.live_offset;
    h->type = type;
    h->capacity = capacity;
    h->file_bytes = bytes;
    h->writer_pid = ::getpid();
    // Complete before it has a name: readers never see a partial header.
    if (int e = link_as(fd.get(), tmp_name, path)) {
      if (e == EEXIST) continue;  // another creator won this round
      WEFT_WARN(log, FI_LOG_AV, "cannot name %s: %s", path.c_str(), std::strerror(e));
      return from_errno(e);
    }
    struct stat sb;
    if (::fstat(fd.get(), &sb) != 0) {
      ::unlink(path.c_str());
      return from_errno(errno);
    }
    f->dev_ = sb.st_dev;
    f->ino_ = sb.st_ino;
    f->fd_ = std::move(fd);
    f->path_ = path;
    out = std::move(f);
    return errc::ok;
  }
  WEFT_WARN(log, FI_LOG_AV, "shared AV %s: too many concurrent creators", path.c_str());
  return errc::busy;
}

errc av_file::attach(const std::string& path, const av_codec& codec, fi_av_type& type,
                     const fi_provider* log, std::unique_ptr<av_file>& out) {
  unique_fd fd{::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)};
  if (!fd.valid()) {
    int e = errno;
    if (e == ENOENT)
      WEFT_WARN(log, FI_LOG_AV, "FI_READ: shared AV %s does not exist", path.c_str());
    else
      WEFT_WARN(log, FI_LOG_AV, "cannot open %s: %s", path.c_str(), std::strerror(e));
    return e == ELOOP ? errc::access : from_errno(e);
  }
  struct stat sb;
  av_file_header h{};
  if (::fstat(fd.get(), &sb) != 0 || !ours(sb)) {
    WEFT_WARN(log, FI_LOG_AV, "%s is not a shared AV file of this user", path.c_str());
    return errc::access;
  }
  if (::pread(fd.get(), &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h) || h.magic != magic ||
      h.version != version || h.header_bytes != header_bytes || h.capacity == 0 ||
      h.capacity > max_capacity || h.capacity % av_table::chunk_entries ||
      h.file_bytes != header_bytes + h.capacity * h.entry_size ||
      static_cast<uint64_t>(sb.st_size) != h.file_bytes) {
    WEFT_WARN(log, FI_LOG_AV, "%s is not a weft shared AV file", path.c_str());
    return errc::inval;
  }
  if (h.addr_format != codec.addr_format || h.entry_size != codec.entry_size ||
      h.live_offset != codec.live_offset) {
    WEFT_WARN(log, FI_LOG_AV, "shared AV %s holds addresses of format %u, this domain uses %u",
              path.c_str(), h.addr_format, codec.addr_format);
    return errc::inval;
  }
  auto file_type = static_cast<fi_av_type>(h.type);
  if (type != FI_AV_UNSPEC && type != file_type) {
    WEFT_WARN(log, FI_LOG_AV, "shared AV %s is of type %d, type %d asked for", path.c_str(),
              h.type, static_cast<int>(type));
    return errc::inval;
  }
  void* base = ::mmap(nullptr, h.file_bytes, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) {
    int e = errno;
    WEFT_WARN(log, FI_LOG_AV, "cannot map %s: %s", path.c_str(), std::strerror(e));
    return from_errno(e);
  }
  std::unique_ptr<av_file> f{new av_file};
  f->base_ = static_cast<uint8_t*>(base);
  f->bytes_ = h.file_bytes;
  f->capacity_ = h.capacity;
  f->entry_size_ = h.entry_size;
  f->path_ = path;
  f->fd_ = std::move(fd);
  type = file_type;
  out = std::move(f);
  return errc::ok;
}

av_file::~av_file() {
  // Only the file we created: the name cannot have been given to another
  // while we hold the lock, but a user may have removed it by hand.
  if (writer_ && same_file(path_, dev_, ino_)) ::unlink(path_.c_str());
  if (base_) ::munmap(base_, bytes_);
  // fd_ closes last: that releases the writer's lock.
}

errc av_file::ensure(size_t n) noexcept {
  if (n <= allocated_) return errc::ok;
  if (n > capacity_) return errc::nospc;
  // Whole chunks at a time: few calls, and the table fills chunk by chunk.
  size_t want = std::min(capacity_, (n + av_table::chunk_entries - 1) / av_table::chunk_entries *
                                        av_table::chunk_entries);
  if (int e = allocate(fd_.get(), header_bytes + allocated_ * entry_size_,
                       (want - allocated_) * entry_size_))
    return from_errno(e);
  allocated_ = want;
  return errc::ok;
}

void av_file::publish(uint32_t bound, size_t live, bool reshaped) noexcept {
  av_file_header& h = header();
  h.live.store(live, std::memory_order_relaxed);
  // Release: a reader that sees the new bound or gen sees the entries.
  if (reshaped) h.gen.fetch_add(1, std::memory_order_release);
  h.bound.store(bound, std::memory_order_release);
}

}  // namespace weft::util
