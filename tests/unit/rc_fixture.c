// SPDX-License-Identifier: MIT
/* The RC tests' shared fixture; see rc_fixture.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "rc_fixture.h"
#include "emu/counter_store.h"

uint64_t rc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

bool rc_read_within(int fd, void *buf, size_t n)
{
	uint64_t deadline = rc_now_ms() + RC_WAIT_MS;
	size_t got = 0;

	while (got < n) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t now = rc_now_ms();
		ssize_t r;

		if (now >= deadline || poll(&pfd, 1, (int)(deadline - now)) != 1)
			return false;
		r = read(fd, (char *)buf + got, n - got);
		if (r <= 0)
			return false;
		got += (size_t)r;
	}
	return true;
}

static void nap(void)
{
	struct timespec ts = { .tv_nsec = 100000 };	/* 0.1 ms */

	nanosleep(&ts, NULL);
}

const char *rc_state_name(enum ibv_qp_state s)
{
	static const char *const names[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };

	return (unsigned int)s < sizeof(names) / sizeof(names[0]) ? names[s] : "UNKNOWN";
}

struct ibv_context *rc_open_softrdma0(struct ibv_device **list)
{
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "softrdma0"))
			return ibv_open_device(list[i]);
	return NULL;
}

void rc_open(struct rc_env *env)
{
	memset(env, 0, sizeof(*env));
	env->page = (size_t)sysconf(_SC_PAGESIZE);
	env->list = ibv_get_device_list(NULL);
	assert_non_null(env->list);
	env->ctx = rc_open_softrdma0(env->list);
	assert_non_null(env->ctx);
	assert_int_equal(ibv_query_gid(env->ctx, 1, 0, &env->gid), 0);
	env->pd = ibv_alloc_pd(env->ctx);
	env->pd2 = ibv_alloc_pd(env->ctx);
	assert_non_null(env->pd);
	assert_non_null(env->pd2);
}

void rc_close(struct rc_env *env)
{
	if (env->ctx)
		rc_drain_async(env);
	rc_destroy_end(&env->a);
	rc_destroy_end(&env->b);
	rc_destroy_end(&env->c);
	for (int i = 0; i < RC_MAX_MRS; i++)
		if (env->mrs[i]) {
			ibv_dereg_mr(env->mrs[i]);
			env->mrs[i] = NULL;
		}
	if (env->channel) {
		ibv_destroy_comp_channel(env->channel);
		env->channel = NULL;
	}
	for (int i = 0; i < RC_MAX_BUFS; i++)
		if (env->bufs[i].map) {
			munmap(env->bufs[i].map, env->bufs[i].map_len);
			env->bufs[i].map = NULL;
		}
	if (env->pd2)
		ibv_dealloc_pd(env->pd2);
	if (env->pd)
		ibv_dealloc_pd(env->pd);
	env->pd = env->pd2 = NULL;
	if (env->ctx)
		ibv_close_device(env->ctx);
	env->ctx = NULL;
	if (env->list)
		ibv_free_device_list(env->list);
	env->list = NULL;
}

int rc_setup(void **state)
{
	struct rc_env *env = calloc(1, sizeof(*env));

	assert_non_null(env);
	rc_open(env);
	env->param = *state;
	*state = env;
	return 0;
}

int rc_teardown(void **state)
{
	struct rc_env *env = *state;

	rc_close(env);
	free(env);
	return 0;
}

pid_t rc_child;

int rc_teardown_child(void **state)
{
	if (rc_child > 0) {
		kill(rc_child, SIGKILL);
		waitpid(rc_child, NULL, 0);
		rc_child = 0;
	}
	return *state ? rc_teardown(state) : 0;
}

pid_t rc_fork_with_pipes(int *from_peer, int *to_peer)
{
	int up[2], down[2];	/* child to parent, parent to child */
	pid_t pid;

	assert_int_equal(pipe2(up, O_CLOEXEC), 0);
	assert_int_equal(pipe2(down, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		*from_peer = down[0];
		*to_peer = up[1];
	} else {
		close(up[1]);
		close(down[0]);
		*from_peer = up[0];
		*to_peer = down[1];
	}
	return pid;
}

void rc_default_opts(struct rc_qp_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->access = RC_ACCESS_ALL;
	o->max_rd_atomic = 4;
	o->max_dest_rd_atomic = 4;
	o->min_rnr_timer = 1;
	o->timeout = 14;
	o->retry_cnt = 7;
	o->rnr_retry = 7;
	o->path_mtu = IBV_MTU_1024;
	o->cap.max_send_wr = 64;
	o->cap.max_recv_wr = 64;
	o->cap.max_send_sge = 4;
	o->cap.max_recv_sge = 4;
	o->cap.max_inline_data = 64;
	o->cqe = 256;
}

void rc_create_end(struct rc_env *env, const struct rc_qp_opts *o, struct rc_end *end)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = o->cap,
		.sq_sig_all = o->sq_sig_all,
	};
	struct ibv_comp_channel *ch = NULL;

	if (o->use_channel) {
		if (!env->channel)
			env->channel = ibv_create_comp_channel(env->ctx);
		assert_non_null(env->channel);
		ch = env->channel;
	}
	end->scq = ibv_create_cq(env->ctx, o->cqe, NULL, ch, 0);
	assert_non_null(end->scq);
	end->rcq = o->one_cq ? end->scq : ibv_create_cq(env->ctx, o->cqe, NULL, ch, 0);
	assert_non_null(end->rcq);
	init.send_cq = end->scq;
	init.recv_cq = end->rcq;
	end->qp = ibv_create_qp(o->pd ? o->pd : env->pd, &init);
	assert_non_null(end->qp);
}

void rc_destroy_end(struct rc_end *end)
{
	if (end->qp)
		ibv_destroy_qp(end->qp);
	if (end->scq)
		ibv_destroy_cq(end->scq);
	if (end->rcq && end->rcq != end->scq)
		ibv_destroy_cq(end->rcq);
	memset(end, 0, sizeof(*end));
}

int rc_modify_init(struct ibv_qp *qp, const struct rc_qp_opts *o)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = o->access,
	};

	return ibv_modify_qp(qp, &attr,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

int rc_modify_rtr(struct ibv_qp *qp, const struct rc_qp_opts *o, uint32_t dest_qpn,
		  const union ibv_gid *dgid)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = o->path_mtu,
		.dest_qp_num = dest_qpn,
		.rq_psn = o->rq_psn,
		.max_dest_rd_atomic = o->max_dest_rd_atomic,
		.min_rnr_timer = o->min_rnr_timer,
		.ah_attr = {
			.is_global = 1,
			.port_num = 1,
			.grh = { .dgid = *dgid, .sgid_index = 0, .hop_limit = 1 },
		},
	};

	return ibv_modify_qp(qp, &attr,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

int rc_modify_rts(struct ibv_qp *qp, const struct rc_qp_opts *o)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTS,
		.timeout = o->timeout,
		.retry_cnt = o->retry_cnt,
		.rnr_retry = o->rnr_retry,
		.sq_psn = o->sq_psn,
		.max_rd_atomic = o->max_rd_atomic,
	};

	return ibv_modify_qp(qp, &attr,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

void rc_connect(struct ibv_qp *qp, const struct rc_qp_opts *o, uint32_t dest_qpn,
		const union ibv_gid *dgid)
{
	assert_int_equal(rc_modify_init(qp, o), 0);
	assert_int_equal(rc_modify_rtr(qp, o, dest_qpn, dgid), 0);
	assert_int_equal(rc_modify_rts(qp, o), 0);
	assert_int_equal(rc_state(qp), IBV_QPS_RTS);
}

void rc_create_uc_end(struct rc_env *env, struct rc_end *end, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_UC,
		.srq = srq,
		.cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 2,
			 .max_recv_sge = 2, .max_inline_data = 64 },
	};

	end->scq = ibv_create_cq(env->ctx, 128, NULL, NULL, 0);
	end->rcq = ibv_create_cq(env->ctx, 128, NULL, NULL, 0);
	assert_non_null(end->scq);
	assert_non_null(end->rcq);
	init.send_cq = end->scq;
	init.recv_cq = end->rcq;
	end->qp = ibv_create_qp(env->pd, &init);
	assert_non_null(end->qp);
}

/* The kernel's required masks for UC: no RNR timer, no read/atomic budget, no retries. */
void rc_connect_uc(struct rc_env *env, struct ibv_qp *qp, uint32_t dest_qpn, int access)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = access,
	};

	assert_int_equal(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				       IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	attr.path_mtu = IBV_MTU_1024;
	attr.dest_qp_num = dest_qpn;
	attr.rq_psn = 0x123;
	attr.ah_attr.is_global = 1;
	attr.ah_attr.port_num = 1;
	attr.ah_attr.grh.dgid = env->gid;
	attr.ah_attr.grh.hop_limit = 1;
	assert_int_equal(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN), 0);
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = 0x456;
	assert_int_equal(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
}

void rc_pair(struct rc_env *env, const struct rc_qp_opts *oa, const struct rc_qp_opts *ob)
{
	struct rc_qp_opts da, db;

	if (!oa) {
		rc_default_opts(&da);
		oa = &da;
	}
	if (!ob) {
		rc_default_opts(&db);
		ob = &db;
	}
	rc_create_end(env, oa, &env->a);
	rc_create_end(env, ob, &env->b);
	/* Both ends reach RTR before either sends, as an application exchanging QPNs would. */
	assert_int_equal(rc_modify_init(env->a.qp, oa), 0);
	assert_int_equal(rc_modify_init(env->b.qp, ob), 0);
	assert_int_equal(rc_modify_rtr(env->a.qp, oa, env->b.qp->qp_num, &env->gid), 0);
	assert_int_equal(rc_modify_rtr(env->b.qp, ob, env->a.qp->qp_num, &env->gid), 0);
	assert_int_equal(rc_modify_rts(env->a.qp, oa), 0);
	assert_int_equal(rc_modify_rts(env->b.qp, ob), 0);
}

void rc_pair_settle(struct rc_env *env)
{
	struct rc_end *from[2] = { &env->a, &env->b }, *to[2] = { &env->b, &env->a };

	for (int i = 0; i < 2; i++) {
		rc_post_recv(to[i]->qp, 97, NULL, 0);
		assert_int_equal(rc_post_rdma(from[i]->qp, 96, IBV_WR_SEND, NULL, 0, 0, 0), 0);
		rc_expect_wc(from[i]->scq, 96, IBV_WC_SUCCESS, NULL);
		rc_expect_wc(to[i]->rcq, 97, IBV_WC_SUCCESS, NULL);
	}
}

enum ibv_qp_state rc_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;

	memset(&attr, 0, sizeof(attr));
	assert_int_equal(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init), 0);
	return attr.qp_state;
}

void rc_wait_state(struct ibv_qp *qp, enum ibv_qp_state state)
{
	uint64_t deadline = rc_now_ms() + RC_WAIT_MS;
	enum ibv_qp_state s;

	while ((s = rc_state(qp)) != state && rc_now_ms() < deadline)
		nap();
	if (s != state)
		fail_msg("QP 0x%x is %s, want %s", qp->qp_num, rc_state_name(s),
			 rc_state_name(state));
}

struct rc_buf *rc_alloc(struct rc_env *env, size_t len)
{
	size_t cap = (len + env->page - 1) / env->page * env->page;
	struct rc_buf *b = NULL;

	if (!cap)
		cap = env->page;
	for (int i = 0; i < RC_MAX_BUFS && !b; i++)
		if (!env->bufs[i].map)
			b = &env->bufs[i];
	assert_non_null(b);
	b->map_len = cap + 2 * env->page;
	b->map = mmap(NULL, b->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		      0);
	assert_true(b->map != MAP_FAILED);
	/* Anything written just outside [p, p + cap) faults the process. */
	assert_int_equal(mprotect(b->map, env->page, PROT_NONE), 0);
	assert_int_equal(mprotect(b->map + env->page + cap, env->page, PROT_NONE), 0);
	b->p = b->map + env->page;
	b->cap = cap;
	return b;
}

static void track_mr(struct rc_env *env, struct ibv_mr *mr)
{
	for (int i = 0; i < RC_MAX_MRS; i++)
		if (!env->mrs[i]) {
			env->mrs[i] = mr;
			return;
		}
	fail_msg("more than %d MRs", RC_MAX_MRS);
}

struct ibv_mr *rc_reg(struct rc_env *env, struct ibv_pd *pd, void *addr, size_t len, int access)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, addr, len, access);

	if (!mr)
		fail_msg("ibv_reg_mr(%p, %zu, 0x%x): %s", addr, len, access, strerror(errno));
	track_mr(env, mr);
	return mr;
}

struct ibv_mr *rc_reg_iova(struct rc_env *env, struct ibv_pd *pd, void *addr, size_t len,
			   uint64_t iova, int access)
{
	struct ibv_mr *mr = ibv_reg_mr_iova(pd, addr, len, iova, access);

	if (!mr)
		fail_msg("ibv_reg_mr_iova(%p, %zu, 0x%llx, 0x%x): %s", addr, len,
			 (unsigned long long)iova, access, strerror(errno));
	track_mr(env, mr);
	return mr;
}

void rc_dereg(struct rc_env *env, struct ibv_mr *mr)
{
	for (int i = 0; i < RC_MAX_MRS; i++)
		if (env->mrs[i] == mr)
			env->mrs[i] = NULL;
	assert_int_equal(ibv_dereg_mr(mr), 0);
}

uint8_t rc_pattern_byte(size_t i, uint8_t seed)
{
	uint32_t x = (uint32_t)i * 2654435761u + seed * 40503u;

	return (uint8_t)(x >> 13 ^ x >> 24 ^ seed);
}

void rc_fill(void *p, size_t n, uint8_t seed)
{
	uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		b[i] = rc_pattern_byte(i, seed);
}

void rc_expect_pattern(const void *p, size_t n, uint8_t seed, const char *what)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i] != rc_pattern_byte(i, seed))
			fail_msg("%s: byte %zu of %zu is 0x%02x, want 0x%02x", what, i, n, b[i],
				 rc_pattern_byte(i, seed));
}

void rc_expect_pattern_range(const void *base, size_t from, size_t to, uint8_t seed,
			     const char *what)
{
	const uint8_t *b = base;

	for (size_t i = from; i < to; i++)
		if (b[i] != rc_pattern_byte(i, seed))
			fail_msg("%s: byte %zu (of [%zu, %zu)) is 0x%02x, want 0x%02x", what, i,
				 from, to, b[i], rc_pattern_byte(i, seed));
}

void rc_expect_bytes(const void *got, const void *want, size_t n, const char *what)
{
	const uint8_t *g = got, *w = want;

	for (size_t i = 0; i < n; i++)
		if (g[i] != w[i])
			fail_msg("%s: byte %zu of %zu is 0x%02x, want 0x%02x", what, i, n, g[i],
				 w[i]);
}

void rc_expect_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status status,
		  struct ibv_wc *out)
{
	uint64_t deadline = rc_now_ms() + RC_WAIT_MS;
	struct ibv_wc wc;
	int n;

	memset(&wc, 0, sizeof(wc));
	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0 && rc_now_ms() < deadline)
		nap();
	if (n < 0)
		fail_msg("ibv_poll_cq: %d", n);
	if (n == 0)
		fail_msg("no completion within %d ms (want wr_id %llu, %s)", RC_WAIT_MS,
			 (unsigned long long)wr_id, ibv_wc_status_str(status));
	if (wc.wr_id != wr_id || wc.status != status)
		fail_msg("completion wr_id %llu status %s (vendor_err %u), want wr_id %llu %s",
			 (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
			 wc.vendor_err, (unsigned long long)wr_id, ibv_wc_status_str(status));
	if (out)
		*out = wc;
}

void rc_expect_no_wc(struct ibv_cq *cq, int ms)
{
	uint64_t deadline = rc_now_ms() + (uint64_t)ms;
	struct ibv_wc wc;

	do {
		int n = ibv_poll_cq(cq, 1, &wc);

		if (n)
			fail_msg("unexpected completion: wr_id %llu status %s opcode %d (n %d)",
				 (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
				 wc.opcode, n);
		nap();
	} while (rc_now_ms() < deadline);
}

int rc_get_async(struct rc_env *env, struct ibv_async_event *ev, int ms)
{
	struct pollfd pfd = { .fd = env->ctx->async_fd, .events = POLLIN };
	int n;

	do
		n = poll(&pfd, 1, ms);
	while (n < 0 && errno == EINTR);
	assert_true(n >= 0);
	if (n == 0)
		return 0;
	assert_int_equal(ibv_get_async_event(env->ctx, ev), 0);
	return 1;
}

static void expect_async(struct rc_env *env, enum ibv_event_type type, void *element, bool is_qp)
{
	struct ibv_async_event ev;
	void *got;

	if (!rc_get_async(env, &ev, RC_WAIT_MS))
		fail_msg("no async event within %d ms, want %s", RC_WAIT_MS,
			 ibv_event_type_str(type));
	got = is_qp ? (void *)ev.element.qp : (void *)ev.element.cq;
	ibv_ack_async_event(&ev);
	if (ev.event_type != type || got != element)
		fail_msg("async event %s for %p, want %s for %p", ibv_event_type_str(ev.event_type),
			 got, ibv_event_type_str(type), element);
}

void rc_expect_async_qp(struct rc_env *env, enum ibv_event_type type, struct ibv_qp *qp)
{
	expect_async(env, type, qp, true);
}

void rc_expect_async_cq(struct rc_env *env, enum ibv_event_type type, struct ibv_cq *cq)
{
	expect_async(env, type, cq, false);
}

void rc_expect_no_async(struct rc_env *env, int ms)
{
	struct ibv_async_event ev;

	if (rc_get_async(env, &ev, ms)) {
		ibv_ack_async_event(&ev);
		fail_msg("unexpected async event %s", ibv_event_type_str(ev.event_type));
	}
}

void rc_drain_async(struct rc_env *env)
{
	struct pollfd pfd = { .fd = env->ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;

	/* Not rc_get_async(): this also runs from the teardown of a failed test. */
	while (poll(&pfd, 1, 0) == 1 && !ibv_get_async_event(env->ctx, &ev))
		ibv_ack_async_event(&ev);
}

void rc_post_recv(struct ibv_qp *qp, uint64_t wr_id, struct ibv_sge *sge, int num_sge)
{
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = sge, .num_sge = num_sge };
	struct ibv_recv_wr *bad = NULL;

	assert_int_equal(ibv_post_recv(qp, &wr, &bad), 0);
}

struct ibv_send_wr rc_signaled_wr(uint64_t wr_id, enum ibv_wr_opcode op, struct ibv_sge *sge,
				  int num_sge)
{
	return (struct ibv_send_wr){
		.wr_id = wr_id,
		.sg_list = sge,
		.num_sge = num_sge,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	};
}

int rc_post_rdma_imm(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op,
		     struct ibv_sge *sge, int num_sge, uint64_t remote_addr, uint32_t rkey,
		     __be32 imm_data)
{
	struct ibv_send_wr wr = rc_signaled_wr(wr_id, op, sge, num_sge);
	struct ibv_send_wr *bad = NULL;

	wr.imm_data = imm_data;
	wr.wr.rdma.remote_addr = remote_addr;
	wr.wr.rdma.rkey = rkey;

	return ibv_post_send(qp, &wr, &bad);
}

int rc_post_rdma(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op, struct ibv_sge *sge,
		 int num_sge, uint64_t remote_addr, uint32_t rkey)
{
	return rc_post_rdma_imm(qp, wr_id, op, sge, num_sge, remote_addr, rkey, 0);
}

void rc_expect_write_lands(struct rc_env *env, uint64_t wr_id, void *src,
			   const struct ibv_mr *src_mr, uint64_t remote, uint32_t rkey,
			   const void *landing, uint32_t len, uint8_t seed, const char *what)
{
	struct ibv_sge sge = rc_sge(src, len, src_mr);

	rc_fill(src, len, seed);
	assert_int_equal(rc_post_rdma(env->a.qp, wr_id, IBV_WR_RDMA_WRITE, &sge, 1, remote, rkey),
			 0);
	rc_expect_wc(env->a.scq, wr_id, IBV_WC_SUCCESS, NULL);
	rc_expect_pattern(landing, len, seed, what);
}

int rc_post_atomic(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op,
		   struct ibv_sge *sge, uint64_t remote_addr, uint32_t rkey, uint64_t compare_add,
		   uint64_t swap)
{
	struct ibv_send_wr wr = rc_signaled_wr(wr_id, op, sge, 1);
	struct ibv_send_wr *bad = NULL;

	wr.wr.atomic.remote_addr = remote_addr;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = compare_add;
	wr.wr.atomic.swap = swap;

	return ibv_post_send(qp, &wr, &bad);
}

/*
 * As `softrdma counters` does: asks the run's processes to publish (this one answers
 * through its engine's publisher) and reads this process's own record once it answered.
 */
void rc_scene_init(struct rc_scene *s, void **state, size_t len, int b_access,
		   const struct rc_qp_opts *ob)
{
	struct ibv_sge ss, rs;

	s->env = *state;
	s->len = len;
	s->a_seed = 0x31;
	s->b_seed = 0x7c;
	rc_pair(s->env, NULL, ob);
	s->a = rc_alloc(s->env, 3 * len);
	s->b = rc_alloc(s->env, 3 * len);
	s->amr = rc_reg(s->env, s->env->pd, s->a->p, 3 * len, RC_ACCESS_ALL);
	s->bmr = rc_reg(s->env, s->env->pd, s->b->p, 3 * len, b_access);
	ss = rc_sge(s->a->p, 8, s->amr);
	rs = rc_sge(s->b->p, 8, s->bmr);
	rc_post_recv(s->env->b.qp, 98, &rs, 1);
	assert_int_equal(rc_post_rdma(s->env->a.qp, 99, IBV_WR_SEND, &ss, 1, 0, 0), 0);
	rc_expect_wc(s->env->a.scq, 99, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(s->env->b.rcq, 98, IBV_WC_SUCCESS, NULL);
	rc_fill(s->a->p, 3 * len, s->a_seed);
	rc_fill(s->b->p, 3 * len, s->b_seed);
}

int rc_scene_write(struct rc_scene *s, uint64_t wr_id, uint64_t offset, uint32_t n,
		   uint32_t rkey)
{
	struct ibv_sge sge = rc_sge(s->a->p, n, s->amr);

	return rc_post_rdma(s->env->a.qp, wr_id, IBV_WR_RDMA_WRITE, &sge, 1,
			    (uintptr_t)s->b->p + offset, rkey);
}

void rc_scene_expect_b_untouched(const struct rc_scene *s)
{
	rc_expect_pattern(s->b->p, 3 * s->len, s->b_seed, "B's memory");
}

void rc_scene_expect_middle_write(struct rc_scene *s)
{
	size_t len = s->len;

	assert_int_equal(rc_scene_write(s, 1, len, (uint32_t)len, s->bmr->rkey), 0);
	rc_expect_wc(s->env->a.scq, 1, IBV_WC_SUCCESS, NULL);
	rc_expect_pattern(s->b->p, len, s->b_seed, "B before the target");
	rc_expect_bytes(s->b->p + len, s->a->p, len, "the target");
	rc_expect_pattern_range(s->b->p, 2 * len, 3 * len, s->b_seed, "B after the target");
}

uint64_t rc_port_counter(const char *name)
{
	const char *root = getenv("SYSFS_PATH");
	char why[RUN_DIR_WHY_LEN], me[64];
	struct store_record r;
	uint64_t stamp, value = 0;
	struct store s;
	int id = -1;

	assert_non_null(root);
	for (int i = 0; i < EMU_CNT_MAX; i++)
		if (!strcmp(emu_counter_names[i], name))
			id = i;
	if (id < 0)
		fail_msg("no port counter named %s", name);
	if (store_open(&s, root, why))
		fail_msg("the run's counter store: %s", why);
	snprintf(me, sizeof(me), "%ld-%llu", (long)getpid(), store_proc_start(getpid()));
	assert_int_equal(store_request_refresh(&s, &stamp, why), 0);
	for (int waited = 0;; waited += 5) {
		if (!store_read_record(&s, me, false, &r) && r.answered >= stamp) {
			value = r.v[id];
			break;
		}
		if (waited > 10000)
			fail_msg("this process did not publish its counters within 10 s");
		usleep(5000);
	}
	store_close(&s);
	return value;
}

struct ibv_sge rc_sge(void *p, uint32_t len, const struct ibv_mr *mr)
{
	struct ibv_sge sge = { .addr = (uintptr_t)p, .length = len, .lkey = mr->lkey };

	return sge;
}
