// SPDX-License-Identifier: MIT
/* Unit tests for emu/mr.c: the memory-key table and the remote-access check. */
#define _GNU_SOURCE

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "emu/mr.h"

#define PD		7u
#define OTHER_PD	8u
#define LW		IBV_ACCESS_LOCAL_WRITE
#define RW		IBV_ACCESS_REMOTE_WRITE
#define RR		IBV_ACCESS_REMOTE_READ
#define RA		IBV_ACCESS_REMOTE_ATOMIC
#define ALL_RIGHTS	(LW | RW | RR | RA)
#define QP_ALL		(RW | RR | RA)
#define TABLE_SLOTS	16u
#define QPN		0x123400u	/* the QP an access comes through */

static _Alignas(4096) uint8_t buf[8192];

static uint64_t page_size(void)
{
	return (uint64_t)sysconf(_SC_PAGESIZE);
}

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int setup_table(void **state)
{
	struct mem_table *t;

	if (mem_table_create(&t, TABLE_SLOTS, TABLE_SLOTS))
		return -1;
	*state = t;
	return 0;
}

static int teardown_table(void **state)
{
	mem_table_destroy(*state);
	return 0;
}

static struct mem_region *reg(struct mem_table *t, void *addr, uint64_t len, uint64_t iova,
			      int access)
{
	struct mem_region *mr = NULL;

	assert_int_equal(mr_register(t, PD, addr, len, iova, access, &mr), 0);
	assert_non_null(mr);
	return mr;
}

/* Runs the check with a QP of PD that has every remote right, then drops the reference. */
static enum mem_access_result remote(struct mem_table *t, uint32_t key, int needed,
				     uint64_t iova, uint64_t len, void **host)
{
	struct mem_region *ref = (void *)1;
	void *p = (void *)1;
	enum mem_access_result r;

	r = mr_check_remote_access(t, key, PD, QPN, QP_ALL, needed, iova, len, &ref, &p);
	if (r != MEM_ACCESS_OK || !len) {
		assert_null(ref);
		assert_null(p);
	} else {
		assert_non_null(ref);
		assert_int_equal(ref->rkey, key);
		mr_put(ref);
	}
	if (host)
		*host = p;
	return r;
}

static void test_create_rejects_bad_sizes(void **state)
{
	struct mem_table *t = (void *)1;

	(void)state;
	assert_int_equal(mem_table_create(&t, 0, 0), EINVAL);
	assert_null(t);
	assert_int_equal(mem_table_create(&t, MEM_TABLE_MAX_REGIONS + 1, 0), EINVAL);
	assert_int_equal(mem_table_create(&t, 1, 0), 0);
	mem_table_destroy(t);
}

static void test_access_flags_matrix(void **state)
{
	static const struct {
		int flags;
		int expect;
	} cases[] = {
		{ 0, 0 },
		{ LW, 0 },
		{ RR, 0 },
		{ LW | RR, 0 },
		{ RW, EINVAL },
		{ RA, EINVAL },
		{ RW | RR, EINVAL },
		{ RW | RA, EINVAL },
		{ LW | RW, 0 },
		{ LW | RA, 0 },
		{ ALL_RIGHTS, 0 },
		{ IBV_ACCESS_MW_BIND, 0 },
		{ ALL_RIGHTS | IBV_ACCESS_MW_BIND, 0 },
		{ LW | IBV_ACCESS_ON_DEMAND, 0 },
		{ LW | IBV_ACCESS_HUGETLB, 0 },
		{ LW | IBV_ACCESS_RELAXED_ORDERING, 0 },
		{ LW | (1 << 29), 0 },
		{ LW | IBV_ACCESS_ZERO_BASED, EOPNOTSUPP },
		{ LW | (1 << 8), EOPNOTSUPP },
		{ LW | (1 << 9), EOPNOTSUPP },
		{ LW | (1 << 10), EINVAL },
		{ LW | (1 << 19), EINVAL },
		{ LW | (1 << 30), EINVAL },
		{ (int)(1u << 31), EINVAL },
		{ -1, EINVAL },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (mr_check_access_flags(cases[i].flags) != cases[i].expect)
			fail_msg("flags %#x: got %d, want %d", (unsigned int)cases[i].flags,
				 mr_check_access_flags(cases[i].flags), cases[i].expect);
	}
}

static void test_register_rejects_bad_flags(void **state)
{
	struct mem_region *mr = (void *)1;

	assert_int_equal(mr_register(*state, PD, buf, 64, (uintptr_t)buf, RW, &mr), EINVAL);
	assert_null(mr);
	assert_int_equal(mr_register(*state, PD, buf, 64, (uintptr_t)buf,
				     LW | IBV_ACCESS_ZERO_BASED, &mr), EOPNOTSUPP);
}

static void test_register_rejects_bad_translation(void **state)
{
	struct mem_table *t = *state;
	struct mem_region *mr;
	uint64_t pg = page_size();

	/* addr and iova must share their page offset, as ib_uverbs_reg_mr() demands. */
	assert_int_equal(mr_register(t, PD, buf, 64, (uintptr_t)buf + 8, LW, &mr), EINVAL);
	assert_int_equal(mr_register(t, PD, buf, 64, ((uintptr_t)buf + pg) | 1, LW, &mr), EINVAL);
	assert_int_equal(mr_register(t, PD, buf, UINT64_MAX, (uintptr_t)buf, LW, &mr), EINVAL);
	assert_int_equal(mr_register(t, PD, buf, 2 * pg, UINT64_MAX - pg + 1, LW, &mr), EINVAL);
	assert_int_equal(mr_register(t, PD, NULL, 64, 0, LW, &mr), EFAULT);
}

static void test_keys_unique_and_unpredictable(void **state)
{
	enum { N = 1000 };
	struct mem_table *t;
	struct mem_region *mr[N];
	uint32_t keys[N];
	int64_t delta;
	bool constant = true, increasing = true;
	int i, j;

	(void)state;
	assert_int_equal(mem_table_create(&t, 1024, 0), 0);
	for (i = 0; i < N; i++) {
		mr[i] = reg(t, buf, 64, (uintptr_t)buf, LW);
		keys[i] = mr[i]->lkey;
		assert_int_equal(mr[i]->rkey, keys[i]);
		assert_int_not_equal(keys[i], 0);
	}
	for (i = 0; i < N; i++)
		for (j = i + 1; j < N; j++)
			if (keys[i] == keys[j])
				fail_msg("key %#x issued twice", keys[i]);
	delta = (int64_t)keys[1] - keys[0];
	for (i = 2; i < N; i++) {
		if ((int64_t)keys[i] - keys[i - 1] != delta)
			constant = false;
		if (keys[i] <= keys[i - 1])
			increasing = false;
	}
	assert_false(constant);
	assert_false(increasing);
	for (i = 0; i < N; i++)
		assert_int_equal(mr_deregister(t, mr[i]), 0);
	mem_table_destroy(t);
}

static void test_lookup_finds_region_and_offset(void **state)
{
	struct mem_table *t = *state;
	uint64_t pg = page_size();
	uint64_t iova_a = (1ull << 40) + ((uintptr_t)buf & (pg - 1));
	struct mem_region *a = reg(t, buf, 4096, iova_a, ALL_RIGHTS);
	struct mem_region *b = reg(t, buf + 4096, 4096, (uintptr_t)(buf + 4096), ALL_RIGHTS);
	struct mem_region *ref;
	void *host;

	assert_int_equal(a->iova, iova_a);
	assert_ptr_equal(a->host_addr, buf);
	assert_int_equal(a->length, 4096);
	assert_int_equal(a->pd_handle, PD);
	assert_int_equal(a->access, ALL_RIGHTS);

	assert_int_equal(mr_check_remote_access(t, a->rkey, PD, QPN, QP_ALL, RW, iova_a + 100, 50,
						&ref, &host), MEM_ACCESS_OK);
	assert_ptr_equal(ref, a);
	assert_ptr_equal(host, buf + 100);
	mr_put(ref);

	assert_int_equal(remote(t, b->rkey, RR, (uintptr_t)(buf + 4096 + 7), 9, &host),
			 MEM_ACCESS_OK);
	assert_ptr_equal(host, buf + 4096 + 7);

	assert_int_equal(mr_check_local_access(t, b->lkey, PD, LW, (uintptr_t)(buf + 8191), 1,
					       &ref, &host), MEM_ACCESS_OK);
	assert_ptr_equal(ref, b);
	assert_ptr_equal(host, buf + 8191);
	mr_put(ref);

	assert_int_equal(mr_deregister(t, a), 0);
	assert_int_equal(mr_deregister(t, b), 0);
}

static void test_refuses_bad_key(void **state)
{
	struct mem_table *t = *state;
	struct mem_region *mr = reg(t, buf, 64, (uintptr_t)buf, ALL_RIGHTS);
	uint32_t wrong[] = { 0, 0xffffffffu, mr->rkey ^ 1, mr->rkey ^ 0x80000000u };
	size_t i;

	for (i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++)
		assert_int_equal(remote(t, wrong[i], RW, (uintptr_t)buf, 8, NULL),
				 MEM_ACCESS_BAD_KEY);
	assert_int_equal(mr_deregister(t, mr), 0);
}

static void test_refuses_stale_key_after_dereg(void **state)
{
	struct mem_table *t;
	struct mem_region *mr, *again;
	uint32_t old;
	int i;

	(void)state;
	/* One slot: every registration reuses it, only the tag can tell them apart. */
	assert_int_equal(mem_table_create(&t, 1, 0), 0);
	mr = reg(t, buf, 64, (uintptr_t)buf, ALL_RIGHTS);
	for (i = 0; i < 100; i++) {
		old = mr->rkey;
		assert_int_equal(mr_deregister(t, mr), 0);
		assert_int_equal(remote(t, old, RW, (uintptr_t)buf, 8, NULL), MEM_ACCESS_BAD_KEY);
		again = reg(t, buf, 64, (uintptr_t)buf, ALL_RIGHTS);
		assert_ptr_equal(again, mr);
		assert_int_not_equal(again->rkey, old);
		assert_int_equal(remote(t, old, RW, (uintptr_t)buf, 8, NULL), MEM_ACCESS_BAD_KEY);
		assert_int_equal(remote(t, again->rkey, RW, (uintptr_t)buf, 8, NULL),
				 MEM_ACCESS_OK);
	}
	assert_int_equal(mr_deregister(t, mr), 0);
	mem_table_destroy(t);
}

static void test_refuses_wrong_pd(void **state)
{
	struct mem_table *t = *state;
	struct mem_region *mr = reg(t, buf, 64, (uintptr_t)buf, ALL_RIGHTS);
	struct mem_region *ref;
	void *host;

	assert_int_equal(mr_check_remote_access(t, mr->rkey, OTHER_PD, QPN, QP_ALL, RW,
						(uintptr_t)buf, 8, &ref, &host),
			 MEM_ACCESS_PD_MISMATCH);
	assert_null(ref);
	assert_null(host);
	assert_int_equal(mr_check_local_access(t, mr->lkey, OTHER_PD, 0, (uintptr_t)buf, 8,
					       &ref, &host), MEM_ACCESS_PD_MISMATCH);
	assert_int_equal(mr_deregister(t, mr), 0);
}

static void check_missing_mr_right(struct mem_table *t, int needed, uint64_t len)
{
	struct mem_region *mr = reg(t, buf, 64, (uintptr_t)buf, ALL_RIGHTS & ~needed);

	assert_int_equal(remote(t, mr->rkey, needed, (uintptr_t)buf, len, NULL),
			 MEM_ACCESS_NO_RIGHT);
	assert_int_equal(mr_deregister(t, mr), 0);
	mr = reg(t, buf, 64, (uintptr_t)buf, LW | needed);
	assert_int_equal(remote(t, mr->rkey, needed, (uintptr_t)buf, len, NULL), MEM_ACCESS_OK);
	assert_int_equal(mr_deregister(t, mr), 0);
}

static void test_refuses_missing_mr_write_right(void **state)
{
	check_missing_mr_right(*state, RW, 16);
}

static void test_refuses_missing_mr_read_right(void **state)
{
	check_missing_mr_right(*state, RR, 16);
}

static void test_refuses_missing_mr_atomic_right(void **state)
{
	check_missing_mr_right(*state, RA, 8);
}

static void test_refuses_missing_qp_right(void **state)
{
	struct mem_table *t = *state;
	struct mem_region *mr = reg(t, buf, 64, (uintptr_t)buf, ALL_RIGHTS);
	static const int rights[] = { RW, RR, RA };
	struct mem_region *ref;
	void *host;
	size_t i;

	for (i = 0; i < 3; i++) {
		int qp = QP_ALL & ~rights[i];

		assert_int_equal(mr_check_remote_access(t, mr->rkey, PD, QPN, qp, rights[i],
							(uintptr_t)buf, 8, &ref, &host),
				 MEM_ACCESS_QP_NO_RIGHT);
		assert_null(ref);
		/* rxe's check_op_valid() runs before the key and the length matter. */
		assert_int_equal(mr_check_remote_access(t, 0xdead, PD, QPN, qp, rights[i],
							(uintptr_t)buf, 8, &ref, &host),
				 MEM_ACCESS_QP_NO_RIGHT);
		assert_int_equal(mr_check_remote_access(t, 0xdead, PD, QPN, qp, rights[i],
							0, 0, &ref, &host),
				 MEM_ACCESS_QP_NO_RIGHT);
	}
	/* A request needing no single remote right is an invalid request too. */
	assert_int_equal(mr_check_remote_access(t, mr->rkey, PD, QPN, QP_ALL, RW | RR,
						(uintptr_t)buf, 8, &ref, &host),
			 MEM_ACCESS_QP_NO_RIGHT);
	assert_int_equal(mr_check_remote_access(t, mr->rkey, PD, QPN, QP_ALL, LW,
						(uintptr_t)buf, 8, &ref, &host),
			 MEM_ACCESS_QP_NO_RIGHT);
	assert_int_equal(mr_deregister(t, mr), 0);
}

static void test_refuses_out_of_bounds_before_start(void **state)
{
	struct mem_table *t = *state;
	uint64_t base = (uintptr_t)(buf + 64);
	struct mem_region *mr = reg(t, buf + 64, 128, base, ALL_RIGHTS);

	assert_int_equal(remote(t, mr->rkey, RW, base, 128, NULL), MEM_ACCESS_OK);
	assert_int_equal(remote(t, mr->rkey, RW, base - 1, 1, NULL), MEM_ACCESS_OUT_OF_BOUNDS);
	assert_int_equal(remote(t, mr->rkey, RW, base - 1, 2, NULL), MEM_ACCESS_OUT_OF_BOUNDS);
	assert_int_equal(remote(t, mr->rkey, RR, 0, 8, NULL), MEM_ACCESS_OUT_OF_BOUNDS);
	assert_int_equal(mr_deregister(t, mr), 0);
}

static void test_refuses_out_of_bounds_past_end(void **state)
{
	struct mem_table *t = *state;
	uint64_t base = (uintptr_t)(buf + 64);
	struct mem_region *mr = reg(t, buf + 64, 128, base, ALL_RIGHTS);
	struct mem_region *ref;
	void *host;

	assert_int_equal(remote(t, mr->rkey, RW, base + 127, 1, &host), MEM_ACCESS_OK);
	assert_ptr_equal(host, buf + 64 + 127);
	assert_int_equal(remote(t, mr->rkey, RW, base + 127, 2, NULL), MEM_ACCESS_OUT_OF_BOUNDS);
	assert_int_equal(remote(t, mr->rkey, RW, base + 128, 1, NULL), MEM_ACCESS_OUT_OF_BOUNDS);
	assert_int_equal(remote(t, mr->rkey, RW, base, 129, NULL), MEM_ACCESS_OUT_OF_BOUNDS);
	assert_int_equal(remote(t, mr->rkey, RA, base + 128, 8, NULL), MEM_ACCESS_OUT_OF_BOUNDS);
	assert_int_equal(mr_check_local_access(t, mr->lkey, PD, 0, base + 120, 9, &ref, &host),
			 MEM_ACCESS_OUT_OF_BOUNDS);
	assert_null(ref);
	assert_int_equal(mr_deregister(t, mr), 0);
}

static void test_refuses_wrap_at_2_64(void **state)
{
	struct mem_table *t = *state;
	uint64_t pg = page_size();
	/* The highest region registration allows: its last byte is 2^64 - 2. */
	uint64_t base = 0 - 2 * pg;
	struct mem_region *mr = reg(t, buf, 2 * pg - 1, base, ALL_RIGHTS);

	assert_int_equal(remote(t, mr->rkey, RW, base, 2 * pg - 1, NULL), MEM_ACCESS_OK);
	/* A naive "iova + len <= end" test accepts these: the sum wraps to a small value. */
	assert_int_equal(remote(t, mr->rkey, RW, UINT64_MAX - 7, 16, NULL),
			 MEM_ACCESS_OUT_OF_BOUNDS);
	assert_int_equal(remote(t, mr->rkey, RW, base + 8, UINT64_MAX - 3, NULL),
			 MEM_ACCESS_OUT_OF_BOUNDS);
	assert_int_equal(remote(t, mr->rkey, RR, base, UINT64_MAX, NULL),
			 MEM_ACCESS_OUT_OF_BOUNDS);
	assert_int_equal(remote(t, mr->rkey, RA, UINT64_MAX - 7, 8, NULL),
			 MEM_ACCESS_OUT_OF_BOUNDS);
	assert_int_equal(mr_deregister(t, mr), 0);
}

static void test_refuses_misaligned_atomic(void **state)
{
	struct mem_table *t = *state;
	uint64_t base = (uintptr_t)buf;
	struct mem_region *mr = reg(t, buf, 64, base, ALL_RIGHTS);
	void *host;
	int off;

	assert_int_equal(remote(t, mr->rkey, RA, base + 8, 8, &host), MEM_ACCESS_OK);
	assert_ptr_equal(host, buf + 8);
	for (off = 1; off < 8; off++)
		assert_int_equal(remote(t, mr->rkey, RA, base + 8 + off, 8, NULL),
				 MEM_ACCESS_MISALIGNED);
	/* rxe tests alignment after the key and the range: those errors win. */
	assert_int_equal(remote(t, mr->rkey ^ 1, RA, base + 4, 8, NULL), MEM_ACCESS_BAD_KEY);
	assert_int_equal(remote(t, mr->rkey, RA, base + 60, 8, NULL), MEM_ACCESS_OUT_OF_BOUNDS);
	assert_int_equal(mr_deregister(t, mr), 0);
}

static void test_refuses_wrong_length_atomic(void **state)
{
	struct mem_table *t = *state;
	uint64_t base = (uintptr_t)buf;
	struct mem_region *mr = reg(t, buf, 64, base, ALL_RIGHTS);
	static const uint64_t lengths[] = { 0, 1, 4, 7, 9, 16, UINT64_MAX };
	size_t i;

	for (i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++)
		assert_int_equal(remote(t, mr->rkey, RA, base, lengths[i], NULL),
				 MEM_ACCESS_MISALIGNED);
	assert_int_equal(mr_deregister(t, mr), 0);
}

static void test_zero_length_needs_no_key(void **state)
{
	struct mem_table *t = *state;
	struct mem_region *ref = (void *)1;
	void *host = (void *)1;

	assert_int_equal(remote(t, 0, RW, 0, 0, &host), MEM_ACCESS_OK);
	assert_null(host);
	assert_int_equal(remote(t, 0x12345678, RR, UINT64_MAX, 0, NULL), MEM_ACCESS_OK);
	assert_int_equal(mr_check_remote_access(t, 0xffffffffu, OTHER_PD, QPN, RW, RW, 42, 0,
						&ref, &host), MEM_ACCESS_OK);
	assert_null(ref);
	assert_null(host);
	ref = (void *)1;
	assert_int_equal(mr_check_local_access(t, 0xabcdef, OTHER_PD, LW, 0, 0, &ref, &host),
			 MEM_ACCESS_OK);
	assert_null(ref);
	assert_null(host);
}

/* An empty range has nothing to register: ib_umem_get() refuses it, on rxe and mlx5 alike. */
static void test_zero_length_region_is_einval(void **state)
{
	struct mem_table *t = *state;
	struct mem_region *mr;

	assert_int_equal(mr_register(t, PD, buf, 0, (uintptr_t)buf, ALL_RIGHTS, &mr), EINVAL);
	assert_null(mr);
	assert_int_equal(mr_register(t, PD, NULL, 0, 0, LW, &mr), EINVAL);
}

static void test_huge_region_is_never_touched(void **state)
{
	struct mem_table *t = *state;
	const uint64_t tib = 1ull << 40;
	uint64_t reserved;
	uint8_t *area = MAP_FAILED;
	struct mem_region *mr;
	double start;
	void *host;

	/*
	 * Valgrind refuses a 1 TiB mapping; then reserve less and register
	 * 1 TiB anyway.  Reading or writing either the PROT_NONE reservation
	 * or the unmapped tail behind it would kill the test with SIGSEGV.
	 */
	for (reserved = tib; reserved >= (1ull << 30); reserved >>= 2) {
		area = mmap(NULL, reserved, PROT_NONE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (area != MAP_FAILED)
			break;
	}
	if (area == MAP_FAILED)
		skip();
	start = now_sec();
	mr = reg(t, area, tib, (uintptr_t)area, ALL_RIGHTS);
	assert_true(now_sec() - start < 0.1);
	assert_int_equal(mr->length, tib);
	assert_int_equal(remote(t, mr->rkey, RW, (uintptr_t)area + tib - 4096, 4096, &host),
			 MEM_ACCESS_OK);
	assert_ptr_equal(host, area + tib - 4096);
	assert_int_equal(remote(t, mr->rkey, RA, (uintptr_t)area + tib / 2, 8, &host),
			 MEM_ACCESS_OK);
	assert_int_equal(remote(t, mr->rkey, RW, (uintptr_t)area + tib - 4096, 4097, NULL),
			 MEM_ACCESS_OUT_OF_BOUNDS);
	assert_int_equal(mr_deregister(t, mr), 0);
	assert_int_equal(munmap(area, reserved), 0);
}

/*
 * A key taken away (deregistered, invalidated) by a thread of its own while an access holds
 * it: the key dies at once, but the taking waits for the access, which completes.
 */
struct take_job {
	struct mem_table	*t;
	uint32_t		key;
	int			(*take)(struct take_job *job);
	struct mem_region	*mr;	/* the region take_by_dereg() deregisters */
	atomic_int		done;
	int			ret;
};

static int take_by_dereg(struct take_job *job)
{
	return mr_deregister(job->t, job->mr);
}

static int take_by_invalidate(struct take_job *job)
{
	return mw_invalidate(job->t, job->key, PD, false, 0);
}

static void *take_thread(void *arg)
{
	struct take_job *job = arg;

	job->ret = job->take(job);
	atomic_store(&job->done, 1);
	return NULL;
}

/*
 * Runs job while an access to buf holds ref (host: where it writes): the access then writes
 * fill over buf's first 64 bytes and lets go, which must be what ends the taking.
 */
static void expect_take_waits_for_holder(struct take_job *job, struct mem_region *ref,
					 void *host, uint8_t fill)
{
	const struct timespec ms = { .tv_nsec = 1000000 };
	struct mem_table *t = job->t;
	pthread_t th;
	int i;

	atomic_init(&job->done, 0);
	assert_int_equal(pthread_create(&th, NULL, take_thread, job), 0);

	/* The key dies as soon as the taking starts... */
	for (i = 0; i < 5000 && remote(t, job->key, RW, (uintptr_t)buf, 8, NULL) == MEM_ACCESS_OK;
	     i++)
		nanosleep(&ms, NULL);
	assert_int_equal(remote(t, job->key, RW, (uintptr_t)buf, 8, NULL), MEM_ACCESS_BAD_KEY);
	assert_int_equal(remote(t, job->key, RR, (uintptr_t)buf, 8, NULL), MEM_ACCESS_BAD_KEY);

	/* ...but it waits for the access already in flight, which completes. */
	for (i = 0; i < 50; i++)
		nanosleep(&ms, NULL);
	assert_int_equal(atomic_load(&job->done), 0);
	memset(host, fill, 64);
	mr_put(ref);

	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(job->ret, 0);
	assert_int_equal(atomic_load(&job->done), 1);
	for (i = 0; i < 64; i++)
		assert_int_equal(buf[i], fill);
	assert_int_equal(remote(t, job->key, RW, (uintptr_t)buf, 8, NULL), MEM_ACCESS_BAD_KEY);
}

static void test_dereg_kills_key_while_holder_completes(void **state)
{
	struct mem_table *t = *state;
	struct mem_region *mr = reg(t, buf, 64, (uintptr_t)buf, ALL_RIGHTS);
	struct take_job job = { .t = t, .key = mr->rkey, .take = take_by_dereg, .mr = mr };
	struct mem_region *ref;
	void *host;

	memset(buf, 0, 64);
	assert_int_equal(mr_check_remote_access(t, job.key, PD, QPN, QP_ALL, RW, (uintptr_t)buf,
						64, &ref, &host), MEM_ACCESS_OK);
	expect_take_waits_for_holder(&job, ref, host, 0xab);
}

static void test_dereg_twice_is_einval(void **state)
{
	struct mem_table *t = *state;
	struct mem_region *mr = reg(t, buf, 64, (uintptr_t)buf, LW);
	struct mem_region foreign = { 0 };

	assert_int_equal(mr_deregister(t, mr), 0);
	assert_int_equal(mr_deregister(t, mr), EINVAL);
	assert_int_equal(mr_deregister(t, &foreign), EINVAL);
}

static void test_table_full_is_enomem(void **state)
{
	struct mem_table *t;
	struct mem_region *mr[4], *extra = (void *)1;
	int i;

	(void)state;
	assert_int_equal(mem_table_create(&t, 4, 0), 0);
	for (i = 0; i < 4; i++)
		mr[i] = reg(t, buf, 64, (uintptr_t)buf, LW);
	assert_int_equal(mr_register(t, PD, buf, 64, (uintptr_t)buf, LW, &extra), ENOMEM);
	assert_null(extra);
	assert_int_equal(mr_deregister(t, mr[2]), 0);
	mr[2] = reg(t, buf, 64, (uintptr_t)buf, LW);
	assert_int_equal(mr_register(t, PD, buf, 64, (uintptr_t)buf, LW, &extra), ENOMEM);
	for (i = 0; i < 4; i++)
		assert_int_equal(mr_deregister(t, mr[i]), 0);
	mem_table_destroy(t);
}

static void test_rereg_access_keeps_keys(void **state)
{
	struct mem_table *t = *state;
	struct mem_region *mr = reg(t, buf, 64, (uintptr_t)buf, ALL_RIGHTS);
	uint32_t lkey = mr->lkey, rkey = mr->rkey;

	assert_int_equal(mr_reregister(t, mr, IBV_REREG_MR_CHANGE_ACCESS, 0, NULL, 0, 0,
				       LW | RR), 0);
	assert_int_equal(mr->lkey, lkey);
	assert_int_equal(mr->rkey, rkey);
	assert_int_equal(mr->access, LW | RR);
	assert_int_equal(remote(t, rkey, RW, (uintptr_t)buf, 8, NULL), MEM_ACCESS_NO_RIGHT);
	assert_int_equal(remote(t, rkey, RR, (uintptr_t)buf, 8, NULL), MEM_ACCESS_OK);
	/* The new access goes through the same flag rules as registration. */
	assert_int_equal(mr_reregister(t, mr, IBV_REREG_MR_CHANGE_ACCESS, 0, NULL, 0, 0, RW),
			 EINVAL);
	assert_int_equal(mr->access, LW | RR);
	assert_int_equal(mr_deregister(t, mr), 0);
}

static void test_rereg_pd(void **state)
{
	struct mem_table *t = *state;
	struct mem_region *mr = reg(t, buf, 64, (uintptr_t)buf, ALL_RIGHTS);
	struct mem_region *ref;
	void *host;

	assert_int_equal(mr_reregister(t, mr, IBV_REREG_MR_CHANGE_PD, OTHER_PD, NULL, 0, 0, 0),
			 0);
	assert_int_equal(remote(t, mr->rkey, RW, (uintptr_t)buf, 8, NULL),
			 MEM_ACCESS_PD_MISMATCH);
	assert_int_equal(mr_check_remote_access(t, mr->rkey, OTHER_PD, QPN, QP_ALL, RW,
						(uintptr_t)buf, 8, &ref, &host), MEM_ACCESS_OK);
	mr_put(ref);
	assert_int_equal(mr_deregister(t, mr), 0);
}

static void test_rereg_translation(void **state)
{
	struct mem_table *t = *state;
	uint64_t pg = page_size();
	struct mem_region *mr = reg(t, buf, 64, (uintptr_t)buf, ALL_RIGHTS);
	uint32_t rkey = mr->rkey;
	uint64_t iova = (1ull << 44) + ((uintptr_t)(buf + 4096) & (pg - 1));
	void *host;

	assert_int_equal(mr_reregister(t, mr, IBV_REREG_MR_CHANGE_TRANSLATION, 0, buf + 4096,
				       128, iova, 0), 0);
	assert_int_equal(mr->rkey, rkey);
	assert_int_equal(remote(t, rkey, RW, (uintptr_t)buf, 8, NULL), MEM_ACCESS_OUT_OF_BOUNDS);
	assert_int_equal(remote(t, rkey, RW, iova + 120, 8, &host), MEM_ACCESS_OK);
	assert_ptr_equal(host, buf + 4096 + 120);

	/* ib_uverbs_rereg_mr()'s argument checks; a refused call changes nothing. */
	assert_int_equal(mr_reregister(t, mr, IBV_REREG_MR_CHANGE_TRANSLATION, 0, buf, 0,
				       (uintptr_t)buf, 0), EINVAL);
	assert_int_equal(mr_reregister(t, mr, IBV_REREG_MR_CHANGE_TRANSLATION, 0, NULL, 64,
				       (uintptr_t)buf, 0), EINVAL);
	assert_int_equal(mr_reregister(t, mr, IBV_REREG_MR_CHANGE_TRANSLATION, 0, buf, 64, 0, 0),
			 EINVAL);
	assert_int_equal(mr_reregister(t, mr, IBV_REREG_MR_CHANGE_TRANSLATION, 0, buf, 64,
				       (uintptr_t)buf + 1, 0), EINVAL);
	assert_int_equal(mr_reregister(t, mr, 0, 0, NULL, 0, 0, 0), EINVAL);
	assert_int_equal(mr_reregister(t, mr, 1 << 3, 0, NULL, 0, 0, 0), EINVAL);
	assert_int_equal(mr->iova, iova);
	assert_int_equal(mr->length, 128);
	assert_ptr_equal(mr->host_addr, buf + 4096);

	assert_int_equal(mr_deregister(t, mr), 0);
	assert_int_equal(mr_reregister(t, mr, IBV_REREG_MR_CHANGE_PD, PD, NULL, 0, 0, 0), EINVAL);
}

static void test_wc_status_mapping(void **state)
{
	(void)state;
	assert_int_equal(mem_access_remote_wc_status(MEM_ACCESS_OK), IBV_WC_SUCCESS);
	assert_int_equal(mem_access_remote_wc_status(MEM_ACCESS_BAD_KEY), IBV_WC_REM_ACCESS_ERR);
	assert_int_equal(mem_access_remote_wc_status(MEM_ACCESS_PD_MISMATCH),
			 IBV_WC_REM_ACCESS_ERR);
	assert_int_equal(mem_access_remote_wc_status(MEM_ACCESS_NO_RIGHT), IBV_WC_REM_ACCESS_ERR);
	assert_int_equal(mem_access_remote_wc_status(MEM_ACCESS_OUT_OF_BOUNDS),
			 IBV_WC_REM_ACCESS_ERR);
	assert_int_equal(mem_access_remote_wc_status(MEM_ACCESS_MISALIGNED),
			 IBV_WC_REM_INV_REQ_ERR);
	assert_int_equal(mem_access_remote_wc_status(MEM_ACCESS_QP_NO_RIGHT),
			 IBV_WC_REM_INV_REQ_ERR);
	assert_int_equal(mem_access_remote_wc_status((enum mem_access_result)99),
			 IBV_WC_GENERAL_ERR);

	assert_int_equal(mem_access_local_wc_status(MEM_ACCESS_OK), IBV_WC_SUCCESS);
	assert_int_equal(mem_access_local_wc_status(MEM_ACCESS_BAD_KEY), IBV_WC_LOC_PROT_ERR);
	assert_int_equal(mem_access_local_wc_status(MEM_ACCESS_PD_MISMATCH), IBV_WC_LOC_PROT_ERR);
	assert_int_equal(mem_access_local_wc_status(MEM_ACCESS_NO_RIGHT), IBV_WC_LOC_PROT_ERR);
	assert_int_equal(mem_access_local_wc_status(MEM_ACCESS_OUT_OF_BOUNDS),
			 IBV_WC_LOC_PROT_ERR);
	assert_int_equal(mem_access_local_wc_status((enum mem_access_result)-1),
			 IBV_WC_GENERAL_ERR);
}

static void test_local_access_rights(void **state)
{
	struct mem_table *t = *state;
	struct mem_region *mr = reg(t, buf, 64, (uintptr_t)buf, RR);
	struct mem_region *ref;
	void *host;

	/* A send may read any registered region; a receive needs LOCAL_WRITE. */
	assert_int_equal(mr_check_local_access(t, mr->lkey, PD, 0, (uintptr_t)buf, 64,
					       &ref, &host), MEM_ACCESS_OK);
	assert_ptr_equal(host, buf);
	mr_put(ref);
	assert_int_equal(mr_check_local_access(t, mr->lkey, PD, LW, (uintptr_t)buf, 64,
					       &ref, &host), MEM_ACCESS_NO_RIGHT);
	assert_null(ref);
	assert_int_equal(mr_check_local_access(t, mr->lkey ^ 2, PD, 0, (uintptr_t)buf, 64,
					       &ref, &host), MEM_ACCESS_BAD_KEY);
	assert_int_equal(mr_deregister(t, mr), 0);
}

/* Concurrency: two threads register / reregister / deregister, two look up and write. */

#define STRESS_SLOTS	16
#define STRESS_BUF	256

struct stress {
	struct mem_table	*t;
	_Atomic uint32_t	key[STRESS_SLOTS];	/* 0: nothing published */
	double			deadline;
	atomic_long		hits;
	atomic_long		errors;
	atomic_long		registrations;
};

static uint64_t stress_iova(int i)
{
	return (uint64_t)(i + 1) << 32;
}

struct registrar {
	struct stress	*s;
	int		first;
};

static void *registrar_thread(void *arg)
{
	struct registrar *r = arg;
	struct stress *s = r->s;
	struct mem_region *mr[STRESS_SLOTS / 2] = { 0 };
	uint8_t *mem[STRESS_SLOTS / 2] = { 0 };
	unsigned int seed = (unsigned int)r->first + 1;
	size_t align = (size_t)page_size();
	int i, k;

	while (now_sec() < s->deadline) {
		k = rand_r(&seed) % (STRESS_SLOTS / 2);
		i = r->first + k;
		if (mr[k] && rand_r(&seed) % 4 == 0) {
			int access = (rand_r(&seed) & 1) ? ALL_RIGHTS : (LW | RR);

			if (mr_reregister(s->t, mr[k], IBV_REREG_MR_CHANGE_ACCESS, 0, NULL, 0,
					  0, access))
				atomic_fetch_add(&s->errors, 1);
		} else if (mr[k]) {
			atomic_store(&s->key[i], 0);
			if (mr_deregister(s->t, mr[k]))
				atomic_fetch_add(&s->errors, 1);
			/* Any access still running after dereg would trip ASan/TSan here. */
			memset(mem[k], 0, STRESS_BUF);
			free(mem[k]);
			mr[k] = NULL;
		} else {
			mem[k] = aligned_alloc(align, align);
			if (!mem[k] || mr_register(s->t, PD, mem[k], STRESS_BUF, stress_iova(i),
						   ALL_RIGHTS, &mr[k])) {
				atomic_fetch_add(&s->errors, 1);
				break;
			}
			atomic_fetch_add(&s->registrations, 1);
			atomic_store(&s->key[i], mr[k]->rkey);
		}
		/* Valgrind runs one thread at a time: hand over now and then. */
		sched_yield();
	}
	for (k = 0; k < STRESS_SLOTS / 2; k++) {
		if (!mr[k])
			continue;
		atomic_store(&s->key[r->first + k], 0);
		if (mr_deregister(s->t, mr[k]))
			atomic_fetch_add(&s->errors, 1);
		free(mem[k]);
	}
	return NULL;
}

struct looker {
	struct stress	*s;
	int		half;	/* each looker writes its own half: QPs racing is not our test */
};

static void *lookup_thread(void *arg)
{
	struct looker *l = arg;
	struct stress *s = l->s;
	unsigned int seed = (unsigned int)l->half + 100;
	struct mem_region *ref;
	uint8_t *host;
	uint32_t key;
	int i, j, n, len, off;

	for (n = 0; now_sec() < s->deadline; n++) {
		if (n % 64 == 0)
			sched_yield();
		i = rand_r(&seed) % STRESS_SLOTS;
		key = atomic_load(&s->key[i]);
		if (!key)
			continue;
		len = 1 + rand_r(&seed) % 64;
		off = l->half * (STRESS_BUF / 2) + rand_r(&seed) % (STRESS_BUF / 2 - len + 1);
		switch (mr_check_remote_access(s->t, key, PD, QPN, QP_ALL, RW, stress_iova(i) + off,
					       len, &ref, (void **)&host)) {
		case MEM_ACCESS_OK:
			memset(host, i, len);
			for (j = 0; j < len; j++)
				if (host[j] != i)
					atomic_fetch_add(&s->errors, 1);
			mr_put(ref);
			atomic_fetch_add(&s->hits, 1);
			break;
		case MEM_ACCESS_BAD_KEY:	/* deregistered or mid-reregistration */
		case MEM_ACCESS_NO_RIGHT:	/* reregistered without REMOTE_WRITE */
			break;
		default:
			atomic_fetch_add(&s->errors, 1);
		}
		if (rand_r(&seed) % 16 == 0 &&
		    mr_check_local_access(s->t, key, PD, 0, stress_iova(i), STRESS_BUF, &ref,
					  (void **)&host) == MEM_ACCESS_OK)
			mr_put(ref);
	}
	return NULL;
}

static void test_concurrent_register_lookup_dereg(void **state)
{
	struct stress s = { .t = *state };
	struct registrar regs[2] = { { &s, 0 }, { &s, STRESS_SLOTS / 2 } };
	struct looker lookers[2] = { { &s, 0 }, { &s, 1 } };
	pthread_t th[4];
	int i;

	for (i = 0; i < STRESS_SLOTS; i++)
		atomic_init(&s.key[i], 0);
	atomic_init(&s.hits, 0);
	atomic_init(&s.errors, 0);
	atomic_init(&s.registrations, 0);
	s.deadline = now_sec() + 0.5;

	assert_int_equal(pthread_create(&th[0], NULL, registrar_thread, &regs[0]), 0);
	assert_int_equal(pthread_create(&th[1], NULL, registrar_thread, &regs[1]), 0);
	assert_int_equal(pthread_create(&th[2], NULL, lookup_thread, &lookers[0]), 0);
	assert_int_equal(pthread_create(&th[3], NULL, lookup_thread, &lookers[1]), 0);
	for (i = 0; i < 4; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);

	assert_int_equal(atomic_load(&s.errors), 0);
	assert_true(atomic_load(&s.registrations) > 0);
	assert_true(atomic_load(&s.hits) > 0);
}

/* A region of buf's first page that windows may be bound to. */
static struct mem_region *bindable(struct mem_table *t)
{
	return reg(t, buf, 4096, (uintptr_t)buf, ALL_RIGHTS | IBV_ACCESS_MW_BIND);
}

/* A type 1 window over buf[base, base + len) of region mr, with rights access. */
static struct mem_region *window(struct mem_table *t, struct mem_region *mr, int type,
				 uint64_t base, uint64_t len, int access, uint32_t qpn)
{
	struct mem_region *w = NULL;
	struct mw_bind_req b;

	assert_int_equal(mw_alloc(t, PD, (enum ibv_mw_type)type, &w), 0);
	b = (struct mw_bind_req){
		.new_rkey = (w->rkey & ~MW_KEY_MASK) | ((w->rkey + 1) & MW_KEY_MASK),
		.has_mr = true, .mr_lkey = mr->lkey, .addr = (uintptr_t)buf + base,
		.length = len, .access = access, .qp_pd_handle = PD, .qpn = qpn,
	};
	assert_int_equal(mw_bind(t, w, &b), 0);
	assert_int_equal(w->rkey, b.new_rkey);
	return w;
}

static void test_window_narrows_its_region(void **state)
{
	struct mem_table *t = *state;
	struct mem_region *mr = bindable(t);
	struct mem_region *w = window(t, mr, IBV_MW_TYPE_1, 1024, 512, RW, 0);
	struct mem_region *ref;
	uint64_t base = (uintptr_t)buf + 1024;
	void *host;

	assert_int_equal(remote(t, w->rkey, RW, base, 512, &host), MEM_ACCESS_OK);
	assert_ptr_equal(host, buf + 1024);
	assert_int_equal(remote(t, w->rkey, RW, base + 500, 12, &host), MEM_ACCESS_OK);
	assert_ptr_equal(host, buf + 1524);
	assert_int_equal(remote(t, w->rkey, RW, base - 1, 8, NULL), MEM_ACCESS_OUT_OF_BOUNDS);
	assert_int_equal(remote(t, w->rkey, RW, base + 505, 8, NULL), MEM_ACCESS_OUT_OF_BOUNDS);
	assert_int_equal(remote(t, w->rkey, RR, base, 8, NULL), MEM_ACCESS_NO_RIGHT);
	assert_int_equal(mr_check_remote_access(t, w->rkey, OTHER_PD, QPN, QP_ALL, RW, base, 8,
						&ref, &host), MEM_ACCESS_PD_MISMATCH);
	/* A window's key is no lkey. */
	assert_int_equal(mr_check_local_access(t, w->rkey, PD, 0, base, 8, &ref, &host),
			 MEM_ACCESS_BAD_KEY);
	/* Windows and regions are not each other. */
	assert_int_equal(mr_deregister(t, w), EINVAL);
	assert_int_equal(mw_dealloc(t, mr), EINVAL);
	assert_int_equal(mw_dealloc(t, w), 0);
	assert_int_equal(mr_deregister(t, mr), 0);
}

static void test_type2_window_only_through_its_qp(void **state)
{
	struct mem_table *t = *state;
	struct mem_region *mr = bindable(t);
	struct mem_region *w = window(t, mr, IBV_MW_TYPE_2, 0, 64, RW, QPN);
	struct mem_region *ref;
	void *host;

	assert_int_equal(remote(t, w->rkey, RW, (uintptr_t)buf, 64, NULL), MEM_ACCESS_OK);
	assert_int_equal(mr_check_remote_access(t, w->rkey, PD, QPN + 1, QP_ALL, RW,
						(uintptr_t)buf, 8, &ref, &host),
			 MEM_ACCESS_MW_QP);
	assert_int_equal(mem_access_remote_wc_status(MEM_ACCESS_MW_QP), IBV_WC_REM_ACCESS_ERR);
	/* From the wire only through that QP; locally by any QP of the PD. */
	assert_int_equal(mw_invalidate(t, w->rkey, PD, true, QPN + 1), EINVAL);
	assert_int_equal(mw_invalidate(t, w->rkey, OTHER_PD, false, 0), EINVAL);
	assert_int_equal(mw_invalidate(t, w->rkey, PD, false, 0), 0);
	assert_int_equal(remote(t, w->rkey, RW, (uintptr_t)buf, 8, NULL), MEM_ACCESS_BAD_KEY);
	assert_int_equal(mw_invalidate(t, w->rkey, PD, false, 0), EINVAL);
	assert_int_equal(mw_dealloc(t, w), 0);
	assert_int_equal(mr_deregister(t, mr), 0);
}

static void test_window_dies_with_its_region(void **state)
{
	struct mem_table *t = *state;
	struct mem_region *mr = bindable(t);
	struct mem_region *w = window(t, mr, IBV_MW_TYPE_1, 0, 64, RW, 0);
	struct mem_region *again;

	assert_int_equal(mr_deregister(t, mr), 0);
	assert_int_equal(remote(t, w->rkey, RW, (uintptr_t)buf, 8, NULL), MEM_ACCESS_BAD_KEY);
	/* Nor does a new registration of the same memory bring it back. */
	again = bindable(t);
	assert_int_equal(remote(t, w->rkey, RW, (uintptr_t)buf, 8, NULL), MEM_ACCESS_BAD_KEY);
	assert_int_equal(mw_dealloc(t, w), 0);
	assert_int_equal(mr_deregister(t, again), 0);
}

/* As a deregistration: the key dies at once, and the access in flight finishes first. */
static void test_invalidate_waits_for_access_in_flight(void **state)
{
	struct mem_table *t = *state;
	struct mem_region *mr = bindable(t);
	struct mem_region *w = window(t, mr, IBV_MW_TYPE_2, 0, 64, RW, QPN);
	struct take_job job = { .t = t, .key = w->rkey, .take = take_by_invalidate };
	struct mem_region *ref;
	void *host;

	assert_int_equal(mr_check_remote_access(t, job.key, PD, QPN, QP_ALL, RW, (uintptr_t)buf,
						64, &ref, &host), MEM_ACCESS_OK);
	assert_ptr_equal(ref, w);
	/* The region is held too: deregistering it would wait as well. */
	expect_take_waits_for_holder(&job, ref, host, 0x5c);
	assert_int_equal(mw_dealloc(t, w), 0);
	assert_int_equal(mr_deregister(t, mr), 0);
}

static void test_bind_checks(void **state)
{
	struct mem_table *t = *state;
	struct mem_region *mr = bindable(t);
	struct mem_region *plain = reg(t, buf, 4096, (uintptr_t)buf, ALL_RIGHTS);
	struct mem_region *w1 = NULL, *w2 = NULL;
	struct mw_bind_req b;
	uint32_t key;

	assert_int_equal(mw_alloc(t, PD, IBV_MW_TYPE_1, &w1), 0);
	assert_int_equal(mw_alloc(t, PD, IBV_MW_TYPE_2, &w2), 0);
	b = (struct mw_bind_req){ .new_rkey = w1->rkey, .has_mr = true, .mr_lkey = mr->lkey,
				  .addr = (uintptr_t)buf, .length = 64, .access = RW,
				  .qp_pd_handle = PD, .qpn = QPN };
	assert_int_equal(mw_bind(t, w1, &b), 0);
	/* Only the consumer's 8 bits are taken (rxe_do_bind_mw()): the rest stays. */
	key = w1->rkey;
	b.new_rkey = (key ^ 0x5a5a0100u) + 1;
	assert_int_equal(mw_bind(t, w1, &b), 0);
	assert_int_equal(w1->rkey, (key & ~0xffu) | ((key + 1) & 0xffu));
	b.new_rkey = w1->rkey;
	b.mr_lkey = plain->lkey;		/* C10-73 */
	assert_int_equal(mw_bind(t, w1, &b), EINVAL);
	b.mr_lkey = mr->lkey;
	b.length = 4097;			/* C10-75 */
	assert_int_equal(mw_bind(t, w1, &b), EINVAL);
	b.length = 64;
	b.access = RW | IBV_ACCESS_ZERO_BASED;
	assert_int_equal(mw_bind(t, w1, &b), EINVAL);
	b.access = RW;
	/* Type 2: the QP's PD (C10-72), a region and a length (o10-37.2.40), not bound yet. */
	b.new_rkey = w2->rkey;
	b.qp_pd_handle = OTHER_PD;
	assert_int_equal(mw_bind(t, w2, &b), EINVAL);
	b.qp_pd_handle = PD;
	b.length = 0;
	assert_int_equal(mw_bind(t, w2, &b), EINVAL);
	b.length = 64;
	assert_int_equal(mw_bind(t, w2, &b), 0);
	assert_int_equal(mw_bind(t, w2, &b), EINVAL);
	/* Type 1 windows are not invalidated, only unbound by a bind to nothing. */
	assert_int_equal(mw_invalidate(t, w1->rkey, PD, false, 0), EINVAL);
	b = (struct mw_bind_req){ .new_rkey = w1->rkey, .qp_pd_handle = PD };
	assert_int_equal(mw_bind(t, w1, &b), 0);
	assert_int_equal(remote(t, w1->rkey, RW, (uintptr_t)buf, 8, NULL), MEM_ACCESS_BAD_KEY);
	assert_int_equal(mw_dealloc(t, w1), 0);
	assert_int_equal(mw_dealloc(t, w2), 0);
	assert_int_equal(mr_deregister(t, plain), 0);
	assert_int_equal(mr_deregister(t, mr), 0);
}

/* Regions and windows have a limit each. */
static void test_window_limit_is_enomem(void **state)
{
	struct mem_table *t;
	struct mem_region *w1, *w2, *mr;

	(void)state;
	assert_int_equal(mem_table_create(&t, 1, 1), 0);
	assert_int_equal(mw_alloc(t, PD, IBV_MW_TYPE_1, &w1), 0);
	assert_int_equal(mw_alloc(t, PD, IBV_MW_TYPE_2, &w2), ENOMEM);
	assert_int_equal(mw_alloc(t, PD, (enum ibv_mw_type)3, &w2), EINVAL);
	mr = reg(t, buf, 64, (uintptr_t)buf, LW);
	assert_int_equal(mr_register(t, PD, buf, 64, (uintptr_t)buf, LW, &w2), ENOMEM);
	assert_int_equal(mw_dealloc(t, w1), 0);
	assert_int_equal(mw_alloc(t, PD, IBV_MW_TYPE_2, &w2), 0);
	assert_int_equal(mw_dealloc(t, w2), 0);
	assert_int_equal(mr_deregister(t, mr), 0);
	mem_table_destroy(t);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup_table, teardown_table)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_create_rejects_bad_sizes),
		T(test_access_flags_matrix),
		T(test_register_rejects_bad_flags),
		T(test_register_rejects_bad_translation),
		T(test_keys_unique_and_unpredictable),
		T(test_lookup_finds_region_and_offset),
		T(test_refuses_bad_key),
		T(test_refuses_stale_key_after_dereg),
		T(test_refuses_wrong_pd),
		T(test_refuses_missing_mr_write_right),
		T(test_refuses_missing_mr_read_right),
		T(test_refuses_missing_mr_atomic_right),
		T(test_refuses_missing_qp_right),
		T(test_refuses_out_of_bounds_before_start),
		T(test_refuses_out_of_bounds_past_end),
		T(test_refuses_wrap_at_2_64),
		T(test_refuses_misaligned_atomic),
		T(test_refuses_wrong_length_atomic),
		T(test_zero_length_needs_no_key),
		T(test_zero_length_region_is_einval),
		T(test_huge_region_is_never_touched),
		T(test_dereg_kills_key_while_holder_completes),
		T(test_dereg_twice_is_einval),
		T(test_table_full_is_enomem),
		T(test_rereg_access_keeps_keys),
		T(test_rereg_pd),
		T(test_rereg_translation),
		T(test_wc_status_mapping),
		T(test_local_access_rights),
		T(test_concurrent_register_lookup_dereg),
		T(test_window_narrows_its_region),
		T(test_type2_window_only_through_its_qp),
		T(test_window_dies_with_its_region),
		T(test_invalidate_waits_for_access_in_flight),
		T(test_bind_checks),
		T(test_window_limit_is_enomem),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
