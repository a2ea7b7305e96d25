// SPDX-License-Identifier: MIT
/*
 * A ring of ibv_wc under one mutex. Overrun follows the hardware: the completion that does
 * not fit is lost, the CQ goes to error (it stays in error), and the owner raises
 * IBV_EVENT_CQ_ERR; QPs that then try to complete into it go to error too.
 */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/cq.h"
#include "emu/limits.h"
#include "emu/qp.h"
#include "kernel-abi/comp_channel.h"

enum cq_arm { CQ_DISARMED, CQ_ARM_NEXT, CQ_ARM_SOLICITED };

struct emu_cq {
	pthread_mutex_t lock;		/* the ring, head and count, arm, error; a leaf lock */
	struct ibv_wc *ring;
	uint32_t depth;
	uint32_t head;		/* next to poll */
	uint32_t count;
	enum cq_arm arm;
	bool error;
	int notify_fd;
	_Atomic uint32_t events_raised;	/* records written to notify_fd */
	uint64_t handle;
	emu_cq_error_fn on_error;
	void *owner;
	struct emu_engine *engine;	/* constant: driven by an empty poll, or NULL */
};

int emu_cq_create(const struct emu_cq_init *init, struct emu_cq **out)
{
	struct emu_cq *cq;

	if (init->cqe < 1 || init->cqe > EMU_MAX_CQE)
		return EINVAL;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return ENOMEM;
	cq->depth = (uint32_t)init->cqe;
	cq->ring = calloc(cq->depth, sizeof(*cq->ring));
	if (!cq->ring) {
		free(cq);
		return ENOMEM;
	}
	pthread_mutex_init(&cq->lock, NULL);
	cq->notify_fd = init->notify_fd;
	cq->handle = init->handle;
	cq->on_error = init->on_error;
	cq->owner = init->owner;
	cq->engine = init->engine;
	*out = cq;
	return 0;
}

void emu_cq_destroy(struct emu_cq *cq)
{
	pthread_mutex_destroy(&cq->lock);
	free(cq->ring);
	free(cq);
}

int emu_cq_depth(const struct emu_cq *cq)
{
	return (int)cq->depth;
}

int emu_cq_resize(struct emu_cq *cq, int cqe)
{
	struct ibv_wc *ring;

	if (cqe < 1 || cqe > EMU_MAX_CQE)
		return EINVAL;
	pthread_mutex_lock(&cq->lock);
	if ((uint32_t)cqe < cq->count) {
		pthread_mutex_unlock(&cq->lock);
		return EINVAL;
	}
	ring = calloc((size_t)cqe, sizeof(*ring));
	if (!ring) {
		pthread_mutex_unlock(&cq->lock);
		return ENOMEM;
	}
	for (uint32_t i = 0; i < cq->count; i++)
		ring[i] = cq->ring[(cq->head + i) % cq->depth];
	free(cq->ring);
	cq->ring = ring;
	cq->depth = (uint32_t)cqe;
	cq->head = 0;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

static int take(struct emu_cq *cq, int n, struct ibv_wc *wc)
{
	int got = 0;

	pthread_mutex_lock(&cq->lock);
	while (got < n && cq->count) {
		wc[got++] = cq->ring[cq->head];
		cq->head = (cq->head + 1) % cq->depth;
		cq->count--;
	}
	pthread_mutex_unlock(&cq->lock);
	return got;
}

int emu_cq_poll(struct emu_cq *cq, int n, struct ibv_wc *wc)
{
	int got, ran;

	if (n < 0)
		return -EINVAL;
	got = take(cq, n, wc);
	if (got)
		return got;
	/* Empty: read in what arrived, unless another thread is doing so (CQ lock dropped:
	 * progress is taken before any lock of emu/). */
	ran = cq->engine ? emu_engine_progress(cq->engine) : -1;
	if (ran > 0 && (got = take(cq, n, wc)))
		return got;
	/*
	 * The engine thread (or another poller) drives the engine, or has work only it does:
	 * a busy-polling application would otherwise starve the thread that fills this CQ
	 * whenever threads outnumber cores (two peers on a laptop): give it the CPU. After a
	 * pass that needs no engine thread, the caller keeps the CPU: on a loaded machine a
	 * yield costs a time slice of every other runnable thread (docs/performance.md).
	 */
	if (ran < 0) {
		sched_yield();
		/* What came meanwhile is answered now: an "empty" from before the yield would
		 * be stale, and a program that next reads an event caused later (rdma_cm's
		 * DISCONNECTED, on which ofi_rxm closes its endpoint) must have seen it. */
		return take(cq, n, wc);
	}
	return 0;
}

int emu_cq_discard_qp_recvs(struct emu_cq *cq, uint32_t qpn)
{
	uint32_t kept = 0, dropped;

	pthread_mutex_lock(&cq->lock);
	/* Forward in place: an entry moves only toward the head, never over one not read. */
	for (uint32_t i = 0; i < cq->count; i++) {
		const struct ibv_wc *wc = &cq->ring[(cq->head + i) % cq->depth];

		if (wc->qp_num != qpn || !(wc->opcode & IBV_WC_RECV))
			cq->ring[(cq->head + kept++) % cq->depth] = *wc;
	}
	dropped = cq->count - kept;
	cq->count = kept;
	pthread_mutex_unlock(&cq->lock);
	return (int)dropped;
}

int emu_cq_arm(struct emu_cq *cq, bool solicited_only)
{
	pthread_mutex_lock(&cq->lock);
	/* A pending "next" request is not narrowed by a later "solicited" one. */
	if (cq->arm != CQ_ARM_NEXT)
		cq->arm = solicited_only ? CQ_ARM_SOLICITED : CQ_ARM_NEXT;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

static void raise_event(struct emu_cq *cq)
{
	struct uverbs_comp_event ev = { .cq_handle = cq->handle };

	if (cq->notify_fd < 0)
		return;
	if (write(cq->notify_fd, &ev, sizeof(ev)) == sizeof(ev))
		atomic_fetch_add_explicit(&cq->events_raised, 1, memory_order_relaxed);
	/* else a full pipe already holds events the reader has not taken: it will wake. */
}

uint32_t emu_cq_events_raised(const struct emu_cq *cq)
{
	return atomic_load_explicit(&cq->events_raised, memory_order_relaxed);
}

bool emu_cq_push(struct emu_cq *cq, const struct ibv_wc *wc, bool solicited)
{
	bool notify = false;

	pthread_mutex_lock(&cq->lock);
	if (cq->error || cq->count == cq->depth) {
		bool first = !cq->error;

		cq->error = true;
		pthread_mutex_unlock(&cq->lock);
		if (first && cq->on_error)
			cq->on_error(cq->owner, cq);
		return false;
	}
	cq->ring[(cq->head + cq->count) % cq->depth] = *wc;
	cq->count++;
	if (cq->arm == CQ_ARM_NEXT ||
	    (cq->arm == CQ_ARM_SOLICITED && (solicited || wc->status != IBV_WC_SUCCESS))) {
		cq->arm = CQ_DISARMED;
		notify = true;
	}
	pthread_mutex_unlock(&cq->lock);
	if (notify)
		raise_event(cq);
	return true;
}

bool emu_cq_in_error(struct emu_cq *cq)
{
	bool err;

	pthread_mutex_lock(&cq->lock);
	err = cq->error;
	pthread_mutex_unlock(&cq->lock);
	return err;
}
