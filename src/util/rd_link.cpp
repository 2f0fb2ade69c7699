// SPDX-License-Identifier: MIT
// weft — reliable datagrams: the out-of-line parts of a link.
#include "util/rd_link.hpp"

#include <bit>
#include <new>

namespace weft::util::rd {

bool link::grow() noexcept {
  const uint32_t cap = std::bit_ceil(cfg_window_);
  ring_.reset(new (std::nothrow) flight[cap]);
  if (!ring_) return false;
  mask_ = cap - 1;
  return true;
}

// RFC 6298, in microseconds: the first sample sets the mean and half of it as
// the deviation; later ones move them by 1/8 and 1/4. The timeout is the mean
// plus four deviations, within [rto_min, rto_max].
void link::measured(uint64_t rtt_ns) noexcept {
  const uint32_t r = uint32_t(std::min<uint64_t>(rtt_ns / 1000 + 1, cfg_->rto_max_us));
  if (srtt_us_ == 0) {
    srtt_us_ = r;
    rttvar_us_ = r / 2;
  } else {
    const uint32_t diff = srtt_us_ > r ? srtt_us_ - r : r - srtt_us_;
    rttvar_us_ = (3 * rttvar_us_ + diff) / 4;
    srtt_us_ = (7 * srtt_us_ + r) / 8;
  }
  rto_us_ = std::clamp(srtt_us_ + 4 * rttvar_us_, cfg_->rto_min_us, cfg_->rto_max_us);
}

const char* describe(malformed m) noexcept {
  switch (m) {
    case malformed::none: return "well-formed";
    case malformed::short_header: return "shorter than a header";
    case malformed::bad_magic: return "not a weft reliable datagram";
    case malformed::bad_version: return "another protocol version";
    case malformed::bad_kind: return "an unknown kind";
    case malformed::bad_flags: return "unknown or misplaced flags";
    case malformed::zero_epoch: return "no sender incarnation";
    case malformed::zero_instance: return "no sending endpoint";
    case malformed::bad_length: return "a payload length that does not match";
    case malformed::ack_with_payload: return "an acknowledgement with payload";
    case malformed::reserved_set: return "reserved bits set";
  }
  return "unknown";
}

}  // namespace weft::util::rd
