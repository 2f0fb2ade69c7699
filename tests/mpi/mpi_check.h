/* SPDX-License-Identifier: MIT */
/* weft — what the Open MPI test programs (p2p.c, osc*.c) share: failing the
 * whole job with one clear line, checked MPI calls, allocation, and the
 * proof that the traffic runs on weft's library. */
#ifndef WEFT_TESTS_MPI_CHECK_H
#define WEFT_TESTS_MPI_CHECK_H

#include <mpi.h>

#include <stddef.h>

extern int rank, nranks;
/* Names the program in failure lines ("p2p", "osc"). */
extern const char *program;

/* Ends the whole job with one line naming rank and cause. */
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* MPI_ERRORS_RETURN is set on the world communicator (and on every
 * window): an error comes back here and is reported with its text. */
#define CHECK(call)                                                        \
  do {                                                                     \
    int rc_ = (call);                                                      \
    if (rc_ != MPI_SUCCESS) {                                              \
      char msg_[MPI_MAX_ERROR_STRING];                                     \
      int len_ = 0;                                                        \
      if (MPI_Error_string(rc_, msg_, &len_) != MPI_SUCCESS) len_ = 0;     \
      msg_[len_] = '\0';                                                   \
      fail("%s:%d: %s returned %d (%s)", __FILE__, __LINE__, #call, rc_,  \
           msg_);                                                          \
    }                                                                      \
  } while (0)

void *xmalloc(size_t n);
double now(void);

/* The libfabric.so.1 this process mapped must be the one in WEFT_LIB_DIR,
 * and the Open MPI component `component` (a file name fragment such as
 * "mca_mtl_ofi") must be loaded: Open MPI loads libfabric when it opens
 * that component, so finding both mapped proves the component ran on weft.
 * `script` names the runner, for the message when WEFT_LIB_DIR is unset. */
void check_library(const char *component, const char *script);

#endif
