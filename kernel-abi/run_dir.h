/* SPDX-License-Identifier: MIT */
/*
 * The run directory: the device tree that `softrdma run` and `softrdma env` write and every
 * process of the run reads (libibverbs) and writes (the port counters). Another local user
 * must be able neither to plant it nor to change anything in it, so it is reached only
 * through directories that nobody else can write (or that are sticky, as /tmp is), it is
 * ours and private (0700), and everything in it is opened relative to its verified fd,
 * never through a symbolic link (docs/security.md, "The run directory").
 *
 * Every function here returns -1 with errno set and a sentence in why (what was refused
 * and why, for a message) when it refuses.
 */
#ifndef SOFTRDMA_RUN_DIR_H
#define SOFTRDMA_RUN_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define RUN_DIR_WHY_LEN 512

/*
 * Opens the directory PATH (absolute) after checking every directory on the way from /:
 * each is owned by root or by us, and one that others may write must be sticky. A
 * symbolic link on the way is followed only where nobody else could have put it (in a
 * directory that only root or we can write). With private_dir, PATH itself must be a
 * directory of ours (not a link), with no permission for group or others.
 * Returns an O_PATH directory fd.
 */
int run_dir_open(const char *path, bool private_dir, char why[RUN_DIR_WHY_LEN]);

/*
 * mkdtemp(3) in the directory parent_fd: a new private directory PREFIX.XXXXXX, whose name
 * is written to name (at least strlen(prefix) + 8 bytes). Returns its O_PATH fd.
 */
int run_dir_make_temp(int parent_fd, const char *prefix, char *name, size_t name_len,
		      char why[RUN_DIR_WHY_LEN]);

/*
 * Opens the directory REL (relative, '/'-separated, no "..") under dir_fd, one component
 * at a time, none a symbolic link, each ours and writable by nobody else. Returns an
 * O_PATH fd, or with readable an O_RDONLY one (for fdopendir).
 */
int run_dir_open_sub(int dir_fd, const char *rel, bool readable, char why[RUN_DIR_WHY_LEN]);

/*
 * Opens the regular file NAME in dir_fd without following a link. With O_CREAT in flags
 * the file is created (O_EXCL is implied: it must not exist). An existing file must be
 * ours, writable by nobody else and have one link.
 */
int run_dir_open_file(int dir_fd, const char *name, int flags, mode_t mode,
		      char why[RUN_DIR_WHY_LEN]);

/* Writes TEXT as NAME in dir_fd, atomically: a temporary file renamed over NAME. */
int run_dir_replace_file(int dir_fd, const char *name, const char *text,
			 char why[RUN_DIR_WHY_LEN]);

#endif
