// SPDX-License-Identifier: MIT
/*
 * libFuzzer: an RC stream as a peer sends it, hello first, then frames, into the real
 * engine's stream reader and responder against registered memory (fuzz_env.h); or an XRC
 * one, to the XRC target, when the hello names that (its requests name SRQs by XRCETH). The hello's
 * claim is believed, as the peer's engine would confirm it (emu/handshake.c). The bytes
 * arrive through a socketpair whose far end is closed after them, and the engine thread
 * reads them in one engine_call_sync(), so each input is finished when the call returns.
 */
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_env.h"

static void feed_on_engine(struct fuzz_env *env, int fd)
{
	struct conn *c = handshake_fuzz_stream(env->engine, fd, &env->peer);

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

	fuzz_ready_rc(env);
	fuzz_ready_xrc(env);
	fuzz_feed_stream(env, data, size, feed_on_engine);
	return 0;
}
