// SPDX-License-Identifier: MIT
/*
 * UD: a datagram between two UD QPs of the device, with the right Q_Key, a wrong one
 * (dropped silently: the receive is taken by the next good datagram instead), no receive
 * posted (dropped), a receive too small for GRH and payload, and an RDMA opcode (refused).
 */
#include <arpa/inet.h>
#include <string.h>

#include "conf.h"

#define UD_QKEY 0x11111111	/* the qkey qp_to_init() gives */

enum ud_kind { U_OK, U_BAD_QKEY, U_NO_RECV, U_RECV_SMALL, U_WRITE };

static int ud_send(struct conf_end *from, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey,
		   void *addr, uint32_t len, uint32_t lkey, uint32_t imm, enum ibv_wr_opcode op)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(imm) }, *bad;

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = qkey;
	return ibv_post_send(from->qp, &wr, &bad);
}

static void ud_case(const struct conf_case *c)
{
	enum ud_kind k = (enum ud_kind)c->a;
	struct ibv_ah_attr ah_attr = {
		.is_global = 1, .port_num = 1,
		.grh = { .hop_limit = 1, .sgid_index = (uint8_t)conf_opts.gid_index },
	};
	struct qp_params p;
	struct conf_env e;
	struct ibv_ah *ah;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	uint8_t *buf;
	uint32_t recv_len = k == U_RECV_SMALL ? 40 + 16 : 40 + 64;
	int err, got;

	env_open(&e);
	qp_params_default(&p, IBV_QPT_UD);
	end_create(&e, &p, &e.a);
	end_create(&e, &p, &e.b);
	for (int i = 0; i < 2; i++) {
		struct ibv_qp *qp = i ? e.b.qp : e.a.qp;

		if ((err = qp_to_init(qp, &p, 0, 0)) || (err = qp_to_rtr(&e, qp, &p, 0, 0, 0)) ||
		    (err = qp_to_rts(qp, &p, 0, 0)))
			setup_failed("ud_connect", err);
	}
	ah_attr.grh.dgid = e.gid;
	ah = ibv_create_ah(e.pd, &ah_attr);
	if (!ah)
		setup_failed("create_ah", 1);
	buf = buf_alloc(2 * BUF_SIZE);
	memset(buf, LFILL, BUF_SIZE);
	mr = mr_reg(e.pd, buf, 2 * BUF_SIZE, IBV_ACCESS_LOCAL_WRITE);
	if (k != U_NO_RECV && post_recv(e.b.qp, buf + BUF_SIZE, recv_len, mr->lkey))
		setup_failed("post_recv", 1);
	err = ud_send(&e.a, ah, e.b.qp->qp_num, k == U_BAD_QKEY ? UD_QKEY + 1 : UD_QKEY, buf, 64,
		      mr->lkey, 1, k == U_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_SEND_WITH_IMM);
	out_ret("post", err);
	if (!err) {
		got = wait_wc(e.a.scq, &wc, conf_opts.wait_ms);
		out_wc("req", got, &wc);
	}
	if (k == U_BAD_QKEY || k == U_NO_RECV) {
		/* Dropped datagrams leave the receive for the next one, which says which it is. */
		sleep_ms(conf_opts.quiet_ms);
		if (k == U_NO_RECV && post_recv(e.b.qp, buf + BUF_SIZE, recv_len, mr->lkey))
			setup_failed("post_recv", 1);
		if (ud_send(&e.a, ah, e.b.qp->qp_num, UD_QKEY, buf, 64, mr->lkey, 2, IBV_WR_SEND_WITH_IMM) ||
		    wait_wc(e.a.scq, &wc, conf_opts.wait_ms) != 1)
			setup_failed("second_send", 1);
	}
	if (k != U_WRITE) {
		got = wait_wc(e.b.rcq, &wc, conf_opts.wait_ms);
		if (got == 1 && wc.status == IBV_WC_SUCCESS)
			out("resp=SUCCESS/len=%u/grh=%s/imm=%u/src_qp=%s", wc.byte_len,
			    wc.wc_flags & IBV_WC_GRH ? "yes" : "no", ntohl(wc.imm_data),
			    wc.src_qp == e.a.qp->qp_num ? "sender" : "other");
		else
			out_wc("resp", got, &wc);
	}
	out_state("qpa", e.a.qp);
	out_state("qpb", e.b.qp);
	out_end();
}

const struct conf_case conf_cases_ud[] = {
	{ "ud_send_ok", ud_case, U_OK, 0 },
	{ "ud_qkey_mismatch", ud_case, U_BAD_QKEY, 0 },
	{ "ud_no_recv_posted", ud_case, U_NO_RECV, 0 },
	{ "ud_recv_too_small", ud_case, U_RECV_SMALL, 0 },
	{ "ud_rdma_write", ud_case, U_WRITE, 0 },
	{ NULL, NULL, 0, 0 },
};
