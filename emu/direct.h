/* SPDX-License-Identifier: MIT */
/*
 * Direct placement: RDMA WRITEs that a same-host requester places in its target's memory
 * itself, with process_vm_writev(2), and RDMA READs it reads from there with
 * process_vm_readv(2) (one call for a run of them posted together under one key), after
 * the checks the target's responder would make.
 * No frame crosses the stream and no thread of the target runs: a NIC's responder places a
 * WRITE and answers a READ without its host's CPU, and so does this one
 * (docs/architecture.md, "Direct placement"; docs/security.md says why it widens no peer's
 * reach).
 *
 * The target publishes, in two memfds it hands to the requester over the kernel-verified
 * AF_UNIX channel (emu/handshake.c, LOCAL_CLAIM):
 *  - its key table (read-only to the requester): each registered region's key, range,
 *    rights and PD under a sequence count (a seqlock, one writer: mr.c under its lock);
 *  - one page per stream: the QP's state, rights and PD as its responder sees them (a
 *    seqlock, written under the QP's lock), whether the stream closed, and the requester's
 *    placement under way.
 * Deregistration waits for a placement it could race: the requester announces the key and
 * sequence it is placing under, then checks the key again; the target retracts the key,
 * then looks for announcements of it. Both sides' writes and reads there are sequentially
 * consistent, so at least one of them sees the other's (Dekker); no fence (ThreadSanitizer
 * has none).
 */
#ifndef SOFTRDMA_EMU_DIRECT_H
#define SOFTRDMA_EMU_DIRECT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

struct conn;
struct emu_qp;
struct mem_region;
struct send_wqe;

#define DIRECT_KEYS_MAGIC	0x53524b31u	/* "SRK1" */
#define DIRECT_PAGE_SIZE	4096u

/* The key table's head; the slots follow it at DIRECT_KEYS_HEAD. */
struct direct_keys_head {
	uint32_t magic;
	uint32_t nslots;
	uint32_t tag_bits;	/* a key is (slot ^ secret) << tag_bits | tag (emu/mr.c) */
	uint32_t secret;
};

#define DIRECT_KEYS_HEAD	64u

/* One slot, as published. Fields hold while seq is even and unchanged around the read. */
struct direct_key {
	_Atomic uint32_t seq;
	_Atomic uint32_t key;		/* 0: nothing placeable here */
	_Atomic uint32_t pd_handle;
	_Atomic int32_t access;
	_Atomic uint64_t iova;
	_Atomic uint64_t length;
	_Atomic uint64_t host_addr;	/* where iova lies in the target */
};

/* A stream's page; the target writes the first half, the requester the second. */
struct direct_page {
	_Atomic uint32_t qp_seq;	/* seqlock over the three below */
	_Atomic uint32_t qp_open;	/* RC, and in a state that takes requests */
	_Atomic uint32_t qp_pd;
	_Atomic int32_t qp_access;
	_Atomic uint32_t closed;	/* the target closed the stream: place nothing more */
	uint32_t pad0;
	_Atomic uint64_t probe_addr;	/* WIRE_PROBE in the target (can the requester write?) */
	uint8_t pad1[64 - 32];
	_Atomic uint64_t placing;	/* (slot + 1) << 32 | the key's seq; 0: nothing under way */
	/* Requests done here (WRITEs placed, READs read): the target counts them received, */
	_Atomic uint64_t placed;
	_Atomic uint64_t placed_words;	/* with their 4-octet words (emu/counters.h), */
	_Atomic uint64_t answered;	/* and the responses of the READs among them as sent */
	_Atomic uint64_t answered_words;
};

struct direct_keys;	/* target: the published key table and the streams it serves */
struct direct_target;	/* requester: one stream's target, mapped */

/* Neither SOFTRDMA_SAME_HOST nor SOFTRDMA_DIRECT_WRITE is 0. */
bool direct_enabled(void);
/* mr.c: the key table of a mem_table with nslots slots, or NULL (the path is off). */
struct direct_keys *direct_keys_create(uint32_t nslots, uint32_t tag_bits, uint32_t secret);
void direct_keys_destroy(struct direct_keys *d);
/* mr.c, under the table's lock: a region registered (or re-registered) in slot. */
void direct_key_publish(struct direct_keys *d, uint32_t slot, const struct mem_region *mr);
/* mr.c, under the table's lock: slot's key is gone; returns once no placement can use it. */
void direct_key_retract(struct direct_keys *d, uint32_t slot);

/*
 * Target, engine thread, c's QP locked: a page for responder stream c, whose requester is
 * process pid; fds[0] (the key table) and fds[1] (the page) are to be sent to it. 0, or an
 * errno (the stream stays without direct placement).
 */
int direct_offer(struct direct_keys *d, struct conn *c, pid_t pid, int fds[2]);
/* Target, qp->lock held: the QP's state, rights or PD may have changed. */
void direct_qp_changed(struct emu_qp *qp);
/* Target, engine thread: responder stream c closes; its page is retired. */
void direct_page_close(struct conn *c);
/* Target: adds what requesters placed since the last call to the process's counters. */
void direct_fold_counters(struct direct_keys *d);

/*
 * Requester, engine thread, with c's QP locked: c's responder is process pid (the kernel
 * said so) and sent fds (taken: closed here). Maps them and checks that pid's memory can be
 * written; on any failure c simply stays without direct placement.
 */
void direct_attach(struct conn *c, pid_t pid, const int fds[2]);
void direct_detach(struct conn *c);	/* c closes; qp->lock held */
/*
 * A run for one placement: consecutive WQEs of one send queue, all RDMA WRITEs or all RDMA
 * READs, the first on the wire, each with its local buffers already gathered (local keys
 * checked: a READ's for LOCAL_WRITE): wqe[i]'s pieces are iov[iov_end[i - 1]] up to
 * iov[iov_end[i]] (from iov[0] for the first). A WRITE's are its payload, a READ's where
 * the data goes.
 */
#define DIRECT_RUN_MAX		64	/* WQEs: what one post, or one posting list, places */
#define DIRECT_RUN_IOVS		128	/* their pieces, and the target ranges written */

struct direct_run {
	unsigned int n;
	struct send_wqe *wqe[DIRECT_RUN_MAX];
	unsigned int iov_end[DIRECT_RUN_MAX];
	unsigned int niov;
	struct iovec iov[DIRECT_RUN_IOVS];
};

/*
 * Requester, qp->lock held: does the longest prefix of run that every check passes under
 * one key with one process_vm_writev (WRITEs) or process_vm_readv (READs); returns how many
 * WQEs, from the first, were done whole (0: send them all as frames).
 */
unsigned int direct_place_run(struct emu_qp *qp, const struct direct_run *run);

#endif
