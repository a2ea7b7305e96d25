// SPDX-License-Identifier: MIT
/* The epoll backend: level-triggered, one epoll_event per watch. */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "emu/io.h"

struct epoll_backend {
	struct io_backend base;
	int epfd;
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
}

static int epoll_wait_dispatch(struct io_backend *base, int timeout_ms)
{
	struct epoll_backend *b = (struct epoll_backend *)base;
	struct epoll_event evs[64];
	int n = epoll_wait(b->epfd, evs, 64, timeout_ms);

	if (n < 0)
		return errno == EINTR ? 0 : errno;
	/*
	 * A ready() call may remove a watch that a later event of this batch names; the
	 * engine defers freeing watches until wait() returns, so the pointer stays valid.
	 */
	for (int i = 0; i < n; i++) {
		struct io_watch *w = evs[i].data.ptr;
		uint32_t r = 0;

		if (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP))
			r |= IO_IN;
		if (evs[i].events & EPOLLOUT)
			r |= IO_OUT;
		if (evs[i].events & EPOLLERR)
			r |= IO_ERR | IO_IN;
		if (w->fd >= 0)
			w->ready(w, r);
	}
	return 0;
}

const struct io_backend_ops io_epoll_backend = {
	.name = "epoll",
	.create = epoll_create_backend,
	.destroy = epoll_destroy,
	.add = epoll_add,
	.update = epoll_update,
	.remove = epoll_remove,
	.wait = epoll_wait_dispatch,
};
