/* SPDX-License-Identifier: MIT */
/* weft — instructions per message: one endpoint sends to itself. Each
 * iteration posts a receive, injects a small message to its own address and
 * reads the CQ until the receive completes (send and receive completions
 * both counted). Run it for N and 11N iterations under
 * `valgrind --tool=callgrind` and divide the difference by 10N: user-space
 * instructions per message, repeatable whatever else the machine does.
 * Builds against either library's headers; runs on either library.
 *
 * Every message is checked: the sender stamps its sequence number into the
 * first (and, from 16 bytes, the last) 8 bytes, the receiver compares them
 * and the completion's length, tag and context. The bytes in between carry
 * a fixed pattern, compared in full on the first and the last message (the
 * receive buffer is zeroed before them): a fixed cost the N / 11N difference
 * removes, so the count per message grows only by the stamp's few
 * instructions. Any libfabric error, an unexpected completion or wrong data
 * exits 1 with a message on stderr; the last line on stdout says how many
 * messages were checked.
 * With -x the endpoint is a scalable one (fi_scalable_ep) with one transmit
 * and one receive context, bound to the same CQ: the message goes from the
 * transmit context to the receive context, so the count is what a message
 * through contexts costs, to hold against a plain endpoint's.
 * Usage: self_inject [-p provider] [-e dgram|rdm] [-t] [-x] [-n iterations] [-s size] */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <getopt.h>
#include <stdint.h>
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

#define CLOSE(f) CHECK(fi_close(&(f)->fid))

/* The fixed pattern of byte j (beyond the stamps). */
static unsigned char pattern(size_t j) { return (unsigned char)(j * 7 + 1); }

/* The stamp: the sequence number's low bytes at the start, and at the end
 * from 16 bytes. Fixed-size copies from 8 bytes, so the compiler makes them
 * one load or store each (the check must not weigh on the count). */
static inline void stamp(char *buf, size_t size, uint64_t seq) {
  if (size < 8) {
    memcpy(buf, &seq, size);
    return;
  }
  memcpy(buf, &seq, 8);
  if (size >= 16) memcpy(buf + size - 8, &seq, 8);
}

static inline int stamp_ok(const char *buf, size_t size, uint64_t seq) {
  if (size < 8) return memcmp(buf, &seq, size) == 0;
  uint64_t head, tail = seq;
  memcpy(&head, buf, 8);
  if (size >= 16) memcpy(&tail, buf + size - 8, 8);
  return head == seq && tail == seq;
}

static int body_ok(const char *buf, size_t size) {
  for (size_t j = 8; j < (size >= 16 ? size - 8 : size); j++)
    if ((unsigned char)buf[j] != pattern(j)) return 0;
  return 1;
}

/* What fi_cq_read returned (n) when it is not exactly one receive
 * completion: an error exits; send completions are skipped; a receive
 * completion is moved to comp[0] (returns 1), a second one in the same read
 * is an error (one receive is posted at a time). */
static int next_recv(struct fid_cq *cq, struct fi_cq_tagged_entry *comp, ssize_t n, long i) {
  if (n == 0 || n == -FI_EAGAIN) return 0;
  if (n == -FI_EAVAIL) {
    struct fi_cq_err_entry err = {0};
    fi_cq_readerr(cq, &err, 0);
    fprintf(stderr, "self_inject: message %ld: completion error %d (%s)\n", i, err.err,
            fi_strerror(err.err));
    exit(1);
  }
  if (n < 0) {
    fprintf(stderr, "self_inject: message %ld: fi_cq_read: %zd (%s)\n", i, n, fi_strerror((int)-n));
    exit(1);
  }
  int found = 0;
  for (ssize_t k = 0; k < n; k++) {
    if (!(comp[k].flags & FI_RECV)) continue;
    if (found++) {
      fprintf(stderr, "self_inject: message %ld: two receive completions\n", i);
      exit(1);
    }
    comp[0] = comp[k];
  }
  return found;
}

int main(int argc, char **argv) {
  const char *prov = "udp";
  enum fi_ep_type type = FI_EP_DGRAM;
  int tagged = 0, contexts = 0, opt;
  long iters = 100000;
  size_t size = 8;
  while ((opt = getopt(argc, argv, "p:e:txn:s:")) != -1) {
    switch (opt) {
      case 'p': prov = optarg; break;
      case 'e': type = strcmp(optarg, "rdm") == 0 ? FI_EP_RDM : FI_EP_DGRAM; break;
      case 't': tagged = 1; break;
      case 'x': contexts = 1; break;
      case 'n': iters = atol(optarg); break;
      case 's': size = strtoul(optarg, NULL, 0); break;
      default: return 2;
    }
  }
  if (iters <= 0 || size == 0) {
    fprintf(stderr, "self_inject: iterations and size must be positive\n");
    return 2;
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
  struct fid_ep *ep, *tx, *rx; /* tx and rx are ep unless -x */
  CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
  CHECK(fi_domain(fabric, info, &domain, NULL));
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .size = 1024};
  CHECK(fi_cq_open(domain, &cq_attr, &cq, NULL));
  struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
  CHECK(fi_av_open(domain, &av_attr, &av, NULL));
  if (contexts) {
    info->ep_attr->tx_ctx_cnt = 1;
    info->ep_attr->rx_ctx_cnt = 1;
    CHECK(fi_scalable_ep(domain, info, &ep, NULL));
    CHECK(fi_scalable_ep_bind(ep, &av->fid, 0));
    CHECK(fi_tx_context(ep, 0, NULL, &tx, NULL));
    CHECK(fi_rx_context(ep, 0, NULL, &rx, NULL));
    CHECK(fi_ep_bind(tx, &cq->fid, FI_TRANSMIT));
    CHECK(fi_ep_bind(rx, &cq->fid, FI_RECV));
    CHECK(fi_enable(tx));
    CHECK(fi_enable(rx));
  } else {
    CHECK(fi_endpoint(domain, info, &ep, NULL));
    CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
    CHECK(fi_ep_bind(ep, &av->fid, 0));
    tx = rx = ep;
  }
  CHECK(fi_enable(ep));
  char name[256];
  size_t len = sizeof name;
  fi_addr_t self;
  CHECK(fi_getname(&ep->fid, name, &len));
  if (fi_av_insert(av, name, 1, &self, 0, NULL) != 1) {
    fprintf(stderr, "fi_av_insert of our own address failed\n");
    return 1;
  }
  char *sbuf = calloc(1, size + 64), *rbuf = calloc(1, size + 64);
  if (!sbuf || !rbuf) return 1;
  for (size_t j = 0; j < size; j++) sbuf[j] = (char)pattern(j);
  struct fi_context2 ctx;
  struct fi_cq_tagged_entry comp[8];
  for (long i = 0; i < iters; i++) {
    if (i == iters - 1) memset(rbuf, 0, size); /* the last one is checked in full */
    stamp(sbuf, size, (uint64_t)i + 1);
    ssize_t ret = tagged ? fi_trecv(rx, rbuf, size, NULL, FI_ADDR_UNSPEC, 7, 0, &ctx)
                         : fi_recv(rx, rbuf, size, NULL, FI_ADDR_UNSPEC, &ctx);
    CHECK(ret);
    do {
      ret = tagged ? fi_tinject(tx, sbuf, size, self, 7) : fi_inject(tx, sbuf, size, self);
      if (ret == -FI_EAGAIN) next_recv(cq, comp, fi_cq_read(cq, comp, 0), i); /* progress */
    } while (ret == -FI_EAGAIN);
    CHECK(ret);
    /* The common case in few instructions: one completion, our receive. */
    for (;;) {
      ssize_t n = fi_cq_read(cq, comp, 8);
      if (n == 1 && (comp[0].flags & FI_RECV)) break;
      if (n != -FI_EAGAIN && next_recv(cq, comp, n, i)) break;
    }
    if (comp[0].op_context != &ctx || comp[0].len != size || (tagged && comp[0].tag != 7)) {
      fprintf(stderr, "self_inject: message %ld: unexpected receive completion "
              "(context %p, length %zu, tag %llu)\n", i, comp[0].op_context, comp[0].len,
              (unsigned long long)comp[0].tag);
      return 1;
    }
    if (!stamp_ok(rbuf, size, (uint64_t)i + 1) || (i == 0 && !body_ok(rbuf, size))) {
      fprintf(stderr, "self_inject: message %ld of %zu bytes arrived with wrong data\n", i, size);
      return 1;
    }
  }
  if (!body_ok(rbuf, size)) {
    fprintf(stderr, "self_inject: the last message arrived with wrong data\n");
    return 1;
  }
  if (contexts) {
    CLOSE(tx);
    CLOSE(rx);
  }
  CLOSE(ep);
  CLOSE(av);
  CLOSE(cq);
  CLOSE(domain);
  CLOSE(fabric);
  printf("%ld messages of %zu bytes through %s%s, every one checked\n", iters, size,
         info->fabric_attr->prov_name, contexts ? " contexts" : "");
  fi_freeinfo(info);
  fi_freeinfo(hints);
  free(sbuf);
  free(rbuf);
  return 0;
}
