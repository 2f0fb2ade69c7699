/* SPDX-License-Identifier: MIT */
/* weft — the udp latency floor: a plain UDP socket ping-pong over loopback
 * between two processes, busy-polling as fi_pingpong does (a blocking recv
 * measures the scheduler's wakeup instead), no library in between. Prints one-way
 * latency per size in fi_pingpong's units (usec/xfer).
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

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 10000;
  size_t max = argc > 2 ? strtoul(argv[2], NULL, 0) : 65507;
  struct sockaddr_in a, b;
  int sa = bound_socket(&a), sb = bound_socket(&b);
  char *buf = calloc(1, 65536);
  pid_t child = fork();
  if (child == 0) { /* echo side */
    pin(0);
    for (;;) {
      ssize_t n = poll_recv(sb, buf);
      if (n <= 0 || (n == 1 && buf[0] == 'q')) _exit(0);
      sendto(sb, buf, n, 0, (struct sockaddr *)&a, sizeof a);
    }
  }
  pin(1);
  printf("bytes\tusec/xfer\n");
  for (size_t size = 1; size <= max; size = size * 2 > max && size < max ? max : size * 2) {
    if (size == 1) buf[0] = 'x';
    int warm = iters / 10;
    double start = 0;
    for (int i = 0; i < warm + iters; i++) {
      if (i == warm) start = now_us();
      sendto(sa, buf, size, 0, (struct sockaddr *)&b, sizeof b);
      poll_recv(sa, buf);
    }
    printf("%zu\t%.2f\n", size, (now_us() - start) / iters / 2);
  }
  buf[0] = 'q';
  sendto(sa, buf, 1, 0, (struct sockaddr *)&b, sizeof b);
  waitpid(child, NULL, 0);
  return 0;
}
