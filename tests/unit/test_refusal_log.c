// SPDX-License-Identifier: MIT
/*
 * A reason for every refusal (docs/observability.md): with VERBS_LOG_LEVEL=4 and
 * VERBS_LOG_FILE set, as for any rdma-core provider, a refused RDMA WRITE leaves a line
 * naming the QP, the opcode, the rkey, address and length, what the key named (range, PD,
 * rights) and the rule that failed, one test per rule; and the NAK sent, the NAK received
 * and both QPs' move to ERR. QP A writes to QP B, both in this process, through the system's
 * libibverbs under `softrdma run` (ctest does).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>
#include <infiniband/verbs.h>

#include "rc_fixture.h"
#include "verbs_log_file.h"

#define LEN		64
#define REGION		4096
#define WR_ID		0x7e57
#define GARBAGE_RKEY	0xdeadbeefu
#define LOG_MAX		(64 * 1024)

static char log_path[] = "/tmp/softrdma-refusal-log.XXXXXX";
static long log_start;	/* where the current test's lines begin */

struct scene {
	struct rc_env *env;
	struct rc_buf *src, *dst;
	struct ibv_mr *src_mr;
};

static long log_size(void)
{
	FILE *f = fopen(log_path, "r");
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fclose(f);
	return n;
}

/* What the device logged since the test began. libibverbs' log is a stdio stream of this
 * process: fflush(NULL) writes it out. */
static char *log_since_start(void)
{
	static char text[LOG_MAX + 1];
	FILE *f;
	size_t n;

	fflush(NULL);
	f = fopen(log_path, "r");
	assert_non_null(f);
	fseek(f, log_start, SEEK_SET);
	n = fread(text, 1, LOG_MAX, f);
	fclose(f);
	text[n] = 0;
	return text;
}

static void expect_logged(const char *log, const char *want)
{
	if (!strstr(log, want))
		fail_msg("the log lacks \"%s\"; it says:\n%s", want, log);
}

static int setup(void **state)
{
	fflush(NULL);
	log_start = log_size();
	return rc_setup(state);
}

/* A and B connected; B's QP has qp_access; A has a registered source buffer. */
static void scene_init(struct scene *s, void **state, int qp_access)
{
	struct rc_qp_opts oa, ob;

	s->env = *state;
	rc_default_opts(&oa);
	rc_default_opts(&ob);
	ob.access = qp_access;
	rc_pair(s->env, &oa, &ob);
	s->src = rc_alloc(s->env, REGION);
	s->dst = rc_alloc(s->env, REGION);
	rc_fill(s->src->p, REGION, 0x42);
	s->src_mr = rc_reg(s->env, s->env->pd, s->src->p, REGION, IBV_ACCESS_LOCAL_WRITE);
}

/* A writes LEN bytes to (va, rkey); the requester completes with status. */
static void write_refused(struct scene *s, uint64_t va, uint32_t rkey, enum ibv_wc_status status)
{
	struct ibv_sge sge = rc_sge(s->src->p, LEN, s->src_mr);

	assert_int_equal(rc_post_rdma(s->env->a.qp, WR_ID, IBV_WR_RDMA_WRITE, &sge, 1, va, rkey), 0);
	rc_expect_wc(s->env->a.scq, WR_ID, status, NULL);
	rc_wait_state(s->env->b.qp, IBV_QPS_ERR);
}

/* The refusal line names the QP, the opcode, the key, the range and the rule. */
static void expect_refusal(struct scene *s, const char *rule, uint32_t rkey, uint64_t va,
			   const char *answer)
{
	const char *log = log_since_start();
	char want[160];

	snprintf(want, sizeof(want), "qp 0x%06x refused RC_RDMA_WRITE_ONLY", s->env->b.qp->qp_num);
	expect_logged(log, want);
	snprintf(want, sizeof(want), "rule \"%s\"", rule);
	expect_logged(log, want);
	snprintf(want, sizeof(want), "rkey 0x%08x va 0x%" PRIx64 " len %d;", rkey, va, LEN);
	expect_logged(log, want);
	snprintf(want, sizeof(want), "answer %s", answer);
	expect_logged(log, want);
	expect_logged(log, "softrdma0: ");
}

static void expect_region(const char *kind, const void *p, size_t len, const char *rights)
{
	const char *log = log_since_start();
	char want[200];

	snprintf(want, sizeof(want), "%s [0x%" PRIxPTR ", 0x%" PRIxPTR ")", kind, (uintptr_t)p,
		 (uintptr_t)p + len);
	expect_logged(log, want);
	snprintf(want, sizeof(want), "rights %s", rights);
	expect_logged(log, want);
}

static void test_wrong_key(void **state)
{
	struct scene s;
	const char *log;
	char want[160];

	scene_init(&s, state, RC_ACCESS_ALL);
	rc_reg(s.env, s.env->pd, s.dst->p, REGION, RC_ACCESS_ALL);
	write_refused(&s, (uintptr_t)s.dst->p, GARBAGE_RKEY, IBV_WC_REM_ACCESS_ERR);
	expect_refusal(&s, "wrong key", GARBAGE_RKEY, (uintptr_t)s.dst->p,
		       "NAK remote access error");
	log = log_since_start();
	expect_logged(log, "no live region or window has this key");
	/* The NAK both ways, and both QPs into ERR. */
	snprintf(want, sizeof(want), "qp 0x%06x sends NAK remote access error", s.env->b.qp->qp_num);
	expect_logged(log, want);
	snprintf(want, sizeof(want), "qp 0x%06x received NAK remote access error",
		 s.env->a.qp->qp_num);
	expect_logged(log, want);
	snprintf(want, sizeof(want), "qp 0x%06x goes from RTS to ERR, async event "
		 "IBV_EVENT_QP_ACCESS_ERR", s.env->b.qp->qp_num);
	expect_logged(log, want);
	snprintf(want, sizeof(want), "qp 0x%06x goes from RTS to ERR", s.env->a.qp->qp_num);
	expect_logged(log, want);
}

#define ALL_RIGHTS	"LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC"

/* A WRITE to a region of B's, refused by one rule about the region or B's QP. */
struct refusal_case {
	const char *name;
	int qp_access;			/* B's QP's */
	bool other_pd;			/* the region is in B's second PD */
	int mr_access;
	size_t offset;			/* where in the region the WRITE starts */
	enum ibv_wc_status status;	/* A's completion */
	const char *rule;
	const char *answer;
	const char *region_rights;	/* as the region's line gives them, if it has one */
	const char *also_logged;
};

static const struct refusal_case refusals[] = {
	{ "test_out_of_range", RC_ACCESS_ALL, false, RC_ACCESS_ALL, REGION - LEN / 2,
	  IBV_WC_REM_ACCESS_ERR, "out of range", "NAK remote access error", ALL_RIGHTS, NULL },
	{ "test_pd_mismatch", RC_ACCESS_ALL, true, RC_ACCESS_ALL, 0, IBV_WC_REM_ACCESS_ERR,
	  "PD mismatch", "NAK remote access error", ALL_RIGHTS, NULL },
	{ "test_mr_rights", RC_ACCESS_ALL, false, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ,
	  0, IBV_WC_REM_ACCESS_ERR, "MR rights", "NAK remote access error",
	  "LOCAL_WRITE|REMOTE_READ;", NULL },
	{ "test_qp_rights", IBV_ACCESS_REMOTE_READ, false, RC_ACCESS_ALL, 0,
	  IBV_WC_REM_INV_REQ_ERR, "QP rights", "NAK invalid request", NULL,
	  "rights REMOTE_READ; answer" },
};

static void run_refusal(void **state)
{
	const struct refusal_case *c = ((struct rc_env *)*state)->param;
	struct scene s;
	struct ibv_mr *mr;
	uint64_t va;

	scene_init(&s, state, c->qp_access);
	mr = rc_reg(s.env, c->other_pd ? s.env->pd2 : s.env->pd, s.dst->p, REGION, c->mr_access);
	va = (uintptr_t)s.dst->p + c->offset;
	write_refused(&s, va, mr->rkey, c->status);
	expect_refusal(&s, c->rule, mr->rkey, va, c->answer);
	if (c->region_rights)
		expect_region("region", s.dst->p, REGION, c->region_rights);
	if (c->also_logged)
		expect_logged(log_since_start(), c->also_logged);
}

/* A type 2 window answers only through the QP it was bound on: here A, not B. */
static void test_mw_binding(void **state)
{
	struct scene s;
	struct ibv_mr *mr;
	struct ibv_mw *mw;
	uint32_t rkey;

	scene_init(&s, state, RC_ACCESS_ALL);
	mr = rc_reg(s.env, s.env->pd, s.dst->p, REGION, RC_ACCESS_ALL | IBV_ACCESS_MW_BIND);
	mw = ibv_alloc_mw(s.env->pd, IBV_MW_TYPE_2);
	assert_non_null(mw);
	rkey = ibv_inc_rkey(mw->rkey);
	{
		struct ibv_send_wr wr = {
			.wr_id = 0xb2,
			.opcode = IBV_WR_BIND_MW,
			.send_flags = IBV_SEND_SIGNALED,
			.bind_mw = { .mw = mw, .rkey = rkey,
				     .bind_info = { .mr = mr, .addr = (uintptr_t)s.dst->p,
						    .length = REGION,
						    .mw_access_flags = IBV_ACCESS_REMOTE_WRITE } },
		};
		struct ibv_send_wr *bad = NULL;

		assert_int_equal(ibv_post_send(s.env->a.qp, &wr, &bad), 0);
		rc_expect_wc(s.env->a.scq, 0xb2, IBV_WC_SUCCESS, NULL);
	}
	write_refused(&s, (uintptr_t)s.dst->p, rkey, IBV_WC_REM_ACCESS_ERR);
	expect_refusal(&s, "MW binding", rkey, (uintptr_t)s.dst->p, "NAK remote access error");
	{
		char want[120];

		snprintf(want, sizeof(want), "bound via qp 0x%06x", s.env->a.qp->qp_num);
		expect_logged(log_since_start(), want);
	}
	expect_region("window type 2", s.dst->p, REGION, "REMOTE_WRITE,");
	assert_int_equal(ibv_dealloc_mw(mw), 0);	/* before its PD, which the teardown frees */
}

/* An ODP region's page that cannot be faulted in: the rule is "page fault". */
static void test_page_fault(void **state)
{
	struct ibv_mr *mr;
	struct scene s;

	scene_init(&s, state, RC_ACCESS_ALL);
	mr = rc_reg(s.env, s.env->pd, s.dst->p, REGION, RC_ACCESS_ALL | IBV_ACCESS_ON_DEMAND);
	assert_int_equal(mprotect(s.dst->p, s.env->page, PROT_NONE), 0);
	write_refused(&s, (uintptr_t)s.dst->p, mr->rkey, IBV_WC_REM_ACCESS_ERR);
	expect_refusal(&s, "page fault", mr->rkey, (uintptr_t)s.dst->p, "NAK remote access error");
}

/* Row i of refusals as a test under the row's name; setup keeps the row in env->param. */
#define REFUSAL_TEST(i)									\
	{ .name = refusals[i].name, .test_func = run_refusal, .setup_func = setup,	\
	  .teardown_func = rc_teardown, .initial_state = (void *)&refusals[i] }

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_wrong_key, setup, rc_teardown),
		REFUSAL_TEST(0),
		REFUSAL_TEST(1),
		REFUSAL_TEST(2),
		REFUSAL_TEST(3),
		cmocka_unit_test_setup_teardown(test_mw_binding, setup, rc_teardown),
		cmocka_unit_test_setup_teardown(test_page_fault, setup, rc_teardown),
	};

	return run_group_logging_to(tests, "4", log_path);
}
