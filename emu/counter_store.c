// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "emu/counter_store.h"

#define EMU_COUNTER_NAME(id, name) [EMU_CNT_##id] = name,
const char *const emu_counter_names[EMU_CNT_MAX] = { EMU_COUNTER_LIST(EMU_COUNTER_NAME) };

#define ALWAYS_ZERO (-1)	/* an event softrdma does not have */
#define UNICAST_XMIT (-2)	/* port_xmit_packets but the multicast ones */
#define UNICAST_RCV (-3)	/* port_rcv_packets but the multicast ones */

/*
 * What each sysfs file shows. counters/: the IBA PortCounters (and their extended
 * unicast/multicast ones) that the kernel shows for every IB and RoCE port;
 * hw_counters/: rxe's names, then mlx5's and softrdma's own.
 */
static const struct published {
	bool hw;
	const char *name;
	int id;
} published[] = {
	{ false, "VL15_dropped", ALWAYS_ZERO },
	{ false, "excessive_buffer_overrun_errors", ALWAYS_ZERO },
	{ false, "link_downed", ALWAYS_ZERO },
	{ false, "link_error_recovery", ALWAYS_ZERO },
	{ false, "local_link_integrity_errors", ALWAYS_ZERO },
	{ false, "multicast_rcv_packets", EMU_CNT_MCAST_RCV_PACKETS },
	{ false, "multicast_xmit_packets", EMU_CNT_MCAST_XMIT_PACKETS },
	{ false, "port_rcv_constraint_errors", ALWAYS_ZERO },
	{ false, "port_rcv_data", EMU_CNT_RCV_DATA },
	{ false, "port_rcv_errors", EMU_CNT_RCV_ERRORS },
	{ false, "port_rcv_packets", EMU_CNT_RCV_PACKETS },
	{ false, "port_rcv_remote_physical_errors", ALWAYS_ZERO },
	{ false, "port_rcv_switch_relay_errors", ALWAYS_ZERO },
	{ false, "port_xmit_constraint_errors", ALWAYS_ZERO },
	{ false, "port_xmit_data", EMU_CNT_XMIT_DATA },
	{ false, "port_xmit_discards", EMU_CNT_XMIT_DISCARDS },
	{ false, "port_xmit_packets", EMU_CNT_XMIT_PACKETS },
	{ false, "port_xmit_wait", ALWAYS_ZERO },
	{ false, "symbol_error", ALWAYS_ZERO },
	{ false, "unicast_rcv_packets", UNICAST_RCV },
	{ false, "unicast_xmit_packets", UNICAST_XMIT },
	{ true, "sent_pkts", EMU_CNT_XMIT_PACKETS },
	{ true, "rcvd_pkts", EMU_CNT_RCV_PACKETS },
	{ true, "duplicate_request", EMU_CNT_DUPLICATE_REQUEST },
	{ true, "out_of_seq_request", EMU_CNT_OUT_OF_SEQ_REQUEST },
	{ true, "rcvd_rnr_err", EMU_CNT_RCVD_RNR_ERR },
	{ true, "send_rnr_err", EMU_CNT_SEND_RNR_ERR },
	{ true, "rcvd_seq_err", ALWAYS_ZERO },	/* softrdma never NAKs a sequence error */
	{ true, "ack_deferred", ALWAYS_ZERO },
	{ true, "retry_exceeded_err", EMU_CNT_RETRY_EXCEEDED_ERR },
	{ true, "retry_rnr_exceeded_err", EMU_CNT_RETRY_RNR_EXCEEDED_ERR },
	{ true, "completer_retry_err", EMU_CNT_COMPLETER_RETRY_ERR },
	{ true, "send_err", EMU_CNT_XMIT_DISCARDS },
	{ true, "link_downed", ALWAYS_ZERO },
	{ true, "rdma_sends", EMU_CNT_RDMA_SENDS },
	{ true, "rdma_recvs", EMU_CNT_RDMA_RECVS },
	{ true, "out_of_buffer", EMU_CNT_OUT_OF_BUFFER },
	{ true, "rnr_nak_retry_err", EMU_CNT_RCVD_RNR_ERR },
	{ true, "resp_remote_access_errors", EMU_CNT_RESP_REMOTE_ACCESS_ERRORS },
	{ true, "qkey_violations", EMU_CNT_QKEY_VIOLATIONS },
	{ true, "rcv_buffer_drops", EMU_CNT_RCV_BUFFER_DROPS },
	{ true, "same_host_payloads", EMU_CNT_SAME_HOST_PAYLOADS },
	{ true, "same_host_direct_writes", EMU_CNT_DIRECT_WRITES },
	{ true, "same_host_direct_reads", EMU_CNT_DIRECT_READS },
};
#define NPUBLISHED (sizeof(published) / sizeof(published[0]))

static uint64_t published_value(const struct published *p, const uint64_t v[EMU_CNT_MAX])
{
	switch (p->id) {
	case ALWAYS_ZERO:
		return 0;
	case UNICAST_XMIT:
		return v[EMU_CNT_XMIT_PACKETS] - v[EMU_CNT_MCAST_XMIT_PACKETS];
	case UNICAST_RCV:
		return v[EMU_CNT_RCV_PACKETS] - v[EMU_CNT_MCAST_RCV_PACKETS];
	default:
		return v[p->id];
	}
}

int store_published_count(void)
{
	return (int)NPUBLISHED;
}

const char *store_published_name(int i, bool *hw)
{
	*hw = published[i].hw;
	return published[i].name;
}

uint64_t store_published_value(int i, const uint64_t v[EMU_CNT_MAX])
{
	return published_value(&published[i], v);
}

int store_create(int tree_fd, char why[RUN_DIR_WHY_LEN])
{
	int dir_fd, port_fd, fd, ret = -1;
	char none[] = "0\n";

	if (mkdirat(tree_fd, STORE_DIR, 0700) || mkdirat(tree_fd, STORE_PROCS, 0700) ||
	    mkdirat(tree_fd, STORE_PORT "/counters", 0755) ||
	    mkdirat(tree_fd, STORE_PORT "/hw_counters", 0755)) {
		snprintf(why, RUN_DIR_WHY_LEN, "cannot create the counter store: %s", strerror(errno));
		return -1;
	}
	dir_fd = run_dir_open_sub(tree_fd, STORE_DIR, false, why);
	if (dir_fd < 0)
		return -1;
	fd = run_dir_open_file(dir_fd, STORE_LOCK, O_RDWR | O_CREAT, 0600, why);
	close(dir_fd);
	if (fd < 0)
		return -1;
	close(fd);
	for (int hw = 0; hw < 2; hw++) {
		port_fd = run_dir_open_sub(tree_fd, hw ? STORE_PORT "/hw_counters" :
							 STORE_PORT "/counters", false, why);
		if (port_fd < 0)
			return -1;
		ret = 0;
		for (size_t i = 0; i < NPUBLISHED && !ret; i++)
			if (published[i].hw == hw)
				ret = run_dir_replace_file(port_fd, published[i].name, none, why);
		close(port_fd);
		if (ret)
			return -1;
	}
	return 0;
}

int store_open(struct store *s, const char *tree, char why[RUN_DIR_WHY_LEN])
{
	memset(s, 0xff, sizeof(*s));	/* every fd -1 */
	s->tree_fd = run_dir_open(tree, true, why);
	if (s->tree_fd < 0 ||
	    (s->dir_fd = run_dir_open_sub(s->tree_fd, STORE_DIR, false, why)) < 0 ||
	    (s->procs_fd = run_dir_open_sub(s->tree_fd, STORE_PROCS, true, why)) < 0 ||
	    (s->lock_fd = run_dir_open_file(s->dir_fd, STORE_LOCK, O_RDWR, 0, why)) < 0 ||
	    (s->counters_fd = run_dir_open_sub(s->tree_fd, STORE_PORT "/counters", false, why)) < 0 ||
	    (s->hw_fd = run_dir_open_sub(s->tree_fd, STORE_PORT "/hw_counters", false, why)) < 0) {
		int err = errno;

		store_close(s);
		errno = err;
		return -1;
	}
	return 0;
}

void store_close(struct store *s)
{
	int *fds[] = { &s->tree_fd, &s->dir_fd, &s->procs_fd, &s->lock_fd, &s->counters_fd,
		       &s->hw_fd };

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
}

unsigned long long store_proc_start(long pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	/* Field 22; the name (field 2) may hold spaces and parentheses, so count from its end. */
	p = strrchr(buf, ')');
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	if (p)
		start = strtoull(p + 1, NULL, 10);
	return start;
}

static int name_index(const char *name)
{
	for (int i = 0; i < EMU_CNT_MAX; i++)
		if (!strcmp(name, emu_counter_names[i]))
			return i;
	return -1;
}

int store_write_record(struct store *s, const char *name, const struct store_record *r,
		       char why[RUN_DIR_WHY_LEN])
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int ret;

	if (!f) {
		snprintf(why, RUN_DIR_WHY_LEN, "open_memstream: %s", strerror(errno));
		return -1;
	}
	fprintf(f, "softrdma-counters 1\npid %ld\nstart %llu\ncomm %s\nanswered %" PRIu64 "\n",
		r->pid, r->start, r->comm, r->answered);
	for (int i = 0; i < EMU_CNT_MAX; i++)
		fprintf(f, "process %s %" PRIu64 "\n", emu_counter_names[i], r->v[i]);
	for (int q = 0; q < r->nqps; q++)
		for (int i = 0; i < EMU_CNT_MAX; i++)
			if (r->qps[q].v[i])
				fprintf(f, "qp 0x%06" PRIx32 " %s %" PRIu64 "\n", r->qps[q].qpn,
					emu_counter_names[i], r->qps[q].v[i]);
	if (fclose(f)) {
		free(text);
		snprintf(why, RUN_DIR_WHY_LEN, "out of memory for the counters");
		return -1;
	}
	ret = run_dir_replace_file(s->procs_fd, name, text, why);
	free(text);
	return ret;
}

/* One "qp 0xQPN NAME VALUE" line: added to the record's last QP, or to a new one. */
static int parse_qp_line(struct store_record *r, const char *line)
{
	char cname[64];
	uint64_t value;
	uint32_t qpn;
	int id;

	if (sscanf(line, "qp %" SCNx32 " %63s %" SCNu64, &qpn, cname, &value) != 3)
		return -1;
	id = name_index(cname);
	if (id < 0)
		return 0;	/* a counter this build does not know */
	if (!r->nqps || r->qps[r->nqps - 1].qpn != qpn) {
		struct store_qp *grown = realloc(r->qps, (size_t)(r->nqps + 1) * sizeof(*grown));

		if (!grown)
			return -1;
		r->qps = grown;
		memset(&r->qps[r->nqps], 0, sizeof(*grown));
		r->qps[r->nqps++].qpn = qpn;
	}
	r->qps[r->nqps - 1].v[id] = value;
	return 0;
}

static int parse_line(struct store_record *r, const char *line, bool want_qps)
{
	char cname[64];
	uint64_t value;
	int id;

	if (sscanf(line, "pid %ld", &r->pid) == 1 || sscanf(line, "start %llu", &r->start) == 1 ||
	    sscanf(line, "answered %" SCNu64, &r->answered) == 1)
		return 0;
	if (!strncmp(line, "comm ", 5)) {
		snprintf(r->comm, sizeof(r->comm), "%.*s", (int)strcspn(line + 5, "\n"), line + 5);
		return 0;
	}
	if (sscanf(line, "process %63s %" SCNu64, cname, &value) == 2) {
		id = name_index(cname);
		if (id >= 0)
			r->v[id] = value;
		return 0;
	}
	if (!strncmp(line, "qp ", 3))
		return want_qps ? parse_qp_line(r, line) : 0;
	return -1;
}

int store_read_record(struct store *s, const char *name, bool want_qps, struct store_record *r)
{
	char why[RUN_DIR_WHY_LEN], *line = NULL;
	size_t cap = 0;
	int fd = run_dir_open_file(s->procs_fd, name, O_RDONLY, 0, why), ret = 0;
	FILE *f;

	memset(r, 0, sizeof(*r));
	if (fd < 0)
		return -1;
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return -1;
	}
	if (getline(&line, &cap, f) < 0 || strcmp(line, "softrdma-counters 1\n"))
		ret = -1;
	while (!ret && getline(&line, &cap, f) > 0)
		ret = parse_line(r, line, want_qps);
	free(line);
	fclose(f);
	if (ret)
		store_record_free(r);
	return ret;
}

void store_record_free(struct store_record *r)
{
	free(r->qps);
	r->qps = NULL;
	r->nqps = 0;
}

int store_for_each(struct store *s, bool want_qps,
		   int (*fn)(const char *name, struct store_record *r, void *arg), void *arg)
{
	int fd = openat(s->procs_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = 0;
	struct dirent *d;
	DIR *dir;

	if (fd < 0 || !(dir = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while (!ret && (d = readdir(dir))) {
		struct store_record r;

		if (d->d_name[0] == '.' || store_read_record(s, d->d_name, want_qps, &r))
			continue;
		ret = fn(d->d_name, &r, arg);
		store_record_free(&r);
	}
	closedir(dir);
	return ret;
}

static int add_record(const char *name, struct store_record *r, void *arg)
{
	uint64_t *totals = arg;

	(void)name;
	for (int i = 0; i < EMU_CNT_MAX; i++)
		totals[i] += r->v[i];
	return 0;
}

void store_sum(struct store *s, uint64_t totals[EMU_CNT_MAX])
{
	store_for_each(s, false, add_record, totals);
}

/* Rewrites a sysfs file whose text is not already value's. */
static int publish_file(int dir_fd, const char *name, uint64_t value, char *why)
{
	char text[32], old[32] = "";
	int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n = 0;

	snprintf(text, sizeof(text), "%" PRIu64 "\n", value);
	if (fd >= 0) {
		n = read(fd, old, sizeof(old) - 1);
		close(fd);
	}
	if (n > 0 && !strncmp(old, text, sizeof(text)))
		return 0;
	return run_dir_replace_file(dir_fd, name, text, why);
}

static int lock_store(struct store *s, int wait_ms)
{
	for (int waited = 0;; waited += 10) {
		if (!flock(s->lock_fd, LOCK_EX | LOCK_NB))
			return 0;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -1;
		if (waited >= wait_ms)
			return -1;
		usleep(10000);
	}
}

int store_publish_sysfs(struct store *s, int wait_ms, char why[RUN_DIR_WHY_LEN])
{
	uint64_t totals[EMU_CNT_MAX] = { 0 };
	int ret = 0;

	if (lock_store(s, wait_ms)) {
		snprintf(why, RUN_DIR_WHY_LEN, "the counter store is locked by another process");
		return -1;
	}
	store_sum(s, totals);
	for (size_t i = 0; i < NPUBLISHED && !ret; i++)
		ret = publish_file(published[i].hw ? s->hw_fd : s->counters_fd, published[i].name,
				   published_value(&published[i], totals), why);
	flock(s->lock_fd, LOCK_UN);
	return ret;
}

uint64_t store_refresh_stamp(struct store *s)
{
	char why[RUN_DIR_WHY_LEN], text[32] = "";
	int fd = run_dir_open_file(s->dir_fd, STORE_REFRESH, O_RDONLY, 0, why);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	return n > 0 ? strtoull(text, NULL, 10) : 0;
}

int store_request_refresh(struct store *s, uint64_t *stamp, char why[RUN_DIR_WHY_LEN])
{
	struct timespec ts;
	char text[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	*stamp = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	snprintf(text, sizeof(text), "%" PRIu64 "\n", *stamp);
	return run_dir_replace_file(s->dir_fd, STORE_REFRESH, text, why);
}
