// SPDX-License-Identifier: MIT
/*
 * UC and SRQ. UC: a WRITE, WRITE_WITH_IMM or SEND the responder cannot place is dropped
 * (the requester still completes successfully, nothing is written, no receive is taken,
 * both QPs stay RTS). SRQ: receives taken from a shared queue, its limit event, and the
 * calls an SRQ refuses.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "conf.h"

enum uc_kind { UC_WRITE_OK, UC_WRITE_BAD_RKEY, UC_WRITE_QP_RIGHT, UC_WRITE_IMM_BAD_RKEY,
	       UC_SEND_OK, UC_SEND_NO_RECV, UC_SEND_RECV_SMALL, UC_READ };

static void uc_case(const struct conf_case *c)
{
	enum uc_kind k = (enum uc_kind)c->a;
	struct qp_params pa, pb;
	struct rc_fix f;
	struct ibv_wc wc;
	enum ibv_wr_opcode op = IBV_WR_RDMA_WRITE;
	uint32_t rkey, recv_len = BUF_SIZE;
	int err, got;

	qp_params_default(&pa, IBV_QPT_UC);
	qp_params_default(&pb, IBV_QPT_UC);
	if (k == UC_WRITE_QP_RIGHT)
		pb.access &= ~IBV_ACCESS_REMOTE_WRITE;
	fix_setup(&f, &pa, &pb, ACCESS_ALL, false);
	rkey = f.rmr->rkey;
	if (k == UC_WRITE_BAD_RKEY || k == UC_WRITE_IMM_BAD_RKEY)
		rkey ^= 0xff;
	if (k == UC_WRITE_IMM_BAD_RKEY)
		op = IBV_WR_RDMA_WRITE_WITH_IMM;
	if (k == UC_SEND_OK || k == UC_SEND_NO_RECV || k == UC_SEND_RECV_SMALL)
		op = IBV_WR_SEND;
	if (k == UC_READ)
		op = IBV_WR_RDMA_READ;
	if (k == UC_SEND_RECV_SMALL)
		recv_len = 16;
	if (k != UC_SEND_NO_RECV && post_recv(f.e.b.qp, f.recvbuf, recv_len, f.recvmr->lkey))
		setup_failed("post_recv", 1);
	err = post_send(f.e.a.qp, op, f.lbuf, 64, f.lmr->lkey, (uintptr_t)f.rbuf, rkey, 0, 0);
	out_ret("post", err);
	if (!err) {
		got = wait_wc(f.e.a.scq, &wc, conf_opts.wait_ms);
		out_wc("req", got, &wc);
	}
	/* Whatever the responder makes of it has time to show. */
	got = wait_wc(f.e.b.rcq, &wc, k == UC_SEND_OK ? conf_opts.wait_ms : conf_opts.quiet_ms);
	if (got || k == UC_SEND_OK)
		out_wc("resp", got, &wc);
	else
		out("resp=none");
	out_state("qpa", f.e.a.qp);
	out_state("qpb", f.e.b.qp);
	if (op == IBV_WR_SEND)
		out("data=%s", data_verdict(f.recvbuf, BUF_SIZE, 0, 64, LFILL, 0));
	else
		out("data=%s", data_verdict(f.rbuf, 2 * BUF_SIZE, 0, 64, LFILL, RFILL));
	out_end();
}

enum srq_kind { Q_SEND, Q_POST_RECV_ON_QP, Q_LIMIT, Q_DESTROY_BUSY, Q_MAX_WR_0, Q_EMPTY_RNR };

static void srq_case(const struct conf_case *c)
{
	enum srq_kind k = (enum srq_kind)c->a;
	struct ibv_srq_init_attr sattr = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct qp_params pa, pb;
	struct rc_fix f;
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	struct ibv_srq *srq;
	struct conf_env e;
	int err, got;

	if (k == Q_MAX_WR_0) {
		env_open(&e);
		sattr.attr.max_wr = 0;
		errno = 0;
		srq = ibv_create_srq(e.pd, &sattr);
		out_ret("create", srq ? 0 : errno ? errno : -1);
		out_end();
	}
	/* The SRQ must exist before b's QP, so the pair is made here, not by fix_setup(). */
	env_open(&f.e);
	srq = ibv_create_srq(f.e.pd, &sattr);
	if (!srq)
		setup_failed("create_srq", errno);
	qp_params_default(&pa, IBV_QPT_RC);
	qp_params_default(&pb, IBV_QPT_RC);
	pb.srq = srq;
	if (k == Q_EMPTY_RNR)
		pa.rnr_retry = 0;
	env_pair(&f.e, &pa, &pb);
	f.lbuf = buf_alloc(BUF_SIZE);
	f.recvbuf = buf_alloc(BUF_SIZE);
	memset(f.lbuf, LFILL, BUF_SIZE);
	f.lmr = mr_reg(f.e.pd, f.lbuf, BUF_SIZE, ACCESS_ALL);
	f.recvmr = mr_reg(f.e.pd, f.recvbuf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE);
	sge = (struct ibv_sge){ .addr = (uintptr_t)f.recvbuf, .length = BUF_SIZE,
				.lkey = f.recvmr->lkey };
	wr = (struct ibv_recv_wr){ .wr_id = 2, .sg_list = &sge, .num_sge = 1 };
	switch (k) {
	case Q_POST_RECV_ON_QP:
		out_ret("post_recv_qp", ibv_post_recv(f.e.b.qp, &wr, &bad));
		out_end();
	case Q_DESTROY_BUSY:
		out_ret("destroy", ibv_destroy_srq(srq));
		out_end();
	case Q_LIMIT: {
		struct ibv_srq_attr lim = { .srq_limit = 2 };
		struct ibv_async_event ev;
		int fl;

		for (int i = 0; i < 2; i++)
			if (ibv_post_srq_recv(srq, &wr, &bad))
				setup_failed("post_srq_recv", 1);
		out_ret("arm", ibv_modify_srq(srq, &lim, IBV_SRQ_LIMIT));
		err = post_send(f.e.a.qp, IBV_WR_SEND, f.lbuf, 64, f.lmr->lkey, 0, 0, 0, 0);
		got = err ? 0 : wait_wc(f.e.b.rcq, &wc, conf_opts.wait_ms);
		out_wc("resp", got, &wc);
		sleep_ms(conf_opts.quiet_ms);
		fl = fcntl(f.e.ctx->async_fd, F_GETFL);
		fcntl(f.e.ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
		if (!ibv_get_async_event(f.e.ctx, &ev)) {
			out("async=%s", ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED ?
			    "SRQ_LIMIT_REACHED" : ibv_event_type_str(ev.event_type));
			ibv_ack_async_event(&ev);
		} else {
			out("async=none");
		}
		if (!ibv_query_srq(srq, &lim))
			out("limit_after=%u", lim.srq_limit);
		out_end();
	}
	default:
		break;
	}
	if (k == Q_SEND && ibv_post_srq_recv(srq, &wr, &bad))
		setup_failed("post_srq_recv", 1);
	err = post_send(f.e.a.qp, IBV_WR_SEND, f.lbuf, 64, f.lmr->lkey, 0, 0, 0, 0);
	fix_report(&f, err, k == Q_SEND, k == Q_SEND);
	if (k == Q_SEND)
		out("data=%s", data_verdict(f.recvbuf, BUF_SIZE, 0, 64, LFILL, 0));
	out_end();
}

const struct conf_case conf_cases_uc_srq[] = {
	{ "uc_write_ok", uc_case, UC_WRITE_OK, 0 },
	{ "uc_write_bad_rkey", uc_case, UC_WRITE_BAD_RKEY, 0 },
	{ "uc_write_qp_lacks_right", uc_case, UC_WRITE_QP_RIGHT, 0 },
	{ "uc_write_imm_bad_rkey", uc_case, UC_WRITE_IMM_BAD_RKEY, 0 },
	{ "uc_send_ok", uc_case, UC_SEND_OK, 0 },
	{ "uc_send_no_recv", uc_case, UC_SEND_NO_RECV, 0 },
	{ "uc_send_recv_too_small", uc_case, UC_SEND_RECV_SMALL, 0 },
	{ "uc_read", uc_case, UC_READ, 0 },
	{ "srq_send", srq_case, Q_SEND, 0 },
	{ "srq_empty_rnr_retry0", srq_case, Q_EMPTY_RNR, 0 },
	{ "srq_post_recv_on_qp", srq_case, Q_POST_RECV_ON_QP, 0 },
	{ "srq_limit_event", srq_case, Q_LIMIT, 0 },
	{ "srq_destroy_while_qp_uses_it", srq_case, Q_DESTROY_BUSY, 0 },
	{ "srq_create_max_wr_0", srq_case, Q_MAX_WR_0, 0 },
	{ NULL, NULL, 0, 0 },
};
