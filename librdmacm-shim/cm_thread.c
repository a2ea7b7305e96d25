// SPDX-License-Identifier: MIT
/*
 * One thread per process owns the CM's sockets. It accepts on listeners and holds each
 * accepted connection "half-open" (no id exists for it yet) until its REQ arrives, which
 * must be the first message and come within CM_REQ_TIMEOUT_MS; a listener keeps at most
 * CM_MAX_HALF_OPEN of them. It reads the messages of connected ids and hands them to
 * connect.c, flushes what send.c queued once a socket is writable, and rests a listener
 * for CM_ACCEPT_BACKOFF_MS when accept() hits the fd limit instead of spinning on it.
 *
 * Locks: cm.h's rule. A callback runs with cm_lock released; `running_for` names the id it
 * works for (a half-open connection's listener), so cm_thread_unwatch() can wait for it to
 * end. epoll carries a slot number, not a pointer: a socket unwatched while its event was
 * in flight is simply not found.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "cm.h"

struct half_open {
	int fd;
	int slot;			/* cm_lock; -1 until it is watched */
	struct cm_id *listener;
	int64_t deadline_ms;
	struct half_open *prev, *next;	/* cm_lock: all of them, oldest first */
	struct sockaddr_storage peer;
	uint8_t rx[sizeof(struct cm_msg)];	/* the CM thread only */
	size_t rx_len;
};

struct slot {				/* one of the two, or a free slot */
	struct cm_id *id;
	struct half_open *ho;
};

enum ho_verdict { HO_WAIT, HO_REQ, HO_CLOSE };

/* The CM thread's state: the variables marked cm_lock below (cm.h, THE LOCK RULE). */
static pthread_mutex_t cm_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cm_idle = PTHREAD_COND_INITIALIZER;	/* running_for went NULL */
static pthread_once_t cm_once = PTHREAD_ONCE_INIT;
static int cm_epfd = -1;		/* set once, before any other thread sees it */
static int cm_start_error;
static pthread_t cm_thread;
/* cm_lock */
static struct slot *slots;
static int nslots;
static struct half_open *ho_oldest, *ho_newest;
static int resting;			/* listeners with rearm_at_ms set */
static struct cm_id *running_for;
static struct half_open *running_ho;
static __thread bool on_cm_thread;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool cm_thread_is_self(void)
{
	return on_cm_thread;
}

/* cm_lock held: a free slot, the table grown if need be; -1 without memory. */
static int slot_alloc(void)
{
	struct slot *grown;
	int slot;

	for (slot = 0; slot < nslots; slot++)
		if (!slots[slot].id && !slots[slot].ho)
			return slot;
	grown = realloc(slots, (size_t)(nslots + 16) * sizeof(*slots));
	if (!grown)
		return -1;
	memset(grown + nslots, 0, 16 * sizeof(*slots));
	slots = grown;
	nslots += 16;
	return slot;
}

static int epoll_set(int op, int fd, int slot, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.u32 = (uint32_t)slot };

	return epoll_ctl(cm_epfd, op, fd, &ev) ? errno : 0;
}

/* cm_lock held. */
static void ho_remove(struct half_open *ho)
{
	if (ho->slot >= 0) {
		epoll_ctl(cm_epfd, EPOLL_CTL_DEL, ho->fd, NULL);
		slots[ho->slot].ho = NULL;
		ho->slot = -1;
	}
	if (ho->prev)
		ho->prev->next = ho->next;
	else
		ho_oldest = ho->next;
	if (ho->next)
		ho->next->prev = ho->prev;
	else
		ho_newest = ho->prev;
	ho->listener->half_open--;
}

static void ho_free(struct half_open *ho)
{
	close(ho->fd);
	free(ho);
}

/* cm_lock held: the listener's oldest half-open connection makes room for a new one. */
static void ho_evict_oldest_of(struct cm_id *listener)
{
	for (struct half_open *ho = ho_oldest; ho; ho = ho->next) {
		if (ho->listener == listener) {
			ho_remove(ho);
			ho_free(ho);
			return;
		}
	}
}

/* Starts waiting for the REQ of a connection accepted on listener (the CM thread). */
static void ho_add(struct half_open *ho)
{
	struct cm_id *listener = ho->listener;
	int slot;

	pthread_mutex_lock(&cm_lock);
	if (listener->watch_slot < 0 || (slot = slot_alloc()) < 0) {
		pthread_mutex_unlock(&cm_lock);
		ho_free(ho);	/* the listener is going away, or no memory */
		return;
	}
	if (listener->half_open >= CM_MAX_HALF_OPEN)
		ho_evict_oldest_of(listener);
	if (epoll_set(EPOLL_CTL_ADD, ho->fd, slot, EPOLLIN)) {
		pthread_mutex_unlock(&cm_lock);
		ho_free(ho);
		return;
	}
	slots[slot].ho = ho;
	ho->slot = slot;
	ho->deadline_ms = now_ms() + CM_REQ_TIMEOUT_MS;
	ho->prev = ho_newest;
	ho->next = NULL;
	if (ho_newest)
		ho_newest->next = ho;
	else
		ho_oldest = ho;
	ho_newest = ho;
	listener->half_open++;
	pthread_mutex_unlock(&cm_lock);
}

/* Reads what a half-open connection sent: it must be one REQ (then in *msg). */
static enum ho_verdict ho_read(struct half_open *ho, struct cm_msg *msg)
{
	ssize_t n;

	n = recv(ho->fd, ho->rx + ho->rx_len, sizeof(ho->rx) - ho->rx_len, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return HO_WAIT;
	if (n <= 0)
		return HO_CLOSE;
	ho->rx_len += (size_t)n;
	if (ho->rx_len < sizeof(ho->rx))
		return HO_WAIT;
	memcpy(msg, ho->rx, sizeof(*msg));
	if (ntohl(msg->magic) != CM_WIRE_MAGIC || ntohs(msg->version) != CM_WIRE_VERSION ||
	    msg->type != CM_MSG_REQ)
		return HO_CLOSE;	/* not a softrdma CM peer, or not a REQ first */
	return HO_REQ;
}

/* Its REQ made a half-open connection (no longer watched) an id, or it is closed. */
static void ho_take_req(struct half_open *ho, const struct cm_msg *msg)
{
	if (cm_handle_req(ho->listener, ho->fd, msg, &ho->peer))
		close(ho->fd);
	free(ho);
}

/* cm_lock held: accept() found the fd limit; the listener rests instead of spinning. */
static void rest_listener(struct cm_id *listener)
{
	if (listener->watch_slot < 0 || listener->rearm_at_ms)
		return;
	epoll_set(EPOLL_CTL_MOD, listener->sock, listener->watch_slot, 0);
	listener->rearm_at_ms = now_ms() + CM_ACCEPT_BACKOFF_MS;
	resting++;
}

/*
 * Did the connection reach us on one of the device's addresses? A listener on the
 * wildcard address takes TCP connections on every interface, but a RoCE CM hears only
 * what comes in through a port of the device: the others are closed unread.
 */
static bool on_device(int fd)
{
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	union ibv_gid gid;

	return !getsockname(fd, (struct sockaddr *)&local, &len) &&
	       cm_gid_index_of(cm_softrdma_context(), (struct sockaddr *)&local, &gid) >= 0;
}

/* A listener is readable: new connections become half-open (the CM thread, no lock). */
static void accept_all(struct cm_id *listener, int sock)
{
	for (int i = 0; i < CM_MAX_HALF_OPEN; i++) {
		struct half_open *ho;
		socklen_t len = sizeof(ho->peer);
		struct sockaddr_storage peer;
		struct cm_msg msg;
		int fd = accept4(sock, (struct sockaddr *)&peer, &len, SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				pthread_mutex_lock(&cm_lock);
				rest_listener(listener);
				pthread_mutex_unlock(&cm_lock);
				return;
			}
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			continue;	/* ECONNABORTED and the like: that one is gone */
		}
		ho = on_device(fd) ? calloc(1, sizeof(*ho)) : NULL;
		if (!ho) {
			close(fd);
			continue;
		}
		cm_sock_setup(fd);
		ho->fd = fd;
		ho->slot = -1;
		ho->listener = listener;
		ho->peer = peer;
		/* Its REQ is usually here already: then it never waits as half-open. */
		switch (ho_read(ho, &msg)) {
		case HO_WAIT:
			ho_add(ho);
			break;
		case HO_REQ:
			ho_take_req(ho, &msg);
			break;
		case HO_CLOSE:
			ho_free(ho);
			break;
		}
	}
}

/* A connected id's socket is ready (its lock held). */
static void read_messages(struct cm_id *id)
{
	for (int i = 0; i < CM_MSGS_PER_WAKEUP; i++) {
		ssize_t n = recv(id->sock, id->rx + id->rx_len, sizeof(id->rx) - id->rx_len,
				 MSG_DONTWAIT);
		struct cm_msg msg;

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return;
		if (n <= 0) {
			cm_handle_conn_lost(id);
			return;
		}
		id->rx_len += (size_t)n;
		if (id->rx_len < sizeof(id->rx))
			continue;
		id->rx_len = 0;
		memcpy(&msg, id->rx, sizeof(msg));
		if (ntohl(msg.magic) != CM_WIRE_MAGIC || ntohs(msg.version) != CM_WIRE_VERSION) {
			cm_handle_conn_lost(id);	/* not a softrdma CM peer */
			return;
		}
		cm_handle_msg(id, &msg);
		if (id->lost || id->cut_off)
			return;	/* the handler let go of the connection */
	}
}

static void id_ready(struct cm_id *id, uint32_t events)
{
	bool listening;
	int sock;

	pthread_mutex_lock(&id->lock);
	listening = id->state == CM_LISTENING;
	sock = id->sock;
	if (!listening && sock >= 0 && !id->lost && id->state != CM_DESTROYING) {
		if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && id->tx_count && !id->cut_off)
			cm_send_flush(id);
		if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) && !id->cut_off)
			read_messages(id);
		if (id->cut_off && !id->lost)
			cm_handle_conn_lost(id);
	}
	pthread_mutex_unlock(&id->lock);
	/* Outside the listener's lock: a REQ that is already there makes its id at once,
	 * under that lock. The socket stays open until cm_thread_unwatch() has returned. */
	if (listening)
		accept_all(id, sock);
}

static void dispatch(uint32_t slot, uint32_t events)
{
	struct half_open *ho;
	struct cm_id *id;
	enum ho_verdict verdict;
	struct cm_msg msg;
	bool gone;

	pthread_mutex_lock(&cm_lock);
	if (slot >= (uint32_t)nslots || (!slots[slot].id && !slots[slot].ho)) {
		pthread_mutex_unlock(&cm_lock);
		return;
	}
	id = slots[slot].id;
	ho = slots[slot].ho;
	running_for = id ? id : ho->listener;
	running_ho = ho;
	pthread_mutex_unlock(&cm_lock);
	if (id) {
		id_ready(id, events);
	} else {
		verdict = ho_read(ho, &msg);
		pthread_mutex_lock(&cm_lock);
		gone = verdict != HO_WAIT || ho->listener->watch_slot < 0;
		if (gone)
			ho_remove(ho);	/* before its socket is watched as an id's */
		pthread_mutex_unlock(&cm_lock);
		if (verdict == HO_REQ)
			ho_take_req(ho, &msg);	/* a listener going away answers REJ */
		else if (gone)
			ho_free(ho);
	}
	pthread_mutex_lock(&cm_lock);
	running_for = NULL;
	running_ho = NULL;
	pthread_cond_broadcast(&cm_idle);
	pthread_mutex_unlock(&cm_lock);
}

/* cm_lock held: expired REQ deadlines, rested listeners; returns the next wait (ms, -1). */
static int run_timers(void)
{
	int64_t now = now_ms(), next = INT64_MAX;

	while (ho_oldest && ho_oldest->deadline_ms <= now) {
		struct half_open *ho = ho_oldest;

		ho_remove(ho);
		ho_free(ho);
	}
	if (ho_oldest)
		next = ho_oldest->deadline_ms;
	for (int i = 0; resting && i < nslots; i++) {
		struct cm_id *id = slots[i].id;

		if (!id || !id->rearm_at_ms)
			continue;
		if (id->rearm_at_ms <= now) {
			epoll_set(EPOLL_CTL_MOD, id->sock, i, id->watch_events);
			id->rearm_at_ms = 0;
			resting--;
		} else if (id->rearm_at_ms < next) {
			next = id->rearm_at_ms;
		}
	}
	return next == INT64_MAX ? -1 : (int)(next - now);
}

static void *cm_thread_main(void *arg)
{
	struct epoll_event evs[32];

	(void)arg;
	on_cm_thread = true;
	for (;;) {
		int timeout, n;

		pthread_mutex_lock(&cm_lock);
		timeout = run_timers();
		pthread_mutex_unlock(&cm_lock);
		n = epoll_wait(cm_epfd, evs, 32, timeout);
		if (n < 0 && errno != EINTR)
			return NULL;
		for (int i = 0; i < n; i++)
			dispatch(evs[i].data.u32, evs[i].events);
	}
	return NULL;
}

static void cm_thread_start(void)
{
	int fd = epoll_create1(EPOLL_CLOEXEC);

	if (fd < 0) {
		cm_start_error = errno;
		return;
	}
	cm_epfd = fd;
	cm_start_error = pthread_create(&cm_thread, NULL, cm_thread_main, NULL);
	if (cm_start_error) {
		close(fd);
		cm_epfd = -1;
		return;
	}
	pthread_setname_np(cm_thread, "rdmacm");	/* how tests and ps find it */
	pthread_detach(cm_thread);
}

int cm_thread_watch(struct cm_id *id)
{
	int slot, err;

	pthread_once(&cm_once, cm_thread_start);
	if (cm_start_error)
		return cm_start_error;
	pthread_mutex_lock(&cm_lock);
	slot = slot_alloc();
	if (slot < 0) {
		pthread_mutex_unlock(&cm_lock);
		return ENOMEM;
	}
	id->rx_len = 0;
	id->watch_events = EPOLLIN;
	err = epoll_set(EPOLL_CTL_ADD, id->sock, slot, EPOLLIN);
	if (!err) {
		slots[slot].id = id;
		id->watch_slot = slot;
	}
	pthread_mutex_unlock(&cm_lock);
	return err;
}

void cm_thread_want_write(struct cm_id *id, bool want)
{
	uint32_t events = want ? EPOLLIN | EPOLLOUT : EPOLLIN;

	pthread_mutex_lock(&cm_lock);
	if (id->watch_slot >= 0 && id->watch_events != events) {
		id->watch_events = events;
		epoll_set(EPOLL_CTL_MOD, id->sock, id->watch_slot, events);
	}
	pthread_mutex_unlock(&cm_lock);
}

/* cm_lock held: the half-open connections of a listener that goes, but the running one. */
static struct half_open *take_half_open_of(struct cm_id *listener)
{
	struct half_open *taken = NULL, *ho, *next;

	for (ho = ho_oldest; ho; ho = next) {
		next = ho->next;
		if (ho->listener != listener || ho == running_ho)
			continue;
		ho_remove(ho);
		ho->next = taken;
		taken = ho;
	}
	return taken;
}

void cm_thread_unwatch(struct cm_id *id)
{
	struct half_open *gone = NULL;

	pthread_mutex_lock(&cm_lock);
	if (id->watch_slot >= 0) {
		epoll_ctl(cm_epfd, EPOLL_CTL_DEL, id->sock, NULL);
		slots[id->watch_slot].id = NULL;
		id->watch_slot = -1;
		if (id->rearm_at_ms) {
			id->rearm_at_ms = 0;
			resting--;
		}
		gone = take_half_open_of(id);
	}
	while (running_for == id && !cm_thread_is_self())
		pthread_cond_wait(&cm_idle, &cm_lock);
	pthread_mutex_unlock(&cm_lock);
	while (gone) {
		struct half_open *next = gone->next;

		ho_free(gone);
		gone = next;
	}
}
