// SPDX-License-Identifier: MIT
/*
 * UD multicast through the verbs API: ibv_attach_mcast/ibv_detach_mcast as the kernel and
 * rxe answer them (EINVAL for a QP that is not UD, a GID that is not multicast, a detach of
 * what is not attached; a second attach changes nothing; ENOMEM past the advertised limits;
 * EBUSY for a destroy while attached), and a send to a group reaching every QP attached to
 * it, in this process and in another one, but not the sender and not a QP that left.
 *
 * The groups are 239.P.P.P (administratively scoped) with P from the test's process id, so
 * that another run on the same host never shares one with this.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "ud_fixture.h"
#include "emu/wire.h"

#define QKEY		0x4242
#define MCAST_QPN	0xffffffu

/* ::ffff:239.p.p.n: group n of this process. */
static union ibv_gid group_gid(uint8_t n)
{
	union ibv_gid g = { .raw = { [10] = 0xff, [11] = 0xff, [12] = 239 } };
	uint32_t pid = (uint32_t)getpid();

	g.raw[13] = (uint8_t)(pid >> 8);
	g.raw[14] = (uint8_t)pid;
	g.raw[15] = n;
	return g;
}

static struct ibv_ah *group_ah(struct rc_env *env, const union ibv_gid *mgid)
{
	struct ibv_ah_attr attr = { .is_global = 1, .port_num = 1 };
	struct ibv_ah *ah;

	attr.grh.dgid = *mgid;
	attr.grh.hop_limit = 1;
	ah = ibv_create_ah(env->pd, &attr);
	assert_non_null(ah);
	return ah;
}

static void test_attach_rules(void **state)
{
	struct rc_env *env = *state;
	union ibv_gid g = group_gid(1), unicast = env->gid, v6 = { .raw = { 0xff, 0x0e } };
	struct rc_qp_opts o;
	struct ud_end u;

	rc_default_opts(&o);
	rc_create_end(env, &o, &env->a);
	ud_end_create(env, &u, QKEY);
	/* ib_attach_mcast(): a UD QP and a multicast GID, else EINVAL. */
	assert_int_equal(ibv_attach_mcast(env->a.qp, &g, 0), EINVAL);
	assert_int_equal(ibv_attach_mcast(u.qp, &unicast, 0), EINVAL);
	/* Leaving a group never joined: uverbs finds no such attachment. */
	assert_int_equal(ibv_detach_mcast(u.qp, &g, 0), EINVAL);
	assert_int_equal(ibv_attach_mcast(u.qp, &g, 0), 0);
	assert_int_equal(ibv_attach_mcast(u.qp, &g, 0), 0);	/* again: nothing changes */
	v6.raw[15] = (uint8_t)getpid();
	v6.raw[14] = (uint8_t)(getpid() >> 8);
	assert_int_equal(ibv_attach_mcast(u.qp, &v6, 0), 0);	/* ff0e::/16 too */
	/* uverbs_free_qp(): no destroy while attached. */
	assert_int_equal(ibv_destroy_qp(u.qp), EBUSY);
	assert_int_equal(ibv_detach_mcast(u.qp, &g, 0), 0);
	assert_int_equal(ibv_detach_mcast(u.qp, &g, 0), EINVAL);	/* once was enough */
	assert_int_equal(ibv_detach_mcast(u.qp, &v6, 0), 0);
	ud_end_destroy(&u);
	rc_destroy_end(&env->a);
}

static void test_limits_advertised_and_enforced(void **state)
{
	struct rc_env *env = *state;
	struct ibv_device_attr attr;
	struct ibv_qp_init_attr init = { .qp_type = IBV_QPT_UD, .cap = { .max_send_wr = 1,
					 .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp **qps;
	union ibv_gid g = group_gid(2);
	struct ibv_cq *cq;
	int n;

	assert_int_equal(ibv_query_device(env->ctx, &attr), 0);
	assert_true(attr.max_mcast_grp > 0 && attr.max_mcast_qp_attach > 0);
	assert_true(attr.max_total_mcast_qp_attach >= attr.max_mcast_qp_attach);
	n = attr.max_mcast_qp_attach + 1;
	qps = calloc((size_t)n, sizeof(*qps));
	assert_non_null(qps);
	cq = ibv_create_cq(env->ctx, 4, NULL, NULL, 0);
	assert_non_null(cq);
	init.send_cq = init.recv_cq = cq;
	for (int i = 0; i < n; i++) {
		qps[i] = ibv_create_qp(env->pd, &init);
		assert_non_null(qps[i]);
	}
	/* max_mcast_qp_attach QPs in one group; one more is ENOMEM, as rxe says. */
	for (int i = 0; i < n - 1; i++)
		assert_int_equal(ibv_attach_mcast(qps[i], &g, 0), 0);
	assert_int_equal(ibv_attach_mcast(qps[n - 1], &g, 0), ENOMEM);
	/* max_mcast_grp groups (this one among them); one more is ENOMEM. */
	for (int k = 1; k < attr.max_mcast_grp; k++) {
		union ibv_gid other = { .raw = { 0xff, 0x0e, 0x5e, 0xd0 } };

		other.raw[12] = (uint8_t)(getpid() >> 8);
		other.raw[13] = (uint8_t)getpid();
		other.raw[14] = (uint8_t)(k >> 8);
		other.raw[15] = (uint8_t)k;
		assert_int_equal(ibv_attach_mcast(qps[n - 1], &other, 0), 0);
	}
	assert_int_equal(ibv_attach_mcast(qps[n - 1], &(union ibv_gid){ .raw = { 0xff, 0x0e,
						     [15] = 1 } }, 0), ENOMEM);
	/* The device goes with its QPs still attached (rc_teardown): the close detaches them. */
	free(qps);
}

struct mcast_scene {
	struct rc_env *env;
	struct ud_end sender, member, other, outsider;
	union ibv_gid g, h;
	struct ibv_ah *ah;	/* to g */
};

/* sender and member in g, other in g then out of it, outsider in h only. */
static void scene_init(struct mcast_scene *s, void **state)
{
	memset(s, 0, sizeof(*s));
	s->env = *state;
	s->g = group_gid(3);
	s->h = group_gid(4);
	ud_end_create(s->env, &s->sender, QKEY);
	ud_end_create(s->env, &s->member, QKEY);
	ud_end_create(s->env, &s->other, QKEY);
	ud_end_create(s->env, &s->outsider, QKEY);
	assert_int_equal(ibv_attach_mcast(s->sender.qp, &s->g, 0), 0);
	assert_int_equal(ibv_attach_mcast(s->member.qp, &s->g, 0), 0);
	assert_int_equal(ibv_attach_mcast(s->other.qp, &s->g, 0), 0);
	assert_int_equal(ibv_attach_mcast(s->outsider.qp, &s->h, 0), 0);
	s->ah = group_ah(s->env, &s->g);
	for (int i = 0; i < 2; i++) {
		ud_post_slot(&s->sender, i, UD_SLOT);
		ud_post_slot(&s->member, i, UD_SLOT);
		ud_post_slot(&s->other, i, UD_SLOT);
		ud_post_slot(&s->outsider, i, UD_SLOT);
	}
}

static void scene_destroy(struct mcast_scene *s)
{
	assert_int_equal(ibv_destroy_ah(s->ah), 0);
	assert_int_equal(ibv_detach_mcast(s->sender.qp, &s->g, 0), 0);
	assert_int_equal(ibv_detach_mcast(s->member.qp, &s->g, 0), 0);
	assert_int_equal(ibv_detach_mcast(s->outsider.qp, &s->h, 0), 0);
	ud_end_destroy(&s->sender);
	ud_end_destroy(&s->member);
	ud_end_destroy(&s->other);
	ud_end_destroy(&s->outsider);
}

/* An ordinary UD receive of the group's datagram: the GRH names the group as destination. */
static void expect_group_datagram(struct ud_end *end, uint64_t slot, uint32_t src_qp,
				  const union ibv_gid *mgid, uint32_t len, uint8_t seed)
{
	uint8_t *grh = end->buf->p + slot * UD_SLOT;
	struct ibv_wc wc;

	rc_expect_wc(end->cq, slot, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.opcode, IBV_WC_RECV);
	assert_int_equal(wc.qp_num, end->qp->qp_num);
	assert_int_equal(wc.src_qp, src_qp);
	assert_int_equal(wc.byte_len, UD_GRH_LEN + len);
	assert_true(wc.wc_flags & IBV_WC_GRH);
	assert_int_equal(grh[20], 0x45);			/* an IPv4 group: an IPv4 header */
	assert_memory_equal(grh + 36, mgid->raw + 12, 4);	/* its destination: the group */
	rc_expect_pattern(grh + UD_GRH_LEN, len, seed, "the group's datagram");
}

static void test_send_reaches_members_not_sender(void **state)
{
	uint64_t sent = rc_port_counter("multicast_xmit_packets");
	uint64_t arrived = rc_port_counter("multicast_rcv_packets");
	struct mcast_scene s;

	scene_init(&s, state);
	ud_send(&s.sender, s.ah, MCAST_QPN, QKEY, 1, 500, 21, NULL);
	expect_group_datagram(&s.member, 0, s.sender.qp->qp_num, &s.g, 500, 21);
	expect_group_datagram(&s.other, 0, s.sender.qp->qp_num, &s.g, 500, 21);
	/* One packet out and one in at the port, however many QPs of it are members. */
	assert_int_equal(rc_port_counter("multicast_xmit_packets"), sent + 1);
	assert_int_equal(rc_port_counter("multicast_rcv_packets"), arrived + 1);
	/* rxe_rcv_mcast_pkt(): not back to the sending QP; h's member hears nothing of g. */
	rc_expect_no_wc(s.sender.cq, RC_QUIET_MS);
	rc_expect_no_wc(s.outsider.cq, 0);

	/* A QP that left hears no more; the others still do. */
	assert_int_equal(ibv_detach_mcast(s.other.qp, &s.g, 0), 0);
	ud_send(&s.sender, s.ah, MCAST_QPN, QKEY, 2, 100, 22, NULL);
	expect_group_datagram(&s.member, 1, s.sender.qp->qp_num, &s.g, 100, 22);
	rc_expect_no_wc(s.other.cq, RC_QUIET_MS);
	rc_expect_no_wc(s.sender.cq, 0);
	scene_destroy(&s);
}

/* Each member checks its Q_Key as for any UD receive; any remote_qpn becomes the group's. */
static void test_qkey_checked_per_member(void **state)
{
	struct mcast_scene s;
	struct ibv_qp_attr attr = { .qkey = QKEY + 1 };
	uint64_t violations;

	scene_init(&s, state);
	assert_int_equal(ibv_modify_qp(s.other.qp, &attr, IBV_QP_QKEY), 0);
	violations = rc_port_counter("qkey_violations");
	ud_send(&s.sender, s.ah, s.member.qp->qp_num, QKEY, 1, 64, 23, NULL);
	expect_group_datagram(&s.member, 0, s.sender.qp->qp_num, &s.g, 64, 23);
	rc_expect_no_wc(s.other.cq, RC_QUIET_MS);
	assert_int_equal(rc_port_counter("qkey_violations"), violations + 1);
	assert_int_equal(ibv_detach_mcast(s.other.qp, &s.g, 0), 0);
	scene_destroy(&s);
}

/* A datagram as another engine (or anyone) would send it: a UD SEND of len bytes of seed. */
static void forge(int fd, const struct sockaddr_in6 *to, uint32_t qpn, uint32_t qkey,
		  uint8_t seed, size_t len)
{
	struct wire_packet pkt = { .opcode = OP_UD_SEND_ONLY, .qpn = qpn, .qkey = qkey,
				   .src_qp = 0x4242, .payload_len = len };
	uint8_t frame[4 + WIRE_MAX_HDR + 64];
	size_t n = wire_build(frame, &pkt);

	rc_fill(frame + n, len, seed);
	assert_int_equal(sendto(fd, frame, n + len, 0, (const struct sockaddr *)to, sizeof(*to)),
			 (ssize_t)(n + len));
}

/*
 * Anyone on the host may send to a group, as anyone on a RoCE fabric may: what lands is
 * only a well-formed datagram to the group, naming the multicast QPN, with the member's
 * Q_Key. A member's own QPN on the group's port, the multicast QPN on the member's own
 * port, a wrong Q_Key and a truncated frame land nothing; then a good one does, first.
 */
static void test_forged_datagrams_reach_no_member(void **state)
{
	struct sockaddr_in6 src = { .sin6_family = AF_INET6 }, to_group = src, to_qp = src;
	struct in_addr lo = { htonl(INADDR_LOOPBACK) };
	uint64_t errors = rc_port_counter("port_rcv_errors");
	uint64_t violations = rc_port_counter("qkey_violations");
	struct mcast_scene s;
	struct ibv_wc wc;
	int fd;

	scene_init(&s, state);
	memcpy(&src.sin6_addr, s.env->gid.raw, 16);	/* ::ffff:127.0.0.1 */
	memcpy(&to_group.sin6_addr, s.g.raw, 16);
	to_group.sin6_port = htons(4791);
	memcpy(&to_qp.sin6_addr, s.env->gid.raw, 16);
	to_qp.sin6_port = htons((uint16_t)(s.member.qp->qp_num >> 8));
	fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&src, sizeof(src)), 0);
	assert_int_equal(setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &lo, sizeof(lo)), 0);

	forge(fd, &to_group, s.member.qp->qp_num, QKEY, 31, 32);
	forge(fd, &to_qp, MCAST_QPN, QKEY, 32, 32);
	forge(fd, &to_group, MCAST_QPN, QKEY + 1, 33, 32);
	assert_int_equal(sendto(fd, "\0\0\0\x30\x64", 5, 0, (struct sockaddr *)&to_group,
				sizeof(to_group)), 5);
	forge(fd, &to_group, MCAST_QPN, QKEY, 34, 32);
	rc_expect_wc(s.member.cq, 0, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.src_qp, 0x4242);
	rc_expect_pattern(s.member.buf->p + UD_GRH_LEN, 32, 34, "the one well-formed datagram");
	rc_expect_no_wc(s.member.cq, RC_QUIET_MS);
	assert_true(rc_port_counter("port_rcv_errors") > errors);
	assert_true(rc_port_counter("qkey_violations") > violations);
	close(fd);
	assert_int_equal(ibv_detach_mcast(s.other.qp, &s.g, 0), 0);
	scene_destroy(&s);
}

struct child_report {
	uint32_t src_qp, byte_len;
	uint8_t status, dgid_ok, pattern_ok;
};

/*
 * The child: its own device, one QP attached to the group (named by the parent's pid),
 * one receive. It writes 'r' once attached, then what it received. Never returns; no
 * cmocka here (a failed assert would run the rest of the tests in the child).
 */
static void child_main(int to_parent, int from_parent, union ibv_gid g)
{
	struct rc_env env = { 0 };
	struct ud_end end;
	struct child_report rep = { 0 };
	struct ibv_wc wc;
	uint64_t deadline;
	char ready = 'r';
	int n = 0;

	rc_open(&env);
	ud_end_create(&env, &end, QKEY);
	ud_post_slot(&end, 0, UD_SLOT);
	if (ibv_attach_mcast(end.qp, &g, 0))
		_exit(3);
	if (write(to_parent, &ready, 1) != 1)
		_exit(4);
	deadline = rc_now_ms() + RC_WAIT_MS;
	while (!n && rc_now_ms() < deadline)
		n = ibv_poll_cq(end.cq, 1, &wc);
	if (n == 1) {
		rep.status = (uint8_t)wc.status;
		rep.src_qp = wc.src_qp;
		rep.byte_len = wc.byte_len;
		rep.dgid_ok = !memcmp(end.buf->p + 36, g.raw + 12, 4);
		rep.pattern_ok = rc_pattern_byte(0, 24) == end.buf->p[UD_GRH_LEN] &&
				 rc_pattern_byte(99, 24) == end.buf->p[UD_GRH_LEN + 99];
	} else {
		rep.status = 0xff;
	}
	if (write(to_parent, &rep, sizeof(rep)) != sizeof(rep))
		_exit(5);
	(void)rc_read_within(from_parent, &ready, 1);	/* until the parent has read it */
	_exit(0);
}

static void test_send_reaches_another_process(void **state)
{
	union ibv_gid g = group_gid(5);
	struct child_report rep;
	struct ud_end sender;
	struct rc_env *env;
	struct ibv_ah *ah;
	int from_child, to_child, status;
	char ready = 0;

	rc_child = rc_fork_with_pipes(&from_child, &to_child);
	if (!rc_child)
		child_main(to_child, from_child, g);
	rc_setup(state);	/* now that the child is out of the way */
	env = *state;
	ud_end_create(env, &sender, QKEY);
	ah = group_ah(env, &g);
	if (!rc_read_within(from_child, &ready, 1) || ready != 'r')
		fail_msg("the child did not attach");
	ud_send(&sender, ah, MCAST_QPN, QKEY, 1, 100, 24, NULL);
	if (!rc_read_within(from_child, &rep, sizeof(rep)))
		fail_msg("the child sent no report");
	assert_int_equal(rep.status, IBV_WC_SUCCESS);
	assert_int_equal(rep.src_qp, sender.qp->qp_num);
	assert_int_equal(rep.byte_len, UD_GRH_LEN + 100);
	assert_true(rep.dgid_ok);
	assert_true(rep.pattern_ok);
	close(to_child);
	close(from_child);
	assert_int_equal(waitpid(rc_child, &status, 0), rc_child);
	rc_child = 0;
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(ibv_destroy_ah(ah), 0);
	ud_end_destroy(&sender);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		RC_TEST(attach_rules),
		RC_TEST(limits_advertised_and_enforced),
		RC_TEST(send_reaches_members_not_sender),
		RC_TEST(qkey_checked_per_member),
		RC_TEST(forged_datagrams_reach_no_member),
		cmocka_unit_test_setup_teardown(test_send_reaches_another_process, NULL,
						rc_teardown_child),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
