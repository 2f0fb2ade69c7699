/* SPDX-License-Identifier: MIT */
/* weft — message rate through a scalable endpoint's contexts against as many
 * endpoints (issue 14: "contexts cost no more than endpoints").
 *
 * -m sep: one scalable endpoint (fi_scalable_ep) with T transmit and T
 * receive contexts, an AV with rx_ctx_bits; thread i sends from transmit
 * context i to receive context i (fi_rx_addr). -m ep: T endpoints of one
 * domain; thread i sends from endpoint i to itself. Either way each thread
 * has CQs of its own (one for its transmit side, one for its receive side),
 * touches nothing another thread does, and runs pinned to core i % ncpu.
 * The domain is FI_THREAD_FID: threads use different contexts (or
 * endpoints) at once.
 *
 * Each thread keeps a window of tagged receives posted and sends -n 8-byte
 * messages with fi_tinject, each carrying its number; a receive completion
 * must carry the next number. The threads start together; the rate is all
 * messages over the time until the last thread has received its last. Any
 * libfabric error or a wrong message exits 1 with a message on stderr.
 * Output: "ctx_rate <mode> <T> threads: <rate> msg/s".
 * Usage: ctx_rate [-p provider] [-m sep|ep] [-t threads] [-n messages] [-w window] */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK(x)                                                             \
  do {                                                                       \
    int r_ = (int)(x);                                                       \
    if (r_) {                                                                \
      fprintf(stderr, "ctx_rate: %s: %d (%s)\n", #x, r_, fi_strerror(-r_));  \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

#define MAX_THREADS 64
#define MAX_WINDOW 256

struct lane {
  int index;
  struct fid_ep *tx, *rx;
  struct fid_cq *tx_cq, *rx_cq;
  fi_addr_t to;
  uint64_t slots[MAX_WINDOW];
  pthread_t thread;
};

static long messages = 1000000;
static int window = 64, threads = 2;
static atomic_int ready, go;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void fail_cq(struct fid_cq *cq, const char *what, int lane) {
  struct fi_cq_err_entry err = {0};
  fi_cq_readerr(cq, &err, 0);
  fprintf(stderr, "ctx_rate: lane %d: %s failed: %s\n", lane, what, fi_strerror(err.err));
  exit(1);
}

static void *run_lane(void *arg) {
  struct lane *l = arg;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(l->index % (ncpu > 0 ? ncpu : 1), &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  for (int i = 0; i < window; i++)
    CHECK(fi_trecv(l->rx, &l->slots[i], sizeof l->slots[i], NULL, FI_ADDR_UNSPEC, 7, 0,
                   &l->slots[i]));
  atomic_fetch_add(&ready, 1);
  while (!atomic_load(&go)) {
  }
  long sent = 0, received = 0;
  struct fi_cq_tagged_entry comp[16];
  while (received < messages) {
    while (sent < messages && sent < received + window) {
      uint64_t v = (uint64_t)sent;
      ssize_t r = fi_tinject(l->tx, &v, sizeof v, l->to, 7);
      if (r == -FI_EAGAIN) break;
      CHECK(r);
      sent++;
    }
    ssize_t n = fi_cq_read(l->tx_cq, comp, 16); /* injects complete nothing; progress */
    if (n == -FI_EAVAIL) fail_cq(l->tx_cq, "a send", l->index);
    n = fi_cq_read(l->rx_cq, comp, 16);
    if (n == -FI_EAVAIL) fail_cq(l->rx_cq, "a receive", l->index);
    for (ssize_t k = 0; k < n; k++) {
      uint64_t *slot = comp[k].op_context;
      if (*slot != (uint64_t)received || comp[k].len != sizeof(uint64_t)) {
        fprintf(stderr, "ctx_rate: lane %d: message %ld carried %llu\n", l->index, received,
                (unsigned long long)*slot);
        exit(1);
      }
      received++;
      if (received + window - 1 < messages)
        CHECK(fi_trecv(l->rx, slot, sizeof *slot, NULL, FI_ADDR_UNSPEC, 7, 0, slot));
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  const char *prov = "shm", *mode = "sep";
  int opt;
  while ((opt = getopt(argc, argv, "p:m:t:n:w:")) != -1) {
    switch (opt) {
      case 'p': prov = optarg; break;
      case 'm': mode = optarg; break;
      case 't': threads = atoi(optarg); break;
      case 'n': messages = atol(optarg); break;
      case 'w': window = atoi(optarg); break;
      default: return 2;
    }
  }
  const int sep = strcmp(mode, "sep") == 0;
  if ((!sep && strcmp(mode, "ep")) || threads < 1 || threads > MAX_THREADS || messages < 1 ||
      window < 1 || window > MAX_WINDOW) {
    fprintf(stderr, "ctx_rate: bad arguments\n");
    return 2;
  }
  struct fi_info *hints = fi_allocinfo(), *info;
  hints->caps = FI_TAGGED | (sep ? FI_NAMED_RX_CTX : 0);
  hints->ep_attr->type = FI_EP_RDM;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->threading = FI_THREAD_FID;
  hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->fabric_attr->prov_name = strdup(prov);
  if (sep) {
    hints->ep_attr->tx_ctx_cnt = (size_t)threads;
    hints->ep_attr->rx_ctx_cnt = (size_t)threads;
  }
  CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
  struct fid_fabric *fabric;
  struct fid_domain *domain;
  struct fid_av *av;
  CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
  CHECK(fi_domain(fabric, info, &domain, NULL));
  int bits = 0;
  while ((1 << bits) < threads) bits++;
  struct fi_av_attr av_attr = {.type = FI_AV_TABLE, .rx_ctx_bits = sep ? bits : 0};
  CHECK(fi_av_open(domain, &av_attr, &av, NULL));
  static struct lane lanes[MAX_THREADS];
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .size = 1024};
  struct fid_ep *sep_ep = NULL;
  fi_addr_t base = FI_ADDR_NOTAVAIL;
  char name[256];
  size_t len;
  if (sep) {
    info->ep_attr->tx_ctx_cnt = (size_t)threads;
    info->ep_attr->rx_ctx_cnt = (size_t)threads;
    CHECK(fi_scalable_ep(domain, info, &sep_ep, NULL));
    CHECK(fi_scalable_ep_bind(sep_ep, &av->fid, 0));
  }
  for (int i = 0; i < threads; i++) {
    struct lane *l = &lanes[i];
    l->index = i;
    CHECK(fi_cq_open(domain, &cq_attr, &l->tx_cq, NULL));
    CHECK(fi_cq_open(domain, &cq_attr, &l->rx_cq, NULL));
    if (sep) {
      CHECK(fi_tx_context(sep_ep, i, NULL, &l->tx, NULL));
      CHECK(fi_rx_context(sep_ep, i, NULL, &l->rx, NULL));
    } else {
      CHECK(fi_endpoint(domain, info, &l->tx, NULL));
      l->rx = l->tx;
      CHECK(fi_ep_bind(l->tx, &av->fid, 0));
    }
    CHECK(fi_ep_bind(l->tx, &l->tx_cq->fid, FI_TRANSMIT));
    CHECK(fi_ep_bind(l->rx, &l->rx_cq->fid, FI_RECV));
    CHECK(fi_enable(l->tx));
    if (sep) CHECK(fi_enable(l->rx));
    if (!sep) {
      len = sizeof name;
      CHECK(fi_getname(&l->tx->fid, name, &len));
      if (fi_av_insert(av, name, 1, &l->to, 0, NULL) != 1) {
        fprintf(stderr, "ctx_rate: fi_av_insert failed\n");
        return 1;
      }
    }
  }
  if (sep) {
    CHECK(fi_enable(sep_ep));
    len = sizeof name;
    CHECK(fi_getname(&sep_ep->fid, name, &len));
    if (fi_av_insert(av, name, 1, &base, 0, NULL) != 1) {
      fprintf(stderr, "ctx_rate: fi_av_insert failed\n");
      return 1;
    }
    for (int i = 0; i < threads; i++) lanes[i].to = fi_rx_addr(base, i, bits);
  }
  for (int i = 0; i < threads; i++) pthread_create(&lanes[i].thread, NULL, run_lane, &lanes[i]);
  while (atomic_load(&ready) < threads) {
  }
  double t0 = now_s();
  atomic_store(&go, 1);
  for (int i = 0; i < threads; i++) pthread_join(lanes[i].thread, NULL);
  double dt = now_s() - t0;
  for (int i = 0; i < threads; i++) {
    if (sep) CHECK(fi_close(&lanes[i].rx->fid));
    CHECK(fi_close(&lanes[i].tx->fid));
    CHECK(fi_close(&lanes[i].tx_cq->fid));
    CHECK(fi_close(&lanes[i].rx_cq->fid));
  }
  if (sep) CHECK(fi_close(&sep_ep->fid));
  CHECK(fi_close(&av->fid));
  CHECK(fi_close(&domain->fid));
  CHECK(fi_close(&fabric->fid));
  printf("ctx_rate %s %d threads: %.0f msg/s\n", mode, threads, (double)messages * threads / dt);
  fi_freeinfo(info);
  fi_freeinfo(hints);
  return 0;
}
