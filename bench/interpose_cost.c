// SPDX-License-Identifier: MIT
/*
 * interpose_cost [N]: nanoseconds per stat() and open()+close() of an ordinary path, and per
 * socket()+close(). bench/interpose.sh runs it with and without libsoftrdma-preload.so to
 * show what the interposer costs calls that are not ours.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;
	struct stat st;
	double t0, t1, t2, t3;

	t0 = now_ns();
	for (long i = 0; i < n; i++)
		stat("/etc/hostname", &st);
	t1 = now_ns();
	for (long i = 0; i < n; i++)
		close(open("/etc/hostname", O_RDONLY));
	t2 = now_ns();
	for (long i = 0; i < n; i++)
		close(socket(AF_UNIX, SOCK_DGRAM, 0));
	t3 = now_ns();
	printf("{\"stat_ns\": %.1f, \"open_close_ns\": %.1f, \"socket_close_ns\": %.1f}\n",
	       (t1 - t0) / n, (t2 - t1) / n, (t3 - t2) / n);
	return 0;
}
