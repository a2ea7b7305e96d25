// SPDX-License-Identifier: MIT
/*
 * Remote access: one WRITE, READ, CMP_SWP, FETCH_ADD or WRITE_WITH_IMM from a to b's
 * region, allowed or violating one rule (bad rkey, out of bounds, region without the
 * right, responder QP without the right, region of another PD, region deregistered),
 * plus zero-length operations and misaligned atomics, and on-demand paging: the target an
 * ODP region, reachable or on a page made PROT_NONE (which no NIC can fault in). Reports
 * both completions, both QP states and whether the target changed.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "conf.h"

enum viol { V_OK, V_BAD_RKEY, V_OOB, V_MR_RIGHT, V_QP_RIGHT, V_OTHER_PD, V_DEREG, V_ZERO,
	    V_ZERO_BAD_RKEY, V_ZERO_QP_RIGHT, V_MISALIGNED, V_ODP, V_ODP_PROT_NONE };

#define OLD_VALUE 0x2222222222222222ull

static bool is_atomic(enum ibv_wr_opcode op)
{
	return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

static int right_of(enum ibv_wr_opcode op)
{
	if (op == IBV_WR_RDMA_READ)
		return IBV_ACCESS_REMOTE_READ;
	return is_atomic(op) ? IBV_ACCESS_REMOTE_ATOMIC : IBV_ACCESS_REMOTE_WRITE;
}

static void access_case(const struct conf_case *c)
{
	enum ibv_wr_opcode op = (enum ibv_wr_opcode)c->a;
	enum viol v = (enum viol)c->b;
	struct qp_params pa, pb;
	struct rc_fix f;
	uint32_t len = is_atomic(op) ? 8 : 64, rkey;
	size_t off = 256;
	int raccess = ACCESS_ALL, err;
	uint64_t want;

	qp_params_default(&pa, IBV_QPT_RC);
	qp_params_default(&pb, IBV_QPT_RC);
	if (v == V_QP_RIGHT || v == V_ZERO_QP_RIGHT)
		pb.access &= ~right_of(op);
	if (v == V_MR_RIGHT)
		raccess &= ~right_of(op);
	if (v == V_ODP || v == V_ODP_PROT_NONE)
		raccess |= IBV_ACCESS_ON_DEMAND;
	if (v == V_ZERO || v == V_ZERO_BAD_RKEY || v == V_ZERO_QP_RIGHT)
		len = 0;
	fix_setup(&f, &pa, &pb, raccess, v == V_OTHER_PD);
	rkey = f.rmr->rkey;
	if (v == V_BAD_RKEY || v == V_ZERO_BAD_RKEY)
		rkey ^= 0xff;	/* the key's low byte: rxe's key, softrdma's tag */
	if (v == V_OOB)
		off = is_atomic(op) ? BUF_SIZE : BUF_SIZE - len / 2;
	if (v == V_MISALIGNED)
		off += 4;
	if (v == V_DEREG && ibv_dereg_mr(f.rmr))
		setup_failed("dereg_mr", 1);
	/* The region is rbuf's first page, page-aligned: all of it unreachable. */
	if (v == V_ODP_PROT_NONE && mprotect(f.rbuf, BUF_SIZE, PROT_NONE))
		setup_failed("mprotect", errno);
	if (post_recv(f.e.b.qp, f.recvbuf, BUF_SIZE, f.recvmr->lkey))
		setup_failed("post_recv", 1);
	err = post_send(f.e.a.qp, op, len ? f.lbuf : NULL, len, f.lmr->lkey,
			(uintptr_t)f.rbuf + off, rkey, OLD_VALUE, 0x3333333333333333ull);
	fix_report(&f, err, true, op == IBV_WR_RDMA_WRITE_WITH_IMM);
	if (v == V_ODP_PROT_NONE && mprotect(f.rbuf, BUF_SIZE, PROT_READ | PROT_WRITE))
		setup_failed("mprotect", errno);
	if (op == IBV_WR_RDMA_READ) {
		out("data=%s", data_verdict(f.lbuf, BUF_SIZE, 0, len, RFILL, LFILL));
	} else if (!is_atomic(op)) {
		out("data=%s", data_verdict(f.rbuf, 2 * BUF_SIZE, off, len, LFILL, RFILL));
	} else {
		uint64_t got, result;

		want = op == IBV_WR_ATOMIC_CMP_AND_SWP ? 0x3333333333333333ull :
			OLD_VALUE + OLD_VALUE;
		memcpy(&got, f.rbuf + (off & ~(size_t)7), 8);
		memcpy(&result, f.lbuf, 8);
		out("data=%s", got == want && result == OLD_VALUE ? "placed" :
		    got == OLD_VALUE && result == 0x1111111111111111ull ? "untouched" : "changed");
	}
	out_end();
}

#define W IBV_WR_RDMA_WRITE
#define R IBV_WR_RDMA_READ
#define CS IBV_WR_ATOMIC_CMP_AND_SWP
#define FA IBV_WR_ATOMIC_FETCH_AND_ADD
#define WI IBV_WR_RDMA_WRITE_WITH_IMM
#define MATRIX(name, op)							\
	{ name "_ok", access_case, op, V_OK },					\
	{ name "_bad_rkey", access_case, op, V_BAD_RKEY },			\
	{ name "_out_of_bounds", access_case, op, V_OOB },			\
	{ name "_mr_lacks_right", access_case, op, V_MR_RIGHT },		\
	{ name "_qp_lacks_right", access_case, op, V_QP_RIGHT },		\
	{ name "_other_pd", access_case, op, V_OTHER_PD },			\
	{ name "_deregistered", access_case, op, V_DEREG }

const struct conf_case conf_cases_access[] = {
	MATRIX("write", W),
	MATRIX("read", R),
	MATRIX("cmp_swp", CS),
	MATRIX("fetch_add", FA),
	MATRIX("write_imm", WI),
	{ "write_zero_len", access_case, W, V_ZERO },
	{ "write_zero_len_bad_rkey", access_case, W, V_ZERO_BAD_RKEY },
	{ "write_zero_len_qp_lacks_right", access_case, W, V_ZERO_QP_RIGHT },
	{ "read_zero_len", access_case, R, V_ZERO },
	{ "read_zero_len_bad_rkey", access_case, R, V_ZERO_BAD_RKEY },
	{ "read_zero_len_qp_lacks_right", access_case, R, V_ZERO_QP_RIGHT },
	{ "write_imm_zero_len", access_case, WI, V_ZERO },
	{ "write_imm_zero_len_bad_rkey", access_case, WI, V_ZERO_BAD_RKEY },
	{ "cmp_swp_misaligned", access_case, CS, V_MISALIGNED },
	{ "fetch_add_misaligned", access_case, FA, V_MISALIGNED },
	{ "write_odp", access_case, W, V_ODP },
	{ "write_odp_prot_none", access_case, W, V_ODP_PROT_NONE },
	{ "read_odp_prot_none", access_case, R, V_ODP_PROT_NONE },
	{ "fetch_add_odp_prot_none", access_case, FA, V_ODP_PROT_NONE },
	{ NULL, NULL, 0, 0 },
};
