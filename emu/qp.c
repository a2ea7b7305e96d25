// SPDX-License-Identifier: MIT
/*
 * Queue pairs: creation and the QPN, modify (validated by qp_state.c before anything
 * changes), the queues, completions, the error state and its flushes, async events.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/internal.h"
#include "emu/limits.h"
#include "emu/log.h"
#include "kernel-abi/comp_channel.h"

static int check_cap(struct ibv_qp_cap *cap, bool has_srq)
{
	/* ibv_create_qp(3): with an SRQ the receive queue sizes are ignored. */
	if (has_srq) {
		cap->max_recv_wr = 0;
		cap->max_recv_sge = 0;
	}
	if (cap->max_send_wr > EMU_MAX_QP_WR || cap->max_recv_wr > EMU_MAX_QP_WR ||
	    cap->max_send_sge > EMU_MAX_SGE || cap->max_recv_sge > EMU_MAX_SGE ||
	    cap->max_inline_data > EMU_MAX_INLINE_DATA)
		return EINVAL;
	return 0;
}

/*
 * As rxe: a send WQE is as large as the larger of its SGE list and its inline data, and the
 * QP gets all of it both ways, so max_send_sge 1 brings 16 bytes of inline data (Debian's
 * rdma_xclient posts 16 inline bytes on such a QP).
 */
static void grant_wqe_room(struct ibv_qp_cap *cap)
{
	uint32_t room = cap->max_send_sge * (uint32_t)sizeof(struct ibv_sge);

	if (room < cap->max_inline_data)
		room = cap->max_inline_data;
	if (room > EMU_MAX_INLINE_DATA)
		room = EMU_MAX_INLINE_DATA;
	if (cap->max_inline_data < room)
		cap->max_inline_data = room;
	if (cap->max_send_sge < room / sizeof(struct ibv_sge))
		cap->max_send_sge = room / (uint32_t)sizeof(struct ibv_sge);
}

static void free_queues(struct emu_qp *qp)
{
	if (qp->sq.wqe)
		for (uint32_t i = 0; i < qp->cap.max_send_wr; i++) {
			free(qp->sq.wqe[i].sge);
			free(qp->sq.wqe[i].inline_buf);
		}
	free(qp->sq.wqe);
	recv_queue_free(&qp->rq);
}

static int alloc_queues(struct emu_qp *qp)
{
	/* At least one SGE per WQE: a WR with one SGE is always valid to post. */
	uint32_t ssge = qp->cap.max_send_sge ? qp->cap.max_send_sge : 1;

	qp->sq.wqe = calloc(qp->cap.max_send_wr ? qp->cap.max_send_wr : 1, sizeof(*qp->sq.wqe));
	if (!qp->sq.wqe || recv_queue_init(&qp->rq, qp->cap.max_recv_wr, qp->cap.max_recv_sge))
		return ENOMEM;
	for (uint32_t i = 0; i < qp->cap.max_send_wr; i++) {
		qp->sq.wqe[i].sge = calloc(ssge, sizeof(struct ibv_sge));
		qp->sq.wqe[i].inline_buf = malloc(qp->cap.max_inline_data ? qp->cap.max_inline_data : 1);
		if (!qp->sq.wqe[i].sge || !qp->sq.wqe[i].inline_buf)
			return ENOMEM;
	}
	return 0;
}

/*
 * What each type is made of (the kernel's ib_create_qp): an XRC initiator has no receive
 * side (its receive CQ and SRQ are not used, its receive queue sizes are 0), a target has no
 * PD, CQs or queues of its own.
 */
static int check_parts(struct emu_qp_init *init)
{
	switch (init->type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_UD:
		return init->send_cq && init->recv_cq ? 0 : EINVAL;
	case IBV_QPT_XRC_SEND:
		init->recv_cq = NULL;
		init->srq = NULL;
		init->cap.max_recv_wr = init->cap.max_recv_sge = 0;
		return init->send_cq ? 0 : EINVAL;
	case IBV_QPT_XRC_RECV:
		init->send_cq = init->recv_cq = NULL;
		init->srq = NULL;
		init->pd_handle = 0;
		memset(&init->cap, 0, sizeof(init->cap));
		return init->xrcd ? 0 : EINVAL;
	default:
		return EOPNOTSUPP;	/* raw packet...: not built */
	}
}

int emu_qp_create(struct emu_engine *e, struct emu_qp_init *init, struct emu_qp **out)
{
	struct emu_qp *qp;
	int ret;

	ret = check_parts(init);
	if (!ret)
		ret = check_cap(&init->cap, init->srq);
	if (ret)
		return ret;
	if (init->type != IBV_QPT_XRC_RECV)
		grant_wqe_room(&init->cap);
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return ENOMEM;
	qp->engine = e;
	pthread_mutex_init(&qp->lock, NULL);
	qp->type = init->type;
	qp->state = IBV_QPS_RESET;
	qp->handle = init->handle;
	qp->async_fd = init->async_fd;
	qp->events_raised = init->events_raised;
	qp->pd_handle = init->pd_handle;
	qp->xrcd = init->type == IBV_QPT_XRC_RECV ? init->xrcd : 0;
	qp->send_cq = init->send_cq;
	qp->recv_cq = init->recv_cq;
	qp->sq_sig_all = init->sq_sig_all;
	qp->cap = init->cap;
	qp->resp.cur_recv.sge = qp->resp.cur_recv_sge;
	ret = alloc_queues(qp);
	if (!ret)
		ret = engine_register_qp(e, qp);
	if (ret) {
		free_queues(qp);
		pthread_mutex_destroy(&qp->lock);
		free(qp);
		return ret;
	}
	qp->faults = fault_attach(qp->qpn);
	counters_qp_register(&qp->counters, qp->qpn);
	qp->srq = init->srq;
	if (qp->srq)
		srq_attach(qp->srq);
	*out = qp;
	return 0;
}

static void destroy_on_engine(void *arg)
{
	struct emu_qp *qp = arg;

	engine_unregister_qp(qp->engine, qp);
	mcast_detach_all(qp);	/* ibv_close_device's: a user's destroy was EBUSY while attached */
	pthread_mutex_lock(&qp->lock);
	qp_send_posted(qp);	/* sent before it goes, as a NIC would have */
	qp_streams_close(qp);	/* what was placed directly is folded into its counters */
	pthread_mutex_unlock(&qp->lock);
	/* Last: the frames just sent and the placements folded count in the QP's totals. */
	counters_qp_unregister(&qp->counters);
}

int emu_qp_destroy(struct emu_qp *qp)
{
	/* On the engine thread nothing of this QP can be running while it goes. */
	engine_call_sync(qp->engine, destroy_on_engine, qp);
	/*
	 * Its receive completions that no poll took go, as mlx5's cq_clean takes them: a
	 * program acts on one by reposting to the QP (libfabric's ofi_rxm did, on the
	 * endpoint it had just closed, and crashed). Its send completions stay, as on rxe: they
	 * tell which sends finished, and programs read them after the destroy (libfabric's
	 * verbs provider drains the CQ after rdma_destroy_ep and reports every send it did not
	 * find as flushed: the last message of a finished exchange, on a busy machine).
	 */
	if (qp->recv_cq)
		emu_cq_discard_qp_recvs(qp->recv_cq, qp->qpn);
	if (qp->srq)
		srq_detach(qp->srq);
	if (qp->resp.xrc_srq)
		srq_put(qp->resp.xrc_srq);
	free(qp->resp.held);
	free_queues(qp);
	fault_detach(qp->faults);
	pthread_mutex_destroy(&qp->lock);
	free(qp);
	return 0;
}

uint32_t emu_qp_num(const struct emu_qp *qp)
{
	return qp->qpn;
}

enum ibv_qp_state emu_qp_state(struct emu_qp *qp)
{
	enum ibv_qp_state s;

	pthread_mutex_lock(&qp->lock);
	s = qp->state;
	pthread_mutex_unlock(&qp->lock);
	return s;
}

void emu_async_event(int fd, uint64_t element, enum ibv_event_type event,
		     _Atomic uint32_t *raised)
{
	struct uverbs_async_event ev = { .element = element, .event_type = event };

	if (fd < 0)
		return;
	/* The provider's destroy settles the events it knows were written (provider/events.c). */
	if (write(fd, &ev, sizeof(ev)) == sizeof(ev)) {
		if (raised)
			atomic_fetch_add_explicit(raised, 1, memory_order_relaxed);
	}
	/* else the application is not reading its async events: they are lost, as on a full
	 * kernel event queue. */
}

void qp_raise_event(struct emu_qp *qp, enum ibv_event_type event)
{
	emu_async_event(qp->async_fd, qp->handle, event, qp->events_raised);
}

void emu_qp_set_owner(struct emu_qp *qp, uint64_t handle, int async_fd,
		      _Atomic uint32_t *events_raised)
{
	pthread_mutex_lock(&qp->lock);
	qp->handle = handle;
	qp->async_fd = async_fd;
	qp->events_raised = events_raised;
	pthread_mutex_unlock(&qp->lock);
}

enum recv_take qp_take_recv(struct emu_qp *qp, uint64_t need, struct recv_wqe *into)
{
	enum recv_take got;

	if (qp->srq)
		return srq_take(qp->srq, need, into);
	if (qp->type == IBV_QPT_XRC_RECV)	/* the SRQ the request named (responder.c) */
		return qp->resp.xrc_srq ? srq_take(qp->resp.xrc_srq, need, into) : RECV_NONE;
	got = recv_queue_take(&qp->rq, need, into);
	into->pd_handle = qp->pd_handle;
	return got;
}

void qp_complete_send(struct emu_qp *qp, struct send_wqe *wqe, enum ibv_wc_status status)
{
	struct ibv_wc wc = {
		.wr_id = wqe->wr.wr_id,
		.status = status,
		.opcode = requester_wc_opcode(wqe->wr.opcode),
		.byte_len = (uint32_t)wqe->length,
		.qp_num = qp->qpn,
	};

	if (status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND)
		qp_counter_add(&qp->counters, EMU_CNT_RDMA_SENDS, 1);
	if (status == IBV_WC_SUCCESS && !wqe->signaled)
		return;
	if (!emu_cq_push(qp->send_cq, &wc, false) && qp->state != IBV_QPS_ERR)
		qp_fatal(qp, IBV_EVENT_QP_FATAL);
}

void qp_recv_wc(struct emu_qp *qp, const struct recv_wqe *rwqe, enum ibv_wc_status st,
		enum ibv_wc_opcode op, uint32_t byte_len, uint32_t ex, int wc_flags,
		struct ibv_wc *wc)
{
	*wc = (struct ibv_wc){
		.wr_id = rwqe->wr_id,
		.status = st,
		.opcode = op,
		.byte_len = byte_len,
		.qp_num = qp->qpn,
		.src_qp = qp->attr.dest_qp_num,
		.wc_flags = (unsigned int)wc_flags,
	};
	if (wc_flags & IBV_WC_WITH_INV)
		wc->invalidated_rkey = ex;
	else
		wc->imm_data = ex;
	if (st == IBV_WC_SUCCESS && op == IBV_WC_RECV)
		qp_counter_add(&qp->counters, EMU_CNT_RDMA_RECVS, 1);
}

void qp_deliver_recv(struct emu_qp *qp, const struct ibv_wc *wc, bool solicited)
{
	if (qp->type == IBV_QPT_XRC_RECV) {
		bool overrun;

		/* An SRQ destroyed meanwhile has no CQ to report to any more. */
		if (qp->resp.xrc_srq && srq_complete(qp->resp.xrc_srq, wc, solicited, &overrun) &&
		    overrun && qp->state != IBV_QPS_ERR)
			qp_fatal(qp, IBV_EVENT_QP_FATAL);
		return;
	}
	if (!emu_cq_push(qp->recv_cq, wc, solicited) && qp->state != IBV_QPS_ERR)
		qp_fatal(qp, IBV_EVENT_QP_FATAL);
}

void qp_complete_recv(struct emu_qp *qp, const struct recv_wqe *rwqe, enum ibv_wc_status st,
		      enum ibv_wc_opcode op, uint32_t byte_len, uint32_t ex, int wc_flags,
		      bool solicited)
{
	struct ibv_wc wc;

	qp_recv_wc(qp, rwqe, st, op, byte_len, ex, wc_flags, &wc);
	qp_deliver_recv(qp, &wc, solicited);
}

static void flush_queues(struct emu_qp *qp)
{
	struct ibv_sge sge[EMU_MAX_SGE];
	struct recv_wqe flushed = { .sge = sge };
	unsigned int sends = qp->sq.head - qp->comp.tail, recvs = 0;

	/* Receives already executed complete as they were, before anything is flushed. */
	responder_release_held(qp);
	while (qp->comp.tail != qp->sq.head) {
		struct send_wqe *wqe = &qp->sq.wqe[qp->comp.tail % qp->cap.max_send_wr];

		qp->comp.tail++;
		/* Flushed work always completes, signaled or not: it failed, and failures always show. */
		qp_complete_send(qp, wqe, IBV_WC_WR_FLUSH_ERR);
	}
	qp->req.next = qp->sq.head;
	qp->req.rd_atomic_out = 0;
	if (qp->resp.have_cur_recv) {
		qp->resp.have_cur_recv = false;
		qp_complete_recv(qp, &qp->resp.cur_recv, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, 0, 0,
				 false);
		recvs++;
	}
	/* An SRQ's WQEs belong to every QP that uses it: they stay for the others. */
	while (recv_queue_take(&qp->rq, 0, &flushed) == RECV_TAKEN) {
		qp_complete_recv(qp, &flushed, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, 0, 0,
				 false);
		recvs++;
	}
	if (sends || recvs)
		emu_debug("qp 0x%06x flushed %u send and %u receive WQEs (IBV_WC_WR_FLUSH_ERR)",
			  qp->qpn, sends, recvs);
}

/* Into ERR: the async event (if raise and not in ERR already), then every WQE flushed. */
static void enter_error(struct emu_qp *qp, bool raise, enum ibv_event_type event)
{
	bool was_error = qp->state == IBV_QPS_ERR;

	if (!was_error)
		emu_debug("qp 0x%06x goes from %s to ERR%s%s", qp->qpn, emu_qp_state_name(qp->state),
			  raise ? ", async event " : "", raise ? emu_qp_event_name(event) : "");
	qp->state = IBV_QPS_ERR;
	qp->attr.qp_state = IBV_QPS_ERR;
	direct_qp_changed(qp);	/* a requester on this host places nothing more */
	qp->comp.timer_ns = 0;
	if (!was_error && raise)
		qp_raise_event(qp, event);
	flush_queues(qp);
	/* Nothing more will be taken from the SRQ for this QP (rxe's flush_recv_queue()). */
	if (!was_error && qp->srq)
		qp_raise_event(qp, IBV_EVENT_QP_LAST_WQE_REACHED);
}

void qp_to_error(struct emu_qp *qp)
{
	enter_error(qp, false, IBV_EVENT_QP_FATAL);
}

void qp_fatal(struct emu_qp *qp, enum ibv_event_type event)
{
	enter_error(qp, true, event);
}

void qp_flush(struct emu_qp *qp)
{
	flush_queues(qp);
}

void qp_arm_timer(struct emu_qp *qp, int kind, uint64_t delay_ns)
{
	qp->comp.timer_kind = kind;
	qp->comp.timer_ns = engine_now_ns() + (delay_ns ? delay_ns : 1);
	engine_timer_changed(qp->engine, qp->comp.timer_ns);
}

void qp_conn_lost(struct emu_qp *qp, struct conn *c)
{
	if (c != qp->streams.req)
		return;
	/* Whatever was in flight is sent again on a new stream; PSNs stay, so the
	 * responder recognises what it already executed. */
	qp->req.next = qp->comp.tail;
	qp->req.rd_atomic_out = 0;
	qp->comp.lost = false;	/* all of it goes again */
	for (uint32_t i = qp->comp.tail; i != qp->sq.head; i++)
		if (qp->sq.wqe[i % qp->cap.max_send_wr].state == WQE_SENT)
			qp->sq.wqe[i % qp->cap.max_send_wr].state = WQE_QUEUED;
	if (qp->comp.tail != qp->sq.head && qp->state == IBV_QPS_RTS && !qp->comp.timer_ns)
		qp_arm_timer(qp, TIMER_CONNECT, qp_retry_interval_ns(qp));
}

uint64_t qp_retry_interval_ns(const struct emu_qp *qp)
{
	/* timeout 0 waits forever for an answer, but a lost stream is still reopened. */
	return qp->attr.timeout ? qp_timeout_to_ns(qp->attr.timeout) : QP_RECONNECT_NS;
}

uint64_t qp_give_up_ns(const struct emu_qp *qp)
{
	return qp_timeout_to_ns(qp->attr.timeout) * (qp->attr.retry_cnt + 1u);
}

/* The peer's address: the AV's destination GID, and the port its QPN encodes. */
static void gid_to_sockaddr(const uint8_t gid[16], uint16_t port, struct sockaddr_in6 *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin6_family = AF_INET6;
	memcpy(&sa->sin6_addr, gid, 16);
	sa->sin6_port = htons(port);
}

static void apply_attrs(struct emu_qp *qp, const struct ibv_qp_attr *attr, int mask,
			const uint8_t sgid[16])
{
	struct ibv_qp_attr *a = &qp->attr;

	if (mask & IBV_QP_ACCESS_FLAGS)
		a->qp_access_flags = attr->qp_access_flags;
	if (mask & IBV_QP_QKEY)
		a->qkey = attr->qkey;
	if (mask & IBV_QP_PKEY_INDEX)
		a->pkey_index = attr->pkey_index;
	if (mask & IBV_QP_PORT)
		a->port_num = attr->port_num;
	if (mask & IBV_QP_AV) {
		a->ah_attr = attr->ah_attr;
		gid_to_sockaddr(sgid, 0, &qp->local_addr);
	}
	if (mask & IBV_QP_PATH_MTU)
		a->path_mtu = attr->path_mtu;
	if (mask & IBV_QP_DEST_QPN)
		a->dest_qp_num = attr->dest_qp_num & QP_QPN_MASK;
	if (mask & (IBV_QP_AV | IBV_QP_DEST_QPN))
		gid_to_sockaddr(a->ah_attr.grh.dgid.raw, (uint16_t)(a->dest_qp_num >> 8),
				&qp->peer_addr);
	if (mask & IBV_QP_RQ_PSN) {
		a->rq_psn = attr->rq_psn & QP_PSN_MASK;
		qp->resp.epsn = a->rq_psn;
	}
	if (mask & IBV_QP_SQ_PSN) {
		a->sq_psn = attr->sq_psn & QP_PSN_MASK;
		qp->req.psn = a->sq_psn;
	}
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		a->max_rd_atomic = attr->max_rd_atomic;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		a->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		a->min_rnr_timer = attr->min_rnr_timer;
	if (mask & IBV_QP_TIMEOUT)
		a->timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT) {
		a->retry_cnt = attr->retry_cnt;
		qp->comp.retries_left = attr->retry_cnt;
	}
	if (mask & IBV_QP_RNR_RETRY) {
		a->rnr_retry = attr->rnr_retry;
		qp->comp.rnr_retries_left = attr->rnr_retry;
	}
	if (mask & IBV_QP_SQ_PSN)
		a->sq_psn = attr->sq_psn & QP_PSN_MASK;
	if (mask & (IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT))
		qp_stream_liveness_changed(qp);
}

static void reset_qp(struct emu_qp *qp)
{
	qp->sq.head = qp->req.next = qp->comp.tail = 0;
	qp->comp.lost = false;
	recv_queue_clear(&qp->rq);
	qp->req.rd_atomic_out = 0;
	qp->resp.have_cur_recv = false;
	qp->resp.rnr_dropping = false;
	/* Executed before the reset: their completions stand, as a NIC's written CQEs do. */
	responder_release_held(qp);
	qp->resp.ack_pending = false;
	qp->resp.atomics_done = 0;
	qp->comp.timer_ns = 0;
	qp->resp.msn = 0;
	if (qp->resp.xrc_srq) {
		srq_put(qp->resp.xrc_srq);
		qp->resp.xrc_srq = NULL;
	}
	memset(&qp->attr, 0, sizeof(qp->attr));
}

struct transition_call {
	struct emu_qp *qp;
	enum ibv_qp_state next;
};

/* The parts of a transition that touch streams, which only the engine thread may. */
static void transition_on_engine(void *arg)
{
	struct transition_call *t = arg;
	struct emu_qp *qp = t->qp;

	pthread_mutex_lock(&qp->lock);
	switch (t->next) {
	case IBV_QPS_RESET:
		qp_streams_close(qp);
		break;
	case IBV_QPS_RTR:
		qp_stream_bind_pending(qp);
		break;
	case IBV_QPS_RTS:
		if (!qp_is_connected(qp))
			break;
		qp_stream_bind_pending(qp);
		qp_stream_open(qp);
		requester_progress(qp);
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&qp->lock);
}

int emu_qp_modify(struct emu_qp *qp, const struct ibv_qp_attr *attr, int attr_mask,
		  const struct qp_attr_limits *lim, const uint8_t sgid[16])
{
	struct transition_call t = { .qp = qp };
	enum ibv_qp_state cur, next;
	int ret;

	/* Into ERR: first what the peer already sent, as a NIC would have taken it. */
	if ((attr_mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_ERR && qp_is_connected(qp))
		qp_streams_settle(qp);
	pthread_mutex_lock(&qp->lock);
	cur = (attr_mask & IBV_QP_CUR_STATE) ? attr->cur_qp_state : qp->state;
	next = (attr_mask & IBV_QP_STATE) ? attr->qp_state : cur;
	ret = qp_check_attr_values(attr, attr_mask, lim);
	if (!ret)
		ret = qp_modify_is_allowed(cur, next, qp->type, attr_mask);
	if (ret) {
		pthread_mutex_unlock(&qp->lock);
		return ret;
	}
	if (next == IBV_QPS_RESET) {
		reset_qp(qp);
	} else {
		apply_attrs(qp, attr, attr_mask, sgid);
	}
	if (next == IBV_QPS_ERR) {
		qp_to_error(qp);	/* asked for: no async event */
	} else {
		qp->state = next;
		qp->attr.qp_state = next;
	}
	direct_qp_changed(qp);	/* the state or the rights a same-host requester checks */
	t.next = next;
	pthread_mutex_unlock(&qp->lock);
	if (next != cur || next == IBV_QPS_RESET)
		engine_call_sync(qp->engine, transition_on_engine, &t);
	return 0;
}

int emu_qp_query(struct emu_qp *qp, struct ibv_qp_attr *attr, struct ibv_qp_init_attr *init)
{
	pthread_mutex_lock(&qp->lock);
	*attr = qp->attr;
	attr->qp_state = qp->state;
	attr->cur_qp_state = qp->state;
	attr->cap = qp->cap;
	attr->sq_draining = 0;
	attr->path_mig_state = IBV_MIG_MIGRATED;
	memset(init, 0, sizeof(*init));
	init->qp_type = qp->type;
	init->cap = qp->cap;
	init->sq_sig_all = qp->sq_sig_all;
	pthread_mutex_unlock(&qp->lock);
	return 0;
}

int emu_qp_post_recv(struct emu_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	int ret = 0;

	pthread_mutex_lock(&qp->lock);
	for (; wr; wr = wr->next) {
		/* As rxe: a QP with an SRQ has no receive queue of its own to post to (nor has
		 * either half of XRC), and a QP in RESET takes none (IBTA C10-97.2.1 leaves it
		 * to the device; rxe refuses). */
		ret = qp->srq || qp->state == IBV_QPS_RESET || qp->type == IBV_QPT_XRC_SEND ||
		      qp->type == IBV_QPT_XRC_RECV ? EINVAL : recv_queue_post(&qp->rq, wr);
		if (ret)
			break;
		if (qp->state == IBV_QPS_ERR)
			qp_flush(qp);
	}
	if (ret)
		*bad_wr = wr;
	pthread_mutex_unlock(&qp->lock);
	return ret;
}
