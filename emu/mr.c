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
	uint32_t	*free_slots;
	uint32_t	secret;
	unsigned int	tag_bits;
	uint64_t	page_mask;
	unsigned int	rnd_left;
	uint8_t		rnd[128];
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

int mem_table_create(struct mem_table **out, uint32_t max_regions)
{
	struct mem_table *t;
	unsigned int index_bits = 1;
	long page_size = sysconf(_SC_PAGESIZE);
	uint64_t r;
	uint32_t i;
	int err;

	*out = NULL;
	if (!max_regions || max_regions > MEM_TABLE_MAX_REGIONS)
		return EINVAL;
	while ((1u << index_bits) < max_regions)
		index_bits++;

	t = calloc(1, sizeof(*t) + (size_t)max_regions * sizeof(t->slots[0]));
	if (!t)
		return ENOMEM;
	t->free_slots = malloc((size_t)max_regions * sizeof(t->free_slots[0]));
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
	t->nslots = max_regions;
	t->nfree = max_regions;
	t->tag_bits = 32 - index_bits;
	t->secret = (uint32_t)r & ((1u << index_bits) - 1);
	t->page_mask = (uint64_t)(page_size > 0 ? page_size : 4096) - 1;
	for (i = 0; i < max_regions; i++) {
		t->free_slots[i] = i;
		atomic_init(&t->slots[i].ctl, 0);
	}
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->drained, NULL);
	*out = t;
	return 0;
}

void mem_table_destroy(struct mem_table *t)
{
	if (!t)
		return;
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

int mr_register(struct mem_table *t, uint32_t pd_handle, void *addr,
		uint64_t length, uint64_t iova, int access,
		struct mem_region **out)
{
	uint32_t tag_mask, old_tag, tag, pick, slot;
	struct mem_region *mr;
	uint64_t r;
	int err;

	*out = NULL;
	err = mr_check_access_flags(access);
	if (err)
		return err;
	err = mem_check_translation(t, addr, length, iova);
	if (err)
		return err;

	pthread_mutex_lock(&t->lock);
	if (!t->nfree) {
		err = ENOMEM;
		goto out;
	}
	err = mem_random(t, &r);
	if (err)
		goto out;
	pick = (uint32_t)(r % t->nfree);
	slot = t->free_slots[pick];
	mr = &t->slots[slot];

	tag_mask = (uint32_t)((1ull << t->tag_bits) - 1);
	old_tag = (uint32_t)atomic_load_explicit(&mr->ctl, memory_order_relaxed) & tag_mask;
	do {
		err = mem_random(t, &r);
		if (err)
			goto out;
		tag = (uint32_t)r & tag_mask;
	} while (!tag || tag == old_tag);

	t->free_slots[pick] = t->free_slots[--t->nfree];
	mr->iova = iova;
	mr->length = length;
	mr->host_addr = addr;
	mr->lkey = key_make(t, slot, tag);
	mr->rkey = mr->lkey;
	mr->access = access;
	mr->pd_handle = pd_handle;
	mr->table = t;
	atomic_store_explicit(&mr->ctl, mr->lkey | CTL_LIVE, memory_order_release);
	*out = mr;
out:
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
	if (!mem_owns(t, mr)) {
		pthread_mutex_unlock(&t->lock);
		return EINVAL;
	}
	ctl = atomic_load_explicit(&mr->ctl, memory_order_relaxed);
	if (!(ctl & CTL_LIVE)) {
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
	pthread_mutex_unlock(&t->lock);
	return 0;
}

int mr_deregister(struct mem_table *t, struct mem_region *mr)
{
	uint32_t slot;

	pthread_mutex_lock(&t->lock);
	if (!mem_owns(t, mr) ||
	    !(atomic_load_explicit(&mr->ctl, memory_order_relaxed) & CTL_LIVE)) {
		pthread_mutex_unlock(&t->lock);
		return EINVAL;
	}
	atomic_fetch_and_explicit(&mr->ctl, ~CTL_LIVE, memory_order_acq_rel);
	mem_wait_unreferenced(t, mr);

	/* The old key stays in ctl so the slot's next tag can differ from it. */
	mr->host_addr = NULL;
	mr->length = 0;
	mr->access = 0;
	slot = (uint32_t)(mr - t->slots);
	t->free_slots[t->nfree++] = slot;
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

void mr_put(struct mem_region *mr)
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

/* Overflow-safe: [iova, iova + length) inside [mr->iova, mr->iova + mr->length). */
static bool mem_range_ok(const struct mem_region *mr, uint64_t iova, uint64_t length)
{
	return iova >= mr->iova && length <= mr->length &&
	       iova - mr->iova <= mr->length - length;
}

/* rxe's lookup_mr() followed by mr_check_range(). */
static enum mem_access_result mem_lookup(struct mem_table *t, uint32_t key,
					 uint32_t pd_handle, int needed,
					 uint64_t iova, uint64_t length,
					 struct mem_region **mr_ref, void **host_ptr)
{
	enum mem_access_result res;
	struct mem_region *mr = mem_get(t, key);

	if (!mr)
		return MEM_ACCESS_BAD_KEY;
	if (mr->pd_handle != pd_handle) {
		res = MEM_ACCESS_PD_MISMATCH;
	} else if ((mr->access & needed) != needed) {
		res = MEM_ACCESS_NO_RIGHT;
	} else if (!mem_range_ok(mr, iova, length)) {
		res = MEM_ACCESS_OUT_OF_BOUNDS;
	} else {
		*mr_ref = mr;
		*host_ptr = (char *)mr->host_addr + (iova - mr->iova);
		return MEM_ACCESS_OK;
	}
	mr_put(mr);
	return res;
}

enum mem_access_result mr_check_remote_access(struct mem_table *t, uint32_t rkey,
					      uint32_t qp_pd_handle,
					      int qp_access_flags, int needed,
					      uint64_t iova, uint64_t length,
					      struct mem_region **mr_ref,
					      void **host_ptr)
{
	enum mem_access_result res;

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

	res = mem_lookup(t, rkey, qp_pd_handle, needed, iova, length, mr_ref, host_ptr);

	/*
	 * rxe_mr_do_atomic_op() tests alignment only after the key and range
	 * passed.  iova and host address share their page offset (register
	 * enforces it), so testing iova also tests the host word.
	 */
	if (res == MEM_ACCESS_OK && needed == IBV_ACCESS_REMOTE_ATOMIC &&
	    (iova & (ATOMIC_LENGTH - 1))) {
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
	return mem_lookup(t, lkey, pd_handle, needed, addr, length, mr_ref, host_ptr);
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
};

/* mr_check_local_access() yields only the first five; the rest never occur. */
static const enum ibv_wc_status local_wc_status[] = {
	[MEM_ACCESS_OK]			= IBV_WC_SUCCESS,
	[MEM_ACCESS_BAD_KEY]		= IBV_WC_LOC_PROT_ERR,
	[MEM_ACCESS_PD_MISMATCH]	= IBV_WC_LOC_PROT_ERR,
	[MEM_ACCESS_NO_RIGHT]		= IBV_WC_LOC_PROT_ERR,
	[MEM_ACCESS_OUT_OF_BOUNDS]	= IBV_WC_LOC_PROT_ERR,
	[MEM_ACCESS_MISALIGNED]		= IBV_WC_LOC_PROT_ERR,
	[MEM_ACCESS_QP_NO_RIGHT]	= IBV_WC_LOC_PROT_ERR,
};

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
