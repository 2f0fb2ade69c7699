// SPDX-License-Identifier: MIT
// weft — scalable endpoints (fi_scalable_ep, fi_endpoint(3) "SCALABLE
// ENDPOINTS"; fi_rx_addr, fi_av(3)): one address, several transmit and
// receive contexts, each with its own CQ. Run on every configuration whose
// table offers FI_NAMED_RX_CTX; the others skip with their table's reason,
// and scalable_endpoints_are_refused_honestly (test_stx.cpp) checks their
// refusal.
#include "fixture.hpp"
#include "log_recorder.hpp"

#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace conformance {
namespace {

class sep : public provider_test {
 protected:
  uint64_t extra_caps() const override {
    return FI_NAMED_RX_CTX | FI_SOURCE | FI_DIRECTED_RECV | FI_RMA | FI_READ | FI_WRITE |
           FI_REMOTE_READ | FI_REMOTE_WRITE;
  }

  // A scalable endpoint with its contexts, each bound to a CQ of its own.
  struct scalable {
    fid_ep* ep = nullptr;
    std::vector<fid_ep*> tx, rx;
    std::vector<fid_cq*> tx_cq, rx_cq;
    fi_addr_t addr = FI_ADDR_NOTAVAIL;
  };

  void TearDown() override {
    for (scalable* s : seps) {
      for (auto* v : {&s->tx, &s->rx})
        for (fid_ep* c : *v) EXPECT_EQ(fi_close(&c->fid), 0);
      EXPECT_EQ(fi_close(&s->ep->fid), 0);
      delete s;
    }
    seps.clear();
    provider_test::TearDown();
  }

  // The fixture's info asking for `ntx` / `nrx` contexts.
  fi_info* info_with(size_t ntx, size_t nrx) {
    fi_info* i = fi_dupinfo(info);
    i->ep_attr->tx_ctx_cnt = ntx;
    i->ep_attr->rx_ctx_cnt = nrx;
    return i;
  }

  void open_av_bits(int bits) {
    fi_av_attr attr{};
    attr.type = FI_AV_TABLE;
    attr.rx_ctx_bits = bits;
    ASSERT_EQ(fi_av_open(domain, &attr, &av, nullptr), 0);
  }

  // Opens, binds (the AV, a CQ per context), enables and names a scalable
  // endpoint; its address goes into the AV.
  // `rx_cqs` false: the receive contexts get nothing bound.
  scalable* open_sep(size_t ntx, size_t nrx, fi_cq_format fmt = FI_CQ_FORMAT_TAGGED,
                     bool rx_cqs = true) {
    auto* s = new scalable;
    fi_info* i = info_with(ntx, nrx);
    EXPECT_EQ(fi_scalable_ep(domain, i, &s->ep, nullptr), 0);
    fi_freeinfo(i);
    if (!s->ep) {
      delete s;
      return nullptr;
    }
    seps.push_back(s);
    // Contexts first, then the AV: bound implicitly to those already open.
    for (size_t t = 0; t < ntx; ++t) {
      fid_ep* c = nullptr;
      EXPECT_EQ(fi_tx_context(s->ep, static_cast<int>(t), nullptr, &c, nullptr), 0);
      if (c) s->tx.push_back(c);
    }
    EXPECT_EQ(fi_scalable_ep_bind(s->ep, &av->fid, 0), 0);
    for (size_t r = 0; r < nrx; ++r) {
      fid_ep* c = nullptr;
      EXPECT_EQ(fi_rx_context(s->ep, static_cast<int>(r), nullptr, &c, nullptr), 0);
      if (c) s->rx.push_back(c);
    }
    for (fid_ep* c : s->tx) {
      s->tx_cq.push_back(open_cq(fmt));
      EXPECT_EQ(fi_ep_bind(c, &s->tx_cq.back()->fid, FI_TRANSMIT), 0);
      EXPECT_EQ(fi_enable(c), 0);
    }
    for (fid_ep* c : s->rx) {
      if (rx_cqs) {
        s->rx_cq.push_back(open_cq(fmt));
        EXPECT_EQ(fi_ep_bind(c, &s->rx_cq.back()->fid, FI_RECV), 0);
      }
      EXPECT_EQ(fi_enable(c), 0);
    }
    EXPECT_EQ(fi_enable(s->ep), 0);
    char name[256];
    size_t len = sizeof name;
    EXPECT_EQ(fi_getname(&s->ep->fid, name, &len), 0);
    EXPECT_EQ(fi_av_insert(av, name, 1, &s->addr, 0, nullptr), 1);
    return s;
  }

  // Reads one completion of `cq` within a few seconds, reading every other
  // CQ of the test meanwhile: under manual progress a network provider's
  // send advances only while its context's CQ is read (fi_domain(3)), and
  // here each context has its own. What the other reads find is kept, in
  // order, for their own turn; a CQ with an error entry is left to its turn.
  ssize_t await(fid_cq* cq, fi_cq_tagged_entry* e, fi_addr_t* src = nullptr) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
      if (auto& q = kept[cq]; !q.empty()) {
        *e = q.front().first;
        if (src) *src = q.front().second;
        q.pop_front();
        return 1;
      }
      fi_addr_t from = FI_ADDR_NOTAVAIL;
      ssize_t n = fi_cq_readfrom(cq, e, 1, &from);
      if (n == 1 && src) *src = from;
      if (n != -FI_EAGAIN || std::chrono::steady_clock::now() > deadline) return n;
      for (fid_cq* other : cqs) {
        if (other == cq) continue;
        fi_cq_tagged_entry o{};
        fi_addr_t f = FI_ADDR_NOTAVAIL;
        if (fi_cq_readfrom(other, &o, 1, &f) == 1) kept[other].emplace_back(o, f);
      }
    }
  }
  // Nothing more arrives on `cq` (nor was kept for it).
  bool quiet(fid_cq* cq) {
    fi_cq_tagged_entry e{};
    return kept[cq].empty() && fi_cq_read(cq, &e, 1) == -FI_EAGAIN;
  }

  std::vector<scalable*> seps;
  std::map<fid_cq*, std::deque<std::pair<fi_cq_tagged_entry, fi_addr_t>>> kept;
};

// Each transmit context sends to one named receive context of the peer:
// the message arrives there and nowhere else, names the sending scalable
// endpoint (FI_SOURCE), and completes on the sending context's CQ only.
TEST_P(sep, each_message_reaches_the_receive_context_it_names) {
  constexpr int n = 4, bits = 2;
  ASSERT_NO_FATAL_FAILURE(open_av_bits(bits));
  scalable* a = open_sep(n, n);
  scalable* b = open_sep(n, n);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(b->rx.size(), size_t{n});
  ASSERT_EQ(a->tx.size(), size_t{n});
  char in[n][16] = {}, out[n][16] = {};
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(fi_recv(b->rx[i], in[i], sizeof in[i], nullptr, FI_ADDR_UNSPEC, &in[i]), 0);
  }
  // Context i sends to receive context n-1-i, so the routing cannot be the
  // identity by accident.
  for (int i = 0; i < n; ++i) {
    std::snprintf(out[i], sizeof out[i], "to rx %d", n - 1 - i);
    fi_addr_t dest = fi_rx_addr(b->addr, n - 1 - i, bits);
    ASSERT_EQ(fi_send(a->tx[i], out[i], sizeof out[i], nullptr, dest, &out[i]), 0) << i;
  }
  for (int r = 0; r < n; ++r) {
    fi_cq_tagged_entry e{};
    fi_addr_t src = FI_ADDR_NOTAVAIL;
    ASSERT_EQ(await(b->rx_cq[r], &e, &src), 1) << "receive context " << r;
    EXPECT_EQ(e.op_context, &in[r]);
    EXPECT_EQ(std::string(in[r]), "to rx " + std::to_string(r));
    EXPECT_EQ(src, a->addr) << "the sender is known by its scalable endpoint's address";
  }
  for (int t = 0; t < n; ++t) {
    fi_cq_tagged_entry e{};
    ASSERT_EQ(await(a->tx_cq[t], &e), 1) << "transmit context " << t;
    EXPECT_EQ(e.op_context, &out[t]) << "completions stay on their own context's CQ";
  }
  // Nothing else anywhere.
  for (auto* list : {&a->tx_cq, &a->rx_cq, &b->tx_cq, &b->rx_cq})
    for (fid_cq* c : *list) EXPECT_TRUE(quiet(c));
}

// A directed receive on a receive context names the sending scalable
// endpoint by the one address it was inserted under, whichever transmit
// context sends; a message from another sender waits. A source given with
// receive-context bits (the address one sends to a context of it with,
// fi_rx_addr) names the same sender: a source is an endpoint, not one of
// its receive contexts.
TEST_P(sep, a_directed_receive_matches_any_transmit_context_of_its_sender) {
  ASSERT_NO_FATAL_FAILURE(open_av_bits(1));
  scalable* a = open_sep(2, 1);
  scalable* b = open_sep(1, 2);
  scalable* c = open_sep(1, 1);
  ASSERT_TRUE(a && b && c);
  uint64_t got[2] = {0, 0};
  ASSERT_EQ(fi_trecv(b->rx[1], &got[0], sizeof got[0], nullptr, a->addr, 7, 0, &got[0]), 0);
  ASSERT_EQ(fi_trecv(b->rx[1], &got[1], sizeof got[1], nullptr, fi_rx_addr(a->addr, 1, 1), 7, 0,
                     &got[1]),
            0);
  uint64_t from_c = 3, from_a0 = 1, from_a1 = 2;
  fi_addr_t to_b1 = fi_rx_addr(b->addr, 1, 1);
  ASSERT_EQ(fi_tsend(c->tx[0], &from_c, sizeof from_c, nullptr, to_b1, 7, nullptr), 0);
  ASSERT_EQ(fi_tsend(a->tx[1], &from_a1, sizeof from_a1, nullptr, to_b1, 7, nullptr), 0);
  ASSERT_EQ(fi_tsend(a->tx[0], &from_a0, sizeof from_a0, nullptr, to_b1, 7, nullptr), 0);
  for (int k = 0; k < 2; ++k) {
    fi_cq_tagged_entry e{};
    ASSERT_EQ(await(b->rx_cq[1], &e), 1) << k;
  }
  EXPECT_EQ(got[0] + got[1], from_a0 + from_a1) << "both of a's contexts, not c";
  EXPECT_NE(got[0], got[1]);
  // c's message is still there for a receive from anyone.
  uint64_t any = 0;
  ASSERT_EQ(fi_trecv(b->rx[1], &any, sizeof any, nullptr, FI_ADDR_UNSPEC, 7, 0, &any), 0);
  fi_cq_tagged_entry e{};
  ASSERT_EQ(await(b->rx_cq[1], &e), 1);
  EXPECT_EQ(any, from_c);
  // Receive context 0 saw none of it.
  EXPECT_TRUE(quiet(b->rx_cq[0]));
}

// One thread per transmit context and one per receive context, each on its
// own CQ only: every message arrives once, at the context it names.
TEST_P(sep, one_thread_per_context_each_on_its_own_cq) {
  constexpr int n = 3, bits = 2, msgs = 200;
  ASSERT_NO_FATAL_FAILURE(open_av_bits(bits));
  scalable* a = open_sep(n, 1);
  scalable* b = open_sep(1, n);
  ASSERT_TRUE(a && b);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      fi_addr_t dest = fi_rx_addr(b->addr, t, bits);
      uint64_t v[msgs];
      int done = 0;
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      for (int k = 0; k < msgs && std::chrono::steady_clock::now() < deadline;) {
        v[k] = uint64_t(t) << 32 | uint64_t(k);
        ssize_t r = fi_tsend(a->tx[t], &v[k], sizeof v[k], nullptr, dest, t, nullptr);
        if (r == 0) ++k;
        else if (r != -FI_EAGAIN) { ++failures; ADD_FAILURE() << "tsend " << t << ": " << r; return; }
        fi_cq_tagged_entry e{};
        if (fi_cq_read(a->tx_cq[t], &e, 1) == 1) ++done;
      }
      while (done < msgs && std::chrono::steady_clock::now() < deadline) {
        fi_cq_tagged_entry e{};
        ssize_t r = fi_cq_read(a->tx_cq[t], &e, 1);
        if (r == 1) ++done;
        else if (r != -FI_EAGAIN) { ++failures; ADD_FAILURE() << "tx cq " << t << ": " << r; return; }
      }
      if (done != msgs) { ++failures; ADD_FAILURE() << "transmit context " << t << " completed " << done; }
    });
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      std::vector<uint64_t> buf(msgs);
      std::vector<bool> seen(msgs, false);
      int posted = 0, got = 0;
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (got < msgs && std::chrono::steady_clock::now() < deadline) {
        if (posted < msgs) {
          ssize_t p = fi_trecv(b->rx[r], &buf[posted], sizeof buf[0], nullptr, FI_ADDR_UNSPEC,
                               static_cast<uint64_t>(r), 0, &buf[posted]);
          if (p == 0) ++posted;
          else if (p != -FI_EAGAIN) { ++failures; ADD_FAILURE() << "trecv " << r << ": " << p; return; }
        }
        fi_cq_tagged_entry e{};
        ssize_t n2 = fi_cq_read(b->rx_cq[r], &e, 1);
        if (n2 == -FI_EAGAIN) continue;
        if (n2 != 1) { ++failures; ADD_FAILURE() << "rx cq " << r << ": " << n2; return; }
        uint64_t v = *static_cast<uint64_t*>(e.op_context);
        if ((v >> 32) != uint64_t(r) || (v & 0xffffffff) >= msgs || seen[v & 0xffffffff]) {
          ++failures;
          ADD_FAILURE() << "receive context " << r << " got " << std::hex << v;
          return;
        }
        seen[v & 0xffffffff] = true;
        ++got;
      }
      if (got != msgs) { ++failures; ADD_FAILURE() << "receive context " << r << " got " << got; }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

// A plain endpoint and a scalable endpoint sending to each other at once:
// each side's messages arrive at the other's receiving side, whatever
// connections the two set up (a network provider must not carry the plain
// endpoint's sends over a transmit context's connection, whose context
// receives nothing), and every send completes once.
TEST_P(sep, a_plain_endpoint_and_a_scalable_one_send_to_each_other_at_once) {
  ASSERT_NO_FATAL_FAILURE(open_av_bits(1));
  scalable* b = open_sep(2, 2);
  ASSERT_TRUE(b);
  fid_cq* pcq = open_cq(FI_CQ_FORMAT_TAGGED);
  fid_ep* plain = nullptr;
  fi_info* one = info_with(1, 1);
  ASSERT_EQ(fi_endpoint(domain, one, &plain, nullptr), 0);
  fi_freeinfo(one);
  eps.push_back(plain);
  ASSERT_EQ(fi_ep_bind(plain, &pcq->fid, FI_TRANSMIT | FI_RECV), 0);
  ASSERT_EQ(fi_ep_bind(plain, &av->fid, 0), 0);
  ASSERT_EQ(fi_enable(plain), 0);
  char name[256];
  size_t len = sizeof name;
  ASSERT_EQ(fi_getname(&plain->fid, name, &len), 0);
  fi_addr_t p_addr = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(fi_av_insert(av, name, 1, &p_addr, 0, nullptr), 1);
  constexpr int rounds = 3;
  uint64_t to_b[rounds], to_p[2][rounds], got_b[rounds], got_p[2 * rounds];
  for (int k = 0; k < rounds; ++k)
    ASSERT_EQ(fi_trecv(b->rx[0], &got_b[k], sizeof got_b[k], nullptr, FI_ADDR_UNSPEC, 1, 0,
                       &got_b[k]),
              0);
  for (int k = 0; k < 2 * rounds; ++k)
    ASSERT_EQ(fi_trecv(plain, &got_p[k], sizeof got_p[k], nullptr, FI_ADDR_UNSPEC, 2, 0,
                       &got_p[k]),
              0);
  for (int k = 0; k < rounds; ++k) {
    to_b[k] = 100 + k;
    to_p[0][k] = 200 + k;
    to_p[1][k] = 300 + k;
    ASSERT_EQ(fi_tsend(plain, &to_b[k], sizeof to_b[k], nullptr, b->addr, 1, &to_b[k]), 0);
    for (int t = 0; t < 2; ++t)
      ASSERT_EQ(fi_tsend(b->tx[t], &to_p[t][k], sizeof to_p[t][k], nullptr, p_addr, 2,
                         &to_p[t][k]),
                0);
  }
  fi_cq_tagged_entry e{};
  uint64_t sum_b = 0, sum_p = 0;
  for (int k = 0; k < rounds; ++k) {
    fi_addr_t src = FI_ADDR_NOTAVAIL;
    ASSERT_EQ(await(b->rx_cq[0], &e, &src), 1) << k;
    sum_b += *static_cast<uint64_t*>(e.op_context);
    EXPECT_EQ(src, p_addr);
  }
  for (int k = 0; k < 2 * rounds; ++k) {
    // The plain endpoint's CQ carries its sends' completions too.
    fi_addr_t src = FI_ADDR_NOTAVAIL;
    ASSERT_EQ(await(pcq, &e, &src), 1) << k;
    if (!(e.flags & FI_RECV)) {
      --k;
      continue;
    }
    sum_p += *static_cast<uint64_t*>(e.op_context);
    EXPECT_EQ(src, b->addr);
  }
  EXPECT_EQ(sum_b, 100u + 101 + 102);
  EXPECT_EQ(sum_p, 200u + 201 + 202 + 300 + 301 + 302);
  for (int t = 0; t < 2; ++t)
    for (int k = 0; k < rounds; ++k) {
      ASSERT_EQ(await(b->tx_cq[t], &e), 1);
      EXPECT_TRUE(e.flags & FI_SEND);
    }
  EXPECT_TRUE(quiet(b->rx_cq[1]));
}

// A send to a receive context the peer does not have: refused, nothing
// delivered. shm knows at once (the context's region does not exist); tcp
// learns it from the listener at that port, which refuses (it is not the
// context meant); udp hears nothing back and fails the send at its peer
// timeout (FI_UDP_RDM_PEER_TIMEOUT_MS, 1 s in ctest's
// conformance.udp_rdm_sep_missing).
TEST_P(sep, a_send_to_a_receive_context_the_peer_lacks_fails) {
  const bool waits_for_timeout = std::string(GetParam().prov) == "udp";
  if (waits_for_timeout) {
    const char* t = std::getenv("FI_UDP_RDM_PEER_TIMEOUT_MS");
    if (!t || std::atoi(t) <= 0 || std::atoi(t) > 2000)
      GTEST_SKIP() << "udp fails it at its peer timeout; ctest's conformance.udp_rdm_sep_missing "
                      "runs this with 1 s";
  }
  ASSERT_NO_FATAL_FAILURE(open_av_bits(2));
  scalable* a = open_sep(1, 2);
  ASSERT_TRUE(a);
  recorder rec;
  ASSERT_EQ(rec.ret, 0);
  uint64_t v = 42;
  size_t logged = rec.lines_count();
  ssize_t r = fi_send(a->tx[0], &v, sizeof v, nullptr, fi_rx_addr(a->addr, 3, 2), &v);
  if (r == 0) {
    fi_cq_tagged_entry ok{};
    ASSERT_EQ(await(a->tx_cq[0], &ok), -FI_EAVAIL) << "a send to a missing context completes in error";
    fi_cq_err_entry err{};
    ASSERT_EQ(fi_cq_readerr(a->tx_cq[0], &err, 0), 1);
    EXPECT_EQ(err.op_context, &v);
    EXPECT_EQ(err.err, waits_for_timeout ? FI_ETIMEDOUT : FI_ECONNREFUSED);
    EXPECT_GE(rec.lines_count(), logged + 1);
  } else {
    EXPECT_EQ(r, -FI_ECONNREFUSED);
    EXPECT_EQ(rec.lines_count(), logged + 1);
  }
  for (fid_cq* c : a->rx_cq) EXPECT_TRUE(quiet(c)) << "nothing delivered";
}

// A receive context with no CQ or counter is there as a target of RMA
// (Open MPI's one-sided btl opens them so). Under manual progress nothing
// it is bound to drives it: its transmit contexts' progress does, so a
// write and a read aimed at it complete while the target polls only the CQ
// of its transmit context.
TEST_P(sep, a_receive_context_without_a_cq_is_served_through_its_transmit_contexts) {
  ASSERT_NO_FATAL_FAILURE(open_av_bits(0));
  scalable* target = open_sep(1, 1, FI_CQ_FORMAT_TAGGED, false);
  scalable* origin = open_sep(1, 1);
  ASSERT_TRUE(target && origin);
  uint64_t window[4] = {0, 0, 0, 0};
  fid_mr* mr = nullptr;
  ASSERT_EQ(fi_mr_reg(domain, window, sizeof window, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 7, 0,
                      &mr, nullptr),
            0);
  const uint64_t base =
      (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? reinterpret_cast<uintptr_t>(window) : 0;
  const uint64_t key = fi_mr_key(mr);
  uint64_t put[2] = {11, 22}, got[2] = {0, 0};
  ASSERT_EQ(fi_write(origin->tx[0], put, sizeof put, nullptr, target->addr, base, key, put), 0);
  ASSERT_EQ(fi_read(origin->tx[0], got, sizeof got, nullptr, target->addr, base, key, got), 0);
  int done = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (done < 2 && std::chrono::steady_clock::now() < deadline) {
    fi_cq_tagged_entry e{};
    ssize_t n = fi_cq_read(origin->tx_cq[0], &e, 1);
    if (n == 1) ++done;
    else ASSERT_EQ(n, -FI_EAGAIN);
    EXPECT_EQ(fi_cq_read(target->tx_cq[0], &e, 1), -FI_EAGAIN);  // drives the target
  }
  EXPECT_EQ(done, 2);
  EXPECT_EQ(window[0], 11u);
  EXPECT_EQ(window[1], 22u);
  EXPECT_EQ(got[0], 11u);
  EXPECT_EQ(got[1], 22u);
  EXPECT_EQ(fi_close(&mr->fid), 0);
}

// What fi_getinfo answers: the counts asked for, within max_ep_tx_ctx /
// max_ep_rx_ctx; more than those finds nothing.
TEST_P(sep, getinfo_answers_the_context_counts_asked_for) {
  ASSERT_GE(info->domain_attr->max_ep_tx_ctx, 2u);
  ASSERT_GE(info->domain_attr->max_ep_rx_ctx, 2u);
  fi_info* h = fi_dupinfo(hints);
  h->ep_attr->tx_ctx_cnt = 3;
  h->ep_attr->rx_ctx_cnt = 2;
  fi_info* got = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &got), 0);
  EXPECT_EQ(got->ep_attr->tx_ctx_cnt, 3u);
  EXPECT_EQ(got->ep_attr->rx_ctx_cnt, 2u);
  EXPECT_TRUE(got->caps & FI_NAMED_RX_CTX);
  fi_freeinfo(got);
  got = nullptr;
  h->ep_attr->tx_ctx_cnt = info->domain_attr->max_ep_tx_ctx + 1;
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &got), -FI_ENODATA);
  fi_freeinfo(got);
  fi_freeinfo(h);
}

// Bad input: each gets the documented error, one log line, and changes
// nothing (the endpoint still works afterwards).
TEST_P(sep, bad_input_is_refused_and_changes_nothing) {
  ASSERT_NO_FATAL_FAILURE(open_av_bits(2));
  recorder rec;
  ASSERT_EQ(rec.ret, 0);
  // More contexts than the domain offers; an fi_endpoint with several.
  fi_info* too_many = info_with(info->domain_attr->max_ep_tx_ctx + 1, 1);
  fid_ep* s = nullptr;
  EXPECT_EQ(fi_scalable_ep(domain, too_many, &s, nullptr), -FI_EINVAL);
  EXPECT_EQ(s, nullptr);
  fi_freeinfo(too_many);
  fi_info* two = info_with(2, 2);
  fid_ep* plain = nullptr;
  EXPECT_EQ(fi_endpoint(domain, two, &plain, nullptr), -FI_EINVAL);
  EXPECT_EQ(plain, nullptr);
  EXPECT_GE(rec.with("fi_scalable_ep").size(), 2u);
  // An AV with negative rx_ctx_bits.
  fi_av_attr bad{};
  bad.type = FI_AV_TABLE;
  bad.rx_ctx_bits = -1;
  fid_av* bad_av = nullptr;
  EXPECT_EQ(fi_av_open(domain, &bad, &bad_av, nullptr), -FI_EINVAL);
  EXPECT_EQ(rec.with("rx_ctx_bits").size(), 1u);

  ASSERT_EQ(fi_scalable_ep(domain, two, &s, nullptr), 0);
  fi_freeinfo(two);
  auto* holder = new scalable;
  holder->ep = s;
  seps.push_back(holder);
  fid_ep* c = nullptr;
  // Indices out of range.
  EXPECT_EQ(fi_tx_context(s, 2, nullptr, &c, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_tx_context(s, -1, nullptr, &c, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_rx_context(s, 2, nullptr, &c, nullptr), -FI_EINVAL);
  EXPECT_EQ(c, nullptr);
  EXPECT_EQ(rec.with("outside the endpoint's 2 contexts").size(), 3u);
  // Attributes beyond the endpoint's.
  fi_tx_attr big = *info->tx_attr;
  big.inject_size = info->tx_attr->inject_size + 1;
  EXPECT_EQ(fi_tx_context(s, 0, &big, &c, nullptr), -FI_EINVAL);
  EXPECT_EQ(rec.with("inject_size").size(), 1u);
  // Enabling before an AV is bound; binding a CQ to the scalable endpoint.
  EXPECT_EQ(fi_enable(s), -FI_ENOAV);
  fid_cq* cq = open_cq();
  EXPECT_EQ(fi_scalable_ep_bind(s, &cq->fid, 0), -FI_EINVAL);
  // A context opened twice; the endpoint closed while a context is open.
  fi_tx_attr asked{};
  asked.size = 8;
  ASSERT_EQ(fi_tx_context(s, 0, &asked, &c, nullptr), 0);
  holder->tx.push_back(c);
  EXPECT_EQ(asked.size, 8u) << "the attributes the context has are returned";
  EXPECT_EQ(asked.inject_size, info->tx_attr->inject_size);
  fid_ep* again = nullptr;
  EXPECT_EQ(fi_tx_context(s, 0, nullptr, &again, nullptr), -FI_EBUSY);
  EXPECT_EQ(again, nullptr);
  EXPECT_EQ(fi_close(&s->fid), -FI_EBUSY);
  // A plain endpoint has no contexts.
  fid_ep* ep = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
  EXPECT_EQ(fi_tx_context(ep, 0, nullptr, &c, nullptr), -FI_ENOSYS);
  EXPECT_EQ(fi_close(&ep->fid), 0);
  // A context takes its AV from its scalable endpoint: bound directly, the
  // scalable endpoint's own bind would later fail on it, half done.
  EXPECT_EQ(fi_ep_bind(c, &av->fid, 0), -FI_EINVAL);
  EXPECT_EQ(rec.with("takes its address vector from its scalable endpoint").size(), 1u);
  // After all that, the endpoint works: bind, enable, send to itself.
  ASSERT_EQ(fi_scalable_ep_bind(s, &av->fid, 0), 0);
  EXPECT_EQ(fi_scalable_ep_bind(s, &av->fid, 0), -FI_EINVAL) << "an AV bound twice";
  fid_ep* rx = nullptr;
  ASSERT_EQ(fi_rx_context(s, 1, nullptr, &rx, nullptr), 0);
  holder->rx.push_back(rx);
  fid_cq* rcq = open_cq();
  ASSERT_EQ(fi_ep_bind(c, &cq->fid, FI_TRANSMIT), 0);
  ASSERT_EQ(fi_ep_bind(rx, &rcq->fid, FI_RECV), 0);
  ASSERT_EQ(fi_enable(c), 0);
  ASSERT_EQ(fi_enable(rx), 0);
  ASSERT_EQ(fi_enable(s), 0);
  char name[256];
  size_t len = sizeof name;
  ASSERT_EQ(fi_getname(&s->fid, name, &len), 0);
  ASSERT_EQ(fi_av_insert(av, name, 1, &holder->addr, 0, nullptr), 1);
  uint64_t v = 42, w = 0;
  ASSERT_EQ(fi_recv(rx, &w, sizeof w, nullptr, FI_ADDR_UNSPEC, &w), 0);
  ASSERT_EQ(fi_send(c, &v, sizeof v, nullptr, fi_rx_addr(holder->addr, 1, 2), &v), 0);
  fi_cq_tagged_entry e{};
  ASSERT_EQ(await(rcq, &e), 1);
  EXPECT_EQ(w, 42u);
  ASSERT_EQ(await(cq, &e), 1);
}

INSTANTIATE_TEST_SUITE_P(all, sep, testing::ValuesIn(all_configs), config_name);

// The same object with messages alone (FI_MSG and FI_SOURCE), so that
// datagram endpoints, which have no tags, RMA or directed receives, run it.
class sep_msg : public sep {
 protected:
  uint64_t extra_caps() const override { return FI_NAMED_RX_CTX | FI_SOURCE; }
};

// Each transmit context sends to a receive context it names: the message
// arrives there only, and names the sending scalable endpoint.
TEST_P(sep_msg, messages_reach_the_named_receive_context_and_name_their_sender) {
  constexpr int n = 2, bits = 1;
  ASSERT_NO_FATAL_FAILURE(open_av_bits(bits));
  scalable* a = open_sep(n, 1, FI_CQ_FORMAT_DATA);
  scalable* b = open_sep(1, n, FI_CQ_FORMAT_DATA);
  ASSERT_TRUE(a && b);
  ASSERT_GE(info->domain_attr->max_ep_tx_ctx, size_t{n});
  uint64_t in[n] = {}, out[n] = {};
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(fi_recv(b->rx[r], &in[r], sizeof in[r], nullptr, FI_ADDR_UNSPEC, &in[r]), 0);
  for (int t = 0; t < n; ++t) {
    out[t] = 100 + t;
    // Transmit context t to receive context n-1-t: not the identity.
    ASSERT_EQ(fi_send(a->tx[t], &out[t], sizeof out[t], nullptr,
                      fi_rx_addr(b->addr, n - 1 - t, bits), &out[t]),
              0);
  }
  for (int r = 0; r < n; ++r) {
    fi_cq_tagged_entry e{};
    fi_addr_t src = FI_ADDR_NOTAVAIL;
    ASSERT_EQ(await(b->rx_cq[r], &e, &src), 1) << "receive context " << r;
    EXPECT_EQ(e.op_context, &in[r]);
    EXPECT_EQ(in[r], uint64_t(100 + (n - 1 - r)));
    EXPECT_EQ(src, a->addr) << "the sender is known by its scalable endpoint's address";
  }
  for (int t = 0; t < n; ++t) {
    fi_cq_tagged_entry e{};
    ASSERT_EQ(await(a->tx_cq[t], &e), 1) << "transmit context " << t;
    EXPECT_EQ(e.op_context, &out[t]);
  }
  for (int r = 0; r < n; ++r) EXPECT_TRUE(quiet(b->rx_cq[r]));
}

TEST_P(sep_msg, getinfo_answers_the_context_counts_asked_for) {
  fi_info* h = fi_dupinfo(hints);
  h->ep_attr->tx_ctx_cnt = 3;
  h->ep_attr->rx_ctx_cnt = 2;
  fi_info* got = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &got), 0);
  EXPECT_EQ(got->ep_attr->tx_ctx_cnt, 3u);
  EXPECT_EQ(got->ep_attr->rx_ctx_cnt, 2u);
  EXPECT_TRUE(got->caps & FI_NAMED_RX_CTX);
  fi_freeinfo(got);
  fi_freeinfo(h);
}

// A receive-context index past what any provider's scalable endpoint has
// (shm 128, tcp and udp 64) is refused at the call with one log line, and
// sends nothing: the endpoint still works after.
TEST_P(sep_msg, an_index_past_the_providers_contexts_is_refused_at_the_call) {
  constexpr int bits = 8;
  ASSERT_NO_FATAL_FAILURE(open_av_bits(bits));
  scalable* a = open_sep(1, 1, FI_CQ_FORMAT_DATA);
  ASSERT_TRUE(a);
  recorder rec;
  ASSERT_EQ(rec.ret, 0);
  uint64_t v = 5, w = 0;
  size_t logged = rec.lines_count();
  EXPECT_EQ(fi_send(a->tx[0], &v, sizeof v, nullptr, fi_rx_addr(a->addr, 200, bits), &v),
            -FI_EINVAL);
  EXPECT_EQ(rec.lines_count(), logged + 1);
  ASSERT_EQ(fi_recv(a->rx[0], &w, sizeof w, nullptr, FI_ADDR_UNSPEC, &w), 0);
  ASSERT_EQ(fi_send(a->tx[0], &v, sizeof v, nullptr, fi_rx_addr(a->addr, 0, bits), &v), 0);
  fi_cq_tagged_entry e{};
  ASSERT_EQ(await(a->rx_cq[0], &e), 1);
  EXPECT_EQ(w, 5u);
  ASSERT_EQ(await(a->tx_cq[0], &e), 1);
  EXPECT_EQ(e.op_context, &v) << "only the good send completes";
}

INSTANTIATE_TEST_SUITE_P(all, sep_msg, testing::ValuesIn(all_configs), config_name);

}  // namespace
}  // namespace conformance
