// SPDX-License-Identifier: MIT
// weft — unit tests of the atomic engine (util/atomic): every supported
// operation × datatype × kind checked against a reference computation
// written here from fi_atomic(3)'s pseudo-code, on all combinations of a few
// edge values, through both update paths (aligned targets: CPU atomics;
// misaligned ones: striped locks); refusal of everything else; result
// buffers; concurrency; the valid/query helpers.
#include <gtest/gtest.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include "util/atomic.hpp"

using namespace weft;
using namespace weft::util;

namespace {

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

constexpr atomic_kind all_kinds[] = {atomic_kind::base, atomic_kind::fetch, atomic_kind::compare};

const char* kind_name(atomic_kind k) {
  switch (k) {
    case atomic_kind::base:
      return "base";
    case atomic_kind::fetch:
      return "fetch";
    case atomic_kind::compare:
      return "compare";
  }
  return "?";
}

// The support rules, stated independently of the engine's tables.
bool expect_supported(int op, int dt, atomic_kind k) {
  if (dt < FI_INT8 || dt > FI_UINT128 || op < FI_MIN || op > FI_MSWAP) return false;
  const bool integer = dt <= FI_UINT64 || dt == FI_INT128 || dt == FI_UINT128;
  const bool complex =
      dt == FI_FLOAT_COMPLEX || dt == FI_DOUBLE_COMPLEX || dt == FI_LONG_DOUBLE_COMPLEX;
  bool listed = false;
  switch (k) {
    case atomic_kind::base:
      listed = op <= FI_BXOR || op == FI_ATOMIC_WRITE;
      break;
    case atomic_kind::fetch:
      listed = op <= FI_BXOR || op == FI_ATOMIC_READ || op == FI_ATOMIC_WRITE;
      break;
    case atomic_kind::compare:
      listed = op >= FI_CSWAP && op <= FI_MSWAP;
      break;
    default:
      return false;
  }
  if (!listed) return false;
  const bool ordering = op == FI_MIN || op == FI_MAX || op == FI_CSWAP_LE || op == FI_CSWAP_LT ||
                        op == FI_CSWAP_GE || op == FI_CSWAP_GT;
  const bool bitwise = op == FI_BOR || op == FI_BAND || op == FI_BXOR || op == FI_MSWAP;
  if (ordering && complex) return false;
  if (bitwise && !integer) return false;
  return true;
}

template <class T>
constexpr bool t_int = std::is_integral_v<T> || std::is_same_v<T, i128> || std::is_same_v<T, u128>;
template <class T>
constexpr bool t_cplx = false;
template <class F>
constexpr bool t_cplx<std::complex<F>> = true;

template <class T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(static_cast<void*>(&v), p, sizeof v);
  return v;
}

// Edge values: zero, one, all ones (-1 / the maximum), the top bit alone
// (the minimum of signed types), the signed maximum, a bit pattern; for
// floating point: both zeros, fractions of both signs, the largest finite
// value, NaN.
template <class T>
std::vector<T> edge_values() {
  if constexpr (t_int<T>) {
    constexpr unsigned bits = sizeof(T) * 8;
    const u128 one = 1;
    const u128 pattern = (u128(0x5a5a5a5a5a5a5a5aull) << 64) | 0xa5a5a5a5a5a5a5a5ull;
    return {T(0),      T(1), T(~u128(0)), T(7), T(one << (bits - 1)), T((one << (bits - 1)) - 1),
            T(pattern)};
  } else if constexpr (t_cplx<T>) {
    using F = typename T::value_type;
    const F nan = std::numeric_limits<F>::quiet_NaN();
    return {T(0, 0),  T(F(-0.0), 0), T(1.5, -2),
            T(0, 1),  T(-3, 0.5),    T(std::numeric_limits<F>::max(), 1),
            T(nan, 0)};
  } else {
    return {T(0),
            T(-0.0),
            T(1.5),
            T(-2.25),
            T(3),
            std::numeric_limits<T>::max(),
            std::numeric_limits<T>::quiet_NaN()};
  }
}

// fi_atomic(3)'s pseudo-code, run on plain values. Integer arithmetic is
// done on 128-bit unsigned values and truncated (two's complement wrap).
template <class T>
bool t_truth(const T& v) {
  return v != T(0);
}
template <class T>
void reference(int op, T& addr, const T& buf, const T& cmp) {
  if constexpr (t_int<T>) {
    switch (op) {
      case FI_SUM:
        addr = T(u128(addr) + u128(buf));
        return;
      case FI_PROD:
        addr = T(u128(addr) * u128(buf));
        return;
      case FI_BOR:
        addr = T(u128(addr) | u128(buf));
        return;
      case FI_BAND:
        addr = T(u128(addr) & u128(buf));
        return;
      case FI_BXOR:
        addr = T(u128(addr) ^ u128(buf));
        return;
      case FI_MSWAP:
        addr = T((u128(buf) & u128(cmp)) | (u128(addr) & ~u128(cmp)));
        return;
    }
  } else {
    switch (op) {
      case FI_SUM:
        addr = addr + buf;
        return;
      case FI_PROD:
        addr = addr * buf;
        return;
    }
  }
  if constexpr (!t_cplx<T>) {
    switch (op) {
      case FI_MIN:
        if (buf < addr) addr = buf;
        return;
      case FI_MAX:
        if (buf > addr) addr = buf;
        return;
      case FI_CSWAP_LE:
        if (cmp <= addr) addr = buf;
        return;
      case FI_CSWAP_LT:
        if (cmp < addr) addr = buf;
        return;
      case FI_CSWAP_GE:
        if (cmp >= addr) addr = buf;
        return;
      case FI_CSWAP_GT:
        if (cmp > addr) addr = buf;
        return;
    }
  }
  const bool a = t_truth(addr), b = t_truth(buf);
  switch (op) {
    case FI_LOR:
      addr = (a || b) ? T(1) : T(0);
      return;
    case FI_LAND:
      addr = (a && b) ? T(1) : T(0);
      return;
    case FI_LXOR:
      addr = ((a && !b) || (!a && b)) ? T(1) : T(0);
      return;
    case FI_ATOMIC_READ:
      return;
    case FI_ATOMIC_WRITE:
      addr = buf;
      return;
    case FI_CSWAP:
      if (cmp == addr) addr = buf;
      return;
    case FI_CSWAP_NE:
      if (cmp != addr) addr = buf;
      return;
  }
  ADD_FAILURE() << "no reference for op " << op;
}

template <class F>
bool same_real(F a, F b) {
  if (std::isnan(a)) return std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}
// Same value, telling -0.0 from +0.0 and NaN equal to NaN.
template <class T>
bool same(const T& a, const T& b) {
  if constexpr (t_int<T>) {
    return a == b;
  } else if constexpr (t_cplx<T>) {
    return same_real(a.real(), b.real()) && same_real(a.imag(), b.imag());
  } else {
    return same_real(a, b);
  }
}

// A byte buffer whose start is 64-byte aligned plus `misalign`.
class bytes {
 public:
  bytes(size_t n, size_t misalign) : store_(new unsigned char[n + 128]) {
    auto base = reinterpret_cast<uintptr_t>(store_.get());
    p_ = store_.get() + ((64 - base % 64) % 64) + misalign;
  }
  unsigned char* get() const { return p_; }

 private:
  std::unique_ptr<unsigned char[]> store_;
  unsigned char* p_;
};

// Every op and kind on all (old, operand, compare) triples of edge values.
template <class T>
void check_matrix(int dt, size_t misalign) {
  constexpr size_t sz = sizeof(T);
  ASSERT_EQ(atomic_type_size(dt), sz);
  const std::vector<T> v = edge_values<T>();
  const size_t n = v.size(), count = n * n * n;
  std::vector<T> old(count), opd(count), cmp(count);
  for (size_t a = 0, i = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b)
      for (size_t c = 0; c < n; ++c, ++i) {
        old[i] = v[a];
        opd[i] = v[b];
        cmp[i] = v[c];
      }
  const size_t len = count * sz;
  int checked = 0;
  for (int op = FI_MIN; op <= FI_MSWAP; ++op) {
    for (atomic_kind kind : all_kinds) {
      if (!expect_supported(op, dt, kind)) continue;
      ++checked;
      bytes tgt(len, misalign), o(len, misalign), c(len, misalign), res(len, misalign);
      std::memcpy(tgt.get(), old.data(), len);
      std::memcpy(o.get(), opd.data(), len);
      std::memcpy(c.get(), cmp.data(), len);
      std::memset(res.get(), 0xcd, len);
      const errc rc =
          atomic_apply(op, dt, kind, tgt.get(), op == FI_ATOMIC_READ ? nullptr : o.get(),
                       kind == atomic_kind::compare ? c.get() : nullptr,
                       kind == atomic_kind::base ? nullptr : res.get(), count);
      ASSERT_EQ(rc, errc::ok) << "op " << op << " kind " << kind_name(kind);
      int bad = 0;
      for (size_t i = 0; i < count && bad < 5; ++i) {
        T expect = old[i];
        reference(op, expect, opd[i], cmp[i]);
        const T got = load<T>(tgt.get() + i * sz);
        if (!same(got, expect)) {
          ++bad;
          ADD_FAILURE() << "dt " << dt << " op " << op << " kind " << kind_name(kind) << " element "
                        << i << " (old " << i / (n * n) << ", operand " << i / n % n << ", compare "
                        << i % n << ")";
        }
        if (kind != atomic_kind::base && std::memcmp(res.get() + i * sz, &old[i], sz) != 0) {
          ++bad;
          ADD_FAILURE() << "dt " << dt << " op " << op << " kind " << kind_name(kind) << ": result "
                        << i << " is not the old value";
        }
      }
      EXPECT_EQ(std::memcmp(o.get(), opd.data(), len), 0) << "operand changed, op " << op;
      EXPECT_EQ(std::memcmp(c.get(), cmp.data(), len), 0) << "compare changed, op " << op;
    }
  }
  EXPECT_GT(checked, 0);
}

void check_datatype(int dt, size_t misalign) {
  switch (dt) {
    case FI_INT8:
      return check_matrix<int8_t>(dt, misalign);
    case FI_UINT8:
      return check_matrix<uint8_t>(dt, misalign);
    case FI_INT16:
      return check_matrix<int16_t>(dt, misalign);
    case FI_UINT16:
      return check_matrix<uint16_t>(dt, misalign);
    case FI_INT32:
      return check_matrix<int32_t>(dt, misalign);
    case FI_UINT32:
      return check_matrix<uint32_t>(dt, misalign);
    case FI_INT64:
      return check_matrix<int64_t>(dt, misalign);
    case FI_UINT64:
      return check_matrix<uint64_t>(dt, misalign);
    case FI_FLOAT:
      return check_matrix<float>(dt, misalign);
    case FI_DOUBLE:
      return check_matrix<double>(dt, misalign);
    case FI_FLOAT_COMPLEX:
      return check_matrix<std::complex<float>>(dt, misalign);
    case FI_DOUBLE_COMPLEX:
      return check_matrix<std::complex<double>>(dt, misalign);
    case FI_LONG_DOUBLE:
      return check_matrix<long double>(dt, misalign);
    case FI_LONG_DOUBLE_COMPLEX:
      return check_matrix<std::complex<long double>>(dt, misalign);
    case FI_INT128:
      return check_matrix<i128>(dt, misalign);
    case FI_UINT128:
      return check_matrix<u128>(dt, misalign);
  }
  FAIL() << "datatype " << dt;
}

const char* const dt_names[] = {"int8",    "uint8",           "int16",         "uint16",
                                "int32",   "uint32",          "int64",         "uint64",
                                "float",   "double",          "float_complex", "double_complex",
                                "ldouble", "ldouble_complex", "int128",        "uint128"};

// (datatype, misalignment of every buffer): 0 takes the CPU-atomic path for
// elements of 1 to 8 bytes, 1 forces the striped path for all of them.
class atomic_matrix : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

TEST_P(atomic_matrix, every_op_and_kind_matches_reference) {
  check_datatype(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(util, atomic_matrix,
                         ::testing::Combine(::testing::Range(int(FI_INT8), int(FI_UINT128) + 1),
                                            ::testing::Values(size_t{0}, size_t{1})),
                         [](const ::testing::TestParamInfo<std::tuple<int, size_t>>& info) {
                           return std::string(dt_names[std::get<0>(info.param)]) +
                                  (std::get<1>(info.param) ? "_misaligned" : "_aligned");
                         });

}  // namespace

// ---- support and refusal ----

TEST(atomic, type_sizes) {
  EXPECT_EQ(atomic_type_size(FI_INT8), 1u);
  EXPECT_EQ(atomic_type_size(FI_UINT16), 2u);
  EXPECT_EQ(atomic_type_size(FI_INT32), 4u);
  EXPECT_EQ(atomic_type_size(FI_UINT64), 8u);
  EXPECT_EQ(atomic_type_size(FI_FLOAT), sizeof(float));
  EXPECT_EQ(atomic_type_size(FI_DOUBLE), sizeof(double));
  EXPECT_EQ(atomic_type_size(FI_FLOAT_COMPLEX), 2 * sizeof(float));
  EXPECT_EQ(atomic_type_size(FI_DOUBLE_COMPLEX), 2 * sizeof(double));
  EXPECT_EQ(atomic_type_size(FI_LONG_DOUBLE), sizeof(long double));
  EXPECT_EQ(atomic_type_size(FI_LONG_DOUBLE_COMPLEX), 2 * sizeof(long double));
  EXPECT_EQ(atomic_type_size(FI_INT128), 16u);
  EXPECT_EQ(atomic_type_size(FI_UINT128), 16u);
  for (int dt : {-1, int(FI_FLOAT16), int(FI_BFLOAT16), int(FI_FLOAT8_E4M3), int(FI_FLOAT8_E5M2),
                 int(FI_FLOAT8_E5M2) + 1, int(FI_VOID), 1 << 30})
    EXPECT_EQ(atomic_type_size(dt), 0u) << dt;
}

TEST(atomic, supported_matches_rules_and_refusals_touch_nothing) {
  std::vector<int> ops, dts;
  for (int op = -2; op <= FI_DIFF + 2; ++op) ops.push_back(op);
  ops.push_back(FI_NOOP);
  for (int dt = -2; dt <= FI_FLOAT8_E5M2 + 2; ++dt) dts.push_back(dt);
  dts.push_back(FI_VOID);
  int supported = 0;
  for (int op : ops)
    for (int dt : dts)
      for (unsigned k = 0; k < 5; ++k) {
        const auto kind = static_cast<atomic_kind>(k);
        const bool expect = expect_supported(op, dt, kind);
        ASSERT_EQ(atomic_supported(op, dt, kind), expect)
            << "op " << op << " dt " << dt << " kind " << k;
        if (expect) {
          ++supported;
          continue;
        }
        alignas(64) unsigned char tgt[64], o[64], c[64], r[64];
        std::memset(tgt, 0x11, sizeof tgt);
        std::memset(o, 0x22, sizeof o);
        std::memset(c, 0x33, sizeof c);
        std::memset(r, 0x44, sizeof r);
        EXPECT_EQ(atomic_apply(op, dt, kind, tgt, o, c, r, 1), errc::opnotsupp);
        for (unsigned char b : tgt) ASSERT_EQ(b, 0x11);
        for (unsigned char b : r) ASSERT_EQ(b, 0x44);
      }
  // 16 types: base 11 ops, fetch 12, compare 7, less ordering ops on the 3
  // complex types (2 + 2 + 4) and bitwise ops on the 6 floating-point types
  // (3 + 3 + 1).
  EXPECT_EQ(supported, 16 * (11 + 12 + 7) - 3 * (2 + 2 + 4) - 6 * (3 + 3 + 1));
}

// ---- semantics worth spelling out ----

TEST(atomic, integers_wrap_without_promotion_overflow) {
  int8_t i8 = 127, one8 = 1;
  ASSERT_EQ(atomic_apply(FI_SUM, FI_INT8, atomic_kind::base, &i8, &one8, nullptr, nullptr, 1),
            errc::ok);
  EXPECT_EQ(i8, -128);
  // 65535 * 65535 would overflow int after promotion.
  uint16_t u16 = 65535, m16 = 65535;
  ASSERT_EQ(atomic_apply(FI_PROD, FI_UINT16, atomic_kind::base, &u16, &m16, nullptr, nullptr, 1),
            errc::ok);
  EXPECT_EQ(u16, 1);
  int64_t i64 = std::numeric_limits<int64_t>::min(), neg = -1;
  ASSERT_EQ(atomic_apply(FI_PROD, FI_INT64, atomic_kind::base, &i64, &neg, nullptr, nullptr, 1),
            errc::ok);
  EXPECT_EQ(i64, std::numeric_limits<int64_t>::min());
  alignas(16) i128 big = i128(~u128(0) >> 1), one = 1;
  ASSERT_EQ(atomic_apply(FI_SUM, FI_INT128, atomic_kind::base, &big, &one, nullptr, nullptr, 1),
            errc::ok);
  EXPECT_TRUE(big < 0);
}

TEST(atomic, floating_point_compares_arithmetically) {
  // CSWAP: -0.0 == +0.0, so the swap happens.
  float f = -0.0f, cmp = 0.0f, val = 4.0f, old = 1.0f;
  ASSERT_EQ(atomic_apply(FI_CSWAP, FI_FLOAT, atomic_kind::compare, &f, &val, &cmp, &old, 1),
            errc::ok);
  EXPECT_EQ(f, 4.0f);
  EXPECT_TRUE(std::signbit(old));
  // NaN is unordered: MIN with a NaN operand never writes.
  double d = 2.0, nan = std::nan(""), dres = 0;
  ASSERT_EQ(atomic_apply(FI_MIN, FI_DOUBLE, atomic_kind::fetch, &d, &nan, nullptr, &dres, 1),
            errc::ok);
  EXPECT_EQ(d, 2.0);
  EXPECT_EQ(dres, 2.0);
  // CSWAP_LE follows the man page to the letter: compare <= addr.
  double t = 5.0, c3 = 3.0, v9 = 9.0;
  ASSERT_EQ(atomic_apply(FI_CSWAP_LE, FI_DOUBLE, atomic_kind::compare, &t, &v9, &c3, &dres, 1),
            errc::ok);
  EXPECT_EQ(t, 9.0);
}

TEST(atomic, logical_ops_on_floating_point_and_complex) {
  double d = 0.5, zero = -0.0;
  ASSERT_EQ(atomic_apply(FI_LAND, FI_DOUBLE, atomic_kind::base, &d, &zero, nullptr, nullptr, 1),
            errc::ok);
  EXPECT_EQ(d, 0.0);
  double nan = std::nan("");
  ASSERT_EQ(atomic_apply(FI_LOR, FI_DOUBLE, atomic_kind::base, &d, &nan, nullptr, nullptr, 1),
            errc::ok);
  EXPECT_EQ(d, 1.0);  // NaN is nonzero, hence true
  std::complex<float> z(0, 2), w(3, 0);
  ASSERT_EQ(atomic_apply(FI_LXOR, FI_FLOAT_COMPLEX, atomic_kind::base, &z, &w, nullptr, nullptr, 1),
            errc::ok);
  EXPECT_EQ(z, std::complex<float>(0, 0));
  ASSERT_EQ(atomic_apply(FI_LOR, FI_FLOAT_COMPLEX, atomic_kind::base, &z, &w, nullptr, nullptr, 1),
            errc::ok);
  EXPECT_EQ(z, std::complex<float>(1, 0));
}

TEST(atomic, mswap_replaces_masked_bits) {
  uint32_t t = 0x12345678, v = 0xabcdef01, mask = 0xffff0000, old = 0;
  ASSERT_EQ(atomic_apply(FI_MSWAP, FI_UINT32, atomic_kind::compare, &t, &v, &mask, &old, 1),
            errc::ok);
  EXPECT_EQ(t, 0xabcd5678u);
  EXPECT_EQ(old, 0x12345678u);
}

TEST(atomic, read_needs_no_operand_and_changes_nothing) {
  int64_t v[3] = {4, -5, 6}, r[3] = {};
  ASSERT_EQ(atomic_apply(FI_ATOMIC_READ, FI_INT64, atomic_kind::fetch, v, nullptr, nullptr, r, 3),
            errc::ok);
  EXPECT_EQ(r[0], 4);
  EXPECT_EQ(r[1], -5);
  EXPECT_EQ(r[2], 6);
  EXPECT_EQ(v[1], -5);
}

// long double has 6 bytes of padding on x86-64; a value moved unchanged
// keeps every byte, and results carry every byte of the old value.
TEST(atomic, long_double_moves_all_bytes) {
  constexpr size_t sz = sizeof(long double);
  alignas(16) unsigned char tgt[sz], opd[sz], res[sz], before[sz];
  const long double a = 1.25L, b = -7.5L;
  std::memset(tgt, 0x5c, sz);
  std::memcpy(tgt, &a, 10);
  std::memset(opd, 0xa3, sz);
  std::memcpy(opd, &b, 10);
  std::memcpy(before, tgt, sz);
  ASSERT_EQ(
      atomic_apply(FI_ATOMIC_WRITE, FI_LONG_DOUBLE, atomic_kind::fetch, tgt, opd, nullptr, res, 1),
      errc::ok);
  EXPECT_EQ(std::memcmp(tgt, opd, sz), 0);
  EXPECT_EQ(std::memcmp(res, before, sz), 0);
  // MIN taking the operand: all bytes too.
  std::memcpy(tgt, before, sz);
  ASSERT_EQ(atomic_apply(FI_MIN, FI_LONG_DOUBLE, atomic_kind::base, tgt, opd, nullptr, nullptr, 1),
            errc::ok);
  EXPECT_EQ(std::memcmp(tgt, opd, sz), 0);
}

TEST(atomic, count_many_and_zero) {
  std::vector<uint32_t> t(1000), o(1000), r(1000);
  for (uint32_t i = 0; i < 1000; ++i) {
    t[i] = i;
    o[i] = 3 * i;
  }
  ASSERT_EQ(atomic_apply(FI_SUM, FI_UINT32, atomic_kind::fetch, t.data(), o.data(), nullptr,
                         r.data(), t.size()),
            errc::ok);
  for (uint32_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(t[i], 4 * i);
    EXPECT_EQ(r[i], i);
  }
  // count 0: nothing to do, no buffer needed.
  EXPECT_EQ(
      atomic_apply(FI_SUM, FI_UINT32, atomic_kind::fetch, nullptr, nullptr, nullptr, nullptr, 0),
      errc::ok);
  // ... but still refused when unsupported.
  EXPECT_EQ(
      atomic_apply(FI_BOR, FI_FLOAT, atomic_kind::base, nullptr, nullptr, nullptr, nullptr, 0),
      errc::opnotsupp);
}

TEST(atomic, missing_buffers_and_huge_counts_are_invalid) {
  int64_t t = 1, o = 2, c = 1, r = 0;
  EXPECT_EQ(atomic_apply(FI_SUM, FI_INT64, atomic_kind::base, nullptr, &o, nullptr, nullptr, 1),
            errc::inval);
  EXPECT_EQ(atomic_apply(FI_SUM, FI_INT64, atomic_kind::base, &t, nullptr, nullptr, nullptr, 1),
            errc::inval);
  EXPECT_EQ(atomic_apply(FI_SUM, FI_INT64, atomic_kind::fetch, &t, &o, nullptr, nullptr, 1),
            errc::inval);
  EXPECT_EQ(atomic_apply(FI_CSWAP, FI_INT64, atomic_kind::compare, &t, &o, nullptr, &r, 1),
            errc::inval);
  EXPECT_EQ(atomic_apply(FI_CSWAP, FI_INT64, atomic_kind::compare, &t, &o, &c, nullptr, 1),
            errc::inval);
  EXPECT_EQ(
      atomic_apply(FI_ATOMIC_READ, FI_INT64, atomic_kind::fetch, &t, nullptr, nullptr, nullptr, 1),
      errc::inval);
  EXPECT_EQ(
      atomic_apply(FI_SUM, FI_INT64, atomic_kind::base, &t, &o, nullptr, nullptr, SIZE_MAX / 8 + 1),
      errc::inval);
  EXPECT_EQ(t, 1);
}

// A provider may build its reply in the request buffer: result == operand
// (or == compare) element for element.
TEST(atomic, result_may_be_the_operand_or_compare_buffer) {
  int64_t t[2] = {10, 20}, io[2] = {1, 2};
  ASSERT_EQ(atomic_apply(FI_SUM, FI_INT64, atomic_kind::fetch, t, io, nullptr, io, 2), errc::ok);
  EXPECT_EQ(t[0], 11);
  EXPECT_EQ(t[1], 22);
  EXPECT_EQ(io[0], 10);
  EXPECT_EQ(io[1], 20);

  using ldc = std::complex<long double>;
  ldc z[1] = {ldc(1, 1)}, zo[1] = {ldc(2, 3)};
  ASSERT_EQ(atomic_apply(FI_SUM, FI_LONG_DOUBLE_COMPLEX, atomic_kind::fetch, z, zo, nullptr, zo, 1),
            errc::ok);
  EXPECT_EQ(z[0], ldc(3, 4));
  EXPECT_EQ(zo[0], ldc(1, 1));

  uint16_t u[2] = {5, 6}, uo[2] = {50, 60}, uc[2] = {5, 7};
  ASSERT_EQ(atomic_apply(FI_CSWAP, FI_UINT16, atomic_kind::compare, u, uo, uc, uc, 2), errc::ok);
  EXPECT_EQ(u[0], 50);
  EXPECT_EQ(u[1], 6);
  EXPECT_EQ(uc[0], 5);
  EXPECT_EQ(uc[1], 6);
}

// ---- concurrency: exact totals (also run under TSan) ----

namespace {

constexpr int n_threads = 4;

// Holds every thread until all have started, so that they really overlap
// (each one's work would otherwise fit in a time slice).
class start_line {
 public:
  void arrive_and_wait() {
    arrived_.fetch_add(1);
    while (arrived_.load() < n_threads) std::this_thread::yield();
  }

 private:
  std::atomic<int> arrived_{0};
};

template <class T>
void hammer(int dt, atomic_kind kind, void* target, T one, int iters) {
  start_line start;
  std::vector<std::thread> threads;
  for (int t = 0; t < n_threads; ++t)
    threads.emplace_back([=, &start] {
      start.arrive_and_wait();
      alignas(32) T res{};
      for (int i = 0; i < iters; ++i)
        if (atomic_apply(FI_SUM, dt, kind, target, &one, nullptr,
                         kind == atomic_kind::base ? nullptr : &res, 1) != errc::ok) {
          ADD_FAILURE() << "atomic_apply failed";
          return;
        }
    });
  for (auto& th : threads) th.join();
}

}  // namespace

TEST(atomic_concurrency, int64_sum_is_exact) {
  alignas(8) int64_t v = 0;
  hammer<int64_t>(FI_INT64, atomic_kind::base, &v, 1, 100000);
  EXPECT_EQ(v, int64_t{n_threads} * 100000);
}

TEST(atomic_concurrency, long_double_complex_sum_is_exact) {
  using ldc = std::complex<long double>;
  alignas(32) ldc v(0, 0);
  hammer<ldc>(FI_LONG_DOUBLE_COMPLEX, atomic_kind::base, &v, ldc(1, -2), 100000);
  EXPECT_EQ(v, ldc(n_threads * 100000.0L, n_threads * -200000.0L));
}

// Every fetched value is distinct: each update saw the one before it.
TEST(atomic_concurrency, int64_fetch_sees_every_value_once) {
  constexpr int iters = 50000;
  alignas(8) int64_t v = 0;
  std::vector<std::vector<int64_t>> seen(n_threads);
  for (auto& s : seen) s.resize(iters);
  start_line start;
  std::vector<std::thread> threads;
  for (int t = 0; t < n_threads; ++t)
    threads.emplace_back([&v, &start, &out = seen[t]] {
      const int64_t one = 1;
      start.arrive_and_wait();
      for (int i = 0; i < iters; ++i)
        (void)atomic_apply(FI_SUM, FI_INT64, atomic_kind::fetch, &v, &one, nullptr, &out[i], 1);
    });
  for (auto& th : threads) th.join();
  std::vector<int64_t> all;
  for (auto& s : seen) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), size_t{n_threads} * iters);
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], int64_t(i));
}

TEST(atomic_concurrency, float_sum_cas_loop_is_exact) {
  alignas(4) float v = 0;
  hammer<float>(FI_FLOAT, atomic_kind::fetch, &v, 1.0f, 50000);
  EXPECT_EQ(v, float(n_threads * 50000));
}

TEST(atomic_concurrency, misaligned_and_128_bit_sums_are_exact) {
  alignas(64) unsigned char buf[64] = {};
  hammer<int64_t>(FI_INT64, atomic_kind::base, buf + 3, 1, 30000);
  int64_t got;
  std::memcpy(&got, buf + 3, sizeof got);
  EXPECT_EQ(got, int64_t{n_threads} * 30000);

  alignas(16) u128 w = ~u128(0);  // wraps through zero
  hammer<u128>(FI_UINT128, atomic_kind::fetch, &w, 1, 30000);
  EXPECT_TRUE(w == u128(n_threads * 30000 - 1));
}

// CSWAP from many threads: a spin-increment built on compare-and-swap.
TEST(atomic_concurrency, cswap_increments_are_exact) {
  alignas(16) long double v = 0;
  start_line start;
  std::vector<std::thread> threads;
  for (int t = 0; t < n_threads; ++t)
    threads.emplace_back([&v, &start] {
      start.arrive_and_wait();
      for (int i = 0; i < 20000; ++i) {
        long double seen = 0, cmp = 0, next = 1;
        do {
          cmp = seen;
          next = cmp + 1;
          ASSERT_EQ(atomic_apply(FI_CSWAP, FI_LONG_DOUBLE, atomic_kind::compare, &v, &next, &cmp,
                                 &seen, 1),
                    errc::ok);
        } while (seen != cmp);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(v, n_threads * 20000.0L);
}

// ---- valid and query helpers ----

TEST(atomic_query, valid_counts_elements) {
  size_t n = 0;
  EXPECT_EQ(atomic_valid(FI_SUM, FI_INT64, atomic_kind::base, 64, &n), 0);
  EXPECT_EQ(n, 8u);
  EXPECT_EQ(atomic_valid(FI_ATOMIC_READ, FI_LONG_DOUBLE_COMPLEX, atomic_kind::fetch, 4096, &n), 0);
  EXPECT_EQ(n, 4096 / (2 * sizeof(long double)));
  EXPECT_EQ(atomic_valid(FI_MSWAP, FI_UINT8, atomic_kind::compare, 3, &n), 0);
  EXPECT_EQ(n, 3u);

  n = 77;
  EXPECT_EQ(atomic_valid(FI_ATOMIC_READ, FI_INT64, atomic_kind::base, 64, &n), -FI_EOPNOTSUPP);
  EXPECT_EQ(atomic_valid(FI_MIN, FI_DOUBLE_COMPLEX, atomic_kind::fetch, 64, &n), -FI_EOPNOTSUPP);
  EXPECT_EQ(atomic_valid(FI_SUM, FI_FLOAT16, atomic_kind::base, 64, &n), -FI_EOPNOTSUPP);
  EXPECT_EQ(atomic_valid(FI_DIFF, FI_INT32, atomic_kind::base, 64, &n), -FI_EOPNOTSUPP);
  // Not even one element fits.
  EXPECT_EQ(atomic_valid(FI_SUM, FI_LONG_DOUBLE_COMPLEX, atomic_kind::base, 16, &n),
            -FI_EOPNOTSUPP);
  EXPECT_EQ(n, 77u);
  EXPECT_EQ(atomic_valid(FI_SUM, FI_INT64, atomic_kind::base, 64, nullptr), -FI_EINVAL);
}

TEST(atomic_query, query_fills_size_and_count) {
  fi_atomic_attr attr{};
  EXPECT_EQ(atomic_query(FI_SUM, FI_LONG_DOUBLE, atomic_kind::fetch, 256, &attr), 0);
  EXPECT_EQ(attr.size, sizeof(long double));
  EXPECT_EQ(attr.count, 256 / sizeof(long double));
  attr = {123, 456};
  EXPECT_EQ(atomic_query(FI_BAND, FI_DOUBLE, atomic_kind::base, 256, &attr), -FI_EOPNOTSUPP);
  EXPECT_EQ(attr.count, 123u);
  EXPECT_EQ(attr.size, 456u);
  EXPECT_EQ(atomic_query(FI_SUM, FI_INT8, atomic_kind::base, 256, nullptr), -FI_EINVAL);
}

TEST(atomic_query, flags) {
  atomic_kind k = atomic_kind::compare;
  EXPECT_EQ(query_atomic_flags(0, &k), 0);
  EXPECT_EQ(k, atomic_kind::base);
  EXPECT_EQ(query_atomic_flags(FI_FETCH_ATOMIC, &k), 0);
  EXPECT_EQ(k, atomic_kind::fetch);
  EXPECT_EQ(query_atomic_flags(FI_COMPARE_ATOMIC, &k), 0);
  EXPECT_EQ(k, atomic_kind::compare);
  EXPECT_EQ(query_atomic_flags(FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC, &k), -FI_EBADFLAGS);
  EXPECT_EQ(query_atomic_flags(FI_MSG, &k), -FI_EBADFLAGS);
  EXPECT_EQ(query_atomic_flags(1ULL << 63, &k), -FI_EBADFLAGS);
  EXPECT_EQ(query_atomic_flags(FI_TAGGED, &k), -FI_EOPNOTSUPP);
  EXPECT_EQ(query_atomic_flags(FI_TAGGED | FI_FETCH_ATOMIC, &k), -FI_EOPNOTSUPP);
  EXPECT_EQ(query_atomic_flags(FI_COLLECTIVE, &k), -FI_EOPNOTSUPP);
  EXPECT_EQ(k, atomic_kind::compare);  // untouched by the failures
  EXPECT_EQ(query_atomic_flags(0, nullptr), -FI_EINVAL);
}

TEST(atomic_query, whole_query) {
  fi_atomic_attr attr{};
  EXPECT_EQ(query_atomic(FI_CSWAP_GT, FI_INT128, FI_COMPARE_ATOMIC, 64, &attr), 0);
  EXPECT_EQ(attr.size, 16u);
  EXPECT_EQ(attr.count, 4u);
  EXPECT_EQ(query_atomic(FI_CSWAP_GT, FI_INT128, 0, 64, &attr), -FI_EOPNOTSUPP);
  EXPECT_EQ(query_atomic(FI_ATOMIC_READ, FI_FLOAT, FI_FETCH_ATOMIC, 64, &attr), 0);
  EXPECT_EQ(attr.size, 4u);
  EXPECT_EQ(attr.count, 16u);
  EXPECT_EQ(query_atomic(FI_SUM, FI_FLOAT, FI_COMPARE_ATOMIC | FI_FETCH_ATOMIC, 64, &attr),
            -FI_EBADFLAGS);
  EXPECT_EQ(query_atomic(FI_SUM, FI_FLOAT, 0, 64, nullptr), -FI_EINVAL);
}
