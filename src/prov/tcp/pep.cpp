// SPDX-License-Identifier: MIT
// weft — the tcp passive endpoint: a listening socket bound at open, the
// sockets it accepts read until their cm_req is in, and one FI_CONNREQ
// event per request whose info->handle is the request (a connreq) and whose
// data is the requester's private data. fi_endpoint with that info takes
// the socket; fi_reject answers cm_resp(FI_ECONNREFUSED) with the
// application's data and closes. Progress runs from the bound EQ, and from
// the fabric's progress thread when control progress is automatic.
#include "core/info.hpp"
#include "core/log.hpp"
#include "prov/tcp/tcp.hpp"
#include "util/eq.hpp"
#include "util/net.hpp"
#include "util/wait.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace weft::tcp {

namespace {

pep* self(fid_t f) noexcept { return pep::from(f); }
bool is_pep(const fid* f) noexcept { return util::is_class(f, FI_CLASS_PEP); }

int cm_getname(fid_t f, void* addr, size_t* addrlen) noexcept {
  if (!is_pep(f)) return to_fi(errc::inval);
  return abi_guard([&] { return self(f)->getname(addr, addrlen); });
}
int cm_setname(fid_t f, void* addr, size_t addrlen) noexcept {
  if (!is_pep(f)) return to_fi(errc::inval);
  return abi_guard([&] { return self(f)->setname(addr, addrlen); });
}
int cm_listen(fid_pep* p) noexcept {
  if (!p || !is_pep(&p->fid)) return to_fi(errc::inval);
  return abi_guard([&] { return pep::from(p)->listen(); });
}
int cm_reject(fid_pep* p, fid_t handle, const void* param, size_t len) noexcept {
  if (!p || !is_pep(&p->fid)) return to_fi(errc::inval);
  return abi_guard([&] { return pep::from(p)->reject(handle, param, len); });
}

const fi_ops_cm pep_cm_ops = {
    .size = sizeof(fi_ops_cm),
    .setname = cm_setname,
    .getname = cm_getname,
    WEFT_NOSYS(fi_ops_cm, getpeer),
    WEFT_NOSYS(fi_ops_cm, connect),
    .listen = cm_listen,
    WEFT_NOSYS(fi_ops_cm, accept),
    .reject = cm_reject,
    WEFT_NOSYS(fi_ops_cm, shutdown),
    WEFT_NOSYS(fi_ops_cm, join),
};

int ep_getopt(fid_t f, int level, int name, void* val, size_t* len) noexcept {
  if (!is_pep(f)) return to_fi(errc::inval);
  return self(f)->getopt(level, name, val, len);
}
int ep_setopt(fid_t, int, int, const void*, size_t) noexcept {
  return to_fi(errc::noprotoopt);  // FI_OPT_CM_DATA_SIZE is read-only
}

const fi_ops_ep pep_ep_ops = {
    .size = sizeof(fi_ops_ep),
    WEFT_NOSYS(fi_ops_ep, cancel),
    .getopt = ep_getopt,
    .setopt = ep_setopt,
    WEFT_NOSYS(fi_ops_ep, tx_ctx),
    WEFT_NOSYS(fi_ops_ep, rx_ctx),
    WEFT_NOSYS(fi_ops_ep, rx_size_left),
    WEFT_NOSYS(fi_ops_ep, tx_size_left),
};

// A connection request is a handle, not an object the application closes.
constexpr fi_ops connreq_ops = {
    .size = sizeof(fi_ops),
    WEFT_NOSYS(fi_ops, close),
    WEFT_NOSYS(fi_ops, bind),
    WEFT_NOSYS(fi_ops, control),
    WEFT_NOSYS(fi_ops, ops_open),
    WEFT_NOSYS(fi_ops, tostr),
    WEFT_NOSYS(fi_ops, ops_set),
};

bool set_addr(void*& field, size_t& len, const sockaddr_storage& ss) noexcept {
  size_t n = util::sockaddr_len(reinterpret_cast<const sockaddr*>(&ss));
  void* p = std::malloc(n);
  if (!p) return false;
  std::memcpy(p, &ss, n);
  std::free(field);
  field = p;
  len = n;
  return true;
}

}  // namespace

int pep::open(util::fabric& fab, fi_info* info, fid_pep** out, void* context) noexcept {
  auto* prov = &provider();
  if (!info->ep_attr || info->ep_attr->type != FI_EP_MSG) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "a passive endpoint needs an FI_EP_MSG fi_info");
    return to_fi(errc::inval);
  }
  if (!offers(fab.api(), *info)) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "the fi_info passed to fi_passive_ep is not one tcp offers");
    return to_fi(errc::inval);
  }
  auto* src = static_cast<const sockaddr*>(info->src_addr);
  if (src && (!util::sockaddr_len(src) || info->src_addrlen < util::sockaddr_len(src))) {
    WEFT_WARN(prov, FI_LOG_EP_CTRL, "the source address is not an IP address");
    return to_fi(errc::inval);
  }
  return abi_guard([&]() -> int {
    auto p = std::make_unique<pep>(fab, info, context);
    if (!p->info_) return to_fi(errc::nomem);
    if (!p->epoll_.valid()) return to_fi(errc_of_errno(errno));
    if (p->auto_) {
      p->timer_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.ptr = &p->timer_;
      if (!p->timer_.valid() || epoll_ctl(p->epoll_.get(), EPOLL_CTL_ADD, p->timer_.get(), &ev))
        return to_fi(errc_of_errno(errno));
    }
    sockaddr_storage any{};
    any.ss_family = info->addr_format == FI_SOCKADDR_IN6 ? AF_INET6 : AF_INET;
    if (errc e = p->open_socket(src ? src : reinterpret_cast<sockaddr*>(&any)); e != errc::ok)
      return to_fi(e);
    *out = p.release();
    return 0;
  });
}

pep::pep(util::fabric& fab, fi_info* info, void* context)
    : fid_object(FI_CLASS_PEP, context),
      fabric_(&fab),
      info_(core::dup_info(info, core::abi_current)),
      epoll_(epoll_create1(EPOLL_CLOEXEC)),
      auto_(util::control_is_auto(info->domain_attr)) {
  ops = const_cast<fi_ops_ep*>(&pep_ep_ops);
  cm = const_cast<fi_ops_cm*>(&pep_cm_ops);
  if (info_) {
    info_->handle = nullptr;
    core::free_info(info_->next);
    info_->next = nullptr;
  }
}

pep::~pep() { core::free_info(info_); }

errc pep::open_socket(const sockaddr* addr) {
  util::unique_fd s = stream_socket(addr->sa_family);
  if (!s.valid()) return errc_of_errno(errno);
  int one = 1;
  ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s.get(), addr, util::sockaddr_len(addr)) != 0) {
    int e = errno;
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_passive_ep: cannot bind %s: %s",
              util::format_sockaddr(addr).c_str(), std::strerror(e));
    return errc_of_errno(e);
  }
  socklen_t len = sizeof local_;
  ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&local_), &len);
  sock_ = std::move(s);
  return errc::ok;
}

int pep::close() {
  if (busy()) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_close: the passive endpoint is still referenced");
    return to_fi(errc::busy);
  }
  // First: once remove() returns, the fabric's thread never runs us again.
  if (registered_) fabric_->control_progress().remove(this);
  if (eq_ && !auto_) {
    eq_->progress().remove(this);
    eq_->remove_wait_fd(epoll_.get());
  }
  delete this;
  return 0;
}

int pep::bind(struct fid* bfid, uint64_t flags) {
  if (!util::is_class(bfid, FI_CLASS_EQ)) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "a passive endpoint binds to an event queue only");
    return to_fi(errc::inval);
  }
  if (flags) return to_fi(errc::badflags);
  util::eq* q = util::eq::from(bfid);
  if (&q->fab() != fabric_.get()) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "the EQ belongs to another fabric");
    return to_fi(errc::inval);
  }
  {
    std::lock_guard g{m_};
    if (eq_) return to_fi(errc::inval);
    eq_.reset(q);
  }
  // Under automatic control progress the fabric's thread alone drives us
  // (pep::progress): it orders our requests after the endpoints' events.
  if (auto_) return 0;
  // Not under m_: reading the EQ takes its hook list's lock, then m_.
  q->progress().add({&announce_thunk, this, &gather_thunk});
  q->add_wait_fd(epoll_.get());
  return 0;
}

int pep::control(int command, void* arg) {
  if (command != FI_BACKLOG) return to_fi(errc::nosys);
  if (!arg || *static_cast<int*>(arg) <= 0) return to_fi(errc::inval);
  std::lock_guard g{m_};
  backlog_ = *static_cast<int*>(arg);
  if (listening_) ::listen(sock_.get(), backlog_);
  return 0;
}

int pep::getopt(int level, int name, void* val, size_t* len) {
  if (level != FI_OPT_ENDPOINT || name != FI_OPT_CM_DATA_SIZE) return to_fi(errc::noprotoopt);
  if (!val || !len) return to_fi(errc::inval);
  if (*len < sizeof(size_t)) return *len = sizeof(size_t), to_fi(errc::toosmall);
  *static_cast<size_t*>(val) = proto::cm_data_max;
  *len = sizeof(size_t);
  return 0;
}

int pep::getname(void* addr, size_t* addrlen) {
  if (!addrlen) return to_fi(errc::inval);
  size_t need = util::sockaddr_len(reinterpret_cast<const sockaddr*>(&local_));
  size_t have = *addrlen;
  *addrlen = need;
  if (!addr || have < need) {
    if (addr && have) std::memcpy(addr, &local_, have);
    return to_fi(errc::toosmall);
  }
  std::memcpy(addr, &local_, need);
  return 0;
}

int pep::setname(const void* addr, size_t addrlen) {
  auto* sa = static_cast<const sockaddr*>(addr);
  if (!addr || !util::sockaddr_len(sa) || addrlen < util::sockaddr_len(sa)) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_setname: not an IP address");
    return to_fi(errc::inval);
  }
  std::lock_guard g{m_};
  if (listening_) return to_fi(errc::opbadstate);
  util::unique_fd keep{sock_.release()};
  if (errc e = open_socket(sa); e != errc::ok) {
    sock_ = std::move(keep);
    return to_fi(e);
  }
  return 0;
}

int pep::listen() {
  {
    std::lock_guard g{m_};
    if (int r = listen_locked(); r != 0 || !auto_ || registered_) return r;
  }
  // Not under m_: the thread holds its own lock while it runs our progress,
  // which takes m_. listen and close are the application's calls on this
  // object, never concurrent with each other (fi_endpoint(3)).
  if (errc e = fabric_->control_progress().add(epoll_.get(), &auto_work, this, true); e != errc::ok) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_listen: cannot start automatic progress: %s",
              fi_strerror(static_cast<int>(e)));
    return to_fi(e);
  }
  registered_ = true;
  return 0;
}

int pep::listen_locked() {
  if (!eq_) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_listen: bind an event queue first");
    return to_fi(errc::noeq);
  }
  if (listening_) return 0;
  if (::listen(sock_.get(), backlog_) != 0) {
    int e = errno;
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_listen on %s: %s", describe(local_).c_str(),
              std::strerror(e));
    return to_fi(errc_of_errno(e));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the listener; requests carry their connreq
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, sock_.get(), &ev) != 0)
    return to_fi(errc_of_errno(errno));
  listening_ = true;
  return 0;
}

// ---- connection requests ----

// A connection request is announced after the events of the connections
// already open on the same EQ that reached us first: a client that shuts one
// connection down and connects again has its server see FI_SHUTDOWN before
// the next FI_CONNREQ (fi_cm_data-style loops wait for them in that order).
// So requests are gathered first, the endpoints are driven, and only then
// announced: by the EQ's progress list (endpoints' hooks run between our
// gather and our announce), or on the fabric's thread by run_others_ready.
void pep::progress() noexcept {
  if (gather()) fabric_->control_progress().run_others_ready();
  announce_ready();
}

bool pep::gather() noexcept {
  std::lock_guard g{m_};
  if (!listening_) return false;
  epoll_event evs[32];
  int n = epoll_wait(epoll_.get(), evs, 32, 0);
  for (int i = 0; i < n; ++i) {
    if (!evs[i].data.ptr) {
      accept_all();
    } else if (evs[i].data.ptr == &timer_) {
      uint64_t ticks;
      [[maybe_unused]] ssize_t r = ::read(timer_.get(), &ticks, sizeof ticks);
      timer_at_ = 0;  // fired: disarmed, armed again below if still needed
    } else {
      read_request(*static_cast<connreq*>(evs[i].data.ptr));
    }
  }
  for (auto& r : reqs_)
    if (r->c && !r->announced && r->c->state == conn_state::accepting) return true;
  return false;
}

void pep::announce_ready() noexcept {
  std::lock_guard g{m_};
  if (!listening_) return;
  uint64_t now = util::now_ns();
  for (auto& r : reqs_) {
    if (!r->c || r->announced) continue;
    if (r->c->state == conn_state::accepting)
      announce(*r);
    else if (r->c->deadline_ns <= now)
      drop(*r, "no connection request within the deadline");
  }
  std::erase_if(reqs_, [](const std::unique_ptr<connreq>& r) { return !r->c; });
  if (auto_) arm_timer(now);
}

// Under automatic progress nobody calls in to notice a deadline or retry an
// announcement a full EQ refused: the timer fires at the earliest of them
// (a millisecond for a retry), and is disarmed while nothing waits.
void pep::arm_timer(uint64_t now) noexcept {
  uint64_t at = 0;
  for (auto& r : reqs_) {
    if (!r->c || r->announced) continue;
    uint64_t t = r->c->state == conn_state::accepting ? now + 1'000'000 : r->c->deadline_ns;
    if (!at || t < at) at = t;
  }
  // EQ reads run this too: no system call unless the deadline moved.
  if (at == timer_at_) return;
  timer_at_ = at;
  itimerspec its{};
  if (at) {
    uint64_t in = at > now ? at - now : 1;
    its.it_value.tv_sec = static_cast<time_t>(in / 1'000'000'000u);
    its.it_value.tv_nsec = static_cast<long>(in % 1'000'000'000u);
  }
  timerfd_settime(timer_.get(), 0, &its, nullptr);
}

void pep::accept_all() noexcept {
  for (int i = 0; i < 64; ++i) {
    sockaddr_storage from{};
    socklen_t len = sizeof from;
    int fd = ::accept4(sock_.get(), reinterpret_cast<sockaddr*>(&from), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "accept on %s: %s", describe(local_).c_str(),
                  std::strerror(errno));
      return;
    }
    util::unique_fd s{fd};
    tune_stream(fd);
    tune_local(fd);
    try {
      auto r = std::make_unique<connreq>();
      r->fid.fclass = FI_CLASS_CONNREQ;
      r->fid.context = nullptr;
      r->fid.ops = const_cast<fi_ops*>(&connreq_ops);
      r->owner = this;
      frame_limits lim;
      lim.max_payload = static_cast<uint32_t>(
          std::min(info_->ep_attr->max_msg_size ? info_->ep_attr->max_msg_size : max_msg_size,
                   max_msg_size));
      lim.max_rma_iov = 1;
      r->c = std::make_unique<conn>(std::move(s), false, lim);
      r->c->peer = from;
      r->c->deadline_ns = util::now_ns() + uint64_t(cfg().conn_timeout_ms) * 1000000u;
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP;
      ev.data.ptr = r.get();
      if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, r->c->fd(), &ev) != 0) continue;
      reqs_.push_back(std::move(r));
    } catch (...) {
      WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "out of memory for a connection from %s",
                describe(from).c_str());
    }
  }
}

// Reads until the cm_req is in; bytes after it stay staged for the endpoint.
void pep::read_request(connreq& r) noexcept {
  if (!r.c || r.c->state != conn_state::handshake) return;
  conn& c = *r.c;
  for (int budget = 8; budget > 0;) {
    if (c.staged_len()) {
      auto res = c.reader.feed(c.staged(), c.staged_len());
      c.consume(res.used);
      frame_reader::status st = res.st;
      if (st == frame_reader::status::header) {
        const frame& f = c.reader.current();
        if (f.op != proto::op::cm_req) {
          if (f.op == proto::op::hello) {
            // An FI_EP_RDM peer: refuse it in its own protocol.
            frame no{};
            no.op = proto::op::cm_resp;
            no.status = FI_ECONNREFUSED;
            tx_entry* none = nullptr;
            int e = 0;
            if (c.set_ctrl(no, nullptr, 0)) c.flush(false, &none, &e);
          }
          drop(r, "the first frame is not a connection request");
          return;
        }
        c.cm_len = static_cast<uint16_t>(f.payload_len);
        if ((f.features & proto::feature_local_stream) && f.local_pid) {
          // Taken up, or not, by the endpoint's fi_accept (attach_stream).
          c.offer_pid = f.local_pid;
          c.offer_fd = f.local_fd;
          c.offer_cookie = f.local_cookie;
        }
        if (f.payload_len)
          c.reader.set_target(c.cm_data, f.payload_len);
        else
          st = c.reader.feed(nullptr, 0).st;
      }
      if (st == frame_reader::status::error) {
        if (c.reader.error() == frame_error::bad_version) {
          frame no{};
          no.op = proto::op::cm_resp;
          no.status = FI_ENOPROTOOPT;
          tx_entry* none = nullptr;
          int e = 0;
          if (c.set_ctrl(no, nullptr, 0)) c.flush(false, &none, &e);
        }
        WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "tcp peer %s: %s (value %llu); refused",
                  describe(c.peer).c_str(), to_string(c.reader.error()),
                  static_cast<unsigned long long>(c.reader.error_value()));
        drop(r, nullptr);
        return;
      }
      if (st == frame_reader::status::done) {
        // The request is complete: the endpoint that accepts it reads on.
        epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.fd(), nullptr);
        c.state = conn_state::accepting;
        announce(r);
        return;
      }
      continue;
    }
    --budget;
    ssize_t n = c.fill();
    if (n > 0) continue;
    if (n == -EAGAIN || n == -EWOULDBLOCK) return;
    drop(r, n == 0 ? "the peer closed before its connection request" : std::strerror(int(-n)));
    return;
  }
}

bool pep::announce(connreq& r) noexcept {
  if (!eq_) return false;
  fi_info* info = core::dup_info(info_, core::abi_current);
  if (!info) return false;
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  ::getsockname(r.c->fd(), reinterpret_cast<sockaddr*>(&local), &len);
  if (!set_addr(info->dest_addr, info->dest_addrlen, r.c->peer) ||
      !set_addr(info->src_addr, info->src_addrlen, local)) {
    core::free_info(info);
    return false;
  }
  info->handle = &r.fid;
  alignas(fi_eq_cm_entry) std::byte buf[sizeof(fi_eq_cm_entry) + proto::cm_data_max];
  fi_eq_cm_entry entry{};
  entry.fid = &fid;
  entry.info = info;
  std::memcpy(buf, &entry, sizeof entry);
  std::memcpy(buf + sizeof entry, r.c->cm_data, r.c->cm_len);
  if (eq_->write_event(FI_CONNREQ, buf, sizeof entry + r.c->cm_len, 0) != 0) {
    core::free_info(info);  // a full EQ: announced on a later progress
    return false;
  }
  r.announced = true;
  return true;
}

void pep::drop(connreq& r, const char* why) noexcept {
  if (why)
    WEFT_INFO(&provider(), FI_LOG_EP_CTRL, "connection from %s dropped: %s",
              describe(r.c->peer).c_str(), why);
  if (r.c->fd() >= 0) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, r.c->fd(), nullptr);
  r.c.reset();  // erased by the caller's sweep
}

std::unique_ptr<conn> pep::take(connreq* r) noexcept {
  std::lock_guard g{m_};
  for (auto it = reqs_.begin(); it != reqs_.end(); ++it) {
    if (it->get() != r) continue;
    if (!r->announced || !r->c) return nullptr;
    std::unique_ptr<conn> c = std::move(r->c);
    reqs_.erase(it);
    return c;
  }
  return nullptr;
}

int check_cm_data(const char* call, const void* param, size_t len) noexcept {
  if (len && !param) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "%s: %zu bytes of private data at NULL", call, len);
    return to_fi(errc::inval);
  }
  if (len > proto::cm_data_max) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL,
              "%s: %zu bytes of private data, more than FI_OPT_CM_DATA_SIZE (%zu)", call, len,
              proto::cm_data_max);
    return to_fi(errc::inval);
  }
  return 0;
}

int pep::reject(struct fid* handle, const void* param, size_t len) {
  if (!util::is_class(handle, FI_CLASS_CONNREQ)) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_reject: the handle is not a connection request");
    return to_fi(errc::inval);
  }
  if (int r = check_cm_data("fi_reject", param, len)) return r;
  std::unique_ptr<conn> c = take(connreq::from(handle));
  if (!c) {
    WEFT_WARN(&provider(), FI_LOG_EP_CTRL, "fi_reject: no such pending connection request");
    return to_fi(errc::inval);
  }
  frame no{};
  no.op = proto::op::cm_resp;
  no.status = FI_ECONNREFUSED;
  no.minor = proto::minor_version;
  c->set_ctrl(no, param, len);
  tx_entry* none = nullptr;
  int e = 0;
  // The socket is idle and its buffer empty: the frame goes in one write.
  if (c->flush(false, &none, &e) != conn::io::ok)
    WEFT_INFO(&provider(), FI_LOG_EP_CTRL, "fi_reject: could not tell %s: %s",
              describe(c->peer).c_str(), std::strerror(e));
  ::shutdown(c->fd(), SHUT_WR);
  return 0;
}

}  // namespace weft::tcp
