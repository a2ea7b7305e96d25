// SPDX-License-Identifier: MIT
/*
 * The same-host path. When both ends of a stream are processes of one host, a request's
 * payload need not cross TCP: the requester names where it lies in its own memory, and the
 * responder copies it straight into the target with process_vm_readv(2), after the same
 * checks as ever (sink.c). One copy instead of two, and no socket buffer in between.
 *
 * The requester offers it in its hello (its pid, and the address and value of a random
 * cookie in its memory); the responder takes it only if it can read that cookie through
 * process_vm_readv (same pid namespace, ptrace permission, no seccomp filter in the way),
 * and then says so with a PEER_MEMORY frame. Anything less keeps the stream on TCP.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include "emu/internal.h"

static uint8_t cookie[16];
static pthread_once_t cookie_once = PTHREAD_ONCE_INIT;

static void cookie_init(void)
{
	if (getrandom(cookie, sizeof(cookie), 0) != sizeof(cookie))
		memset(cookie, 0, sizeof(cookie));	/* all-zero: never offered */
}

static bool path_enabled(void)
{
	const char *v = getenv("SOFTRDMA_SAME_HOST");

	return !v || strcmp(v, "0");
}

bool peer_mem_offer(struct wire_hello *h)
{
	static const uint8_t zero[16];

	pthread_once(&cookie_once, cookie_init);
	if (!path_enabled() || !memcmp(cookie, zero, sizeof(zero)))
		return false;
	h->pid = htonl((uint32_t)getpid());
	h->cookie_addr = htobe64((uint64_t)(uintptr_t)cookie);
	memcpy(h->cookie, cookie, sizeof(cookie));
	return true;
}

/* The cookie is still where the peer said, in process pm->pid: pm->pid is still the peer. */
static bool cookie_matches(const struct peer_mem *pm)
{
	uint8_t seen[sizeof(pm->cookie)];
	struct iovec local = { .iov_base = seen, .iov_len = sizeof(seen) };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)pm->cookie_addr,
				.iov_len = sizeof(seen) };

	return process_vm_readv(pm->pid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof(seen) &&
	       !memcmp(seen, pm->cookie, sizeof(seen));
}

bool peer_mem_accept(const struct wire_hello *h, struct peer_mem *pm)
{
	memset(pm, 0, sizeof(*pm));
	pm->pid = (pid_t)ntohl(h->pid);
	pm->cookie_addr = be64toh(h->cookie_addr);
	memcpy(pm->cookie, h->cookie, sizeof(pm->cookie));
	if (pm->pid <= 0 || !path_enabled() || !cookie_matches(pm)) {
		pm->pid = 0;
		return false;
	}
	return true;
}

bool peer_mem_still_there(const struct peer_mem *pm)
{
	return cookie_matches(pm);
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
