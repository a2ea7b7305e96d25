// SPDX-License-Identifier: MIT
/*
 * Direct placement (emu/direct.h): a lone RDMA WRITE that the requester places in a
 * same-host target's memory itself. It must land exactly where a frame would, and only
 * where the target's responder would have let it: every refusal still comes from the
 * responder (the WRITE falls back to a frame), a deregistered region takes no byte after
 * ibv_dereg_mr() returns, and the PSNs stay in step with the frames around it. The
 * same_host_direct_writes counter tells which path a WRITE took.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "rc_fixture.h"

#define LEN		4096
#define DIRECT_LIST	16	/* WRITEs in the posting list of a run */

static uint64_t direct_before;	/* same_host_direct_writes when the scene was set up */
static uint64_t direct_reads_before;	/* same_host_direct_reads, likewise */

static void scene_init_with(struct rc_scene *s, void **state, int b_access,
			    const struct rc_qp_opts *ob)
{
	rc_scene_init(s, state, LEN, b_access, ob);
	direct_before = rc_port_counter("same_host_direct_writes");
	direct_reads_before = rc_port_counter("same_host_direct_reads");
}

static void scene_init(struct rc_scene *s, void **state, int b_access)
{
	scene_init_with(s, state, b_access, NULL);
}

static void expect_direct(uint64_t n)
{
	assert_int_equal(rc_port_counter("same_host_direct_writes") - direct_before, n);
}

static void expect_direct_reads(uint64_t n)
{
	assert_int_equal(rc_port_counter("same_host_direct_reads") - direct_reads_before, n);
}

/* A refused WRITE: the responder's status, B as it was, and no placement. */
static void expect_refused_with(struct rc_scene *s, uint64_t offset, uint32_t len, uint32_t rkey,
				enum ibv_wc_status status)
{
	assert_int_equal(rc_scene_write(s, 1, offset, len, rkey), 0);
	rc_expect_wc(s->env->a.scq, 1, status, NULL);
	rc_scene_expect_b_untouched(s);
	expect_direct(0);
}

/* The key's rules refuse with a remote access error, as rxe's responder does. */
static void expect_refused(struct rc_scene *s, uint64_t offset, uint32_t len, uint32_t rkey)
{
	expect_refused_with(s, offset, len, rkey, IBV_WC_REM_ACCESS_ERR);
}

static void test_lone_write_is_placed_exactly_in_range(void **state)
{
	struct rc_scene s;

	scene_init(&s, state, RC_ACCESS_ALL);
	rc_scene_expect_middle_write(&s);
	expect_direct(1);
	assert_true(rc_port_counter("port_rcv_packets") > 0);
}

static void test_write_with_a_wrong_key_is_refused(void **state)
{
	struct rc_scene s;

	scene_init(&s, state, RC_ACCESS_ALL);
	expect_refused(&s, LEN, 8, s.bmr->rkey ^ 0x100);
}

/* A region over B's middle third only, so that a byte placed outside it would show. */
static struct ibv_mr *middle_of_b(struct rc_scene *s)
{
	return rc_reg(s->env, s->env->pd, s->b->p + LEN, LEN, RC_ACCESS_ALL);
}

static void test_write_one_byte_past_the_region_is_refused(void **state)
{
	struct rc_scene s;

	scene_init(&s, state, RC_ACCESS_ALL);
	expect_refused(&s, 2 * LEN - 7, 8, middle_of_b(&s)->rkey);
}

static void test_write_just_before_the_region_is_refused(void **state)
{
	struct rc_scene s;

	scene_init(&s, state, RC_ACCESS_ALL);
	expect_refused(&s, LEN - 1, 8, middle_of_b(&s)->rkey);
}

static void test_region_without_remote_write_is_refused(void **state)
{
	struct rc_scene s;

	scene_init(&s, state, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	expect_refused(&s, LEN, 8, s.bmr->rkey);
}

static void test_qp_without_remote_write_is_refused(void **state)
{
	struct rc_qp_opts ob;
	struct rc_scene s;

	rc_default_opts(&ob);
	ob.access = IBV_ACCESS_REMOTE_READ;
	scene_init_with(&s, state, RC_ACCESS_ALL, &ob);
	/* The QP's own rights: an invalid request (rxe's check_op_valid()). */
	expect_refused_with(&s, LEN, 8, s.bmr->rkey, IBV_WC_REM_INV_REQ_ERR);
}

/* B's QP loses the right while connected (RTS to RTS): the next WRITE sees it. */
static void test_right_taken_away_is_seen(void **state)
{
	struct ibv_qp_attr attr = { .qp_access_flags = IBV_ACCESS_REMOTE_READ };
	struct rc_scene s;

	scene_init(&s, state, RC_ACCESS_ALL);
	assert_int_equal(rc_scene_write(&s, 1, LEN, 8, s.bmr->rkey), 0);
	rc_expect_wc(s.env->a.scq, 1, IBV_WC_SUCCESS, NULL);
	rc_fill(s.b->p, 3 * LEN, s.b_seed);
	assert_int_equal(ibv_modify_qp(s.env->b.qp, &attr, IBV_QP_ACCESS_FLAGS), 0);
	assert_int_equal(rc_scene_write(&s, 2, LEN, 8, s.bmr->rkey), 0);
	rc_expect_wc(s.env->a.scq, 2, IBV_WC_REM_INV_REQ_ERR, NULL);
	rc_scene_expect_b_untouched(&s);
	expect_direct(1);
}

static void test_region_of_another_pd_is_refused(void **state)
{
	struct rc_scene s;
	struct ibv_mr *other;

	scene_init(&s, state, RC_ACCESS_ALL);
	other = rc_reg(s.env, s.env->pd2, s.b->p, 3 * LEN, RC_ACCESS_ALL);
	expect_refused(&s, LEN, 8, other->rkey);
}

/* ibv_rereg_mr() taking the right away: the key's new rights hold at once. */
static void test_reregistered_without_the_right_is_refused(void **state)
{
	struct rc_scene s;

	scene_init(&s, state, RC_ACCESS_ALL);
	assert_int_equal(ibv_rereg_mr(s.bmr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
				      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ), 0);
	expect_refused(&s, LEN, 8, s.bmr->rkey);
}

/* A signaled RDMA WRITE of 8 bytes from A's offset a_off to B's offset b_off. */
static struct ibv_send_wr write_wr(struct rc_scene *s, uint64_t wr_id, struct ibv_sge *sge,
				   size_t a_off, size_t b_off, uint32_t rkey)
{
	struct ibv_send_wr wr;

	*sge = rc_sge(s->a->p + a_off, 8, s->amr);
	wr = rc_signaled_wr(wr_id, IBV_WR_RDMA_WRITE, sge, 1);
	wr.wr.rdma.remote_addr = (uintptr_t)s->b->p + b_off;
	wr.wr.rdma.rkey = rkey;
	return wr;
}

/* Posts the n WRs of wr as one posting list, and expects their completions in order:
 * status[i] for wr[i], or all successful (status NULL). */
static void post_list_expect(struct rc_scene *s, struct ibv_send_wr *wr, int n,
			     const enum ibv_wc_status *status)
{
	struct ibv_send_wr *bad;

	for (int i = 0; i < n; i++)
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	assert_int_equal(ibv_post_send(s->env->a.qp, wr, &bad), 0);
	for (int i = 0; i < n; i++)
		rc_expect_wc(s->env->a.scq, wr[i].wr_id, status ? status[i] : IBV_WC_SUCCESS, NULL);
}

/*
 * WRITEs placed directly between frames: the responder's expected PSN stays the next
 * frame's, so every SEND, READ and batched WRITE around them is taken, in order. Each
 * round: a lone WRITE (placed); a posting list of two WRITEs and a SEND (the WRITEs placed
 * as one run, the SEND numbered down by two); a READ, a SEND and two WRITEs (the READ done
 * directly, the rest not first on the wire once the SEND is: frames, in one batch).
 */
static void test_psns_stay_in_step(void **state)
{
	struct rc_scene s;
	struct ibv_wc wc;

	scene_init(&s, state, RC_ACCESS_ALL);
	for (int i = 0; i < 20; i++) {
		struct ibv_sge ws, ss = rc_sge(s.a->p + 8 * i, 8, s.amr), sge[4];
		struct ibv_sge rs = rc_sge(s.b->p + 2 * LEN + 8 * i, 8, s.bmr);
		struct ibv_sge rs2 = rc_sge(s.b->p + 2 * LEN + 512 + 8 * i, 8, s.bmr);
		struct ibv_sge rd = rc_sge(s.a->p + LEN + 8 * i, 8, s.amr);
		struct ibv_send_wr lone = write_wr(&s, 1, &ws, 8 * i, 8 * i, s.bmr->rkey), wr[4];

		assert_int_equal(ibv_post_send(s.env->a.qp, &lone, &(struct ibv_send_wr *){ 0 }), 0);
		rc_expect_wc(s.env->a.scq, 1, IBV_WC_SUCCESS, NULL);
		rc_post_recv(s.env->b.qp, 2, &rs, 1);
		for (int j = 0; j < 2; j++)
			wr[j] = write_wr(&s, 5 + j, &sge[j], 8 * i, LEN + 16 * i + 8 * j, s.bmr->rkey);
		wr[2] = rc_signaled_wr(3, IBV_WR_SEND, &ss, 1);
		post_list_expect(&s, wr, 3, NULL);
		rc_expect_wc(s.env->b.rcq, 2, IBV_WC_SUCCESS, &wc);
		assert_int_equal(wc.byte_len, 8);
		rc_post_recv(s.env->b.qp, 9, &rs2, 1);
		wr[0] = rc_signaled_wr(4, IBV_WR_RDMA_READ, &rd, 1);
		wr[0].wr.rdma.remote_addr = (uintptr_t)s.b->p + 8 * i;
		wr[0].wr.rdma.rkey = s.bmr->rkey;
		wr[1] = rc_signaled_wr(10, IBV_WR_SEND, &ss, 1);
		for (int j = 2; j < 4; j++)
			wr[j] = write_wr(&s, 6 + j, &sge[j], 8 * i, 2 * LEN + 1024 + 16 * i + 8 * j,
					 s.bmr->rkey);
		post_list_expect(&s, wr, 4, NULL);
		rc_expect_wc(s.env->b.rcq, 9, IBV_WC_SUCCESS, &wc);
	}
	rc_expect_bytes(s.b->p, s.a->p, 160, "the lone WRITEs");
	rc_expect_bytes(s.b->p + 2 * LEN, s.a->p, 160, "the SENDs");
	rc_expect_bytes(s.b->p + 2 * LEN + 512, s.a->p, 160, "the SENDs behind READs");
	rc_expect_bytes(s.a->p + LEN, s.a->p, 160, "the READs of what was placed");
	for (int i = 0; i < 20; i++) {
		rc_expect_bytes(s.b->p + LEN + 16 * i, s.a->p + 8 * i, 8, "a run's WRITE");
		rc_expect_bytes(s.b->p + LEN + 16 * i + 8, s.a->p + 8 * i, 8, "its second");
		rc_expect_bytes(s.b->p + 2 * LEN + 1024 + 16 * i + 16, s.a->p + 8 * i, 8,
				"a WRITE behind a SEND");
		rc_expect_bytes(s.b->p + 2 * LEN + 1024 + 16 * i + 24, s.a->p + 8 * i, 8,
				"its second");
	}
	expect_direct(60);
	expect_direct_reads(20);
}

/*
 * A posting list of WRITEs, one run: placed together, each byte where its WR said (the
 * ranges in order, some adjacent, one written twice: the later WR's bytes win), and
 * nothing else of B touched.
 */
static void test_a_posting_list_is_placed_as_one_run(void **state)
{
	struct ibv_send_wr wr[DIRECT_LIST];
	struct ibv_sge sge[DIRECT_LIST];
	uint8_t want[3 * LEN];
	struct rc_scene s;

	scene_init(&s, state, RC_ACCESS_ALL);
	memcpy(want, s.b->p, 3 * LEN);
	for (int i = 0; i < DIRECT_LIST; i++) {
		/* Pairs of adjacent ranges 64 bytes apart; the last WR rewrites the first range. */
		size_t to = i == DIRECT_LIST - 1 ? 0 : (size_t)(i / 2) * 64 + (size_t)(i % 2) * 8;

		wr[i] = write_wr(&s, 10 + i, &sge[i], 8 * i, LEN + to, s.bmr->rkey);
		memcpy(want + LEN + to, s.a->p + 8 * i, 8);
	}
	post_list_expect(&s, wr, DIRECT_LIST, NULL);
	rc_expect_bytes(s.b->p, want, 3 * LEN, "B after the run");
	expect_direct(DIRECT_LIST);
}

/*
 * A run ends at the first WRITE its target would refuse: those before it are placed, it
 * gets the responder's remote access error, and what follows is flushed, exactly as for
 * frames; B holds the placed bytes only.
 */
static void test_a_run_stops_at_a_refused_write(void **state)
{
	static const enum ibv_wc_status status[] = { IBV_WC_SUCCESS, IBV_WC_SUCCESS,
						     IBV_WC_REM_ACCESS_ERR, IBV_WC_WR_FLUSH_ERR };
	struct ibv_send_wr wr[4];
	struct ibv_sge sge[4];
	struct rc_scene s;
	uint8_t want[3 * LEN];

	scene_init(&s, state, RC_ACCESS_ALL);
	memcpy(want, s.b->p, 3 * LEN);
	memcpy(want + LEN, s.a->p, 16);
	for (int i = 0; i < 4; i++)
		wr[i] = write_wr(&s, 20 + i, &sge[i], 8 * i, LEN + 8 * i,
				 i == 2 ? s.bmr->rkey ^ 0x100 : s.bmr->rkey);
	post_list_expect(&s, wr, 4, status);
	rc_expect_bytes(s.b->p, want, 3 * LEN, "B");
	expect_direct(2);
}

/* Two keys in one posting list: a run for each, every WRITE placed. */
static void test_another_key_starts_another_run(void **state)
{
	struct ibv_send_wr wr[4];
	struct ibv_sge sge[4];
	struct ibv_mr *middle;
	struct rc_scene s;

	scene_init(&s, state, RC_ACCESS_ALL);
	middle = middle_of_b(&s);
	for (int i = 0; i < 4; i++)
		wr[i] = write_wr(&s, 30 + i, &sge[i], 8 * i, LEN + 8 * i,
				 i < 2 ? s.bmr->rkey : middle->rkey);
	post_list_expect(&s, wr, 4, NULL);
	rc_expect_bytes(s.b->p + LEN, s.a->p, 32, "the two runs' WRITEs");
	expect_direct(4);
}

/*
 * A bad local key ends a run where a frame would have met it: the WRITEs before it are
 * placed, it completes with a local protection error, the rest is flushed.
 */
static void test_a_bad_local_key_ends_the_run(void **state)
{
	static const enum ibv_wc_status status[] = { IBV_WC_SUCCESS, IBV_WC_LOC_PROT_ERR,
						     IBV_WC_WR_FLUSH_ERR };
	struct ibv_send_wr wr[3];
	struct ibv_sge sge[3];
	struct rc_scene s;
	uint8_t want[3 * LEN];

	scene_init(&s, state, RC_ACCESS_ALL);
	memcpy(want, s.b->p, 3 * LEN);
	memcpy(want + LEN, s.a->p, 8);
	for (int i = 0; i < 3; i++)
		wr[i] = write_wr(&s, 40 + i, &sge[i], 8 * i, LEN + 8 * i, s.bmr->rkey);
	sge[1].lkey ^= 0x100;
	post_list_expect(&s, wr, 3, status);
	rc_expect_bytes(s.b->p, want, 3 * LEN, "B");
	expect_direct(1);
}

/* A signaled RDMA READ of len bytes from B's offset b_off into mr at A's offset a_off. */
static struct ibv_send_wr read_wr(struct rc_scene *s, uint64_t wr_id, struct ibv_sge *sge,
				  struct ibv_mr *mr, size_t a_off, size_t b_off, uint32_t len,
				  uint32_t rkey)
{
	struct ibv_send_wr wr;

	*sge = rc_sge(s->a->p + a_off, len, mr);
	wr = rc_signaled_wr(wr_id, IBV_WR_RDMA_READ, sge, 1);
	wr.wr.rdma.remote_addr = (uintptr_t)s->b->p + b_off;
	wr.wr.rdma.rkey = rkey;
	return wr;
}

/* One READ of B's middle third into A's, posted alone; its completion's status. */
static void expect_read(struct rc_scene *s, struct ibv_mr *local, uint64_t b_off, uint32_t len,
			uint32_t rkey, enum ibv_wc_status status)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr = read_wr(s, 50, &sge, local, LEN, b_off, len, rkey), *bad;

	assert_int_equal(ibv_post_send(s->env->a.qp, &wr, &bad), 0);
	rc_expect_wc(s->env->a.scq, 50, status, NULL);
}

/* A READ refused by the target's rules: the responder's status, A as it was, none done. */
static void expect_read_refused(struct rc_scene *s, uint64_t b_off, uint32_t rkey,
				enum ibv_wc_status status)
{
	expect_read(s, s->amr, b_off, 8, rkey, status);
	rc_expect_pattern(s->a->p, 3 * LEN, s->a_seed, "A's memory");
	expect_direct_reads(0);
}

/* A lone READ is done by the requester: exactly B's range, into exactly A's. */
static void test_lone_read_is_done_directly(void **state)
{
	struct rc_scene s;

	scene_init(&s, state, RC_ACCESS_ALL);
	expect_read(&s, s.amr, LEN + 16, LEN - 32, s.bmr->rkey, IBV_WC_SUCCESS);
	rc_expect_pattern(s.a->p, LEN, s.a_seed, "A before the READ's range");
	rc_expect_bytes(s.a->p + LEN, s.b->p + LEN + 16, LEN - 32, "the READ's range");
	rc_expect_pattern_range(s.a->p, 2 * LEN - 32, 3 * LEN, s.a_seed, "A after it");
	rc_scene_expect_b_untouched(&s);
	expect_direct_reads(1);
	expect_direct(0);
}

static void test_read_with_a_wrong_key_is_refused(void **state)
{
	struct rc_scene s;

	scene_init(&s, state, RC_ACCESS_ALL);
	expect_read_refused(&s, LEN, s.bmr->rkey ^ 0x100, IBV_WC_REM_ACCESS_ERR);
}

static void test_read_one_byte_past_the_region_is_refused(void **state)
{
	struct rc_scene s;

	scene_init(&s, state, RC_ACCESS_ALL);
	expect_read_refused(&s, 2 * LEN - 7, middle_of_b(&s)->rkey, IBV_WC_REM_ACCESS_ERR);
}

/* A region that takes WRITEs but not READs: published, and still refused for a READ. */
static void test_region_without_remote_read_is_refused(void **state)
{
	struct rc_scene s;

	scene_init(&s, state, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	expect_read_refused(&s, LEN, s.bmr->rkey, IBV_WC_REM_ACCESS_ERR);
}

static void test_read_of_a_region_of_another_pd_is_refused(void **state)
{
	struct rc_scene s;
	struct ibv_mr *other;

	scene_init(&s, state, RC_ACCESS_ALL);
	other = rc_reg(s.env, s.env->pd2, s.b->p, 3 * LEN, RC_ACCESS_ALL);
	expect_read_refused(&s, LEN, other->rkey, IBV_WC_REM_ACCESS_ERR);
}

static void test_qp_without_remote_read_is_refused(void **state)
{
	struct rc_qp_opts ob;
	struct rc_scene s;

	rc_default_opts(&ob);
	ob.access = IBV_ACCESS_REMOTE_WRITE;
	scene_init_with(&s, state, RC_ACCESS_ALL, &ob);
	expect_read_refused(&s, LEN, s.bmr->rkey, IBV_WC_REM_INV_REQ_ERR);
}

/* Where the data would go must take local writes: a local protection error, as a frame. */
static void test_read_into_a_region_without_local_write_fails_locally(void **state)
{
	struct rc_scene s;
	struct ibv_mr *read_only;

	scene_init(&s, state, RC_ACCESS_ALL);
	read_only = rc_reg(s.env, s.env->pd, s.a->p + LEN, LEN, 0);
	expect_read(&s, read_only, LEN, 8, s.bmr->rkey, IBV_WC_LOC_PROT_ERR);
	rc_expect_pattern(s.a->p, 3 * LEN, s.a_seed, "A's memory");
	expect_direct_reads(0);
}

/*
 * Six READs in one posting list, more than max_rd_atomic (4): every one done directly, each
 * into its own buffer. (How they were split into runs does not show from here.)
 */
static void test_a_posting_list_of_reads_is_done_in_runs(void **state)
{
	struct ibv_send_wr wr[6];
	struct ibv_sge sge[6];
	struct rc_scene s;

	scene_init(&s, state, RC_ACCESS_ALL);
	for (int i = 0; i < 6; i++)
		wr[i] = read_wr(&s, 60 + i, &sge[i], s.amr, LEN + 64 * i, 2 * LEN - 8 * i, 8,
				s.bmr->rkey);
	post_list_expect(&s, wr, 6, NULL);
	for (int i = 0; i < 6; i++)
		rc_expect_bytes(s.a->p + LEN + 64 * i, s.b->p + 2 * LEN - 8 * i, 8, "a READ's data");
	expect_direct_reads(6);
}

/* Writes an ever-changing word into B's region until a WRITE fails. */
struct writer {
	struct rc_scene *s;
	uint32_t rkey;		/* B's, read before the thread starts: the test frees B's MR */
	uint64_t placed;	/* WRITEs completed (atomic: the test thread waits for one) */
	uint64_t failed_status;
};

static void *write_until_refused(void *arg)
{
	struct writer *w = arg;
	struct rc_scene *s = w->s;
	uint64_t *word = (uint64_t *)(void *)s->a->p;

	for (uint64_t n = 1;; n++) {
		struct ibv_wc wc;
		int got;

		*word = n;
		if (rc_scene_write(s, n, LEN, 8, w->rkey))
			return NULL;
		for (uint64_t until = rc_now_ms() + RC_WAIT_MS;
		     !(got = ibv_poll_cq(s->env->a.scq, 1, &wc)) && rc_now_ms() < until;)
			;
		if (got != 1 || wc.status != IBV_WC_SUCCESS) {
			w->failed_status = got != 1 ? UINT64_MAX : wc.status;
			return NULL;
		}
		__atomic_store_n(&w->placed, n, __ATOMIC_RELEASE);
	}
}

/*
 * ibv_dereg_mr() while a requester places WRITEs into the region as fast as it can: once
 * it returns, not one more byte lands (the memory may be someone else's by then).
 */
static void test_no_byte_lands_after_deregistration(void **state)
{
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	struct writer w = { 0 };
	uint8_t after[LEN];
	uint64_t direct;
	struct rc_scene s;
	pthread_t t;

	scene_init(&s, state, RC_ACCESS_ALL);
	w.s = &s;
	w.rkey = s.bmr->rkey;
	assert_int_equal(pthread_create(&t, NULL, write_until_refused, &w), 0);
	/* The writer under way first: on a busy machine its thread may not have run yet. */
	for (uint64_t until = rc_now_ms() + RC_WAIT_MS;
	     !__atomic_load_n(&w.placed, __ATOMIC_ACQUIRE) && rc_now_ms() < until;)
		sched_yield();
	assert_true(__atomic_load_n(&w.placed, __ATOMIC_ACQUIRE) > 0);
	nanosleep(&ts, NULL);
	rc_dereg(s.env, s.bmr);
	memcpy(after, s.b->p + LEN, LEN);
	nanosleep(&ts, NULL);
	rc_expect_bytes(s.b->p + LEN, after, LEN, "B's region after ibv_dereg_mr()");
	assert_int_equal(pthread_join(t, NULL), 0);
	rc_expect_bytes(s.b->p + LEN, after, LEN, "B's region once the writer stopped");
	assert_int_equal(w.failed_status, IBV_WC_REM_ACCESS_ERR);
	/* Placed, most of them (one that met the key changing went as a frame). */
	direct = rc_port_counter("same_host_direct_writes") - direct_before;
	assert_true(direct > 0 && direct <= w.placed);
}

/* The status of the one WR posted on A, into w->failed_status (no cmocka: not the test's
 * thread). */
static void take_status(struct writer *w)
{
	struct ibv_wc wc;
	int got = 0;

	for (uint64_t until = rc_now_ms() + RC_WAIT_MS;
	     !(got = ibv_poll_cq(w->s->env->a.scq, 1, &wc)) && rc_now_ms() < until;)
		;
	if (got == 1)
		w->failed_status = wc.status;
}

/* One WRITE of a known word into B's middle third. */
static void *write_once(void *arg)
{
	struct writer *w = arg;

	*(uint64_t *)(void *)w->s->a->p = 0x1122334455667788ull;
	w->failed_status = UINT64_MAX;
	if (!rc_scene_write(w->s, 1, LEN, 8, w->rkey))
		take_status(w);
	return NULL;
}

/* One READ of B's middle third's first word into A's. */
static void *read_once(void *arg)
{
	struct writer *w = arg;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;

	w->failed_status = UINT64_MAX;
	wr = read_wr(w->s, 1, &sge, w->s->amr, LEN, LEN, 8, w->rkey);
	if (!ibv_post_send(w->s->env->a.qp, &wr, &bad))
		take_status(w);
	return NULL;
}

/*
 * The race made certain: the placement naps 300 ms once announced (a test hook), and the
 * region is deregistered 100 ms into the nap by this function, which checks that
 * ibv_dereg_mr() waited for the placement; the thread running fn is still to be joined.
 */
static void deregister_during_the_nap(struct rc_scene *s, void **state, void *(*fn)(void *),
				      struct writer *w, pthread_t *t)
{
	struct timespec ts = { 0, 100 * 1000 * 1000 };
	uint64_t t0;

	setenv("SOFTRDMA_TEST_DIRECT_NAP_MS", "300", 1);
	scene_init(s, state, RC_ACCESS_ALL);
	unsetenv("SOFTRDMA_TEST_DIRECT_NAP_MS");
	*w = (struct writer){ .s = s, .rkey = s->bmr->rkey };
	assert_int_equal(pthread_create(t, NULL, fn, w), 0);
	nanosleep(&ts, NULL);
	t0 = rc_now_ms();
	rc_dereg(s->env, s->bmr);
	assert_true(rc_now_ms() - t0 >= 100);	/* it waited for the nap */
}

/* When ibv_dereg_mr() returns, the WRITE has landed, and nothing lands after. */
static void test_deregistration_waits_for_the_placement_under_way(void **state)
{
	struct timespec ts = { 0, 100 * 1000 * 1000 };
	uint8_t after[LEN];
	struct rc_scene s;
	struct writer w;
	uint64_t landed;
	pthread_t t;

	deregister_during_the_nap(&s, state, write_once, &w, &t);
	memcpy(&landed, s.b->p + LEN, 8);
	assert_true(landed == 0x1122334455667788ull);
	memcpy(after, s.b->p + LEN, LEN);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(w.failed_status, IBV_WC_SUCCESS);
	nanosleep(&ts, NULL);
	rc_expect_bytes(s.b->p + LEN, after, LEN, "B's region after ibv_dereg_mr()");
	expect_direct(1);
}

/* A READ under way likewise: it read the region while it was registered. */
static void test_deregistration_waits_for_the_read_under_way(void **state)
{
	struct rc_scene s;
	struct writer w;
	pthread_t t;

	deregister_during_the_nap(&s, state, read_once, &w, &t);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(w.failed_status, IBV_WC_SUCCESS);
	rc_expect_bytes(s.a->p + LEN, s.b->p + LEN, 8, "what the READ read");
	expect_direct_reads(1);
}

/* SOFTRDMA_DIRECT_WRITE=0: the same WRITE, as a frame. */
static void test_switched_off_writes_go_as_frames(void **state)
{
	struct rc_scene s;

	setenv("SOFTRDMA_DIRECT_WRITE", "0", 1);
	scene_init(&s, state, RC_ACCESS_ALL);	/* the streams open with the pair */
	unsetenv("SOFTRDMA_DIRECT_WRITE");
	rc_scene_expect_middle_write(&s);
	expect_direct(0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		RC_TEST(lone_write_is_placed_exactly_in_range),
		RC_TEST(write_with_a_wrong_key_is_refused),
		RC_TEST(write_one_byte_past_the_region_is_refused),
		RC_TEST(write_just_before_the_region_is_refused),
		RC_TEST(region_without_remote_write_is_refused),
		RC_TEST(qp_without_remote_write_is_refused),
		RC_TEST(right_taken_away_is_seen),
		RC_TEST(region_of_another_pd_is_refused),
		RC_TEST(reregistered_without_the_right_is_refused),
		RC_TEST(psns_stay_in_step),
		RC_TEST(a_posting_list_is_placed_as_one_run),
		RC_TEST(a_run_stops_at_a_refused_write),
		RC_TEST(another_key_starts_another_run),
		RC_TEST(a_bad_local_key_ends_the_run),
		RC_TEST(lone_read_is_done_directly),
		RC_TEST(read_with_a_wrong_key_is_refused),
		RC_TEST(read_one_byte_past_the_region_is_refused),
		RC_TEST(region_without_remote_read_is_refused),
		RC_TEST(read_of_a_region_of_another_pd_is_refused),
		RC_TEST(qp_without_remote_read_is_refused),
		RC_TEST(read_into_a_region_without_local_write_fails_locally),
		RC_TEST(a_posting_list_of_reads_is_done_in_runs),
		RC_TEST(deregistration_waits_for_the_read_under_way),
		RC_TEST(no_byte_lands_after_deregistration),
		RC_TEST(deregistration_waits_for_the_placement_under_way),
		RC_TEST(switched_off_writes_go_as_frames),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
