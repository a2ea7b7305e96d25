/* SPDX-License-Identifier: MIT */
/*
 * Port counters: what the device sent and received, and what it dropped, refused or
 * retried without a completion saying so, counted per QP and per process.
 *
 * Counting is a relaxed atomic add into the QP's block (or the process's, for what belongs
 * to no QP): nothing is shared between processes on the data path. A publisher thread
 * (counters.c) writes the process's values into the run's tree when they have changed, at
 * most every SOFTRDMA_COUNTERS_INTERVAL_MS (1000), and refreshes the sysfs files
 * ports/1/counters/ and ports/1/hw_counters/ with the sum over every process of the run
 * (emu/counter_store.c; docs/semantics.md, "Port counters").
 */
#ifndef SOFTRDMA_EMU_COUNTERS_H
#define SOFTRDMA_EMU_COUNTERS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* X(enum name, name): named as rxe, mlx5 or the IBA PortCounters name them. */
#define EMU_COUNTER_LIST(X)							\
	X(XMIT_DATA, "port_xmit_data")		/* 4-octet words of packets sent */	\
	X(RCV_DATA, "port_rcv_data")		/* ... received */			\
	X(XMIT_PACKETS, "port_xmit_packets")						\
	X(RCV_PACKETS, "port_rcv_packets")						\
	X(MCAST_XMIT_PACKETS, "multicast_xmit_packets")	/* of those, to a group */	\
	X(MCAST_RCV_PACKETS, "multicast_rcv_packets")					\
	X(RCV_ERRORS, "port_rcv_errors")	/* malformed frames and datagrams */	\
	X(XMIT_DISCARDS, "port_xmit_discards")	/* UD datagrams not sent */		\
	X(DUPLICATE_REQUEST, "duplicate_request")					\
	X(OUT_OF_SEQ_REQUEST, "out_of_seq_request")					\
	X(SEND_RNR_ERR, "send_rnr_err")		/* RNR NAKs sent */			\
	X(RCVD_RNR_ERR, "rcvd_rnr_err")		/* RNR NAKs received */			\
	X(COMPLETER_RETRY_ERR, "completer_retry_err")	/* resends after an ACK timeout */ \
	X(RETRY_EXCEEDED_ERR, "retry_exceeded_err")					\
	X(RETRY_RNR_EXCEEDED_ERR, "retry_rnr_exceeded_err")				\
	X(RDMA_SENDS, "rdma_sends")		/* SEND WRs completed */		\
	X(RDMA_RECVS, "rdma_recvs")		/* receives completed by a SEND */	\
	X(OUT_OF_BUFFER, "out_of_buffer")	/* UD/UC: no receive posted */		\
	X(RESP_REMOTE_ACCESS_ERRORS, "resp_remote_access_errors")	/* refused */	\
	X(QKEY_VIOLATIONS, "qkey_violations")	/* UD: wrong Q_Key */			\
	X(RCV_BUFFER_DROPS, "rcv_buffer_drops")	/* UD socket overflow */		\
	X(SAME_HOST_PAYLOADS, "same_host_payloads")	/* read from the peer */	\
	X(DIRECT_WRITES, "same_host_direct_writes")	/* placed in the peer (direct.c) */ \
	X(DIRECT_READS, "same_host_direct_reads")	/* read from the peer (direct.c) */

#define EMU_COUNTER_ENUM(id, name) EMU_CNT_##id,
enum emu_counter { EMU_COUNTER_LIST(EMU_COUNTER_ENUM) EMU_CNT_MAX };
#undef EMU_COUNTER_ENUM

extern const char *const emu_counter_names[EMU_CNT_MAX];

/* A QP's counters (embedded in the QP), or the process's own. */
struct counter_block {
	uint64_t v[EMU_CNT_MAX];	/* atomic: any thread adds, the publisher reads */
	struct counter_block *prev, *next;	/* the process's live QPs; registry_lock */
	uint32_t qpn;
};

extern struct counter_block emu_process_counters;

/* The block of QP qp (an emu_qp), or the process's when there is no QP. */
#define QP_COUNTERS(qp) ((qp) ? &(qp)->counters : &emu_process_counters)

static inline void qp_counter_add(struct counter_block *b, enum emu_counter id, uint64_t n)
{
	__atomic_fetch_add(&b->v[id], n, __ATOMIC_RELAXED);
}

/* Something that belongs to no QP (or whose QP is not at hand). */
static inline void counter_add(enum emu_counter id, uint64_t n)
{
	qp_counter_add(&emu_process_counters, id, n);
}

/* The 4-octet words a packet takes: BTH and headers, the payload padded to 4, the ICRC. */
static inline uint64_t counter_packet_words(uint64_t hdr_len, uint64_t payload_len)
{
	return (hdr_len + payload_len + 3) / 4 + 1;
}

/* One packet sent or received: hdr_len bytes of BTH and extension headers. */
static inline void counter_packet(struct counter_block *b, enum emu_counter data_id,
				  uint64_t hdr_len, uint64_t payload_len)
{
	qp_counter_add(b, data_id, counter_packet_words(hdr_len, payload_len));
	qp_counter_add(b, data_id == EMU_CNT_XMIT_DATA ? EMU_CNT_XMIT_PACKETS : EMU_CNT_RCV_PACKETS, 1);
}

struct tx_batch;

/*
 * A frame handed to a stream (conn.c): its header as built, with the length word, and its
 * payload; a batch's frames, by-reference ones with the payload they stand for. The hello
 * and the softrdma-only PEER_MEMORY frame are not packets and are not counted.
 */
void counters_stream_frame(struct counter_block *b, const uint8_t *hdr, size_t hdr_len,
			   const struct iovec *payload, int niov);
void counters_stream_batch(struct counter_block *b, const struct tx_batch *batch);

/* A QP's block joins the process's (engine_register_qp) and leaves it, its counts kept in
 * the process's totals (engine_unregister_qp). */
void counters_qp_register(struct counter_block *b, uint32_t qpn);
void counters_qp_unregister(struct counter_block *b);

/*
 * fold(arg) adds counts kept outside the process's blocks into them before each sum, under
 * the counters' lock (emu/direct.c: what same-host peers placed here); NULL: none.
 */
void counters_set_fold(void (*fold)(void *arg), void *arg);

/* The process's sums: own block, live QPs and the QPs gone. */
void counters_snapshot(uint64_t totals[EMU_CNT_MAX]);

/*
 * Engine start: opens the run's counter store under $SYSFS_PATH (checked as
 * kernel-abi/run_dir.h says; a refused tree is named on stderr and counting stays in this
 * process) and starts the publisher. Engine stop: a last publication, the thread ends.
 */
void counters_attach(void);
void counters_detach(void);

#endif
