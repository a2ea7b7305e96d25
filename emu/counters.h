/* SPDX-License-Identifier: MIT */
/*
 * Port counters: what a device counts that no completion reports, chiefly what it drops
 * silently. They live in a file of the run's device tree, shared by every process of the
 * run as a real device's counters are shared by its users; `softrdma counters` prints them.
 */
#ifndef SOFTRDMA_EMU_COUNTERS_H
#define SOFTRDMA_EMU_COUNTERS_H

#include <stdint.h>

/* X(enum name, printed name): names as rxe, mlx5 or the IBA PortInfo give them. */
#define EMU_COUNTER_LIST(X)						\
	X(QKEY_VIOLATIONS, "qkey_violations")	/* UD: wrong Q_Key */	\
	X(OUT_OF_BUFFER, "out_of_buffer")	/* UD/UC: no receive */	\
	X(RCV_BUFFER_DROPS, "rcv_buffer_drops")	/* UD socket overflow */ \
	X(SEND_RNR_ERR, "send_rnr_err")		/* RNR NAKs sent */	\
	X(RCVD_RNR_ERR, "rcvd_rnr_err")		/* RNR NAKs received */	\
	X(DUPLICATE_REQUEST, "duplicate_request")			\
	X(RETRY_EXCEEDED_ERR, "retry_exceeded_err")			\
	X(RETRY_RNR_EXCEEDED_ERR, "retry_rnr_exceeded_err")			\
	X(SAME_HOST_PAYLOADS, "same_host_payloads")	/* read from the peer */

#define EMU_COUNTER_ENUM(id, name) EMU_CNT_##id,
enum emu_counter { EMU_COUNTER_LIST(EMU_COUNTER_ENUM) EMU_CNT_MAX };
#undef EMU_COUNTER_ENUM

extern const char *const emu_counter_names[EMU_CNT_MAX];

/* The file, relative to the device tree's root, and its size. */
#define EMU_COUNTERS_FILE "class/infiniband/softrdma0/ports/1/softrdma_counters"
#define EMU_COUNTERS_SIZE (EMU_CNT_MAX * sizeof(uint64_t))

extern uint64_t *emu_counters;

/* Maps $SYSFS_PATH's counters file; without one, counting stays in this process. */
void counters_attach(void);

static inline void counter_add(enum emu_counter id, uint64_t n)
{
	__atomic_fetch_add(&emu_counters[id], n, __ATOMIC_RELAXED);
}

#endif
