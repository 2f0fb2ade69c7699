/* SPDX-License-Identifier: MIT */
/* weft — the shm bandwidth ceiling: single-core memcpy bandwidth at a given
 * buffer size. A provider that copies each message once (a kernel-assisted
 * copy between the two processes, or one copy through a shared buffer on
 * each side of a pipeline) cannot move data faster than one core copies it.
 * For each size, one pair of buffers (touched first, so no page faults are
 * timed) is copied over and over for about 0.1 s in batches; the median
 * batch is reported, which keeps a preemption by another process on this
 * shared machine out of the number. Both buffers stay in the cache when they
 * fit, as a ping-pong's buffers do. Prints bytes and MB/s (10^6 bytes per
 * second, fi_pingpong's unit).
 * Usage: memcpy_bw [core] [size ...]   (default sizes: 64 KiB, 1 MiB, 4 MiB) */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The copy goes through a volatile function pointer so the compiler cannot
 * see that repeated copies of the same data are redundant. */
static void *(*volatile copy)(void *, const void *, size_t) = memcpy;

static double bandwidth(size_t size) {
  enum { batches = 21 };
  char *src = malloc(size), *dst = malloc(size);
  if (!src || !dst) {
    perror("malloc");
    exit(1);
  }
  memset(src, 0x5a, size);
  memset(dst, 0, size);
  /* Enough copies per batch to last ~5 ms at 20 GB/s, at least one. */
  size_t per_batch = 100000000 / size + 1;
  for (size_t i = 0; i < per_batch; i++) copy(dst, src, size); /* warm up */
  double mbs[batches];
  for (int b = 0; b < batches; b++) {
    double start = now_s();
    for (size_t i = 0; i < per_batch; i++) copy(dst, src, size);
    mbs[b] = (double)size * per_batch / (now_s() - start) / 1e6;
  }
  if (memcmp(dst, src, size)) { /* the copies did copy */
    fprintf(stderr, "memcpy_bw: the copy of %zu bytes differs\n", size);
    exit(1);
  }
  free(src);
  free(dst);
  qsort(mbs, batches, sizeof mbs[0], by_value);
  return mbs[batches / 2];
}

int main(int argc, char **argv) {
  int core = argc > 1 ? atoi(argv[1]) : 1;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  if (sched_setaffinity(0, sizeof set, &set)) perror("sched_setaffinity");
  static const size_t defaults[] = {65536, 1048576, 4194304};
  printf("bytes\tMB/s\n");
  if (argc > 2) {
    for (int i = 2; i < argc; i++) {
      size_t size = strtoul(argv[i], NULL, 0);
      if (size) printf("%zu\t%.0f\n", size, bandwidth(size));
    }
  } else {
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
      printf("%zu\t%.0f\n", defaults[i], bandwidth(defaults[i]));
  }
  return 0;
}
