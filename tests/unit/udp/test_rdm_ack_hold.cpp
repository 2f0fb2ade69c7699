// SPDX-License-Identifier: MIT
// weft — udp RDM under manual progress, seen from the wire: the
// acknowledgement a progress call owes waits for the answer that carries it
// (no bare acknowledgement goes first), goes at the next progress call if no
// answer comes, at fi_close, and from the keeper thread when the application
// stops calling (util/rd_held_ack.hpp). A raw socket plays the peer.
// With FI_UDP_RDM_ACK_HOLD=0 (ctest unit.udp_rdm_ack_hold_off) every
// acknowledgement goes at the end of the call that took the message.
#include "prov/udp/rdm.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

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

class udp_rdm_ack_hold : public testing::Test {
 protected:
  void SetUp() override {
    fi_info* hints = fi_allocinfo();
    hints->caps = FI_MSG;
    hints->ep_attr->type = FI_EP_RDM;
    hints->addr_format = FI_SOCKADDR_IN;
    hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
    hints->fabric_attr->prov_name = strdup("udp");
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", nullptr, FI_SOURCE, hints, &info), 0);
    fi_freeinfo(hints);
    ASSERT_EQ(fi_fabric(info->fabric_attr, &fab, nullptr), 0);
    ASSERT_EQ(fi_domain(fab, info, &dom, nullptr), 0);
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    ASSERT_EQ(fi_av_open(dom, &aa, &av, nullptr), 0);
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_CONTEXT;
    ASSERT_EQ(fi_cq_open(dom, &ca, &cq, nullptr), 0);
    ASSERT_EQ(fi_endpoint(dom, info, &ep, nullptr), 0);
    ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
    ASSERT_EQ(fi_enable(ep), 0);
    size_t len = sizeof to;
    ASSERT_EQ(fi_getname(&ep->fid, &to, &len), 0);
    raw = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(raw, 0);
    sockaddr_in me{};
    me.sin_family = AF_INET;
    me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(raw, reinterpret_cast<sockaddr*>(&me), sizeof me), 0);
    socklen_t ml = sizeof me;
    ASSERT_EQ(::getsockname(raw, reinterpret_cast<sockaddr*>(&me), &ml), 0);
    ASSERT_EQ(fi_av_insert(av, &me, 1, &raw_addr, 0, nullptr), 1);
  }
  void TearDown() override {
    if (raw >= 0) ::close(raw);
    if (ep) {
      EXPECT_EQ(fi_close(&ep->fid), 0);
    }
    if (cq) {
      EXPECT_EQ(fi_close(&cq->fid), 0);
    }
    if (av) {
      EXPECT_EQ(fi_close(&av->fid), 0);
    }
    if (dom) {
      EXPECT_EQ(fi_close(&dom->fid), 0);
    }
    if (fab) {
      EXPECT_EQ(fi_close(&fab->fid), 0);
    }
    fi_freeinfo(info);
  }
  // Message `seq` of the raw peer's fresh link: one datagram. `ack`
  // acknowledges the endpoint's datagrams below it (`to_epoch` its epoch).
  void send_msg(uint32_t seq, uint64_t value, uint32_t ack = 0, uint32_t to_epoch = 0) {
    struct {
      rd::dgram h;
      rd::msg m;
      uint64_t payload;
    } d{};
    d.h.magic = rd::magic;
    d.h.version = rd::version;
    d.h.kind = uint8_t(rd::kind::data);
    d.h.flags = rd::flag_first | rd::flag_last | rd::flag_fresh;
    d.h.epoch = 0x1234;
    d.h.to_epoch = to_epoch;
    d.h.seq = seq;
    d.h.ack = ack;
    d.h.window = 16;
    d.h.bytes = sizeof value;
    d.h.instance = 0x777;
    d.m.op = uint8_t(rdm_op::msg);
    d.m.len = sizeof value;
    d.payload = value;
    ASSERT_EQ(::sendto(raw, &d, sizeof d, 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
              ssize_t(sizeof d));
  }
  // The next datagram to the raw peer within `ms` (its header), or false.
  bool next(rd::dgram* h, int ms) {
    pollfd p{raw, POLLIN, 0};
    if (::poll(&p, 1, ms) != 1) return false;
    std::byte buf[2048];
    const ssize_t n = ::recv(raw, buf, sizeof buf, 0);
    if (n < ssize_t(sizeof *h)) return false;
    std::memcpy(h, buf, sizeof *h);
    return true;
  }
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

  fi_info* info = nullptr;
  fid_fabric* fab = nullptr;
  fid_domain* dom = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  sockaddr_in to{};
  int raw = -1;
  fi_addr_t raw_addr = FI_ADDR_NOTAVAIL;
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
