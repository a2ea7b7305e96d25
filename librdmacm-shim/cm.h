/* SPDX-License-Identifier: MIT */
/*
 * The drop-in librdmacm: rdma_cm over TCP for the soft device. The public structures are
 * the system's own (<rdma/rdma_cma.h>), kept exactly, because the rdma_verbs.h helpers
 * compiled into applications read them; each is the first member of a private one.
 *
 * Pieces: channel.c (event channels and events), cm_thread.c (the thread that owns every
 * CM socket: listeners and connections), id.c (ids, addresses, listen, options, devices),
 * connect.c (the connection handshake, docs/rdma-cm.md), qp.c (QPs made on ids, and what
 * rdma_init_qp_attr reports), addrinfo.c (rdma_getaddrinfo and the endpoint calls),
 * rsocket.c (the rsocket API over TCP).
 */
#ifndef SOFTRDMA_CM_H
#define SOFTRDMA_CM_H

#include <pthread.h>
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

/* IB CM reject reasons the events report as status. */
#define CM_REJ_INVALID_SERVICE_ID	8	/* nobody listens on that port */
#define CM_REJ_CONSUMER_DEFINED		28	/* rdma_reject() */

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
};

struct cm_channel {
	struct rdma_event_channel channel;	/* public: fd */
	int notify_fd;			/* write end of the pipe behind channel.fd */
	pthread_mutex_t lock;
	struct cm_event *head, *tail;	/* events not yet taken */
};

struct cm_event {
	struct rdma_cm_event event;	/* public */
	struct cm_event *next;
	struct cm_id *owner;		/* the id whose event count it holds */
	uint8_t private_data[CM_MAX_PRIVATE_DATA];
};

struct cm_id {
	struct rdma_cm_id id;		/* public */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	enum cm_state state;
	bool sync;			/* made without a channel: calls wait for their events */
	struct cm_channel *own_channel;	/* the private channel of a synchronous id */
	int sock;			/* listener, or the connection to the peer's CM; -1 */
	struct cm_id *listen_parent;	/* passive side: the listener it came from */
	int events_outstanding;		/* delivered and not yet acked */
	bool destroying;
	/* options */
	uint8_t tos;
	bool reuseaddr;
	int afonly;			/* -1: system default */
	uint8_t ack_timeout;
	int backlog;
	/* the connection */
	struct cm_msg peer;		/* REQ or REP received */
	struct rdma_conn_param local_param;
	uint32_t local_psn;
	uint32_t ece_vendor_id, ece_options;	/* rdma_set_local_ece */
	struct ibv_qp_init_attr ep_qp_attr;	/* rdma_create_ep listener: QPs for requests */
	/* cm_thread.c */
	int watch_slot;			/* -1 when not watched */
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

/* channel.c */
/* Queues an event on the id's channel; a copy of private data is kept with it. */
int cm_post_event(struct cm_id *id, enum rdma_cm_event_type type, int status,
		  const struct cm_msg *msg, struct cm_id *listen_id);
/* Synchronous ids: waits for the next event of this id and consumes it; 0 or errno. */
int cm_wait_event(struct cm_id *id, enum rdma_cm_event_type expected);
void cm_channel_drop_events_of(struct cm_channel *ch, struct cm_id *id);

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
int cm_thread_watch(struct cm_id *id);		/* start reading id->sock */
void cm_thread_unwatch(struct cm_id *id);	/* stop; returns when no callback runs */
int cm_send_msg(int sock, const struct cm_msg *msg);
/* connect.c: what arrives */
void cm_handle_accept(struct cm_id *listener);		/* listener readable */
void cm_handle_msg(struct cm_id *id, const struct cm_msg *msg);
void cm_handle_conn_lost(struct cm_id *id);

static inline bool cm_id_is_ud(const struct cm_id *id)
{
	return id->id.qp_type == IBV_QPT_UD;
}

/* qp.c */
int cm_qp_to_rtr_rts(struct cm_id *id, const struct cm_msg *peer, bool active);
int cm_qp_to_error(struct cm_id *id);

#endif
