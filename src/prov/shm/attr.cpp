// SPDX-License-Identifier: MIT
// weft — what the shm provider offers, as static data; util's one validator
// matches hints against it.
#include "prov/shm/shm.hpp"
#include "util/info_match.hpp"

#include <rdma/fi_domain.h>

namespace weft::shm {

namespace {

constexpr uint64_t tx_caps =
    FI_MSG | FI_TAGGED | FI_SEND | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_FENCE |
    FI_TRIGGER |  // triggered work: util/trigger.hpp
    FI_NAMED_RX_CTX;  // fi_rx_addr reaches a scalable endpoint's receive context
constexpr uint64_t rx_caps = FI_MSG | FI_TAGGED | FI_RECV | FI_DIRECTED_RECV | FI_MULTI_RECV |
                             FI_SOURCE | FI_RMA | FI_ATOMIC | FI_REMOTE_READ | FI_REMOTE_WRITE |
                             FI_RMA_EVENT | FI_AV_USER_ID | FI_TRIGGER;

fi_tx_attr tx = {
    .caps = tx_caps,
    .mode = 0,
    .op_flags = 0,
    // One ring per pair, read in order, matched in arrival order.
    .msg_order = FI_ORDER_SAS,
    .comp_order = 0,  // a large send completes when its receiver has pulled it
    .inject_size = inline_max,
    .size = tx_depth,
    .iov_limit = max_iov,
    .rma_iov_limit = proto::rma_max_targets,
    .tclass = 0,
};

fi_rx_attr rx = {
    .caps = rx_caps,
    .mode = 0,
    .op_flags = 0,
    .msg_order = FI_ORDER_SAS,
    .comp_order = 0,
    .total_buffered_recv = 0,
    .size = rx_depth,
    .iov_limit = max_iov,
};

fi_ep_attr ep = {
    .type = FI_EP_RDM,
    .protocol = FI_PROTO_SHM,
    .protocol_version = proto::version,
    .max_msg_size = max_msg,
    .msg_prefix_size = 0,
    .max_order_raw_size = 0,
    .max_order_war_size = 0,
    .max_order_waw_size = 0,
    .mem_tag_format = 0xaaaaaaaaaaaaaaaaULL,  // all 64 tag bits, any ignore mask
    .tx_ctx_cnt = 1,
    .rx_ctx_cnt = 1,
    .auth_key_size = 0,
    .auth_key = nullptr,
};

fi_domain_attr dom = [] {
  fi_domain_attr d{};
  d.name = const_cast<char*>("shm");
  d.threading = FI_THREAD_SAFE;
  // No control operation waits for progress: AV inserts, registrations and
  // bindings complete in their calls, and there is no connection to manage.
  d.control_progress = FI_PROGRESS_AUTO;
  // The default; FI_PROGRESS_AUTO when asked for (match_any_progress): a
  // progress thread per domain (docs/architecture.md).
  d.data_progress = FI_PROGRESS_MANUAL;
  d.resource_mgmt = FI_RM_ENABLED;
  d.av_type = FI_AV_UNSPEC;
  d.mr_mode = 0;  // nothing to register: peers read our memory through the kernel
  d.mr_key_size = sizeof(uint64_t);
  d.cq_data_size = sizeof(uint64_t);
  d.cq_cnt = 256;
  d.ep_cnt = 256;
  d.tx_ctx_cnt = 256;
  d.rx_ctx_cnt = 256;
  // fi_scalable_ep: contexts are shm endpoints (shm.hpp, "scalable endpoints").
  d.max_ep_tx_ctx = max_contexts;
  d.max_ep_rx_ctx = max_contexts;
  // fi_stx_context: every endpoint of the domain may share one (util::stx_ctx).
  d.max_ep_stx_ctx = d.ep_cnt;
  // fi_srx_context: every endpoint of the domain may share one (util::srx_ctx).
  d.max_ep_srx_ctx = 256;
  d.cntr_cnt = 256;
  d.mr_iov_limit = 4;
  // FI_SHARED_AV: named AVs live in /dev/shm (util/av_shared.hpp).
  d.caps = FI_LOCAL_COMM | FI_SHARED_AV;
  d.max_err_data = 0;
  d.mr_cnt = 65536;
  d.max_ep_auth_key = 0;
  d.max_cntr_value = UINT64_MAX;
  d.max_err_cntr_value = UINT64_MAX;
  return d;
}();

fi_fabric_attr fab = {
    .fabric = nullptr,
    .name = const_cast<char*>("shm"),
    .prov_name = nullptr,
    .prov_version = 0,
    .api_version = 0,
};

fi_info tmpl = [] {
  fi_info i{};
  // FI_PEER: usable by a link provider that owns the CQs, counters and the
  // receive context (fi_peer(3)). FI_AV_USER_ID (rx_caps): completions name
  // senders by the ids given at insertion.
  i.caps = tx_caps | rx_caps | FI_LOCAL_COMM | FI_SHARED_AV | FI_PEER;
  i.mode = 0;
  i.addr_format = FI_ADDR_STR;
  i.tx_attr = &tx;
  i.rx_attr = &rx;
  i.ep_attr = &ep;
  i.domain_attr = &dom;
  i.fabric_attr = &fab;
  return i;
}();

}  // namespace

const fi_info& info_template() noexcept { return tmpl; }

bool offers(uint32_t version, const fi_info& wanted) noexcept {
  return util::info_fits(&provider(), version, tmpl, wanted, util::match_any_progress);
}

}  // namespace weft::shm
