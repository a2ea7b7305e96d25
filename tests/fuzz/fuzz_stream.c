// SPDX-License-Identifier: MIT
/*
 * libFuzzer: an RC stream as a peer sends it, hello first, then frames, into the real
 * engine's stream reader and responder against registered memory (fuzz_env.h). The bytes
 * arrive through a socketpair whose far end is closed after them, and the engine thread
 * reads them in one engine_call_sync(), so each input is finished when the call returns.
 */
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_env.h"

struct feed {
	struct fuzz_env *env;
	int fd;
};

static void feed_on_engine(void *arg)
{
	struct feed *f = arg;
	struct conn *c = conn_accept(f->env->engine, f->fd, &f->env->peer);

	/* The reader stops after a batch of frames; the rest is read on the next turns. */
	for (int turn = 0; c && c->state != CONN_CLOSED && turn < 64; turn++)
		c->watch.ready(&c->watch, IO_IN);
	if (c && c->state != CONN_CLOSED) {
		struct emu_qp *qp = c->qp;

		if (qp)
			pthread_mutex_lock(&qp->lock);
		conn_close(c);
		if (qp)
			pthread_mutex_unlock(&qp->lock);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_env *env = fuzz_env();
	uint8_t *bytes = fuzz_patch(env, env->rc, data, size);
	struct feed f = { .env = env };
	int sv[2];

	fuzz_ready_rc(env);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv))
		abort();
	/* Inputs are kept below the socket's buffer (-max_len), so this takes all of it. */
	if (size && write(sv[1], bytes, size) != (ssize_t)size)
		abort();
	shutdown(sv[1], SHUT_WR);
	f.fd = sv[0];
	engine_call_sync(env->engine, feed_on_engine, &f);
	close(sv[1]);
	free(bytes);
	fuzz_after(env);
	return 0;
}
