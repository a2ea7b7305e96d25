/* SPDX-License-Identifier: MIT */
/*
 * The run's counter store, in its device tree (kernel-abi/run_dir.h says how it is opened):
 *
 *   softrdma/counters/PID-START  each process's counts, written whole (rename) by the
 *                                process itself: totals, then its live QPs
 *   softrdma/lock                flock()ed while a process sums the files into sysfs
 *   softrdma/refresh             a reader's request: every live process publishes at once
 *   class/infiniband/softrdma0/ports/1/counters/, hw_counters/  the sums, one file each
 *
 * A process file is text, "NAME VALUE" per line, so that it can be read with cat:
 *
 *   softrdma-counters 1
 *   pid 1234
 *   start 56789          (its start time, /proc/PID/stat field 22: pids are reused)
 *   comm ib_write_bw
 *   answered STAMP       (the last refresh request it published for)
 *   process NAME VALUE   (every counter)
 *   qp 0xQPN NAME VALUE  (the non-zero counters of each live QP)
 */
#ifndef SOFTRDMA_EMU_COUNTER_STORE_H
#define SOFTRDMA_EMU_COUNTER_STORE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "emu/counters.h"
#include "run_dir.h"

#define STORE_DIR "softrdma"
#define STORE_PROCS "softrdma/counters"
#define STORE_LOCK "lock"
#define STORE_REFRESH "refresh"
#define STORE_PORT "class/infiniband/softrdma0/ports/1"

struct store {
	int tree_fd, dir_fd, procs_fd, lock_fd, counters_fd, hw_fd;
};

struct store_qp {
	uint32_t qpn;
	uint64_t v[EMU_CNT_MAX];
};

struct store_record {
	long pid;
	unsigned long long start;
	char comm[17];
	uint64_t answered;
	uint64_t v[EMU_CNT_MAX];
	int nqps;
	struct store_qp *qps;	/* malloc()ed */
};

/* Makes the store's directories and files (zeros) in a new tree. */
int store_create(int tree_fd, char why[RUN_DIR_WHY_LEN]);

/* Opens the store of the tree at path, checking each piece; 0 or -1 with why. */
int store_open(struct store *s, const char *tree, char why[RUN_DIR_WHY_LEN]);
void store_close(struct store *s);

/* This process's start time, as the store's file names and records give it. */
unsigned long long store_proc_start(long pid);

int store_write_record(struct store *s, const char *name, const struct store_record *r,
		       char why[RUN_DIR_WHY_LEN]);
/* Reads one process file (with its QPs when want_qps); 0, or -1 for a file that does not
 * parse (left alone). store_record_free() frees what it allocated. */
int store_read_record(struct store *s, const char *name, bool want_qps, struct store_record *r);
void store_record_free(struct store_record *r);

/* Calls fn for every process file of the run; stops at fn's first non-zero. */
int store_for_each(struct store *s, bool want_qps,
		   int (*fn)(const char *name, struct store_record *r, void *arg), void *arg);

/* Adds every process file's counts into totals. */
void store_sum(struct store *s, uint64_t totals[EMU_CNT_MAX]);

/* The sums of every process file into the sysfs files, under the lock (tried for up to
 * wait_ms); 0, or -1 (EWOULDBLOCK: another process holds it). */
int store_publish_sysfs(struct store *s, int wait_ms, char why[RUN_DIR_WHY_LEN]);

/* The stamp of the last refresh request (0: none); a new request's stamp. */
uint64_t store_refresh_stamp(struct store *s);
int store_request_refresh(struct store *s, uint64_t *stamp, char why[RUN_DIR_WHY_LEN]);

/* What each sysfs file shows: n entries of (hw_counters or counters, name, value of v). */
int store_published_count(void);
const char *store_published_name(int i, bool *hw);
uint64_t store_published_value(int i, const uint64_t v[EMU_CNT_MAX]);

#endif
