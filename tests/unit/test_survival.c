// SPDX-License-Identifier: MIT
/*
 * Faults an application survives: posting to a QP in error, destroying QPs and
 * deregistering memory with work in flight, and fork() of a process with registered memory
 * and traffic under way. Nothing crashes or hangs, nothing is written where it no longer
 * may be, and the process carries on moving data.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "rc_fixture.h"

#define BIG	(8u << 20)

/* The pair still moves data: one 4 KiB WRITE, checked. */
static void expect_pair_works(struct rc_env *env, uint64_t wr_id)
{
	struct rc_buf *src = rc_alloc(env, 4096), *dst = rc_alloc(env, 4096);
	struct ibv_mr *smr = rc_reg(env, env->pd, src->p, 4096, RC_ACCESS_ALL);
	struct ibv_mr *dmr = rc_reg(env, env->pd, dst->p, 4096, RC_ACCESS_ALL);

	rc_expect_write_lands(env, wr_id, src->p, smr, (uintptr_t)dst->p, dmr->rkey, dst->p, 4096,
			      (uint8_t)wr_id, "written after the fault");
}

/* A QP in ERR takes posts (as rxe and mlx5 do) and flushes each, sends and receives. */
static void test_post_to_err_qp_flushes(void **state)
{
	struct rc_env *env = *state;
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	struct rc_buf *buf;
	struct ibv_mr *mr;
	struct ibv_sge sge;

	rc_pair(env, NULL, NULL);
	buf = rc_alloc(env, 4096);
	mr = rc_reg(env, env->pd, buf->p, 4096, RC_ACCESS_ALL);
	assert_int_equal(ibv_modify_qp(env->a.qp, &attr, IBV_QP_STATE), 0);
	sge = rc_sge(buf->p, 64, mr);
	for (uint64_t id = 1; id <= 3; id++)
		assert_int_equal(rc_post_rdma(env->a.qp, id, IBV_WR_SEND, &sge, 1, 0, 0), 0);
	rc_post_recv(env->a.qp, 9, &sge, 1);
	for (uint64_t id = 1; id <= 3; id++)
		rc_expect_wc(env->a.scq, id, IBV_WC_WR_FLUSH_ERR, NULL);
	rc_expect_wc(env->a.rcq, 9, IBV_WC_WR_FLUSH_ERR, NULL);
	assert_int_equal(rc_state(env->a.qp), IBV_QPS_ERR);
}

/* Both QPs destroyed while 8 MiB WRITEs are under way; then a new pair works. */
static void test_destroy_qps_with_work_in_flight(void **state)
{
	struct rc_env *env = *state;
	struct rc_buf *src, *dst;
	struct ibv_mr *smr, *dmr;

	rc_pair(env, NULL, NULL);
	src = rc_alloc(env, BIG);
	dst = rc_alloc(env, BIG);
	smr = rc_reg(env, env->pd, src->p, BIG, RC_ACCESS_ALL);
	dmr = rc_reg(env, env->pd, dst->p, BIG, RC_ACCESS_ALL);
	for (uint64_t id = 0; id < 8; id++) {
		struct ibv_sge sge = rc_sge(src->p, BIG, smr);

		assert_int_equal(rc_post_rdma(env->a.qp, id, IBV_WR_RDMA_WRITE, &sge, 1,
					      (uintptr_t)dst->p, dmr->rkey), 0);
	}
	assert_int_equal(ibv_destroy_qp(env->b.qp), 0);
	env->b.qp = NULL;
	assert_int_equal(ibv_destroy_qp(env->a.qp), 0);
	env->a.qp = NULL;
	rc_destroy_end(&env->a);
	rc_destroy_end(&env->b);
	rc_pair(env, NULL, NULL);
	expect_pair_works(env, 100);
}

/*
 * The target region is deregistered while a 64 MiB WRITE streams into it: once
 * ibv_dereg_mr() returns, not one more byte of it changes, and the requester learns it
 * (REM_ACCESS_ERR), unless the WRITE had already finished.
 */
static void test_dereg_target_mid_write(void **state)
{
	struct rc_env *env = *state;
	const size_t len = 64u << 20;
	struct rc_buf *src, *dst;
	struct ibv_mr *smr, *dmr;
	struct ibv_sge sge;
	struct ibv_wc wc;
	uint8_t *snapshot = malloc(len);
	uint64_t until = rc_now_ms() + RC_WAIT_MS;
	int n;

	assert_non_null(snapshot);
	rc_pair(env, NULL, NULL);
	src = rc_alloc(env, len);
	dst = rc_alloc(env, len);
	memset(src->p, 0x77, len);
	smr = rc_reg(env, env->pd, src->p, len, RC_ACCESS_ALL);
	dmr = ibv_reg_mr(env->pd, dst->p, len, RC_ACCESS_ALL);
	assert_non_null(dmr);
	sge = rc_sge(src->p, (uint32_t)len, smr);
	assert_int_equal(rc_post_rdma(env->a.qp, 1, IBV_WR_RDMA_WRITE, &sge, 1,
				      (uintptr_t)dst->p, dmr->rkey), 0);
	while (!dst->p[0] && rc_now_ms() < until)	/* under way */
		usleep(100);
	assert_int_equal(ibv_dereg_mr(dmr), 0);
	memcpy(snapshot, dst->p, len);
	while ((n = ibv_poll_cq(env->a.scq, 1, &wc)) == 0 && rc_now_ms() < until)
		usleep(1000);
	assert_int_equal(n, 1);
	if (wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_REM_ACCESS_ERR)
		fail_msg("WRITE into a deregistered region: %s", ibv_wc_status_str(wc.status));
	print_message("the WRITE ended %s\n", ibv_wc_status_str(wc.status));
	usleep(100 * 1000);
	if (memcmp(snapshot, dst->p, len))
		fail_msg("the region changed after ibv_dereg_mr() returned");
	free(snapshot);
}

/*
 * fork() with registered memory, a context and traffic under way: the child writes its own
 * copy of a registered buffer and exits normally (destructors run); the parent's transfer
 * completes, its memory holds what was sent and not the child's writes, and it goes on.
 */
static void test_fork_with_registered_memory(void **state)
{
	struct rc_env *env = *state;
	struct rc_buf *src, *dst;
	struct ibv_mr *smr, *dmr;
	struct ibv_sge sge;
	int status;
	pid_t pid;

	rc_pair(env, NULL, NULL);
	src = rc_alloc(env, BIG);
	dst = rc_alloc(env, BIG);
	rc_fill(src->p, BIG, 0x21);
	smr = rc_reg(env, env->pd, src->p, BIG, RC_ACCESS_ALL);
	dmr = rc_reg(env, env->pd, dst->p, BIG, RC_ACCESS_ALL);
	sge = rc_sge(src->p, BIG, smr);
	assert_int_equal(rc_post_rdma(env->a.qp, 1, IBV_WR_RDMA_WRITE, &sge, 1,
				      (uintptr_t)dst->p, dmr->rkey), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(10);	/* a child that hangs in exit() dies of SIGALRM: the test fails */
		memset(dst->p, 0xee, BIG);
		memset(src->p, 0xee, BIG);
		exit(0);
	}
	rc_expect_wc(env->a.scq, 1, IBV_WC_SUCCESS, NULL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		fail_msg("the child did not exit cleanly (status 0x%x)", status);
	rc_expect_pattern(dst->p, BIG, 0x21, "the parent's target after the fork");
	expect_pair_works(env, 200);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		RC_TEST(post_to_err_qp_flushes),
		RC_TEST(destroy_qps_with_work_in_flight),
		RC_TEST(dereg_target_mid_write),
		RC_TEST(fork_with_registered_memory),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
