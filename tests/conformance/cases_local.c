// SPDX-License-Identifier: MIT
/*
 * Local keys: a requester's SGE or a responder's receive buffer that its lkey does not
 * cover (bad key, out of bounds, region without LOCAL_WRITE, region of another PD).
 */
#include <string.h>

#include "conf.h"

enum where { L_SEND_SRC, L_WRITE_SRC, L_READ_DST, L_ATOMIC_DST, L_RECV };
enum fault { F_BAD_KEY, F_OOB, F_NO_LOCAL_WRITE, F_OTHER_PD };

static void lkey_case(const struct conf_case *c)
{
	enum where w = (enum where)c->a;
	enum fault fl = (enum fault)c->b;
	struct rc_fix f;
	struct ibv_mr *bad;
	uint8_t *buf = buf_alloc(2 * BUF_SIZE);
	uint32_t len = w == L_ATOMIC_DST ? 8 : 64, lkey;
	size_t off = fl == F_OOB ? BUF_SIZE - 8 : 0;
	enum ibv_wr_opcode op;
	bool recv_expected = false;
	int err;

	fix_setup(&f, NULL, NULL, ACCESS_ALL, false);
	memset(buf, LFILL, 2 * BUF_SIZE);
	bad = mr_reg(fl == F_OTHER_PD ? f.e.pd2 : f.e.pd, buf, BUF_SIZE,
		     fl == F_NO_LOCAL_WRITE ? IBV_ACCESS_REMOTE_READ : ACCESS_ALL);
	lkey = fl == F_BAD_KEY ? bad->lkey ^ 0xff : bad->lkey;
	switch (w) {
	case L_SEND_SRC: op = IBV_WR_SEND; break;	/* nothing leaves */
	case L_WRITE_SRC: op = IBV_WR_RDMA_WRITE; break;
	case L_READ_DST: op = IBV_WR_RDMA_READ; break;
	case L_ATOMIC_DST: op = IBV_WR_ATOMIC_FETCH_AND_ADD; break;
	default: op = IBV_WR_SEND; recv_expected = true; break;
	}
	if (w == L_RECV)
		err = post_recv(f.e.b.qp, buf + off, len, lkey);
	else
		err = post_recv(f.e.b.qp, f.recvbuf, BUF_SIZE, f.recvmr->lkey);
	if (err)
		setup_failed("post_recv", err);
	if (w == L_RECV)
		err = post_send(f.e.a.qp, op, f.lbuf, len, f.lmr->lkey, 0, 0, 0, 0);
	else
		err = post_send(f.e.a.qp, op, buf + off, len, lkey, (uintptr_t)f.rbuf, f.rmr->rkey,
				1, 0);
	fix_report(&f, err, true, recv_expected);
	if (w == L_RECV || w == L_READ_DST || w == L_ATOMIC_DST)
		out("data=%s", data_verdict(buf, 2 * BUF_SIZE, 0, 0, 0, LFILL));
	else if (w == L_WRITE_SRC)
		out("data=%s", data_verdict(f.rbuf, 2 * BUF_SIZE, 0, 0, 0, RFILL));
	out_end();
}

const struct conf_case conf_cases_local[] = {
	{ "lkey_send_src_bad_key", lkey_case, L_SEND_SRC, F_BAD_KEY },
	{ "lkey_send_src_out_of_bounds", lkey_case, L_SEND_SRC, F_OOB },
	{ "lkey_send_src_other_pd", lkey_case, L_SEND_SRC, F_OTHER_PD },
	{ "lkey_write_src_bad_key", lkey_case, L_WRITE_SRC, F_BAD_KEY },
	{ "lkey_write_src_other_pd", lkey_case, L_WRITE_SRC, F_OTHER_PD },
	{ "lkey_read_dst_bad_key", lkey_case, L_READ_DST, F_BAD_KEY },
	{ "lkey_read_dst_no_local_write", lkey_case, L_READ_DST, F_NO_LOCAL_WRITE },
	{ "lkey_read_dst_out_of_bounds", lkey_case, L_READ_DST, F_OOB },
	{ "lkey_atomic_dst_bad_key", lkey_case, L_ATOMIC_DST, F_BAD_KEY },
	{ "lkey_atomic_dst_no_local_write", lkey_case, L_ATOMIC_DST, F_NO_LOCAL_WRITE },
	{ "lkey_recv_bad_key", lkey_case, L_RECV, F_BAD_KEY },
	{ "lkey_recv_no_local_write", lkey_case, L_RECV, F_NO_LOCAL_WRITE },
	{ "lkey_recv_out_of_bounds", lkey_case, L_RECV, F_OOB },
	{ "lkey_recv_other_pd", lkey_case, L_RECV, F_OTHER_PD },
	{ NULL, NULL, 0, 0 },
};
