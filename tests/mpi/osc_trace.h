/* SPDX-License-Identifier: MIT */
/* weft — the counters osc_trace.c keeps and osc.c reads. */
#ifndef WEFT_TESTS_MPI_OSC_TRACE_H
#define WEFT_TESTS_MPI_OSC_TRACE_H

enum {
  OSC_TRACE_WRITE,       /* fi_write, fi_writev, fi_writemsg, fi_inject_write, ...data */
  OSC_TRACE_WRITE_BYTES,
  OSC_TRACE_READ,        /* fi_read, fi_readv, fi_readmsg */
  OSC_TRACE_READ_BYTES,
  OSC_TRACE_ATOMIC,      /* fi_atomic, fi_atomicv, fi_atomicmsg, fi_inject_atomic */
  OSC_TRACE_ATOMIC_ELEMS,
  OSC_TRACE_FETCH,       /* fi_fetch_atomic* */
  OSC_TRACE_FETCH_ELEMS,
  OSC_TRACE_COMPARE,     /* fi_compare_atomic* */
  OSC_TRACE_COMPARE_ELEMS,
  OSC_TRACE_FABRICS,     /* fabrics opened through fi_fabric */
  OSC_TRACE_ENDPOINTS,   /* endpoints (or transmit contexts) wrapped */
  OSC_TRACE_NCOUNT
};

/* Exported by osc_trace.so: a snapshot of every counter. */
typedef void weft_osc_trace_counts_fn(unsigned long long out[OSC_TRACE_NCOUNT]);
/* Exported by osc_trace.so: the providers of the fabrics opened
 * ("tcp", or "shm,tcp" if two were), each once. */
typedef const char *weft_osc_trace_providers_fn(void);

#endif
