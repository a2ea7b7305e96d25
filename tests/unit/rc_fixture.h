/* SPDX-License-Identifier: MIT */
/*
 * The shared fixture of the RC tests (test_rc_*.c), through the system's libibverbs under
 * `softrdma run`: the device, two PDs, a pair of RC QPs in this process connected to each
 * other over loopback (GID 0, ::ffff:127.0.0.1), guarded buffers, and bounded waits for
 * completions, QP states and async events. Every wait gives up after RC_WAIT_MS: a test
 * fails, it never hangs.
 *
 * The helpers assert with cmocka, so they may only run inside a test or its setup; the
 * modify helpers (rc_modify_*) only return ibv_modify_qp()'s result and may run anywhere.
 */
#ifndef SOFTRDMA_TESTS_RC_FIXTURE_H
#define SOFTRDMA_TESTS_RC_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <infiniband/verbs.h>

#define RC_WAIT_MS	5000	/* longest any wait lasts before the test fails */
#define RC_QUIET_MS	200	/* how long "nothing happens" is watched for */
#define RC_MAX_MRS	32
#define RC_MAX_BUFS	16

#define RC_ACCESS_ALL	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |		\
			 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* How one QP of a pair is made and connected; rc_default_opts() gives the brief's values. */
struct rc_qp_opts {
	int access;			/* qp_access_flags */
	uint8_t max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint8_t min_rnr_timer;
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	enum ibv_mtu path_mtu;
	uint32_t sq_psn;
	uint32_t rq_psn;
	struct ibv_qp_cap cap;
	int cqe;			/* depth of each of the QP's send and receive CQs */
	int sq_sig_all;
	bool use_channel;		/* both CQs report to env->channel */
	bool one_cq;			/* send and receive completions in one CQ (scq == rcq) */
	struct ibv_pd *pd;		/* NULL: env->pd */
};

struct rc_end {
	struct ibv_qp *qp;
	struct ibv_cq *scq, *rcq;
};

/* Usable memory [p, p + cap), page aligned, with a PROT_NONE page on each side. */
struct rc_buf {
	uint8_t *map;
	size_t map_len;
	uint8_t *p;
	size_t cap;
};

struct rc_env {
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd, *pd2;
	union ibv_gid gid;		/* GID 0 */
	struct ibv_comp_channel *channel;
	struct rc_end a, b;		/* a requests, b responds (both can do both) */
	struct rc_end c;		/* a third QP, beside the pair (a hostile peer's victim) */
	struct ibv_mr *mrs[RC_MAX_MRS];
	struct rc_buf bufs[RC_MAX_BUFS];
	size_t page;
	const void *param;		/* a table case's row (case_table.h), else NULL */
};

/* cmocka setup/teardown: a fresh context (so async events never leak between tests). The
 * setup keeps the test's initial state (a table case's row) in env->param. */
int rc_setup(void **state);
int rc_teardown(void **state);
/* test_NAME under rc_setup and rc_teardown: an element of a test array, or for case_add(). */
#define RC_TEST(name)								\
	((struct CMUnitTest)cmocka_unit_test_setup_teardown(test_##name, rc_setup, rc_teardown))
/* A forked peer's pid (0: none), killed and reaped by rc_teardown_child if still there. */
extern pid_t rc_child;
/* rc_teardown (when the test opened a device in *state) after killing rc_child. */
int rc_teardown_child(void **state);
/*
 * fork() with a pipe each way, for a peer in another process: call it before anything is
 * opened (the child must not inherit an engine thread or a context). Returns what fork()
 * does; in each process *from_peer and *to_peer are its own ends, the others closed.
 */
pid_t rc_fork_with_pipes(int *from_peer, int *to_peer);
/* The same, for a test that must do something (fork) before the device is opened. */
void rc_open(struct rc_env *env);
/* The device the tests run on, opened from list; NULL if it is not there or will not
 * open. Uses no cmocka: a forked child may call it. */
struct ibv_context *rc_open_softrdma0(struct ibv_device **list);
void rc_close(struct rc_env *env);

void rc_default_opts(struct rc_qp_opts *o);

/* Creates the end's CQs and QP (in RESET). */
void rc_create_end(struct rc_env *env, const struct rc_qp_opts *o, struct rc_end *end);
void rc_destroy_end(struct rc_end *end);

/* ibv_modify_qp() with exactly the kernel's required mask of each transition. */
int rc_modify_init(struct ibv_qp *qp, const struct rc_qp_opts *o);
int rc_modify_rtr(struct ibv_qp *qp, const struct rc_qp_opts *o, uint32_t dest_qpn,
		  const union ibv_gid *dgid);
int rc_modify_rts(struct ibv_qp *qp, const struct rc_qp_opts *o);
/* RESET -> INIT -> RTR -> RTS, asserting each step. */
void rc_connect(struct ibv_qp *qp, const struct rc_qp_opts *o, uint32_t dest_qpn,
		const union ibv_gid *dgid);

/* A UC QP's CQs (128 entries each) and QP in RESET; srq may be NULL. */
void rc_create_uc_end(struct rc_env *env, struct rc_end *end, struct ibv_srq *srq);
/* RESET -> INIT -> RTR -> RTS with the kernel's UC masks (no RNR timer, read/atomic budget
 * or retries), to dest_qpn at env->gid, granting access. */
void rc_connect_uc(struct rc_env *env, struct ibv_qp *qp, uint32_t dest_qpn, int access);

/* env->a and env->b, created and connected to each other; NULL opts: the defaults. */
void rc_pair(struct rc_env *env, const struct rc_qp_opts *oa, const struct rc_qp_opts *ob);
/*
 * One zero-length SEND each way, each completed at both ends: both of the pair's streams
 * have carried a request and its answer, so their set-up, the same-host handshake and its
 * mappings (emu/handshake.c, emu/direct.c) among it, is over. A test that unmaps a page to
 * make a hole needs that first: a mapping made later may land in the hole.
 */
void rc_pair_settle(struct rc_env *env);

enum ibv_qp_state rc_state(struct ibv_qp *qp);
/* Waits (bounded) until the QP reports state, then asserts it. */
void rc_wait_state(struct ibv_qp *qp, enum ibv_qp_state state);

/* Guarded, zeroed memory of at least len bytes; freed by the teardown. */
struct rc_buf *rc_alloc(struct rc_env *env, size_t len);
/* Registered MRs are deregistered by the teardown unless rc_dereg() was called. */
struct ibv_mr *rc_reg(struct rc_env *env, struct ibv_pd *pd, void *addr, size_t len, int access);
struct ibv_mr *rc_reg_iova(struct rc_env *env, struct ibv_pd *pd, void *addr, size_t len,
			   uint64_t iova, int access);
void rc_dereg(struct rc_env *env, struct ibv_mr *mr);

/* A pattern that differs from byte to byte and from seed to seed. */
uint8_t rc_pattern_byte(size_t i, uint8_t seed);
void rc_fill(void *p, size_t n, uint8_t seed);
/* Byte by byte; fails naming the first differing offset. */
void rc_expect_pattern(const void *p, size_t n, uint8_t seed, const char *what);
/* Bytes [from, to) of a buffer filled from base with rc_fill(base, ..., seed). */
void rc_expect_pattern_range(const void *base, size_t from, size_t to, uint8_t seed,
			     const char *what);
void rc_expect_bytes(const void *got, const void *want, size_t n, const char *what);

/* The next completion of cq, waited for (bounded): wr_id and status must match. */
void rc_expect_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status status,
		  struct ibv_wc *out);
/* No completion shows up on cq within ms. */
void rc_expect_no_wc(struct ibv_cq *cq, int ms);

/* 1 and *ev (not yet acked) if an async event arrives within ms, else 0. */
int rc_get_async(struct rc_env *env, struct ibv_async_event *ev, int ms);
/* The next async event is type, for the QP or CQ element; it is acked. */
void rc_expect_async_qp(struct rc_env *env, enum ibv_event_type type, struct ibv_qp *qp);
void rc_expect_async_cq(struct rc_env *env, enum ibv_event_type type, struct ibv_cq *cq);
void rc_expect_no_async(struct rc_env *env, int ms);
void rc_drain_async(struct rc_env *env);

/* Posts one receive; asserts it was accepted. */
void rc_post_recv(struct ibv_qp *qp, uint64_t wr_id, struct ibv_sge *sge, int num_sge);
/* One SGE: len bytes at p, in mr. */
struct ibv_sge rc_sge(void *p, uint32_t len, const struct ibv_mr *mr);
/* A signaled send WR of num_sge SGEs and nothing else: a test fills in the rest. */
struct ibv_send_wr rc_signaled_wr(uint64_t wr_id, enum ibv_wr_opcode op, struct ibv_sge *sge,
				  int num_sge);
/* Posts one signaled send WR; returns ibv_post_send()'s result. */
int rc_post_rdma(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op, struct ibv_sge *sge,
		 int num_sge, uint64_t remote_addr, uint32_t rkey);
/* The same with immediate data (network order), which only the *_WITH_IMM opcodes carry. */
int rc_post_rdma_imm(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op,
		     struct ibv_sge *sge, int num_sge, uint64_t remote_addr, uint32_t rkey,
		     __be32 imm_data);
int rc_post_atomic(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op,
		   struct ibv_sge *sge, uint64_t remote_addr, uint32_t rkey, uint64_t compare_add,
		   uint64_t swap);
/*
 * The pair moves data: len bytes of the pattern `seed`, filled into src, WRITTEN from A to
 * remote under rkey, complete on A's send CQ and are then found at landing (B's view of remote).
 */
void rc_expect_write_lands(struct rc_env *env, uint64_t wr_id, void *src,
			   const struct ibv_mr *src_mr, uint64_t remote, uint32_t rkey,
			   const void *landing, uint32_t len, uint8_t seed, const char *what);

/*
 * Two buffers of 3 * len bytes, A's (all rights) and B's (b_access), each registered whole,
 * over a pair whose B end is made with ob (NULL: the defaults); one SEND from A to B has
 * gone both ways, so whatever the pair's streams settle first is settled; then A is filled
 * with the pattern a_seed and B with b_seed. The WRITEs go from A's start to B.
 */
struct rc_scene {
	struct rc_env *env;
	size_t len;
	uint8_t a_seed, b_seed;
	struct rc_buf *a, *b;
	struct ibv_mr *amr, *bmr;
};

void rc_scene_init(struct rc_scene *s, void **state, size_t len, int b_access,
		   const struct rc_qp_opts *ob);
/* A signaled WRITE of n bytes from A's start to B's byte offset, under rkey. */
int rc_scene_write(struct rc_scene *s, uint64_t wr_id, uint64_t offset, uint32_t n,
		   uint32_t rkey);
/* B holds its pattern still, every byte of it. */
void rc_scene_expect_b_untouched(const struct rc_scene *s);
/* A WRITE of len bytes into B's middle third succeeds, lands there, and nowhere else. */
void rc_scene_expect_middle_write(struct rc_scene *s);

/* The port counter NAME from the run's device tree (see `softrdma counters`). */
uint64_t rc_port_counter(const char *name);

uint64_t rc_now_ms(void);
/* Reads exactly n bytes from fd (a pipe to a child) within RC_WAIT_MS; false on timeout,
 * EOF or error. Uses no cmocka: a forked child may call it. */
bool rc_read_within(int fd, void *buf, size_t n);
const char *rc_state_name(enum ibv_qp_state s);

#endif
