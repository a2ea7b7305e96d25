// SPDX-License-Identifier: MIT
/*
 * qp_procs N: N RC QPs in each of two processes (this one and a child it forks), connected
 * one to one, as an MPI job or a storage client connects to its peers. Each side creates
 * its QPs, tells the other its QPNs, rkey and buffer address through a pipe (the
 * out-of-band exchange), takes every QP through INIT, RTR and RTS, then posts one signaled
 * 8-byte RDMA WRITE on each into the peer's buffer; once both are done, each checks every
 * 8 bytes it received. Prints one JSON object: the set-up time (from before the fork until
 * both sides are connected), the RSS each side holds per QP, and whether every byte arrived.
 * Run it under `softrdma run` (bench/run.sh does).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "verbs_util.h"

#define WAIT_S 60

struct side_report {
	double connected_s;	/* since before the fork */
	double writes_s;
	long rss_kb_open, rss_kb_connected;
	long written, wrong;
	char failed[64];
};

static int write_all(int fd, const void *p, size_t n)
{
	for (const char *c = p; n;) {
		ssize_t w = write(fd, c, n);

		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, void *p, size_t n)
{
	for (char *c = p; n;) {
		ssize_t r = read(fd, c, n);

		if (r <= 0)
			return -1;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

/* One side: tag 1 (parent) or 2 (child); to and from are its ends of the two pipes. */
static void run_side(long n, int tag, int to, int from, double t0, struct side_report *rep)
{
	struct ibv_device **list = NULL;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp **qp = calloc((size_t)n, sizeof(*qp));
	uint32_t *qpns = calloc((size_t)n, sizeof(*qpns)), *peer_qpns = calloc((size_t)n, 4);
	struct { uint32_t rkey; uint64_t addr; } me, peer;
	union ibv_gid gid;
	size_t len = (size_t)n * 2 * sizeof(uint64_t);
	uint64_t *src, *dst;
	long posted = 0, done = 0;
	double tw;
	char sync = 1;

#define FAIL(what) do { snprintf(rep->failed, sizeof(rep->failed), "%s", what); goto out; } while (0)
	memset(rep, 0, sizeof(*rep));
	ctx = open_softrdma(&list);
	if (!ctx || !qp || !qpns || !peer_qpns)
		FAIL("open softrdma0");
	if (ibv_query_gid(ctx, 1, 0, &gid))
		FAIL("ibv_query_gid");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, (int)n + 16, NULL, NULL, 0);
	src = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!pd || !cq || src == MAP_FAILED)
		FAIL("PD, CQ or buffer");
	dst = src + n;
	mr = ibv_reg_mr(pd, src, len, ACCESS);
	if (!mr)
		FAIL("ibv_reg_mr");
	for (long i = 0; i < n; i++)
		src[i] = (uint64_t)tag << 32 | (uint64_t)i;
	rep->rss_kb_open = rss_kb();
	for (long i = 0; i < n; i++) {
		qp[i] = create_rc_qp(pd, cq);
		if (!qp[i] || to_init(qp[i]))
			FAIL("ibv_create_qp or INIT");
		qpns[i] = qp[i]->qp_num;
	}
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)dst;
	/* Parent writes first, child reads first: no deadlock whatever the pipe's capacity. */
	if (tag == 1 ? write_all(to, &me, sizeof(me)) || write_all(to, qpns, (size_t)n * 4) ||
			       read_all(from, &peer, sizeof(peer)) ||
			       read_all(from, peer_qpns, (size_t)n * 4)
		     : read_all(from, &peer, sizeof(peer)) ||
			       read_all(from, peer_qpns, (size_t)n * 4) ||
			       write_all(to, &me, sizeof(me)) || write_all(to, qpns, (size_t)n * 4))
		FAIL("exchange");
	for (long i = 0; i < n; i++)
		if (to_rtr(qp[i], peer_qpns[i], &gid) || to_rts(qp[i]))
			FAIL("RTR or RTS");
	/*
	 * As perftest does: no traffic until the peer's QPs are RTR too. A request to a QP that
	 * is not is dropped, as on hardware, and ends in RETRY_EXC_ERR if the peer is slower
	 * than timeout x retry_cnt (0.5 s here).
	 */
	if (write_all(to, &sync, 1) || read_all(from, &sync, 1))
		FAIL("sync");
	rep->connected_s = now_s() - t0;
	rep->rss_kb_connected = rss_kb();

	tw = now_s();
	for (long i = 0; i < n; i++) {
		if (post_write8(qp[i], (uint64_t)i, &src[i], mr->lkey,
				peer.addr + (uint64_t)i * 8, peer.rkey))
			FAIL("ibv_post_send");
		posted++;
	}
	while (done < posted && now_s() - tw < WAIT_S) {
		struct ibv_wc wc[64];
		int got = ibv_poll_cq(cq, 64, wc);

		if (got < 0)
			FAIL("ibv_poll_cq");
		for (int j = 0; j < got; j++)
			if (wc[j].status != IBV_WC_SUCCESS)
				FAIL(ibv_wc_status_str(wc[j].status));
		done += got;
	}
	rep->writes_s = now_s() - tw;
	rep->written = done;
	if (done < posted)
		FAIL("write completions did not all arrive");
	/* Both sides' writes are complete once both say so. */
	if (write_all(to, &sync, 1) || read_all(from, &sync, 1))
		FAIL("sync");
	for (long i = 0; i < n; i++)
		if (dst[i] != ((uint64_t)(3 - tag) << 32 | (uint64_t)i))
			rep->wrong++;
	if (rep->wrong)
		FAIL("written bytes differ");
out:
	for (long i = 0; qp && i < n; i++)
		if (qp[i])
			ibv_destroy_qp(qp[i]);
	free(qp);
	free(qpns);
	free(peer_qpns);
	if (list)
		ibv_free_device_list(list);
#undef FAIL
}

int main(int argc, char **argv)
{
	long n = argc == 2 ? atol(argv[1]) : 0;
	struct side_report parent, child;
	int p2c[2], c2p[2], status;
	struct rlimit rl;
	double t0;
	pid_t pid;

	if (n <= 0) {
		fprintf(stderr, "usage: qp_procs N   (N connected QPs in each of two processes)\n");
		return 2;
	}
	/* N QPs hold up to 2N sockets per process: allow what the hard limit allows. */
	if (!getrlimit(RLIMIT_NOFILE, &rl)) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (pipe(p2c) || pipe(c2p))
		return perror("qp_procs: pipe"), 1;
	t0 = now_s();
	pid = fork();
	if (pid < 0)
		return perror("qp_procs: fork"), 1;
	if (pid == 0) {
		run_side(n, 2, c2p[1], p2c[0], t0, &child);
		/* The report goes to the parent after the sync, on the same pipe. */
		return write_all(c2p[1], &child, sizeof(child)) ? 1 : 0;
	}
	run_side(n, 1, p2c[1], c2p[0], t0, &parent);
	close(p2c[1]);	/* a child still waiting for us (we failed) reads the end */
	if (read_all(c2p[0], &child, sizeof(child)))
		snprintf(child.failed, sizeof(child.failed), "no report from the child");
	waitpid(pid, &status, 0);
	printf("{\"mode\": \"procs\", \"qps_per_process\": %ld, "
	       "\"setup_s\": %.6f, \"writes_s\": %.6f, "
	       "\"rss_kb_per_qp_parent\": %.1f, \"rss_kb_per_qp_child\": %.1f, "
	       "\"written\": %ld, \"wrong\": %ld, \"ok\": %s, \"failed_at\": \"%s%s%s\"}\n",
	       n, parent.connected_s > child.connected_s ? parent.connected_s : child.connected_s,
	       parent.writes_s > child.writes_s ? parent.writes_s : child.writes_s,
	       (double)(parent.rss_kb_connected - parent.rss_kb_open) / n,
	       (double)(child.rss_kb_connected - child.rss_kb_open) / n,
	       parent.written + child.written, parent.wrong + child.wrong,
	       !parent.failed[0] && !child.failed[0] ? "true" : "false",
	       parent.failed, parent.failed[0] && child.failed[0] ? "; " : "", child.failed);
	return parent.failed[0] || child.failed[0];
}
