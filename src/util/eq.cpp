// SPDX-License-Identifier: MIT
// weft — the event queue.
#include "util/eq.hpp"

#include "core/info.hpp"
#include "core/log.hpp"
#include "util/yield.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>

namespace weft::util {

namespace {

eq* self(fid_eq* e) noexcept { return eq::from(e); }

ssize_t read_thunk(fid_eq* e, uint32_t* event, void* buf, size_t len, uint64_t flags) noexcept {
  return self(e)->read(event, buf, len, flags);
}
ssize_t readerr_thunk(fid_eq* e, fi_eq_err_entry* buf, uint64_t flags) noexcept {
  return self(e)->readerr(buf, flags);
}
ssize_t write_thunk(fid_eq* e, uint32_t event, const void* buf, size_t len,
                    uint64_t flags) noexcept {
  return self(e)->write(event, buf, len, flags);
}
ssize_t sread_thunk(fid_eq* e, uint32_t* event, void* buf, size_t len, int timeout,
                    uint64_t flags) noexcept {
  return self(e)->sread(event, buf, len, timeout, flags);
}
const char* strerror_thunk(fid_eq* e, int prov_errno, const void* err_data, char* buf,
                           size_t len) noexcept {
  return self(e)->strerror(prov_errno, err_data, buf, len);
}

constexpr fi_ops_eq eq_ops = {
    .size = sizeof(fi_ops_eq),
    .read = read_thunk,
    .readerr = readerr_thunk,
    .write = write_thunk,
    .sread = sread_thunk,
    .strerror = strerror_thunk,
};

// Connection events: a fi_eq_cm_entry followed by connection data, which the
// application receives only as far as its buffer reaches (fi_eq(3)).
bool is_cm_event(uint32_t event) noexcept {
  return event == FI_CONNREQ || event == FI_CONNECTED || event == FI_SHUTDOWN;
}

bool eq_has_event(struct fid* f) noexcept { return eq::from(f)->has_events(); }

}  // namespace

wait_member eq_wait_member(struct fid* f) noexcept { return eq::from(f)->member(); }

// ---- fi_eq_open / fi_close ----

int eq::open(fabric& fab, fi_eq_attr* attr, fid_eq** out, void* context) noexcept {
  auto* prov = fab.provider();
  if (!attr || !out) {
    WEFT_WARN(prov, FI_LOG_EQ, "fi_eq_open needs attributes and a result pointer");
    return to_fi(errc::inval);
  }
  if (uint64_t unknown = attr->flags & ~static_cast<uint64_t>(FI_WRITE | FI_AFFINITY)) {
    WEFT_WARN(prov, FI_LOG_EQ, "unsupported EQ flags 0x%llx",
              static_cast<unsigned long long>(unknown));
    return to_fi(errc::badflags);
  }
  wait_set* set = nullptr;
  const int wait_obj = raw_wait_obj(attr->wait_obj);
  switch (wait_obj) {
    case FI_WAIT_NONE:
    case FI_WAIT_UNSPEC:
    case FI_WAIT_FD:
    case FI_WAIT_MUTEX_COND:
    case FI_WAIT_YIELD:
    case FI_WAIT_POLLFD: break;
    case FI_WAIT_SET:
      if (!attr->wait_set || !is_class(&attr->wait_set->fid, FI_CLASS_WAIT)) {
        WEFT_WARN(prov, FI_LOG_EQ, "FI_WAIT_SET without a wait set in attr->wait_set");
        return to_fi(errc::inval);
      }
      set = wait_set::from(attr->wait_set);
      if (&set->fab() != &fab) {
        WEFT_WARN(prov, FI_LOG_EQ, "the wait set belongs to another fabric");
        return to_fi(errc::inval);
      }
      break;
    default:
      WEFT_WARN(prov, FI_LOG_EQ, "unknown EQ wait object %d", wait_obj);
      return to_fi(errc::inval);
  }
  return abi_guard([&]() -> int {
    auto q = std::make_unique<eq>(fab, *attr, context);
    // A wait set also needs the EQ's own epoll set: it nests it, so that the
    // provider sockets registered here wake the set's sleepers.
    if (q->wait_obj_ != FI_WAIT_NONE && q->wait_obj_ != FI_WAIT_YIELD) {
      if (errc e = q->wait_.open(); e != errc::ok) return to_fi(e);
    }
    if (set) {
      if (errc e = q->set_.bind(*set, q->member()); e != errc::ok) {
        WEFT_WARN(prov, FI_LOG_EQ, "cannot attach the EQ to its wait set");
        return to_fi(e);
      }
    }
    *out = q.release();
    return 0;
  });
}

eq::eq(fabric& fab, const fi_eq_attr& attr, void* context)
    : fid_object(FI_CLASS_EQ, context),
      fabric_(&fab),
      size_(attr.size ? attr.size : default_size),
      flags_(attr.flags),
      wait_obj_(attr.wait_obj) {
  ops = const_cast<fi_ops_eq*>(&eq_ops);
}

eq::~eq() {
  // Connection requests nobody read: their fi_info came from the provider.
  for (auto& r : queue_) {
    if (!r.owns_info || r.bytes.size() < sizeof(fi_eq_cm_entry)) continue;
    fi_eq_cm_entry cm;
    std::memcpy(&cm, r.bytes.data(), sizeof cm);
    core::free_info(cm.info);
  }
}

int eq::close() { return close_if_unused(prov(), FI_LOG_EQ, "EQ"); }

// ---- provider side ----

errc eq::add_wait_fd(int fd) noexcept {
  // Without a wait object nobody sleeps on the EQ: nothing to watch.
  return wait_.is_open() ? wait_.add(fd, EPOLLIN) : errc::ok;
}

void eq::remove_wait_fd(int fd) noexcept {
  if (wait_.is_open()) wait_.remove(fd);
}

bool eq::has_events() noexcept {
  std::lock_guard g{m_};
  return !queue_.empty();
}

wait_member eq::member() noexcept {
  wait_member m;
  m.owner = as_fid();
  m.waiter = wait_.is_open() ? &wait_ : nullptr;
  m.progress = &progress_;
  m.has_event = eq_has_event;
  return m;
}

ssize_t eq::enqueue(uint32_t event, const void* buf, size_t len, uint64_t flags,
                    bool from_provider) noexcept {
  if (flags) {
    WEFT_WARN(prov(), FI_LOG_EQ, "EQ write: unknown flags 0x%llx",
              static_cast<unsigned long long>(flags));
    return to_fi(errc::badflags);
  }
  if (!buf || !len || len > max_entry_size) {
    WEFT_WARN(prov(), FI_LOG_EQ, "EQ write: an entry of %zu bytes at %p (1 to %zu accepted)",
              len, buf, max_entry_size);
    return to_fi(errc::inval);
  }
  try {
    record r{event, false, from_provider && is_cm_event(event), {}, {}};
    auto* p = static_cast<const uint8_t*>(buf);
    r.bytes.assign(p, p + len);
    return push(std::move(r));
  } catch (const std::bad_alloc&) {
    return to_fi(errc::nomem);
  }
}

int eq::write_event(uint32_t event, const void* buf, size_t len, uint64_t flags) noexcept {
  return static_cast<int>(enqueue(event, buf, len, flags, true));
}

int eq::write_error(const fi_eq_err_entry& e) noexcept {
  if (e.err_data_size > max_entry_size || (e.err_data_size && !e.err_data)) {
    WEFT_WARN(prov(), FI_LOG_EQ, "EQ error with %zu bytes of error data at %p",
              e.err_data_size, e.err_data);
    return to_fi(errc::inval);
  }
  try {
    record r{0, true, false, e, {}};
    if (e.err_data_size) {
      auto* p = static_cast<const uint8_t*>(e.err_data);
      r.bytes.assign(p, p + e.err_data_size);
    }
    r.err.err_data = nullptr;
    r.err.err_data_size = 0;
    return static_cast<int>(push(std::move(r)));
  } catch (const std::bad_alloc&) {
    return to_fi(errc::nomem);
  }
}

ssize_t eq::push(record&& r) noexcept {
  {
    std::lock_guard g{m_};
    if (queue_.size() >= size_) return to_fi(errc::again);
    try {
      queue_.push_back(std::move(r));
    } catch (const std::bad_alloc&) {
      return to_fi(errc::nomem);
    }
  }
  wake();
  return 0;
}

void eq::wake() noexcept {
  // EQ writes are rare: every wait object that may have a sleeper hears them.
  if (wait_.is_open()) wait_.signal();
  if (wait_obj_ == FI_WAIT_MUTEX_COND) cond_.broadcast();
  set_.notify();
}

// ---- application side ----

ssize_t eq::take(uint32_t* event, void* buf, size_t len, uint64_t flags) noexcept {
  std::lock_guard g{m_};
  if (queue_.empty()) return to_fi(errc::again);
  record& r = queue_.front();
  if (r.error) return to_fi(errc::avail);
  size_t n = r.bytes.size();
  size_t need = is_cm_event(r.event) ? std::min(n, sizeof(fi_eq_cm_entry)) : n;
  if (len < need) {
    WEFT_WARN(prov(), FI_LOG_EQ, "fi_eq_read: event %u needs %zu bytes, the buffer has %zu",
              r.event, need, len);
    return to_fi(errc::toosmall);
  }
  n = std::min(n, len);
  std::memcpy(buf, r.bytes.data(), n);
  *event = r.event;
  if (!(flags & FI_PEEK)) {
    queue_.pop_front();
    // Read empty: the pending wakeups announced entries that are gone, and an
    // application polling the fd should see it idle. Writers signal after
    // queueing under this lock, so a later entry still wakes it.
    if (queue_.empty() && wait_.is_open()) wait_.drain();
  }
  return static_cast<ssize_t>(n);
}

ssize_t eq::read(uint32_t* event, void* buf, size_t len, uint64_t flags) noexcept {
  if (!event || (!buf && len)) {
    WEFT_WARN(prov(), FI_LOG_EQ, "fi_eq_read: event %p, buffer %p of %zu bytes",
              static_cast<void*>(event), buf, len);
    return to_fi(errc::inval);
  }
  if (flags & ~static_cast<uint64_t>(FI_PEEK)) {
    WEFT_WARN(prov(), FI_LOG_EQ, "fi_eq_read: unknown flags 0x%llx",
              static_cast<unsigned long long>(flags));
    return to_fi(errc::badflags);
  }
  progress_.run_locked();
  return take(event, buf, len, flags);
}

ssize_t eq::readerr(fi_eq_err_entry* buf, uint64_t flags) noexcept {
  if (!buf) {
    WEFT_WARN(prov(), FI_LOG_EQ, "fi_eq_readerr: NULL entry");
    return to_fi(errc::inval);
  }
  if (flags) {
    WEFT_WARN(prov(), FI_LOG_EQ, "fi_eq_readerr: unknown flags 0x%llx",
              static_cast<unsigned long long>(flags));
    return to_fi(errc::badflags);
  }
  progress_.run_locked();
  std::lock_guard g{m_};
  if (queue_.empty() || !queue_.front().error) return to_fi(errc::again);
  record& r = queue_.front();
  // From API 1.5 a caller may hand in its own buffer (err_data, and its size
  // in err_data_size); otherwise it gets ours, valid until the next readerr.
  void* user_data = nullptr;
  size_t user_size = 0;
  if (FI_VERSION_GE(fabric_->api(), FI_VERSION(1, 5))) {
    user_data = buf->err_data;
    user_size = buf->err_data_size;
  }
  *buf = r.err;
  if (user_data && user_size) {
    size_t n = std::min(user_size, r.bytes.size());
    if (n) std::memcpy(user_data, r.bytes.data(), n);
    buf->err_data = user_data;
    buf->err_data_size = n;
  } else {
    err_buf_.swap(r.bytes);
    buf->err_data = err_buf_.empty() ? nullptr : err_buf_.data();
    buf->err_data_size = err_buf_.size();
  }
  queue_.pop_front();
  if (queue_.empty() && wait_.is_open()) wait_.drain();
  return static_cast<ssize_t>(sizeof(fi_eq_err_entry));
}

ssize_t eq::write(uint32_t event, const void* buf, size_t len, uint64_t flags) noexcept {
  if (!(flags_ & FI_WRITE)) {
    WEFT_WARN(prov(), FI_LOG_EQ, "fi_eq_write on an EQ opened without FI_WRITE");
    return to_fi(errc::inval);
  }
  ssize_t r = enqueue(event, buf, len, flags, false);
  return r < 0 ? r : static_cast<ssize_t>(len);
}

ssize_t eq::sread(uint32_t* event, void* buf, size_t len, int timeout, uint64_t flags) noexcept {
  if (wait_obj_ == FI_WAIT_NONE) {
    WEFT_WARN(prov(), FI_LOG_EQ, "fi_eq_sread on an EQ opened with FI_WAIT_NONE");
    return to_fi(errc::nosys);
  }
  if (!event || (!buf && len)) {
    WEFT_WARN(prov(), FI_LOG_EQ, "fi_eq_sread: event %p, buffer %p of %zu bytes",
              static_cast<void*>(event), buf, len);
    return to_fi(errc::inval);
  }
  if (flags & ~static_cast<uint64_t>(FI_PEEK)) {
    WEFT_WARN(prov(), FI_LOG_EQ, "fi_eq_sread: unknown flags 0x%llx",
              static_cast<unsigned long long>(flags));
    return to_fi(errc::badflags);
  }
  uint64_t start = now_ns();
  for (;;) {
    progress_.run_locked();
    ssize_t r = take(event, buf, len, flags);
    if (r != to_fi(errc::again)) {
      // The wakeup that let us in may have announced more entries than we
      // took: pass it on to the next sleeper.
      if (r >= 0 && !(flags & FI_PEEK) && wait_.is_open() && has_events()) wait_.signal();
      return r;
    }
    int left = remaining_ms(timeout, start);
    if (left == 0) return to_fi(errc::again);
    if (!wait_.is_open()) {  // FI_WAIT_YIELD
      give_up_core();
      continue;
    }
    errc e = wait_.wait(left);
    // fi_eq(3): a thread interrupted with nothing to read gets -FI_EAGAIN.
    if (e == errc::intr) return to_fi(errc::again);
    if (e == errc::other) return to_fi(errc::other);
  }
}

const char* eq::strerror(int prov_errno, const void*, char* buf, size_t len) noexcept {
  return error_text(prov_errno, buf, len);
}

int eq::control(int command, void* arg) {
  int ret = wait_control(command, arg, wait_obj_, wait_, cond_);
  if (ret == to_fi(errc::nosys))
    WEFT_WARN(prov(), FI_LOG_EQ, "the EQ has no wait object of its own (wait_obj %d)",
              static_cast<int>(wait_obj_));
  if (ret != 1) return ret;
  WEFT_WARN(prov(), FI_LOG_EQ, "EQs do not support fi_control command %d", command);
  return to_fi(errc::nosys);
}

}  // namespace weft::util
