// SPDX-License-Identifier: MIT
/*
 * libsoftrdma-preload.so: the few things a kernel driver does for libibverbs that cannot be
 * done from a provider, interposed with LD_PRELOAD by `softrdma run`/`softrdma env`:
 *  - the device node /dev/infiniband/uverbsN (named by $SOFTRDMA_DEV_NODE) resolves to
 *    /dev/null: libibverbs only stats it, opens it and fails an ioctl on it;
 *  - NETLINK_RDMA sockets are refused, so libibverbs reads our tree at $SYSFS_PATH;
 *  - ibv_create_comp_channel/ibv_destroy_comp_channel, which talk to the kernel directly,
 *    get pipe-backed channels for softrdma contexts;
 *  - ibv_import_device of a softrdma command fd (our stand-in node) is EOPNOTSUPP, as on a
 *    device whose driver cannot share a context: there is no kernel object to import.
 * Every other call passes straight through after one length compare; this library never
 * links libibverbs, so programs that do not use RDMA do not load it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/netlink.h>

#include "comp_channel.h"
#include "provider_abi.h"

#define EXPORT __attribute__((visibility("default")))

static const char stand_in_node[] = "/dev/null";
static char dev_node[128];
static size_t dev_node_len;

__attribute__((constructor)) static void preload_init(void)
{
	const char *node = getenv("SOFTRDMA_DEV_NODE");

	if (node && strlen(node) < sizeof(dev_node)) {
		strcpy(dev_node, node);
		dev_node_len = strlen(node);
	}
}

static const char *redirect(const char *path)
{
	if (dev_node_len && path && path[0] == '/' && strncmp(path, dev_node, dev_node_len) == 0 &&
	    path[dev_node_len] == '\0')
		return stand_in_node;
	return path;
}

static void *next_symbol(const char *name)
{
	void *sym = dlsym(RTLD_NEXT, name);

	if (!sym)
		abort(); /* libc itself lacks it: nothing sensible is left to do */
	return sym;
}

#define NEXT(name) ({							\
	static typeof(&name) next_##name;				\
	if (!next_##name)						\
		next_##name = next_symbol(#name);			\
	next_##name; })

EXPORT int stat(const char *path, struct stat *st)
{
	return NEXT(stat)(redirect(path), st);
}

EXPORT int stat64(const char *path, struct stat64 *st)
{
	return NEXT(stat64)(redirect(path), st);
}

/* Binaries built against glibc < 2.33 call these instead of stat. */
int __xstat(int ver, const char *path, struct stat *st);
int __xstat64(int ver, const char *path, struct stat64 *st);

EXPORT int __xstat(int ver, const char *path, struct stat *st)
{
	return NEXT(__xstat)(ver, redirect(path), st);
}

EXPORT int __xstat64(int ver, const char *path, struct stat64 *st)
{
	return NEXT(__xstat64)(ver, redirect(path), st);
}

static mode_t mode_arg(int flags, va_list ap)
{
	return (flags & (O_CREAT | __O_TMPFILE)) ? va_arg(ap, mode_t) : 0;
}

EXPORT int open(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = mode_arg(flags, ap);
	va_end(ap);
	return NEXT(open)(redirect(path), flags, mode);
}

EXPORT int open64(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = mode_arg(flags, ap);
	va_end(ap);
	return NEXT(open64)(redirect(path), flags, mode);
}

EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = mode_arg(flags, ap);
	va_end(ap);
	return NEXT(openat)(dirfd, redirect(path), flags, mode);
}

EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = mode_arg(flags, ap);
	va_end(ap);
	return NEXT(openat64)(dirfd, redirect(path), flags, mode);
}

#ifndef NETLINK_RDMA
#define NETLINK_RDMA 20
#endif

EXPORT int socket(int domain, int type, int protocol)
{
	/* libibverbs falls back to $SYSFS_PATH only when it cannot ask the kernel. */
	if (dev_node_len && domain == AF_NETLINK && protocol == NETLINK_RDMA) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	return NEXT(socket)(domain, type, protocol);
}

static int context_is_softrdma(struct ibv_context *context)
{
	const struct verbs_device *vdev;

	if (!context || !context->device)
		return 0;
	vdev = verbs_get_device(context->device);
	return vdev->ops && vdev->ops->name && !strcmp(vdev->ops->name, SOFTRDMA_PROVIDER_NAME);
}

static void *next_verbs_symbol(const char *name)
{
	/* The application's reference is to the IBVERBS_1.0 version: take the same one. */
	void *sym = dlvsym(RTLD_NEXT, name, "IBVERBS_1.0");

	return sym ? sym : dlsym(RTLD_NEXT, name);
}

EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	static struct ibv_comp_channel *(*next_create)(struct ibv_context *);
	struct softrdma_comp_channel *ch;
	int fds[2];

	if (!context_is_softrdma(context)) {
		if (!next_create)
			next_create = next_verbs_symbol("ibv_create_comp_channel");
		if (!next_create) {
			errno = ENOSYS;
			return NULL;
		}
		return next_create(context);
	}
	ch = calloc(1, sizeof(*ch));
	if (!ch)
		return NULL;
	if (pipe2(fds, O_CLOEXEC)) {
		free(ch);
		return NULL;
	}
	/* The engine must never block on a slow reader: a full pipe already wakes it. */
	fcntl(fds[1], F_SETFL, O_NONBLOCK);
	ch->channel.context = context;
	ch->channel.fd = fds[0];
	ch->channel.refcnt = 0;
	ch->notify_fd = fds[1];
	ch->magic = SOFTRDMA_CHANNEL_MAGIC;
	return &ch->channel;
}

EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	static int (*next_destroy)(struct ibv_comp_channel *);
	struct softrdma_comp_channel *ch = (struct softrdma_comp_channel *)channel;
	struct ibv_context *context = channel ? channel->context : NULL;

	if (!context_is_softrdma(context)) {
		if (!next_destroy)
			next_destroy = next_verbs_symbol("ibv_destroy_comp_channel");
		return next_destroy ? next_destroy(channel) : ENOSYS;
	}
	pthread_mutex_lock(&context->mutex);
	if (channel->refcnt) {
		pthread_mutex_unlock(&context->mutex);
		return EBUSY;
	}
	pthread_mutex_unlock(&context->mutex);
	close(ch->channel.fd);
	close(ch->notify_fd);
	ch->magic = 0;
	free(ch);
	return 0;
}

/* An fd of the stand-in node, which is what a softrdma context's cmd_fd is. */
static bool is_stand_in_fd(int fd)
{
	struct stat of_fd, of_node;

	return getenv("SOFTRDMA_DEV_NODE") && !fstat(fd, &of_fd) && S_ISCHR(of_fd.st_mode) &&
	       !stat(stand_in_node, &of_node) && of_fd.st_rdev == of_node.st_rdev;
}

EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	static struct ibv_context *(*next_import)(int);

	if (is_stand_in_fd(cmd_fd)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!next_import) {
		next_import = dlvsym(RTLD_NEXT, "ibv_import_device", "IBVERBS_1.10");
		if (!next_import)
			next_import = dlsym(RTLD_NEXT, "ibv_import_device");
	}
	if (!next_import) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return next_import(cmd_fd);
}
