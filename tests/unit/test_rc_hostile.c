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

#include "hostile_peer.h"

#define NOBODY_QPN 0x000101	/* port 1: nobody listens there, nobody answers for it */

/* Victim env->b, connected to a peer we speak for, and our stream to it, bound. */
static void open_victim(struct rc_env *env, struct hostile *h)
{
	hostile_open_victim(h, env, &env->b, IBV_QPT_RC);
}

/* What we sent put the victim's QP into ERR without its writing a byte; then we hang up. */
static void expect_errored_untouched(struct hostile *h)
{
	rc_wait_state(h->env->b.qp, IBV_QPS_ERR);
	hostile_expect_untouched(h);
	hostile_close(h);
}

/* A forged WRITE of dma_len bytes at va under rkey, carrying payload_len, refused with nak. */
static void expect_write_refused(struct hostile *h, uint64_t va, uint32_t rkey, uint32_t dma_len,
				 uint32_t payload_len, uint8_t nak)
{
	struct wire_packet pkt = {
		.opcode = OP_RC_WRITE_ONLY,
		.ack_req = true,
		.va = va,
		.rkey = rkey,
		.dma_len = dma_len,
		.payload_len = payload_len,
	};

	hostile_send_request(h, &pkt, payload_len);
	hostile_expect_nak(h, nak);
	expect_errored_untouched(h);
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
	hostile_send_request(&h, &pkt, 64);
	hostile_read_response(&h, &resp);
	assert_int_equal(resp.opcode, OP_RC_ACK);
	assert_int_equal(resp.syndrome & AETH_TYPE_MASK, AETH_ACK);
	for (size_t i = 0; i < h.buf->cap; i++)
		assert_int_equal(h.buf->p[i], i >= 100 && i < 164 ? 0xee : 0);
	hostile_close(&h);
}

static void test_payload_longer_than_dma_len_is_refused(void **state)
{
	struct hostile h;

	open_victim(*state, &h);
	/* 16 bytes in bounds, but carrying a page more: it would run off the end. */
	expect_write_refused(&h, (uintptr_t)h.buf->p + h.buf->cap - 16, h.mr->rkey, 16, 4096,
			     NAK_INVALID_REQUEST);
}

static void test_range_wrapping_2_64_is_refused(void **state)
{
	struct hostile h;

	open_victim(*state, &h);
	expect_write_refused(&h, UINT64_MAX - 7, h.mr->rkey, 64, 64, NAK_REMOTE_ACCESS);
}

static void test_guessed_rkeys_are_refused(void **state)
{
	struct hostile h;

	open_victim(*state, &h);
	/* A neighbour of the real key: keys are not sequential, so it names nothing. */
	expect_write_refused(&h, (uintptr_t)h.buf->p, h.mr->rkey + 1, 8, 8, NAK_REMOTE_ACCESS);
}

static void test_unknown_opcode_errors_the_qp(void **state)
{
	struct hostile h;
	uint8_t frame[4 + 12] = { 0, 0, 0, 12, 0xff };

	open_victim(*state, &h);
	hostile_send_bytes(&h, frame, sizeof(frame));
	expect_errored_untouched(&h);
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
	hostile_send_bytes(&h, hdr, len);
	expect_errored_untouched(&h);
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
	hostile_send_request(&h, &pkt, 8);
	expect_errored_untouched(&h);
}

static void test_response_opcode_on_request_stream_errors_the_qp(void **state)
{
	struct hostile h;
	struct wire_packet pkt = { .opcode = OP_RC_READ_RESPONSE_ONLY };

	open_victim(*state, &h);
	pkt.payload_len = 64;
	hostile_send_request(&h, &pkt, 64);
	expect_errored_untouched(&h);
}

/* Someone claims our QPN, but the engine that owns it says the stream is not its. */
static void test_stream_its_qpn_disowns_is_hung_up_on(void **state)
{
	struct hostile h;
	int fd;

	open_victim(*state, &h);	/* the genuine peer's stream is up */
	fd = hostile_open_stream(&h, h.qpn);
	hostile_answer_question(&h, VERDICT_NOT_MINE);
	hostile_expect_hung_up(fd);
	assert_int_equal(rc_state(h.env->b.qp), IBV_QPS_RTS);
	hostile_expect_stream_works(&h);
	hostile_expect_untouched_but(&h, 8);
	hostile_close(&h);
}

/* A stream from another QP than the victim's peer is refused without asking anyone. */
static void test_hello_from_another_qp_is_not_heard(void **state)
{
	struct hostile h;
	int fd;

	open_victim(*state, &h);
	fd = hostile_open_stream(&h, h.qpn + 1);
	hostile_expect_hung_up(fd);
	assert_int_equal(rc_state(h.env->b.qp), IBV_QPS_RTS);
	hostile_expect_stream_works(&h);
	hostile_close(&h);
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
	hostile_read_victims_request(&h, &req);
	assert_int_equal(req.opcode, OP_RC_SEND_ONLY);
	rc_expect_no_wc(h.env->b.scq, RC_QUIET_MS);	/* nothing has acknowledged it yet */
	pkt.acked = true;
	pkt.acked_psn = req.psn;
	pkt.payload_len = 8;
	hostile_send_request(&h, &pkt, 8);
	rc_expect_wc(h.env->b.scq, 7, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(h.env->b.rcq, 1, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.byte_len, 8);
	hostile_close(&h);
}

/* Appends one request frame (headers from pkt, payload_bytes of 0xee) to buf at *len. */
static void append_request(struct hostile *h, uint8_t *buf, size_t cap, size_t *len,
			   struct wire_packet *pkt, size_t payload_bytes)
{
	unsigned int n;

	pkt->qpn = h->victim->qp->qp_num;
	assert_true(*len + 4 + WIRE_MAX_HDR + payload_bytes <= cap);
	n = wire_build(buf + *len, pkt);
	memset(buf + *len + n, 0xee, payload_bytes);
	*len += n + payload_bytes;
}

/* n SENDs of 8 bytes, PSNs first.. on, into buf at *len. */
static void append_sends(struct hostile *h, uint8_t *buf, size_t cap, size_t *len,
			 uint32_t first, int n)
{
	for (int i = 0; i < n; i++) {
		struct wire_packet pkt = { .opcode = OP_RC_SEND_ONLY, .ack_req = true,
					   .psn = first + (uint32_t)i, .payload_len = 8 };

		append_request(h, buf, cap, len, &pkt, 8);
	}
}

/* n receives of 16 bytes each in the peer's region, wr_ids first.. on. */
static void post_recvs(struct hostile *h, uint64_t first, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = rc_sge(h->buf->p + 16 * (first + (uint64_t)i), 16, h->mr);

		rc_post_recv(h->victim->qp, first + (uint64_t)i, &sge, 1);
	}
}

static void expect_recvs(struct hostile *h, uint64_t first, int n)
{
	struct ibv_wc wc;

	for (int i = 0; i < n; i++) {
		rc_expect_wc(h->env->b.rcq, first + (uint64_t)i, IBV_WC_SUCCESS, &wc);
		assert_int_equal(wc.opcode, IBV_WC_RECV);
		assert_int_equal(wc.byte_len, 8);
	}
}

/* Nothing more arrives on our stream for a while. */
static void expect_no_response(struct hostile *h)
{
	struct pollfd pfd = { .fd = h->fd, .events = POLLIN };

	assert_int_equal(poll(&pfd, 1, RC_QUIET_MS), 0);
}

#define BATCH 8

/* n SENDs of 8 bytes, PSNs first.. on, in one send(): one segment on loopback. */
static void send_sends(struct hostile *h, uint32_t first, int n)
{
	uint8_t frames[BATCH * (4 + WIRE_MAX_HDR + 8)];
	size_t len = 0;

	append_sends(h, frames, sizeof(frames), &len, first, n);
	hostile_send_bytes(h, frames, len);
}

/* The next response on our stream acknowledges psn with an AETH of the given type. */
static void expect_aeth(struct hostile *h, uint8_t type, uint32_t psn)
{
	struct wire_packet resp;

	hostile_read_response(h, &resp);
	assert_int_equal(resp.opcode, OP_RC_ACK);
	assert_int_equal(resp.syndrome & AETH_TYPE_MASK, type);
	assert_int_equal(resp.psn, psn);
}

/*
 * SENDs that arrive together are answered by one ACK, for the last of them (IBTA
 * 9.7.5.1.2), as WRITEs are; their receives complete, in order. One send() of a few hundred
 * bytes is one segment on loopback: the victim reads them all at once.
 */
static void test_sends_read_together_share_one_ack(void **state)
{
	struct hostile h;

	open_victim(*state, &h);
	post_recvs(&h, 0, BATCH);
	send_sends(&h, 0, BATCH);
	expect_aeth(&h, AETH_ACK, BATCH - 1);
	expect_recvs(&h, 0, BATCH);
	expect_no_response(&h);
	rc_expect_no_wc(h.env->b.rcq, 0);
	hostile_close(&h);
}

/*
 * A NAK ends a run of SENDs: the ACK of those before it goes first, their receives complete
 * as executed, and only then are the rest flushed, in the order they were posted.
 */
static void test_held_receives_complete_before_the_flush(void **state)
{
	uint8_t frames[4 * (4 + WIRE_MAX_HDR + 8)];
	struct wire_packet write = { .opcode = OP_RC_WRITE_ONLY, .ack_req = true, .psn = 2,
					   .dma_len = 8, .payload_len = 8 };
	struct hostile h;
	size_t len = 0;

	open_victim(*state, &h);
	post_recvs(&h, 0, 4);
	append_sends(&h, frames, sizeof(frames), &len, 0, 2);
	write.va = (uintptr_t)h.buf->p;
	write.rkey = h.mr->rkey + 1;	/* no such key */
	append_request(&h, frames, sizeof(frames), &len, &write, 8);
	hostile_send_bytes(&h, frames, len);
	expect_aeth(&h, AETH_ACK, 1);
	hostile_expect_nak(&h, NAK_REMOTE_ACCESS);
	expect_recvs(&h, 0, 2);
	rc_expect_wc(h.env->b.rcq, 2, IBV_WC_WR_FLUSH_ERR, NULL);
	rc_expect_wc(h.env->b.rcq, 3, IBV_WC_WR_FLUSH_ERR, NULL);
	rc_wait_state(h.env->b.qp, IBV_QPS_ERR);
	hostile_close(&h);
}

/*
 * A SEND with no receive for it is answered with an RNR NAK after the ACK of those before
 * it, whose receives complete; resent once a receive is posted, it lands there.
 */
static void test_rnr_nak_follows_the_ack_of_the_sends_before(void **state)
{
	struct hostile h;

	open_victim(*state, &h);
	post_recvs(&h, 0, 2);
	send_sends(&h, 0, 3);
	expect_aeth(&h, AETH_ACK, 1);
	expect_aeth(&h, AETH_RNR_NAK, 2);
	expect_recvs(&h, 0, 2);
	post_recvs(&h, 2, 1);
	send_sends(&h, 2, 1);
	expect_aeth(&h, AETH_ACK, 2);
	expect_recvs(&h, 2, 1);
	assert_int_equal(rc_state(h.env->b.qp), IBV_QPS_RTS);
	hostile_close(&h);
}

/*
 * SENDs whose stream ends in the read that brought them cannot be ACKed on it: their
 * receives complete all the same (they were executed), and the requester's resends on the
 * next stream are duplicates, ACKed and not delivered again.
 */
static void test_sends_cut_off_before_their_ack_still_complete(void **state)
{
	struct wire_packet resp;
	struct hostile h;

	open_victim(*state, &h);
	post_recvs(&h, 0, BATCH);
	send_sends(&h, 0, 3);
	close(h.fd);
	expect_recvs(&h, 0, 3);
	h.fd = hostile_open_stream(&h, h.qpn);
	hostile_answer_question(&h, VERDICT_MINE);
	send_sends(&h, 0, 3);	/* the same three again */
	do
		hostile_read_response(&h, &resp);
	while (resp.psn != 2);
	assert_int_equal(resp.syndrome & AETH_TYPE_MASK, AETH_ACK);
	rc_expect_no_wc(h.env->b.rcq, RC_QUIET_MS);
	assert_int_equal(rc_state(h.env->b.qp), IBV_QPS_RTS);
	hostile_close(&h);
}

/*
 * With one CQ for both queues, a send completion a piggybacked ACK brings comes after the
 * receive completed before it and before the one its carrier fills: the receives held for
 * the coalesced ACK go out first, with that ACK, as each SEND was once ACKed at once.
 */
static void test_one_cq_keeps_receives_and_piggybacked_sends_in_order(void **state)
{
	uint8_t frames[2 * (4 + WIRE_MAX_HDR + 8)];
	struct wire_packet req, send1 = { .opcode = OP_RC_SEND_ONLY, .ack_req = true,
					      .psn = 1, .payload_len = 8, .acked = true };
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .wr_id = 100, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;
	struct hostile h;
	size_t len = 0;

	hostile_open_victim_one_cq(&h, *state, &((struct rc_env *)*state)->b);
	assert_ptr_equal(h.victim->scq, h.victim->rcq);
	post_recvs(&h, 0, 2);
	sge = rc_sge(h.buf->p + 1024, 16, h.mr);
	assert_int_equal(ibv_post_send(h.victim->qp, &wr, &bad), 0);
	hostile_read_victims_request(&h, &req);
	assert_int_equal(req.opcode, OP_RC_SEND_ONLY);
	append_sends(&h, frames, sizeof(frames), &len, 0, 1);
	send1.acked_psn = req.psn;	/* the second SEND acknowledges the victim's */
	append_request(&h, frames, sizeof(frames), &len, &send1, 8);
	hostile_send_bytes(&h, frames, len);
	rc_expect_wc(h.victim->rcq, 0, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(h.victim->rcq, 100, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(h.victim->rcq, 1, IBV_WC_SUCCESS, NULL);
	expect_aeth(&h, AETH_ACK, 0);
	expect_aeth(&h, AETH_ACK, 1);
	hostile_close(&h);
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
	hostile_send_request(&h, &pkt, 300);	/* promises 2000 bytes, sends 300, hangs up */
	hostile_close(&h);
	/* Whatever arrived may be placed, inside the range the request named, nowhere else. */
	usleep(200 * 1000);
	for (size_t i = 0; i < h.buf->cap; i++)
		if (h.buf->p[i] && (i < 1000 || i >= 1300))
			fail_msg("byte %zu outside the 300 bytes sent was written", i);
	assert_int_equal(rc_state(h.env->b.qp), IBV_QPS_RTS);
}

/*
 * Receives 1 and 2 posted at the victim (4 KiB each, in *rbuf), then a SEND of 2000 bytes
 * at PSN 0 cut off with its stream after 300, and a new stream of ours bound in its place.
 */
static void cut_send_and_reconnect(struct rc_env *env, struct hostile *h, struct rc_buf **rbuf)
{
	struct wire_packet pkt = { .opcode = OP_RC_SEND_ONLY, .ack_req = true, .payload_len = 2000 };
	struct ibv_mr *rmr;
	struct ibv_sge sge;

	open_victim(env, h);
	*rbuf = rc_alloc(env, 2 * 4096);
	rmr = rc_reg(env, env->pd, (*rbuf)->p, 2 * 4096, RC_ACCESS_ALL);
	sge = rc_sge((*rbuf)->p, 4096, rmr);
	rc_post_recv(env->b.qp, 1, &sge, 1);
	sge = rc_sge((*rbuf)->p + 4096, 4096, rmr);
	rc_post_recv(env->b.qp, 2, &sge, 1);
	hostile_send_request(h, &pkt, 300);	/* promises 2000 bytes, sends 300, hangs up */
	close(h->fd);
	h->fd = hostile_open_stream(h, h->qpn);
	hostile_answer_question(h, VERDICT_MINE);
}

/* A SEND of len bytes at psn lands in receive 1, whole, and nothing else completes. */
static void expect_send_lands_in_first_receive(struct rc_env *env, struct hostile *h,
					       struct rc_buf *rbuf, uint32_t psn, uint32_t len)
{
	struct wire_packet pkt = { .opcode = OP_RC_SEND_ONLY, .ack_req = true, .psn = psn,
				   .payload_len = len };
	struct wire_packet resp;
	struct ibv_wc wc;

	hostile_send_request(h, &pkt, len);
	hostile_read_response(h, &resp);
	assert_int_equal(resp.opcode, OP_RC_ACK);
	rc_expect_wc(env->b.rcq, 1, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.byte_len, len);
	for (size_t i = 0; i < len; i++)
		assert_int_equal(rbuf->p[i], 0xee);
	rc_expect_no_wc(env->b.rcq, RC_QUIET_MS);
	assert_int_equal(rc_state(env->b.qp), IBV_QPS_RTS);
}

/*
 * A SEND cut off with its stream keeps the receive it had taken: the resent SEND (the same
 * PSN, on the next stream) lands in that receive, and the one posted after it stays
 * posted, as rxe keeps resp.wqe. Taking a second one would lose the first: never
 * completed, never flushed.
 */
static void test_send_cut_off_keeps_its_receive(void **state)
{
	struct rc_env *env = *state;
	struct rc_buf *rbuf;
	struct hostile h;

	cut_send_and_reconnect(env, &h, &rbuf);
	expect_send_lands_in_first_receive(env, &h, rbuf, 0, 2000);	/* the retransmission */
	hostile_close(&h);
}

/*
 * A peer that does not resend the cut SEND but puts a WRITE at its PSN: the WRITE neither
 * completes nor fails the receive held for the SEND (it consumes none); the next SEND does.
 */
static void test_write_after_cut_send_leaves_its_receive(void **state)
{
	struct rc_env *env = *state;
	struct wire_packet pkt = { .opcode = OP_RC_WRITE_ONLY, .ack_req = true, .dma_len = 8,
				   .payload_len = 8 };
	struct wire_packet resp;
	struct rc_buf *rbuf;
	struct hostile h;

	cut_send_and_reconnect(env, &h, &rbuf);
	pkt.va = (uintptr_t)h.buf->p;
	pkt.rkey = h.mr->rkey;
	hostile_send_request(&h, &pkt, 8);
	hostile_read_response(&h, &resp);
	assert_int_equal(resp.opcode, OP_RC_ACK);
	rc_expect_no_wc(env->b.rcq, RC_QUIET_MS);
	expect_send_lands_in_first_receive(env, &h, rbuf, 1, 100);
	hostile_close(&h);
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
		RC_TEST(write_is_placed_when_allowed),
		RC_TEST(payload_longer_than_dma_len_is_refused),
		RC_TEST(range_wrapping_2_64_is_refused),
		RC_TEST(guessed_rkeys_are_refused),
		RC_TEST(unknown_opcode_errors_the_qp),
		RC_TEST(length_word_shorter_than_headers_errors_the_qp),
		RC_TEST(frame_for_another_qp_errors_this_one),
		RC_TEST(response_opcode_on_request_stream_errors_the_qp),
		RC_TEST(hello_from_another_qp_is_not_heard),
		RC_TEST(stream_its_qpn_disowns_is_hung_up_on),
		RC_TEST(piggybacked_ack_completes_the_send_first),
		RC_TEST(sends_read_together_share_one_ack),
		RC_TEST(held_receives_complete_before_the_flush),
		RC_TEST(rnr_nak_follows_the_ack_of_the_sends_before),
		RC_TEST(sends_cut_off_before_their_ack_still_complete),
		RC_TEST(one_cq_keeps_receives_and_piggybacked_sends_in_order),
		RC_TEST(truncated_frame_touches_only_the_named_range),
		RC_TEST(send_cut_off_keeps_its_receive),
		RC_TEST(write_after_cut_send_leaves_its_receive),
		RC_TEST(garbage_hello_is_hung_up_on),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
