// SPDX-License-Identifier: MIT
/*
 * The RC QP state machine: a QP is walked to a starting state with the required masks,
 * then one modify (a transition, legal or not, or a mask with one attribute missing or
 * one too many) is made; its result and the state after are reported. Also posting in
 * states that cannot send, and what is flushed in ERR.
 */
#include <errno.h>
#include <string.h>

#include "conf.h"

enum step { T_RESET, T_INIT, T_RTR, T_RTS, T_SQD, T_ERR, T_BAD_PORT, T_BAD_MTU, T_ATTR_ONLY,
	    T_ATTR_ONLY_OK, T_BAD_RETRY };

struct qp_move {
	enum ibv_qp_state from;
	enum step to;
	int extra, missing;
};

#define X_SQ_PSN IBV_QP_SQ_PSN
/* RTR -> RTS's required attributes, which RTS -> RTS may not carry */
#define RTS_ONLY (IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |	\
		  IBV_QP_MAX_QP_RD_ATOMIC)
static const struct qp_move moves[] = {
	/* 0 */ { IBV_QPS_RESET, T_INIT, 0, 0 },
	{ IBV_QPS_RESET, T_RTR, 0, 0 },
	{ IBV_QPS_RESET, T_RTS, 0, 0 },
	{ IBV_QPS_RESET, T_ERR, 0, 0 },
	{ IBV_QPS_RESET, T_RESET, 0, 0 },
	/* 5 */ { IBV_QPS_INIT, T_INIT, 0, 0 },
	{ IBV_QPS_INIT, T_RTS, 0, 0 },
	{ IBV_QPS_INIT, T_RTR, 0, 0 },
	{ IBV_QPS_RTR, T_RTR, 0, 0 },
	{ IBV_QPS_RTR, T_RTS, 0, 0 },
	/* 10 */ { IBV_QPS_RTS, T_RTS, 0, 0 },
	{ IBV_QPS_RTS, T_SQD, 0, 0 },
	{ IBV_QPS_RTS, T_RESET, 0, 0 },
	{ IBV_QPS_RTS, T_ERR, 0, 0 },
	{ IBV_QPS_RTS, T_INIT, 0, 0 },
	/* 15 */ { IBV_QPS_ERR, T_RTS, 0, 0 },
	{ IBV_QPS_ERR, T_RESET, 0, 0 },
	{ IBV_QPS_ERR, T_INIT, 0, 0 },
	{ IBV_QPS_RESET, T_INIT, 0, IBV_QP_ACCESS_FLAGS },
	{ IBV_QPS_RESET, T_INIT, 0, IBV_QP_PORT },
	/* 20 */ { IBV_QPS_RESET, T_INIT, 0, IBV_QP_PKEY_INDEX },
	{ IBV_QPS_RESET, T_INIT, X_SQ_PSN, 0 },
	{ IBV_QPS_INIT, T_RTR, 0, IBV_QP_AV },
	{ IBV_QPS_INIT, T_RTR, 0, IBV_QP_DEST_QPN },
	{ IBV_QPS_INIT, T_RTR, 0, IBV_QP_MIN_RNR_TIMER },
	/* 25 */ { IBV_QPS_INIT, T_RTR, 0, IBV_QP_PATH_MTU },
	{ IBV_QPS_INIT, T_RTR, X_SQ_PSN, 0 },
	{ IBV_QPS_RTR, T_RTS, 0, IBV_QP_SQ_PSN },
	{ IBV_QPS_RTR, T_RTS, 0, IBV_QP_TIMEOUT },
	{ IBV_QPS_RTR, T_RTS, 0, IBV_QP_MAX_QP_RD_ATOMIC },
	/* 30 */ { IBV_QPS_RTR, T_RTS, IBV_QP_DEST_QPN, 0 },
	{ IBV_QPS_RESET, T_BAD_PORT, 0, 0 },
	{ IBV_QPS_INIT, T_BAD_MTU, 0, 0 },
	{ IBV_QPS_RTS, T_ATTR_ONLY, 0, 0 },
	{ IBV_QPS_RTR, T_BAD_RETRY, 0, 0 },
	/* 35 */ { IBV_QPS_RTS, T_RTS, 0, RTS_ONLY },
	{ IBV_QPS_RTS, T_ATTR_ONLY_OK, 0, 0 },
	{ IBV_QPS_RTS, T_RTS, IBV_QP_MIN_RNR_TIMER, RTS_ONLY },
};

/* RESET -> ... -> from, with the required masks; the peer (b) is made RTR first. */
static void walk(struct conf_env *e, const struct qp_params *p, enum ibv_qp_state from)
{
	int err = 0;

	if (from == IBV_QPS_RESET)
		return;
	if (from == IBV_QPS_ERR) {
		struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

		if ((err = qp_to_init(e->a.qp, p, 0, 0)) ||
		    (err = ibv_modify_qp(e->a.qp, &attr, IBV_QP_STATE)))
			setup_failed("walk", err);
		return;
	}
	if ((err = qp_to_init(e->a.qp, p, 0, 0)))
		setup_failed("walk_init", err);
	if (from >= IBV_QPS_RTR && (err = qp_to_rtr(e, e->a.qp, p, e->b.qp->qp_num, 0, 0)))
		setup_failed("walk_rtr", err);
	if (from >= IBV_QPS_RTS && (err = qp_to_rts(e->a.qp, p, 0, 0)))
		setup_failed("walk_rts", err);
}

/* Two RC QPs: B in RTR towards A, and A walked from RESET up to state FROM. */
static void open_pair_at(struct conf_env *e, struct qp_params *p, enum ibv_qp_state from)
{
	env_open(e);
	qp_params_default(p, IBV_QPT_RC);
	end_create(e, p, &e->a);
	end_create(e, p, &e->b);
	if (qp_to_init(e->b.qp, p, 0, 0) || qp_to_rtr(e, e->b.qp, p, e->a.qp->qp_num, 0, 0))
		setup_failed("peer", 1);
	walk(e, p, from);
}

static void modify_case(const struct conf_case *c)
{
	const struct qp_move *m = &moves[c->a];
	struct qp_params p;
	struct conf_env e;
	struct ibv_qp_attr attr;
	int err;

	open_pair_at(&e, &p, m->from);
	memset(&attr, 0, sizeof(attr));
	switch (m->to) {
	case T_INIT: err = qp_to_init(e.a.qp, &p, m->extra, m->missing); break;
	case T_RTR: err = qp_to_rtr(&e, e.a.qp, &p, e.b.qp->qp_num, m->extra, m->missing); break;
	case T_RTS: err = qp_to_rts(e.a.qp, &p, m->extra, m->missing); break;
	case T_BAD_PORT:
		attr = (struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 2,
					     .qp_access_flags = ACCESS_ALL };
		err = ibv_modify_qp(e.a.qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
		break;
	case T_BAD_MTU:
		/* path_mtu 0 is no MTU */
		attr = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR, .path_mtu = 0,
			.dest_qp_num = e.b.qp->qp_num, .max_dest_rd_atomic = 4,
			.min_rnr_timer = 1,
			.ah_attr = { .is_global = 1, .port_num = 1,
				     .grh = { .dgid = e.gid, .hop_limit = 1,
					      .sgid_index = (uint8_t)conf_opts.gid_index } } };
		err = ibv_modify_qp(e.a.qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				    IBV_QP_MIN_RNR_TIMER);
		break;
	case T_ATTR_ONLY:
		attr.timeout = 10;
		err = ibv_modify_qp(e.a.qp, &attr, IBV_QP_TIMEOUT);
		break;
	case T_ATTR_ONLY_OK:
		attr.min_rnr_timer = 12;
		err = ibv_modify_qp(e.a.qp, &attr, IBV_QP_MIN_RNR_TIMER);
		break;
	case T_BAD_RETRY:
		attr.qp_state = IBV_QPS_RTS;
		attr.retry_cnt = 9;
		err = ibv_modify_qp(e.a.qp, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT |
				    IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				    IBV_QP_MAX_QP_RD_ATOMIC);
		break;
	default:
		attr.qp_state = m->to == T_RESET ? IBV_QPS_RESET : m->to == T_SQD ? IBV_QPS_SQD :
			IBV_QPS_ERR;
		err = ibv_modify_qp(e.a.qp, &attr, IBV_QP_STATE | m->extra);
		break;
	}
	out_ret("modify", err);
	out_state("state", e.a.qp);
	out_end();
}

/* Posting a send or a receive on a QP in a state that does not send (or is ERR). */
static void post_in_state_case(const struct conf_case *c)
{
	enum ibv_qp_state from = (enum ibv_qp_state)c->a;
	bool recv = c->b;
	struct qp_params p;
	struct conf_env e;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	uint8_t *buf;
	int err, got;

	open_pair_at(&e, &p, from);
	buf = buf_alloc(BUF_SIZE);
	mr = mr_reg(e.pd, buf, BUF_SIZE, ACCESS_ALL);
	if (recv)
		err = post_recv(e.a.qp, buf, 64, mr->lkey);
	else
		err = post_send(e.a.qp, IBV_WR_SEND, buf, 64, mr->lkey, 0, 0, 0, 0);
	out_ret("post", err);
	got = wait_wc(recv ? e.a.rcq : e.a.scq, &wc, from == IBV_QPS_ERR ? conf_opts.wait_ms : 0);
	if (got || from == IBV_QPS_ERR)
		out_wc("wc", got, &wc);
	else
		out("wc=none");
	out_state("state", e.a.qp);
	out_end();
}

/* ibv_create_qp_ex with IBV_QP_INIT_ATTR_CREATE_FLAGS in comp_mask and c->a as the flags. */
static void create_flags_case(const struct conf_case *c)
{
	struct conf_env e;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_init_attr_ex init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS,
		.create_flags = (uint32_t)c->a,
	};

	env_open(&e);
	cq = ibv_create_cq(e.ctx, 16, NULL, NULL, 0);
	if (!cq)
		setup_failed("create_cq", errno);
	init.pd = e.pd;
	init.send_cq = init.recv_cq = cq;
	errno = 0;
	qp = ibv_create_qp_ex(e.ctx, &init);
	out_ret("create", qp ? 0 : errno ? errno : -1);
	if (qp)
		out_state("state", qp);
	out_end();
}

#define MOVE(name, i) { "qp_" name, modify_case, i, 0 }
const struct conf_case conf_cases_qp[] = {
	MOVE("reset_to_init", 0),
	MOVE("reset_to_rtr", 1),
	MOVE("reset_to_rts", 2),
	MOVE("reset_to_err", 3),
	MOVE("reset_to_reset", 4),
	MOVE("init_to_init", 5),
	MOVE("init_to_rts", 6),
	MOVE("init_to_rtr", 7),
	MOVE("rtr_to_rtr", 8),
	MOVE("rtr_to_rts", 9),
	MOVE("rts_to_rts", 35),
	MOVE("rts_to_rts_with_rtr_mask", 10),
	MOVE("rts_to_rts_optional_min_rnr_timer", 37),
	MOVE("rts_to_sqd", 11),
	MOVE("rts_to_reset", 12),
	MOVE("rts_to_err", 13),
	MOVE("rts_to_init", 14),
	MOVE("err_to_rts", 15),
	MOVE("err_to_reset", 16),
	MOVE("err_to_init", 17),
	MOVE("init_missing_access_flags", 18),
	MOVE("init_missing_port", 19),
	MOVE("init_missing_pkey_index", 20),
	MOVE("init_extra_sq_psn", 21),
	MOVE("rtr_missing_av", 22),
	MOVE("rtr_missing_dest_qpn", 23),
	MOVE("rtr_missing_min_rnr_timer", 24),
	MOVE("rtr_missing_path_mtu", 25),
	MOVE("rtr_extra_sq_psn", 26),
	MOVE("rts_missing_sq_psn", 27),
	MOVE("rts_missing_timeout", 28),
	MOVE("rts_missing_max_rd_atomic", 29),
	MOVE("rts_extra_dest_qpn", 30),
	MOVE("init_port_2", 31),
	MOVE("rtr_path_mtu_0", 32),
	MOVE("rts_attr_only_timeout", 33),
	MOVE("rts_attr_only_min_rnr_timer", 36),
	MOVE("rts_retry_cnt_9", 34),
	{ "qp_create_ex_create_flags_0", create_flags_case, 0, 0 },
	{ "qp_create_ex_create_flags_scatter_fcs", create_flags_case, IBV_QP_CREATE_SCATTER_FCS, 0 },
	{ "qp_post_send_in_reset", post_in_state_case, IBV_QPS_RESET, 0 },
	{ "qp_post_send_in_init", post_in_state_case, IBV_QPS_INIT, 0 },
	{ "qp_post_send_in_rtr", post_in_state_case, IBV_QPS_RTR, 0 },
	{ "qp_post_send_in_err", post_in_state_case, IBV_QPS_ERR, 0 },
	{ "qp_post_recv_in_reset", post_in_state_case, IBV_QPS_RESET, 1 },
	{ "qp_post_recv_in_err", post_in_state_case, IBV_QPS_ERR, 1 },
	{ NULL, NULL, 0, 0 },
};
