/* SPDX-License-Identifier: MIT */
/*
 * The private interface between libibverbs and a provider, as rdma-core 36-65 define it in
 * libibverbs/driver.h. No -dev package ships driver.h, so we declare exactly what we use, in
 * the layout of the release we build against (SOFTRDMA_RDMA_CORE, its major version; the
 * releases and their layouts are tabled in cmake/rdma_core_version.cmake). The static
 * asserts pin every size and offset libibverbs itself reads or writes: a one-slot shift in
 * the ops table would call the wrong function, so a mismatch must stop the build, never
 * reach a running program. tests/compat/matrix.sh checks each layout against the release's
 * own driver.h (SOFTRDMA_RELEASE_DRIVER_H below, and tests/compat/abi_layout.c).
 */
#ifndef SOFTRDMA_PROVIDER_ABI_H
#define SOFTRDMA_PROVIDER_ABI_H

#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#ifndef SOFTRDMA_PABI
#error "SOFTRDMA_PABI (the IBVERBS_PRIVATE_ version of the target rdma-core) must be defined"
#endif
#ifndef SOFTRDMA_RDMA_CORE
#error "SOFTRDMA_RDMA_CORE (the major version of the target rdma-core) must be defined"
#endif
#if SOFTRDMA_RDMA_CORE < 36 || SOFTRDMA_RDMA_CORE > 65
#error "no provider ABI layout for this rdma-core: see cmake/rdma_core_version.cmake"
#endif

#define PABI_STR2(x) #x
#define PABI_STR(x) PABI_STR2(x)
#define PABI_SYMVER "IBVERBS_PRIVATE_" PABI_STR(SOFTRDMA_PABI)
#define PABI_REGISTER_SYM "verbs_register_driver_" PABI_STR(SOFTRDMA_PABI)
#define PABI_SINCE(release) (SOFTRDMA_RDMA_CORE >= (release))

#ifdef SOFTRDMA_RELEASE_DRIVER_H
/*
 * The check build of tests/compat: the provider compiled against the release's own
 * driver.h (with -I to a copy of its build tree's include/) instead of the declarations
 * below, so every op we install and every private struct we touch is type-checked against
 * the real thing.
 */
#include <infiniband/driver.h>
#else

/* ccan/list.h's node, embedded in verbs_device. */
struct pabi_list_node {
	struct pabi_list_node *next, *prev;
};

enum {
	VERBS_MATCH_SENTINEL = 0,
	VERBS_MATCH_PCI = 1,
	VERBS_MATCH_MODALIAS = 2,
	VERBS_MATCH_DRIVER_ID = 3,
};

struct verbs_match_ent {
	void *driver_data;
	union {
		const char *modalias;
		uint64_t driver_id;
	} u;
	uint16_t vendor;
	uint16_t device;
	uint8_t kind;
};

/* Opaque to us: only libibverbs fills and reads it. */
struct verbs_sysfs_dev;

struct verbs_device;

struct verbs_device_ops {
	const char *name;
	uint32_t match_min_abi_version;
	uint32_t match_max_abi_version;
	const struct verbs_match_ent *match_table;
	const struct verbs_device_ops **static_providers;
	bool (*match_device)(struct verbs_sysfs_dev *sysfs_dev);
	struct verbs_context *(*alloc_context)(struct ibv_device *device, int cmd_fd,
					       void *private_data);
	struct verbs_context *(*import_context)(struct ibv_device *device, int cmd_fd);
	struct verbs_device *(*alloc_device)(struct verbs_sysfs_dev *sysfs_dev);
	void (*uninit_device)(struct verbs_device *device);
};

struct verbs_device {
	struct ibv_device device; /* must be first */
	const struct verbs_device_ops *ops;
	atomic_int refcount;
	struct pabi_list_node entry;
	struct verbs_sysfs_dev *sysfs;
	uint64_t core_support;
};

static inline struct verbs_device *verbs_get_device(const struct ibv_device *dev)
{
	return (struct verbs_device *)dev;
}

/* Not exported by libibverbs' headers either: the MR as every provider allocates it. */
enum ibv_mr_type {
	IBV_MR_TYPE_MR,
	IBV_MR_TYPE_NULL_MR,
	IBV_MR_TYPE_IMPORTED_MR,
	IBV_MR_TYPE_DMABUF_MR,
};

struct verbs_mr {
	struct ibv_mr ibv_mr;
	enum ibv_mr_type mr_type;
	int access;
};

enum verbs_qp_mask {
	VERBS_QP_XRCD = 1 << 0,
	VERBS_QP_EX = 1 << 1,
};

enum verbs_xrcd_mask {
	VERBS_XRCD_HANDLE = 1 << 0,
};

/* driver.h's: an XRC domain as libibverbs hands it to a provider. */
struct verbs_xrcd {
	struct ibv_xrcd xrcd;
	uint32_t comp_mask;
	uint32_t handle;
};

struct verbs_qp {
	union {
		struct ibv_qp qp;
		struct ibv_qp_ex qp_ex;
	};
	uint32_t comp_mask;
	struct verbs_xrcd *xrcd;
};

struct verbs_cq {
	union {
		struct ibv_cq cq;
		struct ibv_cq_ex cq_ex;
	};
};

struct verbs_srq {
	struct ibv_srq srq;
	enum ibv_srq_type srq_type;
	struct verbs_xrcd *xrcd;
	struct ibv_cq *cq;
	uint32_t srq_num;
};

/*
 * Every op a provider may supply, in libibverbs' (alphabetical) order, as each release lays
 * them out (cmake/rdma_core_version.cmake has the table of releases). Ops we do not
 * implement stay NULL, and verbs_set_ops() leaves libibverbs' own stubs there (EOPNOTSUPP,
 * or for alloc_buf/free_buf and, from 64 on, reg_mr_ex, a generic fallback). Slots we never
 * set are typed void * to keep this declaration short: only the order and the count matter
 * for them.
 */
struct ibv_mr_init_attr;

struct verbs_context_ops {
	int (*advise_mr)(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
			 struct ibv_sge *sg_list, uint32_t num_sges);
#if PABI_SINCE(64)
	void *alloc_buf;
#endif
	void *alloc_dm;
#if PABI_SINCE(59)
	void *alloc_dmah;
#endif
	struct ibv_mw *(*alloc_mw)(struct ibv_pd *pd, enum ibv_mw_type type);
	void *alloc_null_mr;
	void *alloc_parent_domain;
	struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
	void *alloc_td;
	void (*async_event)(struct ibv_context *context, struct ibv_async_event *event);
	void *attach_counters_point_flow;
	int (*attach_mcast)(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
	int (*bind_mw)(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind);
	int (*close_xrcd)(struct ibv_xrcd *xrcd);
	void (*cq_event)(struct ibv_cq *cq);
	struct ibv_ah *(*create_ah)(struct ibv_pd *pd, struct ibv_ah_attr *attr);
#if PABI_SINCE(65)
	void *create_comp_cntr;
#endif
	void *create_counters;
	struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe,
				    struct ibv_comp_channel *channel, int comp_vector);
	struct ibv_cq_ex *(*create_cq_ex)(struct ibv_context *context,
					  struct ibv_cq_init_attr_ex *init_attr);
	void *create_flow;
	void *create_flow_action_esp;
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
	struct ibv_qp *(*create_qp_ex)(struct ibv_context *context,
				       struct ibv_qp_init_attr_ex *qp_init_attr_ex);
	void *create_rwq_ind_table;
	struct ibv_srq *(*create_srq)(struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
	struct ibv_srq *(*create_srq_ex)(struct ibv_context *context,
					 struct ibv_srq_init_attr_ex *attr);
	void *create_wq;
#if PABI_SINCE(59)
	void *dealloc_dmah;
#endif
	int (*dealloc_mw)(struct ibv_mw *mw);
	int (*dealloc_pd)(struct ibv_pd *pd);
	void *dealloc_td;
	int (*dereg_mr)(struct verbs_mr *vmr);
	int (*destroy_ah)(struct ibv_ah *ah);
#if PABI_SINCE(65)
	void *destroy_comp_cntr;
#endif
	void *destroy_counters;
	int (*destroy_cq)(struct ibv_cq *cq);
	void *destroy_flow;
	void *destroy_flow_action;
	int (*destroy_qp)(struct ibv_qp *qp);
	void *destroy_rwq_ind_table;
	int (*destroy_srq)(struct ibv_srq *srq);
	void *destroy_wq;
	int (*detach_mcast)(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
#if PABI_SINCE(62)
	void *dm_export_dmabuf_fd;
#endif
#if PABI_SINCE(64)
	void *free_buf;
#endif
	void (*free_context)(struct ibv_context *context);
	void *free_dm;
	int (*get_srq_num)(struct ibv_srq *srq, uint32_t *srq_num);
	void *import_dm;
	void *import_mr;
	void *import_pd;
#if PABI_SINCE(65)
	void *inc_comp_cntr;
	void *inc_err_comp_cntr;
#endif
	int (*modify_cq)(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr);
	void *modify_flow_action_esp;
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
	void *modify_qp_rate_limit;
	int (*modify_srq)(struct ibv_srq *srq, struct ibv_srq_attr *attr, int attr_mask);
	void *modify_wq;
	struct ibv_qp *(*open_qp)(struct ibv_context *context, struct ibv_qp_open_attr *attr);
	struct ibv_xrcd *(*open_xrcd)(struct ibv_context *context,
				      struct ibv_xrcd_init_attr *attr);
	int (*poll_cq)(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
	void *post_srq_ops;
	int (*post_srq_recv)(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			     struct ibv_recv_wr **bad_wr);
#if PABI_SINCE(65)
	void *qp_attach_comp_cntr;
	void *query_comp_cntr_caps;
#endif
	int (*query_device_ex)(struct ibv_context *context,
			       const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr, size_t attr_size);
	void *query_ece;
	int (*query_port)(struct ibv_context *context, uint8_t port_num,
			  struct ibv_port_attr *port_attr);
#if PABI_SINCE(62)
	int (*query_port_speed)(struct ibv_context *context, uint32_t port_num, uint64_t *speed);
#endif
	int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
			struct ibv_qp_init_attr *init_attr);
	void *query_qp_data_in_order;
	int (*query_rt_values)(struct ibv_context *context, struct ibv_values_ex *values);
	int (*query_srq)(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr);
#if PABI_SINCE(65)
	void *read_comp_cntr;
#endif
	void *read_counters;
#if PABI_SINCE(65)
	void *read_err_comp_cntr;
#endif
	void *reg_dm_mr;
	void *reg_dmabuf_mr;
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va,
				 int access);
#if PABI_SINCE(59)
	struct ibv_mr *(*reg_mr_ex)(struct ibv_pd *pd, struct ibv_mr_init_attr *mr_init_attr);
#endif
	int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
	int (*rereg_mr)(struct verbs_mr *vmr, int flags, struct ibv_pd *pd, void *addr,
			size_t length, int access);
	int (*resize_cq)(struct ibv_cq *cq, int cqe);
#if PABI_SINCE(65)
	void *set_comp_cntr;
#endif
	void *set_ece;
#if PABI_SINCE(65)
	void *set_err_comp_cntr;
#endif
	void *unimport_dm;
	void *unimport_mr;
	void *unimport_pd;
};

/* Layouts shared by rdma-core 36-65 on LP64 (x86_64, aarch64, ...). */
static_assert(sizeof(struct verbs_match_ent) == 24, "verbs_match_ent layout");
static_assert(sizeof(struct verbs_device_ops) == 72, "verbs_device_ops layout");
static_assert(offsetof(struct verbs_device_ops, match_device) == 32, "verbs_device_ops layout");
static_assert(offsetof(struct verbs_device_ops, alloc_device) == 56, "verbs_device_ops layout");
static_assert(sizeof(struct ibv_device) == 664, "ibv_device layout");
static_assert(offsetof(struct verbs_device, ops) == 0x298, "verbs_device layout");
static_assert(offsetof(struct verbs_device, refcount) == 0x2a0, "verbs_device layout");
static_assert(offsetof(struct verbs_device, entry) == 0x2a8, "verbs_device layout");
static_assert(offsetof(struct verbs_device, sysfs) == 0x2b8, "verbs_device layout");
static_assert(offsetof(struct verbs_device, core_support) == 0x2c0, "verbs_device layout");
static_assert(sizeof(struct verbs_device) == 712, "verbs_device layout");
/*
 * Where libibverbs finds the ops we set, counted in each release's driver.h (slot indexes):
 * any slot added or lost in the declaration above moves one of these.
 */
enum {
#if PABI_SINCE(65)
	PABI_OPS = 93, PABI_AT_ALLOC_PD = 7, PABI_AT_DEREG_MR = 32, PABI_AT_POLL_CQ = 62,
	PABI_AT_QUERY_DEVICE_EX = 69, PABI_AT_QUERY_PORT = 71, PABI_AT_REG_MR = 82,
#elif PABI_SINCE(64)
	PABI_OPS = 83, PABI_AT_ALLOC_PD = 7, PABI_AT_DEREG_MR = 31, PABI_AT_POLL_CQ = 58,
	PABI_AT_QUERY_DEVICE_EX = 63, PABI_AT_QUERY_PORT = 65, PABI_AT_REG_MR = 74,
#elif PABI_SINCE(62)
	PABI_OPS = 81, PABI_AT_ALLOC_PD = 6, PABI_AT_DEREG_MR = 30, PABI_AT_POLL_CQ = 56,
	PABI_AT_QUERY_DEVICE_EX = 61, PABI_AT_QUERY_PORT = 63, PABI_AT_REG_MR = 72,
#elif PABI_SINCE(59)
	PABI_OPS = 79, PABI_AT_ALLOC_PD = 6, PABI_AT_DEREG_MR = 30, PABI_AT_POLL_CQ = 55,
	PABI_AT_QUERY_DEVICE_EX = 60, PABI_AT_QUERY_PORT = 62, PABI_AT_REG_MR = 70,
#else
	PABI_OPS = 76, PABI_AT_ALLOC_PD = 5, PABI_AT_DEREG_MR = 28, PABI_AT_POLL_CQ = 53,
	PABI_AT_QUERY_DEVICE_EX = 58, PABI_AT_QUERY_PORT = 60, PABI_AT_REG_MR = 68,
#endif
};
#define PABI_SLOT(op) (offsetof(struct verbs_context_ops, op) / sizeof(void *))
static_assert(sizeof(struct verbs_context_ops) == PABI_OPS * sizeof(void *), "ops count");
static_assert(PABI_SLOT(alloc_pd) == PABI_AT_ALLOC_PD, "ops order");
static_assert(PABI_SLOT(dereg_mr) == PABI_AT_DEREG_MR, "ops order");
static_assert(PABI_SLOT(poll_cq) == PABI_AT_POLL_CQ, "ops order");
static_assert(PABI_SLOT(query_device_ex) == PABI_AT_QUERY_DEVICE_EX, "ops order");
static_assert(PABI_SLOT(query_port) == PABI_AT_QUERY_PORT, "ops order");
static_assert(PABI_SLOT(reg_mr) == PABI_AT_REG_MR, "ops order");
static_assert(PABI_SLOT(unimport_pd) == PABI_OPS - 1, "ops order");
static_assert(offsetof(struct verbs_mr, mr_type) == sizeof(struct ibv_mr), "verbs_mr layout");
static_assert(offsetof(struct ibv_qp_ex, qp_base) == 0, "verbs_qp layout");
static_assert(offsetof(struct verbs_qp, comp_mask) == sizeof(struct ibv_qp_ex), "verbs_qp");

#endif /* SOFTRDMA_RELEASE_DRIVER_H */

/* The four private entry points we use; resolved at run time by symbol version. */
struct provider_abi {
	void (*register_driver)(const struct verbs_device_ops *ops);
	void *(*init_and_alloc_context)(struct ibv_device *device, int cmd_fd, size_t alloc_size,
					struct verbs_context *context_offset, uint32_t driver_id);
	void (*set_ops)(struct verbs_context *vctx, const struct verbs_context_ops *ops);
	void (*uninit_context)(struct verbs_context *vctx);
};

#endif
