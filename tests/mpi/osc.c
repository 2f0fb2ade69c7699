/* SPDX-License-Identifier: MIT */
/* weft — Open MPI's one-sided path (osc rdma over btl ofi) on weft's shm or
 * tcp provider. Windows made by MPI_Win_allocate, MPI_Win_create and
 * MPI_Win_create_dynamic. osc_rma.c: MPI_Put / MPI_Get (8 B to 1 MiB,
 * every rank into every other rank's window) under MPI_Win_fence,
 * MPI_Win_lock/unlock and MPI_Win_lock_all with flushes, MPI_Rput /
 * MPI_Rget, thousands in flight, strided datatypes. osc_atomic.c:
 * MPI_Accumulate with MPI_SUM, MPI_MAX and MPI_REPLACE on MPI_INT,
 * MPI_LONG and MPI_DOUBLE from every rank into every rank;
 * MPI_Fetch_and_op (counters every rank increments many times, MPI_NO_OP
 * reads); MPI_Get_accumulate; and, run with the argument "multiple",
 * MPI_THREAD_MULTIPLE with two threads per rank. Every result is checked
 * exactly.
 *
 * Run by run_osc.sh with WEFT_LIB_DIR set and osc_trace.so preloaded. Every
 * rank proves that the libfabric.so.1 it maps is weft's, that btl ofi is
 * loaded and opened fabrics of the FI_PROVIDER provider only; and each
 * test on a MPI_Win_create or dynamic window checks, from the calls
 * osc_trace.so counted on the libfabric endpoints, that its traffic went
 * through them (MPI_Put became fi_write, and so on). On one node osc rdma
 * maps a MPI_Win_allocate window through a shared-memory segment of its
 * own and uses CPU atomics for it (Open MPI 4.1, osc_rdma_component.c,
 * allocate_state_shared), so those windows move no byte through the btl:
 * they are tested for correctness only, and their counts are printed.
 *
 * Not here: MPI_Compare_and_swap. Open MPI 4.1.4 crashes on it for
 * MPI_LONG (a segmentation fault in mca_btl_ofi_acswap, called by
 * ompi_osc_rdma_compare_and_swap, on MPI_Win_allocate windows too, before
 * any libfabric call). */
#define _GNU_SOURCE
#include "osc.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *program = "osc";

/* The byte at offset i of what rank src puts into rank dst's window. */
unsigned char pattern(int src, int dst, int size, int iter, size_t i) {
  uint32_t h = (uint32_t)i * 2654435761u ^ (uint32_t)(src + 1) * 40503u ^
               (uint32_t)(dst + 1) * 97u ^ (uint32_t)size * 2246822519u ^
               (uint32_t)(iter + 1) * 3266489917u;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return (unsigned char)h;
}

void fill(unsigned char *buf, int src, int dst, int size, int iter) {
  for (int i = 0; i < size; i++) buf[i] = pattern(src, dst, size, iter, (size_t)i);
}

void verify(const char *what, const unsigned char *buf, int src, int dst, int size,
                   int iter) {
  for (int i = 0; i < size; i++)
    if (buf[i] != pattern(src, dst, size, iter, (size_t)i))
      fail("%s: data of rank %d for rank %d, %d bytes, iteration %d: byte %d is 0x%02x, "
           "expected 0x%02x",
           what, src, dst, size, iter, i, buf[i], pattern(src, dst, size, iter, (size_t)i));
}

/* ---- proof that weft's library carries the traffic ---- */


static weft_osc_trace_counts_fn *trace_counts;

static void find_trace(void) {
  trace_counts = (weft_osc_trace_counts_fn *)dlsym(RTLD_DEFAULT, "weft_osc_trace_counts");
  if (!trace_counts) fail("osc_trace.so is not preloaded (run through run_osc.sh)");
  unsigned long long c[OSC_TRACE_NCOUNT];
  trace_counts(c);
  if (c[OSC_TRACE_FABRICS] == 0 || c[OSC_TRACE_ENDPOINTS] == 0)
    fail("Open MPI opened no libfabric fabric/endpoint (%llu/%llu): btl ofi is not running",
         c[OSC_TRACE_FABRICS], c[OSC_TRACE_ENDPOINTS]);
  /* Every fabric opened must be of the provider FI_PROVIDER names. */
  weft_osc_trace_providers_fn *providers =
      (weft_osc_trace_providers_fn *)dlsym(RTLD_DEFAULT, "weft_osc_trace_providers");
  const char *want = getenv("FI_PROVIDER");
  if (!providers || !want) fail("no weft_osc_trace_providers or no FI_PROVIDER");
  if (strcmp(providers(), want) != 0)
    fail("Open MPI opened fabrics of provider(s) \"%s\", expected \"%s\"", providers(), want);
  if (rank == 0) printf("osc: btl ofi opened %llu fabric(s) of weft's %s provider\n",
                        c[OSC_TRACE_FABRICS], want);
}

struct traffic traffic_now(void) {
  struct traffic t;
  trace_counts(t.c);
  return t;
}

struct traffic traffic_since(const struct traffic *before) {
  struct traffic t = traffic_now();
  for (int i = 0; i < OSC_TRACE_NCOUNT; i++) t.c[i] -= before->c[i];
  return t;
}

unsigned long long atomics_of(const struct traffic *t) {
  return t->c[OSC_TRACE_ATOMIC] + t->c[OSC_TRACE_FETCH] + t->c[OSC_TRACE_COMPARE];
}

/* ---- windows ---- */

const char *const kind_name[] = {"allocate", "create", "dynamic"};

void win_open(struct win *w, enum kind kind, size_t size) {
  memset(w, 0, sizeof *w);
  w->kind = kind;
  w->size = size;
  MPI_Info info = MPI_INFO_NULL;
  switch (kind) {
    case ALLOCATE:
      CHECK(MPI_Win_allocate((MPI_Aint)size, 1, info, MPI_COMM_WORLD, &w->base, &w->w));
      break;
    case CREATE:
      w->owned = w->base = xmalloc(size);
      CHECK(MPI_Win_create(w->base, (MPI_Aint)size, 1, info, MPI_COMM_WORLD, &w->w));
      break;
    case DYNAMIC: {
      w->owned = w->base = xmalloc(size);
      CHECK(MPI_Win_create_dynamic(info, MPI_COMM_WORLD, &w->w));
      CHECK(MPI_Win_attach(w->w, w->base, (MPI_Aint)size));
      w->addr = xmalloc(sizeof(MPI_Aint) * (size_t)nranks);
      CHECK(MPI_Get_address(w->base, &w->addr[rank]));
      CHECK(MPI_Allgather(MPI_IN_PLACE, 1, MPI_AINT, w->addr, 1, MPI_AINT, MPI_COMM_WORLD));
      break;
    }
  }
  CHECK(MPI_Win_set_errhandler(w->w, MPI_ERRORS_RETURN));
  int flag = 0, *model = NULL;
  CHECK(MPI_Win_get_attr(w->w, MPI_WIN_MODEL, &model, &flag));
  if (!flag || *model != MPI_WIN_UNIFIED) fail("%s window: not MPI_WIN_UNIFIED", kind_name[kind]);
}

void win_close(struct win *w) {
  if (w->kind == DYNAMIC) CHECK(MPI_Win_detach(w->w, w->base));
  CHECK(MPI_Win_free(&w->w));
  free(w->owned);
  free(w->addr);
}

/* The target displacement of byte off of rank t's window. */
MPI_Aint disp(const struct win *w, int t, size_t off) {
  return w->kind == DYNAMIC ? MPI_Aint_add(w->addr[t], (MPI_Aint)off) : (MPI_Aint)off;
}

/* Local stores to the window: inside an exclusive lock of our own window
 * (unified model), then a barrier, so no one accesses it before. */
void local_write(struct win *w, void (*write)(struct win *, void *), void *arg) {
  CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, w->w));
  write(w, arg);
  CHECK(MPI_Win_unlock(rank, w->w));
  CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

/* Local loads after every origin has completed its epoch (the caller's
 * barrier): a shared lock of our own window synchronises memory. */
void local_read(struct win *w, void (*read)(struct win *, void *), void *arg) {
  CHECK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, w->w));
  read(w, arg);
  CHECK(MPI_Win_unlock(rank, w->w));
}

unsigned char **sbuf, **rbuf; /* one per peer */

void expect_bytes(const struct win *w, const char *what, const struct traffic *t,
                         int which, unsigned long long want) {
  if (w->kind == ALLOCATE) return;
  if (t->c[which + 1] < want)
    fail("%s on the %s window: %llu bytes went through libfabric %s calls (%llu calls), "
         "expected at least %llu: the traffic did not go through btl ofi",
         what, kind_name[w->kind], t->c[which + 1], which == OSC_TRACE_WRITE ? "write" : "read",
         t->c[which], want);
}

static int cmp_long(const void *a, const void *b) {
  long x = *(const long *)a, y = *(const long *)b;
  return (x > y) - (x < y);
}

/* values[n] fetched by every rank from one counter that started at 0 and
 * that every fetch incremented by 1: exactly 0 .. n - 1, each once. */
void check_fetched(const char *what, long *values, size_t n) {
  qsort(values, n, sizeof(long), cmp_long);
  for (size_t i = 0; i < n; i++)
    if (values[i] != (long)i)
      fail("%s: the fetched values are not 0..%zu each once: sorted, #%zu is %ld", what, n - 1,
           i, values[i]);
}

/* ---- driver ---- */

static void report(const char *win_name, const char *name, double secs, const struct traffic *t) {
  unsigned long long sum[OSC_TRACE_NCOUNT];
  CHECK(MPI_Reduce(t->c, sum, OSC_TRACE_NCOUNT, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0,
                   MPI_COMM_WORLD));
  if (rank != 0) return;
  printf("osc: ok: %-20s %-28s %7.3f s  fi_write %6llu (%8.2f MiB) fi_read %6llu (%8.2f MiB) "
         "atomic %5llu fetch %6llu compare %5llu\n",
         win_name, name, secs, sum[OSC_TRACE_WRITE], sum[OSC_TRACE_WRITE_BYTES] / 1048576.0,
         sum[OSC_TRACE_READ], sum[OSC_TRACE_READ_BYTES] / 1048576.0, sum[OSC_TRACE_ATOMIC],
         sum[OSC_TRACE_FETCH], sum[OSC_TRACE_COMPARE]);
  fflush(stdout);
}

struct test {
  const char *name;
  void (*run)(struct win *);
};

static const struct test thread_tests[] = {
    {"2 threads: Fetch_and_op + Put", test_threads},
};

static const struct test tests[] = {
    {"Put/Get fence", test_fence},
    {"Put/Get lock/unlock", test_lock},
    {"Rput/Rget lock_all+flush", test_lock_all},
    {"4096 Put/Get/FOP in flight", test_in_flight},
    {"strided Put/Get (vector)", test_strided},
    {"Accumulate fence", test_accumulate_fence},
    {"Accumulate lock_all", test_accumulate_lock_all},
    {"Fetch_and_op", test_fetch_and_op},
    {"Get_accumulate", test_get_accumulate},
};

int main(int argc, char **argv) {
  /* "multiple": MPI_THREAD_MULTIPLE and only the threaded test, several
   * threads of a rank on one libfabric endpoint. (Open MPI 4.1.4's btl ofi
   * asks for FI_THREAD_UNSPEC and gets weft's FI_THREAD_SAFE in every
   * run.) */
  int multiple = argc > 1 && strcmp(argv[1], "multiple") == 0, provided = -1;
  CHECK(MPI_Init_thread(&argc, &argv, multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE,
                        &provided));
  CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
  if (nranks < 2) fail("needs at least 2 ranks, has %d", nranks);
  if (multiple && provided != MPI_THREAD_MULTIPLE)
    fail("MPI_THREAD_MULTIPLE asked for, %d provided", provided);
  if (rank == 0 && multiple) printf("osc: MPI_THREAD_MULTIPLE\n");
  check_library("mca_btl_ofi", "run_osc.sh");
  find_trace();
  read_acc_use_amo();

  sbuf = xmalloc(sizeof(unsigned char *) * (size_t)nranks);
  rbuf = xmalloc(sizeof(unsigned char *) * (size_t)nranks);
  for (int p = 0; p < nranks; p++) {
    sbuf[p] = xmalloc(SLOT);
    rbuf[p] = xmalloc(SLOT);
  }

  struct traffic start = traffic_now();
  double begin = now();
  /* Under MPI_THREAD_MULTIPLE only the threaded test: the others ran in
   * the single-threaded runs. */
  const struct test *list = multiple ? thread_tests : tests;
  size_t ntests = multiple ? sizeof thread_tests / sizeof thread_tests[0]
                           : sizeof tests / sizeof tests[0];
  for (int kind = ALLOCATE; kind <= DYNAMIC; kind++) {
    struct win w;
    win_open(&w, (enum kind)kind, (size_t)nranks * SLOT);
    for (size_t t = 0; t < ntests; t++) {
      CHECK(MPI_Barrier(MPI_COMM_WORLD));
      struct traffic t0 = traffic_now();
      double s0 = now();
      list[t].run(&w);
      CHECK(MPI_Barrier(MPI_COMM_WORLD));
      double secs = now() - s0;
      struct traffic d = traffic_since(&t0);
      report(kind_name[kind], list[t].name, secs, &d);
    }
    win_close(&w);
  }
  struct traffic total = traffic_since(&start);
  report("all windows", "total", now() - begin, &total);

  for (int p = 0; p < nranks; p++) {
    free(sbuf[p]);
    free(rbuf[p]);
  }
  free(sbuf);
  free(rbuf);
  if (rank == 0) printf("osc: all passed on %d ranks\n", nranks);
  CHECK(MPI_Finalize());
  return 0;
}
