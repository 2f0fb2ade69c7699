// SPDX-License-Identifier: MIT
// weft — the base of every OFI object: the C struct first, a reference count
// for children and bindings, and the fid-level ops table built from the class.
#pragma once

#include "core/errc.hpp"
#include "core/log.hpp"

#include <rdma/fabric.h>

#include <atomic>
#include <cstring>
#include <utility>

namespace weft::util {

// What keeps an object open: every child object and every binding holds one
// reference, and fi_close answers -FI_EBUSY while any is held.
class object {
 public:
  object() = default;
  object(const object&) = delete;
  object& operator=(const object&) = delete;
  virtual ~object() = default;

  void hold() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept { refs_.fetch_sub(1, std::memory_order_acq_rel); }
  bool busy() const noexcept { return refs_.load(std::memory_order_acquire) != 0; }
  int refs() const noexcept { return refs_.load(std::memory_order_acquire); }

 private:
  std::atomic<int> refs_{0};
};

// A counted reference to another object (a parent, or something bound).
template <class T>
class ref {
 public:
  ref() = default;
  explicit ref(T* p) noexcept : p_(p) {
    if (p_) p_->hold();
  }
  ref(ref&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  ref& operator=(ref&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  ref(const ref&) = delete;
  ref& operator=(const ref&) = delete;
  ~ref() { reset(); }

  void reset(T* p = nullptr) noexcept {
    if (p) p->hold();
    if (p_) p_->release();
    p_ = p;
  }
  T* get() const noexcept { return p_; }
  T* operator->() const noexcept { return p_; }
  T& operator*() const noexcept { return *p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }

 private:
  T* p_ = nullptr;
};

template <class Self, class C>
struct fid_thunks;

// Base of an object of class Self whose ABI face is the C struct C (fid_cq,
// fid_ep, ...). Self hides the defaults below with what it implements; the
// ops tables call Self's members through static thunks, so there is no
// virtual call on any path the application drives.
template <class Self, class C>
class fid_object : public C, public object {
 public:
  fid_object(size_t fclass, void* context) noexcept {
    std::memset(static_cast<C*>(this), 0, sizeof(C));
    this->fid.fclass = fclass;
    this->fid.context = context;
    this->fid.ops = const_cast<fi_ops*>(&fid_thunks<Self, C>::table);
  }

  static Self* from(struct fid* f) noexcept {
    return static_cast<Self*>(reinterpret_cast<C*>(f));
  }
  static Self* from(C* c) noexcept { return static_cast<Self*>(c); }
  struct fid* as_fid() noexcept { return &this->fid; }
  C* as_c() noexcept { return this; }

  // Defaults: what an object does not implement is "not supported".
  int close() {
    if (busy()) return to_fi(errc::busy);
    delete static_cast<Self*>(this);
    return 0;
  }
  int bind(struct fid*, uint64_t) { return to_fi(errc::nosys); }
  int control(int, void*) { return to_fi(errc::nosys); }
  int ops_open(const char*, uint64_t, void**, void*) { return to_fi(errc::nosys); }
  int tostr(char*, size_t) { return to_fi(errc::nosys); }
  int ops_set(const char*, uint64_t, void*, void*) { return to_fi(errc::nosys); }

 protected:
  // fi_close for a class whose close needs nothing more: -FI_EBUSY, logged,
  // while children or bindings still hold the object; else it is destroyed.
  int close_if_unused(const fi_provider* prov, fi_log_subsys subsys, const char* what) {
    if (busy()) {
      WEFT_WARN(prov, subsys, "fi_close: the %s is still referenced by %d objects", what, refs());
      return to_fi(errc::busy);
    }
    delete static_cast<Self*>(this);
    return 0;
  }
};

template <class Self, class C>
struct fid_thunks {
  static Self* self(struct fid* f) noexcept { return Self::from(f); }
  static int close(struct fid* f) noexcept {
    return abi_guard([&] { return self(f)->close(); });
  }
  static int bind(struct fid* f, struct fid* bfid, uint64_t flags) noexcept {
    if (!bfid) return to_fi(errc::inval);
    return abi_guard([&] { return self(f)->bind(bfid, flags); });
  }
  static int control(struct fid* f, int command, void* arg) noexcept {
    return abi_guard([&] { return self(f)->control(command, arg); });
  }
  static int ops_open(struct fid* f, const char* name, uint64_t flags, void** ops,
                      void* context) noexcept {
    if (!name || !ops) return to_fi(errc::inval);
    return abi_guard([&] { return self(f)->ops_open(name, flags, ops, context); });
  }
  static int tostr(const struct fid* f, char* buf, size_t len) noexcept {
    return abi_guard([&] { return self(const_cast<struct fid*>(f))->tostr(buf, len); });
  }
  static int ops_set(struct fid* f, const char* name, uint64_t flags, void* ops,
                     void* context) noexcept {
    return abi_guard([&] { return self(f)->ops_set(name, flags, ops, context); });
  }
  static constexpr fi_ops table = {
      .size = sizeof(fi_ops),
      .close = close,
      .bind = bind,
      .control = control,
      .ops_open = ops_open,
      .tostr = tostr,
      .ops_set = ops_set,
  };
};

using weft::raw_enum;

// The class of a fid the application passed in, checked before any cast.
inline bool is_class(const struct fid* f, size_t fclass) noexcept {
  return f && f->fclass == fclass;
}

}  // namespace weft::util
