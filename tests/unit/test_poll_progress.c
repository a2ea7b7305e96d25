// SPDX-License-Identifier: MIT
/*
 * Progress from ibv_poll_cq (emu/progress.c): a thread whose poll finds its CQ empty reads
 * the sockets itself, so a SEND reaches the receiver's CQ while the engine thread is not
 * running. The engine thread is kept away by the test hook SOFTRDMA_TEST_ENGINE_NAP_MS (it
 * sleeps that long after each wait before it may dispatch), as a scheduler that does not
 * run it would. Then several threads poll the CQs of a pair with traffic both ways while
 * the engine thread races them for progress (a TSan test); and a QP sent into ERR while
 * the engine thread naps still takes in the ACK that arrived first. The variables are read when
 * the engine starts: each test opens a fresh device context, and with it a fresh engine.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rc_fixture.h"

#define NAP_MS		200
#define NAP_TEXT	"200"
#define PINGS		8		/* SENDs, each posted once the one before arrived */
#define MSG		64

static int nap_setup(void **state)
{
	setenv("SOFTRDMA_TEST_ENGINE_NAP_MS", NAP_TEXT, 1);
	setenv("SOFTRDMA_ENGINE", "epoll", 1);	/* the backend a poller drives alone */
	return rc_setup(state);
}

static int nap_off_setup(void **state)
{
	setenv("SOFTRDMA_POLL_PROGRESS", "0", 1);
	return nap_setup(state);
}

static int plain_teardown(void **state)
{
	unsetenv("SOFTRDMA_TEST_ENGINE_NAP_MS");
	unsetenv("SOFTRDMA_ENGINE");
	unsetenv("SOFTRDMA_POLL_PROGRESS");
	return rc_teardown(state);
}

/* One SEND from a to b, posted after b's receive; waits (bounded) for both completions.
 * The milliseconds it took. */
static uint64_t one_send(struct rc_env *env, struct ibv_mr *smr, struct ibv_mr *rmr,
			 uint64_t id)
{
	struct ibv_sge rs = rc_sge(rmr->addr, MSG, rmr), ss = rc_sge(smr->addr, MSG, smr);
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &ss, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;
	uint64_t t0 = rc_now_ms();

	rc_post_recv(env->b.qp, id, &rs, 1);
	assert_int_equal(ibv_post_send(env->a.qp, &wr, &bad), 0);
	rc_expect_wc(env->b.rcq, id, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(env->a.scq, id, IBV_WC_SUCCESS, NULL);
	return rc_now_ms() - t0;
}

/* PINGS SENDs after a first one (the streams open): the milliseconds they took. */
static uint64_t pings(struct rc_env *env)
{
	struct rc_buf *sb = rc_alloc(env, MSG), *rb = rc_alloc(env, MSG);
	struct ibv_mr *smr = rc_reg(env, env->pd, sb->p, MSG, RC_ACCESS_ALL);
	struct ibv_mr *rmr = rc_reg(env, env->pd, rb->p, MSG, RC_ACCESS_ALL);
	uint64_t total = 0;

	rc_pair(env, NULL, NULL);
	one_send(env, smr, rmr, 1000);
	for (int i = 0; i < PINGS; i++) {
		rc_fill(sb->p, MSG, (uint8_t)i);
		total += one_send(env, smr, rmr, (uint64_t)i);
		rc_expect_pattern(rb->p, MSG, (uint8_t)i, "the SEND's payload");
	}
	return total;
}

/* The pollers carry every SEND while the engine thread naps after each wake-up. */
static void test_sends_arrive_while_engine_naps(void **state)
{
	uint64_t ms = pings(*state);

	print_message("%d SENDs in %llu ms\n", PINGS, (unsigned long long)ms);
	/* The engine thread alone would take a nap per SEND at least. */
	if (ms >= PINGS * NAP_MS / 4)
		fail_msg("%d SENDs took %llu ms: the pollers did not drive the engine", PINGS,
			 (unsigned long long)ms);
}

/* The hook is honest: with SOFTRDMA_POLL_PROGRESS=0 the same SENDs wait for the naps. */
static void test_without_poll_progress_they_wait(void **state)
{
	uint64_t ms = pings(*state);

	print_message("%d SENDs in %llu ms\n", PINGS, (unsigned long long)ms);
	if (ms < PINGS * NAP_MS / 2)
		fail_msg("%d SENDs took %llu ms with poll progress off: the nap did not hold "
			 "the engine thread", PINGS, (unsigned long long)ms);
}

/*
 * A QP sent into ERR takes in first what its peer already sent. b's receive completes and
 * b's ACK is in a's socket, but the engine thread naps before reading it (poll progress
 * off, so nobody else reads it). Stopping a at once would flush the SEND b answered, where
 * a NIC would have completed it on the ACK's arrival (libfabric's ofi_rxm: the peer
 * disconnects once it has the message, and the sender's fi_shutdown hit WR_FLUSH_ERR).
 */
static void test_modify_to_err_takes_the_ack_that_arrived(void **state)
{
	struct rc_env *env = *state;
	struct rc_buf *sb = rc_alloc(env, MSG), *rb = rc_alloc(env, MSG);
	struct ibv_mr *smr = rc_reg(env, env->pd, sb->p, MSG, RC_ACCESS_ALL);
	struct ibv_mr *rmr = rc_reg(env, env->pd, rb->p, MSG, RC_ACCESS_ALL);
	struct ibv_sge rs = rc_sge(rmr->addr, MSG, rmr), ss = rc_sge(smr->addr, MSG, smr);
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &ss, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
	struct ibv_send_wr *bad;

	rc_pair(env, NULL, NULL);
	one_send(env, smr, rmr, 1);	/* the streams open */
	rc_post_recv(env->b.qp, 7, &rs, 1);
	assert_int_equal(ibv_post_send(env->a.qp, &wr, &bad), 0);
	rc_expect_wc(env->b.rcq, 7, IBV_WC_SUCCESS, NULL);
	assert_int_equal(ibv_modify_qp(env->a.qp, &err, IBV_QP_STATE), 0);
	rc_expect_wc(env->a.scq, 7, IBV_WC_SUCCESS, NULL);
}

#define ROUNDS		1000
#define POLLERS		4	/* a.scq, a.rcq, b.scq, b.rcq: one thread each */

struct race {
	struct rc_env *env;
	atomic_int done[POLLERS], bad, post_errors;
	uint64_t deadline_ms;
};

struct poller {
	struct race *r;
	struct ibv_cq *cq;
	int index;
	struct ibv_qp *qp;		/* posts a SEND after each of its send completions */
	struct ibv_qp *rq;		/* reposts a receive after each receive completion */
	struct ibv_mr *mr;		/* its own: what one thread sends, another's SEND fills */
};

static int post_one(struct poller *p, uint64_t id)
{
	struct ibv_sge sge = rc_sge(p->mr->addr, MSG, p->mr);
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_recv_wr rwr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 };
	struct ibv_send_wr *bad;
	struct ibv_recv_wr *rbad;

	if (p->qp)
		return ibv_post_send(p->qp, &wr, &bad);
	return ibv_post_recv(p->rq, &rwr, &rbad);
}

/* Polls its CQ until ROUNDS completions came (or the deadline), reposting after each.
 * Asserts nothing: cmocka is not thread-safe. */
static void *poll_loop(void *arg)
{
	struct poller *p = arg;
	struct race *r = p->r;
	struct ibv_wc wc[8];
	int done = 0;

	while (done < ROUNDS && rc_now_ms() < r->deadline_ms) {
		int n = ibv_poll_cq(p->cq, 8, wc);

		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS)
				atomic_fetch_add(&r->bad, 1);
			if (++done + 8 <= ROUNDS && post_one(p, (uint64_t)done))
				atomic_fetch_add(&r->post_errors, 1);
		}
	}
	atomic_store(&r->done[p->index], done);
	return NULL;
}

/* Four threads, one per CQ of a pair, with SENDs both ways; the engine thread races them. */
static void test_pollers_race_for_progress(void **state)
{
	struct rc_env *env = *state;
	struct race *r = calloc(1, sizeof(*r));
	struct ibv_mr *mr[POLLERS];
	struct poller p[POLLERS];
	pthread_t t[POLLERS];
	struct rc_qp_opts o;

	assert_non_null(r);
	rc_default_opts(&o);
	rc_pair(env, &o, &o);
	r->env = env;
	r->deadline_ms = rc_now_ms() + 60000;
	for (int i = 0; i < POLLERS; i++)
		mr[i] = rc_reg(env, env->pd, rc_alloc(env, MSG)->p, MSG, RC_ACCESS_ALL);
	p[0] = (struct poller){ r, env->a.scq, 0, env->a.qp, NULL, mr[0] };
	p[1] = (struct poller){ r, env->b.rcq, 1, NULL, env->b.qp, mr[1] };
	p[2] = (struct poller){ r, env->b.scq, 2, env->b.qp, NULL, mr[2] };
	p[3] = (struct poller){ r, env->a.rcq, 3, NULL, env->a.qp, mr[3] };
	/* Eight of each in flight, receives first: the first SENDs find one. */
	for (int k = 0; k < 8; k++) {
		assert_int_equal(post_one(&p[1], (uint64_t)k), 0);
		assert_int_equal(post_one(&p[3], (uint64_t)k), 0);
	}
	for (int k = 0; k < 8; k++) {
		assert_int_equal(post_one(&p[0], (uint64_t)k), 0);
		assert_int_equal(post_one(&p[2], (uint64_t)k), 0);
	}
	for (int i = 0; i < POLLERS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, poll_loop, &p[i]), 0);
	for (int i = 0; i < POLLERS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(atomic_load(&r->post_errors), 0);
	assert_int_equal(atomic_load(&r->bad), 0);
	for (int i = 0; i < POLLERS; i++)
		assert_int_equal(atomic_load(&r->done[i]), ROUNDS);
	free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_sends_arrive_while_engine_naps, nap_setup,
						plain_teardown),
		cmocka_unit_test_setup_teardown(test_without_poll_progress_they_wait,
						nap_off_setup, plain_teardown),
		cmocka_unit_test_setup_teardown(test_modify_to_err_takes_the_ack_that_arrived,
						nap_off_setup, plain_teardown),
		RC_TEST(pollers_race_for_progress),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
