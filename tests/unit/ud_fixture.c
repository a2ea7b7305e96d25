// SPDX-License-Identifier: MIT
/* UD queue pairs for the device tests (ud_fixture.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ud_fixture.h"

void ud_end_create(struct rc_env *env, struct ud_end *end, uint32_t qkey)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = qkey };

	end->cq = ibv_create_cq(env->ctx, 32, NULL, NULL, 0);
	assert_non_null(end->cq);
	init.send_cq = end->cq;
	init.recv_cq = end->cq;
	end->qp = ibv_create_qp(env->pd, &init);
	assert_non_null(end->qp);
	assert_int_equal(ibv_modify_qp(end->qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				       IBV_QP_PORT | IBV_QP_QKEY), 0);
	attr.qp_state = IBV_QPS_RTR;
	assert_int_equal(ibv_modify_qp(end->qp, &attr, IBV_QP_STATE), 0);
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = 0;
	assert_int_equal(ibv_modify_qp(end->qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
	end->buf = rc_alloc(env, 8 * UD_SLOT);
	end->mr = rc_reg(env, env->pd, end->buf->p, 8 * UD_SLOT, IBV_ACCESS_LOCAL_WRITE);
}

void ud_end_destroy(struct ud_end *end)
{
	assert_int_equal(ibv_destroy_qp(end->qp), 0);
	assert_int_equal(ibv_destroy_cq(end->cq), 0);
}

void ud_post_slot(struct ud_end *end, int slot_index, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)end->buf->p + (size_t)slot_index * UD_SLOT,
			       .length = len, .lkey = end->mr->lkey };

	rc_post_recv(end->qp, (uint64_t)slot_index, &sge, 1);
}

void ud_send(struct ud_end *from, struct ibv_ah *ah, uint32_t remote_qpn, uint32_t qkey,
	     uint64_t wr_id, uint32_t len, uint8_t seed, const uint32_t *imm)
{
	uint8_t *src = from->buf->p + 6 * UD_SLOT;	/* slots 6 and 7 */
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = len, .lkey = from->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;

	rc_fill(src, len, seed);
	if (imm) {
		wr.opcode = IBV_WR_SEND_WITH_IMM;
		wr.imm_data = *imm;
	}
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = remote_qpn;
	wr.wr.ud.remote_qkey = qkey;
	assert_int_equal(ibv_post_send(from->qp, &wr, &bad), 0);
	rc_expect_wc(from->cq, wr_id, IBV_WC_SUCCESS, NULL);
}
