// SPDX-License-Identifier: MIT
/*
 * The same-host path: large RC payloads that the responder reads from the requester's
 * memory (process_vm_readv) instead of from TCP. The same checks, the same statuses, and
 * not a byte outside the registered range; and TCP where the path is switched off or does
 * not apply (UC). The same_host_payloads counter tells which path a message took.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <cmocka.h>

#include "rc_fixture.h"

#define LEN		(64 * 1024)	/* well above the path's 16 KiB threshold */

static uint64_t payloads_before;	/* same_host_payloads when the scene was set up */

static void scene_init(struct rc_scene *s, void **state, int b_access)
{
	rc_scene_init(s, state, LEN, b_access, NULL);
	payloads_before = rc_port_counter("same_host_payloads");
}

static void expect_payloads(uint64_t n)
{
	assert_int_equal(rc_port_counter("same_host_payloads") - payloads_before, n);
}

/* A WRITE of LEN bytes into the middle of B's 3 * LEN lands there and nowhere else. */
static void expect_write_lands_in_range(struct rc_scene *s, uint64_t same_host_payloads)
{
	rc_scene_expect_middle_write(s);
	expect_payloads(same_host_payloads);
}

static void test_write_lands_exactly_in_range(void **state)
{
	struct rc_scene s;

	scene_init(&s, state, RC_ACCESS_ALL);
	expect_write_lands_in_range(&s, 1);
}

static void test_write_with_bad_rkey_is_refused(void **state)
{
	struct rc_scene s;

	scene_init(&s, state, RC_ACCESS_ALL);
	assert_int_equal(rc_scene_write(&s, 1, LEN, LEN, s.bmr->rkey ^ 0x100), 0);
	rc_expect_wc(s.env->a.scq, 1, IBV_WC_REM_ACCESS_ERR, NULL);
	rc_wait_state(s.env->b.qp, IBV_QPS_ERR);
	rc_scene_expect_b_untouched(&s);
	expect_payloads(0);
}

static void test_write_one_byte_past_the_region_is_refused(void **state)
{
	struct rc_scene s;

	scene_init(&s, state, RC_ACCESS_ALL);
	assert_int_equal(rc_scene_write(&s, 1, 2 * LEN + 1, LEN, s.bmr->rkey), 0);
	rc_expect_wc(s.env->a.scq, 1, IBV_WC_REM_ACCESS_ERR, NULL);
	rc_scene_expect_b_untouched(&s);
	expect_payloads(0);
}

static void test_write_without_remote_write_right_is_refused(void **state)
{
	struct rc_scene s;

	scene_init(&s, state, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	assert_int_equal(rc_scene_write(&s, 1, LEN, LEN, s.bmr->rkey), 0);
	rc_expect_wc(s.env->a.scq, 1, IBV_WC_REM_ACCESS_ERR, NULL);
	rc_scene_expect_b_untouched(&s);
	expect_payloads(0);
}

/* Three gather entries into two scatter entries, 48 KiB in all. */
static void test_send_gathers_and_scatters(void **state)
{
	struct rc_scene s;
	struct ibv_sge ss[3], rs[2];
	struct ibv_wc wc;

	scene_init(&s, state, RC_ACCESS_ALL);
	for (int i = 0; i < 3; i++)
		ss[i] = rc_sge(s.a->p + (size_t)i * LEN, 16 * 1024, s.amr);
	rs[0] = rc_sge(s.b->p, 20 * 1024, s.bmr);
	rs[1] = rc_sge(s.b->p + 2 * LEN, LEN, s.bmr);
	rc_post_recv(s.env->b.qp, 7, rs, 2);
	assert_int_equal(rc_post_rdma(s.env->a.qp, 1, IBV_WR_SEND, ss, 3, 0, 0), 0);
	rc_expect_wc(s.env->a.scq, 1, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(s.env->b.rcq, 7, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.byte_len, 48 * 1024);
	rc_expect_bytes(s.b->p, s.a->p, 16 * 1024, "first gather entry");
	rc_expect_bytes(s.b->p + 16 * 1024, s.a->p + LEN, 4 * 1024, "second, first part");
	rc_expect_bytes(s.b->p + 2 * LEN, s.a->p + LEN + 4 * 1024, 12 * 1024,
			"second, the rest");
	rc_expect_bytes(s.b->p + 2 * LEN + 12 * 1024, s.a->p + 2 * LEN, 16 * 1024, "third");
	rc_expect_pattern_range(s.b->p, 20 * 1024, 2 * LEN, s.b_seed, "between the entries");
	rc_expect_pattern_range(s.b->p, 2 * LEN + 28 * 1024, 3 * LEN, s.b_seed, "after them");
	expect_payloads(1);
}

/* A receive too small: REM_INV_REQ_ERR for the sender, LOC_LEN_ERR, and nothing past it. */
static void test_send_into_too_small_receive(void **state)
{
	struct rc_scene s;
	struct ibv_sge ss, rs;

	scene_init(&s, state, RC_ACCESS_ALL);
	ss = rc_sge(s.a->p, LEN, s.amr);
	rs = rc_sge(s.b->p + LEN, LEN - 1, s.bmr);
	rc_post_recv(s.env->b.qp, 7, &rs, 1);
	assert_int_equal(rc_post_rdma(s.env->a.qp, 1, IBV_WR_SEND, &ss, 1, 0, 0), 0);
	rc_expect_wc(s.env->a.scq, 1, IBV_WC_REM_INV_REQ_ERR, NULL);
	rc_expect_wc(s.env->b.rcq, 7, IBV_WC_LOC_LEN_ERR, NULL);
	rc_expect_pattern(s.b->p, LEN, s.b_seed, "B before the receive");
	rc_expect_pattern_range(s.b->p, 2 * LEN - 1, 3 * LEN, s.b_seed, "B past the receive");
}

/*
 * The requester's buffer is made unreadable while its SEND waits out an RNR NAK: when the
 * responder comes to read it, it cannot, and answers with a remote operational error.
 */
static void test_source_gone_before_it_is_read(void **state)
{
	struct ibv_qp_attr attr = { .min_rnr_timer = 0 };	/* 655 ms */
	struct rc_scene s;
	struct ibv_sge ss, rs;

	scene_init(&s, state, RC_ACCESS_ALL);
	/* The RNR NAK carries the responder's timer. */
	assert_int_equal(ibv_modify_qp(s.env->b.qp, &attr, IBV_QP_MIN_RNR_TIMER), 0);
	ss = rc_sge(s.a->p, LEN, s.amr);
	assert_int_equal(rc_post_rdma(s.env->a.qp, 1, IBV_WR_SEND, &ss, 1, 0, 0), 0);
	rc_expect_no_wc(s.env->a.scq, 100);	/* RNR NAKed, waiting */
	assert_int_equal(mprotect(s.a->p, LEN, PROT_NONE), 0);
	rs = rc_sge(s.b->p, LEN, s.bmr);
	rc_post_recv(s.env->b.qp, 7, &rs, 1);
	rc_expect_wc(s.env->a.scq, 1, IBV_WC_REM_OP_ERR, NULL);
	assert_int_equal(mprotect(s.a->p, LEN, PROT_READ | PROT_WRITE), 0);
	rc_expect_wc(s.env->b.rcq, 7, IBV_WC_LOC_QP_OP_ERR, NULL);
	rc_wait_state(s.env->b.qp, IBV_QPS_ERR);
	expect_payloads(0);
}

/* SOFTRDMA_SAME_HOST=0: every payload crosses TCP, with the same result. */
static void test_switched_off_payloads_cross_tcp(void **state)
{
	struct rc_scene s;

	setenv("SOFTRDMA_SAME_HOST", "0", 1);
	scene_init(&s, state, RC_ACCESS_ALL);	/* the streams open with the pair */
	unsetenv("SOFTRDMA_SAME_HOST");
	expect_write_lands_in_range(&s, 0);
}

/* Small payloads are not worth a second system call: they cross TCP. */
static void test_small_payloads_cross_tcp(void **state)
{
	struct rc_scene s;

	scene_init(&s, state, RC_ACCESS_ALL);
	assert_int_equal(rc_scene_write(&s, 1, LEN, 16 * 1024 - 1, s.bmr->rkey), 0);
	rc_expect_wc(s.env->a.scq, 1, IBV_WC_SUCCESS, NULL);
	assert_int_equal(rc_scene_write(&s, 2, LEN, 16 * 1024, s.bmr->rkey), 0);
	rc_expect_wc(s.env->a.scq, 2, IBV_WC_SUCCESS, NULL);
	rc_expect_bytes(s.b->p + LEN, s.a->p, 16 * 1024, "the target");
	expect_payloads(1);
}

int main(void)
{
	/* A lone WRITE would be placed by the requester itself (test_direct_write.c): here
	 * WRITEs go as frames, their payloads by reference. */
	setenv("SOFTRDMA_DIRECT_WRITE", "0", 1);
	const struct CMUnitTest tests[] = {
		RC_TEST(write_lands_exactly_in_range),
		RC_TEST(write_with_bad_rkey_is_refused),
		RC_TEST(write_one_byte_past_the_region_is_refused),
		RC_TEST(write_without_remote_write_right_is_refused),
		RC_TEST(send_gathers_and_scatters),
		RC_TEST(send_into_too_small_receive),
		RC_TEST(source_gone_before_it_is_read),
		RC_TEST(switched_off_payloads_cross_tcp),
		RC_TEST(small_payloads_cross_tcp),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
