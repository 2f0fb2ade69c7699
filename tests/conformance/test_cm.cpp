// SPDX-License-Identifier: MIT
// weft — conformance: connection-oriented endpoints (FI_EP_MSG). A passive
// endpoint and a client endpoint in one process, each side in a domain and
// with an EQ and a CQ of its own (so a thread may block on one side while
// another drives the other, under every threading model).
#include "exchange.hpp"

#include <rdma/fi_cm.h>
#include <rdma/fi_rma.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace conformance {
namespace {

class cm : public testing::TestWithParam<config> {
 protected:
  struct side {
    fid_domain* dom = nullptr;
    fid_eq* eq = nullptr;
    fid_cq* cq = nullptr;
    fid_ep* ep = nullptr;
  };

  void SetUp() override {
    hints = hints_for(GetParam(), FI_MSG | FI_TAGGED | FI_RMA);
    hints->addr_format = FI_SOCKADDR_IN;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", nullptr, FI_SOURCE, hints, &info), 0);
    ASSERT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
    for (side* s : {&client, &server}) {
      ASSERT_EQ(fi_domain(fabric, info, &s->dom, nullptr), 0);
      fi_eq_attr eattr{};
      eattr.wait_obj = FI_WAIT_UNSPEC;
      ASSERT_EQ(fi_eq_open(fabric, &eattr, &s->eq, nullptr), 0);
      fi_cq_attr cattr{};
      cattr.format = FI_CQ_FORMAT_TAGGED;
      cattr.wait_obj = FI_WAIT_FD;
      ASSERT_EQ(fi_cq_open(s->dom, &cattr, &s->cq, nullptr), 0);
    }
    ASSERT_EQ(fi_passive_ep(fabric, info, &pep, nullptr), 0);
    ASSERT_EQ(fi_pep_bind(pep, &server.eq->fid, 0), 0);
    ASSERT_EQ(fi_listen(pep), 0);
    size_t len = 0;
    ASSERT_EQ(fi_getname(&pep->fid, nullptr, &len), -FI_ETOOSMALL);
    ASSERT_EQ(len, sizeof(sockaddr_in));
    ASSERT_EQ(fi_getname(&pep->fid, &server_addr, &len), 0);
    ASSERT_NE(server_addr.sin_port, 0);
  }
  void TearDown() override {
    for (side* s : {&client, &server})
      if (s->ep) {
        EXPECT_EQ(fi_close(&s->ep->fid), 0);
      }
    if (pep) {
      EXPECT_EQ(fi_close(&pep->fid), 0);
    }
    for (side* s : {&client, &server}) {
      if (s->cq) {
        EXPECT_EQ(fi_close(&s->cq->fid), 0);
      }
      if (s->eq) {
        EXPECT_EQ(fi_close(&s->eq->fid), 0);
      }
      if (s->dom) {
        EXPECT_EQ(fi_close(&s->dom->fid), 0);
      }
    }
    if (fabric) {
      EXPECT_EQ(fi_close(&fabric->fid), 0);
    }
    fi_freeinfo(info);
    fi_freeinfo(hints);
  }

  // Drives a side's progress without consuming anything.
  void poke(side& s) {
    uint32_t ev;
    alignas(fi_eq_cm_entry) char buf[512];
    fi_eq_read(s.eq, &ev, buf, sizeof buf, FI_PEEK);
    if (s.ep) fi_cq_read(s.cq, nullptr, 0);
  }
  // The next event of `s`'s EQ (the other side progresses meanwhile):
  // the bytes read, or -FI_EAVAIL / -FI_EAGAIN after a few seconds.
  ssize_t next_event(side& s, uint32_t* event, void* buf, size_t len) {
    side& other = &s == &client ? server : client;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
      ssize_t r = fi_eq_read(s.eq, event, buf, len, 0);
      if (r != -FI_EAGAIN || std::chrono::steady_clock::now() > deadline) return r;
      poke(other);
    }
  }
  fid_ep* open_ep(side& s, fi_info* i) {
    EXPECT_EQ(fi_endpoint(s.dom, i, &s.ep, nullptr), 0);
    EXPECT_EQ(fi_ep_bind(s.ep, &s.eq->fid, 0), 0);
    EXPECT_EQ(fi_ep_bind(s.ep, &s.cq->fid, FI_TRANSMIT | FI_RECV), 0);
    EXPECT_EQ(fi_enable(s.ep), 0);
    return s.ep;
  }
  // The client asks (with private data); the server's FI_CONNREQ event
  // comes back with its data and info (the caller owns it).
  fi_info* request(const std::string& data, std::string* got) {
    open_ep(client, info);
    EXPECT_EQ(fi_connect(client.ep, &server_addr, data.data(), data.size()), 0);
    uint32_t event = 0;
    alignas(fi_eq_cm_entry) char buf[sizeof(fi_eq_cm_entry) + 512];
    ssize_t r = next_event(server, &event, buf, sizeof buf);
    EXPECT_GE(r, static_cast<ssize_t>(sizeof(fi_eq_cm_entry)));
    EXPECT_EQ(event, static_cast<uint32_t>(FI_CONNREQ));
    if (r < static_cast<ssize_t>(sizeof(fi_eq_cm_entry))) return nullptr;
    auto* e = reinterpret_cast<fi_eq_cm_entry*>(buf);
    EXPECT_EQ(e->fid, &pep->fid);
    if (got) got->assign(buf + sizeof(fi_eq_cm_entry), r - sizeof(fi_eq_cm_entry));
    return e->info;
  }
  // A connected pair; returns the private data each side saw.
  void connect(std::string creq = "", std::string sresp = "", std::string* got_req = nullptr,
               std::string* got_resp = nullptr) {
    fi_info* ci = request(creq, got_req);
    ASSERT_NE(ci, nullptr);
    ASSERT_NE(ci->handle, nullptr);
    EXPECT_EQ(ci->ep_attr->type, FI_EP_MSG);
    open_ep(server, ci);
    fi_freeinfo(ci);
    ASSERT_EQ(fi_accept(server.ep, sresp.data(), sresp.size()), 0);
    uint32_t event = 0;
    alignas(fi_eq_cm_entry) char buf[sizeof(fi_eq_cm_entry) + 512];
    ssize_t r = next_event(client, &event, buf, sizeof buf);
    ASSERT_GE(r, static_cast<ssize_t>(sizeof(fi_eq_cm_entry))) << fi_strerror(int(-r));
    EXPECT_EQ(event, static_cast<uint32_t>(FI_CONNECTED));
    EXPECT_EQ(reinterpret_cast<fi_eq_cm_entry*>(buf)->fid, &client.ep->fid);
    if (got_resp) got_resp->assign(buf + sizeof(fi_eq_cm_entry), r - sizeof(fi_eq_cm_entry));
    r = next_event(server, &event, buf, sizeof buf);
    ASSERT_GE(r, static_cast<ssize_t>(sizeof(fi_eq_cm_entry)));
    EXPECT_EQ(event, static_cast<uint32_t>(FI_CONNECTED));
    EXPECT_EQ(reinterpret_cast<fi_eq_cm_entry*>(buf)->fid, &server.ep->fid);
  }
  traffic client_to_server() { return traffic(client.ep, server.ep, 0, {client.cq, server.cq}); }
  traffic server_to_client() { return traffic(server.ep, client.ep, 0, {server.cq, client.cq}); }

  // A thread blocked in fi_cq_sread on `s` while `act` runs here: the read
  // must return FI_ECANCELED for `rctx` promptly.
  void blocked_reader_sees_cancel(side& s, fi_context* rctx, const std::function<void()>& act) {
    ssize_t got = 0;
    std::chrono::steady_clock::duration waited{};
    std::thread reader([&] {
      fi_cq_tagged_entry e;
      auto start = std::chrono::steady_clock::now();
      got = fi_cq_sread(s.cq, &e, 1, nullptr, 10000);
      waited = std::chrono::steady_clock::now() - start;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    act();
    reader.join();
    ASSERT_EQ(got, -FI_EAVAIL);
    EXPECT_LT(waited, std::chrono::seconds(3));
    fi_cq_err_entry err{};
    ASSERT_EQ(fi_cq_readerr(s.cq, &err, 0), 1);
    EXPECT_EQ(err.err, FI_ECANCELED);
    EXPECT_EQ(err.op_context, rctx);
  }
  // The next event of `s` is FI_SHUTDOWN for its endpoint.
  void expect_shutdown(side& s) {
    uint32_t event = 0;
    fi_eq_cm_entry e{};
    ASSERT_EQ(next_event(s, &event, &e, sizeof e), static_cast<ssize_t>(sizeof e));
    EXPECT_EQ(event, static_cast<uint32_t>(FI_SHUTDOWN));
    EXPECT_EQ(e.fid, &s.ep->fid);
  }

  fi_info* hints = nullptr;
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_pep* pep = nullptr;
  side client, server;
  sockaddr_in server_addr{};
};

TEST_P(cm, connect_and_accept_with_private_data) {
  std::string req, resp;
  connect(std::string("client hello\0", 13), std::string("server welcome\0", 15), &req, &resp);
  EXPECT_EQ(req, std::string("client hello\0", 13));
  EXPECT_EQ(resp, std::string("server welcome\0", 15));
  sockaddr_in peer{};
  size_t len = sizeof peer;
  ASSERT_EQ(fi_getpeer(client.ep, &peer, &len), 0);
  EXPECT_EQ(peer.sin_port, server_addr.sin_port);
  size_t cm_size = 0;
  len = sizeof cm_size;
  ASSERT_EQ(fi_getopt(&pep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &cm_size, &len), 0);
  EXPECT_GE(cm_size, 15u);
  len = sizeof cm_size;
  ASSERT_EQ(fi_getopt(&client.ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &cm_size, &len), 0);
  EXPECT_EQ(fi_connect(client.ep, &server_addr, nullptr, 0), -FI_EISCONN);
  traffic up = client_to_server(), down = server_to_client();
  exchange(up, 12, false);
  exchange(down, 12, true);
}

TEST_P(cm, reject_with_private_data) {
  fi_info* ci = request("let me in", nullptr);
  ASSERT_NE(ci, nullptr);
  ASSERT_EQ(fi_reject(pep, ci->handle, "not today", 10), 0);
  fi_freeinfo(ci);
  uint32_t event = 0;
  fi_eq_cm_entry e{};
  ASSERT_EQ(next_event(client, &event, &e, sizeof e), -FI_EAVAIL);
  fi_eq_err_entry err{};
  ASSERT_EQ(fi_eq_readerr(client.eq, &err, 0), static_cast<ssize_t>(sizeof err));
  EXPECT_EQ(err.err, FI_ECONNREFUSED);
  EXPECT_EQ(err.fid, &client.ep->fid);
  ASSERT_EQ(err.err_data_size, 10u);
  EXPECT_STREQ(static_cast<const char*>(err.err_data), "not today");
  // The refused endpoint does not carry data.
  EXPECT_NE(fi_send(client.ep, "x", 1, nullptr, 0, nullptr), 0);
}

TEST_P(cm, shutdown_by_the_client_cancels_the_server_receive) {
  connect();
  char buf[16];
  fi_context rctx;
  ASSERT_EQ(fi_recv(server.ep, buf, sizeof buf, nullptr, 0, &rctx), 0);
  blocked_reader_sees_cancel(server, &rctx, [&] { EXPECT_EQ(fi_shutdown(client.ep, 0), 0); });
  expect_shutdown(server);
  EXPECT_EQ(fi_send(server.ep, "x", 1, nullptr, 0, nullptr), -FI_ENOTCONN);
}

TEST_P(cm, shutdown_by_the_server_cancels_the_client_receive) {
  connect();
  char buf[16];
  fi_context rctx;
  ASSERT_EQ(fi_trecv(client.ep, buf, sizeof buf, nullptr, 0, 1, 0, &rctx), 0);
  blocked_reader_sees_cancel(client, &rctx, [&] { EXPECT_EQ(fi_shutdown(server.ep, 0), 0); });
  expect_shutdown(client);
}

TEST_P(cm, closing_the_peer_is_a_shutdown) {
  connect();
  char buf[16];
  fi_context rctx;
  ASSERT_EQ(fi_recv(client.ep, buf, sizeof buf, nullptr, 0, &rctx), 0);
  blocked_reader_sees_cancel(client, &rctx, [&] {
    EXPECT_EQ(fi_close(&server.ep->fid), 0);
    server.ep = nullptr;
  });
  expect_shutdown(client);
}

TEST_P(cm, local_shutdown_wakes_a_blocked_reader) {
  if (GetParam().threading != FI_THREAD_SAFE)
    GTEST_SKIP() << "a thread blocked on the endpoint's CQ while another shuts the endpoint "
                    "down share a domain: FI_THREAD_SAFE only";
  connect();
  char buf[16];
  fi_context rctx;
  ASSERT_EQ(fi_recv(client.ep, buf, sizeof buf, nullptr, 0, &rctx), 0);
  blocked_reader_sees_cancel(client, &rctx, [&] { EXPECT_EQ(fi_shutdown(client.ep, 0), 0); });
}

TEST_P(cm, msg_and_tagged_from_zero_to_four_mib) {
  connect();
  traffic up = client_to_server(), down = server_to_client();
  for (size_t size : {size_t{0}, size_t{1}, size_t{100}, size_t{4096}, size_t{70001},
                      size_t{1} << 20, size_t{4} << 20})
    for (bool tag : {false, true}) {
      exchange(up, size, tag);
      exchange(down, size, tag, true);
    }
}

TEST_P(cm, peek_claim_discard) {
  connect();
  traffic up = client_to_server();
  peek_claim_discard(up);
}

TEST_P(cm, remote_cq_data) {
  connect();
  traffic up = client_to_server();
  remote_cq_data(up);
}

// A remote write with data on a connected endpoint: the target's completion
// carries the data and the write's length (fi_cq(3)), as on RDM endpoints.
TEST_P(cm, writedata_reports_data_and_length_at_the_target) {
  connect();
  traffic up = client_to_server();
  for (size_t len : {size_t{5}, size_t{70000}}) {
    SCOPED_TRACE(testing::Message() << len << " bytes");
    std::vector<char> target(len, 0), msg(len);
    for (size_t i = 0; i < len; ++i) msg[i] = static_cast<char>(i * 13 + 1);
    fid_mr* mr = nullptr;
    ASSERT_EQ(fi_mr_reg(server.dom, target.data(), len, FI_REMOTE_WRITE, 0, 0, 0, &mr, nullptr),
              0);
    const uint64_t base = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR)
                              ? reinterpret_cast<uint64_t>(target.data())
                              : 0;
    fi_context ctx;
    ASSERT_EQ(fi_writedata(client.ep, msg.data(), len, nullptr, 0x5150 + len, 0, base,
                           fi_mr_key(mr), &ctx),
              0);
    ASSERT_TRUE(up.wait(&ctx).has_value());
    std::optional<completion> got;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!got && std::chrono::steady_clock::now() < deadline) {
      up.poll();
      for (size_t i = 0; i < up.seen.size(); ++i)
        if (!up.seen[i].error && (up.seen[i].e.flags & FI_REMOTE_CQ_DATA)) {
          got = up.seen[i];
          up.seen.erase(up.seen.begin() + static_cast<long>(i));
          break;
        }
    }
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->e.flags, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
    EXPECT_EQ(got->e.data, 0x5150 + len);
    EXPECT_EQ(got->e.len, len);
    EXPECT_EQ(target, msg);
    EXPECT_EQ(fi_close(&mr->fid), 0);
  }
}

// FI_FENCE is refused on a connected endpoint too (test_fence.cpp has the
// connectionless ones): nothing moves, and the connection still carries data.
TEST_P(cm, fenced_transfers_are_refused) {
  connect();
  traffic up = client_to_server();
  char in[8] = {}, target[8] = {}, out[8] = "fenced";
  fi_context rctx, sctx;
  ASSERT_EQ(fi_recv(server.ep, in, sizeof in, nullptr, 0, &rctx), 0);
  iovec iov{out, 7};
  fi_msg m{&iov, nullptr, 1, 0, &sctx, 0};
  EXPECT_EQ(fi_sendmsg(client.ep, &m, FI_FENCE), -FI_EINVAL);
  fi_msg_tagged tm{&iov, nullptr, 1, 0, 3, 0, &sctx, 0};
  EXPECT_EQ(fi_tsendmsg(client.ep, &tm, FI_FENCE), -FI_EINVAL);
  fid_mr* mr = nullptr;
  ASSERT_EQ(fi_mr_reg(server.dom, target, sizeof target, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 0,
                      0, &mr, nullptr),
            0);
  const uint64_t base =
      (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? reinterpret_cast<uint64_t>(target) : 0;
  fi_rma_iov riov{base, 7, fi_mr_key(mr)};
  fi_msg_rma rm{&iov, nullptr, 1, 0, &riov, 1, &sctx, 0};
  EXPECT_EQ(fi_writemsg(client.ep, &rm, FI_FENCE), -FI_EINVAL);
  EXPECT_EQ(fi_readmsg(client.ep, &rm, FI_FENCE), -FI_EINVAL);
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < until) up.poll();
  EXPECT_TRUE(up.seen.empty());
  EXPECT_EQ(in[0], 0);
  EXPECT_EQ(target[0], 0);
  ASSERT_EQ(fi_sendmsg(client.ep, &m, 0), 0);
  EXPECT_TRUE(up.wait(&rctx).has_value());
  EXPECT_STREQ(in, "fenced");
  EXPECT_EQ(fi_close(&mr->fid), 0);
}

TEST_P(cm, data_before_connecting_is_refused) {
  open_ep(client, info);
  EXPECT_EQ(fi_send(client.ep, "x", 1, nullptr, 0, nullptr), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_accept(client.ep, nullptr, 0), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_shutdown(client.ep, 1), -FI_EBADFLAGS);
  EXPECT_EQ(fi_reject(pep, &client.ep->fid, nullptr, 0), -FI_EINVAL);
}

// tcp's same-host stream (docs/decisions.md): a connection between two
// endpoints of this host moves to shared memory after the handshake, under
// manual progress; the file it lives in is a memfd named weft-tcp-local.
bool maps_a_local_stream() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("memfd:weft-tcp-local") != std::string::npos) return true;
  return false;
}

TEST_P(cm, a_same_host_connection_moves_to_shared_memory) {
  connect();
  traffic up = client_to_server(), down = server_to_client();
  exchange(up, 100, false);
  exchange(down, 70001, true);
  const char* env = std::getenv("FI_TCP_LOCAL_STREAM");  // "0": kept on the socket
  bool allowed = !env || std::string(env) != "0";
  EXPECT_EQ(maps_a_local_stream(), allowed && GetParam().progress == FI_PROGRESS_MANUAL);
}

// Both ends asleep in fi_cq_sread while 4 MiB go through a pipe far smaller:
// the sender waits for room and the receiver for data, each woken by the
// other (a lost wake-up leaves one asleep until the 10 s timeout).
TEST_P(cm, sleeping_sender_and_receiver_move_four_mib) {
  connect();
  const size_t size = size_t{4} << 20;
  std::vector<char> out(size), in(size, 0);
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<char>(i * 7 + (i >> 12));
  fi_context rctx, sctx;
  ASSERT_EQ(fi_recv(server.ep, in.data(), size, nullptr, 0, &rctx), 0);
  auto start = std::chrono::steady_clock::now();
  ssize_t sent = 0;
  fi_cq_tagged_entry se{};
  std::thread sender([&] {
    ssize_t r;
    while ((r = fi_send(client.ep, out.data(), size, nullptr, 0, &sctx)) == -FI_EAGAIN)
      fi_cq_read(client.cq, nullptr, 0);
    if (r != 0) {
      sent = r;
      return;
    }
    sent = fi_cq_sread(client.cq, &se, 1, nullptr, 10000);
  });
  fi_cq_tagged_entry re{};
  ssize_t got = fi_cq_sread(server.cq, &re, 1, nullptr, 10000);
  sender.join();
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(got, 1) << fi_strerror(int(-got));
  ASSERT_EQ(sent, 1) << fi_strerror(int(-sent));
  EXPECT_EQ(re.op_context, &rctx);
  EXPECT_EQ(re.len, size);
  EXPECT_EQ(se.op_context, &sctx);
  EXPECT_TRUE(in == out);
  EXPECT_LT(took, std::chrono::seconds(5));
}

// A receiver asleep in fi_cq_sread is woken by a message promptly.
TEST_P(cm, a_message_wakes_a_sleeping_receiver) {
  connect();
  char in[8] = {};
  fi_context rctx;
  ASSERT_EQ(fi_recv(server.ep, in, sizeof in, nullptr, 0, &rctx), 0);
  std::chrono::steady_clock::time_point woke;  // read after the join
  ssize_t got = 0;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    fi_cq_tagged_entry e;
    got = fi_cq_sread(server.cq, &e, 1, nullptr, 10000);
    woke = std::chrono::steady_clock::now();
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto sent_at = std::chrono::steady_clock::now();
  ssize_t r;
  while ((r = fi_inject(client.ep, "wake up", 8, 0)) == -FI_EAGAIN) fi_cq_read(client.cq, nullptr, 0);
  EXPECT_EQ(r, 0);  // (on failure the reader times out; the thread is joined either way)
  // Manual progress: the client's progress writes what it gathered.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done && std::chrono::steady_clock::now() < until) {
    fi_cq_read(client.cq, nullptr, 0);
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  reader.join();
  ASSERT_EQ(got, 1);
  EXPECT_STREQ(in, "wake up");
  EXPECT_LT(woke - sent_at, std::chrono::milliseconds(500));
}

// A thread asleep on the client's CQ from before the connection is
// established (it runs the client's progress itself, cm_resp included):
// after the move to the stream it must still be woken by what the server
// sends.
TEST_P(cm, a_receiver_asleep_across_the_connection_setup_is_woken) {
  open_ep(client, info);
  char in[8] = {};
  fi_context rctx;
  ASSERT_EQ(fi_recv(client.ep, in, sizeof in, nullptr, 0, &rctx), 0);
  ASSERT_EQ(fi_connect(client.ep, &server_addr, nullptr, 0), 0);
  ssize_t got = 0;
  std::chrono::steady_clock::time_point woke;  // read after the join
  std::thread reader([&] {
    fi_cq_tagged_entry e;
    got = fi_cq_sread(client.cq, &e, 1, nullptr, 10000);
    woke = std::chrono::steady_clock::now();
  });
  // The server side only: its EQ and CQ (reading the client's would run
  // the client's progress here).
  uint32_t event = 0;
  alignas(fi_eq_cm_entry) char buf[sizeof(fi_eq_cm_entry) + 512];
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto sent_at = until;
  ssize_t r;
  while ((r = fi_eq_read(server.eq, &event, buf, sizeof buf, 0)) == -FI_EAGAIN &&
         std::chrono::steady_clock::now() < until) {
  }
  EXPECT_EQ(event, static_cast<uint32_t>(FI_CONNREQ));
  if (r >= static_cast<ssize_t>(sizeof(fi_eq_cm_entry)) && event == FI_CONNREQ) {
    fi_info* ci = reinterpret_cast<fi_eq_cm_entry*>(buf)->info;
    open_ep(server, ci);
    fi_freeinfo(ci);
    EXPECT_EQ(fi_accept(server.ep, nullptr, 0), 0);
    // The client's sleeper reads cm_resp and goes back to sleep.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    sent_at = std::chrono::steady_clock::now();
    while ((r = fi_inject(server.ep, "welcome", 8, 0)) == -FI_EAGAIN) fi_cq_read(server.cq, nullptr, 0);
    EXPECT_EQ(r, 0);
    for (int i = 0; i < 100; ++i) fi_cq_read(server.cq, nullptr, 0);
  }
  reader.join();
  ASSERT_EQ(got, 1);
  EXPECT_STREQ(in, "welcome");
  // Woken by the message, not by a timer of the connection's setup (whose
  // deadline, FI_TCP_CONN_TIMEOUT, would wake it later).
  EXPECT_LT(woke - sent_at, std::chrono::milliseconds(1000));
}

// The sender's end arrives while the receiver's CQ is full and messages
// wait in the stream: every message is still delivered, then FI_SHUTDOWN.
TEST_P(cm, messages_before_a_shutdown_arrive_through_a_full_cq) {
  ASSERT_EQ(fi_close(&server.cq->fid), 0);
  fi_cq_attr cattr{};
  cattr.format = FI_CQ_FORMAT_TAGGED;
  cattr.wait_obj = FI_WAIT_FD;
  cattr.size = 2;
  ASSERT_EQ(fi_cq_open(server.dom, &cattr, &server.cq, nullptr), 0);
  connect();
  // More messages than progress calls between two looks at the socket
  // (tcp: 16), so its end is seen while most still wait in the stream.
  constexpr int n = 64;
  char in[n][8] = {};
  fi_context rctx[n];
  for (int i = 0; i < n; ++i) ASSERT_EQ(fi_recv(server.ep, in[i], 8, nullptr, 0, &rctx[i]), 0);
  for (int i = 0; i < n; ++i) {
    char msg[8] = {'m', static_cast<char>(i)};
    ssize_t r;
    while ((r = fi_inject(client.ep, msg, sizeof msg, 0)) == -FI_EAGAIN) fi_cq_read(client.cq, nullptr, 0);
    ASSERT_EQ(r, 0);
  }
  for (int i = 0; i < 10; ++i) fi_cq_read(client.cq, nullptr, 0);  // written out
  ASSERT_EQ(fi_shutdown(client.ep, 0), 0);
  int done = 0;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (done < n && std::chrono::steady_clock::now() < until) {
    fi_cq_tagged_entry e;
    ssize_t r = fi_cq_read(server.cq, &e, 1);
    if (r == -FI_EAGAIN) continue;
    ASSERT_EQ(r, 1) << "completion " << done << ": " << fi_strerror(int(-r));
    EXPECT_EQ(e.op_context, &rctx[done]);
    EXPECT_EQ(in[done][1], static_cast<char>(done));
    ++done;
  }
  EXPECT_EQ(done, n);
  expect_shutdown(server);
}

// A peer process killed in the middle of a message: the receive it was
// filling fails, and the endpoint reports the shutdown; nothing hangs.
TEST_P(cm, a_peer_killed_mid_message_fails_the_receive) {
  const char* env = std::getenv("FI_TCP_LOCAL_STREAM");
  if (GetParam().progress == FI_PROGRESS_AUTO || (env && std::string(env) == "0"))
    GTEST_SKIP() << "on the socket the kernel's buffers take the whole message before the "
                    "peer dies; the same-host stream's pipe does not";
  const size_t size = size_t{1} << 20;
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The client, alone in this process.
    std::vector<char> out(size, 'k');
    fid_ep* ep = nullptr;
    if (fi_endpoint(client.dom, info, &ep, nullptr) || fi_ep_bind(ep, &client.eq->fid, 0) ||
        fi_ep_bind(ep, &client.cq->fid, FI_TRANSMIT | FI_RECV) || fi_enable(ep) ||
        fi_connect(ep, &server_addr, nullptr, 0))
      _exit(40);
    uint32_t event = 0;
    alignas(fi_eq_cm_entry) char buf[sizeof(fi_eq_cm_entry) + 512];
    ssize_t r;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((r = fi_eq_read(client.eq, &event, buf, sizeof buf, 0)) == -FI_EAGAIN &&
           std::chrono::steady_clock::now() < until) {
    }
    if (r < 0 || event != FI_CONNECTED) _exit(41);
    fi_context sctx;
    if (fi_send(ep, out.data(), size, nullptr, 0, &sctx)) _exit(42);
    for (int i = 0; i < 100; ++i) fi_cq_read(client.cq, nullptr, 0);
    raise(SIGKILL);
    _exit(43);
  }
  uint32_t event = 0;
  alignas(fi_eq_cm_entry) char buf[sizeof(fi_eq_cm_entry) + 512];
  ssize_t r = next_event(server, &event, buf, sizeof buf);
  ASSERT_GE(r, static_cast<ssize_t>(sizeof(fi_eq_cm_entry)));
  ASSERT_EQ(event, static_cast<uint32_t>(FI_CONNREQ));
  fi_info* ci = reinterpret_cast<fi_eq_cm_entry*>(buf)->info;
  open_ep(server, ci);
  fi_freeinfo(ci);
  ASSERT_EQ(fi_accept(server.ep, nullptr, 0), 0);
  ASSERT_GE(next_event(server, &event, buf, sizeof buf), static_cast<ssize_t>(sizeof(fi_eq_cm_entry)));
  ASSERT_EQ(event, static_cast<uint32_t>(FI_CONNECTED));
  std::vector<char> in(size);
  fi_context rctx;
  ASSERT_EQ(fi_recv(server.ep, in.data(), size, nullptr, 0, &rctx), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "child exit " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  fi_cq_tagged_entry e;
  ssize_t got = -FI_EAGAIN;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (got == -FI_EAGAIN && std::chrono::steady_clock::now() < until)
    got = fi_cq_read(server.cq, &e, 1);
  ASSERT_EQ(got, -FI_EAVAIL);
  fi_cq_err_entry err{};
  ASSERT_EQ(fi_cq_readerr(server.cq, &err, 0), 1);
  EXPECT_EQ(err.op_context, &rctx);
  EXPECT_NE(err.err, 0);
  expect_shutdown(server);
}

INSTANTIATE_TEST_SUITE_P(tcp, cm, testing::ValuesIn(msg_configs), config_name);

}  // namespace
}  // namespace conformance
