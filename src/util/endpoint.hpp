// SPDX-License-Identifier: MIT
// weft — what every endpoint shares: the fi_ops_ep table built from the
// class, full "not supported" tables for the interfaces a provider lacks,
// and the bindings to CQs, counters, the AV and the EQ (fi_ep_bind).
#pragma once

#include "core/log.hpp"
#include "util/av.hpp"
#include "util/cntr.hpp"
#include "util/cq.hpp"
#include "util/domain.hpp"
#include "util/eq.hpp"
#include "util/nosys.hpp"
#include "util/object.hpp"
#include "util/stx_ctx.hpp"

#include <rdma/fi_endpoint.h>

namespace weft::util {

// The objects an endpoint reports to, fixed by fi_ep_bind before fi_enable.
struct ep_bindings {
  // Where completions are written (cq::write_target: the CQ bound, or the
  // owner's CQ of a peer CQ that writes straight into it) ...
  ref<cq> tx_cq, rx_cq;
  // ... and the peer CQs bound, when those are not the same: their
  // progress lists and wait objects are the endpoint's (tx_bound, rx_bound).
  ref<cq> tx_peer, rx_peer;
  cq* tx_bound() const noexcept { return tx_peer ? tx_peer.get() : tx_cq.get(); }
  cq* rx_bound() const noexcept { return rx_peer ? rx_peer.get() : rx_cq.get(); }
  bool tx_selective = false, rx_selective = false;
  ref<cntr> send_cntr, recv_cntr, read_cntr, write_cntr, rem_read_cntr, rem_write_cntr;
  ref<av> av_;
  ref<eq> eq_;
  // The shared transmit context (fi_stx_context), when one is bound: the
  // endpoint transmits as it would without one (stx_ctx.hpp).
  ref<stx_ctx> stx;
  // The engine that holds triggered work of this endpoint (set when the
  // first is queued): unbind, at close, cancels what is left.
  std::atomic<trigger_engine*> triggers{nullptr};

  // Binds `bfid` per fi_ep_bind(3). `hook` is the endpoint's progress
  // function, registered with every CQ/counter/EQ it binds; `wait_fd` (or -1)
  // joins their wait objects so a blocked reader wakes when data arrives.
  int bind(domain& dom, struct fid* bfid, uint64_t flags, progress_hook hook, int wait_fd) noexcept;
  // Undoes every registration `bind` made (at close), after cancelling the
  // endpoint's triggered work still queued (FI_ECANCELED on its CQs).
  void unbind(void* hook_obj, int wait_fd) noexcept;

  // A served RMA or atomic touched our memory: the remote counters by
  // kind_flags (FI_REMOTE_WRITE / FI_REMOTE_READ), and with `with_data` the
  // remote CQ data completion on the receive CQ, which uses no posted receive
  // (fi_cq(3); weft never asks for FI_RX_CQ_DATA). Its len is the bytes the
  // operation carried to us, as libfabric reports a remote write with data.
  template <class Lock>
  void remote_event(const fi_provider* prov, uint64_t kind_flags, bool with_data, uint64_t data,
                    fi_addr_t src, size_t len) noexcept {
    if (kind_flags & FI_REMOTE_WRITE)
      if (cntr* n = rem_write_cntr.get()) n->inc();
    if (kind_flags & FI_REMOTE_READ)
      if (cntr* n = rem_read_cntr.get()) n->inc();
    if (!with_data) return;
    if (cq* c = rx_cq.get(); c && !c->write<Lock>({nullptr, kind_flags | FI_REMOTE_CQ_DATA, len,
                                                    nullptr, data, 0, src, 0}))
      WEFT_WARN(prov, FI_LOG_EP_DATA, "receive CQ overrun: remote CQ data %llx lost",
                static_cast<unsigned long long>(data));
  }

  // fi_enable's checks: an AV when the endpoint type needs one, an EQ for
  // connected endpoints, a CQ or counter for each direction `caps` use, and
  // transmit caps within a bound shared transmit context's.
  // 0, or the documented error (logged).
  int check_enable(const fi_provider* prov, fi_ep_type type, uint64_t caps) const noexcept;
};

// fi_control(FI_GETOPSFLAG / FI_SETOPSFLAG): the default operation flags of
// exactly one direction (FI_TRANSMIT or FI_RECV in *arg). 1 for any other
// command, so the caller handles the rest. FI_FENCE is refused (-FI_EINVAL).
int ops_flags_control(const fi_provider* prov, int command, void* arg, uint64_t& tx_flags,
                      uint64_t& rx_flags) noexcept;

// Base of a provider endpoint class Self. Installs full ops tables (the
// provider replaces the ones it implements) and default members.
template <class Self>
class endpoint_object : public fid_object<Self, fid_ep> {
 public:
  endpoint_object(size_t fclass, void* context) noexcept : fid_object<Self, fid_ep>(fclass, context) {
    this->ops = writable(ops_table);
    this->cm = writable(cm_nosys);
    this->msg = writable(msg_nosys);
    this->rma = writable(rma_nosys);
    this->tagged = writable(tagged_nosys);
    this->atomic = writable(atomic_nosys);
    this->collective = writable(collective_nosys);
  }

  ssize_t cancel(void*) { return to_fi(errc::nosys); }
  int getopt(int level, int name, void* val, size_t* len) {
    if (level != FI_OPT_ENDPOINT) return to_fi(errc::noprotoopt);
    if (!val || !len) return to_fi(errc::inval);
    if (name == FI_OPT_MIN_MULTI_RECV) {
      if (*len < sizeof(size_t)) return *len = sizeof(size_t), to_fi(errc::toosmall);
      *static_cast<size_t*>(val) = min_multi_recv_;
      *len = sizeof(size_t);
      return 0;
    }
    return to_fi(errc::noprotoopt);
  }
  int setopt(int level, int name, const void* val, size_t len) {
    if (level != FI_OPT_ENDPOINT) return to_fi(errc::noprotoopt);
    if (!val) return to_fi(errc::inval);
    if (name == FI_OPT_MIN_MULTI_RECV) {
      if (len != sizeof(size_t)) return to_fi(errc::inval);
      min_multi_recv_ = *static_cast<const size_t*>(val);
      return 0;
    }
    return to_fi(errc::noprotoopt);
  }
  int tx_ctx(int, fi_tx_attr*, fid_ep**, void*) { return to_fi(errc::nosys); }
  int rx_ctx(int, fi_rx_attr*, fid_ep**, void*) { return to_fi(errc::nosys); }
  ssize_t rx_size_left() { return to_fi(errc::nosys); }
  ssize_t tx_size_left() { return to_fi(errc::nosys); }

 protected:
  size_t min_multi_recv_ = 64;

 private:
  static Self* self(struct fid* f) noexcept { return Self::from(f); }
  static Self* self(fid_ep* e) noexcept { return Self::from(e); }
  static ssize_t t_cancel(struct fid* f, void* ctx) noexcept { return self(f)->cancel(ctx); }
  static int t_getopt(struct fid* f, int l, int n, void* v, size_t* len) noexcept {
    return self(f)->getopt(l, n, v, len);
  }
  static int t_setopt(struct fid* f, int l, int n, const void* v, size_t len) noexcept {
    return self(f)->setopt(l, n, v, len);
  }
  static int t_tx_ctx(fid_ep* e, int i, fi_tx_attr* a, fid_ep** o, void* c) noexcept {
    return self(e)->tx_ctx(i, a, o, c);
  }
  static int t_rx_ctx(fid_ep* e, int i, fi_rx_attr* a, fid_ep** o, void* c) noexcept {
    return self(e)->rx_ctx(i, a, o, c);
  }
  static ssize_t t_rx_size_left(fid_ep* e) noexcept { return self(e)->rx_size_left(); }
  static ssize_t t_tx_size_left(fid_ep* e) noexcept { return self(e)->tx_size_left(); }

 public:
  static constexpr fi_ops_ep ops_table = {
      .size = sizeof(fi_ops_ep),
      .cancel = t_cancel,
      .getopt = t_getopt,
      .setopt = t_setopt,
      .tx_ctx = t_tx_ctx,
      .rx_ctx = t_rx_ctx,
      .rx_size_left = t_rx_size_left,
      .tx_size_left = t_tx_size_left,
  };
};

}  // namespace weft::util
