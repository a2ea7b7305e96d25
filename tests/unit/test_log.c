// SPDX-License-Identifier: MIT
/*
 * emu/log.c without libibverbs' __verbs_log (a program linked to the engine directly): it
 * honours VERBS_LOG_LEVEL and VERBS_LOG_FILE itself, in rdma-core's format, and formats
 * nothing below the level.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <infiniband/verbs.h>

#include "emu/log.h"
#include "verbs_log_file.h"

static char path[] = "/tmp/softrdma-test-log.XXXXXX";
static int formatted;

/* An argument that counts how often it was evaluated: only when a line is formatted. */
static const char *counted(void)
{
	formatted++;
	return "argument";
}

static void test_fallback_writes_verbs_log_file(void **state)
{
	char line[256] = "";
	FILE *f;

	(void)state;
	emu_log_init();
	assert_int_equal(emu_log_level, EMU_LOG_WARN);
	emu_debug("not wanted at level 2: %s", counted());
	assert_int_equal(formatted, 0);
	emu_log(EMU_LOG_WARN, "qp 0x%06x %s", 0x1234u, counted());
	assert_int_equal(formatted, 1);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	assert_null(fgets(line + strlen(line), (int)(sizeof(line) - strlen(line)), f));
	fclose(f);
	assert_non_null(strstr(line, "softrdma0: test_fallback_writes_verbs_log_file:"));
	assert_non_null(strstr(line, ": qp 0x001234 argument\n"));
}

static void test_access_names(void **state)
{
	char buf[80];

	(void)state;
	assert_string_equal(emu_access_names(0, buf, sizeof(buf)), "none");
	assert_string_equal(emu_access_names(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC, buf,
					     sizeof(buf)), "LOCAL_WRITE|REMOTE_ATOMIC");
	assert_string_equal(emu_qp_state_name(IBV_QPS_RTS), "RTS");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fallback_writes_verbs_log_file),
		cmocka_unit_test(test_access_names),
	};

	return run_group_logging_to(tests, "2", path);
}
