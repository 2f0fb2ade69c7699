// SPDX-License-Identifier: MIT
// libexs: the connection calls and the first transfers.
#include "helpers.hpp"

#include <fcntl.h>
#include <unistd.h>

using namespace exstest;

TEST(exs_init, returns_the_version_asked_for_or_the_one_it_offers) {
  EXPECT_EQ(exs_init(EXS_VERSION1), EXS_VERSION1);
  EXPECT_EQ(exs_init(EXS_VERSION(7, 3)), EXS_VERSION1);
  EXPECT_EQ(exs_init(0), EXS_VERSION1);
  EXPECT_EQ(EXS_VERSION_MAJOR(EXS_VERSION1), 1u);
}

TEST(exs_socket, descriptors_are_real_and_distinct) {
  int a = exs_socket(AF_INET, SOCK_SEQPACKET, 0);
  int b = exs_socket(AF_INET6, SOCK_STREAM, 0);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  EXPECT_NE(a, b);
  EXPECT_NE(fcntl(a, F_GETFD), -1);  // the process's own descriptor
  int other = open("/dev/null", O_RDONLY);
  EXPECT_NE(other, a);
  EXPECT_NE(other, b);
  close(other);
  int v = 0;
  socklen_t n = sizeof v;
  EXPECT_EQ(exs_getsockopt(a, SOL_SOCKET, SO_TYPE, &v, &n), 0);
  EXPECT_EQ(v, SOCK_SEQPACKET);
  EXPECT_EQ(exs_close(a), 0);
  EXPECT_EQ(exs_close(b), 0);
  EXPECT_EQ(fcntl(a, F_GETFD), -1);
}

TEST(exs_socket, bad_arguments) {
  errno = 0;
  EXPECT_EQ(exs_socket(AF_UNIX, SOCK_STREAM, 0), -1);
  EXPECT_EQ(errno, EAFNOSUPPORT);
  EXPECT_EQ(exs_socket(AF_INET, SOCK_DGRAM, 0), -1);
  EXPECT_EQ(errno, EPROTOTYPE);
  EXPECT_EQ(exs_socket(AF_INET, SOCK_STREAM, 99), -1);
  EXPECT_EQ(errno, EPROTONOSUPPORT);
}

TEST(exs_bind, port_zero_shows_the_real_port_before_listen) {
  int s = exs_socket(AF_INET, SOCK_SEQPACKET, 0);
  sockaddr_in a = loopback();
  ASSERT_EQ(exs_bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  uint16_t port = port_of(s);
  EXPECT_NE(port, 0);
  // Really bound: neither a socket of the system nor another exs socket can
  // take the same port.
  sockaddr_in b = loopback(port);
  int k = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(bind(k, reinterpret_cast<sockaddr*>(&b), sizeof b), -1);
  EXPECT_EQ(errno, EADDRINUSE);
  close(k);
  int t = exs_socket(AF_INET, SOCK_SEQPACKET, 0);
  EXPECT_EQ(exs_bind(t, reinterpret_cast<sockaddr*>(&b), sizeof b), -1);
  EXPECT_EQ(errno, EADDRINUSE);
  // Bound twice: EINVAL, as bind(2).
  EXPECT_EQ(exs_bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), -1);
  EXPECT_EQ(errno, EINVAL);
  exs_close(t);
  exs_close(s);
}

TEST(exs_bind, a_bound_client_connects_from_its_port) {
  exs_qhandle_t q = exs_qcreate(8);
  int l = listener(SOCK_SEQPACKET);
  int c = exs_socket(AF_INET, SOCK_SEQPACKET, 0);
  sockaddr_in a = loopback();
  ASSERT_EQ(exs_bind(c, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  uint16_t port = port_of(c);
  ASSERT_NE(port, 0);
  sockaddr_in to = loopback(port_of(l));
  ASSERT_EQ(exs_accept(l, 0, q, nullptr), 0);
  ASSERT_EQ(exs_connect(c, reinterpret_cast<sockaddr*>(&to), sizeof to, 0, q, nullptr), 0);
  int server = -1;
  for (int i = 0; i < 2; ++i) {
    exs_event_t ev = next_event(q);
    ASSERT_EQ(ev.exs_evt_errno, 0);
    if (ev.exs_evt_type == EXS_EVT_ACCEPT) {
      server = EXS_EVT_NEW_SOCKET(ev);
      auto* peer = reinterpret_cast<sockaddr_in*>(&ev.exs_evt_u.accept.addr);
      EXPECT_EQ(ntohs(peer->sin_port), port);
    }
  }
  ASSERT_GE(server, 0);
  EXPECT_EQ(port_of(c), port);
  sockaddr_in p{};
  socklen_t n = sizeof p;
  ASSERT_EQ(exs_getpeername(server, reinterpret_cast<sockaddr*>(&p), &n), 0);
  EXPECT_EQ(ntohs(p.sin_port), port);
  n = sizeof p;
  ASSERT_EQ(exs_getpeername(c, reinterpret_cast<sockaddr*>(&p), &n), 0);
  EXPECT_EQ(ntohs(p.sin_port), port_of(l));
  exs_close(c);
  exs_close(server);
  exs_close(l);
  EXPECT_EQ(exs_qdelete(q), 0);
}

TEST(exs_connect, refused_when_nobody_listens) {
  exs_qhandle_t q = exs_qcreate(4);
  int s = exs_socket(AF_INET, SOCK_STREAM, 0);
  // A port that was bound and let go: nothing listens there.
  int t = exs_socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = loopback();
  ASSERT_EQ(exs_bind(t, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  sockaddr_in to = loopback(port_of(t));
  exs_close(t);
  ASSERT_EQ(exs_connect(s, reinterpret_cast<sockaddr*>(&to), sizeof to, 0, q, nullptr), 0);
  exs_event_t ev = next_event(q);
  EXPECT_EQ(ev.exs_evt_type, EXS_EVT_CONNECT);
  EXPECT_EQ(ev.exs_evt_errno, ECONNREFUSED);
  exs_close(s);
  EXPECT_EQ(exs_qdelete(q), 0);
}

TEST(exs_seqpacket, messages_keep_their_boundaries) {
  exs_qhandle_t q = exs_qcreate(64);
  int l = listener(SOCK_SEQPACKET);
  pair_t p = connect_pair(l, SOCK_SEQPACKET, q);
  std::vector<char> out(3000), in(4096, 0);
  fill(out, 1);
  exs_mhandle_t mo = exs_mregister(out.data(), out.size(), EXS_ACCESS_READ);
  exs_mhandle_t mi = exs_mregister(in.data(), in.size(), EXS_ACCESS_WRITE);
  // Two receives, then two messages of 1000 and 2000 bytes.
  ASSERT_EQ(exs_recv(p.server, in.data(), 2048, 0, mi, q, &in[0]), 0);
  ASSERT_EQ(exs_recv(p.server, in.data() + 2048, 2048, 0, mi, q, &in[2048]), 0);
  ASSERT_EQ(exs_send(p.client, out.data(), 1000, 0, mo, q, &out[0]), 0);
  ASSERT_EQ(exs_send(p.client, out.data() + 1000, 2000, 0, mo, q, &out[1000]), 0);
  int sends = 0, recvs = 0;
  while (sends + recvs < 4) {
    exs_event_t ev = next_event(q);
    ASSERT_EQ(ev.exs_evt_errno, 0);
    if (ev.exs_evt_type == EXS_EVT_SEND) {
      ++sends;
      EXPECT_EQ(ev.exs_evt_bytes, ev.exs_evt_context == &out[0] ? 1000 : 2000);
    } else {
      ASSERT_EQ(ev.exs_evt_type, EXS_EVT_RECV);
      ++recvs;
      EXPECT_EQ(ev.exs_evt_fd, p.server);
      EXPECT_EQ(ev.exs_evt_bytes, ev.exs_evt_context == &in[0] ? 1000 : 2000);
      EXPECT_EQ(ev.exs_evt_flags, 0);
    }
  }
  EXPECT_EQ(0, memcmp(in.data(), out.data(), 1000));
  EXPECT_EQ(0, memcmp(in.data() + 2048, out.data() + 1000, 2000));
  exs_close(p.client);
  exs_close(p.server);
  exs_close(l);
  EXPECT_EQ(exs_mderegister(&mo), 0);
  EXPECT_EQ(exs_mderegister(&mi), 0);
  EXPECT_EQ(mo, EXS_MHANDLE_INVALID);
  EXPECT_EQ(exs_qdelete(q), 0);
}
