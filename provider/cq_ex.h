/* SPDX-License-Identifier: MIT */
/*
 * The extended CQ polling API (ibv_create_cq_ex(3): start_poll, next_poll, end_poll and the
 * ibv_wc_read_* accessors) as a thin layer over the classic poll_cq: start_poll and next_poll
 * each poll one struct ibv_wc into the poller's current entry, which the accessors read.
 *
 * One entry per poll_cq call, on purpose: a batch polled ahead would leave completions that
 * the engine has already handed out sitting in the poller, where an ibv_poll_cq on the same
 * CQ (allowed through ibv_cq_ex_to_cq) would overtake them.
 *
 * A successful start_poll takes the poller's lock and end_poll releases it: the current entry
 * is per CQ, so two threads may not iterate at once. A start_poll that fails holds nothing,
 * and the man page says end_poll must not follow it.
 *
 * Placement: the poller is found from the struct ibv_cq_ex by a fixed offset, so the provider
 * must place its struct cq_ex_poller immediately before its struct verbs_cq and check it:
 *
 *	struct softrdma_cq {
 *		struct cq_ex_poller poller;
 *		struct verbs_cq vcq;
 *		...
 *	};
 *	static_assert(CQ_EX_POLLER_PLACED_BEFORE(struct softrdma_cq, poller, vcq.cq_ex),
 *		      "poller must sit right before vcq");
 */
#ifndef SOFTRDMA_PROVIDER_CQ_EX_H
#define SOFTRDMA_PROVIDER_CQ_EX_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

/*
 * The classic ibv_poll_cq of the CQ: how many entries it wrote (0..num_entries), or a
 * negative errno, which start_poll/next_poll return as a positive one.
 */
typedef int (*cq_ex_poll_fn)(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);

/* The wc_flags cq_ex_init accepts: everything a struct ibv_wc carries. */
#define CQ_EX_SUPPORTED_WC_FLAGS	((uint64_t)IBV_WC_STANDARD_FLAGS)

struct cq_ex_poller {
	pthread_mutex_t lock;		/* held from a successful start_poll to end_poll */
	cq_ex_poll_fn poll_cq;
	struct ibv_wc current;		/* what the read_* accessors return */
};

/* How far before its struct ibv_cq_ex a CQ's poller starts. */
struct cq_ex_poller_layout {
	struct cq_ex_poller poller;
	struct ibv_cq_ex cqx;
};
#define CQ_EX_POLLER_OFFSET	offsetof(struct cq_ex_poller_layout, cqx)

/* True when `type` places its poller where cq_ex.c looks for it. */
#define CQ_EX_POLLER_PLACED_BEFORE(type, poller_member, cqx_member)		\
	(offsetof(type, cqx_member) - offsetof(type, poller_member) == CQ_EX_POLLER_OFFSET)

/*
 * Sets the polling and read_* pointers of cqx (those of fields we cannot provide are NULL)
 * and initialises the poller in front of it. Returns 0, or EOPNOTSUPP if wc_flags asks for
 * anything outside CQ_EX_SUPPORTED_WC_FLAGS (a completion timestamp, CVLAN, flow tag, TM
 * info), in which case nothing is initialised and the CQ must not be created.
 */
int cq_ex_init(struct ibv_cq_ex *cqx, uint64_t wc_flags, cq_ex_poll_fn poll_cq);

/* Releases what cq_ex_init set up; only after it returned 0, and outside a poll. */
void cq_ex_destroy(struct ibv_cq_ex *cqx);

#endif /* SOFTRDMA_PROVIDER_CQ_EX_H */
