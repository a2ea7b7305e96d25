// SPDX-License-Identifier: MIT
/*
 * libFuzzer: one UDP datagram, as a peer sends it, to the UD QP's port; the engine thread's
 * datagram reader (emu/ud.c) takes it in one engine_call_sync(). Delivery on loopback is
 * done when sendto() returns, so each input is finished when the call returns.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_env.h"

static void read_on_engine(void *arg)
{
	struct emu_engine *e = arg;

	/* Its first address is GID 0, ::ffff:127.0.0.1, where the datagram was sent. */
	ud_on_datagram(&e->listeners[0]->socks[0].udp_watch, IO_IN);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	struct fuzz_env *env = fuzz_env();
	uint8_t *bytes = fuzz_patch(env, env->ud, data, size);
	struct sockaddr_in to = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)(env->ud->qpn >> 8)),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	if (fd < 0)
		fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	fuzz_ready_ud(env);
	sendto(fd, bytes, size, 0, (struct sockaddr *)&to, sizeof(to));
	engine_call_sync(env->engine, read_on_engine, env->engine);
	free(bytes);
	fuzz_after(env);
	return 0;
}
