// SPDX-License-Identifier: MIT
// weft — reliable datagrams, the wire format, version 2.
//
// The reliability layer (rd_link.hpp) turns any datagram endpoint into a
// reliable, ordered one (FI_EP_RDM over udp). Every datagram it sends starts
// with a 32-byte `dgram` header; the first datagram of a message carries a
// 32-byte `msg` header after it, then payload. A datagram is one of:
//
//   data   seq is this datagram's number in the sender's stream to the
//          receiver (one stream per pair of endpoint incarnations, starting
//          at 0); the payload is the next `bytes` bytes of the message. The
//          datagram also acknowledges (ack, window) the reverse stream, so a
//          ping-pong needs no separate acknowledgement.
//   ack    nothing but the acknowledgement: every datagram of the reverse
//          stream numbered below `ack` has arrived, and the receiver takes
//          `window` more beyond it. A window of 0 says the receiver is alive
//          but has no room for datagram `ack` now (no receive, unexpected
//          data at its bound, a full CQ): the sender holds on and probes.
//          (Earlier weft versions never send 0, and read it as 1.)
//
// Incarnations. Each endpoint picks a random non-zero `epoch` when it opens.
// A receiver keeps the epoch of each peer's stream; a datagram with another
// epoch comes from a new incarnation at the same address (a restarted
// process on a reused port): the receiver starts that peer's stream afresh,
// and what it had in flight to the old incarnation fails. `to_epoch` names
// the incarnation the sender believes it talks to (0: not known yet); a
// datagram naming an older incarnation of the receiver is stale and dropped,
// so acknowledgements meant for a previous process never acknowledge ours.
//
// Endpoints and links. Epochs are per link: a link declared dead starts
// again under a new one. `instance` names the sending endpoint itself
// (random, non-zero, for its whole life), so a receiver can tell a new link
// of the same endpoint from another endpoint at the same address. A link
// made fresh (the sender had no state for the receiver: it never talked to
// it, or reclaimed an idle link to it) says so with flag_fresh on every
// datagram: the sender holds nothing the receiver sent that the receiver has
// not seen acknowledged. An endpoint reclaims a link only after it was idle
// both ways for longer than a peer's timeout, so the peer's retransmissions
// of anything acknowledged have ended. A receiver that sees a new epoch of
// the same instance with flag_fresh *renews* its link: both streams number
// from 0 again and what it had in flight goes again, nothing failed. A new
// epoch of another instance, or one without flag_fresh (the old link was
// declared dead), is a restart as above. (Version 1 had no instance and no
// flag_fresh; the two versions refuse each other's datagrams.)
//
// Sequence numbers are 32 bits and wrap; a receiver accepts only the next
// one in order (the window bounds what a sender has in flight, far below
// 2^31, so comparisons modulo 2^32 are unambiguous).
//
// All integers are little-endian (the only hosts weft builds for; checked
// below), so two hosts of one architecture interoperate.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace weft::util::rd {

static_assert(std::endian::native == std::endian::little,
              "the reliable-datagram wire format is little-endian");

inline constexpr uint8_t magic = 0xd7;  // first byte of every datagram
inline constexpr uint8_t version = 2;

enum class kind : uint8_t { data = 1, ack = 2 };

// dgram::flags
inline constexpr uint8_t flag_first = 1;  // the first datagram of a message: a msg header follows
inline constexpr uint8_t flag_last = 2;   // the last datagram of a message
inline constexpr uint8_t flag_fresh = 4;  // the sender's link began fresh (any kind; see above)
inline constexpr uint8_t flags_known = flag_first | flag_last | flag_fresh;

struct dgram {
  uint8_t magic;       // rd::magic
  uint8_t version;     // rd::version
  uint8_t kind;        // rd::kind
  uint8_t flags;       // flag_first / flag_last (data only); flag_fresh
  uint32_t epoch;      // the sender's incarnation, never 0
  uint32_t to_epoch;   // the receiver's incarnation as the sender knows it, 0: unknown
  uint32_t seq;        // data: this datagram's number; ack: 0
  uint32_t ack;        // the next number the sender expects on the reverse stream
  uint32_t window;     // datagrams the sender takes beyond `ack`; 0: none now (held)
  uint32_t bytes;      // payload bytes in this datagram (after the msg header, if any)
  uint32_t instance;   // the sending endpoint, never 0
};
static_assert(sizeof(dgram) == 32 && std::is_standard_layout_v<dgram>);

// What a message is, for the provider above (op values are its own).
// rx_index and name_port serve scalable endpoints (fi_endpoint(3)); both
// were reserved bytes before session 20, and a receiver of then refuses a
// datagram that sets them (reserved_set), as it should: it could not tell
// what they mean. A plain endpoint sends both as 0, as before.
struct msg {
  uint8_t op;          // the provider's operation code
  uint8_t rx_index;    // the receiver's receive context the sender means; 0: an endpoint
  uint16_t name_port;  // the port the sender is known by; 0: its datagrams' source port
                       // (a transmit context sends from a socket of its own and is known
                       // by its scalable endpoint's address)
  uint8_t reserved[4];
  uint64_t len;        // payload bytes of the whole message
  uint64_t tag;
  uint64_t data;       // remote CQ data
};
static_assert(sizeof(msg) == 32 && std::is_standard_layout_v<msg>);
static_assert(offsetof(msg, rx_index) == 1 && offsetof(msg, name_port) == 2 &&
              offsetof(msg, reserved) == 4 && offsetof(msg, len) == 8);

// A parsed datagram. Pointers point into the caller's buffer.
struct view {
  dgram h;
  msg m;                      // valid when h.flags & flag_first
  const std::byte* payload;   // h.bytes bytes
};

// Why a datagram was refused; `none` for a well-formed one.
enum class malformed : uint8_t {
  none,
  short_header,      // fewer bytes than a dgram header
  bad_magic,
  bad_version,
  bad_kind,
  bad_flags,         // unknown flag bits, or message flags on an ack
  zero_epoch,
  zero_instance,
  bad_length,        // `bytes` does not match the datagram's size
  ack_with_payload,
  reserved_set,
};
const char* describe(malformed m) noexcept;

// Checks everything the header alone can say; the link checks the numbers
// against its state (rd_link.hpp).
inline malformed parse(const void* buf, size_t n, view& out) noexcept {
  if (n < sizeof(dgram)) return malformed::short_header;
  std::memcpy(&out.h, buf, sizeof(dgram));
  const dgram& h = out.h;
  if (h.magic != magic) return malformed::bad_magic;
  if (h.version != version) return malformed::bad_version;
  if (h.kind != uint8_t(kind::data) && h.kind != uint8_t(kind::ack)) return malformed::bad_kind;
  if (h.flags & ~flags_known) return malformed::bad_flags;
  if (h.epoch == 0) return malformed::zero_epoch;
  if (h.instance == 0) return malformed::zero_instance;
  size_t head = sizeof(dgram);
  if (h.kind == uint8_t(kind::ack)) {
    if (h.flags & ~flag_fresh) return malformed::bad_flags;
    if (h.bytes || n != head) return malformed::ack_with_payload;
    out.payload = nullptr;
    return malformed::none;
  }
  if (h.flags & flag_first) {
    if (n < head + sizeof(msg)) return malformed::bad_length;
    std::memcpy(&out.m, static_cast<const std::byte*>(buf) + head, sizeof(msg));
    head += sizeof(msg);
    for (uint8_t r : out.m.reserved)
      if (r) return malformed::reserved_set;
    if (h.bytes > out.m.len) return malformed::bad_length;
    if ((h.flags & flag_last) && h.bytes != out.m.len) return malformed::bad_length;
  }
  if (n - head != h.bytes) return malformed::bad_length;
  out.payload = static_cast<const std::byte*>(buf) + head;
  return malformed::none;
}

// Numbers modulo 2^32: a before b.
inline bool seq_before(uint32_t a, uint32_t b) noexcept { return int32_t(a - b) < 0; }

}  // namespace weft::util::rd
