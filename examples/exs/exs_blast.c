/* SPDX-License-Identifier: MIT */
/* exs_blast: throughput. The client sends -n messages of -s bytes with -w
 * of them in flight; the server receives them (with -w receives posted) and
 * answers one byte at the end; the client prints MB/s. -K runs the same
 * transfer over plain kernel TCP sockets.
 *   server: exs_blast [-K] [-t stream|seqpacket] [-p port] [-s size] [-n count] [-w window]
 *   client: the same, then the server */
#include "perf_common.h"

/* The clock starts once connected, as for libexs below. */
static int run_kernel(const struct perf_opts *o, char *buf, double *t0) {
  int fd = perf_kernel_connect(o);
  if (fd < 0) return perror("exs_blast"), -1;
  *t0 = perf_now();
  char ack = 'a';
  for (long i = 0; i < o->count; ++i)
    if (perf_kernel_full(fd, buf, o->size, o->host != NULL)) return -1;
  if (perf_kernel_full(fd, &ack, 1, o->host == NULL)) return -1;
  close(fd);
  return 0;
}

/* Client: keeps `window` sends in flight until every byte is out. */
static int exs_client(int fd, exs_qhandle_t q, char *buf, exs_mhandle_t mh,
                      const struct perf_opts *o) {
  long posted = 0, done = 0;
  char ack;
  exs_mhandle_t am = exs_mregister(&ack, 1, EXS_ACCESS_WRITE);
  if (exs_recv(fd, &ack, 1, 0, am, q, NULL)) return -1;
  int acked = 0;
  while (done < o->count || !acked) {
    while (posted < o->count && posted - done < o->window) {
      if (exs_send(fd, buf, o->size, 0, mh, q, NULL)) return -1;
      ++posted;
    }
    exs_event_t ev = perf_event(q);
    if (ev.exs_evt_type == EXS_EVT_SEND) ++done;
    else acked = 1;
  }
  exs_mderegister(&am);
  return 0;
}

/* Server: `window` receives posted; a stream's bytes are counted, whatever
 * pieces they come in. */
static int exs_server(int fd, exs_qhandle_t q, char *buf, exs_mhandle_t mh,
                      const struct perf_opts *o) {
  unsigned long long want = (unsigned long long)o->size * (unsigned long long)o->count, got = 0;
  long msgs = 0, outstanding = 0;
  int w = o->window;
  while (o->type == SOCK_STREAM ? got < want : msgs < o->count) {
    while (outstanding < w) {
      if (exs_recv(fd, buf, o->size, 0, mh, q, NULL)) return -1;
      ++outstanding;
    }
    exs_event_t ev = perf_event(q);
    --outstanding;
    if (ev.exs_evt_bytes == 0 && o->size) return -1; /* the client left */
    got += (unsigned long long)ev.exs_evt_bytes;
    ++msgs;
  }
  char ack = 'a';
  exs_mhandle_t am = exs_mregister(&ack, 1, EXS_ACCESS_READ);
  if (exs_send(fd, &ack, 1, 0, am, q, NULL)) return -1;
  for (;;) { /* the receives still posted end with the connection */
    exs_event_t ev = perf_event(q);
    if (ev.exs_evt_type == EXS_EVT_SEND) break;
  }
  exs_mderegister(&am);
  return 0;
}

int main(int argc, char **argv) {
  struct perf_opts o;
  if (perf_parse(argc, argv, &o, 65536, 20000)) return 2;
  char *buf = malloc(o.size);
  memset(buf, 'b', o.size);
  double t0 = perf_now();
  if (o.kernel) {
    if (run_kernel(&o, buf, &t0)) return fprintf(stderr, "exs_blast: transfer failed\n"), 1;
  } else {
    if (exs_init(EXS_VERSION1) != EXS_VERSION1) return 1;
    exs_qhandle_t q = exs_qcreate(2 * o.window + 8);
    int fd = perf_exs_connect(&o, q);
    if (fd < 0) return perror("exs_blast"), 1;
    t0 = perf_now();
    exs_mhandle_t mh = exs_mregister(buf, o.size, EXS_ACCESS_READ | EXS_ACCESS_WRITE);
    int r = o.host ? exs_client(fd, q, buf, mh, &o) : exs_server(fd, q, buf, mh, &o);
    if (r) return fprintf(stderr, "exs_blast: transfer failed\n"), 1;
    exs_close(fd);
    exs_mderegister(&mh);
  }
  double s = perf_now() - t0;
  if (o.host)
    printf("exs_blast: %s %zu bytes x %ld: %.1f MB/s\n",
           o.kernel ? "kernel" : (o.type == SOCK_STREAM ? "stream" : "seqpacket"), o.size, o.count,
           (double)o.size * (double)o.count / s / 1e6);
  free(buf);
  return 0;
}
