// SPDX-License-Identifier: MIT
// weft — tcp unit tests: peers that go away.
//
// Unreachable peers, a storm of sends to them: a closed port refuses at once
// (FI_ECONNREFUSED). A peer whose packets vanish — on loopback, a listener
// whose accept queue is full (the kernel drops the SYNs); in a private
// network namespace, an address behind a veth link whose frames go to a MAC
// address nobody owns — fails when FI_TCP_CONN_TIMEOUT passes (1500 ms under
// ctest's unit.tcp_conn_deadline, tcp_fixture.hpp) with FI_ETIMEDOUT. Every send is accepted
// (never an endless -FI_EAGAIN), every one completes once, in error, and the
// log names the peer. The endpoint serves others meanwhile.
//
// The namespace is the calling thread's alone (unshare(2) moves only the
// calling thread, and a socket stays in the namespace it was made in), so
// the test leaves it again at the end; without CAP_SYS_ADMIN or the `ip`
// tool that part is left out (the loopback peers still run).
//
// A peer that comes back: it restarted (its host crashed: no end of stream
// ever reached us) and connects to us while our connection to its previous
// life still looks established. It must be served, whichever side of the
// simultaneous-connect tie-break we are on.
#include "../core/log_capture.hpp"
#include "core/log.hpp"
#include "prov/tcp/tcp.hpp"
#include "tcp_fixture.hpp"

#include <fcntl.h>
#include <sched.h>

#include <cstdio>
#include <optional>
#include <string>

namespace tcp_test {
namespace {

using clock_type = std::chrono::steady_clock;

// The calling thread in a network namespace of its own while in scope.
class private_netns {
 public:
  private_netns() : home_(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) {
    if (home_ < 0) {
      why_ = std::string("cannot open our namespace: ") + std::strerror(errno);
    } else if (::unshare(CLONE_NEWNET) != 0) {
      why_ = std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
    } else {
      entered_ = true;
      if (!ip("link set lo up")) why_ = "the `ip` tool cannot configure the namespace";
    }
  }
  ~private_netns() {
    if (entered_ && ::setns(home_, CLONE_NEWNET) != 0)
      ADD_FAILURE() << "cannot return to our network namespace: " << std::strerror(errno);
    if (home_ >= 0) ::close(home_);
  }
  private_netns(const private_netns&) = delete;
  private_netns& operator=(const private_netns&) = delete;
  bool usable() const { return entered_ && why_.empty(); }
  const std::string& why() const { return why_; }
  // `ip <args>` in this namespace (system(3) forks from this thread).
  static bool ip(const std::string& args) {
    return std::system(("ip " + args + " >/dev/null 2>&1").c_str()) == 0;
  }

 private:
  int home_;
  bool entered_ = false;
  std::string why_;
};


sockaddr_in loopback(uint16_t port) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sin.sin_port = htons(port);
  return sin;
}

std::string text_of(const sockaddr_in& sin) {
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &sin.sin_addr, buf, sizeof buf);
  return std::string(buf) + ":" + std::to_string(ntohs(sin.sin_port));
}

// A bound socket's loopback address.
sockaddr_in bound_to(int s) {
  sockaddr_in sin = loopback(0);
  socklen_t len = sizeof sin;
  EXPECT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&sin), sizeof sin), 0);
  EXPECT_EQ(::getsockname(s, reinterpret_cast<sockaddr*>(&sin), &len), 0);
  return sin;
}

struct target {
  const char* what;
  sockaddr_in addr;
  int err;        // the error every send to it completes with
  bool at_deadline;  // FI_ETIMEDOUT at the connection deadline, or at once
  fi_addr_t fi = FI_ADDR_NOTAVAIL;
};

class tcp_unreachable : public rdm_fixture {};

TEST_F(tcp_unreachable, every_send_fails_in_time_and_names_its_peer) {
  SKIP_UNLESS_SHORT_CONN_DEADLINE();
  const int deadline_ms = cfg().conn_timeout_ms;
  ASSERT_LE(deadline_ms, 5000) << "FI_TCP_CONN_TIMEOUT is set too high for this test";
  std::optional<private_netns> ns;
  ns.emplace();
  if (!ns->usable()) {
    std::printf("  no private network namespace (%s): loopback peers only\n", ns->why().c_str());
    ns.reset();
  }
  bool blackhole = false;
  if (ns) {
    // 10.77.0.2 is on wb0's link; its (permanent) neighbour entry names a
    // MAC address nobody owns, so wb1 drops every frame: no answer, no ICMP.
    blackhole = private_netns::ip("link add wb0 type veth peer name wb1") &&
                private_netns::ip("addr add 10.77.0.1/24 dev wb0") &&
                private_netns::ip("link set wb0 up") && private_netns::ip("link set wb1 up") &&
                private_netns::ip("neigh replace 10.77.0.2 lladdr 02:00:00:00:77:02 dev wb0 "
                                  "nud permanent");
    if (!blackhole) std::printf("  cannot build the veth link: loopback peers only\n");
  }
  fi_addr_t self;
  fid_ep* ep = open_ep(&self);
  ASSERT_NE(ep, nullptr);

  // Nothing listens: refused at once.
  int closed = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in closed_addr = bound_to(closed);
  ::close(closed);
  // A listener that never accepts, its queue (backlog 0: one connection)
  // filled: the kernel drops further SYNs, the connect stays in SYN_SENT.
  int full = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in full_addr = bound_to(full);
  ASSERT_EQ(::listen(full, 0), 0);
  int filler = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(::connect(filler, reinterpret_cast<sockaddr*>(&full_addr), sizeof full_addr), 0);

  std::vector<target> targets = {
      {"a closed port", closed_addr, FI_ECONNREFUSED, false},
      {"a full accept queue", full_addr, FI_ETIMEDOUT, true},
  };
  if (blackhole) {
    sockaddr_in hole = loopback(4242);
    inet_pton(AF_INET, "10.77.0.2", &hole.sin_addr);
    targets.push_back({"a black hole", hole, FI_ETIMEDOUT, true});
  }
  for (target& t : targets) ASSERT_EQ(fi_av_insert(av, &t.addr, 1, &t.fi, 0, nullptr), 1);

  weft::test::log_capture log(FI_LOG_WARN);
  // The storm: several sends to each peer at once, tagged and not, before
  // any progress; they all wait on the one connection attempt per peer.
  constexpr int per_target = 8;
  std::vector<fi_context> ctx(targets.size() * per_target);
  auto start = clock_type::now();
  for (size_t t = 0; t < targets.size(); ++t)
    for (int i = 0; i < per_target; ++i) {
      fi_context* c = &ctx[t * per_target + i];
      ssize_t r = i % 2 ? fi_tsend(ep, "x", 1, nullptr, targets[t].fi, 7, c)
                        : fi_send(ep, "y", 1, nullptr, targets[t].fi, c);
      ASSERT_EQ(r, 0) << targets[t].what << ", send " << i << ": " << fi_strerror(int(-r));
    }
  // Meanwhile the endpoint serves a live peer: itself.
  char in[4] = {};
  fi_context rctx, sctx;
  ASSERT_EQ(fi_recv(ep, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &rctx), 0);
  ASSERT_EQ(fi_send(ep, "ok", 3, nullptr, self, &sctx), 0);

  // Every send completes once, in error, in time.
  std::vector<int> errs(ctx.size(), 0);
  std::vector<double> when(ctx.size(), 0);
  double live_ms = -1;
  int live = 0;
  size_t left = ctx.size();
  auto ms_since_start = [&] {
    return std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
  };
  auto give_up = start + std::chrono::milliseconds(deadline_ms * 3);
  while ((left || live < 2) && clock_type::now() < give_up) {
    fi_cq_tagged_entry e;
    ssize_t n = fi_cq_read(cq, &e, 1);
    if (n == 1) {
      if (e.op_context == &rctx || e.op_context == &sctx) {
        if (++live == 2) live_ms = ms_since_start();
      } else {
        ADD_FAILURE() << "a send to an unreachable peer completed successfully";
      }
      continue;
    }
    if (n != -FI_EAVAIL) continue;
    fi_cq_err_entry ee{};
    ASSERT_EQ(fi_cq_readerr(cq, &ee, 0), 1);
    auto* c = static_cast<fi_context*>(ee.op_context);
    ASSERT_TRUE(c >= ctx.data() && c < ctx.data() + ctx.size())
        << "an error completion for something else: " << fi_strerror(ee.err);
    size_t k = static_cast<size_t>(c - ctx.data());
    EXPECT_EQ(errs[k], 0) << "send " << k << " completed twice";
    errs[k] = ee.err;
    when[k] = ms_since_start();
    --left;
  }
  EXPECT_EQ(live, 2) << "a live peer waited for the dead ones";
  EXPECT_LT(live_ms, 1000) << "a live peer waited for the dead ones";
  EXPECT_STREQ(in, "ok");
  for (size_t k = 0; k < ctx.size(); ++k)
    EXPECT_NE(errs[k], 0) << targets[k / per_target].what << ", send " << k % per_target
                          << ": no completion in " << 3 * deadline_ms << " ms";
  ASSERT_EQ(left, 0u) << "sends to unreachable peers never completed";
  for (size_t t = 0; t < targets.size(); ++t) {
    const target& tg = targets[t];
    for (int i = 0; i < per_target; ++i) {
      size_t k = t * per_target + i;
      EXPECT_EQ(errs[k], tg.err) << tg.what << ", send " << i << ": " << fi_strerror(errs[k]);
      if (tg.at_deadline) {
        EXPECT_GE(when[k], deadline_ms - 50) << tg.what << ": failed before the deadline";
        EXPECT_LE(when[k], deadline_ms + 1000) << tg.what << ": failed long after the deadline";
      } else {
        EXPECT_LT(when[k], 1000) << tg.what << ": not refused at once";
      }
    }
    std::printf("  %s (%s): %s after %.0f ms\n", tg.what, text_of(tg.addr).c_str(),
                fi_strerror(errs[t * per_target]), when[t * per_target]);
  }
  // One warning per peer, naming it.
  std::string text = log.text();
  for (const target& tg : targets) {
    std::string name = text_of(tg.addr);
    size_t at = text.find("cannot connect to " + name);
    EXPECT_NE(at, std::string::npos) << "the log does not name " << tg.what << " (" << name
                                     << "):\n" << text;
  }
  ::close(filler);
  ::close(full);
}

// ---- a peer that reconnects behind a connection that looks alive ----

void send_frame(int fd, const frame& f, const void* payload = nullptr, size_t len = 0) {
  std::byte hdr[proto::max_hdr_len];
  frame g = f;
  g.payload_len = static_cast<uint32_t>(len);
  size_t n = build_header(g, hdr);
  ASSERT_GT(n, 0u);
  ASSERT_EQ(::send(fd, hdr, n, MSG_NOSIGNAL), static_cast<ssize_t>(n));
  if (len) {
    ASSERT_EQ(::send(fd, payload, len, MSG_NOSIGNAL), static_cast<ssize_t>(len));
  }
}

frame hello_naming(const sockaddr_in& sin) {
  frame f{};
  f.op = proto::op::hello;
  f.addr_len = 6;
  std::memcpy(f.addr, &sin.sin_addr, 4);
  std::memcpy(f.addr + 4, &sin.sin_port, 2);
  return f;
}

// Frames arriving on `fd` until `want` of them (5 s at most), `poll` run
// in between; payloads are skipped.
std::vector<frame> frames_from(int fd, const std::function<void()>& poll, size_t want) {
  frame_reader r;
  return read_frames(fd, r, want, poll);
}

class tcp_restart : public rdm_fixture {
 protected:
  void reconnect_behind_an_established_connection(bool we_are_lower);
};

// `we_are_lower`: B listens above our port, and we are the lower address of
// the pair, the side whose own connection wins a simultaneous connect; else
// below it.
void tcp_restart::reconnect_behind_an_established_connection(bool we_are_lower) {
  sockaddr_in me{};
  fi_addr_t self;
  fid_ep* ep = open_ep(&self, &me);
  ASSERT_NE(ep, nullptr);
  auto progress = [&] { poll_for(1); };
  int l = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in b_addr = loopback(0);
  int ours = ntohs(me.sin_port), step = we_are_lower ? -1 : 1;
  for (int port = we_are_lower ? 65535 : 1025; port != ours; port += step) {
    b_addr.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(l, reinterpret_cast<sockaddr*>(&b_addr), sizeof b_addr) == 0) break;
    b_addr.sin_port = 0;
  }
  ASSERT_NE(b_addr.sin_port, 0);
  ASSERT_EQ(::listen(l, 4), 0);
  fi_addr_t b;
  ASSERT_EQ(fi_av_insert(av, &b_addr, 1, &b, 0, nullptr), 1);

  // Our first send opens our connection to B, which answers our hello.
  fi_context s1;
  ASSERT_EQ(fi_send(ep, "one", 4, nullptr, b, &s1), 0);
  int old_conn = -1;
  drive_until([&] { return (old_conn = ::accept4(l, nullptr, nullptr, SOCK_NONBLOCK)) >= 0; },
              progress);
  ASSERT_GE(old_conn, 0);
  std::vector<frame> got = frames_from(old_conn, progress, 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].op, proto::op::hello);
  send_frame(old_conn, hello_naming(b_addr));
  ASSERT_EQ(wait_for(&s1), 1);
  got = frames_from(old_conn, progress, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].op, proto::op::msg);

  // B's host crashes: its listener is gone; the connection sends nothing,
  // not even an end of stream. B restarts at the same address and connects.
  ::close(l);
  raw_peer b2(me);
  send_frame(b2.fd, hello_naming(b_addr));
  got = frames_from(b2.fd, progress, 1);
  ASSERT_EQ(got.size(), 1u) << "no answer to the restarted peer's hello";
  ASSERT_EQ(got[0].op, proto::op::hello)
      << "the restarted peer was refused (status " << got[0].status
      << "): our connection to its previous life won the tie-break";

  // B' sends: the message is from fi_addr b.
  char in[16] = {};
  fi_context r;
  ASSERT_EQ(fi_recv(ep, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &r), 0);
  frame m{};
  m.op = proto::op::msg;
  send_frame(b2.fd, m, "from b2", 8);
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  fi_cq_tagged_entry e{};
  drive_until([&] { return fi_cq_readfrom(cq, &e, 1, &src) == 1; }, [] {});
  EXPECT_EQ(e.op_context, &r);
  EXPECT_EQ(src, b);
  EXPECT_STREQ(in, "from b2");

  // Our sends to b now go to B', not into the connection to B's past.
  fi_context s2;
  ASSERT_EQ(fi_send(ep, "two", 4, nullptr, b, &s2), 0);
  ASSERT_EQ(wait_for(&s2), 1);
  got = frames_from(b2.fd, progress, 1);
  ASSERT_EQ(got.size(), 1u) << "the restarted peer did not get our message";
  EXPECT_EQ(got[0].op, proto::op::msg);
  EXPECT_EQ(got[0].payload_len, 4u);
  char sink[64];
  EXPECT_LT(::recv(old_conn, sink, sizeof sink, MSG_DONTWAIT), 0) << "sent into the stale connection";
  ::close(old_conn);
}

TEST_F(tcp_restart, a_peer_reconnecting_behind_our_established_connection_is_served) {
  reconnect_behind_an_established_connection(true);
}

TEST_F(tcp_restart, a_peer_reconnecting_is_served_from_the_higher_side_too) {
  reconnect_behind_an_established_connection(false);
}

}  // namespace
}  // namespace tcp_test
