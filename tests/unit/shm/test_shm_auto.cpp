// SPDX-License-Identifier: MIT
// weft — shm under automatic progress, the progress thread's call
// (endpoint::auto_work) looked at alone: the receiving endpoint is taken
// off its domain's thread, and the test makes the calls the thread would.
// Work one pass leaves over (more than a ring's drain budget) wakes the
// thread again at once, through the endpoint's own FIFO; a pass that moves
// nothing (the CQ full: only the application can make room) still leaves
// the FIFO readable, and says it is blocked, so that the thread retries
// after its backoff rather than at once; an endpoint with nothing left does
// not wake the thread. Those run with the thread's polling after work
// turned off (FI_SHM_AUTO_SPIN_US=0); with it on, one call drains all and
// senders wake the thread again after it. While the application polls,
// senders do not wake the thread; a tick period without its calls brings
// the wakes back.
#include "prov/shm/shm.hpp"
#include "util/domain.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace weft::shm {
namespace {

constexpr size_t n_msgs = 100;  // one ring holds them all; more than one pass drains

// A domain under automatic progress with two endpoints: `rx`, off the
// domain's thread once enabled, and `tx`, sending to it.
struct pair {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_cq *rx_cq = nullptr, *tx_cq = nullptr;
  fid_av* av = nullptr;
  fid_ep *rx = nullptr, *tx = nullptr;
  fi_addr_t to_rx = FI_ADDR_NOTAVAIL;
  util::unique_fd fifo;  // a second read end of rx's wake FIFO, to look at it
  // The thread's polling after work, as the test wants it; restored after.
  struct spin_setting {
    uint64_t saved = cfg().auto_spin_ns;
    explicit spin_setting(uint64_t ns) { cfg_for_tests().auto_spin_ns = ns; }
    ~spin_setting() { cfg_for_tests().auto_spin_ns = saved; }
  } spin;

  explicit pair(size_t rx_cq_size, uint64_t spin_ns = 0) : spin(spin_ns) {
    fi_info* hints = fi_allocinfo();
    hints->caps = FI_MSG;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->domain_attr->data_progress = FI_PROGRESS_AUTO;
    hints->fabric_attr->prov_name = strdup("shm");
    EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info), 0);
    fi_freeinfo(hints);
    if (!info) return;
    EXPECT_EQ(info->domain_attr->data_progress, FI_PROGRESS_AUTO);
    EXPECT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
    EXPECT_EQ(fi_domain(fabric, info, &domain, nullptr), 0);
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_MSG;
    ca.size = rx_cq_size;
    EXPECT_EQ(fi_cq_open(domain, &ca, &rx_cq, nullptr), 0);
    ca.size = 256;
    EXPECT_EQ(fi_cq_open(domain, &ca, &tx_cq, nullptr), 0);
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    EXPECT_EQ(fi_av_open(domain, &aa, &av, nullptr), 0);
    for (auto [ep, cq] : {std::pair{&rx, rx_cq}, std::pair{&tx, tx_cq}}) {
      EXPECT_EQ(fi_endpoint(domain, info, ep, nullptr), 0);
      EXPECT_EQ(fi_ep_bind(*ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
      EXPECT_EQ(fi_ep_bind(*ep, &av->fid, 0), 0);
      EXPECT_EQ(fi_enable(*ep), 0);
    }
    // From here on only the test progresses rx (remove waits for a run
    // under way; closing the endpoint removes it again, harmlessly).
    util::domain::from(domain)->auto_progress().remove(endpoint::from(rx));
    char name[128] = {};
    size_t len = sizeof name;
    EXPECT_EQ(fi_getname(&rx->fid, name, &len), 0);
    EXPECT_EQ(fi_av_insert(av, name, 1, &to_rx, 0, nullptr), 1);
    // fi_shm://<region name>: the FIFO is beside the region.
    std::string region = name + sizeof name_prefix - 1;
    fifo.reset(::open((cfg().dir + "/" + wake_name(region)).c_str(), O_RDONLY | O_NONBLOCK));
    EXPECT_TRUE(fifo.valid());
  }
  ~pair() {
    for (fid* f : {tx ? &tx->fid : nullptr, rx ? &rx->fid : nullptr, av ? &av->fid : nullptr,
                   tx_cq ? &tx_cq->fid : nullptr, rx_cq ? &rx_cq->fid : nullptr,
                   domain ? &domain->fid : nullptr, fabric ? &fabric->fid : nullptr})
      if (f) fi_close(f);
    fi_freeinfo(info);
  }
  // What the domain's thread does when rx's wait set is readable.
  bool pass() { return endpoint::auto_work<util::mutex_lock>(endpoint::from(rx)); }
  bool woken() {
    pollfd p{fifo.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
  }
  void empty_fifo() {
    char b[64];
    while (::read(fifo.get(), b, sizeof b) > 0) {
    }
  }
};

// Receives of one 8-byte message each into bufs[i] (zeros until it lands),
// then the messages (value i + 1), all in rx's ring before any pass.
void load(pair& p, std::vector<uint64_t>& bufs) {
  bufs.assign(n_msgs, 0);
  for (size_t i = 0; i < n_msgs; ++i)
    ASSERT_EQ(fi_recv(p.rx, &bufs[i], 8, nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  for (uint64_t i = 0; i < n_msgs; ++i) {
    uint64_t v = i + 1;
    ASSERT_EQ(fi_inject(p.tx, &v, 8, p.to_rx), 0) << i;
  }
}

size_t landed(const std::vector<uint64_t>& bufs) {
  size_t n = 0;
  for (size_t i = 0; i < bufs.size(); ++i)
    if (bufs[i] == i + 1) ++n;
  return n;
}

TEST(shm_auto, work_left_over_wakes_the_thread_again) {
  pair p(256);
  ASSERT_NE(p.rx, nullptr);
  std::vector<uint64_t> bufs;
  load(p, bufs);
  EXPECT_TRUE(p.woken()) << "the first message woke the endpoint";
  EXPECT_TRUE(p.pass());
  const size_t first = landed(bufs);
  EXPECT_GT(first, 0u);
  ASSERT_LT(first, n_msgs) << "one pass drained the ring: nothing is left over to test";
  EXPECT_TRUE(p.woken()) << "work left over, and no wake for it";
  EXPECT_TRUE(p.pass());
  EXPECT_EQ(landed(bufs), n_msgs);
  EXPECT_FALSE(p.woken()) << "nothing left, and the thread is woken all the same";
  fi_cq_msg_entry e[n_msgs];
  EXPECT_EQ(fi_cq_read(p.rx_cq, e, n_msgs), static_cast<ssize_t>(n_msgs));
}

TEST(shm_auto, a_blocked_endpoint_is_retried_after_a_backoff) {
  pair p(8);  // room for 8 completions
  ASSERT_NE(p.rx, nullptr);
  std::vector<uint64_t> bufs;
  load(p, bufs);
  EXPECT_TRUE(p.pass()) << "the first pass delivered what the CQ holds";
  EXPECT_EQ(landed(bufs), 8u);
  EXPECT_TRUE(p.woken());
  EXPECT_FALSE(p.pass()) << "a pass that moved nothing: the thread must back off";
  EXPECT_EQ(landed(bufs), 8u);
  EXPECT_TRUE(p.woken()) << "the work is still there: the thread must come back to it";
  // The application makes room; the rest follows.
  fi_cq_msg_entry e[8];
  size_t read = 0;
  for (int i = 0; i < 1000 && read < n_msgs; ++i) {
    ssize_t n = fi_cq_read(p.rx_cq, e, 8);
    if (n > 0) read += static_cast<size_t>(n);
    p.pass();
  }
  EXPECT_EQ(read, n_msgs);
  EXPECT_EQ(landed(bufs), n_msgs);
}

// The thread's pass tells whether it moved anything by the receive
// positions of the rings it has open (endpoint::consumed walks those, not
// every ring up to the highest claimed). A sender that leaves takes its
// ring out of that walk, and one that comes after it is counted: its
// messages land and the pass says it moved them. (Under ASan a ring left
// in the walk after it closed is a use after free.)
TEST(shm_auto, the_pass_counts_a_sender_that_came_after_one_left) {
  pair p(256);
  ASSERT_NE(p.rx, nullptr);
  for (int round = 0; round < 3; ++round) {
    uint64_t got = 0, v = 100 + uint64_t(round);
    ASSERT_EQ(fi_recv(p.rx, &got, 8, nullptr, FI_ADDR_UNSPEC, nullptr), 0);
    ASSERT_EQ(fi_inject(p.tx, &v, 8, p.to_rx), 0);
    EXPECT_TRUE(p.pass()) << "round " << round << ": the pass moved a message";
    EXPECT_EQ(got, v) << "round " << round;
    fi_cq_msg_entry e;
    EXPECT_EQ(fi_cq_read(p.rx_cq, &e, 1), 1);
    // The sender leaves (its ring is closed and, at rx's next pass,
    // reclaimed); another endpoint takes its place.
    ASSERT_EQ(fi_close(&p.tx->fid), 0);
    p.tx = nullptr;
    for (int i = 0; i < 3; ++i) p.pass();
    ASSERT_EQ(fi_endpoint(p.domain, p.info, &p.tx, nullptr), 0);
    ASSERT_EQ(fi_ep_bind(p.tx, &p.tx_cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_ep_bind(p.tx, &p.av->fid, 0), 0);
    ASSERT_EQ(fi_enable(p.tx), 0);
  }
}

// With the thread's polling after work on, the call that was woken drains
// everything (it keeps polling after its last message), and when it is done
// senders wake the thread again: the next message rings the FIFO.
TEST(shm_auto, the_thread_polls_after_work_then_is_woken_again) {
  pair p(256, 2'000'000);
  ASSERT_NE(p.rx, nullptr);
  std::vector<uint64_t> bufs;
  load(p, bufs);
  EXPECT_TRUE(p.pass());
  EXPECT_EQ(landed(bufs), n_msgs) << "one call, polling after work, takes every message";
  p.empty_fifo();
  EXPECT_FALSE(p.woken());
  uint64_t more = 0, v = 7;
  ASSERT_EQ(fi_recv(p.rx, &more, 8, nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  ASSERT_EQ(fi_inject(p.tx, &v, 8, p.to_rx), 0);
  EXPECT_TRUE(p.woken()) << "after polling, the thread sleeps: a sender must wake it";
  EXPECT_TRUE(p.pass());
  EXPECT_EQ(more, 7u);
}

// An application that polls its CQ sees messages first: senders stop
// waking the thread (no system call per message). Once a tick period
// passes without its calls, the thread's next call brings the wakes back.
TEST(shm_auto, senders_do_not_wake_the_thread_while_the_application_polls) {
  pair p(256);
  ASSERT_NE(p.rx, nullptr);
  fi_cq_msg_entry e[4];
  for (int i = 0; i < 200; ++i) fi_cq_read(p.rx_cq, e, 4);
  p.empty_fifo();
  uint64_t got[3] = {};
  for (auto& g : got) ASSERT_EQ(fi_recv(p.rx, &g, 8, nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  uint64_t v = 1;
  ASSERT_EQ(fi_inject(p.tx, &v, 8, p.to_rx), 0);
  EXPECT_FALSE(p.woken()) << "the application polls: no wake needed";
  ssize_t n = 0;
  for (int i = 0; i < 1000 && n <= 0; ++i) n = fi_cq_read(p.rx_cq, e, 4);
  EXPECT_EQ(n, 1) << "the polling application takes the message";
  EXPECT_EQ(got[0], 1u);
  // It stops calling. The first tick still sees the passes above, the next
  // one sees none: from then on senders wake the thread.
  for (int tick = 0; tick < 2; ++tick) {
    usleep(3000);
    p.pass();
  }
  p.empty_fifo();
  v = 2;
  ASSERT_EQ(fi_inject(p.tx, &v, 8, p.to_rx), 0);
  EXPECT_TRUE(p.woken()) << "the application stopped polling, and no wake for a message";
  p.pass();
  EXPECT_EQ(got[1], 2u) << "the thread delivered it";
}

}  // namespace
}  // namespace weft::shm
