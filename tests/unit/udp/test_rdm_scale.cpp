// SPDX-License-Identifier: MIT
// weft — udp FI_EP_RDM at scale: an endpoint whose AV holds a million peers
// keeps reliability state only for the peers it exchanged datagrams with;
// the others cost their AV entries alone, at most 16 bytes each (issue:
// "a peer in the AV that never exchanged a message costs only its address").
#include "prov/udp/rdm.hpp"
#include "util/av.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <vector>

namespace weft::udp {
namespace {

TEST(udp_rdm_scale, a_million_peers_in_the_av_and_state_only_for_the_one_that_talked) {
  fi_info* hints = fi_allocinfo();
  hints->caps = FI_MSG;
  hints->ep_attr->type = FI_EP_RDM;
  hints->addr_format = FI_SOCKADDR_IN;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->fabric_attr->prov_name = strdup("udp");
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", nullptr, FI_SOURCE, hints, &info), 0);
  fi_freeinfo(hints);
  fid_fabric* fab = nullptr;
  fid_domain* dom = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep *ep = nullptr, *peer = nullptr;
  ASSERT_EQ(fi_fabric(info->fabric_attr, &fab, nullptr), 0);
  ASSERT_EQ(fi_domain(fab, info, &dom, nullptr), 0);
  fi_av_attr aa{};
  aa.type = FI_AV_TABLE;
  ASSERT_EQ(fi_av_open(dom, &aa, &av, nullptr), 0);
  fi_cq_attr ca{};
  ca.format = FI_CQ_FORMAT_CONTEXT;
  ASSERT_EQ(fi_cq_open(dom, &ca, &cq, nullptr), 0);
  for (fid_ep** e : {&ep, &peer}) {
    ASSERT_EQ(fi_endpoint(dom, info, e, nullptr), 0);
    ASSERT_EQ(fi_ep_bind(*e, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_ep_bind(*e, &av->fid, 0), 0);
    ASSERT_EQ(fi_enable(*e), 0);
  }
  // A million peers that never answer (10.0.0.0/8 addresses, never sent
  // to), then the one real peer.
  constexpr uint32_t n = 1000000;
  std::vector<sockaddr_in> far(1000);
  for (uint32_t i = 0; i < n; i += 1000) {
    for (uint32_t j = 0; j < 1000; ++j) {
      far[j] = sockaddr_in{};
      far[j].sin_family = AF_INET;
      far[j].sin_addr.s_addr = htonl(0x0a000000 + (i + j) / 7);
      far[j].sin_port = htons(uint16_t(5000 + (i + j) % 7));
    }
    ASSERT_EQ(fi_av_insert(av, far.data(), 1000, nullptr, 0, nullptr), 1000);
  }
  char name[64];
  size_t len = sizeof name;
  ASSERT_EQ(fi_getname(&peer->fid, name, &len), 0);
  fi_addr_t to_peer = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(fi_av_insert(av, name, 1, &to_peer, 0, nullptr), 1);
  EXPECT_EQ(to_peer, fi_addr_t(n));
  util::av& table = *util::av::from(av);
  const double per_peer = double(table.table().bytes()) / (n + 1);
  EXPECT_LE(per_peer, 16.0) << "AV bytes per peer";

  auto* rdm = rdm_endpoint::from(ep);
  EXPECT_EQ(rdm->peers_with_state(), 0u) << "no datagram yet: no peer state";
  char in[8] = {}, out[8] = "hello";
  fi_context rc, sc;
  ASSERT_EQ(fi_recv(peer, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &rc), 0);
  ASSERT_EQ(fi_send(ep, out, sizeof out, nullptr, to_peer, &sc), 0);
  int got = 0;
  for (int i = 0; i < 2000000 && got < 2; ++i) {
    fi_cq_entry e;
    ssize_t r = fi_cq_read(cq, &e, 1);
    if (r == 1) ++got;
    else ASSERT_EQ(r, -FI_EAGAIN);
  }
  ASSERT_EQ(got, 2);
  EXPECT_STREQ(in, "hello");
  EXPECT_EQ(rdm->peers_with_state(), 1u) << "state for the one peer that talked, no other";

  for (fid* f : {&peer->fid, &ep->fid, &cq->fid, &av->fid, &dom->fid, &fab->fid})
    EXPECT_EQ(fi_close(f), 0);
  fi_freeinfo(info);
}

}  // namespace
}  // namespace weft::udp
