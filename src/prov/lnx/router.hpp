// SPDX-License-Identifier: MIT
// weft — lnx's routes: which core reaches each peer of the lnx AV, and
// under which fi_addr of that core's AV.
//
// A router belongs to what owns the cores' addresses: a plain lnx endpoint
// (its core endpoints hold the core AVs), or a scalable endpoint, whose
// transmit and receive contexts all route through its one router (its core
// scalable endpoints hold the core AVs, sep.cpp). It holds:
//  - the route table, read without a lock on every send (endpoints keep a
//    route_table::reader of it);
//  - one AV per core, opened when the lnx AV is bound (attach), with the
//    lnx AV's rx_ctx_bits: a core fi_addr takes a receive context index
//    (fi_rx_addr) in the same bits as the lnx fi_addr it stands for;
//  - the watch on the lnx AV: a peer inserted is resolved at once, so its
//    first message is named by its source; one removed is taken out of the
//    cores, and what it queued in the receive engines is relabelled
//    FI_ADDR_NOTAVAIL (fi_av(3)).
//
// Route of an lnx fi_addr: shm when the peer's address names this host and
// carries an shm part, else the first other provider both sides have (on
// one of its rails: pick_rail). The core's AV holds the peer with the lnx
// AV's reported value (the application's user id, or the fi_addr itself)
// as its user id (FI_AV_USER_ID), so completions and the engines name
// senders the way the application does.
#pragma once

#include <rdma/fi_domain.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "prov/lnx/lnx.hpp"
#include "util/fast_mutex.hpp"
#include "util/object.hpp"
#include "util/srx.hpp"

namespace weft::lnx {

// fi_addr -> route, read without a lock on every send; written under the
// router's lock. Chunks never move once made, and the directory is fixed
// at open (untouched pages of it cost nothing), so a reader is a copy of
// the directory's address.
class route_table {
 public:
  static constexpr unsigned chunk_shift = 9;  // a chunk is one page
  static constexpr size_t chunk = size_t{1} << chunk_shift;
  static constexpr size_t max_chunks = size_t{1} << 16;  // 32 Mi peers
  static constexpr unsigned core_shift = 56;
  static constexpr uint64_t addr_mask = (uint64_t{1} << core_shift) - 1;

  class reader {
   public:
    reader() = default;
    explicit reader(std::atomic<uint64_t>** dir) : dir_(dir) {}
    // 0: no route. An fi_addr carrying a receive context index (fi_rx_addr)
    // is beyond the table: 0 too.
    uint64_t get(fi_addr_t a) const noexcept {
      size_t c = a >> chunk_shift;
      if (c >= max_chunks) [[unlikely]]
        return 0;
      std::atomic<uint64_t>* p = std::atomic_ref(dir_[c]).load(std::memory_order_acquire);
      return p ? p[a & (chunk - 1)].load(std::memory_order_acquire) : 0;
    }

   private:
    std::atomic<uint64_t>** dir_ = nullptr;
  };

  route_table()
      : dir_(static_cast<std::atomic<uint64_t>**>(std::calloc(max_chunks, sizeof(void*)))) {
    if (!dir_) throw std::bad_alloc();
  }
  ~route_table() {
    for (size_t i = 0; i < max_chunks; ++i) delete[] dir_[i];
    std::free(dir_);
  }
  route_table(const route_table&) = delete;
  route_table& operator=(const route_table&) = delete;

  reader view() const noexcept { return reader(dir_); }
  uint64_t get(fi_addr_t a) const noexcept { return view().get(a); }
  // Under the router's lock. false: the fi_addr is beyond the table, or no memory.
  bool set(fi_addr_t a, uint64_t r) noexcept {
    size_t c = a >> chunk_shift;
    if (c >= max_chunks) return false;
    std::atomic<uint64_t>* p = std::atomic_ref(dir_[c]).load(std::memory_order_relaxed);
    if (!p) {
      p = new (std::nothrow) std::atomic<uint64_t>[chunk]();
      if (!p) return false;
      std::atomic_ref(dir_[c]).store(p, std::memory_order_release);
    }
    p[a & (chunk - 1)].store(r, std::memory_order_release);
    return true;
  }
  static uint64_t make(size_t core, fi_addr_t addr) noexcept {
    return (uint64_t{core} + 1) << core_shift | (addr & addr_mask);
  }
  static size_t core_of(uint64_t r) noexcept { return (r >> core_shift) - 1; }
  static fi_addr_t addr_of(uint64_t r) noexcept { return r & addr_mask; }

 private:
  std::atomic<uint64_t>** dir_;
};

class router {
 public:
  // `cores`: the lnx domain's, in its order (a route's core index is an
  // index into them, and into every endpoint's core list). `locked`: the
  // receive engines it relabels take their lock.
  router(std::vector<core_domain*> cores, bool locked);
  // Closes the core AVs: what they are bound to is closed first.
  ~router();
  router(const router&) = delete;
  router& operator=(const router&) = delete;

  // Where core k's AV is bound when it opens: a core endpoint, or a core
  // scalable endpoint (fi_scalable_ep_bind is the same call).
  void set_holder(size_t k, fid_ep* holder) noexcept { cores_[k].holder = holder; }
  // fi_ep_bind of the lnx AV `av`: opens each core's AV with its
  // rx_ctx_bits and binds it to the core's holder. Again with the same AV
  // (each context of a scalable endpoint binds it): 0, nothing done.
  // -FI_E* (logged).
  int attach(util::av& av) noexcept;
  bool attached() const noexcept { return attached_.load(std::memory_order_acquire); }
  // fi_enable: core k's fi_getname length, and our lnx address (pick_rail).
  // The first start watches the lnx AV and routes every peer in it.
  void start(const std::vector<size_t>& addrlens, const uint8_t* own_name) noexcept;
  // No more calls from the lnx AV (fi_close of what owns the router).
  void stop() noexcept;
  // Receive engines whose queued messages a removed peer's are
  // (relabelled FI_ADDR_NOTAVAIL). An engine may be added once per user.
  void add_engine(util::srx* e);
  void remove_engine(util::srx* e) noexcept;

  route_table::reader reader() const noexcept { return routes_.view(); }
  // The route of an lnx fi_addr (without receive context bits), made now if
  // it was not; 0 (logged) when no core reaches it or it is no peer.
  uint64_t resolve_on_send(fi_addr_t a) noexcept;
  // The bits of an fi_addr that name the peer (the rest: fi_rx_addr's
  // receive context index): all of them until an AV is attached.
  fi_addr_t base_mask() const noexcept { return base_mask_; }

 private:
  struct core {
    core_domain* cd = nullptr;
    fid_ep* holder = nullptr;
    fid_av* av = nullptr;
    bool bound = false;  // av bound to holder (attach)
    size_t addrlen = 0;
  };
  static void av_changed(void* obj, bool inserted_only) noexcept;
  // Under ctl_: the route of fi_addr a, made now (0 when it cannot be).
  uint64_t resolve(fi_addr_t a) noexcept;
  size_t pick_rail(const uint8_t* peer, size_t rails) const noexcept;
  void unroute(fi_addr_t a) noexcept;
  void resync(bool inserted_only) noexcept;
  uint64_t signature(fi_addr_t a) const noexcept;

  std::vector<core> cores_;
  const bool locked_;
  route_table routes_;
  util::ref<util::av> av_;
  fi_addr_t base_mask_ = ~fi_addr_t{0};
  // Under ctl_: what each resolved fi_addr was resolved from (signature(),
  // the address) and the user id its core was given, and fi_addrs below
  // scanned_ that have no route (removed ones).
  util::fast_mutex ctl_;
  std::vector<uint64_t> sigs_;
  std::vector<fi_addr_t> ids_;
  std::vector<util::srx*> engines_;
  size_t scanned_ = 0;
  size_t holes_ = 0;
  bool started_ = false;
  std::atomic<bool> attached_{false};
  bool watching_ = false;
  uint8_t own_name_[proto::addr_bytes] = {};
};

// fi_getname of the lnx address built from the cores' objects `named`
// (endpoints or scalable endpoints, one per core of `cores`, in order):
// into `addr`, proto::addr_bytes in *addrlen; -FI_ETOOSMALL with the
// length asked for when it does not fit; -FI_E* (logged) when a core's
// name cannot be had or does not fit an lnx address.
int get_address(const std::vector<core_domain*>& cores, const std::vector<fid*>& named,
                void* addr, size_t* addrlen) noexcept;

}  // namespace weft::lnx
