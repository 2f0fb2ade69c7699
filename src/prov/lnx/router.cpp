// SPDX-License-Identifier: MIT
// weft — lnx's routes (router.hpp) and the lnx address of a set of cores.
#include "prov/lnx/router.hpp"

#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "core/log.hpp"
#include "util/av.hpp"

namespace weft::lnx {

namespace {

const char* name_of(const core_domain* cd) {
  return cd->m.prov.c_str();
}

}  // namespace

router::router(std::vector<core_domain*> cores, bool locked) : locked_(locked) {
  cores_.resize(cores.size());
  for (size_t k = 0; k < cores.size(); ++k) cores_[k].cd = cores[k];
}

router::~router() {
  stop();
  for (core& c : cores_)
    if (c.av && fi_close(&c.av->fid))
      WEFT_WARN(&provider(), FI_LOG_AV, "closing the %s AV failed", name_of(c.cd));
}

int router::attach(util::av& av) noexcept {
  auto* p = &provider();
  std::lock_guard g(ctl_);
  if (av_) {
    if (av_.get() == &av) return 0;
    WEFT_WARN(p, FI_LOG_EP_CTRL, "fi_ep_bind: the contexts of one endpoint share one AV");
    return to_fi(errc::inval);
  }
  fi_av_attr aa{};
  aa.type = FI_AV_TABLE;
  aa.rx_ctx_bits = av.rx_bits();
  // After a failed attach a later one goes on from where it stopped: an
  // AV opened is kept (the destructor closes it), one bound is not bound
  // again.
  for (core& c : cores_) {
    int ret = c.av ? 0 : fi_av_open(c.cd->domain, &aa, &c.av, nullptr);
    if (!ret && !c.bound) {
      ret = fi_ep_bind(c.holder, &c.av->fid, 0);
      // A core scalable endpoint is enabled once its AV is bound (its
      // contexts need no more of it).
      if (!ret && c.holder->fid.fclass == FI_CLASS_SEP) ret = fi_enable(c.holder);
      c.bound = ret == 0;
    }
    if (ret) {
      WEFT_WARN(p, FI_LOG_EP_CTRL, "fi_ep_bind: the %s AV: %s", name_of(c.cd), fi_strerror(-ret));
      return ret;
    }
  }
  av_.reset(&av);
  base_mask_ = av.rx_bits() ? ~uint64_t{0} >> av.rx_bits() : ~uint64_t{0};
  attached_.store(true, std::memory_order_release);
  return 0;
}

void router::start(const std::vector<size_t>& addrlens, const uint8_t* own_name) noexcept {
  {
    std::lock_guard g(ctl_);
    if (started_) return;
    for (size_t k = 0; k < cores_.size() && k < addrlens.size(); ++k)
      cores_[k].addrlen = addrlens[k];
    std::memcpy(own_name_, own_name, sizeof own_name_);
    started_ = true;
  }
  try {
    av_->watch(this, &av_changed);
    watching_ = true;
  } catch (const std::bad_alloc&) {
    // Peers are then routed on their first send only (resolve_on_send),
    // and a first message from one not sent to yet is FI_ADDR_NOTAVAIL.
    WEFT_WARN(&provider(), FI_LOG_AV, "no memory to watch the AV: peers are routed on send");
  }
  resync(false);
}

void router::stop() noexcept {
  if (watching_) av_->unwatch(this);
  watching_ = false;
}

void router::add_engine(util::srx* e) {
  std::lock_guard g(ctl_);
  engines_.push_back(e);
}

void router::remove_engine(util::srx* e) noexcept {
  std::lock_guard g(ctl_);
  if (auto it = std::find(engines_.begin(), engines_.end(), e); it != engines_.end())
    engines_.erase(it);
}

uint64_t router::signature(fi_addr_t a) const noexcept {
  const uint8_t* e = av_->entry(a);
  if (!e) return 0;
  return av_->codec().hash(e) << 1 | 1;
}

size_t router::pick_rail(const uint8_t* peer, size_t rails) const noexcept {
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

uint64_t router::resolve(fi_addr_t a) noexcept {
  auto* p = &provider();
  const uint8_t* e = av_->entry(a);
  if (!e) return 0;
  proto::addr_header h;
  part parts[proto::max_parts];
  size_t n = 0;
  if (!read_address(e, h, parts, &n)) return 0;  // the codec checked it at insert
  // shm for a peer on this host; else the first other provider we share,
  // on one of its rails (pick_rail).
  const part* use = nullptr;
  size_t k_use = 0;
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
          k_use = k + rail;
          break;
        }
    }
  }
  if (!use) {
    WEFT_WARN(p, FI_LOG_AV, "fi_addr %llu: no provider of this link reaches that peer",
              static_cast<unsigned long long>(a));
    return 0;
  }
  core& c = cores_[k_use];
  std::vector<uint8_t> buf(c.addrlen, 0);
  if (!decode_part(c.cd->info->addr_format, name_of(c.cd), use->bytes, use->len, buf.data(),
                   buf.size())) {
    WEFT_WARN(p, FI_LOG_AV, "fi_addr %llu: its %s address (%zu bytes) is not one our %s takes",
              static_cast<unsigned long long>(a), name_of(c.cd), use->len, name_of(c.cd));
    return 0;
  }
  // FI_AV_USER_ID: `ca` carries the user id in, and the core's fi_addr out.
  const fi_addr_t id = av_->report(a);
  fi_addr_t ca = id;
  if (fi_av_insert(c.av, buf.data(), 1, &ca, FI_AV_USER_ID, nullptr) != 1) {
    WEFT_WARN(p, FI_LOG_AV, "fi_addr %llu: the %s AV refused the peer's address",
              static_cast<unsigned long long>(a), name_of(c.cd));
    return 0;
  }
  WEFT_INFO(p, FI_LOG_AV, "fi_addr %llu: through %s", static_cast<unsigned long long>(a),
            name_of(c.cd));
  if (rails > 1)
    WEFT_INFO(p, FI_LOG_AV, "fi_addr %llu: rail %zu of %zu, %s:%s",
              static_cast<unsigned long long>(a), rail, rails, name_of(c.cd),
              c.cd->m.domain.c_str());
  uint64_t r = route_table::make(k_use, ca);
  if (!routes_.set(a, r)) {
    fi_av_remove(c.av, &ca, 1, 0);
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

void router::unroute(fi_addr_t a) noexcept {
  uint64_t r = routes_.get(a);
  if (!r) return;
  routes_.set(a, 0);
  fi_addr_t ca = route_table::addr_of(r);
  fi_av_remove(cores_[route_table::core_of(r)].av, &ca, 1, 0);
  if (a < sigs_.size()) sigs_[a] = 0;
}

uint64_t router::resolve_on_send(fi_addr_t a) noexcept {
  std::lock_guard g(ctl_);
  if (!started_) return 0;
  if (uint64_t r = routes_.get(a)) return r;  // another thread made it
  uint64_t r = resolve(a);
  if (!r && !av_->entry(a))
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "fi_addr %llu is not in the endpoint's AV",
              static_cast<unsigned long long>(a));
  return r;
}

void router::av_changed(void* obj, bool inserted_only) noexcept {
  static_cast<router*>(obj)->resync(inserted_only);
}

void router::resync(bool inserted_only) noexcept {
  std::lock_guard g(ctl_);
  const util::av* av = av_.get();
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
      const core& c = cores_[route_table::core_of(r)];
      if (fi_av_set_user_id(c.av, ca, id, 0) == 0) {
        ids_[a] = id;
      } else {
        WEFT_WARN(&provider(), FI_LOG_AV, "fi_addr %llu: the %s AV kept its old user id",
                  static_cast<unsigned long long>(a), name_of(c.cd));
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
  // (fi_av(3)); the cores cannot say so to lnx's engines (fi_peer(3) has no
  // such call), so lnx relabels them itself. Inserting the peer again
  // names them once more through the cores' foreach_unspec_addr.
  if (gone.empty()) return;
  auto source = [&](fi_peer_rx_entry* e) {
    return std::find(gone.begin(), gone.end(), e->addr) != gone.end() ? FI_ADDR_NOTAVAIL
                                                                        : e->addr;
  };
  for (util::srx* e : engines_) {
    if (locked_)
      e->relabel<util::mutex_lock>(source, true);
    else
      e->relabel<util::null_lock>(source, true);
  }
}

int get_address(const std::vector<core_domain*>& cores, const std::vector<fid*>& named,
                void* addr, size_t* addrlen) noexcept {
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
  for (size_t k = 0; k < cores.size(); ++k) {
    uint8_t name[256];
    size_t len = sizeof name;
    int ret = fi_getname(named[k], name, &len);
    if (ret == -FI_ETOOSMALL) {
      WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_getname: the %s address (%zu bytes) is too long",
                name_of(cores[k]), len);
      return to_fi(errc::other);
    }
    if (ret) return ret;
    uint8_t part[proto::max_part_len];
    size_t n = encode_part(cores[k]->info->addr_format, name_of(cores[k]), name, len, part);
    if (!n || off + 1 + n > proto::addr_bytes) {
      WEFT_WARN(&provider(), FI_LOG_EP_CTRL,
                "fi_getname: the %s address does not fit in an lnx address of %zu bytes",
                name_of(cores[k]), proto::addr_bytes);
      return to_fi(errc::other);
    }
    out[off++] = proto::part_byte(cores[k]->m.id, n);
    std::memcpy(out + off, part, n);
    off += n;
  }
  std::memcpy(addr, out, proto::addr_bytes);
  *addrlen = proto::addr_bytes;
  return 0;
}

}  // namespace weft::lnx
