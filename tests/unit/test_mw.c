// SPDX-License-Identifier: MIT
/*
 * Memory windows through the real verbs API. B owns the memory and binds windows on its QP;
 * A reaches B's memory through them. Accesses inside a window succeed; outside it (even inside
 * its MR), without its rights, after a rebind, an invalidation (local or remote), a dealloc or
 * the MR's deregistration they are refused with IBV_WC_REM_ACCESS_ERR and B's memory stays as
 * it was, byte for byte. Run under `softrdma run` (ctest does).
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

#define A_SEED		0x6b
#define B_SEED		0xd2
#define WIN_OFF		256	/* the window, from the start of B's middle page */
#define WIN_LEN		1024
#define MR_RIGHTS	(RC_ACCESS_ALL | IBV_ACCESS_MW_BIND)

/* B's memory is three guarded pages, all in one MR that allows binding. */
struct scene {
	struct rc_env *env;
	struct rc_buf *a, *b;
	struct ibv_mr *amr, *bmr;
	uint8_t *win;		/* where windows start: B's middle page + WIN_OFF */
};

static void scene_init(struct scene *s, void **state, int b_mr_rights)
{
	struct rc_env *env = *state;

	memset(s, 0, sizeof(*s));
	s->env = env;
	rc_pair(env, NULL, NULL);
	s->a = rc_alloc(env, 3 * env->page);
	s->b = rc_alloc(env, 3 * env->page);
	s->amr = rc_reg(env, env->pd, s->a->p, s->a->cap, RC_ACCESS_ALL);
	s->bmr = rc_reg(env, env->pd, s->b->p, s->b->cap, b_mr_rights);
	s->win = s->b->p + env->page + WIN_OFF;
	rc_fill(s->a->p, s->a->cap, A_SEED);
	rc_fill(s->b->p, s->b->cap, B_SEED);
}

static struct ibv_mw *alloc_mw(struct scene *s, enum ibv_mw_type type)
{
	struct ibv_mw *mw = ibv_alloc_mw(s->env->pd, type);

	assert_non_null(mw);
	assert_int_equal(mw->type, type);
	assert_ptr_equal(mw->pd, s->env->pd);
	return mw;
}

/* The completion of a bind or invalidation B posted: its status, opcode checked. */
static void expect_b_local(struct scene *s, uint64_t wr_id, enum ibv_wc_opcode op,
			   enum ibv_wc_status status)
{
	struct ibv_wc wc;

	rc_expect_wc(s->env->b.scq, wr_id, status, &wc);
	if (status == IBV_WC_SUCCESS)
		assert_int_equal(wc.opcode, op);
}

/* ibv_bind_mw() of a type 1 window on B's QP; the bind's completion has status. */
static void bind1(struct scene *s, struct ibv_mw *mw, struct ibv_mr *mr, uint8_t *addr,
		  uint64_t len, int access, enum ibv_wc_status status)
{
	struct ibv_mw_bind bind = {
		.wr_id = 0xb1,
		.send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = mr, .addr = (uintptr_t)addr, .length = len,
			       .mw_access_flags = (unsigned int)access },
	};
	uint32_t old = mw->rkey;

	assert_int_equal(ibv_bind_mw(s->env->b.qp, mw, &bind), 0);
	/* The next key, differing only in the 8 bits the consumer owns. */
	assert_int_equal(mw->rkey, ibv_inc_rkey(old));
	expect_b_local(s, 0xb1, IBV_WC_BIND_MW, status);
}

/* A BIND_MW work request on qp (type 2) giving the window rkey. */
static int post_bind2(struct ibv_qp *qp, struct ibv_mw *mw, uint32_t rkey, struct ibv_mr *mr,
		      uint8_t *addr, uint64_t len, int access)
{
	struct ibv_send_wr wr = {
		.wr_id = 0xb2,
		.opcode = IBV_WR_BIND_MW,
		.send_flags = IBV_SEND_SIGNALED,
		.bind_mw = {
			.mw = mw,
			.rkey = rkey,
			.bind_info = { .mr = mr, .addr = (uintptr_t)addr, .length = len,
				       .mw_access_flags = (unsigned int)access },
		},
	};
	struct ibv_send_wr *bad = NULL;

	return ibv_post_send(qp, &wr, &bad);
}

static uint32_t bind2(struct scene *s, struct ibv_mw *mw, uint8_t *addr, uint64_t len,
		      int access)
{
	uint32_t rkey = ibv_inc_rkey(mw->rkey);

	assert_int_equal(post_bind2(s->env->b.qp, mw, rkey, s->bmr, addr, len, access), 0);
	expect_b_local(s, 0xb2, IBV_WC_BIND_MW, IBV_WC_SUCCESS);
	return rkey;
}

/* The scene with B's MR rights, and a type 1 window bound to [win, win + WIN_LEN). */
static struct ibv_mw *bound_type1(struct scene *s, void **state, int mr_rights, int rights)
{
	struct ibv_mw *mw;

	scene_init(s, state, mr_rights);
	mw = alloc_mw(s, IBV_MW_TYPE_1);
	bind1(s, mw, s->bmr, s->win, WIN_LEN, rights, IBV_WC_SUCCESS);
	return mw;
}

/* The scene, and a type 2 window bound to [win, win + WIN_LEN) for WRITEs; its key. */
static uint32_t bound_type2(struct scene *s, void **state, struct ibv_mw **mw)
{
	scene_init(s, state, MR_RIGHTS);
	*mw = alloc_mw(s, IBV_MW_TYPE_2);
	return bind2(s, *mw, s->win, WIN_LEN, IBV_ACCESS_REMOTE_WRITE);
}

/* B's LOCAL_INV (wr_id 7) of key; its completion has status. */
static void local_inv(struct scene *s, uint32_t key, enum ibv_wc_status status)
{
	struct ibv_send_wr wr = { .wr_id = 7, .opcode = IBV_WR_LOCAL_INV,
				  .send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = key };
	struct ibv_send_wr *bad = NULL;

	assert_int_equal(ibv_post_send(s->env->b.qp, &wr, &bad), 0);
	expect_b_local(s, 7, IBV_WC_LOCAL_INV, status);
}

/* A's WRITE of len bytes from its buffer start to raddr under rkey; its completion status. */
static void write_via(struct scene *s, uint64_t wr_id, uint32_t rkey, uint8_t *raddr,
		      uint32_t len, enum ibv_wc_status status)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->a->p, .length = len, .lkey = s->amr->lkey };

	assert_int_equal(rc_post_rdma(s->env->a.qp, wr_id, IBV_WR_RDMA_WRITE, &sge, 1,
				      (uintptr_t)raddr, rkey), 0);
	rc_expect_wc(s->env->a.scq, wr_id, status, NULL);
}

static void expect_b_untouched(const struct scene *s)
{
	rc_expect_pattern(s->b->p, s->b->cap, B_SEED, "B's memory");
}

/* B's memory: the pattern, except A's first n bytes at at. */
static void expect_b_written(const struct scene *s, const uint8_t *at, size_t n)
{
	size_t off = (size_t)(at - s->b->p);

	rc_expect_pattern(s->b->p, off, B_SEED, "B's memory before the data");
	rc_expect_bytes(at, s->a->p, n, "B's memory: the data");
	rc_expect_pattern_range(s->b->p, off + n, s->b->cap, B_SEED, "B's memory after it");
}

/* A refused access: A's WR failed, B's QP went to ERR with its access event, memory kept. */
static void expect_refused(struct scene *s, uint64_t wr_id, uint32_t rkey, uint8_t *raddr,
			   uint32_t len)
{
	write_via(s, wr_id, rkey, raddr, len, IBV_WC_REM_ACCESS_ERR);
	rc_expect_async_qp(s->env, IBV_EVENT_QP_ACCESS_ERR, s->env->b.qp);
	rc_wait_state(s->env->b.qp, IBV_QPS_ERR);
	expect_b_untouched(s);
}

/* A's WRITE (wr_id) of len bytes at at under key succeeds and lands; B's memory is reset. */
static void write_lands(struct scene *s, uint64_t wr_id, uint32_t key, uint8_t *at,
			uint32_t len)
{
	write_via(s, wr_id, key, at, len, IBV_WC_SUCCESS);
	expect_b_written(s, at, len);
	rc_fill(s->b->p, s->b->cap, B_SEED);
}

/* ---- A type 1 window's key, refused: what was done to the window, and where A writes ---- */

enum window_fate {
	UNBOUND,	/* never bound */
	KEPT,		/* bound, and left so */
	UNBOUND_BY_ZERO_BIND,	/* bound, then bound to nothing */
	DEALLOCATED,	/* bound, then deallocated */
	MR_DEREGISTERED,	/* bound to an MR that is then deregistered */
};

struct refusal_case {
	const char *name;
	enum window_fate fate;
	int rights;		/* the window's, when bound (to [win, win + WIN_LEN)) */
	int at;			/* A's WRITE: at win + at, of len bytes */
	uint32_t len;
};

static const struct refusal_case refusals[] = {
	/* An unbound window's key opens nothing. */
	{ "test_unbound_window_refused", UNBOUND, 0, 0, 16 },
	/* Inside the MR, straddling the window's start. */
	{ "test_type1_below_window_refused", KEPT, IBV_ACCESS_REMOTE_WRITE, -8, 16 },
	{ "test_type1_past_window_refused", KEPT, IBV_ACCESS_REMOTE_WRITE, WIN_LEN - 8, 9 },
	/* The MR grants REMOTE_WRITE, the window only READ: the window's rights decide. */
	{ "test_window_lacks_right_refused", KEPT, IBV_ACCESS_REMOTE_READ, 0, 16 },
	/* A type 1 window is unbound by binding it to nothing. */
	{ "test_type1_zero_length_bind_unbinds", UNBOUND_BY_ZERO_BIND, IBV_ACCESS_REMOTE_WRITE,
	  0, 16 },
	{ "test_dealloc_kills_key", DEALLOCATED, IBV_ACCESS_REMOTE_WRITE, 0, 16 },
	{ "test_dereg_mr_kills_window", MR_DEREGISTERED, IBV_ACCESS_REMOTE_WRITE, 0, 16 },
};

static void run_refusal(void **state)
{
	const struct refusal_case *c = ((struct rc_env *)*state)->param;
	struct ibv_mr *mr;
	struct ibv_mw *mw;
	struct scene s;
	uint32_t rkey;

	scene_init(&s, state, MR_RIGHTS);
	mr = s.bmr;
	if (c->fate == MR_DEREGISTERED)
		mr = rc_reg(s.env, s.env->pd, s.b->p, s.b->cap, MR_RIGHTS);
	mw = alloc_mw(&s, IBV_MW_TYPE_1);
	if (c->fate != UNBOUND)
		bind1(&s, mw, mr, s.win, WIN_LEN, c->rights, IBV_WC_SUCCESS);
	if (c->fate == UNBOUND_BY_ZERO_BIND)
		bind1(&s, mw, NULL, NULL, 0, 0, IBV_WC_SUCCESS);
	if (c->fate == MR_DEREGISTERED)
		rc_dereg(s.env, mr);
	rkey = mw->rkey;
	if (c->fate == DEALLOCATED) {
		assert_int_equal(ibv_dealloc_mw(mw), 0);
		mw = NULL;
	}
	expect_refused(&s, 1, rkey, s.win + c->at, c->len);
	if (mw)
		assert_int_equal(ibv_dealloc_mw(mw), 0);
}

/* ---- A type 1 bind that fails: B's MR, where the window would lie, and its rights ---- */

struct bind_error_case {
	const char *name;
	int mr_rights;
	bool past_mr_end;	/* the window: the MR's last 8 bytes and 8 past, else the usual */
	int rights;
	bool qp_err_awaited;	/* B's QP is then waited for in ERR */
};

static const struct bind_error_case bind_errors[] = {
	{ "test_bind_needs_mw_bind_on_mr", RC_ACCESS_ALL, false, IBV_ACCESS_REMOTE_READ, true },
	{ "test_bind_outside_mr_fails", MR_RIGHTS, true, IBV_ACCESS_REMOTE_READ, false },
	{ "test_writable_window_needs_local_write", IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND,
	  false, IBV_ACCESS_REMOTE_WRITE, false },
};

static void run_bind_error(void **state)
{
	const struct bind_error_case *c = ((struct rc_env *)*state)->param;
	struct ibv_mw *mw;
	struct scene s;

	scene_init(&s, state, c->mr_rights);
	mw = alloc_mw(&s, IBV_MW_TYPE_1);
	if (c->past_mr_end)
		bind1(&s, mw, s.bmr, s.b->p + s.b->cap - 8, 16, c->rights, IBV_WC_MW_BIND_ERR);
	else
		bind1(&s, mw, s.bmr, s.win, WIN_LEN, c->rights, IBV_WC_MW_BIND_ERR);
	if (c->qp_err_awaited)
		rc_wait_state(s.env->b.qp, IBV_QPS_ERR);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
}

static void test_device_advertises_windows(void **state)
{
	struct rc_env *env = *state;
	struct ibv_device_attr attr;

	assert_int_equal(ibv_query_device(env->ctx, &attr), 0);
	assert_true(attr.max_mw > 0);
	assert_true(attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
	assert_true(attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
}

static void test_alloc_and_dealloc(void **state)
{
	struct rc_env *env = *state;
	struct ibv_mw *m1 = ibv_alloc_mw(env->pd, IBV_MW_TYPE_1);
	struct ibv_mw *m2 = ibv_alloc_mw(env->pd, IBV_MW_TYPE_2);

	assert_non_null(m1);
	assert_non_null(m2);
	assert_ptr_equal(m1->context, env->ctx);
	assert_true(m1->rkey != m2->rkey);
	assert_int_equal(ibv_dealloc_mw(m1), 0);
	assert_int_equal(ibv_dealloc_mw(m2), 0);
	errno = 0;
	assert_null(ibv_alloc_mw(env->pd, (enum ibv_mw_type)3));
	assert_int_equal(errno, EINVAL);
}

static void test_type1_access_inside_window(void **state)
{
	struct scene s;
	struct ibv_mw *mw;
	struct ibv_sge sge;
	uint64_t old;

	mw = bound_type1(&s, state, MR_RIGHTS, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			 IBV_ACCESS_REMOTE_ATOMIC);
	/* Both ends of the window. */
	write_lands(&s, 1, mw->rkey, s.win, WIN_LEN);
	write_lands(&s, 2, mw->rkey, s.win + WIN_LEN - 8, 8);
	/* A READ lands in A's memory, an atomic returns the old word. */
	sge = (struct ibv_sge){ .addr = (uintptr_t)s.a->p + 100, .length = 64,
				.lkey = s.amr->lkey };
	assert_int_equal(rc_post_rdma(s.env->a.qp, 3, IBV_WR_RDMA_READ, &sge, 1,
				      (uintptr_t)s.win + 64, mw->rkey), 0);
	rc_expect_wc(s.env->a.scq, 3, IBV_WC_SUCCESS, NULL);
	rc_expect_bytes(s.a->p + 100, s.win + 64, 64, "the READ");
	memcpy(&old, s.win + 8, 8);
	sge = (struct ibv_sge){ .addr = (uintptr_t)s.a->p + 200, .length = 8,
				.lkey = s.amr->lkey };
	assert_int_equal(rc_post_atomic(s.env->a.qp, 4, IBV_WR_ATOMIC_FETCH_AND_ADD, &sge,
					(uintptr_t)s.win + 8, mw->rkey, 5, 0), 0);
	rc_expect_wc(s.env->a.scq, 4, IBV_WC_SUCCESS, NULL);
	rc_expect_bytes(s.a->p + 200, &old, 8, "the atomic's result");
	old += 5;
	rc_expect_bytes(s.win + 8, &old, 8, "the word after FETCH_ADD");
	rc_expect_no_async(s.env, 0);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
}

/* A window may grant what its MR does not, remotely: C10-74 asks only for LOCAL_WRITE. */
static void test_window_grants_more_than_mr(void **state)
{
	struct scene s;
	struct ibv_mw *mw;

	mw = bound_type1(&s, state, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND,
			 IBV_ACCESS_REMOTE_WRITE);
	write_lands(&s, 1, mw->rkey, s.win + 10, 20);
	/* The MR's own key still opens nothing remotely. */
	expect_refused(&s, 2, s.bmr->rkey, s.win + 10, 20);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
}

static void test_type1_rebind_kills_old_key(void **state)
{
	struct scene s;
	struct ibv_mw *mw;
	uint32_t old;

	mw = bound_type1(&s, state, MR_RIGHTS, IBV_ACCESS_REMOTE_WRITE);
	old = mw->rkey;
	bind1(&s, mw, s.bmr, s.win + 2048, 512, IBV_ACCESS_REMOTE_WRITE, IBV_WC_SUCCESS);
	write_lands(&s, 1, mw->rkey, s.win + 2048, 512);
	expect_refused(&s, 2, old, s.win, 16);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
}

/* A window's key is an rkey only: as an lkey it is refused locally. */
static void test_window_key_is_no_lkey(void **state)
{
	struct scene s;
	struct ibv_mw *mw;
	struct ibv_sge sge;

	mw = bound_type1(&s, state, MR_RIGHTS, IBV_ACCESS_REMOTE_READ);
	sge = (struct ibv_sge){ .addr = (uintptr_t)s.win, .length = 16, .lkey = mw->rkey };
	assert_int_equal(rc_post_rdma(s.env->b.qp, 1, IBV_WR_RDMA_WRITE, &sge, 1,
				      (uintptr_t)s.a->p, s.amr->rkey), 0);
	rc_expect_wc(s.env->b.scq, 1, IBV_WC_LOC_PROT_ERR, NULL);
	rc_expect_pattern(s.a->p, s.a->cap, A_SEED, "A's memory");
	assert_int_equal(ibv_dealloc_mw(mw), 0);
}

static void test_type2_bind_access_local_invalidate(void **state)
{
	struct scene s;
	struct ibv_mw *mw;
	uint32_t rkey;

	rkey = bound_type2(&s, state, &mw);
	write_lands(&s, 1, rkey, s.win + 100, 200);
	/* Bound already: a type 2 window must be invalidated before it is bound again. */
	assert_int_equal(post_bind2(s.env->b.qp, mw, ibv_inc_rkey(rkey), s.bmr, s.win, 8,
				    IBV_ACCESS_REMOTE_WRITE), 0);
	expect_b_local(&s, 0xb2, IBV_WC_BIND_MW, IBV_WC_MW_BIND_ERR);
	rc_wait_state(s.env->b.qp, IBV_QPS_ERR);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
}

static void test_type2_local_invalidate_then_refused(void **state)
{
	struct scene s;
	struct ibv_mw *mw;
	uint32_t rkey;

	rkey = bound_type2(&s, state, &mw);
	write_via(&s, 1, rkey, s.win, 8, IBV_WC_SUCCESS);
	rc_fill(s.b->p, s.b->cap, B_SEED);
	local_inv(&s, rkey, IBV_WC_SUCCESS);
	expect_refused(&s, 2, rkey, s.win, 8);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
}

/* Invalidated, a type 2 window can be bound again, under a new key. */
static void test_type2_rebind_after_invalidate(void **state)
{
	struct scene s;
	struct ibv_mw *mw;
	uint32_t k1, k2;

	k1 = bound_type2(&s, state, &mw);
	local_inv(&s, k1, IBV_WC_SUCCESS);
	mw->rkey = k1;
	k2 = bind2(&s, mw, s.win + 512, 64, IBV_ACCESS_REMOTE_WRITE);
	assert_int_not_equal(k1, k2);
	write_lands(&s, 1, k2, s.win + 512, 64);
	expect_refused(&s, 2, k1, s.win, 8);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
}

/*
 * Only the low 8 bits of a type 2 window's key are the consumer's: a bind takes those and
 * ignores the rest, as rxe_do_bind_mw() and mlx5 do. The window then answers to the key it
 * has, not to the one asked for.
 */
static void test_type2_bind_takes_low_key_bits(void **state)
{
	struct scene s;
	struct ibv_mw *mw;
	uint32_t asked, key;

	scene_init(&s, state, MR_RIGHTS);
	mw = alloc_mw(&s, IBV_MW_TYPE_2);
	asked = ibv_inc_rkey(mw->rkey) ^ 0x5a5a0000u;
	key = (mw->rkey & ~0xffu) | (asked & 0xffu);
	assert_int_equal(post_bind2(s.env->b.qp, mw, asked, s.bmr, s.win, WIN_LEN,
				    IBV_ACCESS_REMOTE_WRITE), 0);
	expect_b_local(&s, 0xb2, IBV_WC_BIND_MW, IBV_WC_SUCCESS);
	write_lands(&s, 1, key, s.win, 64);
	expect_refused(&s, 2, asked, s.win, 8);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
}

static void test_local_invalidate_of_type1_fails(void **state)
{
	struct scene s;
	struct ibv_mw *mw;

	mw = bound_type1(&s, state, MR_RIGHTS, IBV_ACCESS_REMOTE_WRITE);
	local_inv(&s, mw->rkey, IBV_WC_LOC_QP_OP_ERR);
	rc_wait_state(s.env->b.qp, IBV_QPS_ERR);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
}

/* B posts a 64-byte receive (wr_id 9); A sends len bytes (wr_id 5) invalidating key. */
static void send_with_inv(struct scene *s, uint32_t len, uint32_t key)
{
	struct ibv_sge rs = { .addr = (uintptr_t)s->b->p, .length = 64, .lkey = s->bmr->lkey };
	struct ibv_sge ss = { .addr = (uintptr_t)s->a->p, .length = len, .lkey = s->amr->lkey };
	struct ibv_send_wr wr = { .wr_id = 5, .sg_list = &ss, .num_sge = 1,
				  .opcode = IBV_WR_SEND_WITH_INV,
				  .send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = key };
	struct ibv_send_wr *bad;

	rc_post_recv(s->env->b.qp, 9, &rs, 1);
	assert_int_equal(ibv_post_send(s->env->a.qp, &wr, &bad), 0);
}

/* A's SEND_WITH_INV names B's window: B's receive says so, and the key is dead. */
static void test_type2_remote_invalidate_then_refused(void **state)
{
	struct scene s;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	uint32_t rkey;

	rkey = bound_type2(&s, state, &mw);
	send_with_inv(&s, 24, rkey);
	rc_expect_wc(s.env->a.scq, 5, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, IBV_WC_SEND);
	rc_expect_wc(s.env->b.rcq, 9, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, 24);
	assert_true(wc.wc_flags & IBV_WC_WITH_INV);
	assert_false(wc.wc_flags & IBV_WC_WITH_IMM);
	assert_int_equal(wc.invalidated_rkey, rkey);
	expect_b_written(&s, s.b->p, 24);
	rc_fill(s.b->p, s.b->cap, B_SEED);
	expect_refused(&s, 6, rkey, s.win, 8);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
}

/* Invalidating a key that is no bound type 2 window: an invalid request, as rxe says. */
static void test_send_with_inv_bad_key(void **state)
{
	struct scene s;

	scene_init(&s, state, MR_RIGHTS);
	send_with_inv(&s, 8, s.bmr->rkey);	/* an MR's key: MRs are not invalidated */
	rc_expect_wc(s.env->a.scq, 5, IBV_WC_REM_INV_REQ_ERR, NULL);
	rc_expect_wc(s.env->b.rcq, 9, IBV_WC_REM_INV_REQ_ERR, NULL);
	rc_wait_state(s.env->b.qp, IBV_QPS_ERR);
	rc_wait_state(s.env->a.qp, IBV_QPS_ERR);
	/* The error is the receive's: no async event. */
	rc_expect_no_async(s.env, RC_QUIET_MS);
}

/* A type 2B window belongs to the QP it was bound on: another QP's requests are refused. */
static void test_type2_other_qp_refused(void **state)
{
	struct scene s;
	struct rc_qp_opts o;
	struct rc_end c = { 0 }, d = { 0 };
	struct ibv_sge sge;
	struct ibv_mw *mw;
	uint32_t rkey;

	rkey = bound_type2(&s, state, &mw);
	rc_default_opts(&o);
	rc_create_end(s.env, &o, &c);
	rc_create_end(s.env, &o, &d);
	assert_int_equal(rc_modify_init(c.qp, &o), 0);
	assert_int_equal(rc_modify_init(d.qp, &o), 0);
	assert_int_equal(rc_modify_rtr(c.qp, &o, d.qp->qp_num, &s.env->gid), 0);
	assert_int_equal(rc_modify_rtr(d.qp, &o, c.qp->qp_num, &s.env->gid), 0);
	assert_int_equal(rc_modify_rts(c.qp, &o), 0);
	assert_int_equal(rc_modify_rts(d.qp, &o), 0);
	sge = (struct ibv_sge){ .addr = (uintptr_t)s.a->p, .length = 8, .lkey = s.amr->lkey };
	/* D is in the window's PD, but the window was bound through B. */
	assert_int_equal(rc_post_rdma(c.qp, 1, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)s.win,
				      rkey), 0);
	rc_expect_wc(c.scq, 1, IBV_WC_REM_ACCESS_ERR, NULL);
	rc_expect_async_qp(s.env, IBV_EVENT_QP_ACCESS_ERR, d.qp);
	expect_b_untouched(&s);
	/* Through B it still works. */
	write_via(&s, 2, rkey, s.win, 8, IBV_WC_SUCCESS);
	expect_b_written(&s, s.win, 8);
	rc_destroy_end(&c);
	rc_destroy_end(&d);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
}

/* The same through the ibv_wr_* API of a QP created for it. */
static void test_wr_api_bind_and_local_invalidate(void **state)
{
	struct rc_env *env = *state;
	struct rc_qp_opts o;
	struct ibv_qp_init_attr_ex init = {
		.qp_type = IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV |
				  IBV_QP_EX_WITH_SEND_WITH_INV,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_mw_bind_info info;
	struct ibv_qp_ex *qpx;
	struct ibv_mw *mw;
	struct scene s;
	uint32_t rkey;

	memset(&s, 0, sizeof(s));
	s.env = env;
	rc_default_opts(&o);
	rc_create_end(env, &o, &env->a);
	env->b.scq = ibv_create_cq(env->ctx, 16, NULL, NULL, 0);
	env->b.rcq = ibv_create_cq(env->ctx, 16, NULL, NULL, 0);
	assert_non_null(env->b.scq);
	assert_non_null(env->b.rcq);
	init.send_cq = env->b.scq;
	init.recv_cq = env->b.rcq;
	init.pd = env->pd;
	env->b.qp = ibv_create_qp_ex(env->ctx, &init);
	assert_non_null(env->b.qp);
	rc_connect(env->b.qp, &o, env->a.qp->qp_num, &env->gid);
	rc_connect(env->a.qp, &o, env->b.qp->qp_num, &env->gid);
	s.a = rc_alloc(env, env->page);
	s.b = rc_alloc(env, 3 * env->page);
	s.amr = rc_reg(env, env->pd, s.a->p, s.a->cap, RC_ACCESS_ALL);
	s.bmr = rc_reg(env, env->pd, s.b->p, s.b->cap, MR_RIGHTS);
	s.win = s.b->p + env->page + WIN_OFF;
	rc_fill(s.a->p, s.a->cap, A_SEED);
	rc_fill(s.b->p, s.b->cap, B_SEED);

	mw = alloc_mw(&s, IBV_MW_TYPE_2);
	rkey = ibv_inc_rkey(mw->rkey);
	info = (struct ibv_mw_bind_info){ .mr = s.bmr, .addr = (uintptr_t)s.win,
					  .length = WIN_LEN,
					  .mw_access_flags = IBV_ACCESS_REMOTE_WRITE };
	qpx = ibv_qp_to_qp_ex(env->b.qp);
	assert_non_null(qpx);
	ibv_wr_start(qpx);
	qpx->wr_id = 0xb2;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(qpx, mw, rkey, &info);
	assert_int_equal(ibv_wr_complete(qpx), 0);
	expect_b_local(&s, 0xb2, IBV_WC_BIND_MW, IBV_WC_SUCCESS);
	write_lands(&s, 1, rkey, s.win + 8, 8);

	ibv_wr_start(qpx);
	qpx->wr_id = 7;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_local_inv(qpx, rkey);
	assert_int_equal(ibv_wr_complete(qpx), 0);
	expect_b_local(&s, 7, IBV_WC_LOCAL_INV, IBV_WC_SUCCESS);
	expect_refused(&s, 2, rkey, s.win + 8, 8);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
}

int main(void)
{
	struct case_list l = { 0 };

	case_add(&l, RC_TEST(device_advertises_windows));
	case_add(&l, RC_TEST(alloc_and_dealloc));
	case_add(&l, RC_TEST(type1_access_inside_window));
	case_add(&l, RC_TEST(window_grants_more_than_mr));
	CASE_TABLE(&l, run_refusal, rc_setup, rc_teardown, refusals);
	CASE_TABLE(&l, run_bind_error, rc_setup, rc_teardown, bind_errors);
	case_add(&l, RC_TEST(type1_rebind_kills_old_key));
	case_add(&l, RC_TEST(window_key_is_no_lkey));
	case_add(&l, RC_TEST(type2_bind_access_local_invalidate));
	case_add(&l, RC_TEST(type2_local_invalidate_then_refused));
	case_add(&l, RC_TEST(type2_rebind_after_invalidate));
	case_add(&l, RC_TEST(type2_bind_takes_low_key_bits));
	case_add(&l, RC_TEST(local_invalidate_of_type1_fails));
	case_add(&l, RC_TEST(type2_remote_invalidate_then_refused));
	case_add(&l, RC_TEST(send_with_inv_bad_key));
	case_add(&l, RC_TEST(type2_other_qp_refused));
	case_add(&l, RC_TEST(wr_api_bind_and_local_invalidate));
	return case_run(&l);
}
