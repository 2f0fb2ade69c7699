/* SPDX-License-Identifier: MIT */
/* What exs_ping and exs_blast share: their command line, connecting and
 * accepting one peer, and the same program over plain kernel sockets (-K),
 * so the two can be compared run against run.
 *
 * Command line, like a socket program's:
 *   server: PROG [-K] [-t stream|seqpacket] [-p port] [-s size] [-n count] [-w window]
 *   client: the same, then the server's host name or address
 * The server serves one client and exits. */
#ifndef EXS_PERF_COMMON_H
#define EXS_PERF_COMMON_H

#include <exs/exs.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct perf_opts {
  int kernel;       /* -K: plain kernel TCP sockets instead of libexs */
  int type;         /* SOCK_STREAM or SOCK_SEQPACKET (libexs only) */
  int port;
  size_t size;      /* bytes per message */
  long count;       /* messages (ping: round trips) */
  int window;       /* blast: messages in flight */
  const char *host; /* the server to reach; NULL: be the server */
};

static inline int perf_parse(int argc, char **argv, struct perf_opts *o, size_t size,
                             long count) {
  int c;
  *o = (struct perf_opts){0, SOCK_STREAM, 7472, size, count, 16, NULL};
  while ((c = getopt(argc, argv, "Kt:p:s:n:w:")) != -1) {
    switch (c) {
      case 'K': o->kernel = 1; break;
      case 't': o->type = strcmp(optarg, "seqpacket") == 0 ? SOCK_SEQPACKET : SOCK_STREAM; break;
      case 'p': o->port = atoi(optarg); break;
      case 's': o->size = (size_t)strtoull(optarg, NULL, 0); break;
      case 'n': o->count = atol(optarg); break;
      case 'w': o->window = atoi(optarg); break;
      default:
        fprintf(stderr,
                "usage: %s [-K] [-t stream|seqpacket] [-p port] [-s size] [-n count] [-w window] "
                "[server]\n",
                argv[0]);
        return -1;
    }
  }
  if (optind < argc) o->host = argv[optind];
  if (o->kernel) o->type = SOCK_STREAM; /* TCP has no SOCK_SEQPACKET */
  if (o->size < 1 || o->count < 1 || o->window < 1) {
    fprintf(stderr, "%s: size, count and window must be positive\n", argv[0]);
    return -1;
  }
  return 0;
}

static inline double perf_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline int perf_resolve(const char *host, int port, struct sockaddr_in *a) {
  struct addrinfo h = {.ai_family = AF_INET}, *r = NULL;
  if (getaddrinfo(host, NULL, &h, &r) || !r) return -1;
  *a = *(struct sockaddr_in *)r->ai_addr;
  a->sin_port = htons((uint16_t)port);
  freeaddrinfo(r);
  return 0;
}

/* One event from q; exits the program on a failed operation. */
static inline exs_event_t perf_event(exs_qhandle_t q) {
  exs_event_t ev;
  while (exs_qdequeue(q, &ev, 1, NULL) != 1) {
  }
  if (ev.exs_evt_errno) {
    fprintf(stderr, "event %d failed: %s\n", ev.exs_evt_type, strerror(ev.exs_evt_errno));
    exit(1);
  }
  return ev;
}

/* The connected socket: the server's one accepted client, or the client's. */
static inline int perf_exs_connect(const struct perf_opts *o, exs_qhandle_t q) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
  if (o->host) {
    if (perf_resolve(o->host, o->port, &a)) return -1;
    int fd = exs_socket(AF_INET, o->type, 0);
    if (fd < 0 || exs_connect(fd, (struct sockaddr *)&a, sizeof a, 0, q, NULL)) return -1;
    perf_event(q);
    return fd;
  }
  int l = exs_socket(AF_INET, o->type, 0);
  if (l < 0 || exs_bind(l, (struct sockaddr *)&a, sizeof a) || exs_listen(l, 1) ||
      exs_accept(l, 0, q, NULL))
    return -1;
  exs_event_t ev = perf_event(q);
  exs_close(l);
  return EXS_EVT_NEW_SOCKET(ev);
}

static inline int perf_kernel_connect(const struct perf_opts *o) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
  int one = 1, fd;
  if (o->host) {
    if (perf_resolve(o->host, o->port, &a)) return -1;
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) return -1;
  } else {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1)) return -1;
    fd = accept(l, NULL, NULL);
    close(l);
    if (fd < 0) return -1;
  }
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

/* Kernel sockets: all of len, or -1. */
static inline int perf_kernel_full(int fd, char *buf, size_t len, int sending) {
  for (size_t done = 0; done < len;) {
    ssize_t n = sending ? send(fd, buf + done, len - done, MSG_NOSIGNAL)
                        : recv(fd, buf + done, len - done, 0);
    if (n <= 0) return -1;
    done += (size_t)n;
  }
  return 0;
}

#endif
