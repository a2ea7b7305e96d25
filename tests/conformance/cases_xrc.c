// SPDX-License-Identifier: MIT
/*
 * XRC's object rules and its two deliveries (docs/semantics.md, "XRC"). rxe has no XRC: its
 * context leaves libibverbs' stub in open_xrcd, so every case there stops at its first step
 * with "xrcd=EOPNOTSUPP", which differences.txt records; on softrdma each goes on as mlx5.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"

/* The case's domain (fd -1, or a file with oflags), or the line ends with why not. */
static struct ibv_xrcd *xrcd_or_end(struct conf_env *e, int fd, int oflags)
{
	struct ibv_xrcd_init_attr attr = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = fd,
		.oflags = oflags,
	};
	struct ibv_xrcd *xrcd;

	errno = 0;
	xrcd = ibv_open_xrcd(e->ctx, &attr);
	out_ret("xrcd", xrcd ? 0 : errno ? errno : -1);
	if (!xrcd)
		out_end();
	return xrcd;
}

static struct ibv_srq *xrc_srq(struct conf_env *e, struct ibv_xrcd *xrcd, struct ibv_cq *cq)
{
	struct ibv_srq_init_attr_ex attr = {
		.attr = { .max_wr = 8, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD |
			     IBV_SRQ_INIT_ATTR_PD | (cq ? IBV_SRQ_INIT_ATTR_CQ : 0),
		.srq_type = IBV_SRQT_XRC,
		.xrcd = xrcd,
		.cq = cq,
		.pd = e->pd,
	};

	errno = 0;
	return ibv_create_srq_ex(e->ctx, &attr);
}

static struct ibv_qp *xrc_qp(struct conf_env *e, enum ibv_qp_type type, struct ibv_xrcd *xrcd,
			     struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex attr = {
		.qp_type = type,
		.send_cq = cq,
		.cap = { .max_send_wr = 8, .max_send_sge = 1 },
		.comp_mask = xrcd ? IBV_QP_INIT_ATTR_XRCD : IBV_QP_INIT_ATTR_PD,
		.xrcd = xrcd,
		.pd = e->pd,
	};

	errno = 0;
	return ibv_create_qp_ex(e->ctx, &attr);
}

static int created(void *obj)
{
	return obj ? 0 : errno ? errno : -1;
}

enum xrc_kind {
	X_OPEN_PRIVATE, X_OPEN_FILE_RULES, X_CLOSE_BUSY, X_SRQ_NEEDS_CQ, X_TGT_NEEDS_XRCD,
	X_INI_NO_RECV_CQ, X_OPEN_QP_UNKNOWN, X_SEND, X_WRONG_SRQN,
};

/* What a file names: no domain without O_CREAT, none twice with O_EXCL. */
static _Noreturn void file_rules(struct conf_env *e)
{
	char path[] = "/tmp/softrdma-conf-xrc-XXXXXX";
	struct ibv_xrcd_init_attr attr = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
	};
	struct ibv_xrcd *a, *b;
	int fd = mkstemp(path);

	if (fd < 0)
		setup_failed("mkstemp", errno);
	unlink(path);
	attr.fd = fd;
	errno = 0;
	out_ret("no_creat", ibv_open_xrcd(e->ctx, &attr) ? 0 : errno);
	attr.oflags = O_CREAT;
	a = ibv_open_xrcd(e->ctx, &attr);
	out_ret("creat", created(a));
	attr.oflags = O_CREAT | O_EXCL;
	errno = 0;
	out_ret("excl", ibv_open_xrcd(e->ctx, &attr) ? 0 : errno);
	attr.oflags = 0;
	b = ibv_open_xrcd(e->ctx, &attr);
	out_ret("again", created(b));
	if (b)
		out_ret("close_b", ibv_close_xrcd(b));
	if (a)
		out_ret("close_a", ibv_close_xrcd(a));
	out_end();
}

/* An initiator to a target over loopback; the target's SRQ has one receive posted. */
static _Noreturn void traffic(struct conf_env *e, struct ibv_xrcd *xrcd, bool wrong_srqn)
{
	struct ibv_cq *icq = ibv_create_cq(e->ctx, 8, NULL, NULL, 0);
	struct ibv_cq *scq = ibv_create_cq(e->ctx, 8, NULL, NULL, 0);
	struct ibv_srq *srq = xrc_srq(e, xrcd, scq);
	struct ibv_qp *tgt = xrc_qp(e, IBV_QPT_XRC_RECV, xrcd, NULL);
	struct ibv_qp *ini = xrc_qp(e, IBV_QPT_XRC_SEND, NULL, icq);
	uint8_t *src = buf_alloc(BUF_SIZE), *dst = buf_alloc(BUF_SIZE);
	struct ibv_mr *smr = mr_reg(e->pd, src, BUF_SIZE, ACCESS_ALL);
	struct ibv_mr *dmr = mr_reg(e->pd, dst, BUF_SIZE, ACCESS_ALL);
	struct ibv_sge rsge = { .addr = (uintptr_t)dst, .length = 64, .lkey = dmr->lkey };
	struct ibv_sge ssge = { .addr = (uintptr_t)src, .length = 64, .lkey = smr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 2, .sg_list = &rsge, .num_sge = 1 }, *rbad;
	struct ibv_send_wr swr = { .wr_id = 1, .sg_list = &ssge, .num_sge = 1,
				   .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *sbad;
	struct qp_params tp, ip;
	struct ibv_wc wc;
	uint32_t srqn;
	int got;

	if (!icq || !scq || !srq || !tgt || !ini)
		setup_failed("xrc objects", errno);
	if (ibv_get_srq_num(srq, &srqn) || ibv_post_srq_recv(srq, &rwr, &rbad))
		setup_failed("srq", errno);
	memset(src, LFILL, BUF_SIZE);
	qp_params_default(&tp, IBV_QPT_XRC_RECV);
	qp_params_default(&ip, IBV_QPT_XRC_SEND);
	if (qp_to_init(tgt, &tp, 0, 0) || qp_to_rtr(e, tgt, &tp, ini->qp_num, 0, 0) ||
	    qp_to_init(ini, &ip, 0, 0) || qp_to_rtr(e, ini, &ip, tgt->qp_num, 0, 0) ||
	    qp_to_rts(ini, &ip, 0, 0))
		setup_failed("connect", errno);
	swr.qp_type.xrc.remote_srqn = wrong_srqn ? srqn ^ 0x800000 : srqn;
	out_ret("post", ibv_post_send(ini, &swr, &sbad));
	got = wait_wc(icq, &wc, conf_opts.wait_ms);
	out_wc("req", got, &wc);
	got = wait_wc(scq, &wc, wrong_srqn ? conf_opts.quiet_ms : conf_opts.wait_ms);
	out_wc("srq", got, &wc);
	if (got == 1)
		out("qpn=%s", wc.qp_num == tgt->qp_num ? "target" : "other");
	wait_state(tgt, IBV_QPS_RTR, false, wrong_srqn ? conf_opts.wait_ms : conf_opts.quiet_ms);
	out_state("tgt", tgt);
	out("data=%s", data_verdict(dst, BUF_SIZE, 0, 64, LFILL, 0));
	out_end();
}

static void xrc_case(const struct conf_case *c)
{
	enum xrc_kind k = (enum xrc_kind)c->a;
	struct ibv_cq *cq;
	struct ibv_xrcd *xrcd;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct conf_env e;

	env_open(&e);
	xrcd = xrcd_or_end(&e, -1, 0);
	cq = ibv_create_cq(e.ctx, 8, NULL, NULL, 0);
	if (!cq)
		setup_failed("create_cq", errno);
	switch (k) {
	case X_OPEN_PRIVATE:
		out_ret("close", ibv_close_xrcd(xrcd));
		out_end();
	case X_OPEN_FILE_RULES:
		file_rules(&e);
	case X_CLOSE_BUSY:
		srq = xrc_srq(&e, xrcd, cq);
		out_ret("srq", created(srq));
		out_ret("close", ibv_close_xrcd(xrcd));
		out_ret("destroy_cq", ibv_destroy_cq(cq));
		if (srq)
			out_ret("destroy_srq", ibv_destroy_srq(srq));
		out_ret("close_after", ibv_close_xrcd(xrcd));
		out_end();
	case X_SRQ_NEEDS_CQ:
		out_ret("srq", created(xrc_srq(&e, xrcd, NULL)));
		out_end();
	case X_TGT_NEEDS_XRCD:
		out_ret("tgt", created(xrc_qp(&e, IBV_QPT_XRC_RECV, NULL, NULL)));
		out_end();
	case X_INI_NO_RECV_CQ:
		qp = xrc_qp(&e, IBV_QPT_XRC_SEND, NULL, cq);
		out_ret("ini", created(qp));
		if (qp) {
			struct ibv_recv_wr wr = { .wr_id = 1 }, *bad;

			out("recv_cq=%s", qp->recv_cq ? "set" : "none");
			out_ret("post_recv", ibv_post_recv(qp, &wr, &bad));
		}
		out_end();
	case X_OPEN_QP_UNKNOWN: {
		struct ibv_qp_open_attr attr = {
			.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
				     IBV_QP_OPEN_ATTR_TYPE,
			.qp_num = 0xabcdef, .xrcd = xrcd, .qp_type = IBV_QPT_XRC_RECV,
		};

		errno = 0;
		out_ret("open_qp", ibv_open_qp(e.ctx, &attr) ? 0 : errno);
		out_end();
	}
	case X_SEND:
	case X_WRONG_SRQN:
		traffic(&e, xrcd, k == X_WRONG_SRQN);
	}
	out_end();
}

const struct conf_case conf_cases_xrc[] = {
	{ "xrc_open_private", xrc_case, X_OPEN_PRIVATE, 0 },
	{ "xrc_open_file_rules", xrc_case, X_OPEN_FILE_RULES, 0 },
	{ "xrc_close_busy", xrc_case, X_CLOSE_BUSY, 0 },
	{ "xrc_srq_needs_cq", xrc_case, X_SRQ_NEEDS_CQ, 0 },
	{ "xrc_tgt_needs_xrcd", xrc_case, X_TGT_NEEDS_XRCD, 0 },
	{ "xrc_ini_no_recv_cq", xrc_case, X_INI_NO_RECV_CQ, 0 },
	{ "xrc_open_qp_unknown", xrc_case, X_OPEN_QP_UNKNOWN, 0 },
	{ "xrc_send", xrc_case, X_SEND, 0 },
	{ "xrc_wrong_srqn", xrc_case, X_WRONG_SRQN, 0 },
	{ NULL, NULL, 0, 0 },
};
