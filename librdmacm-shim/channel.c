// SPDX-License-Identifier: MIT
/*
 * Event channels. channel.fd is the read end of a pipe holding one byte per queued event,
 * so it is readable exactly when rdma_get_cm_event() has something: poll, epoll and
 * O_NONBLOCK work as on the real library.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm.h"

EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct cm_channel *ch = calloc(1, sizeof(*ch));
	int fds[2];

	if (!ch)
		return NULL;
	if (pipe2(fds, O_CLOEXEC)) {
		free(ch);
		return NULL;
	}
	ch->channel.fd = fds[0];
	ch->notify_fd = fds[1];
	pthread_mutex_init(&ch->lock, NULL);
	return &ch->channel;
}

EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct cm_channel *ch = to_cm_channel(channel);
	struct cm_event *ev;

	if (!ch)
		return;
	while ((ev = ch->head)) {
		ch->head = ev->next;
		free(ev);
	}
	close(ch->channel.fd);
	close(ch->notify_fd);
	pthread_mutex_destroy(&ch->lock);
	free(ch);
}

/* How much private data the peer's message type carries on the IB CM (zero-padded). */
static uint8_t padded_private_len(enum rdma_cm_event_type type, bool ud)
{
	if (ud)
		return type == RDMA_CM_EVENT_CONNECT_REQUEST ? CM_SIDR_REQ_PRIVATE_DATA :
		       type == RDMA_CM_EVENT_ESTABLISHED || type == RDMA_CM_EVENT_REJECTED ?
		       CM_SIDR_REP_PRIVATE_DATA : 0;
	switch (type) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		return CM_REQ_PRIVATE_DATA;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
	case RDMA_CM_EVENT_ESTABLISHED:
		return CM_REP_PRIVATE_DATA;
	case RDMA_CM_EVENT_REJECTED:
		return CM_REJ_PRIVATE_DATA;
	default:
		return 0;
	}
}

int cm_post_event(struct cm_id *id, enum rdma_cm_event_type type, int status,
		  const struct cm_msg *msg, struct cm_id *listen_id)
{
	/* A connection request is the listener's event, though it names the new id. */
	struct cm_channel *ch = to_cm_channel(listen_id ? listen_id->id.channel : id->id.channel);
	struct cm_event *ev = calloc(1, sizeof(*ev));
	struct rdma_conn_param *p;
	char one = 1;

	if (!ev)
		return ENOMEM;
	ev->event.id = &id->id;
	ev->event.listen_id = listen_id ? &listen_id->id : NULL;
	ev->event.event = type;
	ev->event.status = status;
	ev->owner = id;
	p = &ev->event.param.conn;
	if (msg && cm_id_is_ud(id)) {
		struct rdma_ud_param *ud = &ev->event.param.ud;
		uint8_t len = padded_private_len(type, true);
		union ibv_gid sgid;
		int sgid_index = cm_gid_index_of(id->id.verbs, &id->id.route.addr.src_addr, &sgid);

		/* Service ID resolution: the event says how to reach the peer's UD QP. */
		memcpy(ev->private_data, msg->private_data,
		       msg->private_data_len < len ? msg->private_data_len : len);
		ud->private_data = len ? ev->private_data : NULL;
		ud->private_data_len = len;
		ud->ah_attr.is_global = 1;
		ud->ah_attr.port_num = 1;
		ud->ah_attr.grh.sgid_index = sgid_index < 0 ? 0 : (uint8_t)sgid_index;
		ud->ah_attr.grh.hop_limit = 64;
		memcpy(&ud->ah_attr.grh.dgid, msg->gid, 16);
		ud->qp_num = msg->qpn;
		ud->qkey = msg->psn;
	} else if (msg) {
		uint8_t len = padded_private_len(type, false);

		memcpy(ev->private_data, msg->private_data,
		       msg->private_data_len < len ? msg->private_data_len : len);
		p->private_data = len ? ev->private_data : NULL;
		p->private_data_len = len;
		p->responder_resources = msg->responder_resources;
		p->initiator_depth = msg->initiator_depth;
		p->flow_control = msg->flow_control;
		p->retry_count = msg->retry_count;
		p->rnr_retry_count = msg->rnr_retry_count;
		p->srq = msg->srq;
		p->qp_num = msg->qpn;
	}
	pthread_mutex_lock(&id->lock);
	id->events_outstanding++;
	pthread_mutex_unlock(&id->lock);
	pthread_mutex_lock(&ch->lock);
	if (ch->tail)
		ch->tail->next = ev;
	else
		ch->head = ev;
	ch->tail = ev;
	pthread_mutex_unlock(&ch->lock);
	if (write(ch->notify_fd, &one, 1) != 1) {
		/* Only a full pipe: tens of thousands of events nobody took. They stay queued. */
	}
	return 0;
}

EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct cm_channel *ch = to_cm_channel(channel);
	struct cm_event *ev;
	char byte;
	ssize_t n;

	if (!ch || !event) {
		errno = EINVAL;
		return -1;
	}
	do
		n = read(ch->channel.fd, &byte, 1);
	while (n < 0 && errno == EINTR);
	if (n == 0) {
		/*
		 * The channel was destroyed under this blocked reader. The real library's read
		 * would just go on waiting, and applications (rping) rely on that thread staying
		 * quiet while they exit: so does this one.
		 */
		for (;;)
			pause();
	}
	if (n != 1)
		return -1;
	pthread_mutex_lock(&ch->lock);
	ev = ch->head;
	if (ev) {
		ch->head = ev->next;
		if (!ch->head)
			ch->tail = NULL;
	}
	pthread_mutex_unlock(&ch->lock);
	if (!ev) {
		errno = EAGAIN;	/* its event was dropped with a destroyed id */
		return -1;
	}
	*event = &ev->event;
	return 0;
}

EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	struct cm_event *ev = (struct cm_event *)event;
	struct cm_id *id;

	if (!ev) {
		errno = EINVAL;
		return -1;
	}
	id = ev->owner;
	pthread_mutex_lock(&id->lock);
	id->events_outstanding--;
	pthread_cond_broadcast(&id->cond);
	pthread_mutex_unlock(&id->lock);
	free(ev);
	return 0;
}

/* Takes back the byte that announced an event, without blocking. */
static void unannounce(struct cm_channel *ch)
{
	struct pollfd pfd = { .fd = ch->channel.fd, .events = POLLIN };
	char byte;

	if (poll(&pfd, 1, 0) == 1 && read(ch->channel.fd, &byte, 1) != 1) {
		/* Another thread took it first: it will find no event and say EAGAIN. */
	}
}

void cm_channel_drop_events_of(struct cm_channel *ch, struct cm_id *id)
{
	struct cm_event **pp, *ev;

	pthread_mutex_lock(&ch->lock);
	for (pp = &ch->head; (ev = *pp);) {
		if (ev->owner == id) {
			*pp = ev->next;
			free(ev);
			unannounce(ch);
			pthread_mutex_lock(&id->lock);
			id->events_outstanding--;
			pthread_mutex_unlock(&id->lock);
			continue;
		}
		pp = &ev->next;
	}
	ch->tail = NULL;
	for (ev = ch->head; ev; ev = ev->next)
		ch->tail = ev;
	pthread_mutex_unlock(&ch->lock);
}

/* Status an error event stands for, as the synchronous calls return it in errno. */
static int event_errno(const struct rdma_cm_event *e)
{
	switch (e->event) {
	case RDMA_CM_EVENT_REJECTED:
		return ECONNREFUSED;
	case RDMA_CM_EVENT_UNREACHABLE:
		return ENETUNREACH;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return e->status < 0 ? -e->status : EHOSTUNREACH;
	default:
		return e->status < 0 ? -e->status : EIO;
	}
}

int cm_wait_event(struct cm_id *id, enum rdma_cm_event_type expected)
{
	struct rdma_cm_event *e;
	int err;

	/* As librdmacm: the last event stays in id->event (its private data may be read)
	 * until the next synchronous call or rdma_destroy_id() acks it. */
	if (id->id.event) {
		rdma_ack_cm_event(id->id.event);
		id->id.event = NULL;
	}
	if (rdma_get_cm_event(id->id.channel, &e))
		return errno;
	if (e->event != expected) {
		err = event_errno(e);
		rdma_ack_cm_event(e);
		return err;
	}
	id->id.event = e;
	return 0;
}

EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
		[RDMA_CM_EVENT_ADDR_RESOLVED] = "RDMA_CM_EVENT_ADDR_RESOLVED",
		[RDMA_CM_EVENT_ADDR_ERROR] = "RDMA_CM_EVENT_ADDR_ERROR",
		[RDMA_CM_EVENT_ROUTE_RESOLVED] = "RDMA_CM_EVENT_ROUTE_RESOLVED",
		[RDMA_CM_EVENT_ROUTE_ERROR] = "RDMA_CM_EVENT_ROUTE_ERROR",
		[RDMA_CM_EVENT_CONNECT_REQUEST] = "RDMA_CM_EVENT_CONNECT_REQUEST",
		[RDMA_CM_EVENT_CONNECT_RESPONSE] = "RDMA_CM_EVENT_CONNECT_RESPONSE",
		[RDMA_CM_EVENT_CONNECT_ERROR] = "RDMA_CM_EVENT_CONNECT_ERROR",
		[RDMA_CM_EVENT_UNREACHABLE] = "RDMA_CM_EVENT_UNREACHABLE",
		[RDMA_CM_EVENT_REJECTED] = "RDMA_CM_EVENT_REJECTED",
		[RDMA_CM_EVENT_ESTABLISHED] = "RDMA_CM_EVENT_ESTABLISHED",
		[RDMA_CM_EVENT_DISCONNECTED] = "RDMA_CM_EVENT_DISCONNECTED",
		[RDMA_CM_EVENT_DEVICE_REMOVAL] = "RDMA_CM_EVENT_DEVICE_REMOVAL",
		[RDMA_CM_EVENT_MULTICAST_JOIN] = "RDMA_CM_EVENT_MULTICAST_JOIN",
		[RDMA_CM_EVENT_MULTICAST_ERROR] = "RDMA_CM_EVENT_MULTICAST_ERROR",
		[RDMA_CM_EVENT_ADDR_CHANGE] = "RDMA_CM_EVENT_ADDR_CHANGE",
		[RDMA_CM_EVENT_TIMEWAIT_EXIT] = "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};

	if ((unsigned int)event < sizeof(names) / sizeof(names[0]) && names[event])
		return names[event];
	return "UNKNOWN EVENT";
}
