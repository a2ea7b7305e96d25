// SPDX-License-Identifier: MIT
/*
 * One TCP stream of a QP: opening it (ours) or adopting it (theirs, after its hello), the
 * send side, and closing. The reader is emu/conn_rx.c; which stream is whose is
 * emu/qp_stream.c's business.
 *
 * Sending. Posting threads send their requests themselves, and the engine thread sends
 * responses; either way under tx_lock, with one sendmsg for a batch of frames. What the
 * socket does not take waits in the stream's queue (struct tx_item) for POLLOUT: our own
 * small bytes as a copy, payloads in registered memory as the key that names them, looked
 * up again when they are sent. So a peer that does not read costs a few bytes per frame,
 * and the queue is bounded (TX_HIGH): above it the requester stops building frames and the
 * reader stops taking the peer's requests, until the peer has read what it is owed.
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
#include "emu/pcap.h"

#define TX_SEND_CHUNK	(1u << 20)	/* a queued payload goes out at most this much at a time */

static void conn_ready(struct io_watch *w, uint32_t revents);

static struct conn *conn_new(struct emu_engine *e, int fd, bool initiator)
{
	struct conn *c = calloc(1, sizeof(*c));
	int one = 1;

	if (!c)
		return NULL;
	c->engine = e;
	c->initiator = initiator;
	c->watch.fd = fd;
	c->watch.ready = conn_ready;
	c->peer_mem.pidfd = -1;
	pthread_mutex_init(&c->tx_lock, NULL);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return c;
}

/* What the backend watches for: reading unless held, writing while something waits. */
static void set_watch(struct conn *c)
{
	uint32_t want = 0;

	if (c->state == CONN_CLOSED)
		return;
	if (!c->rx.hold)
		want |= IO_IN;
	if (c->tx.want_out || c->state == CONN_CONNECTING)
		want |= IO_OUT;
	if (want != c->watch.events) {
		c->watch.events = want;
		engine_rewatch(c->engine, &c->watch);
	}
}

void conn_hold(struct conn *c, unsigned int hold, bool on)
{
	unsigned int was = c->rx.hold;

	c->rx.hold = on ? was | hold : was & ~hold;
	if (c->rx.hold == was)
		return;
	set_watch(c);
	/* What was read ahead before the hold is not announced by the socket again. */
	if (!c->rx.hold && conn_staged(c))
		engine_kick(c->engine, c);
}

static void free_items(struct conn *c)
{
	struct tx_item *item;

	while ((item = c->tx.head)) {
		c->tx.head = item->next;
		free(item);
	}
	c->tx.tail = NULL;
	c->tx.cost = 0;
	c->tx.reads_queued = 0;
}

void conn_close(struct conn *c)
{
	if (c->state == CONN_CLOSED)
		return;
	pthread_mutex_lock(&c->tx_lock);
	c->state = CONN_CLOSED;
	free_items(c);
	pthread_mutex_unlock(&c->tx_lock);
	if (c->check)
		handshake_cancel(c->check);
	engine_unwatch(c->engine, &c->watch);
	engine_unkick(c->engine, c);
	close(c->watch.fd);
	c->watch.fd = -1;
	peer_mem_release(&c->peer_mem);
	direct_page_close(c);
	direct_detach(c);
	if (c->qp)
		qp_stream_closed(c->qp, c);
	c->next_closed = c->engine->closed;
	c->engine->closed = c;
}

void conn_free(struct conn *c)
{
	pthread_mutex_destroy(&c->tx_lock);
	free(c->rx.stage);
	free(c);
}

void conn_broken(struct conn *c)
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

void conn_protocol_error(struct conn *c)
{
	struct emu_qp *qp = c->qp;

	qp_counter_add(QP_COUNTERS(qp), EMU_CNT_RCV_ERRORS, 1);
	pthread_mutex_lock(&qp->lock);
	if (qp->state != IBV_QPS_ERR && qp->state != IBV_QPS_RESET)
		qp_fatal(qp, IBV_EVENT_QP_FATAL);
	conn_close(c);
	pthread_mutex_unlock(&qp->lock);
}

static void request_output(void *arg)
{
	set_watch(arg);
}

static size_t item_cost(const struct tx_item *item)
{
	return TX_ITEM_COST + (item->piece.source == TX_COPY ? item->len : 0);
}

static void append(struct conn *c, struct tx_item *item)
{
	item->next = NULL;
	if (c->tx.tail)
		c->tx.tail->next = item;
	else
		c->tx.head = item;
	c->tx.tail = item;
	c->tx.cost += item_cost(item);
	if (item->ends_read)
		c->tx.reads_queued++;
}

/* Queues iov[i] from byte skip on, as a copy or as the memory it names. */
static int queue_piece(struct conn *c, const struct tx_batch *b, int i, size_t skip)
{
	const struct tx_piece *p = &b->piece[i];
	size_t len = b->iov[i].iov_len - skip;
	struct tx_item *item = malloc(sizeof(*item) + (p->source == TX_COPY ? len : 0));

	if (!item)
		return ENOMEM;
	item->piece = *p;
	item->len = len;
	item->off = 0;
	item->ends_read = b->ends_read[i];
	if (p->source == TX_COPY)
		memcpy(item->data, (const uint8_t *)b->iov[i].iov_base + skip, len);
	else
		item->piece.addr += skip;
	append(c, item);
	return 0;
}

/* Queues everything of b past its first sent bytes. */
static int queue_rest(struct conn *c, const struct tx_batch *b, size_t sent)
{
	for (int i = 0; i < b->niov; i++) {
		size_t len = b->iov[i].iov_len;
		int ret;

		if (sent >= len && len) {
			sent -= len;
			continue;
		}
		if (!len && !b->ends_read[i])
			continue;
		ret = queue_piece(c, b, i, sent);
		sent = 0;
		if (ret)
			return ret;
	}
	return 0;
}

/* Where a queued payload is now, checked again under its key; NULL if it is not there. */
static void *item_memory(struct conn *c, const struct tx_item *item, uint64_t n,
			 struct mem_region **ref)
{
	const struct tx_piece *p = &item->piece;
	struct mem_table *mem = c->engine->mem;
	enum mem_access_result r;
	void *host;

	if (p->source == TX_LOCAL_MR)
		r = mr_check_local_access(mem, p->key, p->pd_handle, 0, p->addr + item->off, n,
					  ref, &host);
	else
		r = mr_check_remote_access(mem, p->key, p->pd_handle, p->qpn, p->qp_access,
					   IBV_ACCESS_REMOTE_READ, p->addr + item->off, n, ref,
					   &host);
	return r == MEM_ACCESS_OK ? host : NULL;
}

/* Sends one queued item as far as the socket takes it: >0 sent, 0 would block, -errno. */
static ssize_t send_item(struct conn *c, struct tx_item *item)
{
	uint64_t n = item->len - item->off;
	struct mem_region *ref = NULL;
	const void *from = item->data + item->off;
	ssize_t sent;

	if (item->piece.source != TX_COPY) {
		if (n > TX_SEND_CHUNK)
			n = TX_SEND_CHUNK;
		/* Gone since it was queued: the frame cannot be finished, the stream breaks. */
		from = item_memory(c, item, n, &ref);
		if (!from)
			return -EFAULT;
	}
	sent = send(c->watch.fd, from, n, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (ref)
		mr_put(ref);
	if (sent < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	return sent;
}

/* Sends queued items; returns 0, or errno when the stream broke. Called with tx_lock. */
static int flush_queue(struct conn *c)
{
	struct tx_item *item;

	while ((item = c->tx.head)) {
		ssize_t n = item->off < item->len ? send_item(c, item) : 0;

		if (n < 0)
			return (int)-n;
		item->off += (uint64_t)n;
		if (item->off < item->len)
			return 0;
		c->tx.head = item->next;
		if (!c->tx.head)
			c->tx.tail = NULL;
		c->tx.cost -= item_cost(item);
		if (item->ends_read)
			c->tx.reads_queued--;
		free(item);
	}
	return 0;
}

void conn_tx_lock(struct conn *c)
{
	pthread_mutex_lock(&c->tx_lock);
}

static size_t batch_bytes(const struct tx_batch *b)
{
	size_t total = 0;

	for (int i = 0; i < b->niov; i++)
		total += b->iov[i].iov_len;
	return total;
}

/* Asks for POLLOUT once something waits; with tx_lock, which it releases. */
static void watch_output_unlock(struct conn *c)
{
	if (!c->tx.head || c->tx.want_out) {
		pthread_mutex_unlock(&c->tx_lock);
		return;
	}
	c->tx.want_out = true;
	if (engine_on_thread(c->engine)) {
		pthread_mutex_unlock(&c->tx_lock);
		set_watch(c);
		return;
	}
	c->tx.out_call.fn = request_output;
	c->tx.out_call.arg = c;
	engine_call_async(c->engine, &c->tx.out_call);
	pthread_mutex_unlock(&c->tx_lock);
}

int conn_send_batch_unlock(struct conn *c, struct tx_batch *b)
{
	struct msghdr msg = { .msg_iov = b->iov, .msg_iovlen = (size_t)b->niov };
	ssize_t sent = 0;
	int ret;

	counters_stream_batch(QP_COUNTERS(c->qp), b);
	if (c->state == CONN_CLOSED || c->tx.error) {
		pthread_mutex_unlock(&c->tx_lock);
		return EPIPE;
	}
	if (pcap_active)
		pcap_stream_batch(&c->local, &c->peer, c->qp ? c->qp->qpn : 0, b);
	if (c->state != CONN_CONNECTING && !c->tx.head) {
		sent = sendmsg(c->watch.fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (sent < 0) {
			if (errno != EAGAIN && errno != EINTR) {
				c->tx.error = true;
				ret = errno;
				pthread_mutex_unlock(&c->tx_lock);
				return ret;
			}
			sent = 0;
		}
		if ((size_t)sent == batch_bytes(b)) {
			pthread_mutex_unlock(&c->tx_lock);
			return 0;
		}
	}
	ret = queue_rest(c, b, (size_t)sent);
	watch_output_unlock(c);
	return ret;
}

int conn_send_batch(struct conn *c, struct tx_batch *b)
{
	conn_tx_lock(c);
	return conn_send_batch_unlock(c, b);
}

void tx_batch_init(struct tx_batch *b)
{
	b->nframes = b->niov = b->nrefs = 0;
}

void tx_batch_release(struct tx_batch *b)
{
	for (int i = 0; i < b->nrefs; i++)
		mr_put(b->refs[i]);
	tx_batch_init(b);
}

void tx_batch_add_copy(struct tx_batch *b, const void *p, size_t len)
{
	b->iov[b->niov] = (struct iovec){ .iov_base = (void *)p, .iov_len = len };
	b->piece[b->niov].source = TX_COPY;
	b->ends_read[b->niov++] = false;
}

void tx_batch_add_mem(struct tx_batch *b, void *host, size_t len, const struct tx_piece *where,
		      struct mem_region *ref)
{
	b->iov[b->niov] = (struct iovec){ .iov_base = host, .iov_len = len };
	b->piece[b->niov] = *where;
	b->ends_read[b->niov++] = false;
	if (ref)
		b->refs[b->nrefs++] = ref;
}

/* Header bytes that are no frame of the IBA's (no counter sees them). */
static int send_control(struct conn *c, const uint8_t *hdr, size_t hdr_len)
{
	struct tx_batch b;

	tx_batch_init(&b);
	tx_batch_add_copy(&b, hdr, hdr_len);
	return conn_send_batch(c, &b);
}

int conn_send_drop_notice(struct conn *c)
{
	struct wire_packet pkt = { .opcode = OP_DROP_NOTICE, .qpn = c->hello_src_qpn };
	uint8_t hdr[4 + WIRE_MAX_HDR];

	return send_control(c, hdr, wire_build(hdr, &pkt));
}

int conn_send_frame(struct conn *c, const uint8_t *hdr, size_t hdr_len)
{
	/*
	 * SOFTRDMA_FAULTS: lost on the way. On a fabric the requester's timer is the only
	 * witness; over TCP nothing else is ever lost, so the requester is told that this
	 * timeout is a loss, not a peer that is slow (docs/semantics.md, "Liveness").
	 */
	if (fault_drop_frame(c->qp, hdr))
		return c->initiator ? 0 : conn_send_drop_notice(c);
	counters_stream_frame(QP_COUNTERS(c->qp), hdr, hdr_len, NULL, 0);
	return send_control(c, hdr, hdr_len);
}

bool conn_tx_room(struct conn *c)
{
	bool room;

	pthread_mutex_lock(&c->tx_lock);
	room = c->tx.cost < TX_HIGH;
	if (!room)
		c->tx.owner_waits = true;
	pthread_mutex_unlock(&c->tx_lock);
	return room;
}

bool conn_tx_drained(struct conn *c)
{
	int unsent = 0;
	bool drained;

	pthread_mutex_lock(&c->tx_lock);
	drained = !c->tx.head && !ioctl(c->watch.fd, SIOCOUTQNSD, &unsent) && unsent == 0;
	pthread_mutex_unlock(&c->tx_lock);
	return drained;
}

/*
 * TCP's own liveness, for a stream whose QP has an ACK timeout: keepalive probes on a stream
 * that is idle while its QP waits (TCP counts them in whole seconds), which the peer's kernel
 * answers even while its process is stopped, and which end the stream after retry_cnt + 1 go
 * unanswered. Not TCP_USER_TIMEOUT: the kernel applies it to a zero window as well, and a
 * stopped peer's window closes as soon as its socket buffer is full; conn_peer_silent() is
 * the same rule without that exception.
 */
void conn_set_liveness(struct conn *c)
{
	uint64_t ns = qp_timeout_to_ns(c->qp->attr.timeout);
	int on = ns != 0, fd = c->watch.fd;
	int secs = (int)((ns + 999999999) / 1000000000), count = c->qp->attr.retry_cnt + 1;

	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
	if (!on)
		return;	/* timeout 0: the QP waits forever */
	if (secs > 32767)
		secs = 32767;	/* MAX_TCP_KEEPIDLE */
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &secs, sizeof(secs));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &secs, sizeof(secs));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

bool conn_peer_silent(struct conn *c, uint64_t ms)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (getsockopt(c->watch.fd, IPPROTO_TCP, TCP_INFO, &ti, &len))
		return false;
	/*
	 * A live kernel answers a retransmission or a probe within a round trip, and either
	 * answer resets the count; two in a row unanswered, and nothing heard for ms, is a host
	 * that is gone or cut off, not a process that is slow.
	 */
	return (ti.tcpi_retransmits >= 2 || ti.tcpi_probes >= 2) && ti.tcpi_last_ack_recv > ms;
}

/* The READ responses a responder stream may have waiting: the QP's responder resources. */
static unsigned int reads_allowed(const struct conn *c)
{
	uint8_t n = c->qp ? c->qp->attr.max_dest_rd_atomic : 0;

	return n ? n : 1;
}

void conn_check_backlog(struct conn *c)
{
	bool full, reads;

	pthread_mutex_lock(&c->tx_lock);
	full = c->tx.cost >= TX_HIGH;
	reads = c->tx.reads_queued >= reads_allowed(c);
	pthread_mutex_unlock(&c->tx_lock);
	if (full)
		conn_hold(c, RX_HOLD_TX_FULL, true);
	if (reads)
		conn_hold(c, RX_HOLD_READS, true);
}

/* POLLOUT: what waits goes out; whoever stopped for the backlog goes on below it. */
static void conn_write(struct conn *c)
{
	bool resume_owner, low, reads_ok;
	int err;

	pthread_mutex_lock(&c->tx_lock);
	err = flush_queue(c);
	if (err)
		c->tx.error = true;
	if (!c->tx.head)
		c->tx.want_out = false;
	low = c->tx.cost < TX_LOW;
	reads_ok = c->tx.reads_queued < reads_allowed(c);
	resume_owner = low && c->tx.owner_waits;
	if (resume_owner)
		c->tx.owner_waits = false;
	pthread_mutex_unlock(&c->tx_lock);
	if (err) {
		conn_broken(c);
		return;
	}
	set_watch(c);
	if (low && (c->rx.hold & RX_HOLD_TX_FULL))
		conn_hold(c, RX_HOLD_TX_FULL, false);
	if (reads_ok && (c->rx.hold & RX_HOLD_READS))
		conn_hold(c, RX_HOLD_READS, false);
	if (resume_owner && c->qp) {
		pthread_mutex_lock(&c->qp->lock);
		requester_progress(c->qp);
		pthread_mutex_unlock(&c->qp->lock);
	}
}

static void send_hello(struct conn *c, struct emu_qp *qp)
{
	struct wire_hello h = {
		.magic = htonl(WIRE_MAGIC),
		.version = htons(WIRE_VERSION),
		.length = htons(sizeof(h)),
		.kind = HELLO_STREAM,
		.src_qpn = htonl(qp->qpn),
		.dst_qpn = htonl(qp->attr.dest_qp_num),
	};
	struct tx_batch b;

	memcpy(h.src_gid, &qp->local_addr.sin6_addr, 16);
	tx_batch_init(&b);
	tx_batch_add_copy(&b, &h, sizeof(h));
	conn_send_batch(c, &b);	/* queued: the stream is still connecting */
}

struct conn *conn_connect(struct emu_qp *qp)
{
	struct sockaddr_in6 local = qp->local_addr;
	socklen_t len = sizeof(local);
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
	conn_set_liveness(c);
	/* RoCE sends from the source GID's address: the responder checks it. */
	local.sin6_port = 0;
	if (bind(fd, (struct sockaddr *)&local, sizeof(local)) ||
	    (connect(fd, (struct sockaddr *)&c->peer, sizeof(c->peer)) && errno != EINPROGRESS) ||
	    getsockname(fd, (struct sockaddr *)&c->local, &len))
		c->tx.error = true;
	c->watch.events = IO_IN | IO_OUT;
	if (engine_watch(c->engine, &c->watch))
		c->tx.error = true;
	send_hello(c, qp);
	return c;
}

struct conn *conn_adopt(struct emu_engine *e, int fd, const struct sockaddr_in6 *peer,
			const struct sockaddr_in6 *local, struct emu_qp *qp, uint32_t src_qpn)
{
	struct conn *c = conn_new(e, fd, false);

	if (!c)
		return NULL;
	c->qp = qp;
	c->peer = *peer;
	c->local = *local;
	c->hello_src_qpn = src_qpn;
	c->state = CONN_CANDIDATE;
	conn_set_liveness(c);
	c->rx.hold = RX_HOLD_UNBOUND;
	c->watch.events = 0;
	if (engine_watch(e, &c->watch)) {
		conn_free(c);
		return NULL;
	}
	return c;
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
		if (err || c->tx.error) {
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
