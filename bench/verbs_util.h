/* SPDX-License-Identifier: MIT */
#ifndef SOFTRDMA_BENCH_VERBS_UTIL_H
#define SOFTRDMA_BENCH_VERBS_UTIL_H

#include <stdint.h>
#include <infiniband/verbs.h>

#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define SQ_DEPTH 128	/* perftest's default TX depth */
#define RQ_DEPTH 128

double now_s(void);		/* CLOCK_MONOTONIC, seconds */
long rss_kb(void);		/* this process's VmRSS, or -1 */
/* softrdma0, opened (prints why not and returns NULL); *list is to be freed. */
struct ibv_context *open_softrdma(struct ibv_device ***list);
/* An RC QP through INIT, RTR (to dest_qpn at gid, GID index 0) and RTS, as perftest does. */
int to_init(struct ibv_qp *qp);
int to_rtr(struct ibv_qp *qp, uint32_t dest_qpn, const union ibv_gid *gid);
int to_rts(struct ibv_qp *qp);
/* An RC QP reporting to cq, SQ_DEPTH and RQ_DEPTH deep, one SGE a WR; NULL on failure. */
struct ibv_qp *create_rc_qp(struct ibv_pd *pd, struct ibv_cq *cq);
/* One signaled RDMA WRITE of the 8 bytes at src (in lkey's region) to raddr under rkey. */
int post_write8(struct ibv_qp *qp, uint64_t wr_id, const uint64_t *src, uint32_t lkey,
		uint64_t raddr, uint32_t rkey);

#endif
