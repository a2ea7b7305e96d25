// SPDX-License-Identifier: MIT
/* Shared receive queues: the provider side of emu/srq.c. Basic and XRC SRQs (no TM). */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "softrdma.h"
#include "emu/srq.h"

/*
 * An XRC SRQ (xrcd and cq not NULL) is a user of its PD, domain handle and CQ, and its
 * receives complete to that CQ from any target QP of the domain.
 */
static struct ibv_srq *create_srq(struct ibv_pd *pd, struct ibv_srq_attr *attr,
				  struct ibv_xrcd *xrcd, struct ibv_cq *cq)
{
	struct sr_context *ctx = to_sr_context(pd->context);
	struct sr_obj_ref parents[3] = { SR_PD_REF(pd) };
	struct sr_srq *srq = calloc(1, sizeof(*srq));
	struct emu_srq_init init = { .attr = *attr, .async_fd = ctx->async_notify_fd };
	struct ibv_srq *ibsrq;
	int ret;

	if (!srq)
		return NULL;
	if (xrcd) {
		parents[1] = SR_XRCD_REF(xrcd);
		parents[2] = SR_CQ_REF(cq);
	}
	ibsrq = &srq->vsrq.srq;
	init.handle = (uintptr_t)ibsrq;
	init.events_raised = &srq->async.raised;
	ret = sr_obj_create(ctx, &srq->obj, SR_OBJ_SRQ, parents, xrcd ? 3 : 1);
	if (ret)
		return sr_obj_create_failed(ctx, NULL, srq, ret);
	init.pd_handle = to_sr_pd(pd)->id;
	if (xrcd) {
		init.xrcd = sr_xrcd_id(to_sr_xrcd(xrcd));
		init.cq = to_sr_cq(cq)->cq;
	}
	ret = emu_srq_create(ctx->engine, &init, &srq->srq);
	if (ret)
		return sr_obj_create_failed(ctx, &srq->obj, srq, ret);
	*attr = init.attr;
	srq->vsrq.srq_type = xrcd ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
	srq->vsrq.xrcd = xrcd ? &to_sr_xrcd(xrcd)->vxrcd : NULL;
	srq->vsrq.cq = xrcd ? cq : NULL;
	srq->vsrq.srq_num = emu_srq_num(srq->srq);
	ibsrq->handle = srq->obj.handle;
	sr_obj_publish(ctx, &srq->obj);
	return ibsrq;
}

/* libibverbs' ibv_create_srq() fills in the rest of the ibv_srq. */
struct ibv_srq *sr_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	return create_srq(pd, &attr->attr, NULL, NULL);
}

/*
 * libibverbs sends a basic SRQ with only a PD here when the caller also set other mask bits;
 * like the kernel, a basic SRQ ignores the XRC domain and CQ. An XRC SRQ needs all three
 * (mlx5_create_srq_ex()). Tag matching is not built.
 */
struct ibv_srq *sr_create_srq_ex(struct ibv_context *context, struct ibv_srq_init_attr_ex *attr)
{
	enum ibv_srq_type type = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? attr->srq_type :
									      IBV_SRQT_BASIC;
	const uint32_t xrc_needs = IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	bool xrc = type == IBV_SRQT_XRC;
	struct ibv_srq *srq;

	if (attr->comp_mask >= IBV_SRQ_INIT_ATTR_RESERVED ||
	    (type != IBV_SRQT_BASIC && !xrc)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd ||
	    attr->pd->context != context ||
	    (xrc && ((attr->comp_mask & xrc_needs) != xrc_needs || !attr->xrcd || !attr->cq))) {
		errno = EINVAL;
		return NULL;
	}
	srq = create_srq(attr->pd, &attr->attr, xrc ? attr->xrcd : NULL, xrc ? attr->cq : NULL);
	if (!srq)
		return NULL;
	/* ibv_create_srq_ex() calls us directly: what ibv_create_srq() would set is ours. */
	srq->context = context;
	srq->srq_context = attr->srq_context;
	srq->pd = attr->pd;
	srq->events_completed = 0;
	pthread_mutex_init(&srq->mutex, NULL);
	pthread_cond_init(&srq->cond, NULL);
	return srq;
}

int sr_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int attr_mask)
{
	struct sr_context *ctx = to_sr_context(ibsrq->context);
	struct sr_srq *srq = to_sr_srq(ibsrq);
	int ret = sr_obj_enter(ctx, SR_SRQ_REF(ibsrq));

	if (ret)
		return ret;
	ret = emu_srq_modify(srq->srq, attr, attr_mask);
	sr_obj_leave(ctx, &srq->obj);
	return ret;
}

int sr_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct sr_context *ctx = to_sr_context(ibsrq->context);
	struct sr_srq *srq = to_sr_srq(ibsrq);
	int ret = sr_obj_enter(ctx, SR_SRQ_REF(ibsrq));

	if (ret)
		return ret;
	ret = emu_srq_query(srq->srq, attr);
	sr_obj_leave(ctx, &srq->obj);
	return ret;
}

/* As a QP's: unread events removed, the rest waited for (events.c). */
int sr_srq_teardown(struct sr_context *ctx, struct sr_srq *srq)
{
	struct ibv_srq *ibsrq = &srq->vsrq.srq;
	int ret = emu_srq_destroy(srq->srq);
	bool keep;

	/* The table counted its QPs already: the engine's EBUSY cannot happen. */
	if (sr_obj_teardown_refused(ctx, &srq->obj, ret))
		return ret;
	keep = sr_async_settle_unmake(ctx, &srq->obj, (uintptr_t)ibsrq, &srq->async,
				      &ibsrq->mutex, &ibsrq->cond, &ibsrq->events_completed);
	sr_obj_keep_or_free(ctx, &srq->obj, keep, &ibsrq->mutex, &ibsrq->cond);
	return 0;
}

/* EBUSY while a QP takes its receives from it. */
int sr_destroy_srq(struct ibv_srq *ibsrq)
{
	return sr_obj_destroy(to_sr_context(ibsrq->context), SR_SRQ_REF(ibsrq));
}

/* Any SRQ has a number (mlx5 gives one too); an XRC initiator's WRs name it. */
int sr_get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num)
{
	struct sr_context *ctx = to_sr_context(ibsrq->context);
	struct sr_srq *srq = to_sr_srq(ibsrq);
	int ret = sr_obj_enter(ctx, SR_SRQ_REF(ibsrq));

	if (ret)
		return ret;
	*srq_num = emu_srq_num(srq->srq);
	sr_obj_leave(ctx, &srq->obj);
	return 0;
}

int sr_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	return emu_srq_post_recv(to_sr_srq(srq)->srq, wr, bad_wr);
}
