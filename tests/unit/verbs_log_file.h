/* SPDX-License-Identifier: MIT */
/*
 * For tests that read what the provider logs: rdma-core's VERBS_LOG_LEVEL and
 * VERBS_LOG_FILE pointed at a new temporary file for one cmocka group. libibverbs reads
 * both once, when the first device list is asked for, so they are set before any test.
 * Include after <cmocka.h>, <stdlib.h> and <unistd.h>.
 */
#ifndef SOFTRDMA_TESTS_VERBS_LOG_FILE_H
#define SOFTRDMA_TESTS_VERBS_LOG_FILE_H

/*
 * Runs the group TESTS with the log at LEVEL (a string) going to a file made from the
 * mkstemp template PATH (a char array, rewritten with the name), then removes the file.
 * Evaluates to the number of failed tests, or 1 when the file could not be made.
 */
#define run_group_logging_to(tests, level, path)			\
	({								\
		int log_fd_ = mkstemp(path), failed_ = 1;		\
									\
		if (log_fd_ >= 0) {					\
			close(log_fd_);					\
			setenv("VERBS_LOG_LEVEL", (level), 1);		\
			setenv("VERBS_LOG_FILE", (path), 1);		\
			failed_ = cmocka_run_group_tests(tests, NULL, NULL); \
			unlink(path);					\
		}							\
		failed_;						\
	})

#endif
