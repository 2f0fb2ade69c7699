// SPDX-License-Identifier: MIT
// weft — the scalable endpoint (fi_scalable_ep, fi_endpoint(3) "SCALABLE
// ENDPOINTS").
//
// A scalable endpoint is one transport address with several transmit and
// receive contexts. It carries no data itself: the application opens the
// contexts (fi_tx_context / fi_rx_context), binds each its own CQ and
// counters, enables each, and posts on them. This class is what the API
// names and what every provider shares:
// - the checks: context counts at open, an index within them, one open
//   context per index, attributes within the endpoint's;
// - the AV: fi_scalable_ep_bind binds it, and it is bound implicitly to
//   every context, those already open and those opened later;
// - the lifetime: each context holds a reference until it closes, so
//   fi_close on the endpoint is -FI_EBUSY while one is open (fi_endpoint(3)).
//
// The contexts themselves are the provider's: `sep_hooks::open_ctx` opens
// one as an endpoint of class FI_CLASS_TX_CTX or FI_CLASS_RX_CTX that
// transmits only or receives only, addressed through the endpoint's name
// (shm: shm.hpp, "Scalable endpoints"). Each context is a whole endpoint
// with its own lock, rings and CQs, so two contexts driven by two threads
// share nothing on the data path.
#pragma once

#include "util/domain.hpp"
#include "util/endpoint.hpp"
#include "util/object.hpp"
#include "util/progress.hpp"

#include <rdma/fi_endpoint.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

namespace weft::util {

class scalable_ep;

// What a provider plugs in. `cookie` is its own (shm: the block of endpoint
// indices the contexts take theirs from; tcp: its block of ports).
struct sep_hooks {
  // Opens context `index` of `sep` as an endpoint, from `info` (the
  // endpoint's, narrowed to one direction and the context's attributes).
  // The provider keeps `slot` in the context until it closes.
  int (*open_ctx)(scalable_ep& sep, bool tx, int index, const fi_info& info,
                  std::unique_ptr<class sep_slot> slot, fid_ep** out, void* context);
  // fi_getname on the endpoint (and on its contexts): its one address.
  int (*getname)(const scalable_ep& sep, void* addr, size_t* addrlen);
  // Optional: frees what `cookie` holds when the endpoint goes (tcp: the
  // listening sockets its receive contexts take theirs from). Not called
  // when fi_scalable_ep fails: the provider still holds its cookie then.
  void (*release)(uint64_t cookie) noexcept = nullptr;
};

// A context's hold on its scalable endpoint: while it lives, the endpoint
// cannot close and the index stays taken. Destroyed with the context.
class sep_slot {
 public:
  sep_slot(scalable_ep& sep, bool tx, int index) noexcept;
  ~sep_slot();
  sep_slot(const sep_slot&) = delete;
  sep_slot& operator=(const sep_slot&) = delete;
  scalable_ep& sep() const noexcept { return *sep_; }
  // At fi_enable of the context holding this slot (class `fclass`, bound
  // as `b`, progressed by `h`): a receive context that nothing drives under
  // manual progress (no CQ or counter: caps_needing_bindings) is adopted by
  // its scalable endpoint, so its transmit contexts' progress runs it;
  // `adopted` says so (disown it at close). -FI_ENOMEM, or 0.
  int adopt_if_undriven(size_t fclass, bool auto_progress, const ep_bindings& b, progress_hook h,
                        bool& adopted) noexcept;
  // Whether `ctx` (the context holding this slot) may take the AV `bfid` in
  // fi_ep_bind: only from its scalable endpoint, which binds its one AV to
  // every context (fi_endpoint(3)). One bound directly would make the
  // endpoint's own bind fail on that context after binding the others.
  // Refusals are logged.
  bool admits_av(const struct fid* ctx) const noexcept;

 private:
  ref<scalable_ep> sep_;
  bool tx_;
  int index_;
};

// fi_endpoint asking for more than one context (ep_attr tx_ctx_cnt /
// rx_ctx_cnt; FI_SHARED_CONTEXT aside): that is fi_scalable_ep's. -FI_EINVAL,
// logged, or 0.
int refuse_several_contexts(const fi_provider* prov, const fi_info& info) noexcept;

// The caps fi_enable checks bindings for (ep_bindings::check_enable) on an
// endpoint of class `fclass`. A receive context may have no CQ or counter:
// it may be there only as the target of RMA and atomics (Open MPI's
// one-sided btl opens its receive contexts so). Its receives then complete
// unseen, as selective completion without FI_COMPLETION would.
constexpr uint64_t caps_needing_bindings(size_t fclass, uint64_t caps) noexcept {
  return fclass == FI_CLASS_RX_CTX ? caps & ~uint64_t{FI_RECV} : caps;
}

class scalable_ep : public endpoint_object<scalable_ep> {
 public:
  // fi_scalable_ep: checks `info` (context counts within the domain's
  // max_ep_tx_ctx / max_ep_rx_ctx; FI_SHARED_CONTEXT is refused) and opens
  // the endpoint. -FI_EINVAL (logged) for what is not offered.
  // The context counts `info` asks for (0: one), within max_tx / max_rx;
  // -FI_EINVAL (logged) otherwise. open checks them; a provider that
  // sizes something by them (tcp, udp: a port per receive context) first.
  static int counts(const fi_provider* prov, const fi_info& info, size_t max_tx, size_t max_rx,
                    size_t& ntx, size_t& nrx) noexcept;
  static int open(domain& dom, const fi_info& info, size_t max_tx, size_t max_rx,
                  const sep_hooks* hooks, uint64_t cookie, fid_ep** out, void* context) noexcept;
  scalable_ep(domain& dom, const sep_hooks* hooks, uint64_t cookie, fi_info* info, size_t ntx,
              size_t nrx, void* context);
  ~scalable_ep() override;

  static bool is(const struct fid* f) noexcept;

  // ---- fid and fi_ops_ep ----
  int close();
  int bind(struct fid* bfid, uint64_t flags);  // fi_scalable_ep_bind: the AV
  int control(int command, void* arg);         // FI_ENABLE
  int tx_ctx(int index, fi_tx_attr* attr, fid_ep** out, void* context);
  int rx_ctx(int index, fi_rx_attr* attr, fid_ep** out, void* context);
  int getname(void* addr, size_t* addrlen) const { return hooks_->getname(*this, addr, addrlen); }

  // Manual progress reaches an endpoint through the CQs and counters bound
  // to it. A receive context with none (caps_needing_bindings) is driven by
  // its transmit contexts instead: it adopts itself at fi_enable, each
  // transmit context's progress runs it (progress_orphans), and it leaves
  // at fi_close before it is torn down (disown waits for a run under way).
  // Without this, RMA aimed at such a context would never be served.
  void adopt(progress_hook h);  // throws bad_alloc
  void disown(void* obj) noexcept;
  void progress_orphans() noexcept {
    if (orphans_.load(std::memory_order_acquire)) run_orphans();
  }

  domain& dom() const noexcept { return *domain_; }
  const fi_info& info() const noexcept { return *info_; }
  uint64_t cookie() const noexcept { return cookie_; }
  size_t tx_count() const noexcept { return ntx_; }
  size_t rx_count() const noexcept { return nrx_; }

 private:
  friend class sep_slot;
  void vacate(bool tx, int index) noexcept;
  // Binds the AV to one context (under mutex_), marked so that the
  // context's bind admits it (sep_slot::admits_av).
  int bind_av_to(fid_ep* ctx, struct fid* av_fid) noexcept;
  // The mark of a slot whose context is being opened.
  fid_ep* opening() noexcept { return this; }
  // Opens one context: the index checked and taken, `info` narrowed.
  int open_context(bool tx, int index, const fi_info& info, fid_ep** out, void* context);
  bool check_index(const char* call, int index, size_t count) const noexcept;
  void run_orphans() noexcept;

  ref<domain> domain_;
  const sep_hooks* hooks_;
  uint64_t cookie_;
  std::unique_ptr<fi_info, void (*)(fi_info*)> info_;
  size_t ntx_, nrx_;
  bool enabled_ = false;
  std::mutex mutex_;  // the slots and the AV: control path only
  std::vector<fid_ep*> tx_, rx_;  // open contexts (null: free)
  ref<av> av_;
  std::atomic<const struct fid*> binding_{nullptr};  // the context bind_av_to binds now
  std::atomic<uint32_t> orphans_{0};
  std::mutex orphan_mutex_;  // the list and every run of it
  std::vector<progress_hook> orphan_hooks_;
};

}  // namespace weft::util
