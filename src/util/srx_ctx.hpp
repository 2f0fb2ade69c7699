// SPDX-License-Identifier: MIT
// weft — the application's shared receive context (fi_srx_context without
// FI_PEER, fi_endpoint(3)): one util::srx that several endpoints match
// through, and the fid_ep on which the application posts the receives.
//
// The endpoints take the peer SRX road (fi_peer(3)): each bound endpoint
// asks the engine for a match through the context's fid_peer_srx face, and
// the engine hands matched queued messages back through the provider's
// fi_ops_srx_peer table (installed at open), which finds the endpoint from
// the entry's peer_context. There is no second matching engine.
//
// Completions of messages go to the CQ and counters of the endpoint the
// message arrived on. Completions that no message produces (fi_cancel,
// FI_PEEK, FI_CLAIM | FI_DISCARD) go to the receive CQ of the first bound
// endpoint enabled (docs/decisions.md, "Shared receive contexts").
#pragma once

#include "util/domain.hpp"
#include "util/endpoint.hpp"
#include "util/srx.hpp"

#include <memory>

namespace weft::util {

class srx_ctx : public endpoint_object<srx_ctx> {
 public:
  // Opens a context on `dom` for provider `prov`, whose endpoints finish
  // queued messages through `peer_ops` (of the lock policy of
  // dom.lock_threading()). `attr` may be null; `default_size` is the
  // provider's receive depth when attr->size is 0.
  static int open(domain& dom, const fi_provider* prov, const fi_rx_attr* attr,
                  size_t default_size, const fi_ops_srx_peer* peer_ops, fid_ep** out,
                  void* context) noexcept;
  srx_ctx(domain& dom, const fi_provider* prov, const srx_attr& a, uint64_t op_flags,
          const fi_ops_srx_peer* peer_ops, void* context);
  ~srx_ctx();

  // Whether f is an application srx_ctx (checked before any cast).
  static bool is(const struct fid* f) noexcept;
  domain& dom() const noexcept { return *domain_; }
  // What a bound endpoint matches through.
  fid_peer_srx* face() const noexcept { return face_; }
  // A bound endpoint is enabled with receive CQ `c` and AV `a`. The first
  // one's CQ takes the engine's own completions, and its AV is the one every
  // other bound endpoint must use (fi_endpoint(3): connectionless endpoints
  // sharing a receive context share their AV): -FI_EINVAL (logged) for
  // another. Holds both until the context closes. `names_by_av`: the
  // endpoints name senders by the AV's reported values (lnx, whose cores
  // report FI_AV_USER_ID ids), so directed receives are translated into
  // that form (srx::name_sources_by); otherwise compared as given.
  int attach(cq* c, av* a, bool names_by_av = false) noexcept;

  int close();
  ssize_t cancel(void* context);
  int setopt(int level, int name, const void* val, size_t len);
  ssize_t rx_size_left();
  int control(int command, void* arg);

  srx& engine() noexcept { return *engine_; }
  // fi_recv's default flags: only those that shape a receive.
  uint64_t rx_op_flags() const noexcept { return op_flags_ & (FI_COMPLETION | FI_MULTI_RECV); }
  const fi_provider* prov() const noexcept { return prov_; }

 private:
  ref<domain> domain_;
  const fi_provider* prov_;
  uint64_t op_flags_;
  const lock_kind locks_;
  std::unique_ptr<srx> engine_;
  fid_peer_srx* face_ = nullptr;
  fast_mutex ctl_;   // attach against cancel from another thread
  ref<cq> cq_;
  ref<av> av_;
  bool attached_ = false;
};

}  // namespace weft::util
