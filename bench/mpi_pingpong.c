/* SPDX-License-Identifier: MIT */
/* An 8-byte MPI ping-pong between ranks 0 and 1, for bench/mpi.py.
 *
 * Usage: mpi_pingpong [iterations] [bytes]
 * Rank 0 sends, rank 1 echoes; after 1000 warm-up round trips, rank 0 times
 * the given number of round trips with MPI_Wtime and prints one line:
 *   mpi_pingpong bytes=<n> iters=<n> usec=<one-way latency>
 * Every received message is checked (its bytes carry the iteration), so a
 * path that loses or mixes up data ends the run with a non-zero status
 * instead of a number. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fill(unsigned char *buf, int bytes, int iter)
{
	for (int i = 0; i < bytes; i++)
		buf[i] = (unsigned char)(iter + i);
}

static int check(const unsigned char *buf, int bytes, int iter)
{
	for (int i = 0; i < bytes; i++)
		if (buf[i] != (unsigned char)(iter + i))
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	long iters = argc > 1 ? atol(argv[1]) : 100000;
	int bytes = argc > 2 ? atoi(argv[2]) : 8;
	if (size != 2 || iters <= 0 || bytes <= 0) {
		if (rank == 0)
			fprintf(stderr, "mpi_pingpong: 2 ranks, iterations > 0, bytes > 0\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	unsigned char *out = malloc((size_t)bytes), *in = malloc((size_t)bytes);
	if (!out || !in)
		MPI_Abort(MPI_COMM_WORLD, 2);
	const long warmup = 1000;
	double start = 0;
	int ok = 1;
	for (long i = 0; i < warmup + iters && ok; i++) {
		if (i == warmup) {
			MPI_Barrier(MPI_COMM_WORLD);
			start = MPI_Wtime();
		}
		int tag = (int)(i & 0x7fff);
		if (rank == 0) {
			fill(out, bytes, (int)i);
			MPI_Send(out, bytes, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
			MPI_Recv(in, bytes, MPI_BYTE, 1, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			ok = check(in, bytes, (int)i + 1);
		} else {
			MPI_Recv(in, bytes, MPI_BYTE, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			ok = check(in, bytes, (int)i);
			fill(out, bytes, (int)i + 1);
			MPI_Send(out, bytes, MPI_BYTE, 0, tag, MPI_COMM_WORLD);
		}
	}
	double usec = (MPI_Wtime() - start) * 1e6 / (2.0 * (double)iters);
	if (!ok) {
		fprintf(stderr, "mpi_pingpong: rank %d received wrong bytes\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	if (rank == 0)
		printf("mpi_pingpong bytes=%d iters=%ld usec=%.3f\n", bytes, iters, usec);
	free(out);
	free(in);
	MPI_Finalize();
	return 0;
}
