// SPDX-License-Identifier: MIT
/*
 * libFuzzer: one UDP datagram, as a peer sends it, to the UD QP's port and to a multicast
 * group the QP is attached to (239.255.P.P from the pid, on loopback, port 4791); the
 * engine thread's readers (emu/ud.c, emu/mcast.c) take both in one engine_call_sync().
 * Delivery on loopback is done when sendto() returns, so each input is finished when the
 * call returns. The group's reader delivers only a datagram naming QPN ff ff ff.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_env.h"

static uint8_t group[16] = { [10] = 0xff, 0xff, 239, 255 };	/* and the pid's two bytes */

static void read_on_engine(void *arg)
{
	struct emu_engine *e = arg;

	/* Its first address is GID 0, ::ffff:127.0.0.1, where the datagram was sent. */
	ud_on_datagram(&e->listeners[0]->socks[0].udp_watch, IO_IN);
	mcast_read_group(e, group);
}

/* The socket the inputs are sent from, the UD QP attached to the group on first use. */
static int sender(struct fuzz_env *env)
{
	struct in_addr lo = { htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	group[14] = (uint8_t)(getpid() >> 8);
	group[15] = (uint8_t)getpid();
	if (fd < 0 || setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &lo, sizeof(lo)) ||
	    emu_mcast_attach(env->ud, group))
		abort();
	return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	struct fuzz_env *env = fuzz_env();
	uint8_t *bytes = fuzz_patch(env, env->ud, data, size);
	struct sockaddr_in to = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)(env->ud->qpn >> 8)),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in to_group = { .sin_family = AF_INET, .sin_port = htons(4791) };

	if (fd < 0)
		fd = sender(env);
	memcpy(&to_group.sin_addr, group + 12, 4);
	fuzz_ready_ud(env);
	sendto(fd, bytes, size, 0, (struct sockaddr *)&to, sizeof(to));
	sendto(fd, bytes, size, 0, (struct sockaddr *)&to_group, sizeof(to_group));
	engine_call_sync(env->engine, read_on_engine, env->engine);
	free(bytes);
	fuzz_after(env);
	return 0;
}
