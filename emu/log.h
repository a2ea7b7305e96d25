/* SPDX-License-Identifier: MIT */
/*
 * Diagnostics in rdma-core's provider convention (docs/observability.md): lines go through
 * libibverbs' private __verbs_log, so VERBS_LOG_LEVEL and VERBS_LOG_FILE decide, as for
 * every other provider; a line reads "softrdma0: function:line: message".
 *
 * Off (the default) costs one compare of a global before anything is formatted:
 *	emu_debug("qp 0x%06x ...", ...);
 */
#ifndef SOFTRDMA_EMU_LOG_H
#define SOFTRDMA_EMU_LOG_H

#include <stddef.h>
#include <stdint.h>

/* rdma-core's levels (libibverbs/driver.h): VERBS_LOG_ERR 1 ... VERBS_LOG_DEBUG 4 */
enum emu_log_level {
	EMU_LOG_NONE,
	EMU_LOG_ERR,
	EMU_LOG_WARN,
	EMU_LOG_INFO,
	EMU_LOG_DEBUG,
};

/* What libibverbs would print: VERBS_LOG_LEVEL, and nothing without VERBS_LOG_FILE. */
extern unsigned int emu_log_level;

/* libibverbs' __verbs_log(struct verbs_context *, uint32_t level, const char *fmt, ...). */
typedef void (*emu_verbs_log_fn)(void *ctx, uint32_t level, const char *fmt, ...);

/* Reads the environment (once per process). */
void emu_log_init(void);
/* The provider found __verbs_log: lines go there. Without it we write VERBS_LOG_FILE. */
void emu_log_use_verbs_log(emu_verbs_log_fn fn);

__attribute__((format(printf, 4, 5)))
void emu_log_line(unsigned int level, const char *func, int line, const char *fmt, ...);

#define emu_log_on(level)	__builtin_expect(emu_log_level >= (level), 0)

#define emu_log(level, fmt, ...)							\
	do {										\
		if (emu_log_on(level))							\
			emu_log_line(level, __func__, __LINE__, fmt, ##__VA_ARGS__);	\
	} while (0)

#define emu_debug(fmt, ...)	emu_log(EMU_LOG_DEBUG, fmt, ##__VA_ARGS__)

/* For the log: IBV_QPS_* and the QP error events by name. */
const char *emu_qp_state_name(int state);
const char *emu_qp_event_name(int event);

/* IBV_ACCESS_* bits as "LOCAL_WRITE|REMOTE_READ" ("none" for 0), into buf. */
const char *emu_access_names(int access, char *buf, size_t size);

#endif
