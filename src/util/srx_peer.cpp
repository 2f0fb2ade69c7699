// SPDX-License-Identifier: MIT
// weft — the receive-matching engine, peer side: the fid_peer_srx faces and
// the owner_ops a peer provider calls when a message arrives (srx.hpp has
// the contract).
#include "util/srx.hpp"

#include "core/log.hpp"
#include "util/nosys.hpp"

#include <mutex>

namespace weft::util {

namespace {

srx_entry arrived(fid_peer_srx* face, const fi_peer_match_attr& a, bool tagged) noexcept {
  srx_entry e{};
  e.rx.srx = face;
  e.rx.addr = a.addr;
  e.rx.msg_size = a.msg_size;
  e.rx.tag = tagged ? a.tag : 0;
  e.rx.flags = (tagged ? FI_TAGGED : FI_MSG) | FI_RECV;
  e.tagged = tagged;
  return e;
}

// A face's peer_ops before the peer fills them: drop what is handed over.
int drop_entry(fi_peer_rx_entry* e) noexcept {
  WEFT_WARN(srx::of(e->srx)->provider(), FI_LOG_EP_DATA,
            "peer SRX has no start/discard callbacks: message dropped");
  e->srx->owner_ops->free_entry(e);
  return to_fi(errc::nosys);
}

constexpr fi_ops face_fid_ops = {
    .size = sizeof(fi_ops),
    WEFT_NOSYS(fi_ops, close),
    WEFT_NOSYS(fi_ops, bind),
    WEFT_NOSYS(fi_ops, control),
    WEFT_NOSYS(fi_ops, ops_open),
    WEFT_NOSYS(fi_ops, tostr),
    WEFT_NOSYS(fi_ops, ops_set),
};
constexpr fi_ops_ep face_ep_ops = {
    .size = sizeof(fi_ops_ep),
    WEFT_NOSYS(fi_ops_ep, cancel),
    WEFT_NOSYS(fi_ops_ep, getopt),
    WEFT_NOSYS(fi_ops_ep, setopt),
    WEFT_NOSYS(fi_ops_ep, tx_ctx),
    WEFT_NOSYS(fi_ops_ep, rx_ctx),
    WEFT_NOSYS(fi_ops_ep, rx_size_left),
    WEFT_NOSYS(fi_ops_ep, tx_size_left),
};

// fi_ops_srx_owner of one lock policy: the peer's calls into the engine.
template <class Lock>
struct owner_thunks {
  static int get_msg(fid_peer_srx* s, fi_peer_match_attr* a, fi_peer_rx_entry** out) noexcept {
    if (!s || !a || !out) return to_fi(errc::inval);
    return srx::of(s)->get_msg<Lock>(s, *a, out);
  }
  static int get_tag(fid_peer_srx* s, fi_peer_match_attr* a, fi_peer_rx_entry** out) noexcept {
    if (!s || !a || !out) return to_fi(errc::inval);
    return srx::of(s)->get_tag<Lock>(s, *a, out);
  }
  static int queue_msg(fi_peer_rx_entry* e) noexcept {
    if (!e || !e->srx) return to_fi(errc::inval);
    return srx::of(e->srx)->queue_msg<Lock>(e);
  }
  static int queue_tag(fi_peer_rx_entry* e) noexcept {
    if (!e || !e->srx) return to_fi(errc::inval);
    return srx::of(e->srx)->queue_tag<Lock>(e);
  }
  static void foreach_unspec_addr(fid_peer_srx* s,
                                  fi_addr_t (*get_addr)(fi_peer_rx_entry*)) noexcept {
    if (s && get_addr) srx::of(s)->foreach_unspec_addr<Lock>(s, get_addr);
  }
  static void free_entry(fi_peer_rx_entry* e) noexcept {
    if (e && e->srx) srx::of(e->srx)->free_entry<Lock>(e);
  }
  static constexpr fi_ops_srx_owner table = {
      .size = sizeof(fi_ops_srx_owner),
      .get_msg = get_msg,
      .get_tag = get_tag,
      .queue_msg = queue_msg,
      .queue_tag = queue_tag,
      .foreach_unspec_addr = foreach_unspec_addr,
      .free_entry = free_entry,
  };
};

}  // namespace

const fi_ops_srx_owner* srx::owner_table(lock_kind k) noexcept {
  return with_lock_kind(k, []<class L>() { return &owner_thunks<L>::table; });
}

// ---- faces ----

srx* srx::of(fid_peer_srx* f) noexcept {
  return static_cast<face*>(f)->engine;
}

srx* srx::behind(fid_peer_srx* f, lock_kind k) noexcept {
  // Only this class's faces carry its owner tables: the identity of the
  // table proves the cast, and which table proves the lock policy.
  if (!f || f->owner_ops != owner_table(k)) return nullptr;
  return of(f);
}

srx* srx::engine_behind(fid_peer_srx* f) noexcept {
  for (lock_kind k : {lock_kind::none, lock_kind::mutex, lock_kind::handoff})
    if (srx* e = behind(f, k)) return e;
  return nullptr;
}

fid_peer_srx* srx::add_peer(const fi_ops_srx_peer* ops, void* context) {
  auto f = std::make_unique<face>();
  fid_peer_srx& s = *f;
  s = fid_peer_srx{};
  s.ep_fid.fid.fclass = FI_CLASS_SRX_CTX;
  s.ep_fid.fid.context = context;
  s.ep_fid.fid.ops = writable(face_fid_ops);
  s.ep_fid.ops = writable(face_ep_ops);
  s.ep_fid.cm = writable(cm_nosys);
  s.ep_fid.msg = writable(msg_nosys);
  s.ep_fid.rma = writable(rma_nosys);
  s.ep_fid.tagged = writable(tagged_nosys);
  s.ep_fid.atomic = writable(atomic_nosys);
  s.ep_fid.collective = writable(collective_nosys);
  s.owner_ops = const_cast<fi_ops_srx_owner*>(owner_ops_);
  f->engine = this;
  if (ops) {
    f->table = *ops;
  } else {
    f->table = {sizeof(fi_ops_srx_peer), drop_entry, drop_entry, drop_entry, drop_entry};
  }
  f->table.size = sizeof(fi_ops_srx_peer);
  s.peer_ops = &f->table;
  // Faces are added on the control path, but an application's shared
  // context gains some whenever an endpoint bound to it is enabled (lnx:
  // one per core), maybe while another is being enabled.
  std::lock_guard g{faces_mutex_};
  faces_.reserve(faces_.size() + 1);
  faces_.push_back(std::move(f));
  return faces_.back().get();
}

// ---- peer side ----

fi_peer_rx_entry* srx::match_posted(const fi_peer_match_attr& a, bool tagged) noexcept {
  if (tagged)
    return posted_tag_.find([&](const srx_entry* e) {
      return srx_addr_match(e->rx.addr, a.addr) && srx_tag_match(e->rx.tag, e->ignore, a.tag);
    });
  return posted_msg_.find([&](const srx_entry* e) { return srx_addr_match(e->rx.addr, a.addr); });
}

template <class Lock>
int srx::get(fid_peer_srx* face, const fi_peer_match_attr& a, fi_peer_rx_entry** out,
             bool tagged) noexcept {
  [[maybe_unused]] auto g = guard<Lock>();
  fi_peer_rx_entry* p = match_posted(a, tagged);
  if (p && !(p->flags & FI_MULTI_RECV)) {
    rx_queue::unlink(p);
    --posted_;
    srx_entry& e = *srx_entry::from(p);
    e.state = srx_state::peer;
    e.rx.srx = face;
    e.rx.addr = a.addr;
    e.rx.msg_size = a.msg_size;
    e.rx.tag = tagged ? a.tag : 0;
    *out = p;
    return 0;
  }
  srx_entry* s = pool_.take();
  if (!s) {
    WEFT_WARN(prov_, FI_LOG_EP_DATA, "out of memory for a receive entry");
    *out = nullptr;
    return to_fi(errc::nomem);
  }
  *s = arrived(face, a, tagged);
  if (p) {
    // A piece of a multi-receive buffer; the buffer leaves when it is spent.
    s->state = srx_state::peer;
    srx_entry* m = srx_entry::from(p);
    if (carve(*m, *s, a.msg_size)) {
      rx_queue::unlink(p);
      --posted_;
      release(m);
    }
    settle(*s);
    *out = &s->rx;
    return 0;
  }
  s->state = srx_state::unexp_pending;
  (tagged ? unexp_tag_ : unexp_msg_).push_back(&s->rx);
  ++unexpected_;
  unknown_ += srx_unknown_source(a.addr);
  *out = &s->rx;
  return to_fi(errc::noent);
}

template <class Lock>
int srx::get_msg(fid_peer_srx* face, const fi_peer_match_attr& a, fi_peer_rx_entry** out) noexcept {
  return get<Lock>(face, a, out, false);
}

template <class Lock>
int srx::get_tag(fid_peer_srx* face, const fi_peer_match_attr& a, fi_peer_rx_entry** out) noexcept {
  return get<Lock>(face, a, out, true);
}

template <class Lock>
int srx::queue(fi_peer_rx_entry* e, bool tagged) noexcept {
  srx_entry& m = *srx_entry::from(e);
  {
    [[maybe_unused]] auto g = guard<Lock>();
    if (m.tagged != tagged ||
        (m.state != srx_state::unexp_pending && m.state != srx_state::matched_pending)) {
      WEFT_WARN(prov_, FI_LOG_EP_DATA, "queue_%s of an entry that get_%s did not hand out",
                tagged ? "tag" : "msg", tagged ? "tag" : "msg");
      return to_fi(errc::inval);
    }
    if (m.state == srx_state::unexp_pending) {
      m.state = srx_state::unexp_ready;
      return 0;
    }
    settle(m);
    m.state = srx_state::peer;
  }
  // A receive matched it while the peer was preparing it.
  fi_ops_srx_peer* ops = e->srx->peer_ops;
  tagged ? ops->start_tag(e) : ops->start_msg(e);
  return 0;
}

template <class Lock>
void srx::free_entry(fi_peer_rx_entry* e) noexcept {
  srx_entry& m = *srx_entry::from(e);
  bool lost = false;
  void* lost_ctx = nullptr;
  uint64_t lost_flags = 0, lost_tag = 0;
  {
    [[maybe_unused]] auto g = guard<Lock>();
    switch (m.state) {
      case srx_state::peer:
        break;
      case srx_state::unexp_pending:
      case srx_state::unexp_ready:  // the peer withdraws a message
        rx_queue::unlink(e);
        --unexpected_;
        break;
      case srx_state::claimed:
        rx_queue::unlink(e);
        --claimed_count_;
        break;
      case srx_state::matched_pending:
        // Dropped after a receive matched it: that receive must still complete.
        lost = true;
        lost_ctx = e->context;
        lost_flags = m.post_flags & report_mask;
        lost_tag = e->tag;
        break;
      default:
        WEFT_WARN(prov_, FI_LOG_EP_DATA, "free_entry of an entry the peer does not hold");
        return;
    }
    release(&m);
  }
  if (lost) {
    WEFT_WARN(prov_, FI_LOG_EP_DATA, "peer dropped a message a receive had matched");
    complete_error<Lock>(lost_ctx, lost_flags, lost_tag, FI_EIO);
  }
}

template <class Lock>
bool srx::withdraw(fi_peer_rx_entry* e) noexcept {
  srx_entry& m = *srx_entry::from(e);
  [[maybe_unused]] auto g = guard<Lock>();
  switch (m.state) {
    case srx_state::unexp_pending:
    case srx_state::unexp_ready:
      rx_queue::unlink(e);
      --unexpected_;
      break;
    case srx_state::claimed:
      rx_queue::unlink(e);
      --claimed_count_;
      break;
    default:
      return false;
  }
  release(&m);
  return true;
}

// fi_peer(3): a peer's AV gained addresses; the peer names the source of
// each message queued from an unknown one.
template <class Lock>
void srx::foreach_unspec_addr(fid_peer_srx* face,
                              fi_addr_t (*get_addr)(fi_peer_rx_entry*)) noexcept {
  // Only the asking peer's messages: get_addr reads the peer's own record
  // (peer_context), which another peer's messages do not carry (lnx: shm's
  // relabelling must not read tcp's records). Others answer "unknown",
  // which keeps their labels.
  relabel<Lock>(
      [&](fi_peer_rx_entry* e) { return e->srx == face ? get_addr(e) : FI_ADDR_NOTAVAIL; },
      false);
}

#define WEFT_SRX_INSTANTIATE(L)                                          \
  template int srx::get_msg<L>(fid_peer_srx*, const fi_peer_match_attr&, \
                               fi_peer_rx_entry**) noexcept;             \
  template int srx::get_tag<L>(fid_peer_srx*, const fi_peer_match_attr&, \
                               fi_peer_rx_entry**) noexcept;             \
  template int srx::queue<L>(fi_peer_rx_entry*, bool) noexcept;          \
  template void srx::free_entry<L>(fi_peer_rx_entry*) noexcept;          \
  template bool srx::withdraw<L>(fi_peer_rx_entry*) noexcept;            \
  template void srx::foreach_unspec_addr<L>(fid_peer_srx*,                 \
                                            fi_addr_t(*)(fi_peer_rx_entry*)) noexcept;

WEFT_SRX_INSTANTIATE(null_lock)
WEFT_SRX_INSTANTIATE(mutex_lock)
WEFT_SRX_INSTANTIATE(handoff_lock)

}  // namespace weft::util
