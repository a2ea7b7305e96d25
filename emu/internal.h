/* SPDX-License-Identifier: MIT */
/*
 * The engine's own structures, shared by its files: engine.c (thread, listeners, QP table,
 * calls into the engine thread), conn.c (one TCP stream: hello, frame reader, sender),
 * qp.c (state, queues, errors and flushes), srq.c (receive queues, shared or a QP's own),
 * requester.c, responder.c and completer.c (the IBTA's division of RC, which UC shares).
 *
 * Locking order (docs/locking.md has every lock and the whole drawing): engine->progress
 * first, then qp->lock, then one of conn->tx_lock, an SRQ's lock or the key table's lock
 * (emu/mr.c), then a CQ's lock. engine->lock is a leaf: the engine drops it before it
 * locks a QP.
 *
 * "The engine thread" in the comments of emu/ means the holder of engine->progress
 * (engine_on_thread()): the engine thread between its waits, or an application thread
 * whose empty ibv_poll_cq runs one pass of the engine (emu/progress.c). Everything said
 * to be the engine thread's own (streams' readers, the kicked and closed lists, handshakes,
 * listeners, multicast groups, the I/O backend, ud.c's receive buffer) is guarded by it.
 * progress is outermost: taken with no lock of emu/ held (ibv_poll_cq drops the CQ's lock
 * first), and only tried by application threads, so they never wait for it.
 */
#ifndef SOFTRDMA_EMU_INTERNAL_H
#define SOFTRDMA_EMU_INTERNAL_H

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "emu/conn.h"
#include "emu/counters.h"
#include "emu/cq.h"
#include "emu/direct.h"
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

/*
 * A send WQE's life: queued by the poster, sent by the requester, done when the completer
 * has its answer (or it failed, or it was a local operation). WQEs complete in order, so
 * a done WQE may wait behind an older one still sent. A lost stream or an RNR NAK puts
 * sent WQEs back to queued (requester_rewind()); a done one stays done.
 */
enum wqe_state { WQE_QUEUED, WQE_SENT, WQE_DONE };

struct send_wqe {
	struct emu_send_wr wr;	/* copy; wr.sg_list points at sge below */
	struct ibv_sge *sge;
	uint8_t *inline_buf;	/* max_inline_data bytes */
	uint64_t length;
	uint32_t psn;
	enum wqe_state state;
	enum ibv_wc_status status;	/* of a done WQE */
	bool signaled;
	bool was_sent;		/* it left once: a rewind queues it again (emu/requester.c) */
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

/* The send queue: slot = index % cap.max_send_wr; head is the poster's, the rest below. */
struct send_queue {
	struct send_wqe *wqe;
	uint32_t head;			/* next index to post */
};

/* The requester (requester.c): from queued to sent. */
struct qp_req_info {
	uint32_t next;			/* index of the next WQE to transmit */
	uint32_t psn;			/* the next PSN to give a WQE */
	uint32_t rd_atomic_out;		/* READ/atomic requests awaiting responses */
};

enum qp_timer { TIMER_NONE, TIMER_ACK, TIMER_RNR, TIMER_CONNECT };

/* The completer (completer.c): from sent to completed, and the timers that drive retries. */
struct qp_comp_info {
	uint32_t tail;			/* index of the next WQE to complete */
	uint32_t retries_left, rnr_retries_left;
	/* A frame of ours or an answer was dropped (SOFTRDMA_FAULTS, or a peer QP that takes no
	 * requests) since the last resend: only then does the ACK timer resend and spend a
	 * retry. Without it the peer is slow or stopped, and the requester waits. */
	bool lost;
	/* CLOCK_MONOTONIC deadline, 0: none. Atomic: the engine glances at it without the lock. */
	_Atomic uint64_t timer_ns;
	enum qp_timer timer_kind;
};

/* What the responder decided about the request being read (responder_begin -> _end). */
enum resp_verdict {
	RESP_EXECUTE,		/* checks passed */
	RESP_DROP,		/* silently: QP not ready, RNR recovery, or a duplicate re-ACKed */
	RESP_DUPLICATE,		/* already executed: answer again, do not execute */
	RESP_RNR,		/* no receive posted */
	RESP_NAK,		/* refused: nak_code, event */
};

/* A receive completion built, waiting for the ACK that covers its request to leave. */
struct held_recv {
	struct ibv_wc wc;
	bool solicited;
};

/* Held at most (responder.c): then the ACK goes out early and they are made visible. */
#define RESP_HELD_MAX	32

/* The responder (responder.c): requests arriving on the stream the peer opened. */
struct qp_resp_info {
	uint32_t epsn;			/* next request PSN expected */
	uint32_t msn;
	bool rnr_dropping;		/* after an RNR NAK: drop until epsn comes again */
	enum resp_verdict verdict;
	bool ack_pending;		/* an ACK for ack_psn is owed, sent at the end of the read */
	uint32_t ack_psn;
	uint8_t nak_code;		/* RESP_NAK: the NAK's code (emu/wire.h) */
	enum mem_access_result refusal;	/* RESP_NAK: what the access check said */
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
	/* XRC target: the SRQ the current request's XRCETH named (a reference, emu/xrc.c),
	 * whose PD its remote accesses are checked against (IBA: a target QP has no PD). */
	struct emu_srq *xrc_srq;
	uint32_t xrc_pd_handle;
	/*
	 * The receive completions of this read whose coalesced ACK (ack_pending) has not been
	 * handed to the stream yet: visible only after it (responder_flush_ack()), so that an
	 * answer the application sends on seeing one cannot overtake it. In order;
	 * held[released..nheld) still to push. RESP_HELD_MAX entries, allocated on first use.
	 */
	struct held_recv *held;
	uint32_t nheld, released;
};

/* A connected QP's streams (emu/qp_stream.c is their one owner). */
struct qp_streams {
	struct conn *req;		/* the one we opened: our requests, their responses */
	struct conn *resp;		/* the one the peer opened: its requests */
	struct conn *candidates;	/* the peer's (so they say), not bound yet */
	int ncandidates;
	bool connect_pending;		/* connect_call queued on the engine */
	struct engine_call connect_call;
};

/*
 * A queue pair. qp->lock guards everything below but the constants (engine, qpn, type,
 * pd_handle, xrcd, the CQs, srq, cap, udp_fd, faults), which are set at creation and never
 * change; it is held by posting threads, pollers that flush, and the engine thread for every
 * frame it reads for this QP. handle, async_fd and events_raised are constants too, but an
 * XRC target's may move under qp->lock to another of its handles (emu_qp_set_owner()).
 */
struct emu_qp {
	struct emu_engine *engine;
	pthread_mutex_t lock;		/* all but the constants (above); docs/locking.md */
	uint32_t qpn;
	enum ibv_qp_type type;
	uint64_t handle;	/* the ibv_qp pointer, as async events carry it */
	int async_fd;
	_Atomic uint32_t *events_raised;	/* the provider's count of them, or NULL */
	uint32_t pd_handle;	/* an XRC target has none: 0 */
	uint32_t xrcd;		/* an XRC target's domain; 0: not one */
	struct emu_cq *send_cq, *recv_cq;	/* XRC: the initiator's send CQ only */
	struct emu_srq *srq;	/* its receives come from this SRQ; NULL: from rq */
	struct ibv_qp_cap cap;
	struct emu_listener *listener;	/* whose port its QPN holds (UD: its sockets) */
	struct fault_qp *faults;	/* SOFTRDMA_FAULTS (emu/fault.h); NULL: none */
	struct counter_block counters;	/* emu/counters.h: this QP's port counters */

	enum ibv_qp_state state;
	struct ibv_qp_attr attr;	/* as last modified (what query_qp reports) */
	bool sq_sig_all;
	struct sockaddr_in6 peer_addr;	/* from the AV's dgid; port from dest_qp_num */
	struct sockaddr_in6 local_addr;	/* from the AV's sgid_index */

	struct send_queue sq;
	struct recv_queue rq;		/* unused with an SRQ */
	struct qp_req_info req;
	struct qp_comp_info comp;
	struct qp_resp_info resp;
	struct qp_streams streams;
	int mcast_groups;		/* the engine thread's: groups attached to (emu/mcast.c) */
};

/* One address of a listener: a TCP socket for streams and handshakes, a UDP one for UD. */
struct listen_socket {
	struct emu_listener *owner;
	struct sockaddr_in6 addr;	/* with the listener's port */
	unsigned int ifindex;		/* the interface addr is on */
	int tcp_fd, udp_fd;
	struct io_watch tcp_watch, udp_watch;
	uint32_t udp_overflows;		/* the UDP socket's drop count (SO_RXQ_OVFL) last seen */
};

#define LISTENER_HALF_OPEN	64	/* connections accepted that have not said what for */

/* A port number: the QPNs port << 8 | 0..255 (emu/listener.c). Engine thread but qps/used. */
struct emu_listener {
	struct emu_engine *engine;
	uint16_t port;
	struct listen_socket *socks;	/* one per address of the device */
	int nsocks;
	int half_open;			/* its handshakes not done yet */
	uint64_t resume_ns;		/* accepting again then (out of descriptors); 0: accepting */
	struct emu_qp *qps[QPS_PER_LISTENER];	/* under engine->lock */
	int used;
};

struct handshake;
struct ucred;

/*
 * The process's engine. lock guards the QP table (listeners and their qps) and the call
 * queue; refs is under engine.c's process_engine_lock; everything else is the engine
 * thread's own, which is to say progress's (above).
 */
struct emu_engine {
	pthread_mutex_t lock;		/* the QP table, the call queue; a leaf (docs/locking.md) */
	pthread_cond_t call_done;	/* lock: a queued call ran */
	/* The engine's progress: all the engine thread's own state below; outermost. */
	pthread_mutex_t progress;
	_Atomic(pthread_t) progress_owner;	/* its holder, 0: none (engine_on_thread()) */
	bool app_progress;		/* SOFTRDMA_POLL_PROGRESS is not 0: pollers may drive */
	int test_nap_ms;		/* SOFTRDMA_TEST_ENGINE_NAP_MS (emu/progress.c) */
	bool tx_cork;			/* SOFTRDMA_DOORBELL_BATCH is not 0 (emu/requester.c) */
	pthread_t thread;
	int refs;			/* process_engine_lock: emu_engine_get()s not yet put */
	struct io_backend *io;
	int wake_fd;
	struct io_watch wake_watch;
	struct engine_call *calls, *calls_tail;
	bool stopping;
	struct emu_listener **listeners;
	int nlisteners;
	struct sockaddr_in6 *addrs;	/* where listeners listen: the GID table's addresses */
	unsigned int *ifindexes;	/* the interface of each of addrs */
	int naddrs;
	struct mcast_table *mcast;	/* multicast groups: the engine thread's own (emu/mcast.c) */
	struct mem_table *mem;
	atomic_int srqs;		/* SRQs in existence, at most EMU_MAX_SRQ */
	/* emu/xrc.c: every SRQ by the slot of its number (lock); NULL until the first */
	struct emu_srq **srq_slots;
	uint32_t srq_next_slot, srq_gen;
	struct conn *closed;		/* waiting to be freed after the current wait() */
	struct conn *kicked;		/* staged frames to process before waiting again */
	struct handshake *handshakes;	/* emu/handshake.c, with their deadlines */
	int nhandshakes;
	int local_fd;			/* the same-host path's AF_UNIX socket, or -1 */
	bool local_failed;
	uint64_t local_resume_ns;	/* accepting on it again then (out of fds); 0: accepting */
	struct io_watch local_watch;
	char local_name[WIRE_LOCAL_NAME_LEN];
	_Atomic uint64_t next_timer_ns;
};

/* engine.c */
uint64_t engine_now_ns(void);
/* Runs fn(arg) on the engine thread (inline when called there) and waits for it. */
void engine_call_sync(struct emu_engine *e, void (*fn)(void *), void *arg);
/* Runs fn(arg) on the engine thread later; arg must stay valid until then. */
void engine_call_async(struct emu_engine *e, struct engine_call *call);
void engine_wake(struct emu_engine *e);		/* the engine thread's wait returns */
/* Calls are queued or a timer is due: work only the engine thread does. */
bool engine_has_work(struct emu_engine *e);
void engine_run_kicked(struct emu_engine *e);	/* progress held */
void engine_free_closed(struct emu_engine *e);	/* progress held, after a dispatch */

/* progress.c: who drives the engine */
void engine_progress_init(struct emu_engine *e);
/* This thread holds progress: it is "the engine thread" for everything in emu/. */
bool engine_on_thread(struct emu_engine *e);
void engine_progress_take(struct emu_engine *e);	/* the engine thread, no lock held */
void engine_progress_release(struct emu_engine *e);
void engine_test_nap(struct emu_engine *e);
struct emu_qp *engine_find_qp(struct emu_engine *e, uint32_t qpn);
void engine_timer_changed(struct emu_engine *e, uint64_t deadline_ns);
int engine_watch(struct emu_engine *e, struct io_watch *w);
void engine_unwatch(struct emu_engine *e, struct io_watch *w);
void engine_rewatch(struct emu_engine *e, struct io_watch *w);
/* Engine thread: process c's staged frames after this round of I/O (not nested in a lock). */
void engine_kick(struct emu_engine *e, struct conn *c);
void engine_unkick(struct emu_engine *e, struct conn *c);	/* c is going away */
int engine_register_qp(struct emu_engine *e, struct emu_qp *qp);
void engine_unregister_qp(struct emu_engine *e, struct emu_qp *qp);

/* listener.c */
/*
 * accept() failed for want of descriptors or memory: the connection stays in the backlog,
 * so its socket is still readable, and retrying at once would spin on a CPU. The caller
 * stops watching that socket for ACCEPT_BACKOFF_NS (listeners, the AF_UNIX socket).
 */
#define ACCEPT_BACKOFF_NS	100000000ull
static inline bool accept_must_rest(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}
/* Engine thread: a rest begins, to end at *resume_ns (the engine's timer is told). */
void accept_rest_begin(struct emu_engine *e, uint64_t *resume_ns);
/*
 * Engine thread, from a timer at now: true when the rest is over (*resume_ns is 0 again and
 * the caller watches its socket again); *next is when the rest ends while it lasts, else
 * UINT64_MAX.
 */
bool accept_rest_over(uint64_t *resume_ns, uint64_t now, uint64_t *next);
/* The addresses to listen on, from the GID table (kernel-abi/host_gids.h): count or -errno. */
/* The GID table's addresses, and the interface of each (multicast joins and sends). */
int listener_addresses(struct sockaddr_in6 **out, unsigned int **ifindexes);
int listener_open(struct emu_engine *e, struct emu_listener **out);
int listener_watch(struct emu_listener *l);	/* engine thread */
void listener_unwatch(struct emu_listener *l, int n);	/* engine thread: its first n sockets */
void listener_free(struct emu_listener *l);
/* The UD socket bound to sgid's address, or -1. */
/* The UDP socket on address sgid (-1: none) and its interface's index in *ifindex. */
int listener_udp_socket(const struct emu_listener *l, const uint8_t sgid[16],
			unsigned int *ifindex);
/* Engine thread: resumes accepting after a backoff; the next deadline or UINT64_MAX. */
uint64_t listener_timer(struct emu_listener *l, uint64_t now);

/* handshake.c: engine thread */
void handshake_accept(struct emu_listener *l, int fd, const struct sockaddr_in6 *peer);
/* Closes the connection to l that has waited longest for its hello, if any. */
void handshake_evict_oldest(struct emu_listener *l);
void handshake_local_accept(struct emu_engine *e, int fd);
/* Asks the engine of c's claimed QPN whether c is its; qp_stream_verified() hears. */
void handshake_verify(struct conn *c);
/* Asks over AF_UNIX for the same-host path; on yes, peer_mem_grant(). */
void handshake_local_ask(struct conn *c, const char *name);
void handshake_cancel(struct handshake *h);
uint64_t handshake_timers(struct emu_engine *e, uint64_t now);
void handshake_stop_all(struct emu_engine *e);
#ifdef SOFTRDMA_FUZZ_HOOKS
/* tests/fuzz: reads the hello already in fd at once and believes its claim; the stream. */
struct conn *handshake_fuzz_stream(struct emu_engine *e, int fd, const struct sockaddr_in6 *peer);
#endif

/* qp_stream.c: engine thread; qp->lock held where it says so */
void qp_stream_open(struct emu_qp *qp);		/* qp->lock held */
void qp_stream_open_later(struct emu_qp *qp);	/* any thread, qp->lock held */
/* A STREAM hello named qp: fd becomes a candidate stream, whose verification starts. */
void qp_stream_offered(struct emu_qp *qp, int fd, const struct sockaddr_in6 *peer,
		       const struct sockaddr_in6 *local, uint32_t src_qpn);
/* The verification of candidate c ended: v NULL is no. */
void qp_stream_verified(struct conn *c, const struct wire_verdict *v);
void qp_stream_bind_pending(struct emu_qp *qp);	/* qp->lock held: after RTR */
void qp_stream_closed(struct emu_qp *qp, struct conn *c);	/* qp->lock held */
/* Its streams' keepalive follows a new timeout or retry_cnt. */
void qp_stream_liveness_changed(struct emu_qp *qp);	/* qp->lock held */
void qp_streams_close(struct emu_qp *qp);		/* qp->lock held */
/* Before the QP goes to ERR: what was posted leaves, then what arrived comes in. */
void qp_streams_settle(struct emu_qp *qp);		/* any thread, no lock held */
void qp_send_posted(struct emu_qp *qp);		/* engine thread, qp->lock held */
/*
 * Our stream that question q describes, or NULL; reader non-NULL: asked over AF_UNIX by
 * that process of our user, which may then read the stream's payloads.
 */
struct conn *qp_stream_vouch(struct emu_engine *e, const struct wire_hello *q,
			     const struct ucred *reader);

/* peer_mem.c: the same-host path */
#define PEER_MEM_MIN		16384	/* smaller payloads are as cheap to send over TCP */
bool peer_mem_enabled(void);		/* SOFTRDMA_SAME_HOST is not 0 */
/* The engine's AF_UNIX name, made on first use; NULL when the path is off. */
const char *peer_mem_local_name(struct emu_engine *e);
void peer_mem_stop(struct emu_engine *e);
/* Engine thread: resumes accepting after a backoff; the next deadline or UINT64_MAX. */
uint64_t peer_mem_timer(struct emu_engine *e, uint64_t now);
/*
 * The kernel named pid as c's requester, whose answer put WIRE_PROBE at probe_addr: if
 * that can be read, read its payloads from now on, and say so.
 */
void peer_mem_grant(struct conn *c, pid_t pid, uint64_t probe_addr);
/* Where WIRE_PROBE lies in this process (a LOCAL_CLAIM's answer says it). */
uint64_t peer_mem_probe_addr(void);
/* pm watches process pid from now on: 0, or ESRCH (it is gone, or cannot be told apart). */
int peer_mem_watch(struct peer_mem *pm, pid_t pid);
/* Whether process_vm_readv(2) reaches pid's memory (ptrace rules or seccomp may refuse):
 * the WIRE_PROBE it said lies at probe_addr is there. */
bool peer_mem_can_read(pid_t pid, uint64_t probe_addr);
void peer_mem_release(struct peer_mem *pm);
/* After a read: the process is still the peer (it has not exited, its pid not reused). */
bool peer_mem_still_there(const struct peer_mem *pm);
/* Writes the descriptor of iov into desc (PEER_MEM_DESC_LEN each); returns its length. */
unsigned int peer_mem_describe(uint8_t *desc, const struct iovec *iov, int niov);
/* 0, or EPROTO for a descriptor a sane peer would not send. */
int peer_mem_parse(const uint8_t *desc, uint64_t len, struct iovec *remote, int *nremote,
		   uint64_t *total);

/* qp.c */
/*
 * The ways into ERR, all with qp->lock held. qp_to_error(): without an async event (the
 * error is reported by a completion, or the application asked); qp_fatal(): with the
 * affiliated asynchronous error event (IBTA 11.6.3); both flush every WQE. qp_flush():
 * already in ERR, flushes what was posted since.
 */
void qp_to_error(struct emu_qp *qp);
void qp_fatal(struct emu_qp *qp, enum ibv_event_type event);
void qp_flush(struct emu_qp *qp);
void qp_raise_event(struct emu_qp *qp, enum ibv_event_type event);
/*
 * Takes the next receive WQE, from the QP's own queue or its SRQ, into *into (its sge array
 * holds EMU_MAX_SGE entries). need > 0: a WQE with less room stays queued (RECV_TOO_SHORT).
 */
enum recv_take qp_take_recv(struct emu_qp *qp, uint64_t need, struct recv_wqe *into);
void qp_complete_send(struct emu_qp *qp, struct send_wqe *wqe, enum ibv_wc_status status);
/* ex: imm_data, or invalidated_rkey with IBV_WC_WITH_INV in wc_flags. */
void qp_recv_wc(struct emu_qp *qp, const struct recv_wqe *rwqe, enum ibv_wc_status st,
		enum ibv_wc_opcode op, uint32_t byte_len, uint32_t ex, int wc_flags,
		struct ibv_wc *wc);
/* Makes a receive completion visible: the QP's receive CQ, or an XRC target's SRQ's. */
void qp_deliver_recv(struct emu_qp *qp, const struct ibv_wc *wc, bool solicited);
/* qp_recv_wc(), then qp_deliver_recv(). */
void qp_complete_recv(struct emu_qp *qp, const struct recv_wqe *rwqe, enum ibv_wc_status st,
		      enum ibv_wc_opcode op, uint32_t byte_len, uint32_t ex, int wc_flags,
		      bool solicited);
void qp_arm_timer(struct emu_qp *qp, int kind, uint64_t delay_ns);	/* qp->lock held */
void qp_conn_lost(struct emu_qp *qp, struct conn *c);	/* engine thread, qp->lock held */
/* How long a requester waits before it reopens a lost stream. */
uint64_t qp_retry_interval_ns(const struct emu_qp *qp);
/* timeout x (retry_cnt + 1): how long a NIC tries before IBV_WC_RETRY_EXC_ERR; 0: forever. */
uint64_t qp_give_up_ns(const struct emu_qp *qp);
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
/*
 * Sends the ACK the requests read so far are owed (one for all of them), then makes the
 * receive completions it covers visible; qp->lock held.
 */
void responder_flush_ack(struct emu_qp *qp, struct conn *c);
/*
 * Makes the held receive completions visible, in order, without an ACK: the QP leaves its
 * state (ERR, RESET) or the stream the ACK was for is gone (the requester resends, and its
 * duplicates are ACKed). qp->lock held.
 */
void responder_release_held(struct emu_qp *qp);
/* An XRC target: drops its reference to the last request's SRQ, unless a receive needs it. */
void responder_release_srq(struct emu_qp *qp);	/* qp->lock held */

/* completer.c: the same for responses, on the requester's stream */
void completer_begin(struct emu_qp *qp, struct conn *c, const struct wire_packet *pkt,
		     struct rx_sink *sink);
void completer_end(struct emu_qp *qp, struct conn *c, const struct wire_packet *pkt,
		   struct rx_sink *sink);
void completer_timer(struct emu_qp *qp);	/* engine thread, qp->lock held */
/* The peer acknowledged our requests up to psn on its own request stream (BTH_ACKED). */
void completer_acked(struct emu_qp *qp, uint32_t psn);	/* qp->lock held */
/* Whether completer_acked(psn) may complete a send WQE (it may not, if false). */
bool completer_acks_any(struct emu_qp *qp, uint32_t psn);	/* qp->lock held */
/* Completes done WQEs from the oldest on; an error among them takes the QP to ERR. */
void completer_advance(struct emu_qp *qp);	/* qp->lock held */

/* ud.c: unreliable datagrams over UDP */
/* The IPv4 header checksum of the 20-byte header at hdr (its checksum field zero). */
uint16_t ipv4_header_checksum(const uint8_t *hdr);
void ud_on_datagram(struct io_watch *w, uint32_t revents);	/* engine thread */
int ud_post_send(struct emu_qp *qp, const struct emu_send_wr *wr, unsigned int n,
		 unsigned int *bad);
/* A UD socket bound to addr (with its port; shared: SO_REUSEADDR): the fd, or -errno. */
int ud_socket_open(const struct sockaddr_in6 *addr, bool shared);

/* What the IP header of an arriving datagram said, for its GRH. */
struct ud_arrival {
	uint8_t sgid[16];	/* its source address */
	uint8_t dgid[16];	/* the address it was sent to */
	uint8_t traffic_class;
	uint8_t hop_limit;
};

/* One datagram read, its frame parsed; payload points into the engine's receive buffer. */
struct ud_datagram {
	struct wire_packet pkt;
	struct ud_arrival arrival;
	const uint8_t *payload;
	uint16_t src_port;
};

/*
 * Engine thread: reads the next datagram from fd (overflows: that socket's drop count last
 * seen; local_port: for the capture). 1: a well-formed frame in d; 0: one dropped as a bad
 * packet (counted); -1: none left.
 */
int ud_read_datagram(int fd, uint32_t *overflows, uint16_t local_port, struct ud_datagram *d);
/* Engine thread: d received by qp, as a UD QP receives (takes qp->lock). */
void ud_deliver(struct emu_qp *qp, const struct ud_datagram *d);

/* mcast.c: UD multicast groups, one IP multicast group each */
#define EMU_MCAST_UDP_PORT	4791	/* RoCE v2's: where every engine's groups listen */
void mcast_detach_all(struct emu_qp *qp);	/* engine thread: qp is going away */
void mcast_stop(struct emu_engine *e);		/* engine thread: the engine is stopping */
/* Engine thread: reads what waits on the socket of group mgid now, if the process has it
 * (the fuzz harness's way in; otherwise the engine's watch of the socket does it). */
void mcast_read_group(struct emu_engine *e, const uint8_t mgid[16]);

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
void srq_get(struct emu_srq *srq);
void srq_put(struct emu_srq *srq);	/* the last reference frees it */
uint32_t srq_xrcd(const struct emu_srq *srq);
uint32_t srq_pd(const struct emu_srq *srq);
void srq_set_srqn(struct emu_srq *srq, uint32_t srqn);
void srq_kill(struct emu_srq *srq);	/* destroyed: takes and completions stop */
/*
 * An XRC receive's completion, to the SRQ's CQ unless the SRQ was destroyed meanwhile (then
 * false: nothing to complete to). *overrun: the CQ was full.
 */
bool srq_complete(struct emu_srq *srq, const struct ibv_wc *wc, bool solicited, bool *overrun);

/* xrc.c: the SRQ numbers an XRCETH names */
int xrc_srq_number(struct emu_engine *e, struct emu_srq *srq);	/* 0 or ENOMEM */
void xrc_srq_unnumber(struct emu_engine *e, struct emu_srq *srq);	/* and srq_kill() */
/* Engine thread: the live SRQ of domain xrcd numbered srqn, with a reference; or NULL. */
struct emu_srq *xrc_srq_find(struct emu_engine *e, uint32_t srqn, uint32_t xrcd);
void xrc_free(struct emu_engine *e);

/* sink.c */
/* Places n bytes from src; once the sink has refused (s->failure), the rest is discarded. */
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

/* The transport bits of the opcodes a QP of this type sends and accepts. */
static inline uint8_t qp_opcode_transport(enum ibv_qp_type type)
{
	switch (type) {
	case IBV_QPT_UC:
		return OP_TRANSPORT_UC;
	case IBV_QPT_UD:
		return OP_TRANSPORT_UD;
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		return OP_TRANSPORT_XRC;
	default:
		return OP_TRANSPORT_RC;
	}
}

/* A connected QP: RC, UC or either half of XRC, whose messages travel on the pair's streams. */
static inline bool qp_is_connected(const struct emu_qp *qp)
{
	return qp->type == IBV_QPT_RC || qp->type == IBV_QPT_UC ||
	       qp->type == IBV_QPT_XRC_SEND || qp->type == IBV_QPT_XRC_RECV;
}

/* A connected QP that sends requests on a stream it opens: all but XRC's target. */
static inline bool qp_opens_stream(const struct emu_qp *qp)
{
	return qp_is_connected(qp) && qp->type != IBV_QPT_XRC_RECV;
}

/* A connected QP that takes requests from a stream its peer opened: all but XRC's initiator. */
static inline bool qp_takes_requests(const struct emu_qp *qp)
{
	return qp_is_connected(qp) && qp->type != IBV_QPT_XRC_SEND;
}

/* Acknowledged (RC's rules): RC and XRC; UC is not. */
static inline bool qp_is_reliable(const struct emu_qp *qp)
{
	return qp_is_connected(qp) && qp->type != IBV_QPT_UC;
}

#include "emu/fault.h"

static inline bool psn_le(uint32_t a, uint32_t b)
{
	return ((b - a) & BTH_PSN_MASK) < (1u << 23);
}

#endif
