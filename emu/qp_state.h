/* SPDX-License-Identifier: MIT */
/*
 * The IBTA QP state machine and modify_qp attribute validation, as pure functions.
 *
 * ibv_modify_qp(3) promises that a refused modify changes nothing, not even the state, so the
 * provider runs both checks below before it touches the QP and applies the attributes only
 * when both return 0. The rules are the kernel's (ib_modify_qp_is_ok, the uverbs modify_qp
 * checks, rxe_qp_chk_attr): applications are written against what real devices refuse.
 */
#ifndef SOFTRDMA_EMU_QP_STATE_H
#define SOFTRDMA_EMU_QP_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>

/* Widths of the IBTA wire fields these attributes end up in. */
#define QP_PSN_MASK		0xffffffu	/* BTH PSN: 24 bits */
#define QP_QPN_MASK		0xffffffu	/* BTH DestQP: 24 bits */
#define QP_TIMEOUT_MAX		31		/* local ACK timeout exponent: 5 bits */
#define QP_RETRY_CNT_MAX	7		/* 3 bits */
#define QP_RNR_RETRY_MAX	7		/* 3 bits; 7 means retry forever */
#define QP_RNR_TIMER_MAX	31		/* AETH RNR timer code: 5 bits */

/*
 * A Q_Key with the high bit set is a controlled one: current kernels refuse it to user space
 * (EPERM) unless the administrator has enabled privileged Q_Keys.
 */
#define QP_QKEY_CONTROLLED	0x80000000u

/*
 * The qp_access_flags a QP accepts: the remote access rights we enforce, LOCAL_WRITE,
 * MW_BIND and ON_DEMAND (meaningless on a QP, but applications pass them, rdma-core's ODP
 * tests among them, and rxe and mlx5 accept them), and the optional range, which the verbs
 * contract lets a device ignore.
 */
#define QP_ACCESS_SUPPORTED	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |	\
				 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |	\
				 IBV_ACCESS_MW_BIND | IBV_ACCESS_ON_DEMAND |		\
				 IBV_ACCESS_OPTIONAL_RANGE)

/* The device and port properties the value checks compare against (emu/limits.h fills them). */
struct qp_attr_limits {
	uint8_t		phys_port_cnt;		/* ports are numbered 1..phys_port_cnt */
	uint16_t	pkey_tbl_len;		/* pkey_index and alt_pkey_index must be below */
	uint32_t	gid_tbl_len;		/* an AV's grh.sgid_index must be below */
	enum ibv_mtu	max_mtu;		/* the port's; path_mtu may not exceed it */
	uint32_t	max_qp_init_rd_atom;	/* ceiling for max_rd_atomic (we initiate) */
	uint32_t	max_qp_rd_atom;		/* ceiling for max_dest_rd_atomic (we respond) */
	bool		grh_required;		/* every AV must carry a GRH (RoCE-style ports) */
	bool		alt_path_supported;	/* APM; without it IBV_QP_ALT_PATH is refused */
};

/*
 * 0 if a modify from @cur to @next carrying @attr_mask is allowed for a QP of @type, else
 * EINVAL. @cur is the state the modify starts from: attr->cur_qp_state when the mask has
 * IBV_QP_CUR_STATE (the consumer's assertion; the kernel and rxe take it at its word), else
 * the QP's own state. @next is attr->qp_state when the mask has IBV_QP_STATE; a modify without
 * IBV_QP_STATE changes attributes only, so the caller passes next == cur (anything else is
 * refused) and the cur -> cur row of the table decides. Only RC, UC and UD are supported.
 */
int qp_modify_is_allowed(enum ibv_qp_state cur, enum ibv_qp_state next, enum ibv_qp_type type,
			 int attr_mask);

/*
 * Value checks on the attributes @attr_mask names (others are not looked at): 0, EINVAL, or
 * EPERM for a controlled Q_Key, as the kernel answers. PSNs are not refused: the kernel
 * truncates them to 24 bits, so the caller stores sq_psn/rq_psn & QP_PSN_MASK.
 */
int qp_check_attr_values(const struct ibv_qp_attr *attr, int attr_mask,
			 const struct qp_attr_limits *lim);

/* "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR", or "UNKNOWN" for anything else. */
const char *qp_state_name(enum ibv_qp_state s);

/*
 * Local ACK timeout: 4.096 us * 2^timeout. 0 means the timer is disabled (wait forever) and
 * is returned as 0; values above QP_TIMEOUT_MAX are treated as QP_TIMEOUT_MAX.
 */
uint64_t qp_timeout_to_ns(uint8_t timeout);

/*
 * How long a responder asks a requester to back off after an RNR NAK (IBTA table 45):
 * code 1 is 0.01 ms rising to 491.52 ms at 31, and code 0 is the longest, 655.36 ms.
 * Codes above QP_RNR_TIMER_MAX are treated as QP_RNR_TIMER_MAX.
 */
uint64_t qp_rnr_timer_to_ns(uint8_t code);

#endif
