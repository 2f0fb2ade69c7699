/* SPDX-License-Identifier: MIT */
/* weft — what a peer costs an RDM endpoint: one receiving endpoint in this
 * process, and N sending endpoints spread over K child processes (loopback),
 * each sending M 64-byte messages to it. The receiver's memory is sampled
 * before any traffic, once every message has arrived (every peer active),
 * and after a second of quiet (idle): the process's resident set
 * (/proc/self/statm) and the kernel's socket memory for the protocol
 * (/proc/net/sockstat: TCP or UDP "mem", in pages; every process's sockets,
 * so the senders' are in it too and it is reported apart).
 * Prints one line:
 *   peer_scale <provider> peers=<N> rss_before=<B> rss_active=<B> rss_idle=<B>
 *     per_peer_active=<B> per_peer_idle=<B> kernel_before=<B> kernel_active=<B>
 * Builds against Debian's headers and runs on either library
 * (LD_LIBRARY_PATH). Any libfabric error, a lost or duplicated message, or a
 * run past 120 s exits 1 and prints no number.
 * Usage: peer_scale [-p provider] [-n peers] [-k processes] [-m messages] */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(call)                                                                   \
  do {                                                                                \
    int rc_ = (int)(call);                                                            \
    if (rc_) {                                                                        \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, fi_strerror(-rc_)); \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

enum { msg_size = 64 };

static const char* prov = "udp";
static struct fi_info* info;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static long rss_bytes(void) {
  long pages = 0, resident = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (!f || fscanf(f, "%ld %ld", &pages, &resident) != 2) exit(1);
  fclose(f);
  return resident * sysconf(_SC_PAGESIZE);
}

/* The kernel's socket memory for the provider's protocol, in bytes. */
static long kernel_bytes(void) {
  const char* key = strcmp(prov, "tcp") == 0 ? "TCP:" : "UDP:";
  char line[256];
  long mem = 0;
  FILE* f = fopen("/proc/net/sockstat", "r");
  if (!f) return -1;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, key, strlen(key))) continue;
    char* m = strstr(line, " mem ");
    if (m) mem = atol(m + 5);
  }
  fclose(f);
  return mem * sysconf(_SC_PAGESIZE);
}

struct stack {
  struct fid_fabric* fab;
  struct fid_domain* dom;
  struct fid_cq* cq;
  struct fid_av* av;
};

static void open_stack(struct stack* s, size_t cq_size) {
  CHECK(fi_fabric(info->fabric_attr, &s->fab, NULL));
  CHECK(fi_domain(s->fab, info, &s->dom, NULL));
  struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_CONTEXT, .size = cq_size};
  CHECK(fi_cq_open(s->dom, &ca, &s->cq, NULL));
  struct fi_av_attr aa = {.type = FI_AV_TABLE};
  CHECK(fi_av_open(s->dom, &aa, &s->av, NULL));
}

static struct fid_ep* open_ep(struct stack* s) {
  struct fid_ep* ep;
  CHECK(fi_endpoint(s->dom, info, &ep, NULL));
  CHECK(fi_ep_bind(ep, &s->cq->fid, FI_TRANSMIT | FI_RECV));
  CHECK(fi_ep_bind(ep, &s->av->fid, 0));
  CHECK(fi_enable(ep));
  return ep;
}

/* One child: `count` endpoints, each sending `messages` to the receiver;
 * then it stays (its peers stay alive) until killed. */
static void child(const char* name, size_t namelen, int count, int messages, int done_fd) {
  struct stack s;
  open_stack(&s, 4096);
  fi_addr_t to;
  if (fi_av_insert(s.av, name, 1, &to, 0, NULL) != 1) exit(1);
  struct fid_ep** eps = calloc((size_t)count, sizeof *eps);
  char buf[msg_size];
  memset(buf, 'p', sizeof buf);
  for (int i = 0; i < count; ++i) eps[i] = open_ep(&s);
  long pending = 0;
  double deadline = now_s() + 120;
  for (int m = 0; m < messages; ++m) {
    for (int i = 0; i < count; ++i) {
      ssize_t r;
      while ((r = fi_send(eps[i], buf, sizeof buf, NULL, to, NULL)) == -FI_EAGAIN) {
        struct fi_cq_entry e[64];
        ssize_t n = fi_cq_read(s.cq, e, 64);
        if (n > 0) pending -= n;
        if (now_s() > deadline) exit(1);
      }
      CHECK(r);
      ++pending;
    }
  }
  while (pending > 0) {
    struct fi_cq_entry e[64];
    ssize_t n = fi_cq_read(s.cq, e, 64);
    if (n > 0) pending -= n;
    if (n == -FI_EAVAIL || now_s() > deadline) exit(1);
  }
  if (write(done_fd, "d", 1) != 1) exit(1);
  for (;;) {  /* keep answering (acknowledgements, keepalives) until killed */
    struct fi_cq_entry e[8];
    fi_cq_read(s.cq, e, 8);
    usleep(1000);
  }
}

int main(int argc, char** argv) {
  int peers = 4096, procs = 8, messages = 4, opt;
  while ((opt = getopt(argc, argv, "p:n:k:m:")) != -1) {
    switch (opt) {
      case 'p': prov = optarg; break;
      case 'n': peers = atoi(optarg); break;
      case 'k': procs = atoi(optarg); break;
      case 'm': messages = atoi(optarg); break;
      default: return 1;
    }
  }
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);

  struct fi_info* hints = fi_allocinfo();
  hints->caps = FI_MSG;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->fabric_attr->prov_name = strdup(prov);
  hints->addr_format = FI_SOCKADDR_IN;
  CHECK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", NULL, FI_SOURCE, hints, &info));
  fi_freeinfo(hints);

  struct stack s;
  open_stack(&s, 65536);
  struct fid_ep* rx = open_ep(&s);
  char name[128];
  size_t namelen = sizeof name;
  CHECK(fi_getname(&rx->fid, name, &namelen));
  const long total = (long)peers * messages;
  char* bufs = malloc((size_t)msg_size * 256);
  for (int i = 0; i < 256; ++i) CHECK(fi_recv(rx, bufs + i * msg_size, msg_size, NULL, FI_ADDR_UNSPEC, NULL));

  const long rss_before = rss_bytes(), kernel_before = kernel_bytes();
  int done[2];
  if (pipe(done)) return 1;
  pid_t* kids = calloc((size_t)procs, sizeof *kids);
  for (int k = 0; k < procs; ++k) {
    int count = peers / procs + (k < peers % procs);
    kids[k] = fork();
    if (kids[k] < 0) return 1;
    if (kids[k] == 0) {
      close(done[0]);
      child(name, namelen, count, messages, done[1]);
    }
  }
  close(done[1]);
  long got = 0;
  int finished = 0;
  double deadline = now_s() + 120;
  while (got < total || finished < procs) {
    struct fi_cq_entry e[64];
    ssize_t n = fi_cq_read(s.cq, e, 64);
    if (n == -FI_EAVAIL) {
      fprintf(stderr, "a receive failed\n");
      goto fail;
    }
    for (ssize_t i = 0; i < n; ++i) {
      ++got;
      CHECK(fi_recv(rx, bufs + (got % 256) * msg_size, msg_size, NULL, FI_ADDR_UNSPEC, NULL));
    }
    char c;
    struct timespec z = {0, 0};
    (void)z;
    while (finished < procs) {  /* non-blocking look at the pipe */
      fd_set r;
      FD_ZERO(&r);
      FD_SET(done[0], &r);
      struct timeval tv = {0, 0};
      if (select(done[0] + 1, &r, NULL, NULL, &tv) <= 0) break;
      if (read(done[0], &c, 1) == 1) ++finished;
    }
    if (now_s() > deadline) {
      fprintf(stderr, "%ld of %ld messages after 120 s\n", got, total);
      goto fail;
    }
  }
  if (got != total) goto fail;
  const long rss_active = rss_bytes(), kernel_active = kernel_bytes();
  double quiet = now_s() + 1.0;
  while (now_s() < quiet) {  /* idle: only progress, as a waiting program does */
    struct fi_cq_entry e[8];
    if (fi_cq_read(s.cq, e, 8) > 0) goto fail;
    usleep(1000);
  }
  const long rss_idle = rss_bytes();
  for (int k = 0; k < procs; ++k) kill(kids[k], SIGKILL);
  for (int k = 0; k < procs; ++k) waitpid(kids[k], NULL, 0);
  printf("peer_scale %s peers=%d rss_before=%ld rss_active=%ld rss_idle=%ld "
         "per_peer_active=%ld per_peer_idle=%ld kernel_before=%ld kernel_active=%ld\n",
         prov, peers, rss_before, rss_active, rss_idle, (rss_active - rss_before) / peers,
         (rss_idle - rss_before) / peers, kernel_before, kernel_active);
  return 0;
fail:
  for (int k = 0; k < procs; ++k) kill(kids[k], SIGKILL);
  for (int k = 0; k < procs; ++k) waitpid(kids[k], NULL, 0);
  return 1;
}
