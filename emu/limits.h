/* SPDX-License-Identifier: MIT */
/*
 * What the emulated NIC supports. The provider advertises exactly these numbers through
 * query_device/query_port, and they hold at exactly these values, per process (one process is
 * one device, as rxe counts per device): the engine counts MRs, windows (emu/mr.c) and SRQs
 * (emu/srq.c), the provider's object table the PDs, CQs, QPs and AHs (provider/objects.c).
 * There is no second copy of any limit.
 */
#ifndef SOFTRDMA_EMU_LIMITS_H
#define SOFTRDMA_EMU_LIMITS_H

#include <stdint.h>
#include <infiniband/verbs.h>

#define EMU_VENDOR_ID		0xffffff	/* no IEEE OUI: a software device (rxe says the same) */
#define EMU_VENDOR_PART_ID	0x5352	/* "SR" */
#define EMU_HW_VER		1
#define EMU_FW_VER		"0.1.0"
#define EMU_BOARD_ID		"softrdma (user-space NIC over TCP)"

#define EMU_MAX_MR_SIZE		UINT64_MAX
#define EMU_PAGE_SIZE_CAP	0xfffff000u	/* 4 KiB and larger */
#define EMU_MAX_MSG_SIZE	(1u << 31)	/* the IBTA's 2 GiB message limit */

#define EMU_MAX_PD		65536
#define EMU_MAX_MR		65536
#define EMU_MAX_MW		65536	/* besides the MRs: the key table holds both */
#define EMU_MAX_AH		65536
#define EMU_MAX_QP		16384
#define EMU_MAX_QP_WR		16384
#define EMU_MAX_SGE		32
#define EMU_MAX_SGE_RD		32
#define EMU_MAX_INLINE_DATA	256
#define EMU_MAX_CQ		16384
/* mlx5's (log_max_cq_sz 22): libfabric's ofi_rxm asks for 196608 by default, above rxe's
 * 32767. The ring is allocated whole, as a NIC's CQ buffer is, but its pages are touched
 * only as completions land in them. */
#define EMU_MAX_CQE		4194303
#define EMU_MAX_SRQ		16384
#define EMU_MAX_SRQ_WR		16384
#define EMU_MAX_SRQ_SGE		32
#define EMU_MAX_XRCD		65536	/* XRC domain handles (ibv_open_xrcd), per process */
#define EMU_MAX_QP_RD_ATOM	128	/* outstanding RDMA READ/atomic per QP, each direction */
#define EMU_MAX_RES_RD_ATOM	(EMU_MAX_QP * EMU_MAX_QP_RD_ATOM)
#define EMU_MAX_PKEYS		1
/*
 * Multicast (emu/mcast.c): rxe's 56 QPs per group; fewer groups than rxe's 8192, because
 * every group is one UDP socket joined to an IP multicast group on each interface of the
 * device (docs/semantics.md, "Multicast"), and a process's descriptors are not unlimited.
 */
#define EMU_MAX_MCAST_GRP	64
#define EMU_MAX_MCAST_QP_ATTACH	56
#define EMU_MAX_TOTAL_MCAST_QP_ATTACH	(EMU_MAX_MCAST_GRP * EMU_MAX_MCAST_QP_ATTACH)
#define EMU_LOCAL_CA_ACK_DELAY	15

/*
 * Advertised capability flags: only what the engine really does. RNR NAKs are part of the
 * RC data path; an SRQ can be resized with the WQEs posted to it kept; memory windows are
 * type 1 and type 2B (bound to a QP); XRC as mlx5 has it (docs/semantics.md, "XRC"). UD
 * multicast has no capability flag of its own: its limits above say it is there.
 */
#define EMU_DEVICE_CAP_FLAGS	(IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE |	\
				 IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B |	\
				 IBV_DEVICE_XRC)
#define EMU_ATOMIC_CAP		IBV_ATOMIC_HCA	/* atomic among this device's operations */

/*
 * On-demand paging (emu/odp.h): every access of every transport faults an ODP region's pages
 * in, so each transport reports what it has: RC all six, as mlx5 and rxe; UD sends and
 * receives, as rxe (mlx5: SEND and SRQ_RECV); UC what UC does (mlx5 and rxe report none).
 * The implicit region (the whole address space) as mlx5; no XRC (its caps are 0).
 */
#define EMU_ODP_GENERAL_CAPS	(IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT)
#define EMU_ODP_RC_CAPS		(IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |		\
				 IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |		\
				 IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV)
#define EMU_ODP_UC_CAPS		(IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |		\
				 IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_SRQ_RECV)
#define EMU_ODP_UD_CAPS		(IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |		\
				 IBV_ODP_SUPPORT_SRQ_RECV)

#define EMU_NUM_PORTS		1
#define EMU_PORT_MTU		IBV_MTU_4096
#define EMU_PORT_MAX_MSG_UD	4096	/* a UD message fits the path MTU */
/* RoCE-like: GIDs are IP addresses. CM_SUP waits for the rdma_cm drop-in. */
#define EMU_PORT_CAP_FLAGS	(IBV_PORT_IP_BASED_GIDS)
/* Reported as 1X EDR (25 Gb/s): the order of what TCP over loopback moves on a laptop. */
#define EMU_PORT_WIDTH		1
#define EMU_PORT_SPEED		32
#define EMU_MAX_GIDS		128	/* host addresses beyond this are not published */

#endif
