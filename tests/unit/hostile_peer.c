// SPDX-License-Identifier: MIT
/* A peer that forges the wire protocol; see hostile_peer.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "hostile_peer.h"

void hostile_fill_header(void *msg, size_t len)
{
	struct wire_hello *m = msg;	/* the header both messages start with */

	m->magic = htonl(WIRE_MAGIC);
	m->version = htons(WIRE_VERSION);
	m->length = htons((uint16_t)len);
}

uint16_t hostile_describe_end(const struct sockaddr *sa, uint8_t addr[16])
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

	if (sa->sa_family == AF_INET6) {
		memcpy(addr, &sin6->sin6_addr, 16);
		return sin6->sin6_port;
	}
	memset(addr, 0, 16);
	addr[10] = addr[11] = 0xff;
	memcpy(addr + 12, &sin->sin_addr, 4);
	return sin->sin_port;
}

int hostile_open_stream(struct hostile *h, uint32_t src_qpn)
{
	struct wire_hello hello = {
		.kind = HELLO_STREAM, .src_qpn = htonl(src_qpn),
		.dst_qpn = htonl(h->victim->qp->qp_num),
	};
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	hostile_fill_header(&hello, sizeof(hello));
	memcpy(hello.src_gid, h->env->gid.raw, 16);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)(h->victim->qp->qp_num >> 8));
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(send(fd, &hello, sizeof(hello), MSG_NOSIGNAL), (ssize_t)sizeof(hello));
	return fd;
}

int hostile_accept_hello(struct hostile *h, struct wire_hello *q)
{
	struct pollfd pfd = { .fd = h->listen_fd, .events = POLLIN };
	size_t have = 0;
	int fd;

	assert_int_equal(poll(&pfd, 1, RC_WAIT_MS), 1);
	fd = accept(h->listen_fd, NULL, NULL);
	assert_true(fd >= 0);
	while (have < sizeof(*q)) {
		ssize_t n;

		pfd.fd = fd;
		assert_int_equal(poll(&pfd, 1, RC_WAIT_MS), 1);
		n = recv(fd, (uint8_t *)q + have, sizeof(*q) - have, 0);
		assert_true(n > 0);
		have += (size_t)n;
	}
	return fd;
}

void hostile_accept_victims_stream(struct hostile *h)
{
	if (h->victims_fd >= 0)
		return;
	h->victims_fd = hostile_accept_hello(h, &h->victims_hello);
	assert_int_equal(h->victims_hello.kind, HELLO_STREAM);
}

void hostile_answer(struct hostile *h, struct wire_verdict *v)
{
	struct wire_hello q;
	int fd = hostile_accept_hello(h, &q);

	/* The victim's own stream to us (its QP is RTS) may come first: hold it. */
	if (q.kind == HELLO_STREAM && h->victims_fd < 0) {
		h->victims_fd = fd;
		h->victims_hello = q;
		fd = hostile_accept_hello(h, &q);
	}
	assert_int_equal(q.kind, HELLO_VERIFY);
	assert_int_equal(ntohl(q.src_qpn), h->qpn);
	hostile_fill_header(v, sizeof(*v));
	assert_int_equal(send(fd, v, sizeof(*v), MSG_NOSIGNAL), (ssize_t)sizeof(*v));
	close(fd);
}

void hostile_answer_question(struct hostile *h, uint8_t verdict)
{
	struct wire_verdict v = { .verdict = verdict };

	hostile_answer(h, &v);
}

/* Reads exactly n bytes of fd within RC_WAIT_MS. */
static void read_exactly(int fd, void *p, size_t n)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	size_t have = 0;

	while (have < n) {
		ssize_t got;

		assert_int_equal(poll(&pfd, 1, RC_WAIT_MS), 1);
		got = recv(fd, (uint8_t *)p + have, n - have, 0);
		assert_true(got > 0);
		have += (size_t)got;
	}
}

void hostile_ask_about_victims_stream(struct hostile *h, struct wire_verdict *v)
{
	struct wire_hello q = { .kind = HELLO_VERIFY, .src_qpn = htonl(h->victim->qp->qp_num),
				.dst_qpn = htonl(h->qpn) };
	struct sockaddr_storage req, resp;
	socklen_t len = sizeof(req);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd;

	hostile_accept_victims_stream(h);
	hostile_fill_header(&q, sizeof(q));
	assert_int_equal(getpeername(h->victims_fd, (struct sockaddr *)&req, &len), 0);
	len = sizeof(resp);
	assert_int_equal(getsockname(h->victims_fd, (struct sockaddr *)&resp, &len), 0);
	q.req_port = hostile_describe_end((struct sockaddr *)&req, q.req_addr);
	q.resp_port = hostile_describe_end((struct sockaddr *)&resp, q.resp_addr);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)(h->victim->qp->qp_num >> 8));
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(send(fd, &q, sizeof(q), MSG_NOSIGNAL), (ssize_t)sizeof(q));
	read_exactly(fd, v, sizeof(*v));
	close(fd);
}

static void prepare(struct hostile *h, struct rc_env *env, struct rc_end *victim,
		    enum ibv_qp_type type, bool one_cq)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	struct rc_qp_opts o;

	memset(h, 0, sizeof(*h));
	h->env = env;
	h->victim = victim;
	h->fd = -1;
	h->victims_fd = -1;
	h->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(h->listen_fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(h->listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(h->listen_fd, 8), 0);
	assert_int_equal(getsockname(h->listen_fd, (struct sockaddr *)&sa, &len), 0);
	h->qpn = (uint32_t)ntohs(sa.sin_port) << 8 | 1;
	if (type == IBV_QPT_UC) {
		rc_create_uc_end(env, victim, NULL);
		rc_connect_uc(env, victim->qp, h->qpn, RC_ACCESS_ALL);
	} else {
		rc_default_opts(&o);
		o.one_cq = one_cq;
		rc_create_end(env, &o, victim);
		rc_connect(victim->qp, &o, h->qpn, &env->gid);
	}
	h->buf = rc_alloc(env, HOSTILE_BUF_LEN);
	h->mr = rc_reg(env, env->pd, h->buf->p, HOSTILE_BUF_LEN, RC_ACCESS_ALL);
}

void hostile_prepare(struct hostile *h, struct rc_env *env, struct rc_end *victim,
		     enum ibv_qp_type type)
{
	prepare(h, env, victim, type, false);
}

void hostile_open_victim(struct hostile *h, struct rc_env *env, struct rc_end *victim,
			 enum ibv_qp_type type)
{
	hostile_prepare(h, env, victim, type);
	h->fd = hostile_open_stream(h, h->qpn);
	hostile_answer_question(h, VERDICT_MINE);
}

void hostile_open_victim_one_cq(struct hostile *h, struct rc_env *env, struct rc_end *victim)
{
	prepare(h, env, victim, IBV_QPT_RC, true);
	h->fd = hostile_open_stream(h, h->qpn);
	hostile_answer_question(h, VERDICT_MINE);
}

void hostile_send_bytes(struct hostile *h, const void *p, size_t n)
{
	assert_int_equal(send(h->fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

void hostile_send_request(struct hostile *h, struct wire_packet *pkt, size_t payload_bytes)
{
	uint8_t hdr[4 + WIRE_MAX_HDR];
	unsigned int len;
	uint8_t *payload = malloc(payload_bytes + 1);

	assert_non_null(payload);
	pkt->qpn = pkt->qpn ? pkt->qpn : h->victim->qp->qp_num;
	len = wire_build(hdr, pkt);
	hostile_send_bytes(h, hdr, len);
	memset(payload, 0xee, payload_bytes);
	if (payload_bytes)
		hostile_send_bytes(h, payload, payload_bytes);
	free(payload);
}

/* The next frame's headers on fd (its payload, if any, is left unread). */
static void read_frame_headers(int fd, struct wire_packet *pkt)
{
	uint8_t buf[4 + WIRE_MAX_HDR];
	uint32_t frame_len;
	unsigned int hdr_len;

	read_exactly(fd, buf, 5);
	hdr_len = wire_header_len(buf[4]);
	assert_true(hdr_len >= 1);
	read_exactly(fd, buf + 5, hdr_len - 1);
	memcpy(&frame_len, buf, 4);
	assert_int_equal(wire_parse(buf + 4, ntohl(frame_len), pkt), 0);
}

void hostile_read_response(struct hostile *h, struct wire_packet *pkt)
{
	read_frame_headers(h->fd, pkt);
}

void hostile_expect_nak(struct hostile *h, uint8_t code)
{
	struct wire_packet resp;

	hostile_read_response(h, &resp);
	assert_int_equal(resp.opcode, OP_RC_ACK);
	assert_int_equal(resp.syndrome, AETH_NAK | code);
}

void hostile_read_victims_request(struct hostile *h, struct wire_packet *pkt)
{
	uint8_t payload[64];

	read_frame_headers(h->victims_fd, pkt);
	assert_true(pkt->payload_len <= sizeof(payload));
	if (pkt->payload_len)
		read_exactly(h->victims_fd, payload, (size_t)pkt->payload_len);
}

void hostile_expect_stream_works(struct hostile *h)
{
	struct wire_packet pkt = { .opcode = OP_RC_WRITE_ONLY, .ack_req = true };
	struct wire_packet resp;

	pkt.va = (uintptr_t)h->buf->p;
	pkt.rkey = h->mr->rkey;
	pkt.dma_len = 8;
	pkt.payload_len = 8;
	hostile_send_request(h, &pkt, 8);
	hostile_read_response(h, &resp);
	assert_int_equal(resp.syndrome & AETH_TYPE_MASK, AETH_ACK);
}

void hostile_expect_untouched_but(struct hostile *h, size_t n)
{
	for (size_t i = n; i < h->buf->cap; i++)
		if (h->buf->p[i])
			fail_msg("byte %zu of the region was written", i);
}

void hostile_expect_untouched(struct hostile *h)
{
	hostile_expect_untouched_but(h, 0);
}

void hostile_expect_hung_up(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char byte;

	assert_int_equal(poll(&pfd, 1, RC_WAIT_MS), 1);
	assert_true(recv(fd, &byte, 1, 0) <= 0);
	close(fd);
}

void hostile_close(struct hostile *h)
{
	if (h->victims_fd >= 0)
		close(h->victims_fd);
	if (h->fd >= 0)
		close(h->fd);
	close(h->listen_fd);
	h->victims_fd = h->fd = h->listen_fd = -1;
}
