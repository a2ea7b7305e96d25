// SPDX-License-Identifier: MIT
/*
 * XRC domains, as the kernel's ib_uverbs_open_xrcd() keeps them, within one process (its
 * engine is the device; docs/semantics.md, "XRC"):
 *
 * - ibv_open_xrcd() with fd -1 makes a domain of its own. With a file, the file's inode names
 *   the domain: every open of the same inode in the process gets the same domain, so SRQs
 *   and target QPs made through either handle meet. Not there yet: O_CREAT makes it, else
 *   EINVAL; there already: O_EXCL is EINVAL. A descriptor that is not open is EBADF.
 * - The domain keeps a duplicate of the descriptor, as the kernel keeps the inode: while the
 *   domain lives its inode cannot be freed and reused for a file that would then name it.
 *   Nothing is ever opened by path, and the file is not read: a planted file names a
 *   domain of this process only.
 * - Each open is a handle (an object of the context, objects.c); ibv_close_xrcd is EBUSY
 *   while SRQs or target QPs made through that handle are there. The domain goes with its
 *   last handle.
 * - A target QP belongs to the domain (the kernel's xrcd->tgt_qps): ibv_open_qp() finds it
 *   there by number and adds a handle on it; every handle is equal, and the QP goes with
 *   the last one (__ib_destroy_shared_qp()). Its async events go to one handle at a time
 *   (the kernel sends them to every one): the oldest, and the next when that one goes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "softrdma.h"

struct sr_xrc_tgt {
	struct emu_qp *qp;
	uint32_t qpn;
	struct sr_xrc_domain *domain;
	struct sr_qp *handles;		/* oldest first; the first gets the events */
	struct sr_xrc_tgt *next;
};

struct sr_xrc_domain {
	uint32_t id;			/* the engine's name for it, never reused */
	int pin_fd;			/* the file's duplicate, or -1: a domain of its own */
	dev_t dev;
	ino_t ino;
	int opens;			/* its handles */
	struct sr_xrc_tgt *tgts;
	struct sr_xrc_domain *next;
};

/* The process's domains and their target QPs' handle lists; a leaf but for qp->lock (locking.md). */
static pthread_mutex_t xrc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sr_xrc_domain *xrc_domains;
static uint32_t xrc_next_id = 1;

/* Called with xrc_lock held: the domain fd names, made if oflags allow it. */
static int find_domain(const struct ibv_xrcd_init_attr *attr, struct sr_xrc_domain **out)
{
	struct sr_xrc_domain *d;
	struct stat st;

	if (attr->fd != -1) {
		if (fstat(attr->fd, &st))
			return EBADF;
		for (d = xrc_domains; d; d = d->next)
			if (d->pin_fd >= 0 && d->dev == st.st_dev && d->ino == st.st_ino)
				break;
		if (d && (attr->oflags & O_EXCL))
			return EINVAL;
		if (d) {
			d->opens++;
			*out = d;
			return 0;
		}
		if (!(attr->oflags & O_CREAT))
			return EINVAL;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return ENOMEM;
	d->pin_fd = -1;
	if (attr->fd != -1) {
		d->pin_fd = fcntl(attr->fd, F_DUPFD_CLOEXEC, 0);
		if (d->pin_fd < 0) {
			free(d);
			return errno == EBADF ? EBADF : ENOMEM;
		}
		d->dev = st.st_dev;
		d->ino = st.st_ino;
	}
	d->id = xrc_next_id++;
	d->opens = 1;
	d->next = xrc_domains;
	xrc_domains = d;
	*out = d;
	return 0;
}

/* Called with xrc_lock held. */
static void put_domain(struct sr_xrc_domain *d)
{
	struct sr_xrc_domain **p;

	if (--d->opens)
		return;
	for (p = &xrc_domains; *p != d; p = &(*p)->next)
		;
	*p = d->next;
	if (d->pin_fd >= 0)
		close(d->pin_fd);
	free(d);
}

/* ibv_cmd_open_xrcd()'s and the kernel's checks, then the domain. */
struct ibv_xrcd *sr_open_xrcd(struct ibv_context *context, struct ibv_xrcd_init_attr *attr)
{
	struct sr_context *ctx = to_sr_context(context);
	struct sr_xrcd *xrcd;
	int ret;

	if (attr->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) ||
	    !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS)) {
		errno = EINVAL;
		return NULL;
	}
	xrcd = calloc(1, sizeof(*xrcd));
	if (!xrcd)
		return NULL;
	ret = sr_obj_create(ctx, &xrcd->obj, SR_OBJ_XRCD, NULL, 0);
	if (ret)
		return sr_obj_create_failed(ctx, NULL, xrcd, ret);
	pthread_mutex_lock(&xrc_lock);
	ret = find_domain(attr, &xrcd->domain);
	pthread_mutex_unlock(&xrc_lock);
	if (ret)
		return sr_obj_create_failed(ctx, &xrcd->obj, xrcd, ret);
	xrcd->vxrcd.xrcd.context = context;
	xrcd->vxrcd.comp_mask = VERBS_XRCD_HANDLE;
	xrcd->vxrcd.handle = xrcd->obj.handle;
	sr_obj_publish(ctx, &xrcd->obj);
	return &xrcd->vxrcd.xrcd;
}

int sr_xrcd_teardown(struct sr_context *ctx, struct sr_xrcd *xrcd)
{
	pthread_mutex_lock(&xrc_lock);
	put_domain(xrcd->domain);
	pthread_mutex_unlock(&xrc_lock);
	return sr_obj_teardown_free(ctx, &xrcd->obj, xrcd, 0);
}

/* EBUSY while SRQs or target QPs made through this handle are there. */
int sr_close_xrcd(struct ibv_xrcd *ibxrcd)
{
	return sr_obj_destroy(to_sr_context(ibxrcd->context), SR_XRCD_REF(ibxrcd));
}

uint32_t sr_xrcd_id(const struct sr_xrcd *xrcd)
{
	return xrcd->domain->id;
}

int sr_xrc_tgt_add(struct sr_xrcd *xrcd, struct sr_qp *qp)
{
	struct sr_xrc_tgt *tgt = calloc(1, sizeof(*tgt));

	if (!tgt)
		return ENOMEM;
	tgt->qp = qp->qp;
	tgt->qpn = emu_qp_num(qp->qp);
	tgt->handles = qp;
	tgt->domain = xrcd->domain;
	qp->tgt = tgt;
	qp->next_share = NULL;
	pthread_mutex_lock(&xrc_lock);
	tgt->next = xrcd->domain->tgts;
	xrcd->domain->tgts = tgt;
	pthread_mutex_unlock(&xrc_lock);
	return 0;
}

/* The kernel's ib_open_qp(): a target QP of this domain, or EINVAL. */
int sr_xrc_tgt_share(struct sr_xrcd *xrcd, uint32_t qp_num, struct sr_qp *qp)
{
	struct sr_xrc_tgt *tgt;

	pthread_mutex_lock(&xrc_lock);
	for (tgt = xrcd->domain->tgts; tgt && tgt->qpn != qp_num; tgt = tgt->next)
		;
	if (tgt) {
		struct sr_qp **last = &tgt->handles;

		/* Oldest first: the events go to the oldest handle still open. */
		while (*last)
			last = &(*last)->next_share;
		qp->qp = tgt->qp;
		qp->tgt = tgt;
		qp->next_share = NULL;
		*last = qp;
	}
	pthread_mutex_unlock(&xrc_lock);
	return tgt ? 0 : EINVAL;
}

/*
 * The handle's domain is still there: the handle is a user of the xrcd handle it was made
 * or opened through (objects.c), and that one of the domain.
 */
bool sr_xrc_tgt_leave(struct sr_qp *qp)
{
	struct sr_xrc_tgt *tgt = qp->tgt, **tp;
	struct sr_qp **p;
	bool last;

	pthread_mutex_lock(&xrc_lock);
	for (p = &tgt->handles; *p != qp; p = &(*p)->next_share)
		;
	*p = qp->next_share;
	last = !tgt->handles;
	if (!last && p == &tgt->handles) {
		/* The events' handle goes: the next one takes them. */
		struct sr_qp *heir = tgt->handles;

		emu_qp_set_owner(tgt->qp, (uintptr_t)&heir->vqp.qp,
				 to_sr_context(heir->vqp.qp.context)->async_notify_fd,
				 &heir->async.raised);
	}
	if (last) {
		for (tp = &tgt->domain->tgts; *tp != tgt; tp = &(*tp)->next)
			;
		*tp = tgt->next;
		free(tgt);
	}
	pthread_mutex_unlock(&xrc_lock);
	qp->tgt = NULL;
	return last;
}
