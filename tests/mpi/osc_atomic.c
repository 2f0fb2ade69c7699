/* SPDX-License-Identifier: MIT */
/* weft — the one-sided Open MPI test (osc.c): MPI_Accumulate,
 * MPI_Fetch_and_op, MPI_Get_accumulate, and threads. */
#include "osc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- accumulates ---- */

enum { NTYPES = 3, NOPS = 3, ACC_ITERS = 3 };
static const char *const type_name[NTYPES] = {"MPI_INT", "MPI_LONG", "MPI_DOUBLE"};
static const char *const op_name[NOPS] = {"MPI_SUM", "MPI_MAX", "MPI_REPLACE"};
static const int acc_counts[] = {1, 7, 100, 20000};
enum { NCOUNTS = sizeof(acc_counts) / sizeof(acc_counts[0]), ACC_MAX = 20000 };

static MPI_Datatype mpi_type(int ty) {
  return ty == 0 ? MPI_INT : ty == 1 ? MPI_LONG : MPI_DOUBLE;
}
static MPI_Op mpi_op(int op) { return op == 0 ? MPI_SUM : op == 1 ? MPI_MAX : MPI_REPLACE; }

/* Small integers, negative ones too, so that every sum is exact in each
 * type; MPI_LONG's are shifted beyond 32 bits so a 32-bit operation on them
 * is seen. */
static long value_init(int ty, size_t i) {
  long v = (long)(i % 1000) - 500;
  return ty == 1 ? v * 4294967296L + 7 : v;
}
static long value_of(int ty, int r, int iter, size_t i) {
  long v = (long)((i * 7 + (size_t)r * 13 + (size_t)iter * 5) % 61) - 30;
  return ty == 1 ? v * 4294967296L + r + 1 : v;
}

static void store(void *buf, int ty, size_t i, long v) {
  if (ty == 0) ((int *)buf)[i] = (int)v;
  else if (ty == 1) ((long *)buf)[i] = v;
  else ((double *)buf)[i] = (double)v;
}
static int load(const void *buf, int ty, size_t i, long *v) {
  if (ty == 0) *v = ((const int *)buf)[i];
  else if (ty == 1) *v = ((const long *)buf)[i];
  else {
    double d = ((const double *)buf)[i];
    *v = (long)d;
    return (double)*v == d; /* an exact integer, or wrong */
  }
  return 1;
}

/* The value element i must end with, or for MPI_REPLACE 0 (any origin's
 * last value is right: checked by the caller). */
static long expected(int ty, int op, size_t i) {
  long v = value_init(ty, i);
  for (int r = 0; r < nranks; r++)
    for (int it = 0; it < ACC_ITERS; it++) {
      long x = value_of(ty, r, it, i);
      if (op == 0) v += x;
      else if (op == 1 && x > v) v = x;
    }
  return v;
}

struct acc_case {
  int ty, op, count, passive;
};

static void acc_init(struct win *w, void *arg) {
  const struct acc_case *c = arg;
  for (size_t i = 0; i < (size_t)c->count; i++) store(w->base, c->ty, i, value_init(c->ty, i));
}

static void acc_check(struct win *w, void *arg) {
  const struct acc_case *c = arg;
  const char *sync = c->passive ? "lock_all" : "fence";
  for (size_t i = 0; i < (size_t)c->count; i++) {
    long got;
    if (!load(w->base, c->ty, i, &got))
      fail("Accumulate %s %s (%d elements, %s): element %zu is %g, not an integer",
           op_name[c->op], type_name[c->ty], c->count, sync, i, ((double *)w->base)[i]);
    if (c->op == 2) {
      int ok = 0;
      for (int r = 0; r < nranks && !ok; r++) ok = got == value_of(c->ty, r, ACC_ITERS - 1, i);
      if (!ok)
        fail("Accumulate MPI_REPLACE %s (%d elements, %s): element %zu is %ld, no rank's last "
             "value",
             type_name[c->ty], c->count, sync, i, got);
    } else if (got != expected(c->ty, c->op, i)) {
      fail("Accumulate %s %s (%d elements, %s): element %zu is %ld, expected %ld",
           op_name[c->op], type_name[c->ty], c->count, sync, i, got, expected(c->ty, c->op, i));
    }
  }
}

/* Open MPI 4.1.4 aborts a rank ("btl_ofi_atomics.c:25:to_fi_op] Unknown or
 * unsupported atomic op.") when osc rdma hands btl ofi a network atomic
 * MPI_MAX: osc rdma maps MPI_MAX/MPI_MIN to btl atomics without looking at
 * the btl's btl_atomic_flags (osc_rdma_accumulate.c,
 * ompi_osc_rdma_fetch_and_op_atomic), and 4.1's btl ofi advertises and
 * translates only add, swap and compare-and-swap. With
 * osc_rdma_acc_use_amo true (the default) that happens for MPI_INT and
 * MPI_LONG accumulates of up to osc_rdma_network_max_amo (32) elements,
 * and of longer ones whose pieces osc rdma sends that way (4097 or 20000
 * MPI_LONGs abort, 4096 do not), whenever the window goes through the btl.
 * run_osc.sh runs the program once with osc_rdma_acc_use_amo false, where
 * osc rdma does these with fi_compare_atomic and every case runs, and once
 * with the default, where integer MPI_MAX on btl windows is left out. */
static int acc_use_amo = -1;

static int max_would_abort(const struct win *w, int ty, int op) {
  return acc_use_amo && w->kind != ALLOCATE && op == 1 && ty != 2;
}

/* osc_rdma_acc_use_amo, read through the MPI tool interface. */
void read_acc_use_amo(void) {
  int provided, index, count;
  MPI_T_cvar_handle handle;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) fail("MPI_T_init_thread failed");
  if (MPI_T_cvar_get_index("osc_rdma_acc_use_amo", &index) != MPI_SUCCESS)
    fail("Open MPI has no control variable osc_rdma_acc_use_amo (not osc rdma?)");
  if (MPI_T_cvar_handle_alloc(index, NULL, &handle, &count) != MPI_SUCCESS || count != 1)
    fail("cannot read osc_rdma_acc_use_amo");
  /* A bool variable may be a C bool or an int: zeroed room for either, and
   * any byte set means true. */
  unsigned char value[16] = {0};
  if (MPI_T_cvar_read(handle, value) != MPI_SUCCESS) fail("cannot read osc_rdma_acc_use_amo");
  acc_use_amo = 0;
  for (size_t i = 0; i < sizeof value; i++) acc_use_amo |= value[i] != 0;
  MPI_T_cvar_handle_free(&handle);
  MPI_T_finalize();
  if (rank == 0) {
    printf("osc: osc_rdma_acc_use_amo is %s%s\n", acc_use_amo ? "true" : "false",
           acc_use_amo ? ": MPI_MAX on MPI_INT/MPI_LONG through the btl left out "
                         "(Open MPI 4.1.4 aborts on it)"
                       : "");
    fflush(stdout);
  }
}

/* Every rank accumulates into every rank's window (itself too), ACC_ITERS
 * times, under fences or one lock_all epoch (where MPI's default
 * accumulate ordering keeps each origin's updates in order). */
static void test_accumulate(struct win *w, int passive) {
  struct traffic t0 = traffic_now();
  void *src[ACC_ITERS];
  for (int it = 0; it < ACC_ITERS; it++) src[it] = xmalloc(ACC_MAX * sizeof(long));
  for (int ty = 0; ty < NTYPES; ty++)
    for (int op = 0; op < NOPS; op++)
      for (int k = 0; k < NCOUNTS; k++) {
        struct acc_case c = {ty, op, acc_counts[k], passive};
        if (max_would_abort(w, ty, op)) continue;
        for (int it = 0; it < ACC_ITERS; it++)
          for (size_t i = 0; i < (size_t)c.count; i++) store(src[it], ty, i, value_of(ty, rank, it, i));
        local_write(w, acc_init, &c);
        if (passive) CHECK(MPI_Win_lock_all(0, w->w));
        else CHECK(MPI_Win_fence(MPI_MODE_NOPRECEDE, w->w));
        for (int it = 0; it < ACC_ITERS; it++) {
          for (int d = 0; d < nranks; d++) {
            int t = (rank + d) % nranks;
            CHECK(MPI_Accumulate(src[it], c.count, mpi_type(ty), t, disp(w, t, 0), c.count,
                                 mpi_type(ty), mpi_op(op), w->w));
          }
          if (!passive)
            CHECK(MPI_Win_fence(it == ACC_ITERS - 1 ? MPI_MODE_NOSUCCEED : 0, w->w));
        }
        if (passive) CHECK(MPI_Win_unlock_all(w->w));
        CHECK(MPI_Barrier(MPI_COMM_WORLD));
        local_read(w, acc_check, &c);
        CHECK(MPI_Barrier(MPI_COMM_WORLD));
      }
  for (int it = 0; it < ACC_ITERS; it++) free(src[it]);
  struct traffic d = traffic_since(&t0);
  unsigned long long ops = d.c[OSC_TRACE_WRITE] + d.c[OSC_TRACE_READ] + atomics_of(&d);
  if (w->kind != ALLOCATE && ops < (unsigned long long)(nranks - 1))
    fail("Accumulate on the %s window: only %llu libfabric RMA/atomic calls", kind_name[w->kind],
         ops);
}

void test_accumulate_fence(struct win *w) { test_accumulate(w, 0); }
void test_accumulate_lock_all(struct win *w) { test_accumulate(w, 1); }

/* ---- fetching atomics ---- */

enum { FOP_ROUNDS = 200, GACC_ROUNDS = 50, GACC_COUNT = 4 };

struct counters {
  long l;
  int i;
  int pad;
  long g[GACC_COUNT];
};

static void counters_zero(struct win *w, void *arg) {
  (void)arg;
  memset(w->base, 0, sizeof(struct counters));
}

/* MPI_Fetch_and_op(MPI_SUM, +1) from every rank on a MPI_LONG and a
 * MPI_INT counter in every rank's window, FOP_ROUNDS times, each flushed;
 * MPI_NO_OP reads in between never go backwards. Then every fetched value
 * is gathered: at each counter they are 0 .. nranks * FOP_ROUNDS - 1, each
 * once (the increments were atomic), and a final MPI_NO_OP reads the
 * total. */
void test_fetch_and_op(struct win *w) {
  struct traffic t0 = traffic_now();
  size_t per = (size_t)nranks * FOP_ROUNDS; /* one rank's fetches: [target][round] */
  long *mine = xmalloc(sizeof(long) * 2 * per);
  long *all = xmalloc(sizeof(long) * 2 * per * (size_t)nranks);
  local_write(w, counters_zero, NULL);
  const long one_l = 1;
  const int one_i = 1;
  CHECK(MPI_Win_lock_all(0, w->w));
  for (int k = 0; k < FOP_ROUNDS; k++)
    for (int d = 0; d < nranks; d++) {
      int t = (rank + d) % nranks;
      long got_l = -1;
      int got_i = -1;
      CHECK(MPI_Fetch_and_op(&one_l, &got_l, MPI_LONG, t, disp(w, t, offsetof(struct counters, l)),
                             MPI_SUM, w->w));
      CHECK(MPI_Fetch_and_op(&one_i, &got_i, MPI_INT, t, disp(w, t, offsetof(struct counters, i)),
                             MPI_SUM, w->w));
      CHECK(MPI_Win_flush(t, w->w));
      mine[(size_t)t * FOP_ROUNDS + (size_t)k] = got_l;
      mine[per + (size_t)t * FOP_ROUNDS + (size_t)k] = got_i;
      if (k % 16 == 15) {
        long seen = -1;
        CHECK(MPI_Fetch_and_op(NULL, &seen, MPI_LONG, t, disp(w, t, offsetof(struct counters, l)),
                               MPI_NO_OP, w->w));
        CHECK(MPI_Win_flush(t, w->w));
        if (seen <= got_l || seen > (long)per)
          fail("MPI_NO_OP read %ld from rank %d's counter after our increment fetched %ld", seen,
               t, got_l);
      }
    }
  CHECK(MPI_Win_unlock_all(w->w));
  CHECK(MPI_Allgather(mine, (int)(2 * per), MPI_LONG, all, (int)(2 * per), MPI_LONG,
                      MPI_COMM_WORLD));
  for (int v = 0; v < 2; v++) {
    long *ours = xmalloc(sizeof(long) * per);
    for (int r = 0; r < nranks; r++)
      memcpy(ours + (size_t)r * FOP_ROUNDS,
             all + (size_t)r * 2 * per + (size_t)v * per + (size_t)rank * FOP_ROUNDS,
             sizeof(long) * FOP_ROUNDS);
    check_fetched(v ? "Fetch_and_op MPI_SUM MPI_INT" : "Fetch_and_op MPI_SUM MPI_LONG", ours,
                  per);
    free(ours);
  }
  CHECK(MPI_Barrier(MPI_COMM_WORLD));
  CHECK(MPI_Win_lock_all(0, w->w));
  for (int t = 0; t < nranks; t++) {
    long seen_l = -1;
    int seen_i = -1;
    CHECK(MPI_Fetch_and_op(NULL, &seen_l, MPI_LONG, t, disp(w, t, offsetof(struct counters, l)),
                           MPI_NO_OP, w->w));
    CHECK(MPI_Fetch_and_op(NULL, &seen_i, MPI_INT, t, disp(w, t, offsetof(struct counters, i)),
                           MPI_NO_OP, w->w));
    CHECK(MPI_Win_flush(t, w->w));
    if (seen_l != (long)per || seen_i != (int)per)
      fail("after %zu increments rank %d's counters read %ld (MPI_LONG) and %d (MPI_INT)", per, t,
           seen_l, seen_i);
  }
  CHECK(MPI_Win_unlock_all(w->w));
  CHECK(MPI_Barrier(MPI_COMM_WORLD));
  free(all);
  free(mine);
  struct traffic d = traffic_since(&t0);
  unsigned long long want = 2ull * FOP_ROUNDS * (unsigned long long)(nranks - 1);
  if (w->kind != ALLOCATE && atomics_of(&d) < want)
    fail("Fetch_and_op on the %s window: %llu libfabric atomic calls, expected at least %llu",
         kind_name[w->kind], atomics_of(&d), want);
}

/* MPI_Get_accumulate(MPI_SUM, +1 on GACC_COUNT longs) from every rank to
 * every rank, GACC_ROUNDS times: per element the fetched values are again
 * 0 .. nranks * GACC_ROUNDS - 1 each once; then MPI_Get_accumulate with
 * MPI_NO_OP reads the totals. */
void test_get_accumulate(struct win *w) {
  struct traffic t0 = traffic_now();
  size_t per = (size_t)nranks * GACC_ROUNDS * GACC_COUNT; /* [target][round][element] */
  long *mine = xmalloc(sizeof(long) * per);
  long *all = xmalloc(sizeof(long) * per * (size_t)nranks);
  long ones[GACC_COUNT], got[GACC_COUNT];
  for (int e = 0; e < GACC_COUNT; e++) ones[e] = 1;
  local_write(w, counters_zero, NULL);
  size_t off = offsetof(struct counters, g);
  CHECK(MPI_Win_lock_all(0, w->w));
  for (int k = 0; k < GACC_ROUNDS; k++)
    for (int d = 0; d < nranks; d++) {
      int t = (rank + d) % nranks;
      CHECK(MPI_Get_accumulate(ones, GACC_COUNT, MPI_LONG, got, GACC_COUNT, MPI_LONG, t,
                               disp(w, t, off), GACC_COUNT, MPI_LONG, MPI_SUM, w->w));
      CHECK(MPI_Win_flush(t, w->w));
      memcpy(mine + ((size_t)t * GACC_ROUNDS + (size_t)k) * GACC_COUNT, got, sizeof got);
    }
  CHECK(MPI_Win_unlock_all(w->w));
  CHECK(MPI_Allgather(mine, (int)per, MPI_LONG, all, (int)per, MPI_LONG, MPI_COMM_WORLD));
  size_t n = (size_t)nranks * GACC_ROUNDS;
  long *ours = xmalloc(sizeof(long) * n);
  for (int e = 0; e < GACC_COUNT; e++) {
    for (int r = 0; r < nranks; r++)
      for (int k = 0; k < GACC_ROUNDS; k++)
        ours[(size_t)r * GACC_ROUNDS + (size_t)k] =
            all[(size_t)r * per + ((size_t)rank * GACC_ROUNDS + (size_t)k) * GACC_COUNT + (size_t)e];
    check_fetched("Get_accumulate MPI_SUM MPI_LONG", ours, n);
  }
  free(ours);
  CHECK(MPI_Barrier(MPI_COMM_WORLD));
  CHECK(MPI_Win_lock_all(0, w->w));
  for (int t = 0; t < nranks; t++) {
    CHECK(MPI_Get_accumulate(NULL, 0, MPI_LONG, got, GACC_COUNT, MPI_LONG, t, disp(w, t, off),
                             GACC_COUNT, MPI_LONG, MPI_NO_OP, w->w));
    CHECK(MPI_Win_flush(t, w->w));
    for (int e = 0; e < GACC_COUNT; e++)
      if (got[e] != (long)n)
        fail("Get_accumulate MPI_NO_OP: rank %d's element %d is %ld, expected %zu", t, e, got[e], n);
  }
  CHECK(MPI_Win_unlock_all(w->w));
  CHECK(MPI_Barrier(MPI_COMM_WORLD));
  free(all);
  free(mine);
  struct traffic d = traffic_since(&t0);
  unsigned long long ops = d.c[OSC_TRACE_WRITE] + d.c[OSC_TRACE_READ] + atomics_of(&d);
  if (w->kind != ALLOCATE && ops < (unsigned long long)GACC_ROUNDS * (unsigned long long)(nranks - 1))
    fail("Get_accumulate on the %s window: only %llu libfabric RMA/atomic calls", kind_name[w->kind],
         ops);
}

/* MPI_THREAD_MULTIPLE only: THREADS threads per rank at once, in one
 * lock_all epoch, each incrementing every rank's counter with
 * MPI_Fetch_and_op and putting a block into its own place in every
 * rank's window, each operation flushed. Open MPI 4.1.4's btl ofi asks
 * for FI_THREAD_UNSPEC and gets weft's FI_THREAD_SAFE endpoint in every
 * run; here several threads use it together. */
enum { THREADS = 2, THR_ROUNDS = 100, THR_BLOCK = 4096, THR_BASE = 4096 };

struct thread_arg {
  struct win *w;
  int id;
  long *fetched;          /* [target][round] */
  unsigned char *block;   /* THR_BLOCK */
};

static size_t thr_offset(int src, int id) {
  return (size_t)src * SLOT + THR_BASE + (size_t)id * 2 * THR_BLOCK;
}

static void *thread_body(void *p) {
  struct thread_arg *a = p;
  const long one = 1;
  for (int k = 0; k < THR_ROUNDS; k++)
    for (int d = 0; d < nranks; d++) {
      int t = (rank + d) % nranks;
      CHECK(MPI_Fetch_and_op(&one, &a->fetched[(size_t)t * THR_ROUNDS + (size_t)k], MPI_LONG, t,
                             disp(a->w, t, 0), MPI_SUM, a->w->w));
      fill(a->block, rank * THREADS + a->id, t, THR_BLOCK, k);
      CHECK(MPI_Put(a->block, THR_BLOCK, MPI_BYTE, t, disp(a->w, t, thr_offset(rank, a->id)),
                    THR_BLOCK, MPI_BYTE, a->w->w));
      CHECK(MPI_Win_flush(t, a->w->w));
    }
  return NULL;
}

static void thr_check(struct win *w, void *arg) {
  (void)arg;
  for (int src = 0; src < nranks; src++)
    for (int id = 0; id < THREADS; id++)
      verify("Put from a thread", w->base + thr_offset(src, id), src * THREADS + id, rank,
             THR_BLOCK, THR_ROUNDS - 1);
  long v;
  memcpy(&v, w->base, sizeof v);
  if (v != (long)nranks * THREADS * THR_ROUNDS)
    fail("threads: our counter is %ld, expected %d", v, nranks * THREADS * THR_ROUNDS);
}

void test_threads(struct win *w) {
  struct traffic t0 = traffic_now();
  size_t per = (size_t)nranks * THR_ROUNDS; /* one thread's fetches */
  long *mine = xmalloc(sizeof(long) * THREADS * per);
  long *all = xmalloc(sizeof(long) * THREADS * per * (size_t)nranks);
  struct thread_arg args[THREADS];
  pthread_t th[THREADS];
  local_write(w, counters_zero, NULL);
  CHECK(MPI_Win_lock_all(0, w->w));
  for (int i = 0; i < THREADS; i++) {
    args[i] = (struct thread_arg){w, i, mine + (size_t)i * per, xmalloc(THR_BLOCK)};
    if (pthread_create(&th[i], NULL, thread_body, &args[i]) != 0) fail("pthread_create failed");
  }
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  CHECK(MPI_Win_unlock_all(w->w));
  CHECK(MPI_Barrier(MPI_COMM_WORLD));
  local_read(w, thr_check, NULL);
  CHECK(MPI_Allgather(mine, (int)(THREADS * per), MPI_LONG, all, (int)(THREADS * per), MPI_LONG,
                      MPI_COMM_WORLD));
  size_t n = (size_t)nranks * THREADS * THR_ROUNDS;
  long *ours = xmalloc(sizeof(long) * n);
  for (int r = 0; r < nranks; r++)
    for (int i = 0; i < THREADS; i++)
      memcpy(ours + ((size_t)r * THREADS + (size_t)i) * THR_ROUNDS,
             all + (size_t)r * THREADS * per + (size_t)i * per + (size_t)rank * THR_ROUNDS,
             sizeof(long) * THR_ROUNDS);
  check_fetched("Fetch_and_op from threads", ours, n);
  CHECK(MPI_Barrier(MPI_COMM_WORLD));
  for (int i = 0; i < THREADS; i++) free(args[i].block);
  free(ours);
  free(all);
  free(mine);
  struct traffic d = traffic_since(&t0);
  unsigned long long want = (unsigned long long)THREADS * THR_ROUNDS * (unsigned long long)(nranks - 1);
  if (w->kind != ALLOCATE && atomics_of(&d) < want)
    fail("threads on the %s window: %llu libfabric atomic calls, expected at least %llu",
         kind_name[w->kind], atomics_of(&d), want);
  expect_bytes(w, "Put from threads", &d, OSC_TRACE_WRITE, want * THR_BLOCK);
}
