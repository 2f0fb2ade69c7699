// SPDX-License-Identifier: MIT
// weft — endpoint bindings (fi_ep_bind).
#include "util/endpoint.hpp"

#include "core/log.hpp"
#include "util/fence.hpp"

namespace weft::util {

namespace {

template <class T>
bool take(ref<T>& slot, T* obj) {
  if (slot) return false;
  slot.reset(obj);
  return true;
}

}  // namespace

int ep_bindings::bind(domain& dom, fid* bfid, uint64_t flags, progress_hook hook,
                      int wait_fd) noexcept {
  auto* prov = dom.provider();
  switch (bfid->fclass) {
    case FI_CLASS_CQ: {
      constexpr uint64_t allowed = FI_TRANSMIT | FI_SEND | FI_RECV | FI_SELECTIVE_COMPLETION;
      if (flags & ~allowed) {
        WEFT_WARN(prov, FI_LOG_EP_CTRL, "unknown CQ bind flags 0x%llx",
                  static_cast<unsigned long long>(flags & ~allowed));
        return to_fi(errc::badflags);
      }
      if (!(flags & (FI_TRANSMIT | FI_SEND | FI_RECV))) {
        WEFT_WARN(prov, FI_LOG_EP_CTRL, "a CQ binds for FI_TRANSMIT and/or FI_RECV");
        return to_fi(errc::inval);
      }
      cq* c = cq::from(bfid);
      if (&c->dom() != &dom) return to_fi(errc::inval);
      bool sel = flags & FI_SELECTIVE_COMPLETION;
      if (((flags & (FI_TRANSMIT | FI_SEND)) && tx_cq) || ((flags & FI_RECV) && rx_cq)) {
        WEFT_WARN(prov, FI_LOG_EP_CTRL, "the endpoint already has a CQ for that direction");
        return to_fi(errc::inval);
      }
      cq* to = c->write_target();
      ref<cq>* peer_slots[] = {(flags & (FI_TRANSMIT | FI_SEND)) ? &tx_peer : nullptr,
                               (flags & FI_RECV) ? &rx_peer : nullptr};
      if (flags & (FI_TRANSMIT | FI_SEND)) take(tx_cq, to), tx_selective = sel;
      if (flags & FI_RECV) take(rx_cq, to), rx_selective = sel;
      if (to != c)
        for (ref<cq>* slot : peer_slots)
          if (slot) slot->reset(c);
      c->progress().add(hook);
      if (wait_fd >= 0) c->add_wait_fd(wait_fd);
      return 0;
    }
    case FI_CLASS_CNTR: {
      constexpr uint64_t allowed =
          FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
      if (!flags || (flags & ~allowed)) {
        WEFT_WARN(prov, FI_LOG_EP_CTRL, "counter bind flags 0x%llx are not valid",
                  static_cast<unsigned long long>(flags));
        return to_fi(errc::badflags);
      }
      cntr* c = cntr::from(bfid);
      struct slot_t {
        uint64_t flag;
        ref<cntr>* slot;
      } slots[] = {{FI_SEND, &send_cntr},       {FI_RECV, &recv_cntr},
                   {FI_READ, &read_cntr},       {FI_WRITE, &write_cntr},
                   {FI_REMOTE_READ, &rem_read_cntr}, {FI_REMOTE_WRITE, &rem_write_cntr}};
      for (auto& s : slots)
        if ((flags & s.flag) && *s.slot) return to_fi(errc::inval);
      for (auto& s : slots)
        if (flags & s.flag) s.slot->reset(c);
      c->progress().add(hook);
      if (wait_fd >= 0) c->add_wait_fd(wait_fd);
      return 0;
    }
    case FI_CLASS_AV:
      if (flags) return to_fi(errc::badflags);
      if (!take(av_, av::from(bfid))) return to_fi(errc::inval);
      return 0;
    case FI_CLASS_EQ:
      if (flags) return to_fi(errc::badflags);
      if (!take(eq_, eq::from(bfid))) return to_fi(errc::inval);
      eq_->progress().add(hook);
      if (wait_fd >= 0) eq_->add_wait_fd(wait_fd);
      return 0;
    case FI_CLASS_STX_CTX: {
      if (flags) {
        WEFT_WARN(prov, FI_LOG_EP_CTRL, "binding a shared transmit context takes no flags");
        return to_fi(errc::badflags);
      }
      if (!stx_ctx::is(bfid) || &stx_ctx::from(bfid)->dom() != &dom || stx) {
        WEFT_WARN(prov, FI_LOG_EP_CTRL, "%s",
                  stx ? "the endpoint already has a shared transmit context"
                      : "the shared transmit context belongs to another domain");
        return to_fi(errc::inval);
      }
      stx_ctx* s = stx_ctx::from(bfid);
      if (!s->admit(prov)) return to_fi(errc::inval);
      stx.reset(s);
      return 0;
    }
    default:
      WEFT_WARN(prov, FI_LOG_EP_CTRL, "cannot bind an object of class %zu to an endpoint",
                bfid->fclass);
      return to_fi(errc::inval);
  }
}

int ep_bindings::check_enable(const fi_provider* prov, fi_ep_type type,
                              uint64_t caps) const noexcept {
  if ((type == FI_EP_RDM || type == FI_EP_DGRAM) && !av_) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_enable: a connectionless endpoint needs an address vector");
    return to_fi(errc::noav);
  }
  if (type == FI_EP_MSG && !eq_) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_enable: a connected endpoint needs an event queue");
    return to_fi(errc::noeq);
  }
  if ((caps & FI_SEND) && !tx_cq && !send_cntr) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_enable: no CQ or counter bound for transmit");
    return to_fi(errc::nocq);
  }
  if ((caps & FI_RECV) && !rx_cq && !recv_cntr) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_enable: no CQ or counter bound for receive");
    return to_fi(errc::nocq);
  }
  if (stx) {
    // fi_endpoint(3): endpoints of a shared transmit context use a subset of
    // its attributes. A set without directional bits means all directions.
    constexpr uint64_t dirs = FI_SEND | FI_READ | FI_WRITE;
    constexpr uint64_t tx_caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_TRIGGER | FI_FENCE;
    auto transmit = [](uint64_t c) {
      uint64_t d = c & (dirs | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE) ? c & dirs : dirs;
      return (c & tx_caps) | d;
    };
    // An endpoint that only receives or is only a target transmits nothing.
    uint64_t extra = transmit(caps) & dirs ? transmit(caps) & ~transmit(stx->attr().caps) : 0;
    if (extra) {
      WEFT_WARN(prov, FI_LOG_EP_CTRL,
                "fi_enable: the endpoint transmits with caps 0x%llx that its shared transmit "
                "context was not opened with",
                static_cast<unsigned long long>(extra));
      return to_fi(errc::inval);
    }
  }
  return 0;
}

int ops_flags_control(const fi_provider* prov, int command, void* arg, uint64_t& tx_flags,
                      uint64_t& rx_flags) noexcept {
  if (command != FI_GETOPSFLAG && command != FI_SETOPSFLAG) return 1;
  if (!arg) return to_fi(errc::inval);
  auto* flags = static_cast<uint64_t*>(arg);
  bool tx = *flags & FI_TRANSMIT, rx = *flags & FI_RECV;
  if (tx == rx) return to_fi(errc::inval);  // exactly one direction
  uint64_t& target = tx ? tx_flags : rx_flags;
  if (command == FI_GETOPSFLAG) {
    *flags = target;
  } else {
    // Not a default either while fences are not implemented (util/fence.hpp).
    if (fence_refused(prov, "FI_SETOPSFLAG", *flags)) return to_fi(errc::inval);
    target = *flags & ~static_cast<uint64_t>(FI_TRANSMIT | FI_RECV);
  }
  return 0;
}

void ep_bindings::unbind(void* hook_obj, int wait_fd) noexcept {
  if (trigger_engine* t = triggers.load(std::memory_order_acquire)) t->flush_owner(this);
  for (cq* c : {tx_bound(), rx_bound()}) {
    if (!c) continue;
    c->progress().remove(hook_obj);
    if (wait_fd >= 0) c->remove_wait_fd(wait_fd);
  }
  for (cntr* c : {send_cntr.get(), recv_cntr.get(), read_cntr.get(), write_cntr.get(),
                  rem_read_cntr.get(), rem_write_cntr.get()}) {
    if (!c) continue;
    c->progress().remove(hook_obj);
    if (wait_fd >= 0) c->remove_wait_fd(wait_fd);
  }
  if (eq_) {
    eq_->progress().remove(hook_obj);
    if (wait_fd >= 0) eq_->remove_wait_fd(wait_fd);
  }
  if (av_) av_->unwatch(hook_obj);
  tx_cq.reset();
  rx_cq.reset();
  tx_peer.reset();
  rx_peer.reset();
  send_cntr.reset();
  recv_cntr.reset();
  read_cntr.reset();
  write_cntr.reset();
  rem_read_cntr.reset();
  rem_write_cntr.reset();
  av_.reset();
  eq_.reset();
  stx.reset();
}

}  // namespace weft::util
