// SPDX-License-Identifier: MIT
// weft — lock policies. Which one an object uses is decided once, when it is
// opened, from the domain's threading model; the data path never asks.
#pragma once

#include "util/fast_mutex.hpp"
#include "util/handoff.hpp"

#include <rdma/fabric.h>

#include <cstdint>

namespace weft::util {

// FI_THREAD_DOMAIN / FI_THREAD_COMPLETION: the application serialises access.
struct null_lock {
  void lock() noexcept {}
  void unlock() noexcept {}
  bool try_lock() noexcept { return true; }
};

// FI_THREAD_SAFE and the models where threads share an object
// (fast_mutex.hpp says why not std::mutex).
struct mutex_lock {
  fast_mutex m;
  void lock() { m.lock(); }
  void unlock() noexcept { m.unlock(); }
  bool try_lock() noexcept { return m.try_lock(); }
};

// FI_THREAD_DOMAIN under automatic progress, where the provider opts in:
// the application and the domain's progress thread take turns through the
// domain's handoff (handoff.hpp). A tag: each object's guard<handoff_lock>()
// enters its domain's handoff.
struct handoff_lock {};

// The policy a domain's objects take, chosen once at the domain's open
// (domain::lock_kind).
enum class lock_kind : uint8_t { none, mutex, handoff };

// Whether objects shared between endpoints (CQs, counters, AVs) need a lock
// under this threading model. Under FI_THREAD_DOMAIN and _COMPLETION the
// application promises single-threaded access to the domain or completion
// context; every other model lets threads meet in a shared object.
constexpr bool shared_objects_need_lock(fi_threading t) noexcept {
  return !(t == FI_THREAD_DOMAIN || t == FI_THREAD_COMPLETION);
}

// Calls f.template operator()<Lock>() with the policy for `t`: the one branch
// on the threading model, taken at open.
template <class F>
decltype(auto) with_lock_policy(fi_threading t, F&& f) {
  if (shared_objects_need_lock(t)) return f.template operator()<mutex_lock>();
  return f.template operator()<null_lock>();
}

// The same for a domain's choice: f.template operator()<Lock>() with its
// policy.
template <class F>
decltype(auto) with_lock_kind(lock_kind k, F&& f) {
  if (k == lock_kind::handoff) return f.template operator()<handoff_lock>();
  if (k == lock_kind::mutex) return f.template operator()<mutex_lock>();
  return f.template operator()<null_lock>();
}

}  // namespace weft::util
