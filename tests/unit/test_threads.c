// SPDX-License-Identifier: MIT
/*
 * Several threads posting and polling on shared QPs and CQs at once, as verbs allow: every
 * work request completes exactly once, with success, and every byte lands. Run in the
 * normal build and under ThreadSanitizer (-DSOFTRDMA_TSAN=ON), where it must be race-free.
 * Worker threads never assert (cmocka is not thread-safe): they count, the test checks.
 */
#include <errno.h>
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

#define POSTERS		4
#define POLLERS		2
#define PER_POSTER	400
#define CHUNK		256

struct shared {
	struct rc_env *env;
	struct ibv_qp *qp;		/* posted on by every poster */
	struct ibv_cq *cq;		/* polled by every poller */
	enum ibv_wr_opcode op;
	uint8_t *src, *dst;
	uint32_t lkey, rkey, dst_lkey;
	int expected;			/* completions the pollers wait for */
	atomic_int polled, bad_status, post_errors;
	atomic_int seen[POSTERS * PER_POSTER];	/* completions per wr_id */
	uint64_t deadline_ms;
};

struct poster {
	struct shared *s;
	int index;
};

/*
 * After a post's ret: true, having yielded, when it is to be tried again. A full queue
 * refuses with ENOMEM until the pollers make room, which they do well before deadline_ms.
 */
static bool try_again(int ret, uint64_t deadline_ms)
{
	if (ret != ENOMEM || rc_now_ms() >= deadline_ms)
		return false;
	sched_yield();
	return true;
}

static void *post_loop(void *arg)
{
	struct poster *p = arg;
	struct shared *s = p->s;

	for (int i = 0; i < PER_POSTER; i++) {
		uint64_t id = (uint64_t)p->index * PER_POSTER + (uint64_t)i;
		struct ibv_sge sge = { .addr = (uintptr_t)s->src + id * CHUNK, .length = CHUNK,
				       .lkey = s->lkey };
		struct ibv_send_wr wr = {
			.wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = s->op,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = (uintptr_t)s->dst + id * CHUNK, .rkey = s->rkey },
		};
		struct ibv_send_wr *bad;
		int ret;

		do
			ret = ibv_post_send(s->qp, &wr, &bad);
		while (try_again(ret, s->deadline_ms));
		if (ret)
			atomic_fetch_add(&s->post_errors, 1);
	}
	return NULL;
}

static void *poll_loop(void *arg)
{
	struct shared *s = arg;
	struct ibv_wc wc[16];

	while (atomic_load(&s->polled) < s->expected && rc_now_ms() < s->deadline_ms) {
		int n = ibv_poll_cq(s->cq, 16, wc);

		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id >= POSTERS * PER_POSTER)
				atomic_fetch_add(&s->bad_status, 1);
			else
				atomic_fetch_add(&s->seen[wc[i].wr_id], 1);
		}
		atomic_fetch_add(&s->polled, n > 0 ? n : 0);
	}
	return NULL;
}

/* Posters and pollers of one (QP, CQ), run to the end (nothing asserted: no thread is left
 * running when a check fails). */
static void *run_shared(void *arg)
{
	struct shared *s = arg;
	pthread_t posters[POSTERS], pollers[POLLERS];
	struct poster p[POSTERS];
	int started = 0, polling = 0;

	for (; polling < POLLERS; polling++)
		if (pthread_create(&pollers[polling], NULL, poll_loop, s))
			break;
	for (; started < POSTERS; started++) {
		p[started] = (struct poster){ .s = s, .index = started };
		if (pthread_create(&posters[started], NULL, post_loop, &p[started]))
			break;
	}
	if (started < POSTERS || polling < POLLERS)
		atomic_fetch_add(&s->post_errors, 1);
	for (int i = 0; i < started; i++)
		pthread_join(posters[i], NULL);
	for (int i = 0; i < polling; i++)
		pthread_join(pollers[i], NULL);
	return NULL;
}

static void start(struct shared *s)
{
	s->expected = POSTERS * PER_POSTER;
	s->deadline_ms = rc_now_ms() + 60000;
}

/* Every WR completed exactly once, with success. */
static void check(struct shared *s)
{
	assert_int_equal(atomic_load(&s->post_errors), 0);
	assert_int_equal(atomic_load(&s->bad_status), 0);
	assert_int_equal(atomic_load(&s->polled), s->expected);
	for (int i = 0; i < s->expected; i++)
		if (atomic_load(&s->seen[i]) != 1)
			fail_msg("wr_id %d completed %d times", i, atomic_load(&s->seen[i]));
}

/* The pair, with CQs deep enough for every completion at once: pollers that fall behind (a
 * loaded machine, TSan) must not overrun them, which would lose completions as on hardware. */
static void deep_pair(struct rc_env *env)
{
	struct rc_qp_opts o;

	rc_default_opts(&o);
	o.cqe = 2 * POSTERS * PER_POSTER;
	o.cap.max_recv_wr = 256;
	rc_pair(env, &o, &o);
}

/* Posters of op on from's QP, pollers of its send CQ, and len bytes to move. */
static struct shared *shared_new(struct rc_env *env, size_t len, const struct rc_end *from,
				 enum ibv_wr_opcode op)
{
	struct shared *s = calloc(1, sizeof(*s));
	struct rc_buf *src = rc_alloc(env, len), *dst = rc_alloc(env, len);
	struct ibv_mr *dmr = rc_reg(env, env->pd, dst->p, len, RC_ACCESS_ALL);

	assert_non_null(s);
	s->env = env;
	s->qp = from->qp;
	s->cq = from->scq;
	s->op = op;
	s->src = src->p;
	s->dst = dst->p;
	s->lkey = rc_reg(env, env->pd, src->p, len, RC_ACCESS_ALL)->lkey;

	s->rkey = dmr->rkey;
	s->dst_lkey = dmr->lkey;
	rc_fill(s->src, len, 0x3c);
	return s;
}

/* RDMA WRITEs from four threads into one QP, completions taken by two threads from its CQ. */
static void test_writes_shared_qp_and_cq(void **state)
{
	struct rc_env *env = *state;
	size_t len = (size_t)POSTERS * PER_POSTER * CHUNK;
	struct shared *s;

	deep_pair(env);
	s = shared_new(env, len, &env->a, IBV_WR_RDMA_WRITE);
	start(s);
	run_shared(s);
	check(s);
	rc_expect_bytes(s->dst, s->src, len, "written by four threads");
	rc_expect_no_async(env, 0);	/* no CQ overrun, no QP error */
	free(s);
}

struct receiver {
	struct ibv_qp *qp;
	uint8_t *buf;
	uint32_t lkey;
	int first, count;
	atomic_int *errors;
	uint64_t deadline_ms;
};

static void *post_receives(void *arg)
{
	struct receiver *r = arg;

	for (int i = r->first; i < r->first + r->count; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)r->buf + (size_t)i * CHUNK,
				       .length = CHUNK, .lkey = r->lkey };
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1 };
		struct ibv_recv_wr *bad;
		int ret;

		do
			ret = ibv_post_recv(r->qp, &wr, &bad);
		while (try_again(ret, r->deadline_ms));
		if (ret)
			atomic_fetch_add(r->errors, 1);
	}
	return NULL;
}

/*
 * SENDs from four threads while two threads post the receives they land in and two poll
 * each side's CQ. Receives are taken in posting order, which two threads interleave: what
 * is checked is that every SEND and every receive completes once, with all the bytes.
 */
static void test_sends_with_concurrent_receives(void **state)
{
	struct rc_env *env = *state;
	size_t len = (size_t)POSTERS * PER_POSTER * CHUNK;
	struct shared *s, *r;
	struct receiver rx[2];
	pthread_t rxt[2], rpoll[POLLERS];
	uint64_t sum_sent = 0, sum_got = 0;

	deep_pair(env);
	s = shared_new(env, len, &env->a, IBV_WR_SEND);
	/* r: the receive side's counters, polled by its own threads. */
	r = calloc(1, sizeof(*r));
	assert_non_null(r);
	r->cq = env->b.rcq;
	r->expected = POSTERS * PER_POSTER;
	r->deadline_ms = rc_now_ms() + 60000;
	for (int i = 0; i < 2; i++) {
		rx[i] = (struct receiver){ .qp = env->b.qp, .buf = s->dst, .lkey = s->dst_lkey,
					   .first = i * (POSTERS * PER_POSTER / 2),
					   .count = POSTERS * PER_POSTER / 2,
					   .errors = &r->post_errors, .deadline_ms = r->deadline_ms };
		assert_int_equal(pthread_create(&rxt[i], NULL, post_receives, &rx[i]), 0);
	}
	for (int i = 0; i < POLLERS; i++)
		assert_int_equal(pthread_create(&rpoll[i], NULL, poll_loop, r), 0);
	start(s);
	run_shared(s);
	for (int i = 0; i < 2; i++)
		pthread_join(rxt[i], NULL);
	for (int i = 0; i < POLLERS; i++)
		pthread_join(rpoll[i], NULL);
	check(s);
	assert_int_equal(atomic_load(&r->post_errors), 0);
	assert_int_equal(atomic_load(&r->bad_status), 0);
	assert_int_equal(atomic_load(&r->polled), r->expected);
	/* Every byte sent arrived somewhere among the receives: compare sums of the whole. */
	for (size_t i = 0; i < len; i++) {
		sum_sent += s->src[i];
		sum_got += s->dst[i];
	}
	assert_int_equal(sum_got, sum_sent);
	rc_expect_no_async(env, 0);
	free(r);
	free(s);
}

/* Both directions at once: a writes to b and b writes to a, each from four threads. */
static void test_both_directions_at_once(void **state)
{
	struct rc_env *env = *state;
	size_t len = (size_t)POSTERS * PER_POSTER * CHUNK;
	struct shared *ab, *ba;
	pthread_t t[2];

	deep_pair(env);
	ab = shared_new(env, len, &env->a, IBV_WR_RDMA_WRITE);
	ba = shared_new(env, len, &env->b, IBV_WR_RDMA_WRITE);
	start(ab);
	start(ba);
	assert_int_equal(pthread_create(&t[0], NULL, run_shared, ab), 0);
	assert_int_equal(pthread_create(&t[1], NULL, run_shared, ba), 0);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	for (int d = 0; d < 2; d++) {
		struct shared *s = d ? ba : ab;

		check(s);
		rc_expect_bytes(s->dst, s->src, len, d ? "b to a" : "a to b");
	}
	rc_expect_no_async(env, 0);
	free(ab);
	free(ba);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		RC_TEST(writes_shared_qp_and_cq),
		RC_TEST(sends_with_concurrent_receives),
		RC_TEST(both_directions_at_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
