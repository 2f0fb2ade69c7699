// SPDX-License-Identifier: MIT
// weft — FI_FENCE (fi_endpoint(3)). shm and tcp offer the capability: a
// fenced transfer starts only once every earlier transmit of the endpoint
// has completed (the call answers -FI_EAGAIN until then), so a fenced read
// after writes sees the writes. Where the capability is not offered (udp),
// or an endpoint was opened without it, the flag is refused with
// -FI_EINVAL and moves nothing, never ignored; it cannot become a default
// operation flag anywhere (docs/decisions.md).
#include "fixture.hpp"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

namespace conformance {
namespace {

constexpr uint64_t transfer_caps =
    FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

class fence : public provider_test {
 protected:
  // Every kind of transfer the configuration's table says it offers.
  uint64_t extra_caps() const override {
    const caps_table* t = caps_of(GetParam());
    return t ? t->offers & transfer_caps : 0;
  }
  bool has(uint64_t cap) const { return (info->caps & cap) == cap; }

  // Drives the CQ for a while; what arrived.
  std::vector<fi_cq_data_entry> drain(fid_cq* cq) {
    std::vector<fi_cq_data_entry> got;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    while (std::chrono::steady_clock::now() < deadline) {
      fi_cq_data_entry e;
      ssize_t n = fi_cq_read(cq, &e, 1);
      if (n == 1) got.push_back(e);
      if (n == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        fi_cq_readerr(cq, &err, 0);
        ADD_FAILURE() << "error completion " << err.err;
      }
    }
    return got;
  }
};

TEST_P(fence, fenced_transfers_are_refused_and_move_nothing) {
  two_eps t = open_two_eps();
  ASSERT_TRUE(t.ea && t.eb);
  char in[16] = {};
  fi_context rctx, sctx;
  ASSERT_EQ(fi_recv(t.eb, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &rctx), 0);

  iovec iov{const_cast<char*>("fenced"), 7};
  fi_msg m{};
  m.msg_iov = &iov;
  m.iov_count = 1;
  m.addr = t.b;
  m.context = &sctx;
  EXPECT_EQ(fi_sendmsg(t.ea, &m, FI_FENCE), -FI_EINVAL);
  EXPECT_EQ(fi_sendmsg(t.ea, &m, FI_FENCE | FI_COMPLETION | FI_TRANSMIT_COMPLETE), -FI_EINVAL);
  if (has(FI_TAGGED)) {
    fi_msg_tagged tm{};
    tm.msg_iov = &iov;
    tm.iov_count = 1;
    tm.addr = t.b;
    tm.tag = 5;
    tm.context = &sctx;
    EXPECT_EQ(fi_tsendmsg(t.ea, &tm, FI_FENCE), -FI_EINVAL);
  }

  alignas(8) char target[64] = {};
  fid_mr* mr = nullptr;
  struct closer {
    fid_mr*& mr;
    ~closer() {
      if (mr) {
        EXPECT_EQ(fi_close(&mr->fid), 0);
      }
    }
  } close_mr{mr};
  if (has(FI_RMA) || has(FI_ATOMIC)) {
    ASSERT_EQ(fi_mr_reg(domain, target, sizeof target, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 1, 0,
                        &mr, nullptr),
              0);
    uint64_t base =
        info->domain_attr->mr_mode & FI_MR_VIRT_ADDR ? reinterpret_cast<uint64_t>(target) : 0;
    uint64_t key = fi_mr_key(mr);
    char local[8] = "written";
    iovec liov{local, 8};
    fi_rma_iov riov{base, 8, key};
    fi_msg_rma rm{&liov, nullptr, 1, t.b, &riov, 1, &sctx, 0};
    if (has(FI_RMA)) {
      EXPECT_EQ(fi_writemsg(t.ea, &rm, FI_FENCE), -FI_EINVAL);
      EXPECT_EQ(fi_readmsg(t.ea, &rm, FI_FENCE), -FI_EINVAL);
    }
    if (has(FI_ATOMIC)) {
      uint64_t opd = 7, cmp = 0, res = 0;
      fi_ioc oiov{&opd, 1}, ciov{&cmp, 1}, resv{&res, 1};
      fi_rma_ioc rioc{base + 8, 1, key};
      fi_msg_atomic am{&oiov, nullptr, 1, t.b, &rioc, 1, FI_UINT64, FI_SUM, &sctx, 0};
      EXPECT_EQ(fi_atomicmsg(t.ea, &am, FI_FENCE), -FI_EINVAL);
      EXPECT_EQ(fi_fetch_atomicmsg(t.ea, &am, &resv, nullptr, 1, FI_FENCE), -FI_EINVAL);
      am.op = FI_CSWAP;
      EXPECT_EQ(fi_compare_atomicmsg(t.ea, &am, &ciov, nullptr, 1, &resv, nullptr, 1, FI_FENCE),
                -FI_EINVAL);
    }
  }

  // Nothing was sent, written or completed.
  EXPECT_TRUE(drain(t.cq).empty());
  EXPECT_EQ(in[0], 0);
  for (char c : target) ASSERT_EQ(c, 0);
  // And the endpoint still works without the flag.
  EXPECT_EQ(fi_sendmsg(t.ea, &m, 0), 0);
  std::vector<fi_cq_data_entry> got = drain(t.cq);
  EXPECT_EQ(got.size(), 2u);
  EXPECT_STREQ(in, "fenced");
}

// FI_FENCE cannot come in as a default operation flag either.
TEST_P(fence, is_no_default_operation_flag) {
  fid_cq* cq = open_cq();
  open_av();
  fi_addr_t self;
  fid_ep* ep = open_ep(cq, &self);
  ASSERT_NE(ep, nullptr);
  uint64_t flags = FI_TRANSMIT | FI_FENCE;
  EXPECT_EQ(fi_control(&ep->fid, FI_SETOPSFLAG, &flags), -FI_EINVAL);
  flags = FI_TRANSMIT;
  ASSERT_EQ(fi_control(&ep->fid, FI_GETOPSFLAG, &flags), 0);
  EXPECT_EQ(flags & FI_FENCE, 0u);

  fi_info* h = fi_dupinfo(hints);
  h->tx_attr->op_flags = FI_FENCE;
  fi_info* got = nullptr;
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &got), -FI_ENODATA);
  fi_freeinfo(got);
  fi_freeinfo(h);

  fi_info* asked = fi_dupinfo(info);
  asked->tx_attr->op_flags = FI_FENCE;
  fid_ep* ep2 = nullptr;
  EXPECT_NE(fi_endpoint(domain, asked, &ep2, nullptr), 0);
  if (ep2) fi_close(&ep2->fid);
  fi_freeinfo(asked);
}

// Offered where the capability table says so, refused (-FI_ENODATA)
// elsewhere.
TEST_P(fence, is_offered_exactly_where_implemented) {
  const caps_table* t = caps_of(GetParam());
  ASSERT_NE(t, nullptr);
  fi_info* h = hints_for(GetParam(), FI_MSG | FI_FENCE);
  fi_info* got = nullptr;
  int r = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &got);
  if (t->offers & FI_FENCE) {
    ASSERT_EQ(r, 0) << fi_strerror(-r);
    EXPECT_EQ(got->caps & FI_FENCE, FI_FENCE);
    EXPECT_EQ(got->tx_attr->caps & FI_FENCE, FI_FENCE);
    EXPECT_EQ(got->tx_attr->op_flags & FI_FENCE, 0u) << "never a default";
  } else {
    EXPECT_EQ(r, -FI_ENODATA);
  }
  fi_freeinfo(got);
  fi_freeinfo(h);
}

INSTANTIATE_TEST_SUITE_P(all, fence, testing::ValuesIn(all_configs), config_name);

// Endpoints opened with FI_FENCE, on the configurations that offer it.
class fenced : public fence {
 protected:
  uint64_t extra_caps() const override { return fence::extra_caps() | FI_FENCE; }
  void SetUp() override {
    const caps_table* t = caps_of(GetParam());
    if (!t || !(t->offers & FI_FENCE)) GTEST_SKIP() << GetParam().prov << " lacks FI_FENCE";
    fence::SetUp();
  }
  // Calls `post` until it stops answering -FI_EAGAIN, reading the CQ in
  // between (completions kept in `done`); its last answer. `waits` counts
  // the -FI_EAGAIN answers.
  template <class Post>
  ssize_t post_fenced(fid_cq* cq, Post post, int& waits, std::vector<void*>& done) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      ssize_t r = post();
      if (r != -FI_EAGAIN || std::chrono::steady_clock::now() > deadline) return r;
      ++waits;
      fi_cq_data_entry e;
      ssize_t n = fi_cq_read(cq, &e, 1);
      if (n == 1) done.push_back(e.op_context);
      if (n == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        fi_cq_readerr(cq, &err, 0);
        ADD_FAILURE() << "error completion " << err.err;
      }
    }
  }
  // Whether every context of `first` completed before `then`, in the order
  // the CQ gave them.
  static bool completed_before(const std::vector<void*>& done, std::vector<void*> first,
                               void* then) {
    auto at = std::find(done.begin(), done.end(), then);
    for (void* c : first)
      if (std::find(done.begin(), at, c) == at) return false;
    return true;
  }
  // Reads the CQ until every context in `want` has completed (or 10 s).
  bool wait_all(fid_cq* cq, std::vector<void*> want, std::vector<void*>& done) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      std::erase_if(want, [&](void* c) { return std::find(done.begin(), done.end(), c) != done.end(); });
      if (want.empty()) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      fi_cq_data_entry e;
      if (fi_cq_read(cq, &e, 1) == 1) done.push_back(e.op_context);
    }
  }
};

// Writes of 256 KiB each (outstanding until the target answers), then a
// fenced read of the same bytes: it is accepted only once every write has
// completed, and it reads what the last write put there.
TEST_P(fenced, a_fenced_read_after_writes_sees_the_writes) {
  if (!has(FI_RMA)) GTEST_SKIP() << "no RMA";
  two_eps t = open_two_eps();
  ASSERT_TRUE(t.ea && t.eb);
  constexpr size_t n = 256 << 10;
  constexpr int writes = 4;
  std::vector<char> target(n, 0), back(n, 0);
  std::vector<std::vector<char>> src(writes);
  for (int k = 0; k < writes; ++k) src[k].assign(n, static_cast<char>('a' + k));
  fid_mr* mr = nullptr;
  ASSERT_EQ(fi_mr_reg(domain, target.data(), n, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 2, 0, &mr,
                      nullptr),
            0);
  const uint64_t base =
      info->domain_attr->mr_mode & FI_MR_VIRT_ADDR ? reinterpret_cast<uint64_t>(target.data()) : 0;
  const uint64_t key = fi_mr_key(mr);
  fi_context wctx[writes], rctx;
  std::vector<void*> done;
  for (int k = 0; k < writes; ++k) {
    ssize_t r;
    while ((r = fi_write(t.ea, src[k].data(), n, nullptr, t.b, base, key, &wctx[k])) ==
           -FI_EAGAIN) {
      fi_cq_data_entry e;
      if (fi_cq_read(t.cq, &e, 1) == 1) done.push_back(e.op_context);
    }
    ASSERT_EQ(r, 0) << fi_strerror(static_cast<int>(-r));
  }
  iovec liov{back.data(), n};
  fi_rma_iov riov{base, n, key};
  fi_msg_rma rm{&liov, nullptr, 1, t.b, &riov, 1, &rctx, 0};
  int waits = 0;
  ssize_t r = post_fenced(t.cq, [&] { return fi_readmsg(t.ea, &rm, FI_FENCE | FI_COMPLETION); },
                          waits, done);
  ASSERT_EQ(r, 0) << fi_strerror(static_cast<int>(-r));
  ASSERT_TRUE(wait_all(t.cq, {&rctx, &wctx[0], &wctx[1], &wctx[2], &wctx[3]}, done));
  // Accepted only once every write had completed: their completions are
  // all ahead of the read's in the CQ.
  EXPECT_TRUE(completed_before(done, {&wctx[0], &wctx[1], &wctx[2], &wctx[3]}, &rctx))
      << "the fenced read went ahead of a write that had not completed";
  EXPECT_EQ(back, src[writes - 1]) << "the read does not see the last write";
  // Under manual progress nothing had moved when the read was first posted
  // (the target answers writes only from a progress call): the fence had
  // to make it wait.
  if (GetParam().progress == FI_PROGRESS_MANUAL) {
    EXPECT_GT(waits, 0) << "the fenced read was taken while the writes were outstanding";
  }
  RecordProperty("fence_waits", waits);
  EXPECT_EQ(fi_close(&mr->fid), 0);
}

// A fenced send after large sends to the same peer waits for them; every
// message arrives once, in order.
TEST_P(fenced, a_fenced_send_waits_for_earlier_sends) {
  two_eps t = open_two_eps();
  ASSERT_TRUE(t.ea && t.eb);
  constexpr size_t n = 1 << 20;
  const size_t big = std::min<size_t>(n, info->ep_attr->max_msg_size);
  std::vector<char> a(big, 'x'), b(big, 'y'), in1(big), in2(big);
  char small[8] = "fenced", in3[8] = {};
  fi_context r1, r2, r3, s1, s2, s3;
  ASSERT_EQ(fi_recv(t.eb, in1.data(), big, nullptr, FI_ADDR_UNSPEC, &r1), 0);
  ASSERT_EQ(fi_recv(t.eb, in2.data(), big, nullptr, FI_ADDR_UNSPEC, &r2), 0);
  ASSERT_EQ(fi_recv(t.eb, in3, sizeof in3, nullptr, FI_ADDR_UNSPEC, &r3), 0);
  std::vector<void*> done;
  ASSERT_EQ(fi_send(t.ea, a.data(), big, nullptr, t.b, &s1), 0);
  ASSERT_EQ(fi_send(t.ea, b.data(), big, nullptr, t.b, &s2), 0);
  iovec iov{small, sizeof small};
  fi_msg m{&iov, nullptr, 1, t.b, &s3, 0};
  int waits = 0;
  ssize_t r = post_fenced(t.cq, [&] { return fi_sendmsg(t.ea, &m, FI_FENCE | FI_COMPLETION); },
                          waits, done);
  ASSERT_EQ(r, 0) << fi_strerror(static_cast<int>(-r));
  ASSERT_TRUE(wait_all(t.cq, {&r1, &r2, &r3, &s1, &s2, &s3}, done));
  EXPECT_TRUE(completed_before(done, {&s1, &s2}, &s3))
      << "the fenced send went ahead of an earlier send that had not completed";
  EXPECT_EQ(in1, a);
  EXPECT_EQ(in2, b);
  // shm's large sends complete when the receiver has copied them, which
  // takes a progress call: under manual progress the fence waited. (tcp's
  // may complete inside fi_send, once the socket took the bytes.)
  if (GetParam().progress == FI_PROGRESS_MANUAL && std::string(GetParam().prov) == "shm") {
    EXPECT_GT(waits, 0) << "the fenced send was taken while earlier sends were outstanding";
  }
  EXPECT_STREQ(in3, "fenced");
}

// With nothing outstanding a fenced operation goes at once.
TEST_P(fenced, an_idle_endpoint_takes_a_fenced_send_at_once) {
  two_eps t = open_two_eps();
  ASSERT_TRUE(t.ea && t.eb);
  char in[8] = {}, out[8] = "now";
  fi_context rc, sc;
  ASSERT_EQ(fi_recv(t.eb, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &rc), 0);
  iovec iov{out, sizeof out};
  fi_msg m{&iov, nullptr, 1, t.b, &sc, 0};
  EXPECT_EQ(fi_sendmsg(t.ea, &m, FI_FENCE | FI_COMPLETION), 0);
  std::vector<void*> done;
  ASSERT_TRUE(wait_all(t.cq, {&rc, &sc}, done));
  EXPECT_STREQ(in, "now");
}

INSTANTIATE_TEST_SUITE_P(all, fenced, testing::ValuesIn(all_configs), config_name);

// FI_FENCE appears in an fi_info only from providers that implement it
// (shm, tcp, and lnx, which passes it to them), as a capability, never as a
// default operation flag.
TEST(fence_core, only_providers_that_implement_it_list_it) {
  fi_info* hints[3] = {nullptr, fi_allocinfo(), fi_allocinfo()};
  hints[1]->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC;
  hints[2]->mode = ~0ULL;
  int answers = 0;
  for (fi_info* h : hints) {
    fi_info* info = nullptr;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info), 0);
    for (fi_info* i = info; i; i = i->next, ++answers) {
      SCOPED_TRACE(i->fabric_attr->prov_name);
      const std::string prov = i->fabric_attr->prov_name;
      if (prov != "shm" && prov != "tcp" && prov != "lnx") {
        EXPECT_EQ(i->caps & FI_FENCE, 0u);
        EXPECT_EQ(i->tx_attr->caps & FI_FENCE, 0u);
      }
      EXPECT_EQ(i->rx_attr->caps & FI_FENCE, 0u);
      EXPECT_EQ(i->tx_attr->op_flags & FI_FENCE, 0u);
      EXPECT_EQ(i->rx_attr->op_flags & FI_FENCE, 0u);
      EXPECT_EQ(i->domain_attr->caps & FI_FENCE, 0u);
    }
    fi_freeinfo(info);
    fi_freeinfo(h);
  }
  EXPECT_GE(answers, 3);
}

}  // namespace
}  // namespace conformance
