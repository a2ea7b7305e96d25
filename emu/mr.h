/* SPDX-License-Identifier: MIT */
/*
 * Memory-key table of the emulated NIC and the one remote-access check.
 *
 * A registration never pins or touches the memory it names: it only records
 * (iova, length) -> host_addr and hands out a key.  Keys are opaque 32-bit
 * values; lkey == rkey for every region, as on rxe and mlx5.
 *
 * Threading: register, reregister and deregister may be called from any
 * thread; the check functions are lock-free, allocation-free and O(1) (but for
 * an ODP region, whose pages they fault in: emu/odp.h) and may run
 * concurrently with them.  A successful check returns a counted reference:
 * the region's attributes and the memory behind host_ptr stay valid until the
 * matching mr_put(), even if the region is deregistered meanwhile.  A
 * deregistration kills the key for new lookups at once and then waits for the
 * outstanding references, so a thread holding a reference must not
 * deregister or reregister that region.
 *
 * Semantics and the differences from rxe/mlx5 are in docs/semantics.md.
 */
#ifndef SOFTRDMA_EMU_MR_H
#define SOFTRDMA_EMU_MR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

/* The most regions one table can hold; keys keep at least 8 random bits. */
#define MEM_TABLE_MAX_REGIONS	(1u << 24)

struct mem_table;

enum mem_kind { MEM_KIND_FREE, MEM_KIND_REGION, MEM_KIND_WINDOW };

/* The part of a window's rkey its consumer chooses (ibv_inc_rkey()); the rest is fixed. */
#define MW_KEY_MASK	0xffu

/*
 * A slot of the table: a registered region (MR), or a memory window, a key that narrows a
 * region's range and rights. A window's iova, length and access are its own, its memory
 * is its target region's; it is live only while bound.
 */
struct mem_region {
	/*
	 * Read-only for users.  Stable while the region is registered and
	 * the caller owns it, or while the caller holds a reference.
	 */
	uint64_t	iova;		/* first address the peer names */
	uint64_t	length;
	void		*host_addr;	/* where iova maps in this process */
	uint32_t	lkey;
	uint32_t	rkey;		/* == lkey */
	int		access;		/* IBV_ACCESS_* */
	uint32_t	pd_handle;
	enum mem_kind	kind;

	/* Windows only. */
	uint8_t		mw_type;	/* IBV_MW_TYPE_1 or IBV_MW_TYPE_2 */
	bool		bound;
	uint32_t	qpn;		/* type 2: the QP it was bound through */
	struct mem_region *target;	/* the region it narrows */
	uint32_t	target_key;	/* that region's key when bound */

	/* Private to emu/mr.c. */
	_Atomic uint64_t	ctl;	/* key | live bit | reference count */
	struct mem_table	*table;
};

enum mem_access_result {
	MEM_ACCESS_OK,
	MEM_ACCESS_BAD_KEY,		/* no live region has this key */
	MEM_ACCESS_PD_MISMATCH,		/* region belongs to another PD */
	MEM_ACCESS_NO_RIGHT,		/* region lacks the needed access */
	MEM_ACCESS_OUT_OF_BOUNDS,	/* range not inside the region */
	MEM_ACCESS_MISALIGNED,		/* atomic not one aligned 8-byte word */
	MEM_ACCESS_QP_NO_RIGHT,		/* qp_access_flags lack the right */
	MEM_ACCESS_PEER_FAULT,		/* same-host path: the requester's memory is gone */
	MEM_ACCESS_MW_QP,		/* a type 2 window bound through another QP */
	MEM_ACCESS_PAGE_FAULT,		/* a page of the range cannot be faulted in (ODP), or is gone */
};

/* The name of the rule a result broke, for the log: "wrong key", "out of range", ... */
const char *mem_access_rule(enum mem_access_result r);

/*
 * What the key named when a remote access was refused (for the log line, filled only on
 * failure): the region's or window's range, PD and rights as they were when checked.
 */
struct mem_refusal {
	bool		found;		/* a live region or window had the key */
	enum mem_kind	kind;
	uint64_t	iova, length;
	uint32_t	pd_handle;
	int		access;
	uint8_t		mw_type;
	uint32_t	qpn;		/* type 2 window: the QP it was bound through */
};

/*
 * Room for max_regions MRs and max_windows windows: 0, EINVAL (max_regions 0, or the two
 * above MEM_TABLE_MAX_REGIONS), ENOMEM, or errno.
 */
int mem_table_create(struct mem_table **out, uint32_t max_regions, uint32_t max_windows);

/* No other call may run concurrently; live regions are dropped. */
void mem_table_destroy(struct mem_table *t);
/* Its keys as same-host requesters see them (emu/direct.h), or NULL. */
struct direct_keys *mem_table_direct(const struct mem_table *t);

/*
 * The implicit ODP region (mlx5's rule: start 0, length U64_MAX, IB_ACCESS_ON_DEMAND): the
 * whole address space of the process, each page faulted in when an access touches it.
 */
static inline bool mr_is_implicit_odp(const void *addr, uint64_t length, int access)
{
	return !addr && length == UINT64_MAX && (access & IBV_ACCESS_ON_DEMAND);
}

/*
 * ib_check_mr_access() rules plus what this device supports:
 * 0, EINVAL (REMOTE_WRITE/REMOTE_ATOMIC without LOCAL_WRITE, unknown bits),
 * or EOPNOTSUPP (ZERO_BASED, FLUSH_GLOBAL/FLUSH_PERSISTENT).
 */
int mr_check_access_flags(int access);

/*
 * O(1) in length; the memory is never touched.  Returns 0, EINVAL (flags;
 * addr + length or iova + length wraps; addr and iova differ in page offset;
 * an implicit ODP region with an iova or HUGETLB), EFAULT (NULL addr with
 * length > 0, but for the implicit ODP region: NULL, SIZE_MAX, ON_DEMAND),
 * ENOMEM (table full), or EOPNOTSUPP.
 */
int mr_register(struct mem_table *t, uint32_t pd_handle, void *addr,
		uint64_t length, uint64_t iova, int access,
		struct mem_region **out);

/*
 * flags: IBV_REREG_MR_CHANGE_TRANSLATION / _PD / _ACCESS, as in
 * ibv_rereg_mr(); arguments whose flag is clear are ignored.  Keys do not
 * change.  Waits for outstanding references like mr_deregister().  On error
 * the region is unchanged and still registered.
 */
int mr_reregister(struct mem_table *t, struct mem_region *mr, int flags,
		  uint32_t pd_handle, void *addr, uint64_t length,
		  uint64_t iova, int access);

/*
 * Key dead at once; returns once no reference is held.  0 or EINVAL.  Windows
 * bound to the region are dead from then on.
 */
int mr_deregister(struct mem_table *t, struct mem_region *mr);

/* A window, not bound (its key opens nothing yet): 0, EINVAL (type) or ENOMEM. */
int mw_alloc(struct mem_table *t, uint32_t pd_handle, enum ibv_mw_type type,
	     struct mem_region **out);

/* Key dead at once; returns once no access through it is running.  0 or EINVAL. */
int mw_dealloc(struct mem_table *t, struct mem_region *w);

struct mw_bind_req {
	uint32_t	new_rkey;	/* only its MW_KEY_MASK bits count: the rest stays */
	bool		has_mr;
	uint32_t	mr_lkey;	/* the region to bind to, of the window's PD */
	uint64_t	addr;
	uint64_t	length;		/* 0 (or no MR): unbinds a type 1 window */
	int		access;		/* remote rights the window grants */
	uint32_t	qp_pd_handle;	/* the QP the bind was posted on */
	uint32_t	qpn;
};

/*
 * Binds (or rebinds, type 1) a window to a range of a region, with the checks of
 * the IBTA (C10-72 to C10-75) and rxe_check_bind_mw().  The old key is dead at
 * once and accesses under it have finished when this returns.  0 or EINVAL.
 */
int mw_bind(struct mem_table *t, struct mem_region *w, const struct mw_bind_req *b);

/*
 * Local or remote (Send with Invalidate) invalidation of a bound type 2 window
 * of pd_handle under exactly rkey; from the wire also only through the QP it was
 * bound on.  Its key is dead and its accesses finished on return.  0 or EINVAL.
 */
int mw_invalidate(struct mem_table *t, uint32_t rkey, uint32_t pd_handle, bool from_wire,
		  uint32_t qpn);

/*
 * THE remote-access check, for every incoming WRITE / WRITE_WITH_IMM
 * (needed = IBV_ACCESS_REMOTE_WRITE), READ (IBV_ACCESS_REMOTE_READ) and
 * ATOMIC (IBV_ACCESS_REMOTE_ATOMIC, length 8), by the QP qpn.  Checks, in rxe's
 * order: QP right, atomic length, zero length, key, PD, region right, bounds,
 * atomic alignment, and last, for an ODP region, its pages faulted in
 * (MEM_ACCESS_PAGE_FAULT where one cannot be: emu/odp.h).  A window's key is
 * checked as a window (PD, QP for type 2, its rights, its range) and then
 * against its region, which must still be registered and hold the range.  Any other needed is MEM_ACCESS_QP_NO_RIGHT
 * (invalid request).
 * A zero-length WRITE/READ is MEM_ACCESS_OK with no key lookup,
 * *mr_ref == NULL and *host_ptr == NULL.  On MEM_ACCESS_OK with a non-NULL
 * *mr_ref the caller must mr_put() it; on failure both outputs are NULL.
 */
enum mem_access_result mr_check_remote_access(struct mem_table *t, uint32_t rkey,
					      uint32_t qp_pd_handle, uint32_t qpn,
					      int qp_access_flags, int needed,
					      uint64_t iova, uint64_t length,
					      struct mem_region **mr_ref,
					      void **host_ptr);
/* The same check, saying into *why (if not NULL) what the key named when it refuses. */
enum mem_access_result mr_check_remote_access_why(struct mem_table *t, uint32_t rkey,
						  uint32_t qp_pd_handle, uint32_t qpn,
						  int qp_access_flags, int needed,
						  uint64_t iova, uint64_t length,
						  struct mem_region **mr_ref,
						  void **host_ptr, struct mem_refusal *why);

/*
 * The same check for a local SGE: needed is 0 for a source (send, write
 * payload) or IBV_ACCESS_LOCAL_WRITE for a target (receive, read response,
 * atomic result).  A zero-length SGE is MEM_ACCESS_OK without a lookup.  A
 * window's key is no lkey (MEM_ACCESS_BAD_KEY).
 */
enum mem_access_result mr_check_local_access(struct mem_table *t, uint32_t lkey,
					     uint32_t pd_handle, int needed,
					     uint64_t addr, uint64_t length,
					     struct mem_region **mr_ref,
					     void **host_ptr);

/*
 * ibv_advise_mr()'s lookup, with mlx5's errors (get_prefetchable_mr(), pagefault_mr()):
 * 0 with a reference and where [addr, addr + length) lies in this process, ENOENT (no
 * region has the key, or it is not an ODP region), EINVAL (the key is a window's), EPERM
 * (another PD; write advised on a region without LOCAL_WRITE), EFAULT (out of range).
 */
int mr_advice_target(struct mem_table *t, uint32_t lkey, uint32_t pd_handle, bool write,
		     uint64_t addr, uint64_t length, struct mem_region **mr_ref, void **host_ptr);

/* Drops what a successful check holds (for a window: it and its region). */
void mr_put(struct mem_region *mr);

/* Requester's completion status when the responder refuses (rxe's NAKs). */
enum ibv_wc_status mem_access_remote_wc_status(enum mem_access_result r);

/* Completion status of a work request whose local SGE was refused. */
enum ibv_wc_status mem_access_local_wc_status(enum mem_access_result r);

#endif /* SOFTRDMA_EMU_MR_H */
