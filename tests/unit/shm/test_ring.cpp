// SPDX-License-Identifier: MIT
// weft — the shm ring: arithmetic at the wrap points, full and empty
// boundaries, messages spanning the end of the slot array, the stamp
// invariant, and a producer and a consumer on two threads (run under TSan).
#include "prov/shm/ring.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

namespace weft::shm {
namespace {

constexpr uint64_t u32_wrap = uint64_t{1} << 32;
constexpr uint64_t u64_max = std::numeric_limits<uint64_t>::max();

// Ring memory in private heap memory, laid out as in a region's ring block.
struct test_ring {
  struct free_deleter {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<void, free_deleter> mem;
  ring_memory m;

  explicit test_ring(uint32_t nslots, uint64_t start = 0) {
    size_t bytes = sizeof(proto::ring_block_ctrl) + nslots * proto::slot_bytes;
    mem.reset(std::aligned_alloc(proto::cache_line, bytes));
    std::memset(mem.get(), 0, bytes);
    auto* ctrl = static_cast<proto::ring_block_ctrl*>(mem.get());
    m = {&ctrl->prod, &ctrl->cons, reinterpret_cast<std::byte*>(ctrl + 1), nslots};
    ring_init(m, start);
  }
  uint64_t shared_head() const { return m.cons->head; }
  uint64_t shared_tail() const { return m.prod->tail; }
};

// Payload byte i of message `seq`.
unsigned char pattern(uint64_t seq, size_t i) {
  return static_cast<unsigned char>((seq * 131 + i * 7 + (i >> 8)) & 0xff);
}

std::vector<unsigned char> make_payload(uint64_t seq, size_t size) {
  std::vector<unsigned char> v(size);
  for (size_t i = 0; i < size; ++i) v[i] = pattern(seq, i);
  return v;
}

// ---- table-driven cases ---------------------------------------------------------

// One step of a case: send a message of `size` bytes expecting `result`, or
// receive one expecting its size and how it is split by the end of the ring.
struct step {
  char what;  // 'S' send, 'R' receive, 'E' expect empty
  size_t size = 0;
  errc result = errc::ok;
  size_t first_len = SIZE_MAX;  // for 'R': SIZE_MAX = do not check
};

struct ring_case {
  const char* name;
  uint32_t nslots;
  uint64_t start;
  std::vector<step> steps;
};

step S(size_t size, errc r = errc::ok) { return {'S', size, r}; }
step R(size_t size, size_t first = SIZE_MAX) { return {'R', size, errc::ok, first}; }
step E() { return {'E'}; }

// 8 slots = 512 bytes of ring; max payload 480.
const ring_case cases[] = {
    {"one_slot_messages_across_2pow32", 8, u32_wrap - 3,
     {S(8), R(8), S(32), R(32), S(0), R(0), S(1), R(1), S(16), R(16), E()}},
    {"multi_slot_message_across_2pow64", 8, u64_max,  // positions 2^64-1, 0, 1
     {S(100), R(100, 32), E(), S(33), R(33), E()}},
    {"tail_wrapped_head_not", 8, u64_max - 1,  // producer wraps past 2^64 while head lags
     {S(32), S(32), S(32), S(32), S(200), S(0, errc::again), R(32), R(32), R(32), R(32),
      R(200), E()}},
    {"full_with_one_slot_messages", 8, 0,
     {S(1), S(2), S(3), S(4), S(5), S(6), S(7), S(8), S(9, errc::again), R(1), S(9),
      S(10, errc::again), R(2), R(3), R(4), R(5), R(6), R(7), R(8), R(9), E()}},
    {"full_with_multi_slot_messages", 8, 5,
     {S(4 * 64 - 32), S(3 * 64 - 32), S(64, errc::again), S(32), S(0, errc::again),
      R(4 * 64 - 32), R(3 * 64 - 32), R(32), E()}},
    {"largest_message", 8, 3,
     {S(480), S(0, errc::again), R(480, 512 - (3 * 64 + 32)), S(481, errc::msgsize), E(), S(0),
      S(480, errc::again), R(0), S(480), R(480)}},
    {"spans_the_end_of_the_ring", 8, 6,  // slots 6, 7, 0: 96 bytes before the end, 54 after
     {S(150), R(150, 96), E()}},
    {"payload_ends_exactly_at_the_end", 8, 7, {S(32), R(32, 32), E()}},
    {"one_byte_past_the_end", 8, 7, {S(33), R(33, 32), E()}},
    {"starts_in_the_last_slot_at_2pow64", 16, u64_max, {S(990), R(990, 32), E()}},
    // Every small size, each copy width of copy_small (0, 1-3, 4-7, 8-16, more).
    {"every_small_size", 8, 0,
     {S(0), R(0), S(1), R(1), S(2), R(2), S(3), R(3), S(4), R(4), S(5), R(5), S(6), R(6),
      S(7), R(7), S(8), R(8), S(9), R(9), S(12), R(12), S(15), R(15), S(16), R(16), S(17), R(17),
      S(31), R(31), E()}},
    {"full_ring_at_2pow32", 16, u32_wrap - 5,
     {S(16 * 64 - 32), S(0, errc::again), R(16 * 64 - 32), S(7 * 64 - 32), S(9 * 64 - 32),
      S(0, errc::again), R(7 * 64 - 32), R(9 * 64 - 32), E()}},
};

class shm_ring_wrap : public testing::TestWithParam<ring_case> {};

TEST_P(shm_ring_wrap, behaves_at_the_boundaries) {
  const ring_case& c = GetParam();
  test_ring t(c.nslots, c.start);
  ring_producer p(t.m);
  ring_consumer q(t.m);
  uint64_t sent = 0, received = 0;
  uint64_t tail = c.start, head = c.start;
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const step& s = c.steps[i];
    SCOPED_TRACE(testing::Message() << c.name << " step " << i << " '" << s.what << "' size "
                                    << s.size);
    if (s.what == 'S') {
      auto data = make_payload(sent, s.size);
      msg_fields f{7, 3, sent, ~sent};
      ASSERT_EQ(p.try_send(f, data.data(), data.size()), s.result);
      if (s.result == errc::ok) {
        ++sent;
        tail += proto::slots_for(s.size);
      }
      EXPECT_EQ(p.position(), tail);
      EXPECT_EQ(t.shared_tail(), tail);
    } else if (s.what == 'R') {
      msg_view v;
      ASSERT_EQ(q.peek(v), errc::ok);
      EXPECT_EQ(v.position, head);
      ASSERT_EQ(v.size, s.size);
      EXPECT_EQ(v.first_len + v.second_len, s.size);
      if (s.first_len != SIZE_MAX) {
        EXPECT_EQ(v.first_len, s.first_len);
      }
      EXPECT_EQ(v.fields.op, 7);
      EXPECT_EQ(v.fields.flags, 3);
      EXPECT_EQ(v.fields.tag, received);
      EXPECT_EQ(v.fields.data, ~received);
      std::vector<unsigned char> out(v.size);
      EXPECT_EQ(v.copy_to(out.data(), out.size()), v.size);
      EXPECT_EQ(out, make_payload(received, s.size));
      // Peeking again gives the same message until it is released.
      msg_view again;
      ASSERT_EQ(q.peek(again), errc::ok);
      EXPECT_EQ(again.position, v.position);
      q.release(v);
      ++received;
      head += proto::slots_for(s.size);
      EXPECT_EQ(q.position(), head);
      EXPECT_EQ(t.shared_head(), head);
    } else {
      msg_view v;
      EXPECT_TRUE(q.empty());
      EXPECT_EQ(q.peek(v), errc::again);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(table, shm_ring_wrap, testing::ValuesIn(cases),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- single cases ------------------------------------------------------------------

TEST(shm_ring, slots_for_counts_the_header) {
  EXPECT_EQ(proto::slots_for(0), 1u);
  EXPECT_EQ(proto::slots_for(32), 1u);
  EXPECT_EQ(proto::slots_for(33), 2u);
  EXPECT_EQ(proto::slots_for(96), 2u);
  EXPECT_EQ(proto::slots_for(97), 3u);
  EXPECT_EQ(proto::slots_for(4064), 64u);
}

// A continuation slot's first word is payload; after release the consumer
// must not take stale payload that happens to equal a future position for a
// published message. Without the release-time neutralisation this test
// reads a phantom message at position 10.
TEST(shm_ring, stale_payload_never_looks_like_a_stamp) {
  test_ring t(8);
  ring_producer p(t.m);
  ring_consumer q(t.m);
  ASSERT_EQ(p.try_send({}, "x", 1), errc::ok);  // position 0
  // Position 1, 7 slots (1..7): the word at payload offset 32 + 64 * j is the
  // first word of slot 2 + j; fill each with the position that slot will
  // hold in the next lap.
  std::vector<unsigned char> evil(7 * 64 - 32);
  for (uint64_t j = 0; j < 6; ++j) {
    uint64_t next_lap = 2 + j + 8;
    std::memcpy(evil.data() + 32 + 64 * j, &next_lap, 8);
  }
  ASSERT_EQ(p.try_send({}, evil.data(), evil.size()), errc::ok);
  msg_view v;
  ASSERT_EQ(q.peek(v), errc::ok);
  q.release(v);
  ASSERT_EQ(q.peek(v), errc::ok);
  ASSERT_EQ(v.size, evil.size());
  q.release(v);
  // Two one-slot messages at 8 and 9; then the consumer looks at slot 2 for
  // position 10, which holds stale payload "10" unless neutralised.
  ASSERT_EQ(p.try_send({}, "a", 1), errc::ok);
  ASSERT_EQ(p.try_send({}, "b", 1), errc::ok);
  ASSERT_EQ(q.peek(v), errc::ok);
  q.release(v);
  ASSERT_EQ(q.peek(v), errc::ok);
  q.release(v);
  EXPECT_EQ(q.position(), 10u);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.peek(v), errc::again);
}

TEST(shm_ring, gather_send_and_partial_copies) {
  test_ring t(16, u32_wrap - 2);
  ring_producer p(t.m);
  ring_consumer q(t.m);
  auto data = make_payload(1, 700);
  iovec iov[] = {{data.data(), 10}, {nullptr, 0}, {data.data() + 10, 500}, {data.data() + 510, 190}};
  ASSERT_EQ(p.try_sendv({1, 0, 0, 0}, iov, 4), errc::ok);
  msg_view v;
  ASSERT_EQ(q.peek(v), errc::ok);
  ASSERT_EQ(v.size, 700u);
  std::vector<unsigned char> out(700);
  // Copy in uneven pieces across the end-of-ring split.
  size_t off = 0;
  for (size_t piece : {1u, 63u, 200u, 5u, 431u}) {
    EXPECT_EQ(v.copy_to(out.data() + off, piece, off), piece);
    off += piece;
  }
  EXPECT_EQ(v.copy_to(out.data(), 100, 700), 0u);
  EXPECT_EQ(v.copy_to(out.data() + 690, 100, 690), 10u);  // clamped to the size
  EXPECT_EQ(out, data);
  q.release(v);
}

TEST(shm_ring, reservation_then_publish) {
  test_ring t(8);
  ring_producer p(t.m);
  ring_consumer q(t.m);
  ring_reservation r;
  ASSERT_EQ(p.reserve(100, r), errc::ok);
  msg_view v;
  EXPECT_EQ(q.peek(v), errc::again);  // reserved is not published
  auto data = make_payload(9, 100);
  r.write(0, data.data(), 60);
  r.write(60, data.data() + 60, 40);
  p.publish(r, {2, 0, 0, 0});
  ASSERT_EQ(q.peek(v), errc::ok);
  std::vector<unsigned char> out(100);
  v.copy_to(out.data(), out.size());
  EXPECT_EQ(out, data);
}

TEST(shm_ring, corrupt_indices_are_reported_not_trusted) {
  test_ring t(8);
  ring_producer p(t.m);
  for (int i = 0; i < 8; ++i) ASSERT_EQ(p.try_send({}, nullptr, 0), errc::ok);
  t.m.cons->head = 1000;  // impossible: ahead of the producer
  EXPECT_EQ(p.try_send({}, nullptr, 0), errc::io);

  test_ring u(8);
  ring_producer pu(u.m);
  ring_consumer qu(u.m);
  ASSERT_EQ(pu.try_send({}, "x", 1), errc::ok);
  // A size larger than the ring can hold in the published header.
  uint32_t huge = 100000;
  std::memcpy(u.m.slots + 8, &huge, sizeof huge);
  msg_view v;
  EXPECT_EQ(qu.peek(v), errc::io);
}

// ---- two threads ---------------------------------------------------------------------

#if defined(__SANITIZE_THREAD__)
constexpr uint64_t thread_messages = 200'000;
#else
constexpr uint64_t thread_messages = 1'000'000;
#endif

// Spinning on a 2-core machine shared with other work: yield now and then,
// so that the other side gets a core.
void backoff(unsigned& spins) {
  if (++spins % 256 == 0) std::this_thread::yield();
  else cpu_relax();
}

uint64_t checksum(const unsigned char* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

TEST(shm_ring, producer_and_consumer_threads_pass_a_million_messages) {
  test_ring t(64, u32_wrap - 1000);
  std::thread producer([&] {
    ring_producer p(t.m);
    std::vector<unsigned char> buf(600);
    uint64_t x = 12345;
    for (uint64_t seq = 0; seq < thread_messages; ++seq) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      size_t size = (x >> 33) % 8 == 0 ? (x >> 40) % 600 : (x >> 40) % 40;
      for (size_t i = 0; i < size; ++i) buf[i] = pattern(seq, i);
      msg_fields f{1, 0, seq, checksum(buf.data(), size)};
      errc e;
      unsigned spins = 0;
      while ((e = p.try_send(f, buf.data(), size)) == errc::again) backoff(spins);
      ASSERT_EQ(e, errc::ok);
    }
  });
  ring_consumer q(t.m);
  std::vector<unsigned char> out(600);
  uint64_t bad = 0;
  unsigned spins = 0;
  for (uint64_t seq = 0; seq < thread_messages;) {
    msg_view v;
    errc e = q.peek(v);
    if (e == errc::again) {
      backoff(spins);
      continue;
    }
    ASSERT_EQ(e, errc::ok);
    size_t n = v.copy_to(out.data(), out.size());
    if (v.fields.tag != seq || v.fields.data != checksum(out.data(), n)) ++bad;
    q.release(v);
    ++seq;
  }
  producer.join();
  EXPECT_EQ(bad, 0u);
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace weft::shm
