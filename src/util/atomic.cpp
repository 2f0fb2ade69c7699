// SPDX-License-Identifier: MIT
// weft — the atomic engine (see atomic.hpp for the contract).
//
// Every (operation, datatype, kind) that is supported has two kernels,
// generated from templates: `direct` (CPU atomics; for 16- and 32-byte
// types it is the striped kernel too) and `striped` (spinlock by address).
// atomic_apply looks the pair up once per call, picks one by the target's
// alignment, and the kernel loops over the elements with no further
// dispatch.
#include "util/atomic.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include <array>
#include <atomic>
#include <complex>
#include <cstring>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>

namespace weft::util {
namespace {

// ---- datatypes ----

// __int128 is a GNU extension; under -std=c++20 the standard traits do not
// count it as an integer, so the engine has its own traits below.
__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

// The C++ type of each supported fi_datatype, indexed by its value.
using dt_types = std::tuple<int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t,
                            uint64_t, float, double, std::complex<float>, std::complex<double>,
                            long double, std::complex<long double>, i128, u128>;
static_assert(FI_INT8 == 0 && FI_UINT64 == 7 && FI_FLOAT == 8 && FI_DOUBLE == 9 &&
              FI_FLOAT_COMPLEX == 10 && FI_DOUBLE_COMPLEX == 11 && FI_LONG_DOUBLE == 12 &&
              FI_LONG_DOUBLE_COMPLEX == 13 && FI_INT128 == 14 && FI_UINT128 == 15);
template <int DT>
using dt_t = std::tuple_element_t<DT, dt_types>;

constexpr int n_dt = FI_UINT128 + 1;
constexpr int n_op = FI_MSWAP + 1;  // FI_DIFF and beyond: unsupported
constexpr int n_kind = 3;

// The unsigned type of the same width, for wrapping arithmetic and bit
// operations; defined for the integer datatypes only.
template <class T>
struct uint_of {};
template <>
struct uint_of<int8_t> {
  using type = uint8_t;
};
template <>
struct uint_of<uint8_t> {
  using type = uint8_t;
};
template <>
struct uint_of<int16_t> {
  using type = uint16_t;
};
template <>
struct uint_of<uint16_t> {
  using type = uint16_t;
};
template <>
struct uint_of<int32_t> {
  using type = uint32_t;
};
template <>
struct uint_of<uint32_t> {
  using type = uint32_t;
};
template <>
struct uint_of<int64_t> {
  using type = uint64_t;
};
template <>
struct uint_of<uint64_t> {
  using type = uint64_t;
};
template <>
struct uint_of<i128> {
  using type = u128;
};
template <>
struct uint_of<u128> {
  using type = u128;
};
template <class T>
using uint_of_t = typename uint_of<T>::type;

template <class T>
constexpr bool is_int = requires {
  typename uint_of<T>::type;
};
template <class T>
constexpr bool is_complex = false;
template <class F>
constexpr bool is_complex<std::complex<F>> = true;

// ---- which combinations exist ----

constexpr bool ordering_op(int op) noexcept {
  return op == FI_MIN || op == FI_MAX || (op >= FI_CSWAP_LE && op <= FI_CSWAP_GT);
}
constexpr bool bitwise_op(int op) noexcept {
  return op == FI_BOR || op == FI_BAND || op == FI_BXOR || op == FI_MSWAP;
}
// fi_atomic(3) lists the operations usable with each family.
constexpr bool kind_allows(int op, int kind) noexcept {
  switch (static_cast<atomic_kind>(kind)) {
    case atomic_kind::base:
      return op <= FI_BXOR || op == FI_ATOMIC_WRITE;
    case atomic_kind::fetch:
      return op <= FI_ATOMIC_WRITE;
    case atomic_kind::compare:
      return op >= FI_CSWAP && op <= FI_MSWAP;
  }
  return false;
}
template <class T>
constexpr bool type_allows(int op) noexcept {
  if (ordering_op(op)) return !is_complex<T>;
  if (bitwise_op(op)) return is_int<T>;
  return true;
}
constexpr bool uses_operand(int op) noexcept {
  return op != FI_ATOMIC_READ;
}
constexpr bool uses_compare(int op) noexcept {
  return op >= FI_CSWAP && op <= FI_MSWAP;
}

// ---- what one element becomes ----

// keep: the target is left as is; take_operand: the operand's bytes replace
// it (all of them, padding of long double included); store: the computed
// value replaces it.
enum class action : uint8_t { keep, take_operand, store };

template <class T>
bool truth(const T& v) noexcept {
  if constexpr (is_complex<T>) {
    return v.real() != 0 || v.imag() != 0;
  } else {
    return v != T(0);
  }
}
template <class T>
T from_truth(bool b) noexcept {
  return b ? T(1) : T(0);
}

// Integer arithmetic in the unsigned type of the same width, widened to
// unsigned int first so that promotion of small types cannot overflow a
// signed int (uint16 * uint16 would), then wrapped back.
template <class T>
using wide_uint_t = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, uint_of_t<T>>;
template <class T>
T plus(const T& a, const T& b) noexcept {
  if constexpr (is_int<T>) {
    using U = uint_of_t<T>;
    using W = wide_uint_t<T>;
    return static_cast<T>(static_cast<U>(W(U(a)) + W(U(b))));
  } else {
    return a + b;
  }
}
template <class T>
T times(const T& a, const T& b) noexcept {
  if constexpr (is_int<T>) {
    using U = uint_of_t<T>;
    using W = wide_uint_t<T>;
    return static_cast<T>(static_cast<U>(W(U(a)) * W(U(b))));
  } else {
    return a * b;
  }
}

template <int Op, class T>
action compute([[maybe_unused]] const T& old, [[maybe_unused]] const T& opd,
               [[maybe_unused]] const T& cmp, [[maybe_unused]] T& out) noexcept {
  using enum action;
  if constexpr (Op == FI_MIN) {
    return opd < old ? take_operand : keep;
  } else if constexpr (Op == FI_MAX) {
    return opd > old ? take_operand : keep;
  } else if constexpr (Op == FI_SUM) {
    out = plus(old, opd);
    return store;
  } else if constexpr (Op == FI_PROD) {
    out = times(old, opd);
    return store;
  } else if constexpr (Op == FI_LOR) {
    out = from_truth<T>(truth(old) || truth(opd));
    return store;
  } else if constexpr (Op == FI_LAND) {
    out = from_truth<T>(truth(old) && truth(opd));
    return store;
  } else if constexpr (Op == FI_LXOR) {
    out = from_truth<T>(truth(old) != truth(opd));
    return store;
  } else if constexpr (Op == FI_BOR || Op == FI_BAND || Op == FI_BXOR || Op == FI_MSWAP) {
    using U = uint_of_t<T>;
    const U o = U(old), b = U(opd), m = U(cmp);
    U r;
    if constexpr (Op == FI_BOR) r = U(o | b);
    if constexpr (Op == FI_BAND) r = U(o & b);
    if constexpr (Op == FI_BXOR) r = U(o ^ b);
    if constexpr (Op == FI_MSWAP) r = U((b & m) | (o & U(~m)));
    out = static_cast<T>(r);
    return store;
  } else if constexpr (Op == FI_ATOMIC_READ) {
    return keep;
  } else if constexpr (Op == FI_ATOMIC_WRITE) {
    return take_operand;
  } else if constexpr (Op == FI_CSWAP) {
    return cmp == old ? take_operand : keep;
  } else if constexpr (Op == FI_CSWAP_NE) {
    return cmp != old ? take_operand : keep;
  } else if constexpr (Op == FI_CSWAP_LE) {
    return cmp <= old ? take_operand : keep;
  } else if constexpr (Op == FI_CSWAP_LT) {
    return cmp < old ? take_operand : keep;
  } else if constexpr (Op == FI_CSWAP_GE) {
    return cmp >= old ? take_operand : keep;
  } else {
    static_assert(Op == FI_CSWAP_GT);
    return cmp > old ? take_operand : keep;
  }
}

template <class T>
T load(const unsigned char* p) noexcept {
  T v;
  std::memcpy(static_cast<void*>(&v), p, sizeof v);
  return v;
}

// ---- striped spinlocks for the elements CPU atomics cannot update ----

// Process-wide by nature: two domains, or two providers, may target the
// same memory. 256 cache lines; the lock of an element is picked by a
// multiplicative hash of its address, so neighbouring elements spread out.
struct alignas(64) stripe {
  std::atomic<bool> held{false};
};
constexpr unsigned stripe_bits = 8;
stripe stripes[1u << stripe_bits];

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

class stripe_guard {
 public:
  explicit stripe_guard(const void* element) noexcept
      : s_(stripes[(reinterpret_cast<uintptr_t>(element) * 0x9e3779b97f4a7c15ull) >>
                   (64 - stripe_bits)]) {
    // Hold times are a few dozen instructions; past a short spin the holder
    // has most likely been preempted (the machine may have fewer cores than
    // threads), so give it the CPU.
    unsigned spins = 0;
    while (s_.held.exchange(true, std::memory_order_acquire)) {
      while (s_.held.load(std::memory_order_relaxed)) {
        if (++spins < 64) {
          cpu_relax();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  ~stripe_guard() { s_.held.store(false, std::memory_order_release); }
  stripe_guard(const stripe_guard&) = delete;
  stripe_guard& operator=(const stripe_guard&) = delete;

 private:
  stripe& s_;
};

// ---- kernels ----

using kernel = void (*)(unsigned char* tgt, const unsigned char* opd, const unsigned char* cmp,
                        unsigned char* res, size_t count) noexcept;

// Any element, any alignment: under the element's stripe lock.
template <int Op, class T, bool Fetch>
void run_striped(unsigned char* tgt, const unsigned char* opd, const unsigned char* cmp,
                 unsigned char* res, size_t count) noexcept {
  constexpr size_t sz = sizeof(T);
  for (size_t i = 0; i < count; ++i) {
    unsigned char* elem = tgt + i * sz;
    unsigned char opd_bytes[sz] = {};
    unsigned char old_bytes[sz];
    T o{}, c{};
    if constexpr (uses_operand(Op)) {
      std::memcpy(opd_bytes, opd + i * sz, sz);
      o = load<T>(opd_bytes);
    }
    if constexpr (uses_compare(Op)) c = load<T>(cmp + i * sz);
    {
      stripe_guard guard(elem);
      std::memcpy(old_bytes, elem, sz);
      T out{};
      switch (compute<Op, T>(load<T>(old_bytes), o, c, out)) {
        case action::keep:
          break;
        case action::take_operand:
          std::memcpy(elem, opd_bytes, sz);
          break;
        case action::store:
          std::memcpy(elem, static_cast<const void*>(&out), sz);
          break;
      }
    }
    if constexpr (Fetch) std::memcpy(res + i * sz, old_bytes, sz);
  }
}

// The machine word of each lock-free size. may_alias: the target's declared
// type is the application's (float, a complex, an int), read here as bits.
template <size_t N>
struct word {};
template <>
struct word<1> {
  typedef uint8_t __attribute__((may_alias)) type;
};
template <>
struct word<2> {
  typedef uint16_t __attribute__((may_alias)) type;
};
template <>
struct word<4> {
  typedef uint32_t __attribute__((may_alias)) type;
};
template <>
struct word<8> {
  typedef uint64_t __attribute__((may_alias)) type;
};
static_assert(__atomic_always_lock_free(8, nullptr));

constexpr bool direct_size(size_t n) noexcept {
  return n == 1 || n == 2 || n == 4 || n == 8;
}

// One element updated with CPU atomics; returns the value it held before.
// Integers use the native read-modify-write instructions where one exists
// (unsigned, so signed values wrap); everything else is a compare-and-swap
// loop on the bit pattern, computing with the element type.
template <int Op, class T, bool Fetch, class W>
W update_word(W* p, [[maybe_unused]] W opd, [[maybe_unused]] W cmp) noexcept {
  constexpr int mo = __ATOMIC_SEQ_CST;
  if constexpr (Op == FI_ATOMIC_READ) {
    return __atomic_load_n(p, mo);
  } else if constexpr (Op == FI_ATOMIC_WRITE) {
    if constexpr (Fetch) return __atomic_exchange_n(p, opd, mo);
    __atomic_store_n(p, opd, mo);
    return 0;
  } else if constexpr (is_int<T> && Op == FI_SUM) {
    return __atomic_fetch_add(p, opd, mo);
  } else if constexpr (Op == FI_BOR) {
    return __atomic_fetch_or(p, opd, mo);
  } else if constexpr (Op == FI_BAND) {
    return __atomic_fetch_and(p, opd, mo);
  } else if constexpr (Op == FI_BXOR) {
    return __atomic_fetch_xor(p, opd, mo);
  } else if constexpr (is_int<T> && Op == FI_CSWAP) {
    // Integer equality is bit equality: one compare-and-swap does it all.
    W expected = cmp;
    __atomic_compare_exchange_n(p, &expected, opd, false, mo, mo);
    return expected;
  } else {
    const T o = load<T>(reinterpret_cast<const unsigned char*>(&opd));
    const T c = load<T>(reinterpret_cast<const unsigned char*>(&cmp));
    W old = __atomic_load_n(p, mo);
    for (;;) {
      T out{};
      const action a =
          compute<Op, T>(load<T>(reinterpret_cast<const unsigned char*>(&old)), o, c, out);
      if (a == action::keep) return old;  // linearised at the load
      W next = opd;
      if (a == action::store) std::memcpy(&next, static_cast<const void*>(&out), sizeof next);
      if (__atomic_compare_exchange_n(p, &old, next, true, mo, mo)) return old;
    }
  }
}

// Elements of 1, 2, 4 or 8 bytes at addresses aligned to their size.
template <int Op, class T, bool Fetch>
void run_direct(unsigned char* tgt, const unsigned char* opd, const unsigned char* cmp,
                unsigned char* res, size_t count) noexcept {
  constexpr size_t sz = sizeof(T);
  using W = typename word<sz>::type;
  for (size_t i = 0; i < count; ++i) {
    W o = 0, c = 0;
    if constexpr (uses_operand(Op)) std::memcpy(&o, opd + i * sz, sz);
    if constexpr (uses_compare(Op)) std::memcpy(&c, cmp + i * sz, sz);
    const W old = update_word<Op, T, Fetch>(reinterpret_cast<W*>(tgt + i * sz), o, c);
    if constexpr (Fetch) std::memcpy(res + i * sz, &old, sz);
  }
}

// ---- the table ----

struct entry {
  kernel direct;  // null: unsupported
  kernel striped;
};

template <int Op, int DT, int Kind>
constexpr entry make_entry() noexcept {
  using T = dt_t<DT>;
  if constexpr (!kind_allows(Op, Kind) || !type_allows<T>(Op)) {
    return {nullptr, nullptr};
  } else {
    // fetch and compare kinds return the old value; base kinds do not.
    constexpr bool fetch = Kind != static_cast<int>(atomic_kind::base);
    constexpr kernel striped = &run_striped<Op, T, fetch>;
    if constexpr (direct_size(sizeof(T))) {
      return {&run_direct<Op, T, fetch>, striped};
    } else {
      return {striped, striped};
    }
  }
}

constexpr size_t index_of(int op, int dt, int kind) noexcept {
  return (static_cast<size_t>(op) * n_dt + static_cast<size_t>(dt)) * n_kind +
         static_cast<size_t>(kind);
}

template <size_t... I>
constexpr std::array<entry, sizeof...(I)> make_table(std::index_sequence<I...>) noexcept {
  return {make_entry<static_cast<int>(I / (n_dt * n_kind)), static_cast<int>(I / n_kind % n_dt),
                     static_cast<int>(I % n_kind)>()...};
}
constexpr auto table = make_table(std::make_index_sequence<n_op * n_dt * n_kind>{});

template <size_t... I>
constexpr std::array<size_t, n_dt> make_sizes(std::index_sequence<I...>) noexcept {
  return {sizeof(dt_t<static_cast<int>(I)>)...};
}
constexpr auto type_sizes = make_sizes(std::make_index_sequence<n_dt>{});

const entry* find(int op, int datatype, atomic_kind kind) noexcept {
  const auto k = static_cast<unsigned>(kind);
  if (op < 0 || op >= n_op || datatype < 0 || datatype >= n_dt || k >= n_kind) return nullptr;
  const entry& e = table[index_of(op, datatype, static_cast<int>(k))];
  return e.direct ? &e : nullptr;
}

}  // namespace

size_t atomic_type_size(int datatype) noexcept {
  if (datatype < 0 || datatype >= n_dt) return 0;
  return type_sizes[static_cast<size_t>(datatype)];
}

bool atomic_supported(int op, int datatype, atomic_kind kind) noexcept {
  return find(op, datatype, kind) != nullptr;
}

errc atomic_apply(int op, int datatype, atomic_kind kind, void* target, const void* operand,
                  const void* compare, void* result, size_t count) noexcept {
  const entry* e = find(op, datatype, kind);
  if (!e) return errc::opnotsupp;
  if (count == 0) return errc::ok;
  if (!target || (uses_operand(op) && !operand) || (kind == atomic_kind::compare && !compare) ||
      (kind != atomic_kind::base && !result))
    return errc::inval;
  const size_t sz = type_sizes[static_cast<size_t>(datatype)];
  if (count > SIZE_MAX / sz) return errc::inval;
  // Every size is a power of two; an element that is not aligned to its size
  // cannot be updated by one CPU atomic (or would split a cache line).
  const bool aligned = (reinterpret_cast<uintptr_t>(target) & (sz - 1)) == 0;
  (aligned ? e->direct : e->striped)(
      static_cast<unsigned char*>(target), static_cast<const unsigned char*>(operand),
      static_cast<const unsigned char*>(compare), static_cast<unsigned char*>(result), count);
  return errc::ok;
}

int atomic_valid(int op, int datatype, atomic_kind kind, size_t max_bytes, size_t* count) noexcept {
  if (!count) return -FI_EINVAL;
  if (!atomic_supported(op, datatype, kind)) return -FI_EOPNOTSUPP;
  // fi_atomic(3): a call carries between 1 and `count` elements; a provider
  // that cannot move even one element of this type does not support it.
  const size_t n = max_bytes / atomic_type_size(datatype);
  if (n == 0) return -FI_EOPNOTSUPP;
  *count = n;
  return 0;
}

int atomic_query(int op, int datatype, atomic_kind kind, size_t max_bytes,
                 fi_atomic_attr* attr) noexcept {
  if (!attr) return -FI_EINVAL;
  size_t n = 0;
  if (const int rc = atomic_valid(op, datatype, kind, max_bytes, &n)) return rc;
  attr->size = atomic_type_size(datatype);
  attr->count = n;
  return 0;
}

int query_atomic_flags(uint64_t flags, atomic_kind* kind) noexcept {
  if (!kind) return -FI_EINVAL;
  constexpr uint64_t known = FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC | FI_TAGGED | FI_COLLECTIVE;
  if (flags & ~known) return -FI_EBADFLAGS;
  if ((flags & FI_FETCH_ATOMIC) && (flags & FI_COMPARE_ATOMIC)) return -FI_EBADFLAGS;
  if (flags & (FI_TAGGED | FI_COLLECTIVE)) return -FI_EOPNOTSUPP;
  *kind = (flags & FI_FETCH_ATOMIC)     ? atomic_kind::fetch
          : (flags & FI_COMPARE_ATOMIC) ? atomic_kind::compare
                                        : atomic_kind::base;
  return 0;
}

int query_atomic(int op, int datatype, uint64_t flags, size_t max_bytes,
                 fi_atomic_attr* attr) noexcept {
  if (!attr) return -FI_EINVAL;
  atomic_kind kind{};
  if (const int rc = query_atomic_flags(flags, &kind)) return rc;
  return atomic_query(op, datatype, kind, max_bytes, attr);
}

}  // namespace weft::util
