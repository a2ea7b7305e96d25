// SPDX-License-Identifier: MIT
/* The SOFTRDMA_FAULTS grammar (emu/fault.c): what it takes, and what a refusal names. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "emu/internal.h"	/* emu/fault.h, after struct emu_qp */

static void test_accepted(void **state)
{
	static const char *const good[] = {
		"all:drop=1/10",
		"all:drop=all",
		"all:drop=2.5%",
		"qp=0:rnr=all",
		"qp=3:access=1/2,remote-op=0%",
		"qpn=0x4e2101:kill=100",
		"qpn=12345:delay=20ms",
		"seed=7;all:drop=5%,delay=0ms",
		"qp=1:rnr=1/2;qp=0:kill=3;all:drop=100%",
	};
	char why[160];

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (fault_parse_check(good[i], why, sizeof(why)))
			fail_msg("\"%s\" refused: %s", good[i], why);
}

static void test_refused_naming_the_part(void **state)
{
	static const struct {
		const char *spec, *names;
	} bad[] = {
		{ "", "empty" },
		{ "all", "followed by ':'" },
		{ "every:drop=all", "at \"every:drop=all\"" },
		{ "all:drop=1/0", "at \"1/0\"" },
		{ "all:drop=150%", "at \"150%\"" },
		{ "all:drop=sometimes", "at \"sometimes\"" },
		{ "all:drop=all,lose=all", "at \"lose=all\"" },
		{ "all:delay=20", "milliseconds" },
		{ "all:delay=99999ms", "60000" },
		{ "qpn=0x1000000:drop=all", "24 bits" },
		{ "qp=x:drop=all", "index" },
		{ "all:kill=", "kill=N" },
		{ "all:drop=all;;", "at \";\"" },
		{ "all:drop=all x", "expected" },
		{ "seed=abc", "seed=N" },
	};
	char why[160];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = 0;
		if (fault_parse_check(bad[i].spec, why, sizeof(why)) != EINVAL)
			fail_msg("\"%s\" was accepted", bad[i].spec);
		if (!strstr(why, bad[i].names))
			fail_msg("\"%s\": \"%s\" does not name \"%s\"", bad[i].spec, why,
				 bad[i].names);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accepted),
		cmocka_unit_test(test_refused_naming_the_part),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
