// SPDX-License-Identifier: MIT
// weft — a udp FI_EP_RDM endpoint on loopback and a raw UDP socket that
// plays its peer, writing datagrams by hand (util/rd_proto.hpp,
// prov/udp/rdm_proto.hpp) and reading what the endpoint answers: the
// fixture of the wire-level udp RDM tests.
#pragma once

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

namespace weft::udp::test {

class rdm_raw_peer : public testing::Test {
 protected:
  // The endpoint (caps asked, CQ format, manual progress) and the raw
  // socket; `in_av`: the raw socket's address inserted (raw_addr), so the
  // endpoint can send to it.
  void open(uint64_t caps, fi_cq_format format, bool in_av) {
    fi_info* hints = fi_allocinfo();
    hints->caps = caps;
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
    ca.format = format;
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
    if (!in_av) return;
    socklen_t ml = sizeof me;
    ASSERT_EQ(::getsockname(raw, reinterpret_cast<sockaddr*>(&me), &ml), 0);
    ASSERT_EQ(fi_av_insert(av, &me, 1, &raw_addr, 0, nullptr), 1);
  }
  void TearDown() override {
    if (raw >= 0) ::close(raw);
    for (fid* f : {ep ? &ep->fid : nullptr, cq ? &cq->fid : nullptr, av ? &av->fid : nullptr,
                   dom ? &dom->fid : nullptr, fab ? &fab->fid : nullptr})
      if (f) {
        EXPECT_EQ(fi_close(f), 0);
      }
    fi_freeinfo(info);
  }
  // Message `seq` of the raw peer's fresh link (epoch 0x1234, instance
  // 0x777): one datagram of an 8-byte message, meant for receive context
  // `rx_index`, naming the sender by `name_port` (0: its socket's).
  void send_msg(uint32_t seq, uint64_t value, uint8_t rx_index = 0, uint16_t name_port = 0) {
    struct {
      util::rd::dgram h;
      util::rd::msg m;
      uint64_t payload;
    } d{};
    d.h.magic = util::rd::magic;
    d.h.version = util::rd::version;
    d.h.kind = uint8_t(util::rd::kind::data);
    d.h.flags = util::rd::flag_first | util::rd::flag_last | util::rd::flag_fresh;
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
  // The header of the next datagram to the raw peer within `ms`, or false.
  bool next(util::rd::dgram* h, int ms) {
    pollfd p{raw, POLLIN, 0};
    if (::poll(&p, 1, ms) != 1) return false;
    std::byte buf[2048];
    const ssize_t n = ::recv(raw, buf, sizeof buf, 0);
    if (n < ssize_t(sizeof *h)) return false;
    std::memcpy(h, buf, sizeof *h);
    return true;
  }

  fi_info* info = nullptr;
  fid_fabric* fab = nullptr;
  fid_domain* dom = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  sockaddr_in to{};  // the endpoint's address
  int raw = -1;
  fi_addr_t raw_addr = FI_ADDR_NOTAVAIL;
};

}  // namespace weft::udp::test
