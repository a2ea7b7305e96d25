// SPDX-License-Identifier: MIT
/*
 * The diagnostic log. libibverbs owns the convention: it reads VERBS_LOG_LEVEL and
 * VERBS_LOG_FILE once, and its private __verbs_log() writes to that file; a provider's
 * lines come through it (verbs_debug() in rdma-core's driver.h). Its level is private to
 * it, so we read the same variables by the same rule, to test a level before formatting.
 * The provider hands us __verbs_log, resolved at its private ABI version; in a process
 * without it (a unit test linked to emu/ directly, or a libibverbs without the symbol) we
 * honour the two variables ourselves, in the same format.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "emu/log.h"

#define LOG_LINE_MAX	512

unsigned int emu_log_level;

static emu_verbs_log_fn verbs_log;
static FILE *own_file;
static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* libibverbs' rule in a release build: a level, and a file to write to, or nothing. */
static void read_env(void)
{
	const char *level = getenv("VERBS_LOG_LEVEL");
	const char *file = getenv("VERBS_LOG_FILE");

	if (!level || !file || !*file)
		return;
	emu_log_level = (unsigned int)strtoul(level, NULL, 0);
}

void emu_log_init(void)
{
	pthread_once(&init_once, read_env);
}

void emu_log_use_verbs_log(emu_verbs_log_fn fn)
{
	verbs_log = fn;
	emu_log_init();
}

/* Without libibverbs' writer: VERBS_LOG_FILE, appended to, as libibverbs opens it. */
static void write_own(const char *line)
{
	pthread_mutex_lock(&own_lock);
	if (!own_file) {
		const char *file = getenv("VERBS_LOG_FILE");

		own_file = file ? fopen(file, "a") : NULL;
		if (!own_file)
			emu_log_level = EMU_LOG_NONE;
	}
	if (own_file) {
		fputs(line, own_file);
		fflush(own_file);
	}
	pthread_mutex_unlock(&own_lock);
}

void emu_log_line(unsigned int level, const char *func, int line, const char *fmt, ...)
{
	char buf[LOG_LINE_MAX];
	va_list ap;
	int n;

	n = snprintf(buf, sizeof(buf), "softrdma0: %s:%d: ", func, line);
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof(buf))
		vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	n = (int)strlen(buf);
	if ((size_t)n == sizeof(buf) - 1)
		n--;
	buf[n] = '\n';
	buf[n + 1] = 0;
	if (verbs_log)
		verbs_log(NULL, level, "%s", buf);
	else
		write_own(buf);
}

const char *emu_access_names(int access, char *buf, size_t size)
{
	static const struct { int bit; const char *name; } names[] = {
		{ IBV_ACCESS_LOCAL_WRITE, "LOCAL_WRITE" },
		{ IBV_ACCESS_REMOTE_WRITE, "REMOTE_WRITE" },
		{ IBV_ACCESS_REMOTE_READ, "REMOTE_READ" },
		{ IBV_ACCESS_REMOTE_ATOMIC, "REMOTE_ATOMIC" },
		{ IBV_ACCESS_MW_BIND, "MW_BIND" },
	};
	size_t used = 0;

	buf[0] = 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!(access & names[i].bit))
			continue;
		used += (size_t)snprintf(buf + used, used < size ? size - used : 0, "%s%s",
					 used ? "|" : "", names[i].name);
	}
	if (!used)
		snprintf(buf, size, "none");
	return buf;
}

const char *emu_qp_state_name(int state)
{
	static const char *const names[] = {
		[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT", [IBV_QPS_RTR] = "RTR",
		[IBV_QPS_RTS] = "RTS", [IBV_QPS_SQD] = "SQD", [IBV_QPS_SQE] = "SQE",
		[IBV_QPS_ERR] = "ERR",
	};

	if (state < 0 || (size_t)state >= sizeof(names) / sizeof(names[0]) || !names[state])
		return "?";
	return names[state];
}

const char *emu_qp_event_name(int event)
{
	switch (event) {
	case IBV_EVENT_QP_FATAL:
		return "IBV_EVENT_QP_FATAL";
	case IBV_EVENT_QP_REQ_ERR:
		return "IBV_EVENT_QP_REQ_ERR";
	case IBV_EVENT_QP_ACCESS_ERR:
		return "IBV_EVENT_QP_ACCESS_ERR";
	default:
		return "another event";
	}
}
