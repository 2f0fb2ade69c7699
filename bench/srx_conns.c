/* SPDX-License-Identifier: MIT */
/* weft — a tcp FI_EP_MSG server with many connections: what each costs the
 * server, and what its posted receive buffers cost (issue 14: with one
 * shared receive context they do not grow with the connections).
 *
 * The parent is the server: a passive endpoint on 127.0.0.1, one EQ, one
 * CQ, and receive buffers of -s bytes: -k of them posted once to one
 * fi_srx_context that every accepted endpoint is bound to (-m srx), or -k
 * posted to each accepted endpoint (-m ep). The child connects -n
 * endpoints, then each sends one message of -s bytes carrying its number.
 * The server accepts them all, receives every message (checking its number
 * and pattern, reposting each buffer), and reports its resident memory
 * (statm) before the first connection, with all connected, and after the
 * traffic, per connection, and the bytes of receive buffers it posted.
 * Any libfabric error, a missing or wrong message, or a child that fails
 * exits 1 with a message on stderr. Output, one line:
 *   srx_conns <mode> <n> connections: idle <B> B/conn, active <B> B/conn, posted <B> B
 * Usage: srx_conns [-m srx|ep] [-n connections] [-k receives] [-s bytes] */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(x)                                                              \
  do {                                                                        \
    int r_ = (int)(x);                                                        \
    if (r_) {                                                                 \
      fprintf(stderr, "srx_conns: %s: %d (%s)\n", #x, r_, fi_strerror(-r_));  \
      exit(1);                                                                \
    }                                                                         \
  } while (0)

static int n = 1000, k = 64;
static size_t size = 4096;

static long rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (!f || fscanf(f, "%ld %ld", &pages, &resident) != 2) exit(1);
  fclose(f);
  return resident * sysconf(_SC_PAGESIZE);
}

static void more_files(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

/* One EQ event of `want` within 30 s (FI_CONNREQ: its info in *info). */
static void wait_event(struct fid_eq *eq, uint32_t want, struct fi_info **info) {
  struct fi_eq_cm_entry entry;
  uint32_t event;
  ssize_t r = fi_eq_sread(eq, &event, &entry, sizeof entry, 30000, 0);
  if (r == -FI_EAVAIL) {
    struct fi_eq_err_entry err = {0};
    fi_eq_readerr(eq, &err, 0);
    fprintf(stderr, "srx_conns: EQ error %d (%s)\n", err.err, fi_strerror(err.err));
    exit(1);
  }
  if (r < 0 || event != want) {
    fprintf(stderr, "srx_conns: waited for EQ event %u, got %zd / %u\n", want, r, event);
    exit(1);
  }
  if (info) *info = entry.info;
}

static unsigned char pattern(size_t j, uint32_t who) { return (unsigned char)(j * 7 + who); }

static struct fi_info *hints_tcp(void) {
  struct fi_info *h = fi_allocinfo();
  h->caps = FI_MSG;
  h->ep_attr->type = FI_EP_MSG;
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  h->fabric_attr->prov_name = strdup("tcp");
  return h;
}

static int client(const struct sockaddr_in *server, int go_fd) {
  struct fi_info *hints = hints_tcp(), *info;
  CHECK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", NULL, 0, hints, &info));
  struct fid_fabric *fab;
  struct fid_domain *dom;
  struct fid_eq *eq;
  struct fid_cq *cq;
  CHECK(fi_fabric(info->fabric_attr, &fab, NULL));
  CHECK(fi_domain(fab, info, &dom, NULL));
  struct fi_eq_attr ea = {.wait_obj = FI_WAIT_UNSPEC};
  CHECK(fi_eq_open(fab, &ea, &eq, NULL));
  struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_CONTEXT, .size = (size_t)n + 16};
  CHECK(fi_cq_open(dom, &ca, &cq, NULL));
  struct fid_ep **eps = calloc((size_t)n, sizeof *eps);
  unsigned char *buf = malloc(size * (size_t)n);
  for (int i = 0; i < n; i++) {
    CHECK(fi_endpoint(dom, info, &eps[i], NULL));
    CHECK(fi_ep_bind(eps[i], &eq->fid, 0));
    CHECK(fi_ep_bind(eps[i], &cq->fid, FI_TRANSMIT | FI_RECV));
    CHECK(fi_enable(eps[i]));
    CHECK(fi_connect(eps[i], server, NULL, 0));
    wait_event(eq, FI_CONNECTED, NULL);
  }
  char c;
  if (read(go_fd, &c, 1) != 1) return 1; /* the server measured the idle connections */
  for (int i = 0; i < n; i++) {
    unsigned char *b = buf + (size_t)i * size;
    for (size_t j = 0; j < size; j++) b[j] = pattern(j, (uint32_t)i);
    memcpy(b, &i, sizeof i);
    ssize_t r;
    while ((r = fi_send(eps[i], b, size, NULL, 0, b)) == -FI_EAGAIN) fi_cq_read(cq, NULL, 0);
    CHECK(r);
  }
  for (int done = 0; done < n;) {
    struct fi_cq_entry e[16];
    ssize_t r = fi_cq_read(cq, e, 16);
    if (r == -FI_EAVAIL) {
      fprintf(stderr, "srx_conns: a client send failed\n");
      return 1;
    }
    if (r > 0) done += (int)r;
  }
  if (read(go_fd, &c, 1) < 0) return 1; /* until the server has read everything */
  for (int i = 0; i < n; i++) fi_close(&eps[i]->fid);
  fi_close(&cq->fid);
  fi_close(&eq->fid);
  fi_close(&dom->fid);
  fi_close(&fab->fid);
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = "srx";
  int opt;
  while ((opt = getopt(argc, argv, "m:n:k:s:")) != -1) {
    switch (opt) {
      case 'm': mode = optarg; break;
      case 'n': n = atoi(optarg); break;
      case 'k': k = atoi(optarg); break;
      case 's': size = strtoul(optarg, NULL, 0); break;
      default: return 2;
    }
  }
  const int srx = strcmp(mode, "srx") == 0;
  if ((!srx && strcmp(mode, "ep")) || n < 1 || k < 1 || size < sizeof(int)) {
    fprintf(stderr, "srx_conns: bad arguments\n");
    return 2;
  }
  more_files();
  struct fi_info *hints = hints_tcp(), *info;
  CHECK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints, &info));
  struct fid_fabric *fab;
  struct fid_domain *dom;
  struct fid_eq *eq;
  struct fid_cq *cq;
  struct fid_pep *pep;
  struct fid_ep *ctx = NULL;
  CHECK(fi_fabric(info->fabric_attr, &fab, NULL));
  CHECK(fi_domain(fab, info, &dom, NULL));
  struct fi_eq_attr ea = {.wait_obj = FI_WAIT_UNSPEC};
  CHECK(fi_eq_open(fab, &ea, &eq, NULL));
  struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_MSG, .size = 4096};
  CHECK(fi_cq_open(dom, &ca, &cq, NULL));
  CHECK(fi_passive_ep(fab, info, &pep, NULL));
  CHECK(fi_pep_bind(pep, &eq->fid, 0));
  CHECK(fi_listen(pep));
  struct sockaddr_in at;
  size_t len = sizeof at;
  CHECK(fi_getname(&pep->fid, &at, &len));
  const size_t nbufs = srx ? (size_t)k : (size_t)k * (size_t)n;
  unsigned char *bufs = malloc(nbufs * size);
  if (!bufs) return 1;
  memset(bufs, 0, nbufs * size);
  if (srx) {
    struct fi_rx_attr ra = {0};
    CHECK(fi_srx_context(dom, &ra, &ctx, NULL));
    for (int i = 0; i < k; i++)
      CHECK(fi_recv(ctx, bufs + (size_t)i * size, size, NULL, 0, bufs + (size_t)i * size));
  }
  int go[2];
  if (pipe(go)) return 1;
  const long before = rss_bytes();
  pid_t child = fork();
  if (child == 0) {
    close(go[1]);
    _exit(client(&at, go[0]));
  }
  close(go[0]);
  struct fid_ep **eps = calloc((size_t)n, sizeof *eps);
  for (int i = 0; i < n; i++) {
    struct fi_info *req;
    wait_event(eq, FI_CONNREQ, &req);
    CHECK(fi_endpoint(dom, req, &eps[i], NULL));
    fi_freeinfo(req);
    CHECK(fi_ep_bind(eps[i], &eq->fid, 0));
    CHECK(fi_ep_bind(eps[i], &cq->fid, FI_TRANSMIT | FI_RECV));
    if (srx) CHECK(fi_ep_bind(eps[i], &ctx->fid, 0));
    CHECK(fi_enable(eps[i]));
    if (!srx)
      for (int j = 0; j < k; j++) {
        unsigned char *b = bufs + ((size_t)i * (size_t)k + (size_t)j) * size;
        CHECK(fi_recv(eps[i], b, size, NULL, 0, b));
      }
    CHECK(fi_accept(eps[i], NULL, 0));
    wait_event(eq, FI_CONNECTED, NULL);
  }
  struct timespec settle = {0, 200000000};
  nanosleep(&settle, NULL);
  const long idle = rss_bytes();
  if (write(go[1], "g", 1) != 1) return 1;
  char *seen = calloc((size_t)n, 1);
  for (int got = 0; got < n;) {
    struct fi_cq_msg_entry e[16];
    ssize_t r = fi_cq_read(cq, e, 16);
    if (r == -FI_EAVAIL) {
      struct fi_cq_err_entry err = {0};
      fi_cq_readerr(cq, &err, 0);
      fprintf(stderr, "srx_conns: a receive failed: %s\n", fi_strerror(err.err));
      return 1;
    }
    for (ssize_t q = 0; q < r; q++) {
      unsigned char *b = e[q].op_context;
      int who;
      memcpy(&who, b, sizeof who);
      if (e[q].len != size || who < 0 || who >= n || seen[who]) {
        fprintf(stderr, "srx_conns: a message of %zu bytes from %d, or twice\n", e[q].len, who);
        return 1;
      }
      for (size_t j = sizeof who; j < size; j++)
        if (b[j] != pattern(j, (uint32_t)who)) {
          fprintf(stderr, "srx_conns: message %d arrived with wrong data\n", who);
          return 1;
        }
      seen[who] = 1;
      got++;
      /* Posted again where it came from. */
      struct fid_ep *to = srx ? ctx : eps[who];
      CHECK(fi_recv(to, b, size, NULL, 0, b));
    }
  }
  const long active = rss_bytes();
  close(go[1]);
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status)) {
    fprintf(stderr, "srx_conns: the client failed\n");
    return 1;
  }
  for (int i = 0; i < n; i++) fi_close(&eps[i]->fid);
  if (ctx) fi_close(&ctx->fid);
  fi_close(&pep->fid);
  fi_close(&cq->fid);
  fi_close(&eq->fid);
  fi_close(&dom->fid);
  fi_close(&fab->fid);
  printf("srx_conns %s %d connections: idle %ld B/conn, active %ld B/conn, posted %zu B\n", mode,
         n, (idle - before) / n, (active - before) / n, nbufs * size);
  return 0;
}
