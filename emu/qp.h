/* SPDX-License-Identifier: MIT */
/* What the provider asks of the engine: the process's engine, and queue pairs on it. */
#ifndef SOFTRDMA_EMU_QP_H
#define SOFTRDMA_EMU_QP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "emu/cq.h"
#include "emu/qp_state.h"

struct emu_engine;
struct emu_qp;
struct emu_srq;

/* A UD address handle: the provider allocates it, the engine reads where it points. */
struct emu_ah {
	struct ibv_ah ibv_ah;		/* what the application holds */
	uint8_t dgid[16];
	uint8_t sgid[16];		/* the GID at ah_attr.grh.sgid_index */
	uint8_t hop_limit;
	uint8_t traffic_class;
};
struct mem_table;
struct mem_region;

/* A memory window as the provider allocates it: the engine binds the window it points to. */
struct emu_mw {
	struct ibv_mw ibv_mw;		/* what the application holds */
	struct mem_region *window;	/* its slot in the key table (emu/mr.h) */
};

/* The process's engine, started on first use and stopped with its last user. */
int emu_engine_get(struct emu_engine **out);
void emu_engine_put(struct emu_engine *e);
struct mem_table *emu_engine_mem(struct emu_engine *e);
const char *emu_engine_backend(struct emu_engine *e);

struct emu_qp_init {
	enum ibv_qp_type type;
	uint32_t pd_handle;
	struct emu_cq *send_cq, *recv_cq;
	struct emu_srq *srq;		/* receives come from it; NULL: the QP's own queue */
	struct ibv_qp_cap cap;		/* in: asked for; out: granted */
	bool sq_sig_all;
	uint64_t handle;		/* async events carry it */
	int async_fd;			/* where they go */
	_Atomic uint32_t *events_raised;	/* counts those written, if not NULL */
};

int emu_qp_create(struct emu_engine *e, struct emu_qp_init *init, struct emu_qp **out);
int emu_qp_destroy(struct emu_qp *qp);
uint32_t emu_qp_num(const struct emu_qp *qp);
enum ibv_qp_state emu_qp_state(struct emu_qp *qp);

/* sgid: the GID at attr->ah_attr.grh.sgid_index, when attr_mask has IBV_QP_AV. */
int emu_qp_modify(struct emu_qp *qp, const struct ibv_qp_attr *attr, int attr_mask,
		  const struct qp_attr_limits *lim, const uint8_t sgid[16]);
int emu_qp_query(struct emu_qp *qp, struct ibv_qp_attr *attr, struct ibv_qp_init_attr *init);
int emu_qp_post_send(struct emu_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
int emu_qp_post_recv(struct emu_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);

#endif
