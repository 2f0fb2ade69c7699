// SPDX-License-Identifier: MIT
// weft — the trigger engine: triggered operations and deferred work.
#include "util/trigger.hpp"

#include "core/log.hpp"
#include "util/cntr.hpp"
#include "util/cq.hpp"
#include "util/domain.hpp"
#include "util/endpoint.hpp"

#include <algorithm>
#include <cstring>

namespace weft::util {

namespace {

// A deferred data transfer on its way through its endpoint's *msg call
// (queue_work sets it, the endpoint's engine takes it): the request comes
// with the call, and the engine checks that the endpoint is one of its own.
struct queuing {
  trigger_engine* engine;
  fi_deferred_work* work;
  bool taken;
};
thread_local queuing* tl_queuing = nullptr;

// More elements than any provider takes in one call (their iov limits are
// far below) is a corrupt count, refused before it sizes a copy.
constexpr size_t max_elements = 4096;

template <class T>
T* keep(std::vector<T>& v, const T* p, size_t n) {
  if (!p) return nullptr;
  v.assign(p, p + n);
  return v.data();
}

bool is_transfer(int type) noexcept {
  return type >= FI_OP_RECV && type <= FI_OP_COMPARE_ATOMIC;
}
bool is_receive(int type) noexcept { return type == FI_OP_RECV || type == FI_OP_TRECV; }

// The flags of an error completion for an operation of `type`.
uint64_t cq_flags_of(int type) noexcept {
  switch (type) {
    case FI_OP_SEND: return FI_SEND | FI_MSG;
    case FI_OP_RECV: return FI_RECV | FI_MSG;
    case FI_OP_TSEND: return FI_SEND | FI_TAGGED;
    case FI_OP_TRECV: return FI_RECV | FI_TAGGED;
    case FI_OP_READ: return FI_RMA | FI_READ;
    case FI_OP_WRITE: return FI_RMA | FI_WRITE;
    case FI_OP_ATOMIC: return FI_ATOMIC | FI_WRITE;
    default: return FI_ATOMIC | FI_READ;
  }
}

// A counter the application names, checked before any cast: of this domain.
cntr* counter_of(domain& dom, fid_cntr* c) noexcept {
  if (!c || !is_class(&c->fid, FI_CLASS_CNTR)) return nullptr;
  cntr* n = cntr::from(c);
  return &n->dom() == &dom ? n : nullptr;
}

}  // namespace

struct trigger_engine::entry {
  int type;
  fid_ep* ep = nullptr;  // null for counter operations
  ep_bindings* owner = nullptr;
  cntr* trig = nullptr;
  uint64_t threshold = 0;
  fi_deferred_work* work = nullptr;  // a deferred work request, or an FI_TRIGGER call
  cntr* completion = nullptr;        // deferred: counts the transfer once it completes
  bool hide = false;                 // deferred, without FI_COMPLETION: not on the CQ
  cntr* target = nullptr;            // FI_OP_CNTR_SET / FI_OP_CNTR_ADD
  uint64_t value = 0;
  uint64_t flags = 0;
  void* context = nullptr;  // what the operation's completions carry
  uint64_t tag = 0;
  // The copied call.
  fi_msg msg{};
  fi_msg_tagged tagged{};
  fi_msg_rma rma{};
  fi_msg_atomic atomic{};
  std::vector<iovec> iov;
  std::vector<void*> desc, cmp_desc, res_desc;
  std::vector<fi_rma_iov> rma_iov;
  std::vector<fi_ioc> ioc, cmp, res;
  std::vector<fi_rma_ioc> rma_ioc;
};

trigger_engine::trigger_engine(domain& dom) noexcept : dom_(dom) {}
trigger_engine::~trigger_engine() = default;

ssize_t trigger_intercept(const trigger_site& site, fid_ep* ep, const trigger_call& call) noexcept {
  return site.dom.triggers().queue(site, ep, call);
}

size_t trigger_engine::queued() noexcept {
  std::lock_guard g{m_};
  return queue_.size();
}

ssize_t trigger_engine::queue(const trigger_site& site, fid_ep* ep,
                              const trigger_call& call) noexcept {
  auto* prov = dom_.provider();
  queuing* q = tl_queuing;
  if (q) {
    tl_queuing = nullptr;  // taken: whatever this call issues is not the request
    if (q->engine != this) {
      WEFT_WARN(prov, FI_LOG_DOMAIN, "FI_QUEUE_WORK: the operation's endpoint belongs to another "
                "domain");
      return to_fi(errc::inval);
    }
    q->taken = true;
  }
  if (!(site.caps & FI_TRIGGER)) {
    WEFT_WARN(prov, FI_LOG_EP_DATA, "FI_TRIGGER on an endpoint opened without the FI_TRIGGER "
              "capability");
    return to_fi(errc::inval);
  }
  if (call.flags & FI_INJECT) {
    // FI_INJECT hands the buffer back at return; a deferred transfer reads it
    // when it fires.
    WEFT_WARN(prov, FI_LOG_EP_DATA, "FI_INJECT on a triggered operation is not supported");
    return to_fi(errc::nosys);
  }
  void* ctx = call.msg      ? call.msg->context
              : call.tagged ? call.tagged->context
              : call.rma    ? call.rma->context
                            : call.atomic->context;
  cntr* trig;
  uint64_t threshold;
  cntr* completion = nullptr;
  if (q) {
    // Checked by queue_work.
    trig = cntr::from(q->work->triggering_cntr);
    threshold = q->work->threshold;
    if (q->work->completion_cntr) completion = cntr::from(q->work->completion_cntr);
  } else {
    if (!ctx) {
      WEFT_WARN(prov, FI_LOG_EP_DATA, "FI_TRIGGER without a struct fi_triggered_context");
      return to_fi(errc::inval);
    }
    auto* tc = static_cast<fi_triggered_context*>(ctx);
    int event = raw_enum(tc->event_type);
    if (event != FI_TRIGGER_THRESHOLD) {
      bool xpu = event == FI_TRIGGER_XPU;
      WEFT_WARN(prov, FI_LOG_EP_DATA, "trigger event %d %s", event,
                xpu ? "(FI_TRIGGER_XPU) is not supported" : "is unknown");
      return to_fi(xpu ? errc::nosys : errc::inval);
    }
    trig = counter_of(dom_, tc->trigger.threshold.cntr);
    if (!trig) {
      WEFT_WARN(prov, FI_LOG_EP_DATA, "the triggering counter is %s",
                tc->trigger.threshold.cntr ? "not a counter of the endpoint's domain" : "null");
      return to_fi(errc::inval);
    }
    threshold = tc->trigger.threshold.threshold;
  }

  size_t counts[] = {
      call.msg ? call.msg->iov_count : 0,
      call.tagged ? call.tagged->iov_count : 0,
      call.rma ? std::max(call.rma->iov_count, call.rma->rma_iov_count) : 0,
      call.atomic ? std::max(call.atomic->iov_count, call.atomic->rma_iov_count) : 0,
      call.cmp_count,
      call.res_count,
  };
  for (size_t n : counts)
    if (n > max_elements) {
      WEFT_WARN(prov, FI_LOG_EP_DATA, "a triggered operation with %zu elements in one array", n);
      return to_fi(errc::inval);
    }

  return abi_guard([&]() -> ssize_t {
    auto e = std::make_unique<entry>();
    e->type = call.type;
    e->ep = ep;
    e->owner = &site.bound;
    e->trig = trig;
    e->threshold = threshold;
    e->work = q ? q->work : nullptr;
    e->completion = completion;
    e->flags = call.flags;
    e->context = ctx;
    // fi_trigger(3): deferred work reports nothing at the endpoint unless
    // the request asks for FI_COMPLETION.
    e->hide = q && !(call.flags & FI_COMPLETION);
    if (const fi_msg* m = call.msg) {
      e->msg = *m;
      e->msg.msg_iov = keep(e->iov, m->msg_iov, m->iov_count);
      e->msg.desc = keep(e->desc, m->desc, m->iov_count);
    } else if (const fi_msg_tagged* m = call.tagged) {
      e->tagged = *m;
      e->tag = m->tag;
      e->tagged.msg_iov = keep(e->iov, m->msg_iov, m->iov_count);
      e->tagged.desc = keep(e->desc, m->desc, m->iov_count);
    } else if (const fi_msg_rma* m = call.rma) {
      e->rma = *m;
      e->rma.msg_iov = keep(e->iov, m->msg_iov, m->iov_count);
      e->rma.desc = keep(e->desc, m->desc, m->iov_count);
      e->rma.rma_iov = keep(e->rma_iov, m->rma_iov, m->rma_iov_count);
    } else {
      const fi_msg_atomic* a = call.atomic;
      e->atomic = *a;
      e->atomic.msg_iov = keep(e->ioc, a->msg_iov, a->iov_count);
      e->atomic.desc = keep(e->desc, a->desc, a->iov_count);
      e->atomic.rma_iov = keep(e->rma_ioc, a->rma_iov, a->rma_iov_count);
      keep(e->cmp, call.cmp, call.cmp_count);
      keep(e->cmp_desc, call.cmp_desc, call.cmp_count);
      keep(e->res, call.res, call.res_count);
      keep(e->res_desc, call.res_desc, call.res_count);
    }
    // The endpoint's close cancels what it left queued.
    site.bound.triggers.store(this, std::memory_order_release);
    return admit(std::move(e));
  });
}

ssize_t trigger_engine::admit(entry_ptr e) noexcept {
  {
    std::lock_guard g{m_};
    if (e->work && std::any_of(queue_.begin(), queue_.end(),
                               [&](const entry_ptr& x) { return x->work == e->work; })) {
      WEFT_WARN(dom_.provider(), FI_LOG_DOMAIN, "FI_QUEUE_WORK: the request is already queued");
      return to_fi(errc::inval);
    }
    // After the last entry of the same threshold: ties go in submission order.
    auto at = std::upper_bound(queue_.begin(), queue_.end(), e->threshold,
                               [](uint64_t t, const entry_ptr& x) { return t < x->threshold; });
    cntr* c = e->trig;
    queue_.insert(at, std::move(e));
    rearm(c);
  }
  // Already reached: the transfer starts now (fi_trigger(3) allows it).
  fire_if_ready();
  return 0;
}

void trigger_engine::rearm(cntr* c) noexcept {
  uint64_t at = cntr::no_trigger;
  for (const entry_ptr& x : queue_)
    if (x->trig == c) {
      at = x->threshold;
      break;
    }
  // Published before the value is read, as cntr::add adds before it reads
  // trigger_at: one of the two sees the other (both sequentially consistent).
  c->set_trigger_at(at);
  if (at != cntr::no_trigger && c->value() >= at) mark_ready();
}

void trigger_engine::fire() noexcept {
  // One thread issues at a time; one that finds another at it leaves the
  // work to it, which looks at the flag again after letting go.
  while (ready_.load(std::memory_order_acquire)) {
    bool idle = false;
    if (!firing_.compare_exchange_strong(idle, true, std::memory_order_acq_rel)) return;
    bool again = false;
    while (!again && ready_.exchange(false, std::memory_order_acq_rel)) again = fire_pass();
    firing_.store(false, std::memory_order_release);
    if (again) {
      // Retried at the next progress call, not in a loop here.
      ready_.store(true, std::memory_order_release);
      return;
    }
  }
}

bool trigger_engine::fire_pass() noexcept {
  std::lock_guard g{m_};
  // Counters whose next entry is not due (or was refused for now): their
  // later entries wait behind it.
  std::vector<cntr*> held, touched;
  auto holds = [&](cntr* c) { return std::find(held.begin(), held.end(), c) != held.end(); };
  bool again = false;
  try {
    for (size_t i = 0; i < queue_.size();) {
      entry& e = *queue_[i];
      if (holds(e.trig)) {
        ++i;
        continue;
      }
      if (e.trig->value() < e.threshold) {
        held.push_back(e.trig);
        ++i;
        continue;
      }
      void* watched_ctx = watch_completion(e);
      ssize_t r = issue(e);
      if (r != 0 && watched_ctx) unwatch(watched_ctx);
      if (r == to_fi(errc::again)) {
        held.push_back(e.trig);
        again = true;
        ++i;
        continue;
      }
      if (r == 0) {
        // Counted when it completes (claim), or now when nothing can say so.
        if (e.completion && !watched_ctx) e.completion->add(1);
      } else {
        WEFT_WARN(dom_.provider(), FI_LOG_EP_DATA, "a triggered operation failed when issued: %zd",
                  r);
        if (e.completion) e.completion->add_err(1);
        report(e, static_cast<int>(-r));
      }
      if (std::find(touched.begin(), touched.end(), e.trig) == touched.end())
        touched.push_back(e.trig);
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  } catch (...) {
    again = true;  // out of memory for the bookkeeping: try again later
  }
  for (cntr* c : touched) rearm(c);
  return again;
}

void* trigger_engine::watch_completion(entry& e) noexcept {
  if (!e.work || !is_transfer(e.type)) return nullptr;
  cq* where = is_receive(e.type) ? e.owner->rx_cq.get() : e.owner->tx_cq.get();
  // No CQ: nothing will say when it completes; counted when issued.
  if (!where) return nullptr;
  // `where` may be a CQ of another domain: an endpoint bound to a peer CQ
  // writes into its owner's CQ when the owner is util's (cq::write_target),
  // and that CQ asks its own domain's engine about claims, never this one,
  // so a claim put on it here would stay. No such endpoint sees deferred
  // work: lnx, the one owner whose CQs are written so, issues it through its
  // own domain's engine, and its cores never see FI_TRIGGER.
  void* ctx = e.context;
  if (e.hide) {
    // Its completion carries the request's own provider space (never shown
    // to the application, and unique while the request is in flight), and
    // FI_COMPLETION makes an endpoint with selective completion write it.
    ctx = &e.work->context;
    e.flags |= FI_COMPLETION;
    switch (e.type) {
      case FI_OP_SEND:
      case FI_OP_RECV: e.msg.context = ctx; break;
      case FI_OP_TSEND:
      case FI_OP_TRECV: e.tagged.context = ctx; break;
      case FI_OP_READ:
      case FI_OP_WRITE: e.rma.context = ctx; break;
      default: e.atomic.context = ctx; break;
    }
  }
  return watch({ctx, where, e.completion, e.owner, e.hide}) ? ctx : nullptr;
}

bool trigger_engine::watch(const watched& w) noexcept {
  std::lock_guard g{claims_m_};
  try {
    watched_.push_back(w);
  } catch (...) {
    return false;
  }
  w.where->add_claim();
  return true;
}

void trigger_engine::unwatch(void* context) noexcept {
  std::lock_guard g{claims_m_};
  auto it = std::find_if(watched_.begin(), watched_.end(),
                         [context](const watched& w) { return w.context == context; });
  if (it == watched_.end()) return;
  it->where->drop_claim();
  watched_.erase(it);
}

bool trigger_engine::claim(void* op_context, bool error) noexcept {
  std::lock_guard g{claims_m_};
  auto it = std::find_if(watched_.begin(), watched_.end(),
                         [op_context](const watched& w) { return w.context == op_context; });
  if (it == watched_.end()) return false;
  watched w = *it;
  watched_.erase(it);
  w.where->drop_claim();
  // Under claims_m_: a counter closing meanwhile (flush_cntr) is not used.
  if (w.completion) {
    if (error)
      w.completion->add_err(1);
    else
      w.completion->add(1);
  }
  // An error nobody counts is not lost: it goes to the CQ.
  return w.hide && (!error || w.completion);
}

ssize_t trigger_engine::issue(entry& e) noexcept {
  uint64_t f = e.flags & ~uint64_t{FI_TRIGGER};
  if (e.hide) f |= op_quiet;  // no endpoint counter counts it either
  fid_ep* ep = e.ep;
  switch (e.type) {
    case FI_OP_SEND: return ep->msg->sendmsg(ep, &e.msg, f);
    case FI_OP_RECV: return ep->msg->recvmsg(ep, &e.msg, f);
    case FI_OP_TSEND: return ep->tagged->sendmsg(ep, &e.tagged, f);
    case FI_OP_TRECV: return ep->tagged->recvmsg(ep, &e.tagged, f);
    case FI_OP_READ: return ep->rma->readmsg(ep, &e.rma, f);
    case FI_OP_WRITE: return ep->rma->writemsg(ep, &e.rma, f);
    case FI_OP_ATOMIC: return ep->atomic->writemsg(ep, &e.atomic, f);
    case FI_OP_FETCH_ATOMIC:
      return ep->atomic->readwritemsg(ep, &e.atomic, e.res.data(), e.res_desc.data(),
                                      e.res.size(), f);
    case FI_OP_COMPARE_ATOMIC:
      return ep->atomic->compwritemsg(ep, &e.atomic, e.cmp.data(), e.cmp_desc.data(),
                                      e.cmp.size(), e.res.data(), e.res_desc.data(),
                                      e.res.size(), f);
    case FI_OP_CNTR_SET: e.target->set(e.value); return 0;
    case FI_OP_CNTR_ADD: e.target->add(e.value); return 0;
    default: return to_fi(errc::inval);
  }
}

void trigger_engine::report(entry& e, int err) noexcept {
  if (!is_transfer(e.type)) return;
  cq* c = is_receive(e.type) ? e.owner->rx_cq.get() : e.owner->tx_cq.get();
  if (!c) return;
  fi_cq_err_entry ee{};
  ee.op_context = e.context;
  ee.flags = cq_flags_of(e.type);
  ee.tag = e.tag;
  ee.err = err;
  ee.prov_errno = err;
  // The application may read the CQ from any thread: the locked form (the
  // handoff where the domain takes turns through it, util/handoff.hpp: its
  // CQs' readers take no mutex).
  const bool ok = c->dom().locks() == lock_kind::handoff ? c->write_error<handoff_lock>(ee)
                                                           : c->write_error<mutex_lock>(ee);
  if (!ok)
    WEFT_WARN(dom_.provider(), FI_LOG_EP_DATA, "CQ overrun: the error completion (%d) of a "
              "triggered operation is lost", err);
}

template <class Pick>
size_t trigger_engine::cancel_if(Pick pick) noexcept {
  std::vector<entry_ptr> out;
  {
    std::lock_guard g{m_};
    std::vector<cntr*> touched;
    try {
      for (size_t i = 0; i < queue_.size();) {
        if (!pick(*queue_[i])) {
          ++i;
          continue;
        }
        if (std::find(touched.begin(), touched.end(), queue_[i]->trig) == touched.end())
          touched.push_back(queue_[i]->trig);
        out.push_back(std::move(queue_[i]));
        queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
      }
    } catch (...) {
      // Out of memory for the list: what was moved out is cancelled below,
      // the rest stays queued.
    }
    for (cntr* c : touched) rearm(c);
  }
  for (entry_ptr& e : out) report(*e, FI_ECANCELED);
  return out.size();
}

int trigger_engine::queue_work(fi_deferred_work* w) noexcept {
  auto* prov = dom_.provider();
  if (!w) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "FI_QUEUE_WORK without a struct fi_deferred_work");
    return to_fi(errc::inval);
  }
  cntr* trig = counter_of(dom_, w->triggering_cntr);
  if (!trig) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "FI_QUEUE_WORK: the triggering counter is %s",
              w->triggering_cntr ? "not a counter of this domain" : "null");
    return to_fi(errc::inval);
  }
  if (w->completion_cntr && !counter_of(dom_, w->completion_cntr)) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "FI_QUEUE_WORK: the completion counter is not a counter of "
              "this domain");
    return to_fi(errc::inval);
  }
  int type = raw_enum(w->op_type);
  if (type == FI_OP_CNTR_SET || type == FI_OP_CNTR_ADD) {
    if (!w->op.cntr) {
      WEFT_WARN(prov, FI_LOG_DOMAIN, "FI_QUEUE_WORK: a counter operation without its fi_op_cntr");
      return to_fi(errc::inval);
    }
    cntr* target = counter_of(dom_, w->op.cntr->cntr);
    if (!target || w->completion_cntr) {
      WEFT_WARN(prov, FI_LOG_DOMAIN, "FI_QUEUE_WORK: %s",
                w->completion_cntr ? "counter operations take no completion counter"
                                   : "the counter to update is not a counter of this domain");
      return to_fi(errc::inval);
    }
    return static_cast<int>(abi_guard([&]() -> ssize_t {
      auto e = std::make_unique<entry>();
      e->type = type;
      e->trig = trig;
      e->threshold = w->threshold;
      e->work = w;
      e->target = target;
      e->value = w->op.cntr->value;
      return admit(std::move(e));
    }));
  }
  if (!is_transfer(type)) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "FI_QUEUE_WORK: unknown operation type %d", type);
    return to_fi(errc::inval);
  }
  // Every fi_op_* of a transfer starts with its endpoint.
  const void* op = w->op.msg;
  if (!op) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "FI_QUEUE_WORK: operation type %d without its operation", type);
    return to_fi(errc::inval);
  }
  fid_ep* ep = *static_cast<fid_ep* const*>(op);
  if (!ep || !is_class(&ep->fid, FI_CLASS_EP)) {
    WEFT_WARN(prov, FI_LOG_DOMAIN, "FI_QUEUE_WORK: the operation names no endpoint");
    return to_fi(errc::inval);
  }
  // Through the endpoint's own call with FI_TRIGGER: its intercept hands the
  // request to its domain's engine (this one, or the refusal above).
  queuing q{this, w, false};
  tl_queuing = &q;
  ssize_t r;
  switch (type) {
    case FI_OP_SEND: r = fi_sendmsg(ep, &w->op.msg->msg, w->op.msg->flags | FI_TRIGGER); break;
    case FI_OP_RECV: r = fi_recvmsg(ep, &w->op.msg->msg, w->op.msg->flags | FI_TRIGGER); break;
    case FI_OP_TSEND:
      r = fi_tsendmsg(ep, &w->op.tagged->msg, w->op.tagged->flags | FI_TRIGGER);
      break;
    case FI_OP_TRECV:
      r = fi_trecvmsg(ep, &w->op.tagged->msg, w->op.tagged->flags | FI_TRIGGER);
      break;
    case FI_OP_READ: r = fi_readmsg(ep, &w->op.rma->msg, w->op.rma->flags | FI_TRIGGER); break;
    case FI_OP_WRITE: r = fi_writemsg(ep, &w->op.rma->msg, w->op.rma->flags | FI_TRIGGER); break;
    case FI_OP_ATOMIC:
      r = fi_atomicmsg(ep, &w->op.atomic->msg, w->op.atomic->flags | FI_TRIGGER);
      break;
    case FI_OP_FETCH_ATOMIC: {
      fi_op_fetch_atomic* a = w->op.fetch_atomic;
      r = fi_fetch_atomicmsg(ep, &a->msg, a->fetch.msg_iov, a->fetch.desc, a->fetch.iov_count,
                             a->flags | FI_TRIGGER);
      break;
    }
    default: {
      fi_op_compare_atomic* a = w->op.compare_atomic;
      r = fi_compare_atomicmsg(ep, &a->msg, a->compare.msg_iov, a->compare.desc,
                               a->compare.iov_count, a->fetch.msg_iov, a->fetch.desc,
                               a->fetch.iov_count, a->flags | FI_TRIGGER);
      break;
    }
  }
  tl_queuing = nullptr;
  if (r == 0 && !q.taken) {
    // The endpoint ran the call instead of queuing it: not one of weft's.
    WEFT_WARN(prov, FI_LOG_DOMAIN, "FI_QUEUE_WORK: the endpoint did not queue the operation");
    return to_fi(errc::inval);
  }
  return static_cast<int>(r);
}

int trigger_engine::cancel_work(fi_deferred_work* w) noexcept {
  if (!w) {
    WEFT_WARN(dom_.provider(), FI_LOG_DOMAIN, "FI_CANCEL_WORK without a struct fi_deferred_work");
    return to_fi(errc::inval);
  }
  if (cancel_if([w](const entry& e) { return e.work == w; }) == 0) {
    WEFT_WARN(dom_.provider(), FI_LOG_DOMAIN, "FI_CANCEL_WORK: the request is not queued");
    return to_fi(errc::noent);
  }
  return 0;
}

int trigger_engine::flush_work(fi_deferred_work* w) noexcept {
  if (!w) {
    cancel_if([](const entry&) { return true; });
    return 0;
  }
  cntr* c = counter_of(dom_, w->triggering_cntr);
  if (!c) {
    WEFT_WARN(dom_.provider(), FI_LOG_DOMAIN, "FI_FLUSH_WORK: the triggering counter is %s",
              w->triggering_cntr ? "not a counter of this domain" : "null");
    return to_fi(errc::inval);
  }
  cancel_if([c](const entry& e) { return e.trig == c; });
  return 0;
}

void trigger_engine::flush_owner(ep_bindings* owner) noexcept {
  cancel_if([owner](const entry& e) { return e.owner == owner; });
  // Transfers it had in flight: whatever the endpoint still writes for them
  // is its own business now.
  std::lock_guard g{claims_m_};
  std::erase_if(watched_, [owner](const watched& w) {
    if (w.owner != owner) return false;
    w.where->drop_claim();
    return true;
  });
}

void trigger_engine::flush_cntr(cntr* c) noexcept {
  cancel_if([c](const entry& e) { return e.trig == c || e.completion == c || e.target == c; });
  std::lock_guard g{claims_m_};
  for (watched& w : watched_)
    if (w.completion == c) w.completion = nullptr;
}

}  // namespace weft::util
