// SPDX-License-Identifier: MIT
// weft — what the tcp provider offers, as static data: one template per
// endpoint type. getinfo copies them per interface and util's one validator
// matches hints against them. Only what works is advertised: messages and
// tagged messages with remote CQ data, RMA and atomics (executed at the
// target, rma.cpp).
#include "prov/tcp/tcp.hpp"
#include "util/info_match.hpp"

#include <rdma/fi_domain.h>

namespace weft::tcp {

namespace {

constexpr uint64_t tx_caps =
    FI_MSG | FI_TAGGED | FI_SEND | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_FENCE |
    FI_TRIGGER;  // triggered work: util/trigger.hpp
constexpr uint64_t msg_rx_caps = FI_MSG | FI_TAGGED | FI_RECV | FI_MULTI_RECV | FI_RMA |
                                 FI_ATOMIC | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT |
                                 FI_TRIGGER;
// FI_AV_USER_ID: completions, FI_SOURCE and the receive context name
// senders by the ids given at insertion (endpoint::source).
constexpr uint64_t rdm_rx_caps = msg_rx_caps | FI_DIRECTED_RECV | FI_SOURCE | FI_AV_USER_ID;

fi_tx_attr tx = {
    .caps = tx_caps,
    .mode = 0,
    .op_flags = 0,
    .msg_order = FI_ORDER_SAS,  // one byte stream per peer
    .comp_order = 0,
    .inject_size = inject_size,
    .size = default_queue_size,
    .iov_limit = max_iov,
    .rma_iov_limit = proto::max_rma_iov,
    .tclass = 0,
};

fi_rx_attr msg_rx = {
    .caps = msg_rx_caps,
    .mode = 0,
    .op_flags = 0,
    .msg_order = FI_ORDER_SAS,
    .comp_order = 0,
    .total_buffered_recv = 0,
    .size = default_queue_size,
    .iov_limit = max_iov,
};

// FI_NAMED_RX_CTX: fi_rx_addr reaches a scalable endpoint's receive context
// (sep.cpp).
fi_tx_attr rdm_tx = [] {
  fi_tx_attr t = tx;
  t.caps |= FI_NAMED_RX_CTX;
  return t;
}();

fi_rx_attr rdm_rx = [] {
  fi_rx_attr r = msg_rx;
  r.caps = rdm_rx_caps;
  return r;
}();

// All 64 tag bits match, under any ignore mask: fi_endpoint(3) reads the
// format as fields, and alternating 1 and 0 bits make every bit a field of
// its own. A leading 0 bit would say the top bit is ignored; 0 says no tag
// bits at all, and applications size their tags from it (Open MPI's OFI mtl
// refuses a provider with 0).
constexpr uint64_t any_tag_bits = 0xaaaaaaaaaaaaaaaaULL;

fi_ep_attr msg_ep = {
    .type = FI_EP_MSG,
    .protocol = FI_PROTO_SOCK_TCP,
    .protocol_version = proto::version,
    .max_msg_size = max_msg_size,
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

fi_ep_attr rdm_ep = [] {
  fi_ep_attr e = msg_ep;
  e.type = FI_EP_RDM;
  return e;
}();

fi_domain_attr dom = [] {
  fi_domain_attr d{};
  d.threading = FI_THREAD_SAFE;
  d.control_progress = FI_PROGRESS_MANUAL;  // connections advance with CQ/EQ reads
  d.data_progress = FI_PROGRESS_MANUAL;
  d.resource_mgmt = FI_RM_ENABLED;
  d.av_type = FI_AV_UNSPEC;
  d.mr_mode = 0;
  d.mr_key_size = sizeof(uint64_t);
  d.cq_data_size = sizeof(uint64_t);
  d.cq_cnt = 256;
  d.ep_cnt = 8192;
  d.tx_ctx_cnt = 8192;
  d.rx_ctx_cnt = 8192;
  d.max_ep_tx_ctx = 1;
  d.max_ep_rx_ctx = 1;
  // fi_stx_context: every endpoint of the domain may share one (util::stx_ctx).
  d.max_ep_stx_ctx = d.ep_cnt;
  // fi_srx_context: every endpoint of the domain may share one (util::srx_ctx).
  d.max_ep_srx_ctx = d.ep_cnt;
  d.cntr_cnt = 256;
  d.mr_iov_limit = 4;
  d.caps = FI_LOCAL_COMM | FI_REMOTE_COMM;
  d.max_err_data = proto::cm_data_max;
  d.mr_cnt = 65536;
  d.max_ep_auth_key = 0;
  d.max_cntr_value = UINT64_MAX;
  d.max_err_cntr_value = UINT64_MAX;
  return d;
}();

// fi_scalable_ep (RDM): contexts are tcp endpoints (sep.cpp).
fi_domain_attr rdm_dom = [] {
  fi_domain_attr d = dom;
  d.max_ep_tx_ctx = max_contexts;
  d.max_ep_rx_ctx = max_contexts;
  return d;
}();

fi_fabric_attr fab = {
    .fabric = nullptr,
    .name = nullptr,
    .prov_name = nullptr,
    .prov_version = 0,
    .api_version = 0,
};

fi_info make(fi_tx_attr* t, fi_rx_attr* rx, fi_ep_attr* ep, fi_domain_attr* d,
             uint64_t more_caps) {
  fi_info i{};
  i.caps = t->caps | rx->caps | FI_LOCAL_COMM | FI_REMOTE_COMM | more_caps;
  i.mode = 0;
  i.addr_format = FI_SOCKADDR_IN;
  i.tx_attr = t;
  i.rx_attr = rx;
  i.ep_attr = ep;
  i.domain_attr = d;
  i.fabric_attr = &fab;
  return i;
}

fi_info msg_tmpl = make(&tx, &msg_rx, &msg_ep, &dom, 0);
// FI_PEER (RDM): usable by a link provider that owns the CQs, counters and
// the receive context (fi_peer(3)). MSG endpoints match per connection and
// are not offered to one.
fi_info rdm_tmpl = make(&rdm_tx, &rdm_rx, &rdm_ep, &rdm_dom, FI_PEER);

}  // namespace

const fi_info& msg_template() noexcept { return msg_tmpl; }
const fi_info& rdm_template() noexcept { return rdm_tmpl; }

bool offers(uint32_t version, const fi_info& wanted) noexcept {
  // The templates speak IPv4; getinfo specialises them per interface family.
  bool msg = wanted.ep_attr && wanted.ep_attr->type == FI_EP_MSG;
  fi_info t = msg ? msg_tmpl : rdm_tmpl;
  if (wanted.addr_format == FI_SOCKADDR_IN6) t.addr_format = FI_SOCKADDR_IN6;
  return util::info_fits(&provider(), version, t, wanted, util::match_any_progress);
}

}  // namespace weft::tcp
