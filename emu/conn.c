// SPDX-License-Identifier: MIT
/*
 * One TCP stream between two QPs. The requester connects and sends a hello naming both
 * QPs; the responder's engine checks it and binds the stream to its QP. Requests travel
 * on the stream their requester opened and responses come back on it, so each side of a
 * connected pair opens one stream and accepts one.
 *
 * The reader reads ahead into a small staging buffer, so many small frames cost one recv;
 * a large payload is received straight into registered memory (emu/sink.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/sockios.h>
#include <netinet/tcp.h>

#include "emu/counters.h"
#include "emu/internal.h"

#define STAGE_SIZE	65536
#define DIRECT_MIN	16384	/* payloads at least this large bypass the staging buffer */
#define FRAMES_PER_WAKE	256	/* then let other streams have a turn */

static void conn_ready(struct io_watch *w, uint32_t revents);
static void conn_read(struct conn *c);
static size_t staged(const struct conn *c);

static struct conn *conn_new(struct emu_engine *e, int fd, bool initiator)
{
	struct conn *c = calloc(1, sizeof(*c));
	int one = 1;

	if (!c)
		return NULL;
	c->stage = malloc(STAGE_SIZE);
	if (!c->stage) {
		free(c);
		return NULL;
	}
	c->engine = e;
	c->initiator = initiator;
	c->watch.fd = fd;
	c->watch.ready = conn_ready;
	pthread_mutex_init(&c->tx_lock, NULL);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return c;
}

static void set_watch(struct conn *c)
{
	uint32_t want = 0;

	if (c->state == CONN_CLOSED)
		return;
	if (!c->paused)
		want |= IO_IN;
	if (c->want_out || c->state == CONN_CONNECTING)
		want |= IO_OUT;
	if (want != c->watch.events) {
		c->watch.events = want;
		engine_rewatch(c->engine, &c->watch);
	}
}

void conn_set_paused(struct conn *c, bool paused)
{
	c->paused = paused;
	set_watch(c);
	/* What was read ahead before the pause is not announced by the socket again. */
	if (!paused && staged(c))
		engine_kick(c->engine, c);
}

void conn_process_staged(struct conn *c)
{
	if (c->state != CONN_CLOSED && !c->paused)
		conn_read(c);
}

/* Called with c->qp->lock held when the stream is bound to a QP. */
void conn_close(struct conn *c)
{
	struct tx_chunk *chunk;

	if (c->state == CONN_CLOSED)
		return;
	pthread_mutex_lock(&c->tx_lock);
	c->state = CONN_CLOSED;
	while ((chunk = c->txq)) {
		c->txq = chunk->next;
		free(chunk);
	}
	c->txq_tail = NULL;
	pthread_mutex_unlock(&c->tx_lock);
	engine_unwatch(c->engine, &c->watch);
	engine_unkick(c->engine, c);
	close(c->watch.fd);
	c->watch.fd = -1;
	if (c->qp) {
		if (c->qp->req_conn == c)
			c->qp->req_conn = NULL;
		if (c->qp->resp_conn == c)
			c->qp->resp_conn = NULL;
	}
	c->next_closed = c->engine->closed;
	c->engine->closed = c;
}

static void request_output(void *arg)
{
	struct conn *c = arg;

	set_watch(c);
}

/* Sends queued chunks; returns 0, or errno when the stream broke. Called with tx_lock. */
static int flush_queue(struct conn *c)
{
	struct tx_chunk *chunk;

	while ((chunk = c->txq)) {
		ssize_t n = send(c->watch.fd, chunk->data + chunk->off, chunk->len - chunk->off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : errno;
		chunk->off += (size_t)n;
		if (chunk->off < chunk->len)
			return 0;
		c->txq = chunk->next;
		if (!c->txq)
			c->txq_tail = NULL;
		free(chunk);
	}
	return 0;
}

static int queue_bytes(struct conn *c, const struct iovec *iov, int niov, size_t skip)
{
	size_t total = 0, at = 0;
	struct tx_chunk *chunk;

	for (int i = 0; i < niov; i++)
		total += iov[i].iov_len;
	if (skip >= total)
		return 0;
	chunk = malloc(sizeof(*chunk) + total - skip);
	if (!chunk)
		return ENOMEM;
	chunk->next = NULL;
	chunk->off = 0;
	chunk->len = total - skip;
	for (int i = 0; i < niov; i++) {
		size_t len = iov[i].iov_len;
		const uint8_t *base = iov[i].iov_base;

		if (skip >= len) {
			skip -= len;
			continue;
		}
		memcpy(chunk->data + at, base + skip, len - skip);
		at += len - skip;
		skip = 0;
	}
	if (c->txq_tail)
		c->txq_tail->next = chunk;
	else
		c->txq = chunk;
	c->txq_tail = chunk;
	return 0;
}

void conn_tx_lock(struct conn *c)
{
	pthread_mutex_lock(&c->tx_lock);
}

/*
 * With tx_lock held: sends what the socket takes now, queues the rest (after anything
 * already queued, so frames stay in order) and has the engine watch for room. Releases
 * tx_lock.
 */
static int send_iov_unlock(struct conn *c, const struct iovec *iov, int niov)
{
	struct msghdr msg = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)niov };
	ssize_t sent = 0;
	int ret;

	if (c->state == CONN_CLOSED || c->tx_error) {
		pthread_mutex_unlock(&c->tx_lock);
		return EPIPE;
	}
	if (c->state == CONN_OPEN && !c->txq) {
		sent = sendmsg(c->watch.fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (sent < 0) {
			if (errno != EAGAIN && errno != EINTR) {
				c->tx_error = true;
				ret = errno;
				pthread_mutex_unlock(&c->tx_lock);
				return ret;
			}
			sent = 0;
		}
	}
	ret = queue_bytes(c, iov, niov, (size_t)sent);
	if (!ret && c->txq && !c->want_out) {
		c->want_out = true;
		if (engine_on_thread(c->engine)) {
			pthread_mutex_unlock(&c->tx_lock);
			set_watch(c);
			return 0;
		}
		c->out_call.fn = request_output;
		c->out_call.arg = c;
		engine_call_async(c->engine, &c->out_call);
	}
	pthread_mutex_unlock(&c->tx_lock);
	return ret;
}

int conn_send_frame(struct conn *c, const uint8_t *hdr, size_t hdr_len,
		    const struct iovec *payload, int niov)
{
	struct iovec iov[1 + EMU_MAX_SGE];

	if (niov > EMU_MAX_SGE)
		return EINVAL;
	/* SOFTRDMA_FAULTS: lost on the way, as far as anyone can tell. Never the hello: it
	 * stands for a connection, not for a packet, and a peer reading a request as a hello
	 * would close the stream, which no lost packet does. */
	if (c->state != CONN_CONNECTING && fault_drop_frame(c->qp, hdr))
		return 0;
	counters_stream_frame(QP_COUNTERS(c->qp), hdr, hdr_len, payload, niov);
	iov[0].iov_base = (void *)hdr;
	iov[0].iov_len = hdr_len;
	for (int i = 0; i < niov; i++)
		iov[1 + i] = payload[i];
	pthread_mutex_lock(&c->tx_lock);
	return send_iov_unlock(c, iov, niov + 1);
}

bool conn_tx_drained(struct conn *c)
{
	int unsent = 0;
	bool drained;

	pthread_mutex_lock(&c->tx_lock);
	drained = !c->txq && !ioctl(c->watch.fd, SIOCOUTQNSD, &unsent) && unsent == 0;
	pthread_mutex_unlock(&c->tx_lock);
	return drained;
}

int conn_send_batch_unlock(struct conn *c, const struct tx_batch *b)
{
	counters_stream_batch(QP_COUNTERS(c->qp), b);
	return send_iov_unlock(c, b->iov, b->niov);
}

int conn_send_batch(struct conn *c, const struct tx_batch *b)
{
	conn_tx_lock(c);
	return conn_send_batch_unlock(c, b);
}

void tx_batch_release(struct tx_batch *b)
{
	for (int i = 0; i < b->nrefs; i++)
		mr_put(b->refs[i]);
	b->nframes = b->niov = b->nrefs = 0;
}

static void send_hello(struct conn *c, struct emu_qp *qp)
{
	struct wire_hello h = {
		.magic = htonl(WIRE_MAGIC),
		.version = htons(WIRE_VERSION),
		.length = htons(sizeof(h)),
		.src_qpn = htonl(qp->qpn),
		.dst_qpn = htonl(qp->attr.dest_qp_num),
	};
	struct iovec none;

	memcpy(h.src_gid, &qp->local_addr.sin6_addr, 16);
	/* Not UC: its WRs complete as they leave, and the buffer could be reused before the
	 * responder has read it. */
	if (qp->type == IBV_QPT_RC)
		c->peer_mem_offered = peer_mem_offer(&h);
	conn_send_frame(c, (const uint8_t *)&h, sizeof(h), &none, 0);
}

struct conn *conn_connect(struct emu_qp *qp)
{
	struct sockaddr_in6 local = qp->local_addr;
	struct conn *c;
	int fd;

	fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	c = conn_new(qp->engine, fd, true);
	if (!c) {
		close(fd);
		return NULL;
	}
	c->qp = qp;
	c->peer = qp->peer_addr;
	c->state = CONN_CONNECTING;
	/* RoCE sends from the source GID's address: the responder checks it. */
	local.sin6_port = 0;
	if (bind(fd, (struct sockaddr *)&local, sizeof(local)) ||
	    (connect(fd, (struct sockaddr *)&c->peer, sizeof(c->peer)) && errno != EINPROGRESS)) {
		c->tx_error = true;
	}
	c->watch.events = IO_IN | IO_OUT;
	engine_watch(c->engine, &c->watch);
	send_hello(c, qp);
	return c;
}

struct conn *conn_accept(struct emu_engine *e, int fd, const struct sockaddr_in6 *peer)
{
	struct conn *c = conn_new(e, fd, false);

	if (!c) {
		close(fd);
		return NULL;
	}
	c->peer = *peer;
	c->state = CONN_HELLO;
	c->watch.events = IO_IN;
	engine_watch(e, &c->watch);
	return c;
}

/* The stream is gone: tell its QP (a requester retries, then fails) and drop it. */
static void conn_broken(struct conn *c)
{
	struct emu_qp *qp = c->qp;

	if (!qp) {
		conn_close(c);
		return;
	}
	pthread_mutex_lock(&qp->lock);
	qp_conn_lost(qp, c);
	conn_close(c);
	pthread_mutex_unlock(&qp->lock);
}

/* A frame or hello that breaks the protocol: its QP goes to error, the stream closes. */
static void conn_protocol_error(struct conn *c)
{
	struct emu_qp *qp = c->qp;

	qp_counter_add(QP_COUNTERS(qp), EMU_CNT_RCV_ERRORS, 1);

	if (!qp) {
		conn_close(c);
		return;
	}
	pthread_mutex_lock(&qp->lock);
	if (qp->state != IBV_QPS_ERR && qp->state != IBV_QPS_RESET)
		qp_error(qp, IBV_EVENT_QP_FATAL);
	conn_close(c);
	pthread_mutex_unlock(&qp->lock);
}

/* Reads more into the staging buffer: >0 bytes read, 0 peer closed, -1 nothing yet / error. */
static ssize_t stage_fill(struct conn *c)
{
	size_t want;
	ssize_t n;

	if (c->stage_off) {
		memmove(c->stage, c->stage + c->stage_off, c->stage_len - c->stage_off);
		c->stage_len -= c->stage_off;
		c->stage_off = 0;
	}
	want = STAGE_SIZE - c->stage_len;
	/*
	 * After a large payload another is likely: read no more than a header, so that the
	 * next payload goes from the socket straight into its target, not through this buffer.
	 */
	if (c->expect_large && !c->in_payload && c->stage_len < 4 + WIRE_MAX_HDR)
		want = 4 + WIRE_MAX_HDR - c->stage_len;
	n = recv(c->watch.fd, c->stage + c->stage_len, want, MSG_DONTWAIT);
	if (n > 0)
		c->stage_len += (size_t)n;
	return n;
}

static size_t staged(const struct conn *c)
{
	return c->stage_len - c->stage_off;
}

static bool peer_matches(const struct emu_qp *qp, const struct conn *c)
{
	return !memcmp(&qp->peer_addr.sin6_addr, &c->peer.sin6_addr, 16);
}

/* Binds an accepted stream to its QP once the QP knows its peer (RTR). */
void conn_bind_pending(struct emu_qp *qp)
{
	struct conn *c = qp->resp_conn;

	if (!c || !c->paused || qp->state < IBV_QPS_RTR || qp->state == IBV_QPS_ERR)
		return;
	if (c->hello_src_qpn != qp->attr.dest_qp_num || !peer_matches(qp, c)) {
		conn_close(c);
		return;
	}
	conn_set_paused(c, false);
}

/* Tells the requester that its payloads may stay where they are (peer_mem.c). */
static void tell_peer_memory(struct conn *c)
{
	struct wire_packet pkt = { .opcode = OP_PEER_MEMORY, .qpn = c->hello_src_qpn };
	uint8_t hdr[4 + WIRE_MAX_HDR];

	conn_send_frame(c, hdr, wire_build(hdr, &pkt), NULL, 0);
}

static int handle_hello(struct conn *c)
{
	struct wire_hello h;
	struct emu_qp *qp;

	if (staged(c) < sizeof(h))
		return EAGAIN;
	memcpy(&h, c->stage + c->stage_off, sizeof(h));
	c->stage_off += sizeof(h);
	if (ntohl(h.magic) != WIRE_MAGIC || ntohs(h.version) != WIRE_VERSION ||
	    ntohs(h.length) != sizeof(h))
		return EPROTO;
	qp = engine_find_qp(c->engine, ntohl(h.dst_qpn));
	if (!qp || !qp_is_connected(qp))
		return ENOENT;	/* as hardware: nobody answers for a QP that is not there */
	pthread_mutex_lock(&qp->lock);
	c->qp = qp;
	c->hello_src_qpn = ntohl(h.src_qpn);
	c->state = CONN_OPEN;
	/* Once the QP knows its peer, an impostor is hung up on before it can displace it. */
	if (qp->state >= IBV_QPS_RTR && qp->state != IBV_QPS_ERR &&
	    (c->hello_src_qpn != qp->attr.dest_qp_num || !peer_matches(qp, c))) {
		conn_close(c);
		pthread_mutex_unlock(&qp->lock);
		return 0;
	}
	if (qp->resp_conn)
		conn_close(qp->resp_conn);	/* the requester reconnected */
	qp->resp_conn = c;
	if (peer_mem_accept(&h, &c->peer_mem))
		tell_peer_memory(c);
	/* Until the QP is RTR it cannot check the peer nor take requests: leave them queued. */
	c->paused = true;
	conn_bind_pending(qp);
	set_watch(c);
	pthread_mutex_unlock(&qp->lock);
	return 0;
}

/*
 * The frames only softrdma engines exchange: PEER_MEMORY, and the descriptor that stands
 * for a by-reference request's payload. Returns 0 when the frame was PEER_MEMORY (taken
 * whole), EINPROGRESS when it is an ordinary frame (now with its payload's real length),
 * EAGAIN or EPROTO.
 */
static int begin_softrdma_frame(struct conn *c, unsigned int hdr_len, uint32_t frame_len)
{
	uint64_t desc_len = c->pkt.payload_len, total;
	uint32_t flags = wire_opcodes[c->pkt.opcode].flags;

	if (c->pkt.opcode == OP_PEER_MEMORY) {
		if (!c->initiator || !c->peer_mem_offered || c->pkt.qpn != c->qp->qpn)
			return EPROTO;
		c->stage_off += 4 + frame_len;
		pthread_mutex_lock(&c->qp->lock);
		c->peer_reads = true;
		pthread_mutex_unlock(&c->qp->lock);
		return 0;
	}
	if (!c->pkt.by_ref)
		return EINPROGRESS;
	if (c->initiator || !c->peer_mem.pid || !(flags & OPF_PAYLOAD) ||
	    desc_len > EMU_MAX_SGE * PEER_MEM_DESC_LEN)
		return EPROTO;
	if (staged(c) < 4 + frame_len)
		return EAGAIN;
	if (peer_mem_parse(c->stage + c->stage_off + 4 + hdr_len, desc_len, c->pull, &c->npull,
			   &total))
		return EPROTO;
	c->pkt.payload_len = total;
	c->stage_off += desc_len;	/* the caller steps over length word and headers */
	return EINPROGRESS;
}

/* Parses the next frame's header from the staging buffer. */
static int begin_frame(struct conn *c)
{
	uint32_t frame_len;
	unsigned int hdr_len;
	int ret;
	struct emu_qp *qp = c->qp;

	if (staged(c) < 5)
		return EAGAIN;
	memcpy(&frame_len, c->stage + c->stage_off, 4);
	frame_len = ntohl(frame_len);
	hdr_len = wire_header_len(c->stage[c->stage_off + 4]);
	if (!hdr_len || frame_len < hdr_len)
		return EPROTO;
	if (staged(c) < 4 + hdr_len)
		return EAGAIN;
	if (wire_parse(c->stage + c->stage_off + 4, frame_len, &c->pkt))
		return EPROTO;
	ret = begin_softrdma_frame(c, hdr_len, frame_len);
	if (ret != EINPROGRESS)
		return ret;
	counter_packet(QP_COUNTERS(qp), EMU_CNT_RCV_DATA, hdr_len, c->pkt.payload_len);
	/* Requests on the stream the peer opened, responses on ours; all for this QP, in its
	 * transport (which also keeps UD opcodes off streams). */
	if (c->pkt.qpn != qp->qpn ||
	    (c->pkt.opcode & OP_TRANSPORT_MASK) != qp_opcode_transport(qp->type) ||
	    !(wire_opcodes[c->pkt.opcode].flags & (c->initiator ? OPF_RESPONSE : OPF_REQUEST)))
		return EPROTO;
	c->stage_off += 4 + hdr_len;
	memset(&c->sink, 0, sizeof(c->sink));
	pthread_mutex_lock(&qp->lock);
	if (c->initiator)
		completer_begin(qp, c, &c->pkt, &c->sink);
	else
		responder_begin(qp, c, &c->pkt, &c->sink);
	pthread_mutex_unlock(&qp->lock);
	c->in_payload = true;
	c->payload_left = c->pkt.payload_len;
	c->expect_large = !c->pkt.by_ref && c->pkt.payload_len >= DIRECT_MIN;
	return 0;
}

static void end_frame(struct conn *c)
{
	struct emu_qp *qp = c->qp;

	c->in_payload = false;
	pthread_mutex_lock(&qp->lock);
	if (c->state != CONN_CLOSED) {
		if (c->initiator)
			completer_end(qp, c, &c->pkt, &c->sink);
		else
			responder_end(qp, c, &c->pkt, &c->sink);
	}
	pthread_mutex_unlock(&qp->lock);
}

/* Moves payload bytes into the sink: 0 when the frame is complete, else EAGAIN or why not. */
static int take_payload(struct conn *c)
{
	if (c->pkt.by_ref) {
		sink_pull(&c->sink, c->peer_mem.pid, c->pull, c->npull);
		if (c->sink.kind != SINK_DISCARD && c->sink.failure == MEM_ACCESS_OK) {
			/* The peer may have died and its pid gone to another process. */
			if (peer_mem_still_there(&c->peer_mem))
				qp_counter_add(QP_COUNTERS(c->qp), EMU_CNT_SAME_HOST_PAYLOADS, 1);
			else
				c->sink.failure = MEM_ACCESS_PEER_FAULT;
		}
		c->payload_left = 0;
		return 0;
	}
	while (c->payload_left) {
		size_t n = staged(c);
		ssize_t got;

		if (n) {
			if (n > c->payload_left)
				n = (size_t)c->payload_left;
			sink_place(&c->sink, c->stage + c->stage_off, n);
			c->stage_off += n;
			c->payload_left -= n;
			continue;
		}
		if (c->payload_left >= DIRECT_MIN)
			got = sink_recv(&c->sink, c->watch.fd, c->payload_left);
		else
			got = stage_fill(c);
		if (got == 0)
			return ECONNRESET;
		if (got < 0)
			return errno == EAGAIN || errno == EINTR ? EAGAIN : errno;
		if (c->payload_left >= DIRECT_MIN)
			c->payload_left -= (uint64_t)got;
	}
	return 0;
}

static void conn_read_frames(struct conn *c)
{
	for (int frames = 0; c->state != CONN_CLOSED && !c->paused;) {
		int ret;

		if (frames == FRAMES_PER_WAKE) {
			/* Frames may be left in the staging buffer, which no socket event announces. */
			engine_kick(c->engine, c);
			return;
		}

		if (c->state == CONN_HELLO) {
			ret = handle_hello(c);
		} else if (!c->in_payload) {
			ret = begin_frame(c);
		} else {
			ret = take_payload(c);
			if (ret == 0) {
				end_frame(c);
				frames++;
				continue;
			}
		}
		if (ret == 0)
			continue;
		if (ret == EAGAIN) {
			ssize_t n;

			if (c->in_payload && c->payload_left >= DIRECT_MIN && !staged(c))
				return;	/* take_payload already hit EAGAIN on the socket */
			n = stage_fill(c);
			if (n > 0)
				continue;
			if (n == 0 || (errno != EAGAIN && errno != EINTR))
				conn_broken(c);
			return;
		}
		if (ret == ECONNRESET || ret == EPIPE || ret == ETIMEDOUT) {
			conn_broken(c);
			return;
		}
		if (ret == ENOENT && !c->qp) {
			conn_close(c);
			return;
		}
		conn_protocol_error(c);
		return;
	}
}

/* Reads what the stream has; then the responder sends one ACK for all it executed. */
static void conn_read(struct conn *c)
{
	struct emu_qp *qp;

	conn_read_frames(c);
	qp = c->qp;
	if (c->initiator || !qp || c->state == CONN_CLOSED)
		return;
	pthread_mutex_lock(&qp->lock);
	responder_flush_ack(qp, c);
	pthread_mutex_unlock(&qp->lock);
}

static void conn_write(struct conn *c)
{
	int err;

	pthread_mutex_lock(&c->tx_lock);
	err = flush_queue(c);
	if (err)
		c->tx_error = true;
	if (!c->txq)
		c->want_out = false;
	pthread_mutex_unlock(&c->tx_lock);
	if (err)
		conn_broken(c);
	else
		set_watch(c);
}

static void conn_ready(struct io_watch *w, uint32_t revents)
{
	struct conn *c = container_of(w, struct conn, watch);

	if (c->state == CONN_CLOSED)
		return;
	if (c->state == CONN_CONNECTING && (revents & (IO_OUT | IO_ERR | IO_IN))) {
		int err = 0;
		socklen_t len = sizeof(err);

		getsockopt(w->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err || c->tx_error) {
			conn_broken(c);
			return;
		}
		pthread_mutex_lock(&c->tx_lock);
		c->state = CONN_OPEN;
		pthread_mutex_unlock(&c->tx_lock);
		revents |= IO_OUT;
	}
	if (revents & IO_OUT)
		conn_write(c);
	if (c->state != CONN_CLOSED && (revents & IO_IN))
		conn_read(c);
}
