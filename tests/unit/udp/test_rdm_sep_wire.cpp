// SPDX-License-Identifier: MIT
// weft — the udp RDM message header's scalable-endpoint fields, from the
// wire (util/rd_proto.hpp, rd::msg::rx_index and name_port): datagrams
// written by hand to an endpoint. A message meant for another receive
// context is neither delivered nor acknowledged; a sender that names a port
// is known by it.
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
#include <cstring>
#include <vector>

namespace weft::udp {
namespace {

namespace rd = util::rd;

class udp_rdm_sep_wire : public testing::Test {
 protected:
  void SetUp() override {
    fi_info* hints = fi_allocinfo();
    hints->caps = FI_MSG | FI_SOURCE;
    hints->ep_attr->type = FI_EP_RDM;
    hints->addr_format = FI_SOCKADDR_IN;
    hints->fabric_attr->prov_name = strdup("udp");
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", nullptr, FI_SOURCE, hints, &info), 0);
    fi_freeinfo(hints);
    ASSERT_EQ(fi_fabric(info->fabric_attr, &fab, nullptr), 0);
    ASSERT_EQ(fi_domain(fab, info, &dom, nullptr), 0);
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    ASSERT_EQ(fi_av_open(dom, &aa, &av, nullptr), 0);
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    ASSERT_EQ(fi_cq_open(dom, &ca, &cq, nullptr), 0);
    ASSERT_EQ(fi_endpoint(dom, info, &ep, nullptr), 0);
    ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
    ASSERT_EQ(fi_enable(ep), 0);
    size_t len = sizeof to;
    ASSERT_EQ(fi_getname(&ep->fid, &to, &len), 0);
    raw = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in me{};
    me.sin_family = AF_INET;
    me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(raw, reinterpret_cast<sockaddr*>(&me), sizeof me), 0);
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
  // Message `seq` of a fresh link from the raw socket: one datagram.
  void send_msg(uint32_t seq, uint8_t rx_index, uint16_t name_port, uint64_t value) {
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
    d.h.seq = seq;
    d.h.window = 16;
    d.h.bytes = sizeof value;
    d.h.instance = 0x777;
    d.m.op = uint8_t(rdm_op::msg);
    d.m.rx_index = rx_index;
    d.m.name_port = name_port;
    d.m.len = sizeof value;
    d.payload = value;
    ASSERT_EQ(::sendto(raw, &d, sizeof d, 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
              ssize_t(sizeof d));
  }
  // One completion within `wait`: 1, or -FI_EAGAIN.
  ssize_t read(fi_cq_tagged_entry* e, fi_addr_t* src,
               std::chrono::milliseconds wait = std::chrono::milliseconds(2000)) {
    auto deadline = std::chrono::steady_clock::now() + wait;
    ssize_t n;
    do n = fi_cq_readfrom(cq, e, 1, src);
    while (n == -FI_EAGAIN && std::chrono::steady_clock::now() < deadline);
    return n;
  }

  fi_info* info = nullptr;
  fid_fabric* fab = nullptr;
  fid_domain* dom = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  sockaddr_in to{};
  int raw = -1;
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
    send_msg(0, 3, 0, 111);
    EXPECT_EQ(read(&e, &src, std::chrono::milliseconds(50)), -FI_EAGAIN)
        << "nothing delivered to the wrong context";
  }
  EXPECT_EQ(got, 0u);
  // Well past the keeper's longest hold (util/rd_held_ack.hpp).
  pollfd pf{raw, POLLIN, 0};
  EXPECT_EQ(::poll(&pf, 1, 50), 0) << "the message was acknowledged";
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
  send_msg(0, 0, 9, 222);
  fi_cq_tagged_entry e{};
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(read(&e, &src), 1);
  EXPECT_EQ(got, 222u);
  EXPECT_EQ(src, named_addr) << "known by the port its header names, not its socket's";
}

}  // namespace
}  // namespace weft::udp
