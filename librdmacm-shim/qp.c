// SPDX-License-Identifier: MIT
/*
 * QPs made on ids, and the attributes the CM gives them: what rdma_init_qp_attr() reports
 * is exactly what the CM applies to its own QPs. As the kernel's CM, an RC QP starts with
 * no remote rights and gets REMOTE_WRITE on connect, plus REMOTE_READ and REMOTE_ATOMIC
 * when it accepts incoming READs and atomics (responder_resources > 0). What the id's
 * connection says is read under its lock (cm.h); the QP itself is the application's.
 *
 * XRC as librdmacm's cma.c has it: an id of type IBV_QPT_XRC_RECV makes a target QP in the
 * device's XRC domain (one per device, opened once, as its default PD), and rdma_create_srq
 * makes it an XRC SRQ of that domain reporting to the id's receive CQ; an id of type
 * IBV_QPT_XRC_SEND makes an initiator. Each half is moved with the kernel's masks for it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"
#include "provider/shim_calls.h"

#define CM_MIN_RNR_TIMER 12		/* 0.64 ms, the kernel CM's default */

static pthread_mutex_t pd_lock = PTHREAD_MUTEX_INITIALIZER;	/* default_pds */
static struct {
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_xrcd *xrcd;
} default_pds[8];

/* The device's slot; pd_lock held. */
static int device_slot(struct ibv_context *verbs)
{
	for (int i = 0; i < 8; i++)
		if (default_pds[i].verbs == verbs || !default_pds[i].verbs) {
			default_pds[i].verbs = verbs;
			return i;
		}
	return -1;
}

/* librdmacm gives ids without a PD one per device, shared, never freed. */
static struct ibv_pd *default_pd(struct ibv_context *verbs)
{
	struct ibv_pd *pd = NULL;
	int i;

	pthread_mutex_lock(&pd_lock);
	i = device_slot(verbs);
	if (i >= 0 && !default_pds[i].pd)
		default_pds[i].pd = ibv_alloc_pd(verbs);
	if (i >= 0)
		pd = default_pds[i].pd;
	pthread_mutex_unlock(&pd_lock);
	return pd;
}

/* The same for XRC domains (cma.c's ucma_get_xrcd()): one of the device's own, never closed. */
static struct ibv_xrcd *default_xrcd(struct ibv_context *verbs)
{
	struct ibv_xrcd_init_attr attr = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1,
		.oflags = O_CREAT,
	};
	struct ibv_xrcd *xrcd = NULL;
	int i;

	pthread_mutex_lock(&pd_lock);
	i = device_slot(verbs);
	if (i >= 0 && !default_pds[i].xrcd)
		default_pds[i].xrcd = ibv_open_xrcd(verbs, &attr);
	if (i >= 0)
		xrcd = default_pds[i].xrcd;
	pthread_mutex_unlock(&pd_lock);
	if (!xrcd && !errno)
		errno = ENOMEM;
	return xrcd;
}

static uint8_t clamp_rd_atomic(struct ibv_context *verbs, uint8_t want)
{
	struct ibv_device_attr attr;

	if (!ibv_query_device(verbs, &attr) && want > attr.max_qp_rd_atom)
		return (uint8_t)attr.max_qp_rd_atom;
	return want;
}

/* The attributes for moving id's QP to state; the peer's message is needed from RTR on. */
static int fill_qp_attr(struct cm_id *id, enum ibv_qp_state state, struct ibv_qp_attr *attr,
			int *mask)
{
	const struct cm_msg *peer = &id->peer;
	const struct rdma_conn_param *local = &id->local_param;
	bool active = !id->passive;
	struct ibv_port_attr port;
	union ibv_gid sgid;
	int sgid_index;

	memset(attr, 0, sizeof(*attr));
	attr->qp_state = state;
	switch (state) {
	case IBV_QPS_INIT:
		attr->pkey_index = 0;
		attr->port_num = 1;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (id->id.qp_type == IBV_QPT_UD) {
			attr->qkey = CM_UD_QKEY;
			*mask |= IBV_QP_QKEY;
		} else {
			attr->qp_access_flags = 0;
			*mask |= IBV_QP_ACCESS_FLAGS;
		}
		return 0;
	case IBV_QPS_RTR:
		if (cm_id_is_ud(id)) {
			*mask = IBV_QP_STATE;
			return 0;
		}
		if (id->state < CM_CONNECTING)
			return EINVAL;
		sgid_index = cm_gid_index_of(id->id.verbs, &id->id.route.addr.src_addr, &sgid);
		if (sgid_index < 0 || ibv_query_port(id->id.verbs, 1, &port))
			return EADDRNOTAVAIL;
		attr->path_mtu = port.active_mtu;
		attr->dest_qp_num = peer->qpn;
		attr->rq_psn = peer->psn;
		attr->ah_attr.is_global = 1;
		attr->ah_attr.port_num = 1;
		attr->ah_attr.grh.sgid_index = (uint8_t)sgid_index;
		attr->ah_attr.grh.hop_limit = 64;
		attr->ah_attr.grh.traffic_class = id->tos;
		memcpy(&attr->ah_attr.grh.dgid, peer->gid, 16);
		attr->qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
		if (local->responder_resources)
			attr->qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN | IBV_QP_ACCESS_FLAGS;
		/* Responder resources and the RNR timer: not for an XRC initiator (no responder). */
		if (id->id.qp_type != IBV_QPT_XRC_SEND) {
			attr->max_dest_rd_atomic = clamp_rd_atomic(id->id.verbs,
								   local->responder_resources);
			attr->min_rnr_timer = CM_MIN_RNR_TIMER;
			*mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
		return 0;
	case IBV_QPS_RTS:
		if (cm_id_is_ud(id)) {
			attr->sq_psn = 0;
			*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
			return 0;
		}
		if (id->state < CM_CONNECTING)
			return EINVAL;
		attr->sq_psn = id->local_psn;
		attr->timeout = id->ack_timeout;
		/* REQ's retry count serves both sides; each side's RNR retries are the peer's ask. */
		attr->retry_cnt = (active ? local->retry_count : peer->retry_count) & 7;
		attr->rnr_retry = peer->rnr_retry_count & 7;
		attr->max_rd_atomic = clamp_rd_atomic(id->id.verbs, local->initiator_depth);
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT;
		/* An XRC target sends nothing: the kernel's table asks it for these two only. */
		if (id->id.qp_type != IBV_QPT_XRC_RECV)
			*mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		return 0;
	default:
		return EINVAL;
	}
}

EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
			     int *qp_attr_mask)
{
	int ret;

	if (!id || !qp_attr || !qp_attr_mask) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&to_cm_id(id)->lock);
	ret = fill_qp_attr(to_cm_id(id), qp_attr->qp_state, qp_attr, qp_attr_mask);
	pthread_mutex_unlock(&to_cm_id(id)->lock);
	if (ret) {
		errno = ret;
		return -1;
	}
	return 0;
}

static int modify_to(struct cm_id *id, enum ibv_qp_state state)
{
	struct ibv_qp_attr attr;
	int mask, ret;

	ret = fill_qp_attr(id, state, &attr, &mask);
	return ret ? ret : ibv_modify_qp(id->id.qp, &attr, mask);
}

int cm_qp_to_rtr_rts(struct cm_id *id, const struct cm_msg *peer)
{
	int ret;

	id->peer = *peer;
	ret = modify_to(id, IBV_QPS_RTR);
	return ret ? ret : modify_to(id, IBV_QPS_RTS);
}

int cm_qp_to_error(struct cm_id *id)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

	return id->id.qp ? ibv_modify_qp(id->id.qp, &attr, IBV_QP_STATE) : 0;
}

/*
 * The soft device's provider takes in what the peer of our QP sent (provider/shim_calls.h).
 * Found in the library behind this context's own ops, so another provider's context is
 * left alone. NOLOAD: that library is resident while the context is open; the reference
 * dlopen() adds goes at once.
 */
void cm_qp_take_arrived(struct cm_id *id)
{
	softrdma_take_arrived_fn *take = NULL;
	struct ibv_context *ctx = id->id.verbs;
	Dl_info info;
	void *lib;

	if (!ctx || !ctx->ops.poll_cq || !dladdr((void *)ctx->ops.poll_cq, &info) ||
	    !info.dli_fname)
		return;
	lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
	if (!lib)
		return;
	*(void **)&take = dlsym(lib, SOFTRDMA_TAKE_ARRIVED_SYMBOL);
	if (take)
		take(ctx, id->local_qpn);
	dlclose(lib);
}

/* Default CQs of an id without its own: one completion channel and CQ per direction. */
static int make_default_cqs(struct rdma_cm_id *id, int send_wr, int recv_wr)
{
	id->send_cq_channel = ibv_create_comp_channel(id->verbs);
	id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
	if (!id->send_cq_channel || !id->recv_cq_channel)
		return errno ? errno : ENOMEM;
	id->send_cq = ibv_create_cq(id->verbs, send_wr > 0 ? send_wr : 1, id, id->send_cq_channel,
				    0);
	id->recv_cq = ibv_create_cq(id->verbs, recv_wr > 0 ? recv_wr : 1, id, id->recv_cq_channel,
				    0);
	if (!id->send_cq || !id->recv_cq)
		return errno ? errno : ENOMEM;
	return 0;
}

static void destroy_default_cqs(struct rdma_cm_id *id)
{
	if (id->send_cq)
		ibv_destroy_cq(id->send_cq);
	if (id->recv_cq)
		ibv_destroy_cq(id->recv_cq);
	if (id->send_cq_channel)
		ibv_destroy_comp_channel(id->send_cq_channel);
	if (id->recv_cq_channel)
		ibv_destroy_comp_channel(id->recv_cq_channel);
	id->send_cq = id->recv_cq = NULL;
	id->send_cq_channel = id->recv_cq_channel = NULL;
}

EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	struct ibv_qp *qp;
	int ret;

	if (!id || !attr || !id->verbs || id->qp) {
		errno = EINVAL;
		return -1;
	}
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd ? id->pd : default_pd(id->verbs);
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
	}
	if (!attr->pd)
		return -1;
	if (!attr->send_cq || !attr->recv_cq) {
		ret = make_default_cqs(id, (int)attr->cap.max_send_wr, (int)attr->cap.max_recv_wr);
		if (ret)
			goto err_cqs;
		if (!attr->send_cq)
			attr->send_cq = id->send_cq;
		if (!attr->recv_cq)
			attr->recv_cq = id->recv_cq;
	}
	if (id->srq && !attr->srq)
		attr->srq = id->srq;
	attr->qp_type = id->qp_type == IBV_QPT_XRC_SEND || id->qp_type == IBV_QPT_XRC_RECV ?
			id->qp_type : attr->qp_type;
	if (attr->qp_type == IBV_QPT_XRC_RECV &&
	    (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)) {
		attr->xrcd = default_xrcd(id->verbs);
		attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
		if (!attr->xrcd) {
			ret = errno;
			goto err_cqs;
		}
	}
	qp = ibv_create_qp_ex(id->verbs, attr);
	if (!qp) {
		ret = errno;
		goto err_cqs;
	}
	id->qp = qp;
	id->pd = attr->pd;
	ret = modify_to(to_cm_id(id), IBV_QPS_INIT);
	/* A UD QP needs no peer: it is ready to send at once, as the kernel's CM makes it. */
	if (!ret && cm_id_is_ud(to_cm_id(id)))
		ret = modify_to(to_cm_id(id), IBV_QPS_RTR);
	if (!ret && cm_id_is_ud(to_cm_id(id)))
		ret = modify_to(to_cm_id(id), IBV_QPS_RTS);
	if (ret)
		goto err_qp;
	return 0;

err_qp:
	ibv_destroy_qp(qp);
	id->qp = NULL;
err_cqs:
	/* ret, not errno: destroying the CQs may change errno. */
	destroy_default_cqs(id);
	errno = ret;
	return -1;
}

EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
			  struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex ex;
	int ret;

	if (!qp_init_attr) {
		errno = EINVAL;
		return -1;
	}
	memset(&ex, 0, sizeof(ex));
	memcpy(&ex, qp_init_attr, sizeof(*qp_init_attr));
	/* The copy brought the caller's padding after sq_sig_all, where comp_mask lies. */
	ex.comp_mask = pd ? IBV_QP_INIT_ATTR_PD : 0;
	ex.pd = pd;
	ret = rdma_create_qp_ex(id, &ex);
	if (!ret) {
		qp_init_attr->cap = ex.cap;
		qp_init_attr->send_cq = ex.send_cq;
		qp_init_attr->recv_cq = ex.recv_cq;
	}
	return ret;
}

EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (!id || !id->qp)
		return;
	ibv_destroy_qp(id->qp);
	id->qp = NULL;
	/* An SRQ of the id may report to them: rdma_destroy_srq() takes them then. */
	if (!id->srq)
		destroy_default_cqs(id);
}

EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq *srq;

	if (!id || !attr || !id->verbs) {
		errno = EINVAL;
		return -1;
	}
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd ? id->pd : default_pd(id->verbs);
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type == IBV_SRQT_XRC) {
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd) {
			attr->xrcd = default_xrcd(id->verbs);
			attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD;
		}
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
			int ret = id->recv_cq ? 0 : make_default_cqs(id, 0, (int)attr->attr.max_wr);

			if (ret) {
				if (!id->qp)
					destroy_default_cqs(id);
				errno = ret;
				return -1;
			}
			attr->cq = id->recv_cq;
			attr->comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
		}
		if (!attr->xrcd)
			return -1;
	}
	srq = ibv_create_srq_ex(id->verbs, attr);
	if (!srq)
		return -1;	/* errno from the device: EOPNOTSUPP while SRQs are not built */
	id->srq = srq;
	id->pd = attr->pd;
	return 0;
}

EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
			   struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ex = { 0 };

	if (!attr) {
		errno = EINVAL;
		return -1;
	}
	ex.srq_context = attr->srq_context;
	ex.attr = attr->attr;
	/* An XRC target's id gets an XRC SRQ (cma.c's rdma_create_srq()). */
	ex.srq_type = id && id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
	ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE;
	if (pd) {
		ex.pd = pd;
		ex.comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	return rdma_create_srq_ex(id, &ex);
}

EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (!id || !id->srq)
		return;
	ibv_destroy_srq(id->srq);
	id->srq = NULL;
	if (!id->qp)
		destroy_default_cqs(id);
}
