// SPDX-License-Identifier: MIT
/*
 * XRC through the real verbs API, as mlx5 has it (docs/semantics.md, "XRC"): domains and
 * their sharing by file, EBUSY on close, XRC SRQs and their numbers, the initiator's and the
 * target's parts, ibv_open_qp; then traffic: a SEND lands in the SRQ its WR names and
 * completes on that SRQ's CQ, a wrong SRQ number or one of another domain is refused at the
 * target, WRITE and READ are checked against the named SRQ's PD, and the same between two
 * processes. Run under `softrdma run` (ctest does).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <infiniband/verbs.h>

#include "rc_fixture.h"

#define MSG	64

static struct ibv_xrcd *open_xrcd(struct rc_env *env, int fd, int oflags)
{
	struct ibv_xrcd_init_attr attr = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = fd,
		.oflags = oflags,
	};

	return ibv_open_xrcd(env->ctx, &attr);
}

static struct ibv_srq *make_xrc_srq(struct ibv_context *ctx, struct ibv_pd *pd,
				    struct ibv_xrcd *xrcd, struct ibv_cq *cq)
{
	struct ibv_srq_init_attr_ex attr = {
		.attr = { .max_wr = 16, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD |
			     IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD,
		.srq_type = IBV_SRQT_XRC,
		.xrcd = xrcd,
		.cq = cq,
		.pd = pd,
	};

	return ibv_create_srq_ex(ctx, &attr);
}

static struct ibv_qp *make_tgt(struct ibv_context *ctx, struct ibv_xrcd *xrcd)
{
	struct ibv_qp_init_attr_ex attr = {
		.qp_type = IBV_QPT_XRC_RECV,
		.comp_mask = IBV_QP_INIT_ATTR_XRCD,
		.xrcd = xrcd,
	};

	return ibv_create_qp_ex(ctx, &attr);
}

static struct ibv_qp *make_ini(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *scq)
{
	struct ibv_qp_init_attr_ex attr = {
		.qp_type = IBV_QPT_XRC_SEND,
		.send_cq = scq,
		.cap = { .max_send_wr = 16, .max_send_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = pd,
	};

	return ibv_create_qp_ex(ctx, &attr);
}

/* RESET -> INIT, the same for both halves. */
static int xrc_to_init(struct ibv_qp *qp, int access)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = (unsigned int)access };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS);
}

/* What INIT -> RTR sets for either half: the peer, at gid over loopback. */
static struct ibv_qp_attr xrc_rtr_attr(uint32_t dest_qpn, uint32_t rq_psn,
				       const union ibv_gid *gid)
{
	return (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = dest_qpn,
		.rq_psn = rq_psn, .max_dest_rd_atomic = 4, .min_rnr_timer = 1,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = *gid, .hop_limit = 1 } },
	};
}

/* The kernel's masks for XRC (ibv_xsrq_pingpong's steps). 0 or the failing modify's errno. */
static int connect_tgt(struct ibv_qp *qp, uint32_t ini_qpn, const union ibv_gid *gid, int access)
{
	struct ibv_qp_attr a = xrc_rtr_attr(ini_qpn, 0x1234, gid);
	int ret = xrc_to_init(qp, access);

	if (ret)
		return ret;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static int connect_ini(struct ibv_qp *qp, uint32_t tgt_qpn, const union ibv_gid *gid)
{
	struct ibv_qp_attr a = xrc_rtr_attr(tgt_qpn, 0, gid);
	struct rc_qp_opts o;
	int ret = xrc_to_init(qp, 0);

	if (ret)
		return ret;
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN);
	if (ret)
		return ret;
	/* RTR -> RTS is RC's, starting at the PSN the target expects. */
	rc_default_opts(&o);
	o.sq_psn = 0x1234;
	return rc_modify_rts(qp, &o);
}

static int post_xrc(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op, struct ibv_sge *sge,
		    uint32_t srqn, uint64_t remote_addr, uint32_t rkey)
{
	struct ibv_send_wr wr = rc_signaled_wr(wr_id, op, sge, 1), *bad;

	wr.wr.rdma.remote_addr = remote_addr;
	wr.wr.rdma.rkey = rkey;
	wr.qp_type.xrc.remote_srqn = srqn;
	return ibv_post_send(qp, &wr, &bad);
}

static void post_srq_recv(struct ibv_srq *srq, uint64_t wr_id, struct ibv_sge *sge)
{
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = sge, .num_sge = 1 }, *bad;

	assert_int_equal(ibv_post_srq_recv(srq, &wr, &bad), 0);
}

static char *temp_file(void)
{
	char *path = strdup("/tmp/softrdma-xrc-XXXXXX");
	int fd;

	assert_non_null(path);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	return path;
}

/* A CQ and a domain of the test's own, for its XRC SRQs and QPs. */
static void open_cq_and_xrcd(struct rc_env *env, struct ibv_cq **cq, struct ibv_xrcd **xrcd)
{
	*cq = ibv_create_cq(env->ctx, 16, NULL, NULL, 0);
	*xrcd = open_xrcd(env, -1, 0);
	assert_non_null(*cq);
	assert_non_null(*xrcd);
}

/* Both close once the test's SRQs and QPs are gone. */
static void close_xrcd_and_cq(struct ibv_xrcd *xrcd, struct ibv_cq *cq)
{
	assert_int_equal(ibv_close_xrcd(xrcd), 0);
	assert_int_equal(ibv_destroy_cq(cq), 0);
}

/* Objects and their rules. */

static void test_device_says_xrc(void **state)
{
	struct rc_env *env = *state;
	struct ibv_device_attr attr;

	assert_int_equal(ibv_query_device(env->ctx, &attr), 0);
	assert_true(attr.device_cap_flags & IBV_DEVICE_XRC);
}

static void test_open_xrcd_rules(void **state)
{
	struct rc_env *env = *state;
	struct ibv_xrcd_init_attr attr = { .comp_mask = IBV_XRCD_INIT_ATTR_FD, .fd = -1 };
	char *path = temp_file();
	struct ibv_xrcd *own, *a, *b;
	int fd, closed_fd;

	/* ibv_cmd_open_xrcd(): both fields, and no unknown one. */
	assert_null(ibv_open_xrcd(env->ctx, &attr));
	assert_int_equal(errno, EINVAL);
	attr.comp_mask = IBV_XRCD_INIT_ATTR_RESERVED | IBV_XRCD_INIT_ATTR_FD |
			 IBV_XRCD_INIT_ATTR_OFLAGS;
	assert_null(ibv_open_xrcd(env->ctx, &attr));
	assert_int_equal(errno, EOPNOTSUPP);

	own = open_xrcd(env, -1, 0);
	assert_non_null(own);

	closed_fd = open(path, O_RDONLY);
	assert_true(closed_fd >= 0);
	close(closed_fd);
	assert_null(open_xrcd(env, closed_fd, O_CREAT));
	assert_int_equal(errno, EBADF);

	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	/* No domain for this file yet: only O_CREAT makes one. */
	assert_null(open_xrcd(env, fd, 0));
	assert_int_equal(errno, EINVAL);
	a = open_xrcd(env, fd, O_CREAT);
	assert_non_null(a);
	assert_null(open_xrcd(env, fd, O_CREAT | O_EXCL));
	assert_int_equal(errno, EINVAL);
	b = open_xrcd(env, fd, 0);
	assert_non_null(b);
	assert_ptr_not_equal(a, b);

	assert_int_equal(ibv_close_xrcd(b), 0);
	assert_int_equal(ibv_close_xrcd(a), 0);
	/* The domain went with its last handle. */
	assert_null(open_xrcd(env, fd, 0));
	assert_int_equal(errno, EINVAL);
	assert_int_equal(ibv_close_xrcd(own), 0);
	close(fd);
	unlink(path);
	free(path);
}

static void test_close_xrcd_busy_while_used(void **state)
{
	struct rc_env *env = *state;
	struct ibv_cq *cq;
	struct ibv_xrcd *xrcd;
	struct ibv_srq *srq;
	struct ibv_qp *tgt;

	open_cq_and_xrcd(env, &cq, &xrcd);
	srq = make_xrc_srq(env->ctx, env->pd, xrcd, cq);
	assert_non_null(srq);
	assert_int_equal(ibv_close_xrcd(xrcd), EBUSY);
	/* The SRQ reports to the CQ: the CQ stays while the SRQ is there. */
	assert_int_equal(ibv_destroy_cq(cq), EBUSY);
	assert_int_equal(ibv_destroy_srq(srq), 0);
	tgt = make_tgt(env->ctx, xrcd);
	assert_non_null(tgt);
	assert_int_equal(ibv_close_xrcd(xrcd), EBUSY);
	assert_int_equal(ibv_destroy_qp(tgt), 0);
	close_xrcd_and_cq(xrcd, cq);
}

static void test_xrc_srq_rules(void **state)
{
	struct rc_env *env = *state;
	struct ibv_cq *cq;
	struct ibv_xrcd *xrcd;
	struct ibv_srq_init_attr_ex attr = {
		.attr = { .max_wr = 4, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD |
			     IBV_SRQ_INIT_ATTR_PD,
		.srq_type = IBV_SRQT_XRC,
		.pd = env->pd,
	};
	struct ibv_srq *s1, *s2;
	uint32_t n1, n2;

	open_cq_and_xrcd(env, &cq, &xrcd);
	attr.xrcd = xrcd;
	/* Without its CQ. */
	assert_null(ibv_create_srq_ex(env->ctx, &attr));
	assert_int_equal(errno, EINVAL);
	s1 = make_xrc_srq(env->ctx, env->pd, xrcd, cq);
	s2 = make_xrc_srq(env->ctx, env->pd, xrcd, cq);
	assert_non_null(s1);
	assert_non_null(s2);
	assert_int_equal(ibv_get_srq_num(s1, &n1), 0);
	assert_int_equal(ibv_get_srq_num(s2, &n2), 0);
	assert_int_not_equal(n1, n2);
	assert_int_not_equal(n1, 0);
	assert_true(n1 <= 0xffffff && n2 <= 0xffffff);
	assert_int_equal(ibv_destroy_srq(s2), 0);
	assert_int_equal(ibv_destroy_srq(s1), 0);
	close_xrcd_and_cq(xrcd, cq);
}

/* A destroyed SRQ's number is not the next SRQ's: a late request for it finds nothing. */
static void test_srq_numbers_not_reused_at_once(void **state)
{
	struct rc_env *env = *state;
	struct ibv_cq *cq;
	struct ibv_xrcd *xrcd;
	uint32_t seen[200];

	open_cq_and_xrcd(env, &cq, &xrcd);
	for (int i = 0; i < 200; i++) {
		struct ibv_srq *srq = make_xrc_srq(env->ctx, env->pd, xrcd, cq);

		assert_non_null(srq);
		assert_int_equal(ibv_get_srq_num(srq, &seen[i]), 0);
		for (int j = 0; j < i; j++)
			assert_int_not_equal(seen[i], seen[j]);
		assert_int_equal(ibv_destroy_srq(srq), 0);
	}
	close_xrcd_and_cq(xrcd, cq);
}

static void test_xrc_qp_parts(void **state)
{
	struct rc_env *env = *state;
	struct ibv_cq *cq;
	struct ibv_xrcd *xrcd;
	struct ibv_qp_init_attr_ex attr = { .qp_type = IBV_QPT_XRC_RECV,
					    .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = env->pd };
	struct ibv_qp_init_attr legacy = { .qp_type = IBV_QPT_XRC_RECV };
	struct ibv_recv_wr rwr = { .wr_id = 1 }, *rbad;
	struct ibv_send_wr swr = { .wr_id = 1, .opcode = IBV_WR_SEND }, *sbad;
	struct ibv_qp *ini, *tgt;

	open_cq_and_xrcd(env, &cq, &xrcd);
	legacy.send_cq = legacy.recv_cq = cq;
	/* A target is made with its domain, and only so. */
	assert_null(ibv_create_qp_ex(env->ctx, &attr));
	assert_int_equal(errno, EINVAL);
	assert_null(ibv_create_qp(env->pd, &legacy));
	/* An initiator needs its send CQ, not a receive CQ. */
	attr.qp_type = IBV_QPT_XRC_SEND;
	assert_null(ibv_create_qp_ex(env->ctx, &attr));
	assert_int_equal(errno, EINVAL);
	ini = make_ini(env->ctx, env->pd, cq);
	tgt = make_tgt(env->ctx, xrcd);
	assert_non_null(ini);
	assert_non_null(tgt);
	assert_null(ini->recv_cq);
	assert_null(tgt->pd);
	assert_null(tgt->send_cq);
	assert_int_equal(tgt->qp_type, IBV_QPT_XRC_RECV);
	/* Neither half has a receive queue, and the target has no send queue. */
	assert_int_equal(ibv_post_recv(ini, &rwr, &rbad), EINVAL);
	assert_int_equal(ibv_post_recv(tgt, &rwr, &rbad), EINVAL);
	assert_int_equal(connect_tgt(tgt, ini->qp_num, &env->gid, 0), 0);
	assert_int_equal(ibv_post_send(tgt, &swr, &sbad), EINVAL);
	/* The kernel's table: an initiator's RTR takes no responder resources. */
	{
		struct ibv_qp_attr a = xrc_rtr_attr(tgt->qp_num, 0, &env->gid);

		assert_int_equal(xrc_to_init(ini, 0), 0);
		assert_int_equal(ibv_modify_qp(ini, &a, IBV_QP_STATE | IBV_QP_AV |
						       IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
						       IBV_QP_RQ_PSN | IBV_QP_MIN_RNR_TIMER),
				 EINVAL);
	}
	assert_int_equal(ibv_destroy_qp(ini), 0);
	assert_int_equal(ibv_destroy_qp(tgt), 0);
	close_xrcd_and_cq(xrcd, cq);
}

static struct ibv_qp *open_qp(struct rc_env *env, struct ibv_xrcd *xrcd, uint32_t qpn,
			      enum ibv_qp_type type)
{
	struct ibv_qp_open_attr attr = {
		.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
			     IBV_QP_OPEN_ATTR_TYPE,
		.qp_num = qpn,
		.xrcd = xrcd,
		.qp_type = type,
	};

	return ibv_open_qp(env->ctx, &attr);
}

/* Two files, two domains; one file opened twice, one domain whose target QPs both find. */
static void test_open_qp_shares_a_target(void **state)
{
	struct rc_env *env = *state;
	char *path = temp_file();
	int fd = open(path, O_RDONLY);
	struct ibv_xrcd *a = open_xrcd(env, fd, O_CREAT), *b = open_xrcd(env, fd, 0);
	struct ibv_xrcd *other = open_xrcd(env, -1, 0);
	struct ibv_qp_attr qattr;
	struct ibv_qp_init_attr qinit;
	struct ibv_qp *tgt, *shared;
	uint32_t qpn;

	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(other);
	tgt = make_tgt(env->ctx, a);
	assert_non_null(tgt);
	assert_null(open_qp(env, other, tgt->qp_num, IBV_QPT_XRC_RECV));
	assert_int_equal(errno, EINVAL);
	assert_null(open_qp(env, b, tgt->qp_num, IBV_QPT_RC));
	assert_int_equal(errno, EINVAL);
	assert_null(open_qp(env, b, tgt->qp_num ^ 1, IBV_QPT_XRC_RECV));
	assert_int_equal(errno, EINVAL);
	shared = open_qp(env, b, tgt->qp_num, IBV_QPT_XRC_RECV);
	assert_non_null(shared);
	assert_int_equal(shared->qp_num, tgt->qp_num);
	/* b has a user now, as a has. */
	assert_int_equal(ibv_close_xrcd(b), EBUSY);
	/* One QP behind both handles: a modify through one shows through the other. */
	assert_int_equal(connect_tgt(tgt, 0x123456, &env->gid, IBV_ACCESS_REMOTE_WRITE), 0);
	assert_int_equal(ibv_query_qp(shared, &qattr, IBV_QP_STATE, &qinit), 0);
	assert_int_equal(qattr.qp_state, IBV_QPS_RTR);
	/* Every handle is equal: the QP stays while one is left. */
	assert_int_equal(ibv_destroy_qp(tgt), 0);
	assert_int_equal(ibv_query_qp(shared, &qattr, IBV_QP_STATE, &qinit), 0);
	assert_int_equal(qattr.qp_state, IBV_QPS_RTR);
	tgt = open_qp(env, a, shared->qp_num, IBV_QPT_XRC_RECV);
	assert_non_null(tgt);
	qpn = tgt->qp_num;
	assert_int_equal(ibv_destroy_qp(shared), 0);
	assert_int_equal(ibv_destroy_qp(tgt), 0);
	/* Gone with its last handle. */
	assert_null(open_qp(env, a, qpn, IBV_QPT_XRC_RECV));
	assert_int_equal(errno, EINVAL);
	assert_int_equal(ibv_close_xrcd(b), 0);
	assert_int_equal(ibv_close_xrcd(a), 0);
	assert_int_equal(ibv_close_xrcd(other), 0);
	close(fd);
	unlink(path);
	free(path);
}

/* Traffic: an initiator in this process to a target in this process, over loopback. */

struct xrc_scene {
	struct rc_env *env;
	struct ibv_xrcd *xrcd, *xrcd2;
	struct ibv_cq *ini_cq, *cq1, *cq2;
	struct ibv_srq *srq1, *srq2, *foreign;	/* foreign: of xrcd2 */
	uint32_t n1, n2, nforeign;
	struct ibv_qp *ini, *tgt;
	struct rc_buf *src, *dst;
	struct ibv_mr *src_mr, *dst_mr, *dst_mr_pd2;
};

static void scene_init(struct xrc_scene *s, void **state, int tgt_access)
{
	memset(s, 0, sizeof(*s));
	s->env = *state;
	s->xrcd = open_xrcd(s->env, -1, 0);
	s->xrcd2 = open_xrcd(s->env, -1, 0);
	s->ini_cq = ibv_create_cq(s->env->ctx, 32, NULL, NULL, 0);
	s->cq1 = ibv_create_cq(s->env->ctx, 32, NULL, NULL, 0);
	s->cq2 = ibv_create_cq(s->env->ctx, 32, NULL, NULL, 0);
	assert_non_null(s->xrcd);
	assert_non_null(s->xrcd2);
	assert_non_null(s->ini_cq);
	assert_non_null(s->cq1);
	assert_non_null(s->cq2);
	s->srq1 = make_xrc_srq(s->env->ctx, s->env->pd, s->xrcd, s->cq1);
	s->srq2 = make_xrc_srq(s->env->ctx, s->env->pd, s->xrcd, s->cq2);
	s->foreign = make_xrc_srq(s->env->ctx, s->env->pd, s->xrcd2, s->cq2);
	assert_non_null(s->srq1);
	assert_non_null(s->srq2);
	assert_non_null(s->foreign);
	assert_int_equal(ibv_get_srq_num(s->srq1, &s->n1), 0);
	assert_int_equal(ibv_get_srq_num(s->srq2, &s->n2), 0);
	assert_int_equal(ibv_get_srq_num(s->foreign, &s->nforeign), 0);
	s->src = rc_alloc(s->env, 4 * MSG);
	s->dst = rc_alloc(s->env, 4 * MSG);
	s->src_mr = rc_reg(s->env, s->env->pd, s->src->p, s->src->cap, RC_ACCESS_ALL);
	s->dst_mr = rc_reg(s->env, s->env->pd, s->dst->p, s->dst->cap, RC_ACCESS_ALL);
	s->dst_mr_pd2 = rc_reg(s->env, s->env->pd2, s->dst->p, s->dst->cap, RC_ACCESS_ALL);
	s->ini = make_ini(s->env->ctx, s->env->pd, s->ini_cq);
	s->tgt = make_tgt(s->env->ctx, s->xrcd);
	assert_non_null(s->ini);
	assert_non_null(s->tgt);
	assert_int_equal(connect_tgt(s->tgt, s->ini->qp_num, &s->env->gid, tgt_access), 0);
	assert_int_equal(connect_ini(s->ini, s->tgt->qp_num, &s->env->gid), 0);
}

static void scene_fini(struct xrc_scene *s)
{
	assert_int_equal(ibv_destroy_qp(s->ini), 0);
	assert_int_equal(ibv_destroy_qp(s->tgt), 0);
	assert_int_equal(ibv_destroy_srq(s->srq1), 0);
	assert_int_equal(ibv_destroy_srq(s->srq2), 0);
	assert_int_equal(ibv_destroy_srq(s->foreign), 0);
	assert_int_equal(ibv_close_xrcd(s->xrcd), 0);
	assert_int_equal(ibv_close_xrcd(s->xrcd2), 0);
	assert_int_equal(ibv_destroy_cq(s->ini_cq), 0);
	assert_int_equal(ibv_destroy_cq(s->cq1), 0);
	assert_int_equal(ibv_destroy_cq(s->cq2), 0);
}

static void test_send_lands_in_the_named_srq(void **state)
{
	struct xrc_scene s;
	struct ibv_sge r1, r2, out;
	struct ibv_wc wc;

	scene_init(&s, state, 0);
	r1 = rc_sge(s.dst->p, MSG, s.dst_mr);
	r2 = rc_sge(s.dst->p + MSG, MSG, s.dst_mr);
	post_srq_recv(s.srq1, 11, &r1);
	post_srq_recv(s.srq2, 22, &r2);

	rc_fill(s.src->p, MSG, 2);
	out = rc_sge(s.src->p, MSG, s.src_mr);
	assert_int_equal(post_xrc(s.ini, 1, IBV_WR_SEND, &out, s.n2, 0, 0), 0);
	rc_expect_wc(s.ini_cq, 1, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(s.cq2, 22, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, MSG);
	assert_int_equal(wc.qp_num, s.tgt->qp_num);	/* the target's, as mlx5 reports it */
	rc_expect_pattern(s.dst->p + MSG, MSG, 2, "SRQ 2's buffer");
	rc_expect_no_wc(s.cq1, RC_QUIET_MS);

	rc_fill(s.src->p, MSG, 1);
	assert_int_equal(post_xrc(s.ini, 2, IBV_WR_SEND, &out, s.n1, 0, 0), 0);
	rc_expect_wc(s.ini_cq, 2, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(s.cq1, 11, IBV_WC_SUCCESS, NULL);
	rc_expect_pattern(s.dst->p, MSG, 1, "SRQ 1's buffer");
	scene_fini(&s);
}

/* Two initiators to two targets of one domain: both deliver into the one SRQ they name. */
static void test_two_targets_share_one_srq(void **state)
{
	struct xrc_scene s;
	struct ibv_qp *ini2, *tgt2;
	struct ibv_sge r1, r2, out;
	struct ibv_wc wc[2];

	scene_init(&s, state, 0);
	ini2 = make_ini(s.env->ctx, s.env->pd, s.ini_cq);
	tgt2 = make_tgt(s.env->ctx, s.xrcd);
	assert_non_null(ini2);
	assert_non_null(tgt2);
	assert_int_equal(connect_tgt(tgt2, ini2->qp_num, &s.env->gid, 0), 0);
	assert_int_equal(connect_ini(ini2, tgt2->qp_num, &s.env->gid), 0);
	r1 = rc_sge(s.dst->p, MSG, s.dst_mr);
	r2 = rc_sge(s.dst->p + MSG, MSG, s.dst_mr);
	post_srq_recv(s.srq1, 11, &r1);
	post_srq_recv(s.srq1, 12, &r2);
	rc_fill(s.src->p, MSG, 3);
	out = rc_sge(s.src->p, MSG, s.src_mr);
	assert_int_equal(post_xrc(s.ini, 1, IBV_WR_SEND, &out, s.n1, 0, 0), 0);
	rc_expect_wc(s.ini_cq, 1, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(s.cq1, 11, IBV_WC_SUCCESS, &wc[0]);
	assert_int_equal(post_xrc(ini2, 2, IBV_WR_SEND, &out, s.n1, 0, 0), 0);
	rc_expect_wc(s.ini_cq, 2, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(s.cq1, 12, IBV_WC_SUCCESS, &wc[1]);
	/* Each completion names the target it came through, and its initiator. */
	assert_int_equal(wc[0].qp_num, s.tgt->qp_num);
	assert_int_equal(wc[0].src_qp, s.ini->qp_num);
	assert_int_equal(wc[1].qp_num, tgt2->qp_num);
	assert_int_equal(wc[1].src_qp, ini2->qp_num);
	rc_expect_pattern(s.dst->p, MSG, 3, "first receive");
	rc_expect_pattern(s.dst->p + MSG, MSG, 3, "second receive");
	assert_int_equal(ibv_destroy_qp(ini2), 0);
	assert_int_equal(ibv_destroy_qp(tgt2), 0);
	scene_fini(&s);
}

/*
 * An SRQ number that names nothing, or an SRQ of another domain: NAK invalid request.
 * handed_over: the target's creating handle was destroyed after another was opened, and
 * the event must name the one left.
 */
static void refused_srqn(void **state, bool foreign, bool handed_over)
{
	struct xrc_scene s;
	struct ibv_sge r, out;

	scene_init(&s, state, 0);
	if (handed_over) {
		struct ibv_qp *other = open_qp(s.env, s.xrcd, s.tgt->qp_num, IBV_QPT_XRC_RECV);

		assert_non_null(other);
		assert_int_equal(ibv_destroy_qp(s.tgt), 0);
		s.tgt = other;
	}
	r = rc_sge(s.dst->p, MSG, s.dst_mr);
	post_srq_recv(s.foreign, 33, &r);
	out = rc_sge(s.src->p, MSG, s.src_mr);
	assert_int_equal(post_xrc(s.ini, 1, IBV_WR_SEND, &out,
				  foreign ? s.nforeign : (s.n1 ^ 0x800000), 0, 0), 0);
	rc_expect_wc(s.ini_cq, 1, IBV_WC_REM_INV_REQ_ERR, NULL);
	rc_wait_state(s.tgt, IBV_QPS_ERR);
	rc_expect_async_qp(s.env, IBV_EVENT_QP_REQ_ERR, s.tgt);
	rc_expect_no_wc(s.cq2, RC_QUIET_MS);
	scene_fini(&s);
}

static void test_unknown_srqn_refused(void **state)
{
	refused_srqn(state, false, false);
}

static void test_srq_of_another_domain_refused(void **state)
{
	refused_srqn(state, true, false);
}

static void test_events_go_to_the_handle_left(void **state)
{
	refused_srqn(state, false, true);
}

/* The named SRQ's PD is the one the target checks keys against, with the target's rights. */
static void test_write_and_read_through_xrc(void **state)
{
	struct xrc_scene s;
	struct ibv_sge out;

	scene_init(&s, state, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	rc_fill(s.src->p, MSG, 7);
	out = rc_sge(s.src->p, MSG, s.src_mr);
	assert_int_equal(post_xrc(s.ini, 1, IBV_WR_RDMA_WRITE, &out, s.n1,
				  (uintptr_t)s.dst->p, s.dst_mr->rkey), 0);
	rc_expect_wc(s.ini_cq, 1, IBV_WC_SUCCESS, NULL);
	rc_expect_pattern(s.dst->p, MSG, 7, "written");
	rc_fill(s.dst->p + MSG, MSG, 8);
	out = rc_sge(s.src->p + 2 * MSG, MSG, s.src_mr);
	assert_int_equal(post_xrc(s.ini, 2, IBV_WR_RDMA_READ, &out, s.n2,
				  (uintptr_t)s.dst->p + MSG, s.dst_mr->rkey), 0);
	rc_expect_wc(s.ini_cq, 2, IBV_WC_SUCCESS, NULL);
	rc_expect_pattern(s.src->p + 2 * MSG, MSG, 8, "read");
	/* A key of another PD than the SRQ's: refused, nothing written. */
	memset(s.dst->p + 3 * MSG, 0, MSG);
	out = rc_sge(s.src->p, MSG, s.src_mr);
	assert_int_equal(post_xrc(s.ini, 3, IBV_WR_RDMA_WRITE, &out, s.n1,
				  (uintptr_t)s.dst->p + 3 * MSG, s.dst_mr_pd2->rkey), 0);
	rc_expect_wc(s.ini_cq, 3, IBV_WC_REM_ACCESS_ERR, NULL);
	for (int i = 0; i < MSG; i++)
		assert_int_equal(s.dst->p[3 * MSG + i], 0);
	rc_wait_state(s.tgt, IBV_QPS_ERR);
	rc_expect_async_qp(s.env, IBV_EVENT_QP_ACCESS_ERR, s.tgt);
	scene_fini(&s);
}

static void test_write_without_the_targets_right_refused(void **state)
{
	struct xrc_scene s;
	struct ibv_sge out;

	scene_init(&s, state, IBV_ACCESS_REMOTE_READ);
	memset(s.dst->p, 0, MSG);
	rc_fill(s.src->p, MSG, 9);
	out = rc_sge(s.src->p, MSG, s.src_mr);
	assert_int_equal(post_xrc(s.ini, 1, IBV_WR_RDMA_WRITE, &out, s.n1,
				  (uintptr_t)s.dst->p, s.dst_mr->rkey), 0);
	rc_expect_wc(s.ini_cq, 1, IBV_WC_REM_INV_REQ_ERR, NULL);
	for (int i = 0; i < MSG; i++)
		assert_int_equal(s.dst->p[i], 0);
	rc_wait_state(s.tgt, IBV_QPS_ERR);
	rc_drain_async(s.env);
	scene_fini(&s);
}

/* Two processes: the target side (domain, SRQ, target QP) in a child, the initiator here. */

struct xrc_ids {
	uint32_t qpn, srqn;
};

/* The child: no cmocka here; its exit status says what failed. */
static int target_child(int to_parent, int from_parent)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = rc_open_softrdma0(list);
	static char buf[MSG];
	struct xrc_ids ids;
	union ibv_gid gid;
	uint32_t ini_qpn;
	struct ibv_wc wc;
	uint64_t deadline;

	if (!ctx || ibv_query_gid(ctx, 1, 0, &gid))
		return 10;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_xrcd_init_attr xa = { .comp_mask = IBV_XRCD_INIT_ATTR_FD |
						      IBV_XRCD_INIT_ATTR_OFLAGS, .fd = -1 };
	struct ibv_xrcd *xrcd = pd && cq ? ibv_open_xrcd(ctx, &xa) : NULL;
	struct ibv_srq *srq = xrcd ? make_xrc_srq(ctx, pd, xrcd, cq) : NULL;
	struct ibv_qp *tgt = srq ? make_tgt(ctx, xrcd) : NULL;
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = MSG, .lkey = mr ? mr->lkey : 0 };
	struct ibv_recv_wr rwr = { .wr_id = 77, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (!tgt || !mr || ibv_get_srq_num(srq, &ids.srqn) || ibv_post_srq_recv(srq, &rwr, &bad))
		return 11;
	ids.qpn = tgt->qp_num;
	if (write(to_parent, &ids, sizeof(ids)) != sizeof(ids) ||
	    !rc_read_within(from_parent, &ini_qpn, sizeof(ini_qpn)))
		return 12;
	if (connect_tgt(tgt, ini_qpn, &gid, 0))
		return 13;
	/* Ready: the parent sends now. */
	if (write(to_parent, &ids, 1) != 1)
		return 14;
	deadline = rc_now_ms() + RC_WAIT_MS;
	while (ibv_poll_cq(cq, 1, &wc) == 0)
		if (rc_now_ms() > deadline)
			return 15;
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 77 || wc.byte_len != MSG ||
	    wc.qp_num != tgt->qp_num)
		return 16;
	for (size_t i = 0; i < MSG; i++)
		if ((uint8_t)buf[i] != rc_pattern_byte(i, 5))
			return 17;
	/* Stay until the parent has its completion, then leave everything to close. */
	if (!rc_read_within(from_parent, &ini_qpn, 1))
		return 18;
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}

static void test_send_between_two_processes(void **state)
{
	int from_child, to_child, status;
	struct xrc_ids ids;
	struct rc_env env;
	struct ibv_cq *cq;
	struct ibv_qp *ini;
	struct rc_buf *src;
	struct ibv_mr *mr;
	struct ibv_sge out;
	char ready;
	pid_t child;

	(void)state;
	child = rc_fork_with_pipes(&from_child, &to_child);
	if (!child)
		_exit(target_child(to_child, from_child));
	rc_open(&env);
	cq = ibv_create_cq(env.ctx, 8, NULL, NULL, 0);
	assert_non_null(cq);
	ini = make_ini(env.ctx, env.pd, cq);
	assert_non_null(ini);
	src = rc_alloc(&env, MSG);
	rc_fill(src->p, MSG, 5);
	mr = rc_reg(&env, env.pd, src->p, MSG, IBV_ACCESS_LOCAL_WRITE);
	assert_true(rc_read_within(from_child, &ids, sizeof(ids)));
	assert_int_equal(write(to_child, &ini->qp_num, sizeof(ini->qp_num)), sizeof(ini->qp_num));
	assert_true(rc_read_within(from_child, &ready, 1));
	assert_int_equal(connect_ini(ini, ids.qpn, &env.gid), 0);
	out = rc_sge(src->p, MSG, mr);
	assert_int_equal(post_xrc(ini, 1, IBV_WR_SEND, &out, ids.srqn, 0, 0), 0);
	rc_expect_wc(cq, 1, IBV_WC_SUCCESS, NULL);
	assert_int_equal(write(to_child, "x", 1), 1);
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(ibv_destroy_qp(ini), 0);
	assert_int_equal(ibv_destroy_cq(cq), 0);
	close(from_child);
	close(to_child);
	rc_close(&env);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		RC_TEST(device_says_xrc),
		RC_TEST(open_xrcd_rules),
		RC_TEST(close_xrcd_busy_while_used),
		RC_TEST(xrc_srq_rules),
		RC_TEST(srq_numbers_not_reused_at_once),
		RC_TEST(xrc_qp_parts),
		RC_TEST(open_qp_shares_a_target),
		RC_TEST(send_lands_in_the_named_srq),
		RC_TEST(two_targets_share_one_srq),
		RC_TEST(unknown_srqn_refused),
		RC_TEST(srq_of_another_domain_refused),
		RC_TEST(events_go_to_the_handle_left),
		RC_TEST(write_and_read_through_xrc),
		RC_TEST(write_without_the_targets_right_refused),
		cmocka_unit_test(test_send_between_two_processes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
