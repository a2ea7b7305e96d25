// SPDX-License-Identifier: MIT
/* The one line each case prints, and the names in it. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"

static char line[1024];
static size_t used;

void out(const char *fmt, ...)
{
	va_list ap;

	if (used + 1 >= sizeof(line))
		return;
	line[used++] = ' ';
	va_start(ap, fmt);
	used += (size_t)vsnprintf(line + used, sizeof(line) - used, fmt, ap);
	va_end(ap);
	if (used >= sizeof(line))
		used = sizeof(line) - 1;
}

_Noreturn void out_end(void)
{
	/* One write, so the runner reads the whole line or nothing. */
	printf("%s\n", line);
	fflush(stdout);
	exit(0);
}

_Noreturn void setup_failed(const char *what, int err)
{
	out("setup_failed=%s:%s", what, errno_name(err));
	out_end();
}

const char *errno_name(int err)
{
	static char num[16];
	const char *n;

	if (!err)
		return "ok";
	n = strerrorname_np(err);
	if (n)
		return n;
	snprintf(num, sizeof(num), "errno%d", err);
	return num;
}

void out_ret(const char *key, int err)
{
	out("%s=%s", key, errno_name(err));
}

const char *wc_status_name(enum ibv_wc_status s)
{
	static const char *const names[] = {
		[IBV_WC_SUCCESS] = "SUCCESS", [IBV_WC_LOC_LEN_ERR] = "LOC_LEN_ERR",
		[IBV_WC_LOC_QP_OP_ERR] = "LOC_QP_OP_ERR", [IBV_WC_LOC_EEC_OP_ERR] = "LOC_EEC_OP_ERR",
		[IBV_WC_LOC_PROT_ERR] = "LOC_PROT_ERR", [IBV_WC_WR_FLUSH_ERR] = "WR_FLUSH_ERR",
		[IBV_WC_MW_BIND_ERR] = "MW_BIND_ERR", [IBV_WC_BAD_RESP_ERR] = "BAD_RESP_ERR",
		[IBV_WC_LOC_ACCESS_ERR] = "LOC_ACCESS_ERR", [IBV_WC_REM_INV_REQ_ERR] = "REM_INV_REQ_ERR",
		[IBV_WC_REM_ACCESS_ERR] = "REM_ACCESS_ERR", [IBV_WC_REM_OP_ERR] = "REM_OP_ERR",
		[IBV_WC_RETRY_EXC_ERR] = "RETRY_EXC_ERR", [IBV_WC_RNR_RETRY_EXC_ERR] = "RNR_RETRY_EXC_ERR",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "LOC_RDD_VIOL_ERR",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "REM_INV_RD_REQ_ERR", [IBV_WC_REM_ABORT_ERR] = "REM_ABORT_ERR",
		[IBV_WC_INV_EECN_ERR] = "INV_EECN_ERR", [IBV_WC_INV_EEC_STATE_ERR] = "INV_EEC_STATE_ERR",
		[IBV_WC_FATAL_ERR] = "FATAL_ERR", [IBV_WC_RESP_TIMEOUT_ERR] = "RESP_TIMEOUT_ERR",
		[IBV_WC_GENERAL_ERR] = "GENERAL_ERR", [IBV_WC_TM_ERR] = "TM_ERR",
		[IBV_WC_TM_RNDV_INCOMPLETE] = "TM_RNDV_INCOMPLETE",
	};

	return (unsigned int)s < sizeof(names) / sizeof(names[0]) && names[s] ? names[s] : "UNKNOWN";
}

static const char *wc_opcode_name(enum ibv_wc_opcode op)
{
	switch (op) {
	case IBV_WC_SEND: return "SEND";
	case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
	case IBV_WC_RDMA_READ: return "RDMA_READ";
	case IBV_WC_COMP_SWAP: return "COMP_SWAP";
	case IBV_WC_FETCH_ADD: return "FETCH_ADD";
	case IBV_WC_BIND_MW: return "BIND_MW";
	case IBV_WC_LOCAL_INV: return "LOCAL_INV";
	case IBV_WC_RECV: return "RECV";
	case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
	default: return "OTHER";
	}
}

/*
 * The vendor-neutral fields: the status; on success also the opcode, byte_len and, for a
 * receive, the immediate/invalidate flags with the immediate's value (an error completion's other fields are
 * undefined, ibv_poll_cq(3)).
 */
void out_wc(const char *key, int got, const struct ibv_wc *wc)
{
	bool recv;

	if (got < 0) {
		out("%s=poll_failed", key);
		return;
	}
	if (!got) {
		out("%s=timeout", key);
		return;
	}
	if (wc->status != IBV_WC_SUCCESS) {
		out("%s=%s", key, wc_status_name(wc->status));
		return;
	}
	/* The flags say something only for receives; rxe sets WITH_IMM on sends too. */
	recv = wc->opcode & IBV_WC_RECV;
	out("%s=SUCCESS/%s/len=%u%s%s", key, wc_opcode_name(wc->opcode), wc->byte_len,
	    recv && wc->wc_flags & IBV_WC_WITH_IMM ?
		    (ntohl(wc->imm_data) == IMM_VALUE ? "/imm" : "/imm=other") : "",
	    recv && wc->wc_flags & IBV_WC_WITH_INV ? "/inv" : "");
}

const char *qp_state_name(int s)
{
	static const char *const names[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };

	return (unsigned int)s < sizeof(names) / sizeof(names[0]) ? names[s] : "UNKNOWN";
}

void out_state(const char *key, struct ibv_qp *qp)
{
	out("%s=%s", key, qp_state_name(qp_state(qp)));
}

const char *data_verdict(const uint8_t *buf, size_t n, size_t off, size_t len, uint8_t want,
			 uint8_t fill)
{
	bool untouched = true, placed = true;

	for (size_t i = 0; i < n; i++) {
		bool inside = i >= off && i < off + len;

		if (buf[i] != fill)
			untouched = false;
		if (buf[i] != (inside ? want : fill))
			placed = false;
	}
	return untouched ? "untouched" : placed ? "placed" : "changed";
}
