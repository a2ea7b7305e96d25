// SPDX-License-Identifier: MIT
/*
 * RC sends and receives: zero-length and inline sends, immediate data, receive not posted
 * (RNR with rnr_retry 0, and a late receive with rnr_retry 7), a receive too small, and a
 * send CQ too small for the completions (overrun).
 */
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <string.h>

#include "conf.h"

enum send_kind { S_PLAIN, S_IMM, S_INLINE, S_ZERO, S_TWO_SGE, S_RECV_SMALL, S_RECV_EXACT,
		 S_RNR0, S_RNR0_WRITE_IMM, S_RNR_LATE };

static void send_case(const struct conf_case *c)
{
	enum send_kind k = (enum send_kind)c->a;
	struct qp_params pa;
	struct rc_fix f;
	struct ibv_sge sge[2];
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED,
				  .imm_data = htonl(IMM_VALUE) }, *bad;
	uint32_t recv_len = BUF_SIZE;
	bool recv = true;
	int err;

	qp_params_default(&pa, IBV_QPT_RC);
	if (k == S_RNR0 || k == S_RNR0_WRITE_IMM)
		pa.rnr_retry = 0;
	fix_setup(&f, &pa, NULL, ACCESS_ALL, false);
	sge[0] = (struct ibv_sge){ .addr = (uintptr_t)f.lbuf, .length = 64, .lkey = f.lmr->lkey };
	sge[1] = (struct ibv_sge){ .addr = (uintptr_t)f.lbuf + 1024, .length = 32,
				   .lkey = f.lmr->lkey };
	switch (k) {
	case S_IMM: wr.opcode = IBV_WR_SEND_WITH_IMM; break;
	case S_INLINE: wr.send_flags |= IBV_SEND_INLINE; break;
	case S_ZERO: wr.num_sge = 0; break;
	case S_TWO_SGE: wr.num_sge = 2; break;
	case S_RECV_SMALL: recv_len = 16; break;
	case S_RECV_EXACT: recv_len = 64; break;
	case S_RNR0: case S_RNR_LATE: recv = false; break;
	case S_RNR0_WRITE_IMM:
		recv = false;
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.wr.rdma.remote_addr = (uintptr_t)f.rbuf;
		wr.wr.rdma.rkey = f.rmr->rkey;
		break;
	default: break;
	}
	if (recv && post_recv(f.e.b.qp, f.recvbuf, recv_len, f.recvmr->lkey))
		setup_failed("post_recv", 1);
	err = ibv_post_send(f.e.a.qp, &wr, &bad);
	if (k == S_RNR_LATE) {
		/* the requester meets an empty queue, then the receive arrives: retried, done */
		sleep_ms(conf_opts.quiet_ms / 3);
		if (post_recv(f.e.b.qp, f.recvbuf, recv_len, f.recvmr->lkey))
			setup_failed("post_recv", 1);
		recv = true;
	}
	fix_report(&f, err, recv, recv && k != S_RECV_SMALL);
	if (recv && k != S_RNR_LATE) {
		uint32_t want = k == S_ZERO ? 0 : k == S_TWO_SGE ? 96 : 64;

		out("data=%s", data_verdict(f.recvbuf, BUF_SIZE, 0, want > recv_len ? 0 : want,
					    LFILL, 0));
	}
	out_end();
}

/* A send CQ of the smallest size the device grants, and more signaled WRs than it holds. */
static void cq_overrun_case(const struct conf_case *c)
{
	struct qp_params pa;
	struct rc_fix f;
	struct ibv_async_event ev;
	struct ibv_wc wc;
	int posted = 0, polled = 0, extra = c->a, cqe, err = 0;

	qp_params_default(&pa, IBV_QPT_RC);
	pa.cqe = 1;
	fix_setup(&f, &pa, NULL, ACCESS_ALL, false);
	cqe = f.e.a.scq->cqe;
	out("cqe_granted_small=%s", cqe <= 32 ? "yes" : "no");
	while (posted < cqe + extra && posted < 32 &&
	       !(err = post_send(f.e.a.qp, IBV_WR_RDMA_WRITE, f.lbuf, 8, f.lmr->lkey,
				 (uintptr_t)f.rbuf, f.rmr->rkey, 0, 0)))
		posted++;
	out("posted=cqe%+d", posted - cqe);
	out_ret("last_post", err);
	sleep_ms(conf_opts.quiet_ms);
	while (polled < 64 && ibv_poll_cq(f.e.a.scq, 1, &wc) == 1)
		polled++;
	out("polled=cqe%+d", polled - cqe);
	/* The async event, if any, without blocking: the fd is made non-blocking. */
	{
		int fl = fcntl(f.e.ctx->async_fd, F_GETFL);

		fcntl(f.e.ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	}
	if (!ibv_get_async_event(f.e.ctx, &ev)) {
		out("async=%s", ev.event_type == IBV_EVENT_CQ_ERR ? "CQ_ERR" :
		    ibv_event_type_str(ev.event_type));
		ibv_ack_async_event(&ev);
	} else {
		out("async=none");
	}
	out_state("qpa", f.e.a.qp);
	out_state("qpb", f.e.b.qp);
	out_end();
}

/*
 * Both QPs in ERR after a refused WRITE, then each back through RESET to RTS (the responder
 * first if c->a is 0, else the requester first), then a SEND: a connection is made again.
 * b had a receive posted, which the error flushed.
 */
static void restate_case(const struct conf_case *c)
{
	struct qp_params p;
	struct rc_fix f;
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };
	struct ibv_wc wc;
	struct ibv_qp *first, *second;
	uint32_t first_peer, second_peer;
	int err;

	qp_params_default(&p, IBV_QPT_RC);
	fix_setup(&f, &p, &p, ACCESS_ALL, false);
	if (post_recv(f.e.b.qp, f.recvbuf, BUF_SIZE, f.recvmr->lkey) ||
	    post_send(f.e.a.qp, IBV_WR_RDMA_WRITE, f.lbuf, 64, f.lmr->lkey, (uintptr_t)f.rbuf,
		      f.rmr->rkey ^ 0xff, 0, 0) || wait_wc(f.e.a.scq, &wc, conf_opts.wait_ms) != 1)
		setup_failed("refused_write", 1);
	out("first=%s", wc_status_name(wc.status));
	wait_state(f.e.b.qp, IBV_QPS_ERR, true, conf_opts.wait_ms);
	sleep_ms(conf_opts.quiet_ms);	/* the responder's flush, if it makes one */
	out_state("qpa", f.e.a.qp);
	out_state("qpb", f.e.b.qp);
	first = c->a ? f.e.a.qp : f.e.b.qp;
	second = c->a ? f.e.b.qp : f.e.a.qp;
	first_peer = second->qp_num;
	second_peer = first->qp_num;
	if ((err = ibv_modify_qp(first, &reset, IBV_QP_STATE)) || (err = qp_to_init(first, &p, 0, 0)) ||
	    (err = qp_to_rtr(&f.e, first, &p, first_peer, 0, 0)) || (err = qp_to_rts(first, &p, 0, 0)) ||
	    (err = ibv_modify_qp(second, &reset, IBV_QP_STATE)) ||
	    (err = qp_to_init(second, &p, 0, 0)) ||
	    (err = qp_to_rtr(&f.e, second, &p, second_peer, 0, 0)) ||
	    (err = qp_to_rts(second, &p, 0, 0)))
		setup_failed("restate", err);
	/* What is left of the error's completions after RESET (libmlx5 removes a QP's
	 * completions from its CQs on RESET), drained before the new exchange. */
	{
		int left_a = 0, left_b = 0;

		while (ibv_poll_cq(f.e.a.scq, 1, &wc) == 1)
			left_a++;
		while (ibv_poll_cq(f.e.b.rcq, 1, &wc) == 1)
			left_b++;
		out("left_after_reset=%d/%d", left_a, left_b);
	}
	if (post_recv(f.e.b.qp, f.recvbuf, BUF_SIZE, f.recvmr->lkey))
		setup_failed("post_recv", 1);
	err = post_send(f.e.a.qp, IBV_WR_SEND, f.lbuf, 64, f.lmr->lkey, 0, 0, 0, 0);
	fix_report(&f, err, true, true);
	out_end();
}

const struct conf_case conf_cases_rc[] = {
	{ "rc_restate_responder_first_then_send", restate_case, 0, 0 },
	{ "rc_restate_requester_first_then_send", restate_case, 1, 0 },
	{ "send_ok", send_case, S_PLAIN, 0 },
	{ "send_imm", send_case, S_IMM, 0 },
	{ "send_inline", send_case, S_INLINE, 0 },
	{ "send_zero_len", send_case, S_ZERO, 0 },
	{ "send_two_sges", send_case, S_TWO_SGE, 0 },
	{ "send_recv_exact_size", send_case, S_RECV_EXACT, 0 },
	{ "send_recv_too_small", send_case, S_RECV_SMALL, 0 },
	{ "rnr_send_retry0", send_case, S_RNR0, 0 },
	{ "rnr_write_imm_retry0", send_case, S_RNR0_WRITE_IMM, 0 },
	{ "rnr_send_late_recv_retry7", send_case, S_RNR_LATE, 0 },
	{ "cq_overrun_by_one", cq_overrun_case, 1, 0 },
	{ "cq_overrun_by_four", cq_overrun_case, 4, 0 },
	{ NULL, NULL, 0, 0 },
};
