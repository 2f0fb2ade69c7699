/* SPDX-License-Identifier: MIT */
/* weft — a libfabric client compiled against Debian's headers (libfabric-dev,
 * API 1.17) and run on weft's libfabric.so.1: two datagram endpoints in one
 * process exchange messages through every send/receive form. It proves which
 * library it ran on with dladdr, so it cannot pass on Debian's by accident. */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(expr)                                                             \
  do {                                                                          \
    long rc_ = (long)(expr);                                                    \
    if (rc_) {                                                                  \
      fprintf(stderr, "%s:%d: %s = %ld (%s)\n", __FILE__, __LINE__, #expr, rc_, \
              fi_strerror((int)-rc_));                                          \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)
#define EXPECT(cond)                                                       \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

static struct fid_cq *cq;

/* Polls the CQ for one completion (bounded: a few seconds). */
static void wait_one(struct fi_cq_data_entry *out) {
  for (int spins = 0; spins < 5000000; spins++) {
    ssize_t n = fi_cq_read(cq, out, 1);
    if (n == 1) return;
    if (n == -FI_EAVAIL) {
      struct fi_cq_err_entry err;
      memset(&err, 0, sizeof err);
      fi_cq_readerr(cq, &err, 0);
      fprintf(stderr, "completion error: %s\n", fi_strerror(err.err));
      exit(1);
    }
    EXPECT(n == -FI_EAGAIN);
  }
  fprintf(stderr, "no completion\n");
  exit(1);
}

int main(int argc, char **argv) {
  const char *prov = argc > 1 ? argv[1] : "udp";
  Dl_info where;
  EXPECT(dladdr((void *)fi_getinfo, &where) && where.dli_fname);
  printf("library: %s\n", where.dli_fname);
  if (strncmp(where.dli_fname, "/usr/lib", 8) == 0 || strncmp(where.dli_fname, "/lib", 4) == 0) {
    fprintf(stderr, "ran on the system libfabric, not weft\n");
    return 1;
  }

  struct fi_info *hints = fi_allocinfo(), *info = NULL;
  EXPECT(hints);
  hints->caps = FI_MSG;
  hints->ep_attr->type = FI_EP_DGRAM;
  hints->addr_format = FI_SOCKADDR_IN;
  hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_MSG_PREFIX;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->fabric_attr->prov_name = strdup(prov);
  CHECK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", NULL, FI_SOURCE, hints, &info));
  EXPECT(strcmp(info->fabric_attr->prov_name, prov) == 0);
  EXPECT(info->fabric_attr->api_version == FI_VERSION(1, 17));
  EXPECT(info->ep_attr->type == FI_EP_DGRAM);
  printf("fi_info: %s\n", fi_tostr(info, FI_TYPE_INFO) ? "printed" : "none");

  struct fid_fabric *fabric;
  struct fid_domain *domain;
  struct fid_av *av;
  struct fid_ep *ep[2];
  CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
  CHECK(fi_domain(fabric, info, &domain, NULL));
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA, .size = 64, .wait_obj = FI_WAIT_NONE};
  CHECK(fi_cq_open(domain, &cq_attr, &cq, NULL));
  struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
  CHECK(fi_av_open(domain, &av_attr, &av, NULL));

  char names[2][64];
  fi_addr_t addr[2];
  for (int i = 0; i < 2; i++) {
    CHECK(fi_endpoint(domain, info, &ep[i], NULL));
    CHECK(fi_ep_bind(ep[i], &cq->fid, FI_TRANSMIT | FI_RECV));
    CHECK(fi_ep_bind(ep[i], &av->fid, 0));
    CHECK(fi_enable(ep[i]));
    size_t len = 0;
    EXPECT(fi_getname(&ep[i]->fid, NULL, &len) == -FI_ETOOSMALL && len > 0 && len <= 64);
    CHECK(fi_getname(&ep[i]->fid, names[i], &len));
    EXPECT(fi_av_insert(av, names[i], 1, &addr[i], 0, NULL) == 1);
  }
  EXPECT(addr[0] == 0 && addr[1] == 1);
  /* Closing the domain while it has children is refused. */
  EXPECT(fi_close(&domain->fid) == -FI_EBUSY);

  char rbuf[256], sbuf[256];
  struct fi_cq_data_entry comp;
  struct fi_context ctx[4];
  for (int round = 0; round < 3; round++) {
    memset(rbuf, 0, sizeof rbuf);
    snprintf(sbuf, sizeof sbuf, "weft round %d", round);
    size_t n = strlen(sbuf) + 1;
    CHECK(fi_recv(ep[1], rbuf, sizeof rbuf, NULL, FI_ADDR_UNSPEC, &ctx[0]));
    switch (round) {
      case 0: CHECK(fi_send(ep[0], sbuf, n, NULL, addr[1], &ctx[1])); break;
      case 1: CHECK(fi_inject(ep[0], sbuf, n, addr[1])); break;
      default: {
        struct iovec iov = {sbuf, n};
        struct fi_msg msg = {.msg_iov = &iov, .iov_count = 1, .addr = addr[1], .context = &ctx[2]};
        CHECK(fi_sendmsg(ep[0], &msg, FI_TRANSMIT_COMPLETE | FI_COMPLETION));
      }
    }
    int got_recv = 0, got_send = round == 1; /* inject completes silently */
    while (!got_recv || !got_send) {
      wait_one(&comp);
      if (comp.flags & FI_RECV) {
        EXPECT(comp.op_context == &ctx[0] && comp.len == n && strcmp(rbuf, sbuf) == 0);
        got_recv = 1;
      } else {
        EXPECT(comp.flags & FI_SEND);
        got_send = 1;
      }
    }
  }
  printf("3 rounds exchanged\n");

  for (int i = 0; i < 2; i++) CHECK(fi_close(&ep[i]->fid));
  CHECK(fi_close(&av->fid));
  CHECK(fi_close(&cq->fid));
  CHECK(fi_close(&domain->fid));
  CHECK(fi_close(&fabric->fid));
  fi_freeinfo(info);
  fi_freeinfo(hints);
  printf("compat client: 1 passed, 0 failed\n");
  return 0;
}
