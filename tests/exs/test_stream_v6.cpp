// SPDX-License-Identifier: MIT
// libexs tests: a vectored receive on a SOCK_STREAM socket (the bytes that
// arrived are scattered over the iovecs in order, a receive takes what there
// is), and both socket types over IPv6 loopback, names included.
#include "helpers.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>

using namespace exstest;

namespace {

const timespec zero{0, 0};

void drain_and_delete(exs_qhandle_t q) {
  exs_event_t ev;
  while (exs_qdequeue(q, &ev, 1, &zero) == 1) {}
  EXPECT_EQ(exs_qdelete(q), 0);
}

// Receives `total` bytes into `in` with exs_recvv, each call scattering
// over three iovecs of what is left (7 bytes, then the rest split in two),
// and returns how many receives it took; every event is checked.
int recvv_all(int fd, exs_qhandle_t q, std::vector<char>& in, exs_mhandle_t mh) {
  size_t got = 0;
  int calls = 0;
  while (got < in.size()) {
    size_t left = in.size() - got;
    size_t a = std::min<size_t>(7, left), b = (left - a) / 2, c = left - a - b;
    iovec iv[3] = {{in.data() + got, a}, {in.data() + got + a, b}, {in.data() + got + a + b, c}};
    exs_mhandle_t hs[3] = {mh, mh, mh};
    int n = c ? 3 : b ? 2 : 1;
    EXPECT_EQ(exs_recvv(fd, iv, n, 0, hs, q, nullptr), 0);
    exs_event_t ev;
    do ev = next_event(q);
    while (ev.exs_evt_type == EXS_EVT_SEND);
    EXPECT_EQ(ev.exs_evt_type, EXS_EVT_RECV);
    EXPECT_EQ(ev.exs_evt_errno, 0) << strerror(ev.exs_evt_errno);
    EXPECT_GT(ev.exs_evt_bytes, 0) << "a stream receive returns once bytes arrived";
    EXPECT_LE(size_t(ev.exs_evt_bytes), left);
    if (ev.exs_evt_type != EXS_EVT_RECV || ev.exs_evt_bytes <= 0) return -1;
    got += size_t(ev.exs_evt_bytes);
    ++calls;
  }
  return calls;
}

}  // namespace

// Two sends of 100 and 65436 bytes: vectored receives (each starting with a
// 7-byte iovec, so every call crosses iovec boundaries) take the bytes in
// order, whatever pieces they arrive in, and none is lost or repeated.
TEST(exs_stream, vectored_receives_scatter_the_bytes_in_order) {
  exs_qhandle_t q = exs_qcreate(4096);
  int l = listener(SOCK_STREAM);
  pair_t p = connect_pair(l, SOCK_STREAM, q);
  std::vector<char> out(65536), in(65536, 0);
  fill(out, 9);
  exs_mhandle_t mo = exs_mregister(out.data(), out.size(), EXS_ACCESS_READ);
  exs_mhandle_t mi = exs_mregister(in.data(), in.size(), EXS_ACCESS_WRITE);
  ASSERT_EQ(exs_send(p.client, out.data(), 100, 0, mo, q, nullptr), 0);
  ASSERT_EQ(exs_send(p.client, out.data() + 100, out.size() - 100, 0, mo, q, nullptr), 0);
  int calls = recvv_all(p.server, q, in, mi);
  EXPECT_GE(calls, 1);
  EXPECT_EQ(in, out);
  exs_mderegister(&mo);
  exs_mderegister(&mi);
  exs_close(p.client);
  exs_close(p.server);
  exs_close(l);
  drain_and_delete(q);
}

namespace {

bool ipv6_loopback_usable() {
  int s = ::socket(AF_INET6, SOCK_STREAM, 0);
  if (s < 0) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  bool ok = ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(s);
  return ok;
}

sockaddr_in6 v6_loopback(uint16_t port) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  a.sin6_addr = in6addr_loopback;
  return a;
}

class exs_ipv6 : public testing::TestWithParam<int> {};

}  // namespace

// An AF_INET6 socket bound to [::1]:0 shows its real port before listen;
// a client connects through [::1]; both ends name each other as IPv6
// addresses; a message crosses each way, byte for byte.
TEST_P(exs_ipv6, a_pair_on_ipv6_loopback_connects_names_its_ends_and_carries_data) {
  if (!ipv6_loopback_usable()) GTEST_SKIP() << "no IPv6 loopback here";
  const int type = GetParam();
  exs_qhandle_t q = exs_qcreate(4096);
  int l = exs_socket(AF_INET6, type, 0);
  ASSERT_GE(l, 0) << strerror(errno);
  sockaddr_in6 at = v6_loopback(0);
  ASSERT_EQ(exs_bind(l, reinterpret_cast<sockaddr*>(&at), sizeof at), 0) << strerror(errno);
  sockaddr_in6 named{};
  socklen_t n = sizeof named;
  ASSERT_EQ(exs_getsockname(l, reinterpret_cast<sockaddr*>(&named), &n), 0);
  EXPECT_EQ(named.sin6_family, AF_INET6);
  const uint16_t port = ntohs(named.sin6_port);
  EXPECT_NE(port, 0) << "exs_bind to port 0 shows the real port";
  ASSERT_EQ(exs_listen(l, 8), 0);

  int c = exs_socket(AF_INET6, type, 0);
  ASSERT_GE(c, 0);
  sockaddr_in6 to = v6_loopback(port);
  int actx = 1, cctx = 2, server = -1;
  ASSERT_EQ(exs_accept(l, 0, q, &actx), 0);
  ASSERT_EQ(exs_connect(c, reinterpret_cast<sockaddr*>(&to), sizeof to, 0, q, &cctx), 0);
  for (int i = 0; i < 2; ++i) {
    exs_event_t ev = next_event(q);
    ASSERT_EQ(ev.exs_evt_errno, 0) << strerror(ev.exs_evt_errno);
    if (ev.exs_evt_type == EXS_EVT_ACCEPT) server = EXS_EVT_NEW_SOCKET(ev);
  }
  ASSERT_GE(server, 0);

  sockaddr_in6 peer{};
  n = sizeof peer;
  ASSERT_EQ(exs_getpeername(c, reinterpret_cast<sockaddr*>(&peer), &n), 0);
  EXPECT_EQ(peer.sin6_family, AF_INET6);
  EXPECT_EQ(ntohs(peer.sin6_port), port);
  EXPECT_EQ(0, memcmp(&peer.sin6_addr, &in6addr_loopback, sizeof peer.sin6_addr));
  n = sizeof peer;
  ASSERT_EQ(exs_getpeername(server, reinterpret_cast<sockaddr*>(&peer), &n), 0);
  EXPECT_EQ(peer.sin6_family, AF_INET6);
  EXPECT_EQ(0, memcmp(&peer.sin6_addr, &in6addr_loopback, sizeof peer.sin6_addr));

  std::vector<char> out(4096), in(4096, 0);
  fill(out, 11);
  exs_mhandle_t mo = exs_mregister(out.data(), out.size(), EXS_ACCESS_READ);
  exs_mhandle_t mi = exs_mregister(in.data(), in.size(), EXS_ACCESS_WRITE);
  for (auto [from, at_end] : {std::pair{c, server}, std::pair{server, c}}) {
    std::fill(in.begin(), in.end(), 0);
    ASSERT_EQ(exs_recv(at_end, in.data(), in.size(), 0, mi, q, nullptr), 0);
    ASSERT_EQ(exs_send(from, out.data(), out.size(), 0, mo, q, nullptr), 0);
    size_t got = 0;
    for (int events = 0; events < 2;) {
      exs_event_t ev = next_event(q);
      ASSERT_NE(ev.exs_evt_type, EXS_EVT_NONE);
      EXPECT_EQ(ev.exs_evt_errno, 0);
      ++events;
      if (ev.exs_evt_type != EXS_EVT_RECV) continue;
      got += size_t(ev.exs_evt_bytes);
      if (got < in.size()) {  // a stream may deliver in pieces
        ASSERT_EQ(exs_recv(at_end, in.data() + got, in.size() - got, 0, mi, q, nullptr), 0);
        --events;
      }
    }
    EXPECT_EQ(in, out);
  }
  exs_mderegister(&mo);
  exs_mderegister(&mi);
  exs_close(c);
  exs_close(server);
  exs_close(l);
  drain_and_delete(q);
}

INSTANTIATE_TEST_SUITE_P(both, exs_ipv6, testing::Values(SOCK_STREAM, SOCK_SEQPACKET),
                         [](const testing::TestParamInfo<int>& i) {
                           return std::string(i.param == SOCK_STREAM ? "stream" : "seqpacket");
                         });
