/* SPDX-License-Identifier: MIT */
/*
 * The verbs conformance program: many small cases, each run in its own child process with
 * its own device context and resources, each printing one line that names no device-specific
 * value (no QPN, key or address), so the lines of two devices can be compared as text.
 *
 * A case builds what it needs with the helpers below, does one thing and reports fields with
 * out(). Every wait is bounded (conf_opts.wait_ms for what must come, quiet_ms for what may
 * come); a completion that never comes is reported as "timeout", never waited for forever.
 */
#ifndef SOFTRDMA_CONFORMANCE_H
#define SOFTRDMA_CONFORMANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

struct conf_opts {
	const char *dev;	/* device name, -d */
	int gid_index;		/* -g */
	int wait_ms;		/* -w: longest wait for something that must happen */
	int quiet_ms;		/* -q: how long "may still happen" is watched for */
};
extern struct conf_opts conf_opts;

struct conf_case {
	const char *name;
	void (*run)(const struct conf_case *c);
	int a, b;		/* the case's parameters, as its run function reads them */
};

/* Each cases_*.c file's table, ended by an entry with a NULL name. */
extern const struct conf_case conf_cases_mr[], conf_cases_access[], conf_cases_local[],
	conf_cases_rc[], conf_cases_qp[], conf_cases_ud[], conf_cases_mw[],
	conf_cases_uc_srq[], conf_cases_lifecycle[], conf_cases_limits[], conf_cases_mcast[],
	conf_cases_xrc[];

#define ACCESS_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
		    IBV_ACCESS_REMOTE_ATOMIC)
#define BUF_SIZE	4096	/* every buffer registered by the fixture */
#define IMM_VALUE	0x12345678u

/* Report: out() appends " key=value" to the case's line; out_end() prints it and exits. */
void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void out_ret(const char *key, int err);	/* 0 -> "ok", else the errno's name */
void out_wc(const char *key, int got, const struct ibv_wc *wc);
void out_state(const char *key, struct ibv_qp *qp);
_Noreturn void out_end(void);
/* A resource the case needs could not be made: reported as such, the case ends. */
_Noreturn void setup_failed(const char *what, int err);

const char *errno_name(int err);
const char *wc_status_name(enum ibv_wc_status s);
const char *qp_state_name(int s);

struct conf_end {
	struct ibv_qp *qp;
	struct ibv_cq *scq, *rcq;
};

struct conf_env {
	struct ibv_context *ctx;
	struct ibv_pd *pd, *pd2;
	union ibv_gid gid;
	struct conf_end a, b;	/* a requests, b responds */
};

/* How one QP is made and connected. */
struct qp_params {
	enum ibv_qp_type type;
	int access;
	uint8_t rnr_retry, min_rnr_timer, timeout, retry_cnt;
	int cqe;
	uint32_t max_send_wr, max_recv_wr;
	struct ibv_pd *pd;	/* NULL: env->pd */
	struct ibv_srq *srq;	/* the QP's receives come from it */
	struct ibv_comp_channel *channel;	/* both CQs report to it */
};

/* Opens conf_opts.dev with two PDs and reads the chosen GID; setup_failed() otherwise. */
void env_open(struct conf_env *e);
void qp_params_default(struct qp_params *p, enum ibv_qp_type type);
/* The end's CQs and QP, in RESET. */
void end_create(struct conf_env *e, const struct qp_params *p, struct conf_end *end);
/* The kernel's required mask of each transition, plus extra, minus missing; returns the
 * modify's result. For UD, dest_qpn is ignored. */
int qp_to_init(struct ibv_qp *qp, const struct qp_params *p, int extra, int missing);
int qp_to_rtr(struct conf_env *e, struct ibv_qp *qp, const struct qp_params *p,
	      uint32_t dest_qpn, int extra, int missing);
int qp_to_rts(struct ibv_qp *qp, const struct qp_params *p, int extra, int missing);
/* Both ends created and connected to each other (RTS); NULL params: the defaults. */
void env_pair(struct conf_env *e, const struct qp_params *pa, const struct qp_params *pb);

enum ibv_qp_state qp_state(struct ibv_qp *qp);
/* Waits until the QP is (want) or is no longer (!want) in state s, at most ms. */
void wait_state(struct ibv_qp *qp, enum ibv_qp_state s, bool want, int ms);
/* 1 and *wc if a completion comes within ms, 0 if none, -1 if polling failed. */
int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, int ms);
void sleep_ms(int ms);

/* Page-aligned zeroed memory, never freed (the case's process exits). */
void *buf_alloc(size_t len);
struct ibv_mr *mr_reg(struct ibv_pd *pd, void *addr, size_t len, int access);

int post_recv(struct ibv_qp *qp, void *addr, uint32_t len, uint32_t lkey);
/* One signaled send WR: the SGE (none if addr is NULL), the remote target, and for atomics
 * compare/add and swap. Immediate data is IMM_VALUE for the WITH_IMM opcodes. */
int post_send(struct ibv_qp *qp, enum ibv_wr_opcode op, void *addr, uint32_t len, uint32_t lkey,
	      uint64_t raddr, uint32_t rkey, uint64_t cmp, uint64_t swap);

/*
 * The RC fixture: a connected pair and three registered buffers. lbuf is a's (source of
 * writes, target of reads and atomic results), filled with LFILL; rbuf is b's target of
 * remote access, filled with RFILL, registered for BUF_SIZE bytes of the 2 * BUF_SIZE
 * allocated (so a write past the region would be seen); recvbuf is b's receive buffer.
 */
#define LFILL 0x11
#define RFILL 0x22
struct rc_fix {
	struct conf_env e;
	uint8_t *lbuf, *rbuf, *recvbuf;
	struct ibv_mr *lmr, *rmr, *recvmr;
};
/* rbuf registered with raccess in env.pd or (other_pd) env.pd2. */
void fix_setup(struct rc_fix *f, const struct qp_params *pa, const struct qp_params *pb,
	       int raccess, bool other_pd);
/*
 * After a post on a (post_err its result): the requester's completion (waited for),
 * the responder's receive completion (waited for if recv_expected, or if b went to ERR
 * and recv_posted: it is flushed), then both QP states, settled: an error at the requester
 * gives both QPs quiet_ms to leave RTS.
 */
void fix_report(struct rc_fix *f, int post_err, bool recv_posted, bool recv_expected);
/* "placed" if bytes [off, off + len) of buf are all `want` and the rest of the n bytes
 * are `fill`; "untouched" if all n are `fill`; else "changed". */
const char *data_verdict(const uint8_t *buf, size_t n, size_t off, size_t len, uint8_t want,
			 uint8_t fill);

#endif
