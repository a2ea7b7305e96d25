// SPDX-License-Identifier: MIT
/*
 * Messages to a peer's CM. Every CM socket is non-blocking: a message the socket does not
 * take goes into the id's queue (CM_TX_QUEUE messages) and the CM thread sends it once the
 * socket is writable. A peer that lets the queue fill has stopped reading: it is cut off
 * (its connection reset), which the CM thread then reports as a lost connection. So no
 * thread ever waits on a peer, with or without a lock (cm.h's rule). Callers hold id->lock.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>

#include "cm.h"

void cm_msg_init(struct cm_msg *msg, enum cm_msg_type type)
{
	memset(msg, 0, sizeof(*msg));
	msg->magic = htonl(CM_WIRE_MAGIC);
	msg->version = htons(CM_WIRE_VERSION);
	msg->type = type;
}

void cm_sock_setup(int fd)
{
	int one = 1, buf = CM_SOCK_BUF;

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	/* A small send buffer: a peer that stops reading is found after ~100 messages. */
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* What one non-blocking send took: bytes, 0 for none, or -errno. */
static ssize_t send_some(int sock, const void *p, size_t len)
{
	ssize_t n;

	do
		n = send(sock, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n >= 0)
		return n;
	return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
}

/* The peer stopped reading. Shutting our sending side makes the socket writable, which
 * wakes the CM thread: it resets the connection and reports it lost. */
static void cut_off(struct cm_id *id)
{
	id->cut_off = true;
	shutdown(id->sock, SHUT_WR);
}

int cm_send(struct cm_id *id, const struct cm_msg *msg)
{
	size_t sent = 0;
	unsigned int tail;

	if (id->sock < 0 || id->lost || id->cut_off)
		return ENOTCONN;
	if (!id->tx_count) {
		ssize_t n = send_some(id->sock, msg, sizeof(*msg));

		if (n < 0)
			return (int)-n;
		if ((size_t)n == sizeof(*msg))
			return 0;
		sent = (size_t)n;
	}
	if (id->tx_count == CM_TX_QUEUE) {
		cut_off(id);
		return ECONNRESET;
	}
	tail = (id->tx_head + id->tx_count) % CM_TX_QUEUE;
	id->txq[tail] = *msg;
	if (!id->tx_count)
		id->tx_sent = sent;
	id->tx_count++;
	cm_thread_want_write(id, true);
	return 0;
}

void cm_send_flush(struct cm_id *id)
{
	while (id->tx_count) {
		const uint8_t *p = (const uint8_t *)&id->txq[id->tx_head];
		ssize_t n = send_some(id->sock, p + id->tx_sent, sizeof(id->txq[0]) - id->tx_sent);

		if (n < 0) {
			cut_off(id);
			return;
		}
		if (!n)
			return;	/* still full: EPOLLOUT stays armed */
		id->tx_sent += (size_t)n;
		if (id->tx_sent < sizeof(id->txq[0]))
			continue;
		id->tx_sent = 0;
		id->tx_head = (id->tx_head + 1) % CM_TX_QUEUE;
		id->tx_count--;
	}
	cm_thread_want_write(id, false);
}

void cm_send_once(int fd, const struct cm_msg *msg)
{
	/* Into a socket that has sent nothing yet: it fits, or the peer is gone anyway. */
	if (send_some(fd, msg, sizeof(*msg)) != (ssize_t)sizeof(*msg)) {
		/* nothing to do: the connection is closed right after */
	}
}
