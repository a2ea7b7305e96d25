// SPDX-License-Identifier: MIT
/*
 * Limits: each count query_device advertises, probed by creating objects up to it and one
 * more (when it is small enough to probe: rxe's are mostly 2^20); and what still works, and
 * how what cannot work fails, once the process has no file descriptor left.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "conf.h"

#define PROBE_MAX	65536	/* larger limits are reported, not probed */

enum limit_kind { L_PD, L_CQ, L_QP, L_SRQ, L_AH, L_MR, L_MW };

struct limit_env {
	struct conf_env e;
	struct ibv_cq *cq;	/* the QPs' */
	uint8_t *buf;		/* what the MRs register */
};

static void *make_one(enum limit_kind k, struct limit_env *l)
{
	struct ibv_qp_init_attr qinit = {
		.send_cq = l->cq, .recv_cq = l->cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_srq_init_attr sinit = { .attr = { .max_wr = 1, .max_sge = 1 } };
	struct ibv_ah_attr ah = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = l->e.gid, .hop_limit = 1,
			 .sgid_index = (uint8_t)conf_opts.gid_index },
	};

	switch (k) {
	case L_PD: return ibv_alloc_pd(l->e.ctx);
	case L_CQ: return ibv_create_cq(l->e.ctx, 1, NULL, NULL, 0);
	case L_QP: return ibv_create_qp(l->e.pd, &qinit);
	case L_SRQ: return ibv_create_srq(l->e.pd, &sinit);
	case L_AH: return ibv_create_ah(l->e.pd, &ah);
	case L_MR: return ibv_reg_mr(l->e.pd, l->buf, BUF_SIZE, 0);
	case L_MW: return ibv_alloc_mw(l->e.pd, IBV_MW_TYPE_2);
	}
	return NULL;
}

static int limit_of(enum limit_kind k, const struct ibv_device_attr *a)
{
	switch (k) {
	case L_PD: return a->max_pd;
	case L_CQ: return a->max_cq;
	case L_QP: return a->max_qp;
	case L_SRQ: return a->max_srq;
	case L_AH: return a->max_ah;
	case L_MR: return a->max_mr;
	case L_MW: return a->max_mw;
	}
	return 0;
}

/*
 * reached= how many were created, against the advertised max (the fixture's two PDs
 * count); over= the errno of the first refusal. Nothing is destroyed: the process exits.
 */
static void limit_case(const struct conf_case *c)
{
	enum limit_kind k = (enum limit_kind)c->a;
	int existing = k == L_PD ? 2 : 0, n = 0, max;
	struct ibv_device_attr a;
	struct limit_env l;

	env_open(&l.e);
	if (ibv_query_device(l.e.ctx, &a))
		setup_failed("query_device", errno);
	max = limit_of(k, &a);
	if (max > PROBE_MAX) {
		out("max=beyond_probe");
		out_end();
	}
	l.buf = buf_alloc(BUF_SIZE);
	if (!(l.cq = ibv_create_cq(l.e.ctx, 1, NULL, NULL, 0)))
		setup_failed("create_cq", errno);
	if (k == L_CQ)
		existing = 1;
	errno = 0;
	while (n + existing <= max && make_one(k, &l))
		n++;
	if (n + existing == max)
		out("reached=max");
	else
		out("reached=max%+d", n + existing - max);
	out_ret("over", errno);
	out_end();
}

/* Lowers the soft fd limit to what is open now and takes the few fds left. */
static void exhaust_fds(void)
{
	struct rlimit r;
	int fd = dup(0);

	if (fd < 0 || getrlimit(RLIMIT_NOFILE, &r))
		setup_failed("dup", errno);
	close(fd);
	r.rlim_cur = (rlim_t)fd + 64;
	if (setrlimit(RLIMIT_NOFILE, &r))
		setup_failed("setrlimit", errno);
	while (dup(0) >= 0)
		;
	if (errno != EMFILE)
		setup_failed("fill_fds", errno);
}

/*
 * No fd left: INIT -> RTR, an AH and a QP need none on a kernel device (the QP: while its
 * device has room for it without a new socket); a completion channel needs one.
 */
static void fd_limit_case(const struct conf_case *c)
{
	struct ibv_ah_attr ah = {
		.is_global = 1, .port_num = 1,
		.grh = { .hop_limit = 1, .sgid_index = (uint8_t)conf_opts.gid_index },
	};
	struct qp_params p;
	struct conf_env e;
	struct conf_end spare;
	struct ibv_comp_channel *ch;
	struct ibv_qp_init_attr qinit;
	int err;

	(void)c;
	env_open(&e);
	qp_params_default(&p, IBV_QPT_RC);
	end_create(&e, &p, &e.a);
	end_create(&e, &p, &spare);	/* a listener with room, on softrdma */
	if ((err = qp_to_init(e.a.qp, &p, 0, 0)))
		setup_failed("init", err);
	ah.grh.dgid = e.gid;
	qinit = (struct ibv_qp_init_attr){ .send_cq = e.a.scq, .recv_cq = e.a.rcq,
					   .qp_type = IBV_QPT_RC,
					   .cap = { .max_send_wr = 1, .max_recv_wr = 1,
						    .max_send_sge = 1, .max_recv_sge = 1 } };
	if (ibv_destroy_qp(spare.qp))
		setup_failed("destroy_qp", errno);
	exhaust_fds();
	out_ret("rtr", qp_to_rtr(&e, e.a.qp, &p, e.a.qp->qp_num, 0, 0));
	out_ret("ah", ibv_create_ah(e.pd, &ah) ? 0 : errno);
	out_ret("qp", ibv_create_qp(e.pd, &qinit) ? 0 : errno);
	ch = ibv_create_comp_channel(e.ctx);
	out_ret("channel", ch ? 0 : errno);
	out_end();
}

const struct conf_case conf_cases_limits[] = {
	{ "limit_pd", limit_case, L_PD, 0 },
	{ "limit_cq", limit_case, L_CQ, 0 },
	{ "limit_qp", limit_case, L_QP, 0 },
	{ "limit_srq", limit_case, L_SRQ, 0 },
	{ "limit_ah", limit_case, L_AH, 0 },
	{ "limit_mr", limit_case, L_MR, 0 },
	{ "limit_mw", limit_case, L_MW, 0 },
	{ "fd_limit_rtr_ah_qp_channel", fd_limit_case, 0, 0 },
	{ NULL, NULL, 0, 0 },
};
