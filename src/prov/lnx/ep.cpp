// SPDX-License-Identifier: MIT
// weft — the lnx endpoint's life: its core endpoints, bindings (each lnx CQ
// or counter gets a peer CQ or counter on every core), enable, routes,
// names, close. The data path is in xfer.cpp.
#include "prov/lnx/ep.hpp"

#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "core/log.hpp"
#include "util/av.hpp"
#include "util/nosys.hpp"

namespace weft::lnx {

namespace {

void cntr_inc(fid_peer_cntr* c) noexcept {
  static_cast<cntr_owner*>(c)->target->inc();
}
void cntr_incerr(fid_peer_cntr* c) noexcept {
  static_cast<cntr_owner*>(c)->target->inc_err();
}
constexpr fi_ops_cntr_owner cntr_ops = {sizeof(fi_ops_cntr_owner), cntr_inc, cntr_incerr};

int cm_getname(fid_t f, void* addr, size_t* addrlen) noexcept {
  if (!util::is_class(f, FI_CLASS_EP) && !util::is_class(f, FI_CLASS_TX_CTX) &&
      !util::is_class(f, FI_CLASS_RX_CTX))
    return to_fi(errc::inval);
  return abi_guard([&] { return endpoint::from(f)->getname(addr, addrlen); });
}
const fi_ops_cm cm_ops = util::cm_name_only(cm_getname);

const char* core_name(const core_ep& c) {
  return c.cd->m.prov.c_str();
}

}  // namespace

fi_info* core_info(const core_domain& cd, const fi_info& info) noexcept {
  fi_info* ci = fi_dupinfo(cd.info);
  if (!ci) return nullptr;
  // Sends pass through with the application's default flags; receives
  // are lnx's, so the core's receive side has none.
  ci->tx_attr->op_flags = info.tx_attr ? info.tx_attr->op_flags : 0;
  ci->rx_attr->op_flags = 0;
  // A sender's address serves lnx only for FI_SOURCE (completions name
  // it, an unknown one is FI_ADDR_NOTAVAIL) and directed receives: an
  // endpoint with neither spares its cores finding it for every message.
  if (!(info.caps & (FI_SOURCE | FI_DIRECTED_RECV))) {
    ci->caps &= ~uint64_t{FI_SOURCE | FI_DIRECTED_RECV};
    ci->rx_attr->caps &= ~uint64_t{FI_SOURCE | FI_DIRECTED_RECV};
  }
  if (info.tx_attr && info.tx_attr->size) ci->tx_attr->size = info.tx_attr->size;
  return ci;
}

int endpoint::check_info(const char* call, const fi_info* info, fid_ep** out) noexcept {
  auto* p = &provider();
  if (!info || !out || !info->ep_attr || raw_enum(info->ep_attr->type) != FI_EP_RDM) {
    WEFT_WARN(p, FI_LOG_EP_CTRL, "%s: lnx offers FI_EP_RDM endpoints only", call);
    return to_fi(errc::inval);
  }
  if (info->caps & ~offered_caps) {
    WEFT_WARN(p, FI_LOG_EP_CTRL, "%s: caps 0x%llx are not offered by lnx", call,
              static_cast<unsigned long long>(info->caps & ~offered_caps));
    return to_fi(errc::inval);
  }
  return 0;
}

int endpoint::open(domain& dom, fi_info* info, fid_ep** out, void* context) noexcept {
  auto* p = &provider();
  if (int ret = check_info("fi_endpoint", info, out)) return ret;
  if (int ret = util::refuse_several_contexts(p, *info)) return ret;
  return abi_guard([&]() -> int {
    auto ep = std::make_unique<endpoint>(dom, *info, FI_CLASS_EP, context);
    std::vector<core_domain*> cds;
    for (auto& cd : dom.cores()) cds.push_back(cd.get());
    ep->own_router_ = std::make_unique<router>(std::move(cds), ep->locked_);
    ep->router_ = ep->own_router_.get();
    ep->routes_ = ep->router_->reader();
    if (int ret = ep->open_cores(*info)) return ret;
    for (size_t k = 0; k < ep->cores_.size(); ++k) ep->router_->set_holder(k, ep->cores_[k].ep);
    *out = ep.release();
    return 0;
  });
}

int endpoint::open_context(domain& dom, const fi_info& info, bool tx, int index,
                           const std::vector<fid_ep*>& cores, router& r,
                           std::unique_ptr<util::sep_slot> slot, fid_ep** out,
                           void* context) noexcept {
  return abi_guard([&]() -> int {
    auto ep =
        std::make_unique<endpoint>(dom, info, tx ? FI_CLASS_TX_CTX : FI_CLASS_RX_CTX, context);
    ep->sep_slot_ = std::move(slot);
    ep->router_ = &r;
    ep->routes_ = r.reader();
    if (int ret = ep->open_cores(info, &cores, index)) return ret;
    *out = ep.release();
    return 0;
  });
}

endpoint::endpoint(domain& dom, const fi_info& info, size_t fclass, void* context)
    : endpoint_object(fclass, context),
      domain_(&dom),
      caps_(info.caps),
      tx_op_flags_(info.tx_attr ? info.tx_attr->op_flags : 0),
      rx_op_flags_(info.rx_attr ? info.rx_attr->op_flags : 0),
      rx_size_(info.rx_attr ? info.rx_attr->size : 0),
      max_msg_(info.ep_attr && info.ep_attr->max_msg_size ? info.ep_attr->max_msg_size : SIZE_MAX),
      inject_size_(info.tx_attr ? info.tx_attr->inject_size : 0),
      // The engine is reached by the application and by every core's
      // progress: it locks unless the application serialises the domain.
      locked_(dom.lock_threading() != FI_THREAD_DOMAIN) {
  cm = const_cast<fi_ops_cm*>(&cm_ops);
  msg = util::writable(util::msg_badstate);
  tagged = util::writable(util::tagged_badstate);
  if (caps_ & FI_RMA) rma = const_cast<fi_ops_rma*>(rma_table(false));
  if (caps_ & FI_ATOMIC) atomic = const_cast<fi_ops_atomic*>(atomic_table(false));
}

endpoint::~endpoint() {
  // Core objects go before the engine whose faces they use: endpoints
  // first (closing one withdraws what it queued), then what they bound.
  for (core_ep& c : cores_) {
    if (c.ep && fi_close(&c.ep->fid))
      WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "closing the %s endpoint failed", core_name(c));
    c.ep = nullptr;
  }
  for (core_ep& c : cores_) {
    for (fid_cq* q : c.cqs) fi_close(&q->fid);
    for (fid_cntr* n : c.cntrs) fi_close(&n->fid);
    if (c.srx) fi_close(&c.srx->fid);
  }
  // Our router's core AVs were bound to the core endpoints closed above.
  if (engine_added_) router_->remove_engine(engine_);
  own_router_.reset();
  // A shared context's engine is the context's: it outlives us (our
  // reference in shared_), and our cores withdrew what they queued in it.
  if (own_engine_) {
    if (locked_)
      own_engine_->shutdown<util::mutex_lock>();
    else
      own_engine_->shutdown<util::null_lock>();
  }
}

int endpoint::open_cores(const fi_info& info, const std::vector<fid_ep*>* seps, int index) {
  auto* p = &provider();
  if (seps) {
    // A context: its cores are the same context of each core's scalable
    // endpoint, with the attributes that endpoint was opened with
    // (core_info, sep.cpp).
    const bool tx = fid.fclass == FI_CLASS_TX_CTX;
    for (size_t k = 0; k < domain_->cores().size(); ++k) {
      core_ep c;
      c.cd = domain_->cores()[k].get();
      c.every_read = c.cd->m.prov == "shm";
      int ret = tx ? fi_tx_context((*seps)[k], index, nullptr, &c.ep, nullptr)
                   : fi_rx_context((*seps)[k], index, nullptr, &c.ep, nullptr);
      if (ret) {
        WEFT_WARN(p, FI_LOG_EP_CTRL, "%s: the %s context did not open: %s",
                  tx ? "fi_tx_context" : "fi_rx_context", core_name(c), fi_strerror(-ret));
        return ret;
      }
      cores_.push_back(c);
    }
    return query_atomic_bytes();
  }
  for (auto& cd : domain_->cores()) {
    core_ep c;
    c.cd = cd.get();
    // shm's progress is a few loads when idle: every read drives it.
    c.every_read = cd->m.prov == "shm";
    fi_info* ci = core_info(*cd, info);
    if (!ci) return to_fi(errc::nomem);
    int ret = fi_endpoint(cd->domain, ci, &c.ep, nullptr);
    fi_freeinfo(ci);
    if (ret) {
      WEFT_WARN(p, FI_LOG_EP_CTRL, "fi_endpoint: the %s endpoint did not open: %s",
                cd->m.prov.c_str(), fi_strerror(-ret));
      return ret;
    }
    cores_.push_back(c);
  }
  return query_atomic_bytes();
}

int endpoint::query_atomic_bytes() noexcept {
  // Operand bytes per atomic: the smallest any core takes (fi_query_atomic
  // on bytes, FI_UINT8, counts them).
  atomic_bytes_ = SIZE_MAX;
  for (core_ep& c : cores_) {
    fi_atomic_attr a{};
    if (fi_query_atomic(c.cd->domain, FI_UINT8, FI_SUM, &a, 0) == 0)
      atomic_bytes_ = std::min(atomic_bytes_, a.count);
    else
      atomic_bytes_ = 0;
  }
  return 0;
}

bool endpoint::refuse_size(size_t bytes, bool inject) const noexcept {
  WEFT_WARN(&provider(), FI_LOG_EP_DATA, "%zu bytes: beyond the %s of %zu", bytes,
            inject ? "inject_size" : "max_msg_size", inject ? inject_size_ : max_msg_);
  return false;
}

int endpoint::close() {
  if (busy()) return to_fi(errc::busy);
  // Our router calls no more into our engine (nor, when it is ours, does
  // the AV into it).
  if (engine_added_) router_->remove_engine(engine_);
  engine_added_ = false;
  if (own_router_) own_router_->stop();
  // The bindings go before the core objects, which the destructor closes
  // at once: the lnx CQs and counters stay open until this call returns
  // (the application closes them after the endpoint), so the cores' hooks
  // on their progress lists and their writes into them end first.
  for (core_ep& c : cores_)
    for (auto [q, fd] : c.wait_fds) q->remove_wait_fd(fd);
  bound_.unbind(this, -1);
  delete this;
  return 0;
}

int endpoint::bind(struct fid* bfid, uint64_t flags) {
  auto* p = &provider();
  if (enabled_) {
    WEFT_WARN(p, FI_LOG_EP_CTRL, "fi_ep_bind after fi_enable");
    return to_fi(errc::opbadstate);
  }
  if (!bfid) return to_fi(errc::inval);
  // A shared transmit context is util's (checked and held by bound_): each
  // lnx endpoint keeps its own core endpoints, as every weft provider keeps
  // its own transmit machinery (util/stx_ctx.hpp). A shared receive context
  // is util's too (util::srx_ctx): its engine takes the place of the
  // endpoint's own, and the cores match through faces of it (enable()).
  if (bfid->fclass == FI_CLASS_SRX_CTX) return shared_.bind(p, *domain_, bfid, flags);
  // A context takes its AV from its scalable endpoint only (util/sep.hpp).
  if (bfid->fclass == FI_CLASS_AV && sep_slot_ && !sep_slot_->admits_av(&fid))
    return to_fi(errc::inval);
  // A counter's read drives every core (cntr_progress_thunk); a CQ's
  // drives those whose hooks are not on its list already (bind_cq).
  util::progress_hook hook{
      bfid->fclass == FI_CLASS_CNTR ? &cntr_progress_thunk : &progress_thunk, this};
  if (int ret = bound_.bind(*domain_, bfid, flags, hook, -1)) return ret;
  // The cores' AVs open with the lnx AV (its rx_ctx_bits are theirs).
  if (bfid->fclass == FI_CLASS_AV) return router_->attach(*util::av::from(bfid));
  if (bfid->fclass == FI_CLASS_CQ) return bind_cq(*util::cq::from(bfid), flags);
  if (bfid->fclass == FI_CLASS_CNTR) return bind_cntr(*util::cntr::from(bfid), flags);
  return 0;
}

int endpoint::bind_cq(util::cq& q, uint64_t flags) {
  for (core_ep& c : cores_) {
    // One owner per core: a core read on every lnx read (shm) asks to have
    // its endpoint's progress hook on the lnx CQ's own list, so reading the
    // lnx CQ drives it with no peer CQ read between (util::cq_forward).
    auto owner = std::make_unique<cq_owner>();
    owner->fid.fclass = FI_CLASS_PEER_CQ;
    owner->owner_ops = locked_ ? util::cq_forward::forward_ops<util::mutex_lock>()
                               : util::cq_forward::forward_ops<util::null_lock>();
    owner->target = &q;
    owner->refused = &backlog_;
    owner->ctx.cq = owner.get();
    owner->share_progress = c.every_read;
    cq_owner& o = *owner;
    cq_owners_.push_back(std::move(owner));
    fi_cq_attr a{};
    a.format = FI_CQ_FORMAT_TAGGED;
    // A core of our lock policy writes into the lnx CQ itself
    // (util::cq::write_target) and never uses this ring; one of another
    // writes through the peer CQ, whose ring holds only what a full lnx CQ
    // refused, and when it fills the core holds back.
    a.size = 64;
    a.flags = FI_PEER;
    a.wait_obj = q.waiter() ? FI_WAIT_FD : FI_WAIT_NONE;
    fid_cq* core_cq = nullptr;
    int ret = fi_cq_open(c.cd->domain, &a, &core_cq, &o.ctx);
    if (ret) {
      WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_ep_bind: the %s peer CQ: %s", core_name(c),
                fi_strerror(-ret));
      return ret;
    }
    c.cqs.push_back(core_cq);
    c.driven_by_cqs = (c.cqs.size() == 1 || c.driven_by_cqs) && o.progress_shared;
    uint64_t f = flags & (FI_TRANSMIT | FI_SEND | FI_RECV | FI_SELECTIVE_COMPLETION);
    if ((ret = fi_ep_bind(c.ep, &core_cq->fid, f))) {
      WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_ep_bind: the %s endpoint refused its CQ: %s",
                core_name(c), fi_strerror(-ret));
      return ret;
    }
    if (q.waiter()) {
      // A reader asleep on the lnx CQ wakes when a core has work: the
      // cores' wait fds join the lnx CQ's.
      int fd = -1;
      if (fi_control(&core_cq->fid, FI_GETWAIT, &fd) == 0 && fd >= 0) {
        if (errc e = q.add_wait_fd(fd); e != errc::ok) return to_fi(e);
        c.wait_fds.emplace_back(&q, fd);
      }
    }
  }
  return 0;
}

std::unique_ptr<cntr_owner> make_cntr_owner(util::cntr& target) {
  auto owner = std::make_unique<cntr_owner>();
  owner->fid.fclass = FI_CLASS_PEER_CNTR;
  owner->owner_ops = const_cast<fi_ops_cntr_owner*>(&cntr_ops);
  owner->target = &target;
  owner->ctx.cntr = owner.get();
  return owner;
}

int open_core_cntr(fid_domain* dom, cntr_owner& owner, fid_cntr** out) noexcept {
  fi_cntr_attr a{};
  a.events = FI_CNTR_EVENTS_COMP;
  a.flags = FI_PEER;
  return fi_cntr_open(dom, &a, out, &owner.ctx);
}

int endpoint::bind_cntr(util::cntr& n, uint64_t flags) {
  auto owner = make_cntr_owner(n);
  for (core_ep& c : cores_) {
    fid_cntr* core_cntr = nullptr;
    int ret = open_core_cntr(c.cd->domain, *owner, &core_cntr);
    if (ret) {
      WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_ep_bind: the %s peer counter: %s", core_name(c),
                fi_strerror(-ret));
      return ret;
    }
    c.cntrs.push_back(core_cntr);
    if ((ret = fi_ep_bind(c.ep, &core_cntr->fid, flags))) {
      WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_ep_bind: the %s endpoint refused its counter: %s",
                core_name(c), fi_strerror(-ret));
      return ret;
    }
  }
  cntr_owners_.push_back(std::move(owner));
  return 0;
}

int endpoint::control(int command, void* arg) {
  if (command == FI_ENABLE) return enable();
  int ret = util::ops_flags_control(&provider(), command, arg, tx_op_flags_, rx_op_flags_);
  return ret == 1 ? to_fi(errc::nosys) : ret;
}

int endpoint::enable() {
  if (enabled_) return 0;
  auto* p = &provider();
  if (engine_) {
    // A core refused an earlier fi_enable after others had taken their
    // bindings: the endpoint cannot be put back as it was.
    WEFT_WARN(p, FI_LOG_EP_CTRL, "fi_enable after a failed one: close the endpoint");
    return to_fi(errc::opbadstate);
  }
  if (int ret = bound_.check_enable(p, FI_EP_RDM, util::caps_needing_bindings(fid.fclass, caps_)))
    return ret;
  if (!router_->attached()) {
    WEFT_WARN(p, FI_LOG_EP_CTRL, "fi_enable: the cores' AVs did not open (see fi_ep_bind)");
    return to_fi(errc::opbadstate);
  }
  if (util::srx_ctx* app = shared_.app()) {
    // The cores name senders only when the endpoint asked for FI_SOURCE or
    // FI_DIRECTED_RECV (open_cores): without, a context's directed receive
    // would never match.
    if (app->engine().directed() && !(caps_ & (FI_SOURCE | FI_DIRECTED_RECV))) {
      WEFT_WARN(p, FI_LOG_EP_CTRL,
                "fi_enable: the shared receive context takes directed receives, and the "
                "endpoint was opened without FI_DIRECTED_RECV or FI_SOURCE");
      return to_fi(errc::inval);
    }
    // Cores name senders by the lnx AV's reported values, as below.
    if (int ret = app->attach(bound_.rx_cq.get(), bound_.av_.get(), true)) return ret;
    engine_ = &app->engine();
  } else {
    util::srx_attr a;
    a.prov = p;
    a.rx_cq = bound_.rx_cq.get();
    a.threading = locked_ ? FI_THREAD_SAFE : FI_THREAD_DOMAIN;
    a.size = rx_size_;  // fi_endpoint(3): more posted receives are -FI_EAGAIN
    a.prealloc = false;  // an idle endpoint costs little (its cores cost already)
    a.min_multi_recv = min_multi_recv_;
    a.directed_recv = (caps_ & FI_DIRECTED_RECV) != 0;
    // Cores name senders by the lnx AV's reported values (routes), as
    // completions do: a directed receive's fi_addr is turned into that form.
    a.av = bound_.av_.get();
    own_engine_ = std::make_unique<util::srx>(a);
    engine_ = own_engine_.get();
  }
  // A transmit context receives nothing: its cores match through no one.
  const bool receives = fid.fclass != FI_CLASS_TX_CTX;
  std::vector<size_t> addrlens;
  for (core_ep& c : cores_) {
    int ret = 0;
    if (receives) {
      c.face = engine_->add_peer(nullptr, this);
      c.srx_ctx = {sizeof(fi_peer_srx_context), c.face};
      fi_rx_attr ra{};
      ra.op_flags = FI_PEER;
      ret = fi_srx_context(c.cd->domain, &ra, &c.srx, &c.srx_ctx);
      if (!ret) ret = fi_ep_bind(c.ep, &c.srx->fid, 0);
    }
    if (!ret) ret = fi_enable(c.ep);
    size_t len = 0;
    char probe[1];
    if (!ret && fi_getname(&c.ep->fid, probe, &len) != -FI_ETOOSMALL) ret = to_fi(errc::other);
    if (ret) {
      WEFT_WARN(p, FI_LOG_EP_CTRL, "fi_enable: the %s endpoint: %s", core_name(c),
                fi_strerror(-ret));
      return ret;
    }
    addrlens.push_back(len);
  }
  // The address must hold every core's (64 bytes, proto.hpp): found out
  // here rather than by the application's first fi_getname.
  uint8_t name[proto::addr_bytes];
  size_t name_len = sizeof name;
  if (int ret = getname(name, &name_len)) return ret;
  if (receives) {
    router_->add_engine(engine_);
    engine_added_ = true;
  }
  router_->start(addrlens, name);
  // progress_thunk's fast path: nothing when every every_read core's hook
  // is on the lnx CQs' lists, else the one peer CQ read of the one
  // every_read core that is not (any of a core's peer CQs drives its
  // endpoint). Anything else (several, or one without a peer CQ) takes the
  // full schedule on every read. Bindings made later add nothing it needs.
  every_complete_ = true;
  every_one_ = nullptr;
  for (core_ep& c : cores_) {
    if (!c.every_read || c.driven_by_cqs) continue;
    if (c.cqs.empty() || every_one_)
      every_complete_ = false;
    else
      every_one_ = c.cqs.front();
  }
  const bool shared_rx = shared_.bound();
  msg = const_cast<fi_ops_msg*>(locked_ ? msg_table<util::mutex_lock>(shared_rx)
                                        : msg_table<util::null_lock>(shared_rx));
  tagged = const_cast<fi_ops_tagged*>(locked_ ? tagged_table<util::mutex_lock>(shared_rx)
                                              : tagged_table<util::null_lock>(shared_rx));
  if (caps_ & FI_RMA) rma = const_cast<fi_ops_rma*>(rma_table(true));
  if (caps_ & FI_ATOMIC) atomic = const_cast<fi_ops_atomic*>(atomic_table(true));
  enabled_ = true;
  return 0;
}

void endpoint::progress_thunk(void* obj) noexcept {
  // Reading a peer CQ or counter drives its core's progress; the core
  // writes what it completes straight into the lnx CQs and counters. One
  // read per core is enough (each of a core's peer CQs and counters drives
  // the same endpoint), except when a completion waits in a peer CQ for
  // room in a full lnx CQ: only reading that peer CQ hands it over.
  // A shm-like core whose hook is on the lnx CQ's list (bind_cq) is driven
  // by that list, not from here.
  auto* ep = static_cast<endpoint*>(obj);
  const uint64_t n = ep->reads_.load(std::memory_order_relaxed) + 1;
  ep->reads_.store(n, std::memory_order_relaxed);
  if (n >= ep->others_at_.load(std::memory_order_relaxed) ||
      ep->backlog_.load(std::memory_order_relaxed)) [[unlikely]]
    return ep->progress_all(n, false);
  // The usual link: nothing (the core's hook is on the list), or one
  // shm-like core to read, the last call, a jump.
  if (fid_cq* const one = ep->every_one_) one->ops->read(one, nullptr, 0);
}

void endpoint::cntr_progress_thunk(void* obj) noexcept {
  // A counter's progress list holds no core's hook: every core is driven
  // from here, a shm-like one on every read.
  auto* ep = static_cast<endpoint*>(obj);
  const uint64_t n = ep->reads_.load(std::memory_order_relaxed) + 1;
  ep->reads_.store(n, std::memory_order_relaxed);
  ep->progress_all(n, true);
}

void endpoint::progress_all(uint64_t n, bool every_core) noexcept {
  bool all = backlog_.load(std::memory_order_relaxed);
  if (all) backlog_.store(false, std::memory_order_relaxed);
  bool hot = false;
  for (core_ep& c : cores_) {
    if (!c.every_read) {
      const bool h = n <= std::atomic_ref(c.hot_until).load(std::memory_order_relaxed);
      hot |= h;
      if (!h && !all && n % idle_stride != 0) continue;
    }
    // Reading a peer CQ whose hooks are on the lnx CQ's list hands over
    // what the lnx CQ refused (`all`) but drives nothing; its counter does.
    const bool by_cq = !c.driven_by_cqs;
    if (all) {
      for (fid_cq* q : c.cqs) fi_cq_read(q, nullptr, 0);
      if (!by_cq && every_core && !c.cntrs.empty()) fi_cntr_read(c.cntrs.front());
    } else if (by_cq && !c.cqs.empty()) {
      fi_cq_read(c.cqs.front(), nullptr, 0);
    } else if ((by_cq || every_core) && !c.cntrs.empty()) {
      fi_cntr_read(c.cntrs.front());
    }
  }
  // The next full schedule: the next read while a core is hot (or the fast
  // path cannot drive every every_read core), else the next stride.
  others_at_.store(hot || !every_complete_ ? n + 1 : (n / idle_stride + 1) * idle_stride,
                   std::memory_order_relaxed);
}

// ---- routes -------------------------------------------------------------------

bool endpoint::route_slow(fi_addr_t dest, fid_ep*& ep, fi_addr_t& addr) noexcept {
  if (!enabled_) return false;
  // fi_rx_addr: the peer's route, and the same receive context index in
  // the core's fi_addr (its AV has the lnx AV's rx_ctx_bits, router::attach).
  const fi_addr_t mask = router_->base_mask();
  const fi_addr_t base = dest & mask;
  uint64_t r = routes_.get(base);
  if (!r) r = router_->resolve_on_send(base);
  if (!r) return false;
  take(r, ep, addr);
  addr |= dest & ~mask;
  return true;
}

// ---- the rest of the endpoint ---------------------------------------------------

ssize_t endpoint::cancel(void* context) {
  // Under a shared receive context the receives are the context's to cancel.
  if (!own_engine_) return to_fi(errc::noent);
  return locked_ ? own_engine_->cancel<util::mutex_lock>(context)
                 : own_engine_->cancel<util::null_lock>(context);
}

int endpoint::setopt(int level, int name, const void* val, size_t len) {
  int ret = endpoint_object::setopt(level, name, val, len);
  if (ret == 0 && name == FI_OPT_MIN_MULTI_RECV && own_engine_)
    own_engine_->set_min_multi_recv(min_multi_recv_);
  return ret;
}

ssize_t endpoint::rx_size_left() {
  if (!enabled_) return to_fi(errc::opbadstate);
  if (!own_engine_) return to_fi(errc::nosys);  // receives are the shared context's
  return locked_ ? own_engine_->rx_size_left<util::mutex_lock>()
                 : own_engine_->rx_size_left<util::null_lock>();
}

ssize_t endpoint::tx_size_left() {
  if (!enabled_) return to_fi(errc::opbadstate);
  ssize_t least = -1;
  for (core_ep& c : cores_) {
    ssize_t n = c.ep->ops->tx_size_left(c.ep);
    if (n < 0) return n;
    if (least < 0 || n < least) least = n;
  }
  return least;
}

int endpoint::getname(void* addr, size_t* addrlen) {
  // A context's cores answer with their scalable endpoints' names: ours is
  // the scalable endpoint's too.
  std::vector<core_domain*> cds;
  std::vector<struct fid*> named;
  for (core_ep& c : cores_) {
    cds.push_back(c.cd);
    named.push_back(&c.ep->fid);
  }
  return get_address(cds, named, addr, addrlen);
}

}  // namespace weft::lnx
