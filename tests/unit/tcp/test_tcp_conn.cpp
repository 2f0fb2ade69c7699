// SPDX-License-Identifier: MIT
// weft — unit tests of tcp connections: the transmit queue written through
// a socket that takes a little at a time (partial writes resume where they
// stopped, frames stay whole and in order, the control frame goes first,
// a long queue of small frames is gathered past the iovec limit), the
// transmit pool running dry (-FI_EAGAIN, no growth), two endpoints
// connecting to each other at once collapsing to one connection, and
// connections within the host using FI_TCP_LOCAL_CC.
#include "prov/tcp/tcp.hpp"
#include "tcp_fixture.hpp"

#include <dirent.h>
#include <netinet/tcp.h>
#include <sys/stat.h>

#include <numeric>
#include <string>

namespace tcp_test {
namespace {

// A socketpair whose writing side takes little at a time.
struct pipe_pair {
  int w = -1, r = -1;
  pipe_pair() {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    w = sv[0];
    r = sv[1];
    int small = 4096;
    ::setsockopt(w, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    ::setsockopt(r, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  }
  ~pipe_pair() {
    if (r >= 0) ::close(r);
  }
};

void fill_entry(tx_entry& t, std::vector<char>& payload, uint64_t tag) {
  t = tx_entry{};
  size_t hl = build_msg_header(t.hdr, proto::op::tagged, 0, static_cast<uint32_t>(payload.size()),
                               0, tag, 0);
  t.iov[0] = {t.hdr, hl};
  // The payload in two pieces, to cross iovec boundaries too.
  size_t half = payload.size() / 2;
  t.iov[1] = {payload.data(), half};
  t.iov[2] = {payload.data() + half, payload.size() - half};
  t.count = 3;
  t.left = hl + payload.size();
}

// Writes c's queue into the socket and reads it back from `rfd`, `piece`
// bytes at a time, until `want` frames are whole and c is idle (or
// `max_rounds` pass): the frames, their payloads and the finished entries.
void pump(conn& c, int rfd, size_t piece, size_t want, int max_rounds, frame_reader& reader,
          std::vector<frame>& frames, std::vector<std::vector<char>>& got,
          std::vector<tx_entry*>& done) {
  std::vector<char> buf(piece);
  int rounds = 0;
  while ((!c.tx_idle() || frames.size() < want || !reader.at_boundary()) &&
         rounds++ < max_rounds) {
    tx_entry* fin = nullptr;
    int err = 0;
    conn::io st = c.flush(true, &fin, &err);
    ASSERT_NE(st, conn::io::error) << strerror(err);
    for (; fin; fin = fin->next) done.push_back(fin);
    ssize_t r = ::recv(rfd, buf.data(), buf.size(), MSG_DONTWAIT);
    for (size_t off = 0; r > 0 && off < static_cast<size_t>(r);) {
      auto res = reader.feed(buf.data() + off, r - off);
      off += res.used;
      if (res.st == frame_reader::status::header) {
        frames.push_back(reader.current());
        got.emplace_back(reader.current().payload_len);
        if (reader.payload_left()) reader.set_target(got.back().data(), got.back().size());
      }
      ASSERT_NE(res.st, frame_reader::status::error) << to_string(reader.error());
    }
  }
}

TEST(tcp_conn, partial_writes_resume_and_keep_frames_whole) {
  pipe_pair p;
  conn c(weft::util::unique_fd{p.w}, true, frame_limits{});
  c.state = conn_state::connected;
  std::vector<std::vector<char>> payloads;
  std::vector<tx_entry> entries(4);
  for (size_t i = 0; i < entries.size(); ++i) {
    payloads.emplace_back(30000 + i * 7777);
    std::iota(payloads[i].begin(), payloads[i].end(), static_cast<char>(i));
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    fill_entry(entries[i], payloads[i], 100 + i);
    c.push(&entries[i]);
  }
  frame hello{};
  hello.op = proto::op::hello;
  hello.addr_len = 6;
  ASSERT_TRUE(c.set_ctrl(hello, nullptr, 0));
  EXPECT_TRUE(c.at_frame_boundary());

  frame_reader reader;
  std::vector<frame> frames;
  std::vector<std::vector<char>> got;
  std::vector<tx_entry*> done;
  pump(c, p.r, 3000, 5, 100000, reader, frames, got, done);
  ASSERT_EQ(frames.size(), 5u);
  EXPECT_EQ(frames[0].op, proto::op::hello);  // the control frame went first
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ(frames[i + 1].tag, 100 + i);
    EXPECT_EQ(got[i + 1], payloads[i]) << "frame " << i;
  }
  ASSERT_EQ(done.size(), entries.size());
  for (size_t i = 0; i < done.size(); ++i) EXPECT_EQ(done[i], &entries[i]) << "in order";
}

TEST(tcp_conn, a_long_queue_of_small_frames_is_gathered_and_resumed_mid_frame) {
  // More frames than one sendmsg gathers (iovecs), through a socket that
  // takes a little at a time and a reader that reads odd amounts: writes
  // stop inside headers and payloads, and every frame still arrives whole
  // and in order.
  pipe_pair p;
  conn c(weft::util::unique_fd{p.w}, true, frame_limits{});
  c.state = conn_state::connected;
  constexpr size_t n = 500;
  std::vector<std::vector<char>> payloads;
  std::vector<tx_entry> entries(n);
  for (size_t i = 0; i < n; ++i) {
    payloads.emplace_back(2 + (i * 29) % 97);
    std::iota(payloads[i].begin(), payloads[i].end(), static_cast<char>(i));
    fill_entry(entries[i], payloads[i], i);
    c.push(&entries[i]);
  }
  frame_reader reader;
  std::vector<frame> frames;
  std::vector<std::vector<char>> got;
  std::vector<tx_entry*> done;
  pump(c, p.r, 37, n, 1000000, reader, frames, got, done);
  ASSERT_EQ(frames.size(), n);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(frames[i].tag, i);
    EXPECT_EQ(got[i], payloads[i]) << "frame " << i;
  }
  ASSERT_EQ(done.size(), n);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(done[i], &entries[i]) << "in order";
}

TEST(tcp_conn, boundary_is_known_while_a_frame_is_half_written) {
  pipe_pair p;
  conn c(weft::util::unique_fd{p.w}, true, frame_limits{});
  std::vector<char> big(200000, 'b');
  tx_entry t;
  fill_entry(t, big, 1);
  c.push(&t);
  tx_entry* fin = nullptr;
  int err = 0;
  EXPECT_EQ(c.flush(true, &fin, &err), conn::io::blocked);
  EXPECT_EQ(fin, nullptr);
  EXPECT_FALSE(c.at_frame_boundary());
  tx_entry* q = c.take_queue();
  EXPECT_EQ(q, &t);
  EXPECT_TRUE(c.tx_empty());
}

TEST(tcp_conn, a_closed_reader_is_an_error) {
  pipe_pair p;
  conn c(weft::util::unique_fd{p.w}, true, frame_limits{});
  ::close(p.r);
  p.r = -1;
  std::vector<char> data(10, 'x');
  tx_entry t;
  fill_entry(t, data, 1);
  c.push(&t);
  tx_entry* fin = nullptr;
  int err = 0;
  EXPECT_EQ(c.flush(true, &fin, &err), conn::io::error);
  EXPECT_EQ(err, EPIPE);
}

TEST(tcp_names, tie_break_order_and_round_trip) {
  sockaddr_in a{}, b{};
  a.sin_family = b.sin_family = AF_INET;
  a.sin_addr.s_addr = b.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(1000);
  b.sin_port = htons(2000);
  peer_name na, nb;
  ASSERT_TRUE(name_of(reinterpret_cast<sockaddr*>(&a), na));
  ASSERT_TRUE(name_of(reinterpret_cast<sockaddr*>(&b), nb));
  EXPECT_EQ(na.len, 6);
  EXPECT_TRUE(na < nb);
  EXPECT_FALSE(nb < na);
  EXPECT_FALSE(na < na);
  sockaddr_storage back{};
  ASSERT_TRUE(sockaddr_of(nb, back));
  EXPECT_EQ(reinterpret_cast<sockaddr_in&>(back).sin_port, b.sin_port);
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  v6.sin6_addr = in6addr_loopback;
  v6.sin6_port = htons(1);
  peer_name n6;
  ASSERT_TRUE(name_of(reinterpret_cast<sockaddr*>(&v6), n6));
  EXPECT_EQ(n6.len, 22);
  EXPECT_TRUE(na < n6 || n6 < na);
}

// ---- endpoints ----

class tcp_pool : public rdm_fixture {
  void SetUp() override { open(8); }
};

TEST_F(tcp_pool, a_full_transmit_pool_is_eagain) {
  fi_addr_t a;
  fid_ep* ea = open_ep(&a);
  ASSERT_EQ(info->tx_attr->size, 8u);
  // A listener that never answers: nothing leaves, everything queues.
  sockaddr_in sin;
  int l = loopback_listener(sin, 4);
  ASSERT_GE(l, 0);
  fi_addr_t mute;
  ASSERT_EQ(fi_av_insert(av, &sin, 1, &mute, 0, nullptr), 1);
  int queued = 0;
  while (fi_send(ea, "x", 1, nullptr, mute, nullptr) == 0) ++queued;
  EXPECT_EQ(queued, 8);
  EXPECT_EQ(fi_send(ea, "x", 1, nullptr, mute, nullptr), -FI_EAGAIN);
  EXPECT_EQ(ea->ops->tx_size_left(ea), 0);
  ::close(l);
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
    if (len > 0 && std::string(target, len).rfind("socket:", 0) == 0) ++n;
  }
  closedir(d);
  return n;
}

class tcp_rdm : public rdm_fixture {};

// The congestion control of every connected IPv4 TCP socket this process
// holds whose local or remote port is `port`.
std::vector<std::string> congestion_controls(uint16_t port) {
  std::vector<std::string> out;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    int fd = std::atoi(e->d_name);
    sockaddr_in self{}, peer{};
    socklen_t a = sizeof self, b = sizeof peer;
    char cc[32] = {};
    socklen_t cc_len = sizeof cc;
    if (fd > 2 && ::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &a) == 0 &&
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &b) == 0 &&
        peer.sin_family == AF_INET &&
        (self.sin_port == htons(port) || peer.sin_port == htons(port)) &&
        ::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &cc_len) == 0)
      out.emplace_back(cc);
  }
  closedir(d);
  return out;
}

TEST_F(tcp_rdm, connections_within_the_host_use_the_local_congestion_control) {
  // FI_TCP_LOCAL_CC (reno unless set): on this machine's loopback both ends
  // of the connection, the connecting one and the accepted one. (Meaningful
  // where the system's default is another algorithm, bbr on the development
  // VM: then a connection left at the default fails here.)
  ASSERT_FALSE(cfg().local_cc.empty());
  fi_addr_t a, b;
  fid_ep* ea = open_ep(&a);
  sockaddr_in nb{};
  fid_ep* eb = open_ep(&b, &nb);
  char in[8] = {};
  fi_context r, s;
  ASSERT_EQ(fi_recv(eb, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &r), 0);
  ASSERT_EQ(fi_send(ea, "hi", 3, nullptr, b, &s), 0);
  ASSERT_EQ(wait_for(&r), 1);
  ASSERT_EQ(wait_for(&s), 1);
  // The connection from ea to eb's listening port, both of its ends.
  std::vector<std::string> ccs = congestion_controls(ntohs(nb.sin_port));
  ASSERT_EQ(ccs.size(), 2u);
  for (const std::string& cc : ccs) EXPECT_EQ(cc, cfg().local_cc);
}

TEST_F(tcp_rdm, simultaneous_connects_collapse_to_one_connection) {
  fi_addr_t a, b;
  fid_ep* ea = open_ep(&a);
  fid_ep* eb = open_ep(&b);
  int before = open_sockets();
  char ina[8] = {}, inb[8] = {};
  fi_context ra, rb, sa, sb;
  ASSERT_EQ(fi_recv(ea, ina, sizeof ina, nullptr, FI_ADDR_UNSPEC, &ra), 0);
  ASSERT_EQ(fi_recv(eb, inb, sizeof inb, nullptr, FI_ADDR_UNSPEC, &rb), 0);
  ASSERT_EQ(fi_send(ea, "to b", 5, nullptr, b, &sa), 0);
  ASSERT_EQ(fi_send(eb, "to a", 5, nullptr, a, &sb), 0);
  for (void* ctx : {static_cast<void*>(&ra), static_cast<void*>(&rb), static_cast<void*>(&sa),
                    static_cast<void*>(&sb)})
    ASSERT_EQ(wait_for(ctx), 1);
  poll_for(200);  // the losing connection's refusal and close
  EXPECT_EQ(open_sockets() - before, 2) << "one connection, two ends";
  // Many more messages both ways reuse it.
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(fi_recv(ea, ina, sizeof ina, nullptr, FI_ADDR_UNSPEC, &ra), 0);
    ASSERT_EQ(fi_send(eb, "again", 6, nullptr, a, &sb), 0);
    ASSERT_EQ(wait_for(&ra), 1);
  }
  EXPECT_EQ(open_sockets() - before, 2);
  EXPECT_STREQ(ina, "again");
}

TEST_F(tcp_rdm, a_reused_av_index_reaches_its_new_peer) {
  fi_addr_t a, b, c;
  fid_ep* ea = open_ep(&a);
  fid_ep* eb = open_ep(&b);
  sockaddr_in nc{};
  fid_ep* ec = open_ep(&c, &nc);
  char in[8] = {};
  fi_context r, s;
  ASSERT_EQ(fi_recv(eb, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &r), 0);
  ASSERT_EQ(fi_send(ea, "to b", 5, nullptr, b, &s), 0);
  ASSERT_EQ(wait_for(&r), 1);
  // b's index is freed, then given to c: the connection to b must not serve it.
  ASSERT_EQ(fi_av_remove(av, &b, 1, 0), 0);
  EXPECT_EQ(fi_send(ea, "x", 1, nullptr, b, nullptr), -FI_EINVAL);
  fi_addr_t again;
  ASSERT_EQ(fi_av_insert(av, &nc, 1, &again, 0, nullptr), 1);
  ASSERT_EQ(again, b);
  char inc[8] = {};
  fi_context rc;
  ASSERT_EQ(fi_recv(ec, inc, sizeof inc, nullptr, FI_ADDR_UNSPEC, &rc), 0);
  ASSERT_EQ(fi_recv(eb, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &r), 0);
  ASSERT_EQ(fi_send(ea, "to c", 5, nullptr, again, &s), 0);
  ASSERT_EQ(wait_for(&rc), 1);
  EXPECT_STREQ(inc, "to c");
}

TEST_F(tcp_rdm, a_peer_that_was_not_in_the_av_is_adopted_when_inserted) {
  fi_addr_t a, b;
  fid_ep* ea = open_ep(&a);
  sockaddr_in nb{};
  fid_ep* eb = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &eb, nullptr), 0);
  eps.push_back(eb);
  // eb has an AV of its own that does not know ea yet.
  fid_av* av2 = nullptr;
  fi_av_attr aattr{};
  aattr.type = FI_AV_TABLE;
  ASSERT_EQ(fi_av_open(domain, &aattr, &av2, nullptr), 0);
  ASSERT_EQ(fi_ep_bind(eb, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
  ASSERT_EQ(fi_ep_bind(eb, &av2->fid, 0), 0);
  ASSERT_EQ(fi_enable(eb), 0);
  size_t len = sizeof nb;
  ASSERT_EQ(fi_getname(&eb->fid, &nb, &len), 0);
  ASSERT_EQ(fi_av_insert(av, &nb, 1, &b, 0, nullptr), 1);
  char in[8] = {};
  fi_context r, s;
  fi_addr_t src = 0;
  ASSERT_EQ(fi_recv(eb, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &r), 0);
  ASSERT_EQ(fi_send(ea, "who", 4, nullptr, b, &s), 0);
  fi_cq_tagged_entry e;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  bool got = false;
  while (!got && std::chrono::steady_clock::now() < deadline) {
    fi_addr_t from;
    if (fi_cq_readfrom(cq, &e, 1, &from) == 1 && e.op_context == &r) got = true, src = from;
  }
  ASSERT_TRUE(got);
  EXPECT_EQ(src, FI_ADDR_NOTAVAIL);  // unknown to eb's AV
  int before = open_sockets();
  // Now eb learns ea's address and answers on the same connection.
  sockaddr_in na{};
  len = sizeof na;
  ASSERT_EQ(fi_getname(&ea->fid, &na, &len), 0);
  fi_addr_t a2;
  ASSERT_EQ(fi_av_insert(av2, &na, 1, &a2, 0, nullptr), 1);
  ASSERT_EQ(fi_recv(ea, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &r), 0);
  ASSERT_EQ(fi_send(eb, "me", 3, nullptr, a2, &s), 0);
  ASSERT_EQ(wait_for(&r), 1);
  EXPECT_STREQ(in, "me");
  EXPECT_EQ(open_sockets(), before) << "no second connection";
  EXPECT_EQ(fi_close(&eb->fid), 0);
  eps.pop_back();
  EXPECT_EQ(fi_close(&av2->fid), 0);
}

}  // namespace
}  // namespace tcp_test
