/* SPDX-License-Identifier: MIT */
/*
 * Shared receive queues: what the provider asks of the engine. QPs created with an SRQ take
 * their receives from it (emu_qp_init.srq); semantics are in docs/semantics.md.
 */
#ifndef SOFTRDMA_EMU_SRQ_H
#define SOFTRDMA_EMU_SRQ_H

#include <stdatomic.h>
#include <stdint.h>
#include <infiniband/verbs.h>

struct emu_engine;
struct emu_srq;

struct emu_srq_init {
	uint32_t pd_handle;		/* receive buffers are checked against this PD */
	/* XRC (IBV_SRQT_XRC): its domain (nonzero) and the CQ its receives complete to. Any
	 * target QP of that domain delivers to it, by the number emu_srq_num() gives. */
	uint32_t xrcd;
	struct emu_cq *cq;
	struct ibv_srq_attr attr;	/* in: asked for; out: granted (srq_limit is 0) */
	uint64_t handle;		/* the ibv_srq pointer, as async events carry it */
	int async_fd;			/* where they go */
	_Atomic uint32_t *events_raised;	/* counts those written, if not NULL */
};

/* 0, EINVAL (max_wr 0 or above the limits, max_sge above them) or ENOMEM (too many SRQs). */
int emu_srq_create(struct emu_engine *e, struct emu_srq_init *init, struct emu_srq **out);
/* 0, or EBUSY while a QP still takes its receives from it. */
int emu_srq_destroy(struct emu_srq *srq);
/* The SRQ's number (ibv_get_srq_num): what an XRCETH names; unique in the process. */
uint32_t emu_srq_num(const struct emu_srq *srq);
/*
 * IBV_SRQ_MAX_WR resizes (the WQEs posted stay), IBV_SRQ_LIMIT arms the limit event (0
 * disarms it). A refused modify changes nothing. On success attr->max_wr is what was granted.
 */
int emu_srq_modify(struct emu_srq *srq, struct ibv_srq_attr *attr, int attr_mask);
int emu_srq_query(struct emu_srq *srq, struct ibv_srq_attr *attr);
int emu_srq_post_recv(struct emu_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);

#endif
