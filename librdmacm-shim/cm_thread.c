// SPDX-License-Identifier: MIT
/*
 * One thread per process owns the CM's sockets: it accepts on listeners and reads messages
 * from connections, then hands them to connect.c. Callbacks run under cm_lock, which
 * cm_thread_unwatch() also takes, so once it returns no callback can still see the id.
 * epoll carries a slot number, not a pointer: an id unwatched while its event was in
 * flight is simply not found.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cm.h"

static pthread_mutex_t cm_lock;
static pthread_once_t cm_once = PTHREAD_ONCE_INIT;
static int cm_epfd = -1;
static int cm_start_error;
static struct cm_id **slots;
static int nslots;

static void read_messages(struct cm_id *id)
{
	for (;;) {
		ssize_t n = recv(id->sock, id->rx + id->rx_len, sizeof(id->rx) - id->rx_len,
				 MSG_DONTWAIT);
		struct cm_msg msg;

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			cm_handle_conn_lost(id);
			return;
		}
		if (n < 0)
			return;
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
		if (id->watch_slot < 0)
			return;	/* the handler let go of the connection */
	}
}

static void *cm_thread_main(void *arg)
{
	struct epoll_event evs[32];

	(void)arg;
	for (;;) {
		int n = epoll_wait(cm_epfd, evs, 32, -1);

		if (n < 0 && errno != EINTR)
			return NULL;
		for (int i = 0; i < n; i++) {
			int slot = (int)evs[i].data.u32;
			struct cm_id *id;

			pthread_mutex_lock(&cm_lock);
			id = slot < nslots ? slots[slot] : NULL;
			if (id) {
				if (id->state == CM_LISTENING)
					cm_handle_accept(id);
				else
					read_messages(id);
			}
			pthread_mutex_unlock(&cm_lock);
		}
	}
	return NULL;
}

static void cm_thread_start(void)
{
	pthread_mutexattr_t attr;
	pthread_t thread;

	/* Handlers may let go of an id (unwatch) from inside a callback. */
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&cm_lock, &attr);
	cm_epfd = epoll_create1(EPOLL_CLOEXEC);
	if (cm_epfd < 0) {
		cm_start_error = errno;
		return;
	}
	cm_start_error = pthread_create(&thread, NULL, cm_thread_main, NULL);
	if (!cm_start_error)
		pthread_detach(thread);
}

int cm_thread_watch(struct cm_id *id)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int slot;

	pthread_once(&cm_once, cm_thread_start);
	if (cm_start_error)
		return cm_start_error;
	pthread_mutex_lock(&cm_lock);
	for (slot = 0; slot < nslots && slots[slot]; slot++)
		;
	if (slot == nslots) {
		struct cm_id **grown = realloc(slots, (size_t)(nslots + 16) * sizeof(*slots));

		if (!grown) {
			pthread_mutex_unlock(&cm_lock);
			return ENOMEM;
		}
		memset(grown + nslots, 0, 16 * sizeof(*slots));
		slots = grown;
		nslots += 16;
	}
	slots[slot] = id;
	id->watch_slot = slot;
	id->rx_len = 0;
	ev.data.u32 = (uint32_t)slot;
	if (epoll_ctl(cm_epfd, EPOLL_CTL_ADD, id->sock, &ev)) {
		int err = errno;

		slots[slot] = NULL;
		id->watch_slot = -1;
		pthread_mutex_unlock(&cm_lock);
		return err;
	}
	pthread_mutex_unlock(&cm_lock);
	return 0;
}

void cm_thread_unwatch(struct cm_id *id)
{
	if (cm_epfd < 0)
		return;
	pthread_mutex_lock(&cm_lock);
	if (id->watch_slot >= 0) {
		epoll_ctl(cm_epfd, EPOLL_CTL_DEL, id->sock, NULL);
		slots[id->watch_slot] = NULL;
		id->watch_slot = -1;
	}
	pthread_mutex_unlock(&cm_lock);
}

int cm_send_msg(int sock, const struct cm_msg *msg)
{
	const uint8_t *p = (const uint8_t *)msg;
	size_t left = sizeof(*msg);

	/* A few hundred bytes into an idle stream: the socket buffer always has room. */
	while (left) {
		ssize_t n = send(sock, p, left, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		p += n;
		left -= (size_t)n;
	}
	return 0;
}
