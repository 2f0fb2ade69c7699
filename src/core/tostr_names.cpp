// SPDX-License-Identifier: MIT
// weft — fi_tostr name tables (flags and enumerations) and address text.
//
// Table order is printing order. Where libfabric 1.17 names a value, order
// and spelling follow what its library prints (checked byte for byte by
// tests/compat/tostr_compare.sh); the values it does not name (API 2.x
// additions, and a few constants it leaves out) come after, by their
// constant's name.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_trigger.h>
#include <rdma/providers/fi_log.h>
#include <sys/socket.h>

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <span>

#include "core/tostr.hpp"

namespace weft::core::tostr {

// ------------------------------------------------------------ text_out

void text_out::put(std::string_view s) noexcept {
  size_t n = s.size() < room() - 1 ? s.size() : room() - 1;
  std::memcpy(buf_ + len_, s.data(), n);
  len_ += n;
  buf_[len_] = '\0';
}

void text_out::putf(const char* fmt, ...) noexcept {
  va_list ap;
  va_start(ap, fmt);
  vputf(fmt, ap);
  va_end(ap);
}

void text_out::vputf(const char* fmt, va_list ap) noexcept {
  int n = std::vsnprintf(buf_ + len_, room(), fmt, ap);
  if (n < 0) {  // encoding error: keep the text as it was
    buf_[len_] = '\0';
    return;
  }
  len_ += static_cast<size_t>(n) < room() ? static_cast<size_t>(n) : room() - 1;
}

void text_out::adopt_tail() noexcept {
  buf_[cap_ - 1] = '\0';  // a callback may have filled the tail without a NUL
  len_ += std::strlen(buf_ + len_);
}

void text_out::truncate(size_t n) noexcept {
  if (n < len_) len_ = n;
  buf_[len_] = '\0';  // also undoes a callback's writes past the text
}

// --------------------------------------------------------------- flags

namespace {

struct flag_name {
  uint64_t bit;
  const char* name;
};

// clang-format off
#define WEFT_FLAG(f) {f, #f}

// 1.17 prints these in bit order except FI_HMEM, which comes last. Bit 48 is
// named by api_names (see put_flags); 41..46 are API 2.x capabilities.
constexpr flag_name caps_names[] = {
    WEFT_FLAG(FI_MSG),                  WEFT_FLAG(FI_RMA),
    WEFT_FLAG(FI_TAGGED),               WEFT_FLAG(FI_ATOMIC),
    WEFT_FLAG(FI_MULTICAST),            WEFT_FLAG(FI_COLLECTIVE),
    WEFT_FLAG(FI_READ),                 WEFT_FLAG(FI_WRITE),
    WEFT_FLAG(FI_RECV),                 WEFT_FLAG(FI_SEND),
    WEFT_FLAG(FI_REMOTE_READ),          WEFT_FLAG(FI_REMOTE_WRITE),
    WEFT_FLAG(FI_MULTI_RECV),           WEFT_FLAG(FI_REMOTE_CQ_DATA),
    WEFT_FLAG(FI_TRIGGER),              WEFT_FLAG(FI_FENCE),
    WEFT_FLAG(FI_VARIABLE_MSG),         WEFT_FLAG(FI_RMA_PMEM),
    WEFT_FLAG(FI_SOURCE_ERR),           WEFT_FLAG(FI_LOCAL_COMM),
    WEFT_FLAG(FI_REMOTE_COMM),          WEFT_FLAG(FI_SHARED_AV),
    WEFT_FLAG(FI_RMA_EVENT),            WEFT_FLAG(FI_SOURCE),
    WEFT_FLAG(FI_NAMED_RX_CTX),         WEFT_FLAG(FI_DIRECTED_RECV),
    WEFT_FLAG(FI_HMEM),                 WEFT_FLAG(FI_AV_USER_ID),
    WEFT_FLAG(FI_PEER),                 WEFT_FLAG(FI_XPU),
    WEFT_FLAG(FI_TAGGED_DIRECTED_RECV), WEFT_FLAG(FI_TAGGED_MULTI_RECV),
};

constexpr flag_name op_flag_names[] = {
    WEFT_FLAG(FI_MULTICAST),         WEFT_FLAG(FI_MULTI_RECV),
    WEFT_FLAG(FI_REMOTE_CQ_DATA),    WEFT_FLAG(FI_MORE),
    WEFT_FLAG(FI_PEEK),              WEFT_FLAG(FI_TRIGGER),
    WEFT_FLAG(FI_FENCE),             WEFT_FLAG(FI_COMPLETION),
    WEFT_FLAG(FI_INJECT),            WEFT_FLAG(FI_INJECT_COMPLETE),
    WEFT_FLAG(FI_TRANSMIT_COMPLETE), WEFT_FLAG(FI_DELIVERY_COMPLETE),
    WEFT_FLAG(FI_COMMIT_COMPLETE),   WEFT_FLAG(FI_MATCH_COMPLETE),
    WEFT_FLAG(FI_AFFINITY),          WEFT_FLAG(FI_CLAIM),
    WEFT_FLAG(FI_DISCARD),
};

constexpr flag_name msg_order_names[] = {
    WEFT_FLAG(FI_ORDER_RAR),        WEFT_FLAG(FI_ORDER_RAW),        WEFT_FLAG(FI_ORDER_RAS),
    WEFT_FLAG(FI_ORDER_WAR),        WEFT_FLAG(FI_ORDER_WAW),        WEFT_FLAG(FI_ORDER_WAS),
    WEFT_FLAG(FI_ORDER_SAR),        WEFT_FLAG(FI_ORDER_SAW),        WEFT_FLAG(FI_ORDER_SAS),
    WEFT_FLAG(FI_ORDER_RMA_RAR),    WEFT_FLAG(FI_ORDER_RMA_RAW),    WEFT_FLAG(FI_ORDER_RMA_WAR),
    WEFT_FLAG(FI_ORDER_RMA_WAW),    WEFT_FLAG(FI_ORDER_ATOMIC_RAR), WEFT_FLAG(FI_ORDER_ATOMIC_RAW),
    WEFT_FLAG(FI_ORDER_ATOMIC_WAR), WEFT_FLAG(FI_ORDER_ATOMIC_WAW),
};

// Highest bit first, as 1.17 prints them.
constexpr flag_name mode_names[] = {
    WEFT_FLAG(FI_CONTEXT),           WEFT_FLAG(FI_MSG_PREFIX),
    WEFT_FLAG(FI_ASYNC_IOV),         WEFT_FLAG(FI_RX_CQ_DATA),
    WEFT_FLAG(FI_LOCAL_MR),          WEFT_FLAG(FI_NOTIFY_FLAGS_ONLY),
    WEFT_FLAG(FI_RESTRICTED_COMP),   WEFT_FLAG(FI_CONTEXT2),
    WEFT_FLAG(FI_BUFFERED_RECV),     WEFT_FLAG(FI_PEER_TRANSFER),
};

constexpr flag_name cq_flag_names[] = {
    WEFT_FLAG(FI_SEND),           WEFT_FLAG(FI_RECV),           WEFT_FLAG(FI_RMA),
    WEFT_FLAG(FI_ATOMIC),         WEFT_FLAG(FI_MSG),            WEFT_FLAG(FI_TAGGED),
    WEFT_FLAG(FI_READ),           WEFT_FLAG(FI_WRITE),          WEFT_FLAG(FI_REMOTE_READ),
    WEFT_FLAG(FI_REMOTE_WRITE),   WEFT_FLAG(FI_REMOTE_CQ_DATA), WEFT_FLAG(FI_MULTI_RECV),
    WEFT_FLAG(FI_MORE),           WEFT_FLAG(FI_CLAIM),          WEFT_FLAG(FI_COLLECTIVE),
};

// FI_MR_BASIC and FI_MR_SCALABLE are the pre-1.5 enum values 1 and 2, which
// are bits 0 and 1 of the later bit set.
constexpr flag_name mr_mode_names[] = {
    WEFT_FLAG(FI_MR_BASIC),      WEFT_FLAG(FI_MR_SCALABLE),   WEFT_FLAG(FI_MR_LOCAL),
    WEFT_FLAG(FI_MR_RAW),        WEFT_FLAG(FI_MR_VIRT_ADDR),  WEFT_FLAG(FI_MR_ALLOCATED),
    WEFT_FLAG(FI_MR_PROV_KEY),   WEFT_FLAG(FI_MR_MMU_NOTIFY), WEFT_FLAG(FI_MR_RMA_EVENT),
    WEFT_FLAG(FI_MR_ENDPOINT),   WEFT_FLAG(FI_MR_HMEM),       WEFT_FLAG(FI_MR_COLLECTIVE),
};

constexpr flag_name av_flag_names[] = {
    WEFT_FLAG(FI_EVENT),      WEFT_FLAG(FI_READ),       WEFT_FLAG(FI_SYMMETRIC),
    WEFT_FLAG(FI_SYNC_ERR),   WEFT_FLAG(FI_UNIVERSE),   WEFT_FLAG(FI_AV_USER_ID),
    WEFT_FLAG(FI_PEER),
};

constexpr flag_name cq_open_names[] = {WEFT_FLAG(FI_AFFINITY), WEFT_FLAG(FI_PEER)};

constexpr flag_name cntr_open_names[] = {WEFT_FLAG(FI_PEER)};

constexpr flag_name mr_access_names[] = {
    WEFT_FLAG(FI_SEND),         WEFT_FLAG(FI_RECV),         WEFT_FLAG(FI_READ),
    WEFT_FLAG(FI_WRITE),        WEFT_FLAG(FI_REMOTE_READ),  WEFT_FLAG(FI_REMOTE_WRITE),
    WEFT_FLAG(FI_COLLECTIVE),
};

// clang-format on
#undef WEFT_FLAG

std::span<const flag_name> flag_table(flag_set set) noexcept {
  switch (set) {
    case flag_set::caps:
      return caps_names;
    case flag_set::op_flags:
      return op_flag_names;
    case flag_set::msg_order:
      return msg_order_names;
    case flag_set::mode:
      return mode_names;
    case flag_set::cq_flags:
      return cq_flag_names;
    case flag_set::mr_mode:
      return mr_mode_names;
    case flag_set::av_flags:
      return av_flag_names;
    case flag_set::cq_open:
      return cq_open_names;
    case flag_set::cntr_open:
      return cntr_open_names;
    case flag_set::mr_access:
      return mr_access_names;
  }
  return {};
}

}  // namespace

void put_flags(text_out& out, flag_set set, uint64_t v, api_names names) noexcept {
  bool first = true;
  for (const flag_name& f : flag_table(set)) {
    if (!(v & f.bit)) continue;
    if (!first) out.put(", ");
    first = false;
    if (set == flag_set::caps && f.bit == FI_VARIABLE_MSG && names == api_names::v2)
      out.put("FI_EXACT_DIRECTED_RECV");
    else
      out.put(f.name);
  }
}

void put_comp_order(text_out& out, uint64_t v) noexcept {
  // Completion order is all-or-nothing over the nine message-order bits: a
  // partial set has no name of its own.
  uint64_t msg = v & FI_ORDER_STRICT;
  const char* base = msg == FI_ORDER_STRICT ? "FI_ORDER_STRICT"
                     : msg == 0             ? "FI_ORDER_NONE"
                                            : nullptr;
  if (base) out.put(base);
  if (v & FI_ORDER_DATA) {
    if (base) out.put(", ");
    out.put("FI_ORDER_DATA");
  }
}

// -------------------------------------------------------- enumerations

namespace {

struct enum_name_t {
  int64_t value;
  const char* name;
};

// clang-format off
#define WEFT_ENUM(e) {static_cast<int64_t>(e), #e}

constexpr enum_name_t ep_type_names[] = {
    WEFT_ENUM(FI_EP_UNSPEC),      WEFT_ENUM(FI_EP_MSG),         WEFT_ENUM(FI_EP_DGRAM),
    WEFT_ENUM(FI_EP_RDM),         WEFT_ENUM(FI_EP_SOCK_STREAM), WEFT_ENUM(FI_EP_SOCK_DGRAM),
};

constexpr enum_name_t addr_format_names[] = {
    WEFT_ENUM(FI_FORMAT_UNSPEC), WEFT_ENUM(FI_SOCKADDR),      WEFT_ENUM(FI_SOCKADDR_IN),
    WEFT_ENUM(FI_SOCKADDR_IN6),  WEFT_ENUM(FI_SOCKADDR_IB),   WEFT_ENUM(FI_ADDR_PSMX),
    WEFT_ENUM(FI_ADDR_GNI),      WEFT_ENUM(FI_ADDR_BGQ),      WEFT_ENUM(FI_ADDR_MLX),
    WEFT_ENUM(FI_ADDR_STR),      WEFT_ENUM(FI_ADDR_PSMX2),    WEFT_ENUM(FI_ADDR_IB_UD),
    WEFT_ENUM(FI_ADDR_EFA),      WEFT_ENUM(FI_ADDR_PSMX3),    WEFT_ENUM(FI_ADDR_OPX),
    WEFT_ENUM(FI_ADDR_CXI),      WEFT_ENUM(FI_ADDR_UCX),
};

constexpr enum_name_t threading_names[] = {
    WEFT_ENUM(FI_THREAD_UNSPEC),     WEFT_ENUM(FI_THREAD_SAFE),
    WEFT_ENUM(FI_THREAD_FID),        WEFT_ENUM(FI_THREAD_DOMAIN),
    WEFT_ENUM(FI_THREAD_COMPLETION), WEFT_ENUM(FI_THREAD_ENDPOINT),
};

constexpr enum_name_t progress_names[] = {
    WEFT_ENUM(FI_PROGRESS_UNSPEC),          WEFT_ENUM(FI_PROGRESS_AUTO),
    WEFT_ENUM(FI_PROGRESS_MANUAL),          WEFT_ENUM(FI_PROGRESS_CONTROL_UNIFIED),
};

// 1.17 prints "Unknown" for FI_PROTO_MXM and FI_PROTO_MRAIL; we name them.
constexpr enum_name_t protocol_names[] = {
    WEFT_ENUM(FI_PROTO_UNSPEC),         WEFT_ENUM(FI_PROTO_RDMA_CM_IB_RC),
    WEFT_ENUM(FI_PROTO_IWARP),          WEFT_ENUM(FI_PROTO_IB_UD),
    WEFT_ENUM(FI_PROTO_PSMX),           WEFT_ENUM(FI_PROTO_UDP),
    WEFT_ENUM(FI_PROTO_SOCK_TCP),       WEFT_ENUM(FI_PROTO_MXM),
    WEFT_ENUM(FI_PROTO_IWARP_RDM),      WEFT_ENUM(FI_PROTO_IB_RDM),
    WEFT_ENUM(FI_PROTO_GNI),            WEFT_ENUM(FI_PROTO_RXM),
    WEFT_ENUM(FI_PROTO_RXD),            WEFT_ENUM(FI_PROTO_MLX),
    WEFT_ENUM(FI_PROTO_NETWORKDIRECT),  WEFT_ENUM(FI_PROTO_PSMX2),
    WEFT_ENUM(FI_PROTO_SHM),            WEFT_ENUM(FI_PROTO_MRAIL),
    WEFT_ENUM(FI_PROTO_RSTREAM),        WEFT_ENUM(FI_PROTO_RDMA_CM_IB_XRC),
    WEFT_ENUM(FI_PROTO_EFA),            WEFT_ENUM(FI_PROTO_PSMX3),
    WEFT_ENUM(FI_PROTO_RXM_TCP),        WEFT_ENUM(FI_PROTO_OPX),
    WEFT_ENUM(FI_PROTO_CXI),            WEFT_ENUM(FI_PROTO_XNET),
    WEFT_ENUM(FI_PROTO_COLL),           WEFT_ENUM(FI_PROTO_UCX),
    WEFT_ENUM(FI_PROTO_SM2),            WEFT_ENUM(FI_PROTO_CXI_RNR),
    WEFT_ENUM(FI_PROTO_LPP),            WEFT_ENUM(FI_PROTO_LNX),
};

constexpr enum_name_t av_type_names[] = {
    WEFT_ENUM(FI_AV_UNSPEC), WEFT_ENUM(FI_AV_MAP),    WEFT_ENUM(FI_AV_TABLE),
};

constexpr enum_name_t atomic_type_names[] = {
    WEFT_ENUM(FI_INT8),                WEFT_ENUM(FI_UINT8),
    WEFT_ENUM(FI_INT16),               WEFT_ENUM(FI_UINT16),
    WEFT_ENUM(FI_INT32),               WEFT_ENUM(FI_UINT32),
    WEFT_ENUM(FI_INT64),               WEFT_ENUM(FI_UINT64),
    WEFT_ENUM(FI_FLOAT),               WEFT_ENUM(FI_DOUBLE),
    WEFT_ENUM(FI_FLOAT_COMPLEX),       WEFT_ENUM(FI_DOUBLE_COMPLEX),
    WEFT_ENUM(FI_LONG_DOUBLE),         WEFT_ENUM(FI_LONG_DOUBLE_COMPLEX),
    WEFT_ENUM(FI_INT128),              WEFT_ENUM(FI_UINT128),
    WEFT_ENUM(FI_FLOAT16),             WEFT_ENUM(FI_BFLOAT16),
    WEFT_ENUM(FI_FLOAT8_E4M3),         WEFT_ENUM(FI_FLOAT8_E5M2),
    WEFT_ENUM(FI_VOID),
};

constexpr enum_name_t atomic_op_names[] = {
    WEFT_ENUM(FI_MIN),          WEFT_ENUM(FI_MAX),          WEFT_ENUM(FI_SUM),
    WEFT_ENUM(FI_PROD),         WEFT_ENUM(FI_LOR),          WEFT_ENUM(FI_LAND),
    WEFT_ENUM(FI_BOR),          WEFT_ENUM(FI_BAND),         WEFT_ENUM(FI_LXOR),
    WEFT_ENUM(FI_BXOR),         WEFT_ENUM(FI_ATOMIC_READ),  WEFT_ENUM(FI_ATOMIC_WRITE),
    WEFT_ENUM(FI_CSWAP),        WEFT_ENUM(FI_CSWAP_NE),     WEFT_ENUM(FI_CSWAP_LE),
    WEFT_ENUM(FI_CSWAP_LT),     WEFT_ENUM(FI_CSWAP_GE),     WEFT_ENUM(FI_CSWAP_GT),
    WEFT_ENUM(FI_MSWAP),        WEFT_ENUM(FI_DIFF),         WEFT_ENUM(FI_NOOP),
};

constexpr enum_name_t eq_event_names[] = {
    WEFT_ENUM(FI_NOTIFY),        WEFT_ENUM(FI_CONNREQ),       WEFT_ENUM(FI_CONNECTED),
    WEFT_ENUM(FI_SHUTDOWN),      WEFT_ENUM(FI_MR_COMPLETE),   WEFT_ENUM(FI_AV_COMPLETE),
    WEFT_ENUM(FI_JOIN_COMPLETE),
};

constexpr enum_name_t op_type_names[] = {
    WEFT_ENUM(FI_OP_RECV),           WEFT_ENUM(FI_OP_SEND),
    WEFT_ENUM(FI_OP_TRECV),          WEFT_ENUM(FI_OP_TSEND),
    WEFT_ENUM(FI_OP_READ),           WEFT_ENUM(FI_OP_WRITE),
    WEFT_ENUM(FI_OP_ATOMIC),         WEFT_ENUM(FI_OP_FETCH_ATOMIC),
    WEFT_ENUM(FI_OP_COMPARE_ATOMIC), WEFT_ENUM(FI_OP_CNTR_SET),
    WEFT_ENUM(FI_OP_CNTR_ADD),
};

constexpr enum_name_t collective_op_names[] = {
    WEFT_ENUM(FI_BARRIER),        WEFT_ENUM(FI_BROADCAST),      WEFT_ENUM(FI_ALLTOALL),
    WEFT_ENUM(FI_ALLREDUCE),      WEFT_ENUM(FI_ALLGATHER),      WEFT_ENUM(FI_REDUCE_SCATTER),
    WEFT_ENUM(FI_REDUCE),         WEFT_ENUM(FI_SCATTER),        WEFT_ENUM(FI_GATHER),
};

constexpr enum_name_t hmem_iface_names[] = {
    WEFT_ENUM(FI_HMEM_SYSTEM),    WEFT_ENUM(FI_HMEM_CUDA),      WEFT_ENUM(FI_HMEM_ROCR),
    WEFT_ENUM(FI_HMEM_ZE),        WEFT_ENUM(FI_HMEM_NEURON),    WEFT_ENUM(FI_HMEM_SYNAPSEAI),
};

constexpr enum_name_t cq_format_names[] = {
    WEFT_ENUM(FI_CQ_FORMAT_UNSPEC),  WEFT_ENUM(FI_CQ_FORMAT_CONTEXT),
    WEFT_ENUM(FI_CQ_FORMAT_MSG),     WEFT_ENUM(FI_CQ_FORMAT_DATA),
    WEFT_ENUM(FI_CQ_FORMAT_TAGGED),
};

// Logging names are the FI_LOG_LEVEL / FI_LOG_SUBSYS spellings.
constexpr enum_name_t log_level_names[] = {
    {FI_LOG_WARN, "warn"},   {FI_LOG_TRACE, "trace"}, {FI_LOG_INFO, "info"},
    {FI_LOG_DEBUG, "debug"},
};

constexpr enum_name_t log_subsys_names[] = {
    {FI_LOG_CORE, "core"},       {FI_LOG_FABRIC, "fabric"},   {FI_LOG_DOMAIN, "domain"},
    {FI_LOG_EP_CTRL, "ep_ctrl"}, {FI_LOG_EP_DATA, "ep_data"}, {FI_LOG_AV, "av"},
    {FI_LOG_CQ, "cq"},           {FI_LOG_EQ, "eq"},           {FI_LOG_MR, "mr"},
    {FI_LOG_CNTR, "cntr"},
};

constexpr enum_name_t resource_mgmt_names[] = {
    WEFT_ENUM(FI_RM_UNSPEC),   WEFT_ENUM(FI_RM_DISABLED), WEFT_ENUM(FI_RM_ENABLED),
};

constexpr enum_name_t wait_obj_names[] = {
    WEFT_ENUM(FI_WAIT_NONE),       WEFT_ENUM(FI_WAIT_UNSPEC),     WEFT_ENUM(FI_WAIT_SET),
    WEFT_ENUM(FI_WAIT_FD),         WEFT_ENUM(FI_WAIT_MUTEX_COND), WEFT_ENUM(FI_WAIT_YIELD),
    WEFT_ENUM(FI_WAIT_POLLFD),
};

constexpr enum_name_t cq_wait_cond_names[] = {
    WEFT_ENUM(FI_CQ_COND_NONE),      WEFT_ENUM(FI_CQ_COND_THRESHOLD),
};

constexpr enum_name_t cntr_events_names[] = {
    WEFT_ENUM(FI_CNTR_EVENTS_COMP),  WEFT_ENUM(FI_CNTR_EVENTS_BYTES),
};

// clang-format on
#undef WEFT_ENUM

std::span<const enum_name_t> enum_table(enum_set set) noexcept {
  switch (set) {
    case enum_set::ep_type:
      return ep_type_names;
    case enum_set::addr_format:
      return addr_format_names;
    case enum_set::threading:
      return threading_names;
    case enum_set::progress:
      return progress_names;
    case enum_set::protocol:
      return protocol_names;
    case enum_set::av_type:
      return av_type_names;
    case enum_set::atomic_type:
      return atomic_type_names;
    case enum_set::atomic_op:
      return atomic_op_names;
    case enum_set::eq_event:
      return eq_event_names;
    case enum_set::op_type:
      return op_type_names;
    case enum_set::collective_op:
      return collective_op_names;
    case enum_set::hmem_iface:
      return hmem_iface_names;
    case enum_set::cq_format:
      return cq_format_names;
    case enum_set::log_level:
      return log_level_names;
    case enum_set::log_subsys:
      return log_subsys_names;
    case enum_set::resource_mgmt:
      return resource_mgmt_names;
    case enum_set::wait_obj:
      return wait_obj_names;
    case enum_set::cq_wait_cond:
      return cq_wait_cond_names;
    case enum_set::cntr_events:
      return cntr_events_names;
  }
  return {};
}

}  // namespace

const char* enum_name(enum_set set, int64_t v) noexcept {
  // Address formats and protocols are 32-bit fields whose top bit marks a
  // provider's own numbering; 1.17 reads them as int, so -1 counts as well.
  if ((set == enum_set::addr_format || set == enum_set::protocol) &&
      (static_cast<uint32_t>(v) & FI_PROV_SPECIFIC))
    return "Provider specific";
  for (const enum_name_t& e : enum_table(set))
    if (e.value == v) return e.name;
  return "Unknown";
}

// ------------------------------------------------------------ addresses

namespace {

// Fixed-width fields of an address buffer, read in host byte order unless
// named be*; memcpy because addresses come with no alignment promise.
template <class T>
T field(const void* addr, size_t off) noexcept {
  T v;
  std::memcpy(&v, static_cast<const char*>(addr) + off, sizeof v);
  return v;
}

uint16_t be16(const void* addr, size_t off) noexcept {
  return ntohs(field<uint16_t>(addr, off));
}

uint64_t be64(const void* addr, size_t off) noexcept {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = v << 8 | field<uint8_t>(addr, off + i);
  return v;
}

// inet_ntop of the address at `off`, in the family the sockaddr itself names
// (a sockaddr of the other family is printed as 1.17 prints it: as the bytes
// at the offset the format expects). Returns nullptr for other families or
// when addrlen does not cover the bytes read.
const char* ntop(const void* addr, size_t addrlen, size_t off, char* text, size_t size) noexcept {
  if (addrlen < sizeof(sa_family_t)) return nullptr;
  sa_family_t family = field<sa_family_t>(addr, 0);
  size_t need = family == AF_INET ? sizeof(in_addr) : family == AF_INET6 ? sizeof(in6_addr) : 0;
  if (!need || addrlen < off + need) return nullptr;
  unsigned char bytes[sizeof(in6_addr)];
  std::memcpy(bytes, static_cast<const char*>(addr) + off, need);
  return inet_ntop(family, bytes, text, static_cast<socklen_t>(size));
}

// A raw IPv6-shaped 16-byte field (IB GIDs, EFA addresses).
const char* ntop6(const void* addr, size_t off, char* text, size_t size) noexcept {
  unsigned char bytes[sizeof(in6_addr)];
  std::memcpy(bytes, static_cast<const char*>(addr) + off, sizeof bytes);
  return inet_ntop(AF_INET6, bytes, text, static_cast<socklen_t>(size));
}

void put_sockaddr_in(text_out& out, const void* addr, size_t addrlen) noexcept {
  char text[INET6_ADDRSTRLEN];
  if (ntop(addr, addrlen, offsetof(sockaddr_in, sin_addr), text, sizeof text))
    out.putf("fi_sockaddr_in://%s:%d", text, be16(addr, offsetof(sockaddr_in, sin_port)));
}

void put_sockaddr_in6(text_out& out, const void* addr, size_t addrlen) noexcept {
  char text[INET6_ADDRSTRLEN];
  if (ntop(addr, addrlen, offsetof(sockaddr_in6, sin6_addr), text, sizeof text))
    out.putf("fi_sockaddr_in6://[%s]:%d", text, be16(addr, offsetof(sockaddr_in6, sin6_port)));
}

// struct sockaddr_ib (librdmacm): family, be16 pkey, be32 flowinfo, 16-byte
// GID, be64 service id, be64 service id mask, u64 scope id — 48 bytes. The
// port space is bits 16..27 of the service id; the last field is the low
// byte of the big-endian word at the scope id, which is what 1.17 prints.
void put_sockaddr_ib(text_out& out, const void* addr, size_t addrlen) noexcept {
  char text[INET6_ADDRSTRLEN];
  if (addrlen < 48 || !ntop6(addr, 8, text, sizeof text)) return;
  unsigned pkey = be16(addr, 2);
  unsigned ps = static_cast<unsigned>(be64(addr, 24) >> 16) & 0xfff;
  unsigned last = static_cast<unsigned>(be64(addr, 40) & 0xff);
  out.putf("fi_sockaddr_ib://[%s]:0x%x:0x%x:0x%x", text, pkey, ps, last);
}

// IB UD endpoint name: GID, u32 qpn, u16 lid, u16 pkey, u16, u8 service level.
void put_ib_ud(text_out& out, const void* addr, size_t addrlen) noexcept {
  char text[INET6_ADDRSTRLEN];
  if (addrlen < 27 || !ntop6(addr, 0, text, sizeof text)) return;
  out.putf("fi_addr_ib_ud://%s:%x/%x/%x/%x", text, field<uint32_t>(addr, 16),
           field<uint16_t>(addr, 20), field<uint16_t>(addr, 22), field<uint8_t>(addr, 26));
}

// EFA endpoint name: 16-byte GID, u16 queue pair number, u32 queue key.
void put_efa(text_out& out, const void* addr, size_t addrlen) noexcept {
  char text[INET6_ADDRSTRLEN];
  if (addrlen < 24 || !ntop6(addr, 0, text, sizeof text)) return;
  out.putf("fi_addr_efa://[%s]:%u:%u", text, field<uint16_t>(addr, 16), field<uint32_t>(addr, 20));
}

// Formats made of n 64-bit words printed in hex, ':' between them.
void put_words(text_out& out, const char* prefix, const void* addr, size_t addrlen,
               size_t n) noexcept {
  if (addrlen < n * 8) return;
  out.put(prefix);
  for (size_t i = 0; i < n; ++i)
    out.putf(i ? ":%" PRIx64 : "%" PRIx64, field<uint64_t>(addr, i * 8));
}

void put_hex_bytes(text_out& out, const char* prefix, const void* addr, size_t addrlen) noexcept {
  out.put(prefix);
  for (size_t i = 0; i < addrlen; ++i) out.putf("%02x", field<uint8_t>(addr, i));
}

}  // namespace

void put_addr(text_out& out, uint32_t format, const void* addr, size_t addrlen) noexcept {
  switch (format) {
    case FI_SOCKADDR:
      if (addrlen < sizeof(sa_family_t)) return;
      switch (field<sa_family_t>(addr, 0)) {
        case AF_INET:
          return put_sockaddr_in(out, addr, addrlen);
        case AF_INET6:
          return put_sockaddr_in6(out, addr, addrlen);
        default:
          return;
      }
    case FI_SOCKADDR_IN:
      return put_sockaddr_in(out, addr, addrlen);
    case FI_SOCKADDR_IN6:
      return put_sockaddr_in6(out, addr, addrlen);
    case FI_SOCKADDR_IB:
      return put_sockaddr_ib(out, addr, addrlen);
    case FI_ADDR_PSMX:
      return put_words(out, "fi_addr_psmx://", addr, addrlen, 1);
    case FI_ADDR_GNI:
      return put_words(out, "fi_addr_gni://", addr, addrlen, 1);
    case FI_ADDR_PSMX2:
      return put_words(out, "fi_addr_psmx2://", addr, addrlen, 2);
    case FI_ADDR_PSMX3:
      return put_words(out, "fi_addr_psmx3://", addr, addrlen, 4);
    // These two have no text form in 1.17, which prints where they live.
    case FI_ADDR_BGQ:
      return out.putf("fi_addr_bgq://%p", addr);
    case FI_ADDR_MLX:
      return out.putf("fi_addr_mlx://%p", addr);
    case FI_ADDR_STR:
      return out.put(
          {static_cast<const char*>(addr), strnlen(static_cast<const char*>(addr), addrlen)});
    case FI_ADDR_IB_UD:
      return put_ib_ud(out, addr, addrlen);
    case FI_ADDR_EFA:
      return put_efa(out, addr, addrlen);
    case FI_ADDR_OPX:
      if (addrlen >= 8) out.putf("fi_addr_opx://%016" PRIx64, field<uint64_t>(addr, 0));
      return;
    case FI_ADDR_CXI:
      if (addrlen >= 4) out.putf("fi_addr_cxi://0x%08" PRIx32, field<uint32_t>(addr, 0));
      return;
    // A UCX worker address is an opaque blob: show its bytes.
    case FI_ADDR_UCX:
      return put_hex_bytes(out, "fi_addr_ucx://", addr, addrlen);
    default:  // FI_FORMAT_UNSPEC, provider specific, unknown: opaque
      return;
  }
}

}  // namespace weft::core::tostr
