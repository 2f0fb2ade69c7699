// SPDX-License-Identifier: MIT
// weft — fi_tostr / fi_tostr_r: attributes, flags and enum values as text.
//
// Structures print as the indented "name: value" blocks of libfabric 1.17
// (what `fi_info -v` shows and scripts parse); nested attributes indent by
// four spaces, flag sets inside structures are bracketed ("[ A, B ]"), a
// missing string or attribute is "(null)". The name tables and the address
// formats live in tostr_names.cpp.
#include "core/tostr.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_trigger.h>
#include <rdma/providers/fi_log.h>

#include <cinttypes>
#include <cstdarg>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

#include "core/api.hpp"
#include "core/log.hpp"

#ifndef WEFT_VERSION
#define WEFT_VERSION "unknown"
#endif

namespace weft::core::tostr {
namespace {

// fi_tostr's per-thread buffer, the size libfabric uses: output that fits
// is identical, longer output is cut at the same place.
constexpr size_t tostr_buffer_size = 8192;

template <class T>
T load(const void* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// An enum field as the int it is in memory: C callers store any value
// there, and loading one outside the enumerators through the C++ enum type
// is undefined.
template <class E>
int64_t raw(const E& field) noexcept {
  static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(int));
  return load<int>(&field);
}

// One structure's block: its header at `depth`, its "name: value" lines one
// level deeper (four spaces per level).
class block {
 public:
  block(text_out& out, int depth) noexcept : out_(out), depth_(depth) {}

  void header(const char* name) noexcept { out_.putf("%*s%s:\n", 4 * depth_, "", name); }
  void null_header(const char* name) noexcept {
    out_.putf("%*s%s: (null)\n", 4 * depth_, "", name);
  }

  // Checked like printf: the arguments must match fmt.
  __attribute__((format(printf, 3, 4))) void line(const char* name, const char* fmt, ...) noexcept {
    out_.putf("%*s%s: ", 4 * (depth_ + 1), "", name);
    va_list ap;
    va_start(ap, fmt);
    out_.vputf(fmt, ap);
    va_end(ap);
    out_.put("\n");
  }
  void str(const char* name, const char* s) noexcept { line(name, "%s", s ? s : "(null)"); }
  void size(const char* name, size_t v) noexcept { line(name, "%zu", v); }
  void name(const char* name, enum_set set, int64_t v) noexcept {
    line(name, "%s", enum_name(set, v));
  }
  void flags(const char* name, flag_set set, uint64_t v, api_names n = api_names::v1) noexcept {
    open_field(name);
    put_flags(out_, set, v, n);
    out_.put(" ]\n");
  }
  void comp_order(uint64_t v) noexcept {
    open_field("comp_order");
    put_comp_order(out_, v);
    out_.put(" ]\n");
  }
  text_out& out() noexcept { return out_; }
  int depth() const noexcept { return depth_; }

 private:
  void open_field(const char* name) noexcept { out_.putf("%*s%s: [ ", 4 * (depth_ + 1), "", name); }

  text_out& out_;
  int depth_;
};

// An object that prints itself through fi_ops::tostr. Returns false (and
// leaves the text as it was) when it has no such op or the op fails, as the
// library's own objects do.
bool put_fid_tostr(text_out& out, const fid* f) noexcept {
  if (!f || !f->ops || !FI_CHECK_OP(f->ops, struct fi_ops, tostr)) return false;
  size_t mark = out.size();
  if (out.room() <= 1) return true;
  if (f->ops->tostr(f, out.tail(), out.room()) < 0) {
    out.truncate(mark);
    return false;
  }
  out.adopt_tail();
  return true;
}

void put_tx_attr(text_out& out, const fi_tx_attr& a, int depth, api_names n) noexcept {
  block b(out, depth);
  b.header("fi_tx_attr");
  b.flags("caps", flag_set::caps, a.caps, n);
  b.flags("mode", flag_set::mode, a.mode);
  b.flags("op_flags", flag_set::op_flags, a.op_flags);
  b.flags("msg_order", flag_set::msg_order, a.msg_order);
  b.comp_order(a.comp_order);
  b.size("inject_size", a.inject_size);
  b.size("size", a.size);
  b.size("iov_limit", a.iov_limit);
  b.size("rma_iov_limit", a.rma_iov_limit);
  b.line("tclass", "0x%" PRIx32, a.tclass);
}

void put_rx_attr(text_out& out, const fi_rx_attr& a, int depth, api_names n) noexcept {
  block b(out, depth);
  b.header("fi_rx_attr");
  b.flags("caps", flag_set::caps, a.caps, n);
  b.flags("mode", flag_set::mode, a.mode);
  b.flags("op_flags", flag_set::op_flags, a.op_flags);
  b.flags("msg_order", flag_set::msg_order, a.msg_order);
  b.comp_order(a.comp_order);
  b.size("total_buffered_recv", a.total_buffered_recv);
  b.size("size", a.size);
  b.size("iov_limit", a.iov_limit);
}

void put_ctx_cnt(block& b, const char* name, size_t v) noexcept {
  if (v == FI_SHARED_CONTEXT)
    b.str(name, "FI_SHARED_CONTEXT");
  else
    b.size(name, v);
}

// The key itself is a secret and never printed, only its size.
void put_ep_attr(text_out& out, const fi_ep_attr& a, int depth) noexcept {
  block b(out, depth);
  b.header("fi_ep_attr");
  b.name("type", enum_set::ep_type, raw(a.type));
  b.name("protocol", enum_set::protocol, a.protocol);
  b.line("protocol_version", "%d", static_cast<int>(a.protocol_version));
  b.size("max_msg_size", a.max_msg_size);
  b.size("msg_prefix_size", a.msg_prefix_size);
  b.size("max_order_raw_size", a.max_order_raw_size);
  b.size("max_order_war_size", a.max_order_war_size);
  b.size("max_order_waw_size", a.max_order_waw_size);
  b.line("mem_tag_format", "0x%016" PRIx64, a.mem_tag_format);
  put_ctx_cnt(b, "tx_ctx_cnt", a.tx_ctx_cnt);
  put_ctx_cnt(b, "rx_ctx_cnt", a.rx_ctx_cnt);
  b.size("auth_key_size", a.auth_key_size);
}

// `extended`: the structure is known to have the fields appended after
// 1.17's (192-byte) layout; see put_info.
void put_domain_attr(text_out& out, const fi_domain_attr& a, int depth, api_names n,
                     bool extended) noexcept {
  block b(out, depth);
  b.header("fi_domain_attr");
  b.line("domain", "0x%" PRIxPTR, reinterpret_cast<uintptr_t>(a.domain));
  b.str("name", a.name);
  b.name("threading", enum_set::threading, raw(a.threading));
  b.name("control_progress", enum_set::progress, raw(a.control_progress));
  b.name("data_progress", enum_set::progress, raw(a.data_progress));
  b.name("resource_mgmt", enum_set::resource_mgmt, raw(a.resource_mgmt));
  b.name("av_type", enum_set::av_type, raw(a.av_type));
  b.flags("mr_mode", flag_set::mr_mode, static_cast<unsigned>(a.mr_mode));
  b.size("mr_key_size", a.mr_key_size);
  b.size("cq_data_size", a.cq_data_size);
  b.size("cq_cnt", a.cq_cnt);
  b.size("ep_cnt", a.ep_cnt);
  b.size("tx_ctx_cnt", a.tx_ctx_cnt);
  b.size("rx_ctx_cnt", a.rx_ctx_cnt);
  b.size("max_ep_tx_ctx", a.max_ep_tx_ctx);
  b.size("max_ep_rx_ctx", a.max_ep_rx_ctx);
  b.size("max_ep_stx_ctx", a.max_ep_stx_ctx);
  b.size("max_ep_srx_ctx", a.max_ep_srx_ctx);
  b.size("cntr_cnt", a.cntr_cnt);
  b.size("mr_iov_limit", a.mr_iov_limit);
  b.flags("caps", flag_set::caps, a.caps, n);
  b.flags("mode", flag_set::mode, a.mode);
  b.size("auth_key_size", a.auth_key_size);
  b.size("max_err_data", a.max_err_data);
  b.size("mr_cnt", a.mr_cnt);
  b.line("tclass", "0x%" PRIx32, a.tclass);
  if (!extended) return;
  b.size("max_ep_auth_key", a.max_ep_auth_key);
  b.line("max_group_id", "%" PRIu32, a.max_group_id);
  b.line("max_cntr_value", "%" PRIu64, a.max_cntr_value);
  b.line("max_err_cntr_value", "%" PRIu64, a.max_err_cntr_value);
}

void put_fabric_attr(text_out& out, const fi_fabric_attr& a, int depth) noexcept {
  block b(out, depth);
  b.header("fi_fabric_attr");
  b.str("name", a.name);
  b.str("prov_name", a.prov_name);
  b.line("prov_version", "%u.%u", FI_MAJOR(a.prov_version), FI_MINOR(a.prov_version));
  b.line("api_version", "%u.%u", FI_MAJOR(a.api_version), FI_MINOR(a.api_version));
}

void put_info_addr(block& b, const char* name, uint32_t format, const void* addr,
                   size_t len) noexcept {
  if (!addr) return b.str(name, nullptr);
  b.out().putf("%*s%s: ", 4 * (b.depth() + 1), "", name);
  put_addr(b.out(), format, addr, len);
  b.out().put("\n");
}

// A handle or NIC: its own text if it prints itself, else its address.
void put_info_fid(block& b, const char* name, const fid* f) noexcept {
  if (!put_fid_tostr(b.out(), f)) b.line(name, "%p", static_cast<const void*>(f));
}

// Only the first entry of a list, as libfabric does.
void put_info(text_out& out, const fi_info& info) noexcept {
  // The caller's API version, when fi_getinfo recorded one, tells how to
  // name the capability bits whose meaning changed in 2.x, and that the
  // domain attributes have the fields 2.x appended (a 1.x caller's
  // structure may end before them, so they are read only then).
  bool v2 = info.fabric_attr && info.fabric_attr->api_version >= FI_VERSION(2, 0);
  api_names n = v2 ? api_names::v2 : api_names::v1;

  block b(out, 0);
  b.header("fi_info");
  b.flags("caps", flag_set::caps, info.caps, n);
  b.flags("mode", flag_set::mode, info.mode);
  b.name("addr_format", enum_set::addr_format, info.addr_format);
  b.size("src_addrlen", info.src_addrlen);
  b.size("dest_addrlen", info.dest_addrlen);
  put_info_addr(b, "src_addr", info.addr_format, info.src_addr, info.src_addrlen);
  put_info_addr(b, "dest_addr", info.addr_format, info.dest_addr, info.dest_addrlen);
  put_info_fid(b, "handle", info.handle);

  block nested(out, 1);
  if (info.tx_attr)
    put_tx_attr(out, *info.tx_attr, 1, n);
  else
    nested.null_header("fi_tx_attr");
  if (info.rx_attr)
    put_rx_attr(out, *info.rx_attr, 1, n);
  else
    nested.null_header("fi_rx_attr");
  if (info.ep_attr)
    put_ep_attr(out, *info.ep_attr, 1);
  else
    nested.null_header("fi_ep_attr");
  if (info.domain_attr)
    put_domain_attr(out, *info.domain_attr, 1, n, v2);
  else
    nested.null_header("fi_domain_attr");
  if (info.fabric_attr)
    put_fabric_attr(out, *info.fabric_attr, 1);
  else
    nested.null_header("fi_fabric_attr");

  put_info_fid(b, "nic", info.nic ? &info.nic->fid : nullptr);
}

void put_fid(text_out& out, const fid* f) noexcept {
  if (!put_fid_tostr(out, f)) out.putf("fid: %p\n", static_cast<const void*>(f));
}

// ---- types API 2.x added; 1.17 has no text for them to follow.

void put_av_attr(text_out& out, const fi_av_attr& a) noexcept {
  block b(out, 0);
  b.header("fi_av_attr");
  b.name("type", enum_set::av_type, raw(a.type));
  b.line("rx_ctx_bits", "%d", a.rx_ctx_bits);
  b.size("count", a.count);
  b.size("ep_per_node", a.ep_per_node);
  b.str("name", a.name);
  b.line("map_addr", "%p", a.map_addr);
  b.flags("flags", flag_set::av_flags, a.flags);
}

void put_cq_attr(text_out& out, const fi_cq_attr& a) noexcept {
  block b(out, 0);
  b.header("fi_cq_attr");
  b.size("size", a.size);
  b.flags("flags", flag_set::cq_open, a.flags);
  b.name("format", enum_set::cq_format, raw(a.format));
  b.name("wait_obj", enum_set::wait_obj, raw(a.wait_obj));
  b.line("signaling_vector", "%d", a.signaling_vector);
  b.name("wait_cond", enum_set::cq_wait_cond, raw(a.wait_cond));
  b.line("wait_set", "%p", static_cast<const void*>(a.wait_set));
}

// The device is meaningful only for non-host memory; the union member
// matching the interface is an int for all of them.
void put_mr_attr(text_out& out, const fi_mr_attr& a) noexcept {
  block b(out, 0);
  b.header("fi_mr_attr");
  b.line("mr_iov", "%p", static_cast<const void*>(a.mr_iov));
  b.size("iov_count", a.iov_count);
  b.flags("access", flag_set::mr_access, a.access);
  b.line("offset", "0x%" PRIx64, a.offset);
  b.line("requested_key", "0x%" PRIx64, a.requested_key);
  b.line("context", "%p", a.context);
  b.size("auth_key_size", a.auth_key_size);
  b.name("iface", enum_set::hmem_iface, raw(a.iface));
  if (raw(a.iface) == FI_HMEM_SYSTEM)
    b.line("device", "%" PRIu64, a.device.reserved);
  else
    b.line("device", "%d", a.device.cuda);
  b.line("hmem_data", "%p", a.hmem_data);
  b.size("page_size", a.page_size);
  b.line("base_mr", "%p", static_cast<const void*>(a.base_mr));
  b.size("sub_mr_cnt", a.sub_mr_cnt);
}

void put_cntr_attr(text_out& out, const fi_cntr_attr& a) noexcept {
  block b(out, 0);
  b.header("fi_cntr_attr");
  b.name("events", enum_set::cntr_events, raw(a.events));
  b.name("wait_obj", enum_set::wait_obj, raw(a.wait_obj));
  b.line("wait_set", "%p", static_cast<const void*>(a.wait_set));
  b.flags("flags", flag_set::cntr_open, a.flags);
}

void put_cq_err_entry(text_out& out, const fi_cq_err_entry& e) noexcept {
  block b(out, 0);
  b.header("fi_cq_err_entry");
  b.line("op_context", "%p", e.op_context);
  b.flags("flags", flag_set::cq_flags, e.flags);
  b.size("len", e.len);
  b.line("buf", "%p", e.buf);
  b.line("data", "0x%" PRIx64, e.data);
  b.line("tag", "0x%" PRIx64, e.tag);
  b.size("olen", e.olen);
  b.line("err", "%d", e.err);
  b.line("prov_errno", "%d", e.prov_errno);
  b.line("err_data", "%p", e.err_data);
  b.size("err_data_size", e.err_data_size);
  if (e.src_addr == FI_ADDR_NOTAVAIL)
    b.str("src_addr", "FI_ADDR_NOTAVAIL");
  else
    b.line("src_addr", "%" PRIu64, e.src_addr);
}

// Everything but the buffer checks; data is not NULL.
void write(text_out& out, const void* data, int type) noexcept {
  auto name = [&](enum_set set, int64_t v) { out.put(enum_name(set, v)); };
  switch (type) {
    case FI_TYPE_INFO:
      return put_info(out, *static_cast<const fi_info*>(data));
    case FI_TYPE_EP_TYPE:
      return name(enum_set::ep_type, load<int>(data));
    case FI_TYPE_CAPS:
      return put_flags(out, flag_set::caps, load<uint64_t>(data));
    case FI_TYPE_OP_FLAGS:
      return put_flags(out, flag_set::op_flags, load<uint64_t>(data));
    case FI_TYPE_ADDR_FORMAT:
      return name(enum_set::addr_format, load<uint32_t>(data));
    case FI_TYPE_TX_ATTR:
      return put_tx_attr(out, *static_cast<const fi_tx_attr*>(data), 0, api_names::v1);
    case FI_TYPE_RX_ATTR:
      return put_rx_attr(out, *static_cast<const fi_rx_attr*>(data), 0, api_names::v1);
    case FI_TYPE_EP_ATTR:
      return put_ep_attr(out, *static_cast<const fi_ep_attr*>(data), 0);
    // A lone domain attribute may be a 1.x caller's shorter structure.
    case FI_TYPE_DOMAIN_ATTR:
      return put_domain_attr(out, *static_cast<const fi_domain_attr*>(data), 0, api_names::v1,
                             false);
    case FI_TYPE_FABRIC_ATTR:
      return put_fabric_attr(out, *static_cast<const fi_fabric_attr*>(data), 0);
    case FI_TYPE_THREADING:
      return name(enum_set::threading, load<int>(data));
    case FI_TYPE_PROGRESS:
      return name(enum_set::progress, load<int>(data));
    case FI_TYPE_PROTOCOL:
      return name(enum_set::protocol, load<uint32_t>(data));
    case FI_TYPE_MSG_ORDER:
      return put_flags(out, flag_set::msg_order, load<uint64_t>(data));
    case FI_TYPE_MODE:
      return put_flags(out, flag_set::mode, load<uint64_t>(data));
    case FI_TYPE_AV_TYPE:
      return name(enum_set::av_type, load<int>(data));
    case FI_TYPE_ATOMIC_TYPE:
      return name(enum_set::atomic_type, load<int>(data));
    case FI_TYPE_ATOMIC_OP:
      return name(enum_set::atomic_op, load<int>(data));
    case FI_TYPE_VERSION:
      return out.putf("%d.%d.%d (weft %s)", FI_MAJOR_VERSION, FI_MINOR_VERSION, FI_REVISION_VERSION,
                      WEFT_VERSION);
    case FI_TYPE_EQ_EVENT:
      return name(enum_set::eq_event, load<uint32_t>(data));
    case FI_TYPE_CQ_EVENT_FLAGS:
      return put_flags(out, flag_set::cq_flags, load<uint64_t>(data));
    // mr_mode is an int in fi_domain_attr; read no more than that.
    case FI_TYPE_MR_MODE:
      return put_flags(out, flag_set::mr_mode, load<unsigned>(data));
    case FI_TYPE_OP_TYPE:
      return name(enum_set::op_type, load<int>(data));
    case FI_TYPE_FID:
      return put_fid(out, static_cast<const fid*>(data));
    case FI_TYPE_COLLECTIVE_OP:
      return name(enum_set::collective_op, load<int>(data));
    case FI_TYPE_HMEM_IFACE:
      return name(enum_set::hmem_iface, load<int>(data));
    case FI_TYPE_CQ_FORMAT:
      return name(enum_set::cq_format, load<int>(data));
    case FI_TYPE_LOG_LEVEL:
      return name(enum_set::log_level, load<int>(data));
    case FI_TYPE_LOG_SUBSYS:
      return name(enum_set::log_subsys, load<int>(data));
    case FI_TYPE_AV_ATTR:
      return put_av_attr(out, *static_cast<const fi_av_attr*>(data));
    case FI_TYPE_CQ_ATTR:
      return put_cq_attr(out, *static_cast<const fi_cq_attr*>(data));
    case FI_TYPE_MR_ATTR:
      return put_mr_attr(out, *static_cast<const fi_mr_attr*>(data));
    case FI_TYPE_CNTR_ATTR:
      return put_cntr_attr(out, *static_cast<const fi_cntr_attr*>(data));
    case FI_TYPE_CQ_ERR_ENTRY:
      return put_cq_err_entry(out, *static_cast<const fi_cq_err_entry*>(data));
    default:
      // libfabric answers an unknown type with this text rather than NULL;
      // programs print the result unchecked.
      WEFT_WARN(core_provider(), FI_LOG_CORE, "fi_tostr: unknown type %d", type);
      return out.put("Unknown type");
  }
}

// Lazily allocated so threads that never call fi_tostr do not pay for it.
char* thread_buffer() noexcept {
  thread_local std::unique_ptr<char[]> buf;
  if (!buf) buf.reset(new (std::nothrow) char[tostr_buffer_size]);
  return buf.get();
}

}  // namespace

}  // namespace weft::core::tostr

using namespace weft::core;

extern "C" {

WEFT_EXPORT char* fi_tostr_r(char* buf, size_t len, const void* data, enum fi_type datatype) {
  if (!buf || !len) {
    WEFT_WARN(core_provider(), FI_LOG_CORE, "fi_tostr_r: no buffer (buf %p, len %zu)",
              static_cast<void*>(buf), len);
    return nullptr;
  }
  if (!data) {
    WEFT_WARN(core_provider(), FI_LOG_CORE, "fi_tostr_r: data is NULL (type %d)",
              static_cast<int>(datatype));
    return nullptr;
  }
  tostr::text_out out(buf, len);
  tostr::write(out, data, static_cast<int>(datatype));
  return buf;
}

// Not reentrant by contract (the man page), but per thread here, so threads
// printing at the same time do not garble each other's text.
WEFT_EXPORT char* fi_tostr(const void* data, enum fi_type datatype) {
  char* buf = tostr::thread_buffer();
  if (!buf) {
    WEFT_WARN(core_provider(), FI_LOG_CORE, "fi_tostr: no memory for the text buffer");
    return nullptr;
  }
  return fi_tostr_r(buf, tostr::tostr_buffer_size, data, datatype);
}

}  // extern "C"
