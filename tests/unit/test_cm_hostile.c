// SPDX-License-Identifier: MIT
/*
 * The drop-in librdmacm against hostile peers (docs/security.md): each test is an
 * attack on a listener of this process, made with raw TCP and hand-built CM messages, and
 * asserts both that the attack is refused and that a legitimate connection then works.
 *   - a peer that floods DREQs and never reads is cut off; the CM thread never blocks;
 *   - silent connections: at most CM_MAX_HALF_OPEN are held, none past CM_REQ_TIMEOUT_MS;
 *   - a REQ (or REP) naming a GID other than its sender's is rejected;
 *   - at the fd limit the CM thread rests instead of spinning, and serves once fds free up;
 *   - connections on an interface the device is not attached to are closed unread.
 * Run under `softrdma run` (ctest does).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cm_fixture.h"
#include "attacker_fds.h"	/* after cmocka.h */
#include "cm.h"

#define NO_QP_PORT_QPN	0x000101	/* port 1: nobody listens, a QP there dials nothing */

/* A raw TCP connection to the listener on port; rcvbuf > 0 shrinks its receive buffer. */
static int attacker_connect(int port, int rcvbuf)
{
	struct sockaddr_in sin = loopback(port);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	if (rcvbuf)
		assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)), 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

static struct cm_msg msg_of(enum cm_msg_type type)
{
	struct cm_msg m;

	memset(&m, 0, sizeof(m));
	m.magic = htonl(CM_WIRE_MAGIC);
	m.version = htons(CM_WIRE_VERSION);
	m.type = type;
	return m;
}

/* A REQ as a softrdma peer sends it, naming gid as where its QP lives. */
static void send_req(int fd, const uint8_t gid[16])
{
	struct cm_msg req = msg_of(CM_MSG_REQ);

	req.qpn = NO_QP_PORT_QPN;
	req.psn = 1;
	req.responder_resources = 1;
	req.initiator_depth = 1;
	req.retry_count = 7;
	req.rnr_retry_count = 7;
	memcpy(req.gid, gid, 16);
	assert_int_equal(send(fd, &req, sizeof(req), MSG_NOSIGNAL), sizeof(req));
}

/* The GID of fd's own address: what an honest peer names. */
static void own_gid(int fd, uint8_t gid[16])
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	memset(gid, 0, 16);
	gid[10] = gid[11] = 0xff;
	memcpy(gid + 12, &sin.sin_addr, 4);
}

static const uint8_t other_host_gid[16] = { [10] = 0xff, [11] = 0xff, 192, 0, 2, 7 };

/* The next whole message from fd within ms, or -1 with errno (0 at end of stream). */
static int read_msg(int fd, struct cm_msg *m, int ms)
{
	size_t got = 0;

	while (got < sizeof(*m)) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, ms) != 1) {
			errno = ETIMEDOUT;
			return -1;
		}
		n = recv(fd, (uint8_t *)m + got, sizeof(*m) - got, 0);
		if (n <= 0) {
			errno = n ? errno : 0;
			return -1;
		}
		got += (size_t)n;
	}
	return 0;
}

enum flood_end { CUT_OFF, STALLED, KEPT };

/* DREQs as fast as the socket takes them, never reading: until the CM resets the
 * connection, it stops taking them for a second (the CM no longer reads), or 20000 of
 * them (5 MB) were taken in 10 s without either. */
static enum flood_end flood_dreqs(int fd, int *sent)
{
	struct cm_msg dreq = msg_of(CM_MSG_DREQ);
	int64_t start = monotonic_ms(), last_progress = start;
	size_t off = 0;

	fcntl(fd, F_SETFL, O_NONBLOCK);
	for (*sent = 0; *sent < 20000 && monotonic_ms() - start < 10000;) {
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		ssize_t n;

		if (monotonic_ms() - last_progress > 1000)
			return STALLED;
		poll(&pfd, 1, 100);
		if (pfd.revents & (POLLERR | POLLHUP))
			return CUT_OFF;
		n = send(fd, (uint8_t *)&dreq + off, sizeof(dreq) - off, MSG_NOSIGNAL);
		if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
			return CUT_OFF;
		if (n <= 0)
			continue;
		last_progress = monotonic_ms();
		off += (size_t)n;
		if (off == sizeof(dreq)) {
			off = 0;
			(*sent)++;
		}
	}
	return KEPT;
}

static void test_dreq_flood_from_a_peer_that_never_reads_is_cut_off(void **state)
{
	struct side srv = { 0 };
	struct rdma_cm_id *conn;
	uint8_t gid[16];
	int port, fd, sent;
	enum flood_end end;

	(void)state;
	port = start_listener(&srv, 16);
	fd = attacker_connect(port, 4096);
	own_gid(fd, gid);
	send_req(fd, gid);
	conn = accept_one(&srv, NULL, 0);	/* the application takes it, as rping would */
	end = flood_dreqs(fd, &sent);
	if (end == STALLED)
		fail_msg("after %d DREQs the CM stopped reading but kept the connection", sent);
	if (end == KEPT)
		fail_msg("the CM took %d DREQs and kept the connection", sent);
	print_message("cut off after %d DREQs\n", sent);
	/* Bounded: the socket buffers and CM_TX_QUEUE, a few hundred answers at most. */
	assert_true(sent < 5000);
	expect_event(srv.ch, RDMA_CM_EVENT_DISCONNECTED);	/* the first DREQ, once */
	expect_no_event(srv.ch, 100);
	legit_connection(&srv, port);
	close(fd);
	rdma_destroy_qp(conn);
	assert_int_equal(rdma_destroy_id(conn), 0);
	stop(&srv);
}

static void test_silent_connections_are_bounded_and_time_out(void **state)
{
	enum { SILENT = 2000 };
	struct side srv = { 0 };
	static int fds[SILENT];
	rlim_t old_limit;
	int port, open;
	int64_t start;

	(void)state;
	old_limit = raise_fd_limit(SILENT + 256);
	port = start_listener(&srv, 4096);	/* all of them reach accept() */
	start = monotonic_ms();
	for (int i = 0; i < SILENT; i++)
		fds[i] = attacker_connect(port, 0);
	/*
	 * It gets in beside them, behind them in the listener's accept queue: once it is
	 * established, the CM has taken every silent connection, and what it holds is what
	 * it keeps, however slowly a loaded machine got there.
	 */
	legit_connection(&srv, port);
	assert_true(monotonic_ms() - start < CM_REQ_TIMEOUT_MS);	/* before any timed out */
	open = still_open(fds, SILENT);
	print_message("%d silent connections, %d still held once a real one is in\n", SILENT,
		      open);
	assert_true(open <= CM_MAX_HALF_OPEN);
	expect_closed_at_deadline(fds, SILENT, start, CM_REQ_TIMEOUT_MS);
	expect_no_event(srv.ch, 0);	/* the application never heard of them */
	for (int i = 0; i < SILENT; i++)
		close(fds[i]);
	stop(&srv);
	set_soft_fd_limit(old_limit);
}

static void test_req_naming_another_host_is_rejected(void **state)
{
	struct side srv = { 0 };
	struct cm_msg rej;
	int port, fd;

	(void)state;
	port = start_listener(&srv, 16);
	fd = attacker_connect(port, 0);
	send_req(fd, other_host_gid);	/* "my QP is at 192.0.2.7": connect yours there */
	assert_int_equal(read_msg(fd, &rej, 5000), 0);
	assert_int_equal(rej.type, CM_MSG_REJ);
	assert_int_equal(rej.reject_reason, CM_REJ_INVALID_GID);
	assert_int_equal(read_msg(fd, &rej, 5000), -1);	/* then the connection goes */
	assert_int_equal(errno, 0);
	expect_no_event(srv.ch, 200);	/* no CONNECT_REQUEST: no QP ever dials 192.0.2.7 */
	close(fd);
	legit_connection(&srv, port);
	stop(&srv);
}

/* A raw listener standing in for a hostile server's CM. */
static int raw_listener(int *port)
{
	struct sockaddr_in sin = loopback(0);
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	*port = ntohs(sin.sin_port);
	return fd;
}

static void test_rep_naming_another_host_is_refused(void **state)
{
	struct rdma_conn_param param = { .retry_count = 7, .rnr_retry_count = 7 };
	struct side cli = { 0 }, srv = { 0 };
	struct rdma_cm_event *e;
	struct cm_msg req, rep = msg_of(CM_MSG_REP), rej;
	int port, lfd, fd;

	(void)state;
	lfd = raw_listener(&port);
	start_client(&cli, port);
	assert_int_equal(rdma_connect(cli.id, &param), 0);
	fd = accept(lfd, NULL, NULL);
	assert_true(fd >= 0);
	assert_int_equal(read_msg(fd, &req, 5000), 0);
	assert_int_equal(req.type, CM_MSG_REQ);
	rep.qpn = NO_QP_PORT_QPN;
	memcpy(rep.gid, other_host_gid, 16);	/* "connect your QP to 192.0.2.7" */
	assert_int_equal(send(fd, &rep, sizeof(rep), MSG_NOSIGNAL), sizeof(rep));
	e = next_event(cli.ch, RDMA_CM_EVENT_CONNECT_ERROR);
	assert_int_equal(e->status, -EPROTO);
	rdma_ack_cm_event(e);
	assert_int_equal(read_msg(fd, &rej, 5000), 0);
	assert_int_equal(rej.type, CM_MSG_REJ);
	assert_int_equal(rej.reject_reason, CM_REJ_INVALID_GID);
	close(fd);
	close(lfd);
	stop(&cli);
	port = start_listener(&srv, 16);
	legit_connection(&srv, port);
	stop(&srv);
}

/* A local IPv4 address the device is not attached to (rdma_bind_addr refuses it), or 0. */
static in_addr_t unattached_address(void)
{
	struct ifaddrs *ifs, *ifa;
	in_addr_t found = 0;

	if (getifaddrs(&ifs))
		return 0;
	for (ifa = ifs; ifa && !found; ifa = ifa->ifa_next) {
		struct rdma_event_channel *ch;
		struct rdma_cm_id *id;
		struct sockaddr_in sin;

		if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET ||
		    (ifa->ifa_flags & IFF_LOOPBACK) || !(ifa->ifa_flags & IFF_UP))
			continue;
		memcpy(&sin, ifa->ifa_addr, sizeof(sin));
		ch = rdma_create_event_channel();
		assert_int_equal(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
		if (rdma_bind_addr(id, (struct sockaddr *)&sin) && errno == EADDRNOTAVAIL)
			found = sin.sin_addr.s_addr;
		rdma_destroy_id(id);
		rdma_destroy_event_channel(ch);
	}
	freeifaddrs(ifs);
	return found;
}

/* A listener on the wildcard address takes TCP connections on every interface; those that
 * come in on an interface the device is not attached to (as softrdma run's default, all
 * but loopback) are closed unread, so they cannot use up its half-open slots. */
static void test_unattached_interface_is_not_served(void **state)
{
	enum { SILENT = 100 };
	struct sockaddr_in any = { .sin_family = AF_INET }, sin = { .sin_family = AF_INET };
	struct side srv = { 0 };
	int fds[SILENT], port, open;
	in_addr_t addr = unattached_address();

	(void)state;
	if (!addr)
		skip();	/* no interface besides those the device is attached to */
	srv.ch = rdma_create_event_channel();
	assert_int_equal(rdma_create_id(srv.ch, &srv.id, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_bind_addr(srv.id, (struct sockaddr *)&any), 0);
	assert_int_equal(rdma_listen(srv.id, 128), 0);
	port = ntohs(rdma_get_src_port(srv.id));
	sin.sin_addr.s_addr = addr;
	sin.sin_port = htons(port);
	for (int i = 0; i < SILENT; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_int_equal(connect(fds[i], (struct sockaddr *)&sin, sizeof(sin)), 0);
	}
	usleep(500 * 1000);
	open = still_open(fds, SILENT);
	print_message("%d connections to %s, %d still held after 0.5 s\n", SILENT,
		      inet_ntoa(sin.sin_addr), open);
	assert_int_equal(open, 0);
	expect_no_event(srv.ch, 0);
	for (int i = 0; i < SILENT; i++)
		close(fds[i]);
	legit_connection(&srv, port);	/* on loopback, which it is attached to */
	stop(&srv);
}

/* CPU time this process has used, in ms: its threads are idle but the CM thread. */
static int64_t cpu_ms(void)
{
	struct rusage ru;

	assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
	return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

static void test_at_the_fd_limit_the_cm_rests_then_serves(void **state)
{
	enum { MAX_FILL = 4096 };
	static int fill[MAX_FILL];
	struct side srv = { 0 };
	struct sockaddr_in sin;
	struct rdma_cm_event *e;
	uint8_t gid[16];
	int port, fd, probe, nfill = 0;
	int64_t cpu;
	rlim_t old_limit;

	(void)state;
	port = start_listener(&srv, 16);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);	/* made while fds are left */
	assert_true(fd >= 0);
	old_limit = raise_fd_limit(0);
	probe = dup(fd);	/* the lowest free fd: a little above it, none is left */
	assert_true(probe >= 0);
	close(probe);
	set_soft_fd_limit((rlim_t)probe + 64);
	while (nfill < MAX_FILL && (fill[nfill] = dup(fd)) >= 0)
		nfill++;
	assert_int_equal(errno, EMFILE);
	sin = loopback(port);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	cpu = cpu_ms();
	sleep(2);
	cpu = cpu_ms() - cpu;
	print_message("at the fd limit for 2 s, with a connection waiting: %lld ms of CPU\n",
		      (long long)cpu);
	assert_true(cpu < 200);	/* a spinning accept loop takes a CPU: ~2000 ms */
	for (int i = 0; i < nfill; i++)
		close(fill[i]);
	set_soft_fd_limit(old_limit);
	/* fds are back: the waiting connection is taken, its REQ delivered. */
	own_gid(fd, gid);
	send_req(fd, gid);
	e = next_event(srv.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	{
		struct rdma_cm_id *id = e->id;

		rdma_ack_cm_event(e);
		assert_int_equal(rdma_reject(id, NULL, 0), 0);
		assert_int_equal(rdma_destroy_id(id), 0);
	}
	close(fd);
	legit_connection(&srv, port);
	stop(&srv);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dreq_flood_from_a_peer_that_never_reads_is_cut_off),
		cmocka_unit_test(test_silent_connections_are_bounded_and_time_out),
		cmocka_unit_test(test_req_naming_another_host_is_rejected),
		cmocka_unit_test(test_rep_naming_another_host_is_refused),
		cmocka_unit_test(test_at_the_fd_limit_the_cm_rests_then_serves),
		cmocka_unit_test(test_unattached_interface_is_not_served),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);	/* one attack: test_cm_hostile NAME */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
