/* SPDX-License-Identifier: MIT */
/* weft — the udp latency floor: a plain UDP socket ping-pong over loopback
 * between two processes, busy-polling as fi_pingpong does (a blocking recv
 * measures the scheduler's wakeup instead), no library in between. Prints one-way
 * latency per size in fi_pingpong's units (usec/xfer). Each ping carries
 * the round trip's number in its first bytes; the pong must come back whole
 * with it, or the program exits 1 (as it does when a system call fails).
 * Usage: udp_socket_pingpong [iterations] [max size] */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

/* Busy-polls for the next datagram. */
static ssize_t poll_recv(int s, char *buf) {
  ssize_t n;
  while ((n = recv(s, buf, 65536, MSG_DONTWAIT)) < 0) {
  }
  return n;
}

static int bound_socket(struct sockaddr_in *addr) {
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  socklen_t len = sizeof *addr;
  memset(addr, 0, sizeof *addr);
  addr->sin_family = AF_INET;
  addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (s < 0 || bind(s, (struct sockaddr *)addr, sizeof *addr) ||
      getsockname(s, (struct sockaddr *)addr, &len)) {
    perror("socket");
    exit(1);
  }
  return s;
}

static void check_pong(ssize_t n, size_t size, const char *buf, int i) {
  int stamp = 0;
  memcpy(&stamp, buf, size < sizeof stamp ? size : sizeof stamp);
  int want = 0;
  memcpy(&want, &i, size < sizeof want ? size : sizeof want);
  if (n != (ssize_t)size || stamp != want) {
    fprintf(stderr, "udp_socket_pingpong: round trip %d of %zu bytes came back wrong (%zd bytes)\n",
            i, size, n);
    exit(1);
  }
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 10000;
  size_t max = argc > 2 ? strtoul(argv[2], NULL, 0) : 65507;
  struct sockaddr_in a, b;
  int sa = bound_socket(&a), sb = bound_socket(&b);
  char *buf = calloc(1, 65536);
  pid_t child = fork();
  if (child < 0) {
    perror("fork");
    return 1;
  }
  if (child == 0) { /* echo side; an empty datagram ends it */
    pin(0);
    for (;;) {
      ssize_t n = poll_recv(sb, buf);
      if (n <= 0) _exit(n == 0 ? 0 : 1);
      if (sendto(sb, buf, n, 0, (struct sockaddr *)&a, sizeof a) != n) _exit(1);
    }
  }
  pin(1);
  printf("bytes\tusec/xfer\n");
  for (size_t size = 1; size <= max; size = size * 2 > max && size < max ? max : size * 2) {
    int warm = iters / 10;
    double start = 0;
    for (int i = 0; i < warm + iters; i++) {
      if (i == warm) start = now_us();
      memcpy(buf, &i, size < sizeof i ? size : sizeof i);
      if (sendto(sa, buf, size, 0, (struct sockaddr *)&b, sizeof b) != (ssize_t)size) {
        perror("sendto");
        return 1;
      }
      check_pong(poll_recv(sa, buf), size, buf, i);
    }
    printf("%zu\t%.2f\n", size, (now_us() - start) / iters / 2);
  }
  sendto(sa, buf, 0, 0, (struct sockaddr *)&b, sizeof b);
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
