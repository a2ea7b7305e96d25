// SPDX-License-Identifier: MIT
/*
 * The connection handshake, as the IB CM does it, over one TCP connection between the two
 * libraries (docs/rdma-cm.md): REQ, then REP or REJ, then RTU; DREQ/DREP to disconnect.
 * The QPs themselves connect through their engines, with the QPNs and PSNs exchanged here.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cm.h"

#define CM_CONNECT_TIMEOUT_MS 5000

static void msg_init(struct cm_msg *msg, enum cm_msg_type type)
{
	memset(msg, 0, sizeof(*msg));
	msg->magic = htonl(CM_WIRE_MAGIC);
	msg->version = htons(CM_WIRE_VERSION);
	msg->type = type;
}

static uint32_t random_psn(void)
{
	uint32_t psn = 0;

	if (getrandom(&psn, sizeof(psn), 0) != sizeof(psn))
		psn = (uint32_t)rand();
	return psn & 0xffffff;
}

/* The parameters a NULL conn_param stands for (librdmacm's defaults). */
static void default_param(struct rdma_conn_param *p, const struct cm_msg *peer)
{
	memset(p, 0, sizeof(*p));
	p->responder_resources = peer ? peer->initiator_depth : 16;
	p->initiator_depth = peer ? peer->responder_resources : 16;
	p->retry_count = 7;
	p->rnr_retry_count = 7;
}

static void fill_from_param(struct cm_msg *msg, struct cm_id *id, const struct rdma_conn_param *p,
			    uint32_t qpn)
{
	msg->qpn = qpn;
	msg->psn = id->local_psn;
	memcpy(msg->gid, &id->id.route.addr.addr.ibaddr.sgid, 16);
	msg->responder_resources = p->responder_resources;
	msg->initiator_depth = p->initiator_depth;
	msg->flow_control = p->flow_control;
	msg->retry_count = p->retry_count;
	msg->rnr_retry_count = p->rnr_retry_count;
	msg->srq = p->srq;
	msg->ece_vendor_id = id->ece_vendor_id;
	msg->ece_options = id->ece_options;
	if (p->private_data && p->private_data_len) {
		memcpy(msg->private_data, p->private_data, p->private_data_len);
		msg->private_data_len = p->private_data_len;
	}
}

/* A TCP connection to the peer's CM, bounded in time. */
static int connect_cm_socket(struct cm_id *id)
{
	const struct sockaddr *dst = &id->id.route.addr.dst_addr;
	socklen_t len = dst->sa_family == AF_INET ? sizeof(struct sockaddr_in) :
						    sizeof(struct sockaddr_in6);
	struct pollfd pfd;
	int err = 0, flags, fd = id->sock;

	if (fd < 0) {
		fd = socket(dst->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return errno;
		id->sock = fd;
	}
	flags = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, flags | O_NONBLOCK);
	if (connect(fd, dst, len) && errno != EINPROGRESS) {
		err = errno;
	} else {
		pfd.fd = fd;
		pfd.events = POLLOUT;
		if (poll(&pfd, 1, CM_CONNECT_TIMEOUT_MS) != 1) {
			err = ETIMEDOUT;
		} else {
			len = sizeof(err);
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
		}
	}
	fcntl(fd, F_SETFL, flags);
	if (!err) {
		struct sockaddr_storage local;

		len = sizeof(local);
		if (!getsockname(fd, (struct sockaddr *)&local, &len))
			id->id.route.addr.src_sin.sin_port = ((struct sockaddr_in *)&local)->sin_port;
	}
	return err;
}

static int finish_sync(struct cm_id *id, enum rdma_cm_event_type expected)
{
	int ret;

	if (!id->sync)
		return 0;
	ret = cm_wait_event(id, expected);
	if (ret) {
		errno = ret;
		return -1;
	}
	return 0;
}

EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct cm_id *cid = to_cm_id(id);
	struct rdma_conn_param defaults;
	struct cm_msg req;
	int ret;

	if (!cid || cid->state != CM_ROUTE_RESOLVED ||
	    (conn_param && conn_param->private_data_len >
			   (cm_id_is_ud(cid) ? CM_SIDR_REQ_PRIVATE_DATA : CM_REQ_PRIVATE_DATA)) ||
	    (!id->qp && !conn_param)) {
		errno = EINVAL;
		return -1;
	}
	if (!conn_param) {
		default_param(&defaults, NULL);
		conn_param = &defaults;
	}
	cid->local_param = *conn_param;
	cid->local_param.private_data = NULL;
	cid->local_psn = random_psn();
	ret = connect_cm_socket(cid);
	if (ret) {
		/* Nobody listens: on RoCE the remote CM rejects with "invalid service ID". */
		if (ret == ECONNREFUSED)
			cm_post_event(cid, RDMA_CM_EVENT_REJECTED, CM_REJ_INVALID_SERVICE_ID, NULL,
				      NULL);
		else
			cm_post_event(cid, RDMA_CM_EVENT_UNREACHABLE, -ret, NULL, NULL);
		return finish_sync(cid, RDMA_CM_EVENT_ESTABLISHED);
	}
	msg_init(&req, CM_MSG_REQ);
	fill_from_param(&req, cid, conn_param, id->qp ? id->qp->qp_num : conn_param->qp_num);
	if (cm_id_is_ud(cid))
		req.psn = CM_UD_QKEY;
	cid->state = CM_CONNECTING;
	ret = cm_thread_watch(cid);
	if (!ret)
		ret = cm_send_msg(cid->sock, &req);
	if (ret) {
		cm_thread_unwatch(cid);
		cid->state = CM_ROUTE_RESOLVED;
		errno = ret;
		return -1;
	}
	return finish_sync(cid, id->qp ? RDMA_CM_EVENT_ESTABLISHED :
				  RDMA_CM_EVENT_CONNECT_RESPONSE);
}

EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct cm_id *cid = to_cm_id(id);
	struct rdma_conn_param defaults;
	struct cm_msg rep;
	int ret;

	if (!cid || cid->state != CM_REQ_RECEIVED ||
	    (conn_param && conn_param->private_data_len >
			   (cm_id_is_ud(cid) ? CM_SIDR_REP_PRIVATE_DATA : CM_REP_PRIVATE_DATA)) ||
	    (!id->qp && !conn_param)) {
		errno = EINVAL;
		return -1;
	}
	if (id->event) {
		rdma_ack_cm_event(id->event);	/* rdma_get_request's, as librdmacm does */
		id->event = NULL;
	}
	if (!conn_param) {
		default_param(&defaults, &cid->peer);
		conn_param = &defaults;
	}
	cid->local_param = *conn_param;
	cid->local_param.private_data = NULL;
	cid->local_psn = random_psn();
	if (id->qp && !cm_id_is_ud(cid)) {
		ret = cm_qp_to_rtr_rts(cid, &cid->peer, false);
		if (ret) {
			errno = ret;
			return -1;
		}
	}
	msg_init(&rep, CM_MSG_REP);
	fill_from_param(&rep, cid, conn_param, id->qp ? id->qp->qp_num : conn_param->qp_num);
	if (cm_id_is_ud(cid)) {
		/* A SIDR reply ends it: the passive side gets no further event. */
		rep.psn = CM_UD_QKEY;
		cid->state = CM_ESTABLISHED;
		ret = cm_send_msg(cid->sock, &rep);
		if (ret)
			errno = ret;
		return ret ? -1 : 0;
	}
	cid->state = CM_ACCEPTED;
	ret = cm_send_msg(cid->sock, &rep);
	if (ret) {
		errno = ret;
		return -1;
	}
	return finish_sync(cid, RDMA_CM_EVENT_ESTABLISHED);
}

static int send_reject(struct cm_id *id, const void *private_data, uint8_t len, uint8_t reason)
{
	struct cm_msg rej;
	int ret;

	if (id->state != CM_REQ_RECEIVED || len > CM_REJ_PRIVATE_DATA) {
		errno = EINVAL;
		return -1;
	}
	if (id->id.event) {
		rdma_ack_cm_event(id->id.event);
		id->id.event = NULL;
	}
	msg_init(&rej, CM_MSG_REJ);
	rej.reject_reason = reason;
	if (private_data && len) {
		memcpy(rej.private_data, private_data, len);
		rej.private_data_len = len;
	}
	ret = cm_send_msg(id->sock, &rej);
	cm_thread_unwatch(id);
	close(id->sock);
	id->sock = -1;
	id->state = CM_DISCONNECTED;
	if (ret) {
		errno = ret;
		return -1;
	}
	return 0;
}

EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	if (!id) {
		errno = EINVAL;
		return -1;
	}
	return send_reject(to_cm_id(id), private_data, private_data_len, CM_REJ_CONSUMER_DEFINED);
}

EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
			   uint8_t private_data_len)
{
	if (!id) {
		errno = EINVAL;
		return -1;
	}
	/* IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED: what the kernel sends for an ECE refusal. */
	return send_reject(to_cm_id(id), private_data, private_data_len, 35);
}

static int send_rtu(struct cm_id *id)
{
	struct cm_msg rtu;

	msg_init(&rtu, CM_MSG_RTU);
	return cm_send_msg(id->sock, &rtu);
}

EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	struct cm_id *cid = to_cm_id(id);
	int ret;

	if (!cid || cid->state != CM_REP_RECEIVED) {
		errno = EINVAL;
		return -1;
	}
	ret = send_rtu(cid);
	if (ret) {
		errno = ret;
		return -1;
	}
	cid->state = CM_ESTABLISHED;
	cm_post_event(cid, RDMA_CM_EVENT_ESTABLISHED, 0, &cid->peer, NULL);
	return finish_sync(cid, RDMA_CM_EVENT_ESTABLISHED);
}

EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	struct cm_id *cid = to_cm_id(id);
	struct cm_msg dreq;
	bool connected;

	if (!cid) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cid->lock);
	connected = cid->state == CM_ESTABLISHED || cid->state == CM_ACCEPTED ||
		    cid->state == CM_CONNECTING || cid->state == CM_REP_RECEIVED;
	if (connected)
		cid->state = CM_DISCONNECTED;
	pthread_mutex_unlock(&cid->lock);
	/*
	 * As the kernel's rdma_disconnect(): the QP stops first, flushing what is posted, even
	 * when the peer disconnected already (rping's CQ thread waits for that flush); only a
	 * connected id sends DREQ and reports DISCONNECTED.
	 */
	cm_qp_to_error(cid);
	if (!connected)
		return 0;
	msg_init(&dreq, CM_MSG_DREQ);
	cm_send_msg(cid->sock, &dreq);
	cm_post_event(cid, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, NULL);
	return finish_sync(cid, RDMA_CM_EVENT_DISCONNECTED);
}

EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	(void)event;
	if (!id) {
		errno = EINVAL;
		return -1;
	}
	return 0;	/* the CM needs no nudge: RTU is always sent */
}

EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	struct cm_id *cid = to_cm_id(id);

	if (!cid || !ece) {
		errno = EINVAL;
		return -1;
	}
	cid->ece_vendor_id = ece->vendor_id;
	cid->ece_options = ece->options;
	return 0;
}

EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	struct cm_id *cid = to_cm_id(id);

	if (!cid || !ece) {
		errno = EINVAL;
		return -1;
	}
	memset(ece, 0, sizeof(*ece));
	ece->vendor_id = cid->peer.ece_vendor_id;
	ece->options = cid->peer.ece_options;
	return 0;
}

/* Called by the CM thread when a listener has a connection to accept. */
void cm_handle_accept(struct cm_id *listener)
{
	for (;;) {
		int fd = accept4(listener->sock, NULL, NULL, SOCK_CLOEXEC);
		struct cm_id *child;
		socklen_t len;

		if (fd < 0)
			return;
		child = cm_id_new(listener->id.channel, listener->id.context, listener->id.ps,
				  listener->id.qp_type);
		if (!child) {
			close(fd);
			continue;
		}
		child->sock = fd;
		child->listen_parent = listener;
		child->state = CM_CONNECTING;	/* until its REQ arrives */
		len = sizeof(child->id.route.addr.src_storage);
		getsockname(fd, &child->id.route.addr.src_addr, &len);
		len = sizeof(child->id.route.addr.dst_storage);
		getpeername(fd, &child->id.route.addr.dst_addr, &len);
		if (cm_thread_watch(child)) {
			close(fd);
			cm_id_free(child);
		}
	}
}

static void handle_req(struct cm_id *id, const struct cm_msg *msg)
{
	union ibv_gid sgid;

	id->id.verbs = cm_softrdma_context();
	if (cm_gid_index_of(id->id.verbs, &id->id.route.addr.src_addr, &sgid) < 0) {
		cm_handle_conn_lost(id);	/* reached us on an address the device lacks */
		return;
	}
	id->peer = *msg;
	id->id.port_num = 1;
	id->id.route.addr.addr.ibaddr.sgid = sgid;
	memcpy(&id->id.route.addr.addr.ibaddr.dgid, msg->gid, 16);
	id->id.route.addr.addr.ibaddr.pkey = htons(0xffff);
	id->state = CM_REQ_RECEIVED;
	cm_post_event(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, msg, id->listen_parent);
}

static void handle_rep(struct cm_id *id, const struct cm_msg *msg)
{
	int ret;

	id->peer = *msg;
	if (cm_id_is_ud(id)) {
		id->state = CM_ESTABLISHED;
		cm_post_event(id, RDMA_CM_EVENT_ESTABLISHED, 0, msg, NULL);
		return;
	}
	if (!id->id.qp) {
		id->state = CM_REP_RECEIVED;
		cm_post_event(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, msg, NULL);
		return;
	}
	ret = cm_qp_to_rtr_rts(id, msg, true);
	if (!ret)
		ret = send_rtu(id);
	if (ret) {
		cm_post_event(id, RDMA_CM_EVENT_CONNECT_ERROR, -ret, NULL, NULL);
		return;
	}
	id->state = CM_ESTABLISHED;
	cm_post_event(id, RDMA_CM_EVENT_ESTABLISHED, 0, msg, NULL);
}

static void peer_disconnected(struct cm_id *id)
{
	bool was_connected;

	pthread_mutex_lock(&id->lock);
	was_connected = id->state == CM_ESTABLISHED || id->state == CM_ACCEPTED ||
			id->state == CM_REP_RECEIVED;
	if (was_connected)
		id->state = CM_DISCONNECTED;
	pthread_mutex_unlock(&id->lock);
	/*
	 * Only the event: as the kernel's CM, this thread never touches the application's QP,
	 * which the application may be destroying right now. Its own rdma_disconnect() stops
	 * the QP; until then what the peer already answered still completes normally.
	 */
	if (was_connected)
		cm_post_event(id, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, NULL);
}

void cm_handle_msg(struct cm_id *id, const struct cm_msg *msg)
{
	struct cm_msg drep;

	switch (msg->type) {
	case CM_MSG_REQ:
		if (id->state == CM_CONNECTING && id->listen_parent)
			handle_req(id, msg);
		break;
	case CM_MSG_REP:
		if (id->state == CM_CONNECTING && !id->listen_parent)
			handle_rep(id, msg);
		break;
	case CM_MSG_REJ:
		if (id->state == CM_CONNECTING && !id->listen_parent) {
			id->state = CM_DISCONNECTED;
			cm_post_event(id, RDMA_CM_EVENT_REJECTED, msg->reject_reason, msg, NULL);
		}
		break;
	case CM_MSG_RTU:
		if (id->state == CM_ACCEPTED) {
			id->state = CM_ESTABLISHED;
			cm_post_event(id, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, NULL);
		}
		break;
	case CM_MSG_DREQ:
		msg_init(&drep, CM_MSG_DREP);
		cm_send_msg(id->sock, &drep);
		peer_disconnected(id);
		break;
	default:
		break;	/* DREP, or a newer peer's message: nothing to do */
	}
}

void cm_handle_conn_lost(struct cm_id *id)
{
	if (id->listen_parent && id->state == CM_CONNECTING) {
		/* A connection that never sent its REQ: the application never saw it. */
		cm_thread_unwatch(id);
		close(id->sock);
		cm_id_free(id);
		return;
	}
	cm_thread_unwatch(id);
	if (id->state == CM_CONNECTING) {
		id->state = CM_DISCONNECTED;
		cm_post_event(id, RDMA_CM_EVENT_UNREACHABLE, -ECONNRESET, NULL, NULL);
		return;
	}
	peer_disconnected(id);
}
