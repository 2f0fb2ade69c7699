// SPDX-License-Identifier: MIT
// weft — conformance fixture: a fabric, a domain, and helpers to make
// endpoints that can reach each other through an AV.
#pragma once

#include "provider_caps.hpp"

#include <chrono>
#include <vector>

namespace conformance {

class provider_test : public testing::TestWithParam<config> {
 protected:
  // Capabilities a test needs beyond FI_MSG. A provider without them skips
  // only where its table (provider_caps.hpp) says it lacks them; otherwise
  // the test fails.
  virtual uint64_t extra_caps() const { return 0; }
  // Further requirements (cq_data_size, ...), judged by the table likewise.
  virtual void adjust_hints(fi_info*) const {}
  bool asks_more() const {
    fi_info* h = fi_allocinfo();
    adjust_hints(h);
    bool more = h->domain_attr->cq_data_size || h->tx_attr->inject_size || h->ep_attr->max_msg_size;
    fi_freeinfo(h);
    return more;
  }

  void SetUp() override {
    hints = hints_for(GetParam(), FI_MSG | extra_caps());
    adjust_hints(hints);
    // IP providers bind their endpoints to the loopback address; others
    // (shm: FI_ADDR_STR) name their endpoints themselves.
    int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info);
    if (ret == 0 && is_ip_format(info->addr_format)) {
      fi_freeinfo(info);
      info = nullptr;
      hints->addr_format = FI_SOCKADDR_IN;
      ret = fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", nullptr, FI_SOURCE, hints, &info);
    }
    if (ret == -FI_ENODATA && (extra_caps() || asks_more()))
      SKIP_OR_FAIL_LACKING(FI_MSG | extra_caps(), hints);
    ASSERT_EQ(ret, 0);
    ASSERT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
    ASSERT_EQ(fi_domain(fabric, info, &domain, nullptr), 0);
  }
  void TearDown() override {
    for (auto it = eps.rbegin(); it != eps.rend(); ++it) EXPECT_EQ(fi_close(&(*it)->fid), 0);
    if (av) { EXPECT_EQ(fi_close(&av->fid), 0); }
    for (fid_cq* c : cqs) EXPECT_EQ(fi_close(&c->fid), 0);
    if (domain) { EXPECT_EQ(fi_close(&domain->fid), 0); }
    if (fabric) { EXPECT_EQ(fi_close(&fabric->fid), 0); }
    fi_freeinfo(info);
    fi_freeinfo(hints);
  }

  fid_cq* open_cq(fi_cq_format fmt = FI_CQ_FORMAT_DATA, fi_wait_obj wait = FI_WAIT_NONE,
                  size_t size = 128) {
    fi_cq_attr attr{};
    attr.format = fmt;
    attr.wait_obj = wait;
    attr.size = size;
    fid_cq* c = nullptr;
    EXPECT_EQ(fi_cq_open(domain, &attr, &c, nullptr), 0);
    if (c) cqs.push_back(c);
    return c;
  }
  fid_av* open_av(fi_av_type type = FI_AV_TABLE) {
    fi_av_attr attr{};
    attr.type = type;
    EXPECT_EQ(fi_av_open(domain, &attr, &av, nullptr), 0);
    return av;
  }
  // An enabled endpoint bound to `cq` (both directions) and the AV, with its
  // own address inserted; returns its fi_addr in `self`. `also` (a shared
  // context, a counter) is bound too when given, with `also_flags`; `i`
  // replaces the fixture's info; with `enabled`, fi_enable's result goes
  // there instead of being expected 0 (and a failed endpoint is returned
  // unnamed).
  fid_ep* open_ep(fid_cq* cq, fi_addr_t* self, fid* also = nullptr, const fi_info* i = nullptr,
                  int* enabled = nullptr, uint64_t also_flags = 0) {
    fid_ep* ep = nullptr;
    EXPECT_EQ(fi_endpoint(domain, const_cast<fi_info*>(i ? i : info), &ep, nullptr), 0);
    if (!ep) return nullptr;
    eps.push_back(ep);
    return enable_ep(ep, cq, self, also, enabled, also_flags);
  }
  // The rest of open_ep for an endpoint already opened (and bound to what
  // else it needs): `cq`, the AV and `also`, fi_enable, its name inserted.
  fid_ep* enable_ep(fid_ep* ep, fid_cq* cq, fi_addr_t* self, fid* also = nullptr,
                    int* enabled = nullptr, uint64_t also_flags = 0) {
    EXPECT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    EXPECT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
    if (also) { EXPECT_EQ(fi_ep_bind(ep, also, also_flags), 0); }
    int ret = fi_enable(ep);
    if (enabled) *enabled = ret;
    else EXPECT_EQ(ret, 0);
    if (ret) return ep;
    char name[128];
    size_t len = sizeof name;
    EXPECT_EQ(fi_getname(&ep->fid, name, &len), 0);
    EXPECT_EQ(fi_av_insert(av, name, 1, self, 0, nullptr), 1);
    return ep;
  }
  // The usual pair: one CQ, the AV, and two endpoints on them (their
  // fi_addrs in a and b).
  struct two_eps {
    fid_cq* cq;
    fid_ep* ea;
    fid_ep* eb;
    fi_addr_t a, b;
  };
  two_eps open_two_eps() {
    two_eps t{open_cq(), nullptr, nullptr, FI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL};
    open_av();
    t.ea = open_ep(t.cq, &t.a);
    t.eb = open_ep(t.cq, &t.b);
    return t;
  }
  // Reads one completion within a few seconds; -FI_EAVAIL and friends are
  // returned, never waited through.
  template <class Entry>
  ssize_t read_one(fid_cq* cq, Entry* e, fi_addr_t* src = nullptr) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
      ssize_t n = src ? fi_cq_readfrom(cq, e, 1, src) : fi_cq_read(cq, e, 1);
      if (n != -FI_EAGAIN || std::chrono::steady_clock::now() > deadline) return n;
    }
  }

  // Polls a counter (driving progress) until it reaches `n`, a few seconds
  // at most; returns the last value read.
  uint64_t wait_count(fid_cntr* c, uint64_t n) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    uint64_t v = fi_cntr_read(c);
    while (v < n && std::chrono::steady_clock::now() < deadline) v = fi_cntr_read(c);
    return v;
  }

  fi_info* hints = nullptr;
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  std::vector<fid_cq*> cqs;
  std::vector<fid_ep*> eps;
};

// An endpoint in a domain of its own (with its CQ and AV), for tests where
// another thread sends: under FI_THREAD_DOMAIN two threads never share a
// domain. `peer_name` (from fi_getname) is inserted as `peer`.
struct side {
  fid_domain* dom = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_ep* ep = nullptr;
  fi_addr_t peer = FI_ADDR_UNSPEC;

  side(fid_fabric* fabric, fi_info* info, const void* peer_name) {
    EXPECT_EQ(fi_domain(fabric, info, &dom, nullptr), 0);
    fi_cq_attr cattr{};
    cattr.format = FI_CQ_FORMAT_DATA;
    EXPECT_EQ(fi_cq_open(dom, &cattr, &cq, nullptr), 0);
    fi_av_attr aattr{};
    aattr.type = FI_AV_TABLE;
    EXPECT_EQ(fi_av_open(dom, &aattr, &av, nullptr), 0);
    EXPECT_EQ(fi_endpoint(dom, info, &ep, nullptr), 0);
    EXPECT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    EXPECT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
    EXPECT_EQ(fi_enable(ep), 0);
    EXPECT_EQ(fi_av_insert(av, peer_name, 1, &peer, 0, nullptr), 1);
  }
  ~side() {
    if (ep) { EXPECT_EQ(fi_close(&ep->fid), 0); }
    if (av) { EXPECT_EQ(fi_close(&av->fid), 0); }
    if (cq) { EXPECT_EQ(fi_close(&cq->fid), 0); }
    if (dom) { EXPECT_EQ(fi_close(&dom->fid), 0); }
  }
  // Sends and drives this side's progress until the send completes.
  ssize_t send(const void* buf, size_t len) {
    fi_context ctx;
    ssize_t r = fi_send(ep, buf, len, nullptr, peer, &ctx);
    if (r) return r;
    fi_cq_data_entry e;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    do r = fi_cq_read(cq, &e, 1);
    while (r == -FI_EAGAIN && std::chrono::steady_clock::now() < deadline);
    return r == 1 ? 0 : r;
  }
};

}  // namespace conformance
