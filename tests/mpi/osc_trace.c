/* SPDX-License-Identifier: MIT */
/* weft — evidence that Open MPI's one-sided traffic really goes through
 * libfabric. Preloaded (LD_PRELOAD) into every rank of run_osc.sh: it
 * interposes fi_fabric and, through the objects opened from that fabric,
 * puts counting wrappers in front of every endpoint's RMA and atomic
 * operations. osc.c reads the counters (weft_osc_trace_counts, found with
 * dlsym) around each of its tests, so the test proves, call by call, that
 * MPI_Put became fi_write and so on, instead of trusting log lines.
 *
 * Only calls that the provider accepted (returned 0) are counted: a retried
 * -FI_EAGAIN is one operation, not two. Nothing here changes an argument or
 * a result. The wrapper tables are never freed: the endpoints may be used
 * until the process exits. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>

#include "osc_trace.h"

static unsigned long long counts[OSC_TRACE_NCOUNT];

static void count(int what, unsigned long long n) {
  __atomic_fetch_add(&counts[what], n, __ATOMIC_RELAXED);
}

/* The providers of the fabrics opened, comma-separated, each once. Written
 * by fi_fabric, read by the application after MPI_Init: no lock needed for
 * Open MPI, which opens its fabrics from one thread. */
static char providers[256];

const char *weft_osc_trace_providers(void) { return providers; }

static void note_provider(const char *name) {
  if (!name) name = "(null)";
  size_t len = strlen(name), used = strlen(providers);
  for (const char *p = providers; *p;) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == len && strncmp(p, name, n) == 0) return;
    p += n + (end ? 1 : 0);
  }
  if (used + len + 2 > sizeof providers) return;
  if (used) providers[used++] = ',';
  memcpy(providers + used, name, len + 1);
}

void weft_osc_trace_counts(unsigned long long out[OSC_TRACE_NCOUNT]) {
  for (int i = 0; i < OSC_TRACE_NCOUNT; i++) out[i] = __atomic_load_n(&counts[i], __ATOMIC_RELAXED);
}

static void *xcalloc(size_t n) {
  void *p = calloc(1, n);
  if (!p) {
    fprintf(stderr, "osc_trace: out of memory\n");
    abort();
  }
  return p;
}

static size_t iov_bytes(const struct iovec *iov, size_t n) {
  size_t sum = 0;
  for (size_t i = 0; i < n; i++) sum += iov[i].iov_len;
  return sum;
}

/* ---- RMA: the wrapper table sits in front of the provider's ---- */

struct rma_wrap {
  struct fi_ops_rma ops; /* first: ep->rma points here */
  struct fi_ops_rma *real;
};
#define RMA_REAL(ep) (((struct rma_wrap *)(void *)(ep)->rma)->real)

static ssize_t counted(ssize_t rc, int what, size_t bytes) {
  if (rc == 0) {
    count(what, 1);
    count(what + 1, bytes);
  }
  return rc;
}

static ssize_t w_read(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
                      uint64_t addr, uint64_t key, void *ctx) {
  return counted(RMA_REAL(ep)->read(ep, buf, len, desc, src, addr, key, ctx), OSC_TRACE_READ, len);
}
static ssize_t w_readv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t n,
                       fi_addr_t src, uint64_t addr, uint64_t key, void *ctx) {
  return counted(RMA_REAL(ep)->readv(ep, iov, desc, n, src, addr, key, ctx), OSC_TRACE_READ,
                 iov_bytes(iov, n));
}
static ssize_t w_readmsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags) {
  size_t bytes = msg ? iov_bytes(msg->msg_iov, msg->iov_count) : 0;
  return counted(RMA_REAL(ep)->readmsg(ep, msg, flags), OSC_TRACE_READ, bytes);
}
static ssize_t w_write(struct fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dst,
                       uint64_t addr, uint64_t key, void *ctx) {
  return counted(RMA_REAL(ep)->write(ep, buf, len, desc, dst, addr, key, ctx), OSC_TRACE_WRITE,
                 len);
}
static ssize_t w_writev(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t n,
                        fi_addr_t dst, uint64_t addr, uint64_t key, void *ctx) {
  return counted(RMA_REAL(ep)->writev(ep, iov, desc, n, dst, addr, key, ctx), OSC_TRACE_WRITE,
                 iov_bytes(iov, n));
}
static ssize_t w_writemsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags) {
  size_t bytes = msg ? iov_bytes(msg->msg_iov, msg->iov_count) : 0;
  return counted(RMA_REAL(ep)->writemsg(ep, msg, flags), OSC_TRACE_WRITE, bytes);
}
static ssize_t w_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dst,
                        uint64_t addr, uint64_t key) {
  return counted(RMA_REAL(ep)->inject(ep, buf, len, dst, addr, key), OSC_TRACE_WRITE, len);
}
static ssize_t w_writedata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                           uint64_t data, fi_addr_t dst, uint64_t addr, uint64_t key, void *ctx) {
  return counted(RMA_REAL(ep)->writedata(ep, buf, len, desc, data, dst, addr, key, ctx),
                 OSC_TRACE_WRITE, len);
}
static ssize_t w_injectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
                            fi_addr_t dst, uint64_t addr, uint64_t key) {
  return counted(RMA_REAL(ep)->injectdata(ep, buf, len, data, dst, addr, key), OSC_TRACE_WRITE,
                 len);
}

/* ---- atomics ---- */

struct atomic_wrap {
  struct fi_ops_atomic ops; /* first: ep->atomic points here */
  struct fi_ops_atomic *real;
};
#define ATOMIC_REAL(ep) (((struct atomic_wrap *)(void *)(ep)->atomic)->real)

/* Atomics count elements, not bytes: the datatype is not looked at. */
static size_t ioc_count(const struct fi_ioc *ioc, size_t n) {
  size_t sum = 0;
  for (size_t i = 0; i < n; i++) sum += ioc[i].count;
  return sum;
}

static ssize_t a_write(struct fid_ep *ep, const void *buf, size_t n, void *desc, fi_addr_t dst,
                       uint64_t addr, uint64_t key, enum fi_datatype dt, enum fi_op op,
                       void *ctx) {
  return counted(ATOMIC_REAL(ep)->write(ep, buf, n, desc, dst, addr, key, dt, op, ctx),
                 OSC_TRACE_ATOMIC, n);
}
static ssize_t a_writev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc, size_t n,
                        fi_addr_t dst, uint64_t addr, uint64_t key, enum fi_datatype dt,
                        enum fi_op op, void *ctx) {
  return counted(ATOMIC_REAL(ep)->writev(ep, iov, desc, n, dst, addr, key, dt, op, ctx),
                 OSC_TRACE_ATOMIC, ioc_count(iov, n));
}
static ssize_t a_writemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg, uint64_t flags) {
  size_t n = msg ? ioc_count(msg->msg_iov, msg->iov_count) : 0;
  return counted(ATOMIC_REAL(ep)->writemsg(ep, msg, flags), OSC_TRACE_ATOMIC, n);
}
static ssize_t a_inject(struct fid_ep *ep, const void *buf, size_t n, fi_addr_t dst, uint64_t addr,
                        uint64_t key, enum fi_datatype dt, enum fi_op op) {
  return counted(ATOMIC_REAL(ep)->inject(ep, buf, n, dst, addr, key, dt, op), OSC_TRACE_ATOMIC, n);
}
static ssize_t a_readwrite(struct fid_ep *ep, const void *buf, size_t n, void *desc, void *res,
                           void *res_desc, fi_addr_t dst, uint64_t addr, uint64_t key,
                           enum fi_datatype dt, enum fi_op op, void *ctx) {
  return counted(ATOMIC_REAL(ep)->readwrite(ep, buf, n, desc, res, res_desc, dst, addr, key, dt,
                                            op, ctx),
                 OSC_TRACE_FETCH, n);
}
static ssize_t a_readwritev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc, size_t n,
                            struct fi_ioc *resv, void **res_desc, size_t res_n, fi_addr_t dst,
                            uint64_t addr, uint64_t key, enum fi_datatype dt, enum fi_op op,
                            void *ctx) {
  return counted(ATOMIC_REAL(ep)->readwritev(ep, iov, desc, n, resv, res_desc, res_n, dst, addr,
                                             key, dt, op, ctx),
                 OSC_TRACE_FETCH, ioc_count(resv, res_n));
}
static ssize_t a_readwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                              struct fi_ioc *resv, void **res_desc, size_t res_n,
                              uint64_t flags) {
  return counted(ATOMIC_REAL(ep)->readwritemsg(ep, msg, resv, res_desc, res_n, flags),
                 OSC_TRACE_FETCH, ioc_count(resv, res_n));
}
static ssize_t a_compwrite(struct fid_ep *ep, const void *buf, size_t n, void *desc,
                           const void *cmp, void *cmp_desc, void *res, void *res_desc,
                           fi_addr_t dst, uint64_t addr, uint64_t key, enum fi_datatype dt,
                           enum fi_op op, void *ctx) {
  return counted(ATOMIC_REAL(ep)->compwrite(ep, buf, n, desc, cmp, cmp_desc, res, res_desc, dst,
                                            addr, key, dt, op, ctx),
                 OSC_TRACE_COMPARE, n);
}
static ssize_t a_compwritev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc, size_t n,
                            const struct fi_ioc *cmpv, void **cmp_desc, size_t cmp_n,
                            struct fi_ioc *resv, void **res_desc, size_t res_n, fi_addr_t dst,
                            uint64_t addr, uint64_t key, enum fi_datatype dt, enum fi_op op,
                            void *ctx) {
  return counted(ATOMIC_REAL(ep)->compwritev(ep, iov, desc, n, cmpv, cmp_desc, cmp_n, resv,
                                             res_desc, res_n, dst, addr, key, dt, op, ctx),
                 OSC_TRACE_COMPARE, ioc_count(resv, res_n));
}
static ssize_t a_compwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                              const struct fi_ioc *cmpv, void **cmp_desc, size_t cmp_n,
                              struct fi_ioc *resv, void **res_desc, size_t res_n,
                              uint64_t flags) {
  return counted(ATOMIC_REAL(ep)->compwritemsg(ep, msg, cmpv, cmp_desc, cmp_n, resv, res_desc,
                                               res_n, flags),
                 OSC_TRACE_COMPARE, ioc_count(resv, res_n));
}

/* The query functions (writevalid ...) pass straight through. A provider
 * may install its data-path tables only when the endpoint is enabled
 * (weft does: they depend on the caps and the threading model), so they
 * are wrapped again after every successful FI_ENABLE. */
static void wrap_data_path(struct fid_ep *ep) {
  if (ep->rma && ep->rma->read != w_read) {
    struct rma_wrap *w = xcalloc(sizeof *w);
    w->real = ep->rma;
    w->ops = *ep->rma;
    w->ops.read = w_read;
    w->ops.readv = w_readv;
    w->ops.readmsg = w_readmsg;
    w->ops.write = w_write;
    w->ops.writev = w_writev;
    w->ops.writemsg = w_writemsg;
    w->ops.inject = w_inject;
    w->ops.writedata = w_writedata;
    w->ops.injectdata = w_injectdata;
    ep->rma = &w->ops;
  }
  if (ep->atomic && ep->atomic->write != a_write) {
    struct atomic_wrap *w = xcalloc(sizeof *w);
    w->real = ep->atomic;
    w->ops = *ep->atomic;
    w->ops.write = a_write;
    w->ops.writev = a_writev;
    w->ops.writemsg = a_writemsg;
    w->ops.inject = a_inject;
    w->ops.readwrite = a_readwrite;
    w->ops.readwritev = a_readwritev;
    w->ops.readwritemsg = a_readwritemsg;
    w->ops.compwrite = a_compwrite;
    w->ops.compwritev = a_compwritev;
    w->ops.compwritemsg = a_compwritemsg;
    ep->atomic = &w->ops;
  }
}

struct fid_wrap {
  struct fi_ops ops; /* first: ep->fid.ops points here */
  struct fi_ops *real;
};

static int e_control(struct fid *fid, int command, void *arg) {
  int rc = ((struct fid_wrap *)(void *)fid->ops)->real->control(fid, command, arg);
  if (rc == 0 && command == FI_ENABLE) wrap_data_path((struct fid_ep *)(void *)fid);
  return rc;
}

static void wrap_endpoint(struct fid_ep *ep) {
  struct fid_wrap *w = xcalloc(sizeof *w);
  w->real = ep->fid.ops;
  w->ops = *ep->fid.ops;
  w->ops.control = e_control;
  ep->fid.ops = &w->ops;
  wrap_data_path(ep);
  count(OSC_TRACE_ENDPOINTS, 1);
}

/* ---- the objects on the way to an endpoint ---- */

struct sep_wrap {
  struct fi_ops_ep ops;
  struct fi_ops_ep *real;
};

static int s_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr, struct fid_ep **tx,
                    void *ctx) {
  int rc = ((struct sep_wrap *)(void *)sep->ops)->real->tx_ctx(sep, index, attr, tx, ctx);
  if (rc == 0) wrap_endpoint(*tx);
  return rc;
}

struct domain_wrap {
  struct fi_ops_domain ops;
  struct fi_ops_domain *real;
};
#define DOMAIN_REAL(d) (((struct domain_wrap *)(void *)(d)->ops)->real)

static int d_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
                      void *ctx) {
  int rc = DOMAIN_REAL(domain)->endpoint(domain, info, ep, ctx);
  if (rc == 0) wrap_endpoint(*ep);
  return rc;
}

/* btl ofi can use a scalable endpoint instead (see its btl_ofi_disable_sep;
 * weft's providers have none): its transmit contexts are counted the
 * same way. */
static int d_scalable_ep(struct fid_domain *domain, struct fi_info *info, struct fid_ep **sep,
                         void *ctx) {
  int rc = DOMAIN_REAL(domain)->scalable_ep(domain, info, sep, ctx);
  if (rc == 0 && (*sep)->ops) {
    struct sep_wrap *w = xcalloc(sizeof *w);
    w->real = (*sep)->ops;
    w->ops = *(*sep)->ops;
    w->ops.tx_ctx = s_tx_ctx;
    (*sep)->ops = &w->ops;
  }
  return rc;
}

static void wrap_domain(struct fid_domain *domain) {
  struct domain_wrap *w = xcalloc(sizeof *w);
  w->real = domain->ops;
  w->ops = *domain->ops;
  w->ops.endpoint = d_endpoint;
  w->ops.scalable_ep = d_scalable_ep;
  domain->ops = &w->ops;
}

struct fabric_wrap {
  struct fi_ops_fabric ops;
  struct fi_ops_fabric *real;
};
#define FABRIC_REAL(f) (((struct fabric_wrap *)(void *)(f)->ops)->real)

static int f_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **dom,
                    void *ctx) {
  int rc = FABRIC_REAL(fabric)->domain(fabric, info, dom, ctx);
  if (rc == 0) wrap_domain(*dom);
  return rc;
}

static int f_domain2(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **dom,
                     uint64_t flags, void *ctx) {
  int rc = FABRIC_REAL(fabric)->domain2(fabric, info, dom, flags, ctx);
  if (rc == 0) wrap_domain(*dom);
  return rc;
}

int fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context) {
  static int (*real)(struct fi_fabric_attr *, struct fid_fabric **, void *);
  if (!real) {
    /* The version Open MPI 4.1 and current libfabric headers bind to. */
    real = (int (*)(struct fi_fabric_attr *, struct fid_fabric **, void *))dlvsym(
        RTLD_NEXT, "fi_fabric", "FABRIC_1.1");
    if (!real) {
      fprintf(stderr, "osc_trace: no fi_fabric@FABRIC_1.1 behind this library\n");
      return -FI_ENOSYS;
    }
  }
  int rc = real(attr, fabric, context);
  if (rc != 0) return rc;
  note_provider(attr ? attr->prov_name : NULL);
  struct fabric_wrap *w = xcalloc(sizeof *w);
  w->real = (*fabric)->ops;
  w->ops = *(*fabric)->ops;
  w->ops.domain = f_domain;
  if (w->ops.size >= offsetof(struct fi_ops_fabric, domain2) + sizeof w->ops.domain2 &&
      w->ops.domain2)
    w->ops.domain2 = f_domain2;
  (*fabric)->ops = &w->ops;
  count(OSC_TRACE_FABRICS, 1);
  return 0;
}
