// SPDX-License-Identifier: MIT
/*
 * rdma_join_multicast, rdma_join_multicast_ex, rdma_leave_multicast: what librdmacm's cma.c
 * and the kernel's RoCE path (cma_iboe_join_multicast) do, with the device's own groups
 * (emu/mcast.c) as the fabric. There is no SA and no IGMP to wait for on a RoCE port, so
 * the join's event is posted at once:
 *
 * - The id must be bound to the device (ADDR_BOUND to one of its addresses, or
 *   ADDR_RESOLVED) and be a UD id; else EINVAL, as the kernel's rdma_join_multicast().
 * - An IPv4 group a.b.c.d is the MGID ::ffff:a.b.c.d, as cma_iboe_set_mgid() makes it for a
 *   RoCE v2 GID; an IPv6 group on RoCE v2 is refused by the kernel (ENOTSUPP, which user
 *   space sees as errno 524): EOPNOTSUPP here, docs/semantics.md.
 * - RDMA_CM_EVENT_MULTICAST_JOIN carries the group's address handle (hop limit 64, the id's
 *   source GID), qp_num 0xffffff, the id's Q_Key (RDMA_UDP_QKEY) and the join's context in
 *   param.ud.private_data. If the id has a QP it is attached to the group, except for a
 *   send-only full member (ucma_process_join()); an attach that fails makes the event
 *   RDMA_CM_EVENT_MULTICAST_ERROR with status -1, as librdmacm reports it.
 * - rdma_leave_multicast() detaches the QP and forgets the join; an address never joined
 *   is EADDRNOTAVAIL. rdma_destroy_id() forgets the rest (the QP must be gone by then, and
 *   a QP still attached cannot be destroyed: ibv_destroy_qp is EBUSY, as with uverbs).
 *
 * The joins of an id are under its lock (cm.h); attaching and detaching are public verbs
 * called under it, as every verb the shim calls.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"

struct cm_mcast {
	struct cm_mcast *next;
	struct sockaddr_storage addr;	/* as the application named the group */
	union ibv_gid mgid;
	uint16_t join_flags;
	bool attached;			/* the id's QP was attached to it */
};

static socklen_t group_addr_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) :
	       sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : 0;
}

/* The MGID of an IPv4 group on RoCE v2; 0, EINVAL (no group) or EOPNOTSUPP (IPv6). */
static int group_mgid(const struct sockaddr *addr, union ibv_gid *mgid)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)addr;

	if (addr->sa_family == AF_INET6)
		return EOPNOTSUPP;
	if (addr->sa_family != AF_INET || sin->sin_addr.s_addr == htonl(INADDR_ANY))
		return EINVAL;
	memset(mgid, 0, sizeof(*mgid));
	mgid->raw[10] = 0xff;
	mgid->raw[11] = 0xff;
	memcpy(&mgid->raw[12], &sin->sin_addr, 4);
	return 0;
}

/* id->lock held. */
static int join_locked(struct cm_id *cid, const struct sockaddr *addr, uint16_t flags,
		       void *context)
{
	struct rdma_cm_id *id = &cid->id;
	struct cm_mcast *mc;
	int ret, status = 0;

	if (!id->verbs || (cid->state != CM_ADDR_BOUND && cid->state != CM_ADDR_RESOLVED) ||
	    !cm_id_is_ud(cid))
		return EINVAL;
	mc = calloc(1, sizeof(*mc));
	if (!mc)
		return ENOMEM;
	ret = group_mgid(addr, &mc->mgid);
	if (ret) {
		free(mc);
		return ret;
	}
	memcpy(&mc->addr, addr, group_addr_len(addr));
	mc->join_flags = flags;
	if (id->qp && flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) {
		ret = ibv_attach_mcast(id->qp, &mc->mgid, 0);
		mc->attached = !ret;
		status = ret ? -1 : 0;
	}
	ret = cm_post_mcast_event(cid, status ? RDMA_CM_EVENT_MULTICAST_ERROR :
				  RDMA_CM_EVENT_MULTICAST_JOIN, status, &mc->mgid, CM_UD_QKEY,
				  context);
	if (ret) {
		if (mc->attached)
			ibv_detach_mcast(id->qp, &mc->mgid, 0);
		free(mc);
		return ret;
	}
	mc->next = cid->mcasts;
	cid->mcasts = mc;
	return 0;
}

static int join(struct rdma_cm_id *id, const struct sockaddr *addr, uint16_t flags,
		void *context)
{
	struct cm_id *cid = to_cm_id(id);
	enum rdma_cm_event_type expected = RDMA_CM_EVENT_MULTICAST_JOIN;
	bool sync;
	int ret;

	if (!cid || !addr) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cid->lock);
	ret = join_locked(cid, addr, flags, context);
	sync = cid->sync;
	pthread_mutex_unlock(&cid->lock);
	if (!ret && sync)
		ret = cm_wait_event(cid, expected);
	if (ret) {
		errno = ret;
		return -1;
	}
	return 0;
}

EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	return join(id, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *attr,
				  void *context)
{
	/* librdmacm's checks: an address, and join flags it knows. */
	if (!attr || !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) || !attr->addr ||
	    !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
	    attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED || !group_addr_len(attr->addr)) {
		errno = EINVAL;
		return -1;
	}
	return join(id, attr->addr, (uint16_t)attr->join_flags, context);
}

EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct cm_id *cid = to_cm_id(id);
	struct cm_mcast **pos, *mc = NULL;
	socklen_t len;

	if (!cid || !addr) {
		errno = EINVAL;
		return -1;
	}
	len = group_addr_len(addr);
	pthread_mutex_lock(&cid->lock);
	for (pos = &cid->mcasts; len && *pos; pos = &(*pos)->next)
		if ((*pos)->addr.ss_family == addr->sa_family && !memcmp(&(*pos)->addr, addr, len)) {
			mc = *pos;
			*pos = mc->next;
			break;
		}
	if (mc && mc->attached && id->qp)
		ibv_detach_mcast(id->qp, &mc->mgid, 0);
	pthread_mutex_unlock(&cid->lock);
	if (!mc) {
		errno = EADDRNOTAVAIL;
		return -1;
	}
	free(mc);
	return 0;
}

void cm_mcast_forget(struct cm_id *cid)
{
	while (cid->mcasts) {
		struct cm_mcast *mc = cid->mcasts;

		cid->mcasts = mc->next;
		free(mc);
	}
}
