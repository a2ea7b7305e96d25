/* SPDX-License-Identifier: MIT */
/*
 * The engine's own structures, shared by its files: engine.c (thread, listeners, QP table,
 * calls into the engine thread), conn.c (one TCP stream: hello, frame reader, sender),
 * qp.c (state, queues, errors and flushes), srq.c (receive queues, shared or a QP's own),
 * requester.c, responder.c and completer.c (the IBTA's division of RC, which UC shares).
 *
 * Locking order: engine->lock, then qp->lock, then one of conn->tx_lock, an SRQ's lock or the
 * key table's lock (emu/mr.c), then a CQ's lock.
 */
#ifndef SOFTRDMA_EMU_INTERNAL_H
#define SOFTRDMA_EMU_INTERNAL_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "emu/cq.h"
#include "emu/io.h"
#include "emu/limits.h"
#include "emu/mr.h"
#include "emu/qp.h"
#include "emu/wire.h"

/* The structure that holds MEMBER at PTR (io watches live inside their owners). */
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

#define QPS_PER_LISTENER 256	/* QPN = listening port << 8 | index */

struct emu_engine;
struct emu_srq;
struct conn;

/* Where an incoming payload goes; re-validated for every chunk placed (emu/mr.h). */
enum sink_kind { SINK_DISCARD, SINK_REMOTE, SINK_LOCAL };

struct rx_sink {
	enum sink_kind kind;
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

enum conn_state { CONN_CONNECTING, CONN_HELLO, CONN_OPEN, CONN_CLOSED };

struct tx_chunk {
	struct tx_chunk *next;
	size_t len, off;
	uint8_t data[];
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
	struct mem_region *refs[TX_BATCH_IOVS];	/* held until sent */
	uint8_t hdr[TX_BATCH_FRAMES][4 + WIRE_MAX_HDR];
	uint8_t desc[TX_BATCH_FRAMES][EMU_MAX_SGE * PEER_MEM_DESC_LEN];	/* by reference */
};

/* A requester whose memory a responder reads (the same-host path, peer_mem.c). */
struct peer_mem {
	pid_t pid;
	uint64_t cookie_addr;
	uint8_t cookie[16];
};

struct conn {
	struct emu_engine *engine;
	struct io_watch watch;
	enum conn_state state;
	bool initiator;		/* we connected: our requests, their responses */
	bool paused;		/* responder QP not ready for requests yet */
	struct emu_qp *qp;
	struct sockaddr_in6 peer;

	/* receive side: engine thread only */
	uint8_t *stage;		/* bytes read ahead of the frame being parsed */
	size_t stage_len, stage_off;
	bool in_payload;
	bool expect_large;	/* the last frame's payload went straight into its target */
	uint64_t payload_left;
	struct wire_packet pkt;
	struct rx_sink sink;

	/* send side: any thread, under tx_lock */
	pthread_mutex_t tx_lock;
	struct tx_chunk *txq, *txq_tail;
	bool want_out;
	bool tx_error;
	bool kicked;			/* on the engine's list of streams with staged frames */
	struct conn *next_kicked;
	struct engine_call out_call;	/* asks the engine to watch for POLLOUT */
	/* The same-host path (peer_mem.c): a responder's stream knows the requester's pid
	 * once verified; a requester's, whether it offered the path and whether the
	 * responder took it (PEER_MEMORY). */
	struct peer_mem peer_mem;	/* pid 0: not verified */
	bool peer_mem_offered;
	bool peer_reads;
	struct iovec pull[EMU_MAX_SGE];	/* a by-reference request's payload, over there */
	int npull;
	uint32_t hello_src_qpn;
	struct conn *next_closed;	/* freed by the engine once no backend call can see it */
};

struct send_wqe {
	struct ibv_send_wr wr;	/* copy; wr.sg_list points at sge below */
	struct ibv_sge *sge;
	uint8_t *inline_buf;	/* max_inline_data bytes */
	uint64_t length;
	uint32_t psn;
	bool sent;
	bool done;		/* acknowledged, answered, or failed: completes in order */
	enum ibv_wc_status status;
	bool signaled;
	/* BIND_MW: what to bind, taken at post (the application may free its ibv_mr after) */
	struct mem_region *bind_window;
	struct mw_bind_req bind;
};

/* The PSN of a WQE that sends nothing (a local operation). */
#define WQE_NO_PSN	UINT32_MAX

struct recv_wqe {
	uint64_t wr_id;
	int num_sge;
	struct ibv_sge *sge;
	uint32_t pd_handle;	/* a taken WQE: the PD its buffers belong to (QP's or SRQ's) */
};

/* A receive queue, a QP's own or an SRQ's: indices grow forever, slot = index % depth. */
struct recv_queue {
	struct recv_wqe *slots;
	struct ibv_sge *sges;	/* max_sge per slot */
	uint32_t depth;
	uint32_t max_sge;
	uint32_t head, tail;	/* posted, taken */
};

enum recv_take { RECV_TAKEN, RECV_NONE, RECV_TOO_SHORT };

struct emu_qp {
	struct emu_engine *engine;
	pthread_mutex_t lock;
	uint32_t qpn;
	enum ibv_qp_type type;
	enum ibv_qp_state state;
	uint64_t handle;	/* the ibv_qp pointer, as async events carry it */
	int async_fd;
	_Atomic uint32_t *events_raised;	/* the provider's count of them, or NULL */
	uint32_t pd_handle;
	struct emu_cq *send_cq, *recv_cq;
	bool sq_sig_all;
	struct ibv_qp_cap cap;
	struct ibv_qp_attr attr;	/* as last modified (what query_qp reports) */
	int attr_mask_seen;

	/* send queue: indices grow forever, slot = index % cap.max_send_wr */
	struct send_wqe *sq;
	uint32_t sq_head, sq_next, sq_tail;	/* posted, transmitted, completed */
	uint32_t next_psn;
	uint32_t rd_atomic_out;		/* READ/atomic requests awaiting responses */
	uint32_t retries_left, rnr_retries_left;
	/* CLOCK_MONOTONIC deadline, 0: none. Atomic: the engine glances at it without the lock. */
	_Atomic uint64_t timer_ns;
	enum { TIMER_NONE, TIMER_ACK, TIMER_RNR, TIMER_CONNECT } timer_kind;

	/* receive queue: its own, or the SRQ it was created with */
	struct recv_queue rq;
	struct emu_srq *srq;

	/* responder */
	uint32_t epsn;			/* next request PSN expected */
	uint32_t msn;
	bool rnr_dropping;		/* after an RNR NAK: drop until epsn comes again */
	int verdict;			/* responder.c: what the current request came to */
	bool ack_pending;		/* an ACK for ack_psn is owed, sent at the end of the read */
	uint32_t ack_psn;
	uint8_t nak_code;
	enum mem_access_result refusal;
	enum ibv_wc_status recv_status;	/* a receive's own error, when it has one */
	struct recv_wqe cur_recv;	/* the receive WQE the current SEND fills */
	struct ibv_sge cur_recv_sge[EMU_MAX_SGE];	/* cur_recv's own copy of its SGEs */
	bool have_cur_recv;
	/* The last atomics executed, oldest overwritten first: any the requester may still
	 * resend (at most max_dest_rd_atomic outstanding) is answered from here, not redone. */
	struct {
		uint32_t psn;
		uint64_t orig;
	} atomic_done[EMU_MAX_QP_RD_ATOM];
	uint32_t atomics_done;		/* since RESET; the next goes to % EMU_MAX_QP_RD_ATOM */

	bool connect_pending;
	struct engine_call connect_call;
	int udp_fd;		/* UD: its listener's datagram socket */
	struct conn *req_conn;	/* stream we opened */
	struct conn *resp_conn;	/* stream the peer opened */
	struct sockaddr_in6 peer_addr;	/* from the AV's dgid; port from dest_qp_num */
	struct sockaddr_in6 local_addr;	/* from the AV's sgid_index */
	bool destroyed;
	struct fault_qp *faults;	/* SOFTRDMA_FAULTS (emu/fault.h); NULL: none */
};

struct emu_listener {
	int fd;
	uint16_t port;
	struct io_watch watch;
	int udp_fd;			/* UD QPs: the same port number, UDP */
	struct io_watch udp_watch;
	uint32_t udp_overflows;	/* the socket's drop count (SO_RXQ_OVFL) last seen */
	struct emu_qp *qps[QPS_PER_LISTENER];
	int used;
};


struct emu_engine {
	pthread_mutex_t lock;		/* QP table, listeners, call queue */
	pthread_cond_t call_done;
	pthread_t thread;
	int refs;
	struct io_backend *io;
	int wake_fd;
	struct io_watch wake_watch;
	struct engine_call *calls, *calls_tail;
	bool stopping;
	struct emu_listener **listeners;
	int nlisteners;
	struct mem_table *mem;
	atomic_int srqs;		/* SRQs in existence, at most EMU_MAX_SRQ */
	struct conn *closed;		/* waiting to be freed after the current wait() */
	struct conn *kicked;		/* staged frames to process before waiting again */
	_Atomic uint64_t next_timer_ns;
};

/* engine.c */
uint64_t engine_now_ns(void);
/* Runs fn(arg) on the engine thread (inline when called there) and waits for it. */
void engine_call_sync(struct emu_engine *e, void (*fn)(void *), void *arg);
/* Runs fn(arg) on the engine thread later; arg must stay valid until then. */
void engine_call_async(struct emu_engine *e, struct engine_call *call);
bool engine_on_thread(struct emu_engine *e);
struct emu_qp *engine_find_qp(struct emu_engine *e, uint32_t qpn);
void engine_timer_changed(struct emu_engine *e, uint64_t deadline_ns);
void engine_watch(struct emu_engine *e, struct io_watch *w);
void engine_unwatch(struct emu_engine *e, struct io_watch *w);
void engine_rewatch(struct emu_engine *e, struct io_watch *w);
/* Engine thread: process c's staged frames after this round of I/O (not nested in a lock). */
void engine_kick(struct emu_engine *e, struct conn *c);
void engine_unkick(struct emu_engine *e, struct conn *c);	/* c is going away */
int engine_register_qp(struct emu_engine *e, struct emu_qp *qp);
void engine_unregister_qp(struct emu_engine *e, struct emu_qp *qp);

/* peer_mem.c: the same-host path */
#define PEER_MEM_MIN		16384	/* smaller payloads are as cheap to send over TCP */
/* Fills the hello's same-host fields; false when the path is off (nothing offered). */
bool peer_mem_offer(struct wire_hello *h);
/* Whether the requester's memory can be read (its cookie checks out); fills pm. */
bool peer_mem_accept(const struct wire_hello *h, struct peer_mem *pm);
/* After a read: the process is still the peer (its pid was not reused meanwhile). */
bool peer_mem_still_there(const struct peer_mem *pm);
/* Writes the descriptor of iov into desc (PEER_MEM_DESC_LEN each); returns its length. */
unsigned int peer_mem_describe(uint8_t *desc, const struct iovec *iov, int niov);
/* 0, or EPROTO for a descriptor a sane peer would not send. */
int peer_mem_parse(const uint8_t *desc, uint64_t len, struct iovec *remote, int *nremote,
		   uint64_t *total);

/* conn.c */
struct conn *conn_connect(struct emu_qp *qp);	/* engine thread */
/* The stream, or NULL (fd closed); the fuzz harnesses read it at once (tests/fuzz). */
struct conn *conn_accept(struct emu_engine *e, int fd, const struct sockaddr_in6 *peer);
/* Sends one frame: header bytes then payload iovecs; queues what the socket won't take. */
int conn_send_frame(struct conn *c, const uint8_t *hdr, size_t hdr_len,
		    const struct iovec *payload, int niov);
/*
 * Sends a batch. conn_send_batch takes c->tx_lock itself; a poster holding qp->lock may
 * instead conn_tx_lock(c), drop qp->lock (the stream cannot close under tx_lock: closing
 * needs both), then conn_send_batch_unlock(c, b), which sends and releases tx_lock.
 * Either way the batch's references are put afterwards with tx_batch_release().
 */
/* Nothing of ours is queued, nor in the socket unsent (SIOCOUTQNSD; bytes the peer has but
 * has not acknowledged at the TCP level count as arrived): all we sent is with the peer. */
bool conn_tx_drained(struct conn *c);
void conn_tx_lock(struct conn *c);
int conn_send_batch_unlock(struct conn *c, const struct tx_batch *b);
int conn_send_batch(struct conn *c, const struct tx_batch *b);
void tx_batch_release(struct tx_batch *b);
void conn_close(struct conn *c);		/* engine thread */
void conn_set_paused(struct conn *c, bool paused);	/* engine thread */
/* The QP reached RTR: check the stream its peer opened and let its requests in. */
void conn_bind_pending(struct emu_qp *qp);	/* engine thread, qp->lock held */
/* Engine thread, no lock held: go on with frames already read into the staging buffer. */
void conn_process_staged(struct conn *c);

/* qp.c */
void qp_error(struct emu_qp *qp, enum ibv_event_type event);	/* qp->lock held */
void qp_raise_event(struct emu_qp *qp, enum ibv_event_type event);
/* One async event record for libibverbs' ibv_get_async_event(), on the context's pipe;
 * counted in *raised (if not NULL) when written. */
void async_event_write(int fd, uint64_t element, enum ibv_event_type event,
		       _Atomic uint32_t *raised);
/*
 * Takes the next receive WQE, from the QP's own queue or its SRQ, into *into (its sge array
 * holds EMU_MAX_SGE entries). need > 0: a WQE with less room stays queued (RECV_TOO_SHORT).
 */
enum recv_take qp_take_recv(struct emu_qp *qp, uint64_t need, struct recv_wqe *into);
void qp_complete_send(struct emu_qp *qp, struct send_wqe *wqe, enum ibv_wc_status status);
/* ex: imm_data, or invalidated_rkey with IBV_WC_WITH_INV in wc_flags. */
void qp_complete_recv(struct emu_qp *qp, const struct recv_wqe *rwqe, enum ibv_wc_status st,
		      enum ibv_wc_opcode op, uint32_t byte_len, uint32_t ex, int wc_flags,
		      bool solicited);
void qp_arm_timer(struct emu_qp *qp, int kind, uint64_t delay_ns);	/* qp->lock held */
void qp_conn_lost(struct emu_qp *qp, struct conn *c);	/* engine thread, qp->lock held */
/* How long a requester waits before it reopens a lost stream. */
uint64_t qp_retry_interval_ns(const struct emu_qp *qp);
#define QP_RECONNECT_NS	100000000ull

/* requester.c */
void requester_progress(struct emu_qp *qp);	/* qp->lock held */
void requester_rewind(struct emu_qp *qp, uint32_t psn);	/* qp->lock held */
/*
 * After an ACK timeout: resends from psn, every WQE the first time, only the oldest when it
 * timed out again, so that a loss striking the same place of every resent burst (a
 * periodic one, as SOFTRDMA_FAULTS' drop=1/N) cannot starve it; its ACK lets the rest go.
 */
void requester_resend(struct emu_qp *qp, uint32_t psn, bool oldest_only);	/* qp->lock held */
enum ibv_wc_opcode requester_wc_opcode(enum ibv_wr_opcode op);

/* responder.c: a request frame's header arrived; decides where its payload goes */
void responder_begin(struct emu_qp *qp, struct conn *c, const struct wire_packet *pkt,
		     struct rx_sink *sink);
void responder_end(struct emu_qp *qp, struct conn *c, const struct wire_packet *pkt,
		   struct rx_sink *sink);
/* Sends the ACK the requests read so far are owed (one for all of them); qp->lock held. */
void responder_flush_ack(struct emu_qp *qp, struct conn *c);

/* completer.c: the same for responses, on the requester's stream */
void completer_begin(struct emu_qp *qp, struct conn *c, const struct wire_packet *pkt,
		     struct rx_sink *sink);
void completer_end(struct emu_qp *qp, struct conn *c, const struct wire_packet *pkt,
		   struct rx_sink *sink);
void completer_timer(struct emu_qp *qp);	/* engine thread, qp->lock held */
/* Completes done WQEs from the oldest on; an error among them takes the QP to ERR. */
void completer_advance(struct emu_qp *qp);	/* qp->lock held */

/* ud.c: unreliable datagrams over UDP */
void ud_on_datagram(struct io_watch *w, uint32_t revents);	/* engine thread */
int ud_post_send(struct emu_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
int ud_socket_open(uint16_t port);

/* srq.c: receive queues, and shared ones */
int recv_queue_init(struct recv_queue *q, uint32_t depth, uint32_t max_sge);
void recv_queue_free(struct recv_queue *q);
int recv_queue_post(struct recv_queue *q, const struct ibv_recv_wr *wr);	/* EINVAL, ENOMEM */
enum recv_take recv_queue_take(struct recv_queue *q, uint64_t need, struct recv_wqe *into);
uint32_t recv_queue_count(const struct recv_queue *q);
void recv_queue_clear(struct recv_queue *q);
void srq_attach(struct emu_srq *srq);
void srq_detach(struct emu_srq *srq);
/* recv_queue_take() on the SRQ; raises the limit event when the take crosses it. */
enum recv_take srq_take(struct emu_srq *srq, uint64_t need, struct recv_wqe *into);

/* sink.c */
/* Places n bytes from src; returns false once the sink refused (the rest is discarded). */
void sink_place(struct rx_sink *s, const uint8_t *src, size_t n);
/* recv()s at most n bytes straight into the sink; returns recv's result. */
ssize_t sink_recv(struct rx_sink *s, int fd, size_t n);
/*
 * The same-host path: copies the requester's payload, named by remote in process pid,
 * into the sink with process_vm_readv(2), chunk by checked chunk as sink_place(). A copy
 * that fails (the requester's memory is gone) marks the sink MEM_ACCESS_PEER_FAULT.
 */
void sink_pull(struct rx_sink *s, pid_t pid, const struct iovec *remote, int nremote);
uint64_t sge_total_length(const struct ibv_sge *sge, int num_sge);
/* The process's memory-key table (the engine's). */
struct mem_table *the_mem_table(void);
struct emu_engine *the_engine_of_watch(struct io_watch *w);

/* The transport bits of the opcodes a QP of this type sends and accepts. */
static inline uint8_t qp_opcode_transport(enum ibv_qp_type type)
{
	if (type == IBV_QPT_UC)
		return OP_TRANSPORT_UC;
	return type == IBV_QPT_UD ? OP_TRANSPORT_UD : OP_TRANSPORT_RC;
}

/* A connected QP: RC or UC, whose messages travel on the pair's streams. */
static inline bool qp_is_connected(const struct emu_qp *qp)
{
	return qp->type == IBV_QPT_RC || qp->type == IBV_QPT_UC;
}

#include "emu/fault.h"

static inline bool psn_le(uint32_t a, uint32_t b)
{
	return ((b - a) & BTH_PSN_MASK) < (1u << 23);
}

#endif
