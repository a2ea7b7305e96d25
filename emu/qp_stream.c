// SPDX-License-Identifier: MIT
/*
 * Which stream is a QP's: the one owner of qp->streams. A connected QP opens its own
 * stream (qp_stream_open(), the only caller of conn_connect()), and takes the peer's
 * requests from exactly one stream the peer opened (qp->streams.resp).
 *
 * A stream the peer opened is a candidate until two things hold:
 *  - it is verified: the engine that owns the QPN its hello claims, asked on the listener
 *    that QPN names, said the stream is its (emu/handshake.c). A local user who connects
 *    to our listener and claims a QPN it does not own is never verified;
 *  - our QP is RTR or later, and the claim is its destination QP at its destination GID.
 * Then it is bound. A verified stream of the QP's own peer replaces an older one: the
 * requester vouched for the new stream, so its old one is gone on its side.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/internal.h"

#define QP_MAX_CANDIDATES	4

void qp_stream_open(struct emu_qp *qp)
{
	if (!qp->streams.req && qp_opens_stream(qp) && qp->state == IBV_QPS_RTS)
		qp->streams.req = conn_connect(qp);
}

static void open_on_engine(void *arg)
{
	struct emu_qp *qp = arg;

	pthread_mutex_lock(&qp->lock);
	qp->streams.connect_pending = false;
	qp_stream_open(qp);
	requester_progress(qp);
	pthread_mutex_unlock(&qp->lock);
}

void qp_stream_liveness_changed(struct emu_qp *qp)
{
	if (qp->streams.req)
		conn_set_liveness(qp->streams.req);
	if (qp->streams.resp)
		conn_set_liveness(qp->streams.resp);
}

void qp_stream_open_later(struct emu_qp *qp)
{
	if (qp->streams.connect_pending)
		return;
	qp->streams.connect_pending = true;
	qp->streams.connect_call.fn = open_on_engine;
	qp->streams.connect_call.arg = qp;
	engine_call_async(qp->engine, &qp->streams.connect_call);
}

static bool from_our_peer(const struct emu_qp *qp, const struct conn *c)
{
	return c->hello_src_qpn == qp->attr.dest_qp_num &&
	       !memcmp(&qp->peer_addr.sin6_addr, &c->peer.sin6_addr, 16);
}

static bool knows_its_peer(const struct emu_qp *qp)
{
	return qp->state >= IBV_QPS_RTR && qp->state != IBV_QPS_ERR;
}

static void unlink_candidate(struct emu_qp *qp, struct conn *c)
{
	for (struct conn **pp = &qp->streams.candidates; *pp; pp = &(*pp)->next_candidate)
		if (*pp == c) {
			*pp = c->next_candidate;
			qp->streams.ncandidates--;
			return;
		}
}

/* Binds the verified candidate from the QP's peer; closes those from anyone else. */
static void bind_candidates(struct emu_qp *qp)
{
	struct conn *c, *next;

	if (!knows_its_peer(qp))
		return;
	for (c = qp->streams.candidates; c; c = next) {
		next = c->next_candidate;
		if (!from_our_peer(qp, c)) {
			conn_close(c);
			continue;
		}
		if (!c->verified)
			continue;
		unlink_candidate(qp, c);
		if (qp->streams.resp)
			conn_close(qp->streams.resp);
		qp->streams.resp = c;
		c->state = CONN_OPEN;
		/* From an engine of this host that offers the same-host path: ask it first. */
		if (c->same_host_name[0] && qp->type == IBV_QPT_RC && peer_mem_enabled())
			conn_hold(c, RX_HOLD_SAME_HOST, true);
		conn_hold(c, RX_HOLD_UNBOUND, false);
		if (c->rx.hold & RX_HOLD_SAME_HOST)
			handshake_local_ask(c, c->same_host_name);
	}
}

void qp_stream_offered(struct emu_qp *qp, int fd, const struct sockaddr_in6 *peer,
		       const struct sockaddr_in6 *local, uint32_t src_qpn)
{
	struct conn *c;

	pthread_mutex_lock(&qp->lock);
	c = qp->streams.ncandidates < QP_MAX_CANDIDATES ?
	    conn_adopt(qp->engine, fd, peer, local, qp, src_qpn) : NULL;
	if (!c) {
		pthread_mutex_unlock(&qp->lock);
		close(fd);
		return;
	}
	c->next_candidate = qp->streams.candidates;
	qp->streams.candidates = c;
	qp->streams.ncandidates++;
	/* A QP that knows its peer hangs up on anyone else at once, without asking around. */
	if (knows_its_peer(qp) && !from_our_peer(qp, c)) {
		conn_close(c);
		pthread_mutex_unlock(&qp->lock);
		return;
	}
	pthread_mutex_unlock(&qp->lock);
	handshake_verify(c);
}

void qp_stream_verified(struct conn *c, const struct wire_verdict *v)
{
	struct emu_qp *qp = c->qp;

	pthread_mutex_lock(&qp->lock);
	if (!v) {
		conn_close(c);
		pthread_mutex_unlock(&qp->lock);
		return;
	}
	c->verified = true;
	if (v->flags & VERDICT_SAME_HOST)
		memcpy(c->same_host_name, v->local_name, sizeof(c->same_host_name) - 1);
	bind_candidates(qp);
	pthread_mutex_unlock(&qp->lock);
}

void qp_stream_bind_pending(struct emu_qp *qp)
{
	bind_candidates(qp);
}

void qp_stream_closed(struct emu_qp *qp, struct conn *c)
{
	if (qp->streams.req == c)
		qp->streams.req = NULL;
	else if (qp->streams.resp == c)
		qp->streams.resp = NULL;
	else
		unlink_candidate(qp, c);
}

void qp_streams_close(struct emu_qp *qp)
{
	if (qp->streams.req)
		conn_close(qp->streams.req);
	if (qp->streams.resp)
		conn_close(qp->streams.resp);
	while (qp->streams.candidates)
		conn_close(qp->streams.candidates);
}

/*
 * What the peer sent before now, taken in before the QP leaves for ERR. A NIC processes a
 * frame as it arrives: the ACK of a SEND whose receive the peer has completed, and then
 * told us about some other way (rdma_cm's DREQ, a socket of its own), has completed the
 * SEND before we could stop the QP. Here that ACK may still wait in our socket for an
 * engine that did not run yet; stopping first would flush a WR the peer answered. One
 * turn of each open stream: what is readable now, at most FRAMES_PER_WAKE frames.
 */
static void take_arrived(struct emu_qp *qp)
{
	struct conn *open[2];
	int n = 0;

	pthread_mutex_lock(&qp->lock);
	if (qp->streams.req && qp->streams.req->state == CONN_OPEN)
		open[n++] = qp->streams.req;
	if (qp->streams.resp && qp->streams.resp->state == CONN_OPEN)
		open[n++] = qp->streams.resp;
	pthread_mutex_unlock(&qp->lock);
	/* Closed streams are freed between waits, never during a call: both stay valid. */
	for (int i = 0; i < n; i++)
		conn_process_staged(open[i]);
}

/*
 * What was posted leaves before the QP stops (ERR, destroy). A NIC's send engine takes a
 * WQE within a microsecond of its doorbell; here a WQE may wait in the send queue for the
 * ACK of the requests before it (doorbell batching: requester_corked()), and stopping the
 * QP then would drop a message that a NIC would have put on the wire long before. ofi_rxm
 * completes an inject at once and closes its endpoint when done: its last message was
 * lost. Engine thread, qp->lock held.
 */
void qp_send_posted(struct emu_qp *qp)
{
	if (qp->state == IBV_QPS_RTS && qp->streams.req && qp->streams.req->state == CONN_OPEN)
		requester_progress(qp);
}

static void settle_on_engine(void *arg)
{
	struct emu_qp *qp = arg;

	pthread_mutex_lock(&qp->lock);
	qp_send_posted(qp);
	pthread_mutex_unlock(&qp->lock);
	take_arrived(qp);
}

void qp_streams_settle(struct emu_qp *qp)
{
	engine_call_sync(qp->engine, settle_on_engine, qp);
}

struct take_arrived_call {
	struct emu_engine *engine;
	uint32_t qpn;
};

/* By number: on the engine thread a QP is found only while it exists (destroy_on_engine()). */
static void take_arrived_by_qpn_on_engine(void *arg)
{
	struct take_arrived_call *call = arg;
	struct emu_qp *qp = engine_find_qp(call->engine, call->qpn);

	if (qp && qp_is_connected(qp))
		take_arrived(qp);
}

void emu_qp_take_arrived(struct emu_engine *e, uint32_t qpn)
{
	struct take_arrived_call call = { .engine = e, .qpn = qpn };

	engine_call_sync(e, take_arrived_by_qpn_on_engine, &call);
}

static bool same_end(const struct sockaddr_in6 *sa, const uint8_t addr[16], uint16_t port)
{
	return !memcmp(&sa->sin6_addr, addr, 16) && sa->sin6_port == port;
}

struct conn *qp_stream_vouch(struct emu_engine *e, const struct wire_hello *q,
			     const struct ucred *reader)
{
	struct emu_qp *qp = engine_find_qp(e, ntohl(q->src_qpn));
	struct conn *c;

	if (!qp || !qp_opens_stream(qp))
		return NULL;
	pthread_mutex_lock(&qp->lock);
	c = qp->streams.req;
	if (!c || c->state == CONN_CLOSED || qp->attr.dest_qp_num != ntohl(q->dst_qpn) ||
	    !same_end(&c->local, q->req_addr, q->req_port) ||
	    !same_end(&c->peer, q->resp_addr, q->resp_port))
		c = NULL;
	/* Asked over AF_UNIX by a process of our user: that responder may read our payloads. */
	if (c && reader)
		c->peer_may_read = true;
	pthread_mutex_unlock(&qp->lock);
	return c;
}
