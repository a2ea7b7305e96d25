// SPDX-License-Identifier: MIT
/*
 * QP state machine and modify_qp validation. See qp_state.h for the contract; this file keeps
 * the facts in tables so they can be checked line by line against the kernel and the IBTA.
 */
#include <errno.h>
#include <stddef.h>

#include "qp_state.h"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

#define QP_STATE_COUNT	(IBV_QPS_ERR + 1)
/* Indexed by enum ibv_qp_type: RC, UC, UD, and XRC's two halves (XRC_SEND, XRC_RECV). */
#define QP_TYPE_SLOTS	(IBV_QPT_XRC_RECV + 1)

struct qp_transition {
	bool	valid;
	int	required[QP_TYPE_SLOTS];	/* attributes the modify must carry */
	int	optional[QP_TYPE_SLOTS];	/* attributes it may carry besides those */
};

/*
 * The sets that recur in the kernel's table, per type. BIND: what puts a QP on a port and
 * partition (RESET -> INIT, INIT -> INIT). RETUNE: what a QP going into RTS, or in it, may
 * change without disturbing traffic in flight (RTR -> RTS, RTS -> RTS, SQD -> RTS).
 */
#define BIND_CONNECTED	(IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define BIND_UD		(IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)
#define BIND		{ [IBV_QPT_RC] = BIND_CONNECTED, [IBV_QPT_UC] = BIND_CONNECTED,	\
			  [IBV_QPT_UD] = BIND_UD, [IBV_QPT_XRC_SEND] = BIND_CONNECTED,	\
			  [IBV_QPT_XRC_RECV] = BIND_CONNECTED }
#define RETUNE_UC	(IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |		\
			 IBV_QP_PATH_MIG_STATE)
/* XRC: the initiator is RC's send half, the target its receive half (with the RNR timer). */
#define RETUNE		{ [IBV_QPT_RC] = RETUNE_UC | IBV_QP_MIN_RNR_TIMER,			\
			  [IBV_QPT_UC] = RETUNE_UC,						\
			  [IBV_QPT_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY,			\
			  [IBV_QPT_XRC_SEND] = RETUNE_UC,					\
			  [IBV_QPT_XRC_RECV] = RETUNE_UC | IBV_QP_MIN_RNR_TIMER }

/*
 * The kernel's qp_state_table (drivers/infiniband/core/verbs.c) for RC, UC, UD and XRC. Every
 * hardware driver and rxe defer to it, so it is what applications are written against.
 * IBV_QP_STATE is implied in every entry; a pair that is not listed is refused.
 */
static const struct qp_transition qp_transitions[QP_STATE_COUNT][QP_STATE_COUNT] = {
	/*
	 * Tearing down takes no attributes and works from anywhere, except that RESET -> ERR
	 * is absent from the kernel's table (a QP in RESET has nothing to flush).
	 */
	[IBV_QPS_RESET][IBV_QPS_RESET]	= { .valid = true },
	[IBV_QPS_INIT][IBV_QPS_RESET]	= { .valid = true },
	[IBV_QPS_INIT][IBV_QPS_ERR]	= { .valid = true },
	[IBV_QPS_RTR][IBV_QPS_RESET]	= { .valid = true },
	[IBV_QPS_RTR][IBV_QPS_ERR]	= { .valid = true },
	[IBV_QPS_RTS][IBV_QPS_RESET]	= { .valid = true },
	[IBV_QPS_RTS][IBV_QPS_ERR]	= { .valid = true },
	[IBV_QPS_SQD][IBV_QPS_RESET]	= { .valid = true },
	[IBV_QPS_SQD][IBV_QPS_ERR]	= { .valid = true },
	[IBV_QPS_SQE][IBV_QPS_RESET]	= { .valid = true },
	[IBV_QPS_SQE][IBV_QPS_ERR]	= { .valid = true },
	[IBV_QPS_ERR][IBV_QPS_RESET]	= { .valid = true },
	[IBV_QPS_ERR][IBV_QPS_ERR]	= { .valid = true },

	/* Bind to a port and partition; connected QPs get their access rights, UD its Q_Key. */
	[IBV_QPS_RESET][IBV_QPS_INIT]	= { .valid = true, .required = BIND },
	[IBV_QPS_INIT][IBV_QPS_INIT]	= { .valid = true, .optional = BIND },

	/* The receive side learns its peer; only RC has responder resources and RNR NAKs. */
	[IBV_QPS_INIT][IBV_QPS_RTR] = {
		.valid = true,
		.required = {
			[IBV_QPT_RC] = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				       IBV_QP_MIN_RNR_TIMER,
			[IBV_QPT_UC] = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				       IBV_QP_RQ_PSN,
			[IBV_QPT_XRC_SEND] = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					     IBV_QP_RQ_PSN,
			[IBV_QPT_XRC_RECV] = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
					     IBV_QP_MIN_RNR_TIMER,
		},
		.optional = {
			[IBV_QPT_RC] = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX,
			[IBV_QPT_UC] = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX,
			[IBV_QPT_UD] = IBV_QP_PKEY_INDEX | IBV_QP_QKEY,
			[IBV_QPT_XRC_SEND] = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
					     IBV_QP_PKEY_INDEX,
			[IBV_QPT_XRC_RECV] = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
					     IBV_QP_PKEY_INDEX,
		},
	},

	/* The send side starts: RC also needs its retransmission and read/atomic budget. */
	[IBV_QPS_RTR][IBV_QPS_RTS] = {
		.valid = true,
		.required = {
			[IBV_QPT_RC] = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				       IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
			[IBV_QPT_UC] = IBV_QP_SQ_PSN,
			[IBV_QPT_UD] = IBV_QP_SQ_PSN,
			[IBV_QPT_XRC_SEND] = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					     IBV_QP_MAX_QP_RD_ATOMIC,
			/* The kernel's "???": a target sends nothing, yet it is asked for these. */
			[IBV_QPT_XRC_RECV] = IBV_QP_TIMEOUT | IBV_QP_SQ_PSN,
		},
		.optional = RETUNE,
	},

	/* A running QP may retune what does not disturb traffic in flight. */
	[IBV_QPS_RTS][IBV_QPS_RTS]	= { .valid = true, .optional = RETUNE },
	[IBV_QPS_RTS][IBV_QPS_SQD] = {
		.valid = true,
		.optional = { [IBV_QPT_RC] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
			      [IBV_QPT_UC] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
			      [IBV_QPT_UD] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
			      [IBV_QPT_XRC_SEND] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
			      [IBV_QPT_XRC_RECV] = IBV_QP_EN_SQD_ASYNC_NOTIFY },
	},

	/* Leaving the drained state: the same retuning as RTS -> RTS. */
	[IBV_QPS_SQD][IBV_QPS_RTS]	= { .valid = true, .optional = RETUNE },
	/* With the send queue drained, even the path and the RC send parameters may change. */
	[IBV_QPS_SQD][IBV_QPS_SQD] = {
		.valid = true,
		.optional = {
			[IBV_QPT_RC] = IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT |
				       IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				       IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC |
				       IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
				       IBV_QP_PKEY_INDEX | IBV_QP_MIN_RNR_TIMER |
				       IBV_QP_PATH_MIG_STATE,
			[IBV_QPT_UC] = IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
				       IBV_QP_PKEY_INDEX | IBV_QP_PATH_MIG_STATE,
			[IBV_QPT_UD] = IBV_QP_PKEY_INDEX | IBV_QP_QKEY,
			[IBV_QPT_XRC_SEND] = IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT |
					     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					     IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_ALT_PATH |
					     IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
					     IBV_QP_PATH_MIG_STATE,
			[IBV_QPT_XRC_RECV] = IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT |
					     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_ALT_PATH |
					     IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
					     IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE,
		},
	},

	/* Recovering from a send queue error (UC and UD reach SQE; RC goes to ERR instead). */
	[IBV_QPS_SQE][IBV_QPS_RTS] = {
		.valid = true,
		.optional = {
			[IBV_QPT_UC] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS,
			[IBV_QPT_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY,
		},
	},
};

static bool qp_state_is_valid(enum ibv_qp_state s)
{
	return (unsigned int)s < QP_STATE_COUNT;
}

static bool qp_type_is_supported(enum ibv_qp_type type)
{
	return type == IBV_QPT_RC || type == IBV_QPT_UC || type == IBV_QPT_UD ||
	       type == IBV_QPT_XRC_SEND || type == IBV_QPT_XRC_RECV;
}

int qp_modify_is_allowed(enum ibv_qp_state cur, enum ibv_qp_state next, enum ibv_qp_type type,
			 int attr_mask)
{
	const struct qp_transition *t;
	int required, optional;

	if (!qp_state_is_valid(cur) || !qp_state_is_valid(next) || !qp_type_is_supported(type))
		return EINVAL;

	/* Without IBV_QP_STATE nothing asked for a move, so a different next is a caller bug. */
	if (!(attr_mask & IBV_QP_STATE) && next != cur)
		return EINVAL;

	/*
	 * A QP leaves RTS on its own (to SQE after a UC/UD send error), so the consumer's idea
	 * of the state can be stale. It may assert the state it believes in only on the ways
	 * into RTS (the table has IBV_QP_CUR_STATE nowhere else), and the kernel refuses the
	 * assertion from RESET, INIT and ERR before it even consults the table.
	 */
	if ((attr_mask & IBV_QP_CUR_STATE) &&
	    cur != IBV_QPS_RTR && cur != IBV_QPS_RTS && cur != IBV_QPS_SQD && cur != IBV_QPS_SQE)
		return EINVAL;

	t = &qp_transitions[cur][next];
	if (!t->valid)
		return EINVAL;

	required = t->required[type];
	optional = t->optional[type];
	if ((attr_mask & required) != required)
		return EINVAL;
	if (attr_mask & ~(required | optional | IBV_QP_STATE))
		return EINVAL;
	return 0;
}

static bool port_is_valid(uint8_t port_num, const struct qp_attr_limits *lim)
{
	return port_num >= 1 && port_num <= lim->phys_port_cnt;
}

/* What the core checks of an address vector before a driver sees it. */
static bool av_is_valid(const struct ibv_ah_attr *ah, const struct qp_attr_limits *lim)
{
	if (!port_is_valid(ah->port_num, lim))
		return false;
	if (lim->grh_required && !ah->is_global)
		return false;
	/* The source GID must exist: the core resolves it from the table. */
	if (ah->is_global && ah->grh.sgid_index >= lim->gid_tbl_len)
		return false;
	return true;
}

static bool alt_path_is_valid(const struct ibv_qp_attr *attr, const struct qp_attr_limits *lim)
{
	/* The core refuses APM on RoCE ports; a device that cannot migrate must refuse it too. */
	if (!lim->alt_path_supported)
		return false;
	/* uverbs insists the alternate port and the alternate AV's port agree. */
	if (!port_is_valid(attr->alt_port_num, lim) ||
	    attr->alt_ah_attr.port_num != attr->alt_port_num)
		return false;
	if (attr->alt_pkey_index >= lim->pkey_tbl_len)
		return false;
	return av_is_valid(&attr->alt_ah_attr, lim);
}

/*
 * Byte-wide attributes whose only constraint is a ceiling: the width of the wire field they
 * are sent in, or a device limit.
 */
struct qp_u8_ceiling {
	int		mask;
	size_t		offset;
	uint32_t	max;
};

#define QP_ATTR_U8(attr, offset)	(((const uint8_t *)(attr))[offset])

int qp_check_attr_values(const struct ibv_qp_attr *attr, int attr_mask,
			 const struct qp_attr_limits *lim)
{
	const struct qp_u8_ceiling ceilings[] = {
		{ IBV_QP_TIMEOUT, offsetof(struct ibv_qp_attr, timeout), QP_TIMEOUT_MAX },
		{ IBV_QP_ALT_PATH, offsetof(struct ibv_qp_attr, alt_timeout), QP_TIMEOUT_MAX },
		{ IBV_QP_RETRY_CNT, offsetof(struct ibv_qp_attr, retry_cnt), QP_RETRY_CNT_MAX },
		{ IBV_QP_RNR_RETRY, offsetof(struct ibv_qp_attr, rnr_retry), QP_RNR_RETRY_MAX },
		{ IBV_QP_MIN_RNR_TIMER, offsetof(struct ibv_qp_attr, min_rnr_timer),
		  QP_RNR_TIMER_MAX },
		{ IBV_QP_MAX_QP_RD_ATOMIC, offsetof(struct ibv_qp_attr, max_rd_atomic),
		  lim->max_qp_init_rd_atom },
		{ IBV_QP_MAX_DEST_RD_ATOMIC, offsetof(struct ibv_qp_attr, max_dest_rd_atomic),
		  lim->max_qp_rd_atom },
	};
	size_t i;

	/* First what the uverbs layer refuses, then what the device (rxe) refuses. */
	if ((attr_mask & IBV_QP_STATE) && !qp_state_is_valid(attr->qp_state))
		return EINVAL;
	if ((attr_mask & IBV_QP_CUR_STATE) && !qp_state_is_valid(attr->cur_qp_state))
		return EINVAL;
	if ((attr_mask & IBV_QP_PORT) && !port_is_valid(attr->port_num, lim))
		return EINVAL;
	if ((attr_mask & IBV_QP_AV) && !av_is_valid(&attr->ah_attr, lim))
		return EINVAL;
	if ((attr_mask & IBV_QP_ALT_PATH) && !alt_path_is_valid(attr, lim))
		return EINVAL;
	if ((attr_mask & IBV_QP_QKEY) && (attr->qkey & QP_QKEY_CONTROLLED))
		return EPERM;

	if ((attr_mask & IBV_QP_ACCESS_FLAGS) &&
	    (attr->qp_access_flags & ~(unsigned int)QP_ACCESS_SUPPORTED))
		return EINVAL;
	if ((attr_mask & IBV_QP_PKEY_INDEX) && attr->pkey_index >= lim->pkey_tbl_len)
		return EINVAL;
	if ((attr_mask & IBV_QP_PATH_MTU) &&
	    (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > lim->max_mtu))
		return EINVAL;
	if ((attr_mask & IBV_QP_DEST_QPN) && (attr->dest_qp_num & ~QP_QPN_MASK))
		return EINVAL;
	if ((attr_mask & IBV_QP_PATH_MIG_STATE) &&
	    (unsigned int)attr->path_mig_state > IBV_MIG_ARMED)
		return EINVAL;

	for (i = 0; i < ARRAY_SIZE(ceilings); i++) {
		if ((attr_mask & ceilings[i].mask) &&
		    QP_ATTR_U8(attr, ceilings[i].offset) > ceilings[i].max)
			return EINVAL;
	}
	return 0;
}

const char *qp_state_name(enum ibv_qp_state s)
{
	static const char *const names[QP_STATE_COUNT] = {
		[IBV_QPS_RESET]	= "RESET",
		[IBV_QPS_INIT]	= "INIT",
		[IBV_QPS_RTR]	= "RTR",
		[IBV_QPS_RTS]	= "RTS",
		[IBV_QPS_SQD]	= "SQD",
		[IBV_QPS_SQE]	= "SQE",
		[IBV_QPS_ERR]	= "ERR",
	};

	return qp_state_is_valid(s) ? names[s] : "UNKNOWN";
}

uint64_t qp_timeout_to_ns(uint8_t timeout)
{
	if (timeout == 0)
		return 0;
	if (timeout > QP_TIMEOUT_MAX)
		timeout = QP_TIMEOUT_MAX;
	/* 4.096 us is 4096 ns, so the whole scale is a shift. */
	return UINT64_C(4096) << timeout;
}

uint64_t qp_rnr_timer_to_ns(uint8_t code)
{
	/* IBTA table 45, in microseconds; every entry is a whole multiple of 10 us. */
	static const uint32_t rnr_timer_us[QP_RNR_TIMER_MAX + 1] = {
		655360,     10,     20,     30,     40,     60,     80,    120,
		   160,    240,    320,    480,    640,    960,   1280,   1920,
		  2560,   3840,   5120,   7680,  10240,  15360,  20480,  30720,
		 40960,  61440,  81920, 122880, 163840, 245760, 327680, 491520,
	};

	if (code > QP_RNR_TIMER_MAX)
		code = QP_RNR_TIMER_MAX;
	return (uint64_t)rnr_timer_us[code] * 1000;
}
