// SPDX-License-Identifier: MIT
/*
 * The connection handshake, as the IB CM does it, over one TCP connection between the two
 * libraries (docs/rdma-cm.md): REQ, then REP or REJ, then RTU; DREQ/DREP to disconnect.
 * The QPs themselves connect through their engines, with the QPNs and PSNs exchanged here.
 * A REQ or REP whose GID is not the address it came from is refused: the GID is where our
 * QP would connect to, and a peer names only itself.
 *
 * Locks (cm.h): the API calls here take the id's lock themselves; the CM thread calls
 * cm_handle_msg() and cm_handle_conn_lost() with it held, cm_handle_req() with none.
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
	id->local_qpn = qpn;
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

/* Is gid the address the message came from? */
static bool gid_is_peer(const uint8_t gid[16], const struct sockaddr *peer)
{
	union ibv_gid expect;

	cm_sockaddr_to_gid(peer, &expect);
	return !memcmp(gid, expect.raw, sizeof(expect.raw));
}

static void reject_msg(struct cm_msg *rej, uint8_t reason)
{
	cm_msg_init(rej, CM_MSG_REJ);
	rej->reject_reason = reason;
}

/*
 * A TCP connection to the peer's CM, bounded in time. The application's thread waits
 * here with no lock held; the CM thread does not know the socket yet.
 */
static int connect_cm_socket(struct cm_id *id)
{
	struct sockaddr_storage dst, local;
	socklen_t len;
	struct pollfd pfd;
	int err = 0, fd;

	pthread_mutex_lock(&id->lock);
	memcpy(&dst, &id->id.route.addr.dst_storage, sizeof(dst));
	fd = id->sock;
	if (fd < 0) {
		fd = socket(dst.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			pthread_mutex_unlock(&id->lock);
			return errno;
		}
		id->sock = fd;
	}
	pthread_mutex_unlock(&id->lock);
	cm_sock_setup(fd);
	len = dst.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	if (connect(fd, (struct sockaddr *)&dst, len) && errno != EINPROGRESS)
		return errno;
	pfd.fd = fd;
	pfd.events = POLLOUT;
	if (poll(&pfd, 1, CM_CONNECT_TIMEOUT_MS) != 1)
		return ETIMEDOUT;
	len = sizeof(err);
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
	len = sizeof(local);
	if (!err && !getsockname(fd, (struct sockaddr *)&local, &len)) {
		pthread_mutex_lock(&id->lock);
		id->id.route.addr.src_sin.sin_port = ((struct sockaddr_in *)&local)->sin_port;
		pthread_mutex_unlock(&id->lock);
	}
	return err;
}

/*
 * A synchronous id's call waits for its event. `sync` was read under the id's lock: once
 * that is released, an asynchronous id may already be another thread's to destroy.
 */
static int finish_sync(struct cm_id *id, bool sync, enum rdma_cm_event_type expected)
{
	int ret;

	if (!sync)
		return 0;
	ret = cm_wait_event(id, expected);
	if (ret) {
		errno = ret;
		return -1;
	}
	return 0;
}

static int fail(int err)
{
	errno = err;
	return -1;
}

/* id->lock held: the checks of rdma_connect; fills in the parameters to send. */
static int prepare_connect(struct cm_id *cid, struct rdma_conn_param **param,
			   struct rdma_conn_param *defaults)
{
	struct rdma_conn_param *p = *param;

	if (cid->state != CM_ROUTE_RESOLVED ||
	    (p && p->private_data_len >
			  (cm_id_is_ud(cid) ? CM_SIDR_REQ_PRIVATE_DATA : CM_REQ_PRIVATE_DATA)) ||
	    (!cid->id.qp && !p))
		return EINVAL;
	if (!p) {
		default_param(defaults, NULL);
		*param = defaults;
	}
	cid->local_param = **param;
	cid->local_param.private_data = NULL;
	cid->local_psn = random_psn();
	return 0;
}

EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct cm_id *cid = to_cm_id(id);
	enum rdma_cm_event_type expected;
	struct rdma_conn_param defaults;
	struct cm_msg req;
	bool sync;
	int ret;

	if (!cid)
		return fail(EINVAL);
	pthread_mutex_lock(&cid->lock);
	ret = prepare_connect(cid, &conn_param, &defaults);
	sync = cid->sync;
	expected = id->qp ? RDMA_CM_EVENT_ESTABLISHED : RDMA_CM_EVENT_CONNECT_RESPONSE;
	pthread_mutex_unlock(&cid->lock);
	if (ret)
		return fail(ret);
	ret = connect_cm_socket(cid);
	pthread_mutex_lock(&cid->lock);
	if (ret) {
		/* Nobody listens: on RoCE the remote CM rejects with "invalid service ID". */
		if (ret == ECONNREFUSED)
			cm_post_event(cid, RDMA_CM_EVENT_REJECTED, CM_REJ_INVALID_SERVICE_ID, NULL,
				      NULL);
		else
			cm_post_event(cid, RDMA_CM_EVENT_UNREACHABLE, -ret, NULL, NULL);
		pthread_mutex_unlock(&cid->lock);
		return finish_sync(cid, sync, RDMA_CM_EVENT_ESTABLISHED);
	}
	cm_msg_init(&req, CM_MSG_REQ);
	fill_from_param(&req, cid, conn_param, id->qp ? id->qp->qp_num : conn_param->qp_num);
	if (cm_id_is_ud(cid))
		req.psn = CM_UD_QKEY;
	cid->state = CM_CONNECTING;
	ret = cm_thread_watch(cid);
	if (!ret)
		ret = cm_send(cid, &req);
	if (ret)
		cid->state = CM_ROUTE_RESOLVED;
	pthread_mutex_unlock(&cid->lock);
	if (ret) {
		cm_thread_unwatch(cid);
		return fail(ret);
	}
	return finish_sync(cid, sync, expected);
}

/* id->lock held: everything of rdma_accept but the wait. */
static int accept_locked(struct cm_id *cid, struct rdma_conn_param *conn_param)
{
	struct rdma_conn_param defaults;
	struct cm_msg rep;
	int ret;

	if (cid->state != CM_REQ_RECEIVED ||
	    (conn_param && conn_param->private_data_len >
			   (cm_id_is_ud(cid) ? CM_SIDR_REP_PRIVATE_DATA : CM_REP_PRIVATE_DATA)) ||
	    (!cid->id.qp && !conn_param))
		return EINVAL;
	cm_release_kept_event(cid);	/* rdma_get_request's, as librdmacm does */
	if (!conn_param) {
		default_param(&defaults, &cid->peer);
		conn_param = &defaults;
	}
	cid->local_param = *conn_param;
	cid->local_param.private_data = NULL;
	cid->local_psn = random_psn();
	if (cid->id.qp && !cm_id_is_ud(cid)) {
		ret = cm_qp_to_rtr_rts(cid, &cid->peer);
		if (ret)
			return ret;
	}
	cm_msg_init(&rep, CM_MSG_REP);
	fill_from_param(&rep, cid, conn_param,
			cid->id.qp ? cid->id.qp->qp_num : conn_param->qp_num);
	/* A SIDR reply ends it: the passive side gets no further event. */
	if (cm_id_is_ud(cid))
		rep.psn = CM_UD_QKEY;
	cid->state = cm_id_is_ud(cid) ? CM_ESTABLISHED : CM_ACCEPTED;
	return cm_send(cid, &rep);
}

EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct cm_id *cid = to_cm_id(id);
	bool wait;
	int ret;

	if (!cid)
		return fail(EINVAL);
	pthread_mutex_lock(&cid->lock);
	ret = accept_locked(cid, conn_param);
	wait = cid->sync && !cm_id_is_ud(cid);
	pthread_mutex_unlock(&cid->lock);
	if (ret)
		return fail(ret);
	return finish_sync(cid, wait, RDMA_CM_EVENT_ESTABLISHED);
}

static int send_reject(struct cm_id *id, const void *private_data, uint8_t len, uint8_t reason)
{
	struct cm_msg rej;
	int ret;

	pthread_mutex_lock(&id->lock);
	if (id->state != CM_REQ_RECEIVED || len > CM_REJ_PRIVATE_DATA) {
		pthread_mutex_unlock(&id->lock);
		return fail(EINVAL);
	}
	cm_release_kept_event(id);
	reject_msg(&rej, reason);
	if (private_data && len) {
		memcpy(rej.private_data, private_data, len);
		rej.private_data_len = len;
	}
	ret = cm_send(id, &rej);
	if (ret == ENOTCONN || ret == ECONNRESET || ret == EPIPE)
		ret = 0;	/* the requester is gone: there is nobody left to tell */
	id->state = CM_DISCONNECTED;
	pthread_mutex_unlock(&id->lock);
	cm_thread_unwatch(id);
	pthread_mutex_lock(&id->lock);
	close(id->sock);
	id->sock = -1;
	id->lost = true;
	pthread_mutex_unlock(&id->lock);
	return ret ? fail(ret) : 0;
}

EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	if (!id)
		return fail(EINVAL);
	return send_reject(to_cm_id(id), private_data, private_data_len, CM_REJ_CONSUMER_DEFINED);
}

EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
			   uint8_t private_data_len)
{
	if (!id)
		return fail(EINVAL);
	/* What the kernel sends for an ECE refusal. */
	return send_reject(to_cm_id(id), private_data, private_data_len,
			   CM_REJ_VENDOR_OPTION_NOT_SUPPORTED);
}

static int send_rtu(struct cm_id *id)
{
	struct cm_msg rtu;

	cm_msg_init(&rtu, CM_MSG_RTU);
	return cm_send(id, &rtu);
}

EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	struct cm_id *cid = to_cm_id(id);
	bool sync;
	int ret;

	if (!cid)
		return fail(EINVAL);
	pthread_mutex_lock(&cid->lock);
	ret = cid->state == CM_REP_RECEIVED ? send_rtu(cid) : EINVAL;
	if (!ret) {
		cid->state = CM_ESTABLISHED;
		cm_post_event(cid, RDMA_CM_EVENT_ESTABLISHED, 0, &cid->peer, NULL);
	}
	sync = cid->sync;
	pthread_mutex_unlock(&cid->lock);
	return ret ? fail(ret) : finish_sync(cid, sync, RDMA_CM_EVENT_ESTABLISHED);
}

EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	struct cm_id *cid = to_cm_id(id);
	struct cm_msg dreq;
	bool connected, sync;

	if (!cid)
		return fail(EINVAL);
	/*
	 * As the kernel's rdma_disconnect(): the QP stops first, flushing what is posted, even
	 * when the peer disconnected already (rping's CQ thread waits for that flush); only a
	 * connected id sends DREQ and reports DISCONNECTED.
	 */
	cm_qp_to_error(cid);
	pthread_mutex_lock(&cid->lock);
	connected = cid->state == CM_ESTABLISHED || cid->state == CM_ACCEPTED ||
		    cid->state == CM_CONNECTING || cid->state == CM_REP_RECEIVED;
	if (connected) {
		cid->state = CM_DISCONNECTED;
		cm_msg_init(&dreq, CM_MSG_DREQ);
		cm_send(cid, &dreq);	/* a peer that is gone hears it from the socket */
		cm_post_event(cid, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, NULL);
	}
	sync = cid->sync && connected;
	pthread_mutex_unlock(&cid->lock);
	return finish_sync(cid, sync, RDMA_CM_EVENT_DISCONNECTED);
}

EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	(void)event;
	if (!id)
		return fail(EINVAL);
	return 0;	/* the CM needs no nudge: RTU is always sent */
}

EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	struct cm_id *cid = to_cm_id(id);

	if (!cid || !ece)
		return fail(EINVAL);
	pthread_mutex_lock(&cid->lock);
	cid->ece_vendor_id = ece->vendor_id;
	cid->ece_options = ece->options;
	pthread_mutex_unlock(&cid->lock);
	return 0;
}

EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	struct cm_id *cid = to_cm_id(id);

	if (!cid || !ece)
		return fail(EINVAL);
	memset(ece, 0, sizeof(*ece));
	pthread_mutex_lock(&cid->lock);
	ece->vendor_id = cid->peer.ece_vendor_id;
	ece->options = cid->peer.ece_options;
	pthread_mutex_unlock(&cid->lock);
	return 0;
}

/* The new id of a connection request, its addresses those of the connection. */
static struct cm_id *request_id(struct cm_id *listener, int fd, const struct cm_msg *msg,
				const struct sockaddr_storage *peer)
{
	struct cm_id *child = cm_id_new(listener->id.channel, listener->id.context,
					listener->id.ps, listener->id.qp_type);
	struct rdma_addr *addr;
	union ibv_gid sgid;
	socklen_t len;

	if (!child)
		return NULL;
	addr = &child->id.route.addr;
	len = sizeof(addr->src_storage);
	getsockname(fd, &addr->src_addr, &len);
	memcpy(&addr->dst_storage, peer, sizeof(*peer));
	child->id.verbs = cm_softrdma_context();
	if (cm_gid_index_of(child->id.verbs, &addr->src_addr, &sgid) < 0) {
		cm_id_free(child);	/* reached us on an address the device lacks */
		return NULL;
	}
	child->sock = fd;
	child->passive = true;
	child->peer = *msg;
	child->id.port_num = 1;
	addr->addr.ibaddr.sgid = sgid;
	memcpy(&addr->addr.ibaddr.dgid, msg->gid, 16);
	addr->addr.ibaddr.pkey = htons(0xffff);
	child->state = CM_REQ_RECEIVED;
	return child;
}

int cm_handle_req(struct cm_id *listener, int fd, const struct cm_msg *msg,
		  const struct sockaddr_storage *peer)
{
	struct cm_id *child = NULL;
	struct cm_msg rej;
	int ret = -1;

	pthread_mutex_lock(&listener->lock);
	if (listener->state != CM_LISTENING) {
		reject_msg(&rej, CM_REJ_INVALID_SERVICE_ID);	/* it stopped listening */
		cm_send_once(fd, &rej);
	} else if (!gid_is_peer(msg->gid, (const struct sockaddr *)peer)) {
		reject_msg(&rej, CM_REJ_INVALID_GID);
		cm_send_once(fd, &rej);
	} else {
		child = request_id(listener, fd, msg, peer);
	}
	if (child) {
		pthread_mutex_lock(&child->lock);
		ret = cm_thread_watch(child);
		if (!ret)
			cm_post_event(child, RDMA_CM_EVENT_CONNECT_REQUEST, 0, msg, listener);
		pthread_mutex_unlock(&child->lock);
		if (ret) {
			child->sock = -1;	/* the caller closes it */
			cm_id_free(child);
			ret = -1;
		}
	}
	pthread_mutex_unlock(&listener->lock);
	return ret;
}

/* The active side gives up on a REP: the peer is told, the application too. */
static void rep_failed(struct cm_id *id, uint8_t reason, int err)
{
	struct cm_msg rej;

	reject_msg(&rej, reason);
	cm_send(id, &rej);
	id->state = CM_DISCONNECTED;
	cm_post_event(id, RDMA_CM_EVENT_CONNECT_ERROR, -err, NULL, NULL);
}

static void handle_rep(struct cm_id *id, const struct cm_msg *msg)
{
	int ret;

	if (!gid_is_peer(msg->gid, &id->id.route.addr.dst_addr)) {
		rep_failed(id, CM_REJ_INVALID_GID, EPROTO);
		return;
	}
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
	ret = cm_qp_to_rtr_rts(id, msg);
	if (!ret)
		ret = send_rtu(id);
	if (ret) {
		rep_failed(id, CM_REJ_CONSUMER_DEFINED, ret);
		return;
	}
	id->state = CM_ESTABLISHED;
	cm_post_event(id, RDMA_CM_EVENT_ESTABLISHED, 0, msg, NULL);
}

static void peer_disconnected(struct cm_id *id)
{
	/*
	 * As the kernel's CM, this thread never touches the application's QP, which the
	 * application may be destroying right now: its own rdma_disconnect() stops the QP, and
	 * until then what the peer already answered still completes normally. Only, what the
	 * peer sent before this DREQ is taken in first (by QP number), as a NIC has: rxm closes
	 * its endpoint on DISCONNECTED and flushes every send whose ACK it has not seen.
	 */
	if (id->state == CM_ESTABLISHED || id->state == CM_ACCEPTED ||
	    id->state == CM_REP_RECEIVED) {
		id->state = CM_DISCONNECTED;
		cm_qp_take_arrived(id);
		cm_post_event(id, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, NULL);
	}
}

void cm_handle_msg(struct cm_id *id, const struct cm_msg *msg)
{
	struct cm_msg drep;

	switch (msg->type) {
	case CM_MSG_REP:
		if (id->state == CM_CONNECTING && !id->passive)
			handle_rep(id, msg);
		break;
	case CM_MSG_REJ:
		if (id->state == CM_CONNECTING && !id->passive) {
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
		/* Every DREQ is answered, as the IB CM answers a repeated one; a peer that
		 * sends them without reading the answers is cut off (send.c). */
		cm_msg_init(&drep, CM_MSG_DREP);
		cm_send(id, &drep);
		peer_disconnected(id);
		break;
	default:
		break;	/* a second REQ, DREP, or a newer peer's message: nothing to do */
	}
}

/* The socket goes at once, reset if the peer was cut off. */
static void close_lost(struct cm_id *id)
{
	struct linger reset = { .l_onoff = 1, .l_linger = 0 };

	id->lost = true;
	cm_thread_unwatch(id);	/* from its own callback: does not wait */
	if (id->cut_off)
		setsockopt(id->sock, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
	close(id->sock);
	id->sock = -1;
}

void cm_handle_conn_lost(struct cm_id *id)
{
	close_lost(id);
	if (id->state == CM_CONNECTING && !id->passive) {
		id->state = CM_DISCONNECTED;
		cm_post_event(id, RDMA_CM_EVENT_UNREACHABLE, -ECONNRESET, NULL, NULL);
		return;
	}
	peer_disconnected(id);
}

void cm_conn_close(struct cm_id *id, enum cm_state was)
{
	struct cm_msg msg;

	pthread_mutex_lock(&id->lock);
	if (id->sock >= 0) {
		if (!id->lost && was == CM_ESTABLISHED) {
			cm_msg_init(&msg, CM_MSG_DREQ);	/* the peer sees DISCONNECTED */
			cm_send_once(id->sock, &msg);
		} else if (!id->lost && was == CM_REQ_RECEIVED) {
			/* The IB CM rejects a request whose id is destroyed. */
			reject_msg(&msg, CM_REJ_CONSUMER_DEFINED);
			cm_send_once(id->sock, &msg);
		}
		close(id->sock);
		id->sock = -1;
		id->lost = true;
	}
	pthread_mutex_unlock(&id->lock);
}
