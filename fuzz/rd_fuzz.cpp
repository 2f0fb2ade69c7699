// SPDX-License-Identifier: MIT
// weft — libFuzzer target for reliable datagrams (util/rd_proto.hpp,
// util/rd_link.hpp): hostile datagrams against a link that has data in
// flight and a message half-assembled.
//
// Input: 2 control bytes (datagrams in flight before the first input, the
// starting epoch), then records of [length: 2 bytes little-endian][bytes],
// each one datagram as a peer would send it. Every datagram is parsed; the
// well-formed ones go to link::receive, data in order goes through an
// assembly as the udp RDM endpoint does, and a message's first datagram
// whose op is an RMA request goes through udp's parse_request
// (prov/udp/rdm_proto.hpp). Checked on every datagram, beyond "no crash,
// no UB" (ASan, UBSan):
//   - a malformed datagram changes nothing (it never reaches the link);
//   - acknowledgements complete only datagrams that were sent, each once,
//     oldest first, and never more than were in flight;
//   - the receive side moves by exactly one datagram per `deliver` consumed,
//     and an assembly never takes more than its message's length;
//   - the link's timers keep answering within bounds;
//   - an RMA request parse_request accepts lies within what the target
//     sizes by it: its header in the first datagram, header and data the
//     message's length, an atomic's staged operands within 2 *
//     rdm_atomic_max bytes, a write's data the sum of its ranges.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "prov/udp/rdm_proto.hpp"
#include "util/rd_link.hpp"

using namespace weft::util::rd;

#define FUZZ_CHECK(c)             \
  do {                            \
    if (!(c)) __builtin_trap();   \
  } while (0)

// An RMA request the udp target would accept: what it sizes by holds.
static void check_rma(const view& v) {
  namespace u = weft::udp;
  const uint8_t op = v.m.op & ~weft::udp::rdm_op_with_data;
  u::rma_request q;
  if (u::parse_request(op, v.m, v.payload, v.h.bytes, q) != u::rma_malformed::none) return;
  FUZZ_CHECK(q.h.iov_count >= 1 && q.h.iov_count <= u::rdm_max_rma_iov);
  FUZZ_CHECK(q.hdr_len == sizeof(u::rma_hdr) + q.h.iov_count * sizeof(u::rma_iov));
  FUZZ_CHECK(q.hdr_len <= v.h.bytes && q.hdr_len <= u::rma_hdr_max);
  FUZZ_CHECK(q.hdr_len + q.data_len == v.m.len);
  uint64_t total = 0;
  for (unsigned i = 0; i < q.h.iov_count; ++i) {
    FUZZ_CHECK(q.iov[i].addr + q.iov[i].len >= q.iov[i].addr);  // no range wraps
    total += q.iov[i].len;
  }
  FUZZ_CHECK(total == q.total);
  if (u::is_atomic(op)) {
    FUZZ_CHECK(q.elem && q.h.count && q.total == uint64_t{q.h.count} * q.elem);
    FUZZ_CHECK(q.total <= u::rdm_atomic_max && q.data_len <= 2 * u::rdm_atomic_max);
    for (unsigned i = 0; i < q.h.iov_count; ++i) FUZZ_CHECK(q.iov[i].len % q.elem == 0);
  } else if (op == uint8_t(u::rdm_op::rma_read)) {
    FUZZ_CHECK(q.data_len == 0 && q.total <= u::rdm_rma_max);
  } else {
    FUZZ_CHECK(q.data_len == q.total && q.total <= u::rdm_rma_max);
  }
  if (op != uint8_t(u::rdm_op::atomic) && op != uint8_t(u::rdm_op::rma_write))
    FUZZ_CHECK(q.h.flags & u::rma_flag_answer);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  config cfg;
  cfg.window = 32;
  cfg.rto_min_us = 100;
  cfg.peer_timeout_ns = 1'000'000'000;
  weft::util::rd::link l;
  l.configure(cfg);
  l.start(0x1234u + data[1]);
  // Some of ours in flight, so acknowledgements have something to act on.
  const uint32_t sent = data[0] % 33;
  uint64_t now = 1'000'000;
  for (uint32_t i = 0; i < sent && l.window_open(); ++i) {
    FUZZ_CHECK(l.reserve());
    dgram h;
    l.stamp_data(h, flag_first | flag_last, 10);
    l.sent(flight{reinterpret_cast<void*>(uintptr_t(i + 1)), 0, 10, flag_first | flag_last,
                  false, 0},
           now);
  }
  const uint32_t in_flight = l.in_flight_count();
  uint32_t acked = 0;
  assembly as;
  bool assembling = false;
  size_t pos = 2;
  while (pos + 2 <= size) {
    size_t n = size_t(data[pos]) | size_t(data[pos + 1]) << 8;
    pos += 2;
    if (n > size - pos) n = size - pos;
    const uint8_t* d = data + pos;
    pos += n;
    now += 50'000;
    view v;
    uint32_t expect_before = l.expected(), una_before = l.unacked();
    if (parse(d, n, v) != malformed::none) {
      FUZZ_CHECK(l.expected() == expect_before && l.unacked() == una_before);
      continue;
    }
    if (v.payload) FUZZ_CHECK(reinterpret_cast<const uint8_t*>(v.payload) + v.h.bytes <= d + n);
    if ((v.h.flags & flag_first) &&
        weft::udp::is_request(v.m.op & ~weft::udp::rdm_op_with_data))
      check_rma(v);
    auto on_ack = [&](const flight& f) {
      // Oldest first, each once: the token counts up from 1.
      FUZZ_CHECK(reinterpret_cast<uintptr_t>(f.msg) == acked + 1);
      ++acked;
    };
    verdict r = l.receive(v, now, on_ack);
    FUZZ_CHECK(acked <= in_flight);
    FUZZ_CHECK(l.in_flight_count() == in_flight - acked);
    if (r == verdict::restart || r == verdict::renewed) {
      if (r == verdict::restart)
        l.reset(0x9999u);
      else
        l.renew();  // (the provider sends what it had queued again)
      FUZZ_CHECK(!l.in_flight() && l.expected() == 0 && l.unacked() == 0);
      assembling = false;
      acked = in_flight;  // everything of ours failed, or is to be sent again
      expect_before = l.expected();
      una_before = l.unacked();
      r = l.receive(v, now, on_ack);
      FUZZ_CHECK(r != verdict::restart && r != verdict::renewed);
    }
    if (r == verdict::invalid) FUZZ_CHECK(l.unacked() == una_before);
    if (r != verdict::deliver) {
      FUZZ_CHECK(l.expected() == expect_before || r == verdict::ack_only);
      continue;
    }
    FUZZ_CHECK(v.h.kind == uint8_t(kind::data) && v.h.seq == l.expected());
    if (v.h.flags & flag_first) {
      as.begin(v.m.len);
      assembling = true;
    }
    if (assembling) {
      const assembly::fit f = as.add(v.h.bytes, v.h.flags & flag_last);
      FUZZ_CHECK(as.off <= as.len);
      if (f != assembly::fit::ok) assembling = false;
    }
    l.consumed();
    FUZZ_CHECK(l.expected() == expect_before + 1);
  }
  // Timers: a resend offers only what is in flight, oldest first.
  uint32_t offered = 0;
  l.tick(now + 10'000'000'000ull, [&](const flight&, uint32_t seq) {
    FUZZ_CHECK(seq == l.unacked() + offered);
    ++offered;
    return true;
  });
  FUZZ_CHECK(offered <= l.in_flight_count());
  return 0;
}
