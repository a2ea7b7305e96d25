// SPDX-License-Identifier: MIT
/*
 * Event channels. channel.fd is the read end of a pipe holding one byte per queued event,
 * so it is readable exactly when rdma_get_cm_event() has something: poll, epoll and
 * O_NONBLOCK work as on the real library. Bytes are written and taken only under ch->lock,
 * together with the event they stand for, so a reader never takes the byte of an event
 * that a destroyed id's cleanup takes away (it would have found nothing); readers wait in
 * poll(), outside the lock.
 *
 * Each id counts its events (cm.h): posted, then either dropped unseen or handed out
 * (reported) and acknowledged. rdma_destroy_id waits until every posted event is dropped
 * or acknowledged; rdma_migrate_id until those handed out so far are acknowledged, as
 * librdmacm does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm.h"

/*
 * The channels not destroyed yet. A thread that calls rdma_get_cm_event() on a channel
 * after its destroy (rping's CM thread loops back for the next event while main tears the
 * channel down) finds it missing here instead of reading freed memory.
 */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cm_channel *live_channels;

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
	/* Only the application decides whether its end blocks; ours never does. */
	fcntl(fds[1], F_SETFL, O_NONBLOCK);
	ch->channel.fd = fds[0];
	ch->notify_fd = fds[1];
	pthread_mutex_init(&ch->lock, NULL);
	pthread_mutex_lock(&live_lock);
	ch->live_next = live_channels;
	live_channels = ch;
	pthread_mutex_unlock(&live_lock);
	return &ch->channel;
}

static void live_remove(struct cm_channel *ch)
{
	struct cm_channel **p;

	pthread_mutex_lock(&live_lock);
	for (p = &live_channels; *p && *p != ch; p = &(*p)->live_next)
		;
	if (*p)
		*p = ch->live_next;
	pthread_mutex_unlock(&live_lock);
}

static void channel_free(struct cm_channel *ch)
{
	close(ch->channel.fd);
	pthread_mutex_destroy(&ch->lock);
	free(ch);
}

/*
 * A thread blocked in rdma_get_cm_event() on this channel (rping's CM thread, while main
 * returns) is woken by the write end's close and stays asleep, as it would in the real
 * library's read(); the channel's memory and read end go with the last such thread, so
 * none of them touches freed memory or a closed descriptor.
 */
EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct cm_channel *ch = to_cm_channel(channel);
	struct cm_event *ev;
	bool busy;

	if (!ch)
		return;
	live_remove(ch);
	pthread_mutex_lock(&ch->lock);
	while ((ev = ch->head)) {
		ch->head = ev->next;
		free(ev);
	}
	ch->tail = NULL;
	ch->destroyed = true;
	close(ch->notify_fd);
	busy = ch->readers > 0;
	pthread_mutex_unlock(&ch->lock);
	if (!busy)
		channel_free(ch);
}

/* ch->lock held: one more event is queued. A full pipe (65536 events nobody took) keeps
 * the fd readable; the event is counted instead. */
static void announce(struct cm_channel *ch)
{
	char one = 1;

	if (write(ch->notify_fd, &one, 1) != 1)
		ch->unannounced++;
}

/* ch->lock held: one event fewer. Its byte is there (the invariant in cm.h); the poll only
 * guards against an application that read the fd itself. */
static void unannounce(struct cm_channel *ch)
{
	struct pollfd pfd = { .fd = ch->channel.fd, .events = POLLIN };
	char byte;

	if (ch->unannounced) {
		ch->unannounced--;
		return;
	}
	if (poll(&pfd, 1, 0) == 1 && read(ch->channel.fd, &byte, 1) != 1) {
		/* nothing there after all: the count is already right */
	}
}

/* ch->lock held. */
static void enqueue(struct cm_channel *ch, struct cm_event *ev)
{
	ev->next = NULL;
	if (ch->tail)
		ch->tail->next = ev;
	else
		ch->head = ev;
	ch->tail = ev;
	announce(ch);
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

static void copy_private_data(struct cm_event *ev, const struct cm_msg *msg, uint8_t len)
{
	memcpy(ev->private_data, msg->private_data,
	       msg->private_data_len < len ? msg->private_data_len : len);
}

/* Service ID resolution: the event says how to reach the peer's UD QP. */
/* The address of a UD peer (or group) at dgid, from the id's source address. */
static void fill_ud_address(struct rdma_ud_param *ud, struct cm_id *id, const uint8_t dgid[16],
			    uint32_t qpn, uint32_t qkey)
{
	union ibv_gid sgid;
	int sgid_index = cm_gid_index_of(id->id.verbs, &id->id.route.addr.src_addr, &sgid);

	ud->ah_attr.is_global = 1;
	ud->ah_attr.port_num = 1;
	ud->ah_attr.grh.sgid_index = sgid_index < 0 ? 0 : (uint8_t)sgid_index;
	ud->ah_attr.grh.hop_limit = 64;
	memcpy(&ud->ah_attr.grh.dgid, dgid, 16);
	ud->qp_num = qpn;
	ud->qkey = qkey;
}

static void fill_ud_param(struct cm_event *ev, struct cm_id *id, const struct cm_msg *msg)
{
	struct rdma_ud_param *ud = &ev->event.param.ud;
	uint8_t len = padded_private_len(ev->event.event, true);

	copy_private_data(ev, msg, len);
	ud->private_data = len ? ev->private_data : NULL;
	ud->private_data_len = len;
	fill_ud_address(ud, id, msg->gid, msg->qpn, msg->psn);
}

static void fill_conn_param(struct cm_event *ev, const struct cm_msg *msg)
{
	struct rdma_conn_param *p = &ev->event.param.conn;
	uint8_t len = padded_private_len(ev->event.event, false);

	copy_private_data(ev, msg, len);
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

static struct cm_event *event_new(struct cm_id *id, enum rdma_cm_event_type type, int status)
{
	struct cm_event *ev = calloc(1, sizeof(*ev));

	if (!ev)
		return NULL;
	ev->event.id = &id->id;
	ev->event.event = type;
	ev->event.status = status;
	ev->owner = id;
	return ev;
}

/* id->lock held: ev goes on ch, counted as id's. */
static void event_post(struct cm_id *id, struct cm_channel *ch, struct cm_event *ev)
{
	id->events_posted++;
	pthread_mutex_lock(&ch->lock);
	enqueue(ch, ev);
	pthread_mutex_unlock(&ch->lock);
}

int cm_post_event(struct cm_id *id, enum rdma_cm_event_type type, int status,
		  const struct cm_msg *msg, struct cm_id *listen_id)
{
	/* A connection request is the listener's event, though it names the new id. */
	struct cm_channel *ch = to_cm_channel(listen_id ? listen_id->id.channel : id->id.channel);
	struct cm_event *ev = event_new(id, type, status);

	if (!ev)
		return ENOMEM;
	ev->event.listen_id = listen_id ? &listen_id->id : NULL;
	if (msg && cm_id_is_ud(id))
		fill_ud_param(ev, id, msg);
	else if (msg)
		fill_conn_param(ev, msg);
	event_post(id, ch, ev);
	return 0;
}

int cm_post_mcast_event(struct cm_id *id, enum rdma_cm_event_type type, int status,
			const union ibv_gid *mgid, uint32_t qkey, void *context)
{
	struct cm_event *ev = event_new(id, type, status);

	if (!ev)
		return ENOMEM;
	/* cma_make_mc_event(): the group's address, the multicast QPN, the join's context. */
	fill_ud_address(&ev->event.param.ud, id, mgid->raw, 0xffffff, qkey);
	ev->event.param.ud.private_data = context;
	event_post(id, to_cm_channel(id->id.channel), ev);
	return 0;
}

/* ch->lock held: the next queued event, with its byte; NULL if none. */
static struct cm_event *dequeue(struct cm_channel *ch)
{
	struct cm_event *ev = ch->head;

	if (ev) {
		ch->head = ev->next;
		if (!ch->head)
			ch->tail = NULL;
		unannounce(ch);
		atomic_fetch_add(&ev->owner->events_reported, 1);
	}
	return ev;
}

/* A reader whose channel was destroyed under it: it sleeps for good (see above). */
static _Noreturn void reader_orphaned(struct cm_channel *ch)
{
	bool last = --ch->readers == 0;

	pthread_mutex_unlock(&ch->lock);
	if (last)
		channel_free(ch);
	for (;;)
		pause();
}

/* A reader comes in: with ch->lock held and counted, unless ch was destroyed (false). */
static bool reader_enter(struct cm_channel *ch)
{
	struct cm_channel *live;

	pthread_mutex_lock(&live_lock);
	for (live = live_channels; live && live != ch; live = live->live_next)
		;
	if (live) {
		pthread_mutex_lock(&ch->lock);
		ch->readers++;
	}
	pthread_mutex_unlock(&live_lock);
	return live != NULL;
}

EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct cm_channel *ch = to_cm_channel(channel);
	struct cm_event *ev;
	struct pollfd pfd;

	if (!ch || !event) {
		errno = EINVAL;
		return -1;
	}
	if (!reader_enter(ch))
		for (;;)
			pause();	/* as a reader the destroy found inside (reader_orphaned) */
	pfd.fd = ch->channel.fd;
	pfd.events = POLLIN;
	while (!(ev = dequeue(ch))) {
		if (ch->destroyed)
			reader_orphaned(ch);
		if (fcntl(pfd.fd, F_GETFL) & O_NONBLOCK) {
			ch->readers--;
			pthread_mutex_unlock(&ch->lock);
			errno = EAGAIN;
			return -1;
		}
		/* Outside the lock: the byte of the next event, or the close of the write end. */
		pthread_mutex_unlock(&ch->lock);
		poll(&pfd, 1, -1);
		pthread_mutex_lock(&ch->lock);
	}
	ch->readers--;
	pthread_mutex_unlock(&ch->lock);
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
	id->events_acked++;
	pthread_cond_broadcast(&id->cond);
	pthread_mutex_unlock(&id->lock);
	free(ev);
	return 0;
}

/* ch->lock held: is ev one that goes with id (its own, or a request to listener id)? */
static bool event_of(const struct cm_event *ev, const struct cm_id *id)
{
	return ev->event.listen_id ? ev->event.listen_id == &id->id : ev->owner == id;
}

/* ch->lock held: unlinks the events of id, in order. */
static struct cm_event *unlink_events_of(struct cm_channel *ch, const struct cm_id *id)
{
	struct cm_event **pp, *ev, *taken = NULL, **tail = &taken;

	for (pp = &ch->head; (ev = *pp);) {
		if (event_of(ev, id)) {
			*pp = ev->next;
			ev->next = NULL;
			*tail = ev;
			tail = &ev->next;
			unannounce(ch);
			continue;
		}
		pp = &ev->next;
	}
	ch->tail = NULL;
	for (ev = ch->head; ev; ev = ev->next)
		ch->tail = ev;
	return taken;
}

void cm_channel_take_events_of(struct cm_channel *ch, struct cm_id *id,
			       struct cm_event **requests)
{
	struct cm_event *ev, *next;
	unsigned int own = 0;

	*requests = NULL;
	pthread_mutex_lock(&ch->lock);
	ev = unlink_events_of(ch, id);
	pthread_mutex_unlock(&ch->lock);
	for (; ev; ev = next) {
		next = ev->next;
		if (ev->owner != id) {
			ev->next = *requests;	/* its new id goes with it */
			*requests = ev;
			continue;
		}
		free(ev);
		own++;
	}
	pthread_mutex_lock(&id->lock);
	id->events_dropped += own;
	pthread_cond_broadcast(&id->cond);
	pthread_mutex_unlock(&id->lock);
}

void cm_channel_move_events(struct cm_channel *from, struct cm_channel *to, struct cm_id *id)
{
	struct cm_event *ev, *next;

	pthread_mutex_lock(&from->lock);
	ev = unlink_events_of(from, id);
	pthread_mutex_unlock(&from->lock);
	pthread_mutex_lock(&to->lock);
	for (; ev; ev = next) {
		next = ev->next;
		enqueue(to, ev);
	}
	pthread_mutex_unlock(&to->lock);
}

void cm_release_kept_event(struct cm_id *id)
{
	struct cm_event *ev = (struct cm_event *)id->id.event;

	if (!ev)
		return;
	id->id.event = NULL;
	id->events_acked++;	/* its owner is id: the event came from id's own channel */
	pthread_cond_broadcast(&id->cond);
	free(ev);
}

void cm_wait_acked(struct cm_id *id, unsigned int reported)
{
	while (id->events_acked < reported)
		pthread_cond_wait(&id->cond, &id->lock);
}

void cm_wait_events_done(struct cm_id *id)
{
	while (id->events_acked + id->events_dropped != id->events_posted)
		pthread_cond_wait(&id->cond, &id->lock);
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
	struct rdma_event_channel *ch;
	struct rdma_cm_event *e;
	int err;

	/* As librdmacm: the last event stays in id->event (its private data may be read)
	 * until the next synchronous call or rdma_destroy_id() acks it. */
	pthread_mutex_lock(&id->lock);
	cm_release_kept_event(id);
	ch = id->id.channel;
	pthread_mutex_unlock(&id->lock);
	if (rdma_get_cm_event(ch, &e))
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
