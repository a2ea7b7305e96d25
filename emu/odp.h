/* SPDX-License-Identifier: MIT */
/*
 * On-demand paging (IBV_ACCESS_ON_DEMAND). An ODP region is never pinned: a NIC faults its
 * pages in when an access first touches them, and an access to a page that cannot be
 * faulted in (unmapped, PROT_NONE, read-only for a write) completes in error instead.
 * The engine reaches memory through the process's own mapping, so it asks the kernel to
 * fault the range in (madvise MADV_POPULATE_READ/WRITE, Linux 5.14) before it touches it,
 * and an error there fails the access: the process is never faulted on the peer's behalf.
 * Semantics and what is left of the race with a concurrent munmap: docs/semantics.md, "ODP".
 */
#ifndef SOFTRDMA_EMU_ODP_H
#define SOFTRDMA_EMU_ODP_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

struct mem_table;

/*
 * Faults [addr, addr + length) in, writable if write: true, or false if some page of it
 * cannot be. A kernel without MADV_POPULATE_* (before 5.14) cannot tell: true.
 */
bool odp_fault_in(void *addr, uint64_t length, bool write);

/*
 * ibv_advise_mr() on the device: the checks of ib_uverbs' ADVISE_MR and of mlx5 (see
 * mr_advice_target()), then PREFETCH / PREFETCH_WRITE fault the ranges in (with
 * IBV_ADVISE_MR_FLAG_FLUSH before returning, and failing with EFAULT; without it as a
 * best effort hint), and PREFETCH_NO_FAULT maps nothing that is not there already. 0 or
 * a positive errno.
 */
int odp_advise(struct mem_table *t, uint32_t pd_handle, int advice, uint32_t flags,
	       const struct ibv_sge *sg_list, uint32_t num_sge);

#endif /* SOFTRDMA_EMU_ODP_H */
