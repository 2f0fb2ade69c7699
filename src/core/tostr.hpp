// SPDX-License-Identifier: MIT
// weft — fi_tostr internals: a bounded text writer, the name tables and the
// address formatter shared by tostr.cpp (structures) and tostr_names.cpp.
//
// The output format is that of libfabric 1.17 (`fi_info -v` is parsed by
// scripts), established by running Debian's library as a black box; see
// tests/compat/tostr_compare.c. Values 1.17 does not know are printed by the
// name of their constant.
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace weft::core::tostr {

// Appends to a caller-owned buffer and never writes past it. The text is
// always NUL-terminated; what does not fit is dropped (the caller sees a
// prefix of the full text).
class text_out {
 public:
  // cap >= 1: there is always room for the terminating NUL.
  text_out(char* buf, size_t cap) noexcept : buf_(buf), cap_(cap) { buf_[0] = '\0'; }

  void put(std::string_view s) noexcept;
  void putf(const char* fmt, ...) noexcept __attribute__((format(printf, 2, 3)));
  void vputf(const char* fmt, va_list ap) noexcept __attribute__((format(printf, 2, 0)));

  // For callbacks that write a string themselves (an object's fi_ops::tostr):
  // the free tail of the buffer, its size including the NUL slot, and
  // adopt_tail() to take what was written there as part of the text.
  char* tail() noexcept { return buf_ + len_; }
  size_t room() const noexcept { return cap_ - len_; }
  void adopt_tail() noexcept;

  size_t size() const noexcept { return len_; }
  // Drops everything after the first n characters.
  void truncate(size_t n) noexcept;

 private:
  char* buf_;
  size_t cap_;
  size_t len_ = 0;
};

// Bit 48 of a capability set means FI_VARIABLE_MSG to API 1.x callers and
// FI_EXACT_DIRECTED_RECV to API 2.x callers.
enum class api_names { v1, v2 };

// The flag sets fi_tostr names, each printed in its own table order.
enum class flag_set {
  caps,
  op_flags,
  msg_order,
  mode,
  cq_flags,  // completion flags (FI_TYPE_CQ_EVENT_FLAGS)
  mr_mode,
  av_flags,   // fi_av_attr::flags
  cq_open,    // fi_cq_attr::flags
  cntr_open,  // fi_cntr_attr::flags
  mr_access,  // fi_mr_attr::access
};

// Names of the set bits of v, separated by ", "; unknown bits are skipped.
void put_flags(text_out& out, flag_set set, uint64_t v, api_names names = api_names::v1) noexcept;

// comp_order of tx/rx attributes: FI_ORDER_STRICT / FI_ORDER_NONE for the
// nine message-order bits taken together, plus FI_ORDER_DATA.
void put_comp_order(text_out& out, uint64_t v) noexcept;

// The enumerations fi_tostr names.
enum class enum_set {
  ep_type,
  addr_format,
  threading,
  progress,
  protocol,
  av_type,
  atomic_type,
  atomic_op,
  eq_event,
  op_type,
  collective_op,
  hmem_iface,
  cq_format,
  log_level,
  log_subsys,
  resource_mgmt,
  wait_obj,
  cq_wait_cond,
  cntr_events,
};

// The constant's name; "Provider specific" for address formats and
// protocols with FI_PROV_SPECIFIC set; "Unknown" otherwise.
const char* enum_name(enum_set set, int64_t v) noexcept;

// An address as "<format>://..." (nothing for formats without a text form,
// or when addrlen is too short for what the format needs).
void put_addr(text_out& out, uint32_t format, const void* addr, size_t addrlen) noexcept;

}  // namespace weft::core::tostr
