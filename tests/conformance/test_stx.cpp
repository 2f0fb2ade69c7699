// SPDX-License-Identifier: MIT
// weft — shared transmit contexts (fi_stx_context, fi_endpoint(3)): the
// application opens one, binds it to several endpoints, and still posts
// every transmit on an endpoint; each completion goes to the CQ of the
// endpoint it was posted on. Offered on every provider
// (domain_attr->max_ep_stx_ctx above 0), and tx_ctx_cnt = FI_SHARED_CONTEXT
// in the hints is answered as asked.
#include "fixture.hpp"
#include "log_recorder.hpp"

#include <rdma/fi_tagged.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

namespace conformance {
namespace {

class stx : public provider_test {
 protected:
  // Tagged messages where the configuration has them (not on udp DGRAM).
  uint64_t extra_caps() const override {
    const caps_table* t = caps_of(GetParam());
    return t ? t->offers & FI_TAGGED : FI_TAGGED;
  }
  bool tagged() const { return info && (info->caps & FI_TAGGED); }

  // Reads every CQ in `cqs` (driving every endpoint's progress) until each
  // has given its count of completions or a few seconds pass.
  std::vector<std::vector<fi_cq_tagged_entry>> collect(std::vector<fid_cq*> from,
                                                       std::vector<size_t> want) {
    std::vector<std::vector<fi_cq_tagged_entry>> got(from.size());
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (bool done = false; !done && std::chrono::steady_clock::now() < deadline;) {
      done = true;
      for (size_t i = 0; i < from.size(); ++i) {
        fi_cq_tagged_entry e{};
        ssize_t n = fi_cq_read(from[i], &e, 1);
        if (n == 1) got[i].push_back(e);
        else EXPECT_EQ(n, -FI_EAGAIN) << "CQ " << i;
        if (n != 1 && n != -FI_EAGAIN) return got;
        done &= got[i].size() >= want[i];
      }
    }
    return got;
  }

  void TearDown() override {
    // Endpoints hold the contexts: endpoints first.
    for (auto it = eps.rbegin(); it != eps.rend(); ++it) EXPECT_EQ(fi_close(&(*it)->fid), 0);
    eps.clear();
    for (fid_stx* s : ctxs) EXPECT_EQ(fi_close(&s->fid), 0);
    provider_test::TearDown();
  }

  fid_stx* open_stx(fi_tx_attr* attr) {
    fid_stx* s = nullptr;
    EXPECT_EQ(fi_stx_context(domain, attr, &s, this), 0);
    if (s) ctxs.push_back(s);
    return s;
  }

  // An endpoint of `i` (the fixture's info when null) on `cq`, bound to
  // `shared` when given (fixture.hpp's open_ep).
  fid_ep* open_tx_ep(fid_cq* cq, fid_stx* shared, fi_addr_t* self, const fi_info* i = nullptr,
                     int* enabled = nullptr) {
    return open_ep(cq, self, shared ? &shared->fid : nullptr, i, enabled);
  }

  // The fixture's info asking for a shared transmit context.
  fi_info* shared_info() {
    fi_info* i = fi_dupinfo(info);
    i->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT;
    return i;
  }

  std::vector<fid_stx*> ctxs;
};

TEST_P(stx, hints_and_domain_attr_say_it_is_offered) {
  EXPECT_GT(info->domain_attr->max_ep_stx_ctx, 0u);
  fi_info* h = fi_dupinfo(hints);
  h->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT;
  fi_info* got = nullptr;
  const bool ip = is_ip_format(info->addr_format);
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), ip ? "127.0.0.1" : nullptr, nullptr, ip ? FI_SOURCE : 0,
                       h, &got),
            0);
  for (fi_info* i = got; i; i = i->next) {
    EXPECT_EQ(i->ep_attr->tx_ctx_cnt, FI_SHARED_CONTEXT);
    EXPECT_GT(i->domain_attr->max_ep_stx_ctx, 0u);
  }
  fi_freeinfo(got);
  // Asking for more sharing than the domain offers finds nothing.
  h->domain_attr->max_ep_stx_ctx = info->domain_attr->max_ep_stx_ctx + 1;
  got = nullptr;
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), ip ? "127.0.0.1" : nullptr, nullptr, ip ? FI_SOURCE : 0,
                       h, &got),
            -FI_ENODATA);
  fi_freeinfo(got);
  fi_freeinfo(h);
}

TEST_P(stx, endpoints_sharing_a_context_complete_on_their_own_cqs) {
  fid_stx* s = open_stx(nullptr);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->fid.fclass, static_cast<size_t>(FI_CLASS_STX_CTX));
  EXPECT_EQ(s->fid.context, this);
  open_av();
  fid_cq* cqa = open_cq(FI_CQ_FORMAT_TAGGED);
  fid_cq* cqb = open_cq(FI_CQ_FORMAT_TAGGED);
  fid_cq* cqr = open_cq(FI_CQ_FORMAT_TAGGED);
  fi_info* si = shared_info();
  fi_addr_t aa = FI_ADDR_NOTAVAIL, ab = FI_ADDR_NOTAVAIL, ar = FI_ADDR_NOTAVAIL;
  fid_ep* a = open_tx_ep(cqa, s, &aa, si);
  fid_ep* b = open_tx_ep(cqb, s, &ab, si);
  fid_ep* r = open_tx_ep(cqr, nullptr, &ar);
  fi_freeinfo(si);
  ASSERT_TRUE(a && b && r);

  // Two messages (and two tagged ones where tagged messages are offered),
  // from a and b through the one context.
  const int n = tagged() ? 4 : 2;
  char got[4][16] = {};
  fi_context rctx[4], sctx[4];
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(fi_recv(r, got[i], sizeof got[i], nullptr, FI_ADDR_UNSPEC, &rctx[i]), 0);
  for (int i = 2; i < n; ++i)
    ASSERT_EQ(fi_trecv(r, got[i], sizeof got[i], nullptr, FI_ADDR_UNSPEC, 40 + i, 0, &rctx[i]), 0);
  ASSERT_EQ(fi_send(a, "from-a", 7, nullptr, ar, &sctx[0]), 0);
  ASSERT_EQ(fi_send(b, "from-b", 7, nullptr, ar, &sctx[1]), 0);
  if (tagged()) {
    ASSERT_EQ(fi_tsend(b, "tag-b", 6, nullptr, ar, 42, &sctx[2]), 0);
    ASSERT_EQ(fi_tinject(a, "tag-a", 6, ar, 43), 0);
  }

  // Each sender's completions on its own CQ, none on the other's; the
  // receiver took every message, each in its receive.
  auto done = collect({cqa, cqb, cqr}, {1, size_t(n / 2), size_t(n)});
  ASSERT_EQ(done[0].size(), 1u);
  EXPECT_EQ(done[0][0].op_context, &sctx[0]);
  EXPECT_EQ(done[0][0].flags, uint64_t{FI_SEND | FI_MSG});
  ASSERT_EQ(done[1].size(), size_t(n / 2));
  for (size_t k = 0; k < done[1].size(); ++k) EXPECT_EQ(done[1][k].op_context, &sctx[k + 1]);
  ASSERT_EQ(done[2].size(), size_t(n));
  bool seen[4] = {};
  for (const auto& e : done[2]) {
    auto* c = static_cast<fi_context*>(e.op_context);
    ASSERT_TRUE(c >= rctx && c < rctx + n);
    seen[c - rctx] = true;
  }
  for (int i = 0; i < n; ++i) EXPECT_TRUE(seen[i]) << i;
  if (tagged()) {
    EXPECT_STREQ(got[2], "tag-b");
    EXPECT_STREQ(got[3], "tag-a");
  }
  EXPECT_TRUE((!std::strcmp(got[0], "from-a") && !std::strcmp(got[1], "from-b")) ||
              (!std::strcmp(got[0], "from-b") && !std::strcmp(got[1], "from-a")));
  fi_cq_tagged_entry e{};
  EXPECT_EQ(fi_cq_read(cqa, &e, 1), -FI_EAGAIN);
  EXPECT_EQ(fi_cq_read(cqb, &e, 1), -FI_EAGAIN);
  EXPECT_EQ(fi_cq_read(cqr, &e, 1), -FI_EAGAIN);
}

TEST_P(stx, the_context_takes_no_operations_and_outlives_its_endpoints) {
  fid_stx* s = nullptr;
  ASSERT_EQ(fi_stx_context(domain, nullptr, &s, nullptr), 0);
  ASSERT_NE(s, nullptr);
  fi_context c;
  EXPECT_EQ(fi_cancel(&s->fid, &c), -FI_ENOSYS);
  size_t v = 0, len = sizeof v;
  EXPECT_EQ(fi_getopt(&s->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, &len), -FI_ENOPROTOOPT);
  fid_ep* ep = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
  ASSERT_EQ(fi_ep_bind(ep, &s->fid, 0), 0);
  EXPECT_EQ(fi_close(&s->fid), -FI_EBUSY);
  EXPECT_EQ(fi_close(&ep->fid), 0);
  EXPECT_EQ(fi_close(&s->fid), 0);
}

TEST_P(stx, bad_binds_are_refused) {
  fid_stx* s = open_stx(nullptr);
  fid_stx* s2 = open_stx(nullptr);
  ASSERT_TRUE(s && s2);
  fid_ep* ep = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
  eps.push_back(ep);
  EXPECT_EQ(fi_ep_bind(ep, &s->fid, FI_SEND), -FI_EBADFLAGS);
  ASSERT_EQ(fi_ep_bind(ep, &s->fid, 0), 0);
  // One shared transmit context per endpoint.
  EXPECT_EQ(fi_ep_bind(ep, &s2->fid, 0), -FI_EINVAL);
  EXPECT_EQ(fi_ep_bind(ep, &s->fid, 0), -FI_EINVAL);

  // A context of another domain.
  fid_domain* other = nullptr;
  ASSERT_EQ(fi_domain(fabric, info, &other, nullptr), 0);
  fid_stx* foreign = nullptr;
  ASSERT_EQ(fi_stx_context(other, nullptr, &foreign, nullptr), 0);
  fid_ep* ep2 = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &ep2, nullptr), 0);
  eps.push_back(ep2);
  EXPECT_EQ(fi_ep_bind(ep2, &foreign->fid, 0), -FI_EINVAL);
  EXPECT_EQ(fi_close(&foreign->fid), 0);
  EXPECT_EQ(fi_close(&other->fid), 0);

  // After fi_enable.
  open_av();
  fid_cq* cq = open_cq();
  fi_addr_t self = FI_ADDR_NOTAVAIL;
  fid_ep* live = open_tx_ep(cq, nullptr, &self);
  ASSERT_NE(live, nullptr);
  EXPECT_EQ(fi_ep_bind(live, &s2->fid, 0), -FI_EOPBADSTATE);
}

TEST_P(stx, attributes_beyond_the_domain_are_refused) {
  fid_stx* s = nullptr;
  fi_tx_attr a{};
  ASSERT_EQ(fi_stx_context(domain, &a, &s, nullptr), 0);  // zeros: the domain's
  ASSERT_EQ(fi_close(&s->fid), 0);
  struct bad_t {
    const char* what;
    void (*make)(fi_tx_attr&, const fi_tx_attr&);
  } bad[] = {
      {"inject_size", [](fi_tx_attr& x, const fi_tx_attr& d) { x.inject_size = d.inject_size + 1; }},
      {"size", [](fi_tx_attr& x, const fi_tx_attr& d) { x.size = d.size + 1; }},
      {"iov_limit", [](fi_tx_attr& x, const fi_tx_attr& d) { x.iov_limit = d.iov_limit + 1; }},
      {"caps", [](fi_tx_attr& x, const fi_tx_attr& d) { x.caps = d.caps | FI_COLLECTIVE; }},
      {"msg_order", [](fi_tx_attr& x, const fi_tx_attr& d) { x.msg_order = ~d.msg_order & ~0ull; }},
  };
  for (const auto& b : bad) {
    SCOPED_TRACE(b.what);
    fi_tx_attr x{};
    b.make(x, *info->tx_attr);
    s = nullptr;
    EXPECT_EQ(fi_stx_context(domain, &x, &s, nullptr), -FI_EINVAL);
    EXPECT_EQ(s, nullptr);
  }
  EXPECT_EQ(fi_stx_context(domain, nullptr, nullptr, nullptr), -FI_EINVAL);
}

TEST_P(stx, an_endpoint_transmits_only_with_the_contexts_caps) {
  if (!tagged()) GTEST_SKIP() << GetParam().prov << " has no tagged messages to make a subset with";
  // A context for tagged transmits only.
  fi_tx_attr a{};
  a.caps = FI_TAGGED | FI_SEND;
  fid_stx* s = open_stx(&a);
  ASSERT_NE(s, nullptr);
  open_av();
  fid_cq* cq = open_cq(FI_CQ_FORMAT_TAGGED);
  // The fixture's endpoint sends messages too: refused at fi_enable.
  int enabled = 0;
  fi_addr_t self = FI_ADDR_NOTAVAIL;
  open_tx_ep(cq, s, &self, nullptr, &enabled);
  EXPECT_EQ(enabled, -FI_EINVAL);
  // One that only sends tagged messages is within the context.
  fi_info* tagged_only = fi_dupinfo(info);
  tagged_only->caps = FI_TAGGED | FI_SEND | FI_RECV;
  tagged_only->tx_attr->caps = FI_TAGGED | FI_SEND;
  tagged_only->rx_attr->caps = FI_TAGGED | FI_RECV;
  fi_addr_t at = FI_ADDR_NOTAVAIL;
  fid_ep* t = open_tx_ep(cq, s, &at, tagged_only, &enabled);
  EXPECT_EQ(enabled, 0);
  fi_freeinfo(tagged_only);
  ASSERT_NE(t, nullptr);
  char buf[8] = {};
  fi_context rc, sc;
  ASSERT_EQ(fi_trecv(t, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, 5, 0, &rc), 0);
  ASSERT_EQ(fi_tsend(t, "self", 5, nullptr, at, 5, &sc), 0);
  auto done = collect({cq}, {2});
  ASSERT_EQ(done[0].size(), 2u);
  bool sent = false, received = false;
  for (const auto& e : done[0]) {
    sent |= e.op_context == &sc;
    received |= e.op_context == &rc;
  }
  EXPECT_TRUE(sent && received);
  EXPECT_STREQ(buf, "self");
}

TEST_P(stx, an_endpoint_asking_for_a_shared_context_may_still_go_without) {
  // fi_endpoint(3) leaves open what an endpoint opened with tx_ctx_cnt =
  // FI_SHARED_CONTEXT does without one bound: weft lets it transmit on its
  // own (docs/decisions.md, "Shared transmit contexts").
  open_av();
  fid_cq* cq = open_cq(FI_CQ_FORMAT_TAGGED);
  fi_info* si = shared_info();
  fi_addr_t self = FI_ADDR_NOTAVAIL;
  fid_ep* ep = open_tx_ep(cq, nullptr, &self, si);
  fi_freeinfo(si);
  ASSERT_NE(ep, nullptr);
  char buf[4] = {};
  fi_context rc;
  ASSERT_EQ(fi_recv(ep, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, &rc), 0);
  ASSERT_EQ(fi_inject(ep, "hi", 3, self), 0);
  auto done = collect({cq}, {1});
  ASSERT_EQ(done[0].size(), 1u);
  EXPECT_EQ(done[0][0].op_context, &rc);
  EXPECT_STREQ(buf, "hi");
}

TEST_P(stx, no_more_endpoints_than_max_ep_stx_ctx) {
  const size_t max = info->domain_attr->max_ep_stx_ctx;
  if (max > 256) GTEST_SKIP() << "max_ep_stx_ctx " << max << ": too many endpoints to open here";
  fid_stx* s = open_stx(nullptr);
  ASSERT_NE(s, nullptr);
  for (size_t i = 0; i < max; ++i) {
    fid_ep* ep = nullptr;
    ASSERT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0) << i;
    eps.push_back(ep);
    ASSERT_EQ(fi_ep_bind(ep, &s->fid, 0), 0) << i;
  }
  fid_ep* one_more = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &one_more, nullptr), 0);
  eps.push_back(one_more);
  EXPECT_EQ(fi_ep_bind(one_more, &s->fid, 0), -FI_EINVAL);
  // A place frees when an endpoint closes.
  EXPECT_EQ(fi_close(&eps.front()->fid), 0);
  eps.erase(eps.begin());
  EXPECT_EQ(fi_ep_bind(one_more, &s->fid, 0), 0);
}

// Where scalable endpoints are not offered (the configuration's table lists
// FI_NAMED_RX_CTX as lacking; test_sep.cpp covers the others): the domain
// says so (max_ep_tx_ctx / max_ep_rx_ctx 1), hints asking for more contexts
// or FI_NAMED_RX_CTX find nothing, an AV with rx_ctx_bits is -FI_ENOSYS, and
// fi_scalable_ep is -FI_ENOSYS with one log line saying why.
TEST_P(stx, scalable_endpoints_are_refused_honestly) {
  const caps_table* t = caps_of(GetParam());
  ASSERT_NE(t, nullptr);
  if (t->offers & FI_NAMED_RX_CTX) GTEST_SKIP() << "offered: test_sep.cpp";
  EXPECT_EQ(info->domain_attr->max_ep_tx_ctx, 1u);
  EXPECT_EQ(info->domain_attr->max_ep_rx_ctx, 1u);
  EXPECT_EQ(info->caps & FI_NAMED_RX_CTX, 0u);
  const bool ip = is_ip_format(info->addr_format);
  for (int ask = 0; ask < 2; ++ask) {
    SCOPED_TRACE(ask ? "FI_NAMED_RX_CTX" : "tx_ctx_cnt 2");
    fi_info* h = fi_dupinfo(hints);
    if (ask) h->caps |= FI_NAMED_RX_CTX;
    else h->ep_attr->tx_ctx_cnt = 2;
    fi_info* got = nullptr;
    EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), ip ? "127.0.0.1" : nullptr, nullptr,
                         ip ? FI_SOURCE : 0, h, &got),
              -FI_ENODATA);
    fi_freeinfo(got);
    fi_freeinfo(h);
  }
  recorder rec;
  ASSERT_EQ(rec.ret, 0);
  fid_ep* sep = nullptr;
  EXPECT_EQ(fi_scalable_ep(domain, info, &sep, nullptr), -FI_ENOSYS);
  EXPECT_EQ(sep, nullptr);
  EXPECT_EQ(rec.with("fi_scalable_ep").size(), 1u);
  fi_av_attr attr{};
  attr.type = FI_AV_TABLE;
  attr.rx_ctx_bits = 2;
  fid_av* bits = nullptr;
  EXPECT_EQ(fi_av_open(domain, &attr, &bits, nullptr), -FI_ENOSYS);
  EXPECT_EQ(bits, nullptr);
}

INSTANTIATE_TEST_SUITE_P(all, stx, testing::ValuesIn(all_configs), config_name);

}  // namespace
}  // namespace conformance
