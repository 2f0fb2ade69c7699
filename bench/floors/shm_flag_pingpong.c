/* SPDX-License-Identifier: MIT */
/* weft — the shm latency floor: two processes (fork) hand one cache line of
 * a shared mmap'ed page back and forth, busy-polling. The line holds a
 * sequence word and, after it, the payload (up to 56 bytes), so each one-way
 * trip moves exactly one cache line between the two cores: what no
 * shared-memory provider can beat. The receiver copies the payload out, as a
 * provider delivers into the application's buffer. Prints one-way latency
 * (round trip / 2) per size in fi_pingpong's units (usec/xfer), like the udp
 * floor. Where the two virtual CPUs land on the host moves this number, so
 * measure it in the same run as what it is compared with. The round trips
 * are timed in batches of 500 and the median batch is reported: on a shared
 * 2-core machine one preemption (a 4 ms tick) in a run of 10,000 round trips
 * adds 0.1 µs to the average, which is the scheduler, not the floor. The
 * first payload byte carries the round trip's number and must come back
 * with it, or the program exits 1.
 * Usage: shm_flag_pingpong [iterations] [server core] [client core] */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* One cache line: the sequence word first, the payload after it. Odd
 * sequence numbers are pings (client to server), even ones pongs. */
struct line {
  _Alignas(64) uint64_t seq;
  unsigned char payload[56];
};

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set)) perror("sched_setaffinity");
}

/* Spins until the peer publishes `want`, then copies the payload out. No
 * pause instruction in the loop: on recent x86 one costs ~140 cycles, which
 * would add to the floor rather than measure it. */
static inline void wait_for(struct line *l, uint64_t want, unsigned char *out, size_t size) {
  while (__atomic_load_n(&l->seq, __ATOMIC_ACQUIRE) != want) {
  }
  memcpy(out, l->payload, size);
}

/* Writes the payload, then publishes it with the sequence word. */
static inline void publish(struct line *l, uint64_t seq, const unsigned char *in, size_t size) {
  memcpy(l->payload, in, size);
  __atomic_store_n(&l->seq, seq, __ATOMIC_RELEASE);
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 10000;
  int server_core = argc > 2 ? atoi(argv[2]) : 0;
  int client_core = argc > 3 ? atoi(argv[3]) : 1;
  /* fi_pingpong's sizes that fit in the line beside the sequence word. */
  static const size_t sizes[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48};
  const int nsizes = sizeof sizes / sizeof sizes[0];
  if (iters <= 0) return 2;
  struct line *l = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (l == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  memset(l, 0, sizeof *l);
  enum { batch = 500 };
  int warm = iters / 10 + 1;
  iters = (iters + batch - 1) / batch * batch;
  double *batches = calloc(iters / batch, sizeof *batches);
  if (!batches) return 1;
  pid_t child = fork();
  if (child < 0) {
    perror("fork");
    return 1;
  }
  if (child == 0) { /* echo side: answer every ping with a pong of the same size */
    unsigned char buf[56];
    pin(server_core);
    uint64_t seq = 1;
    for (int s = 0; s < nsizes; s++)
      for (int i = 0; i < warm + iters; i++, seq += 2) {
        wait_for(l, seq, buf, sizes[s]);
        publish(l, seq + 1, buf, sizes[s]);
      }
    _exit(0);
  }
  pin(client_core);
  unsigned char buf[56];
  memset(buf, 'x', sizeof buf);
  printf("bytes\tusec/xfer\n");
  uint64_t seq = 1;
  for (int s = 0; s < nsizes; s++) {
    unsigned char bad = 0;
    for (int i = 0; i < warm; i++, seq += 2) {
      buf[0] = (unsigned char)seq;
      publish(l, seq, buf, sizes[s]);
      wait_for(l, seq + 1, buf, sizes[s]);
      bad |= buf[0] ^ (unsigned char)seq;
    }
    for (int b = 0; b < iters / batch; b++) {
      double start = now_us();
      for (int i = 0; i < batch; i++, seq += 2) {
        buf[0] = (unsigned char)seq;
        publish(l, seq, buf, sizes[s]);
        wait_for(l, seq + 1, buf, sizes[s]);
        bad |= buf[0] ^ (unsigned char)seq;
      }
      batches[b] = (now_us() - start) / batch / 2;
    }
    if (bad) {
      fprintf(stderr, "shm_flag_pingpong: a %zu-byte pong came back wrong\n", sizes[s]);
      kill(child, SIGKILL);
      return 1;
    }
    qsort(batches, iters / batch, sizeof *batches, by_value);
    printf("%zu\t%.3f\n", sizes[s], batches[iters / batch / 2]);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
