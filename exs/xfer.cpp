// SPDX-License-Identifier: MIT
// libexs: moving data. Every fi_send goes to a receive the peer has granted
// a credit for, so nothing ever waits in the provider for a buffer:
// - SOCK_SEQPACKET: the application's buffers are posted with fi_recv
//   (zero copy, boundaries kept, a short buffer reports truncation); each
//   posted receive grants the peer one message.
// - SOCK_STREAM: a ring of the socket's own buffers is posted; the sender
//   cuts its bytes into pieces of at most one buffer, one credit each; a
//   receive takes whatever has arrived and each emptied buffer, posted
//   again, grants a credit back. While the application's receives wait
//   for bytes, emptied ring buffers stay unposted; once none is left at
//   the provider, the waiting receives are posted themselves, each granted
//   with its size (data_grant), and filled without a copy until none
//   waits or is posted, when the ring is posted again (refill).
// Credits and the end-of-stream marker travel as remote CQ data of
// zero-byte fi_writedata to the peer's credit region, which never consumes
// a posted receive (FI_RX_CQ_DATA is refused at fi_getinfo). Every send is
// posted with a completion (never fi_inject), so it completes exactly once.
#include "exs_impl.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace exs {

void maybe_free(op* o) {
  if (!o->finished || o->prov_refs > 0) return;
  sock* s = o->s;
  s->live.remove(o);
  delete o;
}

void finish_op(op* o, int err, size_t bytes, int flags) {
  if (o->finished) return;
  o->finished = true;
  for (int i = 0; i < o->iovcnt; ++i)
    if (o->rg[i]) o->rg[i]->users--;
  exs_event_t ev{};
  switch (o->type) {
    case op_type::send: ev.exs_evt_type = EXS_EVT_SEND; break;
    case op_type::recv: ev.exs_evt_type = EXS_EVT_RECV; break;
    case op_type::accept: ev.exs_evt_type = EXS_EVT_ACCEPT; break;
    case op_type::connect: ev.exs_evt_type = EXS_EVT_CONNECT; break;
  }
  ev.exs_evt_errno = err;
  ev.exs_evt_fd = o->s->fd;
  ev.exs_evt_flags = flags;
  ev.exs_evt_bytes = err ? 0 : static_cast<ssize_t>(bytes);
  ev.exs_evt_context = o->context;
  ev.exs_evt_u.accept.fd = o->type == op_type::accept && !err ? o->new_fd : -1;
  if (o->type == op_type::accept && !err) {
    ev.exs_evt_u.accept.addr = o->addr;
    ev.exs_evt_u.accept.addrlen = o->addrlen;
  }
  if (o->q) push_event(o->q, ev);
}

ssize_t recv_at_provider(sock* s, op* o) {
  void* d[EXS_IOV_MAX];
  for (int i = 0; i < o->iovcnt; ++i) d[i] = desc_for(o->rg[i], s->fc);
  fi_msg m{};
  m.msg_iov = o->iov;
  m.desc = d;
  m.iov_count = size_t(o->iovcnt);
  m.context = o;
  ssize_t r = fi_recvmsg(s->ep, &m, 0);
  if (r == 0) {
    o->prov_refs++;
    o->at_provider = true;
  }
  return r;
}

// Completes every operation of `s` not yet completed: the connection is
// over (peer's end, an error, a local shutdown or close).
void fail_all(sock* s, int send_err, int recv_err, int recv_flags) {
  std::vector<op*> all(s->live.begin(), s->live.end());
  for (op* o : all) {
    if (o->finished) continue;
    if (o->type == op_type::recv) {
      finish_op(o, recv_err, 0, recv_err ? 0 : recv_flags);
      if (o->at_provider && s->ep) fi_cancel(&s->ep->fid, o);
    } else if (o->type == op_type::send) {
      finish_op(o, send_err, 0, 0);
    } else {
      finish_op(o, send_err ? send_err : ECONNABORTED, 0, 0);
    }
  }
  s->sends.clear();
  s->recvs.clear();
  s->accepts.clear();
  for (op* o : all) maybe_free(o);
}

namespace {

void retry_later(sock* s) {
  auto& r = lib().retry;
  if (std::find(r.begin(), r.end(), s) == r.end()) r.push_back(s);
}

bool can_post(const sock* s) {
  return s->state == sstate::connected && s->ep && !s->peer_gone && !(s->shut_wr && s->shut_rd);
}

// Grants what was posted, one write at a time (what is posted meanwhile
// goes out together in the next). A stream grants its runs in the order
// its buffers were posted.
void post_credit(sock* s) {
  if (s->credit_inflight || s->tx_inflight >= s->tx_max || !can_post(s)) return;
  uint64_t data, n;
  if (s->type == SOCK_STREAM) {
    if (s->owed_runs.empty()) return;
    credit_run& run = s->owed_runs.front();
    if (run.bytes == 0) {  // ring buffers
      n = std::min<uint64_t>(run.count, 0x0fffffff);
      data = pack_data(s->peer_id, data_credit, n);
    } else {
      n = std::min<uint64_t>(run.count, grant_max_count);
      data = pack_data(s->peer_id, data_grant, ((n - 1) << 24) | run.bytes);
    }
  } else {
    if (!s->owed) return;
    n = std::min<uint64_t>(s->owed, 0x0fffffff);
    data = pack_data(s->peer_id, data_credit, n);
  }
  ssize_t r = fi_writedata(s->ep, &s->credit_word, 0, nullptr, data, 0, s->peer_addr, s->peer_key,
                           &s->credit_ctx);
  if (r == -FI_EAGAIN) return retry_later(s);
  if (r != 0) return;
  if (s->type == SOCK_STREAM) {
    if ((s->owed_runs.front().count -= n) == 0) s->owed_runs.pop_front();
  } else {
    s->owed -= n;
  }
  s->credit_inflight = true;
  s->tx_inflight++;
}

// Appends a stream credit of `bytes` (0: a ring buffer) to `runs`.
void add_run(std::deque<credit_run>& runs, size_t bytes, uint64_t count) {
  if (!runs.empty() && runs.back().bytes == bytes) runs.back().count += count;
  else runs.push_back({bytes, count});
}

void post_eof(sock* s) {
  if (!s->shut_wr || s->eof_posted || !s->sends.empty() || s->data_inflight ||
      s->tx_inflight >= s->tx_max || s->state != sstate::connected || !s->ep || s->peer_gone)
    return;
  ssize_t r = fi_writedata(s->ep, &s->credit_word, 0, nullptr, pack_data(s->peer_id, data_eof, 0), 0,
                           s->peer_addr, s->peer_key, &s->eof_ctx);
  if (r == -FI_EAGAIN) return retry_later(s);
  s->eof_posted = true;
  if (r == 0) s->tx_inflight++;
}

// Descriptors for an op's iovs (FI_MR_LOCAL providers).
void descs(sock* s, op* o, size_t first, size_t n, void** out) {
  for (size_t i = 0; i < n; ++i) out[i] = desc_for(o->rg[first + i], s->fc);
}

// The next stream piece of `o`: at most what its credit allows (a ring
// buffer of the peer's, or a receive it posted), iov_limit entries.
size_t next_piece(sock* s, op* o, iovec* out, void** desc, size_t* cnt) {
  const credit_run& run = s->grants.front();
  size_t budget = run.bytes ? run.bytes : s->peer_chunk, bytes = 0, n = 0;
  size_t i = o->cur_iov, off = o->cur_off;
  while (i < size_t(o->iovcnt) && budget && n < s->iov_limit) {
    size_t avail = o->iov[i].iov_len - off;
    if (!avail) { ++i; off = 0; continue; }
    size_t take = std::min(avail, budget);
    out[n].iov_base = static_cast<char*>(o->iov[i].iov_base) + off;
    out[n].iov_len = take;
    desc[n] = desc_for(o->rg[i], s->fc);
    ++n;
    bytes += take;
    budget -= take;
    off += take;
    if (off == o->iov[i].iov_len) { ++i; off = 0; }
  }
  *cnt = n;
  return bytes;
}

void advance(op* o, size_t bytes) {
  while (bytes) {
    size_t avail = o->iov[o->cur_iov].iov_len - o->cur_off;
    size_t take = std::min(avail, bytes);
    o->cur_off += take;
    bytes -= take;
    if (o->cur_off == o->iov[o->cur_iov].iov_len) { o->cur_iov++; o->cur_off = 0; }
  }
}

// Hands the front sends to the provider while credits and room last.
void post_sends(sock* s) {
  while (!s->sends.empty() && can_post(s)) {
    op* o = s->sends.front();
    if (s->type == SOCK_SEQPACKET) {
      if (!s->send_credits || s->tx_inflight >= s->tx_max) return;
      void* d[EXS_IOV_MAX] = {};
      descs(s, o, 0, o->iovcnt, d);
      iovec one{nullptr, 0};
      fi_msg m{};
      m.msg_iov = o->iovcnt ? o->iov : &one;
      m.desc = d;
      m.iov_count = o->iovcnt ? o->iovcnt : 1;
      m.context = o;
      ssize_t r = fi_sendmsg(s->ep, &m, FI_COMPLETION);
      if (r == -FI_EAGAIN) return retry_later(s);
      s->sends.pop_front();
      if (r != 0) { finish_op(o, errno_of_fi(int(r)), 0, 0); maybe_free(o); continue; }
      s->send_credits--;
      s->tx_inflight++;
      s->data_inflight++;
      o->prov_refs++;
      o->posted = o->total;
      continue;
    }
    while (o->posted < o->total) {
      if (s->grants.empty() || s->tx_inflight >= s->tx_max) return;
      iovec piece[EXS_IOV_MAX];
      void* d[EXS_IOV_MAX];
      size_t cnt = 0;
      size_t bytes = next_piece(s, o, piece, d, &cnt);
      fi_msg m{};
      m.msg_iov = piece;
      m.desc = d;
      m.iov_count = cnt;
      m.context = o;
      ssize_t r = fi_sendmsg(s->ep, &m, FI_COMPLETION);
      if (r == -FI_EAGAIN) return retry_later(s);
      if (r != 0) {
        s->sends.pop_front();
        if (!o->prov_refs) finish_op(o, errno_of_fi(int(r)), 0, 0);
        o->cancel_asked = true;  // the rest fails with it
        maybe_free(o);
        goto next;
      }
      advance(o, bytes);
      o->posted += bytes;
      o->prov_refs++;
      s->send_credits--;
      if (--s->grants.front().count == 0) s->grants.pop_front();
      s->tx_inflight++;
      s->data_inflight++;
    }
    s->sends.pop_front();
    if (o->total == 0) { finish_op(o, 0, 0, 0); maybe_free(o); }
  next:;
  }
}

bool rx_open(const sock* s) {
  return s->ep && !s->peer_gone && !s->peer_eof && !s->shut_rd && s->state == sstate::connected;
}

void repost(sock* s, rxbuf* b) {
  b->len = b->off = 0;
  if (b->posted || !rx_open(s)) return;
  void* d = s->ring_mr ? fi_mr_desc(s->ring_mr) : nullptr;
  if (fi_recv(s->ep, b->data, b->cap, d, 0, b) == 0) {
    b->posted = true;
    s->ring_posted++;
    add_run(s->owed_runs, 0, 1);
  }
}

// Posts a waiting stream receive to the provider itself, granted with its
// size (at most grant_cap: the sender sends no more, and a receive returns
// what arrived).
bool post_direct(sock* s, op* o) {
  if (o->iovcnt > int(s->iov_limit) || o->total == 0) return false;
  if (recv_at_provider(s, o) != 0) return false;
  if (!s->grant_cap) s->grant_cap = on_this_host(s->peer) ? grant_max_bytes : grant_piece_bytes;
  add_run(s->owed_runs, std::min(o->total, s->grant_cap), 1);
  return true;
}

// Decides what a stream posts next: the ring while no receive waits (the
// sender may go on into it), the waiting receives themselves once no ring
// buffer is left at the provider and no ring byte is unread (bytes keep
// their order: every buffer posted before a receive fills before it).
void refill(sock* s) {
  if (s->type != SOCK_STREAM || !rx_open(s)) return;
  auto waiting = std::find_if(s->recvs.begin(), s->recvs.end(),
                              [](const op* o) { return !o->at_provider; });
  bool post_ring = s->recvs.empty();
  if (waiting != s->recvs.end() && s->ring_posted == 0 && s->ready.empty()) {
    for (; waiting != s->recvs.end(); ++waiting)
      if (!post_direct(s, *waiting)) {
        post_ring = true;  // this one waits for the ring's bytes
        break;
      }
  }
  if (post_ring)
    for (rxbuf& b : s->ring)
      if (!b.posted && b.len == 0) repost(s, &b);
}

size_t copy_into(op* o, size_t at, const char* src, size_t n) {
  size_t copied = 0;
  for (int i = 0; i < o->iovcnt && n; ++i) {
    size_t len = o->iov[i].iov_len;
    if (at >= len) { at -= len; continue; }
    size_t take = std::min(len - at, n);
    std::memcpy(static_cast<char*>(o->iov[i].iov_base) + at, src, take);
    src += take;
    n -= take;
    copied += take;
    at = 0;
  }
  return copied;
}

}  // namespace

void stream_deliver(sock* s) {
  while (!s->recvs.empty()) {
    op* o = s->recvs.front();
    if (o->at_provider) {
      // The provider fills it (on_entry), before any ring byte that
      // follows; at the end of the stream nothing more comes.
      if (!s->peer_eof && !s->peer_gone) break;
      s->recvs.pop_front();
      if (s->peer_eof) finish_op(o, 0, 0, EXS_EVT_FLAG_EOF);
      else finish_op(o, s->so_error ? s->so_error : ECONNRESET, 0, 0);
      if (s->ep) fi_cancel(&s->ep->fid, o);
      maybe_free(o);
      continue;
    }
    if (s->ready.empty()) {
      if (!s->peer_eof && !s->peer_gone) break;
      s->recvs.pop_front();
      if (s->peer_eof) finish_op(o, 0, 0, EXS_EVT_FLAG_EOF);
      else finish_op(o, s->so_error ? s->so_error : ECONNRESET, 0, 0);
      maybe_free(o);
      continue;
    }
    size_t got = 0;
    while (got < o->total && !s->ready.empty()) {
      rxbuf* b = s->ready.front();
      size_t n = copy_into(o, got, b->data + b->off, std::min(b->len - b->off, o->total - got));
      b->off += n;
      got += n;
      if (b->off == b->len) {
        s->ready.pop_front();
        b->len = b->off = 0;  // posted again by refill, when it should be
      }
    }
    s->recvs.pop_front();
    finish_op(o, 0, got, 0);
    maybe_free(o);
  }
  refill(s);
}

void pump(sock* s) {
  if (s->state == sstate::connected && s->ep) {
    post_credit(s);
    post_sends(s);
    post_eof(s);
  }
  update_ready(s);
}

int setup_connected(sock* s) {
  fabric_ctx* fc = s->fc;
  s->tx_max = std::min<size_t>(s->info->tx_attr->size ? s->info->tx_attr->size : 64, 256);
  s->iov_limit = std::clamp<size_t>(s->info->tx_attr->iov_limit, 1, EXS_IOV_MAX);
  s->max_msg = s->info->ep_attr->max_msg_size;
  s->credit_ctx.kind = ctx_kind::credit;
  s->credit_ctx.s = s;
  s->eof_ctx.kind = ctx_kind::eof;
  s->eof_ctx.s = s;
  int r = fi_mr_reg(fc->domain, &s->credit_word, sizeof s->credit_word, FI_REMOTE_WRITE, 0,
                    fresh_key(), 0, &s->credit_mr, nullptr);
  if (r) return errno_of_fi(r);
  if (s->type != SOCK_STREAM) return 0;
  s->ring_bytes = size_t(s->stream_bufs) * s->stream_chunk;
  s->ring_mem = std::make_unique_for_overwrite<char[]>(s->ring_bytes);
  s->ring.resize(s->stream_bufs);
  if (fc->mr_local &&
      fi_mr_reg(fc->domain, s->ring_mem.get(), s->ring_bytes, FI_RECV, 0, fresh_key(), 0,
                &s->ring_mr, nullptr))
    return ENOMEM;
  for (int i = 0; i < s->stream_bufs; ++i) {
    rxbuf& b = s->ring[i];
    b.kind = ctx_kind::rxbuf;
    b.s = s;
    b.data = s->ring_mem.get() + size_t(i) * s->stream_chunk;
    b.cap = s->stream_chunk;
    void* d = s->ring_mr ? fi_mr_desc(s->ring_mr) : nullptr;
    r = int(fi_recv(s->ep, b.data, b.cap, d, 0, &b));
    if (r) return errno_of_fi(r);
    b.posted = true;
    s->ring_posted++;
  }
  return 0;
}

uint64_t credit_key(sock* s) {
  return s->credit_mr ? fi_mr_key(s->credit_mr) : 0;
}

namespace {

void remote_data(uint64_t data) {
  library& L = lib();
  auto it = L.by_id.find(uint32_t(data >> 32));
  if (it == L.by_id.end()) return;
  sock* s = it->second;
  uint64_t kind = (data >> 28) & 0xf, n = data & 0x0fffffff;
  if (kind == data_credit) {
    s->send_credits += n;
    if (s->type == SOCK_STREAM) add_run(s->grants, 0, n);
  } else if (kind == data_grant) {
    uint64_t count = (n >> 24) + 1;
    s->send_credits += count;
    add_run(s->grants, size_t(n & grant_max_bytes), count);
  } else if (kind == data_eof) {
    s->peer_eof = true;
    if (s->type == SOCK_SEQPACKET) {
      // Nothing more will arrive: every posted receive sees the end.
      for (op* o : std::vector<op*>(s->recvs.begin(), s->recvs.end())) {
        finish_op(o, 0, 0, EXS_EVT_FLAG_EOF);
        if (o->at_provider && s->ep) fi_cancel(&s->ep->fid, o);
      }
      s->recvs.clear();
    } else {
      stream_deliver(s);
    }
  }
  pump(s);
}

// A provider error on an operation nobody cancelled: the connection broke.
int lost_errno(sock* s, op* o) {
  if (o->cancel_asked) return ECANCELED;
  if (s->peer_eof) return o->type == op_type::send ? EPIPE : 0;
  return s->so_error ? s->so_error : ECONNRESET;
}

void on_entry(const fi_cq_data_entry& e, int err, size_t olen) {
  if (e.flags & FI_REMOTE_CQ_DATA && (!e.op_context || (e.flags & FI_REMOTE_WRITE))) {
    if (!err) remote_data(e.data);
    return;
  }
  auto* h = static_cast<ctx_hdr*>(e.op_context);
  if (!h) return;
  sock* s = h->s;
  switch (h->kind) {
    case ctx_kind::credit:
      s->credit_inflight = false;
      s->tx_inflight--;
      break;
    case ctx_kind::eof:
      s->tx_inflight--;
      s->eof_sent = true;
      break;
    case ctx_kind::rxbuf: {
      auto* b = static_cast<rxbuf*>(h);
      b->posted = false;
      s->ring_posted--;
      if (err) break;  // cancelled at the end of the connection
      b->len = e.len;
      b->off = 0;
      if (b->len) s->ready.push_back(b);
      stream_deliver(s);
      break;
    }
    case ctx_kind::op: {
      auto* o = static_cast<op*>(h);
      o->prov_refs--;
      if (o->type == op_type::send) {
        s->tx_inflight--;
        s->data_inflight--;
        if (err && !o->finished) {
          finish_op(o, lost_errno(s, o), 0, 0);
        } else if (o->posted == o->total && o->prov_refs == 0 && !o->cancel_asked) {
          finish_op(o, 0, o->total, 0);
        } else if (o->cancel_asked && o->prov_refs == 0) {
          finish_op(o, ECANCELED, 0, 0);
        }
      } else if (o->type == op_type::recv) {
        o->at_provider = false;
        auto it = std::find(s->recvs.begin(), s->recvs.end(), o);
        if (it != s->recvs.end()) s->recvs.erase(it);
        if (!err) {
          finish_op(o, 0, e.len, 0);
        } else if (err == FI_ETRUNC) {
          finish_op(o, 0, o->total, EXS_EVT_FLAG_TRUNC);
          (void)olen;
        } else if (err == FI_ECANCELED) {
          int le = lost_errno(s, o);
          finish_op(o, le, 0, le ? 0 : EXS_EVT_FLAG_EOF);
        } else {
          finish_op(o, errno_of_fi(err), 0, 0);
        }
        if (s->type == SOCK_STREAM) stream_deliver(s);  // what waited behind it
      }
      maybe_free(o);
      break;
    }
  }
  pump(s);
}

}  // namespace

void handle_cq(fabric_ctx* fc) {
  fi_cq_data_entry es[32];
  for (;;) {
    ssize_t n = fi_cq_read(fc->cq, es, 32);
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) on_entry(es[i], 0, 0);
      continue;
    }
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry ee{};
      if (fi_cq_readerr(fc->cq, &ee, 0) != 1) return;
      fi_cq_data_entry e{};
      e.op_context = ee.op_context;
      e.flags = ee.flags;
      e.len = ee.len;
      e.data = ee.data;
      on_entry(e, ee.err, ee.olen);
      continue;
    }
    return;
  }
}

}  // namespace exs
