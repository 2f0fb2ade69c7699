// SPDX-License-Identifier: MIT
// weft — unit tests of the tcp wire protocol: the frame builder and the
// incremental frame reader (prov/tcp/frame), fed whole, byte by byte and in
// random splits, with payloads placed in pieces, discarded, or received
// directly; and every malformed header the reader must refuse.
#include <gtest/gtest.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "prov/tcp/frame.hpp"

using namespace weft::tcp;
using proto::op;
using status = frame_reader::status;
using bytes = std::vector<std::byte>;

namespace {

struct sample {
  frame f;
  bytes payload;
};

bytes pattern(size_t n, unsigned seed) {
  bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = std::byte(static_cast<uint8_t>(i * 131 + seed * 7 + 1));
  return b;
}

frame base(op o, uint32_t payload_len, uint32_t id = 7, uint16_t flags = 0) {
  frame f{};
  f.op = o;
  f.flags = flags;
  f.payload_len = payload_len;
  f.msg_id = id;
  return f;
}

// The frame as the reader reports it: hdr_len and rma_len filled in.
frame decoded(frame f) {
  f.hdr_len = static_cast<uint16_t>(header_size(f.op, f.iov_count));
  if (f.op == op::cm_req && (f.features & proto::feature_local_stream))
    f.hdr_len += sizeof(proto::local_ext);  // the offer follows cm_ext
  f.rma_len = 0;
  for (unsigned i = 0; i < f.iov_count; ++i) f.rma_len += f.iov[i].len;
  return f;
}

frame with_iovs(frame f, std::initializer_list<proto::rma_iov> iovs) {
  f.iov_count = static_cast<uint8_t>(iovs.size());
  std::copy(iovs.begin(), iovs.end(), f.iov);
  return f;
}

frame atomic(op o, uint8_t dt, uint8_t aop, uint32_t count, uint32_t payload, uint16_t flags = 0) {
  frame f = base(o, payload, 99, flags);
  f.datatype = dt;
  f.atomic_op = aop;
  f.atomic_count = count;
  unsigned sz = proto::atomic_type_size(dt);
  return with_iovs(f, {{0x1000, uint64_t{count} * sz, 0xabc}});
}

// At least one valid frame of every op, with and without their options.
std::vector<sample> samples() {
  std::vector<sample> v;
  auto add = [&v](frame f) { v.push_back({f, pattern(f.payload_len, static_cast<unsigned>(v.size()))}); };
  frame f;
  f = base(op::cm_req, 0); f.minor = 0; f.features = 0; add(f);
  f = base(op::cm_req, 256); f.features = 5; add(f);
  f = base(op::cm_resp, 17); f.minor = 0; add(f);
  f = base(op::cm_resp, 0); f.status = FI_ECONNREFUSED; add(f);
  f = base(op::hello, 0); f.addr_len = 6; std::memcpy(f.addr, "\x7f\0\0\1\x30\x39", 6); add(f);
  f = base(op::hello, 0); f.addr_len = 22; for (int i = 0; i < 22; ++i) f.addr[i] = uint8_t(i + 1); add(f);
  add(base(op::shutdown, 0));
  add(base(op::msg, 0));
  add(base(op::msg, 8, 1));
  add(base(op::msg, 3000, 2, proto::flag_ack));
  f = base(op::msg_data, 8); f.cq_data = 0x1122334455667788; add(f);
  f = base(op::tagged, 8); f.tag = 0xdeadbeefcafef00d; add(f);
  f = base(op::tagged_data, 8, 0xffffffff, proto::flag_ack); f.tag = 1; f.cq_data = ~0ull; add(f);
  f = base(op::tagged_data, 0); f.tag = 42; f.cq_data = 43; add(f);
  add(with_iovs(base(op::rma_write, 64), {{0x10000, 64, 0x77}}));
  f = with_iovs(base(op::rma_write, 100, 3, proto::flag_ack | proto::flag_cq_data),
                {{0, 10, 1}, {100, 20, 2}, {1000, 30, 3}, {~0ull - 40, 40, 4}});
  f.cq_data = 12345; add(f);
  add(with_iovs(base(op::rma_write, 0), {{0x10000, 0, 0x77}}));
  add(with_iovs(base(op::rma_read_req, 0), {{0x2000, 4096, 9}, {0x4000, 4096, 9}}));
  add(base(op::rma_read_resp, 8192));
  add(atomic(op::atomic_write, FI_UINT64, FI_SUM, 4, 32, proto::flag_ack));
  f = atomic(op::atomic_write, FI_INT8, FI_ATOMIC_WRITE, 3, 3, proto::flag_cq_data); f.cq_data = 9; add(f);
  add(atomic(op::atomic_fetch, FI_DOUBLE, FI_MAX, 2, 16));
  add(atomic(op::atomic_fetch, FI_UINT32, FI_ATOMIC_READ, 5, 0));
  add(atomic(op::atomic_compare, FI_UINT64, FI_CSWAP, 1, 16));
  add(atomic(op::atomic_compare, FI_LONG_DOUBLE_COMPLEX, FI_MSWAP, 2, 128));
  f = atomic(op::atomic_fetch, FI_INT16, FI_BXOR, 6, 12);
  f = with_iovs(f, {{0, 4, 1}, {8, 8, 1}});
  add(f);
  add(base(op::atomic_resp, 16));
  add(base(op::ack, 0, 1234));
  f = base(op::error, 0, 55); f.status = FI_EKEYREJECTED; f.req_op = uint8_t(op::rma_write); add(f);
  return v;
}

bytes encode(const frame& f, const bytes& payload) {
  bytes out(proto::max_hdr_len);
  size_t n = build_header(f, out);
  EXPECT_NE(n, 0u);
  out.resize(n);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

bytes stream_of(const std::vector<sample>& v) {
  bytes s;
  for (auto& x : v) {
    bytes e = encode(x.f, x.payload);
    s.insert(s.end(), e.begin(), e.end());
  }
  return s;
}

// How the driver splits input and directs payloads.
struct plan {
  std::function<size_t()> chunk;  // next input chunk size (>= 1)
  std::function<size_t(size_t left)> piece = [](size_t left) { return left; };
  bool direct = false;          // use recv_window/recv_commit where possible
  bool discard_odd = false;     // discard odd-numbered frames' payloads
  bool eof = true;
};

struct run_result {
  std::vector<sample> frames;
  frame_error err = frame_error::none;
  uint64_t err_value = 0;
};

// Plays a socket: chunks of the stream arrive per plan.chunk; payloads go to
// a buffer per frame in plan.piece-sized targets.
run_result drive(const bytes& stream, plan p, const frame_limits& lim = {}) {
  frame_reader r(lim);
  run_result out;
  sample cur;
  size_t pos = 0, filled = 0, frames_seen = 0;
  bool discarding = false;
  std::span<const std::byte> pending;
  auto direct_payload = [&] {
    size_t left = r.payload_left();
    if (discarding) {
      EXPECT_TRUE(r.discard(std::min(left, p.piece(left))));
    } else {
      size_t n = std::min(left, p.piece(left));
      EXPECT_TRUE(r.set_target(cur.payload.data() + filled, n));
      filled += n;
    }
  };
  auto handle = [&](status st) -> bool {
    switch (st) {
      case status::header:
        cur.f = r.current();
        cur.payload.assign(cur.f.payload_len, std::byte{0});
        filled = 0;
        discarding = p.discard_odd && (frames_seen++ % 2 == 1);
        if (cur.f.payload_len) direct_payload();
        return true;
      case status::payload:
        direct_payload();
        return true;
      case status::done:
        EXPECT_EQ(r.payload_left(), 0u);
        out.frames.push_back(cur);
        return true;
      case status::more:
        return true;
      case status::error:
        return false;
    }
    return false;
  };
  for (;;) {
    if (pending.empty()) {
      if (pos == stream.size()) break;
      size_t c = std::min(std::max<size_t>(p.chunk(), 1), stream.size() - pos);
      pending = {stream.data() + pos, c};
      pos += c;
    }
    auto w = r.recv_window();
    if (p.direct && !w.empty()) {
      size_t n = std::min(w.size(), pending.size());
      std::memcpy(w.data(), pending.data(), n);
      pending = pending.subspan(n);
      if (!handle(r.recv_commit(n))) break;
      continue;
    }
    auto res = r.feed(pending);
    pending = pending.subspan(res.used);
    if (!handle(res.st)) break;
  }
  // Flush: a frame without payload reports done on the next feed.
  for (int i = 0; i < 4 && r.error() == frame_error::none; ++i) {
    auto res = r.feed(nullptr, 0);
    EXPECT_EQ(res.used, 0u);
    if (!handle(res.st) || res.st == status::more) break;
  }
  if (p.eof) r.end_of_stream();
  out.err = r.error();
  out.err_value = r.error_value();
  return out;
}

plan whole() {
  return {[] { return SIZE_MAX; }};
}
plan bytewise() {
  return {[] { return size_t{1}; }};
}

void expect_same(const std::vector<sample>& want, const run_result& got, bool discard_odd = false) {
  ASSERT_EQ(got.err, frame_error::none) << to_string(got.err) << " value " << got.err_value;
  ASSERT_EQ(got.frames.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got.frames[i].f, decoded(want[i].f));
    if (!(discard_odd && i % 2 == 1)) {
      EXPECT_EQ(got.frames[i].payload, want[i].payload);
    }
  }
}

// A valid frame's bytes with a patch applied to the base header.
bytes patched(const frame& f, const bytes& payload, const std::function<void(proto::header&)>& fix) {
  bytes b = encode(f, payload);
  proto::header h;
  std::memcpy(&h, b.data(), sizeof h);
  fix(h);
  std::memcpy(b.data(), &h, sizeof h);
  return b;
}

run_result parse_whole(const bytes& b, const frame_limits& lim = {}) { return drive(b, whole(), lim); }

// A frame decoded from f must fail with e (the encoder does not validate).
void expect_rejected(const frame& f, frame_error e, const frame_limits& lim = {}) {
  EXPECT_EQ(validate(f, lim), e);
  bytes b = encode(f, pattern(f.payload_len, 1));
  for (plan p : {whole(), bytewise()}) {
    auto r = drive(b, p, lim);
    EXPECT_EQ(r.err, e) << to_string(r.err);
    EXPECT_TRUE(r.frames.empty());
  }
}

}  // namespace

TEST(tcp_frame, header_sizes) {
  EXPECT_EQ(header_size(op::msg), 16u);
  EXPECT_EQ(header_size(op::msg_data), 24u);
  EXPECT_EQ(header_size(op::tagged), 24u);
  EXPECT_EQ(header_size(op::tagged_data), 32u);
  EXPECT_EQ(header_size(op::ack), 16u);
  EXPECT_EQ(header_size(op::hello), 48u);
  EXPECT_EQ(header_size(op::cm_req), 32u);
  EXPECT_EQ(header_size(op::rma_write, 1), 56u);
  EXPECT_EQ(header_size(op::atomic_compare, 4), proto::max_hdr_v1);
  EXPECT_EQ(header_size(op::rma_write, 5), 0u);
  EXPECT_EQ(header_size(static_cast<op>(0x99)), 0u);
}

TEST(tcp_frame, samples_are_valid) {
  for (auto& s : samples()) EXPECT_EQ(validate(s.f, {}), frame_error::none) << int(s.f.op);
}

TEST(tcp_frame, wire_bytes_are_little_endian) {
  frame f = base(op::tagged, 0x01020304, 0x0a0b0c0d, proto::flag_ack);
  f.tag = 0x1112131415161718;
  bytes b = encode(f, {});
  const uint8_t want[] = {0x77, 0x74, 1, 0x12, 1, 0, 24, 0, 4, 3, 2, 1, 0x0d, 0x0c, 0x0b, 0x0a,
                          0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11};
  ASSERT_EQ(b.size(), sizeof want);
  EXPECT_EQ(std::memcmp(b.data(), want, sizeof want), 0);
}

TEST(tcp_frame, fast_builder_matches_general) {
  for (op o : {op::msg, op::msg_data, op::tagged, op::tagged_data}) {
    frame f = base(o, 8, 3, proto::flag_ack);
    f.tag = o == op::tagged || o == op::tagged_data ? 0x55 : 0;
    f.cq_data = o == op::msg_data || o == op::tagged_data ? 0x66 : 0;
    std::byte a[32], b[proto::max_hdr_len];
    size_t na = build_msg_header(a, o, f.flags, 8, 3, f.tag, f.cq_data);
    size_t nb = build_header(f, b);
    ASSERT_EQ(na, nb);
    EXPECT_EQ(std::memcmp(a, b, na), 0);
  }
}

TEST(tcp_frame, builder_refuses_what_it_cannot_encode) {
  std::byte out[proto::max_hdr_len];
  frame f = with_iovs(base(op::rma_write, 8), {{0, 8, 1}});
  EXPECT_EQ(build_header(f, std::span(out, 55)), 0u);
  EXPECT_EQ(build_header(f, std::span(out, 56)), 56u);
  f.iov_count = 5;
  EXPECT_EQ(build_header(f, out), 0u);
  EXPECT_EQ(build_header(base(static_cast<op>(0), 0), out), 0u);
  frame h = base(op::hello, 0);
  h.addr_len = 25;
  EXPECT_EQ(build_header(h, out), 0u);
}

TEST(tcp_frame, round_trip_whole) { expect_same(samples(), drive(stream_of(samples()), whole())); }

TEST(tcp_frame, round_trip_byte_at_a_time) {
  expect_same(samples(), drive(stream_of(samples()), bytewise()));
  plan p = bytewise();
  p.direct = true;
  expect_same(samples(), drive(stream_of(samples()), p));
}

TEST(tcp_frame, round_trip_each_frame_alone) {
  for (auto& s : samples()) {
    bytes b = encode(s.f, s.payload);
    expect_same({s}, drive(b, whole()));
    expect_same({s}, drive(b, bytewise()));
  }
}

TEST(tcp_frame, round_trip_random_splits_and_pieces) {
  auto v = samples();
  bytes s = stream_of(v);
  for (unsigned seed = 0; seed < 200; ++seed) {
    SCOPED_TRACE(seed);
    auto rng = std::make_shared<std::mt19937>(seed);
    plan p{[rng] { return size_t{1} + (*rng)() % 97; }};
    p.piece = [rng](size_t left) { return size_t{1} + (*rng)() % left; };
    p.direct = seed % 2;
    expect_same(v, drive(s, p));
  }
}

TEST(tcp_frame, payload_in_fixed_pieces) {
  sample s{base(op::msg, 1000), pattern(1000, 3)};
  bytes b = encode(s.f, s.payload);
  frame_reader r;
  auto res = r.feed(b.data(), b.size());
  ASSERT_EQ(res.st, status::header);
  EXPECT_EQ(res.used, 16u);
  EXPECT_EQ(r.payload_left(), 1000u);
  // No target yet: nothing is consumed.
  auto again = r.feed(b.data() + 16, b.size() - 16);
  EXPECT_EQ(again.st, status::payload);
  EXPECT_EQ(again.used, 0u);
  bytes got(1000);
  size_t off = 16, placed = 0;
  for (;;) {
    size_t n = std::min<size_t>(7, r.payload_left());
    ASSERT_TRUE(r.set_target(got.data() + placed, n));
    placed += n;
    res = r.feed(b.data() + off, b.size() - off);
    off += res.used;
    EXPECT_EQ(res.used, n);
    if (res.st == status::done) break;
    ASSERT_EQ(res.st, status::payload);
    EXPECT_EQ(r.payload_left(), 1000 - placed);
  }
  EXPECT_EQ(got, s.payload);
  EXPECT_EQ(off, b.size());
  EXPECT_TRUE(r.at_boundary());
  EXPECT_EQ(r.end_of_stream(), frame_error::none);
}

TEST(tcp_frame, target_rules) {
  frame_reader r;
  std::byte buf[64];
  EXPECT_FALSE(r.set_target(buf, 1));  // no frame yet
  EXPECT_FALSE(r.discard(1));
  bytes b = encode(base(op::msg, 10), pattern(10, 0));
  ASSERT_EQ(r.feed(b.data(), 16).st, status::header);
  EXPECT_FALSE(r.set_target(buf, 11));  // more than the payload
  EXPECT_FALSE(r.set_target(nullptr, 4));
  EXPECT_FALSE(r.set_target(buf, 0));
  EXPECT_FALSE(r.discard(11));
  EXPECT_TRUE(r.set_target(buf, 10));
  // Replacing a target not yet full: the next bytes go to the new one.
  ASSERT_EQ(r.feed(b.data() + 16, 3).st, status::more);
  EXPECT_TRUE(r.set_target(buf + 32, 7));
  EXPECT_EQ(r.recv_window().size(), 7u);
  EXPECT_EQ(r.recv_commit(8), status::error);  // beyond the window: refused
  EXPECT_EQ(r.payload_left(), 7u);
  auto res = r.feed(b.data() + 19, 7);
  EXPECT_EQ(res.st, status::done);
  EXPECT_EQ(std::memcmp(buf, b.data() + 16, 3), 0);
  EXPECT_EQ(std::memcmp(buf + 32, b.data() + 19, 7), 0);
  EXPECT_FALSE(r.set_target(buf, 1));  // frame over
  EXPECT_TRUE(r.recv_window().empty());
}

TEST(tcp_frame, zero_payload_frame_reports_done_on_next_feed) {
  bytes b = encode(base(op::ack, 0, 5), {});
  bytes two = b;
  two.insert(two.end(), b.begin(), b.end());
  frame_reader r;
  auto res = r.feed(two.data(), two.size());
  EXPECT_EQ(res.st, status::header);
  EXPECT_EQ(res.used, 16u);
  EXPECT_TRUE(r.at_boundary());
  res = r.feed(two.data() + 16, 16);
  EXPECT_EQ(res.st, status::done);
  EXPECT_EQ(res.used, 0u);
  res = r.feed(two.data() + 16, 16);
  EXPECT_EQ(res.st, status::header);
  EXPECT_EQ(r.current().msg_id, 5u);
  EXPECT_EQ(r.feed(nullptr, 0).st, status::done);
  EXPECT_EQ(r.feed(nullptr, 0).st, status::more);
}

TEST(tcp_frame, direct_receive_into_window) {
  sample s{base(op::tagged, 300), pattern(300, 9)};
  s.f.tag = 3;
  bytes b = encode(s.f, s.payload);
  frame_reader r;
  ASSERT_EQ(r.feed(b.data(), b.size()).st, status::header);
  bytes app(300);
  ASSERT_TRUE(r.set_target(app.data(), 100));
  auto w = r.recv_window();
  ASSERT_EQ(w.size(), 100u);
  EXPECT_EQ(w.data(), app.data());
  std::memcpy(w.data(), b.data() + 24, 60);  // a short recv()
  EXPECT_EQ(r.recv_commit(60), status::more);
  w = r.recv_window();
  ASSERT_EQ(w.size(), 40u);
  std::memcpy(w.data(), b.data() + 84, 40);
  EXPECT_EQ(r.recv_commit(40), status::payload);
  ASSERT_TRUE(r.set_target(app.data() + 100, 200));
  std::memcpy(r.recv_window().data(), b.data() + 124, 200);
  EXPECT_EQ(r.recv_commit(200), status::done);
  EXPECT_EQ(app, s.payload);
}

TEST(tcp_frame, discard_path) {
  auto v = samples();
  bytes s = stream_of(v);
  plan p = whole();
  p.discard_odd = true;
  expect_same(v, drive(s, p), true);
  p = bytewise();
  p.discard_odd = true;
  expect_same(v, drive(s, p), true);
  // Part kept, the rest dropped (a receive buffer shorter than the message).
  sample m{base(op::msg, 50), pattern(50, 4)};
  sample next{base(op::msg, 4), pattern(4, 5)};
  bytes b = encode(m.f, m.payload);
  bytes nb = encode(next.f, next.payload);
  b.insert(b.end(), nb.begin(), nb.end());
  frame_reader r;
  size_t off = 0;
  auto res = r.feed(b.data(), b.size());
  off += res.used;
  ASSERT_EQ(res.st, status::header);
  std::byte keep[20];
  ASSERT_TRUE(r.set_target(keep, 20));
  res = r.feed(b.data() + off, b.size() - off);
  off += res.used;
  ASSERT_EQ(res.st, status::payload);
  ASSERT_TRUE(r.discard_rest());
  EXPECT_TRUE(r.recv_window().empty());
  res = r.feed(b.data() + off, b.size() - off);
  off += res.used;
  ASSERT_EQ(res.st, status::done);
  EXPECT_EQ(std::memcmp(keep, m.payload.data(), 20), 0);
  res = r.feed(b.data() + off, b.size() - off);
  ASSERT_EQ(res.st, status::header);
  EXPECT_EQ(r.current().payload_len, 4u);
}

TEST(tcp_frame, truncated_at_every_offset) {
  for (auto& s : samples()) {
    bytes b = encode(s.f, s.payload);
    // Long payloads: every header offset, then a sample of payload offsets.
    for (size_t k = 0; k < b.size(); k += (k < 160 ? 1 : 97)) {
      SCOPED_TRACE(testing::Message() << "op " << int(s.f.op) << " cut at " << k);
      bytes cut(b.begin(), b.begin() + k);
      for (plan p : {whole(), bytewise()}) {
        auto r = drive(cut, p);
        if (k == 0) {
          EXPECT_EQ(r.err, frame_error::none);
        } else {
          EXPECT_EQ(r.err, frame_error::truncated);
          EXPECT_EQ(r.err_value, k);
          EXPECT_TRUE(r.frames.empty());
        }
      }
    }
    EXPECT_EQ(drive(b, whole()).err, frame_error::none);
  }
}

TEST(tcp_frame, bad_magic) {
  auto b = patched(base(op::msg, 0), {}, [](proto::header& h) { h.magic = 0x5754; });
  auto r = parse_whole(b);
  EXPECT_EQ(r.err, frame_error::bad_magic);
  EXPECT_EQ(r.err_value, 0x5754u);
  // Plain text on the port (an HTTP probe) is refused on its first 16 bytes.
  const char probe[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  bytes t(reinterpret_cast<const std::byte*>(probe),
          reinterpret_cast<const std::byte*>(probe) + sizeof probe - 1);
  EXPECT_EQ(parse_whole(t).err, frame_error::bad_magic);
}

TEST(tcp_frame, other_versions_refused) {
  for (uint8_t v : {0, 2, 3, 0x11, 255}) {
    frame f = base(op::cm_req, 4);
    auto b = patched(f, pattern(4, 0), [v](proto::header& h) { h.version = v; });
    auto r = parse_whole(b);
    EXPECT_EQ(r.err, frame_error::bad_version);
    EXPECT_EQ(r.err_value, v);
  }
}

TEST(tcp_frame, unknown_ops_refused) {
  int known = 0;
  for (unsigned o = 0; o < 256; ++o) {
    auto b = patched(base(op::msg, 0), {}, [o](proto::header& h) {
      h.op = uint8_t(o);
      h.hdr_len = proto::max_hdr_len;  // long enough for any op
    });
    b.resize(proto::max_hdr_len);
    auto r = parse_whole(b);
    if (header_size(static_cast<op>(o)) == 0) {
      EXPECT_EQ(r.err, frame_error::bad_op) << o;
      EXPECT_EQ(r.err_value, o);
    } else {
      ++known;
      EXPECT_NE(r.err, frame_error::bad_op) << o;
    }
  }
  EXPECT_EQ(known, 17);
}

TEST(tcp_frame, flags_checked_per_op) {
  expect_rejected(base(op::msg, 0, 1, proto::flag_cq_data), frame_error::bad_flags);
  expect_rejected(base(op::msg, 0, 1, 0x8000), frame_error::bad_flags);
  expect_rejected(base(op::ack, 0, 1, proto::flag_ack), frame_error::bad_flags);
  expect_rejected(with_iovs(base(op::rma_read_req, 0, 1, proto::flag_ack), {{0, 8, 1}}),
                  frame_error::bad_flags);
  expect_rejected(atomic(op::atomic_fetch, FI_INT32, FI_SUM, 1, 4, proto::flag_ack),
                  frame_error::bad_flags);
  frame h = base(op::hello, 0, 1, proto::flag_cq_data);
  h.addr_len = 6;
  expect_rejected(h, frame_error::bad_flags);
}

TEST(tcp_frame, header_length_checked) {
  for (auto& s : samples()) {
    SCOPED_TRACE(int(s.f.op));
    bytes good = encode(s.f, s.payload);
    uint16_t need = static_cast<uint16_t>(header_size(s.f.op, s.f.iov_count));
    // One byte short of what the op (with its iov count) needs.
    auto b = patched(s.f, s.payload, [need](proto::header& h) { h.hdr_len = uint16_t(need - 1); });
    auto r = parse_whole(b);
    EXPECT_EQ(r.err, frame_error::bad_hdr_len);
    EXPECT_EQ(r.err_value, need - 1u);
    // Zero, and beyond the maximum.
    for (uint16_t len : {uint16_t(0), uint16_t(15), uint16_t(proto::max_hdr_len + 1), uint16_t(0xffff)}) {
      b = patched(s.f, s.payload, [len](proto::header& h) { h.hdr_len = len; });
      EXPECT_EQ(parse_whole(b).err, frame_error::bad_hdr_len) << len;
    }
  }
}

TEST(tcp_frame, a_local_stream_offer_travels_in_cm_req) {
  frame f = base(op::cm_req, 3);
  f.minor = 1;
  f.features = proto::feature_local_stream;
  f.local_pid = 4242;
  f.local_fd = 17;
  f.local_cookie = 0x0123456789abcdefull;
  bytes b = encode(f, pattern(3, 1));
  auto r = drive(b, whole());
  ASSERT_EQ(r.err, frame_error::none);
  ASSERT_EQ(r.frames.size(), 1u);
  EXPECT_EQ(r.frames[0].f.hdr_len, 48u);
  EXPECT_EQ(r.frames[0].f.local_pid, 4242u);
  EXPECT_EQ(r.frames[0].f.local_fd, 17);
  EXPECT_EQ(r.frames[0].f.local_cookie, 0x0123456789abcdefull);
  // The bit without the extension (a 32-byte header) is no offer.
  frame g = base(op::cm_req, 0);
  g.features = proto::feature_local_stream;
  bytes c = encode(g, {});
  c.resize(sizeof(proto::header) + sizeof(proto::cm_ext));
  proto::header h;
  std::memcpy(&h, c.data(), sizeof h);
  h.hdr_len = static_cast<uint16_t>(c.size());
  std::memcpy(c.data(), &h, sizeof h);
  auto q = drive(c, whole());
  ASSERT_EQ(q.err, frame_error::none);
  ASSERT_EQ(q.frames.size(), 1u);
  EXPECT_EQ(q.frames[0].f.features & proto::feature_local_stream, 0u);
  EXPECT_EQ(q.frames[0].f.local_pid, 0u);
}

TEST(tcp_frame, longer_header_is_skipped) {
  // A later minor version may append extension fields: the reader skips them.
  sample s{base(op::tagged, 5), pattern(5, 2)};
  s.f.tag = 77;
  bytes b = encode(s.f, {});
  b.resize(proto::max_hdr_len, std::byte{0xee});
  proto::header h;
  std::memcpy(&h, b.data(), sizeof h);
  h.hdr_len = proto::max_hdr_len;
  std::memcpy(b.data(), &h, sizeof h);
  b.insert(b.end(), s.payload.begin(), s.payload.end());
  for (plan p : {whole(), bytewise()}) {
    auto r = drive(b, p);
    ASSERT_EQ(r.err, frame_error::none);
    ASSERT_EQ(r.frames.size(), 1u);
    EXPECT_EQ(r.frames[0].f.tag, 77u);
    EXPECT_EQ(r.frames[0].f.hdr_len, proto::max_hdr_len);
    EXPECT_EQ(r.frames[0].payload, s.payload);
  }
}

TEST(tcp_frame, payload_caps) {
  frame_limits lim;
  lim.max_payload = 4096;
  expect_rejected(base(op::msg, 4097), frame_error::payload_too_big, lim);
  expect_same({{base(op::msg, 4096), pattern(4096, 0)}},
              drive(encode(base(op::msg, 4096), pattern(4096, 0)), whole(), lim));
  // Refused on the base header alone: no payload byte is needed (or read).
  auto b = patched(base(op::msg, 0), {}, [](proto::header& h) { h.payload_len = 0xffffffff; });
  frame_reader r(lim);
  auto res = r.feed(b.data(), b.size());
  EXPECT_EQ(res.st, status::error);
  EXPECT_EQ(r.error(), frame_error::payload_too_big);
  EXPECT_EQ(r.error_value(), 0xffffffffu);
  // The default cap is 1 GiB.
  b = patched(base(op::rma_read_resp, 0), {}, [](proto::header& h) { h.payload_len = (1u << 30) + 1; });
  EXPECT_EQ(parse_whole(b).err, frame_error::payload_too_big);
  // CM private data: at most 256 bytes, or the configured limit.
  expect_rejected(base(op::cm_req, 257), frame_error::payload_too_big);
  expect_rejected(base(op::cm_resp, 257), frame_error::payload_too_big);
  frame_limits cm;
  cm.max_cm_data = 64;
  expect_rejected(base(op::cm_req, 65), frame_error::payload_too_big, cm);
  cm.max_cm_data = 100000;  // clamped to the protocol's 256
  expect_rejected(base(op::cm_req, 257), frame_error::payload_too_big, cm);
}

TEST(tcp_frame, ops_without_payload_refuse_one) {
  frame h = base(op::hello, 1);
  h.addr_len = 6;
  expect_rejected(h, frame_error::bad_payload_len);
  expect_rejected(base(op::shutdown, 1), frame_error::bad_payload_len);
  expect_rejected(base(op::ack, 8), frame_error::bad_payload_len);
  frame e = base(op::error, 1);
  e.status = FI_EINVAL;
  e.req_op = uint8_t(op::msg);
  expect_rejected(e, frame_error::bad_payload_len);
  expect_rejected(with_iovs(base(op::rma_read_req, 8), {{0, 8, 1}}), frame_error::bad_payload_len);
}

TEST(tcp_frame, rma_iovs_checked) {
  expect_rejected(base(op::rma_write, 0), frame_error::bad_iov_count);  // 0 iovs
  frame f = with_iovs(base(op::rma_write, 5), {{0, 1, 1}, {0, 1, 1}, {0, 1, 1}, {0, 1, 1}});
  f.iov[3].len = 2;
  EXPECT_EQ(validate(f, {}), frame_error::none);
  frame_limits two;
  two.max_rma_iov = 2;
  expect_rejected(f, frame_error::bad_iov_count, two);
  // A count above the wire maximum, with a header long enough to hold it.
  bytes b = encode(f, pattern(5, 0));
  b[16 + 8] = std::byte{5};
  EXPECT_EQ(parse_whole(b).err, frame_error::bad_iov_count);
  b[16 + 8] = std::byte{255};
  EXPECT_EQ(parse_whole(b).err, frame_error::bad_iov_count);
  // A count the header is too short for.
  b = encode(with_iovs(base(op::rma_write, 1), {{0, 1, 1}}), pattern(1, 0));
  b[16 + 8] = std::byte{2};
  EXPECT_EQ(parse_whole(b).err, frame_error::bad_hdr_len);
  // Sum of lengths overflows 64 bits; an iov that wraps the address space.
  expect_rejected(with_iovs(base(op::rma_write, 0), {{0, 1ull << 63, 1}, {0, 1ull << 63, 1}}),
                  frame_error::bad_iov);
  expect_rejected(with_iovs(base(op::rma_read_req, 0), {{~0ull - 3, 8, 1}}), frame_error::bad_iov);
  // Payload that is not the sum of the lengths.
  expect_rejected(with_iovs(base(op::rma_write, 7), {{0, 8, 1}}), frame_error::bad_payload_len);
  expect_rejected(with_iovs(base(op::rma_write, 9), {{0, 8, 1}}), frame_error::bad_payload_len);
  // A read larger than the cap.
  frame_limits lim;
  lim.max_payload = 1000;
  expect_rejected(with_iovs(base(op::rma_read_req, 0), {{0, 600, 1}, {0, 401, 1}}),
                  frame_error::payload_too_big, lim);
}

TEST(tcp_frame, atomics_checked) {
  expect_rejected(atomic(op::atomic_write, 20, FI_SUM, 1, 0), frame_error::bad_atomic);
  expect_rejected(atomic(op::atomic_write, 255, FI_SUM, 1, 0), frame_error::bad_atomic);
  expect_rejected(atomic(op::atomic_write, FI_INT32, FI_CSWAP, 1, 4), frame_error::bad_atomic);
  expect_rejected(atomic(op::atomic_write, FI_INT32, FI_ATOMIC_READ, 1, 4), frame_error::bad_atomic);
  expect_rejected(atomic(op::atomic_fetch, FI_INT32, FI_MSWAP, 1, 4), frame_error::bad_atomic);
  expect_rejected(atomic(op::atomic_compare, FI_INT32, FI_SUM, 1, 8), frame_error::bad_atomic);
  expect_rejected(atomic(op::atomic_fetch, FI_INT32, FI_ATOMIC_OP_LAST, 1, 4), frame_error::bad_atomic);
  expect_rejected(atomic(op::atomic_fetch, FI_INT32, 200, 1, 4), frame_error::bad_atomic);
  expect_rejected(atomic(op::atomic_write, FI_INT32, FI_SUM, 0, 0), frame_error::bad_atomic);
  // count * size above the cap, including products past 32 bits.
  frame big = atomic(op::atomic_write, FI_LONG_DOUBLE_COMPLEX, FI_SUM, 0xffffffff, 0);
  expect_rejected(big, frame_error::payload_too_big);
  frame_limits lim;
  lim.max_payload = 64;
  expect_rejected(atomic(op::atomic_write, FI_UINT64, FI_SUM, 9, 0), frame_error::payload_too_big, lim);
  // Compare carries operands and compare values: 2 * count * size.
  expect_rejected(atomic(op::atomic_compare, FI_UINT64, FI_CSWAP, 1, 8), frame_error::bad_payload_len);
  expect_rejected(atomic(op::atomic_write, FI_UINT64, FI_SUM, 2, 8), frame_error::bad_payload_len);
  expect_rejected(atomic(op::atomic_fetch, FI_UINT64, FI_ATOMIC_READ, 2, 16), frame_error::bad_payload_len);
  // iovs that do not add up to count elements, or split an element.
  frame f = atomic(op::atomic_write, FI_UINT32, FI_SUM, 4, 16);
  f.iov[0].len = 12;
  expect_rejected(f, frame_error::bad_iov);
  f = with_iovs(f, {{0, 6, 1}, {8, 10, 1}});
  expect_rejected(f, frame_error::bad_iov);
  f = with_iovs(f, {{0, 8, 1}, {8, 8, 1}});
  EXPECT_EQ(validate(f, {}), frame_error::none);
}

TEST(tcp_frame, fields_checked) {
  for (uint8_t len : {0, 1, 7, 16, 21, 23, 24, 255}) {
    frame h = base(op::hello, 0);
    h.addr_len = len;
    EXPECT_EQ(validate(h, {}), frame_error::bad_field) << int(len);
    if (len <= proto::hello_addr_max) expect_rejected(h, frame_error::bad_field);
  }
  frame c = base(op::cm_req, 0);
  c.status = 1;
  expect_rejected(c, frame_error::bad_field);
  c = base(op::cm_resp, 0);
  c.status = -FI_ECONNREFUSED;
  expect_rejected(c, frame_error::bad_field);
  frame e = base(op::error, 0);
  e.status = 0;
  e.req_op = uint8_t(op::msg);
  expect_rejected(e, frame_error::bad_field);
  e.status = -5;
  expect_rejected(e, frame_error::bad_field);
  e.status = FI_EINVAL;
  for (op o : {op::ack, op::error, op::cm_req, op::atomic_resp, static_cast<op>(0x77)}) {
    e.req_op = uint8_t(o);
    expect_rejected(e, frame_error::bad_field);
  }
}

TEST(tcp_frame, hello_address_is_canonical) {
  frame h = base(op::hello, 0);
  h.addr_len = 6;
  std::memset(h.addr, 0xaa, sizeof h.addr);
  bytes b = encode(h, {});
  b[16 + 8 + 10] = std::byte{0x55};  // garbage past addr_len on the wire
  auto r = parse_whole(b);
  ASSERT_EQ(r.frames.size(), 1u);
  for (size_t i = 6; i < proto::hello_addr_max; ++i) EXPECT_EQ(r.frames[0].f.addr[i], 0) << i;
  EXPECT_EQ(r.frames[0].f.addr[5], 0xaa);
}

TEST(tcp_frame, errors_are_sticky_and_good_frames_before_them_count) {
  bytes b = encode(base(op::msg, 3), pattern(3, 0));
  auto bad = patched(base(op::msg, 0), {}, [](proto::header& h) { h.op = 0x7f; });
  b.insert(b.end(), bad.begin(), bad.end());
  auto r = drive(b, whole());
  EXPECT_EQ(r.frames.size(), 1u);
  EXPECT_EQ(r.err, frame_error::bad_op);
  frame_reader rd;
  auto res = rd.feed(bad.data(), bad.size());
  EXPECT_EQ(res.st, status::error);
  EXPECT_EQ(res.used, 16u);
  bytes good = encode(base(op::ack, 0), {});
  res = rd.feed(good.data(), good.size());
  EXPECT_EQ(res.st, status::error);
  EXPECT_EQ(res.used, 0u);
  EXPECT_EQ(rd.end_of_stream(), frame_error::bad_op);
  EXPECT_FALSE(rd.set_target(good.data(), 1));
}

TEST(tcp_frame, error_strings) {
  for (int e = 0; e <= int(frame_error::truncated); ++e)
    EXPECT_STRNE(to_string(frame_error(e)), "unknown frame error");
}
