// SPDX-License-Identifier: MIT
/*
 * libFuzzer: responses as a peer sends them (ACKs, NAKs, READ responses, atomic results)
 * into the real engine's requester side (emu/completer.c), for five work requests waiting
 * on them: READ 256 bytes, FETCH_ADD, WRITE, SEND, READ 64 bytes (PSNs 0 to 4). READ
 * responses and atomic results land in registered memory (fuzz_env.h). The stream is a
 * socketpair put in the place of the QP's own, on the engine thread.
 */
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_env.h"

static void post(struct fuzz_env *env)
{
	const struct mem_region *src = env->mr[1], *dst = env->mr[4];
	struct ibv_sge sge[5] = {
		{ .addr = dst->iova, .length = 256, .lkey = dst->lkey },
		{ .addr = dst->iova + 512, .length = 8, .lkey = dst->lkey },
		{ .addr = src->iova, .length = 64, .lkey = src->lkey },
		{ .addr = src->iova + 64, .length = 32, .lkey = src->lkey },
		{ .addr = dst->iova + 1024, .length = 64, .lkey = dst->lkey },
	};
	struct emu_send_wr wr[5] = {
		{ .opcode = IBV_WR_RDMA_READ, .rdma = { FUZZ_IOVA(1), 0x1234 } },
		{ .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, .atomic = { FUZZ_IOVA(1), 0x1234, 1, 0 } },
		{ .opcode = IBV_WR_RDMA_WRITE, .rdma = { FUZZ_IOVA(1), 0x1234 } },
		{ .opcode = IBV_WR_SEND },
		{ .opcode = IBV_WR_RDMA_READ, .rdma = { FUZZ_IOVA(1) + 256, 0x1234 } },
	};
	unsigned int bad;

	for (int i = 0; i < 5; i++) {
		wr[i].wr_id = (uint64_t)i;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].send_flags = IBV_SEND_SIGNALED;
	}
	if (emu_qp_post_send(env->rc, wr, 5, &bad))
		abort();
}

static void feed_on_engine(struct fuzz_env *env, int fd)
{
	struct emu_qp *qp = env->rc;
	struct conn *c;

	pthread_mutex_lock(&qp->lock);
	c = conn_adopt(env->engine, fd, &env->peer, &env->peer, qp, FUZZ_PEER_QPN);
	if (!c)
		abort();
	if (qp->streams.req)
		conn_close(qp->streams.req);	/* to port 1: refused anyway */
	/* Our stream, as if the QP had opened it and the peer had answered the hello. */
	c->initiator = true;
	c->state = CONN_OPEN;
	c->rx.hold = 0;
	qp->streams.req = c;
	qp->comp.timer_ns = 0;
	pthread_mutex_unlock(&qp->lock);
	post(env);
	for (int turn = 0; c->state != CONN_CLOSED && turn < 64; turn++)
		c->watch.ready(&c->watch, IO_IN);
	pthread_mutex_lock(&qp->lock);
	if (c->state != CONN_CLOSED)
		conn_close(c);
	pthread_mutex_unlock(&qp->lock);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_env *env = fuzz_env();

	fuzz_ready_requester(env);
	fuzz_feed_stream(env, data, size, feed_on_engine);
	return 0;
}
