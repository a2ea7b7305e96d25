// SPDX-License-Identifier: MIT
/*
 * Memory windows: allocation, binding type 1 (ibv_bind_mw) and type 2 (IBV_WR_BIND_MW),
 * a WRITE or READ inside and outside the window, a bind refused, local invalidation and
 * Send with Invalidate; a type 2 bind whose new key differs above the consumer's 8 bits.
 * The window is [1024, 2048) of b's 4 KiB region, bound on b's QP.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "conf.h"

#define WIN_OFF 1024
#define WIN_LEN 1024

enum mw_kind { M_ALLOC1, M_ALLOC2, M_W1_IN, M_W1_OUT, M_W1_READ_NO_RIGHT, M_W1_NO_MW_BIND,
	       M_W2_IN, M_W2_OUT, M_W2_LOCAL_INV, M_W2_SEND_INV, M_W1_UNBOUND };

static void mw_case(const struct conf_case *c)
{
	enum mw_kind k = (enum mw_kind)c->a;
	bool type2 = k == M_ALLOC2 || k >= M_W2_IN;
	struct qp_params pa, pb;
	struct rc_fix f;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	uint32_t rkey;
	size_t off = WIN_OFF + 64;
	int err, got;

	qp_params_default(&pa, IBV_QPT_RC);
	qp_params_default(&pb, IBV_QPT_RC);
	pb.access |= IBV_ACCESS_MW_BIND;
	fix_setup(&f, &pa, &pb, k == M_W1_NO_MW_BIND ? ACCESS_ALL : ACCESS_ALL | IBV_ACCESS_MW_BIND,
		  false);
	mw = ibv_alloc_mw(f.e.pd, type2 ? IBV_MW_TYPE_2 : IBV_MW_TYPE_1);
	if (k == M_ALLOC1 || k == M_ALLOC2) {
		out_ret("alloc", mw ? 0 : errno);
		out_end();
	}
	if (!mw)
		setup_failed("alloc_mw", errno);
	rkey = mw->rkey;
	if (k != M_W1_UNBOUND) {
		struct ibv_mw_bind_info info = {
			.mr = f.rmr, .addr = (uintptr_t)f.rbuf + WIN_OFF, .length = WIN_LEN,
			.mw_access_flags = IBV_ACCESS_REMOTE_WRITE,
		};

		if (type2) {
			struct ibv_send_wr wr = { .wr_id = 3, .opcode = IBV_WR_BIND_MW,
						  .send_flags = IBV_SEND_SIGNALED }, *bad;

			rkey = ibv_inc_rkey(mw->rkey);
			wr.bind_mw.mw = mw;
			wr.bind_mw.rkey = rkey;
			wr.bind_mw.bind_info = info;
			err = ibv_post_send(f.e.b.qp, &wr, &bad);
		} else {
			struct ibv_mw_bind bind = { .wr_id = 3, .send_flags = IBV_SEND_SIGNALED,
						    .bind_info = info };

			err = ibv_bind_mw(f.e.b.qp, mw, &bind);
			rkey = mw->rkey;
		}
		out_ret("bind", err);
		got = err ? 0 : wait_wc(f.e.b.scq, &wc, conf_opts.wait_ms);
		if (!err)
			out_wc("bind_wc", got, &wc);
		if (err || got != 1 || wc.status != IBV_WC_SUCCESS) {
			wait_state(f.e.b.qp, IBV_QPS_RTS, false, conf_opts.quiet_ms);
			out_state("qpb", f.e.b.qp);
			out_end();
		}
	}
	if (k == M_W2_LOCAL_INV) {
		struct ibv_send_wr wr = { .wr_id = 4, .opcode = IBV_WR_LOCAL_INV,
					  .send_flags = IBV_SEND_SIGNALED,
					  .invalidate_rkey = rkey }, *bad;

		err = ibv_post_send(f.e.b.qp, &wr, &bad);
		got = err ? 0 : wait_wc(f.e.b.scq, &wc, conf_opts.wait_ms);
		out_ret("inv_post", err);
		out_wc("inv_wc", got, &wc);
	}
	if (k == M_W2_SEND_INV) {
		struct ibv_sge sge = { .addr = (uintptr_t)f.lbuf, .length = 64, .lkey = f.lmr->lkey };
		struct ibv_send_wr wr = { .wr_id = 5, .opcode = IBV_WR_SEND_WITH_INV, .sg_list = &sge,
					  .num_sge = 1, .send_flags = IBV_SEND_SIGNALED,
					  .invalidate_rkey = rkey }, *bad;

		if (post_recv(f.e.b.qp, f.recvbuf, BUF_SIZE, f.recvmr->lkey))
			setup_failed("post_recv", 1);
		err = ibv_post_send(f.e.a.qp, &wr, &bad);
		out_ret("sendinv_post", err);
		got = err ? 0 : wait_wc(f.e.a.scq, &wc, conf_opts.wait_ms);
		out_wc("sendinv_req", got, &wc);
		got = wait_wc(f.e.b.rcq, &wc, conf_opts.wait_ms);
		out_wc("sendinv_resp", got, &wc);
		if (got == 1 && wc.status == IBV_WC_SUCCESS && (wc.wc_flags & IBV_WC_WITH_INV))
			out("invalidated=%s", wc.invalidated_rkey == rkey ? "window" : "other");
	}
	if (k == M_W1_OUT || k == M_W2_OUT)
		off = WIN_OFF + WIN_LEN + 64;
	if (k == M_W1_READ_NO_RIGHT)
		err = post_send(f.e.a.qp, IBV_WR_RDMA_READ, f.lbuf, 64, f.lmr->lkey,
				(uintptr_t)f.rbuf + off, rkey, 0, 0);
	else
		err = post_send(f.e.a.qp, IBV_WR_RDMA_WRITE, f.lbuf, 64, f.lmr->lkey,
				(uintptr_t)f.rbuf + off, rkey, 0, 0);
	fix_report(&f, err, false, false);
	if (k == M_W1_READ_NO_RIGHT)
		out("data=%s", data_verdict(f.lbuf, BUF_SIZE, 0, 64, RFILL, LFILL));
	else
		out("data=%s", data_verdict(f.rbuf, 2 * BUF_SIZE, off, 64, LFILL, RFILL));
	out_end();
}

/*
 * A type 2 bind asking for a key that differs from the window's above the 8 bits the
 * consumer owns: window_key= a WRITE under the window's key with the asked low 8 bits,
 * asked_key= one under the key as asked.
 */
static void mw_key_bits_case(const struct conf_case *c)
{
	struct qp_params pb;
	struct rc_fix f;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	struct ibv_send_wr wr = { .wr_id = 3, .opcode = IBV_WR_BIND_MW,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	uint32_t asked, key;
	int err, got;

	(void)c;
	qp_params_default(&pb, IBV_QPT_RC);
	pb.access |= IBV_ACCESS_MW_BIND;
	fix_setup(&f, NULL, &pb, ACCESS_ALL | IBV_ACCESS_MW_BIND, false);
	if (!(mw = ibv_alloc_mw(f.e.pd, IBV_MW_TYPE_2)))
		setup_failed("alloc_mw", errno);
	asked = ibv_inc_rkey(mw->rkey) ^ 0x5a5a0000u;
	key = (mw->rkey & ~0xffu) | (asked & 0xffu);
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = asked;
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = f.rmr, .addr = (uintptr_t)f.rbuf + WIN_OFF, .length = WIN_LEN,
		.mw_access_flags = IBV_ACCESS_REMOTE_WRITE };
	err = ibv_post_send(f.e.b.qp, &wr, &bad);
	out_ret("bind", err);
	got = err ? 0 : wait_wc(f.e.b.scq, &wc, conf_opts.wait_ms);
	out_wc("bind_wc", got, &wc);
	if (got != 1 || wc.status != IBV_WC_SUCCESS)
		out_end();
	err = post_send(f.e.a.qp, IBV_WR_RDMA_WRITE, f.lbuf, 64, f.lmr->lkey,
			(uintptr_t)f.rbuf + WIN_OFF, key, 0, 0);
	got = err ? 0 : wait_wc(f.e.a.scq, &wc, conf_opts.wait_ms);
	out_wc("window_key", got, &wc);
	out("data=%s", data_verdict(f.rbuf, 2 * BUF_SIZE, WIN_OFF, 64, LFILL, RFILL));
	err = post_send(f.e.a.qp, IBV_WR_RDMA_WRITE, f.lbuf, 64, f.lmr->lkey,
			(uintptr_t)f.rbuf + WIN_OFF + 128, asked, 0, 0);
	got = err ? 0 : wait_wc(f.e.a.scq, &wc, conf_opts.wait_ms);
	out_wc("asked_key", got, &wc);
	out_end();
}

const struct conf_case conf_cases_mw[] = {
	{ "mw_alloc_type1", mw_case, M_ALLOC1, 0 },
	{ "mw_alloc_type2", mw_case, M_ALLOC2, 0 },
	{ "mw_type1_unbound_write", mw_case, M_W1_UNBOUND, 0 },
	{ "mw_type1_write_inside", mw_case, M_W1_IN, 0 },
	{ "mw_type1_write_outside", mw_case, M_W1_OUT, 0 },
	{ "mw_type1_read_without_right", mw_case, M_W1_READ_NO_RIGHT, 0 },
	{ "mw_type1_bind_mr_without_mw_bind", mw_case, M_W1_NO_MW_BIND, 0 },
	{ "mw_type2_write_inside", mw_case, M_W2_IN, 0 },
	{ "mw_type2_write_outside", mw_case, M_W2_OUT, 0 },
	{ "mw_type2_local_inv_then_write", mw_case, M_W2_LOCAL_INV, 0 },
	{ "mw_type2_send_inv_then_write", mw_case, M_W2_SEND_INV, 0 },
	{ "mw_type2_bind_key_high_bits", mw_key_bits_case, 0, 0 },
	{ NULL, NULL, 0, 0 },
};
