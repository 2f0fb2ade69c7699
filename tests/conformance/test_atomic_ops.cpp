// SPDX-License-Identifier: MIT
// weft — conformance for atomics (fi_atomic(3)), every operation on every
// datatype in every family (fi_atomic, fi_fetch_atomic, fi_compare_atomic):
// the valid calls and fi_query_atomic agree, each supported combination runs
// over the wire and leaves the target and the fetched values the reference
// below computes from the man page's pseudo-code, and each unsupported one is
// refused by the data call too. Then the edges: inject, FI_ATOMIC_READ
// without an operand, remote CQ data, element counts at and past the valid
// count, bad keys, ranges and access rights (an error completion, the target
// untouched). Providers without FI_ATOMIC skip.
#include "fixture.hpp"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include <complex>
#include <cstring>
#include <string>
#include <vector>

namespace conformance {
namespace {

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

// ---- the reference: fi_atomic(3)'s pseudo-code, element by element ----

template <class T>
struct int_of {  // integer datatypes: the unsigned type of the same width
  static constexpr bool yes = false;
};
#define WEFT_INT(T, U)                    \
  template <>                             \
  struct int_of<T> {                      \
    static constexpr bool yes = true;     \
    using u = U;                          \
  };
WEFT_INT(int8_t, uint8_t)
WEFT_INT(uint8_t, uint8_t)
WEFT_INT(int16_t, uint16_t)
WEFT_INT(uint16_t, uint16_t)
WEFT_INT(int32_t, uint32_t)
WEFT_INT(uint32_t, uint32_t)
WEFT_INT(int64_t, uint64_t)
WEFT_INT(uint64_t, uint64_t)
WEFT_INT(i128, u128)
WEFT_INT(u128, u128)
#undef WEFT_INT

template <class T>
constexpr bool is_cplx = false;
template <class F>
constexpr bool is_cplx<std::complex<F>> = true;
// long double has padding bytes: its values are compared, not its bytes.
template <class T>
constexpr bool by_value = std::is_same_v<T, long double> ||
                          std::is_same_v<T, std::complex<long double>>;

template <class T>
T make(long long re, long long im) {
  if constexpr (is_cplx<T>) {
    return T(static_cast<typename T::value_type>(re), static_cast<typename T::value_type>(im));
  } else {
    return static_cast<T>(re);  // unsigned: modulo 2^n, as C converts
  }
}

template <class T>
bool truth(const T& v) {
  if constexpr (is_cplx<T>) {
    return v.real() != 0 || v.imag() != 0;
  } else {
    return v != T(0);
  }
}

// Integer + and * wrap (unsigned arithmetic in at least an unsigned int, so
// that small types do not overflow a promoted signed int).
template <class T>
T add(T a, T b) {
  if constexpr (int_of<T>::yes) {
    using U = typename int_of<T>::u;
    using W = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, U>;
    return static_cast<T>(static_cast<U>(W(U(a)) + W(U(b))));
  } else {
    return a + b;
  }
}
template <class T>
T mul(T a, T b) {
  if constexpr (int_of<T>::yes) {
    using U = typename int_of<T>::u;
    using W = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, U>;
    return static_cast<T>(static_cast<U>(W(U(a)) * W(U(b))));
  } else {
    return a * b;
  }
}

// What addr[i] becomes for buf[i] = o, compare[i] = c.
template <class T>
T reference(int op, T t, T o, T c) {
  const T one = make<T>(1, 0), zero = make<T>(0, 0);
  switch (op) {
    case FI_SUM: return add(t, o);
    case FI_PROD: return mul(t, o);
    case FI_LOR: return truth(t) || truth(o) ? one : zero;
    case FI_LAND: return truth(t) && truth(o) ? one : zero;
    case FI_LXOR: return (truth(t) && !truth(o)) || (!truth(t) && truth(o)) ? one : zero;
    case FI_ATOMIC_READ: return t;
    case FI_ATOMIC_WRITE: return o;
    case FI_CSWAP: return c == t ? o : t;
    case FI_CSWAP_NE: return c != t ? o : t;
    default: break;
  }
  if constexpr (!is_cplx<T>) {
    switch (op) {
      case FI_MIN: return o < t ? o : t;
      case FI_MAX: return o > t ? o : t;
      case FI_CSWAP_LE: return c <= t ? o : t;
      case FI_CSWAP_LT: return c < t ? o : t;
      case FI_CSWAP_GE: return c >= t ? o : t;
      case FI_CSWAP_GT: return c > t ? o : t;
      default: break;
    }
  }
  if constexpr (int_of<T>::yes) {
    switch (op) {
      case FI_BOR: return static_cast<T>(t | o);
      case FI_BAND: return static_cast<T>(t & o);
      case FI_BXOR: return static_cast<T>(t ^ o);
      case FI_MSWAP: return static_cast<T>((o & c) | (t & ~c));
      default: break;
    }
  }
  ADD_FAILURE() << "no reference for op " << op;
  return t;
}

// Calls f.template operator()<T>() with the C++ type of datatype dt; false
// for a datatype C++ has no type for here (FI_FLOAT16 and later).
template <class F>
bool with_type(int dt, F&& f) {
  switch (dt) {
    case FI_INT8: f.template operator()<int8_t>(); return true;
    case FI_UINT8: f.template operator()<uint8_t>(); return true;
    case FI_INT16: f.template operator()<int16_t>(); return true;
    case FI_UINT16: f.template operator()<uint16_t>(); return true;
    case FI_INT32: f.template operator()<int32_t>(); return true;
    case FI_UINT32: f.template operator()<uint32_t>(); return true;
    case FI_INT64: f.template operator()<int64_t>(); return true;
    case FI_UINT64: f.template operator()<uint64_t>(); return true;
    case FI_FLOAT: f.template operator()<float>(); return true;
    case FI_DOUBLE: f.template operator()<double>(); return true;
    case FI_FLOAT_COMPLEX: f.template operator()<std::complex<float>>(); return true;
    case FI_DOUBLE_COMPLEX: f.template operator()<std::complex<double>>(); return true;
    case FI_LONG_DOUBLE: f.template operator()<long double>(); return true;
    case FI_LONG_DOUBLE_COMPLEX: f.template operator()<std::complex<long double>>(); return true;
    case FI_INT128: f.template operator()<i128>(); return true;
    case FI_UINT128: f.template operator()<u128>(); return true;
    default: return false;
  }
}

const char* const op_names[] = {"MIN",   "MAX",   "SUM",        "PROD",        "LOR",
                                "LAND",  "BOR",   "BAND",       "LXOR",        "BXOR",
                                "READ",  "WRITE", "CSWAP",      "CSWAP_NE",    "CSWAP_LE",
                                "CSWAP_LT", "CSWAP_GE", "CSWAP_GT", "MSWAP", "DIFF"};
const char* const dt_names[] = {"INT8",  "UINT8",  "INT16", "UINT16", "INT32",
                                "UINT32", "INT64", "UINT64", "FLOAT", "DOUBLE",
                                "FLOAT_COMPLEX", "DOUBLE_COMPLEX", "LONG_DOUBLE",
                                "LONG_DOUBLE_COMPLEX", "INT128", "UINT128", "FLOAT16",
                                "BFLOAT16", "FLOAT8_E4M3", "FLOAT8_E5M2"};
const size_t dt_sizes[] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 8, 16, sizeof(long double),
                           2 * sizeof(long double), 16, 16, 2, 2, 1, 1};
constexpr int last_op = FI_DIFF, last_dt = FI_FLOAT8_E5M2;

enum kind { kbase, kfetch, kcompare };
const char* const kind_names[] = {"fi_atomic", "fi_fetch_atomic", "fi_compare_atomic"};

// The combinations weft offers (atomic.hpp): the operations fi_atomic(3)
// lists for each family; no ordering on complex values, no bitwise operation
// on floating-point ones; no FI_DIFF, no FLOAT16/BFLOAT16/FLOAT8.
bool expected_supported(int op, int dt, kind k) {
  bool listed = k == kbase      ? op <= FI_BXOR || op == FI_ATOMIC_WRITE
                : k == kfetch ? op <= FI_ATOMIC_WRITE
                             : op >= FI_CSWAP && op <= FI_MSWAP;
  if (!listed || dt > FI_UINT128) return false;
  const bool cplx = dt == FI_FLOAT_COMPLEX || dt == FI_DOUBLE_COMPLEX ||
                    dt == FI_LONG_DOUBLE_COMPLEX;
  const bool integer = dt <= FI_UINT64 || dt == FI_INT128 || dt == FI_UINT128;
  const bool ordering = op == FI_MIN || op == FI_MAX || (op >= FI_CSWAP_LE && op <= FI_CSWAP_GT);
  const bool bitwise = op == FI_BOR || op == FI_BAND || op == FI_BXOR || op == FI_MSWAP;
  return !(ordering && cplx) && !(bitwise && !integer);
}

// Three sets of three (target, operand, compare) values, as (real,
// imaginary): each compare and min/max outcome occurs, and each pair of
// truth values (target, operand) for real and for complex types alike.
// Real types use the real parts; for complex ones the imaginary parts make
// a value true on their own here and there (set 0 element 2, set 1
// element 1, set 2 element 0).
struct triple {
  long long t, ti, o, oi, c, ci;
};
const triple value_sets[3][3] = {
    {{6, 0, 3, 1, 6, 0}, {2, 1, 7, 0, 5, 0}, {0, 3, 4, 0, 0, 3}},
    {{5, 0, 0, 0, 9, 0}, {0, 0, 0, 2, -2, 0}, {-4, 2, 2, 0, -4, 2}},
    {{0, 4, 0, 0, 0, 4}, {-7, 0, -9, 0, -8, 0}, {0, 0, 0, 0, 1, 0}},
};

// The call forms: fi_atomic..., fi_atomicv..., fi_atomicmsg...
enum form { plain, vector, message };
const char* const form_names[] = {"plain call", "vector call", "msg call"};

class atomic_ops : public provider_test {
 protected:
  uint64_t extra_caps() const override {
    return FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  }
  void SetUp() override {
    provider_test::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (info->ep_attr->type != FI_EP_RDM) GTEST_SKIP() << "reliable endpoints only";
    cq = open_cq(FI_CQ_FORMAT_DATA, FI_WAIT_NONE, 256);
    open_av();
    a = open_ep(cq, &fa);
    b = open_ep(cq, &fb);
    ASSERT_TRUE(a && b);
    virt = info->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
    iov_limit = info->tx_attr->iov_limit;
    rma_iov_limit = info->tx_attr->rma_iov_limit;
    if (info->domain_attr->mr_mode & FI_MR_LOCAL)
      for (auto* buf : {opd, cmp, res}) local_desc(buf, sizeof opd);
    tkey = reg(tgt, sizeof tgt, FI_REMOTE_READ | FI_REMOTE_WRITE, &tbase);
  }
  void TearDown() override {
    for (fid_mr* m : mrs) EXPECT_EQ(fi_close(&m->fid), 0);
    provider_test::TearDown();
  }
  uint64_t reg(void* buf, size_t len, uint64_t access, uint64_t* base) {
    fid_mr* m = nullptr;
    EXPECT_EQ(fi_mr_reg(domain, buf, len, access, 0, next_key++, 0, &m, nullptr), 0);
    if (!m) return 0;
    mrs.push_back(m);
    *base = virt ? reinterpret_cast<uint64_t>(buf) : 0;
    return fi_mr_key(m);
  }
  void local_desc(void* buf, size_t len) {
    fid_mr* m = nullptr;
    EXPECT_EQ(fi_mr_reg(domain, buf, len, FI_READ | FI_WRITE, 0, next_key++, 0, &m, nullptr), 0);
    if (m) mrs.push_back(m), descs.push_back({static_cast<char*>(buf), fi_mr_desc(m)});
  }
  void* desc(const void* p) const {
    auto* q = static_cast<const char*>(p);
    for (auto& [buf, d] : descs)
      if (q >= buf && q < buf + sizeof opd) return d;
    return nullptr;
  }
  // Drives both endpoints until the completion of `ctx`: 1, -FI_EAVAIL with
  // *err, or -FI_ETIMEDOUT.
  ssize_t wait_for(void* ctx, fi_cq_err_entry* err = nullptr) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      fi_cq_data_entry e;
      ssize_t n = fi_cq_read(cq, &e, 1);
      if (n == 1) {
        if (e.op_context == ctx) return last = e, 1;
        other.push_back(e);
      } else if (n == -FI_EAVAIL) {
        fi_cq_err_entry ee{};
        EXPECT_EQ(fi_cq_readerr(cq, &ee, 0), 1);
        if (err) *err = ee;
        if (ee.op_context == ctx) return -FI_EAVAIL;
        ADD_FAILURE() << "error " << ee.err << " for another operation";
      } else if (n != -FI_EAGAIN) {
        return n;
      }
    }
    return -FI_ETIMEDOUT;
  }
  // Drives progress a while; every completion seen is a failure.
  void expect_no_completion(int rounds = 2000) {
    for (int i = 0; i < rounds; ++i) {
      fi_cq_data_entry e;
      ssize_t n = fi_cq_read(cq, &e, 1);
      if (n == 1) ADD_FAILURE() << "unexpected completion, flags 0x" << std::hex << e.flags;
      if (n == -FI_EAVAIL) {
        fi_cq_err_entry ee{};
        fi_cq_readerr(cq, &ee, 0);
        ADD_FAILURE() << "unexpected error completion " << ee.err;
      }
    }
    EXPECT_TRUE(other.empty()) << other.size() << " stray completions";
    other.clear();
  }

  int valid(kind k, int dt, int op, size_t* count) {
    auto d = static_cast<fi_datatype>(dt);
    auto o = static_cast<fi_op>(op);
    return k == kbase    ? fi_atomicvalid(a, d, o, count)
           : k == kfetch ? fi_fetch_atomicvalid(a, d, o, count)
                        : fi_compare_atomicvalid(a, d, o, count);
  }
  // One atomic of n elements from a to b at raddr: the plain call; the
  // vector call with the local buffers cut in two; the msg call with the
  // remote range cut in two (where the endpoint allows).
  ssize_t post(kind k, int op, int dt, form f, const void* o, const void* c, void* r, size_t n,
               uint64_t raddr, uint64_t key, void* ctx) {
    auto d = static_cast<fi_datatype>(dt);
    auto p = static_cast<fi_op>(op);
    if (f == message) {
      const size_t sz = dt_sizes[dt], cut = rma_iov_limit >= 2 && n >= 2 ? 2 : 1;
      fi_ioc ov{const_cast<void*>(o), n}, cv{const_cast<void*>(c), n}, rv{r, n};
      void *od = desc(o), *cd = desc(c), *rd = desc(r);
      fi_rma_ioc rma[2] = {{raddr, cut == 2 ? 1 : n, key}, {raddr + sz, n - 1, key}};
      fi_msg_atomic m{&ov, &od, 1, fb, rma, cut, d, p, ctx, 0};
      return k == kbase    ? fi_atomicmsg(a, &m, FI_COMPLETION)
             : k == kfetch ? fi_fetch_atomicmsg(a, &m, &rv, &rd, 1, FI_COMPLETION)
                           : fi_compare_atomicmsg(a, &m, &cv, &cd, 1, &rv, &rd, 1, FI_COMPLETION);
    }
    if (f == plain) {
      return k == kbase ? fi_atomic(a, o, n, desc(o), fb, raddr, key, d, p, ctx)
             : k == kfetch
                 ? fi_fetch_atomic(a, o, n, desc(o), r, desc(r), fb, raddr, key, d, p, ctx)
                 : fi_compare_atomic(a, o, n, desc(o), c, desc(c), r, desc(r), fb, raddr, key, d,
                                     p, ctx);
    }
    const size_t sz = dt_sizes[dt], cut = iov_limit >= 2 && n >= 2 ? 2 : 1;
    auto* ob = static_cast<char*>(const_cast<void*>(o));
    auto* cb = static_cast<char*>(const_cast<void*>(c));
    auto* rb = static_cast<char*>(r);
    // Operand and compare cut after one element, results after n - 1.
    fi_ioc ov[2] = {{ob, cut == 2 ? 1 : n}, {ob + sz, n - 1}};
    fi_ioc cv[2] = {{cb, cut == 2 ? 1 : n}, {cb + sz, n - 1}};
    fi_ioc rv[2] = {{rb, cut == 2 ? n - 1 : n}, {rb + (n - 1) * sz, 1}};
    void* od[2] = {desc(o), desc(o)};
    void* cd[2] = {desc(c), desc(c)};
    void* rd[2] = {desc(r), desc(r)};
    return k == kbase ? fi_atomicv(a, ov, od, cut, fb, raddr, key, d, p, ctx)
           : k == kfetch
               ? fi_fetch_atomicv(a, ov, od, cut, rv, rd, cut, fb, raddr, key, d, p, ctx)
               : fi_compare_atomicv(a, ov, od, cut, cv, cd, cut, rv, rd, cut, fb, raddr, key, d,
                                    p, ctx);
  }

  // Runs op on three elements with value set `set`, at an offset of the
  // target arena (misaligned when odd), and checks target, guards, results.
  template <class T>
  void run(int op, int dt, kind k, int set, size_t offset, form f) {
    SCOPED_TRACE(testing::Message() << "values " << set << ", " << form_names[f]
                                    << ", target offset " << offset);
    constexpr size_t n = 3, sz = sizeof(T);
    ASSERT_EQ(sz, dt_sizes[dt]);
    T t[n], o[n], c[n], want[n];
    for (size_t i = 0; i < n; ++i) {
      const triple& v = value_sets[set][i];
      t[i] = make<T>(v.t, v.ti);
      o[i] = make<T>(v.o, v.oi);
      c[i] = make<T>(v.c, v.ci);
      want[i] = reference<T>(op, t[i], o[i], c[i]);
    }
    std::memset(tgt, 0xa5, sizeof tgt);
    std::memcpy(tgt + offset, t, sizeof t);
    unsigned char before[n * sz];
    std::memcpy(before, tgt + offset, sizeof before);
    std::memset(res, 0x5a, sizeof res);
    std::memcpy(opd, o, sizeof o);
    std::memcpy(cmp, c, sizeof c);
    // FI_ATOMIC_READ ignores the operand: the plain call passes none.
    const void* operand = op == FI_ATOMIC_READ && f == plain ? nullptr : opd;
    fi_context ctx;
    ssize_t r = post(k, op, dt, f, operand, cmp, res, n, tbase + offset, tkey, &ctx);
    ASSERT_EQ(r, 0) << fi_strerror(static_cast<int>(-r));
    fi_cq_err_entry err{};
    ASSERT_EQ(wait_for(&ctx, &err), 1) << "error completion " << err.err;
    EXPECT_EQ(last.flags, FI_ATOMIC | (k == kbase ? FI_WRITE : FI_READ));
    for (size_t i = 0; i < sizeof tgt; ++i)
      if (i < offset || i >= offset + n * sz) {
        ASSERT_EQ(tgt[i], 0xa5) << "wrote byte " << i;
      }
    for (size_t i = 0; i < n; ++i) {
      T got;
      std::memcpy(static_cast<void*>(&got), tgt + offset + i * sz, sz);
      if constexpr (by_value<T>) {
        EXPECT_TRUE(got == want[i]) << "target element " << i;
      } else {
        EXPECT_EQ(std::memcmp(&got, &want[i], sz), 0) << "target element " << i;
      }
    }
    if (k != kbase) {
      EXPECT_EQ(std::memcmp(res, before, sizeof before), 0) << "fetched values differ";
    }
    for (size_t i = n * sz; i < sizeof res; ++i) ASSERT_EQ(res[i], 0x5a) << "result byte " << i;
  }

  fid_cq* cq = nullptr;
  fid_ep *a = nullptr, *b = nullptr;
  fi_addr_t fa = FI_ADDR_UNSPEC, fb = FI_ADDR_UNSPEC;
  bool virt = false;
  size_t iov_limit = 1, rma_iov_limit = 1;
  uint64_t next_key = 1000;
  std::vector<fid_mr*> mrs;
  std::vector<std::pair<char*, void*>> descs;
  fi_cq_data_entry last{};
  std::vector<fi_cq_data_entry> other;
  alignas(64) unsigned char tgt[256];
  alignas(64) unsigned char opd[4096], cmp[4096], res[4096];
  uint64_t tkey = 0, tbase = 0;
};

TEST_P(atomic_ops, every_op_datatype_and_family) {
  int supported = 0;
  for (int op = 0; op <= last_op; ++op)
    for (int dt = 0; dt <= last_dt; ++dt)
      for (kind k : {kbase, kfetch, kcompare}) {
        SCOPED_TRACE(testing::Message() << kind_names[k] << " FI_" << op_names[op] << " on FI_"
                                        << dt_names[dt]);
        size_t count = 12345;
        fi_atomic_attr attr{54321, 54321};
        const int vr = valid(k, dt, op, &count);
        const uint64_t qflags = k == kfetch ? FI_FETCH_ATOMIC : k == kcompare ? FI_COMPARE_ATOMIC : 0;
        const int qr = fi_query_atomic(domain, static_cast<fi_datatype>(dt),
                                       static_cast<fi_op>(op), &attr, qflags);
        EXPECT_EQ(vr, qr) << "the valid call and fi_query_atomic disagree";
        EXPECT_EQ(vr == 0, expected_supported(op, dt, k));
        if (vr != 0) {
          EXPECT_EQ(vr, -FI_EOPNOTSUPP);
          // The data call refuses it too, and nothing completes.
          fi_context ctx;
          EXPECT_EQ(post(k, op, dt, plain, opd, cmp, res, 1, tbase, tkey, &ctx), -FI_EOPNOTSUPP);
          fi_ioc ov{opd, 1}, cv{cmp, 1}, rv{res, 1};
          fi_rma_ioc rma{tbase, 1, tkey};
          fi_msg_atomic m{&ov, nullptr, 1, fb, &rma, 1, static_cast<fi_datatype>(dt),
                          static_cast<fi_op>(op), &ctx, 0};
          EXPECT_EQ(k == kbase    ? fi_atomicmsg(a, &m, 0)
                    : k == kfetch ? fi_fetch_atomicmsg(a, &m, &rv, nullptr, 1, 0)
                                 : fi_compare_atomicmsg(a, &m, &cv, nullptr, 1, &rv, nullptr, 1, 0),
                    -FI_EOPNOTSUPP);
          if (k == kbase) {
            EXPECT_EQ(fi_inject_atomic(a, opd, 1, fb, tbase, tkey, static_cast<fi_datatype>(dt),
                                       static_cast<fi_op>(op)),
                      -FI_EOPNOTSUPP);
          }
          continue;
        }
        ++supported;
        EXPECT_EQ(attr.count, count);
        EXPECT_EQ(attr.size, dt_sizes[dt]);
        ASSERT_GE(count, 3u) << "too few elements per atomic for this test";
        bool typed = with_type(dt, [&]<class T>() {
          run<T>(op, dt, k, 0, 32, plain);
          run<T>(op, dt, k, 1, 33, vector);  // misaligned, unless 1-byte elements
          run<T>(op, dt, k, 2, 64, message);
        });
        EXPECT_TRUE(typed) << "supported, but the test has no reference for it";
        if (HasFatalFailure()) return;
      }
  expect_no_completion(100);
  EXPECT_GT(supported, 0);
}

TEST_P(atomic_ops, inject_updates_the_target_without_a_completion) {
  uint32_t* t = reinterpret_cast<uint32_t*>(tgt);
  for (uint32_t i = 0; i < 4; ++i) t[i] = 100 * i;
  uint32_t add[3] = {1, 2, 3};
  ASSERT_EQ(fi_inject_atomic(a, add, 3, fb, tbase + 4, tkey, FI_UINT32, FI_SUM), 0);
  // The operand buffer is ours again at once.
  add[0] = add[1] = add[2] = 1000;
  double d = -2.5;
  ASSERT_EQ(fi_inject_atomic(a, &d, 1, fb, tbase + 32, tkey, FI_DOUBLE, FI_ATOMIC_WRITE), 0);
  d = 7;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  double got = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    fi_cq_data_entry e;
    if (fi_cq_read(cq, &e, 1) == 1) other.push_back(e);
    std::memcpy(&got, tgt + 32, 8);
    if (got == -2.5 && t[3] == 303) break;
  }
  EXPECT_EQ(t[0], 0u);
  EXPECT_EQ(t[1], 101u);
  EXPECT_EQ(t[2], 202u);
  EXPECT_EQ(t[3], 303u);
  EXPECT_EQ(got, -2.5);
  expect_no_completion();
  // Too many elements for an inject, or a family inject does not have.
  std::vector<uint8_t> many(8192, 1);
  size_t max = 0;
  ASSERT_EQ(fi_atomicvalid(a, FI_UINT8, FI_SUM, &max), 0);
  if (max < many.size()) {
    EXPECT_EQ(fi_inject_atomic(a, many.data(), max + 1, fb, tbase, tkey, FI_UINT8, FI_SUM),
              -FI_EMSGSIZE);
  }
  EXPECT_EQ(fi_inject_atomic(a, add, 1, fb, tbase, tkey, FI_UINT32, FI_CSWAP), -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_inject_atomic(a, add, 1, fb, tbase, tkey, FI_UINT32, FI_ATOMIC_READ),
            -FI_EOPNOTSUPP);
  expect_no_completion(100);
}

TEST_P(atomic_ops, atomic_read_needs_no_operand) {
  int64_t* t = reinterpret_cast<int64_t*>(tgt);
  for (int i = 0; i < 4; ++i) t[i] = -7 * (i + 1);
  // A region we may only read is enough.
  uint64_t rbase;
  uint64_t rkey = reg(tgt, 64, FI_REMOTE_READ, &rbase);
  int64_t got[3] = {};
  fi_context ctx;
  ASSERT_EQ(fi_fetch_atomic(a, nullptr, 3, nullptr, got, desc(got), fb, rbase + 8, rkey, FI_INT64,
                            FI_ATOMIC_READ, &ctx),
            0);
  ASSERT_EQ(wait_for(&ctx), 1);
  EXPECT_EQ(last.flags, FI_ATOMIC | FI_READ);
  EXPECT_EQ(got[0], -14);
  EXPECT_EQ(got[1], -21);
  EXPECT_EQ(got[2], -28);
  EXPECT_EQ(t[1], -14);
  // The msg form, with an operand vector that names no memory.
  fi_ioc none{nullptr, 2};
  fi_rma_ioc rma{rbase, 2, rkey};
  int64_t got2[2] = {};
  fi_ioc rv{got2, 2};
  fi_msg_atomic m{&none, nullptr, 1, fb, &rma, 1, FI_INT64, FI_ATOMIC_READ, &ctx, 0};
  ASSERT_EQ(fi_fetch_atomicmsg(a, &m, &rv, nullptr, 1, 0), 0);
  ASSERT_EQ(wait_for(&ctx), 1);
  EXPECT_EQ(got2[0], -7);
  EXPECT_EQ(got2[1], -14);
}

TEST_P(atomic_ops, remote_cq_data_reaches_the_target) {
  if (info->domain_attr->cq_data_size < 4) {
    fi_info* want = fi_allocinfo();
    want->domain_attr->cq_data_size = 4;
    std::string why = lack_reason(GetParam(), FI_MSG, want);
    fi_freeinfo(want);
    if (!why.empty()) GTEST_SKIP() << GetParam().prov << ": " << why;
    FAIL() << GetParam().name() << " offers " << info->domain_attr->cq_data_size
           << " bytes of remote CQ data; its table in provider_caps.hpp says at least 4";
  }
  const uint64_t data = info->domain_attr->cq_data_size >= 8 ? 0xfeedfacecafe0001ull : 0xcafe0001;
  uint64_t* t = reinterpret_cast<uint64_t*>(tgt);
  t[0] = 40;
  t[1] = 2;
  uint64_t add[2] = {2, 40};
  fi_ioc ov{add, 2};
  fi_rma_ioc rma{tbase, 2, tkey};
  fi_context ctx;
  fi_msg_atomic m{&ov, nullptr, 1, fb, &rma, 1, FI_UINT64, FI_SUM, &ctx, data};
  ASSERT_EQ(fi_atomicmsg(a, &m, FI_REMOTE_CQ_DATA | FI_COMPLETION), 0);
  ASSERT_EQ(wait_for(&ctx), 1);
  EXPECT_EQ(last.flags, FI_ATOMIC | FI_WRITE);
  auto target_event = [&](fi_cq_data_entry* e) {
    for (size_t i = 0; i < other.size(); ++i)
      if (other[i].flags & FI_REMOTE_CQ_DATA) {
        *e = other[i];
        other.erase(other.begin() + static_cast<long>(i));
        return true;
      }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline)
      if (fi_cq_read(cq, e, 1) == 1) return true;
    return false;
  };
  fi_cq_data_entry e{};
  ASSERT_TRUE(target_event(&e)) << "no completion at the target";
  EXPECT_EQ(e.flags, FI_ATOMIC | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
  EXPECT_EQ(e.data, data);
  EXPECT_EQ(e.op_context, nullptr);
  EXPECT_EQ(t[0], 42u);
  EXPECT_EQ(t[1], 42u);
  // Fetching and compare atomics carry it too. fi_endpoint(3) counts them
  // as remote reads (FI_REMOTE_WRITE: "an RMA write or base atomic"), the
  // initiator completes them as FI_READ: the target reports FI_REMOTE_READ.
  uint64_t prior[2] = {};
  fi_ioc rv{prior, 2};
  m.data = 7;
  ASSERT_EQ(fi_fetch_atomicmsg(a, &m, &rv, nullptr, 1, FI_REMOTE_CQ_DATA), 0);
  ASSERT_EQ(wait_for(&ctx), 1);
  EXPECT_EQ(last.flags, FI_ATOMIC | FI_READ);
  EXPECT_EQ(prior[0], 42u);
  ASSERT_TRUE(target_event(&e));
  EXPECT_EQ(e.flags, FI_ATOMIC | FI_REMOTE_READ | FI_REMOTE_CQ_DATA);
  EXPECT_EQ(e.data, 7u);
  EXPECT_EQ(t[1], 82u);
  m.op = FI_ATOMIC_READ;
  m.data = 8;
  ASSERT_EQ(fi_fetch_atomicmsg(a, &m, &rv, nullptr, 1, FI_REMOTE_CQ_DATA), 0);
  ASSERT_EQ(wait_for(&ctx), 1);
  EXPECT_EQ(prior[1], 82u);
  ASSERT_TRUE(target_event(&e));
  EXPECT_EQ(e.flags, FI_ATOMIC | FI_REMOTE_READ | FI_REMOTE_CQ_DATA);
  EXPECT_EQ(e.data, 8u);
  uint64_t cmpv[2] = {44, 0};
  fi_ioc cv{cmpv, 2};
  m.op = FI_CSWAP;
  m.data = 9;
  ASSERT_EQ(fi_compare_atomicmsg(a, &m, &cv, nullptr, 1, &rv, nullptr, 1, FI_REMOTE_CQ_DATA), 0);
  ASSERT_EQ(wait_for(&ctx), 1);
  EXPECT_EQ(t[0], 2u);  // swapped
  EXPECT_EQ(t[1], 82u);
  ASSERT_TRUE(target_event(&e));
  EXPECT_EQ(e.flags, FI_ATOMIC | FI_REMOTE_READ | FI_REMOTE_CQ_DATA);
  EXPECT_EQ(e.data, 9u);
  expect_no_completion(100);
}

// fi_endpoint(3): FI_WRITE / FI_REMOTE_WRITE count RMA writes and base
// atomics; FI_READ / FI_REMOTE_READ RMA reads, fetch and compare atomics
// (whatever they do to the target).
TEST_P(atomic_ops, counters_count_by_family) {
  // Counters bind before enable: a fresh pair of endpoints, closed before
  // their counters.
  struct objects {
    fid_cntr* c[4] = {};  // write, read, remote write, remote read
    fid_ep *x = nullptr, *y = nullptr;
    ~objects() {
      for (fid_ep* e : {x, y})
        if (e) { EXPECT_EQ(fi_close(&e->fid), 0); }
      for (fid_cntr* k : c)
        if (k) { EXPECT_EQ(fi_close(&k->fid), 0); }
    }
  } o;
  fi_cntr_attr ca{};
  ca.events = FI_CNTR_EVENTS_COMP;
  for (auto*& k : o.c) ASSERT_EQ(fi_cntr_open(domain, &ca, &k, nullptr), 0);
  fid_cntr** c = o.c;
  ASSERT_EQ(fi_endpoint(domain, info, &o.x, nullptr), 0);
  ASSERT_EQ(fi_endpoint(domain, info, &o.y, nullptr), 0);
  fid_ep *x = o.x, *y = o.y;
  for (fid_ep* e : {x, y}) {
    ASSERT_EQ(fi_ep_bind(e, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_ep_bind(e, &av->fid, 0), 0);
  }
  ASSERT_EQ(fi_ep_bind(x, &c[0]->fid, FI_WRITE), 0);
  ASSERT_EQ(fi_ep_bind(x, &c[1]->fid, FI_READ), 0);
  ASSERT_EQ(fi_ep_bind(y, &c[2]->fid, FI_REMOTE_WRITE), 0);
  ASSERT_EQ(fi_ep_bind(y, &c[3]->fid, FI_REMOTE_READ), 0);
  ASSERT_EQ(fi_enable(x), 0);
  ASSERT_EQ(fi_enable(y), 0);
  char name[128];
  size_t len = sizeof name;
  ASSERT_EQ(fi_getname(&y->fid, name, &len), 0);
  fi_addr_t fy;
  ASSERT_EQ(fi_av_insert(av, name, 1, &fy, 0, nullptr), 1);
  uint64_t* t = reinterpret_cast<uint64_t*>(tgt);
  t[0] = 1;
  uint64_t two = 2, cv = 3, r = 0;
  fi_context ctx;
  auto counts = [&](uint64_t w, uint64_t rd, uint64_t rw, uint64_t rr) {
    // The target's counters move when it handles the request, before the
    // answer that completes ours; settle anyway.
    for (int i = 0; i < 200; ++i) fi_cq_read(cq, nullptr, 0);
    EXPECT_EQ(fi_cntr_read(c[0]), w);
    EXPECT_EQ(fi_cntr_read(c[1]), rd);
    EXPECT_EQ(fi_cntr_read(c[2]), rw);
    EXPECT_EQ(fi_cntr_read(c[3]), rr);
  };
  auto drive = [&] {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    fi_cq_data_entry e;
    while (fi_cq_read(cq, &e, 1) != 1 && std::chrono::steady_clock::now() < deadline) {
    }
  };
  ASSERT_EQ(fi_atomic(x, &two, 1, nullptr, fy, tbase, tkey, FI_UINT64, FI_SUM, &ctx), 0);
  drive();
  counts(1, 0, 1, 0);
  ASSERT_EQ(fi_fetch_atomic(x, &two, 1, nullptr, &r, nullptr, fy, tbase, tkey, FI_UINT64, FI_SUM,
                            &ctx),
            0);
  drive();
  EXPECT_EQ(r, 3u);
  counts(1, 1, 1, 1);
  ASSERT_EQ(fi_compare_atomic(x, &two, 1, nullptr, &cv, nullptr, &r, nullptr, fy, tbase, tkey,
                              FI_UINT64, FI_CSWAP_NE, &ctx),
            0);
  drive();
  counts(1, 2, 1, 2);
  ASSERT_EQ(fi_fetch_atomic(x, nullptr, 1, nullptr, &r, nullptr, fy, tbase, tkey, FI_UINT64,
                            FI_ATOMIC_READ, &ctx),
            0);
  drive();
  counts(1, 3, 1, 3);
  EXPECT_EQ(t[0], 2u);
  ASSERT_EQ(fi_inject_atomic(x, &two, 1, fy, tbase, tkey, FI_UINT64, FI_SUM), 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (fi_cntr_read(c[2]) < 2 && std::chrono::steady_clock::now() < deadline)
    fi_cq_read(cq, nullptr, 0);
  counts(2, 3, 2, 3);
  EXPECT_EQ(t[0], 4u);
}

// fi_atomic(3) FI_INJECT: the constant buffers (operands, compare values)
// are ours again when the call returns; results are written later. So it
// applies to fetch and compare atomics as well.
TEST_P(atomic_ops, inject_flag_returns_the_operands_at_once) {
  uint64_t* t = reinterpret_cast<uint64_t*>(tgt);
  t[0] = 10;
  t[1] = 20;
  uint64_t o[2] = {1, 2}, cv[2] = {11, 0}, r[2] = {};
  fi_ioc ov{o, 2}, cio{cv, 2}, rv{r, 2};
  fi_rma_ioc rma{tbase, 2, tkey};
  fi_context ctx;
  fi_msg_atomic m{&ov, nullptr, 1, fb, &rma, 1, FI_UINT64, FI_SUM, &ctx, 0};
  ASSERT_EQ(fi_atomicmsg(a, &m, FI_INJECT | FI_COMPLETION), 0);
  o[0] = o[1] = 100;
  ASSERT_EQ(wait_for(&ctx), 1);
  EXPECT_EQ(t[0], 11u);
  EXPECT_EQ(t[1], 22u);
  o[0] = 5, o[1] = 6;
  ASSERT_EQ(fi_fetch_atomicmsg(a, &m, &rv, nullptr, 1, FI_INJECT), 0);
  o[0] = o[1] = 100;
  ASSERT_EQ(wait_for(&ctx), 1);
  EXPECT_EQ(r[0], 11u);
  EXPECT_EQ(r[1], 22u);
  EXPECT_EQ(t[0], 16u);
  EXPECT_EQ(t[1], 28u);
  o[0] = 7, o[1] = 8;
  cv[0] = 16, cv[1] = 0;
  m.op = FI_CSWAP;
  ASSERT_EQ(fi_compare_atomicmsg(a, &m, &cio, nullptr, 1, &rv, nullptr, 1, FI_INJECT), 0);
  o[0] = o[1] = cv[0] = cv[1] = 28;
  ASSERT_EQ(wait_for(&ctx), 1);
  EXPECT_EQ(r[0], 16u);
  EXPECT_EQ(r[1], 28u);
  EXPECT_EQ(t[0], 7u);
  EXPECT_EQ(t[1], 28u);
  expect_no_completion(100);
}

// fi_atomic(3): between 1 and the valid count elements per call; more is
// -FI_EMSGSIZE. The valid count itself works, results included.
TEST_P(atomic_ops, element_count_limits) {
  size_t max = 0;
  ASSERT_EQ(fi_fetch_atomicvalid(a, FI_UINT64, FI_SUM, &max), 0);
  size_t cmax = 0;
  ASSERT_EQ(fi_compare_atomicvalid(a, FI_UINT64, FI_CSWAP, &cmax), 0);
  ASSERT_EQ(cmax, max) << "weft moves the same bytes per atomic in every family";
  std::vector<uint64_t> target(max + 1), ops(max + 1), prior(max + 1, 9), cmpv(max + 1);
  for (size_t i = 0; i <= max; ++i) target[i] = i, ops[i] = 1000 + i;
  uint64_t base;
  uint64_t key = reg(target.data(), target.size() * 8, FI_REMOTE_READ | FI_REMOTE_WRITE, &base);
  fi_context ctx;
  ASSERT_EQ(fi_fetch_atomic(a, ops.data(), max, nullptr, prior.data(), nullptr, fb, base, key,
                            FI_UINT64, FI_SUM, &ctx),
            0);
  ASSERT_EQ(wait_for(&ctx), 1);
  for (size_t i = 0; i < max; ++i) {
    ASSERT_EQ(prior[i], i) << i;
    ASSERT_EQ(target[i], 1000 + 2 * i) << i;
  }
  EXPECT_EQ(prior[max], 9u);
  EXPECT_EQ(target[max], max);
  // Odd elements hold their compare value and take the operand.
  for (size_t i = 0; i <= max; ++i) cmpv[i] = i % 2 ? 1000 + 2 * i : 0;
  ASSERT_EQ(fi_compare_atomic(a, ops.data(), max, nullptr, cmpv.data(), nullptr, prior.data(),
                              nullptr, fb, base, key, FI_UINT64, FI_CSWAP, &ctx),
            0);
  ASSERT_EQ(wait_for(&ctx), 1);
  for (size_t i = 0; i < max; ++i) {
    ASSERT_EQ(prior[i], 1000 + 2 * i) << i;
    ASSERT_EQ(target[i], i % 2 ? 1000 + i : 1000 + 2 * i) << i;
  }
  // One element more: refused at the call, in every form and family.
  std::vector<uint64_t> saved(target);
  EXPECT_EQ(fi_atomic(a, ops.data(), max + 1, nullptr, fb, base, key, FI_UINT64, FI_SUM, &ctx),
            -FI_EMSGSIZE);
  EXPECT_EQ(fi_fetch_atomic(a, ops.data(), max + 1, nullptr, prior.data(), nullptr, fb, base, key,
                            FI_UINT64, FI_SUM, &ctx),
            -FI_EMSGSIZE);
  EXPECT_EQ(fi_compare_atomic(a, ops.data(), max + 1, nullptr, cmpv.data(), nullptr,
                              prior.data(), nullptr, fb, base, key, FI_UINT64, FI_CSWAP, &ctx),
            -FI_EMSGSIZE);
  if (iov_limit >= 2) {
    fi_ioc ov[2] = {{ops.data(), max}, {ops.data() + max, 1}};
    EXPECT_EQ(fi_atomicv(a, ov, nullptr, 2, fb, base, key, FI_UINT64, FI_SUM, &ctx), -FI_EMSGSIZE);
  }
  fi_ioc ov{ops.data(), max + 1};
  fi_rma_ioc rma{base, max + 1, key};
  fi_msg_atomic m{&ov, nullptr, 1, fb, &rma, 1, FI_UINT64, FI_SUM, &ctx, 0};
  EXPECT_EQ(fi_atomicmsg(a, &m, 0), -FI_EMSGSIZE);
  // Zero elements is no atomic either.
  EXPECT_LT(fi_atomic(a, ops.data(), 0, nullptr, fb, base, key, FI_UINT64, FI_SUM, &ctx), 0);
  // Operand and remote element counts that differ.
  fi_rma_ioc short_rma{base, 2, key};
  fi_ioc three{ops.data(), 3};
  fi_msg_atomic m2{&three, nullptr, 1, fb, &short_rma, 1, FI_UINT64, FI_SUM, &ctx, 0};
  EXPECT_EQ(fi_atomicmsg(a, &m2, 0), -FI_EINVAL);
  expect_no_completion();
  EXPECT_EQ(target, saved);
}

TEST_P(atomic_ops, bad_key_or_range_fails_and_leaves_the_target) {
  uint32_t* t = reinterpret_cast<uint32_t*>(tgt);
  for (int i = 0; i < 64; ++i) t[i] = 0x11111111u * (i % 8);
  uint32_t saved[64];
  std::memcpy(saved, t, sizeof saved);
  // A region of 4 elements inside the arena.
  uint64_t base;
  uint64_t key = reg(tgt + 64, 16, FI_REMOTE_READ | FI_REMOTE_WRITE, &base);
  uint32_t o[4] = {1, 1, 1, 1}, c[4] = {0, 0, 0, 0}, r[4] = {};
  fi_context ctx;
  fi_cq_err_entry err{};
  for (kind k : {kbase, kfetch, kcompare}) {
    const int op = k == kcompare ? FI_CSWAP : FI_SUM;
    SCOPED_TRACE(kind_names[k]);
    // Unknown key.
    ASSERT_EQ(post(k, op, FI_UINT32, plain, o, c, r, 2, base, key + 4242, &ctx), 0);
    ASSERT_EQ(wait_for(&ctx, &err), -FI_EAVAIL);
    EXPECT_EQ(err.err, FI_EACCES);
    EXPECT_EQ(err.op_context, &ctx);
    // The last element one past the end: none of them is touched.
    ASSERT_EQ(post(k, op, FI_UINT32, plain, o, c, r, 3, base + 8, key, &ctx), 0);
    ASSERT_EQ(wait_for(&ctx, &err), -FI_EAVAIL);
    EXPECT_EQ(err.err, FI_EACCES);
    // Entirely before the region (an offset below 0 is no address at all).
    if (virt) {
      ASSERT_EQ(post(k, op, FI_UINT32, plain, o, c, r, 1, base - 4, key, &ctx), 0);
      ASSERT_EQ(wait_for(&ctx, &err), -FI_EAVAIL);
      EXPECT_EQ(err.err, FI_EACCES);
    }
  }
  ASSERT_EQ(std::memcmp(t, saved, sizeof saved), 0) << "target touched";
  // The endpoint still works, on exactly the region's four elements.
  ASSERT_EQ(post(kfetch, FI_SUM, FI_UINT32, plain, o, c, r, 4, base, key, &ctx), 0);
  ASSERT_EQ(wait_for(&ctx), 1);
  EXPECT_EQ(r[3], 0x33333333u);
  EXPECT_EQ(t[16], 1u);
  EXPECT_EQ(t[19], 0x33333334u);
}

// A fetching atomic reads the target: it needs FI_REMOTE_READ; an atomic
// that changes it needs FI_REMOTE_WRITE.
TEST_P(atomic_ops, access_rights_are_enforced) {
  uint64_t* t = reinterpret_cast<uint64_t*>(tgt);
  for (int i = 0; i < 32; ++i) t[i] = 5;
  uint64_t wbase, rbase;
  uint64_t wkey = reg(tgt, 64, FI_REMOTE_WRITE, &wbase);
  uint64_t rkey = reg(tgt + 64, 64, FI_REMOTE_READ, &rbase);
  uint64_t o[2] = {1, 1}, c[2] = {5, 5}, r[2] = {};
  fi_context ctx;
  fi_cq_err_entry err{};
  struct attempt {
    kind k;
    int op;
    bool on_write_only;  // else on the read-only region
    bool allowed;
  } attempts[] = {
      {kbase, FI_SUM, true, true},          {kfetch, FI_SUM, true, false},
      {kcompare, FI_CSWAP, true, false},    {kfetch, FI_ATOMIC_READ, true, false},
      {kfetch, FI_ATOMIC_WRITE, true, false}, {kbase, FI_SUM, false, false},
      {kbase, FI_ATOMIC_WRITE, false, false}, {kfetch, FI_SUM, false, false},
      {kcompare, FI_CSWAP, false, false},   {kfetch, FI_ATOMIC_READ, false, true},
  };
  for (const attempt& x : attempts) {
    SCOPED_TRACE(testing::Message() << kind_names[x.k] << " FI_" << op_names[x.op] << " on the "
                                    << (x.on_write_only ? "write" : "read") << "-only region");
    uint64_t before[16];
    std::memcpy(before, t, sizeof before);
    ASSERT_EQ(post(x.k, x.op, FI_UINT64, plain, x.op == FI_ATOMIC_READ ? nullptr : o, c, r, 2,
                   x.on_write_only ? wbase + 8 : rbase + 8, x.on_write_only ? wkey : rkey, &ctx),
              0);
    if (x.allowed) {
      ASSERT_EQ(wait_for(&ctx, &err), 1) << "error " << err.err;
    } else {
      ASSERT_EQ(wait_for(&ctx, &err), -FI_EAVAIL);
      EXPECT_EQ(err.err, FI_EACCES);
      EXPECT_EQ(std::memcmp(before, t, sizeof before), 0) << "target touched";
    }
  }
  EXPECT_EQ(t[1], 6u);  // the one allowed update
  EXPECT_EQ(t[9], 5u);
  EXPECT_EQ(r[0], 5u);  // the allowed read
}

TEST_P(atomic_ops, query_flags_and_arguments) {
  fi_atomic_attr attr{};
  EXPECT_EQ(fi_query_atomic(domain, FI_UINT64, FI_CSWAP, &attr,
                            FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC),
            -FI_EBADFLAGS);
  EXPECT_LT(fi_query_atomic(domain, FI_UINT64, FI_SUM, nullptr, 0), 0);
  EXPECT_LT(fi_atomicvalid(a, FI_UINT64, FI_SUM, nullptr), 0);
  size_t count = 77;
  EXPECT_EQ(fi_atomicvalid(a, static_cast<fi_datatype>(1000), FI_SUM, &count), -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_atomicvalid(a, FI_UINT64, static_cast<fi_op>(1000), &count), -FI_EOPNOTSUPP);
  EXPECT_EQ(count, 77u);
}

INSTANTIATE_TEST_SUITE_P(all, atomic_ops, testing::ValuesIn(all_configs), config_name);

}  // namespace
}  // namespace conformance
