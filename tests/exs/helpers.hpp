// SPDX-License-Identifier: MIT
// libexs tests: helpers shared by the test files. Everything runs on weft's
// tcp provider over loopback (EXS_PROVIDER=tcp is set by main()).
#pragma once

#include <exs/exs.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <chrono>
#include <cstring>
#include <vector>

namespace exstest {

inline sockaddr_in loopback(uint16_t port = 0) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

inline uint16_t port_of(int fd) {
  sockaddr_in a{};
  socklen_t n = sizeof a;
  EXPECT_EQ(exs_getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n), 0);
  return ntohs(a.sin_port);
}

// Dequeues one event, failing the test after `ms` milliseconds.
inline exs_event_t next_event(exs_qhandle_t q, int ms = 5000) {
  exs_event_t ev{};
  timespec t{ms / 1000, (ms % 1000) * 1000000L};
  int n = exs_qdequeue(q, &ev, 1, &t);
  EXPECT_EQ(n, 1) << "no event within " << ms << " ms";
  if (n != 1) ev.exs_evt_type = EXS_EVT_NONE;
  return ev;
}

// No event within `ms`.
inline bool quiet(exs_qhandle_t q, int ms) {
  exs_event_t ev{};
  timespec t{ms / 1000, (ms % 1000) * 1000000L};
  return exs_qdequeue(q, &ev, 1, &t) == 0;
}

// A listening socket on loopback, port chosen by the system.
inline int listener(int type, int backlog = 64) {
  int l = exs_socket(AF_INET, type, 0);
  EXPECT_GE(l, 0);
  sockaddr_in a = loopback();
  EXPECT_EQ(exs_bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(exs_listen(l, backlog), 0);
  return l;
}

struct pair_t {
  int client = -1, server = -1;
};

// A connected pair through listener `l`, events on `q`.
inline pair_t connect_pair(int l, int type, exs_qhandle_t q) {
  pair_t p;
  p.client = exs_socket(AF_INET, type, 0);
  EXPECT_GE(p.client, 0);
  sockaddr_in a = loopback(port_of(l));
  int actx = 1, cctx = 2;
  EXPECT_EQ(exs_accept(l, 0, q, &actx), 0);
  EXPECT_EQ(exs_connect(p.client, reinterpret_cast<sockaddr*>(&a), sizeof a, 0, q, &cctx), 0);
  for (int i = 0; i < 2; ++i) {
    exs_event_t ev = next_event(q);
    EXPECT_EQ(ev.exs_evt_errno, 0) << strerror(ev.exs_evt_errno);
    if (ev.exs_evt_type == EXS_EVT_ACCEPT) {
      EXPECT_EQ(ev.exs_evt_context, &actx);
      p.server = EXS_EVT_NEW_SOCKET(ev);
    } else {
      EXPECT_EQ(ev.exs_evt_type, EXS_EVT_CONNECT);
      EXPECT_EQ(ev.exs_evt_context, &cctx);
    }
  }
  return p;
}

// Closes a connected pair and its listener, drops the events left on `q`
// and deletes it (which must succeed: nothing is outstanding any more).
inline void close_pair(const pair_t& p, int l, exs_qhandle_t q) {
  exs_close(p.client);
  exs_close(p.server);
  exs_close(l);
  const timespec none{0, 0};
  exs_event_t ev;
  while (exs_qdequeue(q, &ev, 1, &none) == 1) {}
  EXPECT_EQ(exs_qdelete(q), 0);
}

inline void fill(std::vector<char>& v, unsigned seed) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = char((i * 131 + seed * 7) % 251);
}

}  // namespace exstest
