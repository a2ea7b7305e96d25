// SPDX-License-Identifier: MIT
/*
 * The opcode table and the header codec: one description per opcode (as rxe_opcode.c does)
 * instead of a switch per field, so parse and build cannot disagree.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "emu/wire.h"

#define BTH	sizeof(struct wire_bth)
#define RETH	sizeof(struct wire_reth)
#define AETH	sizeof(struct wire_aeth)
#define ATMETH	sizeof(struct wire_atmeth)
#define ATMACK	sizeof(struct wire_atmack)
#define IMMDT	sizeof(struct wire_immdt)
#define IETH	sizeof(struct wire_ieth)
#define DETH	sizeof(struct wire_deth)
#define XRCETH	sizeof(struct wire_xrceth)

/* The SEND and WRITE opcodes RC and UC share: the same headers, in the same places. */
#define SEND_ONLY(name)		{ name, OPF_REQUEST | OPF_PAYLOAD | OPF_RECV_WQE, BTH }
#define SEND_ONLY_IMM(name)	{ name, HDR_IMMDT | OPF_REQUEST | OPF_PAYLOAD | OPF_RECV_WQE,	\
				  BTH + IMMDT, .off_immdt = BTH }
#define WRITE_ONLY(name)	{ name, HDR_RETH | OPF_REQUEST | OPF_PAYLOAD, BTH + RETH,	\
				  .off_reth = BTH }
#define WRITE_ONLY_IMM(name)	{ name, HDR_RETH | HDR_IMMDT | OPF_REQUEST | OPF_PAYLOAD |	\
				  OPF_RECV_WQE, BTH + RETH + IMMDT, .off_reth = BTH,		\
				  .off_immdt = BTH + RETH }

/* XRC requests: the same headers after an XRCETH, which follows the BTH. */
#define XRC_REQ		(HDR_XRCETH | OPF_REQUEST)
#define XRC_AT		(BTH + XRCETH)

const struct wire_opcode_info wire_opcodes[256] = {
	[OP_RC_SEND_ONLY] = SEND_ONLY("RC_SEND_ONLY"),
	[OP_RC_SEND_ONLY_IMM] = SEND_ONLY_IMM("RC_SEND_ONLY_WITH_IMMEDIATE"),
	[OP_RC_SEND_ONLY_INV] = {
		"RC_SEND_ONLY_WITH_INVALIDATE", HDR_IETH | OPF_REQUEST | OPF_PAYLOAD | OPF_RECV_WQE,
		BTH + IETH, .off_ieth = BTH,
	},
	[OP_RC_WRITE_ONLY] = WRITE_ONLY("RC_RDMA_WRITE_ONLY"),
	[OP_RC_WRITE_ONLY_IMM] = WRITE_ONLY_IMM("RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"),
	[OP_RC_READ_REQUEST] = {
		"RC_RDMA_READ_REQUEST", HDR_RETH | OPF_REQUEST | OPF_READ_ATOMIC, BTH + RETH,
		.off_reth = BTH,
	},
	[OP_RC_CMP_SWAP] = {
		"RC_COMPARE_SWAP", HDR_ATMETH | OPF_REQUEST | OPF_READ_ATOMIC, BTH + ATMETH,
		.off_atmeth = BTH,
	},
	[OP_RC_FETCH_ADD] = {
		"RC_FETCH_ADD", HDR_ATMETH | OPF_REQUEST | OPF_READ_ATOMIC, BTH + ATMETH,
		.off_atmeth = BTH,
	},
	[OP_RC_READ_RESPONSE_ONLY] = {
		"RC_RDMA_READ_RESPONSE_ONLY", HDR_AETH | OPF_RESPONSE | OPF_PAYLOAD, BTH + AETH,
		.off_aeth = BTH,
	},
	[OP_RC_ACK] = {
		"RC_ACKNOWLEDGE", HDR_AETH | OPF_RESPONSE, BTH + AETH, .off_aeth = BTH,
	},
	[OP_PEER_MEMORY] = {
		"SOFTRDMA_PEER_MEMORY", OPF_RESPONSE, BTH,
	},
	[OP_DROP_NOTICE] = {
		"SOFTRDMA_DROP_NOTICE", OPF_RESPONSE, BTH,
	},
	[OP_UC_SEND_ONLY] = SEND_ONLY("UC_SEND_ONLY"),
	[OP_UC_SEND_ONLY_IMM] = SEND_ONLY_IMM("UC_SEND_ONLY_WITH_IMMEDIATE"),
	[OP_UC_WRITE_ONLY] = WRITE_ONLY("UC_RDMA_WRITE_ONLY"),
	[OP_UC_WRITE_ONLY_IMM] = WRITE_ONLY_IMM("UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"),
	[OP_UD_SEND_ONLY] = {
		"UD_SEND_ONLY", HDR_DETH | OPF_REQUEST | OPF_PAYLOAD | OPF_RECV_WQE | OPF_DATAGRAM,
		BTH + DETH, .off_deth = BTH,
	},
	[OP_UD_SEND_ONLY_IMM] = {
		"UD_SEND_ONLY_WITH_IMMEDIATE",
		HDR_DETH | HDR_IMMDT | OPF_REQUEST | OPF_PAYLOAD | OPF_RECV_WQE | OPF_DATAGRAM,
		BTH + DETH + IMMDT, .off_deth = BTH, .off_immdt = BTH + DETH,
	},
	[OP_RC_ATOMIC_ACK] = {
		"RC_ATOMIC_ACKNOWLEDGE", HDR_AETH | HDR_ATMACK | OPF_RESPONSE, BTH + AETH + ATMACK,
		.off_aeth = BTH, .off_atmack = BTH + AETH,
	},
	[OP_XRC_SEND_ONLY] = {
		"XRC_SEND_ONLY", XRC_REQ | OPF_PAYLOAD | OPF_RECV_WQE, XRC_AT, .off_xrceth = BTH,
	},
	[OP_XRC_SEND_ONLY_IMM] = {
		"XRC_SEND_ONLY_WITH_IMMEDIATE", XRC_REQ | HDR_IMMDT | OPF_PAYLOAD | OPF_RECV_WQE,
		XRC_AT + IMMDT, .off_xrceth = BTH, .off_immdt = XRC_AT,
	},
	[OP_XRC_SEND_ONLY_INV] = {
		"XRC_SEND_ONLY_WITH_INVALIDATE", XRC_REQ | HDR_IETH | OPF_PAYLOAD | OPF_RECV_WQE,
		XRC_AT + IETH, .off_xrceth = BTH, .off_ieth = XRC_AT,
	},
	[OP_XRC_WRITE_ONLY] = {
		"XRC_RDMA_WRITE_ONLY", XRC_REQ | HDR_RETH | OPF_PAYLOAD, XRC_AT + RETH,
		.off_xrceth = BTH, .off_reth = XRC_AT,
	},
	[OP_XRC_WRITE_ONLY_IMM] = {
		"XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
		XRC_REQ | HDR_RETH | HDR_IMMDT | OPF_PAYLOAD | OPF_RECV_WQE, XRC_AT + RETH + IMMDT,
		.off_xrceth = BTH, .off_reth = XRC_AT, .off_immdt = XRC_AT + RETH,
	},
	[OP_XRC_READ_REQUEST] = {
		"XRC_RDMA_READ_REQUEST", XRC_REQ | HDR_RETH | OPF_READ_ATOMIC, XRC_AT + RETH,
		.off_xrceth = BTH, .off_reth = XRC_AT,
	},
	[OP_XRC_CMP_SWAP] = {
		"XRC_COMPARE_SWAP", XRC_REQ | HDR_ATMETH | OPF_READ_ATOMIC, XRC_AT + ATMETH,
		.off_xrceth = BTH, .off_atmeth = XRC_AT,
	},
	[OP_XRC_FETCH_ADD] = {
		"XRC_FETCH_ADD", XRC_REQ | HDR_ATMETH | OPF_READ_ATOMIC, XRC_AT + ATMETH,
		.off_xrceth = BTH, .off_atmeth = XRC_AT,
	},
	/* Responses are RC's: the requester knows which SRQ it asked for. */
	[OP_XRC_READ_RESPONSE_ONLY] = {
		"XRC_RDMA_READ_RESPONSE_ONLY", HDR_AETH | OPF_RESPONSE | OPF_PAYLOAD, BTH + AETH,
		.off_aeth = BTH,
	},
	[OP_XRC_ACK] = {
		"XRC_ACKNOWLEDGE", HDR_AETH | OPF_RESPONSE, BTH + AETH, .off_aeth = BTH,
	},
	[OP_XRC_ATOMIC_ACK] = {
		"XRC_ATOMIC_ACKNOWLEDGE", HDR_AETH | HDR_ATMACK | OPF_RESPONSE, BTH + AETH + ATMACK,
		.off_aeth = BTH, .off_atmack = BTH + AETH,
	},
};

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return be64toh(v);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return be32toh(v);
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
}

int wire_parse(const uint8_t *hdr, uint64_t frame_len, struct wire_packet *pkt)
{
	const struct wire_opcode_info *info = &wire_opcodes[hdr[0]];
	unsigned int hdr_len = info->hdr_len;
	uint32_t apsn;

	if (!info->name || frame_len < hdr_len || frame_len > WIRE_MAX_FRAME)
		return EPROTO;
	memset(pkt, 0, sizeof(*pkt));
	pkt->opcode = hdr[0];
	pkt->solicited = hdr[1] & BTH_SE;
	pkt->qpn = get32(hdr + 4) & BTH_QPN_MASK;
	apsn = get32(hdr + 8);
	pkt->ack_req = apsn & BTH_ACK_REQ;
	pkt->by_ref = apsn & BTH_BY_REF;
	pkt->psn = apsn & BTH_PSN_MASK;
	if (apsn & BTH_ACKED) {
		/* Only RC requests carry one, after all the standard headers. */
		if ((hdr[0] & OP_TRANSPORT_MASK) != OP_TRANSPORT_RC || !(info->flags & OPF_REQUEST) ||
		    frame_len < hdr_len + sizeof(struct wire_acketh))
			return EPROTO;
		pkt->acked = true;
		pkt->acked_psn = get32(hdr + hdr_len) & BTH_PSN_MASK;
		hdr_len += sizeof(struct wire_acketh);
	}
	pkt->payload_len = frame_len - hdr_len;
	if (pkt->payload_len && !(info->flags & OPF_PAYLOAD))
		return EPROTO;
	if (info->flags & HDR_RETH) {
		pkt->va = get64(hdr + info->off_reth);
		pkt->rkey = get32(hdr + info->off_reth + 8);
		pkt->dma_len = get32(hdr + info->off_reth + 12);
	}
	if (info->flags & HDR_AETH) {
		uint32_t v = get32(hdr + info->off_aeth);

		pkt->syndrome = v >> 24;
		pkt->msn = v & 0xffffff;
	}
	if (info->flags & HDR_ATMETH) {
		pkt->va = get64(hdr + info->off_atmeth);
		pkt->rkey = get32(hdr + info->off_atmeth + 8);
		pkt->swap_add = get64(hdr + info->off_atmeth + 12);
		pkt->compare = get64(hdr + info->off_atmeth + 20);
	}
	if (info->flags & HDR_ATMACK)
		pkt->orig = get64(hdr + info->off_atmack);
	if (info->flags & HDR_IMMDT)
		memcpy(&pkt->imm, hdr + info->off_immdt, 4);
	if (info->flags & HDR_IETH)
		pkt->inv_rkey = get32(hdr + info->off_ieth);
	if (info->flags & HDR_DETH) {
		pkt->qkey = get32(hdr + info->off_deth);
		pkt->src_qp = get32(hdr + info->off_deth + 4) & BTH_QPN_MASK;
	}
	if (info->flags & HDR_XRCETH)
		pkt->srqn = get32(hdr + info->off_xrceth) & BTH_QPN_MASK;
	return 0;
}

unsigned int wire_build(uint8_t *buf, const struct wire_packet *pkt)
{
	const struct wire_opcode_info *info = &wire_opcodes[pkt->opcode];
	unsigned int hdr_len = info->hdr_len + (pkt->acked ? sizeof(struct wire_acketh) : 0);
	uint8_t *hdr = buf + 4;

	put32(buf, (uint32_t)(hdr_len + pkt->payload_len));
	memset(hdr, 0, hdr_len);
	hdr[0] = pkt->opcode;
	hdr[1] = pkt->solicited ? BTH_SE : 0;
	hdr[2] = 0xff;	/* default P_Key */
	hdr[3] = 0xff;
	put32(hdr + 4, pkt->qpn & BTH_QPN_MASK);
	put32(hdr + 8, (pkt->ack_req ? BTH_ACK_REQ : 0) | (pkt->by_ref ? BTH_BY_REF : 0) |
			       (pkt->acked ? BTH_ACKED : 0) | (pkt->psn & BTH_PSN_MASK));
	if (pkt->acked)
		put32(hdr + info->hdr_len, pkt->acked_psn & BTH_PSN_MASK);
	if (info->flags & HDR_RETH) {
		put64(hdr + info->off_reth, pkt->va);
		put32(hdr + info->off_reth + 8, pkt->rkey);
		put32(hdr + info->off_reth + 12, pkt->dma_len);
	}
	if (info->flags & HDR_AETH)
		put32(hdr + info->off_aeth, (uint32_t)pkt->syndrome << 24 | (pkt->msn & 0xffffff));
	if (info->flags & HDR_ATMETH) {
		put64(hdr + info->off_atmeth, pkt->va);
		put32(hdr + info->off_atmeth + 8, pkt->rkey);
		put64(hdr + info->off_atmeth + 12, pkt->swap_add);
		put64(hdr + info->off_atmeth + 20, pkt->compare);
	}
	if (info->flags & HDR_ATMACK)
		put64(hdr + info->off_atmack, pkt->orig);
	if (info->flags & HDR_IMMDT)
		memcpy(hdr + info->off_immdt, &pkt->imm, 4);
	if (info->flags & HDR_IETH)
		put32(hdr + info->off_ieth, pkt->inv_rkey);
	if (info->flags & HDR_DETH) {
		put32(hdr + info->off_deth, pkt->qkey);
		put32(hdr + info->off_deth + 4, pkt->src_qp & BTH_QPN_MASK);
	}
	if (info->flags & HDR_XRCETH)
		put32(hdr + info->off_xrceth, pkt->srqn & BTH_QPN_MASK);
	return 4 + hdr_len;
}

const char *aeth_syndrome_name(uint8_t syndrome)
{
	static const char *const naks[] = {
		[NAK_PSN_SEQ_ERR] = "NAK PSN sequence error",
		[NAK_INVALID_REQUEST] = "NAK invalid request",
		[NAK_REMOTE_ACCESS] = "NAK remote access error",
		[NAK_REMOTE_OP] = "NAK remote operational error",
	};
	uint8_t value = syndrome & AETH_VALUE_MASK;

	switch (syndrome & AETH_TYPE_MASK) {
	case AETH_ACK:
		return "ACK";
	case AETH_RNR_NAK:
		return "RNR NAK";
	case AETH_NAK:
		return value < sizeof(naks) / sizeof(naks[0]) ? naks[value] : "NAK (reserved code)";
	default:
		return "reserved syndrome";
	}
}
