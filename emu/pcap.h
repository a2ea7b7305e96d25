/* SPDX-License-Identifier: MIT */
/*
 * Packet capture (docs/observability.md): with SOFTRDMA_PCAP=FILE every IBA frame an engine
 * sends or receives is written to FILE with the process's pid inserted, as pcapng, dressed
 * as RoCE v2 (Ethernet, IPv4/IPv6 from the stream's real addresses, UDP to port 4791, BTH,
 * extension headers, payload, ICRC), so that Wireshark's InfiniBand dissector reads it as
 * it reads an rxe capture.
 *
 * Capture off costs one test of pcap_active, a global pointer, at each hook. Callers write
 *	if (pcap_active)
 *		pcap_stream_batch(...);
 */
#ifndef SOFTRDMA_EMU_PCAP_H
#define SOFTRDMA_EMU_PCAP_H

#include <netinet/in.h>
#include <stdint.h>
#include <sys/uio.h>

struct pcap_capture;
struct tx_batch;

/*
 * NULL unless SOFTRDMA_PCAP named a file that could be opened; what it points to is never
 * freed. Atomic because a failed write turns it off while other threads test it: on x86 and
 * arm64 the test is still one load and one branch.
 */
extern struct pcap_capture *_Atomic pcap_active;

enum pcap_direction { PCAP_IN = 1, PCAP_OUT = 2 };	/* pcapng's epb_flags values */

/* Opens the process's capture file if SOFTRDMA_PCAP asks for one (once per process). */
void pcap_start(void);
/* Writes out what is buffered (the engine stopped, or the process exits). */
void pcap_flush(void);

/*
 * A batch sent on a stream from local to peer (the frames one sendmsg carries). qpn: the
 * stream's QP, named in the packet comment.
 */
void pcap_stream_batch(const struct sockaddr_in6 *local, const struct sockaddr_in6 *peer,
		       uint32_t qpn, const struct tx_batch *b);
/*
 * One frame received on a stream: frame points at its length word, have bytes of it are
 * in memory (a payload placed straight into its target is recorded truncated).
 */
void pcap_stream_frame(const struct sockaddr_in6 *from, const struct sockaddr_in6 *to,
		       uint32_t qpn, const uint8_t *frame, uint64_t have);
/* A UD datagram (length word, BTH, DETH, payload in iov). */
void pcap_datagram(enum pcap_direction dir, const uint8_t from_gid[16], uint16_t from_port,
		   const uint8_t to_gid[16], uint16_t to_port, const struct iovec *iov, int niov);

#endif
