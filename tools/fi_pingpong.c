/* SPDX-License-Identifier: MIT */
/* weft — fi_pingpong: ping-pong test over libfabric, wire-compatible with Debian's fi_pingpong. */

/*
 * Out-of-band control protocol, as observed on the wire between two copies of
 * Debian 12's fi_pingpong (libfabric-bin 1.17); every byte below must stay as is
 * so either side can be the Debian binary.
 *
 *  - The server listens on TCP port -B (default 47592, SO_REUSEADDR, backlog 10,
 *    IPv6 with -6) and accepts one client; the client connects to <srv_addr>:-P.
 *    Both then read with a receive timeout.
 *  - Address exchange. The server opens its fabric objects and sends its name:
 *      u32 name length (network order) | u32 fi_addr_format (host order) | name
 *    (e.g. 16 | FI_SOCKADDR_IN | sockaddr_in, or 19 | FI_ADDR_STR | "fi_shm://...").
 *    The client reads it, puts format and name into hints->addr_format and
 *    hints->dest_addr, calls fi_getinfo and opens its objects. For rdm/dgram the
 *    client sends its own name back in the same framing and both sides insert
 *    the peer into their AV; for msg the name is the passive endpoint's and the
 *    client fi_connect()s to it instead (nothing more goes back on the socket).
 *  - For every message size, in order:
 *      client -> "q\0", server -> "a\0"           (both have receives posted)
 *      -I ping-pongs on the fabric (client sends first, server echoes)
 *      client -> 10 bytes: its pong count in decimal, NUL padded
 *      server -> "cnt ok\0"                         (sent even if counts differ;
 *                                                   any other reply fails the client)
 *    The server prints "=N" in the #ack column when its count equals the
 *    client's, else the signed difference (own - client's).
 *  - After the last size each side sends "fin\0" on the fabric with
 *    fi_sendmsg/fi_tsendmsg(FI_TRANSMIT_COMPLETE), waits for it to complete and
 *    for the peer's "fin"; msg endpoints then fi_shutdown(); sockets close.
 *  - Tagged mode (-m tagged) uses tag 1234 for every message, "fin" included.
 *  - Sizes: -S N is one size (for dgram also hints->ep_attr->max_msg_size = N);
 *    -S all is 0, 1, then 2^k and 3*2^(k-1) below 8 MiB; the default list is
 *    64, 256, 1k, 4k, 64k, 1m; lists are cut at the endpoint's max_msg_size.
 *  - With -c, the ping and the pong of iteration i (counted over the whole run,
 *    across sizes) both hold the 62 characters 0-9a-zA-Z repeated, starting at
 *    index (7 * i) mod 62; without -c the payload is zeros.
 *  - A lost datagram makes Debian's binary spin forever; this one gives up with
 *    an error after PP_FABRIC_TIMEOUT_MS without any completion.
 *
 * The socket side of all this lives in pingpong/pp_ctrl.c.
 */

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "pingpong/pp_ctrl.h"

#define PP_FABRIC_TIMEOUT_MS 10000 /* CQ/EQ wait without any progress */
#define PP_TAG 1234
#define PP_ALL_LIMIT ((size_t)1 << 23) /* -S all stops below 8 MiB */

enum pp_ep { PP_DGRAM, PP_RDM, PP_MSG };

struct pp_opts {
  const char *src_port, *dst_port, *domain, *prov, *dst_addr;
  enum pp_ep ep;
  long iters;
  size_t size; /* valid when size_mode == 1 */
  int size_mode; /* 0 default list, 1 one size, 2 all */
  bool check, tagged, verbose, ipv6;
};

struct pp {
  struct pp_opts o;
  int ctrl;
  struct fi_info *hints, *info, *conn_info;
  struct fid_fabric *fabric;
  struct fid_eq *eq;
  struct fid_domain *domain;
  struct fid_pep *pep;
  struct fid_ep *ep;
  struct fid_cq *txcq, *rxcq;
  struct fid_av *av;
  struct fid_mr *mr;
  void *desc;
  fi_addr_t peer;
  char *buf; /* rx slot, then tx slot; each prefix + payload capacity */
  size_t slot, prefix, inject_size;
  size_t *sizes, nsizes;
  struct fi_context2 txctx, rxctx;
  uint64_t tx_posted, tx_done, rx_posted, rx_done;
  long msg_index; /* global iteration counter for -c patterns */
  bool header_done;
};

static bool verbose;

static void debug(const char *fmt, ...) {
  if (!verbose) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("[debug] ", stdout);
  vprintf(fmt, ap);
  fputc('\n', stdout);
  va_end(ap);
  fflush(stdout);
}

static void error_msg(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("[error] ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* Reports a failed libfabric call; returns ret so callers can `return fi_fail(...)`. */
static int fi_fail(const char *call, int ret) {
  fprintf(stderr, "%s(): ret=%d (%s)\n", call, ret, fi_strerror(ret < 0 ? -ret : ret));
  return ret;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------- options */

static void usage(void) {
  fprintf(stderr,
          "Usage:\n"
          "  fi_pingpong [OPTIONS]\t\t\trun as server\n"
          "  fi_pingpong [OPTIONS] <srv_addr>\trun as client of the server at srv_addr\n"
          "\n"
          "Message ping-pong between two processes over libfabric, with latency and\n"
          "bandwidth per message size.\n"
          "\n"
          "Options:\n"
          " -B <src_port>        control socket source port (server listens on 47592 unless set;\n"
          "                      client: chosen by the system)\n"
          " -P <dst_port>        control socket port to connect to (client; 47592)\n"
          " -d <domain>          domain name to use\n"
          " -p <provider>        provider name, e.g. tcp, udp, shm\n"
          " -e <ep_type>         endpoint type: msg|rdm|dgram (dgram)\n"
          " -I <number>          iterations per message size (10)\n"
          " -S <size>            one message size in bytes, or 'all' (64 256 1k 4k 64k 1m)\n"
          " -c                   check the data of every received message\n"
          " -m <transmit mode>   msg|tagged (msg)\n"
          " -h                   print this help\n"
          " -v                   print debugging output\n"
          " -6                   use IPv6 for the control socket\n");
}

static bool parse_ulong(const char *s, unsigned long long *out) {
  char *end;
  errno = 0;
  if (!*s || *s == '-') return false;
  *out = strtoull(s, &end, 10);
  return !errno && !*end;
}

static int parse_opts(int argc, char **argv, struct pp_opts *o) {
  unsigned long long v;
  int c;
  memset(o, 0, sizeof *o);
  o->ep = PP_DGRAM;
  o->iters = 10;
  while ((c = getopt(argc, argv, "B:P:d:p:e:I:S:cm:hv6")) != -1) {
    switch (c) {
    case 'B': o->src_port = optarg; break;
    case 'P': o->dst_port = optarg; break;
    case 'd': o->domain = optarg; break;
    case 'p': o->prov = optarg; break;
    case 'e':
      if (!strcmp(optarg, "msg")) o->ep = PP_MSG;
      else if (!strcmp(optarg, "rdm")) o->ep = PP_RDM;
      else if (!strcmp(optarg, "dgram")) o->ep = PP_DGRAM;
      else { fprintf(stderr, "Unknown endpoint : %s\n", optarg); return -1; }
      break;
    case 'I':
      if (!parse_ulong(optarg, &v) || v < 1 || v > 999999999ull) {
        fprintf(stderr, "Invalid iteration count \"%s\"\n", optarg);
        return -1;
      }
      o->iters = (long)v;
      break;
    case 'S':
      if (!strcmp(optarg, "all")) { o->size_mode = 2; break; }
      if (!parse_ulong(optarg, &v) || v > SIZE_MAX / 4) {
        fprintf(stderr, "Invalid message size \"%s\"\n", optarg);
        return -1;
      }
      o->size_mode = 1;
      o->size = (size_t)v;
      break;
    case 'c': o->check = true; break;
    case 'm':
      if (!strcmp(optarg, "tagged")) o->tagged = true;
      else if (!strcmp(optarg, "msg")) o->tagged = false;
      else { fprintf(stderr, "Unknown transmit mode : %s\n", optarg); return -1; }
      break;
    case 'v': o->verbose = true; break;
    case '6': o->ipv6 = true; break;
    default: usage(); return -1; /* includes -h */
    }
  }
  if (optind < argc) o->dst_addr = argv[optind++];
  if (optind < argc) { usage(); return -1; }
  return 0;
}

/* ------------------------------------------------------------- endpoint names */

static int send_name(struct pp *pp, struct fid *fid) {
  size_t len = 0;
  int ret = fi_getname(fid, NULL, &len);
  if (ret != -FI_ETOOSMALL) return fi_fail("fi_getname", ret ? ret : -FI_EOTHER);
  if (!len || len > PP_CTRL_MAX_NAME) { error_msg("fi_getname: implausible length %zu", len); return -FI_EOTHER; }
  char *name = calloc(1, len);
  if (!name) return -FI_ENOMEM;
  ret = fi_getname(fid, name, &len);
  if (!ret) {
    debug("sending local name (%zu bytes, format %u)", len, (unsigned)pp->info->addr_format);
    ret = pp_ctrl_send_name(pp->ctrl, pp->info->addr_format, name, len);
  } else {
    fi_fail("fi_getname", ret);
  }
  free(name);
  return ret;
}

static int recv_name(struct pp *pp, void **name, size_t *len, uint32_t *fmt) {
  int ret = pp_ctrl_recv_name(pp->ctrl, fmt, name, len);
  if (!ret) debug("received peer name (%zu bytes, format %u)", *len, *fmt);
  return ret;
}

/* ------------------------------------------------------------- completions */

static int cq_error(struct fid_cq *cq, const char *which) {
  struct fi_cq_err_entry e;
  memset(&e, 0, sizeof e);
  ssize_t r = fi_cq_readerr(cq, &e, 0);
  if (r < 0) return fi_fail("fi_cq_readerr", (int)r);
  fprintf(stderr, "%s completion error: %s (%s)\n", which, fi_strerror(e.err),
          fi_cq_strerror(cq, e.prov_errno, e.err_data, NULL, 0));
  return e.err ? -e.err : -FI_EIO;
}

static int read_cq(struct fid_cq *cq, uint64_t *done, const char *which) {
  struct fi_cq_entry ent[8];
  ssize_t n = fi_cq_read(cq, ent, 8);
  if (n > 0) { *done += (uint64_t)n; return 0; }
  if (n == -FI_EAGAIN) return 0;
  if (n == -FI_EAVAIL) return cq_error(cq, which);
  return fi_fail("fi_cq_read", (int)n);
}

static int progress(struct pp *pp) {
  int ret = read_cq(pp->txcq, &pp->tx_done, "send");
  return ret ? ret : read_cq(pp->rxcq, &pp->rx_done, "receive");
}

/* Polls until *done reaches target; gives up after PP_FABRIC_TIMEOUT_MS without progress. */
static int wait_done(struct pp *pp, const uint64_t *done, uint64_t target, const char *what) {
  uint64_t last = now_ns(), seen = pp->tx_done + pp->rx_done;
  for (unsigned spin = 0; *done < target; spin++) {
    int ret = progress(pp);
    if (ret) return ret;
    if (pp->tx_done + pp->rx_done != seen) {
      seen = pp->tx_done + pp->rx_done;
      last = now_ns();
    } else if ((spin & 255) == 0 && now_ns() - last > (uint64_t)PP_FABRIC_TIMEOUT_MS * 1000000u) {
      error_msg("no %s completion within %d s%s", what, PP_FABRIC_TIMEOUT_MS / 1000,
                pp->o.ep == PP_DGRAM ? " (datagram lost?)" : "");
      return -FI_ETIMEDOUT;
    }
  }
  return 0;
}

/* Retries a post that returned -FI_EAGAIN while driving progress. */
#define POST_RETRY(pp, name, expr)                                            \
  do {                                                                        \
    uint64_t start_ = now_ns();                                               \
    ssize_t r_;                                                               \
    while ((r_ = (expr)) == -FI_EAGAIN) {                                     \
      int p_ = progress(pp);                                                  \
      if (p_) return p_;                                                      \
      if (now_ns() - start_ > (uint64_t)PP_FABRIC_TIMEOUT_MS * 1000000u) {    \
        r_ = -FI_ETIMEDOUT;                                                   \
        break;                                                                \
      }                                                                       \
    }                                                                         \
    if (r_) return fi_fail(name, (int)r_);                                    \
  } while (0)

static int post_recv(struct pp *pp) {
  size_t len = pp->slot;
  if (pp->o.tagged)
    POST_RETRY(pp, "fi_trecv", fi_trecv(pp->ep, pp->buf, len, pp->desc, FI_ADDR_UNSPEC, PP_TAG, 0, &pp->rxctx));
  else
    POST_RETRY(pp, "fi_recv", fi_recv(pp->ep, pp->buf, len, pp->desc, FI_ADDR_UNSPEC, &pp->rxctx));
  pp->rx_posted++;
  return 0;
}

/* Sends size payload bytes from the tx slot; waits for the send completion unless injected. */
static int post_send(struct pp *pp, size_t size) {
  char *tx = pp->buf + pp->slot;
  size_t len = pp->prefix + size;
  /* the man page leaves the prefix out of the inject limit; counting it is merely cautious */
  if (len <= pp->inject_size) {
    if (pp->o.tagged) POST_RETRY(pp, "fi_tinject", fi_tinject(pp->ep, tx, len, pp->peer, PP_TAG));
    else POST_RETRY(pp, "fi_inject", fi_inject(pp->ep, tx, len, pp->peer));
    return 0;
  }
  if (pp->o.tagged)
    POST_RETRY(pp, "fi_tsend", fi_tsend(pp->ep, tx, len, pp->desc, pp->peer, PP_TAG, &pp->txctx));
  else
    POST_RETRY(pp, "fi_send", fi_send(pp->ep, tx, len, pp->desc, pp->peer, &pp->txctx));
  pp->tx_posted++;
  return wait_done(pp, &pp->tx_done, pp->tx_posted, "send");
}

static int send_fin(struct pp *pp) {
  char *tx = pp->buf + pp->slot;
  struct iovec iov = {.iov_base = tx, .iov_len = pp->prefix + 4};
  void *desc = pp->desc;
  memcpy(tx + pp->prefix, "fin", 4);
  if (pp->o.tagged) {
    struct fi_msg_tagged m = {.msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = pp->peer,
                              .tag = PP_TAG, .ignore = 0, .context = &pp->txctx, .data = 0};
    POST_RETRY(pp, "fi_tsendmsg", fi_tsendmsg(pp->ep, &m, FI_TRANSMIT_COMPLETE));
  } else {
    struct fi_msg m = {.msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = pp->peer,
                       .context = &pp->txctx, .data = 0};
    POST_RETRY(pp, "fi_sendmsg", fi_sendmsg(pp->ep, &m, FI_TRANSMIT_COMPLETE));
  }
  pp->tx_posted++;
  int ret = wait_done(pp, &pp->tx_done, pp->tx_posted, "fin send");
  if (!ret) ret = wait_done(pp, &pp->rx_done, pp->rx_posted, "fin receive");
  if (!ret && memcmp(pp->buf + pp->prefix, "fin", 4)) debug("peer's final message is not \"fin\"");
  debug("fin exchanged");
  return ret;
}

/* ------------------------------------------------------------ data checks */

static const char pp_chars[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
#define PP_NCHARS (sizeof pp_chars - 1)

static void fill_payload(struct pp *pp, size_t size) {
  char *p = pp->buf + pp->slot + pp->prefix;
  size_t start = (size_t)(pp->msg_index % (long)PP_NCHARS) * 7 % PP_NCHARS;
  for (size_t i = 0; i < size; i++) p[i] = pp_chars[(start + i) % PP_NCHARS];
}

static int check_payload(struct pp *pp, size_t size) {
  const char *p = pp->buf + pp->prefix;
  size_t start = (size_t)(pp->msg_index % (long)PP_NCHARS) * 7 % PP_NCHARS;
  for (size_t i = 0; i < size; i++) {
    if (p[i] != pp_chars[(start + i) % PP_NCHARS]) {
      fprintf(stderr, "Error at iteration=%ld size=%zu byte=%zu\n", pp->msg_index + 1, size, i);
      return -FI_EIO;
    }
  }
  return 0;
}

/* --------------------------------------------------------------- results */

/* 1536 -> "1.5k", 12800 -> "12k": one truncated decimal below 10 units, none above. */
static void fmt_amount(uint64_t v, char *out, size_t n) {
  static const char units[] = "kmg";
  uint64_t unit = 1;
  int u = -1;
  while (u < 2 && v >= (unit << 10)) { unit <<= 10; u++; }
  if (u < 0) { snprintf(out, n, "%" PRIu64, v); return; }
  uint64_t whole = v / unit, tenth = (v % unit) * 10 / unit;
  if (whole < 10 && tenth) snprintf(out, n, "%" PRIu64 ".%" PRIu64 "%c", whole, tenth, units[u]);
  else snprintf(out, n, "%" PRIu64 "%c", whole, units[u]);
}

/* Message counts use decimal units and no fraction: 1500 -> "1k", 1234567 -> "1m". */
static void fmt_count(long v, char *out, size_t n) {
  static const char units[] = "kmg";
  long unit = 1;
  int u = -1;
  while (u < 2 && v / 1000 >= unit) { unit *= 1000; u++; }
  if (u < 0) snprintf(out, n, "%ld", v);
  else snprintf(out, n, "%ld%c", v / unit, units[u]);
}

static void print_row(struct pp *pp, size_t size, long sent, long acked, long peer_count, uint64_t ns) {
  char sz[32], total[32], count[32], ack[40];
  double usec = (double)ns / 1000.0, xfers = 2.0 * (double)sent;
  uint64_t bytes = (uint64_t)size * (uint64_t)sent * 2;
  if (usec <= 0) usec = 1e-3;
  if (!pp->header_done) {
    printf("%-8s%-8s%-9s%-12s%-9s%-10s%-12s%s\n", "bytes", "#sent", "#ack", "total", "time", "MB/sec",
           "usec/xfer", "Mxfers/sec");
    pp->header_done = true;
  }
  fmt_amount(size, sz, sizeof sz);
  fmt_amount(bytes, total, sizeof total);
  long diff = acked - peer_count;
  fmt_count(diff ? labs(diff) : acked, count, sizeof count);
  snprintf(ack, sizeof ack, "%c%s", diff ? (diff > 0 ? '+' : '-') : '=', count);
  fmt_count(sent, count, sizeof count);
  printf("%-8s%-8s%-9s%-12s%.2fs%10.2f%11.2f%11.2f\n", sz, count, ack, total, usec / 1e6,
         (double)bytes / usec, usec / xfers, xfers / usec);
  fflush(stdout);
}

/* ------------------------------------------------------------ fabric setup */

static void add_size(struct pp *pp, size_t v, size_t max) {
  if (v <= max) pp->sizes[pp->nsizes++] = v;
}

static int build_sizes(struct pp *pp) {
  static const size_t defaults[] = {64, 256, 1024, 4096, 65536, 1048576};
  size_t max = pp->info->ep_attr->max_msg_size;
  pp->sizes = malloc(64 * sizeof *pp->sizes); /* -S all yields 46 sizes at most */
  if (!pp->sizes) return -FI_ENOMEM;
  if (pp->o.size_mode == 1) {
    if (pp->o.size > max) {
      error_msg("size %zu exceeds the endpoint's max_msg_size %zu", pp->o.size, max);
      return -FI_EMSGSIZE;
    }
    add_size(pp, pp->o.size, max);
  } else if (pp->o.size_mode == 2) {
    add_size(pp, 0, max);
    add_size(pp, 1, max);
    for (size_t p = 2; p < PP_ALL_LIMIT; p <<= 1) {
      add_size(pp, p, max);
      if (p + p / 2 < PP_ALL_LIMIT) add_size(pp, p + p / 2, max);
    }
  } else {
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) add_size(pp, defaults[i], max);
  }
  if (!pp->nsizes) { error_msg("no message size fits max_msg_size %zu", max); return -FI_EMSGSIZE; }
  debug("%zu message sizes to test", pp->nsizes);
  return 0;
}

static int alloc_buffers(struct pp *pp, const struct fi_info *info) {
  size_t max = 4; /* room for "fin" */
  for (size_t i = 0; i < pp->nsizes; i++)
    if (pp->sizes[i] > max) max = pp->sizes[i];
  pp->prefix = (info->mode & FI_MSG_PREFIX) ? info->ep_attr->msg_prefix_size : 0;
  pp->inject_size = info->tx_attr->inject_size;
  pp->slot = (pp->prefix + max + 63) & ~(size_t)63;
  void *mem;
  if (posix_memalign(&mem, 4096, 2 * pp->slot)) return -FI_ENOMEM;
  pp->buf = mem;
  memset(pp->buf, 0, 2 * pp->slot);
  if (info->domain_attr->mr_mode & FI_MR_LOCAL) {
    int ret = fi_mr_reg(pp->domain, pp->buf, 2 * pp->slot, FI_SEND | FI_RECV, 0, 0, 0, &pp->mr, NULL);
    if (ret) return fi_fail("fi_mr_reg", ret);
    pp->desc = fi_mr_desc(pp->mr);
  }
  debug("buffers: 2 x %zu bytes, prefix %zu, inject %zu, %sregistered", pp->slot, pp->prefix,
        pp->inject_size, pp->mr ? "" : "not ");
  return 0;
}

static int make_hints(struct pp *pp) {
  struct fi_info *h = fi_allocinfo();
  if (!h) return -FI_ENOMEM;
  pp->hints = h;
  h->caps = pp->o.tagged ? FI_TAGGED : FI_MSG;
  h->mode = FI_CONTEXT | FI_CONTEXT2 | FI_MSG_PREFIX;
  h->ep_attr->type = pp->o.ep == PP_MSG ? FI_EP_MSG : pp->o.ep == PP_RDM ? FI_EP_RDM : FI_EP_DGRAM;
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  if (pp->o.ep == PP_DGRAM && pp->o.size_mode == 1) h->ep_attr->max_msg_size = pp->o.size;
  if (pp->o.prov && !(h->fabric_attr->prov_name = strdup(pp->o.prov))) return -FI_ENOMEM;
  if (pp->o.domain && !(h->domain_attr->name = strdup(pp->o.domain))) return -FI_ENOMEM;
  return 0;
}

static int open_fabric(struct pp *pp) {
  struct fi_eq_attr eq_attr = {.size = 0, .flags = 0, .wait_obj = FI_WAIT_UNSPEC};
  int ret = fi_fabric(pp->info->fabric_attr, &pp->fabric, NULL);
  if (ret) return fi_fail("fi_fabric", ret);
  ret = fi_eq_open(pp->fabric, &eq_attr, &pp->eq, NULL);
  if (ret) return fi_fail("fi_eq_open", ret);
  return 0;
}

/* Domain, CQs, AV, endpoint and buffers for info (the CONNREQ's info on a msg server). */
static int open_endpoint(struct pp *pp, struct fi_info *info) {
  struct fi_cq_attr cq_attr;
  int ret = fi_domain(pp->fabric, info, &pp->domain, NULL);
  if (ret) return fi_fail("fi_domain", ret);
  memset(&cq_attr, 0, sizeof cq_attr);
  cq_attr.format = FI_CQ_FORMAT_CONTEXT;
  cq_attr.wait_obj = FI_WAIT_NONE;
  cq_attr.size = info->tx_attr->size;
  ret = fi_cq_open(pp->domain, &cq_attr, &pp->txcq, NULL);
  if (ret) return fi_fail("fi_cq_open", ret);
  cq_attr.size = info->rx_attr->size;
  ret = fi_cq_open(pp->domain, &cq_attr, &pp->rxcq, NULL);
  if (ret) return fi_fail("fi_cq_open", ret);
  ret = fi_endpoint(pp->domain, info, &pp->ep, NULL);
  if (ret) return fi_fail("fi_endpoint", ret);
  if (pp->o.ep == PP_MSG) {
    ret = fi_ep_bind(pp->ep, &pp->eq->fid, 0);
    if (ret) return fi_fail("fi_ep_bind", ret);
  } else {
    struct fi_av_attr av_attr;
    memset(&av_attr, 0, sizeof av_attr);
    av_attr.type = info->domain_attr->av_type;
    av_attr.count = 1;
    ret = fi_av_open(pp->domain, &av_attr, &pp->av, NULL);
    if (ret) return fi_fail("fi_av_open", ret);
    ret = fi_ep_bind(pp->ep, &pp->av->fid, 0);
    if (ret) return fi_fail("fi_ep_bind", ret);
  }
  ret = fi_ep_bind(pp->ep, &pp->txcq->fid, FI_TRANSMIT);
  if (ret) return fi_fail("fi_ep_bind", ret);
  ret = fi_ep_bind(pp->ep, &pp->rxcq->fid, FI_RECV);
  if (ret) return fi_fail("fi_ep_bind", ret);
  ret = fi_enable(pp->ep);
  if (ret) return fi_fail("fi_enable", ret);
  debug("endpoint enabled");
  return alloc_buffers(pp, info);
}

/* Waits for one CM event of type want on the EQ. */
static int wait_cm(struct pp *pp, uint32_t want, struct fi_eq_cm_entry *entry) {
  uint32_t event;
  ssize_t r = fi_eq_sread(pp->eq, &event, entry, sizeof *entry, PP_FABRIC_TIMEOUT_MS, 0);
  if (r == -FI_EAVAIL) {
    struct fi_eq_err_entry e;
    memset(&e, 0, sizeof e);
    fi_eq_readerr(pp->eq, &e, 0);
    fprintf(stderr, "connection error: %s (%s)\n", fi_strerror(e.err),
            fi_eq_strerror(pp->eq, e.prov_errno, e.err_data, NULL, 0));
    return e.err ? -e.err : -FI_ECONNREFUSED;
  }
  if (r == -FI_EAGAIN || r == -FI_ETIMEDOUT) {
    error_msg("no connection event within %d s", PP_FABRIC_TIMEOUT_MS / 1000);
    return -FI_ETIMEDOUT;
  }
  if (r < 0) return fi_fail("fi_eq_sread", (int)r);
  if (event != want) {
    error_msg("unexpected CM event %u (wanted %u)", event, want);
    if (event == FI_CONNREQ) fi_freeinfo(entry->info);
    return -FI_EOTHER;
  }
  return 0;
}

static int setup_server(struct pp *pp) {
  int ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, pp->hints, &pp->info);
  if (ret) return fi_fail("fi_getinfo", ret);
  if ((ret = build_sizes(pp)) || (ret = open_fabric(pp))) return ret;
  if (pp->o.ep == PP_MSG) {
    struct fi_eq_cm_entry entry;
    ret = fi_passive_ep(pp->fabric, pp->info, &pp->pep, NULL);
    if (ret) return fi_fail("fi_passive_ep", ret);
    ret = fi_pep_bind(pp->pep, &pp->eq->fid, 0);
    if (ret) return fi_fail("fi_pep_bind", ret);
    ret = fi_listen(pp->pep);
    if (ret) return fi_fail("fi_listen", ret);
    if ((ret = send_name(pp, &pp->pep->fid))) return ret;
    if ((ret = wait_cm(pp, FI_CONNREQ, &entry))) return ret;
    pp->conn_info = entry.info;
    debug("SERVER: connection request received");
    if ((ret = open_endpoint(pp, pp->conn_info))) return ret;
    ret = fi_accept(pp->ep, NULL, 0);
    if (ret) return fi_fail("fi_accept", ret);
    if ((ret = wait_cm(pp, FI_CONNECTED, &entry))) return ret;
    pp->peer = FI_ADDR_UNSPEC;
    debug("SERVER: connected");
    return post_recv(pp);
  }
  if ((ret = open_endpoint(pp, pp->info)) || (ret = post_recv(pp))) return ret;
  if ((ret = send_name(pp, &pp->ep->fid))) return ret;
  void *name;
  size_t len;
  uint32_t fmt;
  if ((ret = recv_name(pp, &name, &len, &fmt))) return ret;
  ret = fi_av_insert(pp->av, name, 1, &pp->peer, 0, NULL);
  free(name);
  if (ret != 1) return fi_fail("fi_av_insert", ret < 0 ? ret : -FI_EINVAL);
  return 0;
}

static int setup_client(struct pp *pp) {
  void *name;
  size_t len;
  uint32_t fmt;
  int ret = recv_name(pp, &name, &len, &fmt);
  if (ret) return ret;
  pp->hints->addr_format = fmt;
  pp->hints->dest_addr = name; /* owned by hints from here on */
  pp->hints->dest_addrlen = len;
  ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, pp->hints, &pp->info);
  if (ret) return fi_fail("fi_getinfo", ret);
  if ((ret = build_sizes(pp)) || (ret = open_fabric(pp)) || (ret = open_endpoint(pp, pp->info)))
    return ret;
  if (pp->o.ep == PP_MSG) {
    struct fi_eq_cm_entry entry;
    ret = fi_connect(pp->ep, pp->info->dest_addr, NULL, 0);
    if (ret) return fi_fail("fi_connect", ret);
    if ((ret = wait_cm(pp, FI_CONNECTED, &entry))) return ret;
    pp->peer = FI_ADDR_UNSPEC;
    debug("CLIENT: connected");
    return post_recv(pp);
  }
  if ((ret = post_recv(pp)) || (ret = send_name(pp, &pp->ep->fid))) return ret;
  ret = fi_av_insert(pp->av, pp->hints->dest_addr, 1, &pp->peer, 0, NULL);
  if (ret != 1) return fi_fail("fi_av_insert", ret < 0 ? ret : -FI_EINVAL);
  return 0;
}

/* ---------------------------------------------------------------- the test */

static int run_size(struct pp *pp, size_t size, bool server) {
  long done = 0, peer_count;
  int ret = pp_ctrl_sync(pp->ctrl, server); /* receives are already posted on both sides */
  if (ret) return ret;
  uint64_t t0 = now_ns();
  for (; done < pp->o.iters; done++, pp->msg_index++) {
    if (!server) {
      if (pp->o.check) fill_payload(pp, size);
      if ((ret = post_send(pp, size))) return ret;
    }
    if ((ret = wait_done(pp, &pp->rx_done, pp->rx_posted, "receive"))) return ret;
    if (pp->o.check && (ret = check_payload(pp, size))) return ret;
    if ((ret = post_recv(pp))) return ret;
    if (server) {
      if (pp->o.check) fill_payload(pp, size);
      if ((ret = post_send(pp, size))) return ret;
    }
  }
  uint64_t ns = now_ns() - t0;
  if ((ret = pp_ctrl_count(pp->ctrl, server, done, &peer_count))) return ret;
  if (server) debug("SERVER: client counted %ld", peer_count);
  print_row(pp, size, done, done, peer_count, ns);
  return 0;
}

#define CLOSE_FID(obj)                        \
  do {                                        \
    if (obj) {                                \
      int r_ = fi_close(&(obj)->fid);         \
      if (r_) fi_fail("fi_close", r_);        \
      (obj) = NULL;                           \
    }                                         \
  } while (0)

static void teardown(struct pp *pp) {
  CLOSE_FID(pp->ep);
  CLOSE_FID(pp->pep);
  CLOSE_FID(pp->av);
  CLOSE_FID(pp->txcq);
  CLOSE_FID(pp->rxcq);
  CLOSE_FID(pp->mr);
  CLOSE_FID(pp->domain);
  CLOSE_FID(pp->eq);
  CLOSE_FID(pp->fabric);
  if (pp->conn_info) fi_freeinfo(pp->conn_info);
  if (pp->info) fi_freeinfo(pp->info);
  if (pp->hints) fi_freeinfo(pp->hints);
  free(pp->buf);
  free(pp->sizes);
  if (pp->ctrl >= 0) close(pp->ctrl);
}

static int run(struct pp *pp) {
  bool server = !pp->o.dst_addr;
  int ret = make_hints(pp);
  if (ret) return ret;
  if (server) {
    const char *port = pp->o.src_port ? pp->o.src_port : PP_CTRL_DEFAULT_PORT;
    debug("SERVER: waiting for a client on port %s", port);
    ret = pp_ctrl_accept(port, pp->o.ipv6, &pp->ctrl);
  } else {
    ret = pp_ctrl_connect(pp->o.dst_addr, pp->o.dst_port ? pp->o.dst_port : PP_CTRL_DEFAULT_PORT,
                          pp->o.src_port, pp->o.ipv6, &pp->ctrl);
  }
  if (ret) return ret;
  debug("control connection established");
  ret = server ? setup_server(pp) : setup_client(pp);
  if (ret) return ret;
  if (pp->o.verbose) {
    debug("running with fi_info:");
    fputs(fi_tostr(pp->conn_info ? pp->conn_info : pp->info, FI_TYPE_INFO), stdout);
    fflush(stdout);
  }
  for (size_t i = 0; i < pp->nsizes; i++)
    if ((ret = run_size(pp, pp->sizes[i], server))) return ret;
  if ((ret = send_fin(pp))) return ret;
  if (pp->o.ep == PP_MSG) {
    ret = fi_shutdown(pp->ep, 0);
    if (ret) fi_fail("fi_shutdown", ret);
  }
  return 0;
}

int main(int argc, char **argv) {
  struct pp pp;
  memset(&pp, 0, sizeof pp);
  pp.ctrl = -1;
  if (parse_opts(argc, argv, &pp.o)) return EXIT_FAILURE;
  verbose = pp.o.verbose;
  debug("%s, endpoint %s, %s mode, provider %s, %ld iterations", pp.o.dst_addr ? "client" : "server",
        pp.o.ep == PP_MSG ? "msg" : pp.o.ep == PP_RDM ? "rdm" : "dgram",
        pp.o.tagged ? "tagged" : "msg", pp.o.prov ? pp.o.prov : "(any)", pp.o.iters);
  int ret = run(&pp);
  teardown(&pp);
  if (ret < 0) ret = -ret;
  return ret == 0 ? EXIT_SUCCESS : (ret < 256 ? ret : EXIT_FAILURE);
}
