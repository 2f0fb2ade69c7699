// SPDX-License-Identifier: MIT
// weft — conformance: automatic control progress on tcp (fi_domain(3):
// with FI_PROGRESS_AUTO in control_progress, connection setup advances
// without the application calling into the library). Each side here stops
// calling after its last setup call; the other side, which does call, sees
// the connection move on. Under manual control progress none of these
// events would come: the silent side's library never runs.
#include "cm_side.hpp"
#include "ports.hpp"
#include "provider_param.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace conformance {
namespace {

using namespace std::chrono_literals;

// tcp FI_EP_MSG hints asking `control` for control and manual data progress.
fi_info* msg_info(const char* node, const char* service, uint64_t flags, fi_progress control) {
  fi_info* h = hints_for({"tcp", FI_EP_MSG, FI_THREAD_SAFE}, FI_MSG);
  h->domain_attr->control_progress = control;
  fi_info* out = nullptr;
  int r = fi_getinfo(FI_VERSION(1, 17), node, service, flags, h, &out);
  fi_freeinfo(h);
  EXPECT_EQ(r, 0) << fi_strerror(-r);
  if (out) {
    EXPECT_EQ(out->domain_attr->control_progress, control);
  }
  return out;
}

// A server listening on loopback and a client that has called fi_connect
// (with `data` as private data), each side asking its own control progress.
// Infos freed on the way out, a failed assertion included.
struct connecting {
  fi_info *si = nullptr, *ci = nullptr;
  objs server, client;
  fid_ep* ep = nullptr;
  ~connecting() {
    fi_freeinfo(ci);
    fi_freeinfo(si);
  }
  void start(fi_progress server_control, fi_progress client_control, const std::string& data) {
    const std::string port = std::to_string(free_port());
    si = msg_info("127.0.0.1", port.c_str(), FI_SOURCE, server_control);
    ci = msg_info("127.0.0.1", port.c_str(), 0, client_control);
    ASSERT_NE(si, nullptr);
    ASSERT_NE(ci, nullptr);
    ASSERT_EQ(server.open(si), 0);
    ASSERT_EQ(server.listen(si), 0);
    ASSERT_EQ(client.open(ci), 0);
    ASSERT_EQ(client.endpoint(ci, &ep), 0);
    ASSERT_EQ(fi_connect(ep, ci->dest_addr, data.data(), data.size()), 0);
  }
};

// A client that calls nothing after fi_connect: under manual progress its
// request would wait in the library for a progress call; here the server,
// blocked in fi_eq_sread, gets FI_CONNREQ and the two connect.
TEST(cm_auto, a_client_silent_after_fi_connect_reaches_the_server) {
  connecting c;
  c.start(FI_PROGRESS_MANUAL, FI_PROGRESS_AUTO, "hi");
  ASSERT_FALSE(HasFatalFailure());
  objs& server = c.server;
  objs& client = c.client;
  // From here the client calls nothing until the server is connected.
  event req = wait_event(server.eq);
  ASSERT_EQ(req.type, static_cast<uint32_t>(FI_CONNREQ))
      << "no connection request reached the server: " << req.rc;
  EXPECT_EQ(req.data, "hi");
  fid_ep* sep = nullptr;
  ASSERT_EQ(server.endpoint(req.info, &sep), 0);
  fi_freeinfo(req.info);
  ASSERT_EQ(fi_accept(sep, nullptr, 0), 0);
  event up = wait_event(server.eq);
  EXPECT_EQ(up.type, static_cast<uint32_t>(FI_CONNECTED)) << up.rc;
  event cup = wait_event(client.eq);
  EXPECT_EQ(cup.type, static_cast<uint32_t>(FI_CONNECTED)) << cup.rc;
}

// A server that calls nothing after fi_listen: its passive endpoint accepts
// the connection and reads the request by itself, so the FI_CONNREQ is
// queued when the server looks, once, a while later. (Under manual progress
// one read finds nothing: it accepts the socket, and the request's bytes
// are read by a later progress call.)
TEST(cm_auto, a_server_silent_after_fi_listen_has_the_request_queued) {
  connecting c;
  c.start(FI_PROGRESS_AUTO, FI_PROGRESS_MANUAL, "req");
  ASSERT_FALSE(HasFatalFailure());
  objs& server = c.server;
  objs& client = c.client;
  // The client progresses itself (its request goes out) while it waits;
  // joined on the way out, a failed assertion included.
  std::jthread t([&] {
    event e = wait_event(client.eq, 10000);
    EXPECT_EQ(e.type, static_cast<uint32_t>(FI_CONNECTED)) << e.rc;
  });
  std::this_thread::sleep_for(1s);
  uint32_t type = 0;
  alignas(fi_eq_cm_entry) char buf[sizeof(fi_eq_cm_entry) + 64];
  ssize_t n = fi_eq_read(server.eq, &type, buf, sizeof buf, 0);
  ASSERT_GE(n, static_cast<ssize_t>(sizeof(fi_eq_cm_entry)))
      << "nothing queued after a second: " << fi_strerror(static_cast<int>(-n));
  ASSERT_EQ(type, static_cast<uint32_t>(FI_CONNREQ));
  auto* cm = reinterpret_cast<fi_eq_cm_entry*>(buf);
  EXPECT_EQ(std::string(buf + sizeof(fi_eq_cm_entry), n - sizeof(fi_eq_cm_entry)), "req");
  fid_ep* sep = nullptr;
  EXPECT_EQ(server.endpoint(cm->info, &sep), 0);
  fi_freeinfo(cm->info);
  EXPECT_EQ(fi_accept(sep, nullptr, 0), 0);
  event up = wait_event(server.eq);
  EXPECT_EQ(up.type, static_cast<uint32_t>(FI_CONNECTED)) << up.rc;
  t.join();
}

// A peer that opens a TCP connection to the listener and never sends a
// request is dropped at the connection deadline (FI_TCP_CONN_TIMEOUT) with
// no call from the server: the passive endpoint's timer does it. Runs under
// ctest's conformance.tcp_cm_deadline, which sets a 300 ms deadline.
TEST(cm_auto, a_connection_without_a_request_is_dropped_at_the_deadline) {
  const char* t = std::getenv("FI_TCP_CONN_TIMEOUT");
  if (!t || std::atoi(t) <= 0 || std::atoi(t) > 1000)
    GTEST_SKIP() << "needs FI_TCP_CONN_TIMEOUT of at most 1000 ms (ctest's "
                    "conformance.tcp_cm_deadline)";
  const uint16_t port = free_port();
  const std::string ps = std::to_string(port);
  fi_info* si = msg_info("127.0.0.1", ps.c_str(), FI_SOURCE, FI_PROGRESS_AUTO);
  ASSERT_NE(si, nullptr);
  objs server;
  ASSERT_EQ(server.open(si), 0);
  ASSERT_EQ(server.listen(si), 0);
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_in to = loopback(port);
  ASSERT_EQ(::connect(s, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  timeval tv{5, 0};
  ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c;
  auto start = std::chrono::steady_clock::now();
  ssize_t r = ::recv(s, &c, 1, 0);
  auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r, 0) << "the server did not close a connection that sent no request (errno "
                  << errno << ")";
  EXPECT_LT(waited, 4s);
  ::close(s);
  fi_freeinfo(si);
}

}  // namespace
}  // namespace conformance
