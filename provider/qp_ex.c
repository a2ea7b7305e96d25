// SPDX-License-Identifier: MIT
/*
 * The extended send API over the classic post_send; see qp_ex.h for the contract.
 *
 * The WRs, their SGEs and the inline copies live in three growable arrays. Growing one may
 * move it, so while a region is open a WR records where its SGEs are by index and an inline
 * SGE records its bytes by offset; wr_complete turns those into pointers and links the chain
 * just before the one post_send call.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "provider/qp_ex.h"

/* First sizes of the arrays: enough for typical batches, so they rarely grow at all. */
#define INITIAL_WRS	16
#define INITIAL_SGES	16

static struct qp_ex_builder *builder_of(struct ibv_qp_ex *qpx)
{
	return (struct qp_ex_builder *)((char *)qpx - QP_EX_BUILDER_OFFSET);
}

/* Makes room for `needed` elements in total; false (the array untouched) when out of memory. */
static bool reserve(void **array, size_t *capacity, size_t elem_size, size_t needed)
{
	size_t new_capacity = *capacity ? *capacity : 1;
	void *grown;

	if (needed <= *capacity)
		return true;
	while (new_capacity < needed) {
		if (new_capacity > SIZE_MAX / 2)
			return false;
		new_capacity *= 2;
	}
	grown = reallocarray(*array, new_capacity, elem_size);
	if (!grown)
		return false;
	*array = grown;
	*capacity = new_capacity;
	return true;
}

static void fail_region(struct qp_ex_builder *wrb, int error)
{
	if (!wrb->error)
		wrb->error = error;
}

/*
 * Appends a WR with the wr_id and wr_flags the application set before this call, as
 * ibv_wr_post(3) asks. NULL when the region has already failed.
 */
static struct ibv_send_wr *begin_wr(struct ibv_qp_ex *qpx, enum ibv_wr_opcode opcode)
{
	struct qp_ex_builder *wrb = builder_of(qpx);
	struct qp_ex_pending_wr *pending;

	if (wrb->error)
		return NULL;
	if (!reserve((void **)&wrb->wrs, &wrb->wrs_capacity, sizeof(*wrb->wrs),
		     wrb->nr_wrs + 1)) {
		fail_region(wrb, ENOMEM);
		return NULL;
	}
	pending = &wrb->wrs[wrb->nr_wrs++];
	memset(pending, 0, sizeof(*pending));
	pending->wr.wr_id = qpx->wr_id;
	pending->wr.opcode = opcode;
	pending->wr.send_flags = qpx->wr_flags;
	pending->first_sge = wrb->nr_sges;
	return &pending->wr;
}

/* The WR a setter applies to: the latest one. NULL (and the region failed) if there is none. */
static struct qp_ex_pending_wr *latest_wr(struct qp_ex_builder *wrb)
{
	if (wrb->error)
		return NULL;
	if (!wrb->nr_wrs) {
		fail_region(wrb, EINVAL);
		return NULL;
	}
	return &wrb->wrs[wrb->nr_wrs - 1];
}

/* The man page allows one data setter per WR; a second would leave its data ambiguous. */
static struct qp_ex_pending_wr *latest_wr_for_data(struct qp_ex_builder *wrb)
{
	struct qp_ex_pending_wr *pending = latest_wr(wrb);

	if (!pending)
		return NULL;
	if (pending->has_data) {
		fail_region(wrb, EINVAL);
		return NULL;
	}
	pending->has_data = true;
	return pending;
}

static void wr_send(struct ibv_qp_ex *qpx)
{
	begin_wr(qpx, IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm_data)
{
	struct ibv_send_wr *wr = begin_wr(qpx, IBV_WR_SEND_WITH_IMM);

	if (wr)
		wr->imm_data = imm_data;
}

static void set_rdma(struct ibv_send_wr *wr, uint32_t rkey, uint64_t remote_addr)
{
	wr->wr.rdma.rkey = rkey;
	wr->wr.rdma.remote_addr = remote_addr;
}

static void wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr)
{
	struct ibv_send_wr *wr = begin_wr(qpx, IBV_WR_RDMA_WRITE);

	if (wr)
		set_rdma(wr, rkey, remote_addr);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
			      __be32 imm_data)
{
	struct ibv_send_wr *wr = begin_wr(qpx, IBV_WR_RDMA_WRITE_WITH_IMM);

	if (!wr)
		return;
	set_rdma(wr, rkey, remote_addr);
	wr->imm_data = imm_data;
}

static void wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr)
{
	struct ibv_send_wr *wr = begin_wr(qpx, IBV_WR_RDMA_READ);

	if (wr)
		set_rdma(wr, rkey, remote_addr);
}

/* An atomic WR with its target and first operand (the compare, or the add), or NULL. */
static struct ibv_send_wr *begin_atomic(struct ibv_qp_ex *qpx, enum ibv_wr_opcode opcode,
					uint32_t rkey, uint64_t remote_addr, uint64_t compare_add)
{
	struct ibv_send_wr *wr = begin_wr(qpx, opcode);

	if (wr) {
		wr->wr.atomic.rkey = rkey;
		wr->wr.atomic.remote_addr = remote_addr;
		wr->wr.atomic.compare_add = compare_add;
	}
	return wr;
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
			      uint64_t compare, uint64_t swap)
{
	struct ibv_send_wr *wr = begin_atomic(qpx, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, remote_addr,
					      compare);

	if (wr)
		wr->wr.atomic.swap = swap;
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
				uint64_t add)
{
	begin_atomic(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, remote_addr, add);
}

static void wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *bind_info)
{
	struct ibv_send_wr *wr = begin_wr(qpx, IBV_WR_BIND_MW);

	if (!wr)
		return;
	wr->bind_mw.mw = mw;
	wr->bind_mw.rkey = rkey;
	wr->bind_mw.bind_info = *bind_info;
}

static void wr_local_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct ibv_send_wr *wr = begin_wr(qpx, IBV_WR_LOCAL_INV);

	if (wr)
		wr->invalidate_rkey = invalidate_rkey;
}

static void wr_send_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct ibv_send_wr *wr = begin_wr(qpx, IBV_WR_SEND_WITH_INV);

	if (wr)
		wr->invalidate_rkey = invalidate_rkey;
}

/*
 * Ops qp_ex_init refuses in send_ops_flags. Their pointers are still set, so an application
 * that calls one anyway gets EOPNOTSUPP from wr_complete rather than a jump through NULL.
 */
static void refuse_op(struct ibv_qp_ex *qpx)
{
	fail_region(builder_of(qpx), EOPNOTSUPP);
}


static void wr_send_tso(struct ibv_qp_ex *qpx, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	(void)hdr;
	(void)hdr_sz;
	(void)mss;
	refuse_op(qpx);
}

/* ibv_qp_ex has wr_atomic_write since rdma-core 44. */
#if SOFTRDMA_RDMA_CORE >= 44
static void wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
			    const void *atomic_wr)
{
	(void)rkey;
	(void)remote_addr;
	(void)atomic_wr;
	refuse_op(qpx);
}
#endif

/*
 * Addressing setters only fill the WR's fields: whether the QP's type uses them is the
 * classic post_send's decision, exactly as for a WR given to ibv_post_send.
 */
static void wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah, uint32_t remote_qpn,
			   uint32_t remote_qkey)
{
	struct qp_ex_pending_wr *pending = latest_wr(builder_of(qpx));

	if (!pending)
		return;
	pending->wr.wr.ud.ah = ah;
	pending->wr.wr.ud.remote_qpn = remote_qpn;
	pending->wr.wr.ud.remote_qkey = remote_qkey;
}

static void wr_set_xrc_srqn(struct ibv_qp_ex *qpx, uint32_t remote_srqn)
{
	struct qp_ex_pending_wr *pending = latest_wr(builder_of(qpx));

	if (pending)
		pending->wr.qp_type.xrc.remote_srqn = remote_srqn;
}

static void wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge, const struct ibv_sge *sg_list)
{
	struct qp_ex_builder *wrb = builder_of(qpx);
	struct qp_ex_pending_wr *pending = latest_wr_for_data(wrb);

	if (!pending)
		return;
	/* ibv_send_wr.num_sge is an int, whatever the QP's limit says. */
	if (num_sge > wrb->max_sge || num_sge > INT_MAX) {
		fail_region(wrb, EINVAL);
		return;
	}
	if (!num_sge)
		return;
	if (!reserve((void **)&wrb->sges, &wrb->sges_capacity, sizeof(*wrb->sges),
		     wrb->nr_sges + num_sge)) {
		fail_region(wrb, ENOMEM);
		return;
	}
	memcpy(&wrb->sges[wrb->nr_sges], sg_list, num_sge * sizeof(*sg_list));
	wrb->nr_sges += num_sge;
	pending->wr.num_sge = (int)num_sge;
}

static void wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t length)
{
	const struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	wr_set_sge_list(qpx, 1, &sge);
}

/*
 * The buffers are copied now, as the man page requires, and concatenated into one SGE with
 * IBV_SEND_INLINE set, which the classic post_send copies again at wr_complete.
 */
static void wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t num_buf,
				    const struct ibv_data_buf *buf_list)
{
	struct qp_ex_builder *wrb = builder_of(qpx);
	struct qp_ex_pending_wr *pending = latest_wr_for_data(wrb);
	size_t total = 0;
	uint8_t *dest;
	size_t i;

	if (!pending)
		return;
	for (i = 0; i < num_buf; i++) {
		if (buf_list[i].length > wrb->max_inline - total) {
			fail_region(wrb, EINVAL);
			return;
		}
		total += buf_list[i].length;
	}
	pending->wr.send_flags |= IBV_SEND_INLINE;
	if (!total)
		return;
	if (!reserve((void **)&wrb->sges, &wrb->sges_capacity, sizeof(*wrb->sges),
		     wrb->nr_sges + 1) ||
	    !reserve((void **)&wrb->inline_bytes, &wrb->inline_capacity, 1,
		     wrb->inline_used + total)) {
		fail_region(wrb, ENOMEM);
		return;
	}
	dest = wrb->inline_bytes + wrb->inline_used;
	for (i = 0; i < num_buf; i++) {
		if (!buf_list[i].length)
			continue;
		memcpy(dest, buf_list[i].addr, buf_list[i].length);
		dest += buf_list[i].length;
	}
	wrb->sges[wrb->nr_sges] = (struct ibv_sge){
		.addr = wrb->inline_used,
		.length = (uint32_t)total,
	};
	wrb->nr_sges++;
	wrb->inline_used += total;
	pending->wr.num_sge = 1;
	pending->inline_copy = true;
}

static void wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t length)
{
	const struct ibv_data_buf buf = { .addr = addr, .length = length };

	wr_set_inline_data_list(qpx, 1, &buf);
}

static void wr_start(struct ibv_qp_ex *qpx)
{
	struct qp_ex_builder *wrb = builder_of(qpx);

	pthread_mutex_lock(&wrb->lock);
	wrb->error = 0;
	wrb->nr_wrs = 0;
	wrb->nr_sges = 0;
	wrb->inline_used = 0;
}

/* Turns indices and offsets into pointers, now that the arrays no longer move. */
static void link_chain(struct qp_ex_builder *wrb)
{
	size_t i;

	for (i = 0; i < wrb->nr_wrs; i++) {
		struct qp_ex_pending_wr *pending = &wrb->wrs[i];
		struct ibv_send_wr *wr = &pending->wr;

		wr->sg_list = wr->num_sge ? &wrb->sges[pending->first_sge] : NULL;
		if (pending->inline_copy)
			wr->sg_list[0].addr += (uintptr_t)wrb->inline_bytes;
		wr->next = i + 1 < wrb->nr_wrs ? &wrb->wrs[i + 1].wr : NULL;
	}
}

static int wr_complete(struct ibv_qp_ex *qpx)
{
	struct qp_ex_builder *wrb = builder_of(qpx);
	struct ibv_send_wr *bad_wr = NULL;
	int ret = wrb->error;

	if (!ret && wrb->nr_wrs) {
		link_chain(wrb);
		ret = wrb->post_send(&qpx->qp_base, &wrb->wrs[0].wr, &bad_wr);
	}
	pthread_mutex_unlock(&wrb->lock);
	return ret;
}

static void wr_abort(struct ibv_qp_ex *qpx)
{
	pthread_mutex_unlock(&builder_of(qpx)->lock);
}

int qp_ex_init(struct ibv_qp_ex *qpx, uint64_t send_ops_flags, uint32_t max_inline,
	       uint32_t max_sge, qp_ex_post_send_fn post_send)
{
	struct qp_ex_builder *wrb = builder_of(qpx);

	if (send_ops_flags & ~(uint64_t)QP_EX_SUPPORTED_SEND_OPS)
		return EOPNOTSUPP;

	memset(wrb, 0, sizeof(*wrb));
	wrb->post_send = post_send;
	wrb->max_inline = max_inline;
	wrb->max_sge = max_sge;
	if (!reserve((void **)&wrb->wrs, &wrb->wrs_capacity, sizeof(*wrb->wrs), INITIAL_WRS) ||
	    !reserve((void **)&wrb->sges, &wrb->sges_capacity, sizeof(*wrb->sges),
		     INITIAL_SGES) ||
	    !reserve((void **)&wrb->inline_bytes, &wrb->inline_capacity, 1, max_inline)) {
		free(wrb->wrs);
		free(wrb->sges);
		free(wrb->inline_bytes);
		memset(wrb, 0, sizeof(*wrb));
		return ENOMEM;
	}
	pthread_mutex_init(&wrb->lock, NULL);

	/* Every op we implement is available whatever was asked for: asking is only a promise. */
	qpx->wr_send = wr_send;
	qpx->wr_send_imm = wr_send_imm;
	qpx->wr_rdma_write = wr_rdma_write;
	qpx->wr_rdma_write_imm = wr_rdma_write_imm;
	qpx->wr_rdma_read = wr_rdma_read;
	qpx->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	qpx->wr_atomic_fetch_add = wr_atomic_fetch_add;
	qpx->wr_bind_mw = wr_bind_mw;
	qpx->wr_local_inv = wr_local_inv;
	qpx->wr_send_inv = wr_send_inv;
	qpx->wr_send_tso = wr_send_tso;
#if SOFTRDMA_RDMA_CORE >= 44
	qpx->wr_atomic_write = wr_atomic_write;
#endif
	qpx->wr_set_ud_addr = wr_set_ud_addr;
	qpx->wr_set_xrc_srqn = wr_set_xrc_srqn;
	qpx->wr_set_inline_data = wr_set_inline_data;
	qpx->wr_set_inline_data_list = wr_set_inline_data_list;
	qpx->wr_set_sge = wr_set_sge;
	qpx->wr_set_sge_list = wr_set_sge_list;
	qpx->wr_start = wr_start;
	qpx->wr_complete = wr_complete;
	qpx->wr_abort = wr_abort;
	return 0;
}

void qp_ex_destroy(struct ibv_qp_ex *qpx)
{
	struct qp_ex_builder *wrb = builder_of(qpx);

	pthread_mutex_destroy(&wrb->lock);
	free(wrb->wrs);
	free(wrb->sges);
	free(wrb->inline_bytes);
	memset(wrb, 0, sizeof(*wrb));
}
