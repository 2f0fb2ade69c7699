// SPDX-License-Identifier: MIT
// weft — reliable datagrams (rd_proto.hpp, rd_link.hpp): two endpoints
// exchange messages over a simulated network that loses, duplicates and
// reorders datagrams, in simulated time; every message must arrive once, in
// order, byte for byte, and every send must be acknowledged.
#include "util/rd_link.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <random>
#include <vector>

namespace weft::util::rd {
namespace {

using bytes = std::vector<std::byte>;

struct network {
  std::mt19937 rng{12345};
  double loss = 0, dup = 0, reorder = 0;
  struct packet {
    int to;
    bytes data;
  };
  std::deque<packet> q;
  size_t sent = 0;
  bool chance(double p) { return std::uniform_real_distribution<>(0, 1)(rng) < p; }
  void send(int to, bytes d) {
    ++sent;
    if (chance(loss)) return;
    q.push_back({to, d});
    if (chance(dup)) q.push_back({to, d});
    if (q.size() > 1 && chance(reorder)) {
      size_t j = std::uniform_int_distribution<size_t>(0, q.size() - 2)(rng);
      std::swap(q.back(), q[j]);
    }
  }
};

// One endpoint: a link to the other, a queue of messages to send (segmented
// into datagrams of at most `seg` payload bytes), the messages received.
struct node {
  int id;
  uint32_t epoch;
  config cfg;  // the link's (it keeps a pointer)
  link l;
  size_t seg = 1000;
  std::vector<bytes> outbox;  // messages, in order
  size_t next_msg = 0;        // the next message to start sending
  uint64_t next_off = 0;      // within outbox[next_msg]
  size_t acked_msgs = 0;      // messages whose last datagram was acknowledged
  std::vector<bytes> inbox;   // complete messages received, in order
  bytes partial;
  uint64_t partial_len = 0;
  bool receiving = false;
  size_t max_in_flight = 0;
  bool alive = true;
  bool full = false;  // no room: every deliverable datagram is refused
  size_t renewals = 0;

  // Each node is an endpoint of its own (instance: its first epoch) unless
  // the test says otherwise.
  node(int i, uint32_t e, const config& c, uint32_t instance = 0) : id(i), epoch(e), cfg(c) {
    cfg.instance = instance ? instance : e;
    l.configure(cfg);
    l.start(e);
  }

  bytes datagram(const flight& f, uint32_t seq, bool resend) {
    const bytes& m = outbox[reinterpret_cast<uintptr_t>(f.msg)];
    dgram h{};
    if (resend)
      l.stamp_resend(h, f, seq);
    else
      l.stamp_data(h, f.flags, f.bytes);
    bytes d(sizeof h);
    std::memcpy(d.data(), &h, sizeof h);
    if (f.flags & flag_first) {
      msg mh{};
      mh.op = 7;
      mh.len = m.size();
      mh.tag = reinterpret_cast<uintptr_t>(f.msg);
      d.resize(d.size() + sizeof mh);
      std::memcpy(d.data() + sizeof h, &mh, sizeof mh);
    }
    const size_t at = d.size();
    d.resize(at + f.bytes);
    if (f.bytes) std::memcpy(d.data() + at, m.data() + f.offset, f.bytes);
    return d;
  }

  void pump(network& net, int peer, uint64_t now) {
    if (!alive) return;
    while (next_msg < outbox.size() && l.window_open()) {
      const bytes& m = outbox[next_msg];
      flight f{};
      f.msg = reinterpret_cast<void*>(uintptr_t(next_msg));
      f.offset = next_off;
      f.bytes = uint32_t(std::min<uint64_t>(seg, m.size() - next_off));
      f.flags = (next_off == 0 ? flag_first : 0) |
                (next_off + f.bytes == m.size() ? flag_last : 0);
      ASSERT_TRUE(l.reserve());
      net.send(peer, datagram(f, 0, false));
      l.ack_sent();
      l.sent(f, now);
      next_off += f.bytes;
      if (next_off == m.size()) ++next_msg, next_off = 0;
      max_in_flight = std::max<size_t>(max_in_flight, l.in_flight_count());
    }
  }

  void on(network& net, int peer, const bytes& d, uint64_t now) {
    if (!alive) return;
    view v{};
    ASSERT_EQ(parse(d.data(), d.size(), v), malformed::none);
    auto acked = [&](const flight& f) {
      if (f.flags & flag_last) ++acked_msgs;
    };
    verdict r = l.receive(v, now, acked);
    if (r == verdict::renewed) {
      // The provider's part: what was not acknowledged goes again from its
      // start (messages are acknowledged in order).
      ++renewals;
      l.renew();
      next_msg = acked_msgs, next_off = 0;
      r = l.receive(v, now, acked);
      ASSERT_NE(r, verdict::renewed);
      ASSERT_NE(r, verdict::restart);
    }
    if (r == verdict::deliver && full) {
      l.refuse();
    } else if (r == verdict::deliver) {
      if (v.h.flags & flag_first) {
        ASSERT_FALSE(receiving) << "a message began inside another";
        receiving = true;
        partial.clear();
        partial_len = v.m.len;
      }
      ASSERT_TRUE(receiving) << "a datagram outside any message was delivered";
      partial.insert(partial.end(), v.payload, v.payload + v.h.bytes);
      if (v.h.flags & flag_last) {
        ASSERT_EQ(partial.size(), partial_len);
        inbox.push_back(partial);
        receiving = false;
      }
      l.consumed();
    }
    if (l.ack_due()) ack(net, peer);
  }

  void ack(network& net, int peer) {
    dgram h{};
    l.stamp_ack(h);
    bytes d(sizeof h);
    std::memcpy(d.data(), &h, sizeof h);
    net.send(peer, d);
    l.ack_sent();
  }

  tick_result tick(network& net, int peer, uint64_t now) {
    if (!alive) return tick_result::idle;
    return l.tick(now, [&](const flight& f, uint32_t seq) {
      net.send(peer, datagram(f, seq, true));
      l.ack_sent();
      return true;
    });
  }
};

bytes pattern(size_t n, unsigned seed) {
  bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = std::byte((i * 131 + seed * 7) & 0xff);
  return b;
}

// Runs both nodes until every message is delivered and acknowledged, or the
// step budget runs out. Each step is 50 simulated microseconds; the network
// delivers up to `per_step` datagrams per step.
void run(network& net, node& a, node& b, uint64_t& now, size_t steps = 200000,
         size_t per_step = 64) {
  node* n[2] = {&a, &b};
  for (size_t s = 0; s < steps; ++s) {
    now += 50'000;
    a.pump(net, b.id, now);
    b.pump(net, a.id, now);
    for (size_t k = 0; k < per_step && !net.q.empty(); ++k) {
      auto p = std::move(net.q.front());
      net.q.pop_front();
      node* to = n[p.to];
      to->on(net, 1 - p.to, p.data, now);
      to->pump(net, 1 - p.to, now);
    }
    a.tick(net, b.id, now);
    b.tick(net, a.id, now);
    if (a.acked_msgs == a.outbox.size() && b.acked_msgs == b.outbox.size() &&
        b.inbox.size() == a.outbox.size() && a.inbox.size() == b.outbox.size())
      return;
  }
}

config fast() {
  config c;
  c.window = 32;
  c.rto_init_us = 1000;
  c.rto_min_us = 200;
  c.rto_max_us = 50000;
  c.peer_timeout_ns = 2'000'000'000;
  return c;
}

void exchange(double loss, double dup, double reorder) {
  network net;
  net.loss = loss, net.dup = dup, net.reorder = reorder;
  node a(0, 0x1111, fast()), b(1, 0x2222, fast());
  for (unsigned i = 0; i < 120; ++i) a.outbox.push_back(pattern((i * 977) % 20000, i));
  for (unsigned i = 0; i < 40; ++i) b.outbox.push_back(pattern((i * 3001) % 9000, 100 + i));
  uint64_t now = 0;
  run(net, a, b, now);
  ASSERT_EQ(b.inbox.size(), a.outbox.size());
  ASSERT_EQ(a.inbox.size(), b.outbox.size());
  for (size_t i = 0; i < a.outbox.size(); ++i) ASSERT_EQ(b.inbox[i], a.outbox[i]) << "message " << i;
  for (size_t i = 0; i < b.outbox.size(); ++i) ASSERT_EQ(a.inbox[i], b.outbox[i]) << "message " << i;
  EXPECT_EQ(a.acked_msgs, a.outbox.size());
  EXPECT_EQ(b.acked_msgs, b.outbox.size());
  EXPECT_FALSE(a.l.in_flight());
  EXPECT_LE(a.max_in_flight, 32u);
}

TEST(rd_link, messages_arrive_once_in_order_on_a_clean_network) { exchange(0, 0, 0); }
TEST(rd_link, messages_arrive_once_in_order_through_loss_duplication_and_reordering) {
  exchange(0.05, 0.01, 0.10);
}
TEST(rd_link, messages_arrive_through_heavy_loss) { exchange(0.30, 0.05, 0.20); }

TEST(rd_link, a_sender_never_has_more_in_flight_than_the_receiver_takes) {
  network net;
  config small = fast();
  small.window = 16;
  node a(0, 1, fast()), b(1, 2, small);
  for (unsigned i = 0; i < 20; ++i) a.outbox.push_back(pattern(30000, i));
  uint64_t now = 0;
  run(net, a, b, now);
  ASSERT_EQ(b.inbox.size(), a.outbox.size());
  EXPECT_LE(a.max_in_flight, 16u);
  EXPECT_EQ(a.l.peer_window(), 16u);
}

TEST(rd_link, the_retransmission_timeout_follows_the_round_trip) {
  network net;
  node a(0, 1, fast()), b(1, 2, fast());
  for (unsigned i = 0; i < 50; ++i) a.outbox.push_back(pattern(10, i));
  uint64_t now = 0;
  run(net, a, b, now);
  ASSERT_EQ(b.inbox.size(), 50u);
  // One 50 us step each way at most: the mean round trip is about 100 us,
  // and the timeout sits at its floor, far below the initial 1 ms.
  EXPECT_GT(a.l.srtt_us(), 0u);
  EXPECT_LE(a.l.srtt_us(), 200u);
  EXPECT_LT(a.l.rto_us(), 1000u);
}

TEST(rd_link, a_silent_peer_is_declared_dead_within_the_timeout) {
  network net;
  node a(0, 1, fast()), b(1, 2, fast());
  b.alive = false;
  a.outbox.push_back(pattern(5000, 1));
  uint64_t now = 0;
  a.pump(net, 1, now);
  ASSERT_TRUE(a.l.in_flight());
  tick_result r = tick_result::ok;
  uint64_t start = now;
  while (r != tick_result::dead && now - start < 10'000'000'000) {
    now += 1'000'000;
    r = a.tick(net, 1, now);
  }
  EXPECT_EQ(r, tick_result::dead);
  EXPECT_LE(now - start, fast().peer_timeout_ns + 1'000'000);
  size_t failed = 0;
  a.l.for_each_in_flight([&](const flight&, uint32_t) { ++failed; });
  EXPECT_EQ(failed, 5u);
  a.l.reset(7);
  EXPECT_FALSE(a.l.in_flight());
}

// A receiver with no room answers "hold on" (window 0): its sender sends
// nothing new, probes with one datagram at a time, and does not take the
// peer for dead however long it lasts. When the receiver reopens, the
// sender resends at once and everything arrives.
TEST(rd_link, a_receiver_without_room_holds_its_sender_without_killing_it) {
  network net;
  config c = fast();  // peer timeout 2 s, RTO at most 50 ms
  node a(0, 1, c), b(1, 2, c);
  b.full = true;
  // All of it in flight at once (16 datagrams, a window of 32): nothing new
  // to send that would make the receiver answer by itself.
  constexpr unsigned m = 2;
  for (unsigned i = 0; i < m; ++i) a.outbox.push_back(pattern(8000, i));
  uint64_t now = 0;
  node* n[2] = {&a, &b};
  auto step = [&] {
    now += 50'000;
    a.pump(net, 1, now);
    while (!net.q.empty()) {
      auto p = std::move(net.q.front());
      net.q.pop_front();
      n[p.to]->on(net, 1 - p.to, p.data, now);
    }
    return a.tick(net, 1, now);
  };
  // Three peer timeouts without room.
  for (uint64_t t = 0; t < 3 * c.peer_timeout_ns; t += 50'000)
    ASSERT_NE(step(), tick_result::dead) << "at " << now / 1'000'000 << " ms";
  EXPECT_TRUE(a.l.peer_held());
  EXPECT_FALSE(a.l.window_open());
  EXPECT_TRUE(b.inbox.empty());
  // One window at first, then single probes: far fewer than resending the
  // whole window at every timeout (go-back-N) would send.
  const size_t held_sent = net.sent;
  EXPECT_LT(held_sent, 2 * 16u + 3 * 2000 / 50 * 2 + 20) << "probes while held";
  // Room comes just after a probe (the next one is a timeout away): the
  // receiver says so, and the sender does not wait for that timeout.
  for (size_t before = net.sent; net.sent == before;) {
    before = net.sent;
    ASSERT_NE(step(), tick_result::dead);
  }
  ASSERT_NE(step(), tick_result::dead);  // the probe refused, its answer heard
  ASSERT_TRUE(net.q.empty());
  b.full = false;
  b.l.reopen();
  ASSERT_TRUE(b.l.ack_due());
  b.ack(net, 0);
  uint64_t reopened = now;
  while (b.inbox.size() < m && now - reopened < 1'000'000'000) ASSERT_NE(step(), tick_result::dead);
  ASSERT_EQ(b.inbox.size(), m);
  for (unsigned i = 0; i < m; ++i) EXPECT_EQ(b.inbox[i], a.outbox[i]);
  EXPECT_LT(now - reopened, 5'000'000u) << "resumed at a timeout, not at once";
  EXPECT_FALSE(a.l.peer_held());
}

TEST(rd_link, the_retransmission_timer_backs_off) {
  network net;
  node a(0, 1, fast()), b(1, 2, fast());
  b.alive = false;
  a.outbox.push_back(pattern(10, 1));
  uint64_t now = 0;
  a.pump(net, 1, now);
  uint32_t rto = a.l.rto_us();
  size_t sent = net.sent;
  now += uint64_t(rto) * 1000;
  a.tick(net, 1, now);
  EXPECT_EQ(net.sent, sent + 1);
  EXPECT_EQ(a.l.rto_us(), 2 * rto);
  now += uint64_t(rto) * 1000;  // not yet the doubled timeout
  a.tick(net, 1, now);
  EXPECT_EQ(net.sent, sent + 1);
}

TEST(rd_link, a_restarted_peer_is_recognised_and_its_new_stream_starts_afresh) {
  network net;
  node a(0, 1, fast()), b(1, 2, fast());
  a.outbox.push_back(pattern(100, 1));
  b.outbox.push_back(pattern(100, 2));
  uint64_t now = 0;
  run(net, a, b, now);
  ASSERT_EQ(b.inbox.size(), 1u);
  ASSERT_EQ(a.inbox.size(), 1u);

  // b restarts: a new incarnation at the same place, whose first datagram
  // a answers with `restart`; a forgets the old one and takes it afresh.
  node b2(1, 3, fast());
  b2.outbox.push_back(pattern(200, 3));
  b2.pump(net, 0, now);
  ASSERT_EQ(net.q.size(), 1u);
  view v{};
  auto d = net.q.front().data;
  net.q.pop_front();
  ASSERT_EQ(parse(d.data(), d.size(), v), malformed::none);
  auto none = [](const flight&) { FAIL() << "nothing of a's is in flight"; };
  EXPECT_EQ(a.l.receive(v, now, none), verdict::restart);
  a.l.reset(a.epoch);
  a.inbox.clear();
  a.on(net, 1, d, now);
  ASSERT_EQ(a.inbox.size(), 1u);
  EXPECT_EQ(a.inbox[0], b2.outbox[0]);
  EXPECT_EQ(a.l.peer_epoch(), 3u);
}

// An endpoint drops its idle link to b and makes a fresh one (same
// endpoint, new epoch) when it next needs it, while b, which kept its link,
// sends: b's datagrams for the dropped link are stale, the fresh link's
// answer renews b's link, and b's messages go again under new numbers.
// Through loss, duplication and reordering, each arrives once, in order,
// and so do the fresh link's own.
TEST(rd_link, a_peer_whose_idle_link_was_dropped_renews_it_and_nothing_is_lost) {
  network net;
  net.loss = 0.1, net.dup = 0.05, net.reorder = 0.2;
  node a(0, 1, fast()), b(1, 2, fast());
  a.outbox.push_back(pattern(2500, 1));
  b.outbox.push_back(pattern(2500, 2));
  uint64_t now = 0;
  run(net, a, b, now);
  ASSERT_EQ(a.inbox.size(), 1u);
  ASSERT_EQ(b.inbox.size(), 1u);
  net.q.clear();  // idle: nothing in the network
  EXPECT_TRUE(a.l.fresh());

  node a2(0, 7, fast(), a.cfg.instance);  // a's fresh link to b
  b.outbox.clear(), b.inbox.clear(), b.next_msg = 0, b.acked_msgs = 0;
  for (unsigned m = 0; m < 4; ++m) b.outbox.push_back(pattern(1500 + 700 * m, 10 + m));
  for (unsigned m = 0; m < 3; ++m) a2.outbox.push_back(pattern(900 * (m + 1), 20 + m));
  b.pump(net, 0, now);  // first, under the old numbers
  run(net, a2, b, now);
  EXPECT_EQ(b.renewals, 1u);
  EXPECT_EQ(a2.renewals, 0u);
  EXPECT_EQ(a2.inbox, b.outbox) << "each of b's messages once, in order";
  EXPECT_EQ(b.inbox, a2.outbox);
  EXPECT_EQ(b.acked_msgs, b.outbox.size());
  EXPECT_EQ(a2.acked_msgs, a2.outbox.size());
  EXPECT_EQ(b.l.peer_epoch(), 7u);
}

// A link declared dead starts again under a new epoch, not fresh: it may
// have taken data whose acknowledgement the peer never saw, so the peer
// restarts (and fails what it had in flight) rather than sending it again.
TEST(rd_link, a_link_reset_after_a_death_is_a_restart_not_a_renewal) {
  network net;
  node a(0, 1, fast()), b(1, 2, fast());
  a.outbox.push_back(pattern(100, 1));
  uint64_t now = 0;
  run(net, a, b, now);
  a.l.reset(9);
  EXPECT_FALSE(a.l.fresh());
  a.outbox.push_back(pattern(100, 2));
  a.pump(net, 1, now);
  ASSERT_EQ(net.q.size(), 1u);
  view v{};
  auto d = net.q.front().data;
  ASSERT_EQ(parse(d.data(), d.size(), v), malformed::none);
  EXPECT_FALSE(v.h.flags & flag_fresh);
  EXPECT_EQ(v.h.instance, a.cfg.instance);
  auto none = [](const flight&) {};
  EXPECT_EQ(b.l.receive(v, now, none), verdict::restart);
}

TEST(rd_link, a_datagram_for_an_earlier_incarnation_is_stale_and_tells_the_sender) {
  const config c = fast();
  link l;
  l.configure(c);
  l.start(5);
  view v{};
  v.h.magic = magic, v.h.version = version, v.h.kind = uint8_t(kind::data);
  v.h.flags = flag_first | flag_last;
  v.h.epoch = 9;
  v.h.to_epoch = 77;  // not us (we are 5)
  v.h.seq = 40;
  auto none = [](const flight&) {};
  EXPECT_EQ(l.receive(v, 0, none), verdict::stale);
  EXPECT_TRUE(l.ack_due());
  dgram h{};
  l.stamp_ack(h);
  EXPECT_EQ(h.epoch, 5u);
  EXPECT_EQ(h.to_epoch, 9u);  // the ack names the sender: it sees a new incarnation of us
  EXPECT_EQ(h.ack, 0u);
  EXPECT_EQ(l.expected(), 0u);
}

TEST(rd_link, an_acknowledgement_of_data_never_sent_changes_nothing) {
  network net;
  node a(0, 1, fast()), b(1, 2, fast());
  a.outbox.push_back(pattern(3000, 1));
  uint64_t now = 0;
  a.pump(net, 1, now);
  ASSERT_EQ(a.l.in_flight_count(), 3u);
  // b has heard a (so it can name a's incarnation).
  b.on(net, 0, net.q.front().data, now);
  view v{};
  v.h.magic = magic, v.h.version = version, v.h.kind = uint8_t(kind::ack);
  v.h.epoch = 2;
  v.h.to_epoch = 1;
  v.h.ack = 1000;
  v.h.window = 32;
  size_t acked = 0;
  auto count = [&](const flight&) { ++acked; };
  EXPECT_EQ(a.l.receive(v, now, count), verdict::invalid);
  EXPECT_EQ(acked, 0u);
  EXPECT_EQ(a.l.in_flight_count(), 3u);
  EXPECT_EQ(a.l.unacked(), 0u);
}

TEST(rd_link, a_new_peer_s_stream_must_start_at_zero) {
  const config c = fast();
  link l;
  l.configure(c);
  l.start(5);
  view v{};
  v.h.magic = magic, v.h.version = version, v.h.kind = uint8_t(kind::data);
  v.h.epoch = 9;
  v.h.seq = 12345;
  auto none = [](const flight&) {};
  EXPECT_EQ(l.receive(v, 0, none), verdict::out_of_order);
  EXPECT_EQ(l.expected(), 0u);
  EXPECT_TRUE(l.ack_due());
}

TEST(rd_link, an_idle_link_holds_no_ring) {
  network net;
  node a(0, 1, fast()), b(1, 2, fast());
  a.outbox.push_back(pattern(100, 1));
  uint64_t now = 0;
  run(net, a, b, now);
  ASSERT_FALSE(a.l.in_flight());
  a.l.trim();
  EXPECT_LE(sizeof(link), 128u);
  // Sending again after a trim grows the ring again.
  a.outbox.push_back(pattern(100, 2));
  run(net, a, b, now);
  EXPECT_EQ(b.inbox.size(), 2u);
}

// ---- the parser: every malformed datagram is refused, and says why ----

bytes good_first(uint32_t bytes_in, uint64_t len) {
  dgram h{};
  h.magic = magic, h.version = version, h.kind = uint8_t(kind::data);
  h.flags = flag_first | flag_last;
  h.epoch = 1;
  h.instance = 1;
  h.bytes = bytes_in;
  msg m{};
  m.len = len;
  bytes d(sizeof h + sizeof m + bytes_in);
  std::memcpy(d.data(), &h, sizeof h);
  std::memcpy(d.data() + sizeof h, &m, sizeof m);
  return d;
}

TEST(rd_proto, well_formed_datagrams_parse) {
  view v{};
  auto d = good_first(5, 5);
  EXPECT_EQ(parse(d.data(), d.size(), v), malformed::none);
  EXPECT_EQ(v.h.bytes, 5u);
  EXPECT_EQ(v.payload, d.data() + 64);
}

TEST(rd_proto, malformed_datagrams_are_refused_with_their_reason) {
  view v{};
  auto d = good_first(5, 5);
  EXPECT_EQ(parse(d.data(), 10, v), malformed::short_header);
  EXPECT_EQ(parse(d.data(), 40, v), malformed::bad_length);  // the msg header cut short
  EXPECT_EQ(parse(d.data(), d.size() - 1, v), malformed::bad_length);
  auto set = [&](size_t off, uint8_t val, malformed want) {
    auto c = d;
    c[off] = std::byte(val);
    EXPECT_EQ(parse(c.data(), c.size(), v), want) << "byte " << off << " = " << int(val);
  };
  set(0, 0x00, malformed::bad_magic);
  set(1, 99, malformed::bad_version);
  set(2, 9, malformed::bad_kind);
  set(3, 0x80, malformed::bad_flags);
  auto noinst = d;
  std::memset(noinst.data() + 28, 0, 4);
  EXPECT_EQ(parse(noinst.data(), noinst.size(), v), malformed::zero_instance);
  set(36, 1, malformed::reserved_set);  // msg.reserved
  set(39, 1, malformed::reserved_set);
  set(33, 3, malformed::none);  // msg.rx_index
  set(34, 1, malformed::none);  // msg.name_port
  auto z = d;
  std::memset(z.data() + 4, 0, 4);
  EXPECT_EQ(parse(z.data(), z.size(), v), malformed::zero_epoch);
  // A first-and-last datagram must hold the whole message.
  auto partial = good_first(5, 6);
  EXPECT_EQ(parse(partial.data(), partial.size(), v), malformed::bad_length);
  // More payload in one datagram than the whole message.
  auto over = good_first(5, 4);
  over[3] = std::byte(flag_first);
  EXPECT_EQ(parse(over.data(), over.size(), v), malformed::bad_length);
  // An ack with payload, or with message flags.
  dgram a{};
  a.magic = magic, a.version = version, a.kind = uint8_t(kind::ack), a.epoch = 1, a.instance = 1;
  bytes ad(sizeof a + 1);
  std::memcpy(ad.data(), &a, sizeof a);
  EXPECT_EQ(parse(ad.data(), ad.size(), v), malformed::ack_with_payload);
  EXPECT_EQ(parse(ad.data(), sizeof a, v), malformed::none);
  ad[3] = std::byte(flag_fresh);
  EXPECT_EQ(parse(ad.data(), sizeof a, v), malformed::none) << "a fresh link's acknowledgement";
  ad[3] = std::byte(flag_first);
  EXPECT_EQ(parse(ad.data(), sizeof a, v), malformed::bad_flags);
  for (int m = 0; m <= int(malformed::reserved_set); ++m)
    EXPECT_STRNE(describe(malformed(m)), "unknown");
}

TEST(rd_proto, sequence_numbers_compare_across_the_wrap) {
  EXPECT_TRUE(seq_before(0xfffffff0u, 5u));
  EXPECT_FALSE(seq_before(5u, 0xfffffff0u));
  EXPECT_FALSE(seq_before(7u, 7u));
}

}  // namespace
}  // namespace weft::util::rd
