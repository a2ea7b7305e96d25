// SPDX-License-Identifier: MIT
/*
 * Object lifecycle: destroys refused while other objects depend on one (the kernel's usecnt),
 * destroys that wait for the acknowledgement of the events the application took and drop
 * the ones it did not, and verbs on an object whose handle or context was garbled.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"

#define GARBLE	0x00ff0000u	/* makes a small handle name nothing */

static struct ibv_cq *cq_make(struct conf_env *e, struct ibv_comp_channel *ch)
{
	struct ibv_cq *cq = ibv_create_cq(e->ctx, 16, NULL, ch, 0);

	if (!cq)
		setup_failed("create_cq", errno);
	return cq;
}

static struct ibv_qp *qp_make(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
			      struct ibv_srq *srq)
{
	struct ibv_qp_init_attr init = {
		.send_cq = scq, .recv_cq = rcq, .srq = srq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);

	if (!qp)
		setup_failed("create_qp", errno);
	return qp;
}

static struct ibv_srq *srq_make(struct ibv_pd *pd)
{
	struct ibv_srq_init_attr init = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &init);

	if (!srq)
		setup_failed("create_srq", errno);
	return srq;
}

static struct ibv_ah *ah_make(struct conf_env *e, struct ibv_pd *pd)
{
	struct ibv_ah_attr attr = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = e->gid, .hop_limit = 1, .sgid_index = (uint8_t)conf_opts.gid_index },
	};
	struct ibv_ah *ah = ibv_create_ah(pd, &attr);

	if (!ah)
		setup_failed("create_ah", errno);
	return ah;
}

enum dep_kind { D_PD_QP, D_PD_MR, D_PD_MW, D_PD_AH, D_PD_SRQ, D_CQ_SEND, D_CQ_RECV,
		D_CHANNEL };

/* The destroy the case is about: of the CQ, the channel or the PD the dependent was made in. */
static int destroy_parent(struct conf_env *e, enum dep_kind k, struct ibv_cq *scq,
			  struct ibv_cq *rcq, struct ibv_comp_channel *ch)
{
	switch (k) {
	case D_CQ_SEND:
		return ibv_destroy_cq(scq);
	case D_CQ_RECV:
		return ibv_destroy_cq(rcq);
	case D_CHANNEL:
		return ibv_destroy_comp_channel(ch);
	default:
		return ibv_dealloc_pd(e->pd2);
	}
}

/* destroy= what the destroy gave with the dependent there, after= once it was gone. */
static void dependent_case(const struct conf_case *c)
{
	static uint8_t buf[4096];
	struct conf_env e;
	struct ibv_comp_channel *ch = NULL;
	struct ibv_cq *scq = NULL, *rcq = NULL;
	struct ibv_qp *qp = NULL;
	struct ibv_mr *mr = NULL;
	struct ibv_mw *mw = NULL;
	struct ibv_ah *ah = NULL;
	struct ibv_srq *srq = NULL;

	env_open(&e);
	switch ((enum dep_kind)c->a) {
	case D_PD_QP:
		scq = cq_make(&e, NULL);
		qp = qp_make(e.pd2, scq, scq, NULL);
		break;
	case D_PD_MR:
		mr = mr_reg(e.pd2, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
		break;
	case D_PD_MW:
		if (!(mw = ibv_alloc_mw(e.pd2, IBV_MW_TYPE_1)))
			setup_failed("alloc_mw", errno);
		break;
	case D_PD_AH:
		ah = ah_make(&e, e.pd2);
		break;
	case D_PD_SRQ:
		srq = srq_make(e.pd2);
		break;
	case D_CQ_SEND:
	case D_CQ_RECV:
		scq = cq_make(&e, NULL);
		rcq = cq_make(&e, NULL);
		qp = qp_make(e.pd, scq, rcq, NULL);
		break;
	case D_CHANNEL:
		if (!(ch = ibv_create_comp_channel(e.ctx)))
			setup_failed("create_comp_channel", errno);
		scq = cq_make(&e, ch);
		break;
	}
	out_ret("destroy", destroy_parent(&e, (enum dep_kind)c->a, scq, rcq, ch));
	if ((qp && ibv_destroy_qp(qp)) || (mr && ibv_dereg_mr(mr)) ||
	    (mw && ibv_dealloc_mw(mw)) || (ah && ibv_destroy_ah(ah)) ||
	    (srq && ibv_destroy_srq(srq)))
		setup_failed("destroy_dependent", errno);
	/* The channel's dependent is scq, which the destroy above left (it is no QP's). */
	if ((enum dep_kind)c->a == D_CHANNEL && ibv_destroy_cq(scq))
		setup_failed("destroy_cq", errno);
	out_ret("after", destroy_parent(&e, (enum dep_kind)c->a, scq, rcq, ch));
	out_end();
}

/* An MR with a window bound to it (ibv_reg_mr(3): "ibv_dereg_mr() fails if any memory
 * window is still bound to this MR"). */
static void dereg_bound_case(const struct conf_case *c)
{
	struct ibv_mw_bind bind = { .wr_id = 3, .send_flags = IBV_SEND_SIGNALED };
	struct qp_params pb;
	struct rc_fix f;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	int err;

	(void)c;
	qp_params_default(&pb, IBV_QPT_RC);
	pb.access |= IBV_ACCESS_MW_BIND;
	fix_setup(&f, NULL, &pb, ACCESS_ALL | IBV_ACCESS_MW_BIND, false);
	if (!(mw = ibv_alloc_mw(f.e.pd, IBV_MW_TYPE_1)))
		setup_failed("alloc_mw", errno);
	bind.bind_info = (struct ibv_mw_bind_info){ .mr = f.rmr, .addr = (uintptr_t)f.rbuf,
						    .length = 64,
						    .mw_access_flags = IBV_ACCESS_REMOTE_WRITE };
	err = ibv_bind_mw(f.e.b.qp, mw, &bind);
	if (err || wait_wc(f.e.b.scq, &wc, conf_opts.wait_ms) != 1 || wc.status != IBV_WC_SUCCESS)
		setup_failed("bind_mw", err);
	out_ret("dereg", ibv_dereg_mr(f.rmr));
	out_end();
}

/*
 * A receive that completed and that no poll took when its QP is destroyed: the hardware
 * providers take it out of the CQ (mlx5's cq_clean), rxe leaves it there.
 */
static void destroy_qp_unpolled_case(const struct conf_case *c)
{
	struct rc_fix f;
	struct ibv_wc wc;
	int err, left = 0;

	(void)c;
	fix_setup(&f, NULL, NULL, ACCESS_ALL, false);
	err = post_recv(f.e.b.qp, f.recvbuf, 64, f.recvmr->lkey);
	if (!err)
		err = post_send(f.e.a.qp, IBV_WR_SEND, f.lbuf, 64, f.lmr->lkey, 0, 0, 0, 0);
	if (err || wait_wc(f.e.a.scq, &wc, conf_opts.wait_ms) != 1 || wc.status != IBV_WC_SUCCESS)
		setup_failed("send", err);
	sleep_ms(conf_opts.quiet_ms);	/* the receive's completion, if it comes after the ACK */
	out_ret("destroy", ibv_destroy_qp(f.e.b.qp));
	while (wait_wc(f.e.b.rcq, &wc, 0) == 1)
		left++;
	out("completions_left=%d", left);
	out_end();
}

struct destroyer {
	pthread_t thread;
	int (*destroy)(void *obj);
	void *obj;
	atomic_int result;	/* -1 while it runs */
};

static void *destroyer_main(void *arg)
{
	struct destroyer *d = arg;

	atomic_store(&d->result, d->destroy(d->obj));
	return NULL;
}

static int destroy_cq(void *cq) { return ibv_destroy_cq(cq); }
static int destroy_srq(void *srq) { return ibv_destroy_srq(srq); }

/*
 * Destroys obj in a thread while an event of it is held unacknowledged; reports whether the
 * destroy waited (before_ack=waits) and, after ack(), what it returned.
 */
static void destroy_holding_event(int (*destroy)(void *), void *obj, void (*ack)(void *),
				  void *ack_arg)
{
	struct destroyer d = { .destroy = destroy, .obj = obj };
	int waited = 0;

	atomic_init(&d.result, -1);
	if (pthread_create(&d.thread, NULL, destroyer_main, &d))
		setup_failed("pthread_create", errno);
	sleep_ms(conf_opts.quiet_ms);
	out("before_ack=%s", atomic_load(&d.result) == -1 ? "waits" : "returned");
	ack(ack_arg);
	while (atomic_load(&d.result) == -1 && waited < conf_opts.wait_ms) {
		sleep_ms(10);
		waited += 10;
	}
	if (atomic_load(&d.result) == -1) {
		out("destroy=hung");
		out_end();
	}
	pthread_join(d.thread, NULL);
	out_ret("destroy", atomic_load(&d.result));
}

static void ack_cq_event(void *cq) { ibv_ack_cq_events(cq, 1); }
static void ack_async_event(void *ev) { ibv_ack_async_event(ev); }

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1;
}

/* What a non-blocking fd still holds: how many events of cq, and of anything else. */
static void count_cq_events(struct ibv_comp_channel *ch, struct ibv_cq *cq, int *mine,
			    int *others)
{
	struct ibv_cq *got;
	void *ctx;

	*mine = *others = 0;
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	while (!ibv_get_cq_event(ch, &got, &ctx)) {
		if (got == cq)
			(*mine)++;
		else
			(*others)++;
		ibv_ack_cq_events(got, 1);
	}
}

static int count_async_events(struct ibv_context *ctx, void *element)
{
	struct ibv_async_event ev;
	int n = 0;

	fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);
	while (!ibv_get_async_event(ctx, &ev)) {
		if (ev.element.cq == element || ev.element.srq == element)
			n++;
		ibv_ack_async_event(&ev);
	}
	return n;
}

/*
 * Completion events: a's and b's CQs report to one channel; a SEND gives an event on a's
 * send CQ and one on b's receive CQ. a's QP goes, then a's send CQ with its event taken and
 * not acknowledged (the destroy waits), or not taken at all (dropped: b's stays).
 */
static void comp_event_case(const struct conf_case *c)
{
	bool taken = c->a;
	struct ibv_comp_channel *ch;
	struct qp_params p;
	struct rc_fix f;
	struct ibv_cq *got = NULL;
	void *cq_ctx;
	int mine, others;

	env_open(&f.e);
	if (!(ch = ibv_create_comp_channel(f.e.ctx)))
		setup_failed("create_comp_channel", errno);
	qp_params_default(&p, IBV_QPT_RC);
	p.channel = ch;
	env_pair(&f.e, &p, &p);
	f.lbuf = buf_alloc(BUF_SIZE);
	f.lmr = mr_reg(f.e.pd, f.lbuf, BUF_SIZE, ACCESS_ALL);
	if (ibv_req_notify_cq(f.e.a.scq, 0) || ibv_req_notify_cq(f.e.b.rcq, 0) ||
	    post_recv(f.e.b.qp, f.lbuf + 2048, 64, f.lmr->lkey) ||
	    post_send(f.e.a.qp, IBV_WR_SEND, f.lbuf, 64, f.lmr->lkey, 0, 0, 0, 0))
		setup_failed("send", 1);
	if (!readable(ch->fd, conf_opts.wait_ms))
		setup_failed("no_event", 0);
	sleep_ms(conf_opts.quiet_ms);	/* the second event too */
	/* b's receive usually completes before a's send: its event is acknowledged. */
	for (int i = 0; taken && i < 2 && got != f.e.a.scq; i++) {
		if (ibv_get_cq_event(ch, &got, &cq_ctx))
			setup_failed("get_cq_event", errno);
		if (got != f.e.a.scq)
			ibv_ack_cq_events(got, 1);
	}
	if (taken && got != f.e.a.scq)
		setup_failed("no_event_of_a", 0);
	if (ibv_destroy_qp(f.e.a.qp))
		setup_failed("destroy_qp", errno);
	if (taken) {
		destroy_holding_event(destroy_cq, f.e.a.scq, ack_cq_event, got);
	} else {
		out_ret("destroy", ibv_destroy_cq(f.e.a.scq));
		count_cq_events(ch, f.e.a.scq, &mine, &others);
		out("destroyed_cq_events=%d other_events=%d", mine, others);
	}
	out_end();
}

/* An async event of an object, held unacknowledged (the destroy waits) or never read. */
static void async_event_case(const struct conf_case *c, struct rc_fix *f, void *element,
			     int (*destroy)(void *))
{
	struct ibv_async_event ev;

	if (!readable(f->e.ctx->async_fd, conf_opts.wait_ms))
		setup_failed("no_async_event", 0);
	if (c->b) {
		if (ibv_get_async_event(f->e.ctx, &ev) || ev.element.cq != element)
			setup_failed("get_async_event", errno);
		out("async=%s", ev.event_type == IBV_EVENT_CQ_ERR ? "CQ_ERR" :
				ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED ? "SRQ_LIMIT_REACHED" :
				"other");
		destroy_holding_event(destroy, element, ack_async_event, &ev);
	} else {
		out_ret("destroy", destroy(element));
		out("events_left=%d", count_async_events(f->e.ctx, element));
	}
	out_end();
}

/* A CQ overrun: IBV_EVENT_CQ_ERR on a's send CQ (one entry, three WRITEs). */
static void cq_async_case(const struct conf_case *c)
{
	struct qp_params pa;
	struct rc_fix f;

	qp_params_default(&pa, IBV_QPT_RC);
	pa.cqe = 1;
	fix_setup(&f, &pa, NULL, ACCESS_ALL, false);
	for (int i = 0; i < f.e.a.scq->cqe + 2; i++)
		if (post_send(f.e.a.qp, IBV_WR_RDMA_WRITE, f.lbuf, 8, f.lmr->lkey,
			      (uintptr_t)f.rbuf, f.rmr->rkey, 0, 0))
			setup_failed("post_send", errno);
	sleep_ms(conf_opts.quiet_ms);
	if (ibv_destroy_qp(f.e.a.qp))
		setup_failed("destroy_qp", errno);
	async_event_case(c, &f, f.e.a.scq, destroy_cq);
}

/* The SRQ limit event (IBV_EVENT_SRQ_LIMIT_REACHED) on b's SRQ. */
static void srq_async_case(const struct conf_case *c)
{
	struct ibv_srq_attr lim = { .srq_limit = 2 };
	struct ibv_recv_wr wr = { .wr_id = 2 }, *bad;
	struct qp_params pb;
	struct ibv_srq *srq;
	struct rc_fix f;

	env_open(&f.e);
	srq = srq_make(f.e.pd);
	qp_params_default(&pb, IBV_QPT_RC);
	pb.srq = srq;
	env_pair(&f.e, NULL, &pb);
	for (int i = 0; i < 2; i++)
		if (ibv_post_srq_recv(srq, &wr, &bad))
			setup_failed("post_srq_recv", errno);
	if (ibv_modify_srq(srq, &lim, IBV_SRQ_LIMIT) ||
	    post_send(f.e.a.qp, IBV_WR_SEND, NULL, 0, 0, 0, 0, 0, 0))
		setup_failed("send", errno);
	sleep_ms(conf_opts.quiet_ms);
	if (ibv_destroy_qp(f.e.b.qp))
		setup_failed("destroy_qp", errno);
	async_event_case(c, &f, srq, destroy_srq);
}

enum garble_kind { G_DESTROY_QP, G_MODIFY_QP, G_QUERY_QP, G_DESTROY_CQ, G_RESIZE_CQ,
		   G_DEALLOC_PD, G_DEREG_MR, G_DEALLOC_MW, G_DESTROY_AH, G_DESTROY_SRQ,
		   G_MODIFY_SRQ, G_QUERY_SRQ, G_QP_HANDLE_OF_PD, G_QP_HANDLE_OF_OTHER_QP,
		   G_QP_OTHER_CONTEXT };

struct garble_objs {
	struct conf_env e;
	struct ibv_cq *cq;		/* the QPs' */
	struct ibv_cq *free_cq;		/* no QP's: it can be destroyed */
	struct ibv_qp *qp, *qp2;
	struct ibv_mr *mr;
	struct ibv_mw *mw;
	struct ibv_ah *ah;
	struct ibv_srq *srq;
};

/* The verb the case garbles, on the objects as they are. */
static int garbled_verb(enum garble_kind k, struct garble_objs *o)
{
	struct ibv_qp_attr qattr = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				     .qp_access_flags = ACCESS_ALL };
	struct ibv_srq_attr sattr = { .srq_limit = 1 };
	struct ibv_qp_init_attr init;

	switch (k) {
	case G_MODIFY_QP:
		return ibv_modify_qp(o->qp, &qattr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	case G_QUERY_QP:
		return ibv_query_qp(o->qp, &qattr, IBV_QP_STATE, &init);
	case G_DESTROY_CQ:
		return ibv_destroy_cq(o->free_cq);
	case G_RESIZE_CQ:
		return ibv_resize_cq(o->free_cq, 64);
	case G_DEALLOC_PD:
		return ibv_dealloc_pd(o->e.pd2);
	case G_DEREG_MR:
		return ibv_dereg_mr(o->mr);
	case G_DEALLOC_MW:
		return ibv_dealloc_mw(o->mw);
	case G_DESTROY_AH:
		return ibv_destroy_ah(o->ah);
	case G_DESTROY_SRQ:
		return ibv_destroy_srq(o->srq);
	case G_MODIFY_SRQ:
		return ibv_modify_srq(o->srq, &sattr, IBV_SRQ_LIMIT);
	case G_QUERY_SRQ:
		return ibv_query_srq(o->srq, &sattr);
	default:
		return ibv_destroy_qp(o->qp);
	}
}

static uint32_t *handle_of(enum garble_kind k, struct garble_objs *o)
{
	switch (k) {
	case G_DESTROY_CQ: case G_RESIZE_CQ: return &o->free_cq->handle;
	case G_DEALLOC_PD: return &o->e.pd2->handle;
	case G_DEREG_MR: return &o->mr->handle;
	case G_DEALLOC_MW: return &o->mw->handle;
	case G_DESTROY_AH: return &o->ah->handle;
	case G_DESTROY_SRQ: case G_MODIFY_SRQ: case G_QUERY_SRQ: return &o->srq->handle;
	default: return &o->qp->handle;
	}
}

/*
 * garbled= the verb on the object with its handle (or context) garbled; restored= the same
 * verb once it is put back. For another QP's handle the kernel acts on that other QP, so
 * the case reports what became of it and stops there.
 */
static void garbled_case(const struct conf_case *c)
{
	enum garble_kind k = (enum garble_kind)c->a;
	struct garble_objs o = { 0 };
	struct ibv_qp_attr qattr;
	struct ibv_qp_init_attr init;
	struct ibv_context *ctx2 = NULL;
	uint32_t *h, saved;

	env_open(&o.e);
	o.cq = cq_make(&o.e, NULL);
	o.free_cq = cq_make(&o.e, NULL);
	o.qp = qp_make(o.e.pd, o.cq, o.cq, NULL);
	o.qp2 = qp_make(o.e.pd, o.cq, o.cq, NULL);
	o.mr = mr_reg(o.e.pd, buf_alloc(BUF_SIZE), BUF_SIZE, IBV_ACCESS_LOCAL_WRITE);
	if (!(o.mw = ibv_alloc_mw(o.e.pd, IBV_MW_TYPE_1)))
		setup_failed("alloc_mw", errno);
	o.ah = ah_make(&o.e, o.e.pd);
	o.srq = srq_make(o.e.pd);
	h = handle_of(k, &o);
	saved = *h;
	if (k == G_QP_OTHER_CONTEXT) {
		if (!(ctx2 = ibv_open_device(o.e.ctx->device)))
			setup_failed("open_device", errno);
		o.qp->context = ctx2;
	} else if (k == G_QP_HANDLE_OF_PD) {
		*h = o.e.pd->handle;
	} else if (k == G_QP_HANDLE_OF_OTHER_QP) {
		*h = o.qp2->handle;
	} else {
		*h = saved ^ GARBLE;
	}
	out_ret("garbled", garbled_verb(k, &o));
	if (k == G_QP_HANDLE_OF_OTHER_QP) {
		out_ret("other_qp_query", ibv_query_qp(o.qp2, &qattr, IBV_QP_STATE, &init));
		out_end();
	}
	if (ctx2)
		o.qp->context = o.e.ctx;
	*h = saved;
	out_ret("restored", garbled_verb(k, &o));
	out_end();
}

const struct conf_case conf_cases_lifecycle[] = {
	{ "lc_dealloc_pd_with_qp", dependent_case, D_PD_QP, 0 },
	{ "lc_dealloc_pd_with_mr", dependent_case, D_PD_MR, 0 },
	{ "lc_dealloc_pd_with_mw", dependent_case, D_PD_MW, 0 },
	{ "lc_dealloc_pd_with_ah", dependent_case, D_PD_AH, 0 },
	{ "lc_dealloc_pd_with_srq", dependent_case, D_PD_SRQ, 0 },
	{ "lc_destroy_cq_send_of_qp", dependent_case, D_CQ_SEND, 0 },
	{ "lc_destroy_cq_recv_of_qp", dependent_case, D_CQ_RECV, 0 },
	{ "lc_destroy_channel_with_cq", dependent_case, D_CHANNEL, 0 },
	{ "lc_dereg_mr_with_bound_mw", dereg_bound_case, 0, 0 },
	{ "lc_destroy_qp_unpolled_recv", destroy_qp_unpolled_case, 0, 0 },
	{ "lc_destroy_cq_event_unacked", comp_event_case, 1, 0 },
	{ "lc_destroy_cq_event_unread", comp_event_case, 0, 0 },
	{ "lc_destroy_cq_async_unacked", cq_async_case, 0, 1 },
	{ "lc_destroy_cq_async_unread", cq_async_case, 0, 0 },
	{ "lc_destroy_srq_async_unacked", srq_async_case, 0, 1 },
	{ "lc_destroy_srq_async_unread", srq_async_case, 0, 0 },
	{ "lc_garbled_destroy_qp", garbled_case, G_DESTROY_QP, 0 },
	{ "lc_garbled_modify_qp", garbled_case, G_MODIFY_QP, 0 },
	{ "lc_garbled_query_qp", garbled_case, G_QUERY_QP, 0 },
	{ "lc_garbled_destroy_cq", garbled_case, G_DESTROY_CQ, 0 },
	{ "lc_garbled_resize_cq", garbled_case, G_RESIZE_CQ, 0 },
	{ "lc_garbled_dealloc_pd", garbled_case, G_DEALLOC_PD, 0 },
	{ "lc_garbled_dereg_mr", garbled_case, G_DEREG_MR, 0 },
	{ "lc_garbled_dealloc_mw", garbled_case, G_DEALLOC_MW, 0 },
	{ "lc_garbled_destroy_ah", garbled_case, G_DESTROY_AH, 0 },
	{ "lc_garbled_destroy_srq", garbled_case, G_DESTROY_SRQ, 0 },
	{ "lc_garbled_modify_srq", garbled_case, G_MODIFY_SRQ, 0 },
	{ "lc_garbled_query_srq", garbled_case, G_QUERY_SRQ, 0 },
	{ "lc_destroy_qp_handle_of_pd", garbled_case, G_QP_HANDLE_OF_PD, 0 },
	{ "lc_destroy_qp_handle_of_other_qp", garbled_case, G_QP_HANDLE_OF_OTHER_QP, 0 },
	{ "lc_destroy_qp_other_context", garbled_case, G_QP_OTHER_CONTEXT, 0 },
	{ NULL, NULL, 0, 0 },
};
