// SPDX-License-Identifier: MIT
/*
 * docs/semantics.md's remote-access table and local-key table, row by row, through the
 * real verbs API: QP A (requester) and QP B (responder) connected to each other in this
 * process. Every refusal checks the requester's completion, that the requester's QP is in
 * ERR and flushes later WRs, that the responder's QP is in ERR and flushes its receives,
 * the responder's async event (or its absence), and the memory on both sides byte by
 * byte, including the bytes just outside the region. Run under `softrdma run` (ctest does).
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

#define NO_EVENT	((enum ibv_event_type)-1)
#define REMOTE_SEED	0x51	/* B's memory around and in the region */
#define LOCAL_SEED	0xa7	/* A's memory */
#define RECV_SEED	0x3c	/* B's receive buffers */
#define IMM		0x5eed1234u
#define GARBAGE_RKEY	0xdeadbeefu
#define GARBAGE_VA	0xdead0000beefull
#define FOLLOW_UP_OFF	2048	/* A's buffer offset a follow-up WR uses */
#define FOLLOW_UP_RADDR	512	/* region offset a follow-up WR uses */

/*
 * B's memory is three guarded pages and its MR the middle one, so the bytes right before
 * and after the region are readable and checked; A's is one guarded page.
 */
struct scene {
	struct rc_env *env;
	size_t page;
	struct rc_buf *rbuf;
	uint8_t *region;
	struct ibv_mr *rmr;	/* region, env->pd, every right */
	struct rc_buf *lbuf;
	struct ibv_mr *lmr;	/* A's page, LOCAL_WRITE */
	struct rc_buf *vbuf;
	struct ibv_mr *vmr;	/* B's receive buffers, LOCAL_WRITE */
};

struct op_req {
	enum ibv_wr_opcode op;
	uint64_t raddr;
	uint32_t rkey;
	uint32_t len;		/* bytes moved; 8 for an atomic */
	int num_sge;		/* 0 or 1 */
	uint64_t laddr;
	uint32_t lkey;
	uint64_t compare_add, swap;
};

static void scene_init(struct scene *s, void **state, int b_access, uint8_t a_rnr_retry)
{
	struct rc_qp_opts oa, ob;

	memset(s, 0, sizeof(*s));
	s->env = *state;
	s->page = s->env->page;
	rc_default_opts(&oa);
	rc_default_opts(&ob);
	oa.rnr_retry = a_rnr_retry;
	ob.access = b_access;
	rc_pair(s->env, &oa, &ob);

	s->rbuf = rc_alloc(s->env, 3 * s->page);
	s->region = s->rbuf->p + s->page;
	s->rmr = rc_reg(s->env, s->env->pd, s->region, s->page, RC_ACCESS_ALL);
	s->lbuf = rc_alloc(s->env, s->page);
	s->lmr = rc_reg(s->env, s->env->pd, s->lbuf->p, s->page, IBV_ACCESS_LOCAL_WRITE);
	s->vbuf = rc_alloc(s->env, s->page);
	s->vmr = rc_reg(s->env, s->env->pd, s->vbuf->p, s->page, IBV_ACCESS_LOCAL_WRITE);
	rc_fill(s->rbuf->p, s->rbuf->cap, REMOTE_SEED);
	rc_fill(s->lbuf->p, s->lbuf->cap, LOCAL_SEED);
	rc_fill(s->vbuf->p, s->vbuf->cap, RECV_SEED);
}

static void expect_untouched(const struct scene *s)
{
	rc_expect_pattern(s->rbuf->p, s->rbuf->cap, REMOTE_SEED, "B's memory (region and around)");
	rc_expect_pattern(s->lbuf->p, s->lbuf->cap, LOCAL_SEED, "A's memory");
	rc_expect_pattern(s->vbuf->p, s->vbuf->cap, RECV_SEED, "B's receive buffers");
}

static bool is_atomic(enum ibv_wr_opcode op)
{
	return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

static int right_needed(enum ibv_wr_opcode op)
{
	if (op == IBV_WR_RDMA_READ)
		return IBV_ACCESS_REMOTE_READ;
	if (is_atomic(op))
		return IBV_ACCESS_REMOTE_ATOMIC;
	return IBV_ACCESS_REMOTE_WRITE;
}

/* A request at region offset 64 with the scene's keys; tests then spoil one thing. */
static struct op_req default_req(const struct scene *s, enum ibv_wr_opcode op)
{
	struct op_req r = {
		.op = op,
		.raddr = (uintptr_t)s->region + 64,
		.rkey = s->rmr->rkey,
		.len = is_atomic(op) ? 8 : 16,
		.num_sge = 1,
		.laddr = (uintptr_t)s->lbuf->p,
		.lkey = s->lmr->lkey,
	};

	return r;
}

static void build_wr(const struct op_req *r, uint64_t wr_id, struct ibv_send_wr *wr,
		     struct ibv_sge *sge)
{
	memset(wr, 0, sizeof(*wr));
	sge->addr = r->laddr;
	sge->length = r->len;
	sge->lkey = r->lkey;
	wr->wr_id = wr_id;
	wr->sg_list = sge;
	wr->num_sge = r->num_sge;
	wr->opcode = r->op;
	wr->send_flags = IBV_SEND_SIGNALED;
	if (is_atomic(r->op)) {
		wr->wr.atomic.remote_addr = r->raddr;
		wr->wr.atomic.rkey = r->rkey;
		wr->wr.atomic.compare_add = r->compare_add;
		wr->wr.atomic.swap = r->swap;
	} else {
		wr->wr.rdma.remote_addr = r->raddr;
		wr->wr.rdma.rkey = r->rkey;
	}
	if (r->op == IBV_WR_RDMA_WRITE_WITH_IMM || r->op == IBV_WR_SEND_WITH_IMM)
		wr->imm_data = htonl(IMM);
}

/* A valid 8-byte WRITE (or READ) that would change memory if it were ever executed. */
static struct op_req follow_up(const struct scene *s, enum ibv_wr_opcode op)
{
	struct op_req r = default_req(s, op);

	r.raddr = (uintptr_t)s->region + FOLLOW_UP_RADDR;
	r.laddr = (uintptr_t)s->lbuf->p + FOLLOW_UP_OFF;
	r.len = 8;
	return r;
}

static void post_req(struct ibv_qp *qp, const struct op_req *r, uint64_t wr_id)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge sge;

	build_wr(r, wr_id, &wr, &sge);
	assert_int_equal(ibv_post_send(qp, &wr, &bad), 0);
}

/* Posts req (wr_id 1) chained with a valid follow-up (wr_id 2) in one call. */
static void post_with_follow_up(struct scene *s, const struct op_req *req,
				enum ibv_wr_opcode follow_op)
{
	struct op_req f = follow_up(s, follow_op);
	struct ibv_send_wr wr1, wr2, *bad = NULL;
	struct ibv_sge sge1, sge2;

	build_wr(req, 1, &wr1, &sge1);
	build_wr(&f, 2, &wr2, &sge2);
	wr1.next = &wr2;
	assert_int_equal(ibv_post_send(s->env->a.qp, &wr1, &bad), 0);
}

static void post_two_recvs(struct scene *s)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->vbuf->p, .length = 64, .lkey = s->vmr->lkey };

	rc_post_recv(s->env->b.qp, 100, &sge, 1);
	sge.addr += 64;
	rc_post_recv(s->env->b.qp, 101, &sge, 1);
}

/* The requester failed: its QP is in ERR, and a WR posted now is flushed. */
static void expect_requester_failed(struct scene *s, enum ibv_wr_opcode follow_op)
{
	struct op_req f = follow_up(s, follow_op);

	assert_int_equal(rc_state(s->env->a.qp), IBV_QPS_ERR);
	post_req(s->env->a.qp, &f, 3);
	rc_expect_wc(s->env->a.scq, 3, IBV_WC_WR_FLUSH_ERR, NULL);
}

static void expect_cqs_empty(struct scene *s)
{
	rc_expect_no_wc(s->env->a.scq, 0);
	rc_expect_no_wc(s->env->a.rcq, 0);
	rc_expect_no_wc(s->env->b.scq, 0);
	rc_expect_no_wc(s->env->b.rcq, 0);
}

/*
 * The responder refused req: the requester's completion is want and the follow-up is
 * flushed; B is in ERR, its first receive completes with recv_first (WR_FLUSH_ERR when the
 * request took none) and the second is flushed; B raised event (or nothing); no memory
 * changed anywhere.
 */
static void expect_refused(struct scene *s, const struct op_req *req, enum ibv_wc_status want,
			   enum ibv_event_type event, enum ibv_wc_status recv_first)
{
	struct rc_env *env = s->env;
	struct ibv_wc wc;

	post_two_recvs(s);
	post_with_follow_up(s, req, IBV_WR_RDMA_WRITE);
	rc_expect_wc(env->a.scq, 1, want, &wc);
	assert_int_equal(wc.qp_num, env->a.qp->qp_num);
	rc_expect_wc(env->a.scq, 2, IBV_WC_WR_FLUSH_ERR, NULL);
	expect_requester_failed(s, IBV_WR_RDMA_WRITE);

	rc_wait_state(env->b.qp, IBV_QPS_ERR);
	rc_expect_wc(env->b.rcq, 100, recv_first, &wc);
	assert_int_equal(wc.qp_num, env->b.qp->qp_num);
	rc_expect_wc(env->b.rcq, 101, IBV_WC_WR_FLUSH_ERR, NULL);
	if (event != NO_EVENT)
		rc_expect_async_qp(env, event, env->b.qp);
	rc_expect_no_async(env, RC_QUIET_MS);
	expect_cqs_empty(s);
	expect_untouched(s);
}

/* req succeeded: A's completion, both QPs still RTS, no async event. */
static void expect_done(struct scene *s, const struct op_req *req, enum ibv_wc_opcode opcode)
{
	struct ibv_wc wc;

	post_req(s->env->a.qp, req, 7);
	rc_expect_wc(s->env->a.scq, 7, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, opcode);
	assert_int_equal(wc.qp_num, s->env->a.qp->qp_num);
	assert_int_equal(rc_state(s->env->a.qp), IBV_QPS_RTS);
	assert_int_equal(rc_state(s->env->b.qp), IBV_QPS_RTS);
	rc_expect_no_async(s->env, 0);
}

/* B's memory as it must be: the pattern, with want[0, n) at region offset off. */
static void expect_remote(const struct scene *s, size_t off, const void *want, size_t n)
{
	size_t at = s->page + off;

	rc_expect_pattern(s->rbuf->p, at, REMOTE_SEED, "B's memory before the placed range");
	rc_expect_bytes(s->rbuf->p + at, want, n, "B's memory in the placed range");
	rc_expect_pattern_range(s->rbuf->p, at + n, s->rbuf->cap, REMOTE_SEED,
				"B's memory after the placed range");
}

/* A's memory: the pattern with want[0, n) at offset 0. */
static void expect_local(const struct scene *s, const void *want, size_t n)
{
	rc_expect_bytes(s->lbuf->p, want, n, "A's memory in the placed range");
	rc_expect_pattern_range(s->lbuf->p, n, s->lbuf->cap, LOCAL_SEED,
				"A's memory after the placed range");
}

/* ---- Row by row: the refusals ---- */

enum refusal {
	QP_NO_RIGHT,		/* row 1 */
	BAD_RKEY,		/* row 4 */
	DEREGISTERED,		/* row 5 */
	OTHER_PD,		/* row 6 */
	MR_NO_RIGHT,		/* row 7 */
	OOB_BELOW,		/* row 8: starts before the region */
	OOB_ABOVE,		/* row 8: ends past the region */
	WRAP_END,		/* row 8: runs past 2^64 - 1, region at the top of the space */
	WRAP_START,		/* row 8: from 2^64 - 8 around to a region at iova 0 */
	MISALIGNED,		/* row 9 */
	MISALIGNED_OOB,		/* rows 8 and 9: row 8 is tested first */
};

struct refusal_case {
	const char *name;
	enum ibv_wr_opcode op;
	enum refusal k;
};

static void run_refusal(void **state)
{
	const struct refusal_case *c = ((struct rc_env *)*state)->param;
	enum ibv_wr_opcode op = c->op;
	enum refusal k = c->k;
	bool atomic = is_atomic(op), imm = op == IBV_WR_RDMA_WRITE_WITH_IMM;
	int b_access = RC_ACCESS_ALL;
	enum ibv_wc_status want = IBV_WC_REM_ACCESS_ERR;
	enum ibv_event_type event = IBV_EVENT_QP_ACCESS_ERR;
	enum ibv_wc_status recv_first = IBV_WC_WR_FLUSH_ERR;
	struct ibv_mr *mr;
	struct op_req req;
	struct scene s;

	if (k == QP_NO_RIGHT)
		b_access &= ~right_needed(op);
	scene_init(&s, state, b_access, 7);
	req = default_req(&s, op);
	switch (k) {
	case QP_NO_RIGHT:
		break;
	case BAD_RKEY:
		req.rkey ^= 1;	/* the region's slot with a wrong tag */
		break;
	case DEREGISTERED:
		mr = rc_reg(s.env, s.env->pd, s.region, s.page, RC_ACCESS_ALL);
		req.rkey = mr->rkey;
		rc_dereg(s.env, mr);	/* dead at once: no wait before the request */
		break;
	case OTHER_PD:
		req.rkey = rc_reg(s.env, s.env->pd2, s.region, s.page, RC_ACCESS_ALL)->rkey;
		break;
	case MR_NO_RIGHT:
		req.rkey = rc_reg(s.env, s.env->pd, s.region, s.page,
				  RC_ACCESS_ALL & ~right_needed(op))->rkey;
		break;
	case OOB_BELOW:
		req.raddr = (uintptr_t)s.region - 8;
		break;
	case OOB_ABOVE:
		req.raddr = (uintptr_t)s.region + s.page - (atomic ? 0 : 8);
		break;
	case WRAP_END:
		/* The region is [2^64 - 2 pages, 2^64 - 1 page); the range ends past 2^64 - 1. */
		req.rkey = rc_reg_iova(s.env, s.env->pd, s.region, s.page,
				       UINT64_MAX - 2 * s.page + 1, RC_ACCESS_ALL)->rkey;
		req.raddr = UINT64_MAX - (atomic ? 7 : 15);
		req.len = atomic ? 8 : 32;
		break;
	case WRAP_START:
		/* The region is [0, 1 page); the range [2^64 - 8, 2^64 + 8) wraps into it. */
		req.rkey = rc_reg_iova(s.env, s.env->pd, s.region, s.page, 0,
				       RC_ACCESS_ALL)->rkey;
		req.raddr = UINT64_MAX - 7;
		break;
	case MISALIGNED:
		req.raddr += 4;
		break;
	case MISALIGNED_OOB:
		req.raddr = (uintptr_t)s.region + s.page - 4;
		break;
	}
	if (k == QP_NO_RIGHT || k == MISALIGNED) {
		want = IBV_WC_REM_INV_REQ_ERR;
		event = IBV_EVENT_QP_REQ_ERR;
	} else if (imm) {
		/* The error is tied to the receive WRITE_WITH_IMM took: it says so, no event. */
		recv_first = IBV_WC_LOC_ACCESS_ERR;
		event = NO_EVENT;
	}
	expect_refused(&s, &req, want, event, recv_first);
}

static const struct refusal_case refusals[] = {
	{ "test_write_qp_lacks_remote_write", IBV_WR_RDMA_WRITE, QP_NO_RIGHT },
	{ "test_write_bad_rkey", IBV_WR_RDMA_WRITE, BAD_RKEY },
	{ "test_write_deregistered_mr", IBV_WR_RDMA_WRITE, DEREGISTERED },
	{ "test_write_mr_of_other_pd", IBV_WR_RDMA_WRITE, OTHER_PD },
	{ "test_write_mr_lacks_remote_write", IBV_WR_RDMA_WRITE, MR_NO_RIGHT },
	{ "test_write_out_of_bounds_below", IBV_WR_RDMA_WRITE, OOB_BELOW },
	{ "test_write_out_of_bounds_above", IBV_WR_RDMA_WRITE, OOB_ABOVE },
	{ "test_write_range_past_2_64", IBV_WR_RDMA_WRITE, WRAP_END },
	{ "test_write_range_wrapping_to_0", IBV_WR_RDMA_WRITE, WRAP_START },

	{ "test_read_qp_lacks_remote_read", IBV_WR_RDMA_READ, QP_NO_RIGHT },
	{ "test_read_bad_rkey", IBV_WR_RDMA_READ, BAD_RKEY },
	{ "test_read_deregistered_mr", IBV_WR_RDMA_READ, DEREGISTERED },
	{ "test_read_mr_of_other_pd", IBV_WR_RDMA_READ, OTHER_PD },
	{ "test_read_mr_lacks_remote_read", IBV_WR_RDMA_READ, MR_NO_RIGHT },
	{ "test_read_out_of_bounds_below", IBV_WR_RDMA_READ, OOB_BELOW },
	{ "test_read_out_of_bounds_above", IBV_WR_RDMA_READ, OOB_ABOVE },
	{ "test_read_range_past_2_64", IBV_WR_RDMA_READ, WRAP_END },
	{ "test_read_range_wrapping_to_0", IBV_WR_RDMA_READ, WRAP_START },

	{ "test_cas_qp_lacks_remote_atomic", IBV_WR_ATOMIC_CMP_AND_SWP, QP_NO_RIGHT },
	{ "test_cas_bad_rkey", IBV_WR_ATOMIC_CMP_AND_SWP, BAD_RKEY },
	{ "test_cas_deregistered_mr", IBV_WR_ATOMIC_CMP_AND_SWP, DEREGISTERED },
	{ "test_cas_mr_of_other_pd", IBV_WR_ATOMIC_CMP_AND_SWP, OTHER_PD },
	{ "test_cas_mr_lacks_remote_atomic", IBV_WR_ATOMIC_CMP_AND_SWP, MR_NO_RIGHT },
	{ "test_cas_out_of_bounds_below", IBV_WR_ATOMIC_CMP_AND_SWP, OOB_BELOW },
	{ "test_cas_out_of_bounds_above", IBV_WR_ATOMIC_CMP_AND_SWP, OOB_ABOVE },
	{ "test_cas_range_past_2_64", IBV_WR_ATOMIC_CMP_AND_SWP, WRAP_END },
	{ "test_cas_range_wrapping_to_0", IBV_WR_ATOMIC_CMP_AND_SWP, WRAP_START },
	{ "test_cas_misaligned", IBV_WR_ATOMIC_CMP_AND_SWP, MISALIGNED },
	{ "test_cas_misaligned_and_out_of_bounds", IBV_WR_ATOMIC_CMP_AND_SWP, MISALIGNED_OOB },

	{ "test_fadd_qp_lacks_remote_atomic", IBV_WR_ATOMIC_FETCH_AND_ADD, QP_NO_RIGHT },
	{ "test_fadd_bad_rkey", IBV_WR_ATOMIC_FETCH_AND_ADD, BAD_RKEY },
	{ "test_fadd_deregistered_mr", IBV_WR_ATOMIC_FETCH_AND_ADD, DEREGISTERED },
	{ "test_fadd_mr_of_other_pd", IBV_WR_ATOMIC_FETCH_AND_ADD, OTHER_PD },
	{ "test_fadd_mr_lacks_remote_atomic", IBV_WR_ATOMIC_FETCH_AND_ADD, MR_NO_RIGHT },
	{ "test_fadd_out_of_bounds_below", IBV_WR_ATOMIC_FETCH_AND_ADD, OOB_BELOW },
	{ "test_fadd_out_of_bounds_above", IBV_WR_ATOMIC_FETCH_AND_ADD, OOB_ABOVE },
	{ "test_fadd_range_past_2_64", IBV_WR_ATOMIC_FETCH_AND_ADD, WRAP_END },
	{ "test_fadd_range_wrapping_to_0", IBV_WR_ATOMIC_FETCH_AND_ADD, WRAP_START },
	{ "test_fadd_misaligned", IBV_WR_ATOMIC_FETCH_AND_ADD, MISALIGNED },
	{ "test_fadd_misaligned_and_out_of_bounds", IBV_WR_ATOMIC_FETCH_AND_ADD, MISALIGNED_OOB },

	{ "test_write_imm_qp_lacks_remote_write", IBV_WR_RDMA_WRITE_WITH_IMM, QP_NO_RIGHT },
	{ "test_write_imm_bad_rkey", IBV_WR_RDMA_WRITE_WITH_IMM, BAD_RKEY },
	{ "test_write_imm_deregistered_mr", IBV_WR_RDMA_WRITE_WITH_IMM, DEREGISTERED },
	{ "test_write_imm_mr_of_other_pd", IBV_WR_RDMA_WRITE_WITH_IMM, OTHER_PD },
	{ "test_write_imm_mr_lacks_remote_write", IBV_WR_RDMA_WRITE_WITH_IMM, MR_NO_RIGHT },
	{ "test_write_imm_out_of_bounds_below", IBV_WR_RDMA_WRITE_WITH_IMM, OOB_BELOW },
	{ "test_write_imm_out_of_bounds_above", IBV_WR_RDMA_WRITE_WITH_IMM, OOB_ABOVE },
	{ "test_write_imm_range_past_2_64", IBV_WR_RDMA_WRITE_WITH_IMM, WRAP_END },
	{ "test_write_imm_range_wrapping_to_0", IBV_WR_RDMA_WRITE_WITH_IMM, WRAP_START },
};

/* ---- Zero length: row 3, and row 1 before it ---- */

struct zero_length_case {
	const char *name;
	enum ibv_wr_opcode op;
	enum ibv_wc_opcode opcode;	/* of A's completion, when the request succeeds */
};

/* Row 1 comes before row 3: even a zero-length request needs the QP's right (as rxe). */
static const struct zero_length_case zero_length_without_right[] = {
	{ "test_write_zero_length_qp_lacks_remote_write", IBV_WR_RDMA_WRITE, 0 },
	{ "test_read_zero_length_qp_lacks_remote_read", IBV_WR_RDMA_READ, 0 },
};

/* Row 3: zero length succeeds without a key lookup. */
static const struct zero_length_case zero_length_garbage[] = {
	{ "test_write_zero_length_garbage_rkey_succeeds", IBV_WR_RDMA_WRITE, IBV_WC_RDMA_WRITE },
	{ "test_read_zero_length_garbage_rkey_succeeds", IBV_WR_RDMA_READ, IBV_WC_RDMA_READ },
	{ "test_write_imm_zero_length_garbage_rkey_succeeds", IBV_WR_RDMA_WRITE_WITH_IMM,
	  IBV_WC_RDMA_WRITE },
};

/* A request of no bytes, with a garbage key and address. */
static struct op_req zero_length_req(const struct scene *s, enum ibv_wr_opcode op)
{
	struct op_req req = default_req(s, op);

	req.num_sge = 0;
	req.len = 0;
	req.rkey = GARBAGE_RKEY;
	req.raddr = GARBAGE_VA;
	return req;
}

static void run_zero_length_without_right(void **state)
{
	const struct zero_length_case *c = ((struct rc_env *)*state)->param;
	enum ibv_wr_opcode op = c->op;
	struct op_req req;
	struct scene s;

	scene_init(&s, state, RC_ACCESS_ALL & ~right_needed(op), 7);
	req = zero_length_req(&s, op);
	expect_refused(&s, &req, IBV_WC_REM_INV_REQ_ERR, IBV_EVENT_QP_REQ_ERR,
		       IBV_WC_WR_FLUSH_ERR);
}

/*
 * A receive is taken before the key is checked, so a WRITE_WITH_IMM with a bad key and no
 * receive posted meets RNR NAKs, not an access error (semantics.md, after the table).
 */
static void test_write_imm_bad_rkey_without_receive_is_rnr(void **state)
{
	struct op_req req;
	struct scene s;

	scene_init(&s, state, RC_ACCESS_ALL, 0);
	req = default_req(&s, IBV_WR_RDMA_WRITE_WITH_IMM);
	req.rkey ^= 1;
	post_req(s.env->a.qp, &req, 1);
	rc_expect_wc(s.env->a.scq, 1, IBV_WC_RNR_RETRY_EXC_ERR, NULL);
	assert_int_equal(rc_state(s.env->a.qp), IBV_QPS_ERR);
	assert_int_equal(rc_state(s.env->b.qp), IBV_QPS_RTS);
	rc_expect_no_async(s.env, RC_QUIET_MS);
	expect_cqs_empty(&s);
	expect_untouched(&s);
}

static void run_zero_length_garbage(void **state)
{
	const struct zero_length_case *c = ((struct rc_env *)*state)->param;
	struct op_req req;
	struct scene s;

	scene_init(&s, state, RC_ACCESS_ALL, 7);
	req = zero_length_req(&s, c->op);
	post_two_recvs(&s);
	expect_done(&s, &req, c->opcode);
	if (c->op == IBV_WR_RDMA_WRITE_WITH_IMM) {
		struct ibv_wc wc;

		rc_expect_wc(s.env->b.rcq, 100, IBV_WC_SUCCESS, &wc);
		assert_int_equal(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
		assert_int_equal(wc.byte_len, 0);
		assert_true(wc.wc_flags & IBV_WC_WITH_IMM);
		assert_int_equal(ntohl(wc.imm_data), IMM);
	}
	expect_cqs_empty(&s);
	expect_untouched(&s);
}

/* ---- Allowed: placed exactly, nothing around it touched ---- */

/* A WRITE or READ at region offset off, of len bytes (0: the whole page). */
struct allowed_case {
	const char *name;
	enum ibv_wr_opcode op;
	size_t off;
	uint32_t len;
	bool source_checked;	/* the side the data came from is checked unchanged too */
};

static const struct allowed_case allowed[] = {
	{ "test_write_allowed_placed_exactly", IBV_WR_RDMA_WRITE, 13, 1000, true },
	{ "test_write_whole_region_up_to_both_bounds", IBV_WR_RDMA_WRITE, 0, 0, false },
	{ "test_read_allowed_placed_exactly", IBV_WR_RDMA_READ, 13, 1000, true },
	{ "test_read_whole_region_up_to_both_bounds", IBV_WR_RDMA_READ, 0, 0, true },
};

static void run_allowed(void **state)
{
	const struct allowed_case *c = ((struct rc_env *)*state)->param;
	struct op_req req;
	struct scene s;

	scene_init(&s, state, RC_ACCESS_ALL, 7);
	req = default_req(&s, c->op);
	req.raddr = (uintptr_t)s.region + c->off;
	req.len = c->len ? c->len : (uint32_t)s.page;
	if (c->op == IBV_WR_RDMA_WRITE) {
		expect_done(&s, &req, IBV_WC_RDMA_WRITE);
		expect_remote(&s, c->off, s.lbuf->p, req.len);
		if (c->source_checked)
			rc_expect_pattern(s.lbuf->p, s.lbuf->cap, LOCAL_SEED, "A's memory");
	} else {
		expect_done(&s, &req, IBV_WC_RDMA_READ);
		expect_local(&s, s.region + c->off, req.len);
		if (c->source_checked)
			rc_expect_pattern(s.rbuf->p, s.rbuf->cap, REMOTE_SEED, "B's memory");
	}
}

static void test_write_at_high_iova_placed_exactly(void **state)
{
	struct op_req req;
	struct scene s;
	uint64_t iova;

	scene_init(&s, state, RC_ACCESS_ALL, 7);
	iova = UINT64_MAX - 2 * s.page + 1;
	req = default_req(&s, IBV_WR_RDMA_WRITE);
	req.rkey = rc_reg_iova(s.env, s.env->pd, s.region, s.page, iova, RC_ACCESS_ALL)->rkey;
	/* The last 32 bytes of the region, named by their iova. */
	req.raddr = iova + s.page - 32;
	req.len = 32;
	expect_done(&s, &req, IBV_WC_RDMA_WRITE);
	expect_remote(&s, s.page - 32, s.lbuf->p, 32);
}

static void test_cas_allowed_at_region_start(void **state)
{
	uint64_t orig, swap = 0x1122334455667788ull;
	struct op_req req;
	struct scene s;

	scene_init(&s, state, RC_ACCESS_ALL, 7);
	memcpy(&orig, s.region, 8);
	req = default_req(&s, IBV_WR_ATOMIC_CMP_AND_SWP);
	req.raddr = (uintptr_t)s.region;
	req.compare_add = orig;
	req.swap = swap;
	expect_done(&s, &req, IBV_WC_COMP_SWAP);
	expect_remote(&s, 0, &swap, 8);
	expect_local(&s, &orig, 8);
}

static void test_fadd_allowed_at_region_end(void **state)
{
	uint64_t orig, sum;
	struct op_req req;
	struct scene s;

	scene_init(&s, state, RC_ACCESS_ALL, 7);
	memcpy(&orig, s.region + s.page - 8, 8);
	sum = orig + 0x0102030405ull;
	req = default_req(&s, IBV_WR_ATOMIC_FETCH_AND_ADD);
	req.raddr = (uintptr_t)s.region + s.page - 8;
	req.compare_add = 0x0102030405ull;
	expect_done(&s, &req, IBV_WC_FETCH_ADD);
	expect_remote(&s, s.page - 8, &sum, 8);
	expect_local(&s, &orig, 8);
}

static void test_write_imm_allowed_placed_exactly(void **state)
{
	struct op_req req;
	struct ibv_wc wc;
	struct scene s;

	scene_init(&s, state, RC_ACCESS_ALL, 7);
	post_two_recvs(&s);
	req = default_req(&s, IBV_WR_RDMA_WRITE_WITH_IMM);
	req.raddr = (uintptr_t)s.region + 100;
	req.len = 300;
	expect_done(&s, &req, IBV_WC_RDMA_WRITE);
	rc_expect_wc(s.env->b.rcq, 100, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	assert_int_equal(wc.byte_len, 300);
	assert_int_equal(ntohl(wc.imm_data), IMM);
	expect_remote(&s, 100, s.lbuf->p, 300);
	/* The data went to the named range, not into the receive buffer. */
	rc_expect_pattern(s.vbuf->p, s.vbuf->cap, RECV_SEED, "B's receive buffers");
}

/* ---- Local keys: the requester's own SGEs ---- */

/* The requester failed with want before B saw anything: B is RTS, its receives intact. */
static void expect_local_refusal(struct scene *s, const struct op_req *req,
				 enum ibv_wr_opcode follow_op)
{
	struct rc_env *env = s->env;
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };

	post_two_recvs(s);
	post_with_follow_up(s, req, follow_op);
	rc_expect_wc(env->a.scq, 1, IBV_WC_LOC_PROT_ERR, NULL);
	rc_expect_wc(env->a.scq, 2, IBV_WC_WR_FLUSH_ERR, NULL);
	expect_requester_failed(s, follow_op);
	assert_int_equal(rc_state(env->b.qp), IBV_QPS_RTS);
	rc_expect_no_async(env, RC_QUIET_MS);
	expect_cqs_empty(s);
	/* B's receives were never consumed: taking B to ERR flushes both, in order. */
	assert_int_equal(ibv_modify_qp(env->b.qp, &err, IBV_QP_STATE), 0);
	rc_expect_wc(env->b.rcq, 100, IBV_WC_WR_FLUSH_ERR, NULL);
	rc_expect_wc(env->b.rcq, 101, IBV_WC_WR_FLUSH_ERR, NULL);
	rc_expect_no_async(env, 0);
}

enum local_spoil {
	LKEY_AND_RKEY,		/* both keys wrong: the lkey is checked first */
	LKEY,			/* the lkey's tag is wrong */
	LKEY_OF_OTHER_PD,	/* A's page registered again, in pd2 */
	SOURCE_PAST_MR,		/* the last 8 bytes of A's MR and 8 past it (the guard page) */
	LKEY_NO_LOCAL_WRITE,	/* A's page registered again without LOCAL_WRITE */
};

struct local_case {
	const char *name;
	enum ibv_wr_opcode op;
	enum local_spoil spoil;
};

static const struct local_case local_refusals[] = {
	{ "test_write_bad_lkey_checked_before_rkey", IBV_WR_RDMA_WRITE, LKEY_AND_RKEY },
	{ "test_write_imm_bad_lkey_checked_before_rkey", IBV_WR_RDMA_WRITE_WITH_IMM,
	  LKEY_AND_RKEY },
	{ "test_send_bad_lkey", IBV_WR_SEND, LKEY },
	{ "test_write_source_mr_of_other_pd", IBV_WR_RDMA_WRITE, LKEY_OF_OTHER_PD },
	{ "test_write_source_out_of_bounds", IBV_WR_RDMA_WRITE, SOURCE_PAST_MR },
	{ "test_read_target_bad_lkey", IBV_WR_RDMA_READ, LKEY },
	{ "test_read_target_lacks_local_write", IBV_WR_RDMA_READ, LKEY_NO_LOCAL_WRITE },
};

/* The request refused locally; the follow-up is a READ after a READ, else a WRITE. */
static void run_local_refusal(void **state)
{
	const struct local_case *c = ((struct rc_env *)*state)->param;
	struct op_req req;
	struct scene s;

	scene_init(&s, state, RC_ACCESS_ALL, 7);
	req = default_req(&s, c->op);
	switch (c->spoil) {
	case LKEY_AND_RKEY:
		req.lkey ^= 1;
		req.rkey ^= 1;	/* would be REM_ACCESS_ERR if it were looked at first */
		break;
	case LKEY:
		req.lkey ^= 1;
		break;
	case LKEY_OF_OTHER_PD:
		req.lkey = rc_reg(s.env, s.env->pd2, s.lbuf->p, s.page,
				  IBV_ACCESS_LOCAL_WRITE)->lkey;
		break;
	case SOURCE_PAST_MR:
		req.laddr = (uintptr_t)s.lbuf->p + s.page - 8;
		break;
	case LKEY_NO_LOCAL_WRITE:
		req.lkey = rc_reg(s.env, s.env->pd, s.lbuf->p, s.page, 0)->lkey;
		break;
	}
	expect_local_refusal(&s, &req, c->op == IBV_WR_RDMA_READ ? IBV_WR_RDMA_READ :
				       IBV_WR_RDMA_WRITE);
	expect_untouched(&s);
}

/* The responder executed the atomic (its memory changed); only the result was refused. */
static void test_atomic_result_bad_lkey(void **state)
{
	uint64_t orig, sum;
	struct op_req req;
	struct scene s;

	scene_init(&s, state, RC_ACCESS_ALL, 7);
	req = default_req(&s, IBV_WR_ATOMIC_FETCH_AND_ADD);
	req.lkey ^= 1;
	req.compare_add = 3;
	memcpy(&orig, s.region + 64, 8);
	sum = orig + 3;
	expect_local_refusal(&s, &req, IBV_WR_RDMA_READ);
	expect_remote(&s, 64, &sum, 8);
	rc_expect_pattern(s.lbuf->p, s.lbuf->cap, LOCAL_SEED, "A's memory");
}

/* A receive whose lkey is bad: it reports the error, the requester gets REM_OP_ERR. */
static void test_receive_bad_lkey(void **state)
{
	struct rc_env *env;
	struct op_req req;
	struct ibv_sge sge;
	struct scene s;

	scene_init(&s, state, RC_ACCESS_ALL, 7);
	env = s.env;
	sge.addr = (uintptr_t)s.vbuf->p;
	sge.length = 64;
	sge.lkey = s.vmr->lkey ^ 1;
	rc_post_recv(env->b.qp, 100, &sge, 1);
	sge.lkey = s.vmr->lkey;
	sge.addr += 64;
	rc_post_recv(env->b.qp, 101, &sge, 1);
	req = default_req(&s, IBV_WR_SEND);
	post_with_follow_up(&s, &req, IBV_WR_RDMA_WRITE);
	rc_expect_wc(env->a.scq, 1, IBV_WC_REM_OP_ERR, NULL);
	rc_expect_wc(env->a.scq, 2, IBV_WC_WR_FLUSH_ERR, NULL);
	expect_requester_failed(&s, IBV_WR_RDMA_WRITE);
	rc_wait_state(env->b.qp, IBV_QPS_ERR);
	rc_expect_wc(env->b.rcq, 100, IBV_WC_LOC_PROT_ERR, NULL);
	rc_expect_wc(env->b.rcq, 101, IBV_WC_WR_FLUSH_ERR, NULL);
	rc_expect_no_async(env, RC_QUIET_MS);
	expect_cqs_empty(&s);
	expect_untouched(&s);
}

/* A zero-length SGE is skipped without a lookup, on both sides: its lkey may be garbage. */
static void test_zero_length_sges_with_garbage_lkey_skipped(void **state)
{
	struct ibv_sge ss[3], rs[3];
	struct ibv_wc wc;
	struct scene s;

	scene_init(&s, state, RC_ACCESS_ALL, 7);
	ss[0] = (struct ibv_sge){ (uintptr_t)s.lbuf->p, 10, s.lmr->lkey };
	ss[1] = (struct ibv_sge){ 0, 0, s.lmr->lkey ^ 1 };
	ss[2] = (struct ibv_sge){ (uintptr_t)s.lbuf->p + 10, 20, s.lmr->lkey };
	rs[0] = (struct ibv_sge){ (uintptr_t)s.vbuf->p, 10, s.vmr->lkey };
	rs[1] = (struct ibv_sge){ 0, 0, GARBAGE_RKEY };
	rs[2] = (struct ibv_sge){ (uintptr_t)s.vbuf->p + 100, 50, s.vmr->lkey };
	rc_post_recv(s.env->b.qp, 100, rs, 3);
	{
		struct ibv_send_wr wr = { .wr_id = 1, .sg_list = ss, .num_sge = 3,
					  .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED };
		struct ibv_send_wr *bad;

		assert_int_equal(ibv_post_send(s.env->a.qp, &wr, &bad), 0);
	}
	rc_expect_wc(s.env->a.scq, 1, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(s.env->b.rcq, 100, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.byte_len, 30);
	rc_expect_bytes(s.vbuf->p, s.lbuf->p, 10, "first receive SGE");
	rc_expect_pattern_range(s.vbuf->p, 10, 100, RECV_SEED, "between the receive SGEs");
	rc_expect_bytes(s.vbuf->p + 100, s.lbuf->p + 10, 20, "last receive SGE");
	rc_expect_pattern_range(s.vbuf->p, 120, s.vbuf->cap, RECV_SEED,
				"B's receive buffer after the data");
	assert_int_equal(rc_state(s.env->a.qp), IBV_QPS_RTS);
	assert_int_equal(rc_state(s.env->b.qp), IBV_QPS_RTS);
	rc_expect_no_async(s.env, 0);
}

#define TABLE(run, rows) CASE_TABLE(&l, run, rc_setup, rc_teardown, rows)

int main(void)
{
	struct case_list l = { 0 };

	TABLE(run_allowed, allowed);
	case_add(&l, RC_TEST(write_at_high_iova_placed_exactly));
	case_add(&l, RC_TEST(cas_allowed_at_region_start));
	case_add(&l, RC_TEST(fadd_allowed_at_region_end));
	case_add(&l, RC_TEST(write_imm_allowed_placed_exactly));
	TABLE(run_zero_length_garbage, zero_length_garbage);
	TABLE(run_zero_length_without_right, zero_length_without_right);
	TABLE(run_refusal, refusals);
	case_add(&l, RC_TEST(write_imm_bad_rkey_without_receive_is_rnr));
	TABLE(run_local_refusal, local_refusals);
	case_add(&l, RC_TEST(atomic_result_bad_lkey));
	case_add(&l, RC_TEST(receive_bad_lkey));
	case_add(&l, RC_TEST(zero_length_sges_with_garbage_lkey_skipped));
	return case_run(&l);
}
