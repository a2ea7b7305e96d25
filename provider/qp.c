// SPDX-License-Identifier: MIT
/* Queue pairs: the provider side of emu/qp.c. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "softrdma.h"
#include "emu/limits.h"
#include "emu/qp.h"
#include "provider/shim_calls.h"

/* libibverbs' ibv_create_qp() fills in nothing: the QP is set up here, as the kernel would. */
static void init_ibv_qp(struct sr_qp *sqp, struct ibv_context *context, struct ibv_pd *pd,
			const struct ibv_qp_init_attr_ex *attr)
{
	struct ibv_qp *qp = &sqp->vqp.qp;

	qp->context = context;
	qp->qp_context = attr->qp_context;
	qp->pd = pd;
	/* As the kernel's ib_create_qp(): an XRC initiator has no receive side, a target none. */
	qp->send_cq = attr->qp_type == IBV_QPT_XRC_RECV ? NULL : attr->send_cq;
	qp->recv_cq = attr->qp_type == IBV_QPT_XRC_RECV || attr->qp_type == IBV_QPT_XRC_SEND ?
		      NULL : attr->recv_cq;
	qp->srq = qp->recv_cq ? attr->srq : NULL;
	qp->handle = sqp->obj.handle;
	qp->qp_num = emu_qp_num(sqp->qp);
	qp->state = IBV_QPS_RESET;
	qp->qp_type = attr->qp_type;
	qp->events_completed = 0;
	if (attr->qp_type == IBV_QPT_XRC_RECV) {
		/* libibverbs' verbs_qp says which domain (ibv_cmd_create_qp_ex2 sets the same). */
		sqp->vqp.xrcd = (struct verbs_xrcd *)attr->xrcd;
		sqp->vqp.comp_mask |= VERBS_QP_XRCD;
	}
	pthread_mutex_init(&qp->mutex, NULL);
	pthread_cond_init(&qp->cond, NULL);
}

/*
 * What each type needs (the kernel's create_qp() in uverbs_cmd.c): a PD and both CQs; an XRC
 * initiator a PD and a send CQ only; an XRC target its domain and nothing else, no CQs or
 * PD (ignored if given), no send operations.
 */
static int check_create_attr(const struct ibv_qp_init_attr_ex *attr)
{
	if (attr->comp_mask & ~(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |
				IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags))
		return EOPNOTSUPP;	/* RSS, TSO, creation flags...: not built (rxe) */
	if (attr->qp_type == IBV_QPT_XRC_RECV)
		return (attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) && attr->xrcd &&
		       !(attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ? 0 : EINVAL;
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd || !attr->send_cq)
		return EINVAL;
	return attr->qp_type == IBV_QPT_XRC_SEND || attr->recv_cq ? 0 : EINVAL;
}

/*
 * The QP is a user of its PD, CQs and SRQ (an XRC initiator: its PD and send CQ; a target:
 * its domain's handle), which must be live objects of this context.
 */
static int reserve_qp(struct sr_context *ctx, struct sr_qp *qp,
		      const struct ibv_qp_init_attr_ex *attr)
{
	struct sr_obj_ref parents[SR_OBJ_MAX_PARENTS];
	int n = 0;

	if (attr->qp_type == IBV_QPT_XRC_RECV) {
		parents[n++] = SR_XRCD_REF(attr->xrcd);
	} else {
		parents[n++] = SR_PD_REF(attr->pd);
		parents[n++] = SR_CQ_REF(attr->send_cq);
	}
	if (attr->qp_type != IBV_QPT_XRC_RECV && attr->qp_type != IBV_QPT_XRC_SEND) {
		parents[n++] = SR_CQ_REF(attr->recv_cq);
		if (attr->srq)
			parents[n++] = SR_SRQ_REF(attr->srq);
	}
	return sr_obj_create(ctx, &qp->obj, SR_OBJ_QP, parents, n);
}

static int make_qp(struct sr_context *ctx, struct sr_qp *qp, struct ibv_qp_init_attr_ex *attr)
{
	bool target = attr->qp_type == IBV_QPT_XRC_RECV, xrc = target ||
		      attr->qp_type == IBV_QPT_XRC_SEND;
	struct emu_qp_init init = {
		.type = attr->qp_type,
		.pd_handle = target ? 0 : to_sr_pd(attr->pd)->id,
		.xrcd = target ? sr_xrcd_id(to_sr_xrcd(attr->xrcd)) : 0,
		.send_cq = target ? NULL : to_sr_cq(attr->send_cq)->cq,
		.recv_cq = xrc ? NULL : to_sr_cq(attr->recv_cq)->cq,
		.srq = attr->srq && !xrc ? to_sr_srq(attr->srq)->srq : NULL,
		.cap = attr->cap,
		.sq_sig_all = attr->sq_sig_all,
		.handle = (uintptr_t)&qp->vqp.qp,
		.async_fd = ctx->async_notify_fd,
		.events_raised = &qp->async.raised,
	};
	int ret;

	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		ret = qp_ex_init(&qp->vqp.qp_ex, attr->send_ops_flags, attr->cap.max_inline_data,
				 attr->cap.max_send_sge, sr_post_send);
		if (ret)
			return ret;
		qp->extended = true;
		/* ibv_qp_to_qp_ex() hands out qp_ex only with this bit. */
		qp->vqp.comp_mask |= VERBS_QP_EX;
	}
	ret = emu_qp_create(ctx->engine, &init, &qp->qp);
	if (!ret && target) {
		ret = sr_xrc_tgt_add(to_sr_xrcd(attr->xrcd), qp);
		if (ret)
			emu_qp_destroy(qp->qp);
	}
	if (ret) {
		if (qp->extended)
			qp_ex_destroy(&qp->vqp.qp_ex);
		return ret;
	}
	attr->cap = init.cap;
	return 0;
}

/* A new QP, or (open_qpn not NULL) a new handle on the XRC target QP of that number. */
static struct ibv_qp *create_qp(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr,
			       const uint32_t *open_qpn)
{
	struct sr_context *ctx = to_sr_context(context);
	struct sr_qp *qp;
	int ret = check_create_attr(attr);

	if (ret) {
		errno = ret;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;
	ret = reserve_qp(ctx, qp, attr);
	if (ret)
		return sr_obj_create_failed(ctx, NULL, qp, ret);
	ret = open_qpn ? sr_xrc_tgt_share(to_sr_xrcd(attr->xrcd), *open_qpn, qp) :
			 make_qp(ctx, qp, attr);
	if (ret)
		return sr_obj_create_failed(ctx, &qp->obj, qp, ret);
	init_ibv_qp(qp, context, attr->qp_type == IBV_QPT_XRC_RECV ? NULL : attr->pd, attr);
	if (open_qpn)
		qp->vqp.qp.state = emu_qp_state(qp->qp);
	sr_obj_publish(ctx, &qp->obj);
	return &qp->vqp.qp;
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
	struct ibv_qp *qp = create_qp(pd->context, &ex, NULL);

	if (qp)
		attr->cap = ex.cap;
	return qp;
}

struct ibv_qp *sr_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr)
{
	return create_qp(context, attr, NULL);
}

/*
 * ibv_open_qp: another handle on an XRC target QP of the domain (ibv_cmd_open_qp()'s checks,
 * then the kernel's ib_open_qp(): only a target, only one the domain has; else EINVAL).
 */
struct ibv_qp *sr_open_qp(struct ibv_context *context, struct ibv_qp_open_attr *attr)
{
	const uint32_t needed = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
				IBV_QP_OPEN_ATTR_TYPE;
	struct ibv_qp_init_attr_ex init = {
		.qp_type = IBV_QPT_XRC_RECV,
		.comp_mask = IBV_QP_INIT_ATTR_XRCD,
	};

	if (attr->comp_mask >= IBV_QP_OPEN_ATTR_RESERVED) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((attr->comp_mask & needed) != needed || !attr->xrcd ||
	    attr->qp_type != IBV_QPT_XRC_RECV) {
		errno = EINVAL;
		return NULL;
	}
	init.xrcd = attr->xrcd;
	init.qp_context = (attr->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) ? attr->qp_context : NULL;
	return create_qp(context, &init, &attr->qp_num);
}

/*
 * Once the engine has let go of the QP it raises no more events: its unread ones are removed
 * and the destroy waits for the application to acknowledge the others, as ibv_cmd_destroy_qp()
 * does with the count the kernel returns (events.c).
 */
int sr_qp_teardown(struct sr_context *ctx, struct sr_qp *qp)
{
	struct ibv_qp *ibqp = &qp->vqp.qp;
	bool keep;

	/* An XRC target's QP goes with its last handle (xrcd.c). */
	if (!qp->tgt || sr_xrc_tgt_leave(qp))
		emu_qp_destroy(qp->qp);
	keep = sr_async_settle_unmake(ctx, &qp->obj, (uintptr_t)ibqp, &qp->async, &ibqp->mutex,
				      &ibqp->cond, &ibqp->events_completed);
	if (qp->extended)
		qp_ex_destroy(&qp->vqp.qp_ex);
	sr_obj_keep_or_free(ctx, &qp->obj, keep, &ibqp->mutex, &ibqp->cond);
	return 0;
}

/*
 * As uverbs_free_qp(): a user's destroy of a QP still attached to a multicast group is EBUSY
 * (ibv_close_device detaches it instead). An attach racing this destroy cannot leave the
 * group holding a freed QP: the engine detaches whatever a QP has when it goes.
 */
int sr_destroy_qp(struct ibv_qp *ibqp)
{
	struct sr_context *ctx = to_sr_context(ibqp->context);
	int ret = sr_obj_enter(ctx, SR_QP_REF(ibqp)), attached;

	if (ret)
		return ret;
	attached = emu_mcast_attached(to_sr_qp(ibqp)->qp);
	sr_obj_leave(ctx, &to_sr_qp(ibqp)->obj);
	if (attached)
		return EBUSY;
	return sr_obj_destroy(ctx, SR_QP_REF(ibqp));
}

/*
 * ibv_attach_mcast/ibv_detach_mcast: the checks of the kernel's ib_attach_mcast() (a UD QP,
 * a multicast GID; the LID means nothing on RoCE), then the engine's group table.
 */
static int mcast_verb(struct ibv_qp *ibqp, const union ibv_gid *gid, bool attach)
{
	struct sr_context *ctx = to_sr_context(ibqp->context);
	struct sr_qp *qp = to_sr_qp(ibqp);
	int ret = sr_obj_enter(ctx, SR_QP_REF(ibqp));

	if (ret)
		return ret;
	if (!attach)
		ret = emu_mcast_detach(qp->qp, gid->raw);
	else if (ibqp->qp_type != IBV_QPT_UD || !emu_gid_is_multicast(gid->raw))
		ret = EINVAL;
	else
		ret = emu_mcast_attach(qp->qp, gid->raw);
	sr_obj_leave(ctx, &qp->obj);
	return ret;
}

int sr_attach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	(void)lid;
	return mcast_verb(ibqp, gid, true);
}

int sr_detach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	(void)lid;
	return mcast_verb(ibqp, gid, false);
}

static int modify_qp(struct sr_context *ctx, struct sr_qp *qp, struct ibv_qp_attr *attr,
		     int attr_mask)
{
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

	/* From the table read at open: a modify needs no fd, as the kernel's does not. */
	if ((attr_mask & IBV_QP_AV) && attr->ah_attr.is_global &&
	    attr->ah_attr.grh.sgid_index < (uint8_t)ctx->gid_count)
		sgid = ctx->gids[attr->ah_attr.grh.sgid_index];
	return emu_qp_modify(qp->qp, attr, attr_mask, &lim, sgid.raw);
}

int sr_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask)
{
	struct sr_context *ctx = to_sr_context(ibqp->context);
	struct sr_qp *qp = to_sr_qp(ibqp);
	int ret = sr_obj_enter(ctx, SR_QP_REF(ibqp));

	if (ret)
		return ret;
	ret = modify_qp(ctx, qp, attr, attr_mask);
	sr_obj_leave(ctx, &qp->obj);
	return ret;
}

int sr_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask,
		struct ibv_qp_init_attr *init_attr)
{
	struct sr_context *ctx = to_sr_context(ibqp->context);
	struct sr_qp *qp = to_sr_qp(ibqp);
	int ret = sr_obj_enter(ctx, SR_QP_REF(ibqp));

	(void)attr_mask;	/* everything is cheap to report */
	if (ret)
		return ret;
	ret = emu_qp_query(qp->qp, attr, init_attr);
	if (!ret) {
		init_attr->qp_context = ibqp->qp_context;
		init_attr->send_cq = ibqp->send_cq;
		init_attr->recv_cq = ibqp->recv_cq;
		init_attr->srq = ibqp->srq;
	}
	sr_obj_leave(ctx, &qp->obj);
	return ret;
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
		.xrc_srqn = type == IBV_QPT_XRC_SEND ? wr->qp_type.xrc.remote_srqn : 0,
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

/* librdmacm-shim/qp.c's cm_qp_take_arrived(); shim_calls.h. */
__attribute__((visibility("default"))) softrdma_take_arrived_fn softrdma_qp_take_arrived;

void softrdma_qp_take_arrived(struct ibv_context *context, uint32_t qp_num)
{
	emu_qp_take_arrived(to_sr_context(context)->engine, qp_num);
}
