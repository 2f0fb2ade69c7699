// SPDX-License-Identifier: MIT
// weft — udp FI_EP_RDM beyond the shared suite: a network that loses,
// duplicates and reorders datagrams (a proxy between two endpoints), hostile
// datagrams from a plain socket, and a peer restarted on the same port.
#include "log_recorder.hpp"
#include "ports.hpp"
#include "progress_cpu.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <gtest/gtest.h>

#include <poll.h>
#include <unistd.h>
#include <time.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <map>
#include <thread>
#include <tuple>
#include <vector>

namespace conformance {
namespace {

using clock_type = std::chrono::steady_clock;

// The common objects: fabric, domain, one CQ and one AV, and endpoints on
// chosen loopback ports.
struct stack {
  fi_info* info = nullptr;
  fid_fabric* fab = nullptr;
  fid_domain* dom = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  std::vector<fid_ep*> eps;

  explicit stack(uint64_t caps = FI_MSG | FI_TAGGED | FI_SOURCE,
                 fi_progress progress = FI_PROGRESS_MANUAL, fi_wait_obj wait = FI_WAIT_NONE) {
    fi_info* hints = fi_allocinfo();
    hints->caps = caps;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->data_progress = progress;
    hints->addr_format = FI_SOCKADDR_IN;
    hints->fabric_attr->prov_name = strdup("udp");
    int r = fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", nullptr, 0, hints, &info);
    fi_freeinfo(hints);
    if (r) {
      ADD_FAILURE() << "udp RDM: fi_getinfo: " << fi_strerror(-r);
      return;
    }
    EXPECT_EQ(fi_fabric(info->fabric_attr, &fab, nullptr), 0);
    EXPECT_EQ(fi_domain(fab, info, &dom, nullptr), 0);
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    ca.size = 1024;
    ca.wait_obj = wait;
    EXPECT_EQ(fi_cq_open(dom, &ca, &cq, nullptr), 0);
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    EXPECT_EQ(fi_av_open(dom, &aa, &av, nullptr), 0);
  }
  ~stack() {
    for (auto it = eps.rbegin(); it != eps.rend(); ++it) fi_close(&(*it)->fid);
    for (fid* f : {av ? &av->fid : nullptr, cq ? &cq->fid : nullptr, dom ? &dom->fid : nullptr,
                   fab ? &fab->fid : nullptr})
      if (f) fi_close(f);
    fi_freeinfo(info);
  }
  // An enabled endpoint bound to 127.0.0.1:port (0: any port).
  fid_ep* endpoint(uint16_t port = 0, fid_cntr* cntr = nullptr, uint64_t cntr_flags = 0) {
    fi_info* i = fi_dupinfo(info);
    sockaddr_in at = loopback(port);
    free(i->src_addr);
    i->src_addr = malloc(sizeof at);
    std::memcpy(i->src_addr, &at, sizeof at);
    i->src_addrlen = sizeof at;
    fid_ep* ep = nullptr;
    int r = fi_endpoint(dom, i, &ep, nullptr);
    fi_freeinfo(i);
    if (r) return ADD_FAILURE() << "fi_endpoint: " << fi_strerror(-r), nullptr;
    eps.push_back(ep);
    EXPECT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    EXPECT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
    if (cntr) {
      EXPECT_EQ(fi_ep_bind(ep, &cntr->fid, cntr_flags), 0);
    }
    EXPECT_EQ(fi_enable(ep), 0);
    return ep;
  }
  sockaddr_in name(fid_ep* ep) {
    sockaddr_in a{};
    size_t len = sizeof a;
    EXPECT_EQ(fi_getname(&ep->fid, &a, &len), 0);
    return a;
  }
  fi_addr_t insert(const sockaddr_in& a) {
    fi_addr_t fa = FI_ADDR_NOTAVAIL;
    EXPECT_EQ(fi_av_insert(av, &a, 1, &fa, 0, nullptr), 1);
    return fa;
  }
  // Reads the CQ until `ctx` completes (1), fails (-FI_EAVAIL, err filled)
  // or `seconds` pass (0). Other completions are kept in `done`.
  std::vector<fi_cq_tagged_entry> done;
  int wait_for(void* ctx, fi_cq_err_entry* err = nullptr, int seconds = 20) {
    for (auto it = done.begin(); it != done.end(); ++it)
      if (it->op_context == ctx) return done.erase(it), 1;
    auto until = clock_type::now() + std::chrono::seconds(seconds);
    while (clock_type::now() < until) {
      fi_cq_tagged_entry e[8];
      ssize_t n = fi_cq_read(cq, e, 8);
      if (n == -FI_EAVAIL) {
        fi_cq_err_entry ee{};
        fi_cq_readerr(cq, &ee, 0);
        if (err) *err = ee;
        if (ee.op_context == ctx) return -FI_EAVAIL;
        ADD_FAILURE() << "an error for another operation: " << fi_strerror(ee.err);
        continue;
      }
      bool found = false;
      for (ssize_t k = 0; k < n; ++k)
        if (e[k].op_context == ctx)
          found = true;
        else
          done.push_back(e[k]);
      if (found) return 1;
    }
    return 0;
  }
};

std::vector<char> pattern(size_t n, unsigned seed) {
  std::vector<char> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = char((i * 7 + seed * 131 + (i >> 9)) & 0xff);
  return b;
}

// A UDP proxy between two endpoints: each talks to one of its sockets as if
// it were the other. It drops, duplicates and reorders what it forwards.
struct lossy_proxy {
  int toward_a = -1, toward_b = -1;  // a sends to toward_a's port; b to toward_b's
  sockaddr_in a{}, b{};
  double loss, dup, reorder;
  std::atomic<bool> stop{false};
  std::atomic<size_t> dropped{0}, duplicated{0}, reordered{0};
  // Set to n > 0: the n-th datagram forwarded from then on is dropped.
  std::atomic<int> drop_nth{0};
  std::thread t;

  lossy_proxy(sockaddr_in a_, sockaddr_in b_, double l, double d, double r)
      : a(a_), b(b_), loss(l), dup(d), reorder(r) {
    toward_a = open_socket();
    toward_b = open_socket();
    t = std::thread([this] { run(); });
  }
  ~lossy_proxy() {
    stop = true;
    t.join();
    ::close(toward_a);
    ::close(toward_b);
  }
  static int open_socket() {
    int s = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in any = loopback(0);
    ::bind(s, reinterpret_cast<sockaddr*>(&any), sizeof any);
    int size = 8 << 20;
    setsockopt(s, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    setsockopt(s, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    return s;
  }
  static sockaddr_in name_of(int s) {
    sockaddr_in n{};
    socklen_t l = sizeof n;
    ::getsockname(s, reinterpret_cast<sockaddr*>(&n), &l);
    return n;
  }
  void run() {
    std::mt19937 rng(4242);
    auto chance = [&](double p) { return std::uniform_real_distribution<>(0, 1)(rng) < p; };
    struct held {
      int via;
      sockaddr_in to;
      std::vector<char> d;
    };
    std::deque<held> late;  // reordered datagrams go out after the next one
    std::vector<char> buf(70000);
    pollfd p[2] = {{toward_a, POLLIN, 0}, {toward_b, POLLIN, 0}};
    while (!stop) {
      if (::poll(p, 2, 5) <= 0) {
        while (!late.empty()) {  // nothing else came: let them go
          auto& h = late.front();
          ::sendto(h.via, h.d.data(), h.d.size(), 0, reinterpret_cast<sockaddr*>(&h.to),
                   sizeof h.to);
          late.pop_front();
        }
        continue;
      }
      for (int k = 0; k < 2; ++k) {
        if (!(p[k].revents & POLLIN)) continue;
        ssize_t n = ::recv(p[k].fd, buf.data(), buf.size(), MSG_DONTWAIT);
        if (n < 0) continue;
        // What came toward a's side is from b, and goes out the other
        // socket to a (which knows that socket as b), and vice versa.
        int via = k == 0 ? toward_b : toward_a;
        sockaddr_in to = k == 0 ? b : a;
        if (int c = drop_nth.load(); c > 0) {
          drop_nth.store(c - 1);
          if (c == 1) {
            ++dropped;
            continue;
          }
        }
        if (chance(loss)) {
          ++dropped;
          continue;
        }
        held h{via, to, std::vector<char>(buf.begin(), buf.begin() + n)};
        if (chance(reorder)) {
          ++reordered;
          late.push_back(std::move(h));
          continue;
        }
        int copies = chance(dup) ? (++duplicated, 2) : 1;
        for (int c = 0; c < copies; ++c)
          ::sendto(via, h.d.data(), h.d.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
        while (!late.empty()) {
          auto& l = late.front();
          ::sendto(l.via, l.d.data(), l.d.size(), 0, reinterpret_cast<sockaddr*>(&l.to),
                   sizeof l.to);
          late.pop_front();
        }
      }
    }
  }
};

// The hostile network (5% loss, 10% reordering, 1% duplication),
// made by a proxy since netem is not available everywhere: messages from 0 B
// to 16 MiB, both ways, tagged and not, arrive once, in order, byte for byte.
TEST(udp_rdm, messages_cross_a_network_that_loses_duplicates_and_reorders) {
  stack s;
  ASSERT_TRUE(s.dom);
  fid_ep* a = s.endpoint();
  fid_ep* b = s.endpoint();
  ASSERT_TRUE(a && b);
  lossy_proxy px(s.name(a), s.name(b), 0.05, 0.01, 0.10);
  // a knows b as the proxy socket that forwards to b (toward_a: what a
  // sends there goes to b), and b knows a as toward_b.
  fi_addr_t b_for_a = s.insert(lossy_proxy::name_of(px.toward_a));
  fi_addr_t a_for_b = s.insert(lossy_proxy::name_of(px.toward_b));
  const size_t sizes[] = {0, 1, 100, 8192, 65536 + 1, 1 << 20, 16 << 20};
  unsigned seed = 1;
  for (size_t size : sizes) {
    for (int dir = 0; dir < 2; ++dir) {
      fid_ep* from = dir ? b : a;
      fid_ep* to = dir ? a : b;
      fi_addr_t dest = dir ? a_for_b : b_for_a;
      auto out = pattern(size, seed);
      std::vector<char> in(size + 16, 0);
      fi_context sctx, rctx;
      const bool tagged = (seed & 1) != 0;
      if (tagged)
        ASSERT_EQ(fi_trecv(to, in.data(), in.size(), nullptr, FI_ADDR_UNSPEC, seed, 0, &rctx), 0);
      else
        ASSERT_EQ(fi_recv(to, in.data(), in.size(), nullptr, FI_ADDR_UNSPEC, &rctx), 0);
      ssize_t r;
      do {
        r = tagged ? fi_tsend(from, out.data(), size, nullptr, dest, seed, &sctx)
                   : fi_send(from, out.data(), size, nullptr, dest, &sctx);
        if (r == -FI_EAGAIN) fi_cq_read(s.cq, nullptr, 0);
      } while (r == -FI_EAGAIN);
      ASSERT_EQ(r, 0);
      fi_cq_err_entry err{};
      ASSERT_EQ(s.wait_for(&rctx, &err, 60), 1) << size << " bytes, direction " << dir << ": "
                                                << fi_strerror(err.err);
      ASSERT_EQ(s.wait_for(&sctx, &err, 60), 1) << size << " bytes: the send";
      if (size) { ASSERT_EQ(0, std::memcmp(in.data(), out.data(), size)) << size << " bytes"; }
      ++seed;
    }
  }
  // Nothing more arrives: no message was delivered twice.
  char extra[16];
  fi_context xctx;
  ASSERT_EQ(fi_recv(b, extra, sizeof extra, nullptr, FI_ADDR_UNSPEC, &xctx), 0);
  auto until = clock_type::now() + std::chrono::milliseconds(300);
  while (clock_type::now() < until) {
    fi_cq_tagged_entry e;
    ASSERT_EQ(fi_cq_read(s.cq, &e, 1), -FI_EAGAIN) << "a completion nobody asked for";
  }
  EXPECT_GT(px.dropped.load(), 0u);
  EXPECT_GT(px.reordered.load(), 0u);
  EXPECT_GT(px.duplicated.load(), 0u);
  fi_cancel(&b->fid, &xctx);
}

// Under manual progress a thread asleep in fi_cq_sread is the only caller:
// a message the network lost, or its acknowledgement, must still be sent
// again while it sleeps (the endpoint's timer wakes it while anything is in
// flight), or both ends wait for ever.
TEST(udp_rdm, a_reader_asleep_in_sread_still_resends_what_the_network_lost) {
  stack s(FI_MSG | FI_TAGGED | FI_SOURCE, FI_PROGRESS_MANUAL, FI_WAIT_UNSPEC);
  ASSERT_TRUE(s.dom);
  fid_ep* a = s.endpoint();
  fid_ep* b = s.endpoint();
  ASSERT_TRUE(a && b);
  lossy_proxy px(s.name(a), s.name(b), 0, 0, 0);
  fi_addr_t b_for_a = s.insert(lossy_proxy::name_of(px.toward_a));
  for (int lost = 1; lost <= 2; ++lost) {  // 1: the message; 2: its acknowledgement
    char out[8] = "sleeper", in[8] = {};
    fi_context sctx, rctx;
    ASSERT_EQ(fi_recv(b, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &rctx), 0);
    const size_t dropped = px.dropped.load();
    px.drop_nth = lost;
    ASSERT_EQ(fi_send(a, out, sizeof out, nullptr, b_for_a, &sctx), 0);
    bool sent = false, received = false;
    const auto until = clock_type::now() + std::chrono::seconds(3);
    while (!(sent && received) && clock_type::now() < until) {
      fi_cq_tagged_entry e{};
      ssize_t n = fi_cq_sread(s.cq, &e, 1, nullptr, 3000);
      if (n == -FI_EAGAIN) continue;
      ASSERT_EQ(n, 1) << fi_strerror(int(-n));
      if (e.op_context == &sctx) sent = true;
      if (e.op_context == &rctx) received = true;
    }
    EXPECT_TRUE(received) << (lost == 1 ? "the lost message" : "the message") << " never arrived";
    EXPECT_TRUE(sent) << "the send never completed (" << (lost == 1 ? "message" : "acknowledgement")
                      << " lost)";
    EXPECT_EQ(0, std::memcmp(in, out, sizeof out));
    EXPECT_EQ(px.dropped.load(), dropped + 1);
  }
}

// The same for a thread asleep in fi_cntr_wait: the sender's and the
// receiver's events counted on one counter, the message and then its
// acknowledgement lost.
TEST(udp_rdm, a_counter_waiter_still_resends_what_the_network_lost) {
  stack s;
  ASSERT_TRUE(s.dom);
  fi_cntr_attr ca{};
  ca.events = FI_CNTR_EVENTS_COMP;
  ca.wait_obj = FI_WAIT_UNSPEC;
  fid_cntr* cntr = nullptr;
  ASSERT_EQ(fi_cntr_open(s.dom, &ca, &cntr, nullptr), 0);
  fid_ep* a = s.endpoint(0, cntr, FI_SEND);
  fid_ep* b = s.endpoint(0, cntr, FI_RECV);
  ASSERT_TRUE(a && b);
  {
    lossy_proxy px(s.name(a), s.name(b), 0, 0, 0);
    fi_addr_t b_for_a = s.insert(lossy_proxy::name_of(px.toward_a));
    for (int lost = 1; lost <= 2; ++lost) {  // 1: the message; 2: its acknowledgement
      char out[8] = "counted", in[8] = {};
      ASSERT_EQ(fi_recv(b, in, sizeof in, nullptr, FI_ADDR_UNSPEC, nullptr), 0);
      px.drop_nth = lost;
      ASSERT_EQ(fi_send(a, out, sizeof out, nullptr, b_for_a, nullptr), 0);
      const uint64_t want = 2 * uint64_t(lost);
      EXPECT_EQ(fi_cntr_wait(cntr, want, 3000), 0)
          << (lost == 1 ? "message" : "acknowledgement") << " lost: the counter reads "
          << fi_cntr_read(cntr) << ", not " << want;
      EXPECT_EQ(0, std::memcmp(in, out, sizeof out));
    }
    EXPECT_EQ(px.dropped.load(), 2u);
  }
  for (auto it = s.eps.rbegin(); it != s.eps.rend(); ++it) fi_close(&(*it)->fid);
  s.eps.clear();
  EXPECT_EQ(fi_close(&cntr->fid), 0);
}

// fi_setname before fi_enable replaces the endpoint's socket: a thread asleep
// on a CQ bound before the rename must wake for what reaches the new one.
// (b's CQ is its own, so nothing else's progress runs b.)
TEST(udp_rdm, a_sleeper_wakes_for_a_message_to_the_endpoints_new_name) {
  stack s;
  ASSERT_TRUE(s.dom);
  fid_ep* a = s.endpoint();
  ASSERT_TRUE(a);
  fi_cq_attr ca{};
  ca.format = FI_CQ_FORMAT_TAGGED;
  ca.size = 16;
  ca.wait_obj = FI_WAIT_UNSPEC;
  fid_cq* bcq = nullptr;
  ASSERT_EQ(fi_cq_open(s.dom, &ca, &bcq, nullptr), 0);
  fid_ep* b = nullptr;
  ASSERT_EQ(fi_endpoint(s.dom, s.info, &b, nullptr), 0);
  ASSERT_EQ(fi_ep_bind(b, &bcq->fid, FI_TRANSMIT | FI_RECV), 0);
  ASSERT_EQ(fi_ep_bind(b, &s.av->fid, 0), 0);
  sockaddr_in fresh = loopback(0);
  ASSERT_EQ(fi_setname(&b->fid, &fresh, sizeof fresh), 0);
  ASSERT_EQ(fi_enable(b), 0);
  fi_addr_t to_b = s.insert(s.name(b));
  char out[8] = "renamed", in[8] = {};
  fi_context sctx, rctx;
  ASSERT_EQ(fi_recv(b, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &rctx), 0);
  // Sent once the reader sleeps (a is this thread's alone meanwhile).
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(fi_send(a, out, sizeof out, nullptr, to_b, &sctx), 0);
  });
  fi_cq_tagged_entry e{};
  const auto start = clock_type::now();
  EXPECT_EQ(fi_cq_sread(bcq, &e, 1, nullptr, 10000), 1);
  // Without a wake-up the read returns only at its timeout (its last pass
  // finds the message): 10 s, where the message came after 0.2 s.
  EXPECT_LT(clock_type::now() - start, std::chrono::seconds(5)) << "the sleeper did not wake";
  sender.join();
  EXPECT_EQ(e.op_context, &rctx);
  EXPECT_EQ(0, std::memcmp(in, out, sizeof out));
  EXPECT_EQ(s.wait_for(&sctx, nullptr, 5), 1) << "the send was never acknowledged";
  EXPECT_EQ(fi_close(&b->fid), 0);
  EXPECT_EQ(fi_close(&bcq->fid), 0);
}

// Datagrams no correct peer sends: each is dropped and changes nothing; the
// endpoint keeps serving its real peer.
TEST(udp_rdm, hostile_datagrams_are_dropped_and_change_nothing) {
  stack s;
  ASSERT_TRUE(s.dom);
  fid_ep* a = s.endpoint();
  fid_ep* b = s.endpoint();
  ASSERT_TRUE(a && b);
  sockaddr_in b_name = s.name(b);
  fi_addr_t fb = s.insert(b_name);

  int h = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in any = loopback(0);
  ASSERT_EQ(::bind(h, reinterpret_cast<sockaddr*>(&any), sizeof any), 0);
  auto shoot = [&](const void* d, size_t n) {
    ::sendto(h, d, n, 0, reinterpret_cast<const sockaddr*>(&b_name), sizeof b_name);
  };
  // The header as the wire format documents it (rd_proto.hpp): magic 0xd7,
  // version 2, kind (1 data, 2 ack), flags (1 first, 2 last, 4 fresh), then
  // epoch, to_epoch, seq, ack, window, bytes, instance as 32-bit integers,
  // then on a first datagram op, 7 reserved bytes, len, tag, data.
  struct hdr {
    uint8_t magic = 0xd7, version = 2, kind = 1, flags = 3;
    uint32_t epoch = 77, to_epoch = 0, seq = 0, ack = 0, window = 16, bytes = 0, instance = 5;
  };
  struct msg {
    uint8_t op = 1, reserved[7] = {};
    uint64_t len = 0, tag = 0, data = 0;
  };
  static_assert(sizeof(hdr) == 32 && sizeof(msg) == 32);
  std::vector<char> d(64 + 16);
  auto build = [&](hdr hh, msg mm, size_t payload) {
    hh.bytes = uint32_t(payload);
    std::memcpy(d.data(), &hh, 32);
    std::memcpy(d.data() + 32, &mm, 32);
    return size_t(64 + payload);
  };
  // Malformed: too short, another protocol, another version, a length that
  // lies, reserved bits, an ack carrying payload.
  shoot("x", 1);
  {
    hdr hh;
    hh.magic = 0x45;
    shoot(&hh, sizeof hh);
  }
  {
    hdr hh;
    hh.version = 9;
    msg mm;
    shoot(d.data(), build(hh, mm, 0));
  }
  {
    hdr hh;
    hh.instance = 0;  // no sending endpoint
    msg mm;
    shoot(d.data(), build(hh, mm, 0));
  }
  {
    hdr hh;
    msg mm;
    mm.len = 4;
    size_t n = build(hh, mm, 4);
    shoot(d.data(), n - 1);  // one payload byte short of what it says
  }
  {
    hdr hh;
    hh.kind = 2;
    hh.flags = 0;
    hh.bytes = 5;
    shoot(&hh, sizeof hh);
  }
  // Well-formed but wrong: a stream that does not start at 0, and a
  // message's continuation that runs past its length.
  {
    hdr hh;
    hh.epoch = 99;
    hh.seq = 123456;
    msg mm;
    mm.len = 4;
    shoot(d.data(), build(hh, mm, 4));
  }
  {
    hdr hh;
    hh.epoch = 55;
    hh.flags = 1;  // first, not last
    msg mm;
    mm.len = 8;
    shoot(d.data(), build(hh, mm, 4));
    hdr cont;
    cont.epoch = 55;
    cont.flags = 2;
    cont.seq = 1;
    cont.bytes = 12;  // 4 + 12 > 8
    std::vector<char> c(32 + 12, 'z');
    std::memcpy(c.data(), &cont, 32);
    shoot(c.data(), c.size());
  }
  // An operation code no weft endpoint sends.
  {
    hdr hh;
    hh.epoch = 66;
    msg mm;
    mm.op = 42;
    mm.len = 3;
    shoot(d.data(), build(hh, mm, 3));
  }
  // The endpoint reads them all (a receive posted meanwhile could take the
  // well-formed start of a message that is then cut short, and fail, as a
  // receive matched to any peer that breaks off does).
  auto settle = clock_type::now() + std::chrono::milliseconds(100);
  while (clock_type::now() < settle) {
    fi_cq_tagged_entry e;
    ASSERT_EQ(fi_cq_read(s.cq, &e, 1), -FI_EAGAIN) << "a hostile datagram made a completion";
  }
  // The real peer's message still arrives, and is the only one.
  char in[32] = {};
  fi_context rctx;
  ASSERT_EQ(fi_recv(b, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &rctx), 0);
  fi_context sctx;
  ASSERT_EQ(fi_send(a, "real", 5, nullptr, fb, &sctx), 0);
  ASSERT_EQ(s.wait_for(&rctx), 1);
  EXPECT_STREQ(in, "real");
  ASSERT_EQ(s.wait_for(&sctx), 1);
  fi_context xctx;
  char extra[32];
  ASSERT_EQ(fi_recv(b, extra, sizeof extra, nullptr, FI_ADDR_UNSPEC, &xctx), 0);
  auto until = clock_type::now() + std::chrono::milliseconds(200);
  while (clock_type::now() < until) {
    fi_cq_tagged_entry e;
    ASSERT_EQ(fi_cq_read(s.cq, &e, 1), -FI_EAGAIN) << "a hostile datagram made a message";
  }
  EXPECT_EQ(fi_cancel(&b->fid, &xctx), 0);
  ::close(h);
}

// A process restarted on the same port (as test harnesses do, run after
// run) is a new peer: its messages arrive, from a fresh stream.
TEST(udp_rdm, a_peer_restarted_on_the_same_port_is_heard_afresh) {
  stack s;
  ASSERT_TRUE(s.dom);
  fid_ep* a = s.endpoint();
  ASSERT_TRUE(a);
  fi_addr_t fa = s.insert(s.name(a));
  uint16_t port = free_port();
  for (int round = 0; round < 3; ++round) {
    fid_ep* b = s.endpoint(port);
    ASSERT_TRUE(b);
    for (int i = 0; i < 5; ++i) {
      auto out = pattern(3000 + round * 70000, unsigned(round * 10 + i));
      std::vector<char> in(out.size());
      fi_context rctx, sctx;
      ASSERT_EQ(fi_recv(a, in.data(), in.size(), nullptr, FI_ADDR_UNSPEC, &rctx), 0);
      ASSERT_EQ(fi_send(b, out.data(), out.size(), nullptr, fa, &sctx), 0);
      ASSERT_EQ(s.wait_for(&rctx, nullptr, 10), 1) << "round " << round << " message " << i;
      ASSERT_EQ(s.wait_for(&sctx, nullptr, 10), 1);
      ASSERT_EQ(in, out);
    }
    s.eps.pop_back();
    ASSERT_EQ(fi_close(&b->fid), 0);
  }
}

// A duration parameter too large for nanoseconds is taken as a week, not
// wrapped: FI_UDP_RDM_PEER_TIMEOUT_MS=18446744073710 once made a timeout of
// half a millisecond, and a peer that did not call in for 200 ms was
// declared dead. ctest's conformance.udp_rdm_huge_params sets it.
// FI_MORE (fi_msg(3)): sends that carry it wait for the first send without
// it (under manual progress; rdm_endpoint::flush_more gathers them into
// sendmmsg calls), then leave together, in order. The receiver, in a domain
// of its own, polls meanwhile and sees nothing of them.
TEST(udp_rdm, sends_with_fi_more_wait_for_the_first_without_it_then_leave_in_order) {
  stack a, b;
  fid_ep* ea = a.endpoint();
  fid_ep* eb = b.endpoint();
  ASSERT_TRUE(ea && eb);
  const fi_addr_t to_b = a.insert(b.name(eb));
  constexpr int n = 5;
  uint64_t in[n] = {}, out[n];
  fi_context rc[n], sc[n];
  for (int k = 0; k < n; ++k)
    ASSERT_EQ(fi_trecv(eb, &in[k], sizeof in[k], nullptr, FI_ADDR_UNSPEC, 9, 0, &rc[k]), 0);
  for (int k = 0; k < n - 1; ++k) {
    out[k] = uint64_t(k + 1);
    iovec v{&out[k], sizeof out[k]};
    fi_msg_tagged m{&v, nullptr, 1, to_b, 9, 0, &sc[k], 0};
    ASSERT_EQ(fi_tsendmsg(ea, &m, FI_MORE | FI_COMPLETION), 0) << k;
  }
  auto until = clock_type::now() + std::chrono::milliseconds(100);
  while (clock_type::now() < until) {
    fi_cq_tagged_entry e{};
    ASSERT_EQ(fi_cq_read(b.cq, &e, 1), -FI_EAGAIN) << "an FI_MORE send left before the last";
  }
  out[n - 1] = n;
  ASSERT_EQ(fi_tsend(ea, &out[n - 1], sizeof out[n - 1], nullptr, to_b, 9, &sc[n - 1]), 0);
  for (int k = 0; k < n; ++k) {
    ASSERT_EQ(b.wait_for(&rc[k], nullptr, 5), 1) << k;
    EXPECT_EQ(in[k], uint64_t(k + 1)) << "in order";
  }
  for (int k = 0; k < n; ++k) EXPECT_EQ(a.wait_for(&sc[k], nullptr, 5), 1) << k;
}

TEST(udp_rdm, a_huge_peer_timeout_is_capped_not_wrapped) {
  const char* timeout = std::getenv("FI_UDP_RDM_PEER_TIMEOUT_MS");
  if (!timeout || std::strtoull(timeout, nullptr, 10) < 18446744073709ull)
    GTEST_SKIP() << "needs FI_UDP_RDM_PEER_TIMEOUT_MS beyond 2^64 ns (ctest's "
                    "conformance.udp_rdm_huge_params)";
  stack sa, sb;
  ASSERT_TRUE(sa.dom && sb.dom);
  fid_ep* a = sa.endpoint();
  fid_ep* b = sb.endpoint();
  ASSERT_TRUE(a && b);
  const fi_addr_t fb = sa.insert(sb.name(b));
  char out[64] = "sent to a peer that is silent for a while", in[64] = {};
  fi_context sctx, rctx;
  ASSERT_EQ(fi_send(a, out, sizeof out, nullptr, fb, &sctx), 0);
  // b calls nothing for 200 ms while a progresses.
  auto until = clock_type::now() + std::chrono::milliseconds(200);
  while (clock_type::now() < until) {
    fi_cq_tagged_entry e;
    ASSERT_EQ(fi_cq_read(sa.cq, &e, 1), -FI_EAGAIN) << "a's send ended while b was silent";
  }
  ASSERT_EQ(fi_recv(b, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &rctx), 0);
  ASSERT_EQ(sb.wait_for(&rctx, nullptr, 10), 1);
  EXPECT_STREQ(in, out);
  ASSERT_EQ(sa.wait_for(&sctx, nullptr, 10), 1) << "the send completes once b answers";
}

// An idle peer's reliability state is reclaimed (FI_UDP_RDM_PEER_IDLE_MS)
// and comes back with the next message, nothing lost or repeated: first
// only a reclaims (only a is progressed while both are idle), then b, which
// kept its link, sends to a's fresh one while a sends too; b's link renews
// and its messages go again under new numbers. Then both reclaim, and talk
// again as new peers. Two domains, so that reading one CQ progresses one
// endpoint only. ctest's conformance.udp_rdm_idle sets the parameters.
TEST(udp_rdm, an_idle_peer_s_state_is_reclaimed_and_comes_back_with_nothing_lost) {
  const char* idle = std::getenv("FI_UDP_RDM_PEER_IDLE_MS");
  const char* timeout = std::getenv("FI_UDP_RDM_PEER_TIMEOUT_MS");
  if (!idle || !timeout || std::atol(idle) <= 0 || std::atol(idle) > 2000 ||
      std::atol(timeout) <= 0 || std::atol(timeout) > 1000)
    GTEST_SKIP() << "needs FI_UDP_RDM_PEER_IDLE_MS <= 2 s and FI_UDP_RDM_PEER_TIMEOUT_MS <= 1 s "
                    "(ctest's conformance.udp_rdm_idle)";
  // The endpoint waits at least twice the peer timeout (udp.hpp).
  const auto idle_for =
      std::chrono::milliseconds(std::max(std::atol(idle), 2 * std::atol(timeout)));
  stack sa, sb;
  ASSERT_TRUE(sa.dom && sb.dom);
  fid_ep* a = sa.endpoint();
  fid_ep* b = sb.endpoint();
  ASSERT_TRUE(a && b);
  const fi_addr_t fb = sa.insert(sb.name(b)), fa = sb.insert(sa.name(a));
  recorder rec;
  ASSERT_EQ(rec.ret, 0);
  // Messages both ways, each checked; both CQs are read until all are done.
  unsigned seed = 0;
  auto exchange = [&](int from_b, int from_a) {
    std::vector<std::vector<char>> out_b, out_a, in_a(from_b), in_b(from_a);
    std::vector<fi_context> rctx_a(from_b), rctx_b(from_a), sctx_b(from_b), sctx_a(from_a);
    for (int i = 0; i < from_b; ++i) {
      out_b.push_back(pattern(1000 + 9000 * i, ++seed));
      in_a[i].assign(out_b[i].size(), 0);
      ASSERT_EQ(fi_recv(a, in_a[i].data(), in_a[i].size(), nullptr, FI_ADDR_UNSPEC, &rctx_a[i]), 0);
    }
    for (int i = 0; i < from_a; ++i) {
      out_a.push_back(pattern(500 + 7000 * i, ++seed));
      in_b[i].assign(out_a[i].size(), 0);
      ASSERT_EQ(fi_recv(b, in_b[i].data(), in_b[i].size(), nullptr, FI_ADDR_UNSPEC, &rctx_b[i]), 0);
    }
    for (int i = 0; i < from_b; ++i)
      ASSERT_EQ(fi_send(b, out_b[i].data(), out_b[i].size(), nullptr, fa, &sctx_b[i]), 0);
    for (int i = 0; i < from_a; ++i)
      ASSERT_EQ(fi_send(a, out_a[i].data(), out_a[i].size(), nullptr, fb, &sctx_a[i]), 0);
    std::vector<void*> want_a, want_b;
    for (auto& c : rctx_a) want_a.push_back(&c);
    for (auto& c : sctx_a) want_a.push_back(&c);
    for (auto& c : rctx_b) want_b.push_back(&c);
    for (auto& c : sctx_b) want_b.push_back(&c);
    std::vector<void*> order_a;  // receive completions at a, in order
    auto until = clock_type::now() + std::chrono::seconds(20);
    while ((!want_a.empty() || !want_b.empty()) && clock_type::now() < until) {
      for (auto [cq, want, order] : {std::tuple{sa.cq, &want_a, &order_a},
                                     std::tuple{sb.cq, &want_b, (std::vector<void*>*)nullptr}}) {
        fi_cq_tagged_entry e[8];
        ssize_t n = fi_cq_read(cq, e, 8);
        if (n == -FI_EAVAIL) {
          fi_cq_err_entry ee{};
          fi_cq_readerr(cq, &ee, 0);
          FAIL() << "an operation failed: " << fi_strerror(ee.err);
        }
        for (ssize_t k = 0; k < n; ++k) {
          auto it = std::find(want->begin(), want->end(), e[k].op_context);
          ASSERT_NE(it, want->end()) << "a completion twice, or for nothing of ours";
          want->erase(it);
          if (order && (e[k].flags & FI_RECV)) order->push_back(e[k].op_context);
        }
      }
    }
    ASSERT_TRUE(want_a.empty() && want_b.empty()) << "operations still not complete";
    for (int i = 0; i < from_b; ++i) EXPECT_EQ(in_a[i], out_b[i]) << "from b, message " << i;
    for (int i = 0; i < from_a; ++i) EXPECT_EQ(in_b[i], out_a[i]) << "from a, message " << i;
    for (int i = 0; i < from_b; ++i) EXPECT_EQ(order_a[i], &rctx_a[i]) << "in order";
  };
  // Polls the CQs of `stacks` until `lines` reclaims have been logged.
  auto idle_until_reclaimed = [&](std::initializer_list<stack*> stacks, size_t lines) {
    auto until = clock_type::now() + 3 * idle_for + std::chrono::seconds(2);
    while (rec.with("idle peers' state reclaimed: 1 ").size() < lines &&
           clock_type::now() < until)
      for (stack* st : stacks) {
        fi_cq_tagged_entry e;
        EXPECT_EQ(fi_cq_read(st->cq, &e, 1), -FI_EAGAIN);
      }
    return rec.with("idle peers' state reclaimed: 1 ").size();
  };
  ASSERT_NO_FATAL_FAILURE(exchange(1, 1));
  EXPECT_EQ(rec.with("idle peers' state reclaimed").size(), 0u) << "not before it is idle";
  ASSERT_EQ(idle_until_reclaimed({&sa}, 1), 1u) << "a reclaims b's state";
  // b kept its link: its first datagrams name a's old one.
  ASSERT_NO_FATAL_FAILURE(exchange(3, 2));
  EXPECT_EQ(rec.with("made a fresh link to us").size(), 1u) << "b's link renewed";
  EXPECT_EQ(rec.with("its operations fail").size(), 0u);
  // Both reclaim; they meet again as new peers.
  ASSERT_EQ(idle_until_reclaimed({&sa, &sb}, 3), 3u) << "a and b reclaim each other's state";
  ASSERT_NO_FATAL_FAILURE(exchange(2, 2));
  EXPECT_EQ(rec.with("made a fresh link to us").size(), 1u) << "new on both sides: no renewal";
  EXPECT_EQ(rec.with("its operations fail").size(), 0u);
}

// A receiver that is alive but has no room (no receive posted and its
// unexpected data at FI_UDP_RDM_UNEXP_LIMIT) for longer than the peer
// timeout: its sender waits and is not told the peer died. Once receives
// are posted everything arrives, promptly and in order. ctest's
// conformance.udp_rdm_no_room sets a 64 KiB bound and a 500 ms timeout.
TEST(udp_rdm, a_receiver_without_room_is_waited_for_not_declared_dead) {
  const char* limit = std::getenv("FI_UDP_RDM_UNEXP_LIMIT");
  const char* timeout = std::getenv("FI_UDP_RDM_PEER_TIMEOUT_MS");
  if (!limit || !timeout || std::atol(limit) <= 0 || std::atol(limit) > (1 << 20) ||
      std::atol(timeout) <= 0 || std::atol(timeout) > 2000)
    GTEST_SKIP() << "needs FI_UDP_RDM_UNEXP_LIMIT <= 1 MiB and FI_UDP_RDM_PEER_TIMEOUT_MS <= 2 s "
                    "(ctest's conformance.udp_rdm_no_room)";
  const auto peer_timeout = std::chrono::milliseconds(std::atol(timeout));
  const size_t len = size_t(std::atol(limit)) / 2;  // two fit, the rest wait
  stack s;
  ASSERT_TRUE(s.dom);
  fid_ep* a = s.endpoint();
  fid_ep* b = s.endpoint();
  ASSERT_TRUE(a && b);
  fi_addr_t fb = s.insert(s.name(b));
  constexpr int n = 8;
  std::vector<std::vector<char>> out, in(n);
  fi_context sctx[n], rctx[n];
  for (int i = 0; i < n; ++i) {
    out.push_back(pattern(len, unsigned(i)));
    ASSERT_EQ(fi_tsend(a, out[i].data(), len, nullptr, fb, uint64_t(i), &sctx[i]), 0);
  }
  // Four peer timeouts with no receive posted, both sides progressing.
  auto until = clock_type::now() + 4 * peer_timeout;
  while (clock_type::now() < until) {
    fi_cq_tagged_entry e[8];
    ssize_t got = fi_cq_read(s.cq, e, 8);
    if (got == -FI_EAVAIL) {
      fi_cq_err_entry ee{};
      fi_cq_readerr(s.cq, &ee, 0);
      FAIL() << "a send to a live receiver failed: " << fi_strerror(ee.err);
    }
    for (ssize_t k = 0; k < got; ++k) s.done.push_back(e[k]);
  }
  EXPECT_LT(s.done.size(), size_t(n)) << "more arrived than the receiver had room for";
  auto posted = clock_type::now();
  for (int i = 0; i < n; ++i) {
    in[i].assign(len, 0);
    ASSERT_EQ(fi_trecv(b, in[i].data(), len, nullptr, FI_ADDR_UNSPEC, uint64_t(i), 0, &rctx[i]),
              0);
  }
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(s.wait_for(&rctx[i], nullptr, 10), 1) << "receive " << i;
    ASSERT_EQ(s.wait_for(&sctx[i], nullptr, 10), 1) << "send " << i;
    EXPECT_EQ(in[i], out[i]) << i;
  }
  // Told of the room: not left to find it at a timeout.
  EXPECT_LT(clock_type::now() - posted, peer_timeout);
}

// ---- RMA and atomics ----

constexpr uint64_t rma_caps =
    FI_MSG | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

// A buffer registered on the stack's domain (declared after the stack, so
// closed before its domain): its key and the RMA address of its first byte.
struct region {
  fid_mr* mr = nullptr;
  uint64_t key = 0, base = 0;
  region(stack& s, void* buf, size_t len, uint64_t access, uint64_t want_key) {
    EXPECT_EQ(fi_mr_reg(s.dom, buf, len, access, 0, want_key, 0, &mr, nullptr), 0);
    if (!mr) return;
    key = fi_mr_key(mr);
    const bool virt = s.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
    base = virt ? reinterpret_cast<uint64_t>(buf) : 0;
  }
  ~region() {
    if (mr) fi_close(&mr->fid);
  }
};

// Posts until the endpoint has room (driving progress meanwhile).
template <class Post>
ssize_t post(stack& s, Post&& p) {
  ssize_t r;
  while ((r = p()) == -FI_EAGAIN) fi_cq_read(s.cq, nullptr, 0);
  return r;
}

// FI_MORE on RMA (fi_rma(3)): writes that carry it wait, as sends do, for
// the first request without it; the target, polling in a domain of its own,
// sees its memory unchanged until then, and every write lands after.
TEST(udp_rdm, writes_with_fi_more_wait_for_the_first_request_without_it) {
  stack a(rma_caps), b(rma_caps);
  ASSERT_TRUE(a.dom && b.dom);
  fid_ep* ea = a.endpoint();
  fid_ep* eb = b.endpoint();
  ASSERT_TRUE(ea && eb);
  uint64_t window[3] = {0, 0, 0};
  region r(b, window, sizeof window, FI_REMOTE_WRITE, 0x51);
  ASSERT_TRUE(r.mr);
  const fi_addr_t to_b = a.insert(b.name(eb));
  uint64_t v[3] = {7, 8, 9};
  fi_context wc[3];
  for (int k = 0; k < 2; ++k) {
    iovec iov{&v[k], sizeof v[k]};
    fi_rma_iov rma{r.base + k * sizeof(uint64_t), sizeof(uint64_t), r.key};
    fi_msg_rma m{&iov, nullptr, 1, to_b, &rma, 1, &wc[k], 0};
    ASSERT_EQ(fi_writemsg(ea, &m, FI_MORE | FI_COMPLETION), 0) << k;
  }
  auto until = clock_type::now() + std::chrono::milliseconds(100);
  while (clock_type::now() < until) {
    fi_cq_tagged_entry e{};
    (void)fi_cq_read(b.cq, &e, 1);  // the target's progress
  }
  EXPECT_EQ(window[0] + window[1], 0u) << "an FI_MORE write left before the last";
  ASSERT_EQ(fi_write(ea, &v[2], sizeof v[2], nullptr, to_b, r.base + 2 * sizeof(uint64_t), r.key,
                     &wc[2]),
            0);
  for (int k = 0; k < 3; ++k) {
    // The target serves while the initiator waits for its completions.
    fi_cq_tagged_entry e{};
    auto deadline = clock_type::now() + std::chrono::seconds(5);
    int got = 0;
    while (!got && clock_type::now() < deadline) {
      (void)fi_cq_read(b.cq, &e, 1);
      got = a.wait_for(&wc[k], nullptr, 0) == 1;
      if (!got && fi_cq_read(a.cq, &e, 1) == 1) a.done.push_back(e);
    }
    EXPECT_TRUE(got) << k;
  }
  EXPECT_EQ(window[0], 7u);
  EXPECT_EQ(window[1], 8u);
  EXPECT_EQ(window[2], 9u);
}

// RMA and atomics on the proxy's network (5% loss, 10% reordering, 1%
// duplication): writes and reads from 1 byte to 2 MiB arrive byte for byte,
// atomics apply exactly once (a duplicated or resent request must not add
// twice), and a write to a key the target never registered fails at the
// initiator while the target's memory stays as it was.
TEST(udp_rdm, rma_and_atomics_cross_a_network_that_loses_duplicates_and_reorders) {
  stack s(rma_caps);
  ASSERT_TRUE(s.dom);
  fid_ep* a = s.endpoint();
  fid_ep* b = s.endpoint();
  ASSERT_TRUE(a && b);
  lossy_proxy px(s.name(a), s.name(b), 0.05, 0.01, 0.10);
  fi_addr_t b_for_a = s.insert(lossy_proxy::name_of(px.toward_a));
  fi_addr_t a_for_b = s.insert(lossy_proxy::name_of(px.toward_b));
  const size_t big = 2 << 20;
  std::vector<char> mem_b(big + 8192, 0), mem_a(big, 0);
  std::vector<int64_t> words(8, 100);
  region rb(s, mem_b.data(), mem_b.size(), FI_REMOTE_READ | FI_REMOTE_WRITE, 41);
  region ra(s, mem_a.data(), mem_a.size(), FI_REMOTE_WRITE, 42);
  region rw(s, words.data(), words.size() * 8, FI_REMOTE_READ | FI_REMOTE_WRITE, 43);
  ASSERT_TRUE(rb.mr && ra.mr && rw.mr);
  fi_context ctx;
  fi_cq_err_entry err{};
  unsigned seed = 7;
  for (size_t size : {size_t{1}, size_t{5000}, size_t{70000}, big}) {
    SCOPED_TRACE(testing::Message() << size << " bytes");
    const size_t off = size == big ? 8192 : 100 + size % 4096;
    auto out = pattern(size, ++seed);
    std::vector<char> back(size, 0);
    ASSERT_EQ(post(s, [&] { return fi_write(a, out.data(), size, nullptr, b_for_a, rb.base + off,
                                            rb.key, &ctx); }),
              0);
    ASSERT_EQ(s.wait_for(&ctx, &err, 60), 1) << fi_strerror(err.err);
    ASSERT_EQ(std::memcmp(mem_b.data() + off, out.data(), size), 0);
    ASSERT_EQ(post(s, [&] { return fi_read(a, back.data(), size, nullptr, b_for_a, rb.base + off,
                                           rb.key, &ctx); }),
              0);
    ASSERT_EQ(s.wait_for(&ctx, &err, 60), 1) << fi_strerror(err.err);
    ASSERT_EQ(back, out);
  }
  // The other way: b writes 1 MiB (two pieces from one vector) into a.
  auto out = pattern(1 << 20, 99);
  iovec iov[2] = {{out.data(), 300000}, {out.data() + 300000, out.size() - 300000}};
  ASSERT_EQ(post(s, [&] { return fi_writev(b, iov, nullptr, 2, a_for_b, ra.base, ra.key, &ctx); }),
            0);
  ASSERT_EQ(s.wait_for(&ctx, &err, 60), 1) << fi_strerror(err.err);
  ASSERT_EQ(std::memcmp(mem_a.data(), out.data(), out.size()), 0);
  // Atomics: each applies once however often its datagrams travel.
  int64_t add[3] = {1, 2, 3}, prior[3] = {};
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(post(s, [&] { return fi_fetch_atomic(a, add, 3, nullptr, prior, nullptr, b_for_a,
                                                   rw.base + 8, rw.key, FI_INT64, FI_SUM, &ctx); }),
              0);
    ASSERT_EQ(s.wait_for(&ctx, &err, 60), 1) << fi_strerror(err.err);
    ASSERT_EQ(prior[0], 100 + i * 1);
    ASSERT_EQ(prior[2], 100 + i * 3);
  }
  EXPECT_EQ(words[1], 120);
  EXPECT_EQ(words[2], 140);
  EXPECT_EQ(words[3], 160);
  int64_t swap = -5, expect = 100, old = 0;
  ASSERT_EQ(post(s, [&] { return fi_compare_atomic(a, &swap, 1, nullptr, &expect, nullptr, &old,
                                                   nullptr, b_for_a, rw.base, rw.key, FI_INT64,
                                                   FI_CSWAP, &ctx); }),
            0);
  ASSERT_EQ(s.wait_for(&ctx, &err, 60), 1) << fi_strerror(err.err);
  EXPECT_EQ(old, 100);
  EXPECT_EQ(words[0], -5);
  for (int i = 0; i < 10; ++i)
    ASSERT_EQ(post(s, [&] { return fi_inject_atomic(a, add, 1, b_for_a, rw.base + 32, rw.key,
                                                    FI_INT64, FI_SUM); }),
              0);
  int64_t now = 0;
  ASSERT_EQ(post(s, [&] { return fi_fetch_atomic(a, nullptr, 1, nullptr, &now, nullptr, b_for_a,
                                                 rw.base + 32, rw.key, FI_INT64, FI_ATOMIC_READ,
                                                 &ctx); }),
            0);
  ASSERT_EQ(s.wait_for(&ctx, &err, 60), 1) << fi_strerror(err.err);
  EXPECT_EQ(now, 110) << "the injected atomics went ahead of the read on one ordered stream";
  // A key b never registered: refused at b, an error at a, nothing placed
  // (a write of many datagrams, each of them thrown away).
  std::vector<char> before(mem_b);
  auto junk = pattern(200000, 3);
  ASSERT_EQ(post(s, [&] { return fi_write(a, junk.data(), junk.size(), nullptr, b_for_a, rb.base,
                                          rb.key + 1000, &ctx); }),
            0);
  ASSERT_EQ(s.wait_for(&ctx, &err, 60), -FI_EAVAIL);
  EXPECT_EQ(err.err, FI_EACCES);
  EXPECT_EQ(err.op_context, &ctx);
  EXPECT_EQ(mem_b, before) << "a refused write placed data";
  EXPECT_GT(px.dropped.load(), 0u);
}

// The datagrams of RMA requests and answers as the wire format documents
// them (util/rd_proto.hpp, prov/udp/rdm_proto.hpp).
struct wire_dgram {
  uint8_t magic = 0xd7, version = 2, kind = 1, flags = 3;  // data, first and last
  uint32_t epoch = 81, to_epoch = 0, seq = 0, ack = 0, window = 16, bytes = 0, instance = 8;
};
struct wire_msg {
  uint8_t op = 0, reserved[7] = {};
  uint64_t len = 0, tag = 0, data = 0;
};
struct wire_rma {
  uint8_t iov_count = 1, flags = 1, datatype = 0, atomic_op = 0;  // flags 1: answer me
  uint32_t count = 0;
  uint64_t addr = 0, len = 0, key = 0;  // one target range
};
static_assert(sizeof(wire_dgram) == 32 && sizeof(wire_msg) == 32 && sizeof(wire_rma) == 32);
constexpr uint8_t op_rma_write = 3, op_rma_read = 4, op_atomic = 5, op_rma_answer = 8;

// Requests no correct peer sends, or that the target's registrations do
// not cover, from a plain socket: each is logged; those well-formed enough
// to answer are answered with FI_EACCES (the socket reads the answers),
// malformed ones and an answer to a request never made are dropped. The
// target's memory changes only where the last, legitimate write put it,
// and its CQ stays empty.
TEST(udp_rdm, hostile_rma_datagrams_are_dropped_and_change_nothing) {
  stack s(rma_caps);
  ASSERT_TRUE(s.dom);
  fid_ep* a = s.endpoint();
  fid_ep* b = s.endpoint();
  ASSERT_TRUE(a && b);
  sockaddr_in b_name = s.name(b);
  std::vector<char> mem(4096, 0x5a);
  region rb(s, mem.data(), mem.size(), FI_REMOTE_READ | FI_REMOTE_WRITE, 51);
  ASSERT_TRUE(rb.mr);
  recorder rec;
  ASSERT_EQ(rec.ret, 0);

  int h = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
  sockaddr_in any = loopback(0);
  ASSERT_EQ(::bind(h, reinterpret_cast<sockaddr*>(&any), sizeof any), 0);
  uint32_t seq = 0;
  // One request (or answer) per datagram, numbered in order on one stream.
  auto shoot = [&](uint8_t op, uint64_t tag, const wire_rma* r, size_t rma_bytes,
                   const void* data, size_t data_len) {
    std::vector<char> d(64 + rma_bytes + data_len);
    wire_dgram hh;
    hh.seq = seq++;
    hh.bytes = uint32_t(rma_bytes + data_len);
    wire_msg mm;
    mm.op = op;
    mm.len = rma_bytes + data_len;
    mm.tag = tag;
    std::memcpy(d.data(), &hh, 32);
    std::memcpy(d.data() + 32, &mm, 32);
    if (rma_bytes) std::memcpy(d.data() + 64, r, rma_bytes);
    if (data_len) std::memcpy(d.data() + 64 + rma_bytes, data, data_len);
    ::sendto(h, d.data(), d.size(), 0, reinterpret_cast<const sockaddr*>(&b_name), sizeof b_name);
  };
  const char data[16] = "hostile bytes!!";
  wire_rma r;
  r.key = rb.key;
  // 101: 16 bytes from 4090: past the region's end.
  r.addr = rb.base + 4090;
  r.len = 16;
  shoot(op_rma_write, 101, &r, sizeof r, data, 16);
  // 102: a key nobody registered.
  r.addr = rb.base;
  r.key = rb.key + 77;
  shoot(op_rma_write, 102, &r, sizeof r, data, 16);
  r.key = rb.key;
  // An answer to a request b never made (naming an entry of its pool, in
  // the id's low half, and a generation).
  shoot(op_rma_answer, 0x100000005, nullptr, 0, data, 16);
  // Malformed: no target range; a payload shorter than the range.
  wire_rma none = r;
  none.iov_count = 0;
  shoot(op_rma_write, 103, &none, sizeof none, data, 16);
  r.len = 32;
  shoot(op_rma_write, 104, &r, sizeof r, data, 16);
  // 105: an atomic whose 8 bytes end past the region; 106: a read of 1 byte
  // past its end.
  wire_rma at = r;
  at.addr = rb.base + 4092;
  at.len = 8;
  at.datatype = FI_INT64;
  at.atomic_op = FI_SUM;
  at.count = 1;
  shoot(op_atomic, 105, &at, sizeof at, data, 8);
  r.addr = rb.base + 4000;
  r.len = 97;
  shoot(op_rma_read, 106, &r, sizeof r, nullptr, 0);
  // 107: the one legitimate write, 16 bytes at offset 100.
  r.addr = rb.base + 100;
  r.len = 16;
  shoot(op_rma_write, 107, &r, sizeof r, data, 16);

  // Read the answers (each may come more than once: we acknowledge none).
  std::map<uint64_t, uint64_t> status;  // tag -> status
  auto until = clock_type::now() + std::chrono::seconds(5);
  while (status.size() < 5 && clock_type::now() < until) {
    fi_cq_tagged_entry e;
    ASSERT_EQ(fi_cq_read(s.cq, &e, 1), -FI_EAGAIN) << "a hostile datagram made a completion";
    char buf[2048];
    ssize_t n = ::recv(h, buf, sizeof buf, 0);
    if (n < 64) continue;
    wire_dgram hh;
    wire_msg mm;
    std::memcpy(&hh, buf, 32);
    if (hh.kind != 1 || !(hh.flags & 1)) continue;
    std::memcpy(&mm, buf + 32, 32);
    EXPECT_EQ(mm.op, op_rma_answer);
    EXPECT_EQ(mm.len, 0u);
    status[mm.tag] = mm.data;
  }
  std::map<uint64_t, uint64_t> want = {
      {101, FI_EACCES}, {102, FI_EACCES}, {105, FI_EACCES}, {106, FI_EACCES}, {107, 0}};
  EXPECT_EQ(status, want);
  std::vector<char> expect(4096, 0x5a);
  std::memcpy(expect.data() + 100, data, 16);
  EXPECT_EQ(mem, expect) << "a refused request placed data";
  EXPECT_EQ(rec.with("refused an RMA write (key").size(), 2u);
  EXPECT_EQ(rec.with("refused an atomic (key").size(), 1u);
  EXPECT_EQ(rec.with("refused an RMA read (key").size(), 1u);
  EXPECT_EQ(rec.with("an RMA answer (id 0x100000005) to no request of ours").size(), 1u);
  EXPECT_EQ(rec.with("dropped an RMA write request: no target range").size(), 1u);
  EXPECT_EQ(rec.with("dropped an RMA write request: a payload of another length").size(), 1u);

  // The real peer's RMA still works.
  fi_addr_t fb = s.insert(b_name);
  fi_context ctx;
  ASSERT_EQ(fi_write(a, "real", 4, nullptr, fb, rb.base + 200, rb.key, &ctx), 0);
  ASSERT_EQ(s.wait_for(&ctx), 1);
  EXPECT_EQ(std::memcmp(mem.data() + 200, "real", 4), 0);
  ::close(h);
}

// FI_PROGRESS_AUTO: a target that calls nothing into the library after
// setup still takes messages (the domain's thread acknowledges them, so the
// sender's sends complete), and the messages are there when it looks.
TEST(udp_rdm, a_target_that_calls_nothing_takes_messages_under_automatic_progress) {
  constexpr int count = 8;
  constexpr size_t size = 100000;  // two datagrams each on loopback
  int names[2], go[2];
  ASSERT_EQ(pipe(names), 0);
  ASSERT_EQ(pipe(go), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(names[0]);
    close(go[1]);
    int rc = 0;
    {
      stack t(FI_MSG | FI_TAGGED | FI_SOURCE, FI_PROGRESS_AUTO);
      fid_ep* ep = t.dom ? t.endpoint() : nullptr;
      if (!ep) _exit(10);
      sockaddr_in me = t.name(ep);
      std::vector<std::vector<char>> in(count, std::vector<char>(size));
      fi_context ctx[count];
      for (int i = 0; i < count / 2; ++i)  // half posted, half unexpected
        if (fi_recv(ep, in[i].data(), size, nullptr, FI_ADDR_UNSPEC, &ctx[i])) _exit(11);
      if (write(names[1], &me, sizeof me) != sizeof me) _exit(12);
      char c;
      if (read(go[0], &c, 1) != 1) _exit(13);  // nothing in between: no progress of ours
      for (int i = count / 2; i < count; ++i)
        if (fi_recv(ep, in[i].data(), size, nullptr, FI_ADDR_UNSPEC, &ctx[i])) _exit(14);
      for (int i = 0; i < count; ++i) {
        if (t.wait_for(&ctx[i], nullptr, 5) != 1) _exit(20 + i);
        if (in[i] != pattern(size, unsigned(i))) _exit(40 + i);
      }
    }
    _exit(rc);
  }
  close(names[1]);
  close(go[0]);
  sockaddr_in target{};
  ASSERT_EQ(read(names[0], &target, sizeof target), ssize_t(sizeof target));
  stack s;
  ASSERT_TRUE(s.dom);
  fid_ep* a = s.endpoint();
  ASSERT_TRUE(a);
  fi_addr_t ft = s.insert(target);
  std::vector<std::vector<char>> out;
  fi_context sctx[count];
  for (int i = 0; i < count; ++i) {
    out.push_back(pattern(size, unsigned(i)));
    ASSERT_EQ(fi_send(a, out.back().data(), size, nullptr, ft, &sctx[i]), 0);
  }
  for (int i = 0; i < count; ++i)
    ASSERT_EQ(s.wait_for(&sctx[i], nullptr, 5), 1)
        << "send " << i << " was not acknowledged by a target that calls nothing";
  ASSERT_EQ(write(go[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "target exit " << status;
  close(names[0]);
  close(go[1]);
}

// Idle under automatic progress, the domain's thread sleeps: the progress
// threads use under 1% of a core over 300 ms with nothing to do. Their
// clocks, not the process's: that one also counts the sanitizers' threads
// (test_progress.cpp: 5.1 ms in 500 ms under ASan in CI).
TEST(udp_rdm, an_idle_endpoint_under_automatic_progress_costs_no_cpu) {
  stack s(FI_MSG | FI_TAGGED | FI_SOURCE, FI_PROGRESS_AUTO);
  ASSERT_TRUE(s.dom);
  fid_ep* a = s.endpoint();
  fid_ep* b = s.endpoint();
  ASSERT_TRUE(a && b);
  fi_addr_t fb = s.insert(s.name(b));
  char in[16] = {};
  fi_context rctx, sctx;
  ASSERT_EQ(fi_recv(b, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &rctx), 0);
  ASSERT_EQ(fi_send(a, "wake", 5, nullptr, fb, &sctx), 0);
  ASSERT_EQ(s.wait_for(&rctx), 1);
  ASSERT_EQ(s.wait_for(&sctx), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the last ticks
  int threads = 0;
  const double before = progress_threads_cpu_ms(threads);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double used_ms = progress_threads_cpu_ms(threads) - before;
  EXPECT_GE(threads, 1) << "no weft-progress thread";
  EXPECT_LT(used_ms, 3.0) << threads << " progress threads used " << used_ms
                          << " ms of CPU in 300 ms idle";
}

}  // namespace
}  // namespace conformance
