// SPDX-License-Identifier: MIT
// weft — conformance: connection management as client programs drive it:
// a server that names only a port, fi_setname / fi_getname on a passive
// endpoint, an active endpoint bound to the source of its fi_info, private
// data at and past FI_OPT_CM_DATA_SIZE, a reject-then-accept loop over every
// private-data size between two processes, and many endpoints connecting at
// once. Each side blocks in fi_eq_sread, as such programs do.
#include "cm_side.hpp"
#include "ports.hpp"
#include "provider_param.hpp"

#include <rdma/fi_cm.h>

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace conformance {
namespace {

std::string pattern(size_t n, char seed) {
  std::string s(n, 0);
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 7);
  return s;
}

class cm_clients : public testing::TestWithParam<config> {
 protected:
  void SetUp() override { hints = hints_for(GetParam(), FI_MSG); }
  void TearDown() override { fi_freeinfo(hints); }
  // fi_getinfo(node, service, flags) with the configuration's hints.
  fi_info* getinfo(const char* node, const char* service, uint64_t flags, fi_info* h = nullptr) {
    fi_info* out = nullptr;
    int r = fi_getinfo(FI_VERSION(1, 17), node, service, flags, h ? h : hints, &out);
    EXPECT_EQ(r, 0) << fi_strerror(-r);
    return out;
  }
  fi_info* hints = nullptr;
};

// A server that names only a port (no node, FI_SOURCE) listens on every
// interface, as libfabric answers it: a client reaching it through the
// loopback address is accepted.
TEST_P(cm_clients, a_server_naming_only_a_port_is_reached_on_loopback) {
  const std::string port = std::to_string(free_port());
  fi_info* si = getinfo(nullptr, port.c_str(), FI_SOURCE);
  ASSERT_NE(si, nullptr);
  ASSERT_NE(si->src_addr, nullptr);
  auto* src = static_cast<sockaddr_in*>(si->src_addr);
  EXPECT_EQ(src->sin_addr.s_addr, htonl(INADDR_ANY)) << "the any-address, as libfabric answers";
  EXPECT_EQ(ntohs(src->sin_port), std::stoi(port));
  objs server;
  ASSERT_EQ(server.open(si), 0);
  ASSERT_EQ(server.listen(si), 0);

  fi_info* ci = getinfo("127.0.0.1", port.c_str(), 0);
  ASSERT_NE(ci, nullptr);
  EXPECT_EQ(static_cast<sockaddr_in*>(ci->src_addr)->sin_addr.s_addr, htonl(INADDR_LOOPBACK))
      << "a client of 127.0.0.1 is offered the interface that reaches it first";
  objs client;
  ASSERT_EQ(client.open(ci), 0);
  fid_ep* ep = nullptr;
  ASSERT_EQ(client.endpoint(ci, &ep), 0);
  ASSERT_EQ(fi_connect(ep, ci->dest_addr, nullptr, 0), 0);
  std::thread t([&] {
    event e = wait_event(client.eq);
    EXPECT_EQ(e.type, static_cast<uint32_t>(FI_CONNECTED)) << e.rc;
  });
  event req = wait_event(server.eq);
  ASSERT_EQ(req.type, static_cast<uint32_t>(FI_CONNREQ)) << req.rc;
  fid_ep* sep = nullptr;
  EXPECT_EQ(server.endpoint(req.info, &sep), 0);
  fi_freeinfo(req.info);
  EXPECT_EQ(fi_accept(sep, nullptr, 0), 0);
  event up = wait_event(server.eq);
  EXPECT_EQ(up.type, static_cast<uint32_t>(FI_CONNECTED)) << up.rc;
  t.join();
  fi_freeinfo(ci);
  fi_freeinfo(si);
}

// fi_cm(3): fi_setname gives a passive endpoint its address; fi_getname
// reports it, port included, before and after fi_listen; an active endpoint
// opened from an fi_info whose src_addr names a port binds it (the server
// sees that port as its peer's).
TEST_P(cm_clients, setname_getname_and_a_pinned_source_port) {
  fi_info* si = getinfo("127.0.0.1", nullptr, FI_SOURCE);
  ASSERT_NE(si, nullptr);
  objs server;
  ASSERT_EQ(server.open(si), 0);
  ASSERT_EQ(fi_passive_ep(server.fab, si, &server.pep, nullptr), 0);
  ASSERT_EQ(fi_pep_bind(server.pep, &server.eq->fid, 0), 0);
  const uint16_t sport = free_port();
  sockaddr_in want = loopback(sport);
  ASSERT_EQ(fi_setname(&server.pep->fid, &want, sizeof want), 0);
  sockaddr_in got{};
  size_t len = sizeof got;
  ASSERT_EQ(fi_getname(&server.pep->fid, &got, &len), 0);
  EXPECT_EQ(ntohs(got.sin_port), sport);
  ASSERT_EQ(fi_listen(server.pep), 0);
  len = sizeof got;
  ASSERT_EQ(fi_getname(&server.pep->fid, &got, &len), 0);
  EXPECT_EQ(ntohs(got.sin_port), sport);
  EXPECT_EQ(got.sin_addr.s_addr, htonl(INADDR_LOOPBACK));

  // The client pins its source through the hints' src_addr.
  const uint16_t cport = free_port();
  fi_info* h = fi_dupinfo(hints);
  sockaddr_in csrc = loopback(cport);
  h->src_addr = std::malloc(sizeof csrc);
  std::memcpy(h->src_addr, &csrc, sizeof csrc);
  h->src_addrlen = sizeof csrc;
  const std::string sp = std::to_string(sport);
  fi_info* ci = getinfo("127.0.0.1", sp.c_str(), 0, h);
  ASSERT_NE(ci, nullptr);
  ASSERT_NE(ci->src_addr, nullptr);
  EXPECT_EQ(ntohs(static_cast<sockaddr_in*>(ci->src_addr)->sin_port), cport)
      << "the hints' source is kept with a destination node";
  objs client;
  ASSERT_EQ(client.open(ci), 0);
  fid_ep* ep = nullptr;
  ASSERT_EQ(client.endpoint(ci, &ep), 0);
  ASSERT_EQ(fi_connect(ep, &got, nullptr, 0), 0);
  std::thread t([&] { wait_event(client.eq); });
  event req = wait_event(server.eq);
  ASSERT_EQ(req.type, static_cast<uint32_t>(FI_CONNREQ)) << req.rc;
  fid_ep* sep = nullptr;
  EXPECT_EQ(server.endpoint(req.info, &sep), 0);
  fi_freeinfo(req.info);
  EXPECT_EQ(fi_accept(sep, nullptr, 0), 0);
  EXPECT_EQ(wait_event(server.eq).type, static_cast<uint32_t>(FI_CONNECTED));
  t.join();
  sockaddr_in peer{};
  len = sizeof peer;
  ASSERT_EQ(fi_getpeer(sep, &peer, &len), 0);
  EXPECT_EQ(ntohs(peer.sin_port), cport);
  fi_freeinfo(ci);
  fi_freeinfo(h);
  fi_freeinfo(si);
}

// Private data past FI_OPT_CM_DATA_SIZE is refused at the call with
// -FI_EINVAL (fi_connect, fi_accept, fi_reject), as libfabric's tcp does,
// and so is a length with no buffer; the maximum itself goes through.
TEST_P(cm_clients, private_data_past_the_maximum_is_refused_at_the_call) {
  fi_info* si = getinfo("127.0.0.1", "0", FI_SOURCE);
  ASSERT_NE(si, nullptr);
  objs server, client;
  ASSERT_EQ(server.open(si), 0);
  ASSERT_EQ(server.listen(si), 0);
  size_t max = 0, len = sizeof max;
  ASSERT_EQ(fi_getopt(&server.pep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &max, &len), 0);
  ASSERT_GT(max, 0u);
  sockaddr_in at{};
  len = sizeof at;
  ASSERT_EQ(fi_getname(&server.pep->fid, &at, &len), 0);
  ASSERT_EQ(client.open(si), 0);
  fid_ep* ep = nullptr;
  ASSERT_EQ(client.endpoint(si, &ep), 0);
  const std::string big = pattern(max + 1, 'x');
  EXPECT_EQ(fi_connect(ep, &at, big.data(), big.size()), -FI_EINVAL);
  EXPECT_EQ(fi_connect(ep, &at, nullptr, 4), -FI_EINVAL);
  const std::string full = pattern(max, 'c');
  ASSERT_EQ(fi_connect(ep, &at, full.data(), full.size()), 0) << "a refused call changes nothing";
  std::thread t([&] {
    event e = wait_event(client.eq);
    EXPECT_EQ(e.type, static_cast<uint32_t>(FI_CONNECTED)) << e.rc;
    EXPECT_EQ(e.data, pattern(max, 's'));
  });
  event req = wait_event(server.eq);
  ASSERT_EQ(req.type, static_cast<uint32_t>(FI_CONNREQ)) << req.rc;
  EXPECT_EQ(req.data, full);
  EXPECT_EQ(fi_reject(server.pep, req.info->handle, big.data(), big.size()), -FI_EINVAL);
  fid_ep* sep = nullptr;
  EXPECT_EQ(server.endpoint(req.info, &sep), 0);
  fi_freeinfo(req.info);
  EXPECT_EQ(fi_accept(sep, big.data(), big.size()), -FI_EINVAL);
  const std::string answer = pattern(max, 's');
  EXPECT_EQ(fi_accept(sep, answer.data(), answer.size()), 0);
  EXPECT_EQ(wait_event(server.eq).type, static_cast<uint32_t>(FI_CONNECTED));
  t.join();
  fi_freeinfo(si);
}

// Two processes, as test programs run: for each private-data size 1, 2, 4,
// ... FI_OPT_CM_DATA_SIZE the client connects and is rejected with data,
// connects again and is accepted with data, then both shut down. Every
// step must complete; a spinning or stuck side fails the 5 s waits.
TEST_P(cm_clients, reject_then_accept_for_every_private_data_size_across_processes) {
  const uint16_t port = free_port();
  const std::string ps = std::to_string(port);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The client: its own fabric; any failure is the exit status.
    int status = 1;
    {
      fi_info* ci = nullptr;
      if (fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", ps.c_str(), 0, hints, &ci) != 0) _exit(2);
      objs c;
      if (c.open(ci) != 0) _exit(3);
      size_t max = 0;
      status = 0;
      for (size_t size = 1; status == 0; size *= 2) {
        for (int round = 0; round < 2 && status == 0; ++round) {
          fid_ep* ep = nullptr;
          if (c.endpoint(ci, &ep) != 0) _exit(4);
          if (!max) {
            size_t len = sizeof max;
            fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &max, &len);
          }
          const std::string mine = pattern(size, char('a' + round));
          // The server may still be starting: a refusal without data is
          // the kernel's, before fi_listen; try again.
          event e;
          for (int tries = 0;; ++tries) {
            if (fi_connect(ep, ci->dest_addr, mine.data(), size) != 0) _exit(5);
            e = wait_event(c.eq);
            if (!(e.rc == -FI_ECONNREFUSED && e.data.empty() && tries < 100)) break;
            c.drop(ep);
            usleep(20000);
            if (c.endpoint(ci, &ep) != 0) _exit(4);
          }
          if (round == 0) {
            if (e.rc != -FI_ECONNREFUSED || e.data != pattern(size, 'r')) status = 10;
          } else {
            if (e.type != FI_CONNECTED || e.data != pattern(size, 'A')) status = 11;
            if (!status && fi_shutdown(ep, 0) != 0) status = 12;
          }
          c.drop(ep);
        }
        if (size >= max) break;
      }
      fi_freeinfo(ci);
    }
    _exit(status);
  }
  int status = -1;
  {
    fi_info* si = getinfo(nullptr, ps.c_str(), FI_SOURCE);
    ASSERT_NE(si, nullptr);
    objs s;
    ASSERT_EQ(s.open(si), 0);
    ASSERT_EQ(s.listen(si), 0);
    size_t max = 0, len = sizeof max;
    ASSERT_EQ(fi_getopt(&s.pep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &max, &len), 0);
    for (size_t size = 1;; size *= 2) {
      SCOPED_TRACE(testing::Message() << size << " bytes of private data");
      event req = wait_event(s.eq);
      ASSERT_EQ(req.type, static_cast<uint32_t>(FI_CONNREQ)) << req.rc;
      EXPECT_EQ(req.data, pattern(size, 'a'));
      const std::string no = pattern(size, 'r');
      ASSERT_EQ(fi_reject(s.pep, req.info->handle, no.data(), size), 0);
      fi_freeinfo(req.info);
      req = wait_event(s.eq);
      ASSERT_EQ(req.type, static_cast<uint32_t>(FI_CONNREQ)) << req.rc;
      EXPECT_EQ(req.data, pattern(size, 'b'));
      fid_ep* ep = nullptr;
      ASSERT_EQ(s.endpoint(req.info, &ep), 0);
      fi_freeinfo(req.info);
      const std::string yes = pattern(size, 'A');
      ASSERT_EQ(fi_accept(ep, yes.data(), size), 0);
      event up = wait_event(s.eq);
      ASSERT_EQ(up.type, static_cast<uint32_t>(FI_CONNECTED)) << up.rc;
      event down = wait_event(s.eq);
      ASSERT_EQ(down.type, static_cast<uint32_t>(FI_SHUTDOWN)) << down.rc;
      s.drop(ep);
      if (size >= max) break;
    }
    fi_freeinfo(si);
    ASSERT_EQ(waitpid(child, &status, 0), child);
  }
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the client failed (see its exit code)";
}

// Many active endpoints of one process connect to one listener at once,
// each from a thread of its own blocked in fi_eq_sread; the server accepts
// from another: every one is connected.
TEST_P(cm_clients, endpoints_connecting_at_once_are_each_accepted) {
  if (GetParam().threading != FI_THREAD_SAFE) GTEST_SKIP() << "threads share the domain";
  constexpr int n = 16;
  fi_info* si = getinfo("127.0.0.1", "0", FI_SOURCE);
  ASSERT_NE(si, nullptr);
  objs server;
  ASSERT_EQ(server.open(si), 0);
  ASSERT_EQ(server.listen(si), 0);
  sockaddr_in at{};
  size_t len = sizeof at;
  ASSERT_EQ(fi_getname(&server.pep->fid, &at, &len), 0);
  std::atomic<int> accepted{0};
  std::thread srv([&] {
    int connected = 0;
    while (connected < n) {
      event e = wait_event(server.eq);
      if (e.rc < 0) {
        ADD_FAILURE() << "server: " << fi_strerror(static_cast<int>(-e.rc)) << " after "
                      << connected << " connections";
        return;
      }
      if (e.type == FI_CONNREQ) {
        fid_ep* ep = nullptr;
        EXPECT_EQ(server.endpoint(e.info, &ep), 0);
        fi_freeinfo(e.info);
        EXPECT_EQ(fi_accept(ep, nullptr, 0), 0);
      } else if (e.type == FI_CONNECTED) {
        ++connected;
      }
    }
    accepted = connected;
  });
  objs client;
  ASSERT_EQ(client.open(si), 0);
  std::vector<fid_eq*> eqs(n, nullptr);
  std::vector<fid_ep*> eps(n, nullptr);
  std::atomic<int> up{0};
  std::vector<std::thread> cl;
  for (int i = 0; i < n; ++i) {
    fi_eq_attr ea{};
    ea.wait_obj = FI_WAIT_UNSPEC;
    ASSERT_EQ(fi_eq_open(client.fab, &ea, &eqs[i], nullptr), 0);
    ASSERT_EQ(fi_endpoint(client.dom, si, &eps[i], nullptr), 0);
    ASSERT_EQ(fi_ep_bind(eps[i], &eqs[i]->fid, 0), 0);
    ASSERT_EQ(fi_ep_bind(eps[i], &client.cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_enable(eps[i]), 0);
  }
  for (int i = 0; i < n; ++i)
    cl.emplace_back([&, i] {
      EXPECT_EQ(fi_connect(eps[i], &at, nullptr, 0), 0);
      event e = wait_event(eqs[i]);
      if (e.type == FI_CONNECTED && e.rc > 0)
        ++up;
      else
        ADD_FAILURE() << "client " << i << ": " << fi_strerror(static_cast<int>(-e.rc));
    });
  for (auto& t : cl) t.join();
  srv.join();
  EXPECT_EQ(up.load(), n);
  EXPECT_EQ(accepted.load(), n);
  for (int i = 0; i < n; ++i) {
    fi_close(&eps[i]->fid);
    fi_close(&eqs[i]->fid);
  }
  fi_freeinfo(si);
}

INSTANTIATE_TEST_SUITE_P(tcp, cm_clients, testing::ValuesIn(msg_configs), config_name);

}  // namespace
}  // namespace conformance
