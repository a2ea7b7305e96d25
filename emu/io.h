/* SPDX-License-Identifier: MIT */
/*
 * The engine's I/O backend: tells the engine which sockets are ready. Two
 * implementations: epoll (the default, which a polling thread drives alone) and io_uring
 * (SOFTRDMA_ENGINE=uring, or with SOFTRDMA_POLL_PROGRESS=0; epoll where it is refused,
 * e.g. under Docker's default seccomp profile).
 *
 * The engine moves bytes itself with non-blocking recv/send once a socket is ready. That
 * keeps every placement into registered memory inside one short call that holds the MR's
 * reference, so deregistration never waits on a slow or hostile peer (emu/mr.h).
 *
 * Every call but wait() is made by the holder of the engine's progress (emu/internal.h):
 * the engine thread, or an application thread whose empty ibv_poll_cq drives the engine.
 * wait() is the engine thread's alone and is made without progress, so that it may block
 * while another thread dispatches: it only waits, and touches nothing dispatch() uses.
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
	/* Dispatched by the engine thread only (its wake-up): an application's pass leaves it,
	 * so that it still wakes the engine thread that sleeps in wait(). */
	bool engine_only;
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
	/*
	 * An application's dispatch sees every arrival without the engine thread: epoll. Not
	 * io_uring, whose poll completions are posted by the task work of the thread that
	 * armed them (the engine thread) and whose re-arms wait for its flush().
	 */
	bool app_alone;
	int (*create)(struct io_backend **out);
	void (*destroy)(struct io_backend *b);
	int (*add)(struct io_backend *b, struct io_watch *w);
	/* w->events changed */
	int (*update)(struct io_backend *b, struct io_watch *w);
	/* After this returns, w->ready is never called again and w may be freed. */
	void (*remove)(struct io_backend *b, struct io_watch *w);
	/* Engine thread, without progress: blocks up to timeout_ms (-1: forever) until a watch
	 * may be ready; calls nothing. */
	int (*wait)(struct io_backend *b, int timeout_ms);
	/*
	 * Calls ready() for each watch ready now, without blocking; the number called.
	 * engine_thread false (an application's pass): leaves engine_only watches, and leaves
	 * to flush() what only the engine thread may hand to the kernel.
	 */
	int (*dispatch)(struct io_backend *b, bool engine_thread);
	/* Engine thread, with progress: hands the kernel what add, update, remove and
	 * dispatch prepared (io_uring's SQEs; epoll has nothing to hand). */
	void (*flush)(struct io_backend *b);
	/* Something prepared waits for flush(): an application's pass must wake the engine. */
	bool (*pending)(struct io_backend *b);
};

struct io_backend {
	const struct io_backend_ops *ops;
};

extern const struct io_backend_ops io_uring_backend;
extern const struct io_backend_ops io_epoll_backend;

/* What a poll(2) mask (epoll's EPOLL* bits have the same values) means to a watch. */
uint32_t io_revents(uint32_t poll_mask);

/*
 * SOFTRDMA_ENGINE=uring|epoll forces one. Otherwise epoll when polls may drive the engine
 * (app_progress: SOFTRDMA_POLL_PROGRESS is not 0), since only there a polling thread needs
 * no engine thread; else io_uring, and epoll if it is refused or the program runs under
 * valgrind.
 */
int io_backend_create(struct io_backend **out, bool app_progress);

#endif
