/* SPDX-License-Identifier: MIT */
/* weft — what the layout of the rings costs a ping-pong, before any provider
 * work. Two processes (fork) exchange 8-byte messages through slots of 64
 * bytes, busy-polling a stamp, with nothing else on the path:
 *
 *   rings   two one-way rings of 64 slots, one per direction: shm's layout
 *           (each receiver owns the ring it reads; a slot holds a header and
 *           the payload; the consumer publishes its head after each read).
 *   paired  one ring whose every cache line carries message k of both
 *           directions (one half each), so a reply is written into the line
 *           its request arrived in.
 *
 * shm_flag_pingpong (the floor) hands one line back and forth, as
 * `paired` does. With two rings every reply goes to a line the replier does
 * not hold, which on this kind of machine costs a second line transfer per
 * hop: the difference between the two rows is that transfer, paid by any
 * provider built on one-way rings however little work it does. Timed like the
 * flag floor: batches of 500 round trips, the median batch, one-way time =
 * round trip / 2, in µs. The first payload byte carries the round trip's
 * number and must come back with it, or the program exits 1.
 * Usage: shm_ring_pingpong [round trips] [server core] [client core] */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { nslots = 64, batch = 500 };

/* rings: one slot per line, header (stamp, size, tag) then payload. */
struct slot {
  _Alignas(64) uint64_t stamp;
  uint64_t size, tag;
  unsigned char payload[40];
};
struct ring {
  struct slot s[nslots];
  _Alignas(64) uint64_t head; /* the consumer's, as in shm */
};
/* paired: the same header and payload in half a line per direction. */
struct half {
  uint64_t stamp, size, tag;
  unsigned char payload[8];
};
struct pair_line {
  _Alignas(64) struct half dir[2];
};

struct shared {
  struct ring rings[2];
  struct pair_line lines[nslots];
};

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set)) perror("sched_setaffinity");
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Message `pos` (counted from 0) of direction `d`: stamps are pos + 1, so a
 * zeroed slot is empty. */
static inline void ring_send(struct shared *m, int d, uint64_t pos, const unsigned char *p) {
  struct slot *s = &m->rings[d].s[pos % nslots];
  memcpy(s->payload, p, 8);
  s->size = 8;
  s->tag = 7;
  __atomic_store_n(&s->stamp, pos + 1, __ATOMIC_RELEASE);
}
static inline void ring_recv(struct shared *m, int d, uint64_t pos, unsigned char *out) {
  struct slot *s = &m->rings[d].s[pos % nslots];
  while (__atomic_load_n(&s->stamp, __ATOMIC_ACQUIRE) != pos + 1) {
  }
  memcpy(out, s->payload, 8);
  __atomic_store_n(&m->rings[d].head, pos + 1, __ATOMIC_RELEASE);
}
static inline void pair_send(struct shared *m, int d, uint64_t pos, const unsigned char *p) {
  struct half *h = &m->lines[pos % nslots].dir[d];
  memcpy(h->payload, p, 8);
  h->size = 8;
  h->tag = 7;
  __atomic_store_n(&h->stamp, pos + 1, __ATOMIC_RELEASE);
}
static inline void pair_recv(struct shared *m, int d, uint64_t pos, unsigned char *out) {
  struct half *h = &m->lines[pos % nslots].dir[d];
  while (__atomic_load_n(&h->stamp, __ATOMIC_ACQUIRE) != pos + 1) {
  }
  memcpy(out, h->payload, 8);
}

/* One round trip of message i: the client sends and waits for the answer,
 * the server waits and answers. */
static inline void round_trip(struct shared *m, int paired, int client, uint64_t i,
                              unsigned char *buf) {
  if (paired) {
    if (client) {
      pair_send(m, 0, i, buf);
      pair_recv(m, 1, i, buf);
    } else {
      pair_recv(m, 0, i, buf);
      pair_send(m, 1, i, buf);
    }
  } else if (client) {
    ring_send(m, 0, i, buf);
    ring_recv(m, 1, i, buf);
  } else {
    ring_recv(m, 0, i, buf);
    ring_send(m, 1, i, buf);
  }
}

/* One layout's run: the median batch's one-way µs (client side). */
static double run(struct shared *m, int paired, long iters, int server_core, int client_core) {
  memset(m, 0, sizeof *m);
  unsigned char buf[8] = {0};
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    exit(1);
  }
  if (pid == 0) {
    pin(server_core);
    for (long i = 0; i < iters; i++) round_trip(m, paired, 0, i, buf);
    _exit(0);
  }
  pin(client_core);
  long nb = iters / batch;
  double *b = calloc(nb ? nb : 1, sizeof *b);
  double t0 = now_us();
  unsigned char bad = 0;
  for (long i = 0; i < nb * batch; i++) {
    buf[0] = (unsigned char)i;
    round_trip(m, paired, 1, i, buf);
    bad |= buf[0] ^ (unsigned char)i;
    if ((i + 1) % batch == 0) {
      double t = now_us();
      b[i / batch] = (t - t0) / batch / 2;
      t0 = t;
    }
  }
  /* The server runs `iters` round trips; finish them. */
  for (long i = nb * batch; i < iters; i++) round_trip(m, paired, 1, i, buf);
  int status = 0;
  waitpid(pid, &status, 0);
  if (bad || !WIFEXITED(status) || WEXITSTATUS(status)) {
    fprintf(stderr, "shm_ring_pingpong: %s\n", bad ? "a reply came back wrong" : "the echo side failed");
    exit(1);
  }
  qsort(b, nb, sizeof *b, by_value);
  double med = nb ? b[nb / 2] : 0;
  free(b);
  return med;
}

int main(int argc, char **argv) {
  long iters = argc > 1 ? atol(argv[1]) : 100000;
  int server_core = argc > 2 ? atoi(argv[2]) : 0;
  int client_core = argc > 3 ? atoi(argv[3]) : 1;
  if (iters < batch) return 2;
  struct shared *m = mmap(NULL, sizeof(struct shared), PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  printf("layout\tusec/xfer\n");
  printf("rings\t%.3f\n", run(m, 0, iters, server_core, client_core));
  printf("paired\t%.3f\n", run(m, 1, iters, server_core, client_core));
  return 0;
}
