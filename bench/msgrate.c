/* SPDX-License-Identifier: MIT */
/* weft — message rate: small tagged messages sent in windows between two
 * processes on one machine. The process forks: the parent is the server,
 * the child the client, each pinned to its own core and each opening its own
 * fabric, domain, CQ, AV and RDM endpoint after the fork. They swap their
 * fi_getname addresses through two pipes and insert them in their AVs.
 *
 * The server keeps one window of receives posted: it posts the next window
 * before it acknowledges the current one, so every timed message finds its
 * receive waiting. The client sends a window of messages (fi_tsend, or
 * fi_tinject with -i), waits for its send completions and the server's
 * acknowledgement (one message), and starts the next window. Messages per
 * second are counted at the client over the timed windows, after warm-up
 * windows that also open the connection of connection-based providers. The
 * server checks every window: each message carries its sequence number (its
 * low bytes when the message is shorter than 8 bytes) and after it a
 * pattern derived from that number, each must arrive exactly once, whole,
 * with its length and tag; the acknowledgement carries the window's number,
 * which the client checks.
 *
 * With -l it measures latency instead: a ping-pong of single messages sent
 * with fi_tinject, -n round trips after -W warm-up ones, each side keeping
 * two receives posted and re-posting the one just completed after it has
 * sent (so posting is not on the round trip's path, and every message
 * finds a receive waiting). Both sides check every message (sequence
 * number, pattern, length). It prints the one-way time, round trip / 2. This is the
 * library's own latency; fi_pingpong's loop adds posting a receive and
 * waiting for a send completion to every hop.
 *
 * Builds against Debian's headers and runs on either library
 * (LD_LIBRARY_PATH), as bench/msgrate.py does. Any libfabric error, a
 * completion error, a message that is missing, repeated or wrong, or a
 * side that dies or hangs (300 s) makes it exit 1 with a message on stderr
 * and print no rate.
 * Usage: msgrate [-p provider] [-a node] [-A client node] [-N client netns]
 *                [-s size] [-w window] [-n windows]
 *                [-W warm-up windows] [-c server-core,client-core] [-i] [-l]
 *   -a node: passed to fi_getinfo with FI_SOURCE, e.g. 127.0.0.1 for tcp
 *   -A node: the client's (default: -a's)
 *   -N name: the client enters the network namespace /var/run/netns/<name>
 *            (setns) before it opens its endpoint: two "hosts" on one
 *            machine (bench/netpath.py); the server stays where it started */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { data_tag = 1, ack_tag = 2, max_window = 4096 };

struct opts {
  const char *prov, *node, *client_node, *client_netns;
  size_t size;
  int window, windows, warm, server_core, client_core, inject, latency;
};

struct side {
  const char *who;
  struct fi_info *info;
  struct fid_fabric *fabric;
  struct fid_domain *domain;
  struct fid_cq *cq;
  struct fid_av *av;
  struct fid_ep *ep;
  fi_addr_t peer;
};

static void die(const struct side *s, const char *what, long ret) {
  fprintf(stderr, "msgrate %s: %s: %ld (%s)\n", s->who, what, ret, fi_strerror((int)-ret));
  exit(1);
}

#define CHECK(s, x)                   \
  do {                                \
    long r_ = (long)(x);              \
    if (r_) die((s), #x, r_);         \
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

/* The client's "host": another network namespace, entered before any
 * socket is opened. */
static void enter_netns(const char *name) {
  char path[256];
  snprintf(path, sizeof path, "/var/run/netns/%s", name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET)) {
    fprintf(stderr, "msgrate client: cannot enter %s: %s\n", path, strerror(errno));
    exit(1);
  }
  close(fd);
}

static void open_side(const struct opts *o, struct side *s) {
  const char *node = o->node;
  if (strcmp(s->who, "client") == 0 && o->client_node) node = o->client_node;
  struct fi_info *hints = fi_allocinfo();
  hints->caps = FI_TAGGED;
  hints->ep_attr->type = FI_EP_RDM;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->fabric_attr->prov_name = strdup(o->prov);
  CHECK(s, fi_getinfo(FI_VERSION(1, 17), node, NULL, node ? FI_SOURCE : 0, hints, &s->info));
  fi_freeinfo(hints);
  /* The first answer is what an application asking for this provider gets
   * (on Debian's library "tcp" for FI_EP_RDM is "tcp;ofi_rxm"). */
  CHECK(s, fi_fabric(s->info->fabric_attr, &s->fabric, NULL));
  CHECK(s, fi_domain(s->fabric, s->info, &s->domain, NULL));
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .size = 2 * (size_t)o->window + 16};
  CHECK(s, fi_cq_open(s->domain, &cq_attr, &s->cq, NULL));
  struct fi_av_attr av_attr = {.type = FI_AV_TABLE, .count = 2};
  CHECK(s, fi_av_open(s->domain, &av_attr, &s->av, NULL));
  CHECK(s, fi_endpoint(s->domain, s->info, &s->ep, NULL));
  CHECK(s, fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV));
  CHECK(s, fi_ep_bind(s->ep, &s->av->fid, 0));
  CHECK(s, fi_enable(s->ep));
}

static void close_side(struct side *s) {
  CHECK(s, fi_close(&s->ep->fid));
  CHECK(s, fi_close(&s->av->fid));
  CHECK(s, fi_close(&s->cq->fid));
  CHECK(s, fi_close(&s->domain->fid));
  CHECK(s, fi_close(&s->fabric->fid));
}

/* A message's contents: the sequence number's low bytes first (all 8 when
 * there is room), then from byte 8 a pattern derived from it, so a message
 * delivered to the wrong buffer, cut short, or stale from an earlier round
 * does not pass. 8-byte messages carry only the number. */
static unsigned char pattern(uint64_t seq, size_t j) { return (unsigned char)(seq * 131 + j); }

static void fill(char *msg, size_t size, uint64_t seq) {
  memcpy(msg, &seq, size < sizeof seq ? size : sizeof seq);
  for (size_t j = sizeof seq; j < size; j++) msg[j] = (char)pattern(seq, j);
}

static int intact(const char *msg, size_t size, uint64_t seq) {
  if (memcmp(msg, &seq, size < sizeof seq ? size : sizeof seq)) return 0;
  for (size_t j = sizeof seq; j < size; j++)
    if ((unsigned char)msg[j] != pattern(seq, j)) return 0;
  return 1;
}

/* The low bytes of a message's sequence number (all of it from 8 bytes). */
static uint64_t low_seq(const char *msg, size_t size) {
  uint64_t v = 0;
  memcpy(&v, msg, size < sizeof v ? size : sizeof v);
  return v;
}

static uint64_t seq_mask(size_t size) {
  return size >= sizeof(uint64_t) ? ~(uint64_t)0 : ((uint64_t)1 << (8 * size)) - 1;
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
    if (r <= 0) exit(1); /* the other side died before it sent its address */
    c += r;
    n -= (size_t)r;
  }
}

/* Sends our address through `out`, reads the peer's from `in`, inserts it. */
static void swap_addresses(struct side *s, int out, int in) {
  char name[256];
  size_t len = sizeof name;
  CHECK(s, fi_getname(&s->ep->fid, name, &len));
  write_all(out, &len, sizeof len);
  write_all(out, name, len);
  read_all(in, &len, sizeof len);
  if (len > sizeof name) die(s, "peer address length", (long)len);
  read_all(in, name, len);
  if (fi_av_insert(s->av, name, 1, &s->peer, 0, NULL) != 1) die(s, "fi_av_insert", -FI_EINVAL);
}

/* Reads completions and counts receives and sends (running totals). With
 * `got`, receive completions are kept in got[(count - 1) % slots]. */
static int poll_cq(struct side *s, long *recvs, long *sends, struct fi_cq_tagged_entry *got,
                   int slots) {
  struct fi_cq_tagged_entry comp[64];
  ssize_t n = fi_cq_read(s->cq, comp, 64);
  if (n == -FI_EAGAIN) return 0;
  if (n == -FI_EAVAIL) {
    struct fi_cq_err_entry err = {0};
    fi_cq_readerr(s->cq, &err, 0);
    fprintf(stderr, "msgrate %s: completion error %d (%s)\n", s->who, err.err,
            fi_strerror(err.err));
    exit(1);
  }
  if (n < 0) die(s, "fi_cq_read", n);
  for (ssize_t i = 0; i < n; i++) {
    if (comp[i].flags & FI_RECV) {
      ++*recvs;
      if (got) got[(*recvs - 1) % slots] = comp[i];
    } else {
      ++*sends;
    }
  }
  return (int)n;
}

/* Posts a tagged send, progressing on -FI_EAGAIN (a full queue). */
static void send_one(struct side *s, void *buf, size_t len, uint64_t tag, struct fi_context2 *ctx,
                     long *recvs, long *sends, int inject, struct fi_cq_tagged_entry *got,
                     int slots) {
  for (;;) {
    ssize_t ret = inject ? fi_tinject(s->ep, buf, len, s->peer, tag)
                         : fi_tsend(s->ep, buf, len, NULL, s->peer, tag, ctx);
    if (ret == 0) return;
    if (ret != -FI_EAGAIN) die(s, inject ? "fi_tinject" : "fi_tsend", ret);
    poll_cq(s, recvs, sends, got, slots);
  }
}

static void post_recvs(struct side *s, const struct opts *o, char *buf, struct fi_context2 *ctx) {
  for (int j = 0; j < o->window; j++) {
    ssize_t ret;
    while ((ret = fi_trecv(s->ep, buf + (size_t)j * o->size, o->size, NULL, FI_ADDR_UNSPEC,
                           data_tag, 0, &ctx[j])) == -FI_EAGAIN)
      fi_cq_read(s->cq, NULL, 0);
    if (ret) die(s, "fi_trecv", ret);
  }
}

static int server(const struct opts *o, int out, int in) {
  struct side s = {.who = "server"};
  pin(o->server_core);
  open_side(o, &s);
  char *rbuf = calloc(o->window, o->size), ack[8];
  struct fi_context2 *rctx = calloc(o->window, sizeof *rctx), actx;
  static struct fi_cq_tagged_entry got[max_window];
  static char seen[max_window];
  post_recvs(&s, o, rbuf, rctx); /* before the client can know our address */
  swap_addresses(&s, out, in);
  /* Running totals: while the server waits for its acknowledgement's send
   * completion, the client may already be sending the next window, whose
   * receive completions count for the next round (and land in got[] only
   * after this window's entries were checked). */
  long recvs = 0, sends = 0, total = (long)o->warm + o->windows;
  for (long w = 0; w < total; w++) {
    while (recvs < (w + 1) * o->window) poll_cq(&s, &recvs, &sends, got, o->window);
    /* Every message of this window arrived exactly once: each carries its
     * sequence number (when it has room for one). */
    memset(seen, 0, (size_t)o->window);
    uint64_t base = (uint64_t)w * o->window;
    for (int j = 0; j < o->window; j++) {
      size_t slot = (struct fi_context2 *)got[j].op_context - rctx;
      if (slot >= (size_t)o->window || got[j].len != o->size || got[j].tag != data_tag) {
        fprintf(stderr, "msgrate server: bad completion in window %ld\n", w);
        return 1;
      }
      const char *msg = rbuf + slot * o->size;
      uint64_t v = low_seq(msg, o->size);
      uint64_t k = (v - base) & seq_mask(o->size); /* its place in the window */
      if (k >= (uint64_t)o->window || seen[k]++ || !intact(msg, o->size, base + k)) {
        fprintf(stderr, "msgrate server: window %ld: unexpected or damaged message %llu\n", w,
                (unsigned long long)v);
        return 1;
      }
    }
    if (w + 1 < total) post_recvs(&s, o, rbuf, rctx);
    uint64_t wn = (uint64_t)w;
    memcpy(ack, &wn, sizeof ack);
    long before = sends;
    send_one(&s, ack, sizeof ack, ack_tag, &actx, &recvs, &sends, 0, got, o->window);
    while (sends == before) poll_cq(&s, &recvs, &sends, got, o->window); /* actx is reused */
  }
  close_side(&s);
  fi_freeinfo(s.info);
  free(rbuf);
  free(rctx);
  return 0;
}

static int client(const struct opts *o, int out, int in) {
  struct side s = {.who = "client"};
  pin(o->client_core);
  open_side(o, &s);
  swap_addresses(&s, out, in);
  char *sbuf = calloc(o->window, o->size), ack[8];
  struct fi_context2 *sctx = calloc(o->window, sizeof *sctx), actx;
  long recvs = 0, sends = 0, total = (long)o->warm + o->windows;
  double start = now_s();
  for (long w = 0; w < total; w++) {
    if (w == o->warm) start = now_s();
    CHECK(&s, fi_trecv(s.ep, ack, sizeof ack, NULL, FI_ADDR_UNSPEC, ack_tag, 0, &actx));
    recvs = sends = 0;
    for (int j = 0; j < o->window; j++) {
      uint64_t seq = (uint64_t)w * o->window + j;
      char *msg = sbuf + (size_t)j * o->size;
      fill(msg, o->size, seq);
      send_one(&s, msg, o->size, data_tag, &sctx[j], &recvs, &sends, o->inject, NULL, 1);
    }
    long want_sends = o->inject ? 0 : o->window;
    while (recvs < 1 || sends < want_sends) poll_cq(&s, &recvs, &sends, NULL, 1);
    uint64_t acked;
    memcpy(&acked, ack, sizeof acked);
    if (recvs != 1 || acked != (uint64_t)w) {
      fprintf(stderr, "msgrate client: window %ld: acknowledgement for window %llu (%ld)\n", w,
              (unsigned long long)acked, recvs);
      exit(1);
    }
  }
  double secs = now_s() - start;
  long msgs = (long)o->windows * o->window;
  close_side(&s); /* the rate is printed only after a clean close */
  printf("msgrate %s (%s): %ld messages of %zu bytes, window %d, %s: %.0f msg/s\n",
         s.info->fabric_attr->prov_name,
         o->client_node ? o->client_node : o->node ? o->node : "-", msgs, o->size, o->window,
         o->inject ? "fi_tinject" : "fi_tsend", msgs / secs);
  fflush(stdout);
  fi_freeinfo(s.info);
  free(sbuf);
  free(sctx);
  return 0;
}

/* ---- latency (-l) ---------------------------------------------------- */

/* Waits for one receive completion; returns the index of its buffer, or
 * -1 for a completion that is not one of ours, of the wrong length or tag. */
static int wait_recv(struct side *s, struct fi_context2 *ctx, size_t size) {
  long recvs = 0, sends = 0;
  struct fi_cq_tagged_entry got;
  while (recvs == 0) poll_cq(s, &recvs, &sends, &got, 1);
  if (recvs != 1 || got.len != size || got.tag != data_tag) return -1;
  return (int)((struct fi_context2 *)got.op_context - ctx);
}

static void post_one(struct side *s, char *buf, size_t len, struct fi_context2 *ctx) {
  ssize_t ret;
  while ((ret = fi_trecv(s->ep, buf, len, NULL, FI_ADDR_UNSPEC, data_tag, 0, ctx)) == -FI_EAGAIN)
    fi_cq_read(s->cq, NULL, 0);
  if (ret) die(s, "fi_trecv", ret);
}

/* One side of the ping-pong: the client sends first. Returns the seconds
 * the timed round trips took (client), or 0. */
static double ping_pong(const struct opts *o, struct side *s, int client) {
  char *rbuf = calloc(2, o->size), *sbuf = calloc(1, o->size);
  struct fi_context2 rctx[2];
  post_one(s, rbuf, o->size, &rctx[0]);
  post_one(s, rbuf + o->size, o->size, &rctx[1]);
  long total = (long)o->warm + o->windows;
  double start = now_s();
  for (long i = 0; i < total; i++) {
    if (i == o->warm) start = now_s();
    uint64_t seq = (uint64_t)i;
    fill(sbuf, o->size, seq);
    long recvs = 0, sends = 0;
    int k = -1;
    if (!client) k = wait_recv(s, rctx, o->size);
    send_one(s, sbuf, o->size, data_tag, NULL, &recvs, &sends, 1, NULL, 1);
    if (recvs) die(s, "a message before its turn", -FI_EIO);
    if (client) k = wait_recv(s, rctx, o->size);
    if (k < 0 || k > 1) die(s, "a completion for no posted receive (or of the wrong size)", -FI_EIO);
    if (!intact(rbuf + (size_t)k * o->size, o->size, seq)) {
      fprintf(stderr, "msgrate %s: round trip %ld carried %llu, damaged or not its own\n", s->who,
              i, (unsigned long long)low_seq(rbuf + (size_t)k * o->size, o->size));
      exit(1);
    }
    post_one(s, rbuf + (size_t)k * o->size, o->size, &rctx[k]);
  }
  double secs = now_s() - start;
  free(rbuf);
  free(sbuf);
  return client ? secs : 0;
}

static int ping_side(const struct opts *o, int out, int in, int client) {
  struct side s = {.who = client ? "client" : "server"};
  pin(client ? o->client_core : o->server_core);
  open_side(o, &s);
  swap_addresses(&s, out, in);
  double secs = ping_pong(o, &s, client);
  close_side(&s); /* the latency is printed only after a clean close */
  if (client) {
    printf("latency %s (%s): %d round trips of %zu bytes, fi_tinject: %.4f us one-way\n",
           s.info->fabric_attr->prov_name, o->node ? o->node : "-", o->windows, o->size,
           secs / o->windows / 2 * 1e6);
    fflush(stdout);
  }
  fi_freeinfo(s.info);
  return 0;
}

int main(int argc, char **argv) {
  struct opts o = {.prov = "shm", .size = 8, .window = 64, .windows = 20000, .warm = 2000,
                   .server_core = 0, .client_core = 1};
  int opt;
  while ((opt = getopt(argc, argv, "p:a:A:N:s:w:n:W:c:il")) != -1) {
    switch (opt) {
      case 'p': o.prov = optarg; break;
      case 'a': o.node = optarg; break;
      case 'A': o.client_node = optarg; break;
      case 'N': o.client_netns = optarg; break;
      case 's': o.size = strtoul(optarg, NULL, 0); break;
      case 'w': o.window = atoi(optarg); break;
      case 'n': o.windows = atoi(optarg); break;
      case 'W': o.warm = atoi(optarg); break;
      case 'c':
        if (sscanf(optarg, "%d,%d", &o.server_core, &o.client_core) != 2) return 2;
        break;
      case 'i': o.inject = 1; break;
      case 'l': o.latency = 1; break;
      default: return 2;
    }
  }
  if (o.size == 0 || o.window <= 0 || o.window > max_window || o.windows <= 0 || o.warm < 0) {
    fprintf(stderr, "msgrate: size, window (1..%d) and windows must be positive\n", max_window);
    return 2;
  }
  if ((uint64_t)o.window - 1 > seq_mask(o.size)) {
    fprintf(stderr, "msgrate: %zu-byte messages cannot tell %d messages of a window apart\n",
            o.size, o.window);
    return 2;
  }
  int to_client[2], to_server[2];
  if (pipe(to_client) || pipe(to_server)) {
    perror("pipe");
    return 1;
  }
  alarm(300); /* a hang is a failure, not a wait forever */
  pid_t child = fork();
  if (child < 0) {
    perror("fork");
    return 1;
  }
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(to_client[1]);
    close(to_server[0]);
    if (o.client_netns) enter_netns(o.client_netns);
    _exit(o.latency ? ping_side(&o, to_server[1], to_client[0], 1)
                    : client(&o, to_server[1], to_client[0]));
  }
  close(to_client[0]);
  close(to_server[1]);
  int rc = o.latency ? ping_side(&o, to_client[1], to_server[0], 0)
                     : server(&o, to_client[1], to_server[0]);
  int status = 0;
  if (rc) kill(child, SIGKILL);
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status)) rc = 1;
  return rc;
}
