// SPDX-License-Identifier: MIT
#define _GNU_SOURCE	/* POLLRDHUP */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/io.h"

uint32_t io_revents(uint32_t poll_mask)
{
	uint32_t r = 0;

	/* A hang-up or an error is announced as readable: the reader finds out which. */
	if (poll_mask & (POLLIN | POLLRDHUP | POLLHUP))
		r |= IO_IN;
	if (poll_mask & POLLOUT)
		r |= IO_OUT;
	if (poll_mask & POLLERR)
		r |= IO_ERR | IO_IN;
	return r;
}

int io_backend_create(struct io_backend **out, bool app_progress)
{
	const char *want = getenv("SOFTRDMA_ENGINE");
	int ret;

	const char *preload = getenv("LD_PRELOAD");

	/*
	 * Valgrind (3.19) does not know io_uring_enter blocks and keeps its big lock across it:
	 * every other thread of the program would stop. Its preload library gives it away.
	 * A polling thread drives an epoll engine alone, an io_uring one only with the engine
	 * thread's help (io.h, app_alone): on a loaded machine that is a time slice per frame.
	 */
	if (!want && ((preload && strstr(preload, "vgpreload")) || app_progress))
		want = "epoll";
	if (want && !strcmp(want, "epoll"))
		return io_epoll_backend.create(out);
	ret = io_uring_backend.create(out);
	if (ret == 0 || (want && !strcmp(want, "uring")))
		return ret;
	/* EPERM/ENOSYS: seccomp or a kernel without io_uring. */
	return io_epoll_backend.create(out);
}
