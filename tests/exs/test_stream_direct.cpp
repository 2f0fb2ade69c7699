// SPDX-License-Identifier: MIT
// libexs tests: SOCK_STREAM receives posted in place of the ring (exs/xfer.cpp,
// refill). A receive that waits for bytes once the ring is drained is posted
// to the provider itself and granted to the sender by its size; the bytes
// must keep their order through every switch between the ring and the
// application's buffers.
#include "helpers.hpp"

#include <algorithm>
#include <deque>
#include <random>
#include <vector>

using namespace exstest;

namespace {

// A listener whose accepted sockets get a receive ring of `bufs` x `chunk`.
int ring_listener(int bufs, int chunk) {
  int l = exs_socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(l, 0);
  EXPECT_EQ(exs_setsockopt(l, EXS_SOL_EXS, EXS_SO_STREAM_BUFS, &bufs, sizeof bufs), 0);
  EXPECT_EQ(exs_setsockopt(l, EXS_SOL_EXS, EXS_SO_STREAM_CHUNK, &chunk, sizeof chunk), 0);
  sockaddr_in a = loopback();
  EXPECT_EQ(exs_bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(exs_listen(l, 4), 0);
  return l;
}

struct slot {
  std::vector<char> buf;
  exs_mhandle_t mh = 0;
  int iovs = 1;
};

// Sends `out` from `client` in pieces of random sizes while `server` takes
// it with receives of random sizes, `depth` (random up to max_depth) of them
// in flight, some vectored over more iovecs than a provider takes at once
// (those always wait for the ring's bytes), and now and then none at all
// (the sender fills the ring). Returns the largest receive completion.
void free_all(std::vector<slot*>& v) {
  for (slot* s : v) {
    exs_mderegister(&s->mh);
    delete s;
  }
}

struct shape {
  size_t max_send, min_recv, max_recv;
  int min_depth, max_depth;
};

// The slots are the caller's to free once the connection is closed.
size_t exchange(int client, int server, exs_qhandle_t q, const std::vector<char>& out,
                unsigned seed, const shape& sh, std::vector<slot*>& slots) {
  std::mt19937 rng(seed);
  auto pick = [&](size_t lo, size_t hi) { return std::uniform_int_distribution<size_t>(lo, hi)(rng); };
  exs_mhandle_t mo = exs_mregister(const_cast<char*>(out.data()), out.size(), EXS_ACCESS_READ);
  size_t sent_posted = 0, sent_done = 0, got = 0, largest = 0;
  std::deque<slot*> posted;  // receives in the order posted
  int sends_out = 0;
  while (got < out.size() || sends_out) {
    while (sent_posted < out.size() && sends_out < 8) {
      size_t n = std::min(pick(1, sh.max_send), out.size() - sent_posted);
      EXPECT_EQ(exs_send(client, out.data() + sent_posted, n, 0, mo, q, nullptr), 0);
      sent_posted += n;
      ++sends_out;
    }
    int depth = int(pick(size_t(sh.min_depth), size_t(sh.max_depth)));
    if (depth == 0 && posted.empty() && got < out.size()) depth = 1;  // after a pause
    while (int(posted.size()) < depth && got < out.size()) {
      auto* s = new slot;
      slots.push_back(s);
      s->buf.assign(pick(sh.min_recv, sh.max_recv), 0);
      s->iovs = pick(0, 5) == 0 ? int(std::min<size_t>(s->buf.size(), 8)) : 1;
      s->mh = exs_mregister(s->buf.data(), s->buf.size(), EXS_ACCESS_WRITE);
      iovec iv[8];
      exs_mhandle_t hs[8];
      size_t at = 0;
      for (int i = 0; i < s->iovs; ++i) {
        size_t len = i + 1 == s->iovs ? s->buf.size() - at : 1;
        iv[i] = {s->buf.data() + at, len};
        hs[i] = s->mh;
        at += len;
      }
      EXPECT_EQ(exs_recvv(server, iv, s->iovs, 0, hs, q, s), 0);
      posted.push_back(s);
    }
    exs_event_t ev = next_event(q);
    if (ev.exs_evt_type == EXS_EVT_NONE) break;
    EXPECT_EQ(ev.exs_evt_errno, 0) << strerror(ev.exs_evt_errno);
    if (ev.exs_evt_type == EXS_EVT_SEND) {
      sent_done += size_t(ev.exs_evt_bytes);
      --sends_out;
      continue;
    }
    EXPECT_EQ(ev.exs_evt_type, EXS_EVT_RECV);
    if (posted.empty() || ev.exs_evt_context != posted.front()) {
      ADD_FAILURE() << "a receive completed out of the order it was posted in";
      break;
    }
    slot* s = posted.front();
    posted.pop_front();
    size_t n = size_t(ev.exs_evt_bytes);
    EXPECT_GT(n, 0u);
    EXPECT_LE(n, s->buf.size());
    if (!std::equal(s->buf.begin(), s->buf.begin() + ptrdiff_t(n), out.begin() + ptrdiff_t(got))) {
      ADD_FAILURE() << "bytes " << got << " to " << got + n << " differ from those sent";
      break;
    }
    got += n;
    largest = std::max(largest, n);
  }
  EXPECT_EQ(got, out.size());
  EXPECT_EQ(sent_done, out.size());
  exs_mderegister(&mo);
  return largest;
}

}  // namespace

// With one 64-byte ring buffer, bytes that go through the ring reach a
// receive at most 64 at a time. Receives that wait once the ring is
// drained are posted themselves and take whole pieces of their size.
TEST(exs_stream, a_receive_waiting_for_bytes_is_filled_in_place) {
  int l = ring_listener(1, 64);
  exs_qhandle_t q = exs_qcreate(256);
  pair_t p = connect_pair(l, SOCK_STREAM, q);
  std::vector<char> out(1 << 20);
  fill(out, 11);
  std::vector<slot*> slots;
  size_t largest = exchange(p.client, p.server, q, out, 5, {256 << 10, 16 << 10, 16 << 10, 4, 4},
                            slots);
  EXPECT_EQ(largest, size_t(16 << 10)) << "no receive was filled in place";
  close_pair(p, l, q);
  free_all(slots);
}

// Random sends and receives over a small ring (switching between the ring
// and the application's buffers all the time) and over the default one:
// every byte arrives once, in order, and receives complete in the order
// they were posted.
TEST(exs_stream, bytes_keep_their_order_between_the_ring_and_receives_in_place) {
  struct cfg {
    int bufs, chunk;
    shape sh;
  } cfgs[] = {{4, 4096, {20000, 1, 30000, 0, 6}},
              {2, 64, {3000, 1, 500, 0, 3}},
              {16, 65536, {300000, 1, 200000, 0, 8}}};
  unsigned seed = 1;
  for (const cfg& c : cfgs) {
    SCOPED_TRACE("ring " + std::to_string(c.bufs) + " x " + std::to_string(c.chunk));
    int l = ring_listener(c.bufs, c.chunk);
    exs_qhandle_t q = exs_qcreate(256);
    pair_t p = connect_pair(l, SOCK_STREAM, q);
    std::vector<char> out(3 << 20);
    fill(out, seed);
    std::vector<slot*> slots;
    exchange(p.client, p.server, q, out, seed++, c.sh, slots);
    close_pair(p, l, q);
    free_all(slots);
  }
}

// A receive the provider holds was granted to the sender by its size: it
// cannot be taken back (the piece meant for it would land in the next).
TEST(exs_stream, a_receive_posted_in_place_is_not_cancelled) {
  int l = ring_listener(1, 64);
  exs_qhandle_t q = exs_qcreate(64);
  pair_t p = connect_pair(l, SOCK_STREAM, q);
  char out[64] = {}, in[2][4096] = {};
  exs_mhandle_t mo = exs_mregister(out, sizeof out, EXS_ACCESS_READ);
  exs_mhandle_t mi = exs_mregister(in, sizeof in, EXS_ACCESS_WRITE);
  // Two receives wait; 64 bytes fill the one ring buffer and the first
  // takes them. The ring buffer stays down while the second waits, so it
  // goes to the provider, granted by its size.
  int ctx[2];
  ASSERT_EQ(exs_recv(p.server, in[0], sizeof in[0], 0, mi, q, &ctx[0]), 0);
  ASSERT_EQ(exs_recv(p.server, in[1], sizeof in[1], 0, mi, q, &ctx[1]), 0);
  ASSERT_EQ(exs_send(p.client, out, sizeof out, 0, mo, q, nullptr), 0);
  int recvs = 0;
  while (recvs < 1) {
    exs_event_t ev = next_event(q);
    ASSERT_NE(ev.exs_evt_type, EXS_EVT_NONE);
    if (ev.exs_evt_type != EXS_EVT_RECV) continue;
    EXPECT_EQ(ev.exs_evt_context, &ctx[0]);
    EXPECT_EQ(ev.exs_evt_bytes, 64);
    ++recvs;
  }
  EXPECT_EQ(exs_cancel(p.server, &ctx[1]), -1);
  EXPECT_EQ(errno, EALREADY);
  // It is still served, with up to its own size at once.
  char more[1000];
  std::fill_n(more, sizeof more, 'x');
  exs_mhandle_t mm = exs_mregister(more, sizeof more, EXS_ACCESS_READ);
  ASSERT_EQ(exs_send(p.client, more, sizeof more, 0, mm, q, nullptr), 0);
  for (;;) {
    exs_event_t ev = next_event(q);
    ASSERT_NE(ev.exs_evt_type, EXS_EVT_NONE);
    if (ev.exs_evt_type != EXS_EVT_RECV) continue;
    EXPECT_EQ(ev.exs_evt_context, &ctx[1]);
    EXPECT_EQ(ev.exs_evt_bytes, 1000);
    break;
  }
  close_pair(p, l, q);
  exs_mderegister(&mm);
  exs_mderegister(&mi);
  exs_mderegister(&mo);
}
