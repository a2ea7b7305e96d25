// SPDX-License-Identifier: MIT
/*
 * Direct placement (emu/direct.h): the target publishes its keys and its streams' QPs in
 * shared memory, and a same-host requester places the RDMA WRITEs first on its wire in the
 * target's memory itself, and does the READs first on it from there (a lone one, or a run
 * of one posting list), after the checks the target's responder would make
 * (mr_check_remote_access()'s, in the same order of rules). A run is one key's, so that one
 * announcement covers it (direct_key_retract()). Anything it cannot decide, or that would
 * fail, goes as a frame as before, so every error status still comes from the responder.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "emu/direct.h"
#include "emu/internal.h"
#include "emu/pcap.h"

/* docs/wire-protocol.md gives these layouts: two builds of one host must agree. */
_Static_assert(sizeof(struct direct_key) == 40, "a key slot is 40 bytes");
_Static_assert(offsetof(struct direct_page, placing) == 64, "the requester's half at 64");
_Static_assert(offsetof(struct direct_page, answered) == 88, "READ responses after placements");
_Static_assert(sizeof(struct direct_page) <= DIRECT_PAGE_SIZE, "a page holds a stream's");

/* Headers as a NIC would send them, what the counters count: a WRITE's or a READ
 * request's (BTH, RETH), a READ response's (BTH, AETH). */
#define DIRECT_REQUEST_HDR	(12u + 16u)
#define DIRECT_RESPONSE_HDR	(12u + 4u)

/* Target: one stream whose requester may place, while its page is mapped here. */
struct direct_served {
	struct direct_served *next;
	struct direct_page *page;
	struct peer_mem requester;	/* its process: a dead one places nothing more */
	struct counter_block *counters;	/* the stream's QP's, until the stream closes (lock) */
	bool retired;			/* the stream closed; freed once nothing is under way */
	uint64_t folded, folded_words;	/* what direct_fold_counters() took already */
	uint64_t folded_answered, folded_answered_words;
};

struct direct_keys {
	int fd;
	size_t size;
	struct direct_keys_head *head;
	struct direct_key *slots;
	uint32_t nslots;
	pthread_mutex_t lock;		/* served; taken after the mem table's lock */
	struct direct_served *served;
};

/* Requester: one stream's target. */
struct direct_target {
	struct peer_mem target;		/* pid, and a watch that it stays that process */
	const struct direct_key *slots;
	uint32_t nslots, tag_bits, secret;
	void *keys_map;
	size_t keys_size;
	struct direct_page *page;
	int test_nap_ms;	/* SOFTRDMA_TEST_DIRECT_NAP_MS: a placement naps once announced */
	uint64_t seen_alive_ns;	/* when the target was last seen to be the same process */
};

/*
 * Whether the target is still the process the kernel named, asked of its pidfd at most
 * every millisecond (a system call per WRITE would cost a third of a placement). Linux
 * hands out pids in turn up to pid_max (32768 at the least) before it reuses one: no pid
 * comes back within a millisecond of its process's exit.
 */
#define TARGET_CHECK_NS	1000000ull

static bool target_still_there(struct direct_target *t)
{
	uint64_t now = engine_now_ns();

	if (now - t->seen_alive_ns < TARGET_CHECK_NS)
		return true;
	if (!peer_mem_still_there(&t->target))
		return false;
	t->seen_alive_ns = now;
	return true;
}

static size_t keys_size(uint32_t nslots)
{
	return DIRECT_KEYS_HEAD + (size_t)nslots * sizeof(struct direct_key);
}

/* A sealed memfd of size bytes, mapped read-write here; -1 and *map NULL on failure. */
static int shared_file(const char *name, size_t size, void **map)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);

	*map = NULL;
	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)size) ||
	    (*map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED ||
	    /* Its size is fixed: a peer's mapping never faults past a shrunk end. */
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		if (*map && *map != MAP_FAILED)
			munmap(*map, size);
		*map = NULL;
		close(fd);
		return -1;
	}
	return fd;
}

bool direct_enabled(void)
{
	const char *v = getenv("SOFTRDMA_DIRECT_WRITE");

	return peer_mem_enabled() && (!v || strcmp(v, "0"));
}

struct direct_keys *direct_keys_create(uint32_t nslots, uint32_t tag_bits, uint32_t secret)
{
	struct direct_keys *d;
	void *map;

	if (!direct_enabled() || !(d = calloc(1, sizeof(*d))))
		return NULL;
	d->size = keys_size(nslots);
	d->fd = shared_file("softrdma-keys", d->size, &map);
	if (d->fd < 0) {
		free(d);
		return NULL;	/* no memfd here: every WRITE goes as a frame */
	}
	d->head = map;
	d->slots = (struct direct_key *)((uint8_t *)map + DIRECT_KEYS_HEAD);
	d->nslots = nslots;
	d->head->nslots = nslots;
	d->head->tag_bits = tag_bits;
	d->head->secret = secret;
	d->head->magic = DIRECT_KEYS_MAGIC;
	pthread_mutex_init(&d->lock, NULL);
	return d;
}

static void free_served(struct direct_served *sv)
{
	munmap(sv->page, DIRECT_PAGE_SIZE);
	peer_mem_release(&sv->requester);
	free(sv);
}

static void fold_locked(struct direct_served *sv)
{
	uint64_t placed = atomic_load_explicit(&sv->page->placed, memory_order_relaxed);
	uint64_t words = atomic_load_explicit(&sv->page->placed_words, memory_order_relaxed);
	uint64_t answered = atomic_load_explicit(&sv->page->answered, memory_order_relaxed);
	uint64_t answered_words = atomic_load_explicit(&sv->page->answered_words,
						       memory_order_relaxed);

	/* What a requester reports is what it says it placed: counters, never memory. The
	 * QP's own block while it has the stream (softrdma counters --qp), then the process's. */
	struct counter_block *b = sv->counters ? sv->counters : &emu_process_counters;

	qp_counter_add(b, EMU_CNT_RCV_PACKETS, placed - sv->folded);
	qp_counter_add(b, EMU_CNT_RCV_DATA, words - sv->folded_words);
	qp_counter_add(b, EMU_CNT_XMIT_PACKETS, answered - sv->folded_answered);
	qp_counter_add(b, EMU_CNT_XMIT_DATA, answered_words - sv->folded_answered_words);
	sv->folded = placed;
	sv->folded_words = words;
	sv->folded_answered = answered;
	sv->folded_answered_words = answered_words;
}

void direct_keys_destroy(struct direct_keys *d)
{
	if (!d)
		return;
	while (d->served) {
		struct direct_served *sv = d->served;

		d->served = sv->next;
		fold_locked(sv);
		free_served(sv);
	}
	pthread_mutex_destroy(&d->lock);
	munmap(d->head, d->size);
	close(d->fd);
	free(d);
}

/* A slot's fields: mr's if it takes WRITEs or READs, else nothing (mr NULL: retracted). */
static void store_key(struct direct_key *k, const struct mem_region *mr)
{
	/* An ODP region faults its pages in on access (odp.c): the frame path does that. */
	bool placeable = mr && mr->kind == MEM_KIND_REGION &&
			 (mr->access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)) &&
			 !(mr->access & IBV_ACCESS_ON_DEMAND);

	atomic_store_explicit(&k->key, placeable ? mr->rkey : 0, memory_order_release);
	atomic_store_explicit(&k->pd_handle, placeable ? mr->pd_handle : 0, memory_order_release);
	atomic_store_explicit(&k->access, placeable ? mr->access : 0, memory_order_release);
	atomic_store_explicit(&k->iova, placeable ? mr->iova : 0, memory_order_release);
	atomic_store_explicit(&k->length, placeable ? mr->length : 0, memory_order_release);
	atomic_store_explicit(&k->host_addr, placeable ? (uint64_t)(uintptr_t)mr->host_addr : 0,
			      memory_order_release);
}

void direct_key_publish(struct direct_keys *d, uint32_t slot, const struct mem_region *mr)
{
	struct direct_key *k;
	uint32_t seq;

	if (!d || slot >= d->nslots)
		return;
	k = &d->slots[slot];
	seq = atomic_load_explicit(&k->seq, memory_order_relaxed);
	if (!(seq & 1))
		atomic_store_explicit(&k->seq, ++seq, memory_order_relaxed);
	store_key(k, mr);
	atomic_store_explicit(&k->seq, seq + 1, memory_order_release);
}

/*
 * Until sv's requester is not placing under tag. A requester stopped (a debugger, SIGSTOP)
 * inside its few instructions of placement holds the deregistration until it runs again,
 * as a region's local reference does; one that died holds nothing.
 */
static void wait_not_placing(struct direct_served *sv, uint64_t tag)
{
	for (unsigned int i = 0; atomic_load(&sv->page->placing) == tag; i++) {
		if (!peer_mem_still_there(&sv->requester))
			return;
		if (i < 64) {
			sched_yield();
		} else {
			struct timespec ts = { 0, 100000 };

			nanosleep(&ts, NULL);
		}
	}
}

/* Retired streams with nothing under way go; d->lock held. */
static void reap_locked(struct direct_keys *d)
{
	for (struct direct_served **pp = &d->served; *pp;) {
		struct direct_served *sv = *pp;

		if (sv->retired && (!atomic_load(&sv->page->placing) ||
				    !peer_mem_still_there(&sv->requester))) {
			*pp = sv->next;
			fold_locked(sv);
			free_served(sv);
		} else {
			pp = &sv->next;
		}
	}
}

void direct_key_retract(struct direct_keys *d, uint32_t slot)
{
	struct direct_key *k;
	uint32_t seq;
	uint64_t tag;

	if (!d || slot >= d->nslots)
		return;
	k = &d->slots[slot];
	seq = atomic_load_explicit(&k->seq, memory_order_relaxed);
	if (seq & 1)
		return;	/* retracted already, and waited for then */
	/*
	 * Sequentially consistent, as the look at announcements below and the requester's
	 * announce and re-check: in their one total order, either it sees the retraction or
	 * we see its announcement.
	 */
	atomic_store(&k->seq, seq + 1);
	tag = (uint64_t)(slot + 1) << 32 | seq;
	pthread_mutex_lock(&d->lock);
	for (struct direct_served *sv = d->served; sv; sv = sv->next)
		wait_not_placing(sv, tag);
	reap_locked(d);
	pthread_mutex_unlock(&d->lock);
	store_key(k, NULL);	/* seq stays odd: nothing is placed here until published again */
}

/* As the responder's accepts_requests(); a QP with faults to inject sees every frame. */
static bool takes_writes(const struct emu_qp *qp)
{
	return qp->type == IBV_QPT_RC && !qp->faults &&
	       (qp->state == IBV_QPS_RTR || qp->state == IBV_QPS_RTS ||
		qp->state == IBV_QPS_SQD || qp->state == IBV_QPS_SQE);
}

/* The QP as its responder sees it, into page (one writer: qp->lock is held). */
static void publish_qp(struct direct_page *page, const struct emu_qp *qp)
{
	uint32_t seq = atomic_load_explicit(&page->qp_seq, memory_order_relaxed);

	atomic_store_explicit(&page->qp_seq, seq + 1, memory_order_relaxed);
	atomic_store_explicit(&page->qp_open, takes_writes(qp), memory_order_release);
	atomic_store_explicit(&page->qp_pd, qp->pd_handle, memory_order_release);
	atomic_store_explicit(&page->qp_access, (int32_t)qp->attr.qp_access_flags,
			      memory_order_release);
	atomic_store_explicit(&page->qp_seq, seq + 2, memory_order_release);
}

int direct_offer(struct direct_keys *d, struct conn *c, pid_t pid, int fds[2])
{
	struct direct_served *sv;
	void *map;
	int err;

	/* A capture shows every packet: while one is taken, WRITEs come as frames. */
	if (!d || c->direct_served || atomic_load(&pcap_active))
		return ENOTSUP;
	sv = calloc(1, sizeof(*sv));
	if (!sv)
		return ENOMEM;
	err = peer_mem_watch(&sv->requester, pid);
	if (err) {
		free(sv);
		return err;
	}
	fds[0] = fcntl(d->fd, F_DUPFD_CLOEXEC, 0);
	fds[1] = shared_file("softrdma-stream", DIRECT_PAGE_SIZE, &map);
	if (fds[0] < 0 || fds[1] < 0) {
		if (fds[0] >= 0)
			close(fds[0]);
		if (fds[1] >= 0) {
			munmap(map, DIRECT_PAGE_SIZE);
			close(fds[1]);
		}
		peer_mem_release(&sv->requester);
		free(sv);
		return EMFILE;
	}
	sv->page = map;
	sv->counters = &c->qp->counters;
	atomic_store(&sv->page->probe_addr, peer_mem_probe_addr());
	publish_qp(sv->page, c->qp);
	pthread_mutex_lock(&d->lock);
	sv->next = d->served;
	d->served = sv;
	pthread_mutex_unlock(&d->lock);
	c->direct_served = sv;
	return 0;
}

void direct_qp_changed(struct emu_qp *qp)
{
	struct conn *c = qp->streams.resp;

	if (c && c->direct_served)
		publish_qp(c->direct_served->page, qp);
}

void direct_page_close(struct conn *c)
{
	struct direct_served *sv = c->direct_served;
	struct direct_keys *d;

	if (!sv)
		return;	/* every stream closes through here; most never offered placement */
	d = mem_table_direct(c->engine->mem);
	c->direct_served = NULL;
	atomic_store(&sv->page->closed, 1);	/* seq_cst: before reap's look at placing */
	pthread_mutex_lock(&d->lock);
	fold_locked(sv);	/* the last into the QP's block: it may go after this */
	sv->counters = NULL;
	sv->retired = true;
	reap_locked(d);
	pthread_mutex_unlock(&d->lock);
}

void direct_fold_counters(struct direct_keys *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	for (struct direct_served *sv = d->served; sv; sv = sv->next)
		fold_locked(sv);
	reap_locked(d);
	pthread_mutex_unlock(&d->lock);
}

/* Requester side. */

/* A regular file of exactly size bytes that cannot shrink under our mapping. */
static bool sound_file(int fd, size_t min, size_t max, size_t *size)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);

	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || seals < 0 || !(seals & F_SEAL_SHRINK) ||
	    st.st_size < (off_t)min || (uint64_t)st.st_size > max)
		return false;
	*size = (size_t)st.st_size;
	return true;
}

static void free_target(struct direct_target *t)
{
	if (t->keys_map)
		munmap(t->keys_map, t->keys_size);
	if (t->page)
		munmap(t->page, DIRECT_PAGE_SIZE);
	peer_mem_release(&t->target);
	free(t);
}

/* Maps what the target sent; false if it is not what a softrdma target sends. */
static bool map_target(struct direct_target *t, const int fds[2])
{
	const struct direct_keys_head *head;
	size_t page_size;
	void *m;

	if (!sound_file(fds[0], DIRECT_KEYS_HEAD, keys_size(MEM_TABLE_MAX_REGIONS * 2u),
			&t->keys_size) ||
	    !sound_file(fds[1], DIRECT_PAGE_SIZE, DIRECT_PAGE_SIZE, &page_size))
		return false;
	m = mmap(NULL, t->keys_size, PROT_READ, MAP_SHARED, fds[0], 0);
	if (m == MAP_FAILED)
		return false;
	t->keys_map = m;
	m = mmap(NULL, DIRECT_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0);
	if (m == MAP_FAILED)
		return false;
	t->page = m;
	head = t->keys_map;
	if (head->magic != DIRECT_KEYS_MAGIC || !head->tag_bits || head->tag_bits > 31 ||
	    keys_size(head->nslots) > t->keys_size)
		return false;
	t->nslots = head->nslots;
	t->tag_bits = head->tag_bits;
	t->secret = head->secret;
	t->slots = (const struct direct_key *)((const uint8_t *)t->keys_map + DIRECT_KEYS_HEAD);
	return true;
}

void direct_attach(struct conn *c, pid_t pid, const int fds[2])
{
	struct direct_target *t = calloc(1, sizeof(*t));

	if (t) {
		t->target.pidfd = -1;
		if (!direct_enabled() || c->direct || c->state != CONN_OPEN || !map_target(t, fds) ||
		    peer_mem_watch(&t->target, pid) ||
		    /* Read and write need the same ptrace permission (PTRACE_MODE_ATTACH). */
		    !peer_mem_can_read(pid, atomic_load(&t->page->probe_addr))) {
			free_target(t);
			t = NULL;
		}
	}
	close(fds[0]);
	close(fds[1]);
	if (t) {
		const char *nap = getenv("SOFTRDMA_TEST_DIRECT_NAP_MS");

		t->test_nap_ms = nap ? atoi(nap) : 0;
		c->direct = t;
	}
}

void direct_detach(struct conn *c)
{
	if (c->direct)
		free_target(c->direct);
	c->direct = NULL;
}

/* What the target's responder would check, from what it published: true if it passes. */
struct placement {
	uint32_t slot, key_seq, qp_seq;
	uint64_t host;
};

static bool target_allows(const struct direct_target *t, const struct send_wqe *wqe,
			  int right, struct placement *p)
{
	const struct direct_page *page = t->page;
	const struct direct_key *k;
	uint32_t rkey = wqe->wr.rdma.rkey, open, pd, kpd, key;
	uint64_t va = wqe->wr.rdma.remote_addr, len = wqe->length, iova, length, host;
	int32_t qp_access, access;

	p->slot = (rkey >> t->tag_bits) ^ t->secret;
	if (p->slot >= t->nslots)
		return false;
	k = &t->slots[p->slot];
	p->qp_seq = atomic_load_explicit(&page->qp_seq, memory_order_acquire);
	open = atomic_load_explicit(&page->qp_open, memory_order_acquire);
	pd = atomic_load_explicit(&page->qp_pd, memory_order_acquire);
	qp_access = atomic_load_explicit(&page->qp_access, memory_order_acquire);
	p->key_seq = atomic_load_explicit(&k->seq, memory_order_acquire);
	key = atomic_load_explicit(&k->key, memory_order_acquire);
	kpd = atomic_load_explicit(&k->pd_handle, memory_order_acquire);
	access = atomic_load_explicit(&k->access, memory_order_acquire);
	iova = atomic_load_explicit(&k->iova, memory_order_acquire);
	length = atomic_load_explicit(&k->length, memory_order_acquire);
	host = atomic_load_explicit(&k->host_addr, memory_order_acquire);
	/* Each field was stored with release after the odd count and read with acquire: a
	 * value of a change under way comes with that change's count, seen below. */
	if ((p->qp_seq & 1) || (p->key_seq & 1) ||
	    atomic_load_explicit(&page->qp_seq, memory_order_relaxed) != p->qp_seq ||
	    atomic_load_explicit(&k->seq, memory_order_relaxed) != p->key_seq)
		return false;	/* changing as we read */
	/* mr_check_remote_access()'s rules: the QP's right, the key, its PD and right, range. */
	if (!open || !(qp_access & right) || !key || key != rkey || kpd != pd ||
	    !(access & right) || va < iova || va - iova > length ||
	    len > length - (va - iova))
		return false;
	p->host = host + (va - iova);
	return true;
}

/*
 * The target ranges of run's first n WQEs, in their order, into remote; a range that
 * begins where the one before it ends extends it (a posting list that fills a buffer in
 * order is one range). Both lie in one region, so their union does too. Returns how many
 * WQEs the target's responder would take under the first one's key, as it is now.
 */
static unsigned int run_ranges(const struct direct_target *t, const struct direct_run *run,
			       struct placement *first, struct iovec *remote, unsigned int *nremote)
{
	enum ibv_wr_opcode op = run->wqe[0]->wr.opcode;
	int right = op == IBV_WR_RDMA_READ ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
	unsigned int n;

	*nremote = 0;
	if (op != IBV_WR_RDMA_WRITE && op != IBV_WR_RDMA_READ)
		return 0;
	for (n = 0; n < run->n; n++) {
		const struct send_wqe *wqe = run->wqe[n];
		struct placement p;
		struct iovec *last = *nremote ? &remote[*nremote - 1] : NULL;

		if (wqe->wr.opcode != op || !wqe->length || *nremote == DIRECT_RUN_IOVS ||
		    !target_allows(t, wqe, right, &p))
			break;
		if (!n)
			*first = p;
		else if (p.slot != first->slot || p.key_seq != first->key_seq ||
			 p.qp_seq != first->qp_seq)
			break;	/* another key, or one that changed: the next placement's */
		if (last && (uintptr_t)last->iov_base + last->iov_len == p.host)
			last->iov_len += wqe->length;
		else
			remote[(*nremote)++] = (struct iovec){ (void *)(uintptr_t)p.host, wqe->length };
	}
	return n;
}

unsigned int direct_place_run(struct emu_qp *qp, const struct direct_run *run)
{
	struct conn *c = qp->streams.req;
	struct direct_target *t = c ? c->direct : NULL;
	struct iovec remote[DIRECT_RUN_IOVS];
	unsigned int n, nremote, placed;
	struct placement first = { 0 };
	uint64_t tag, whole = 0, words = 0, answered_words = 0;
	bool read;
	ssize_t done;

	if (!t || !run->n || qp->faults || atomic_load_explicit(&pcap_active, memory_order_relaxed) ||
	    !(n = run_ranges(t, run, &first, remote, &nremote)))
		return 0;
	read = run->wqe[0]->wr.opcode == IBV_WR_RDMA_READ;
	/* Announced, then the key and the stream checked again (the target's retraction and
	 * close store, then look at the announcement, the other way round). */
	tag = (uint64_t)(first.slot + 1) << 32 | first.key_seq;
	atomic_store(&t->page->placing, tag);	/* sequentially consistent: see retract */
	if (atomic_load(&t->slots[first.slot].seq) != first.key_seq ||
	    atomic_load(&t->page->qp_seq) != first.qp_seq || atomic_load(&t->page->closed) ||
	    !target_still_there(t)) {
		atomic_store_explicit(&t->page->placing, 0, memory_order_release);
		return 0;
	}
	if (t->test_nap_ms) {
		struct timespec ts = { t->test_nap_ms / 1000, (t->test_nap_ms % 1000) * 1000000L };

		nanosleep(&ts, NULL);	/* tests: a deregistration meets a placement under way */
	}
	done = read ? process_vm_readv(t->target.pid, run->iov, run->iov_end[n - 1], remote,
				       nremote, 0) :
		      process_vm_writev(t->target.pid, run->iov, run->iov_end[n - 1], remote,
					nremote, 0);
	atomic_store_explicit(&t->page->placing, 0, memory_order_release);
	/*
	 * Whole WQEs only: one the copy stopped in (a page the target unmapped under its
	 * registration) goes as a frame, and the frame path says what a responder says then.
	 * What was written of it lies in the registered range (a WRITE's in the target's, a
	 * READ's in our own region).
	 */
	for (placed = 0; placed < n && done > 0; placed++) {
		uint64_t len = run->wqe[placed]->length;

		if ((uint64_t)done - whole < len)
			break;
		whole += len;
		words += counter_packet_words(DIRECT_REQUEST_HDR, read ? 0 : len);
		counter_packet(&qp->counters, EMU_CNT_XMIT_DATA, DIRECT_REQUEST_HDR, read ? 0 : len);
		if (read) {
			answered_words += counter_packet_words(DIRECT_RESPONSE_HDR, len);
			counter_packet(&qp->counters, EMU_CNT_RCV_DATA, DIRECT_RESPONSE_HDR, len);
		}
	}
	qp_counter_add(&qp->counters, read ? EMU_CNT_DIRECT_READS : EMU_CNT_DIRECT_WRITES, placed);
	atomic_fetch_add_explicit(&t->page->placed, placed, memory_order_relaxed);
	atomic_fetch_add_explicit(&t->page->placed_words, words, memory_order_relaxed);
	if (read) {
		atomic_fetch_add_explicit(&t->page->answered, placed, memory_order_relaxed);
		atomic_fetch_add_explicit(&t->page->answered_words, answered_words,
					  memory_order_relaxed);
	}
	return placed;
}
