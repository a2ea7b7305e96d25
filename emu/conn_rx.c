// SPDX-License-Identifier: MIT
/*
 * The stream reader: frames one after the other through named states (siw's
 * siw_tcp_rx_data() is the model), on the engine thread.
 *
 *   RX_GET_HDR   the length word and the headers, read ahead into a small staging buffer
 *                (many small frames cost one recv); checked before anything is done
 *   RX_GET_DESC  a by-reference frame's descriptor: where its payload lies in the
 *                requester's memory (the same-host path, peer_mem.c)
 *   RX_GET_DATA  the payload, into the sink the responder or completer chose: staged bytes
 *                first, then a large payload straight from the socket into registered
 *                memory (emu/sink.c), or pulled from the requester's process
 *
 * Each state's step says what it came to (enum rx_step); conn_read() acts on it. A stream
 * is read only while nothing holds it (enum rx_hold): not bound yet, or owing its peer
 * more than the bounds of emu/conn.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "emu/counters.h"
#include "emu/internal.h"
#include "emu/pcap.h"

#define STAGE_SIZE	65536
#define DIRECT_MIN	16384	/* payloads at least this large bypass the staging buffer */
#define FRAMES_PER_WAKE	256	/* then let other streams have a turn */

enum rx_step {
	RX_STEP_DONE,		/* the state did its part: go on in the next one */
	RX_STEP_FILL,		/* it needs more bytes in the staging buffer */
	RX_STEP_DRAINED,	/* the socket has nothing more for a payload read directly */
	RX_STEP_BROKEN,		/* the peer closed or reset the stream */
	RX_STEP_PROTOCOL,	/* the peer broke the protocol */
};

size_t conn_staged(const struct conn *c)
{
	return c->rx.stage_len - c->rx.stage_off;
}

/* Reads more into the staging buffer: >0 bytes read, 0 peer closed, -1 nothing yet / error. */
static ssize_t stage_fill(struct conn *c)
{
	struct conn_rx *rx = &c->rx;
	size_t want;
	ssize_t n;

	if (rx->stage_off) {
		memmove(rx->stage, rx->stage + rx->stage_off, rx->stage_len - rx->stage_off);
		rx->stage_len -= rx->stage_off;
		rx->stage_off = 0;
	}
	want = STAGE_SIZE - rx->stage_len;
	/*
	 * After a large payload another is likely: read no more than a header, so that the
	 * next payload goes from the socket straight into its target, not through this buffer.
	 */
	if (rx->expect_large && rx->state == RX_GET_HDR && rx->stage_len < 4 + WIRE_MAX_HDR)
		want = 4 + WIRE_MAX_HDR - rx->stage_len;
	n = recv(c->watch.fd, rx->stage + rx->stage_len, want, MSG_DONTWAIT);
	if (n > 0)
		rx->stage_len += (size_t)n;
	return n;
}

/* PEER_MEMORY: the responder reads our payloads from now on (peer_mem.c). */
static enum rx_step take_peer_memory(struct conn *c, uint32_t frame_len)
{
	struct emu_qp *qp = c->qp;

	if (!c->initiator || !c->peer_may_read || c->rx.pkt.qpn != qp->qpn)
		return RX_STEP_PROTOCOL;
	c->rx.stage_off += 4 + frame_len;
	pthread_mutex_lock(&qp->lock);
	c->peer_reads = true;
	pthread_mutex_unlock(&qp->lock);
	return RX_STEP_DONE;
}

/* DROP_NOTICE: the responder dropped a frame of ours or its answer; the ACK timer resends. */
static enum rx_step take_drop_notice(struct conn *c, uint32_t frame_len)
{
	struct emu_qp *qp = c->qp;

	if (!c->initiator || c->rx.pkt.qpn != qp->qpn)
		return RX_STEP_PROTOCOL;
	c->rx.stage_off += 4 + frame_len;
	pthread_mutex_lock(&qp->lock);
	qp->comp.lost = true;
	pthread_mutex_unlock(&qp->lock);
	return RX_STEP_DONE;
}

/* The frame's headers passed their checks: the responder or completer picks the sink. */
static void begin_frame(struct conn *c, unsigned int hdr_len)
{
	struct conn_rx *rx = &c->rx;
	struct emu_qp *qp = c->qp;

	rx->stage_off += 4 + hdr_len;
	memset(&rx->sink, 0, sizeof(rx->sink));
	pthread_mutex_lock(&qp->lock);
	if (c->initiator)
		completer_begin(qp, c, &rx->pkt, &rx->sink);
	else
		responder_begin(qp, c, &rx->pkt, &rx->sink);
	pthread_mutex_unlock(&qp->lock);
	counter_packet(QP_COUNTERS(qp), EMU_CNT_RCV_DATA, hdr_len, rx->pkt.payload_len);
	rx->payload_left = rx->pkt.payload_len;
	rx->expect_large = !rx->pkt.by_ref && rx->pkt.payload_len >= DIRECT_MIN;
	rx->state = RX_GET_DATA;
}

/* Requests on the stream the peer opened, responses on ours; all for this QP, in its
 * transport (which also keeps UD opcodes off streams). */
static bool belongs_here(const struct conn *c, const struct wire_packet *pkt)
{
	const struct emu_qp *qp = c->qp;

	return pkt->qpn == qp->qpn &&
	       (pkt->opcode & OP_TRANSPORT_MASK) == qp_opcode_transport(qp->type) &&
	       (wire_opcodes[pkt->opcode].flags & (c->initiator ? OPF_RESPONSE : OPF_REQUEST));
}

static enum rx_step rx_get_hdr(struct conn *c)
{
	struct conn_rx *rx = &c->rx;
	const uint8_t *at = rx->stage + rx->stage_off;
	uint32_t frame_len;
	unsigned int hdr_len;

	if (conn_staged(c) < 5)
		return RX_STEP_FILL;
	memcpy(&frame_len, at, 4);
	frame_len = ntohl(frame_len);
	hdr_len = wire_header_len(at[4]);
	if (!hdr_len || frame_len < hdr_len)
		return RX_STEP_PROTOCOL;
	if (conn_staged(c) < 4 + hdr_len)
		return RX_STEP_FILL;
	hdr_len = wire_frame_header_len(at + 4);
	if (frame_len < hdr_len)
		return RX_STEP_PROTOCOL;
	if (conn_staged(c) < 4 + hdr_len)
		return RX_STEP_FILL;
	if (wire_parse(at + 4, frame_len, &rx->pkt))
		return RX_STEP_PROTOCOL;
	if (pcap_active)
		pcap_stream_frame(&c->peer, &c->local, c->qp->qpn, at,
				  conn_staged(c) < 4ull + frame_len ? conn_staged(c) : 4ull + frame_len);
	rx->hdr_len = hdr_len;
	if (rx->pkt.opcode == OP_PEER_MEMORY)
		return take_peer_memory(c, frame_len);
	if (rx->pkt.opcode == OP_DROP_NOTICE)
		return take_drop_notice(c, frame_len);
	if (!belongs_here(c, &rx->pkt))
		return RX_STEP_PROTOCOL;
	if (rx->pkt.by_ref) {
		rx->state = RX_GET_DESC;
		return RX_STEP_DONE;
	}
	begin_frame(c, hdr_len);
	return RX_STEP_DONE;
}

/* A by-reference frame: only on a stream whose requester the kernel named (peer_mem.c). */
static enum rx_step rx_get_desc(struct conn *c)
{
	struct conn_rx *rx = &c->rx;
	unsigned int hdr_len = rx->hdr_len;
	uint64_t desc_len = rx->pkt.payload_len, total;

	if (c->initiator || !c->peer_mem.pid || !(wire_opcodes[rx->pkt.opcode].flags & OPF_PAYLOAD) ||
	    desc_len > EMU_MAX_SGE * PEER_MEM_DESC_LEN)
		return RX_STEP_PROTOCOL;
	if (conn_staged(c) < 4 + hdr_len + desc_len)
		return RX_STEP_FILL;
	if (peer_mem_parse(rx->stage + rx->stage_off + 4 + hdr_len, desc_len, rx->pull,
			   &rx->npull, &total))
		return RX_STEP_PROTOCOL;
	rx->pkt.payload_len = total;
	rx->stage_off += desc_len;
	begin_frame(c, hdr_len);
	return RX_STEP_DONE;
}

/* A by-reference payload, read from the requester's process chunk by checked chunk. */
static void pull_payload(struct conn *c)
{
	struct rx_sink *sink = &c->rx.sink;

	sink_pull(sink, c->peer_mem.pid, c->rx.pull, c->rx.npull);
	if (sink->kind != SINK_DISCARD && sink->failure == MEM_ACCESS_OK) {
		/* The peer may have died and its pid gone to another process. */
		if (peer_mem_still_there(&c->peer_mem))
			qp_counter_add(QP_COUNTERS(c->qp), EMU_CNT_SAME_HOST_PAYLOADS, 1);
		else
			sink->failure = MEM_ACCESS_PEER_FAULT;
	}
	c->rx.payload_left = 0;
}

static void end_frame(struct conn *c)
{
	struct emu_qp *qp = c->qp;

	c->rx.state = RX_GET_HDR;
	pthread_mutex_lock(&qp->lock);
	if (c->state != CONN_CLOSED) {
		if (c->initiator)
			completer_end(qp, c, &c->rx.pkt, &c->rx.sink);
		else
			responder_end(qp, c, &c->rx.pkt, &c->rx.sink);
	}
	pthread_mutex_unlock(&qp->lock);
}

static enum rx_step rx_get_data(struct conn *c)
{
	struct conn_rx *rx = &c->rx;

	if (rx->pkt.by_ref)
		pull_payload(c);
	while (rx->payload_left) {
		size_t n = conn_staged(c);
		ssize_t got;

		if (n) {
			if (n > rx->payload_left)
				n = (size_t)rx->payload_left;
			sink_place(&rx->sink, rx->stage + rx->stage_off, n);
			rx->stage_off += n;
			rx->payload_left -= n;
			continue;
		}
		if (rx->payload_left < DIRECT_MIN)
			return RX_STEP_FILL;
		got = sink_recv(&rx->sink, c->watch.fd, rx->payload_left);
		if (got == 0)
			return RX_STEP_BROKEN;
		if (got < 0)
			return errno == EAGAIN || errno == EINTR ? RX_STEP_DRAINED : RX_STEP_BROKEN;
		rx->payload_left -= (uint64_t)got;
	}
	end_frame(c);
	return RX_STEP_DONE;
}

static enum rx_step rx_step(struct conn *c)
{
	switch (c->rx.state) {
	case RX_GET_HDR:
		/* A peer that does not read what it is owed gets nothing more done for it. */
		if (!c->initiator)
			conn_check_backlog(c);
		if (c->rx.hold)
			return RX_STEP_DRAINED;
		return rx_get_hdr(c);
	case RX_GET_DESC:
		return rx_get_desc(c);
	case RX_GET_DATA:
		return rx_get_data(c);
	}
	return RX_STEP_PROTOCOL;
}

/* Reads what the stream has, a bounded number of frames per turn. */
static void read_frames(struct conn *c)
{
	for (int frames = 0; c->state != CONN_CLOSED && !c->rx.hold;) {
		enum rx_state before = c->rx.state;
		ssize_t n;

		switch (rx_step(c)) {
		case RX_STEP_DONE:
			if (before == RX_GET_DATA && ++frames == FRAMES_PER_WAKE) {
				/* Frames may be left staged, which no socket event announces. */
				engine_kick(c->engine, c);
				return;
			}
			continue;
		case RX_STEP_FILL:
			n = stage_fill(c);
			if (n > 0)
				continue;
			if (n == 0 || (errno != EAGAIN && errno != EINTR))
				conn_broken(c);
			return;
		case RX_STEP_DRAINED:
			return;
		case RX_STEP_BROKEN:
			conn_broken(c);
			return;
		case RX_STEP_PROTOCOL:
			conn_protocol_error(c);
			return;
		}
	}
}

void conn_read(struct conn *c)
{
	struct emu_qp *qp = c->qp;

	if (!c->rx.stage && !(c->rx.stage = malloc(STAGE_SIZE))) {
		conn_broken(c);
		return;
	}
	read_frames(c);
	/*
	 * Then the responder sends one ACK for all it executed in this read, and its receive
	 * completions become visible. On a stream cut off meanwhile the ACK cannot go: the
	 * requester resends, the duplicates are ACKed, and the receives complete now.
	 */
	if (c->initiator)
		return;
	pthread_mutex_lock(&qp->lock);
	if (c->state == CONN_CLOSED)
		responder_release_held(qp);
	else
		responder_flush_ack(qp, c);
	pthread_mutex_unlock(&qp->lock);
}

void conn_process_staged(struct conn *c)
{
	if (c->state != CONN_CLOSED && !c->rx.hold)
		conn_read(c);
}
