/* SPDX-License-Identifier: MIT */
/* The provider's objects: each wraps the libibverbs object the application sees. */
#ifndef SOFTRDMA_PROVIDER_H
#define SOFTRDMA_PROVIDER_H

#include <infiniband/verbs.h>

#include "kernel-abi/provider_abi.h"

struct sr_device {
	struct verbs_device vdev;
};

struct sr_context {
	struct verbs_context vctx;
	int async_notify_fd;	/* write end of the pipe behind context.async_fd */
	int gid_count;		/* entries in the GID table libibverbs reads from sysfs */
};

struct sr_pd {
	struct ibv_pd ibv_pd;
};

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

/* pd_mr.c */
struct ibv_pd *sr_alloc_pd(struct ibv_context *context);
int sr_dealloc_pd(struct ibv_pd *pd);
struct ibv_mr *sr_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va,
			 int access);
int sr_dereg_mr(struct verbs_mr *vmr);

#endif
