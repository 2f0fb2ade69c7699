/* SPDX-License-Identifier: MIT */
/* weft — Open MPI's point-to-point path over weft's tcp provider
 * (pml cm, mtl ofi). Blocking, nonblocking and synchronous sends, probes,
 * matched probes, cancelled receives and wildcard receives, on message sizes
 * from 0 B to 4 MiB, in ring and all-to-all patterns, and thousands of
 * messages in flight at once; every byte received is checked against a
 * pattern of (sender, size, iteration). Run by run_p2p.sh
 * with WEFT_LIB_DIR set: every rank proves from /proc/self/maps that the
 * libfabric.so.1 it runs on is weft's, so the test cannot pass on Debian's.
 *
 * Open MPI 4.1's OFI mtl does not send the acknowledgement of a synchronous
 * send whose message is taken by MPI_Mrecv (fixed in 5.0, open-mpi/ompi
 * pull request 11327), so Ssend and Mprobe/Mrecv are exercised on separate
 * messages: a limitation of Open MPI, not of weft. */
#define _GNU_SOURCE
#include "mpi_check.h"

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *program = "p2p";

static const int sizes[] = {0, 1, 8, 1024, 64 * 1024, 1024 * 1024, 4 * 1024 * 1024};
enum { NSIZES = sizeof(sizes) / sizeof(sizes[0]), ITERS = 3, MAX_SIZE = 4 * 1024 * 1024 };



/* The byte at offset i of the message from src of this size and iteration. */
static unsigned char pattern(int src, int size, int iter, size_t i) {
  uint32_t h = (uint32_t)i * 2654435761u ^ (uint32_t)(src + 1) * 40503u ^
               (uint32_t)size * 2246822519u ^ (uint32_t)(iter + 1) * 3266489917u;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return (unsigned char)h;
}

static void fill(unsigned char *buf, int src, int size, int iter) {
  for (int i = 0; i < size; i++) buf[i] = pattern(src, size, iter, (size_t)i);
}

static void verify(const char *what, const unsigned char *buf, int src, int size, int iter) {
  for (int i = 0; i < size; i++)
    if (buf[i] != pattern(src, size, iter, (size_t)i))
      fail("%s: message from rank %d, %d bytes, iteration %d: byte %d is 0x%02x, "
           "expected 0x%02x",
           what, src, size, iter, i, buf[i], pattern(src, size, iter, (size_t)i));
}

static void check_status(const char *what, const MPI_Status *st, int src, int tag, int size) {
  int count = -1;
  CHECK(MPI_Get_count(st, MPI_BYTE, &count));
  if (st->MPI_SOURCE != src || st->MPI_TAG != tag || count != size)
    fail("%s: status says source %d, tag %d, %d bytes; expected source %d, tag %d, %d bytes",
         what, st->MPI_SOURCE, st->MPI_TAG, count, src, tag, size);
}


/* A buffer filled with a value no pattern check would accept by accident
 * at every byte, so a receive that writes nothing is noticed. */
static void poison(unsigned char *buf, size_t n) { memset(buf, 0xa5, n); }



/* Tags: one per (test, size index, iteration), below the 32767 every MPI
 * implementation guarantees. */
static int tag_of(int test, int s, int iter) { return test * 1000 + s * ITERS + iter; }

static unsigned char *sbuf, *rbuf;
static unsigned char **abuf; /* one receive buffer per peer (all-to-all) */

/* Blocking MPI_Send/MPI_Recv around the ring, even ranks sending first. */
static void test_ring_blocking(void) {
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  for (int s = 0; s < NSIZES; s++)
    for (int it = 0; it < ITERS; it++) {
      int size = sizes[s], tag = tag_of(1, s, it);
      MPI_Status st;
      fill(sbuf, rank, size, it);
      poison(rbuf, (size_t)size + 1);
      if (rank % 2 == 0) {
        CHECK(MPI_Send(sbuf, size, MPI_BYTE, next, tag, MPI_COMM_WORLD));
        CHECK(MPI_Recv(rbuf, size, MPI_BYTE, prev, tag, MPI_COMM_WORLD, &st));
      } else {
        CHECK(MPI_Recv(rbuf, size, MPI_BYTE, prev, tag, MPI_COMM_WORLD, &st));
        CHECK(MPI_Send(sbuf, size, MPI_BYTE, next, tag, MPI_COMM_WORLD));
      }
      check_status("ring Send/Recv", &st, prev, tag, size);
      verify("ring Send/Recv", rbuf, prev, size, it);
      if (rbuf[size] != 0xa5) fail("ring Send/Recv: %d-byte receive wrote past its end", size);
    }
}

/* Isend/Irecv all-to-all; with recv_first == 0 every message is sent before
 * its receive is posted (a barrier in between), so all arrive unexpected. */
static void test_alltoall(int recv_first) {
  int npeer = nranks - 1;
  MPI_Request *req = xmalloc(sizeof(MPI_Request) * 2 * (size_t)npeer);
  MPI_Status *st = xmalloc(sizeof(MPI_Status) * 2 * (size_t)npeer);
  const char *what = recv_first ? "all-to-all Irecv/Isend" : "all-to-all unexpected Isend/Irecv";
  for (int s = 0; s < NSIZES; s++)
    for (int it = 0; it < ITERS; it++) {
      int size = sizes[s], tag = tag_of(recv_first ? 2 : 3, s, it), n = 0;
      fill(sbuf, rank, size, it);
      for (int p = 0; p < nranks; p++)
        if (p != rank) poison(abuf[p], (size_t)size);
      if (recv_first) {
        for (int p = 0; p < nranks; p++)
          if (p != rank) CHECK(MPI_Irecv(abuf[p], size, MPI_BYTE, p, tag, MPI_COMM_WORLD, &req[n++]));
        for (int p = 0; p < nranks; p++)
          if (p != rank) CHECK(MPI_Isend(sbuf, size, MPI_BYTE, p, tag, MPI_COMM_WORLD, &req[n++]));
      } else {
        for (int p = 0; p < nranks; p++)
          if (p != rank) CHECK(MPI_Isend(sbuf, size, MPI_BYTE, p, tag, MPI_COMM_WORLD, &req[n++]));
        CHECK(MPI_Barrier(MPI_COMM_WORLD));
        for (int p = 0; p < nranks; p++)
          if (p != rank) CHECK(MPI_Irecv(abuf[p], size, MPI_BYTE, p, tag, MPI_COMM_WORLD, &req[n++]));
      }
      CHECK(MPI_Waitall(n, req, st));
      /* The receive requests are the first or the last npeer. */
      int r0 = recv_first ? 0 : npeer;
      for (int p = 0, k = r0; p < nranks; p++) {
        if (p == rank) continue;
        check_status(what, &st[k++], p, tag, size);
        verify(what, abuf[p], p, size, it);
      }
    }
  free(req);
  free(st);
}

static void test_alltoall_posted(void) { test_alltoall(1); }
static void test_alltoall_unexpected(void) { test_alltoall(0); }

/* MPI_Ssend around the ring (receiver posts MPI_Irecv first), then proof of
 * its synchronous semantics: an MPI_Issend must stay incomplete while the
 * receiver has not posted the receive, and complete once it has. */
static void test_ssend(void) {
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  for (int s = 0; s < NSIZES; s++)
    for (int it = 0; it < ITERS; it++) {
      int size = sizes[s], tag = tag_of(4, s, it);
      MPI_Request rq;
      MPI_Status st;
      fill(sbuf, rank, size, it);
      poison(rbuf, (size_t)size);
      CHECK(MPI_Irecv(rbuf, size, MPI_BYTE, prev, tag, MPI_COMM_WORLD, &rq));
      CHECK(MPI_Ssend(sbuf, size, MPI_BYTE, next, tag, MPI_COMM_WORLD));
      CHECK(MPI_Wait(&rq, &st));
      check_status("ring Ssend", &st, prev, tag, size);
      verify("ring Ssend", rbuf, prev, size, it);
    }

  /* Pairs (even sender, odd receiver); an odd last rank sits out. */
  int peer = rank % 2 == 0 ? rank + 1 : rank - 1;
  if (peer >= nranks) return;
  for (int s = 0; s < NSIZES; s++) {
    int size = sizes[s], tag = tag_of(5, s, 0), go = tag_of(5, s, 1);
    MPI_Status st;
    if (rank % 2 == 0) {
      MPI_Request rq;
      int done = 0;
      fill(sbuf, rank, size, 0);
      CHECK(MPI_Issend(sbuf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &rq));
      /* Give the message every chance to arrive at the peer and be
       * (wrongly) acknowledged before it is matched. */
      for (int i = 0; i < 50 && !done; i++) {
        CHECK(MPI_Test(&rq, &done, &st));
        usleep(1000);
      }
      if (done) fail("Issend of %d bytes completed before the receiver posted its receive", size);
      CHECK(MPI_Send(NULL, 0, MPI_BYTE, peer, go, MPI_COMM_WORLD));
      CHECK(MPI_Wait(&rq, &st));
    } else {
      CHECK(MPI_Recv(NULL, 0, MPI_BYTE, peer, go, MPI_COMM_WORLD, &st));
      poison(rbuf, (size_t)size);
      CHECK(MPI_Recv(rbuf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st));
      check_status("Issend pair", &st, peer, tag, size);
      verify("Issend pair", rbuf, peer, size, 0);
    }
  }
}

/* MPI_Probe and MPI_Iprobe (wildcard and exact) before MPI_Recv. */
static void test_probe(void) {
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  for (int s = 0; s < NSIZES; s++)
    for (int it = 0; it < ITERS; it++) {
      int size = sizes[s], tag = tag_of(6, s, it), flag = 0;
      MPI_Request rq;
      MPI_Status st;
      fill(sbuf, rank, size, it);
      poison(rbuf, (size_t)size);
      /* Nothing was sent with this tag: Iprobe must say so. */
      CHECK(MPI_Iprobe(prev, tag + 500, MPI_COMM_WORLD, &flag, &st));
      if (flag) fail("Iprobe found a message with tag %d, which nobody sent", tag + 500);
      CHECK(MPI_Isend(sbuf, size, MPI_BYTE, next, tag, MPI_COMM_WORLD, &rq));
      if (it % 2 == 0) {
        CHECK(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
      } else {
        do CHECK(MPI_Iprobe(prev, tag, MPI_COMM_WORLD, &flag, &st));
        while (!flag);
      }
      check_status("Probe", &st, prev, tag, size);
      /* A probe leaves the message queued: a second one sees it again. */
      CHECK(MPI_Iprobe(prev, tag, MPI_COMM_WORLD, &flag, &st));
      if (!flag) fail("a probed %d-byte message vanished before its receive", size);
      check_status("second probe", &st, prev, tag, size);
      CHECK(MPI_Recv(rbuf, size, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st));
      check_status("Recv after Probe", &st, prev, tag, size);
      verify("Recv after Probe", rbuf, prev, size, it);
      CHECK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    }
}

/* MPI_Mprobe / MPI_Improbe with wildcards and MPI_Mrecv / MPI_Imrecv: every
 * other rank sends each rank one message of every size; the receiver takes
 * them in whatever order they come. Plain Isend only (see the top). */
static void test_mprobe(void) {
  int npeer = nranks - 1, total = npeer * NSIZES;
  MPI_Request *req = xmalloc(sizeof(MPI_Request) * (size_t)total);
  unsigned char *seen = xmalloc((size_t)nranks * NSIZES);
  memset(seen, 0, (size_t)nranks * NSIZES);
  /* One send buffer per size, shared by every destination: the pattern
   * depends on the sender, not the receiver. */
  unsigned char **src = xmalloc(sizeof(unsigned char *) * NSIZES);
  int n = 0;
  for (int s = 0; s < NSIZES; s++) {
    src[s] = xmalloc((size_t)sizes[s]);
    fill(src[s], rank, sizes[s], 7);
    for (int p = 0; p < nranks; p++)
      if (p != rank) CHECK(MPI_Isend(src[s], sizes[s], MPI_BYTE, p, tag_of(7, s, 0), MPI_COMM_WORLD, &req[n++]));
  }
  for (int k = 0; k < total; k++) {
    MPI_Message msg;
    MPI_Status st;
    int count = -1;
    if (k % 2 == 0) {
      CHECK(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &st));
    } else {
      int flag = 0;
      do CHECK(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &msg, &st));
      while (!flag);
    }
    CHECK(MPI_Get_count(&st, MPI_BYTE, &count));
    int s = (st.MPI_TAG - tag_of(7, 0, 0)) / ITERS, from = st.MPI_SOURCE;
    if (from < 0 || from >= nranks || from == rank || s < 0 || s >= NSIZES ||
        st.MPI_TAG != tag_of(7, s, 0) || count != sizes[s])
      fail("Mprobe: unexpected message: source %d, tag %d, %d bytes", from, st.MPI_TAG, count);
    if (seen[from * NSIZES + s]++) fail("Mprobe: message (source %d, tag %d) matched twice", from, st.MPI_TAG);
    poison(rbuf, (size_t)count);
    if (k % 3 == 2) {
      MPI_Request rq;
      CHECK(MPI_Imrecv(rbuf, count, MPI_BYTE, &msg, &rq));
      CHECK(MPI_Wait(&rq, &st));
    } else {
      CHECK(MPI_Mrecv(rbuf, count, MPI_BYTE, &msg, &st));
    }
    if (msg != MPI_MESSAGE_NULL) fail("Mrecv left the message handle set");
    check_status("Mrecv", &st, from, tag_of(7, s, 0), sizes[s]);
    verify("Mrecv", rbuf, from, sizes[s], 7);
  }
  CHECK(MPI_Waitall(n, req, MPI_STATUSES_IGNORE));
  /* A matched probe that finds nothing says so. */
  int flag = 1;
  MPI_Message msg;
  CHECK(MPI_Improbe(MPI_ANY_SOURCE, tag_of(7, NSIZES, 0), MPI_COMM_WORLD, &flag, &msg, MPI_STATUS_IGNORE));
  if (flag) fail("Improbe found a message nobody sent");
  for (int s = 0; s < NSIZES; s++) free(src[s]);
  free(src);
  free(seen);
  free(req);
}

/* A receive that nothing matches is cancelled; the message sent afterwards
 * with the same source and tag goes to the next receive, not the cancelled
 * one. */
static void test_cancel(void) {
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  for (int s = 0; s < NSIZES; s++) {
    int size = sizes[s], tag = tag_of(8, s, 0), cancelled = 0;
    MPI_Request rq;
    MPI_Status st;
    poison(abuf[prev], (size_t)size);
    CHECK(MPI_Irecv(abuf[prev], size, MPI_BYTE, prev, tag, MPI_COMM_WORLD, &rq));
    CHECK(MPI_Cancel(&rq));
    CHECK(MPI_Wait(&rq, &st));
    CHECK(MPI_Test_cancelled(&st, &cancelled));
    if (!cancelled) fail("cancel of an unmatched %d-byte receive did not cancel it", size);
    if (rq != MPI_REQUEST_NULL) fail("Wait on a cancelled receive left the request set");
    /* Only now may the message be sent. */
    CHECK(MPI_Barrier(MPI_COMM_WORLD));
    fill(sbuf, rank, size, 8);
    poison(rbuf, (size_t)size);
    CHECK(MPI_Irecv(rbuf, size, MPI_BYTE, prev, tag, MPI_COMM_WORLD, &rq));
    CHECK(MPI_Send(sbuf, size, MPI_BYTE, next, tag, MPI_COMM_WORLD));
    CHECK(MPI_Wait(&rq, &st));
    CHECK(MPI_Test_cancelled(&st, &cancelled));
    if (cancelled) fail("a completed %d-byte receive reports itself cancelled", size);
    check_status("Recv after cancel", &st, prev, tag, size);
    verify("Recv after cancel", rbuf, prev, size, 8);
    for (int i = 0; i < size; i++)
      if (abuf[prev][i] != 0xa5) fail("the cancelled receive's buffer was written (byte %d)", i);
  }
}

/* Wildcard receives: each rank in turn receives one message of every size
 * from every other rank with MPI_ANY_SOURCE and/or MPI_ANY_TAG. A receive
 * that accepts any tag from a sender must get that sender's oldest message
 * still queued (non-overtaking). */
static void test_wildcards(void) {
  for (int root = 0; root < nranks; root++) {
    if (rank != root) {
      for (int s = 0; s < NSIZES; s++) {
        fill(sbuf, rank, sizes[s], root);
        CHECK(MPI_Send(sbuf, sizes[s], MPI_BYTE, root, tag_of(9, s, 0), MPI_COMM_WORLD));
      }
      continue;
    }
    unsigned char *got = xmalloc((size_t)nranks * NSIZES);
    memset(got, 0, (size_t)nranks * NSIZES);
    for (int k = 0; k < (nranks - 1) * NSIZES; k++) {
      MPI_Status st;
      int count = -1, mode = k % 3, from = MPI_ANY_SOURCE, tag = MPI_ANY_TAG;
      /* The oldest message not yet received from rank q. */
      int q = (root + 1 + k % (nranks - 1)) % nranks, oldest = 0;
      while (oldest < NSIZES && got[q * NSIZES + oldest]) oldest++;
      if (oldest < NSIZES) {
        if (mode == 1) from = q;                      /* any tag from q */
        if (mode == 2) tag = tag_of(9, oldest, 0);    /* that tag from anyone */
      }
      poison(rbuf, MAX_SIZE);
      CHECK(MPI_Recv(rbuf, MAX_SIZE, MPI_BYTE, from, tag, MPI_COMM_WORLD, &st));
      CHECK(MPI_Get_count(&st, MPI_BYTE, &count));
      int src = st.MPI_SOURCE;
      if (src < 0 || src >= nranks || src == rank || (from != MPI_ANY_SOURCE && src != from))
        fail("wildcard Recv (source %d, tag %d): message from rank %d", from, tag, src);
      int s = (st.MPI_TAG - tag_of(9, 0, 0)) / ITERS;
      if (s < 0 || s >= NSIZES || st.MPI_TAG != tag_of(9, s, 0) || count != sizes[s] ||
          (tag != MPI_ANY_TAG && st.MPI_TAG != tag))
        fail("wildcard Recv (source %d, tag %d): got tag %d, %d bytes from rank %d", from, tag,
             st.MPI_TAG, count, src);
      if (got[src * NSIZES + s]++) fail("wildcard Recv: tag %d from rank %d received twice", st.MPI_TAG, src);
      if (tag == MPI_ANY_TAG)
        for (int e = 0; e < s; e++)
          if (!got[src * NSIZES + e])
            fail("wildcard Recv (source %d, any tag): got tag %d from rank %d before its "
                 "older tag %d (messages from one sender overtook each other)",
                 from, st.MPI_TAG, src, tag_of(9, e, 0));
      verify("wildcard Recv", rbuf, src, count, root);
    }
    free(got);
  }
}

/* Many messages in flight: every rank sends every other rank more messages
 * than a transmit or receive queue holds (weft's hold 1024), before any
 * receive is posted, mixing sizes around the inject limit with some large
 * ones; then receives them with MPI_ANY_TAG, which must return each
 * sender's messages in the order they were sent. */
enum { FLOOD = 2000, FLOOD_TAG = 10000 };
static int flood_size(int k) {
  static const int small[] = {0, 8, 100, 200, 1024};
  return k % 50 == 49 ? 64 * 1024 : small[k % 5];
}
static void test_flood(void) {
  size_t total = 0;
  for (int k = 0; k < FLOOD; k++) total += (size_t)flood_size(k);
  unsigned char *arena = xmalloc(total);
  size_t *off = xmalloc(sizeof(size_t) * FLOOD);
  for (int k = 0, o = 0; k < FLOOD; o += flood_size(k), k++) {
    off[k] = (size_t)o;
    fill(arena + o, rank, flood_size(k), k);
  }
  MPI_Request *req = xmalloc(sizeof(MPI_Request) * FLOOD * (size_t)nranks);
  int n = 0;
  for (int k = 0; k < FLOOD; k++)
    for (int d = 1; d < nranks; d++) {
      int p = (rank + d) % nranks;
      CHECK(MPI_Isend(arena + off[k], flood_size(k), MPI_BYTE, p, FLOOD_TAG + k, MPI_COMM_WORLD, &req[n++]));
    }
  CHECK(MPI_Barrier(MPI_COMM_WORLD));
  for (int d = 1; d < nranks; d++) {
    int src = (rank + nranks - d) % nranks;
    for (int k = 0; k < FLOOD; k++) {
      MPI_Status st;
      int size = flood_size(k);
      poison(rbuf, (size_t)size);
      CHECK(MPI_Recv(rbuf, MAX_SIZE, MPI_BYTE, src, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
      check_status("flood Recv (any tag; sent in tag order)", &st, src, FLOOD_TAG + k, size);
      verify("flood Recv", rbuf, src, size, k);
    }
  }
  CHECK(MPI_Waitall(n, req, MPI_STATUSES_IGNORE));
  free(req);
  free(off);
  free(arena);
}

int main(int argc, char **argv) {
  CHECK(MPI_Init(&argc, &argv));
  CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
  if (nranks < 2) fail("needs at least 2 ranks, has %d", nranks);
  check_library("mca_mtl_ofi", "run_p2p.sh");

  sbuf = xmalloc(MAX_SIZE + 1);
  rbuf = xmalloc(MAX_SIZE + 1);
  abuf = xmalloc(sizeof(unsigned char *) * (size_t)nranks);
  for (int p = 0; p < nranks; p++) abuf[p] = p == rank ? NULL : xmalloc(MAX_SIZE);

  static const struct {
    const char *name;
    void (*run)(void);
  } tests[] = {
      {"Send/Recv ring", test_ring_blocking},
      {"Isend/Irecv all-to-all", test_alltoall_posted},
      {"unexpected Isend/Irecv all-to-all", test_alltoall_unexpected},
      {"Ssend/Issend", test_ssend},
      {"Probe/Iprobe", test_probe},
      {"Mprobe/Improbe/Mrecv/Imrecv", test_mprobe},
      {"Cancel of a receive", test_cancel},
      {"any-source/any-tag Recv", test_wildcards},
      {"2000 messages in flight per pair", test_flood},
  };
  for (size_t t = 0; t < sizeof tests / sizeof tests[0]; t++) {
    CHECK(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = now();
    tests[t].run();
    CHECK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
      printf("p2p: ok: %-36s %8.3f s\n", tests[t].name, now() - t0);
      fflush(stdout);
    }
  }

  for (int p = 0; p < nranks; p++) free(abuf[p]);
  free(abuf);
  free(sbuf);
  free(rbuf);
  if (rank == 0) printf("p2p: all passed on %d ranks\n", nranks);
  CHECK(MPI_Finalize());
  return 0;
}
