/* SPDX-License-Identifier: MIT */
/* weft — what the parts of the one-sided Open MPI test (osc.c, osc_rma.c,
 * osc_atomic.c) share. */
#ifndef WEFT_TESTS_MPI_OSC_H
#define WEFT_TESTS_MPI_OSC_H

#include <mpi.h>

#include <stddef.h>

#include "mpi_check.h"
#include "osc_trace.h"

enum {
  SLOT = 1024 * 1024, /* one per source rank in every window */
  POISON = 0xa5,      /* what no pattern is at every byte */
};


/* The byte at offset i of what rank src sends rank dst. */
unsigned char pattern(int src, int dst, int size, int iter, size_t i);
void fill(unsigned char *buf, int src, int dst, int size, int iter);
void verify(const char *what, const unsigned char *buf, int src, int dst, int size, int iter);

/* values[n], fetched by everyone from one counter that started at 0 and
 * that each fetch incremented by 1, must be 0 .. n - 1 each once. */
void check_fetched(const char *what, long *values, size_t n);

/* ---- libfabric traffic, as osc_trace.so counted it ---- */

struct traffic {
  unsigned long long c[OSC_TRACE_NCOUNT];
};

struct traffic traffic_now(void);
struct traffic traffic_since(const struct traffic *before);
unsigned long long atomics_of(const struct traffic *t);

/* ---- windows ---- */

enum kind { ALLOCATE, CREATE, DYNAMIC };
extern const char *const kind_name[];

struct win {
  MPI_Win w;
  enum kind kind;
  unsigned char *base;   /* this rank's window memory */
  size_t size;
  MPI_Aint *addr;        /* dynamic: every rank's attached address */
  unsigned char *owned;  /* create, dynamic: memory this program allocated */
};

void win_open(struct win *w, enum kind kind, size_t size);
void win_close(struct win *w);
/* The target displacement of byte off of rank t's window. */
MPI_Aint disp(const struct win *w, int t, size_t off);
/* Local stores to our window, then a barrier; local loads after one. */
void local_write(struct win *w, void (*write)(struct win *, void *), void *arg);
void local_read(struct win *w, void (*read)(struct win *, void *), void *arg);

/* A test on a btl window must have moved at least `want` bytes by
 * libfabric writes (which == OSC_TRACE_WRITE) or reads (OSC_TRACE_READ). */
void expect_bytes(const struct win *w, const char *what, const struct traffic *t, int which,
                  unsigned long long want);

extern unsigned char **sbuf, **rbuf; /* SLOT bytes per peer */

/* ---- the tests ---- */

void test_fence(struct win *w);
void test_lock(struct win *w);
void test_lock_all(struct win *w);
void test_in_flight(struct win *w);
void test_strided(struct win *w);

void read_acc_use_amo(void);
void test_accumulate_fence(struct win *w);
void test_accumulate_lock_all(struct win *w);
void test_fetch_and_op(struct win *w);
void test_get_accumulate(struct win *w);
void test_threads(struct win *w);

#endif
