// SPDX-License-Identifier: MIT
/* Queue pairs: the provider side of emu/qp.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "softrdma.h"
#include "emu/limits.h"
#include "emu/qp.h"

/* libibverbs' ibv_create_qp() fills in nothing: the QP is set up here, as the kernel would. */
static void init_ibv_qp(struct ibv_qp *qp, struct ibv_context *context, struct ibv_pd *pd,
			const struct ibv_qp_init_attr_ex *attr, uint32_t qpn)
{
	qp->context = context;
	qp->qp_context = attr->qp_context;
	qp->pd = pd;
	qp->send_cq = attr->send_cq;
	qp->recv_cq = attr->recv_cq;
	qp->srq = attr->srq;
	qp->handle = qpn;
	qp->qp_num = qpn;
	qp->state = IBV_QPS_RESET;
	qp->qp_type = attr->qp_type;
	qp->events_completed = 0;
	pthread_mutex_init(&qp->mutex, NULL);
	pthread_cond_init(&qp->cond, NULL);
}

static struct ibv_qp *create_qp(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr)
{
	struct sr_context *ctx = to_sr_context(context);
	struct emu_qp_init init = { 0 };
	struct sr_qp *qp;
	int ret;

	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd || !attr->send_cq ||
	    !attr->recv_cq) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->comp_mask & ~(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
				IBV_QP_INIT_ATTR_CREATE_FLAGS) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags)) {
		/* XRC, RSS, TSO, creation flags...: not built. No flags at all is fine (rxe). */
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->srq && attr->srq->context != context) {
		errno = EINVAL;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;
	init.type = attr->qp_type;
	init.pd_handle = attr->pd->handle;
	init.send_cq = to_sr_cq(attr->send_cq)->cq;
	init.recv_cq = to_sr_cq(attr->recv_cq)->cq;
	init.srq = attr->srq ? to_sr_srq(attr->srq)->srq : NULL;
	init.cap = attr->cap;
	init.sq_sig_all = attr->sq_sig_all;
	init.handle = (uintptr_t)&qp->vqp.qp;
	init.async_fd = ctx->async_notify_fd;
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		ret = qp_ex_init(&qp->vqp.qp_ex, attr->send_ops_flags, attr->cap.max_inline_data,
				 attr->cap.max_send_sge, sr_post_send);
		if (ret)
			goto err_free;
		qp->extended = true;
		/* ibv_qp_to_qp_ex() hands out qp_ex only with this bit. */
		qp->vqp.comp_mask |= VERBS_QP_EX;
	}
	ret = emu_qp_create(ctx->engine, &init, &qp->qp);
	if (ret)
		goto err_ex;
	attr->cap = init.cap;
	init_ibv_qp(&qp->vqp.qp, context, attr->pd, attr, emu_qp_num(qp->qp));
	return &qp->vqp.qp;

err_ex:
	if (qp->extended)
		qp_ex_destroy(&qp->vqp.qp_ex);
err_free:
	free(qp);
	errno = ret;
	return NULL;
}

struct ibv_qp *sr_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ex = {
		.qp_context = attr->qp_context,
		.send_cq = attr->send_cq,
		.recv_cq = attr->recv_cq,
		.srq = attr->srq,
		.cap = attr->cap,
		.qp_type = attr->qp_type,
		.sq_sig_all = attr->sq_sig_all,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = pd,
	};
	struct ibv_qp *qp = create_qp(pd->context, &ex);

	if (qp)
		attr->cap = ex.cap;
	return qp;
}

struct ibv_qp *sr_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr)
{
	return create_qp(context, attr);
}

int sr_destroy_qp(struct ibv_qp *ibqp)
{
	struct sr_qp *qp = to_sr_qp(ibqp);

	emu_qp_destroy(qp->qp);
	if (qp->extended)
		qp_ex_destroy(&qp->vqp.qp_ex);
	pthread_cond_destroy(&ibqp->cond);
	pthread_mutex_destroy(&ibqp->mutex);
	free(qp);
	return 0;
}

int sr_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask)
{
	struct sr_context *ctx = to_sr_context(ibqp->context);
	const struct qp_attr_limits lim = {
		.phys_port_cnt = EMU_NUM_PORTS,
		.pkey_tbl_len = EMU_MAX_PKEYS,
		.gid_tbl_len = (uint32_t)ctx->gid_count,
		.max_mtu = EMU_PORT_MTU,
		.max_qp_init_rd_atom = EMU_MAX_QP_RD_ATOM,
		.max_qp_rd_atom = EMU_MAX_QP_RD_ATOM,
		.grh_required = true,	/* RoCE: every address carries a GRH */
		.alt_path_supported = false,
	};
	union ibv_gid sgid = { 0 };

	if ((attr_mask & IBV_QP_AV) && attr->ah_attr.is_global &&
	    attr->ah_attr.grh.sgid_index < (uint8_t)ctx->gid_count &&
	    ibv_query_gid(ibqp->context, 1, attr->ah_attr.grh.sgid_index, &sgid))
		return EINVAL;
	return emu_qp_modify(to_sr_qp(ibqp)->qp, attr, attr_mask, &lim, sgid.raw);
}

int sr_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask,
		struct ibv_qp_init_attr *init_attr)
{
	int ret;

	(void)attr_mask;	/* everything is cheap to report */
	ret = emu_qp_query(to_sr_qp(ibqp)->qp, attr, init_attr);
	if (ret)
		return ret;
	init_attr->qp_context = ibqp->qp_context;
	init_attr->send_cq = ibqp->send_cq;
	init_attr->recv_cq = ibqp->recv_cq;
	init_attr->srq = ibqp->srq;
	return 0;
}

/* The engine's form of one WR (emu/qp.h); EINVAL for a WR that names no object it needs. */
static int convert_send_wr(const struct ibv_send_wr *wr, enum ibv_qp_type type,
			   struct emu_send_wr *out)
{
	*out = (struct emu_send_wr){
		.wr_id = wr->wr_id,
		.opcode = wr->opcode,
		.send_flags = wr->send_flags,
		.imm_data = wr->imm_data,
		.invalidate_rkey = wr->invalidate_rkey,
		.num_sge = wr->num_sge,
		.sg_list = wr->sg_list,
	};
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		out->rdma.remote_addr = wr->wr.rdma.remote_addr;
		out->rdma.rkey = wr->wr.rdma.rkey;
		return 0;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		out->atomic.remote_addr = wr->wr.atomic.remote_addr;
		out->atomic.rkey = wr->wr.atomic.rkey;
		out->atomic.compare_add = wr->wr.atomic.compare_add;
		out->atomic.swap = wr->wr.atomic.swap;
		return 0;
	case IBV_WR_BIND_MW: {
		const struct ibv_mw_bind_info *info = &wr->bind_mw.bind_info;

		if (!wr->bind_mw.mw)
			return EINVAL;
		out->bind.window = to_sr_mw(wr->bind_mw.mw)->window;
		out->bind.req = (struct mw_bind_req){
			.new_rkey = wr->bind_mw.rkey,
			.has_mr = info->mr != NULL,
			.mr_lkey = info->mr ? info->mr->lkey : 0,
			.addr = info->addr,
			.length = info->length,
			.access = (int)info->mw_access_flags,
		};
		return 0;
	}
	default:
		break;
	}
	if (type == IBV_QPT_UD) {
		if (!wr->wr.ud.ah)
			return EINVAL;
		out->ud.av = &to_sr_ah(wr->wr.ud.ah)->av;
		out->ud.remote_qpn = wr->wr.ud.remote_qpn;
		out->ud.remote_qkey = wr->wr.ud.remote_qkey;
	}
	return 0;
}

#define POST_ON_STACK	16	/* longer chains are translated into a heap array */

int sr_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	struct emu_send_wr on_stack[POST_ON_STACK], *wrs = on_stack;
	struct ibv_send_wr *w;
	unsigned int n = 0, bad = 0;
	int ret = 0;

	for (w = wr; w; w = w->next)
		n++;
	if (!n)
		return 0;
	if (n > POST_ON_STACK && !(wrs = malloc(n * sizeof(*wrs)))) {
		*bad_wr = wr;
		return ENOMEM;
	}
	n = 0;
	for (w = wr; w && !ret; w = w->next)
		ret = convert_send_wr(w, ibqp->qp_type, &wrs[n++]);
	if (ret)
		bad = n - 1;
	else
		ret = emu_qp_post_send(to_sr_qp(ibqp)->qp, wrs, n, &bad);
	if (ret)
		for (*bad_wr = wr; bad--; *bad_wr = (*bad_wr)->next)
			;
	if (wrs != on_stack)
		free(wrs);
	return ret;
}

int sr_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	return emu_qp_post_recv(to_sr_qp(qp)->qp, wr, bad_wr);
}
