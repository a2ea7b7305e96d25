// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/io.h"

int io_backend_create(struct io_backend **out)
{
	const char *want = getenv("SOFTRDMA_ENGINE");
	int ret;

	if (want && !strcmp(want, "epoll"))
		return io_epoll_backend.create(out);
	ret = io_uring_backend.create(out);
	if (ret == 0 || (want && !strcmp(want, "uring")))
		return ret;
	/* EPERM/ENOSYS: seccomp or a kernel without io_uring. */
	return io_epoll_backend.create(out);
}
