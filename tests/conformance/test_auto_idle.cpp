// SPDX-License-Identifier: MIT
// weft — conformance: idle endpoints under automatic progress cost (almost)
// no CPU. Every provider configuration that offers FI_PROGRESS_AUTO opens
// two endpoints in one domain and exchanges a message each way (so its
// progress thread has run), a tcp FI_EP_MSG server listens with automatic
// control progress and holds a connection; then, for 10 seconds, nothing is
// called, and the progress threads' CPU time (from /proc) must stay under 1%
// of one core for all of them together. Ten seconds: run alone by ctest's
// conformance.auto_idle (WEFT_IDLE_TEST=1); the discovered instance skips.
#include "cm_side.hpp"
#include "ports.hpp"
#include "progress_cpu.hpp"
#include "provider_param.hpp"

#include <rdma/fi_cm.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace conformance {
namespace {

using namespace std::chrono_literals;

// Two endpoints of one domain under automatic progress, one message each
// way between them; closed at the end of the test.
struct idle_pair {
  fi_info* info = nullptr;
  fid_fabric* fab = nullptr;
  fid_domain* dom = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_ep* ep[2] = {};
  ~idle_pair() {
    for (fid* f : {ep[1] ? &ep[1]->fid : nullptr, ep[0] ? &ep[0]->fid : nullptr,
                   av ? &av->fid : nullptr, cq ? &cq->fid : nullptr, dom ? &dom->fid : nullptr,
                   fab ? &fab->fid : nullptr})
      if (f) fi_close(f);
    fi_freeinfo(info);
  }
  // 0, or what failed.
  std::string open(const config& c) {
    fi_info* h = hints_for(c);
    h->domain_attr->mr_mode = 0;
    int r = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info);
    fi_freeinfo(h);
    if (r) return "fi_getinfo: " + std::string(fi_strerror(-r));
    if (info->domain_attr->data_progress != FI_PROGRESS_AUTO) return "no automatic progress";
    if ((r = fi_fabric(info->fabric_attr, &fab, nullptr))) return "fi_fabric";
    if ((r = fi_domain(fab, info, &dom, nullptr))) return "fi_domain";
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_CONTEXT;
    if ((r = fi_cq_open(dom, &ca, &cq, nullptr))) return "fi_cq_open";
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    if ((r = fi_av_open(dom, &aa, &av, nullptr))) return "fi_av_open";
    fi_addr_t addr[2];
    for (int i = 0; i < 2; ++i) {
      if ((r = fi_endpoint(dom, info, &ep[i], nullptr))) return "fi_endpoint";
      if ((r = fi_ep_bind(ep[i], &cq->fid, FI_TRANSMIT | FI_RECV))) return "bind CQ";
      if ((r = fi_ep_bind(ep[i], &av->fid, 0))) return "bind AV";
      if ((r = fi_enable(ep[i]))) return "fi_enable";
    }
    for (int i = 0; i < 2; ++i) {
      char name[256];
      size_t len = sizeof name;
      if (fi_getname(&ep[i]->fid, name, &len)) return "fi_getname";
      if (fi_av_insert(av, name, 1, &addr[i], 0, nullptr) != 1) return "fi_av_insert";
    }
    // One message each way: every thread involved has run.
    for (int i = 0; i < 2; ++i) {
      char in[8] = {}, out[8] = "idle";
      fi_context rc, sc;
      if (fi_recv(ep[1 - i], in, sizeof in, nullptr, FI_ADDR_UNSPEC, &rc)) return "fi_recv";
      ssize_t s;
      auto until = std::chrono::steady_clock::now() + 10s;
      while ((s = fi_send(ep[i], out, sizeof out, nullptr, addr[1 - i], &sc)) == -FI_EAGAIN &&
             std::chrono::steady_clock::now() < until)
        fi_cq_read(cq, nullptr, 0);
      if (s) return "fi_send: " + std::string(fi_strerror(static_cast<int>(-s)));
      int got = 0;
      fi_cq_entry e;
      while (got < 2 && std::chrono::steady_clock::now() < until) {
        ssize_t n = fi_cq_read(cq, &e, 1);
        if (n == 1) ++got;
        else if (n != -FI_EAGAIN) return "fi_cq_read: " + std::to_string(n);
      }
      if (got < 2) return "no completion within 10 s";
    }
    return {};
  }
};

TEST(auto_idle, idle_endpoints_use_under_one_percent_of_a_core_over_ten_seconds) {
  if (!std::getenv("WEFT_IDLE_TEST"))
    GTEST_SKIP() << "takes 10 s: ctest's conformance.auto_idle runs it (WEFT_IDLE_TEST=1)";
  std::vector<std::unique_ptr<idle_pair>> pairs;
  for (const config& c : all_configs) {
    if (c.progress != FI_PROGRESS_AUTO) continue;
    auto p = std::make_unique<idle_pair>();
    std::string err = p->open(c);
    ASSERT_TRUE(err.empty()) << c.name() << ": " << err;
    pairs.push_back(std::move(p));
  }
  // A tcp server listening under automatic control progress, with one
  // connection accepted and idle.
  fi_info* h = hints_for({"tcp", FI_EP_MSG, FI_THREAD_SAFE, FI_PROGRESS_AUTO});
  const std::string port = std::to_string(free_port());
  fi_info *si = nullptr, *ci = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", port.c_str(), FI_SOURCE, h, &si), 0);
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", port.c_str(), 0, h, &ci), 0);
  fi_freeinfo(h);
  objs server, client;
  ASSERT_EQ(server.open(si), 0);
  ASSERT_EQ(server.listen(si), 0);
  ASSERT_EQ(client.open(ci), 0);
  fid_ep* cep = nullptr;
  ASSERT_EQ(client.endpoint(ci, &cep), 0);
  ASSERT_EQ(fi_connect(cep, ci->dest_addr, nullptr, 0), 0);
  event req = wait_event(server.eq);
  ASSERT_EQ(req.type, static_cast<uint32_t>(FI_CONNREQ)) << req.rc;
  fid_ep* sep = nullptr;
  ASSERT_EQ(server.endpoint(req.info, &sep), 0);
  fi_freeinfo(req.info);
  ASSERT_EQ(fi_accept(sep, nullptr, 0), 0);
  EXPECT_EQ(wait_event(server.eq).type, static_cast<uint32_t>(FI_CONNECTED));
  EXPECT_EQ(wait_event(client.eq).type, static_cast<uint32_t>(FI_CONNECTED));

  std::this_thread::sleep_for(500ms);  // the polling after work, the last ticks
  int threads = 0;
  const double before = progress_threads_cpu_ms(threads);
  std::this_thread::sleep_for(10s);
  int after_threads = 0;
  const double used = progress_threads_cpu_ms(after_threads) - before;
  EXPECT_GE(after_threads, 4) << "a progress thread per automatic domain and the tcp fabric's";
  EXPECT_LT(used, 100.0) << after_threads << " progress threads used " << used
                         << " ms of CPU in 10 s idle (1% of a core is 100 ms)";
  RecordProperty("idle_cpu_ms", std::to_string(used));
  fi_freeinfo(ci);
  fi_freeinfo(si);
}

}  // namespace
}  // namespace conformance
