// SPDX-License-Identifier: MIT
// weft — conformance: programs that bind one well-known port run one after
// another, as test suites and job scripts run them. Each round a server
// process binds the same fixed port, serves one client (the test process)
// over a real connection, closes first (leaving its side of the connection
// in TIME_WAIT on that port) and exits; the next round's server must bind
// the port at once.
#include "ports.hpp"
#include "provider_param.hpp"

#include <rdma/fi_cm.h>

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace conformance {
namespace {

constexpr int rounds = 20;

// The objects of one process, opened from one fi_info.
struct stack {
  fid_fabric* fab = nullptr;
  fid_domain* dom = nullptr;
  fid_eq* eq = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_pep* pep = nullptr;
  fid_ep* ep = nullptr;
  ~stack() {
    for (fid* f : {ep ? &ep->fid : nullptr, pep ? &pep->fid : nullptr, av ? &av->fid : nullptr,
                   cq ? &cq->fid : nullptr, eq ? &eq->fid : nullptr, dom ? &dom->fid : nullptr,
                   fab ? &fab->fid : nullptr})
      if (f) fi_close(f);
  }
  int open(fi_info* i) {
    int r = fi_fabric(i->fabric_attr, &fab, nullptr);
    if (!r) r = fi_domain(fab, i, &dom, nullptr);
    fi_eq_attr ea{};
    ea.wait_obj = FI_WAIT_UNSPEC;
    if (!r) r = fi_eq_open(fab, &ea, &eq, nullptr);
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_CONTEXT;
    if (!r) r = fi_cq_open(dom, &ca, &cq, nullptr);
    if (!r && i->ep_attr->type != FI_EP_MSG) {
      fi_av_attr aa{};
      aa.type = FI_AV_TABLE;
      r = fi_av_open(dom, &aa, &av, nullptr);
    }
    return r;
  }
  // An enabled endpoint from `i` (its CQ, and its EQ or AV).
  int endpoint(fi_info* i) {
    int r = fi_endpoint(dom, i, &ep, nullptr);
    if (!r) r = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV);
    if (!r) r = av ? fi_ep_bind(ep, &av->fid, 0) : fi_ep_bind(ep, &eq->fid, 0);
    if (!r) r = fi_enable(ep);
    return r;
  }
  // One completion within 5 s: 0, or a negative error.
  int complete() {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
      fi_cq_entry e;
      ssize_t n = fi_cq_read(cq, &e, 1);
      if (n == 1) return 0;
      if (n != -FI_EAGAIN) return static_cast<int>(n);
      if (std::chrono::steady_clock::now() > deadline) return -FI_ETIMEDOUT;
    }
  }
  // The next EQ event, 5 s at most.
  uint32_t event() {
    uint32_t ev = 0;
    alignas(fi_eq_cm_entry) char buf[256];
    ssize_t r = fi_eq_sread(eq, &ev, buf, sizeof buf, 5000, 0);
    if (r == -FI_EAVAIL) {
      fi_eq_err_entry err{};
      fi_eq_readerr(eq, &err, 0);
      return 0;
    }
    if (r > 0 && ev == FI_CONNREQ) pending = reinterpret_cast<fi_eq_cm_entry*>(buf)->info;
    return r > 0 ? ev : 0;
  }
  fi_info* pending = nullptr;
};

class back_to_back : public testing::TestWithParam<config> {
 protected:
  void SetUp() override {
    if (!ip_provider(GetParam())) GTEST_SKIP() << GetParam().prov << " binds no port";
    if (GetParam().ep_type == FI_EP_DGRAM) GTEST_SKIP() << "datagrams leave no connection behind";
    hints = hints_for(GetParam());
    hints->addr_format = FI_SOCKADDR_IN;
  }
  void TearDown() override { fi_freeinfo(hints); }

  // The server process of one round: binds `port`, tells the parent on
  // `ready`, serves one message, closes first. Exit status 0, or which step
  // failed (3: the bind).
  [[noreturn]] void serve(const std::string& port, int ready) {
    int code = 0;
    {
      fi_info* i = nullptr;
      if (fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", port.c_str(), FI_SOURCE, hints, &i)) _exit(2);
      stack s;
      char buf[16];
      fi_context ctx;
      if (s.open(i)) _exit(2);
      if (i->ep_attr->type == FI_EP_MSG) {
        if (fi_passive_ep(s.fab, i, &s.pep, nullptr) || fi_pep_bind(s.pep, &s.eq->fid, 0) ||
            fi_listen(s.pep))
          _exit(3);
        if (write(ready, "r", 1) != 1) _exit(4);
        if (s.event() != FI_CONNREQ) _exit(5);
        int r = s.endpoint(s.pending);
        fi_freeinfo(s.pending);
        if (r || fi_recv(s.ep, buf, sizeof buf, nullptr, 0, &ctx) || fi_accept(s.ep, nullptr, 0))
          _exit(6);
        if (s.event() != FI_CONNECTED) _exit(7);
        if (s.complete()) _exit(8);
        fi_shutdown(s.ep, 0);  // our side closes first
      } else {
        if (s.endpoint(i)) _exit(3);
        if (write(ready, "r", 1) != 1) _exit(4);
        if (fi_recv(s.ep, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, &ctx)) _exit(6);
        if (s.complete()) _exit(8);
      }
      fi_freeinfo(i);
    }
    _exit(code);
  }

  // The client side of one round, in this process.
  void visit(const std::string& port) {
    fi_info* i = nullptr;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", port.c_str(), 0, hints, &i), 0);
    stack c;
    ASSERT_EQ(c.open(i), 0);
    ASSERT_EQ(c.endpoint(i), 0);
    fi_addr_t to = 0;
    if (i->ep_attr->type == FI_EP_MSG) {
      ASSERT_EQ(fi_connect(c.ep, i->dest_addr, nullptr, 0), 0);
      ASSERT_EQ(c.event(), static_cast<uint32_t>(FI_CONNECTED));
    } else {
      ASSERT_EQ(fi_av_insert(c.av, i->dest_addr, 1, &to, 0, nullptr), 1);
    }
    fi_context ctx;
    ASSERT_EQ(fi_send(c.ep, "hello", 6, nullptr, to, &ctx), 0);
    ASSERT_EQ(c.complete(), 0);
    if (i->ep_attr->type == FI_EP_MSG) {
      EXPECT_EQ(c.event(), static_cast<uint32_t>(FI_SHUTDOWN));
    }
    fi_freeinfo(i);
  }

  fi_info* hints = nullptr;
};

TEST_P(back_to_back, twenty_servers_in_a_row_bind_one_fixed_port) {
  const std::string port = std::to_string(free_port());
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(testing::Message() << "round " << round << ", port " << port);
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(p[0]);
      serve(port, p[1]);
    }
    close(p[1]);
    char r = 0;
    ssize_t got = read(p[0], &r, 1);
    close(p[0]);
    if (got == 1) visit(port);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_NE(WEXITSTATUS(status), 3) << "the server could not bind the port";
    ASSERT_EQ(WEXITSTATUS(status), 0) << "the server failed";
    ASSERT_FALSE(HasFatalFailure());
  }
}

INSTANTIATE_TEST_SUITE_P(all, back_to_back, testing::ValuesIn(all_configs), config_name);
INSTANTIATE_TEST_SUITE_P(tcp, back_to_back, testing::ValuesIn(msg_configs), config_name);

}  // namespace
}  // namespace conformance
