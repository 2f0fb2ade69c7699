// SPDX-License-Identifier: MIT
// weft — the completion queue every provider uses.
#include "util/cq.hpp"
#include "util/yield.hpp"

#include <sched.h>

#include "core/log.hpp"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/epoll.h>

namespace weft::util {

namespace {

constexpr size_t default_cq_size = 1024;
constexpr size_t max_cq_size = size_t{1} << 24;

// Copies one completion into the caller's format; the format is a template
// argument, so the read loop compiles to straight-line stores.
template <fi_cq_format F>
struct format_of;
template <>
struct format_of<FI_CQ_FORMAT_CONTEXT> {
  using type = fi_cq_entry;
  static void fill(type& o, const cq_entry& e) noexcept { o.op_context = e.op_context; }
};
template <>
struct format_of<FI_CQ_FORMAT_MSG> {
  using type = fi_cq_msg_entry;
  static void fill(type& o, const cq_entry& e) noexcept {
    o.op_context = e.op_context;
    o.flags = e.flags;
    o.len = e.len;
  }
};
template <>
struct format_of<FI_CQ_FORMAT_DATA> {
  using type = fi_cq_data_entry;
  static void fill(type& o, const cq_entry& e) noexcept {
    o.op_context = e.op_context;
    o.flags = e.flags;
    o.len = e.len;
    o.buf = e.buf;
    o.data = e.data;
  }
};
template <>
struct format_of<FI_CQ_FORMAT_TAGGED> {
  using type = fi_cq_tagged_entry;
  static void fill(type& o, const cq_entry& e) noexcept {
    o.op_context = e.op_context;
    o.flags = e.flags;
    o.len = e.len;
    o.buf = e.buf;
    o.data = e.data;
    o.tag = e.tag;
  }
};

// The fi_ops_cq table of one (lock policy, format) instantiation.
template <class Lock, fi_cq_format F>
struct cq_ops {
  static ssize_t read(fid_cq* c, void* buf, size_t count) noexcept {
    return cq::from(c)->read<Lock, F>(buf, count, nullptr);
  }
  static ssize_t readfrom(fid_cq* c, void* buf, size_t count, fi_addr_t* src) noexcept {
    return cq::from(c)->read<Lock, F>(buf, count, src);
  }
  static ssize_t readerr(fid_cq* c, fi_cq_err_entry* buf, uint64_t flags) noexcept {
    return cq::from(c)->readerr<Lock>(buf, flags);
  }
  static ssize_t sread(fid_cq* c, void* buf, size_t count, const void* cond,
                       int timeout) noexcept {
    return cq::from(c)->sread<Lock, F>(buf, count, nullptr, cond, timeout);
  }
  static ssize_t sreadfrom(fid_cq* c, void* buf, size_t count, fi_addr_t* src,
                           const void* cond, int timeout) noexcept {
    return cq::from(c)->sread<Lock, F>(buf, count, src, cond, timeout);
  }
  static int signal(fid_cq* c) noexcept { return cq::from(c)->signal(); }
  static const char* strerror(fid_cq* c, int prov_errno, const void* err_data, char* buf,
                              size_t len) noexcept {
    return cq::from(c)->strerror(prov_errno, err_data, buf, len);
  }
  static constexpr fi_ops_cq table = {
      .size = sizeof(fi_ops_cq),
      .read = read,
      .readfrom = readfrom,
      .readerr = readerr,
      .sread = sread,
      .sreadfrom = sreadfrom,
      .signal = signal,
      .strerror = strerror,
  };
};

// The fi_ops_cq table of a peer CQ: its owner drives progress with
// fi_cq_read(cq, NULL, 0) and reads nothing; every other read is refused
// (fi_peer(3)).
template <class Lock>
struct peer_cq_ops {
  static ssize_t read(fid_cq* c, void* buf, size_t count) noexcept {
    return cq::from(c)->peer_progress<Lock>(buf, count);
  }
  static ssize_t readfrom(fid_cq* c, void* buf, size_t count, fi_addr_t*) noexcept {
    return cq::from(c)->peer_progress<Lock>(buf, count);
  }
  static ssize_t refuse(fid_cq* c, const char* what) noexcept {
    WEFT_WARN(cq::from(c)->dom().provider(), FI_LOG_CQ, "%s on a peer CQ: its owner reads", what);
    return to_fi(errc::nosys);
  }
  static ssize_t readerr(fid_cq* c, fi_cq_err_entry*, uint64_t) noexcept {
    return refuse(c, "fi_cq_readerr");
  }
  static ssize_t sread(fid_cq* c, void*, size_t, const void*, int) noexcept {
    return refuse(c, "fi_cq_sread");
  }
  static ssize_t sreadfrom(fid_cq* c, void*, size_t, fi_addr_t*, const void*, int) noexcept {
    return refuse(c, "fi_cq_sreadfrom");
  }
  static constexpr fi_ops_cq table = {
      .size = sizeof(fi_ops_cq),
      .read = read,
      .readfrom = readfrom,
      .readerr = readerr,
      .sread = sread,
      .sreadfrom = sreadfrom,
      .signal = cq_ops<Lock, FI_CQ_FORMAT_CONTEXT>::signal,
      .strerror = cq_ops<Lock, FI_CQ_FORMAT_CONTEXT>::strerror,
  };
};

// cq_forward's owner_ops (cq.hpp): what a peer CQ that is not util's (a
// foreign provider's) calls; util's own take the short way (forward_to).
template <class Lock>
struct forward_owner_ops {
  static ssize_t write(fid_peer_cq* c, void* ctx, uint64_t flags, size_t len, void* buf,
                       uint64_t data, uint64_t tag, fi_addr_t src) noexcept {
    auto* f = static_cast<cq_forward*>(c);
    if (f->target->write<Lock>({ctx, flags, len, buf, data, tag, src, 0})) return 0;
    f->refused->store(true, std::memory_order_relaxed);
    return to_fi(errc::again);
  }
  static ssize_t writeerr(fid_peer_cq* c, const fi_cq_err_entry* e) noexcept {
    auto* f = static_cast<cq_forward*>(c);
    if (f->target->write_error<Lock>(*e)) return 0;
    f->refused->store(true, std::memory_order_relaxed);
    return to_fi(errc::again);
  }
  static constexpr fi_ops_cq_owner table = {sizeof(fi_ops_cq_owner), write, writeerr};
  // Straight into the target, for a util peer CQ (cq::write_diverted).
  static bool write_entry(cq& target, const cq_entry& e) noexcept { return target.write<Lock>(e); }
};

// The owner's fid_peer_cq from fi_cq_open's context, or null (logged) when
// the context does not describe one.
fid_peer_cq* peer_owner(const fi_provider* prov, void* context) noexcept {
  auto* pc = static_cast<fi_peer_cq_context*>(context);
  const char* why = !pc                                ? "no fi_peer_cq_context"
                    : pc->size < sizeof(fi_peer_cq_context) ? "fi_peer_cq_context too small"
                    : !pc->cq                          ? "no fid_peer_cq"
                    : !pc->cq->owner_ops               ? "no owner_ops"
                    : pc->cq->owner_ops->size < sizeof(fi_ops_cq_owner) || !pc->cq->owner_ops->write ||
                            !pc->cq->owner_ops->writeerr
                        ? "owner_ops without write/writeerr"
                        : nullptr;
  if (why) {
    WEFT_WARN(prov, FI_LOG_CQ, "fi_cq_open with FI_PEER: %s in the context", why);
    return nullptr;
  }
  return pc->cq;
}

template <class Lock>
const fi_ops_cq* ops_for(fi_cq_format f) noexcept {
  switch (f) {
    case FI_CQ_FORMAT_CONTEXT: return &cq_ops<Lock, FI_CQ_FORMAT_CONTEXT>::table;
    case FI_CQ_FORMAT_MSG: return &cq_ops<Lock, FI_CQ_FORMAT_MSG>::table;
    case FI_CQ_FORMAT_DATA: return &cq_ops<Lock, FI_CQ_FORMAT_DATA>::table;
    case FI_CQ_FORMAT_TAGGED: return &cq_ops<Lock, FI_CQ_FORMAT_TAGGED>::table;
    default: return nullptr;
  }
}

}  // namespace

int cq::open(domain& dom, fi_cq_attr* attr, fid_cq** out, void* context) noexcept {
  auto* prov = dom.provider();
  if (!attr || !out) {
    WEFT_WARN(prov, FI_LOG_CQ, "fi_cq_open needs attributes and a result pointer");
    return to_fi(errc::inval);
  }
  fi_cq_attr a = *attr;
  int format = raw_enum(attr->format), wait_obj = raw_enum(attr->wait_obj),
      wait_cond = raw_enum(attr->wait_cond);
  if (format == FI_CQ_FORMAT_UNSPEC) format = FI_CQ_FORMAT_CONTEXT;
  if (format < FI_CQ_FORMAT_CONTEXT || format > FI_CQ_FORMAT_TAGGED) {
    WEFT_WARN(prov, FI_LOG_CQ, "unknown CQ format %d", format);
    return to_fi(errc::inval);
  }
  if (wait_obj < FI_WAIT_NONE || wait_obj > FI_WAIT_POLLFD) {
    WEFT_WARN(prov, FI_LOG_CQ, "unknown CQ wait object %d", wait_obj);
    return to_fi(errc::inval);
  }
  if (wait_cond != FI_CQ_COND_NONE && wait_cond != FI_CQ_COND_THRESHOLD) {
    WEFT_WARN(prov, FI_LOG_CQ, "unknown CQ wait condition %d", wait_cond);
    return to_fi(errc::inval);
  }
  a.format = static_cast<fi_cq_format>(format);
  if (a.size > max_cq_size) {
    WEFT_WARN(prov, FI_LOG_CQ, "CQ size %zu exceeds the maximum %zu", a.size, max_cq_size);
    return to_fi(errc::inval);
  }
  if (a.flags & ~static_cast<uint64_t>(FI_AFFINITY | FI_PEER)) {
    WEFT_WARN(prov, FI_LOG_CQ, "unsupported CQ flags 0x%llx",
              static_cast<unsigned long long>(a.flags));
    return to_fi(errc::badflags);
  }
  fid_peer_cq* owner = nullptr;
  if ((a.flags & FI_PEER) && !(owner = peer_owner(prov, context))) return to_fi(errc::inval);
  switch (a.wait_obj) {
    case FI_WAIT_NONE:
    case FI_WAIT_UNSPEC:
    case FI_WAIT_FD:
    case FI_WAIT_MUTEX_COND: break;
    case FI_WAIT_SET:
      if (!a.wait_set || !is_class(&a.wait_set->fid, FI_CLASS_WAIT)) {
        WEFT_WARN(prov, FI_LOG_CQ, "FI_WAIT_SET needs a wait set in attr->wait_set");
        return to_fi(errc::inval);
      }
      break;
    default:
      WEFT_WARN(prov, FI_LOG_CQ, "CQ wait object %d is not supported",
                static_cast<int>(a.wait_obj));
      return to_fi(errc::nosys);
  }
  return abi_guard([&]() -> int {
    auto c = std::make_unique<cq>(dom, a, context);
    if (a.wait_obj != FI_WAIT_NONE) {
      if (errc e = c->wait_.open(); e != errc::ok) return to_fi(e);
    }
    if (a.wait_obj == FI_WAIT_SET) {
      auto* set = wait_set::from(&a.wait_set->fid);
      if (errc e = c->wait_set_.bind(*set, cq_wait_member(c->as_fid())); e != errc::ok)
        return to_fi(e);
      // Writers tell the set, so a thread in fi_wait wakes.
      c->signal_on_write_.fetch_add(1, std::memory_order_relaxed);
    }
    c->owner_ = owner;
    if (owner) {
      c->forward_to(*owner);
      c->divert_.fetch_or(to_owner, std::memory_order_relaxed);
    }
    c->ops = const_cast<fi_ops_cq*>(
        with_lock_kind(dom.locks(), [&]<class Lock>() -> const fi_ops_cq* {
          return owner ? &peer_cq_ops<Lock>::table : ops_for<Lock>(a.format);
        }));
    *out = c.release();
    return 0;
  });
}

cq::cq(domain& dom, const fi_cq_attr& attr, void* context)
    : fid_object(FI_CLASS_CQ, context),
      domain_(&dom),
      format_(attr.format),
      wait_obj_(attr.wait_obj) {
  size_t size = attr.size ? attr.size : default_cq_size;
  size_t cap = std::bit_ceil(size);
  ring_ = std::make_unique<cq_entry[]>(cap);
  mask_ = cap - 1;
  progress_.fire_triggers(&dom.triggers());
}

cq::~cq() = default;

int cq::close() { return close_if_unused(domain_->provider(), FI_LOG_CQ, "CQ"); }

errc cq::add_wait_fd(int fd) noexcept {
  return wait_.is_open() ? wait_.add(fd, EPOLLIN) : errc::ok;
}

void cq::remove_wait_fd(int fd) noexcept {
  if (wait_.is_open()) wait_.remove(fd);
}

bool cq::push_error(const fi_cq_err_entry& e) noexcept {
  if (tail_ - head_ > mask_) return false;
  try {
    error_record rec{e, {}};
    if (e.err_data && e.err_data_size) {
      auto* p = static_cast<const uint8_t*>(e.err_data);
      rec.data.assign(p, p + e.err_data_size);
    }
    errors_.push_back(std::move(rec));
  } catch (...) {
    return false;
  }
  cq_entry marker{};
  marker.error = 1;
  ring_[tail_ & mask_] = marker;
  ++tail_;
  return true;
}

template <class Lock, fi_cq_format F>
ssize_t cq::read(void* buf, size_t count, fi_addr_t* src) noexcept {
  using out_t = typename format_of<F>::type;
  if (!buf && count) return to_fi(errc::inval);
  progress_.run<Lock>();
  {
    [[maybe_unused]] auto g = guard<Lock>();
    auto* out = static_cast<out_t*>(buf);
    size_t n = 0;
    while (head_ != tail_) {
      const cq_entry& e = ring_[head_ & mask_];
      if (e.error) [[unlikely]] {
        // Markers of errors already taken by fi_cq_readerr are skipped; an
        // error not yet taken stops the read (-FI_EAVAIL if it is the first).
        if (!errors_taken_) break;
        ++head_;
        --errors_taken_;
        continue;
      }
      if (n == count) break;
      format_of<F>::fill(out[n], e);
      if (src) src[n] = e.src;
      ++n;
      ++head_;
    }
    if (n) {
      idle_reads_ = 0;
      return static_cast<ssize_t>(n);
    }
    if (head_ != tail_) {
      idle_reads_ = 0;
      return ring_[head_ & mask_].error ? to_fi(errc::avail) : 0;
    }
    if (++idle_reads_ < idle_yield_reads) [[likely]]
      return to_fi(errc::again);
    idle_reads_ = 0;
  }
  give_up_core();  // not under the lock: another reader may be what we wait for
  return to_fi(errc::again);
}

template <class Lock>
ssize_t cq::readerr(fi_cq_err_entry* buf, uint64_t flags) noexcept {
  if (!buf) return to_fi(errc::inval);
  if (flags) return to_fi(errc::badflags);
  progress_.run<Lock>();
  [[maybe_unused]] auto g = guard<Lock>();
  if (errors_.empty()) return to_fi(errc::again);
  error_record& rec = errors_.front();
  uint32_t api = domain_->api_version();
  // Callers older than API 1.20 know an 80-byte entry without src_addr.
  size_t size = FI_VERSION_GE(api, FI_VERSION(1, 20)) ? sizeof(fi_cq_err_entry)
                                                       : offsetof(fi_cq_err_entry, src_addr);
  void* user_data = nullptr;
  size_t user_size = 0;
  if (FI_VERSION_GE(api, FI_VERSION(1, 5))) {
    user_data = buf->err_data;
    user_size = buf->err_data_size;
  }
  std::memcpy(static_cast<void*>(buf), &rec.entry, size);
  if (user_data && user_size) {
    size_t n = std::min(user_size, rec.data.size());
    std::memcpy(user_data, rec.data.data(), n);
    buf->err_data = user_data;
    buf->err_data_size = n;
  } else {
    err_buf_.swap(rec.data);  // valid until the next readerr
    buf->err_data = err_buf_.empty() ? nullptr : err_buf_.data();
    buf->err_data_size = err_buf_.size();
  }
  errors_.pop_front();
  // Consume the matching marker now if it is at the head, else later.
  if (head_ != tail_ && ring_[head_ & mask_].error)
    ++head_;
  else
    ++errors_taken_;
  return 1;
}

template <class Lock, fi_cq_format F>
ssize_t cq::sread(void* buf, size_t count, fi_addr_t* src, const void* cond,
                  int timeout) noexcept {
  if (!wait_.is_open()) {
    WEFT_WARN(domain_->provider(), FI_LOG_CQ, "fi_cq_sread on a CQ without a wait object");
    return to_fi(errc::nosys);
  }
  size_t threshold = 1;
  if (cond) threshold = std::max<size_t>(1, *static_cast<const size_t*>(cond));
  threshold = std::min(threshold, count);
  uint64_t start = now_ns();
  signal_on_write_.fetch_add(1, std::memory_order_acq_rel);
  ssize_t ret;
  for (;;) {
    {
      // Threshold reads wait until enough entries are queued.
      progress_.run<Lock>();
      [[maybe_unused]] auto g = guard<Lock>();
      size_t avail = tail_ - head_;
      bool error_first = avail && ring_[head_ & mask_].error;
      if (avail < threshold && !error_first) avail = 0;
      if (avail) ret = 1;
      else ret = 0;
    }
    if (ret) {
      ret = read<Lock, F>(buf, count, src);
      if (ret != to_fi(errc::again)) break;
    }
    int left = remaining_ms(timeout, start);
    if (left == 0) {
      ret = to_fi(errc::again);
      break;
    }
    errc w = wait_.wait(left);
    if (w == errc::ok && signaled_.exchange(false)) {
      // fi_cq_signal: return to the caller even with nothing to read.
      ret = read<Lock, F>(buf, count, src);
      break;
    }
  }
  signal_on_write_.fetch_sub(1, std::memory_order_acq_rel);
  return ret;
}

template <class Lock>
ssize_t cq::peer_progress(const void* buf, size_t count) noexcept {
  if (buf || count) {
    WEFT_WARN(domain_->provider(), FI_LOG_CQ,
              "a peer CQ is read by its owner: fi_cq_read(cq, NULL, 0) only drives progress");
    return to_fi(errc::nosys);
  }
  progress_.run<Lock>();
  // Completions go straight to the owner (write_diverted); the ring holds
  // only what a full owner refused.
  bool queued;
  {
    [[maybe_unused]] auto g = guard<Lock>();
    queued = head_ != tail_;
  }
  if (queued) [[unlikely]]
    flush_to_owner<Lock>();
  return 0;
}

template <class Lock>
void cq::flush_to_owner() noexcept {
  // Writers only ever append, so an entry stays put between the look under
  // the lock and its removal after the owner took it.
  std::unique_lock<std::mutex> one_flusher;
  if constexpr (!std::is_same_v<Lock, null_lock>) one_flusher = std::unique_lock{flush_mutex_};
  fi_ops_cq_owner* ops = owner_->owner_ops;
  for (;;) {
    cq_entry e;
    error_record* rec = nullptr;
    {
      [[maybe_unused]] auto g = guard<Lock>();
      if (head_ == tail_) return;
      e = ring_[head_ & mask_];
      if (e.error) rec = &errors_.front();  // deque: appends leave it in place
    }
    ssize_t rc;
    if (rec) {
      fi_cq_err_entry ee = rec->entry;
      ee.err_data = rec->data.empty() ? nullptr : rec->data.data();
      ee.err_data_size = rec->data.size();
      rc = ops->writeerr(owner_, &ee);
    } else {
      rc = ops->write(owner_, e.op_context, e.flags, e.len, e.buf, e.data, e.tag, e.src);
    }
    if (rc == to_fi(errc::again)) return;  // the owner's CQ is full: its next call
    if (rc < 0)
      WEFT_WARN(domain_->provider(), FI_LOG_CQ, "the owner CQ refused a completion of %p: %s",
                rec ? rec->entry.op_context : e.op_context, fi_strerror(static_cast<int>(-rc)));
    [[maybe_unused]] auto g = guard<Lock>();
    if (rec) errors_.pop_front();
    ++head_;
  }
}

template <class Lock>
bool cq::write_diverted(const cq_entry& e, uint32_t d) noexcept {
  if ((d & claim_mask) && domain_->triggers().claim(e.op_context, false)) return true;
  if (d & to_owner) {
    // Under the guard, so a completion queued behind an -FI_EAGAIN is never
    // overtaken; flush_to_owner takes an entry off only after the owner
    // has it, so an empty ring means nothing is on its way.
    [[maybe_unused]] auto g = guard<Lock>();
    if (head_ == tail_) {
      if (fwd_write_) {
        if (fwd_write_(*fwd_target_, e)) return true;
        fwd_refused_->store(true, std::memory_order_relaxed);  // full: queued below
      } else {
        ssize_t rc = owner_->owner_ops->write(owner_, e.op_context, e.flags, e.len, e.buf,
                                              e.data, e.tag, e.src);
        if (rc != to_fi(errc::again)) {
          if (rc < 0)
            WEFT_WARN(domain_->provider(), FI_LOG_CQ,
                      "the owner CQ refused a completion of %p: %s", e.op_context,
                      fi_strerror(static_cast<int>(-rc)));
          return true;
        }
      }
    }
    if (tail_ - head_ > mask_) return false;
    ring_[tail_ & mask_] = e;
    ++tail_;
    return true;
  }
  {
    [[maybe_unused]] auto g = guard<Lock>();
    if (tail_ - head_ > mask_) return false;
    ring_[tail_ & mask_] = e;
    ++tail_;
  }
  wake();
  return true;
}

template <class Lock>
bool cq::write_error_to_owner(const fi_cq_err_entry& e) noexcept {
  [[maybe_unused]] auto g = guard<Lock>();
  if (head_ == tail_) {
    ssize_t rc = owner_->owner_ops->writeerr(owner_, &e);
    if (rc != to_fi(errc::again)) {
      if (rc < 0)
        WEFT_WARN(domain_->provider(), FI_LOG_CQ,
                  "the owner CQ refused an error completion of %p: %s", e.op_context,
                  fi_strerror(static_cast<int>(-rc)));
      return true;
    }
  }
  return push_error(e);
}

template bool cq::write_diverted<null_lock>(const cq_entry&, uint32_t) noexcept;
template bool cq::write_diverted<mutex_lock>(const cq_entry&, uint32_t) noexcept;
template bool cq::write_error_to_owner<null_lock>(const fi_cq_err_entry&) noexcept;
template bool cq::write_error_to_owner<mutex_lock>(const fi_cq_err_entry&) noexcept;
template ssize_t cq::peer_progress<null_lock>(const void*, size_t) noexcept;
template ssize_t cq::peer_progress<mutex_lock>(const void*, size_t) noexcept;
template bool cq::write_diverted<handoff_lock>(const cq_entry&, uint32_t) noexcept;
template bool cq::write_error_to_owner<handoff_lock>(const fi_cq_err_entry&) noexcept;
template ssize_t cq::peer_progress<handoff_lock>(const void*, size_t) noexcept;

wait_member cq_wait_member(struct fid* f) noexcept {
  cq* c = cq::from(f);
  wait_member m;
  m.owner = f;
  m.waiter = c->waiter();
  m.progress = &c->progress_;
  m.has_event = [](struct fid* o) noexcept { return cq::from(o)->has_events(); };
  m.dom = c->domain_.get();
  m.links = &c->poll_links_;
  return m;
}

void cq::wake_slow() noexcept {
  wait_.signal();
  wait_set_.notify();
  if (wait_obj_ == FI_WAIT_MUTEX_COND && fd_exported_.load(std::memory_order_acquire))
    export_cond_.broadcast();
}

int cq::signal() noexcept {
  if (!wait_.is_open()) return to_fi(errc::nosys);
  signaled_.store(true);
  wait_.signal();
  return 0;
}

const char* cq::strerror(int prov_errno, const void*, char* buf, size_t len) noexcept {
  return error_text(prov_errno, buf, len);
}

int cq::control(int command, void* arg) {
  int ret = wait_control(command, arg, wait_obj_, wait_, export_cond_);
  if (ret == 1) return to_fi(errc::nosys);
  // From now on the application may sleep on it: writers must signal.
  if (ret == 0 && command == FI_GETWAIT && !fd_exported_.exchange(true))
    signal_on_write_.fetch_add(1, std::memory_order_acq_rel);
  return ret;
}

template <class Lock>
fi_ops_cq_owner* cq_forward::forward_ops() noexcept {
  return const_cast<fi_ops_cq_owner*>(&forward_owner_ops<Lock>::table);
}
template fi_ops_cq_owner* cq_forward::forward_ops<null_lock>() noexcept;
template fi_ops_cq_owner* cq_forward::forward_ops<mutex_lock>() noexcept;
template fi_ops_cq_owner* cq_forward::forward_ops<handoff_lock>() noexcept;

void cq::forward_to(fid_peer_cq& owner) noexcept {
  auto take = [&]<class Lock>() {
    if (owner.owner_ops != cq_forward::forward_ops<Lock>()) return;
    auto& f = static_cast<cq_forward&>(owner);
    fwd_target_ = f.target;
    fwd_refused_ = f.refused;
    fwd_write_ = &forward_owner_ops<Lock>::write_entry;
    // The target's policy is this CQ's: endpoints may write into it
    // (write_target) and run from its progress list (its runs take that
    // policy).
    bool same = false;
    with_lock_kind(domain_->locks(), [&]<class Own>() { same = std::is_same_v<Own, Lock>; });
    if (!same) return;
    direct_target_ = f.target;
    if (f.share_progress) {
      hooks_ = &f.target->progress_;
      f.progress_shared = true;
    }
  };
  take.template operator()<null_lock>();
  take.template operator()<mutex_lock>();
  take.template operator()<handoff_lock>();
}

}  // namespace weft::util
