// SPDX-License-Identifier: MIT
/*
 * rdma_cm through the drop-in librdmacm, as applications use it: asynchronous ids on event
 * channels, both sides in this process. Run under `softrdma run` (ctest does).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "cm_fixture.h"

/* A listener in srv, and cli's connect to it under param (the request is on its way). */
static void start_connect(struct side *srv, struct side *cli, struct rdma_conn_param *param)
{
	start_client(cli, start_listener(srv, 16));
	assert_int_equal(rdma_connect(cli->id, param), 0);
}

/* start_connect with the retries applications set, accepted and established on both sides;
 * returns the server's id. */
static struct rdma_cm_id *establish(struct side *srv, struct side *cli)
{
	struct rdma_conn_param param = { .retry_count = 7, .rnr_retry_count = 7 };
	struct rdma_cm_id *conn;

	start_connect(srv, cli, &param);
	conn = accept_one(srv, NULL, 0);
	expect_event(cli->ch, RDMA_CM_EVENT_ESTABLISHED);
	expect_event(srv->ch, RDMA_CM_EVENT_ESTABLISHED);
	return conn;
}

static void test_connect_and_private_data(void **state)
{
	struct side srv = { 0 }, cli = { 0 };
	struct rdma_conn_param param = { .private_data = "hello", .private_data_len = 6,
					 .responder_resources = 1, .initiator_depth = 1,
					 .retry_count = 7, .rnr_retry_count = 7 };
	struct rdma_cm_event *e;
	struct rdma_cm_id *conn;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;

	(void)state;
	start_connect(&srv, &cli, &param);
	e = next_event(srv.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	assert_string_equal(e->param.conn.private_data, "hello");
	conn = e->id;
	rdma_ack_cm_event(e);
	{
		struct ibv_qp_init_attr attr = { .cap = { .max_send_wr = 2, .max_recv_wr = 2,
							  .max_send_sge = 1, .max_recv_sge = 1 },
						 .qp_type = IBV_QPT_RC };

		assert_int_equal(rdma_create_qp(conn, NULL, &attr), 0);
	}
	param.private_data = "welcome";
	param.private_data_len = 8;
	assert_int_equal(rdma_accept(conn, &param), 0);
	e = next_event(cli.ch, RDMA_CM_EVENT_ESTABLISHED);
	assert_string_equal(e->param.conn.private_data, "welcome");
	assert_int_equal(e->param.conn.private_data_len, 196);	/* the IB CM's REP size */
	rdma_ack_cm_event(e);
	expect_event(srv.ch, RDMA_CM_EVENT_ESTABLISHED);

	/* Both QPs are RTS, and carry the access flags the kernel's CM gives. */
	assert_int_equal(ibv_query_qp(cli.id->qp, &qa, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, &qi), 0);
	assert_int_equal(qa.qp_state, IBV_QPS_RTS);
	assert_true(qa.qp_access_flags & IBV_ACCESS_REMOTE_WRITE);
	assert_int_equal(ibv_query_qp(conn->qp, &qa, IBV_QP_STATE | IBV_QP_DEST_QPN, &qi), 0);
	assert_int_equal(qa.qp_state, IBV_QPS_RTS);
	assert_int_equal(qa.dest_qp_num, cli.id->qp->qp_num);

	assert_int_equal(rdma_disconnect(cli.id), 0);
	expect_event(cli.ch, RDMA_CM_EVENT_DISCONNECTED);
	expect_event(srv.ch, RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_qp(conn);
	assert_int_equal(rdma_destroy_id(conn), 0);
	stop(&cli);
	stop(&srv);
}

static void test_reject_carries_private_data(void **state)
{
	struct side srv = { 0 }, cli = { 0 };
	struct rdma_conn_param param = { .retry_count = 7 };
	struct rdma_cm_event *e;

	(void)state;
	start_connect(&srv, &cli, &param);
	e = next_event(srv.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	assert_int_equal(rdma_reject(e->id, "go away", 8), 0);
	{
		struct rdma_cm_id *rejected = e->id;

		rdma_ack_cm_event(e);
		assert_int_equal(rdma_destroy_id(rejected), 0);
	}
	e = next_event(cli.ch, RDMA_CM_EVENT_REJECTED);
	assert_int_equal(e->status, 28);	/* IB_CM_REJ_CONSUMER_DEFINED */
	assert_int_equal(e->param.conn.private_data_len, 148);	/* the IB CM's REJ size */
	assert_string_equal(e->param.conn.private_data, "go away");
	rdma_ack_cm_event(e);
	stop(&cli);
	stop(&srv);
}

static void test_private_data_too_long_is_refused(void **state)
{
	struct side srv = { 0 }, cli = { 0 };
	static const uint8_t big[57];
	struct rdma_conn_param param = { .private_data = big, .private_data_len = 57 };
	int port;

	(void)state;
	port = start_listener(&srv, 16);
	start_client(&cli, port);
	errno = 0;
	assert_int_equal(rdma_connect(cli.id, &param), -1);
	assert_int_equal(errno, EINVAL);
	stop(&cli);
	stop(&srv);
}

static void test_connect_to_closed_port_is_rejected(void **state)
{
	struct side cli = { 0 };
	struct rdma_conn_param param = { .retry_count = 7 };
	struct rdma_cm_event *e;

	(void)state;
	start_client(&cli, closed_port());
	assert_int_equal(rdma_connect(cli.id, &param), 0);
	e = next_event(cli.ch, RDMA_CM_EVENT_REJECTED);
	assert_int_equal(e->status, 8);	/* IB_CM_REJ_INVALID_SERVICE_ID, as on RoCE */
	rdma_ack_cm_event(e);
	stop(&cli);
}

static void test_server_disconnects(void **state)
{
	struct side srv = { 0 }, cli = { 0 };
	struct rdma_cm_id *conn;

	(void)state;
	conn = establish(&srv, &cli);
	assert_int_equal(rdma_disconnect(conn), 0);
	expect_event(srv.ch, RDMA_CM_EVENT_DISCONNECTED);
	expect_event(cli.ch, RDMA_CM_EVENT_DISCONNECTED);
	/* A second disconnect only stops the QP again, and succeeds, as the kernel's does. */
	assert_int_equal(rdma_disconnect(conn), 0);
	rdma_destroy_qp(conn);
	rdma_destroy_id(conn);
	stop(&cli);
	stop(&srv);
}

static void test_destroy_while_connected(void **state)
{
	struct side srv = { 0 }, cli = { 0 };
	struct rdma_cm_id *conn;

	(void)state;
	conn = establish(&srv, &cli);
	/* The client goes away without disconnecting: the server still hears of it. */
	stop(&cli);
	expect_event(srv.ch, RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_qp(conn);
	rdma_destroy_id(conn);
	stop(&srv);
}

static void test_many_connections_one_listener(void **state)
{
	enum { N = 8 };
	struct side srv = { 0 }, cli[N] = { 0 };
	struct rdma_conn_param param = { .retry_count = 7, .rnr_retry_count = 7 };
	struct rdma_cm_id *conn[N];
	uint32_t qpns[N];
	int port;

	(void)state;
	port = start_listener(&srv, 16);
	for (int i = 0; i < N; i++) {
		start_client(&cli[i], port);
		assert_int_equal(rdma_connect(cli[i].id, &param), 0);
	}
	for (int i = 0; i < N; i++)
		conn[i] = accept_one(&srv, NULL, 0);
	for (int i = 0; i < N; i++) {
		expect_event(cli[i].ch, RDMA_CM_EVENT_ESTABLISHED);
		expect_event(srv.ch, RDMA_CM_EVENT_ESTABLISHED);
		qpns[i] = conn[i]->qp->qp_num;
		for (int j = 0; j < i; j++)
			assert_int_not_equal(qpns[i], qpns[j]);
	}
	for (int i = 0; i < N; i++) {
		rdma_disconnect(cli[i].id);
		expect_event(cli[i].ch, RDMA_CM_EVENT_DISCONNECTED);
	}
	/* One DISCONNECTED per server-side id, in whatever order they come. */
	for (int i = 0; i < N; i++)
		expect_event(srv.ch, RDMA_CM_EVENT_DISCONNECTED);
	for (int i = 0; i < N; i++) {
		rdma_destroy_qp(conn[i]);
		rdma_destroy_id(conn[i]);
		stop(&cli[i]);
	}
	stop(&srv);
}

/* A listener that goes away with a request nobody took: its requester hears REJ. */
static void test_listener_destroyed_with_a_request_waiting(void **state)
{
	struct side srv = { 0 }, cli = { 0 };
	struct rdma_conn_param param = { .retry_count = 7 };
	struct pollfd pfd;
	struct rdma_cm_event *e;

	(void)state;
	start_connect(&srv, &cli, &param);
	pfd = (struct pollfd){ .fd = srv.ch->fd, .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, 5000), 1);	/* CONNECT_REQUEST queued, not taken */
	stop(&srv);
	e = next_event(cli.ch, RDMA_CM_EVENT_REJECTED);
	assert_int_equal(e->status, 28);	/* IB_CM_REJ_CONSUMER_DEFINED, as the IB CM's */
	rdma_ack_cm_event(e);
	stop(&cli);
}

/* A requester that went away before the answer: rejecting it still succeeds, as the IB
 * CM's REJ does; there is nobody left to tell. */
static void test_reject_after_the_requester_left(void **state)
{
	struct side srv = { 0 }, cli = { 0 };
	struct rdma_conn_param param = { .retry_count = 7 };
	struct rdma_cm_event *e;
	struct rdma_cm_id *req;

	(void)state;
	start_connect(&srv, &cli, &param);
	e = next_event(srv.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	req = e->id;
	rdma_ack_cm_event(e);
	stop(&cli);
	usleep(200 * 1000);	/* the server's CM sees the connection close */
	assert_int_equal(rdma_reject(req, NULL, 0), 0);
	assert_int_equal(rdma_destroy_id(req), 0);
	stop(&srv);
}

/* librdmacm copies ibv_qp_init_attr into the _ex form and sets comp_mask itself: what the
 * caller left in the padding after sq_sig_all (where comp_mask lies) does not matter. */
static void test_create_qp_ignores_padding(void **state)
{
	struct side cli = { 0 };
	struct ibv_qp_init_attr attr;
	struct sockaddr_in dst = loopback(closed_port());

	(void)state;
	cli.ch = rdma_create_event_channel();
	assert_int_equal(rdma_create_id(cli.ch, &cli.id, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_resolve_addr(cli.id, NULL, (struct sockaddr *)&dst, 2000), 0);
	expect_event(cli.ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	memset(&attr, 0xff, sizeof(attr));
	attr.qp_context = NULL;
	attr.send_cq = attr.recv_cq = NULL;
	attr.srq = NULL;
	attr.cap = (struct ibv_qp_cap){ .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1,
					.max_recv_sge = 1 };
	attr.qp_type = IBV_QPT_RC;
	attr.sq_sig_all = 0;
	assert_int_equal(rdma_create_qp(cli.id, NULL, &attr), 0);
	stop(&cli);
}

static void test_event_channel_fd_works_with_epoll(void **state)
{
	struct side cli = { 0 };
	struct sockaddr_in dst = loopback(closed_port());
	struct epoll_event ev = { .events = EPOLLIN }, out;
	struct rdma_cm_event *e;
	int ep = epoll_create1(0);

	(void)state;
	cli.ch = rdma_create_event_channel();
	assert_int_equal(rdma_create_id(cli.ch, &cli.id, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, cli.ch->fd, &ev), 0);
	assert_int_equal(epoll_wait(ep, &out, 1, 0), 0);	/* nothing yet */
	assert_int_equal(rdma_resolve_addr(cli.id, NULL, (struct sockaddr *)&dst, 2000), 0);
	assert_int_equal(epoll_wait(ep, &out, 1, 5000), 1);
	assert_int_equal(rdma_get_cm_event(cli.ch, &e), 0);
	assert_int_equal(e->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	rdma_ack_cm_event(e);
	assert_int_equal(epoll_wait(ep, &out, 1, 0), 0);	/* drained */
	close(ep);
	stop(&cli);
}

static void test_nonblocking_channel_says_eagain(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *e;

	(void)state;
	assert_non_null(ch);
	assert_int_equal(fcntl(ch->fd, F_SETFL, O_NONBLOCK), 0);
	errno = 0;
	assert_int_equal(rdma_get_cm_event(ch, &e), -1);
	assert_int_equal(errno, EAGAIN);
	rdma_destroy_event_channel(ch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_connect_and_private_data),
		cmocka_unit_test(test_reject_carries_private_data),
		cmocka_unit_test(test_private_data_too_long_is_refused),
		cmocka_unit_test(test_connect_to_closed_port_is_rejected),
		cmocka_unit_test(test_server_disconnects),
		cmocka_unit_test(test_destroy_while_connected),
		cmocka_unit_test(test_many_connections_one_listener),
		cmocka_unit_test(test_listener_destroyed_with_a_request_waiting),
		cmocka_unit_test(test_reject_after_the_requester_left),
		cmocka_unit_test(test_create_qp_ignores_padding),
		cmocka_unit_test(test_event_channel_fd_works_with_epoll),
		cmocka_unit_test(test_nonblocking_channel_says_eagain),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
