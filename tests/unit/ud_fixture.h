/* SPDX-License-Identifier: MIT */
/* UD queue pairs for the device tests: one QP with its CQ and slotted receive buffers. */
#ifndef SOFTRDMA_TESTS_UD_FIXTURE_H
#define SOFTRDMA_TESTS_UD_FIXTURE_H

#include "rc_fixture.h"

#define UD_GRH_LEN	40
#define UD_SLOT		4096	/* one receive buffer per slot; slots 6 and 7 are sent from */

struct ud_end {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct rc_buf *buf;		/* 8 UD_SLOT-sized buffers */
	struct ibv_mr *mr;
};

/* A UD QP in RTS with Q_Key qkey, its CQ, buffers and their MR (freed with env). */
void ud_end_create(struct rc_env *env, struct ud_end *end, uint32_t qkey);
void ud_end_destroy(struct ud_end *end);
/* A receive of len bytes into slot slot_index of end, wr_id = the slot index. */
void ud_post_slot(struct ud_end *end, int slot_index, uint32_t len);
/*
 * Sends len (up to 2 slots) bytes of pattern seed from slot 6 of from through ah to
 * remote_qpn with Q_Key qkey (with immediate *imm if not NULL); its completion is a success.
 */
void ud_send(struct ud_end *from, struct ibv_ah *ah, uint32_t remote_qpn, uint32_t qkey,
	     uint64_t wr_id, uint32_t len, uint8_t seed, const uint32_t *imm);

#endif
