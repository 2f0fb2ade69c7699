// SPDX-License-Identifier: MIT
// weft — the udp RDM endpoint's messages over reliable datagrams: what its
// rd::msg op codes mean, and the RMA header (rd protocol version 1).
//
// Every message is an rd::msg header (util/rd_proto.hpp: op, len, tag,
// data) and `len` payload bytes, which the link splits into datagrams of
// the path's size and delivers once, in order, per pair of endpoints.
//
//   op                  tag            data             payload
//   msg            1    0              remote CQ data*  the message
//   tagged         2    the tag        remote CQ data*  the message
//   rma_write      3    request id     remote CQ data*  rma_hdr, n rma_iov, the data
//                                                       (the sum of the iov lengths)
//   rma_read       4    request id     0                rma_hdr, n rma_iov
//   atomic         5    request id     remote CQ data*  rma_hdr, n rma_iov, count operands
//   atomic_fetch   6    request id     remote CQ data*  rma_hdr, n rma_iov, count operands
//                                                       (none for FI_ATOMIC_READ)
//   atomic_compare 7    request id     remote CQ data*  rma_hdr, n rma_iov, count operands,
//                                                       then count compare values
//   rma_answer     8    request id     status           the data read or the values
//                                                       fetched (none on error, none
//                                                       for rma_write and atomic)
//   * when the op byte has rdm_op_with_data (0x80) set; 0 otherwise.
//
// RMA and atomics are requests: the initiator names the target memory (key,
// address, length per rma_iov); the target checks every range against its
// registrations when the first datagram arrives, writes each in-order
// datagram of an rma_write straight into the registered memory, stages an
// atomic's operands, and at the message's last datagram completes the
// operation and answers. The rma_hdr and its rma_iovs must lie wholly in a
// message's first datagram (the sender's datagrams carry at least
// rdm_min_seg payload bytes, more than rma_hdr_max); a target drops a
// request that breaks any rule below as malformed, and answers nothing.
//
// The answer (rma_answer) is a message of its own, target to initiator, on
// the target's ordered stream to the initiator: acknowledgements belong to
// datagrams and cannot say whether an operation succeeded, and a read's data
// must travel anyway. `tag` echoes the request id (the initiator's own
// number, opaque to the target); `data` is 0 or the positive FI_E* code of
// the refusal (FI_EACCES for a key, range or right the registrations do not
// grant, FI_EOPNOTSUPP for an atomic the target does not execute). Reads,
// fetching and compare atomics are always answered; rma_write and atomic
// only with rma_flag_answer (every call form except the fi_inject_* ones,
// which complete when the target has acknowledged the last datagram). A
// refused write's data is dropped, its memory untouched.
//
// All integers are little-endian (rd_proto.hpp).
#pragma once

#include "util/rd_proto.hpp"

#include <rdma/fi_domain.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace weft::udp {

// The rd::msg op codes of this provider.
enum class rdm_op : uint8_t {
  msg = 1,
  tagged = 2,
  rma_write = 3,
  rma_read = 4,
  atomic = 5,
  atomic_fetch = 6,
  atomic_compare = 7,
  rma_answer = 8,
};
inline constexpr uint8_t rdm_op_with_data = 0x80;  // remote CQ data in msg.data

inline constexpr size_t rdm_max_rma_iov = 4;    // rma_iovs per request (rma_iov_limit)
inline constexpr size_t rdm_atomic_max = 256;   // operand bytes per atomic (as tcp)
inline constexpr uint64_t rdm_rma_max = uint64_t{1} << 30;  // bytes per RMA (max_msg_size)

// rma_hdr::flags
inline constexpr uint8_t rma_flag_answer = 1;  // the initiator waits for an rma_answer

// The start of every request's payload.
struct rma_hdr {
  uint8_t iov_count;  // rma_iovs that follow, 1..rdm_max_rma_iov
  uint8_t flags;      // rma_flag_answer
  uint8_t datatype;   // atomics: enum fi_datatype; else 0
  uint8_t atomic_op;  // atomics: enum fi_op; else 0
  uint32_t count;     // atomics: elements, >= 1; else 0
};
// One target range: a registration's key, the address (virtual address or
// offset, per the domain's mr_mode) and the length in bytes (atomics:
// elements times the datatype's size).
struct rma_iov {
  uint64_t addr;
  uint64_t len;
  uint64_t key;
};
static_assert(std::is_trivially_copyable_v<rma_hdr> && sizeof(rma_hdr) == 8);
static_assert(offsetof(rma_hdr, iov_count) == 0 && offsetof(rma_hdr, flags) == 1 &&
              offsetof(rma_hdr, datatype) == 2 && offsetof(rma_hdr, atomic_op) == 3 &&
              offsetof(rma_hdr, count) == 4);
static_assert(std::is_trivially_copyable_v<rma_iov> && sizeof(rma_iov) == 24);
static_assert(offsetof(rma_iov, addr) == 0 && offsetof(rma_iov, len) == 8 &&
              offsetof(rma_iov, key) == 16);
inline constexpr size_t rma_hdr_max = sizeof(rma_hdr) + rdm_max_rma_iov * sizeof(rma_iov);
static_assert(rma_hdr_max == 104);

// The least payload a first datagram carries (the path's MTU notwithstanding:
// below it IP fragments): the whole RMA header fits.
inline constexpr size_t rdm_min_seg = 512;
static_assert(rdm_min_seg >= rma_hdr_max);

// Wire size of one element of an atomic datatype (enum fi_datatype value),
// 0 for one weft does not carry (fi_atomic(3): both ends share the format).
constexpr unsigned rdm_atomic_size(unsigned datatype) noexcept {
  constexpr uint8_t sizes[] = {
      1, 1, 2, 2, 4, 4, 8, 8,  // FI_INT8 .. FI_UINT64
      4, 8, 8, 16,             // FI_FLOAT, FI_DOUBLE, FI_FLOAT_COMPLEX, FI_DOUBLE_COMPLEX
      16, 32, 16, 16,          // FI_LONG_DOUBLE(_COMPLEX), FI_INT128, FI_UINT128
  };
  static_assert(sizeof sizes == FI_UINT128 + 1);
  return datatype < sizeof sizes ? sizes[datatype] : 0;
}

inline constexpr bool is_request(uint8_t op) noexcept {
  return op >= uint8_t(rdm_op::rma_write) && op <= uint8_t(rdm_op::atomic_compare);
}
inline constexpr bool is_atomic(uint8_t op) noexcept {
  return op >= uint8_t(rdm_op::atomic) && op <= uint8_t(rdm_op::atomic_compare);
}

// A request's header as parsed from its first datagram.
struct rma_request {
  rma_hdr h;
  rma_iov iov[rdm_max_rma_iov];
  size_t hdr_len;      // rma_hdr and its rma_iovs
  uint64_t data_len;   // payload after them: write data, operands (and compare values)
  uint64_t total;      // sum of the iov lengths
  unsigned elem;       // atomics: bytes per element
};

enum class rma_malformed : uint8_t {
  none,
  short_header,     // the first datagram does not hold rma_hdr and its rma_iovs
  bad_iov_count,
  bad_flags,
  bad_range,        // an address range that wraps, or lengths whose sum does
  too_long,         // more bytes than one operation moves
  bad_length,       // the payload does not match what the header describes
  bad_atomic,       // unknown datatype, zero count, or ranges not in whole elements
  reserved_set,     // atomic fields on an RMA request
  no_answer,        // a read or fetching atomic that asks for no answer
};
const char* describe(rma_malformed m) noexcept;

// Checks a request's first datagram: `op` without rdm_op_with_data, `m`
// its message header, `payload`/`bytes` the datagram's payload. Everything
// the header alone can say; keys, ranges and rights are the target's MR
// map's to check.
inline rma_malformed parse_request(uint8_t op, const util::rd::msg& m, const std::byte* payload,
                                   size_t bytes, rma_request& out) noexcept {
  if (bytes < sizeof(rma_hdr)) return rma_malformed::short_header;
  std::memcpy(&out.h, payload, sizeof(rma_hdr));
  const rma_hdr& h = out.h;
  if (h.iov_count == 0 || h.iov_count > rdm_max_rma_iov) return rma_malformed::bad_iov_count;
  out.hdr_len = sizeof(rma_hdr) + h.iov_count * sizeof(rma_iov);
  if (bytes < out.hdr_len) return rma_malformed::short_header;
  if (h.flags & ~rma_flag_answer) return rma_malformed::bad_flags;
  std::memcpy(out.iov, payload + sizeof(rma_hdr), h.iov_count * sizeof(rma_iov));
  if (m.len < out.hdr_len) return rma_malformed::bad_length;
  out.data_len = m.len - out.hdr_len;
  out.total = 0;
  for (unsigned i = 0; i < h.iov_count; ++i) {
    uint64_t end;
    if (__builtin_add_overflow(out.iov[i].addr, out.iov[i].len, &end) ||
        __builtin_add_overflow(out.total, out.iov[i].len, &out.total))
      return rma_malformed::bad_range;
  }
  out.elem = 0;
  if (!is_atomic(op)) {
    if (h.datatype || h.atomic_op || h.count) return rma_malformed::reserved_set;
    if (out.total > rdm_rma_max) return rma_malformed::too_long;
    if (op == uint8_t(rdm_op::rma_read)) {
      if (!(h.flags & rma_flag_answer)) return rma_malformed::no_answer;
      if (out.data_len != 0) return rma_malformed::bad_length;
    } else if (out.data_len != out.total) {
      return rma_malformed::bad_length;
    }
    return rma_malformed::none;
  }
  out.elem = rdm_atomic_size(h.datatype);
  if (!out.elem || !h.count) return rma_malformed::bad_atomic;
  const uint64_t bytes_needed = uint64_t{h.count} * out.elem;  // < 2^37: no overflow
  if (bytes_needed > rdm_atomic_max) return rma_malformed::too_long;
  for (unsigned i = 0; i < h.iov_count; ++i)
    if (out.iov[i].len % out.elem) return rma_malformed::bad_atomic;
  if (out.total != bytes_needed) return rma_malformed::bad_atomic;
  if (op != uint8_t(rdm_op::atomic) && !(h.flags & rma_flag_answer))
    return rma_malformed::no_answer;
  uint64_t expect = bytes_needed;
  if (op == uint8_t(rdm_op::atomic_compare)) expect = 2 * bytes_needed;
  if (op == uint8_t(rdm_op::atomic_fetch) && h.atomic_op == FI_ATOMIC_READ) expect = 0;
  if (out.data_len != expect) return rma_malformed::bad_length;
  return rma_malformed::none;
}

}  // namespace weft::udp
