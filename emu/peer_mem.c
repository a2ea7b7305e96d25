// SPDX-License-Identifier: MIT
/*
 * The same-host path. When both ends of an RC stream are processes of one host and one
 * user, a request's payload need not cross TCP: the requester names where it lies in its
 * own memory, and the responder copies it straight into the target with
 * process_vm_readv(2), after the same checks as ever (sink.c). One copy instead of two.
 *
 * Who the requester is comes from the kernel, never from the wire: once a stream is
 * verified, its responder asks the requester's engine over that engine's AF_UNIX socket
 * (whose name the verified engine gave) whether the stream is its (HS_LOCAL_ASK). The
 * kernel names the process behind the socket (SO_PEERCRED); only a process of our own user
 * is asked, and it answers only for a stream of its own and only to a process of its own
 * user (HS_LOCAL_ACCEPTED). A pidfd then watches that the process stays the same one: its
 * pid cannot be taken over by another while the pidfd is unreadable. Then the responder
 * says PEER_MEMORY on the stream, and the requester, which heard the question itself,
 * starts sending large payloads by reference. Anything less keeps the stream on TCP.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "emu/internal.h"

bool peer_mem_enabled(void)
{
	const char *v = getenv("SOFTRDMA_SAME_HOST");

	return !v || strcmp(v, "0");
}

/* Out of descriptors: stop accepting until the backoff ends, as a listener does. */
static void rest_local_socket(struct emu_engine *e)
{
	e->local_watch.events = 0;
	engine_rewatch(e, &e->local_watch);
	accept_rest_begin(e, &e->local_resume_ns);
}

uint64_t peer_mem_timer(struct emu_engine *e, uint64_t now)
{
	uint64_t next;

	if (accept_rest_over(&e->local_resume_ns, now, &next) && e->local_fd >= 0) {
		e->local_watch.events = IO_IN;
		engine_rewatch(e, &e->local_watch);
	}
	return next;
}

static void on_local_ready(struct io_watch *w, uint32_t revents)
{
	struct emu_engine *e = container_of(w, struct emu_engine, local_watch);

	(void)revents;
	for (int i = 0; i < 16; i++) {
		int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (accept_must_rest(errno))
				rest_local_socket(e);
			return;
		}
		handshake_local_accept(e, fd);
	}
}

/*
 * The engine's AF_UNIX socket in the abstract namespace, under a name nobody can guess. The
 * name travels in the clear in verdicts, so it says nothing about the process: no pid, only
 * 128 random bits (the kernel names the process to whoever connects, SO_PEERCRED).
 */
static int open_local_socket(struct emu_engine *e)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	uint64_t nonce[2];
	size_t len;
	int fd;

	if (getrandom(nonce, sizeof(nonce), 0) != sizeof(nonce))
		return -1;
	snprintf(e->local_name, sizeof(e->local_name), "softrdma-%016llx%016llx",
		 (unsigned long long)nonce[0], (unsigned long long)nonce[1]);
	len = strlen(e->local_name);
	memcpy(sa.sun_path + 1, e->local_name, len);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len)) || listen(fd, 256)) {
		close(fd);
		return -1;
	}
	e->local_watch = (struct io_watch){ .fd = fd, .events = IO_IN, .ready = on_local_ready };
	if (engine_watch(e, &e->local_watch)) {
		close(fd);
		return -1;
	}
	return fd;
}

const char *peer_mem_local_name(struct emu_engine *e)
{
	if (!peer_mem_enabled())
		return NULL;
	if (e->local_fd < 0 && !e->local_failed) {
		e->local_fd = open_local_socket(e);
		e->local_failed = e->local_fd < 0;
	}
	return e->local_fd >= 0 ? e->local_name : NULL;
}

void peer_mem_stop(struct emu_engine *e)
{
	if (e->local_fd < 0)
		return;
	engine_unwatch(e, &e->local_watch);
	close(e->local_fd);
	e->local_fd = -1;
}

/*
 * Tells the requester that its payloads may stay where they are. Under the QP's lock, as
 * every frame of a QP is sent: SOFTRDMA_FAULTS decides on each with that lock held (TSan
 * saw this one race the poster's).
 */
static void tell_peer_memory(struct conn *c)
{
	struct wire_packet pkt = { .opcode = OP_PEER_MEMORY, .qpn = c->hello_src_qpn };
	uint8_t hdr[4 + WIRE_MAX_HDR];
	struct emu_qp *qp = c->qp;

	pthread_mutex_lock(&qp->lock);
	conn_send_frame(c, hdr, wire_build(hdr, &pkt));
	pthread_mutex_unlock(&qp->lock);
}

static const char probe[16] = WIRE_PROBE;

uint64_t peer_mem_probe_addr(void)
{
	return (uint64_t)(uintptr_t)probe;
}

/* The process's start time (field 22 of /proc/PID/stat), 0 if it cannot be read. */
static uint64_t start_time(pid_t pid)
{
	char path[32], buf[1024], *p;
	unsigned long long t = 0;
	ssize_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	n = (ssize_t)fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	/* After the command's name, which may hold anything, ")" and fields 3 to 21. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
			 "%*d %*d %*d %*d %llu", &t) != 1)
		return 0;
	return t;
}

bool peer_mem_can_read(pid_t pid, uint64_t probe_addr)
{
	char seen[sizeof(probe)];
	struct iovec local = { .iov_base = seen, .iov_len = sizeof(seen) };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)probe_addr,
				.iov_len = sizeof(seen) };

	return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof(seen) &&
	       !memcmp(seen, probe, sizeof(seen));
}

int peer_mem_watch(struct peer_mem *pm, pid_t pid)
{
	*pm = (struct peer_mem){ .pid = pid, .pidfd = (int)syscall(SYS_pidfd_open, pid, 0) };
	/* Without pidfds (valgrind does not know them, nor do old kernels), /proc's start
	 * time tells a process from a later one with its pid. */
	if (pm->pidfd < 0 && !(pm->start_time = start_time(pid))) {
		pm->pid = 0;
		return ESRCH;
	}
	/* Still the process the kernel named: it has not exited. */
	if (!peer_mem_still_there(pm)) {
		peer_mem_release(pm);
		return ESRCH;
	}
	return 0;
}

void peer_mem_grant(struct conn *c, pid_t pid, uint64_t probe_addr)
{
	struct peer_mem pm;

	if (peer_mem_watch(&pm, pid))
		return;
	if (c->state == CONN_CLOSED || !peer_mem_can_read(pid, probe_addr)) {
		peer_mem_release(&pm);
		return;
	}
	c->peer_mem = pm;
	tell_peer_memory(c);
}

void peer_mem_release(struct peer_mem *pm)
{
	if (pm->pidfd >= 0)
		close(pm->pidfd);
	pm->pid = 0;
	pm->pidfd = -1;
}

bool peer_mem_still_there(const struct peer_mem *pm)
{
	struct pollfd p = { .fd = pm->pidfd, .events = POLLIN };

	if (pm->pidfd < 0)
		return start_time(pm->pid) == pm->start_time;
	/* A pidfd turns readable when its process exits. */
	return poll(&p, 1, 0) == 0;
}

unsigned int peer_mem_describe(uint8_t *desc, const struct iovec *iov, int niov)
{
	unsigned int len = 0;

	for (int i = 0; i < niov; i++) {
		uint64_t addr = htobe64((uint64_t)(uintptr_t)iov[i].iov_base);
		uint64_t n = htobe64((uint64_t)iov[i].iov_len);

		memcpy(desc + len, &addr, 8);
		memcpy(desc + len + 8, &n, 8);
		len += PEER_MEM_DESC_LEN;
	}
	return len;
}

int peer_mem_parse(const uint8_t *desc, uint64_t len, struct iovec *remote, int *nremote,
		   uint64_t *total)
{
	*nremote = 0;
	*total = 0;
	if (!len || len % PEER_MEM_DESC_LEN || len / PEER_MEM_DESC_LEN > EMU_MAX_SGE)
		return EPROTO;
	for (uint64_t at = 0; at < len; at += PEER_MEM_DESC_LEN) {
		uint64_t addr, n;

		memcpy(&addr, desc + at, 8);
		memcpy(&n, desc + at + 8, 8);
		n = be64toh(n);
		/* A message is at most 2^31 bytes (IBA); anything else is a broken peer. */
		if (n > EMU_MAX_MSG_SIZE || *total + n > EMU_MAX_MSG_SIZE)
			return EPROTO;
		remote[*nremote].iov_base = (void *)(uintptr_t)be64toh(addr);
		remote[(*nremote)++].iov_len = n;
		*total += n;
	}
	return 0;
}
