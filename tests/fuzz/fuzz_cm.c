// SPDX-License-Identifier: MIT
/*
 * libFuzzer: CM messages (librdmacm-shim/connect.c) as a peer sends them to a listener of
 * the drop-in librdmacm, whose sources are linked in, instrumented. An application answers
 * what the messages lead to: a connection request is accepted with a QP or rejected (bit 0
 * of the input's first byte chooses), every event is acknowledged, every id destroyed.
 * Runs under `softrdma run` (the accepted QP lives on the soft device).
 *
 * Each message-sized chunk has its QPN replaced by 0x000101 (port 1, where nobody
 * listens), so an accepted QP never dials anywhere else, and its GID by loopback, the
 * address the CM requires of a REQ from this connection, unless bit 1 of the first byte
 * keeps the input's GID (which the CM then mostly rejects: that path is fuzzed too).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm.h"

#define MAX_IDS		16
#define QUIET_MS	5	/* no event for this long: the input is done with */

static struct rdma_event_channel *channel;
static struct rdma_cm_id *listener;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct sockaddr_in listen_addr = { .sin_family = AF_INET };

static void die(const char *what)
{
	perror(what);
	abort();
}

static void setup(void)
{
	listen_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	channel = rdma_create_event_channel();
	if (!channel || rdma_create_id(channel, &listener, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(listener, (struct sockaddr *)&listen_addr) || rdma_listen(listener, 64))
		die("listener (run under softrdma run)");
	listen_addr.sin_port = rdma_get_src_port(listener);
	pd = ibv_alloc_pd(listener->verbs);
	cq = ibv_create_cq(listener->verbs, 64, NULL, NULL, 0);
	if (!pd || !cq)
		die("pd/cq");
}

static void patch(uint8_t *p, size_t size, bool keep_gid)
{
	static const uint8_t loopback[16] = { [10] = 0xff, [11] = 0xff, [12] = 127, [15] = 1 };
	const uint32_t qpn = 0x000101;

	for (size_t at = 0; at + sizeof(struct cm_msg) <= size; at += sizeof(struct cm_msg)) {
		if (!keep_gid)
			memcpy(p + at + offsetof(struct cm_msg, gid), loopback, 16);
		memcpy(p + at + offsetof(struct cm_msg, qpn), &qpn, 4);
	}
}

static void answer(struct rdma_cm_event *ev, bool accept, struct rdma_cm_id **ids, int *nids)
{
	struct rdma_cm_id *id = ev->id;
	enum rdma_cm_event_type type = ev->event;
	struct ibv_qp_init_attr attr = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};

	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "fuzz: %s status %d\n", rdma_event_str(type), ev->status);
	rdma_ack_cm_event(ev);
	if (type != RDMA_CM_EVENT_CONNECT_REQUEST || id == listener)
		return;
	if (*nids == MAX_IDS) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	ids[(*nids)++] = id;
	if (accept && !rdma_create_qp(id, pd, &attr))
		rdma_accept(id, NULL);
	else
		rdma_reject(id, NULL, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdma_cm_id *ids[MAX_IDS];
	struct pollfd pfd;
	struct rdma_cm_event *ev;
	uint8_t *bytes;
	int nids = 0, fd;

	if (!channel)
		setup();
	if (!size)
		return 0;
	bytes = malloc(size);
	if (!bytes)
		abort();
	memcpy(bytes, data, size);
	patch(bytes + 1, size - 1, bytes[0] & 2);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&listen_addr, sizeof(listen_addr)))
		die("connect");
	pfd = (struct pollfd){ .fd = channel->fd, .events = POLLIN };
	/* A message at a time, each answered before the next, as a peer waits for replies;
	 * then the hang-up. */
	for (size_t at = 1, n = 1; n;) {
		n = size - at < sizeof(struct cm_msg) ? size - at : sizeof(struct cm_msg);
		if (!n)
			shutdown(fd, SHUT_WR);
		else if (send(fd, bytes + at, n, MSG_NOSIGNAL) != (ssize_t)n)
			n = 0;	/* the CM hung up on what came before */
		at += n;
		for (int events = 0; events < 4 * MAX_IDS && poll(&pfd, 1, QUIET_MS) > 0;
		     events++) {
			if (rdma_get_cm_event(channel, &ev))
				die("rdma_get_cm_event");
			answer(ev, bytes[0] & 1, ids, &nids);
		}
	}
	for (int i = 0; i < nids; i++) {
		if (ids[i]->qp)
			rdma_destroy_qp(ids[i]);
		rdma_destroy_id(ids[i]);
	}
	/* Events of the destroyed ids are dropped with them; the listener's are acked. */
	while (poll(&pfd, 1, 0) > 0 && !rdma_get_cm_event(channel, &ev))
		rdma_ack_cm_event(ev);
	close(fd);
	free(bytes);
	return 0;
}
