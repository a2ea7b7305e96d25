// SPDX-License-Identifier: MIT
/* Protection domains and memory registration. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "softrdma.h"

struct ibv_pd *sr_alloc_pd(struct ibv_context *context)
{
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

/* TEMPORARY until emu/mr lands */
static int check_access(int access)
{
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return EINVAL;
	return 0;
}

struct ibv_mr *sr_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va,
			 int access)
{
	struct verbs_mr *vmr;

	errno = check_access(access);
	if (errno)
		return NULL;
	vmr = calloc(1, sizeof(*vmr));
	if (!vmr)
		return NULL;
	vmr->ibv_mr.context = pd->context;
	vmr->ibv_mr.pd = pd;
	vmr->ibv_mr.addr = addr;
	vmr->ibv_mr.length = length;
	(void)hca_va;
	vmr->mr_type = IBV_MR_TYPE_MR;
	vmr->access = access;
	return &vmr->ibv_mr;
}

int sr_dereg_mr(struct verbs_mr *vmr)
{
	free(vmr);
	return 0;
}
