/* SPDX-License-Identifier: MIT */
/*
 * A QP's TCP stream. emu/conn.c opens, sends on and closes streams; emu/conn_rx.c reads
 * them; emu/qp_stream.c owns which stream is bound to which QP; emu/handshake.c runs the
 * short exchanges before a stream is trusted (docs/wire-protocol.md, docs/security.md).
 *
 * A connected QP opens one stream to its peer's listener (its requests, their responses)
 * and is bound to at most one that its peer opened (their requests, its responses).
 * Included by emu/internal.h.
 */
#ifndef SOFTRDMA_EMU_CONN_H
#define SOFTRDMA_EMU_CONN_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "emu/io.h"
#include "emu/limits.h"
#include "emu/mr.h"
#include "emu/wire.h"

struct emu_engine;
struct emu_qp;
struct handshake;
struct direct_served;
struct direct_target;

/* Where an incoming payload goes; re-validated for every chunk placed (emu/sink.c). */
enum sink_kind { SINK_DISCARD, SINK_REMOTE, SINK_LOCAL };

struct rx_sink {
	enum sink_kind kind;
	struct mem_table *mem;	/* where the keys are looked up (not SINK_DISCARD) */
	uint32_t pd_handle;
	int qp_access;		/* SINK_REMOTE: the QP's rights */
	uint32_t qpn;		/* SINK_REMOTE: the QP (a type 2 window is bound to one) */
	int needed;		/* access right each chunk needs */
	uint32_t rkey;		/* SINK_REMOTE */
	uint64_t va;		/* SINK_REMOTE */
	const struct ibv_sge *sge;	/* SINK_LOCAL */
	int num_sge;
	uint64_t offset;	/* bytes placed so far */
	enum mem_access_result failure;	/* first refusal; the rest is discarded */
};

struct engine_call {
	struct engine_call *next;
	void (*fn)(void *arg);
	void *arg;
	bool done;
};

enum conn_state {
	CONN_CONNECTING,	/* ours: connect() under way, the hello queued behind it */
	CONN_CANDIDATE,		/* theirs: its hello read, not bound to the QP (yet) */
	CONN_OPEN,		/* ours connected, or theirs bound to its QP */
	CONN_CLOSED,		/* on the engine's list of streams to free */
};

/* The reader's states, one frame after the other (siw's enum siw_rx_state is the model). */
enum rx_state {
	RX_GET_HDR,		/* the length word and the headers, into the staging buffer */
	RX_GET_DESC,		/* a by-reference frame's descriptor (the same-host path) */
	RX_GET_DATA,		/* the payload, into the sink */
};

/* Why a stream is not read now: any bit stops the reader until it is cleared. */
enum rx_hold {
	RX_HOLD_UNBOUND = 1 << 0,	/* a candidate: its QP does not take its requests yet */
	RX_HOLD_TX_FULL = 1 << 1,	/* what we owe the peer passed TX_HIGH: it does not read */
	RX_HOLD_READS = 1 << 2,		/* max_dest_rd_atomic READ responses are waiting to go */
	RX_HOLD_SAME_HOST = 1 << 3,	/* asking about the same-host path: PEER_MEMORY, if it
					 * comes, is the first frame the requester gets */
};

/* The reader's state: engine thread only. */
struct conn_rx {
	enum rx_state state;
	unsigned int hold;		/* enum rx_hold bits */
	uint8_t *stage;			/* bytes read ahead of the frame being parsed */
	size_t stage_len, stage_off;
	bool expect_large;		/* the last payload went straight into its target */
	uint64_t payload_left;
	unsigned int hdr_len;		/* the current frame's headers (ACKETH included) */
	struct wire_packet pkt;
	struct rx_sink sink;
	struct iovec pull[EMU_MAX_SGE];	/* a by-reference payload, in the requester's memory */
	int npull;
};

/*
 * Where one piece of an outgoing frame is. A piece that must wait for the socket is copied
 * if it is TX_COPY (headers, descriptors, inline data: small), and otherwise named again by
 * its key when it is finally sent, so a payload waiting to go costs no memory and a region
 * deregistered meanwhile is never read.
 */
enum tx_source {
	TX_COPY,		/* bytes of ours */
	TX_LOCAL_MR,		/* a request's payload: lkey, pd_handle, addr */
	TX_REMOTE_MR,		/* a READ response's payload: rkey, pd_handle, qpn, qp_access, addr */
};

struct tx_piece {
	enum tx_source source;
	uint32_t key;
	uint32_t pd_handle;
	uint32_t qpn;
	int qp_access;
	uint64_t addr;		/* where the piece starts, in the key's address space */
};

/* A piece waiting in a stream's send queue. */
struct tx_item {
	struct tx_item *next;
	struct tx_piece piece;
	uint64_t len, off;	/* bytes in the piece, bytes sent */
	bool ends_read;		/* the last piece of a READ response */
	uint8_t data[];		/* TX_COPY */
};

/*
 * Bounds on what a stream may owe its peer (docs/semantics.md, "Bounded memory"): the
 * reader stops taking the peer's requests, and the requester stops building frames, while
 * the queue's cost (copied bytes plus TX_ITEM_COST per piece) is above TX_HIGH; both go on
 * below TX_LOW.
 */
#define TX_HIGH		(256u * 1024)
#define TX_LOW		(64u * 1024)
#define TX_ITEM_COST	64u

/* The send side: any thread, under tx_lock. */
struct conn_tx {
	struct tx_item *head, *tail;
	size_t cost;
	unsigned int reads_queued;	/* READ responses not wholly sent */
	bool want_out;			/* the engine watches for POLLOUT */
	bool error;			/* a send failed: the stream is broken */
	bool owner_waits;		/* the requester stopped at TX_HIGH: resume it below TX_LOW */
	struct engine_call out_call;	/* asks the engine to watch for POLLOUT */
};

/* The same-host path, responder side: the requester's process, as the kernel named it. */
struct peer_mem {
	pid_t pid;		/* 0: not granted */
	int pidfd;		/* readable once that process has exited: its pid may be reused */
	uint64_t start_time;	/* without a pidfd (valgrind, old kernels): /proc's start time */
};

struct conn {
	struct emu_engine *engine;
	struct io_watch watch;
	enum conn_state state;
	bool initiator;		/* we connected: our requests, their responses */
	struct emu_qp *qp;	/* ours; theirs once its hello named a QP */
	struct sockaddr_in6 peer;	/* the other end, as the kernel says */
	struct sockaddr_in6 local;	/* this end */
	struct conn_rx rx;

	pthread_mutex_t tx_lock;	/* tx, and state CONN_CLOSED (see conn_send_batch_unlock) */
	struct conn_tx tx;

	/* Theirs only: the hello, its verification, the list of its QP's candidates. */
	uint32_t hello_src_qpn;
	bool verified;			/* the engine of hello_src_qpn said the stream is its */
	struct handshake *check;	/* the verification or same-host question under way */
	char same_host_name[WIRE_LOCAL_NAME_LEN];	/* verified with SAME_HOST: ask there */
	struct conn *next_candidate;
	struct peer_mem peer_mem;
	struct direct_served *direct_served;	/* its requester may place WRITEs (direct.c) */

	/* Ours only: the same-host path, requester side (peer_mem.c). */
	bool peer_may_read;	/* a same-user process of this host proved it is our responder */
	bool peer_reads;	/* it said PEER_MEMORY: payloads may go by reference */
	struct direct_target *direct;	/* its target's keys: WRITEs placed here (direct.c) */

	bool kicked;		/* on the engine's list of streams with staged frames */
	struct conn *next_kicked;
	struct conn *next_closed;	/* freed by the engine once no backend call can see it */
};

/*
 * Frames built under a QP's lock and sent with one sendmsg: the requester gathers every WR
 * a post (or a completion) lets go, and the poster sends them after dropping the QP's lock.
 */
#define TX_BATCH_FRAMES	16
#define PEER_MEM_DESC_LEN	16	/* per segment: address, length (big-endian u64) */
#define TX_BATCH_IOVS	(TX_BATCH_FRAMES * (1 + 4))	/* most WRs have few SGEs */

struct tx_batch {
	int nframes, niov, nrefs;
	struct iovec iov[TX_BATCH_IOVS];
	struct tx_piece piece[TX_BATCH_IOVS];	/* where each iov is, should it have to wait */
	bool ends_read[TX_BATCH_IOVS];		/* the last iov of a READ response */
	struct mem_region *refs[TX_BATCH_IOVS];	/* held until sent */
	uint8_t hdr[TX_BATCH_FRAMES][4 + WIRE_MAX_HDR];
	uint8_t desc[TX_BATCH_FRAMES][EMU_MAX_SGE * PEER_MEM_DESC_LEN];	/* by reference */
};

/* conn.c */
/* Our stream to qp's peer, its hello queued; NULL when no socket could be had. */
struct conn *conn_connect(struct emu_qp *qp);	/* engine thread, qp->lock held */
/* Their stream, whose hello named qp: a candidate until qp_stream.c binds it. */
struct conn *conn_adopt(struct emu_engine *e, int fd, const struct sockaddr_in6 *peer,
			const struct sockaddr_in6 *local, struct emu_qp *qp, uint32_t src_qpn);
void conn_close(struct conn *c);	/* engine thread, c->qp->lock held if c->qp */
/* The stream broke: its QP is told (a requester resends, then fails), and it closes. */
void conn_broken(struct conn *c);	/* engine thread, no lock held */
/* The peer broke the protocol: the QP goes to ERR and the stream closes. */
void conn_protocol_error(struct conn *c);	/* engine thread, no lock held */

/*
 * Sends a batch: what the socket takes now, the rest queued (after anything already
 * queued, so frames stay in order). conn_send_batch takes c->tx_lock itself; a poster
 * holding qp->lock may instead conn_tx_lock(c), drop qp->lock (the stream cannot close
 * under tx_lock: closing needs both), then conn_send_batch_unlock(c, b). Either way the
 * batch's references are put afterwards with tx_batch_release().
 */
void conn_tx_lock(struct conn *c);
int conn_send_batch_unlock(struct conn *c, struct tx_batch *b);
int conn_send_batch(struct conn *c, struct tx_batch *b);
/* One frame of headers only (ACK, NAK, atomic ACK, PEER_MEMORY). */
int conn_send_frame(struct conn *c, const uint8_t *hdr, size_t hdr_len);
void tx_batch_init(struct tx_batch *b);	/* empty (cheaper than zeroing it) */
void tx_batch_release(struct tx_batch *b);	/* puts the references; empty again */
/* Adds len bytes at p to the current frame of b: copied if they must wait. */
void tx_batch_add_copy(struct tx_batch *b, const void *p, size_t len);
/* Adds registered memory (checked, ref held until sent) to the current frame of b. */
void tx_batch_add_mem(struct tx_batch *b, void *host, size_t len, const struct tx_piece *where,
		      struct mem_region *ref);
/* Whether the requester may add frames: false above TX_HIGH, and then it is told below TX_LOW. */
bool conn_tx_room(struct conn *c);
/* Nothing of ours is queued, nor in the socket unsent (SIOCOUTQNSD; bytes the peer has but
 * has not acknowledged at the TCP level count as arrived): all we sent is with the peer. */
bool conn_tx_drained(struct conn *c);
/* Keepalive from the QP's timeout and retry_cnt; again when modify_qp changes them. */
void conn_set_liveness(struct conn *c);	/* c->qp->lock held */
/* The peer's host has not answered TCP for ms, with retransmissions or probes waiting. */
bool conn_peer_silent(struct conn *c, uint64_t ms);
/* Tells the requester on c that a frame of its exchange was dropped (OP_DROP_NOTICE). */
int conn_send_drop_notice(struct conn *c);
/* Engine thread: sets or clears a hold on the reader; clearing one may resume it. */
void conn_hold(struct conn *c, unsigned int hold, bool on);
/* Engine thread, responder streams: holds the reader while the peer owes reading. */
void conn_check_backlog(struct conn *c);
void conn_free(struct conn *c);	/* engine thread, after conn_close() and the next wait */

/* conn_rx.c: engine thread */
void conn_read(struct conn *c);
/* Goes on with frames already read into the staging buffer (no lock held). */
void conn_process_staged(struct conn *c);
size_t conn_staged(const struct conn *c);

#endif
