// SPDX-License-Identifier: MIT
#include <errno.h>
#include <setjmp.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "kernel-abi/host_gids.h"

static void test_format_has_eight_groups_without_compression(void **state)
{
	const uint8_t gid[16] = { [10] = 0xff, [11] = 0xff, 127, 0, 0, 1 };
	char text[40];

	(void)state;
	host_gid_format(gid, text);
	assert_string_equal(text, "0000:0000:0000:0000:0000:ffff:7f00:0001");
}

static void test_ipv4_loopback_comes_first(void **state)
{
	const uint8_t loopback[16] = { [10] = 0xff, [11] = 0xff, 127, 0, 0, 1 };
	struct host_gid gids[128];
	int n = host_gids_collect(gids, 128);

	(void)state;
	assert_true(n >= 1);
	assert_memory_equal(gids[0].raw, loopback, 16);
	assert_string_equal(gids[0].ifname, "lo");
}

static void test_ipv4_entries_precede_ipv6(void **state)
{
	static const uint8_t v4_prefix[12] = { [10] = 0xff, [11] = 0xff };
	struct host_gid gids[128];
	int n = host_gids_collect(gids, 128);
	int seen_v6 = 0;

	(void)state;
	for (int i = 0; i < n; i++) {
		int is_v4 = !memcmp(gids[i].raw, v4_prefix, 12);

		assert_false(is_v4 && seen_v6);
		seen_v6 |= !is_v4;
	}
}

static void test_collect_respects_max(void **state)
{
	struct host_gid gids[1];

	(void)state;
	assert_int_equal(host_gids_collect(gids, 1), 1);
	assert_int_equal(host_gids_collect(gids, 0), 0);
}

/* Without SOFTRDMA_NETDEVS the device is attached to loopback only. */
static void test_default_is_loopback_only(void **state)
{
	struct host_gid gids[128];
	int n = host_gids_collect_for(NULL, gids, 128);

	(void)state;
	assert_true(n >= 1);
	for (int i = 0; i < n; i++)
		assert_string_equal(gids[i].ifname, "lo");
	assert_int_equal(host_gids_collect_for("", gids, 128), n);
	assert_int_equal(host_gids_collect_for("lo", gids, 128), n);
	assert_true(gids[0].ifindex > 0);
}

static void test_netdev_list_is_checked(void **state)
{
	char bad[IF_NAMESIZE + 16];
	struct host_gid gids[4];

	(void)state;
	assert_int_equal(host_netdevs_check("lo", bad), 0);
	assert_int_equal(host_netdevs_check("lo,lo", bad), 0);
	assert_int_equal(host_netdevs_check("lo,no-such-if9", bad), -ENODEV);
	assert_string_equal(bad, "no-such-if9");
	assert_int_equal(host_netdevs_check("lo,", bad), -EINVAL);
	assert_int_equal(host_netdevs_check(",lo", bad), -EINVAL);
	assert_string_equal(bad, "an empty name");
	assert_int_equal(host_netdevs_check("a-name-longer-than-ifnamsiz", bad), -EINVAL);
	assert_int_equal(host_gids_collect_for("no-such-if9", gids, 4), -ENODEV);
	setenv(HOST_NETDEVS_ENV, "no-such-if9", 1);
	assert_int_equal(host_gids_collect(gids, 4), -ENODEV);
	unsetenv(HOST_NETDEVS_ENV);
}

static void test_node_guid_is_stable_and_local(void **state)
{
	uint64_t guid = host_node_guid();

	(void)state;
	assert_int_equal(guid, host_node_guid());
	assert_int_equal(guid >> 56, 0x02);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format_has_eight_groups_without_compression),
		cmocka_unit_test(test_ipv4_loopback_comes_first),
		cmocka_unit_test(test_ipv4_entries_precede_ipv6),
		cmocka_unit_test(test_collect_respects_max),
		cmocka_unit_test(test_default_is_loopback_only),
		cmocka_unit_test(test_netdev_list_is_checked),
		cmocka_unit_test(test_node_guid_is_stable_and_local),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
