/* SPDX-License-Identifier: MIT */
/* What the provider asks of the engine: the process's engine, and queue pairs on it. */
#ifndef SOFTRDMA_EMU_QP_H
#define SOFTRDMA_EMU_QP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "emu/cq.h"
#include "emu/mr.h"
#include "emu/qp_state.h"

struct emu_engine;
struct emu_qp;
struct emu_srq;

/* Where a UD datagram goes: what an address handle resolves to (the provider keeps it). */
struct emu_av {
	uint8_t dgid[16];
	uint8_t sgid[16];		/* the GID at ah_attr.grh.sgid_index */
	uint8_t hop_limit;
	uint8_t traffic_class;
};

/*
 * A send work request in the engine's terms. The provider translates every ibv_send_wr
 * (and every request the ibv_wr_* builders make) into one at post time, as rdma-core's rxe
 * provider does (convert_send_wr), so the engine never reads an application's object.
 */
struct emu_send_wr {
	uint64_t wr_id;
	enum ibv_wr_opcode opcode;
	unsigned int send_flags;
	uint32_t imm_data;		/* network order, as in ibv_send_wr */
	uint32_t invalidate_rkey;	/* SEND_WITH_INV, LOCAL_INV */
	uint32_t xrc_srqn;		/* XRC: the SRQ at the target (wr.qp_type.xrc.remote_srqn) */
	int num_sge;
	const struct ibv_sge *sg_list;	/* read at post time only */
	union {
		struct {
			uint64_t remote_addr;
			uint32_t rkey;
		} rdma;
		struct {
			uint64_t remote_addr;
			uint32_t rkey;
			uint64_t compare_add, swap;
		} atomic;
		struct {
			const struct emu_av *av;	/* read at post time only */
			uint32_t remote_qpn, remote_qkey;
		} ud;
		struct {
			struct mem_region *window;
			struct mw_bind_req req;	/* the engine fills qp_pd_handle and qpn */
		} bind;
	};
};

/* The process's engine, started on first use and stopped with its last user. */
int emu_engine_get(struct emu_engine **out);
void emu_engine_put(struct emu_engine *e);
struct mem_table *emu_engine_mem(struct emu_engine *e);
const char *emu_engine_backend(struct emu_engine *e);
/*
 * An application thread's pass of the engine (emu/progress.c), made with no lock of emu/
 * held: the watches it dispatched, or -1 when the engine thread needs the CPU (another
 * thread drives, the backend needs it, or it has work; also SOFTRDMA_POLL_PROGRESS=0).
 */
int emu_engine_progress(struct emu_engine *e);

/*
 * Writes one async event record for libibverbs' ibv_get_async_event() to fd, the write end
 * of the device context's event pipe: the one writer of every event, the engine's and the
 * provider's. element is the ibv_qp/ibv_cq/ibv_srq pointer the event names. A record
 * written is counted in *raised, if not NULL: the provider's destroy settles the object's
 * events with it (provider/events.c).
 */
void emu_async_event(int fd, uint64_t element, enum ibv_event_type event,
		     _Atomic uint32_t *raised);

/*
 * XRC: an initiator (IBV_QPT_XRC_SEND) has a send CQ and no receive side; a target
 * (IBV_QPT_XRC_RECV) has no PD, CQs or queues, only its domain (xrcd, nonzero), and
 * delivers into the SRQ of that domain each request names.
 */
struct emu_qp_init {
	enum ibv_qp_type type;
	uint32_t pd_handle;
	uint32_t xrcd;
	struct emu_cq *send_cq, *recv_cq;
	struct emu_srq *srq;		/* receives come from it; NULL: the QP's own queue */
	struct ibv_qp_cap cap;		/* in: asked for; out: granted */
	bool sq_sig_all;
	uint64_t handle;		/* async events carry it */
	int async_fd;			/* where they go */
	_Atomic uint32_t *events_raised;	/* counts those written, if not NULL */
};

int emu_qp_create(struct emu_engine *e, struct emu_qp_init *init, struct emu_qp **out);
/* An XRC target's events go to another of its handles from now on (ibv_open_qp shares it). */
void emu_qp_set_owner(struct emu_qp *qp, uint64_t handle, int async_fd,
		      _Atomic uint32_t *events_raised);
int emu_qp_destroy(struct emu_qp *qp);
uint32_t emu_qp_num(const struct emu_qp *qp);
enum ibv_qp_state emu_qp_state(struct emu_qp *qp);

/* sgid: the GID at attr->ah_attr.grh.sgid_index, when attr_mask has IBV_QP_AV. */
int emu_qp_modify(struct emu_qp *qp, const struct ibv_qp_attr *attr, int attr_mask,
		  const struct qp_attr_limits *lim, const uint8_t sgid[16]);
int emu_qp_query(struct emu_qp *qp, struct ibv_qp_attr *attr, struct ibv_qp_init_attr *init);
/*
 * Takes in what QP qpn's peer sent before now, as a NIC has taken every frame that arrived
 * before a later message on another path (the rdma_cm's DREQ: librdmacm-shim/qp.c). By
 * number, not by object, because the application may be destroying that QP meanwhile;
 * nothing happens if it is gone or not connected. Any thread, no lock held.
 */
void emu_qp_take_arrived(struct emu_engine *e, uint32_t qpn);
/*
 * Posts n work requests, all or none: on an error nothing is queued and *bad is the index
 * of the first WR refused. 0, EINVAL (a WR this QP cannot take, or the QP's state), ENOMEM
 * (no room in the send queue).
 */
int emu_qp_post_send(struct emu_qp *qp, const struct emu_send_wr *wr, unsigned int n,
		     unsigned int *bad);
int emu_qp_post_recv(struct emu_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);

/* The BTH destination QP of every multicast packet (IBTA 9.6.1.1). */
#define EMU_MULTICAST_QPN	0xffffffu

/* A multicast GID as the kernel's rdma_is_multicast_addr(): ff00::/8, or ::ffff:224.0.0.0/4. */
static inline bool emu_gid_is_multicast(const uint8_t gid[16])
{
	static const uint8_t v4_mapped[12] = { [10] = 0xff, [11] = 0xff };

	if (gid[0] == 0xff)
		return true;
	for (int i = 0; i < 12; i++)
		if (gid[i] != v4_mapped[i])
			return false;
	return (gid[12] & 0xf0) == 0xe0;
}

/*
 * UD multicast (emu/mcast.c). The caller has checked what the kernel's ib_attach_mcast()
 * checks (a UD QP, a multicast GID). Attach: 0 (also when already attached), ENOMEM past
 * EMU_MAX_MCAST_GRP / EMU_MAX_MCAST_QP_ATTACH / EMU_MAX_TOTAL_MCAST_QP_ATTACH, or the errno
 * of the group's socket. Detach: 0, or EINVAL when qp is not attached to mgid.
 */
int emu_mcast_attach(struct emu_qp *qp, const uint8_t mgid[16]);
int emu_mcast_detach(struct emu_qp *qp, const uint8_t mgid[16]);
/* How many groups qp is attached to (a user's destroy of the QP is EBUSY until 0). */
int emu_mcast_attached(struct emu_qp *qp);

#endif
