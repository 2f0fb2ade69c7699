// SPDX-License-Identifier: MIT
// libexs: sockets. A socket's descriptor is an eventfd of its own (so it
// never collides with the process's other descriptors, and select, poll
// and epoll can wait on it: it is readable while exs_poll would report
// POLLIN, POLLHUP or POLLERR). exs_bind binds at once: a passive endpoint
// is opened on the address, so exs_getsockname shows the port before
// listen or connect; a socket that then connects keeps that port.
#include "exs_impl.hpp"

#include <netinet/in.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace exs {

sock* find_sock(int fd) {
  auto& ss = lib().socks;
  auto it = ss.find(fd);
  return it == ss.end() ? nullptr : it->second;
}

sock* new_sock(int type, int family) {
  library& L = lib();
  int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return nullptr;
  auto* s = new (std::nothrow) sock;
  if (!s) {
    close(fd);
    return nullptr;
  }
  s->fd = fd;
  s->type = type;
  s->family = family;
  s->id = L.next_id++;
  L.by_id[s->id] = s;
  return s;
}

short ready_events(const sock* s) {
  short ev = 0;
  if (s->state == sstate::listening && !s->connreqs.empty()) ev |= POLLIN;
  if (s->state == sstate::connected) {
    if (!s->ready.empty()) ev |= POLLIN;
    if (s->peer_eof || s->peer_gone) ev |= POLLIN;
    if (s->peer_gone) ev |= POLLHUP;
    if (s->send_credits && !s->shut_wr && !s->peer_gone) ev |= POLLOUT;
  }
  if (s->so_error) ev |= POLLERR;
  return ev;
}

void update_ready(sock* s) {
  bool want = ready_events(s) & (POLLIN | POLLHUP | POLLERR);
  if (s->fd >= 0 && want != s->fd_signalled) {
    uint64_t v = 1;
    ssize_t r = want ? write(s->fd, &v, sizeof v) : read(s->fd, &v, sizeof v);
    (void)r;
    s->fd_signalled = want;
  }
  lib().state_cv.notify_all();
}

// Frees a socket and everything it holds. The endpoint is closed first and
// the completion queue drained, so no completion can name it afterwards.
void destroy_sock(sock* s) {
  library& L = lib();
  s->state = sstate::closed;
  L.by_id.erase(s->id);
  if (s->fd >= 0 && find_sock(s->fd) == s) L.socks.erase(s->fd);
  L.retry.erase(std::remove(L.retry.begin(), L.retry.end(), s), L.retry.end());
  fail_all(s, ECANCELED, ECANCELED, 0);
  for (auto& [req, b] : s->connreqs) {
    if (s->pep) fi_reject(s->pep, req->handle, nullptr, 0);
    fi_freeinfo(req);
  }
  s->connreqs.clear();
  // Half-accepted sockets of this listener go with it.
  std::vector<sock*> orphans;
  for (auto& [id, o] : L.by_id)
    if (o->listener == s) orphans.push_back(o);
  for (sock* o : orphans) {
    o->listener = nullptr;
    destroy_sock(o);
  }
  if (s->accept_op) {
    finish_op(s->accept_op, ECONNABORTED, 0, 0);
    maybe_free(s->accept_op);
    s->accept_op = nullptr;
  }
  if (s->ep) {
    close_fid(s->fc, &s->ep->fid);
    s->ep = nullptr;
    handle_cq(s->fc);
  }
  if (s->pep) close_fid(s->fc, &s->pep->fid);
  if (s->credit_mr) fi_close(&s->credit_mr->fid);
  if (s->ring_mr) fi_close(&s->ring_mr->fid);
  for (op* o : s->live) delete o;  // the provider holds none of them now
  s->live.clear();
  fi_freeinfo(s->info);
  if (s->fd >= 0) close(s->fd);
  L.state_cv.notify_all();
  delete s;
}

}  // namespace exs

using namespace exs;

namespace {

struct locked {
  std::unique_lock<std::mutex> g{lib().m};
};

bool family_ok(int d) { return d == AF_INET || d == AF_INET6; }

socklen_t addr_len(int family) {
  return family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

int check_addr(const sock* s, const sockaddr* a, socklen_t len) {
  if (!a) return EFAULT;
  if (a->sa_family != s->family) return EAFNOSUPPORT;
  if (len < addr_len(s->family)) return EINVAL;
  return 0;
}

std::string provider_of(const sock* s) {
  if (s->fc) return s->fc->prov;
  if (!s->prov.empty()) return s->prov;
  const char* e = std::getenv("EXS_PROVIDER");
  return e ? e : "";
}

// Opens a passive endpoint bound to `a` (which may name port 0).
int do_bind(sock* s, const sockaddr* a) {
  fi_info* info = nullptr;
  int err = 0;
  fabric_ctx* fc = fabric_for(s->prov, s->family, a, nullptr, &info, &err);
  if (!fc) return err;
  int r = fi_passive_ep(fc->fabric, info, &s->pep, nullptr);
  if (!r) lib().fid_ids[&s->pep->fid] = s->id;
  if (r) {
    fi_freeinfo(info);
    return errno_of_fi(r);
  }
  size_t n = sizeof s->local;
  r = fi_getname(&s->pep->fid, &s->local, &n);
  if (r == -FI_EOPBADSTATE) {
    // A provider that binds a passive endpoint at fi_listen (libfabric's
    // sockets provider): the address asked for stands until exs_listen,
    // which reads the real one; exs_getsockname shows port 0 till then.
    n = addr_len(s->family);
    std::memcpy(&s->local, a, n);
    s->name_at_listen = true;
    r = 0;
  }
  if (r) {
    lib().fid_ids.erase(&s->pep->fid);
    fi_close(&s->pep->fid);
    s->pep = nullptr;
    fi_freeinfo(info);
    return errno_of_fi(r);
  }
  s->local_len = socklen_t(n);
  s->fc = fc;
  s->info = info;
  s->state = sstate::bound;
  return 0;
}

uint16_t port_of(const sockaddr* a) {
  return a->sa_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(a)->sin6_port
                                  : reinterpret_cast<const sockaddr_in*>(a)->sin_port;
}

bool port_in_use(const sockaddr* a) {
  uint16_t p = port_of(a);
  if (!p) return false;
  for (auto& [fd, o] : lib().socks)
    if (o->local_len && o->local.ss_family == a->sa_family &&
        port_of(reinterpret_cast<const sockaddr*>(&o->local)) == p &&
        (o->state == sstate::bound || o->state == sstate::listening))
      return true;
  return false;
}

sockaddr_storage any_addr(int family) {
  sockaddr_storage ss{};
  ss.ss_family = sa_family_t(family);
  return ss;  // in6addr_any / INADDR_ANY, port 0
}

// Checks the iovs of a transfer against their regions and takes them.
int take_iovs(op* o, const iovec* iov, int iovcnt, const exs_mhandle_t* mh, int need) {
  if (iovcnt < 0 || iovcnt > EXS_IOV_MAX) return EINVAL;
  if (iovcnt > 0 && (!iov || !mh)) return EFAULT;
  size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) {
    if (iov[i].iov_len == 0) continue;
    if (!iov[i].iov_base) return EFAULT;
    region* r = find_region(mh[i]);
    if (!r) return EINVAL;
    auto* b = static_cast<char*>(iov[i].iov_base);
    if (!(r->access & need) || b < r->addr || b + iov[i].iov_len > r->addr + r->len ||
        b + iov[i].iov_len < b)
      return EFAULT;
    total += iov[i].iov_len;
  }
  int n = 0;
  for (int i = 0; i < iovcnt; ++i) {
    if (iov[i].iov_len == 0) continue;
    o->iov[n] = iov[i];
    o->rg[n] = find_region(mh[i]);
    n++;
  }
  o->iovcnt = n;
  o->total = total;
  for (int i = 0; i < n; ++i) o->rg[i]->users++;
  return 0;
}

// Reserves room for one event in `q`.
int reserve(queue* q) {
  if (!q) return EINVAL;
  if (q->reserved + int(q->events.size()) >= q->depth) return EAGAIN;
  q->reserved++;
  return 0;
}

op* new_op(sock* s, op_type t, queue* q, void* ctx) {
  auto* o = new op;
  o->kind = ctx_kind::op;
  o->s = s;
  o->type = t;
  o->q = q;
  o->context = ctx;
  s->live.push_back(o);
  return o;
}

ssize_t post_send(int fd, const iovec* iov, int iovcnt, int flags, const exs_mhandle_t* mh,
                  exs_qhandle_t qh, void* context) {
  locked g;
  sock* s = find_sock(fd);
  if (!s) return fail(EBADF);
  if (flags) return fail(EOPNOTSUPP);
  queue* q = find_queue(qh);
  if (!q) return fail(EINVAL);
  if (s->state != sstate::connected) return fail(ENOTCONN);
  if (s->shut_wr || s->peer_gone || s->peer_eof) return fail(EPIPE);
  op tmp;
  if (int e = take_iovs(&tmp, iov, iovcnt, mh, EXS_ACCESS_READ)) return fail(e);
  auto release = [&] { for (int i = 0; i < tmp.iovcnt; ++i) tmp.rg[i]->users--; };
  if (s->type == SOCK_SEQPACKET && (tmp.total > s->max_msg || tmp.iovcnt > int(s->iov_limit))) {
    release();
    return fail(EMSGSIZE);
  }
  if (int e = reserve(q)) { release(); return fail(e); }
  op* o = new_op(s, op_type::send, q, context);
  std::memcpy(o->iov, tmp.iov, sizeof o->iov);
  std::memcpy(o->rg, tmp.rg, sizeof o->rg);
  o->iovcnt = tmp.iovcnt;
  o->total = tmp.total;
  s->sends.push_back(o);
  pump(s);
  nudge();
  return 0;
}

ssize_t post_recv(int fd, const iovec* iov, int iovcnt, int flags, const exs_mhandle_t* mh,
                  exs_qhandle_t qh, void* context) {
  locked g;
  sock* s = find_sock(fd);
  if (!s) return fail(EBADF);
  if (flags) return fail(EOPNOTSUPP);
  queue* q = find_queue(qh);
  if (!q) return fail(EINVAL);
  if (s->state != sstate::connected) return fail(ENOTCONN);
  if (s->shut_rd) return fail(ESHUTDOWN);
  op tmp;
  if (int e = take_iovs(&tmp, iov, iovcnt, mh, EXS_ACCESS_WRITE)) return fail(e);
  auto release = [&] { for (int i = 0; i < tmp.iovcnt; ++i) tmp.rg[i]->users--; };
  if (tmp.total == 0) { release(); return fail(EINVAL); }
  if (s->type == SOCK_SEQPACKET && tmp.iovcnt > int(s->iov_limit)) { release(); return fail(EINVAL); }
  if (int e = reserve(q)) { release(); return fail(e); }
  op* o = new_op(s, op_type::recv, q, context);
  std::memcpy(o->iov, tmp.iov, sizeof o->iov);
  std::memcpy(o->rg, tmp.rg, sizeof o->rg);
  o->iovcnt = tmp.iovcnt;
  o->total = tmp.total;
  if (s->type == SOCK_STREAM) {
    s->recvs.push_back(o);
    stream_deliver(s);
  } else if (s->peer_eof || s->peer_gone) {
    int err = s->peer_eof ? 0 : (s->so_error ? s->so_error : ECONNRESET);
    finish_op(o, err, 0, err ? 0 : EXS_EVT_FLAG_EOF);
    maybe_free(o);
  } else {
    if (ssize_t r = recv_at_provider(s, o)) {
      q->reserved--;
      for (int i = 0; i < o->iovcnt; ++i) o->rg[i]->users--;
      o->finished = true;
      maybe_free(o);
      return fail(r == -FI_EAGAIN ? EAGAIN : errno_of_fi(int(r)));
    }
    s->recvs.push_back(o);
    // One more message may come: grant it, unless a cancelled receive's
    // credit is still out.
    if (s->revoked) s->revoked--;
    else s->owed++;
  }
  pump(s);
  nudge();
  return 0;
}

}  // namespace

EXS_API int exs_socket(int domain, int type, int protocol) {
  if (!family_ok(domain)) return fail(EAFNOSUPPORT);
  if (type != SOCK_STREAM && type != SOCK_SEQPACKET) return fail(EPROTOTYPE);
  if (protocol != 0) return fail(EPROTONOSUPPORT);
  locked g;
  sock* s = new_sock(type, domain);
  if (!s) return fail(errno ? errno : ENOMEM);
  lib().socks[s->fd] = s;
  return s->fd;
}

EXS_API int exs_bind(int fd, const struct sockaddr* addr, socklen_t len) {
  locked g;
  sock* s = find_sock(fd);
  if (!s) return fail(EBADF);
  if (int e = check_addr(s, addr, len)) return fail(e);
  if (s->state != sstate::fresh) return fail(EINVAL);
  // The provider's sockets reuse addresses (a bound client shares its port
  // with its connection for a moment), so another exs socket of this
  // process holding the port is refused here, as bind(2) would.
  if (port_in_use(addr)) return fail(EADDRINUSE);
  if (int e = do_bind(s, addr)) return fail(e);
  s->bound_explicitly = true;
  return 0;
}

EXS_API int exs_listen(int fd, int backlog) {
  locked g;
  sock* s = find_sock(fd);
  if (!s) return fail(EBADF);
  if (s->state == sstate::listening) {
    if (backlog > 0) s->backlog = backlog;
    return 0;
  }
  if (s->state == sstate::fresh) {
    sockaddr_storage any = any_addr(s->family);
    if (int e = do_bind(s, reinterpret_cast<sockaddr*>(&any))) return fail(e);
  }
  if (s->state != sstate::bound) return fail(EINVAL);
  if (backlog > 0) s->backlog = std::min(backlog, 4096);
  int r = fi_pep_bind(s->pep, &s->fc->eq->fid, 0);
  if (!r) r = fi_control(&s->pep->fid, FI_BACKLOG, &s->backlog);
  if (!r || r == -FI_ENOSYS) r = fi_listen(s->pep);
  if (r) return fail(errno_of_fi(r));
  if (s->name_at_listen) {
    size_t n = sizeof s->local;
    if (fi_getname(&s->pep->fid, &s->local, &n) == 0) {
      s->local_len = socklen_t(n);
      s->name_at_listen = false;
    }
  }
  s->state = sstate::listening;
  kick();
  return 0;
}

EXS_API int exs_accept(int fd, int flags, exs_qhandle_t qh, void* context) {
  locked g;
  sock* s = find_sock(fd);
  if (!s) return fail(EBADF);
  if (flags) return fail(EOPNOTSUPP);
  queue* q = find_queue(qh);
  if (!q) return fail(EINVAL);
  if (s->state != sstate::listening) return fail(EINVAL);
  if (int e = reserve(q)) return fail(e);
  op* o = new_op(s, op_type::accept, q, context);
  if (!s->connreqs.empty()) {
    auto [req, b] = s->connreqs.front();
    s->connreqs.pop_front();
    if (int e = start_accept(s, req, b, o)) {
      finish_op(o, e, 0, 0);
      maybe_free(o);
    }
    update_ready(s);
  } else {
    s->accepts.push_back(o);
  }
  kick();
  return 0;
}

EXS_API int exs_connect(int fd, const struct sockaddr* addr, socklen_t len, int flags,
                        exs_qhandle_t qh, void* context) {
  locked g;
  sock* s = find_sock(fd);
  if (!s) return fail(EBADF);
  if (flags) return fail(EOPNOTSUPP);
  queue* q = find_queue(qh);
  if (!q) return fail(EINVAL);
  if (int e = check_addr(s, addr, len)) return fail(e);
  if (s->state == sstate::listening) return fail(EINVAL);
  if (s->state == sstate::connecting) return fail(EALREADY);
  if (s->state != sstate::fresh && s->state != sstate::bound) return fail(EISCONN);
  fi_info* info = nullptr;
  int err = 0;
  fabric_ctx* fc = s->fc;
  if (s->state == sstate::bound) {
    info = fi_dupinfo(s->info);
  } else {
    fc = fabric_for(s->prov, s->family, nullptr, addr, &info, &err);
    if (!fc) return fail(err);
  }
  if (int e = reserve(q)) { fi_freeinfo(info); return fail(e); }
  fid_ep* ep = nullptr;
  int r = fi_endpoint(fc->domain, info, &ep, nullptr);
  if (!r) lib().fid_ids[&ep->fid] = s->id;
  // Bound: the endpoint connects from the port the passive endpoint holds
  // (both sockets reuse it; neither listens), which is then let go.
  if (!r && s->state == sstate::bound) r = fi_setname(&ep->fid, &s->local, s->local_len);
  if (!r) r = fi_ep_bind(ep, &fc->eq->fid, 0);
  if (!r) r = fi_ep_bind(ep, &fc->cq->fid, FI_TRANSMIT | FI_RECV);
  if (!r) r = fi_enable(ep);
  if (r) {
    if (ep) close_fid(fc, &ep->fid);
    fi_freeinfo(info);
    q->reserved--;
    return fail(errno_of_fi(r));
  }
  fi_freeinfo(s->info);
  s->info = info;
  s->fc = fc;
  s->ep = ep;
  if (int e = setup_connected(s)) {
    q->reserved--;
    return fail(e);  // the socket keeps its endpoint until closed
  }
  cm_blob mine{cm_magic, uint32_t(s->type), s->id,
               uint32_t(s->type == SOCK_STREAM ? s->stream_bufs : 0),
               s->type == SOCK_STREAM ? s->stream_chunk : 0, credit_key(s),
               fc->mr_virt ? uint64_t(uintptr_t(&s->credit_word)) : 0};
  r = fi_connect(ep, addr, &mine, sizeof mine);
  if (r) {
    q->reserved--;
    return fail(errno_of_fi(r));
  }
  if (s->pep) {
    close_fid(s->fc, &s->pep->fid);
    s->pep = nullptr;
  }
  std::memcpy(&s->peer, addr, addr_len(s->family));
  s->peer_len = addr_len(s->family);
  s->connect_op = new_op(s, op_type::connect, q, context);
  s->state = sstate::connecting;
  kick();
  return 0;
}

EXS_API int exs_shutdown(int fd, int how) {
  locked g;
  sock* s = find_sock(fd);
  if (!s) return fail(EBADF);
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return fail(EINVAL);
  if (s->state != sstate::connected) return fail(ENOTCONN);
  if (how == SHUT_RD || how == SHUT_RDWR) {
    s->shut_rd = true;
    for (op* o : std::vector<op*>(s->recvs.begin(), s->recvs.end())) {
      finish_op(o, ESHUTDOWN, 0, 0);
      if (o->at_provider) fi_cancel(&s->ep->fid, o);
      maybe_free(o);
    }
    s->recvs.clear();
  }
  if (how == SHUT_WR || how == SHUT_RDWR) s->shut_wr = true;
  if (how == SHUT_RDWR) {
    // Everything still outstanding ends now, with an error; the end of the
    // stream goes out first so the peer sees an orderly end.
    for (op* o : std::vector<op*>(s->live.begin(), s->live.end()))
      if (!o->finished) finish_op(o, ESHUTDOWN, 0, 0);
    s->sends.clear();
    if (!s->peer_gone && !s->eof_posted && s->ep) {
      s->eof_posted = true;
      if (fi_writedata(s->ep, &s->credit_word, 0, nullptr, pack_data(s->peer_id, data_eof, 0), 0,
                       s->peer_addr, s->peer_key, &s->eof_ctx) == 0)
        s->tx_inflight++;
    }
    if (s->ep) fi_shutdown(s->ep, 0);
    s->peer_gone = true;
    handle_cq(s->fc);
    for (op* o : std::vector<op*>(s->live.begin(), s->live.end())) maybe_free(o);
  }
  pump(s);
  kick();
  return 0;
}

EXS_API int exs_close(int fd) {
  locked g;
  sock* s = find_sock(fd);
  if (!s) return fail(EBADF);
  lib().socks.erase(fd);
  if (s->state == sstate::connected && s->ep && !s->peer_gone) {
    // An orderly end for the peer: the end-of-stream marker, then the
    // provider's shutdown (sends already queued go first).
    if (!s->eof_posted &&
        fi_writedata(s->ep, &s->credit_word, 0, nullptr, pack_data(s->peer_id, data_eof, 0), 0,
                     s->peer_addr, s->peer_key, &s->eof_ctx) == 0) {
      s->eof_posted = true;
      s->tx_inflight++;
    }
    fi_shutdown(s->ep, 0);
  }
  destroy_sock(s);
  return 0;
}

EXS_API int exs_getsockname(int fd, struct sockaddr* addr, socklen_t* len) {
  locked g;
  sock* s = find_sock(fd);
  if (!s) return fail(EBADF);
  if (!addr || !len) return fail(EFAULT);
  sockaddr_storage ss = s->local;
  socklen_t n = s->local_len;
  if (s->ep && s->state == sstate::connected) {
    size_t m = sizeof ss;
    if (fi_getname(&s->ep->fid, &ss, &m) == 0) n = socklen_t(m);
  }
  if (!n) {
    ss = any_addr(s->family);
    n = addr_len(s->family);
  }
  std::memcpy(addr, &ss, std::min(*len, n));
  *len = n;
  return 0;
}

EXS_API int exs_getpeername(int fd, struct sockaddr* addr, socklen_t* len) {
  locked g;
  sock* s = find_sock(fd);
  if (!s) return fail(EBADF);
  if (!addr || !len) return fail(EFAULT);
  if (s->state != sstate::connected) return fail(ENOTCONN);
  std::memcpy(addr, &s->peer, std::min(*len, s->peer_len));
  *len = s->peer_len;
  return 0;
}

EXS_API ssize_t exs_send(int fd, const void* buf, size_t len, int flags, exs_mhandle_t mh,
                         exs_qhandle_t qh, void* context) {
  iovec v{const_cast<void*>(buf), len};
  return post_send(fd, &v, 1, flags, &mh, qh, context);
}

EXS_API ssize_t exs_sendv(int fd, const struct iovec* iov, int iovcnt, int flags,
                          const exs_mhandle_t* mh, exs_qhandle_t qh, void* context) {
  return post_send(fd, iov, iovcnt, flags, mh, qh, context);
}

EXS_API ssize_t exs_recv(int fd, void* buf, size_t len, int flags, exs_mhandle_t mh,
                         exs_qhandle_t qh, void* context) {
  iovec v{buf, len};
  return post_recv(fd, &v, 1, flags, &mh, qh, context);
}

EXS_API ssize_t exs_recvv(int fd, const struct iovec* iov, int iovcnt, int flags,
                          const exs_mhandle_t* mh, exs_qhandle_t qh, void* context) {
  return post_recv(fd, iov, iovcnt, flags, mh, qh, context);
}

EXS_API int exs_cancel(int fd, void* context) {
  locked g;
  sock* s = find_sock(fd);
  if (!s) return fail(EBADF);
  for (op* o : std::vector<op*>(s->live.begin(), s->live.end())) {
    if (o->finished || o->context != context || o->cancel_asked) continue;
    if (o->type == op_type::send) {
      auto it = std::find(s->sends.begin(), s->sends.end(), o);
      if (it == s->sends.end() || o->prov_refs) return fail(EALREADY);  // on the wire
      s->sends.erase(it);
      finish_op(o, ECANCELED, 0, 0);
    } else if (o->type == op_type::recv) {
      // A stream receive at the provider was granted to the sender by its
      // size: taken back, the piece meant for it would land in the next.
      if (s->type == SOCK_STREAM && o->at_provider) return fail(EALREADY);
      auto it = std::find(s->recvs.begin(), s->recvs.end(), o);
      if (it != s->recvs.end()) s->recvs.erase(it);
      if (o->at_provider) {
        // Its credit is out: the next posted receive does not grant one.
        fi_cancel(&s->ep->fid, o);
        s->revoked++;
      }
      finish_op(o, ECANCELED, 0, 0);
      // A stream whose last waiting receive went may post its ring again.
      if (s->type == SOCK_STREAM) stream_deliver(s);
    } else if (o->type == op_type::accept) {
      auto it = std::find(s->accepts.begin(), s->accepts.end(), o);
      if (it == s->accepts.end()) return fail(EALREADY);
      s->accepts.erase(it);
      finish_op(o, ECANCELED, 0, 0);
    } else {
      return fail(EALREADY);
    }
    o->cancel_asked = true;
    maybe_free(o);
    pump(s);
    kick();
    return 0;
  }
  return fail(ENOENT);
}

EXS_API int exs_setsockopt(int fd, int level, int name, const void* val, socklen_t len) {
  locked g;
  sock* s = find_sock(fd);
  if (!s) return fail(EBADF);
  if (level != EXS_SOL_EXS) return fail(ENOPROTOOPT);
  if (!val && len) return fail(EFAULT);
  switch (name) {
    case EXS_SO_PROVIDER: {
      if (s->state != sstate::fresh) return fail(EISCONN);
      std::string p(static_cast<const char*>(val), len);
      p.resize(std::strlen(p.c_str()));
      s->prov = p;
      return 0;
    }
    case EXS_SO_STREAM_BUFS:
    case EXS_SO_STREAM_CHUNK: {
      if (len != sizeof(int)) return fail(EINVAL);
      int v;
      std::memcpy(&v, val, sizeof v);
      if (s->state != sstate::fresh && s->state != sstate::bound && s->state != sstate::listening)
        return fail(EISCONN);
      if (name == EXS_SO_STREAM_BUFS) {
        if (v < 1 || v > 1024) return fail(EINVAL);
        s->stream_bufs = v;
      } else {
        if (v < 64 || v > (16 << 20)) return fail(EINVAL);
        s->stream_chunk = size_t(v);
      }
      return 0;
    }
    default:
      return fail(ENOPROTOOPT);
  }
}

EXS_API int exs_getsockopt(int fd, int level, int name, void* val, socklen_t* len) {
  locked g;
  sock* s = find_sock(fd);
  if (!s) return fail(EBADF);
  if (!val || !len) return fail(EFAULT);
  auto put_int = [&](int v) {
    if (*len < sizeof(int)) return fail(EINVAL);
    std::memcpy(val, &v, sizeof v);
    *len = sizeof v;
    return 0;
  };
  auto put_str = [&](const std::string& v) {
    if (*len < v.size() + 1) return fail(ERANGE);
    std::memcpy(val, v.c_str(), v.size() + 1);
    *len = socklen_t(v.size() + 1);
    return 0;
  };
  if (level == SOL_SOCKET) {
    switch (name) {
      case SO_TYPE: return put_int(s->type);
      case SO_DOMAIN: return put_int(s->family);
      case SO_ACCEPTCONN: return put_int(s->state == sstate::listening);
      case SO_ERROR: {
        int e = s->so_error;
        s->so_error = 0;
        update_ready(s);
        return put_int(e);
      }
      default: return fail(ENOPROTOOPT);
    }
  }
  if (level != EXS_SOL_EXS) return fail(ENOPROTOOPT);
  switch (name) {
    case EXS_SO_PROVIDER: return put_str(provider_of(s));
    case EXS_SO_FABRIC:
      if (!s->fc) return fail(ENOTCONN);
      return put_str(s->fc->fabric_name);
    case EXS_SO_DOMAIN:
      if (!s->fc) return fail(ENOTCONN);
      return put_str(s->fc->domain_name);
    case EXS_SO_STREAM_BUFS: return put_int(s->stream_bufs);
    case EXS_SO_STREAM_CHUNK: return put_int(int(s->stream_chunk));
    default: return fail(ENOPROTOOPT);
  }
}

EXS_API int exs_poll(struct pollfd* fds, nfds_t nfds, int timeout_ms) {
  if (nfds && !fds) return fail(EFAULT);
  library& L = lib();
  std::unique_lock lk{L.m};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int n = 0;
    for (nfds_t i = 0; i < nfds; ++i) {
      fds[i].revents = 0;
      if (fds[i].fd < 0) continue;
      sock* s = find_sock(fds[i].fd);
      if (!s) fds[i].revents = POLLNVAL;
      else fds[i].revents = short(ready_events(s) & (fds[i].events | POLLHUP | POLLERR));
      if (fds[i].revents) ++n;
    }
    if (n || timeout_ms == 0) return n;
    // Asleep here, this thread needs the progress thread: a lease it (or
    // another thread) left from spinning in exs_qdequeue ends now.
    if (L.spin_lease != std::chrono::steady_clock::time_point{}) {
      L.spin_lease = {};
      kick();
    }
    if (timeout_ms < 0) L.state_cv.wait(lk);
    else if (L.state_cv.wait_until(lk, deadline) == std::cv_status::timeout) timeout_ms = 0;
  }
}
