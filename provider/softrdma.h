/* SPDX-License-Identifier: MIT */
/* The provider's objects: each wraps the libibverbs object the application sees. */
#ifndef SOFTRDMA_PROVIDER_H
#define SOFTRDMA_PROVIDER_H

#include <pthread.h>
#include <stdatomic.h>
#include <infiniband/verbs.h>

#include "emu/limits.h"
#include "emu/qp.h"
#include "kernel-abi/provider_abi.h"
#include "provider/cq_ex.h"
#include "provider/qp_ex.h"
#include "emu/qp.h"

struct sr_device {
	struct verbs_device vdev;
};

struct emu_engine;
struct emu_cq;
struct emu_qp;
struct emu_srq;
struct mem_region;

/*
 * The objects of a context, kept as the kernel's uverbs keeps them (objects.c): every object
 * has a handle, its slot in the context's table, which ibv_*.handle shows; a verb that names
 * an object finds it by that handle, so a garbled handle or context gets an error instead of
 * a crash. An object created on others (a QP on its PD, CQs and SRQ) is a user of each, and
 * destroying an object that still has users is EBUSY (the kernel's usecnt).
 */
enum sr_obj_type {
	/* Released in the reverse of this order when a context closes with objects left. */
	SR_OBJ_PD, SR_OBJ_XRCD, SR_OBJ_CQ, SR_OBJ_AH, SR_OBJ_MR, SR_OBJ_MW, SR_OBJ_SRQ, SR_OBJ_QP,
	SR_OBJ_TYPES
};

#define SR_OBJ_MAX_PARENTS	4	/* a QP: its PD, send CQ, receive CQ and SRQ */

struct sr_xrc_domain;
struct sr_xrc_tgt;

struct sr_obj {
	enum sr_obj_type type;
	uint32_t handle;
	/* Under the table's lock: */
	uint32_t users;			/* objects created on this one */
	int calls;			/* verbs running on it; -1 while it is destroyed */
	int nparents;
	struct sr_obj *parents[SR_OBJ_MAX_PARENTS];	/* the objects it is a user of */
	struct sr_obj *next_kept;	/* on the context's list of kept objects (events.c) */
};

/* What a verb is given: the object as the application names it. */
struct sr_obj_ref {
	struct sr_obj *obj;		/* where the provider's object would be; not read */
	uint32_t handle;		/* the application's copy */
	enum sr_obj_type type;
};

struct sr_obj_table {
	pthread_mutex_t lock;		/* the slots, and users/calls/parents of every object */
	struct sr_obj **slots;		/* by handle; NULL: free, or reserved by a creation */
	uint32_t nslots;
	uint32_t *free_handles;		/* a stack of the free slots */
	uint32_t nfree;
};

/*
 * One object's events on one pipe: how many records were written, and how many the
 * application took with ibv_get_cq_event/ibv_get_async_event (the provider's hook runs
 * after each read). The kernel's "events reported" at destroy is what was written less
 * what is still unread (events.c).
 */
struct sr_event_count {
	_Atomic uint32_t raised;
	_Atomic uint32_t taken;
};

struct sr_context {
	struct verbs_context vctx;
	struct emu_engine *engine;
	int async_notify_fd;	/* write end of the pipe behind context.async_fd */
	int async_nowait_fd;	/* a non-blocking description of its read end, or -1 */
	int gid_count;		/* entries in the GID table libibverbs reads from sysfs */
	union ibv_gid gids[EMU_MAX_GIDS];	/* that table, read when the context opened */
	struct sr_obj_table objects;
	pthread_mutex_t drain_lock;	/* one event pipe rewritten at a time (events.c) */
	struct sr_obj *kept;	/* destroyed objects whose memory stays until close */
	bool closing;		/* free_context is releasing what the application left */
};

struct sr_pd {
	struct ibv_pd ibv_pd;
	struct sr_obj obj;
	uint32_t id;		/* the PD's identity in the engine (never reused in a process) */
};

struct sr_mr {
	struct verbs_mr vmr;
	struct mem_region *region;
	struct sr_obj obj;
};

/* An address handle: what the engine sends a UD datagram to (emu/qp.h). */
struct sr_ah {
	struct ibv_ah ibv_ah;
	struct emu_av av;
	struct sr_obj obj;
};

/* A memory window: its slot in the engine's key table (emu/mr.h). */
struct sr_mw {
	struct ibv_mw ibv_mw;
	struct mem_region *window;
	struct sr_obj obj;
};

/* One ibv_open_xrcd(): a handle on an XRC domain, which handles of the process share (xrcd.c). */
struct sr_xrcd {
	struct verbs_xrcd vxrcd;
	struct sr_obj obj;
	struct sr_xrc_domain *domain;
};

struct sr_srq {
	struct verbs_srq vsrq;
	struct emu_srq *srq;
	struct sr_obj obj;
	struct sr_event_count async;
};

/* The extended interfaces keep their state right before the verbs object (see their headers). */
struct sr_cq {
	struct cq_ex_poller poller;	/* ibv_create_cq_ex only */
	struct verbs_cq vcq;
	struct emu_cq *cq;
	bool extended;
	struct ibv_comp_channel *channel;	/* our copy: the application's may be garbled */
	struct sr_obj obj;
	_Atomic uint32_t comp_taken;	/* events ibv_get_cq_event took (emu counts the raised) */
	struct sr_event_count async;
};

struct sr_qp {
	struct qp_ex_builder wr_builder;	/* IBV_QP_INIT_ATTR_SEND_OPS_FLAGS only */
	struct verbs_qp vqp;
	struct emu_qp *qp;
	bool extended;
	struct sr_obj obj;
	struct sr_event_count async;
	/* An XRC target: the QP its handles share, and the next handle on it (xrcd.c). */
	struct sr_xrc_tgt *tgt;
	struct sr_qp *next_share;
};

static_assert(QP_EX_BUILDER_PLACED_BEFORE(struct sr_qp, wr_builder, vqp.qp_ex),
	      "the wr_* builder must sit right before the QP");
static_assert(CQ_EX_POLLER_PLACED_BEFORE(struct sr_cq, poller, vcq.cq_ex),
	      "the cq_ex poller must sit right before the CQ");

static inline struct sr_context *to_sr_context(struct ibv_context *ibctx)
{
	return (struct sr_context *)((char *)ibctx - offsetof(struct sr_context, vctx.context));
}

#define sr_container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

static inline struct sr_pd *to_sr_pd(struct ibv_pd *pd)
{
	return (struct sr_pd *)pd;
}

extern struct provider_abi sr_abi;

/* query.c */
int sr_query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
		       struct ibv_device_attr_ex *attr, size_t attr_size);
int sr_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *attr);
/* Reads the GID table libibverbs reads (sysfs), once: modify_qp and create_ah need no fd. */
void sr_load_gids(struct sr_context *ctx, const struct ibv_device *device);

/* ops_since_59.c: ops of newer rdma-core releases */
#if PABI_SINCE(59)
struct ibv_mr *sr_reg_mr_ex(struct ibv_pd *pd, struct ibv_mr_init_attr *attr);
#endif
#if PABI_SINCE(62)
int sr_query_port_speed(struct ibv_context *context, uint32_t port_num, uint64_t *speed);
#endif

static inline struct sr_cq *to_sr_cq(struct ibv_cq *cq)
{
	return (struct sr_cq *)((char *)cq - offsetof(struct sr_cq, vcq.cq));
}

static inline struct sr_qp *to_sr_qp(struct ibv_qp *qp)
{
	return (struct sr_qp *)((char *)qp - offsetof(struct sr_qp, vqp.qp));
}

static inline struct sr_ah *to_sr_ah(struct ibv_ah *ah)
{
	return (struct sr_ah *)ah;
}

static inline struct sr_mw *to_sr_mw(struct ibv_mw *mw)
{
	return (struct sr_mw *)mw;
}

static inline struct sr_xrcd *to_sr_xrcd(struct ibv_xrcd *xrcd)
{
	return (struct sr_xrcd *)((char *)xrcd - offsetof(struct sr_xrcd, vxrcd.xrcd));
}

static inline uint32_t sr_xrcd_handle(const struct ibv_xrcd *xrcd)
{
	return ((const struct verbs_xrcd *)xrcd)->handle;
}

static inline struct sr_srq *to_sr_srq(struct ibv_srq *srq)
{
	return (struct sr_srq *)((char *)srq - offsetof(struct sr_srq, vsrq.srq));
}

/* The application's reference to an object: what a verb was handed. */
#define SR_REF(o, ibobj, t)	((struct sr_obj_ref){ &(o)->obj, (ibobj)->handle, (t) })
#define SR_PD_REF(pd)		SR_REF(to_sr_pd(pd), pd, SR_OBJ_PD)
#define SR_CQ_REF(cq)		SR_REF(to_sr_cq(cq), cq, SR_OBJ_CQ)
#define SR_QP_REF(qp)		SR_REF(to_sr_qp(qp), qp, SR_OBJ_QP)
#define SR_SRQ_REF(srq)		SR_REF(to_sr_srq(srq), srq, SR_OBJ_SRQ)
/* An ibv_xrcd has no handle of its own: libibverbs' verbs_xrcd around it carries it. */
#define SR_XRCD_REF(xrcd)	((struct sr_obj_ref){ &to_sr_xrcd(xrcd)->obj,		\
						      sr_xrcd_handle(xrcd), SR_OBJ_XRCD })

/* objects.c (the rules are at its top) */
int sr_objects_init(struct sr_obj_table *t);
void sr_objects_fini(struct sr_obj_table *t);
/* ibv_close_device: destroys what is left, children first, waiting for no acknowledgement. */
void sr_objects_release(struct sr_context *ctx);
/*
 * Starts a creation: the parents must be live objects of ctx (else ENOENT or EINVAL), the
 * device must be below its limit for the type (else ENOMEM); o gets a handle, not yet
 * visible, and becomes a user of each parent. Then sr_obj_publish(), or sr_obj_unmake() if
 * the creation fails after all.
 */
int sr_obj_create(struct sr_context *ctx, struct sr_obj *o, enum sr_obj_type type,
		  const struct sr_obj_ref *parents, int nparents);
void sr_obj_publish(struct sr_context *ctx, struct sr_obj *o);
/* The handle is free again, the parents lose a user, the device's count drops. */
void sr_obj_unmake(struct sr_context *ctx, struct sr_obj *o);
/*
 * A creation verb that failed: o's handle goes back as sr_obj_unmake() gives it (o NULL:
 * sr_obj_create() itself failed, there is none), mem, the object's memory, is freed, and the
 * verb returns this NULL with errno err.
 */
void *sr_obj_create_failed(struct sr_context *ctx, struct sr_obj *o, void *mem, int err);
/* A verb on the object: 0 until sr_obj_leave(), or ENOENT, EINVAL, EBUSY (being destroyed). */
int sr_obj_enter(struct sr_context *ctx, struct sr_obj_ref ref);
void sr_obj_leave(struct sr_context *ctx, struct sr_obj *o);
/* A destroy: 0 (nothing finds it any more), ENOENT, EINVAL, or EBUSY (users, or a verb running). */
int sr_obj_destroy_begin(struct sr_context *ctx, struct sr_obj_ref ref);
void sr_obj_destroy_cancel(struct sr_context *ctx, struct sr_obj *o);	/* it stays after all */
/*
 * A teardown whose step (the engine's, or settling events) failed with err: the object stays
 * (sr_obj_destroy_cancel(); true, the destroy verb returns err), unless the context is
 * closing, when it goes anyway.
 */
bool sr_obj_teardown_refused(struct sr_context *ctx, struct sr_obj *o, int err);
/* The end of a teardown that keeps nothing (err: its step's, or 0): o unmade, mem freed. */
int sr_obj_teardown_free(struct sr_context *ctx, struct sr_obj *o, void *mem, int err);
/* A destroy verb: sr_obj_destroy_begin(), then the type's teardown (sr_*_teardown). */
int sr_obj_destroy(struct sr_context *ctx, struct sr_obj_ref ref);
/* ibv_rereg_mr(IBV_REREG_MR_CHANGE_PD): o becomes a user of parent instead of old. */
int sr_obj_swap_parent(struct sr_context *ctx, struct sr_obj *o, struct sr_obj *old,
		       struct sr_obj_ref parent);
/*
 * The end of a QP's or an SRQ's teardown: with keep (sr_async_settle_unmake), its memory stays
 * until the context closes (events.c says why); else it is freed now, with the mutex and
 * condition of its libibverbs part.
 */
void sr_obj_keep_or_free(struct sr_context *ctx, struct sr_obj *o, bool keep,
			 pthread_mutex_t *mutex, pthread_cond_t *cond);
void sr_kept_free(struct sr_context *ctx);

/* Each type's destroy once the object is taken (also what ibv_close_device runs). */
int sr_pd_teardown(struct sr_context *ctx, struct sr_pd *pd);
int sr_cq_teardown(struct sr_context *ctx, struct sr_cq *cq);
int sr_ah_teardown(struct sr_context *ctx, struct sr_ah *ah);
int sr_mr_teardown(struct sr_context *ctx, struct sr_mr *mr);
int sr_mw_teardown(struct sr_context *ctx, struct sr_mw *mw);
int sr_srq_teardown(struct sr_context *ctx, struct sr_srq *srq);
int sr_qp_teardown(struct sr_context *ctx, struct sr_qp *qp);
int sr_xrcd_teardown(struct sr_context *ctx, struct sr_xrcd *xrcd);

/* events.c (the rules are at its top) */
struct sr_event_pipe {
	int rd, wr;		/* what libibverbs reads; what records are written to */
	int nowait_fd;		/* a non-blocking description of rd, or -1 */
	size_t rec_size;
};

#define SR_SETTLE_MAX	2	/* a CQ: its comp events and its async events */

/* One object's events on one pipe, settled at its destroy. */
struct sr_settle {
	struct sr_event_pipe pipe;
	uint64_t element;	/* what its records carry: the ibv object's address */
	enum sr_obj_type type;
	uint32_t raised, taken;
	uint32_t reported;	/* out: what the application must acknowledge */
	bool needs_drain;
};

/*
 * For objects that raise no more events: removes their unread records from the pipes and
 * sets each reported. 0, or the errno of a pipe that cannot be read without blocking
 * (nothing is removed then).
 */
int sr_events_settle(struct sr_context *ctx, struct sr_settle *items, int n);
/* Waits until *acked >= reported (and *acked2 >= reported2 if acked2), unless closing. */
void sr_events_wait_acked(struct sr_context *ctx, pthread_mutex_t *mutex, pthread_cond_t *cond,
			  const uint32_t *acked, uint32_t reported, const uint32_t *acked2,
			  uint32_t reported2);
/* The object type an async event names (SR_OBJ_TYPES: none). */
enum sr_obj_type sr_async_event_type(uint32_t event_type);
void sr_async_event(struct ibv_context *context, struct ibv_async_event *event);
struct sr_event_pipe sr_async_pipe(struct sr_context *ctx);
/*
 * The end of a QP's or SRQ's destroy, once the engine has let go of it (so it raises no
 * more async events): its unread events are removed, its handle is freed, and the destroy
 * waits for the application to acknowledge the events it read (mutex, cond, acked: the
 * ibv object's own). true: a pipe could not be settled, and the object's memory must be
 * kept (sr_obj_keep_or_free) for records that may still name it.
 */
bool sr_async_settle_unmake(struct sr_context *ctx, struct sr_obj *o, uint64_t element,
			    const struct sr_event_count *async, pthread_mutex_t *mutex,
			    pthread_cond_t *cond, const uint32_t *acked);
struct sr_event_pipe sr_comp_pipe(struct ibv_comp_channel *channel);
/* A second, non-blocking description of a pipe end, or -1 with errno. */
int sr_open_nowait(int fd);

/* cq.c */
struct ibv_cq *sr_create_cq(struct ibv_context *context, int cqe, struct ibv_comp_channel *channel,
			    int comp_vector);
int sr_destroy_cq(struct ibv_cq *cq);
int sr_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int sr_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int sr_resize_cq(struct ibv_cq *cq, int cqe);
void sr_cq_event(struct ibv_cq *cq);

/* ah.c */
struct ibv_ah *sr_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int sr_destroy_ah(struct ibv_ah *ah);

/* qp.c */
struct ibv_qp *sr_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
int sr_destroy_qp(struct ibv_qp *qp);
int sr_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
int sr_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
int sr_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
int sr_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
		struct ibv_qp_init_attr *init_attr);
int sr_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
int sr_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
struct ibv_qp *sr_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr);
struct ibv_qp *sr_open_qp(struct ibv_context *context, struct ibv_qp_open_attr *attr);
struct ibv_cq_ex *sr_create_cq_ex(struct ibv_context *context,
				  struct ibv_cq_init_attr_ex *attr);

/* srq.c */
struct ibv_srq *sr_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
struct ibv_srq *sr_create_srq_ex(struct ibv_context *context, struct ibv_srq_init_attr_ex *attr);
int sr_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int attr_mask);
int sr_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr);
int sr_destroy_srq(struct ibv_srq *srq);
int sr_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
int sr_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);

/* xrcd.c: XRC domains, and the target QPs their handles share */
struct ibv_xrcd *sr_open_xrcd(struct ibv_context *context, struct ibv_xrcd_init_attr *attr);
int sr_close_xrcd(struct ibv_xrcd *xrcd);
/* The domain's identity in the engine (emu_qp_init.xrcd, emu_srq_init.xrcd): never 0. */
uint32_t sr_xrcd_id(const struct sr_xrcd *xrcd);
/* A new target QP qp (made on xrcd) becomes the domain's, with qp as its one handle. */
int sr_xrc_tgt_add(struct sr_xrcd *xrcd, struct sr_qp *qp);
/* ibv_open_qp: qp becomes another handle on the domain's target QP qp_num; 0 or EINVAL. */
int sr_xrc_tgt_share(struct sr_xrcd *xrcd, uint32_t qp_num, struct sr_qp *qp);
/* A handle goes: true if it was the last, and the emulated QP must be destroyed. */
bool sr_xrc_tgt_leave(struct sr_qp *qp);

/* pd_mr.c */
struct ibv_pd *sr_alloc_pd(struct ibv_context *context);
int sr_dealloc_pd(struct ibv_pd *pd);
struct ibv_mr *sr_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va,
			 int access);
int sr_dereg_mr(struct verbs_mr *vmr);
int sr_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
		 struct ibv_sge *sg_list, uint32_t num_sge);
int sr_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd, void *addr, size_t length,
		int access);
struct ibv_mw *sr_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int sr_dealloc_mw(struct ibv_mw *mw);
int sr_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind);

#endif
