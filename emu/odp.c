// SPDX-License-Identifier: MIT
/*
 * On-demand paging: the fault-in that stands for a NIC's page-fault handling, and
 * ibv_advise_mr(). See emu/odp.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu/mr.h"
#include "emu/odp.h"

/* Linux 5.14's values, for headers older than the kernel. */
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ	22
#define MADV_POPULATE_WRITE	23
#endif

static pthread_once_t populate_once = PTHREAD_ONCE_INIT;
static bool populate_works;
static uintptr_t page_size;

/*
 * madvise() answers EINVAL both for an advice it does not know and for a page whose
 * protection refuses the access, so whether the kernel has MADV_POPULATE_* at all is
 * asked once, on a page that is certainly mapped and readable.
 */
static void populate_probe(void)
{
	static const char probe_byte = 1;

	page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
	populate_works = madvise((void *)((uintptr_t)&probe_byte & ~(page_size - 1)),
				 page_size, MADV_POPULATE_READ) == 0;
}

bool odp_fault_in(void *addr, uint64_t length, bool write)
{
	uintptr_t start, end;

	pthread_once(&populate_once, populate_probe);
	if (!populate_works || !length)
		return true;
	start = (uintptr_t)addr & ~(page_size - 1);
	if (length - 1 > UINTPTR_MAX - page_size ||
	    (uintptr_t)addr > UINTPTR_MAX - page_size - (length - 1))
		return false;	/* past the top of the address space: nothing is mapped there */
	end = ((uintptr_t)addr + (length - 1)) | (page_size - 1);
	return madvise((void *)start, end - start + 1,
		       write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0;
}

/* Only what is already mapped is touched: nothing to do before the access itself. */
static bool advice_faults(int advice)
{
	return advice == IBV_ADVISE_MR_ADVICE_PREFETCH ||
	       advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE;
}

int odp_advise(struct mem_table *t, uint32_t pd_handle, int advice, uint32_t flags,
	       const struct ibv_sge *sg_list, uint32_t num_sge)
{
	bool write = advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE;
	bool flush = flags & IBV_ADVISE_MR_FLAG_FLUSH;

	/* mlx5_ib_advise_mr() knows three advices; uverbs_get_flags32() refuses other flags. */
	if (!advice_faults(advice) && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return EOPNOTSUPP;
	if (flags & ~(uint32_t)IBV_ADVISE_MR_FLAG_FLUSH)
		return EINVAL;
	if (!num_sge)
		return 0;	/* ib_uverbs_advise_mr(): nothing to advise */
	if (!sg_list)
		return EFAULT;	/* the kernel could not copy the list in */
	for (uint32_t i = 0; i < num_sge; i++) {
		const struct ibv_sge *sge = &sg_list[i];
		struct mem_region *ref;
		void *host;
		bool ok;
		int err;

		err = mr_advice_target(t, sge->lkey, pd_handle, write, sge->addr, sge->length,
				       &ref, &host);
		/* Without FLUSH mlx5 checks the keys now and the ranges in its worker. */
		if (err == EFAULT && !flush)
			continue;
		if (err)
			return err;
		ok = !advice_faults(advice) || odp_fault_in(host, sge->length, write);
		mr_put(ref);
		/* A prefetch without FLUSH is a hint: what cannot be faulted in now will fail
		 * at the access, as it would have without the advice. */
		if (!ok && flush)
			return EFAULT;
	}
	return 0;
}
