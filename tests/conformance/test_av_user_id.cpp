// SPDX-License-Identifier: MIT
// weft — FI_AV_USER_ID (fi_av(3)): addresses inserted with user ids are
// reported by those ids wherever a completion names its source; transfers
// still use the fi_addr_t the insert returned.
#include "fixture.hpp"

#include <string>

namespace conformance {
namespace {

class user_id : public provider_test {
  uint64_t extra_caps() const override { return FI_SOURCE | FI_AV_USER_ID; }

 protected:
  // An enabled endpoint whose address is inserted with user id `id`;
  // returns the fi_addr_t to send to.
  fid_ep* open_ep_with_id(fid_cq* cq, fi_addr_t id, fi_addr_t* addr) {
    fid_ep* ep = nullptr;
    EXPECT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
    if (!ep) return nullptr;
    eps.push_back(ep);
    EXPECT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    EXPECT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
    EXPECT_EQ(fi_enable(ep), 0);
    char name[128];
    size_t len = sizeof name;
    EXPECT_EQ(fi_getname(&ep->fid, name, &len), 0);
    *addr = id;
    EXPECT_EQ(fi_av_insert(av, name, 1, addr, FI_AV_USER_ID, nullptr), 1);
    return ep;
  }
};

TEST_P(user_id, completions_name_the_sender_by_its_id) {
  fid_cq* cq = open_cq();
  open_av();
  fi_addr_t a, b;
  fid_ep* ea = open_ep_with_id(cq, 0xa11ce, &a);
  fid_ep* eb = open_ep_with_id(cq, 0xb0b, &b);
  ASSERT_TRUE(ea && eb);
  EXPECT_NE(a, fi_addr_t{0xa11ce}) << "fi_addr returns the address to use";
  char buf[8];
  ASSERT_EQ(fi_recv(eb, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  ASSERT_EQ(fi_inject(ea, "x", 1, b), 0);
  fi_cq_data_entry e;
  fi_addr_t src = FI_ADDR_UNSPEC;
  ASSERT_EQ(read_one(cq, &e, &src), 1);
  EXPECT_EQ(src, fi_addr_t{0xa11ce});

  // fi_av_set_user_id changes what later completions report.
  ASSERT_EQ(fi_av_set_user_id(av, a, 0xface, 0), 0);
  ASSERT_EQ(fi_recv(eb, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  ASSERT_EQ(fi_inject(ea, "y", 1, b), 0);
  src = FI_ADDR_UNSPEC;
  ASSERT_EQ(read_one(cq, &e, &src), 1);
  EXPECT_EQ(src, fi_addr_t{0xface});
  EXPECT_EQ(fi_av_set_user_id(av, a, 1, 1), -FI_EBADFLAGS);
  EXPECT_EQ(fi_av_insert(av, buf, 1, nullptr, FI_AV_USER_ID, nullptr), -FI_EINVAL);
}

TEST_P(user_id, addresses_without_an_id_report_themselves) {
  fid_cq* cq = open_cq();
  open_av();
  fi_addr_t a, b;
  fid_ep* ea = open_ep(cq, &a);  // no user id
  fi_addr_t bid;
  fid_ep* eb = open_ep_with_id(cq, 0x5eed, &bid);
  ASSERT_TRUE(ea && eb);
  b = bid;
  char buf[8];
  ASSERT_EQ(fi_recv(eb, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  ASSERT_EQ(fi_inject(ea, "z", 1, b), 0);
  fi_cq_data_entry e;
  fi_addr_t src = FI_ADDR_UNSPEC;
  ASSERT_EQ(read_one(cq, &e, &src), 1);
  EXPECT_EQ(src, a);
}

INSTANTIATE_TEST_SUITE_P(all, user_id, testing::ValuesIn(all_configs), config_name);

// A directed receive names its sender by the fi_addr_t the insert returned
// (the address transfers use), not by the user id completions report.
class user_id_directed : public user_id {
  uint64_t extra_caps() const override { return FI_SOURCE | FI_AV_USER_ID | FI_DIRECTED_RECV; }
};

TEST_P(user_id_directed, a_directed_receive_takes_the_fi_addr) {
  fid_cq* cq = open_cq();
  open_av();
  fi_addr_t a, b, c;
  fid_ep* ea = open_ep_with_id(cq, 0xa, &a);
  fid_ep* eb = open_ep_with_id(cq, 0xb, &b);
  fid_ep* ec = open_ep_with_id(cq, 0xc, &c);
  ASSERT_TRUE(ea && eb && ec);
  char buf[8] = {};
  ASSERT_EQ(fi_recv(eb, buf, sizeof buf, nullptr, c, nullptr), 0);  // from c only
  ASSERT_EQ(fi_inject(ea, "from a", 6, b), 0);
  ASSERT_EQ(fi_inject(ec, "from c", 6, b), 0);
  fi_cq_data_entry e;
  fi_addr_t src = FI_ADDR_UNSPEC;
  ASSERT_EQ(read_one(cq, &e, &src), 1);
  EXPECT_EQ(src, fi_addr_t{0xc});
  EXPECT_EQ(std::string(buf, 6), "from c");
  ASSERT_EQ(fi_recv(eb, buf, sizeof buf, nullptr, a, nullptr), 0);  // a's waited
  src = FI_ADDR_UNSPEC;
  ASSERT_EQ(read_one(cq, &e, &src), 1);
  EXPECT_EQ(src, fi_addr_t{0xa});
  EXPECT_EQ(std::string(buf, 6), "from a");
}

INSTANTIATE_TEST_SUITE_P(all, user_id_directed, testing::ValuesIn(all_configs), config_name);

}  // namespace
}  // namespace conformance
