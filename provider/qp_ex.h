/* SPDX-License-Identifier: MIT */
/*
 * The extended send API (ibv_wr_post(3)) of a QP created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
 * as a thin layer over the classic post_send: between wr_start and wr_complete the wr_* calls
 * build ordinary struct ibv_send_wr (with their SGEs and a copy of any inline data) in a
 * per-QP builder, and wr_complete hands the whole chain to post_send in one call.
 *
 * Errors the man page defers to wr_complete (more SGEs than the QP's max_send_sge, more inline
 * data than its max_inline_data, a setter before any WR, a second data setter on one WR, a WR
 * builder for an op we do not support) are remembered; the rest of the region is ignored and
 * wr_complete returns the error and posts nothing. Running out of memory is ENOMEM likewise.
 *
 * wr_start takes the builder's lock and wr_complete/wr_abort release it: the man page makes
 * the region a per-QP critical section.
 *
 * Placement: libibverbs only hands us the struct ibv_qp_ex, which sits at the start of the
 * provider's struct verbs_qp (private to libibverbs, so not visible here). The builder is found
 * from it by a fixed offset, so the provider must place its struct qp_ex_builder immediately
 * before its struct verbs_qp, and check that with QP_EX_BUILDER_PLACED_BEFORE:
 *
 *	struct softrdma_qp {
 *		struct qp_ex_builder wr_builder;
 *		struct verbs_qp vqp;
 *		...
 *	};
 *	static_assert(QP_EX_BUILDER_PLACED_BEFORE(struct softrdma_qp, wr_builder, vqp.qp_ex),
 *		      "wr_builder must sit right before vqp");
 */
#ifndef SOFTRDMA_PROVIDER_QP_EX_H
#define SOFTRDMA_PROVIDER_QP_EX_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

/* The classic ibv_post_send of the QP: 0, or an errno with *bad_wr set. */
typedef int (*qp_ex_post_send_fn)(struct ibv_qp *qp, struct ibv_send_wr *wr,
				  struct ibv_send_wr **bad_wr);

/* The send_ops_flags qp_ex_init accepts. */
#define QP_EX_SUPPORTED_SEND_OPS						\
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |			\
	 IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |	\
	 IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |	\
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_BIND_MW |		\
	 IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV)

/* One WR being built, and where its SGEs are until wr_complete can point at them. */
struct qp_ex_pending_wr {
	struct ibv_send_wr wr;
	size_t first_sge;		/* index into qp_ex_builder.sges */
	bool has_data;			/* a data setter was called for this WR */
	bool inline_copy;		/* its one SGE's addr is an offset into inline_bytes */
};

/*
 * Per-QP state of the extended send API. The arrays only grow, and are reused by every
 * wr_start, so a steady stream of same-sized batches allocates nothing.
 */
struct qp_ex_builder {
	pthread_mutex_t lock;		/* held from wr_start to wr_complete/wr_abort */
	qp_ex_post_send_fn post_send;
	uint32_t max_inline;
	uint32_t max_sge;
	int error;			/* first deferred error of this region, or 0 */

	struct qp_ex_pending_wr *wrs;
	size_t nr_wrs;
	size_t wrs_capacity;

	struct ibv_sge *sges;
	size_t nr_sges;
	size_t sges_capacity;

	uint8_t *inline_bytes;
	size_t inline_used;
	size_t inline_capacity;
};

/* How far before its struct ibv_qp_ex a QP's builder starts. */
struct qp_ex_builder_layout {
	struct qp_ex_builder builder;
	struct ibv_qp_ex qpx;
};
#define QP_EX_BUILDER_OFFSET	offsetof(struct qp_ex_builder_layout, qpx)

/* True when `type` places its builder where qp_ex.c looks for it. */
#define QP_EX_BUILDER_PLACED_BEFORE(type, builder_member, qpx_member)		\
	(offsetof(type, qpx_member) - offsetof(type, builder_member) == QP_EX_BUILDER_OFFSET)

/*
 * Sets every wr_* pointer of qpx and initialises the builder in front of it (see above).
 * max_inline and max_sge are the QP's max_inline_data and max_send_sge as create_qp reports
 * them back to the application, since those are the limits it is entitled to use. Returns 0,
 * or EOPNOTSUPP if send_ops_flags asks for anything outside QP_EX_SUPPORTED_SEND_OPS, or
 * ENOMEM; on failure qpx is untouched and there is nothing to destroy.
 */
int qp_ex_init(struct ibv_qp_ex *qpx, uint64_t send_ops_flags, uint32_t max_inline,
	       uint32_t max_sge, qp_ex_post_send_fn post_send);

/* Frees what qp_ex_init set up; only after it returned 0, and outside any wr_start region. */
void qp_ex_destroy(struct ibv_qp_ex *qpx);

#endif /* SOFTRDMA_PROVIDER_QP_EX_H */
