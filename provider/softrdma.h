/* SPDX-License-Identifier: MIT */
/* The provider's objects: each wraps the libibverbs object the application sees. */
#ifndef SOFTRDMA_PROVIDER_H
#define SOFTRDMA_PROVIDER_H

#include <infiniband/verbs.h>

#include "kernel-abi/provider_abi.h"
#include "provider/cq_ex.h"
#include "provider/qp_ex.h"
#include "emu/qp.h"

struct sr_device {
	struct verbs_device vdev;
};

struct emu_engine;
struct emu_cq;
struct emu_qp;
struct emu_srq;
struct mem_region;

struct sr_context {
	struct verbs_context vctx;
	struct emu_engine *engine;
	int async_notify_fd;	/* write end of the pipe behind context.async_fd */
	int gid_count;		/* entries in the GID table libibverbs reads from sysfs */
};

struct sr_pd {
	struct ibv_pd ibv_pd;
};

struct sr_mr {
	struct verbs_mr vmr;
	struct mem_region *region;
};

/* An address handle: what the engine sends a UD datagram to (emu/qp.h). */
struct sr_ah {
	struct ibv_ah ibv_ah;
	struct emu_av av;
};

/* A memory window: its slot in the engine's key table (emu/mr.h). */
struct sr_mw {
	struct ibv_mw ibv_mw;
	struct mem_region *window;
};

struct sr_srq {
	struct verbs_srq vsrq;
	struct emu_srq *srq;
};

/* The extended interfaces keep their state right before the verbs object (see their headers). */
struct sr_cq {
	struct cq_ex_poller poller;	/* ibv_create_cq_ex only */
	struct verbs_cq vcq;
	struct emu_cq *cq;
	bool extended;
};

struct sr_qp {
	struct qp_ex_builder wr_builder;	/* IBV_QP_INIT_ATTR_SEND_OPS_FLAGS only */
	struct verbs_qp vqp;
	struct emu_qp *qp;
	bool extended;
};

static_assert(QP_EX_BUILDER_PLACED_BEFORE(struct sr_qp, wr_builder, vqp.qp_ex),
	      "the wr_* builder must sit right before the QP");
static_assert(CQ_EX_POLLER_PLACED_BEFORE(struct sr_cq, poller, vcq.cq_ex),
	      "the cq_ex poller must sit right before the CQ");

static inline struct sr_context *to_sr_context(struct ibv_context *ibctx)
{
	return (struct sr_context *)((char *)ibctx - offsetof(struct sr_context, vctx.context));
}

static inline struct sr_pd *to_sr_pd(struct ibv_pd *pd)
{
	return (struct sr_pd *)pd;
}

extern struct provider_abi sr_abi;

/* query.c */
int sr_query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
		       struct ibv_device_attr_ex *attr, size_t attr_size);
int sr_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *attr);
int sr_count_gids(const struct ibv_device *device);

/* ops_since_59.c: ops of newer rdma-core releases */
#if PABI_SINCE(59)
struct ibv_mr *sr_reg_mr_ex(struct ibv_pd *pd, struct ibv_mr_init_attr *attr);
#endif
#if PABI_SINCE(62)
int sr_query_port_speed(struct ibv_context *context, uint32_t port_num, uint64_t *speed);
#endif

static inline struct sr_cq *to_sr_cq(struct ibv_cq *cq)
{
	return (struct sr_cq *)((char *)cq - offsetof(struct sr_cq, vcq.cq));
}

static inline struct sr_qp *to_sr_qp(struct ibv_qp *qp)
{
	return (struct sr_qp *)((char *)qp - offsetof(struct sr_qp, vqp.qp));
}

static inline struct sr_ah *to_sr_ah(struct ibv_ah *ah)
{
	return (struct sr_ah *)ah;
}

static inline struct sr_mw *to_sr_mw(struct ibv_mw *mw)
{
	return (struct sr_mw *)mw;
}

static inline struct sr_srq *to_sr_srq(struct ibv_srq *srq)
{
	return (struct sr_srq *)((char *)srq - offsetof(struct sr_srq, vsrq.srq));
}

/* cq.c */
struct ibv_cq *sr_create_cq(struct ibv_context *context, int cqe, struct ibv_comp_channel *channel,
			    int comp_vector);
int sr_destroy_cq(struct ibv_cq *cq);
int sr_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int sr_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int sr_resize_cq(struct ibv_cq *cq, int cqe);
void sr_cq_event(struct ibv_cq *cq);

/* ah.c */
struct ibv_ah *sr_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int sr_destroy_ah(struct ibv_ah *ah);

/* qp.c */
struct ibv_qp *sr_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
int sr_destroy_qp(struct ibv_qp *qp);
int sr_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
int sr_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
		struct ibv_qp_init_attr *init_attr);
int sr_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
int sr_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
struct ibv_qp *sr_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr);
struct ibv_cq_ex *sr_create_cq_ex(struct ibv_context *context,
				  struct ibv_cq_init_attr_ex *attr);

/* srq.c */
struct ibv_srq *sr_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
struct ibv_srq *sr_create_srq_ex(struct ibv_context *context, struct ibv_srq_init_attr_ex *attr);
int sr_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int attr_mask);
int sr_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr);
int sr_destroy_srq(struct ibv_srq *srq);
int sr_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);

/* pd_mr.c */
struct ibv_pd *sr_alloc_pd(struct ibv_context *context);
int sr_dealloc_pd(struct ibv_pd *pd);
struct ibv_mr *sr_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va,
			 int access);
int sr_dereg_mr(struct verbs_mr *vmr);
int sr_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd, void *addr, size_t length,
		int access);
struct ibv_mw *sr_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int sr_dealloc_mw(struct ibv_mw *mw);
int sr_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind);

#endif
