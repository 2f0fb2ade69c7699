/* SPDX-License-Identifier: MIT */
/* weft — instructions per message: one endpoint sends to itself. Each
 * iteration posts a receive, injects a small message to its own address and
 * reads the CQ until the receive completes (send and receive completions
 * both counted). Run it for N and 11N iterations under
 * `valgrind --tool=callgrind` and divide the difference by 10N: user-space
 * instructions per message, repeatable whatever else the machine does.
 * Builds against either library's headers; runs on either library.
 * Usage: self_inject [-p provider] [-e dgram|rdm] [-t] [-n iterations] [-s size] */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x)                                                                  \
  do {                                                                            \
    int r_ = (int)(x);                                                            \
    if (r_) {                                                                     \
      fprintf(stderr, "%s: %d (%s)\n", #x, r_, fi_strerror(-r_));                 \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

int main(int argc, char **argv) {
  const char *prov = "udp";
  enum fi_ep_type type = FI_EP_DGRAM;
  int tagged = 0, opt;
  long iters = 100000;
  size_t size = 8;
  while ((opt = getopt(argc, argv, "p:e:tn:s:")) != -1) {
    switch (opt) {
      case 'p': prov = optarg; break;
      case 'e': type = strcmp(optarg, "rdm") == 0 ? FI_EP_RDM : FI_EP_DGRAM; break;
      case 't': tagged = 1; break;
      case 'n': iters = atol(optarg); break;
      case 's': size = strtoul(optarg, NULL, 0); break;
      default: return 2;
    }
  }
  struct fi_info *hints = fi_allocinfo(), *info;
  hints->caps = tagged ? FI_TAGGED : FI_MSG;
  hints->ep_attr->type = type;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->fabric_attr->prov_name = strdup(prov);
  CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
  struct fid_fabric *fabric;
  struct fid_domain *domain;
  struct fid_cq *cq;
  struct fid_av *av;
  struct fid_ep *ep;
  CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
  CHECK(fi_domain(fabric, info, &domain, NULL));
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .size = 1024};
  CHECK(fi_cq_open(domain, &cq_attr, &cq, NULL));
  struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
  CHECK(fi_av_open(domain, &av_attr, &av, NULL));
  CHECK(fi_endpoint(domain, info, &ep, NULL));
  CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
  CHECK(fi_ep_bind(ep, &av->fid, 0));
  CHECK(fi_enable(ep));
  char name[256];
  size_t len = sizeof name;
  fi_addr_t self;
  CHECK(fi_getname(&ep->fid, name, &len));
  if (fi_av_insert(av, name, 1, &self, 0, NULL) != 1) return 1;
  char *sbuf = calloc(1, size + 64), *rbuf = calloc(1, size + 64);
  struct fi_context2 ctx;
  struct fi_cq_tagged_entry comp[8];
  for (long i = 0; i < iters; i++) {
    ssize_t ret = tagged ? fi_trecv(ep, rbuf, size, NULL, FI_ADDR_UNSPEC, 7, 0, &ctx)
                         : fi_recv(ep, rbuf, size, NULL, FI_ADDR_UNSPEC, &ctx);
    CHECK(ret);
    do {
      ret = tagged ? fi_tinject(ep, sbuf, size, self, 7) : fi_inject(ep, sbuf, size, self);
      if (ret == -FI_EAGAIN) fi_cq_read(cq, comp, 0);
    } while (ret == -FI_EAGAIN);
    CHECK(ret);
    for (;;) {
      ssize_t n = fi_cq_read(cq, comp, 8);
      if (n == 1 && (comp[0].flags & FI_RECV)) break;
      if (n < 0 && n != -FI_EAGAIN) {
        fprintf(stderr, "fi_cq_read: %zd\n", n);
        return 1;
      }
    }
  }
  printf("%ld messages of %zu bytes through %s\n", iters, size, prov);
  fi_close(&ep->fid);
  fi_close(&av->fid);
  fi_close(&cq->fid);
  fi_close(&domain->fid);
  fi_close(&fabric->fid);
  fi_freeinfo(info);
  fi_freeinfo(hints);
  free(sbuf);
  free(rbuf);
  return 0;
}
