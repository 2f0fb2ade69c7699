/* SPDX-License-Identifier: MIT */
/* exs_ping: latency. The client sends -s bytes, the server sends them back,
 * -n times; the client prints the one-way time (half the round trip) in
 * microseconds. -K runs the same exchange over plain kernel TCP sockets.
 *   server: exs_ping [-K] [-t stream|seqpacket] [-p port] [-s size] [-n count]
 *   client: exs_ping [-K] [-t stream|seqpacket] [-p port] [-s size] [-n count] server */
#include "perf_common.h"

/* libexs: one message of o->size bytes out of `out` and back into `buf`
 * (all of it, however a stream splits it). The client posts the answer's
 * receive before its send goes out; the server answers from `buf`. */
static void exs_exchange(int fd, exs_qhandle_t q, char *buf, const char *out, exs_mhandle_t mh,
                         exs_mhandle_t mo, const struct perf_opts *o, int send_first) {
  if (send_first) {
    if (exs_recv(fd, buf, o->size, 0, mh, q, NULL) ||
        exs_send(fd, out, o->size, 0, mo, q, NULL))
      exit(1);
    size_t got = 0;
    int sent = 0;
    while (!sent || got < o->size) {
      exs_event_t ev = perf_event(q);
      if (ev.exs_evt_type == EXS_EVT_SEND) {
        sent = 1;
      } else {
        got += (size_t)ev.exs_evt_bytes;
        if (ev.exs_evt_bytes == 0) exit(1); /* the server left */
        if (got < o->size && exs_recv(fd, buf + got, o->size - got, 0, mh, q, NULL)) exit(1);
      }
    }
    return;
  }
  for (size_t got = 0; got < o->size;) {
    if (exs_recv(fd, buf + got, o->size - got, 0, mh, q, NULL)) exit(1);
    exs_event_t ev = perf_event(q);
    if (ev.exs_evt_bytes == 0) exit(1);
    got += (size_t)ev.exs_evt_bytes;
  }
  if (exs_send(fd, buf, o->size, 0, mh, q, NULL)) exit(1);
  perf_event(q);
}

int main(int argc, char **argv) {
  struct perf_opts o;
  if (perf_parse(argc, argv, &o, 8, 10000)) return 2;
  /* The client sends `out`, receives into `buf` and checks the last answer
   * byte for byte (so exs_ping against exs_echo is an echo test too). */
  char *buf = malloc(o.size), *out = malloc(o.size);
  for (size_t i = 0; i < o.size; ++i) out[i] = (char)(i * 131 % 251);
  memset(buf, 0, o.size);
  long warm = o.count / 10 + 1;
  double t0 = 0;
  if (o.kernel) {
    int fd = perf_kernel_connect(&o);
    if (fd < 0) return perror("exs_ping"), 1;
    for (long i = 0; i < warm + o.count; ++i) {
      if (i == warm) t0 = perf_now();
      if (o.host ? perf_kernel_full(fd, out, o.size, 1) || perf_kernel_full(fd, buf, o.size, 0)
                 : perf_kernel_full(fd, buf, o.size, 0) || perf_kernel_full(fd, buf, o.size, 1))
        return fprintf(stderr, "exs_ping: the peer left\n"), 1;
    }
    close(fd);
  } else {
    if (exs_init(EXS_VERSION1) != EXS_VERSION1) return 1;
    exs_qhandle_t q = exs_qcreate(8);
    int fd = perf_exs_connect(&o, q);
    if (fd < 0) return perror("exs_ping"), 1;
    exs_mhandle_t mh = exs_mregister(buf, o.size, EXS_ACCESS_READ | EXS_ACCESS_WRITE);
    exs_mhandle_t mo = exs_mregister(out, o.size, EXS_ACCESS_READ);
    for (long i = 0; i < warm + o.count; ++i) {
      if (i == warm) t0 = perf_now();
      exs_exchange(fd, q, buf, out, mh, mo, &o, o.host != NULL);
    }
    exs_close(fd);
    exs_mderegister(&mh);
    exs_mderegister(&mo);
    exs_qdelete(q);
  }
  double us = (perf_now() - t0) * 1e6 / (double)o.count / 2;
  if (o.host && memcmp(buf, out, o.size) != 0)
    return fprintf(stderr, "exs_ping: the answer differs from what was sent\n"), 1;
  if (o.host)
    printf("exs_ping: %s %zu bytes one way: %.2f us (%ld round trips)\n",
           o.kernel ? "kernel" : (o.type == SOCK_STREAM ? "stream" : "seqpacket"), o.size, us,
           o.count);
  free(buf);
  free(out);
  return 0;
}
