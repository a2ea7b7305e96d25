// SPDX-License-Identifier: MIT
/*
 * softrdma-conformance [-d DEVICE] [-g GID_INDEX] [-w WAIT_MS] [-q QUIET_MS] [-l] [CASE...]
 *
 * Runs every case (or the named ones) in its own child process and prints one line per
 * case, "name: fields", in table order. The child's output goes through a pipe, so a case
 * that crashes or outlives its time limit still prints exactly one line ("crashed",
 * "hung"), and the next case starts on a clean device context.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conf.h"

static const struct conf_case *const tables[] = {
	conf_cases_mr, conf_cases_access, conf_cases_local, conf_cases_rc, conf_cases_qp,
	conf_cases_ud, conf_cases_mw, conf_cases_uc_srq, conf_cases_lifecycle, conf_cases_limits,
	conf_cases_mcast,
	conf_cases_xrc,
};

static void run_case(const struct conf_case *c)
{
	/* Generous: a case waits a few times wait_ms at most. */
	unsigned int limit = (unsigned int)(8 * conf_opts.wait_ms + 8 * conf_opts.quiet_ms) / 1000 + 10;
	char buf[1024];
	size_t n = 0;
	ssize_t r;
	int fds[2], status;
	pid_t pid;

	fflush(stdout);
	if (pipe(fds) || (pid = fork()) < 0) {
		perror("conformance: fork");
		exit(2);
	}
	if (!pid) {
		close(fds[0]);
		dup2(fds[1], STDOUT_FILENO);
		close(fds[1]);
		alarm(limit);
		c->run(c);
		out("error=case_returned");
		out_end();
	}
	close(fds[1]);
	while (n < sizeof(buf) - 1 && (r = read(fds[0], buf + n, sizeof(buf) - 1 - n)) > 0)
		n += (size_t)r;
	close(fds[0]);
	buf[n] = 0;
	waitpid(pid, &status, 0);
	buf[strcspn(buf, "\n")] = 0;
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
		printf("%s: hung\n", c->name);
	else if (WIFSIGNALED(status))
		printf("%s: crashed signal=%d\n", c->name, WTERMSIG(status));
	else if (!n)
		printf("%s: no_output exit=%d\n", c->name, WEXITSTATUS(status));
	else
		printf("%s:%s\n", c->name, buf);
	fflush(stdout);
}

static bool selected(const char *name, int argc, char **argv)
{
	if (optind >= argc)
		return true;
	for (int i = optind; i < argc; i++)
		if (!strcmp(argv[i], name))
			return true;
	return false;
}

int main(int argc, char **argv)
{
	bool list = false;
	int opt;

	while ((opt = getopt(argc, argv, "d:g:w:q:l")) != -1) {
		switch (opt) {
		case 'd': conf_opts.dev = optarg; break;
		case 'g': conf_opts.gid_index = atoi(optarg); break;
		case 'w': conf_opts.wait_ms = atoi(optarg); break;
		case 'q': conf_opts.quiet_ms = atoi(optarg); break;
		case 'l': list = true; break;
		default:
			fprintf(stderr, "usage: %s [-d DEVICE] [-g GID_INDEX] [-w WAIT_MS] "
				"[-q QUIET_MS] [-l] [CASE...]\n", argv[0]);
			return 2;
		}
	}
	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
		for (const struct conf_case *c = tables[t]; c->name; c++) {
			if (!selected(c->name, argc, argv))
				continue;
			if (list)
				printf("%s\n", c->name);
			else
				run_case(c);
		}
	return 0;
}
