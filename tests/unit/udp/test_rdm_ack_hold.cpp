// SPDX-License-Identifier: MIT
// weft — udp RDM under manual progress, seen from the wire: the
// acknowledgement a progress call owes waits for the answer that carries it
// (no bare acknowledgement goes first), goes at the next progress call if no
// answer comes, at fi_close, and from the keeper thread when the application
// stops calling (util/rd_held_ack.hpp). A raw socket plays the peer.
// With FI_UDP_RDM_ACK_HOLD=0 (ctest unit.udp_rdm_ack_hold_off) every
// acknowledgement goes at the end of the call that took the message.
#include "rdm_raw_peer.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>

namespace weft::udp {
namespace {

namespace rd = util::rd;

bool holding() {
  const char* v = std::getenv("FI_UDP_RDM_ACK_HOLD");
  return !v || std::strcmp(v, "0") != 0;
}

class udp_rdm_ack_hold : public test::rdm_raw_peer {
 protected:
  void SetUp() override { open(FI_MSG, FI_CQ_FORMAT_CONTEXT, true); }
  // Reads the CQ until one completion (2 s).
  void complete_one() {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    fi_cq_entry e{};
    ssize_t n;
    do n = fi_cq_read(cq, &e, 1);
    while (n == -FI_EAGAIN && std::chrono::steady_clock::now() < deadline);
    ASSERT_EQ(n, 1);
  }
  // A message from the raw peer, taken by a posted receive.
  void take(uint32_t seq, uint64_t value) {
    ASSERT_EQ(fi_recv(ep, &got, sizeof got, nullptr, FI_ADDR_UNSPEC, &got), 0);
    send_msg(seq, value);
    complete_one();
    ASSERT_EQ(got, value);
  }

  uint64_t got = 0;
};

TEST_F(udp_rdm_ack_hold, the_answer_carries_the_acknowledgement_and_no_bare_one_goes_first) {
  ASSERT_NO_FATAL_FAILURE(take(0, 11));
  uint64_t answer = 12;
  ASSERT_EQ(fi_send(ep, &answer, sizeof answer, nullptr, raw_addr, &answer), 0);
  rd::dgram h{};
  ASSERT_TRUE(next(&h, 2000));
  if (!holding()) {
    // The acknowledgement went at the end of the call that took the
    // message, before the answer.
    EXPECT_EQ(h.kind, uint8_t(rd::kind::ack));
    EXPECT_EQ(h.ack, 1u);
    ASSERT_TRUE(next(&h, 2000));
    EXPECT_EQ(h.kind, uint8_t(rd::kind::data));
    return;
  }
  EXPECT_EQ(h.kind, uint8_t(rd::kind::data)) << "a bare acknowledgement went before the answer";
  EXPECT_EQ(h.ack, 1u) << "the answer acknowledges the message";
  // And the keeper sends nothing: the answer carried it. (The answer itself
  // goes again at its retransmission timeout, at least 2 ms away: only a
  // bare acknowledgement is looked for.)
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::microseconds(rd::keeper_slow_us + 4 * rd::keeper_tick_us) +
                     std::chrono::milliseconds(20);
  while (std::chrono::steady_clock::now() < until && next(&h, 5))
    EXPECT_NE(h.kind, uint8_t(rd::kind::ack)) << "the keeper sent an acknowledgement carried";
}

TEST_F(udp_rdm_ack_hold, the_next_progress_call_sends_what_the_last_one_held) {
  if (!holding()) GTEST_SKIP() << "FI_UDP_RDM_ACK_HOLD=0: nothing is held";
  // The keeper may beat the next call on a machine that stalls us for a
  // tick; then the round is tried again with the next message.
  bool seen = false;
  for (uint32_t seq = 0; seq < 10 && !seen; ++seq) {
    ASSERT_NO_FATAL_FAILURE(take(seq, 100 + seq));
    rd::dgram h{};
    if (next(&h, 0)) {  // the keeper was faster: not this round
      EXPECT_EQ(h.ack, seq + 1);
      continue;
    }
    fi_cq_entry e{};
    EXPECT_EQ(fi_cq_read(cq, &e, 1), -FI_EAGAIN);
    // The call sent it before it returned (loopback delivers at once).
    ASSERT_TRUE(next(&h, 0)) << "the next progress call did not send the held acknowledgement";
    EXPECT_EQ(h.kind, uint8_t(rd::kind::ack));
    EXPECT_EQ(h.ack, seq + 1);
    seen = true;
  }
  EXPECT_TRUE(seen) << "the keeper sent every one first";
}

TEST_F(udp_rdm_ack_hold, an_application_that_stops_calling_still_acknowledges_what_it_took) {
  ASSERT_NO_FATAL_FAILURE(take(0, 21));
  // Nothing more is called: the keeper sends it, well within the peer's
  // retransmissions (a sender would otherwise wait out its peer timeout
  // for a message that was delivered).
  const auto t0 = std::chrono::steady_clock::now();
  rd::dgram h{};
  ASSERT_TRUE(next(&h, 2000)) << "nothing acknowledged the message";
  EXPECT_EQ(h.kind, uint8_t(rd::kind::ack));
  EXPECT_EQ(h.ack, 1u);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  // Once only.
  EXPECT_FALSE(next(&h, 30)) << "acknowledged again";
}

TEST_F(udp_rdm_ack_hold, fi_close_sends_what_the_endpoint_holds) {
  ASSERT_NO_FATAL_FAILURE(take(0, 31));
  ASSERT_EQ(fi_close(&ep->fid), 0);
  ep = nullptr;
  rd::dgram h{};
  // At once, or by the keeper before the close: either way exactly one.
  ASSERT_TRUE(next(&h, 0)) << "fi_close returned with the acknowledgement still held";
  EXPECT_EQ(h.kind, uint8_t(rd::kind::ack));
  EXPECT_EQ(h.ack, 1u);
  EXPECT_FALSE(next(&h, 30));
}

}  // namespace
}  // namespace weft::udp
