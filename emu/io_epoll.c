// SPDX-License-Identifier: MIT
/* The epoll backend: level-triggered, one epoll_event per watch. */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "emu/io.h"

#define REMOVED_MAX	16

struct epoll_backend {
	struct io_backend base;
	int epfd;
	/*
	 * The watches removed while a batch is dispatched: a later event of the batch that
	 * names one is skipped (its memory may be freed, or already a new watch's).
	 * nremoved -1: more than fit, the rest of the batch is dropped.
	 */
	bool dispatching;
	int nremoved;
	struct io_watch *removed[REMOVED_MAX];
};

static int epoll_create_backend(struct io_backend **out)
{
	struct epoll_backend *b = calloc(1, sizeof(*b));

	if (!b)
		return ENOMEM;
	b->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (b->epfd < 0) {
		int err = errno;

		free(b);
		return err;
	}
	b->base.ops = &io_epoll_backend;
	*out = &b->base;
	return 0;
}

static void epoll_destroy(struct io_backend *base)
{
	struct epoll_backend *b = (struct epoll_backend *)base;

	close(b->epfd);
	free(b);
}

static int epoll_ctl_watch(struct io_backend *base, struct io_watch *w, int op)
{
	struct epoll_backend *b = (struct epoll_backend *)base;
	struct epoll_event ev = { .data.ptr = w };

	if (w->events & IO_IN)
		ev.events |= EPOLLIN | EPOLLRDHUP;
	if (w->events & IO_OUT)
		ev.events |= EPOLLOUT;
	return epoll_ctl(b->epfd, op, w->fd, &ev) ? errno : 0;
}

static int epoll_add(struct io_backend *b, struct io_watch *w)
{
	return epoll_ctl_watch(b, w, EPOLL_CTL_ADD);
}

static int epoll_update(struct io_backend *b, struct io_watch *w)
{
	return epoll_ctl_watch(b, w, EPOLL_CTL_MOD);
}

static void epoll_remove(struct io_backend *base, struct io_watch *w)
{
	struct epoll_backend *b = (struct epoll_backend *)base;

	epoll_ctl(b->epfd, EPOLL_CTL_DEL, w->fd, NULL);
	if (!b->dispatching || b->nremoved < 0)
		return;
	if (b->nremoved < REMOVED_MAX)
		b->removed[b->nremoved++] = w;
	else
		b->nremoved = -1;
}

static bool removed_in_batch(const struct epoll_backend *b, const struct io_watch *w)
{
	for (int i = 0; i < b->nremoved; i++)
		if (b->removed[i] == w)
			return true;
	return false;
}

/*
 * The engine thread blocks here without progress. What it fetched may be stale by the time
 * it holds progress (another thread's pass read the socket, or removed and freed the watch),
 * so it is thrown away: dispatch() asks again.
 */
static int epoll_wait_only(struct io_backend *base, int timeout_ms)
{
	struct epoll_backend *b = (struct epoll_backend *)base;
	struct epoll_event ev;

	if (epoll_wait(b->epfd, &ev, 1, timeout_ms) < 0 && errno != EINTR)
		return errno;
	return 0;
}

static int epoll_dispatch(struct io_backend *base, bool engine_thread)
{
	struct epoll_backend *b = (struct epoll_backend *)base;
	struct epoll_event evs[64];
	int n = epoll_wait(b->epfd, evs, 64, 0), done = 0;

	if (n < 0)
		return 0;
	/*
	 * A ready() call may remove, and free, a watch that a later event of this batch
	 * names (a stream's is freed after the pass, a handshake's at once): such events are
	 * skipped, and after more removals than are remembered the rest of the batch is
	 * dropped. Level-triggered, what is still ready is reported again by the next
	 * epoll_wait(). (Dropping the rest after any removal cost a batch per handshake:
	 * thousands of streams set up at once were read a few events a system call.)
	 */
	b->dispatching = true;
	b->nremoved = 0;
	for (int i = 0; i < n && b->nremoved >= 0; i++) {
		struct io_watch *w = evs[i].data.ptr;

		/* Left, it is still ready for the engine thread's wait. */
		if ((w->engine_only && !engine_thread) || removed_in_batch(b, w))
			continue;
		w->ready(w, io_revents(evs[i].events));
		done++;
	}
	b->dispatching = false;
	return done;
}

static void epoll_flush(struct io_backend *base)
{
	(void)base;	/* epoll_ctl() took effect when it was made */
}

static bool epoll_pending(struct io_backend *base)
{
	(void)base;
	return false;
}

const struct io_backend_ops io_epoll_backend = {
	.name = "epoll",
	.app_alone = true,
	.create = epoll_create_backend,
	.destroy = epoll_destroy,
	.add = epoll_add,
	.update = epoll_update,
	.remove = epoll_remove,
	.wait = epoll_wait_only,
	.dispatch = epoll_dispatch,
	.flush = epoll_flush,
	.pending = epoll_pending,
};
