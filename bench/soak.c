// SPDX-License-Identifier: MIT
/*
 * The soak (bench/soak.sh): one RC QP between two processes, the client sending messages of
 * every size from 1 byte to --max bytes for --seconds, each filled from its sequence number
 * so the server can regenerate and compare every byte. The server counts what arrived, in
 * order, intact; the last message says how many were sent, so nothing lost goes unnoticed.
 * Flow control is the RNR NAK: the client keeps its send queue full, and a server that is
 * behind answers RNR until it has reposted (rnr_retry 7: forever).
 *
 *   soak_rdma server PORT MAX_BYTES
 *   soak_rdma client HOST PORT SECONDS MAX_BYTES
 *
 * QPNs and GIDs are exchanged over a TCP connection to PORT. Output: one line every 10 s,
 * then a "result:" line; the exit status is 0 only if everything sent was verified.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define DEPTH		32		/* WRs in flight; receives posted */
#define HEADER		16		/* seq (8), size (4), magic (4) */
#define END_MAGIC	0x454e4421u	/* "END!": the last message, seq = messages sent */
#define MSG_MAGIC	0x534f414bu	/* "SOAK" */

struct peer {
	uint32_t qpn, psn;
	union ibv_gid gid;
};

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;		/* DEPTH slots of max + HEADER bytes */
	size_t slot;
};

static void die(const char *what)
{
	fprintf(stderr, "soak: %s: %s\n", what, strerror(errno));
	exit(2);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

/* The size of message seq (1 to max, most sizes small, some large) and its bytes. */
static uint32_t size_of(uint64_t seq, uint32_t max)
{
	uint64_t h = mix(seq);

	return (uint32_t)(h % 8 == 0 ? h % max : h % (max < 4096 ? max : 4096)) + 1;
}

static void fill(uint8_t *p, uint32_t n, uint64_t seq)
{
	uint64_t x = mix(seq + 1);

	for (uint32_t i = 0; i < n; i++) {
		if (i % 8 == 0)
			x = mix(x + i);
		p[i] = (uint8_t)(x >> (8 * (i % 8)));
	}
}

static void open_side(struct side *s, size_t max)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = DEPTH, .max_recv_wr = DEPTH, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	for (int i = 0; list && list[i] && !s->ctx; i++)
		if (!strncmp(ibv_get_device_name(list[i]), "softrdma", 8))
			s->ctx = ibv_open_device(list[i]);
	if (!s->ctx)
		die("no softrdma device (run under softrdma run)");
	ibv_free_device_list(list);
	s->slot = max + HEADER;
	s->buf = malloc(DEPTH * s->slot);
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 2 * DEPTH, NULL, NULL, 0);
	if (!s->buf || !s->pd || !s->cq)
		die("resources");
	s->mr = ibv_reg_mr(s->pd, s->buf, DEPTH * s->slot, IBV_ACCESS_LOCAL_WRITE);
	init.send_cq = init.recv_cq = s->cq;
	s->qp = ibv_create_qp(s->pd, &init);
	if (!s->mr || !s->qp)
		die("mr/qp");
}

static void post_recv(struct side *s, int slot)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf + (size_t)slot * s->slot,
			       .length = (uint32_t)s->slot, .lkey = s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = (uint64_t)slot, .sg_list = &sge, .num_sge = 1 }, *bad;

	errno = ibv_post_recv(s->qp, &wr, &bad);
	if (errno)
		die("post_recv");
}

/*
 * RESET to RTS. A receiving side posts its receives in INIT: a QP in RESET takes none
 * (EINVAL, as rxe and mlx5), and they must be there before the peer's first SEND.
 */
static void connect_qp(struct side *s, const struct peer *me, const struct peer *them,
		       int receives)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_LOCAL_WRITE };

	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS))
		die("INIT");
	for (int i = 0; i < receives; i++)
		post_recv(s, i);
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_4096, .dest_qp_num = them->qpn,
		.rq_psn = them->psn, .max_dest_rd_atomic = 1, .min_rnr_timer = 1,
		.ah_attr = { .is_global = 1, .port_num = 1, .grh = { .dgid = them->gid,
								      .hop_limit = 1 } },
	};
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7,
				  .rnr_retry = 7, .sq_psn = me->psn, .max_rd_atomic = 1 };
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

/* Out of band: the server accepts one TCP connection; both send their QPN, PSN and GID. */
static void exchange(int fd, struct side *s, struct peer *them, int receives)
{
	struct peer me = { .qpn = s->qp->qp_num, .psn = (uint32_t)getpid() & 0xffffff };

	if (ibv_query_gid(s->ctx, 1, 0, &me.gid))
		die("gid");
	if (write(fd, &me, sizeof(me)) != sizeof(me) || read(fd, them, sizeof(*them)) != sizeof(*them))
		die("exchange");
	connect_qp(s, &me, them, receives);
}

static struct ibv_wc wait_wc(struct side *s)
{
	struct ibv_wc wc;
	int n;

	while ((n = ibv_poll_cq(s->cq, 1, &wc)) == 0)
		;
	if (n < 0)
		die("poll_cq");
	if (wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "soak: completion %s (wr %" PRIu64 ")\n",
			ibv_wc_status_str(wc.status), wc.wr_id);
		printf("result: FAILED: %s\n", ibv_wc_status_str(wc.status));
		exit(1);
	}
	return wc;
}

static int server(int port, uint32_t max)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	uint64_t expect = 0, bytes = 0, corrupt = 0, sent = UINT64_MAX;
	uint8_t *want = malloc(max + HEADER);
	struct side s = { 0 };
	struct peer them;
	double t0, last;
	int one = 1, lfd, fd;

	open_side(&s, max);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1))
		die("listen");
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		die("accept");
	exchange(fd, &s, &them, DEPTH);
	t0 = last = now_s();
	while (sent == UINT64_MAX) {
		struct ibv_wc wc = wait_wc(&s);
		uint8_t *m = s.buf + wc.wr_id * s.slot;
		uint64_t seq;
		uint32_t size, magic;

		memcpy(&seq, m, 8);
		memcpy(&size, m + 8, 4);
		memcpy(&magic, m + 12, 4);
		if (magic == END_MAGIC) {
			sent = seq;
		} else if (magic != MSG_MAGIC || seq != expect || size != size_of(seq, max) ||
			   wc.byte_len != size + HEADER) {
			fprintf(stderr, "soak: message %" PRIu64 ": header of seq %" PRIu64
				" size %u len %u\n", expect, seq, size, wc.byte_len);
			corrupt++;
			expect = seq + 1;
		} else {
			fill(want, size, seq);
			if (memcmp(want, m + HEADER, size)) {
				fprintf(stderr, "soak: message %" PRIu64 ": payload differs\n", seq);
				corrupt++;
			} else {
				bytes += size;
			}
			expect++;
		}
		post_recv(&s, (int)wc.wr_id);
		if (now_s() - last >= 10) {
			last = now_s();
			printf("server: %.0f s: %" PRIu64 " messages, %" PRIu64 " bytes verified\n",
			       last - t0, expect, bytes);
			fflush(stdout);
		}
	}
	printf("result: server: %" PRIu64 " messages sent, %" PRIu64 " received in order and "
	       "verified (%" PRIu64 " bytes), %" PRIu64 " corrupt, %" PRIu64 " lost\n",
	       sent, expect - corrupt, bytes, corrupt, sent > expect ? sent - expect : 0);
	/* The ACK of the last message may be lost (SOFTRDMA_FAULTS) and the message resent:
	 * stay until the client has its completion and hangs up. */
	while (read(fd, &one, sizeof(one)) > 0)
		;
	close(fd);
	close(lfd);
	return corrupt || expect != sent ? 1 : 0;
}

static int client(const char *host, int port, double seconds, uint32_t max)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;
	uint64_t seq = 0, bytes = 0;
	int outstanding = 0, fd;
	struct side s = { 0 };
	struct peer them;
	char portstr[16];
	double t0, last;

	open_side(&s, max);
	snprintf(portstr, sizeof(portstr), "%d", port);
	if (getaddrinfo(host, portstr, &hints, &ai))
		die("getaddrinfo");
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen))
		die("connect");
	freeaddrinfo(ai);
	exchange(fd, &s, &them, 0);
	t0 = last = now_s();
	for (bool end = false; !end || outstanding;) {
		if (outstanding == DEPTH || (end && outstanding)) {
			wait_wc(&s);
			outstanding--;
			continue;
		}
		{
			int slot = (int)(seq % DEPTH);
			uint8_t *m = s.buf + (size_t)slot * s.slot;
			uint32_t size = size_of(seq, max), magic = MSG_MAGIC;
			struct ibv_sge sge = { .addr = (uintptr_t)m, .lkey = s.mr->lkey };
			struct ibv_send_wr wr = { .wr_id = seq, .sg_list = &sge, .num_sge = 1,
						  .opcode = IBV_WR_SEND,
						  .send_flags = IBV_SEND_SIGNALED }, *bad;

			end = now_s() - t0 >= seconds;
			if (end) {
				magic = END_MAGIC;
				size = 0;
			} else {
				fill(m + HEADER, size, seq);
			}
			memcpy(m, &seq, 8);
			memcpy(m + 8, &size, 4);
			memcpy(m + 12, &magic, 4);
			sge.length = size + HEADER;
			if (ibv_post_send(s.qp, &wr, &bad))
				die("post_send");
			outstanding++;
			if (!end) {
				seq++;
				bytes += size;
			}
		}
		if (now_s() - last >= 10) {
			last = now_s();
			printf("client: %.0f s: %" PRIu64 " messages, %" PRIu64 " bytes, %.1f MB/s\n",
			       last - t0, seq, bytes, (double)bytes / 1e6 / (last - t0));
			fflush(stdout);
		}
	}
	printf("result: client: %" PRIu64 " messages, %" PRIu64 " bytes sent and acknowledged "
	       "in %.0f s\n", seq, bytes, now_s() - t0);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]), (uint32_t)atoi(argv[3]));
	if (argc == 6 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), atof(argv[4]), (uint32_t)atoi(argv[5]));
	fprintf(stderr, "usage: soak_rdma server PORT MAX_BYTES\n"
			"       soak_rdma client HOST PORT SECONDS MAX_BYTES\n");
	return 2;
}
