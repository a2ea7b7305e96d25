// SPDX-License-Identifier: MIT
/*
 * The order of a disconnect, as on a fabric: what a peer sent before it disconnected is
 * complete before DISCONNECTED is reported, and what we posted before we disconnect leaves.
 *
 * On a fabric the ACK of our last SEND reaches our NIC before the peer's DREQ reaches our
 * CM (the peer's NIC sent the ACK before the receive completed, the DREQ after): when the
 * application reads DISCONNECTED, that SEND has completed. libfabric's ofi_rxm depends on
 * it: it closes the endpoint on DISCONNECTED and fails every send whose completion it has
 * not read (WR_FLUSH_ERR). Here the ACK and the DREQ travel on two sockets read by two
 * threads, so the CM asks the device to take in what arrived first.
 *
 * And a SEND posted while two are unanswered waits for their ACK in the send queue (doorbell
 * batching), where a NIC would have put it on the wire at once: a disconnect right after
 * the post must still send it, not flush it (ofi_rxm completes an inject at once and closes
 * its endpoint when it is done: its last message was lost).
 *
 * Two processes, because the engine is one per process and each side's speed is set when
 * it starts: the server is this program again (exec'd with "serve", plain code: no cmocka
 * there), the client naps after each wake-up of its engine thread (the test hook
 * SOFTRDMA_TEST_ENGINE_NAP_MS) and its ibv_poll_cq drives nothing (SOFTRDMA_POLL_PROGRESS=0).
 * Each test's events fall inside a nap; should the machine be so slow that they do not, the
 * engine does the work first and the test passes without having tested anything, never the
 * other way round.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cm_fixture.h"

#define CLIENT_NAP_MS	"200"
#define SERVER_NAP_MS	"600"	/* the second test's server: its ACKs come after our nap */
#define LAST_SENDS	3
#define MSG		32

/*
 * The next event on ch within 20 s, which must be want (both sides: the server runs no
 * cmocka, and each QP transition of a napping side costs a nap, beyond next_event()'s 5 s).
 */
static int wait_event(struct rdma_event_channel *ch, enum rdma_cm_event_type want,
		      struct rdma_cm_id **id)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *e;
	int ok;

	if (poll(&pfd, 1, 20000) != 1 || rdma_get_cm_event(ch, &e))
		return 0;
	ok = e->event == want;
	if (id)
		*id = e->id;
	rdma_ack_cm_event(e);
	return ok;
}

/* The number of successful receive completions that come within 20 s, up to want. */
static int count_recvs(struct ibv_cq *cq, int want)
{
	struct ibv_wc wc;
	int got = 0;

	for (int i = 0; i < 20000 && got < want; i++) {
		if (ibv_poll_cq(cq, 1, &wc) != 1)
			usleep(1000);
		else if (wc.status == IBV_WC_SUCCESS)
			got++;
	}
	return got;
}

/*
 * One connection, checked by hand (the exit status says which step failed): its QP gets
 * four receives, and then either the server disconnects
 * after the first SEND ("ack") or waits for the client's disconnect and counts the SENDs
 * that came ("count"). The listening port goes to port_fd.
 */
static int serve_one(const char *mode, int port_fd)
{
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1 };
	struct sockaddr_in sin = loopback(0);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	bool counting = !strcmp(mode, "count");
	struct rdma_cm_id *listener, *conn;
	static char buf[4][MSG];
	struct ibv_sge sge[4];
	struct ibv_recv_wr rwr[4], *bad;
	struct ibv_mr *mr;
	int port;

	if (!ch || rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(listener, (struct sockaddr *)&sin) || rdma_listen(listener, 1))
		return 2;
	port = ntohs(rdma_get_src_port(listener));
	if (write(port_fd, &port, sizeof(port)) != sizeof(port))
		return 3;
	if (!wait_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST, &conn) ||
	    rdma_create_qp(conn, NULL, &attr))
		return 4;
	mr = ibv_reg_mr(conn->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		return 5;
	for (int i = 0; i < 4; i++) {
		sge[i] = (struct ibv_sge){ (uintptr_t)buf[i], MSG, mr->lkey };
		rwr[i] = (struct ibv_recv_wr){ .wr_id = i, .sg_list = &sge[i], .num_sge = 1 };
		if (ibv_post_recv(conn->qp, &rwr[i], &bad))
			return 6;
	}
	if (rdma_accept(conn, &param) || !wait_event(ch, RDMA_CM_EVENT_ESTABLISHED, NULL))
		return 7;
	if (counting) {
		/* The SENDs, however many the client's disconnect let out. */
		if (count_recvs(conn->recv_cq, LAST_SENDS) != LAST_SENDS)
			return 8;
		if (!wait_event(ch, RDMA_CM_EVENT_DISCONNECTED, NULL))
			return 9;
	} else if (count_recvs(conn->recv_cq, 1) != 1 || rdma_disconnect(conn) ||
		   !wait_event(ch, RDMA_CM_EVENT_DISCONNECTED, NULL)) {
		/* The SEND came, so its ACK left first: then the DREQ. */
		return 10;
	}
	rdma_destroy_qp(conn);
	ibv_dereg_mr(mr);
	rdma_destroy_id(conn);
	rdma_destroy_id(listener);
	rdma_destroy_event_channel(ch);
	return 0;
}

static pid_t server;
static int server_port;

/* This program again as the server, in mode, its engine napping nap_ms ("0": not). */
static void start_server(const char *mode, const char *nap_ms)
{
	int fds[2];

	assert_int_equal(pipe(fds), 0);
	server = fork();
	assert_true(server >= 0);
	if (!server) {
		char fd_text[16];

		close(fds[0]);
		snprintf(fd_text, sizeof(fd_text), "%d", fds[1]);
		setenv("SOFTRDMA_TEST_ENGINE_NAP_MS", nap_ms, 1);
		unsetenv("SOFTRDMA_POLL_PROGRESS");
		execl("/proc/self/exe", "test_cm_order", "serve", mode, fd_text, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &server_port, sizeof(server_port)), sizeof(server_port));
	close(fds[0]);
}

static void expect_server_exit_0(void)
{
	int status;

	assert_int_equal(waitpid(server, &status, 0), server);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status))
		fail_msg("the server failed at its step %d", WEXITSTATUS(status));
}

static int reap_server(void **state)
{
	int status;

	(void)state;
	if (server > 0 && waitpid(server, &status, WNOHANG) == 0) {
		kill(server, SIGKILL);
		waitpid(server, &status, 0);
	}
	server = 0;
	return 0;
}

/* A client connected to the server, with n SENDs of MSG bytes ready to post. */
struct client {
	struct side side;
	char out[LAST_SENDS][MSG];
	struct ibv_sge sge[LAST_SENDS];
	struct ibv_send_wr wr[LAST_SENDS];
	struct ibv_mr *mr;
};

static void connect_client(struct client *c)
{
	struct rdma_conn_param param = { .retry_count = 7, .rnr_retry_count = 7,
					 .responder_resources = 1, .initiator_depth = 1 };

	start_client(&c->side, server_port);
	c->mr = ibv_reg_mr(c->side.id->pd, c->out, sizeof(c->out), 0);
	assert_non_null(c->mr);
	for (int i = 0; i < LAST_SENDS; i++) {
		snprintf(c->out[i], MSG, "message %d", i);
		c->sge[i] = (struct ibv_sge){ (uintptr_t)c->out[i], MSG, c->mr->lkey };
		c->wr[i] = (struct ibv_send_wr){ .wr_id = 40 + i, .sg_list = &c->sge[i],
						 .num_sge = 1, .opcode = IBV_WR_SEND,
						 .send_flags = IBV_SEND_SIGNALED };
	}
	assert_int_equal(rdma_connect(c->side.id, &param), 0);
	/* Not next_event()'s 5 s: each QP transition of either side costs its engine a nap. */
	assert_true(wait_event(c->side.ch, RDMA_CM_EVENT_ESTABLISHED, NULL));
}

static void post_one(struct client *c, int i)
{
	struct ibv_send_wr *bad;

	assert_int_equal(ibv_post_send(c->side.id->qp, &c->wr[i], &bad), 0);
}

static void close_client(struct client *c)
{
	ibv_dereg_mr(c->mr);
	stop(&c->side);
}

static void test_send_completes_before_disconnected(void **state)
{
	struct client c;
	struct ibv_wc wc;

	(void)state;
	start_server("ack", "0");
	connect_client(&c);
	post_one(&c, 0);
	assert_int_equal(rdma_ack_cm_event(next_event(c.side.ch, RDMA_CM_EVENT_DISCONNECTED)), 0);
	/* Once, without waiting: the ACK came before the DREQ, so the SEND is done. */
	if (ibv_poll_cq(c.side.id->send_cq, 1, &wc) != 1)
		fail_msg("DISCONNECTED was reported before the SEND the peer had acknowledged "
			 "completed");
	assert_int_equal(wc.wr_id, 40);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(rdma_disconnect(c.side.id), 0);
	close_client(&c);
	expect_server_exit_0();
}

/* Three SENDs, the third behind two unanswered ones, then at once our disconnect. */
static void test_posted_sends_leave_before_disconnect(void **state)
{
	struct client c;

	(void)state;
	start_server("count", SERVER_NAP_MS);
	connect_client(&c);
	for (int i = 0; i < LAST_SENDS; i++)
		post_one(&c, i);
	assert_int_equal(rdma_disconnect(c.side.id), 0);
	expect_event(c.side.ch, RDMA_CM_EVENT_DISCONNECTED);
	/* Exit 8: fewer than all of them arrived. */
	expect_server_exit_0();
	close_client(&c);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_send_completes_before_disconnected, reap_server),
		cmocka_unit_test_teardown(test_posted_sends_leave_before_disconnect, reap_server),
	};

	if (argc == 4 && !strcmp(argv[1], "serve"))
		return serve_one(argv[2], atoi(argv[3]));
	/* Read when our engine starts (the first test's first verb); the servers unset them. */
	setenv("SOFTRDMA_TEST_ENGINE_NAP_MS", CLIENT_NAP_MS, 1);
	setenv("SOFTRDMA_POLL_PROGRESS", "0", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
