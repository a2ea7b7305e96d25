// SPDX-License-Identifier: MIT
/*
 * The completer: acknowledgements, NAKs, READ responses and atomic results arriving on the
 * stream the requester opened; send completions in order; the ACK, RNR and retry timers.
 */
#include <errno.h>
#include <string.h>

#include "emu/counters.h"
#include "emu/internal.h"
#include "emu/log.h"

static struct send_wqe *wqe_at(struct emu_qp *qp, uint32_t index)
{
	return &qp->sq.wqe[index % qp->cap.max_send_wr];
}

static bool is_read_atomic(const struct send_wqe *wqe)
{
	return wqe->wr.opcode == IBV_WR_RDMA_READ || wqe->wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       wqe->wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

void completer_advance(struct emu_qp *qp)
{
	while (qp->comp.tail != qp->req.next) {
		struct send_wqe *wqe = wqe_at(qp, qp->comp.tail);

		if (wqe->state != WQE_DONE)
			break;
		qp->comp.tail++;
		qp_complete_send(qp, wqe, wqe->status);
		if (wqe->status != IBV_WC_SUCCESS) {
			/* Requester-side errors raise no async event: the completion says it. */
			qp_to_error(qp);
			return;
		}
	}
	if (qp->comp.tail == qp->req.next && qp->comp.timer_kind == TIMER_ACK)
		qp->comp.timer_ns = 0;
}

/* The oldest sent WQE still waiting for its response. */
static struct send_wqe *oldest_waiting(struct emu_qp *qp)
{
	for (uint32_t i = qp->comp.tail; i != qp->req.next; i++)
		if (wqe_at(qp, i)->state != WQE_DONE)
			return wqe_at(qp, i);
	return NULL;
}

static void progress_made(struct emu_qp *qp)
{
	qp->comp.retries_left = qp->attr.retry_cnt;
	if (qp->comp.tail == qp->req.next)
		qp->comp.lost = false;	/* all that left is answered: nothing to resend */
	if (qp->comp.timer_kind == TIMER_ACK || qp->comp.timer_kind == TIMER_CONNECT) {
		qp->comp.timer_ns = 0;
		if (qp->comp.tail != qp->req.next && qp->attr.timeout)
			qp_arm_timer(qp, TIMER_ACK, qp_timeout_to_ns(qp->attr.timeout));
	}
}

static enum ibv_wc_status nak_status(uint8_t code)
{
	switch (code) {
	case NAK_INVALID_REQUEST:
		return IBV_WC_REM_INV_REQ_ERR;
	case NAK_REMOTE_ACCESS:
		return IBV_WC_REM_ACCESS_ERR;
	case NAK_REMOTE_OP:
		return IBV_WC_REM_OP_ERR;
	default:
		return IBV_WC_BAD_RESP_ERR;
	}
}

/* ACK/NAK for psn: WRITEs and SENDs up to it are done; a NAK fails the WQE at psn. */
static void handle_aeth(struct emu_qp *qp, const struct wire_packet *pkt)
{
	uint8_t type = pkt->syndrome & AETH_TYPE_MASK;

	if (type != AETH_ACK)
		emu_debug("qp 0x%06x received %s (code 0x%02x) psn 0x%06x from qp 0x%06x", qp->qpn,
			  aeth_syndrome_name(pkt->syndrome), pkt->syndrome, pkt->psn,
			  qp->attr.dest_qp_num);

	for (uint32_t i = qp->comp.tail; i != qp->req.next; i++) {
		struct send_wqe *wqe = wqe_at(qp, i);

		if (wqe->state == WQE_DONE)
			continue;
		if (!psn_le(wqe->psn, pkt->psn))
			break;
		if (wqe->psn == pkt->psn && type != AETH_ACK) {
			if (type == AETH_RNR_NAK) {
				qp_counter_add(&qp->counters, EMU_CNT_RCVD_RNR_ERR, 1);
				if (qp->attr.rnr_retry != QP_RNR_RETRY_MAX &&
				    qp->comp.rnr_retries_left-- == 0) {
					qp_counter_add(&qp->counters, EMU_CNT_RETRY_RNR_EXCEEDED_ERR, 1);
					wqe->state = WQE_DONE;
					wqe->status = IBV_WC_RNR_RETRY_EXC_ERR;
					break;
				}
				requester_rewind(qp, wqe->psn);
				qp_arm_timer(qp, TIMER_RNR,
					     qp_rnr_timer_to_ns(pkt->syndrome & AETH_VALUE_MASK));
				return;
			}
			wqe->state = WQE_DONE;
			wqe->status = nak_status(pkt->syndrome & AETH_VALUE_MASK);
			break;
		}
		/* Responses come in order: a READ/atomic before psn was answered already. */
		if (is_read_atomic(wqe))
			break;
		wqe->state = WQE_DONE;
	}
	if (type == AETH_ACK)
		qp->comp.rnr_retries_left = qp->attr.rnr_retry;
	progress_made(qp);
	completer_advance(qp);
}

void completer_acked(struct emu_qp *qp, uint32_t psn)
{
	struct wire_packet ack = { .opcode = OP_RC_ACK, .psn = psn,
				   .syndrome = AETH_ACK | AETH_ACK_NO_CREDIT };

	if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD && qp->state != IBV_QPS_SQE)
		return;
	handle_aeth(qp, &ack);
	requester_progress(qp);
}

bool completer_acks_any(struct emu_qp *qp, uint32_t psn)
{
	struct send_wqe *wqe;

	if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD && qp->state != IBV_QPS_SQE)
		return false;
	wqe = oldest_waiting(qp);
	return wqe && psn_le(wqe->psn, psn);
}

void completer_begin(struct emu_qp *qp, struct conn *c, const struct wire_packet *pkt,
		     struct rx_sink *sink)
{
	struct send_wqe *wqe;

	(void)c;
	sink->kind = SINK_DISCARD;
	if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD && qp->state != IBV_QPS_SQE)
		return;
	if (wire_operation(pkt->opcode) != OP_RC_READ_RESPONSE_ONLY)
		return;
	wqe = oldest_waiting(qp);
	if (!wqe || wqe->wr.opcode != IBV_WR_RDMA_READ || wqe->psn != pkt->psn ||
	    pkt->payload_len != wqe->length)
		return;	/* completer_end reports the bad response */
	sink->kind = SINK_LOCAL;
	sink->mem = qp->engine->mem;
	sink->pd_handle = qp->pd_handle;
	sink->needed = IBV_ACCESS_LOCAL_WRITE;
	sink->sge = wqe->sge;
	sink->num_sge = wqe->wr.num_sge;
}

static void finish_read_atomic(struct emu_qp *qp, struct send_wqe *wqe, enum ibv_wc_status st)
{
	wqe->state = WQE_DONE;
	wqe->status = st;
	if (qp->req.rd_atomic_out)
		qp->req.rd_atomic_out--;
	progress_made(qp);
	completer_advance(qp);
	requester_progress(qp);
}

static enum ibv_wc_status store_atomic_result(struct emu_qp *qp, struct send_wqe *wqe,
					      uint64_t orig)
{
	struct mem_region *ref;
	enum mem_access_result r;
	void *host;

	r = mr_check_local_access(qp->engine->mem, wqe->sge[0].lkey, qp->pd_handle,
				  IBV_ACCESS_LOCAL_WRITE, wqe->sge[0].addr, sizeof(orig), &ref, &host);
	if (r != MEM_ACCESS_OK)
		return mem_access_local_wc_status(r);
	memcpy(host, &orig, sizeof(orig));
	if (ref)
		mr_put(ref);
	return IBV_WC_SUCCESS;
}

void completer_end(struct emu_qp *qp, struct conn *c, const struct wire_packet *pkt,
		   struct rx_sink *sink)
{
	struct send_wqe *wqe;

	(void)c;
	if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD && qp->state != IBV_QPS_SQE)
		return;
	/* An answer to a resent request comes twice, and one past a lost answer is out of
	 * sequence: both are dropped, and the ACK timer resends what is still unanswered. */
	wqe = oldest_waiting(qp);
	if (wire_operation(pkt->opcode) != OP_RC_ACK && wqe && pkt->psn != wqe->psn)
		return;
	/* XRC's responses are RC's operations on another transport (belongs_here() checked it). */
	switch (wire_operation(pkt->opcode)) {
	case OP_RC_ACK:
		handle_aeth(qp, pkt);
		requester_progress(qp);
		return;
	case OP_RC_READ_RESPONSE_ONLY:
		wqe = oldest_waiting(qp);
		if (sink->kind != SINK_LOCAL || !wqe) {
			if (wqe)
				finish_read_atomic(qp, wqe, IBV_WC_BAD_RESP_ERR);
			return;
		}
		finish_read_atomic(qp, wqe, sink->failure == MEM_ACCESS_OK ? IBV_WC_SUCCESS :
					    mem_access_local_wc_status(sink->failure));
		return;
	case OP_RC_ATOMIC_ACK:
		wqe = oldest_waiting(qp);
		if (!wqe)
			return;
		if (wqe->psn != pkt->psn || !is_read_atomic(wqe) ||
		    wqe->wr.opcode == IBV_WR_RDMA_READ) {
			finish_read_atomic(qp, wqe, IBV_WC_BAD_RESP_ERR);
			return;
		}
		finish_read_atomic(qp, wqe, store_atomic_result(qp, wqe, pkt->orig));
		return;
	default:
		return;
	}
}

/* The oldest unanswered WQE reports IBV_WC_RETRY_EXC_ERR; everything after it is flushed. */
static void give_up(struct emu_qp *qp, struct send_wqe *wqe)
{
	if (!wqe)
		wqe = wqe_at(qp, qp->req.next);
	if (wqe == wqe_at(qp, qp->req.next) && qp->req.next != qp->sq.head)
		qp->req.next++;
	qp_counter_add(&qp->counters, EMU_CNT_RETRY_EXCEEDED_ERR, 1);
	wqe->state = WQE_DONE;
	wqe->status = IBV_WC_RETRY_EXC_ERR;
	completer_advance(qp);
}

/*
 * The stream is open and nothing was dropped: every request is in the peer's socket, and
 * TCP loses nothing, so the peer's process is slow or stopped, and its NIC would have
 * answered. Wait, as long as its host answers TCP (docs/semantics.md, "Liveness").
 */
static bool wait_for_live_peer(struct emu_qp *qp, struct send_wqe *wqe)
{
	struct conn *c = qp->streams.req;

	if (!c || c->state != CONN_OPEN || qp->comp.lost)
		return false;
	if (conn_peer_silent(c, qp_give_up_ns(qp) / 1000000)) {
		emu_debug("qp 0x%06x: the host of qp 0x%06x answers no TCP: IBV_WC_RETRY_EXC_ERR",
			  qp->qpn, qp->attr.dest_qp_num);
		give_up(qp, wqe);	/* its host is gone: as many tries as allowed, unanswered */
		return true;
	}
	qp_arm_timer(qp, TIMER_ACK, qp_timeout_to_ns(qp->attr.timeout));
	return true;
}

static void retry_or_fail(struct emu_qp *qp)
{
	struct send_wqe *wqe = oldest_waiting(qp);

	if (!wqe && qp->req.next == qp->sq.head)
		return;	/* nothing outstanding any more */
	if (qp->attr.timeout && wait_for_live_peer(qp, wqe))
		return;
	emu_debug("qp 0x%06x: no answer from qp 0x%06x in time, %u retries left%s", qp->qpn,
		  qp->attr.dest_qp_num, qp->comp.retries_left,
		  qp->comp.retries_left || !qp->attr.timeout ? "" : ": IBV_WC_RETRY_EXC_ERR");
	if (qp->comp.retries_left == 0 && qp->attr.timeout) {
		give_up(qp, wqe);
		return;
	}
	qp_counter_add(&qp->counters, EMU_CNT_COMPLETER_RETRY_ERR, 1);
	if (qp->attr.timeout)
		qp->comp.retries_left--;	/* with timeout 0 the requester waits forever */
	if (!qp->streams.req) {
		qp->streams.req = conn_connect(qp);
		qp_arm_timer(qp, TIMER_CONNECT, qp_retry_interval_ns(qp));
		requester_progress(qp);
		return;
	}
	/*
	 * A frame was lost (SOFTRDMA_FAULTS, or the peer's QP takes no requests), or the stream
	 * is still connecting. Resend from the oldest unanswered WQE, as IBA's requester does,
	 * unless bytes are still on their way (slow, not lossy).
	 */
	if (wqe && conn_tx_drained(qp->streams.req)) {
		qp->comp.lost = false;	/* what was lost goes again, from wqe on */
		requester_resend(qp, wqe->psn, qp->comp.retries_left + 1 < qp->attr.retry_cnt);
	}
	if (qp->attr.timeout)
		qp_arm_timer(qp, TIMER_ACK, qp_timeout_to_ns(qp->attr.timeout));
}

void completer_timer(struct emu_qp *qp)
{
	if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD)
		return;
	switch (qp->comp.timer_kind) {
	case TIMER_RNR:
		requester_progress(qp);
		/* What went out during the wait armed no ACK timer: a lost answer would hang. */
		if (!qp->comp.timer_ns && qp->comp.tail != qp->req.next && qp->attr.timeout)
			qp_arm_timer(qp, TIMER_ACK, qp_timeout_to_ns(qp->attr.timeout));
		break;
	case TIMER_ACK:
	case TIMER_CONNECT:
		retry_or_fail(qp);
		break;
	default:
		break;
	}
}
