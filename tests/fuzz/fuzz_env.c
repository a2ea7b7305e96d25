// SPDX-License-Identifier: MIT
/* The fuzz harnesses' shared environment (fuzz_env.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "emu/srq.h"
#include "fuzz_env.h"

#define CANARY	0xa5

/* Where each region lies: page (0: A, 1: B), offset, length, PD, rights. */
static const struct {
	int page;
	size_t off, len;
	uint32_t pd;
	int access;
} layout[FUZZ_REGIONS + 1] = {
	[1] = { 0, 512, 2048, 1, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC },
	[2] = { 0, 2560, 512, 1, IBV_ACCESS_REMOTE_READ },
	[3] = { 0, 3072, 512, 2, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE },
	[4] = { 1, 256, 2048, 1, IBV_ACCESS_LOCAL_WRITE },
};

static uint8_t *page_of(struct fuzz_env *env, int page)
{
	return env->map + env->page * (size_t)(1 + 2 * page);
}

static void die(const char *what)
{
	fprintf(stderr, "fuzz_env: %s\n", what);
	abort();
}

static const struct qp_attr_limits limits = {
	.phys_port_cnt = 1, .pkey_tbl_len = 1, .gid_tbl_len = 1, .max_mtu = IBV_MTU_4096,
	.max_qp_init_rd_atom = 16, .max_qp_rd_atom = 16, .grh_required = true,
};

static void noop_cq_error(void *owner, struct emu_cq *cq)
{
	(void)owner;
	(void)cq;
}

static struct emu_qp *make_qp(struct fuzz_env *env, enum ibv_qp_type type)
{
	struct emu_qp_init init = {
		.type = type, .pd_handle = 1, .send_cq = env->cq, .recv_cq = env->cq, .xrcd = 1,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 4,
			 .max_recv_sge = 4, .max_inline_data = 64 },
		.async_fd = env->async_pipe[1],
	};
	struct emu_qp *qp;

	if (emu_qp_create(env->engine, &init, &qp))
		die("emu_qp_create");
	return qp;
}

struct fuzz_env *fuzz_env(void)
{
	static struct fuzz_env env;
	struct emu_cq_init cq = { .cqe = 4096, .notify_fd = -1, .on_error = noop_cq_error };

	if (env.engine)
		return &env;
	if (emu_engine_get(&env.engine) || emu_cq_create(&cq, &env.cq) ||
	    pipe2(env.async_pipe, O_NONBLOCK | O_CLOEXEC))
		die("engine, CQ or pipe");
	env.page = (size_t)sysconf(_SC_PAGESIZE);
	env.map = mmap(NULL, 5 * env.page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (env.map == MAP_FAILED || mprotect(page_of(&env, 0), env.page, PROT_READ | PROT_WRITE) ||
	    mprotect(page_of(&env, 1), env.page, PROT_READ | PROT_WRITE))
		die("mmap");
	memset(page_of(&env, 0), CANARY, env.page);
	memset(page_of(&env, 1), CANARY, env.page);
	for (int n = 1; n <= FUZZ_REGIONS; n++) {
		uint8_t *addr = page_of(&env, layout[n].page) + layout[n].off;
		uint64_t iova = n <= 3 ? FUZZ_IOVA(n) + layout[n].off : (uintptr_t)addr;

		memset(addr, 0, layout[n].len);
		if (mr_register(emu_engine_mem(env.engine), layout[n].pd, addr, layout[n].len,
				iova, layout[n].access, &env.mr[n]))
			die("mr_register");
	}
	env.peer.sin6_family = AF_INET6;
	env.peer.sin6_addr.s6_addr[10] = 0xff;
	env.peer.sin6_addr.s6_addr[11] = 0xff;
	env.peer.sin6_addr.s6_addr[12] = 127;
	env.peer.sin6_addr.s6_addr[15] = 1;
	env.rc = make_qp(&env, IBV_QPT_RC);
	env.ud = make_qp(&env, IBV_QPT_UD);
	env.xrc_tgt = make_qp(&env, IBV_QPT_XRC_RECV);	/* domain 1 */
	for (uint32_t n = 1; n <= FUZZ_XRC_SRQS; n++) {
		struct emu_srq_init srq = {
			.pd_handle = 1, .xrcd = n, .cq = env.cq, .async_fd = env.async_pipe[1],
			.attr = { .max_wr = 4, .max_sge = 1 },
		};

		if (emu_srq_create(env.engine, &srq, &env.xrc_srq[n]))
			die("emu_srq_create");
	}
	return &env;
}

/* The low n bytes of v into p, most significant first, as the wire carries numbers. */
static void put_be(uint8_t *p, uint32_t v, int n)
{
	for (int k = 0; k < n; k++)
		p[k] = (uint8_t)(v >> 8 * (n - 1 - k));
}

uint8_t *fuzz_patch(struct fuzz_env *env, const struct emu_qp *qp, const uint8_t *data,
		    size_t size)
{
	uint8_t *p = malloc(size ? size : 1);

	if (!p)
		die("malloc");
	memcpy(p, data, size);
	for (size_t i = 0; i + 3 <= size; i++) {
		if (p[i] == 0xff && p[i + 1] == 0xff && p[i + 2] == 0xfe) {
			put_be(p + i, qp->qpn, 3);
			i += 2;
		} else if (i + 4 <= size && p[i] == 0xfe && p[i + 1] == 0xed && p[i + 2] == 0 &&
			   p[i + 3] >= 1 && p[i + 3] <= FUZZ_REGIONS) {
			put_be(p + i, env->mr[p[i + 3]]->rkey, 4);
			i += 3;
		} else if (p[i] == 0xff && p[i + 1] == 0xff && p[i + 2] == 0xfd) {
			put_be(p + i, env->xrc_tgt->qpn, 3);
			i += 2;
		} else if (i + 4 <= size && p[i] == 0xfe && p[i + 1] == 0xed && p[i + 2] == 1 &&
			   p[i + 3] >= 1 && p[i + 3] <= FUZZ_XRC_SRQS) {
			uint32_t srqn = emu_srq_num(env->xrc_srq[p[i + 3]]);

			p[i] = 0;	/* an XRCETH: 8 reserved bits, then the SRQ number */
			put_be(p + i + 1, srqn, 3);
			i += 3;
		}
	}
	return p;
}

static void modify(struct emu_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	uint8_t sgid[16];

	memcpy(sgid, &fuzz_env()->peer.sin6_addr, 16);
	if (emu_qp_modify(qp, attr, mask, &limits, sgid))
		die("emu_qp_modify");
}

static void post_receives(struct fuzz_env *env, struct emu_qp *qp)
{
	const struct mem_region *mr = env->mr[4];
	uint8_t *base = page_of(env, 1) + layout[4].off;

	/* Each input starts from the same memory, so that what it does depends on it alone. */
	for (int n = 1; n <= FUZZ_REGIONS; n++)
		memset(page_of(env, layout[n].page) + layout[n].off, 0, layout[n].len);

	for (int i = 0; i < 2; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)base + i * 1024, .length = 1024,
				       .lkey = mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1 };
		struct ibv_recv_wr *bad;

		if (emu_qp_post_recv(qp, &wr, &bad))
			die("emu_qp_post_recv");
	}
}

/* A connected QP (RC, or the XRC target) back to RESET and up to RTR, its peer's. */
static void ready_responder(struct fuzz_env *env, struct emu_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

	modify(qp, &a, IBV_QP_STATE);
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1,
				  .qp_access_flags = layout[1].access };
	modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = FUZZ_PEER_QPN,
		.rq_psn = 0, .max_dest_rd_atomic = 16, .min_rnr_timer = 1,
		.ah_attr = { .is_global = 1, .port_num = 1 },
	};
	memcpy(a.ah_attr.grh.dgid.raw, &env->peer.sin6_addr, 16);
	modify(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

void fuzz_ready_rc(struct fuzz_env *env)
{
	ready_responder(env, env->rc);
	post_receives(env, env->rc);
}

void fuzz_ready_requester(struct fuzz_env *env)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
		.sq_psn = 0, .max_rd_atomic = 16,
	};

	fuzz_ready_rc(env);
	modify(env->rc, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			    IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Each SRQ holds two receives in region 4 at most: what an input used is given back. */
static void post_srq_receives(struct fuzz_env *env)
{
	const struct mem_region *mr = env->mr[4];
	uint8_t *base = page_of(env, 1) + layout[4].off;

	for (int n = 1; n <= FUZZ_XRC_SRQS; n++)
		for (int i = 0; i < 2; i++) {
			struct ibv_sge sge = { .addr = (uintptr_t)base + i * 1024, .length = 1024,
					       .lkey = mr->lkey };
			struct ibv_recv_wr wr = { .wr_id = (uint64_t)(10 * n + i), .sg_list = &sge,
						  .num_sge = 1 };
			struct ibv_recv_wr *bad;
			int ret = emu_srq_post_recv(env->xrc_srq[n], &wr, &bad);

			if (ret == ENOMEM)
				break;	/* full: the last input used none */
			if (ret)
				die("emu_srq_post_recv");
		}
}

void fuzz_ready_xrc(struct fuzz_env *env)
{
	ready_responder(env, env->xrc_tgt);
	post_srq_receives(env);
}

void fuzz_ready_ud(struct fuzz_env *env)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

	modify(env->ud, &a, IBV_QP_STATE);
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = FUZZ_QKEY };
	modify(env->ud, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR };
	modify(env->ud, &a, IBV_QP_STATE);
	post_receives(env, env->ud);
}

void fuzz_after(struct fuzz_env *env)
{
	struct ibv_wc wc[64];
	char events[256];

	static int verbose = -1;
	int n;

	if (verbose < 0)
		verbose = getenv("FUZZ_VERBOSE") != NULL;	/* what each input came to */
	while ((n = emu_cq_poll(env->cq, 64, wc)) > 0)
		for (int i = 0; verbose && i < n; i++)
			fprintf(stderr, "fuzz: completion wr %llu status %d opcode %d len %u\n",
				(unsigned long long)wc[i].wr_id, wc[i].status, wc[i].opcode,
				wc[i].byte_len);
	if (verbose)
		fprintf(stderr, "fuzz: RC QP %s, UD QP %s, XRC target %s, region 1 starts %02x %02x %02x\n",
			qp_state_name(env->rc->state), qp_state_name(env->ud->state),
			qp_state_name(env->xrc_tgt->state),
			page_of(env, 0)[512], page_of(env, 0)[513], page_of(env, 0)[514]);
	while (read(env->async_pipe[0], events, sizeof(events)) > 0)
		;
	for (int page = 0; page < 2; page++) {
		const uint8_t *p = page_of(env, page);

		for (size_t i = 0; i < env->page; i++) {
			bool inside = false;

			for (int n = 1; n <= FUZZ_REGIONS; n++)
				inside |= layout[n].page == page && i >= layout[n].off &&
					  i < layout[n].off + layout[n].len;
			if (!inside && p[i] != CANARY) {
				fprintf(stderr, "fuzz: page %c byte %zu outside every region changed\n",
					'A' + page, i);
				abort();
			}
		}
	}
}

struct stream_feed {
	struct fuzz_env *env;
	int fd;
	void (*on_engine)(struct fuzz_env *env, int fd);
};

static void stream_feed_on_engine(void *arg)
{
	struct stream_feed *f = arg;

	f->on_engine(f->env, f->fd);
}

void fuzz_feed_stream(struct fuzz_env *env, const uint8_t *data, size_t size,
		      void (*on_engine)(struct fuzz_env *env, int fd))
{
	uint8_t *bytes = fuzz_patch(env, env->rc, data, size);
	struct stream_feed f = { .env = env, .on_engine = on_engine };
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv))
		abort();
	/* Inputs are kept below the socket's buffer (-max_len), so this takes all of it. */
	if (size && write(sv[1], bytes, size) != (ssize_t)size)
		abort();
	shutdown(sv[1], SHUT_WR);
	f.fd = sv[0];
	engine_call_sync(env->engine, stream_feed_on_engine, &f);
	close(sv[1]);
	free(bytes);
	fuzz_after(env);
}
