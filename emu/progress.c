// SPDX-License-Identifier: MIT
/*
 * The engine's progress: the right to do what the engine thread does (dispatch ready
 * sockets, run calls, kicked streams and timers, free closed streams). One thread holds it
 * at a time: the engine thread after its wait, or an application thread whose
 * ibv_poll_cq found its CQ empty (emu_engine_progress()). On a busy machine the poller
 * then reads its own completions in, instead of waiting for the engine thread to be
 * scheduled for every frame.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu/internal.h"

void engine_progress_init(struct emu_engine *e)
{
	const char *on = getenv("SOFTRDMA_POLL_PROGRESS");
	const char *nap = getenv("SOFTRDMA_TEST_ENGINE_NAP_MS");
	const char *cork = getenv("SOFTRDMA_DOORBELL_BATCH");

	pthread_mutex_init(&e->progress, NULL);
	atomic_init(&e->progress_owner, (pthread_t)0);
	e->app_progress = !on || strcmp(on, "0");
	e->test_nap_ms = nap ? atoi(nap) : 0;
	e->tx_cork = !cork || strcmp(cork, "0");
}

bool engine_on_thread(struct emu_engine *e)
{
	/* Only this thread stores its own id there: relaxed is enough to recognise it. */
	return pthread_equal(atomic_load_explicit(&e->progress_owner, memory_order_relaxed),
			     pthread_self());
}

void engine_progress_take(struct emu_engine *e)
{
	pthread_mutex_lock(&e->progress);
	atomic_store_explicit(&e->progress_owner, pthread_self(), memory_order_relaxed);
}

void engine_progress_release(struct emu_engine *e)
{
	atomic_store_explicit(&e->progress_owner, (pthread_t)0, memory_order_relaxed);
	pthread_mutex_unlock(&e->progress);
}

/*
 * Test hook (tests/unit/test_poll_progress.c): the engine thread sleeps this long after
 * each wait before it takes progress, as if the scheduler did not run it; what arrives
 * meanwhile is read by the application's polls or not at all.
 */
void engine_test_nap(struct emu_engine *e)
{
	struct timespec ts;

	if (e->test_nap_ms <= 0)
		return;
	ts.tv_sec = e->test_nap_ms / 1000;
	ts.tv_nsec = (long)(e->test_nap_ms % 1000) * 1000000L;
	nanosleep(&ts, NULL);
}

/*
 * One non-blocking pass, when no other thread drives the engine: what is ready on the
 * sockets, then the streams it kicked, then the streams it closed (freed only now: an
 * event later in the pass may still name one). Calls and timers stay the engine thread's: they are
 * not on the path of an arriving frame, and the engine thread is woken for them.
 * Returns the watches dispatched (0: nothing was ready), or -1 when the engine thread
 * needs the CPU: the pass did not run (another thread drives), the backend cannot see an
 * arrival without it (io_uring), or calls or a due timer wait for it. Called with no lock
 * of emu/ held: progress is outermost (docs/locking.md).
 */
int emu_engine_progress(struct emu_engine *e)
{
	int saved_errno = errno, n;
	bool left;

	if (!e->app_progress || engine_on_thread(e) || pthread_mutex_trylock(&e->progress))
		return -1;
	atomic_store_explicit(&e->progress_owner, pthread_self(), memory_order_relaxed);
	if (e->stopping) {
		engine_progress_release(e);
		return -1;
	}
	n = e->io->ops->dispatch(e->io, false);
	engine_run_kicked(e);
	engine_free_closed(e);
	/* Re-arms only the engine thread submits, or streams still kicked: it must not sleep. */
	left = e->io->ops->pending(e->io) || e->kicked;
	if (left)
		engine_wake(e);
	engine_progress_release(e);
	errno = saved_errno;	/* the handlers' EAGAINs are not ibv_poll_cq's */
	if (n)
		return n;
	return left || !e->io->ops->app_alone || engine_has_work(e) ? -1 : 0;
}
