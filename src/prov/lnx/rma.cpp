// SPDX-License-Identifier: MIT
// weft — lnx RMA and atomics: passed through to the core that reaches the
// target, like sends (pass.hpp). The target's memory is registered with
// every core under the one key the application got (mr.cpp), so the key
// is valid whichever core carries the operation, and the target checks it
// as that core checks any key: an error completion at the initiator, the
// target untouched. Descriptors are lnx's and reach no core (the cores are
// opened with mr_mode 0: they need none).
#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include "prov/lnx/pass.hpp"
#include "util/atomic.hpp"
#include "util/nosys.hpp"

namespace weft::lnx {

namespace {

// ---- fi_ops_rma ----

ssize_t read(fid_ep* e, void* buf, size_t len, void*, fi_addr_t src, uint64_t addr, uint64_t key,
             void* ctx) noexcept {
  return via_sized(e, src, len, false, [&](fid_ep* c, fi_addr_t a) {
    return fi_read(c, buf, len, nullptr, a, addr, key, ctx);
  });
}
ssize_t readv(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t src, uint64_t addr,
              uint64_t key, void* ctx) noexcept {
  return via_sized(e, src, total(iov, count), false, [&](fid_ep* c, fi_addr_t a) {
    return fi_readv(c, iov, nullptr, count, a, addr, key, ctx);
  });
}
// The *msg forms: the message with the core's fi_addr and no descriptors.
template <class Call>
ssize_t rma_msg(fid_ep* e, const fi_msg_rma* m, uint64_t flags, const char* name,
                fi_op_type type, Call&& call) noexcept {
  if (!m) return to_fi(errc::inval);
  if (triggered(flags)) [[unlikely]]
    return trigger(e, {.type = type, .rma = m, .flags = flags});
  if (refused(e, flags)) [[unlikely]]
    return refuse_flags(e, name, flags);
  return via_sized(e, m->addr, total(m->msg_iov, m->iov_count), flags & FI_INJECT,
                   [&](fid_ep* c, fi_addr_t a) {
                     fi_msg_rma cm = *m;
                     cm.addr = a;
                     cm.desc = nullptr;
                     return call(c, &cm);
                   });
}
ssize_t readmsg(fid_ep* e, const fi_msg_rma* m, uint64_t flags) noexcept {
  return rma_msg(e, m, flags, "fi_readmsg", FI_OP_READ,
                 [&](fid_ep* c, const fi_msg_rma* cm) { return fi_readmsg(c, cm, flags); });
}
ssize_t write(fid_ep* e, const void* buf, size_t len, void*, fi_addr_t dest, uint64_t addr,
              uint64_t key, void* ctx) noexcept {
  return via_sized(e, dest, len, false, [&](fid_ep* c, fi_addr_t a) {
    return fi_write(c, buf, len, nullptr, a, addr, key, ctx);
  });
}
ssize_t writev(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t dest, uint64_t addr,
               uint64_t key, void* ctx) noexcept {
  return via_sized(e, dest, total(iov, count), false, [&](fid_ep* c, fi_addr_t a) {
    return fi_writev(c, iov, nullptr, count, a, addr, key, ctx);
  });
}
ssize_t writemsg(fid_ep* e, const fi_msg_rma* m, uint64_t flags) noexcept {
  return rma_msg(e, m, flags, "fi_writemsg", FI_OP_WRITE,
                 [&](fid_ep* c, const fi_msg_rma* cm) { return fi_writemsg(c, cm, flags); });
}
ssize_t inject_write(fid_ep* e, const void* buf, size_t len, fi_addr_t dest, uint64_t addr,
                     uint64_t key) noexcept {
  return via_sized(e, dest, len, true, [&](fid_ep* c, fi_addr_t a) {
    return fi_inject_write(c, buf, len, a, addr, key);
  });
}
ssize_t writedata(fid_ep* e, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest,
                  uint64_t addr, uint64_t key, void* ctx) noexcept {
  return via_sized(e, dest, len, false, [&](fid_ep* c, fi_addr_t a) {
    return fi_writedata(c, buf, len, nullptr, data, a, addr, key, ctx);
  });
}
ssize_t inject_writedata(fid_ep* e, const void* buf, size_t len, uint64_t data, fi_addr_t dest,
                         uint64_t addr, uint64_t key) noexcept {
  return via_sized(e, dest, len, true, [&](fid_ep* c, fi_addr_t a) {
    return fi_inject_writedata(c, buf, len, data, a, addr, key);
  });
}

constexpr fi_ops_rma rma_ops = {
    .size = sizeof(fi_ops_rma),
    .read = read,
    .readv = readv,
    .readmsg = readmsg,
    .write = write,
    .writev = writev,
    .writemsg = writemsg,
    .inject = inject_write,
    .writedata = writedata,
    .injectdata = inject_writedata,
};

// ---- fi_ops_atomic ----

// `elements` of `dt`: beyond the operand bytes every core takes (or the
// inject size), -FI_EMSGSIZE whichever core would carry it.
bool atomic_fits(fid_ep* e, size_t elements, fi_datatype dt, bool inject) noexcept {
  size_t each = util::atomic_type_size(dt);
  if (!each) return true;  // the core refuses the datatype itself
  size_t bytes = elements * each;
  const endpoint* ep = endpoint::from(e);
  if (bytes <= ep->atomic_bytes() && (!inject || ep->fits(bytes, true))) [[likely]]
    return true;
  WEFT_WARN(&provider(), FI_LOG_EP_DATA,
            "atomic of %zu elements (%zu bytes): beyond the %zu "
            "bytes of operand every core takes",
            elements, bytes, ep->atomic_bytes());
  return false;
}

// Descriptor arrays the cores are given: none (nullptr is "no descriptors").
template <class Call>
ssize_t atomic_msg(fid_ep* e, const fi_msg_atomic* m, uint64_t flags, const char* name,
                   const util::trigger_call& deferred, Call&& call) noexcept {
  if (!m) return to_fi(errc::inval);
  if (triggered(flags)) [[unlikely]]
    return trigger(e, deferred);
  if (refused(e, flags)) [[unlikely]]
    return refuse_flags(e, name, flags);
  if (!atomic_fits(e, util::ioc_elements(m->msg_iov, m->iov_count), m->datatype, flags & FI_INJECT))
      [[unlikely]]
    return to_fi(errc::msgsize);
  return via(e, m->addr, [&](fid_ep* c, fi_addr_t a) {
    fi_msg_atomic cm = *m;
    cm.addr = a;
    cm.desc = nullptr;
    return call(c, &cm);
  });
}

ssize_t awrite(fid_ep* e, const void* buf, size_t count, void*, fi_addr_t dest, uint64_t addr,
               uint64_t key, fi_datatype dt, fi_op op, void* ctx) noexcept {
  if (!atomic_fits(e, count, dt, false)) [[unlikely]]
    return to_fi(errc::msgsize);
  return via(e, dest, [&](fid_ep* c, fi_addr_t a) {
    return fi_atomic(c, buf, count, nullptr, a, addr, key, dt, op, ctx);
  });
}
ssize_t awritev(fid_ep* e, const fi_ioc* iov, void**, size_t count, fi_addr_t dest, uint64_t addr,
                uint64_t key, fi_datatype dt, fi_op op, void* ctx) noexcept {
  if (!atomic_fits(e, util::ioc_elements(iov, count), dt, false)) [[unlikely]]
    return to_fi(errc::msgsize);
  return via(e, dest, [&](fid_ep* c, fi_addr_t a) {
    return fi_atomicv(c, iov, nullptr, count, a, addr, key, dt, op, ctx);
  });
}
ssize_t awritemsg(fid_ep* e, const fi_msg_atomic* m, uint64_t flags) noexcept {
  return atomic_msg(e, m, flags, "fi_atomicmsg",
                    {.type = FI_OP_ATOMIC, .atomic = m, .flags = flags},
                    [&](fid_ep* c, const fi_msg_atomic* cm) { return fi_atomicmsg(c, cm, flags); });
}
ssize_t ainject(fid_ep* e, const void* buf, size_t count, fi_addr_t dest, uint64_t addr,
                uint64_t key, fi_datatype dt, fi_op op) noexcept {
  if (!atomic_fits(e, count, dt, true)) [[unlikely]]
    return to_fi(errc::msgsize);
  return via(e, dest, [&](fid_ep* c, fi_addr_t a) {
    return fi_inject_atomic(c, buf, count, a, addr, key, dt, op);
  });
}
ssize_t areadwrite(fid_ep* e, const void* buf, size_t count, void*, void* res, void*,
                   fi_addr_t dest, uint64_t addr, uint64_t key, fi_datatype dt, fi_op op,
                   void* ctx) noexcept {
  if (!atomic_fits(e, count, dt, false)) [[unlikely]]
    return to_fi(errc::msgsize);
  return via(e, dest, [&](fid_ep* c, fi_addr_t a) {
    return fi_fetch_atomic(c, buf, count, nullptr, res, nullptr, a, addr, key, dt, op, ctx);
  });
}
ssize_t areadwritev(fid_ep* e, const fi_ioc* iov, void**, size_t count, fi_ioc* res, void**,
                    size_t res_count, fi_addr_t dest, uint64_t addr, uint64_t key, fi_datatype dt,
                    fi_op op, void* ctx) noexcept {
  if (!atomic_fits(e, util::ioc_elements(iov, count), dt, false)) [[unlikely]]
    return to_fi(errc::msgsize);
  return via(e, dest, [&](fid_ep* c, fi_addr_t a) {
    return fi_fetch_atomicv(c, iov, nullptr, count, res, nullptr, res_count, a, addr, key, dt, op,
                            ctx);
  });
}
ssize_t areadwritemsg(fid_ep* e, const fi_msg_atomic* m, fi_ioc* res, void** res_desc,
                      size_t res_count, uint64_t flags) noexcept {
  return atomic_msg(e, m, flags, "fi_fetch_atomicmsg",
                    {.type = FI_OP_FETCH_ATOMIC, .atomic = m, .res = res, .res_desc = res_desc,
                     .res_count = res_count, .flags = flags},
                    [&](fid_ep* c, const fi_msg_atomic* cm) {
    return fi_fetch_atomicmsg(c, cm, res, nullptr, res_count, flags);
  });
}
ssize_t acompwrite(fid_ep* e, const void* buf, size_t count, void*, const void* cmp, void*,
                   void* res, void*, fi_addr_t dest, uint64_t addr, uint64_t key, fi_datatype dt,
                   fi_op op, void* ctx) noexcept {
  if (!atomic_fits(e, count, dt, false)) [[unlikely]]
    return to_fi(errc::msgsize);
  return via(e, dest, [&](fid_ep* c, fi_addr_t a) {
    return fi_compare_atomic(c, buf, count, nullptr, cmp, nullptr, res, nullptr, a, addr, key, dt,
                             op, ctx);
  });
}
ssize_t acompwritev(fid_ep* e, const fi_ioc* iov, void**, size_t count, const fi_ioc* cmp, void**,
                    size_t cmp_count, fi_ioc* res, void**, size_t res_count, fi_addr_t dest,
                    uint64_t addr, uint64_t key, fi_datatype dt, fi_op op, void* ctx) noexcept {
  if (!atomic_fits(e, util::ioc_elements(iov, count), dt, false)) [[unlikely]]
    return to_fi(errc::msgsize);
  return via(e, dest, [&](fid_ep* c, fi_addr_t a) {
    return fi_compare_atomicv(c, iov, nullptr, count, cmp, nullptr, cmp_count, res, nullptr,
                              res_count, a, addr, key, dt, op, ctx);
  });
}
ssize_t acompwritemsg(fid_ep* e, const fi_msg_atomic* m, const fi_ioc* cmp, void** cmp_desc,
                      size_t cmp_count, fi_ioc* res, void** res_desc, size_t res_count,
                      uint64_t flags) noexcept {
  return atomic_msg(e, m, flags, "fi_compare_atomicmsg",
                    {.type = FI_OP_COMPARE_ATOMIC, .atomic = m, .cmp = cmp, .cmp_desc = cmp_desc,
                     .cmp_count = cmp_count, .res = res, .res_desc = res_desc,
                     .res_count = res_count, .flags = flags},
                    [&](fid_ep* c, const fi_msg_atomic* cm) {
    return fi_compare_atomicmsg(c, cm, cmp, nullptr, cmp_count, res, nullptr, res_count, flags);
  });
}

// What every core can do (fi_query_atomic on the core domains, which need
// no enabled endpoint): each must take the (op, datatype), and the count
// is the smallest.
template <uint64_t Kind>
int valid_everywhere(fid_ep* e, fi_datatype dt, fi_op op, size_t* count) noexcept {
  if (!count) return to_fi(errc::inval);
  size_t least = SIZE_MAX;
  for (const core_ep& c : endpoint::from(e)->cores()) {
    fi_atomic_attr a{};
    if (int ret = fi_query_atomic(c.cd->domain, dt, op, &a, Kind)) return ret;
    least = std::min(least, a.count);
  }
  *count = least == SIZE_MAX ? 0 : least;
  return 0;
}

constexpr fi_ops_atomic atomic_ops = {
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
    .writevalid = valid_everywhere<0>,
    .readwritevalid = valid_everywhere<FI_FETCH_ATOMIC>,
    .compwritevalid = valid_everywhere<FI_COMPARE_ATOMIC>,
};

// Before fi_enable: the data slots answer -FI_EOPBADSTATE, the queries work.
constexpr fi_ops_atomic atomic_before_enable = [] {
  fi_ops_atomic t = atomic_ops;
  t.write = util::fail_fn<errc::opbadstate, decltype(t.write)>::fn;
  t.writev = util::fail_fn<errc::opbadstate, decltype(t.writev)>::fn;
  t.writemsg = util::fail_fn<errc::opbadstate, decltype(t.writemsg)>::fn;
  t.inject = util::fail_fn<errc::opbadstate, decltype(t.inject)>::fn;
  t.readwrite = util::fail_fn<errc::opbadstate, decltype(t.readwrite)>::fn;
  t.readwritev = util::fail_fn<errc::opbadstate, decltype(t.readwritev)>::fn;
  t.readwritemsg = util::fail_fn<errc::opbadstate, decltype(t.readwritemsg)>::fn;
  t.compwrite = util::fail_fn<errc::opbadstate, decltype(t.compwrite)>::fn;
  t.compwritev = util::fail_fn<errc::opbadstate, decltype(t.compwritev)>::fn;
  t.compwritemsg = util::fail_fn<errc::opbadstate, decltype(t.compwritemsg)>::fn;
  return t;
}();

}  // namespace

const fi_ops_rma* endpoint::rma_table(bool enabled) noexcept {
  return enabled ? &rma_ops : &util::rma_badstate;
}
const fi_ops_atomic* endpoint::atomic_table(bool enabled) noexcept {
  return enabled ? &atomic_ops : &atomic_before_enable;
}

// fi_query_atomic on the lnx domain: what every core domain supports, the
// smallest count.
int query_atomic(util::domain& d, int datatype, int op, fi_atomic_attr* attr,
                 uint64_t flags) noexcept {
  if (!attr) return to_fi(errc::inval);
  fi_atomic_attr least{};
  bool first = true;
  for (auto& cd : static_cast<domain&>(d).cores()) {
    fi_atomic_attr a{};
    if (int ret = fi_query_atomic(cd->domain, static_cast<fi_datatype>(datatype),
                                  static_cast<fi_op>(op), &a, flags))
      return ret;
    if (first || a.count < least.count) least.count = a.count;
    least.size = a.size;
    first = false;
  }
  *attr = least;
  return 0;
}

}  // namespace weft::lnx
