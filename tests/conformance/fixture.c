// SPDX-License-Identifier: MIT
/* The RC fixture of the operation cases: a connected pair, three buffers, the report. */
#include <string.h>

#include "conf.h"

void fix_setup(struct rc_fix *f, const struct qp_params *pa, const struct qp_params *pb,
	       int raccess, bool other_pd)
{
	env_open(&f->e);
	env_pair(&f->e, pa, pb);
	f->lbuf = buf_alloc(BUF_SIZE);
	f->rbuf = buf_alloc(2 * BUF_SIZE);
	f->recvbuf = buf_alloc(BUF_SIZE);
	memset(f->lbuf, LFILL, BUF_SIZE);
	memset(f->rbuf, RFILL, 2 * BUF_SIZE);
	f->lmr = mr_reg(f->e.pd, f->lbuf, BUF_SIZE, ACCESS_ALL);
	f->rmr = mr_reg(other_pd ? f->e.pd2 : f->e.pd, f->rbuf, BUF_SIZE, raccess);
	f->recvmr = mr_reg(f->e.pd, f->recvbuf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE);
}

void fix_report(struct rc_fix *f, int post_err, bool recv_posted, bool recv_expected)
{
	struct ibv_wc wc;
	int got = 0;
	bool failed;

	out_ret("post", post_err);
	if (!post_err) {
		got = wait_wc(f->e.a.scq, &wc, conf_opts.wait_ms);
		out_wc("req", got, &wc);
	}
	failed = got != 1 || wc.status != IBV_WC_SUCCESS;
	if (failed) {
		/* The requester may still be retrying; the responder learns last, if at all. */
		wait_state(f->e.a.qp, IBV_QPS_RTS, false, conf_opts.quiet_ms);
		wait_state(f->e.b.qp, IBV_QPS_RTS, false, conf_opts.quiet_ms);
	}
	if (recv_posted) {
		if (recv_expected || qp_state(f->e.b.qp) == IBV_QPS_ERR)
			got = wait_wc(f->e.b.rcq, &wc, conf_opts.wait_ms);
		else
			got = wait_wc(f->e.b.rcq, &wc, 0);
		if (got || recv_expected)
			out_wc("resp", got, &wc);
		else
			out("resp=none");
	}
	out_state("qpa", f->e.a.qp);
	out_state("qpb", f->e.b.qp);
}
