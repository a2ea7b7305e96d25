// SPDX-License-Identifier: MIT
/*
 * qp_scale: what QPs and memory registrations cost on softrdma0, through the system's
 * libibverbs (run it under `softrdma run`). bench/run.sh drives it; each mode prints one
 * JSON object on stdout.
 *
 *   qp_scale pairs N [IDLE_S]  N RC QPs connected to N RC QPs in this process (INIT, RTR,
 *                              RTS with the peer's QPN and GID 0, as tests/unit/rc_fixture.c
 *                              does): wall time and RSS of the set-up, then one signaled
 *                              8-byte RDMA WRITE on each of the 2N QPs, every byte checked.
 *                              With IDLE_S, the CPU time (utime + stime of all threads, from
 *                              /proc/self/stat, and from getrusage) the process uses while it
 *                              holds them idle.
 *   qp_scale mr                ibv_reg_mr/ibv_dereg_mr time of 4 KiB, 1 MiB, 64 MiB and 1 GiB
 *                              of untouched anonymous memory (median of repeats) and the RSS
 *                              around them: registration neither pins nor touches pages.
 *
 * Exit status: 0 when every step worked, 1 otherwise (the JSON still says how far it got).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "verbs_util.h"

#define WAIT_S 60	/* longest wait for the 2N write completions */

/* utime + stime of the whole process (all threads), in seconds. */
static double cpu_s(void)
{
	char buf[4096], *p;
	unsigned long utime, stime;
	FILE *f = fopen("/proc/self/stat", "r");
	size_t n;

	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');	/* the command name may hold spaces */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
			 &utime, &stime) != 2)
		return -1;
	return (double)(utime + stime) / sysconf(_SC_CLK_TCK);
}

/* The same from getrusage(), in microseconds rather than clock ticks. */
static double rusage_s(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return -1;
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = -1;	/* the directory's own fd */

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 2;	/* . and .. */
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int pairs(long n, int idle_s)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp **qp;
	union ibv_gid gid;
	struct rlimit rl;
	long nqp = 2 * n, made = 0, connected = 0, posted = 0, done = 0, good = 0, bad_bytes = 0;
	long rss_start, rss_ctx, rss_qps = -1, rss_written = -1;
	double t0, t_created = 0, t_connected = 0, t_written = 0, cpu0, cpu1, ru0, ru1;
	double idle_cpu_pct = -1, idle_rusage_pct = -1;
	const char *failed = NULL;
	uint64_t *src, *dst;
	size_t len = (size_t)nqp * 2 * sizeof(uint64_t);
	int first_status = IBV_WC_SUCCESS, fds_before, fds_after = -1;

	/* 2N QPs hold up to 4N sockets in this one process: allow what the hard limit allows. */
	if (!getrlimit(RLIMIT_NOFILE, &rl)) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	rss_start = rss_kb();
	ctx = open_softrdma(&list);
	if (!ctx)
		return 1;
	if (ibv_query_gid(ctx, 1, 0, &gid))
		return fprintf(stderr, "qp_scale: ibv_query_gid: %s\n", strerror(errno)), 1;
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, (int)(nqp + 16), NULL, NULL, 0);
	qp = calloc((size_t)nqp, sizeof(*qp));
	/* Per QP i: src[i] is what it writes, dst[i] is where its peer's write lands. */
	src = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!pd || !cq || !qp || src == MAP_FAILED)
		return fprintf(stderr, "qp_scale: set-up: %s\n", strerror(errno)), 1;
	dst = src + nqp;
	mr = ibv_reg_mr(pd, src, len, ACCESS);
	if (!mr)
		return fprintf(stderr, "qp_scale: ibv_reg_mr: %s\n", strerror(errno)), 1;
	for (long i = 0; i < nqp; i++)
		src[i] = 0x5eed000000000000ull | (uint64_t)i;
	fds_before = open_fds();
	rss_ctx = rss_kb();

	t0 = now_s();
	for (; made < nqp; made++) {
		qp[made] = create_rc_qp(pd, cq);
		if (!qp[made]) {
			failed = "ibv_create_qp";
			break;
		}
	}
	t_created = now_s() - t0;
	/* QP 2k and 2k + 1 are peers. Both reach RTR before either reaches RTS. */
	for (long k = 0; !failed && k < n; k++) {
		struct ibv_qp *a = qp[2 * k], *b = qp[2 * k + 1];

		if (to_init(a) || to_init(b))
			failed = "modify to INIT";
		else if (to_rtr(a, b->qp_num, &gid) || to_rtr(b, a->qp_num, &gid))
			failed = "modify to RTR";
		else if (to_rts(a) || to_rts(b))
			failed = "modify to RTS";
		else
			connected++;
	}
	t_connected = now_s() - t0;
	rss_qps = rss_kb();

	/* One signaled 8-byte RDMA WRITE on each QP into its peer's slot. */
	t0 = now_s();
	for (long i = 0; !failed && i < nqp; i++) {
		long peer = i ^ 1;

		if (post_write8(qp[i], (uint64_t)i, &src[i], mr->lkey, (uintptr_t)&dst[peer],
				mr->rkey)) {
			failed = "ibv_post_send";
			break;
		}
		posted++;
	}
	while (done < posted && now_s() - t0 < WAIT_S) {
		struct ibv_wc wc[64];
		int got = ibv_poll_cq(cq, 64, wc);

		if (got < 0) {
			failed = "ibv_poll_cq";
			break;
		}
		for (int j = 0; j < got; j++) {
			if (wc[j].status == IBV_WC_SUCCESS)
				good++;
			else if (first_status == IBV_WC_SUCCESS)
				first_status = wc[j].status;
		}
		done += got;
	}
	t_written = now_s() - t0;
	if (!failed && done < posted)
		failed = "write completions did not all arrive";
	else if (!failed && good < posted)
		failed = "a write completed with an error";
	for (long i = 0; i < nqp && i < posted; i++)
		if (dst[i ^ 1] != src[i])
			bad_bytes++;
	if (!failed && bad_bytes)
		failed = "written bytes differ";
	rss_written = rss_kb();
	fds_after = open_fds();

	if (!failed && idle_s > 0) {
		cpu0 = cpu_s();
		ru0 = rusage_s();
		sleep((unsigned int)idle_s);
		cpu1 = cpu_s();
		ru1 = rusage_s();
		idle_cpu_pct = 100.0 * (cpu1 - cpu0) / idle_s;
		idle_rusage_pct = 100.0 * (ru1 - ru0) / idle_s;
	}

	printf("{\"mode\": \"pairs\", \"pairs\": %ld, \"qps\": %ld, \"qps_created\": %ld, "
	       "\"pairs_connected\": %ld, \"sq_depth\": %d, \"rq_depth\": %d, "
	       "\"create_s\": %.6f, \"setup_s\": %.6f, \"setup_us_per_pair\": %.1f, "
	       "\"writes_posted\": %ld, \"writes_ok\": %ld, \"write_bytes_wrong\": %ld, "
	       "\"first_error\": \"%s\", \"writes_s\": %.6f, "
	       "\"rss_kb_start\": %ld, \"rss_kb_device_open\": %ld, \"rss_kb_connected\": %ld, "
	       "\"rss_kb_after_writes\": %ld, \"rss_kb_per_pair\": %.1f, "
	       "\"fds_before\": %d, \"fds_after\": %d, \"idle_s\": %d, \"idle_cpu_pct\": %.2f, "
	       "\"idle_cpu_pct_rusage\": %.3f, "
	       "\"ok\": %s, \"failed_at\": \"%s\"}\n",
	       n, nqp, made, connected, SQ_DEPTH, RQ_DEPTH, t_created, t_connected,
	       n ? 1e6 * t_connected / n : 0.0, posted, good, bad_bytes,
	       ibv_wc_status_str(first_status), t_written, rss_start, rss_ctx, rss_qps,
	       rss_written, n ? (double)(rss_written - rss_ctx) / n : 0.0, fds_before, fds_after,
	       idle_s, idle_cpu_pct, idle_rusage_pct, failed ? "false" : "true", failed ? failed : "");
	fflush(stdout);

	for (long i = 0; i < made; i++)
		ibv_destroy_qp(qp[i]);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	munmap(src, len);
	free(qp);
	return failed ? 1 : 0;
}

static int mr(void)
{
	static const size_t sizes[] = { 4096, 1u << 20, 64u << 20, 1u << 30 };
	enum { REPS = 21 };
	struct ibv_device **list;
	struct ibv_context *ctx = open_softrdma(&list);
	struct ibv_pd *pd;
	int ok = 1;

	if (!ctx)
		return 1;
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		return fprintf(stderr, "qp_scale: ibv_alloc_pd: %s\n", strerror(errno)), 1;
	printf("{\"mode\": \"mr\", \"reps\": %d, \"sizes\": [", REPS);
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		double reg[REPS], dereg[REPS];
		long rss_before, rss_registered = -1;
		void *p = mmap(NULL, sizes[s], PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (p == MAP_FAILED)
			return fprintf(stderr, "qp_scale: mmap %zu: %s\n", sizes[s],
				       strerror(errno)), 1;
		rss_before = rss_kb();
		for (int r = 0; r < REPS; r++) {
			double t0 = now_s(), t1, t2;
			struct ibv_mr *m = ibv_reg_mr(pd, p, sizes[s], ACCESS);

			t1 = now_s();
			if (!m) {
				fprintf(stderr, "qp_scale: ibv_reg_mr %zu: %s\n", sizes[s],
					strerror(errno));
				ok = 0;
				reg[r] = dereg[r] = -1;
				continue;
			}
			if (r == 0)
				rss_registered = rss_kb();
			ibv_dereg_mr(m);
			t2 = now_s();
			reg[r] = (t1 - t0) * 1e6;
			dereg[r] = (t2 - t1) * 1e6;
		}
		qsort(reg, REPS, sizeof(reg[0]), cmp_double);
		qsort(dereg, REPS, sizeof(dereg[0]), cmp_double);
		printf("%s{\"bytes\": %zu, \"reg_us_median\": %.2f, \"reg_us_min\": %.2f, "
		       "\"reg_us_max\": %.2f, \"dereg_us_median\": %.2f, \"rss_kb_before\": %ld, "
		       "\"rss_kb_registered\": %ld}", s ? ", " : "", sizes[s], reg[REPS / 2],
		       reg[0], reg[REPS - 1], dereg[REPS / 2], rss_before, rss_registered);
		munmap(p, sizes[s]);
	}
	printf("], \"ok\": %s}\n", ok ? "true" : "false");
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "pairs"))
		return pairs(atol(argv[2]), argc > 3 ? atoi(argv[3]) : 0);
	if (argc == 2 && !strcmp(argv[1], "mr"))
		return mr();
	fprintf(stderr, "usage: qp_scale pairs N [IDLE_SECONDS] | qp_scale mr\n");
	return 2;
}
