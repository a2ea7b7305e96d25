// SPDX-License-Identifier: MIT
/*
 * libsoftrdma-preload.so: the few things a kernel driver does for libibverbs that cannot be
 * done from a provider, interposed with LD_PRELOAD by `softrdma run`/`softrdma env`:
 *  - the device node /dev/infiniband/uverbsN (named by $SOFTRDMA_DEV_NODE) resolves to
 *    /dev/null: libibverbs only stats it, opens it and fails an ioctl on it; UCX also
 *    asks access(R_OK|W_OK) of it before it keeps a device;
 *  - /sys/class/infiniband and /sys/class/infiniband_verbs resolve to the run's tree at
 *    $SYSFS_PATH, which holds softrdma0 and links to the host's real devices: libibverbs
 *    reads the tree through $SYSFS_PATH, but UCX, hwloc and others read /sys directly;
 *    every libc call that takes such a path (access, stat, open, fopen, opendir and their
 *    variants) is interposed, since glibc's own fopen and friends do not call open;
 *  - NETLINK_RDMA sockets are refused, so libibverbs reads our tree at $SYSFS_PATH;
 *  - ibv_create_comp_channel/ibv_destroy_comp_channel, which talk to the kernel directly,
 *    get pipe-backed channels for softrdma contexts;
 *  - ibv_import_device of a softrdma command fd (our stand-in node) is EOPNOTSUPP, as on a
 *    device whose driver cannot share a context: there is no kernel object to import.
 * Every other call passes straight through after one length compare; this library never
 * links libibverbs, so programs that do not use RDMA do not load it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
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
static char sysfs_root[PATH_MAX];	/* $SYSFS_PATH: the run's tree */
static size_t sysfs_root_len;

/* The class directories the run's tree stands in for: /sys/X is $SYSFS_PATH/X there. */
static const char sys_prefix[] = "/sys";
static const char *const sysfs_classes[] = {
	"/sys/class/infiniband",
	"/sys/class/infiniband_verbs",
};

__attribute__((constructor)) static void preload_init(void)
{
	const char *node = getenv("SOFTRDMA_DEV_NODE");
	const char *tree = getenv("SYSFS_PATH");

	if (node && strlen(node) < sizeof(dev_node)) {
		strcpy(dev_node, node);
		dev_node_len = strlen(node);
	}
	/* Without the node there is no softrdma run, and /sys stays the host's. */
	if (dev_node_len && tree && tree[0] == '/' && strlen(tree) < sizeof(sysfs_root)) {
		strcpy(sysfs_root, tree);
		sysfs_root_len = strlen(tree);
	}
}

/* PATH is DIR itself or something below it. */
static bool path_is_under(const char *path, const char *dir)
{
	size_t len = strlen(dir);

	return strncmp(path, dir, len) == 0 && (path[len] == '\0' || path[len] == '/');
}

/* A path in one of the tree's classes, as the same path in the tree, written into TO. */
static const char *redirect_sysfs(const char *path, char to[PATH_MAX])
{
	size_t below_sys = strlen(path + strlen(sys_prefix));

	for (size_t i = 0; i < sizeof(sysfs_classes) / sizeof(sysfs_classes[0]); i++) {
		if (!path_is_under(path, sysfs_classes[i]))
			continue;
		/* Too long for the tree is too long: let the call say ENAMETOOLONG itself. */
		if (sysfs_root_len + below_sys >= PATH_MAX)
			return path;
		memcpy(to, sysfs_root, sysfs_root_len);
		memcpy(to + sysfs_root_len, path + strlen(sys_prefix), below_sys + 1);
		return to;
	}
	return path;
}

/*
 * What a path of the kernel's stands for in this run: the node is /dev/null, the device's
 * sysfs is the run's tree; anything else is itself. TO is room for a rewritten path.
 */
static const char *redirect(const char *path, char to[PATH_MAX])
{
	if (!dev_node_len || !path || path[0] != '/')
		return path;
	if (strncmp(path, dev_node, dev_node_len) == 0 && path[dev_node_len] == '\0')
		return stand_in_node;
	/* Both classes' names start with the first one's. */
	if (sysfs_root_len && strncmp(path, sysfs_classes[0], strlen(sysfs_classes[0])) == 0)
		return redirect_sysfs(path, to);
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

/*
 * Each call that takes a path is passed on with the path redirect() gives. glibc calls its
 * own internal entry points, never these, so every variant a program may call is here.
 * Each has room on its stack for a path rewritten into the tree: ARGS name it REDIRECTED.
 */
#define REDIRECTED redirect(path, to)
#define INTERPOSE(ret, name, params, args)				\
	EXPORT ret name params						\
	{								\
		char to[PATH_MAX];					\
									\
		return NEXT(name) args;					\
	}

/* The access checks: UCX keeps a device only if access(node, R_OK | W_OK) succeeds. */
INTERPOSE(int, access, (const char *path, int mode), (REDIRECTED, mode))
INTERPOSE(int, faccessat, (int dirfd, const char *path, int mode, int flags),
	  (dirfd, REDIRECTED, mode, flags))
INTERPOSE(int, euidaccess, (const char *path, int mode), (REDIRECTED, mode))
INTERPOSE(int, eaccess, (const char *path, int mode), (REDIRECTED, mode))

INTERPOSE(int, stat, (const char *path, struct stat *st), (REDIRECTED, st))
INTERPOSE(int, stat64, (const char *path, struct stat64 *st), (REDIRECTED, st))
INTERPOSE(int, lstat, (const char *path, struct stat *st), (REDIRECTED, st))
INTERPOSE(int, lstat64, (const char *path, struct stat64 *st), (REDIRECTED, st))
INTERPOSE(int, fstatat, (int dirfd, const char *path, struct stat *st, int flags),
	  (dirfd, REDIRECTED, st, flags))
INTERPOSE(int, fstatat64, (int dirfd, const char *path, struct stat64 *st, int flags),
	  (dirfd, REDIRECTED, st, flags))
INTERPOSE(int, statx, (int dirfd, const char *path, int flags, unsigned int mask,
		       struct statx *st), (dirfd, REDIRECTED, flags, mask, st))

/* Binaries built against glibc < 2.33 call these instead of stat, lstat and fstatat. */
int __xstat(int ver, const char *path, struct stat *st);
int __xstat64(int ver, const char *path, struct stat64 *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __lxstat64(int ver, const char *path, struct stat64 *st);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags);

INTERPOSE(int, __xstat, (int ver, const char *path, struct stat *st), (ver, REDIRECTED, st))
INTERPOSE(int, __xstat64, (int ver, const char *path, struct stat64 *st), (ver, REDIRECTED, st))
INTERPOSE(int, __lxstat, (int ver, const char *path, struct stat *st), (ver, REDIRECTED, st))
INTERPOSE(int, __lxstat64, (int ver, const char *path, struct stat64 *st),
	  (ver, REDIRECTED, st))
INTERPOSE(int, __fxstatat, (int ver, int dirfd, const char *path, struct stat *st, int flags),
	  (ver, dirfd, REDIRECTED, st, flags))
INTERPOSE(int, __fxstatat64,
	  (int ver, int dirfd, const char *path, struct stat64 *st, int flags),
	  (ver, dirfd, REDIRECTED, st, flags))

/* The open family: the mode is there only when the flags say a file may be created. */
static mode_t mode_arg(int flags, va_list ap)
{
	return (flags & (O_CREAT | __O_TMPFILE)) ? va_arg(ap, mode_t) : 0;
}

#define INTERPOSE_OPEN(name, params, args)				\
	EXPORT int name params						\
	{								\
		char to[PATH_MAX];					\
		va_list ap;						\
		mode_t mode;						\
									\
		va_start(ap, flags);					\
		mode = mode_arg(flags, ap);				\
		va_end(ap);						\
		return NEXT(name) args;					\
	}

INTERPOSE_OPEN(open, (const char *path, int flags, ...), (REDIRECTED, flags, mode))
INTERPOSE_OPEN(open64, (const char *path, int flags, ...), (REDIRECTED, flags, mode))
INTERPOSE_OPEN(openat, (int dirfd, const char *path, int flags, ...),
	       (dirfd, REDIRECTED, flags, mode))
INTERPOSE_OPEN(openat64, (int dirfd, const char *path, int flags, ...),
	       (dirfd, REDIRECTED, flags, mode))

/* What programs built with _FORTIFY_SOURCE call for open and openat. */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

INTERPOSE(int, __open_2, (const char *path, int flags), (REDIRECTED, flags))
INTERPOSE(int, __open64_2, (const char *path, int flags), (REDIRECTED, flags))
INTERPOSE(int, __openat_2, (int dirfd, const char *path, int flags), (dirfd, REDIRECTED, flags))
INTERPOSE(int, __openat64_2, (int dirfd, const char *path, int flags),
	  (dirfd, REDIRECTED, flags))

/* glibc's fopen and opendir open the file themselves, not through open. */
INTERPOSE(FILE *, fopen, (const char *path, const char *mode), (REDIRECTED, mode))
INTERPOSE(FILE *, fopen64, (const char *path, const char *mode), (REDIRECTED, mode))
INTERPOSE(DIR *, opendir, (const char *path), (REDIRECTED))

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
