/* SPDX-License-Identifier: MIT */
/* weft — what automatic progress costs: 8-byte operations between two
 * processes on one machine, with the domains asking for manual or automatic
 * data progress (FI_PROGRESS_AUTO).
 *
 * The process forks: the parent is the initiator, the child the target,
 * each pinned to its own core and opening its own fabric, domain, CQ, AV and
 * RDM endpoint after the fork; they swap fi_getname addresses (and the
 * target's region address and key) through two pipes.
 *
 *   -m lat     ping-pong of 8-byte tagged messages (fi_tinject, two receives
 *              kept posted on each side, as bench/msgrate.c -l): prints the
 *              one-way time, round trip / 2. Both sides poll their CQs.
 *   -m put     the initiator writes 8 bytes (fi_write) into the target's
 *              registered memory and waits for the completion, -n times;
 *              prints the time per write.
 *   -m atomic  the same with an 8-byte fi_atomic FI_SUM on FI_UINT64.
 *   -t poll    the target polls its CQ the whole time (it drives progress);
 *   -t sleep   the target sleeps in read(2) on a pipe until the initiator is
 *              done: only automatic progress can serve it (-P auto).
 *   -P auto|manual  data and control progress both sides ask for.
 *   -S         FI_THREAD_SAFE (the lock policy automatic progress implies)
 *              rather than FI_THREAD_DOMAIN.
 *
 * The target checks at the end that its memory holds what the initiator
 * wrote (put: the last value; atomic: the sum of every addend). Any
 * libfabric error, a completion error or a wrong value makes it exit 1 and
 * print no time. Builds against weft's headers (bench/auto_progress.py).
 * Usage: auto_progress [-p provider] [-m lat|put|atomic] [-t poll|sleep]
 *                      [-P auto|manual] [-S] [-n iterations] [-W warm-up]
 *                      [-c initiator-core,target-core] */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct opts {
  const char *prov, *mode;
  int sleeping, automatic, safe, iters, warm, icore, tcore;
};

struct side {
  const char *who;
  struct fi_info *info;
  struct fid_fabric *fabric;
  struct fid_domain *domain;
  struct fid_cq *cq;
  struct fid_av *av;
  struct fid_ep *ep;
  struct fid_mr *mr;
  fi_addr_t peer;
};

/* What the target tells the initiator besides its address. */
struct region {
  uint64_t addr, key;
};

static void die(const struct side *s, const char *what, long ret) {
  fprintf(stderr, "auto_progress %s: %s: %ld (%s)\n", s->who, what, ret, fi_strerror((int)-ret));
  exit(1);
}

#define CHECK(s, x)           \
  do {                        \
    long r_ = (long)(x);      \
    if (r_) die((s), #x, r_); \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set)) perror("sched_setaffinity");
}

static void write_all(int fd, const void *p, size_t n) {
  for (const char *c = p; n;) {
    ssize_t w = write(fd, c, n);
    if (w <= 0) exit(1);
    c += w;
    n -= (size_t)w;
  }
}

static void read_all(int fd, void *p, size_t n) {
  for (char *c = p; n;) {
    ssize_t r = read(fd, c, n);
    if (r <= 0) exit(1);
    c += r;
    n -= (size_t)r;
  }
}

static void open_side(const struct opts *o, struct side *s, void *mem, size_t len) {
  struct fi_info *hints = fi_allocinfo();
  hints->caps = FI_TAGGED | FI_RMA | FI_ATOMIC;
  hints->ep_attr->type = FI_EP_RDM;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->threading = o->safe ? FI_THREAD_SAFE : FI_THREAD_DOMAIN;
  hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  enum fi_progress p = o->automatic ? FI_PROGRESS_AUTO : FI_PROGRESS_MANUAL;
  hints->domain_attr->data_progress = p;
  hints->domain_attr->control_progress = p;
  hints->fabric_attr->prov_name = strdup(o->prov);
  CHECK(s, fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &s->info));
  fi_freeinfo(hints);
  CHECK(s, fi_fabric(s->info->fabric_attr, &s->fabric, NULL));
  CHECK(s, fi_domain(s->fabric, s->info, &s->domain, NULL));
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .size = 64};
  CHECK(s, fi_cq_open(s->domain, &cq_attr, &s->cq, NULL));
  struct fi_av_attr av_attr = {.type = FI_AV_TABLE, .count = 2};
  CHECK(s, fi_av_open(s->domain, &av_attr, &s->av, NULL));
  CHECK(s, fi_endpoint(s->domain, s->info, &s->ep, NULL));
  CHECK(s, fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV));
  CHECK(s, fi_ep_bind(s->ep, &s->av->fid, 0));
  CHECK(s, fi_enable(s->ep));
  CHECK(s, fi_mr_reg(s->domain, mem, len, FI_REMOTE_WRITE | FI_REMOTE_READ | FI_WRITE |
                     FI_READ | FI_SEND | FI_RECV, 0, 0, 0, &s->mr, NULL));
}

static void close_side(struct side *s) {
  CHECK(s, fi_close(&s->mr->fid));
  CHECK(s, fi_close(&s->ep->fid));
  CHECK(s, fi_close(&s->av->fid));
  CHECK(s, fi_close(&s->cq->fid));
  CHECK(s, fi_close(&s->domain->fid));
  CHECK(s, fi_close(&s->fabric->fid));
}

/* One completion, polling; an error completion ends the run. */
static void wait_one(struct side *s, struct fi_cq_tagged_entry *e) {
  for (;;) {
    ssize_t n = fi_cq_read(s->cq, e, 1);
    if (n == 1) return;
    if (n == -FI_EAVAIL) {
      struct fi_cq_err_entry err = {0};
      fi_cq_readerr(s->cq, &err, 0);
      die(s, "error completion", -err.err);
    }
    if (n != -FI_EAGAIN) die(s, "fi_cq_read", n);
  }
}

/* Ping-pong of 8-byte tagged messages; returns seconds for `n` round trips
 * after `warm` ones. */
static double pingpong(struct side *s, int initiator, int n, int warm) {
  uint64_t rbuf[2] = {0}, v = 0;
  struct fi_context2 ctx[2];
  for (int i = 0; i < 2; i++)
    CHECK(s, fi_trecv(s->ep, &rbuf[i], 8, NULL, s->peer, 1, 0, &ctx[i]));
  double t0 = 0;
  for (int i = 0; i < n + warm; i++) {
    if (i == warm) t0 = now_s();
    struct fi_cq_tagged_entry e;
    if (initiator) {
      v = (uint64_t)i;
      ssize_t r;
      while ((r = fi_tinject(s->ep, &v, 8, s->peer, 1)) == -FI_EAGAIN) fi_cq_read(s->cq, NULL, 0);
      CHECK(s, r);
    }
    wait_one(s, &e);
    int k = e.op_context == &ctx[0] ? 0 : 1;
    if (rbuf[k] != (uint64_t)i) die(s, "a message out of sequence", -FI_EOTHER);
    if (!initiator) {
      ssize_t r;
      while ((r = fi_tinject(s->ep, &rbuf[k], 8, s->peer, 1)) == -FI_EAGAIN)
        fi_cq_read(s->cq, NULL, 0);
      CHECK(s, r);
    }
    CHECK(s, fi_trecv(s->ep, &rbuf[k], 8, NULL, s->peer, 1, 0, &ctx[k]));
  }
  return now_s() - t0;
}

static int run(const struct opts *o, int initiator, int rd, int wr) {
  struct side s = {.who = initiator ? "initiator" : "target"};
  pin(initiator ? o->icore : o->tcore);
  static uint64_t mem[64] __attribute__((aligned(64)));
  open_side(o, &s, mem, sizeof mem);
  char name[256];
  size_t len = sizeof name;
  CHECK(&s, fi_getname(&s.ep->fid, name, &len));
  /* Without FI_MR_VIRT_ADDR a target address is an offset into the region. */
  uint64_t base = (s.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)mem : 0;
  struct region mine = {base, fi_mr_key(s.mr)}, theirs;
  write_all(wr, &len, sizeof len);
  write_all(wr, name, len);
  write_all(wr, &mine, sizeof mine);
  char peer[256];
  size_t plen;
  read_all(rd, &plen, sizeof plen);
  if (plen > sizeof peer) exit(1);
  read_all(rd, peer, plen);
  read_all(rd, &theirs, sizeof theirs);
  if (fi_av_insert(s.av, peer, 1, &s.peer, 0, NULL) != 1) die(&s, "fi_av_insert", -FI_EINVAL);
  int lat = strcmp(o->mode, "lat") == 0, atomic = strcmp(o->mode, "atomic") == 0;
  int total = o->iters + o->warm;

  if (lat) {
    double t = pingpong(&s, initiator, o->iters, o->warm);
    if (initiator)
      printf("auto_progress mode=lat progress=%s usec=%.3f\n", o->automatic ? "auto" : "manual",
             t / o->iters / 2 * 1e6);
    close_side(&s);
    return 0;
  }
  char go = 1;
  if (!initiator) {
    /* The target: poll (driving progress) until the initiator's word comes
     * down the pipe, or sleep in read until then. */
    if (o->sleeping) {
      read_all(rd, &go, 1);
    } else {
      for (;;) {
        fi_cq_read(s.cq, NULL, 0);
        fd_set set;
        FD_ZERO(&set);
        FD_SET(rd, &set);
        struct timeval tv = {0, 0};
        /* A system call per pass would slow the target down: look at the
         * pipe every 4096 passes. */
        static unsigned passes;
        if ((++passes & 4095) == 0 && select(rd + 1, &set, NULL, NULL, &tv) > 0) {
          read_all(rd, &go, 1);
          break;
        }
      }
    }
    uint64_t want = atomic ? (uint64_t)total * (total + 1) / 2 : (uint64_t)(total - 1);
    if (mem[0] != want) {
      fprintf(stderr, "auto_progress target: holds %llu, expected %llu\n",
              (unsigned long long)mem[0], (unsigned long long)want);
      exit(1);
    }
    write_all(wr, &go, 1);
    close_side(&s);
    return 0;
  }
  void *desc = fi_mr_desc(s.mr);
  struct fi_context2 ctx;
  double t0 = 0;
  static uint64_t src[1] __attribute__((aligned(64)));
  for (int i = 0; i < total; i++) {
    if (i == o->warm) t0 = now_s();
    ssize_t r;
    if (atomic) {
      src[0] = (uint64_t)i + 1;
      r = fi_atomic(s.ep, src, 1, desc, s.peer, theirs.addr, theirs.key, FI_UINT64, FI_SUM, &ctx);
    } else {
      src[0] = (uint64_t)i;
      r = fi_write(s.ep, src, 8, desc, s.peer, theirs.addr, theirs.key, &ctx);
    }
    CHECK(&s, r);
    struct fi_cq_tagged_entry e;
    wait_one(&s, &e);
  }
  double t = now_s() - t0;
  write_all(wr, &go, 1);
  read_all(rd, &go, 1); /* the target checked its memory */
  printf("auto_progress mode=%s progress=%s target=%s usec=%.3f\n", o->mode,
         o->automatic ? "auto" : "manual", o->sleeping ? "sleep" : "poll", t / o->iters * 1e6);
  close_side(&s);
  return 0;
}

int main(int argc, char **argv) {
  struct opts o = {.prov = "shm", .mode = "lat", .iters = 100000, .warm = 1000, .icore = 1,
                   .tcore = 0};
  int c;
  while ((c = getopt(argc, argv, "p:m:t:P:n:W:c:S")) != -1) {
    switch (c) {
      case 'p': o.prov = optarg; break;
      case 'm': o.mode = optarg; break;
      case 't': o.sleeping = strcmp(optarg, "sleep") == 0; break;
      case 'P': o.automatic = strcmp(optarg, "auto") == 0; break;
      case 'n': o.iters = atoi(optarg); break;
      case 'W': o.warm = atoi(optarg); break;
      case 'S': o.safe = 1; break;
      case 'c': sscanf(optarg, "%d,%d", &o.icore, &o.tcore); break;
      default: return 2;
    }
  }
  if (strcmp(o.mode, "lat") && strcmp(o.mode, "put") && strcmp(o.mode, "atomic")) return 2;
  if (o.sleeping && !o.automatic) {
    fprintf(stderr, "auto_progress: a sleeping target needs -P auto\n");
    return 2;
  }
  int to_target[2], to_init[2];
  if (pipe(to_target) || pipe(to_init)) return 1;
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    alarm(300);
    return run(&o, 0, to_target[0], to_init[1]);
  }
  alarm(300);
  int rc = run(&o, 1, to_init[0], to_target[1]);
  int st = 0;
  waitpid(child, &st, 0);
  return rc || !WIFEXITED(st) || WEXITSTATUS(st);
}
