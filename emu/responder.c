// SPDX-License-Identifier: MIT
/*
 * The responder: requests arriving on the stream the peer opened. Every WRITE, READ and
 * atomic goes through mr_check_remote_access() (emu/mr.c), the one place that decides what
 * a peer may touch; SENDs land in posted receives through mr_check_local_access().
 * Outcomes, NAKs and events are those of docs/semantics.md.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/counters.h"
#include "emu/internal.h"
#include "emu/log.h"
#include "emu/srq.h"

/*
 * The PD a request's memory is checked against: the QP's, or for an XRC target, which has
 * none, that of the SRQ the request named (IBA's XRC rule; docs/semantics.md, "XRC").
 */
static uint32_t resp_pd(const struct emu_qp *qp)
{
	return qp->type == IBV_QPT_XRC_RECV ? qp->resp.xrc_pd_handle : qp->pd_handle;
}

/* The opcode of a response on this QP's transport (RC's or XRC's). */
static uint8_t response_opcode(const struct emu_qp *qp, uint8_t rc_opcode)
{
	return qp_opcode_transport(qp->type) | rc_opcode;
}

static bool accepts_requests(const struct emu_qp *qp)
{
	return qp->state == IBV_QPS_RTR || qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD ||
	       qp->state == IBV_QPS_SQE;
}

/* An ACK or NAK for psn into hdr; returns its length. */
static unsigned int build_aeth(const struct emu_qp *qp, uint8_t *hdr, uint8_t syndrome,
			       uint32_t psn)
{
	struct wire_packet pkt = {
		.opcode = response_opcode(qp, OP_RC_ACK),
		.qpn = qp->attr.dest_qp_num,
		.psn = psn,
		.syndrome = syndrome,
		.msn = qp->resp.msn,
	};

	return wire_build(hdr, &pkt);
}

void responder_release_held(struct emu_qp *qp)
{
	struct qp_resp_info *resp = &qp->resp;

	/* A push that overruns the CQ takes the QP to ERR, whose flush comes back here for
	 * the rest: each entry is taken before it is pushed. */
	while (resp->released < resp->nheld) {
		struct held_recv h = resp->held[resp->released++];

		qp_deliver_recv(qp, &h.wc, h.solicited);
	}
	resp->nheld = resp->released = 0;
}

/*
 * ACKs are coalesced (IBTA 9.7.5.1.2: an ACK acknowledges every request before it): one for
 * all the SENDs and WRITEs of one read from the stream. It goes out when the read ends,
 * before any other response (so PSNs on the wire stay in order), and the receive
 * completions it covers become visible only once it is handed to the stream: an answer the
 * application sends on seeing one, on its other stream, comes after it, as on one wire.
 */
void responder_flush_ack(struct emu_qp *qp, struct conn *c)
{
	uint8_t hdr[4 + WIRE_MAX_HDR];

	if (qp->resp.ack_pending) {
		qp->resp.ack_pending = false;
		conn_send_frame(c, hdr, build_aeth(qp, hdr, AETH_ACK | AETH_ACK_NO_CREDIT,
						   qp->resp.ack_psn));
	}
	responder_release_held(qp);
}

/*
 * Keeps a receive completion until the owed ACK that covers it leaves; false if it is not
 * kept (nothing owed, as on UC or after a NAK; an XRC target, whose SRQ reference goes with
 * the request; no memory), and then the caller sends the ACK and pushes it at once. A full
 * set sends the ACK early: at most RESP_HELD_MAX wait.
 */
static bool hold_recv(struct emu_qp *qp, struct conn *c, const struct ibv_wc *wc,
		      bool solicited)
{
	struct qp_resp_info *resp = &qp->resp;

	if (!resp->ack_pending || qp->type == IBV_QPT_XRC_RECV)
		return false;
	if (!resp->held && !(resp->held = calloc(RESP_HELD_MAX, sizeof(*resp->held))))
		return false;
	if (resp->nheld == RESP_HELD_MAX) {
		responder_flush_ack(qp, c);
		return false;
	}
	resp->held[resp->nheld++] = (struct held_recv){ .wc = *wc, .solicited = solicited };
	return true;
}

/* Every response but the coalesced ACK: after that ACK. */
static void respond(struct emu_qp *qp, struct conn *c, const uint8_t *hdr, unsigned int len)
{
	responder_flush_ack(qp, c);
	conn_send_frame(c, hdr, len);
}

static void send_aeth(struct emu_qp *qp, struct conn *c, uint8_t syndrome, uint32_t psn)
{
	uint8_t hdr[4 + WIRE_MAX_HDR];

	if ((syndrome & AETH_TYPE_MASK) != AETH_ACK)
		emu_debug("qp 0x%06x sends %s psn 0x%06x to qp 0x%06x", qp->qpn,
			  aeth_syndrome_name(syndrome), psn, qp->attr.dest_qp_num);

	respond(qp, c, hdr, build_aeth(qp, hdr, syndrome, psn));
}

static uint8_t nak_for(enum mem_access_result r)
{
	switch (mem_access_remote_wc_status(r)) {
	case IBV_WC_REM_INV_REQ_ERR:
		return NAK_INVALID_REQUEST;
	case IBV_WC_REM_OP_ERR:
		return NAK_REMOTE_OP;
	default:
		return NAK_REMOTE_ACCESS;
	}
}

/* An RDMA WRITE (with or without immediate) of any transport: a RETH and a payload. */
static bool is_write(uint8_t opcode)
{
	uint32_t flags = wire_opcodes[opcode].flags;

	return (flags & HDR_RETH) && (flags & OPF_PAYLOAD);
}

static int needed_right(uint8_t opcode)
{
	uint32_t flags = wire_opcodes[opcode].flags;

	if (flags & HDR_ATMETH)
		return IBV_ACCESS_REMOTE_ATOMIC;
	if (flags & HDR_RETH)
		return is_write(opcode) ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ;
	return 0;
}

/*
 * The log line of a refused access: the request, the rule it broke, what its key named, and
 * what the requester is told.
 */
static void log_refusal(const struct emu_qp *qp, const struct wire_packet *pkt, uint64_t len,
			enum mem_access_result r, const struct mem_refusal *why)
{
	char qp_rights[80], rights[80], region[160];
	const char *answer = qp->type == IBV_QPT_UC ? "dropped (UC)" :
			     aeth_syndrome_name(AETH_NAK | nak_for(r));

	snprintf(region, sizeof(region), "%s", r == MEM_ACCESS_BAD_KEY ?
		 "no live region or window has this key" : "the key was not looked up");
	if (why->found && why->kind == MEM_KIND_WINDOW)
		snprintf(region, sizeof(region),
			 "window type %u [0x%" PRIx64 ", 0x%" PRIx64 ") pd %u rights %s, bound via qp 0x%06x",
			 why->mw_type, why->iova, why->iova + why->length, why->pd_handle,
			 emu_access_names(why->access, rights, sizeof(rights)), why->qpn);
	else if (why->found)
		snprintf(region, sizeof(region), "region [0x%" PRIx64 ", 0x%" PRIx64 ") pd %u rights %s",
			 why->iova, why->iova + why->length, why->pd_handle,
			 emu_access_names(why->access, rights, sizeof(rights)));
	emu_debug("qp 0x%06x refused %s psn 0x%06x from qp 0x%06x: rule \"%s\": rkey 0x%08x va 0x%" PRIx64
		  " len %" PRIu64 "; %s; qp pd %u rights %s; answer %s",
		  qp->qpn, wire_opcodes[pkt->opcode].name, pkt->psn, qp->attr.dest_qp_num,
		  mem_access_rule(r), pkt->rkey, pkt->va, len, region, resp_pd(qp),
		  emu_access_names(qp->attr.qp_access_flags, qp_rights, sizeof(qp_rights)), answer);
}

/*
 * The one access check (mr_check_remote_access()) as the responder runs it, and where a
 * refusal is counted and logged: whatever the request, and whenever it is checked (a duplicate READ or
 * atomic is checked when it is answered again), a key the peer guessed wrong shows in
 * resp_remote_access_errors. A request is refused at most once: the checks after the first
 * see a region that was there a moment ago.
 */
static enum mem_access_result check_access(struct emu_qp *qp, const struct wire_packet *pkt,
					   int right, uint64_t len, struct mem_region **ref,
					   void **host)
{
	struct mem_refusal why;
	enum mem_access_result r;

	r = mr_check_remote_access_why(qp->engine->mem, pkt->rkey, resp_pd(qp), qp->qpn,
				       qp->attr.qp_access_flags, right, pkt->va, len, ref, host,
				       &why);
	if (r != MEM_ACCESS_OK) {
		qp_counter_add(&qp->counters, EMU_CNT_RESP_REMOTE_ACCESS_ERRORS, 1);
		if (emu_log_on(EMU_LOG_DEBUG))
			log_refusal(qp, pkt, len, r, &why);
	}
	return r;
}

/* Checks the request's remote range as it arrives. */
static enum mem_access_result check_remote(struct emu_qp *qp, const struct wire_packet *pkt)
{
	struct mem_region *ref;
	uint64_t len = needed_right(pkt->opcode) == IBV_ACCESS_REMOTE_ATOMIC ? 8 : pkt->dma_len;
	enum mem_access_result r;
	void *host;

	r = check_access(qp, pkt, needed_right(pkt->opcode), len, &ref, &host);
	if (r == MEM_ACCESS_OK && ref)
		mr_put(ref);
	return r;
}

static void refuse(struct emu_qp *qp, uint8_t nak_code, enum mem_access_result why)
{
	qp->resp.verdict = RESP_NAK;
	qp->resp.nak_code = nak_code;
	qp->resp.refusal = why;
}

/* Points the sink at where the payload of an accepted request goes. */
static void aim_sink(struct emu_qp *qp, const struct wire_packet *pkt, struct rx_sink *sink)
{
	sink->mem = qp->engine->mem;
	if (is_write(pkt->opcode)) {
		sink->kind = SINK_REMOTE;
		sink->pd_handle = resp_pd(qp);
		sink->qp_access = qp->attr.qp_access_flags;
		sink->qpn = qp->qpn;
		sink->needed = IBV_ACCESS_REMOTE_WRITE;
		sink->rkey = pkt->rkey;
		sink->va = pkt->va;
	} else if (wire_opcodes[pkt->opcode].flags & OPF_RECV_WQE) {
		sink->kind = SINK_LOCAL;
		sink->pd_handle = qp->resp.cur_recv.pd_handle;
		sink->needed = IBV_ACCESS_LOCAL_WRITE;
		sink->sge = qp->resp.cur_recv.sge;
		sink->num_sge = qp->resp.cur_recv.num_sge;
	}
}

/*
 * The receive a request that consumes one lands in. A receive still held from a message
 * cut off with its stream (begin and end pair up on a live one) is the one: RC's
 * retransmission of that message, or UC's next message, lands in it, as rxe keeps
 * resp.wqe. Taking another would lose it: never completed, never flushed. need: as
 * qp_take_recv() (0: any size; the caller checks).
 */
static bool take_or_keep_recv(struct emu_qp *qp, uint64_t need)
{
	if (qp->resp.have_cur_recv)
		return need <= sge_total_length(qp->resp.cur_recv.sge, qp->resp.cur_recv.num_sge);
	if (qp_take_recv(qp, need, &qp->resp.cur_recv) != RECV_TAKEN)
		return false;
	qp->resp.have_cur_recv = true;
	return true;
}

/*
 * UC: nothing is acknowledged, so what cannot be placed (no right, bad key or range, no
 * receive, a receive too small) is dropped silently, before any receive is taken, and the
 * requester never knows (IBTA class D; rxe's drop_msg).
 */
static void uc_begin(struct emu_qp *qp, const struct wire_packet *pkt, struct rx_sink *sink)
{
	uint64_t need = is_write(pkt->opcode) ? 0 : pkt->payload_len;

	/* Nothing is resent, so there are no duplicates: each message is the next one. */
	qp->resp.epsn = (pkt->psn + 1) & BTH_PSN_MASK;
	if (is_write(pkt->opcode) &&
	    (check_remote(qp, pkt) != MEM_ACCESS_OK || pkt->payload_len != pkt->dma_len))
		return;
	if ((wire_opcodes[pkt->opcode].flags & OPF_RECV_WQE) && !take_or_keep_recv(qp, need)) {
		qp_counter_add(&qp->counters, EMU_CNT_OUT_OF_BUFFER, 1);
		return;
	}
	qp->resp.verdict = RESP_EXECUTE;
	aim_sink(qp, pkt, sink);
}

/*
 * An XRC target: every request names the SRQ it is for, which must be a live SRQ of the
 * target's XRC domain; its PD is the one the request's memory is checked against. Any other
 * number is refused with NAK invalid request, as a wrong opcode is: the requester gets
 * IBV_WC_REM_INV_REQ_ERR and the target goes to ERR (docs/semantics.md, "XRC"). The SRQ
 * is held (a reference) until the request is done: a destroy meanwhile cannot free it.
 */
static bool xrc_begin(struct emu_qp *qp, const struct wire_packet *pkt)
{
	/*
	 * A receive still held here was cut off with its stream (begin and end pair up on a
	 * live one). The resent request names the same SRQ and lands in it, as RC's does
	 * (take_or_keep_recv); a request naming another SRQ never gets the old one's receive
	 * or PD: the held receive is let go (only a peer that lies loses one this way).
	 */
	if (qp->resp.have_cur_recv && qp->resp.xrc_srq &&
	    emu_srq_num(qp->resp.xrc_srq) == pkt->srqn)
		return true;
	qp->resp.have_cur_recv = false;
	if (qp->resp.xrc_srq)
		srq_put(qp->resp.xrc_srq);
	qp->resp.xrc_srq = xrc_srq_find(qp->engine, pkt->srqn, qp->xrcd);
	qp->resp.xrc_pd_handle = qp->resp.xrc_srq ? srq_pd(qp->resp.xrc_srq) : 0;
	/* A duplicate or one dropped after an RNR NAK: the common path decides, as for RC. */
	if (qp->resp.xrc_srq || pkt->psn != qp->resp.epsn || qp->resp.rnr_dropping)
		return true;
	emu_debug("qp 0x%06x refused %s psn 0x%06x from qp 0x%06x: XRC SRQ 0x%06x is not one of"
		  " its domain's", qp->qpn, wire_opcodes[pkt->opcode].name, pkt->psn,
		  qp->attr.dest_qp_num, pkt->srqn);
	refuse(qp, NAK_INVALID_REQUEST, MEM_ACCESS_OK);
	return false;
}

/* An XRC target lets go of the request's SRQ once nothing of the request needs it. */
void responder_release_srq(struct emu_qp *qp)
{
	if (qp->resp.xrc_srq && !qp->resp.have_cur_recv) {
		srq_put(qp->resp.xrc_srq);
		qp->resp.xrc_srq = NULL;
	}
}

void responder_begin(struct emu_qp *qp, struct conn *c, const struct wire_packet *pkt,
		     struct rx_sink *sink)
{
	uint32_t flags = wire_opcodes[pkt->opcode].flags;
	enum mem_access_result r;

	sink->kind = SINK_DISCARD;
	qp->resp.verdict = RESP_DROP;
	if (!accepts_requests(qp)) {
		/* A NIC drops it too, and its peer's retries run out: so do ours (completer.c). */
		if (qp_is_reliable(qp))
			conn_send_drop_notice(c);
		return;
	}
	if (qp->type == IBV_QPT_XRC_RECV && !xrc_begin(qp, pkt))
		return;
	if (qp->type == IBV_QPT_UC) {
		uc_begin(qp, pkt, sink);
		return;
	}
	/*
	 * Before the request is seen: what the peer's ACKs on the other stream already said.
	 * A send completion it makes comes after the receives completed before it, as before
	 * they were held, if they share a CQ: those go out first, with their ACK.
	 */
	if (pkt->acked) {
		if (qp->resp.nheld && qp->send_cq == qp->recv_cq &&
		    completer_acks_any(qp, pkt->acked_psn))
			responder_flush_ack(qp, c);
		completer_acked(qp, pkt->acked_psn);
	}
	if (qp->resp.rnr_dropping) {
		if (pkt->psn != qp->resp.epsn)
			return;
		qp->resp.rnr_dropping = false;
	}
	if (pkt->psn != qp->resp.epsn) {
		/* Older: a request resent after the stream was lost. Newer cannot happen on
		 * an ordered stream, and is dropped like a packet out of sequence. */
		if (psn_le(pkt->psn, (qp->resp.epsn - 1) & BTH_PSN_MASK))
			qp->resp.verdict = RESP_DUPLICATE;
		else
			qp_counter_add(&qp->counters, EMU_CNT_OUT_OF_SEQ_REQUEST, 1);
		return;
	}
	if (fault_request_nak(qp, pkt->opcode, &qp->resp.nak_code)) {	/* SOFTRDMA_FAULTS */
		qp->resp.verdict = qp->resp.nak_code == FAULT_NAK_RNR ? RESP_RNR : RESP_NAK;
		return;
	}
	if (needed_right(pkt->opcode)) {
		r = check_remote(qp, pkt);
		if (r == MEM_ACCESS_QP_NO_RIGHT) {
			/* Checked before a receive is taken, as rxe's check_op_valid(). */
			refuse(qp, NAK_INVALID_REQUEST, r);
			return;
		}
	} else {
		r = MEM_ACCESS_OK;
	}
	if (is_write(pkt->opcode) && pkt->payload_len != pkt->dma_len) {
		refuse(qp, NAK_INVALID_REQUEST, MEM_ACCESS_OK);
		return;
	}
	if ((flags & OPF_RECV_WQE) && !take_or_keep_recv(qp, 0)) {
		qp->resp.verdict = RESP_RNR;
		return;
	}
	if (r != MEM_ACCESS_OK) {
		refuse(qp, nak_for(r), r);
		return;
	}
	if (!is_write(pkt->opcode) && (flags & OPF_RECV_WQE) &&
	    pkt->payload_len > sge_total_length(qp->resp.cur_recv.sge, qp->resp.cur_recv.num_sge)) {
		refuse(qp, NAK_INVALID_REQUEST, MEM_ACCESS_OK);
		qp->resp.recv_status = IBV_WC_LOC_LEN_ERR;
		return;
	}
	qp->resp.verdict = RESP_EXECUTE;
	aim_sink(qp, pkt, sink);
}

static void send_read_response(struct emu_qp *qp, struct conn *c, const struct wire_packet *req)
{
	struct wire_packet pkt = {
		.opcode = response_opcode(qp, OP_RC_READ_RESPONSE_ONLY),
		.qpn = qp->attr.dest_qp_num,
		.psn = req->psn,
		.syndrome = AETH_ACK | AETH_ACK_NO_CREDIT,
		.msn = qp->resp.msn,
		.payload_len = req->dma_len,
	};
	const struct tx_piece where = {
		.source = TX_REMOTE_MR, .key = req->rkey, .pd_handle = resp_pd(qp),
		.qpn = qp->qpn, .qp_access = qp->attr.qp_access_flags, .addr = req->va,
	};
	struct mem_region *ref = NULL;
	enum mem_access_result r;
	struct tx_batch b;
	void *host = NULL;

	/* Checked again: the region may have gone since the request arrived. */
	r = check_access(qp, req, IBV_ACCESS_REMOTE_READ, req->dma_len, &ref, &host);
	if (r != MEM_ACCESS_OK) {
		send_aeth(qp, c, AETH_NAK | nak_for(r), req->psn);
		qp_fatal(qp, IBV_EVENT_QP_ACCESS_ERR);
		return;
	}
	responder_flush_ack(qp, c);
	tx_batch_init(&b);
	tx_batch_add_copy(&b, b.hdr[0], wire_build(b.hdr[0], &pkt));
	b.nframes = 1;	/* its header is b.hdr[0]: counted as the requester's frames are */
	if (fault_drop_frame(qp, b.hdr[0])) {	/* SOFTRDMA_FAULTS: lost on the way */
		if (ref)
			mr_put(ref);
		conn_send_drop_notice(c);
		return;
	}
	if (req->dma_len)
		tx_batch_add_mem(&b, host, req->dma_len, &where, ref);
	/* Counted against max_dest_rd_atomic while any of it waits (conn_check_backlog()). */
	b.ends_read[b.niov - 1] = true;
	conn_send_batch(c, &b);
	tx_batch_release(&b);
}

static bool atomic_done_before(const struct emu_qp *qp, uint32_t psn, uint64_t *orig)
{
	uint32_t n = qp->resp.atomics_done < EMU_MAX_QP_RD_ATOM ? qp->resp.atomics_done : EMU_MAX_QP_RD_ATOM;

	for (uint32_t i = 0; i < n; i++) {
		if (qp->resp.atomic_done[i].psn == psn) {
			*orig = qp->resp.atomic_done[i].orig;
			return true;
		}
	}
	return false;
}

/* resent: a duplicate (PSN before epsn), answered from memory if it was executed. */
static void do_atomic(struct emu_qp *qp, struct conn *c, const struct wire_packet *req,
		      bool resent)
{
	struct wire_packet pkt = {
		.opcode = response_opcode(qp, OP_RC_ATOMIC_ACK),
		.qpn = qp->attr.dest_qp_num,
		.psn = req->psn,
		.syndrome = AETH_ACK | AETH_ACK_NO_CREDIT,
	};
	uint8_t hdr[4 + WIRE_MAX_HDR];
	struct mem_region *ref = NULL;
	enum mem_access_result r;
	uint64_t *word;
	void *host;

	if (resent && atomic_done_before(qp, req->psn, &pkt.orig)) {
		/* a resent atomic is answered, not redone */
	} else {
		r = check_access(qp, req, IBV_ACCESS_REMOTE_ATOMIC, 8, &ref, &host);
		if (r != MEM_ACCESS_OK) {
			send_aeth(qp, c, AETH_NAK | nak_for(r), req->psn);
			qp_fatal(qp, nak_for(r) == NAK_REMOTE_ACCESS ? IBV_EVENT_QP_ACCESS_ERR :
								      IBV_EVENT_QP_REQ_ERR);
			return;
		}
		word = host;
		if (wire_operation(req->opcode) == OP_RC_CMP_SWAP) {
			uint64_t expected = req->compare;

			__atomic_compare_exchange_n(word, &expected, req->swap_add, false,
						    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
			pkt.orig = expected;
		} else {
			pkt.orig = __atomic_fetch_add(word, req->swap_add, __ATOMIC_SEQ_CST);
		}
		mr_put(ref);
		qp->resp.atomic_done[qp->resp.atomics_done % EMU_MAX_QP_RD_ATOM].psn = req->psn;
		qp->resp.atomic_done[qp->resp.atomics_done++ % EMU_MAX_QP_RD_ATOM].orig = pkt.orig;
	}
	pkt.msn = qp->resp.msn;
	respond(qp, c, hdr, wire_build(hdr, &pkt));
}

/*
 * Whether this request's end completes a receive: it consumes one, and holds it. A receive
 * held from a message cut off with its stream waits for that message's resend; a request
 * of another kind (a peer that does not resend) neither completes nor fails it.
 */
static bool holds_recv_for(const struct emu_qp *qp, const struct wire_packet *pkt)
{
	return qp->resp.have_cur_recv && (wire_opcodes[pkt->opcode].flags & OPF_RECV_WQE);
}

/*
 * The ACKs owed go out first: a completion may make the application answer
 * at once, on another stream, and the answer must not overtake them (perftest's latency
 * tests with -e take the send completion first, from a one-entry CQ). So a completion
 * whose ACK is still owed waits for it (hold_recv()), and one that cannot wait sends it.
 */
static void complete_receive(struct emu_qp *qp, struct conn *c, const struct wire_packet *pkt,
			     enum ibv_wc_status st)
{
	uint32_t hdrs = wire_opcodes[pkt->opcode].flags;
	enum ibv_wc_opcode op = is_write(pkt->opcode) ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
	uint32_t len = is_write(pkt->opcode) ? pkt->dma_len : (uint32_t)pkt->payload_len;
	int flags = (hdrs & HDR_IMMDT) ? IBV_WC_WITH_IMM : 0;
	uint32_t ex = pkt->imm;
	struct ibv_wc wc;

	if (!holds_recv_for(qp, pkt))
		return;
	qp->resp.have_cur_recv = false;
	if ((hdrs & HDR_IETH) && st == IBV_WC_SUCCESS) {
		flags = IBV_WC_WITH_INV;
		ex = pkt->inv_rkey;
	}
	qp_recv_wc(qp, &qp->resp.cur_recv, st, op, st == IBV_WC_SUCCESS ? len : 0, ex, flags, &wc);
	if (hold_recv(qp, c, &wc, pkt->solicited))
		return;
	responder_flush_ack(qp, c);
	qp_deliver_recv(qp, &wc, pkt->solicited);
}

static void nak_and_fail(struct emu_qp *qp, struct conn *c, const struct wire_packet *pkt)
{
	struct qp_resp_info *resp = &qp->resp;
	enum ibv_wc_status recv_status = resp->recv_status;

	send_aeth(qp, c, AETH_NAK | resp->nak_code, pkt->psn);
	resp->recv_status = IBV_WC_SUCCESS;
	if (!holds_recv_for(qp, pkt)) {
		qp_fatal(qp, resp->nak_code == NAK_REMOTE_ACCESS ? IBV_EVENT_QP_ACCESS_ERR :
								   IBV_EVENT_QP_REQ_ERR);
		return;
	}
	/* The error belongs to this receive: it reports it, no async event (C9-222.1.1). */
	if (recv_status == IBV_WC_SUCCESS)
		recv_status = resp->refusal == MEM_ACCESS_OK ? IBV_WC_LOC_QP_OP_ERR :
			      (resp->nak_code == NAK_REMOTE_ACCESS ? IBV_WC_LOC_ACCESS_ERR :
			       mem_access_local_wc_status(resp->refusal));
	complete_receive(qp, c, pkt, recv_status);
	qp_to_error(qp);
}

static void uc_end(struct emu_qp *qp, struct conn *c, const struct wire_packet *pkt,
		   const struct rx_sink *sink)
{
	if (sink->failure == MEM_ACCESS_OK) {
		complete_receive(qp, c, pkt, IBV_WC_SUCCESS);
	} else if (sink->kind == SINK_LOCAL) {
		/* The receive's own buffer failed: its error and the QP's, as on RC. */
		complete_receive(qp, c, pkt, mem_access_local_wc_status(sink->failure));
		qp_to_error(qp);
	} else {
		/* The region went away mid-message: a receive already taken reports it. */
		complete_receive(qp, c, pkt, IBV_WC_LOC_ACCESS_ERR);
	}
}

static void end_request(struct emu_qp *qp, struct conn *c, const struct wire_packet *pkt,
			struct rx_sink *sink)
{
	if (qp->type == IBV_QPT_UC) {
		if (qp->resp.verdict == RESP_EXECUTE)
			uc_end(qp, c, pkt, sink);
		return;
	}
	switch (qp->resp.verdict) {
	case RESP_DROP:
		return;
	case RESP_DUPLICATE:
		qp_counter_add(&qp->counters, EMU_CNT_DUPLICATE_REQUEST, 1);
		if (wire_operation(pkt->opcode) == OP_RC_READ_REQUEST)
			send_read_response(qp, c, pkt);
		else if (wire_operation(pkt->opcode) == OP_RC_CMP_SWAP ||
			 wire_operation(pkt->opcode) == OP_RC_FETCH_ADD)
			do_atomic(qp, c, pkt, true);
		else
			send_aeth(qp, c, AETH_ACK | AETH_ACK_NO_CREDIT, pkt->psn);
		return;
	case RESP_RNR:
		/* Drop everything after it until the requester resends this PSN. */
		qp->resp.rnr_dropping = true;
		qp_counter_add(&qp->counters, EMU_CNT_SEND_RNR_ERR, 1);
		send_aeth(qp, c, AETH_RNR_NAK | (qp->attr.min_rnr_timer & AETH_VALUE_MASK),
			  pkt->psn);
		return;
	case RESP_NAK:
		nak_and_fail(qp, c, pkt);
		return;
	case RESP_EXECUTE:
		break;
	}
	if (sink->failure != MEM_ACCESS_OK) {
		emu_debug("qp 0x%06x refused %s psn 0x%06x mid-message: rule \"%s\" (rkey 0x%08x)",
			  qp->qpn, wire_opcodes[pkt->opcode].name, pkt->psn,
			  mem_access_rule(sink->failure), sink->rkey);
		if (sink->kind == SINK_REMOTE)
			refuse(qp, nak_for(sink->failure), sink->failure);
		else
			refuse(qp, NAK_REMOTE_OP, sink->failure);
		if (sink->kind == SINK_LOCAL)
			qp->resp.recv_status = mem_access_local_wc_status(sink->failure);
		nak_and_fail(qp, c, pkt);
		return;
	}
	/* Send with Invalidate: the key dies before the receive completes (rxe's execute()). */
	if ((wire_opcodes[pkt->opcode].flags & HDR_IETH) &&
	    mw_invalidate(qp->engine->mem, pkt->inv_rkey, resp_pd(qp), true, qp->qpn)) {
		refuse(qp, NAK_INVALID_REQUEST, MEM_ACCESS_OK);
		qp->resp.recv_status = IBV_WC_REM_INV_REQ_ERR;	/* rxe's status for this receive */
		nak_and_fail(qp, c, pkt);
		return;
	}
	qp->resp.epsn = (qp->resp.epsn + 1) & BTH_PSN_MASK;
	qp->resp.msn = (qp->resp.msn + 1) & 0xffffff;
	switch (wire_operation(pkt->opcode)) {
	case OP_RC_READ_REQUEST:
		send_read_response(qp, c, pkt);
		return;
	case OP_RC_CMP_SWAP:
	case OP_RC_FETCH_ADD:
		do_atomic(qp, c, pkt, false);
		return;
	default:
		qp->resp.ack_pending = true;
		qp->resp.ack_psn = pkt->psn;
		complete_receive(qp, c, pkt, IBV_WC_SUCCESS);
		return;
	}
}

void responder_end(struct emu_qp *qp, struct conn *c, const struct wire_packet *pkt,
		   struct rx_sink *sink)
{
	end_request(qp, c, pkt, sink);
	responder_release_srq(qp);
}
