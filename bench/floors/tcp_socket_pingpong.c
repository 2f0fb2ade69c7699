/* SPDX-License-Identifier: MIT */
/* weft — the tcp latency floor: a plain TCP socket ping-pong between two
 * processes (TCP_NODELAY), no library in between: over loopback, or between
 * two network namespaces when given a listening address and the network
 * namespace the echo side joins (bench/netpath.py's two hosts). Prints one-way
 * latency per size in fi_pingpong's units (usec/xfer). By default both sides
 * busy-poll with MSG_DONTWAIT, as fi_pingpong does; with "block" as the third
 * argument they sleep in recv, the "plain blocking-socket ping-pong" the tcp
 * issue names (on a VM that mostly measures the scheduler's wakeup). Each
 * ping carries the round trip's number in its first bytes and must come
 * back with it, or the program exits 1 (as it does when a system call or
 * the echo side fails).
 * Usage: tcp_socket_pingpong [iterations] [max size] [busy|block]
 *                            [listen address [echo side's netns name]]
 *   With a netns name, the echo side enters /var/run/netns/<name> (setns)
 *   before it connects to the listen address. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
}

static int blocking;

/* Receives exactly len bytes (a stream may deliver a message in parts). */
static int recv_all(int s, char *buf, size_t len) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = recv(s, buf + got, len - got, blocking ? 0 : MSG_DONTWAIT);
    if (n == 0) return -1;
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      return -1;
    }
    got += (size_t)n;
  }
  return 0;
}

static void send_all(int s, const char *buf, size_t len) {
  size_t off = 0;
  while (off < len) {
    ssize_t n = send(s, buf + off, len - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      perror("send");
      exit(1);
    }
    off += (size_t)n;
  }
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 10000;
  size_t max = argc > 2 ? strtoul(argv[2], NULL, 0) : 65536;
  blocking = argc > 3 && strcmp(argv[3], "block") == 0;
  const char *listen_addr = argc > 4 ? argv[4] : "127.0.0.1";
  const char *echo_netns = argc > 5 ? argv[5] : NULL;
  int one = 1;
  int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  if (inet_pton(AF_INET, listen_addr, &a.sin_addr) != 1) {
    fprintf(stderr, "tcp_socket_pingpong: bad address %s\n", listen_addr);
    return 1;
  }
  socklen_t alen = sizeof a;
  if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) ||
      getsockname(l, (struct sockaddr *)&a, &alen) || listen(l, 1)) {
    perror("listen");
    return 1;
  }
  char *buf = calloc(1, max + 1);
  if (!buf) return 1;
  pid_t child = fork();
  if (child < 0) {
    perror("fork");
    return 1;
  }
  if (child == 0) { /* echo side: the first 8 bytes of each message say its size */
    pin(0);
    if (echo_netns) { /* the other "host" */
      char path[256];
      snprintf(path, sizeof path, "/var/run/netns/%s", echo_netns);
      int ns = open(path, O_RDONLY | O_CLOEXEC);
      if (ns < 0 || setns(ns, CLONE_NEWNET)) {
        perror(path);
        _exit(1);
      }
      close(ns);
    }
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c, (struct sockaddr *)&a, sizeof a)) _exit(1);
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    for (;;) {
      size_t size;
      if (recv_all(c, (char *)&size, sizeof size)) _exit(1);
      if (size == 0) _exit(0); /* the end */
      if (size > max || recv_all(c, buf, size)) _exit(1);
      send_all(c, buf, size);
    }
  }
  int s = accept(l, NULL, NULL);
  if (s < 0) {
    perror("accept");
    return 1;
  }
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  pin(1);
  printf("bytes\tusec/xfer\n");
  for (size_t size = 1; size <= max; size = size * 2 > max && size < max ? max : size * 2) {
    int warm = iters / 10;
    double start = 0;
    for (int i = 0; i < warm + iters; i++) {
      if (i == warm) start = now_us();
      memcpy(buf, &i, size < sizeof i ? size : sizeof i);
      /* The size travels with the message, in the same writev (one system
         call per message, as a library that frames its messages makes). */
      struct iovec v[2] = {{&size, 8}, {buf, size}};
      struct msghdr m = {.msg_iov = v, .msg_iovlen = 2};
      size_t want = 8 + size;
      ssize_t n = sendmsg(s, &m, MSG_NOSIGNAL);
      if (n < 0) {
        perror("sendmsg");
        return 1;
      }
      if ((size_t)n < want) { /* the rest, rarely: a full socket buffer */
        size_t done = (size_t)n;
        if (done < 8) {
          send_all(s, (char *)&size + done, 8 - done);
          done = 8;
        }
        send_all(s, buf + (done - 8), want - done);
      }
      if (recv_all(s, buf, size)) {
        fprintf(stderr, "tcp_socket_pingpong: the echo side went away\n");
        return 1;
      }
      int stamp = 0, expect = 0;
      memcpy(&stamp, buf, size < sizeof stamp ? size : sizeof stamp);
      memcpy(&expect, &i, size < sizeof expect ? size : sizeof expect);
      if (stamp != expect) {
        fprintf(stderr, "tcp_socket_pingpong: round trip %d of %zu bytes came back wrong\n", i,
                size);
        return 1;
      }
    }
    printf("%zu\t%.2f\n", size, (now_us() - start) / iters / 2);
  }
  size_t zero = 0;
  send_all(s, (char *)&zero, sizeof zero);
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
