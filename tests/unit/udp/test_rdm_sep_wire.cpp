// SPDX-License-Identifier: MIT
// weft — the udp RDM message header's scalable-endpoint fields, from the
// wire (util/rd_proto.hpp, rd::msg::rx_index and name_port): datagrams
// written by hand to an endpoint. A message meant for another receive
// context is neither delivered nor acknowledged; a sender that names a port
// is known by it.
#include "rdm_raw_peer.hpp"

#include <chrono>

namespace weft::udp {
namespace {

namespace rd = util::rd;

class udp_rdm_sep_wire : public test::rdm_raw_peer {
 protected:
  void SetUp() override { open(FI_MSG | FI_SOURCE, FI_CQ_FORMAT_TAGGED, false); }
  // One completion within `wait`: 1, or -FI_EAGAIN.
  ssize_t read(fi_cq_tagged_entry* e, fi_addr_t* src,
               std::chrono::milliseconds wait = std::chrono::milliseconds(2000)) {
    auto deadline = std::chrono::steady_clock::now() + wait;
    ssize_t n;
    do n = fi_cq_readfrom(cq, e, 1, src);
    while (n == -FI_EAGAIN && std::chrono::steady_clock::now() < deadline);
    return n;
  }
};

// A message meant for receive context 3 reaches an endpoint (context 0):
// neither delivered nor acknowledged, however often it comes, so its
// sender's operation fails at its peer timeout instead of completing as if
// delivered.
TEST_F(udp_rdm_sep_wire, a_message_for_another_context_is_neither_delivered_nor_acknowledged) {
  uint64_t got = 0;
  ASSERT_EQ(fi_recv(ep, &got, sizeof got, nullptr, FI_ADDR_UNSPEC, &got), 0);
  fi_cq_tagged_entry e{};
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  for (int round = 0; round < 3; ++round) {  // the sender resending it
    send_msg(0, 111, 3);
    EXPECT_EQ(read(&e, &src, std::chrono::milliseconds(50)), -FI_EAGAIN)
        << "nothing delivered to the wrong context";
  }
  EXPECT_EQ(got, 0u);
  // Well past the keeper's longest hold (util/rd_held_ack.hpp).
  rd::dgram h{};
  EXPECT_FALSE(next(&h, 50)) << "the message was acknowledged";
}

// A transmit context's message names its scalable endpoint's port: the
// receiver names the sender by it, not by the socket it came from.
TEST_F(udp_rdm_sep_wire, a_sender_that_names_a_port_is_known_by_it) {
  sockaddr_in named{};
  named.sin_family = AF_INET;
  named.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  named.sin_port = htons(9);
  fi_addr_t named_addr = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(fi_av_insert(av, &named, 1, &named_addr, 0, nullptr), 1);
  uint64_t got = 0;
  ASSERT_EQ(fi_recv(ep, &got, sizeof got, nullptr, FI_ADDR_UNSPEC, &got), 0);
  send_msg(0, 222, 0, 9);
  fi_cq_tagged_entry e{};
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(read(&e, &src), 1);
  EXPECT_EQ(got, 222u);
  EXPECT_EQ(src, named_addr) << "known by the port its header names, not its socket's";
}

}  // namespace
}  // namespace weft::udp
