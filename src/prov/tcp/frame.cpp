// SPDX-License-Identifier: MIT
// weft — tcp frame builder and reader.
#include "prov/tcp/frame.hpp"

#include <rdma/fi_domain.h>

#include <algorithm>
#include <array>

namespace weft::tcp {

using proto::op;

// The datatype sizes in proto.hpp follow enum fi_datatype's order.
static_assert(FI_INT8 == 0 && FI_UINT64 == 7 && FI_DOUBLE == 9 && FI_LONG_DOUBLE_COMPLEX == 13 &&
              FI_UINT128 == 15 && FI_FLOAT8_E5M2 == 19);
static_assert(proto::atomic_type_size(FI_LONG_DOUBLE) == sizeof(long double));
static_assert(proto::atomic_type_size(FI_FLOAT8_E5M2 + 1) == 0);
static_assert(FI_MIN == 0 && FI_BXOR == 9 && FI_ATOMIC_READ == 10 && FI_ATOMIC_WRITE == 11 &&
              FI_CSWAP == 12 && FI_MSWAP == 18);

namespace {

// What the payload of an op must be.
enum class pay : uint8_t {
  none,    // 0 bytes
  cm,      // <= max_cm_data
  data,    // <= max_payload
  rma,     // == sum of the iov lengths (rma_write)
  atomic,  // determined by count, datatype and op
};

struct op_info {
  bool known;
  bool iovs;          // followed by 1..max_rma_iov rma_iovs
  uint8_t ext;        // fixed extension bytes after the base header
  uint16_t flags;     // flag bits allowed
  pay payload;
};

constexpr std::array<op_info, 256> make_op_table() {
  std::array<op_info, 256> t{};
  auto set = [&t](op o, bool iovs, size_t ext, uint16_t flags, pay p) {
    t[static_cast<uint8_t>(o)] = {true, iovs, static_cast<uint8_t>(ext), flags, p};
  };
  using namespace proto;
  set(op::cm_req, false, sizeof(cm_ext), 0, pay::cm);
  set(op::cm_resp, false, sizeof(cm_ext), 0, pay::cm);
  set(op::hello, false, sizeof(hello_ext), 0, pay::none);
  set(op::shutdown, false, 0, 0, pay::none);
  set(op::msg, false, 0, flag_ack, pay::data);
  set(op::msg_data, false, sizeof(data_ext), flag_ack, pay::data);
  set(op::tagged, false, sizeof(tag_ext), flag_ack, pay::data);
  set(op::tagged_data, false, sizeof(tag_data_ext), flag_ack, pay::data);
  set(op::rma_write, true, sizeof(rma_ext), flag_ack | flag_cq_data, pay::rma);
  set(op::rma_read_req, true, sizeof(rma_ext), 0, pay::none);
  set(op::rma_read_resp, false, 0, 0, pay::data);
  set(op::atomic_write, true, sizeof(atomic_ext), flag_ack | flag_cq_data, pay::atomic);
  set(op::atomic_fetch, true, sizeof(atomic_ext), flag_cq_data, pay::atomic);
  set(op::atomic_compare, true, sizeof(atomic_ext), flag_cq_data, pay::atomic);
  set(op::atomic_resp, false, 0, 0, pay::data);
  set(op::ack, false, 0, 0, pay::none);
  set(op::error, false, sizeof(error_ext), 0, pay::none);
  return t;
}
constexpr auto op_table = make_op_table();

constexpr const op_info& info(op o) noexcept { return op_table[static_cast<uint8_t>(o)]; }

// Ops whose failure the target reports with an error frame.
constexpr bool is_request(uint8_t o) noexcept {
  switch (static_cast<op>(o)) {
    case op::msg:
    case op::msg_data:
    case op::tagged:
    case op::tagged_data:
    case op::rma_write:
    case op::rma_read_req:
    case op::atomic_write:
    case op::atomic_fetch:
    case op::atomic_compare:
      return true;
    default:
      return false;
  }
}

// Whether an fi_op may be used with the atomic request op (fi_atomic(3):
// the compare ops only with fi_compare_atomic, FI_ATOMIC_READ only fetching).
constexpr bool atomic_op_ok(op o, unsigned aop) noexcept {
  bool arith = aop <= FI_BXOR;
  switch (o) {
    case op::atomic_write:
      return arith || aop == FI_ATOMIC_WRITE;
    case op::atomic_fetch:
      return arith || aop == FI_ATOMIC_READ || aop == FI_ATOMIC_WRITE;
    case op::atomic_compare:
      return aop >= FI_CSWAP && aop <= FI_MSWAP;
    default:
      return false;
  }
}

template <class T>
T load(const std::byte* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class T>
void store(std::byte* p, const T& v) noexcept {
  std::memcpy(p, &v, sizeof v);
}

using check = frame_reader::check;

// The iov rules shared by RMA and atomic requests.
check check_iovs(const frame& f, const frame_limits& lim, uint64_t& total) noexcept {
  if (f.iov_count == 0 || f.iov_count > lim.max_rma_iov || f.iov_count > proto::max_rma_iov)
    return {frame_error::bad_iov_count, f.iov_count};
  total = 0;
  for (unsigned i = 0; i < f.iov_count; ++i) {
    uint64_t end;
    if (__builtin_add_overflow(f.iov[i].addr, f.iov[i].len, &end) ||
        __builtin_add_overflow(total, f.iov[i].len, &total))
      return {frame_error::bad_iov, i};
  }
  return {frame_error::none, 0};
}

check check_atomic(const frame& f, const frame_limits& lim, uint64_t total) noexcept {
  unsigned size = proto::atomic_type_size(f.datatype);
  if (size == 0) return {frame_error::bad_atomic, f.datatype};
  if (!atomic_op_ok(f.op, f.atomic_op)) return {frame_error::bad_atomic, f.atomic_op};
  if (f.atomic_count == 0) return {frame_error::bad_atomic, 0};
  // count < 2^32 and size <= 32: the products below fit in 64 bits.
  uint64_t bytes = uint64_t{f.atomic_count} * size;
  if (bytes > lim.max_payload) return {frame_error::payload_too_big, bytes};
  for (unsigned i = 0; i < f.iov_count; ++i)
    if (f.iov[i].len % size != 0) return {frame_error::bad_iov, i};
  if (total != bytes) return {frame_error::bad_iov, total};
  uint64_t expect = bytes;
  if (f.op == op::atomic_compare) expect = 2 * bytes;
  if (f.op == op::atomic_fetch && f.atomic_op == FI_ATOMIC_READ) expect = 0;
  if (f.payload_len != expect) return {frame_error::bad_payload_len, f.payload_len};
  return {frame_error::none, 0};
}

// Everything about a decoded frame except magic, version and header length.
check check_frame(const frame& f, const frame_limits& lim) noexcept {
  const op_info& oi = info(f.op);
  if (!oi.known) return {frame_error::bad_op, static_cast<uint8_t>(f.op)};
  if (f.flags & ~oi.flags) return {frame_error::bad_flags, f.flags};
  if (f.payload_len > lim.max_payload) return {frame_error::payload_too_big, f.payload_len};
  switch (oi.payload) {
    case pay::none:
      if (f.payload_len != 0) return {frame_error::bad_payload_len, f.payload_len};
      break;
    case pay::cm:
      if (f.payload_len > lim.max_cm_data || f.payload_len > proto::cm_data_max)
        return {frame_error::payload_too_big, f.payload_len};
      break;
    case pay::data:
    case pay::rma:
    case pay::atomic:
      break;
  }
  uint64_t total = 0;
  if (oi.iovs) {
    if (check c = check_iovs(f, lim, total); c.e != frame_error::none) return c;
  }
  switch (f.op) {
    case op::rma_write:
      if (total != f.payload_len) return {frame_error::bad_payload_len, f.payload_len};
      break;
    case op::rma_read_req:
      if (total > lim.max_payload) return {frame_error::payload_too_big, total};
      break;
    case op::atomic_write:
    case op::atomic_fetch:
    case op::atomic_compare:
      return check_atomic(f, lim, total);
    case op::cm_req:
      if (f.status != 0) return {frame_error::bad_field, static_cast<uint32_t>(f.status)};
      break;
    case op::cm_resp:
      if (f.status < 0) return {frame_error::bad_field, static_cast<uint32_t>(f.status)};
      break;
    case op::hello:
      if (f.addr_len != 6 && f.addr_len != 22) return {frame_error::bad_field, f.addr_len};
      break;
    case op::error:
      if (f.status <= 0) return {frame_error::bad_field, static_cast<uint32_t>(f.status)};
      if (!is_request(f.req_op)) return {frame_error::bad_field, f.req_op};
      break;
    default:
      break;
  }
  return {frame_error::none, 0};
}

}  // namespace

const char* to_string(frame_error e) noexcept {
  switch (e) {
    case frame_error::none: return "no error";
    case frame_error::bad_magic: return "bad magic";
    case frame_error::bad_version: return "unsupported protocol version";
    case frame_error::bad_op: return "unknown op";
    case frame_error::bad_flags: return "flags not allowed for the op";
    case frame_error::bad_hdr_len: return "bad header length";
    case frame_error::payload_too_big: return "size above the limit";
    case frame_error::bad_payload_len: return "payload length inconsistent with the op";
    case frame_error::bad_iov_count: return "bad iov count";
    case frame_error::bad_iov: return "bad iov";
    case frame_error::bad_atomic: return "bad atomic request";
    case frame_error::bad_field: return "field out of range";
    case frame_error::truncated: return "stream ended inside a frame";
  }
  return "unknown frame error";
}

size_t header_size(op o, unsigned iov_count) noexcept {
  const op_info& oi = info(o);
  if (!oi.known || iov_count > proto::max_rma_iov) return 0;
  return sizeof(proto::header) + oi.ext + (oi.iovs ? iov_count * sizeof(proto::rma_iov) : 0);
}

frame_error validate(const frame& f, const frame_limits& lim) noexcept {
  return check_frame(f, lim).e;
}

size_t build_header(const frame& f, std::span<std::byte> out) noexcept {
  const op_info& oi = info(f.op);
  if (!oi.known || f.iov_count > proto::max_rma_iov || f.addr_len > proto::hello_addr_max)
    return 0;
  size_t n = header_size(f.op, oi.iovs ? f.iov_count : 0);
  if (out.size() < n) return 0;
  std::byte* p = out.data();
  std::byte* ext = p + sizeof(proto::header);
  uint64_t cq_data = (f.flags & proto::flag_cq_data) ? f.cq_data : 0;
  switch (f.op) {
    case op::msg:
    case op::msg_data:
    case op::tagged:
    case op::tagged_data:
      return build_msg_header(p, f.op, f.flags, f.payload_len, f.msg_id, f.tag, f.cq_data);
    case op::cm_req:
    case op::cm_resp: {
      proto::cm_ext e{f.features, f.status, f.minor, {}};
      store(ext, e);
      if (f.op == op::cm_req && (f.features & proto::feature_local_stream)) {
        if (out.size() < n + sizeof(proto::local_ext)) return 0;
        store(ext + sizeof e, proto::local_ext{f.local_pid, f.local_fd, f.local_cookie});
        n += sizeof(proto::local_ext);
      }
      break;
    }
    case op::hello: {
      proto::hello_ext e{f.features, f.minor, f.addr_len, f.rx_index, {}};
      std::memcpy(e.addr, f.addr, f.addr_len);
      store(ext, e);
      break;
    }
    case op::rma_write:
    case op::rma_read_req: {
      proto::rma_ext e{cq_data, f.iov_count, {}};
      store(ext, e);
      break;
    }
    case op::atomic_write:
    case op::atomic_fetch:
    case op::atomic_compare: {
      proto::atomic_ext e{cq_data, f.atomic_count, f.datatype, f.atomic_op, f.iov_count, 0};
      store(ext, e);
      break;
    }
    case op::error: {
      proto::error_ext e{f.status, f.req_op, {}};
      store(ext, e);
      break;
    }
    default:
      break;
  }
  if (oi.iovs) std::memcpy(ext + oi.ext, f.iov, f.iov_count * sizeof(proto::rma_iov));
  proto::header h{proto::magic, proto::version,  static_cast<uint8_t>(f.op), f.flags,
                  static_cast<uint16_t>(n), f.payload_len, f.msg_id};
  store(p, h);
  return n;
}

// ---- reader ----

frame_reader::frame_reader(const frame_limits& lim) noexcept : lim_(lim) {
  lim_.max_rma_iov = std::min<uint8_t>(lim_.max_rma_iov, proto::max_rma_iov);
  lim_.max_cm_data = std::min<uint32_t>(lim_.max_cm_data, proto::cm_data_max);
  need_ = sizeof(proto::header);
}

frame_reader::result frame_reader::fail(frame_error e, uint64_t value, size_t used) noexcept {
  st_ = state::failed;
  err_ = e;
  err_value_ = value;
  dst_ = nullptr;
  dst_left_ = 0;
  return {status::error, used};
}

// The base header, before anything is sized from it. hdr_len is bounded
// here, so reading the rest of the header into hbuf_ cannot overflow it.
frame_reader::check frame_reader::check_base() noexcept {
  auto h = load<proto::header>(hbuf_);
  if (h.magic != proto::magic) return {frame_error::bad_magic, h.magic};
  if (h.version != proto::version) return {frame_error::bad_version, h.version};
  const op_info& oi = info(static_cast<op>(h.op));
  if (!oi.known) return {frame_error::bad_op, h.op};
  if (h.flags & ~oi.flags) return {frame_error::bad_flags, h.flags};
  // The iovs' share is checked once their count is known (decode_ext).
  size_t min = header_size(static_cast<op>(h.op), 0);
  if (h.hdr_len < min || h.hdr_len > proto::max_hdr_len) return {frame_error::bad_hdr_len, h.hdr_len};
  if (h.payload_len > lim_.max_payload) return {frame_error::payload_too_big, h.payload_len};
  f_ = frame{};
  f_.op = static_cast<op>(h.op);
  f_.flags = h.flags;
  f_.hdr_len = h.hdr_len;
  f_.payload_len = h.payload_len;
  f_.msg_id = h.msg_id;
  return {frame_error::none, 0};
}

// The extension, now that hdr_len bytes are in hbuf_ (hdr_len >= what the
// op's fixed part needs, checked by check_base).
frame_reader::check frame_reader::decode_ext() noexcept {
  const std::byte* ext = hbuf_ + sizeof(proto::header);
  const op_info& oi = info(f_.op);
  switch (f_.op) {
    case op::msg_data:
      f_.cq_data = load<proto::data_ext>(ext).cq_data;
      break;
    case op::tagged:
      f_.tag = load<proto::tag_ext>(ext).tag;
      break;
    case op::tagged_data: {
      auto e = load<proto::tag_data_ext>(ext);
      f_.tag = e.tag;
      f_.cq_data = e.cq_data;
      break;
    }
    case op::cm_req:
    case op::cm_resp: {
      auto e = load<proto::cm_ext>(ext);
      f_.features = e.features;
      f_.status = e.status;
      f_.minor = e.minor;
      // An offer without its extension is no offer (the bit alone is not).
      if (f_.op == op::cm_req && (e.features & proto::feature_local_stream)) {
        if (f_.hdr_len >= sizeof(proto::header) + sizeof e + sizeof(proto::local_ext)) {
          auto l = load<proto::local_ext>(ext + sizeof e);
          f_.local_pid = l.pid;
          f_.local_fd = l.fd;
          f_.local_cookie = l.cookie;
        } else {
          f_.features &= ~proto::feature_local_stream;
        }
      }
      break;
    }
    case op::hello: {
      auto e = load<proto::hello_ext>(ext);
      f_.features = e.features;
      f_.minor = e.minor;
      f_.addr_len = e.addr_len;
      f_.rx_index = e.rx_index;
      // Copied whole (fixed size); addr_len is checked by check_frame.
      std::memcpy(f_.addr, e.addr, sizeof f_.addr);
      break;
    }
    case op::rma_write:
    case op::rma_read_req: {
      auto e = load<proto::rma_ext>(ext);
      f_.cq_data = (f_.flags & proto::flag_cq_data) ? e.cq_data : 0;
      f_.iov_count = e.iov_count;
      break;
    }
    case op::atomic_write:
    case op::atomic_fetch:
    case op::atomic_compare: {
      auto e = load<proto::atomic_ext>(ext);
      f_.cq_data = (f_.flags & proto::flag_cq_data) ? e.cq_data : 0;
      f_.atomic_count = e.count;
      f_.datatype = e.datatype;
      f_.atomic_op = e.atomic_op;
      f_.iov_count = e.iov_count;
      break;
    }
    case op::error: {
      auto e = load<proto::error_ext>(ext);
      f_.status = e.error;
      f_.req_op = e.req_op;
      break;
    }
    default:
      break;
  }
  if (oi.iovs) {
    // The count decides how many iovs are read: bound it first.
    if (f_.iov_count == 0 || f_.iov_count > lim_.max_rma_iov)
      return {frame_error::bad_iov_count, f_.iov_count};
    if (f_.hdr_len < header_size(f_.op, f_.iov_count)) return {frame_error::bad_hdr_len, f_.hdr_len};
    std::memcpy(f_.iov, ext + oi.ext, f_.iov_count * sizeof(proto::rma_iov));
  }
  check c = check_frame(f_, lim_);
  if (c.e != frame_error::none) return c;
  // Canonical forms for the caller: no stale bytes past the address, and
  // the iov sum, which check_frame proved does not overflow.
  if (f_.op == op::hello) std::memset(f_.addr + f_.addr_len, 0, sizeof f_.addr - f_.addr_len);
  for (unsigned i = 0; i < f_.iov_count; ++i) f_.rma_len += f_.iov[i].len;
  return c;
}

frame_reader::result frame_reader::feed(const void* data, size_t len) noexcept {
  auto in = static_cast<const std::byte*>(data);
  size_t used = 0;
  for (;;) {
    switch (st_) {
      case state::failed:
        return {status::error, used};
      case state::complete:
        st_ = state::base;
        return {status::done, used};
      case state::base:
      case state::ext: {
        size_t n = std::min<size_t>(need_ - have_, len - used);
        if (n) std::memcpy(hbuf_ + have_, in + used, n);
        have_ = static_cast<uint16_t>(have_ + n);
        used += n;
        if (have_ < need_) return {status::more, used};
        if (st_ == state::base) {
          if (check c = check_base(); c.e != frame_error::none) return fail(c.e, c.value, used);
          st_ = state::ext;
          need_ = f_.hdr_len;
          if (have_ < need_) continue;
        }
        if (check c = decode_ext(); c.e != frame_error::none) return fail(c.e, c.value, used);
        have_ = 0;
        need_ = sizeof(proto::header);
        left_ = f_.payload_len;
        dst_ = nullptr;
        dst_left_ = 0;
        st_ = left_ ? state::payload : state::complete;
        return {status::header, used};
      }
      case state::payload: {
        if (dst_left_ == 0) return {status::payload, used};
        size_t n = std::min<size_t>(dst_left_, len - used);
        if (n == 0) return {status::more, used};
        if (dst_) std::memcpy(dst_, in + used, n);
        used += n;
        advance(n);
        if (left_ == 0) {
          st_ = state::base;
          return {status::done, used};
        }
        if (dst_left_ == 0) return {status::payload, used};
        return {status::more, used};
      }
    }
  }
}

void frame_reader::advance(size_t n) noexcept {
  if (dst_) dst_ += n;
  dst_left_ -= static_cast<uint32_t>(n);
  left_ -= static_cast<uint32_t>(n);
}

bool frame_reader::set_target(void* buf, size_t len) noexcept {
  if (st_ != state::payload || !buf || len == 0 || len > left_) return false;
  dst_ = static_cast<std::byte*>(buf);
  dst_left_ = static_cast<uint32_t>(len);
  return true;
}

bool frame_reader::discard(size_t len) noexcept {
  if (st_ != state::payload || len == 0 || len > left_) return false;
  dst_ = nullptr;
  dst_left_ = static_cast<uint32_t>(len);
  return true;
}

std::span<std::byte> frame_reader::recv_window() const noexcept {
  if (st_ != state::payload || !dst_) return {};
  return {dst_, dst_left_};
}

frame_reader::status frame_reader::recv_commit(size_t n) noexcept {
  if (st_ != state::payload || !dst_ || n > dst_left_) return status::error;
  advance(n);
  if (left_ == 0) {
    st_ = state::base;
    return status::done;
  }
  return dst_left_ == 0 ? status::payload : status::more;
}

bool frame_reader::at_boundary() const noexcept {
  return (st_ == state::base && have_ == 0) || st_ == state::complete;
}

frame_error frame_reader::end_of_stream() noexcept {
  if (st_ == state::failed) return err_;
  if (at_boundary()) return frame_error::none;
  uint64_t got = st_ == state::payload ? uint64_t{f_.hdr_len} + (f_.payload_len - left_) : have_;
  fail(frame_error::truncated, got, 0);
  return err_;
}

}  // namespace weft::tcp
