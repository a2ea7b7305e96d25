/* SPDX-License-Identifier: MIT */
/*
 * A peer that speaks the wire protocol with raw sockets and the engine's own codec
 * (emu/wire.h), for the tests that attack a victim QP of this process (test_rc_hostile.c,
 * test_engine_hostile.c). The peer owns its QPN: it listens on the port the QPN names, so
 * the victim's question about the peer's stream (VERIFY) comes to it and it answers as it
 * likes. Whatever it is sent, it never has to read: a hostile peer may not.
 *
 * Every wait gives up after RC_WAIT_MS, asserting with cmocka (so: inside a test only).
 */
#ifndef SOFTRDMA_TESTS_HOSTILE_PEER_H
#define SOFTRDMA_TESTS_HOSTILE_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>

#include "emu/wire.h"
#include "rc_fixture.h"

#define HOSTILE_BUF_LEN	4096	/* the victim's region the peer holds a key for */

struct hostile {
	struct rc_env *env;
	struct rc_end *victim;	/* the QP attacked, connected to our QPN */
	struct rc_buf *buf;	/* HOSTILE_BUF_LEN zeroed bytes of the victim's ... */
	struct ibv_mr *mr;	/* ... registered with every right: the peer has its rkey */
	int listen_fd;		/* the port our QPN names: where the victim asks about streams */
	uint32_t qpn;		/* ours */
	int fd;			/* our stream to the victim, or -1 */
	int victims_fd;		/* the victim's stream to us, held open and never read, or -1 */
	struct wire_hello victims_hello;	/* what the victim said first on it */
};

/* Our listener, and victim (an RC or UC end of env, in RESET) connected to our QPN. */
void hostile_prepare(struct hostile *h, struct rc_env *env, struct rc_end *victim,
		     enum ibv_qp_type type);
/* hostile_prepare(), then our stream to the victim, which we vouch for: bound. */
void hostile_open_victim(struct hostile *h, struct rc_env *env, struct rc_end *victim,
			 enum ibv_qp_type type);
/* hostile_open_victim() of an RC victim whose send and receive CQ are one. */
void hostile_open_victim_one_cq(struct hostile *h, struct rc_env *env, struct rc_end *victim);
/* A stream to the victim whose hello claims src_qpn (not verified yet). */
int hostile_open_stream(struct hostile *h, uint32_t src_qpn);
/* The next connection to our listener, with its hello read into *q. */
int hostile_accept_hello(struct hostile *h, struct wire_hello *q);
/* The victim's own stream to us, accepted (its hello in h->victims_hello) if not yet. */
void hostile_accept_victims_stream(struct hostile *h);
/* The victim asks whether the stream it got is ours: we answer v (header filled in). */
void hostile_answer(struct hostile *h, struct wire_verdict *v);
void hostile_answer_question(struct hostile *h, uint8_t verdict);
/* Asks the victim's engine about the victim's stream to us, as a responder would: *v. */
void hostile_ask_about_victims_stream(struct hostile *h, struct wire_verdict *v);

void hostile_send_bytes(struct hostile *h, const void *p, size_t n);
/* One request frame: headers from pkt, then payload_bytes of 0xee (any length we like). */
void hostile_send_request(struct hostile *h, struct wire_packet *pkt, size_t payload_bytes);
/* The next response frame on our stream, within RC_WAIT_MS. */
void hostile_read_response(struct hostile *h, struct wire_packet *pkt);
void hostile_expect_nak(struct hostile *h, uint8_t code);
/* The next request frame the victim sends on its own stream to us. */
void hostile_read_victims_request(struct hostile *h, struct wire_packet *pkt);
/* Our stream still works: a WRITE of 8 bytes at the region's start is ACKed. */
void hostile_expect_stream_works(struct hostile *h);

/* Nothing in the region changed past its first n bytes: it was all zero and stays so. */
void hostile_expect_untouched_but(struct hostile *h, size_t n);
void hostile_expect_untouched(struct hostile *h);
/* The victim hangs up on fd, with nothing said; fd is closed. */
void hostile_expect_hung_up(int fd);
void hostile_close(struct hostile *h);

/* A verdict or hello's header, as the engine writes it. */
void hostile_fill_header(void *msg, size_t len);
/* One end of a stream as VERIFY and LOCAL_CLAIM name it: addr (IPv4 mapped into IPv6), and
 * the port it returns (network order). */
uint16_t hostile_describe_end(const struct sockaddr *sa, uint8_t addr[16]);

#endif
