// SPDX-License-Identifier: MIT
/*
 * The short exchanges that come before a stream is trusted, one struct handshake each, on
 * the engine thread, each dropped when its deadline passes (HANDSHAKE_TIMEOUT_NS):
 *
 *  HS_ACCEPTED        a connection to one of our listeners, until its hello says what it is
 *                     for. A STREAM hello makes it a candidate stream of the QP it names
 *                     (qp_stream_offered()); a VERIFY hello is answered and closed.
 *  HS_VERIFY_ASK      we ask the engine that owns a candidate's requester QP whether the
 *                     stream is its. The question goes to the listener that QPN names, so
 *                     only the QPN's owner can say yes (docs/security.md).
 *  HS_LOCAL_ACCEPTED  a connection to our AF_UNIX socket from a process of this host that
 *                     the kernel names: a LOCAL_CLAIM is answered the same way and, when it
 *                     is ours and the process is our user's, lets that responder read our
 *                     payloads (the same-host path).
 *  HS_LOCAL_ASK       we put that question to a requester's engine over its AF_UNIX socket,
 *                     and learn from the kernel (SO_PEERCRED) which process it is.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "emu/internal.h"

#define HANDSHAKE_TIMEOUT_NS	5000000000ull
#define HANDSHAKES_MAX		1024	/* per engine, whatever their kind */

enum hs_role { HS_ACCEPTED, HS_VERIFY_ASK, HS_LOCAL_ACCEPTED, HS_LOCAL_ASK };

union hs_message {
	struct wire_hello hello;
	struct wire_verdict verdict;
};

struct handshake {
	struct emu_engine *engine;
	struct io_watch watch;
	enum hs_role role;
	struct handshake *prev, *next;	/* e->handshakes */
	uint64_t deadline_ns;
	struct emu_listener *listener;	/* HS_ACCEPTED: counted in its half_open */
	struct sockaddr_in6 peer, local;
	struct conn *stream;		/* the ASKs: the candidate stream they are about */
	struct ucred cred;		/* the LOCALs: the other process, as the kernel says */
	int fds[2];			/* the LOCALs: the direct placement's files, or -1 */
	bool connected;
	union hs_message in, out;
	size_t in_have, in_want, out_sent, out_len;
};

static void hs_ready(struct io_watch *w, uint32_t revents);

static struct handshake *hs_new(struct emu_engine *e, int fd, enum hs_role role)
{
	struct handshake *h;

	if (e->nhandshakes >= HANDSHAKES_MAX || !(h = calloc(1, sizeof(*h)))) {
		close(fd);
		return NULL;
	}
	h->engine = e;
	h->role = role;
	h->fds[0] = h->fds[1] = -1;
	h->watch.fd = fd;
	h->watch.ready = hs_ready;
	h->watch.events = IO_IN;
	h->deadline_ns = engine_now_ns() + HANDSHAKE_TIMEOUT_NS;
	h->next = e->handshakes;
	if (h->next)
		h->next->prev = h;
	e->handshakes = h;
	e->nhandshakes++;
	engine_timer_changed(e, h->deadline_ns);
	return h;
}

/* Forgets h; closes its socket unless keep_fd (the fd has a new owner, and h is unwatched). */
static void hs_free(struct handshake *h, bool keep_fd)
{
	struct emu_engine *e = h->engine;

	if (!keep_fd) {
		engine_unwatch(e, &h->watch);
		close(h->watch.fd);
	}
	for (int i = 0; i < 2; i++)
		if (h->fds[i] >= 0)
			close(h->fds[i]);
	if (h->listener)
		h->listener->half_open--;
	if (h->stream)
		h->stream->check = NULL;
	if (h->prev)
		h->prev->next = h->next;
	else
		e->handshakes = h->next;
	if (h->next)
		h->next->prev = h->prev;
	e->nhandshakes--;
	free(h);
}

static void hs_start(struct handshake *h)
{
	if (engine_watch(h->engine, &h->watch))
		hs_free(h, false);
}

static void fill_header(union hs_message *m, size_t len)
{
	m->hello.magic = htonl(WIRE_MAGIC);
	m->hello.version = htons(WIRE_VERSION);
	m->hello.length = htons((uint16_t)len);
}

/* What header_ok() reads: magic, version and length, the first bytes of either message. */
#define WIRE_HEADER_LEN	offsetof(struct wire_hello, kind)

/* The header shared by hellos and verdicts is ours, at this length. */
static bool header_ok(const union hs_message *m, size_t len)
{
	return ntohl(m->hello.magic) == WIRE_MAGIC && ntohs(m->hello.version) == WIRE_VERSION &&
	       ntohs(m->hello.length) == len;
}

/* Queues a verdict as h's answer; h closes once it is written. */
static void answer(struct handshake *h, struct conn *mine, const char *local_name)
{
	struct wire_verdict *v = &h->out.verdict;

	memset(v, 0, sizeof(*v));
	fill_header(&h->out, sizeof(*v));
	v->verdict = mine ? VERDICT_MINE : VERDICT_NOT_MINE;
	if (mine && local_name) {
		v->flags = VERDICT_SAME_HOST;
		strncpy(v->local_name, local_name, sizeof(v->local_name) - 1);
	}
	h->out_len = sizeof(*v);
	h->in_want = 0;
	h->watch.events = IO_OUT;
	engine_rewatch(h->engine, &h->watch);
}

/* A connection to a listener said what it is for. */
static void accepted_hello(struct handshake *h)
{
	const struct wire_hello *hello = &h->in.hello;
	struct conn *mine;
	struct emu_qp *qp;

	if (!header_ok(&h->in, sizeof(*hello))) {
		hs_free(h, false);
		return;
	}
	if (hello->kind == HELLO_VERIFY) {
		mine = qp_stream_vouch(h->engine, hello, NULL);
		answer(h, mine, mine && mine->qp->type == IBV_QPT_RC ?
				peer_mem_local_name(h->engine) : NULL);
		return;
	}
	qp = hello->kind == HELLO_STREAM ? engine_find_qp(h->engine, ntohl(hello->dst_qpn)) : NULL;
	if (!qp || !qp_takes_requests(qp)) {
		/* As hardware: nobody answers for a QP that is not there. */
		hs_free(h, false);
		return;
	}
	/* Before the stream watches the same descriptor (epoll knows one watch per fd). */
	engine_unwatch(h->engine, &h->watch);
	qp_stream_offered(qp, h->watch.fd, &h->peer, &h->local, ntohl(hello->src_qpn));
	hs_free(h, true);
}

/* A process of this host asks whether a stream is ours, so as to read our payloads. */
static void local_claim(struct handshake *h)
{
	struct conn *mine = NULL;

	if (header_ok(&h->in, sizeof(h->in.hello)) && h->in.hello.kind == HELLO_LOCAL_CLAIM)
		mine = qp_stream_vouch(h->engine, &h->in.hello, &h->cred);
	answer(h, mine, NULL);
	if (!mine)
		return;
	h->out.verdict.probe_addr = htobe64(peer_mem_probe_addr());
	/* The responder's key table and stream page: our WRITEs may be placed there. */
	if (h->fds[0] >= 0 && h->fds[1] >= 0) {
		pthread_mutex_lock(&mine->qp->lock);
		direct_attach(mine, h->cred.pid, h->fds);
		pthread_mutex_unlock(&mine->qp->lock);
		h->fds[0] = h->fds[1] = -1;
	}
}

/* The answer to one of our questions arrived (or never will: v NULL). */
static void asked(struct handshake *h, const struct wire_verdict *v)
{
	struct conn *c = h->stream;
	enum hs_role role = h->role;
	struct ucred cred = h->cred;

	h->stream = NULL;
	c->check = NULL;
	if (v && (!header_ok((const union hs_message *)v, sizeof(*v)) ||
		  v->verdict != VERDICT_MINE))
		v = NULL;
	if (role == HS_VERIFY_ASK) {
		qp_stream_verified(c, v);
	} else {
		if (v)
			peer_mem_grant(c, cred.pid, be64toh(v->probe_addr));
		conn_hold(c, RX_HOLD_SAME_HOST, false);	/* granted or not, requests go on */
	}
	hs_free(h, false);
}

static void received(struct handshake *h)
{
	switch (h->role) {
	case HS_ACCEPTED:
		accepted_hello(h);
		return;
	case HS_LOCAL_ACCEPTED:
		local_claim(h);
		return;
	case HS_VERIFY_ASK:
	case HS_LOCAL_ASK:
		asked(h, &h->in.verdict);
		return;
	}
}

/* Fails h: an asker concludes no; anything else just goes. */
static void hs_fail(struct handshake *h)
{
	if (h->role == HS_VERIFY_ASK || h->role == HS_LOCAL_ASK)
		asked(h, NULL);
	else
		hs_free(h, false);
}

/* The first bytes of h->out, with h's files attached (SCM_RIGHTS): the claim's. */
static ssize_t send_with_fds(struct handshake *h)
{
	union {
		struct cmsghdr hdr;
		uint8_t buf[CMSG_SPACE(sizeof(h->fds))];
	} control = { 0 };
	struct iovec iov = { &h->out, h->out_len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			      .msg_controllen = sizeof(control.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	ssize_t n;

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(h->fds));
	memcpy(CMSG_DATA(cm), h->fds, sizeof(h->fds));
	n = sendmsg(h->watch.fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n > 0) {
		close(h->fds[0]);
		close(h->fds[1]);
		h->fds[0] = h->fds[1] = -1;
	}
	return n;
}

/* Writes what is left of h->out; true once all of it is out. */
static bool write_out(struct handshake *h)
{
	while (h->out_sent < h->out_len) {
		ssize_t n = h->role == HS_LOCAL_ASK && h->fds[0] >= 0 ? send_with_fds(h) :
			    send(h->watch.fd, (uint8_t *)&h->out + h->out_sent,
				 h->out_len - h->out_sent, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0)
			return false;
		h->out_sent += (size_t)n;
	}
	return true;
}

/*
 * Over AF_UNIX: the claim, and the files that may come with its first bytes. Only the first
 * two of the first message are kept; anything else sent along is closed.
 */
static ssize_t recv_with_fds(struct handshake *h)
{
	union {
		struct cmsghdr hdr;
		uint8_t buf[CMSG_SPACE(4 * sizeof(int))];
	} control;
	struct iovec iov = { (uint8_t *)&h->in + h->in_have, h->in_want - h->in_have };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			      .msg_controllen = sizeof(control.buf) };
	ssize_t n = recvmsg(h->watch.fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

	if (n < 0)
		return n;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
		int nfds, fds[4];

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		nfds = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		if (nfds > 4)
			nfds = 4;	/* the kernel fits what it passes into our buffer */
		memcpy(fds, CMSG_DATA(cm), (size_t)nfds * sizeof(int));
		for (int i = 0; i < nfds; i++) {
			if (i < 2 && nfds == 2 && h->in_have == 0 && h->fds[i] < 0)
				h->fds[i] = fds[i];
			else
				close(fds[i]);
		}
	}
	return n;
}

static void hs_ready(struct io_watch *w, uint32_t revents)
{
	struct handshake *h = container_of(w, struct handshake, watch);
	ssize_t n;

	if (revents & IO_OUT) {
		if (!write_out(h)) {
			if (errno != EAGAIN && errno != EINTR)
				hs_fail(h);
			return;
		}
		if (!h->in_want) {	/* an answer: said, and done */
			hs_free(h, false);
			return;
		}
		h->watch.events = IO_IN;
		engine_rewatch(h->engine, w);
		return;
	}
	/* Exactly the message: whatever follows belongs to the stream it may become. */
	n = h->role == HS_LOCAL_ACCEPTED ? recv_with_fds(h) :
	    recv(w->fd, (uint8_t *)&h->in + h->in_have, h->in_want - h->in_have, MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		hs_fail(h);
		return;
	}
	if (n < 0)
		return;
	h->in_have += (size_t)n;
	/* Not ours from its first eight bytes: hung up at once, not at the deadline. */
	if (h->in_have >= WIRE_HEADER_LEN && h->in_have < h->in_want &&
	    !header_ok(&h->in, h->in_want)) {
		hs_fail(h);
		return;
	}
	if (h->in_have == h->in_want)
		received(h);
}

void handshake_accept(struct emu_listener *l, int fd, const struct sockaddr_in6 *peer)
{
	struct handshake *h = hs_new(l->engine, fd, HS_ACCEPTED);
	socklen_t len = sizeof(h->local);

	if (!h)
		return;
	h->listener = l;
	l->half_open++;
	h->peer = *peer;
	if (getsockname(fd, (struct sockaddr *)&h->local, &len)) {
		hs_free(h, false);
		return;
	}
	h->in_want = sizeof(h->in.hello);
	hs_start(h);
}

void handshake_evict_oldest(struct emu_listener *l)
{
	struct handshake *oldest = NULL;

	/* e->handshakes is newest first: the last of l's is its oldest. */
	for (struct handshake *h = l->engine->handshakes; h; h = h->next)
		if (h->listener == l)
			oldest = h;
	if (oldest)
		hs_free(oldest, false);
}

void handshake_local_accept(struct emu_engine *e, int fd)
{
	struct handshake *h = hs_new(e, fd, HS_LOCAL_ACCEPTED);
	socklen_t len = sizeof(h->cred);

	if (!h)
		return;
	/* Only our own user's processes may read our memory, whatever they claim. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &h->cred, &len) || h->cred.uid != geteuid() ||
	    h->cred.pid <= 0) {
		hs_free(h, false);
		return;
	}
	h->in_want = sizeof(h->in.hello);
	hs_start(h);
}

/* The question about stream c, as its responder sees the stream's two ends. */
static void fill_question(struct handshake *h, const struct conn *c, enum wire_hello_kind kind)
{
	struct wire_hello *q = &h->out.hello;

	memset(q, 0, sizeof(*q));
	fill_header(&h->out, sizeof(*q));
	q->kind = (uint8_t)kind;
	q->src_qpn = htonl(c->hello_src_qpn);
	q->dst_qpn = htonl(c->qp->qpn);
	memcpy(q->req_addr, &c->peer.sin6_addr, 16);
	q->req_port = c->peer.sin6_port;
	memcpy(q->resp_addr, &c->local.sin6_addr, 16);
	q->resp_port = c->local.sin6_port;
	h->out_len = sizeof(*q);
	h->in_want = sizeof(h->in.verdict);
	h->watch.events = IO_OUT;
}

/* Attaches asker h to candidate c and starts it; c hears the outcome, whatever happens. */
static void ask(struct handshake *h, struct conn *c)
{
	h->stream = c;
	c->check = h;
	fill_question(h, c, h->role == HS_VERIFY_ASK ? HELLO_VERIFY : HELLO_LOCAL_CLAIM);
	if (engine_watch(h->engine, &h->watch))
		asked(h, NULL);
}

#ifdef SOFTRDMA_FUZZ_HOOKS
static bool fuzz_believe;	/* the harness speaks for the requester's engine */
#endif

void handshake_verify(struct conn *c)
{
	struct sockaddr_in6 from = c->local, to = c->peer;
	int fd;
	struct handshake *h;

#ifdef SOFTRDMA_FUZZ_HOOKS
	if (fuzz_believe) {
		static const struct wire_verdict yes = { .verdict = VERDICT_MINE };

		qp_stream_verified(c, &yes);
		return;
	}
#endif
	fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		qp_stream_verified(c, NULL);
		return;
	}
	h = hs_new(c->engine, fd, HS_VERIFY_ASK);
	if (!h) {
		qp_stream_verified(c, NULL);
		return;
	}
	/* To the listener the claimed QPN names, on the address the stream came from. */
	from.sin6_port = 0;
	to.sin6_port = htons((uint16_t)(c->hello_src_qpn >> 8));
	if (bind(fd, (struct sockaddr *)&from, sizeof(from)) ||
	    (connect(fd, (struct sockaddr *)&to, sizeof(to)) && errno != EINPROGRESS)) {
		h->stream = c;
		c->check = h;
		asked(h, NULL);
		return;
	}
	ask(h, c);
}

void handshake_local_ask(struct conn *c, const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = strnlen(name, WIRE_LOCAL_NAME_LEN);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	socklen_t clen = sizeof(struct ucred);
	struct handshake *h;

	if (fd < 0 || !len || len >= sizeof(sa.sun_path) - 1) {
		if (fd >= 0)
			close(fd);
		conn_hold(c, RX_HOLD_SAME_HOST, false);	/* the stream stays an ordinary one */
		return;
	}
	h = hs_new(c->engine, fd, HS_LOCAL_ASK);
	if (!h) {
		conn_hold(c, RX_HOLD_SAME_HOST, false);
		return;
	}
	memcpy(sa.sun_path + 1, name, len);	/* abstract: sun_path[0] is 0 */
	if (connect(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
							    1 + len)) ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &h->cred, &clen) ||
	    h->cred.uid != geteuid() || h->cred.pid <= 0) {
		hs_free(h, false);	/* another user's process, or none: TCP it stays */
		conn_hold(c, RX_HOLD_SAME_HOST, false);
		return;
	}
	/* The requester may place its WRITEs itself: our keys and this stream's page go along. */
	if (direct_offer(mem_table_direct(c->engine->mem), c, h->cred.pid, h->fds))
		h->fds[0] = h->fds[1] = -1;
	ask(h, c);
}

void handshake_cancel(struct handshake *h)
{
	hs_free(h, false);
}

uint64_t handshake_timers(struct emu_engine *e, uint64_t now)
{
	uint64_t next = UINT64_MAX;
	struct handshake *h = e->handshakes, *after;

	for (; h; h = after) {
		after = h->next;
		if (h->deadline_ns <= now)
			hs_fail(h);
		else if (h->deadline_ns < next)
			next = h->deadline_ns;
	}
	return next;
}

void handshake_stop_all(struct emu_engine *e)
{
	while (e->handshakes)
		hs_fail(e->handshakes);
}

#ifdef SOFTRDMA_FUZZ_HOOKS
struct conn *handshake_fuzz_stream(struct emu_engine *e, int fd, const struct sockaddr_in6 *peer)
{
	struct handshake *h = hs_new(e, fd, HS_ACCEPTED);
	struct emu_qp *qp;

	if (!h)
		return NULL;
	h->peer = *peer;
	h->local = *peer;
	h->in_want = sizeof(h->in.hello);
	while (h->in_have < h->in_want) {
		ssize_t n = recv(fd, (uint8_t *)&h->in + h->in_have, h->in_want - h->in_have, 0);

		if (n <= 0) {
			hs_free(h, false);
			return NULL;
		}
		h->in_have += (size_t)n;
	}
	qp = engine_find_qp(e, ntohl(h->in.hello.dst_qpn));
	if (!header_ok(&h->in, sizeof(h->in.hello)) || h->in.hello.kind != HELLO_STREAM ||
	    !qp || !qp_takes_requests(qp)) {
		hs_free(h, false);
		return NULL;
	}
	fuzz_believe = true;
	qp_stream_offered(qp, fd, &h->peer, &h->local, ntohl(h->in.hello.src_qpn));
	fuzz_believe = false;
	hs_free(h, true);
	return qp->streams.resp;
}
#endif
