// SPDX-License-Identifier: MIT
/*
 * A peer that speaks the wire protocol and lies: forged and malformed frames sent straight
 * to a victim QP's stream. Whatever arrives, the victim writes nothing outside what its
 * registrations allow (guard pages around the region), refuses with the NAK a NIC sends,
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

#define FAKE_PEER_QPN 0x000101	/* port 1: nobody listens there, nobody dials from there */

struct hostile {
	struct rc_env *env;
	struct rc_buf *buf;
	struct ibv_mr *mr;
	int fd;			/* our stream to the victim (env->b) */
};

/* Victim env->b, connected to a peer that does not exist; we speak for that peer. */
static void open_victim(struct rc_env *env, struct hostile *h)
{
	struct rc_qp_opts o;
	struct wire_hello hello = {
		.magic = htonl(WIRE_MAGIC), .version = htons(WIRE_VERSION),
		.length = htons(sizeof(hello)), .src_qpn = htonl(FAKE_PEER_QPN),
	};
	struct sockaddr_in sa = { .sin_family = AF_INET };

	rc_default_opts(&o);
	rc_create_end(env, &o, &env->b);
	rc_connect(env->b.qp, &o, FAKE_PEER_QPN, &env->gid);
	h->env = env;
	h->buf = rc_alloc(env, 4096);
	h->mr = rc_reg(env, env->pd, h->buf->p, 4096, RC_ACCESS_ALL);
	hello.dst_qpn = htonl(env->b.qp->qp_num);
	memcpy(hello.src_gid, env->gid.raw, 16);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)(env->b.qp->qp_num >> 8));
	h->fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(h->fd >= 0);
	assert_int_equal(connect(h->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(send(h->fd, &hello, sizeof(hello), 0), (ssize_t)sizeof(hello));
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

/* Nothing around or in the region changed: it was all zero and stays so. */
static void expect_untouched(struct hostile *h)
{
	for (size_t i = 0; i < h->buf->cap; i++)
		if (h->buf->p[i])
			fail_msg("byte %zu of the region was written", i);
}

static void close_victim(struct hostile *h)
{
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

static void test_hello_from_another_qp_is_not_heard(void **state)
{
	struct rc_env *env = *state;
	struct hostile h;
	struct wire_hello hello = {
		.magic = htonl(WIRE_MAGIC), .version = htons(WIRE_VERSION),
		.length = htons(sizeof(hello)), .src_qpn = htonl(FAKE_PEER_QPN + 1),
	};
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct pollfd pfd;
	char byte;
	int fd;

	open_victim(env, &h);	/* the genuine peer's stream is up too */
	hello.dst_qpn = htonl(env->b.qp->qp_num);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)(env->b.qp->qp_num >> 8));
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	send(fd, &hello, sizeof(hello), 0);
	/* The victim hangs up on an impostor: a QP takes traffic from its peer only. */
	pfd.fd = fd;
	pfd.events = POLLIN;
	assert_int_equal(poll(&pfd, 1, RC_WAIT_MS), 1);
	assert_int_equal(recv(fd, &byte, 1, 0), 0);
	close(fd);
	assert_int_equal(rc_state(env->b.qp), IBV_QPS_RTS);
	expect_untouched(&h);
	/* ...and the genuine peer's stream still works. */
	{
		struct wire_packet pkt = { .opcode = OP_RC_WRITE_ONLY, .ack_req = true };
		struct wire_packet resp;

		pkt.va = (uintptr_t)h.buf->p;
		pkt.rkey = h.mr->rkey;
		pkt.dma_len = 8;
		pkt.payload_len = 8;
		send_request(&h, &pkt, 8);
		read_response(&h, &resp);
		assert_int_equal(resp.syndrome & AETH_TYPE_MASK, AETH_ACK);
	}
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
	rc_connect(env->b.qp, &o, FAKE_PEER_QPN, &env->gid);
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
		cmocka_unit_test_setup_teardown(test_truncated_frame_touches_only_the_named_range,
						rc_setup, rc_teardown),
		cmocka_unit_test_setup_teardown(test_garbage_hello_is_hung_up_on, rc_setup,
						rc_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
