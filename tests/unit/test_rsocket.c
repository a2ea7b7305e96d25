// SPDX-License-Identifier: MIT
/*
 * Unit tests for librdmacm-shim/rsocket.c: the rsocket calls over loopback TCP, one test per
 * behaviour, both ends of each connection in this process.
 */
#define _GNU_SOURCE

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rsocket.h>

#define TEST_TIMEOUT_S		120	/* a hang fails the run instead of stalling it */
#define SPIN_DEADLINE_MS	10000

struct conn_pair {
	int client;
	int server;
};

static int64_t now_ms(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

static struct sockaddr_in loopback_addr(in_port_t port)
{
	struct sockaddr_in addr = {
		.sin_family = AF_INET,
		.sin_port = port,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};

	return addr;
}

static int listener_create(int iomap_size, in_port_t *port)
{
	struct sockaddr_in addr = loopback_addr(0);
	socklen_t len = sizeof(addr);
	int one = 1;
	int fd = rsocket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(rsetsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
	assert_int_equal(rsetsockopt(fd, SOL_RDMA, RDMA_IOMAPSIZE, &iomap_size,
				     sizeof(iomap_size)), 0);
	assert_int_equal(rbind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	assert_int_equal(rlisten(fd, 8), 0);
	assert_int_equal(rgetsockname(fd, (struct sockaddr *)&addr, &len), 0);
	*port = addr.sin_port;
	return fd;
}

/* A connected pair; each side's RDMA_IOMAPSIZE is what the other side may riomap(). */
static struct conn_pair pair_connect(int client_iomap, int server_iomap)
{
	struct conn_pair pair;
	struct sockaddr_in addr;
	in_port_t port;
	int listener = listener_create(server_iomap, &port);

	addr = loopback_addr(port);
	pair.client = rsocket(AF_INET, SOCK_STREAM, 0);
	assert_true(pair.client >= 0);
	assert_int_equal(rsetsockopt(pair.client, SOL_RDMA, RDMA_IOMAPSIZE, &client_iomap,
				     sizeof(client_iomap)), 0);
	assert_int_equal(rconnect(pair.client, (struct sockaddr *)&addr, sizeof(addr)), 0);
	pair.server = raccept(listener, NULL, NULL);
	assert_true(pair.server >= 0);
	assert_int_equal(rclose(listener), 0);
	return pair;
}

static void pair_close(struct conn_pair *pair)
{
	assert_int_equal(rclose(pair->client), 0);
	assert_int_equal(rclose(pair->server), 0);
}

static void send_all(int fd, const void *buf, size_t len)
{
	assert_int_equal(rsend(fd, buf, len, 0), len);
}

static void recv_all(int fd, void *buf, size_t len)
{
	assert_int_equal(rrecv(fd, buf, len, MSG_WAITALL), len);
}

/* rreadv() may stop at a frame boundary; this keeps going until total bytes are in. */
static void readv_all(int fd, struct iovec *iov, int iovcnt, size_t total)
{
	size_t done = 0;

	while (done < total) {
		ssize_t got = rreadv(fd, iov, iovcnt);

		assert_true(got > 0);
		done += got;
		while (got > 0 && iovcnt) {
			size_t take = (size_t)got < iov->iov_len ? (size_t)got : iov->iov_len;

			iov->iov_base = (char *)iov->iov_base + take;
			iov->iov_len -= take;
			got -= take;
			if (!iov->iov_len) {
				iov++;
				iovcnt--;
			}
		}
	}
}

static void set_nonblocking(int fd, bool on)
{
	assert_int_equal(rfcntl(fd, F_SETFL, on ? O_NONBLOCK : 0), 0);
}

static uint8_t pattern_byte(size_t index)
{
	return (uint8_t)(index * 7 + index / 251);
}

static void test_connect_accept(void **state)
{
	struct sockaddr_in addr, peer, client_name;
	socklen_t len = sizeof(peer), name_len = sizeof(client_name);
	in_port_t port;
	int listener = listener_create(0, &port);
	int client, server;

	(void)state;
	addr = loopback_addr(port);
	client = rsocket(AF_INET, SOCK_STREAM, 0);
	assert_true(client >= 0);
	assert_int_equal(rconnect(client, (struct sockaddr *)&addr, sizeof(addr)), 0);
	server = raccept(listener, (struct sockaddr *)&peer, &len);
	assert_true(server >= 0);
	assert_int_equal(len, sizeof(peer));
	assert_int_equal(peer.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	assert_int_equal(rgetsockname(client, (struct sockaddr *)&client_name, &name_len), 0);
	assert_int_equal(peer.sin_port, client_name.sin_port);
	assert_int_equal(rclose(client), 0);
	assert_int_equal(rclose(server), 0);
	assert_int_equal(rclose(listener), 0);
}

static void test_send_recv(void **state)
{
	struct conn_pair pair = pair_connect(0, 0);
	char buf[32] = { 0 };

	(void)state;
	send_all(pair.client, "hello", 5);
	send_all(pair.client, " world", 6);
	recv_all(pair.server, buf, 11);
	assert_memory_equal(buf, "hello world", 11);

	/* Peeking leaves the data; short reads take a message in pieces. */
	send_all(pair.server, "0123456789", 10);
	assert_int_equal(rrecv(pair.client, buf, 4, MSG_PEEK | MSG_WAITALL), 4);
	assert_memory_equal(buf, "0123", 4);
	assert_int_equal(rrecv(pair.client, buf, 3, 0), 3);
	assert_memory_equal(buf, "012", 3);
	recv_all(pair.client, buf, 7);
	assert_memory_equal(buf, "3456789", 7);

	assert_int_equal(rwrite(pair.client, "xyz", 3), 3);
	assert_int_equal(rread(pair.server, buf, sizeof(buf)), 3);
	assert_memory_equal(buf, "xyz", 3);
	assert_int_equal(rsend(pair.client, buf, 0, 0), 0);
	pair_close(&pair);
}

static void test_readv_writev(void **state)
{
	struct conn_pair pair = pair_connect(0, 0);
	char a[3] = "abc", b[1], c[5] = "defgh";
	struct iovec out[3] = {
		{ .iov_base = a, .iov_len = sizeof(a) },
		{ .iov_base = b, .iov_len = 0 },
		{ .iov_base = c, .iov_len = sizeof(c) },
	};
	char first[6] = { 0 }, second[2] = { 0 };
	struct iovec in[2] = {
		{ .iov_base = first, .iov_len = sizeof(first) },
		{ .iov_base = second, .iov_len = sizeof(second) },
	};
	struct msghdr msg = { .msg_iov = in, .msg_iovlen = 2 };

	(void)state;
	assert_int_equal(rwritev(pair.client, out, 3), 8);
	readv_all(pair.server, in, 2, 8);
	assert_memory_equal(first, "abcdef", 6);
	assert_memory_equal(second, "gh", 2);

	/* rsendmsg/rrecvmsg carry the same gathers and scatters. */
	in[0] = (struct iovec){ .iov_base = first, .iov_len = sizeof(first) };
	in[1] = (struct iovec){ .iov_base = second, .iov_len = sizeof(second) };
	msg.msg_iov = out;
	msg.msg_iovlen = 3;
	assert_int_equal(rsendmsg(pair.server, &msg, 0), 8);
	msg.msg_iov = in;
	msg.msg_iovlen = 2;
	assert_int_equal(rrecvmsg(pair.client, &msg, MSG_WAITALL), 8);
	assert_memory_equal(first, "abcdef", 6);
	assert_memory_equal(second, "gh", 2);
	pair_close(&pair);
}

static void test_nonblocking_connect_rpoll(void **state)
{
	struct sockaddr_in addr;
	struct pollfd pfd;
	in_port_t port;
	int listener = listener_create(0, &port);
	int client, server, err = -1, ret;
	socklen_t len = sizeof(err);
	char buf[8];

	(void)state;
	addr = loopback_addr(port);
	client = rsocket(AF_INET, SOCK_STREAM, 0);
	assert_true(client >= 0);
	set_nonblocking(client, true);
	ret = rconnect(client, (struct sockaddr *)&addr, sizeof(addr));
	assert_true(ret == 0 || errno == EINPROGRESS);

	pfd = (struct pollfd){ .fd = client, .events = POLLOUT };
	assert_int_equal(rpoll(&pfd, 1, 5000), 1);
	assert_true(pfd.revents & POLLOUT);
	assert_int_equal(rgetsockopt(client, SOL_SOCKET, SO_ERROR, &err, &len), 0);
	assert_int_equal(err, 0);

	server = raccept(listener, NULL, NULL);
	assert_true(server >= 0);
	assert_int_equal(rrecv(client, buf, sizeof(buf), 0), -1);
	assert_true(errno == EAGAIN || errno == EWOULDBLOCK);

	send_all(server, "ping", 4);
	pfd = (struct pollfd){ .fd = client, .events = POLLIN };
	assert_int_equal(rpoll(&pfd, 1, 5000), 1);
	assert_true(pfd.revents & POLLIN);
	assert_int_equal(rrecv(client, buf, sizeof(buf), 0), 4);
	assert_memory_equal(buf, "ping", 4);

	/* Nothing more to read: rpoll times out. */
	pfd.revents = 0;
	assert_int_equal(rpoll(&pfd, 1, 50), 0);
	assert_int_equal(pfd.revents, 0);
	assert_int_equal(rclose(client), 0);
	assert_int_equal(rclose(server), 0);
	assert_int_equal(rclose(listener), 0);
}

static void test_nonblocking_connect_refused(void **state)
{
	struct sockaddr_in addr;
	struct pollfd pfd;
	in_port_t port;
	int listener = listener_create(0, &port);
	int client, ret, err = 0;
	socklen_t len = sizeof(err);

	(void)state;
	/* The port is free again once its listener is closed. */
	assert_int_equal(rclose(listener), 0);
	addr = loopback_addr(port);
	client = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_true(client >= 0);
	ret = rconnect(client, (struct sockaddr *)&addr, sizeof(addr));
	assert_int_equal(ret, -1);
	assert_true(errno == EINPROGRESS || errno == ECONNREFUSED);
	if (errno == EINPROGRESS) {
		pfd = (struct pollfd){ .fd = client, .events = POLLOUT };
		assert_int_equal(rpoll(&pfd, 1, 5000), 1);
		assert_true(pfd.revents & (POLLERR | POLLHUP));
		assert_int_equal(rgetsockopt(client, SOL_SOCKET, SO_ERROR, &err, &len), 0);
		assert_int_equal(err, ECONNREFUSED);
	}
	assert_int_equal(rsend(client, "x", 1, 0), -1);
	assert_int_equal(errno, ENOTCONN);
	assert_int_equal(rclose(client), 0);
}

static void test_rselect(void **state)
{
	struct conn_pair pair = pair_connect(0, 0);
	struct timeval zero = { 0 }, second = { .tv_sec = 1 };
	fd_set readable, writable;
	int nfds = (pair.client > pair.server ? pair.client : pair.server) + 1;
	char buf[4];

	(void)state;
	FD_ZERO(&readable);
	FD_SET(pair.server, &readable);
	assert_int_equal(rselect(nfds, &readable, NULL, NULL, &zero), 0);
	assert_false(FD_ISSET(pair.server, &readable));

	send_all(pair.client, "sel", 3);
	FD_ZERO(&readable);
	FD_SET(pair.server, &readable);
	FD_ZERO(&writable);
	FD_SET(pair.client, &writable);
	assert_int_equal(rselect(nfds, &readable, &writable, NULL, &second), 2);
	assert_true(FD_ISSET(pair.server, &readable));
	assert_true(FD_ISSET(pair.client, &writable));
	recv_all(pair.server, buf, 3);
	assert_memory_equal(buf, "sel", 3);
	pair_close(&pair);
}

static void test_rpoll_mixes_ordinary_fds(void **state)
{
	struct conn_pair pair = pair_connect(0, 0);
	struct pollfd pfd[2];
	int pipe_fds[2];

	(void)state;
	assert_int_equal(pipe(pipe_fds), 0);
	assert_int_equal(write(pipe_fds[1], "p", 1), 1);
	pfd[0] = (struct pollfd){ .fd = pair.server, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = pipe_fds[0], .events = POLLIN };
	assert_int_equal(rpoll(pfd, 2, 1000), 1);
	assert_int_equal(pfd[0].revents, 0);
	assert_true(pfd[1].revents & POLLIN);
	close(pipe_fds[0]);
	close(pipe_fds[1]);
	pair_close(&pair);
}

static void test_sol_rdma_options(void **state)
{
	int sizes[] = { RDMA_SQSIZE, RDMA_RQSIZE, RDMA_INLINE, RDMA_IOMAPSIZE };
	int defaults[] = { 384, 384, 64, 0 };
	uint8_t route[24], route_back[32];
	socklen_t len;
	int fd = rsocket(AF_INET, SOCK_STREAM, 0);
	struct conn_pair pair;
	int value;

	(void)state;
	assert_true(fd >= 0);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		len = sizeof(value);
		assert_int_equal(rgetsockopt(fd, SOL_RDMA, sizes[i], &value, &len), 0);
		assert_int_equal(value, defaults[i]);
		value = 1000 + (int)i;
		assert_int_equal(rsetsockopt(fd, SOL_RDMA, sizes[i], &value, sizeof(value)), 0);
		value = 0;
		len = sizeof(value);
		assert_int_equal(rgetsockopt(fd, SOL_RDMA, sizes[i], &value, &len), 0);
		assert_int_equal(value, 1000 + (int)i);
		assert_int_equal(len, sizeof(int));
	}

	memset(route, 0x5a, sizeof(route));
	assert_int_equal(rsetsockopt(fd, SOL_RDMA, RDMA_ROUTE, route, sizeof(route)), 0);
	len = sizeof(route_back);
	assert_int_equal(rgetsockopt(fd, SOL_RDMA, RDMA_ROUTE, route_back, &len), 0);
	assert_int_equal(len, sizeof(route));
	assert_memory_equal(route_back, route, sizeof(route));

	value = 1;
	assert_int_equal(rsetsockopt(fd, SOL_RDMA, RDMA_ROUTE + 1, &value, sizeof(value)), -1);
	assert_int_equal(errno, ENOPROTOOPT);
	len = sizeof(value);
	assert_int_equal(rgetsockopt(fd, SOL_RDMA, 77, &value, &len), -1);
	assert_int_equal(errno, ENOPROTOOPT);
	assert_int_equal(rsetsockopt(fd, SOL_RDMA, RDMA_SQSIZE, &value, 1), -1);
	assert_int_equal(errno, EINVAL);

	/* Other levels are the kernel's. */
	assert_int_equal(rsetsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &value, sizeof(value)), 0);
	value = 0;
	len = sizeof(value);
	assert_int_equal(rgetsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &value, &len), 0);
	assert_int_equal(value, 1);
	len = sizeof(value);
	assert_int_equal(rgetsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &value, &len), 0);
	assert_int_equal(value, 1);
	assert_int_equal(rclose(fd), 0);

	/* Accepted rsockets take the listener's sizes, which are fixed once connected. */
	pair = pair_connect(2, 3);
	len = sizeof(value);
	assert_int_equal(rgetsockopt(pair.server, SOL_RDMA, RDMA_IOMAPSIZE, &value, &len), 0);
	assert_int_equal(value, 3);
	len = sizeof(value);
	assert_int_equal(rgetsockopt(pair.server, IPPROTO_TCP, TCP_NODELAY, &value, &len), 0);
	assert_int_equal(value, 1);
	value = 8;
	assert_int_equal(rsetsockopt(pair.client, SOL_RDMA, RDMA_INLINE, &value, sizeof(value)),
			 -1);
	assert_int_equal(errno, EINVAL);
	len = sizeof(value);
	assert_int_equal(rgetsockopt(pair.client, SOL_RDMA, RDMA_IOMAPSIZE, &value, &len), 0);
	assert_int_equal(value, 2);
	pair_close(&pair);
}

static void test_rfcntl(void **state)
{
	struct conn_pair pair = pair_connect(0, 0);
	char buf[4];

	(void)state;
	assert_false(rfcntl(pair.server, F_GETFL) & O_NONBLOCK);
	set_nonblocking(pair.server, true);
	assert_true(rfcntl(pair.server, F_GETFL) & O_NONBLOCK);
	assert_int_equal(rrecv(pair.server, buf, sizeof(buf), 0), -1);
	assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
	set_nonblocking(pair.server, false);
	assert_false(rfcntl(pair.server, F_GETFL) & O_NONBLOCK);
	/* MSG_DONTWAIT makes one call nonblocking. */
	assert_int_equal(rrecv(pair.server, buf, sizeof(buf), MSG_DONTWAIT), -1);
	assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
	assert_int_equal(rfcntl(pair.server, F_GETFD), -1);
	assert_int_equal(errno, ENOTSUP);
	pair_close(&pair);
}

static void test_shutdown(void **state)
{
	struct conn_pair pair = pair_connect(0, 0);
	struct pollfd pfd = { .events = POLLIN };
	char buf[8];

	(void)state;
	send_all(pair.client, "bye", 3);
	assert_int_equal(rshutdown(pair.client, SHUT_WR), 0);
	recv_all(pair.server, buf, 3);
	assert_memory_equal(buf, "bye", 3);
	pfd.fd = pair.server;
	assert_int_equal(rpoll(&pfd, 1, 5000), 1);
	assert_true(pfd.revents & POLLIN);
	assert_int_equal(rrecv(pair.server, buf, sizeof(buf), 0), 0);

	/* The other direction still works. */
	send_all(pair.server, "ack", 3);
	recv_all(pair.client, buf, 3);
	assert_memory_equal(buf, "ack", 3);
	assert_int_equal(rsend(pair.client, "x", 1, 0), -1);
	assert_int_equal(errno, EPIPE);

	/* SHUT_RD: reads end at once, whatever the peer sends. */
	send_all(pair.server, "ignored", 7);
	assert_int_equal(rshutdown(pair.client, SHUT_RD), 0);
	assert_int_equal(rrecv(pair.client, buf, sizeof(buf), 0), 0);
	assert_int_equal(rshutdown(pair.client, 42), -1);
	assert_int_equal(errno, EINVAL);
	pair_close(&pair);
}

static void test_peer_and_sock_names(void **state)
{
	struct conn_pair pair = pair_connect(0, 0);
	struct sockaddr_in client_name, client_peer, server_name, server_peer;
	socklen_t len;

	(void)state;
	len = sizeof(client_name);
	assert_int_equal(rgetsockname(pair.client, (struct sockaddr *)&client_name, &len), 0);
	len = sizeof(client_peer);
	assert_int_equal(rgetpeername(pair.client, (struct sockaddr *)&client_peer, &len), 0);
	len = sizeof(server_name);
	assert_int_equal(rgetsockname(pair.server, (struct sockaddr *)&server_name, &len), 0);
	len = sizeof(server_peer);
	assert_int_equal(rgetpeername(pair.server, (struct sockaddr *)&server_peer, &len), 0);
	assert_int_equal(client_name.sin_port, server_peer.sin_port);
	assert_int_equal(server_name.sin_port, client_peer.sin_port);
	assert_int_equal(client_peer.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	assert_int_equal(server_peer.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	pair_close(&pair);
}

static void test_riowrite_places_data(void **state)
{
	struct conn_pair pair = pair_connect(1, 1);
	static uint8_t target[8192], source[8192];
	uint8_t zeros[4096] = { 0 };
	char buf[4];

	(void)state;
	memset(target, 0, sizeof(target));
	for (size_t i = 0; i < sizeof(source); i++)
		source[i] = pattern_byte(i);
	assert_int_equal(riomap(pair.server, target, sizeof(target), PROT_WRITE, 0, 0), 0);
	/* Anything sent after riomap() carries the mapping to the peer ahead of it. */
	send_all(pair.server, "go", 2);
	recv_all(pair.client, buf, 2);

	assert_int_equal(riowrite(pair.client, source, 4096, 4096, 0), 4096);
	send_all(pair.client, "done", 4);
	/* iowrite data is not stream data, and lands before what was sent after it. */
	recv_all(pair.server, buf, 4);
	assert_memory_equal(buf, "done", 4);
	assert_memory_equal(target + 4096, source, 4096);
	assert_memory_equal(target, zeros, sizeof(zeros));

	/* A write stops at the end of the mapping. */
	assert_int_equal(riowrite(pair.client, source, 8192, 4096, 0), 4096);
	assert_int_equal(riounmap(pair.server, target, sizeof(target)), 0);
	pair_close(&pair);
}

static void test_riowrite_lands_without_calls(void **state)
{
	struct conn_pair pair = pair_connect(1, 1);
	static uint8_t target[65536], source[65536];
	volatile uint8_t *marker = &target[sizeof(target) - 1];
	int64_t deadline;
	off_t offset;
	char buf[2];

	(void)state;
#ifdef __SANITIZE_THREAD__
	/* The race below is the point (riostream spins on memory an RDMA write fills, with
	 * nothing to order the two): ThreadSanitizer would rightly report it. */
	pair_close(&pair);
	skip();
#endif
	memset(target, 0, sizeof(target));
	for (size_t i = 0; i < sizeof(source); i++)
		source[i] = pattern_byte(i);
	source[sizeof(source) - 1] = 0xa5;
	offset = riomap(pair.server, target, sizeof(target), PROT_WRITE, 0, -1);
	assert_int_equal(offset, (uintptr_t)target);
	send_all(pair.server, "go", 2);
	recv_all(pair.client, buf, 2);

	assert_int_equal(riowrite(pair.client, source, sizeof(source), offset, 0), sizeof(source));
	/*
	 * As riostream does: no call on the receiving side, only its memory, written by the
	 * progress thread as an RDMA write would be (ThreadSanitizer calls this a race).
	 */
	deadline = now_ms() + SPIN_DEADLINE_MS;
	while (*marker != 0xa5 && now_ms() < deadline)
		;
	assert_int_equal(*marker, 0xa5);
	assert_memory_equal(target, source, sizeof(source));
	assert_int_equal(riounmap(pair.server, target, sizeof(target)), 0);
	pair_close(&pair);
}

static void test_riomap_limits(void **state)
{
	struct conn_pair pair = pair_connect(1, 0);
	struct conn_pair plain;
	static uint8_t target[4096], local[4096];
	char buf[2];
	int fd;

	(void)state;
	/* The server may map one buffer for the client; the client none for the server. */
	assert_int_equal(riomap(pair.client, target, sizeof(target), PROT_WRITE, 0, 0), -1);
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(riomap(pair.server, target, sizeof(target), PROT_WRITE, 0, 0), 0);
	assert_int_equal(riomap(pair.server, local, sizeof(local), PROT_WRITE, 0, 8192), -1);
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(riomap(pair.server, local, sizeof(local), PROT_READ, 0, 0), -1);
	assert_int_equal(errno, EINVAL);
	/* Local-only mappings need no slot on the peer. */
	assert_int_equal(riomap(pair.server, local, sizeof(local), PROT_NONE, 0, 8192), 8192);
	assert_int_equal(riounmap(pair.server, local, sizeof(local)), 0);
	assert_int_equal(riounmap(pair.server, local, sizeof(local)), -1);
	assert_int_equal(errno, EINVAL);

	send_all(pair.server, "go", 2);
	recv_all(pair.client, buf, 2);
	assert_int_equal(riowrite(pair.client, "abcd", 4, 0, 0), 4);
	assert_int_equal((ssize_t)riowrite(pair.client, "abcd", 4, 4096, 0), -1);
	assert_int_equal(errno, EINVAL);

	/* Once the peer hears of the unmapping, writes to it are refused. */
	assert_int_equal(riounmap(pair.server, target, sizeof(target)), 0);
	send_all(pair.server, "un", 2);
	recv_all(pair.client, buf, 2);
	assert_int_equal((ssize_t)riowrite(pair.client, "abcd", 4, 0, 0), -1);
	assert_int_equal(errno, EINVAL);
	pair_close(&pair);

	/* Without RDMA_IOMAPSIZE on the peer, no mapping at all (the rsockets default). */
	plain = pair_connect(0, 0);
	assert_int_equal(riomap(plain.server, target, sizeof(target), PROT_WRITE, 0, 0), -1);
	assert_int_equal(errno, ENOMEM);
	pair_close(&plain);

	fd = rsocket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(riomap(fd, target, sizeof(target), PROT_WRITE, 0, 0), -1);
	assert_int_equal(errno, ENOTCONN);
	assert_int_equal(rclose(fd), 0);
}

struct bulk_reader {
	int fd;
	size_t len;
	bool intact;
};

static void *bulk_reader_main(void *arg)
{
	struct bulk_reader *reader = arg;
	static uint8_t chunk[100000];
	size_t done = 0;

	reader->intact = true;
	while (done < reader->len) {
		ssize_t got = rrecv(reader->fd, chunk, sizeof(chunk), 0);

		if (got <= 0) {
			reader->intact = false;
			break;
		}
		for (ssize_t i = 0; i < got; i++)
			if (chunk[i] != pattern_byte(done + i))
				reader->intact = false;
		done += got;
	}
	return NULL;
}

/* Nonblocking sends taken in part by the kernel, read by a thread on the other side. */
static void bulk_transfer(struct conn_pair *pair, size_t len)
{
	static uint8_t source[1 << 20];
	struct bulk_reader reader = { .fd = pair->server, .len = len };
	size_t done = 0, filled_for = SIZE_MAX;
	pthread_t thread;

	set_nonblocking(pair->client, true);
	assert_int_equal(pthread_create(&thread, NULL, bulk_reader_main, &reader), 0);
	while (done < len) {
		size_t want = len - done < sizeof(source) ? len - done : sizeof(source);
		ssize_t sent;

		if (filled_for != done) {
			for (size_t i = 0; i < want; i++)
				source[i] = pattern_byte(done + i);
			filled_for = done;
		}
		sent = rsend(pair->client, source, want, 0);
		if (sent < 0) {
			struct pollfd pfd = { .fd = pair->client, .events = POLLOUT };

			assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
			assert_true(rpoll(&pfd, 1, 10000) == 1);
			continue;
		}
		done += sent;
	}
	pthread_join(thread, NULL);
	assert_true(reader.intact);
}

static void test_bulk_nonblocking_transfer(void **state)
{
	struct conn_pair pair = pair_connect(0, 0);

	(void)state;
	bulk_transfer(&pair, 24u << 20);
	pair_close(&pair);
}

/* A receiver with a mapping reads its stream through the progress thread's ring. */
static void test_bulk_transfer_to_mapped_receiver(void **state)
{
	struct conn_pair pair = pair_connect(1, 1);
	static uint8_t target[4096];
	char buf[2];

	(void)state;
	assert_int_equal(riomap(pair.server, target, sizeof(target), PROT_WRITE, 0, 0), 0);
	send_all(pair.server, "go", 2);
	recv_all(pair.client, buf, 2);
	bulk_transfer(&pair, 24u << 20);
	assert_int_equal(riounmap(pair.server, target, sizeof(target)), 0);
	pair_close(&pair);
}

/* A frame the kernel took only in part reaches the peer with no further call. */
static void test_backlog_flushed_without_calls(void **state)
{
	struct conn_pair pair = pair_connect(0, 0);
	static uint8_t source[4 << 20], sink[4 << 20];
	int small = 4096;
	ssize_t sent;

	(void)state;
	for (size_t i = 0; i < sizeof(source); i++)
		source[i] = pattern_byte(i);
	assert_int_equal(rsetsockopt(pair.client, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)),
			 0);
	assert_int_equal(rsetsockopt(pair.server, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)),
			 0);
	sent = rsend(pair.client, source, sizeof(source), MSG_DONTWAIT);
	assert_true(sent > 0);
	recv_all(pair.server, sink, sent);
	assert_memory_equal(sink, source, sent);
	pair_close(&pair);
}

static void *blocked_reader_main(void *arg)
{
	int *fd_and_result = arg;
	char byte;

	fd_and_result[1] = rrecv(fd_and_result[0], &byte, 1, 0) < 0 ? errno : 0;
	return NULL;
}

static void test_rclose(void **state)
{
	struct conn_pair pair = pair_connect(0, 0);
	int fd_and_result[2] = { pair.server, -1 };
	pthread_t thread;
	char buf[4];

	(void)state;
	/* A reader blocked in another thread comes back with EBADF. */
	assert_int_equal(pthread_create(&thread, NULL, blocked_reader_main, fd_and_result), 0);
	usleep(100 * 1000);
	assert_int_equal(rclose(pair.server), 0);
	pthread_join(thread, NULL);
	assert_int_equal(fd_and_result[1], EBADF);

	assert_int_equal(rclose(pair.server), -1);
	assert_int_equal(errno, EBADF);
	assert_int_equal(rsend(pair.server, "x", 1, 0), -1);
	assert_int_equal(errno, EBADF);
	assert_int_equal(rrecv(pair.client, buf, sizeof(buf), 0), 0);
	assert_int_equal(rclose(pair.client), 0);
}

static void test_not_an_rsocket(void **state)
{
	int pipe_fds[2];
	char byte;

	(void)state;
	assert_int_equal(pipe(pipe_fds), 0);
	assert_int_equal(rsend(pipe_fds[1], "x", 1, 0), -1);
	assert_int_equal(errno, EBADF);
	assert_int_equal(rrecv(pipe_fds[0], &byte, 1, 0), -1);
	assert_int_equal(errno, EBADF);
	close(pipe_fds[0]);
	close(pipe_fds[1]);
	assert_int_equal(rsocket(AF_UNIX, SOCK_STREAM, 0), -1);
	assert_int_equal(errno, ENOTSUP);
}

/* Both ends must speak rsockets: anything else is a protocol error, not data. */
static void test_peer_not_an_rsocket(void **state)
{
	struct sockaddr_in addr = loopback_addr(0);
	socklen_t len = sizeof(addr);
	int plain = socket(AF_INET, SOCK_STREAM, 0), peer, client;
	char buf[32];

	(void)state;
	assert_true(plain >= 0);
	assert_int_equal(bind(plain, (struct sockaddr *)&addr, sizeof(addr)), 0);
	assert_int_equal(listen(plain, 1), 0);
	assert_int_equal(getsockname(plain, (struct sockaddr *)&addr, &len), 0);
	client = rsocket(AF_INET, SOCK_STREAM, 0);
	assert_true(client >= 0);
	assert_int_equal(rconnect(client, (struct sockaddr *)&addr, sizeof(addr)), 0);
	peer = accept(plain, NULL, NULL);
	assert_true(peer >= 0);
	assert_int_equal(write(peer, "GET / HTTP/1.0\r\n\r\n", 18), 18);
	assert_int_equal(rrecv(client, buf, sizeof(buf), 0), -1);
	assert_int_equal(errno, EPROTO);
	assert_int_equal(rclose(client), 0);
	close(peer);
	close(plain);
}

static void test_datagram(void **state)
{
	struct sockaddr_in addr = loopback_addr(0), from;
	socklen_t len = sizeof(addr);
	int receiver = rsocket(AF_INET, SOCK_DGRAM, 0);
	int sender = rsocket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in sender_name;
	char buf[16];

	(void)state;
	assert_true(receiver >= 0 && sender >= 0);
	assert_int_equal(rbind(receiver, (struct sockaddr *)&addr, sizeof(addr)), 0);
	assert_int_equal(rgetsockname(receiver, (struct sockaddr *)&addr, &len), 0);
	assert_int_equal(rsendto(sender, "dgram", 5, 0, (struct sockaddr *)&addr, sizeof(addr)),
			 5);
	len = sizeof(from);
	assert_int_equal(rrecvfrom(receiver, buf, sizeof(buf), 0, (struct sockaddr *)&from, &len),
			 5);
	assert_memory_equal(buf, "dgram", 5);
	len = sizeof(sender_name);
	assert_int_equal(rgetsockname(sender, (struct sockaddr *)&sender_name, &len), 0);
	assert_int_equal(from.sin_port, sender_name.sin_port);
	assert_int_equal(rclose(receiver), 0);
	assert_int_equal(rclose(sender), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_connect_accept),
		cmocka_unit_test(test_send_recv),
		cmocka_unit_test(test_readv_writev),
		cmocka_unit_test(test_nonblocking_connect_rpoll),
		cmocka_unit_test(test_nonblocking_connect_refused),
		cmocka_unit_test(test_rselect),
		cmocka_unit_test(test_rpoll_mixes_ordinary_fds),
		cmocka_unit_test(test_sol_rdma_options),
		cmocka_unit_test(test_rfcntl),
		cmocka_unit_test(test_shutdown),
		cmocka_unit_test(test_peer_and_sock_names),
		cmocka_unit_test(test_riowrite_places_data),
		cmocka_unit_test(test_riowrite_lands_without_calls),
		cmocka_unit_test(test_riomap_limits),
		cmocka_unit_test(test_bulk_nonblocking_transfer),
		cmocka_unit_test(test_bulk_transfer_to_mapped_receiver),
		cmocka_unit_test(test_backlog_flushed_without_calls),
		cmocka_unit_test(test_rclose),
		cmocka_unit_test(test_not_an_rsocket),
		cmocka_unit_test(test_peer_not_an_rsocket),
		cmocka_unit_test(test_datagram),
	};

	alarm(TEST_TIMEOUT_S);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
