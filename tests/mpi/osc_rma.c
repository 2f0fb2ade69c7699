/* SPDX-License-Identifier: MIT */
/* weft — the one-sided Open MPI test (osc.c): MPI_Put and MPI_Get. Every
 * rank owns one SLOT-sized slot in every other rank's window. */
#include "osc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int sizes[] = {8, 1024, 64 * 1024, 1024 * 1024};
enum { NSIZES = sizeof(sizes) / sizeof(sizes[0]), ITERS = 2 };

static void poison_slots(struct win *w, void *arg) {
  (void)arg;
  memset(w->base, POISON, (size_t)nranks * SLOT);
}

struct slot_check {
  const char *what;
  int size, iter;
};

/* Every other rank's slot holds its pattern for us, and not a byte more. */
static void check_slots(struct win *w, void *arg) {
  const struct slot_check *sc = arg;
  for (int src = 0; src < nranks; src++) {
    const unsigned char *slot = w->base + (size_t)src * SLOT;
    if (src == rank) {
      for (int i = 0; i < SLOT; i++)
        if (slot[i] != POISON) fail("%s: our own slot was written (byte %d)", sc->what, i);
      continue;
    }
    verify(sc->what, slot, src, rank, sc->size, sc->iter);
    if (sc->size < SLOT && slot[sc->size] != POISON)
      fail("%s: %d-byte put from rank %d wrote past its end", sc->what, sc->size, src);
  }
}

static unsigned long long all_sizes_to_peers(void) {
  unsigned long long sum = 0;
  for (int s = 0; s < NSIZES; s++) sum += (unsigned long long)sizes[s];
  return sum * ITERS * (unsigned long long)(nranks - 1);
}

/* Put into every other rank's slot and get it back, under fences. */
void test_fence(struct win *w) {
  struct traffic t0 = traffic_now();
  for (int s = 0; s < NSIZES; s++)
    for (int it = 0; it < ITERS; it++) {
      int size = sizes[s];
      local_write(w, poison_slots, NULL);
      CHECK(MPI_Win_fence(MPI_MODE_NOPRECEDE, w->w));
      for (int t = 0; t < nranks; t++) {
        if (t == rank) continue;
        fill(sbuf[t], rank, t, size, it);
        CHECK(MPI_Put(sbuf[t], size, MPI_BYTE, t, disp(w, t, (size_t)rank * SLOT), size,
                      MPI_BYTE, w->w));
      }
      CHECK(MPI_Win_fence(0, w->w));
      struct slot_check sc = {"Put under fence", size, it};
      check_slots(w, &sc);
      for (int t = 0; t < nranks; t++) {
        if (t == rank) continue;
        memset(rbuf[t], POISON, (size_t)size);
        CHECK(MPI_Get(rbuf[t], size, MPI_BYTE, t, disp(w, t, (size_t)rank * SLOT), size,
                      MPI_BYTE, w->w));
      }
      CHECK(MPI_Win_fence(MPI_MODE_NOSUCCEED, w->w));
      for (int t = 0; t < nranks; t++)
        if (t != rank) verify("Get under fence", rbuf[t], rank, t, size, it);
    }
  struct traffic d = traffic_since(&t0);
  expect_bytes(w, "Put under fence", &d, OSC_TRACE_WRITE, all_sizes_to_peers());
  expect_bytes(w, "Get under fence", &d, OSC_TRACE_READ, all_sizes_to_peers());
}

/* The same with MPI_Win_lock / MPI_Win_unlock of one target at a time,
 * exclusive and shared locks alternating. */
void test_lock(struct win *w) {
  struct traffic t0 = traffic_now();
  for (int s = 0; s < NSIZES; s++)
    for (int it = 0; it < ITERS; it++) {
      int size = sizes[s];
      local_write(w, poison_slots, NULL);
      for (int d = 1; d < nranks; d++) {
        int t = (rank + d) % nranks;
        fill(sbuf[t], rank, t, size, it);
        CHECK(MPI_Win_lock(d % 2 ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED, t, 0, w->w));
        CHECK(MPI_Put(sbuf[t], size, MPI_BYTE, t, disp(w, t, (size_t)rank * SLOT), size,
                      MPI_BYTE, w->w));
        CHECK(MPI_Win_unlock(t, w->w));
      }
      CHECK(MPI_Barrier(MPI_COMM_WORLD));
      struct slot_check sc = {"Put under lock", size, it};
      local_read(w, check_slots, &sc);
      for (int d = 1; d < nranks; d++) {
        int t = (rank + d) % nranks;
        memset(rbuf[t], POISON, (size_t)size);
        CHECK(MPI_Win_lock(d % 2 ? MPI_LOCK_SHARED : MPI_LOCK_EXCLUSIVE, t, 0, w->w));
        CHECK(MPI_Get(rbuf[t], size, MPI_BYTE, t, disp(w, t, (size_t)rank * SLOT), size,
                      MPI_BYTE, w->w));
        CHECK(MPI_Win_unlock(t, w->w));
        verify("Get under lock", rbuf[t], rank, t, size, it);
      }
      CHECK(MPI_Barrier(MPI_COMM_WORLD));
    }
  struct traffic d = traffic_since(&t0);
  expect_bytes(w, "Put under lock", &d, OSC_TRACE_WRITE, all_sizes_to_peers());
  expect_bytes(w, "Get under lock", &d, OSC_TRACE_READ, all_sizes_to_peers());
}

/* One MPI_Win_lock_all epoch: MPI_Rput to every peer, MPI_Win_flush, then
 * MPI_Rget of what we put and of what a third rank put there. */
void test_lock_all(struct win *w) {
  struct traffic t0 = traffic_now();
  MPI_Request *req = xmalloc(sizeof(MPI_Request) * 2 * (size_t)nranks);
  unsigned char *third = xmalloc(SLOT);
  for (int s = 0; s < NSIZES; s++)
    for (int it = 0; it < ITERS; it++) {
      int size = sizes[s], n = 0;
      local_write(w, poison_slots, NULL);
      CHECK(MPI_Win_lock_all(0, w->w));
      for (int t = 0; t < nranks; t++) {
        if (t == rank) continue;
        fill(sbuf[t], rank, t, size, it);
        CHECK(MPI_Rput(sbuf[t], size, MPI_BYTE, t, disp(w, t, (size_t)rank * SLOT), size,
                       MPI_BYTE, w->w, &req[n++]));
      }
      CHECK(MPI_Waitall(n, req, MPI_STATUSES_IGNORE));
      for (int t = 0; t < nranks; t++)
        if (t != rank) CHECK(MPI_Win_flush(t, w->w));
      /* Every put everywhere is complete once everyone passed here. */
      CHECK(MPI_Barrier(MPI_COMM_WORLD));
      CHECK(MPI_Win_sync(w->w));
      struct slot_check sc = {"Rput under lock_all + flush", size, it};
      check_slots(w, &sc);
      for (int t = 0; t < nranks; t++) {
        if (t == rank) continue;
        memset(rbuf[t], POISON, (size_t)size);
        CHECK(MPI_Rget(rbuf[t], size, MPI_BYTE, t, disp(w, t, (size_t)rank * SLOT), size,
                       MPI_BYTE, w->w, &req[0]));
        CHECK(MPI_Wait(&req[0], MPI_STATUS_IGNORE));
        verify("Rget under lock_all", rbuf[t], rank, t, size, it);
      }
      /* The slot rank q = t + 1 filled at t, for t != q != rank. */
      for (int t = 0; t < nranks; t++) {
        int q = (t + 1) % nranks;
        if (t == rank || q == rank || q == t) continue;
        memset(third, POISON, (size_t)size);
        CHECK(MPI_Get(third, size, MPI_BYTE, t, disp(w, t, (size_t)q * SLOT), size, MPI_BYTE,
                      w->w));
        CHECK(MPI_Win_flush_local(t, w->w));
        verify("Get of a third rank's data under lock_all", third, q, t, size, it);
      }
      CHECK(MPI_Win_unlock_all(w->w));
      CHECK(MPI_Barrier(MPI_COMM_WORLD));
    }
  free(third);
  free(req);
  struct traffic d = traffic_since(&t0);
  expect_bytes(w, "Rput under lock_all", &d, OSC_TRACE_WRITE, all_sizes_to_peers());
  expect_bytes(w, "Rget under lock_all", &d, OSC_TRACE_READ, all_sizes_to_peers());
}

/* Many operations in flight at once: in one lock_all epoch every rank
 * issues FLIGHT small puts to every peer (more than a provider's transmit
 * queue holds: weft's holds 1024), flushes once, then as many gets, and
 * as many MPI_Fetch_and_op increments with a result buffer each, again
 * flushed once. */
enum { FLIGHT = 4096, FLIGHT_CHUNK = 64 };

void test_in_flight(struct win *w) {
  struct traffic t0 = traffic_now();
  const int size = FLIGHT * FLIGHT_CHUNK;
  long *fetched = xmalloc(sizeof(long) * FLIGHT * (size_t)nranks);
  local_write(w, poison_slots, NULL);
  CHECK(MPI_Win_lock_all(0, w->w));
  for (int t = 0; t < nranks; t++)
    if (t != rank) fill(sbuf[t], rank, t, size, 0);
  for (int k = 0; k < FLIGHT; k++)
    for (int d = 1; d < nranks; d++) {
      int t = (rank + d) % nranks;
      size_t off = (size_t)k * FLIGHT_CHUNK;
      CHECK(MPI_Put(sbuf[t] + off, FLIGHT_CHUNK, MPI_BYTE, t, disp(w, t, (size_t)rank * SLOT + off),
                    FLIGHT_CHUNK, MPI_BYTE, w->w));
    }
  CHECK(MPI_Win_flush_all(w->w));
  CHECK(MPI_Barrier(MPI_COMM_WORLD));
  CHECK(MPI_Win_sync(w->w));
  struct slot_check sc = {"4096 Puts in flight", size, 0};
  check_slots(w, &sc);
  for (int t = 0; t < nranks; t++)
    if (t != rank) memset(rbuf[t], POISON, (size_t)size);
  for (int k = 0; k < FLIGHT; k++)
    for (int d = 1; d < nranks; d++) {
      int t = (rank + d) % nranks;
      size_t off = (size_t)k * FLIGHT_CHUNK;
      CHECK(MPI_Get(rbuf[t] + off, FLIGHT_CHUNK, MPI_BYTE, t, disp(w, t, (size_t)rank * SLOT + off),
                    FLIGHT_CHUNK, MPI_BYTE, w->w));
    }
  CHECK(MPI_Win_flush_all(w->w));
  for (int t = 0; t < nranks; t++)
    if (t != rank) verify("4096 Gets in flight", rbuf[t], rank, t, size, 0);
  CHECK(MPI_Win_unlock_all(w->w));
  CHECK(MPI_Barrier(MPI_COMM_WORLD));

  /* The counters: a long at the start of every rank's own slot. */
  local_write(w, poison_slots, NULL);
  CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, w->w));
  for (int src = 0; src < nranks; src++) memset(w->base + (size_t)src * SLOT, 0, sizeof(long));
  CHECK(MPI_Win_unlock(rank, w->w));
  CHECK(MPI_Barrier(MPI_COMM_WORLD));
  CHECK(MPI_Win_lock_all(0, w->w));
  const long one = 1;
  for (int k = 0; k < FLIGHT; k++)
    for (int d = 1; d < nranks; d++) {
      int t = (rank + d) % nranks;
      CHECK(MPI_Fetch_and_op(&one, &fetched[(size_t)t * FLIGHT + (size_t)k], MPI_LONG, t,
                             disp(w, t, (size_t)rank * SLOT), MPI_SUM, w->w));
    }
  CHECK(MPI_Win_flush_all(w->w));
  CHECK(MPI_Win_unlock_all(w->w));
  /* Only we touched our counter at t: its values came back 0 .. FLIGHT-1
   * in some order (MPI does not order them). */
  for (int t = 0; t < nranks; t++)
    if (t != rank) check_fetched("4096 Fetch_and_op in flight", fetched + (size_t)t * FLIGHT, FLIGHT);
  CHECK(MPI_Barrier(MPI_COMM_WORLD));
  CHECK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, w->w));
  for (int src = 0; src < nranks; src++) {
    long v;
    memcpy(&v, w->base + (size_t)src * SLOT, sizeof v);
    if (v != (src == rank ? 0 : FLIGHT))
      fail("4096 Fetch_and_op in flight: rank %d's counter here is %ld, expected %d", src, v,
           src == rank ? 0 : FLIGHT);
  }
  CHECK(MPI_Win_unlock(rank, w->w));
  free(fetched);
  struct traffic d = traffic_since(&t0);
  unsigned long long bytes = (unsigned long long)size * (unsigned long long)(nranks - 1);
  expect_bytes(w, "Puts in flight", &d, OSC_TRACE_WRITE, bytes);
  expect_bytes(w, "Gets in flight", &d, OSC_TRACE_READ, bytes);
}

/* Non-contiguous data: a contiguous origin buffer put into a strided
 * target layout (MPI_Type_vector) under fences, and got back through a
 * strided origin from a contiguous target region. */
enum { VEC_COUNT = 512, VEC_BLOCK = 12, VEC_STRIDE = 20 }; /* in bytes */

void test_strided(struct win *w) {
  struct traffic t0 = traffic_now();
  MPI_Datatype vec;
  CHECK(MPI_Type_vector(VEC_COUNT, VEC_BLOCK, VEC_STRIDE, MPI_BYTE, &vec));
  CHECK(MPI_Type_commit(&vec));
  const int packed = VEC_COUNT * VEC_BLOCK, span = (VEC_COUNT - 1) * VEC_STRIDE + VEC_BLOCK;
  local_write(w, poison_slots, NULL);
  CHECK(MPI_Win_fence(MPI_MODE_NOPRECEDE, w->w));
  for (int t = 0; t < nranks; t++) {
    if (t == rank) continue;
    fill(sbuf[t], rank, t, packed, 3);
    CHECK(MPI_Put(sbuf[t], packed, MPI_BYTE, t, disp(w, t, (size_t)rank * SLOT), 1, vec, w->w));
  }
  CHECK(MPI_Win_fence(0, w->w));
  for (int src = 0; src < nranks; src++) {
    if (src == rank) continue;
    const unsigned char *slot = w->base + (size_t)src * SLOT;
    for (int i = 0; i < span + 64; i++) {
      int block = i / VEC_STRIDE, in = i % VEC_STRIDE;
      int data = block < VEC_COUNT && in < VEC_BLOCK;
      unsigned char want = data ? pattern(src, rank, packed, 3, (size_t)(block * VEC_BLOCK + in))
                                : POISON;
      if (slot[i] != want)
        fail("strided Put from rank %d: byte %d is 0x%02x, expected 0x%02x (%s)", src, i, slot[i],
             want, data ? "data" : "a gap");
    }
  }
  /* Back: the target's packed first `packed` bytes of our slot there are
   * not what we wrote; read the strided layout into a strided origin. */
  for (int t = 0; t < nranks; t++) {
    if (t == rank) continue;
    memset(rbuf[t], POISON, (size_t)span + 64);
    CHECK(MPI_Get(rbuf[t], 1, vec, t, disp(w, t, (size_t)rank * SLOT), 1, vec, w->w));
  }
  CHECK(MPI_Win_fence(MPI_MODE_NOSUCCEED, w->w));
  for (int t = 0; t < nranks; t++) {
    if (t == rank) continue;
    for (int i = 0; i < span + 64; i++) {
      int block = i / VEC_STRIDE, in = i % VEC_STRIDE;
      int data = block < VEC_COUNT && in < VEC_BLOCK;
      unsigned char want = data ? pattern(rank, t, packed, 3, (size_t)(block * VEC_BLOCK + in))
                                : POISON;
      if (rbuf[t][i] != want)
        fail("strided Get from rank %d: byte %d is 0x%02x, expected 0x%02x (%s)", t, i,
             rbuf[t][i], want, data ? "data" : "a gap");
    }
  }
  CHECK(MPI_Type_free(&vec));
  struct traffic d = traffic_since(&t0);
  expect_bytes(w, "strided Put", &d, OSC_TRACE_WRITE, (unsigned long long)packed * (nranks - 1));
  expect_bytes(w, "strided Get", &d, OSC_TRACE_READ, (unsigned long long)packed * (nranks - 1));
}
