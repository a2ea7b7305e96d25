// SPDX-License-Identifier: MIT
/*
 * Writes the seed corpora (checked in under tests/fuzz/corpus/) with the engine's own frame
 * builder: make_seeds DIR. Frames carry the placeholders of fuzz_env.h for the QPN and keys.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"	/* librdmacm-shim */
#include "emu/wire.h"
#include "fuzz_env.h"

#define QPN_HOLDER	0xfffffeu
#define XRC_QPN_HOLDER	0xfffffdu
#define KEY(n)		(0xfeed0000u | (n))
#define SRQN(n)		(0xfeed0100u | (n))	/* XRCETH: written as 24 bits, patched as 32 */

static uint32_t dst_qpn = QPN_HOLDER;	/* XRC seeds name the XRC target */
static uint32_t srqn;

static uint8_t buf[65536];
static size_t len;

static void hello(void)
{
	struct wire_hello h = {
		.magic = htonl(WIRE_MAGIC), .version = htons(WIRE_VERSION),
		.length = htons(sizeof(h)), .kind = HELLO_STREAM, .src_qpn = htonl(FUZZ_PEER_QPN),
		.dst_qpn = htonl(dst_qpn),
		.src_gid = { [10] = 0xff, [11] = 0xff, [12] = 127, [15] = 1 },
	};

	memcpy(buf, &h, sizeof(h));
	len = sizeof(h);
}

static void response(uint8_t opcode, uint32_t psn, uint8_t syndrome, uint32_t payload)
{
	struct wire_packet p = {
		.opcode = opcode, .qpn = QPN_HOLDER, .psn = psn, .syndrome = syndrome,
		.payload_len = payload, .orig = 41,
	};

	len += wire_build(buf + len, &p);
	for (uint32_t i = 0; i < payload; i++)
		buf[len++] = (uint8_t)(i * 5 + 3);
}

static void frame(uint8_t opcode, uint32_t psn, uint64_t va, uint32_t rkey, uint32_t dma_len,
		  uint32_t payload)
{
	struct wire_packet p = {
		.opcode = opcode, .qpn = dst_qpn, .psn = psn, .ack_req = true, .va = va,
		.rkey = rkey, .dma_len = dma_len, .payload_len = payload, .swap_add = 1,
		.compare = 0, .imm = htonl(0x1234), .inv_rkey = KEY(1), .qkey = FUZZ_QKEY,
		.src_qp = FUZZ_PEER_QPN, .srqn = srqn,
	};
	size_t at = len;

	len += wire_build(buf + len, &p);
	/* The XRCETH's 24 bits cannot hold the 32-bit placeholder: it is written whole. */
	if (wire_opcodes[opcode].flags & HDR_XRCETH) {
		uint32_t holder = htonl(srqn);

		memcpy(buf + at + 4 + wire_opcodes[opcode].off_xrceth, &holder, 4);
	}
	for (uint32_t i = 0; i < payload; i++)
		buf[len++] = (uint8_t)(i * 7 + 1);
}

/* A CM message as connect.c's msg_init() and fill_from_param() write it. */
static void cm(uint16_t type, uint8_t private_len)
{
	struct cm_msg m = {
		.magic = htonl(CM_WIRE_MAGIC), .version = htons(CM_WIRE_VERSION), .type = type,
		.qpn = FUZZ_PEER_QPN, .psn = 0x123456, .responder_resources = 1,
		.initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7,
		.private_data_len = private_len, .reject_reason = CM_REJ_CONSUMER_DEFINED,
	};

	/* The length may claim more than the message holds (a seed says so on purpose). */
	for (size_t i = 0; i < private_len && i < sizeof(m.private_data); i++)
		m.private_data[i] = (uint8_t)i;
	memcpy(buf + len, &m, sizeof(m));
	len += sizeof(m);
}

/* A SEND, a SEND with immediate, and a third SEND that finds no receive left: RNR. */
static void three_sends(uint8_t only, uint8_t only_imm)
{
	frame(only, 0, 0, 0, 0, 100);
	frame(only_imm, 1, 0, 0, 0, 8);
	frame(only, 2, 0, 0, 0, 100);
}

static void save(const char *dir, const char *name)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f)) {
		perror(path);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	char stream[400], ud[400], cmdir[400], comp[400];
	uint64_t r1 = FUZZ_IOVA(1) + 512, r2 = FUZZ_IOVA(2) + 2560, r3 = FUZZ_IOVA(3) + 3072;

	if (argc != 2) {
		fprintf(stderr, "usage: make_seeds DIR (writes DIR/fuzz_stream, DIR/fuzz_ud)\n");
		return 2;
	}
	snprintf(stream, sizeof(stream), "%s/fuzz_stream", argv[1]);
	snprintf(ud, sizeof(ud), "%s/fuzz_ud", argv[1]);
	snprintf(cmdir, sizeof(cmdir), "%s/fuzz_cm", argv[1]);
	snprintf(comp, sizeof(comp), "%s/fuzz_completer", argv[1]);

	hello();
	save(stream, "hello");
	frame(OP_RC_WRITE_ONLY, 0, r1, KEY(1), 64, 64);
	save(stream, "write");
	hello();
	frame(OP_RC_WRITE_ONLY, 0, r1 + 2000, KEY(1), 64, 64);	/* past the end: NAK */
	save(stream, "write_past_end");
	hello();
	frame(OP_RC_WRITE_ONLY, 0, r2, KEY(2), 16, 16);	/* read-only region: NAK */
	save(stream, "write_read_only");
	hello();
	frame(OP_RC_WRITE_ONLY, 0, r3, KEY(3), 16, 16);	/* another PD: NAK */
	save(stream, "write_other_pd");
	hello();
	frame(OP_RC_WRITE_ONLY, 0, r1, KEY(1), 20000, 20000);	/* direct placement path */
	save(stream, "write_large");
	hello();
	three_sends(OP_RC_SEND_ONLY, OP_RC_SEND_ONLY_IMM);
	save(stream, "sends");
	hello();
	frame(OP_RC_READ_REQUEST, 0, r1, KEY(1), 256, 0);
	frame(OP_RC_READ_REQUEST, 1, r2, KEY(2), 64, 0);
	frame(OP_RC_READ_REQUEST, 0, r1, KEY(1), 256, 0);	/* a duplicate */
	save(stream, "reads");
	hello();
	frame(OP_RC_FETCH_ADD, 0, r1, KEY(1), 0, 0);
	frame(OP_RC_CMP_SWAP, 1, r1 + 8, KEY(1), 0, 0);
	frame(OP_RC_FETCH_ADD, 0, r1, KEY(1), 0, 0);	/* a resent atomic */
	frame(OP_RC_FETCH_ADD, 2, r1 + 3, KEY(1), 0, 0);	/* misaligned */
	save(stream, "atomics");
	hello();
	frame(OP_RC_WRITE_ONLY_IMM, 0, r1, KEY(1), 32, 32);
	frame(OP_RC_SEND_ONLY_INV, 1, 0, 0, 0, 16);
	save(stream, "imm_inv");

	/* XRC: to the target, each request naming SRQ 1 (its domain) or 2 (another's). */
	dst_qpn = XRC_QPN_HOLDER;
	srqn = SRQN(1);
	hello();
	three_sends(OP_XRC_SEND_ONLY, OP_XRC_SEND_ONLY_IMM);
	save(stream, "xrc_sends");
	hello();
	frame(OP_XRC_WRITE_ONLY, 0, r1, KEY(1), 64, 64);
	frame(OP_XRC_READ_REQUEST, 1, r1, KEY(1), 256, 0);
	frame(OP_XRC_FETCH_ADD, 2, r1, KEY(1), 0, 0);
	frame(OP_XRC_WRITE_ONLY, 3, r3, KEY(3), 16, 16);	/* not the SRQ's PD: NAK */
	save(stream, "xrc_rdma");
	hello();
	srqn = SRQN(2);
	frame(OP_XRC_SEND_ONLY, 0, 0, 0, 0, 16);	/* another domain's SRQ: NAK */
	save(stream, "xrc_foreign_srq");
	hello();
	srqn = 0x00abcdefu;
	frame(OP_XRC_WRITE_ONLY, 0, r1, KEY(1), 16, 16);	/* no such SRQ: NAK */
	save(stream, "xrc_unknown_srq");
	dst_qpn = QPN_HOLDER;
	srqn = 0;

	len = 0;
	frame(OP_UD_SEND_ONLY, 0, 0, 0, 0, 64);
	save(ud, "send");
	len = 0;
	frame(OP_UD_SEND_ONLY_IMM, 0, 0, 0, 0, 2000);	/* longer than a receive: LOC_LEN_ERR */
	save(ud, "send_imm_long");

	/* Responses to fuzz_completer's READ 256, FETCH_ADD, WRITE, SEND, READ 64 (PSN 0-4). */
	len = 0;
	response(OP_RC_READ_RESPONSE_ONLY, 0, AETH_ACK_NO_CREDIT, 256);
	response(OP_RC_ATOMIC_ACK, 1, AETH_ACK_NO_CREDIT, 0);
	response(OP_RC_ACK, 3, AETH_ACK_NO_CREDIT, 0);
	response(OP_RC_READ_RESPONSE_ONLY, 4, AETH_ACK_NO_CREDIT, 64);
	save(comp, "all_answered");
	len = 0;
	response(OP_RC_READ_RESPONSE_ONLY, 0, AETH_ACK_NO_CREDIT, 256);
	response(OP_RC_ATOMIC_ACK, 1, AETH_ACK_NO_CREDIT, 0);
	response(OP_RC_ACK, 2, AETH_RNR_NAK | 1, 0);
	response(OP_RC_ACK, 2, AETH_NAK | NAK_REMOTE_ACCESS, 0);
	save(comp, "rnr_then_nak");
	len = 0;
	response(OP_RC_READ_RESPONSE_ONLY, 0, AETH_ACK_NO_CREDIT, 300);	/* longer than asked */
	response(OP_RC_ATOMIC_ACK, 0, AETH_ACK_NO_CREDIT, 0);	/* wrong PSN */
	response(OP_RC_READ_RESPONSE_ONLY, 4, AETH_ACK_NO_CREDIT, 64);	/* past a lost one */
	save(comp, "bad_responses");

	/* CM: the first byte says whether the application accepts (odd) or rejects. */
	buf[0] = 1;
	len = 1;
	cm(CM_MSG_REQ, 16);
	cm(CM_MSG_RTU, 0);
	cm(CM_MSG_DREQ, 0);
	save(cmdir, "accept_rtu_dreq");
	buf[0] = 0;
	len = 1;
	cm(CM_MSG_REQ, CM_REQ_PRIVATE_DATA);
	save(cmdir, "reject");
	buf[0] = 1;
	len = 1;
	cm(CM_MSG_REP, 0);
	cm(CM_MSG_REJ, 255);	/* a length beyond the message's private data */
	cm(CM_MSG_REQ, 0);
	cm(CM_MSG_REQ, 0);	/* twice */
	save(cmdir, "out_of_order");
	return 0;
}
