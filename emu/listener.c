// SPDX-License-Identifier: MIT
/*
 * Listeners: the ports that make up QPNs (QPN = port << 8 | index). A listener is one port
 * number, bound on every address of the device's GID table and on nothing else (as rxe
 * listens only on the netdevs it is attached to), with a TCP socket for streams and
 * handshakes and a UDP socket for UD datagrams on each address.
 *
 * What arrives on a TCP socket is not trusted until emu/handshake.c has read what it is
 * for; the listener bounds how many such connections it holds (LISTENER_HALF_OPEN: the
 * oldest makes room), and backs off when the process is out of file descriptors instead of
 * spinning on accept (accept_must_rest()).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/internal.h"
#include "kernel-abi/host_gids.h"

#define LISTENER_BIND_TRIES	16
#define ACCEPTS_PER_WAKE	16

static bool is_link_local(const uint8_t a[16])
{
	return a[0] == 0xfe && (a[1] & 0xc0) == 0x80;
}

int listener_addresses(struct sockaddr_in6 **out, unsigned int **ifindexes)
{
	struct host_gid gids[EMU_MAX_GIDS];
	struct sockaddr_in6 *sa;
	unsigned int *ifx;
	int n = host_gids_collect(gids, EMU_MAX_GIDS), k = 0;

	if (n < 0)
		return n;
	sa = calloc(n ? (size_t)n : 1, sizeof(*sa));
	ifx = calloc(n ? (size_t)n : 1, sizeof(*ifx));
	if (!sa || !ifx) {
		free(sa);
		free(ifx);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		ifx[k] = gids[i].ifindex;
		sa[k].sin6_family = AF_INET6;
		memcpy(&sa[k].sin6_addr, gids[i].raw, 16);
		/* A link-local address means nothing without its interface. */
		if (is_link_local(gids[i].raw))
			sa[k].sin6_scope_id = if_nametoindex(gids[i].ifname);
		k++;
	}
	*out = sa;
	*ifindexes = ifx;
	return k;
}

static int open_socket(int type, const struct sockaddr_in6 *addr)
{
	int fd = socket(AF_INET6, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int off = 0, one = 1;

	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
	if (type == SOCK_STREAM)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)addr, sizeof(*addr)) ||
	    (type == SOCK_STREAM && listen(fd, 1024))) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

static void close_sockets(struct emu_listener *l)
{
	for (int i = 0; i < l->nsocks; i++) {
		if (l->socks[i].tcp_fd >= 0)
			close(l->socks[i].tcp_fd);
		if (l->socks[i].udp_fd >= 0)
			close(l->socks[i].udp_fd);
	}
	l->nsocks = 0;
}

/*
 * Binds TCP and UDP on one port number on every address: the first address picks the port
 * (0: ephemeral), the others follow. 0, EADDRINUSE (try another port) or another errno.
 */
static int bind_all(struct emu_listener *l, const struct sockaddr_in6 *addrs, int naddrs)
{
	uint16_t port = 0;

	for (int i = 0; i < naddrs; i++) {
		struct listen_socket *s = &l->socks[l->nsocks];
		struct sockaddr_in6 sa = addrs[i];
		socklen_t len = sizeof(sa);

		sa.sin6_port = htons(port);
		s->tcp_fd = open_socket(SOCK_STREAM, &sa);
		if (s->tcp_fd == -EADDRNOTAVAIL)
			continue;	/* an address not usable yet (IPv6 DAD): not listened on */
		if (s->tcp_fd < 0)
			return -s->tcp_fd;
		if (!port) {
			if (getsockname(s->tcp_fd, (struct sockaddr *)&sa, &len)) {
				close(s->tcp_fd);
				return errno;
			}
			port = ntohs(sa.sin6_port);
		}
		s->udp_fd = ud_socket_open(&sa, false);
		if (s->udp_fd < 0) {
			int err = -s->udp_fd;

			close(s->tcp_fd);
			return err;
		}
		s->addr = sa;
		s->ifindex = l->engine->ifindexes[i];
		s->owner = l;
		l->nsocks++;
	}
	l->port = port;
	return port ? 0 : EADDRNOTAVAIL;
}

static void on_accept_ready(struct io_watch *w, uint32_t revents);

int listener_open(struct emu_engine *e, struct emu_listener **out)
{
	struct emu_listener *l = calloc(1, sizeof(*l));
	int err = EADDRINUSE;

	if (!l)
		return ENOMEM;
	l->engine = e;
	l->socks = calloc((size_t)e->naddrs, sizeof(*l->socks));
	if (!l->socks) {
		free(l);
		return ENOMEM;
	}
	for (int attempt = 0; attempt < LISTENER_BIND_TRIES && err == EADDRINUSE; attempt++) {
		err = bind_all(l, e->addrs, e->naddrs);
		if (err)
			close_sockets(l);
	}
	if (err) {
		free(l->socks);
		free(l);
		return err;
	}
	for (int i = 0; i < l->nsocks; i++) {
		struct listen_socket *s = &l->socks[i];

		s->tcp_watch = (struct io_watch){ .fd = s->tcp_fd, .events = IO_IN,
						  .ready = on_accept_ready };
		s->udp_watch = (struct io_watch){ .fd = s->udp_fd, .events = IO_IN,
						  .ready = ud_on_datagram };
	}
	*out = l;
	return 0;
}

/* Engine thread. */
int listener_watch(struct emu_listener *l)
{
	struct emu_engine *e = l->engine;

	for (int i = 0; i < l->nsocks; i++) {
		int ret = engine_watch(e, &l->socks[i].tcp_watch);

		if (!ret)
			ret = engine_watch(e, &l->socks[i].udp_watch);
		if (ret) {
			listener_unwatch(l, i);
			return ret;
		}
	}
	return 0;
}

/* Engine thread: stops watching the first n sockets (all: l->nsocks). */
void listener_unwatch(struct emu_listener *l, int n)
{
	for (int i = 0; i < n; i++) {
		engine_unwatch(l->engine, &l->socks[i].tcp_watch);
		engine_unwatch(l->engine, &l->socks[i].udp_watch);
	}
}

void listener_free(struct emu_listener *l)
{
	close_sockets(l);
	free(l->socks);
	free(l);
}

int listener_udp_socket(const struct emu_listener *l, const uint8_t sgid[16],
			unsigned int *ifindex)
{
	for (int i = 0; i < l->nsocks; i++)
		if (!memcmp(&l->socks[i].addr.sin6_addr, sgid, 16)) {
			*ifindex = l->socks[i].ifindex;
			return l->socks[i].udp_fd;
		}
	return -1;
}

void accept_rest_begin(struct emu_engine *e, uint64_t *resume_ns)
{
	*resume_ns = engine_now_ns() + ACCEPT_BACKOFF_NS;
	engine_timer_changed(e, *resume_ns);
}

bool accept_rest_over(uint64_t *resume_ns, uint64_t now, uint64_t *next)
{
	*next = UINT64_MAX;
	if (!*resume_ns)
		return false;
	if (now < *resume_ns) {
		*next = *resume_ns;
		return false;
	}
	*resume_ns = 0;
	return true;
}

/* Whether every TCP socket of l is watched for connections (IO_IN) or not (0). */
static void watch_accepts(struct emu_listener *l, uint32_t events)
{
	for (int i = 0; i < l->nsocks; i++) {
		l->socks[i].tcp_watch.events = events;
		engine_rewatch(l->engine, &l->socks[i].tcp_watch);
	}
}

/* Out of descriptors: stop accepting on every socket of l until the backoff ends. */
static void back_off(struct emu_listener *l)
{
	watch_accepts(l, 0);
	accept_rest_begin(l->engine, &l->resume_ns);
}

uint64_t listener_timer(struct emu_listener *l, uint64_t now)
{
	uint64_t next;

	if (accept_rest_over(&l->resume_ns, now, &next))
		watch_accepts(l, IO_IN);
	return next;
}

static void on_accept_ready(struct io_watch *w, uint32_t revents)
{
	struct listen_socket *s = container_of(w, struct listen_socket, tcp_watch);
	struct emu_listener *l = s->owner;

	(void)revents;
	for (int i = 0; i < ACCEPTS_PER_WAKE && !l->resume_ns; i++) {
		struct sockaddr_in6 peer;
		socklen_t len = sizeof(peer);
		int fd = accept4(w->fd, (struct sockaddr *)&peer, &len,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (accept_must_rest(errno))
				back_off(l);
			return;
		}
		/*
		 * Too many that have not said what they are for: the oldest goes, not the
		 * newcomer. Refusing newcomers would let 64 silent connections, renewed as they
		 * time out, keep every stream out of this listener; a genuine requester sends
		 * its hello at once, so it is never the oldest for long.
		 */
		if (l->half_open >= LISTENER_HALF_OPEN)
			handshake_evict_oldest(l);
		handshake_accept(l, fd, &peer);
	}
}
