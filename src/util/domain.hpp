// SPDX-License-Identifier: MIT
// weft — the domain object every provider uses: the shared parts of
// fi_ops_domain (CQs, counters, AVs, poll sets, memory registration) live
// here; the provider adds endpoints and whatever else is its own.
#pragma once

#include "util/fabric.hpp"
#include "util/handoff.hpp"
#include "util/lock.hpp"
#include "util/mr.hpp"
#include "util/object.hpp"
#include "util/progress_thread.hpp"
#include "util/trigger.hpp"

#include <rdma/fi_domain.h>

#include <string>

namespace weft::util {

class domain;
struct av_codec;

// What a provider adds to the shared domain: static, one per provider.
struct domain_hooks {
  int (*endpoint)(domain& dom, fi_info* info, fid_ep** ep, void* context);
  // How this provider stores and compares peer addresses in its AVs.
  const av_codec* (*codec)(const domain& dom);
  // Optional: null means -FI_ENOSYS.
  // (datatype and op as the ints the caller passed: any value is possible.)
  int (*query_atomic)(domain& dom, int datatype, int op, fi_atomic_attr* attr, uint64_t flags);
  int (*srx_ctx)(domain& dom, fi_rx_attr* attr, fid_ep** rx_ep, void* context);
  // fi_scalable_ep (util::scalable_ep with the provider's contexts). A
  // domain with it also takes AVs with rx_ctx_bits (fi_rx_addr).
  int (*scalable_ep)(domain& dom, fi_info* info, fid_ep** sep, void* context);
  // The provider's control operations (connection setup) travel on its
  // endpoints' data path, so automatic control progress means running the
  // endpoints' whole progress from the domain's thread: the domain then
  // behaves as FI_PROGRESS_AUTO for data too (more progress than asked for
  // is allowed; fi_domain(3)). False for providers without control traffic.
  bool control_on_data_path = false;
  // Optional: after util registered a region (every fi_mr_reg form), the
  // provider's part, which may attach a companion to it; an error closes
  // the region and is the registration's answer.
  int (*mr_attach)(domain& dom, mr& m, const fi_mr_attr& attr, uint64_t flags) = nullptr;
  // Every object of the provider's domains takes the handoff policy under
  // FI_THREAD_DOMAIN with automatic progress (lock.hpp, handoff.hpp): each
  // guard<handoff_lock>() it has enters domain::handoff(), and its progress
  // thread's work enters it as a whole. Asked at each domain's open (a
  // provider parameter may turn it off); null: never.
  bool (*handoff)() noexcept = nullptr;
};

class domain : public fid_object<domain, fid_domain> {
 public:
  // Opens a domain for `info` (already checked by the provider against what it
  // offers); the attributes of `info` become the domain's settings.
  static int open(fabric& fab, const domain_hooks* hooks, const fi_info& info,
                  fid_domain** out, void* context) noexcept;
  domain(fabric& fab, const domain_hooks* hooks, const fi_info& info, void* context);
  ~domain() override;

  int close();
  int bind(struct fid* bfid, uint64_t flags);
  int control(int command, void* arg);
  // After a registration: the FI_MR_COMPLETE event, when FI_REG_MR asked for it.
  void registered(fid_mr* m, void* context) noexcept;

  fabric& fab() const noexcept { return *fabric_; }
  const fi_provider* provider() const noexcept { return fabric_->provider(); }
  uint32_t api_version() const noexcept { return fabric_->api(); }
  const domain_hooks& hooks() const noexcept { return *hooks_; }
  // The provider's mr_attach hook, or null (also for a domain without hooks).
  auto mr_attach_hook() const noexcept { return hooks_ ? hooks_->mr_attach : nullptr; }

  // Settings fixed at open.
  fi_threading threading() const noexcept { return threading_; }
  // The threading model objects of this domain lock for: the application's,
  // or FI_THREAD_SAFE under automatic progress, where the domain's progress
  // thread touches endpoints, CQs, counters and AVs beside the application.
  fi_threading lock_threading() const noexcept {
    return progress_ == FI_PROGRESS_AUTO ? FI_THREAD_SAFE : threading_;
  }
  // The lock policy of the domain's objects: none under FI_THREAD_DOMAIN
  // and _COMPLETION with manual progress, the handoff under FI_THREAD_DOMAIN
  // with automatic progress where the provider opts in (domain_hooks), a
  // mutex per object otherwise.
  lock_kind locks() const noexcept { return locks_; }
  // The handoff of the handoff policy (unused under the others).
  class handoff& handoff() noexcept { return handoff_; }
  // The automatic-progress thread (providers that offer FI_PROGRESS_AUTO
  // register their endpoints with it); started on first use.
  // A provider whose control traffic shares its endpoints' sockets
  // (control_on_data_path) uses its fabric's thread, which also serves its
  // passive endpoints: one thread sees a connection's last frames and the
  // next connection request in the order they arrived, so the events it
  // queues on a shared EQ keep that order.
  progress_thread& auto_progress() noexcept {
    return hooks_ && hooks_->control_on_data_path ? fabric_->control_progress() : auto_;
  }
  fi_progress progress() const noexcept { return progress_; }
  fi_av_type av_type() const noexcept { return av_type_; }
  int mr_mode() const noexcept { return mr_mode_; }
  uint32_t addr_format() const noexcept { return addr_format_; }
  uint64_t caps() const noexcept { return caps_; }
  size_t cq_data_size() const noexcept { return cq_data_size_; }
  // The transmit attributes the domain was opened with, which bound a
  // shared transmit context's, and how many endpoints may share one
  // (0: the provider shares none).
  const fi_tx_attr& tx_attr() const noexcept { return tx_attr_; }
  size_t max_ep_stx_ctx() const noexcept { return max_ep_stx_ctx_; }
  // Likewise for receive contexts (0: fi_srx_context for applications is
  // not offered; a peer provider's FI_PEER context is the hooks' to judge).
  size_t max_ep_srx_ctx() const noexcept { return max_ep_srx_ctx_; }
  // Whether fi_scalable_ep (and an AV with rx_ctx_bits) is offered: the
  // provider has the hook and the domain's endpoint type has contexts
  // (tcp: RDM, not MSG; max_ep_tx_ctx / max_ep_rx_ctx above 1).
  bool offers_contexts() const noexcept {
    return hooks_ && hooks_->scalable_ep && (max_ep_tx_ctx_ > 1 || max_ep_rx_ctx_ > 1);
  }
  const std::string& name() const noexcept { return name_; }

  mr_map& mrs() noexcept { return mrs_; }
  // Triggered operations and deferred work of the domain's objects.
  trigger_engine& triggers() noexcept { return triggers_; }

  // The domain's event queue, when one is bound (FI_REG_MR events, AV events).
  class eq* eq() const noexcept { return eq_.get(); }

 private:
  ref<fabric> fabric_;
  const domain_hooks* hooks_;
  fi_threading threading_;
  fi_progress progress_;
  lock_kind locks_;
  class handoff handoff_;
  fi_av_type av_type_;
  int mr_mode_;
  uint32_t addr_format_;
  uint64_t caps_;
  size_t cq_data_size_;
  fi_tx_attr tx_attr_{};
  size_t max_ep_stx_ctx_;
  size_t max_ep_srx_ctx_;
  size_t max_ep_tx_ctx_;
  size_t max_ep_rx_ctx_;
  std::string name_;
  mr_map mrs_;
  ref<class eq> eq_;
  bool mr_events_ = false;
  // Before the thread: it issues triggered work until it stops.
  trigger_engine triggers_{*this};
  // Last: its thread stops before anything it could reach is destroyed.
  progress_thread auto_;
};

}  // namespace weft::util
