// SPDX-License-Identifier: MIT
/*
 * Memory-key table of the emulated NIC.
 *
 * Regions live in a fixed array of slots allocated with the table, so a
 * lookup never follows a pointer that can be freed.  Each slot has one atomic
 * control word holding its current key, a live bit and a reference count.  A
 * lookup takes a reference with a single compare-and-swap that succeeds only
 * while the slot is live under exactly the key asked for; clearing the live
 * bit therefore kills the key for every later lookup at once.  Attributes are
 * written only while the slot is not live and holds no reference, and are
 * published by the release store that sets the live bit.
 *
 * A key is ((slot ^ secret) << tag_bits) | tag.  The slot is drawn at random
 * from the free slots, the secret is per table and the tag is random, nonzero
 * and differs from the slot's previous tag, so knowing one key says nothing
 * about the next one and a stale key never matches the slot's next key.
 */
#define _GNU_SOURCE

#include "emu/mr.h"
#include "emu/direct.h"
#include "emu/odp.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define CTL_LIVE	(1ull << 32)
#define CTL_REF_SHIFT	33
#define CTL_REF_ONE	(1ull << CTL_REF_SHIFT)

#define ATOMIC_LENGTH	8u

/* Kernel uAPI bits (IB_UVERBS_ACCESS_FLUSH_*) that rdma-core 44 does not name. */
#define MR_ACCESS_FLUSH_GLOBAL		(1u << 8)
#define MR_ACCESS_FLUSH_PERSISTENT	(1u << 9)

/* IB_ACCESS_SUPPORTED of include/rdma/ib_verbs.h. */
#define MR_ACCESS_KNOWN	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |		\
			 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |		\
			 IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |			\
			 IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB |			\
			 MR_ACCESS_FLUSH_GLOBAL | MR_ACCESS_FLUSH_PERSISTENT |		\
			 IBV_ACCESS_OPTIONAL_RANGE)

#define MR_ACCESS_UNSUPPORTED	(IBV_ACCESS_ZERO_BASED | MR_ACCESS_FLUSH_GLOBAL |	\
				 MR_ACCESS_FLUSH_PERSISTENT)

struct mem_table {
	pthread_mutex_t	lock;		/* free slots, state changes, rnd */
	pthread_cond_t	drained;	/* a dead region lost its last reference */
	uint32_t	nslots;
	uint32_t	nfree;
	uint32_t	max_regions, nregions;	/* MRs */
	uint32_t	max_windows, nwindows;	/* memory windows */
	uint32_t	*free_slots;
	uint32_t	secret;
	unsigned int	tag_bits;
	uint64_t	page_mask;
	unsigned int	rnd_left;
	uint8_t		rnd[128];
	struct direct_keys *direct;	/* the keys as same-host requesters see them, or NULL */
	struct mem_region slots[];
};

static int fill_random(uint8_t *buf, size_t len)
{
	while (len) {
		ssize_t n = getrandom(buf, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Called with t->lock held (or before the table is shared). */
static int mem_random(struct mem_table *t, uint64_t *out)
{
	int err;

	if (t->rnd_left < sizeof(*out)) {
		err = fill_random(t->rnd, sizeof(t->rnd));
		if (err)
			return err;
		t->rnd_left = sizeof(t->rnd);
	}
	memcpy(out, t->rnd + sizeof(t->rnd) - t->rnd_left, sizeof(*out));
	memset(t->rnd + sizeof(t->rnd) - t->rnd_left, 0, sizeof(*out));
	t->rnd_left -= sizeof(*out);
	return 0;
}

static uint32_t key_make(const struct mem_table *t, uint32_t slot, uint32_t tag)
{
	return ((slot ^ t->secret) << t->tag_bits) | tag;
}

static uint32_t key_slot(const struct mem_table *t, uint32_t key)
{
	return (key >> t->tag_bits) ^ t->secret;
}

int mem_table_create(struct mem_table **out, uint32_t max_regions, uint32_t max_windows)
{
	struct mem_table *t;
	unsigned int index_bits = 1;
	long page_size = sysconf(_SC_PAGESIZE);
	uint32_t nslots = max_regions + max_windows;
	uint64_t r;
	uint32_t i;
	int err;

	*out = NULL;
	if (!max_regions || max_regions > MEM_TABLE_MAX_REGIONS ||
	    max_windows > MEM_TABLE_MAX_REGIONS - max_regions)
		return EINVAL;
	while ((1u << index_bits) < nslots)
		index_bits++;

	t = calloc(1, sizeof(*t) + (size_t)nslots * sizeof(t->slots[0]));
	if (!t)
		return ENOMEM;
	t->free_slots = malloc((size_t)nslots * sizeof(t->free_slots[0]));
	if (!t->free_slots) {
		free(t);
		return ENOMEM;
	}
	err = mem_random(t, &r);
	if (err) {
		free(t->free_slots);
		free(t);
		return err;
	}
	t->nslots = nslots;
	t->nfree = nslots;
	t->max_regions = max_regions;
	t->max_windows = max_windows;
	t->tag_bits = 32 - index_bits;
	t->secret = (uint32_t)r & ((1u << index_bits) - 1);
	t->page_mask = (uint64_t)(page_size > 0 ? page_size : 4096) - 1;
	for (i = 0; i < nslots; i++) {
		t->free_slots[i] = i;
		atomic_init(&t->slots[i].ctl, 0);
	}
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->drained, NULL);
	t->direct = direct_keys_create(nslots, t->tag_bits, t->secret);
	*out = t;
	return 0;
}

struct direct_keys *mem_table_direct(const struct mem_table *t)
{
	return t->direct;
}

void mem_table_destroy(struct mem_table *t)
{
	if (!t)
		return;
	direct_keys_destroy(t->direct);
	pthread_cond_destroy(&t->drained);
	pthread_mutex_destroy(&t->lock);
	free(t->free_slots);
	free(t);
}

int mr_check_access_flags(int access)
{
	unsigned int flags = (unsigned int)access;

	/* ib_check_mr_access(): remote writers must be able to write locally. */
	if ((flags & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(flags & IBV_ACCESS_LOCAL_WRITE))
		return EINVAL;
	if (flags & ~(unsigned int)MR_ACCESS_KNOWN)
		return EINVAL;
	if (flags & MR_ACCESS_UNSUPPORTED)
		return EOPNOTSUPP;
	return 0;
}

/* ib_uverbs_reg_mr() refuses an iova whose page offset differs from addr's. */
static int mem_check_translation(const struct mem_table *t, const void *addr,
				 uint64_t length, uint64_t iova)
{
	uintptr_t start = (uintptr_t)addr;

	if (length > UINTPTR_MAX - start || length > UINT64_MAX - iova)
		return EINVAL;
	if (((uint64_t)start ^ iova) & t->page_mask)
		return EINVAL;
	if (!addr && length)
		return EFAULT;
	return 0;
}

static bool mem_owns(const struct mem_table *t, const struct mem_region *mr)
{
	uintptr_t first = (uintptr_t)t->slots;
	uintptr_t p = (uintptr_t)mr;

	return p >= first && p - first < (uintptr_t)t->nslots * sizeof(*mr) &&
	       (p - first) % sizeof(*mr) == 0;
}

/* Called with t->lock held and the live bit clear, so no reference can be added. */
static void mem_wait_unreferenced(struct mem_table *t, struct mem_region *mr)
{
	while (atomic_load_explicit(&mr->ctl, memory_order_acquire) >> CTL_REF_SHIFT)
		pthread_cond_wait(&t->drained, &t->lock);
}

/*
 * Takes a random free slot for a region or a window and gives it a fresh key, not yet live.
 * Called with t->lock held.
 */
static int mem_claim(struct mem_table *t, enum mem_kind kind, struct mem_region **out)
{
	uint32_t *count = kind == MEM_KIND_WINDOW ? &t->nwindows : &t->nregions;
	uint32_t max = kind == MEM_KIND_WINDOW ? t->max_windows : t->max_regions;
	uint32_t tag_mask, old_tag, tag, pick, slot;
	struct mem_region *mr;
	uint64_t r;
	int err;

	if (*count >= max || !t->nfree)
		return ENOMEM;
	err = mem_random(t, &r);
	if (err)
		return err;
	pick = (uint32_t)(r % t->nfree);
	slot = t->free_slots[pick];
	mr = &t->slots[slot];

	tag_mask = (uint32_t)((1ull << t->tag_bits) - 1);
	old_tag = (uint32_t)atomic_load_explicit(&mr->ctl, memory_order_relaxed) & tag_mask;
	do {
		err = mem_random(t, &r);
		if (err)
			return err;
		tag = (uint32_t)r & tag_mask;
	} while (!tag || tag == old_tag);

	t->free_slots[pick] = t->free_slots[--t->nfree];
	(*count)++;
	mr->kind = kind;
	mr->lkey = key_make(t, slot, tag);
	mr->rkey = mr->lkey;
	mr->table = t;
	atomic_store_explicit(&mr->ctl, mr->lkey, memory_order_relaxed);
	*out = mr;
	return 0;
}

/* Gives an unreferenced, dead slot back; its key stays in ctl for the next tag draw. */
static void mem_release(struct mem_table *t, struct mem_region *mr)
{
	if (mr->kind == MEM_KIND_WINDOW)
		t->nwindows--;
	else
		t->nregions--;
	mr->kind = MEM_KIND_FREE;
	mr->host_addr = NULL;
	mr->length = 0;
	mr->access = 0;
	mr->target = NULL;
	t->free_slots[t->nfree++] = (uint32_t)(mr - t->slots);
}

int mr_register(struct mem_table *t, uint32_t pd_handle, void *addr,
		uint64_t length, uint64_t iova, int access,
		struct mem_region **out)
{
	struct mem_region *mr;
	int err;

	*out = NULL;
	err = mr_check_access_flags(access);
	if (err)
		return err;
	if (!length)
		return EINVAL;	/* ib_umem_get() refuses an empty range, as rxe and mlx5 do */
	if (mr_is_implicit_odp(addr, length, access)) {
		/* mlx5's create_user_odp_mr() and ib_umem_odp_alloc_implicit(). */
		if (iova || (access & IBV_ACCESS_HUGETLB))
			return EINVAL;
	} else {
		err = mem_check_translation(t, addr, length, iova);
		if (err)
			return err;
	}

	pthread_mutex_lock(&t->lock);
	err = mem_claim(t, MEM_KIND_REGION, &mr);
	if (!err) {
		mr->iova = iova;
		mr->length = length;
		mr->host_addr = addr;
		mr->access = access;
		mr->pd_handle = pd_handle;
		atomic_store_explicit(&mr->ctl, mr->lkey | CTL_LIVE, memory_order_release);
		direct_key_publish(t->direct, (uint32_t)(mr - t->slots), mr);
		*out = mr;
	}
	pthread_mutex_unlock(&t->lock);
	return err;
}

int mr_reregister(struct mem_table *t, struct mem_region *mr, int flags,
		  uint32_t pd_handle, void *addr, uint64_t length,
		  uint64_t iova, int access)
{
	uint64_t ctl;
	int err;

	/* The checks ib_uverbs_rereg_mr() makes before calling the driver. */
	if (!flags || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED))
		return EINVAL;
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		if (!addr || !iova || !length)
			return EINVAL;
		err = mem_check_translation(t, addr, length, iova);
		if (err)
			return err;
	}
	if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
		err = mr_check_access_flags(access);
		if (err)
			return err;
	}

	pthread_mutex_lock(&t->lock);
	if (!mem_owns(t, mr) || mr->kind != MEM_KIND_REGION) {
		pthread_mutex_unlock(&t->lock);
		return EINVAL;
	}
	ctl = atomic_load_explicit(&mr->ctl, memory_order_relaxed);
	if (!(ctl & CTL_LIVE)) {
		pthread_mutex_unlock(&t->lock);
		return EINVAL;
	}
	/* Pinned, the whole address space would be read and written without a fault-in. */
	if ((flags & IBV_REREG_MR_CHANGE_ACCESS) && !(access & IBV_ACCESS_ON_DEMAND) &&
	    !(flags & IBV_REREG_MR_CHANGE_TRANSLATION) &&
	    mr_is_implicit_odp(mr->host_addr, mr->length, mr->access)) {
		pthread_mutex_unlock(&t->lock);
		return EINVAL;
	}
	/*
	 * Swap attributes as dereg + reg under the same key: an access racing
	 * with us runs wholly under the old attributes, wholly under the new
	 * ones, or finds the key dead in between.
	 */
	atomic_fetch_and_explicit(&mr->ctl, ~CTL_LIVE, memory_order_acq_rel);
	mem_wait_unreferenced(t, mr);
	direct_key_retract(t->direct, (uint32_t)(mr - t->slots));
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		mr->host_addr = addr;
		mr->length = length;
		mr->iova = iova;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD)
		mr->pd_handle = pd_handle;
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		mr->access = access;
	atomic_store_explicit(&mr->ctl, mr->lkey | CTL_LIVE, memory_order_release);
	direct_key_publish(t->direct, (uint32_t)(mr - t->slots), mr);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

int mr_deregister(struct mem_table *t, struct mem_region *mr)
{
	pthread_mutex_lock(&t->lock);
	if (!mem_owns(t, mr) || mr->kind != MEM_KIND_REGION ||
	    !(atomic_load_explicit(&mr->ctl, memory_order_relaxed) & CTL_LIVE)) {
		pthread_mutex_unlock(&t->lock);
		return EINVAL;
	}
	/* Windows bound to it die with it: their lookups find its key dead. */
	atomic_fetch_and_explicit(&mr->ctl, ~CTL_LIVE, memory_order_acq_rel);
	mem_wait_unreferenced(t, mr);
	direct_key_retract(t->direct, (uint32_t)(mr - t->slots));
	mem_release(t, mr);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

/* Hot path: one load and one compare-and-swap, no lock, no allocation. */
static struct mem_region *mem_get(struct mem_table *t, uint32_t key)
{
	uint32_t slot = key_slot(t, key);
	struct mem_region *mr;
	uint64_t ctl;

	if (slot >= t->nslots)
		return NULL;
	mr = &t->slots[slot];
	ctl = atomic_load_explicit(&mr->ctl, memory_order_relaxed);
	do {
		if (!(ctl & CTL_LIVE) || (uint32_t)ctl != key)
			return NULL;
	} while (!atomic_compare_exchange_weak_explicit(&mr->ctl, &ctl, ctl + CTL_REF_ONE,
							memory_order_acquire,
							memory_order_relaxed));
	return mr;
}

/* Drops the one reference mem_get() took on this slot. */
static void mem_put(struct mem_region *mr)
{
	/* Read before dropping the reference: afterwards the slot may be reused. */
	struct mem_table *t = mr->table;
	uint64_t old = atomic_fetch_sub_explicit(&mr->ctl, CTL_REF_ONE, memory_order_release);

	if ((old >> CTL_REF_SHIFT) == 1 && !(old & CTL_LIVE)) {
		pthread_mutex_lock(&t->lock);
		pthread_cond_broadcast(&t->drained);
		pthread_mutex_unlock(&t->lock);
	}
}

void mr_put(struct mem_region *mr)
{
	/* A window's check holds its region too; target is stable while the window is held. */
	if (mr->kind == MEM_KIND_WINDOW)
		mem_put(mr->target);
	mem_put(mr);
}

/* Overflow-safe: [iova, iova + length) inside [mr->iova, mr->iova + mr->length). */
static bool mem_range_ok(const struct mem_region *mr, uint64_t iova, uint64_t length)
{
	return iova >= mr->iova && length <= mr->length &&
	       iova - mr->iova <= mr->length - length;
}

/*
 * Where iova lies in this process. In integers: the implicit ODP region's host_addr is
 * NULL, and an offset from a null pointer is undefined in C.
 */
static void *mem_host(const struct mem_region *mr, uint64_t iova)
{
	return (void *)((uintptr_t)mr->host_addr + (uintptr_t)(iova - mr->iova));
}

/*
 * An ODP region's pages are faulted in as the NIC would on first touch, writable if the
 * access writes; one that cannot be (unmapped, PROT_NONE, read-only for a write) fails the
 * access here instead of faulting the process later. A pinned region costs one bit test.
 */
static bool mem_present(const struct mem_region *mr, uint64_t iova, uint64_t length,
			int needed)
{
	if (!(mr->access & IBV_ACCESS_ON_DEMAND) || !length)
		return true;
	return odp_fault_in(mem_host(mr, iova), length,
			    needed & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				      IBV_ACCESS_REMOTE_ATOMIC));
}

/*
 * A window narrows its region: the window's PD, QP (type 2), rights and range decide, then
 * the region it is bound to must still be registered under the same key and hold the
 * range. On success the caller holds both slots (mr_put() drops both).
 */
/* For the log: what a refused key named, read while its reference is held. */
static void describe(struct mem_refusal *why, const struct mem_region *mr)
{
	if (!why)
		return;
	why->found = true;
	why->kind = mr->kind;
	why->iova = mr->iova;
	why->length = mr->length;
	why->pd_handle = mr->pd_handle;
	why->access = mr->access;
	why->mw_type = mr->mw_type;
	why->qpn = mr->qpn;
}

static enum mem_access_result window_lookup(struct mem_table *t, struct mem_region *w,
					    uint32_t pd_handle, uint32_t qpn, int needed,
					    uint64_t iova, uint64_t length,
					    struct mem_region **mr_ref, void **host_ptr,
					    struct mem_refusal *why)
{
	enum mem_access_result res;
	struct mem_region *mr = NULL;

	if (w->pd_handle != pd_handle)
		res = MEM_ACCESS_PD_MISMATCH;
	else if (w->mw_type == IBV_MW_TYPE_2 && w->qpn != qpn)
		res = MEM_ACCESS_MW_QP;		/* type 2B: only through the QP it was bound on */
	else if ((w->access & needed) != needed)
		res = MEM_ACCESS_NO_RIGHT;
	else if (!mem_range_ok(w, iova, length))
		res = MEM_ACCESS_OUT_OF_BOUNDS;
	else if (!(mr = mem_get(t, w->target_key)) || mr->kind != MEM_KIND_REGION)
		res = MEM_ACCESS_BAD_KEY;	/* its region is gone: so is the window */
	else if (mr->pd_handle != pd_handle)
		res = MEM_ACCESS_PD_MISMATCH;
	else if ((needed & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
		 !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		res = MEM_ACCESS_NO_RIGHT;	/* C10-74, should the region have been changed */
	else if (!mem_range_ok(mr, iova, length))
		res = MEM_ACCESS_OUT_OF_BOUNDS;
	else if (!mem_present(mr, iova, length, needed))
		res = MEM_ACCESS_PAGE_FAULT;
	else {
		*mr_ref = w;
		*host_ptr = mem_host(mr, iova);
		return MEM_ACCESS_OK;
	}
	describe(why, mr ? mr : w);	/* the region, if the window's own checks passed */
	if (mr)
		mem_put(mr);
	mem_put(w);
	return res;
}

/* rxe's lookup_mr() (or lookup_mw() for a remote key) followed by mr_check_range(). */
static enum mem_access_result mem_lookup(struct mem_table *t, uint32_t key,
					 uint32_t pd_handle, uint32_t qpn, bool remote,
					 int needed, uint64_t iova, uint64_t length,
					 struct mem_region **mr_ref, void **host_ptr,
					 struct mem_refusal *why)
{
	enum mem_access_result res;
	struct mem_region *mr = mem_get(t, key);

	if (!mr)
		return MEM_ACCESS_BAD_KEY;
	if (mr->kind == MEM_KIND_WINDOW) {
		if (remote)
			return window_lookup(t, mr, pd_handle, qpn, needed, iova, length,
					     mr_ref, host_ptr, why);
		res = MEM_ACCESS_BAD_KEY;	/* a window's key is an rkey, never an lkey */
	} else if (mr->pd_handle != pd_handle) {
		res = MEM_ACCESS_PD_MISMATCH;
	} else if ((mr->access & needed) != needed) {
		res = MEM_ACCESS_NO_RIGHT;
	} else if (!mem_range_ok(mr, iova, length)) {
		res = MEM_ACCESS_OUT_OF_BOUNDS;
	} else if (!mem_present(mr, iova, length, needed)) {
		res = MEM_ACCESS_PAGE_FAULT;
	} else {
		*mr_ref = mr;
		*host_ptr = mem_host(mr, iova);
		return MEM_ACCESS_OK;
	}
	describe(why, mr);
	mem_put(mr);
	return res;
}

/* Whether key is a window's, bound or not (an unbound window's key opens nothing). */
static bool window_key(struct mem_table *t, uint32_t key)
{
	uint32_t slot = key_slot(t, key);
	bool found;

	if (slot >= t->nslots)
		return false;
	pthread_mutex_lock(&t->lock);
	found = t->slots[slot].kind == MEM_KIND_WINDOW &&
		(uint32_t)atomic_load_explicit(&t->slots[slot].ctl, memory_order_relaxed) == key;
	pthread_mutex_unlock(&t->lock);
	return found;
}

int mr_advice_target(struct mem_table *t, uint32_t lkey, uint32_t pd_handle, bool write,
		     uint64_t addr, uint64_t length, struct mem_region **mr_ref, void **host_ptr)
{
	struct mem_region *mr = mem_get(t, lkey);
	int err;

	*mr_ref = NULL;
	if (!mr)
		return window_key(t, lkey) ? EINVAL : ENOENT;
	if (mr->kind == MEM_KIND_WINDOW)
		err = EINVAL;		/* a key, but of something else than a region */
	else if (!(mr->access & IBV_ACCESS_ON_DEMAND))
		err = ENOENT;		/* mlx5 looks among its ODP keys only */
	else if (mr->pd_handle != pd_handle)
		err = EPERM;
	else if (write && !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		err = EPERM;
	else if (!mem_range_ok(mr, addr, length))
		err = EFAULT;
	else {
		*mr_ref = mr;
		*host_ptr = mem_host(mr, addr);
		return 0;
	}
	mem_put(mr);
	return err;
}

enum mem_access_result mr_check_remote_access(struct mem_table *t, uint32_t rkey,
					      uint32_t qp_pd_handle, uint32_t qpn,
					      int qp_access_flags, int needed,
					      uint64_t iova, uint64_t length,
					      struct mem_region **mr_ref,
					      void **host_ptr)
{
	return mr_check_remote_access_why(t, rkey, qp_pd_handle, qpn, qp_access_flags, needed,
					  iova, length, mr_ref, host_ptr, NULL);
}

enum mem_access_result mr_check_remote_access_why(struct mem_table *t, uint32_t rkey,
						  uint32_t qp_pd_handle, uint32_t qpn,
						  int qp_access_flags, int needed,
						  uint64_t iova, uint64_t length,
						  struct mem_region **mr_ref,
						  void **host_ptr, struct mem_refusal *why)
{
	enum mem_access_result res;

	if (why)
		why->found = false;
	*mr_ref = NULL;
	*host_ptr = NULL;

	/*
	 * rxe's check_op_valid() runs before anything looks at the key.  A
	 * request that maps to no single remote right is an opcode the QP
	 * cannot serve, which rxe also answers with "invalid request".
	 */
	if (needed != IBV_ACCESS_REMOTE_WRITE && needed != IBV_ACCESS_REMOTE_READ &&
	    needed != IBV_ACCESS_REMOTE_ATOMIC)
		return MEM_ACCESS_QP_NO_RIGHT;
	if (!(qp_access_flags & needed))
		return MEM_ACCESS_QP_NO_RIGHT;

	if (needed == IBV_ACCESS_REMOTE_ATOMIC) {
		if (length != ATOMIC_LENGTH)
			return MEM_ACCESS_MISALIGNED;
	} else if (!length) {
		/* C9-88: a zero-length RDMA op carries no meaningful rkey. */
		return MEM_ACCESS_OK;
	}

	res = mem_lookup(t, rkey, qp_pd_handle, qpn, true, needed, iova, length, mr_ref,
			 host_ptr, why);

	/*
	 * rxe_mr_do_atomic_op() tests alignment only after the key and range
	 * passed.  iova and host address share their page offset (register
	 * enforces it), so testing iova also tests the host word.
	 */
	if (res == MEM_ACCESS_OK && needed == IBV_ACCESS_REMOTE_ATOMIC &&
	    (iova & (ATOMIC_LENGTH - 1))) {
		describe(why, *mr_ref);
		mr_put(*mr_ref);
		*mr_ref = NULL;
		*host_ptr = NULL;
		res = MEM_ACCESS_MISALIGNED;
	}
	return res;
}

enum mem_access_result mr_check_local_access(struct mem_table *t, uint32_t lkey,
					     uint32_t pd_handle, int needed,
					     uint64_t addr, uint64_t length,
					     struct mem_region **mr_ref,
					     void **host_ptr)
{
	*mr_ref = NULL;
	*host_ptr = NULL;

	/* rxe's copy_data() skips zero-length SGEs without a lookup. */
	if (!length)
		return MEM_ACCESS_OK;
	return mem_lookup(t, lkey, pd_handle, 0, false, needed, addr, length, mr_ref, host_ptr,
			  NULL);
}

int mw_alloc(struct mem_table *t, uint32_t pd_handle, enum ibv_mw_type type,
	     struct mem_region **out)
{
	struct mem_region *w;
	int err;

	*out = NULL;
	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)
		return EINVAL;
	pthread_mutex_lock(&t->lock);
	err = mem_claim(t, MEM_KIND_WINDOW, &w);
	if (!err) {
		/* Not live until bound: until then its key opens nothing. */
		w->mw_type = (uint8_t)type;
		w->bound = false;
		w->pd_handle = pd_handle;
		w->iova = 0;
		w->length = 0;
		w->access = 0;
		w->target = NULL;
		*out = w;
	}
	pthread_mutex_unlock(&t->lock);
	return err;
}

/* Kills the window's key, waits for accesses through it, and leaves it unbound. */
static void window_unbind(struct mem_table *t, struct mem_region *w)
{
	atomic_fetch_and_explicit(&w->ctl, ~CTL_LIVE, memory_order_acq_rel);
	mem_wait_unreferenced(t, w);
	w->bound = false;
	w->target = NULL;
	w->iova = 0;
	w->length = 0;
	w->access = 0;
}

int mw_dealloc(struct mem_table *t, struct mem_region *w)
{
	pthread_mutex_lock(&t->lock);
	if (!mem_owns(t, w) || w->kind != MEM_KIND_WINDOW) {
		pthread_mutex_unlock(&t->lock);
		return EINVAL;
	}
	window_unbind(t, w);
	mem_release(t, w);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

/* The rights a window can grant; LOCAL_WRITE means nothing on a window but is tolerated. */
#define MW_ACCESS_SUPPORTED	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |	\
				 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE)

/* The live region with this key, for a caller holding t->lock (so it cannot change). */
static struct mem_region *region_locked(struct mem_table *t, uint32_t key)
{
	uint32_t slot = key_slot(t, key);
	uint64_t ctl;

	if (slot >= t->nslots || t->slots[slot].kind != MEM_KIND_REGION)
		return NULL;
	ctl = atomic_load_explicit(&t->slots[slot].ctl, memory_order_relaxed);
	return (ctl & CTL_LIVE) && (uint32_t)ctl == key ? &t->slots[slot] : NULL;
}

/* rxe_check_bind_mw()'s rules, with the IBTA's numbers. */
static int check_bind(struct mem_table *t, const struct mem_region *w,
		      const struct mw_bind_req *b, struct mem_region **target)
{
	const struct mem_region *mr = NULL;

	if (b->access & ~MW_ACCESS_SUPPORTED)
		return EINVAL;	/* ZERO_BASED among them: not built */
	if (w->mw_type == IBV_MW_TYPE_2) {
		if (w->bound)
			return EINVAL;	/* o10-37.2.30: invalidate it first */
		if (b->qp_pd_handle != w->pd_handle)
			return EINVAL;	/* C10-72 */
		/* o10-37.2.40: a type 2 window is unbound by invalidation, not by a bind. */
		if (!b->has_mr || !b->length)
			return EINVAL;
	}
	*target = NULL;
	if (!b->has_mr || !b->length)
		return 0;	/* type 1: unbinds it */
	mr = region_locked(t, b->mr_lkey);
	if (!mr || mr->pd_handle != w->pd_handle)
		return EINVAL;
	if (!(mr->access & IBV_ACCESS_MW_BIND))
		return EINVAL;	/* C10-73 */
	if ((b->access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		return EINVAL;	/* C10-74 */
	if (!mem_range_ok(mr, b->addr, b->length))
		return EINVAL;	/* C10-75 */
	*target = (struct mem_region *)mr;
	return 0;
}

int mw_bind(struct mem_table *t, struct mem_region *w, const struct mw_bind_req *b)
{
	struct mem_region *mr;
	int err;

	pthread_mutex_lock(&t->lock);
	if (!mem_owns(t, w) || w->kind != MEM_KIND_WINDOW) {
		pthread_mutex_unlock(&t->lock);
		return EINVAL;
	}
	err = check_bind(t, w, b, &mr);
	if (!err) {
		/*
		 * The consumer owns the low 8 bits of the key and nothing else: the rest of the
		 * new key is ignored, as rxe_do_bind_mw() and mlx5 do.
		 */
		uint32_t key = ((uint32_t)atomic_load_explicit(&w->ctl, memory_order_relaxed) &
				~(uint32_t)MW_KEY_MASK) | (b->new_rkey & MW_KEY_MASK);

		/* Accesses under the old binding finish first; none starts under a mix. */
		window_unbind(t, w);
		w->lkey = key;
		w->rkey = key;
		if (mr) {
			/*
			 * The key checked above, not mr->lkey: waiting let go of the lock, and a
			 * region deregistered meanwhile must stay dead to the window.
			 */
			w->bound = true;
			w->target = mr;
			w->target_key = b->mr_lkey;
			w->iova = b->addr;
			w->length = b->length;
			w->access = b->access;
			w->qpn = b->qpn;
		}
		atomic_store_explicit(&w->ctl, w->rkey | (mr ? CTL_LIVE : 0),
				      memory_order_release);
	}
	pthread_mutex_unlock(&t->lock);
	return err;
}

int mw_invalidate(struct mem_table *t, uint32_t rkey, uint32_t pd_handle, bool from_wire,
		  uint32_t qpn)
{
	uint32_t slot = key_slot(t, rkey);
	struct mem_region *w;
	int err = EINVAL;

	if (slot >= t->nslots)
		return EINVAL;
	w = &t->slots[slot];
	pthread_mutex_lock(&t->lock);
	/*
	 * Only a bound type 2 window of this PD, under its current key (o10-37.2.26: type 1
	 * is unbound by binding it again); from the wire, only through the QP it is bound on.
	 */
	if (w->kind == MEM_KIND_WINDOW && w->mw_type == IBV_MW_TYPE_2 && w->bound &&
	    (uint32_t)atomic_load_explicit(&w->ctl, memory_order_relaxed) == rkey &&
	    w->pd_handle == pd_handle && (!from_wire || w->qpn == qpn)) {
		window_unbind(t, w);
		err = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return err;
}

/* rxe_responder(): RKEY_VIOLATION NAKs "remote access", the rest "invalid request". */
static const enum ibv_wc_status remote_wc_status[] = {
	[MEM_ACCESS_OK]			= IBV_WC_SUCCESS,
	[MEM_ACCESS_BAD_KEY]		= IBV_WC_REM_ACCESS_ERR,
	[MEM_ACCESS_PD_MISMATCH]	= IBV_WC_REM_ACCESS_ERR,
	[MEM_ACCESS_NO_RIGHT]		= IBV_WC_REM_ACCESS_ERR,
	[MEM_ACCESS_OUT_OF_BOUNDS]	= IBV_WC_REM_ACCESS_ERR,
	[MEM_ACCESS_MISALIGNED]		= IBV_WC_REM_INV_REQ_ERR,
	[MEM_ACCESS_QP_NO_RIGHT]	= IBV_WC_REM_INV_REQ_ERR,
	[MEM_ACCESS_PEER_FAULT]		= IBV_WC_REM_OP_ERR,
	[MEM_ACCESS_MW_QP]		= IBV_WC_REM_ACCESS_ERR,
	[MEM_ACCESS_PAGE_FAULT]		= IBV_WC_REM_ACCESS_ERR,	/* rxe: RKEY_VIOLATION */
};

/* mr_check_local_access() yields the first five and PAGE_FAULT; the rest never occur. */
static const enum ibv_wc_status local_wc_status[] = {
	[MEM_ACCESS_OK]			= IBV_WC_SUCCESS,
	[MEM_ACCESS_BAD_KEY]		= IBV_WC_LOC_PROT_ERR,
	[MEM_ACCESS_PD_MISMATCH]	= IBV_WC_LOC_PROT_ERR,
	[MEM_ACCESS_NO_RIGHT]		= IBV_WC_LOC_PROT_ERR,
	[MEM_ACCESS_OUT_OF_BOUNDS]	= IBV_WC_LOC_PROT_ERR,
	[MEM_ACCESS_MISALIGNED]		= IBV_WC_LOC_PROT_ERR,
	[MEM_ACCESS_QP_NO_RIGHT]	= IBV_WC_LOC_PROT_ERR,
	[MEM_ACCESS_PEER_FAULT]		= IBV_WC_LOC_QP_OP_ERR,
	[MEM_ACCESS_MW_QP]		= IBV_WC_LOC_PROT_ERR,
	[MEM_ACCESS_PAGE_FAULT]		= IBV_WC_LOC_PROT_ERR,
};

static const char *const rule_names[] = {
	[MEM_ACCESS_OK]			= "none",
	[MEM_ACCESS_BAD_KEY]		= "wrong key",
	[MEM_ACCESS_PD_MISMATCH]	= "PD mismatch",
	[MEM_ACCESS_NO_RIGHT]		= "MR rights",
	[MEM_ACCESS_OUT_OF_BOUNDS]	= "out of range",
	[MEM_ACCESS_MISALIGNED]		= "atomic alignment",
	[MEM_ACCESS_QP_NO_RIGHT]	= "QP rights",
	[MEM_ACCESS_PEER_FAULT]		= "peer memory gone",
	[MEM_ACCESS_MW_QP]		= "MW binding",
	[MEM_ACCESS_PAGE_FAULT]		= "page fault",
};

const char *mem_access_rule(enum mem_access_result r)
{
	if ((unsigned int)r >= sizeof(rule_names) / sizeof(rule_names[0]))
		return "unknown";
	return rule_names[r];
}

enum ibv_wc_status mem_access_remote_wc_status(enum mem_access_result r)
{
	if ((unsigned int)r >= sizeof(remote_wc_status) / sizeof(remote_wc_status[0]))
		return IBV_WC_GENERAL_ERR;
	return remote_wc_status[r];
}

enum ibv_wc_status mem_access_local_wc_status(enum mem_access_result r)
{
	if ((unsigned int)r >= sizeof(local_wc_status) / sizeof(local_wc_status[0]))
		return IBV_WC_GENERAL_ERR;
	return local_wc_status[r];
}
