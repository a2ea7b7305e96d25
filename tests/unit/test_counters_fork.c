// SPDX-License-Identifier: MIT
/*
 * The counters' publisher across fork(): a child that exits (running the atexit handlers
 * it inherited) must not stop its parent's publisher, and the parent still answers a
 * reader's refresh and counts its own traffic. Run under `softrdma run`.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <infiniband/verbs.h>

#include "emu/counter_store.h"

/* Asks for a publication and returns true once this process answered (5 s at most). */
static bool parent_answers(void)
{
	char why[RUN_DIR_WHY_LEN], me[64];
	struct store_record r;
	uint64_t stamp;
	struct store s;
	bool answered = false;

	assert_int_equal(store_open(&s, getenv("SYSFS_PATH"), why), 0);
	snprintf(me, sizeof(me), "%ld-%llu", (long)getpid(), store_proc_start(getpid()));
	assert_int_equal(store_request_refresh(&s, &stamp, why), 0);
	for (int waited = 0; waited < 5000 && !answered; waited += 10) {
		answered = !store_read_record(&s, me, false, &r) && r.answered >= stamp;
		if (!answered)
			usleep(10000);
	}
	store_close(&s);
	return answered;
}

static void test_child_exit_leaves_the_parents_publisher(void **state)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	int status;
	pid_t child;

	(void)state;
	assert_non_null(list);
	assert_non_null(list[0]);
	ctx = ibv_open_device(list[0]);
	assert_non_null(ctx);
	assert_true(parent_answers());
	child = fork();
	assert_true(child >= 0);
	if (child == 0)
		exit(0);	/* runs the inherited atexit handlers */
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(parent_answers());
	ibv_close_device(ctx);
	ibv_free_device_list(list);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_child_exit_leaves_the_parents_publisher),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
