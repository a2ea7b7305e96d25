// SPDX-License-Identifier: MIT
/*
 * What the hostile-peer tests of the CM and of the engine share about their own
 * descriptors: whether the victim closed them, and the process's fd limit, raised for a
 * flood or lowered to reach EMFILE. Include after cmocka.h.
 */
#ifndef SOFTRDMA_TESTS_ATTACKER_FDS_H
#define SOFTRDMA_TESTS_ATTACKER_FDS_H

#define _GNU_SOURCE
#include <poll.h>
#include <stdbool.h>
#include <sys/resource.h>

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
