// SPDX-License-Identifier: MIT
// weft — where a provider endpoint's arriving messages are matched: its own
// util::srx, or the owner of a shared receive context it is bound to (an
// application's fi_srx_context, util::srx_ctx, or a peer SRX, fi_peer(3)),
// reached through that owner's fid_peer_srx.
//
// One dispatch point for "own engine or owner". The own engine is called
// directly (its inline, lock-policy templated members: no indirect call);
// only an endpoint under a shared context pays owner_ops' indirect calls.
// The choice is one well-predicted branch on a member set at fi_enable, not
// a second instantiation of the provider's whole data path.
#pragma once

#include "core/log.hpp"
#include "util/srx.hpp"

#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_peer.h>

namespace weft::util {

class srx_port {
 public:
  // Control path (open / fi_enable). `engine` the endpoint's own, with
  // `face` the peer face it asks through.
  void own(srx* engine, fid_peer_srx* face) noexcept {
    own_ = engine;
    face_ = face;
  }
  // A shared context's face: everything goes through its owner_ops.
  void share(fid_peer_srx* face) noexcept {
    own_ = nullptr;
    face_ = face;
  }
  bool owned() const noexcept { return own_ != nullptr; }
  fid_peer_srx* face() const noexcept { return face_; }

  // get_msg / get_tag (srx.hpp contract).
  template <class Lock>
  int get(bool tagged, const fi_peer_match_attr& a, fi_peer_rx_entry** out) noexcept {
    if (own_) [[likely]]
      return tagged ? own_->get_tag<Lock>(face_, a, out) : own_->get_msg<Lock>(face_, a, out);
    fi_peer_match_attr m = a;  // owner_ops take a non-const attr
    return tagged ? face_->owner_ops->get_tag(face_, &m, out)
                  : face_->owner_ops->get_msg(face_, &m, out);
  }
  // queue_msg / queue_tag: may call the peer's start_* before returning.
  template <class Lock>
  int queue(fi_peer_rx_entry* e, bool tagged) noexcept {
    if (own_) [[likely]]
      return tagged ? own_->queue_tag<Lock>(e) : own_->queue_msg<Lock>(e);
    return tagged ? face_->owner_ops->queue_tag(e) : face_->owner_ops->queue_msg(e);
  }
  template <class Lock>
  void free_entry(fi_peer_rx_entry* e) noexcept {
    if (own_) [[likely]]
      own_->free_entry<Lock>(e);
    else
      face_->owner_ops->free_entry(e);
  }
  // The AV changed: queued messages get the source `get_addr` answers
  // (srx::relabel). `all` (after a remove) only on an own engine: fi_peer(3)
  // has no call to relabel an owner's known sources.
  template <class Lock>
  void relabel(fi_addr_t (*get_addr)(fi_peer_rx_entry*), bool all) noexcept {
    if (own_)
      own_->relabel<Lock>(get_addr, all);
    else if (!all)
      face_->owner_ops->foreach_unspec_addr(face_, get_addr);
  }

 private:
  srx* own_ = nullptr;
  fid_peer_srx* face_ = nullptr;
};

// The fi_ops_msg / fi_ops_tagged tables of an endpoint bound to a shared
// receive context: the provider's own tables `Msg` and `Tagged`, whose
// receive slots answer -FI_ENOSYS with a log line of provider `Prov`: an
// endpoint's receives are the context's to post (docs/decisions.md,
// "Shared receive contexts"). Chosen at fi_enable, like the lock policy.
template <const fi_ops_msg& Msg, const fi_ops_tagged& Tagged, fi_provider& (*Prov)() noexcept>
struct shared_rx_tables {
  static ssize_t owned() noexcept {
    WEFT_WARN(&Prov(), FI_LOG_EP_DATA,
              "receives of an endpoint bound to a shared receive context are posted to the context");
    return to_fi(errc::nosys);
  }
  static ssize_t recv(fid_ep*, void*, size_t, void*, fi_addr_t, void*) noexcept { return owned(); }
  static ssize_t recvv(fid_ep*, const iovec*, void**, size_t, fi_addr_t, void*) noexcept {
    return owned();
  }
  static ssize_t recvmsg(fid_ep*, const fi_msg*, uint64_t) noexcept { return owned(); }
  static ssize_t trecv(fid_ep*, void*, size_t, void*, fi_addr_t, uint64_t, uint64_t,
                       void*) noexcept {
    return owned();
  }
  static ssize_t trecvv(fid_ep*, const iovec*, void**, size_t, fi_addr_t, uint64_t, uint64_t,
                        void*) noexcept {
    return owned();
  }
  static ssize_t trecvmsg(fid_ep*, const fi_msg_tagged*, uint64_t) noexcept { return owned(); }
  static constexpr fi_ops_msg msg = [] {
    fi_ops_msg t = Msg;
    t.recv = recv;
    t.recvv = recvv;
    t.recvmsg = recvmsg;
    return t;
  }();
  static constexpr fi_ops_tagged tagged = [] {
    fi_ops_tagged t = Tagged;
    t.recv = trecv;
    t.recvv = trecvv;
    t.recvmsg = trecvmsg;
    return t;
  }();
};

}  // namespace weft::util
