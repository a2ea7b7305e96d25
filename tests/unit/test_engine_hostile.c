// SPDX-License-Identifier: MIT
/*
 * The engine against hostile peers and local users (issue 12, docs/security.md, "The wire
 * and the QP streams"): each test is one attack on this process's engine, made with raw
 * sockets speaking the wire format, and asserts both that it is refused and that a
 * legitimate pair of QPs in the same process (env->a to env->b) works afterwards.
 *   - the same-host path: PEER_MEMORY and by-reference requests without it, a LOCAL_CLAIM
 *     from another user or for a stream that is not ours, and no pid in anything we send;
 *   - another user's impostor stream for a live QP: never bound, never answered;
 *   - a peer that sends and never reads: the victim's memory stays bounded;
 *   - guessed rkeys, on UC and RC: refused and counted;
 *   - the fd limit: the listener and the AF_UNIX socket rest instead of spinning;
 *   - silent connections: bounded per listener, closed after the handshake timeout;
 *   - listeners on the GID table's addresses only.
 * The victim QP is env->c. Run under `softrdma run` as root for the other-user cases
 * (they fork and setuid to nobody; skipped otherwise).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "attacker_fds.h"
#include "emu/direct.h"
#include "hostile_peer.h"

#define NOBODY_UID		65534
#define HANDSHAKE_TIMEOUT_MS	5000	/* HANDSHAKE_TIMEOUT_NS, emu/handshake.c */
#define HALF_OPEN_MAX		64	/* LISTENER_HALF_OPEN, emu/internal.h */
#define PAIR_LEN		(64 * 1024)	/* above the same-host path's threshold */
#define DUP_PSN			0xfffff0	/* before a fresh responder's PSN 0: duplicates */

/* ---- the legitimate pair ---- */

struct pair_bufs {
	struct rc_buf *a, *b;
	struct ibv_mr *amr, *bmr;
};

static int post_send(struct ibv_qp *qp, uint64_t wr_id, struct ibv_sge *sge)
{
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad = NULL;

	return ibv_post_send(qp, &wr, &bad);
}

static void pair_bufs_init(struct rc_env *env, struct pair_bufs *m)
{
	m->a = rc_alloc(env, PAIR_LEN);
	m->b = rc_alloc(env, PAIR_LEN);
	m->amr = rc_reg(env, env->pd, m->a->p, PAIR_LEN, RC_ACCESS_ALL);
	m->bmr = rc_reg(env, env->pd, m->b->p, PAIR_LEN, RC_ACCESS_ALL);
}

/* env->a's WRITE (large: the same-host path) and SEND reach env->b byte for byte. */
static void expect_pair_works(struct rc_env *env, struct pair_bufs *m, uint8_t seed)
{
	struct ibv_sge sge = rc_sge(m->a->p, PAIR_LEN, m->amr);
	struct ibv_sge rsge = rc_sge(m->b->p, PAIR_LEN, m->bmr);
	struct ibv_wc wc;

	memset(m->b->p, 0, PAIR_LEN);
	rc_expect_write_lands(env, 1, m->a->p, m->amr, (uintptr_t)m->b->p, m->bmr->rkey, m->b->p,
			      PAIR_LEN, seed, "the legitimate WRITE");
	rc_fill(m->a->p, 64, seed + 1);
	memset(m->b->p, 0, PAIR_LEN);
	rc_post_recv(env->b.qp, 2, &rsge, 1);
	sge.length = 64;
	assert_int_equal(post_send(env->a.qp, 2, &sge), 0);
	rc_expect_wc(env->a.scq, 2, IBV_WC_SUCCESS, NULL);
	rc_expect_wc(env->b.rcq, 2, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.byte_len, 64);
	rc_expect_pattern(m->b->p, 64, seed + 1, "the legitimate SEND");
}

static void pair_init(struct rc_env *env, struct pair_bufs *m)
{
	rc_pair(env, NULL, NULL);
	pair_bufs_init(env, m);
	expect_pair_works(env, m, 0x11);
}

/* ---- small tools ---- */

/* CPU time of this process (every thread, the engine's included), in ms. */
static int64_t cpu_ms(void)
{
	struct timespec ts;

	assert_int_equal(clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts), 0);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Resident memory of this process, in bytes (/proc/self/statm). */
static uint64_t rss_bytes(void)
{
	unsigned long size, resident;
	FILE *f = fopen("/proc/self/statm", "re");

	assert_non_null(f);
	assert_int_equal(fscanf(f, "%lu %lu", &size, &resident), 2);
	fclose(f);
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* Connects to port on 127.0.0.1; fd may be one made earlier (-1: a new one). */
static int connect_loopback(int fd, uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };

	if (fd < 0)
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* The engine's AF_UNIX socket, by its abstract name; fd may be one made earlier. */
static int connect_local(int fd, const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = strnlen(name, WIRE_LOCAL_NAME_LEN);

	if (fd < 0)
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || !len || len >= sizeof(sa.sun_path) - 1)
		return -1;
	memcpy(sa.sun_path + 1, name, len);
	if (connect(fd, (struct sockaddr *)&sa,
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Its name, learnt as any peer learns it: from its answer about the victim's stream. */
static void learn_local_name(struct hostile *h, char name[WIRE_LOCAL_NAME_LEN])
{
	struct wire_verdict v;

	hostile_ask_about_victims_stream(h, &v);
	assert_int_equal(v.verdict, VERDICT_MINE);
	assert_int_equal(v.flags & VERDICT_SAME_HOST, VERDICT_SAME_HOST);
	memcpy(name, v.local_name, WIRE_LOCAL_NAME_LEN);
	name[WIRE_LOCAL_NAME_LEN - 1] = 0;
}

/* A LOCAL_CLAIM for the victim's own stream to us; req_port_delta != 0 spoils it. */
static void claim_victims_stream(const struct hostile *h, struct wire_hello *q,
				 int req_port_delta)
{
	struct sockaddr_storage req, resp;
	socklen_t len = sizeof(req);

	memset(q, 0, sizeof(*q));
	hostile_fill_header(q, sizeof(*q));
	q->kind = HELLO_LOCAL_CLAIM;
	q->src_qpn = htonl(h->victim->qp->qp_num);
	q->dst_qpn = htonl(h->qpn);
	assert_int_equal(getpeername(h->victims_fd, (struct sockaddr *)&req, &len), 0);
	len = sizeof(resp);
	assert_int_equal(getsockname(h->victims_fd, (struct sockaddr *)&resp, &len), 0);
	q->req_port = hostile_describe_end((struct sockaddr *)&req, q->req_addr);
	q->req_port = htons((uint16_t)(ntohs(q->req_port) + req_port_delta));
	q->resp_port = hostile_describe_end((struct sockaddr *)&resp, q->resp_addr);
}

/* Reads what fd says within ms: bytes read, 0 if it closed (or reset) first, -1 if silent. */
static ssize_t read_some(int fd, void *p, size_t n, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	size_t have = 0;

	while (have < n) {
		ssize_t got;

		if (poll(&pfd, 1, ms) != 1)
			return have ? (ssize_t)have : -1;
		got = recv(fd, (uint8_t *)p + have, n - have, 0);
		if (got <= 0)
			return (ssize_t)have;
		have += (size_t)got;
	}
	return (ssize_t)have;
}

/* Runs child() in a forked process as nobody; its exit status (0: it saw what it should). */
static int as_nobody(int (*child)(void *), void *arg)
{
	uint64_t deadline = rc_now_ms() + 2 * RC_WAIT_MS;
	int status = 0;
	pid_t pid, done;

	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(2 * RC_WAIT_MS / 1000);
		if (setgroups(0, NULL) || setgid(NOBODY_UID) || setuid(NOBODY_UID))
			_exit(100);
		_exit(child(arg));
	}
	while ((done = waitpid(pid, &status, WNOHANG)) == 0 && rc_now_ms() < deadline)
		usleep(10 * 1000);
	if (done != pid) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		fail_msg("the child did not finish");
	}
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void skip_unless_root(void)
{
	if (geteuid() != 0)
		skip();	/* another user is needed: setuid() is root's */
}

/* ---- class 1: the same-host path ---- */

/*
 * The attack of issue 12's first finding, once more: a peer points the victim at the
 * victim's own AF_UNIX socket (whose name it learnt by asking about the victim's stream)
 * and sends a WRITE by reference naming memory of the victim outside any region. The
 * victim asks itself about a stream that is not its own: no, so no PEER_MEMORY, and the
 * by-reference frame is a protocol error: hung up without a word, QP in ERR, nothing
 * copied.
 */
static void test_by_reference_write_without_the_path_is_refused(void **state)
{
	struct rc_env *env = *state;
	static const char secret[64] = "the victim's memory, outside every region: keep it";
	struct wire_verdict mine = { .verdict = VERDICT_MINE, .flags = VERDICT_SAME_HOST };
	struct wire_packet pkt = { .opcode = OP_RC_WRITE_ONLY, .ack_req = true, .by_ref = true };
	uint8_t desc[16];	/* one segment: address, length */
	uint64_t addr = htobe64((uintptr_t)secret), len = htobe64(sizeof(secret));
	struct pair_bufs m;
	struct hostile h;

	pair_init(env, &m);
	hostile_prepare(&h, env, &env->c, IBV_QPT_RC);
	learn_local_name(&h, mine.local_name);
	h.fd = hostile_open_stream(&h, h.qpn);
	hostile_answer(&h, &mine);	/* "ask there": the victim's own socket */
	memcpy(desc, &addr, 8);
	memcpy(desc + 8, &len, 8);
	pkt.va = (uintptr_t)h.buf->p;
	pkt.rkey = h.mr->rkey;
	pkt.dma_len = sizeof(secret);
	pkt.payload_len = sizeof(desc);
	hostile_send_request(&h, &pkt, 0);
	hostile_send_bytes(&h, desc, sizeof(desc));
	hostile_expect_hung_up(h.fd);	/* no PEER_MEMORY came first, no NAK after */
	h.fd = -1;
	rc_wait_state(env->c.qp, IBV_QPS_ERR);
	hostile_expect_untouched(&h);
	hostile_close(&h);
	expect_pair_works(env, &m, 0x21);
}

/* PEER_MEMORY on the victim's own stream, from a responder no process of ours vouched for:
 * the victim would send its payloads by reference from then on. A protocol error. */
static void test_peer_memory_nobody_asked_for_is_refused(void **state)
{
	struct rc_env *env = *state;
	struct wire_packet pkt = { .opcode = OP_PEER_MEMORY };
	uint8_t hdr[4 + WIRE_MAX_HDR];
	struct pair_bufs m;
	struct hostile h;
	unsigned int n;

	pair_init(env, &m);
	hostile_open_victim(&h, env, &env->c, IBV_QPT_RC);
	hostile_accept_victims_stream(&h);
	pkt.qpn = env->c.qp->qp_num;
	n = wire_build(hdr, &pkt);
	assert_int_equal(send(h.victims_fd, hdr, n, MSG_NOSIGNAL), (ssize_t)n);
	rc_wait_state(env->c.qp, IBV_QPS_ERR);
	hostile_expect_hung_up(h.victims_fd);
	h.victims_fd = -1;
	hostile_close(&h);
	expect_pair_works(env, &m, 0x22);
}

struct local_claim {
	const char *name;
	struct wire_hello claim;
};

/* As nobody: the claim goes unanswered (0), is answered (1), or cannot be made (2). */
static int claim_as_other_user(void *arg)
{
	struct local_claim *lc = arg;
	struct wire_verdict v;
	int fd = connect_local(-1, lc->name);

	if (fd < 0)
		return 2;
	if (send(fd, &lc->claim, sizeof(lc->claim), MSG_NOSIGNAL) != sizeof(lc->claim))
		return 0;	/* already hung up on */
	return read_some(fd, &v, sizeof(v), RC_WAIT_MS) > 0 ? 1 : 0;
}

/* Our own user's claim, answered. */
static void claim(const char *name, const struct wire_hello *q, struct wire_verdict *v)
{
	int fd = connect_local(-1, name);

	assert_true(fd >= 0);
	assert_int_equal(send(fd, q, sizeof(*q), MSG_NOSIGNAL), (ssize_t)sizeof(*q));
	assert_int_equal(read_some(fd, v, sizeof(*v), RC_WAIT_MS), (ssize_t)sizeof(*v));
	close(fd);
}

/*
 * The AF_UNIX socket answers only processes of its own user, and only for its own streams.
 * Another user's claim for the victim's real stream (which would let it read the victim's
 * payloads) is closed unanswered; ours for a stream that is not the victim's is NOT_MINE;
 * and the same claim, right, from us is MINE: the refusals are the user's and the stream's.
 */
static void test_local_claim_from_another_user_is_refused(void **state)
{
	struct rc_env *env = *state;
	char name[WIRE_LOCAL_NAME_LEN];
	struct local_claim lc = { .name = name };
	struct wire_verdict v;
	struct pair_bufs m;
	struct hostile h;

	skip_unless_root();
	pair_init(env, &m);
	hostile_open_victim(&h, env, &env->c, IBV_QPT_RC);
	learn_local_name(&h, name);
	claim_victims_stream(&h, &lc.claim, 0);
	assert_int_equal(as_nobody(claim_as_other_user, &lc), 0);
	claim_victims_stream(&h, &lc.claim, 1);	/* a stream the victim does not have */
	claim(name, &lc.claim, &v);
	assert_int_equal(v.verdict, VERDICT_NOT_MINE);
	claim_victims_stream(&h, &lc.claim, 0);
	claim(name, &lc.claim, &v);
	assert_int_equal(v.verdict, VERDICT_MINE);
	assert_int_equal(rc_state(env->c.qp), IBV_QPS_RTS);
	hostile_close(&h);
	expect_pair_works(env, &m, 0x23);
}

/*
 * The descriptors of this process that name what target (as /proc/self/fd's links say:
 * "/memfd:planted (deleted)", "pipe:[inode]") begins with. Only those: the engine beside
 * the test opens and closes descriptors of its own at any time.
 */
static int fds_naming(const char *target)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d))) {
		char path[300], link[128];
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = 0;
		n += !strncmp(link, target, strlen(target));
	}
	closedir(d);
	return n;
}

/* What /proc/self/fd shows for one end of pipe fds. */
static void pipe_name(int fd, char name[64])
{
	char path[64];
	ssize_t len;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	len = readlink(path, name, 63);
	assert_true(len > 0);
	name[len] = 0;
}

/* A memfd of size bytes, sealed against shrinking when sealed (-1 on failure). */
static int planted_memfd(size_t size, bool sealed, uint32_t magic)
{
	int fd = memfd_create("planted", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	if (magic)
		assert_int_equal(pwrite(fd, &magic, sizeof(magic), 0), (ssize_t)sizeof(magic));
	if (sealed)
		assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	return fd;
}

/* Our own user's claim for the victim's stream, with files attached; answered. */
static void claim_with_files(const char *name, const struct wire_hello *q, const int *fds,
			     int nfds, struct wire_verdict *v)
{
	union {
		struct cmsghdr hdr;
		uint8_t buf[CMSG_SPACE(8 * sizeof(int))];
	} control = { 0 };
	struct iovec iov = { (void *)q, sizeof(*q) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			      .msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int)) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	int fd = connect_local(-1, name);

	assert_true(fd >= 0);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
	assert_int_equal(sendmsg(fd, &msg, MSG_NOSIGNAL), (ssize_t)sizeof(*q));
	assert_int_equal(read_some(fd, v, sizeof(*v), RC_WAIT_MS), (ssize_t)sizeof(*v));
	close(fd);
}

/*
 * Direct placement's files come with a LOCAL_CLAIM: a claimant of our own user may plant
 * anything there. A pipe, memfds that can shrink (a mapping would fault past the end), a
 * sealed one of the wrong size or with a wrong head, and more files than two: the victim
 * answers the claim as ever, maps none of them, keeps none open, and its QPs work on.
 */
static void test_planted_placement_files_are_refused(void **state)
{
	struct rc_env *env = *state;
	char name[WIRE_LOCAL_NAME_LEN];
	struct wire_hello q;
	struct wire_verdict v;
	struct pair_bufs m;
	struct hostile h;
	int pipe_fds[2], fds[4];
	char pipe_link[64];

	pair_init(env, &m);
	hostile_open_victim(&h, env, &env->c, IBV_QPT_RC);
	learn_local_name(&h, name);
	claim_victims_stream(&h, &q, 0);
	assert_int_equal(pipe2(pipe_fds, O_CLOEXEC), 0);
	pipe_name(pipe_fds[0], pipe_link);
	/* Two pipe ends where the key table and the page belong. */
	claim_with_files(name, &q, pipe_fds, 2, &v);
	assert_int_equal(v.verdict, VERDICT_MINE);
	/* Unsealed memfds: the claimant could shrink them under the victim's mapping. */
	fds[0] = planted_memfd(1u << 20, false, DIRECT_KEYS_MAGIC);
	fds[1] = planted_memfd(DIRECT_PAGE_SIZE, false, 0);
	claim_with_files(name, &q, fds, 2, &v);
	assert_int_equal(v.verdict, VERDICT_MINE);
	close(fds[0]);
	close(fds[1]);
	/* Sealed, but a key table with a wrong head and a page of the wrong size. */
	fds[0] = planted_memfd(1u << 20, true, 0x41414141);
	fds[1] = planted_memfd(DIRECT_PAGE_SIZE + 1, true, 0);
	claim_with_files(name, &q, fds, 2, &v);
	assert_int_equal(v.verdict, VERDICT_MINE);
	assert_int_equal(fds_naming("/memfd:planted"), 2);	/* ours; the victim's copies went */
	/* Four files at once: more than a claim carries. */
	fds[2] = pipe_fds[0];
	fds[3] = pipe_fds[1];
	claim_with_files(name, &q, fds, 4, &v);
	assert_int_equal(v.verdict, VERDICT_MINE);
	close(fds[0]);
	close(fds[1]);
	/* What the victim was sent, it closed: of the pipe, our two ends; no planted memfd. */
	assert_int_equal(fds_naming(pipe_link), 2);
	assert_int_equal(fds_naming("/memfd:planted"), 0);
	close(pipe_fds[0]);
	close(pipe_fds[1]);
	assert_int_equal(rc_state(env->c.qp), IBV_QPS_RTS);
	hostile_close(&h);
	expect_pair_works(env, &m, 0x24);
}

/* Our pid, as a wire field (32 bits, big-endian) or as digits standing alone. */
static void expect_no_pid(const void *msg, size_t len, const char *what)
{
	const uint8_t *p = msg;
	uint32_t be = htonl((uint32_t)getpid());
	char digits[16];
	size_t nd = (size_t)snprintf(digits, sizeof(digits), "%d", (int)getpid());

	for (size_t i = 0; i + 4 <= len; i++)
		if (!memcmp(p + i, &be, 4))
			fail_msg("%s carries our pid at byte %zu", what, i);
	for (size_t i = 0; i + nd <= len; i++) {
		bool alone = (i == 0 || p[i - 1] < '0' || p[i - 1] > '9') &&
			     (i + nd == len || p[i + nd] < '0' || p[i + nd] > '9');

		if (alone && !memcmp(p + i, digits, nd))
			fail_msg("%s carries our pid (\"%s\") at byte %zu", what, digits, i);
	}
}

/* An AF_UNIX socket of ours, by an abstract name: where we point the victim. */
static int local_listener(char name[WIRE_LOCAL_NAME_LEN])
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	size_t len;

	assert_true(fd >= 0);
	snprintf(name, WIRE_LOCAL_NAME_LEN, "softrdma-test-%llx",
		 (unsigned long long)rc_now_ms());
	len = strlen(name);
	memcpy(sa.sun_path + 1, name, len);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa,
			      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len)), 0);
	assert_int_equal(listen(fd, 4), 0);
	return fd;
}

/*
 * Everything the engine tells a peer, before a stream is trusted and after: its stream's
 * hello, its VERIFY question, its verdict about its own stream, and the LOCAL_CLAIM it
 * sends to the socket a peer names. None of it carries our pid: a peer learns nothing of
 * the process from the wire (the hello of protocol 2 carried pid, cookie and its address).
 */
static void test_nothing_sent_carries_our_pid(void **state)
{
	struct rc_env *env = *state;
	struct wire_verdict ours = { .verdict = VERDICT_MINE, .flags = VERDICT_SAME_HOST };
	struct wire_verdict no = { .verdict = VERDICT_NOT_MINE };
	struct wire_verdict theirs;
	struct wire_hello q;
	struct pollfd pfd;
	struct pair_bufs m;
	struct hostile h;
	int lfd, fd;

	pair_init(env, &m);
	hostile_prepare(&h, env, &env->c, IBV_QPT_RC);
	hostile_accept_victims_stream(&h);
	expect_no_pid(&h.victims_hello, sizeof(h.victims_hello), "the STREAM hello");
	hostile_ask_about_victims_stream(&h, &theirs);
	assert_int_equal(theirs.verdict, VERDICT_MINE);
	expect_no_pid(&theirs, sizeof(theirs), "the verdict on its own stream");
	/* Our stream: the victim's VERIFY comes to us, and it will ask our AF_UNIX socket. */
	lfd = local_listener(ours.local_name);
	h.fd = hostile_open_stream(&h, h.qpn);
	fd = hostile_accept_hello(&h, &q);
	assert_int_equal(q.kind, HELLO_VERIFY);
	expect_no_pid(&q, sizeof(q), "the VERIFY hello");
	hostile_fill_header(&ours, sizeof(ours));
	assert_int_equal(send(fd, &ours, sizeof(ours), MSG_NOSIGNAL), (ssize_t)sizeof(ours));
	close(fd);
	pfd = (struct pollfd){ .fd = lfd, .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, RC_WAIT_MS), 1);
	fd = accept(lfd, NULL, NULL);
	assert_true(fd >= 0);
	assert_int_equal(read_some(fd, &q, sizeof(q), RC_WAIT_MS), (ssize_t)sizeof(q));
	assert_int_equal(q.kind, HELLO_LOCAL_CLAIM);
	expect_no_pid(&q, sizeof(q), "the LOCAL_CLAIM hello");
	hostile_fill_header(&no, sizeof(no));
	assert_int_equal(send(fd, &no, sizeof(no), MSG_NOSIGNAL), (ssize_t)sizeof(no));
	close(fd);
	close(lfd);
	hostile_expect_stream_works(&h);	/* bound, over TCP */
	hostile_close(&h);
	expect_pair_works(env, &m, 0x24);
}

/* ---- class 2: another user's impostor for a live stream ---- */

struct impostor {
	struct rc_env *env;
	uint32_t rkey;
	uint64_t va;
};

/*
 * As nobody: a stream to env->b claiming env->a's QPN, from 127.0.0.1 as env->a's is, then
 * SENDs and WRITEs at the PSNs around the live one (duplicates would be ACKed, the next
 * one executed). 0: hung up on without a byte; 1: answered (a PSN oracle); 2: kept open.
 */
static int impostor_stream(void *arg)
{
	const struct impostor *im = arg;
	struct wire_hello hello = { .kind = HELLO_STREAM,
				    .src_qpn = htonl(im->env->a.qp->qp_num),
				    .dst_qpn = htonl(im->env->b.qp->qp_num) };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	uint8_t frames[8 * (4 + WIRE_MAX_HDR + 8)], reply[64];
	size_t len = 0;
	ssize_t got;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	hostile_fill_header(&hello, sizeof(hello));
	memcpy(hello.src_gid, im->env->gid.raw, 16);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)(im->env->b.qp->qp_num >> 8));
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		return 3;
	for (uint32_t psn = 0; psn < 4; psn++) {
		struct wire_packet send = { .opcode = OP_RC_SEND_ONLY, .ack_req = true,
					    .qpn = im->env->b.qp->qp_num, .psn = psn,
					    .payload_len = 8 };
		struct wire_packet write = { .opcode = OP_RC_WRITE_ONLY, .ack_req = true,
					     .qpn = im->env->b.qp->qp_num, .psn = psn,
					     .va = im->va, .rkey = im->rkey, .dma_len = 8,
					     .payload_len = 8 };

		len += wire_build(frames + len, &send);
		memset(frames + len, 0xee, 8);
		len += 8;
		len += wire_build(frames + len, &write);
		memset(frames + len, 0xee, 8);
		len += 8;
	}
	send(fd, &hello, sizeof(hello), MSG_NOSIGNAL);
	send(fd, frames, len, MSG_NOSIGNAL);
	got = read_some(fd, reply, sizeof(reply), RC_WAIT_MS);
	close(fd);
	return got > 0 ? 1 : got < 0 ? 2 : 0;
}

/*
 * A local user of another uid connects to a live QP's listener and claims its peer's QPN,
 * from the peer's address. The QPN's owner (this engine) disowns the stream: it is hung up
 * on unread, nothing is ACKed or NAKed on it, nothing it sent lands, and the live stream
 * goes on as if nothing happened.
 */
static void test_impostor_of_another_user_is_not_heard(void **state)
{
	struct rc_env *env = *state;
	struct impostor im = { .env = env };
	struct ibv_sge rsge;
	struct pair_bufs m;

	skip_unless_root();
	pair_init(env, &m);
	memset(m.b->p, 0, PAIR_LEN);
	im.va = (uintptr_t)m.b->p;
	im.rkey = m.bmr->rkey;	/* the worst case: the key is no secret */
	rsge = rc_sge(m.b->p + PAIR_LEN / 2, 64, m.bmr);
	rc_post_recv(env->b.qp, 7, &rsge, 1);	/* what an injected SEND would land in */
	assert_int_equal(as_nobody(impostor_stream, &im), 0);
	rc_expect_no_wc(env->b.rcq, RC_QUIET_MS);
	for (size_t i = 0; i < PAIR_LEN; i++)
		if (m.b->p[i])
			fail_msg("byte %zu of env->b's region was written by the impostor", i);
	assert_int_equal(rc_state(env->b.qp), IBV_QPS_RTS);
	/* The receive posted above takes the legitimate SEND first: consume it. */
	{
		struct ibv_sge sge = rc_sge(m.a->p, 8, m.amr);
		struct ibv_wc wc;

		assert_int_equal(post_send(env->a.qp, 8, &sge), 0);
		rc_expect_wc(env->a.scq, 8, IBV_WC_SUCCESS, NULL);
		rc_expect_wc(env->b.rcq, 7, IBV_WC_SUCCESS, &wc);
		assert_int_equal(wc.byte_len, 8);
	}
	expect_pair_works(env, &m, 0x25);
}

/* ---- class 3: a peer that sends and never reads ---- */

#define FLOOD_MS	2000
#define BIG_READ	(1024 * 1024)
/*
 * What the victim may hold for a peer that does not read: its send queue stops taking
 * requests above TX_HIGH (256 KiB of copies and per-piece costs, emu/conn.h) and at
 * max_dest_rd_atomic READ responses, which wait as keys, not copies; plus the stream's
 * 64 KiB staging buffer. 8 MiB is that with room for the allocator and the test itself;
 * main at issue 12 grew by about 230 MB a second.
 */
#define RSS_BOUND	(8u * 1024 * 1024)

/* Zero-length duplicate WRITEs (no key needed) and, every eighth, a duplicate READ of
 * the whole of a 1 MiB region: 40 bytes asking for a megabyte. */
static size_t build_flood(uint8_t *out, size_t cap, uint32_t qpn, uint64_t va, uint32_t rkey)
{
	size_t len = 0;

	for (int i = 0; len + 4 + WIRE_MAX_HDR <= cap; i++) {
		struct wire_packet pkt = { .ack_req = true, .qpn = qpn, .psn = DUP_PSN };

		if (i % 8 == 7) {
			pkt.opcode = OP_RC_READ_REQUEST;
			pkt.va = va;
			pkt.rkey = rkey;
			pkt.dma_len = BIG_READ;
		} else {
			pkt.opcode = OP_RC_WRITE_ONLY;
		}
		len += wire_build(out + len, &pkt);
	}
	return len;
}

/* Sends the flood for ms without ever reading; how long the socket took nothing at the end. */
static uint64_t flood(int fd, const uint8_t *frames, size_t len, int ms, uint64_t *sent)
{
	uint64_t start = rc_now_ms(), last_progress = start;
	size_t off = 0;

	*sent = 0;
	while (rc_now_ms() - start < (uint64_t)ms) {
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		ssize_t n;

		poll(&pfd, 1, 10);
		n = send(fd, frames + off, len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n <= 0)
			continue;
		last_progress = rc_now_ms();
		*sent += (uint64_t)n;
		off = (off + (size_t)n) % len;
	}
	return rc_now_ms() - last_progress;
}

static void test_peer_that_never_reads_is_bounded(void **state)
{
	struct rc_env *env = *state;
	static uint8_t frames[64 * 1024];
	uint64_t rss, grew, stalled_ms, sent, dups;
	struct rc_buf *big;
	struct ibv_mr *bigmr;
	struct pair_bufs m;
	struct hostile h;
	size_t len;
	int small = 4096;

	pair_init(env, &m);
	hostile_open_victim(&h, env, &env->c, IBV_QPT_RC);
	assert_int_equal(setsockopt(h.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	big = rc_alloc(env, BIG_READ);
	memset(big->p, 0x5a, BIG_READ);	/* resident before we measure */
	bigmr = rc_reg(env, env->pd, big->p, BIG_READ, RC_ACCESS_ALL);
	len = build_flood(frames, sizeof(frames), env->c.qp->qp_num, (uintptr_t)big->p,
			  bigmr->rkey);
	dups = rc_port_counter("duplicate_request");
	rss = rss_bytes();
	stalled_ms = flood(h.fd, frames, len, FLOOD_MS, &sent);
	grew = rss_bytes() - rss;
	dups = rc_port_counter("duplicate_request") - dups;
	print_message("flood: %llu bytes taken, %llu duplicates answered, RSS +%llu KiB, "
		      "nothing taken for the last %llu ms\n", (unsigned long long)sent,
		      (unsigned long long)dups, (unsigned long long)(grew / 1024),
		      (unsigned long long)stalled_ms);
	/* The victim stopped reading once it owed too much: the flood backs up on our side. */
	assert_true(stalled_ms >= FLOOD_MS / 4);
	assert_true(grew < RSS_BOUND);
	/* Meanwhile the process answers: the legitimate pair's WRITE and SEND complete. */
	expect_pair_works(env, &m, 0x26);
	assert_true(rss_bytes() - rss < RSS_BOUND);
	assert_int_equal(rc_state(env->c.qp), IBV_QPS_RTS);
	hostile_close(&h);
}

/* ---- class 6: guessed rkeys ---- */

/* A key no region of env has: a guess that misses. */
static uint32_t wrong_key(struct rc_env *env, uint32_t seed)
{
	for (uint32_t k = seed * 2654435761u;; k++) {
		bool taken = false;

		for (int i = 0; i < RC_MAX_MRS; i++)
			taken |= env->mrs[i] && (env->mrs[i]->rkey == k || env->mrs[i]->lkey == k);
		if (!taken)
			return k;
	}
}

#define UC_GUESSES	1000

/*
 * UC drops what it cannot place without a word (IBTA class D), so a peer may guess rkeys
 * as fast as it can send: every guess is counted in resp_remote_access_errors, where an
 * administrator looks, and none lands.
 */
static void test_guessed_uc_rkeys_are_counted(void **state)
{
	struct rc_env *env = *state;
	static uint8_t frames[UC_GUESSES * (4 + WIRE_MAX_HDR + 8)];
	struct wire_packet pkt = { .opcode = OP_UC_SEND_ONLY, .payload_len = 8 };
	struct rc_buf *rbuf;
	struct ibv_mr *rmr;
	struct ibv_sge rsge;
	struct pair_bufs m;
	struct hostile h;
	uint64_t before;
	size_t len = 0;

	pair_init(env, &m);
	hostile_open_victim(&h, env, &env->c, IBV_QPT_UC);
	rbuf = rc_alloc(env, 64);
	rmr = rc_reg(env, env->pd, rbuf->p, 64, RC_ACCESS_ALL);
	rsge = rc_sge(rbuf->p, 64, rmr);
	rc_post_recv(env->c.qp, 1, &rsge, 1);
	for (uint32_t i = 0; i < UC_GUESSES; i++) {
		struct wire_packet guess = { .opcode = OP_UC_WRITE_ONLY, .qpn = env->c.qp->qp_num,
					     .psn = i, .va = (uintptr_t)h.buf->p,
					     .rkey = wrong_key(env, i + 1), .dma_len = 8,
					     .payload_len = 8 };

		len += wire_build(frames + len, &guess);
		memset(frames + len, 0xee, 8);
		len += 8;
	}
	before = rc_port_counter("resp_remote_access_errors");
	hostile_send_bytes(&h, frames, len);
	/* A SEND behind them: once it is received, every guess before it was handled. */
	pkt.psn = UC_GUESSES;
	hostile_send_request(&h, &pkt, 8);
	rc_expect_wc(env->c.rcq, 1, IBV_WC_SUCCESS, NULL);
	assert_int_equal(rc_port_counter("resp_remote_access_errors") - before, UC_GUESSES);
	hostile_expect_untouched(&h);
	assert_int_equal(rc_state(env->c.qp), IBV_QPS_RTS);
	hostile_close(&h);
	expect_pair_works(env, &m, 0x27);
}

/* One RC request with a guessed key from a fresh hostile peer: NAKed, the victim in ERR, and
 * counted once. */
static void guess_rc_once(struct rc_env *env, struct wire_packet *pkt, const char *what)
{
	struct hostile h;
	uint64_t before, counted;

	hostile_open_victim(&h, env, &env->c, IBV_QPT_RC);
	pkt->va = (uintptr_t)h.buf->p;
	pkt->rkey = wrong_key(env, 7);
	pkt->dma_len = 8;
	before = rc_port_counter("resp_remote_access_errors");
	hostile_send_request(&h, pkt, pkt->payload_len);
	hostile_expect_nak(&h, NAK_REMOTE_ACCESS);
	rc_wait_state(env->c.qp, IBV_QPS_ERR);
	counted = rc_port_counter("resp_remote_access_errors") - before;
	if (counted != 1)
		fail_msg("a guessed key in %s counted %llu times", what,
			 (unsigned long long)counted);
	hostile_expect_untouched(&h);
	hostile_close(&h);
	rc_destroy_end(&env->c);
}

/* On RC a wrong guess costs the peer its connection, and is counted: a WRITE, a READ, and a
 * READ and an atomic at an old PSN (a duplicate is answered again, its key checked again). */
static void test_guessed_rc_rkeys_are_counted(void **state)
{
	struct rc_env *env = *state;
	struct wire_packet write = { .opcode = OP_RC_WRITE_ONLY, .ack_req = true,
				     .payload_len = 8 };
	struct wire_packet read = { .opcode = OP_RC_READ_REQUEST, .ack_req = true };
	struct wire_packet dup_read = { .opcode = OP_RC_READ_REQUEST, .ack_req = true,
					.psn = DUP_PSN };
	struct wire_packet dup_atomic = { .opcode = OP_RC_FETCH_ADD, .ack_req = true,
					  .psn = DUP_PSN, .swap_add = 1 };
	struct pair_bufs m;

	pair_init(env, &m);
	guess_rc_once(env, &write, "a WRITE");
	guess_rc_once(env, &read, "a READ");
	guess_rc_once(env, &dup_read, "a duplicate READ");
	guess_rc_once(env, &dup_atomic, "a duplicate atomic");
	expect_pair_works(env, &m, 0x28);
}

/* ---- class 7: the fd limit ---- */

/*
 * Leaves the process no descriptor to open: the soft limit at 3, below every descriptor but
 * stdin, stdout and stderr, so that one closed meanwhile (by the engine, or the counters'
 * publisher) cannot be had either. Returns the soft limit to restore.
 */
static rlim_t exhaust_fds(void)
{
	struct rlimit rl;
	rlim_t old;

	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0)
			skip();	/* a free descriptor below the limit would be taken */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	old = rl.rlim_cur;
	rl.rlim_cur = 3;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	assert_int_equal(dup(0), -1);
	assert_int_equal(errno, EMFILE);
	return old;
}

/* The process's CPU time over 2 s at the fd limit: idle but for whatever spins. */
static int64_t cpu_while_waiting(const char *what)
{
	int64_t cpu = cpu_ms();

	sleep(2);
	cpu = cpu_ms() - cpu;
	print_message("at the fd limit for 2 s, %s waiting: %lld ms of CPU\n", what,
		      (long long)cpu);
	return cpu;
}

/*
 * At the fd limit accept() fails while the connection stays in the backlog, so a watch on
 * the listener fires again at once: a loop that retries spins on a CPU. The listener rests
 * instead (ACCEPT_BACKOFF_NS), and once descriptors are free the connection is served.
 */
static void test_at_the_fd_limit_the_listener_rests_then_serves(void **state)
{
	struct rc_env *env = *state;
	char junk[sizeof(struct wire_hello)];
	struct pair_bufs m;
	rlim_t old;
	int fd;

	pair_init(env, &m);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);	/* made while fds are left */
	assert_true(fd >= 0);
	old = exhaust_fds();
	connect_loopback(fd, (uint16_t)(env->b.qp->qp_num >> 8));
	assert_true(cpu_while_waiting("a connection to the QP listener") < 200);
	/* Not taken while no descriptor is left: a hello that is not one goes unanswered... */
	memset(junk, 'A', sizeof(junk));
	assert_int_equal(send(fd, junk, sizeof(junk), MSG_NOSIGNAL), (ssize_t)sizeof(junk));
	assert_int_equal(read_some(fd, junk, 1, 100), -1);
	set_soft_fd_limit(old);
	/* ... until there are: then it is read, found wanting, and hung up on. */
	hostile_expect_hung_up(fd);
	expect_pair_works(env, &m, 0x29);
}

/* The same for the AF_UNIX socket of the same-host path, which any local user can find
 * (/proc/net/unix lists abstract names) and connect to. */
static void test_at_the_fd_limit_the_local_socket_rests_then_serves(void **state)
{
	struct rc_env *env = *state;
	char name[WIRE_LOCAL_NAME_LEN];
	struct wire_hello q;
	struct wire_verdict v;
	struct pair_bufs m;
	struct hostile h;
	rlim_t old;
	int fd;

	pair_init(env, &m);
	hostile_open_victim(&h, env, &env->c, IBV_QPT_RC);
	learn_local_name(&h, name);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	claim_victims_stream(&h, &q, 1);	/* a stream the victim does not have */
	old = exhaust_fds();
	assert_int_equal(connect_local(fd, name), fd);
	assert_true(cpu_while_waiting("a connection to the AF_UNIX socket") < 200);
	/* Not taken while no descriptor is left: a claim goes unanswered... */
	assert_int_equal(send(fd, &q, sizeof(q), MSG_NOSIGNAL), (ssize_t)sizeof(q));
	assert_int_equal(read_some(fd, &v, sizeof(v), 100), -1);
	set_soft_fd_limit(old);
	/* ... until there are: then a claim for a stream the victim does not have is, no. */
	assert_int_equal(read_some(fd, &v, sizeof(v), RC_WAIT_MS), (ssize_t)sizeof(v));
	assert_int_equal(v.verdict, VERDICT_NOT_MINE);
	close(fd);
	hostile_close(&h);
	expect_pair_works(env, &m, 0x2a);
}

/* ---- class 8: connections that never say what they are for ---- */

/*
 * 2000 connections to a QP listener that never send a hello: at most HALF_OPEN_MAX are
 * held shortly after, none once the handshake timeout passed; and a pair whose streams
 * connect to that listener meanwhile gets in (the oldest silent one makes room).
 */
static void test_silent_connections_are_bounded_and_time_out(void **state)
{
	enum { SILENT = 2000 };
	struct rc_env *env = *state;
	static int fds[SILENT];
	struct rc_qp_opts o;
	struct pair_bufs m;
	uint64_t start;
	uint16_t port;
	rlim_t old;
	int open;

	old = raise_fd_limit(SILENT + 256);
	rc_default_opts(&o);
	rc_create_end(env, &o, &env->c);	/* a QP: its listener is the one attacked */
	port = (uint16_t)(env->c.qp->qp_num >> 8);
	start = rc_now_ms();
	for (int i = 0; i < SILENT; i++)
		fds[i] = connect_loopback(-1, port);
	/*
	 * The pair's streams connect to the same listener, behind the silent ones in its
	 * accept queue: once they are up, the engine has taken every silent connection, and
	 * what it holds is what it keeps, however slowly a loaded machine got there.
	 */
	pair_init(env, &m);
	assert_int_equal(env->a.qp->qp_num >> 8, port);
	assert_int_equal(env->b.qp->qp_num >> 8, port);
	assert_true(rc_now_ms() - start < HANDSHAKE_TIMEOUT_MS);	/* before any timed out */
	open = still_open(fds, SILENT);
	print_message("%d silent connections, %d still held once the pair is up\n", SILENT, open);
	assert_true(open <= HALF_OPEN_MAX);
	expect_closed_at_deadline(fds, SILENT, (int64_t)start, HANDSHAKE_TIMEOUT_MS);
	for (int i = 0; i < SILENT; i++)
		close(fds[i]);
	expect_pair_works(env, &m, 0x2b);
	set_soft_fd_limit(old);
}

/* ---- class 10: where the listeners listen ---- */

/* Whether addr (IPv4) is in the device's GID table. */
static bool in_gid_table(struct rc_env *env, struct in_addr addr)
{
	struct ibv_port_attr port;

	assert_int_equal(ibv_query_port(env->ctx, 1, &port), 0);
	for (int i = 0; i < port.gid_tbl_len; i++) {
		union ibv_gid gid;

		if (!ibv_query_gid(env->ctx, 1, i, &gid) && !memcmp(gid.raw + 12, &addr, 4) &&
		    gid.raw[10] == 0xff && gid.raw[11] == 0xff)
			return true;
	}
	return false;
}

/* A TCP connection to addr:port is refused: nothing listens there. */
static void expect_refused(struct in_addr addr, uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr = addr };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int ret;

	assert_true(fd >= 0);
	ret = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (ret == 0)
		fail_msg("a QP listener took a connection on %s, not in the GID table",
			 inet_ntoa(addr));
	assert_int_equal(errno, ECONNREFUSED);
	close(fd);
}

/*
 * A QP listener is bound on the GID table's addresses only (loopback's 127.0.0.1 by
 * default), as rxe hears only its netdev: not on 127.0.0.2, which reaches this host as
 * well, nor on an address of another interface of the host (when there is one).
 */
static void test_listener_is_bound_only_on_the_gid_table(void **state)
{
	struct rc_env *env = *state;
	uint16_t port;
	struct in_addr other = { .s_addr = htonl(0x7f000002) };
	struct pair_bufs m;
	struct ifaddrs *ifs;

	pair_init(env, &m);
	port = (uint16_t)(env->b.qp->qp_num >> 8);
	assert_false(in_gid_table(env, other));
	expect_refused(other, port);
	assert_int_equal(getifaddrs(&ifs), 0);
	for (struct ifaddrs *ifa = ifs; ifa; ifa = ifa->ifa_next) {
		struct sockaddr_in sin;

		if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET ||
		    !(ifa->ifa_flags & IFF_UP))
			continue;
		memcpy(&sin, ifa->ifa_addr, sizeof(sin));
		if (!in_gid_table(env, sin.sin_addr))
			expect_refused(sin.sin_addr, port);
	}
	freeifaddrs(ifs);
	expect_pair_works(env, &m, 0x2c);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		RC_TEST(by_reference_write_without_the_path_is_refused),
		RC_TEST(peer_memory_nobody_asked_for_is_refused),
		RC_TEST(local_claim_from_another_user_is_refused),
		RC_TEST(planted_placement_files_are_refused),
		RC_TEST(nothing_sent_carries_our_pid),
		RC_TEST(impostor_of_another_user_is_not_heard),
		RC_TEST(peer_that_never_reads_is_bounded),
		RC_TEST(guessed_uc_rkeys_are_counted),
		RC_TEST(guessed_rc_rkeys_are_counted),
		RC_TEST(at_the_fd_limit_the_listener_rests_then_serves),
		RC_TEST(at_the_fd_limit_the_local_socket_rests_then_serves),
		RC_TEST(silent_connections_are_bounded_and_time_out),
		RC_TEST(listener_is_bound_only_on_the_gid_table),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);	/* one attack: test_engine_hostile NAME */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
