// SPDX-License-Identifier: MIT
/*
 * Object lifecycle and limits as the kernel's uverbs enforces them, through the real verbs
 * API: a destroy with dependents is EBUSY and changes nothing; ibv_destroy_cq/qp/srq wait
 * until the events the application took are acknowledged and drop the ones it did not
 * take; every advertised count limit holds at its exact value, per device; a garbled handle
 * or context is an error, never a crash; ibv_close_device destroys what is left; running
 * out of file descriptors is a resource error. Run under `softrdma run` (ctest does), and
 * under valgrind.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>
#include <cmocka.h>
#include <infiniband/verbs.h>

#include "rc_fixture.h"

#define FOREIGN_HANDLE	0x7fff0000u	/* names nothing in a context of a few objects */

static struct ibv_cq *make_cq(struct rc_env *env, struct ibv_comp_channel *ch)
{
	struct ibv_cq *cq = ibv_create_cq(env->ctx, 16, NULL, ch, 0);

	assert_non_null(cq);
	return cq;
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
			      struct ibv_srq *srq, enum ibv_qp_type type)
{
	struct ibv_qp_init_attr init = {
		.send_cq = scq, .recv_cq = rcq, .srq = srq, .qp_type = type,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	return ibv_create_qp(pd, &init);
}

static struct ibv_srq *make_srq(struct ibv_pd *pd)
{
	struct ibv_srq_init_attr init = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &init);

	assert_non_null(srq);
	return srq;
}

static struct ibv_ah *make_ah(struct rc_env *env, struct ibv_pd *pd)
{
	struct ibv_ah_attr attr = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = env->gid, .sgid_index = 0, .hop_limit = 1 },
	};

	return ibv_create_ah(pd, &attr);
}

/* Each kind of object a PD can have on it. */
enum dependent { DEP_QP, DEP_MR, DEP_MW, DEP_AH, DEP_SRQ, DEP_KINDS };

struct on_pd {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_mw *mw;
	struct ibv_ah *ah;
	struct ibv_srq *srq;
};

static void make_dependent(struct rc_env *env, struct ibv_pd *pd, enum dependent d,
			   struct on_pd *o)
{
	static uint8_t buf[4096];

	memset(o, 0, sizeof(*o));
	switch (d) {
	case DEP_QP:
		o->cq = make_cq(env, NULL);
		assert_non_null(o->qp = make_qp(pd, o->cq, o->cq, NULL, IBV_QPT_RC));
		break;
	case DEP_MR:
		assert_non_null(o->mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE));
		break;
	case DEP_MW:
		assert_non_null(o->mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1));
		break;
	case DEP_AH:
		assert_non_null(o->ah = make_ah(env, pd));
		break;
	case DEP_SRQ:
		o->srq = make_srq(pd);
		break;
	case DEP_KINDS:
		break;
	}
}

static void destroy_dependent(struct on_pd *o)
{
	if (o->qp)
		assert_int_equal(ibv_destroy_qp(o->qp), 0);
	if (o->cq)
		assert_int_equal(ibv_destroy_cq(o->cq), 0);
	if (o->mr)
		assert_int_equal(ibv_dereg_mr(o->mr), 0);
	if (o->mw)
		assert_int_equal(ibv_dealloc_mw(o->mw), 0);
	if (o->ah)
		assert_int_equal(ibv_destroy_ah(o->ah), 0);
	if (o->srq)
		assert_int_equal(ibv_destroy_srq(o->srq), 0);
}

/* uverbs_free_pd(): EBUSY while anything is on the PD; the PD keeps working meanwhile. */
static void test_dealloc_pd_busy_with_each_dependent(void **state)
{
	struct rc_env *env = *state;

	for (int d = 0; d < DEP_KINDS; d++) {
		struct ibv_pd *pd = ibv_alloc_pd(env->ctx);
		struct on_pd o;
		struct ibv_mw *more;

		assert_non_null(pd);
		make_dependent(env, pd, (enum dependent)d, &o);
		assert_int_equal(ibv_dealloc_pd(pd), EBUSY);
		assert_non_null(more = ibv_alloc_mw(pd, IBV_MW_TYPE_1));
		assert_int_equal(ibv_dealloc_mw(more), 0);
		assert_int_equal(ibv_dealloc_pd(pd), EBUSY);
		destroy_dependent(&o);
		assert_int_equal(ibv_dealloc_pd(pd), 0);
	}
}

/* ib_destroy_cq_user(): EBUSY while a QP completes into the CQ, as either of its CQs. */
static void test_destroy_cq_busy_while_a_qp_uses_it(void **state)
{
	struct rc_env *env = *state;
	struct ibv_cq *scq = make_cq(env, NULL), *rcq = make_cq(env, NULL);
	struct ibv_qp *qp = make_qp(env->pd, scq, rcq, NULL, IBV_QPT_RC);

	assert_non_null(qp);
	assert_int_equal(ibv_destroy_cq(scq), EBUSY);
	assert_int_equal(ibv_destroy_cq(rcq), EBUSY);
	assert_int_equal(rc_state(qp), IBV_QPS_RESET);
	assert_int_equal(ibv_destroy_qp(qp), 0);
	assert_int_equal(ibv_destroy_cq(scq), 0);
	assert_int_equal(ibv_destroy_cq(rcq), 0);

	/* One CQ for both queues: counted twice, released twice. */
	scq = make_cq(env, NULL);
	assert_non_null(qp = make_qp(env->pd, scq, scq, NULL, IBV_QPT_UD));
	assert_int_equal(ibv_destroy_cq(scq), EBUSY);
	assert_int_equal(ibv_destroy_qp(qp), 0);
	assert_int_equal(ibv_destroy_cq(scq), 0);
}

/* ib_destroy_srq_user(): EBUSY while a QP takes its receives from the SRQ. */
static void test_destroy_srq_busy_while_a_qp_uses_it(void **state)
{
	struct rc_env *env = *state;
	struct ibv_cq *cq = make_cq(env, NULL);
	struct ibv_srq *srq = make_srq(env->pd);
	struct ibv_qp *qp = make_qp(env->pd, cq, cq, srq, IBV_QPT_RC);
	struct ibv_srq_attr attr;

	assert_non_null(qp);
	assert_int_equal(ibv_destroy_srq(srq), EBUSY);
	assert_int_equal(ibv_query_srq(srq, &attr), 0);
	assert_int_equal(ibv_destroy_qp(qp), 0);
	assert_int_equal(ibv_destroy_srq(srq), 0);
	assert_int_equal(ibv_destroy_cq(cq), 0);
}

/* ibv_destroy_comp_channel(): EBUSY while a CQ reports to it, for either creation call. */
static void test_destroy_channel_busy_while_a_cq_uses_it(void **state)
{
	struct rc_env *env = *state;
	struct ibv_comp_channel *ch = ibv_create_comp_channel(env->ctx);
	struct ibv_cq_init_attr_ex attr = { .cqe = 16, .channel = ch,
					    .wc_flags = IBV_WC_STANDARD_FLAGS };
	struct ibv_cq *cq;
	struct ibv_cq_ex *cqx;

	assert_non_null(ch);
	cq = make_cq(env, ch);
	assert_int_equal(ibv_destroy_comp_channel(ch), EBUSY);
	assert_int_equal(ibv_destroy_cq(cq), 0);
	assert_non_null(cqx = ibv_create_cq_ex(env->ctx, &attr));
	assert_int_equal(ibv_destroy_comp_channel(ch), EBUSY);
	assert_int_equal(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
	assert_int_equal(ibv_destroy_comp_channel(ch), 0);
}

/* A WRITE from a to b's region; its completion status, and whether the bytes arrived. */
static void write_a_to_b(struct rc_env *env, uint64_t wr_id, struct rc_buf *src,
			 struct ibv_mr *smr, struct rc_buf *dst, struct ibv_mr *dmr)
{
	rc_expect_write_lands(env, wr_id, src->p, smr, (uintptr_t)dst->p, dmr->rkey, dst->p, 256,
			      (uint8_t)wr_id, "the written bytes");
}

/*
 * The crash the refusals prevent: destroys in the wrong order are refused, the connection
 * keeps working through all of them, then the right order succeeds.
 */
static void test_refused_destroys_leave_everything_working(void **state)
{
	struct rc_env *env = *state;
	struct rc_buf *src = rc_alloc(env, 4096), *dst = rc_alloc(env, 4096);
	struct ibv_mr *smr = rc_reg(env, env->pd, src->p, src->cap, RC_ACCESS_ALL);
	struct ibv_mr *dmr = rc_reg(env, env->pd, dst->p, dst->cap, RC_ACCESS_ALL);

	rc_pair(env, NULL, NULL);
	write_a_to_b(env, 1, src, smr, dst, dmr);
	assert_int_equal(ibv_dealloc_pd(env->pd), EBUSY);
	assert_int_equal(ibv_destroy_cq(env->a.scq), EBUSY);
	assert_int_equal(ibv_destroy_cq(env->b.rcq), EBUSY);
	write_a_to_b(env, 2, src, smr, dst, dmr);
	assert_int_equal(rc_state(env->a.qp), IBV_QPS_RTS);
	assert_int_equal(rc_state(env->b.qp), IBV_QPS_RTS);
	rc_destroy_end(&env->a);
	rc_destroy_end(&env->b);
	assert_int_equal(ibv_dealloc_pd(env->pd), EBUSY);	/* the MRs */
	rc_dereg(env, smr);
	rc_dereg(env, dmr);
	assert_int_equal(ibv_dealloc_pd(env->pd), 0);
	env->pd = NULL;
}

/*
 * A channel cannot be destroyed while CQs report to it, nor once its context is closed
 * (ibv_destroy_comp_channel locks the context): an application that closes with CQs on a
 * channel keeps the channel, with the kernel too. Kept reachable here, not leaked.
 */
struct ibv_comp_channel *channel_left_behind;

/*
 * ibv_close_device with everything still there, a WRITE in flight included: the kernel's
 * close destroys it all (valgrind: nothing leaks, nothing is touched after it is freed).
 * Only the completion channel stays: it is the application's, as with the kernel.
 */
static void test_close_device_with_objects_left(void **state)
{
	struct rc_env *env = *state;
	struct rc_buf *src = rc_alloc(env, 1 << 16), *dst = rc_alloc(env, 1 << 16);
	struct ibv_mr *smr = ibv_reg_mr(env->pd, src->p, src->cap, RC_ACCESS_ALL);
	struct ibv_mr *dmr = ibv_reg_mr(env->pd, dst->p, dst->cap, RC_ACCESS_ALL);
	struct ibv_sge sge;
	struct ibv_srq *srq = make_srq(env->pd2);
	struct ibv_cq *cq = make_cq(env, NULL);

	assert_non_null(smr);
	assert_non_null(dmr);
	env->channel = ibv_create_comp_channel(env->ctx);
	assert_non_null(env->channel);
	rc_pair(env, NULL, NULL);
	assert_non_null(make_qp(env->pd2, cq, make_cq(env, env->channel), srq, IBV_QPT_RC));
	assert_non_null(make_ah(env, env->pd));
	assert_non_null(ibv_alloc_mw(env->pd, IBV_MW_TYPE_2));
	sge = rc_sge(src->p, (uint32_t)src->cap, smr);
	assert_int_equal(rc_post_rdma(env->a.qp, 1, IBV_WR_RDMA_WRITE, &sge, 1,
				      (uintptr_t)dst->p, dmr->rkey), 0);
	assert_int_equal(ibv_close_device(env->ctx), 0);
	/* Everything went with the context: the teardown has nothing left to destroy. */
	memset(&env->a, 0, sizeof(env->a));
	memset(&env->b, 0, sizeof(env->b));
	env->ctx = NULL;
	env->pd = env->pd2 = NULL;
	channel_left_behind = env->channel;
	env->channel = NULL;
}

struct destroyer {
	pthread_t thread;
	int (*destroy)(void *obj);
	void *obj;
	atomic_int result;	/* -1 while running */
};

static void *destroyer_main(void *arg)
{
	struct destroyer *d = arg;

	atomic_store(&d->result, d->destroy(d->obj));
	return NULL;
}

static void destroy_in_thread(struct destroyer *d, int (*destroy)(void *), void *obj)
{
	d->destroy = destroy;
	d->obj = obj;
	atomic_init(&d->result, -1);
	assert_int_equal(pthread_create(&d->thread, NULL, destroyer_main, d), 0);
}

/* The destroy is still waiting after RC_QUIET_MS. */
static void expect_still_waiting(struct destroyer *d)
{
	usleep(RC_QUIET_MS * 1000);
	assert_int_equal(atomic_load(&d->result), -1);
}

static void expect_done(struct destroyer *d)
{
	uint64_t until = rc_now_ms() + RC_WAIT_MS;

	while (atomic_load(&d->result) == -1 && rc_now_ms() < until)
		usleep(1000);
	assert_int_equal(atomic_load(&d->result), 0);
	pthread_join(d->thread, NULL);
}

static int destroy_cq(void *cq) { return ibv_destroy_cq(cq); }
static int destroy_qp(void *qp) { return ibv_destroy_qp(qp); }
static int destroy_srq(void *srq) { return ibv_destroy_srq(srq); }

/* How many event records a channel or async fd holds unread. */
static int records_pending(int fd, size_t rec_size)
{
	int bytes = 0;

	assert_int_equal(ioctl(fd, FIONREAD, &bytes), 0);
	return bytes / (int)rec_size;
}

static void wait_records(int fd, size_t rec_size, int n)
{
	uint64_t until = rc_now_ms() + RC_WAIT_MS;

	while (records_pending(fd, rec_size) < n && rc_now_ms() < until)
		usleep(1000);
	assert_int_equal(records_pending(fd, rec_size), n);
}

/* A pair whose four CQs report to env->channel, each armed. */
static void channel_pair(struct rc_env *env)
{
	struct rc_qp_opts o;

	rc_default_opts(&o);
	o.use_channel = true;
	rc_pair(env, &o, &o);
	assert_int_equal(ibv_req_notify_cq(env->a.scq, 0), 0);
	assert_int_equal(ibv_req_notify_cq(env->a.rcq, 0), 0);
	assert_int_equal(ibv_req_notify_cq(env->b.scq, 0), 0);
	assert_int_equal(ibv_req_notify_cq(env->b.rcq, 0), 0);
}

/* A SEND from a to b: one event on a's send CQ, one on b's receive CQ. */
static void send_a_to_b(struct rc_env *env)
{
	struct rc_buf *buf = rc_alloc(env, 4096);
	struct ibv_mr *mr = rc_reg(env, env->pd, buf->p, buf->cap, RC_ACCESS_ALL);
	struct ibv_sge rsge = rc_sge(buf->p + 2048, 64, mr), ssge = rc_sge(buf->p, 64, mr);
	struct ibv_send_wr wr = { .wr_id = 1, .opcode = IBV_WR_SEND, .sg_list = &ssge,
				  .num_sge = 1, .send_flags = IBV_SEND_SIGNALED }, *bad;

	rc_post_recv(env->b.qp, 2, &rsge, 1);
	assert_int_equal(ibv_post_send(env->a.qp, &wr, &bad), 0);
	wait_records(env->channel->fd, 8, 2);
}

/* ibv_destroy_cq(3): it waits until the events the application got are acknowledged. */
static void test_destroy_cq_waits_for_event_ack(void **state)
{
	struct rc_env *env = *state;
	struct destroyer d;
	struct ibv_cq *got, *other;
	struct rc_end *end;
	void *cq_context;


	channel_pair(env);
	send_a_to_b(env);
	assert_int_equal(ibv_get_cq_event(env->channel, &got, &cq_context), 0);
	assert_true(got == env->a.scq || got == env->b.rcq);
	end = got == env->a.scq ? &env->a : &env->b;
	other = got == env->a.scq ? env->b.rcq : env->a.scq;
	assert_int_equal(ibv_destroy_qp(end->qp), 0);
	end->qp = NULL;
	destroy_in_thread(&d, destroy_cq, got);
	expect_still_waiting(&d);
	ibv_ack_cq_events(got, 1);
	expect_done(&d);
	if (end == &env->a)
		env->a.scq = NULL;
	else
		env->b.rcq = NULL;
	/* The other CQ's event is still there, and names it. */
	assert_int_equal(ibv_get_cq_event(env->channel, &got, &cq_context), 0);
	assert_ptr_equal(got, other);
	ibv_ack_cq_events(got, 1);
}

/*
 * An event nobody took is dropped with its CQ (the kernel's ib_uverbs_release_ucq()):
 * the destroy does not wait for it, and ibv_get_cq_event never returns the destroyed CQ.
 * Once with the channel blocking, once non-blocking, as ibv_get_cq_event(3) suggests.
 */
static void destroy_cq_with_unread_event(struct rc_env *env, bool nonblocking)
{
	struct ibv_cq *got;
	void *cq_context;

	channel_pair(env);
	if (nonblocking)
		fcntl(env->channel->fd, F_SETFL, fcntl(env->channel->fd, F_GETFL) | O_NONBLOCK);
	send_a_to_b(env);
	assert_int_equal(ibv_destroy_qp(env->a.qp), 0);
	env->a.qp = NULL;
	assert_int_equal(ibv_destroy_cq(env->a.scq), 0);
	env->a.scq = NULL;
	assert_int_equal(records_pending(env->channel->fd, 8), 1);
	assert_int_equal(ibv_get_cq_event(env->channel, &got, &cq_context), 0);
	assert_ptr_equal(got, env->b.rcq);
	ibv_ack_cq_events(got, 1);
	assert_int_equal(records_pending(env->channel->fd, 8), 0);
}

static void test_destroy_cq_drops_unread_events(void **state)
{
	destroy_cq_with_unread_event(*state, false);
}

static void test_destroy_cq_drops_unread_events_nonblocking(void **state)
{
	destroy_cq_with_unread_event(*state, true);
}

/* A WRITE under a key b does not have: b's QP gets IBV_EVENT_QP_ACCESS_ERR. */
static void provoke_access_error(struct rc_env *env)
{
	struct rc_buf *buf = rc_alloc(env, 4096);
	struct ibv_mr *mr = rc_reg(env, env->pd, buf->p, buf->cap, RC_ACCESS_ALL);
	struct ibv_sge sge = rc_sge(buf->p, 64, mr);

	rc_pair(env, NULL, NULL);
	assert_int_equal(rc_post_rdma(env->a.qp, 1, IBV_WR_RDMA_WRITE, &sge, 1,
				      (uintptr_t)buf->p, mr->rkey ^ 0x5a5a), 0);
	rc_expect_wc(env->a.scq, 1, IBV_WC_REM_ACCESS_ERR, NULL);
}

/* ibv_destroy_qp waits until the async events the application got are acknowledged. */
static void test_destroy_qp_waits_for_async_event_ack(void **state)
{
	struct rc_env *env = *state;
	struct ibv_async_event ev;
	struct destroyer d;

	provoke_access_error(env);
	assert_int_equal(rc_get_async(env, &ev, RC_WAIT_MS), 1);
	assert_int_equal(ev.event_type, IBV_EVENT_QP_ACCESS_ERR);
	assert_ptr_equal(ev.element.qp, env->b.qp);
	destroy_in_thread(&d, destroy_qp, env->b.qp);
	expect_still_waiting(&d);
	ibv_ack_async_event(&ev);
	expect_done(&d);
	env->b.qp = NULL;
}

/* One nobody took is dropped with the QP: the destroy does not wait, nothing is left. */
static void test_destroy_qp_drops_unread_async_events(void **state)
{
	struct rc_env *env = *state;

	provoke_access_error(env);
	wait_records(env->ctx->async_fd, 16, 1);
	assert_int_equal(ibv_destroy_qp(env->b.qp), 0);
	env->b.qp = NULL;
	assert_int_equal(records_pending(env->ctx->async_fd, 16), 0);
}

/* An RC QP on cq (both queues) in ERR: each receive posted to it completes at once. */
static struct ibv_qp *flushing_qp(struct rc_env *env, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
	struct ibv_qp *qp = ibv_create_qp(env->pd, &ia);
	struct rc_qp_opts o;

	assert_non_null(qp);
	rc_default_opts(&o);
	assert_int_equal(rc_modify_init(qp, &o), 0);
	assert_int_equal(ibv_modify_qp(qp, &err, IBV_QP_STATE), 0);
	return qp;
}

/*
 * ibv_destroy_qp takes the QP's receive completions that no poll has taken out of its CQ,
 * as mlx5's cq_clean does, and leaves its send completions, as rxe does (docs/semantics.md),
 * and the other QP's, all in their order. Flushes put them there without timing; the ring
 * is first turned part way round, so what is kept wraps.
 */
static void test_destroy_qp_drops_its_unpolled_receive_completions(void **state)
{
	struct rc_env *env = *state;
	struct rc_buf *buf = rc_alloc(env, 64);
	struct ibv_mr *mr = rc_reg(env, env->pd, buf->p, 64, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge sge = rc_sge(buf->p, 64, mr);
	struct ibv_send_wr swr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_cq *cq = ibv_create_cq(env->ctx, 8, NULL, NULL, 0);
	const uint64_t kept[] = { 11, 21, 12, 22, 13 };
	struct ibv_qp *c, *d;
	struct ibv_wc wc[8];
	uint32_t c_num;
	int i;

	assert_non_null(cq);
	c = flushing_qp(env, cq);
	d = flushing_qp(env, cq);
	c_num = c->qp_num;
	for (i = 0; i < 5; i++)
		rc_post_recv(d, 100 + (uint64_t)i, &sge, 1);
	assert_int_equal(ibv_poll_cq(cq, 8, wc), 5);
	for (i = 0; i < 3; i++) {
		rc_post_recv(c, 1 + (uint64_t)i, &sge, 1);
		rc_post_recv(d, kept[2 * i], &sge, 1);
		if (i < 2) {
			swr.wr_id = kept[2 * i + 1];
			assert_int_equal(ibv_post_send(c, &swr, &bad), 0);
		}
	}
	assert_int_equal(ibv_destroy_qp(c), 0);
	assert_int_equal(ibv_poll_cq(cq, 8, wc), 5);
	for (i = 0; i < 5; i++) {
		assert_int_equal(wc[i].wr_id, kept[i]);
		assert_int_equal(wc[i].qp_num, i % 2 ? c_num : d->qp_num);
		assert_int_equal(wc[i].status, IBV_WC_WR_FLUSH_ERR);
	}
	assert_int_equal(ibv_destroy_qp(d), 0);
	assert_int_equal(ibv_destroy_cq(cq), 0);
}

/* The SRQ limit event on b's SRQ, taken and not acknowledged: the SRQ's destroy waits. */
static void test_destroy_srq_waits_for_async_event_ack(void **state)
{
	struct rc_env *env = *state;
	struct rc_buf *buf = rc_alloc(env, 4096);
	struct ibv_mr *mr = rc_reg(env, env->pd, buf->p, buf->cap, RC_ACCESS_ALL);
	struct ibv_sge ssge = rc_sge(buf->p, 64, mr), rsge = rc_sge(buf->p + 2048, 64, mr);
	struct ibv_recv_wr rwr = { .wr_id = 2, .sg_list = &rsge, .num_sge = 1 }, *rbad;
	struct ibv_send_wr swr = { .wr_id = 1, .opcode = IBV_WR_SEND, .sg_list = &ssge,
				   .num_sge = 1, .send_flags = IBV_SEND_SIGNALED }, *sbad;
	struct ibv_srq_attr lim = { .srq_limit = 2 };
	struct ibv_srq *srq = make_srq(env->pd);
	struct ibv_async_event ev;
	struct destroyer d;
	struct rc_qp_opts o;

	rc_default_opts(&o);
	rc_create_end(env, &o, &env->a);
	env->b.scq = make_cq(env, NULL);
	env->b.rcq = make_cq(env, NULL);
	assert_non_null(env->b.qp = make_qp(env->pd, env->b.scq, env->b.rcq, srq, IBV_QPT_RC));
	assert_int_equal(rc_modify_init(env->a.qp, &o), 0);
	assert_int_equal(rc_modify_init(env->b.qp, &o), 0);
	assert_int_equal(rc_modify_rtr(env->a.qp, &o, env->b.qp->qp_num, &env->gid), 0);
	assert_int_equal(rc_modify_rtr(env->b.qp, &o, env->a.qp->qp_num, &env->gid), 0);
	assert_int_equal(rc_modify_rts(env->a.qp, &o), 0);
	assert_int_equal(rc_modify_rts(env->b.qp, &o), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(ibv_post_srq_recv(srq, &rwr, &rbad), 0);
	assert_int_equal(ibv_modify_srq(srq, &lim, IBV_SRQ_LIMIT), 0);
	assert_int_equal(ibv_post_send(env->a.qp, &swr, &sbad), 0);
	rc_expect_wc(env->b.rcq, 2, IBV_WC_SUCCESS, NULL);
	assert_int_equal(rc_get_async(env, &ev, RC_WAIT_MS), 1);
	assert_int_equal(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED);
	assert_ptr_equal(ev.element.srq, srq);
	assert_int_equal(ibv_destroy_srq(srq), EBUSY);	/* b's QP first */
	assert_int_equal(ibv_destroy_qp(env->b.qp), 0);
	env->b.qp = NULL;
	destroy_in_thread(&d, destroy_srq, srq);
	expect_still_waiting(&d);
	ibv_ack_async_event(&ev);
	expect_done(&d);
}

/* Creates objects until one is refused: it must be the (max + 1)th, refused with ENOMEM. */
static void expect_limit(const char *what, int max, int existing, void *(*make)(void *),
			 void *arg, void (*unmake)(void *))
{
	void **made = calloc((size_t)max + 1, sizeof(*made));
	int n = 0;

	assert_non_null(made);
	while (n <= max && (made[n] = make(arg)))
		n++;
	if (n + existing != max || errno != ENOMEM)
		fail_msg("%s: %d created beside %d, then errno %d; max is %d", what, n, existing,
			 errno, max);
	while (n)
		unmake(made[--n]);
	free(made);
}

static void *make_pd_(void *ctx) { return ibv_alloc_pd(ctx); }
static void unmake_pd_(void *pd) { assert_int_equal(ibv_dealloc_pd(pd), 0); }
static void *make_cq_(void *ctx) { return ibv_create_cq(ctx, 1, NULL, NULL, 0); }
static void unmake_cq_(void *cq) { assert_int_equal(ibv_destroy_cq(cq), 0); }
static void *make_qp_(void *cq) { return make_qp(((struct ibv_cq *)cq)->cq_context, cq, cq,
						 NULL, IBV_QPT_UD); }
static void unmake_qp_(void *qp) { assert_int_equal(ibv_destroy_qp(qp), 0); }
static void *make_srq_(void *pd)
{
	struct ibv_srq_init_attr init = { .attr = { .max_wr = 1, .max_sge = 1 } };

	return ibv_create_srq(pd, &init);
}
static void unmake_srq_(void *srq) { assert_int_equal(ibv_destroy_srq(srq), 0); }
static struct rc_env *limit_env;
static void *make_ah_(void *pd) { return make_ah(limit_env, pd); }
static void unmake_ah_(void *ah) { assert_int_equal(ibv_destroy_ah(ah), 0); }
static uint8_t limit_buf[4096];
static void *make_mr_(void *pd) { return ibv_reg_mr(pd, limit_buf, sizeof(limit_buf), 0); }
static void unmake_mr_(void *mr) { assert_int_equal(ibv_dereg_mr(mr), 0); }
static void *make_mw_(void *pd) { return ibv_alloc_mw(pd, IBV_MW_TYPE_2); }
static void unmake_mw_(void *mw) { assert_int_equal(ibv_dealloc_mw(mw), 0); }

/* Every count query_device advertises holds at exactly that number (the fixture has 2 PDs). */
static void test_limits_hold_at_their_exact_value(void **state)
{
	struct rc_env *env = *state;
	struct ibv_device_attr a;
	struct ibv_cq *cq;

	limit_env = env;
	assert_int_equal(ibv_query_device(env->ctx, &a), 0);
	expect_limit("PDs", a.max_pd, 2, make_pd_, env->ctx, unmake_pd_);
	expect_limit("CQs", a.max_cq, 0, make_cq_, env->ctx, unmake_cq_);
	cq = ibv_create_cq(env->ctx, 1, env->pd, NULL, 0);	/* cq_context: the QPs' PD */
	assert_non_null(cq);
	expect_limit("QPs", a.max_qp, 0, make_qp_, cq, unmake_qp_);
	assert_int_equal(ibv_destroy_cq(cq), 0);
	expect_limit("SRQs", a.max_srq, 0, make_srq_, env->pd, unmake_srq_);
	expect_limit("AHs", a.max_ah, 0, make_ah_, env->pd, unmake_ah_);
	expect_limit("MRs", a.max_mr, 0, make_mr_, env->pd, unmake_mr_);
	expect_limit("MWs", a.max_mw, 0, make_mw_, env->pd, unmake_mw_);
}

/* The limits are the device's, as rxe's pools are: a second context does not get more. */
static void test_limits_are_per_device(void **state)
{
	struct rc_env *env = *state;
	struct ibv_context *ctx2 = ibv_open_device(env->ctx->device);
	struct ibv_device_attr a;
	struct ibv_pd **pds;
	int n = 0;

	assert_non_null(ctx2);
	assert_int_equal(ibv_query_device(env->ctx, &a), 0);
	pds = calloc((size_t)a.max_pd, sizeof(*pds));
	assert_non_null(pds);
	while (n < a.max_pd && (pds[n] = ibv_alloc_pd(env->ctx)))
		n++;
	assert_int_equal(n + 2, a.max_pd);
	errno = 0;
	assert_null(ibv_alloc_pd(ctx2));
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(ibv_dealloc_pd(pds[--n]), 0);
	assert_non_null(pds[n] = ibv_alloc_pd(ctx2));
	assert_int_equal(ibv_dealloc_pd(pds[n]), 0);
	while (n)
		assert_int_equal(ibv_dealloc_pd(pds[--n]), 0);
	free(pds);
	assert_int_equal(ibv_close_device(ctx2), 0);
}

/* Every verb on a garbled handle fails as uverbs' lookup does; restored, it works. */
static void test_garbled_handles_are_refused(void **state)
{
	struct rc_env *env = *state;
	struct ibv_cq *cq = make_cq(env, NULL), *cq2 = make_cq(env, NULL);
	struct ibv_qp *qp = make_qp(env->pd, cq, cq, NULL, IBV_QPT_RC);
	struct ibv_qp *qp2 = make_qp(env->pd, cq, cq, NULL, IBV_QPT_RC);
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	struct ibv_qp_init_attr init;
	uint32_t h = qp->handle;

	assert_non_null(qp);
	assert_non_null(qp2);
	qp->handle = FOREIGN_HANDLE;
	assert_int_equal(ibv_destroy_qp(qp), ENOENT);
	assert_int_equal(ibv_modify_qp(qp, &attr, IBV_QP_STATE), ENOENT);
	assert_int_equal(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init), ENOENT);
	qp->handle = env->pd->handle;		/* an object of another type */
	assert_int_equal(ibv_destroy_qp(qp), EINVAL);
	qp->handle = qp2->handle;		/* another QP: not destroyed instead */
	assert_int_equal(ibv_destroy_qp(qp), EINVAL);
	assert_int_equal(rc_state(qp2), IBV_QPS_RESET);
	qp->handle = h;
	assert_int_equal(rc_state(qp), IBV_QPS_RESET);

	h = cq->handle;
	cq->handle = FOREIGN_HANDLE;
	assert_int_equal(ibv_destroy_cq(cq), ENOENT);
	assert_int_equal(ibv_resize_cq(cq, 32), ENOENT);
	cq->handle = cq2->handle;
	assert_int_equal(ibv_destroy_cq(cq), EINVAL);
	cq->handle = h;

	assert_int_equal(ibv_destroy_qp(qp), 0);
	assert_int_equal(ibv_destroy_qp(qp2), 0);
	assert_int_equal(ibv_destroy_cq(cq), 0);
	assert_int_equal(ibv_destroy_cq(cq2), 0);
}

static void test_garbled_handles_of_pd_mr_mw_ah_srq(void **state)
{
	struct rc_env *env = *state;
	static uint8_t buf[4096];
	struct ibv_mr *mr = ibv_reg_mr(env->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mw *mw = ibv_alloc_mw(env->pd, IBV_MW_TYPE_1);
	struct ibv_ah *ah = make_ah(env, env->pd);
	struct ibv_srq *srq = make_srq(env->pd);
	struct ibv_srq_attr sattr = { .srq_limit = 1 };
	uint32_t h;

	assert_non_null(mr);
	assert_non_null(mw);
	assert_non_null(ah);
	h = env->pd2->handle;
	env->pd2->handle = FOREIGN_HANDLE;
	assert_int_equal(ibv_dealloc_pd(env->pd2), ENOENT);
	env->pd2->handle = mr->handle;
	assert_int_equal(ibv_dealloc_pd(env->pd2), EINVAL);
	env->pd2->handle = h;

	h = mr->handle;
	mr->handle = FOREIGN_HANDLE;
	assert_int_equal(ibv_dereg_mr(mr), ENOENT);
	errno = 0;
	assert_int_equal(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, 0),
			 IBV_REREG_MR_ERR_CMD);
	assert_int_equal(errno, ENOENT);
	mr->handle = h;
	h = mw->handle;
	mw->handle = FOREIGN_HANDLE;
	assert_int_equal(ibv_dealloc_mw(mw), ENOENT);
	mw->handle = h;
	h = ah->handle;
	ah->handle = mw->handle;
	assert_int_equal(ibv_destroy_ah(ah), EINVAL);
	ah->handle = h;
	h = srq->handle;
	srq->handle = FOREIGN_HANDLE;
	assert_int_equal(ibv_destroy_srq(srq), ENOENT);
	assert_int_equal(ibv_modify_srq(srq, &sattr, IBV_SRQ_LIMIT), ENOENT);
	assert_int_equal(ibv_query_srq(srq, &sattr), ENOENT);
	srq->handle = h;

	assert_int_equal(ibv_destroy_srq(srq), 0);
	assert_int_equal(ibv_destroy_ah(ah), 0);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
	assert_int_equal(ibv_dereg_mr(mr), 0);
}

/*
 * An object handed to another context's verbs (its context pointer garbled to another
 * open context, or a parent from another context): that context's table does not have it.
 */
static void test_objects_of_another_context_are_refused(void **state)
{
	struct rc_env *env = *state;
	struct ibv_context *ctx2 = ibv_open_device(env->ctx->device);
	struct ibv_cq *cq = make_cq(env, NULL), *cq2;
	struct ibv_qp *qp = make_qp(env->pd, cq, cq, NULL, IBV_QPT_RC);
	/* With SEND_OPS_FLAGS libibverbs calls the context's create_qp_ex, not the PD's. */
	struct ibv_qp_init_attr_ex ex = {
		.qp_type = IBV_QPT_RC, .pd = env->pd,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = IBV_QP_EX_WITH_SEND,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	assert_non_null(ctx2);
	assert_non_null(qp);
	assert_non_null(cq2 = ibv_create_cq(ctx2, 16, NULL, NULL, 0));
	qp->context = ctx2;
	assert_int_not_equal(ibv_destroy_qp(qp), 0);
	qp->context = env->ctx;
	/* ctx2's CQ for a QP of ctx: not found in ctx. */
	ex.send_cq = ex.recv_cq = cq2;
	errno = 0;
	assert_null(ibv_create_qp_ex(env->ctx, &ex));
	assert_true(errno == ENOENT || errno == EINVAL);
	/* ctx's PD and CQ for a QP of ctx2. */
	ex.send_cq = ex.recv_cq = cq;
	errno = 0;
	assert_null(ibv_create_qp_ex(ctx2, &ex));
	assert_true(errno == ENOENT || errno == EINVAL);
	assert_int_equal(ibv_destroy_qp(qp), 0);
	assert_int_equal(ibv_destroy_cq(cq), 0);
	assert_int_equal(ibv_destroy_cq(cq2), 0);
	assert_int_equal(ibv_close_device(ctx2), 0);
}

/* Lowers the soft fd limit and takes every fd left: *fillers of them, to give back. */
static int *exhaust_fds(int *nfill, struct rlimit *saved)
{
	struct rlimit low;
	int *fillers = calloc(256, sizeof(*fillers)), fd;

	assert_non_null(fillers);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, saved), 0);
	fd = dup(0);
	assert_true(fd >= 0);
	close(fd);
	low = *saved;
	low.rlim_cur = (rlim_t)fd + 128;	/* above every fd in use now */
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	*nfill = 0;
	while (*nfill < 256 && (fd = dup(0)) >= 0)
		fillers[(*nfill)++] = fd;
	assert_int_equal(errno, EMFILE);
	return fillers;
}

static void give_back_fds(int *fillers, int nfill, const struct rlimit *saved)
{
	while (nfill)
		close(fillers[--nfill]);
	free(fillers);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, saved), 0);
}

/*
 * Out of fds: what the kernel does without an fd (INIT -> RTR, an AH) still succeeds, and
 * what needs one (a QP that opens a new listener) is EMFILE, never EINVAL.
 */
static void test_fd_exhaustion_is_a_resource_error(void **state)
{
	struct rc_env *env = *state;
	struct rc_qp_opts o;
	struct ibv_qp *qps[300];
	struct ibv_cq *cq = make_cq(env, NULL);
	struct rlimit saved;
	struct ibv_ah *ah;
	int nfill, nqp = 0, *fillers, err;

	rc_default_opts(&o);
	rc_create_end(env, &o, &env->a);
	assert_int_equal(rc_modify_init(env->a.qp, &o), 0);
	fillers = exhaust_fds(&nfill, &saved);
	err = rc_modify_rtr(env->a.qp, &o, env->a.qp->qp_num, &env->gid);
	ah = make_ah(env, env->pd);
	/* A listener holds 256 QPs: one of these needs a new one, hence two sockets. */
	errno = 0;
	while (nqp < 300 && (qps[nqp] = make_qp(env->pd, cq, cq, NULL, IBV_QPT_UD)))
		nqp++;
	give_back_fds(fillers, nfill, &saved);
	assert_int_equal(err, 0);
	assert_non_null(ah);
	assert_true(nqp < 300);
	if (errno != EMFILE && errno != ENFILE && errno != ENOMEM)
		fail_msg("create_qp out of fds: errno %d", errno);
	while (nqp)
		assert_int_equal(ibv_destroy_qp(qps[--nqp]), 0);
	assert_int_equal(ibv_destroy_ah(ah), 0);
	assert_int_equal(ibv_destroy_cq(cq), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		RC_TEST(dealloc_pd_busy_with_each_dependent),
		RC_TEST(destroy_cq_busy_while_a_qp_uses_it),
		RC_TEST(destroy_srq_busy_while_a_qp_uses_it),
		RC_TEST(destroy_channel_busy_while_a_cq_uses_it),
		RC_TEST(refused_destroys_leave_everything_working),
		RC_TEST(close_device_with_objects_left),
		RC_TEST(destroy_cq_waits_for_event_ack),
		RC_TEST(destroy_cq_drops_unread_events),
		RC_TEST(destroy_cq_drops_unread_events_nonblocking),
		RC_TEST(destroy_qp_waits_for_async_event_ack),
		RC_TEST(destroy_qp_drops_unread_async_events),
		RC_TEST(destroy_qp_drops_its_unpolled_receive_completions),
		RC_TEST(destroy_srq_waits_for_async_event_ack),
		RC_TEST(limits_hold_at_their_exact_value),
		RC_TEST(limits_are_per_device),
		RC_TEST(garbled_handles_are_refused),
		RC_TEST(garbled_handles_of_pd_mr_mw_ah_srq),
		RC_TEST(objects_of_another_context_are_refused),
		RC_TEST(fd_exhaustion_is_a_resource_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
