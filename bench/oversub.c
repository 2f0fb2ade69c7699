/* SPDX-License-Identifier: MIT */
/* weft — many threads, few cores: N endpoint pairs in one process, one
 * thread per endpoint, each pair streaming windows of messages from a to b
 * (and with -b from b to a at the same time). Every thread waits by polling
 * its CQ, as most programs do, and nothing is pinned: with 2N threads on a
 * 2-core machine this shows whether a waiting thread keeps the core from the
 * thread it waits for.
 *
 * Each endpoint has a domain, CQ and AV of its own (FI_THREAD_DOMAIN: one
 * thread per domain). Every message carries its sender's sequence number in
 * its first 8 bytes (its low bytes when shorter) and a pattern derived from
 * it after; the receiver checks each one arrives once and whole. (Not in
 * order of completion: both libraries advertise comp_order FI_ORDER_NONE,
 * and weft's shm completes large receives copied in parallel out of order.)
 * Prints "oversub <provider> pairs=<N> size=<S> both=<0|1>: <MB/s> MB/s"
 * (payload bytes received by every thread over the wall time).
 *
 * Builds against Debian's headers and runs on either library
 * (LD_LIBRARY_PATH), as bench/oversub.py does. Any libfabric error, a wrong
 * or missing message, or a run past 120 s exits 1 and prints no number.
 * Usage: oversub [-p provider] [-a node] [-n pairs] [-s size] [-m messages] [-b] */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { window = 16 };

struct side {
  struct fid_domain* dom;
  struct fid_cq* cq;
  struct fid_av* av;
  struct fid_ep* ep;
  fi_addr_t peer;
  char name[256];
  size_t namelen;
  int sends, recvs; /* messages this thread sends and receives */
};

static const char* prov = "shm";
static const char* node = NULL;
static size_t size = 64;
static int messages = 20000;
static atomic_long received_bytes;
static atomic_int failed;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

#define CHECK(call)                                                                         \
  do {                                                                                      \
    int rc_ = (int)(call);                                                                  \
    if (rc_) {                                                                              \
      fprintf(stderr, "oversub: %s: %s (%d)\n", #call, fi_strerror(rc_ < 0 ? -rc_ : rc_), rc_); \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

static void fill(char* buf, uint64_t seq) {
  memcpy(buf, &seq, size < 8 ? size : 8);
  for (size_t i = 8; i < size; ++i) buf[i] = (char)(seq * 31 + i);
}

/* The sequence number a received message carries, or -1 when its pattern
 * is wrong. Below 8 bytes only its low bytes travel: `expect` (the oldest
 * number not yet seen) completes it, since at most `window` are in flight. */
static long long seq_of(const char* buf, uint64_t expect) {
  uint64_t got = 0;
  memcpy(&got, buf, size < 8 ? size : 8);
  if (size < 8) {
    uint64_t mask = (1ull << (8 * size)) - 1;
    got = (expect & ~mask) | got;
    if (got < expect) got += mask + 1;
  }
  for (size_t i = 8; i < size; ++i)
    if (buf[i] != (char)(got * 31 + i)) return -1;
  return (long long)got;
}

static void open_side(struct fid_fabric* fab, struct fi_info* info, struct side* s) {
  CHECK(fi_domain(fab, info, &s->dom, NULL));
  struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_MSG, .size = 1024};
  CHECK(fi_cq_open(s->dom, &ca, &s->cq, NULL));
  struct fi_av_attr aa = {.type = FI_AV_TABLE};
  CHECK(fi_av_open(s->dom, &aa, &s->av, NULL));
  CHECK(fi_endpoint(s->dom, info, &s->ep, NULL));
  CHECK(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV));
  CHECK(fi_ep_bind(s->ep, &s->av->fid, 0));
  CHECK(fi_enable(s->ep));
  s->namelen = sizeof s->name;
  CHECK(fi_getname(&s->ep->fid, s->name, &s->namelen));
}

static void* run(void* arg) {
  struct side* s = arg;
  char* sb = malloc(size * window);
  char* rb = malloc(size * window);
  struct fi_context sc[window], rc[window];
  int posted = 0, got = 0, sent = 0, done = 0;
  int oldest = 0;  /* every sequence number below it has arrived */
  unsigned char* seen = calloc(s->recvs + 1, 1);
  for (; posted < s->recvs && posted < window; ++posted)
    CHECK(fi_recv(s->ep, rb + (posted % window) * size, size, NULL, FI_ADDR_UNSPEC,
                  &rc[posted % window]));
  double start = now();
  while ((got < s->recvs || done < s->sends) && !failed) {
    while (sent < s->sends && sent - done < window) {
      char* b = sb + (sent % window) * size;
      fill(b, (uint64_t)sent);
      ssize_t r = fi_send(s->ep, b, size, NULL, s->peer, &sc[sent % window]);
      if (r == -FI_EAGAIN) break;
      CHECK(r);
      ++sent;
    }
    struct fi_cq_msg_entry e[16];
    ssize_t n = fi_cq_read(s->cq, e, 16);
    if (n == -FI_EAVAIL) {
      struct fi_cq_err_entry err = {0};
      fi_cq_readerr(s->cq, &err, 0);
      fprintf(stderr, "oversub: completion error %d (%s)\n", err.err, fi_strerror(err.err));
      exit(1);
    }
    if (n < 0 && n != -FI_EAGAIN) CHECK(n);
    for (ssize_t k = 0; k < n; ++k) {
      struct fi_context* c = e[k].op_context;
      if (c >= rc && c < rc + window) {
        int slot = (int)(c - rc);
        long long q = seq_of(rb + slot * size, (uint64_t)oldest);
        if (q < 0 || q >= s->recvs || seen[q] || e[k].len != size) {
          fprintf(stderr, "oversub: message %lld (%zu bytes) wrong, repeated or unknown\n", q,
                  (size_t)e[k].len);
          exit(1);
        }
        seen[q] = 1;
        while (oldest < s->recvs && seen[oldest]) ++oldest;
        ++got;
        received_bytes += (long)size;
        if (posted < s->recvs) {  /* the slot just completed takes the next receive */
          CHECK(fi_recv(s->ep, rb + slot * size, size, NULL, FI_ADDR_UNSPEC, &rc[slot]));
          ++posted;
        }
      } else {
        ++done;
      }
    }
    if (now() - start > 120) {
      fprintf(stderr, "oversub: stalled: %d/%d received, %d/%d sent\n", got, s->recvs, done,
              s->sends);
      exit(1);
    }
  }
  if (oldest != s->recvs) {
    fprintf(stderr, "oversub: %d of %d messages arrived\n", oldest, s->recvs);
    exit(1);
  }
  free(seen);
  free(sb);
  free(rb);
  return NULL;
}

int main(int argc, char** argv) {
  int pairs = 2, both = 0, opt;
  while ((opt = getopt(argc, argv, "p:a:n:s:m:b")) != -1) {
    switch (opt) {
      case 'p': prov = optarg; break;
      case 'a': node = optarg; break;
      case 'n': pairs = atoi(optarg); break;
      case 's': size = strtoul(optarg, NULL, 0); break;
      case 'm': messages = atoi(optarg); break;
      case 'b': both = 1; break;
      default: fprintf(stderr, "usage: oversub [-p prov] [-a node] [-n pairs] [-s size] [-m msgs] [-b]\n"); return 1;
    }
  }
  if (pairs < 1 || size < 1 || messages < 1) return 1;
  struct fi_info* hints = fi_allocinfo();
  hints->caps = FI_MSG;
  hints->mode = FI_CONTEXT;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->fabric_attr->prov_name = strdup(prov);
  struct fi_info* info = NULL;
  CHECK(fi_getinfo(FI_VERSION(1, 17), node, NULL, node ? FI_SOURCE : 0, hints, &info));
  struct fid_fabric* fab;
  CHECK(fi_fabric(info->fabric_attr, &fab, NULL));
  struct side* a = calloc(pairs, sizeof *a);
  struct side* b = calloc(pairs, sizeof *b);
  for (int i = 0; i < pairs; ++i) {
    open_side(fab, info, &a[i]);
    open_side(fab, info, &b[i]);
  }
  for (int i = 0; i < pairs; ++i) {
    if (fi_av_insert(a[i].av, b[i].name, 1, &a[i].peer, 0, NULL) != 1 ||
        fi_av_insert(b[i].av, a[i].name, 1, &b[i].peer, 0, NULL) != 1) {
      fprintf(stderr, "oversub: fi_av_insert failed\n");
      return 1;
    }
    a[i].sends = messages;
    a[i].recvs = both ? messages : 0;
    b[i].sends = both ? messages : 0;
    b[i].recvs = messages;
  }
  pthread_t* th = calloc(2 * pairs, sizeof *th);
  double start = now();
  for (int i = 0; i < pairs; ++i) {
    pthread_create(&th[2 * i], NULL, run, &a[i]);
    pthread_create(&th[2 * i + 1], NULL, run, &b[i]);
  }
  for (int i = 0; i < 2 * pairs; ++i) pthread_join(th[i], NULL);
  double took = now() - start;
  long want = (long)pairs * messages * (both ? 2 : 1) * (long)size;
  if (received_bytes != want) {
    fprintf(stderr, "oversub: %ld bytes received, %ld expected\n", (long)received_bytes, want);
    return 1;
  }
  for (int i = 0; i < pairs; ++i) {
    struct side* s[2] = {&a[i], &b[i]};
    for (int k = 0; k < 2; ++k) {
      CHECK(fi_close(&s[k]->ep->fid));
      CHECK(fi_close(&s[k]->av->fid));
      CHECK(fi_close(&s[k]->cq->fid));
      CHECK(fi_close(&s[k]->dom->fid));
    }
  }
  CHECK(fi_close(&fab->fid));
  fi_freeinfo(info);
  fi_freeinfo(hints);
  printf("oversub %s pairs=%d size=%zu both=%d: %.2f MB/s\n", prov, pairs, size, both,
         want / took / 1e6);
  return 0;
}
