// SPDX-License-Identifier: MIT
// weft — the argument rules of fi_rma(3) and fi_atomic(3), once for every
// provider.
#include "core/log.hpp"
#include "util/fence.hpp"
#include "util/rma_ops.hpp"

namespace weft::util {

namespace {

// Sum of iovec lengths, false on overflow past `cap` or a NULL buffer that
// is to hold bytes.
bool sum_iov(const iovec* v, size_t n, uint64_t cap, uint64_t* total) noexcept {
  uint64_t t = 0;
  for (size_t i = 0; i < n; ++i) {
    if (v[i].iov_len > cap - t || (v[i].iov_len && !v[i].iov_base)) return false;
    t += v[i].iov_len;
  }
  *total = t;
  return true;
}

bool sum_ioc(const fi_ioc* v, size_t n, uint64_t cap, uint64_t* total) noexcept {
  uint64_t t = 0;
  for (size_t i = 0; i < n; ++i) {
    if (v[i].count > cap - t || (v[i].count && !v[i].addr)) return false;
    t += v[i].count;
  }
  *total = t;
  return true;
}

}  // namespace

errc check_rma(const fi_provider* prov, const rma_request& r, const rma_limits& l,
               uint64_t* total) noexcept {
  const char* what = r.write ? "RMA write" : "RMA read";
  if (!l.fence && fence_refused(prov, what, r.flags)) return errc::inval;
  if (r.count > l.iov_limit || (r.count && !r.iov)) {
    WEFT_WARN(prov, FI_LOG_EP_DATA, "%s with %zu local buffers (1 to %zu, non-null)", what,
              r.count, l.iov_limit);
    return errc::inval;
  }
  if (!r.rma_count || r.rma_count > l.rma_iov_limit || !r.rma) {
    WEFT_WARN(prov, FI_LOG_EP_DATA, "%s with %zu remote buffers (1 to %zu, non-null)", what,
              r.rma_count, l.rma_iov_limit);
    return errc::inval;
  }
  if (!r.write && (r.flags & (FI_INJECT | FI_REMOTE_CQ_DATA))) {
    WEFT_WARN(prov, FI_LOG_EP_DATA, "RMA read with FI_INJECT or FI_REMOTE_CQ_DATA");
    return errc::inval;
  }
  uint64_t local = 0, remote = 0;
  for (size_t i = 0; i < r.count; ++i) {
    if (r.iov[i].iov_len && !r.iov[i].iov_base) {
      WEFT_WARN(prov, FI_LOG_EP_DATA, "%s: local buffer %zu is NULL", what, i);
      return errc::inval;
    }
  }
  if (!sum_iov(r.iov, r.count, l.max_msg, &local)) {
    WEFT_WARN(prov, FI_LOG_EP_DATA, "%s of more than max_msg_size %llu bytes", what,
              static_cast<unsigned long long>(l.max_msg));
    return errc::msgsize;
  }
  for (size_t i = 0; i < r.rma_count; ++i) {
    if (r.rma[i].len > l.max_msg - remote) {
      WEFT_WARN(prov, FI_LOG_EP_DATA, "%s of more than max_msg_size %llu bytes", what,
                static_cast<unsigned long long>(l.max_msg));
      return errc::msgsize;
    }
    remote += r.rma[i].len;
  }
  // fi_rma(3): the data moves between the local and the remote buffers; a
  // difference would leave bytes with nowhere to go.
  if (local != remote) {
    WEFT_WARN(prov, FI_LOG_EP_DATA, "%s: local buffers hold %llu bytes, remote %llu", what,
              static_cast<unsigned long long>(local), static_cast<unsigned long long>(remote));
    return errc::inval;
  }
  if ((r.flags & FI_INJECT) && local > l.inject_size) {
    WEFT_WARN(prov, FI_LOG_EP_DATA, "injected RMA write of %llu bytes exceeds inject_size %zu",
              static_cast<unsigned long long>(local), l.inject_size);
    return errc::msgsize;
  }
  *total = local;
  return errc::ok;
}

errc check_atomic(const fi_provider* prov, const atomic_request& r, const rma_limits& l,
                  size_t* count) noexcept {
  if (!l.fence && fence_refused(prov, "atomic", r.flags)) return errc::inval;
  if (!atomic_supported(r.op, r.datatype, r.kind)) {
    WEFT_WARN(prov, FI_LOG_EP_DATA, "atomic operation %d on datatype %d is not supported%s", r.op,
              r.datatype,
              r.kind == atomic_kind::base      ? ""
              : r.kind == atomic_kind::fetch   ? " as a fetching atomic"
                                               : " as a compare atomic");
    return errc::opnotsupp;
  }
  const size_t size = atomic_type_size(r.datatype);
  const bool read_only = r.op == FI_ATOMIC_READ;
  if ((!read_only && (!r.src_count || !r.src)) || r.src_count > l.iov_limit ||
      (r.src_count && !r.src)) {
    WEFT_WARN(prov, FI_LOG_EP_DATA, "atomic with %zu operand buffers (1 to %zu, non-null)",
              r.src_count, l.iov_limit);
    return errc::inval;
  }
  if (!r.rma_count || r.rma_count > l.rma_iov_limit || !r.rma) {
    WEFT_WARN(prov, FI_LOG_EP_DATA, "atomic with %zu remote buffers (1 to %zu, non-null)",
              r.rma_count, l.rma_iov_limit);
    return errc::inval;
  }
  const uint64_t cap = l.atomic_bytes / size;
  uint64_t remote = 0;
  for (size_t i = 0; i < r.rma_count; ++i) {
    if (r.rma[i].count > cap - remote) {
      remote = cap + 1;
      break;
    }
    remote += r.rma[i].count;
  }
  if (!remote || remote > cap) {
    WEFT_WARN(prov, FI_LOG_EP_DATA, "atomic on %s elements of %zu bytes (1 to %llu per operation)",
              remote ? "too many" : "zero", size, static_cast<unsigned long long>(cap));
    return remote ? errc::msgsize : errc::inval;
  }
  uint64_t n = 0;
  if (!read_only && (!sum_ioc(r.src, r.src_count, cap, &n) || n != remote)) {
    WEFT_WARN(prov, FI_LOG_EP_DATA, "atomic operands hold a different element count than the "
                                     "remote buffers (%llu)",
              static_cast<unsigned long long>(remote));
    return errc::inval;
  }
  if (r.kind == atomic_kind::compare) {
    if (!r.cmp || !r.cmp_count || r.cmp_count > l.iov_limit ||
        !sum_ioc(r.cmp, r.cmp_count, cap, &n) || n != remote) {
      WEFT_WARN(prov, FI_LOG_EP_DATA, "compare atomic: compare buffers missing or of another "
                                       "element count than the remote buffers");
      return errc::inval;
    }
  }
  if (r.kind != atomic_kind::base) {
    if (!r.res || !r.res_count || r.res_count > l.iov_limit ||
        !sum_ioc(r.res, r.res_count, cap, &n) || n != remote) {
      WEFT_WARN(prov, FI_LOG_EP_DATA, "fetching atomic: result buffers missing or of another "
                                       "element count than the remote buffers");
      return errc::inval;
    }
  }
  // fi_atomic(3) FI_INJECT: the constant buffers (operands, compare values)
  // are released at return; results still arrive later, so fetch and
  // compare atomics may inject too. Their constant bytes bound the size.
  const uint64_t constant = (read_only ? 0 : remote * size) +
                            (r.kind == atomic_kind::compare ? remote * size : 0);
  if ((r.flags & FI_INJECT) && constant > l.inject_size) {
    WEFT_WARN(prov, FI_LOG_EP_DATA, "injected atomic of %llu operand bytes exceeds inject_size %zu",
              static_cast<unsigned long long>(constant), l.inject_size);
    return errc::msgsize;
  }
  *count = remote;
  return errc::ok;
}

int query_atomic_logged(const fi_provider* prov, int datatype, int op, fi_atomic_attr* attr,
                        uint64_t flags, size_t max_bytes) noexcept {
  int rc = query_atomic(op, datatype, flags, max_bytes, attr);
  if (rc)
    WEFT_WARN(prov, FI_LOG_DOMAIN, "fi_query_atomic: op %d on datatype %d (flags 0x%llx): %s", op,
              datatype, static_cast<unsigned long long>(flags), fi_strerror(-rc));
  return rc;
}

}  // namespace weft::util
