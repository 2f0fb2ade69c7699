// SPDX-License-Identifier: MIT
// weft — conformance for the tcp provider's on-demand connections (FI_EP_RDM)
// with real processes:
//
//  * a storm: 256 endpoints in 8 processes send to one server at the same
//    moment (released together through pipes); the server receives each
//    client's tagged message once, from the fi_addr that sent it, and answers
//    it; every client gets its answer. Then the reverse storm: the server
//    sends to all 256 while they send to it, so every pair connects from both
//    sides at once, and proto.hpp's tie-break leaves one connection per pair.
//  * a peer that restarts: a server process killed (SIGKILL) and started
//    again on the same port; the client, with the same endpoint and AV
//    entry, reaches the new process.
//
// The processes are forked before anything of libfabric is open in the test
// process; everything goes through the public API.
#include "provider_param.hpp"

#include <rdma/fi_tagged.h>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <vector>

namespace conformance {
namespace {

using clock_type = std::chrono::steady_clock;

std::vector<config> tcp_rdm_configs() {
  std::vector<config> v;
  for (const config& c : all_configs)
    if (std::strcmp(c.prov, "tcp") == 0 && c.ep_type == FI_EP_RDM) v.push_back(c);
  return v;
}

// Sockets this process holds, from /proc/self/fd.
int open_sockets() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    char target[64];
    std::string path = std::string("/proc/self/fd/") + e->d_name;
    ssize_t len = readlink(path.c_str(), target, sizeof target - 1);
    if (len > 0 && std::string(target, static_cast<size_t>(len)).rfind("socket:", 0) == 0) ++n;
  }
  closedir(d);
  return n;
}

// The server of the storm holds 257 sockets and each client process 64 plus
// epoll and timer descriptors: more than a default limit of 1024 allows.
void raise_fd_limit(rlim_t want) {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= want) return;
  r.rlim_cur = r.rlim_max == RLIM_INFINITY ? want : std::min(want, r.rlim_max);
  setrlimit(RLIMIT_NOFILE, &r);
}

template <class T>
T* shared_map() {
  void* p = mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : new (p) T();
}
template <class T>
struct shared_guard {
  T* p;
  ~shared_guard() {
    if (p) munmap(p, sizeof(T));
  }
};

// ---- pipes: one byte per step ----

struct channel {
  int fd[2] = {-1, -1};
  bool open() { return pipe(fd) == 0; }
  void close_rd() { close_fd(fd[0]); }
  void close_wr() { close_fd(fd[1]); }
  ~channel() { close_rd(), close_wr(); }
  static void close_fd(int& f) {
    if (f >= 0) ::close(f);
    f = -1;
  }
};

bool put(int fd, char c) { return ::write(fd, &c, 1) == 1; }

// Reads `n` tokens `want` within `ms`, running `idle` (progress) between
// polls; false on a timeout, the end of the pipe or another token.
bool take(int fd, char want, int n = 1, int ms = 30000, const std::function<void()>& idle = {}) {
  auto deadline = clock_type::now() + std::chrono::milliseconds(ms);
  while (n > 0) {
    if (clock_type::now() > deadline) return false;
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, idle ? 0 : 50);
    if (r == 1) {
      char c;
      if (::read(fd, &c, 1) != 1 || c != want) return false;
      --n;
    } else if (idle) {
      idle();
    }
  }
  return true;
}

// Kills and reaps the children still running when the test leaves early.
struct children {
  std::vector<pid_t> pids;
  ~children() {
    for (pid_t p : pids)
      if (p > 0) kill(p, SIGKILL), waitpid(p, nullptr, 0);
  }
  // Exit codes (128 + signal; 999: still running after `seconds`, killed).
  std::vector<int> reap(int seconds) {
    std::vector<int> codes(pids.size(), -1);
    auto deadline = clock_type::now() + std::chrono::seconds(seconds);
    size_t left = 0;
    for (pid_t p : pids) left += p > 0;
    while (left && clock_type::now() < deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        int st;
        if (pids[i] > 0 && waitpid(pids[i], &st, WNOHANG) == pids[i]) {
          codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
          pids[i] = -1;
          --left;
        }
      }
      usleep(2000);
    }
    for (size_t i = 0; i < pids.size(); ++i)
      if (pids[i] > 0) kill(pids[i], SIGKILL), waitpid(pids[i], nullptr, 0), pids[i] = -1,
                       codes[i] = 999;
    return codes;
  }
};

// ---- one process's objects ----

struct done_entry {
  void* ctx;
  uint64_t tag;
  fi_addr_t src;
  int err;  // 0, or the error completion's FI_E* code
};

// A fabric, a domain, one CQ with a wait object (a waiting process sleeps
// and leaves the two cores to the others), an AV and `n` endpoints on
// 127.0.0.1, on the given port (`service`) or ports of their own.
struct peer_set {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  std::vector<fid_ep*> eps;
  char why[200] = {};

  bool fail(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return false;
  }
  bool open(const config& cfg, size_t n, const char* service = nullptr) {
    fi_info* hints = hints_for(cfg, FI_MSG | FI_TAGGED);
    hints->addr_format = FI_SOCKADDR_IN;
    int rc = fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", service, FI_SOURCE, hints, &info);
    fi_freeinfo(hints);
    if (rc) return fail("fi_getinfo: %s", fi_strerror(-rc));
    if ((rc = fi_fabric(info->fabric_attr, &fabric, nullptr)) ||
        (rc = fi_domain(fabric, info, &domain, nullptr)))
      return fail("fabric or domain: %s", fi_strerror(-rc));
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    ca.size = 2048;
    ca.wait_obj = FI_WAIT_UNSPEC;
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    if ((rc = fi_cq_open(domain, &ca, &cq, nullptr)) || (rc = fi_av_open(domain, &aa, &av, nullptr)))
      return fail("cq or av: %s", fi_strerror(-rc));
    for (size_t i = 0; i < n; ++i) {
      fid_ep* ep = nullptr;
      if ((rc = fi_endpoint(domain, info, &ep, nullptr)))
        return fail("fi_endpoint %zu: %s", i, fi_strerror(-rc));
      eps.push_back(ep);
      if ((rc = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV)) ||
          (rc = fi_ep_bind(ep, &av->fid, 0)) || (rc = fi_enable(ep)))
        return fail("endpoint %zu: %s", i, fi_strerror(-rc));
    }
    return true;
  }
  sockaddr_in name(size_t i) const {
    sockaddr_in sin{};
    size_t len = sizeof sin;
    if (fi_getname(&eps[i]->fid, &sin, &len) != 0) sin.sin_family = AF_UNSPEC;
    return sin;
  }
  // One wait of at most `ms` on the CQ (0: a plain read, progress only);
  // what it had is appended to `out`.
  void poll(int ms, std::vector<done_entry>& out) {
    fi_cq_tagged_entry e[32];
    fi_addr_t src[32];
    ssize_t n = ms ? fi_cq_sreadfrom(cq, e, 32, src, nullptr, ms) : fi_cq_readfrom(cq, e, 32, src);
    for (ssize_t i = 0; i < n; ++i) out.push_back({e[i].op_context, e[i].tag, src[i], 0});
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry ee{};
      if (fi_cq_readerr(cq, &ee, 0) == 1)
        out.push_back({ee.op_context, ee.tag, FI_ADDR_NOTAVAIL, ee.err ? ee.err : -1});
    }
  }
  // Posts with `post` until it is not -FI_EAGAIN (progress meanwhile; what
  // completes is kept in `out`).
  template <class F>
  ssize_t retry(F post, std::vector<done_entry>& out) {
    auto deadline = clock_type::now() + std::chrono::seconds(20);
    ssize_t r;
    while ((r = post()) == -FI_EAGAIN && clock_type::now() < deadline) poll(0, out);
    return r;
  }
  ~peer_set() {
    for (auto it = eps.rbegin(); it != eps.rend(); ++it) fi_close(&(*it)->fid);
    for (fid* f : {av ? &av->fid : nullptr, cq ? &cq->fid : nullptr,
                   domain ? &domain->fid : nullptr, fabric ? &fabric->fid : nullptr})
      if (f) fi_close(f);
    fi_freeinfo(info);
  }
};

// What travels: who it is for or from, and what it is. The tag says the
// same (kind in the high half, client id in the low).
enum kind : uint32_t { request = 1, answer = 2, push = 3, echo = 4 };
constexpr uint32_t note_magic = 0x77656674;
struct note {
  uint32_t magic, id, kind, pad;
};
uint64_t tag_of(kind k, uint32_t id) { return uint64_t{k} << 32 | id; }

class tcp_rdm_peers : public testing::TestWithParam<config> {};

// ---- the storm ----

constexpr int storm_procs = 8, storm_eps = 32, storm_total = storm_procs * storm_eps;

// Shared with the children (MAP_SHARED, made before the fork).
struct storm_board {
  sockaddr_in client[storm_total];
  sockaddr_in server;
  int sockets[storm_procs];  // sockets each client process holds at the end
  double seconds[storm_procs];  // from the barrier to its last completion
  char why[storm_procs][200];
};

// One client process: 32 endpoints; each sends one message to the server
// the moment the barrier opens and expects its answer (and, in the reverse
// storm, the server's own message). Tokens on `up`: n (names published), r
// (receives posted), d (done); on `down`: s (server name published), g (go),
// x (exit).
bool storm_client(peer_set& p, const config& cfg, storm_board& b, int me, int up, int down,
                  bool reverse) {
  int before = open_sockets();
  if (!p.open(cfg, storm_eps)) return false;
  for (int i = 0; i < storm_eps; ++i) b.client[me * storm_eps + i] = p.name(i);
  if (!put(up, 'n')) return p.fail("pipe");
  if (!take(down, 's')) return p.fail("no server name");
  fi_addr_t server;
  if (fi_av_insert(p.av, &b.server, 1, &server, 0, nullptr) != 1) return p.fail("fi_av_insert");
  note out[storm_eps], in[storm_eps][2] = {};
  fi_context2 sctx[storm_eps], rctx[storm_eps][2];
  std::vector<done_entry> got;
  const int kinds = reverse ? 2 : 1;
  for (int i = 0; i < storm_eps; ++i) {
    uint32_t id = static_cast<uint32_t>(me * storm_eps + i);
    for (int k = 0; k < kinds; ++k) {
      ssize_t r = fi_trecv(p.eps[i], &in[i][k], sizeof in[i][k], nullptr, server,
                           tag_of(k ? push : answer, id), 0, &rctx[i][k]);
      if (r) return p.fail("fi_trecv: %zd", r);
    }
  }
  if (!put(up, 'r') || !take(down, 'g')) return p.fail("no go");
  auto t0 = clock_type::now();
  for (int i = 0; i < storm_eps; ++i) {
    uint32_t id = static_cast<uint32_t>(me * storm_eps + i);
    out[i] = {note_magic, id, request, 0};
    ssize_t r = p.retry([&] {
      return fi_tsend(p.eps[i], &out[i], sizeof out[i], nullptr, server, tag_of(request, id),
                      &sctx[i]);
    }, got);
    if (r) return p.fail("fi_tsend from %u: %s", id, fi_strerror(static_cast<int>(-r)));
  }
  const size_t want = storm_eps * (1 + kinds);
  auto deadline = t0 + std::chrono::seconds(45);
  while (got.size() < want && clock_type::now() < deadline) p.poll(100, got);
  b.seconds[me] = std::chrono::duration<double>(clock_type::now() - t0).count();
  if (got.size() != want) return p.fail("%zu of %zu completions in 45 s", got.size(), want);
  std::vector<bool> seen(storm_eps * 3);
  for (const done_entry& e : got) {
    long slot = -1;
    for (int i = 0; i < storm_eps && slot < 0; ++i) {
      if (e.ctx == &sctx[i]) slot = i * 3;
      for (int k = 0; k < kinds; ++k)
        if (e.ctx == &rctx[i][k]) slot = i * 3 + 1 + k;
    }
    if (slot < 0 || seen[slot]) return p.fail("a stray or repeated completion (%p)", e.ctx);
    seen[slot] = true;
    if (e.err) return p.fail("completion %ld failed: %s", slot, fi_strerror(e.err));
  }
  for (int i = 0; i < storm_eps; ++i) {
    uint32_t id = static_cast<uint32_t>(me * storm_eps + i);
    for (int k = 0; k < kinds; ++k)
      if (in[i][k].magic != note_magic || in[i][k].id != id || in[i][k].kind != (k ? push : answer))
        return p.fail("client %u got {%u, %u, %u}", id, in[i][k].magic, in[i][k].id,
                      in[i][k].kind);
  }
  // The connections the tie-break dropped close within a few progress calls:
  // one listener and one connection per endpoint are left.
  std::vector<done_entry> late;
  deadline = clock_type::now() + std::chrono::seconds(5);
  while (open_sockets() - before != 2 * storm_eps && clock_type::now() < deadline) p.poll(10, late);
  b.sockets[me] = open_sockets() - before;
  if (!late.empty()) return p.fail("%zu completions nobody asked for", late.size());
  if (!put(up, 'd')) return p.fail("pipe");
  // Everything stays open until the server has counted its own sockets.
  take(down, 'x', 1, 60000);
  return true;
}

void storm(const config& cfg, bool reverse) {
  raise_fd_limit(4096);
  auto* b = shared_map<storm_board>();
  ASSERT_NE(b, nullptr);
  shared_guard<storm_board> unmap{b};
  channel up, down[storm_procs];
  ASSERT_TRUE(up.open());
  for (channel& d : down) ASSERT_TRUE(d.open());
  children kids;
  for (int me = 0; me < storm_procs; ++me) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0) << std::strerror(errno);
    if (pid == 0) {
      up.close_rd();
      for (int j = 0; j < storm_procs; ++j) {
        down[j].close_wr();
        if (j != me) down[j].close_rd();
      }
      bool ok;
      {
        peer_set p;
        ok = storm_client(p, cfg, *b, me, up.fd[1], down[me].fd[0], reverse);
        if (!ok) std::memcpy(b->why[me], p.why, sizeof p.why);
      }
      _exit(ok ? 0 : 1);
    }
    kids.pids.push_back(pid);
  }
  up.close_wr();
  for (channel& d : down) d.close_rd();
  auto whys = [&] {
    std::string s;
    for (int me = 0; me < storm_procs; ++me)
      if (b->why[me][0]) s += "\n  process " + std::to_string(me) + ": " + b->why[me];
    return s;
  };
  ASSERT_TRUE(take(up.fd[0], 'n', storm_procs)) << "the clients did not start" << whys();
  int before = open_sockets();
  peer_set s;
  ASSERT_TRUE(s.open(cfg, 1)) << s.why;
  fid_ep* ep = s.eps[0];
  b->server = s.name(0);
  std::vector<fi_addr_t> addr(storm_total);
  ASSERT_EQ(fi_av_insert(s.av, b->client, storm_total, addr.data(), 0, nullptr), storm_total);
  auto id_of = [&](fi_addr_t a) {
    for (int i = 0; i < storm_total; ++i)
      if (addr[i] == a) return i;
    return -1;
  };
  for (channel& d : down) ASSERT_TRUE(put(d.fd[1], 's'));
  // One receive per client, and one more: a message delivered twice lands there.
  std::vector<note> in(storm_total + 1), ans(storm_total), pushed(storm_total);
  std::vector<fi_context2> rctx(storm_total + 1), actx(storm_total), pctx(storm_total);
  for (int k = 0; k <= storm_total; ++k)
    ASSERT_EQ(fi_trecv(ep, &in[k], sizeof in[k], nullptr, FI_ADDR_UNSPEC, 0, ~0ull, &rctx[k]), 0);
  ASSERT_TRUE(take(up.fd[0], 'r', storm_procs)) << "the clients did not get ready" << whys();
  std::vector<done_entry> got;
  auto t0 = clock_type::now();
  if (reverse) {
    // Posted before any progress: 256 connections of ours are on their way
    // when the clients open theirs.
    for (int id = 0; id < storm_total; ++id) {
      pushed[id] = {note_magic, static_cast<uint32_t>(id), push, 0};
      ASSERT_EQ(s.retry([&] {
        return fi_tsend(ep, &pushed[id], sizeof pushed[id], nullptr, addr[id],
                        tag_of(push, static_cast<uint32_t>(id)), &pctx[id]);
      }, got), 0);
    }
  }
  for (channel& d : down) ASSERT_TRUE(put(d.fd[1], 'g'));
  std::vector<bool> received(storm_total), answered(storm_total), delivered(storm_total);
  int n_received = 0, n_answered = 0, n_pushed = 0;
  std::vector<std::string> problems;
  auto handle = [&](const done_entry& e) {
    auto* ctx = static_cast<fi_context2*>(e.ctx);
    if (e.err) {
      problems.push_back("error completion: " + std::string(fi_strerror(e.err)));
    } else if (ctx >= rctx.data() && ctx < rctx.data() + rctx.size()) {
      const note& m = in[ctx - rctx.data()];
      int from = id_of(e.src);
      uint32_t id = static_cast<uint32_t>(e.tag);
      if (e.tag >> 32 != request || m.magic != note_magic || m.kind != request || m.id != id ||
          id >= storm_total || from != static_cast<int>(id)) {
        problems.push_back("a message with tag " + std::to_string(e.tag) + " from fi_addr " +
                           std::to_string(e.src) + " carrying id " + std::to_string(m.id));
      } else if (received[id]) {
        problems.push_back("client " + std::to_string(id) + "'s message arrived twice");
      } else {
        received[id] = true;
        ++n_received;
        ans[id] = {note_magic, id, answer, 0};
        ssize_t r = s.retry([&] {
          return fi_tsend(ep, &ans[id], sizeof ans[id], nullptr, e.src, tag_of(answer, id),
                          &actx[id]);
        }, got);
        if (r) problems.push_back("fi_tsend of an answer: " + std::to_string(r));
      }
    } else if (ctx >= actx.data() && ctx < actx.data() + actx.size() &&
               !answered[ctx - actx.data()]) {
      answered[ctx - actx.data()] = true;
      ++n_answered;
    } else if (ctx >= pctx.data() && ctx < pctx.data() + pctx.size() &&
               !delivered[ctx - pctx.data()]) {
      delivered[ctx - pctx.data()] = true;
      ++n_pushed;
    } else {
      problems.push_back("a stray or repeated completion");
    }
  };
  auto drain = [&](int ms) {
    s.poll(ms, got);
    // handle() may post, and a post may collect more completions into got.
    for (size_t i = 0; i < got.size(); ++i) {
      done_entry e = got[i];  // a copy: handle() may grow got
      handle(e);
    }
    got.clear();
  };
  auto deadline = t0 + std::chrono::seconds(60);
  while ((n_received < storm_total || n_answered < storm_total ||
          (reverse && n_pushed < storm_total)) &&
         problems.size() < 10 && clock_type::now() < deadline)
    drain(50);
  double server_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  EXPECT_EQ(n_received, storm_total);
  EXPECT_EQ(n_answered, storm_total);
  if (reverse) {
    EXPECT_EQ(n_pushed, storm_total);
  }
  for (const std::string& p : problems) ADD_FAILURE() << p;
  // The clients finish (and count their sockets) while we keep progressing.
  EXPECT_TRUE(take(up.fd[0], 'd', storm_procs, 60000, [&] { drain(10); }))
      << "not every client finished" << whys();
  for (int me = 0; me < storm_procs; ++me) {
    if (b->why[me][0]) continue;
    EXPECT_EQ(b->sockets[me], 2 * storm_eps)
        << "process " << me << ": one listener and one connection per endpoint";
  }
  auto settle = clock_type::now() + std::chrono::seconds(5);
  while (open_sockets() - before != storm_total + 1 && clock_type::now() < settle) drain(10);
  EXPECT_EQ(open_sockets() - before, storm_total + 1) << "one connection per client, and the listener";
  drain(0);
  for (const std::string& p : problems) ADD_FAILURE() << p;
  for (channel& d : down) put(d.fd[1], 'x');
  std::vector<int> codes = kids.reap(30);
  for (int me = 0; me < storm_procs; ++me)
    EXPECT_EQ(codes[me], 0) << "process " << me << ": " << b->why[me];
  double slowest = 0;
  for (double t : b->seconds) slowest = std::max(slowest, t);
  std::printf("  storm%s: server done in %.3f s, slowest client %.3f s\n",
              reverse ? " (both ways)" : "", server_s, slowest);
}

TEST_P(tcp_rdm_peers, storm_of_256_clients_sending_at_once) { storm(GetParam(), false); }

TEST_P(tcp_rdm_peers, storm_both_ways_leaves_one_connection_per_pair) { storm(GetParam(), true); }

// ---- a peer that restarts on the same address ----
//
// What a send after the restart does, and why. The client's connection to
// the dead process stays "connected" until the client's progress reads its
// end of stream (manual progress: any CQ read, counter read or blocking
// wait on the endpoint; automatic progress: at once). Then it is closed,
// nothing outstanding on it fails, and the next send opens a new connection
// to the same address: the new process gets it. So a client that progressed
// at any time after the peer died reaches the new process with its very
// first send, transparently.
//
// A send posted before that progress is written into the dead connection.
// The dead process's kernel answers it with a reset. With the default
// completion level (weft's tcp completes sends when they are written,
// FI_INJECT_COMPLETE in fi_cq(3), which promises nothing about the message
// after that) such a message is lost although it completed. With
// FI_TRANSMIT_COMPLETE or FI_DELIVERY_COMPLETE the send waits for the
// target's acknowledgement, so it completes in error (FI_ECONNRESET) when
// the reset is read; weft does not resend it, since the provider cannot
// know whether the old peer processed it. The sends after that one reach
// the new process.
//
// The new process may also speak first: it connects to the client while the
// client's connection to the old process is still open on the client's side
// (its end of stream not yet read, or never coming when a host crashed).
// The client serves the new connection whichever side of the tie-break of
// proto.hpp it is on, and its sends move to it once the new process used it
// (ep_rdm.cpp, on_hello; tests/unit/tcp/test_tcp_storm.cpp and the crash
// step of tests/netns/run.sh cover the case with no end of stream at all).

struct restart_board {
  sockaddr_in client;
  char why[2][200];
};

// The server (k = 0: B, 1: B'): opens its endpoint on 127.0.0.1:`port` when
// told (s on `down`), says so (n on `up`), sends the client a message of its
// own first if `speak_first`, then echoes every message back to the client,
// tagged `echo`, until killed or told to stop (x or the end of `down`).
bool echo_server(peer_set& p, const config& cfg, restart_board& b, const char* port, int up,
                 int down, bool speak_first) {
  if (!take(down, 's', 1, 60000)) return p.fail("never started");
  if (!p.open(cfg, 1, port)) return false;
  fi_addr_t client;
  if (fi_av_insert(p.av, &b.client, 1, &client, 0, nullptr) != 1) return p.fail("fi_av_insert");
  if (!put(up, 'n')) return p.fail("pipe");
  note in{}, out[64];
  fi_context2 rctx, sctx[64];
  unsigned sent = 0;
  std::vector<done_entry> got;
  if (speak_first) {
    out[sent] = {note_magic, 0, push, 0};
    if (p.retry([&] {
          return fi_tsend(p.eps[0], &out[sent], sizeof out[sent], nullptr, client, tag_of(push, 0),
                          &sctx[sent]);
        }, got))
      return p.fail("fi_tsend first");
    ++sent;
  }
  if (fi_trecv(p.eps[0], &in, sizeof in, nullptr, FI_ADDR_UNSPEC, 0, ~0ull, &rctx))
    return p.fail("fi_trecv");
  for (;;) {
    pollfd pf{down, POLLIN, 0};
    if (::poll(&pf, 1, 0) == 1) return true;
    p.poll(20, got);
    for (size_t i = 0; i < got.size(); ++i) {
      done_entry e = got[i];
      if (e.err) return p.fail("error completion: %s", fi_strerror(e.err));
      if (e.ctx != &rctx) continue;
      note& o = out[sent % 64];
      o = in;
      o.kind = echo;
      ssize_t r = p.retry([&] {
        return fi_tsend(p.eps[0], &o, sizeof o, nullptr, client, tag_of(echo, in.id),
                        &sctx[sent % 64]);
      }, got);
      if (r) return p.fail("fi_tsend: %zd", r);
      ++sent;
      if (fi_trecv(p.eps[0], &in, sizeof in, nullptr, FI_ADDR_UNSPEC, 0, ~0ull, &rctx))
        return p.fail("fi_trecv");
    }
    got.clear();
  }
}

uint16_t free_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sin;
  if (::bind(s, reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0 ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&sin), &len) != 0)
    sin.sin_port = 0;
  ::close(s);
  return ntohs(sin.sin_port);
}

struct outcome {
  int send_err = -1;  // -1: no completion at all
  bool echoed = false;
};

// How the client behaves while its server restarts.
enum class restart_mode {
  progress_while_down,  // it progresses after the old server died
  no_progress,          // it does nothing until it sends again
  peer_speaks_first,    // it does nothing; the new server sends to it first
};

void restart(const config& cfg, restart_mode mode) {
  const bool progress_while_down = mode == restart_mode::progress_while_down;
  uint16_t port = free_port();
  ASSERT_NE(port, 0);
  std::string service = std::to_string(port);
  auto* b = shared_map<restart_board>();
  ASSERT_NE(b, nullptr);
  shared_guard<restart_board> unmap{b};
  channel up, down[2];
  ASSERT_TRUE(up.open() && down[0].open() && down[1].open());
  children kids;
  for (int k = 0; k < 2; ++k) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0) << std::strerror(errno);
    if (pid == 0) {
      up.close_rd();
      down[0].close_wr(), down[1].close_wr(), down[1 - k].close_rd();
      bool ok;
      {
        peer_set p;
        ok = echo_server(p, cfg, *b, service.c_str(), up.fd[1], down[k].fd[0],
                         k == 1 && mode == restart_mode::peer_speaks_first);
        if (!ok) std::memcpy(b->why[k], p.why, sizeof p.why);
      }
      _exit(ok ? 0 : 1);
    }
    kids.pids.push_back(pid);
  }
  up.close_wr(), down[0].close_rd(), down[1].close_rd();
  peer_set a;
  ASSERT_TRUE(a.open(cfg, 1)) << a.why;
  fid_ep* ep = a.eps[0];
  b->client = a.name(0);
  ASSERT_TRUE(put(down[0].fd[1], 's'));
  ASSERT_TRUE(take(up.fd[0], 'n', 1, 10000)) << "B did not start: " << b->why[0];
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  fi_addr_t server;
  ASSERT_EQ(fi_av_insert(a.av, &to, 1, &server, 0, nullptr), 1);

  std::vector<done_entry> got;
  note out[16], in[16];
  fi_context2 sctx[16], rctx[16];
  // One message and its echo; `flags` for fi_tsendmsg (completion level).
  auto round = [&](uint32_t seq, uint64_t flags) {
    outcome o;
    out[seq] = {note_magic, seq, request, 0};
    in[seq] = {};
    EXPECT_EQ(fi_trecv(ep, &in[seq], sizeof in[seq], nullptr, server, tag_of(echo, seq), 0,
                       &rctx[seq]), 0);
    iovec iov{&out[seq], sizeof out[seq]};
    fi_msg_tagged m{};
    m.msg_iov = &iov;
    m.iov_count = 1;
    m.addr = server;
    m.tag = tag_of(request, seq);
    m.context = &sctx[seq];
    EXPECT_EQ(a.retry([&] { return fi_tsendmsg(ep, &m, flags); }, got), 0);
    auto deadline = clock_type::now() + std::chrono::seconds(10);
    bool sent = false;
    while (clock_type::now() < deadline && !(sent && (o.send_err || o.echoed))) {
      for (const done_entry& e : got) {
        if (e.ctx == &sctx[seq]) sent = true, o.send_err = e.err;
        else if (e.ctx == &rctx[seq] && !e.err) o.echoed = true;
        else ADD_FAILURE() << "round " << seq << ": an unexpected completion, error "
                           << e.err;
      }
      got.clear();
      a.poll(20, got);
    }
    if (o.echoed) {
      EXPECT_EQ(in[seq].magic, note_magic);
      EXPECT_EQ(in[seq].id, seq);
      EXPECT_EQ(in[seq].kind, uint32_t{echo});
    }
    return o;
  };
  for (uint32_t seq = 1; seq <= 3; ++seq) {
    outcome o = round(seq, 0);
    ASSERT_EQ(o.send_err, 0) << seq;
    ASSERT_TRUE(o.echoed) << seq;
  }
  kill(kids.pids[0], SIGKILL);
  waitpid(kids.pids[0], nullptr, 0);
  kids.pids[0] = -1;
  if (progress_while_down) {
    // The client notices the end of the old connection; nothing of its own
    // was outstanding, so nothing completes.
    auto until = clock_type::now() + std::chrono::milliseconds(200);
    while (clock_type::now() < until) a.poll(20, got);
    EXPECT_TRUE(got.empty()) << got.size() << " completions while the server was down";
    got.clear();
  }
  // B' on the same port; the client does nothing meanwhile.
  ASSERT_TRUE(put(down[1].fd[1], 's'));
  ASSERT_TRUE(take(up.fd[0], 'n', 1, 10000)) << "B' did not start: " << b->why[1];
  uint32_t first = 4;
  if (mode == restart_mode::peer_speaks_first) {
    // B' connects to us while our connection to B may still look alive.
    note hi{};
    fi_context2 hctx;
    ASSERT_EQ(fi_trecv(ep, &hi, sizeof hi, nullptr, server, tag_of(push, 0), 0, &hctx), 0);
    auto deadline = clock_type::now() + std::chrono::seconds(10);
    bool arrived = false;
    while (!arrived && clock_type::now() < deadline) {
      a.poll(20, got);
      for (const done_entry& e : got) {
        EXPECT_EQ(e.err, 0) << fi_strerror(e.err);
        arrived |= e.ctx == &hctx && !e.err;
      }
      got.clear();
    }
    ASSERT_TRUE(arrived) << "the restarted server's first message never arrived";
    EXPECT_EQ(hi.magic, note_magic);
    EXPECT_EQ(hi.kind, uint32_t{push});
  } else if (!progress_while_down) {
    // The first send goes into the dead connection unless progress threads
    // noticed its end: then it completes in error, or it arrives at B'.
    outcome o = round(first++, FI_DELIVERY_COMPLETE);
    ASSERT_NE(o.send_err, -1) << "the first send after the restart never completed";
    std::printf("  first send after the restart: %s\n",
                o.send_err ? fi_strerror(o.send_err) : "delivered to the new process");
    if (o.send_err) {
      EXPECT_EQ(o.send_err, FI_ECONNRESET) << fi_strerror(o.send_err);
    } else {
      EXPECT_TRUE(o.echoed) << "the first send completed (delivery complete) but B' never got it";
    }
  }
  for (uint32_t seq = first; seq < first + 4; ++seq) {
    outcome o = round(seq, 0);
    EXPECT_EQ(o.send_err, 0) << seq << ": " << (o.send_err > 0 ? fi_strerror(o.send_err) : "");
    EXPECT_TRUE(o.echoed) << seq << ": the restarted server did not get it";
  }
  put(down[1].fd[1], 'x');
  std::vector<int> codes = kids.reap(10);
  EXPECT_EQ(codes[1], 0) << "B': " << b->why[1];
}

TEST_P(tcp_rdm_peers, restarted_peer_is_reached_after_progress) {
  restart(GetParam(), restart_mode::progress_while_down);
}

TEST_P(tcp_rdm_peers, restarted_peer_first_send_fails_or_arrives) {
  restart(GetParam(), restart_mode::no_progress);
}

TEST_P(tcp_rdm_peers, restarted_peer_that_speaks_first_is_heard_and_answered) {
  restart(GetParam(), restart_mode::peer_speaks_first);
}

INSTANTIATE_TEST_SUITE_P(tcp, tcp_rdm_peers, testing::ValuesIn(tcp_rdm_configs()), config_name);

}  // namespace
}  // namespace conformance
