// SPDX-License-Identifier: MIT
/*
 * A peer that speaks the wire protocol and lies: forged and malformed frames sent straight
 * to a victim QP's stream. The peer is a connected one: it owns its QPN (a listener on the
 * port the QPN names answers the victim's question about its stream, as its engine would),
 * so its stream is bound; what it sends then is hostile. Whatever arrives, the victim
 * writes nothing outside what its registrations allow, refuses with the NAK a NIC sends,
 * and the process carries on. Run under `softrdma run` (ctest does).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "emu/wire.h"
#include "rc_fixture.h"

#define NOBODY_QPN 0x000101	/* port 1: nobody listens there, nobody answers for it */

struct hostile {
	struct rc_env *env;
	struct rc_buf *buf;
	struct ibv_mr *mr;
	int listen_fd;		/* the port our QPN names: where the victim asks about streams */
	uint32_t qpn;		/* ours */
	int fd;			/* our stream to the victim (env->b) */
	int victims_fd;		/* the victim's stream to us, held open and never read */
};

/* A stream to the victim env->b whose hello claims src_qpn. */
static int open_stream(struct rc_env *env, uint32_t src_qpn)
{
	struct wire_hello hello = {
		.magic = htonl(WIRE_MAGIC), .version = htons(WIRE_VERSION),
		.length = htons(sizeof(hello)), .kind = HELLO_STREAM, .src_qpn = htonl(src_qpn),
		.dst_qpn = htonl(env->b.qp->qp_num),
	};
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	memcpy(hello.src_gid, env->gid.raw, 16);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)(env->b.qp->qp_num >> 8));
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(send(fd, &hello, sizeof(hello), 0), (ssize_t)sizeof(hello));
	return fd;
}

/* The next connection to our listener, and its hello. */
static int accept_hello(struct hostile *h, struct wire_hello *q)
{
	struct pollfd pfd = { .fd = h->listen_fd, .events = POLLIN };
	size_t have = 0;
	int fd;

	assert_int_equal(poll(&pfd, 1, RC_WAIT_MS), 1);
	fd = accept(h->listen_fd, NULL, NULL);
	assert_true(fd >= 0);
	while (have < sizeof(*q)) {
		ssize_t n = recv(fd, (uint8_t *)q + have, sizeof(*q) - have, 0);

		assert_true(n > 0);
		have += (size_t)n;
	}
	return fd;
}

/* The victim asks our listener whether the stream it got is ours; we answer. */
static void answer_question(struct hostile *h, uint8_t verdict)
{
	struct wire_verdict v = {
		.magic = htonl(WIRE_MAGIC), .version = htons(WIRE_VERSION),
		.length = htons(sizeof(v)), .verdict = verdict,
	};
	struct wire_hello q;
	int fd = accept_hello(h, &q);

	/* The victim's own stream to us (its QP is RTS) may come first: hold it. */
	if (q.kind == HELLO_STREAM && h->victims_fd < 0) {
		h->victims_fd = fd;
		fd = accept_hello(h, &q);
	}
	assert_int_equal(q.kind, HELLO_VERIFY);
	assert_int_equal(ntohl(q.src_qpn), h->qpn);
	assert_int_equal(send(fd, &v, sizeof(v), 0), (ssize_t)sizeof(v));
	close(fd);
}

/* Victim env->b, connected to a peer we speak for, and our stream to it, bound. */
static void open_victim(struct rc_env *env, struct hostile *h)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	struct rc_qp_opts o;

	h->env = env;
	h->victims_fd = -1;
	h->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(h->listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(h->listen_fd, 8), 0);
	assert_int_equal(getsockname(h->listen_fd, (struct sockaddr *)&sa, &len), 0);
	h->qpn = (uint32_t)ntohs(sa.sin_port) << 8 | 1;
	rc_default_opts(&o);
	rc_create_end(env, &o, &env->b);
	rc_connect(env->b.qp, &o, h->qpn, &env->gid);
	h->buf = rc_alloc(env, 4096);
	h->mr = rc_reg(env, env->pd, h->buf->p, 4096, RC_ACCESS_ALL);
	h->fd = open_stream(env, h->qpn);
	answer_question(h, VERDICT_MINE);
}

static void send_bytes(struct hostile *h, const void *p, size_t n)
{
	assert_int_equal(send(h->fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* One request frame: headers from pkt, then payload_bytes of 0xee (any length we like). */
static void send_request(struct hostile *h, struct wire_packet *pkt, size_t payload_bytes)
{
	uint8_t hdr[4 + WIRE_MAX_HDR];
	unsigned int len;
	uint8_t *payload = malloc(payload_bytes + 1);

	pkt->qpn = pkt->qpn ? pkt->qpn : h->env->b.qp->qp_num;
	len = wire_build(hdr, pkt);
	send_bytes(h, hdr, len);
	memset(payload, 0xee, payload_bytes);
	if (payload_bytes)
		send_bytes(h, payload, payload_bytes);
	free(payload);
}

/* The next response frame, within RC_WAIT_MS. */
static void read_response(struct hostile *h, struct wire_packet *pkt)
{
	uint8_t buf[4 + WIRE_MAX_HDR];
	struct pollfd pfd = { .fd = h->fd, .events = POLLIN };
	uint32_t frame_len;
	size_t have = 0, need = 5;

	while (have < need) {
		ssize_t n;

		assert_int_equal(poll(&pfd, 1, RC_WAIT_MS), 1);
		n = recv(h->fd, buf + have, need - have, 0);
		assert_true(n > 0);
		have += (size_t)n;
		if (have == 5)
			need = 4 + wire_header_len(buf[4]);
	}
	memcpy(&frame_len, buf, 4);
	assert_int_equal(wire_parse(buf + 4, ntohl(frame_len), pkt), 0);
}

static void expect_nak(struct hostile *h, uint8_t code)
{
	struct wire_packet resp;

	read_response(h, &resp);
	assert_int_equal(resp.opcode, OP_RC_ACK);
	assert_int_equal(resp.syndrome, AETH_NAK | code);
}

/* Nothing in the region changed past its first n bytes: it was all zero and stays so. */
static void expect_untouched_but(struct hostile *h, size_t n)
{
	for (size_t i = n; i < h->buf->cap; i++)
		if (h->buf->p[i])
			fail_msg("byte %zu of the region was written", i);
}

static void expect_untouched(struct hostile *h)
{
	expect_untouched_but(h, 0);
}

static void close_victim(struct hostile *h)
{
	if (h->victims_fd >= 0)
		close(h->victims_fd);
	close(h->listen_fd);
	close(h->fd);
}

static void test_write_is_placed_when_allowed(void **state)
{
	struct hostile h;
	struct wire_packet pkt = { .opcode = OP_RC_WRITE_ONLY, .ack_req = true };
	struct wire_packet resp;

	open_victim(*state, &h);
	pkt.va = (uintptr_t)h.buf->p + 100;
	pkt.rkey = h.mr->rkey;
	pkt.dma_len = 64;
	pkt.payload_len = 64;
	send_request(&h, &pkt, 64);
	read_response(&h, &resp);
	assert_int_equal(resp.opcode, OP_RC_ACK);
	assert_int_equal(resp.syndrome & AETH_TYPE_MASK, AETH_ACK);
	for (size_t i = 0; i < h.buf->cap; i++)
		assert_int_equal(h.buf->p[i], i >= 100 && i < 164 ? 0xee : 0);
	close_victim(&h);
}

static void test_payload_longer_than_dma_len_is_refused(void **state)
{
	struct hostile h;
	struct wire_packet pkt = { .opcode = OP_RC_WRITE_ONLY, .ack_req = true };

	open_victim(*state, &h);
	pkt.va = (uintptr_t)h.buf->p + h.buf->cap - 16;
	pkt.rkey = h.mr->rkey;
	pkt.dma_len = 16;	/* in bounds... */
	pkt.payload_len = 4096;	/* ...but carrying a page more: it would run off the end */
	send_request(&h, &pkt, 4096);
	expect_nak(&h, NAK_INVALID_REQUEST);
	rc_wait_state(h.env->b.qp, IBV_QPS_ERR);
	expect_untouched(&h);
	close_victim(&h);
}

static void test_range_wrapping_2_64_is_refused(void **state)
{
	struct hostile h;
	struct wire_packet pkt = { .opcode = OP_RC_WRITE_ONLY, .ack_req = true };

	open_victim(*state, &h);
	pkt.va = UINT64_MAX - 7;
	pkt.rkey = h.mr->rkey;
	pkt.dma_len = 64;
	pkt.payload_len = 64;
	send_request(&h, &pkt, 64);
	expect_nak(&h, NAK_REMOTE_ACCESS);
	rc_wait_state(h.env->b.qp, IBV_QPS_ERR);
	expect_untouched(&h);
	close_victim(&h);
}

static void test_guessed_rkeys_are_refused(void **state)
{
	struct hostile h;
	struct wire_packet pkt = { .opcode = OP_RC_WRITE_ONLY, .ack_req = true };

	open_victim(*state, &h);
	/* A neighbour of the real key: keys are not sequential, so it names nothing. */
	pkt.va = (uintptr_t)h.buf->p;
	pkt.rkey = h.mr->rkey + 1;
	pkt.dma_len = 8;
	pkt.payload_len = 8;
	send_request(&h, &pkt, 8);
	expect_nak(&h, NAK_REMOTE_ACCESS);
	rc_wait_state(h.env->b.qp, IBV_QPS_ERR);
	expect_untouched(&h);
	close_victim(&h);
}

static void test_unknown_opcode_errors_the_qp(void **state)
{
	struct hostile h;
	uint8_t frame[4 + 12] = { 0, 0, 0, 12, 0xff };

	open_victim(*state, &h);
	send_bytes(&h, frame, sizeof(frame));
	rc_wait_state(h.env->b.qp, IBV_QPS_ERR);
	expect_untouched(&h);
	close_victim(&h);
}

static void test_length_word_shorter_than_headers_errors_the_qp(void **state)
{
	struct hostile h;
	struct wire_packet pkt = { .opcode = OP_RC_WRITE_ONLY };
	uint8_t hdr[4 + WIRE_MAX_HDR];
	unsigned int len;

	open_victim(*state, &h);
	pkt.qpn = h.env->b.qp->qp_num;
	len = wire_build(hdr, &pkt);
	hdr[3] = 3;	/* a length that cannot even hold the BTH */
	send_bytes(&h, hdr, len);
	rc_wait_state(h.env->b.qp, IBV_QPS_ERR);
	expect_untouched(&h);
	close_victim(&h);
}

static void test_frame_for_another_qp_errors_this_one(void **state)
{
	struct hostile h;
	struct wire_packet pkt = { .opcode = OP_RC_WRITE_ONLY, .ack_req = true };

	open_victim(*state, &h);
	pkt.qpn = h.env->b.qp->qp_num ^ 1;
	pkt.va = (uintptr_t)h.buf->p;
	pkt.rkey = h.mr->rkey;
	pkt.dma_len = 8;
	pkt.payload_len = 8;
	send_request(&h, &pkt, 8);
	rc_wait_state(h.env->b.qp, IBV_QPS_ERR);
	expect_untouched(&h);
	close_victim(&h);
}

static void test_response_opcode_on_request_stream_errors_the_qp(void **state)
{
	struct hostile h;
	struct wire_packet pkt = { .opcode = OP_RC_READ_RESPONSE_ONLY };

	open_victim(*state, &h);
	pkt.payload_len = 64;
	send_request(&h, &pkt, 64);
	rc_wait_state(h.env->b.qp, IBV_QPS_ERR);
	expect_untouched(&h);
	close_victim(&h);
}

/* The victim hangs up on fd: its peer closes, with nothing said. */
static void expect_hung_up(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char byte;

	assert_int_equal(poll(&pfd, 1, RC_WAIT_MS), 1);
	assert_true(recv(fd, &byte, 1, 0) <= 0);
	close(fd);
}

/* The genuine peer's stream still works: a WRITE is ACKed. */
static void expect_genuine_stream_works(struct hostile *h)
{
	struct wire_packet pkt = { .opcode = OP_RC_WRITE_ONLY, .ack_req = true };
	struct wire_packet resp;

	pkt.va = (uintptr_t)h->buf->p;
	pkt.rkey = h->mr->rkey;
	pkt.dma_len = 8;
	pkt.payload_len = 8;
	send_request(h, &pkt, 8);
	read_response(h, &resp);
	assert_int_equal(resp.syndrome & AETH_TYPE_MASK, AETH_ACK);
}

/* Someone claims our QPN, but the engine that owns it says the stream is not its. */
static void test_stream_its_qpn_disowns_is_hung_up_on(void **state)
{
	struct hostile h;
	int fd;

	open_victim(*state, &h);	/* the genuine peer's stream is up */
	fd = open_stream(h.env, h.qpn);
	answer_question(&h, VERDICT_NOT_MINE);
	expect_hung_up(fd);
	assert_int_equal(rc_state(h.env->b.qp), IBV_QPS_RTS);
	expect_genuine_stream_works(&h);
	expect_untouched_but(&h, 8);
	close_victim(&h);
}

/* A stream from another QP than the victim's peer is refused without asking anyone. */
static void test_hello_from_another_qp_is_not_heard(void **state)
{
	struct hostile h;
	int fd;

	open_victim(*state, &h);
	fd = open_stream(h.env, h.qpn + 1);
	expect_hung_up(fd);
	assert_int_equal(rc_state(h.env->b.qp), IBV_QPS_RTS);
	expect_genuine_stream_works(&h);
	close_victim(&h);
}

/* The next request frame the victim sends us on its own stream. */
static void read_victims_request(struct hostile *h, struct wire_packet *pkt)
{
	uint8_t buf[4 + WIRE_MAX_HDR + 64];
	struct pollfd pfd = { .fd = h->victims_fd, .events = POLLIN };
	uint32_t frame_len = 0;
	size_t have = 0, need = 4;

	while (have < need) {
		ssize_t n;

		assert_int_equal(poll(&pfd, 1, RC_WAIT_MS), 1);
		n = recv(h->victims_fd, buf + have, need - have, 0);
		assert_true(n > 0);
		have += (size_t)n;
		if (have == 4) {
			memcpy(&frame_len, buf, 4);
			need = 4 + ntohl(frame_len);
			assert_true(need <= sizeof(buf));
		}
	}
	assert_int_equal(wire_parse(buf + 4, ntohl(frame_len), pkt), 0);
}

/*
 * The peer acknowledges the victim's SEND only inside its own next request (BTH_ACKED),
 * never with an ACK on the victim's stream: the victim completes its SEND from that, before
 * the receive the request fills, as one RoCE wire orders an ACK before a later request.
 */
static void test_piggybacked_ack_completes_the_send_first(void **state)
{
	struct hostile h;
	struct wire_packet req, pkt = { .opcode = OP_RC_SEND_ONLY, .ack_req = true };
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;
	struct ibv_wc wc;

	open_victim(*state, &h);
	sge = rc_sge(h.buf->p, 16, h.mr);
	rc_post_recv(h.env->b.qp, 1, &sge, 1);
	assert_int_equal(ibv_post_send(h.env->b.qp, &wr, &bad), 0);
	/* The victim's stream to us was held by answer_question(): its SEND arrives there. */
	assert_true(h.victims_fd >= 0);
	read_victims_request(&h, &req);
	assert_int_equal(req.opcode, OP_RC_SEND_ONLY);
	rc_expect_no_wc(h.env->b.scq, RC_QUIET_MS);	/* nothing has acknowledged it yet */
	pkt.acked = true;
	pkt.acked_psn = req.psn;
	pkt.payload_len = 8;
	send_request(&h, &pkt, 8);
	rc_expect_wc(h.env->b.scq, 7, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(h.env->b.rcq, 1, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.byte_len, 8);
	close_victim(&h);
}

static void test_truncated_frame_touches_only_the_named_range(void **state)
{
	struct hostile h;
	struct wire_packet pkt = { .opcode = OP_RC_WRITE_ONLY, .ack_req = true };

	open_victim(*state, &h);
	pkt.va = (uintptr_t)h.buf->p + 1000;
	pkt.rkey = h.mr->rkey;
	pkt.dma_len = 2000;
	pkt.payload_len = 2000;
	send_request(&h, &pkt, 300);	/* promises 2000 bytes, sends 300, hangs up */
	close_victim(&h);
	/* Whatever arrived may be placed, inside the range the request named, nowhere else. */
	usleep(200 * 1000);
	for (size_t i = 0; i < h.buf->cap; i++)
		if (h.buf->p[i] && (i < 1000 || i >= 1300))
			fail_msg("byte %zu outside the 300 bytes sent was written", i);
	assert_int_equal(rc_state(h.env->b.qp), IBV_QPS_RTS);
}

static void test_garbage_hello_is_hung_up_on(void **state)
{
	struct rc_env *env = *state;
	struct rc_qp_opts o;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char junk[64], byte;
	struct pollfd pfd;
	int fd;

	rc_default_opts(&o);
	rc_create_end(env, &o, &env->b);
	rc_connect(env->b.qp, &o, NOBODY_QPN, &env->gid);
	memset(junk, 'A', sizeof(junk));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)(env->b.qp->qp_num >> 8));
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	send(fd, junk, sizeof(junk), 0);
	pfd.fd = fd;
	pfd.events = POLLIN;
	assert_int_equal(poll(&pfd, 1, RC_WAIT_MS), 1);
	assert_true(recv(fd, &byte, 1, 0) <= 0);
	close(fd);
	assert_int_equal(rc_state(env->b.qp), IBV_QPS_RTS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_write_is_placed_when_allowed, rc_setup,
						rc_teardown),
		cmocka_unit_test_setup_teardown(test_payload_longer_than_dma_len_is_refused,
						rc_setup, rc_teardown),
		cmocka_unit_test_setup_teardown(test_range_wrapping_2_64_is_refused, rc_setup,
						rc_teardown),
		cmocka_unit_test_setup_teardown(test_guessed_rkeys_are_refused, rc_setup,
						rc_teardown),
		cmocka_unit_test_setup_teardown(test_unknown_opcode_errors_the_qp, rc_setup,
						rc_teardown),
		cmocka_unit_test_setup_teardown(test_length_word_shorter_than_headers_errors_the_qp,
						rc_setup, rc_teardown),
		cmocka_unit_test_setup_teardown(test_frame_for_another_qp_errors_this_one, rc_setup,
						rc_teardown),
		cmocka_unit_test_setup_teardown(test_response_opcode_on_request_stream_errors_the_qp,
						rc_setup, rc_teardown),
		cmocka_unit_test_setup_teardown(test_hello_from_another_qp_is_not_heard, rc_setup,
						rc_teardown),
		cmocka_unit_test_setup_teardown(test_stream_its_qpn_disowns_is_hung_up_on,
						rc_setup, rc_teardown),
		cmocka_unit_test_setup_teardown(test_piggybacked_ack_completes_the_send_first,
						rc_setup, rc_teardown),
		cmocka_unit_test_setup_teardown(test_truncated_frame_touches_only_the_named_range,
						rc_setup, rc_teardown),
		cmocka_unit_test_setup_teardown(test_garbage_hello_is_hung_up_on, rc_setup,
						rc_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
