// SPDX-License-Identifier: MIT
// weft — the fi_ops_rma and fi_ops_atomic tables of every provider.
//
// fi_rma(3) and fi_atomic(3) give each operation several call forms (plain,
// vector, msg, inject, data). They all funnel here into one request struct
// and one provider member per interface, so a provider writes the operation
// once and the argument shuffling is written once for all providers:
//
//   template <class Lock> ssize_t Ep::post_rma(const util::rma_request&) noexcept;
//   template <class Lock> ssize_t Ep::post_atomic(const util::atomic_request&) noexcept;
//   uint64_t Ep::tx_op_flags() const noexcept;
//   size_t Ep::atomic_max_bytes() const noexcept;   // per operation, for *valid
//   util::trigger_site Ep::trigger_site() noexcept;  // for FI_TRIGGER
//
// A *msg call with FI_TRIGGER goes to the domain's trigger engine
// (util/trigger.hpp) from the branch that refuses unknown flags.
//
// check_rma / check_atomic apply fi_rma(3)'s and fi_atomic(3)'s rules (and
// refuse FI_FENCE, util/fence.hpp) to a
// request against the provider's limits (logged, -FI_E* out), so providers
// validate identically.
#pragma once

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include "core/errc.hpp"
#include "util/atomic.hpp"
#include "util/trigger.hpp"

namespace weft::util {

// Internal operation flag: the inject forms, which never write a completion
// (fi_rma(3): "No completion event is generated"). A provider-specific bit.
inline constexpr uint64_t op_no_completion = 1ULL << 63;

// Flags an *msg call may carry. FI_FENCE passes this filter; check_rma /
// check_atomic refuse it with -FI_EINVAL unless the provider handles it
// (rma_limits::fence, util/fence.hpp).
inline constexpr uint64_t rma_msg_flags = FI_REMOTE_CQ_DATA | FI_COMPLETION | FI_MORE | FI_INJECT |
                                          FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE |
                                          FI_DELIVERY_COMPLETE | FI_FENCE | FI_RMA | FI_ATOMIC |
                                          FI_READ | FI_WRITE | FI_TRANSMIT | op_quiet;

struct rma_request {
  bool write;
  const iovec* iov;  // local buffers
  void** desc;
  size_t count;
  fi_addr_t addr;
  const fi_rma_iov* rma;  // remote buffers
  size_t rma_count;
  void* context;
  uint64_t flags;  // FI_* operation flags, op_no_completion
  uint64_t data;   // remote CQ data (FI_REMOTE_CQ_DATA)
};

struct atomic_request {
  atomic_kind kind;
  int op;
  int datatype;
  const fi_ioc* src;  // operands (unused for FI_ATOMIC_READ)
  void** desc;
  size_t src_count;
  const fi_ioc* cmp;  // compare kind only
  void** cmp_desc;
  size_t cmp_count;
  fi_ioc* res;  // fetch and compare kinds
  void** res_desc;
  size_t res_count;
  fi_addr_t addr;
  const fi_rma_ioc* rma;
  size_t rma_count;
  void* context;
  uint64_t flags;
  uint64_t data;
};

struct rma_limits {
  size_t iov_limit;      // local buffers per operation
  size_t rma_iov_limit;  // remote buffers per operation
  uint64_t max_msg;      // bytes per RMA operation
  size_t inject_size;    // bytes an inject form carries
  size_t atomic_bytes;   // bytes of operand one atomic operation carries
  // The provider handles FI_FENCE itself (util/fence.hpp, fence_gate);
  // otherwise check_rma / check_atomic refuse it.
  bool fence = false;
};

// fi_rma(3)'s rules: iov counts within the limits, non-null arrays, the local
// and remote lengths equal, at most max_msg bytes (at most inject_size with
// FI_INJECT). ok with *total set, or the error (logged).
errc check_rma(const fi_provider* prov, const rma_request& r, const rma_limits& l,
               uint64_t* total) noexcept;
// fi_atomic(3)'s rules: a supported (op, datatype) for the kind, the element
// counts of operand, compare, result and remote buffers equal, within
// atomic_bytes (operand and compare bytes within inject_size with FI_INJECT,
// in every family). ok with *count (elements) set.
errc check_atomic(const fi_provider* prov, const atomic_request& r, const rma_limits& l,
                  size_t* count) noexcept;
// fi_query_atomic for a provider whose atomics carry at most `max_bytes`
// of operands: util::query_atomic, with the refusal logged.
int query_atomic_logged(const fi_provider* prov, int datatype, int op, fi_atomic_attr* attr,
                        uint64_t flags, size_t max_bytes) noexcept;

template <class Ep, class Lock>
struct rma_ops {
  static Ep* ep(fid_ep* e) noexcept { return Ep::from(e); }

  static ssize_t rma(fid_ep* e, bool write, const void* buf, size_t len, void* desc,
                     fi_addr_t addr, uint64_t raddr, uint64_t key, void* ctx, uint64_t flags,
                     uint64_t data) noexcept {
    iovec iov{const_cast<void*>(buf), len};
    fi_rma_iov rma{raddr, len, key};
    return ep(e)->template post_rma<Lock>({write, &iov, &desc, 1, addr, &rma, 1, ctx, flags, data});
  }
  static ssize_t rmav(fid_ep* e, bool write, const iovec* iov, void** desc, size_t count,
                      fi_addr_t addr, uint64_t raddr, uint64_t key, void* ctx) noexcept {
    size_t len = 0;
    for (size_t i = 0; iov && i < count; ++i) len += iov[i].iov_len;
    fi_rma_iov rma{raddr, len, key};
    return ep(e)->template post_rma<Lock>(
        {write, iov, desc, count, addr, &rma, 1, ctx, ep(e)->tx_op_flags(), 0});
  }
  // Flags outside rma_msg_flags: FI_TRIGGER alone goes to the engine.
  static bool triggered(uint64_t flags) noexcept {
    return (flags & ~rma_msg_flags) == uint64_t{FI_TRIGGER};
  }
  static ssize_t trig(fid_ep* e, const trigger_call& c) noexcept {
    return trigger_intercept(ep(e)->trigger_site(), e, c);
  }
  static ssize_t rmamsg(fid_ep* e, bool write, const fi_msg_rma* m, uint64_t flags) noexcept {
    if (!m) return to_fi(errc::inval);
    if (flags & ~rma_msg_flags) [[unlikely]] {
      if (!triggered(flags)) return to_fi(errc::badflags);
      return trig(e, {.type = write ? FI_OP_WRITE : FI_OP_READ, .rma = m, .flags = flags});
    }
    return ep(e)->template post_rma<Lock>({write, m->msg_iov, m->desc, m->iov_count, m->addr,
                                      m->rma_iov, m->rma_iov_count, m->context, flags, m->data});
  }

  // ---- fi_ops_rma ----
  static ssize_t read(fid_ep* e, void* buf, size_t len, void* desc, fi_addr_t src, uint64_t addr,
                      uint64_t key, void* ctx) noexcept {
    return rma(e, false, buf, len, desc, src, addr, key, ctx, ep(e)->tx_op_flags(), 0);
  }
  static ssize_t readv(fid_ep* e, const iovec* iov, void** desc, size_t count, fi_addr_t src,
                       uint64_t addr, uint64_t key, void* ctx) noexcept {
    return rmav(e, false, iov, desc, count, src, addr, key, ctx);
  }
  static ssize_t readmsg(fid_ep* e, const fi_msg_rma* m, uint64_t flags) noexcept {
    return rmamsg(e, false, m, flags);
  }
  static ssize_t write(fid_ep* e, const void* buf, size_t len, void* desc, fi_addr_t dest,
                       uint64_t addr, uint64_t key, void* ctx) noexcept {
    return rma(e, true, buf, len, desc, dest, addr, key, ctx, ep(e)->tx_op_flags(), 0);
  }
  static ssize_t writev(fid_ep* e, const iovec* iov, void** desc, size_t count, fi_addr_t dest,
                        uint64_t addr, uint64_t key, void* ctx) noexcept {
    return rmav(e, true, iov, desc, count, dest, addr, key, ctx);
  }
  static ssize_t writemsg(fid_ep* e, const fi_msg_rma* m, uint64_t flags) noexcept {
    return rmamsg(e, true, m, flags);
  }
  static ssize_t inject(fid_ep* e, const void* buf, size_t len, fi_addr_t dest, uint64_t addr,
                        uint64_t key) noexcept {
    return rma(e, true, buf, len, nullptr, dest, addr, key, nullptr,
               FI_INJECT | op_no_completion, 0);
  }
  static ssize_t writedata(fid_ep* e, const void* buf, size_t len, void* desc, uint64_t data,
                           fi_addr_t dest, uint64_t addr, uint64_t key, void* ctx) noexcept {
    return rma(e, true, buf, len, desc, dest, addr, key, ctx,
               ep(e)->tx_op_flags() | FI_REMOTE_CQ_DATA, data);
  }
  static ssize_t injectdata(fid_ep* e, const void* buf, size_t len, uint64_t data,
                            fi_addr_t dest, uint64_t addr, uint64_t key) noexcept {
    return rma(e, true, buf, len, nullptr, dest, addr, key, nullptr,
               FI_INJECT | FI_REMOTE_CQ_DATA | op_no_completion, data);
  }

  // ---- fi_ops_atomic ----
  static ssize_t amsg(fid_ep* e, atomic_kind kind, const fi_msg_atomic* m, const fi_ioc* cmp,
                      void** cmp_desc, size_t cmp_count, fi_ioc* res, void** res_desc,
                      size_t res_count, uint64_t flags) noexcept {
    if (!m) return to_fi(errc::inval);
    if (flags & ~rma_msg_flags) [[unlikely]] {
      if (!triggered(flags)) return to_fi(errc::badflags);
      fi_op_type t = kind == atomic_kind::base    ? FI_OP_ATOMIC
                     : kind == atomic_kind::fetch ? FI_OP_FETCH_ATOMIC
                                                  : FI_OP_COMPARE_ATOMIC;
      return trig(e, {.type = t, .atomic = m, .cmp = cmp, .cmp_desc = cmp_desc,
                      .cmp_count = cmp_count, .res = res, .res_desc = res_desc,
                      .res_count = res_count, .flags = flags});
    }
    return ep(e)->template post_atomic<Lock>({kind, raw_enum(m->op), raw_enum(m->datatype), m->msg_iov,
                                         m->desc, m->iov_count, cmp, cmp_desc, cmp_count, res,
                                         res_desc, res_count, m->addr, m->rma_iov,
                                         m->rma_iov_count, m->context, flags, m->data});
  }
  static ssize_t one(fid_ep* e, atomic_kind kind, const void* buf, size_t count, void* desc,
                     const void* cmp, void* cmp_desc, void* res, void* res_desc, fi_addr_t dest,
                     uint64_t addr, uint64_t key, const fi_datatype& dt, const fi_op& op,
                     void* ctx, uint64_t flags) noexcept {
    fi_ioc src{const_cast<void*>(buf), count};
    fi_ioc c{const_cast<void*>(cmp), count};
    fi_ioc r{res, count};
    fi_rma_ioc rma{addr, count, key};
    bool has_cmp = kind == atomic_kind::compare, has_res = kind != atomic_kind::base;
    return ep(e)->template post_atomic<Lock>(
        {kind, raw_enum(op), raw_enum(dt), &src, &desc, 1, has_cmp ? &c : nullptr, &cmp_desc,
         has_cmp ? size_t{1} : 0, has_res ? &r : nullptr, &res_desc, has_res ? size_t{1} : 0,
         dest, &rma, 1, ctx, flags, 0});
  }
  static ssize_t many(fid_ep* e, atomic_kind kind, const fi_ioc* iov, void** desc, size_t count,
                      const fi_ioc* cmp, void** cmp_desc, size_t cmp_count, fi_ioc* res,
                      void** res_desc, size_t res_count, fi_addr_t dest, uint64_t addr,
                      uint64_t key, const fi_datatype& dt, const fi_op& op, void* ctx) noexcept {
    fi_rma_ioc rma{addr, ioc_elements(iov, count), key};
    return ep(e)->template post_atomic<Lock>({kind, raw_enum(op), raw_enum(dt), iov, desc, count, cmp,
                                         cmp_desc, cmp_count, res, res_desc, res_count, dest,
                                         &rma, 1, ctx, ep(e)->tx_op_flags(), 0});
  }

  static ssize_t awrite(fid_ep* e, const void* buf, size_t count, void* desc, fi_addr_t dest,
                        uint64_t addr, uint64_t key, fi_datatype dt, fi_op op, void* ctx) noexcept {
    return one(e, atomic_kind::base, buf, count, desc, nullptr, nullptr, nullptr, nullptr, dest,
               addr, key, dt, op, ctx, ep(e)->tx_op_flags());
  }
  static ssize_t awritev(fid_ep* e, const fi_ioc* iov, void** desc, size_t count, fi_addr_t dest,
                         uint64_t addr, uint64_t key, fi_datatype dt, fi_op op,
                         void* ctx) noexcept {
    return many(e, atomic_kind::base, iov, desc, count, nullptr, nullptr, 0, nullptr, nullptr, 0,
                dest, addr, key, dt, op, ctx);
  }
  static ssize_t awritemsg(fid_ep* e, const fi_msg_atomic* m, uint64_t flags) noexcept {
    return amsg(e, atomic_kind::base, m, nullptr, nullptr, 0, nullptr, nullptr, 0, flags);
  }
  static ssize_t ainject(fid_ep* e, const void* buf, size_t count, fi_addr_t dest, uint64_t addr,
                         uint64_t key, fi_datatype dt, fi_op op) noexcept {
    return one(e, atomic_kind::base, buf, count, nullptr, nullptr, nullptr, nullptr, nullptr,
               dest, addr, key, dt, op, nullptr, FI_INJECT | op_no_completion);
  }
  static ssize_t areadwrite(fid_ep* e, const void* buf, size_t count, void* desc, void* res,
                            void* res_desc, fi_addr_t dest, uint64_t addr, uint64_t key,
                            fi_datatype dt, fi_op op, void* ctx) noexcept {
    return one(e, atomic_kind::fetch, buf, count, desc, nullptr, nullptr, res, res_desc, dest,
               addr, key, dt, op, ctx, ep(e)->tx_op_flags());
  }
  static ssize_t areadwritev(fid_ep* e, const fi_ioc* iov, void** desc, size_t count,
                             fi_ioc* res, void** res_desc, size_t res_count, fi_addr_t dest,
                             uint64_t addr, uint64_t key, fi_datatype dt, fi_op op,
                             void* ctx) noexcept {
    return many(e, atomic_kind::fetch, iov, desc, count, nullptr, nullptr, 0, res, res_desc,
                res_count, dest, addr, key, dt, op, ctx);
  }
  static ssize_t areadwritemsg(fid_ep* e, const fi_msg_atomic* m, fi_ioc* res, void** res_desc,
                               size_t res_count, uint64_t flags) noexcept {
    return amsg(e, atomic_kind::fetch, m, nullptr, nullptr, 0, res, res_desc, res_count, flags);
  }
  static ssize_t acompwrite(fid_ep* e, const void* buf, size_t count, void* desc,
                            const void* cmp, void* cmp_desc, void* res, void* res_desc,
                            fi_addr_t dest, uint64_t addr, uint64_t key, fi_datatype dt,
                            fi_op op, void* ctx) noexcept {
    return one(e, atomic_kind::compare, buf, count, desc, cmp, cmp_desc, res, res_desc, dest,
               addr, key, dt, op, ctx, ep(e)->tx_op_flags());
  }
  static ssize_t acompwritev(fid_ep* e, const fi_ioc* iov, void** desc, size_t count,
                             const fi_ioc* cmp, void** cmp_desc, size_t cmp_count, fi_ioc* res,
                             void** res_desc, size_t res_count, fi_addr_t dest, uint64_t addr,
                             uint64_t key, fi_datatype dt, fi_op op, void* ctx) noexcept {
    return many(e, atomic_kind::compare, iov, desc, count, cmp, cmp_desc, cmp_count, res,
                res_desc, res_count, dest, addr, key, dt, op, ctx);
  }
  static ssize_t acompwritemsg(fid_ep* e, const fi_msg_atomic* m, const fi_ioc* cmp,
                               void** cmp_desc, size_t cmp_count, fi_ioc* res, void** res_desc,
                               size_t res_count, uint64_t flags) noexcept {
    return amsg(e, atomic_kind::compare, m, cmp, cmp_desc, cmp_count, res, res_desc, res_count,
                flags);
  }
  static int valid(fid_ep* e, atomic_kind kind, const fi_datatype& dt, const fi_op& op,
                   size_t* count) noexcept {
    return atomic_valid(raw_enum(op), raw_enum(dt), kind, ep(e)->atomic_max_bytes(), count);
  }
  static int writevalid(fid_ep* e, fi_datatype dt, fi_op op, size_t* count) noexcept {
    return valid(e, atomic_kind::base, dt, op, count);
  }
  static int readwritevalid(fid_ep* e, fi_datatype dt, fi_op op, size_t* count) noexcept {
    return valid(e, atomic_kind::fetch, dt, op, count);
  }
  static int compwritevalid(fid_ep* e, fi_datatype dt, fi_op op, size_t* count) noexcept {
    return valid(e, atomic_kind::compare, dt, op, count);
  }

  static constexpr fi_ops_rma rma_table = {
      .size = sizeof(fi_ops_rma),
      .read = read,
      .readv = readv,
      .readmsg = readmsg,
      .write = write,
      .writev = writev,
      .writemsg = writemsg,
      .inject = inject,
      .writedata = writedata,
      .injectdata = injectdata,
  };
  static constexpr fi_ops_atomic atomic_table = {
      .size = sizeof(fi_ops_atomic),
      .write = awrite,
      .writev = awritev,
      .writemsg = awritemsg,
      .inject = ainject,
      .readwrite = areadwrite,
      .readwritev = areadwritev,
      .readwritemsg = areadwritemsg,
      .compwrite = acompwrite,
      .compwritev = acompwritev,
      .compwritemsg = acompwritemsg,
      .writevalid = writevalid,
      .readwritevalid = readwritevalid,
      .compwritevalid = compwritevalid,
  };
};

}  // namespace weft::util
