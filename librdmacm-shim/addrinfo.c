// SPDX-License-Identifier: MIT
/* rdma_getaddrinfo and the endpoint calls built on synchronous ids. */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"

static struct sockaddr *copy_addr(const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr *copy = malloc(len);

	if (copy)
		memcpy(copy, sa, len);
	return copy;
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

/* Like getaddrinfo(3): 0, or an EAI_* code (with errno set for EAI_SYSTEM). */
EXPORT int rdma_getaddrinfo(const char *node, const char *service,
			    const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	struct addrinfo ai_hints = { .ai_socktype = SOCK_STREAM }, *ai, *a;
	struct rdma_addrinfo **tail = res, *r;
	int flags = hints ? hints->ai_flags : 0;
	int ret;

	if (!res || (!node && !service)) {
		errno = EINVAL;
		return EAI_NONAME;
	}
	*res = NULL;
	if (hints && hints->ai_family)
		ai_hints.ai_family = hints->ai_family;
	if (flags & RAI_PASSIVE)
		ai_hints.ai_flags |= AI_PASSIVE;
	if (flags & RAI_NUMERICHOST)
		ai_hints.ai_flags |= AI_NUMERICHOST;
	ret = getaddrinfo(node, service, &ai_hints, &ai);
	if (ret)
		return ret;
	for (a = ai; a; a = a->ai_next) {
		if (a->ai_family != AF_INET && a->ai_family != AF_INET6)
			continue;
		r = calloc(1, sizeof(*r));
		if (!r)
			goto oom;
		*tail = r;
		tail = &r->ai_next;
		r->ai_flags = flags;
		r->ai_family = a->ai_family;
		r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type : IBV_QPT_RC;
		r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space :
				   (r->ai_qp_type == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP);
		if (flags & RAI_PASSIVE) {
			r->ai_src_addr = copy_addr(a->ai_addr, a->ai_addrlen);
			r->ai_src_len = a->ai_addrlen;
			if (!r->ai_src_addr)
				goto oom;
		} else {
			r->ai_dst_addr = copy_addr(a->ai_addr, a->ai_addrlen);
			r->ai_dst_len = a->ai_addrlen;
			if (!r->ai_dst_addr)
				goto oom;
			if (hints && hints->ai_src_addr) {
				r->ai_src_addr = copy_addr(hints->ai_src_addr, hints->ai_src_len);
				r->ai_src_len = hints->ai_src_len;
				if (!r->ai_src_addr)
					goto oom;
			}
		}
	}
	freeaddrinfo(ai);
	if (!*res)
		return EAI_FAMILY;
	return 0;

oom:
	freeaddrinfo(ai);
	rdma_freeaddrinfo(*res);
	*res = NULL;
	errno = ENOMEM;
	return EAI_SYSTEM;
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
