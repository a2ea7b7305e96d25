// SPDX-License-Identifier: MIT
/*
 * softrdma-sysfs DIR: writes the sysfs tree libibverbs reads when it has no kernel driver to
 * ask (libibverbs takes it from $SYSFS_PATH once NETLINK_RDMA is refused), and prints the
 * name of the uverbs node it chose. The host's real RDMA devices, if any, are linked in so
 * that they stay visible beside the soft one.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host_gids.h"
#include "../emu/counters.h"
#include "../emu/limits.h"

#define SOFTRDMA_IBDEV "softrdma0"
#define UVERBS_ABI_VERSION 6	/* what libibverbs' check_abi_version() expects */
#define DEVICE_ABI_VERSION 1	/* per-device uverbs ABI; our driver matches exactly this */

static const char *real_sysfs = "/sys";
static const char *real_cdev_dir = "/dev/infiniband";

static void die(const char *what, const char *path)
{
	fprintf(stderr, "softrdma-sysfs: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

static void make_dir(const char *fmt, ...)
{
	char path[PATH_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	if (mkdir(path, 0755) && errno != EEXIST)
		die("cannot create", path);
}

static void write_file(const char *content, const char *fmt, ...)
{
	char path[PATH_MAX];
	va_list ap;
	FILE *f;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	f = fopen(path, "we");
	if (!f || fprintf(f, "%s\n", content) < 0 || fclose(f))
		die("cannot write", path);
}

static int path_exists(const char *fmt, ...)
{
	char path[PATH_MAX];
	struct stat st;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	return lstat(path, &st) == 0;
}

/* Real devices keep their names; links make them visible through our tree. */
static void link_real_devices(const char *root, const char *class)
{
	char dir[PATH_MAX], target[PATH_MAX], link[PATH_MAX];
	struct dirent *d;
	DIR *dp;

	snprintf(dir, sizeof(dir), "%s/class/%s", real_sysfs, class);
	dp = opendir(dir);
	if (!dp)
		return;
	while ((d = readdir(dp))) {
		if (d->d_name[0] == '.' || !strcmp(d->d_name, "abi_version"))
			continue;
		if (snprintf(link, sizeof(link), "%s/class/%s/%s", root, class, d->d_name) >=
			    (int)sizeof(link) ||
		    snprintf(target, sizeof(target), "%s/%s", dir, d->d_name) >= (int)sizeof(target))
			continue;
		if (symlink(target, link) && errno != EEXIST)
			die("cannot link", link);
	}
	closedir(dp);
}

static int pick_uverbs_index(void)
{
	for (int i = 0; i < 1024; i++)
		if (!path_exists("%s/class/infiniband_verbs/uverbs%d", real_sysfs, i) &&
		    !path_exists("%s/uverbs%d", real_cdev_dir, i))
			return i;
	errno = ENOSPC;
	die("no free uverbs index under", real_cdev_dir);
	return -1;
}

static void format_guid(uint64_t guid, char out[20])
{
	snprintf(out, 20, "%04x:%04x:%04x:%04x", (unsigned)(guid >> 48) & 0xffff,
		 (unsigned)(guid >> 32) & 0xffff, (unsigned)(guid >> 16) & 0xffff,
		 (unsigned)guid & 0xffff);
}

/*
 * The port counters' shared file (zeroed) and their names, one per line in the file's order,
 * so that `softrdma counters` can print them without knowing the list.
 */
static void write_counters(const char *root)
{
	static const uint64_t zero[EMU_CNT_MAX];
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/" EMU_COUNTERS_FILE, root);
	f = fopen(path, "we");
	if (!f || fwrite(zero, sizeof(zero), 1, f) != 1 || fclose(f))
		die("cannot write", path);
	snprintf(path, sizeof(path), "%s/" EMU_COUNTERS_FILE "_names", root);
	f = fopen(path, "we");
	for (int i = 0; f && i < EMU_CNT_MAX; i++)
		fprintf(f, "%s\n", emu_counter_names[i]);
	if (!f || fclose(f))
		die("cannot write", path);
}

static void write_port(const char *dev)
{
	struct host_gid gids[EMU_MAX_GIDS];
	char gid_text[40];
	int n = host_gids_collect(gids, EMU_MAX_GIDS);

	if (n < 0) {
		errno = -n;
		die("cannot list", "the host's addresses");
	}
	make_dir("%s/ports", dev);
	make_dir("%s/ports/1", dev);
	make_dir("%s/ports/1/gids", dev);
	make_dir("%s/ports/1/gid_attrs", dev);
	make_dir("%s/ports/1/gid_attrs/types", dev);
	make_dir("%s/ports/1/gid_attrs/ndevs", dev);
	make_dir("%s/ports/1/pkeys", dev);
	write_file("4: ACTIVE", "%s/ports/1/state", dev);
	write_file("5: LinkUp", "%s/ports/1/phys_state", dev);
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

int main(int argc, char **argv)
{
	char dev[PATH_MAX], uverbs[32], guid[20], num[16];
	const char *root;
	int index;

	if (argc != 2 || argv[1][0] != '/') {
		fprintf(stderr, "usage: softrdma-sysfs ABSOLUTE_DIR\n"
				"Writes a sysfs tree for libibverbs under DIR (use it as SYSFS_PATH)\n"
				"and prints the uverbs node name it chose.\n");
		return 2;
	}
	root = argv[1];
	/* For tests: pretend another host's /sys and /dev/infiniband. */
	if (getenv("SOFTRDMA_REAL_SYSFS"))
		real_sysfs = getenv("SOFTRDMA_REAL_SYSFS");
	if (getenv("SOFTRDMA_REAL_CDEV_DIR"))
		real_cdev_dir = getenv("SOFTRDMA_REAL_CDEV_DIR");

	index = pick_uverbs_index();
	snprintf(uverbs, sizeof(uverbs), "uverbs%d", index);
	make_dir("%s", root);
	make_dir("%s/class", root);
	make_dir("%s/class/infiniband_verbs", root);
	make_dir("%s/class/infiniband", root);
	snprintf(num, sizeof(num), "%d", UVERBS_ABI_VERSION);
	write_file(num, "%s/class/infiniband_verbs/abi_version", root);
	make_dir("%s/class/infiniband_verbs/%s", root, uverbs);
	write_file(SOFTRDMA_IBDEV, "%s/class/infiniband_verbs/%s/ibdev", root, uverbs);
	/* 0:0 tells libibverbs not to compare the node's major:minor. */
	write_file("0:0", "%s/class/infiniband_verbs/%s/dev", root, uverbs);
	snprintf(num, sizeof(num), "%d", DEVICE_ABI_VERSION);
	write_file(num, "%s/class/infiniband_verbs/%s/abi_version", root, uverbs);

	snprintf(dev, sizeof(dev), "%s/class/infiniband/" SOFTRDMA_IBDEV, root);
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
	write_counters(root);

	link_real_devices(root, "infiniband_verbs");
	link_real_devices(root, "infiniband");
	printf("%s\n", uverbs);
	return 0;
}
