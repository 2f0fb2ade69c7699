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
  if (!util::is_class(f, FI_CLASS_EP)) return to_fi(errc::inval);
  return abi_guard([&] { return endpoint::from(f)->getname(addr, addrlen); });
}
const fi_ops_cm cm_ops = util::cm_name_only(cm_getname);

const char* core_name(const core_ep& c) {
  return c.cd->m.prov.c_str();
}

}  // namespace

int endpoint::open(domain& dom, fi_info* info, fid_ep** out, void* context) noexcept {
  auto* p = &provider();
  if (!info || !out || !info->ep_attr || raw_enum(info->ep_attr->type) != FI_EP_RDM) {
    WEFT_WARN(p, FI_LOG_EP_CTRL, "lnx offers FI_EP_RDM endpoints only");
    return to_fi(errc::inval);
  }
  if (info->caps & ~offered_caps) {
    WEFT_WARN(p, FI_LOG_EP_CTRL, "fi_endpoint: caps 0x%llx are not offered by lnx",
              static_cast<unsigned long long>(info->caps & ~offered_caps));
    return to_fi(errc::inval);
  }
  return abi_guard([&]() -> int {
    auto ep = std::make_unique<endpoint>(dom, *info, context);
    if (int ret = ep->open_cores(*info)) return ret;
    *out = ep.release();
    return 0;
  });
}

endpoint::endpoint(domain& dom, const fi_info& info, void* context)
    : endpoint_object(FI_CLASS_EP, context),
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
    if (c.av) fi_close(&c.av->fid);
  }
  // A shared context's engine is the context's: it outlives us (our
  // reference in shared_), and our cores withdrew what they queued in it.
  if (own_engine_) {
    if (locked_)
      own_engine_->shutdown<util::mutex_lock>();
    else
      own_engine_->shutdown<util::null_lock>();
  }
}

int endpoint::open_cores(const fi_info& info) {
  auto* p = &provider();
  for (auto& cd : domain_->cores()) {
    core_ep c;
    c.cd = cd.get();
    // shm's progress is a few loads when idle: every read drives it.
    c.every_read = cd->m.prov == "shm";
    fi_info* ci = fi_dupinfo(cd->info);
    if (!ci) return to_fi(errc::nomem);
    // Sends pass through with the application's default flags; receives
    // are lnx's, so the core's receive side has none.
    ci->tx_attr->op_flags = tx_op_flags_;
    ci->rx_attr->op_flags = 0;
    // A sender's address serves lnx only for FI_SOURCE (completions name
    // it, an unknown one is FI_ADDR_NOTAVAIL) and directed receives: an
    // endpoint with neither spares its cores finding it for every message.
    if (!(caps_ & (FI_SOURCE | FI_DIRECTED_RECV))) {
      ci->caps &= ~uint64_t{FI_SOURCE | FI_DIRECTED_RECV};
      ci->rx_attr->caps &= ~uint64_t{FI_SOURCE | FI_DIRECTED_RECV};
    }
    if (info.tx_attr && info.tx_attr->size) ci->tx_attr->size = info.tx_attr->size;
    int ret = fi_endpoint(cd->domain, ci, &c.ep, nullptr);
    fi_freeinfo(ci);
    if (ret) {
      WEFT_WARN(p, FI_LOG_EP_CTRL, "fi_endpoint: the %s endpoint did not open: %s",
                cd->m.prov.c_str(), fi_strerror(-ret));
      return ret;
    }
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    if ((ret = fi_av_open(cd->domain, &aa, &c.av, nullptr)) ||
        (ret = fi_ep_bind(c.ep, &c.av->fid, 0))) {
      cores_.push_back(c);
      WEFT_WARN(p, FI_LOG_EP_CTRL, "fi_endpoint: the %s AV: %s", cd->m.prov.c_str(),
                fi_strerror(-ret));
      return ret;
    }
    cores_.push_back(c);
  }
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
  if (watching_) bound_.av_->unwatch(this);
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
  // A counter's read drives every core (cntr_progress_thunk); a CQ's
  // drives those whose hooks are not on its list already (bind_cq).
  util::progress_hook hook{
      bfid->fclass == FI_CLASS_CNTR ? &cntr_progress_thunk : &progress_thunk, this};
  if (int ret = bound_.bind(*domain_, bfid, flags, hook, -1)) return ret;
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
  if (int ret = bound_.check_enable(p, FI_EP_RDM, caps_)) return ret;
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
  for (core_ep& c : cores_) {
    c.face = engine_->add_peer(nullptr, this);
    c.srx_ctx = {sizeof(fi_peer_srx_context), c.face};
    fi_rx_attr ra{};
    ra.op_flags = FI_PEER;
    int ret = fi_srx_context(c.cd->domain, &ra, &c.srx, &c.srx_ctx);
    if (!ret) ret = fi_ep_bind(c.ep, &c.srx->fid, 0);
    if (!ret) ret = fi_enable(c.ep);
    size_t len = 0;
    char probe[1];
    if (!ret && fi_getname(&c.ep->fid, probe, &len) != -FI_ETOOSMALL) ret = to_fi(errc::other);
    if (ret) {
      WEFT_WARN(p, FI_LOG_EP_CTRL, "fi_enable: the %s endpoint: %s", core_name(c),
                fi_strerror(-ret));
      return ret;
    }
    c.addrlen = len;
  }
  // The address must hold every core's (64 bytes, proto.hpp): found out
  // here rather than by the application's first fi_getname.
  size_t name_len = sizeof own_name_;
  if (int ret = getname(own_name_, &name_len)) return ret;
  bound_.av_->watch(this, &av_changed);
  watching_ = true;
  resync(false);
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

uint64_t endpoint::signature(fi_addr_t a) const noexcept {
  const util::av* av = bound_.av_.get();
  const uint8_t* e = av->entry(a);
  if (!e) return 0;
  return av->codec().hash(e) << 1 | 1;
}

size_t endpoint::pick_rail(const uint8_t* peer, size_t rails) const noexcept {
  // Both ends of a pair must choose the same rail: a message arriving on
  // another rail than the one its receiver sends on would come from a peer
  // that core does not know (the cores hold only the peers routed through
  // them), so the choice is a function of the pair, symmetric in it: the
  // hashes of the two lnx addresses, combined by xor. Every message to a
  // peer then takes one rail, in the order the endpoint advertises, and
  // peers spread over the rails.
  if (rails <= 1) return 0;
  const uint32_t x = codec().hash(peer) ^ codec().hash(own_name_);
  return (x ^ (x >> 16)) % rails;
}

uint64_t endpoint::resolve(fi_addr_t a) noexcept {
  auto* p = &provider();
  const util::av* av = bound_.av_.get();
  const uint8_t* e = av->entry(a);
  if (!e) return 0;
  proto::addr_header h;
  part parts[proto::max_parts];
  size_t n = 0;
  if (!read_address(e, h, parts, &n)) return 0;  // the codec checked it at insert
  // shm for a peer on this host; else the first other provider we share,
  // on one of its rails (pick_rail).
  const part* use = nullptr;
  size_t core = 0;
  size_t rail = 0, rails = 1;
  for (int pass = 0; pass < 2 && !use; ++pass) {
    for (size_t i = 0; i < n && !use; ++i) {
      bool shm = parts[i].id == proto::prov_id::shm;
      if (pass == 0 && !(shm && same_host(h))) continue;
      if (pass == 1 && shm) continue;
      for (size_t k = 0; k < cores_.size(); ++k)
        if (cores_[k].cd->m.id == parts[i].id) {
          // Rails: the peer's parts of this provider from i on, ours from k on.
          size_t theirs = 1, ours = 1;
          while (i + theirs < n && parts[i + theirs].id == parts[i].id) ++theirs;
          while (k + ours < cores_.size() && cores_[k + ours].cd->m.id == parts[i].id) ++ours;
          rails = std::min(theirs, ours);
          rail = pick_rail(e, rails);
          use = &parts[i + rail];
          core = k + rail;
          break;
        }
    }
  }
  if (!use) {
    WEFT_WARN(p, FI_LOG_AV, "fi_addr %llu: no provider of this link reaches that peer",
              static_cast<unsigned long long>(a));
    return 0;
  }
  core_ep& c = cores_[core];
  std::vector<uint8_t> buf(c.addrlen, 0);
  if (!decode_part(c.cd->info->addr_format, core_name(c), use->bytes, use->len, buf.data(),
                   buf.size())) {
    WEFT_WARN(p, FI_LOG_AV, "fi_addr %llu: its %s address (%zu bytes) is not one our %s takes",
              static_cast<unsigned long long>(a), core_name(c), use->len, core_name(c));
    return 0;
  }
  fi_addr_t id = av->report(a);
  if (fi_av_insert(c.av, buf.data(), 1, &id, FI_AV_USER_ID, nullptr) != 1) {
    WEFT_WARN(p, FI_LOG_AV, "fi_addr %llu: the %s AV refused the peer's address",
              static_cast<unsigned long long>(a), core_name(c));
    return 0;
  }
  WEFT_INFO(p, FI_LOG_AV, "fi_addr %llu: through %s", static_cast<unsigned long long>(a),
            core_name(c));
  if (rails > 1)
    WEFT_INFO(p, FI_LOG_AV, "fi_addr %llu: rail %zu of %zu, %s:%s",
              static_cast<unsigned long long>(a), rail, rails, core_name(c),
              c.cd->m.domain.c_str());
  uint64_t r = route_table::make(core, id);
  if (!routes_.set(a, r)) {
    fi_av_remove(c.av, &id, 1, 0);
    return 0;
  }
  if (sigs_.size() <= a) {
    sigs_.resize(a + 1, 0);
    ids_.resize(a + 1, 0);
  }
  sigs_[a] = signature(a);
  ids_[a] = id;
  return r;
}

void endpoint::unroute(fi_addr_t a) noexcept {
  uint64_t r = routes_.get(a);
  if (!r) return;
  routes_.set(a, 0);
  fi_addr_t ca = route_table::addr_of(r);
  fi_av_remove(cores_[route_table::core_of(r)].av, &ca, 1, 0);
  if (a < sigs_.size()) sigs_[a] = 0;
}

uint64_t endpoint::resolve_on_send(fi_addr_t a) noexcept {
  if (!enabled_ || !bound_.av_) return 0;
  std::lock_guard g(ctl_);
  if (uint64_t r = routes_.get(a)) return r;  // another thread made it
  uint64_t r = resolve(a);
  if (!r && !bound_.av_->entry(a))
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "fi_addr %llu is not in the endpoint's AV",
              static_cast<unsigned long long>(a));
  return r;
}

void endpoint::av_changed(void* obj, bool inserted_only) noexcept {
  static_cast<endpoint*>(obj)->resync(inserted_only);
}

void endpoint::resync(bool inserted_only) noexcept {
  std::lock_guard g(ctl_);
  const util::av* av = bound_.av_.get();
  size_t bound = av->table().bound();
  // After inserts only: the new indices, and the holes removals left below.
  size_t from = inserted_only && !holes_ ? scanned_ : 0;
  size_t holes = 0;
  std::vector<fi_addr_t> gone;  // the names removed peers had
  for (size_t a = from; a < bound; ++a) {
    uint64_t r = routes_.get(a);
    bool live = av->entry(a) != nullptr;
    if (r && (!live || (!inserted_only && (a >= sigs_.size() || sigs_[a] != signature(a))))) {
      if (a < ids_.size()) gone.push_back(ids_[a]);
      unroute(a);
      r = 0;
    }
    if (r && !inserted_only && ids_[a] != av->report(a)) {
      // fi_av_set_user_id: the core keeps the peer, under its new name.
      fi_addr_t ca = route_table::addr_of(r), id = av->report(a);
      if (fi_av_set_user_id(cores_[route_table::core_of(r)].av, ca, id, 0) == 0) {
        ids_[a] = id;
      } else {
        WEFT_WARN(&provider(), FI_LOG_AV, "fi_addr %llu: the %s AV kept its old user id",
                  static_cast<unsigned long long>(a), core_name(cores_[route_table::core_of(r)]));
      }
    }
    if (live && !r) r = resolve(a);
    if (!r) ++holes;
  }
  if (from == 0)
    holes_ = holes;
  else
    holes_ += holes;
  scanned_ = bound;
  // Messages queued from a removed peer are from an unknown source again
  // (fi_av(3)); the cores cannot say so to lnx's engine (fi_peer(3) has no
  // such call), so lnx relabels them itself. Inserting the peer again
  // names them once more through the cores' foreach_unspec_addr.
  if (!gone.empty() && engine_) {
    auto source = [&](fi_peer_rx_entry* e) {
      return std::find(gone.begin(), gone.end(), e->addr) != gone.end() ? FI_ADDR_NOTAVAIL
                                                                          : e->addr;
    };
    if (locked_)
      engine_->relabel<util::mutex_lock>(source, true);
    else
      engine_->relabel<util::null_lock>(source, true);
  }
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
  if (!addrlen) return to_fi(errc::inval);
  if (!addr || *addrlen < proto::addr_bytes) {
    *addrlen = proto::addr_bytes;
    return to_fi(errc::toosmall);
  }
  uint8_t out[proto::addr_bytes] = {};
  proto::addr_header h{proto::marker, proto::version, {}};
  host_bytes(h.host);
  std::memcpy(out, &h, sizeof h);
  size_t off = sizeof h;
  for (core_ep& c : cores_) {
    uint8_t name[256];
    size_t len = sizeof name;
    int ret = fi_getname(&c.ep->fid, name, &len);
    if (ret == -FI_ETOOSMALL) {
      WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_getname: the %s address (%zu bytes) is too long",
                core_name(c), len);
      return to_fi(errc::other);
    }
    if (ret) return ret;
    uint8_t part[proto::max_part_len];
    size_t n = encode_part(c.cd->info->addr_format, core_name(c), name, len, part);
    if (!n || off + 1 + n > proto::addr_bytes) {
      WEFT_WARN(&provider(), FI_LOG_EP_CTRL,
                "fi_getname: the %s address does not fit in an lnx address of %zu bytes",
                core_name(c), proto::addr_bytes);
      return to_fi(errc::other);
    }
    out[off++] = proto::part_byte(c.cd->m.id, n);
    std::memcpy(out + off, part, n);
    off += n;
  }
  std::memcpy(addr, out, proto::addr_bytes);
  *addrlen = proto::addr_bytes;
  return 0;
}

}  // namespace weft::lnx
