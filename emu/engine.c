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

static pthread_mutex_t engine_global_lock = PTHREAD_MUTEX_INITIALIZER;
static struct emu_engine *the_engine;

uint64_t engine_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool engine_on_thread(struct emu_engine *e)
{
	return pthread_equal(pthread_self(), e->thread);
}

static void wake(struct emu_engine *e)
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
	wake(e);
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

void engine_watch(struct emu_engine *e, struct io_watch *w)
{
	e->io->ops->add(e->io, w);
}

void engine_unwatch(struct emu_engine *e, struct io_watch *w)
{
	e->io->ops->remove(e->io, w);
}

void engine_rewatch(struct emu_engine *e, struct io_watch *w)
{
	e->io->ops->update(e->io, w);
}

void engine_timer_changed(struct emu_engine *e, uint64_t deadline_ns)
{
	uint64_t cur = atomic_load(&e->next_timer_ns);

	while (deadline_ns < cur)
		if (atomic_compare_exchange_weak(&e->next_timer_ns, &cur, deadline_ns)) {
			if (!engine_on_thread(e))
				wake(e);
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

static void on_listener_ready(struct io_watch *w, uint32_t revents)
{
	struct emu_listener *l = container_of(w, struct emu_listener, watch);
	struct emu_engine *e = the_engine;

	(void)revents;
	for (int i = 0; i < 16; i++) {
		struct sockaddr_in6 peer;
		socklen_t len = sizeof(peer);
		int fd = accept4(l->fd, (struct sockaddr *)&peer, &len,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return;
		conn_accept(e, fd, &peer);
	}
}

/*
 * Runs due QP timers; returns the next deadline (UINT64_MAX: none). next_timer_ns is never
 * later than the earliest armed timer (arming only lowers it), so until it is due there is
 * nothing to run and the QP table is not walked: most wake-ups are for I/O, not timers.
 */
static uint64_t run_timers(struct emu_engine *e)
{
	uint64_t now = engine_now_ns(), next = UINT64_MAX;

	if (now < atomic_load(&e->next_timer_ns))
		return atomic_load(&e->next_timer_ns);
	atomic_store(&e->next_timer_ns, UINT64_MAX);
	pthread_mutex_lock(&e->lock);
	for (int i = 0; i < e->nlisteners; i++) {
		for (int j = 0; j < QPS_PER_LISTENER; j++) {
			struct emu_qp *qp = e->listeners[i]->qps[j];

			/* A QP leaves the table only on this thread (emu_qp_destroy): valid unlocked. */
			if (!qp || !qp->timer_ns)
				continue;
			pthread_mutex_unlock(&e->lock);
			pthread_mutex_lock(&qp->lock);
			if (qp->timer_ns && qp->timer_ns <= now) {
				qp->timer_ns = 0;
				completer_timer(qp);
			}
			if (qp->timer_ns && qp->timer_ns < next)
				next = qp->timer_ns;
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

static void run_kicked(struct emu_engine *e)
{
	struct conn *list = e->kicked, *c;

	e->kicked = NULL;
	while ((c = list)) {
		list = c->next_kicked;
		c->kicked = false;
		conn_process_staged(c);	/* skips a stream closed meanwhile */
	}
}

static void free_closed(struct emu_engine *e)
{
	struct conn *c;

	while ((c = e->closed)) {
		e->closed = c->next_closed;
		pthread_mutex_destroy(&c->tx_lock);
		free(c->stage);
		free(c);
	}
}

static void *engine_main(void *arg)
{
	struct emu_engine *e = arg;

	while (!e->stopping) {
		uint64_t next = run_timers(e);
		int timeout_ms = -1;

		if (next != UINT64_MAX) {
			uint64_t now = engine_now_ns();

			timeout_ms = next <= now ? 0 : (int)((next - now + 999999) / 1000000);
		}
		if (e->kicked)
			timeout_ms = 0;
		e->io->ops->wait(e->io, timeout_ms);
		run_calls(e);
		run_kicked(e);
		free_closed(e);
	}
	run_calls(e);
	return NULL;
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
	atomic_init(&e->next_timer_ns, UINT64_MAX);
	ret = fault_init();
	if (!ret)
		ret = mem_table_create(&e->mem, EMU_MAX_MR, EMU_MAX_MW);
	if (ret)
		goto err_free;
	ret = io_backend_create(&e->io);
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
	ret = e->io->ops->add(e->io, &e->wake_watch);
	if (ret)
		goto err_wake;
	raise_fd_limit();
	counters_attach();
	ret = pthread_create(&e->thread, NULL, engine_main, e);
	if (ret)
		goto err_wake;
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
	free(e);
	return ret;
}

int emu_engine_get(struct emu_engine **out)
{
	int ret = 0;

	pthread_mutex_lock(&engine_global_lock);
	if (the_engine)
		the_engine->refs++;
	else
		ret = engine_start(&the_engine);
	*out = the_engine;
	pthread_mutex_unlock(&engine_global_lock);
	return ret;
}

static void stop(void *arg)
{
	struct emu_engine *e = arg;

	e->stopping = true;
	for (int i = 0; i < e->nlisteners; i++) {
		e->io->ops->remove(e->io, &e->listeners[i]->watch);
		e->io->ops->remove(e->io, &e->listeners[i]->udp_watch);
		close(e->listeners[i]->fd);
		close(e->listeners[i]->udp_fd);
		free(e->listeners[i]);
	}
	e->nlisteners = 0;
}

void emu_engine_put(struct emu_engine *e)
{
	pthread_mutex_lock(&engine_global_lock);
	if (--e->refs > 0) {
		pthread_mutex_unlock(&engine_global_lock);
		return;
	}
	the_engine = NULL;
	pthread_mutex_unlock(&engine_global_lock);
	engine_call_sync(e, stop, e);
	pthread_join(e->thread, NULL);
	counters_detach();
	free_closed(e);
	e->io->ops->remove(e->io, &e->wake_watch);
	close(e->wake_fd);
	e->io->ops->destroy(e->io);
	mem_table_destroy(e->mem);
	free(e->listeners);
	pthread_cond_destroy(&e->call_done);
	pthread_mutex_destroy(&e->lock);
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

/*
 * A new listener: a TCP socket on an ephemeral port, all addresses, IPv4 and IPv6, and a UDP
 * socket on the same port number for UD QPs (a few tries, in case that UDP port is taken).
 */
static int listener_open(struct emu_listener **out)
{
	struct emu_listener *l = calloc(1, sizeof(*l));
	int err = EADDRINUSE;

	if (!l)
		return ENOMEM;
	for (int attempt = 0; attempt < 16 && err == EADDRINUSE; attempt++) {
		struct sockaddr_in6 sa = { .sin6_family = AF_INET6,
					   .sin6_addr = IN6ADDR_ANY_INIT };
		socklen_t len = sizeof(sa);
		int off = 0;

		l->fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (l->fd < 0) {
			err = errno;
			break;
		}
		setsockopt(l->fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
		if (bind(l->fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(l->fd, 1024) ||
		    getsockname(l->fd, (struct sockaddr *)&sa, &len)) {
			err = errno;
			close(l->fd);
			break;
		}
		l->port = ntohs(sa.sin6_port);
		l->udp_fd = ud_socket_open(l->port);
		if (l->udp_fd >= 0) {
			err = 0;
			break;
		}
		err = errno;
		close(l->fd);
	}
	if (err) {
		free(l);
		return err;
	}
	l->watch.fd = l->fd;
	l->watch.events = IO_IN;
	l->watch.ready = on_listener_ready;
	l->udp_watch.fd = l->udp_fd;
	l->udp_watch.events = IO_IN;
	l->udp_watch.ready = ud_on_datagram;
	*out = l;
	return 0;
}

struct emu_engine *the_engine_of_watch(struct io_watch *w)
{
	(void)w;
	return the_engine;
}

struct add_listener_call {
	struct emu_listener *l;
	int ret;
};

static void add_listener_on_engine(void *arg)
{
	struct add_listener_call *call = arg;
	struct emu_engine *e = the_engine;

	call->ret = e->io->ops->add(e->io, &call->l->watch);
	if (!call->ret) {
		call->ret = e->io->ops->add(e->io, &call->l->udp_watch);
		if (call->ret)
			e->io->ops->remove(e->io, &call->l->watch);
	}
}

/* Assigns the QP a QPN: a free index of a listener, opening a new listener when all are full. */
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
			if (!l->qps[j]) {
				l->qps[j] = qp;
				l->used++;
				qp->qpn = (uint32_t)l->port << 8 | (uint32_t)j;
				qp->udp_fd = l->udp_fd;
				pthread_mutex_unlock(&e->lock);
				return 0;
			}
	}
	pthread_mutex_unlock(&e->lock);

	ret = listener_open(&call.l);
	if (ret)
		return ret;
	engine_call_sync(e, add_listener_on_engine, &call);
	if (call.ret) {
		close(call.l->fd);
		close(call.l->udp_fd);
		free(call.l);
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
	qp->udp_fd = call.l->udp_fd;
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

struct mem_table *the_mem_table(void)
{
	return the_engine->mem;
}
