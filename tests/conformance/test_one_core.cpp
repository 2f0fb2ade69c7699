// SPDX-License-Identifier: MIT
// weft — conformance: a thread that polls for a completion must not keep
// the core from the thread it waits for. Two threads ping-pong through two
// endpoints while both are bound to one CPU, as on a machine with more busy
// threads than cores. Each waits by polling its CQ (fi_cq_read), as most
// programs do. Without giving the core up, every hop would cost a whole
// scheduler time slice (milliseconds); a thousand round trips would take
// many seconds instead of a few milliseconds.
#include "fixture.hpp"

#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <thread>

namespace conformance {
namespace {

// Sanitizers slow every hop several times over.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int slowdown = 10;
#else
constexpr int slowdown = 1;
#endif

class one_core : public provider_test {
 protected:
  void SetUp() override {
    // Timing on one CPU means nothing while another test shares it: ctest
    // runs these alone (conformance.one_core, RUN_SERIAL).
    if (!std::getenv("WEFT_RUN_SERIAL"))
      GTEST_SKIP() << "runs alone, as ctest's conformance.one_core";
    provider_test::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (info->ep_attr->type != FI_EP_RDM) GTEST_SKIP() << "reliable endpoints only";
  }
};

// Binds the calling thread to the first CPU this process may use.
bool bind_to_one_cpu() {
  cpu_set_t all;
  if (sched_getaffinity(0, sizeof all, &all) != 0) return false;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &all)) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(c, &one);
      return sched_setaffinity(0, sizeof one, &one) == 0;
    }
  return false;
}

TEST_P(one_core, a_polling_waiter_lets_the_thread_it_waits_for_run) {
  constexpr int round_trips = 1000;
  // Each side in a domain of its own: under FI_THREAD_DOMAIN two threads
  // never share one.
  char name_b[128] = {}, name_a[128] = {};
  size_t len = sizeof name_a;
  std::unique_ptr<side> b;
  {
    // A first side to learn a name from, then the real pair.
    fid_domain* d = nullptr;
    ASSERT_EQ(fi_domain(fabric, info, &d, nullptr), 0);
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_DATA;
    fid_cq* cq = nullptr;
    ASSERT_EQ(fi_cq_open(d, &ca, &cq, nullptr), 0);
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    fid_av* av = nullptr;
    ASSERT_EQ(fi_av_open(d, &aa, &av, nullptr), 0);
    fid_ep* ep = nullptr;
    ASSERT_EQ(fi_endpoint(d, info, &ep, nullptr), 0);
    ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
    ASSERT_EQ(fi_enable(ep), 0);
    ASSERT_EQ(fi_getname(&ep->fid, name_a, &len), 0);
    // b talks to this endpoint (a), which keeps its objects.
    b = std::make_unique<side>(fabric, info, name_a);
    len = sizeof name_b;
    ASSERT_EQ(fi_getname(&b->ep->fid, name_b, &len), 0);
    fi_addr_t to_b = FI_ADDR_UNSPEC;
    ASSERT_EQ(fi_av_insert(av, name_b, 1, &to_b, 0, nullptr), 1);

    std::atomic<bool> failed{false};
    auto pong = [&] {
      if (!bind_to_one_cpu()) failed = true;
      char buf[8];
      fi_context ctx;
      for (int i = 0; i < round_trips && !failed; ++i) {
        fi_cq_data_entry e;
        if (fi_recv(b->ep, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, &ctx) != 0) failed = true;
        ssize_t r;
        while ((r = fi_cq_read(b->cq, &e, 1)) == -FI_EAGAIN && !failed) {
        }
        if (r != 1 || b->send(buf, sizeof buf) != 0) failed = true;
      }
    };
    auto start = std::chrono::steady_clock::now();
    std::thread t(pong);
    if (!bind_to_one_cpu()) failed = true;
    char buf[8] = "ping";
    fi_context rctx, sctx;
    for (int i = 0; i < round_trips && !failed; ++i) {
      if (fi_recv(ep, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, &rctx) != 0) failed = true;
      ssize_t r;
      while ((r = fi_send(ep, buf, sizeof buf, nullptr, to_b, &sctx)) == -FI_EAGAIN) {
      }
      if (r != 0) failed = true;
      // Two completions: the send's and the answer's.
      for (int got = 0; got < 2 && !failed;) {
        fi_cq_data_entry e;
        r = fi_cq_read(cq, &e, 1);
        if (r == 1) {
          ++got;
        } else if (r != -FI_EAGAIN) {
          failed = true;
        } else if (std::chrono::steady_clock::now() - start > std::chrono::seconds(60)) {
          failed = true;
        }
      }
    }
    auto took = std::chrono::steady_clock::now() - start;
    t.join();
    EXPECT_FALSE(failed);
    // Thousands of milliseconds when each hop waits out a time slice.
    EXPECT_LT(took, std::chrono::seconds(3 * slowdown))
        << round_trips << " round trips on one core took "
        << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
    b.reset();
    EXPECT_EQ(fi_close(&ep->fid), 0);
    EXPECT_EQ(fi_close(&av->fid), 0);
    EXPECT_EQ(fi_close(&cq->fid), 0);
    EXPECT_EQ(fi_close(&d->fid), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(all, one_core, testing::ValuesIn(all_configs), config_name);

}  // namespace
}  // namespace conformance
