// SPDX-License-Identifier: MIT
// libexs: connection management from the fabric's event queue. Endpoints
// carry their socket's id as context (never a pointer: an event may outlive
// its socket), connection requests wait for an exs_accept, and a peer's
// FI_SHUTDOWN or a connection error completes every outstanding operation.
#include "exs_impl.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace exs {

namespace {

sock* sock_of(const fid* f) {
  library& L = lib();
  auto fi = L.fid_ids.find(f);
  if (fi == L.fid_ids.end()) return nullptr;
  auto it = L.by_id.find(fi->second);
  return it == L.by_id.end() ? nullptr : it->second;
}

bool parse_blob(const void* data, size_t len, int type, cm_blob* out) {
  if (len < sizeof(cm_blob)) return false;
  std::memcpy(out, data, sizeof *out);
  return out->magic == cm_magic && int(out->type) == type;
}

void take_peer(sock* s, const cm_blob& b) {
  s->peer_id = b.id;
  s->peer_key = b.key;
  s->peer_addr = b.addr;
  s->peer_chunk = b.chunk;
  // Added, not assigned: on the connecting side the peer's first credit
  // writes can reach the CQ before FI_CONNECTED reaches the EQ, and the
  // progress thread reads the CQ first.
  s->send_credits += b.credits;
  // The ring was posted before anything the credit writes grant.
  if (s->type == SOCK_STREAM && b.credits) s->grants.push_front({0, b.credits});
}

void connection_lost(sock* s, int err) {
  // Completions already queued (the data before the end) go first.
  handle_cq(s->fc);
  if (s->peer_gone) return;
  s->peer_gone = true;
  if (err) s->so_error = err;
  if (s->type == SOCK_STREAM) stream_deliver(s);
  int recv_err = s->peer_eof ? 0 : (err ? err : ECONNRESET);
  int send_err = s->peer_eof ? EPIPE : (err ? err : ECONNRESET);
  fail_all(s, send_err, recv_err, EXS_EVT_FLAG_EOF);
  update_ready(s);
}

void on_connected(sock* s, const void* data, size_t len) {
  if (s->listener) {  // accepted
    sock* ls = s->listener;
    s->listener = nullptr;
    op* o = s->accept_op;
    s->accept_op = nullptr;
    s->state = sstate::connected;
    lib().socks[s->fd] = s;
    size_t n = sizeof s->local;
    if (fi_getname(&s->ep->fid, &s->local, &n) == 0) s->local_len = socklen_t(n);
    if (o) {
      o->new_fd = s->fd;
      o->addr = s->peer;
      o->addrlen = s->peer_len;
      finish_op(o, 0, 0, 0);
      maybe_free(o);
    }
    (void)ls;
    pump(s);
    return;
  }
  if (s->state != sstate::connecting) return;
  cm_blob b{};
  op* o = s->connect_op;
  s->connect_op = nullptr;
  if (!parse_blob(data, len, s->type, &b)) {
    s->state = sstate::connected;  // so that shutdown applies
    fi_shutdown(s->ep, 0);
    s->peer_gone = true;
    s->so_error = ECONNREFUSED;
    if (o) { finish_op(o, ECONNREFUSED, 0, 0); maybe_free(o); }
    update_ready(s);
    return;
  }
  take_peer(s, b);
  s->state = sstate::connected;
  size_t n = sizeof s->local;
  if (fi_getname(&s->ep->fid, &s->local, &n) == 0) s->local_len = socklen_t(n);
  if (o) { finish_op(o, 0, 0, 0); maybe_free(o); }
  pump(s);
}

void on_connreq(sock* ls, fi_info* req, const void* data, size_t len) {
  cm_blob b{};
  if (!ls || ls->state != sstate::listening || !parse_blob(data, len, ls->type, &b)) {
    // Not ours, or a different socket type: refused.
    if (ls && ls->pep) fi_reject(ls->pep, req->handle, nullptr, 0);
    fi_freeinfo(req);
    return;
  }
  if (ls->accepts.empty() && int(ls->connreqs.size()) >= ls->backlog) {
    fi_reject(ls->pep, req->handle, nullptr, 0);
    fi_freeinfo(req);
    return;
  }
  ls->connreqs.emplace_back(req, b);
  if (lib().draining) {
    // An endpoint was just closed and its address may be given to the one
    // an accept would open, while entries naming the old one may follow.
    lib().serve_later.push_back(ls->id);
  } else {
    serve_accepts(ls);
  }
  update_ready(ls);
}

}  // namespace

void serve_accepts(sock* ls) {
  while (!ls->accepts.empty() && !ls->connreqs.empty()) {
    op* o = ls->accepts.front();
    ls->accepts.pop_front();
    auto [req, b] = ls->connreqs.front();
    ls->connreqs.pop_front();
    if (int e = start_accept(ls, req, b, o)) {
      finish_op(o, e, 0, 0);
      maybe_free(o);
    }
  }
  update_ready(ls);
}

void close_fid(fabric_ctx* fc, fid* f) {
  library& L = lib();
  L.fid_ids.erase(f);
  fi_close(f);
  bool was = L.draining;
  L.draining = true;
  handle_eq(fc);
  L.draining = was;
  if (!was) {
    std::vector<uint32_t> later;
    later.swap(L.serve_later);
    for (uint32_t id : later) {
      auto it = L.by_id.find(id);
      if (it != L.by_id.end()) serve_accepts(it->second);
    }
  }
}

// Opens the endpoint for a connection request and accepts it; `o`
// completes when the connection is up. Returns an errno on failure (the
// request is then rejected and freed).
int start_accept(sock* ls, fi_info* req, const cm_blob& peer, op* o) {
  sock* s = new_sock(ls->type, ls->family);
  int err = 0;
  if (!s) err = ENOMEM;
  if (!err) {
    s->fc = ls->fc;
    s->prov = ls->prov;
    s->stream_bufs = ls->stream_bufs;
    s->stream_chunk = ls->stream_chunk;
    s->info = fi_dupinfo(req);
    int r = fi_endpoint(s->fc->domain, req, &s->ep, nullptr);
    if (!r) lib().fid_ids[&s->ep->fid] = s->id;
    if (!r) r = fi_ep_bind(s->ep, &s->fc->eq->fid, 0);
    if (!r) r = fi_ep_bind(s->ep, &s->fc->cq->fid, FI_TRANSMIT | FI_RECV);
    if (!r) r = fi_enable(s->ep);
    if (r) err = errno_of_fi(r);
  }
  if (!err) err = setup_connected(s);
  if (!err) {
    take_peer(s, peer);
    cm_blob mine{cm_magic, uint32_t(s->type), s->id,
                 uint32_t(s->type == SOCK_STREAM ? s->stream_bufs : 0),
                 s->type == SOCK_STREAM ? s->stream_chunk : 0, credit_key(s),
                 s->fc->mr_virt ? uint64_t(uintptr_t(&s->credit_word)) : 0};
    int r = fi_accept(s->ep, &mine, sizeof mine);
    if (r) err = errno_of_fi(r);
  }
  if (!err) {
    if (req->dest_addr && req->dest_addrlen <= sizeof s->peer) {
      std::memcpy(&s->peer, req->dest_addr, req->dest_addrlen);
      s->peer_len = socklen_t(req->dest_addrlen);
    }
    s->listener = ls;
    s->accept_op = o;
    s->state = sstate::connecting;
  }
  if (err) {
    fi_reject(ls->pep, req->handle, nullptr, 0);
    fi_freeinfo(req);
    if (s) destroy_sock(s);
    return err;
  }
  fi_freeinfo(req);
  return 0;
}

void handle_eq(fabric_ctx* fc) {
  alignas(fi_eq_cm_entry) char buf[sizeof(fi_eq_cm_entry) + 512];
  for (;;) {
    uint32_t event = 0;
    ssize_t n = fi_eq_read(fc->eq, &event, buf, sizeof buf, 0);
    if (n == -FI_EAVAIL) {
      fi_eq_err_entry ee{};
      if (fi_eq_readerr(fc->eq, &ee, 0) < 0) return;
      sock* s = sock_of(ee.fid);
      if (!s) continue;
      int err = errno_of_fi(ee.err ? ee.err : FI_ECONNREFUSED);
      if (s->state == sstate::connecting && s->connect_op) {
        op* o = s->connect_op;
        s->connect_op = nullptr;
        s->peer_gone = true;
        s->so_error = err;
        finish_op(o, err, 0, 0);
        maybe_free(o);
        update_ready(s);
      } else if (s->state == sstate::connecting && s->listener) {
        // The peer left before the connection was up: that accept fails.
        op* o = s->accept_op;
        s->accept_op = nullptr;
        if (o) { finish_op(o, ECONNABORTED, 0, 0); maybe_free(o); }
        destroy_sock(s);
      } else {
        connection_lost(s, err);
      }
      continue;
    }
    if (n < 0) return;
    auto* cm = reinterpret_cast<fi_eq_cm_entry*>(buf);
    size_t dlen = size_t(n) > sizeof *cm ? size_t(n) - sizeof *cm : 0;
    sock* s = sock_of(cm->fid);
    switch (event) {
      case FI_CONNREQ:
        if (s) on_connreq(s, cm->info, cm->data, dlen);
        else fi_freeinfo(cm->info);
        break;
      case FI_CONNECTED:
        if (s) on_connected(s, cm->data, dlen);
        break;
      case FI_SHUTDOWN:
        if (s) connection_lost(s, 0);
        break;
      default:
        break;
    }
  }
}

}  // namespace exs
