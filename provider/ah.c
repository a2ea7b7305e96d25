// SPDX-License-Identifier: MIT
/* Address handles for UD: where a datagram goes, resolved once from the AV. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "softrdma.h"
#include "emu/limits.h"
#include "emu/qp.h"

struct ibv_ah *sr_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct sr_context *ctx = to_sr_context(pd->context);
	union ibv_gid sgid;
	struct sr_ah *ah;

	/* RoCE: an address is a GID, so every AH carries a GRH, as the kernel requires. */
	if (attr->port_num != 1 || !attr->is_global ||
	    attr->grh.sgid_index >= (unsigned int)ctx->gid_count ||
	    ibv_query_gid(pd->context, 1, attr->grh.sgid_index, &sgid)) {
		errno = EINVAL;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return NULL;
	ah->ibv_ah.context = pd->context;
	ah->ibv_ah.pd = pd;
	memcpy(ah->av.dgid, attr->grh.dgid.raw, 16);
	memcpy(ah->av.sgid, sgid.raw, 16);
	ah->av.hop_limit = attr->grh.hop_limit;
	ah->av.traffic_class = attr->grh.traffic_class;
	return &ah->ibv_ah;
}

int sr_destroy_ah(struct ibv_ah *ah)
{
	free(to_sr_ah(ah));
	return 0;
}
