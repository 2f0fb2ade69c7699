// SPDX-License-Identifier: MIT
// weft — the lnx endpoint.
//
// Each lnx endpoint holds one endpoint of every provider of its link (a
// "core endpoint"), opened on the lnx domain's core domains and used only
// through the public API:
//  - sends are passed through: the destination's route names the core and
//    the peer's fi_addr in that core's AV; the call is the same call on the
//    core endpoint, with the application's context;
//  - receives are posted to lnx's own matching engine (util::srx), which
//    every core endpoint matches through as a peer (fi_srx_context with
//    FI_PEER on a face of the engine per core): a receive for
//    FI_ADDR_UNSPEC is taken by exactly one message, whichever core it came
//    from;
//  - completions: every core endpoint writes into peer CQs and counters
//    (FI_PEER) whose owner is the lnx CQ or counter the application bound;
//    reading the lnx CQ drives the cores (fi_cq_read(core, NULL, 0)).
//
// Routes (router.hpp): an fi_addr of the lnx AV is resolved once, into one
// core and that core's fi_addr for the peer, when the lnx AV changes and,
// for an fi_addr not seen yet, on the first send. A plain endpoint owns its
// router; the contexts of a scalable endpoint share their endpoint's
// (sep.cpp), and are lnx endpoints of class FI_CLASS_TX_CTX or
// FI_CLASS_RX_CTX whose cores are contexts of the cores' scalable
// endpoints.
#pragma once

#include <rdma/fi_endpoint.h>
#include <rdma/providers/fi_peer.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <vector>

#include "prov/lnx/lnx.hpp"
#include "prov/lnx/router.hpp"
#include "util/cntr.hpp"
#include "util/cq.hpp"
#include "util/srx_binding.hpp"
#include "util/endpoint.hpp"
#include "util/fast_mutex.hpp"
#include "util/sep.hpp"
#include "util/srx.hpp"
#include "util/trigger.hpp"

namespace weft::lnx {

class endpoint;

// The owner side of a core's peer CQ: what the core writes lands in the lnx
// CQ (util's forwarding owner: a core that is weft's writes straight into
// it); `refused` is endpoint::backlog_.
using cq_owner = util::cq_forward;
// ... and of a core's peer counter.
struct cntr_owner : fid_peer_cntr {
  util::cntr* target = nullptr;
  fi_peer_cntr_context ctx{sizeof(fi_peer_cntr_context), nullptr};
};
// An owner forwarding to `target`, and a core counter of `dom` imported from
// it (FI_PEER): what the core counts lands in `target`. 0 or -FI_E*.
std::unique_ptr<cntr_owner> make_cntr_owner(util::cntr& target);
int open_core_cntr(fid_domain* dom, cntr_owner& owner, fid_cntr** out) noexcept;

// The fi_info a core's endpoint (or scalable endpoint) is opened with, for
// an lnx endpoint opened with `info`; nullptr when out of memory.
fi_info* core_info(const core_domain& cd, const fi_info& info) noexcept;

// One provider of the link, as this endpoint uses it.
struct core_ep {
  core_domain* cd = nullptr;
  fid_ep* ep = nullptr;  // an endpoint, or a context of the core's scalable endpoint
  fid_ep* srx = nullptr;                            // the core's peer SRX, on our engine's face
  fid_peer_srx* face = nullptr;                     // that face (owned by the engine)
  fi_peer_srx_context srx_ctx{};                    // what the core's fi_srx_context was given
  std::vector<std::pair<util::cq*, int>> wait_fds;  // the peer CQs' fds in lnx CQs
  std::vector<fid_cq*> cqs;                         // peer CQs, in binding order
  std::vector<fid_cntr*> cntrs;                     // peer counters
  // Progress schedule (endpoint::progress): driven on every lnx read when
  // `every_read`, else while hot (an operation was posted on it within the
  // last hot_reads reads) and on every idle_stride-th read.
  // hot_until is the lnx read count until which it is hot (atomic_ref: the
  // send path and progress may run at once).
  bool every_read = false;
  // Every peer CQ of this core put the core endpoint's progress hook on its
  // lnx CQ's list (util::cq_forward::share_progress): reading an lnx CQ
  // drives it, reading its peer CQs does not (its counters still do).
  bool driven_by_cqs = false;
  uint64_t hot_until = 0;
};

class endpoint : public util::endpoint_object<endpoint> {
 public:
  static int open(domain& dom, fi_info* info, fid_ep** out, void* context) noexcept;
  // What fi_endpoint and fi_scalable_ep (`call`) refuse alike: an fi_info
  // that is not FI_EP_RDM or asks for caps lnx does not offer. -FI_EINVAL
  // (logged) or 0.
  static int check_info(const char* call, const fi_info* info, fid_ep** out) noexcept;
  // Context `index` of the scalable endpoint whose cores are `cores` (one
  // core scalable endpoint per core of the domain) and router `r`.
  static int open_context(domain& dom, const fi_info& info, bool tx, int index,
                          const std::vector<fid_ep*>& cores, router& r,
                          std::unique_ptr<util::sep_slot> slot, fid_ep** out,
                          void* context) noexcept;
  endpoint(domain& dom, const fi_info& info, size_t fclass, void* context);
  ~endpoint() override;

  int close();
  int bind(struct fid* bfid, uint64_t flags);
  int control(int command, void* arg);
  ssize_t cancel(void* context);
  int setopt(int level, int name, const void* val, size_t len);
  ssize_t rx_size_left();
  ssize_t tx_size_left();
  int getname(void* addr, size_t* addrlen);

  // ---- data path (xfer.cpp) ----
  // The core endpoint and its fi_addr for `dest`; false (logged) when the
  // fi_addr names no peer or no core reaches it.
  WEFT_ALWAYS_INLINE bool route(fi_addr_t dest, fid_ep*& ep, fi_addr_t& addr) noexcept {
    uint64_t r = routes_.get(dest);
    if (!r) [[unlikely]]
      return route_slow(dest, ep, addr);
    take(r, ep, addr);
    return true;
  }
  // route() and fits() when both answer at once with no call: a route made
  // already and a size within the limits. false leaves the transmit to its
  // slow form (pass.hpp, quick), which asks them again and logs.
  WEFT_ALWAYS_INLINE bool quick_route(fi_addr_t dest, size_t bytes, bool inject, fid_ep*& ep,
                                      fi_addr_t& addr) noexcept {
    if (bytes > (inject ? inject_size_ : max_msg_)) [[unlikely]]
      return false;
    const uint64_t r = routes_.get(dest);
    if (!r) [[unlikely]]
      return false;
    take(r, ep, addr);
    return true;
  }
  // The core endpoint and fi_addr of route `r`; a transmit on a core that is
  // driven only while hot makes it hot.
  WEFT_ALWAYS_INLINE void take(uint64_t r, fid_ep*& ep, fi_addr_t& addr) noexcept {
    core_ep& c = cores_[route_table::core_of(r)];
    ep = c.ep;
    addr = route_table::addr_of(r);
    if (!c.every_read) {
      std::atomic_ref(c.hot_until)
          .store(reads_.load(std::memory_order_relaxed) + hot_reads, std::memory_order_relaxed);
      others_at_.store(0, std::memory_order_relaxed);  // progress_all from the next read on
    }
  }
  util::srx& engine() noexcept { return *engine_; }
  // The limits lnx advertises (the smallest of its cores'), which it
  // enforces itself: a core with larger ones would otherwise take more
  // on one route than on the other. false (logged) when `bytes` is beyond.
  WEFT_ALWAYS_INLINE bool fits(size_t bytes, bool inject) const noexcept {
    if (bytes <= (inject ? inject_size_ : max_msg_)) [[likely]]
      return true;
    return refuse_size(bytes, inject);
  }
  size_t atomic_bytes() const noexcept { return atomic_bytes_; }
  // Transmit flags this endpoint refuses (pass.hpp): FI_FENCE unless it was
  // opened with the capability (its cores always are, so lnx refuses it
  // itself). FI_TRIGGER goes to the domain's engine, which checks its own.
  uint64_t refused_tx_flags() const noexcept { return (caps_ & FI_FENCE) ? 0 : FI_FENCE; }
  // FI_TRIGGER calls go to the lnx domain's trigger engine (util/trigger.hpp),
  // which issues them through this endpoint's ops once their counter
  // reaches its threshold: then they pass to the core like any other.
  util::trigger_site trigger_site() noexcept { return {*domain_, bound_, caps_}; }
  const std::vector<core_ep>& cores() const noexcept { return cores_; }
  uint64_t rx_op_flags() const noexcept { return rx_op_flags_; }
  bool locked() const noexcept { return locked_; }
  static const fi_provider* prov() noexcept { return &provider(); }

  // RMA and atomics (rma.cpp): before fi_enable, and after.
  static const fi_ops_rma* rma_table(bool enabled) noexcept;
  static const fi_ops_atomic* atomic_table(bool enabled) noexcept;
  template <class Lock>
  static const fi_ops_msg* msg_table(bool shared_rx) noexcept;
  template <class Lock>
  static const fi_ops_tagged* tagged_table(bool shared_rx) noexcept;

 private:
  // The core endpoints: opened on the core domains, or (`seps`) as context
  // `index` of each core's scalable endpoint.
  int open_cores(const fi_info& info, const std::vector<fid_ep*>* seps = nullptr, int index = 0);
  // route() for a route not made yet, or a destination naming a receive
  // context (fi_rx_addr): its core fi_addr names the same context.
  [[gnu::noinline]] bool route_slow(fi_addr_t dest, fid_ep*& ep, fi_addr_t& addr) noexcept;
  int query_atomic_bytes() noexcept;
  bool refuse_size(size_t bytes, bool inject) const noexcept;
  int enable();
  int bind_cq(util::cq& c, uint64_t flags);
  int bind_cntr(util::cntr& c, uint64_t flags);
  // The progress hooks: on lnx CQs, and on lnx counters.
  static void progress_thunk(void* obj) noexcept;
  static void cntr_progress_thunk(void* obj) noexcept;

  util::ref<domain> domain_;
  uint64_t caps_;
  uint64_t tx_op_flags_, rx_op_flags_;
  size_t rx_size_, max_msg_, inject_size_;
  size_t atomic_bytes_ = 0;  // operand bytes one atomic carries on every core
  const bool locked_;
  bool enabled_ = false;
  util::ep_bindings bound_;
  // The engine the cores match through (set at fi_enable): the endpoint's
  // own, or the one of the application's shared receive context it is
  // bound to (util::srx_ctx), whose receives are posted on the context.
  util::srx* engine_ = nullptr;
  std::unique_ptr<util::srx> own_engine_;
  util::srx_binding shared_;
  std::vector<core_ep> cores_;
  std::vector<std::unique_ptr<cq_owner>> cq_owners_;
  std::vector<std::unique_ptr<cntr_owner>> cntr_owners_;
  // The routes: our own router (a plain endpoint), or the scalable
  // endpoint's, and a reader of its table.
  std::unique_ptr<router> own_router_;
  router* router_ = nullptr;
  route_table::reader routes_;
  bool engine_added_ = false;  // to router_'s engines (enable)
  // A context's hold on its scalable endpoint (util::sep_slot).
  std::unique_ptr<util::sep_slot> sep_slot_;
  // Progress schedule (progress_thunk). shm's progress is a few loads when idle;
  // tcp's polls its sockets, a system call, so it runs on every read only
  // while something was posted on it lately, and else on one read in
  // idle_stride: a message arriving on an idle tcp core waits at most that
  // many reads of the lnx CQ (each a pass over shm), far below a tcp hop.
  static constexpr uint64_t hot_reads = 1u << 14;
  static constexpr uint64_t idle_stride = 64;
  std::atomic<uint64_t> reads_{0};
  // The schedule's fast path: the read count from which progress_thunk takes
  // the full schedule (progress_all: hot or striding cores, a backlog), and
  // until then the one peer CQ read it makes instead (every_one_, set at
  // fi_enable, or none; others_at_ is 0 before it, and stays so when the
  // fast path cannot drive every every_read core: the full schedule on
  // every read). A send on a
  // striding core sets it to 0. (A send on another thread between
  // progress_all's look and its store can be overwritten: that core is then
  // read at the next stride, idle_stride reads later at most.)
  std::atomic<uint64_t> others_at_{0};
  fid_cq* every_one_ = nullptr;
  bool every_complete_ = false;
  // The full schedule; every_core: from a counter's read, which drives
  // the cores an lnx CQ's list drives too.
  void progress_all(uint64_t n, bool every_core) noexcept;
  // A core's completion met a full lnx CQ and waits in its peer CQ: every
  // peer CQ is read (which hands it over) until none is refused.
  std::atomic<bool> backlog_{false};
};

}  // namespace weft::lnx
