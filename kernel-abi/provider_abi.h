/* SPDX-License-Identifier: MIT */
/*
 * The private interface between libibverbs and a provider, as rdma-core 36-58 define it in
 * libibverbs/driver.h (IBVERBS_PRIVATE_34 for 36-56, IBVERBS_PRIVATE_57 for 57-58: same
 * layouts, new symbol version). No -dev package ships driver.h, so we declare exactly what we
 * use. The static asserts below pin every size and offset libibverbs itself reads or writes:
 * a one-slot shift in the ops table would call the wrong function, so a mismatch must stop
 * the build, never reach a running program.
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

#define PABI_STR2(x) #x
#define PABI_STR(x) PABI_STR2(x)
#define PABI_SYMVER "IBVERBS_PRIVATE_" PABI_STR(SOFTRDMA_PABI)
#define PABI_REGISTER_SYM "verbs_register_driver_" PABI_STR(SOFTRDMA_PABI)

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

struct verbs_xrcd;

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
 * Every op a provider may supply, in libibverbs' (alphabetical) order. Ops we do not
 * implement stay NULL, and verbs_set_ops() leaves libibverbs' own EOPNOTSUPP stubs there.
 * Slots we never set are typed void * to keep this declaration short: only the order and
 * the count matter for them.
 */
struct verbs_context_ops {
	void *advise_mr;
	void *alloc_dm;
	struct ibv_mw *(*alloc_mw)(struct ibv_pd *pd, enum ibv_mw_type type);
	void *alloc_null_mr;
	void *alloc_parent_domain;
	struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
	void *alloc_td;
	void (*async_event)(struct ibv_context *context, struct ibv_async_event *event);
	void *attach_counters_point_flow;
	int (*attach_mcast)(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
	int (*bind_mw)(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind);
	void *close_xrcd;
	void (*cq_event)(struct ibv_cq *cq);
	struct ibv_ah *(*create_ah)(struct ibv_pd *pd, struct ibv_ah_attr *attr);
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
	int (*dealloc_mw)(struct ibv_mw *mw);
	int (*dealloc_pd)(struct ibv_pd *pd);
	void *dealloc_td;
	int (*dereg_mr)(struct verbs_mr *vmr);
	int (*destroy_ah)(struct ibv_ah *ah);
	void *destroy_counters;
	int (*destroy_cq)(struct ibv_cq *cq);
	void *destroy_flow;
	void *destroy_flow_action;
	int (*destroy_qp)(struct ibv_qp *qp);
	void *destroy_rwq_ind_table;
	int (*destroy_srq)(struct ibv_srq *srq);
	void *destroy_wq;
	int (*detach_mcast)(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
	void (*free_context)(struct ibv_context *context);
	void *free_dm;
	void *get_srq_num;
	void *import_dm;
	void *import_mr;
	void *import_pd;
	int (*modify_cq)(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr);
	void *modify_flow_action_esp;
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
	void *modify_qp_rate_limit;
	int (*modify_srq)(struct ibv_srq *srq, struct ibv_srq_attr *attr, int attr_mask);
	void *modify_wq;
	void *open_qp;
	void *open_xrcd;
	int (*poll_cq)(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
	void *post_srq_ops;
	int (*post_srq_recv)(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			     struct ibv_recv_wr **bad_wr);
	int (*query_device_ex)(struct ibv_context *context,
			       const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr, size_t attr_size);
	void *query_ece;
	int (*query_port)(struct ibv_context *context, uint8_t port_num,
			  struct ibv_port_attr *port_attr);
	int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
			struct ibv_qp_init_attr *init_attr);
	void *query_qp_data_in_order;
	int (*query_rt_values)(struct ibv_context *context, struct ibv_values_ex *values);
	int (*query_srq)(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr);
	void *read_counters;
	void *reg_dm_mr;
	void *reg_dmabuf_mr;
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va,
				 int access);
	int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
	int (*rereg_mr)(struct verbs_mr *vmr, int flags, struct ibv_pd *pd, void *addr,
			size_t length, int access);
	int (*resize_cq)(struct ibv_cq *cq, int cqe);
	void *set_ece;
	void *unimport_dm;
	void *unimport_mr;
	void *unimport_pd;
};

/* The four private entry points we use; resolved at run time by symbol version. */
struct provider_abi {
	void (*register_driver)(const struct verbs_device_ops *ops);
	void *(*init_and_alloc_context)(struct ibv_device *device, int cmd_fd, size_t alloc_size,
					struct verbs_context *context_offset, uint32_t driver_id);
	void (*set_ops)(struct verbs_context *vctx, const struct verbs_context_ops *ops);
	void (*uninit_context)(struct verbs_context *vctx);
};

/* Layouts shared by rdma-core 36-58 on LP64 (x86_64, aarch64, ...). */
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
static_assert(sizeof(struct verbs_context_ops) == 76 * sizeof(void *), "verbs_context_ops");
static_assert(offsetof(struct verbs_context_ops, alloc_pd) == 5 * sizeof(void *), "ops order");
static_assert(offsetof(struct verbs_context_ops, dereg_mr) == 28 * sizeof(void *), "ops order");
static_assert(offsetof(struct verbs_context_ops, poll_cq) == 53 * sizeof(void *), "ops order");
static_assert(offsetof(struct verbs_context_ops, query_device_ex) == 58 * sizeof(void *),
	      "ops order");
static_assert(offsetof(struct verbs_context_ops, reg_mr) == 68 * sizeof(void *), "ops order");
static_assert(offsetof(struct verbs_context_ops, unimport_pd) == 75 * sizeof(void *),
	      "ops order");
static_assert(offsetof(struct verbs_mr, mr_type) == sizeof(struct ibv_mr), "verbs_mr layout");
static_assert(offsetof(struct ibv_qp_ex, qp_base) == 0, "verbs_qp layout");
static_assert(offsetof(struct verbs_qp, comp_mask) == sizeof(struct ibv_qp_ex), "verbs_qp");

#endif
