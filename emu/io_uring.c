// SPDX-License-Identifier: MIT
/*
 * The io_uring backend: one one-shot POLL_ADD per armed watch, re-armed after each
 * dispatch (level semantics: a socket that is still ready completes again at once).
 * user_data is (generation << 32 | slot), so a completion that arrives after its watch
 * was updated or removed is recognised and dropped.
 *
 * Only the engine thread enters the kernel with submissions. A thread that submits is
 * registered with the ring: its polls run their task work on it, are cancelled when it
 * exits, and it is notified (EINTR) when the ring goes. An application thread's pass thus
 * harvests completions and prepares re-arms, and the engine thread submits them (flush).
 * The engine thread waits with io_uring_enter(GETEVENTS, EXT_ARG) alone, which touches no
 * ring memory in user space, so it may block while the progress holder harvests.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <liburing.h>

#include "emu/io.h"

#define RING_ENTRIES 256
#define SQ_RESERVE 64	/* SQEs an application's pass keeps free for one ready() call */

struct uring_slot {
	struct io_watch *w;
	uint32_t gen;
};

struct uring_backend {
	struct io_backend base;
	struct io_uring ring;
	struct uring_slot *slots;
	uint32_t nslots;
	uint32_t *free_slots;
	uint32_t nfree;
	bool app_pass;		/* an application thread dispatches: get_sqe() never submits */
};

static struct uring_backend *to_uring(struct io_backend *b)
{
	return (struct uring_backend *)b;
}

struct ring_setup {
	struct io_uring *ring;
	int ret;
};

static void *setup_ring(void *arg)
{
	struct ring_setup *s = arg;

	s->ret = io_uring_queue_init(RING_ENTRIES, s->ring, 0);
	return NULL;
}

/*
 * The ring is set up on a thread of its own, which then exits. The kernel registers the
 * task that creates a ring, and when the ring goes it notifies every registered task like
 * a signal: the application thread that opened the device (and later closed it) would see
 * its next blocking call fail with EINTR (libfabric's fi_getinfo opens and closes the
 * device, then fi_pingpong's read of its control socket failed).
 */
static int uring_create(struct io_backend **out)
{
	struct uring_backend *b = calloc(1, sizeof(*b));
	struct ring_setup setup;
	pthread_t t;
	int ret;

	if (!b)
		return ENOMEM;
	setup.ring = &b->ring;
	ret = pthread_create(&t, NULL, setup_ring, &setup);
	if (!ret) {
		pthread_join(t, NULL);
		ret = setup.ret < 0 ? -setup.ret : 0;
	}
	if (!ret && !(b->ring.features & IORING_FEAT_EXT_ARG)) {
		/* Before 5.11 a timed wait needs an SQE: only the progress holder may make one. */
		io_uring_queue_exit(&b->ring);
		ret = ENOSYS;
	}
	if (ret) {
		free(b);
		return ret;
	}
	b->base.ops = &io_uring_backend;
	*out = &b->base;
	return 0;
}

static void uring_destroy(struct io_backend *base)
{
	struct uring_backend *b = to_uring(base);

	io_uring_queue_exit(&b->ring);
	free(b->slots);
	free(b->free_slots);
	free(b);
}

static struct io_uring_sqe *get_sqe(struct uring_backend *b)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&b->ring);

	if (!sqe && !b->app_pass) {
		io_uring_submit(&b->ring);
		sqe = io_uring_get_sqe(&b->ring);
	}
	return sqe;
}

static uint64_t user_data(struct uring_backend *b, struct io_watch *w)
{
	return (uint64_t)b->slots[w->slot].gen << 32 | w->slot;
}

static int arm(struct uring_backend *b, struct io_watch *w)
{
	struct io_uring_sqe *sqe;
	unsigned int mask = POLLERR | POLLHUP;

	if (w->events & IO_IN)
		mask |= POLLIN | POLLRDHUP;
	if (w->events & IO_OUT)
		mask |= POLLOUT;
	sqe = get_sqe(b);
	if (!sqe)
		return EBUSY;
	io_uring_prep_poll_add(sqe, w->fd, mask);
	io_uring_sqe_set_data64(sqe, user_data(b, w));
	w->armed = 1;
	return 0;
}

static void disarm(struct uring_backend *b, struct io_watch *w)
{
	struct io_uring_sqe *sqe;
	uint64_t old = user_data(b, w);

	b->slots[w->slot].gen++;
	if (!w->armed)
		return;
	w->armed = 0;
	sqe = get_sqe(b);
	if (sqe) {
		io_uring_prep_poll_remove(sqe, old);
		/* The removal's own completion carries no watch. */
		io_uring_sqe_set_data64(sqe, UINT64_MAX);
	}
}

static int grow_slots(struct uring_backend *b)
{
	uint32_t n = b->nslots ? b->nslots * 2 : 64;
	struct uring_slot *slots = realloc(b->slots, n * sizeof(*slots));
	uint32_t *free_slots;

	if (!slots)
		return ENOMEM;
	b->slots = slots;
	free_slots = realloc(b->free_slots, n * sizeof(*free_slots));
	if (!free_slots)
		return ENOMEM;
	b->free_slots = free_slots;
	memset(&slots[b->nslots], 0, (n - b->nslots) * sizeof(*slots));
	for (uint32_t i = n; i > b->nslots; i--)
		b->free_slots[b->nfree++] = i - 1;
	b->nslots = n;
	return 0;
}

static int uring_add(struct io_backend *base, struct io_watch *w)
{
	struct uring_backend *b = to_uring(base);
	int ret;

	if (!b->nfree && (ret = grow_slots(b)))
		return ret;
	w->slot = b->free_slots[--b->nfree];
	b->slots[w->slot].w = w;
	w->armed = 0;
	return arm(b, w);
}

static int uring_update(struct io_backend *base, struct io_watch *w)
{
	struct uring_backend *b = to_uring(base);

	disarm(b, w);
	return arm(b, w);
}

static void uring_remove(struct io_backend *base, struct io_watch *w)
{
	struct uring_backend *b = to_uring(base);

	disarm(b, w);
	b->slots[w->slot].w = NULL;
	b->free_slots[b->nfree++] = w->slot;
}

static int uring_wait(struct io_backend *base, int timeout_ms)
{
	struct uring_backend *b = to_uring(base);
	struct __kernel_timespec ts = {
		.tv_sec = timeout_ms / 1000, .tv_nsec = (long long)(timeout_ms % 1000) * 1000000,
	};
	struct io_uring_getevents_arg arg = { .ts = timeout_ms < 0 ? 0 : (uintptr_t)&ts };
	int ret;

	/* Returns at once while completions wait in the ring, harvested or not yet. */
	ret = io_uring_enter2((unsigned int)b->ring.ring_fd, 0, 1,
			      IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG, (void *)&arg,
			      sizeof(arg));
	if (ret < 0 && ret != -ETIME && ret != -EINTR && ret != -EBUSY)
		return -ret;
	return 0;
}

static int uring_dispatch(struct io_backend *base, bool engine_thread)
{
	struct uring_backend *b = to_uring(base);
	struct io_uring_cqe *cqe;
	int n = 0;

	b->app_pass = !engine_thread;
	while (io_uring_peek_cqe(&b->ring, &cqe) == 0) {
		uint64_t data = io_uring_cqe_get_data64(cqe);
		uint32_t slot = (uint32_t)data;
		struct io_watch *w = NULL;
		int res;

		if (data != UINT64_MAX && slot < b->nslots && b->slots[slot].gen == data >> 32)
			w = b->slots[slot].w;
		/* Left in the ring, it keeps the engine thread's wait from sleeping. */
		if (w && w->engine_only && !engine_thread)
			break;
		/* Room for the re-arms ready() prepares, which only the engine thread submits. */
		if (!engine_thread && io_uring_sq_space_left(&b->ring) < SQ_RESERVE)
			break;
		res = cqe->res;
		io_uring_cqe_seen(&b->ring, cqe);
		if (!w)
			continue;
		w->armed = 0;
		w->ready(w, res < 0 ? IO_ERR | IO_IN : io_revents((uint32_t)res));
		n++;
		/* Still watched and not re-armed by ready() itself: watch it again. */
		if (b->slots[slot].w == w && !w->armed)
			arm(b, w);
	}
	b->app_pass = false;
	return n;
}

static void uring_flush(struct io_backend *base)
{
	struct uring_backend *b = to_uring(base);

	if (io_uring_sq_ready(&b->ring))
		io_uring_submit(&b->ring);
}

static bool uring_pending(struct io_backend *base)
{
	return io_uring_sq_ready(&to_uring(base)->ring) != 0;
}

const struct io_backend_ops io_uring_backend = {
	.name = "io_uring",
	.app_alone = false,
	.create = uring_create,
	.destroy = uring_destroy,
	.add = uring_add,
	.update = uring_update,
	.remove = uring_remove,
	.wait = uring_wait,
	.dispatch = uring_dispatch,
	.flush = uring_flush,
	.pending = uring_pending,
};
