// SPDX-License-Identifier: MIT
/*
 * mpi_check: two ranks move checked data through an MPI library, for test_mpi.sh. Built by
 * the test with each MPI's own compiler wrapper (mpicc.openmpi, mpicc.mpich).
 *  - ping-pong: rank 0 sends each size, rank 1 checks every byte and sends back its own
 *    pattern, which rank 0 checks; the one-way latency of the smallest size is printed;
 *  - RMA: each rank exposes a window; rank 0 MPI_Puts a pattern into rank 1's and
 *    MPI_Gets rank 1's own pattern back, with fences, and both sides check the bytes.
 * Prints one line per check and exits non-zero on the first wrong byte.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PINGPONG_ROUNDS	200
#define WINDOW_BYTES	(1 << 20)

static int rank;

static void fill(uint8_t *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(i * 31 + seed * 7 + (i >> 8));
}

/* Dies, through MPI_Abort, at the first byte of BUF that is not the pattern SEED. */
static void check(const uint8_t *buf, size_t len, unsigned seed, const char *what)
{
	for (size_t i = 0; i < len; i++) {
		uint8_t want = (uint8_t)(i * 31 + seed * 7 + (i >> 8));

		if (buf[i] != want) {
			fprintf(stderr, "rank %d: %s: byte %zu of %zu is 0x%02x, want 0x%02x\n",
				rank, what, i, len, buf[i], want);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
}

/* ROUNDS round trips of LEN bytes, every message checked; the one-way time in us. */
static double pingpong(uint8_t *buf, int len, int rounds)
{
	double start = MPI_Wtime();

	for (int r = 0; r < rounds; r++) {
		unsigned there = (unsigned)r * 2, back = there + 1;

		if (rank == 0) {
			fill(buf, (size_t)len, there);
			MPI_Send(buf, len, MPI_BYTE, 1, r, MPI_COMM_WORLD);
			MPI_Recv(buf, len, MPI_BYTE, 1, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			check(buf, (size_t)len, back, "ping-pong reply");
		} else {
			MPI_Recv(buf, len, MPI_BYTE, 0, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			check(buf, (size_t)len, there, "ping-pong message");
			fill(buf, (size_t)len, back);
			MPI_Send(buf, len, MPI_BYTE, 0, r, MPI_COMM_WORLD);
		}
	}
	return (MPI_Wtime() - start) * 1e6 / (2.0 * rounds);
}

static void run_pingpong(void)
{
	static const int sizes[] = { 8, 4096, 65536, WINDOW_BYTES };
	uint8_t *buf = malloc(WINDOW_BYTES);

	if (!buf)
		MPI_Abort(MPI_COMM_WORLD, 1);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		int rounds = sizes[i] >= WINDOW_BYTES ? 20 : PINGPONG_ROUNDS;
		double us = pingpong(buf, sizes[i], rounds);

		if (rank == 0)
			printf("ping-pong %d bytes: %d round trips checked, %.1f us one way, %.1f MB/s\n",
			       sizes[i], rounds, us, sizes[i] / us);
	}
	free(buf);
}

/* Rank 0 puts pattern 100 into rank 1's window and gets rank 1's pattern 200 from it. */
static void run_rma(void)
{
	uint8_t *base, *local = malloc(WINDOW_BYTES);
	double start;
	MPI_Win win;

	if (!local)
		MPI_Abort(MPI_COMM_WORLD, 1);
	MPI_Win_allocate(2 * WINDOW_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
	memset(base, 0, 2 * WINDOW_BYTES);
	if (rank == 1)
		fill(base + WINDOW_BYTES, WINDOW_BYTES, 200);	/* what rank 0 gets */
	MPI_Win_fence(0, win);
	start = MPI_Wtime();
	if (rank == 0) {
		fill(local, WINDOW_BYTES, 100);
		MPI_Put(local, WINDOW_BYTES, MPI_BYTE, 1, 0, WINDOW_BYTES, MPI_BYTE, win);
	}
	MPI_Win_fence(0, win);
	if (rank == 1)
		check(base, WINDOW_BYTES, 100, "MPI_Put into the window");
	if (rank == 0) {
		memset(local, 0, WINDOW_BYTES);
		MPI_Get(local, WINDOW_BYTES, MPI_BYTE, 1, WINDOW_BYTES, WINDOW_BYTES, MPI_BYTE, win);
	}
	MPI_Win_fence(0, win);
	if (rank == 0) {
		check(local, WINDOW_BYTES, 200, "MPI_Get from the window");
		printf("rma: MPI_Put and MPI_Get of %d bytes checked, %.0f us with the fences\n",
		       WINDOW_BYTES, (MPI_Wtime() - start) * 1e6);
	}
	MPI_Win_free(&win);
	free(local);
}

int main(int argc, char **argv)
{
	int size;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2) {
		if (rank == 0)
			fprintf(stderr, "mpi_check: run with exactly 2 ranks, not %d\n", size);
		MPI_Finalize();
		return 1;
	}
	run_pingpong();
	run_rma();
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_check: all data checked\n");
	MPI_Finalize();
	return 0;
}
