// SPDX-License-Identifier: MIT
// weft — libFuzzer target for the tcp frame reader (prov/tcp/frame).
//
// Input: 4 control bytes, then the byte stream a peer sends. The control
// bytes pick the reader's limits and seed the generator that splits the
// stream into socket-sized chunks and decides, per payload piece, whether it
// is copied to a target, received directly into it (recv_window), or
// discarded. Checked on every event, beyond "no crash, no UB" (ASan, UBSan):
//   - a reported frame passes validate(), its sizes are within the caps, and
//     re-encoding it with the builder gives a header that parses back to the
//     same frame (the reader and the builder agree on the format);
//   - payload_left never exceeds the frame's payload_len, and every `done`
//     comes after exactly payload_len payload bytes;
//   - the reader never consumes more than it is given, and makes progress.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "prov/tcp/frame.hpp"

using namespace weft::tcp;
using status = frame_reader::status;

namespace {

#define FUZZ_CHECK(c) \
  do {                \
    if (!(c)) __builtin_trap(); \
  } while (0)

struct rng {
  uint32_t s;
  uint32_t next() {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    return s;
  }
};

alignas(64) std::byte scratch[1 << 16];

frame_limits pick_limits(uint8_t c) {
  frame_limits lim;
  static constexpr uint32_t payload_caps[] = {0, 64, 4096, 1u << 30};
  lim.max_payload = payload_caps[c & 3];
  lim.max_rma_iov = static_cast<uint8_t>(1 + ((c >> 2) & 3));
  lim.max_cm_data = (c & 0x10) ? 32 : proto::cm_data_max;
  return lim;
}

// The builder's encoding of f parses back to f.
void check_reencode(const frame& f, const frame_limits& lim) {
  std::byte hdr[proto::max_hdr_len];
  size_t n = build_header(f, hdr);
  FUZZ_CHECK(n >= sizeof(proto::header) && n <= f.hdr_len);
  frame_reader again(lim);
  auto r = again.feed(hdr, n);
  FUZZ_CHECK(r.st == status::header && r.used == n);
  frame want = f;
  want.hdr_len = static_cast<uint16_t>(n);
  FUZZ_CHECK(again.current() == want);
}

void on_header(const frame& f, const frame_limits& lim) {
  FUZZ_CHECK(f.payload_len <= lim.max_payload);
  FUZZ_CHECK(f.hdr_len >= sizeof(proto::header) && f.hdr_len <= proto::max_hdr_len);
  FUZZ_CHECK(f.iov_count <= lim.max_rma_iov);
  // RMA and atomic sizes (what a read asks for, what an atomic touches) are
  // capped like payloads.
  FUZZ_CHECK(f.rma_len <= lim.max_payload);
  FUZZ_CHECK(validate(f, lim) == frame_error::none);
  if (f.op == proto::op::cm_req || f.op == proto::op::cm_resp)
    FUZZ_CHECK(f.payload_len <= lim.max_cm_data);
  check_reencode(f, lim);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint8_t ctl[4] = {};
  std::memcpy(ctl, data, size < 4 ? size : 4);
  const uint8_t* in = size < 4 ? data + size : data + 4;
  size_t len = size < 4 ? 0 : size - 4;

  frame_limits lim = pick_limits(ctl[0]);
  rng g{(uint32_t{ctl[1]} << 16 | uint32_t{ctl[2]} << 8 | ctl[3]) | 1u};
  frame_reader r(lim);

  uint64_t placed = 0;  // payload bytes of the current frame
  uint32_t payload_len = 0;
  size_t pos = 0;

  auto direct = [&] {
    uint32_t left = r.payload_left();
    FUZZ_CHECK(left > 0 && left <= payload_len && placed + left == payload_len);
    size_t piece = 1 + g.next() % (sizeof scratch);
    if (piece > left) piece = left;
    if (g.next() % 4 == 0) {
      FUZZ_CHECK(r.discard(piece));
    } else {
      size_t off = g.next() % (sizeof scratch - piece + 1);
      FUZZ_CHECK(r.set_target(scratch + off, piece));
    }
  };
  // Returns false when the reader failed.
  auto handle = [&](status st) {
    switch (st) {
      case status::header:
        on_header(r.current(), lim);
        payload_len = r.current().payload_len;
        placed = 0;
        FUZZ_CHECK(r.payload_left() == payload_len);
        if (payload_len) direct();
        return true;
      case status::payload:
        placed = payload_len - r.payload_left();
        direct();
        return true;
      case status::done:
        FUZZ_CHECK(r.payload_left() == 0);
        return true;
      case status::more:
        FUZZ_CHECK(r.payload_left() <= payload_len);
        return true;
      case status::error:
        FUZZ_CHECK(r.error() != frame_error::none);
        return false;
    }
    return false;
  };

  bool ok = true;
  while (ok && pos < len) {
    size_t chunk = (g.next() % 8 == 0) ? len - pos : 1 + g.next() % 300;
    if (chunk > len - pos) chunk = len - pos;
    const uint8_t* c = in + pos;
    pos += chunk;
    // Consume the chunk; each feed either consumes bytes or reports an event.
    for (unsigned spins = 0; ok && chunk > 0; ++spins) {
      FUZZ_CHECK(spins < 4 * 1024 * 1024);
      auto w = r.recv_window();
      if (!w.empty() && g.next() % 2) {
        size_t n = w.size() < chunk ? w.size() : chunk;
        std::memcpy(w.data(), c, n);
        c += n;
        chunk -= n;
        ok = handle(r.recv_commit(n));
        continue;
      }
      auto res = r.feed(c, chunk);
      FUZZ_CHECK(res.used <= chunk);
      c += res.used;
      chunk -= res.used;
      ok = handle(res.st);
    }
  }
  if (ok) {
    // A frame without payload reports done on the next feed.
    auto res = r.feed(nullptr, 0);
    FUZZ_CHECK(res.used == 0);
    handle(res.st);
  }
  bool boundary = r.at_boundary();
  frame_error e = r.end_of_stream();
  if (ok) FUZZ_CHECK((e == frame_error::none) == boundary);
  if (!ok) FUZZ_CHECK(e != frame_error::none && e != frame_error::truncated);
  return 0;
}
