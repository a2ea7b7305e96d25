// SPDX-License-Identifier: MIT
/* rdma_getaddrinfo and the endpoint calls built on synchronous ids. */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/ib.h>

#include <rdma/rdma_verbs.h>

#include "cm.h"

static int copy_addr(struct sockaddr **dst, socklen_t *dst_len, const struct sockaddr *src,
		     socklen_t len)
{
	*dst = malloc(len);
	if (!*dst)
		return ENOMEM;
	memcpy(*dst, src, len);
	*dst_len = len;
	return 0;
}

EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;

		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}

/* The getaddrinfo(3) hints librdmacm derives from its own: socket type from the QP type,
 * protocol from the port space. */
static void to_ai_hints(const struct rdma_addrinfo *hints, struct addrinfo *ai)
{
	memset(ai, 0, sizeof(*ai));
	if (hints->ai_flags & RAI_PASSIVE)
		ai->ai_flags = AI_PASSIVE;
	if (hints->ai_flags & RAI_NUMERICHOST)
		ai->ai_flags |= AI_NUMERICHOST;
	if (hints->ai_family != AF_IB)
		ai->ai_family = hints->ai_family;
	if (hints->ai_qp_type == IBV_QPT_UD)
		ai->ai_socktype = SOCK_DGRAM;
	else if (hints->ai_qp_type)
		ai->ai_socktype = SOCK_STREAM;	/* RC, UC, XRC */
	if (hints->ai_port_space == RDMA_PS_TCP ||
	    (hints->ai_port_space == RDMA_PS_IB && ai->ai_socktype == SOCK_STREAM))
		ai->ai_protocol = IPPROTO_TCP;
	else if (hints->ai_port_space == RDMA_PS_UDP || hints->ai_port_space == RDMA_PS_IPOIB ||
		 (hints->ai_port_space == RDMA_PS_IB && ai->ai_socktype == SOCK_DGRAM))
		ai->ai_protocol = IPPROTO_UDP;
}

/* The first address getaddrinfo(3) found, as librdmacm keeps it: one result. */
static int from_ai(struct rdma_addrinfo *rai, const struct rdma_addrinfo *hints,
		   const struct addrinfo *ai)
{
	bool passive = hints->ai_flags & RAI_PASSIVE;

	rai->ai_qp_type = hints->ai_qp_type ? hints->ai_qp_type :
			  ai->ai_socktype == SOCK_DGRAM ? IBV_QPT_UD : IBV_QPT_RC;
	rai->ai_port_space = hints->ai_port_space ? hints->ai_port_space :
			     ai->ai_protocol == IPPROTO_UDP ? RDMA_PS_UDP : RDMA_PS_TCP;
	rai->ai_flags = passive ? RAI_PASSIVE : 0;
	rai->ai_family = ai->ai_family;
	if (ai->ai_canonname) {
		char **name = passive ? &rai->ai_src_canonname : &rai->ai_dst_canonname;

		*name = strdup(ai->ai_canonname);
		if (!*name)
			return ENOMEM;
	}
	if (passive)
		return copy_addr(&rai->ai_src_addr, &rai->ai_src_len, ai->ai_addr, ai->ai_addrlen);
	return copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, ai->ai_addr, ai->ai_addrlen);
}

/*
 * As librdmacm's (addrinfo.c): node and service are looked up with getaddrinfo(3), and the
 * first answer is the result; with neither, the result is the hints themselves (libfabric
 * passes its addresses that way). A source address in the hints is kept. Returns 0, an
 * EAI_* code from getaddrinfo(3), or -1 with errno.
 */
EXPORT int rdma_getaddrinfo(const char *node, const char *service,
			    const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	static const struct rdma_addrinfo no_hints;
	struct rdma_addrinfo *rai;
	struct addrinfo ai_hints, *ai;
	int ret = 0;

	if (!res || (!node && !service && !hints)) {
		errno = EINVAL;
		return -1;
	}
	if (!hints)
		hints = &no_hints;
	/* AF_IB addresses name IB subnets: the soft device is RoCE (docs/semantics.md). */
	if ((hints->ai_flags & RAI_FAMILY) && hints->ai_family == AF_IB) {
		errno = EOPNOTSUPP;
		return -1;
	}
	rai = calloc(1, sizeof(*rai));
	if (!rai) {
		errno = ENOMEM;
		return -1;
	}
	if (node || service) {
		to_ai_hints(hints, &ai_hints);
		ret = getaddrinfo(node, service, hints == &no_hints ? NULL : &ai_hints, &ai);
		if (ret) {
			free(rai);
			return ret;
		}
		ret = from_ai(rai, hints, ai);
		freeaddrinfo(ai);
	} else {
		rai->ai_flags = hints->ai_flags;
		rai->ai_family = hints->ai_family;
		rai->ai_qp_type = hints->ai_qp_type;
		rai->ai_port_space = hints->ai_port_space;
		if (hints->ai_dst_len)
			ret = copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, hints->ai_dst_addr,
					hints->ai_dst_len);
	}
	if (!ret && !rai->ai_src_len && hints->ai_src_len)
		ret = copy_addr(&rai->ai_src_addr, &rai->ai_src_len, hints->ai_src_addr,
				hints->ai_src_len);
	if (ret) {
		rdma_freeaddrinfo(rai);
		errno = ret;
		return -1;
	}
	*res = rai;
	return 0;
}

EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
			  struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cm_id;

	if (!id || !res) {
		errno = EINVAL;
		return -1;
	}
	if (rdma_create_id(NULL, &cm_id, NULL, (enum rdma_port_space)res->ai_port_space))
		return -1;
	/* As librdmacm's rdma_create_id2(): the id is of res's QP type (XRC's two halves). */
	if (res->ai_qp_type == IBV_QPT_XRC_SEND || res->ai_qp_type == IBV_QPT_XRC_RECV)
		cm_id->qp_type = (enum ibv_qp_type)res->ai_qp_type;
	if (res->ai_flags & RAI_PASSIVE) {
		if (rdma_bind_addr(cm_id, res->ai_src_addr))
			goto err;
	} else {
		if (rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000) ||
		    rdma_resolve_route(cm_id, 2000))
			goto err;
	}
	cm_id->pd = pd;
	if (qp_init_attr)
		qp_init_attr->qp_type = res->ai_qp_type;	/* as librdmacm: the QP type is res's */
	if (qp_init_attr && !(res->ai_flags & RAI_PASSIVE) &&
	    rdma_create_qp(cm_id, pd, qp_init_attr))
		goto err;
	if (qp_init_attr && (res->ai_flags & RAI_PASSIVE))
		to_cm_id(cm_id)->ep_qp_attr = *qp_init_attr;	/* for each rdma_get_request() */
	*id = cm_id;
	return 0;

err:
	{
		int err = errno;

		rdma_destroy_id(cm_id);
		errno = err;
	}
	return -1;
}

EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (!id)
		return;
	rdma_destroy_qp(id);
	rdma_destroy_srq(id);
	rdma_destroy_id(id);
}

EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct cm_id *listener = to_cm_id(listen);
	struct rdma_event_channel *own;
	struct rdma_cm_event *event;
	struct cm_id *child;

	if (!listener || !id || !listener->sync) {
		errno = EINVAL;
		return -1;
	}
	for (;;) {
		if (rdma_get_cm_event(listen->channel, &event))
			return -1;
		if (event->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			break;
		rdma_ack_cm_event(event);
	}
	child = to_cm_id(event->id);
	/* Synchronous like its listener: later calls on it wait for their own events. */
	own = rdma_create_event_channel();
	if (!own) {
		rdma_ack_cm_event(event);
		return -1;
	}
	pthread_mutex_lock(&child->lock);
	child->own_channel = to_cm_channel(own);
	child->id.channel = own;
	child->sync = true;
	child->id.event = event;	/* read by the application, acked by rdma_accept */
	child->id.pd = listen->pd;
	pthread_mutex_unlock(&child->lock);
	if (listener->ep_qp_attr.cap.max_send_wr || listener->ep_qp_attr.cap.max_recv_wr) {
		struct ibv_qp_init_attr attr = listener->ep_qp_attr;

		if (rdma_create_qp(&child->id, listen->pd, &attr)) {
			int err = errno;

			rdma_reject(&child->id, NULL, 0);
			rdma_destroy_id(&child->id);
			errno = err;
			return -1;
		}
	}
	*id = &child->id;
	return 0;
}
