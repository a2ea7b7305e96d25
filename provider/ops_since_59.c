// SPDX-License-Identifier: MIT
/*
 * The ops rdma-core's ops table gained after 58 that a soft device can honestly offer:
 * ibv_reg_mr_ex (59) and ibv_query_port_speed (62). What we leave out (DMA handles, device
 * memory dma-bufs, completion counters) stays libibverbs' EOPNOTSUPP stub, and
 * ibv_alloc_buf its generic page-aligned allocation: docs/semantics.md has the list and why.
 */
#include <errno.h>
#include <stdint.h>

#include "softrdma.h"
#include "emu/limits.h"

#if PABI_SINCE(59)
/*
 * ibv_reg_mr_ex(3) of an address range, with or without its own IOVA, is ibv_reg_mr_iova2.
 * A dma-buf (IBV_REG_MR_MASK_FD) or a DMA handle is refused as ibv_reg_dmabuf_mr and
 * ibv_alloc_dmah are: the emulated NIC reaches memory only through the process's own
 * addresses. From 64 on, libibverbs turns an ibv_alloc_buf() buffer into an address before
 * calling us.
 */
struct ibv_mr *sr_reg_mr_ex(struct ibv_pd *pd, struct ibv_mr_init_attr *attr)
{
	const uint64_t supported = IBV_REG_MR_MASK_IOVA | IBV_REG_MR_MASK_ADDR;
	uint64_t iova;

	if (attr->comp_mask & ~supported) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(attr->comp_mask & IBV_REG_MR_MASK_ADDR)) {
		errno = EINVAL;
		return NULL;
	}
	iova = (attr->comp_mask & IBV_REG_MR_MASK_IOVA) ? attr->iova : (uintptr_t)attr->addr;
	return sr_reg_mr(pd, attr->addr, attr->length, iova, attr->access);
}
#endif

#if PABI_SINCE(62)
/* Lanes of an IBV_WIDTH-style code, as query_port reports it; 0 for a code we do not know. */
static unsigned int port_lanes(unsigned int width)
{
	switch (width) {
	case 1: return 1;
	case 2: return 4;
	case 4: return 8;
	case 8: return 12;
	case 16: return 2;
	default: return 0;
	}
}

/* Data rate of one lane of an IBV_SPEED-style code, in 100 Mb/s. */
static unsigned int lane_rate(unsigned int speed)
{
	switch (speed) {
	case 1: return 25;	/* SDR 2.5 Gb/s */
	case 2: return 50;	/* DDR */
	case 4: return 100;	/* QDR */
	case 8: return 100;	/* FDR10 */
	case 16: return 140;	/* FDR */
	case 32: return 250;	/* EDR */
	case 64: return 500;	/* HDR */
	case 128: return 1000;	/* NDR */
	case 256: return 2000;	/* XDR */
	default: return 0;
	}
}

/* ibv_query_port_speed(3): the rate query_port advertises (emu/limits.h), width x lane. */
int sr_query_port_speed(struct ibv_context *context, uint32_t port_num, uint64_t *speed)
{
	(void)context;
	if (port_num != 1)
		return EINVAL;
	*speed = (uint64_t)port_lanes(EMU_PORT_WIDTH) * lane_rate(EMU_PORT_SPEED);
	return *speed ? 0 : EOPNOTSUPP;
}
#endif
