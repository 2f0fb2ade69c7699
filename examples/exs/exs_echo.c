/* SPDX-License-Identifier: MIT */
/* exs_echo: an echo server on libexs: many clients, one thread, one event
 * queue. Usage: exs_echo [-t stream|seqpacket] [-p port] */
#include <exs/exs.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BUF (4u << 20)
#define MAXFD 65536

struct conn {
  char *buf;
  exs_mhandle_t mh;
};

static struct conn *conns[MAXFD];

int main(int argc, char **argv) {
  int type = SOCK_STREAM, port = 7471, c;
  while ((c = getopt(argc, argv, "t:p:")) != -1) {
    if (c == 't') type = strcmp(optarg, "seqpacket") == 0 ? SOCK_SEQPACKET : SOCK_STREAM;
    else if (c == 'p') port = atoi(optarg);
    else return fprintf(stderr, "usage: %s [-t stream|seqpacket] [-p port]\n", argv[0]), 2;
  }
  if (exs_init(EXS_VERSION1) != EXS_VERSION1) return 1;
  exs_qhandle_t q = exs_qcreate(4096);
  int l = exs_socket(AF_INET, type, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  if (exs_bind(l, (struct sockaddr *)&a, sizeof a) || exs_listen(l, 128) ||
      exs_accept(l, 0, q, NULL)) {
    perror("exs_echo");
    return 1;
  }
  printf("exs_echo: listening on port %d (%s)\n", port,
         type == SOCK_STREAM ? "stream" : "seqpacket");
  fflush(stdout);
  for (;;) {
    exs_event_t ev;
    if (exs_qdequeue(q, &ev, 1, NULL) != 1) continue;
    int fd = ev.exs_evt_fd;
    if (ev.exs_evt_type == EXS_EVT_ACCEPT) {
      exs_accept(l, 0, q, NULL); /* keep one accept outstanding */
      if (ev.exs_evt_errno) continue;
      int nfd = EXS_EVT_NEW_SOCKET(ev);
      if (nfd < 0 || nfd >= MAXFD) { exs_close(nfd); continue; }
      struct conn *k = malloc(sizeof *k);
      k->buf = malloc(BUF);
      k->mh = exs_mregister(k->buf, BUF, EXS_ACCESS_READ | EXS_ACCESS_WRITE);
      conns[nfd] = k;
      exs_recv(nfd, k->buf, BUF, 0, k->mh, q, NULL);
      continue;
    }
    struct conn *k = fd >= 0 && fd < MAXFD ? conns[fd] : NULL;
    if (!k) continue;
    int over = ev.exs_evt_errno || (ev.exs_evt_flags & EXS_EVT_FLAG_EOF);
    if (!over && ev.exs_evt_type == EXS_EVT_RECV)
      over = exs_send(fd, k->buf, (size_t)ev.exs_evt_bytes, 0, k->mh, q, NULL) != 0;
    else if (!over && ev.exs_evt_type == EXS_EVT_SEND)
      over = exs_recv(fd, k->buf, BUF, 0, k->mh, q, NULL) != 0;
    if (over) { /* the client left; its one operation has completed */
      exs_close(fd);
      exs_mderegister(&k->mh);
      free(k->buf);
      free(k);
      conns[fd] = NULL;
    }
  }
}
