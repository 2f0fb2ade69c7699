// SPDX-License-Identifier: MIT
// weft — FI_FENCE is not implemented, so it is refused, never ignored
// (docs/decisions.md): every data-transfer call that takes flags answers
// -FI_EINVAL to FI_FENCE and moves nothing, it cannot become a default
// operation flag, and no fi_info lists it.
#include "fixture.hpp"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <cstring>

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

TEST_P(fence, is_not_offered) {
  fi_info* h = hints_for(GetParam(), FI_MSG | FI_FENCE);
  fi_info* got = nullptr;
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &got), -FI_ENODATA);
  fi_freeinfo(got);
  fi_freeinfo(h);
}

INSTANTIATE_TEST_SUITE_P(all, fence, testing::ValuesIn(all_configs), config_name);

// Whatever is asked, no provider lists FI_FENCE anywhere in an fi_info.
TEST(fence_core, no_fi_info_lists_it) {
  fi_info* hints[3] = {nullptr, fi_allocinfo(), fi_allocinfo()};
  hints[1]->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC;
  hints[2]->mode = ~0ULL;
  int answers = 0;
  for (fi_info* h : hints) {
    fi_info* info = nullptr;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info), 0);
    for (fi_info* i = info; i; i = i->next, ++answers) {
      SCOPED_TRACE(i->fabric_attr->prov_name);
      EXPECT_EQ(i->caps & FI_FENCE, 0u);
      EXPECT_EQ(i->tx_attr->caps & FI_FENCE, 0u);
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
