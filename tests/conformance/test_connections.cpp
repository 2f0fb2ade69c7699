// SPDX-License-Identifier: MIT
// weft — conformance: reliable connectionless endpoints (FI_EP_RDM) over
// TCP connections made on demand: peers that cannot be reached, peers that
// never answer, peers that send garbage, and peers that connect to each
// other at the same time. Providers that do not run over TCP/IP skip.
#include "exchange.hpp"
#include "fixture.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

namespace conformance {
namespace {

// A silent peer fails at the connection deadline (FI_TCP_CONN_TIMEOUT, 10 s
// by default): the test that waits for it runs under ctest's
// conformance.tcp_conn_deadline, which sets 2 s. The rest of the suite
// keeps the default. (This binary used to set 2 s for every test, and a
// storm of 256 connections under a sanitizer, on a machine busy with other
// tests, then failed handshakes that were only slow.)
bool deadline_is_short() {
  const char* e = std::getenv("FI_TCP_CONN_TIMEOUT");
  return e && std::atoi(e) > 0 && std::atoi(e) <= 3000;
}

class connections : public provider_test {
  uint64_t extra_caps() const override { return FI_TAGGED; }

 protected:
  void SetUp() override {
    if (GetParam().ep_type != FI_EP_RDM) GTEST_SKIP() << "not a reliable connectionless endpoint";
    provider_test::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (!is_ip_format(info->addr_format) || info->ep_attr->protocol != FI_PROTO_SOCK_TCP)
      GTEST_SKIP() << "these peers are TCP sockets: for providers over TCP/IP";
  }
  // An IPv4 loopback address nothing answers on, or a listener that never
  // accepts (the kernel completes the handshake; nobody speaks).
  sockaddr_in loopback_port(int* keep_listening) {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&sin), sizeof sin), 0);
    socklen_t len = sizeof sin;
    ::getsockname(s, reinterpret_cast<sockaddr*>(&sin), &len);
    if (keep_listening) {
      EXPECT_EQ(::listen(s, 4), 0);
      *keep_listening = s;
    } else {
      ::close(s);
    }
    return sin;
  }
};

TEST_P(connections, unreachable_peer_is_an_error_completion) {
  fid_cq* cq = open_cq(FI_CQ_FORMAT_TAGGED);
  open_av();
  fi_addr_t a;
  fid_ep* ea = open_ep(cq, &a);
  sockaddr_in dead = loopback_port(nullptr);
  fi_addr_t d;
  ASSERT_EQ(fi_av_insert(av, &dead, 1, &d, 0, nullptr), 1);
  fi_context ctx;
  ASSERT_EQ(fi_send(ea, "x", 1, nullptr, d, &ctx), 0);
  traffic t(ea, ea, d, {cq});
  auto start = std::chrono::steady_clock::now();
  auto c = t.wait(&ctx, std::chrono::seconds(10));
  ASSERT_TRUE(c.has_value()) << "no completion: the send hangs";
  ASSERT_TRUE(c->error);
  EXPECT_EQ(c->err.err, FI_ECONNREFUSED);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  // The endpoint still works, and a second attempt fails the same way.
  traffic self(ea, ea, a, {cq});
  exchange(self, 10, false);
  fi_context again;
  ASSERT_EQ(fi_send(ea, "y", 1, nullptr, d, &again), 0);
  c = t.wait(&again, std::chrono::seconds(10));
  ASSERT_TRUE(c && c->error);
}

TEST_P(connections, silent_peer_times_out) {
  if (!deadline_is_short())
    GTEST_SKIP() << "waits for FI_TCP_CONN_TIMEOUT; ctest's conformance.tcp_conn_deadline "
                    "runs this with 2 s";
  fid_cq* cq = open_cq(FI_CQ_FORMAT_TAGGED, FI_WAIT_FD);
  open_av();
  fi_addr_t a;
  fid_ep* ea = open_ep(cq, &a);
  int listener = -1;
  sockaddr_in mute = loopback_port(&listener);
  fi_addr_t m;
  ASSERT_EQ(fi_av_insert(av, &mute, 1, &m, 0, nullptr), 1);
  fi_context ctx;
  ASSERT_EQ(fi_tsend(ea, "x", 1, nullptr, m, 4, &ctx), 0);
  // A blocking read wakes for the deadline: nothing else will happen.
  auto start = std::chrono::steady_clock::now();
  fi_cq_tagged_entry e;
  ssize_t r = fi_cq_sread(cq, &e, 1, nullptr, 10000);
  auto waited = std::chrono::steady_clock::now() - start;
  ::close(listener);
  ASSERT_EQ(r, -FI_EAVAIL);
  fi_cq_err_entry err{};
  ASSERT_EQ(fi_cq_readerr(cq, &err, 0), 1);
  EXPECT_EQ(err.op_context, &ctx);
  EXPECT_EQ(err.err, FI_ETIMEDOUT);
  EXPECT_GE(waited, std::chrono::milliseconds(1500));
  EXPECT_LT(waited, std::chrono::seconds(6));
}

TEST_P(connections, hostile_bytes_close_only_that_connection) {
  fid_cq* cq = open_cq(FI_CQ_FORMAT_TAGGED);
  open_av();
  fi_addr_t a, b;
  fid_ep* ea = open_ep(cq, &a);
  fid_ep* eb = open_ep(cq, &b);
  traffic t(ea, eb, b, {cq});
  exchange(t, 100, true);
  sockaddr_in name{};
  size_t len = sizeof name;
  ASSERT_EQ(fi_getname(&eb->fid, &name, &len), 0);
  const char* junk[] = {
      "GET / HTTP/1.0\r\n\r\n",  // not the protocol at all
      "wt\x01\x10\x00\x00\x10\x00\xff\xff\xff\xff\x00\x00\x00\x00",  // a message before hello
      "wt\x07\x03\x00\x00\x30\x00\x00\x00\x00\x00\x00\x00\x00\x00",  // another version
  };
  for (const char* bytes : junk) {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(::connect(s, reinterpret_cast<sockaddr*>(&name), sizeof name), 0);
    ASSERT_GT(::send(s, bytes, 16, MSG_NOSIGNAL), 0);
    // The endpoint drops the connection (the raw socket sees the end of
    // stream) and serves the good one meanwhile.
    char sink[64];
    ssize_t n = 1;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (n != 0 && std::chrono::steady_clock::now() < deadline) {
      t.poll();
      n = ::recv(s, sink, sizeof sink, MSG_DONTWAIT);
      if (n < 0 && errno == ECONNRESET) n = 0;
    }
    EXPECT_EQ(n, 0) << "the endpoint kept a connection that sent garbage";
    ::close(s);
    exchange(t, 1000, false);
  }
}

TEST_P(connections, simultaneous_connects_deliver_everything) {
  fid_cq* cq = open_cq(FI_CQ_FORMAT_TAGGED);
  open_av();
  fi_addr_t a, b;
  fid_ep* ea = open_ep(cq, &a);
  fid_ep* eb = open_ep(cq, &b);
  traffic t(ea, eb, b, {cq});
  for (int round = 0; round < 3; ++round) {
    char ina[8] = {}, inb[8] = {};
    fi_context ra, rb, sa, sb;
    ASSERT_EQ(fi_recv(ea, ina, sizeof ina, nullptr, FI_ADDR_UNSPEC, &ra), 0);
    ASSERT_EQ(fi_recv(eb, inb, sizeof inb, nullptr, FI_ADDR_UNSPEC, &rb), 0);
    // Both sends before any progress: each side opens a connection.
    ASSERT_EQ(fi_send(ea, "to b", 5, nullptr, b, &sa), 0);
    ASSERT_EQ(fi_send(eb, "to a", 5, nullptr, a, &sb), 0);
    for (void* ctx : {static_cast<void*>(&ra), static_cast<void*>(&rb), static_cast<void*>(&sa),
                      static_cast<void*>(&sb)}) {
      auto c = t.wait(ctx);
      ASSERT_TRUE(c.has_value());
      ASSERT_FALSE(c->error) << fi_strerror(c->err.err);
    }
    EXPECT_STREQ(ina, "to a");
    EXPECT_STREQ(inb, "to b");
  }
}

TEST_P(connections, ipv6_loopback_exchange) {
  fi_info* h6 = fi_dupinfo(hints);
  h6->addr_format = FI_SOCKADDR_IN6;
  fi_info* i6 = nullptr;
  if (fi_getinfo(FI_VERSION(1, 17), "::1", nullptr, FI_SOURCE, h6, &i6) != 0) {
    fi_freeinfo(h6);
    GTEST_SKIP() << "no IPv6 loopback here";
  }
  fid_domain* dom = nullptr;
  ASSERT_EQ(fi_domain(fabric, i6, &dom, nullptr), 0);
  fi_cq_attr cattr{};
  cattr.format = FI_CQ_FORMAT_TAGGED;
  fid_cq* cq = nullptr;
  ASSERT_EQ(fi_cq_open(dom, &cattr, &cq, nullptr), 0);
  fi_av_attr aattr{};
  aattr.type = FI_AV_MAP;
  fid_av* v = nullptr;
  ASSERT_EQ(fi_av_open(dom, &aattr, &v, nullptr), 0);
  fid_ep* ep[2];
  fi_addr_t addr[2];
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(fi_endpoint(dom, i6, &ep[i], nullptr), 0);
    ASSERT_EQ(fi_ep_bind(ep[i], &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_ep_bind(ep[i], &v->fid, 0), 0);
    ASSERT_EQ(fi_enable(ep[i]), 0);
    sockaddr_in6 name{};
    size_t len = sizeof name;
    ASSERT_EQ(fi_getname(&ep[i]->fid, &name, &len), 0);
    EXPECT_EQ(name.sin6_family, AF_INET6);
    ASSERT_EQ(fi_av_insert(v, &name, 1, &addr[i], 0, nullptr), 1);
  }
  {
    traffic t(ep[0], ep[1], addr[1], {cq});
    exchange(t, 100000, true);
    exchange(t, 7, false, true);
  }
  for (fid_ep* e : ep) EXPECT_EQ(fi_close(&e->fid), 0);
  EXPECT_EQ(fi_close(&v->fid), 0);
  EXPECT_EQ(fi_close(&cq->fid), 0);
  EXPECT_EQ(fi_close(&dom->fid), 0);
  fi_freeinfo(i6);
  fi_freeinfo(h6);
}

INSTANTIATE_TEST_SUITE_P(all, connections, testing::ValuesIn(all_configs), config_name);

}  // namespace
}  // namespace conformance
