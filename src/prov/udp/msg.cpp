// SPDX-License-Identifier: MIT
// weft — the udp data path: one sendmsg per send, one recvmsg per receive,
// straight between the application's buffers and the kernel.
#include "util/iov.hpp"
#include "core/log.hpp"
#include "prov/udp/udp.hpp"
#include "util/av.hpp"
#include "util/fence.hpp"
#include "util/trigger.hpp"
#include "util/net.hpp"
#include "util/sys.hpp"

#include <cerrno>
#include <cstring>

namespace weft::udp {

namespace {

constexpr uint64_t recv_flags = FI_RECV | FI_MSG;
constexpr uint64_t send_flags = FI_SEND | FI_MSG;

// The socket address of an AV entry; 0 when the fi_addr is not valid.
socklen_t sockaddr_of(const util::av& av, fi_addr_t a, sockaddr_storage& out) noexcept {
  const uint8_t* e = av.entry(a);
  if (!e) return 0;
  return static_cast<socklen_t>(av.codec().decode(e, &out, sizeof out));
}

// A receive context of a peer (fi_rx_addr, an AV with rx_ctx_bits): its
// scalable endpoint's port + the index (sep.cpp); 0 when not valid, logged.
__attribute__((noinline)) socklen_t rx_ctx_sockaddr(const util::av& av, fi_addr_t a,
                                                    sockaddr_storage& out) noexcept {
  const uint64_t index = av.rx_index(a);
  socklen_t n = sockaddr_of(av, av.strip_rx(a), out);
  if (!n) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "send to fi_addr %llu: not in the address vector",
              static_cast<unsigned long long>(av.strip_rx(a)));
    return 0;
  }
  const unsigned port = util::sockaddr_port(reinterpret_cast<sockaddr*>(&out));
  if (index >= max_contexts || port + index > 65535) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA,
              "send to receive context %llu: a udp scalable endpoint has at most %zu, from its "
              "port (%u) up",
              static_cast<unsigned long long>(index), max_contexts, port);
    return 0;
  }
  util::set_sockaddr_port(reinterpret_cast<sockaddr*>(&out), uint16_t(port + index));
  return n;
}

// FI_SOURCE: the fi_addr of a datagram's sender (its user id where one was
// given, FI_AV_USER_ID), FI_ADDR_NOTAVAIL if unknown.
fi_addr_t source_of(const util::av& av, const sockaddr_storage& from) noexcept {
  uint8_t entry[64];
  if (av.codec().entry_size > sizeof entry || av.codec().encode(&from, entry) != 0)
    return FI_ADDR_NOTAVAIL;
  return av.report(av.reverse(entry));
}


errc send_errno(int e) noexcept {
  switch (e) {
    case EAGAIN:
#if EWOULDBLOCK != EAGAIN
    case EWOULDBLOCK:
#endif
    case ENOBUFS: return errc::again;
    case EMSGSIZE: return errc::msgsize;
    case ENETUNREACH: return errc::netunreach;
    case EHOSTUNREACH: return errc::hostunreach;
    case ECONNREFUSED: return errc::connrefused;  // an ICMP error from an earlier datagram
    case EACCES: return errc::access;
    default: return errc::io;
  }
}

// The fi_ops_msg slots of one lock policy: every form funnels into
// endpoint::send / endpoint::post_recv.
template <class Lock>
struct msg_ops {
  static endpoint* ep(fid_ep* e) noexcept { return endpoint::from(e); }

  static ssize_t recv(fid_ep* e, void* buf, size_t len, void*, fi_addr_t, void* ctx) noexcept {
    iovec iov{buf, len};
    return ep(e)->post_recv<Lock>(&iov, 1, ctx, ep(e)->rx_op_flags());
  }
  static ssize_t recvv(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t,
                       void* ctx) noexcept {
    return ep(e)->post_recv<Lock>(iov, count, ctx, ep(e)->rx_op_flags());
  }
  static ssize_t recvmsg(fid_ep* e, const fi_msg* m, uint64_t flags) noexcept {
    if (!m) return to_fi(errc::inval);
    if (flags & FI_TRIGGER) [[unlikely]]
      return util::trigger_intercept(ep(e)->trigger_site(), e,
                                     {.type = FI_OP_RECV, .msg = m, .flags = flags});
    return ep(e)->post_recv<Lock>(m->msg_iov, m->iov_count, m->context, flags);
  }
  static ssize_t send(fid_ep* e, const void* buf, size_t len, void*, fi_addr_t dest,
                      void* ctx) noexcept {
    iovec iov{const_cast<void*>(buf), len};
    return ep(e)->send<Lock>(&iov, 1, dest, ctx, ep(e)->tx_op_flags());
  }
  static ssize_t sendv(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t dest,
                       void* ctx) noexcept {
    return ep(e)->send<Lock>(iov, count, dest, ctx, ep(e)->tx_op_flags());
  }
  static ssize_t sendmsg(fid_ep* e, const fi_msg* m, uint64_t flags) noexcept {
    if (!m) return to_fi(errc::inval);
    if (flags & (FI_FENCE | FI_TRIGGER)) [[unlikely]] {
      if (util::fence_refused(&provider(), "fi_sendmsg", flags)) return to_fi(errc::inval);
      return util::trigger_intercept(ep(e)->trigger_site(), e,
                                     {.type = FI_OP_SEND, .msg = m, .flags = flags});
    }
    if (flags & FI_REMOTE_CQ_DATA) return to_fi(errc::nosys);  // cq_data_size is 0
    // no_completion is ours: an application's bit 63 asks for nothing.
    return ep(e)->send<Lock>(m->msg_iov, m->iov_count, m->addr, m->context,
                             flags & ~no_completion);
  }
  static ssize_t inject(fid_ep* e, const void* buf, size_t len, fi_addr_t dest) noexcept {
    iovec iov{const_cast<void*>(buf), len};
    // fi_inject never generates a completion: only FI_INJECT, not FI_COMPLETION.
    return ep(e)->send<Lock>(&iov, 1, dest, nullptr, FI_INJECT | no_completion);
  }
  static constexpr fi_ops_msg table = {
      .size = sizeof(fi_ops_msg),
      .recv = recv,
      .recvv = recvv,
      .recvmsg = recvmsg,
      .send = send,
      .sendv = sendv,
      .sendmsg = sendmsg,
      .inject = inject,
      WEFT_NOSYS(fi_ops_msg, senddata),  // no remote CQ data over plain datagrams
      WEFT_NOSYS(fi_ops_msg, injectdata),
  };
};

}  // namespace

template <class Lock>
const fi_ops_msg* endpoint::msg_table() noexcept {
  return &msg_ops<Lock>::table;
}
template const fi_ops_msg* endpoint::msg_table<util::null_lock>() noexcept;
template const fi_ops_msg* endpoint::msg_table<util::mutex_lock>() noexcept;

template <class Lock>
ssize_t endpoint::send(const iovec* iov, size_t count, fi_addr_t dest, void* context,
                       uint64_t flags) noexcept {
  if (util::iov_refused(&provider(), "send", iov, count, max_iov))
    return to_fi(errc::inval);
  size_t len = util::iov_total(iov, count);
  if (len > max_msg_) {
    WEFT_WARN(&provider(), FI_LOG_EP_DATA, "send of %zu bytes exceeds max_msg_size %zu", len,
              max_msg_);
    return to_fi(errc::msgsize);
  }
  util::cq* cq = bound_.tx_cq.get();
  bool completion = cq && !(flags & no_completion) &&
                    (!bound_.tx_selective || (flags & FI_COMPLETION));
  [[maybe_unused]] auto g = guard<Lock>();
  sockaddr_storage to;
  const util::av& av = *bound_.av_;
  socklen_t tolen = av.rx_index(dest) ? rx_ctx_sockaddr(av, dest, to) : sockaddr_of(av, dest, to);
  if (!tolen) {
    if (!av.rx_index(dest))  // rx_ctx_sockaddr logged its own
      WEFT_WARN(&provider(), FI_LOG_EP_DATA, "send to fi_addr %llu: not in the address vector",
                static_cast<unsigned long long>(dest));
    return to_fi(errc::inval);
  }
  if (completion && !cq->has_room<Lock>()) return to_fi(errc::again);
  ssize_t sent;
  if (count <= 1) {
    // One buffer: sendto spares the kernel importing a msghdr and an iovec.
    sent = util::sys::send_to(sock_.get(), count ? iov[0].iov_base : nullptr, len,
                              MSG_DONTWAIT | MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&to),
                              tolen);
  } else {
    msghdr m{};
    m.msg_name = &to;
    m.msg_namelen = tolen;
    m.msg_iov = const_cast<iovec*>(iov);
    m.msg_iovlen = count;
    sent = util::sys::send_msg(sock_.get(), &m, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  if (sent < 0) {
    errc e = send_errno(errno);
    if (e != errc::again)
      WEFT_WARN(&provider(), FI_LOG_EP_DATA, "sendmsg to %s: %s",
                util::format_sockaddr(reinterpret_cast<sockaddr*>(&to)).c_str(),
                std::strerror(errno));
    return to_fi(e);
  }
  if (completion) {
    util::cq_entry ce{};
    ce.op_context = context;
    ce.flags = send_flags;
    ce.src = FI_ADDR_NOTAVAIL;
    cq->write<Lock>(ce);
  }
  if (util::cntr* c = util::counted(bound_.send_cntr.get(), flags)) c->inc();
  return 0;
}

template <class Lock>
ssize_t endpoint::post_recv(const iovec* iov, size_t count, void* context,
                            uint64_t flags) noexcept {
  if (util::iov_refused(&provider(), "receive", iov, count, max_iov))
    return to_fi(errc::inval);
  if ((flags & FI_MULTI_RECV) && count != 1) return to_fi(errc::inval);
  {
    [[maybe_unused]] auto g = guard<Lock>();
    if (rx_tail_ - rx_head_ > rx_mask_) return to_fi(errc::again);
    rx_entry& e = rx_[rx_tail_ & rx_mask_];
    std::memcpy(e.iov, iov, count * sizeof(iovec));
    e.count = count;
    e.context = context;
    e.flags = flags;
    e.offset = 0;
    e.canceled = false;
    ++rx_tail_;
  }
  // No progress here: posting must not cost a system call. The next CQ or
  // counter read receives into it.
  return 0;
}

template <class Lock>
void endpoint::complete_recv(rx_entry& e, void* buf, size_t len, const sockaddr_storage& from,
                             bool trunc, size_t full_len, bool last) noexcept {
  util::cq* cq = bound_.rx_cq.get();
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  if (want_source_) src = source_of(*bound_.av_, from);
  uint64_t flags = recv_flags | (last && (e.flags & FI_MULTI_RECV) ? FI_MULTI_RECV : 0);
  if (trunc) {
    if (cq) {
      fi_cq_err_entry err{};
      err.op_context = e.context;
      err.flags = flags;
      err.len = len;
      err.buf = buf;
      err.olen = full_len - len;
      err.err = FI_ETRUNC;
      err.prov_errno = -FI_ETRUNC;
      err.src_addr = src;
      cq->write_error<Lock>(err);
    }
    if (util::cntr* c = util::counted(bound_.recv_cntr.get(), e.flags)) c->inc_err();
    return;
  }
  // A multi-receive buffer reports its release even when it asked for no
  // completion; any other receive only with FI_COMPLETION.
  if (cq && (!bound_.rx_selective || (e.flags & FI_COMPLETION) ||
             (last && (e.flags & FI_MULTI_RECV)))) {
    util::cq_entry ce{};
    ce.op_context = e.context;
    ce.flags = flags;
    ce.len = len;
    ce.buf = buf;
    ce.src = src;
    cq->write<Lock>(ce);
  }
  if (util::cntr* c = util::counted(bound_.recv_cntr.get(), e.flags)) c->inc();
}

template <class Lock>
bool endpoint::progress() noexcept {
  [[maybe_unused]] auto g = guard<Lock>();
  util::cq* cq = bound_.rx_cq.get();
  while (rx_head_ != rx_tail_) {
    rx_entry& e = rx_[rx_head_ & rx_mask_];
    if (e.canceled) {
      ++rx_head_;
      continue;
    }
    // Room for the completion first: data left in the socket waits there.
    if (cq && !cq->has_room<Lock>(1)) return false;
    iovec window[max_iov];
    size_t n = e.count;
    std::memcpy(window, e.iov, n * sizeof(iovec));
    size_t space = util::iov_total(window, n);
    if (e.flags & FI_MULTI_RECV) {
      window[0].iov_base = static_cast<char*>(window[0].iov_base) + e.offset;
      window[0].iov_len -= e.offset;
      space = window[0].iov_len;
    }
    sockaddr_storage from;
    // MSG_TRUNC makes the call report the datagram's real length.
    ssize_t r;
    if (n == 1) {
      // One buffer: recvfrom spares the kernel importing a msghdr and iovec.
      socklen_t fromlen = sizeof from;
      r = util::sys::recv_from(sock_.get(), window[0].iov_base, window[0].iov_len,
                              MSG_DONTWAIT | MSG_TRUNC, reinterpret_cast<sockaddr*>(&from),
                              &fromlen);
    } else {
      msghdr m{};
      m.msg_name = &from;
      m.msg_namelen = sizeof from;
      m.msg_iov = window;
      m.msg_iovlen = n;
      r = util::sys::recv_msg(sock_.get(), &m, MSG_DONTWAIT | MSG_TRUNC);
    }
    if (r < 0) return true;  // EAGAIN: nothing more has arrived
    size_t full = static_cast<size_t>(r);
    bool trunc = full > space;
    size_t got = trunc ? space : full;
    bool last = true;
    void* buf = n ? window[0].iov_base : nullptr;
    if (e.flags & FI_MULTI_RECV) {
      // The buffer is released once what is left is below FI_OPT_MIN_MULTI_RECV.
      e.offset += got;
      last = trunc || window[0].iov_len - got < min_multi_recv_;
    }
    complete_recv<Lock>(e, buf, got, from, trunc, full, last);
    if (last) ++rx_head_;
  }
  return false;  // no receive posted: a datagram that came waits in the socket
}

template bool endpoint::progress<util::null_lock>() noexcept;
template bool endpoint::progress<util::mutex_lock>() noexcept;

}  // namespace weft::udp
