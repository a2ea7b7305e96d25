// SPDX-License-Identifier: MIT
/*
 * Protection domains, memory registration and memory windows: MRs and windows live in the
 * engine's key table (emu/mr.h).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "softrdma.h"
#include "emu/mr.h"
#include "emu/qp.h"

struct ibv_pd *sr_alloc_pd(struct ibv_context *context)
{
	/* The PD's identity in the key table; never reused within a process. */
	static atomic_uint next_handle = 1;
	struct sr_pd *pd = calloc(1, sizeof(*pd));

	if (!pd)
		return NULL;
	pd->ibv_pd.context = context;
	pd->ibv_pd.handle = atomic_fetch_add(&next_handle, 1);
	return &pd->ibv_pd;
}

int sr_dealloc_pd(struct ibv_pd *pd)
{
	free(to_sr_pd(pd));
	return 0;
}

static struct mem_table *mem_of(struct ibv_context *context)
{
	return emu_engine_mem(to_sr_context(context)->engine);
}

struct ibv_mr *sr_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va,
			 int access)
{
	struct sr_mr *mr = calloc(1, sizeof(*mr));
	int ret;

	if (!mr)
		return NULL;
	ret = mr_register(mem_of(pd->context), pd->handle, addr, length, hca_va, access,
			  &mr->region);
	if (ret) {
		free(mr);
		errno = ret;
		return NULL;
	}
	mr->vmr.ibv_mr.context = pd->context;
	mr->vmr.ibv_mr.pd = pd;
	mr->vmr.ibv_mr.addr = addr;
	mr->vmr.ibv_mr.length = length;
	mr->vmr.ibv_mr.lkey = mr->region->lkey;
	mr->vmr.ibv_mr.rkey = mr->region->rkey;
	mr->vmr.mr_type = IBV_MR_TYPE_MR;
	mr->vmr.access = access;
	return &mr->vmr.ibv_mr;
}

int sr_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd, void *addr, size_t length,
		int access)
{
	struct sr_mr *mr = (struct sr_mr *)vmr;
	int ret;

	/* pd means something only with CHANGE_PD (ibv_rereg_mr(3)): it may be anything else. */
	ret = mr_reregister(mem_of(vmr->ibv_mr.context), mr->region, flags,
			    (flags & IBV_REREG_MR_CHANGE_PD) && pd ? pd->handle : 0, addr, length,
			    (uintptr_t)addr, access);
	if (ret)
		return ret;
	/* libibverbs updates ibv_mr's pd, addr and length itself. */
	vmr->ibv_mr.lkey = mr->region->lkey;
	vmr->ibv_mr.rkey = mr->region->rkey;
	return 0;
}

int sr_dereg_mr(struct verbs_mr *vmr)
{
	struct sr_mr *mr = (struct sr_mr *)vmr;
	int ret = mr_deregister(mem_of(vmr->ibv_mr.context), mr->region);

	if (ret)
		return ret;
	free(mr);
	return 0;
}

struct ibv_mw *sr_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct sr_mw *mw = calloc(1, sizeof(*mw));
	int ret;

	if (!mw)
		return NULL;
	ret = mw_alloc(mem_of(pd->context), pd->handle, type, &mw->window);
	if (ret) {
		free(mw);
		errno = ret;
		return NULL;
	}
	/* libibverbs' ibv_alloc_mw() leaves the whole object to the provider. */
	mw->ibv_mw.context = pd->context;
	mw->ibv_mw.pd = pd;
	mw->ibv_mw.rkey = mw->window->rkey;
	mw->ibv_mw.type = type;
	return &mw->ibv_mw;
}

int sr_dealloc_mw(struct ibv_mw *ibmw)
{
	struct sr_mw *mw = to_sr_mw(ibmw);
	int ret = mw_dealloc(mem_of(ibmw->context), mw->window);

	if (ret)
		return ret;
	free(mw);
	return 0;
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
