// SPDX-License-Identifier: MIT
/*
 * Unit tests for emu/qp_state.c. The expected transitions are written out again here, from
 * ibv_modify_qp(3) for the RESET -> INIT -> RTR -> RTS path and from the kernel's
 * qp_state_table for the rest, so a slip in the implementation's table cannot hide itself.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "emu/qp_state.h"
#include "case_table.h"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

static const enum ibv_qp_type qp_types[] = {
	IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_XRC_SEND, IBV_QPT_XRC_RECV,
};

/* Masks besides IBV_QP_STATE; a (cur, next, type) absent from the list is illegal. */
struct transition_spec {
	enum ibv_qp_state	cur;
	enum ibv_qp_state	next;
	enum ibv_qp_type	type;
	int			required;
	int			optional;
};

#define RC	IBV_QPT_RC
#define UC	IBV_QPT_UC
#define UD	IBV_QPT_UD
#define INI	IBV_QPT_XRC_SEND
#define TGT	IBV_QPT_XRC_RECV

/* What RESET -> INIT sets and INIT -> INIT may change again. */
#define CONNECTED_INIT	(IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define DATAGRAM_INIT	(IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)

static const struct transition_spec spec[] = {
	{ IBV_QPS_RESET, IBV_QPS_INIT, RC, CONNECTED_INIT, 0 },
	{ IBV_QPS_RESET, IBV_QPS_INIT, UC, CONNECTED_INIT, 0 },
	{ IBV_QPS_RESET, IBV_QPS_INIT, UD, DATAGRAM_INIT, 0 },

	{ IBV_QPS_INIT, IBV_QPS_INIT, RC, 0, CONNECTED_INIT },
	{ IBV_QPS_INIT, IBV_QPS_INIT, UC, 0, CONNECTED_INIT },
	{ IBV_QPS_INIT, IBV_QPS_INIT, UD, 0, DATAGRAM_INIT },

	{ IBV_QPS_INIT, IBV_QPS_RTR, RC,
	  IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
	  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
	  IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX },
	{ IBV_QPS_INIT, IBV_QPS_RTR, UC,
	  IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
	  IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX },
	{ IBV_QPS_INIT, IBV_QPS_RTR, UD, 0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY },

	{ IBV_QPS_RTR, IBV_QPS_RTS, RC,
	  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
	  IBV_QP_TIMEOUT,
	  IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |
	  IBV_QP_PATH_MIG_STATE },
	{ IBV_QPS_RTR, IBV_QPS_RTS, UC, IBV_QP_SQ_PSN,
	  IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE },
	{ IBV_QPS_RTR, IBV_QPS_RTS, UD, IBV_QP_SQ_PSN, IBV_QP_CUR_STATE | IBV_QP_QKEY },

	{ IBV_QPS_RTS, IBV_QPS_RTS, RC, 0,
	  IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE |
	  IBV_QP_MIN_RNR_TIMER },
	{ IBV_QPS_RTS, IBV_QPS_RTS, UC, 0,
	  IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE },
	{ IBV_QPS_RTS, IBV_QPS_RTS, UD, 0, IBV_QP_CUR_STATE | IBV_QP_QKEY },

	{ IBV_QPS_RTS, IBV_QPS_SQD, RC, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY },
	{ IBV_QPS_RTS, IBV_QPS_SQD, UC, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY },
	{ IBV_QPS_RTS, IBV_QPS_SQD, UD, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY },

	{ IBV_QPS_SQD, IBV_QPS_RTS, RC, 0,
	  IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |
	  IBV_QP_PATH_MIG_STATE },
	{ IBV_QPS_SQD, IBV_QPS_RTS, UC, 0,
	  IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE },
	{ IBV_QPS_SQD, IBV_QPS_RTS, UD, 0, IBV_QP_CUR_STATE | IBV_QP_QKEY },

	{ IBV_QPS_SQD, IBV_QPS_SQD, RC, 0,
	  IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
	  IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_ALT_PATH |
	  IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE },
	{ IBV_QPS_SQD, IBV_QPS_SQD, UC, 0,
	  IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
	  IBV_QP_PATH_MIG_STATE },
	{ IBV_QPS_SQD, IBV_QPS_SQD, UD, 0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY },

	{ IBV_QPS_SQE, IBV_QPS_RTS, RC, 0, 0 },
	{ IBV_QPS_SQE, IBV_QPS_RTS, UC, 0, IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS },
	{ IBV_QPS_SQE, IBV_QPS_RTS, UD, 0, IBV_QP_CUR_STATE | IBV_QP_QKEY },

	/* XRC (the kernel's rows for IB_QPT_XRC_INI and IB_QPT_XRC_TGT). */
	{ IBV_QPS_RESET, IBV_QPS_INIT, INI, CONNECTED_INIT, 0 },
	{ IBV_QPS_RESET, IBV_QPS_INIT, TGT, CONNECTED_INIT, 0 },
	{ IBV_QPS_INIT, IBV_QPS_INIT, INI, 0, CONNECTED_INIT },
	{ IBV_QPS_INIT, IBV_QPS_INIT, TGT, 0, CONNECTED_INIT },
	{ IBV_QPS_INIT, IBV_QPS_RTR, INI,
	  IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
	  IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX },
	{ IBV_QPS_INIT, IBV_QPS_RTR, TGT,
	  IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
	  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
	  IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX },
	{ IBV_QPS_RTR, IBV_QPS_RTS, INI,
	  IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
	  IBV_QP_MAX_QP_RD_ATOMIC,
	  IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE },
	{ IBV_QPS_RTR, IBV_QPS_RTS, TGT, IBV_QP_TIMEOUT | IBV_QP_SQ_PSN,
	  IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |
	  IBV_QP_PATH_MIG_STATE },
	{ IBV_QPS_RTS, IBV_QPS_RTS, INI, 0,
	  IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE },
	{ IBV_QPS_RTS, IBV_QPS_RTS, TGT, 0,
	  IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE |
	  IBV_QP_MIN_RNR_TIMER },
	{ IBV_QPS_RTS, IBV_QPS_SQD, INI, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY },
	{ IBV_QPS_RTS, IBV_QPS_SQD, TGT, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY },
	{ IBV_QPS_SQD, IBV_QPS_RTS, INI, 0,
	  IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE },
	{ IBV_QPS_SQD, IBV_QPS_RTS, TGT, 0,
	  IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |
	  IBV_QP_PATH_MIG_STATE },
	{ IBV_QPS_SQD, IBV_QPS_SQD, INI, 0,
	  IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
	  IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
	  IBV_QP_PATH_MIG_STATE },
	{ IBV_QPS_SQD, IBV_QPS_SQD, TGT, 0,
	  IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_MAX_DEST_RD_ATOMIC |
	  IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_MIN_RNR_TIMER |
	  IBV_QP_PATH_MIG_STATE },
	{ IBV_QPS_SQE, IBV_QPS_RTS, INI, 0, 0 },
	{ IBV_QPS_SQE, IBV_QPS_RTS, TGT, 0, 0 },
};

/* Teardown, the same for every type: no attributes, and never RESET -> ERR. */
static bool is_teardown(enum ibv_qp_state cur, enum ibv_qp_state next)
{
	if (next == IBV_QPS_RESET)
		return true;
	return next == IBV_QPS_ERR && cur != IBV_QPS_RESET;
}

static const struct transition_spec *find_spec(enum ibv_qp_state cur, enum ibv_qp_state next,
					       enum ibv_qp_type type)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(spec); i++)
		if (spec[i].cur == cur && spec[i].next == next && spec[i].type == type)
			return &spec[i];
	return NULL;
}

static bool is_legal(enum ibv_qp_state cur, enum ibv_qp_state next, enum ibv_qp_type type)
{
	return is_teardown(cur, next) || find_spec(cur, next, type);
}

static int allowed(const struct transition_spec *t, int mask)
{
	return qp_modify_is_allowed(t->cur, t->next, t->type, IBV_QP_STATE | mask);
}

static void check_required_masks(enum ibv_qp_type type)
{
	int cur, next;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(spec); i++)
		if (spec[i].type == type)
			assert_int_equal(allowed(&spec[i], spec[i].required), 0);
	for (cur = IBV_QPS_RESET; cur <= IBV_QPS_ERR; cur++)
		for (next = IBV_QPS_RESET; next <= IBV_QPS_ERR; next++)
			if (is_teardown(cur, next))
				assert_int_equal(qp_modify_is_allowed(cur, next, type,
								      IBV_QP_STATE), 0);
}

/* The QP types a case checks: XRC is its two halves. */
struct required_masks_case {
	const char *name;
	enum ibv_qp_type types[2];
	size_t n;
};

static const struct required_masks_case required_masks[] = {
	{ "test_rc_legal_transitions_with_required_mask", { IBV_QPT_RC }, 1 },
	{ "test_uc_legal_transitions_with_required_mask", { IBV_QPT_UC }, 1 },
	{ "test_ud_legal_transitions_with_required_mask", { IBV_QPT_UD }, 1 },
	{ "test_xrc_legal_transitions_with_required_mask",
	  { IBV_QPT_XRC_SEND, IBV_QPT_XRC_RECV }, 2 },
};

static void run_required_masks(void **state)
{
	const struct required_masks_case *c = *state;

	for (size_t i = 0; i < c->n; i++)
		check_required_masks(c->types[i]);
}

static void test_required_bit_removed_fails(void **state)
{
	size_t i;
	int bit;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(spec); i++)
		for (bit = 0; bit < 31; bit++)
			if (spec[i].required & (1 << bit))
				assert_int_equal(allowed(&spec[i], spec[i].required & ~(1 << bit)),
						 EINVAL);
}

static void test_optional_bits_accepted(void **state)
{
	size_t i;
	int bit;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(spec); i++) {
		const struct transition_spec *t = &spec[i];

		assert_int_equal(allowed(t, t->required | t->optional), 0);
		for (bit = 0; bit < 31; bit++)
			if (t->optional & (1 << bit))
				assert_int_equal(allowed(t, t->required | (1 << bit)), 0);
	}
}

static void test_extra_bit_fails(void **state)
{
	int cur, next, bit;
	size_t i, k;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(spec); i++) {
		const struct transition_spec *t = &spec[i];
		int known = IBV_QP_STATE | t->required | t->optional;

		for (bit = 0; bit < 32; bit++)
			if (!(known & (int)(1u << bit)))
				assert_int_equal(allowed(t, t->required | (int)(1u << bit)),
						 EINVAL);
	}
	/* Teardown takes nothing but the state. */
	for (k = 0; k < ARRAY_SIZE(qp_types); k++)
		for (cur = IBV_QPS_RESET; cur <= IBV_QPS_ERR; cur++)
			for (next = IBV_QPS_RESET; next <= IBV_QPS_ERR; next++)
				if (is_teardown(cur, next) && cur != next)
					assert_int_equal(qp_modify_is_allowed(cur, next,
						qp_types[k], IBV_QP_STATE | IBV_QP_PKEY_INDEX),
						EINVAL);
}

static void test_illegal_transitions_fail(void **state)
{
	int cur, next;
	size_t k;

	(void)state;
	assert_int_equal(qp_modify_is_allowed(IBV_QPS_RESET, IBV_QPS_RTS, IBV_QPT_RC,
					      IBV_QP_STATE | IBV_QP_SQ_PSN), EINVAL);
	assert_int_equal(qp_modify_is_allowed(IBV_QPS_INIT, IBV_QPS_RTS, IBV_QPT_UD,
					      IBV_QP_STATE | IBV_QP_SQ_PSN), EINVAL);
	assert_int_equal(qp_modify_is_allowed(IBV_QPS_RESET, IBV_QPS_RTR, IBV_QPT_UD,
					      IBV_QP_STATE), EINVAL);

	/* Every pair not in the spec, with no attributes and with all of them. */
	for (k = 0; k < ARRAY_SIZE(qp_types); k++)
		for (cur = IBV_QPS_RESET; cur <= IBV_QPS_ERR; cur++)
			for (next = IBV_QPS_RESET; next <= IBV_QPS_ERR; next++) {
				if (is_legal(cur, next, qp_types[k]))
					continue;
				assert_int_equal(qp_modify_is_allowed(cur, next, qp_types[k],
								      IBV_QP_STATE), EINVAL);
				assert_int_equal(qp_modify_is_allowed(cur, next, qp_types[k], -1),
						 EINVAL);
			}
}

static void test_any_state_to_reset_and_err(void **state)
{
	int cur;
	size_t k;

	(void)state;
	for (k = 0; k < ARRAY_SIZE(qp_types); k++)
		for (cur = IBV_QPS_RESET; cur <= IBV_QPS_ERR; cur++) {
			assert_int_equal(qp_modify_is_allowed(cur, IBV_QPS_RESET, qp_types[k],
							      IBV_QP_STATE), 0);
			if (cur != IBV_QPS_RESET)
				assert_int_equal(qp_modify_is_allowed(cur, IBV_QPS_ERR,
						qp_types[k], IBV_QP_STATE), 0);
		}
}

/* The kernel's table has no RESET -> ERR entry; we follow it rather than the IBTA diagram. */
static void test_reset_to_err_refused(void **state)
{
	size_t k;

	(void)state;
	for (k = 0; k < ARRAY_SIZE(qp_types); k++)
		assert_int_equal(qp_modify_is_allowed(IBV_QPS_RESET, IBV_QPS_ERR, qp_types[k],
						      IBV_QP_STATE), EINVAL);
}

static void test_cur_state_only_on_the_way_into_rts(void **state)
{
	const int cur_state = IBV_QP_STATE | IBV_QP_CUR_STATE;

	(void)state;
	assert_int_equal(qp_modify_is_allowed(IBV_QPS_SQE, IBV_QPS_RTS, IBV_QPT_UD, cur_state), 0);
	assert_int_equal(qp_modify_is_allowed(IBV_QPS_RTS, IBV_QPS_RTS, IBV_QPT_UC, cur_state), 0);
	assert_int_equal(qp_modify_is_allowed(IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPT_UD,
					      cur_state | IBV_QP_SQ_PSN), 0);
	/* RC's SQE -> RTS takes no optional attributes at all. */
	assert_int_equal(qp_modify_is_allowed(IBV_QPS_SQE, IBV_QPS_RTS, IBV_QPT_RC, cur_state),
			 EINVAL);
	assert_int_equal(qp_modify_is_allowed(IBV_QPS_RTS, IBV_QPS_SQD, IBV_QPT_RC, cur_state),
			 EINVAL);
	assert_int_equal(qp_modify_is_allowed(IBV_QPS_INIT, IBV_QPS_INIT, IBV_QPT_RC, cur_state),
			 EINVAL);
	assert_int_equal(qp_modify_is_allowed(IBV_QPS_ERR, IBV_QPS_RESET, IBV_QPT_RC, cur_state),
			 EINVAL);
	assert_int_equal(qp_modify_is_allowed(IBV_QPS_RESET, IBV_QPS_RESET, IBV_QPT_RC, cur_state),
			 EINVAL);
}

/* A modify without IBV_QP_STATE is an attribute change judged by the cur -> cur row. */
static void test_without_state_bit_the_qp_stays(void **state)
{
	(void)state;
	assert_int_equal(qp_modify_is_allowed(IBV_QPS_RTS, IBV_QPS_RTS, IBV_QPT_RC,
					      IBV_QP_MIN_RNR_TIMER), 0);
	assert_int_equal(qp_modify_is_allowed(IBV_QPS_INIT, IBV_QPS_INIT, IBV_QPT_UD,
					      IBV_QP_QKEY), 0);
	assert_int_equal(qp_modify_is_allowed(IBV_QPS_RESET, IBV_QPS_RESET, IBV_QPT_RC, 0), 0);
	/* No cur -> cur row for RTR: it can only be left. */
	assert_int_equal(qp_modify_is_allowed(IBV_QPS_RTR, IBV_QPS_RTR, IBV_QPT_RC, 0), EINVAL);
	/* A move without the bit that asks for it. */
	assert_int_equal(qp_modify_is_allowed(IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPT_RC,
					      IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					      IBV_QP_ACCESS_FLAGS), EINVAL);
}

static void test_unsupported_qp_types_fail(void **state)
{
	static const enum ibv_qp_type others[] = {
		IBV_QPT_RAW_PACKET, IBV_QPT_DRIVER, 0, 1,
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(others); i++)
		assert_int_equal(qp_modify_is_allowed(IBV_QPS_RESET, IBV_QPS_RESET, others[i],
						      IBV_QP_STATE), EINVAL);
}

static void test_out_of_range_states_fail(void **state)
{
	(void)state;
	assert_int_equal(qp_modify_is_allowed(IBV_QPS_UNKNOWN, IBV_QPS_RESET, IBV_QPT_RC,
					      IBV_QP_STATE), EINVAL);
	assert_int_equal(qp_modify_is_allowed(IBV_QPS_RTS, IBV_QPS_UNKNOWN, IBV_QPT_RC,
					      IBV_QP_STATE), EINVAL);
	assert_int_equal(qp_modify_is_allowed((enum ibv_qp_state)-1, IBV_QPS_ERR, IBV_QPT_RC,
					      IBV_QP_STATE), EINVAL);
}

/* Attribute values. */

static const struct qp_attr_limits test_limits = {
	.phys_port_cnt		= 1,
	.pkey_tbl_len		= 1,
	.gid_tbl_len		= 16,
	.max_mtu		= IBV_MTU_4096,
	.max_qp_init_rd_atom	= 16,
	.max_qp_rd_atom		= 32,
	.grh_required		= true,
	.alt_path_supported	= true,
};

/* Every attribute checks except what a single bit would refuse anyway (CAP, RATE_LIMIT). */
#define ALL_VALUES	(IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY |	\
			 IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT |	\
			 IBV_QP_QKEY | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_TIMEOUT |	\
			 IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_RQ_PSN |		\
			 IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_ALT_PATH |			\
			 IBV_QP_MIN_RNR_TIMER | IBV_QP_SQ_PSN |				\
			 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_PATH_MIG_STATE |		\
			 IBV_QP_DEST_QPN)

static struct ibv_qp_attr valid_attr(void)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.cur_qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.path_mig_state = IBV_MIG_MIGRATED;
	a.qkey = 0x11111111;
	a.rq_psn = 0xabcdef;
	a.sq_psn = 0x123456;
	a.dest_qp_num = 0xffffff;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.sgid_index = 15;
	a.ah_attr.port_num = 1;
	a.alt_ah_attr = a.ah_attr;
	a.pkey_index = 0;
	a.alt_pkey_index = 0;
	a.max_rd_atomic = 16;
	a.max_dest_rd_atomic = 32;
	a.min_rnr_timer = QP_RNR_TIMER_MAX;
	a.port_num = 1;
	a.timeout = QP_TIMEOUT_MAX;
	a.retry_cnt = QP_RETRY_CNT_MAX;
	a.rnr_retry = QP_RNR_RETRY_MAX;
	a.alt_port_num = 1;
	a.alt_timeout = QP_TIMEOUT_MAX;
	return a;
}

/*
 * One test per value rule: start from an attribute set that passes (every field at its
 * largest legal value), change what the rule is about, and check the answer.
 */
#define VALUE_CASE(name, mask, expected, ...)						\
static void test_value_##name(void **state)						\
{											\
	struct ibv_qp_attr attr = valid_attr();						\
	struct qp_attr_limits lim = test_limits;					\
											\
	(void)state;									\
	__VA_ARGS__;									\
	assert_int_equal(qp_check_attr_values(&attr, (mask), &lim), (expected));	\
}

VALUE_CASE(all_at_their_limits_pass, ALL_VALUES, 0, (void)0)
VALUE_CASE(fields_not_in_mask_ignored, 0, 0, memset(&attr, 0xff, sizeof(attr)))
VALUE_CASE(psn_above_24_bits_accepted, IBV_QP_SQ_PSN | IBV_QP_RQ_PSN, 0,
	   attr.sq_psn = 0xffffffff; attr.rq_psn = 0x01000000)
VALUE_CASE(qp_state_out_of_range, IBV_QP_STATE, EINVAL, attr.qp_state = IBV_QPS_UNKNOWN)
VALUE_CASE(cur_qp_state_out_of_range, IBV_QP_CUR_STATE, EINVAL,
	   attr.cur_qp_state = IBV_QPS_ERR + 1)
VALUE_CASE(path_mtu_zero, IBV_QP_PATH_MTU, EINVAL, attr.path_mtu = 0)
VALUE_CASE(path_mtu_not_an_mtu, IBV_QP_PATH_MTU, EINVAL, attr.path_mtu = IBV_MTU_4096 + 1)
VALUE_CASE(path_mtu_above_port_max, IBV_QP_PATH_MTU, EINVAL,
	   lim.max_mtu = IBV_MTU_1024; attr.path_mtu = IBV_MTU_2048)
VALUE_CASE(port_zero, IBV_QP_PORT, EINVAL, attr.port_num = 0)
VALUE_CASE(port_two, IBV_QP_PORT, EINVAL, attr.port_num = 2)
VALUE_CASE(pkey_index_outside_table, IBV_QP_PKEY_INDEX, EINVAL, attr.pkey_index = 1)
VALUE_CASE(max_rd_atomic_above_limit, IBV_QP_MAX_QP_RD_ATOMIC, EINVAL, attr.max_rd_atomic = 17)
VALUE_CASE(max_dest_rd_atomic_above_limit, IBV_QP_MAX_DEST_RD_ATOMIC, EINVAL,
	   attr.max_dest_rd_atomic = 33)
VALUE_CASE(timeout_above_31, IBV_QP_TIMEOUT, EINVAL, attr.timeout = QP_TIMEOUT_MAX + 1)
VALUE_CASE(retry_cnt_above_7, IBV_QP_RETRY_CNT, EINVAL, attr.retry_cnt = QP_RETRY_CNT_MAX + 1)
VALUE_CASE(rnr_retry_above_7, IBV_QP_RNR_RETRY, EINVAL, attr.rnr_retry = QP_RNR_RETRY_MAX + 1)
VALUE_CASE(min_rnr_timer_above_31, IBV_QP_MIN_RNR_TIMER, EINVAL,
	   attr.min_rnr_timer = QP_RNR_TIMER_MAX + 1)
VALUE_CASE(access_flags_zero_based, IBV_QP_ACCESS_FLAGS, EINVAL,
	   attr.qp_access_flags |= IBV_ACCESS_ZERO_BASED)
VALUE_CASE(access_flags_unknown_bit, IBV_QP_ACCESS_FLAGS, EINVAL,
	   attr.qp_access_flags |= 1u << 12)
VALUE_CASE(access_flags_optional_range_accepted, IBV_QP_ACCESS_FLAGS, 0,
	   attr.qp_access_flags |= IBV_ACCESS_RELAXED_ORDERING | (1u << 29))
VALUE_CASE(dest_qpn_above_24_bits, IBV_QP_DEST_QPN, EINVAL, attr.dest_qp_num = 0x01000000)
VALUE_CASE(qkey_controlled_not_permitted, IBV_QP_QKEY, EPERM, attr.qkey = 0x80010000)
VALUE_CASE(path_mig_state_unknown, IBV_QP_PATH_MIG_STATE, EINVAL,
	   attr.path_mig_state = IBV_MIG_ARMED + 1)
VALUE_CASE(av_port_invalid, IBV_QP_AV, EINVAL, attr.ah_attr.port_num = 0)
VALUE_CASE(av_without_grh_when_required, IBV_QP_AV, EINVAL, attr.ah_attr.is_global = 0)
VALUE_CASE(av_without_grh_when_not_required, IBV_QP_AV, 0,
	   lim.grh_required = false; attr.ah_attr.is_global = 0)
VALUE_CASE(av_sgid_index_outside_table, IBV_QP_AV, EINVAL, attr.ah_attr.grh.sgid_index = 16)
VALUE_CASE(alt_path_without_apm, IBV_QP_ALT_PATH, EINVAL, lim.alt_path_supported = false)
VALUE_CASE(alt_port_invalid, IBV_QP_ALT_PATH, EINVAL,
	   attr.alt_port_num = 2; attr.alt_ah_attr.port_num = 2)
VALUE_CASE(alt_port_disagrees_with_alt_av, IBV_QP_ALT_PATH, EINVAL,
	   lim.phys_port_cnt = 2; attr.alt_ah_attr.port_num = 2)
VALUE_CASE(alt_pkey_index_outside_table, IBV_QP_ALT_PATH, EINVAL, attr.alt_pkey_index = 1)
VALUE_CASE(alt_timeout_above_31, IBV_QP_ALT_PATH, EINVAL, attr.alt_timeout = QP_TIMEOUT_MAX + 1)
VALUE_CASE(alt_av_without_grh, IBV_QP_ALT_PATH, EINVAL, attr.alt_ah_attr.is_global = 0)

/* Timers. */

static void test_timeout_zero_is_infinite(void **state)
{
	(void)state;
	assert_int_equal(qp_timeout_to_ns(0), 0);
}

static void test_timeout_scale(void **state)
{
	(void)state;
	assert_int_equal(qp_timeout_to_ns(1), 8192);			/* 8.192 us */
	assert_int_equal(qp_timeout_to_ns(14), 67108864);		/* ~67.1 ms */
	assert_int_equal(qp_timeout_to_ns(18), UINT64_C(1073741824));	/* ~1.07 s */
	assert_int_equal(qp_timeout_to_ns(31), UINT64_C(4096) << 31);	/* ~2.4 h */
	assert_int_equal(qp_timeout_to_ns(32), qp_timeout_to_ns(31));
	assert_int_equal(qp_timeout_to_ns(255), qp_timeout_to_ns(31));
}

static void test_rnr_timer_table(void **state)
{
	uint8_t code;

	(void)state;
	assert_int_equal(qp_rnr_timer_to_ns(0), UINT64_C(655360000));	/* 655.36 ms */
	assert_int_equal(qp_rnr_timer_to_ns(1), 10000);			/* 0.01 ms */
	assert_int_equal(qp_rnr_timer_to_ns(5), 60000);			/* 0.06 ms */
	assert_int_equal(qp_rnr_timer_to_ns(14), 1280000);		/* 1.28 ms */
	assert_int_equal(qp_rnr_timer_to_ns(18), 5120000);		/* 5.12 ms */
	assert_int_equal(qp_rnr_timer_to_ns(31), UINT64_C(491520000));	/* 491.52 ms */
	assert_int_equal(qp_rnr_timer_to_ns(32), qp_rnr_timer_to_ns(31));

	/* Codes 1..31 grow, and code 0 is longer than all of them. */
	for (code = 2; code <= QP_RNR_TIMER_MAX; code++)
		assert_true(qp_rnr_timer_to_ns(code) > qp_rnr_timer_to_ns(code - 1));
	assert_true(qp_rnr_timer_to_ns(0) > qp_rnr_timer_to_ns(QP_RNR_TIMER_MAX));
}

/* The whole table, as the IBTA prints it (milliseconds). */
static void test_rnr_timer_every_code(void **state)
{
	static const double ibta_ms[QP_RNR_TIMER_MAX + 1] = {
		655.36,   0.01,   0.02,   0.03,   0.04,   0.06,   0.08,   0.12,
		  0.16,   0.24,   0.32,   0.48,   0.64,   0.96,   1.28,   1.92,
		  2.56,   3.84,   5.12,   7.68,  10.24,  15.36,  20.48,  30.72,
		 40.96,  61.44,  81.92, 122.88, 163.84, 245.76, 327.68, 491.52,
	};
	uint8_t code;

	(void)state;
	for (code = 0; code <= QP_RNR_TIMER_MAX; code++)
		assert_int_equal(qp_rnr_timer_to_ns(code), (uint64_t)(ibta_ms[code] * 1e6 + 0.5));
}

static void test_state_names(void **state)
{
	(void)state;
	assert_string_equal(qp_state_name(IBV_QPS_RESET), "RESET");
	assert_string_equal(qp_state_name(IBV_QPS_INIT), "INIT");
	assert_string_equal(qp_state_name(IBV_QPS_RTR), "RTR");
	assert_string_equal(qp_state_name(IBV_QPS_RTS), "RTS");
	assert_string_equal(qp_state_name(IBV_QPS_SQD), "SQD");
	assert_string_equal(qp_state_name(IBV_QPS_SQE), "SQE");
	assert_string_equal(qp_state_name(IBV_QPS_ERR), "ERR");
	assert_string_equal(qp_state_name(IBV_QPS_UNKNOWN), "UNKNOWN");
	assert_string_equal(qp_state_name((enum ibv_qp_state)1000), "UNKNOWN");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_required_bit_removed_fails),
		cmocka_unit_test(test_optional_bits_accepted),
		cmocka_unit_test(test_extra_bit_fails),
		cmocka_unit_test(test_illegal_transitions_fail),
		cmocka_unit_test(test_any_state_to_reset_and_err),
		cmocka_unit_test(test_reset_to_err_refused),
		cmocka_unit_test(test_cur_state_only_on_the_way_into_rts),
		cmocka_unit_test(test_without_state_bit_the_qp_stays),
		cmocka_unit_test(test_unsupported_qp_types_fail),
		cmocka_unit_test(test_out_of_range_states_fail),

		cmocka_unit_test(test_value_all_at_their_limits_pass),
		cmocka_unit_test(test_value_fields_not_in_mask_ignored),
		cmocka_unit_test(test_value_psn_above_24_bits_accepted),
		cmocka_unit_test(test_value_qp_state_out_of_range),
		cmocka_unit_test(test_value_cur_qp_state_out_of_range),
		cmocka_unit_test(test_value_path_mtu_zero),
		cmocka_unit_test(test_value_path_mtu_not_an_mtu),
		cmocka_unit_test(test_value_path_mtu_above_port_max),
		cmocka_unit_test(test_value_port_zero),
		cmocka_unit_test(test_value_port_two),
		cmocka_unit_test(test_value_pkey_index_outside_table),
		cmocka_unit_test(test_value_max_rd_atomic_above_limit),
		cmocka_unit_test(test_value_max_dest_rd_atomic_above_limit),
		cmocka_unit_test(test_value_timeout_above_31),
		cmocka_unit_test(test_value_retry_cnt_above_7),
		cmocka_unit_test(test_value_rnr_retry_above_7),
		cmocka_unit_test(test_value_min_rnr_timer_above_31),
		cmocka_unit_test(test_value_access_flags_zero_based),
		cmocka_unit_test(test_value_access_flags_unknown_bit),
		cmocka_unit_test(test_value_access_flags_optional_range_accepted),
		cmocka_unit_test(test_value_dest_qpn_above_24_bits),
		cmocka_unit_test(test_value_qkey_controlled_not_permitted),
		cmocka_unit_test(test_value_path_mig_state_unknown),
		cmocka_unit_test(test_value_av_port_invalid),
		cmocka_unit_test(test_value_av_without_grh_when_required),
		cmocka_unit_test(test_value_av_without_grh_when_not_required),
		cmocka_unit_test(test_value_av_sgid_index_outside_table),
		cmocka_unit_test(test_value_alt_path_without_apm),
		cmocka_unit_test(test_value_alt_port_invalid),
		cmocka_unit_test(test_value_alt_port_disagrees_with_alt_av),
		cmocka_unit_test(test_value_alt_pkey_index_outside_table),
		cmocka_unit_test(test_value_alt_timeout_above_31),
		cmocka_unit_test(test_value_alt_av_without_grh),

		cmocka_unit_test(test_timeout_zero_is_infinite),
		cmocka_unit_test(test_timeout_scale),
		cmocka_unit_test(test_rnr_timer_table),
		cmocka_unit_test(test_rnr_timer_every_code),
		cmocka_unit_test(test_state_names),
	};
	struct case_list l = { 0 };

	CASE_TABLE(&l, run_required_masks, NULL, NULL, required_masks);
	CASE_TESTS(&l, tests);
	return case_run(&l);
}
