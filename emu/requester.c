// SPDX-License-Identifier: MIT
/*
 * The requester: validates and queues send work requests, and turns them into request
 * frames. It runs in the posting thread (no hop to the engine on the fast path) and in the
 * engine thread when responses free credits or timers fire.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "emu/internal.h"
#include "emu/limits.h"

struct wr_kind {
	uint8_t wire_op;
	enum ibv_wc_opcode wc_op;
	bool read_atomic;
	bool has_payload;
	bool local;		/* done here, in order, sending nothing */
};

static const struct wr_kind wr_kinds[] = {
	[IBV_WR_SEND] = { OP_RC_SEND_ONLY, IBV_WC_SEND, false, true },
	[IBV_WR_SEND_WITH_IMM] = { OP_RC_SEND_ONLY_IMM, IBV_WC_SEND, false, true },
	[IBV_WR_SEND_WITH_INV] = { OP_RC_SEND_ONLY_INV, IBV_WC_SEND, false, true },
	[IBV_WR_RDMA_WRITE] = { OP_RC_WRITE_ONLY, IBV_WC_RDMA_WRITE, false, true },
	[IBV_WR_RDMA_WRITE_WITH_IMM] = { OP_RC_WRITE_ONLY_IMM, IBV_WC_RDMA_WRITE, false, true },
	[IBV_WR_RDMA_READ] = { OP_RC_READ_REQUEST, IBV_WC_RDMA_READ, true, false },
	[IBV_WR_ATOMIC_CMP_AND_SWP] = { OP_RC_CMP_SWAP, IBV_WC_COMP_SWAP, true, false },
	[IBV_WR_ATOMIC_FETCH_AND_ADD] = { OP_RC_FETCH_ADD, IBV_WC_FETCH_ADD, true, false },
	[IBV_WR_BIND_MW] = { 0, IBV_WC_BIND_MW, false, false, true },
	[IBV_WR_LOCAL_INV] = { 0, IBV_WC_LOCAL_INV, false, false, true },
};

static const struct wr_kind *wr_kind(enum ibv_wr_opcode op)
{
	if ((unsigned int)op >= sizeof(wr_kinds) / sizeof(wr_kinds[0]) ||
	    (!wr_kinds[op].wire_op && !wr_kinds[op].local))
		return NULL;
	return &wr_kinds[op];
}

enum ibv_wc_opcode requester_wc_opcode(enum ibv_wr_opcode op)
{
	const struct wr_kind *k = wr_kind(op);

	return k ? k->wc_op : IBV_WC_SEND;
}

/* The opcode of a WR's request on this QP's transport (wr_kinds holds the RC ones). */
static uint8_t request_opcode(const struct emu_qp *qp, const struct wr_kind *k)
{
	return qp_opcode_transport(qp->type) | (k->wire_op & ~OP_TRANSPORT_MASK);
}

static int validate_wr(struct emu_qp *qp, const struct emu_send_wr *wr, uint64_t *length)
{
	const struct wr_kind *k = wr_kind(wr->opcode);
	bool is_inline = wr->send_flags & IBV_SEND_INLINE;

	/*
	 * An operation the transport has no opcode for (READ, atomics or SEND_WITH_INV on UC)
	 * is refused.
	 */
	if (k && !k->local && !wire_opcodes[request_opcode(qp, k)].name)
		return EINVAL;
	if (k && k->local) {
		/* No data: the SGEs are not looked at (rxe ignores them too). */
		*length = 0;
		return wr->opcode == IBV_WR_BIND_MW && !wr->bind.window ? EINVAL : 0;
	}
	/* Inline data is copied at post time and needs no SGE slots: only its size counts. */
	if (!k || wr->num_sge < 0 ||
	    (!is_inline && (uint32_t)wr->num_sge > qp->cap.max_send_sge))
		return EINVAL;
	*length = sge_total_length(wr->sg_list, wr->num_sge);
	if (*length > EMU_MAX_MSG_SIZE)
		return EINVAL;
	if (is_inline && (!k->has_payload || *length > qp->cap.max_inline_data))
		return EINVAL;
	if (k->read_atomic && k->wc_op != IBV_WC_RDMA_READ &&
	    (wr->num_sge != 1 || *length != sizeof(uint64_t)))
		return EINVAL;
	return 0;
}

static void queue_wr(struct emu_qp *qp, const struct emu_send_wr *wr, uint64_t length)
{
	struct send_wqe *wqe = &qp->sq.wqe[qp->sq.head % qp->cap.max_send_wr];

	wqe->wr = *wr;
	wqe->wr.sg_list = wqe->sge;
	if (wr_kind(wr->opcode)->local) {
		wqe->wr.num_sge = 0;
	} else if (!(wr->send_flags & IBV_SEND_INLINE)) {
		/* A WR without SGEs may leave sg_list NULL, which memcpy must not be given. */
		if (wr->num_sge)
			memcpy(wqe->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(*wqe->sge));
	} else {
		uint8_t *p = wqe->inline_buf;

		/* Inline data is taken now: the caller may reuse its buffer at once. */
		for (int i = 0; i < wr->num_sge; i++) {
			if (!wr->sg_list[i].length)
				continue;	/* its addr may be anything, even NULL */
			memcpy(p, (void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
			p += wr->sg_list[i].length;
		}
	}
	wqe->length = length;
	if (wr_kind(wr->opcode)->local) {
		wqe->psn = WQE_NO_PSN;
	} else {
		wqe->psn = qp->req.psn;
		qp->req.psn = (qp->req.psn + 1) & BTH_PSN_MASK;
	}
	if (wr->opcode == IBV_WR_BIND_MW) {
		wqe->wr.bind.req.qp_pd_handle = qp->pd_handle;
		wqe->wr.bind.req.qpn = qp->qpn;
	}
	wqe->state = WQE_QUEUED;
	wqe->was_sent = false;
	wqe->status = IBV_WC_SUCCESS;
	wqe->signaled = qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
	qp->sq.head++;
}

void requester_rewind(struct emu_qp *qp, uint32_t psn)
{
	uint32_t i = qp->comp.tail;

	while (i != qp->req.next && qp->sq.wqe[i % qp->cap.max_send_wr].psn != psn)
		i++;
	qp->req.next = i;
	qp->req.rd_atomic_out = 0;
	for (uint32_t j = qp->comp.tail; j != qp->sq.head; j++) {
		struct send_wqe *w = &qp->sq.wqe[j % qp->cap.max_send_wr];

		if (w->state == WQE_DONE)
			continue;
		if (j - qp->comp.tail >= i - qp->comp.tail)
			w->state = WQE_QUEUED;
		else if (w->state == WQE_SENT && wr_kind(w->wr.opcode)->read_atomic)
			qp->req.rd_atomic_out++;
	}
}

/*
 * A WQE that ends here, without the wire (a local operation, or a local error): it completes
 * with status once everything before it has completed.
 */
static void finish_here(struct emu_qp *qp, struct send_wqe *wqe, enum ibv_wc_status status)
{
	wqe->status = status;
	wqe->state = WQE_DONE;
	qp->req.next++;
	completer_advance(qp);
}

/* A WQE's payload, gathered: where each piece is now, and where it is named by its key. */
struct gathered {
	int n;
	struct iovec iov[EMU_MAX_SGE];
	struct tx_piece piece[EMU_MAX_SGE];
	struct mem_region *refs[EMU_MAX_SGE];	/* held until sent */
};

static void put_gathered(struct gathered *g)
{
	while (g->n)
		if (g->refs[--g->n])
			mr_put(g->refs[g->n]);
}

/*
 * The local buffers of wqe, each SGE's lkey checked for the needed right (0: the payload
 * read from there; IBV_ACCESS_LOCAL_WRITE: where a READ's data goes); false (and *status)
 * on a bad one.
 */
static bool gather_local(struct emu_qp *qp, struct send_wqe *wqe, int needed,
			 struct gathered *g, enum ibv_wc_status *status)
{
	g->n = 0;
	if (wqe->wr.send_flags & IBV_SEND_INLINE) {
		if (wqe->length) {
			g->iov[0] = (struct iovec){ wqe->inline_buf, wqe->length };
			g->piece[0].source = TX_COPY;
			g->refs[0] = NULL;
			g->n = 1;
		}
		return true;
	}
	for (int i = 0; i < wqe->wr.num_sge; i++) {
		const struct ibv_sge *sge = &wqe->sge[i];
		enum mem_access_result r;
		void *host;

		if (!sge->length)
			continue;
		r = mr_check_local_access(qp->engine->mem, sge->lkey, qp->pd_handle, needed,
					  sge->addr, sge->length, &g->refs[g->n], &host);
		if (r != MEM_ACCESS_OK) {
			put_gathered(g);
			*status = mem_access_local_wc_status(r);
			return false;
		}
		g->iov[g->n] = (struct iovec){ host, sge->length };
		g->piece[g->n] = (struct tx_piece){ .source = TX_LOCAL_MR, .key = sge->lkey,
						    .pd_handle = qp->pd_handle, .addr = sge->addr };
		g->n++;
	}
	return true;
}

static void build_request(struct emu_qp *qp, const struct send_wqe *wqe, struct wire_packet *pkt)
{
	const struct emu_send_wr *wr = &wqe->wr;

	memset(pkt, 0, sizeof(*pkt));
	pkt->opcode = request_opcode(qp, wr_kind(wr->opcode));
	pkt->qpn = qp->attr.dest_qp_num;
	pkt->psn = wqe->psn;
	pkt->ack_req = true;
	/* What our responder has done of the peer's requests rides along (BTH_ACKED). */
	pkt->acked = qp->type == IBV_QPT_RC;
	pkt->acked_psn = (qp->resp.epsn - 1) & BTH_PSN_MASK;
	pkt->solicited = wr->send_flags & IBV_SEND_SOLICITED;
	pkt->imm = wr->imm_data;
	pkt->inv_rkey = wr->invalidate_rkey;
	pkt->srqn = wr->xrc_srqn;	/* carried only by XRC opcodes (an XRCETH) */
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		pkt->va = wr->rdma.remote_addr;
		pkt->rkey = wr->rdma.rkey;
		pkt->dma_len = (uint32_t)wqe->length;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		pkt->va = wr->atomic.remote_addr;
		pkt->rkey = wr->atomic.rkey;
		pkt->swap_add = wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? wr->atomic.swap :
									    wr->atomic.compare_add;
		pkt->compare = wr->atomic.compare_add;
		break;
	default:
		break;
	}
	if (wr_kind(wr->opcode)->has_payload)
		pkt->payload_len = wqe->length;
}

/* A bind or a local invalidation, done when the send queue reaches it. */
static enum ibv_wc_status do_local_op(struct emu_qp *qp, struct send_wqe *wqe)
{
	if (wqe->wr.opcode == IBV_WR_BIND_MW)
		return mw_bind(qp->engine->mem, wqe->wr.bind.window, &wqe->wr.bind.req) ?
		       IBV_WC_MW_BIND_ERR : IBV_WC_SUCCESS;
	/* As rxe: what cannot be invalidated is a local QP operation error. */
	return mw_invalidate(qp->engine->mem, wqe->wr.invalidate_rkey, qp->pd_handle, false, 0) ?
	       IBV_WC_LOC_QP_OP_ERR : IBV_WC_SUCCESS;
}

/*
 * The same-host path (peer_mem.c), for large payloads on a stream whose responder can read
 * our memory (only RC streams offer it: send_hello()). Not inline data: it lives in the
 * send queue.
 */
static bool by_reference(const struct emu_qp *qp, const struct send_wqe *wqe,
			 const struct wr_kind *k)
{
	return k->has_payload && qp->streams.req->peer_reads && wqe->length >= PEER_MEM_MIN &&
	       !(wqe->wr.send_flags & IBV_SEND_INLINE);
}

/*
 * Direct placement (emu/direct.h) is for WRITEs and READs first on the wire: everything
 * before them answered, so done by the target, whose responder they then bypass without
 * reordering anything. Not after a loss: a rewound send queue numbers requests the
 * responder may have seen, and a request that left once may have been executed there.
 */
static bool run_may_start(const struct emu_qp *qp, const struct send_wqe *wqe)
{
	return qp->type == IBV_QPT_RC && qp->streams.req->direct &&
	       (wqe->wr.opcode == IBV_WR_RDMA_WRITE || wqe->wr.opcode == IBV_WR_RDMA_READ) &&
	       qp->comp.tail == qp->req.next && !qp->comp.lost;
}

/*
 * Places the WRITEs (or does the READs) at the head of what is still to go with one system
 * call (a posting list of them is one run), and completes them. They never were on the
 * wire, so they give their PSNs back: what was posted after them, never sent, is numbered
 * down by as many, and the responder's expected PSN stays the next frame's. Returns how
 * many were done; the first that was not (a refusal, another key or opcode, a bad local
 * key) goes as a frame. READs: no more at once than max_rd_atomic, as on the wire.
 */
static unsigned int place_run(struct emu_qp *qp, unsigned int budget)
{
	enum ibv_wr_opcode op = qp->sq.wqe[qp->req.next % qp->cap.max_send_wr].wr.opcode;
	int needed = op == IBV_WR_RDMA_READ ? IBV_ACCESS_LOCAL_WRITE : 0;
	struct mem_region *refs[DIRECT_RUN_IOVS];
	struct direct_run run;
	unsigned int nrefs = 0, placed;
	uint32_t j;

	if (op == IBV_WR_RDMA_READ && qp->attr.max_rd_atomic < budget)
		budget = qp->attr.max_rd_atomic;
	run.n = 0;	/* the rest is filled as far as n and niov say: a post pays for no more */
	run.niov = 0;

	for (j = qp->req.next; j != qp->sq.head; j++)
		if (qp->sq.wqe[j % qp->cap.max_send_wr].was_sent)
			return 0;	/* a rewound queue: the responder may know these PSNs */
	for (j = qp->req.next; j != qp->sq.head && run.n < DIRECT_RUN_MAX && run.n < budget; j++) {
		struct send_wqe *wqe = &qp->sq.wqe[j % qp->cap.max_send_wr];
		enum ibv_wc_status status;
		struct gathered g;

		if (wqe->wr.opcode != op || !wqe->length ||
		    run.niov + (unsigned int)wqe->wr.num_sge > DIRECT_RUN_IOVS ||
		    !gather_local(qp, wqe, needed, &g, &status))
			break;	/* a bad local key: the frame path completes it with status */
		for (int i = 0; i < g.n; i++) {
			run.iov[run.niov++] = g.iov[i];
			refs[nrefs++] = g.refs[i];
		}
		run.wqe[run.n] = wqe;
		run.iov_end[run.n++] = run.niov;
	}
	placed = run.n ? direct_place_run(qp, &run) : 0;
	while (nrefs)
		if (refs[--nrefs])
			mr_put(refs[nrefs]);
	for (unsigned int i = 0; i < placed; i++)
		finish_here(qp, run.wqe[i], IBV_WC_SUCCESS);
	if (placed) {
		for (j = qp->req.next; j != qp->sq.head; j++) {
			struct send_wqe *w = &qp->sq.wqe[j % qp->cap.max_send_wr];

			if (w->psn != WQE_NO_PSN)
				w->psn = (w->psn - placed) & BTH_PSN_MASK;
		}
		qp->req.psn = (qp->req.psn - placed) & BTH_PSN_MASK;
	}
	return placed;
}

/* Adds the frame built in b->hdr[b->nframes] for pkt: headers, then the payload or its
 * descriptor (b->desc[b->nframes]); b holds the payload's references until it is sent. */
static void batch_add(struct tx_batch *b, unsigned int hdr_len, const struct wire_packet *pkt,
		      const struct gathered *g)
{
	tx_batch_add_copy(b, b->hdr[b->nframes], hdr_len);
	if (pkt->by_ref) {
		tx_batch_add_copy(b, b->desc[b->nframes], pkt->payload_len);
		for (int i = 0; i < g->n; i++)
			if (g->refs[i])
				b->refs[b->nrefs++] = g->refs[i];
	} else {
		for (int i = 0; i < g->n; i++)
			tx_batch_add_mem(b, g->iov[i].iov_base, g->iov[i].iov_len, &g->piece[i],
					 g->refs[i]);
	}
	b->nframes++;
}

/* Sends and empties b on the QP's stream, without leaving qp->lock. */
static void flush_batch(struct emu_qp *qp, struct tx_batch *b)
{
	if (b->nframes)
		conn_send_batch(qp->streams.req, b);	/* a broken stream resends from the oldest WQE */
	tx_batch_release(b);
}

/* The stream to send on, opened if need be; NULL: not yet (its opening is under way). */
static struct conn *request_stream(struct emu_qp *qp)
{
	if (qp->streams.req)
		return qp->streams.req;
	if (qp->comp.timer_ns && qp->comp.timer_kind == TIMER_CONNECT)
		return NULL;	/* the retry timer reconnects */
	if (engine_on_thread(qp->engine))
		qp_stream_open(qp);
	else
		qp_stream_open_later(qp);
	return qp->streams.req;
}

/*
 * Builds the request frames of every WQE that may go now into b (sending full batches on
 * the way), and advances the send queue as if they had left: if the stream breaks before
 * they do, its loss resends from the oldest unacknowledged WQE. qp->lock held.
 */
static void requester_fill(struct emu_qp *qp, struct tx_batch *b, unsigned int budget)
{
	struct conn *c;

	if (qp->state != IBV_QPS_RTS || qp->req.next == qp->sq.head || !(c = request_stream(qp)))
		return;
	while (qp->req.next != qp->sq.head && budget) {
		struct send_wqe *wqe = &qp->sq.wqe[qp->req.next % qp->cap.max_send_wr];
		const struct wr_kind *k = wr_kind(wqe->wr.opcode);
		struct gathered g = { .n = 0 };
		struct wire_packet pkt;
		enum ibv_wc_status status;
		unsigned int hdr_len;
		uint8_t *hdr;

		if (wqe->state == WQE_DONE) {
			qp->req.next++;	/* a local operation done before the stream was lost */
			continue;
		}
		if (k->local) {
			/* In order: what is posted after it sees it done (ibv_bind_mw(3)). */
			finish_here(qp, wqe, do_local_op(qp, wqe));
			continue;
		}
		if (k->read_atomic && qp->req.rd_atomic_out >= qp->attr.max_rd_atomic)
			break;	/* IBTA: no more outstanding READ/atomics than max_rd_atomic */
		if (!conn_tx_room(c))
			break;	/* the peer is not reading: the rest waits (conn_write resumes) */
		if (run_may_start(qp, wqe)) {
			unsigned int placed = place_run(qp, budget);

			if (placed) {
				budget -= placed;
				continue;
			}
		}
		if (k->has_payload && !gather_local(qp, wqe, 0, &g, &status)) {
			finish_here(qp, wqe, status);
			break;
		}
		if (b->nframes == TX_BATCH_FRAMES || b->niov + 2 + g.n > TX_BATCH_IOVS)
			flush_batch(qp, b);
		build_request(qp, wqe, &pkt);
		hdr = b->hdr[b->nframes];
		if (by_reference(qp, wqe, k)) {
			/* The responder reads the payload from here before it ACKs. */
			pkt.by_ref = true;
			pkt.payload_len = peer_mem_describe(b->desc[b->nframes], g.iov, g.n);
		}
		hdr_len = wire_build(hdr, &pkt);
		if (fault_drop_frame(qp, hdr)) {
			put_gathered(&g);	/* SOFTRDMA_FAULTS: lost; the ACK timer resends it */
			qp->comp.lost = true;
		} else {
			batch_add(b, hdr_len, &pkt, &g);
		}
		wqe->state = WQE_SENT;
		wqe->was_sent = true;
		qp->req.next++;
		budget--;
		if (qp->type == IBV_QPT_UC) {
			/* Unacknowledged: a UC message is done once it has left. */
			wqe->state = WQE_DONE;
			completer_advance(qp);
			continue;
		}
		if (k->read_atomic)
			qp->req.rd_atomic_out++;
		if (!qp->comp.timer_ns && qp->attr.timeout)
			qp_arm_timer(qp, TIMER_ACK, qp_timeout_to_ns(qp->attr.timeout));
	}
}

void requester_progress(struct emu_qp *qp)
{
	struct tx_batch b;

	tx_batch_init(&b);
	requester_fill(qp, &b, UINT_MAX);
	flush_batch(qp, &b);
}

void requester_resend(struct emu_qp *qp, uint32_t psn, bool oldest_only)
{
	struct tx_batch b;

	tx_batch_init(&b);
	requester_rewind(qp, psn);
	requester_fill(qp, &b, oldest_only ? 1 : UINT_MAX);
	flush_batch(qp, &b);
}

/*
 * Doorbell batching. While CORK_AFTER or more of this QP's requests are on their way
 * unanswered, what is posted waits for their answer: completer_end() sends it then, every
 * WQE posted meanwhile in one sendmsg, as a NIC's send engine takes together the WQEs rung
 * while it was busy. A program posting in a loop then costs one system call per ACK, not
 * one per WR, and the responder one read and one ACK per batch. A burst of up to
 * CORK_AFTER, and the one request of a ping-pong, leave at once; the wait is bounded by an
 * answer already due, and CORK_MAX held WRs go without waiting. UC is never held (nothing
 * answers it), nor a QP whose requests were lost (the ACK timer resends them: no answer may
 * come before), nor one without a stream (the post opens it). qp->lock held.
 */
#define CORK_AFTER	2
#define CORK_MAX	64

static bool requester_corked(const struct emu_qp *qp)
{
	if (!qp->engine->tx_cork || qp->type == IBV_QPT_UC || qp->comp.lost ||
	    !qp->streams.req)
		return false;
	return qp->req.next - qp->comp.tail >= CORK_AFTER &&
	       qp->sq.head - qp->req.next < CORK_MAX;
}

/*
 * From ibv_post_send: the frames are sent after qp->lock is dropped (under the stream's
 * tx_lock, taken first so that frames leave in PSN order), so that the engine thread can
 * take the QP's ACKs while this thread is in sendmsg. Releases qp->lock.
 */
static void requester_progress_unlock(struct emu_qp *qp)
{
	struct tx_batch b;
	struct conn *c;

	if (requester_corked(qp)) {
		pthread_mutex_unlock(&qp->lock);
		return;
	}
	tx_batch_init(&b);
	requester_fill(qp, &b, UINT_MAX);
	c = qp->streams.req;
	if (!b.nframes || !c) {
		pthread_mutex_unlock(&qp->lock);
		tx_batch_release(&b);
		return;
	}
	conn_tx_lock(c);
	pthread_mutex_unlock(&qp->lock);
	conn_send_batch_unlock(c, &b);
	tx_batch_release(&b);
}

/*
 * The WRs are checked together before any is queued: a failed post queues nothing, which
 * is also what ibv_wr_complete(3) promises for the chains the wr_* API builds.
 */
int emu_qp_post_send(struct emu_qp *qp, const struct emu_send_wr *wr, unsigned int n,
		     unsigned int *bad)
{
	uint32_t room;
	uint64_t length;
	int ret = 0;

	pthread_mutex_lock(&qp->lock);
	if (qp->type == IBV_QPT_UD) {
		ret = ud_post_send(qp, wr, n, bad);
		pthread_mutex_unlock(&qp->lock);
		return ret;
	}
	room = qp->cap.max_send_wr - (qp->sq.head - qp->comp.tail);
	for (unsigned int i = 0; i < n; i++) {
		/* As rxe: a send queue is only open from RTS on (and in ERR, to be flushed).
		 * An XRC target has none. */
		ret = qp->state < IBV_QPS_RTS || qp->type == IBV_QPT_XRC_RECV ? EINVAL :
		      validate_wr(qp, &wr[i], &length);
		if (!ret && i >= room)
			ret = ENOMEM;
		if (ret) {
			*bad = i;
			pthread_mutex_unlock(&qp->lock);
			return ret;
		}
	}
	for (unsigned int i = 0; i < n; i++) {
		validate_wr(qp, &wr[i], &length);
		queue_wr(qp, &wr[i], length);
	}
	if (qp->state == IBV_QPS_ERR)
		qp_flush(qp);
	requester_progress_unlock(qp);
	return 0;
}
