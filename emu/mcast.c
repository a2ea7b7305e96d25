// SPDX-License-Identifier: MIT
/*
 * UD multicast, as a RoCE v2 device does it: a multicast GID is an IP multicast address
 * (a v4-mapped 224.0.0.0/4 one travels as IPv4), and a send to it is one UDP datagram to
 * that address and port 4791, which the network carries to every host that joined it.
 *
 * Each group a QP of this process is attached to is one UDP socket, bound to the group's
 * address and port 4791 (shared with the other engines of the host: each socket gets its
 * own copy) and joined to the IP group on every interface the device is attached to, and on
 * no other. What arrives on it goes to the QPs attached to that group in this process and to
 * no others: the table below is the only way in, it holds only what this process's
 * ibv_attach_mcast() put there, and it is bounded by the limits query_device advertises
 * (emu/limits.h). A datagram on a group's socket must name the multicast QPN, and each QP
 * still checks its state and Q_Key as for any UD receive (emu/ud.c).
 *
 * The sending QP does not receive its own datagram (rxe_rcv_mcast_pkt() skips the QP whose
 * number the DETH names when the packet was sent by this device); every other QP of this
 * device attached to the group does, through IP's multicast loopback.
 *
 * Everything here runs on the engine thread (attach and detach are calls to it), so the
 * table needs no lock of its own: delivery and changes never run at once.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/counters.h"
#include "emu/internal.h"
#include "emu/limits.h"

struct mcast_group {
	uint8_t mgid[16];
	int fd;
	struct io_watch watch;
	struct emu_engine *engine;
	uint32_t overflows;		/* its socket's drop count (SO_RXQ_OVFL) last seen */
	struct emu_qp *qps[EMU_MAX_MCAST_QP_ATTACH];
	int nqps;
};

struct mcast_table {
	struct mcast_group *groups[EMU_MAX_MCAST_GRP];
	int ngroups;
	int attached;			/* QP attachments over all groups */
};

static bool is_v4_mapped(const uint8_t gid[16])
{
	static const uint8_t prefix[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(gid, prefix, 12);
}

static struct mcast_group *find_group(struct mcast_table *t, const uint8_t mgid[16])
{
	for (int i = 0; i < t->ngroups; i++)
		if (!memcmp(t->groups[i]->mgid, mgid, 16))
			return t->groups[i];
	return NULL;
}

/* Engine thread: whether d was sent by qp itself (same address, port and QPN as ours). */
static bool sent_by(const struct emu_qp *qp, const struct ud_datagram *d)
{
	const struct emu_listener *l = qp->listener;

	if (d->pkt.src_qp != qp->qpn || d->src_port != l->port)
		return false;
	for (int i = 0; i < l->nsocks; i++)
		if (!memcmp(&l->socks[i].addr.sin6_addr, d->arrival.sgid, 16))
			return true;
	return false;
}

static void on_group_datagram(struct io_watch *w, uint32_t revents)
{
	struct mcast_group *g = container_of(w, struct mcast_group, watch);

	(void)revents;
	for (int i = 0; i < 64; i++) {
		struct ud_datagram d;
		int got = ud_read_datagram(w->fd, &g->overflows, EMU_MCAST_UDP_PORT, &d);

		if (got < 0)
			return;
		if (!got)
			continue;
		counter_packet(&emu_process_counters, EMU_CNT_RCV_DATA,
			       wire_opcodes[d.pkt.opcode].hdr_len, d.pkt.payload_len);
		counter_add(EMU_CNT_MCAST_RCV_PACKETS, 1);
		/* The socket is bound to the group's address; a unicast QPN here is a bad packet. */
		if (d.pkt.qpn != EMU_MULTICAST_QPN || memcmp(d.arrival.dgid, g->mgid, 16))
			continue;
		for (int q = 0; q < g->nqps; q++)
			if (!sent_by(g->qps[q], &d))
				ud_deliver(g->qps[q], &d);
	}
}

void mcast_read_group(struct emu_engine *e, const uint8_t mgid[16])
{
	struct mcast_group *g = e->mcast ? find_group(e->mcast, mgid) : NULL;

	if (g)
		on_group_datagram(&g->watch, IO_IN);
}

/* Joins fd to the group on every interface of the device (once each). 0, or an errno. */
static int join_interfaces(struct emu_engine *e, int fd, const uint8_t mgid[16])
{
	bool v4 = is_v4_mapped(mgid);
	int joined = 0, err = ENODEV;

	for (int i = 0; i < e->naddrs; i++) {
		unsigned int ifx = e->ifindexes[i];
		bool seen = false;
		int ret;

		for (int j = 0; j < i; j++)
			seen |= e->ifindexes[j] == ifx;
		if (seen || !ifx)
			continue;
		if (v4) {
			struct ip_mreqn m = { .imr_ifindex = (int)ifx };

			memcpy(&m.imr_multiaddr, mgid + 12, 4);
			ret = setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m));
		} else {
			struct ipv6_mreq m = { .ipv6mr_interface = ifx };

			memcpy(&m.ipv6mr_multiaddr, mgid, 16);
			ret = setsockopt(fd, IPPROTO_IPV6, IPV6_ADD_MEMBERSHIP, &m, sizeof(m));
		}
		if (ret)
			err = errno;
		else
			joined++;
	}
	return joined ? 0 : err;
}

static int group_open(struct emu_engine *e, const uint8_t mgid[16], struct mcast_group **out)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_port = htons(EMU_MCAST_UDP_PORT) };
	struct mcast_group *g = calloc(1, sizeof(*g));
	int off = 0, ret;

	if (!g)
		return ENOMEM;
	memcpy(&sa.sin6_addr, mgid, 16);
	g->fd = ud_socket_open(&sa, true);
	if (g->fd < 0) {
		ret = -g->fd;
		free(g);
		return ret;
	}
	/* Only the groups this socket joined, not every group some socket of the host did. */
	setsockopt(g->fd, IPPROTO_IP, IP_MULTICAST_ALL, &off, sizeof(off));
	setsockopt(g->fd, IPPROTO_IPV6, IPV6_MULTICAST_ALL, &off, sizeof(off));
	ret = join_interfaces(e, g->fd, mgid);
	if (!ret) {
		g->watch = (struct io_watch){ .fd = g->fd, .events = IO_IN,
					      .ready = on_group_datagram };
		ret = engine_watch(e, &g->watch);
	}
	if (ret) {
		close(g->fd);
		free(g);
		return ret;
	}
	memcpy(g->mgid, mgid, 16);
	g->engine = e;
	*out = g;
	return 0;
}

/* Closing the socket leaves the IP group on every interface. */
static void group_close(struct mcast_group *g)
{
	engine_unwatch(g->engine, &g->watch);
	close(g->fd);
	free(g);
}

static struct mcast_table *table(struct emu_engine *e)
{
	if (!e->mcast)
		e->mcast = calloc(1, sizeof(*e->mcast));
	return e->mcast;
}

struct mcast_call {
	struct emu_qp *qp;
	const uint8_t *mgid;
	int ret;
};

static void attach_on_engine(void *arg)
{
	struct mcast_call *c = arg;
	struct emu_engine *e = c->qp->engine;
	struct mcast_table *t = table(e);
	struct mcast_group *g;

	c->ret = ENOMEM;
	if (!t)
		return;
	g = find_group(t, c->mgid);
	if (g) {
		for (int i = 0; i < g->nqps; i++)
			if (g->qps[i] == c->qp) {
				c->ret = 0;	/* attached already: as rxe, nothing changes */
				return;
			}
	}
	/* rxe's order: a new group past max_mcast_grp, then the group's and the total's limits. */
	if (!g && t->ngroups >= EMU_MAX_MCAST_GRP)
		return;
	if ((g && g->nqps >= EMU_MAX_MCAST_QP_ATTACH) ||
	    t->attached >= EMU_MAX_TOTAL_MCAST_QP_ATTACH)
		return;
	if (!g) {
		c->ret = group_open(e, c->mgid, &g);
		if (c->ret)
			return;
		t->groups[t->ngroups++] = g;
	}
	g->qps[g->nqps++] = c->qp;
	c->qp->mcast_groups++;
	t->attached++;
	c->ret = 0;
}

/* Engine thread: takes qp out of g; the last member closes the group. EINVAL: not in it. */
static int leave(struct mcast_table *t, struct mcast_group *g, struct emu_qp *qp)
{
	for (int i = 0; i < g->nqps; i++) {
		if (g->qps[i] != qp)
			continue;
		g->qps[i] = g->qps[--g->nqps];
		qp->mcast_groups--;
		t->attached--;
		if (!g->nqps) {
			for (int k = 0; k < t->ngroups; k++)
				if (t->groups[k] == g)
					t->groups[k] = t->groups[--t->ngroups];
			group_close(g);
		}
		return 0;
	}
	return EINVAL;
}

static void detach_on_engine(void *arg)
{
	struct mcast_call *c = arg;
	struct mcast_table *t = c->qp->engine->mcast;
	struct mcast_group *g = t ? find_group(t, c->mgid) : NULL;

	c->ret = g ? leave(t, g, c->qp) : EINVAL;
}

static void count_on_engine(void *arg)
{
	struct mcast_call *c = arg;

	c->ret = c->qp->mcast_groups;
}

int emu_mcast_attach(struct emu_qp *qp, const uint8_t mgid[16])
{
	struct mcast_call c = { .qp = qp, .mgid = mgid };

	engine_call_sync(qp->engine, attach_on_engine, &c);
	return c.ret;
}

int emu_mcast_detach(struct emu_qp *qp, const uint8_t mgid[16])
{
	struct mcast_call c = { .qp = qp, .mgid = mgid };

	engine_call_sync(qp->engine, detach_on_engine, &c);
	return c.ret;
}

int emu_mcast_attached(struct emu_qp *qp)
{
	struct mcast_call c = { .qp = qp };

	engine_call_sync(qp->engine, count_on_engine, &c);
	return c.ret;
}

void mcast_detach_all(struct emu_qp *qp)
{
	struct mcast_table *t = qp->engine->mcast;

	for (int i = t ? t->ngroups - 1 : -1; i >= 0 && qp->mcast_groups; i--)
		if (i < t->ngroups)
			leave(t, t->groups[i], qp);
}

void mcast_stop(struct emu_engine *e)
{
	struct mcast_table *t = e->mcast;

	if (!t)
		return;
	while (t->ngroups)
		group_close(t->groups[--t->ngroups]);
	free(t);
	e->mcast = NULL;
}
