// SPDX-License-Identifier: MIT
/*
 * UD multicast through the drop-in librdmacm: who may join, the join's event (the group's
 * address handle, qp_num 0xffffff, RDMA_UDP_QKEY, the context), the QP attached for a full
 * member and not for a send-only one, a datagram through the group, and leaving.
 * The group is 239.77.P.P with P from the process id: no other run shares it.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <rdma/rdma_verbs.h>

#include "cm_fixture.h"

#define MSG_LEN		64
#define WAIT_MS		5000

static struct sockaddr_in group_addr(void)
{
	struct sockaddr_in g = { .sin_family = AF_INET };
	uint32_t pid = (uint32_t)getpid();

	g.sin_addr.s_addr = htonl(0xef4d0000u | (pid & 0xffff));	/* 239.77.x.y */
	return g;
}

/* A UDP id on its own channel, bound to 127.0.0.1, with a UD QP of its own CQs. */
static void udp_side(struct side *s, bool with_qp)
{
	struct sockaddr_in lo = loopback(0);
	struct ibv_qp_init_attr attr = { .qp_type = IBV_QPT_UD, .cap = { .max_send_wr = 4,
					 .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };

	s->ch = rdma_create_event_channel();
	assert_non_null(s->ch);
	assert_int_equal(rdma_create_id(s->ch, &s->id, NULL, RDMA_PS_UDP), 0);
	assert_int_equal(rdma_bind_addr(s->id, (struct sockaddr *)&lo), 0);
	if (with_qp)
		assert_int_equal(rdma_create_qp(s->id, NULL, &attr), 0);
}

static void test_join_rules(void **state)
{
	struct sockaddr_in g = group_addr(), lo = loopback(0);
	struct sockaddr_in6 g6 = { .sin6_family = AF_INET6, .sin6_addr = { .s6_addr = { 0xff, 0x0e,
				   [15] = 1 } } };
	struct rdma_cm_join_mc_attr_ex ex = { .comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS,
					      .addr = (struct sockaddr *)&g };
	struct side tcp = { 0 }, idle = { 0 }, udp = { 0 };

	(void)state;
	/* The kernel's rdma_join_multicast(): a UD id bound to a device, else EINVAL. */
	tcp.ch = rdma_create_event_channel();
	assert_int_equal(rdma_create_id(tcp.ch, &tcp.id, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_bind_addr(tcp.id, (struct sockaddr *)&lo), 0);
	errno = 0;
	assert_int_equal(rdma_join_multicast(tcp.id, (struct sockaddr *)&g, NULL), -1);
	assert_int_equal(errno, EINVAL);
	idle.ch = rdma_create_event_channel();
	assert_int_equal(rdma_create_id(idle.ch, &idle.id, NULL, RDMA_PS_UDP), 0);
	errno = 0;
	assert_int_equal(rdma_join_multicast(idle.id, (struct sockaddr *)&g, NULL), -1);
	assert_int_equal(errno, EINVAL);

	udp_side(&udp, false);
	/* RoCE v2 takes IPv4 groups only (cma_iboe_join_multicast). */
	errno = 0;
	assert_int_equal(rdma_join_multicast(udp.id, (struct sockaddr *)&g6, NULL), -1);
	assert_int_equal(errno, EOPNOTSUPP);
	/* librdmacm's rdma_join_multicast_ex(): join flags are required, and known ones. */
	errno = 0;
	assert_int_equal(rdma_join_multicast_ex(udp.id, &ex, NULL), -1);
	assert_int_equal(errno, EINVAL);
	ex.comp_mask |= RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	ex.join_flags = RDMA_MC_JOIN_FLAG_RESERVED;
	errno = 0;
	assert_int_equal(rdma_join_multicast_ex(udp.id, &ex, NULL), -1);
	assert_int_equal(errno, EINVAL);
	/* Leaving what was never joined. */
	errno = 0;
	assert_int_equal(rdma_leave_multicast(udp.id, (struct sockaddr *)&g), -1);
	assert_int_equal(errno, EADDRNOTAVAIL);
	expect_no_event(udp.ch, 100);
	stop(&udp);
	stop(&idle);
	stop(&tcp);
}

/* The join's event as cma_make_mc_event() fills it for a RoCE v2 port. */
static struct ibv_ah_attr expect_join(struct side *s, void *context)
{
	struct rdma_cm_event *e = next_event(s->ch, RDMA_CM_EVENT_MULTICAST_JOIN);
	struct sockaddr_in g = group_addr();
	struct ibv_ah_attr ah;

	assert_int_equal(e->status, 0);
	assert_ptr_equal(e->id, s->id);
	assert_ptr_equal(e->param.ud.private_data, context);
	assert_int_equal(e->param.ud.qp_num, 0xffffff);
	assert_int_equal(e->param.ud.qkey, RDMA_UDP_QKEY);
	ah = e->param.ud.ah_attr;
	assert_int_equal(ah.is_global, 1);
	assert_int_equal(ah.grh.dgid.raw[10], 0xff);
	assert_int_equal(ah.grh.dgid.raw[11], 0xff);
	assert_memory_equal(&ah.grh.dgid.raw[12], &g.sin_addr, 4);	/* ::ffff:239.77.x.y */
	rdma_ack_cm_event(e);
	return ah;
}

static struct ibv_wc poll_within(struct ibv_cq *cq)
{
	struct timespec t0, t;
	struct ibv_wc wc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (ibv_poll_cq(cq, 1, &wc) == 1)
			return wc;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > WAIT_MS)
			fail_msg("no completion within %d ms", WAIT_MS);
	}
}

static void test_join_send_leave(void **state)
{
	struct sockaddr_in g = group_addr();
	struct rdma_cm_join_mc_attr_ex ex = {
		.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
		.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER, .addr = (struct sockaddr *)&g,
	};
	struct side rx = { 0 }, tx = { 0 };
	uint8_t rbuf[40 + MSG_LEN], sbuf[MSG_LEN];
	struct ibv_mr *rmr, *smr;
	struct ibv_ah_attr ah_attr;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	int ctx_rx, ctx_tx;

	(void)state;
	udp_side(&rx, true);
	udp_side(&tx, true);
	rmr = rdma_reg_msgs(rx.id, rbuf, sizeof(rbuf));
	smr = rdma_reg_msgs(tx.id, sbuf, sizeof(sbuf));
	assert_non_null(rmr);
	assert_non_null(smr);
	assert_int_equal(rdma_post_recv(rx.id, NULL, rbuf, sizeof(rbuf), rmr), 0);

	assert_int_equal(rdma_join_multicast(rx.id, (struct sockaddr *)&g, &ctx_rx), 0);
	expect_join(&rx, &ctx_rx);
	assert_int_equal(rdma_join_multicast_ex(tx.id, &ex, &ctx_tx), 0);
	ah_attr = expect_join(&tx, &ctx_tx);
	/* A full member's QP is attached (a second attach is a no-op); a send-only one's not. */
	assert_int_equal(ibv_attach_mcast(rx.id->qp, &ah_attr.grh.dgid, 0), 0);
	assert_int_equal(ibv_detach_mcast(tx.id->qp, &ah_attr.grh.dgid, 0), EINVAL);

	ah = ibv_create_ah(tx.id->pd, &ah_attr);
	assert_non_null(ah);
	memset(sbuf, 0x5a, sizeof(sbuf));
	assert_int_equal(rdma_post_ud_send(tx.id, NULL, sbuf, sizeof(sbuf), smr,
					   IBV_SEND_SIGNALED, ah, 0xffffff), 0);
	wc = poll_within(tx.id->send_cq);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	wc = poll_within(rx.id->recv_cq);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.src_qp, tx.id->qp->qp_num);
	assert_true(wc.wc_flags & IBV_WC_GRH);
	assert_int_equal(wc.byte_len, 40 + MSG_LEN);
	assert_int_equal(rbuf[40], 0x5a);
	assert_int_equal(rbuf[40 + MSG_LEN - 1], 0x5a);

	/* Leaving detaches the QP; a second leave finds nothing. */
	assert_int_equal(rdma_leave_multicast(rx.id, (struct sockaddr *)&g), 0);
	assert_int_equal(ibv_detach_mcast(rx.id->qp, &ah_attr.grh.dgid, 0), EINVAL);
	errno = 0;
	assert_int_equal(rdma_leave_multicast(rx.id, (struct sockaddr *)&g), -1);
	assert_int_equal(errno, EADDRNOTAVAIL);
	assert_int_equal(rdma_leave_multicast(tx.id, (struct sockaddr *)&g), 0);
	assert_int_equal(ibv_destroy_ah(ah), 0);
	rdma_dereg_mr(rmr);
	rdma_dereg_mr(smr);
	rdma_destroy_qp(rx.id);
	rdma_destroy_qp(tx.id);
	stop(&rx);
	stop(&tx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_join_rules),
		cmocka_unit_test(test_join_send_leave),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
