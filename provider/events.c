// SPDX-License-Identifier: MIT
/*
 * Events of a destroyed object, as the kernel and libibverbs handle them.
 *
 * The kernel discards the events of an object it destroys that are still queued unread
 * (ib_uverbs_release_ucq(), ib_uverbs_release_uevent()) and returns how many the application
 * did read ("events reported"); libibverbs' ibv_cmd_destroy_cq/qp/srq then waits until the
 * application has acknowledged that many. Here an event is a record in a pipe that
 * libibverbs reads itself: comp events on the channel's pipe (the CQ's ibv_cq pointer),
 * async events on the context's (element and type). So a destroy
 *
 *  1. knows how many records it wrote (raised) and how many the application took (taken:
 *     libibverbs calls the provider's cq_event/async_event hook after every read);
 *  2. if some may still be in the pipe (raised != taken), reads the whole pipe with a
 *     non-blocking read and writes back every record that is not this object's, so that
 *     ibv_get_cq_event can never return a pointer to a destroyed CQ; reported = raised less
 *     the records it removed;
 *  3. waits (sr_events_wait_acked) until the application acknowledged `reported` events.
 *
 * A reader that is inside ibv_get_*_event at that moment has taken its record, so it counts
 * as reported and the destroy waits for its acknowledgement, as with the kernel.
 *
 * The non-blocking read: the application's own description if it set O_NONBLOCK, else
 * preadv2(RWF_NOWAIT) where pipes support it (Linux 6.4), else a second description of the
 * pipe opened through /proc/self/fd (for the context's async pipe, once at open). If none is
 * possible a CQ's destroy fails with that errno, changing nothing; a QP or SRQ, which is gone
 * by then, keeps its memory until the context closes so that a record left behind names
 * valid memory (its handle is gone: every verb on it fails).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "softrdma.h"
#include "kernel-abi/comp_channel.h"

#define DRAIN_CHUNK	4096	/* PIPE_BUF: written back whole or not at all */

/* Whether pipes take RWF_NOWAIT here: 0 not known yet, 1 yes, -1 no. */
static _Atomic int pipes_nowait;

static bool pipe_nowait_works(void)
{
	int known = atomic_load(&pipes_nowait), fds[2];
	struct iovec iov;
	char c = 0;

	if (known)
		return known > 0;
	if (pipe2(fds, O_CLOEXEC))
		return false;	/* out of fds: try again next time */
	iov = (struct iovec){ .iov_base = &c, .iov_len = 1 };
	known = write(fds[1], &c, 1) == 1 && preadv2(fds[0], &iov, 1, -1, RWF_NOWAIT) == 1 ? 1 : -1;
	close(fds[0]);
	close(fds[1]);
	atomic_store(&pipes_nowait, known);
	return known > 0;
}

int sr_open_nowait(int fd)
{
	char path[40];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
}

/* How one drain reads its pipe without blocking. */
struct drain {
	const struct sr_event_pipe *pipe;
	int fd;			/* what is read */
	bool nowait;		/* fd is read with RWF_NOWAIT */
	bool opened;		/* fd was opened for this drain */
};

static int drain_begin(struct drain *d, const struct sr_event_pipe *p)
{
	int flags = fcntl(p->rd, F_GETFL);

	d->pipe = p;
	d->fd = p->rd;
	d->nowait = false;
	d->opened = false;
	if (flags >= 0 && (flags & O_NONBLOCK))
		return 0;
	if (p->nowait_fd >= 0) {
		d->fd = p->nowait_fd;
		return 0;
	}
	if (pipe_nowait_works()) {
		d->nowait = true;
		return 0;
	}
	d->fd = sr_open_nowait(p->rd);
	if (d->fd < 0)
		return errno;
	d->opened = true;
	return 0;
}

static void drain_end(struct drain *d)
{
	if (d->opened)
		close(d->fd);
}

static ssize_t drain_read(struct drain *d, void *buf, size_t len)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	return d->nowait ? preadv2(d->fd, &iov, 1, -1, RWF_NOWAIT) : read(d->fd, buf, len);
}

static bool async_record_is(const uint8_t *rec, uint64_t element, enum sr_obj_type type)
{
	struct uverbs_async_event ev;

	memcpy(&ev, rec, sizeof(ev));
	return ev.element == element && sr_async_event_type(ev.event_type) == type;
}

static bool record_is(const struct drain *d, const uint8_t *rec, uint64_t element,
		      enum sr_obj_type type)
{
	struct uverbs_comp_event ev;

	if (d->pipe->rec_size == sizeof(struct uverbs_async_event))
		return async_record_is(rec, element, type);
	memcpy(&ev, rec, sizeof(ev));
	return ev.cq_handle == element;
}

/*
 * Reads what the pipe holds now and writes back the records that are not the object's:
 * returns how many were. Records written meanwhile stay behind the ones read, so nothing
 * is read twice. Writing back only fails if the engine filled the pipe meanwhile: those
 * records are lost, as events are on a full pipe anyway.
 */
static uint32_t drain_remove(struct drain *d, uint64_t element, enum sr_obj_type type)
{
	const size_t rec = d->pipe->rec_size;
	uint8_t buf[DRAIN_CHUNK], keep[DRAIN_CHUNK];
	uint32_t removed = 0;
	int avail = 0;

	if (ioctl(d->pipe->rd, FIONREAD, &avail) || avail <= 0)
		return 0;
	avail -= avail % (int)rec;
	while (avail > 0) {
		ssize_t n = drain_read(d, buf, (size_t)avail < sizeof(buf) ? (size_t)avail : sizeof(buf));
		size_t kept = 0;

		if (n <= 0)
			break;	/* another reader took them */
		for (size_t off = 0; off + rec <= (size_t)n; off += rec) {
			if (record_is(d, buf + off, element, type)) {
				removed++;
			} else {
				memcpy(keep + kept, buf + off, rec);
				kept += rec;
			}
		}
		if (kept && write(d->pipe->wr, keep, kept) != (ssize_t)kept) {
			/* lost: see above */
		}
		avail -= (int)n;
	}
	return removed;
}

int sr_events_settle(struct sr_context *ctx, struct sr_settle *items, int n)
{
	struct drain drains[SR_SETTLE_MAX];
	int ret = 0, begun = 0;

	for (int i = 0; i < n; i++) {
		items[i].reported = items[i].raised;
		items[i].needs_drain = items[i].raised != items[i].taken;
	}
	for (; begun < n && !ret; begun++)
		if (items[begun].needs_drain)
			ret = drain_begin(&drains[begun], &items[begun].pipe);
	if (ret) {
		begun--;	/* the one that failed holds nothing */
		for (int i = 0; i < begun; i++)
			if (items[i].needs_drain)
				drain_end(&drains[i]);
		return ret;
	}
	pthread_mutex_lock(&ctx->drain_lock);
	for (int i = 0; i < n; i++)
		if (items[i].needs_drain)
			items[i].reported -= drain_remove(&drains[i], items[i].element,
							  items[i].type);
	pthread_mutex_unlock(&ctx->drain_lock);
	for (int i = 0; i < n; i++)
		if (items[i].needs_drain)
			drain_end(&drains[i]);
	return 0;
}

bool sr_async_settle_unmake(struct sr_context *ctx, struct sr_obj *o, uint64_t element,
			    const struct sr_event_count *async, pthread_mutex_t *mutex,
			    pthread_cond_t *cond, const uint32_t *acked)
{
	struct sr_settle ev = { .pipe = sr_async_pipe(ctx), .element = element, .type = o->type };
	bool keep;

	ev.raised = atomic_load(&async->raised);
	ev.taken = atomic_load(&async->taken);
	keep = sr_events_settle(ctx, &ev, 1) != 0;
	if (keep)
		ev.reported = ev.taken;	/* what was read; the rest may still come */
	sr_obj_unmake(ctx, o);
	sr_events_wait_acked(ctx, mutex, cond, acked, ev.reported, NULL, 0);
	return keep;
}

void sr_events_wait_acked(struct sr_context *ctx, pthread_mutex_t *mutex, pthread_cond_t *cond,
			  const uint32_t *acked, uint32_t reported, const uint32_t *acked2,
			  uint32_t reported2)
{
	/* ibv_close_device: the kernel's close waits for nobody. */
	if (ctx->closing)
		return;
	pthread_mutex_lock(mutex);
	/* "<", not libibverbs' "!=": an application that acknowledges too many does not hang. */
	while (*acked < reported || (acked2 && *acked2 < reported2))
		pthread_cond_wait(cond, mutex);
	pthread_mutex_unlock(mutex);
}

enum sr_obj_type sr_async_event_type(uint32_t event_type)
{
	switch (event_type) {
	case IBV_EVENT_CQ_ERR:
		return SR_OBJ_CQ;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return SR_OBJ_QP;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		return SR_OBJ_SRQ;
	default:
		return SR_OBJ_TYPES;	/* port and device events: no object */
	}
}

/*
 * libibverbs' ibv_get_async_event() calls this after each read. The element is valid memory:
 * its destroy removes its unread records and then waits for this event's acknowledgement.
 */
void sr_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	(void)context;
	switch (sr_async_event_type(event->event_type)) {
	case SR_OBJ_CQ:
		atomic_fetch_add(&to_sr_cq(event->element.cq)->async.taken, 1);
		break;
	case SR_OBJ_QP:
		atomic_fetch_add(&to_sr_qp(event->element.qp)->async.taken, 1);
		break;
	case SR_OBJ_SRQ:
		atomic_fetch_add(&to_sr_srq(event->element.srq)->async.taken, 1);
		break;
	default:
		break;
	}
}

struct sr_event_pipe sr_async_pipe(struct sr_context *ctx)
{
	return (struct sr_event_pipe){ .rd = ctx->vctx.context.async_fd,
				       .wr = ctx->async_notify_fd,
				       .nowait_fd = ctx->async_nowait_fd,
				       .rec_size = sizeof(struct uverbs_async_event) };
}

struct sr_event_pipe sr_comp_pipe(struct ibv_comp_channel *channel)
{
	const struct softrdma_comp_channel *ch = (const void *)channel;

	return (struct sr_event_pipe){ .rd = channel->fd, .wr = ch->notify_fd, .nowait_fd = -1,
				       .rec_size = sizeof(struct uverbs_comp_event) };
}
