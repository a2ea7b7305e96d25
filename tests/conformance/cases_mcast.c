// SPDX-License-Identifier: MIT
/*
 * UD multicast attach and detach, as uverbs and ib_attach_mcast() answer them: a QP that is
 * not UD and a GID that is not multicast are EINVAL, a second attach of the same group is
 * ok (uverbs finds it on the QP's list), a detach of a group not attached is EINVAL, a
 * destroy of an attached QP is EBUSY (uverbs_free_qp), and the advertised limits
 * (max_mcast_qp_attach, max_mcast_grp) hold, one more being ENOMEM (rxe_mcast.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"

enum mcast_kind { M_RC_QP, M_UNICAST_GID, M_TWICE, M_DETACH_NOT_ATTACHED, M_DESTROY_ATTACHED,
		  M_QPS_PER_GROUP, M_GROUPS };

#define PROBE_MAX	65536	/* larger limits are reported, not probed */

/* ff0e::<n>, or with v4 ::ffff:239.1.<n>: a multicast GID either way. */
static union ibv_gid group(unsigned int n, bool v4)
{
	union ibv_gid g = { .raw = { 0xff, 0x0e } };

	if (v4) {
		memset(g.raw, 0, 10);
		g.raw[10] = g.raw[11] = 0xff;
		g.raw[12] = 239;
		g.raw[13] = 1;
	}
	g.raw[14] = (uint8_t)(n >> 8);
	g.raw[15] = (uint8_t)n;
	return g;
}

static struct ibv_qp *ud_qp(struct conf_env *e, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(e->pd, &init);

	if (!qp)
		setup_failed("create_qp", errno);
	return qp;
}

/* Attaches up to max + 1 (QPs to one group, or groups to one QP): "max" when exactly max
 * succeed, then how the next one fails. */
static void probe(struct conf_env *e, struct ibv_cq *cq, int max, bool groups)
{
	union ibv_gid one = group(1, true);
	struct ibv_qp *qp = groups ? ud_qp(e, cq) : NULL;
	int i, err = 0;

	if (max > PROBE_MAX) {
		out("max=beyond_probe");
		out_end();
	}
	for (i = 0; i <= max && !err; i++) {
		union ibv_gid g = groups ? group((unsigned int)i, false) : one;

		err = ibv_attach_mcast(groups ? qp : ud_qp(e, cq), &g, 0);
	}
	if (err && i - 1 == max)
		out("attached=max");
	else
		out("attached=%s", err ? "fewer" : "more");
	out_ret("over", err);
}

static void mcast_case(const struct conf_case *c)
{
	enum mcast_kind k = (enum mcast_kind)c->a;
	union ibv_gid g = group(1, c->b);
	struct ibv_device_attr attr;
	struct qp_params p;
	struct conf_env e;
	struct ibv_cq *cq;
	struct ibv_qp *qp;

	env_open(&e);
	cq = ibv_create_cq(e.ctx, 4, NULL, NULL, 0);
	if (!cq)
		setup_failed("create_cq", errno);
	switch (k) {
	case M_RC_QP:
		qp_params_default(&p, IBV_QPT_RC);
		end_create(&e, &p, &e.a);
		out_ret("attach", ibv_attach_mcast(e.a.qp, &g, 0));
		break;
	case M_UNICAST_GID:
		out_ret("attach", ibv_attach_mcast(ud_qp(&e, cq), &e.gid, 0));
		break;
	case M_TWICE:
		qp = ud_qp(&e, cq);
		out_ret("attach", ibv_attach_mcast(qp, &g, 0));
		out_ret("again", ibv_attach_mcast(qp, &g, 0));
		out_ret("detach", ibv_detach_mcast(qp, &g, 0));
		out_ret("detach_again", ibv_detach_mcast(qp, &g, 0));
		break;
	case M_DETACH_NOT_ATTACHED:
		qp = ud_qp(&e, cq);
		out_ret("detach", ibv_detach_mcast(qp, &g, 0));
		break;
	case M_DESTROY_ATTACHED:
		qp = ud_qp(&e, cq);
		if (ibv_attach_mcast(qp, &g, 0))
			setup_failed("attach_mcast", errno);
		out_ret("destroy", ibv_destroy_qp(qp));
		out_ret("detach", ibv_detach_mcast(qp, &g, 0));
		out_ret("destroy_after", ibv_destroy_qp(qp));
		break;
	case M_QPS_PER_GROUP:
	case M_GROUPS:
		if (ibv_query_device(e.ctx, &attr))
			setup_failed("query_device", errno);
		probe(&e, cq, k == M_GROUPS ? attr.max_mcast_grp : attr.max_mcast_qp_attach,
		      k == M_GROUPS);
		break;
	}
	out_end();
}

const struct conf_case conf_cases_mcast[] = {
	{ "mcast_attach_rc_qp", mcast_case, M_RC_QP, 1 },
	{ "mcast_attach_unicast_gid", mcast_case, M_UNICAST_GID, 1 },
	{ "mcast_attach_twice_v4_mapped", mcast_case, M_TWICE, 1 },
	{ "mcast_attach_twice_ff0e", mcast_case, M_TWICE, 0 },
	{ "mcast_detach_not_attached", mcast_case, M_DETACH_NOT_ATTACHED, 1 },
	{ "mcast_destroy_attached_qp", mcast_case, M_DESTROY_ATTACHED, 1 },
	{ "mcast_limit_qps_per_group", mcast_case, M_QPS_PER_GROUP, 1 },
	{ "mcast_limit_groups", mcast_case, M_GROUPS, 1 },
	{ NULL, NULL, 0, 0 },
};
