// SPDX-License-Identifier: MIT
// weft — one tcp connection: a non-blocking socket, the control frame and
// the transmit queue going out (gathered into one sendmsg), a staging
// buffer and the frame reader coming in.
#include "core/log.hpp"
#include "prov/tcp/tcp.hpp"
#include "util/ip_codec.hpp"
#include "util/net.hpp"
#include "util/sys.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

namespace weft::tcp {

// ---- addresses ----

bool peer_name::operator==(const peer_name& o) const noexcept {
  return len == o.len && std::memcmp(bytes, o.bytes, len) == 0;
}

bool peer_name::operator<(const peer_name& o) const noexcept {
  int c = std::memcmp(bytes, o.bytes, std::min(len, o.len));
  return c < 0 || (c == 0 && len < o.len);
}

bool name_of(const sockaddr* sa, peer_name& out) noexcept {
  const util::av_codec* codec = sa->sa_family == AF_INET    ? &util::ipv4_codec
                                : sa->sa_family == AF_INET6 ? &util::ipv6_codec
                                                            : nullptr;
  if (!codec || codec->entry_size > sizeof out.bytes) return false;
  if (codec->encode(sa, out.bytes) != 0) return false;
  out.len = static_cast<uint8_t>(codec->entry_size);
  return true;
}

bool sockaddr_of(const peer_name& n, sockaddr_storage& out) noexcept {
  const util::av_codec* codec = n.len == util::ipv4_entry_size   ? &util::ipv4_codec
                                : n.len == util::ipv6_entry_size ? &util::ipv6_codec
                                                                 : nullptr;
  if (!codec) return false;
  std::memset(&out, 0, sizeof out);
  return codec->decode(n.bytes, &out, sizeof out) <= sizeof out;
}

std::string describe(const sockaddr_storage& ss) {
  if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) return "an unknown peer";
  return util::format_sockaddr(reinterpret_cast<const sockaddr*>(&ss));
}

errc errc_of_errno(int e) noexcept {
  switch (e) {
    case EAGAIN: return errc::again;
    case ECONNREFUSED: return errc::connrefused;
    case ECONNRESET:
    case EPIPE: return errc::connreset;
    case ECONNABORTED: return errc::connaborted;
    case ETIMEDOUT: return errc::timedout;
    case ENETUNREACH: return errc::netunreach;
    case EHOSTUNREACH: return errc::hostunreach;
    case ENETDOWN: return errc::netdown;
    case EHOSTDOWN: return errc::hostdown;
    case EADDRINUSE: return errc::addrinuse;
    case EADDRNOTAVAIL: return errc::addrnotavail;
    case EACCES:
    case EPERM: return errc::access;
    case EMFILE:
    case ENFILE: return errc::mfile;
    case ENOMEM:
    case ENOBUFS: return errc::nomem;
    default: return errc::io;
  }
}

// ---- sockets ----

util::unique_fd stream_socket(int family) noexcept {
  util::unique_fd s{::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
  if (!s.valid()) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "cannot open a TCP socket: %s", std::strerror(errno));
    return s;
  }
  tune_stream(s.get());
  return s;
}

void tune_stream(int fd) noexcept {
  // Small messages leave at once: the provider gathers what it queues itself.
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int idle = cfg().keepalive_s;
  if (idle <= 0) return;
  // Idle for `idle` s: three probes `interval` s apart, then the kernel
  // fails the socket (ETIMEDOUT on the next read or poll). Data unacknowledged
  // for as long fails it the same way.
  int interval = std::max(1, idle / 2), probes = 3;
  unsigned user_timeout_ms = static_cast<unsigned>(idle + probes * interval) * 1000u;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
}

namespace {

// Whether a connection from `self` to `peer` stays inside this host.
bool same_host(const sockaddr_storage& self, const sockaddr_storage& peer) noexcept {
  if (self.ss_family != peer.ss_family) return false;
  if (peer.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(self).sin_addr;
    const auto& b = reinterpret_cast<const sockaddr_in&>(peer).sin_addr;
    return a.s_addr == b.s_addr || (ntohl(b.s_addr) >> 24) == 127;
  }
  if (peer.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(self).sin6_addr;
    const auto& b = reinterpret_cast<const sockaddr_in6&>(peer).sin6_addr;
    bool mapped_loopback = IN6_IS_ADDR_V4MAPPED(&b) && b.s6_addr[12] == 127;
    return IN6_IS_ADDR_LOOPBACK(&b) || mapped_loopback || std::memcmp(&a, &b, sizeof a) == 0;
  }
  return false;
}

}  // namespace

bool same_host_socket(int fd) noexcept {
  sockaddr_storage self{}, peer{};
  socklen_t a = sizeof self, b = sizeof peer;
  return ::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &a) == 0 &&
         ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &b) == 0 && same_host(self, peer);
}

void tune_local(int fd) noexcept {
  const std::string& cc = cfg().local_cc;
  if (cc.empty() || !same_host_socket(fd)) return;
  auto len = static_cast<socklen_t>(cc.size());
  if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc.data(), len) != 0)
    WEFT_INFO(&provider(), FI_LOG_EP_CTRL,
              "cannot use congestion control \"%s\" (FI_TCP_LOCAL_CC) within the host: %s",
              cc.c_str(), std::strerror(errno));
}

int try_listen(const sockaddr* addr, int backlog, util::unique_fd& out) noexcept {
  util::unique_fd s = stream_socket(addr->sa_family);
  if (!s.valid()) return errno;
  int one = 1;
  ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s.get(), addr, util::sockaddr_len(addr)) != 0 || ::listen(s.get(), backlog) != 0)
    return errno;
  out = std::move(s);
  return 0;
}

errc listen_socket(const sockaddr* addr, int backlog, util::unique_fd& out) noexcept {
  if (int e = try_listen(addr, backlog, out)) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "cannot listen on %s: %s",
              util::format_sockaddr(addr).c_str(), std::strerror(e));
    return errc_of_errno(e);
  }
  return errc::ok;
}

tx_pool::tx_pool(size_t n)
    : slab_(std::make_unique_for_overwrite<storage[]>(n)), size_(n), avail_(n) {}

// ---- the connection ----

// What an idle connection costs in this process: the object and its staging
// buffer (the transmit entries belong to the endpoint's pool, the socket
// buffers to the kernel). Kept under 64 KiB so thousands of peers stay cheap.
static_assert(sizeof(conn) + conn::staging <= 64 * 1024);
// A same-host FI_EP_MSG connection adds its stream (one file both ends map):
// idle, only each pipe's first local_pipe_bytes are reserved; the rest of a
// pipe's span is a hole until a burst grows it (local_stream.hpp).
static_assert(sizeof(conn) + conn::staging + local_layout::data_offset + 2 * local_pipe_bytes <=
              64 * 1024);
static_assert(std::has_single_bit(local_pipe_max_bytes) &&
              local_pipe_bytes <= local_pipe_max_bytes &&
              local_pipe_max_bytes <= local_layout::max_pipe);

conn::conn(util::unique_fd s, bool is_active, const frame_limits& lim)
    : reader(lim),
      state(is_active ? conn_state::connecting : conn_state::handshake),
      active(is_active),
      sock_(std::move(s)),
      rx_buf_(std::make_unique_for_overwrite<std::byte[]>(staging)) {}  // read only as far as recv wrote

void conn::close_socket() noexcept { sock_.reset(); }

bool conn::set_ctrl(const frame& f, const void* data, size_t len) noexcept {
  if (ctrl_pending() || len > proto::cm_data_max) return false;
  frame g = f;
  g.payload_len = static_cast<uint32_t>(len);
  size_t n = build_header(g, {ctrl_, proto::max_hdr_len});
  if (n == 0) return false;
  if (len) std::memcpy(ctrl_ + n, data, len);
  ctrl_len_ = static_cast<uint16_t>(n + len);
  ctrl_off_ = 0;
  return true;
}

bool conn::at_frame_boundary() const noexcept {
  if (ctrl_off_ != 0 && ctrl_pending()) return false;
  // The head entry's header iovec is untouched until its first byte leaves.
  return !tx_head_ || (tx_head_->first == 0 && tx_head_->iov[0].iov_base == tx_head_->hdr);
}

void conn::push(tx_entry* t) noexcept {
  t->next = nullptr;
  if (tx_tail_)
    tx_tail_->next = t;
  else
    tx_head_ = t;
  tx_tail_ = t;
}

void conn::await(tx_entry* t) noexcept {
  t->next = nullptr;
  if (awaiting_tail)
    awaiting_tail->next = t;
  else
    awaiting = t;
  awaiting_tail = t;
}

tx_entry* conn::answered(uint32_t id) noexcept {
  // Answers come in the order of their requests unless one failed early, so
  // the head is the one almost always.
  tx_entry* prev = nullptr;
  for (tx_entry* t = awaiting; t; prev = t, t = t->next) {
    if (t->msg_id != id) continue;
    (prev ? prev->next : awaiting) = t->next;
    if (awaiting_tail == t) awaiting_tail = prev;
    t->next = nullptr;
    return t;
  }
  return nullptr;
}

tx_entry* conn::cancel(void* context) noexcept {
  tx_entry* prev = nullptr;
  for (tx_entry* t = tx_head_; t; prev = t, t = t->next) {
    if (t->context != context || t->kind == tx_entry::response) continue;
    // Untouched: no byte of its header has left.
    if (t->first != 0 || t->iov[0].iov_base != t->hdr) return nullptr;
    (prev ? prev->next : tx_head_) = t->next;
    if (tx_tail_ == t) tx_tail_ = prev;
    t->next = nullptr;
    return t;
  }
  return nullptr;
}

tx_entry* conn::take_queue() noexcept {
  tx_entry* q = tx_head_;
  tx_head_ = tx_tail_ = nullptr;
  return q;
}

void conn::send_wake() noexcept {
  // A full socket buffer already holds wake bytes; a closed peer is seen by
  // its end of stream: neither is an error here.
  const char b = 0;
  [[maybe_unused]] ssize_t n = ::send(sock_.get(), &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

// One write of the gathered iovecs: bytes taken, -EAGAIN, or -errno.
ssize_t conn::write_out(const iovec* v, size_t k) noexcept {
  if (local_) {
    ssize_t n = stream.writev(v, static_cast<int>(k));
    if (stream.take_wake_due()) send_wake();
    stream_waits = n == -EAGAIN ? stream_waits + 1 : 0;
    return n;
  }
  msghdr m{};
  m.msg_iov = const_cast<iovec*>(v);
  m.msg_iovlen = k;
  for (;;) {
    ssize_t n = util::sys::send_msg(sock_.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno != EINTR) return errno == EWOULDBLOCK ? -EAGAIN : -errno;
  }
}

conn::io conn::flush(bool data, tx_entry** done, int* err) noexcept {
  tx_entry** done_tail = done;
  while (*done_tail) done_tail = &(*done_tail)->next;
  if (ctrl_pending()) {
    while (ctrl_pending()) {
      iovec v{ctrl_ + ctrl_off_, static_cast<size_t>(ctrl_len_ - ctrl_off_)};
      ssize_t n = write_out(&v, 1);
      if (n == -EAGAIN) return io::blocked;
      if (n < 0) {
        *err = static_cast<int>(-n);
        return io::error;
      }
      ctrl_off_ = static_cast<uint16_t>(ctrl_off_ + n);
    }
    // A control frame (a shutdown) may be what a thread asleep on the EQ
    // waits for: it is always followed by a wake byte.
    if (local_) send_wake();
    if (stream_after_ctrl_) local_ = true, stream_after_ctrl_ = false;
  }
  ctrl_off_ = ctrl_len_ = 0;
  if (!data) return io::ok;
  while (tx_head_) {
    // Gather the head of the queue into one system call (a batch of
    // cork_max_frames small sends is two iovecs each).
    iovec v[128];
    size_t k = 0, want = 0;
    // Within the host (loopback's 64 KiB packets, few acknowledgements)
    // one call for everything measured faster; decided once, connected.
    if (!write_cap_) write_cap_ = local_ || same_host_socket(sock_.get()) ? SIZE_MAX : write_max;
    const size_t cap = local_ ? SIZE_MAX : write_cap_;
    for (tx_entry* t = tx_head_; t && k < std::size(v) && want < cap; t = t->next)
      for (unsigned i = t->first; i < t->count && k < std::size(v) && want < cap; ++i)
        if (t->iov[i].iov_len) {
          v[k] = t->iov[i];
          v[k].iov_len = std::min(v[k].iov_len, cap - want);
          want += v[k++].iov_len;
        }
    ssize_t n = 0;
    if (want) {
      n = write_out(v, k);
      if (n == -EAGAIN) return io::blocked;
      if (n < 0) {
        *err = static_cast<int>(-n);
        return io::error;
      }
    }
    // Account the bytes written, entry by entry; finished entries leave.
    size_t left = static_cast<size_t>(n);
    while (tx_head_) {
      tx_entry* t = tx_head_;
      while (t->first < t->count && left) {
        iovec& io = t->iov[t->first];
        size_t step = std::min(left, io.iov_len);
        io.iov_base = static_cast<char*>(io.iov_base) + step;
        io.iov_len -= step;
        t->left -= step;
        left -= step;
        if (io.iov_len == 0) ++t->first;
      }
      while (t->first < t->count && t->iov[t->first].iov_len == 0) ++t->first;
      if (t->left) break;
      tx_head_ = t->next;
      if (!tx_head_) tx_tail_ = nullptr;
      t->next = nullptr;
      *done_tail = t;
      done_tail = &t->next;
    }
    if (static_cast<size_t>(n) < want) return io::blocked;
  }
  return io::ok;
}

ssize_t conn::read_into(void* buf, size_t len) noexcept {
  if (local_) {
    ssize_t n = stream.read(buf, len);
    if (n > 0 && stream.take_wake_due()) send_wake();  // the writer waits for room
    // An empty pipe between frames is an idle peer, not one we wait for.
    if (n == -EAGAIN && !reader.at_boundary())
      ++stream_waits;
    else if (n > 0)
      stream_waits = 0;
    return n;
  }
  for (;;) {
    ssize_t n = util::sys::recv(sock_.get(), buf, len, MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno != EINTR) return errno == EWOULDBLOCK ? -EAGAIN : -errno;
  }
}

ssize_t conn::fill() noexcept {
  if (rx_head_ == rx_tail_) {
    rx_head_ = rx_tail_ = 0;
  } else if (rx_head_ > 0) {
    std::memmove(rx_buf_.get(), rx_buf_.get() + rx_head_, rx_tail_ - rx_head_);
    rx_tail_ -= rx_head_;
    rx_head_ = 0;
  }
  if (rx_tail_ == staging) return -ENOBUFS;  // the caller consumes first
  ssize_t n = read_into(rx_buf_.get() + rx_tail_, staging - rx_tail_);
  if (n > 0) rx_tail_ += static_cast<size_t>(n);
  return n;
}

int conn::drain_socket() noexcept {
  char scratch[256];
  int r = 1;
  // Bounded: a peer that floods wake bytes cannot hold us here. Bytes left
  // keep the socket readable, so a sleeper still wakes at once.
  for (int i = 0; i < 16; ++i) {
    ssize_t n = util::sys::recv(sock_.get(), scratch, sizeof scratch, MSG_DONTWAIT);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    r = n == 0 ? 0 : (errno == EAGAIN || errno == EWOULDBLOCK ? 1 : -errno);
    break;
  }
  // Then the pending wake: a peer that set it before this store made its
  // change before, so the caller's look at the pipes that follows sees it;
  // one that sets it after sends a byte that stays in the socket.
  stream.take_wake();
  return r;
}

}  // namespace weft::tcp
