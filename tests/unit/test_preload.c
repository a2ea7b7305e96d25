// SPDX-License-Identifier: MIT
/*
 * The interposer under `softrdma run`: every libc call a program may use to probe the
 * device node or the device's sysfs files gets the answers a kernel driver's would give.
 * UCX keeps a device only if access(node, R_OK | W_OK) succeeds and reads
 * /sys/class/infiniband/DEV/... with open(); hwloc uses faccessat, fstatat and fopen.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdbool.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#define DEV_SYSFS "/sys/class/infiniband/softrdma0"

static const char *node(void)
{
	const char *n = getenv("SOFTRDMA_DEV_NODE");

	if (!n)
		fail_msg("SOFTRDMA_DEV_NODE is not set: run under `softrdma run`");
	return n;
}

/* The node's uverbs name: "uverbsN". */
static const char *node_name(void)
{
	return strrchr(node(), '/') + 1;
}

static void test_node_is_accessible(void **state)
{
	(void)state;
	assert_int_equal(access(node(), R_OK | W_OK), 0);
	assert_int_equal(faccessat(AT_FDCWD, node(), R_OK | W_OK, 0), 0);
	assert_int_equal(faccessat(AT_FDCWD, node(), R_OK | W_OK, AT_EACCESS), 0);
	assert_int_equal(euidaccess(node(), R_OK | W_OK), 0);
	assert_int_equal(eaccess(node(), R_OK | W_OK), 0);
}

static void test_node_stats_as_a_character_device(void **state)
{
	struct stat st;
	struct statx stx;

	(void)state;
	assert_int_equal(stat(node(), &st), 0);
	assert_true(S_ISCHR(st.st_mode));
	assert_int_equal(lstat(node(), &st), 0);
	assert_true(S_ISCHR(st.st_mode));
	assert_int_equal(fstatat(AT_FDCWD, node(), &st, 0), 0);
	assert_true(S_ISCHR(st.st_mode));
	assert_int_equal(statx(AT_FDCWD, node(), 0, STATX_TYPE, &stx), 0);
	assert_true(S_ISCHR(stx.stx_mode));
}

/* The first line of a file, read with read(2) from FD (closed). */
static void expect_fd_content(int fd, const char *expected)
{
	char buf[128] = "";
	ssize_t n;

	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n > 0);
	buf[strcspn(buf, "\n")] = 0;
	assert_string_equal(buf, expected);
}

static void expect_fopen_content(FILE *f, const char *expected)
{
	char buf[128] = "";

	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	assert_string_equal(buf, expected);
}

static void test_device_sysfs_files_open(void **state)
{
	(void)state;
	expect_fd_content(open(DEV_SYSFS "/node_type", O_RDONLY), "1: CA");
	expect_fd_content(open64(DEV_SYSFS "/ports/1/link_layer", O_RDONLY), "Ethernet");
	expect_fd_content(openat(AT_FDCWD, DEV_SYSFS "/ports/1/gid_attrs/types/0", O_RDONLY),
			  "RoCE v2");
	expect_fd_content(openat64(AT_FDCWD, DEV_SYSFS "/ports/1/state", O_RDONLY), "4: ACTIVE");
	/* glibc's fopen opens the file itself, not through open(). */
	expect_fopen_content(fopen(DEV_SYSFS "/ports/1/gid_attrs/ndevs/0", "r"), "lo");
	expect_fopen_content(fopen64(DEV_SYSFS "/node_type", "re"), "1: CA");
}

static void test_device_sysfs_probes(void **state)
{
	char path[PATH_MAX];
	struct stat st;

	(void)state;
	assert_int_equal(access(DEV_SYSFS "/ports/1/gids/0", R_OK), 0);
	assert_int_equal(faccessat(AT_FDCWD, DEV_SYSFS, F_OK, 0), 0);
	assert_int_equal(stat(DEV_SYSFS "/ports/1", &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(lstat(DEV_SYSFS "/node_guid", &st), 0);
	assert_true(S_ISREG(st.st_mode));
	snprintf(path, sizeof(path), "/sys/class/infiniband_verbs/%s/ibdev", node_name());
	expect_fd_content(open(path, O_RDONLY), "softrdma0");
	assert_int_equal(access("/sys/class/infiniband_verbs/abi_version", R_OK), 0);
	/* What the tree does not have is not there, as on a device without it. */
	assert_int_equal(access(DEV_SYSFS "/device/numa_node", F_OK), -1);
}

static void test_class_directory_lists_the_device(void **state)
{
	struct dirent *d;
	bool found = false;
	DIR *dir = opendir("/sys/class/infiniband");

	(void)state;
	assert_non_null(dir);
	while ((d = readdir(dir)))
		found |= !strcmp(d->d_name, "softrdma0");
	closedir(dir);
	assert_true(found);
}

/* Only the two class directories are the tree's: a name that merely starts alike is not. */
static void test_other_paths_untouched(void **state)
{
	struct stat st;
	char cwd[PATH_MAX];

	(void)state;
	assert_int_equal(access("/sys/class/infiniband_mad_none", F_OK), -1);
	assert_int_equal(stat("/", &st), 0);
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(access(cwd, F_OK), 0);
	assert_int_equal(access("/dev/null", R_OK | W_OK), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_node_is_accessible),
		cmocka_unit_test(test_node_stats_as_a_character_device),
		cmocka_unit_test(test_device_sysfs_files_open),
		cmocka_unit_test(test_device_sysfs_probes),
		cmocka_unit_test(test_class_directory_lists_the_device),
		cmocka_unit_test(test_other_paths_untouched),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
