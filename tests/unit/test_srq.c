// SPDX-License-Identifier: MIT
/*
 * Shared receive queues through the real verbs API: creation limits, the limit event, resize,
 * many QPs taking receives from one SRQ, RNR on an empty SRQ, EBUSY, the last-WQE event, and a
 * UD QP on an SRQ. Run under `softrdma run` (ctest does).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <infiniband/verbs.h>

#include "rc_fixture.h"

#define MAX_PAIRS	8
#define SLOT		256	/* bytes of the receive buffer each SRQ WQE gets */

/* Requesters with their own queues, each connected to a responder that uses the SRQ. */
struct scene {
	struct rc_env *env;
	struct ibv_srq *srq;
	struct ibv_cq *resp_scq, *resp_rcq;	/* shared by every responder */
	struct rc_end req[MAX_PAIRS];
	struct ibv_qp *resp[MAX_PAIRS];
	int pairs;
	struct rc_buf *buf;	/* receive slots at SLOT * wr_id */
	struct ibv_mr *mr;
	struct rc_buf *src;	/* what requesters send */
	struct ibv_mr *src_mr;
};

static struct ibv_srq *make_srq(struct rc_env *env, uint32_t max_wr, uint32_t max_sge)
{
	struct ibv_srq_init_attr init = { .attr = { .max_wr = max_wr, .max_sge = max_sge } };
	struct ibv_srq *srq = ibv_create_srq(env->pd, &init);

	assert_non_null(srq);
	assert_int_equal(init.attr.max_wr, max_wr);
	return srq;
}

static struct ibv_qp *make_srq_qp(struct scene *s, enum ibv_qp_type type)
{
	struct ibv_qp_init_attr init = {
		.send_cq = s->resp_scq,
		.recv_cq = s->resp_rcq,
		.srq = s->srq,
		.qp_type = type,
		.cap = { .max_send_wr = 16, .max_send_sge = 1, .max_recv_wr = 99,
			 .max_recv_sge = 99 },
	};
	struct ibv_qp *qp = ibv_create_qp(s->env->pd, &init);

	assert_non_null(qp);
	/* With an SRQ the QP has no receive queue of its own (ibv_create_qp(3)). */
	assert_int_equal(init.cap.max_recv_wr, 0);
	return qp;
}

/* pairs requester -> responder pairs, connected; the SRQ holds srq_wr WQEs at most. */
static void scene_init(struct scene *s, void **state, int pairs, uint32_t srq_wr,
		       uint8_t rnr_retry)
{
	struct rc_qp_opts o;

	memset(s, 0, sizeof(*s));
	s->env = *state;
	s->pairs = pairs;
	s->srq = make_srq(s->env, srq_wr, 2);
	s->resp_scq = ibv_create_cq(s->env->ctx, 256, NULL, NULL, 0);
	s->resp_rcq = ibv_create_cq(s->env->ctx, 256, NULL, NULL, 0);
	assert_non_null(s->resp_scq);
	assert_non_null(s->resp_rcq);
	s->buf = rc_alloc(s->env, 64 * SLOT);
	s->mr = rc_reg(s->env, s->env->pd, s->buf->p, s->buf->cap, RC_ACCESS_ALL);
	s->src = rc_alloc(s->env, 64 * SLOT);
	s->src_mr = rc_reg(s->env, s->env->pd, s->src->p, s->src->cap, RC_ACCESS_ALL);
	rc_fill(s->src->p, s->src->cap, 0x31);
	rc_default_opts(&o);
	o.rnr_retry = rnr_retry;
	for (int i = 0; i < pairs; i++) {
		rc_create_end(s->env, &o, &s->req[i]);
		s->resp[i] = make_srq_qp(s, IBV_QPT_RC);
		assert_int_equal(rc_modify_init(s->req[i].qp, &o), 0);
		assert_int_equal(rc_modify_init(s->resp[i], &o), 0);
		assert_int_equal(rc_modify_rtr(s->req[i].qp, &o, s->resp[i]->qp_num,
					       &s->env->gid), 0);
		assert_int_equal(rc_modify_rtr(s->resp[i], &o, s->req[i].qp->qp_num,
					       &s->env->gid), 0);
		assert_int_equal(rc_modify_rts(s->req[i].qp, &o), 0);
		assert_int_equal(rc_modify_rts(s->resp[i], &o), 0);
	}
}

static void scene_destroy(struct scene *s)
{
	for (int i = 0; i < s->pairs; i++) {
		rc_destroy_end(&s->req[i]);
		if (s->resp[i])
			assert_int_equal(ibv_destroy_qp(s->resp[i]), 0);
	}
	assert_int_equal(ibv_destroy_srq(s->srq), 0);
	assert_int_equal(ibv_destroy_cq(s->resp_scq), 0);
	assert_int_equal(ibv_destroy_cq(s->resp_rcq), 0);
}

/* One receive of SLOT bytes at slot wr_id of the receive buffer. */
static int post_srq(struct scene *s, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf->p + wr_id * SLOT, .length = SLOT,
			       .lkey = s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad = NULL;

	return ibv_post_srq_recv(s->srq, &wr, &bad);
}

/* A SEND of len bytes from the source buffer at offset off, signaled. */
static void send_from(struct scene *s, int pair, uint64_t wr_id, size_t off, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->src->p + off, .length = len,
			       .lkey = s->src_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad = NULL;

	assert_int_equal(ibv_post_send(s->req[pair].qp, &wr, &bad), 0);
}

static uint32_t srq_limit(struct ibv_srq *srq)
{
	struct ibv_srq_attr attr;

	memset(&attr, 0xff, sizeof(attr));
	assert_int_equal(ibv_query_srq(srq, &attr), 0);
	return attr.srq_limit;
}

static int arm(struct ibv_srq *srq, uint32_t limit)
{
	struct ibv_srq_attr attr = { .srq_limit = limit };

	return ibv_modify_srq(srq, &attr, IBV_SRQ_LIMIT);
}

static void expect_srq_event(struct rc_env *env, struct ibv_srq *srq)
{
	struct ibv_async_event ev;

	if (!rc_get_async(env, &ev, RC_WAIT_MS))
		fail_msg("no async event within %d ms, want SRQ_LIMIT_REACHED", RC_WAIT_MS);
	ibv_ack_async_event(&ev);
	if (ev.event_type != IBV_EVENT_SRQ_LIMIT_REACHED || ev.element.srq != srq)
		fail_msg("async event %s for %p, want SRQ_LIMIT_REACHED for %p",
			 ibv_event_type_str(ev.event_type), (void *)ev.element.srq, (void *)srq);
}

static void test_device_advertises_srq(void **state)
{
	struct rc_env *env = *state;
	struct ibv_device_attr attr;

	assert_int_equal(ibv_query_device(env->ctx, &attr), 0);
	assert_true(attr.max_srq > 0);
	assert_true(attr.max_srq_wr > 0);
	assert_true(attr.max_srq_sge > 0);
	assert_true(attr.device_cap_flags & IBV_DEVICE_SRQ_RESIZE);
}

static void test_create_checks_and_query(void **state)
{
	struct rc_env *env = *state;
	struct ibv_device_attr dev;
	struct ibv_srq_init_attr init = { .attr = { .max_wr = 16, .max_sge = 0,
						    .srq_limit = 5 } };
	struct ibv_srq_attr attr;
	struct ibv_srq *srq;

	assert_int_equal(ibv_query_device(env->ctx, &dev), 0);
	srq = ibv_create_srq(env->pd, &init);
	assert_non_null(srq);
	assert_ptr_equal(srq->pd, env->pd);
	assert_ptr_equal(srq->context, env->ctx);
	assert_int_equal(init.attr.max_wr, 16);
	assert_int_equal(init.attr.max_sge, 1);
	assert_int_equal(ibv_query_srq(srq, &attr), 0);
	assert_int_equal(attr.max_wr, 16);
	assert_int_equal(attr.max_sge, 1);
	/* srq_limit is irrelevant at creation (ibv_create_srq(3)): not armed. */
	assert_int_equal(attr.srq_limit, 0);
	assert_int_equal(ibv_destroy_srq(srq), 0);

	init.attr.max_wr = 0;
	errno = 0;
	assert_null(ibv_create_srq(env->pd, &init));
	assert_int_equal(errno, EINVAL);
	init.attr.max_wr = (uint32_t)dev.max_srq_wr + 1;
	errno = 0;
	assert_null(ibv_create_srq(env->pd, &init));
	assert_int_equal(errno, EINVAL);
	init.attr.max_wr = 4;
	init.attr.max_sge = (uint32_t)dev.max_srq_sge + 1;
	errno = 0;
	assert_null(ibv_create_srq(env->pd, &init));
	assert_int_equal(errno, EINVAL);
}

static void test_create_srq_ex_basic_only(void **state)
{
	struct rc_env *env = *state;
	struct ibv_cq *cq = ibv_create_cq(env->ctx, 4, NULL, NULL, 0);
	struct ibv_srq_init_attr_ex ex = {
		.attr = { .max_wr = 8, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD,
		.srq_type = IBV_SRQT_BASIC,
		.pd = env->pd,
	};
	struct ibv_srq *srq;

	assert_non_null(cq);
	srq = ibv_create_srq_ex(env->ctx, &ex);
	assert_non_null(srq);
	assert_int_equal(ibv_destroy_srq(srq), 0);
	/* A CQ makes libibverbs call the provider's create_srq_ex: a basic SRQ ignores it. */
	ex.comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
	ex.cq = cq;
	ex.srq_context = &ex;
	srq = ibv_create_srq_ex(env->ctx, &ex);
	assert_non_null(srq);
	assert_ptr_equal(srq->context, env->ctx);
	assert_ptr_equal(srq->pd, env->pd);
	assert_ptr_equal(srq->srq_context, &ex);
	assert_int_equal(ibv_destroy_srq(srq), 0);
	/* An XRC SRQ needs its domain (test_xrc has the rest); tag matching is not built. */
	ex.srq_type = IBV_SRQT_XRC;
	errno = 0;
	assert_null(ibv_create_srq_ex(env->ctx, &ex));
	assert_int_equal(errno, EINVAL);
	ex.srq_type = IBV_SRQT_TM;
	errno = 0;
	assert_null(ibv_create_srq_ex(env->ctx, &ex));
	assert_int_equal(errno, EOPNOTSUPP);
	ex.srq_type = IBV_SRQT_BASIC;
	ex.comp_mask = IBV_SRQ_INIT_ATTR_CQ;
	errno = 0;
	assert_null(ibv_create_srq_ex(env->ctx, &ex));
	assert_int_equal(errno, EINVAL);
	assert_int_equal(ibv_destroy_cq(cq), 0);
}

static void test_post_srq_recv_errors(void **state)
{
	struct scene s;
	struct ibv_sge sge[3] = { { .addr = 0, .length = 0, .lkey = 0 } };
	struct ibv_recv_wr wrs[6], *bad;

	scene_init(&s, state, 0, 4, 7);
	memset(wrs, 0, sizeof(wrs));
	wrs[0].num_sge = 3;
	wrs[0].sg_list = sge;
	bad = NULL;
	assert_int_equal(ibv_post_srq_recv(s.srq, &wrs[0], &bad), EINVAL);
	assert_ptr_equal(bad, &wrs[0]);
	/* Five into four: the first four are posted, the fifth is refused. */
	for (int i = 0; i < 5; i++) {
		wrs[i].wr_id = (uint64_t)i;
		wrs[i].num_sge = 0;
		wrs[i].next = i < 4 ? &wrs[i + 1] : NULL;
	}
	bad = NULL;
	assert_int_equal(ibv_post_srq_recv(s.srq, &wrs[0], &bad), ENOMEM);
	assert_ptr_equal(bad, &wrs[4]);
	scene_destroy(&s);
}

static void test_limit_event_fires_once_below_limit(void **state)
{
	struct scene s;
	struct rc_env *env;
	struct ibv_wc wc;

	scene_init(&s, state, 1, 16, 7);
	env = s.env;
	for (uint64_t i = 0; i < 10; i++)
		assert_int_equal(post_srq(&s, i), 0);
	assert_int_equal(arm(s.srq, 8), 0);
	assert_int_equal(srq_limit(s.srq), 8);

	/* 10 -> 9 -> 8: not below 8 yet. */
	for (uint64_t i = 0; i < 2; i++) {
		send_from(&s, 0, 100 + i, 0, 32);
		rc_expect_wc(s.req[0].scq, 100 + i, IBV_WC_SUCCESS, NULL);
		rc_expect_wc(s.resp_rcq, i, IBV_WC_SUCCESS, NULL);
	}
	rc_expect_no_async(env, RC_QUIET_MS);
	assert_int_equal(srq_limit(s.srq), 8);

	/* 8 -> 7: below; the event fires and the limit is disarmed (query says 0). */
	send_from(&s, 0, 102, 0, 32);
	rc_expect_wc(s.req[0].scq, 102, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(s.resp_rcq, 2, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.qp_num, s.resp[0]->qp_num);
	expect_srq_event(env, s.srq);
	assert_int_equal(srq_limit(s.srq), 0);

	/* Disarmed: taking more raises nothing. */
	send_from(&s, 0, 103, 0, 32);
	rc_expect_wc(s.resp_rcq, 3, IBV_WC_SUCCESS, NULL);
	rc_expect_no_async(env, RC_QUIET_MS);

	/* Re-armed above the count: the next take fires it again. */
	assert_int_equal(arm(s.srq, 10), 0);
	rc_expect_no_async(env, RC_QUIET_MS);
	send_from(&s, 0, 104, 0, 32);
	rc_expect_wc(s.resp_rcq, 4, IBV_WC_SUCCESS, NULL);
	expect_srq_event(env, s.srq);
	assert_int_equal(srq_limit(s.srq), 0);
	scene_destroy(&s);
}

static void test_modify_checks_and_resize_keeps_wqes(void **state)
{
	struct scene s;
	struct ibv_srq_attr attr;
	struct ibv_wc wc;

	scene_init(&s, state, 1, 4, 7);
	for (uint64_t i = 0; i < 4; i++)
		assert_int_equal(post_srq(&s, i), 0);
	assert_int_equal(post_srq(&s, 4), ENOMEM);

	/* A limit above the size, a size below what is posted, unknown bits: refused whole. */
	assert_int_equal(arm(s.srq, 5), EINVAL);
	attr.max_wr = 3;
	assert_int_equal(ibv_modify_srq(s.srq, &attr, IBV_SRQ_MAX_WR), EINVAL);
	attr.max_wr = 0;
	assert_int_equal(ibv_modify_srq(s.srq, &attr, IBV_SRQ_MAX_WR), EINVAL);
	attr.max_wr = 8;
	attr.srq_limit = 9;
	assert_int_equal(ibv_modify_srq(s.srq, &attr, IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT), EINVAL);
	assert_int_equal(ibv_modify_srq(s.srq, &attr, 1 << 7), EINVAL);
	assert_int_equal(ibv_query_srq(s.srq, &attr), 0);
	assert_int_equal(attr.max_wr, 4);
	assert_int_equal(attr.srq_limit, 0);

	/* Grow: the four WQEs stay, in order, and there is room for more. */
	attr.max_wr = 32;
	assert_int_equal(ibv_modify_srq(s.srq, &attr, IBV_SRQ_MAX_WR), 0);
	assert_int_equal(attr.max_wr, 32);
	for (uint64_t i = 4; i < 32; i++)
		assert_int_equal(post_srq(&s, i), 0);
	assert_int_equal(post_srq(&s, 32), ENOMEM);
	for (uint64_t i = 0; i < 32; i++) {
		send_from(&s, 0, 100 + i, i * 7, (uint32_t)(16 + i));
		rc_expect_wc(s.req[0].scq, 100 + i, IBV_WC_SUCCESS, NULL);
		rc_expect_wc(s.resp_rcq, i, IBV_WC_SUCCESS, &wc);
		assert_int_equal(wc.byte_len, 16 + i);
		rc_expect_bytes(s.buf->p + i * SLOT, s.src->p + i * 7, 16 + i, "received data");
	}
	/* Shrink an empty SRQ. */
	attr.max_wr = 2;
	assert_int_equal(ibv_modify_srq(s.srq, &attr, IBV_SRQ_MAX_WR), 0);
	assert_int_equal(ibv_query_srq(s.srq, &attr), 0);
	assert_int_equal(attr.max_wr, 2);
	scene_destroy(&s);
}

/* The next successful completion of cq, whatever its wr_id (rc_expect_wc wants one). */
static void expect_any_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	uint64_t deadline = rc_now_ms() + RC_WAIT_MS;
	int n;

	while ((n = ibv_poll_cq(cq, 1, wc)) == 0 && rc_now_ms() < deadline)
		;
	if (n != 1)
		fail_msg("no completion within %d ms (poll: %d)", RC_WAIT_MS, n);
	if (wc->status != IBV_WC_SUCCESS)
		fail_msg("completion wr_id %llu: %s", (unsigned long long)wc->wr_id,
			 ibv_wc_status_str(wc->status));
}

static void test_many_qps_share_one_srq(void **state)
{
	struct scene s;
	bool seen[64] = { false };
	int per_qp[MAX_PAIRS] = { 0 };

	scene_init(&s, state, MAX_PAIRS, 64, 7);
	for (uint64_t i = 0; i < 64; i++)
		assert_int_equal(post_srq(&s, i), 0);
	/* Pair p sends message m from source offset (p * 8 + m) * SLOT, 100 + p bytes long. */
	for (int m = 0; m < 8; m++)
		for (int p = 0; p < MAX_PAIRS; p++)
			send_from(&s, p, (uint64_t)(p * 8 + m), (size_t)(p * 8 + m) * SLOT,
				  (uint32_t)(100 + p));
	for (int p = 0; p < MAX_PAIRS; p++)
		for (int m = 0; m < 8; m++)
			rc_expect_wc(s.req[p].scq, (uint64_t)(p * 8 + m), IBV_WC_SUCCESS, NULL);
	for (int n = 0; n < 64; n++) {
		struct ibv_wc wc;
		int p = -1;

		expect_any_wc(s.resp_rcq, &wc);
		for (int i = 0; i < MAX_PAIRS; i++)
			if (wc.qp_num == s.resp[i]->qp_num)
				p = i;
		if (p < 0)
			fail_msg("completion for QP 0x%x, which is none of the SRQ's", wc.qp_num);
		assert_int_equal(wc.src_qp, s.req[p].qp->qp_num);
		assert_int_equal(wc.byte_len, 100 + p);
		assert_true(wc.wr_id < 64 && !seen[wc.wr_id]);
		seen[wc.wr_id] = true;
		per_qp[p]++;
		/* Whichever slot it landed in holds one of that pair's messages, whole. */
		{
			const uint8_t *got = s.buf->p + wc.wr_id * SLOT;
			bool match = false;

			for (int m = 0; m < 8 && !match; m++)
				match = !memcmp(got, s.src->p + (size_t)(p * 8 + m) * SLOT,
						100 + (size_t)p);
			if (!match)
				fail_msg("slot %llu does not hold a message of pair %d",
					 (unsigned long long)wc.wr_id, p);
		}
	}
	for (int p = 0; p < MAX_PAIRS; p++)
		assert_int_equal(per_qp[p], 8);
	rc_expect_no_wc(s.resp_rcq, 0);
	scene_destroy(&s);
}

static void test_empty_srq_is_rnr_then_late_receive_completes(void **state)
{
	struct scene s;

	scene_init(&s, state, 1, 4, 7);
	send_from(&s, 0, 1, 0, 40);
	rc_expect_no_wc(s.req[0].scq, RC_QUIET_MS);
	assert_int_equal(post_srq(&s, 3), 0);
	rc_expect_wc(s.req[0].scq, 1, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(s.resp_rcq, 3, IBV_WC_SUCCESS, NULL);
	rc_expect_bytes(s.buf->p + 3 * SLOT, s.src->p, 40, "received data");
	scene_destroy(&s);
}

static void test_empty_srq_rnr_retry_0_exceeded(void **state)
{
	struct scene s;

	scene_init(&s, state, 1, 4, 0);
	send_from(&s, 0, 1, 0, 40);
	rc_expect_wc(s.req[0].scq, 1, IBV_WC_RNR_RETRY_EXC_ERR, NULL);
	scene_destroy(&s);
}

static void test_destroy_busy_while_qps_use_it(void **state)
{
	struct scene s;
	struct ibv_sge sge = { 0 };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad = NULL;

	scene_init(&s, state, 2, 4, 7);
	/* A QP on an SRQ has no receive queue to post to. */
	assert_int_equal(ibv_post_recv(s.resp[0], &wr, &bad), EINVAL);
	assert_ptr_equal(bad, &wr);
	assert_int_equal(ibv_destroy_srq(s.srq), EBUSY);
	assert_int_equal(ibv_destroy_qp(s.resp[0]), 0);
	s.resp[0] = NULL;
	assert_int_equal(ibv_destroy_srq(s.srq), EBUSY);
	/* Still usable after the refusal. */
	assert_int_equal(post_srq(&s, 0), 0);
	send_from(&s, 1, 9, 0, 8);
	rc_expect_wc(s.resp_rcq, 0, IBV_WC_SUCCESS, NULL);
	scene_destroy(&s);
}

static void expect_qp_event(struct rc_env *env, enum ibv_event_type type, struct ibv_qp *qp)
{
	rc_expect_async_qp(env, type, qp);
}

static void test_last_wqe_reached_when_srq_qp_goes_to_err(void **state)
{
	struct scene s;
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
	struct rc_env *env;

	scene_init(&s, state, 2, 8, 7);
	env = s.env;
	for (uint64_t i = 0; i < 4; i++)
		assert_int_equal(post_srq(&s, i), 0);
	assert_int_equal(ibv_modify_qp(s.resp[0], &err, IBV_QP_STATE), 0);
	expect_qp_event(env, IBV_EVENT_QP_LAST_WQE_REACHED, s.resp[0]);
	rc_expect_no_async(env, RC_QUIET_MS);
	/* The SRQ's WQEs are not the QP's to flush: the other QP still receives into them. */
	rc_expect_no_wc(s.resp_rcq, RC_QUIET_MS);
	send_from(&s, 1, 7, 0, 64);
	rc_expect_wc(s.req[1].scq, 7, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(s.resp_rcq, 0, IBV_WC_SUCCESS, NULL);
	/* Once per entry into ERR. */
	assert_int_equal(ibv_modify_qp(s.resp[0], &err, IBV_QP_STATE), 0);
	rc_expect_no_async(env, RC_QUIET_MS);
	scene_destroy(&s);
}

static void test_access_error_then_last_wqe_reached(void **state)
{
	struct scene s;
	struct ibv_sge sge;
	struct rc_env *env;

	scene_init(&s, state, 1, 8, 7);
	env = s.env;
	assert_int_equal(post_srq(&s, 0), 0);
	sge = (struct ibv_sge){ .addr = (uintptr_t)s.src->p, .length = 8,
				.lkey = s.src_mr->lkey };
	/* A WRITE with a key nobody has: the responder goes to ERR with its access event. */
	assert_int_equal(rc_post_rdma(s.req[0].qp, 1, IBV_WR_RDMA_WRITE, &sge, 1,
				      (uintptr_t)s.buf->p, s.mr->rkey ^ 0x5a5a00), 0);
	rc_expect_wc(s.req[0].scq, 1, IBV_WC_REM_ACCESS_ERR, NULL);
	expect_qp_event(env, IBV_EVENT_QP_ACCESS_ERR, s.resp[0]);
	expect_qp_event(env, IBV_EVENT_QP_LAST_WQE_REACHED, s.resp[0]);
	rc_expect_no_wc(s.resp_rcq, RC_QUIET_MS);
	scene_destroy(&s);
}

/* A UD QP on an SRQ: the datagram lands in an SRQ WQE behind its 40-byte GRH. */
static void test_ud_qp_takes_receives_from_srq(void **state)
{
	struct scene s;
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_ah_attr ah_attr = { .is_global = 1, .port_num = 1 };
	struct ibv_qp_attr attr;
	struct ibv_qp *sender, *receiver;
	struct ibv_ah *ah;
	struct ibv_cq *scq;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;

	scene_init(&s, state, 0, 4, 7);
	scq = ibv_create_cq(s.env->ctx, 8, NULL, NULL, 0);
	assert_non_null(scq);
	init.send_cq = scq;
	init.recv_cq = scq;
	sender = ibv_create_qp(s.env->pd, &init);
	assert_non_null(sender);
	receiver = make_srq_qp(&s, IBV_QPT_UD);
	for (int i = 0; i < 2; i++) {
		struct ibv_qp *qp = i ? receiver : sender;

		memset(&attr, 0, sizeof(attr));
		attr.qp_state = IBV_QPS_INIT;
		attr.port_num = 1;
		attr.qkey = 0x1111;
		assert_int_equal(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					       IBV_QP_PORT | IBV_QP_QKEY), 0);
		attr.qp_state = IBV_QPS_RTR;
		assert_int_equal(ibv_modify_qp(qp, &attr, IBV_QP_STATE), 0);
		attr.qp_state = IBV_QPS_RTS;
		attr.sq_psn = 0;
		assert_int_equal(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
	}
	ah_attr.grh.dgid = s.env->gid;
	ah = ibv_create_ah(s.env->pd, &ah_attr);
	assert_non_null(ah);
	assert_int_equal(post_srq(&s, 2), 0);
	sge = (struct ibv_sge){ .addr = (uintptr_t)s.src->p, .length = 77,
				.lkey = s.src_mr->lkey };
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 5;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = receiver->qp_num;
	wr.wr.ud.remote_qkey = 0x1111;
	assert_int_equal(ibv_post_send(sender, &wr, &bad), 0);
	rc_expect_wc(scq, 5, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(s.resp_rcq, 2, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.byte_len, 40 + 77);
	assert_int_equal(wc.qp_num, receiver->qp_num);
	assert_int_equal(wc.src_qp, sender->qp_num);
	assert_true(wc.wc_flags & IBV_WC_GRH);
	rc_expect_bytes(s.buf->p + 2 * SLOT + 40, s.src->p, 77, "the datagram");

	assert_int_equal(ibv_destroy_ah(ah), 0);
	assert_int_equal(ibv_destroy_qp(sender), 0);
	assert_int_equal(ibv_destroy_qp(receiver), 0);
	assert_int_equal(ibv_destroy_cq(scq), 0);
	scene_destroy(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		RC_TEST(device_advertises_srq),
		RC_TEST(create_checks_and_query),
		RC_TEST(create_srq_ex_basic_only),
		RC_TEST(post_srq_recv_errors),
		RC_TEST(limit_event_fires_once_below_limit),
		RC_TEST(modify_checks_and_resize_keeps_wqes),
		RC_TEST(many_qps_share_one_srq),
		RC_TEST(empty_srq_is_rnr_then_late_receive_completes),
		RC_TEST(empty_srq_rnr_retry_0_exceeded),
		RC_TEST(destroy_busy_while_qps_use_it),
		RC_TEST(last_wqe_reached_when_srq_qp_goes_to_err),
		RC_TEST(access_error_then_last_wqe_reached),
		RC_TEST(ud_qp_takes_receives_from_srq),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
