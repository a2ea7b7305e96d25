/* SPDX-License-Identifier: MIT */
/*
 * What the libFuzzer harnesses share: the process's real engine (emu/, linked directly, no
 * libibverbs), one RC, one UD and one XRC target QP (with an XRC SRQ of its domain and one
 * of another domain), and registered memory laid out between PROT_NONE
 * guard pages with every byte outside the registrations a known canary, checked after
 * each input: a write anywhere it should not land aborts the run.
 *
 * Inputs name things that change from run to run by placeholders, replaced before use:
 *   ff ff fe        (3 bytes)  the QPN of the QP the harness feeds (BTH, hello)
 *   ff ff fd        (3 bytes)  the XRC target's QPN: a hello naming it feeds the target
 *   fe ed 00 0N     (4 bytes)  the key of region N (1: all rights, 2: remote read only,
 *                              3: all rights in another PD, 4: local write only)
 *   fe ed 01 0N     (4 bytes)  XRC SRQ N's number (1: the target's domain, PD 1; 2: another
 *                              domain's)
 * Regions 1-3 are registered at fixed iovas FUZZ_IOVA(N) (the page offset of their address).
 */
#ifndef SOFTRDMA_FUZZ_ENV_H
#define SOFTRDMA_FUZZ_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "emu/internal.h"

#define FUZZ_PEER_QPN	0x000101u	/* the RC QP's peer: what a hello must come from */
#define FUZZ_QKEY	0x11111111u
#define FUZZ_REGIONS	4
#define FUZZ_IOVA(n)	(0x100000000ull * (n))
#define FUZZ_XRC_SRQS	2

struct fuzz_env {
	struct emu_engine *engine;
	struct emu_qp *rc, *ud, *xrc_tgt;
	struct emu_srq *xrc_srq[FUZZ_XRC_SRQS + 1];	/* 1-based */
	struct emu_cq *cq;
	int async_pipe[2];
	struct mem_region *mr[FUZZ_REGIONS + 1];	/* 1-based */
	uint8_t *map;					/* guard, page A, guard, page B, guard */
	size_t page;
	struct sockaddr_in6 peer;			/* ::ffff:127.0.0.1 */
};

/* The environment, made on first use. */
struct fuzz_env *fuzz_env(void);
/* A copy of the input with its placeholders replaced; free() it. */
uint8_t *fuzz_patch(struct fuzz_env *env, const struct emu_qp *qp, const uint8_t *data,
		    size_t size);
/* Takes the RC QP (or the UD QP) back to RESET and up to RTR (UD: RTS), posts receives. */
void fuzz_ready_rc(struct fuzz_env *env);
void fuzz_ready_ud(struct fuzz_env *env);
/* The XRC target back to RESET and up to RTR, its SRQs given receives. */
void fuzz_ready_xrc(struct fuzz_env *env);
/* The RC QP up to RTS (a requester; its stream to the peer fails: port 1). */
void fuzz_ready_requester(struct fuzz_env *env);
/* Drains completions and async events; aborts if a byte outside the regions changed. */
void fuzz_after(struct fuzz_env *env);
/*
 * One input as a stream from the peer of env->rc: the patched bytes go into a socketpair
 * whose far end is then closed, and on_engine(env, fd) reads the near end on the engine
 * thread, in one engine_call_sync(), so the input is done when this returns (fuzz_after
 * included).
 */
void fuzz_feed_stream(struct fuzz_env *env, const uint8_t *data, size_t size,
		      void (*on_engine)(struct fuzz_env *env, int fd));

#endif
