// SPDX-License-Identifier: MIT
// weft — conformance for RMA and atomics (fi_rma(3), fi_atomic(3)) between
// two endpoints: data checked byte for byte, every call form, remote CQ
// data, counters, and a target that refuses a bad key or range with an
// error completion at the initiator while its memory stays untouched.
// Providers without FI_RMA / FI_ATOMIC skip.
#include "fixture.hpp"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include <cstring>
#include <vector>

namespace conformance {
namespace {

inline char pattern(size_t i, unsigned seed) {
  return static_cast<char>((i * 131 + seed * 7 + (i >> 12)) & 0xff);
}

class rma : public provider_test {
 protected:
  uint64_t extra_caps() const override {
    return FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  }
  void adjust_hints(fi_info* h) const override { h->domain_attr->cq_data_size = 8; }
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
    prov_key = info->domain_attr->mr_mode & FI_MR_PROV_KEY;
  }
  void TearDown() override {
    for (fid_mr* m : mrs) EXPECT_EQ(fi_close(&m->fid), 0);
    provider_test::TearDown();
  }
  // Registers `len` bytes at `buf` with `access`; returns the key and the
  // RMA address of its first byte.
  uint64_t reg(void* buf, size_t len, uint64_t access, uint64_t* base, uint64_t want_key) {
    fid_mr* m = nullptr;
    EXPECT_EQ(fi_mr_reg(domain, buf, len, access, 0, want_key, 0, &m, nullptr), 0);
    if (!m) return 0;
    mrs.push_back(m);
    *base = virt ? reinterpret_cast<uint64_t>(buf) : 0;
    return fi_mr_key(m);
  }
  // Drives both endpoints until the completion of `ctx`; its entry or error.
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

  fid_cq* cq = nullptr;
  fid_ep *a = nullptr, *b = nullptr;
  fi_addr_t fa = FI_ADDR_UNSPEC, fb = FI_ADDR_UNSPEC;
  bool virt = false, prov_key = false;
  std::vector<fid_mr*> mrs;
  fi_cq_data_entry last{};
  std::vector<fi_cq_data_entry> other;
};

TEST_P(rma, write_then_read_back_every_size) {
  for (size_t len : {size_t{0}, size_t{1}, size_t{8}, size_t{4096}, size_t{4097},
                     size_t{65536 + 3}, size_t{1} << 21}) {
    SCOPED_TRACE(len);
    std::vector<char> target(len + 64, 0), src(len), back(len, 0);
    for (size_t i = 0; i < len; ++i) src[i] = pattern(i, static_cast<unsigned>(len));
    uint64_t base;
    uint64_t key = reg(target.data(), target.size(), FI_REMOTE_WRITE | FI_REMOTE_READ, &base,
                       len + 100);
    fi_context ctx;
    ssize_t r;
    do r = fi_write(a, src.data(), len, nullptr, fb, base + 32, key, &ctx);
    while (r == -FI_EAGAIN && (fi_cq_read(cq, nullptr, 0), true));
    ASSERT_EQ(r, 0);
    ASSERT_EQ(wait_for(&ctx), 1);
    EXPECT_EQ(last.flags, FI_RMA | FI_WRITE);
    if (len) { EXPECT_EQ(std::memcmp(target.data() + 32, src.data(), len), 0); }
    for (size_t i = 0; i < 32; ++i) ASSERT_EQ(target[i], 0);
    for (size_t i = 32 + len; i < target.size(); ++i) ASSERT_EQ(target[i], 0);
    do r = fi_read(a, back.data(), len, nullptr, fb, base + 32, key, &ctx);
    while (r == -FI_EAGAIN && (fi_cq_read(cq, nullptr, 0), true));
    ASSERT_EQ(r, 0);
    ASSERT_EQ(wait_for(&ctx), 1);
    EXPECT_EQ(last.flags, FI_RMA | FI_READ);
    if (len) { EXPECT_EQ(std::memcmp(back.data(), src.data(), len), 0); }
  }
}

// fi_rma(3) FI_MORE: more requests follow. Writes with it, then a read
// without it, all complete in order with the right data; and a last write
// with FI_MORE and nothing after it still completes (within a second) while
// the initiator only reads its CQ.
TEST_P(rma, writes_with_fi_more_complete_with_or_without_a_request_after_them) {
  uint64_t target[4] = {}, back = 0, src[4] = {1, 2, 3, 4};
  uint64_t base;
  uint64_t key = reg(target, sizeof target, FI_REMOTE_WRITE | FI_REMOTE_READ, &base, 41);
  fi_context ctx[5];
  for (int i = 0; i < 3; ++i) {
    iovec iov{&src[i], sizeof src[i]};
    fi_rma_iov rma{base + 8 * i, 8, key};
    fi_msg_rma m{&iov, nullptr, 1, fb, &rma, 1, &ctx[i], 0};
    ASSERT_EQ(fi_writemsg(a, &m, FI_MORE | FI_COMPLETION), 0) << i;
  }
  ASSERT_EQ(fi_read(a, &back, sizeof back, nullptr, fb, base + 8, key, &ctx[3]), 0);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(wait_for(&ctx[i]), 1) << i;
  EXPECT_EQ(back, 2u);
  EXPECT_EQ(target[0], 1u);
  EXPECT_EQ(target[2], 3u);
  iovec iov{&src[3], 8};
  fi_rma_iov rma{base + 24, 8, key};
  fi_msg_rma m{&iov, nullptr, 1, fb, &rma, 1, &ctx[4], 0};
  ASSERT_EQ(fi_writemsg(a, &m, FI_MORE | FI_COMPLETION), 0);
  auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(wait_for(&ctx[4]), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(target[3], 4u);
}

TEST_P(rma, vectors_on_both_sides) {
  std::vector<char> t1(3000, 0), t2(9000, 0), s1(5000), s2(7000), r1(7000), r2(5000);
  for (size_t i = 0; i < s1.size(); ++i) s1[i] = pattern(i, 1);
  for (size_t i = 0; i < s2.size(); ++i) s2[i] = pattern(i, 2);
  uint64_t b1, b2;
  uint64_t k1 = reg(t1.data(), t1.size(), FI_REMOTE_WRITE | FI_REMOTE_READ, &b1, 11);
  uint64_t k2 = reg(t2.data(), t2.size(), FI_REMOTE_WRITE | FI_REMOTE_READ, &b2, 12);
  iovec iov[2] = {{s1.data(), s1.size()}, {s2.data(), s2.size()}};
  fi_rma_iov rv[2] = {{b1, 3000, k1}, {b2, 9000, k2}};
  fi_context ctx;
  fi_msg_rma m{iov, nullptr, 2, fb, rv, 2, &ctx, 0};
  ASSERT_EQ(fi_writemsg(a, &m, FI_COMPLETION), 0);
  ASSERT_EQ(wait_for(&ctx), 1);
  std::vector<char> all(s1);
  all.insert(all.end(), s2.begin(), s2.end());
  EXPECT_EQ(std::memcmp(t1.data(), all.data(), 3000), 0);
  EXPECT_EQ(std::memcmp(t2.data(), all.data() + 3000, 9000), 0);
  iovec riov[2] = {{r1.data(), r1.size()}, {r2.data(), r2.size()}};
  fi_msg_rma rm{riov, nullptr, 2, fb, rv, 2, &ctx, 0};
  ASSERT_EQ(fi_readmsg(a, &rm, FI_COMPLETION), 0);
  ASSERT_EQ(wait_for(&ctx), 1);
  EXPECT_EQ(std::memcmp(r1.data(), all.data(), 7000), 0);
  EXPECT_EQ(std::memcmp(r2.data(), all.data() + 7000, 5000), 0);
}

// fi_cq(3): the target's completion of a remote write with data carries the
// data and, as libfabric reports it, the write's length; small writes and
// ones past every eager path alike.
TEST_P(rma, writedata_reaches_the_target_cq_without_a_receive) {
  uint64_t want = 0xabcdef;
  for (size_t len : {size_t{7}, size_t{100000}}) {
    SCOPED_TRACE(testing::Message() << len << " bytes");
    std::vector<char> target(len, 0), msg(len);
    for (size_t i = 0; i < len; ++i) msg[i] = static_cast<char>('a' + i % 23);
    uint64_t base;
    uint64_t key = reg(target.data(), target.size(), FI_REMOTE_WRITE, &base, 7 + len);
    fi_context ctx;
    ASSERT_EQ(fi_writedata(a, msg.data(), len, nullptr, ++want, fb, base, key, &ctx), 0);
    ASSERT_EQ(wait_for(&ctx), 1);
    // The target's completion (no receive was posted).
    fi_cq_data_entry e;
    bool seen = false;
    for (auto it = other.begin(); it != other.end(); ++it)
      if (it->flags & FI_REMOTE_CQ_DATA) {
        e = *it, seen = true;
        other.erase(it);
        break;
      }
    for (int i = 0; i < 100000 && !seen; ++i)
      if (fi_cq_read(cq, &e, 1) == 1) seen = true;
    ASSERT_TRUE(seen);
    EXPECT_EQ(e.data, want);
    EXPECT_EQ(e.flags, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
    EXPECT_EQ(e.len, len);
    EXPECT_EQ(e.op_context, nullptr);
    EXPECT_EQ(target, msg);
  }
}

TEST_P(rma, bad_key_and_range_fail_and_leave_memory_untouched) {
  std::vector<char> target(4096, 0x5a);
  uint64_t base;
  uint64_t key = reg(target.data(), target.size(), FI_REMOTE_WRITE | FI_REMOTE_READ, &base, 9);
  std::vector<char> src(8192, 1);
  fi_context ctx;
  fi_cq_err_entry err{};
  // Unknown key, small and large.
  for (size_t len : {size_t{16}, size_t{8192}}) {
    ASSERT_EQ(fi_write(a, src.data(), len, nullptr, fb, base, key + 1000, &ctx), 0);
    ASSERT_EQ(wait_for(&ctx, &err), -FI_EAVAIL);
    EXPECT_EQ(err.err, FI_EACCES);
  }
  // One byte past the end; a range starting past it; a read of it.
  ASSERT_EQ(fi_write(a, src.data(), 17, nullptr, fb, base + 4080, key, &ctx), 0);
  ASSERT_EQ(wait_for(&ctx, &err), -FI_EAVAIL);
  EXPECT_EQ(err.err, FI_EACCES);
  ASSERT_EQ(fi_write(a, src.data(), 8192, nullptr, fb, base + 4096, key, &ctx), 0);
  ASSERT_EQ(wait_for(&ctx, &err), -FI_EAVAIL);
  ASSERT_EQ(fi_read(a, src.data(), 4097, nullptr, fb, base, key, &ctx), 0);
  ASSERT_EQ(wait_for(&ctx, &err), -FI_EAVAIL);
  for (char c : target) ASSERT_EQ(c, 0x5a);
  // Rights: a read-only region refuses writes.
  std::vector<char> ro(64, 3);
  uint64_t rbase;
  uint64_t rkey = reg(ro.data(), ro.size(), FI_REMOTE_READ, &rbase, 10);
  ASSERT_EQ(fi_write(a, src.data(), 8, nullptr, fb, rbase, rkey, &ctx), 0);
  ASSERT_EQ(wait_for(&ctx, &err), -FI_EAVAIL);
  EXPECT_EQ(err.err, FI_EACCES);
  EXPECT_EQ(ro[0], 3);
  // The endpoint still works afterwards.
  ASSERT_EQ(fi_write(a, src.data(), 8, nullptr, fb, base, key, &ctx), 0);
  ASSERT_EQ(wait_for(&ctx), 1);
  EXPECT_EQ(target[0], 1);
}

TEST_P(rma, inject_write_and_counters) {
  fid_cntr *wc = nullptr, *rc = nullptr, *rwc = nullptr;
  fi_cntr_attr ca{};
  ca.events = FI_CNTR_EVENTS_COMP;
  ASSERT_EQ(fi_cntr_open(domain, &ca, &wc, nullptr), 0);
  ASSERT_EQ(fi_cntr_open(domain, &ca, &rc, nullptr), 0);
  ASSERT_EQ(fi_cntr_open(domain, &ca, &rwc, nullptr), 0);
  // Counters bind before enable: a fresh pair of endpoints.
  fid_ep *x = nullptr, *y = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &x, nullptr), 0);
  ASSERT_EQ(fi_endpoint(domain, info, &y, nullptr), 0);
  ASSERT_EQ(fi_ep_bind(x, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
  ASSERT_EQ(fi_ep_bind(y, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
  ASSERT_EQ(fi_ep_bind(x, &wc->fid, FI_WRITE), 0);
  ASSERT_EQ(fi_ep_bind(x, &rc->fid, FI_READ), 0);
  ASSERT_EQ(fi_ep_bind(y, &rwc->fid, FI_REMOTE_WRITE), 0);
  ASSERT_EQ(fi_ep_bind(x, &av->fid, 0), 0);
  ASSERT_EQ(fi_ep_bind(y, &av->fid, 0), 0);
  ASSERT_EQ(fi_enable(x), 0);
  ASSERT_EQ(fi_enable(y), 0);
  char name[128];
  size_t len = sizeof name;
  ASSERT_EQ(fi_getname(&y->fid, name, &len), 0);
  fi_addr_t fy;
  ASSERT_EQ(fi_av_insert(av, name, 1, &fy, 0, nullptr), 1);
  std::vector<uint64_t> target(16, 0);
  uint64_t base;
  uint64_t key = reg(target.data(), target.size() * 8, FI_REMOTE_WRITE | FI_REMOTE_READ, &base, 77);
  for (uint64_t i = 0; i < 16; ++i) {
    ssize_t r;
    do r = fi_inject_write(x, &i, 8, fy, base + i * 8, key);
    while (r == -FI_EAGAIN && (fi_cq_read(cq, nullptr, 0), true));
    ASSERT_EQ(r, 0);
  }
  // Manual progress: both sides are driven (the initiator may still have
  // to connect), through the CQ they share.
  auto drive_until = [&](fid_cntr* c, uint64_t n) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (fi_cntr_read(c) < n && std::chrono::steady_clock::now() < deadline) {
      fi_cq_data_entry e;
      if (fi_cq_read(cq, &e, 1) == 1) other.push_back(e);
    }
    return fi_cntr_read(c);
  };
  EXPECT_EQ(drive_until(rwc, 16), 16u);
  for (uint64_t i = 0; i < 16; ++i) EXPECT_EQ(target[i], i);
  EXPECT_EQ(wait_count(wc, 16), 16u);
  uint64_t got = 0;
  ASSERT_EQ(fi_read(x, &got, 8, nullptr, fy, base + 40, key, nullptr), 0);
  EXPECT_EQ(drive_until(rc, 1), 1u);
  EXPECT_EQ(got, 5u);
  EXPECT_EQ(fi_close(&x->fid), 0);
  EXPECT_EQ(fi_close(&y->fid), 0);
  for (fid_cntr* c : {wc, rc, rwc}) EXPECT_EQ(fi_close(&c->fid), 0);
}

TEST_P(rma, atomics_fetch_add_and_compare_swap) {
  std::vector<int64_t> target(8, 10);
  uint64_t base;
  uint64_t key =
      reg(target.data(), target.size() * 8, FI_REMOTE_WRITE | FI_REMOTE_READ, &base, 55);
  fi_context ctx;
  int64_t add[2] = {5, -20}, prior[2] = {0, 0};
  ASSERT_EQ(fi_fetch_atomic(a, add, 2, nullptr, prior, nullptr, fb, base + 8, key, FI_INT64,
                            FI_SUM, &ctx),
            0);
  ASSERT_EQ(wait_for(&ctx), 1);
  EXPECT_EQ(last.flags, FI_ATOMIC | FI_READ);
  EXPECT_EQ(prior[0], 10);
  EXPECT_EQ(prior[1], 10);
  EXPECT_EQ(target[1], 15);
  EXPECT_EQ(target[2], -10);
  int64_t swap = 99, cmp = 15, old = 0;
  ASSERT_EQ(fi_compare_atomic(a, &swap, 1, nullptr, &cmp, nullptr, &old, nullptr, fb, base + 8,
                              key, FI_INT64, FI_CSWAP, &ctx),
            0);
  ASSERT_EQ(wait_for(&ctx), 1);
  EXPECT_EQ(old, 15);
  EXPECT_EQ(target[1], 99);
  double d = 2.5;
  ASSERT_EQ(fi_atomic(a, &d, 1, nullptr, fb, base + 24, key, FI_DOUBLE, FI_ATOMIC_WRITE, &ctx), 0);
  ASSERT_EQ(wait_for(&ctx), 1);
  EXPECT_EQ(last.flags, FI_ATOMIC | FI_WRITE);
  double dv;
  std::memcpy(&dv, &target[3], 8);
  EXPECT_EQ(dv, 2.5);
  // Read-only atomic, then a bad key.
  int64_t cur = 0;
  ASSERT_EQ(fi_fetch_atomic(a, nullptr, 1, nullptr, &cur, nullptr, fb, base, key, FI_INT64,
                            FI_ATOMIC_READ, &ctx),
            0);
  ASSERT_EQ(wait_for(&ctx), 1);
  EXPECT_EQ(cur, 10);
  fi_cq_err_entry err{};
  ASSERT_EQ(fi_atomic(a, add, 1, nullptr, fb, base, key ^ 0xffff, FI_INT64, FI_SUM, &ctx), 0);
  ASSERT_EQ(wait_for(&ctx, &err), -FI_EAVAIL);
  EXPECT_EQ(err.err, FI_EACCES);
  EXPECT_EQ(target[0], 10);
}

TEST_P(rma, atomic_valid_calls_and_query_agree) {
  size_t count = 0;
  EXPECT_EQ(fi_atomicvalid(a, FI_INT32, FI_SUM, &count), 0);
  EXPECT_GE(count, 1u);
  fi_atomic_attr attr{};
  EXPECT_EQ(fi_query_atomic(domain, FI_INT32, FI_SUM, &attr, 0), 0);
  EXPECT_EQ(attr.size, 4u);
  EXPECT_EQ(attr.count, count);
  EXPECT_EQ(fi_compare_atomicvalid(a, FI_INT32, FI_SUM, &count), -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_fetch_atomicvalid(a, FI_FLOAT_COMPLEX, FI_MIN, &count), -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_compare_atomicvalid(a, FI_UINT64, FI_MSWAP, &count), 0);
  EXPECT_EQ(fi_query_atomic(domain, FI_UINT64, FI_CSWAP, &attr, FI_COMPARE_ATOMIC), 0);
  EXPECT_EQ(fi_query_atomic(domain, FI_UINT64, FI_CSWAP, &attr, 0), -FI_EOPNOTSUPP);
}

// Whatever memory-registration mode an application says it can handle,
// it gets the provider, and RMA works under the mode fi_getinfo returned.
TEST_P(rma, every_mr_mode_a_client_asks_for_works) {
  struct ask {
    uint32_t version;
    int mode;
  } asks[] = {{FI_VERSION(1, 17), 0},
              {FI_VERSION(1, 17), FI_MR_VIRT_ADDR},
              {FI_VERSION(1, 17), FI_MR_PROV_KEY},
              {FI_VERSION(1, 17), FI_MR_ALLOCATED},
              {FI_VERSION(1, 17), FI_MR_LOCAL},
              {FI_VERSION(1, 17), FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY},
              {FI_VERSION(1, 4), FI_MR_BASIC},
              {FI_VERSION(1, 4), FI_MR_SCALABLE}};
  for (const ask& k : asks) {
    SCOPED_TRACE(k.mode);
    fi_info* h = fi_dupinfo(hints);
    h->domain_attr->mr_mode = k.mode;
    fi_info* got = nullptr;
    const bool ip = is_ip_format(info->addr_format);
    ASSERT_EQ(fi_getinfo(k.version, ip ? "127.0.0.1" : nullptr, nullptr, ip ? FI_SOURCE : 0, h,
                         &got),
              0);
    fi_freeinfo(h);
    int mode = got->domain_attr->mr_mode;
    if (k.version < FI_VERSION(1, 5)) {
      // The old enum: the provider answers with one of its two values, and
      // the bits they stand for apply.
      EXPECT_TRUE(mode == FI_MR_BASIC || mode == FI_MR_SCALABLE) << mode;
      mode = mode == FI_MR_BASIC ? FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED : 0;
    } else {
      EXPECT_EQ(mode & ~k.mode, 0) << "a mode the client did not accept";
    }
    fid_fabric* fab = nullptr;
    fid_domain* dom = nullptr;
    fid_cq* c = nullptr;
    fid_av* v = nullptr;
    fid_ep *x = nullptr, *y = nullptr;
    ASSERT_EQ(fi_fabric(got->fabric_attr, &fab, nullptr), 0);
    ASSERT_EQ(fi_domain(fab, got, &dom, nullptr), 0);
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_DATA;
    ASSERT_EQ(fi_cq_open(dom, &ca, &c, nullptr), 0);
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    ASSERT_EQ(fi_av_open(dom, &aa, &v, nullptr), 0);
    fi_addr_t fy = FI_ADDR_UNSPEC;
    for (fid_ep** e : {&x, &y}) {
      ASSERT_EQ(fi_endpoint(dom, got, e, nullptr), 0);
      ASSERT_EQ(fi_ep_bind(*e, &c->fid, FI_TRANSMIT | FI_RECV), 0);
      ASSERT_EQ(fi_ep_bind(*e, &v->fid, 0), 0);
      ASSERT_EQ(fi_enable(*e), 0);
    }
    char name[128];
    size_t len = sizeof name;
    ASSERT_EQ(fi_getname(&y->fid, name, &len), 0);
    ASSERT_EQ(fi_av_insert(v, name, 1, &fy, 0, nullptr), 1);
    std::vector<char> target(64, 0), src(16, 'k');
    fid_mr *tmr = nullptr, *smr = nullptr;
    ASSERT_EQ(fi_mr_reg(dom, target.data(), target.size(), FI_REMOTE_WRITE, 0, 21, 0, &tmr, nullptr),
              0);
    ASSERT_EQ(fi_mr_reg(dom, src.data(), src.size(), FI_WRITE, 0, 22, 0, &smr, nullptr), 0);
    uint64_t base = (mode & FI_MR_VIRT_ADDR) ? reinterpret_cast<uint64_t>(target.data()) : 0;
    uint64_t key = fi_mr_key(tmr);
    if (!(mode & FI_MR_PROV_KEY)) { EXPECT_EQ(key, 21u); }
    fi_context ctx;
    ASSERT_EQ(fi_write(x, src.data(), src.size(), fi_mr_desc(smr), fy, base + 8, key, &ctx), 0);
    fi_cq_data_entry e{};
    ssize_t n;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while ((n = fi_cq_read(c, &e, 1)) == -FI_EAGAIN && std::chrono::steady_clock::now() < deadline) {
    }
    EXPECT_EQ(n, 1);
    EXPECT_EQ(std::memcmp(target.data() + 8, src.data(), src.size()), 0);
    for (fid* f : {&smr->fid, &tmr->fid, &y->fid, &x->fid, &v->fid, &c->fid, &dom->fid, &fab->fid})
      EXPECT_EQ(fi_close(f), 0);
    fi_freeinfo(got);
  }
}

// FI_RMA_EVENT: counters bound to a region (fi_mr_bind) count each remote
// access to it once, by what it did: FI_REMOTE_WRITE counters the writes and
// the atomics that modify it, FI_REMOTE_READ counters the reads and the
// atomics that read it; a counter bound for both counts each access once,
// however many of its ranges fall in the region.
class rma_event : public rma {
 protected:
  uint64_t extra_caps() const override { return rma::extra_caps() | FI_RMA_EVENT; }
};

TEST_P(rma_event, region_counters_count_each_remote_access_once) {
  std::vector<char> target(200000, 0), other_region(64, 0);
  std::vector<int64_t> words(4, 1);
  const uint64_t access = FI_REMOTE_READ | FI_REMOTE_WRITE;
  fid_mr *mr = nullptr, *mr_words = nullptr;
  ASSERT_EQ(fi_mr_reg(domain, target.data(), target.size(), access, 0, 301, FI_RMA_EVENT, &mr,
                      nullptr),
            0);
  ASSERT_EQ(fi_mr_reg(domain, words.data(), words.size() * 8, access, 0, 302, FI_RMA_EVENT,
                      &mr_words, nullptr),
            0);
  uint64_t plain_base;
  const uint64_t plain_key = reg(other_region.data(), other_region.size(), access, &plain_base, 303);
  fid_cntr *wr = nullptr, *rd = nullptr, *both = nullptr;
  fi_cntr_attr ca{};
  ca.events = FI_CNTR_EVENTS_COMP;
  for (fid_cntr** c : {&wr, &rd, &both}) ASSERT_EQ(fi_cntr_open(domain, &ca, c, nullptr), 0);
  EXPECT_EQ(fi_mr_bind(mr, &wr->fid, 0), -FI_EBADFLAGS);
  EXPECT_EQ(fi_mr_bind(mr, &wr->fid, FI_SEND), -FI_EBADFLAGS);
  for (fid_mr* m : {mr, mr_words}) {
    ASSERT_EQ(fi_mr_bind(m, &wr->fid, FI_REMOTE_WRITE), 0);
    ASSERT_EQ(fi_mr_bind(m, &rd->fid, FI_REMOTE_READ), 0);
    ASSERT_EQ(fi_mr_bind(m, &both->fid, FI_REMOTE_WRITE), 0);
    ASSERT_EQ(fi_mr_bind(m, &both->fid, FI_REMOTE_READ), 0);  // again: both kinds
    if (info->domain_attr->mr_mode & FI_MR_RMA_EVENT) {
      ASSERT_EQ(fi_mr_enable(m), 0);
    }
  }
  EXPECT_EQ(fi_close(&wr->fid), -FI_EBUSY) << "a region still counts on it";
  const uint64_t base = virt ? reinterpret_cast<uint64_t>(target.data()) : 0;
  const uint64_t wbase = virt ? reinterpret_cast<uint64_t>(words.data()) : 0;
  const uint64_t key = fi_mr_key(mr), wkey = fi_mr_key(mr_words);
  auto expect = [&](uint64_t w, uint64_t r, uint64_t b, const char* after) {
    EXPECT_EQ(fi_cntr_read(wr), w) << after;
    EXPECT_EQ(fi_cntr_read(rd), r) << after;
    EXPECT_EQ(fi_cntr_read(both), b) << after;
  };
  std::vector<char> src(100000, 'x'), back(100000);
  fi_context ctx;
  ASSERT_EQ(fi_write(a, src.data(), 16, nullptr, fb, base, key, &ctx), 0);
  ASSERT_EQ(wait_for(&ctx), 1);
  expect(1, 0, 1, "a small write");
  ASSERT_EQ(fi_write(a, src.data(), src.size(), nullptr, fb, base + 64, key, &ctx), 0);
  ASSERT_EQ(wait_for(&ctx), 1);
  expect(2, 0, 2, "a large write");
  ASSERT_EQ(fi_read(a, back.data(), back.size(), nullptr, fb, base + 64, key, &ctx), 0);
  ASSERT_EQ(wait_for(&ctx), 1);
  EXPECT_EQ(back, src);
  expect(2, 1, 3, "a read");
  // Two ranges of one region in one operation: one access.
  iovec iov{src.data(), 32};
  fi_rma_iov rv[2] = {{base, 16, key}, {base + 1000, 16, key}};
  fi_msg_rma m{&iov, nullptr, 1, fb, rv, 2, &ctx, 0};
  ASSERT_EQ(fi_writemsg(a, &m, FI_COMPLETION), 0);
  ASSERT_EQ(wait_for(&ctx), 1);
  expect(3, 1, 4, "a write to two ranges of the region");
  int64_t one = 1, prior = 0, cmp = 3, swap = 7;
  ASSERT_EQ(fi_atomic(a, &one, 1, nullptr, fb, wbase, wkey, FI_INT64, FI_SUM, &ctx), 0);
  ASSERT_EQ(wait_for(&ctx), 1);
  expect(4, 1, 5, "a base atomic");
  ASSERT_EQ(fi_fetch_atomic(a, &one, 1, nullptr, &prior, nullptr, fb, wbase, wkey, FI_INT64,
                            FI_SUM, &ctx),
            0);
  ASSERT_EQ(wait_for(&ctx), 1);
  EXPECT_EQ(prior, 2);
  expect(5, 2, 6, "a fetch-add (reads and modifies)");
  ASSERT_EQ(fi_fetch_atomic(a, nullptr, 1, nullptr, &prior, nullptr, fb, wbase, wkey, FI_INT64,
                            FI_ATOMIC_READ, &ctx),
            0);
  ASSERT_EQ(wait_for(&ctx), 1);
  expect(5, 3, 7, "an atomic read");
  ASSERT_EQ(fi_compare_atomic(a, &swap, 1, nullptr, &cmp, nullptr, &prior, nullptr, fb, wbase,
                              wkey, FI_INT64, FI_CSWAP, &ctx),
            0);
  ASSERT_EQ(wait_for(&ctx), 1);
  EXPECT_EQ(words[0], 7);
  expect(6, 4, 8, "a compare-swap");
  // A region with no counter bound counts nowhere.
  ASSERT_EQ(fi_write(a, src.data(), 8, nullptr, fb, plain_base, plain_key, &ctx), 0);
  ASSERT_EQ(wait_for(&ctx), 1);
  expect(6, 4, 8, "a write to another region");
  EXPECT_EQ(fi_close(&mr->fid), 0);
  EXPECT_EQ(fi_close(&mr_words->fid), 0);
  for (fid_cntr* c : {wr, rd, both}) EXPECT_EQ(fi_close(&c->fid), 0);
}

INSTANTIATE_TEST_SUITE_P(all, rma, testing::ValuesIn(all_configs), config_name);
INSTANTIATE_TEST_SUITE_P(all, rma_event, testing::ValuesIn(all_configs), config_name);

}  // namespace
}  // namespace conformance
