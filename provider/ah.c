// SPDX-License-Identifier: MIT
/* Address handles for UD: where a datagram goes, resolved once from the AV. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "softrdma.h"

#define AH_REF(ah)	SR_REF((struct sr_ah *)(ah), ah, SR_OBJ_AH)

struct ibv_ah *sr_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct sr_context *ctx = to_sr_context(pd->context);
	struct sr_obj_ref parent = SR_PD_REF(pd);
	struct sr_ah *ah;
	int ret;

	/* RoCE: an address is a GID, so every AH carries a GRH, as the kernel requires. */
	if (attr->port_num != 1 || !attr->is_global ||
	    attr->grh.sgid_index >= (unsigned int)ctx->gid_count) {
		errno = EINVAL;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return NULL;
	ret = sr_obj_create(ctx, &ah->obj, SR_OBJ_AH, &parent, 1);
	if (ret)
		return sr_obj_create_failed(ctx, NULL, ah, ret);
	ah->ibv_ah.context = pd->context;
	ah->ibv_ah.pd = pd;
	ah->ibv_ah.handle = ah->obj.handle;
	memcpy(ah->av.dgid, attr->grh.dgid.raw, 16);
	memcpy(ah->av.sgid, ctx->gids[attr->grh.sgid_index].raw, 16);
	ah->av.hop_limit = attr->grh.hop_limit;
	ah->av.traffic_class = attr->grh.traffic_class;
	sr_obj_publish(ctx, &ah->obj);
	return &ah->ibv_ah;
}

int sr_ah_teardown(struct sr_context *ctx, struct sr_ah *ah)
{
	return sr_obj_teardown_free(ctx, &ah->obj, ah, 0);
}

int sr_destroy_ah(struct ibv_ah *ibah)
{
	return sr_obj_destroy(to_sr_context(ibah->context), AH_REF(ibah));
}
