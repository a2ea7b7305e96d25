// SPDX-License-Identifier: MIT
/*
 * UC queue pairs through the real verbs API, QP A to QP B in this process: SEND and WRITE
 * (with and without immediate) arrive and complete once sent; whatever B cannot place is
 * dropped silently while A sees success and B's memory stays as it was; READ and atomics are
 * refused at post. Run under `softrdma run` (ctest does).
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

#include "case_table.h"
#include "rc_fixture.h"

#define A_SEED	0x29
#define B_SEED	0xc4
#define IMM	0xfeed0042u

struct scene {
	struct rc_env *env;
	struct rc_buf *a, *b;
	struct ibv_mr *amr, *bmr;	/* every right */
};

/* env->a and env->b, UC, connected; B's QP grants b_access. */
static void scene_init(struct scene *s, void **state, int b_access)
{
	struct rc_env *env = *state;

	memset(s, 0, sizeof(*s));
	s->env = env;
	rc_create_uc_end(env, &env->a, NULL);
	rc_create_uc_end(env, &env->b, NULL);
	rc_connect_uc(env, env->a.qp, env->b.qp->qp_num, RC_ACCESS_ALL);
	rc_connect_uc(env, env->b.qp, env->a.qp->qp_num, b_access);
	s->a = rc_alloc(env, env->page);
	s->b = rc_alloc(env, env->page);
	s->amr = rc_reg(env, env->pd, s->a->p, s->a->cap, RC_ACCESS_ALL);
	s->bmr = rc_reg(env, env->pd, s->b->p, s->b->cap, RC_ACCESS_ALL);
	rc_fill(s->a->p, s->a->cap, A_SEED);
	rc_fill(s->b->p, s->b->cap, B_SEED);
}

/* One signaled WR of one SGE, carrying IMM. */
static int post(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op, struct ibv_sge *sge,
		uint64_t raddr, uint32_t rkey)
{
	return rc_post_rdma_imm(qp, wr_id, op, sge, 1, raddr, rkey, htonl(IMM));
}

/* B's memory: the pattern, except want[0, n) at offset off. */
static void expect_b(const struct scene *s, size_t off, const void *want, size_t n)
{
	rc_expect_pattern(s->b->p, off, B_SEED, "B's memory before the data");
	rc_expect_bytes(s->b->p + off, want, n, "B's memory: the data");
	rc_expect_pattern_range(s->b->p, off + n, s->b->cap, B_SEED, "B's memory after the data");
}

static void expect_b_untouched(const struct scene *s)
{
	rc_expect_pattern(s->b->p, s->b->cap, B_SEED, "B's memory");
}

/*
 * A posts op (wr_id 1) of the first len bytes of its buffer, to raddr under rkey for a
 * WRITE: on UC it completes successfully whatever becomes of it at B.
 */
static void post_done_at_a(struct scene *s, enum ibv_wr_opcode op, uint32_t len, uint64_t raddr,
			   uint32_t rkey)
{
	struct ibv_sge ss = rc_sge(s->a->p, len, s->amr);

	assert_int_equal(post(s->env->a.qp, 1, op, &ss, raddr, rkey), 0);
	rc_expect_wc(s->env->a.scq, 1, IBV_WC_SUCCESS, NULL);
}

#define BARRIER_ID	0xbaULL

/*
 * Waits until B has handled everything A sent before: a zero-length SEND behind it on the one
 * stream. It lands in B's oldest receive (a receive of its own is posted behind any others),
 * which must be want; the completion is returned in *wc.
 */
static void barrier(struct scene *s, uint64_t want, struct ibv_wc *wc)
{
	struct ibv_recv_wr rwr = { .wr_id = BARRIER_ID, .num_sge = 0 }, *rbad;
	struct ibv_send_wr wr = { .wr_id = BARRIER_ID, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	assert_int_equal(ibv_post_recv(s->env->b.qp, &rwr, &rbad), 0);
	assert_int_equal(ibv_post_send(s->env->a.qp, &wr, &bad), 0);
	rc_expect_wc(s->env->a.scq, BARRIER_ID, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(s->env->b.rcq, want, IBV_WC_SUCCESS, wc);
	assert_int_equal(wc->byte_len, 0);
}

static void test_write_places_exact_bytes(void **state)
{
	struct scene s;
	struct ibv_sge ss;
	struct ibv_wc wc;

	scene_init(&s, state, RC_ACCESS_ALL);
	ss = rc_sge(s.a->p + 8, 300, s.amr);
	assert_int_equal(post(s.env->a.qp, 1, IBV_WR_RDMA_WRITE, &ss, (uintptr_t)s.b->p + 40,
			      s.bmr->rkey), 0);
	rc_expect_wc(s.env->a.scq, 1, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, IBV_WC_RDMA_WRITE);
	assert_int_equal(wc.byte_len, 300);
	barrier(&s, BARRIER_ID, &wc);
	expect_b(&s, 40, s.a->p + 8, 300);
	rc_expect_no_wc(s.env->b.rcq, 0);
	rc_expect_no_async(s.env, 0);
}

static void test_write_with_imm_consumes_a_receive(void **state)
{
	struct scene s;
	struct ibv_sge ss, rs;
	struct ibv_wc wc;

	scene_init(&s, state, RC_ACCESS_ALL);
	rs = rc_sge(s.b->p + 3000, 16, s.bmr);
	rc_post_recv(s.env->b.qp, 7, &rs, 1);
	ss = rc_sge(s.a->p, 200, s.amr);
	assert_int_equal(post(s.env->a.qp, 1, IBV_WR_RDMA_WRITE_WITH_IMM, &ss,
			      (uintptr_t)s.b->p + 100, s.bmr->rkey), 0);
	rc_expect_wc(s.env->a.scq, 1, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, IBV_WC_RDMA_WRITE);
	rc_expect_wc(s.env->b.rcq, 7, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	assert_int_equal(wc.byte_len, 200);
	assert_true(wc.wc_flags & IBV_WC_WITH_IMM);
	assert_int_equal(ntohl(wc.imm_data), IMM);
	assert_int_equal(wc.src_qp, s.env->a.qp->qp_num);
	expect_b(&s, 100, s.a->p, 200);
}

static void test_send_and_send_with_imm(void **state)
{
	struct scene s;
	struct ibv_sge ss, rs[2];
	struct ibv_wc wc;

	scene_init(&s, state, RC_ACCESS_ALL);
	rs[0] = rc_sge(s.b->p, 64, s.bmr);
	rs[1] = rc_sge(s.b->p + 1024, 64, s.bmr);
	rc_post_recv(s.env->b.qp, 10, &rs[0], 1);
	rc_post_recv(s.env->b.qp, 11, &rs[1], 1);
	ss = rc_sge(s.a->p, 50, s.amr);
	assert_int_equal(post(s.env->a.qp, 1, IBV_WR_SEND, &ss, 0, 0), 0);
	ss = rc_sge(s.a->p + 500, 33, s.amr);
	assert_int_equal(post(s.env->a.qp, 2, IBV_WR_SEND_WITH_IMM, &ss, 0, 0), 0);
	rc_expect_wc(s.env->a.scq, 1, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, IBV_WC_SEND);
	rc_expect_wc(s.env->a.scq, 2, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(s.env->b.rcq, 10, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, 50);
	assert_false(wc.wc_flags & IBV_WC_WITH_IMM);
	assert_int_equal(wc.qp_num, s.env->b.qp->qp_num);
	assert_int_equal(wc.src_qp, s.env->a.qp->qp_num);
	rc_expect_wc(s.env->b.rcq, 11, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.byte_len, 33);
	assert_true(wc.wc_flags & IBV_WC_WITH_IMM);
	assert_int_equal(ntohl(wc.imm_data), IMM);
	rc_expect_bytes(s.b->p, s.a->p, 50, "first SEND");
	rc_expect_bytes(s.b->p + 1024, s.a->p + 500, 33, "second SEND");
}

enum spoil { BAD_KEY, OUT_OF_BOUNDS, REGION_LACKS_WRITE, OTHER_PD, QP_LACKS_WRITE };

struct dropped_case {
	const char *name;
	enum spoil how;
	enum ibv_wr_opcode op;
};

static const struct dropped_case dropped[] = {
	{ "test_write_bad_rkey_dropped", BAD_KEY, IBV_WR_RDMA_WRITE },
	{ "test_write_out_of_bounds_dropped", OUT_OF_BOUNDS, IBV_WR_RDMA_WRITE },
	{ "test_write_region_lacks_right_dropped", REGION_LACKS_WRITE, IBV_WR_RDMA_WRITE },
	{ "test_write_other_pd_dropped", OTHER_PD, IBV_WR_RDMA_WRITE },
	{ "test_write_qp_lacks_right_dropped", QP_LACKS_WRITE, IBV_WR_RDMA_WRITE },
	{ "test_write_with_imm_bad_rkey_dropped_receive_kept", BAD_KEY,
	  IBV_WR_RDMA_WRITE_WITH_IMM },
};

/* A WRITE B cannot place: A completes it successfully, B drops it and carries on. */
static void run_dropped(void **state)
{
	const struct dropped_case *c = ((struct rc_env *)*state)->param;
	enum spoil how = c->how;
	enum ibv_wr_opcode op = c->op;
	struct scene s;
	struct ibv_sge rs;
	uint64_t raddr;
	uint32_t rkey;
	struct ibv_mr *mr;
	struct ibv_wc wc;

	scene_init(&s, state, how == QP_LACKS_WRITE ? IBV_ACCESS_LOCAL_WRITE : RC_ACCESS_ALL);
	raddr = (uintptr_t)s.b->p + 64;
	rkey = s.bmr->rkey;
	switch (how) {
	case BAD_KEY:
		rkey ^= 0x00ff0000;
		break;
	case OUT_OF_BOUNDS:
		raddr = (uintptr_t)s.b->p + s.b->cap - 8;
		break;
	case REGION_LACKS_WRITE:
		mr = rc_reg(s.env, s.env->pd, s.b->p, s.b->cap, IBV_ACCESS_REMOTE_READ);
		rkey = mr->rkey;
		break;
	case OTHER_PD:
		mr = rc_reg(s.env, s.env->pd2, s.b->p, s.b->cap, RC_ACCESS_ALL);
		rkey = mr->rkey;
		break;
	case QP_LACKS_WRITE:
		break;
	}
	if (op == IBV_WR_RDMA_WRITE_WITH_IMM) {
		rs = rc_sge(s.b->p + 2048, 64, s.bmr);
		rc_post_recv(s.env->b.qp, 5, &rs, 1);
	}
	post_done_at_a(&s, op, 32, raddr, rkey);
	/* A receive posted for the dropped WRITE_WITH_IMM is still the oldest one. */
	barrier(&s, op == IBV_WR_RDMA_WRITE_WITH_IMM ? 5 : BARRIER_ID, &wc);
	expect_b_untouched(&s);
	assert_int_equal(rc_state(s.env->a.qp), IBV_QPS_RTS);
	assert_int_equal(rc_state(s.env->b.qp), IBV_QPS_RTS);
	rc_expect_no_wc(s.env->b.rcq, RC_QUIET_MS);
	rc_expect_no_async(s.env, 0);
}

static void test_send_without_receive_dropped(void **state)
{
	struct scene s;
	struct ibv_sge ss, rs;
	struct ibv_wc wc;

	scene_init(&s, state, RC_ACCESS_ALL);
	post_done_at_a(&s, IBV_WR_SEND, 40, 0, 0);
	/* Lost, not waiting for a receive: the next receive gets the next SEND. */
	barrier(&s, BARRIER_ID, &wc);
	rs = rc_sge(s.b->p, 64, s.bmr);
	rc_post_recv(s.env->b.qp, 5, &rs, 1);
	ss = rc_sge(s.a->p + 1000, 12, s.amr);
	assert_int_equal(post(s.env->a.qp, 3, IBV_WR_SEND, &ss, 0, 0), 0);
	rc_expect_wc(s.env->b.rcq, 5, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.byte_len, 12);
	expect_b(&s, 0, s.a->p + 1000, 12);
	rc_expect_no_async(s.env, 0);
}

static void test_send_too_large_dropped_receive_kept(void **state)
{
	struct scene s;
	struct ibv_sge rs;
	struct ibv_wc wc;

	scene_init(&s, state, RC_ACCESS_ALL);
	rs = rc_sge(s.b->p, 16, s.bmr);
	rc_post_recv(s.env->b.qp, 5, &rs, 1);
	post_done_at_a(&s, IBV_WR_SEND, 17, 0, 0);
	/* The receive it did not fit is still the oldest: the barrier's SEND lands in it. */
	barrier(&s, 5, &wc);
	expect_b_untouched(&s);
	assert_int_equal(rc_state(s.env->b.qp), IBV_QPS_RTS);
	rc_expect_no_async(s.env, 0);
}

static void test_read_atomics_send_inv_refused_at_post(void **state)
{
	/* UC has no packet for them; Send with Invalidate is RC's only. */
	static const enum ibv_wr_opcode ops[] = {
		IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
		IBV_WR_SEND_WITH_INV,
	};
	struct scene s;
	struct ibv_sge ss;
	struct ibv_send_wr wr[2], *bad;

	scene_init(&s, state, RC_ACCESS_ALL);
	ss = rc_sge(s.a->p, 8, s.amr);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		/* A good WR ahead of it in the chain is not posted either. */
		memset(wr, 0, sizeof(wr));
		wr[0].wr_id = 1;
		wr[0].sg_list = &ss;
		wr[0].num_sge = 1;
		wr[0].opcode = IBV_WR_RDMA_WRITE;
		wr[0].send_flags = IBV_SEND_SIGNALED;
		wr[0].wr.rdma.remote_addr = (uintptr_t)s.b->p;
		wr[0].wr.rdma.rkey = s.bmr->rkey;
		wr[0].next = &wr[1];
		wr[1] = wr[0];
		wr[1].next = NULL;
		wr[1].wr_id = 2;
		wr[1].opcode = ops[i];
		bad = NULL;
		assert_int_equal(ibv_post_send(s.env->a.qp, wr, &bad), EINVAL);
		assert_ptr_equal(bad, &wr[1]);
	}
	rc_expect_no_wc(s.env->a.scq, RC_QUIET_MS);
	expect_b_untouched(&s);
	assert_int_equal(rc_state(s.env->a.qp), IBV_QPS_RTS);
}

static void test_peer_gone_sends_still_complete(void **state)
{
	struct scene s;
	struct ibv_sge ss;

	scene_init(&s, state, RC_ACCESS_ALL);
	rc_destroy_end(&s.env->b);
	ss = rc_sge(s.a->p, 64, s.amr);
	for (uint64_t i = 1; i <= 4; i++) {
		assert_int_equal(post(s.env->a.qp, i, i & 1 ? IBV_WR_SEND : IBV_WR_RDMA_WRITE,
				      &ss, 0x1000, 0x1234), 0);
		rc_expect_wc(s.env->a.scq, i, IBV_WC_SUCCESS, NULL);
	}
	assert_int_equal(rc_state(s.env->a.qp), IBV_QPS_RTS);
	rc_expect_no_async(s.env, RC_QUIET_MS);
}

static void test_local_key_error_completes_in_error(void **state)
{
	struct scene s;
	struct ibv_sge ss;

	scene_init(&s, state, RC_ACCESS_ALL);
	ss = rc_sge(s.a->p, 64, s.amr);
	ss.lkey ^= 0x00ff0000;
	assert_int_equal(post(s.env->a.qp, 1, IBV_WR_RDMA_WRITE, &ss, (uintptr_t)s.b->p,
			      s.bmr->rkey), 0);
	rc_expect_wc(s.env->a.scq, 1, IBV_WC_LOC_PROT_ERR, NULL);
	rc_wait_state(s.env->a.qp, IBV_QPS_ERR);
	expect_b_untouched(&s);
}

/* A UC QP takes its receives from an SRQ like any other. */
static void test_uc_on_srq(void **state)
{
	struct rc_env *env = *state;
	struct ibv_srq_init_attr init = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(env->pd, &init);
	struct rc_buf *a = rc_alloc(env, env->page), *b = rc_alloc(env, env->page);
	struct ibv_mr *amr = rc_reg(env, env->pd, a->p, a->cap, RC_ACCESS_ALL);
	struct ibv_mr *bmr = rc_reg(env, env->pd, b->p, b->cap, RC_ACCESS_ALL);
	struct ibv_sge rs = rc_sge(b->p, 64, bmr), ss = rc_sge(a->p, 48, amr);
	struct ibv_recv_wr rwr = { .wr_id = 3, .sg_list = &rs, .num_sge = 1 }, *rbad;
	struct ibv_wc wc;

	assert_non_null(srq);
	rc_fill(a->p, a->cap, A_SEED);
	rc_create_uc_end(env, &env->a, NULL);
	rc_create_uc_end(env, &env->b, srq);
	rc_connect_uc(env, env->a.qp, env->b.qp->qp_num, RC_ACCESS_ALL);
	rc_connect_uc(env, env->b.qp, env->a.qp->qp_num, RC_ACCESS_ALL);
	assert_int_equal(ibv_post_srq_recv(srq, &rwr, &rbad), 0);
	assert_int_equal(post(env->a.qp, 1, IBV_WR_SEND, &ss, 0, 0), 0);
	rc_expect_wc(env->b.rcq, 3, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.byte_len, 48);
	assert_int_equal(wc.qp_num, env->b.qp->qp_num);
	rc_expect_bytes(b->p, a->p, 48, "the SEND");
	rc_destroy_end(&env->b);
	assert_int_equal(ibv_destroy_srq(srq), 0);
}

int main(void)
{
	struct case_list l = { 0 };

	case_add(&l, RC_TEST(write_places_exact_bytes));
	case_add(&l, RC_TEST(write_with_imm_consumes_a_receive));
	case_add(&l, RC_TEST(send_and_send_with_imm));
	CASE_TABLE(&l, run_dropped, rc_setup, rc_teardown, dropped);
	case_add(&l, RC_TEST(send_without_receive_dropped));
	case_add(&l, RC_TEST(send_too_large_dropped_receive_kept));
	case_add(&l, RC_TEST(read_atomics_send_inv_refused_at_post));
	case_add(&l, RC_TEST(peer_gone_sends_still_complete));
	case_add(&l, RC_TEST(local_key_error_completes_in_error));
	case_add(&l, RC_TEST(uc_on_srq));
	return case_run(&l);
}
