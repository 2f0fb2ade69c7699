// SPDX-License-Identifier: MIT
// weft — unit tests of the one hints validator (util/info_match).
#include "core/info.hpp"
#include "util/info_match.hpp"

#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <gtest/gtest.h>

#include <memory>

namespace weft::util {
namespace {

fi_provider prov = [] {
  fi_provider p{};
  p.name = const_cast<char*>("unit");
  return p;
}();

struct info_deleter {
  void operator()(fi_info* i) const { core::free_info(i); }
};
using info_ptr = std::unique_ptr<fi_info, info_deleter>;

// A provider template: RDM, MSG|TAGGED, needs FI_CONTEXT on receives.
struct template_info {
  fi_tx_attr tx{};
  fi_rx_attr rx{};
  fi_ep_attr ep{};
  fi_domain_attr dom{};
  fi_fabric_attr fab{};
  fi_info info{};
  template_info() {
    tx.caps = FI_MSG | FI_TAGGED | FI_SEND;
    tx.inject_size = 64;
    tx.size = 256;
    tx.iov_limit = 4;
    tx.msg_order = FI_ORDER_SAS;
    rx.caps = FI_MSG | FI_TAGGED | FI_RECV | FI_MULTI_RECV | FI_SOURCE;
    rx.mode = FI_CONTEXT;
    rx.size = 256;
    rx.iov_limit = 4;
    rx.msg_order = FI_ORDER_SAS;
    ep.type = FI_EP_RDM;
    ep.max_msg_size = 1 << 20;
    ep.tx_ctx_cnt = ep.rx_ctx_cnt = 1;
    dom.threading = FI_THREAD_SAFE;
    dom.control_progress = FI_PROGRESS_AUTO;
    dom.data_progress = FI_PROGRESS_MANUAL;
    dom.av_type = FI_AV_UNSPEC;
    dom.mr_mode = FI_MR_VIRT_ADDR;
    dom.cq_data_size = 8;
    info.caps = tx.caps | rx.caps | FI_LOCAL_COMM | FI_REMOTE_COMM;
    info.mode = FI_CONTEXT;
    info.tx_attr = &tx;
    info.rx_attr = &rx;
    info.ep_attr = &ep;
    info.domain_attr = &dom;
    info.fabric_attr = &fab;
  }
};

info_ptr hints() {
  info_ptr h{core::dup_info(nullptr, core::abi_current)};
  h->mode = FI_CONTEXT;
  h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_LOCAL;
  return h;
}

info_ptr match(const fi_info& t, const fi_info* h) {
  bool nomem = false;
  info_ptr r{match_info(&prov, FI_VERSION(1, 17), t, h, &nomem)};
  EXPECT_FALSE(nomem);
  return r;
}

TEST(info_match, no_hints_is_the_template) {
  template_info t;
  auto r = match(t.info, nullptr);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->caps, t.info.caps);
  EXPECT_EQ(r->domain_attr->threading, FI_THREAD_SAFE);
}

TEST(info_match, caps_asked_for_plus_free_secondaries) {
  template_info t;
  auto h = hints();
  h->caps = FI_TAGGED;
  auto r = match(t.info, h.get());
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->caps & FI_TAGGED);
  EXPECT_FALSE(r->caps & FI_MSG);            // a primary not asked for
  EXPECT_FALSE(r->caps & FI_MULTI_RECV);     // a costly secondary not asked for
  EXPECT_TRUE(r->caps & FI_LOCAL_COMM);      // free secondaries come along
  EXPECT_TRUE(r->caps & (FI_SEND | FI_RECV));  // no modifiers asked: all
  h->caps = FI_TAGGED | FI_SEND;
  r = match(t.info, h.get());
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->caps & FI_RECV);  // modifiers asked: only those
  h->caps = FI_RMA;
  EXPECT_FALSE(match(t.info, h.get()));
}

// fi_endpoint(3): a context count of FI_SHARED_CONTEXT is answered as asked
// by a provider whose domain shares that kind of context, refused elsewhere.
TEST(info_match, shared_context_counts_need_a_domain_that_shares) {
  template_info t;
  auto h = hints();
  for (bool tx : {true, false}) {
    SCOPED_TRACE(tx ? "tx_ctx_cnt" : "rx_ctx_cnt");
    h->ep_attr->tx_ctx_cnt = tx ? FI_SHARED_CONTEXT : 0;
    h->ep_attr->rx_ctx_cnt = tx ? 0 : FI_SHARED_CONTEXT;
    t.dom.max_ep_stx_ctx = t.dom.max_ep_srx_ctx = 0;
    EXPECT_FALSE(match(t.info, h.get()));
    (tx ? t.dom.max_ep_srx_ctx : t.dom.max_ep_stx_ctx) = 8;  // the other kind
    EXPECT_FALSE(match(t.info, h.get()));
    (tx ? t.dom.max_ep_stx_ctx : t.dom.max_ep_srx_ctx) = 8;
    auto r = match(t.info, h.get());
    ASSERT_TRUE(r);
    EXPECT_EQ(tx ? r->ep_attr->tx_ctx_cnt : r->ep_attr->rx_ctx_cnt, FI_SHARED_CONTEXT);
    EXPECT_EQ(tx ? r->ep_attr->rx_ctx_cnt : r->ep_attr->tx_ctx_cnt, 1u);
  }
}

TEST(info_match, provider_modes_need_the_applications_consent) {
  template_info t;
  auto h = hints();
  h->mode = 0;
  EXPECT_FALSE(match(t.info, h.get()));  // FI_CONTEXT needed, not offered
  h->mode = FI_CONTEXT;
  h->rx_attr->mode = FI_MSG_PREFIX;  // rx mode stated without FI_CONTEXT
  EXPECT_FALSE(match(t.info, h.get()));
  h->rx_attr->mode = FI_CONTEXT | FI_MSG_PREFIX;
  EXPECT_TRUE(match(t.info, h.get()));
}

TEST(info_match, limits_are_lower_bounds) {
  template_info t;
  auto h = hints();
  h->tx_attr->inject_size = 64;
  h->tx_attr->size = 16;
  h->ep_attr->max_msg_size = 4096;
  auto r = match(t.info, h.get());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->tx_attr->size, 16u);
  EXPECT_EQ(r->tx_attr->inject_size, 64u);
  h->tx_attr->inject_size = 65;
  EXPECT_FALSE(match(t.info, h.get()));
  h->tx_attr->inject_size = 0;
  h->domain_attr->cq_data_size = 9;
  EXPECT_FALSE(match(t.info, h.get()));
}

TEST(info_match, progress_threading_and_type) {
  template_info t;
  auto h = hints();
  h->domain_attr->data_progress = FI_PROGRESS_AUTO;
  EXPECT_FALSE(match(t.info, h.get()));  // manual only
  h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
  h->domain_attr->control_progress = FI_PROGRESS_MANUAL;  // auto serves manual
  h->domain_attr->threading = FI_THREAD_DOMAIN;
  auto r = match(t.info, h.get());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->domain_attr->threading, FI_THREAD_DOMAIN);
  EXPECT_EQ(r->domain_attr->control_progress, FI_PROGRESS_MANUAL);
  h->ep_attr->type = FI_EP_MSG;
  EXPECT_FALSE(match(t.info, h.get()));
}

TEST(info_match, memory_registration_requirements) {
  template_info t;
  auto h = hints();
  h->domain_attr->mr_mode = FI_MR_LOCAL;  // FI_MR_VIRT_ADDR needed
  EXPECT_FALSE(match(t.info, h.get()));
  h->domain_attr->mr_mode = FI_MR_VIRT_ADDR;
  EXPECT_TRUE(match(t.info, h.get()));
  // An fi_info fi_getinfo answered in the old terms, handed to fi_domain:
  // FI_MR_BASIC stands for FI_MR_VIRT_ADDR among others, FI_MR_SCALABLE
  // for none of them.
  h->domain_attr->mr_mode = FI_MR_BASIC;
  EXPECT_TRUE(match(t.info, h.get()));
  h->domain_attr->mr_mode = FI_MR_SCALABLE;
  EXPECT_FALSE(match(t.info, h.get()));
}

}  // namespace
}  // namespace weft::util
