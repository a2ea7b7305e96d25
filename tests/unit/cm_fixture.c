// SPDX-License-Identifier: MIT
/* The rdma_cm tests' shared pieces (cm_fixture.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cm_fixture.h"

struct sockaddr_in loopback(int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return sin;
}

int closed_port(void)
{
	struct sockaddr_in sin = loopback(0);
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	close(fd);
	return ntohs(sin.sin_port);
}

struct rdma_cm_event *next_event(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *e;

	if (poll(&pfd, 1, 5000) != 1)
		fail_msg("no event within 5 s, expected %s", rdma_event_str(want));
	assert_int_equal(rdma_get_cm_event(ch, &e), 0);
	if (e->event != want)
		fail_msg("got %s (status %d), expected %s", rdma_event_str(e->event), e->status,
			 rdma_event_str(want));
	return e;
}

void expect_event(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	assert_int_equal(rdma_ack_cm_event(next_event(ch, want)), 0);
}

void expect_no_event(struct rdma_event_channel *ch, int ms)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *e;

	if (poll(&pfd, 1, ms) == 1 && !rdma_get_cm_event(ch, &e))
		fail_msg("unexpected %s (status %d)", rdma_event_str(e->event), e->status);
}

int start_listener(struct side *s, int backlog)
{
	struct sockaddr_in sin = loopback(0);
	int port;

	s->ch = rdma_create_event_channel();
	assert_non_null(s->ch);
	assert_int_equal(rdma_create_id(s->ch, &s->id, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_bind_addr(s->id, (struct sockaddr *)&sin), 0);
	assert_int_equal(rdma_listen(s->id, backlog), 0);
	port = ntohs(rdma_get_src_port(s->id));
	assert_int_not_equal(port, 0);
	return port;
}

static struct ibv_qp_init_attr small_qp(void)
{
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	return attr;
}

void start_client(struct side *c, int port)
{
	struct sockaddr_in dst = loopback(port);
	struct ibv_qp_init_attr attr = small_qp();

	c->ch = rdma_create_event_channel();
	assert_non_null(c->ch);
	assert_int_equal(rdma_create_id(c->ch, &c->id, NULL, RDMA_PS_TCP), 0);
	if (rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&dst, 2000))
		fail_msg("rdma_resolve_addr: %s", strerror(errno));
	expect_event(c->ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	assert_non_null(c->id->verbs);
	assert_int_equal(rdma_resolve_route(c->id, 2000), 0);
	expect_event(c->ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
	if (rdma_create_qp(c->id, NULL, &attr))
		fail_msg("rdma_create_qp: %s", strerror(errno));
	assert_non_null(c->id->qp);
}

void stop(struct side *s)
{
	if (s->id) {
		if (s->id->qp)
			rdma_destroy_qp(s->id);
		assert_int_equal(rdma_destroy_id(s->id), 0);
	}
	rdma_destroy_event_channel(s->ch);
}

struct rdma_cm_id *accept_one(struct side *srv, const void *pdata, uint8_t len)
{
	struct ibv_qp_init_attr attr = small_qp();
	struct rdma_conn_param param = { .private_data = pdata, .private_data_len = len,
					 .responder_resources = 1, .initiator_depth = 1 };
	struct rdma_cm_event *e = next_event(srv->ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_cm_id *id = e->id;

	assert_ptr_equal(e->listen_id, srv->id);
	assert_int_equal(e->param.conn.private_data_len, 56);	/* the IB CM's REQ size */
	assert_int_equal(rdma_ack_cm_event(e), 0);
	if (rdma_create_qp(id, NULL, &attr))
		fail_msg("rdma_create_qp: %s", strerror(errno));
	if (rdma_accept(id, &param))
		fail_msg("rdma_accept: %s", strerror(errno));
	return id;
}

/* One SEND from a to b over their connected QPs, checked byte for byte. */
static void send_one(struct rdma_cm_id *a, struct rdma_cm_id *b, const char *text)
{
	char out[32] = { 0 }, in[32] = { 0 };
	struct ibv_mr *mr_out = ibv_reg_mr(a->pd, out, sizeof(out), 0);
	struct ibv_mr *mr_in = ibv_reg_mr(b->pd, in, sizeof(in), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge sge_out = { (uintptr_t)out, sizeof(out), mr_out->lkey };
	struct ibv_sge sge_in = { (uintptr_t)in, sizeof(in), mr_in->lkey };
	struct ibv_send_wr swr = { .sg_list = &sge_out, .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED }, *bad_s;
	struct ibv_recv_wr rwr = { .sg_list = &sge_in, .num_sge = 1 }, *bad_r;
	struct ibv_wc wc;
	int n = 0;

	strncpy(out, text, sizeof(out) - 1);
	assert_int_equal(ibv_post_recv(b->qp, &rwr, &bad_r), 0);
	assert_int_equal(ibv_post_send(a->qp, &swr, &bad_s), 0);
	for (int i = 0; i < 5000 && !(n = ibv_poll_cq(b->recv_cq, 1, &wc)); i++)
		usleep(1000);
	assert_int_equal(n, 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_string_equal(in, text);
	for (int i = 0; i < 5000 && !(n = ibv_poll_cq(a->send_cq, 1, &wc)); i++)
		usleep(1000);
	assert_int_equal(n, 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	ibv_dereg_mr(mr_out);
	ibv_dereg_mr(mr_in);
}

void legit_connection(struct side *srv, int port)
{
	struct rdma_conn_param param = { .retry_count = 7, .rnr_retry_count = 7,
					 .responder_resources = 1, .initiator_depth = 1 };
	struct side cli = { 0 };
	struct rdma_cm_id *conn;

	start_client(&cli, port);
	assert_int_equal(rdma_connect(cli.id, &param), 0);
	conn = accept_one(srv, NULL, 0);
	expect_event(cli.ch, RDMA_CM_EVENT_ESTABLISHED);
	expect_event(srv->ch, RDMA_CM_EVENT_ESTABLISHED);
	send_one(cli.id, conn, "from the client");
	send_one(conn, cli.id, "from the server");
	assert_int_equal(rdma_disconnect(cli.id), 0);
	expect_event(cli.ch, RDMA_CM_EVENT_DISCONNECTED);
	expect_event(srv->ch, RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_qp(conn);
	assert_int_equal(rdma_destroy_id(conn), 0);
	stop(&cli);
}
