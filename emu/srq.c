// SPDX-License-Identifier: MIT
/*
 * Receive queues: the ring a QP owns, and the shared ones (SRQs) that any number of QPs take
 * their receives from. Only the engine thread takes WQEs (responder.c, ud.c); posting threads
 * add them. A taken WQE is copied out whole, SGEs included, so a receive posted into the freed
 * slot while the message is still being placed cannot change where it goes.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "emu/internal.h"
#include "emu/limits.h"
#include "emu/srq.h"

static_assert(EMU_MAX_SRQ_SGE <= EMU_MAX_SGE, "a taken WQE's copy holds EMU_MAX_SGE SGEs");

struct emu_srq {
	struct emu_engine *engine;
	pthread_mutex_t lock;		/* the queue, the limit, the users, dead */
	struct recv_queue rq;
	uint32_t limit;			/* armed while nonzero */
	uint32_t pd_handle;
	uint64_t handle;
	int async_fd;
	_Atomic uint32_t *events_raised;
	int users;			/* QPs taking their receives from it */
	/* Constants of an XRC SRQ (xrcd 0: a basic one), and its number in the engine's table
	 * (emu/xrc.c), which a target QP looks it up by. */
	uint32_t xrcd;
	struct emu_cq *cq;
	uint32_t srqn;
	/* The table's reference and each target QP's that holds one while it delivers a
	 * message (qp->resp.xrc_srq): the memory goes with the last. */
	atomic_int refs;
	bool dead;			/* destroyed: nothing is taken, nothing completes to cq */
};

/* Slot i's SGEs are sges[i * max_sge ...]; max_sge 0 still gets one so a slot is addressable. */
static int alloc_slots(struct recv_queue *q, uint32_t depth)
{
	uint32_t per_slot = q->max_sge ? q->max_sge : 1;

	q->slots = calloc(depth ? depth : 1, sizeof(*q->slots));
	q->sges = calloc((size_t)(depth ? depth : 1) * per_slot, sizeof(*q->sges));
	if (!q->slots || !q->sges) {
		free(q->slots);
		free(q->sges);
		return ENOMEM;
	}
	for (uint32_t i = 0; i < depth; i++)
		q->slots[i].sge = q->sges + (size_t)i * per_slot;
	q->depth = depth;
	return 0;
}

int recv_queue_init(struct recv_queue *q, uint32_t depth, uint32_t max_sge)
{
	memset(q, 0, sizeof(*q));
	q->max_sge = max_sge;
	return alloc_slots(q, depth);
}

void recv_queue_free(struct recv_queue *q)
{
	free(q->slots);
	free(q->sges);
	q->slots = NULL;
	q->sges = NULL;
}

uint32_t recv_queue_count(const struct recv_queue *q)
{
	return q->head - q->tail;
}

void recv_queue_clear(struct recv_queue *q)
{
	q->head = q->tail = 0;
}

int recv_queue_post(struct recv_queue *q, const struct ibv_recv_wr *wr)
{
	struct recv_wqe *r;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->max_sge)
		return EINVAL;
	if (recv_queue_count(q) >= q->depth)
		return ENOMEM;
	r = &q->slots[q->head % q->depth];
	r->wr_id = wr->wr_id;
	r->num_sge = wr->num_sge;
	/* A receive without SGEs may leave sg_list NULL, which memcpy must not be given. */
	if (wr->num_sge)
		memcpy(r->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(*r->sge));
	q->head++;
	return 0;
}

enum recv_take recv_queue_take(struct recv_queue *q, uint64_t need, struct recv_wqe *into)
{
	const struct recv_wqe *r;

	if (q->tail == q->head)
		return RECV_NONE;
	r = &q->slots[q->tail % q->depth];
	if (need && sge_total_length(r->sge, r->num_sge) < need)
		return RECV_TOO_SHORT;
	into->wr_id = r->wr_id;
	into->num_sge = r->num_sge;
	if (r->num_sge)
		memcpy(into->sge, r->sge, (size_t)r->num_sge * sizeof(*into->sge));
	q->tail++;
	return RECV_TAKEN;
}

/* The WQEs keep their order and slot contents; fails if more are posted than depth holds. */
static int recv_queue_resize(struct recv_queue *q, uint32_t depth)
{
	struct recv_queue grown = { .max_sge = q->max_sge };
	uint32_t count = recv_queue_count(q);
	struct ibv_sge sge[EMU_MAX_SGE];
	struct recv_wqe r = { .sge = sge };

	if (depth < count)
		return EINVAL;
	if (alloc_slots(&grown, depth))
		return ENOMEM;
	while (recv_queue_take(q, 0, &r) == RECV_TAKEN) {
		struct ibv_recv_wr wr = { .wr_id = r.wr_id, .sg_list = sge, .num_sge = r.num_sge };

		recv_queue_post(&grown, &wr);
	}
	recv_queue_free(q);
	*q = grown;
	return 0;
}

static int check_init_attr(struct ibv_srq_attr *attr)
{
	if (!attr->max_wr || attr->max_wr > EMU_MAX_SRQ_WR || attr->max_sge > EMU_MAX_SRQ_SGE)
		return EINVAL;
	/* As rxe: a receive with one SGE can always be posted. */
	if (!attr->max_sge)
		attr->max_sge = 1;
	/* The man page: srq_limit is irrelevant at creation; only ibv_modify_srq arms it. */
	attr->srq_limit = 0;
	return 0;
}

int emu_srq_create(struct emu_engine *e, struct emu_srq_init *init, struct emu_srq **out)
{
	struct emu_srq *srq;
	int ret = check_init_attr(&init->attr);

	if (ret)
		return ret;
	if (atomic_fetch_add(&e->srqs, 1) >= EMU_MAX_SRQ) {
		atomic_fetch_sub(&e->srqs, 1);
		return ENOMEM;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq || recv_queue_init(&srq->rq, init->attr.max_wr, init->attr.max_sge)) {
		free(srq);
		atomic_fetch_sub(&e->srqs, 1);
		return ENOMEM;
	}
	pthread_mutex_init(&srq->lock, NULL);
	srq->engine = e;
	srq->pd_handle = init->pd_handle;
	srq->handle = init->handle;
	srq->async_fd = init->async_fd;
	srq->events_raised = init->events_raised;
	srq->xrcd = init->xrcd;
	srq->cq = init->cq;
	atomic_init(&srq->refs, 1);
	ret = xrc_srq_number(e, srq);
	if (ret) {
		srq_put(srq);
		return ret;
	}
	*out = srq;
	return 0;
}

void srq_put(struct emu_srq *srq)
{
	if (atomic_fetch_sub(&srq->refs, 1) != 1)
		return;
	atomic_fetch_sub(&srq->engine->srqs, 1);
	recv_queue_free(&srq->rq);
	pthread_mutex_destroy(&srq->lock);
	free(srq);
}

void srq_get(struct emu_srq *srq)
{
	atomic_fetch_add(&srq->refs, 1);
}

int emu_srq_destroy(struct emu_srq *srq)
{
	pthread_mutex_lock(&srq->lock);
	if (srq->users) {
		pthread_mutex_unlock(&srq->lock);
		return EBUSY;
	}
	pthread_mutex_unlock(&srq->lock);
	/* On the engine thread, where target QPs find and take from it: after this none can. */
	xrc_srq_unnumber(srq->engine, srq);
	srq_put(srq);
	return 0;
}

uint32_t emu_srq_num(const struct emu_srq *srq)
{
	return srq->srqn;
}

uint32_t srq_xrcd(const struct emu_srq *srq)
{
	return srq->xrcd;
}

uint32_t srq_pd(const struct emu_srq *srq)
{
	return srq->pd_handle;
}

void srq_set_srqn(struct emu_srq *srq, uint32_t srqn)
{
	srq->srqn = srqn;
}

void srq_kill(struct emu_srq *srq)
{
	pthread_mutex_lock(&srq->lock);
	srq->dead = true;
	pthread_mutex_unlock(&srq->lock);
}

bool srq_complete(struct emu_srq *srq, const struct ibv_wc *wc, bool solicited, bool *overrun)
{
	bool pushed = false;

	*overrun = false;
	pthread_mutex_lock(&srq->lock);
	if (!srq->dead && srq->cq) {
		pushed = true;
		*overrun = !emu_cq_push(srq->cq, wc, solicited);
	}
	pthread_mutex_unlock(&srq->lock);
	return pushed;
}

int emu_srq_modify(struct emu_srq *srq, struct ibv_srq_attr *attr, int attr_mask)
{
	uint32_t depth, limit;
	int ret = 0;

	if (attr_mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return EINVAL;
	pthread_mutex_lock(&srq->lock);
	depth = (attr_mask & IBV_SRQ_MAX_WR) ? attr->max_wr : srq->rq.depth;
	limit = (attr_mask & IBV_SRQ_LIMIT) ? attr->srq_limit : srq->limit;
	/* rxe_srq_chk_attr(): a size the device has, and a limit the queue can reach. */
	if (!depth || depth > EMU_MAX_SRQ_WR || limit > depth)
		ret = EINVAL;
	if (!ret && depth != srq->rq.depth)
		ret = recv_queue_resize(&srq->rq, depth);
	if (!ret) {
		srq->limit = limit;
		attr->max_wr = srq->rq.depth;
	}
	pthread_mutex_unlock(&srq->lock);
	return ret;
}

int emu_srq_query(struct emu_srq *srq, struct ibv_srq_attr *attr)
{
	pthread_mutex_lock(&srq->lock);
	attr->max_wr = srq->rq.depth;
	attr->max_sge = srq->rq.max_sge;
	attr->srq_limit = srq->limit;
	pthread_mutex_unlock(&srq->lock);
	return 0;
}

int emu_srq_post_recv(struct emu_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	int ret = 0;

	pthread_mutex_lock(&srq->lock);
	for (; wr; wr = wr->next) {
		ret = recv_queue_post(&srq->rq, wr);
		if (ret) {
			*bad_wr = wr;
			break;
		}
	}
	pthread_mutex_unlock(&srq->lock);
	return ret;
}

void srq_attach(struct emu_srq *srq)
{
	pthread_mutex_lock(&srq->lock);
	srq->users++;
	pthread_mutex_unlock(&srq->lock);
}

void srq_detach(struct emu_srq *srq)
{
	pthread_mutex_lock(&srq->lock);
	srq->users--;
	pthread_mutex_unlock(&srq->lock);
}

enum recv_take srq_take(struct emu_srq *srq, uint64_t need, struct recv_wqe *into)
{
	enum recv_take got;
	bool limit_reached = false;

	pthread_mutex_lock(&srq->lock);
	got = srq->dead ? RECV_NONE : recv_queue_take(&srq->rq, need, into);
	/* As rxe's get_srq_wqe(): checked when a WQE is taken, then disarmed until re-armed. */
	if (got == RECV_TAKEN && srq->limit && recv_queue_count(&srq->rq) < srq->limit) {
		srq->limit = 0;
		limit_reached = true;
	}
	pthread_mutex_unlock(&srq->lock);
	into->pd_handle = srq->pd_handle;
	if (limit_reached)
		emu_async_event(srq->async_fd, srq->handle, IBV_EVENT_SRQ_LIMIT_REACHED,
				srq->events_raised);
	return got;
}
