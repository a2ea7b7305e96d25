// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "counters_cmd.h"
#include "emu/counter_store.h"

#define ANSWER_WAIT_MS 2000

struct waiting {
	uint64_t stamp;
	int pending;
};

static bool alive(const struct store_record *r)
{
	return r->pid > 0 && store_proc_start(r->pid) == r->start;
}

static int count_pending(const char *name, struct store_record *r, void *arg)
{
	struct waiting *w = arg;

	(void)name;
	if (alive(r) && r->answered < w->stamp)
		w->pending++;
	return 0;
}

/* Asks for a publication and waits until every live process has made it. */
static void refresh(struct store *s)
{
	char why[RUN_DIR_WHY_LEN];
	struct waiting w = { 0 };

	if (store_request_refresh(s, &w.stamp, why)) {
		fprintf(stderr, "softrdma: counters: %s; showing what was published last\n", why);
		return;
	}
	for (int waited = 0; waited < ANSWER_WAIT_MS; waited += 10) {
		w.pending = 0;
		store_for_each(s, false, count_pending, &w);
		if (!w.pending)
			return;
		usleep(10000);
	}
	fprintf(stderr, "softrdma: counters: %d process(es) did not answer within %d ms "
		"(stopped?): their counts are as last published\n", w.pending, ANSWER_WAIT_MS);
}

/* The published names and values of v; only the non-zero ones when !all. */
static void print_values(const uint64_t v[EMU_CNT_MAX], const char *indent, bool all)
{
	for (int i = 0; i < store_published_count(); i++) {
		bool hw;
		const char *name = store_published_name(i, &hw);
		uint64_t value = store_published_value(i, v);

		if (all || value)
			printf("%s%-32s %" PRIu64 "\n", indent, name, value);
	}
}

static int print_process(const char *name, struct store_record *r, void *arg)
{
	const bool *per_qp = arg;

	(void)name;
	printf("\nprocess %ld (%s, %s)\n", r->pid, r->comm, alive(r) ? "running" : "exited");
	print_values(r->v, "  ", false);
	for (int q = 0; *per_qp && q < r->nqps; q++) {
		printf("  qp 0x%06" PRIx32 "\n", r->qps[q].qpn);
		print_values(r->qps[q].v, "    ", false);
	}
	return 0;
}

int counters_command(const char *tree, int argc, char **argv)
{
	uint64_t totals[EMU_CNT_MAX] = { 0 };
	bool per_process = false, per_qp = false;
	char why[RUN_DIR_WHY_LEN];
	struct store s;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--processes")) {
			per_process = true;
		} else if (!strcmp(argv[i], "--qp")) {
			per_process = per_qp = true;
		} else {
			fprintf(stderr, "softrdma: counters: unknown option '%s' (--processes, --qp)\n",
				argv[i]);
			return 2;
		}
	}
	if (store_open(&s, tree, why)) {
		fprintf(stderr, "softrdma: counters: refusing the device tree %s: %s\n", tree, why);
		return 1;
	}
	refresh(&s);
	store_sum(&s, totals);
	print_values(totals, "", true);
	if (per_process)
		store_for_each(&s, per_qp, print_process, &per_qp);
	store_close(&s);
	return 0;
}
