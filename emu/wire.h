/* SPDX-License-Identifier: MIT */
/*
 * The wire format between two engines (docs/wire-protocol.md). A TCP stream starts with a
 * hello from the side that connected; then frames follow, each a 32-bit length and one IBA
 * packet: BTH, the extension headers its opcode calls for, payload. TCP already segments,
 * orders and retransmits, so every message travels as one *_ONLY packet, whatever its size.
 * All fields are big-endian, as on an IB wire.
 */
#ifndef SOFTRDMA_EMU_WIRE_H
#define SOFTRDMA_EMU_WIRE_H

#include <stdbool.h>
#include <stdint.h>

#define WIRE_MAGIC	0x5352444du	/* "SRDM" */
#define WIRE_VERSION	4

/* What a connection to an engine's listener is for: its first bytes say (docs/wire-protocol.md). */
enum wire_hello_kind {
	HELLO_STREAM = 1,	/* a requester's stream to the responder QP dst_qpn */
	HELLO_VERIFY = 2,	/* a responder asks the engine of src_qpn: is this stream yours? */
	HELLO_LOCAL_CLAIM = 3,	/* the same question over AF_UNIX, for the same-host path */
};

#define HELLO_SAME_HOST	0x01	/* STREAM: the requester takes the same-host path if offered */

struct wire_hello {
	uint32_t magic;
	uint16_t version;
	uint16_t length;	/* sizeof(struct wire_hello) */
	uint8_t kind;		/* enum wire_hello_kind */
	uint8_t flags;
	uint16_t reserved;
	uint32_t src_qpn;	/* the requester's QP */
	uint32_t dst_qpn;	/* the responder's QP */
	uint8_t src_gid[16];	/* STREAM: the requester's GID (its sgid_index entry) */
	/* VERIFY, LOCAL_CLAIM: the stream's two ends as its responder sees them */
	uint8_t req_addr[16];
	uint8_t resp_addr[16];
	uint16_t req_port;
	uint16_t resp_port;
	uint32_t reserved2;
} __attribute__((packed));

enum wire_verdict_code {
	VERDICT_NOT_MINE = 0,	/* no stream of the asker's description is this engine's */
	VERDICT_MINE = 1,
};

#define VERDICT_SAME_HOST	0x01	/* VERIFY: local_name may be asked for the same-host path */
#define WIRE_LOCAL_NAME_LEN	44

/* The answer to a VERIFY or a LOCAL_CLAIM hello, on the same connection. */
struct wire_verdict {
	uint32_t magic;
	uint16_t version;
	uint16_t length;	/* sizeof(struct wire_verdict) */
	uint8_t verdict;	/* enum wire_verdict_code */
	uint8_t flags;
	uint16_t reserved;
	/* LOCAL_CLAIM: where WIRE_PROBE lies in the answering process, so that the asker can
	 * try process_vm_readv(2) on it (ptrace rules and seccomp may refuse it) */
	uint64_t probe_addr;
	char local_name[WIRE_LOCAL_NAME_LEN];	/* VERIFY: abstract AF_UNIX name, NUL-padded */
} __attribute__((packed));

#define WIRE_PROBE	"softrdma-probe!"	/* 16 bytes with its NUL */

/* IBA Base Transport Header. */
struct wire_bth {
	uint8_t opcode;
	uint8_t flags;		/* SE, MigReq, PadCnt, TVer */
	uint16_t pkey;
	uint32_t qpn;		/* 8 reserved bits, 24-bit destination QP */
	uint32_t apsn;		/* AckReq bit, 7 reserved bits, 24-bit PSN */
} __attribute__((packed));

#define BTH_SE		0x80
#define BTH_ACK_REQ	0x80000000u
/* A reserved BTH bit that softrdma uses between its own engines: the frame carries, in
 * place of its payload, where the payload lies in the requester's memory (peer_mem.c). */
#define BTH_BY_REF	0x40000000u
/*
 * Another of them: the headers end with an ACKETH (below), the sender's acknowledgement of
 * the receiver's own requests, carried on the sender's request stream. It keeps what
 * causality a single RoCE wire gives: an answer the sender's application posts after a
 * receive completion cannot overtake the ACK that came before that completion, although
 * the two travel on different streams.
 */
#define BTH_ACKED	0x20000000u
#define BTH_PSN_MASK	0x00ffffffu
#define BTH_QPN_MASK	0x00ffffffu

struct wire_reth {
	uint64_t va;
	uint32_t rkey;
	uint32_t dma_len;
} __attribute__((packed));

struct wire_aeth {
	uint32_t syndrome_msn;	/* 8-bit syndrome, 24-bit MSN */
} __attribute__((packed));

struct wire_atmeth {
	uint64_t va;
	uint32_t rkey;
	uint64_t swap_add;
	uint64_t compare;
} __attribute__((packed));

struct wire_atmack {
	uint64_t orig;
} __attribute__((packed));

/* Datagram Extended Transport Header (UD). */
struct wire_deth {
	uint32_t qkey;
	uint32_t src_qp;	/* 8 reserved bits, 24-bit source QP */
} __attribute__((packed));

/* XRC Extended Transport Header: the XRC SRQ at the target that a request is for. */
struct wire_xrceth {
	uint32_t srqn;		/* 8 reserved bits, 24-bit XRC SRQ number */
} __attribute__((packed));

/* softrdma's piggybacked acknowledgement: every request up to psn executed (RC only). */
struct wire_acketh {
	uint32_t psn;		/* 8 reserved bits, 24-bit PSN */
} __attribute__((packed));

struct wire_immdt {
	uint32_t imm;
} __attribute__((packed));

struct wire_ieth {
	uint32_t rkey;
} __attribute__((packed));

/* AETH syndromes (IBTA 9.7.5.1). */
#define AETH_ACK		0x00
#define AETH_ACK_NO_CREDIT	0x1f	/* "invalid credit count": credits not used */
#define AETH_RNR_NAK		0x20	/* | RNR timer code */
#define AETH_NAK		0x60	/* | NAK code */
#define AETH_TYPE_MASK		0xe0
#define AETH_VALUE_MASK		0x1f

enum aeth_nak_code {
	NAK_PSN_SEQ_ERR = 0,
	NAK_INVALID_REQUEST = 1,
	NAK_REMOTE_ACCESS = 2,
	NAK_REMOTE_OP = 3,
};

/*
 * An opcode is a transport in its top three bits and an operation in the other five (IBTA
 * 9.2.1): RC_SEND_ONLY 0x04 and UC_SEND_ONLY 0x24 are the same operation.
 */
#define OP_TRANSPORT_MASK	0xe0
#define OP_TRANSPORT_RC		0x00
#define OP_TRANSPORT_UC		0x20
#define OP_TRANSPORT_UD		0x60
#define OP_TRANSPORT_XRC	0xa0	/* requests carry an XRCETH after the BTH */

/* The operation of an opcode, whatever its transport: RC's opcode for it. */
static inline uint8_t wire_operation(uint8_t opcode)
{
	return opcode & ~OP_TRANSPORT_MASK;
}

/* The opcodes we send or must recognise (IBTA table 38). */
enum wire_opcode {
	OP_RC_SEND_ONLY = 0x04,
	OP_RC_SEND_ONLY_IMM = 0x05,
	OP_RC_WRITE_ONLY = 0x0a,
	OP_RC_WRITE_ONLY_IMM = 0x0b,
	OP_RC_READ_REQUEST = 0x0c,
	OP_RC_READ_RESPONSE_ONLY = 0x10,
	OP_RC_ACK = 0x11,
	OP_RC_ATOMIC_ACK = 0x12,
	OP_RC_CMP_SWAP = 0x13,
	OP_RC_FETCH_ADD = 0x14,
	OP_RC_SEND_ONLY_INV = 0x17,
	OP_UC_SEND_ONLY = 0x24,
	OP_UC_SEND_ONLY_IMM = 0x25,
	OP_UC_WRITE_ONLY = 0x2a,
	OP_UC_WRITE_ONLY_IMM = 0x2b,
	OP_UD_SEND_ONLY = 0x64,
	OP_UD_SEND_ONLY_IMM = 0x65,
	/* XRC: RC's operations at 0xa0 + the same number; requests with an XRCETH. */
	OP_XRC_SEND_ONLY = 0xa4,
	OP_XRC_SEND_ONLY_IMM = 0xa5,
	OP_XRC_WRITE_ONLY = 0xaa,
	OP_XRC_WRITE_ONLY_IMM = 0xab,
	OP_XRC_READ_REQUEST = 0xac,
	OP_XRC_READ_RESPONSE_ONLY = 0xb0,
	OP_XRC_ACK = 0xb1,
	OP_XRC_ATOMIC_ACK = 0xb2,
	OP_XRC_CMP_SWAP = 0xb3,
	OP_XRC_FETCH_ADD = 0xb4,
	OP_XRC_SEND_ONLY_INV = 0xb7,
	/* Manufacturer-specific range (0xc0-0xff): responder to requester, "I can read your
	 * memory" (the same-host path, emu/peer_mem.c). BTH only. */
	OP_PEER_MEMORY = 0xc0,
	/* Responder to requester, "a frame of this exchange was dropped here": by
	 * SOFTRDMA_FAULTS, or a request that came to a QP taking none. Only a known loss spends
	 * the requester's retries (docs/semantics.md, "Liveness"). BTH only. */
	OP_DROP_NOTICE = 0xc1,
};

/* Which extension headers follow the BTH, and what the packet is. */
enum {
	HDR_RETH = 1 << 0,
	HDR_AETH = 1 << 1,
	HDR_ATMETH = 1 << 2,
	HDR_ATMACK = 1 << 3,
	HDR_IMMDT = 1 << 4,
	HDR_IETH = 1 << 5,
	HDR_DETH = 1 << 6,
	HDR_XRCETH = 1 << 7,
	OPF_REQUEST = 1 << 8,	/* requester -> responder */
	OPF_RESPONSE = 1 << 9,	/* responder -> requester */
	OPF_PAYLOAD = 1 << 10,	/* may carry payload */
	OPF_RECV_WQE = 1 << 11,	/* consumes a receive WQE */
	OPF_READ_ATOMIC = 1 << 12,	/* uses a max_rd_atomic credit */
	OPF_DATAGRAM = 1 << 13,	/* UD: travels as one UDP datagram */
};

struct wire_opcode_info {
	const char *name;
	uint32_t flags;
	uint8_t hdr_len;	/* BTH and extension headers */
	uint8_t off_reth, off_aeth, off_atmeth, off_atmack, off_immdt, off_ieth, off_deth,
		off_xrceth;
};

/* NULL name: not an opcode we accept. */
extern const struct wire_opcode_info wire_opcodes[256];

#define WIRE_MAX_HDR		64
/* The length word counts BTH, headers and payload; a message is at most 2 GiB. */
#define WIRE_MAX_FRAME		(WIRE_MAX_HDR + (1ull << 31))

/* A parsed frame header, host byte order. */
struct wire_packet {
	uint8_t opcode;
	bool solicited;
	bool ack_req;
	uint32_t qpn;
	uint32_t psn;
	uint64_t va;
	uint32_t rkey;
	uint32_t dma_len;
	uint8_t syndrome;
	uint32_t msn;
	uint64_t swap_add, compare, orig;
	uint32_t imm;		/* kept in network order, as ibv_wc.imm_data */
	uint32_t inv_rkey;
	uint32_t qkey;		/* DETH */
	uint32_t src_qp;	/* DETH */
	uint32_t srqn;		/* XRCETH */
	uint64_t payload_len;	/* with by_ref: of the descriptor, until it is read */
	bool by_ref;
	bool acked;		/* an ACKETH: the receiver's requests up to acked_psn are done */
	uint32_t acked_psn;
};

/* The header length a frame of this opcode needs, or 0 if the opcode is not accepted. */
static inline unsigned int wire_header_len(uint8_t opcode)
{
	return wire_opcodes[opcode].name ? wire_opcodes[opcode].hdr_len : 0;
}

/* The headers of the frame whose BTH is at hdr (12 bytes needed): with an ACKETH if it has one. */
static inline unsigned int wire_frame_header_len(const uint8_t *hdr)
{
	return wire_header_len(hdr[0]) + (((uint32_t)hdr[8] << 24) & BTH_ACKED ? 4 : 0);
}

/* What an AETH syndrome says, for the log: "ACK", "RNR NAK", "NAK remote access error"... */
const char *aeth_syndrome_name(uint8_t syndrome);

/* Parses BTH + extension headers of a frame whose length word said frame_len: 0 or EPROTO. */
int wire_parse(const uint8_t *hdr, uint64_t frame_len, struct wire_packet *pkt);

/* Writes length word + headers for pkt into buf; returns bytes written (<= 4 + WIRE_MAX_HDR). */
unsigned int wire_build(uint8_t *buf, const struct wire_packet *pkt);

#endif
