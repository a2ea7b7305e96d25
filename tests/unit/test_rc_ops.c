// SPDX-License-Identifier: MIT
/*
 * RC operations through the real verbs API, QP A to QP B in this process: what arrives,
 * where, with which completion; signaling, RNR, read/atomic credits, flushes, completion
 * events and CQ overrun. Run under `softrdma run` (ctest does).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include <infiniband/verbs.h>

#include "case_table.h"
#include "rc_fixture.h"

#define A_SEED	0x17
#define B_SEED	0x9b
#define IMM	0xc0ffee42u

struct bufs {
	struct rc_env *env;
	struct rc_buf *a, *b;	/* A's and B's memory, every right */
	struct ibv_mr *amr, *bmr;
};

static void bufs_init(struct bufs *m, struct rc_env *env, size_t len)
{
	m->env = env;
	m->a = rc_alloc(env, len);
	m->b = rc_alloc(env, len);
	m->amr = rc_reg(env, env->pd, m->a->p, m->a->cap, RC_ACCESS_ALL);
	m->bmr = rc_reg(env, env->pd, m->b->p, m->b->cap, RC_ACCESS_ALL);
	rc_fill(m->a->p, m->a->cap, A_SEED);
	rc_fill(m->b->p, m->b->cap, B_SEED);
}

/* A pair made with oa and ob (NULL: the defaults) and one page of memory on each side. */
static struct rc_env *pair_with_opts(void **state, struct bufs *m, const struct rc_qp_opts *oa,
				     const struct rc_qp_opts *ob)
{
	struct rc_env *env = *state;

	rc_pair(env, oa, ob);
	bufs_init(m, env, env->page);
	return env;
}

/* A pair with default options and one page of memory on each side. */
static struct rc_env *pair_with_bufs(void **state, struct bufs *m)
{
	return pair_with_opts(state, m, NULL, NULL);
}

static int post_send(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op,
		     struct ibv_sge *sge, int num_sge, unsigned int flags)
{
	struct ibv_send_wr wr = rc_signaled_wr(wr_id, op, sge, num_sge);
	struct ibv_send_wr *bad = NULL;

	wr.send_flags = flags;	/* signaled or not, as the test says */
	wr.imm_data = htonl(IMM);
	return ibv_post_send(qp, &wr, &bad);
}

/* B's memory: the pattern, except want[0, n) at offset off. */
static void expect_b(const struct bufs *m, size_t off, const void *want, size_t n)
{
	rc_expect_pattern(m->b->p, off, B_SEED, "B's memory before the data");
	rc_expect_bytes(m->b->p + off, want, n, "B's memory: the data");
	rc_expect_pattern_range(m->b->p, off + n, m->b->cap, B_SEED, "B's memory after the data");
}

static void test_send_recv_byte_len_and_data(void **state)
{
	struct bufs m;
	struct rc_env *env = pair_with_bufs(state, &m);
	struct ibv_sge rs = rc_sge(m.b->p + 8, 256, m.bmr), ss = rc_sge(m.a->p, 100, m.amr);
	struct ibv_wc wc;

	rc_post_recv(env->b.qp, 1, &rs, 1);
	assert_int_equal(post_send(env->a.qp, 2, IBV_WR_SEND, &ss, 1, IBV_SEND_SIGNALED), 0);
	rc_expect_wc(env->a.scq, 2, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, IBV_WC_SEND);
	assert_int_equal(wc.byte_len, 100);
	rc_expect_wc(env->b.rcq, 1, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, 100);
	assert_int_equal(wc.qp_num, env->b.qp->qp_num);
	assert_int_equal(wc.src_qp, env->a.qp->qp_num);
	assert_false(wc.wc_flags & IBV_WC_WITH_IMM);
	expect_b(&m, 8, m.a->p, 100);
	rc_expect_no_async(env, 0);
}

/* A SEND of nothing, into a receive with no SGEs (sg_list NULL). */
static void test_zero_length_send_into_empty_receive(void **state)
{
	struct bufs m;
	struct rc_env *env = pair_with_bufs(state, &m);
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = NULL, .num_sge = 0 };
	struct ibv_recv_wr *rbad;
	struct ibv_wc wc;

	assert_int_equal(ibv_post_recv(env->b.qp, &rwr, &rbad), 0);
	assert_int_equal(post_send(env->a.qp, 2, IBV_WR_SEND, NULL, 0, IBV_SEND_SIGNALED), 0);
	rc_expect_wc(env->a.scq, 2, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.byte_len, 0);
	rc_expect_wc(env->b.rcq, 1, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, 0);
	rc_expect_pattern(m.b->p, m.b->cap, B_SEED, "B's memory");
}

static void test_send_with_imm(void **state)
{
	struct bufs m;
	struct rc_env *env = pair_with_bufs(state, &m);
	struct ibv_sge rs = rc_sge(m.b->p, 64, m.bmr), ss = rc_sge(m.a->p, 33, m.amr);
	struct ibv_wc wc;

	rc_post_recv(env->b.qp, 1, &rs, 1);
	assert_int_equal(post_send(env->a.qp, 2, IBV_WR_SEND_WITH_IMM, &ss, 1,
				   IBV_SEND_SIGNALED), 0);
	rc_expect_wc(env->a.scq, 2, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, IBV_WC_SEND);
	rc_expect_wc(env->b.rcq, 1, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, 33);
	assert_true(wc.wc_flags & IBV_WC_WITH_IMM);
	assert_int_equal(ntohl(wc.imm_data), IMM);
	expect_b(&m, 0, m.a->p, 33);
}

static void test_write_with_imm(void **state)
{
	struct bufs m;
	struct rc_env *env = pair_with_bufs(state, &m);
	struct ibv_sge rs = rc_sge(m.b->p + 2048, 64, m.bmr), ss = rc_sge(m.a->p, 500, m.amr);
	struct ibv_send_wr wr = {
		.wr_id = 2,
		.sg_list = &ss,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED,
		.imm_data = htonl(IMM),
		.wr.rdma = { .remote_addr = (uintptr_t)m.b->p + 10, .rkey = m.bmr->rkey },
	};
	struct ibv_send_wr *bad;
	struct ibv_wc wc;

	rc_post_recv(env->b.qp, 1, &rs, 1);
	assert_int_equal(ibv_post_send(env->a.qp, &wr, &bad), 0);
	rc_expect_wc(env->a.scq, 2, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, IBV_WC_RDMA_WRITE);
	rc_expect_wc(env->b.rcq, 1, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	assert_int_equal(wc.byte_len, 500);
	assert_true(wc.wc_flags & IBV_WC_WITH_IMM);
	assert_int_equal(ntohl(wc.imm_data), IMM);
	assert_int_equal(wc.src_qp, env->a.qp->qp_num);
	/* The data is at the named address; the receive buffer (at 2048) is untouched. */
	expect_b(&m, 10, m.a->p, 500);
}

static void test_inline_send_takes_data_at_post(void **state)
{
	struct bufs m;
	struct rc_env *env = pair_with_bufs(state, &m);
	struct ibv_sge rs = rc_sge(m.b->p, 64, m.bmr), ss;
	uint8_t data[48], orig[48];
	struct ibv_wc wc;

	rc_fill(data, sizeof(data), 0x42);
	memcpy(orig, data, sizeof(data));
	/* Unregistered memory and no lkey: inline data needs neither. */
	ss.addr = (uintptr_t)data;
	ss.length = sizeof(data);
	ss.lkey = 0;
	rc_post_recv(env->b.qp, 1, &rs, 1);
	assert_int_equal(post_send(env->a.qp, 2, IBV_WR_SEND, &ss, 1,
				   IBV_SEND_SIGNALED | IBV_SEND_INLINE), 0);
	memset(data, 0xee, sizeof(data));
	rc_expect_wc(env->a.scq, 2, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(env->b.rcq, 1, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.byte_len, sizeof(orig));
	expect_b(&m, 0, orig, sizeof(orig));
}

/* Three pieces of a buffer: offset and length of each. */
struct pieces {
	size_t off[3];
	uint32_t len[3];
};

/* The pieces of base (registered in mr) as three SGEs. */
static void sges_of(struct ibv_sge sge[3], uint8_t *base, const struct ibv_mr *mr,
		    const struct pieces *p)
{
	for (int i = 0; i < 3; i++)
		sge[i] = rc_sge(base + p->off[i], p->len[i], mr);
}

/* The pieces' bytes of base, one after the other, into flat. */
static void gather(uint8_t *flat, const uint8_t *base, const struct pieces *p)
{
	for (int i = 0; i < 3; i++) {
		memcpy(flat, base + p->off[i], p->len[i]);
		flat += p->len[i];
	}
}

/* n bytes of flat spread over the pieces of base in order, as a scatter list fills them. */
static void scatter(uint8_t *base, const struct pieces *p, const uint8_t *flat, size_t n)
{
	for (int i = 0; i < 3 && n; i++) {
		size_t k = n < p->len[i] ? n : p->len[i];

		memcpy(base + p->off[i], flat, k);
		flat += k;
		n -= k;
	}
}

static void test_multi_sge_send_and_receive(void **state)
{
	static const struct pieces send = { { 0, 100, 1000 }, { 5, 100, 37 } };
	static const struct pieces recv = { { 0, 500, 1000 }, { 50, 60, 100 } };
	struct bufs m;
	struct rc_env *env = pair_with_bufs(state, &m);
	struct ibv_sge ss[3], rs[3];
	uint8_t msg[142], *want = malloc(m.b->cap);
	struct ibv_wc wc;

	assert_non_null(want);
	sges_of(ss, m.a->p, m.amr, &send);
	sges_of(rs, m.b->p, m.bmr, &recv);
	gather(msg, m.a->p, &send);
	rc_fill(want, m.b->cap, B_SEED);
	scatter(want, &recv, msg, sizeof(msg));	/* the last SGE is filled only in part */

	rc_post_recv(env->b.qp, 1, rs, 3);
	assert_int_equal(post_send(env->a.qp, 2, IBV_WR_SEND, ss, 3, IBV_SEND_SIGNALED), 0);
	rc_expect_wc(env->a.scq, 2, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.byte_len, 142);
	rc_expect_wc(env->b.rcq, 1, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.byte_len, 142);
	rc_expect_bytes(m.b->p, want, m.b->cap, "B's memory");
	free(want);
}

static void test_write_gathers_multiple_sges(void **state)
{
	static const struct pieces src = { { 7, 3000, 64 }, { 9, 1, 90 } };
	struct bufs m;
	struct rc_env *env = pair_with_bufs(state, &m);
	struct ibv_sge ss[3];
	uint8_t want[100];

	sges_of(ss, m.a->p, m.amr, &src);
	gather(want, m.a->p, &src);
	assert_int_equal(rc_post_rdma(env->a.qp, 1, IBV_WR_RDMA_WRITE, ss, 3,
				      (uintptr_t)m.b->p + 333, m.bmr->rkey), 0);
	rc_expect_wc(env->a.scq, 1, IBV_WC_SUCCESS, NULL);
	expect_b(&m, 333, want, sizeof(want));
}

static void test_read_scatters_into_multiple_sges(void **state)
{
	static const struct pieces dst = { { 0, 200, 400 }, { 100, 50, 150 } };
	struct bufs m;
	struct rc_env *env = pair_with_bufs(state, &m);
	struct ibv_sge ls[3];
	uint8_t *want = malloc(m.a->cap);
	struct ibv_wc wc;

	assert_non_null(want);
	sges_of(ls, m.a->p, m.amr, &dst);
	rc_fill(want, m.a->cap, A_SEED);
	scatter(want, &dst, m.b->p + 1000, 300);
	assert_int_equal(rc_post_rdma(env->a.qp, 1, IBV_WR_RDMA_READ, ls, 3,
				      (uintptr_t)m.b->p + 1000, m.bmr->rkey), 0);
	rc_expect_wc(env->a.scq, 1, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, IBV_WC_RDMA_READ);
	rc_expect_bytes(m.a->p, want, m.a->cap, "A's memory");
	rc_expect_pattern(m.b->p, m.b->cap, B_SEED, "B's memory");
	free(want);
}

static void atomic(struct bufs *m, enum ibv_wr_opcode op, size_t off, uint64_t compare_add,
		   uint64_t swap, enum ibv_wc_opcode opcode)
{
	struct ibv_sge ls = rc_sge(m->a->p + 16, 8, m->amr);
	struct ibv_wc wc;

	assert_int_equal(rc_post_atomic(m->env->a.qp, 1, op, &ls, (uintptr_t)m->b->p + off,
					m->bmr->rkey, compare_add, swap), 0);
	rc_expect_wc(m->env->a.scq, 1, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, opcode);
	assert_int_equal(wc.byte_len, 8);
}

static uint64_t word_at(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

/* One atomic on B's word at off; A gets the original word back either way. */
struct atomic_case {
	const char *name;
	enum ibv_wr_opcode op;
	size_t off;
	uint64_t operand;	/* what a CAS swaps in, what a FETCH_ADD adds */
	bool compare_fails;	/* a CAS compares with the original + 1: B keeps its word */
};

static const struct atomic_case atomics[] = {
	{ "test_cas_success_returns_original", IBV_WR_ATOMIC_CMP_AND_SWP, 64,
	  0xfeedfacecafebeefull, false },
	{ "test_cas_failure_returns_original_and_leaves_memory", IBV_WR_ATOMIC_CMP_AND_SWP, 64,
	  0x1111111111111111ull, true },
	{ "test_fadd_returns_original_and_adds", IBV_WR_ATOMIC_FETCH_AND_ADD, 128,
	  0x8000000000000001ull, false },
};

static void run_atomic(void **state)
{
	const struct atomic_case *c = ((struct rc_env *)*state)->param;
	struct bufs m;
	uint64_t orig, after;

	pair_with_bufs(state, &m);
	orig = word_at(m.b->p + c->off);
	if (c->op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		after = orig + c->operand;
		atomic(&m, c->op, c->off, c->operand, 0, IBV_WC_FETCH_ADD);
	} else {
		after = c->operand;
		atomic(&m, c->op, c->off, c->compare_fails ? orig + 1 : orig, c->operand,
		       IBV_WC_COMP_SWAP);
	}
	assert_int_equal(word_at(m.a->p + 16), orig);
	if (c->compare_fails)
		rc_expect_pattern(m.b->p, m.b->cap, B_SEED, "B's memory");
	else
		expect_b(&m, c->off, &after, 8);
}

/* Three unsignaled WRITEs and a signaled one: one completion, all four placed. */
static void test_unsignaled_covered_by_signaled(void **state)
{
	struct bufs m;
	struct rc_env *env = pair_with_bufs(state, &m);
	struct ibv_send_wr wr[4], *bad;
	struct ibv_sge sge[4];
	struct ibv_wc wc;

	for (int i = 0; i < 4; i++) {
		sge[i] = rc_sge(m.a->p + 256 * i, 256, m.amr);
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].wr_id = 10 + i;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_RDMA_WRITE;
		wr[i].send_flags = i == 3 ? IBV_SEND_SIGNALED : 0;
		wr[i].wr.rdma.remote_addr = (uintptr_t)m.b->p + 256 * i;
		wr[i].wr.rdma.rkey = m.bmr->rkey;
		wr[i].next = i < 3 ? &wr[i + 1] : NULL;
	}
	assert_int_equal(ibv_post_send(env->a.qp, wr, &bad), 0);
	rc_expect_wc(env->a.scq, 13, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, IBV_WC_RDMA_WRITE);
	expect_b(&m, 0, m.a->p, 1024);
	rc_expect_no_wc(env->a.scq, RC_QUIET_MS);
	/* The unsignaled WQEs were retired too: the whole queue is usable again. */
	for (uint64_t i = 0; i < 64; i++)
		assert_int_equal(post_send(env->a.qp, 100 + i, IBV_WR_RDMA_WRITE, NULL, 0,
					   i == 63 ? IBV_SEND_SIGNALED : 0), 0);
	rc_expect_wc(env->a.scq, 163, IBV_WC_SUCCESS, NULL);
}

/*
 * A program posting one WR at a time while earlier ones are unanswered: the requester
 * holds the later ones for the next answer and sends them together (doorbell batching,
 * emu/requester.c). Whatever it holds must leave, in order, with every completion; a
 * READ among the WRITEs is held and answered the same way.
 */
static void test_wrs_posted_one_by_one_leave_in_order(void **state)
{
	struct bufs m;
	struct rc_env *env = pair_with_bufs(state, &m);
	struct ibv_sge sge;
	size_t chunk = env->page / 128;	/* the first half written, the second read back */
	uint64_t i;

	for (i = 0; i < 64; i++) {
		bool read = i % 8 == 7;

		sge = rc_sge(m.a->p + i * chunk, (uint32_t)chunk, m.amr);
		assert_int_equal(rc_post_rdma(env->a.qp, i, read ? IBV_WR_RDMA_READ :
					      IBV_WR_RDMA_WRITE, &sge, 1,
					      (uintptr_t)m.b->p + (read ? 64 + i : i) * chunk,
					      m.bmr->rkey), 0);
	}
	for (i = 0; i < 64; i++)
		rc_expect_wc(env->a.scq, i, IBV_WC_SUCCESS, NULL);
	for (i = 0; i < 64; i++) {
		if (i % 8 == 7)	/* A's chunk i now holds B's chunk 64 + i, untouched */
			rc_expect_bytes(m.a->p + i * chunk, m.b->p + (64 + i) * chunk, chunk,
					"A's chunk after its READ");
		else
			rc_expect_bytes(m.b->p + i * chunk, m.a->p + i * chunk, chunk,
					"B's chunk after its WRITE");
	}
	rc_expect_no_wc(env->a.scq, RC_QUIET_MS);
}

static void test_sq_sig_all_signals_every_wr(void **state)
{
	struct rc_env *env = *state;
	struct rc_qp_opts oa;
	struct bufs m;
	struct ibv_sge ss;

	rc_default_opts(&oa);
	oa.sq_sig_all = 1;
	pair_with_opts(state, &m, &oa, NULL);
	ss = rc_sge(m.a->p, 8, m.amr);
	for (uint64_t i = 0; i < 3; i++) {
		struct ibv_send_wr wr = {
			.wr_id = i,
			.sg_list = &ss,
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.wr.rdma = { .remote_addr = (uintptr_t)m.b->p, .rkey = m.bmr->rkey },
		};
		struct ibv_send_wr *bad;

		assert_int_equal(ibv_post_send(env->a.qp, &wr, &bad), 0);
	}
	for (uint64_t i = 0; i < 3; i++)
		rc_expect_wc(env->a.scq, i, IBV_WC_SUCCESS, NULL);
	rc_expect_no_wc(env->a.scq, RC_QUIET_MS);
}

static void test_too_small_receive(void **state)
{
	struct bufs m;
	struct rc_env *env = pair_with_bufs(state, &m);
	struct ibv_sge rs = rc_sge(m.b->p + 100, 16, m.bmr), ss = rc_sge(m.a->p, 32, m.amr);

	rc_post_recv(env->b.qp, 1, &rs, 1);
	assert_int_equal(post_send(env->a.qp, 2, IBV_WR_SEND, &ss, 1, IBV_SEND_SIGNALED), 0);
	rc_expect_wc(env->b.rcq, 1, IBV_WC_LOC_LEN_ERR, NULL);
	rc_expect_wc(env->a.scq, 2, IBV_WC_REM_INV_REQ_ERR, NULL);
	assert_int_equal(rc_state(env->a.qp), IBV_QPS_ERR);
	rc_wait_state(env->b.qp, IBV_QPS_ERR);
	/* The error is the receive's own: no async event. */
	rc_expect_no_async(env, RC_QUIET_MS);
	/* What the receive buffer holds is undefined; nothing outside it may change. */
	rc_expect_pattern(m.b->p, 100, B_SEED, "B's memory before the receive buffer");
	rc_expect_pattern_range(m.b->p, 116, m.b->cap, B_SEED,
				"B's memory after the receive buffer");
}

static void test_rnr_retry_0_exceeded(void **state)
{
	struct rc_env *env = *state;
	struct rc_qp_opts oa;
	struct bufs m;
	struct ibv_sge ss;

	rc_default_opts(&oa);
	oa.rnr_retry = 0;
	pair_with_opts(state, &m, &oa, NULL);
	ss = rc_sge(m.a->p, 64, m.amr);
	assert_int_equal(post_send(env->a.qp, 1, IBV_WR_SEND, &ss, 1, IBV_SEND_SIGNALED), 0);
	rc_expect_wc(env->a.scq, 1, IBV_WC_RNR_RETRY_EXC_ERR, NULL);
	assert_int_equal(rc_state(env->a.qp), IBV_QPS_ERR);
	assert_int_equal(rc_state(env->b.qp), IBV_QPS_RTS);
	rc_expect_no_async(env, 0);
	rc_expect_pattern(m.b->p, m.b->cap, B_SEED, "B's memory");
}

static void test_rnr_retry_7_waits_for_late_receive(void **state)
{
	struct bufs m;
	struct rc_env *env = pair_with_bufs(state, &m);	/* rnr_retry 7: forever */
	struct ibv_sge rs = rc_sge(m.b->p, 128, m.bmr), ss = rc_sge(m.a->p, 100, m.amr);
	struct timespec late = { .tv_nsec = 50 * 1000000 };
	struct ibv_wc wc;

	assert_int_equal(post_send(env->a.qp, 2, IBV_WR_SEND, &ss, 1, IBV_SEND_SIGNALED), 0);
	nanosleep(&late, NULL);
	rc_expect_no_wc(env->a.scq, 0);
	rc_post_recv(env->b.qp, 1, &rs, 1);
	rc_expect_wc(env->b.rcq, 1, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.byte_len, 100);
	rc_expect_wc(env->a.scq, 2, IBV_WC_SUCCESS, NULL);
	expect_b(&m, 0, m.a->p, 100);
	assert_int_equal(rc_state(env->a.qp), IBV_QPS_RTS);
	assert_int_equal(rc_state(env->b.qp), IBV_QPS_RTS);
}

struct credit_case {
	const char *name;
	bool with_atomics;	/* every other WR a FETCH_ADD, else all READs */
};

static const struct credit_case one_credit[] = {
	{ "test_max_rd_atomic_1_many_reads_complete", false },
	{ "test_max_rd_atomic_1_reads_and_atomics_complete", true },
};

/* With one READ/atomic credit, 32 of them posted at once still all complete, in order. */
static void run_one_credit(void **state)
{
	struct rc_env *env = *state;
	bool with_atomics = ((const struct credit_case *)env->param)->with_atomics;
	struct rc_qp_opts oa;
	struct ibv_send_wr wr[32], *bad;
	struct ibv_sge sge[32];
	uint64_t orig[32];
	struct ibv_wc wc;
	struct bufs m;

	rc_default_opts(&oa);
	oa.max_rd_atomic = 1;
	pair_with_opts(state, &m, &oa, NULL);
	for (int i = 0; i < 32; i++) {
		bool fadd = with_atomics && (i & 1);

		memset(&wr[i], 0, sizeof(wr[i]));
		sge[i] = rc_sge(m.a->p + 64 * i, fadd ? 8 : 64, m.amr);
		wr[i].wr_id = i;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].next = i < 31 ? &wr[i + 1] : NULL;
		if (fadd) {
			orig[i] = word_at(m.b->p + 64 * i);
			wr[i].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			wr[i].wr.atomic.remote_addr = (uintptr_t)m.b->p + 64 * i;
			wr[i].wr.atomic.rkey = m.bmr->rkey;
			wr[i].wr.atomic.compare_add = (uint64_t)i;
		} else {
			wr[i].opcode = IBV_WR_RDMA_READ;
			wr[i].wr.rdma.remote_addr = (uintptr_t)m.b->p + 64 * i;
			wr[i].wr.rdma.rkey = m.bmr->rkey;
		}
	}
	assert_int_equal(ibv_post_send(env->a.qp, wr, &bad), 0);
	for (int i = 0; i < 32; i++) {
		rc_expect_wc(env->a.scq, (uint64_t)i, IBV_WC_SUCCESS, &wc);
		assert_int_equal(wc.opcode, wr[i].opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ :
					    IBV_WC_FETCH_ADD);
	}
	for (int i = 0; i < 32; i++) {
		if (wr[i].opcode == IBV_WR_RDMA_READ) {
			rc_expect_bytes(m.a->p + 64 * i, m.b->p + 64 * i, 64, "READ data");
		} else {
			assert_int_equal(word_at(m.a->p + 64 * i), orig[i]);
			assert_int_equal(word_at(m.b->p + 64 * i), orig[i] + (uint64_t)i);
		}
	}
	assert_int_equal(rc_state(env->a.qp), IBV_QPS_RTS);
}

static void test_flush_after_modify_to_err(void **state)
{
	struct bufs m;
	struct rc_env *env = pair_with_bufs(state, &m);
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
	struct ibv_sge rs = rc_sge(m.a->p, 64, m.amr), ss = rc_sge(m.a->p + 64, 8, m.amr);
	struct ibv_wc wc;

	rc_post_recv(env->a.qp, 10, &rs, 1);
	rc_post_recv(env->a.qp, 11, &rs, 1);
	assert_int_equal(ibv_modify_qp(env->a.qp, &err, IBV_QP_STATE), 0);
	assert_int_equal(rc_state(env->a.qp), IBV_QPS_ERR);
	rc_expect_wc(env->a.rcq, 10, IBV_WC_WR_FLUSH_ERR, &wc);
	assert_int_equal(wc.qp_num, env->a.qp->qp_num);
	rc_expect_wc(env->a.rcq, 11, IBV_WC_WR_FLUSH_ERR, NULL);

	/* Posted in ERR: accepted, and flushed at once, signaled or not. */
	assert_int_equal(post_send(env->a.qp, 20, IBV_WR_SEND, &ss, 1, IBV_SEND_SIGNALED), 0);
	assert_int_equal(post_send(env->a.qp, 21, IBV_WR_RDMA_WRITE, &ss, 1, 0), 0);
	rc_post_recv(env->a.qp, 12, &rs, 1);
	rc_expect_wc(env->a.scq, 20, IBV_WC_WR_FLUSH_ERR, NULL);
	rc_expect_wc(env->a.scq, 21, IBV_WC_WR_FLUSH_ERR, NULL);
	rc_expect_wc(env->a.rcq, 12, IBV_WC_WR_FLUSH_ERR, NULL);
	rc_expect_no_wc(env->b.rcq, RC_QUIET_MS);
	/* Asked for: no async event. */
	rc_expect_no_async(env, 0);
	rc_expect_pattern(m.a->p, m.a->cap, A_SEED, "A's memory");
	rc_expect_pattern(m.b->p, m.b->cap, B_SEED, "B's memory");
}

/* The next completion event on env->channel, waited for (bounded): for cq. */
static void expect_cq_event(struct rc_env *env, struct ibv_cq *cq)
{
	struct pollfd pfd = { .fd = env->channel->fd, .events = POLLIN };
	struct ibv_cq *got = NULL;
	void *cq_context = NULL;

	if (poll(&pfd, 1, RC_WAIT_MS) != 1)
		fail_msg("no completion event within %d ms", RC_WAIT_MS);
	assert_int_equal(ibv_get_cq_event(env->channel, &got, &cq_context), 0);
	ibv_ack_cq_events(got, 1);
	assert_ptr_equal(got, cq);
}

static void expect_no_cq_event(struct rc_env *env, int ms)
{
	struct pollfd pfd = { .fd = env->channel->fd, .events = POLLIN };

	if (poll(&pfd, 1, ms) != 0)
		fail_msg("unexpected completion event");
}

static void test_completion_channel_wakes_on_completion(void **state)
{
	struct rc_env *env = *state;
	struct rc_qp_opts oa;
	struct ibv_sge ss;
	struct bufs m;

	rc_default_opts(&oa);
	oa.use_channel = true;
	pair_with_opts(state, &m, &oa, NULL);
	ss = rc_sge(m.a->p, 8, m.amr);

	/* Not armed: a completion raises no event. */
	assert_int_equal(rc_post_rdma(env->a.qp, 1, IBV_WR_RDMA_WRITE, &ss, 1,
				      (uintptr_t)m.b->p, m.bmr->rkey), 0);
	rc_expect_wc(env->a.scq, 1, IBV_WC_SUCCESS, NULL);
	expect_no_cq_event(env, RC_QUIET_MS);

	assert_int_equal(ibv_req_notify_cq(env->a.scq, 0), 0);
	assert_int_equal(rc_post_rdma(env->a.qp, 2, IBV_WR_RDMA_WRITE, &ss, 1,
				      (uintptr_t)m.b->p, m.bmr->rkey), 0);
	expect_cq_event(env, env->a.scq);
	rc_expect_wc(env->a.scq, 2, IBV_WC_SUCCESS, NULL);
	/* One arm, one event. */
	assert_int_equal(rc_post_rdma(env->a.qp, 3, IBV_WR_RDMA_WRITE, &ss, 1,
				      (uintptr_t)m.b->p, m.bmr->rkey), 0);
	rc_expect_wc(env->a.scq, 3, IBV_WC_SUCCESS, NULL);
	expect_no_cq_event(env, RC_QUIET_MS);
}

static void test_solicited_arm_ignores_unsolicited_receive(void **state)
{
	struct rc_env *env = *state;
	struct rc_qp_opts ob;
	struct ibv_sge rs, ss;
	struct ibv_wc wc;
	struct bufs m;

	rc_default_opts(&ob);
	ob.use_channel = true;
	pair_with_opts(state, &m, NULL, &ob);
	rs = rc_sge(m.b->p, 64, m.bmr);
	ss = rc_sge(m.a->p, 16, m.amr);
	rc_post_recv(env->b.qp, 1, &rs, 1);
	rc_post_recv(env->b.qp, 2, &rs, 1);
	assert_int_equal(ibv_req_notify_cq(env->b.rcq, 1), 0);

	assert_int_equal(post_send(env->a.qp, 11, IBV_WR_SEND, &ss, 1, IBV_SEND_SIGNALED), 0);
	rc_expect_wc(env->b.rcq, 1, IBV_WC_SUCCESS, NULL);
	expect_no_cq_event(env, RC_QUIET_MS);

	assert_int_equal(post_send(env->a.qp, 12, IBV_WR_SEND, &ss, 1,
				   IBV_SEND_SIGNALED | IBV_SEND_SOLICITED), 0);
	expect_cq_event(env, env->b.rcq);
	rc_expect_wc(env->b.rcq, 2, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.byte_len, 16);
	rc_expect_wc(env->a.scq, 11, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(env->a.scq, 12, IBV_WC_SUCCESS, NULL);
}

static void test_cq_overrun_raises_cq_err(void **state)
{
	struct rc_env *env = *state;
	struct rc_qp_opts oa;
	struct ibv_sge ss;
	struct ibv_wc wc[8];
	struct bufs m;
	int n;

	rc_default_opts(&oa);
	oa.cqe = 2;
	pair_with_opts(state, &m, &oa, NULL);
	assert_int_equal(env->a.scq->cqe, 2);
	ss = rc_sge(m.a->p, 8, m.amr);
	for (uint64_t i = 0; i < 4; i++)
		assert_int_equal(rc_post_rdma(env->a.qp, i, IBV_WR_RDMA_WRITE, &ss, 1,
					      (uintptr_t)m.b->p, m.bmr->rkey), 0);
	rc_expect_async_cq(env, IBV_EVENT_CQ_ERR, env->a.scq);
	/* The QP that could not complete into it goes to ERR (semantics.md). */
	rc_expect_async_qp(env, IBV_EVENT_QP_FATAL, env->a.qp);
	assert_int_equal(rc_state(env->a.qp), IBV_QPS_ERR);
	/* What fit is still there, in order; what did not is lost. */
	n = ibv_poll_cq(env->a.scq, 8, wc);
	assert_int_equal(n, 2);
	assert_int_equal(wc[0].wr_id, 0);
	assert_int_equal(wc[1].wr_id, 1);
	rc_expect_no_async(env, RC_QUIET_MS);
}

static void test_1mib_write_and_read(void **state)
{
	struct rc_env *env = *state;
	size_t len = 1 << 20;
	struct ibv_sge sge;
	struct bufs m;
	struct rc_buf *back;
	struct ibv_mr *back_mr;

	rc_pair(env, NULL, NULL);
	bufs_init(&m, env, len);
	back = rc_alloc(env, len);
	back_mr = rc_reg(env, env->pd, back->p, len, IBV_ACCESS_LOCAL_WRITE);

	sge = rc_sge(m.a->p, (uint32_t)len, m.amr);
	assert_int_equal(rc_post_rdma(env->a.qp, 1, IBV_WR_RDMA_WRITE, &sge, 1,
				      (uintptr_t)m.b->p, m.bmr->rkey), 0);
	rc_expect_wc(env->a.scq, 1, IBV_WC_SUCCESS, NULL);
	rc_expect_pattern(m.b->p, len, A_SEED, "B's memory after the WRITE");

	rc_fill(m.b->p, len, 0x77);
	sge = rc_sge(back->p, (uint32_t)len, back_mr);
	assert_int_equal(rc_post_rdma(env->a.qp, 2, IBV_WR_RDMA_READ, &sge, 1,
				      (uintptr_t)m.b->p, m.bmr->rkey), 0);
	rc_expect_wc(env->a.scq, 2, IBV_WC_SUCCESS, NULL);
	rc_expect_pattern(back->p, len, 0x77, "A's memory after the READ");
}

int main(void)
{
	struct case_list l = { 0 };

	case_add(&l, RC_TEST(send_recv_byte_len_and_data));
	case_add(&l, RC_TEST(zero_length_send_into_empty_receive));
	case_add(&l, RC_TEST(send_with_imm));
	case_add(&l, RC_TEST(write_with_imm));
	case_add(&l, RC_TEST(inline_send_takes_data_at_post));
	case_add(&l, RC_TEST(multi_sge_send_and_receive));
	case_add(&l, RC_TEST(write_gathers_multiple_sges));
	case_add(&l, RC_TEST(read_scatters_into_multiple_sges));
	CASE_TABLE(&l, run_atomic, rc_setup, rc_teardown, atomics);
	case_add(&l, RC_TEST(unsignaled_covered_by_signaled));
	case_add(&l, RC_TEST(wrs_posted_one_by_one_leave_in_order));
	case_add(&l, RC_TEST(sq_sig_all_signals_every_wr));
	case_add(&l, RC_TEST(too_small_receive));
	case_add(&l, RC_TEST(rnr_retry_0_exceeded));
	case_add(&l, RC_TEST(rnr_retry_7_waits_for_late_receive));
	CASE_TABLE(&l, run_one_credit, rc_setup, rc_teardown, one_credit);
	case_add(&l, RC_TEST(flush_after_modify_to_err));
	case_add(&l, RC_TEST(completion_channel_wakes_on_completion));
	case_add(&l, RC_TEST(solicited_arm_ignores_unsolicited_receive));
	case_add(&l, RC_TEST(cq_overrun_raises_cq_err));
	case_add(&l, RC_TEST(1mib_write_and_read));
	return case_run(&l);
}
