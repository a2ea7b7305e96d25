/* SPDX-License-Identifier: MIT */
#ifndef SOFTRDMA_COUNTERS_CMD_H
#define SOFTRDMA_COUNTERS_CMD_H

/*
 * `softrdma counters [--processes] [--qp]` (as softrdma-sysfs --counters TREE ...): asks
 * every live process of the run to publish now, waits for them (2 s at most: a stopped
 * process cannot answer), then prints the port's counters as the sysfs files show them,
 * and with the options each process's and each live QP's. Returns the exit status.
 */
int counters_command(const char *tree, int argc, char **argv);

#endif
