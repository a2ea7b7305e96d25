// SPDX-License-Identifier: MIT
/* Resources of a case: the device, QPs and their connection, buffers, bounded waits. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conf.h"

struct conf_opts conf_opts = {
	.dev = "softrdma0",
	.gid_index = 0,
	.wait_ms = 3000,
	.quiet_ms = 300,
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static void nap(void)
{
	struct timespec ts = { .tv_nsec = 100000 };

	nanosleep(&ts, NULL);
}

void env_open(struct conf_env *e)
{
	struct ibv_device **list;
	int n;

	memset(e, 0, sizeof(*e));
	list = ibv_get_device_list(&n);
	if (!list)
		setup_failed("device_list", errno);
	for (int i = 0; i < n && !e->ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), conf_opts.dev))
			e->ctx = ibv_open_device(list[i]);
	if (!e->ctx)
		setup_failed("open_device", ENODEV);
	if (ibv_query_gid(e->ctx, 1, conf_opts.gid_index, &e->gid))
		setup_failed("query_gid", errno);
	e->pd = ibv_alloc_pd(e->ctx);
	e->pd2 = ibv_alloc_pd(e->ctx);
	if (!e->pd || !e->pd2)
		setup_failed("alloc_pd", errno);
}

void qp_params_default(struct qp_params *p, enum ibv_qp_type type)
{
	memset(p, 0, sizeof(*p));
	p->type = type;
	p->access = ACCESS_ALL;
	p->rnr_retry = 7;
	p->min_rnr_timer = 1;
	p->timeout = 14;
	p->retry_cnt = 7;
	p->cqe = 64;
	p->max_send_wr = 32;
	p->max_recv_wr = 32;
}

void end_create(struct conf_env *e, const struct qp_params *p, struct conf_end *end)
{
	struct ibv_qp_init_attr init = {
		.qp_type = p->type,
		.sq_sig_all = 1,
		.cap = {
			.max_send_wr = p->max_send_wr,
			.max_recv_wr = p->max_recv_wr,
			.max_send_sge = 2,
			.max_recv_sge = 2,
			.max_inline_data = 64,
		},
	};

	end->scq = ibv_create_cq(e->ctx, p->cqe, NULL, p->channel, 0);
	end->rcq = ibv_create_cq(e->ctx, p->cqe, NULL, p->channel, 0);
	if (!end->scq || !end->rcq)
		setup_failed("create_cq", errno);
	init.send_cq = end->scq;
	init.recv_cq = end->rcq;
	init.srq = p->srq;
	end->qp = ibv_create_qp(p->pd ? p->pd : e->pd, &init);
	if (!end->qp)
		setup_failed("create_qp", errno);
}

int qp_to_init(struct ibv_qp *qp, const struct qp_params *p, int extra, int missing)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = p->access,
		.qkey = 0x11111111,
		.sq_psn = 0,
	};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	mask |= p->type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS;
	return ibv_modify_qp(qp, &attr, (mask | extra) & ~missing);
}

int qp_to_rtr(struct conf_env *e, struct ibv_qp *qp, const struct qp_params *p,
	      uint32_t dest_qpn, int extra, int missing)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = dest_qpn,
		.rq_psn = 0,
		.max_dest_rd_atomic = 4,
		.min_rnr_timer = p->min_rnr_timer,
		.ah_attr = {
			.is_global = 1,
			.port_num = 1,
			.grh = {
				.dgid = e->gid,
				.sgid_index = (uint8_t)conf_opts.gid_index,
				.hop_limit = 1,
			},
		},
	};
	int mask = IBV_QP_STATE;

	if (p->type != IBV_QPT_UD)
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	/* Responder resources and the RNR timer: RC and XRC's target (the kernel's table). */
	if (p->type == IBV_QPT_RC || p->type == IBV_QPT_XRC_RECV)
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	return ibv_modify_qp(qp, &attr, (mask | extra) & ~missing);
}

int qp_to_rts(struct ibv_qp *qp, const struct qp_params *p, int extra, int missing)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTS,
		.timeout = p->timeout,
		.retry_cnt = p->retry_cnt,
		.rnr_retry = p->rnr_retry,
		.sq_psn = 0,
		.max_rd_atomic = 4,
		.dest_qp_num = 1,	/* only for the case that adds DEST_QPN where it is not allowed */
	};
	int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;

	if (p->type == IBV_QPT_XRC_RECV)
		mask |= IBV_QP_TIMEOUT;
	if (p->type == IBV_QPT_RC || p->type == IBV_QPT_XRC_SEND)
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	return ibv_modify_qp(qp, &attr, (mask | extra) & ~missing);
}

void env_pair(struct conf_env *e, const struct qp_params *pa, const struct qp_params *pb)
{
	struct qp_params da, db;
	int err;

	if (!pa) {
		qp_params_default(&da, IBV_QPT_RC);
		pa = &da;
	}
	if (!pb) {
		qp_params_default(&db, IBV_QPT_RC);
		pb = &db;
	}
	end_create(e, pa, &e->a);
	end_create(e, pb, &e->b);
	/* Both reach RTR before either sends, as applications exchanging QPNs do. */
	if ((err = qp_to_init(e->a.qp, pa, 0, 0)) || (err = qp_to_init(e->b.qp, pb, 0, 0)))
		setup_failed("init", err);
	if ((err = qp_to_rtr(e, e->a.qp, pa, e->b.qp->qp_num, 0, 0)) ||
	    (err = qp_to_rtr(e, e->b.qp, pb, e->a.qp->qp_num, 0, 0)))
		setup_failed("rtr", err);
	if ((err = qp_to_rts(e->a.qp, pa, 0, 0)) || (err = qp_to_rts(e->b.qp, pb, 0, 0)))
		setup_failed("rts", err);
}

enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;

	memset(&attr, 0, sizeof(attr));
	if (ibv_query_qp(qp, &attr, IBV_QP_STATE, &init))
		return (enum ibv_qp_state)-1;
	return attr.qp_state;
}

void wait_state(struct ibv_qp *qp, enum ibv_qp_state s, bool want, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while ((qp_state(qp) == s) != want && now_ms() < end)
		nap();
}

int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n < 0 ? -1 : 1;
		if (now_ms() >= end)
			return 0;
		nap();
	}
}

void *buf_alloc(size_t len)
{
	void *p = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);

	if (!p)
		setup_failed("alloc", ENOMEM);
	memset(p, 0, len);
	return p;
}

struct ibv_mr *mr_reg(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, addr, len, access);

	if (!mr)
		setup_failed("reg_mr", errno);
	return mr;
}

int post_recv(struct ibv_qp *qp, void *addr, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = addr ? 1 : 0 }, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

int post_send(struct ibv_qp *qp, enum ibv_wr_opcode op, void *addr, uint32_t len, uint32_t lkey,
	      uint64_t raddr, uint32_t rkey, uint64_t cmp, uint64_t swap)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = 1,
		.sg_list = &sge,
		.num_sge = addr ? 1 : 0,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.imm_data = htonl(IMM_VALUE),
	}, *bad;

	if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = cmp;
		wr.wr.atomic.swap = swap;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(qp, &wr, &bad);
}
