// SPDX-License-Identifier: MIT
// weft — conformance: a shared receive context (fi_srx_context) under
// connection-oriented endpoints: a passive endpoint accepts three
// connections whose endpoints are all bound to one context. Receives are
// posted once, to the context; each client's message completes on the CQ of
// the endpoint it arrived on; a connection going away (the client's
// fi_shutdown, or the server's) does not cancel the context's receives,
// which stay for the other endpoints.
#include "cm_side.hpp"
#include "provider_param.hpp"

#include <rdma/fi_cm.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

namespace conformance {
namespace {

// fi_rx_size_left is deprecated in the 2.x headers, still the call for a
// receive context's room.
ssize_t rx_left(fid_ep* ep) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  return fi_rx_size_left(ep);
#pragma GCC diagnostic pop
}

class srx_msg : public testing::TestWithParam<config> {
 protected:
  static constexpr int n = 3;

  void SetUp() override { hints = hints_for(GetParam(), FI_MSG); }
  void TearDown() override {
    for (fid_ep*& e : sep) {
      if (e) { EXPECT_EQ(fi_close(&e->fid), 0); }
    }
    if (ctx) { EXPECT_EQ(fi_close(&ctx->fid), 0); }
    for (fid_cq*& c : scq) {
      if (c) { EXPECT_EQ(fi_close(&c->fid), 0); }
    }
    fi_freeinfo(info);
    fi_freeinfo(hints);
  }

  // The server listening, and n clients each connected to an accepted
  // endpoint on a CQ of its own, bound to the context `ctx`.
  void connect_all() {
    int r = fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints, &info);
    ASSERT_EQ(r, 0) << fi_strerror(-r);
    ASSERT_EQ(server.open(info), 0);
    ASSERT_EQ(server.listen(info), 0);
    fi_rx_attr ra{};
    ASSERT_EQ(fi_srx_context(server.dom, &ra, &ctx, nullptr), 0);
    sockaddr_storage at{};
    size_t len = sizeof at;
    ASSERT_EQ(fi_getname(&server.pep->fid, &at, &len), 0);
    ASSERT_EQ(client.open(info), 0);
    for (int i = 0; i < n; ++i) {
      SCOPED_TRACE(i);
      ASSERT_EQ(client.endpoint(info, &cep[i]), 0);
      ASSERT_EQ(fi_connect(cep[i], &at, nullptr, 0), 0);
      std::thread t([&] {
        event e = wait_event(client.eq);
        EXPECT_EQ(e.type, static_cast<uint32_t>(FI_CONNECTED)) << e.rc;
      });
      event req = wait_event(server.eq);
      EXPECT_EQ(req.type, static_cast<uint32_t>(FI_CONNREQ)) << req.rc;
      if (req.type == FI_CONNREQ) {
        fi_cq_attr ca{};
        ca.format = FI_CQ_FORMAT_MSG;
        EXPECT_EQ(fi_cq_open(server.dom, &ca, &scq[i], nullptr), 0);
        EXPECT_EQ(fi_endpoint(server.dom, req.info, &sep[i], nullptr), 0);
        fi_freeinfo(req.info);
        EXPECT_EQ(fi_ep_bind(sep[i], &server.eq->fid, 0), 0);
        EXPECT_EQ(fi_ep_bind(sep[i], &scq[i]->fid, FI_TRANSMIT | FI_RECV), 0);
        EXPECT_EQ(fi_ep_bind(sep[i], &ctx->fid, 0), 0);
        EXPECT_EQ(fi_enable(sep[i]), 0);
        EXPECT_EQ(fi_accept(sep[i], nullptr, 0), 0);
        event up = wait_event(server.eq);
        EXPECT_EQ(up.type, static_cast<uint32_t>(FI_CONNECTED)) << up.rc;
      }
      t.join();
      ASSERT_FALSE(HasFailure());
    }
  }

  // Client i sends `text`; its send completes.
  void send_from(int i, const char* text) {
    ASSERT_EQ(fi_send(cep[i], text, std::strlen(text) + 1, nullptr, 0, &sctx), 0);
    fi_cq_entry e{};
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    ssize_t r;
    while ((r = fi_cq_read(client.cq, &e, 1)) == -FI_EAGAIN &&
           std::chrono::steady_clock::now() < until) {
    }
    ASSERT_EQ(r, 1);
  }

  // One entry of CQ `cq` within 5 s: 1, or what the read answered.
  static ssize_t read_one(fid_cq* cq, fi_cq_msg_entry* e) {
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    ssize_t r;
    while ((r = fi_cq_read(cq, e, 1)) == -FI_EAGAIN && std::chrono::steady_clock::now() < until) {
    }
    return r;
  }

  // Nothing on server CQ i after a few reads (each one progress).
  void expect_quiet(int i) {
    fi_cq_msg_entry e{};
    for (int k = 0; k < 50; ++k) ASSERT_EQ(fi_cq_read(scq[i], &e, 1), -FI_EAGAIN) << "CQ " << i;
  }

  fi_info* hints = nullptr;
  fi_info* info = nullptr;
  objs server, client;  // closed after the members above (declared first)
  fid_ep* ctx = nullptr;
  fid_ep* sep[n] = {};
  fid_ep* cep[n] = {};  // held by client.eps
  fid_cq* scq[n] = {};
  fi_context sctx;
};

TEST_P(srx_msg, accepted_endpoints_share_one_context) {
  connect_all();
  ASSERT_FALSE(HasFailure());
  constexpr int posted = 6;
  char buf[posted][16] = {};
  fi_context rctx[posted];
  for (int k = 0; k < posted; ++k)
    ASSERT_EQ(fi_recv(ctx, buf[k], sizeof buf[k], nullptr, FI_ADDR_UNSPEC, &rctx[k]), 0);
  EXPECT_EQ(rx_left(ctx), static_cast<ssize_t>(1024 - posted));
  // The accepted endpoints have no receive queue of their own.
  char own[4];
  EXPECT_EQ(fi_recv(sep[0], own, sizeof own, nullptr, 0, &rctx[0]), -FI_ENOSYS);

  // Each client's message takes the oldest posted receive and completes on
  // the CQ of the endpoint it came to.
  const char* texts[n] = {"zero", "one!", "two.."};
  for (int i = 0; i < n; ++i) {
    SCOPED_TRACE(i);
    send_from(i, texts[i]);
    fi_cq_msg_entry e{};
    ASSERT_EQ(read_one(scq[i], &e), 1);
    EXPECT_EQ(e.op_context, &rctx[i]);
    EXPECT_EQ(e.len, std::strlen(texts[i]) + 1);
    EXPECT_EQ(e.flags, uint64_t{FI_RECV | FI_MSG});
    EXPECT_STREQ(buf[i], texts[i]);
  }
  for (int i = 0; i < n; ++i) expect_quiet(i);

  // Client 0 goes away: its endpoint sees FI_SHUTDOWN, and the context's
  // three receives left are not cancelled (no error on any CQ).
  ASSERT_EQ(fi_shutdown(cep[0], 0), 0);
  event down = wait_event(server.eq);
  EXPECT_EQ(down.type, static_cast<uint32_t>(FI_SHUTDOWN)) << down.rc;
  EXPECT_EQ(down.fid, &sep[0]->fid);
  for (int i = 0; i < n; ++i) expect_quiet(i);
  EXPECT_EQ(rx_left(ctx), static_cast<ssize_t>(1024 - posted + n));

  // The server shuts its side of connection 2 down: still nothing cancelled.
  ASSERT_EQ(fi_shutdown(sep[2], 0), 0);
  for (int i = 0; i < n; ++i) expect_quiet(i);

  // Client 1 still finds the context's receives, in order.
  for (int k = n; k < posted; ++k) {
    SCOPED_TRACE(k);
    send_from(1, "again");
    fi_cq_msg_entry e{};
    ASSERT_EQ(read_one(scq[1], &e), 1);
    EXPECT_EQ(e.op_context, &rctx[k]);
    EXPECT_STREQ(buf[k], "again");
  }
  EXPECT_EQ(rx_left(ctx), static_cast<ssize_t>(1024));
  // A receive cancelled on the context completes on the first bound
  // endpoint's receive CQ, wherever the connections went.
  char late[8];
  fi_context lctx;
  ASSERT_EQ(fi_recv(ctx, late, sizeof late, nullptr, FI_ADDR_UNSPEC, &lctx), 0);
  ASSERT_EQ(fi_cancel(&ctx->fid, &lctx), 0);
  fi_cq_msg_entry e{};
  ASSERT_EQ(fi_cq_read(scq[0], &e, 1), -FI_EAVAIL);
  fi_cq_err_entry err{};
  ASSERT_EQ(fi_cq_readerr(scq[0], &err, 0), 1);
  EXPECT_EQ(err.op_context, &lctx);
  EXPECT_EQ(err.err, FI_ECANCELED);
}

// An endpoint with a receive context of its own still loses its posted
// receives with its connection (fi_msg(3): FI_ECANCELED), unlike the bound
// ones above.
TEST_P(srx_msg, an_endpoint_of_its_own_cancels_its_receives_at_shutdown) {
  int r = fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints, &info);
  ASSERT_EQ(r, 0) << fi_strerror(-r);
  ASSERT_EQ(server.open(info), 0);
  ASSERT_EQ(server.listen(info), 0);
  sockaddr_storage at{};
  size_t len = sizeof at;
  ASSERT_EQ(fi_getname(&server.pep->fid, &at, &len), 0);
  ASSERT_EQ(client.open(info), 0);
  ASSERT_EQ(client.endpoint(info, &cep[0]), 0);
  ASSERT_EQ(fi_connect(cep[0], &at, nullptr, 0), 0);
  std::thread t([&] {
    event e = wait_event(client.eq);
    EXPECT_EQ(e.type, static_cast<uint32_t>(FI_CONNECTED)) << e.rc;
  });
  event req = wait_event(server.eq);
  ASSERT_EQ(req.type, static_cast<uint32_t>(FI_CONNREQ)) << req.rc;
  fi_cq_attr ca{};
  ca.format = FI_CQ_FORMAT_MSG;
  ASSERT_EQ(fi_cq_open(server.dom, &ca, &scq[0], nullptr), 0);
  ASSERT_EQ(fi_endpoint(server.dom, req.info, &sep[0], nullptr), 0);
  fi_freeinfo(req.info);
  ASSERT_EQ(fi_ep_bind(sep[0], &server.eq->fid, 0), 0);
  ASSERT_EQ(fi_ep_bind(sep[0], &scq[0]->fid, FI_TRANSMIT | FI_RECV), 0);
  ASSERT_EQ(fi_enable(sep[0]), 0);
  ASSERT_EQ(fi_accept(sep[0], nullptr, 0), 0);
  event up = wait_event(server.eq);
  EXPECT_EQ(up.type, static_cast<uint32_t>(FI_CONNECTED)) << up.rc;
  t.join();
  char buf[8];
  fi_context rc;
  ASSERT_EQ(fi_recv(sep[0], buf, sizeof buf, nullptr, 0, &rc), 0);
  ASSERT_EQ(fi_shutdown(cep[0], 0), 0);
  event down = wait_event(server.eq);
  EXPECT_EQ(down.type, static_cast<uint32_t>(FI_SHUTDOWN)) << down.rc;
  fi_cq_msg_entry e{};
  ASSERT_EQ(read_one(scq[0], &e), -FI_EAVAIL);
  fi_cq_err_entry err{};
  ASSERT_EQ(fi_cq_readerr(scq[0], &err, 0), 1);
  EXPECT_EQ(err.op_context, &rc);
  EXPECT_EQ(err.err, FI_ECANCELED);
}

// fi_srx_context with FI_PEER (a context another provider owns) is
// offered by tcp for RDM endpoints only: not on a domain opened for MSG.
TEST_P(srx_msg, a_peer_context_is_enosys) {
  int r = fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints, &info);
  ASSERT_EQ(r, 0) << fi_strerror(-r);
  ASSERT_EQ(server.open(info), 0);
  fi_rx_attr ra{};
  ra.op_flags = FI_PEER;
  fid_ep* s = nullptr;
  EXPECT_EQ(fi_srx_context(server.dom, &ra, &s, nullptr), -FI_ENOSYS);
  EXPECT_EQ(s, nullptr);
}

INSTANTIATE_TEST_SUITE_P(tcp, srx_msg, testing::ValuesIn(msg_configs), config_name);

}  // namespace
}  // namespace conformance
