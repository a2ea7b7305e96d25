// SPDX-License-Identifier: MIT
/*
 * softrdma-sysfs: writes the sysfs tree libibverbs reads when it has no kernel driver to
 * ask (libibverbs takes it from $SYSFS_PATH once NETLINK_RDMA is refused), and prints its
 * path and the name of the uverbs node it chose. The host's real RDMA devices, if any, are
 * linked in so that they stay visible beside the soft one. The tree is the run directory
 * (kernel-abi/run_dir.h): a new private directory, made in a parent that nobody else can
 * tamper with, everything in it created here and never through a link. It also checks a
 * tree (--check) and prints its counters (--counters, counters_cmd.c) for `softrdma`.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stdbool.h>
#include <unistd.h>

#include "counters_cmd.h"
#include "host_gids.h"
#include "run_dir.h"
#include "emu/counter_store.h"
#include "../emu/limits.h"

#define SOFTRDMA_IBDEV "softrdma0"
#define UVERBS_ABI_VERSION 6	/* what libibverbs' check_abi_version() expects */
#define DEVICE_ABI_VERSION 1	/* per-device uverbs ABI; our driver matches exactly this */

static const char *real_sysfs = "/sys";
static const char *real_cdev_dir = "/dev/infiniband";
static int tree_fd = -1;	/* the new tree: every path below is relative to it */

static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "softrdma-sysfs: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(1);
}

static void format_path(char path[PATH_MAX], const char *fmt, va_list ap)
{
	if (vsnprintf(path, PATH_MAX, fmt, ap) >= PATH_MAX)
		fail("path too long: %s", path);
}

/* In the new, private tree, whose every entry this program makes (none exists before). */
static void make_dir(const char *fmt, ...)
{
	char path[PATH_MAX];
	va_list ap;

	va_start(ap, fmt);
	format_path(path, fmt, ap);
	va_end(ap);
	if (mkdirat(tree_fd, path, 0755))
		fail("cannot create %s: %s", path, strerror(errno));
}

static void write_file(const char *content, const char *fmt, ...)
{
	char path[PATH_MAX];
	va_list ap;
	FILE *f;
	int fd;

	va_start(ap, fmt);
	format_path(path, fmt, ap);
	va_end(ap);
	fd = openat(tree_fd, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f || fprintf(f, "%s\n", content) < 0 || fclose(f))
		fail("cannot write %s: %s", path, strerror(errno));
}

static int path_exists(const char *fmt, ...)
{
	char path[PATH_MAX];
	struct stat st;
	va_list ap;

	va_start(ap, fmt);
	format_path(path, fmt, ap);
	va_end(ap);
	return lstat(path, &st) == 0;
}

/* Real devices keep their names; links make them visible through our tree. */
static void link_real_devices(const char *class)
{
	char dir[PATH_MAX], target[PATH_MAX], link[PATH_MAX];
	struct dirent *d;
	DIR *dp;

	snprintf(dir, sizeof(dir), "%s/class/%s", real_sysfs, class);
	dp = opendir(dir);
	if (!dp)
		return;
	while ((d = readdir(dp))) {
		if (d->d_name[0] == '.' || !strcmp(d->d_name, "abi_version") ||
		    !strcmp(d->d_name, SOFTRDMA_IBDEV))
			continue;
		if (snprintf(link, sizeof(link), "class/%s/%s", class, d->d_name) >=
			    (int)sizeof(link) ||
		    snprintf(target, sizeof(target), "%s/%s", dir, d->d_name) >= (int)sizeof(target))
			continue;
		if (symlinkat(target, tree_fd, link))
			fail("cannot link %s: %s", link, strerror(errno));
	}
	closedir(dp);
}

static int pick_uverbs_index(void)
{
	for (int i = 0; i < 1024; i++)
		if (!path_exists("%s/class/infiniband_verbs/uverbs%d", real_sysfs, i) &&
		    !path_exists("%s/uverbs%d", real_cdev_dir, i))
			return i;
	fail("no free uverbs index under %s", real_cdev_dir);
	return -1;
}

static void format_guid(uint64_t guid, char out[20])
{
	snprintf(out, 20, "%04x:%04x:%04x:%04x", (unsigned)(guid >> 48) & 0xffff,
		 (unsigned)(guid >> 32) & 0xffff, (unsigned)(guid >> 16) & 0xffff,
		 (unsigned)guid & 0xffff);
}

static void write_port(const char *dev)
{
	struct host_gid gids[EMU_MAX_GIDS];
	char gid_text[40], bad[IF_NAMESIZE + 16] = "";
	const char *netdevs = getenv(HOST_NETDEVS_ENV);
	int n = host_netdevs_check(netdevs, bad);

	if (n == -ENODEV)
		fail("there is no network interface '%s' on this host (asked for by --netdev or " HOST_NETDEVS_ENV "=%s; 'ip link' lists them)", bad, netdevs);
	if (n)
		fail(HOST_NETDEVS_ENV "=%s: %s: give interface names separated by commas", netdevs, bad);
	n = host_gids_collect_for(netdevs, gids, EMU_MAX_GIDS);
	if (n < 0)
		fail("cannot list the host's addresses: %s", strerror(-n));
	make_dir("%s/ports", dev);
	make_dir("%s/ports/1", dev);
	make_dir("%s/ports/1/gids", dev);
	make_dir("%s/ports/1/gid_attrs", dev);
	make_dir("%s/ports/1/gid_attrs/types", dev);
	make_dir("%s/ports/1/gid_attrs/ndevs", dev);
	make_dir("%s/ports/1/pkeys", dev);
	write_file("4: ACTIVE", "%s/ports/1/state", dev);
	write_file("5: LinkUp", "%s/ports/1/phys_state", dev);
	/* What ibv_query_port's active_width and active_speed (1X, EDR) make, as the kernel
	 * writes it. */
	write_file("25 Gb/sec (1X EDR)", "%s/ports/1/rate", dev);
	write_file("Ethernet", "%s/ports/1/link_layer", dev);
	write_file("0x0", "%s/ports/1/lid", dev);
	write_file("0x0", "%s/ports/1/sm_lid", dev);
	write_file("0", "%s/ports/1/lid_mask_count", dev);
	write_file("0xffff", "%s/ports/1/pkeys/0", dev);
	for (int i = 0; i < n; i++) {
		host_gid_format(gids[i].raw, gid_text);
		write_file(gid_text, "%s/ports/1/gids/%d", dev, i);
		write_file("RoCE v2", "%s/ports/1/gid_attrs/types/%d", dev, i);
		write_file(gids[i].ifname, "%s/ports/1/gid_attrs/ndevs/%d", dev, i);
	}
}

static void write_tree(const char *uverbs)
{
	const char *dev = "class/infiniband/" SOFTRDMA_IBDEV;
	char guid[20], num[16], why[RUN_DIR_WHY_LEN];

	make_dir("class");
	make_dir("class/infiniband_verbs");
	make_dir("class/infiniband");
	snprintf(num, sizeof(num), "%d", UVERBS_ABI_VERSION);
	write_file(num, "class/infiniband_verbs/abi_version");
	make_dir("class/infiniband_verbs/%s", uverbs);
	write_file(SOFTRDMA_IBDEV, "class/infiniband_verbs/%s/ibdev", uverbs);
	/* 0:0 tells libibverbs not to compare the node's major:minor. */
	write_file("0:0", "class/infiniband_verbs/%s/dev", uverbs);
	snprintf(num, sizeof(num), "%d", DEVICE_ABI_VERSION);
	write_file(num, "class/infiniband_verbs/%s/abi_version", uverbs);

	make_dir("%s", dev);
	format_guid(host_node_guid(), guid);
	write_file("1: CA", "%s/node_type", dev);
	write_file(guid, "%s/node_guid", dev);
	write_file(guid, "%s/sys_image_guid", dev);
	write_file(EMU_FW_VER, "%s/fw_ver", dev);
	write_file(EMU_BOARD_ID, "%s/board_id", dev);
	write_file("softrdma", "%s/hca_type", dev);
	write_file("softrdma user-space RDMA", "%s/node_desc", dev);
	write_port(dev);
	if (store_create(tree_fd, why))
		fail("%s", why);

	link_real_devices("infiniband_verbs");
	link_real_devices("infiniband");
}

/* A new tree as PARENT/PREFIX.XXXXXX (temp) or at DIR; prints its path. */
static void create_tree(const char *path, bool temp, const char *prefix)
{
	char parent[PATH_MAX], name[NAME_MAX + 1], why[RUN_DIR_WHY_LEN];
	int parent_fd;

	if (snprintf(parent, sizeof(parent), "%s", path) >= (int)sizeof(parent))
		fail("path too long: %s", path);
	if (!temp) {
		char *slash = strrchr(parent, '/');

		snprintf(name, sizeof(name), "%s", slash + 1);
		slash[slash == parent] = 0;	/* "/x": the parent is "/" */
	}
	parent_fd = run_dir_open(parent, false, why);
	if (parent_fd < 0)
		fail("refusing to write the device tree under %s: %s", parent, why);
	if (temp)
		tree_fd = run_dir_make_temp(parent_fd, prefix, name, sizeof(name), why);
	else if (mkdirat(parent_fd, name, 0700))
		fail("cannot create %s: %s", path, strerror(errno));
	else
		tree_fd = run_dir_open(path, true, why);
	close(parent_fd);
	if (tree_fd < 0)
		fail("cannot create the device tree under %s: %s", parent, why);
	if (temp)
		printf("%s%s%s\n", parent, parent[strlen(parent) - 1] == '/' ? "" : "/", name);
	else
		printf("%s\n", path);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: softrdma-sysfs ABSOLUTE_DIR           write a new device tree at DIR\n"
		"       softrdma-sysfs --in PARENT [PREFIX]  ... at PARENT/PREFIX.XXXXXX\n"
		"       softrdma-sysfs --check TREE          check that TREE is a private tree of yours\n"
		"       softrdma-sysfs --counters TREE [--processes] [--qp]\n"
		"The tree is what libibverbs reads as SYSFS_PATH; the first two print its path and\n"
		"the uverbs node name it chose, one per line. " HOST_NETDEVS_ENV " names the\n"
		"interfaces the device is attached to besides loopback.\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const int run_signals[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2,
					   SIGALRM };
	char uverbs[32], why[RUN_DIR_WHY_LEN];
	bool temp = argc >= 3 && !strcmp(argv[1], "--in");
	sigset_t held, was;

	if (argc >= 3 && !strcmp(argv[1], "--counters"))
		return counters_command(argv[2], argc - 3, argv + 3);
	if (argc == 3 && !strcmp(argv[1], "--check")) {
		int fd = run_dir_open(argv[2], true, why);

		if (fd < 0) {
			fprintf(stderr, "softrdma: refusing %s: %s\n", argv[2], why);
			return 1;
		}
		close(fd);
		return 0;
	}
	if (!(temp && argc <= 4) && !(argc == 2 && argv[1][0] != '-'))
		usage();
	if (argv[temp ? 2 : 1][0] != '/' || (!temp && !strcmp(argv[1], "/")))
		usage();
	/* For tests: pretend another host's /sys and /dev/infiniband. */
	if (getenv("SOFTRDMA_REAL_SYSFS"))
		real_sysfs = getenv("SOFTRDMA_REAL_SYSFS");
	if (getenv("SOFTRDMA_REAL_CDEV_DIR"))
		real_cdev_dir = getenv("SOFTRDMA_REAL_CDEV_DIR");

	/*
	 * `softrdma run` traps these to remove the tree, and a signal sent to its whole
	 * process group (timeout(1)) reaches us too: held until the path is out, so that a
	 * tree we made is always one the caller knows of. Then it takes effect.
	 */
	sigemptyset(&held);
	for (size_t i = 0; i < sizeof(run_signals) / sizeof(run_signals[0]); i++)
		sigaddset(&held, run_signals[i]);
	sigprocmask(SIG_BLOCK, &held, &was);
	snprintf(uverbs, sizeof(uverbs), "uverbs%d", pick_uverbs_index());
	create_tree(argv[temp ? 2 : 1], temp, temp && argc == 4 ? argv[3] : "softrdma-sysfs");
	write_tree(uverbs);
	printf("%s\n", uverbs);
	fflush(stdout);
	sigprocmask(SIG_SETMASK, &was, NULL);
	return 0;
}
