// SPDX-License-Identifier: MIT
/*
 * Internal to rsocket.c: the byte stream two stream rsockets exchange over their TCP
 * connection. Nothing here is API. Applications see only <rdma/rsocket.h>, which this header
 * includes so that rsocket.c is compiled against the exact prototypes librdmacm publishes.
 *
 * Every byte of the connection belongs to a frame: a header, then `len` bytes of payload.
 * Stream data travels in DATA frames. riowrite() data travels in IOWRITE frames, which the
 * receiver copies into the buffer it registered with riomap() instead of handing them to
 * rrecv(). The receiver announces those buffers with IOMAP and IOUNMAP frames, so that the
 * writer can refuse an offset nothing is mapped at, as rsockets do. Each side's first frame
 * is HELLO: it carries RDMA_IOMAPSIZE, the number of buffers the other side may announce,
 * which real rsockets exchange while connecting.
 */
#ifndef SOFTRDMA_RSOCKET_WIRE_H
#define SOFTRDMA_RSOCKET_WIRE_H

#include <stdint.h>

#include <rdma/rsocket.h>

#define RS_WIRE_MAGIC		0x72736f6bu	/* "rsok" */
#define RS_WIRE_VERSION		1
#define RS_FRAME_MAX_PAYLOAD	(64u * 1024)
#define RS_CTRL_PAYLOAD_LEN	16u

enum rs_frame_type {
	RS_FRAME_HELLO = 1,	/* payload: struct rs_wire_hello */
	RS_FRAME_DATA,		/* payload: stream bytes */
	RS_FRAME_IOWRITE,	/* payload: bytes for the peer's mapping at rs_wire_hdr.offset */
	RS_FRAME_IOMAP,		/* payload: struct rs_wire_iomap, a buffer the peer may write */
	RS_FRAME_IOUNMAP,	/* payload: struct rs_wire_iomap, a buffer no longer mapped */
};

/* Multi-byte fields are big-endian on the wire. */
struct rs_wire_hdr {
	uint8_t type;
	uint8_t reserved[3];
	uint32_t len;
	uint64_t offset;	/* IOWRITE only: where the first payload byte goes */
};

struct rs_wire_hello {
	uint32_t magic;
	uint16_t version;
	uint16_t reserved;
	uint32_t iomap_size;
	uint32_t reserved2;
};

struct rs_wire_iomap {
	uint64_t offset;
	uint64_t len;
};

#define RS_FRAME_HDR_LEN	sizeof(struct rs_wire_hdr)

_Static_assert(sizeof(struct rs_wire_hdr) == 16, "rs_wire_hdr is 16 bytes on the wire");
_Static_assert(sizeof(struct rs_wire_hello) == RS_CTRL_PAYLOAD_LEN, "HELLO payload size");
_Static_assert(sizeof(struct rs_wire_iomap) == RS_CTRL_PAYLOAD_LEN, "IOMAP payload size");

#endif /* SOFTRDMA_RSOCKET_WIRE_H */
