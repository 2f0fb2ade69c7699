// SPDX-License-Identifier: MIT
// weft — tcp progress: one epoll_wait over the endpoint's sockets, then
// each ready connection is written (its control frame and queued sends)
// and read (frames fed to the reader, payloads placed as they arrive).
// Runs from CQ, counter and EQ reads (manual progress), and from the
// domain's progress thread when the endpoint's socket set is ready
// (automatic progress, ep.cpp's fi_enable). Connections moved to a
// same-host stream are read and written on every call (progress_local).
#include "core/log.hpp"
#include "prov/tcp/tcp.hpp"
#include "util/sys.hpp"
#include "util/wait.hpp"
#include "util/yield.hpp"

#include <sched.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace weft::tcp {

namespace {

bool is_message(proto::op op) noexcept {
  return op == proto::op::msg || op == proto::op::msg_data || op == proto::op::tagged ||
         op == proto::op::tagged_data;
}

// RMA and atomic requests and every answer (rma.cpp).
bool is_rma(proto::op op) noexcept {
  auto v = static_cast<uint8_t>(op);
  return (v >= 0x20 && v <= 0x22) || (v >= 0x30 && v <= 0x33) || op == proto::op::ack ||
         op == proto::op::error;
}

}  // namespace

template <class Lock>
bool endpoint::run_progress() noexcept {
  [[maybe_unused]] auto g = guard<Lock>();
  if (!enabled_) return true;
  ++epoch_;
  if (!corked_.empty()) uncork_all<Lock>();
  complete_deferred<Lock>();
  // A same-host MSG connection: its stream is read (and written) on every
  // call; epoll (wake bytes, the end of the connection, deadlines) is asked
  // every epoll_every calls, or on every call while a thread may sleep (its
  // wake bytes are then read at once).
  if (conn* c = msg_conn_; c && c->local() && c->fd() >= 0) {
    bool more = progress_local<Lock>(*c, false);
    if (!wakes_on_ && ++direct_polls_ < epoll_every) {
      if (sweep_needed_) sweep();
      return more;
    }
    direct_polls_ = 0;
  }
  // One peer, nothing queued to it: read its socket directly, and ask epoll
  // (new connections, deadlines, errors) only every epoll_every calls. A
  // polled message then costs one recv instead of epoll_wait and recv.
  // (Asking epoll first once the socket was found empty, to spare the
  // socket lock a recv takes, measured 0.5 us slower per 8-byte ping-pong
  // and no faster in a stream.)
  if (conn* c = conns_; c && !c->next && !c->local() && c->state == conn_state::connected &&
                        c->tx_idle() &&
                        !c->stalled && c->fd() >= 0 && stalled_.empty() && !sweep_needed_) {
    if (++direct_polls_ < epoll_every) {
      pump<Lock>(*c);
      if (sweep_needed_) sweep();
      return true;
    }
    direct_polls_ = 0;
  }
  epoll_event evs[32];
  int n = util::sys::epoll_poll(epoll_.get(), evs, 32);
  bool timer = false;
  for (int i = 0; i < n; ++i) {
    void* p = evs[i].data.ptr;
    if (p == &timer_) {
      uint64_t expirations;
      [[maybe_unused]] ssize_t r = ::read(timer_.get(), &expirations, sizeof expirations);
      timer_at_ = 0;
      timer = true;
      continue;
    }
    if (p == &listener_) {
      accept_incoming();
      continue;
    }
    conn& c = *static_cast<conn*>(p);
    uint32_t ev = evs[i].events;
    // Closed earlier in this batch: the object lives until the sweep.
    if (c.fd() < 0 || c.state == conn_state::closed) continue;
    if (c.local()) {
      // Wake bytes, or the end of the connection.
      if (c.readable()) progress_local<Lock>(c, true);
      continue;
    }
    if ((ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)) || c.state == conn_state::connecting)
      on_writable<Lock>(c);
    if (c.readable() && c.state != conn_state::connecting &&
        (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
      pump<Lock>(c);
  }
  if (!stalled_.empty()) {
    // Connections that stopped with bytes staged (the CQ was full).
    stalled_work_.swap(stalled_);
    for (conn* c : stalled_work_) {
      c->stalled = false;
      if (c->readable()) pump<Lock>(*c);
    }
    stalled_work_.clear();
  }
  if (timer) check_deadlines<Lock>();
  if (sweep_needed_) sweep();
  return stalled_.empty() && !tx_deferred_head_;
}

template <class Lock>
bool endpoint::progress_local(conn& c, bool drain) noexcept {
  watch_sleepers(c);
  // While a thread may sleep, the socket is read empty and the pending wake
  // taken before the pipes are looked at (local_stream.hpp): a wake sent
  // after that look then stays in the socket and wakes the sleeper.
  if (!c.peer_eof && (drain || wakes_on_)) {
    int sock = c.drain_socket();
    // A peer that closes with wake bytes unread in its socket resets it:
    // for a local connection that is its end too (the frames read out of
    // the stream tell whether it was a clean one).
    if (sock == -ECONNRESET) sock = 0;
    if (sock <= 0) {
      c.peer_eof = true;
      c.eof_err = -sock;
      // Level-triggered, the end would wake every sleeper until the stream
      // is read out: from here on progress looks at the stream alone.
      unwatch(c);
    }
  }
  if (!c.tx_idle() && c.state != conn_state::closed) flush<Lock>(c);
  if (c.stalled) {  // retried here, on every call, not only from epoll's turn
    std::erase(stalled_, &c);
    c.stalled = false;
  }
  if (c.readable()) pump<Lock>(c);
  // The end of the connection once every frame before it is in: not while
  // the CQ is full or the stream still holds bytes.
  if (c.peer_eof && c.readable() && !c.stalled && c.stream.readable() == 0)
    on_eof<Lock>(c, c.eof_err);
  // Mid-transfer and the peer has not moved for a while: it may be waiting
  // for this core. A pipe starts at 16 KiB, so until it grows a large
  // message is dozens of such turns; spinning through a time slice for each
  // made a 1 MiB ping-pong ~100x slower with two busy processes beside the
  // pair (docs/decisions.md).
  if (c.stream_waits >= stream_yield_after) {
    c.stream_waits = 0;
    util::give_up_core();
  }
  return !c.stalled && !tx_deferred_head_;
}

template <class Lock>
void endpoint::pump(conn& c) noexcept {
  // A bounded number of system calls per connection and call; epoll is
  // level-triggered, so what is left brings the next progress back here.
  // A read that returned less than it asked for emptied the socket: the
  // staged bytes are handled, then no further read is tried (it would only
  // answer EAGAIN).
  int budget = 16;
  bool drained = false;
  while (c.readable()) {
    if (c.reader.at_boundary() && rx_blocked<Lock>()) {
      stall(c);
      return;
    }
    if (c.staged_len()) {
      auto r = c.reader.feed(c.staged(), c.staged_len());
      c.consume(r.used);
      if (!handle<Lock>(c, r.st)) return;
      continue;
    }
    // (A connection that moved to its stream in this call reads on.)
    if ((drained && !c.local()) || budget-- == 0) return;
    ssize_t n;
    std::span<std::byte> w = c.reader.recv_window();
    if (w.size() >= conn::staging / 2) {
      // A large payload goes from the socket straight into its buffer.
      n = c.read_into(w.data(), w.size());
      if (n > 0) {
        // (A short read from the stream is not an empty one: its writer
        // may be copying in the rest right now.)
        drained = !c.local() && static_cast<size_t>(n) < w.size();
        if (!handle<Lock>(c, c.reader.recv_commit(static_cast<size_t>(n)))) return;
        continue;
      }
    } else {
      size_t space = conn::staging;  // fill() starts from an empty buffer here
      n = c.fill();
      if (n > 0) {
        drained = !c.local() && static_cast<size_t>(n) < space;
        continue;
      }
    }
    if (n == -EAGAIN || n == -EWOULDBLOCK) return;
    // A local connection ends on its socket (run_progress), not here: its
    // stream says -EIO only for a corrupt peer.
    on_eof<Lock>(c, n == 0 ? 0 : static_cast<int>(-n));
    return;
  }
}

template <class Lock>
bool endpoint::handle(conn& c, frame_reader::status st) noexcept {
  switch (st) {
    case frame_reader::status::more: return true;
    case frame_reader::status::header: return on_header<Lock>(c);
    case frame_reader::status::payload: next_target(c); return true;
    case frame_reader::status::done: return on_done<Lock>(c);
    case frame_reader::status::error: protocol_error<Lock>(c, nullptr); return false;
  }
  return false;
}

template <class Lock>
bool endpoint::on_header(conn& c) noexcept {
  const frame& f = c.reader.current();
  if (c.standby) {
    // The peer reconnected and sends here: ours to it is stale (on_hello).
    c.standby = false;
    if (c.addr != FI_ADDR_NOTAVAIL) map(c, c.addr);
  }
  if (c.state == conn_state::draining) {
    // After a shutdown whatever arrives is dropped.
  } else if (is_message(f.op)) {
    if (!on_message<Lock>(c)) return false;
  } else if (is_rma(f.op)) {
    if (!on_rma_header<Lock>(c)) return false;
  } else if (f.op == proto::op::cm_req || f.op == proto::op::cm_resp) {
    c.cm_len = static_cast<uint16_t>(f.payload_len);  // <= cm_data_max: the reader checked
    if (f.payload_len) {
      c.reader.set_target(c.cm_data, f.payload_len);
      return true;
    }
  } else if (f.op != proto::op::hello && f.op != proto::op::shutdown) {
    protocol_error<Lock>(c, "an operation this endpoint does not accept");
    return false;
  }
  // A frame without payload ends on the next feed; ask for it now.
  if (f.payload_len == 0) return handle<Lock>(c, c.reader.feed(nullptr, 0).st);
  next_target(c);
  return true;
}

template <class Lock>
bool endpoint::on_done(conn& c) noexcept {
  const frame& f = c.reader.current();
  if (c.state == conn_state::draining) return true;
  if (is_message(f.op)) {
    message_done<Lock>(c);
    // Delivery complete: the sender waits for this (proto.hpp).
    if (f.flags & proto::flag_ack)
      return answer<Lock>(c, proto::op::ack, f.msg_id, static_cast<uint8_t>(f.op), 0, nullptr, 0);
    return true;
  }
  if (is_rma(f.op)) return on_rma_done<Lock>(c);
  switch (f.op) {
    case proto::op::hello:
      if (type_ == FI_EP_RDM) return on_hello<Lock>(c);
      break;
    case proto::op::cm_resp:
      if (type_ == FI_EP_MSG) return on_cm_resp<Lock>(c);
      return on_refusal<Lock>(c, f.status);
    case proto::op::cm_req:
      if (type_ == FI_EP_RDM && !c.active && c.state == conn_state::handshake) {
        // A connecting FI_EP_MSG endpoint: refuse it in its own protocol.
        WEFT_INFO(&provider(), FI_LOG_EP_CTRL, "refusing a connection request from %s: this "
                  "is an FI_EP_RDM endpoint", describe(c.peer).c_str());
        refuse<Lock>(c, FI_ECONNREFUSED);
        return false;
      }
      break;
    case proto::op::shutdown:
      if (type_ == FI_EP_MSG && c.state == conn_state::connected) {
        msg_lost<Lock>(c, FI_ECANCELED, true);
        return c.readable();
      }
      break;
    default:
      break;
  }
  protocol_error<Lock>(c, "a control frame out of place");
  return false;
}

template <class Lock>
void endpoint::on_writable(conn& c) noexcept {
  if (c.state == conn_state::connecting) {
    int err = c.connect_errno;
    if (!err) {
      socklen_t len = sizeof err;
      if (::getsockopt(c.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    }
    if (err) {
      setup_failed<Lock>(c, err);
      return;
    }
    tune_local(c.fd());
    c.state = conn_state::handshake;
    if (type_ == FI_EP_MSG) send_cm_req(c);
  }
  flush<Lock>(c);
}

template <class Lock>
void endpoint::setup_failed(conn& c, int err) noexcept {
  errc e = errc_of_errno(err);
  if (e == errc::connreset || e == errc::io) e = errc::connrefused;
  if (type_ == FI_EP_MSG) {
    WEFT_INFO(&provider(), FI_LOG_EP_CTRL, "connection to %s failed: %s",
              describe(c.peer).c_str(), std::strerror(err));
    cm_error(static_cast<int>(e), nullptr, 0);
    shutdown_ = true;
    retire(c);
    return;
  }
  WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "tcp: cannot connect to %s (fi_addr %llu): %s",
            describe(c.peer).c_str(), static_cast<unsigned long long>(c.addr),
            err == ETIMEDOUT ? "no connection within the deadline" : std::strerror(err));
  fail_conn<Lock>(c, static_cast<int>(e));
}

template <class Lock>
void endpoint::on_eof(conn& c, int err) noexcept {
  frame_error fe = err ? frame_error::none : c.reader.end_of_stream();
  bool clean = !err && fe == frame_error::none;
  switch (c.state) {
    case conn_state::connecting:
    case conn_state::handshake:
      if (c.active) {
        setup_failed<Lock>(c, err ? err : ECONNREFUSED);
      } else {
        WEFT_INFO(&provider(), FI_LOG_EP_CTRL, "tcp peer %s left during the handshake",
                  describe(c.peer).c_str());
        retire(c);
      }
      return;
    case conn_state::connected:
      if (!clean && !c.standby)
        WEFT_WARN(&provider(), FI_LOG_EP_DATA, "tcp peer %s: connection lost: %s",
                  describe(c.peer).c_str(), err ? std::strerror(err) : to_string(fe));
      if (type_ == FI_EP_MSG) {
        msg_lost<Lock>(c, clean ? FI_ECANCELED : FI_EIO, clean);
        retire(c);
      } else {
        if (clean && (c.rx || !c.tx_empty()))
          WEFT_WARN(&provider(), FI_LOG_EP_DATA,
                    "tcp peer %s closed the connection with operations outstanding",
                    describe(c.peer).c_str());
        fail_conn<Lock>(c, FI_ECONNRESET);
      }
      return;
    default:  // draining, closing, accepting: nothing is owed to anyone
      retire(c);
      return;
  }
}

template <class Lock>
void endpoint::protocol_error(conn& c, const char* what) noexcept {
  frame_error fe = c.reader.error();
  if (fe != frame_error::none)
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "tcp peer %s: %s (value %llu); closing the connection",
              describe(c.peer).c_str(), to_string(fe),
              static_cast<unsigned long long>(c.reader.error_value()));
  else
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "tcp peer %s: %s; closing the connection",
              describe(c.peer).c_str(), what ? what : "protocol error");
  if (fe == frame_error::bad_version && !c.active && c.state == conn_state::handshake) {
    // Another major version: refuse it in a frame every version reads.
    frame no{};
    no.op = proto::op::cm_resp;
    no.status = FI_ENOPROTOOPT;
    no.minor = proto::minor_version;
    tx_entry* none = nullptr;
    int e = 0;
    if (c.set_ctrl(no, nullptr, 0)) c.flush(false, &none, &e);
  }
  if (type_ == FI_EP_MSG) {
    if (c.state == conn_state::connected) {
      msg_lost<Lock>(c, FI_EIO, false);
    } else if (c.active && c.state == conn_state::handshake) {
      cm_error(FI_ECONNREFUSED, nullptr, 0);
      shutdown_ = true;
    }
    fail_conn<Lock>(c, FI_ECANCELED);
    return;
  }
  fail_conn<Lock>(c, FI_EIO);
}

template <class Lock>
void endpoint::check_deadlines() noexcept {
  uint64_t now = util::now_ns(), next = 0;
  for (conn* c = conns_; c; c = c->next) {
    if (!c->deadline_ns || c->state == conn_state::closed) continue;
    if (c->deadline_ns > now) {
      next = next ? std::min(next, c->deadline_ns) : c->deadline_ns;
      continue;
    }
    if (c->active) {
      setup_failed<Lock>(*c, ETIMEDOUT);
    } else {
      WEFT_INFO(&provider(), FI_LOG_EP_CTRL, "tcp peer %s: no handshake within %d ms",
                describe(c->peer).c_str(), cfg().conn_timeout_ms);
      retire(*c);
    }
  }
  arm_timer(next);
}

#define WEFT_TCP_INSTANTIATE(L)                           \
  template bool endpoint::run_progress<L>() noexcept;     \
  template void endpoint::pump<L>(conn&) noexcept;        \
  template void endpoint::setup_failed<L>(conn&, int) noexcept; \
  template void endpoint::protocol_error<L>(conn&, const char*) noexcept;

WEFT_TCP_INSTANTIATE(util::null_lock)
WEFT_TCP_INSTANTIATE(util::mutex_lock)

}  // namespace weft::tcp
