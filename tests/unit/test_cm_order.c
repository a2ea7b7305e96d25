// SPDX-License-Identifier: MIT
/*
 * What a peer sent before it disconnected is complete before DISCONNECTED is reported.
 *
 * On a fabric the ACK of our last SEND reaches our NIC before the peer's DREQ reaches our
 * CM (the peer's NIC sent the ACK before the receive completed, the DREQ after): when the
 * application reads DISCONNECTED, that SEND has completed. libfabric's ofi_rxm depends on
 * it: it closes the endpoint on DISCONNECTED and fails every send whose completion it has
 * not read (WR_FLUSH_ERR). Here the ACK and the DREQ travel on two sockets read by two
 * threads, so the CM asks the device to take in what arrived first.
 *
 * Two processes, because the engine is one per process and only ours must be slow: the
 * server (a child, plain code: no cmocka there) takes our SEND and disconnects at once,
 * while our engine thread naps after each wake-up (the test hook
 * SOFTRDMA_TEST_ENGINE_NAP_MS, read when the engine starts) and our ibv_poll_cq drives
 * nothing (SOFTRDMA_POLL_PROGRESS=0). The DREQ comes within the nap that follows the ACK's
 * arrival; should the machine be so slow that it does not, the engine reads the ACK first
 * and the test passes without having tested anything, never the other way round.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cm_fixture.h"

#define NAP_MS		"300"
#define MSG		32

/* The child's side, each step checked by hand: its exit status says which one failed. */
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

static int wait_recv(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	int n = 0;

	for (int i = 0; i < 20000 && !(n = ibv_poll_cq(cq, 1, &wc)); i++)
		usleep(1000);
	return n == 1 && wc.status == IBV_WC_SUCCESS;
}

static int serve_one(int port_pipe)
{
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1 };
	struct sockaddr_in sin = loopback(0);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *listener, *conn;
	static char buf[MSG];
	struct ibv_sge sge;
	struct ibv_recv_wr rwr = { .sg_list = &sge, .num_sge = 1 }, *bad;
	struct ibv_mr *mr;
	int port;

	if (!ch || rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(listener, (struct sockaddr *)&sin) || rdma_listen(listener, 1))
		return 2;
	port = ntohs(rdma_get_src_port(listener));
	if (write(port_pipe, &port, sizeof(port)) != sizeof(port))
		return 3;
	if (!wait_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST, &conn) ||
	    rdma_create_qp(conn, NULL, &attr))
		return 4;
	mr = ibv_reg_mr(conn->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		return 5;
	sge = (struct ibv_sge){ (uintptr_t)buf, sizeof(buf), mr->lkey };
	if (ibv_post_recv(conn->qp, &rwr, &bad) || rdma_accept(conn, &param) ||
	    !wait_event(ch, RDMA_CM_EVENT_ESTABLISHED, NULL))
		return 6;
	/* The SEND came, so its ACK left first: now the DREQ. */
	if (!wait_recv(conn->recv_cq) || rdma_disconnect(conn) ||
	    !wait_event(ch, RDMA_CM_EVENT_DISCONNECTED, NULL))
		return 7;
	rdma_destroy_qp(conn);
	ibv_dereg_mr(mr);
	rdma_destroy_id(conn);
	rdma_destroy_id(listener);
	rdma_destroy_event_channel(ch);
	return 0;
}

static pid_t server;
static int server_port;

static int start_server(void **state)
{
	int fds[2];

	(void)state;
	assert_int_equal(pipe(fds), 0);
	server = fork();
	assert_true(server >= 0);
	if (!server) {
		close(fds[0]);
		_exit(serve_one(fds[1]));
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &server_port, sizeof(server_port)), sizeof(server_port));
	close(fds[0]);
	/* Only now, and only here: the child's engine runs at full speed. */
	setenv("SOFTRDMA_TEST_ENGINE_NAP_MS", NAP_MS, 1);
	setenv("SOFTRDMA_POLL_PROGRESS", "0", 1);
	return 0;
}

static int reap_server(void **state)
{
	int status;

	(void)state;
	if (waitpid(server, &status, WNOHANG) == 0) {
		kill(server, SIGKILL);
		waitpid(server, &status, 0);
	}
	return 0;
}

static void test_send_completes_before_disconnected(void **state)
{
	struct rdma_conn_param param = { .retry_count = 7, .rnr_retry_count = 7,
					 .responder_resources = 1, .initiator_depth = 1 };
	struct side cli = { 0 };
	static char out[MSG] = "the last message";
	struct ibv_send_wr swr = { .wr_id = 42, .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_sge sge;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	int status;

	(void)state;
	start_client(&cli, server_port);
	mr = ibv_reg_mr(cli.id->pd, out, sizeof(out), 0);
	assert_non_null(mr);
	sge = (struct ibv_sge){ (uintptr_t)out, sizeof(out), mr->lkey };
	swr.sg_list = &sge;
	assert_int_equal(rdma_connect(cli.id, &param), 0);
	assert_int_equal(rdma_ack_cm_event(next_event(cli.ch, RDMA_CM_EVENT_ESTABLISHED)), 0);
	assert_int_equal(ibv_post_send(cli.id->qp, &swr, &bad), 0);
	assert_int_equal(rdma_ack_cm_event(next_event(cli.ch, RDMA_CM_EVENT_DISCONNECTED)), 0);
	/* Once, without waiting: the ACK came before the DREQ, so the SEND is done. */
	if (ibv_poll_cq(cli.id->send_cq, 1, &wc) != 1)
		fail_msg("DISCONNECTED was reported before the SEND the peer had acknowledged "
			 "completed");
	assert_int_equal(wc.wr_id, 42);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(rdma_disconnect(cli.id), 0);
	ibv_dereg_mr(mr);
	stop(&cli);
	assert_int_equal(waitpid(server, &status, 0), server);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_send_completes_before_disconnected,
						start_server, reap_server),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
