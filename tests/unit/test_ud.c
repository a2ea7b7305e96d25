// SPDX-License-Identifier: MIT
/*
 * UD through the verbs API: the GRH a receive gets in front of the datagram, address
 * handles made from a completion, Q_Key checks (and the controlled Q_Key), and what is
 * dropped silently, with the port counters that show it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "ud_fixture.h"

#define GRH_LEN		UD_GRH_LEN
#define SLOT		UD_SLOT
#define QKEY_A		0x1111
#define QKEY_B		0x2222

struct ud_scene {
	struct rc_env *env;
	struct ud_end a, b;
	struct ibv_ah *ah;		/* to GID 0 */
};

static void scene_init(struct ud_scene *s, void **state, uint32_t qkey_a, uint32_t qkey_b)
{
	struct ibv_ah_attr ah_attr = { .is_global = 1, .port_num = 1 };

	memset(s, 0, sizeof(*s));
	s->env = *state;
	ud_end_create(s->env, &s->a, qkey_a);
	ud_end_create(s->env, &s->b, qkey_b);
	ah_attr.grh.dgid = s->env->gid;
	s->ah = ibv_create_ah(s->env->pd, &ah_attr);
	assert_non_null(s->ah);
}

static void scene_destroy(struct ud_scene *s)
{
	assert_int_equal(ibv_destroy_ah(s->ah), 0);
	ud_end_destroy(&s->a);
	ud_end_destroy(&s->b);
}

/* Sends LEN (up to 2 slots) bytes of pattern SEED from FROM to TO with Q_Key QKEY. */
static void send_to(struct ud_scene *s, struct ud_end *from, struct ud_end *to, uint64_t wr_id,
		    uint32_t len, uint32_t qkey, uint8_t seed, const uint32_t *imm)
{
	ud_send(from, s->ah, to->qp->qp_num, qkey, wr_id, len, seed, imm);
}

/*
 * A datagram from a whose Q_Key b's QP does not take: no completion, and one more Q_Key
 * violation counted. Returns the count after it.
 */
static uint64_t expect_qkey_refused(struct ud_scene *s, uint32_t len, uint32_t qkey,
				    uint8_t seed)
{
	uint64_t violations = rc_port_counter("qkey_violations");

	send_to(s, &s->a, &s->b, 1, len, qkey, seed, NULL);
	rc_expect_no_wc(s->b.cq, RC_QUIET_MS);
	assert_int_equal(rc_port_counter("qkey_violations"), violations + 1);
	return violations + 1;
}

static uint16_t ipv4_header_sum(const uint8_t *ip)
{
	uint32_t sum = 0;

	for (int i = 0; i < 20; i += 2)
		sum += (uint32_t)ip[i] << 8 | ip[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/* GID 0 is ::ffff:127.0.0.1: the GRH is an IPv4 header in bytes 20-39, as RoCE v2 puts it. */
static void test_grh_precedes_the_datagram(void **state)
{
	struct ud_scene s;
	struct ibv_wc wc;
	uint8_t *grh;
	uint32_t loopback = htonl(INADDR_LOOPBACK);

	scene_init(&s, state, QKEY_A, QKEY_A);
	assert_true(!memcmp(s.env->gid.raw + 12, &loopback, 4));
	grh = s.b.buf->p;
	memset(grh, 0xee, SLOT);
	ud_post_slot(&s.b, 0, SLOT);
	send_to(&s, &s.a, &s.b, 1, 300, QKEY_A, 3, NULL);
	rc_expect_wc(s.b.cq, 0, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, GRH_LEN + 300);
	assert_int_equal(wc.qp_num, s.b.qp->qp_num);
	assert_int_equal(wc.src_qp, s.a.qp->qp_num);
	assert_true(wc.wc_flags & IBV_WC_GRH);
	assert_false(wc.wc_flags & IBV_WC_WITH_IMM);
	for (int i = 0; i < 20; i++)
		assert_int_equal(grh[i], 0);
	assert_int_equal(grh[20], 0x45);			/* IPv4, 20-byte header */
	assert_int_equal(grh[22] << 8 | grh[23], 20 + 8 + 300);	/* IP + UDP + payload */
	assert_int_equal(grh[29], 17);				/* UDP */
	assert_int_equal(ipv4_header_sum(grh + 20), 0xffff);	/* the checksum holds */
	assert_memory_equal(grh + 32, &loopback, 4);		/* source */
	assert_memory_equal(grh + 36, &loopback, 4);		/* destination */
	rc_expect_pattern(grh + GRH_LEN, 300, 3, "the datagram behind the GRH");
	assert_int_equal(grh[GRH_LEN + 300], 0xee);		/* nothing after it */
	scene_destroy(&s);
}

/* The AH's traffic class and hop limit travel in the IP header, and the GRH reports them. */
static void test_traffic_class_and_hop_limit_carried(void **state)
{
	struct ibv_ah_attr ah_attr = { .is_global = 1, .port_num = 1 };
	struct ibv_ah_attr seen;
	struct ud_scene s;
	struct ibv_wc wc;
	uint8_t *grh;

	scene_init(&s, state, QKEY_A, QKEY_A);
	assert_int_equal(ibv_destroy_ah(s.ah), 0);
	ah_attr.grh.dgid = s.env->gid;
	ah_attr.grh.traffic_class = 252;
	ah_attr.grh.hop_limit = 9;
	s.ah = ibv_create_ah(s.env->pd, &ah_attr);
	assert_non_null(s.ah);
	grh = s.b.buf->p;
	ud_post_slot(&s.b, 0, SLOT);
	send_to(&s, &s.a, &s.b, 1, 16, QKEY_A, 5, NULL);
	rc_expect_wc(s.b.cq, 0, IBV_WC_SUCCESS, &wc);
	assert_int_equal(grh[21], 252);				/* IPv4 TOS */
	assert_int_equal(grh[28], 9);				/* TTL */
	assert_int_equal(ipv4_header_sum(grh + 20), 0xffff);
	assert_int_equal(ibv_init_ah_from_wc(s.env->ctx, 1, &wc, (struct ibv_grh *)grh, &seen), 0);
	assert_int_equal(seen.grh.traffic_class, 252);
	scene_destroy(&s);
}

/* libibverbs builds the reply's address from the GRH: the answer reaches the sender. */
static void test_reply_through_ah_from_wc(void **state)
{
	const uint32_t imm = htonl(0xfeedf00d);
	struct ud_scene s;
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	struct ibv_ah *reply;
	struct ibv_ah_attr attr;
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };

	scene_init(&s, state, QKEY_A, QKEY_A);
	ud_post_slot(&s.b, 0, SLOT);
	ud_post_slot(&s.a, 0, SLOT);
	send_to(&s, &s.a, &s.b, 1, 64, QKEY_A, 4, &imm);
	rc_expect_wc(s.b.cq, 0, IBV_WC_SUCCESS, &wc);
	assert_true(wc.wc_flags & IBV_WC_WITH_IMM);
	assert_int_equal(wc.imm_data, imm);
	assert_int_equal(ibv_init_ah_from_wc(s.env->ctx, 1, &wc, (struct ibv_grh *)s.b.buf->p,
					     &attr), 0);
	assert_int_equal(attr.is_global, 1);
	assert_memory_equal(attr.grh.dgid.raw, s.env->gid.raw, 16);
	reply = ibv_create_ah_from_wc(s.env->pd, &wc, (struct ibv_grh *)s.b.buf->p, 1);
	assert_non_null(reply);

	sge = (struct ibv_sge){ .addr = (uintptr_t)s.b.buf->p + GRH_LEN, .length = 64,
				.lkey = s.b.mr->lkey };
	wr.wr.ud.ah = reply;
	wr.wr.ud.remote_qpn = wc.src_qp;
	wr.wr.ud.remote_qkey = QKEY_A;
	assert_int_equal(ibv_post_send(s.b.qp, &wr, &bad), 0);
	rc_expect_wc(s.b.cq, 9, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(s.a.cq, 0, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.src_qp, s.b.qp->qp_num);
	rc_expect_pattern(s.a.buf->p + GRH_LEN, 64, 4, "the echoed datagram");
	assert_int_equal(ibv_destroy_ah(reply), 0);
	scene_destroy(&s);
}

/*
 * A RoCE v2 UD receive says in wc.sl which L3 header the GRH area holds, as mlx5 does
 * (its CQE's packet type: 2 IPv4, 1 IPv6): UCX's ud_verbs finds the DGID by it, in the
 * last 4 bytes for IPv4 and the last 16 for IPv6, and drops a packet whose DGID is not
 * one of the port's GIDs.
 */
static void expect_network_header(struct ud_scene *s, uint8_t sgid_index,
				  const union ibv_gid *dgid, uint8_t l3_type)
{
	struct ibv_ah_attr ah_attr = { .is_global = 1, .port_num = 1 };
	struct ibv_wc wc;
	uint8_t *grh = s->b.buf->p;

	assert_int_equal(ibv_destroy_ah(s->ah), 0);
	ah_attr.grh.dgid = *dgid;
	ah_attr.grh.sgid_index = sgid_index;
	s->ah = ibv_create_ah(s->env->pd, &ah_attr);
	assert_non_null(s->ah);
	ud_post_slot(&s->b, 0, SLOT);
	send_to(s, &s->a, &s->b, 1, 32, QKEY_A, 6, NULL);
	rc_expect_wc(s->b.cq, 0, IBV_WC_SUCCESS, &wc);
	assert_true(wc.wc_flags & IBV_WC_GRH);
	assert_int_equal(wc.sl, l3_type);
	if (l3_type == 2) {
		assert_int_equal(grh[20] >> 4, 4);
		assert_memory_equal(grh + GRH_LEN - 4, dgid->raw + 12, 4);
	} else {
		assert_int_equal(grh[0] >> 4, 6);
		assert_memory_equal(grh + GRH_LEN - 16, dgid->raw, 16);
	}
}

static void test_network_header_type_in_sl(void **state)
{
	union ibv_gid v6_loopback = { .raw = { [15] = 1 } }, gid;
	struct ud_scene s;

	scene_init(&s, state, QKEY_A, QKEY_A);
	expect_network_header(&s, 0, &s.env->gid, 2);	/* GID 0: ::ffff:127.0.0.1 */
	/* GID 1 is ::1 where the host has IPv6 on loopback. */
	if (!ibv_query_gid(s.env->ctx, 1, 1, &gid) && !memcmp(&gid, &v6_loopback, 16))
		expect_network_header(&s, 1, &v6_loopback, 1);
	else
		print_message("no ::1 in the GID table: the IPv6 case is not run\n");
	scene_destroy(&s);
}

/* A wrong Q_Key: dropped, counted, and the receive stays posted for the next datagram. */
static void test_qkey_mismatch_is_dropped_and_counted(void **state)
{
	struct ud_scene s;
	struct ibv_wc wc;
	uint64_t violations;

	scene_init(&s, state, QKEY_A, QKEY_B);
	ud_post_slot(&s.b, 0, SLOT);
	violations = expect_qkey_refused(&s, 100, QKEY_A, 5);	/* b's Q_Key is B */
	assert_int_equal(rc_state(s.b.qp), IBV_QPS_RTS);
	send_to(&s, &s.a, &s.b, 2, 100, QKEY_B, 6, NULL);
	rc_expect_wc(s.b.cq, 0, IBV_WC_SUCCESS, &wc);
	rc_expect_pattern(s.b.buf->p + GRH_LEN, 100, 6, "the datagram with the right Q_Key");
	assert_int_equal(rc_port_counter("qkey_violations"), violations);
	scene_destroy(&s);
}

/* A controlled Q_Key (bit 31) in the WR sends the sending QP's own Q_Key (IBTA 10.2.5). */
static void test_controlled_qkey_sends_the_qps_own(void **state)
{
	struct ud_scene s;

	scene_init(&s, state, QKEY_A, QKEY_A);
	ud_post_slot(&s.b, 0, SLOT);
	/* 0x80002222 would mismatch if sent as is; the QP's own is A, which b expects. */
	send_to(&s, &s.a, &s.b, 1, 32, 0x80000000u | QKEY_B, 7, NULL);
	rc_expect_wc(s.b.cq, 0, IBV_WC_SUCCESS, NULL);
	scene_destroy(&s);

	scene_init(&s, state, QKEY_A, QKEY_B);
	ud_post_slot(&s.b, 0, SLOT);
	/* The controlled key names b's Q_Key, but a's own (A) is what goes out. */
	expect_qkey_refused(&s, 32, 0x80000000u | QKEY_B, 7);
	scene_destroy(&s);
}

/* No receive posted: the datagram is gone (UD has no RNR), counted as out_of_buffer. */
static void test_no_receive_is_dropped_and_counted(void **state)
{
	struct ud_scene s;
	uint64_t dropped;

	scene_init(&s, state, QKEY_A, QKEY_A);
	dropped = rc_port_counter("out_of_buffer");
	send_to(&s, &s.a, &s.b, 1, 100, QKEY_A, 8, NULL);
	rc_expect_no_wc(s.b.cq, RC_QUIET_MS);
	assert_int_equal(rc_port_counter("out_of_buffer"), dropped + 1);
	ud_post_slot(&s.b, 0, SLOT);
	rc_expect_no_wc(s.b.cq, RC_QUIET_MS);		/* not delivered late */
	assert_int_equal(rc_state(s.b.qp), IBV_QPS_RTS);
	send_to(&s, &s.a, &s.b, 2, 100, QKEY_A, 9, NULL);
	rc_expect_wc(s.b.cq, 0, IBV_WC_SUCCESS, NULL);
	rc_expect_pattern(s.b.buf->p + GRH_LEN, 100, 9, "the next datagram");
	scene_destroy(&s);
}

/* A message longer than the path MTU is not sent; the sender's WR still succeeds. */
static void test_longer_than_mtu_never_arrives(void **state)
{
	struct ud_scene s;

	scene_init(&s, state, QKEY_A, QKEY_A);
	ud_post_slot(&s.b, 0, SLOT);
	send_to(&s, &s.a, &s.b, 1, SLOT + 1, QKEY_A, 10, NULL);
	rc_expect_no_wc(s.b.cq, RC_QUIET_MS);
	send_to(&s, &s.a, &s.b, 2, SLOT - GRH_LEN, QKEY_A, 11, NULL);	/* the largest that fits */
	rc_expect_wc(s.b.cq, 0, IBV_WC_SUCCESS, NULL);
	rc_expect_pattern(s.b.buf->p + GRH_LEN, SLOT - GRH_LEN, 11, "a full slot");
	scene_destroy(&s);
}

/* A receive too small for GRH + message: LOC_LEN_ERR, the QP to ERR, and not a byte past it. */
static void test_receive_too_small_for_grh_and_message(void **state)
{
	struct ud_scene s;
	struct ibv_wc wc;

	scene_init(&s, state, QKEY_A, QKEY_A);
	memset(s.b.buf->p, 0xee, 2 * SLOT);
	ud_post_slot(&s.b, 0, GRH_LEN + 99);
	send_to(&s, &s.a, &s.b, 1, 100, QKEY_A, 12, NULL);
	rc_expect_wc(s.b.cq, 0, IBV_WC_LOC_LEN_ERR, &wc);
	rc_wait_state(s.b.qp, IBV_QPS_ERR);
	for (size_t i = GRH_LEN + 99; i < 2 * SLOT; i++)
		if (s.b.buf->p[i] != 0xee)
			fail_msg("byte %zu past the receive buffer was written", i);
	scene_destroy(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		RC_TEST(grh_precedes_the_datagram),
		RC_TEST(traffic_class_and_hop_limit_carried),
		RC_TEST(reply_through_ah_from_wc),
		RC_TEST(network_header_type_in_sl),
		RC_TEST(qkey_mismatch_is_dropped_and_counted),
		RC_TEST(controlled_qkey_sends_the_qps_own),
		RC_TEST(no_receive_is_dropped_and_counted),
		RC_TEST(longer_than_mtu_never_arrives),
		RC_TEST(receive_too_small_for_grh_and_message),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
