// SPDX-License-Identifier: MIT
// weft — "not supported" ops tables. Inline functions compiled into old
// binaries call ops-table slots without checking them, so an endpoint that
// lacks RMA or atomics still points at a full table whose every slot answers
// -FI_ENOSYS, never at NULL.
#pragma once

#include "core/errc.hpp"

#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

namespace weft::util {

// One function per slot type (deduced from the slot) that fails with `E`.
template <errc E, class F>
struct fail_fn;
template <errc E, class R, class... A>
struct fail_fn<E, R (*)(A...)> {
  static R fn(A...) noexcept { return static_cast<R>(to_fi(E)); }
};
template <class F>
using nosys_fn = fail_fn<errc::nosys, F>;

#define WEFT_NOSYS(table, slot) .slot = &::weft::util::nosys_fn<decltype(table::slot)>::fn
#define WEFT_FAIL(err, table, slot) \
  .slot = &::weft::util::fail_fn<::weft::errc::err, decltype(table::slot)>::fn

inline constexpr fi_ops_cm cm_nosys = {
    .size = sizeof(fi_ops_cm),
    WEFT_NOSYS(fi_ops_cm, setname), WEFT_NOSYS(fi_ops_cm, getname),
    WEFT_NOSYS(fi_ops_cm, getpeer), WEFT_NOSYS(fi_ops_cm, connect),
    WEFT_NOSYS(fi_ops_cm, listen),  WEFT_NOSYS(fi_ops_cm, accept),
    WEFT_NOSYS(fi_ops_cm, reject),  WEFT_NOSYS(fi_ops_cm, shutdown),
    WEFT_NOSYS(fi_ops_cm, join),
};

// fi_ops_cm of an endpoint that has a name and nothing to connect
// (connectionless and scalable endpoints): fi_getname, fi_setname where it
// can be renamed, -FI_ENOSYS for the rest.
constexpr fi_ops_cm cm_name_only(decltype(fi_ops_cm::getname) getname,
                                 decltype(fi_ops_cm::setname) setname = nullptr) noexcept {
  fi_ops_cm t = cm_nosys;
  t.getname = getname;
  if (setname) t.setname = setname;
  return t;
}

inline constexpr fi_ops_msg msg_nosys = {
    .size = sizeof(fi_ops_msg),
    WEFT_NOSYS(fi_ops_msg, recv),     WEFT_NOSYS(fi_ops_msg, recvv),
    WEFT_NOSYS(fi_ops_msg, recvmsg),  WEFT_NOSYS(fi_ops_msg, send),
    WEFT_NOSYS(fi_ops_msg, sendv),    WEFT_NOSYS(fi_ops_msg, sendmsg),
    WEFT_NOSYS(fi_ops_msg, inject),   WEFT_NOSYS(fi_ops_msg, senddata),
    WEFT_NOSYS(fi_ops_msg, injectdata),
};

// Data transfer on an endpoint that is not enabled yet.
inline constexpr fi_ops_msg msg_badstate = {
    .size = sizeof(fi_ops_msg),
    WEFT_FAIL(opbadstate, fi_ops_msg, recv),     WEFT_FAIL(opbadstate, fi_ops_msg, recvv),
    WEFT_FAIL(opbadstate, fi_ops_msg, recvmsg),  WEFT_FAIL(opbadstate, fi_ops_msg, send),
    WEFT_FAIL(opbadstate, fi_ops_msg, sendv),    WEFT_FAIL(opbadstate, fi_ops_msg, sendmsg),
    WEFT_FAIL(opbadstate, fi_ops_msg, inject),   WEFT_FAIL(opbadstate, fi_ops_msg, senddata),
    WEFT_FAIL(opbadstate, fi_ops_msg, injectdata),
};
inline constexpr fi_ops_tagged tagged_badstate = {
    .size = sizeof(fi_ops_tagged),
    WEFT_FAIL(opbadstate, fi_ops_tagged, recv),     WEFT_FAIL(opbadstate, fi_ops_tagged, recvv),
    WEFT_FAIL(opbadstate, fi_ops_tagged, recvmsg),  WEFT_FAIL(opbadstate, fi_ops_tagged, send),
    WEFT_FAIL(opbadstate, fi_ops_tagged, sendv),    WEFT_FAIL(opbadstate, fi_ops_tagged, sendmsg),
    WEFT_FAIL(opbadstate, fi_ops_tagged, inject),   WEFT_FAIL(opbadstate, fi_ops_tagged, senddata),
    WEFT_FAIL(opbadstate, fi_ops_tagged, injectdata),
};

inline constexpr fi_ops_rma rma_nosys = {
    .size = sizeof(fi_ops_rma),
    WEFT_NOSYS(fi_ops_rma, read),      WEFT_NOSYS(fi_ops_rma, readv),
    WEFT_NOSYS(fi_ops_rma, readmsg),   WEFT_NOSYS(fi_ops_rma, write),
    WEFT_NOSYS(fi_ops_rma, writev),    WEFT_NOSYS(fi_ops_rma, writemsg),
    WEFT_NOSYS(fi_ops_rma, inject),    WEFT_NOSYS(fi_ops_rma, writedata),
    WEFT_NOSYS(fi_ops_rma, injectdata),
};

// RMA on an endpoint that is not enabled yet.
inline constexpr fi_ops_rma rma_badstate = {
    .size = sizeof(fi_ops_rma),
    WEFT_FAIL(opbadstate, fi_ops_rma, read),      WEFT_FAIL(opbadstate, fi_ops_rma, readv),
    WEFT_FAIL(opbadstate, fi_ops_rma, readmsg),   WEFT_FAIL(opbadstate, fi_ops_rma, write),
    WEFT_FAIL(opbadstate, fi_ops_rma, writev),    WEFT_FAIL(opbadstate, fi_ops_rma, writemsg),
    WEFT_FAIL(opbadstate, fi_ops_rma, inject),    WEFT_FAIL(opbadstate, fi_ops_rma, writedata),
    WEFT_FAIL(opbadstate, fi_ops_rma, injectdata),
};

inline constexpr fi_ops_tagged tagged_nosys = {
    .size = sizeof(fi_ops_tagged),
    WEFT_NOSYS(fi_ops_tagged, recv),     WEFT_NOSYS(fi_ops_tagged, recvv),
    WEFT_NOSYS(fi_ops_tagged, recvmsg),  WEFT_NOSYS(fi_ops_tagged, send),
    WEFT_NOSYS(fi_ops_tagged, sendv),    WEFT_NOSYS(fi_ops_tagged, sendmsg),
    WEFT_NOSYS(fi_ops_tagged, inject),   WEFT_NOSYS(fi_ops_tagged, senddata),
    WEFT_NOSYS(fi_ops_tagged, injectdata),
};

inline constexpr fi_ops_atomic atomic_nosys = {
    .size = sizeof(fi_ops_atomic),
    WEFT_NOSYS(fi_ops_atomic, write),          WEFT_NOSYS(fi_ops_atomic, writev),
    WEFT_NOSYS(fi_ops_atomic, writemsg),       WEFT_NOSYS(fi_ops_atomic, inject),
    WEFT_NOSYS(fi_ops_atomic, readwrite),      WEFT_NOSYS(fi_ops_atomic, readwritev),
    WEFT_NOSYS(fi_ops_atomic, readwritemsg),   WEFT_NOSYS(fi_ops_atomic, compwrite),
    WEFT_NOSYS(fi_ops_atomic, compwritev),     WEFT_NOSYS(fi_ops_atomic, compwritemsg),
    WEFT_NOSYS(fi_ops_atomic, writevalid),     WEFT_NOSYS(fi_ops_atomic, readwritevalid),
    WEFT_NOSYS(fi_ops_atomic, compwritevalid),
};

inline constexpr fi_ops_collective collective_nosys = {
    .size = sizeof(fi_ops_collective),
    WEFT_NOSYS(fi_ops_collective, barrier),   WEFT_NOSYS(fi_ops_collective, broadcast),
    WEFT_NOSYS(fi_ops_collective, alltoall),  WEFT_NOSYS(fi_ops_collective, allreduce),
    WEFT_NOSYS(fi_ops_collective, allgather), WEFT_NOSYS(fi_ops_collective, reduce_scatter),
    WEFT_NOSYS(fi_ops_collective, reduce),    WEFT_NOSYS(fi_ops_collective, scatter),
    WEFT_NOSYS(fi_ops_collective, gather),    WEFT_NOSYS(fi_ops_collective, msg),
    WEFT_NOSYS(fi_ops_collective, barrier2),
};

template <class T>
T* writable(const T& table) noexcept {
  return const_cast<T*>(&table);  // the C structs hold non-const pointers
}

}  // namespace weft::util
