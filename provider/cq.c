// SPDX-License-Identifier: MIT
/* Completion queues: the provider side of emu/cq.c. */
#include <errno.h>
#include <stdlib.h>

#include "softrdma.h"
#include "emu/cq.h"
#include "emu/qp.h"
#include "kernel-abi/comp_channel.h"

static void cq_overrun(void *owner, struct emu_cq *ecq)
{
	struct sr_cq *cq = owner;

	(void)ecq;
	emu_async_event(to_sr_context(cq->vcq.cq.context)->async_notify_fd,
			(uintptr_t)&cq->vcq.cq, IBV_EVENT_CQ_ERR);
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
	struct emu_cq_init init = { .cqe = cqe, .handle = (uintptr_t)&cq->vcq.cq,
				    .on_error = cq_overrun, .owner = cq };
	int ret = channel_notify_fd(context, channel, &init.notify_fd);

	if (ret)
		return ret;
	/* cq_overrun needs the context before libibverbs gets to set it. */
	cq->vcq.cq.context = context;
	ret = emu_cq_create(&init, &cq->cq);
	if (ret)
		return ret;
	cq->vcq.cq.cqe = emu_cq_depth(cq->cq);
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

int sr_destroy_cq(struct ibv_cq *ibcq)
{
	struct sr_cq *cq = to_sr_cq(ibcq);

	emu_cq_destroy(cq->cq);
	if (cq->extended)
		cq_ex_destroy(&cq->vcq.cq_ex);
	free(cq);
	return 0;
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
	struct sr_cq *cq = to_sr_cq(ibcq);
	int ret = emu_cq_resize(cq->cq, cqe);

	if (!ret)
		ibcq->cqe = emu_cq_depth(cq->cq);
	return ret;
}

void sr_cq_event(struct ibv_cq *cq)
{
	/* Nothing to do: emu_cq_arm() already disarmed the CQ when it raised the event. */
	(void)cq;
}
