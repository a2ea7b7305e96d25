// SPDX-License-Identifier: MIT
/*
 * rdma_getaddrinfo, rdma_create_ep and rdma_migrate_id as librdmacm's addrinfo.c and cma.c
 * have them (libfabric's verbs provider uses all three): hints-only lookups, one
 * result per lookup, synchronous ids from rdma_create_ep moved onto an event channel, and
 * events moving with a migrated id. Run under `softrdma run` (ctest does).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cm_fixture.h"

static bool same_addr(const struct sockaddr *a, const struct sockaddr_in *b)
{
	return !memcmp(a, b, sizeof(*b));
}

static void test_getaddrinfo_needs_something_to_look_up(void **state)
{
	struct rdma_addrinfo *res;

	(void)state;
	errno = 0;
	assert_int_equal(rdma_getaddrinfo(NULL, NULL, NULL, &res), -1);
	assert_int_equal(errno, EINVAL);
}

/* libfabric's verbs provider passes the addresses in the hints, with no node or service. */
static void test_getaddrinfo_takes_the_address_from_the_hints(void **state)
{
	struct sockaddr_in dst = loopback(7471), src = loopback(0);
	struct rdma_addrinfo hints = { .ai_family = AF_INET, .ai_qp_type = IBV_QPT_RC,
				       .ai_port_space = RDMA_PS_TCP };
	struct rdma_addrinfo *res;

	(void)state;
	hints.ai_dst_addr = (struct sockaddr *)&dst;
	hints.ai_dst_len = sizeof(dst);
	hints.ai_src_addr = (struct sockaddr *)&src;
	hints.ai_src_len = sizeof(src);
	assert_int_equal(rdma_getaddrinfo(NULL, NULL, &hints, &res), 0);
	assert_int_equal(res->ai_family, AF_INET);
	assert_int_equal(res->ai_qp_type, IBV_QPT_RC);
	assert_int_equal(res->ai_port_space, RDMA_PS_TCP);
	assert_int_equal(res->ai_flags, 0);
	assert_int_equal(res->ai_dst_len, sizeof(dst));
	assert_ptr_not_equal(res->ai_dst_addr, &dst);	/* a copy, freed with the result */
	assert_true(same_addr(res->ai_dst_addr, &dst));
	assert_int_equal(res->ai_src_len, sizeof(src));
	assert_true(same_addr(res->ai_src_addr, &src));
	assert_null(res->ai_next);
	rdma_freeaddrinfo(res);

	/* Passive, the source alone. */
	hints.ai_flags = RAI_PASSIVE;
	hints.ai_dst_addr = NULL;
	hints.ai_dst_len = 0;
	assert_int_equal(rdma_getaddrinfo(NULL, NULL, &hints, &res), 0);
	assert_int_equal(res->ai_flags, RAI_PASSIVE);
	assert_null(res->ai_dst_addr);
	assert_true(same_addr(res->ai_src_addr, &src));
	rdma_freeaddrinfo(res);
}

static void test_getaddrinfo_gives_the_first_answer_only(void **state)
{
	struct sockaddr_in want = loopback(7471);
	struct rdma_addrinfo hints = { 0 }, *res;

	(void)state;
	assert_int_equal(rdma_getaddrinfo("127.0.0.1", "7471", NULL, &res), 0);
	assert_null(res->ai_next);
	assert_int_equal(res->ai_qp_type, IBV_QPT_RC);	/* a stream socket's */
	assert_int_equal(res->ai_port_space, RDMA_PS_TCP);
	assert_int_equal(res->ai_flags, 0);
	assert_null(res->ai_src_addr);
	assert_true(same_addr(res->ai_dst_addr, &want));
	rdma_freeaddrinfo(res);

	hints.ai_flags = RAI_PASSIVE;
	assert_int_equal(rdma_getaddrinfo(NULL, "7471", &hints, &res), 0);
	assert_int_equal(res->ai_flags, RAI_PASSIVE);
	assert_null(res->ai_dst_addr);
	assert_non_null(res->ai_src_addr);
	assert_null(res->ai_next);
	rdma_freeaddrinfo(res);

	hints.ai_flags = 0;
	hints.ai_qp_type = IBV_QPT_UD;	/* a datagram socket: the UDP port space */
	assert_int_equal(rdma_getaddrinfo("127.0.0.1", "7471", &hints, &res), 0);
	assert_int_equal(res->ai_qp_type, IBV_QPT_UD);
	assert_int_equal(res->ai_port_space, RDMA_PS_UDP);
	rdma_freeaddrinfo(res);

	hints.ai_qp_type = 0;
	hints.ai_flags = RAI_NUMERICHOST;
	assert_int_equal(rdma_getaddrinfo("not-a-number", NULL, &hints, &res), EAI_NONAME);
}

/* rdma_migrate_id on a thread, so that a deadlock fails the test instead of hanging it. */
struct migrate {
	struct rdma_cm_id *id;
	struct rdma_event_channel *ch;
	int ret;
};

static void *migrate_thread(void *arg)
{
	struct migrate *m = arg;

	m->ret = rdma_migrate_id(m->id, m->ch);
	return NULL;
}

static void migrate_within_5s(struct rdma_cm_id *id, struct rdma_event_channel *ch)
{
	struct migrate m = { .id = id, .ch = ch, .ret = -2 };
	struct timespec deadline;
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, migrate_thread, &m), 0);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 5;
	if (pthread_timedjoin_np(t, NULL, &deadline))
		fail_msg("rdma_migrate_id did not return within 5 s");
	assert_int_equal(m.ret, 0);
}

/* A passive and an active endpoint of rdma_create_ep (synchronous ids), moved onto one
 * event channel, connect asynchronously, as libfabric's msg endpoints do. */
static void test_migrate_endpoints_of_create_ep(void **state)
{
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP },
			     *res;
	struct rdma_cm_id *listener, *client, *conn;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *e;
	char port[8];

	(void)state;
	snprintf(port, sizeof(port), "%d", closed_port());
	assert_int_equal(rdma_getaddrinfo("127.0.0.1", port, &hints, &res), 0);
	assert_int_equal(rdma_create_ep(&listener, res, NULL, NULL), 0);
	rdma_freeaddrinfo(res);
	assert_int_equal(rdma_listen(listener, 4), 0);
	migrate_within_5s(listener, ch);

	hints.ai_flags = 0;
	assert_int_equal(rdma_getaddrinfo("127.0.0.1", port, &hints, &res), 0);
	assert_int_equal(rdma_create_ep(&client, res, NULL, &attr), 0);	/* resolved, a QP */
	rdma_freeaddrinfo(res);
	assert_non_null(client->qp);
	assert_non_null(client->event);	/* ROUTE_RESOLVED, kept as librdmacm keeps it */
	migrate_within_5s(client, ch);
	assert_null(client->event);
	assert_ptr_equal(client->channel, ch);

	assert_int_equal(rdma_connect(client, NULL), 0);	/* asynchronous now */
	e = next_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);	/* the listener's, here */
	assert_ptr_equal(e->listen_id, listener);
	conn = e->id;
	rdma_ack_cm_event(e);
	attr.qp_type = IBV_QPT_RC;
	assert_int_equal(rdma_create_qp(conn, NULL, &attr), 0);
	assert_int_equal(rdma_accept(conn, NULL), 0);
	/* The two ESTABLISHED, in either order. */
	for (int i = 0; i < 2; i++) {
		e = next_event(ch, RDMA_CM_EVENT_ESTABLISHED);
		assert_true(e->id == client || e->id == conn);
		rdma_ack_cm_event(e);
	}
	rdma_destroy_qp(conn);
	assert_int_equal(rdma_destroy_id(conn), 0);
	rdma_destroy_ep(client);
	rdma_destroy_ep(listener);
	rdma_destroy_event_channel(ch);
}

static void test_migrate_moves_queued_events(void **state)
{
	struct rdma_event_channel *ch1 = rdma_create_event_channel(),
				  *ch2 = rdma_create_event_channel();
	struct sockaddr_in dst = loopback(closed_port());
	struct rdma_cm_id *id;

	(void)state;
	assert_int_equal(rdma_create_id(ch1, &id, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000), 0);
	migrate_within_5s(id, ch2);	/* ADDR_RESOLVED not taken yet: it goes along */
	expect_no_event(ch1, 0);
	expect_event(ch2, RDMA_CM_EVENT_ADDR_RESOLVED);

	/* No channel: the id becomes synchronous, its calls wait for their events. */
	migrate_within_5s(id, NULL);
	assert_int_equal(rdma_resolve_route(id, 2000), 0);
	assert_non_null(id->event);
	assert_int_equal(id->event->event, RDMA_CM_EVENT_ROUTE_RESOLVED);
	errno = 0;
	assert_int_equal(rdma_migrate_id(id, NULL), -1);	/* synchronous already */
	assert_int_equal(errno, EINVAL);
	assert_int_equal(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch1);
	rdma_destroy_event_channel(ch2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_getaddrinfo_needs_something_to_look_up),
		cmocka_unit_test(test_getaddrinfo_takes_the_address_from_the_hints),
		cmocka_unit_test(test_getaddrinfo_gives_the_first_answer_only),
		cmocka_unit_test(test_migrate_endpoints_of_create_ep),
		cmocka_unit_test(test_migrate_moves_queued_events),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
