// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "emu/counters.h"

#define EMU_COUNTER_NAME(id, name) [EMU_CNT_##id] = name,
const char *const emu_counter_names[EMU_CNT_MAX] = { EMU_COUNTER_LIST(EMU_COUNTER_NAME) };

static uint64_t process_counters[EMU_CNT_MAX];
uint64_t *emu_counters = process_counters;

void counters_attach(void)
{
	const char *root = getenv("SYSFS_PATH");
	char path[PATH_MAX];
	struct stat st;
	void *map;
	int fd;

	if (emu_counters != process_counters)
		return;	/* attached by an earlier engine of this process */
	if (!root || snprintf(path, sizeof(path), "%s/%s", root, EMU_COUNTERS_FILE) >= (int)sizeof(path))
		return;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	/* A file shorter than the map would fault on first use: take it only at full size. */
	if (fstat(fd, &st) || st.st_size < (off_t)EMU_COUNTERS_SIZE) {
		close(fd);
		return;
	}
	map = mmap(NULL, EMU_COUNTERS_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (map != MAP_FAILED)
		emu_counters = map;
}
