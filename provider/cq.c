// SPDX-License-Identifier: MIT
/* Completion queues: the provider side of emu/cq.c. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "softrdma.h"
#include "emu/cq.h"
#include "emu/qp.h"
#include "kernel-abi/comp_channel.h"

#define CQ_REF(cq)	SR_CQ_REF(cq)

static void cq_overrun(void *owner, struct emu_cq *ecq)
{
	struct sr_cq *cq = owner;

	(void)ecq;
	emu_async_event(to_sr_context(cq->vcq.cq.context)->async_notify_fd,
			(uintptr_t)&cq->vcq.cq, IBV_EVENT_CQ_ERR, &cq->async.raised);
}

/* The write end of a softrdma completion channel, or -1 (EINVAL) for anything else. */
static int channel_notify_fd(struct ibv_context *context, struct ibv_comp_channel *channel,
			    int *fd)
{
	const struct softrdma_comp_channel *ch = (const void *)channel;

	*fd = -1;
	if (!channel)
		return 0;
	/* A channel of another context (or made without our interposer) is not ours. */
	if (channel->context != context || ch->magic != SOFTRDMA_CHANNEL_MAGIC)
		return EINVAL;
	*fd = ch->notify_fd;
	return 0;
}

static int cq_init(struct sr_cq *cq, struct ibv_context *context, int cqe,
		   struct ibv_comp_channel *channel)
{
	struct sr_context *ctx = to_sr_context(context);
	struct emu_cq_init init = { .cqe = cqe, .handle = (uintptr_t)&cq->vcq.cq,
				    .on_error = cq_overrun, .owner = cq, .engine = ctx->engine };
	int ret = channel_notify_fd(context, channel, &init.notify_fd);

	if (ret)
		return ret;
	ret = sr_obj_create(ctx, &cq->obj, SR_OBJ_CQ, NULL, 0);
	if (ret)
		return ret;
	/* cq_overrun needs the context before libibverbs gets to set it. */
	cq->vcq.cq.context = context;
	cq->channel = channel;
	ret = emu_cq_create(&init, &cq->cq);
	if (ret) {
		sr_obj_unmake(ctx, &cq->obj);
		return ret;
	}
	cq->vcq.cq.cqe = emu_cq_depth(cq->cq);
	/* libibverbs' verbs_init_cq() leaves the handle alone. */
	cq->vcq.cq.handle = cq->obj.handle;
	sr_obj_publish(ctx, &cq->obj);
	return 0;
}

struct ibv_cq *sr_create_cq(struct ibv_context *context, int cqe, struct ibv_comp_channel *channel,
			    int comp_vector)
{
	struct sr_cq *cq;
	int ret;

	if (comp_vector < 0 || comp_vector >= context->num_comp_vectors) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	ret = cq_init(cq, context, cqe, channel);
	if (ret) {
		free(cq);
		errno = ret;
		return NULL;
	}
	/* libibverbs' ibv_create_cq() fills in the rest (verbs_init_cq). */
	return &cq->vcq.cq;
}

struct ibv_cq_ex *sr_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr)
{
	struct sr_cq *cq;
	int ret;

	if (attr->comp_mask & ~(uint32_t)IBV_CQ_INIT_ATTR_MASK_FLAGS ||
	    ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	     (attr->flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED)) ||
	    attr->comp_vector >= (uint32_t)context->num_comp_vectors) {
		errno = attr->comp_vector >= (uint32_t)context->num_comp_vectors ? EINVAL :
										 EOPNOTSUPP;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	ret = cq_ex_init(&cq->vcq.cq_ex, attr->wc_flags, sr_poll_cq);
	if (!ret) {
		ret = cq_init(cq, context, (int)attr->cqe, attr->channel);
		if (ret)
			cq_ex_destroy(&cq->vcq.cq_ex);
	}
	if (ret) {
		free(cq);
		errno = ret;
		return NULL;
	}
	cq->extended = true;
	/* libibverbs then fills in the rest (verbs_init_cq), as for ibv_create_cq(). */
	return &cq->vcq.cq_ex;
}

/*
 * A CQ with no QP raises no event, so what it raised is final: its unread events are
 * removed and the destroy waits for the application to acknowledge the others, as
 * ibv_cmd_destroy_cq() does with the counts the kernel returns (events.c).
 */
int sr_cq_teardown(struct sr_context *ctx, struct sr_cq *cq)
{
	struct ibv_cq *ibcq = &cq->vcq.cq;
	struct sr_settle ev[SR_SETTLE_MAX] = {
		{ .pipe = sr_async_pipe(ctx), .element = (uintptr_t)ibcq, .type = SR_OBJ_CQ,
		  .raised = atomic_load(&cq->async.raised),
		  .taken = atomic_load(&cq->async.taken) },
	};
	int n = 1, ret;

	if (cq->channel)
		ev[n++] = (struct sr_settle){ .pipe = sr_comp_pipe(cq->channel),
					      .element = (uintptr_t)ibcq, .type = SR_OBJ_CQ,
					      .raised = emu_cq_events_raised(cq->cq),
					      .taken = atomic_load(&cq->comp_taken) };
	ret = sr_events_settle(ctx, ev, n);
	if (sr_obj_teardown_refused(ctx, &cq->obj, ret))
		return ret;
	emu_cq_destroy(cq->cq);
	sr_obj_unmake(ctx, &cq->obj);
	sr_events_wait_acked(ctx, &ibcq->mutex, &ibcq->cond, &ibcq->async_events_completed,
			     ev[0].reported, n > 1 ? &ibcq->comp_events_completed : NULL,
			     n > 1 ? ev[1].reported : 0);
	if (cq->extended)
		cq_ex_destroy(&cq->vcq.cq_ex);
	free(cq);
	return 0;
}

/* ibv_destroy_cq(3): EBUSY while a QP uses it. */
int sr_destroy_cq(struct ibv_cq *ibcq)
{
	return sr_obj_destroy(to_sr_context(ibcq->context), CQ_REF(ibcq));
}

int sr_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	return emu_cq_poll(to_sr_cq(cq)->cq, n, wc);
}

int sr_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	return emu_cq_arm(to_sr_cq(cq)->cq, solicited_only);
}

int sr_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct sr_context *ctx = to_sr_context(ibcq->context);
	struct sr_cq *cq = to_sr_cq(ibcq);
	int ret = sr_obj_enter(ctx, CQ_REF(ibcq));

	if (ret)
		return ret;
	ret = emu_cq_resize(cq->cq, cqe);
	if (!ret)
		ibcq->cqe = emu_cq_depth(cq->cq);
	sr_obj_leave(ctx, &cq->obj);
	return ret;
}

/* libibverbs' ibv_get_cq_event() calls this after each read (events.c counts them). */
void sr_cq_event(struct ibv_cq *cq)
{
	/* emu_cq_arm() already disarmed the CQ when it raised the event. */
	atomic_fetch_add(&to_sr_cq(cq)->comp_taken, 1);
}
