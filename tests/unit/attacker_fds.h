// SPDX-License-Identifier: MIT
/*
 * What the hostile-peer tests of the CM and of the engine share about their own
 * descriptors: whether the victim closed them (and when), and the process's fd limit, raised
 * for a flood or lowered to reach EMFILE. Include after cmocka.h.
 */
#ifndef SOFTRDMA_TESTS_ATTACKER_FDS_H
#define SOFTRDMA_TESTS_ATTACKER_FDS_H

#define _GNU_SOURCE
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* Has the other end closed or reset fd? */
static inline bool closed_by_peer(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLRDHUP };

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Of fds, those the victim has not closed. */
static inline int still_open(const int *fds, int n)
{
	int open = 0;

	for (int i = 0; i < n; i++)
		open += !closed_by_peer(fds[i]);
	return open;
}

static inline int64_t monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * The victim closes every one of fds it still holds at the deadline it keeps for a silent
 * connection, timeout_ms after start_ms (a CLOCK_MONOTONIC reading in ms), and not before.
 * The bound only keeps a broken victim from hanging the test.
 */
static inline void expect_closed_at_deadline(const int *fds, int n, int64_t start_ms,
					     int64_t timeout_ms)
{
	int open;

	while ((open = still_open(fds, n)) && monotonic_ms() - start_ms < timeout_ms + 30000)
		usleep(100 * 1000);
	print_message("%d still held after %.1f s\n", open, (monotonic_ms() - start_ms) / 1000.0);
	assert_int_equal(open, 0);
	assert_true(monotonic_ms() - start_ms >= timeout_ms);	/* not before their time */
}

static inline void set_soft_fd_limit(rlim_t soft)
{
	struct rlimit rl;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = soft;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

/* Raises the soft fd limit to the hard one, which must be at least need; the old one. */
static inline rlim_t raise_fd_limit(rlim_t need)
{
	struct rlimit rl;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max < need)
		skip();
	set_soft_fd_limit(rl.rlim_max);
	return rl.rlim_cur;
}

#endif
