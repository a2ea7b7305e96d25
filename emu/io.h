/* SPDX-License-Identifier: MIT */
/*
 * The engine's I/O backend: tells the engine thread which sockets are ready. Two
 * implementations, io_uring (default) and epoll (where io_uring is refused, e.g. under
 * Docker's default seccomp profile, or when SOFTRDMA_ENGINE=epoll).
 *
 * The engine moves bytes itself with non-blocking recv/send once a socket is ready. That
 * keeps every placement into registered memory inside one short call that holds the MR's
 * reference, so deregistration never waits on a slow or hostile peer (emu/mr.h).
 * All calls are made by the engine thread only.
 */
#ifndef SOFTRDMA_EMU_IO_H
#define SOFTRDMA_EMU_IO_H

#include <stdbool.h>
#include <stdint.h>

#define IO_IN	0x1u
#define IO_OUT	0x4u	/* POLLOUT's value, so poll masks pass through unchanged */
#define IO_ERR	0x8u

struct io_watch {
	int fd;
	uint32_t events;	/* IO_IN | IO_OUT wanted */
	void (*ready)(struct io_watch *w, uint32_t revents);
	/* Between a successful add and its remove (engine.c keeps it, for both backends): a
	 * watch never added, or already removed, is left alone by remove and update. */
	bool added;
	/* backend-private */
	uint32_t slot;
	uint32_t armed;
};

struct io_backend;

struct io_backend_ops {
	const char *name;
	int (*create)(struct io_backend **out);
	void (*destroy)(struct io_backend *b);
	int (*add)(struct io_backend *b, struct io_watch *w);
	/* w->events changed */
	int (*update)(struct io_backend *b, struct io_watch *w);
	/* After this returns, w->ready is never called again and w may be freed. */
	void (*remove)(struct io_backend *b, struct io_watch *w);
	/* Waits up to timeout_ms (-1: forever), calls ready() for each ready watch. */
	int (*wait)(struct io_backend *b, int timeout_ms);
};

struct io_backend {
	const struct io_backend_ops *ops;
};

extern const struct io_backend_ops io_uring_backend;
extern const struct io_backend_ops io_epoll_backend;

/*
 * SOFTRDMA_ENGINE=uring|epoll forces one; otherwise io_uring, and epoll if it is refused or
 * the program runs under valgrind.
 */
int io_backend_create(struct io_backend **out);

#endif
