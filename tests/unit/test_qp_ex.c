// SPDX-License-Identifier: MIT
/*
 * Unit tests for provider/qp_ex.c: the ibv_wr_* calls of ibv_wr_post(3) against a fake
 * classic post_send that records a deep copy of each chain it is given (the builder reuses
 * its storage, so the pointers in a posted chain are only good during the call).
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "provider/qp_ex.h"
#include "case_table.h"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

#define TEST_MAX_INLINE	64
#define TEST_MAX_SGE	4

/* Laid out as the provider's QP must be: the builder right before a struct verbs_qp. */
struct fake_verbs_qp {
	union {
		struct ibv_qp qp;
		struct ibv_qp_ex qp_ex;
	};
	uint32_t comp_mask;
	void *xrcd;
};

struct fake_qp {
	struct qp_ex_builder wr_builder;
	struct fake_verbs_qp vqp;
	const void *param;	/* a table's row, which the setup took the place of */
};

static_assert(QP_EX_BUILDER_PLACED_BEFORE(struct fake_qp, wr_builder, vqp.qp_ex),
	      "wr_builder must sit right before vqp");

#define MAX_RECORDED_WRS	256
#define MAX_RECORDED_SGES	TEST_MAX_SGE
#define MAX_RECORDED_INLINE	TEST_MAX_INLINE

struct recorded_wr {
	struct ibv_send_wr wr;		/* as posted; its pointers must not be followed later */
	struct ibv_sge sges[MAX_RECORDED_SGES];
	uint8_t inline_bytes[MAX_RECORDED_INLINE];
};

static struct {
	int calls;
	struct ibv_qp *qp;
	size_t nr_wrs;
	struct recorded_wr wrs[MAX_RECORDED_WRS];
	int result;			/* what the fake returns */
} posted;

static int recording_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			       struct ibv_send_wr **bad_wr)
{
	struct ibv_send_wr *head = wr;

	posted.calls++;
	posted.qp = qp;
	for (; wr; wr = wr->next) {
		struct recorded_wr *rec = &posted.wrs[posted.nr_wrs++];

		assert_true(posted.nr_wrs <= MAX_RECORDED_WRS);
		assert_true(wr->num_sge >= 0 && wr->num_sge <= MAX_RECORDED_SGES);
		rec->wr = *wr;
		if (wr->num_sge)
			memcpy(rec->sges, wr->sg_list, wr->num_sge * sizeof(*wr->sg_list));
		if (wr->send_flags & IBV_SEND_INLINE && wr->num_sge) {
			assert_int_equal(wr->num_sge, 1);
			assert_true(wr->sg_list[0].length <= MAX_RECORDED_INLINE);
			memcpy(rec->inline_bytes, (void *)(uintptr_t)wr->sg_list[0].addr,
			       wr->sg_list[0].length);
		}
	}
	if (posted.result)
		*bad_wr = head;
	return posted.result;
}

static int setup_qp(void **state)
{
	struct fake_qp *qp = calloc(1, sizeof(*qp));

	assert_non_null(qp);
	qp->param = *state;
	memset(&posted, 0, sizeof(posted));
	assert_int_equal(qp_ex_init(&qp->vqp.qp_ex, QP_EX_SUPPORTED_SEND_OPS, TEST_MAX_INLINE,
				    TEST_MAX_SGE, recording_post_send), 0);
	*state = qp;
	return 0;
}

static int teardown_qp(void **state)
{
	struct fake_qp *qp = *state;

	qp_ex_destroy(&qp->vqp.qp_ex);
	free(qp);
	return 0;
}

static struct ibv_qp_ex *qpx_of(void **state)
{
	return &((struct fake_qp *)*state)->vqp.qp_ex;
}

static void assert_sge_equal(const struct ibv_sge *got, uint32_t lkey, uint64_t addr,
			     uint32_t length)
{
	assert_int_equal(got->lkey, lkey);
	assert_int_equal(got->addr, addr);
	assert_int_equal(got->length, length);
}

/* Posts one WR built by `build` after setting wr_id and wr_flags; returns what was posted. */
static const struct ibv_send_wr *post_one(struct ibv_qp_ex *qpx, uint64_t wr_id,
					  unsigned int flags,
					  void (*build)(struct ibv_qp_ex *qpx))
{
	ibv_wr_start(qpx);
	qpx->wr_id = wr_id;
	qpx->wr_flags = flags;
	build(qpx);
	assert_int_equal(ibv_wr_complete(qpx), 0);
	assert_int_equal(posted.calls, 1);
	assert_int_equal(posted.nr_wrs, 1);
	assert_null(posted.wrs[0].wr.next);
	return &posted.wrs[0].wr;
}

static void build_send(struct ibv_qp_ex *qpx)
{
	ibv_wr_send(qpx);
	ibv_wr_set_sge(qpx, 0x11, 0x1000, 100);
}

static void build_send_imm(struct ibv_qp_ex *qpx)
{
	ibv_wr_send_imm(qpx, htonl(0x12345678));
	ibv_wr_set_sge(qpx, 0x11, 0x1000, 8);
}

static void build_rdma_write(struct ibv_qp_ex *qpx)
{
	ibv_wr_rdma_write(qpx, 0xabcd, 0x7f0000001000ull);
	ibv_wr_set_sge(qpx, 0x22, 0x2000, 4096);
}

static void build_rdma_write_imm(struct ibv_qp_ex *qpx)
{
	ibv_wr_rdma_write_imm(qpx, 0xbcde, 0x3000, htonl(0xcafe));
	ibv_wr_set_sge(qpx, 0x33, 0x4000, 16);
}

static void build_rdma_read(struct ibv_qp_ex *qpx)
{
	ibv_wr_rdma_read(qpx, 0xcdef, 0x5000);
	ibv_wr_set_sge(qpx, 0x44, 0x6000, 512);
}

static void build_cmp_swp(struct ibv_qp_ex *qpx)
{
	ibv_wr_atomic_cmp_swp(qpx, 0x1234, 0x8000, 0x1111222233334444ull,
			      0x5555666677778888ull);
	ibv_wr_set_sge(qpx, 0x55, 0x9000, 8);
}

static void build_fetch_add(struct ibv_qp_ex *qpx)
{
	ibv_wr_atomic_fetch_add(qpx, 0x4321, 0xa000, 0x10);
	ibv_wr_set_sge(qpx, 0x66, 0xb000, 8);
}

static void build_bind_mw(struct ibv_qp_ex *qpx)
{
	const struct ibv_mw_bind_info info = {
		.mr = (struct ibv_mr *)(uintptr_t)0xb0,
		.addr = 0xd000,
		.length = 512,
		.mw_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};

	ibv_wr_bind_mw(qpx, (struct ibv_mw *)(uintptr_t)0xa0, 0x1234ab, &info);
}

static void build_local_inv(struct ibv_qp_ex *qpx)
{
	ibv_wr_local_inv(qpx, 0x5678cd);
}

static void build_send_inv(struct ibv_qp_ex *qpx)
{
	ibv_wr_send_inv(qpx, 0x9abcde);
	ibv_wr_set_sge(qpx, 0x88, 0xe000, 32);
}

/*
 * One WR built by the ibv_wr_* calls of one opcode, and the classic WR it must be posted
 * as: want's wr_id and send_flags are also what the case sets before building it.
 */
struct one_wr_case {
	const char *name;
	void (*build)(struct ibv_qp_ex *qpx);
	struct ibv_send_wr want;
	struct ibv_sge sge;	/* the one SGE, where want.num_sge is 1 */
	uint32_t imm;		/* want's immediate data, in host order */
};

static const struct one_wr_case one_wr_cases[] = {
	{ .name = "test_send", .build = build_send,
	  .want = { .opcode = IBV_WR_SEND, .wr_id = 7, .num_sge = 1,
		    .send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED },
	  .sge = { .lkey = 0x11, .addr = 0x1000, .length = 100 } },
	{ .name = "test_send_imm", .build = build_send_imm,
	  .want = { .opcode = IBV_WR_SEND_WITH_IMM, .wr_id = 8, .num_sge = 1,
		    .send_flags = IBV_SEND_SIGNALED },
	  .sge = { .lkey = 0x11, .addr = 0x1000, .length = 8 },
	  .imm = 0x12345678 },
	{ .name = "test_rdma_write", .build = build_rdma_write,
	  .want = { .opcode = IBV_WR_RDMA_WRITE, .wr_id = 9, .num_sge = 1,
		    .send_flags = IBV_SEND_FENCE,
		    .wr.rdma = { .rkey = 0xabcd, .remote_addr = 0x7f0000001000ull } },
	  .sge = { .lkey = 0x22, .addr = 0x2000, .length = 4096 } },
	{ .name = "test_rdma_write_imm", .build = build_rdma_write_imm,
	  .want = { .opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .wr_id = 10, .num_sge = 1,
		    .wr.rdma = { .rkey = 0xbcde, .remote_addr = 0x3000 } },
	  .sge = { .lkey = 0x33, .addr = 0x4000, .length = 16 },
	  .imm = 0xcafe },
	{ .name = "test_rdma_read", .build = build_rdma_read,
	  .want = { .opcode = IBV_WR_RDMA_READ, .wr_id = 11, .num_sge = 1,
		    .send_flags = IBV_SEND_SIGNALED,
		    .wr.rdma = { .rkey = 0xcdef, .remote_addr = 0x5000 } },
	  .sge = { .lkey = 0x44, .addr = 0x6000, .length = 512 } },
	{ .name = "test_atomic_cmp_swp", .build = build_cmp_swp,
	  .want = { .opcode = IBV_WR_ATOMIC_CMP_AND_SWP, .wr_id = 12, .num_sge = 1,
		    .send_flags = IBV_SEND_SIGNALED,
		    .wr.atomic = { .rkey = 0x1234, .remote_addr = 0x8000,
				   .compare_add = 0x1111222233334444ull,
				   .swap = 0x5555666677778888ull } },
	  .sge = { .lkey = 0x55, .addr = 0x9000, .length = 8 } },
	{ .name = "test_atomic_fetch_add", .build = build_fetch_add,
	  .want = { .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, .wr_id = 13, .num_sge = 1,
		    .wr.atomic = { .rkey = 0x4321, .remote_addr = 0xa000, .compare_add = 0x10 } },
	  .sge = { .lkey = 0x66, .addr = 0xb000, .length = 8 } },
	{ .name = "test_bind_mw", .build = build_bind_mw,
	  .want = { .opcode = IBV_WR_BIND_MW, .wr_id = 14, .send_flags = IBV_SEND_SIGNALED,
		    .bind_mw = { .mw = (struct ibv_mw *)(uintptr_t)0xa0, .rkey = 0x1234ab,
				 .bind_info = { .mr = (struct ibv_mr *)(uintptr_t)0xb0,
						.addr = 0xd000, .length = 512,
						.mw_access_flags = IBV_ACCESS_REMOTE_WRITE } } } },
	{ .name = "test_local_inv", .build = build_local_inv,
	  .want = { .opcode = IBV_WR_LOCAL_INV, .wr_id = 15, .invalidate_rkey = 0x5678cd } },
	{ .name = "test_send_inv", .build = build_send_inv,
	  .want = { .opcode = IBV_WR_SEND_WITH_INV, .wr_id = 16, .num_sge = 1,
		    .invalidate_rkey = 0x9abcde },
	  .sge = { .lkey = 0x88, .addr = 0xe000, .length = 32 } },
};

/* The fields of got that the case's opcode gives a meaning to are the case's. */
static void assert_posted_as(const struct ibv_send_wr *got, const struct one_wr_case *c)
{
	const struct ibv_send_wr *want = &c->want;

	assert_int_equal(got->opcode, want->opcode);
	assert_int_equal(got->wr_id, want->wr_id);
	assert_int_equal(got->send_flags, want->send_flags);
	assert_int_equal(got->num_sge, want->num_sge);
	switch (want->opcode) {
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		/* Passed through in network byte order, exactly as given. */
		assert_int_equal(got->imm_data, htonl(c->imm));
		break;
	case IBV_WR_LOCAL_INV:
	case IBV_WR_SEND_WITH_INV:
		assert_int_equal(got->invalidate_rkey, want->invalidate_rkey);
		break;
	default:
		break;
	}
	switch (want->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		assert_int_equal(got->wr.rdma.rkey, want->wr.rdma.rkey);
		assert_int_equal(got->wr.rdma.remote_addr, want->wr.rdma.remote_addr);
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		assert_int_equal(got->wr.atomic.swap, want->wr.atomic.swap);
		/* fall through */
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		assert_int_equal(got->wr.atomic.rkey, want->wr.atomic.rkey);
		assert_int_equal(got->wr.atomic.remote_addr, want->wr.atomic.remote_addr);
		assert_int_equal(got->wr.atomic.compare_add, want->wr.atomic.compare_add);
		break;
	case IBV_WR_BIND_MW:
		assert_ptr_equal(got->bind_mw.mw, want->bind_mw.mw);
		assert_int_equal(got->bind_mw.rkey, want->bind_mw.rkey);
		assert_ptr_equal(got->bind_mw.bind_info.mr, want->bind_mw.bind_info.mr);
		assert_int_equal(got->bind_mw.bind_info.addr, want->bind_mw.bind_info.addr);
		assert_int_equal(got->bind_mw.bind_info.length, want->bind_mw.bind_info.length);
		assert_int_equal(got->bind_mw.bind_info.mw_access_flags,
				 want->bind_mw.bind_info.mw_access_flags);
		break;
	default:
		break;
	}
}

static void run_one_wr(void **state)
{
	const struct one_wr_case *c = ((struct fake_qp *)*state)->param;
	const struct ibv_send_wr *wr = post_one(qpx_of(state), c->want.wr_id,
						c->want.send_flags, c->build);

	assert_posted_as(wr, c);
	if (c->want.num_sge)
		assert_sge_equal(&posted.wrs[0].sges[0], c->sge.lkey, c->sge.addr,
				 c->sge.length);
	assert_ptr_equal(posted.qp, &qpx_of(state)->qp_base);
}

static void build_ud_send(struct ibv_qp_ex *qpx)
{
	ibv_wr_send(qpx);
	ibv_wr_set_ud_addr(qpx, (struct ibv_ah *)(uintptr_t)0xa4, 0x123456, 0x11111111);
	ibv_wr_set_sge(qpx, 0x77, 0xc000, 64);
}

static void test_set_ud_addr(void **state)
{
	const struct ibv_send_wr *wr = post_one(qpx_of(state), 14, 0, build_ud_send);

	assert_int_equal(wr->opcode, IBV_WR_SEND);
	assert_ptr_equal(wr->wr.ud.ah, (struct ibv_ah *)(uintptr_t)0xa4);
	assert_int_equal(wr->wr.ud.remote_qpn, 0x123456);
	assert_int_equal(wr->wr.ud.remote_qkey, 0x11111111);
	assert_int_equal(wr->num_sge, 1);
}

/* wr_id and wr_flags are taken at each builder call; later changes leave that WR alone. */
static void test_wr_id_and_flags_read_per_wr(void **state)
{
	struct ibv_qp_ex *qpx = qpx_of(state);

	ibv_wr_start(qpx);
	qpx->wr_id = 100;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qpx);
	qpx->wr_id = 200;
	qpx->wr_flags = 0;
	ibv_wr_set_sge(qpx, 1, 0x10, 1);
	ibv_wr_rdma_write(qpx, 2, 0x20);
	ibv_wr_set_sge(qpx, 1, 0x30, 1);
	assert_int_equal(ibv_wr_complete(qpx), 0);

	assert_int_equal(posted.nr_wrs, 2);
	assert_int_equal(posted.wrs[0].wr.wr_id, 100);
	assert_int_equal(posted.wrs[0].wr.send_flags, IBV_SEND_SIGNALED);
	assert_int_equal(posted.wrs[1].wr.wr_id, 200);
	assert_int_equal(posted.wrs[1].wr.send_flags, 0);
}

static void test_sge_list_copied(void **state)
{
	struct ibv_qp_ex *qpx = qpx_of(state);
	struct ibv_sge sges[] = {
		{ .addr = 0x1000, .length = 10, .lkey = 1 },
		{ .addr = 0x2000, .length = 20, .lkey = 2 },
		{ .addr = 0x3000, .length = 0, .lkey = 3 },
		{ .addr = 0x4000, .length = 40, .lkey = 4 },
	};

	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	ibv_wr_set_sge_list(qpx, ARRAY_SIZE(sges), sges);
	/* The list is the application's again as soon as the setter returns. */
	memset(sges, 0xff, sizeof(sges));
	assert_int_equal(ibv_wr_complete(qpx), 0);

	assert_int_equal(posted.wrs[0].wr.num_sge, 4);
	assert_sge_equal(&posted.wrs[0].sges[0], 1, 0x1000, 10);
	assert_sge_equal(&posted.wrs[0].sges[1], 2, 0x2000, 20);
	assert_sge_equal(&posted.wrs[0].sges[2], 3, 0x3000, 0);
	assert_sge_equal(&posted.wrs[0].sges[3], 4, 0x4000, 40);
	assert_int_equal(posted.wrs[0].wr.send_flags & IBV_SEND_INLINE, 0);
}

static void test_no_data_setter_posts_no_sge(void **state)
{
	struct ibv_qp_ex *qpx = qpx_of(state);

	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	assert_int_equal(ibv_wr_complete(qpx), 0);
	assert_int_equal(posted.wrs[0].wr.num_sge, 0);
	assert_null(posted.wrs[0].wr.sg_list);
}

static void test_inline_data_copied(void **state)
{
	struct ibv_qp_ex *qpx = qpx_of(state);
	char message[] = "inline payload";

	ibv_wr_start(qpx);
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qpx);
	ibv_wr_set_inline_data(qpx, message, sizeof(message));
	/* The buffer may be reused at once: what is posted is the copy. */
	memset(message, 'x', sizeof(message));
	assert_int_equal(ibv_wr_complete(qpx), 0);

	assert_int_equal(posted.wrs[0].wr.send_flags, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
	assert_int_equal(posted.wrs[0].wr.num_sge, 1);
	assert_int_equal(posted.wrs[0].sges[0].length, sizeof("inline payload"));
	assert_memory_equal(posted.wrs[0].inline_bytes, "inline payload",
			    sizeof("inline payload"));
}

static void test_inline_data_list_concatenated(void **state)
{
	struct ibv_qp_ex *qpx = qpx_of(state);
	char first[] = "abc", second[] = "", third[] = "defgh";
	const struct ibv_data_buf bufs[] = {
		{ .addr = first, .length = 3 },
		{ .addr = second, .length = 0 },
		{ .addr = third, .length = 5 },
	};

	ibv_wr_start(qpx);
	ibv_wr_rdma_write(qpx, 9, 0x9000);
	ibv_wr_set_inline_data_list(qpx, ARRAY_SIZE(bufs), bufs);
	memset(first, 0, sizeof(first));
	memset(third, 0, sizeof(third));
	assert_int_equal(ibv_wr_complete(qpx), 0);

	assert_int_equal(posted.wrs[0].wr.opcode, IBV_WR_RDMA_WRITE);
	assert_true(posted.wrs[0].wr.send_flags & IBV_SEND_INLINE);
	assert_int_equal(posted.wrs[0].wr.num_sge, 1);
	assert_int_equal(posted.wrs[0].sges[0].length, 8);
	assert_memory_equal(posted.wrs[0].inline_bytes, "abcdefgh", 8);
}

static void test_inline_exactly_max_accepted(void **state)
{
	struct ibv_qp_ex *qpx = qpx_of(state);
	uint8_t payload[TEST_MAX_INLINE];

	memset(payload, 0x5a, sizeof(payload));
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	ibv_wr_set_inline_data(qpx, payload, sizeof(payload));
	assert_int_equal(ibv_wr_complete(qpx), 0);
	assert_int_equal(posted.wrs[0].sges[0].length, TEST_MAX_INLINE);
	assert_memory_equal(posted.wrs[0].inline_bytes, payload, sizeof(payload));
}

static void test_empty_inline_data(void **state)
{
	struct ibv_qp_ex *qpx = qpx_of(state);

	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	ibv_wr_set_inline_data(qpx, NULL, 0);
	assert_int_equal(ibv_wr_complete(qpx), 0);
	assert_true(posted.wrs[0].wr.send_flags & IBV_SEND_INLINE);
	assert_int_equal(posted.wrs[0].wr.num_sge, 0);
}

/*
 * Enough WRs, SGEs and inline bytes to make every array grow mid-region: the chain must
 * still point at the right data afterwards.
 */
static void test_chain_posted_in_order_in_one_call(void **state)
{
	struct ibv_qp_ex *qpx = qpx_of(state);
	const size_t nr_wrs = 200;
	size_t i;

	ibv_wr_start(qpx);
	for (i = 0; i < nr_wrs; i++) {
		qpx->wr_id = 1000 + i;
		qpx->wr_flags = i % 2 ? IBV_SEND_SIGNALED : 0;
		if (i % 3 == 0) {
			char text[32];
			int len = snprintf(text, sizeof(text), "wr %zu", i);

			ibv_wr_send(qpx);
			ibv_wr_set_inline_data(qpx, text, (size_t)len);
		} else {
			const struct ibv_sge sges[] = {
				{ .addr = i * 0x100, .length = (uint32_t)i, .lkey = (uint32_t)i },
				{ .addr = i * 0x100 + 1, .length = 1, .lkey = (uint32_t)i + 1 },
			};

			ibv_wr_rdma_write(qpx, (uint32_t)i, i * 0x1000);
			ibv_wr_set_sge_list(qpx, ARRAY_SIZE(sges), sges);
		}
	}
	assert_int_equal(ibv_wr_complete(qpx), 0);

	assert_int_equal(posted.calls, 1);
	assert_int_equal(posted.nr_wrs, nr_wrs);
	for (i = 0; i < nr_wrs; i++) {
		const struct recorded_wr *rec = &posted.wrs[i];

		assert_int_equal(rec->wr.wr_id, 1000 + i);
		assert_int_equal(rec->wr.send_flags & IBV_SEND_SIGNALED,
				 i % 2 ? IBV_SEND_SIGNALED : 0);
		if (i % 3 == 0) {
			char text[32];
			int len = snprintf(text, sizeof(text), "wr %zu", i);

			assert_int_equal(rec->wr.opcode, IBV_WR_SEND);
			assert_int_equal(rec->sges[0].length, len);
			assert_memory_equal(rec->inline_bytes, text, (size_t)len);
		} else {
			assert_int_equal(rec->wr.opcode, IBV_WR_RDMA_WRITE);
			assert_int_equal(rec->wr.wr.rdma.remote_addr, i * 0x1000);
			assert_int_equal(rec->wr.num_sge, 2);
			assert_sge_equal(&rec->sges[0], (uint32_t)i, i * 0x100, (uint32_t)i);
			assert_sge_equal(&rec->sges[1], (uint32_t)i + 1, i * 0x100 + 1, 1);
		}
	}
	assert_null(posted.wrs[nr_wrs - 1].wr.next);
}

static void test_abort_posts_nothing(void **state)
{
	struct ibv_qp_ex *qpx = qpx_of(state);

	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	ibv_wr_set_sge(qpx, 1, 0x10, 1);
	ibv_wr_abort(qpx);
	assert_int_equal(posted.calls, 0);

	/* The region is closed and the dropped WR gone: the next one posts alone. */
	ibv_wr_start(qpx);
	qpx->wr_id = 55;
	ibv_wr_send(qpx);
	assert_int_equal(ibv_wr_complete(qpx), 0);
	assert_int_equal(posted.calls, 1);
	assert_int_equal(posted.nr_wrs, 1);
	assert_int_equal(posted.wrs[0].wr.wr_id, 55);
}

static void test_empty_region_posts_nothing(void **state)
{
	struct ibv_qp_ex *qpx = qpx_of(state);

	ibv_wr_start(qpx);
	assert_int_equal(ibv_wr_complete(qpx), 0);
	assert_int_equal(posted.calls, 0);
}

/* One valid WR first, so a failing region provably drops what came before the error too. */
static void assert_region_fails(struct ibv_qp_ex *qpx, void (*mistake)(struct ibv_qp_ex *qpx),
				int expected)
{
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	ibv_wr_set_sge(qpx, 1, 0x10, 1);
	mistake(qpx);
	ibv_wr_send(qpx);
	ibv_wr_set_sge(qpx, 1, 0x20, 1);
	assert_int_equal(ibv_wr_complete(qpx), expected);
	assert_int_equal(posted.calls, 0);

	/* The error belonged to that region only. */
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	assert_int_equal(ibv_wr_complete(qpx), 0);
	assert_int_equal(posted.calls, 1);
	assert_int_equal(posted.nr_wrs, 1);
}

static void too_many_sges(struct ibv_qp_ex *qpx)
{
	struct ibv_sge sges[TEST_MAX_SGE + 1] = { { 0 } };

	ibv_wr_send(qpx);
	ibv_wr_set_sge_list(qpx, ARRAY_SIZE(sges), sges);
}

static void test_too_many_sges_fails(void **state)
{
	assert_region_fails(qpx_of(state), too_many_sges, EINVAL);
}

static void inline_too_big(struct ibv_qp_ex *qpx)
{
	uint8_t payload[TEST_MAX_INLINE + 1] = { 0 };

	ibv_wr_send(qpx);
	ibv_wr_set_inline_data(qpx, payload, sizeof(payload));
}

static void test_inline_too_big_fails(void **state)
{
	assert_region_fails(qpx_of(state), inline_too_big, EINVAL);
}

static void inline_list_too_big(struct ibv_qp_ex *qpx)
{
	uint8_t payload[TEST_MAX_INLINE / 2 + 1] = { 0 };
	const struct ibv_data_buf bufs[] = {
		{ .addr = payload, .length = sizeof(payload) },
		{ .addr = payload, .length = sizeof(payload) },
	};

	ibv_wr_send(qpx);
	ibv_wr_set_inline_data_list(qpx, ARRAY_SIZE(bufs), bufs);
}

static void test_inline_list_too_big_fails(void **state)
{
	assert_region_fails(qpx_of(state), inline_list_too_big, EINVAL);
}

static void setter_before_any_wr(struct ibv_qp_ex *qpx)
{
	/* assert_region_fails already built one WR; this region starts afresh. */
	ibv_wr_abort(qpx);
	ibv_wr_start(qpx);
	ibv_wr_set_sge(qpx, 1, 0x10, 1);
}

static void test_setter_before_any_wr_fails(void **state)
{
	assert_region_fails(qpx_of(state), setter_before_any_wr, EINVAL);
}

static void two_data_setters(struct ibv_qp_ex *qpx)
{
	ibv_wr_send(qpx);
	ibv_wr_set_sge(qpx, 1, 0x10, 1);
	ibv_wr_set_inline_data(qpx, "x", 1);
}

static void test_second_data_setter_fails(void **state)
{
	assert_region_fails(qpx_of(state), two_data_setters, EINVAL);
}

static void unsupported_op(struct ibv_qp_ex *qpx)
{
	ibv_wr_send_tso(qpx, (void *)(uintptr_t)0x100, 40, 1460);
}

static void test_unsupported_op_fails(void **state)
{
	assert_region_fails(qpx_of(state), unsupported_op, EOPNOTSUPP);
}

static void test_post_send_error_returned(void **state)
{
	struct ibv_qp_ex *qpx = qpx_of(state);

	posted.result = ENOMEM;
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	assert_int_equal(ibv_wr_complete(qpx), ENOMEM);
	assert_int_equal(posted.calls, 1);
}

/* Once the arrays have grown to a batch's size, the same batch never reallocates. */
static void test_storage_reused_across_regions(void **state)
{
	struct ibv_qp_ex *qpx = qpx_of(state);
	const struct qp_ex_builder *wrb = &((struct fake_qp *)*state)->wr_builder;
	const struct qp_ex_pending_wr *wrs = NULL;
	const struct ibv_sge *sges = NULL;
	const uint8_t *inline_bytes = NULL;
	int region, i;

	for (region = 0; region < 50; region++) {
		posted.calls = 0;
		posted.nr_wrs = 0;
		ibv_wr_start(qpx);
		for (i = 0; i < 40; i++) {
			qpx->wr_id = (uint64_t)region << 32 | (uint64_t)i;
			ibv_wr_send(qpx);
			if (i % 2)
				ibv_wr_set_inline_data(qpx, "0123456789", 10);
			else
				ibv_wr_set_sge(qpx, 1, 0x1000, 8);
		}
		assert_int_equal(ibv_wr_complete(qpx), 0);
		assert_int_equal(posted.nr_wrs, 40);
		assert_int_equal(posted.wrs[39].wr.wr_id, (uint64_t)region << 32 | 39);
		assert_memory_equal(posted.wrs[39].inline_bytes, "0123456789", 10);
		if (region == 0) {
			wrs = wrb->wrs;
			sges = wrb->sges;
			inline_bytes = wrb->inline_bytes;
		}
		assert_ptr_equal(wrb->wrs, wrs);
		assert_ptr_equal(wrb->sges, sges);
		assert_ptr_equal(wrb->inline_bytes, inline_bytes);
	}
}

static void test_unsupported_send_ops_refused(void **state)
{
	static const uint64_t refused[] = {
		/* 1 << 12: IBV_QP_EX_WITH_ATOMIC_WRITE, named since rdma-core 44 */
		IBV_QP_EX_WITH_TSO, 1ull << 12, 1ull << 11, 1ull << 13, 1ull << 63,
	};
	struct fake_qp qp;
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(refused); i++) {
		memset(&qp, 0, sizeof(qp));
		assert_int_equal(qp_ex_init(&qp.vqp.qp_ex, IBV_QP_EX_WITH_SEND | refused[i],
					    TEST_MAX_INLINE, TEST_MAX_SGE, recording_post_send),
				 EOPNOTSUPP);
		/* Refusal leaves the QP untouched: nothing to destroy. */
		assert_null(qp.vqp.qp_ex.wr_start);
		assert_null(qp.wr_builder.wrs);
	}
}

static void test_every_supported_op_accepted_and_all_pointers_set(void **state)
{
	static const uint64_t accepted[] = {
		IBV_QP_EX_WITH_SEND, IBV_QP_EX_WITH_SEND_WITH_IMM, IBV_QP_EX_WITH_RDMA_WRITE,
		IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, IBV_QP_EX_WITH_RDMA_READ,
		IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
		IBV_QP_EX_WITH_BIND_MW, IBV_QP_EX_WITH_LOCAL_INV, IBV_QP_EX_WITH_SEND_WITH_INV, 0,
	};
	struct fake_qp qp;
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(accepted); i++) {
		struct ibv_qp_ex *qpx = &qp.vqp.qp_ex;

		memset(&qp, 0, sizeof(qp));
		assert_int_equal(qp_ex_init(qpx, accepted[i], 0, 1, recording_post_send), 0);
		assert_non_null(qpx->wr_send);
		assert_non_null(qpx->wr_send_imm);
		assert_non_null(qpx->wr_rdma_write);
		assert_non_null(qpx->wr_rdma_write_imm);
		assert_non_null(qpx->wr_rdma_read);
		assert_non_null(qpx->wr_atomic_cmp_swp);
		assert_non_null(qpx->wr_atomic_fetch_add);
		assert_non_null(qpx->wr_bind_mw);
		assert_non_null(qpx->wr_local_inv);
		assert_non_null(qpx->wr_send_inv);
		assert_non_null(qpx->wr_send_tso);
#if SOFTRDMA_RDMA_CORE >= 44
		assert_non_null(qpx->wr_atomic_write);
#endif
		assert_non_null(qpx->wr_set_ud_addr);
		assert_non_null(qpx->wr_set_xrc_srqn);
		assert_non_null(qpx->wr_set_inline_data);
		assert_non_null(qpx->wr_set_inline_data_list);
		assert_non_null(qpx->wr_set_sge);
		assert_non_null(qpx->wr_set_sge_list);
		assert_non_null(qpx->wr_start);
		assert_non_null(qpx->wr_complete);
		assert_non_null(qpx->wr_abort);
		qp_ex_destroy(qpx);
	}
}

/*
 * Two threads build regions on one QP. wr_start..wr_complete is a critical section, so every
 * chain must hold exactly one thread's WRs and no two posts may overlap.
 */
#define THREAD_REGIONS		2000
#define WRS_PER_REGION		3

static atomic_int posts_in_flight;
static atomic_int mixed_chains;
static atomic_int chains_seen;

static int tag_checking_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
				  struct ibv_send_wr **bad_wr)
{
	uint64_t thread_tag = wr->wr_id >> 32;
	int count = 0;

	(void)qp;
	(void)bad_wr;
	if (atomic_fetch_add(&posts_in_flight, 1))
		atomic_fetch_add(&mixed_chains, 1);
	for (; wr; wr = wr->next, count++)
		if (wr->wr_id >> 32 != thread_tag || (wr->wr_id & 0xffffffff) != (uint64_t)count)
			atomic_fetch_add(&mixed_chains, 1);
	if (count != WRS_PER_REGION)
		atomic_fetch_add(&mixed_chains, 1);
	atomic_fetch_add(&chains_seen, 1);
	atomic_fetch_sub(&posts_in_flight, 1);
	return 0;
}

struct poster {
	struct ibv_qp_ex *qpx;
	uint64_t tag;
	int failures;
};

static void *post_regions(void *arg)
{
	struct poster *poster = arg;
	struct ibv_qp_ex *qpx = poster->qpx;
	int region, i;

	for (region = 0; region < THREAD_REGIONS; region++) {
		ibv_wr_start(qpx);
		for (i = 0; i < WRS_PER_REGION; i++) {
			qpx->wr_id = poster->tag << 32 | (uint64_t)i;
			ibv_wr_send(qpx);
			ibv_wr_set_inline_data(qpx, "ab", 2);
		}
		if (ibv_wr_complete(qpx))
			poster->failures++;
	}
	return NULL;
}

static void test_region_is_a_critical_section(void **state)
{
	struct fake_qp qp;
	struct poster posters[2] = {
		{ .qpx = &qp.vqp.qp_ex, .tag = 1 },
		{ .qpx = &qp.vqp.qp_ex, .tag = 2 },
	};
	pthread_t threads[ARRAY_SIZE(posters)];
	size_t i;

	(void)state;
	memset(&qp, 0, sizeof(qp));
	assert_int_equal(qp_ex_init(&qp.vqp.qp_ex, IBV_QP_EX_WITH_SEND, 16, 1,
				    tag_checking_post_send), 0);
	for (i = 0; i < ARRAY_SIZE(posters); i++)
		assert_int_equal(pthread_create(&threads[i], NULL, post_regions, &posters[i]), 0);
	for (i = 0; i < ARRAY_SIZE(posters); i++) {
		assert_int_equal(pthread_join(threads[i], NULL), 0);
		assert_int_equal(posters[i].failures, 0);
	}
	assert_int_equal(atomic_load(&mixed_chains), 0);
	assert_int_equal(atomic_load(&chains_seen), THREAD_REGIONS * ARRAY_SIZE(posters));
	qp_ex_destroy(&qp.vqp.qp_ex);
}

#define QP_TEST(fn)	cmocka_unit_test_setup_teardown(fn, setup_qp, teardown_qp)

int main(void)
{
	const struct CMUnitTest tests[] = {
		QP_TEST(test_set_ud_addr),
		QP_TEST(test_wr_id_and_flags_read_per_wr),
		QP_TEST(test_sge_list_copied),
		QP_TEST(test_no_data_setter_posts_no_sge),
		QP_TEST(test_inline_data_copied),
		QP_TEST(test_inline_data_list_concatenated),
		QP_TEST(test_inline_exactly_max_accepted),
		QP_TEST(test_empty_inline_data),
		QP_TEST(test_chain_posted_in_order_in_one_call),
		QP_TEST(test_abort_posts_nothing),
		QP_TEST(test_empty_region_posts_nothing),
		QP_TEST(test_too_many_sges_fails),
		QP_TEST(test_inline_too_big_fails),
		QP_TEST(test_inline_list_too_big_fails),
		QP_TEST(test_setter_before_any_wr_fails),
		QP_TEST(test_second_data_setter_fails),
		QP_TEST(test_unsupported_op_fails),
		QP_TEST(test_post_send_error_returned),
		QP_TEST(test_storage_reused_across_regions),
		cmocka_unit_test(test_unsupported_send_ops_refused),
		cmocka_unit_test(test_every_supported_op_accepted_and_all_pointers_set),
		cmocka_unit_test(test_region_is_a_critical_section),
	};
	struct case_list l = { 0 };

	CASE_TABLE(&l, run_one_wr, setup_qp, teardown_qp, one_wr_cases);
	CASE_TESTS(&l, tests);
	return case_run(&l);
}
