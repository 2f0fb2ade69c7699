// SPDX-License-Identifier: MIT
// weft — tcp frames: the builder that writes headers and the reader that turns
// bytes from a socket into validated frames.
//
// The reader faces whatever the peer sends. It never allocates and never
// sizes anything from a received field before checking it: the header is
// accumulated into a fixed 256-byte buffer, the base header is validated
// (magic, version, op, flags, header length, payload length against the
// caps) before the rest of the header is read, and the extension is
// validated (iov counts, sums and address ranges with overflow checks,
// atomic counts and sizes) before the frame is reported. Payload bytes are
// never buffered by the reader: the caller says where each piece goes, so a
// matched receive has its data copied (or received) straight into the
// application's buffer.
//
// Driving the reader (one per connection):
//
//   auto r = reader.feed(buf, n);       // bytes the caller read from the socket
//   switch (r.st) {                      // r.used bytes were consumed
//   case status::more:    read more from the socket, feed again
//   case status::header:  reader.current() is a validated frame; if it has a
//                         payload, direct it: set_target(ptr, len) for the
//                         next len bytes (e.g. one iov of the matched receive),
//                         or discard(len) / discard_rest(); feed the rest
//   case status::payload: the last target is full and payload remains: give
//                         the next target (or discard), feed the rest
//   case status::done:    the frame is complete (payload all placed); the
//                         next feed starts the next frame
//   case status::error:   protocol error (error(), error_value()): close
//   }
//
// Every frame, also one without payload, ends with exactly one `done`; a
// frame without payload reports it on the feed after its `header` (consuming
// nothing). current() stays valid until the next `header`.
//
// Direct receive: while a target is set and not full, recv_window() is the
// part of the target still to fill; the caller may recv() into it from the
// socket and report the bytes with recv_commit(n), skipping the copy.
//
// At end of stream call end_of_stream(): a frame cut short is an error.
#pragma once

#include "prov/tcp/proto.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace weft::tcp {

// Caps on what a peer may send; set per connection from the endpoint's
// attributes (max_msg_size, FI_OPT_CM_DATA_SIZE, rma_iov_limit).
struct frame_limits {
  uint32_t max_payload = 1u << 30;                   // bytes of one frame's payload
  uint32_t max_cm_data = proto::cm_data_max;         // private data of cm_req/cm_resp
  uint8_t max_rma_iov = proto::max_rma_iov;          // 1..proto::max_rma_iov
};

enum class frame_error : uint8_t {
  none,
  bad_magic,        // not a weft tcp stream (value: the magic)
  bad_version,      // another major version (value: the version byte)
  bad_op,           // unknown op code (value: op)
  bad_flags,        // flag bits the op may not carry (value: flags)
  bad_hdr_len,      // header length wrong for the op, or > max (value: hdr_len)
  payload_too_big,  // a payload or a read/atomic size above its cap (value: size)
  bad_payload_len,  // payload length inconsistent with the op (value: payload_len)
  bad_iov_count,    // RMA/atomic iov count 0 or above the limit (value: count)
  bad_iov,          // iov length sum overflows, addr + len wraps, misaligned (value: index)
  bad_atomic,       // unknown datatype, op not valid for the request, count 0 (value: op)
  bad_field,        // another field out of its range (value: the field)
  truncated,        // end of stream inside a frame (value: bytes of it received)
};
const char* to_string(frame_error e) noexcept;

// A decoded frame in host form; what the reader reports and what the builder
// encodes. Only the fields of the frame's op are meaningful (others are 0).
struct frame {
  proto::op op;
  uint16_t flags;
  uint16_t hdr_len;      // reader: as received; builder: ignored (computed)
  uint32_t payload_len;
  uint32_t msg_id;
  uint64_t tag;          // tagged, tagged_data
  uint64_t cq_data;      // msg_data, tagged_data; rma_write/atomics with flag_cq_data
  // rma_write, rma_read_req, atomic_write/fetch/compare
  uint8_t iov_count;
  proto::rma_iov iov[proto::max_rma_iov];
  uint64_t rma_len;      // reader: sum of the iov lengths
  // atomics
  uint8_t datatype;
  uint8_t atomic_op;
  uint32_t atomic_count;
  // cm_req, cm_resp, hello
  uint32_t features;
  uint16_t minor;
  // cm_resp: status (0 accepted); error: the positive FI_E* code
  int32_t status;
  uint8_t req_op;        // error: op of the failed request
  uint8_t addr_len;      // hello
  uint8_t rx_index;      // hello (proto::hello_ext::rx_index)
  uint8_t addr[proto::hello_addr_max];
  // cm_req with proto::feature_local_stream: the stream offered
  uint32_t local_pid;
  int32_t local_fd;
  uint64_t local_cookie;
  friend bool operator==(const frame&, const frame&) = default;
};

// Header bytes (base + extension) a frame of this op with iov_count iovs
// takes; 0 for an unknown op or too many iovs.
size_t header_size(proto::op op, unsigned iov_count = 0) noexcept;

// Checks a decoded frame against the protocol and the limits: the same rules
// the reader applies (except magic/version/hdr_len, which a decoded frame
// does not carry). The reader reports only frames for which this is none.
frame_error validate(const frame& f, const frame_limits& lim) noexcept;

// Writes the header of f (base + extension, hdr_len computed) into out and
// returns its length, ready as the first iovec of one writev with the
// payload; 0 if out is too small, the op unknown or a count exceeds the
// wire's maximum. It does not check the frame's semantics (use validate()).
size_t build_header(const frame& f, std::span<std::byte> out) noexcept;

// The small-message fast path: msg, msg_data, tagged, tagged_data into out
// (at least 32 bytes), without building a frame; returns the header length.
inline size_t build_msg_header(std::byte* out, proto::op op, uint16_t flags, uint32_t payload_len,
                               uint32_t msg_id, uint64_t tag, uint64_t cq_data) noexcept {
  proto::header h{proto::magic, proto::version, static_cast<uint8_t>(op), flags, 0, payload_len,
                  msg_id};
  size_t n = sizeof h;
  switch (op) {
    case proto::op::msg_data:
      std::memcpy(out + n, &cq_data, 8);
      n += 8;
      break;
    case proto::op::tagged:
      std::memcpy(out + n, &tag, 8);
      n += 8;
      break;
    case proto::op::tagged_data:
      std::memcpy(out + n, &tag, 8);
      std::memcpy(out + n + 8, &cq_data, 8);
      n += 16;
      break;
    default:
      break;
  }
  h.hdr_len = static_cast<uint16_t>(n);
  std::memcpy(out, &h, sizeof h);
  return n;
}

class frame_reader {
 public:
  enum class status : uint8_t { more, header, payload, done, error };
  // An error and the offending value (see frame_error), or none.
  struct check {
    frame_error e;
    uint64_t value;
  };
  struct result {
    status st;
    size_t used;  // input bytes consumed
  };

  explicit frame_reader(const frame_limits& lim = {}) noexcept;

  // Consumes bytes up to the next event; see the file comment.
  result feed(const void* data, size_t len) noexcept;
  result feed(std::span<const std::byte> in) noexcept { return feed(in.data(), in.size()); }

  // The frame of the last `header`.
  const frame& current() const noexcept { return f_; }
  // Payload bytes of the current frame not yet placed or discarded.
  uint32_t payload_left() const noexcept { return left_; }

  // The next len payload bytes go to buf (replacing any target not yet
  // full). False, and nothing changes, unless a payload is being read and
  // 0 < len <= payload_left() with buf non-null.
  bool set_target(void* buf, size_t len) noexcept;
  // The next len payload bytes are dropped; same conditions.
  bool discard(size_t len) noexcept;
  bool discard_rest() noexcept { return discard(left_); }

  // The unfilled part of the current target (empty when none or discarding).
  std::span<std::byte> recv_window() const noexcept;
  // The caller wrote n bytes at the start of recv_window() itself. Returns
  // done (payload complete), payload (target full, more to come) or more;
  // error, and nothing changes, if n exceeds the window (a caller bug).
  status recv_commit(size_t n) noexcept;

  // The stream ended: none at a frame boundary, truncated (and the reader
  // fails) inside a frame.
  frame_error end_of_stream() noexcept;

  frame_error error() const noexcept { return err_; }
  uint64_t error_value() const noexcept { return err_value_; }
  // No byte of a next frame is pending (a clean place to close).
  bool at_boundary() const noexcept;

 private:
  enum class state : uint8_t { base, ext, payload, complete, failed };

  result fail(frame_error e, uint64_t value, size_t used) noexcept;
  check check_base() noexcept;
  check decode_ext() noexcept;
  void advance(size_t n) noexcept;

  frame_limits lim_;
  state st_ = state::base;
  frame_error err_ = frame_error::none;
  uint64_t err_value_ = 0;
  uint16_t have_ = 0;  // header bytes accumulated
  uint16_t need_ = 0;  // header bytes wanted before the next step
  uint32_t left_ = 0;  // payload bytes left in the frame
  std::byte* dst_ = nullptr;  // current target; nullptr while discarding
  uint32_t dst_left_ = 0;     // bytes left in the target or to discard
  frame f_{};
  alignas(8) std::byte hbuf_[proto::max_hdr_len];
};

}  // namespace weft::tcp
