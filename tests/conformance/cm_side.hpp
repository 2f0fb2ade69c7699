// SPDX-License-Identifier: MIT
// weft — conformance: one side of a connection as client programs hold it
// (fabric, domain, EQ, CQ, a passive endpoint, active endpoints), and one EQ
// event read the way they read it (blocking in fi_eq_sread).
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <string>
#include <vector>

namespace conformance {

// Objects of one side, closed in reverse order.
struct objs {
  fid_fabric* fab = nullptr;
  fid_domain* dom = nullptr;
  fid_eq* eq = nullptr;
  fid_cq* cq = nullptr;
  fid_pep* pep = nullptr;
  std::vector<fid_ep*> eps;
  ~objs() {
    for (auto it = eps.rbegin(); it != eps.rend(); ++it) fi_close(&(*it)->fid);
    for (fid* f : {pep ? &pep->fid : nullptr, cq ? &cq->fid : nullptr, eq ? &eq->fid : nullptr,
                   dom ? &dom->fid : nullptr, fab ? &fab->fid : nullptr})
      if (f) fi_close(f);
  }
  // Fabric, domain, EQ and CQ from `info`; 0 or the first error.
  int open(fi_info* info) {
    int r = fi_fabric(info->fabric_attr, &fab, nullptr);
    if (!r) r = fi_domain(fab, info, &dom, nullptr);
    fi_eq_attr ea{};
    ea.wait_obj = FI_WAIT_UNSPEC;
    if (!r) r = fi_eq_open(fab, &ea, &eq, nullptr);
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_CONTEXT;
    if (!r) r = fi_cq_open(dom, &ca, &cq, nullptr);
    return r;
  }
  int listen(fi_info* info) {
    int r = fi_passive_ep(fab, info, &pep, nullptr);
    if (!r) r = fi_pep_bind(pep, &eq->fid, 0);
    if (!r) r = fi_listen(pep);
    return r;
  }
  // An enabled active endpoint from `info` on this side's EQ and CQ.
  int endpoint(fi_info* info, fid_ep** out) {
    int r = fi_endpoint(dom, info, out, nullptr);
    if (r) return r;
    eps.push_back(*out);
    if (!r) r = fi_ep_bind(*out, &eq->fid, 0);
    if (!r) r = fi_ep_bind(*out, &cq->fid, FI_TRANSMIT | FI_RECV);
    if (!r) r = fi_enable(*out);
    return r;
  }
  void drop(fid_ep* ep) {
    std::erase(eps, ep);
    fi_close(&ep->fid);
  }
};

// One EQ event, blocking up to 5 s: its size, or -FI_E*; an error entry's
// code comes back negated with its private data in `data`.
struct event {
  ssize_t rc = 0;
  uint32_t type = 0;
  fid_t fid = nullptr;
  fi_info* info = nullptr;  // FI_CONNREQ: the caller frees it
  std::string data;
};
inline event wait_event(fid_eq* eq, int timeout_ms = 5000) {
  event e;
  alignas(fi_eq_cm_entry) char buf[sizeof(fi_eq_cm_entry) + 1024];
  e.rc = fi_eq_sread(eq, &e.type, buf, sizeof buf, timeout_ms, 0);
  if (e.rc == -FI_EAVAIL) {
    fi_eq_err_entry err{};
    if (fi_eq_readerr(eq, &err, 0) > 0) {
      e.rc = -err.err;
      if (err.err_data && err.err_data_size)
        e.data.assign(static_cast<const char*>(err.err_data), err.err_data_size);
    }
    return e;
  }
  if (e.rc >= static_cast<ssize_t>(sizeof(fi_eq_cm_entry))) {
    auto* cm = reinterpret_cast<fi_eq_cm_entry*>(buf);
    e.fid = cm->fid;
    e.info = cm->info;
    e.data.assign(buf + sizeof(fi_eq_cm_entry), e.rc - sizeof(fi_eq_cm_entry));
  }
  return e;
}

}  // namespace conformance
