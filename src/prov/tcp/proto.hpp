// SPDX-License-Identifier: MIT
// weft — the tcp provider's wire format, version 1.
//
// A connection carries a stream of frames. Each frame is
//
//   base header (16 bytes) | op extension (0..240 bytes) | payload (0..2^32-1)
//
// and `hdr_len` in the base header counts the base plus the extension, so a
// frame occupies hdr_len + payload_len bytes of the stream. The extension's
// layout is a function of the op code alone; the table below lists it.
//
// Byte order: every integer field is little-endian on the wire. The structs
// below are copied to and from the stream with memcpy, which is only correct
// on a little-endian host; the static_assert on std::endian makes a port to a
// big-endian host fail to compile instead of silently speaking another
// protocol (the fix then is a byte swap in frame.cpp's load/store, the one
// place that touches wire bytes). IP addresses and ports inside the hello
// frame are the exception: they are AV-entry bytes (util/ip_codec.hpp), in
// network byte order, and are compared and copied as opaque bytes.
//
// Layout rules: every struct is trivially copyable, its fields ordered by
// size so that there is no implicit padding, and its size, alignment and
// field offsets are pinned by static_asserts. Fields named `reserved` are
// sent as zero and ignored on receipt.
//
// Versioning: the version byte is the protocol's major version. A frame with
// any other major version is a protocol error. Bytes 0..3 (magic, version,
// op) and the cm_req / cm_resp / hello op codes never change meaning, so any
// version can recognise another's connection request and refuse it. Minor
// versions (carried in cm_req, cm_resp and hello, with a feature mask) may
// only add: new ops, new flag bits, longer extensions (a receiver skips
// header bytes past what it knows, so hdr_len may exceed what the op needs).
// A peer uses a minor-version addition only after the handshake showed the
// other side has it; a receiver of version 1.0 rejects unknown ops and flags.
//
// Op table (payload rules are checked by the frame reader, frame.hpp):
//
//   op              ext after base                       payload
//   cm_req          cm_ext                16             CM private data, <= cm_data_max
//   cm_resp         cm_ext                16             CM private data, <= cm_data_max
//   hello           hello_ext             32             none
//   shutdown        -                      0             none
//   msg             -                      0             message
//   msg_data        data_ext               8             message
//   tagged          tag_ext                8             message
//   tagged_data     tag_data_ext          16             message
//   rma_write       rma_ext + n*rma_iov   16+24n         the data, = sum of iov lengths
//   rma_read_req    rma_ext + n*rma_iov   16+24n         none (sum of iov lengths is asked for)
//   rma_read_resp   -                      0             the data read
//   atomic_write    atomic_ext + n*rma_iov 16+24n        count operands
//   atomic_fetch    atomic_ext + n*rma_iov 16+24n        count operands (none for FI_ATOMIC_READ)
//   atomic_compare  atomic_ext + n*rma_iov 16+24n        count operands, then count compare values
//   atomic_resp     -                      0             the count values fetched
//   ack             -                      0             none
//   error           error_ext              8             none
//
// Responses (rma_read_resp, atomic_resp, ack, error) carry the request's
// msg_id. A sender numbers its requests per connection; ids are 32 bits and
// wrap, so a sender keeps fewer than 2^31 requests outstanding per peer.
//
// Delivery complete: a request sent with flag_ack is acknowledged by the
// target with an `ack` frame once its data is placed (in the matched receive
// buffer, in the target memory region, or the atomic applied), or answered
// by an `error` frame if placement failed (bad key, out-of-range access, no
// such operation). Reads and fetching atomics are acknowledged by their
// response and never carry flag_ack.
//
// Connection setup. FI_EP_MSG: the active side sends cm_req with the
// application's private data; the passive side answers cm_resp, status 0 to
// accept or a positive FI_E* code to refuse (FI_ECONNREFUSED from fi_reject,
// FI_ENOPROTOOPT for an unsupported minor version), with private data either
// way. A peer that speaks another major version fails the version check of
// the reader; the passive side then answers cm_resp(FI_ENOPROTOOPT) in its
// own version and closes. FI_EP_RDM: each side opens connections on demand
// and the first frame either way is `hello`, naming the sender's listening
// address; the passive side answers with its own hello, or with cm_resp
// carrying an error to refuse.
//
// Simultaneous connects (RDM): when two endpoints connect to each other at
// the same time, each holds an active and a passive connection to the same
// peer. Both compare the two listening addresses (hello_ext.addr, addr_len
// bytes, memcmp, a shorter address ordering first): the connection initiated
// by the endpoint with the LOWER address is kept. So the lower side keeps its
// active connection and closes its passive one; the higher side keeps its
// passive connection and closes its active one, after moving anything queued
// on it to the kept one. Equal addresses mean an endpoint connected to itself;
// then there is no conflict and both connections stay. The rule settles
// connections being set up: a hello that reaches the lower side while its
// own connection to that peer is already established (answered by the
// peer's hello) is answered with hello, not refused. The peer either lost
// that connection (it restarted; a crashed host sends no end of stream) or
// sent this hello before it took ours and closed this one. The new
// connection serves once the peer sends on it.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace weft::tcp::proto {

static_assert(std::endian::native == std::endian::little,
              "the tcp wire format is little-endian and is copied with memcpy");

inline constexpr uint16_t magic = 0x7477;  // bytes 'w' 't' on the wire
inline constexpr uint8_t version = 1;      // major
inline constexpr uint16_t minor_version = 2;

// Features of minor version 1 (cm_ext.features; cm_req offers, cm_resp
// accepts a subset of the offer).
// feature_local_stream: the two ends share a host and a user; the cm_req
// carries a local_ext after its cm_ext (hdr_len 48) naming a same-host
// stream (local_stream.hpp) the active side created. A cm_resp accepting
// it means the passive side attached to it; every frame after cm_resp, both
// ways, then goes through the stream, and the socket carries only wake
// bytes (any value, discarded) and the end of the connection.
inline constexpr uint32_t feature_local_stream = 1u << 0;

// Features of minor version 2 (hello_ext.features, and hello_ext.rx_index;
// a 1.1 receiver ignores both, as it ignores reserved bytes).
// feature_one_way: the sender is a transmit context of a scalable endpoint
// (fi_endpoint(3)). The connection carries only the sender's operations and
// their answers: the receiver takes what arrives, naming the sender by the
// hello's address (the scalable endpoint's), but never sends its own
// operations through it nor counts it in a simultaneous-connect tie-break,
// for the sender receives nothing else on it.
// hello_ext.rx_index (every 1.2 hello): the receive context of the peer
// the sender means, 0 for an endpoint. A scalable endpoint's receive
// context i listens on its endpoint's port + i; a passive side whose index
// differs (a context past the peer's count reached another listener)
// refuses with cm_resp(FI_ECONNREFUSED), so nothing is delivered to an
// endpoint the sender did not mean.
inline constexpr uint32_t feature_one_way = 1u << 1;

inline constexpr size_t max_hdr_len = 256;     // base + extension, upper bound
inline constexpr size_t cm_data_max = 256;     // FI_OPT_CM_DATA_SIZE
inline constexpr unsigned max_rma_iov = 4;     // iovs per RMA or atomic frame
inline constexpr size_t hello_addr_max = 24;   // an AV entry (6 or 22 bytes)

enum class op : uint8_t {
  // connection management: 0x0_
  cm_req = 0x01,
  cm_resp = 0x02,
  hello = 0x03,
  shutdown = 0x04,
  // two-sided messages: 0x1_
  msg = 0x10,
  msg_data = 0x11,
  tagged = 0x12,
  tagged_data = 0x13,
  // RMA: 0x2_
  rma_write = 0x20,
  rma_read_req = 0x21,
  rma_read_resp = 0x22,
  // atomics: 0x3_
  atomic_write = 0x30,
  atomic_fetch = 0x31,
  atomic_compare = 0x32,
  atomic_resp = 0x33,
  // completion responses: 0x4_
  ack = 0x40,
  error = 0x41,
};

// Flag bits of the base header. Which bits an op may carry is in frame.cpp's
// op table; anything else is a protocol error.
inline constexpr uint16_t flag_ack = 1u << 0;      // target sends ack after placement
inline constexpr uint16_t flag_cq_data = 1u << 1;  // ext's cq_data is valid (rma_write, atomics)
inline constexpr uint16_t flag_known = flag_ack | flag_cq_data;

// The base header: every frame starts with it. 16 bytes, so an untagged
// message costs 16 bytes of header, a tagged one 24 and a tagged one with
// remote CQ data 32.
struct header {
  uint16_t magic;        // 0: proto::magic
  uint8_t version;       // 2: proto::version
  uint8_t op;            // 3: proto::op
  uint16_t flags;        // 4: flag_*
  uint16_t hdr_len;      // 6: base + extension bytes
  uint32_t payload_len;  // 8: bytes after the header
  uint32_t msg_id;       // 12: request id, echoed by responses
};

// msg_data
struct data_ext {
  uint64_t cq_data;
};

// tagged
struct tag_ext {
  uint64_t tag;
};

// tagged_data
struct tag_data_ext {
  uint64_t tag;
  uint64_t cq_data;
};

// One target buffer of an RMA or atomic frame: a registered region's key,
// the address (virtual address or offset, per the domain's MR mode) and the
// length in bytes. Atomics use byte lengths too: elements * datatype size.
struct rma_iov {
  uint64_t addr;
  uint64_t len;
  uint64_t key;
  friend bool operator==(const rma_iov&, const rma_iov&) = default;
};

// rma_write, rma_read_req; followed by iov_count rma_iovs.
struct rma_ext {
  uint64_t cq_data;  // valid with flag_cq_data (rma_write only)
  uint8_t iov_count;  // 1..max_rma_iov
  uint8_t reserved[7];
};

// atomic_write, atomic_fetch, atomic_compare; followed by iov_count rma_iovs.
struct atomic_ext {
  uint64_t cq_data;  // valid with flag_cq_data
  uint32_t count;    // elements, >= 1; the iov lengths add up to count * size
  uint8_t datatype;  // enum fi_datatype
  uint8_t atomic_op;  // enum fi_op
  uint8_t iov_count;  // 1..max_rma_iov
  uint8_t reserved;
};

// cm_req, cm_resp
struct cm_ext {
  uint32_t features;  // feature bits offered (req) / accepted (resp); none in 1.0
  int32_t status;     // cm_resp: 0 accepted, else a positive FI_E* code; req: 0
  uint16_t minor;     // sender's minor version (resp: the one agreed on)
  uint8_t reserved[6];
};

// cm_req with feature_local_stream, after cm_ext: process `pid`'s
// descriptor `fd` is the stream's memfd, whose header holds `cookie`.
struct local_ext {
  uint32_t pid;
  int32_t fd;
  uint64_t cookie;
};

// hello (RDM)
struct hello_ext {
  uint32_t features;
  uint16_t minor;
  uint8_t addr_len;  // 6 (IPv4 AV entry) or 22 (IPv6 AV entry)
  uint8_t rx_index;  // minor 2: the peer's receive context meant (0 before)
  uint8_t addr[hello_addr_max];  // sender's listening address, network order
};

// error: a request failed at the target.
struct error_ext {
  int32_t error;   // positive FI_E* code (FI_EINVAL, FI_EKEYREJECTED, FI_EACCES ...)
  uint8_t req_op;  // the op of the failed request (msg_id names it)
  uint8_t reserved[3];
};

// Layout pins: sizes, alignments and offsets are the protocol.
template <class T>
constexpr bool wire_struct = std::is_trivially_copyable_v<T> && std::is_standard_layout_v<T>;

static_assert(wire_struct<header> && sizeof(header) == 16 && alignof(header) == 4);
static_assert(offsetof(header, magic) == 0 && offsetof(header, version) == 2 &&
              offsetof(header, op) == 3 && offsetof(header, flags) == 4 &&
              offsetof(header, hdr_len) == 6 && offsetof(header, payload_len) == 8 &&
              offsetof(header, msg_id) == 12);
static_assert(wire_struct<data_ext> && sizeof(data_ext) == 8 && alignof(data_ext) == 8);
static_assert(wire_struct<tag_ext> && sizeof(tag_ext) == 8 && alignof(tag_ext) == 8);
static_assert(wire_struct<tag_data_ext> && sizeof(tag_data_ext) == 16);
static_assert(offsetof(tag_data_ext, tag) == 0 && offsetof(tag_data_ext, cq_data) == 8);
static_assert(wire_struct<rma_iov> && sizeof(rma_iov) == 24 && alignof(rma_iov) == 8);
static_assert(offsetof(rma_iov, addr) == 0 && offsetof(rma_iov, len) == 8 &&
              offsetof(rma_iov, key) == 16);
static_assert(wire_struct<rma_ext> && sizeof(rma_ext) == 16 && alignof(rma_ext) == 8);
static_assert(offsetof(rma_ext, cq_data) == 0 && offsetof(rma_ext, iov_count) == 8);
static_assert(wire_struct<atomic_ext> && sizeof(atomic_ext) == 16 && alignof(atomic_ext) == 8);
static_assert(offsetof(atomic_ext, cq_data) == 0 && offsetof(atomic_ext, count) == 8 &&
              offsetof(atomic_ext, datatype) == 12 && offsetof(atomic_ext, atomic_op) == 13 &&
              offsetof(atomic_ext, iov_count) == 14);
static_assert(wire_struct<cm_ext> && sizeof(cm_ext) == 16 && alignof(cm_ext) == 4);
static_assert(wire_struct<local_ext> && sizeof(local_ext) == 16 && alignof(local_ext) == 8);
static_assert(offsetof(local_ext, pid) == 0 && offsetof(local_ext, fd) == 4 &&
              offsetof(local_ext, cookie) == 8);
static_assert(offsetof(cm_ext, features) == 0 && offsetof(cm_ext, status) == 4 &&
              offsetof(cm_ext, minor) == 8);
static_assert(wire_struct<hello_ext> && sizeof(hello_ext) == 32 && alignof(hello_ext) == 4);
static_assert(offsetof(hello_ext, features) == 0 && offsetof(hello_ext, minor) == 4 &&
              offsetof(hello_ext, addr_len) == 6 && offsetof(hello_ext, rx_index) == 7 &&
              offsetof(hello_ext, addr) == 8);
static_assert(wire_struct<error_ext> && sizeof(error_ext) == 8 && alignof(error_ext) == 4);
static_assert(offsetof(error_ext, error) == 0 && offsetof(error_ext, req_op) == 4);

// The largest header this version builds: an atomic with max_rma_iov iovs.
inline constexpr size_t max_hdr_v1 = sizeof(header) + sizeof(atomic_ext) + max_rma_iov * sizeof(rma_iov);
static_assert(max_hdr_v1 == 128 && max_hdr_v1 <= max_hdr_len);
static_assert(sizeof(header) + sizeof(hello_ext) <= max_hdr_len);
static_assert(max_hdr_len <= UINT16_MAX);

// Wire size of one element of an atomic datatype (enum fi_datatype value),
// 0 for a value that is not an atomic datatype. Long double travels as the
// 16 bytes x86-64 stores it in; both ends must share the format (fi_atomic(3)).
constexpr unsigned atomic_type_size(unsigned datatype) noexcept {
  constexpr uint8_t sizes[] = {
      1, 1,    // FI_INT8, FI_UINT8
      2, 2,    // FI_INT16, FI_UINT16
      4, 4,    // FI_INT32, FI_UINT32
      8, 8,    // FI_INT64, FI_UINT64
      4, 8,    // FI_FLOAT, FI_DOUBLE
      8, 16,   // FI_FLOAT_COMPLEX, FI_DOUBLE_COMPLEX
      16, 32,  // FI_LONG_DOUBLE, FI_LONG_DOUBLE_COMPLEX
      16, 16,  // FI_INT128, FI_UINT128
      2, 2,    // FI_FLOAT16, FI_BFLOAT16
      1, 1,    // FI_FLOAT8_E4M3, FI_FLOAT8_E5M2
  };
  return datatype < sizeof sizes ? sizes[datatype] : 0;
}
inline constexpr unsigned atomic_type_size_max = 32;

}  // namespace weft::tcp::proto
