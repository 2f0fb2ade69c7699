// SPDX-License-Identifier: MIT
// weft — what the udp provider offers, as static data. getinfo copies it per
// interface and util's one validator matches hints against it.
#include "prov/udp/proto.hpp"
#include "prov/udp/rdm.hpp"
#include "prov/udp/udp.hpp"
#include "util/info_match.hpp"

#include <rdma/fi_domain.h>

namespace weft::udp {

namespace {

// FI_TRIGGER: triggered work, util/trigger.hpp.
// FI_NAMED_RX_CTX: fi_rx_addr reaches a scalable endpoint's receive context
// (sep.cpp).
constexpr uint64_t tx_caps = FI_MSG | FI_SEND | FI_TRIGGER | FI_NAMED_RX_CTX;
constexpr uint64_t rx_caps =
    FI_MSG | FI_RECV | FI_SOURCE | FI_MULTI_RECV | FI_AV_USER_ID | FI_TRIGGER;

fi_tx_attr tx = {
    .caps = tx_caps,
    .mode = 0,
    .op_flags = 0,
    .msg_order = 0,  // datagrams may be reordered by the network
    .comp_order = 0,
    .inject_size = proto::max_payload,  // sendmsg copies: any datagram can be injected
    .size = 1024,
    .iov_limit = max_iov,
    .rma_iov_limit = 0,
    .tclass = 0,
};

fi_rx_attr rx = {
    .caps = rx_caps,
    .mode = 0,
    .op_flags = 0,
    .msg_order = 0,
    .comp_order = 0,
    .total_buffered_recv = 0,
    .size = 1024,
    .iov_limit = max_iov,
};

fi_ep_attr ep = {
    .type = FI_EP_DGRAM,
    .protocol = FI_PROTO_UDP,
    .protocol_version = proto::version,
    .max_msg_size = proto::max_payload,
    .msg_prefix_size = 0,
    .max_order_raw_size = 0,
    .max_order_war_size = 0,
    .max_order_waw_size = 0,
    .mem_tag_format = 0,
    .tx_ctx_cnt = 1,
    .rx_ctx_cnt = 1,
    .auth_key_size = 0,
    .auth_key = nullptr,
};

fi_domain_attr dom = [] {
  fi_domain_attr d{};
  d.threading = FI_THREAD_SAFE;
  d.control_progress = FI_PROGRESS_AUTO;  // no control operations to progress
  // The default; FI_PROGRESS_AUTO when asked for (match_any_progress): the
  // domain's progress thread sleeps on the endpoints' sockets.
  d.data_progress = FI_PROGRESS_MANUAL;
  d.resource_mgmt = FI_RM_ENABLED;
  d.av_type = FI_AV_UNSPEC;
  d.mr_mode = 0;
  d.mr_key_size = sizeof(uint64_t);
  d.cq_data_size = 0;
  d.cq_cnt = 256;
  d.ep_cnt = 256;
  d.tx_ctx_cnt = 256;
  d.rx_ctx_cnt = 256;
  // fi_scalable_ep: contexts are udp endpoints (sep.cpp).
  d.max_ep_tx_ctx = max_contexts;
  d.max_ep_rx_ctx = max_contexts;
  // fi_stx_context: every endpoint of the domain may share one (util::stx_ctx).
  d.max_ep_stx_ctx = d.ep_cnt;
  d.max_ep_srx_ctx = 0;
  d.cntr_cnt = 256;
  d.mr_iov_limit = 4;
  d.caps = FI_LOCAL_COMM | FI_REMOTE_COMM;
  d.max_err_data = 0;
  d.mr_cnt = 65536;
  d.max_ep_auth_key = 0;
  d.max_cntr_value = UINT64_MAX;
  d.max_err_cntr_value = UINT64_MAX;
  return d;
}();

fi_fabric_attr fab = {
    .fabric = nullptr,
    .name = nullptr,
    .prov_name = nullptr,
    .prov_version = 0,
    .api_version = 0,
};

fi_info tmpl = [] {
  fi_info i{};
  i.caps = tx_caps | rx_caps | FI_LOCAL_COMM | FI_REMOTE_COMM;
  i.mode = 0;
  i.addr_format = FI_SOCKADDR_IN;
  i.tx_attr = &tx;
  i.rx_attr = &rx;
  i.ep_attr = &ep;
  i.domain_attr = &dom;
  i.fabric_attr = &fab;
  return i;
}();

// FI_EP_RDM: reliable datagrams (rdm.hpp). Messages and tagged messages,
// RMA and atomics (executed at the target, rdm_rma.cpp).
// FI_NAMED_RX_CTX: fi_rx_addr reaches a scalable endpoint's receive context
// (sep.cpp).
constexpr uint64_t rdm_tx_caps = FI_MSG | FI_TAGGED | FI_SEND | FI_RMA | FI_ATOMIC | FI_READ |
                                 FI_WRITE | FI_TRIGGER | FI_NAMED_RX_CTX;
constexpr uint64_t rdm_rx_caps = FI_MSG | FI_TAGGED | FI_RECV | FI_SOURCE | FI_MULTI_RECV |
                                 FI_DIRECTED_RECV | FI_AV_USER_ID | FI_RMA | FI_ATOMIC |
                                 FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT | FI_TRIGGER;
constexpr uint64_t any_tag_bits = 0xaaaaaaaaaaaaaaaaULL;

fi_tx_attr rdm_tx = {
    .caps = rdm_tx_caps,
    .mode = 0,
    .op_flags = 0,
    .msg_order = FI_ORDER_SAS,  // one ordered stream of datagrams per peer
    .comp_order = 0,
    .inject_size = rdm_inject_size,
    .size = 1024,
    .iov_limit = max_iov,
    .rma_iov_limit = rdm_max_rma_iov,
    .tclass = 0,
};

fi_rx_attr rdm_rx = {
    .caps = rdm_rx_caps,
    .mode = 0,
    .op_flags = 0,
    .msg_order = FI_ORDER_SAS,
    .comp_order = 0,
    .total_buffered_recv = 0,
    .size = 1024,
    .iov_limit = max_iov,
};

fi_ep_attr rdm_ep = {
    .type = FI_EP_RDM,
    .protocol = FI_PROTO_RXD,
    .protocol_version = util::rd::version,
    .max_msg_size = rdm_max_msg,
    .msg_prefix_size = 0,
    .max_order_raw_size = 0,
    .max_order_war_size = 0,
    .max_order_waw_size = 0,
    .mem_tag_format = any_tag_bits,
    .tx_ctx_cnt = 1,
    .rx_ctx_cnt = 1,
    .auth_key_size = 0,
    .auth_key = nullptr,
};

fi_domain_attr rdm_dom = [] {
  fi_domain_attr d = dom;
  d.cq_data_size = sizeof(uint64_t);
  // fi_srx_context: every RDM endpoint of the domain may share one
  // (util::srx_ctx); DGRAM endpoints have no matching engine to share.
  d.max_ep_srx_ctx = d.ep_cnt;
  return d;
}();

fi_info rdm_tmpl = [] {
  fi_info i{};
  // FI_PEER: usable by a link provider that owns the CQs, counters and the
  // receive context (fi_peer(3)).
  i.caps = rdm_tx_caps | rdm_rx_caps | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_PEER;
  i.mode = 0;
  i.addr_format = FI_SOCKADDR_IN;
  i.tx_attr = &rdm_tx;
  i.rx_attr = &rdm_rx;
  i.ep_attr = &rdm_ep;
  i.domain_attr = &rdm_dom;
  i.fabric_attr = &fab;
  return i;
}();

}  // namespace

const fi_info& info_template() noexcept { return tmpl; }
const fi_info& rdm_template() noexcept { return rdm_tmpl; }

bool offers(uint32_t version, const fi_info& wanted) noexcept {
  // The templates speak IPv4; getinfo specialises them per interface family,
  // so an IPv6 fi_info is checked against the IPv6 form of the same template.
  const bool rdm = wanted.ep_attr && wanted.ep_attr->type == FI_EP_RDM;
  fi_info t = rdm ? rdm_tmpl : tmpl;
  if (wanted.addr_format == FI_SOCKADDR_IN6) t.addr_format = FI_SOCKADDR_IN6;
  return util::info_fits(&provider(), version, t, wanted, util::match_any_progress);
}

}  // namespace weft::udp
