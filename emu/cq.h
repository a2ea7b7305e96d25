/* SPDX-License-Identifier: MIT */
/*
 * Completion queues. Producers are the engine thread and posting threads (local errors,
 * flushes); consumers poll. A completion event is one 8-byte record (the CQ's user handle)
 * on the channel's pipe, which libibverbs' own ibv_get_cq_event() reads.
 */
#ifndef SOFTRDMA_EMU_CQ_H
#define SOFTRDMA_EMU_CQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>

struct emu_cq;
struct emu_engine;

/* What the CQ reports to its owner: overrun (an async IBV_EVENT_CQ_ERR). */
typedef void (*emu_cq_error_fn)(void *owner, struct emu_cq *cq);

struct emu_cq_init {
	int cqe;			/* at least this many entries */
	int notify_fd;			/* completion channel pipe, or -1 */
	uint64_t handle;		/* what an event carries: the ibv_cq pointer */
	emu_cq_error_fn on_error;
	void *owner;
	/* An empty poll drives this engine (emu_engine_progress()); NULL: it only yields. */
	struct emu_engine *engine;
};

int emu_cq_create(const struct emu_cq_init *init, struct emu_cq **out);
void emu_cq_destroy(struct emu_cq *cq);
/* The usable depth (>= the cqe asked for). */
int emu_cq_depth(const struct emu_cq *cq);
/* EINVAL when the CQ holds more completions than the new depth. */
int emu_cq_resize(struct emu_cq *cq, int cqe);
int emu_cq_poll(struct emu_cq *cq, int n, struct ibv_wc *wc);
/*
 * Takes out the receive completions of QP qpn that no poll has taken yet, keeping the
 * others in their order; returns how many went. ibv_destroy_qp's (docs/semantics.md).
 */
int emu_cq_discard_qp_recvs(struct emu_cq *cq, uint32_t qpn);
/* Arms the next (or next solicited) completion to raise one event. */
int emu_cq_arm(struct emu_cq *cq, bool solicited_only);
/*
 * Adds one completion; `solicited` marks a receive whose sender set IBV_SEND_SOLICITED.
 * Returns false on overrun: the completion is lost, the CQ is in error and its owner told.
 */
bool emu_cq_push(struct emu_cq *cq, const struct ibv_wc *wc, bool solicited);
bool emu_cq_in_error(struct emu_cq *cq);
/* Events written to the channel so far; final once no QP can complete into the CQ. */
uint32_t emu_cq_events_raised(const struct emu_cq *cq);

#endif
