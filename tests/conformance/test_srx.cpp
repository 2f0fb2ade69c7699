// SPDX-License-Identifier: MIT
// weft — the application's shared receive context (fi_srx_context,
// fi_endpoint(3)): several endpoints bound to one context all take their
// receives from its one posted queue, and each message completes on the CQ
// of the endpoint it arrived on. Offered where domain_attr->max_ep_srx_ctx
// is above 0 (shm, tcp, udp RDM; tcp's MSG endpoints in test_srx_msg.cpp);
// elsewhere (udp DGRAM) fi_srx_context is -FI_ENOSYS and an
// rx_ctx_cnt of FI_SHARED_CONTEXT in the hints finds nothing.
#include "fixture.hpp"

#include <rdma/fi_tagged.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

namespace conformance {
namespace {

// The providers that share receive contexts with applications today.
bool offers_srx(const config& c) {
  return std::string(c.prov) == "shm" || std::string(c.prov) == "tcp" ||
         std::string(c.prov) == "lnx" || (std::string(c.prov) == "udp" && c.ep_type == FI_EP_RDM);
}

class srx : public provider_test {
 protected:
  uint64_t extra_caps() const override { return FI_TAGGED | FI_SOURCE; }

  void TearDown() override {
    // Endpoints hold the context, the context holds the CQ that takes its
    // own completions: endpoints first, then the context.
    for (auto it = eps.rbegin(); it != eps.rend(); ++it) EXPECT_EQ(fi_close(&(*it)->fid), 0);
    eps.clear();
    if (ctx) { EXPECT_EQ(fi_close(&ctx->fid), 0); }
    provider_test::TearDown();
  }

// GTEST_SKIP returns only from the function it is in: the test body's.
#define REQUIRE_SRX()                                                                      \
  do {                                                                                     \
    if (!offers_srx(GetParam()))                                                           \
      GTEST_SKIP() << GetParam().prov                                                      \
                   << " offers no shared receive context (max_ep_srx_ctx 0)";              \
  } while (0)

  // An enabled endpoint on its own CQ, bound to `shared` when given.
  fid_ep* open_rx_ep(fid_cq* cq, fid_ep* shared, fi_addr_t* self) {
    return open_ep(cq, self, shared ? &shared->fid : nullptr);
  }

  // Two senders on one CQ, two receivers B and C each on its own CQ, both
  // bound to one shared receive context.
  void open_world() {
    fi_rx_attr ra{};
    ASSERT_EQ(fi_srx_context(domain, &ra, &ctx, this), 0);
    ASSERT_NE(ctx, nullptr);
    EXPECT_EQ(ctx->fid.fclass, static_cast<size_t>(FI_CLASS_SRX_CTX));
    open_av();
    txcq = open_cq(FI_CQ_FORMAT_TAGGED);
    cqb = open_cq(FI_CQ_FORMAT_TAGGED);
    cqc = open_cq(FI_CQ_FORMAT_TAGGED);
    s1 = open_rx_ep(txcq, nullptr, &a1);
    s2 = open_rx_ep(txcq, nullptr, &a2);
    b = open_rx_ep(cqb, ctx, &ab);
    c = open_rx_ep(cqc, ctx, &ac);
  }

  // Under manual progress a sender moves only when its CQ is read (tcp
  // connects on the first send and writes once connected): waiting on a
  // receiver's CQ reads the senders' too. Send completions are not checked.
  template <class Entry>
  ssize_t read_rx(fid_cq* cq, Entry* e, fi_addr_t* src = nullptr) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
      ssize_t n = src ? fi_cq_readfrom(cq, e, 1, src) : fi_cq_read(cq, e, 1);
      if (n != -FI_EAGAIN || std::chrono::steady_clock::now() > deadline) return n;
      fi_cq_tagged_entry t;
      fi_cq_read(txcq, &t, 1);
    }
  }
  // Both receivers' CQs stay empty over `rounds` reads, the senders moving.
  void expect_nothing(int rounds) {
    fi_cq_tagged_entry e{};
    for (int i = 0; i < rounds; ++i) {
      EXPECT_EQ(fi_cq_read(cqb, &e, 1), -FI_EAGAIN);
      EXPECT_EQ(fi_cq_read(cqc, &e, 1), -FI_EAGAIN);
      fi_cq_read(txcq, &e, 1);
    }
  }

  fid_ep* ctx = nullptr;
  fid_cq *txcq = nullptr, *cqb = nullptr, *cqc = nullptr;
  fid_ep *s1 = nullptr, *s2 = nullptr, *b = nullptr, *c = nullptr;
  fi_addr_t a1 = FI_ADDR_NOTAVAIL, a2 = FI_ADDR_NOTAVAIL, ab = FI_ADDR_NOTAVAIL,
            ac = FI_ADDR_NOTAVAIL;
};

TEST_P(srx, hints_and_domain_attr_say_whether_it_is_offered) {
  EXPECT_EQ(info->domain_attr->max_ep_srx_ctx > 0, offers_srx(GetParam()));
  fi_info* h = fi_dupinfo(hints);
  h->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
  fi_info* got = nullptr;
  const bool ip = is_ip_format(info->addr_format);
  int ret = fi_getinfo(FI_VERSION(1, 17), ip ? "127.0.0.1" : nullptr, nullptr, ip ? FI_SOURCE : 0,
                       h, &got);
  if (offers_srx(GetParam())) {
    ASSERT_EQ(ret, 0);
    for (fi_info* i = got; i; i = i->next) {
      EXPECT_EQ(i->ep_attr->rx_ctx_cnt, FI_SHARED_CONTEXT);
      EXPECT_GT(i->domain_attr->max_ep_srx_ctx, 0u);
    }
  } else {
    EXPECT_EQ(ret, -FI_ENODATA);
  }
  fi_freeinfo(got);
  fi_freeinfo(h);
}

TEST_P(srx, srx_context_is_enosys_where_not_offered) {
  fi_rx_attr ra{};
  fid_ep* s = nullptr;
  int ret = fi_srx_context(domain, &ra, &s, nullptr);
  if (offers_srx(GetParam())) {
    ASSERT_EQ(ret, 0);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->fid.fclass, static_cast<size_t>(FI_CLASS_SRX_CTX));
    // A receive context: nothing to transmit.
    EXPECT_EQ(fi_send(s, "x", 1, nullptr, 0, nullptr), -FI_ENOSYS);
    EXPECT_EQ(fi_tinject(s, "x", 1, 0, 1), -FI_ENOSYS);
    size_t v = 0, len = sizeof v;
    EXPECT_EQ(fi_getopt(&s->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, &len), 0);
    EXPECT_EQ(fi_close(&s->fid), 0);
  } else {
    EXPECT_EQ(ret, -FI_ENOSYS);
    EXPECT_EQ(s, nullptr);
  }
}

TEST_P(srx, endpoints_take_receives_from_one_posted_queue) {
  REQUIRE_SRX();
  open_world();
  ASSERT_TRUE(s1 && s2 && b && c);
  EXPECT_EQ(fi_rx_size_left(ctx), static_cast<ssize_t>(1024));
  char buf[4][16] = {};
  fi_context rctx[4], sctx[4];
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(fi_recv(ctx, buf[i], sizeof buf[i], nullptr, FI_ADDR_UNSPEC, &rctx[i]), 0);
  EXPECT_EQ(fi_rx_size_left(ctx), static_cast<ssize_t>(1020));
  // The endpoints have no receive queue of their own.
  char own[4];
  EXPECT_EQ(fi_recv(b, own, sizeof own, nullptr, FI_ADDR_UNSPEC, &rctx[0]), -FI_ENOSYS);

  struct step {
    fid_ep* from;
    fi_addr_t src, dest;
    fid_cq* cq;
    const char* text;
  };
  const step steps[4] = {{s1, a1, ab, cqb, "one"},
                         {s2, a2, ac, cqc, "two!"},
                         {s2, a2, ab, cqb, "three"},
                         {s1, a1, ac, cqc, "four..."}};
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    const step& st = steps[i];
    const size_t len = std::strlen(st.text) + 1;
    ASSERT_EQ(fi_send(st.from, st.text, len, nullptr, st.dest, &sctx[i]), 0);
    fi_cq_tagged_entry e{};
    fi_addr_t src = FI_ADDR_NOTAVAIL;
    ASSERT_EQ(read_rx(st.cq, &e, &src), 1);
    // The oldest posted receive, whichever endpoint the message came to.
    EXPECT_EQ(e.op_context, &rctx[i]);
    EXPECT_EQ(e.len, len);
    EXPECT_EQ(e.flags, uint64_t{FI_RECV | FI_MSG});
    EXPECT_EQ(src, st.src);
    EXPECT_STREQ(buf[i], st.text);
  }
  fi_cq_tagged_entry e{};
  EXPECT_EQ(fi_cq_read(cqb, &e, 1), -FI_EAGAIN);
  EXPECT_EQ(fi_cq_read(cqc, &e, 1), -FI_EAGAIN);
  EXPECT_EQ(fi_rx_size_left(ctx), static_cast<ssize_t>(1024));
}

TEST_P(srx, a_message_before_its_receive_completes_on_its_endpoint) {
  REQUIRE_SRX();
  open_world();
  ASSERT_TRUE(s1 && s2 && b && c);
  fi_context sctx[2], rctx[2];
  ASSERT_EQ(fi_send(s1, "early-c", 8, nullptr, ac, &sctx[0]), 0);
  ASSERT_EQ(fi_send(s2, "early-b!", 9, nullptr, ab, &sctx[1]), 0);
  // Let both receivers take their messages in (unexpected, in the shared queue).
  fi_cq_tagged_entry e{};
  expect_nothing(50);
  char x[16] = {}, y[16] = {};
  ASSERT_EQ(fi_recv(ctx, x, sizeof x, nullptr, FI_ADDR_UNSPEC, &rctx[0]), 0);
  ASSERT_EQ(fi_recv(ctx, y, sizeof y, nullptr, FI_ADDR_UNSPEC, &rctx[1]), 0);
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  // Which message the shared queue took first depends on which receiver's
  // progress ran first; each completes on its own endpoint's CQ.
  ASSERT_EQ(read_rx(cqc, &e, &src), 1);
  EXPECT_EQ(e.len, 8u);
  EXPECT_EQ(src, a1);
  char* got_c = static_cast<char*>(e.buf);
  ASSERT_TRUE(e.op_context == &rctx[0] || e.op_context == &rctx[1]);
  EXPECT_STREQ(got_c, "early-c");
  ASSERT_EQ(read_rx(cqb, &e, &src), 1);
  EXPECT_EQ(e.len, 9u);
  EXPECT_EQ(src, a2);
  EXPECT_STREQ(static_cast<char*>(e.buf), "early-b!");
}

TEST_P(srx, tagged_receives_through_the_context) {
  REQUIRE_SRX();
  open_world();
  ASSERT_TRUE(s1 && s2 && b && c);
  char t7[16] = {}, t9[16] = {};
  fi_context r7, r9, sctx[2];
  ASSERT_EQ(fi_trecv(ctx, t7, sizeof t7, nullptr, FI_ADDR_UNSPEC, 7, 0, &r7), 0);
  ASSERT_EQ(fi_trecv(ctx, t9, sizeof t9, nullptr, FI_ADDR_UNSPEC, 9, 0, &r9), 0);
  ASSERT_EQ(fi_tsend(s1, "nine", 5, nullptr, ac, 9, &sctx[0]), 0);
  fi_cq_tagged_entry e{};
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(read_rx(cqc, &e, &src), 1);
  EXPECT_EQ(e.op_context, &r9);
  EXPECT_EQ(e.tag, 9u);
  EXPECT_EQ(e.flags, uint64_t{FI_RECV | FI_TAGGED});
  EXPECT_EQ(src, a1);
  EXPECT_STREQ(t9, "nine");
  ASSERT_EQ(fi_tsend(s2, "seven", 6, nullptr, ab, 7, &sctx[1]), 0);
  ASSERT_EQ(read_rx(cqb, &e, &src), 1);
  EXPECT_EQ(e.op_context, &r7);
  EXPECT_EQ(e.tag, 7u);
  EXPECT_EQ(src, a2);
  EXPECT_STREQ(t7, "seven");
}

TEST_P(srx, cancel_on_the_context) {
  REQUIRE_SRX();
  open_world();
  ASSERT_TRUE(s1 && s2 && b && c);
  char buf[8];
  fi_context r;
  ASSERT_EQ(fi_trecv(ctx, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, 3, 0, &r), 0);
  ASSERT_EQ(fi_cancel(&ctx->fid, &r), 0);
  // The context's own completions go to the first bound endpoint's receive CQ.
  fi_cq_tagged_entry e{};
  ASSERT_EQ(read_one(cqb, &e), -FI_EAVAIL);
  fi_cq_err_entry err{};
  ASSERT_EQ(fi_cq_readerr(cqb, &err, 0), 1);
  EXPECT_EQ(err.op_context, &r);
  EXPECT_EQ(err.err, FI_ECANCELED);
  EXPECT_EQ(fi_cancel(&ctx->fid, &r), -FI_ENOENT);
  // Nothing is left to take a message.
  fi_context s;
  ASSERT_EQ(fi_tsend(s1, "x", 2, nullptr, ab, 3, &s), 0);
  expect_nothing(50);
}

// An endpoint that closes takes back the messages it queued at the context
// (unexpected, no receive posted yet): a receive posted afterwards takes
// the next message, not one whose endpoint is gone.
TEST_P(srx, closing_an_endpoint_withdraws_its_queued_messages) {
  REQUIRE_SRX();
  open_world();
  ASSERT_TRUE(s1 && s2 && b && c);
  fi_context sctx[2], r;
  ASSERT_EQ(fi_send(s1, "gone", 5, nullptr, ab, &sctx[0]), 0);
  fi_cq_tagged_entry e{};
  expect_nothing(50);
  std::erase(eps, b);
  ASSERT_EQ(fi_close(&b->fid), 0);
  b = nullptr;
  char buf[16] = {};
  ASSERT_EQ(fi_recv(ctx, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, &r), 0);
  ASSERT_EQ(fi_send(s2, "kept", 5, nullptr, ac, &sctx[1]), 0);
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(read_rx(cqc, &e, &src), 1);
  EXPECT_EQ(e.op_context, &r);
  EXPECT_EQ(src, a2);
  EXPECT_STREQ(buf, "kept");
  EXPECT_EQ(fi_rx_size_left(ctx), static_cast<ssize_t>(1024));
}

TEST_P(srx, bad_binds_and_close_while_bound) {
  REQUIRE_SRX();
  open_world();
  ASSERT_TRUE(s1 && s2 && b && c);
  // Closing the context while endpoints use it.
  EXPECT_EQ(fi_close(&ctx->fid), -FI_EBUSY);

  fid_ep* fresh = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &fresh, nullptr), 0);
  eps.push_back(fresh);
  fi_rx_attr ra{};
  fid_ep* second = nullptr;
  ASSERT_EQ(fi_srx_context(domain, &ra, &second, nullptr), 0);
  ASSERT_EQ(fi_ep_bind(fresh, &ctx->fid, 0), 0);
  EXPECT_EQ(fi_ep_bind(fresh, &second->fid, 0), -FI_EINVAL) << "a second context";
  EXPECT_EQ(fi_ep_bind(fresh, &ctx->fid, 0), -FI_EINVAL) << "the same one twice";
  EXPECT_EQ(fi_close(&second->fid), 0) << "never bound";

  // Endpoints sharing a receive context share their AV (fi_endpoint(3)).
  fi_av_attr aa{};
  aa.type = FI_AV_TABLE;
  fid_av* av2 = nullptr;
  ASSERT_EQ(fi_av_open(domain, &aa, &av2, nullptr), 0);
  fid_ep* stray = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &stray, nullptr), 0);
  EXPECT_EQ(fi_ep_bind(stray, &cqc->fid, FI_TRANSMIT | FI_RECV), 0);
  EXPECT_EQ(fi_ep_bind(stray, &av2->fid, 0), 0);
  EXPECT_EQ(fi_ep_bind(stray, &ctx->fid, 0), 0);
  EXPECT_EQ(fi_enable(stray), -FI_EINVAL);
  EXPECT_EQ(fi_close(&stray->fid), 0);
  EXPECT_EQ(fi_close(&av2->fid), 0);

  // A context of another domain.
  fid_domain* other = nullptr;
  ASSERT_EQ(fi_domain(fabric, info, &other, nullptr), 0);
  fid_ep* foreign = nullptr;
  ASSERT_EQ(fi_srx_context(other, &ra, &foreign, nullptr), 0);
  fid_ep* lone = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &lone, nullptr), 0);
  EXPECT_EQ(fi_ep_bind(lone, &foreign->fid, 0), -FI_EINVAL);
  EXPECT_EQ(fi_close(&other->fid), -FI_EBUSY) << "the context holds its domain";
  EXPECT_EQ(fi_close(&foreign->fid), 0);
  EXPECT_EQ(fi_close(&lone->fid), 0);
  EXPECT_EQ(fi_close(&other->fid), 0);
}

// FI_THREAD_SAFE: each receiver's CQ read (its progress) on a thread of its
// own while the main thread posts to the context and sends.
TEST_P(srx, threads_drive_endpoints_of_one_context) {
  REQUIRE_SRX();
  if (GetParam().threading != FI_THREAD_SAFE)
    GTEST_SKIP() << "concurrent calls need FI_THREAD_SAFE";
  open_world();
  ASSERT_TRUE(s1 && s2 && b && c);
  constexpr int per_ep = 40;
  static char bufs[2 * per_ep][16];
  static fi_context rctx[2 * per_ep], sctx[2 * per_ep];
  std::atomic<int> got_b{0}, got_c{0};
  std::atomic<bool> bad{false};
  auto reader = [&](fid_cq* cq, fi_addr_t want_src, std::atomic<int>& got) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (got.load() < per_ep && std::chrono::steady_clock::now() < deadline) {
      fi_cq_tagged_entry e{};
      fi_addr_t src = FI_ADDR_NOTAVAIL;
      ssize_t n = fi_cq_readfrom(cq, &e, 1, &src);
      if (n == 1) {
        if (src != want_src || e.len != 8) bad = true;
        ++got;
      } else if (n != -FI_EAGAIN) {
        bad = true;
        return;
      }
    }
  };
  std::thread tb(reader, cqb, a1, std::ref(got_b));
  std::thread tc(reader, cqc, a2, std::ref(got_c));
  for (int i = 0; i < 2 * per_ep; ++i) {
    while (fi_recv(ctx, bufs[i], sizeof bufs[i], nullptr, FI_ADDR_UNSPEC, &rctx[i]) == -FI_EAGAIN) {
    }
    fid_ep* from = i % 2 ? s2 : s1;
    const fi_addr_t to = i % 2 ? ac : ab;
    ssize_t r;
    while ((r = fi_send(from, "message", 8, nullptr, to, &sctx[i])) == -FI_EAGAIN) {
      fi_cq_tagged_entry e;
      fi_cq_read(txcq, &e, 1);
    }
    ASSERT_EQ(r, 0);
  }
  // The senders move under manual progress only while their CQ is read.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (got_b.load() + got_c.load() < 2 * per_ep && std::chrono::steady_clock::now() < deadline) {
    fi_cq_tagged_entry e;
    fi_cq_read(txcq, &e, 1);
  }
  tb.join();
  tc.join();
  EXPECT_FALSE(bad.load());
  EXPECT_EQ(got_b.load(), per_ep);
  EXPECT_EQ(got_c.load(), per_ep);
  EXPECT_EQ(fi_rx_size_left(ctx), static_cast<ssize_t>(1024));
}

// Endpoints sharing both a transmit and a receive context, as
// fi_endpoint(3)'s shared contexts section allows (and libfabric's
// shared_ctx test does): each sends to the other, the receives posted once
// to the receive context, every completion on the endpoint's own CQ.
TEST_P(srx, endpoints_share_a_transmit_and_a_receive_context) {
  REQUIRE_SRX();
  fi_rx_attr ra{};
  ASSERT_EQ(fi_srx_context(domain, &ra, &ctx, nullptr), 0);
  fid_stx* stx = nullptr;
  ASSERT_EQ(fi_stx_context(domain, nullptr, &stx, nullptr), 0);
  open_av();
  fid_cq* cq1 = open_cq(FI_CQ_FORMAT_TAGGED);
  fid_cq* cq2 = open_cq(FI_CQ_FORMAT_TAGGED);
  fi_info* si = fi_dupinfo(info);
  si->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT;
  si->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
  fi_addr_t a1x = FI_ADDR_NOTAVAIL, a2x = FI_ADDR_NOTAVAIL;
  fid_ep* e[2] = {};
  fid_cq* cq[2] = {cq1, cq2};
  fi_addr_t* self[2] = {&a1x, &a2x};
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(fi_endpoint(domain, si, &e[i], nullptr), 0);
    eps.push_back(e[i]);
    ASSERT_EQ(fi_ep_bind(e[i], &stx->fid, 0), 0);
    e[i] = enable_ep(e[i], cq[i], self[i], &ctx->fid);
    ASSERT_NE(e[i], nullptr);
  }
  fi_freeinfo(si);
  char in[2][16] = {};
  fi_context rctx[2], sctx[2];
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(fi_recv(ctx, in[i], sizeof in[i], nullptr, FI_ADDR_UNSPEC, &rctx[i]), 0);
  ASSERT_EQ(fi_send(e[0], "one-to-two", 11, nullptr, a2x, &sctx[0]), 0);
  ASSERT_EQ(fi_send(e[1], "two-to-one", 11, nullptr, a1x, &sctx[1]), 0);
  // Each endpoint: its send's completion and the receive of what came to it.
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    bool sent = false, got = false;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!(sent && got) && std::chrono::steady_clock::now() < deadline) {
      fi_cq_tagged_entry x{};
      fi_cq_read(cq[1 - i], &x, 0);  // the other endpoint moves too
      if (fi_cq_read(cq[i], &x, 1) != 1) continue;
      if (x.op_context == &sctx[i]) sent = true;
      else if (x.op_context == &rctx[0] || x.op_context == &rctx[1]) {
        got = true;
        EXPECT_STREQ(static_cast<char*>(x.buf), i == 0 ? "two-to-one" : "one-to-two");
      } else ADD_FAILURE() << "a completion of another endpoint";
    }
    EXPECT_TRUE(sent && got);
  }
  for (fid_ep* x : e) {
    std::erase(eps, x);
    EXPECT_EQ(fi_close(&x->fid), 0);
  }
  EXPECT_EQ(fi_close(&stx->fid), 0);
}

// An endpoint closes while another thread posts receives to its context
// that match the messages it queued there: each message is either taken by
// one receive (completing on the closing endpoint's CQ, still open) or
// withdrawn, never both; every receive is either completed or still posted.
// (Before shm withdrew through util::srx::withdraw, a receive that matched
// a message while its endpoint closed could be finished on the deleted
// endpoint.)
TEST_P(srx, closing_an_endpoint_while_a_thread_posts_to_its_context) {
  REQUIRE_SRX();
  if (GetParam().threading != FI_THREAD_SAFE)
    GTEST_SKIP() << "concurrent calls need FI_THREAD_SAFE";
  open_world();
  ASSERT_TRUE(s1 && s2 && b && c);
  constexpr int n = 64;
  static char bufs[n][16];
  static char msgs[n][16];  // a send's buffer is the provider's until it completes
  static fi_context rctx[n], sctx[n];
  for (int i = 0; i < n; ++i) {
    char* m = msgs[i];
    std::snprintf(m, sizeof msgs[i], "queued %d", i);
    ssize_t r;
    while ((r = fi_send(s1, m, std::strlen(m) + 1, nullptr, ab, &sctx[i])) == -FI_EAGAIN) {
      fi_cq_tagged_entry e;
      fi_cq_read(txcq, &e, 1);
    }
    ASSERT_EQ(r, 0);
  }
  // b takes them in, unexpected, into the context.
  expect_nothing(200);
  std::atomic<bool> go{false};
  std::thread poster([&] {
    while (!go.load()) {
    }
    for (int i = 0; i < n; ++i)
      while (fi_recv(ctx, bufs[i], sizeof bufs[i], nullptr, FI_ADDR_UNSPEC, &rctx[i]) ==
             -FI_EAGAIN) {
      }
  });
  go = true;
  std::erase(eps, b);
  ASSERT_EQ(fi_close(&b->fid), 0);
  b = nullptr;
  poster.join();
  // What b's CQ got: receives that took a message before it closed.
  int taken = 0;
  bool seen[n] = {};
  for (;;) {
    fi_cq_tagged_entry e{};
    ssize_t r = fi_cq_read(cqb, &e, 1);
    if (r != 1) {
      ASSERT_EQ(r, -FI_EAGAIN);
      break;
    }
    auto* c = static_cast<fi_context*>(e.op_context);
    ASSERT_TRUE(c >= rctx && c < rctx + n);
    ASSERT_FALSE(seen[c - rctx]) << "a receive completed twice";
    seen[c - rctx] = true;
    EXPECT_EQ(std::strncmp(static_cast<char*>(e.buf), "queued ", 7), 0);
    ++taken;
  }
  // The rest are still posted, and cancel.
  int posted = 0;
  for (int i = 0; i < n; ++i) {
    ssize_t r = fi_cancel(&ctx->fid, &rctx[i]);
    if (r == 0) {
      EXPECT_FALSE(seen[i]) << "receive " << i << " completed and is still posted";
      ++posted;
    } else {
      EXPECT_EQ(r, -FI_ENOENT);
      EXPECT_TRUE(seen[i]) << "receive " << i << " neither completed nor posted";
    }
  }
  EXPECT_EQ(taken + posted, n);
}

INSTANTIATE_TEST_SUITE_P(all, srx, testing::ValuesIn(all_configs), config_name);

}  // namespace
}  // namespace conformance
