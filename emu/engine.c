// SPDX-License-Identifier: MIT
/*
 * One engine per process: a thread that receives (requests, responses, connections),
 * runs timers and closes streams; listening sockets whose ports make up the QPNs; and the
 * memory-key table. Posting threads send on their own; they call into the engine thread
 * only to start watching a socket.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "emu/counters.h"
#include "emu/internal.h"
#include "emu/limits.h"
#include "emu/log.h"
#include "emu/pcap.h"

/* The process's engine: emu_engine_get() starts it, the last emu_engine_put() stops it. */
static pthread_mutex_t process_engine_lock = PTHREAD_MUTEX_INITIALIZER;	/* process_engine, refs */
static struct emu_engine *process_engine;

uint64_t engine_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void engine_wake(struct emu_engine *e)
{
	uint64_t one = 1;

	if (write(e->wake_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is already non-zero, the engine will wake. */
	}
}

void engine_call_async(struct emu_engine *e, struct engine_call *call)
{
	pthread_mutex_lock(&e->lock);
	call->next = NULL;
	call->done = false;
	if (e->calls_tail)
		e->calls_tail->next = call;
	else
		e->calls = call;
	e->calls_tail = call;
	pthread_mutex_unlock(&e->lock);
	engine_wake(e);
}

void engine_call_sync(struct emu_engine *e, void (*fn)(void *), void *arg)
{
	struct engine_call call = { .fn = fn, .arg = arg };

	if (engine_on_thread(e)) {
		fn(arg);
		return;
	}
	engine_call_async(e, &call);
	pthread_mutex_lock(&e->lock);
	while (!call.done)
		pthread_cond_wait(&e->call_done, &e->lock);
	pthread_mutex_unlock(&e->lock);
}

bool engine_has_work(struct emu_engine *e)
{
	bool calls;

	if (atomic_load(&e->next_timer_ns) <= engine_now_ns())
		return true;
	pthread_mutex_lock(&e->lock);
	calls = e->calls != NULL;
	pthread_mutex_unlock(&e->lock);
	return calls;
}

static void run_calls(struct emu_engine *e)
{
	struct engine_call *call;

	pthread_mutex_lock(&e->lock);
	while ((call = e->calls)) {
		e->calls = call->next;
		if (!e->calls)
			e->calls_tail = NULL;
		pthread_mutex_unlock(&e->lock);
		call->fn(call->arg);
		pthread_mutex_lock(&e->lock);
		/* After this, a synchronous caller may free the call. */
		call->done = true;
	}
	pthread_cond_broadcast(&e->call_done);
	pthread_mutex_unlock(&e->lock);
}

int engine_watch(struct emu_engine *e, struct io_watch *w)
{
	int ret = e->io->ops->add(e->io, w);

	w->added = !ret;
	return ret;
}

void engine_unwatch(struct emu_engine *e, struct io_watch *w)
{
	if (!w->added)
		return;
	e->io->ops->remove(e->io, w);
	w->added = false;
}

void engine_rewatch(struct emu_engine *e, struct io_watch *w)
{
	if (w->added)
		e->io->ops->update(e->io, w);
}

void engine_timer_changed(struct emu_engine *e, uint64_t deadline_ns)
{
	uint64_t cur = atomic_load(&e->next_timer_ns);

	while (deadline_ns < cur)
		if (atomic_compare_exchange_weak(&e->next_timer_ns, &cur, deadline_ns)) {
			/* The engine thread computes its timeout before it waits; any other thread
			 * (an application's pass too) may find it asleep with a later one. */
			if (!pthread_equal(pthread_self(), e->thread))
				engine_wake(e);
			return;
		}
}

struct emu_qp *engine_find_qp(struct emu_engine *e, uint32_t qpn)
{
	struct emu_qp *qp = NULL;

	pthread_mutex_lock(&e->lock);
	for (int i = 0; i < e->nlisteners; i++)
		if (e->listeners[i]->port == qpn >> 8) {
			qp = e->listeners[i]->qps[qpn & 0xff];
			break;
		}
	pthread_mutex_unlock(&e->lock);
	return qp;
}

static void on_wake(struct io_watch *w, uint32_t revents)
{
	struct emu_engine *e = container_of(w, struct emu_engine, wake_watch);
	uint64_t v;

	(void)revents;
	if (read(e->wake_fd, &v, sizeof(v)) < 0) {
		/* Nothing to read: another wake was merged into an earlier one. */
	}
}

/*
 * Runs due QP timers; returns the next deadline (UINT64_MAX: none). next_timer_ns is never
 * later than the earliest armed timer (arming only lowers it), so until it is due there is
 * nothing to run and the QP table is not walked: most wake-ups are for I/O, not timers.
 */
static uint64_t run_timers(struct emu_engine *e)
{
	uint64_t now = engine_now_ns(), next, t;

	if (now < atomic_load(&e->next_timer_ns))
		return atomic_load(&e->next_timer_ns);
	atomic_store(&e->next_timer_ns, UINT64_MAX);
	next = handshake_timers(e, now);
	t = peer_mem_timer(e, now);
	if (t < next)
		next = t;
	pthread_mutex_lock(&e->lock);
	for (int i = 0; i < e->nlisteners; i++) {
		t = listener_timer(e->listeners[i], now);
		if (t < next)
			next = t;
		for (int j = 0; j < QPS_PER_LISTENER; j++) {
			struct emu_qp *qp = e->listeners[i]->qps[j];

			/* A QP leaves the table only on this thread (emu_qp_destroy): valid unlocked. */
			if (!qp || !qp->comp.timer_ns)
				continue;
			pthread_mutex_unlock(&e->lock);
			pthread_mutex_lock(&qp->lock);
			if (qp->comp.timer_ns && qp->comp.timer_ns <= now) {
				qp->comp.timer_ns = 0;
				completer_timer(qp);
			}
			if (qp->comp.timer_ns && qp->comp.timer_ns < next)
				next = qp->comp.timer_ns;
			pthread_mutex_unlock(&qp->lock);
			pthread_mutex_lock(&e->lock);
		}
	}
	pthread_mutex_unlock(&e->lock);
	engine_timer_changed(e, next);
	return atomic_load(&e->next_timer_ns);
}

void engine_kick(struct emu_engine *e, struct conn *c)
{
	if (c->kicked)
		return;
	c->kicked = true;
	c->next_kicked = e->kicked;
	e->kicked = c;
}

void engine_unkick(struct emu_engine *e, struct conn *c)
{
	struct conn **pp;

	if (!c->kicked)
		return;
	for (pp = &e->kicked; *pp; pp = &(*pp)->next_kicked)
		if (*pp == c) {
			*pp = c->next_kicked;
			break;
		}
	c->kicked = false;
}

void engine_run_kicked(struct emu_engine *e)
{
	struct conn *list = e->kicked, *c;

	e->kicked = NULL;
	while ((c = list)) {
		list = c->next_kicked;
		c->kicked = false;
		conn_process_staged(c);	/* skips a stream closed meanwhile */
	}
}

void engine_free_closed(struct emu_engine *e)
{
	struct conn *c;

	while ((c = e->closed)) {
		e->closed = c->next_closed;
		conn_free(c);
	}
}

/* With progress: runs due timers; how long the wait may last (-1: until woken). */
static int wait_timeout_ms(struct emu_engine *e)
{
	uint64_t next = run_timers(e), now;

	if (e->kicked)
		return 0;
	if (next == UINT64_MAX)
		return -1;
	now = engine_now_ns();
	return next <= now ? 0 : (int)((next - now + 999999) / 1000000);
}

/*
 * The engine thread waits without progress, so that an application's empty ibv_poll_cq
 * may drive the engine meanwhile (emu/progress.c), and takes it to dispatch what is ready.
 */
static void *engine_main(void *arg)
{
	struct emu_engine *e = arg;

	engine_progress_take(e);
	while (!e->stopping) {
		int timeout_ms = wait_timeout_ms(e);

		e->io->ops->flush(e->io);
		engine_progress_release(e);
		e->io->ops->wait(e->io, timeout_ms);
		engine_test_nap(e);
		engine_progress_take(e);
		e->io->ops->dispatch(e->io, true);
		run_calls(e);
		engine_run_kicked(e);
		engine_free_closed(e);
	}
	run_calls(e);
	engine_progress_release(e);
	return NULL;
}

/* What same-host requesters placed in our memory, counted as received (emu/direct.c). */
static void fold_direct_counters(void *arg)
{
	struct emu_engine *e = arg;

	direct_fold_counters(mem_table_direct(e->mem));
}

static void raise_fd_limit(void)
{
	struct rlimit rl;

	/* Two sockets per connected QP: thousands of QPs need more than the usual 1024. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int engine_start(struct emu_engine **out)
{
	struct emu_engine *e = calloc(1, sizeof(*e));
	int ret;

	if (!e)
		return ENOMEM;
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->call_done, NULL);
	engine_progress_init(e);
	atomic_init(&e->next_timer_ns, UINT64_MAX);
	e->local_fd = -1;
	e->naddrs = listener_addresses(&e->addrs, &e->ifindexes);
	if (e->naddrs <= 0) {
		ret = e->naddrs ? -e->naddrs : EADDRNOTAVAIL;	/* no address to listen on */
		free(e->addrs);		/* allocated (empty) when there was no address */
		free(e->ifindexes);
		free(e);
		return ret;
	}
	ret = fault_init();
	if (!ret)
		ret = mem_table_create(&e->mem, EMU_MAX_MR, EMU_MAX_MW);
	if (ret)
		goto err_free;
	ret = io_backend_create(&e->io, e->app_progress);
	if (ret)
		goto err_mem;
	e->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (e->wake_fd < 0) {
		ret = errno;
		goto err_io;
	}
	e->wake_watch.fd = e->wake_fd;
	e->wake_watch.events = IO_IN;
	e->wake_watch.ready = on_wake;
	e->wake_watch.engine_only = true;
	ret = e->io->ops->add(e->io, &e->wake_watch);
	if (ret)
		goto err_wake;
	raise_fd_limit();
	counters_attach();
	pcap_start();
	emu_log_init();
	ret = pthread_create(&e->thread, NULL, engine_main, e);
	if (ret)
		goto err_wake;
	counters_set_fold(fold_direct_counters, e);
	e->refs = 1;
	if (getenv("SOFTRDMA_VERBOSE"))
		fprintf(stderr, "softrdma: engine started (%s)\n", e->io->ops->name);
	*out = e;
	return 0;

err_wake:
	close(e->wake_fd);
err_io:
	e->io->ops->destroy(e->io);
err_mem:
	mem_table_destroy(e->mem);
err_free:
	free(e->addrs);
	free(e->ifindexes);
	free(e);
	return ret;
}

int emu_engine_get(struct emu_engine **out)
{
	int ret = 0;

	pthread_mutex_lock(&process_engine_lock);
	if (process_engine)
		process_engine->refs++;
	else
		ret = engine_start(&process_engine);
	*out = process_engine;
	pthread_mutex_unlock(&process_engine_lock);
	return ret;
}

static void stop(void *arg)
{
	struct emu_engine *e = arg;

	e->stopping = true;
	handshake_stop_all(e);
	peer_mem_stop(e);
	mcast_stop(e);
	for (int i = 0; i < e->nlisteners; i++) {
		listener_unwatch(e->listeners[i], e->listeners[i]->nsocks);
		listener_free(e->listeners[i]);
	}
	e->nlisteners = 0;
}

void emu_engine_put(struct emu_engine *e)
{
	pthread_mutex_lock(&process_engine_lock);
	if (--e->refs > 0) {
		pthread_mutex_unlock(&process_engine_lock);
		return;
	}
	process_engine = NULL;
	pthread_mutex_unlock(&process_engine_lock);
	engine_call_sync(e, stop, e);
	pthread_join(e->thread, NULL);
	counters_detach();
	counters_set_fold(NULL, NULL);
	pcap_flush();
	engine_free_closed(e);	/* the engine thread has ended: nothing else drives it now */
	e->io->ops->remove(e->io, &e->wake_watch);
	close(e->wake_fd);
	e->io->ops->destroy(e->io);
	mem_table_destroy(e->mem);
	xrc_free(e);
	free(e->listeners);
	free(e->addrs);
	free(e->ifindexes);
	pthread_cond_destroy(&e->call_done);
	pthread_mutex_destroy(&e->lock);
	pthread_mutex_destroy(&e->progress);
	free(e);
}

struct mem_table *emu_engine_mem(struct emu_engine *e)
{
	return e->mem;
}

const char *emu_engine_backend(struct emu_engine *e)
{
	return e->io->ops->name;
}

struct add_listener_call {
	struct emu_listener *l;
	int ret;
};

static void add_listener_on_engine(void *arg)
{
	struct add_listener_call *call = arg;

	call->ret = listener_watch(call->l);
}

/*
 * Assigns the QP a QPN: a free index of a listener, opening a new listener when all are full.
 * Port 65535's last index would be 0xffffff, the multicast QPN (IBTA 9.6.1.1), which no QP
 * may hold: a datagram naming it is for a group (emu/mcast.c), never for a QP.
 */
int engine_register_qp(struct emu_engine *e, struct emu_qp *qp)
{
	struct add_listener_call call;
	struct emu_listener **grown;
	int ret;

	pthread_mutex_lock(&e->lock);
	for (int i = 0; i < e->nlisteners; i++) {
		struct emu_listener *l = e->listeners[i];

		if (l->used == QPS_PER_LISTENER)
			continue;
		for (int j = 0; j < QPS_PER_LISTENER; j++)
			if (!l->qps[j] &&
			    ((uint32_t)l->port << 8 | (uint32_t)j) != EMU_MULTICAST_QPN) {
				l->qps[j] = qp;
				l->used++;
				qp->qpn = (uint32_t)l->port << 8 | (uint32_t)j;
				qp->listener = l;
				pthread_mutex_unlock(&e->lock);
				return 0;
			}
	}
	pthread_mutex_unlock(&e->lock);

	ret = listener_open(e, &call.l);
	if (ret)
		return ret;
	engine_call_sync(e, add_listener_on_engine, &call);
	if (call.ret) {
		listener_free(call.l);
		return call.ret;
	}
	pthread_mutex_lock(&e->lock);
	grown = realloc(e->listeners, (size_t)(e->nlisteners + 1) * sizeof(*grown));
	if (!grown) {
		pthread_mutex_unlock(&e->lock);
		return ENOMEM;	/* the listener stays open and unused until the engine stops */
	}
	e->listeners = grown;
	e->listeners[e->nlisteners++] = call.l;
	call.l->qps[0] = qp;
	call.l->used = 1;
	qp->qpn = (uint32_t)call.l->port << 8;
	qp->listener = call.l;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

void engine_unregister_qp(struct emu_engine *e, struct emu_qp *qp)
{
	pthread_mutex_lock(&e->lock);
	for (int i = 0; i < e->nlisteners; i++)
		if (e->listeners[i]->port == qp->qpn >> 8 &&
		    e->listeners[i]->qps[qp->qpn & 0xff] == qp) {
			e->listeners[i]->qps[qp->qpn & 0xff] = NULL;
			e->listeners[i]->used--;
		}
	pthread_mutex_unlock(&e->lock);
}

