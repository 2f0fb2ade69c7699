// SPDX-License-Identifier: MIT
// weft — the lnx provider's registration, FI_LNX_PROV_LINKS, and fi_getinfo:
// one answer per link and network domain, saying what every linked provider
// supports (the intersection) plus what lnx adds itself (FI_MULTI_RECV and
// FI_DIRECTED_RECV come from lnx's own receive engine).
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/info.hpp"
#include "core/log.hpp"
#include "core/refusal.hpp"
#include "core/registry.hpp"
#include "prov/lnx/lnx.hpp"
#include "util/info_match.hpp"
#include "util/params.hpp"
#include "util/srx.hpp"

namespace weft::lnx {

namespace {

int fabric_open(fi_fabric_attr* attr, fid_fabric** fab, void* context) {
  return util::fabric::open(&provider(), &fabric_hooks, attr, fab, context);
}

fi_provider the_provider = {
    .version = FI_VERSION(0, 1),
    .fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
    .context = {},
    .name = "lnx",
    .getinfo = getinfo,
    .fabric = fabric_open,
    .cleanup = nullptr,
};

config the_config;

// FI_LNX_PROV_LINKS: the links it names. One it cannot use leaves none,
// and fi_getinfo refuses with the reason (config::error).
const char* take_links(config& c, const util::param_value& v) {
  c = parse_links(v.text);
  if (!c.error.empty())
    WEFT_WARN(&provider(), FI_LOG_CORE, "%s=%s: %s", v.env, v.text, c.error.c_str());
  return nullptr;
}

// The parameters (fi_info -e), into the_config at registration.
constexpr util::param<config> params[] = {
    {"prov_links", FI_PARAM_STRING,
     "The providers lnx links, as 'shm+tcp' or 'shm+tcp:<interface>'; groups "
     "joined by '|' give several links (default: shm+tcp, tcp on each of its "
     "interfaces)",
     take_links},
};

bool known_member(std::string_view p, proto::prov_id* id) {
  if (p == "shm") return *id = proto::prov_id::shm, true;
  if (p == "tcp") return *id = proto::prov_id::tcp, true;
  return false;
}

// What lnx asks of every core: the peer interface, user ids as sources, and
// the messages, RMA and atomics it carries. Receives are matched by lnx's
// engine, so the cores' receive capabilities beyond FI_RECV do not matter.
// FI_FENCE too: lnx passes the flag through (pass.hpp), so its cores must
// take it; and FI_RMA_EVENT: remote accesses are counted by the cores
// (ep.cpp binds counters to their endpoints, mr.cpp to their regions).
// shm and tcp offer both.
constexpr uint64_t core_caps = FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_PEER | FI_AV_USER_ID |
                               FI_SOURCE | FI_FENCE | FI_RMA_EVENT | FI_NAMED_RX_CTX | rma_caps;
constexpr uint64_t any_tag_bits = 0xaaaaaaaaaaaaaaaaULL;  // all 64 bits match (tcp's reasoning)

// Frees a core's list when it goes out of scope.
struct info_list {
  fi_info* p = nullptr;
  ~info_list() { core::free_info(p); }
};

template <class T>
T min_nonzero(T a, T b) {
  if (!a) return b;
  if (!b) return a;
  return std::min(a, b);
}

// The lnx template for a link whose cores answered `infos` (one per member).
// Every pointer of the result is owned by it (core::free_info).
fi_info* combine(const link& l, const std::vector<const fi_info*>& infos) {
  fi_info* t = core::dup_info(nullptr, core::abi_current);
  if (!t) return nullptr;
  uint64_t caps = offered_caps;
  uint64_t tx_order = ~uint64_t{0}, rx_order = ~uint64_t{0};
  size_t inject = 0, tx_size = 0, rx_size = 0, tx_iov = 0, rx_iov = 0, max_msg = 0;
  size_t rma_iov = 0, mr_iov = 0;
  size_t cq_data = 0, cq_cnt = 0, ep_cnt = 0, cntr_cnt = 0, mr_cnt = 0;
  size_t max_tx_ctx = SIZE_MAX, max_rx_ctx = SIZE_MAX;
  std::string dom_name;
  for (size_t i = 0; i < infos.size(); ++i) {
    const fi_info& c = *infos[i];
    // FI_MULTI_RECV and FI_DIRECTED_RECV are the matching engine's, and
    // FI_TRIGGER the domain's trigger engine's (its cores are handed plain
    // calls); the rest must be the cores'.
    caps &= c.caps | FI_MULTI_RECV | FI_DIRECTED_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM |
            FI_TRIGGER;
    tx_order &= c.tx_attr->msg_order;
    rx_order &= c.rx_attr->msg_order;
    inject = i ? std::min(inject, c.tx_attr->inject_size) : c.tx_attr->inject_size;
    tx_size = min_nonzero(tx_size, c.tx_attr->size);
    rx_size = min_nonzero(rx_size, c.rx_attr->size);
    tx_iov = min_nonzero(tx_iov, c.tx_attr->iov_limit);
    rx_iov = min_nonzero(rx_iov, c.rx_attr->iov_limit);
    max_msg = min_nonzero(max_msg, c.ep_attr->max_msg_size);
    rma_iov = min_nonzero(rma_iov, c.tx_attr->rma_iov_limit);
    mr_iov = min_nonzero(mr_iov, c.domain_attr->mr_iov_limit);
    cq_data = i ? std::min(cq_data, c.domain_attr->cq_data_size) : c.domain_attr->cq_data_size;
    cq_cnt = min_nonzero(cq_cnt, c.domain_attr->cq_cnt);
    ep_cnt = min_nonzero(ep_cnt, c.domain_attr->ep_cnt);
    cntr_cnt = min_nonzero(cntr_cnt, c.domain_attr->cntr_cnt);
    mr_cnt = min_nonzero(mr_cnt, c.domain_attr->mr_cnt);
    // A scalable endpoint of lnx is one of each core's (sep.cpp).
    max_tx_ctx = std::min(max_tx_ctx, c.domain_attr->max_ep_tx_ctx);
    max_rx_ctx = std::min(max_rx_ctx, c.domain_attr->max_ep_rx_ctx);
    if (i && l.members[i].id == l.members[i - 1].id) {  // a further rail (link::name)
      dom_name += std::string(",") + (c.domain_attr->name ? c.domain_attr->name : "");
      continue;
    }
    if (i) dom_name += '+';
    dom_name += l.members[i].prov;
    if (c.domain_attr->name && l.members[i].id != proto::prov_id::shm)
      dom_name += std::string(":") + c.domain_attr->name;
  }
  t->caps = caps;
  t->mode = 0;
  t->addr_format = FI_FORMAT_UNSPEC;
  *t->tx_attr = fi_tx_attr{};
  t->tx_attr->caps =
      caps & (FI_MSG | FI_TAGGED | FI_SEND | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_FENCE |
              FI_TRIGGER | FI_NAMED_RX_CTX);
  t->tx_attr->rma_iov_limit = rma_iov;
  t->tx_attr->msg_order = tx_order;
  t->tx_attr->inject_size = inject;
  t->tx_attr->size = tx_size;
  t->tx_attr->iov_limit = tx_iov;
  *t->rx_attr = fi_rx_attr{};
  t->rx_attr->caps = caps & (FI_MSG | FI_TAGGED | FI_RECV | FI_SOURCE | FI_DIRECTED_RECV |
                             FI_MULTI_RECV | FI_RMA | FI_ATOMIC | FI_REMOTE_READ |
                             FI_REMOTE_WRITE | FI_RMA_EVENT | FI_TRIGGER);
  t->rx_attr->msg_order = rx_order;
  t->rx_attr->size = rx_size;
  t->rx_attr->iov_limit = std::min(rx_iov, util::srx_entry::max_iov);
  t->ep_attr->type = FI_EP_RDM;
  t->ep_attr->protocol = FI_PROTO_LNX;
  t->ep_attr->protocol_version = proto::version;
  t->ep_attr->max_msg_size = max_msg;
  t->ep_attr->mem_tag_format = any_tag_bits;
  t->ep_attr->tx_ctx_cnt = 1;
  t->ep_attr->rx_ctx_cnt = 1;
  fi_domain_attr& d = *t->domain_attr;
  d.threading = FI_THREAD_SAFE;
  // Automatic progress is the cores' (asked of them when the caller asks:
  // core_getinfo): their threads move the data and write completions,
  // counters and matches straight into lnx's objects, which then lock
  // (util::domain::lock_threading). Offered only when every core offers it.
  d.control_progress = d.data_progress = FI_PROGRESS_AUTO;
  for (const fi_info* c : infos) {
    if (c->domain_attr->data_progress != FI_PROGRESS_AUTO) d.data_progress = FI_PROGRESS_MANUAL;
    if (c->domain_attr->control_progress != FI_PROGRESS_AUTO)
      d.control_progress = FI_PROGRESS_MANUAL;
  }
  d.resource_mgmt = FI_RM_ENABLED;
  d.av_type = FI_AV_UNSPEC;
  // Keys chosen by the application, RMA addresses as offsets: what lnx asks
  // of its cores too (core_getinfo), so a key and an address mean the same
  // to lnx and to whichever core carries the operation (mr.cpp).
  d.mr_mode = 0;
  d.mr_key_size = sizeof(uint64_t);
  d.cq_data_size = cq_data;
  d.cq_cnt = cq_cnt;
  d.ep_cnt = ep_cnt;
  d.tx_ctx_cnt = ep_cnt;
  d.rx_ctx_cnt = ep_cnt;
  d.max_ep_tx_ctx = (caps & FI_NAMED_RX_CTX) ? max_tx_ctx : 1;
  d.max_ep_rx_ctx = (caps & FI_NAMED_RX_CTX) ? max_rx_ctx : 1;
  d.max_ep_stx_ctx = ep_cnt;  // util's shared transmit context (util/stx_ctx.hpp)
  d.max_ep_srx_ctx = ep_cnt;  // util's shared receive context (util/srx_ctx.hpp)
  d.cntr_cnt = cntr_cnt;
  d.mr_iov_limit = mr_iov;
  d.mr_cnt = mr_cnt;
  d.caps = FI_LOCAL_COMM | FI_REMOTE_COMM;
  d.max_cntr_value = UINT64_MAX;
  d.max_err_cntr_value = UINT64_MAX;
  d.name = strdup(dom_name.c_str());
  t->fabric_attr->name = strdup("lnx");
  if (!d.name || !t->fabric_attr->name) {
    core::free_info(t);
    return nullptr;
  }
  return t;
}

}  // namespace

fi_provider& provider() noexcept {
  return the_provider;
}
const config& cfg() noexcept {
  return the_config;
}

std::string link::name() const {
  std::string s;
  for (size_t i = 0; i < members.size(); ++i) {
    // Rails of one provider: "tcp:eth0,eth1", as FI_LNX_PROV_LINKS says it.
    if (i && members[i].id == members[i - 1].id) {
      s += "," + members[i].domain;
      continue;
    }
    if (i) s += '+';
    s += members[i].prov;
    if (!members[i].domain.empty()) s += ":" + members[i].domain;
  }
  return s;
}

config parse_links(const std::string& text) {
  config c;
  auto fail = [&](std::string why) {
    c.links.clear();
    c.error = std::move(why);
    return c;
  };
  std::string_view rest(text);
  if (rest.empty()) return fail("FI_LNX_PROV_LINKS is empty");
  while (true) {
    auto bar = rest.find('|');
    std::string_view group = rest.substr(0, bar);
    link l;
    uint32_t seen = 0;
    while (true) {
      auto plus = group.find('+');
      std::string_view item = group.substr(0, plus);
      member m;
      auto colon = item.find(':');
      m.prov = std::string(item.substr(0, colon));
      if (m.prov.empty()) return fail("a link names an empty provider");
      if (!known_member(m.prov, &m.id))
        return fail("provider '" + m.prov + "' cannot be linked (lnx links shm and tcp)");
      uint32_t bit = 1u << static_cast<unsigned>(m.id);
      if (seen & bit) return fail("a link names " + m.prov + " twice");
      seen |= bit;
      if (colon == std::string_view::npos) {
        l.members.push_back(std::move(m));
      } else {
        // "tcp:eth0,eth1": one member per domain, the rails of that
        // provider, in the order named (endpoint::resolve pairs them).
        std::string_view doms = item.substr(colon + 1);
        const size_t first = l.members.size();
        while (true) {
          auto comma = doms.find(',');
          std::string_view d = doms.substr(0, comma);
          if (d.empty()) return fail("'" + std::string(item) + "' names an empty domain");
          for (size_t k = first; k < l.members.size(); ++k)
            if (l.members[k].domain == d)
              return fail("'" + std::string(item) + "' names " + std::string(d) + " twice");
          member r = m;
          r.domain = std::string(d);
          l.members.push_back(std::move(r));
          if (comma == std::string_view::npos) break;
          doms.remove_prefix(comma + 1);
        }
        if (l.members.size() - first > 1 && m.id == proto::prov_id::shm)
          return fail("'" + std::string(item) + "': shm has one domain per host, not rails");
        if (l.members.size() - first > proto::max_rails)
          return fail("'" + std::string(item) + "': at most " +
                      std::to_string(proto::max_rails) + " rails of a provider");
      }
      if (plus == std::string_view::npos) break;
      group.remove_prefix(plus + 1);
    }
    if (l.members.size() < 2)
      return fail("a link joins at least two providers ('" + std::string(rest.substr(0, bar)) +
                  "')");
    // Shared memory first: it carries the peers of this host.
    std::stable_sort(l.members.begin(), l.members.end(), [](const member& a, const member& b) {
      return (a.id == proto::prov_id::shm) > (b.id == proto::prov_id::shm);
    });
    c.links.push_back(std::move(l));
    if (bar == std::string_view::npos) break;
    rest.remove_prefix(bar + 1);
  }
  return c;
}

int core_getinfo(const member& m, const fi_info* hints, fi_info** out) noexcept {
  *out = nullptr;
  fi_provider* p = core::find_builtin_provider(m.prov);
  if (!p) return to_fi(errc::nodata);
  fi_info* h = core::dup_info(nullptr, core::abi_current);
  if (!h) return to_fi(errc::nomem);
  info_list guard{h};
  h->caps = core_caps;
  h->ep_attr->type = FI_EP_RDM;
  h->domain_attr->av_type = FI_AV_TABLE;
  // lnx hands its cores no descriptors, and registers regions with them
  // under its own keys (mr.cpp): only cores that need neither FI_MR_LOCAL
  // nor FI_MR_PROV_KEY are usable (domain::open_cores sets the address
  // form).
  h->domain_attr->mr_mode = 0;
  if (hints && hints->domain_attr) {
    // Copied as bytes: hints may hold values no enumerator names (the core
    // refuses them, with the reason).
    std::memcpy(&h->domain_attr->threading, &hints->domain_attr->threading,
                sizeof h->domain_attr->threading);
    std::memcpy(&h->domain_attr->data_progress, &hints->domain_attr->data_progress,
                sizeof h->domain_attr->data_progress);
    std::memcpy(&h->domain_attr->control_progress, &hints->domain_attr->control_progress,
                sizeof h->domain_attr->control_progress);
  }
  if (!m.domain.empty() && !(h->domain_attr->name = strdup(m.domain.c_str())))
    return to_fi(errc::nomem);
  // lnx speaks the current API to its cores, whatever its caller speaks.
  const uint32_t v = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
  fi_info* list = nullptr;
  int ret = p->getinfo(v, nullptr, nullptr, 0, h, &list);
  if (ret) return ret;
  for (fi_info* i = list; i; i = i->next) {
    if (!i->fabric_attr->prov_name && !(i->fabric_attr->prov_name = strdup(p->name))) {
      core::free_info(list);
      return to_fi(errc::nomem);
    }
    i->fabric_attr->prov_version = p->version;
    i->fabric_attr->api_version = v;
  }
  *out = list;
  return 0;
}

int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
            const fi_info* hints, fi_info** info) noexcept {
  *info = nullptr;
  const config& c = cfg();
  if (!c.error.empty()) {
    core::refuse(1000, "FI_LNX_PROV_LINKS", "%s", c.error.c_str());
    return to_fi(errc::nodata);
  }
  // Without FI_LNX_PROV_LINKS the default link, shm+tcp, is offered to
  // every caller, after every other provider (docs/decisions.md, "lnx:
  // the default link"); FI_PROVIDER=^lnx hides it.
  if (hints && hints->ep_attr && raw_enum(hints->ep_attr->type) != FI_EP_UNSPEC &&
      raw_enum(hints->ep_attr->type) != FI_EP_RDM) {
    core::refuse(1000, "ep_attr->type", "lnx offers FI_EP_RDM only");
    return to_fi(errc::nodata);
  }
  // node/service: lnx addresses are exchanged by the application (fi_getname,
  // fi_av_insert); a host name cannot be turned into one. As a source
  // (FI_SOURCE) they would pick the network interface: not supported yet.
  if ((node || service) && (flags & FI_SOURCE)) {
    core::refuse(1000, "node", "lnx picks its source addresses itself (FI_SOURCE with a node)");
    return to_fi(errc::nodata);
  }
  (void)node;
  (void)service;
  fi_info* head = nullptr;
  fi_info** tail = &head;
  bool nomem = false;
  for (const link& l : c.links) {
    // Every member's first answer, except the last member's, which is
    // enumerated (a network provider answers once per interface).
    std::vector<info_list> lists(l.members.size());
    bool ok = true;
    for (size_t i = 0; i < l.members.size() && ok; ++i) {
      int ret = core_getinfo(l.members[i], hints, &lists[i].p);
      if (ret == to_fi(errc::nomem)) nomem = true;
      if (ret || !lists[i].p) {
        core::refuse(900, "fabric_attr->prov_name", "link %s: %s offers nothing lnx can use",
                     l.name().c_str(), l.members[i].prov.c_str());
        ok = false;
      }
    }
    if (!ok) continue;
    std::vector<std::string> named;  // a network provider answers per address family too
    for (const fi_info* last = lists.back().p; last; last = last->next) {
      std::string dn = last->domain_attr->name ? last->domain_attr->name : "";
      if (std::find(named.begin(), named.end(), dn) != named.end()) continue;
      named.push_back(dn);
      std::vector<const fi_info*> infos;
      for (size_t i = 0; i + 1 < lists.size(); ++i) infos.push_back(lists[i].p);
      infos.push_back(last);
      info_list tmpl{combine(l, infos)};
      if (!tmpl.p) {
        nomem = true;
        break;
      }
      fi_info* r = util::match_info(&provider(), version, *tmpl.p, hints, &nomem);
      if (!r) continue;
      *tail = r;
      tail = &r->next;
    }
  }
  if (nomem) {
    core::free_info(head);
    return to_fi(errc::nomem);
  }
  if (!head) return to_fi(errc::nodata);
  *info = head;
  return 0;
}

}  // namespace weft::lnx

// The registry's entry point (src/library.cpp).
fi_provider* weft_lnx_provider() noexcept {
  using namespace weft::lnx;
  static bool defined = [] {
    // The default link, unless FI_LNX_PROV_LINKS names others.
    the_config = parse_links("shm+tcp");
    weft::util::load_params(&provider(), params, the_config);
    return true;
  }();
  (void)defined;
  return &provider();
}
