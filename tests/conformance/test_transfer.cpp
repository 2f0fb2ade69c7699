// SPDX-License-Identifier: MIT
// weft — conformance: messages of every size from 0 B to 4 MiB, posted
// before or after they arrive, and long runs that keep their order, between
// endpoints reached through an AV (the providers offering FI_TAGGED; the
// others skip). Tag matching itself is test_tagged.cpp's.
#include "exchange.hpp"
#include "fixture.hpp"

#include <rdma/fi_tagged.h>

#include <array>
#include <cstdio>

namespace conformance {
namespace {

class transfer : public provider_test {
  uint64_t extra_caps() const override { return FI_TAGGED; }

 protected:
  // Two endpoints on one CQ (tagged format) and the fixture's AV.
  traffic pair() {
    fid_cq* cq = open_cq(FI_CQ_FORMAT_TAGGED);
    open_av();
    fi_addr_t a, b;
    fid_ep* ea = open_ep(cq, &a);
    fid_ep* eb = open_ep(cq, &b);
    return traffic(ea, eb, b, {cq});
  }
};

TEST_P(transfer, sizes_from_zero_to_four_mib) {
  traffic t = pair();
  for (size_t size : {size_t{0}, size_t{1}, size_t{100}, size_t{4096}, size_t{70001},
                      size_t{1} << 20, size_t{4} << 20}) {
    if (size > info->ep_attr->max_msg_size) continue;
    for (bool tag : {false, true}) exchange(t, size, tag);
  }
}

TEST_P(transfer, unexpected_messages) {
  traffic t = pair();
  for (size_t size : {size_t{0}, size_t{10}, size_t{5000}, size_t{3} << 20})
    for (bool tag : {false, true}) exchange(t, size, tag, true);
}

TEST_P(transfer, many_messages_keep_their_order) {
  traffic t = pair();
  constexpr int n = 300;
  std::vector<std::array<char, 16>> in(n);
  std::vector<fi_context> rctx(n);
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(fi_trecv(t.rx, in[i].data(), 16, nullptr, FI_ADDR_UNSPEC, 5, 0, &rctx[i]), 0);
  for (int i = 0; i < n;) {
    char msg[16];
    snprintf(msg, sizeof msg, "m%d", i);
    ssize_t r = fi_tinject(t.tx, msg, sizeof msg, t.dest, 5);
    if (r == -FI_EAGAIN) {
      t.poll();
      continue;
    }
    ASSERT_EQ(r, 0);
    ++i;
  }
  for (int i = 0; i < n; ++i) {
    auto c = t.wait(&rctx[i]);
    ASSERT_TRUE(c && !c->error) << i;
    char want[16];
    snprintf(want, sizeof want, "m%d", i);
    EXPECT_STREQ(in[i].data(), want);
  }
}

INSTANTIATE_TEST_SUITE_P(all, transfer, testing::ValuesIn(all_configs), config_name);

}  // namespace
}  // namespace conformance
