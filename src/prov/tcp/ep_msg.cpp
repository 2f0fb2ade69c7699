// SPDX-License-Identifier: MIT
// weft — FI_EP_MSG over tcp: fi_connect / fi_accept / fi_shutdown and the
// connection events (fi_cm(3)).
//
// The active side sends cm_req with the application's private data and
// reports FI_CONNECTED (with the accepting side's data) when cm_resp
// accepts, or an FI_ECONNREFUSED error entry carrying the rejecting side's
// data. The passive side's endpoint takes over the socket its passive
// endpoint accepted, answers cm_resp from fi_accept and reports FI_CONNECTED
// once that frame is out. Either side's fi_shutdown sends `shutdown` and
// half-closes; the peer reports FI_SHUTDOWN. A shut-down endpoint completes
// everything outstanding with FI_ECANCELED (fi_shutdown before it returns),
// and every CQ write wakes a thread asleep in fi_cq_sread.
#include "core/log.hpp"
#include "prov/tcp/tcp.hpp"
#include "util/eq.hpp"
#include "util/net.hpp"
#include "util/wait.hpp"

#include <sys/epoll.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace weft::tcp {

void endpoint::cm_event(uint32_t event, const void* data, size_t len) noexcept {
  util::eq* eq = bound_.eq_.get();
  if (!eq) return;
  alignas(fi_eq_cm_entry) std::byte buf[sizeof(fi_eq_cm_entry) + proto::cm_data_max];
  len = std::min(len, proto::cm_data_max);
  fi_eq_cm_entry entry{};
  entry.fid = &fid;
  entry.info = nullptr;
  std::memcpy(buf, &entry, sizeof entry);
  if (len) std::memcpy(buf + sizeof entry, data, len);
  if (eq->write_event(event, buf, sizeof entry + len, 0) != 0)
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "the EQ is full: connection event %u lost", event);
}

void endpoint::cm_error(int err, const void* data, size_t len) noexcept {
  util::eq* eq = bound_.eq_.get();
  if (!eq) return;
  fi_eq_err_entry e{};
  e.fid = &fid;
  e.context = fid.context;
  e.err = err;
  e.prov_errno = err;
  e.err_data = len ? const_cast<void*>(data) : nullptr;
  e.err_data_size = len;
  if (eq->write_error(e) != 0)
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "the EQ is full: connection error %d lost", err);
}

int endpoint::connect(const void* addr, const void* param, size_t len) {
  auto* prov = &provider();
  if (type_ != FI_EP_MSG) return to_fi(errc::nosys);
  auto* sa = static_cast<const sockaddr*>(addr);
  if (!sa || !util::sockaddr_len(sa)) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_connect: the address is not an IP address");
    return to_fi(errc::inval);
  }
  if (int r = check_cm_data("fi_connect", param, len)) return r;
  if (connect_called_ || msg_conn_) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_connect: the endpoint is already connected or connecting");
    return to_fi(errc::isconn);
  }
  if (int r = enable(); r != 0) return r;
  return with_lock([&]<class Lock>() -> int {
    [[maybe_unused]] auto g = guard<Lock>();
    util::unique_fd s = stream_socket(sa->sa_family);
    if (!s.valid()) return to_fi(errc_of_errno(errno));
    // The source may be a port a previous connection left in TIME_WAIT.
    int one = 1;
    if (src_set_) ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (src_set_ &&
        ::bind(s.get(), reinterpret_cast<sockaddr*>(&src_), util::sockaddr_len(
                   reinterpret_cast<sockaddr*>(&src_))) != 0) {
      int e = errno;
      WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_connect: cannot bind to %s: %s",
                describe(src_).c_str(), std::strerror(e));
      return to_fi(errc_of_errno(e));
    }
    std::unique_ptr<conn> c = std::make_unique<conn>(std::move(s), true, limits_);
    std::memcpy(&c->peer, sa, util::sockaddr_len(sa));
    // cm_req is built once the socket is connected (send_cm_req): only then
    // is it known whether the peer is on this host.
    c->cm_len = static_cast<uint16_t>(len);
    if (len) std::memcpy(c->cm_data, param, len);
    c->deadline_ns = util::now_ns() + uint64_t(cfg().conn_timeout_ms) * 1000000u;
    if (::connect(c->fd(), sa, util::sockaddr_len(sa)) != 0 && errno != EINPROGRESS)
      c->connect_errno = errno;  // reported on the EQ by progress
    msg_conn_ = adopt(std::move(c), EPOLLIN | EPOLLOUT | EPOLLRDHUP);
    connect_called_ = true;
    arm_timer(msg_conn_->deadline_ns);
    return 0;
  });
}

int endpoint::accept(const void* param, size_t len) {
  auto* prov = &provider();
  if (type_ != FI_EP_MSG) return to_fi(errc::nosys);
  if (int r = check_cm_data("fi_accept", param, len)) return r;
  if (!msg_conn_ || msg_conn_->active) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_accept: the endpoint was not opened for a connection "
              "request (info->handle)");
    return to_fi(errc::opbadstate);
  }
  if (int r = enable(); r != 0) return r;
  return with_lock([&]<class Lock>() -> int {
    [[maybe_unused]] auto g = guard<Lock>();
    conn& c = *msg_conn_;
    if (c.state != conn_state::accepting) {
      WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_accept: %s", c.state == conn_state::closed
                ? "the peer gave up the connection" : "already accepted");
      return to_fi(c.state == conn_state::closed ? errc::connaborted : errc::opbadstate);
    }
    frame resp{};
    resp.op = proto::op::cm_resp;
    resp.minor = proto::minor_version;
    if (attach_stream(c)) resp.features = proto::feature_local_stream;
    c.set_ctrl(resp, param, len);
    c.state = conn_state::connected;
    c.event_pending = true;  // FI_CONNECTED once cm_resp has left
    flush<Lock>(c);
    return 0;
  });
}

template <class Lock>
bool endpoint::on_cm_resp(conn& c) noexcept {
  const frame& f = c.reader.current();
  if (!c.active || c.state != conn_state::handshake) {
    protocol_error<Lock>(c, "an unexpected connection response");
    return false;
  }
  bool offered = c.stream.valid();
  c.stream_memfd.reset();  // answered: the peer attached or never will
  if (f.status == 0) {
    if (offered && (f.features & proto::feature_local_stream)) {
      // After its cm_resp the peer writes only wake bytes to the socket (one
      // may follow at once, after a shutdown frame): drop any read with it.
      c.consume(c.staged_len());
      c.use_stream();
      // A thread may already sleep on a bound CQ: ask for wake bytes before
      // the stream is first looked at (pump reads on after this frame).
      watch_sleepers(c);
    } else if (offered) {
      c.stream = local_stream{};
    }
    c.state = conn_state::connected;
    c.deadline_ns = 0;
    cm_event(FI_CONNECTED, c.cm_data, c.cm_len);
    flush<Lock>(c);
    return c.readable();
  }
  if (offered) c.stream = local_stream{};
  WEFT_INFO(&provider(), FI_LOG_EP_CTRL, "connection to %s refused: %s",
            describe(c.peer).c_str(), fi_strerror(f.status));
  cm_error(f.status, c.cm_data, c.cm_len);
  shutdown_ = true;
  retire(c);
  return false;
}

// ---- the same-host stream (local_stream.hpp, proto::feature_local_stream) ----

bool endpoint::stream_allowed(const conn& c) const noexcept {
  // Manual progress only: the thread of automatic progress sleeps in epoll
  // and would need a wake byte for every frame, which is the socket's cost.
  return cfg().local_stream && domain_->progress() == FI_PROGRESS_MANUAL &&
         same_host_socket(c.fd());
}

void endpoint::send_cm_req(conn& c) noexcept {
  frame req{};
  req.op = proto::op::cm_req;
  req.minor = proto::minor_version;
  if (stream_allowed(c)) {
    uint64_t cookie = 0;
    util::unique_fd memfd;
    if (::getrandom(&cookie, sizeof cookie, 0) == sizeof cookie &&
        local_stream::create(local_pipe_bytes, local_pipe_max_bytes, cookie, c.stream, memfd) == errc::ok) {
      req.features = proto::feature_local_stream;
      req.local_pid = static_cast<uint32_t>(::getpid());
      req.local_fd = memfd.get();
      req.local_cookie = cookie;
      c.stream_memfd = std::move(memfd);
    } else {
      WEFT_INFO(&provider(), FI_LOG_EP_CTRL, "tcp: no same-host stream to %s (%s): the "
                "connection stays on the socket", describe(c.peer).c_str(), std::strerror(errno));
    }
  }
  c.set_ctrl(req, c.cm_data, c.cm_len);
}

bool endpoint::attach_stream(conn& c) noexcept {
  if (!c.offer_pid || !stream_allowed(c)) return false;
  errc e = local_stream::attach(static_cast<pid_t>(c.offer_pid), c.offer_fd, c.offer_cookie,
                                c.stream);
  if (e != errc::ok) {
    // Another user, another PID namespace, a peer that lied: the socket.
    WEFT_INFO(&provider(), FI_LOG_EP_CTRL, "tcp: cannot attach to the same-host stream of %s "
              "(pid %u, fd %d): %s; the connection stays on the socket",
              describe(c.peer).c_str(), c.offer_pid, c.offer_fd, fi_strerror(static_cast<int>(e)));
    c.stream = local_stream{};
    return false;
  }
  // Our sizes, not ones the peer picks.
  if (c.stream.capacity() != local_pipe_bytes || c.stream.max_capacity() != local_pipe_max_bytes) {
    WEFT_INFO(&provider(), FI_LOG_EP_CTRL, "tcp: the same-host stream of %s has pipes of %zu "
              "bytes growing to %zu, not %zu to %zu; the connection stays on the socket",
              describe(c.peer).c_str(), c.stream.capacity(), c.stream.max_capacity(),
              local_pipe_bytes, local_pipe_max_bytes);
    c.stream = local_stream{};
    return false;
  }
  c.use_stream_after_ctrl();
  // A thread may already sleep on a bound CQ: the peer, which writes only
  // after it read our cm_resp, must see that it should send wake bytes.
  watch_sleepers(c);
  return true;
}

void endpoint::watch_sleepers(conn& c) noexcept {
  bool want = false;
  for (util::cq* q : {bound_.tx_bound(), bound_.rx_bound()})
    if (q && q->may_sleep()) want = true;
  for (util::cntr* n : {bound_.send_cntr.get(), bound_.recv_cntr.get(), bound_.read_cntr.get(),
                        bound_.write_cntr.get(), bound_.rem_read_cntr.get(),
                        bound_.rem_write_cntr.get()})
    if (n && n->may_sleep()) want = true;
  wakes_on_ = want;
  if (want != c.stream_wakes) {
    c.stream_wakes = want;
    c.stream.want_wakes(want);
  }
}

// The connection is over (peer's shutdown, end of stream, an error): once,
// FI_SHUTDOWN, and every outstanding operation completes with FI_ECANCELED
// (`rx_err` for a receive cut in the middle). What the peer still sends is
// dropped until it closes.
template <class Lock>
void endpoint::msg_lost(conn& c, int rx_err, bool graceful) noexcept {
  if (shutdown_) return;
  shutdown_ = true;
  if (graceful)
    WEFT_INFO(&provider(), FI_LOG_EP_CTRL, "tcp peer %s shut the connection down",
              describe(c.peer).c_str());
  if (fi_peer_rx_entry* e = std::exchange(c.rx, nullptr)) {
    if (c.rx_unexp) {
      free_unexp<Lock>(static_cast<unexp_buf*>(e->peer_context));
      e->peer_context = nullptr;
      rx_.free_entry<Lock>(e);
    } else {
      fail_rx<Lock>(e, rx_err);
    }
  }
  for (tx_entry* t = c.take_queue(); t;) {
    tx_entry* next = t->next;
    fail_tx<Lock>(t, FI_ECANCELED);
    t = next;
  }
  fail_awaiting<Lock>(c, FI_ECANCELED);
  // The receives posted to a shared context are the context's, not this
  // connection's: they stay posted for the other endpoints.
  if (srx_) srx_->cancel_all<Lock>();
  cm_event(FI_SHUTDOWN, nullptr, 0);
  if (c.fd() >= 0) ::shutdown(c.fd(), SHUT_WR);
  c.state = conn_state::draining;
  want_out(c, false);
}

int endpoint::shutdown(uint64_t flags) {
  auto* prov = &provider();
  if (type_ != FI_EP_MSG) return to_fi(errc::nosys);
  if (flags) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "fi_shutdown: flags must be 0");
    return to_fi(errc::badflags);
  }
  return with_lock([&]<class Lock>() -> int {
    [[maybe_unused]] auto g = guard<Lock>();
    conn* c = msg_conn_;
    if (!c || shutdown_) return c ? 0 : to_fi(errc::notconn);
    uncork_all<Lock>();  // sends gathered before the shutdown go first
    if (c->state != conn_state::connected) {
      // Still connecting, or never accepted: abandon it.
      shutdown_ = true;
      if (srx_) srx_->cancel_all<Lock>();
      retire(*c);
      return 0;
    }
    shutdown_ = true;
    // A frame half written cannot be followed by another: then the end of
    // the stream alone tells the peer.
    bool clean = c->at_frame_boundary();
    if (fi_peer_rx_entry* e = std::exchange(c->rx, nullptr)) {
      if (c->rx_unexp) {
        free_unexp<Lock>(static_cast<unexp_buf*>(e->peer_context));
        e->peer_context = nullptr;
        rx_.free_entry<Lock>(e);
      } else {
        fail_rx<Lock>(e, FI_ECANCELED);
      }
    }
    for (tx_entry* t = c->take_queue(); t;) {
      tx_entry* next = t->next;
      fail_tx<Lock>(t, FI_ECANCELED);
      t = next;
    }
    fail_awaiting<Lock>(*c, FI_ECANCELED);
    if (srx_) srx_->cancel_all<Lock>();  // a shared context's stay posted
    frame bye{};
    bye.op = proto::op::shutdown;
    if (clean && c->set_ctrl(bye, nullptr, 0)) {
      tx_entry* none = nullptr;
      int err = 0;
      c->flush(false, &none, &err);
    }
    if (c->fd() >= 0) ::shutdown(c->fd(), SHUT_WR);
    c->state = conn_state::draining;
    want_out(*c, false);
    return 0;
  });
}

#define WEFT_TCP_INSTANTIATE(L)                                       \
  template bool endpoint::on_cm_resp<L>(conn&) noexcept;              \
  template void endpoint::msg_lost<L>(conn&, int, bool) noexcept;

WEFT_TCP_INSTANTIATE(util::null_lock)
WEFT_TCP_INSTANTIATE(util::mutex_lock)

}  // namespace weft::tcp
