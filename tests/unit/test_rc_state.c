// SPDX-License-Identifier: MIT
/*
 * The RC QP state machine through the real ibv_modify_qp/ibv_query_qp (semantics.md,
 * "Queue pairs: states and modify_qp"), posting before RTS, reuse after RESET, and a
 * requester whose peer process is killed. Run under `softrdma run` (ctest does).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <infiniband/verbs.h>

#include "rc_fixture.h"
#include "case_table.h"

#define INIT_MASK	(IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define RTR_MASK	(IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |	\
			 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define RTS_MASK	(IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |		\
			 IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)

/* Every attribute a RESET -> RTS walk needs, for a QP whose peer is dest_qpn. */
static void full_attr(struct rc_env *env, struct ibv_qp_attr *attr, enum ibv_qp_state state,
		      uint32_t dest_qpn)
{
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = state;
	attr->pkey_index = 0;
	attr->port_num = 1;
	attr->qp_access_flags = RC_ACCESS_ALL;
	attr->path_mtu = IBV_MTU_1024;
	attr->dest_qp_num = dest_qpn;
	attr->rq_psn = 0;
	attr->max_dest_rd_atomic = 4;
	attr->min_rnr_timer = 1;
	attr->ah_attr.is_global = 1;
	attr->ah_attr.port_num = 1;
	attr->ah_attr.grh.dgid = env->gid;
	attr->ah_attr.grh.sgid_index = 0;
	attr->ah_attr.grh.hop_limit = 1;
	attr->timeout = 14;
	attr->retry_cnt = 7;
	attr->rnr_retry = 7;
	attr->sq_psn = 0;
	attr->max_rd_atomic = 4;
}

static struct ibv_qp_attr query(struct ibv_qp *qp, struct ibv_qp_init_attr *init)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr dummy;

	memset(&attr, 0, sizeof(attr));
	assert_int_equal(ibv_query_qp(qp, &attr, IBV_QP_STATE | IBV_QP_CUR_STATE |
				      IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS |
				      IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				      IBV_QP_MIN_RNR_TIMER | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC |
				      IBV_QP_CAP, init ? init : &dummy), 0);
	return attr;
}

/* Moves qp from RESET up to state (INIT, RTR or RTS) with the exact masks. */
static void walk_to(struct rc_env *env, struct ibv_qp *qp, enum ibv_qp_state state,
		    uint32_t dest_qpn)
{
	struct ibv_qp_attr attr;

	full_attr(env, &attr, IBV_QPS_INIT, dest_qpn);
	assert_int_equal(ibv_modify_qp(qp, &attr, INIT_MASK), 0);
	if (state == IBV_QPS_INIT)
		return;
	attr.qp_state = IBV_QPS_RTR;
	assert_int_equal(ibv_modify_qp(qp, &attr, RTR_MASK), 0);
	if (state == IBV_QPS_RTR)
		return;
	attr.qp_state = IBV_QPS_RTS;
	assert_int_equal(ibv_modify_qp(qp, &attr, RTS_MASK), 0);
}

/* Two QPs in RESET. */
static struct rc_env *two_qps(void **state)
{
	struct rc_env *env = *state;
	struct rc_qp_opts o;

	rc_default_opts(&o);
	rc_create_end(env, &o, &env->a);
	rc_create_end(env, &o, &env->b);
	assert_int_equal(rc_state(env->a.qp), IBV_QPS_RESET);
	return env;
}

/* A SEND from a to b arrives, and b answers with one back: the pair works both ways. */
static void expect_pair_works(struct rc_env *env, uint64_t tag)
{
	struct rc_buf *buf = rc_alloc(env, env->page);
	struct ibv_mr *mr = rc_reg(env, env->pd, buf->p, buf->cap, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge rs = { (uintptr_t)buf->p + 1024, 64, mr->lkey };
	struct ibv_sge ss = { (uintptr_t)buf->p, 64, mr->lkey };
	struct ibv_wc wc;

	rc_fill(buf->p, 64, (uint8_t)tag);
	rc_post_recv(env->b.qp, tag, &rs, 1);
	assert_int_equal(rc_post_rdma(env->a.qp, tag + 1, IBV_WR_SEND, &ss, 1, 0, 0), 0);
	rc_expect_wc(env->b.rcq, tag, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.byte_len, 64);
	rc_expect_wc(env->a.scq, tag + 1, IBV_WC_SUCCESS, NULL);
	rc_expect_pattern(buf->p + 1024, 64, (uint8_t)tag, "received data");

	rs.addr += 1024;
	rc_post_recv(env->a.qp, tag + 2, &rs, 1);
	assert_int_equal(rc_post_rdma(env->b.qp, tag + 3, IBV_WR_SEND, &ss, 1, 0, 0), 0);
	rc_expect_wc(env->a.rcq, tag + 2, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(env->b.scq, tag + 3, IBV_WC_SUCCESS, NULL);
	rc_expect_pattern(buf->p + 2048, 64, (uint8_t)tag, "data received back");
}

static void test_legal_path_with_exact_masks(void **state)
{
	struct rc_env *env = two_qps(state);
	struct ibv_qp *qps[2] = { env->a.qp, env->b.qp };
	struct ibv_qp_attr attr;

	for (int i = 0; i < 2; i++) {
		full_attr(env, &attr, IBV_QPS_INIT, qps[!i]->qp_num);
		assert_int_equal(ibv_modify_qp(qps[i], &attr, INIT_MASK), 0);
		assert_int_equal(rc_state(qps[i]), IBV_QPS_INIT);
	}
	for (int i = 0; i < 2; i++) {
		full_attr(env, &attr, IBV_QPS_RTR, qps[!i]->qp_num);
		assert_int_equal(ibv_modify_qp(qps[i], &attr, RTR_MASK), 0);
		assert_int_equal(rc_state(qps[i]), IBV_QPS_RTR);
	}
	for (int i = 0; i < 2; i++) {
		full_attr(env, &attr, IBV_QPS_RTS, qps[!i]->qp_num);
		assert_int_equal(ibv_modify_qp(qps[i], &attr, RTS_MASK), 0);
		assert_int_equal(rc_state(qps[i]), IBV_QPS_RTS);
	}
	expect_pair_works(env, 10);
}

/* Each required bit left out in turn: EINVAL, and neither the state nor anything else moves. */
static void missing_bits(struct rc_env *env, struct ibv_qp *qp, enum ibv_qp_state from,
			 enum ibv_qp_state to, int mask)
{
	for (int bit = 1; bit <= IBV_QP_RATE_LIMIT; bit <<= 1) {
		struct ibv_qp_attr attr, before, after;

		if (!(mask & bit) || bit == IBV_QP_STATE)
			continue;
		before = query(qp, NULL);
		full_attr(env, &attr, to, 0x1234);
		attr.rq_psn = 0x777;
		attr.sq_psn = 0x888;
		errno = 0;
		if (ibv_modify_qp(qp, &attr, mask & ~bit) != EINVAL)
			fail_msg("%s -> %s without mask bit 0x%x: not EINVAL", rc_state_name(from),
				 rc_state_name(to), bit);
		after = query(qp, NULL);
		assert_int_equal(after.qp_state, from);
		assert_int_equal(after.dest_qp_num, before.dest_qp_num);
		assert_int_equal(after.rq_psn, before.rq_psn);
		assert_int_equal(after.sq_psn, before.sq_psn);
		assert_int_equal(after.qp_access_flags, before.qp_access_flags);
	}
	/* Without IBV_QP_STATE it is an attribute change in the current state: refused too. */
	if (from != to) {
		struct ibv_qp_attr attr;

		full_attr(env, &attr, to, 0x1234);
		assert_int_equal(ibv_modify_qp(qp, &attr, mask & ~IBV_QP_STATE), EINVAL);
		assert_int_equal(rc_state(qp), from);
	}
}

static void test_init_requires_its_mask(void **state)
{
	struct rc_env *env = two_qps(state);

	missing_bits(env, env->a.qp, IBV_QPS_RESET, IBV_QPS_INIT, INIT_MASK);
}

static void test_rtr_requires_its_mask(void **state)
{
	struct rc_env *env = two_qps(state);

	walk_to(env, env->a.qp, IBV_QPS_INIT, env->b.qp->qp_num);
	missing_bits(env, env->a.qp, IBV_QPS_INIT, IBV_QPS_RTR, RTR_MASK);
}

static void test_rts_requires_its_mask(void **state)
{
	struct rc_env *env = two_qps(state);

	walk_to(env, env->a.qp, IBV_QPS_RTR, env->b.qp->qp_num);
	missing_bits(env, env->a.qp, IBV_QPS_RTR, IBV_QPS_RTS, RTS_MASK);
}

/* An attribute the transition may not carry: EINVAL, nothing applied. */
static void test_extra_mask_bits_refused(void **state)
{
	struct rc_env *env = two_qps(state);
	struct ibv_qp_attr attr;

	full_attr(env, &attr, IBV_QPS_INIT, 0x1234);
	assert_int_equal(ibv_modify_qp(env->a.qp, &attr, INIT_MASK | IBV_QP_DEST_QPN), EINVAL);
	assert_int_equal(ibv_modify_qp(env->a.qp, &attr, INIT_MASK | IBV_QP_AV), EINVAL);
	assert_int_equal(ibv_modify_qp(env->a.qp, &attr, INIT_MASK | IBV_QP_SQ_PSN), EINVAL);
	assert_int_equal(rc_state(env->a.qp), IBV_QPS_RESET);
	assert_int_equal(query(env->a.qp, NULL).dest_qp_num, 0);

	walk_to(env, env->a.qp, IBV_QPS_RTR, env->b.qp->qp_num);
	full_attr(env, &attr, IBV_QPS_RTS, env->b.qp->qp_num);
	assert_int_equal(ibv_modify_qp(env->a.qp, &attr, RTS_MASK | IBV_QP_PATH_MTU), EINVAL);
	assert_int_equal(ibv_modify_qp(env->a.qp, &attr, RTS_MASK | IBV_QP_RQ_PSN), EINVAL);
	assert_int_equal(rc_state(env->a.qp), IBV_QPS_RTR);
}

/* Each target refused from `from`, even with every attribute it could want. */
static void illegal_from(struct rc_env *env, struct ibv_qp *qp, enum ibv_qp_state from,
			 const enum ibv_qp_state *targets, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_qp_attr attr;
		int masks[] = { IBV_QP_STATE, INIT_MASK, RTR_MASK, RTS_MASK };

		full_attr(env, &attr, targets[i], env->b.qp->qp_num);
		for (size_t j = 0; j < sizeof(masks) / sizeof(masks[0]); j++) {
			if (ibv_modify_qp(qp, &attr, masks[j]) != EINVAL)
				fail_msg("%s -> %s with mask 0x%x: not EINVAL", rc_state_name(from),
					 rc_state_name(targets[i]), masks[j]);
			assert_int_equal(rc_state(qp), from);
		}
	}
}

/*
 * The targets refused from each state. A list ends at RESET, which every state may go to, so
 * it is never a target here.
 */
struct illegal_case {
	const char *name;
	enum ibv_qp_state from;
	enum ibv_qp_state targets[6];
};

static const struct illegal_case illegal[] = {
	{ "test_illegal_transitions_from_reset", IBV_QPS_RESET,
	  { IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD, IBV_QPS_SQE, IBV_QPS_ERR } },
	{ "test_illegal_transitions_from_init", IBV_QPS_INIT,
	  { IBV_QPS_RTS, IBV_QPS_SQD, IBV_QPS_SQE } },
	{ "test_illegal_transitions_from_rtr", IBV_QPS_RTR,
	  { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_SQD, IBV_QPS_SQE } },
	{ "test_illegal_transitions_from_rts", IBV_QPS_RTS,
	  { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_SQE } },
	{ "test_illegal_transitions_from_err", IBV_QPS_ERR,
	  { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD, IBV_QPS_SQE } },
};

static void run_illegal(void **state)
{
	struct rc_env *env = two_qps(state);
	const struct illegal_case *c = env->param;
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
	int n = 0;

	if (c->from == IBV_QPS_ERR) {
		walk_to(env, env->a.qp, IBV_QPS_INIT, env->b.qp->qp_num);
		assert_int_equal(ibv_modify_qp(env->a.qp, &err, IBV_QP_STATE), 0);
	} else if (c->from != IBV_QPS_RESET) {
		walk_to(env, env->a.qp, c->from, env->b.qp->qp_num);
	}
	while (n < (int)(sizeof(c->targets) / sizeof(c->targets[0])) &&
	       c->targets[n] != IBV_QPS_RESET)
		n++;
	illegal_from(env, env->a.qp, c->from, c->targets, n);
}

/* As rxe: the send queue opens at RTS; before that a post is EINVAL and queues nothing. */
static void expect_post_send_einval(struct ibv_qp *qp)
{
	struct ibv_send_wr wr = { .wr_id = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad = NULL;
	enum ibv_qp_state s = rc_state(qp);

	if (ibv_post_send(qp, &wr, &bad) != EINVAL)
		fail_msg("post_send in %s: not EINVAL", rc_state_name(s));
	assert_ptr_equal(bad, &wr);
}

static void test_post_send_before_rts_einval(void **state)
{
	struct rc_env *env = two_qps(state);
	struct ibv_send_wr wr = { .wr_id = 99, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad = NULL;
	struct ibv_qp_attr attr;

	expect_post_send_einval(env->a.qp);		/* RESET */
	full_attr(env, &attr, IBV_QPS_INIT, env->b.qp->qp_num);
	assert_int_equal(ibv_modify_qp(env->a.qp, &attr, INIT_MASK), 0);
	expect_post_send_einval(env->a.qp);		/* INIT */
	attr.qp_state = IBV_QPS_RTR;
	assert_int_equal(ibv_modify_qp(env->a.qp, &attr, RTR_MASK), 0);
	expect_post_send_einval(env->a.qp);		/* RTR */

	/* Nothing of it was queued: at RTS only the new WR completes. */
	walk_to(env, env->b.qp, IBV_QPS_RTS, env->a.qp->qp_num);
	attr.qp_state = IBV_QPS_RTS;
	assert_int_equal(ibv_modify_qp(env->a.qp, &attr, RTS_MASK), 0);
	assert_int_equal(ibv_post_send(env->a.qp, &wr, &bad), 0);
	rc_expect_wc(env->a.scq, 99, IBV_WC_SUCCESS, NULL);
	rc_expect_no_wc(env->a.scq, RC_QUIET_MS);
}

/* A receive posted in RESET is refused (as rxe); from INIT on it is taken and used. */
static void test_post_recv_in_reset_einval(void **state)
{
	struct rc_env *env = two_qps(state);
	struct rc_buf *buf = rc_alloc(env, 4096);
	struct ibv_mr *mr = rc_reg(env, env->pd, buf->p, 4096, RC_ACCESS_ALL);
	struct ibv_sge sge = rc_sge(buf->p, 64, mr);
	struct ibv_recv_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;

	assert_int_equal(ibv_post_recv(env->b.qp, &wr, &bad), EINVAL);
	walk_to(env, env->b.qp, IBV_QPS_INIT, env->a.qp->qp_num);
	assert_int_equal(ibv_post_recv(env->b.qp, &wr, &bad), 0);
	walk_to(env, env->b.qp, IBV_QPS_RTS, env->a.qp->qp_num);
	walk_to(env, env->a.qp, IBV_QPS_RTS, env->b.qp->qp_num);
	sge = rc_sge(buf->p + 1024, 64, mr);
	assert_int_equal(rc_post_rdma(env->a.qp, 8, IBV_WR_SEND, &sge, 1, 0, 0), 0);
	rc_expect_wc(env->a.scq, 8, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(env->b.rcq, 7, IBV_WC_SUCCESS, NULL);	/* the one posted in INIT */
}

static void to_reset(struct ibv_qp *qp)
{
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };

	assert_int_equal(ibv_modify_qp(qp, &reset, IBV_QP_STATE), 0);
	assert_int_equal(rc_state(qp), IBV_QPS_RESET);
}

static void reconnect(struct rc_env *env)
{
	walk_to(env, env->a.qp, IBV_QPS_RTR, env->b.qp->qp_num);
	walk_to(env, env->b.qp, IBV_QPS_RTR, env->a.qp->qp_num);
	{
		struct ibv_qp_attr attr;

		full_attr(env, &attr, IBV_QPS_RTS, 0);
		assert_int_equal(ibv_modify_qp(env->a.qp, &attr, RTS_MASK), 0);
		assert_int_equal(ibv_modify_qp(env->b.qp, &attr, RTS_MASK), 0);
	}
}

/* RTS -> RESET empties the queues without completions; the QPs then connect again. */
static void test_reset_from_rts_then_reuse(void **state)
{
	struct rc_env *env = two_qps(state);
	struct ibv_sge none = { 0 };

	reconnect(env);
	expect_pair_works(env, 10);
	rc_post_recv(env->b.qp, 50, &none, 1);
	rc_post_recv(env->a.qp, 51, &none, 1);
	to_reset(env->a.qp);
	to_reset(env->b.qp);
	rc_expect_no_wc(env->a.rcq, RC_QUIET_MS);
	rc_expect_no_wc(env->b.rcq, 0);
	reconnect(env);
	expect_pair_works(env, 20);
	rc_expect_no_async(env, 0);
}

static void test_reset_from_err_then_reuse(void **state)
{
	struct rc_env *env = two_qps(state);
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };

	reconnect(env);
	expect_pair_works(env, 10);
	assert_int_equal(ibv_modify_qp(env->a.qp, &err, IBV_QP_STATE), 0);
	assert_int_equal(ibv_modify_qp(env->b.qp, &err, IBV_QP_STATE), 0);
	to_reset(env->a.qp);
	to_reset(env->b.qp);
	reconnect(env);
	expect_pair_works(env, 20);
}

static void test_reset_from_init_and_rtr(void **state)
{
	struct rc_env *env = two_qps(state);

	to_reset(env->a.qp);	/* RESET -> RESET */
	walk_to(env, env->a.qp, IBV_QPS_INIT, env->b.qp->qp_num);
	to_reset(env->a.qp);
	walk_to(env, env->a.qp, IBV_QPS_RTR, env->b.qp->qp_num);
	to_reset(env->a.qp);
	/* RESET forgot the attributes. */
	assert_int_equal(query(env->a.qp, NULL).dest_qp_num, 0);
	reconnect(env);
	expect_pair_works(env, 30);
}

/* Non-default values everywhere, and PSNs on both sides that are not 0. */
static void test_query_reports_what_was_set(void **state)
{
	struct rc_env *env = *state;
	struct rc_qp_opts oa, ob;
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr q;

	rc_default_opts(&oa);
	oa.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
	oa.path_mtu = IBV_MTU_2048;
	oa.rq_psn = 0x123456;
	oa.sq_psn = 0xabcdef;
	oa.max_rd_atomic = 3;
	oa.max_dest_rd_atomic = 5;
	oa.min_rnr_timer = 12;
	oa.timeout = 17;
	oa.retry_cnt = 5;
	oa.rnr_retry = 6;
	oa.cap.max_send_wr = 33;
	oa.cap.max_recv_wr = 17;
	oa.cap.max_send_sge = 3;
	oa.cap.max_recv_sge = 2;
	oa.cap.max_inline_data = 100;
	oa.sq_sig_all = 1;
	rc_default_opts(&ob);
	ob.rq_psn = oa.sq_psn;
	ob.sq_psn = oa.rq_psn;
	rc_pair(env, &oa, &ob);

	q = query(env->a.qp, &init);
	assert_int_equal(q.qp_state, IBV_QPS_RTS);
	assert_int_equal(q.cur_qp_state, IBV_QPS_RTS);
	assert_int_equal(q.qp_access_flags, oa.access);
	assert_int_equal(q.pkey_index, 0);
	assert_int_equal(q.port_num, 1);
	assert_int_equal(q.path_mtu, IBV_MTU_2048);
	assert_int_equal(q.dest_qp_num, env->b.qp->qp_num);
	assert_int_equal(q.rq_psn, 0x123456);
	assert_int_equal(q.sq_psn, 0xabcdef);
	assert_int_equal(q.max_rd_atomic, 3);
	assert_int_equal(q.max_dest_rd_atomic, 5);
	assert_int_equal(q.min_rnr_timer, 12);
	assert_int_equal(q.timeout, 17);
	assert_int_equal(q.retry_cnt, 5);
	assert_int_equal(q.rnr_retry, 6);
	assert_int_equal(q.ah_attr.is_global, 1);
	assert_int_equal(q.ah_attr.port_num, 1);
	assert_int_equal(q.ah_attr.grh.sgid_index, 0);
	assert_memory_equal(q.ah_attr.grh.dgid.raw, env->gid.raw, 16);
	assert_true(q.cap.max_send_wr >= 33 && q.cap.max_recv_wr >= 17);
	assert_true(q.cap.max_send_sge >= 3 && q.cap.max_recv_sge >= 2);
	assert_true(q.cap.max_inline_data >= 100);
	assert_int_equal(init.qp_type, IBV_QPT_RC);
	assert_int_equal(init.sq_sig_all, 1);
	assert_ptr_equal(init.send_cq, env->a.scq);
	assert_ptr_equal(init.recv_cq, env->a.rcq);
	assert_true(init.cap.max_send_wr >= 33 && init.cap.max_inline_data >= 100);
	/* The PSNs really are the ones on the wire: traffic flows both ways. */
	expect_pair_works(env, 40);
}

static void test_psn_truncated_to_24_bits(void **state)
{
	struct rc_env *env = *state;
	struct rc_qp_opts oa, ob;

	rc_default_opts(&oa);
	rc_default_opts(&ob);
	oa.sq_psn = ob.rq_psn = 0x7f000010;
	oa.rq_psn = ob.sq_psn = 0xff000020;
	rc_pair(env, &oa, &ob);
	assert_int_equal(query(env->a.qp, NULL).sq_psn, 0x000010);
	assert_int_equal(query(env->a.qp, NULL).rq_psn, 0x000020);
	expect_pair_works(env, 50);
}

/* ---- A peer that is stopped, or killed ---- */

struct peer_info {
	uint32_t qpn;
	union ibv_gid gid;
	uint64_t addr;
	uint32_t rkey;
};

/*
 * The child: its own device, one QP connected to the parent's, one MR the parent may
 * write. It never returns; cmocka is not used here (a failed assert would run the rest of
 * the tests in the child).
 */
static void child_main(int to_parent, int from_parent)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct peer_info me = { 0 }, parent;
	struct ibv_qp_init_attr init = { .qp_type = IBV_QPT_RC,
					 .cap = { .max_send_wr = 4, .max_recv_wr = 4,
						  .max_send_sge = 1, .max_recv_sge = 1 } };
	struct rc_qp_opts o;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	static uint64_t buf[512];
	struct ibv_sge recv_sge;
	struct ibv_recv_wr recv = { .wr_id = 1, .sg_list = &recv_sge, .num_sge = 1 }, *bad;
	char ready = 1, c;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	alarm(60);
	rc_default_opts(&o);
	list = ibv_get_device_list(NULL);
	ctx = rc_open_softrdma0(list);
	if (!ctx || ibv_query_gid(ctx, 1, 0, &me.gid))
		_exit(2);
	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	init.send_cq = init.recv_cq = cq;
	qp = cq ? ibv_create_qp(pd, &init) : NULL;
	mr = qp ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE |
			     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ) : NULL;
	if (!mr)
		_exit(3);
	me.qpn = qp->qp_num;
	me.addr = (uintptr_t)buf;
	me.rkey = mr->rkey;
	if (write(to_parent, &me, sizeof(me)) != sizeof(me) ||
	    !rc_read_within(from_parent, &parent, sizeof(parent)))
		_exit(4);
	/* One receive, for a SEND, in the second half of buf. */
	recv_sge = (struct ibv_sge){ .addr = (uintptr_t)&buf[256], .length = 2048,
				     .lkey = mr->lkey };
	if (rc_modify_init(qp, &o) || ibv_post_recv(qp, &recv, &bad) ||
	    rc_modify_rtr(qp, &o, parent.qpn, &parent.gid) || rc_modify_rts(qp, &o))
		ready = 0;
	if (write(to_parent, &ready, 1) != 1)
		_exit(5);
	/* Wait to be killed (or for the parent to go away). */
	while (read(from_parent, &c, 1) > 0)
		;
	_exit(0);
}

/*
 * Forks the child (first: it must not inherit an engine thread or a context), then opens
 * the device here and connects env->a to the child's QP with timeout and retry_cnt.
 * *to_child: the pipe whose closing lets the child exit.
 */
static struct rc_env *connect_child(void **state, uint8_t timeout, uint8_t retry_cnt,
				    struct peer_info *child, int *to_child)
{
	struct peer_info me = { 0 };
	struct rc_qp_opts o;
	struct rc_env *env;
	int from_child;
	char ready = 0;
	pid_t pid;

	pid = rc_fork_with_pipes(&from_child, to_child);
	if (pid == 0)
		child_main(*to_child, from_child);
	rc_child = pid;

	rc_setup(state);	/* now that the child is out of the way */
	env = *state;
	rc_default_opts(&o);
	o.timeout = timeout;
	o.retry_cnt = retry_cnt;
	rc_create_end(env, &o, &env->a);

	if (!rc_read_within(from_child, child, sizeof(*child)))
		fail_msg("the child sent no QPN");
	me.qpn = env->a.qp->qp_num;
	me.gid = env->gid;
	assert_int_equal(write(*to_child, &me, sizeof(me)), sizeof(me));
	rc_connect(env->a.qp, &o, child->qpn, &child->gid);
	if (!rc_read_within(from_child, &ready, 1) || !ready)
		fail_msg("the child did not connect");
	close(from_child);
	return env;
}

static void test_retry_exceeded_when_peer_killed(void **state)
{
	const uint8_t timeout = 10, retry_cnt = 2;
	struct peer_info child;
	struct rc_env *env;
	struct rc_buf *buf;
	struct ibv_mr *mr;
	struct ibv_sge sge;
	uint64_t t0, elapsed_ms, retry_ns, bound_ms;
	int to_child, status;
	pid_t pid;

	env = connect_child(state, timeout, retry_cnt, &child, &to_child);
	pid = rc_child;
	buf = rc_alloc(env, env->page);
	mr = rc_reg(env, env->pd, buf->p, buf->cap, IBV_ACCESS_LOCAL_WRITE);
	rc_fill(buf->p, buf->cap, 0x66);

	/* The link works while the child lives... */
	sge.addr = (uintptr_t)buf->p;
	sge.length = 64;
	sge.lkey = mr->lkey;
	assert_int_equal(rc_post_rdma(env->a.qp, 1, IBV_WR_RDMA_WRITE, &sge, 1, child.addr,
				      child.rkey), 0);
	rc_expect_wc(env->a.scq, 1, IBV_WC_SUCCESS, NULL);

	/* ...and once it is killed, the next WRITE runs out of retries. */
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	rc_child = 0;
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	close(to_child);

	t0 = rc_now_ms();
	assert_int_equal(rc_post_rdma(env->a.qp, 2, IBV_WR_RDMA_WRITE, &sge, 1, child.addr,
				      child.rkey), 0);
	rc_expect_wc(env->a.scq, 2, IBV_WC_RETRY_EXC_ERR, NULL);
	elapsed_ms = rc_now_ms() - t0;
	retry_ns = 4096ull << timeout;	/* 4.096 us * 2^timeout */
	/* About (retry_cnt + 1) x timeout: one second of slack for a loaded machine. */
	bound_ms = (retry_cnt + 1) * retry_ns / 1000000 + 1000;
	print_message("retry exceeded after %llu ms (timeout %llu us, retry_cnt %u)\n",
		      (unsigned long long)elapsed_ms, (unsigned long long)retry_ns / 1000,
		      retry_cnt);
	assert_true(elapsed_ms <= bound_ms);
	/* Each retry waited for the timer: it did not give up at the first refusal. */
	assert_true(elapsed_ms * 1000000 >= retry_cnt * retry_ns);
	assert_int_equal(rc_state(env->a.qp), IBV_QPS_ERR);
	rc_expect_no_async(env, 0);
}

/*
 * A peer whose process is stopped (SIGSTOP: a debugger, a starved machine) for far longer
 * than timeout x (retry_cnt + 1) is not a lost link: a NIC would have answered for it. The
 * lone WRITE is placed at once, as a NIC's responder places it (direct placement: the
 * stopped peer runs no code for it); the SEND and READ posted after it wait, and succeed
 * once the peer runs again; the READ brings back what the WRITE put there.
 */
static void test_stopped_peer_answers_late(void **state)
{
	const uint8_t timeout = 10, retry_cnt = 2;	/* a NIC gives up after ~13 ms */
	const int stop_ms = 600;
	struct peer_info child;
	struct rc_env *env;
	struct rc_buf *buf;
	struct ibv_mr *mr;
	struct ibv_sge sge;
	uint64_t t0, took;
	int to_child, status;

	env = connect_child(state, timeout, retry_cnt, &child, &to_child);
	buf = rc_alloc(env, env->page);
	mr = rc_reg(env, env->pd, buf->p, buf->cap, IBV_ACCESS_LOCAL_WRITE);
	rc_fill(buf->p, 128, 0x3c);
	/* One READ first: it is answered once the child's engine has settled the same-host
	 * path (whose answer brings the child's keys), so the WRITE below can be placed. */
	sge = rc_sge(buf->p + 3072, 8, mr);
	assert_int_equal(rc_post_rdma(env->a.qp, 9, IBV_WR_RDMA_READ, &sge, 1, child.addr,
				      child.rkey), 0);
	rc_expect_wc(env->a.scq, 9, IBV_WC_SUCCESS, NULL);

	assert_int_equal(kill(rc_child, SIGSTOP), 0);
	assert_int_equal(waitpid(rc_child, &status, WUNTRACED), rc_child);
	assert_true(WIFSTOPPED(status));
	t0 = rc_now_ms();
	sge = rc_sge(buf->p, 64, mr);
	assert_int_equal(rc_post_rdma(env->a.qp, 1, IBV_WR_RDMA_WRITE, &sge, 1, child.addr,
				      child.rkey), 0);
	sge = rc_sge(buf->p + 64, 64, mr);
	assert_int_equal(rc_post_rdma(env->a.qp, 2, IBV_WR_SEND, &sge, 1, 0, 0), 0);
	sge = rc_sge(buf->p + 2048, 64, mr);
	assert_int_equal(rc_post_rdma(env->a.qp, 3, IBV_WR_RDMA_READ, &sge, 1, child.addr,
				      child.rkey), 0);
	rc_expect_wc(env->a.scq, 1, IBV_WC_SUCCESS, NULL);
	rc_expect_no_wc(env->a.scq, stop_ms);
	assert_int_equal(kill(rc_child, SIGCONT), 0);
	rc_expect_wc(env->a.scq, 2, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(env->a.scq, 3, IBV_WC_SUCCESS, NULL);
	took = rc_now_ms() - t0;
	print_message("stopped %d ms: completed after %llu ms\n", stop_ms,
		      (unsigned long long)took);
	rc_expect_pattern(buf->p + 2048, 64, 0x3c, "read back after the stop");
	assert_int_equal(rc_state(env->a.qp), IBV_QPS_RTS);
	close(to_child);	/* the child exits */
	assert_int_equal(waitpid(rc_child, &status, 0), rc_child);
	rc_child = 0;
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/*
 * A peer whose QP is in ERR drops requests, as a NIC's does: that is a loss, not a slow
 * peer, so the requester's retries run out (IBV_WC_RETRY_EXC_ERR after about
 * timeout x (retry_cnt + 1)), though the peer's process runs and its stream stays open.
 */
static void test_retry_exceeded_when_peer_in_err(void **state)
{
	struct rc_env *env = *state;
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
	const uint8_t timeout = 10, retry_cnt = 2;
	uint64_t t0, elapsed_ms, retry_ns = 4096ull << timeout;
	struct rc_qp_opts o;
	struct rc_buf *buf;
	struct ibv_mr *mr;
	struct ibv_sge sge;

	rc_default_opts(&o);
	o.timeout = timeout;
	o.retry_cnt = retry_cnt;
	rc_pair(env, &o, &o);
	expect_pair_works(env, 60);
	buf = rc_alloc(env, env->page);
	mr = rc_reg(env, env->pd, buf->p, buf->cap, RC_ACCESS_ALL);
	assert_int_equal(ibv_modify_qp(env->b.qp, &err, IBV_QP_STATE), 0);
	sge = rc_sge(buf->p, 64, mr);
	t0 = rc_now_ms();
	assert_int_equal(rc_post_rdma(env->a.qp, 1, IBV_WR_RDMA_WRITE, &sge, 1,
				      (uintptr_t)buf->p + 2048, mr->rkey), 0);
	rc_expect_wc(env->a.scq, 1, IBV_WC_RETRY_EXC_ERR, NULL);
	elapsed_ms = rc_now_ms() - t0;
	print_message("peer in ERR: retry exceeded after %llu ms\n",
		      (unsigned long long)elapsed_ms);
	assert_true(elapsed_ms * 1000000 >= retry_cnt * retry_ns);
	assert_true(elapsed_ms <= (retry_cnt + 1) * retry_ns / 1000000 + 1000);
	assert_int_equal(rc_state(env->a.qp), IBV_QPS_ERR);
}

int main(void)
{
	struct case_list l = { 0 };

	/* First, so that nothing verbs-related has run in this process before the fork. */
	case_add(&l, (struct CMUnitTest)cmocka_unit_test_setup_teardown(
			     test_retry_exceeded_when_peer_killed, NULL, rc_teardown_child));
	/* Forks too: the first test's engine has stopped with its last context. */
	case_add(&l, (struct CMUnitTest)cmocka_unit_test_setup_teardown(
			     test_stopped_peer_answers_late, NULL, rc_teardown_child));
	case_add(&l, RC_TEST(retry_exceeded_when_peer_in_err));
	case_add(&l, RC_TEST(legal_path_with_exact_masks));
	case_add(&l, RC_TEST(init_requires_its_mask));
	case_add(&l, RC_TEST(rtr_requires_its_mask));
	case_add(&l, RC_TEST(rts_requires_its_mask));
	case_add(&l, RC_TEST(extra_mask_bits_refused));
	CASE_TABLE(&l, run_illegal, rc_setup, rc_teardown, illegal);
	case_add(&l, RC_TEST(post_send_before_rts_einval));
	case_add(&l, RC_TEST(post_recv_in_reset_einval));
	case_add(&l, RC_TEST(reset_from_rts_then_reuse));
	case_add(&l, RC_TEST(reset_from_err_then_reuse));
	case_add(&l, RC_TEST(reset_from_init_and_rtr));
	case_add(&l, RC_TEST(query_reports_what_was_set));
	case_add(&l, RC_TEST(psn_truncated_to_24_bits));
	return case_run(&l);
}
