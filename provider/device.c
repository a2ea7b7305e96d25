// SPDX-License-Identifier: MIT
/*
 * Registration with libibverbs, the device and the context. The private entry points are
 * resolved at load time by their symbol version, and the loaded libibverbs' version is
 * checked against the range this build supports: a provider loaded into a libibverbs it was
 * not built for says so and stays out, instead of calling through a shifted ops table.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "softrdma.h"
#include "kernel-abi/comp_channel.h"
#include "emu/log.h"
#include "emu/qp.h"

struct provider_abi sr_abi;

static void sr_free_context(struct ibv_context *ibctx);

static const struct verbs_context_ops sr_context_ops = {
	.advise_mr = sr_advise_mr,
	.alloc_mw = sr_alloc_mw,
	.alloc_pd = sr_alloc_pd,
	.async_event = sr_async_event,
	.attach_mcast = sr_attach_mcast,
	.bind_mw = sr_bind_mw,
	.close_xrcd = sr_close_xrcd,
	.cq_event = sr_cq_event,
	.create_ah = sr_create_ah,
	.create_cq = sr_create_cq,
	.create_cq_ex = sr_create_cq_ex,
	.create_qp = sr_create_qp,
	.create_qp_ex = sr_create_qp_ex,
	.create_srq = sr_create_srq,
	.create_srq_ex = sr_create_srq_ex,
	.dealloc_mw = sr_dealloc_mw,
	.dealloc_pd = sr_dealloc_pd,
	.dereg_mr = sr_dereg_mr,
	.destroy_ah = sr_destroy_ah,
	.destroy_cq = sr_destroy_cq,
	.destroy_qp = sr_destroy_qp,
	.destroy_srq = sr_destroy_srq,
	.detach_mcast = sr_detach_mcast,
	.free_context = sr_free_context,
	.get_srq_num = sr_get_srq_num,
	.modify_qp = sr_modify_qp,
	.modify_srq = sr_modify_srq,
	.open_qp = sr_open_qp,
	.open_xrcd = sr_open_xrcd,
	.poll_cq = sr_poll_cq,
	.post_recv = sr_post_recv,
	.post_send = sr_post_send,
	.post_srq_recv = sr_post_srq_recv,
	.query_device_ex = sr_query_device_ex,
	.query_port = sr_query_port,
	.query_qp = sr_query_qp,
	.query_srq = sr_query_srq,
	.reg_mr = sr_reg_mr,
#if PABI_SINCE(59)
	.reg_mr_ex = sr_reg_mr_ex,
#endif
#if PABI_SINCE(62)
	.query_port_speed = sr_query_port_speed,
#endif
	.req_notify_cq = sr_req_notify_cq,
	.rereg_mr = sr_rereg_mr,
	.resize_cq = sr_resize_cq,
};

static struct verbs_context *sr_alloc_context(struct ibv_device *ibdev, int cmd_fd,
					      void *private_data)
{
	struct sr_context *ctx;
	int fds[2], ret;

	(void)private_data;
	ctx = sr_abi.init_and_alloc_context(ibdev, cmd_fd, sizeof(*ctx),
					     &((struct sr_context *)NULL)->vctx, 0);
	if (!ctx)
		return NULL;
	if (sr_objects_init(&ctx->objects))
		goto err_uninit;
	pthread_mutex_init(&ctx->drain_lock, NULL);
	ret = emu_engine_get(&ctx->engine);
	if (ret) {
		errno = ret;	/* ibv_open_device() reports it: EMFILE, ENOMEM... */
		goto err_objects;
	}
	if (pipe2(fds, O_CLOEXEC))
		goto err_engine;
	/* The engine raises events from its own thread and must never block on the reader. */
	fcntl(fds[1], F_SETFL, O_NONBLOCK);
	ctx->vctx.context.async_fd = fds[0];
	ctx->async_notify_fd = fds[1];
	/* For removing a destroyed object's unread events (events.c); -1 without /proc. */
	ctx->async_nowait_fd = sr_open_nowait(fds[0]);
	sr_load_gids(ctx, ibdev);
	ctx->vctx.context.num_comp_vectors = 1;
	sr_abi.set_ops(&ctx->vctx, &sr_context_ops);
	return &ctx->vctx;

err_engine:
	emu_engine_put(ctx->engine);
err_objects:
	pthread_mutex_destroy(&ctx->drain_lock);
	sr_objects_fini(&ctx->objects);
err_uninit:
	sr_abi.uninit_context(&ctx->vctx);
	free(ctx);
	return NULL;
}

static void sr_free_context(struct ibv_context *ibctx)
{
	struct sr_context *ctx = to_sr_context(ibctx);

	/* What the application left is destroyed, as the kernel's close of the context does. */
	sr_objects_release(ctx);
	emu_engine_put(ctx->engine);
	close(ctx->async_notify_fd);
	if (ctx->async_nowait_fd >= 0)
		close(ctx->async_nowait_fd);
	pthread_mutex_destroy(&ctx->drain_lock);
	sr_objects_fini(&ctx->objects);
	/* verbs_uninit_context closes async_fd and cmd_fd. */
	sr_abi.uninit_context(&ctx->vctx);
	free(ctx);
}

static struct verbs_device *sr_alloc_device(struct verbs_sysfs_dev *sysfs_dev)
{
	struct sr_device *dev;

	(void)sysfs_dev;
	dev = calloc(1, sizeof(*dev));
	return dev ? &dev->vdev : NULL;
}

static void sr_uninit_device(struct verbs_device *vdev)
{
	free((struct sr_device *)vdev);
}

static const struct verbs_match_ent sr_match_table[] = {
	/* libibverbs matches "rdma_device:N<ibdev name>" against this when it has no driver id. */
	{ .u.modalias = "rdma_device:*N" SOFTRDMA_PROVIDER_NAME "[0-9]*",
	  .kind = VERBS_MATCH_MODALIAS },
	{}
};

static const struct verbs_device_ops sr_device_ops = {
	.name = SOFTRDMA_PROVIDER_NAME,
	.match_min_abi_version = 1,
	.match_max_abi_version = 1,
	.match_table = sr_match_table,
	.alloc_device = sr_alloc_device,
	.uninit_device = sr_uninit_device,
	.alloc_context = sr_alloc_context,
};

/* libibverbs.so.1.<abi>.<rdma-core major>.<minor>; -1 when the file name says nothing. */
static int loaded_rdma_core_version(void *any_symbol)
{
	char real[PATH_MAX];
	const char *base, *p;
	unsigned int abi_major, abi_minor, major;
	Dl_info info;

	if (!dladdr(any_symbol, &info) || !info.dli_fname || !realpath(info.dli_fname, real))
		return -1;
	base = strrchr(real, '/');
	base = base ? base + 1 : real;
	p = strstr(base, ".so.");
	if (!p || sscanf(p, ".so.%u.%u.%u", &abi_major, &abi_minor, &major) != 3)
		return -1;
	return (int)major;
}

static void refuse(const char *why)
{
	fprintf(stderr,
		"softrdma: provider not registered: %s. This build supports rdma-core %d-%d (%s); "
		"rebuild softrdma against the installed rdma-core.\n",
		why, SOFTRDMA_RDMA_CORE_MIN, SOFTRDMA_RDMA_CORE_MAX, PABI_SYMVER);
}

__attribute__((constructor)) static void sr_register(void)
{
	void *lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
	char why[160];
	int version;

	if (!lib) {
		refuse("libibverbs.so.1 is not loaded in this process");
		return;
	}
	sr_abi.register_driver = dlvsym(lib, PABI_REGISTER_SYM, PABI_SYMVER);
	sr_abi.init_and_alloc_context = dlvsym(lib, "_verbs_init_and_alloc_context", PABI_SYMVER);
	sr_abi.set_ops = dlvsym(lib, "verbs_set_ops", PABI_SYMVER);
	sr_abi.uninit_context = dlvsym(lib, "verbs_uninit_context", PABI_SYMVER);
	if (!sr_abi.register_driver || !sr_abi.init_and_alloc_context || !sr_abi.set_ops ||
	    !sr_abi.uninit_context) {
		refuse("the loaded libibverbs does not export " PABI_REGISTER_SYM "@" PABI_SYMVER);
		goto out;
	}
	version = loaded_rdma_core_version(sr_abi.register_driver);
	if (version >= 0 && (version < SOFTRDMA_RDMA_CORE_MIN || version > SOFTRDMA_RDMA_CORE_MAX)) {
		snprintf(why, sizeof(why), "the loaded libibverbs is rdma-core %d", version);
		refuse(why);
		goto out;
	}
	/* Our diagnostics go where every provider's do (NULL: we write VERBS_LOG_FILE). */
	emu_log_use_verbs_log((emu_verbs_log_fn)dlvsym(lib, "__verbs_log", PABI_SYMVER));
	sr_abi.register_driver(&sr_device_ops);
out:
	/* libibverbs stays loaded: the application linked it. */
	dlclose(lib);
}
