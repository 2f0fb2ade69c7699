// SPDX-License-Identifier: MIT
// weft — the udp RDM RMA header (prov/udp/rdm_proto.hpp): parse_request
// accepts what an initiator builds and refuses, for its stated reason,
// every request whose sizes a target could be misled by.
#include "prov/udp/rdm_proto.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace weft::udp {
namespace {

// A request's first datagram: header, ranges, `data` bytes of payload.
struct request {
  uint8_t op;
  rma_hdr h;
  std::vector<rma_iov> iov;
  uint64_t data;            // payload bytes after the header (msg.len - header)
  size_t cut = SIZE_MAX;    // the first datagram's payload, if shorter than all of it

  rma_malformed parse(rma_request* out = nullptr) const {
    std::vector<std::byte> p(sizeof h + iov.size() * sizeof(rma_iov) + data);
    std::memcpy(p.data(), &h, sizeof h);
    if (!iov.empty()) std::memcpy(p.data() + sizeof h, iov.data(), iov.size() * sizeof(rma_iov));
    util::rd::msg m{};
    m.op = op;
    m.len = sizeof h + iov.size() * sizeof(rma_iov) + data;
    rma_request q;
    auto r = parse_request(op, m, p.data(), std::min(cut, p.size()), q);
    if (out) *out = q;
    return r;
  }
};

constexpr uint8_t write = uint8_t(rdm_op::rma_write), read = uint8_t(rdm_op::rma_read),
                  atomic = uint8_t(rdm_op::atomic), fetch = uint8_t(rdm_op::atomic_fetch),
                  compare = uint8_t(rdm_op::atomic_compare);

request rma(uint8_t op, uint64_t len, uint64_t data) {
  return {op, {1, rma_flag_answer, 0, 0, 0}, {{4096, len, 7}}, data};
}
request atom(uint8_t op, int aop, uint32_t count, uint64_t data) {
  return {op, {1, rma_flag_answer, uint8_t(FI_INT64), uint8_t(aop), count}, {{64, count * 8, 9}},
          data};
}

TEST(udp_rdm_proto, what_an_initiator_builds_is_accepted) {
  rma_request q;
  ASSERT_EQ(rma(write, 5000, 5000).parse(&q), rma_malformed::none);
  EXPECT_EQ(q.hdr_len, 32u);
  EXPECT_EQ(q.data_len, 5000u);
  EXPECT_EQ(q.total, 5000u);
  EXPECT_EQ(rma(read, 1 << 30, 0).parse(), rma_malformed::none);
  request w = rma(write, 16, 16);
  w.h.flags = 0;  // fire-and-forget
  EXPECT_EQ(w.parse(), rma_malformed::none);
  request four = rma(write, 10, 40);
  four.h.iov_count = 4;
  four.iov.assign(4, {0, 10, 1});
  ASSERT_EQ(four.parse(&q), rma_malformed::none);
  EXPECT_EQ(q.hdr_len, rma_hdr_max);
  EXPECT_EQ(atom(atomic, FI_SUM, 32, 256).parse(&q), rma_malformed::none);
  EXPECT_EQ(q.elem, 8u);
  EXPECT_EQ(atom(fetch, FI_ATOMIC_READ, 3, 0).parse(), rma_malformed::none);
  EXPECT_EQ(atom(fetch, FI_SUM, 3, 24).parse(), rma_malformed::none);
  EXPECT_EQ(atom(compare, FI_CSWAP, 32, 512).parse(), rma_malformed::none);
}

TEST(udp_rdm_proto, every_misleading_request_is_refused_for_its_reason) {
  struct bad {
    const char* what;
    request r;
    rma_malformed why;
  };
  std::vector<bad> cases;
  auto add = [&](const char* w, request r, rma_malformed m) { cases.push_back({w, r, m}); };
  request r = rma(write, 16, 16);
  r.cut = 7;
  add("shorter than rma_hdr", r, rma_malformed::short_header);
  r = rma(write, 16, 16);
  r.cut = 8 + 23;
  add("a range cut off the first datagram", r, rma_malformed::short_header);
  r = rma(write, 16, 16);
  r.h.iov_count = 0;
  add("no range", r, rma_malformed::bad_iov_count);
  r = rma(write, 16, 16);
  r.h.iov_count = 5;
  r.iov.assign(5, {0, 16, 1});
  r.data = 80;
  add("five ranges", r, rma_malformed::bad_iov_count);
  r = rma(write, 16, 16);
  r.h.flags = 2;
  add("unknown flags", r, rma_malformed::bad_flags);
  r = rma(write, 16, 16);
  r.iov[0].addr = UINT64_MAX - 8;
  add("a range that wraps", r, rma_malformed::bad_range);
  r = rma(write, UINT64_MAX, 0);
  r.h.iov_count = 2;
  r.iov.push_back({0, 2, 1});
  add("lengths whose sum wraps", r, rma_malformed::bad_range);
  add("a write past 1 GiB", rma(write, (1ull << 30) + 1, 0), rma_malformed::too_long);
  add("a read past 1 GiB", rma(read, (1ull << 30) + 1, 0), rma_malformed::too_long);
  add("a write's data shorter than its range", rma(write, 32, 16), rma_malformed::bad_length);
  add("a write's data longer than its range", rma(write, 16, 17), rma_malformed::bad_length);
  add("a read with data", rma(read, 16, 1), rma_malformed::bad_length);
  r = rma(write, 16, 16);
  r.h.datatype = 3;
  add("atomic fields on a write", r, rma_malformed::reserved_set);
  r = rma(read, 16, 0);
  r.h.flags = 0;
  add("a read that wants no answer", r, rma_malformed::no_answer);
  r = atom(fetch, FI_SUM, 1, 8);
  r.h.flags = 0;
  add("a fetch that wants no answer", r, rma_malformed::no_answer);
  add("33 64-bit elements", atom(atomic, FI_SUM, 33, 264), rma_malformed::too_long);
  r = atom(atomic, FI_SUM, 1, 8);
  r.h.datatype = FI_FLOAT16;
  add("a datatype not carried", r, rma_malformed::bad_atomic);
  add("no element", atom(atomic, FI_SUM, 0, 0), rma_malformed::bad_atomic);
  r = atom(atomic, FI_SUM, 2, 16);
  r.iov[0].len = 12;
  r.h.iov_count = 2;
  r.iov.push_back({200, 4, 9});
  add("ranges of partial elements", r, rma_malformed::bad_atomic);
  r = atom(atomic, FI_SUM, 2, 16);
  r.iov[0].len = 8;
  add("ranges of fewer elements than the count", r, rma_malformed::bad_atomic);
  add("operands missing", atom(atomic, FI_SUM, 2, 8), rma_malformed::bad_length);
  add("compare values missing", atom(compare, FI_CSWAP, 2, 16), rma_malformed::bad_length);
  add("an atomic read with operands", atom(fetch, FI_ATOMIC_READ, 2, 16),
      rma_malformed::bad_length);
  for (const bad& c : cases) EXPECT_EQ(c.r.parse(), c.why) << c.what;
}

}  // namespace
}  // namespace weft::udp
