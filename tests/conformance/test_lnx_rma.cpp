// SPDX-License-Identifier: MIT
// weft — conformance: RMA and atomics through lnx (fi_lnx(7)), over shm and
// over tcp (lnx_fixture.hpp: a peer inserted a second time as if on another
// host is reached through tcp). One registration gives one key, valid
// whichever core carries the operation; a bad key or range is an error
// completion at the initiator and leaves the target as it was; closing the
// region releases it on every core.
#include "lnx_fixture.hpp"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include <cstdint>

namespace conformance {
namespace {

class lnx_rma : public lnx {
 protected:
  // Registers `len` bytes at `buf` on the lnx domain under `key`.
  fid_mr* reg(void* buf, size_t len, uint64_t key,
              uint64_t access = FI_REMOTE_READ | FI_REMOTE_WRITE) {
    fid_mr* mr = nullptr;
    EXPECT_EQ(fi_mr_reg(domain, buf, len, access, 0, key, 0, &mr, nullptr), 0);
    return mr;
  }
  // The next completion of `q`, or its error (err != 0), within a few
  // seconds, driving every endpoint meanwhile.
  int complete(fid_cq* q, fi_cq_tagged_entry& c) {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < end) {
      ssize_t n = fi_cq_read(q, &c, 1);
      if (n == 1) return 0;
      if (n == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        EXPECT_EQ(fi_cq_readerr(q, &err, 0), 1);
        c.op_context = err.op_context;
        c.flags = err.flags;
        return err.err ? err.err : -1;
      }
      EXPECT_EQ(n, -FI_EAGAIN);
      for (lnx_ep* e : opened)
        if (e->cq != q) {
          fi_cq_tagged_entry skip;
          (void)fi_cq_read(e->cq, &skip, 0);
        }
    }
    ADD_FAILURE() << "no completion within 5 s";
    return -2;
  }
};

INSTANTIATE_TEST_SUITE_P(threading, lnx_rma, ::testing::Values(FI_THREAD_DOMAIN, FI_THREAD_SAFE),
                         [](const ::testing::TestParamInfo<fi_threading>& p) {
                           return std::string(p.param == FI_THREAD_SAFE ? "safe" : "domain");
                         });

TEST_P(lnx_rma, is_offered_with_application_keys_and_offsets) {
  EXPECT_TRUE(info->caps & FI_RMA);
  EXPECT_TRUE(info->caps & FI_ATOMIC);
  EXPECT_EQ(info->domain_attr->mr_mode, 0);
  EXPECT_GE(info->tx_attr->rma_iov_limit, 1u);
  fi_atomic_attr aa{};
  EXPECT_EQ(fi_query_atomic(domain, FI_UINT64, FI_SUM, &aa, 0), 0);
  EXPECT_GE(aa.count, 1u);
  EXPECT_EQ(aa.size, sizeof(uint64_t));
  lnx_ep a;
  open(a);
  size_t n = 0;
  EXPECT_EQ(fi_atomicvalid(a.ep, FI_UINT64, FI_SUM, &n), 0);
  EXPECT_GE(n, 1u);
  EXPECT_EQ(fi_compare_atomicvalid(a.ep, FI_UINT64, FI_CSWAP, &n), 0);
  EXPECT_NE(fi_atomicvalid(a.ep, FI_UINT64, FI_CSWAP, &n), 0) << "CSWAP is a compare op";
}

TEST_P(lnx_rma, writes_reads_and_atomics_reach_the_target_through_both_providers) {
  lnx_ep a, b;
  open(a);
  open(b);
  fi_addr_t b_near = insert(b), b_far = insert(b, true);
  insert(a);
  alignas(8) uint8_t target[256] = {};
  fid_mr* mr = reg(target, sizeof target, 0x77);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(fi_mr_key(mr), 0x77u);
  fi_cq_tagged_entry c;
  fi_context ctx;
  int route = 0;
  for (fi_addr_t to : {b_near, b_far}) {
    SCOPED_TRACE(route ? "through tcp" : "through shm");
    const uint64_t base = route * 128;  // offsets: mr_mode 0
    char msg[16];
    std::snprintf(msg, sizeof msg, "route %d here", route);
    ASSERT_EQ(fi_write(a.ep, msg, sizeof msg, nullptr, to, base, 0x77, &ctx), 0);
    ASSERT_EQ(complete(a.cq, c), 0);
    EXPECT_EQ(c.op_context, &ctx);
    EXPECT_EQ(c.flags, FI_RMA | FI_WRITE);
    EXPECT_EQ(std::memcmp(target + base, msg, sizeof msg), 0);
    // Read it back.
    char back[16] = {};
    ASSERT_EQ(fi_read(a.ep, back, sizeof back, nullptr, to, base, 0x77, &ctx), 0);
    ASSERT_EQ(complete(a.cq, c), 0);
    EXPECT_EQ(c.flags, FI_RMA | FI_READ);
    EXPECT_EQ(std::memcmp(back, msg, sizeof msg), 0);
    // Remote CQ data lands in the target's CQ.
    ASSERT_EQ(fi_writedata(a.ep, "d", 1, nullptr, 0xbeef + route, to, base + 20, 0x77, &ctx), 0);
    ASSERT_EQ(complete(a.cq, c), 0);
    ASSERT_EQ(complete(b.cq, c), 0);
    EXPECT_TRUE(c.flags & FI_REMOTE_CQ_DATA);
    EXPECT_EQ(c.data, 0xbeefu + route);
    EXPECT_EQ(target[base + 20], 'd');
    // Atomics on a counter at offset base + 64.
    uint64_t one = 5, old = 0, cmp = 5 * 3, swap = 1000;
    uint64_t* counter = reinterpret_cast<uint64_t*>(target + base + 64);
    ASSERT_EQ(fi_atomic(a.ep, &one, 1, nullptr, to, base + 64, 0x77, FI_UINT64, FI_SUM, &ctx), 0);
    ASSERT_EQ(complete(a.cq, c), 0);
    EXPECT_EQ(c.flags, FI_ATOMIC | FI_WRITE);
    ASSERT_EQ(fi_fetch_atomic(a.ep, &one, 1, nullptr, &old, nullptr, to, base + 64, 0x77,
                              FI_UINT64, FI_SUM, &ctx),
              0);
    ASSERT_EQ(complete(a.cq, c), 0);
    EXPECT_EQ(old, 5u);
    ASSERT_EQ(fi_inject_atomic(a.ep, &one, 1, to, base + 64, 0x77, FI_UINT64, FI_SUM), 0);
    // The inject completes nothing; the compare below comes after it on
    // the same route and finds its sum.
    ASSERT_EQ(fi_compare_atomic(a.ep, &swap, 1, nullptr, &cmp, nullptr, &old, nullptr, to,
                                base + 64, 0x77, FI_UINT64, FI_CSWAP, &ctx),
              0);
    ASSERT_EQ(complete(a.cq, c), 0);
    EXPECT_EQ(old, 15u);
    EXPECT_EQ(*counter, 1000u);
    ++route;
  }
  EXPECT_EQ(fi_close(&mr->fid), 0);
}

TEST_P(lnx_rma, a_bad_key_or_range_fails_at_the_initiator_and_leaves_the_target_alone) {
  lnx_ep a, b;
  open(a);
  open(b);
  fi_addr_t b_near = insert(b), b_far = insert(b, true);
  uint8_t target[64];
  std::memset(target, 0x5a, sizeof target);
  fid_mr* mr = reg(target, sizeof target, 0x99, FI_REMOTE_WRITE);
  ASSERT_NE(mr, nullptr);
  uint8_t junk[32];
  std::memset(junk, 0xee, sizeof junk);
  fi_cq_tagged_entry c;
  fi_context ctx;
  for (fi_addr_t to : {b_near, b_far}) {
    SCOPED_TRACE(to == b_near ? "through shm" : "through tcp");
    ASSERT_EQ(fi_write(a.ep, junk, 8, nullptr, to, 0, 0x98, &ctx), 0);  // no such key
    EXPECT_NE(complete(a.cq, c), 0);
    EXPECT_EQ(c.op_context, &ctx);
    ASSERT_EQ(fi_write(a.ep, junk, 32, nullptr, to, 48, 0x99, &ctx), 0);  // past the end
    EXPECT_NE(complete(a.cq, c), 0);
    ASSERT_EQ(fi_read(a.ep, junk, 8, nullptr, to, 0, 0x99, &ctx), 0);  // no FI_REMOTE_READ
    EXPECT_NE(complete(a.cq, c), 0);
    uint64_t v = 1;
    ASSERT_EQ(fi_atomic(a.ep, &v, 1, nullptr, to, 60, 0x99, FI_UINT64, FI_SUM, &ctx), 0);
    EXPECT_NE(complete(a.cq, c), 0) << "8 bytes at 60 of 64";
  }
  for (uint8_t x : target) ASSERT_EQ(x, 0x5a) << "the target is untouched";
  EXPECT_EQ(fi_close(&mr->fid), 0);
}

TEST_P(lnx_rma, closing_a_region_releases_it_on_every_core) {
  lnx_ep a, b;
  open(a);
  open(b);
  fi_addr_t b_near = insert(b), b_far = insert(b, true);
  uint8_t first[16] = {}, second[16] = {};
  fid_mr* mr = reg(first, sizeof first, 0x42);
  ASSERT_NE(mr, nullptr);
  fid_mr* dup = nullptr;
  EXPECT_EQ(fi_mr_reg(domain, second, sizeof second, FI_REMOTE_WRITE, 0, 0x42, 0, &dup, nullptr),
            -FI_ENOKEY)
      << "one key, one region";
  ASSERT_EQ(fi_close(&mr->fid), 0);
  fi_cq_tagged_entry c;
  fi_context ctx;
  for (fi_addr_t to : {b_near, b_far}) {
    ASSERT_EQ(fi_write(a.ep, "x", 1, nullptr, to, 0, 0x42, &ctx), 0);
    EXPECT_NE(complete(a.cq, c), 0) << "a closed region is gone from every core";
  }
  EXPECT_EQ(first[0], 0);
  // The key is free again on every core: a new region takes it, and writes
  // through either core land there.
  mr = reg(second, sizeof second, 0x42, FI_REMOTE_WRITE);
  ASSERT_NE(mr, nullptr);
  int i = 0;
  for (fi_addr_t to : {b_near, b_far}) {
    char v = static_cast<char>('A' + i);
    ASSERT_EQ(fi_write(a.ep, &v, 1, nullptr, to, i, 0x42, &ctx), 0);
    ASSERT_EQ(complete(a.cq, c), 0);
    EXPECT_EQ(second[i], v);
    ++i;
  }
  EXPECT_EQ(first[0], 0);
  EXPECT_EQ(fi_close(&mr->fid), 0);
}

TEST_P(lnx_rma, rma_before_enable_is_a_bad_state_and_trigger_or_fence_are_refused) {
  fid_ep* ep = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
  char buf[8];
  EXPECT_EQ(fi_write(ep, buf, 8, nullptr, 0, 0, 1, nullptr), -FI_EOPBADSTATE);
  uint64_t v = 1;
  EXPECT_EQ(fi_atomic(ep, &v, 1, nullptr, 0, 0, 1, FI_UINT64, FI_SUM, nullptr), -FI_EOPBADSTATE);
  size_t n = 0;
  EXPECT_EQ(fi_atomicvalid(ep, FI_UINT64, FI_SUM, &n), 0) << "queries need no enable";
  EXPECT_EQ(fi_close(&ep->fid), 0);

  lnx_ep a, b;
  open(a);
  open(b);
  fi_addr_t to = insert(b);
  iovec iov{buf, 8};
  fi_rma_iov rma{0, 8, 1};
  fi_msg_rma m{};
  m.msg_iov = &iov;
  m.iov_count = 1;
  m.addr = to;
  m.rma_iov = &rma;
  m.rma_iov_count = 1;
  // Endpoints opened without FI_FENCE and FI_TRIGGER (lnx offers both):
  // each flag refused, with the reason logged.
  ASSERT_EQ(info->caps & (FI_FENCE | FI_TRIGGER), 0u);
  recorder rec;
  EXPECT_EQ(fi_writemsg(a.ep, &m, FI_FENCE), -FI_EINVAL);
  EXPECT_FALSE(rec.with("without the FI_FENCE capability").empty());
  EXPECT_EQ(fi_readmsg(a.ep, &m, FI_TRIGGER), -FI_EINVAL);
  EXPECT_FALSE(rec.with("without the FI_TRIGGER capability").empty());
}

}  // namespace
}  // namespace conformance
