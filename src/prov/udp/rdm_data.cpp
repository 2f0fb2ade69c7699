// SPDX-License-Identifier: MIT
// weft — the udp RDM data path: sends, progress (datagrams in, timers,
// windows), receives through util's matching engine, completions.
#include "core/log.hpp"
#include "prov/udp/rdm.hpp"
#include "util/av.hpp"
#include "util/iov.hpp"
#include "util/msg_ops.hpp"
#include "util/net.hpp"
#include "util/sys.hpp"
#include "util/wait.hpp"

#include <netinet/ip.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <mutex>
#include <thread>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace weft::udp {

namespace rd = util::rd;

namespace {

constexpr uint64_t rx_report = FI_MSG | FI_TAGGED | FI_RECV | FI_MULTI_RECV | FI_REMOTE_CQ_DATA;
// Datagrams read per progress call before timers and windows get their turn.
constexpr int rx_batch = 64;

template <class Lock>
constexpr fi_ops_srx_peer peer_ops = {
    .size = sizeof(fi_ops_srx_peer),
    .start_msg = rdm_endpoint::start<Lock>,
    .start_tag = rdm_endpoint::start<Lock>,
    .discard_msg = rdm_endpoint::discard<Lock>,
    .discard_tag = rdm_endpoint::discard<Lock>,
};

peer_key key_of(const sockaddr* sa, socklen_t len) noexcept {
  peer_key k;
  k.len = std::min<socklen_t>(len, sizeof k.bytes);
  std::memcpy(k.bytes, sa, k.len);
  return k;
}

// Payload bytes per datagram to `sa`: what the kernel's route to it carries
// without IP fragmentation (a UDP socket connected to the peer reports the
// path's MTU), less the IP, UDP and our headers.
uint32_t segment_for(const sockaddr* sa, socklen_t len) noexcept {
  size_t mtu = 1500;
  int s = ::socket(sa->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s >= 0) {
    if (::connect(s, sa, len) == 0) {
      int m = 0;
      socklen_t ml = sizeof m;
      int level = sa->sa_family == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP;
      int name = sa->sa_family == AF_INET6 ? IPV6_MTU : IP_MTU;
      if (getsockopt(s, level, name, &m, &ml) == 0 && m > 0) mtu = size_t(m);
    }
    ::close(s);
  }
  // At least rdm_min_seg (IP fragments on a path narrower than that): an
  // RMA request's header fits in its first datagram (rdm_proto.hpp).
  const size_t ip = sa->sa_family == AF_INET6 ? 40 : 20;
  size_t payload = mtu > ip + 8 + rdm_headers + rdm_min_seg ? mtu - ip - 8 - rdm_headers
                                                              : rdm_min_seg;
  return uint32_t(std::min(payload, rdm_max_seg));
}

// The AV entry's socket address; 0 when fi_addr is not in the AV.
socklen_t sockaddr_of(const util::av& av, fi_addr_t a, sockaddr_storage& out) noexcept {
  const uint8_t* e = av.entry(a);
  if (!e) return 0;
  return static_cast<socklen_t>(av.codec().decode(e, &out, sizeof out));
}

// How completions name the sender at `sa`: its fi_addr (user id where set),
// FI_ADDR_NOTAVAIL when it is not in the AV.
fi_addr_t lookup(const util::av* av, const sockaddr* sa, socklen_t len) noexcept {
  if (!av) return FI_ADDR_NOTAVAIL;
  sockaddr_storage from{};
  std::memcpy(&from, sa, std::min<size_t>(len, sizeof from));
  uint8_t entry[64];
  if (av->codec().entry_size > sizeof entry || av->codec().encode(&from, entry) != 0)
    return FI_ADDR_NOTAVAIL;
  fi_addr_t a = av->reverse(entry);
  return a == FI_ADDR_NOTAVAIL ? a : av->report(a);
}

}  // namespace

const fi_provider* rdm_endpoint::prov() noexcept { return &provider(); }

// An endpoint bound to a shared receive context: its receives are the
// context's to post (util/srx_port.hpp).
template <class Lock>
using shared_rx_ops = util::shared_rx_tables<util::msg_ops<rdm_endpoint, Lock>::msg_table,
                                             util::msg_ops<rdm_endpoint, Lock>::tagged_table,
                                             provider>;

template <class Lock>
const fi_ops_msg* rdm_endpoint::msg_table(bool shared_rx) noexcept {
  return shared_rx ? &shared_rx_ops<Lock>::msg : &util::msg_ops<rdm_endpoint, Lock>::msg_table;
}
template <class Lock>
const fi_ops_tagged* rdm_endpoint::tagged_table(bool shared_rx) noexcept {
  return shared_rx ? &shared_rx_ops<Lock>::tagged
                   : &util::msg_ops<rdm_endpoint, Lock>::tagged_table;
}
const fi_ops_srx_peer* rdm_endpoint::peer_table(bool locked) noexcept {
  return locked ? &peer_ops<util::mutex_lock> : &peer_ops<util::null_lock>;
}

// ---- peers ----

uint32_t rdm_endpoint::next_epoch() noexcept {
  // A 64-bit mixing step over a random seed: distinct per link and per reset.
  epoch_seed_ += 0x9e3779b97f4a7c15ull;
  uint64_t z = epoch_seed_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  uint32_t e = uint32_t(z ^ (z >> 31));
  return e ? e : 1;
}

rdm_peer* rdm_endpoint::peer_from(const sockaddr_storage& from, socklen_t len) noexcept {
  auto* sa = reinterpret_cast<const sockaddr*>(&from);
  if (len > sizeof(peer_key::bytes)) return nullptr;
  // The peer of the last datagram, most often the next one's too (a
  // ping-pong, a stream): a compare instead of hashing the address.
  if (rdm_peer* last = last_from_; last && last->key->len == len &&
                                   std::memcmp(last->key->bytes, sa, len) == 0)
    return last;
  try {
    auto [it, fresh] = peers_.try_emplace(key_of(sa, len));
    rdm_peer& p = it->second;
    if (fresh) {
      p.key = &it->first;
      p.seg = segment_for(sa, len);
      p.link.configure(rd_cfg_);
      p.link.start(next_epoch());
      p.src = lookup(bound_.av_.get(), sa, len);  // no name port yet
    }
    last_from_ = &p;
    return &p;
  } catch (const std::bad_alloc&) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "udp RDM: out of memory for a new peer");
    return nullptr;
  }
}

fi_addr_t rdm_endpoint::name_of(const rdm_peer& p) const noexcept {
  if (!p.name_port) return lookup(bound_.av_.get(), p.sa(), p.sa_len());
  sockaddr_storage n{};
  std::memcpy(&n, p.sa(), p.sa_len());
  util::set_sockaddr_port(reinterpret_cast<sockaddr*>(&n), p.name_port);
  return lookup(bound_.av_.get(), reinterpret_cast<sockaddr*>(&n), p.sa_len());
}

rdm_peer* rdm_endpoint::peer_for_rx_ctx(fi_addr_t dest, int* err) noexcept {
  const util::av& av = *bound_.av_;
  const uint64_t index = av.rx_index(dest);
  const fi_addr_t base = av.strip_rx(dest);
  sockaddr_storage to;
  socklen_t tl = sockaddr_of(av, base, to);
  const unsigned port = tl ? util::sockaddr_port(reinterpret_cast<sockaddr*>(&to)) : 0;
  if (!tl) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "send to fi_addr %llu: not in the address vector",
              static_cast<unsigned long long>(base));
    *err = to_fi(errc::inval);
    return nullptr;
  }
  if (index >= max_contexts || port + index > 65535) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA,
              "send to receive context %llu of fi_addr %llu: a udp scalable endpoint has at "
              "most %zu, from its port (%u) up",
              static_cast<unsigned long long>(index), static_cast<unsigned long long>(base),
              max_contexts, port);
    *err = to_fi(errc::inval);
    return nullptr;
  }
  util::set_sockaddr_port(reinterpret_cast<sockaddr*>(&to), uint16_t(port + index));
  rdm_peer* p = peer_from(to, tl);
  if (!p) {
    *err = to_fi(errc::nomem);
    return nullptr;
  }
  p->to_index = uint8_t(index);
  return p;
}

rdm_peer* rdm_endpoint::peer_for_send(fi_addr_t dest, int* err) noexcept {
  if (dest < by_fi_.size() && by_fi_[dest]) return by_fi_[dest];
  if (bound_.av_ && bound_.av_->rx_index(dest)) return peer_for_rx_ctx(dest, err);
  sockaddr_storage to;
  socklen_t tl = bound_.av_ ? sockaddr_of(*bound_.av_, dest, to) : 0;
  if (!tl) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "send to fi_addr %llu: not in the address vector",
              static_cast<unsigned long long>(dest));
    *err = to_fi(errc::inval);
    return nullptr;
  }
  rdm_peer* p = peer_from(to, tl);
  if (!p) {
    *err = to_fi(errc::nomem);
    return nullptr;
  }
  try {
    if (dest >= by_fi_.size()) by_fi_.resize(std::max<size_t>(dest + 1, by_fi_.size() * 2));
    by_fi_[dest] = p;
  } catch (const std::bad_alloc&) {
  }
  return p;
}

void rdm_endpoint::mark_busy(rdm_peer& p) noexcept {
  if (p.busy_at >= 0) return;
  if (busy_.size() == busy_.capacity()) {
    try {
      busy_.reserve(busy_.capacity() * 2 + 16);
    } catch (const std::bad_alloc&) {
      return;  // progress finds it again through its next acknowledgement
    }
  }
  p.busy_at = int32_t(busy_.size());
  busy_.push_back(&p);
}

void rdm_endpoint::av_changed(void* self, bool inserted_only) noexcept {
  auto* ep = static_cast<rdm_endpoint*>(self);
  ep->with_lock([&]<class Lock>() { ep->relabel<Lock>(inserted_only); });
}

template <class Lock>
void rdm_endpoint::relabel(bool inserted_only) noexcept {
  [[maybe_unused]] auto g = guard<Lock>();
  const util::av* av = bound_.av_.get();
  if (!inserted_only) std::fill(by_fi_.begin(), by_fi_.end(), nullptr);  // may name others now
  for (auto& [key, p] : peers_)
    if (!inserted_only || p.src == FI_ADDR_NOTAVAIL) p.src = av ? name_of(p) : FI_ADDR_NOTAVAIL;
  rx_.relabel<Lock>(
      [](fi_peer_rx_entry* e) {
        auto* b = static_cast<rdm_unexp*>(e->peer_context);
        return b && b->from ? b->from->src : e->addr;
      },
      !inserted_only);
}

// ---- sending ----

size_t rdm_endpoint::datagram_iov(iovec* v, const rd::dgram& h, const rdm_tx& t, uint64_t off,
                                  uint32_t bytes) noexcept {
  size_t n = 0;
  v[n++] = {const_cast<rd::dgram*>(&h), sizeof h};
  if (h.flags & rd::flag_first) v[n++] = {const_cast<rd::msg*>(&t.hdr), sizeof t.hdr};
  uint64_t skip = off;
  size_t left = bytes;
  for (size_t i = 0; i < t.count && left; ++i) {
    const size_t l = t.iov[i].iov_len;
    if (skip >= l) {
      skip -= l;
      continue;
    }
    const size_t take = std::min<size_t>(l - skip, left);
    v[n++] = {static_cast<char*>(t.iov[i].iov_base) + skip, take};
    left -= take;
    skip = 0;
  }
  return n;
}

bool rdm_endpoint::send_datagram(rdm_peer& p, const rd::dgram& h, const rdm_tx& t, uint64_t off,
                                 uint32_t bytes) noexcept {
  iovec v[2 + rdm_tx_iov];
  const size_t n = datagram_iov(v, h, t, off, bytes);
  ssize_t r;
  if (bytes <= small_datagram) {
    // Small: gathered here and sent with sendto, which spares the kernel
    // importing a msghdr and its iovecs (a tenth of a small ping-pong's
    // time in the kernel).
    alignas(8) std::byte buf[rdm_headers + small_datagram];
    size_t len = 0;
    for (size_t i = 0; i < n; ++i) {
      if (v[i].iov_len) std::memcpy(buf + len, v[i].iov_base, v[i].iov_len);
      len += v[i].iov_len;
    }
    r = util::sys::send_to(sock_.get(), buf, len, MSG_DONTWAIT | MSG_NOSIGNAL, p.sa(),
                           p.sa_len());
  } else {
    msghdr m{};
    m.msg_name = const_cast<sockaddr*>(p.sa());
    m.msg_namelen = p.sa_len();
    m.msg_iov = v;
    m.msg_iovlen = n;
    r = util::sys::send_msg(sock_.get(), &m, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  if (r < 0) {
    const int e = errno;
    if (e == EAGAIN || e == EWOULDBLOCK || e == ENOBUFS) return false;
    // Anything else is a datagram the network lost: it is sent again.
    WEFT_DBG(&provider(), FI_LOG_EP_DATA, "udp RDM: sendmsg to %s: %s",
             util::format_sockaddr(p.sa()).c_str(), std::strerror(e));
  }
  p.link.ack_sent();
  unhold(p);
  return true;
}

void rdm_endpoint::send_ack(rdm_peer& p) noexcept {
  unhold(p);
  rd::dgram h;
  p.link.stamp_ack(h);
  if (util::sys::send_to(sock_.get(), &h, sizeof h, MSG_DONTWAIT | MSG_NOSIGNAL, p.sa(),
                        p.sa_len()) >= 0 ||
      (errno != EAGAIN && errno != ENOBUFS))
    p.link.ack_sent();
}

// An acknowledgement held by the previous progress call has waited its one
// call: it goes now, stamped anew. Of those this call owes, one (the first
// peer's, not the one just released) is held when nobody may sleep on our
// CQs or counters: a sleeper's call would hold it across its sleep, so the
// peer would wait for the keeper's tick. The others go now.
void rdm_endpoint::answer_acks() noexcept {
  auto* old = static_cast<rdm_peer*>(const_cast<void*>(held_.take()));
  bool may_hold = hold_acks_ && !ack_list_.empty() && !sleeper_bound();
  for (rdm_peer* p : ack_list_) {
    p->ack_listed = false;
    if (!p->link.ack_due()) continue;
    if (may_hold && p != old) {
      rd::dgram h;
      p->link.stamp_ack(h);
      if (held_.hold(p, h, p->sa(), p->sa_len())) {
        p->link.ack_sent();
        may_hold = false;
        continue;
      }
    }
    if (p == old) old = nullptr;
    send_ack(*p);
  }
  ack_list_.clear();
  if (old) send_ack(*old);
}

template <class Lock>
bool rdm_endpoint::pump(rdm_peer& p, uint64_t now) noexcept {
  while (p.unsent && p.link.window_open()) {
    rdm_tx* t = p.unsent;
    const uint64_t off = t->queued;
    const auto bytes = uint32_t(std::min<uint64_t>(p.seg, t->hdr.len - off));
    const uint8_t fl = (off == 0 ? rd::flag_first : 0) |
                       (off + bytes == t->hdr.len ? rd::flag_last : 0);
    if (!p.link.reserve()) return false;
    rd::dgram h;
    p.link.stamp_data(h, fl, bytes);
    if (!send_datagram(p, h, *t, off, bytes)) return false;
    p.link.sent(rd::flight{t, off, bytes, fl, false, 0}, now);
    t->queued += bytes;
    if (fl & rd::flag_last) p.unsent = t->next;
  }
  return true;
}

template <class Lock>
void rdm_endpoint::flush_more(uint64_t now) noexcept {
  mmsghdr mm[more_batch];
  size_t k = 0;
  auto out = [&] {
    // Datagrams the kernel did not take (a full socket buffer) are in
    // flight already: the network might as well have lost them, and they
    // go again at their retransmission timeout.
    for (size_t sent = 0; sent < k;) {
      const int r = util::sys::send_mmsg(sock_.get(), mm + sent, unsigned(k - sent),
                               MSG_DONTWAIT | MSG_NOSIGNAL);
      if (r <= 0) break;
      sent += size_t(r);
    }
    k = 0;
  };
  for (rdm_peer* p : more_) {
    p->more_listed = false;
    while (p->unsent && p->link.window_open()) {
      rdm_tx* t = p->unsent;
      const uint64_t off = t->queued;
      const auto bytes = uint32_t(std::min<uint64_t>(p->seg, t->hdr.len - off));
      const uint8_t fl = (off == 0 ? rd::flag_first : 0) |
                         (off + bytes == t->hdr.len ? rd::flag_last : 0);
      if (!p->link.reserve()) break;
      more_slot& s = more_slots_[k];
      p->link.stamp_data(s.h, fl, bytes);
      mm[k] = mmsghdr{};
      mm[k].msg_hdr.msg_name = const_cast<sockaddr*>(p->sa());
      mm[k].msg_hdr.msg_namelen = p->sa_len();
      mm[k].msg_hdr.msg_iov = s.v;
      mm[k].msg_hdr.msg_iovlen = datagram_iov(s.v, s.h, *t, off, bytes);
      p->link.sent(rd::flight{t, off, bytes, fl, false, 0}, now);
      p->link.ack_sent();
      unhold(*p);
      t->queued += bytes;
      if (fl & rd::flag_last) p->unsent = t->next;
      if (++k == more_batch) out();
    }
  }
  out();
  more_.clear();
}

template <class Lock>
ssize_t rdm_endpoint::send(const iovec* iov, size_t count, fi_addr_t dest, void* context,
                           uint64_t flags, uint64_t tag, uint64_t data) noexcept {
  if (util::iov_refused(&provider(), "send", iov, count, max_iov)) return to_fi(errc::inval);
  const size_t len = util::iov_total(iov, count);
  if (len > max_msg_ || ((flags & FI_INJECT) && len > rdm_inject_size)) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "send of %zu bytes exceeds %s %zu", len,
              len > max_msg_ ? "max_msg_size" : "inject_size",
              len > max_msg_ ? max_msg_ : rdm_inject_size);
    return to_fi(errc::msgsize);
  }
  util::cq* cq = bound_.tx_cq.get();
  const bool no_comp = flags & util::op_no_completion;
  const bool completion = cq && !no_comp && (!bound_.tx_selective || (flags & FI_COMPLETION));
  [[maybe_unused]] auto g = guard<Lock>();
  int err = 0;
  rdm_peer* p = peer_for_send(dest, &err);
  if (!p) return err;
  rdm_tx* t = take_tx();
  if (!t) return to_fi(errc::again);
  const bool tagged = flags & FI_TAGGED;
  t->hdr = rd::msg{};
  t->hdr.op = uint8_t(tagged ? rdm_op::tagged : rdm_op::msg) |
              ((flags & FI_REMOTE_CQ_DATA) ? rdm_op_with_data : 0);
  t->hdr.len = len;
  t->hdr.tag = tag;
  t->hdr.data = (flags & FI_REMOTE_CQ_DATA) ? data : 0;
  t->hdr.rx_index = p->to_index;   // as enqueue (rdm_rma.cpp) sets them
  t->hdr.name_port = name_port_;
  if (flags & FI_INJECT) {
    size_t off = 0;
    for (size_t i = 0; i < count; ++i) {
      if (!iov[i].iov_len) continue;  // a 0-byte iovec may have no base
      std::memcpy(t->buf + off, iov[i].iov_base, iov[i].iov_len);
      off += iov[i].iov_len;
    }
    t->iov[0] = {t->buf, len};
    t->count = 1;
  } else {
    std::copy_n(iov, count, t->iov);
    t->count = uint8_t(count);
  }
  t->peer = p;
  t->kind = rdm_tx_kind::message;
  t->complete = completion;
  t->report = !no_comp;
  t->cntr = util::counted(bound_.send_cntr.get(), flags);
  t->cq_flags = FI_SEND | (tagged ? FI_TAGGED : FI_MSG);
  t->context = context;
  t->queued = 0;
  t->next = nullptr;
  if (p->tail)
    p->tail->next = t;
  else
    p->head = t;
  p->tail = t;
  if (!p->unsent) p->unsent = t;
  mark_busy(*p);
  send_or_hold<Lock>(*p, flags);
  return 0;
}

template <class Lock>
void rdm_endpoint::send_or_hold(rdm_peer& p, uint64_t flags) noexcept {
  if ((flags & FI_MORE) && !auto_) [[unlikely]] {
    // Held for the first operation without FI_MORE, or the next progress
    // call (flush_more); sent now if the list cannot take it.
    if (p.more_listed) return;
    if (!more_slots_) more_slots_.reset(new (std::nothrow) more_slot[more_batch]);
    if (more_slots_ && more_.size() < more_peers) {
      try {
        more_.reserve(more_peers);  // once: a no-op after the first
      } catch (const std::bad_alloc&) {
        more_slots_.reset();
      }
      if (more_slots_) {
        p.more_listed = true;
        more_.push_back(&p);  // within the capacity reserved: no throw
        return;
      }
    }
  }
  const uint64_t now = util::now_ns();
  if (!more_.empty()) [[unlikely]] flush_more<Lock>(now);  // what FI_MORE held goes first
  pump<Lock>(p, now);
}

// ---- completions ----

template <class Lock>
void rdm_endpoint::complete_tx(rdm_tx* t) noexcept {
  finished();
  if (t->complete) {
    util::cq_entry ce{};
    ce.op_context = t->context;
    ce.flags = t->cq_flags;
    ce.src = FI_ADDR_NOTAVAIL;
    if (tx_deferred_head_ || !bound_.tx_cq->write<Lock>(ce)) {
      // The CQ is full: the completion waits, in order, for room.
      t->next = nullptr;
      if (tx_deferred_tail_)
        tx_deferred_tail_->next = t;
      else
        tx_deferred_head_ = t;
      tx_deferred_tail_ = t;
      return;
    }
  }
  // fi_cntr(3): the send counter counts every completed send, injected or
  // not (t->cntr; RMA: the read or write counter).
  if (util::cntr* c = t->cntr) c->inc();
  put_tx(t);
}

template <class Lock>
void rdm_endpoint::complete_deferred() noexcept {
  while (rdm_tx* t = tx_deferred_head_) {
    util::cq_entry ce{};
    ce.op_context = t->context;
    ce.flags = t->cq_flags;
    ce.src = FI_ADDR_NOTAVAIL;
    if (!bound_.tx_cq->write<Lock>(ce)) return;
    tx_deferred_head_ = t->next;
    if (!tx_deferred_head_) tx_deferred_tail_ = nullptr;
    if (util::cntr* c = t->cntr) c->inc();
    put_tx(t);
  }
}

template <class Lock>
void rdm_endpoint::fail_tx(rdm_tx* t, int err) noexcept {
  if (t->kind == rdm_tx_kind::response) {  // an answer of ours: no one to tell
    put_response(t);
    return;
  }
  util::cq* cq = bound_.tx_cq.get();
  if (cq && t->report) {
    fi_cq_err_entry e{};
    e.op_context = t->context;
    e.flags = t->cq_flags;
    e.err = err;
    e.prov_errno = err;
    e.src_addr = FI_ADDR_NOTAVAIL;
    if (!cq->write_error<Lock>(e))
      WEFT_WARN(&provider(), FI_LOG_EP_DATA, "transmit CQ full: error %d for %p lost", err,
                t->context);
  }
  if (util::cntr* c = t->cntr) c->inc_err();
  put_tx(t);
}

template <class Lock>
bool rdm_endpoint::write_rx(fi_peer_rx_entry* e) noexcept {
  util::cq* cq = bound_.rx_cq.get();
  if (!cq) return true;
  const size_t total = util::iov_total(e->iov, e->count);
  const size_t len = std::min(e->msg_size, total);
  const uint64_t flags = e->flags & rx_report;
  const uint64_t data = (flags & FI_REMOTE_CQ_DATA) ? e->cq_data : 0;
  void* buf = e->count ? e->iov[0].iov_base : nullptr;
  const fi_addr_t src = e->addr;
  if (e->msg_size > total) {
    fi_cq_err_entry err{};
    err.op_context = e->context;
    err.flags = flags;
    err.len = len;
    err.buf = buf;
    err.data = data;
    err.tag = e->tag;
    err.olen = e->msg_size - len;
    err.err = FI_ETRUNC;
    err.prov_errno = FI_ETRUNC;
    err.src_addr = src;
    return cq->write_error<Lock>(err);
  }
  if (bound_.rx_selective && !(e->flags & (FI_COMPLETION | FI_MULTI_RECV))) return true;
  return cq->write<Lock>({e->context, flags, len, buf, data, e->tag, src, 0});
}

template <class Lock>
void rdm_endpoint::count_and_free_rx(fi_peer_rx_entry* e) noexcept {
  const bool ok = e->msg_size <= util::iov_total(e->iov, e->count);
  if (util::cntr* c = util::counted(bound_.recv_cntr.get(), e->flags)) ok ? c->inc() : c->inc_err();
  rx_.free_entry<Lock>(e);
}

template <class Lock>
void rdm_endpoint::finish_rx(fi_peer_rx_entry* e) noexcept {
  finished();
  // Behind completions already waiting, to keep their order.
  if (!rx_deferred_any_.load(std::memory_order_acquire) && write_rx<Lock>(e)) [[likely]] {
    count_and_free_rx<Lock>(e);
    return;
  }
  {
    [[maybe_unused]] auto g = deferred_guard<Lock>();
    try {
      rx_deferred_.push_back(e);
      rx_deferred_any_.store(true, std::memory_order_release);
      return;
    } catch (...) {
      WEFT_WARN(&provider(), FI_LOG_EP_DATA,
                "receive CQ full and no memory: the completion of %p is lost", e->context);
    }
  }
  count_and_free_rx<Lock>(e);
}

// Written in order while the CQ has room; the entries are freed after the
// list's lock is released (free_entry may take the receive context's lock,
// which a start holds when it defers).
template <class Lock>
void rdm_endpoint::flush_rx_deferred() noexcept {
  fi_peer_rx_entry* done[32];
  for (;;) {
    size_t n = 0;
    bool more;
    {
      [[maybe_unused]] auto g = deferred_guard<Lock>();
      while (n < std::size(done) && !rx_deferred_.empty() && write_rx<Lock>(rx_deferred_.front())) {
        done[n++] = rx_deferred_.front();
        rx_deferred_.pop_front();
      }
      if (rx_deferred_.empty()) rx_deferred_any_.store(false, std::memory_order_release);
      more = n == std::size(done) && !rx_deferred_.empty();
    }
    for (size_t i = 0; i < n; ++i) count_and_free_rx<Lock>(done[i]);
    if (!more) return;
  }
}

template <class Lock>
void rdm_endpoint::fail_rx(fi_peer_rx_entry* e, int err) noexcept {
  if (util::cq* cq = bound_.rx_cq.get()) {
    fi_cq_err_entry ce{};
    ce.op_context = e->context;
    ce.flags = e->flags & rx_report;
    ce.tag = e->tag;
    ce.err = err;
    ce.prov_errno = err;
    ce.src_addr = e->addr;
    if (!cq->write_error<Lock>(ce))
      WEFT_WARN(&provider(), FI_LOG_EP_DATA, "receive CQ full: error %d for %p lost", err,
                e->context);
  }
  if (util::cntr* c = util::counted(bound_.recv_cntr.get(), e->flags)) c->inc_err();
  rx_.free_entry<Lock>(e);
}

template <class Lock>
void rdm_endpoint::drop_rx(rdm_peer& p, int err) noexcept {
  fi_peer_rx_entry* e = std::exchange(p.rx, nullptr);
  if (!e) return;
  if (p.rx_unexp) {
    free_unexp(static_cast<rdm_unexp*>(e->peer_context));
    e->peer_context = nullptr;
    rx_.free_entry<Lock>(e);
  } else {
    fail_rx<Lock>(e, err);
  }
}

template <class Lock>
void rdm_endpoint::fail_peer(rdm_peer& p, int err, const char* why) noexcept {
  WEFT_WARN(&provider(), FI_LOG_EP_DATA, "udp RDM peer %s: %s; its operations fail",
            util::format_sockaddr(p.sa()).c_str(), why);
  for (rdm_tx* t = std::exchange(p.head, nullptr); t;) {
    rdm_tx* next = t->next;
    fail_tx<Lock>(t, err);
    t = next;
  }
  p.tail = p.unsent = nullptr;
  drop_rx<Lock>(p, FI_EIO);
  drop_rma<Lock>(p, err, true);
  p.rx_dropped = false;
  unhold(p);  // it would name the old incarnation
  p.link.reset(next_epoch());
}

// ---- receiving ----

template <class Lock>
void rdm_endpoint::acked(rdm_peer& p, const rd::flight& f) noexcept {
  if (!(f.flags & rd::flag_last)) return;
  rdm_tx* t = static_cast<rdm_tx*>(f.msg);
  // Messages are acknowledged in the order they were sent: t is the head.
  p.head = t->next;
  if (!p.head) p.tail = nullptr;
  if (t->kind != rdm_tx_kind::message) [[unlikely]]
    return rma_acked<Lock>(p, t);  // a request waits for its answer
  complete_tx<Lock>(t);
}

rdm_unexp* rdm_endpoint::alloc_unexp(size_t len, rdm_peer* from) noexcept {
  if (unexp_bytes_.load(std::memory_order_relaxed) + len > cfg().rdm_unexp_limit) return nullptr;
  auto* b = static_cast<rdm_unexp*>(std::malloc(sizeof(rdm_unexp) + (len ? len : 1)));
  if (!b) return nullptr;
  b->len = len;
  b->from = from;
  if (from) from->unexp.fetch_add(1, std::memory_order_relaxed);
  b->ep = this;
  b->queued = nullptr;
  b->q_prev = b->q_next = nullptr;
  unexp_bytes_.fetch_add(len, std::memory_order_relaxed);
  return b;
}

void rdm_endpoint::list_queued(rdm_unexp* b, fi_peer_rx_entry* e) noexcept {
  std::lock_guard g{q_lock_};
  b->queued = e;
  b->q_prev = nullptr;
  b->q_next = queued_;
  if (queued_) queued_->q_prev = b;
  queued_ = b;
}

void rdm_endpoint::begin_start(rdm_unexp* b) noexcept {
  if (rx_.owned()) return;  // our own engine: nothing is listed
  std::lock_guard g{q_lock_};
  in_start_.fetch_add(1, std::memory_order_relaxed);  // start / discard: done at their end
  unlink_queued(b);
}

template <class Lock>
void rdm_endpoint::retire_receives() noexcept {
  {
    [[maybe_unused]] auto g = guard<Lock>();
    // A receive of the context we were filling fails on our CQ (still
    // bound); a message arriving unexpected, not yet queued, goes.
    for (auto& [key, p] : peers_) drop_rx<Lock>(p, FI_ECANCELED);
  }
  // What we queued at the context is withdrawn; one a receive took
  // meanwhile (another thread posting to the context) is being finished by
  // start / discard, which unlist it first: wait for that. The list's lock
  // is held across the withdrawal, so such a start cannot release the entry
  // (which another message could then take) before we ask for it. The
  // context's engine locks here whatever the policy: a control path.
  // A start that took its message off the list may still be writing its
  // completion: wait for it to leave too (in_start_).
  // (util::srx_binding::engine: the application's context, or a peer
  // owner's engine that is util's, lnx's, which may be shared too.)
  util::srx* shared = shared_.engine();
  if (!shared) {
    // A peer provider's owner (fi_peer(3)) has no withdraw: what we queued
    // goes back through its free_entry (discard ends with it). The owner
    // does not start an entry of an endpoint it is closing (it serialises
    // its receive context against the close it asked for).
    if (!shared_.peer()) return;
    for (;;) {
      rdm_unexp* b;
      {
        std::lock_guard g{q_lock_};
        b = queued_;
        if (!b && !in_start_.load(std::memory_order_acquire)) break;
      }
      if (b)
        discard<Lock>(b->queued);
      else
        std::this_thread::yield();
    }
    return;
  }
  util::srx& engine = *shared;
  for (;;) {
    rdm_unexp* b;
    bool withdrawn = false;
    {
      std::lock_guard g{q_lock_};
      b = queued_;
      if (!b && !in_start_.load(std::memory_order_acquire)) break;
      if (b && (withdrawn = engine.withdraw<util::mutex_lock>(b->queued))) {
        // Nothing else holds it now: off the list here (begin_start
        // counts a start in).
        unlink_queued(b);
      }
    }
    if (withdrawn) {
      free_unexp(b);
      continue;
    }
    std::this_thread::yield();
  }
}

void rdm_endpoint::free_unexp(rdm_unexp* b) noexcept {
  if (!b) return;
  unexp_bytes_.fetch_sub(b->len, std::memory_order_relaxed);
  if (b->from) b->from->unexp.fetch_sub(1, std::memory_order_release);
  std::free(b);
  room_made();
}

template <class Lock>
bool rdm_endpoint::take_data(rdm_peer& p, const rd::view& v) noexcept {
  const rd::dgram& h = v.h;
  util::cq* cq = bound_.rx_cq.get();
  if (h.flags & rd::flag_first) {
    if (p.rx || p.rx_dropped || p.rma) {
      WEFT_WARN(&provider(), FI_LOG_EP_DATA,
                "udp RDM peer %s: a message began inside another; the first is dropped",
                util::format_sockaddr(p.sa()).c_str());
      drop_rx<Lock>(p, FI_EIO);
      drop_rma<Lock>(p, FI_EIO, false);
      p.rx_dropped = false;
    }
    if (v.m.rx_index != rx_index_ || v.m.name_port != p.name_port) [[unlikely]] {
      if (v.m.rx_index != rx_index_) {
        // Meant for another receive context: an fi_rx_addr index past its
        // peer's count reached another socket's port. Nothing is delivered
        // to an endpoint the sender did not mean, and nothing acknowledged:
        // the sender's operations fail at its peer timeout (FI_ETIMEDOUT),
        // as they do where no socket answers. Acknowledged, they would have
        // completed as if delivered. Logged once a second at most: the
        // sender resends until then.
        const uint64_t now = util::now_ns();
        if (now - misaddressed_logged_ns_ >= 1'000'000'000) {
          misaddressed_logged_ns_ = now;
          WEFT_WARN(&provider(), FI_LOG_EP_DATA,
                    "udp RDM peer %s: a message meant for receive context %u (this is %u) is "
                    "refused, unacknowledged",
                    util::format_sockaddr(p.sa()).c_str(), unsigned(v.m.rx_index),
                    unsigned(rx_index_));
        }
        misaddressed_ = true;
        return false;
      }
      // A transmit context: known by its scalable endpoint's port.
      p.name_port = v.m.name_port;
      p.src = name_of(p);
    }
    const uint8_t op = v.m.op & ~rdm_op_with_data;
    // The one dispatch on the operation: RMA and atomics are rdm_rma.cpp's.
    if (op > uint8_t(rdm_op::tagged)) return take_rma<Lock>(p, v);
    // A message's last datagram completes it: only with room for the
    // completion (otherwise the peer sends it again later).
    if ((h.flags & rd::flag_last) && cq && !cq->has_room<Lock>()) return false;
    const bool tagged = op == uint8_t(rdm_op::tagged);
    if ((op != uint8_t(rdm_op::msg) && !tagged) || v.m.len > rdm_max_msg) {
      WEFT_WARN(&provider(), FI_LOG_EP_DATA,
                "udp RDM peer %s: dropped a message (operation %u, %llu bytes)",
                util::format_sockaddr(p.sa()).c_str(), unsigned(v.m.op),
                static_cast<unsigned long long>(v.m.len));
      p.rx_dropped = !(h.flags & rd::flag_last);
      return true;
    }
    if (p.src == FI_ADDR_NOTAVAIL) p.src = name_of(p);
    fi_peer_match_attr a{p.src, v.m.len, v.m.tag};
    fi_peer_rx_entry* e = nullptr;
    int r = rx_.get<Lock>(tagged, a, &e);
    if (r != 0 && r != to_fi(errc::noent)) return false;  // no entry now: later
    if (r != 0) {
      rdm_unexp* b = alloc_unexp(v.m.len, &p);
      if (!b) {
        // Past the unexpected-data bound: the message waits at its sender
        // until receives take what is queued.
        rx_.free_entry<Lock>(e);
        return false;
      }
      e->peer_context = b;
    }
    if (v.m.op & rdm_op_with_data) {
      e->cq_data = v.m.data;
      e->flags |= FI_REMOTE_CQ_DATA;
    }
    p.rx = e;
    p.rx_unexp = r != 0;
    p.rx_as.begin(v.m.len);
    // A message in the middle of arriving: if its sender falls silent, the
    // receive fails after the peer timeout (progress checks it).
    if (!(h.flags & rd::flag_last)) mark_busy(p);
  } else if (!p.rx) {
    if (p.rma) return take_rma<Lock>(p, v);  // the rest of an RMA message
    // The rest of a dropped message: taken and thrown away.
    if (!p.rx_dropped)
      WEFT_WARN(&provider(), FI_LOG_EP_DATA, "udp RDM peer %s: data outside any message dropped",
                util::format_sockaddr(p.sa()).c_str());
    p.rx_dropped = !(h.flags & rd::flag_last);
    return true;
  } else if ((h.flags & rd::flag_last) && cq && !cq->has_room<Lock>()) {
    return false;  // as above: the completion needs room
  }
  fi_peer_rx_entry* e = p.rx;
  const uint64_t at = p.rx_as.off;
  const rd::assembly::fit fit = p.rx_as.add(h.bytes, h.flags & rd::flag_last);
  if (fit == rd::assembly::fit::overflow) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA,
              "udp RDM peer %s: more data than the message's %llu bytes; it is dropped",
              util::format_sockaddr(p.sa()).c_str(),
              static_cast<unsigned long long>(p.rx_as.len));
    drop_rx<Lock>(p, FI_EIO);
    p.rx_dropped = !(h.flags & rd::flag_last);
    return true;
  }
  if (h.bytes) {
    if (p.rx_unexp) {
      std::memcpy(static_cast<rdm_unexp*>(e->peer_context)->data + at, v.payload, h.bytes);
    } else {
      // Into the posted buffer; what does not fit is cut (FI_ETRUNC at the end).
      util::iov_copy_in(e->iov, e->count, at, v.payload, h.bytes);
    }
  }
  if (fit == rd::assembly::fit::ok) return true;
  p.rx = nullptr;
  if (fit == rd::assembly::fit::short_end) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "udp RDM peer %s: a message ended short",
              util::format_sockaddr(p.sa()).c_str());
    if (p.rx_unexp) {
      free_unexp(static_cast<rdm_unexp*>(e->peer_context));
      e->peer_context = nullptr;
      rx_.free_entry<Lock>(e);
    } else {
      fail_rx<Lock>(e, FI_EIO);
    }
    return true;
  }
  if (!p.rx_unexp) {
    finish_rx<Lock>(e);
  } else {
    // Listed first: queue may start it at once (start takes no lock we hold).
    if (!rx_.owned()) list_queued(static_cast<rdm_unexp*>(e->peer_context), e);
    rx_.queue<Lock>(e, e->flags & FI_TAGGED);
  }
  return true;
}

template <class Lock>
int rdm_endpoint::start(fi_peer_rx_entry* e) noexcept {
  // The unexpected buffer names its endpoint (under a shared context the
  // face's fid context is the context).
  auto* b = static_cast<rdm_unexp*>(e->peer_context);
  rdm_endpoint* ep = b->ep;
  ep->begin_start(b);  // counted in in_start_ until we are done
  size_t left = std::min(e->msg_size, util::iov_total(e->iov, e->count));
  const std::byte* from = b ? b->data : nullptr;
  for (size_t i = 0; i < e->count && left; ++i) {
    const size_t n = std::min(left, e->iov[i].iov_len);
    if (n) std::memcpy(e->iov[i].iov_base, from, n);
    from += n;
    left -= n;
  }
  e->peer_context = nullptr;
  ep->free_unexp(b);
  ep->finish_rx<Lock>(e);
  if (!ep->rx_.owned()) ep->in_start_.fetch_sub(1, std::memory_order_release);  // last touch
  return 0;
}

template <class Lock>
int rdm_endpoint::discard(fi_peer_rx_entry* e) noexcept {
  auto* b = static_cast<rdm_unexp*>(e->peer_context);
  rdm_endpoint* ep = b->ep;
  ep->begin_start(b);
  ep->free_unexp(b);
  e->peer_context = nullptr;
  ep->rx_.free_entry<Lock>(e);
  if (!ep->rx_.owned()) ep->in_start_.fetch_sub(1, std::memory_order_release);  // last touch
  return 0;
}

template <class Lock>
ssize_t rdm_endpoint::post_msg(const iovec* iov, void** desc, size_t count, fi_addr_t src,
                               void* context, uint64_t flags) noexcept {
  room_made();
  return srx_->post_msg<Lock>(iov, desc, count, src, context, flags);
}

template <class Lock>
ssize_t rdm_endpoint::post_tag(const iovec* iov, void** desc, size_t count, fi_addr_t src,
                               uint64_t tag, uint64_t ignore, void* context,
                               uint64_t flags) noexcept {
  room_made();
  return srx_->post_tag<Lock>(iov, desc, count, src, tag, ignore, context, flags);
}

template <class Lock>
void rdm_endpoint::reopen_refused(uint64_t now) noexcept {
  const uint32_t room = room_.load(std::memory_order_relaxed);
  if (room == room_seen_ && now - nudged_ns_ < nudge_ns) return;
  room_seen_ = room;
  nudged_ns_ = now;
  refusing_.store(false, std::memory_order_relaxed);
  // Each peer resends one datagram: taken now, or refused again (and
  // listed again) at the cost of that datagram and its answer.
  for (rdm_peer* p : refused_) {
    p->refused_listed = false;
    p->link.reopen();
    if (p->link.ack_due()) send_ack(*p);
  }
  refused_.clear();
}

template <class Lock>
void rdm_endpoint::on_datagram(const std::byte* buf, size_t n, const sockaddr_storage& from,
                               socklen_t fromlen, uint64_t now) noexcept {
  rd::view v;
  if (rd::malformed m = rd::parse(buf, n, v); m != rd::malformed::none) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "udp RDM: dropped a datagram of %zu bytes from %s: %s",
              n, util::format_sockaddr(reinterpret_cast<const sockaddr*>(&from)).c_str(),
              rd::describe(m));
    return;
  }
  rdm_peer* p = peer_from(from, fromlen);
  if (!p) return;
  auto on_ack = [&](const rd::flight& f) { acked<Lock>(*p, f); };
  rd::verdict r = p->link.receive(v, now, on_ack);
  if (r == rd::verdict::renewed && !p->waited_for()) [[unlikely]] {
    renew_peer(*p);
    r = p->link.receive(v, now, on_ack);
  } else if (r == rd::verdict::restart || r == rd::verdict::renewed) [[unlikely]] {
    // (Renewed while something of it is half-received or owed to us: it
    // cannot have dropped its link cleanly, so it restarted.)
    if (p->head || p->waited_for()) fail_peer<Lock>(*p, FI_ECONNRESET, "restarted");
    else unhold(*p), p->link.reset(next_epoch());
    r = p->link.receive(v, now, on_ack);
  }
  p->heard_ns = now;
  switch (r) {
    case rd::verdict::deliver:
      if (take_data<Lock>(*p, v)) {
        p->link.consumed();
      } else if (misaddressed_) [[unlikely]] {
        misaddressed_ = false;  // dropped, unacknowledged (take_data)
      } else {
        // No room now: the peer holds on, and hears when room may have come.
        p->link.refuse();
        if (!p->refused_listed) {
          try {
            refused_.push_back(p);
            p->refused_listed = true;
            if (refused_.size() == 1) nudged_ns_ = now;
            refusing_.store(true, std::memory_order_relaxed);
          } catch (const std::bad_alloc&) {
            // Unlisted, it is not told of room: its probes find it.
          }
        }
      }
      break;
    case rd::verdict::invalid:
      WEFT_WARN(&provider(), FI_LOG_EP_DATA,
                "udp RDM peer %s: an acknowledgement of data never sent; ignored",
                util::format_sockaddr(p->sa()).c_str());
      break;
    default: break;
  }
  if (p->link.ack_due() && !p->ack_listed) {
    try {
      ack_list_.push_back(p);
      p->ack_listed = true;
    } catch (const std::bad_alloc&) {
      send_ack(*p);
    }
  }
  if (p->head) mark_busy(*p);
}

template <class Lock>
void rdm_endpoint::progress() noexcept {
  [[maybe_unused]] auto g = guard<Lock>();
  // A CQ bound before fi_enable runs this too: datagrams wait in the socket
  // until there is an engine to match them.
  if (!rx_.face()) return;
  if (tx_deferred_head_) complete_deferred<Lock>();
  if (rx_deferred_any_.load(std::memory_order_acquire)) [[unlikely]] flush_rx_deferred<Lock>();
  uint64_t now = util::now_ns();
  if (!more_.empty()) [[unlikely]] flush_more<Lock>(now);  // sends FI_MORE held
  // Sparse traffic (a ping-pong) ends the loop at the datagram that
  // finished an operation: the next recvfrom would only say that nothing
  // more came, a system call on the answer's path. A call that finds data
  // waiting at once after such an early end (the traffic is dense) drains
  // the socket again, until a call finds at most one datagram. Manual
  // progress only: the thread of automatic progress drains what woke it.
  int got = 0;
  bool drained = true;
  for (int i = 0; i < rx_batch; ++i) {
    // (util/sys.hpp: recvmsg under ThreadSanitizer, which then orders a
    // datagram's receipt after its send: writes and atomics that a target's
    // progress thread applies before acknowledging are seen as ordered
    // before the initiator's completion; docs/decisions.md.)
    sockaddr_storage from;
    socklen_t fromlen = sizeof from;
    const ssize_t r = util::sys::recv_from(sock_.get(), rxbuf_.get(), proto::max_payload + 1,
                                           MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from),
                                           &fromlen);
    if (r < 0) break;
    if (++got == 1 && stopped_early_) dense_ = true;
    const uint32_t before = finished_.load(std::memory_order_relaxed);
    on_datagram<Lock>(rxbuf_.get(), size_t(r), from, fromlen, now);
    if (!dense_ && !auto_ && finished_.load(std::memory_order_relaxed) != before) {
      drained = false;
      break;
    }
  }
  stopped_early_ = !drained;
  if (drained && got <= 1) dense_ = false;
  answer_acks();
  if (!refused_.empty()) reopen_refused<Lock>(now);
  for (size_t i = 0; i < busy_.size();) {
    rdm_peer* p = busy_[i];
    if (p->link.in_flight()) {
      rd::tick_result t = p->link.tick(now, [&](const rd::flight& f, uint32_t seq) {
        rd::dgram h;
        p->link.stamp_resend(h, f, seq);
        return send_datagram(*p, h, *static_cast<const rdm_tx*>(f.msg), f.offset, f.bytes);
      });
      if (t == rd::tick_result::dead) fail_peer<Lock>(*p, FI_ETIMEDOUT, "no answer");
    }
    // A peer we wait for (the rest of a message, answers to our requests)
    // and do not hear from is gone.
    if (p->waited_for() && now - p->heard_ns >= rd_cfg_.peer_timeout_ns)
      fail_peer<Lock>(*p, FI_ETIMEDOUT, "silent while we wait for it");
    pump<Lock>(*p, now);
    if (!p->link.in_flight() && !p->unsent && !p->waited_for()) {
      p->link.trim();
      p->busy_at = -1;
      rdm_peer* last = busy_.back();
      busy_.pop_back();
      if (last != p) {
        busy_[i] = last;
        last->busy_at = int32_t(i);
      }
      continue;
    }
    ++i;
  }
  if (idle_ns_ && now >= next_reclaim_ns_) [[unlikely]] reclaim_idle(now);
  if (!auto_ && timer_.valid()) tick_for_sleepers(now);
}

void rdm_endpoint::renew_peer(rdm_peer& p) noexcept {
  WEFT_INFO(&provider(), FI_LOG_EP_DATA,
            "udp RDM peer %s made a fresh link to us: what we had queued goes again",
            util::format_sockaddr(p.sa()).c_str());
  unhold(p);
  p.link.renew();
  for (rdm_tx* t = p.head; t; t = t->next) t->queued = 0;
  p.unsent = p.head;
  p.rx_dropped = false;
  if (p.head) mark_busy(p);
}

// A peer's link is dropped only when it holds nothing either way and the
// peer has been silent for idle_ns_, at least twice its timeout: had it
// missed our last acknowledgement, it would have sent its data again within
// its timeout (and we would have heard it) or given up on us. So nothing it
// sent waits for an acknowledgement that only the dropped link could give,
// and its link, when it next hears our fresh one, renews (rd_link.hpp).
void rdm_endpoint::reclaim_idle(uint64_t now) noexcept {
  next_reclaim_ns_ = now + idle_ns_ / 4;
  size_t n = 0;
  for (auto& [key, p] : peers_)
    if (p.idle() && now - p.heard_ns >= idle_ns_ && !held_.holds(&p))
      p.busy_at = -2, ++n;  // marked
  if (!n) return;
  for (rdm_peer*& q : by_fi_)
    if (q && q->busy_at == -2) q = nullptr;
  last_from_ = nullptr;
  std::erase_if(peers_, [](const auto& kv) { return kv.second.busy_at == -2; });
  WEFT_INFO(&provider(), FI_LOG_EP_DATA,
            "udp RDM: idle peers' state reclaimed: %zu (idle for %llu ms; %zu peers keep state)",
            n, static_cast<unsigned long long>(idle_ns_ / 1'000'000), peers_.size());
}

// Under manual progress only the application's calls run the timers above,
// and one asleep in fi_cq_sread, fi_cntr_wait, fi_wait or on a descriptor
// it was given would sleep through a retransmission timeout: a message or
// an acknowledgement the network lost would never be sent again, and both
// ends would wait for ever. So while anything is in flight and someone may
// sleep on a bound CQ or counter, the timer in the wait set they watch ticks
// every millisecond (retransmission timeouts are 2 ms at least), and each
// tick wakes the sleeper into a pass that runs the timers. An application
// that polls never arms it: no system call on its path. One that sleeps
// between messages arms it once: it is stopped at an expiry that finds
// nothing in flight, not each time the last message is acknowledged. The
// expiry is read only once due, computed from a time taken before the timer
// was set, so a readable timer is always read and never keeps a sleeper
// spinning.
void rdm_endpoint::tick_for_sleepers(uint64_t now) noexcept {
  constexpr uint64_t period = 1'000'000;
  bool expired = false;
  if (timer_armed_ && now >= timer_next_ns_) {
    uint64_t expirations;
    expired = ::read(timer_.get(), &expirations, sizeof expirations) == sizeof expirations;
    if (expired)
      timer_next_ns_ = timer_start_ns_ + ((now - timer_start_ns_) / period + 1) * period;
  }
  if (timer_armed_ && !expired) return;
  const bool want = !busy_.empty() && sleeper_bound();
  if (want == timer_armed_) return;
  const uint64_t start = util::now_ns();
  itimerspec its{};
  if (want) its.it_value.tv_nsec = its.it_interval.tv_nsec = long(period);
  if (::timerfd_settime(timer_.get(), 0, &its, nullptr) != 0) return;
  timer_armed_ = want;
  timer_start_ns_ = start;
  timer_next_ns_ = start + period;
}

bool rdm_endpoint::sleeper_bound() const noexcept {
  for (util::cq* c : {bound_.tx_bound(), bound_.rx_bound()})
    if (c && c->may_sleep()) return true;
  for (util::cntr* c : {bound_.send_cntr.get(), bound_.recv_cntr.get(), bound_.read_cntr.get(),
                        bound_.write_cntr.get(), bound_.rem_read_cntr.get(),
                        bound_.rem_write_cntr.get()})
    if (c && c->may_sleep()) return true;
  return false;
}

// Under automatic progress: one progress call, then the timer ticks every
// millisecond while anything is in flight or half received (retransmission
// timeouts are 2 ms at least) and is off while nothing is, so an idle
// endpoint costs its thread nothing.
template <class Lock>
bool rdm_endpoint::auto_work(void* obj) noexcept {
  auto* ep = static_cast<rdm_endpoint*>(obj);
  uint64_t expirations;
  while (::read(ep->timer_.get(), &expirations, sizeof expirations) > 0) {
  }
  ep->progress<Lock>();
  [[maybe_unused]] auto g = ep->guard<Lock>();
  const bool busy = !ep->busy_.empty() || ep->tx_deferred_head_ ||
                    ep->rx_deferred_any_.load(std::memory_order_relaxed);
  if (busy != ep->timer_armed_) {
    itimerspec its{};
    if (busy) its.it_value.tv_nsec = its.it_interval.tv_nsec = 1'000'000;
    ::timerfd_settime(ep->timer_.get(), 0, &its, nullptr);
    ep->timer_armed_ = busy;
  }
  return true;
}

#define WEFT_UDP_RDM_INSTANTIATE(L)                                                              \
  template const fi_ops_msg* rdm_endpoint::msg_table<L>(bool) noexcept;                          \
  template const fi_ops_tagged* rdm_endpoint::tagged_table<L>(bool) noexcept;                    \
  template void rdm_endpoint::progress<L>() noexcept;                                            \
  template bool rdm_endpoint::auto_work<L>(void*) noexcept;                                      \
  template void rdm_endpoint::relabel<L>(bool) noexcept;                                         \
  template void rdm_endpoint::drop_rx<L>(rdm_peer&, int) noexcept;                               \
  template void rdm_endpoint::retire_receives<L>() noexcept;                                     \
  template bool rdm_endpoint::pump<L>(rdm_peer&, uint64_t) noexcept;                             \
  template void rdm_endpoint::send_or_hold<L>(rdm_peer&, uint64_t) noexcept;                     \
  template void rdm_endpoint::complete_tx<L>(rdm_tx*) noexcept;                                  \
  template void rdm_endpoint::fail_tx<L>(rdm_tx*, int) noexcept;                                 \
  template void rdm_endpoint::flush_rx_deferred<L>() noexcept;

WEFT_UDP_RDM_INSTANTIATE(util::null_lock)
WEFT_UDP_RDM_INSTANTIATE(util::mutex_lock)

}  // namespace weft::udp
