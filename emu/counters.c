// SPDX-License-Identifier: MIT
/*
 * Counting (relaxed atomic adds into a QP's or the process's block) and publishing: a
 * thread of its own, so that file I/O never runs on the engine thread nor in a posting
 * thread. It wakes every interval, or at once when a reader (`softrdma counters`) asks
 * through the store's refresh file, and publishes when something changed (or was asked).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "emu/counter_store.h"
#include "emu/counters.h"
#include "emu/internal.h"

#define INTERVAL_DEFAULT_MS	1000
#define INTERVAL_ENV		"SOFTRDMA_COUNTERS_INTERVAL_MS"
#define LOCK_WAIT_MS		1000	/* then the sums wait for the next round */
#define GONE_QPS_MAX		1024	/* destroyed QPs listed by --qp; older ones only summed */

struct counter_block emu_process_counters;

static struct {
	pthread_mutex_t lock;	/* qps, retired, and the publisher's state below */
	struct counter_block *qps;	/* live QPs' blocks */
	uint64_t retired[EMU_CNT_MAX];	/* what destroyed QPs counted */
	struct store_qp *gone;		/* the last GONE_QPS_MAX destroyed QPs that counted */
	int ngone, gone_next;
	bool attached, stopping, hooks_set;
	pthread_t thread;
	int stop_fd, notify_fd;
	struct store store;
	char name[64];		/* this process's file in the store */
	struct store_record me;
	uint64_t last[EMU_CNT_MAX];	/* as last published */
	bool sysfs_stale;	/* the last sum did not get the lock */
	int interval_ms;
	void (*fold)(void *arg);	/* counts kept elsewhere, added in before each sum */
	void *fold_arg;
} cs = { .lock = PTHREAD_MUTEX_INITIALIZER, .stop_fd = -1, .notify_fd = -1 };

static uint64_t load(const uint64_t *v)
{
	return __atomic_load_n(v, __ATOMIC_RELAXED);
}

void counters_qp_register(struct counter_block *b, uint32_t qpn)
{
	memset(b->v, 0, sizeof(b->v));
	b->qpn = qpn;
	pthread_mutex_lock(&cs.lock);
	b->prev = NULL;
	b->next = cs.qps;
	if (cs.qps)
		cs.qps->prev = b;
	cs.qps = b;
	pthread_mutex_unlock(&cs.lock);
}

/* With cs.lock: a destroyed QP's counts join the totals, and the list --qp shows. */
static void remember_gone(const struct counter_block *b)
{
	struct store_qp q = { .qpn = b->qpn };
	bool counted = false;

	for (int i = 0; i < EMU_CNT_MAX; i++) {
		q.v[i] = load(&b->v[i]);
		cs.retired[i] += q.v[i];
		counted |= q.v[i] != 0;
	}
	if (!counted)
		return;
	if (!cs.gone && !(cs.gone = calloc(GONE_QPS_MAX, sizeof(*cs.gone))))
		return;
	cs.gone[cs.gone_next] = q;
	cs.gone_next = (cs.gone_next + 1) % GONE_QPS_MAX;
	if (cs.ngone < GONE_QPS_MAX)
		cs.ngone++;
}

void counters_qp_unregister(struct counter_block *b)
{
	pthread_mutex_lock(&cs.lock);
	remember_gone(b);
	if (b->prev || cs.qps == b) {	/* not a QP of the parent's, after fork() */
		if (b->prev)
			b->prev->next = b->next;
		else
			cs.qps = b->next;
		if (b->next)
			b->next->prev = b->prev;
	}
	b->prev = b->next = NULL;
	pthread_mutex_unlock(&cs.lock);
}

/* With cs.lock: the process's totals; with qps, a copy of each live QP's block and of the
 * destroyed ones remembered. */
static void snapshot_locked(uint64_t totals[EMU_CNT_MAX], struct store_record *qps)
{
	int n = 0;

	if (cs.fold)
		cs.fold(cs.fold_arg);
	for (int i = 0; i < EMU_CNT_MAX; i++)
		totals[i] = load(&emu_process_counters.v[i]) + cs.retired[i];
	for (struct counter_block *b = cs.qps; b; b = b->next) {
		for (int i = 0; i < EMU_CNT_MAX; i++)
			totals[i] += load(&b->v[i]);
		n++;
	}
	if (!qps)
		return;
	qps->nqps = 0;
	qps->qps = calloc((size_t)(n + cs.ngone + 1), sizeof(*qps->qps));
	if (!qps->qps)
		return;	/* the totals still go out */
	for (int i = 0; i < cs.ngone; i++)
		qps->qps[qps->nqps++] = cs.gone[(cs.gone_next + GONE_QPS_MAX - cs.ngone + i) % GONE_QPS_MAX];
	for (struct counter_block *b = cs.qps; b; b = b->next) {
		struct store_qp *q = &qps->qps[qps->nqps++];

		q->qpn = b->qpn;
		for (int i = 0; i < EMU_CNT_MAX; i++)
			q->v[i] = load(&b->v[i]);
	}
}

void counters_set_fold(void (*fold)(void *arg), void *arg)
{
	pthread_mutex_lock(&cs.lock);
	cs.fold = fold;
	cs.fold_arg = arg;
	pthread_mutex_unlock(&cs.lock);
}

void counters_snapshot(uint64_t totals[EMU_CNT_MAX])
{
	pthread_mutex_lock(&cs.lock);
	snapshot_locked(totals, NULL);
	pthread_mutex_unlock(&cs.lock);
}

/* Publishes when something changed, a reader asked (stamp), or the last sum was locked out. */
static void publish(uint64_t stamp, int lock_wait_ms)
{
	char why[RUN_DIR_WHY_LEN];
	struct store_record r;

	pthread_mutex_lock(&cs.lock);
	r = cs.me;
	snapshot_locked(r.v, NULL);
	if (!memcmp(r.v, cs.last, sizeof(r.v)) && stamp <= cs.me.answered && !cs.sysfs_stale) {
		pthread_mutex_unlock(&cs.lock);
		return;
	}
	snapshot_locked(r.v, &r);
	if (stamp > r.answered)
		r.answered = stamp;
	pthread_mutex_unlock(&cs.lock);
	/* Our own file first: a sum made by anyone after this sees it. */
	if (!store_write_record(&cs.store, cs.name, &r, why)) {
		memcpy(cs.last, r.v, sizeof(cs.last));
		cs.me.answered = r.answered;
		cs.sysfs_stale = store_publish_sysfs(&cs.store, lock_wait_ms, why) != 0;
	}
	free(r.qps);
}

static void *publisher_main(void *arg)
{
	struct pollfd fds[2] = { { .fd = cs.stop_fd, .events = POLLIN },
				 { .fd = cs.notify_fd, .events = POLLIN } };

	(void)arg;
	for (;;) {
		uint64_t stamp = 0;
		char buf[4096];
		int n = poll(fds, cs.notify_fd >= 0 ? 2 : 1, cs.interval_ms);

		if (n > 0 && (fds[0].revents & POLLIN))
			break;
		if (n > 0 && cs.notify_fd >= 0 && (fds[1].revents & POLLIN)) {
			while (read(cs.notify_fd, buf, sizeof(buf)) > 0) {
				/* drained: one request or many, one publication answers them */
			}
			stamp = store_refresh_stamp(&cs.store);
		}
		publish(stamp, LOCK_WAIT_MS);
	}
	return NULL;
}

static int interval_from_env(void)
{
	const char *text = getenv(INTERVAL_ENV);
	char *end;
	long ms;

	if (!text)
		return INTERVAL_DEFAULT_MS;
	ms = strtol(text, &end, 10);
	if (*end || end == text || ms < 10 || ms > 60000) {
		fprintf(stderr, "softrdma: %s=%s is not a number of milliseconds in 10..60000; "
			"using %d\n", INTERVAL_ENV, text, INTERVAL_DEFAULT_MS);
		return INTERVAL_DEFAULT_MS;
	}
	return (int)ms;
}

/* Requests arrive as a rename into the store's directory (store_request_refresh). */
static int watch_refresh(void)
{
	char path[64];
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);

	if (fd < 0)
		return -1;	/* over the inotify limit: publications stay periodic */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", cs.store.dir_fd);
	if (inotify_add_watch(fd, path, IN_MOVED_TO) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void stop_publisher(void)
{
	uint64_t one = 1;

	pthread_mutex_lock(&cs.lock);
	if (!cs.attached || cs.stopping) {
		pthread_mutex_unlock(&cs.lock);
		return;
	}
	cs.stopping = true;
	pthread_mutex_unlock(&cs.lock);
	if (write(cs.stop_fd, &one, sizeof(one)) != sizeof(one)) {
		/* an eventfd below its maximum always takes it */
	}
	pthread_join(cs.thread, NULL);
	publish(0, LOCK_WAIT_MS);
	close(cs.stop_fd);
	if (cs.notify_fd >= 0)
		close(cs.notify_fd);
	store_close(&cs.store);
	cs.stop_fd = cs.notify_fd = -1;
	pthread_mutex_lock(&cs.lock);
	cs.attached = cs.stopping = false;
	pthread_mutex_unlock(&cs.lock);
}

/* A process that exits without closing its device still publishes its last counts. */
static void at_exit(void)
{
	stop_publisher();
}

/*
 * fork(): the child has no publisher thread, and the parent's QPs, counts and descriptors
 * are not its own (writing the parent's stop eventfd would stop the parent's publisher).
 * It starts afresh, as a new process of the run, when it opens the device.
 */
static void before_fork(void)
{
	pthread_mutex_lock(&cs.lock);
}

static void after_fork_parent(void)
{
	pthread_mutex_unlock(&cs.lock);
}

static void after_fork_child(void)
{
	/* The forking thread took it in before_fork() and is the child's only thread: it
	 * gives it back, as POSIX allows, rather than making a new mutex over a held one
	 * (TSan took the child's next lock of it for a double lock, and races followed). */
	pthread_mutex_unlock(&cs.lock);
	if (cs.attached) {
		close(cs.stop_fd);
		if (cs.notify_fd >= 0)
			close(cs.notify_fd);
		store_close(&cs.store);
	}
	cs.stop_fd = cs.notify_fd = -1;
	cs.attached = cs.stopping = cs.sysfs_stale = false;
	cs.qps = NULL;
	memset(cs.retired, 0, sizeof(cs.retired));
	cs.ngone = cs.gone_next = 0;
	memset(emu_process_counters.v, 0, sizeof(emu_process_counters.v));
}

/* The publisher takes no signal: the application's handlers run on its own threads. */
static int start_publisher(void)
{
	sigset_t all, old;
	int ret;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&cs.thread, NULL, publisher_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ret;
}

static int open_store(const char *tree)
{
	char why[RUN_DIR_WHY_LEN];

	if (store_open(&cs.store, tree, why)) {
		fprintf(stderr, "softrdma: the run's counters at %s are not used (%s): counting "
			"stays in this process\n", tree, why);
		return -1;
	}
	memset(&cs.me, 0, sizeof(cs.me));
	cs.me.pid = getpid();
	cs.me.start = store_proc_start(cs.me.pid);
	if (!cs.me.start)
		cs.me.start = 1;
	{
		FILE *f = fopen("/proc/self/comm", "re");

		if (!f || !fgets(cs.me.comm, sizeof(cs.me.comm), f))
			snprintf(cs.me.comm, sizeof(cs.me.comm), "?");
		cs.me.comm[strcspn(cs.me.comm, "\n")] = 0;
		if (f)
			fclose(f);
	}
	snprintf(cs.name, sizeof(cs.name), "%ld-%llu", cs.me.pid, cs.me.start);
	memset(cs.last, 0xff, sizeof(cs.last));	/* the first round publishes */
	return 0;
}

void counters_attach(void)
{
	const char *tree = getenv("SYSFS_PATH");

	pthread_mutex_lock(&cs.lock);
	if (cs.attached || !tree) {
		pthread_mutex_unlock(&cs.lock);
		return;
	}
	pthread_mutex_unlock(&cs.lock);
	if (open_store(tree))
		return;
	cs.interval_ms = interval_from_env();
	cs.stop_fd = eventfd(0, EFD_CLOEXEC);
	cs.notify_fd = watch_refresh();
	if (cs.stop_fd < 0 || (errno = start_publisher())) {
		fprintf(stderr, "softrdma: cannot start the counters' publisher: %s\n",
			strerror(errno));
		if (cs.stop_fd >= 0)
			close(cs.stop_fd);
		if (cs.notify_fd >= 0)
			close(cs.notify_fd);
		store_close(&cs.store);
		return;
	}
	pthread_mutex_lock(&cs.lock);
	cs.attached = true;
	pthread_mutex_unlock(&cs.lock);
	if (!cs.hooks_set) {
		cs.hooks_set = true;
		atexit(at_exit);
		pthread_atfork(before_fork, after_fork_parent, after_fork_child);
	}
}

void counters_detach(void)
{
	stop_publisher();
}

/* Counts one frame whose header (length word first) is at hdr; desc: its descriptor. */
static void count_frame(struct counter_block *b, const uint8_t *hdr, uint64_t payload_len,
			const uint8_t *desc)
{
	uint32_t frame_len, apsn;
	unsigned int hdr_len = wire_header_len(hdr[4]);

	if (hdr[4] == OP_PEER_MEMORY || !hdr_len)
		return;
	hdr_len = wire_frame_header_len(hdr + 4);
	memcpy(&frame_len, hdr, 4);
	memcpy(&apsn, hdr + 4 + 8, 4);
	frame_len = ntohl(frame_len);
	if ((ntohl(apsn) & BTH_BY_REF) && desc) {
		struct iovec remote[EMU_MAX_SGE];
		int nremote;

		if (peer_mem_parse(desc, frame_len - hdr_len, remote, &nremote, &payload_len))
			return;
	}
	counter_packet(b, EMU_CNT_XMIT_DATA, hdr_len, payload_len);
}

void counters_stream_frame(struct counter_block *b, const uint8_t *hdr, size_t hdr_len,
			   const struct iovec *payload, int niov)
{
	uint32_t magic;
	uint64_t len = 0;

	memcpy(&magic, hdr, 4);
	if (hdr_len < 4 + 12 || (hdr_len == sizeof(struct wire_hello) && ntohl(magic) == WIRE_MAGIC))
		return;	/* the hello: a connection, not a packet */
	for (int i = 0; i < niov; i++)
		len += payload[i].iov_len;
	count_frame(b, hdr, len, NULL);
}

void counters_stream_batch(struct counter_block *b, const struct tx_batch *batch)
{
	for (int i = 0; i < batch->nframes; i++) {
		uint32_t frame_len;

		memcpy(&frame_len, batch->hdr[i], 4);
		count_frame(b, batch->hdr[i],
			    ntohl(frame_len) - wire_frame_header_len(batch->hdr[i] + 4),
			    batch->desc[i]);
	}
}
