// SPDX-License-Identifier: MIT
/*
 * XRC in the engine: the numbers of the process's SRQs, by which an XRCETH names one. A
 * target QP (IBV_QPT_XRC_RECV) finds the SRQ of each request here, and only an SRQ of its
 * own XRC domain (docs/semantics.md, "XRC").
 *
 * A number is slot | generation << XRC_SRQN_SLOT_BITS. Slots are given round-robin, and
 * each round has the next generation (1 to 1023): a destroyed SRQ's slot is reused, but
 * its number only after 1023 rounds, so a message for it that is still on the way finds
 * nothing instead of the next SRQ. The table is under engine->lock; numbers
 * are given and taken back on the engine thread, where every lookup runs, so a target QP
 * that found an SRQ in a request's header never sees it die before it has taken its WQE.
 */
#include <assert.h>
#include <stdlib.h>

#include "emu/internal.h"
#include "emu/srq.h"

#define XRC_SRQN_SLOT_BITS	14	/* EMU_MAX_SRQ slots */
#define XRC_SRQN_SLOT_MASK	((1u << XRC_SRQN_SLOT_BITS) - 1)
#define XRC_SRQN_GEN_MASK	((1u << (24 - XRC_SRQN_SLOT_BITS)) - 1)

static_assert(EMU_MAX_SRQ == 1u << XRC_SRQN_SLOT_BITS, "every SRQ has a slot");

struct xrc_number_call {
	struct emu_engine *e;
	struct emu_srq *srq;
	int ret;
};

/* The next slot; every time the rotor comes round, numbers get the next generation. */
static void advance_slot(struct emu_engine *e)
{
	e->srq_next_slot = (e->srq_next_slot + 1) % EMU_MAX_SRQ;
	if (!e->srq_next_slot)
		e->srq_gen = (e->srq_gen + 1) & XRC_SRQN_GEN_MASK;
	/* Generation 0 is skipped: no SRQ is number 0, what a WR left zeroed names. */
	if (!e->srq_gen)
		e->srq_gen = 1;
}

static void number_on_engine(void *arg)
{
	struct xrc_number_call *call = arg;
	struct emu_engine *e = call->e;
	uint32_t slot;

	pthread_mutex_lock(&e->lock);
	if (!e->srq_slots && !(e->srq_slots = calloc(EMU_MAX_SRQ, sizeof(*e->srq_slots)))) {
		pthread_mutex_unlock(&e->lock);
		call->ret = ENOMEM;
		return;
	}
	if (!e->srq_gen)
		e->srq_gen = 1;
	/* The SRQ count (emu_srq_create) keeps a free slot for every SRQ being made. */
	for (slot = 0; slot < EMU_MAX_SRQ && e->srq_slots[e->srq_next_slot]; slot++)
		advance_slot(e);
	slot = e->srq_next_slot;
	e->srq_slots[slot] = call->srq;
	srq_set_srqn(call->srq, slot | e->srq_gen << XRC_SRQN_SLOT_BITS);
	advance_slot(e);
	pthread_mutex_unlock(&e->lock);
	call->ret = 0;
}

int xrc_srq_number(struct emu_engine *e, struct emu_srq *srq)
{
	struct xrc_number_call call = { .e = e, .srq = srq };

	engine_call_sync(e, number_on_engine, &call);
	return call.ret;
}

static void unnumber_on_engine(void *arg)
{
	struct xrc_number_call *call = arg;
	struct emu_engine *e = call->e;
	struct emu_srq *srq = call->srq;
	uint32_t slot = emu_srq_num(srq) & XRC_SRQN_SLOT_MASK;

	pthread_mutex_lock(&e->lock);
	if (e->srq_slots && e->srq_slots[slot] == srq)
		e->srq_slots[slot] = NULL;
	pthread_mutex_unlock(&e->lock);
	srq_kill(srq);
}

void xrc_srq_unnumber(struct emu_engine *e, struct emu_srq *srq)
{
	struct xrc_number_call call = { .e = e, .srq = srq };

	engine_call_sync(e, unnumber_on_engine, &call);
}

struct emu_srq *xrc_srq_find(struct emu_engine *e, uint32_t srqn, uint32_t xrcd)
{
	struct emu_srq *srq = NULL;
	uint32_t slot = srqn & XRC_SRQN_SLOT_MASK;

	pthread_mutex_lock(&e->lock);
	if (xrcd && e->srq_slots && srqn <= BTH_QPN_MASK && e->srq_slots[slot] &&
	    emu_srq_num(e->srq_slots[slot]) == srqn && srq_xrcd(e->srq_slots[slot]) == xrcd) {
		srq = e->srq_slots[slot];
		srq_get(srq);
	}
	pthread_mutex_unlock(&e->lock);
	return srq;
}

void xrc_free(struct emu_engine *e)
{
	free(e->srq_slots);
	e->srq_slots = NULL;
}
