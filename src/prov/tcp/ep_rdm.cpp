// SPDX-License-Identifier: MIT
// weft — FI_EP_RDM over tcp: connections opened on demand, keyed by the AV
// address they serve.
//
// The active side connects to the peer's listening address and sends a
// hello naming its own listening address; its sends wait in the queue until
// the peer's hello answers, so no byte is written on a connection that might
// yet be given up. The passive side maps that name to an fi_addr through
// the AV (FI_SOURCE, directed receive) and answers with its own hello. When
// both ends connect at once, proto.hpp's tie-break keeps the connection
// opened by the endpoint with the lower address: the higher side moves its
// queue to the kept connection; the lower side refuses the other with
// cm_resp(FI_EALREADY), which tells the higher side to wait for the kept
// connection instead of failing.
#include "core/log.hpp"
#include "prov/tcp/tcp.hpp"
#include "util/av.hpp"
#include "util/net.hpp"
#include "util/wait.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>

#include <cerrno>
#include <cstring>

namespace weft::tcp {

namespace {

// `one_way`: we are a transmit context (proto::feature_one_way); `rx_index`:
// the receive context of the peer we mean, or (answering) the one we are.
frame hello_frame(const peer_name& me, bool one_way, uint8_t rx_index) noexcept {
  frame f{};
  f.op = proto::op::hello;
  f.minor = proto::minor_version;
  f.features = one_way ? proto::feature_one_way : 0;
  f.rx_index = rx_index;
  f.addr_len = me.len;
  std::memcpy(f.addr, me.bytes, me.len);
  return f;
}

uint64_t deadline() noexcept {
  return util::now_ns() + uint64_t(cfg().conn_timeout_ms) * 1000000u;
}

}  // namespace

void endpoint::map(conn& c, fi_addr_t a) noexcept {
  c.addr = a;
  if (a == FI_ADDR_NOTAVAIL) return;
  const uint8_t* e = bound_.av_->entry(a);
  if (!e || av_entry_size_ > sizeof c.av_entry) return;
  std::memcpy(c.av_entry, e, av_entry_size_);
  try {
    if (peers_.size() <= a) peers_.resize(a + 1, nullptr);
  } catch (...) {
    return;  // out of memory: the connection serves, unmapped
  }
  if (peers_[a] && peers_[a] != &c) peers_[a]->mapped = false;
  peers_[a] = &c;
  c.mapped = true;
}

void endpoint::unmap(conn& c) noexcept {
  if (c.mapped && c.addr < peers_.size() && peers_[c.addr] == &c) peers_[c.addr] = nullptr;
  c.mapped = false;
  if (c.rx_keyed) {
    auto it = rx_peers_.find(c.rx_dest);
    if (it != rx_peers_.end() && it->second == &c) rx_peers_.erase(it);
    c.rx_keyed = false;
  }
}

fi_addr_t endpoint::lookup(const peer_name& n) noexcept {
  util::av* av = bound_.av_.get();
  sockaddr_storage ss;
  uint8_t entry[64];
  if (!av || !sockaddr_of(n, ss) || av->codec().entry_size > sizeof entry ||
      av->codec().encode(&ss, entry) != 0)
    return FI_ADDR_NOTAVAIL;
  return av->reverse(entry);
}

void endpoint::av_changed(void* self, bool inserted_only) noexcept {
  auto* ep = static_cast<endpoint*>(self);
  ep->with_lock([&]<class Lock>() { ep->relabel<Lock>(inserted_only); });
}

// Under lock_ (lock_ -> srx -> the AV's lock). The cost is paid here, at the
// AV change, and only while a connection or a queued message lacks an
// address (or, after a remove, once over each): the data path never looks.
template <class Lock>
void endpoint::relabel(bool inserted_only) noexcept {
  [[maybe_unused]] auto g = guard<Lock>();
  util::av* av = bound_.av_.get();
  if (!av || type_ != FI_EP_RDM) return;
  for (conn* c = conns_; c; c = c->next) {
    // One opened to a receive context is found by its destination, which
    // conn_for_rx_ctx checks against the AV at each send.
    if (!c->name.len || c->rx_keyed) continue;
    if (c->addr != FI_ADDR_NOTAVAIL) {
      if (inserted_only || av->entry(c->addr)) continue;
      unmap(*c);  // its address was removed: unknown until inserted again
      c->addr = FI_ADDR_NOTAVAIL;
    }
    fi_addr_t a = lookup(c->name);
    if (a == FI_ADDR_NOTAVAIL) continue;
    c->addr = a;
    // A one-way connection names a sender and never serves our sends.
    if (!c->one_way && (a >= peers_.size() || !peers_[a])) map(*c, a);
  }
  // Under a shared context this runs over every endpoint's queued messages:
  // they share our AV (srx_ctx::attach), and each names its own endpoint.
  rx_.relabel<Lock>(queued_source, !inserted_only);
}

fi_addr_t endpoint::queued_source(fi_peer_rx_entry* e) noexcept {
  auto* b = static_cast<const unexp_buf*>(e->peer_context);
  if (!b || !b->ep || !b->from.len) return FI_ADDR_NOTAVAIL;
  endpoint& ep = *b->ep;
  fi_addr_t a = ep.lookup(b->from);
  return ep.bound_.av_ ? ep.bound_.av_->report(a) : a;
}

template <class Lock>
conn* endpoint::conn_to(fi_addr_t dest, int* err) noexcept {
  if (bound_.av_->rx_index(dest)) [[unlikely]]
    return conn_for_rx_ctx<Lock>(dest, err);
  if (dest < peers_.size()) {
    if (conn* c = peers_[dest]) {
      // fi_av_remove may have freed the address, and a later insert given
      // it to another peer: the entry must still be the one mapped.
      const uint8_t* e = bound_.av_->entry(dest);
      if (e && std::memcmp(e, c->av_entry, av_entry_size_) == 0) return c;
      unmap(*c);
      c->addr = FI_ADDR_NOTAVAIL;
    }
  }
  return connect_to<Lock>(dest, err);
}

// The first send to a peer: adopt a connection it opened to us, or open one.
template <class Lock>
conn* endpoint::connect_to(fi_addr_t dest, int* err) noexcept {
  auto* prov = &provider();
  util::av* av = bound_.av_.get();
  const uint8_t* entry = av->entry(dest);
  sockaddr_storage to{};
  if (!entry || av->codec().decode(entry, &to, sizeof to) > sizeof to) {
    WEFT_WARN(prov, FI_LOG_EP_DATA, "send to fi_addr %llu: not in the address vector",
              static_cast<unsigned long long>(dest));
    *err = to_fi(errc::inval);
    return nullptr;
  }
  peer_name want;
  if (!name_of(reinterpret_cast<sockaddr*>(&to), want)) {
    *err = to_fi(errc::inval);
    return nullptr;
  }
  for (conn* c = conns_; c; c = c->next)
    if (!c->mapped && !c->one_way && !c->rx_keyed && c->state == conn_state::connected &&
        (c->addr == FI_ADDR_NOTAVAIL || (c->standby && c->addr == dest)) && c->name == want) {
      c->standby = false;
      map(*c, dest);
      if (c->mapped) return c;
    }
  try {
    if (peers_.size() <= dest) peers_.resize(dest + 1, nullptr);
  } catch (...) {
    *err = to_fi(errc::nomem);
    return nullptr;
  }
  conn* p = open_conn(to, want, 0, err);
  if (p) map(*p, dest);
  return p;
}

conn* endpoint::open_conn(const sockaddr_storage& to, const peer_name& want, uint8_t rx_index,
                          int* err) noexcept {
  util::unique_fd s = stream_socket(to.ss_family);
  if (!s.valid()) {
    *err = to_fi(errc_of_errno(errno));
    return nullptr;
  }
  std::unique_ptr<conn> c;
  try {
    c = std::make_unique<conn>(std::move(s), true, limits_);
  } catch (...) {
    *err = to_fi(errc::nomem);
    return nullptr;
  }
  c->peer = to;
  c->name = want;
  c->deadline_ns = deadline();
  c->set_ctrl(hello_frame(local_name_, one_way_, rx_index), nullptr, 0);
  if (::connect(c->fd(), reinterpret_cast<const sockaddr*>(&to),
                util::sockaddr_len(reinterpret_cast<const sockaddr*>(&to))) != 0 &&
      errno != EINPROGRESS)
    c->connect_errno = errno;  // reported as an error completion by progress
  conn* p = adopt(std::move(c), EPOLLIN | EPOLLOUT | EPOLLRDHUP);
  arm_timer(p->deadline_ns);
  return p;
}

// A receive context of a peer: its scalable endpoint's address with the
// index added to the port (sep.cpp), over a connection of its own, found by
// the destination as the application wrote it. The AV entry is checked at
// each send, as conn_to checks a mapped one: a removed and reused address
// must not reach the old peer.
template <class Lock>
conn* endpoint::conn_for_rx_ctx(fi_addr_t dest, int* err) noexcept {
  auto* prov = &provider();
  util::av* av = bound_.av_.get();
  const uint64_t index = av->rx_index(dest);
  const fi_addr_t base = av->strip_rx(dest);
  const uint8_t* entry = av->entry(base);
  if (!entry) {
    WEFT_WARN(prov, FI_LOG_EP_DATA, "send to fi_addr %llu: not in the address vector",
              static_cast<unsigned long long>(base));
    *err = to_fi(errc::inval);
    return nullptr;
  }
  if (auto it = rx_peers_.find(dest); it != rx_peers_.end()) {
    conn* c = it->second;
    if (std::memcmp(entry, c->av_entry, av_entry_size_) == 0) return c;
    unmap(*c);  // the address was given to another peer: a new connection
  }
  sockaddr_storage to{};
  if (av->codec().decode(entry, &to, sizeof to) > sizeof to) {
    *err = to_fi(errc::inval);
    return nullptr;
  }
  const unsigned port = util::sockaddr_port(reinterpret_cast<sockaddr*>(&to));
  if (index >= max_contexts || port + index > 65535) {
    WEFT_WARN(prov, FI_LOG_EP_DATA,
              "send to receive context %llu of fi_addr %llu: a tcp scalable endpoint has at "
              "most %zu, from its port (%u) up",
              static_cast<unsigned long long>(index), static_cast<unsigned long long>(base),
              max_contexts, port);
    *err = to_fi(errc::inval);
    return nullptr;
  }
  util::set_sockaddr_port(reinterpret_cast<sockaddr*>(&to), static_cast<uint16_t>(port + index));
  peer_name want;
  if (!name_of(reinterpret_cast<sockaddr*>(&to), want)) {
    *err = to_fi(errc::inval);
    return nullptr;
  }
  // The table's node first: nothing to undo but it if the connection fails.
  decltype(rx_peers_)::iterator slot;
  try {
    slot = rx_peers_.insert_or_assign(dest, nullptr).first;
  } catch (...) {
    *err = to_fi(errc::nomem);
    return nullptr;
  }
  conn* p = open_conn(to, want, static_cast<uint8_t>(index), err);
  if (!p) {
    rx_peers_.erase(slot);
    return nullptr;
  }
  p->addr = base;  // for what is logged of it; never mapped
  std::memcpy(p->av_entry, entry, av_entry_size_);
  p->rx_keyed = true;
  p->rx_dest = dest;
  slot->second = p;
  return p;
}

void endpoint::accept_incoming() noexcept {
  for (int i = 0; i < 64; ++i) {
    sockaddr_storage from{};
    socklen_t len = sizeof from;
    int fd = ::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&from), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "accept: %s", std::strerror(errno));
      return;
    }
    util::unique_fd s{fd};
    tune_stream(fd);
    tune_local(fd);
    std::unique_ptr<conn> c;
    try {
      c = std::make_unique<conn>(std::move(s), false, limits_);
    } catch (...) {
      WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "out of memory for a connection from %s",
                describe(from).c_str());
      continue;
    }
    c->peer = from;
    c->deadline_ns = deadline();
    conn* p = adopt(std::move(c), EPOLLIN | EPOLLRDHUP);
    arm_timer(p->deadline_ns);
  }
}

template <class Lock>
void endpoint::connected(conn& c) noexcept {
  c.state = conn_state::connected;
  c.deadline_ns = 0;
  flush<Lock>(c);
}

template <class Lock>
bool endpoint::on_hello(conn& c) noexcept {
  const frame& f = c.reader.current();
  if (c.state != conn_state::handshake) {
    protocol_error<Lock>(c, "a hello on an established connection");
    return false;
  }
  peer_name n;
  n.len = f.addr_len;
  std::memcpy(n.bytes, f.addr, f.addr_len);
  if (c.active) {
    connected<Lock>(c);  // the peer keeps this connection: the queue may go
    return c.readable();
  }
  if (f.rx_index != rx_index_) {
    // The sender means another receive context than ours: an index past
    // its peer's count reached a listener that is not its peer's.
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL,
              "tcp peer %s asked for receive context %u, this endpoint is context %u: refused",
              describe(c.peer).c_str(), unsigned{f.rx_index}, unsigned{rx_index_});
    refuse<Lock>(c, FI_ECONNREFUSED);
    return false;
  }
  c.name = n;
  fi_addr_t a = lookup(n);
  c.addr = a;
  if (f.features & proto::feature_one_way) {
    // A transmit context's: it names the sender (FI_SOURCE, directed
    // receives) and carries only its operations; our sends go elsewhere.
    c.one_way = true;
    c.set_ctrl(hello_frame(local_name_, false, rx_index_), nullptr, 0);
    connected<Lock>(c);
    return c.readable();
  }
  conn* other = a < peers_.size() ? peers_[a] : nullptr;
  bool self = n == local_name_;
  if (other && other != &c && other->active && !self && local_name_ < n &&
      other->state == conn_state::connected) {
    // Ours is established: the peer answered it and sends through it while
    // it has it. So this hello is either the twin of a simultaneous connect,
    // sent before the peer took ours and closed this one (it ends at once),
    // or the peer lost ours: it restarted, and if its host crashed no end of
    // stream ever comes, ours looks alive forever. Refusing would leave a
    // restarted peer waiting for a connection from us that never comes.
    // Served, but ours stays in use until the peer sends here (on_header).
    WEFT_DBG(&provider(), FI_LOG_EP_CTRL, "tcp peer %s connected again while our connection "
             "to it is established", describe(c.peer).c_str());
    c.standby = true;
  } else if (other && other != &c && other->active && !self) {
    // Both ends connected at once: the connection the lower address opened
    // stays (proto.hpp).
    if (local_name_ < n) {
      c.addr = FI_ADDR_NOTAVAIL;
      refuse<Lock>(c, FI_EALREADY);
      return false;
    }
    if (other->state != conn_state::connected) {
      // Nothing of ours was written on it yet: its queue moves here.
      for (tx_entry* t = other->take_queue(); t;) {
        tx_entry* next = t->next;
        c.push(t);
        t = next;
      }
      retire(*other);
      other = nullptr;
    }
  }
  // This connection now serves the peer (an older established one, from a
  // peer that restarted, stays open unmapped until it ends). A connection
  // to ourselves keeps the active side mapped.
  if (a != FI_ADDR_NOTAVAIL && !c.standby && !(self && other && other != &c)) map(c, a);
  c.set_ctrl(hello_frame(local_name_, false, rx_index_), nullptr, 0);
  connected<Lock>(c);
  return c.readable();
}

template <class Lock>
void endpoint::refuse(conn& c, int status) noexcept {
  frame no{};
  no.op = proto::op::cm_resp;
  no.status = status;
  no.minor = proto::minor_version;
  c.set_ctrl(no, nullptr, 0);
  c.state = conn_state::closing;
  flush<Lock>(c);
}

template <class Lock>
bool endpoint::on_refusal(conn& c, int status) noexcept {
  if (!c.active || c.state != conn_state::handshake || status == 0) {
    protocol_error<Lock>(c, "an unexpected connection response");
    return false;
  }
  if (status == FI_EALREADY && c.name < local_name_) {
    // The peer keeps the connection it opened to us: ours waits for it,
    // its queue intact, until the deadline.
    WEFT_DBG(&provider(), FI_LOG_EP_CTRL, "tcp peer %s: simultaneous connect, waiting for the "
             "peer's connection", describe(c.peer).c_str());
    close_fd(c);
    c.state = conn_state::waiting;
    return false;
  }
  WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "tcp peer %s (fi_addr %llu) refused the connection: %s",
            describe(c.peer).c_str(), static_cast<unsigned long long>(c.addr),
            fi_strerror(status));
  fail_conn<Lock>(c, status == FI_EALREADY ? FI_ECONNREFUSED : status);
  return false;
}

#define WEFT_TCP_INSTANTIATE(L)                                        \
  template conn* endpoint::conn_to<L>(fi_addr_t, int*) noexcept;       \
  template bool endpoint::on_hello<L>(conn&) noexcept;                 \
  template bool endpoint::on_refusal<L>(conn&, int) noexcept;         \
  template void endpoint::refuse<L>(conn&, int) noexcept;

WEFT_TCP_INSTANTIATE(util::null_lock)
WEFT_TCP_INSTANTIATE(util::mutex_lock)

}  // namespace weft::tcp
