// SPDX-License-Identifier: MIT
/*
 * Protection domains, memory registration and memory windows: MRs and windows live in the
 * engine's key table (emu/mr.h). Every one of them is a user of its PD (objects.c).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "softrdma.h"
#include "emu/mr.h"
#include "emu/odp.h"
#include "emu/qp.h"

#define MR_REF(mr)	SR_REF((struct sr_mr *)(mr), &(mr)->ibv_mr, SR_OBJ_MR)
#define MW_REF(mw)	SR_REF((struct sr_mw *)(mw), mw, SR_OBJ_MW)

struct ibv_pd *sr_alloc_pd(struct ibv_context *context)
{
	/* The PD's identity in the key table; never reused within a process. */
	static atomic_uint next_id = 1;
	struct sr_context *ctx = to_sr_context(context);
	struct sr_pd *pd = calloc(1, sizeof(*pd));
	int ret;

	if (!pd)
		return NULL;
	ret = sr_obj_create(ctx, &pd->obj, SR_OBJ_PD, NULL, 0);
	if (ret)
		return sr_obj_create_failed(ctx, NULL, pd, ret);
	pd->ibv_pd.context = context;
	pd->ibv_pd.handle = pd->obj.handle;
	pd->id = atomic_fetch_add(&next_id, 1);
	sr_obj_publish(ctx, &pd->obj);
	return &pd->ibv_pd;
}

int sr_pd_teardown(struct sr_context *ctx, struct sr_pd *pd)
{
	return sr_obj_teardown_free(ctx, &pd->obj, pd, 0);
}

int sr_dealloc_pd(struct ibv_pd *ibpd)
{
	return sr_obj_destroy(to_sr_context(ibpd->context), SR_PD_REF(ibpd));
}

static struct mem_table *mem_of(struct sr_context *ctx)
{
	return emu_engine_mem(ctx->engine);
}

struct ibv_mr *sr_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va,
			 int access)
{
	struct sr_context *ctx = to_sr_context(pd->context);
	struct sr_obj_ref parent = SR_PD_REF(pd);
	struct sr_mr *mr = calloc(1, sizeof(*mr));
	int ret;

	if (!mr)
		return NULL;
	ret = sr_obj_create(ctx, &mr->obj, SR_OBJ_MR, &parent, 1);
	if (ret)
		return sr_obj_create_failed(ctx, NULL, mr, ret);
	ret = mr_register(mem_of(ctx), to_sr_pd(pd)->id, addr, length, hca_va, access,
			  &mr->region);
	if (ret)
		return sr_obj_create_failed(ctx, &mr->obj, mr, ret);
	mr->vmr.ibv_mr.context = pd->context;
	mr->vmr.ibv_mr.pd = pd;
	mr->vmr.ibv_mr.addr = addr;
	mr->vmr.ibv_mr.length = length;
	mr->vmr.ibv_mr.handle = mr->obj.handle;
	mr->vmr.ibv_mr.lkey = mr->region->lkey;
	mr->vmr.ibv_mr.rkey = mr->region->rkey;
	mr->vmr.mr_type = IBV_MR_TYPE_MR;
	mr->vmr.access = access;
	sr_obj_publish(ctx, &mr->obj);
	return &mr->vmr.ibv_mr;
}

/* ibv_rereg_mr(IBV_REREG_MR_CHANGE_PD): the MR is a user of the new PD from then on. */
static int rereg_new_pd(struct sr_context *ctx, struct sr_mr *mr, struct ibv_pd *pd,
			uint32_t *pd_id)
{
	if (!pd)
		return EINVAL;
	*pd_id = to_sr_pd(pd)->id;
	/* mr->obj.parents[0] is its PD; the swap checks the new one's handle first. */
	return sr_obj_swap_parent(ctx, &mr->obj, mr->obj.parents[0], SR_PD_REF(pd));
}

int sr_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd, void *addr, size_t length,
		int access)
{
	struct sr_context *ctx = to_sr_context(vmr->ibv_mr.context);
	struct sr_mr *mr = (struct sr_mr *)vmr;
	struct sr_obj *old_pd = mr->obj.parents[0];
	uint32_t pd_id = 0;
	int ret = sr_obj_enter(ctx, MR_REF(vmr));

	if (ret) {
		errno = ret;
		return ret;
	}
	/* pd means something only with CHANGE_PD (ibv_rereg_mr(3)): it may be anything else. */
	if (flags & IBV_REREG_MR_CHANGE_PD)
		ret = rereg_new_pd(ctx, mr, pd, &pd_id);
	if (!ret) {
		ret = mr_reregister(mem_of(ctx), mr->region, flags, pd_id, addr, length,
				    (uintptr_t)addr, access);
		if (ret && (flags & IBV_REREG_MR_CHANGE_PD))
			sr_obj_swap_parent(ctx, &mr->obj, mr->obj.parents[0],
					   (struct sr_obj_ref){ old_pd, old_pd->handle,
								SR_OBJ_PD });
	}
	if (!ret) {
		/* libibverbs updates ibv_mr's pd, addr and length itself. */
		vmr->ibv_mr.lkey = mr->region->lkey;
		vmr->ibv_mr.rkey = mr->region->rkey;
	}
	sr_obj_leave(ctx, &mr->obj);
	/* libibverbs returns IBV_REREG_MR_ERR_CMD: the reason is in errno, as a syscall left it. */
	if (ret)
		errno = ret;
	return ret;
}

int sr_mr_teardown(struct sr_context *ctx, struct sr_mr *mr)
{
	/* Refused only for a region the table does not hold: closing drops it anyway. */
	return sr_obj_teardown_free(ctx, &mr->obj, mr, mr_deregister(mem_of(ctx), mr->region));
}

/* ibv_advise_mr(): emu/odp.c checks and prefetches; a positive errno, as mlx5's ioctl. */
int sr_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
		 struct ibv_sge *sg_list, uint32_t num_sge)
{
	return odp_advise(mem_of(to_sr_context(pd->context)), to_sr_pd(pd)->id, advice, flags,
			  sg_list, num_sge);
}

int sr_dereg_mr(struct verbs_mr *vmr)
{
	return sr_obj_destroy(to_sr_context(vmr->ibv_mr.context), MR_REF(vmr));
}

struct ibv_mw *sr_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct sr_context *ctx = to_sr_context(pd->context);
	struct sr_obj_ref parent = SR_PD_REF(pd);
	struct sr_mw *mw = calloc(1, sizeof(*mw));
	int ret;

	if (!mw)
		return NULL;
	ret = sr_obj_create(ctx, &mw->obj, SR_OBJ_MW, &parent, 1);
	if (ret)
		return sr_obj_create_failed(ctx, NULL, mw, ret);
	ret = mw_alloc(mem_of(ctx), to_sr_pd(pd)->id, type, &mw->window);
	if (ret)
		return sr_obj_create_failed(ctx, &mw->obj, mw, ret);
	/* libibverbs' ibv_alloc_mw() leaves the whole object to the provider. */
	mw->ibv_mw.context = pd->context;
	mw->ibv_mw.pd = pd;
	mw->ibv_mw.rkey = mw->window->rkey;
	mw->ibv_mw.handle = mw->obj.handle;
	mw->ibv_mw.type = type;
	sr_obj_publish(ctx, &mw->obj);
	return &mw->ibv_mw;
}

int sr_mw_teardown(struct sr_context *ctx, struct sr_mw *mw)
{
	return sr_obj_teardown_free(ctx, &mw->obj, mw, mw_dealloc(mem_of(ctx), mw->window));
}

int sr_dealloc_mw(struct ibv_mw *ibmw)
{
	return sr_obj_destroy(to_sr_context(ibmw->context), MW_REF(ibmw));
}

/*
 * ibv_bind_mw(): a type 1 bind is a BIND_MW work request like a type 2 one, with the next
 * key chosen here (rxe does the same); the MW shows that key once the bind is posted.
 */
int sr_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind)
{
	struct ibv_send_wr wr = {
		.wr_id = mw_bind->wr_id,
		.opcode = IBV_WR_BIND_MW,
		.send_flags = mw_bind->send_flags,
		.bind_mw = {
			.mw = mw,
			.rkey = ibv_inc_rkey(mw->rkey),
			.bind_info = mw_bind->bind_info,
		},
	};
	struct ibv_send_wr *bad;
	int ret;

	if (mw_bind->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED)
		return EINVAL;	/* o10-36.2.2: no zero-based type 1 window */
	ret = sr_post_send(qp, &wr, &bad);
	if (!ret)
		mw->rkey = wr.bind_mw.rkey;
	return ret;
}
