/* SPDX-License-Identifier: MIT */
/*
 * The drop-in librdmacm: rdma_cm over TCP for the soft device. The public structures are
 * the system's own (<rdma/rdma_cma.h>), kept exactly, because the rdma_verbs.h helpers
 * compiled into applications read them; each is the first member of a private one.
 *
 * Pieces: channel.c (event channels and events), cm_thread.c (the thread that owns every
 * CM socket: listeners, connections not yet past their REQ, timers), send.c (messages to a
 * peer: never blocking, a bounded queue), id.c (ids, addresses, listen, options, devices),
 * connect.c (the connection handshake, docs/rdma-cm.md), qp.c (QPs made on ids, and what
 * rdma_init_qp_attr reports), multicast.c (UD multicast joins), addrinfo.c (rdma_getaddrinfo and the endpoint calls),
 * rsocket.c (the rsocket API over TCP).
 *
 * THE LOCK RULE. Every field below says which lock guards it; these are the CM's locks
 * (besides them only leaves: id.c's devices_lock, qp.c's pd_lock; rsocket.c has its own;
 * docs/locking.md lists them all):
 *
 *   id->lock   one id's connection state: state, sock, peer, the send queue, the channel
 *              pointer, the event counts a waiter sleeps on. Every API call on an id and
 *              every CM-thread callback for it runs under it. A CONNECT_REQUEST is made
 *              under the listener's lock, then the new id's (listener first).
 *   cm_lock    (cm_thread.c) the watch table, the epoll set, connections awaiting their REQ,
 *              timers, and which callback is running. Taken under an id->lock, never the
 *              other way round; nothing else is taken under it.
 *   ch->lock   one channel's event queue and the byte count of its pipe. Taken under an
 *              id->lock (posting), under live_lock (a reader entering), or alone; nothing
 *              else is taken under it.
 *   live_lock  (channel.c) the list of channels not destroyed. Taken alone or before a
 *              ch->lock, never under any lock.
 *
 * Nothing is held across I/O that can block: sockets are non-blocking and a message that
 * does not fit is queued (send.c). The one wait under a lock is cm_thread_unwatch() waiting
 * for a running callback of that id to finish, so it is never called with that id's lock
 * held (except by the callback itself, which does not wait). Waiting for acknowledgements
 * (rdma_destroy_id, rdma_migrate_id) sleeps on id->cond, which releases id->lock. Calls into
 * the device under id->lock (ibv_modify_qp, cm_qp_take_arrived) wait for its engine thread,
 * which takes none of these locks.
 */
#ifndef SOFTRDMA_CM_H
#define SOFTRDMA_CM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <rdma/rdma_cma.h>

#define EXPORT __attribute__((visibility("default")))

/* Private data the IB CM carries (IBTA 12.6): what a peer sees is padded to these sizes. */
#define CM_REQ_PRIVATE_DATA	56
#define CM_REP_PRIVATE_DATA	196
#define CM_REJ_PRIVATE_DATA	148
#define CM_SIDR_REQ_PRIVATE_DATA	216	/* UD: service ID resolution */
#define CM_SIDR_REP_PRIVATE_DATA	136
#define CM_MAX_PRIVATE_DATA	CM_SIDR_REQ_PRIVATE_DATA
#define CM_UD_QKEY			0x01234567u	/* RDMA_UDP_QKEY of the kernel's CM */

/* IB CM reject reasons (enum ib_cm_rej_reason) the events report as status. */
#define CM_REJ_INVALID_SERVICE_ID	8	/* nobody listens on that port */
#define CM_REJ_INVALID_GID		12	/* the REQ's GID is not where it came from */
#define CM_REJ_CONSUMER_DEFINED		28	/* rdma_reject(); destroyed before accepting */
#define CM_REJ_VENDOR_OPTION_NOT_SUPPORTED 35	/* rdma_reject_ece() */

/*
 * What a peer can make the CM hold (docs/security.md). A connection accepted on a listener
 * is "half-open" until its REQ has arrived: it must come first and within the timeout, and
 * a listener keeps at most CM_MAX_HALF_OPEN of them (the oldest goes). A peer that stops
 * reading gets CM_TX_QUEUE messages queued beyond its socket buffer, then is cut off.
 */
#define CM_REQ_TIMEOUT_MS	5000
#define CM_MAX_HALF_OPEN	64
#define CM_TX_QUEUE		4
#define CM_SOCK_BUF		32768	/* SO_SNDBUF of CM connections: ~120 messages */
#define CM_ACCEPT_BACKOFF_MS	100	/* a listener rests this long at the fd limit */
#define CM_MSGS_PER_WAKEUP	16	/* one peer's flood does not starve the others */

/* How the CM's messages travel: docs/rdma-cm.md. */
enum cm_msg_type { CM_MSG_REQ = 1, CM_MSG_REP, CM_MSG_REJ, CM_MSG_RTU, CM_MSG_DREQ, CM_MSG_DREP };

#define CM_WIRE_MAGIC	0x5352434du	/* "SRCM" */
#define CM_WIRE_VERSION	1

struct cm_msg {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t qpn;
	uint32_t psn;			/* UD (SIDR): the Q_Key */
	uint8_t gid[16];		/* the sender's GID: where its QP lives */
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t flow_control;
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	uint8_t srq;
	uint8_t private_data_len;
	uint8_t reject_reason;
	uint32_t ece_vendor_id;
	uint32_t ece_options;
	uint8_t private_data[CM_MAX_PRIVATE_DATA];
} __attribute__((packed));
/* The wire record docs/rdma-cm.md describes: a change here is a new CM_WIRE_VERSION. */
_Static_assert(sizeof(struct cm_msg) == 264, "struct cm_msg is 264 bytes on the wire");

enum cm_state {
	CM_IDLE,
	CM_ADDR_BOUND,
	CM_ADDR_RESOLVED,
	CM_ROUTE_RESOLVED,
	CM_LISTENING,
	CM_CONNECTING,		/* REQ sent, waiting for REP */
	CM_REQ_RECEIVED,	/* passive side before rdma_accept/rdma_reject */
	CM_ACCEPTED,		/* REP sent, waiting for RTU */
	CM_REP_RECEIVED,	/* active side without a QP, before rdma_establish */
	CM_ESTABLISHED,
	CM_DISCONNECTED,
	CM_DESTROYING,		/* rdma_destroy_id has begun: callbacks leave it alone */
};

struct cm_channel {
	struct rdma_event_channel channel;	/* public: fd */
	int notify_fd;			/* the pipe's write end (non-blocking) */
	pthread_mutex_t lock;
	/* ch->lock: the queue, and events whose byte did not fit in a full pipe. The pipe
	 * holds exactly (queued - unannounced) bytes whenever the lock is free. */
	struct cm_event *head, *tail;
	unsigned int unannounced;
	/* ch->lock: threads inside rdma_get_cm_event(), and whether the channel was destroyed
	 * under them; the last of them frees it (channel.c). */
	unsigned int readers;
	bool destroyed;
	struct cm_channel *live_next;	/* channel.c's live_lock: the channels not destroyed */
};

struct cm_event {
	struct rdma_cm_event event;	/* public */
	struct cm_event *next;
	struct cm_id *owner;		/* the id whose event counts it is in */
	uint8_t private_data[CM_MAX_PRIVATE_DATA];
};

struct cm_id {
	struct rdma_cm_id id;		/* public; id.channel under lock */
	pthread_mutex_t lock;		/* THE LOCK RULE above */
	pthread_cond_t cond;		/* lock: an event of this id was acknowledged */
	/* lock */
	enum cm_state state;
	bool sync;			/* made without a channel: calls wait for their events */
	bool passive;			/* came from a listener */
	struct cm_channel *own_channel;	/* the private channel of a synchronous id */
	int sock;			/* listener, or the connection to the peer's CM; -1 */
	bool lost;			/* the connection ended: socket closed, not watched */
	bool cut_off;			/* the peer stopped reading: to be reset (send.c) */
	unsigned int events_posted;	/* events queued for it (or for a listener, naming it) */
	unsigned int events_acked;	/* of those, acknowledged by the application */
	unsigned int events_dropped;	/* of those, dropped unseen (destroy, migrate) */
	atomic_uint events_reported;	/* of those, handed out by rdma_get_cm_event */
	/* options (lock) */
	uint8_t tos;
	bool reuseaddr;
	int afonly;			/* -1: system default */
	uint8_t ack_timeout;
	/* the connection (lock) */
	struct cm_msg peer;		/* REQ or REP received */
	struct rdma_conn_param local_param;
	uint32_t local_psn;
	uint32_t local_qpn;		/* the QP our REQ or REP named */
	uint32_t ece_vendor_id, ece_options;	/* rdma_set_local_ece */
	struct ibv_qp_init_attr ep_qp_attr;	/* rdma_create_ep listener: QPs for requests */
	struct cm_mcast *mcasts;	/* multicast.c: the groups joined, newest first */
	/* send.c (lock): what the socket did not take, oldest first */
	struct cm_msg txq[CM_TX_QUEUE];
	unsigned int tx_head, tx_count;
	size_t tx_sent;			/* bytes of txq[tx_head] already sent */
	/* cm_thread.c (cm_lock) */
	int watch_slot;			/* -1 when not watched */
	uint32_t watch_events;		/* EPOLLIN, plus EPOLLOUT while txq holds messages */
	int half_open;			/* listener: accepted connections before their REQ */
	int64_t rearm_at_ms;		/* listener resting at the fd limit; 0 when armed */
	/* cm_thread.c: read by the CM thread only, reset by cm_thread_watch() */
	uint8_t rx[sizeof(struct cm_msg)];
	size_t rx_len;
};

static inline struct cm_id *to_cm_id(struct rdma_cm_id *id)
{
	return (struct cm_id *)id;
}

static inline struct cm_channel *to_cm_channel(struct rdma_event_channel *ch)
{
	return (struct cm_channel *)ch;
}

static inline bool cm_id_is_ud(const struct cm_id *id)
{
	return id->id.qp_type == IBV_QPT_UD;
}

/* channel.c */
/*
 * Queues an event on the id's channel (or, with listen_id, on the listener's); a copy of
 * private data is kept with it. Needs id->lock (and listen_id->lock) held.
 */
int cm_post_event(struct cm_id *id, enum rdma_cm_event_type type, int status,
		  const struct cm_msg *msg, struct cm_id *listen_id);
/* The same for a multicast join's event: the group's address handle and the join's context. */
int cm_post_mcast_event(struct cm_id *id, enum rdma_cm_event_type type, int status,
			const union ibv_gid *mgid, uint32_t qkey, void *context);
/* Synchronous ids: waits for the next event of this id and consumes it; 0 or errno. The
 * event stays in id->event until the next call releases it (id->lock held). */
int cm_wait_event(struct cm_id *id, enum rdma_cm_event_type expected);
void cm_release_kept_event(struct cm_id *id);
/* Removes the queued events that belong to id (for a listener: its connection requests,
 * whose new ids go on *requests through event->next), counting them dropped. No lock held. */
void cm_channel_take_events_of(struct cm_channel *ch, struct cm_id *id,
			       struct cm_event **requests);
/* Moves the queued events of id from one channel to another (rdma_migrate_id). */
void cm_channel_move_events(struct cm_channel *from, struct cm_channel *to, struct cm_id *id);
/* Wait with id->lock held: until this many events of id were acknowledged; until every
 * event posted for it was acknowledged or dropped. */
void cm_wait_acked(struct cm_id *id, unsigned int reported);
void cm_wait_events_done(struct cm_id *id);

/* id.c */
struct cm_id *cm_id_new(struct rdma_event_channel *channel, void *context,
			enum rdma_port_space ps, enum ibv_qp_type qp_type);
void cm_id_free(struct cm_id *id);
struct ibv_context *cm_softrdma_context(void);
/* The GID table index of a local IP address on the soft device, or -1. */
int cm_gid_index_of(struct ibv_context *verbs, const struct sockaddr *addr, union ibv_gid *gid);
void cm_sockaddr_to_gid(const struct sockaddr *sa, union ibv_gid *gid);
void cm_gid_to_sockaddr(const union ibv_gid *gid, uint16_t port, struct sockaddr_storage *ss);

/* cm_thread.c: the thread that owns CM sockets */
int cm_thread_watch(struct cm_id *id);		/* start reading id->sock (non-blocking) */
void cm_thread_unwatch(struct cm_id *id);	/* stop; returns when no callback runs */
void cm_thread_want_write(struct cm_id *id, bool want);	/* EPOLLOUT while txq is not empty */
bool cm_thread_is_self(void);

/* send.c (id->lock held) */
int cm_send(struct cm_id *id, const struct cm_msg *msg);	/* 0, or the socket's errno */
void cm_send_flush(struct cm_id *id);		/* the socket is writable again */
void cm_send_once(int fd, const struct cm_msg *msg);	/* best effort, before a close */
void cm_sock_setup(int fd);			/* non-blocking, small buffers, no delay */
void cm_msg_init(struct cm_msg *msg, enum cm_msg_type type);

/* connect.c: what arrives (CM thread) */
/* A complete REQ on a connection accepted by listener: 0 if it now belongs to a new id,
 * else the caller closes fd. */
int cm_handle_req(struct cm_id *listener, int fd, const struct cm_msg *msg,
		  const struct sockaddr_storage *peer);
void cm_handle_msg(struct cm_id *id, const struct cm_msg *msg);	/* id->lock held */
void cm_handle_conn_lost(struct cm_id *id);			/* id->lock held */
/* Takes down an id the application never saw or is destroying: REJ or DREQ as its state
 * asks, then the socket goes. No lock held; the id is no longer watched. */
void cm_conn_close(struct cm_id *id, enum cm_state was);

/* multicast.c: an id's joins are forgotten when it goes (id->lock not needed: no users) */
void cm_mcast_forget(struct cm_id *id);

/* qp.c */
int cm_qp_to_rtr_rts(struct cm_id *id, const struct cm_msg *peer);
int cm_qp_to_error(struct cm_id *id);
void cm_qp_take_arrived(struct cm_id *id);	/* under id->lock: what the peer sent came in */

#endif
