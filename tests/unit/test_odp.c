// SPDX-License-Identifier: MIT
/*
 * On-demand paging through the system's libibverbs under `softrdma run`: what the device
 * reports, the registration rules of ODP and implicit ODP regions (mlx5's), ibv_advise_mr's
 * checks and errors (ib_uverbs and mlx5), traffic into pages nobody touched before, and
 * accesses to a page of an ODP region that cannot be faulted in (unmapped, PROT_NONE,
 * read-only for a write): an error completion as on mlx5 and rxe, the QPs as after any
 * refused access, and this process, which is the responder, alive to check it all.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "case_table.h"
#include "rc_fixture.h"

#define ODP_ACCESS	(RC_ACCESS_ALL | IBV_ACCESS_ON_DEMAND)
#define PAGES		4		/* an ODP region's pages in these tests */
#define HOLE		2		/* the page of it that is made unreachable */
#define SEED		5

/* The ODP scene: B's region of PAGES pages, A's local buffer, the pair connected. */
struct odp_scene {
	struct rc_env *env;
	struct rc_buf *rbuf, *lbuf;
	struct ibv_mr *rmr, *lmr;
	size_t page;
};

static void odp_init(struct odp_scene *s, void **state, int raccess, int laccess)
{
	s->env = *state;
	s->page = s->env->page;
	rc_pair(s->env, NULL, NULL);
	rc_pair_settle(s->env);	/* the tests make holes: nothing may map into one later */
	s->rbuf = rc_alloc(s->env, PAGES * s->page);
	s->lbuf = rc_alloc(s->env, PAGES * s->page);
	s->rmr = rc_reg(s->env, s->env->pd, s->rbuf->p, PAGES * s->page, raccess);
	s->lmr = rc_reg(s->env, s->env->pd, s->lbuf->p, PAGES * s->page, laccess);
}

static uint8_t *hole_of(struct odp_scene *s, struct rc_buf *b)
{
	return b->p + HOLE * s->page;
}

/* Whether every page of [p, p + len) is resident. */
static bool resident(void *p, size_t len, size_t page)
{
	unsigned char vec[PAGES];

	assert_true(len <= PAGES * page);
	assert_int_equal(mincore(p, len, vec), 0);
	for (size_t i = 0; i < (len + page - 1) / page; i++)
		if (!(vec[i] & 1))
			return false;
	return true;
}

/* ---- What the device reports ---- */

static void test_odp_caps_as_documented(void **state)
{
	struct rc_env *env = *state;
	struct ibv_device_attr_ex attr;

	memset(&attr, 0xa5, sizeof(attr));
	assert_int_equal(ibv_query_device_ex(env->ctx, NULL, &attr), 0);
	assert_int_equal(attr.odp_caps.general_caps, IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT);
	assert_int_equal(attr.odp_caps.per_transport_caps.rc_odp_caps,
			 IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
			 IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC |
			 IBV_ODP_SUPPORT_SRQ_RECV);
	assert_int_equal(attr.odp_caps.per_transport_caps.uc_odp_caps,
			 IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
			 IBV_ODP_SUPPORT_SRQ_RECV);
	assert_int_equal(attr.odp_caps.per_transport_caps.ud_odp_caps,
			 IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV);
	assert_int_equal(attr.xrc_odp_caps, 0);
}

/* ---- Registration ---- */

/* No pinning: memory that is not mapped at all may be registered on demand. */
static void test_odp_reg_of_unmapped_memory_succeeds(void **state)
{
	struct rc_env *env = *state;
	struct rc_buf *b = rc_alloc(env, 2 * env->page);
	struct ibv_mr *mr;

	assert_int_equal(munmap(b->p, 2 * env->page), 0);
	mr = rc_reg(env, env->pd, b->p, 2 * env->page, ODP_ACCESS);
	assert_ptr_equal(mr->addr, b->p);
	assert_int_equal(mr->length, 2 * env->page);
	assert_int_equal(mr->lkey, mr->rkey);
}

static void test_implicit_odp_reg_covers_everything(void **state)
{
	struct rc_env *env = *state;
	struct ibv_mr *mr = ibv_reg_mr(env->pd, NULL, SIZE_MAX, ODP_ACCESS);

	assert_non_null(mr);
	assert_null(mr->addr);
	assert_int_equal(mr->length, SIZE_MAX);
	assert_int_equal(ibv_dereg_mr(mr), 0);
}

struct reg_case {
	const char *name;
	void *addr;
	size_t length;
	uint64_t iova;
	int access;
	int err;
};

/* mlx5's create_user_odp_mr(), ib_umem_odp_alloc_implicit(), and pinning's EFAULT. */
static const struct reg_case reg_refusals[] = {
	{ "test_implicit_odp_with_an_iova_is_einval", NULL, SIZE_MAX, 0x1000, ODP_ACCESS,
	  EINVAL },
	{ "test_implicit_odp_hugetlb_is_einval", NULL, SIZE_MAX, 0,
	  ODP_ACCESS | IBV_ACCESS_HUGETLB, EINVAL },
	{ "test_whole_space_without_on_demand_is_efault", NULL, SIZE_MAX, 0, RC_ACCESS_ALL,
	  EFAULT },
	{ "test_odp_null_with_a_length_is_efault", NULL, 4096, 0, ODP_ACCESS, EFAULT },
	{ "test_odp_remote_write_without_local_write_is_einval", (void *)0x10000, 4096,
	  0x10000, IBV_ACCESS_ON_DEMAND | IBV_ACCESS_REMOTE_WRITE, EINVAL },
};

static void run_reg_refusal(void **state)
{
	struct rc_env *env = *state;
	const struct reg_case *c = env->param;

	errno = 0;
	assert_null(ibv_reg_mr_iova(env->pd, c->addr, c->length, c->iova, c->access));
	assert_int_equal(errno, c->err);
}

/* ---- Traffic into pages nobody touched, and through the implicit region ---- */

static void test_odp_write_and_read_fault_in_untouched_pages(void **state)
{
	struct ibv_sge sge;
	struct odp_scene s;

	odp_init(&s, state, ODP_ACCESS, ODP_ACCESS);
	assert_false(resident(s.rbuf->p, PAGES * s.page, s.page));
	rc_fill(s.lbuf->p, PAGES * s.page, SEED);
	sge = rc_sge(s.lbuf->p, PAGES * s.page, s.lmr);
	assert_int_equal(rc_post_rdma(s.env->a.qp, 1, IBV_WR_RDMA_WRITE, &sge, 1,
				      (uintptr_t)s.rbuf->p, s.rmr->rkey), 0);
	rc_expect_wc(s.env->a.scq, 1, IBV_WC_SUCCESS, NULL);
	rc_expect_pattern(s.rbuf->p, PAGES * s.page, SEED, "B's ODP region");

	/* READ into A's pages after they were dropped: faulted in again, written. */
	assert_int_equal(madvise(s.lbuf->p, PAGES * s.page, MADV_DONTNEED), 0);
	assert_int_equal(rc_post_rdma(s.env->a.qp, 2, IBV_WR_RDMA_READ, &sge, 1,
				      (uintptr_t)s.rbuf->p, s.rmr->rkey), 0);
	rc_expect_wc(s.env->a.scq, 2, IBV_WC_SUCCESS, NULL);
	rc_expect_pattern(s.lbuf->p, PAGES * s.page, SEED, "A's ODP region");
	assert_int_equal(rc_state(s.env->b.qp), IBV_QPS_RTS);
	rc_expect_no_async(s.env, 0);
}

/* The implicit region's key reaches any address the process maps, by its address. */
static void test_implicit_odp_write_read_atomic_anywhere(void **state)
{
	struct rc_env *env = *state;
	struct rc_buf *rb, *lb;
	struct ibv_mr *imr;
	struct ibv_sge sge;
	uint64_t word;

	rc_pair(env, NULL, NULL);
	rb = rc_alloc(env, env->page);
	lb = rc_alloc(env, env->page);
	imr = ibv_reg_mr(env->pd, NULL, SIZE_MAX, ODP_ACCESS);
	assert_non_null(imr);
	rc_fill(lb->p, 1000, SEED);
	sge = rc_sge(lb->p, 1000, imr);
	assert_int_equal(rc_post_rdma(env->a.qp, 1, IBV_WR_RDMA_WRITE, &sge, 1,
				      (uintptr_t)rb->p + 100, imr->rkey), 0);
	rc_expect_wc(env->a.scq, 1, IBV_WC_SUCCESS, NULL);
	rc_expect_bytes(rb->p + 100, lb->p, 1000, "written through the implicit region");

	memset(lb->p, 0, 1000);
	assert_int_equal(rc_post_rdma(env->a.qp, 2, IBV_WR_RDMA_READ, &sge, 1,
				      (uintptr_t)rb->p + 100, imr->rkey), 0);
	rc_expect_wc(env->a.scq, 2, IBV_WC_SUCCESS, NULL);
	rc_expect_bytes(lb->p, rb->p + 100, 1000, "read through the implicit region");

	memcpy(&word, rb->p + 8, 8);
	sge = rc_sge(lb->p + 2048, 8, imr);
	assert_int_equal(rc_post_atomic(env->a.qp, 3, IBV_WR_ATOMIC_FETCH_AND_ADD, &sge,
					(uintptr_t)rb->p + 8, imr->rkey, 5, 0), 0);
	rc_expect_wc(env->a.scq, 3, IBV_WC_SUCCESS, NULL);
	rc_expect_bytes(lb->p + 2048, &word, 8, "the atomic's original value");
	word += 5;
	rc_expect_bytes(rb->p + 8, &word, 8, "the atomic's target");
	assert_int_equal(ibv_dereg_mr(imr), 0);
}

/* Addresses the implicit region covers but the process cannot map: refused, not faulted. */
struct implicit_hole_case {
	const char *name;
	uint64_t va;
};

static const struct implicit_hole_case implicit_holes[] = {
	{ "test_implicit_odp_write_to_page_zero_is_rem_access_err", 0x100 },
	{ "test_implicit_odp_write_to_top_of_space_is_rem_access_err", UINT64_MAX - 63 },
	{ "test_implicit_odp_write_to_kernel_half_is_rem_access_err", 0xffff800000000000ull },
};

static void run_implicit_hole(void **state)
{
	struct rc_env *env = *state;
	const struct implicit_hole_case *c = env->param;
	struct rc_buf *lb;
	struct ibv_mr *imr;
	struct ibv_sge sge;

	rc_pair(env, NULL, NULL);
	lb = rc_alloc(env, env->page);
	imr = rc_reg(env, env->pd, NULL, SIZE_MAX, ODP_ACCESS);
	sge = rc_sge(lb->p, 64, imr);
	assert_int_equal(rc_post_rdma(env->a.qp, 1, IBV_WR_RDMA_WRITE, &sge, 1, c->va,
				      imr->rkey), 0);
	rc_expect_wc(env->a.scq, 1, IBV_WC_REM_ACCESS_ERR, NULL);
	rc_wait_state(env->b.qp, IBV_QPS_ERR);
	rc_expect_async_qp(env, IBV_EVENT_QP_ACCESS_ERR, env->b.qp);
}

/* ---- A page that cannot be faulted in ---- */

enum hole_kind { HOLE_UNMAPPED, HOLE_PROT_NONE, HOLE_READ_ONLY };

static void make_hole(uint8_t *p, size_t page, enum hole_kind kind)
{
	if (kind == HOLE_UNMAPPED)
		assert_int_equal(munmap(p, page), 0);
	else
		assert_int_equal(mprotect(p, page, kind == HOLE_PROT_NONE ? PROT_NONE : PROT_READ),
				 0);
}

struct remote_hole_case {
	const char *name;
	enum ibv_wr_opcode op;
	enum hole_kind hole;
	uint32_t len;		/* bytes, ending in the hole's first page */
};

static const struct remote_hole_case remote_holes[] = {
	{ "test_odp_write_into_unmapped_page_is_rem_access_err", IBV_WR_RDMA_WRITE,
	  HOLE_UNMAPPED, 64 },
	{ "test_odp_large_write_into_unmapped_page_is_rem_access_err", IBV_WR_RDMA_WRITE,
	  HOLE_UNMAPPED, 2 * 4096 },
	{ "test_odp_write_into_prot_none_page_is_rem_access_err", IBV_WR_RDMA_WRITE,
	  HOLE_PROT_NONE, 64 },
	{ "test_odp_write_into_read_only_page_is_rem_access_err", IBV_WR_RDMA_WRITE,
	  HOLE_READ_ONLY, 64 },
	{ "test_odp_read_of_unmapped_page_is_rem_access_err", IBV_WR_RDMA_READ,
	  HOLE_UNMAPPED, 64 },
	{ "test_odp_read_of_prot_none_page_is_rem_access_err", IBV_WR_RDMA_READ,
	  HOLE_PROT_NONE, 2 * 4096 },
	{ "test_odp_atomic_on_prot_none_page_is_rem_access_err", IBV_WR_ATOMIC_CMP_AND_SWP,
	  HOLE_PROT_NONE, 8 },
	{ "test_odp_atomic_on_read_only_page_is_rem_access_err", IBV_WR_ATOMIC_FETCH_AND_ADD,
	  HOLE_READ_ONLY, 8 },
};

/*
 * The responder cannot fault the page in: the requester's WR completes REM_ACCESS_ERR, the
 * next one is flushed, the responder QP goes to ERR with IBV_EVENT_QP_ACCESS_ERR, as for a
 * refused key (rxe's RKEY_VIOLATION). The read-only page was not written.
 */
static void run_remote_hole(void **state)
{
	const struct remote_hole_case *c = ((struct rc_env *)*state)->param;
	struct ibv_sge sge, next;
	struct odp_scene s;
	uint8_t *at;

	odp_init(&s, state, ODP_ACCESS, RC_ACCESS_ALL);
	rc_fill(s.rbuf->p, PAGES * s.page, SEED);
	make_hole(hole_of(&s, s.rbuf), s.page, c->hole);
	at = hole_of(&s, s.rbuf) + (c->len > s.page ? s.page : c->len) - c->len;
	sge = rc_sge(s.lbuf->p, c->len, s.lmr);
	if (c->op == IBV_WR_RDMA_WRITE || c->op == IBV_WR_RDMA_READ)
		assert_int_equal(rc_post_rdma(s.env->a.qp, 1, c->op, &sge, 1, (uintptr_t)at,
					      s.rmr->rkey), 0);
	else
		assert_int_equal(rc_post_atomic(s.env->a.qp, 1, c->op, &sge, (uintptr_t)at,
						s.rmr->rkey, 0, 1), 0);
	next = rc_sge(s.lbuf->p, 8, s.lmr);
	assert_int_equal(rc_post_rdma(s.env->a.qp, 2, IBV_WR_RDMA_WRITE, &next, 1,
				      (uintptr_t)s.rbuf->p, s.rmr->rkey), 0);
	rc_expect_wc(s.env->a.scq, 1, IBV_WC_REM_ACCESS_ERR, NULL);
	rc_expect_wc(s.env->a.scq, 2, IBV_WC_WR_FLUSH_ERR, NULL);
	rc_wait_state(s.env->a.qp, IBV_QPS_ERR);
	rc_wait_state(s.env->b.qp, IBV_QPS_ERR);
	rc_expect_async_qp(s.env, IBV_EVENT_QP_ACCESS_ERR, s.env->b.qp);
	rc_expect_no_async(s.env, RC_QUIET_MS);
	if (c->hole == HOLE_READ_ONLY)
		rc_expect_pattern_range(s.rbuf->p, HOLE * s.page, (HOLE + 1) * s.page, SEED,
					"B's read-only page");
	rc_expect_pattern_range(s.rbuf->p, 0, s.page, SEED, "B's first page");
}

/* A's own source is an ODP page that cannot be faulted in: LOC_PROT_ERR, nothing sent. */
static void test_odp_send_from_prot_none_page_is_loc_prot_err(void **state)
{
	struct ibv_sge sge;
	struct odp_scene s;

	odp_init(&s, state, RC_ACCESS_ALL, ODP_ACCESS);
	rc_fill(s.rbuf->p, PAGES * s.page, SEED);
	make_hole(hole_of(&s, s.lbuf), s.page, HOLE_PROT_NONE);
	sge = rc_sge(hole_of(&s, s.lbuf) - 32, 64, s.lmr);
	assert_int_equal(rc_post_rdma(s.env->a.qp, 1, IBV_WR_RDMA_WRITE, &sge, 1,
				      (uintptr_t)s.rbuf->p, s.rmr->rkey), 0);
	rc_expect_wc(s.env->a.scq, 1, IBV_WC_LOC_PROT_ERR, NULL);
	rc_wait_state(s.env->a.qp, IBV_QPS_ERR);
	assert_int_equal(rc_state(s.env->b.qp), IBV_QPS_RTS);
	rc_expect_pattern(s.rbuf->p, PAGES * s.page, SEED, "B's memory");
}

/* B's receive lies on an unmapped ODP page: as any refused receive SGE. */
static void test_odp_receive_into_unmapped_page_is_loc_prot_err(void **state)
{
	struct ibv_sge rsge, sge;
	struct odp_scene s;

	odp_init(&s, state, ODP_ACCESS, RC_ACCESS_ALL);
	make_hole(hole_of(&s, s.rbuf), s.page, HOLE_UNMAPPED);
	rsge = rc_sge(hole_of(&s, s.rbuf), 64, s.rmr);
	rc_post_recv(s.env->b.qp, 100, &rsge, 1);
	sge = rc_sge(s.lbuf->p, 64, s.lmr);
	assert_int_equal(rc_post_rdma(s.env->a.qp, 1, IBV_WR_SEND, &sge, 1, 0, 0), 0);
	rc_expect_wc(s.env->a.scq, 1, IBV_WC_REM_OP_ERR, NULL);
	rc_wait_state(s.env->b.qp, IBV_QPS_ERR);
	rc_expect_wc(s.env->b.rcq, 100, IBV_WC_LOC_PROT_ERR, NULL);
}

/* ---- ibv_advise_mr ---- */

static int advise(struct ibv_pd *pd, int advice, uint32_t flags, void *addr, uint32_t len,
		  uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };

	return ibv_advise_mr(pd, advice, flags, &sge, 1);
}

static void test_advise_prefetch_write_flush_faults_pages_in(void **state)
{
	struct odp_scene s;

	odp_init(&s, state, ODP_ACCESS, ODP_ACCESS);
	assert_false(resident(s.rbuf->p, PAGES * s.page, s.page));
	assert_int_equal(advise(s.env->pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
				IBV_ADVISE_MR_FLAG_FLUSH, s.rbuf->p, PAGES * s.page,
				s.rmr->lkey), 0);
	assert_true(resident(s.rbuf->p, PAGES * s.page, s.page));
	/* Without FLUSH, PREFETCH and NO_FAULT are hints: accepted. */
	assert_int_equal(advise(s.env->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, s.rbuf->p,
				s.page, s.rmr->lkey), 0);
	assert_int_equal(advise(s.env->pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT,
				IBV_ADVISE_MR_FLAG_FLUSH, s.rbuf->p, s.page, s.rmr->lkey), 0);
	assert_int_equal(ibv_advise_mr(s.env->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, NULL, 0), 0);
}

enum advise_target { ODP_MR, PINNED_MR, READ_ONLY_ODP_MR, WINDOW, NO_KEY };

struct advise_case {
	const char *name;
	enum advise_target target;
	bool other_pd;
	int advice;
	uint32_t flags;
	size_t off, len;	/* in pages */
	bool hole;		/* the region's HOLE page is PROT_NONE */
	int err;
};

/* The errors of ib_uverbs' ADVISE_MR and mlx5's get_prefetchable_mr()/pagefault_mr(). */
static const struct advise_case advise_refusals[] = {
	{ "test_advise_unknown_key_is_enoent", NO_KEY, false,
	  IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, 0, 1, false, ENOENT },
	{ "test_advise_pinned_mr_is_enoent", PINNED_MR, false,
	  IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, 0, 1, false, ENOENT },
	{ "test_advise_window_key_is_einval", WINDOW, false,
	  IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, 0, 1, false, EINVAL },
	{ "test_advise_other_pd_is_eperm", ODP_MR, true,
	  IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, 0, 1, false, EPERM },
	{ "test_advise_write_without_local_write_is_eperm", READ_ONLY_ODP_MR, false,
	  IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, 0, 1, false, EPERM },
	{ "test_advise_unknown_advice_is_eopnotsupp", ODP_MR, false,
	  7, IBV_ADVISE_MR_FLAG_FLUSH, 0, 1, false, EOPNOTSUPP },
	{ "test_advise_unknown_flag_is_einval", ODP_MR, false,
	  IBV_ADVISE_MR_ADVICE_PREFETCH, 2, 0, 1, false, EINVAL },
	{ "test_advise_flush_out_of_range_is_efault", ODP_MR, false,
	  IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, PAGES - 1, 2, false,
	  EFAULT },
	{ "test_advise_out_of_range_without_flush_is_accepted", ODP_MR, false,
	  IBV_ADVISE_MR_ADVICE_PREFETCH, 0, PAGES - 1, 2, false, 0 },
	{ "test_advise_flush_over_prot_none_page_is_efault", ODP_MR, false,
	  IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, 0, PAGES, true, EFAULT },
	{ "test_advise_no_fault_over_prot_none_page_is_accepted", ODP_MR, false,
	  IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, IBV_ADVISE_MR_FLAG_FLUSH, 0, PAGES, true, 0 },
};

static void run_advise_refusal(void **state)
{
	struct rc_env *env = *state;
	const struct advise_case *c = env->param;
	struct rc_buf *b = rc_alloc(env, PAGES * env->page);
	struct ibv_mw *mw = NULL;
	uint32_t key = 0x12345678;
	int access = ODP_ACCESS;
	struct ibv_mr *mr;

	if (c->target == PINNED_MR)
		access = RC_ACCESS_ALL;
	else if (c->target == READ_ONLY_ODP_MR)
		access = IBV_ACCESS_ON_DEMAND | IBV_ACCESS_REMOTE_READ;
	mr = rc_reg(env, env->pd, b->p, PAGES * env->page, access);
	if (c->target != NO_KEY)
		key = mr->lkey;
	if (c->target == WINDOW) {
		mw = ibv_alloc_mw(env->pd, IBV_MW_TYPE_2);
		assert_non_null(mw);
		key = mw->rkey;
	}
	if (c->hole)
		make_hole(b->p + HOLE * env->page, env->page, HOLE_PROT_NONE);
	assert_int_equal(advise(c->other_pd ? env->pd2 : env->pd, c->advice, c->flags,
				b->p + c->off * env->page, (uint32_t)(c->len * env->page), key),
			 c->err);
	if (mw)
		assert_int_equal(ibv_dealloc_mw(mw), 0);
}

#define TABLE(run, rows) CASE_TABLE(&l, run, rc_setup, rc_teardown, rows)

int main(void)
{
	struct case_list l = { 0 };

	case_add(&l, RC_TEST(odp_caps_as_documented));
	case_add(&l, RC_TEST(odp_reg_of_unmapped_memory_succeeds));
	case_add(&l, RC_TEST(implicit_odp_reg_covers_everything));
	TABLE(run_reg_refusal, reg_refusals);
	case_add(&l, RC_TEST(odp_write_and_read_fault_in_untouched_pages));
	case_add(&l, RC_TEST(implicit_odp_write_read_atomic_anywhere));
	TABLE(run_implicit_hole, implicit_holes);
	TABLE(run_remote_hole, remote_holes);
	case_add(&l, RC_TEST(odp_send_from_prot_none_page_is_loc_prot_err));
	case_add(&l, RC_TEST(odp_receive_into_unmapped_page_is_loc_prot_err));
	case_add(&l, RC_TEST(advise_prefetch_write_flush_faults_pages_in));
	TABLE(run_advise_refusal, advise_refusals);
	return case_run(&l);
}
