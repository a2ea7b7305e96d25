// SPDX-License-Identifier: MIT
/*
 * Packet capture: each frame an engine sends or receives, written as the RoCE v2 packet a
 * real device would have put on the wire (docs/observability.md).
 *
 * The file is pcapng: one section, one interface (its name and description say which
 * process), one Enhanced Packet Block per frame with its direction (epb_flags) and a
 * comment naming the stream (addresses, ports, QP). Our own frames are made standard
 * first: an ACKETH (docs/wire-protocol.md) is cut out of the copy and named in the
 * comment, PEER_MEMORY and the hellos are not IBA packets and are not recorded.
 *
 * Records are built into a buffer of our own and written with write(2) when it fills or
 * every FLUSH_NS, under the capture's lock, which is taken last and held over nothing
 * else. A failed write stops the capture with one message.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "emu/internal.h"
#include "emu/pcap.h"

#define ROCE_V2_PORT	4791
#define ETH_LEN		14
#define IPV4_LEN	20
#define IPV6_LEN	40
#define UDP_LEN		8
#define ICRC_LEN	4
#define OUTER_MAX	(ETH_LEN + IPV6_LEN + UDP_LEN)
#define BUF_SIZE	(256u * 1024)
#define FLUSH_NS	200000000ull	/* buffered records reach the file at least this often */
#define COMMENT_MAX	160

/* pcapng block types and option codes (draft-ietf-opsawg-pcapng) */
#define PCAPNG_SHB	0x0a0d0d0au
#define PCAPNG_IDB	0x00000001u
#define PCAPNG_EPB	0x00000006u
#define PCAPNG_BOM	0x1a2b3c4du
#define OPT_END		0
#define OPT_COMMENT	1
#define OPT_SHB_USERAPPL	4
#define OPT_IF_NAME	2
#define OPT_IF_DESCRIPTION	3
#define OPT_IF_TSRESOL	9
#define OPT_EPB_FLAGS	2
#define LINKTYPE_ETHERNET	1

struct pcap_capture {
	pthread_mutex_t lock;
	int fd;
	char path[PATH_MAX];
	uint32_t snaplen;	/* 0: whole frames */
	uint8_t *buf;
	size_t len;
	uint64_t flushed_ns;
	pid_t pid;
};

struct pcap_capture *_Atomic pcap_active;

static struct pcap_capture capture = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };
static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static uint32_t crc_table[256];

/* --- the ICRC: CRC-32 (IEEE 802.3, reflected) over the packet's invariant fields --- */

static void crc_table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
		crc_table[i] = c;
	}
}

/* Running state: start from 0xffffffff, invert at the end. */
static uint32_t crc_update(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n--)
		crc = crc_table[(crc ^ *b++) & 0xff] ^ (crc >> 8);
	return crc;
}

/* --- walking the frames of a set of iovecs --- */

struct cursor {
	const struct iovec *iov;
	int niov, i;
	size_t off;
};

static uint64_t cursor_left(const struct cursor *c)
{
	uint64_t n = 0;

	for (int i = c->i; i < c->niov; i++)
		n += c->iov[i].iov_len - (i == c->i ? c->off : 0);
	return n;
}

/* Calls fn on the next n bytes (fewer if the iovecs end) and moves past them. */
static void cursor_take(struct cursor *c, uint64_t n, void (*fn)(void *arg, const void *p,
								size_t len), void *arg)
{
	while (n && c->i < c->niov) {
		size_t here = c->iov[c->i].iov_len - c->off;

		if (here > n)
			here = (size_t)n;
		if (here && fn)
			fn(arg, (const uint8_t *)c->iov[c->i].iov_base + c->off, here);
		n -= here;
		c->off += here;
		if (c->off == c->iov[c->i].iov_len) {
			c->i++;
			c->off = 0;
		}
	}
}

struct copy_to {
	uint8_t *at;
};

static void copy_bytes(void *arg, const void *p, size_t len)
{
	struct copy_to *t = arg;

	memcpy(t->at, p, len);
	t->at += len;
}

static void crc_bytes(void *arg, const void *p, size_t len)
{
	uint32_t *crc = arg;

	*crc = crc_update(*crc, p, len);
}

/* --- the buffer and the file --- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Capture off for good; the caller holds the lock. */
static void stop_locked(struct pcap_capture *cap, int err)
{
	pcap_active = NULL;
	if (cap->fd >= 0)
		close(cap->fd);
	cap->fd = -1;
	cap->len = 0;
	fprintf(stderr, "softrdma: packet capture to %s stopped: %s\n", cap->path, strerror(err));
}

static void flush_locked(struct pcap_capture *cap)
{
	size_t done = 0;

	while (cap->fd >= 0 && done < cap->len) {
		ssize_t n = write(cap->fd, cap->buf + done, cap->len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			stop_locked(cap, n < 0 ? errno : ENOSPC);
			return;
		}
		done += (size_t)n;
	}
	cap->len = 0;
}

/* Room for n more bytes in the buffer (a record is never split); false if capture stopped. */
static bool reserve(struct pcap_capture *cap, size_t n)
{
	if (cap->len + n > BUF_SIZE)
		flush_locked(cap);
	return cap->fd >= 0 && n <= BUF_SIZE;
}

static void put(struct pcap_capture *cap, const void *p, size_t n)
{
	memcpy(cap->buf + cap->len, p, n);
	cap->len += n;
}

static void put32(struct pcap_capture *cap, uint32_t v)
{
	put(cap, &v, 4);
}

static void put_pad(struct pcap_capture *cap, size_t n)
{
	static const uint8_t zero[4];

	put(cap, zero, (4 - n % 4) % 4);
}

static size_t opt_size(size_t len)
{
	return 4 + (len + 3) / 4 * 4;
}

static void put_opt(struct pcap_capture *cap, uint16_t code, const void *p, size_t len)
{
	uint16_t h[2] = { code, (uint16_t)len };

	put(cap, h, 4);
	put(cap, p, len);
	put_pad(cap, len);
}

/* The section header and our one interface, which says whose capture this is. */
static bool write_header(struct pcap_capture *cap)
{
	char name[64], desc[128], comm[32] = "";
	static const char appl[] = "softrdma";
	uint8_t tsresol = 9;	/* nanoseconds */
	uint32_t shb_len, idb_len;
	FILE *f = fopen("/proc/self/comm", "r");

	if (f) {
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = 0;
		fclose(f);
	}
	snprintf(name, sizeof(name), "softrdma0 pid %d", (int)cap->pid);
	snprintf(desc, sizeof(desc), "softrdma engine of %s (pid %d)", comm, (int)cap->pid);
	shb_len = 28 + (uint32_t)opt_size(strlen(appl)) + 4;
	idb_len = 20 + (uint32_t)(opt_size(strlen(name)) + opt_size(strlen(desc)) + opt_size(1)) + 4;
	if (!reserve(cap, shb_len + idb_len))
		return false;
	put32(cap, PCAPNG_SHB);
	put32(cap, shb_len);
	put32(cap, PCAPNG_BOM);
	put32(cap, 1);		/* version 1.0 */
	put32(cap, 0xffffffffu);	/* section length: not given */
	put32(cap, 0xffffffffu);
	put_opt(cap, OPT_SHB_USERAPPL, appl, strlen(appl));
	put32(cap, OPT_END);
	put32(cap, shb_len);
	put32(cap, PCAPNG_IDB);
	put32(cap, idb_len);
	put32(cap, LINKTYPE_ETHERNET);
	put32(cap, cap->snaplen);
	put_opt(cap, OPT_IF_NAME, name, strlen(name));
	put_opt(cap, OPT_IF_DESCRIPTION, desc, strlen(desc));
	put_opt(cap, OPT_IF_TSRESOL, &tsresol, 1);
	put32(cap, OPT_END);
	put32(cap, idb_len);
	flush_locked(cap);
	return cap->fd >= 0;
}

/* FILE with the pid before its extension (cap.pcapng -> cap.1234.pcapng), else FILE.1234. */
static void file_name(char *out, size_t size, const char *file, pid_t pid)
{
	const char *slash = strrchr(file, '/');
	const char *dot = strrchr(slash ? slash + 1 : file, '.');

	if (dot && dot != (slash ? slash + 1 : file))
		snprintf(out, size, "%.*s.%d%s", (int)(dot - file), file, (int)pid, dot);
	else
		snprintf(out, size, "%s.%d", file, (int)pid);
}

static void at_exit(void)
{
	pcap_flush();
}

/* A forked child writes its own file, should it start an engine; the parent's is not its. */
static void before_fork(void)
{
	pthread_mutex_lock(&capture.lock);
}

static void after_fork_parent(void)
{
	pthread_mutex_unlock(&capture.lock);
}

static void after_fork_child(void)
{
	pcap_active = NULL;
	if (capture.fd >= 0)
		close(capture.fd);
	capture.fd = -1;
	capture.len = 0;
	pthread_mutex_init(&capture.lock, NULL);
	start_once = (pthread_once_t)PTHREAD_ONCE_INIT;
}

static void start(void)
{
	const char *file = getenv("SOFTRDMA_PCAP");
	const char *snap = getenv("SOFTRDMA_PCAP_SNAPLEN");
	static bool hooks;

	if (!file || !*file)
		return;
	if (!hooks) {
		crc_table_init();
		atexit(at_exit);
		pthread_atfork(before_fork, after_fork_parent, after_fork_child);
		hooks = true;
	}
	capture.pid = getpid();
	capture.snaplen = snap ? (uint32_t)strtoul(snap, NULL, 0) : 0;
	file_name(capture.path, sizeof(capture.path), file, capture.pid);
	if (!capture.buf && !(capture.buf = malloc(BUF_SIZE)))
		return;
	capture.fd = open(capture.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (capture.fd < 0) {
		fprintf(stderr, "softrdma: no packet capture: %s: %s\n", capture.path,
			strerror(errno));
		return;
	}
	pthread_mutex_lock(&capture.lock);
	if (write_header(&capture)) {
		capture.flushed_ns = now_ns();
		pcap_active = &capture;
	}
	pthread_mutex_unlock(&capture.lock);
}

void pcap_start(void)
{
	pthread_once(&start_once, start);
}

void pcap_flush(void)
{
	pthread_mutex_lock(&capture.lock);
	if (capture.fd >= 0)
		flush_locked(&capture);
	pthread_mutex_unlock(&capture.lock);
}

/* --- one packet --- */

/* Where a packet went: addresses as IPv6 (v4-mapped for IPv4), ports in host order. */
struct endpoints {
	const uint8_t *src, *dst;
	uint16_t sport, dport;	/* the real ports (TCP or UDP): the comment names them */
	const char *what;	/* "stream", "datagram" */
	uint32_t qpn;
};

static bool v4_mapped(const uint8_t *a)
{
	static const uint8_t prefix[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(a, prefix, 12);
}

/* Ethernet, IP and UDP headers for an IBA packet of ib_len bytes (ICRC included). */
static size_t build_outer(uint8_t *o, const struct endpoints *ep, uint64_t ib_len, bool v4)
{
	size_t ip_len = v4 ? IPV4_LEN : IPV6_LEN;
	uint32_t udp_len = (uint32_t)(UDP_LEN + ib_len);
	uint8_t *ip = o + ETH_LEN, *udp = ip + ip_len;

	memset(o, 0, ETH_LEN + ip_len + UDP_LEN);
	/* Locally administered MACs that carry the address's last four bytes. */
	o[0] = 0x02;
	memcpy(o + 2, ep->dst + 12, 4);
	o[6] = 0x02;
	memcpy(o + 8, ep->src + 12, 4);
	o[12] = v4 ? 0x08 : 0x86;
	o[13] = v4 ? 0x00 : 0xdd;
	if (v4) {
		uint32_t total = (uint32_t)(IPV4_LEN + udp_len);
		uint16_t sum;

		/* Past 64 KiB (our messages are not cut at the MTU): 0, as TSO captures show it,
		 * which Wireshark reads as "the length of the captured packet". */
		if (total > 0xffff)
			total = 0;
		ip[0] = 0x45;
		ip[2] = (uint8_t)(total >> 8);
		ip[3] = (uint8_t)total;
		ip[6] = 0x40;	/* don't fragment */
		ip[8] = 64;
		ip[9] = IPPROTO_UDP;
		memcpy(ip + 12, ep->src + 12, 4);
		memcpy(ip + 16, ep->dst + 12, 4);
		sum = htons(ipv4_header_checksum(ip));
		memcpy(ip + 10, &sum, 2);
	} else {
		ip[0] = 0x60;
		ip[4] = (uint8_t)(udp_len >> 8);
		ip[5] = (uint8_t)udp_len;
		ip[6] = IPPROTO_UDP;
		ip[7] = 64;
		memcpy(ip + 8, ep->src, 16);
		memcpy(ip + 24, ep->dst, 16);
	}
	udp[0] = (uint8_t)(ep->sport >> 8);
	udp[1] = (uint8_t)ep->sport;
	udp[2] = ROCE_V2_PORT >> 8;
	udp[3] = ROCE_V2_PORT & 0xff;
	udp[4] = (uint8_t)(udp_len >> 8);
	udp[5] = (uint8_t)udp_len;
	return ETH_LEN + ip_len + UDP_LEN;
}

/*
 * The ICRC of IBA 17.4 for RoCE v2, as rxe computes it: eight bytes of ones in place of the
 * LRH, then the IP, UDP and IBA headers with their variant fields set to ones, then the
 * payload.
 */
static uint32_t icrc(const uint8_t *outer, bool v4, const uint8_t *ib, size_t ib_hdr_len,
		     struct cursor payload, uint64_t payload_len)
{
	static const uint8_t ones[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	size_t ip_len = v4 ? IPV4_LEN : IPV6_LEN;
	uint8_t masked[IPV6_LEN + UDP_LEN + 12];
	uint32_t crc = crc_update(0xffffffffu, ones, 8);

	memcpy(masked, outer + ETH_LEN, ip_len + UDP_LEN);
	if (v4) {
		masked[1] = 0xff;		/* type of service */
		masked[8] = 0xff;		/* TTL */
		masked[10] = masked[11] = 0xff;	/* header checksum */
	} else {
		masked[0] |= 0x0f;		/* traffic class, flow label */
		masked[1] = masked[2] = masked[3] = 0xff;
		masked[7] = 0xff;		/* hop limit */
	}
	masked[ip_len + 6] = masked[ip_len + 7] = 0xff;	/* UDP checksum */
	memcpy(masked + ip_len + UDP_LEN, ib, 12);
	masked[ip_len + UDP_LEN + 4] = 0xff;		/* BTH reserved byte */
	crc = crc_update(crc, masked, ip_len + UDP_LEN + 12);
	crc = crc_update(crc, ib + 12, ib_hdr_len - 12);
	cursor_take(&payload, payload_len, crc_bytes, &crc);
	return ~crc;
}

/* The packet comment: which process, which way, which stream or datagram (its length). */
static size_t format_comment(char *out, size_t size, const struct pcap_capture *cap,
			     enum pcap_direction dir, const struct endpoints *ep, bool v4,
			     const char *note, bool cut)
{
	char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN];
	int n;

	inet_ntop(AF_INET6, ep->src, src, sizeof(src));
	inet_ntop(AF_INET6, ep->dst, dst, sizeof(dst));
	/* IPv4 as a.b.c.d, not ::ffff:a.b.c.d */
	n = snprintf(out, size, v4 ? "pid %d %s %s qp 0x%06x %s:%u > %s:%u%s%s" :
				     "pid %d %s %s qp 0x%06x [%s]:%u > [%s]:%u%s%s",
		     (int)cap->pid, dir == PCAP_OUT ? "sent" : "received", ep->what, ep->qpn,
		     v4 ? src + 7 : src, ep->sport, v4 ? dst + 7 : dst, ep->dport, note,
		     cut ? " payload not recorded" : "");
	return n < 0 ? 0 : (size_t)n >= size ? size - 1 : (size_t)n;
}

/* The first incl bytes of outer headers, IBA headers, payload and ICRC, into the buffer. */
static void put_packet(struct pcap_capture *cap, uint64_t incl, const uint8_t *outer,
		       size_t outer_len, const uint8_t *ib, size_t ib_hdr_len,
		       struct cursor payload, uint64_t have, uint32_t crc)
{
	uint32_t icrc_le = htole32(crc);	/* little-endian, as rxe stores it */
	struct copy_to to;
	size_t n;

	n = outer_len < incl ? outer_len : (size_t)incl;
	put(cap, outer, n);
	incl -= n;
	n = ib_hdr_len < incl ? ib_hdr_len : (size_t)incl;
	put(cap, ib, n);
	incl -= n;
	n = have < incl ? (size_t)have : (size_t)incl;
	to.at = cap->buf + cap->len;
	cursor_take(&payload, n, copy_bytes, &to);
	cap->len += n;
	incl -= n;
	put(cap, &icrc_le, (size_t)incl);	/* what is left is the ICRC, or part of it */
}

/*
 * One Enhanced Packet Block: ib (the IBA headers, standard by now) and payload_len bytes
 * at the cursor, of which only what is there (or fits the snap length) is recorded.
 */
static void record(struct pcap_capture *cap, enum pcap_direction dir, const struct endpoints *ep,
		   const uint8_t *ib, size_t ib_hdr_len, const struct cursor *payload,
		   uint64_t payload_len, const char *note)
{
	bool v4 = v4_mapped(ep->src) && v4_mapped(ep->dst);
	uint8_t outer[OUTER_MAX];
	size_t outer_len = build_outer(outer, ep, ib_hdr_len + payload_len + ICRC_LEN, v4);
	uint64_t orig = outer_len + ib_hdr_len + payload_len + ICRC_LEN;
	uint64_t have = cursor_left(payload) < payload_len ? cursor_left(payload) : payload_len;
	uint64_t incl = outer_len + ib_hdr_len + have + (have == payload_len ? ICRC_LEN : 0);
	char comment[COMMENT_MAX];
	uint32_t crc = 0, flags = dir, block;
	uint64_t ts = now_ns();
	size_t clen;

	if (cap->snaplen && incl > cap->snaplen)
		incl = cap->snaplen;
	if (incl > BUF_SIZE / 2)	/* a record must fit the buffer: longer ones are cut */
		incl = BUF_SIZE / 2;
	if (incl == orig)
		crc = icrc(outer, v4, ib, ib_hdr_len, *payload, payload_len);
	clen = format_comment(comment, sizeof(comment), cap, dir, ep, v4, note,
			      have < payload_len);
	block = (uint32_t)(28 + (incl + 3) / 4 * 4 + opt_size(4) + opt_size(clen) + 4 + 4);
	if (!reserve(cap, block))
		return;
	put32(cap, PCAPNG_EPB);
	put32(cap, block);
	put32(cap, 0);			/* interface 0 */
	put32(cap, (uint32_t)(ts >> 32));
	put32(cap, (uint32_t)ts);
	put32(cap, (uint32_t)incl);
	put32(cap, (uint32_t)(orig > UINT32_MAX ? UINT32_MAX : orig));
	put_packet(cap, incl, outer, outer_len, ib, ib_hdr_len, *payload, have, crc);
	put_pad(cap, (size_t)incl);
	put_opt(cap, OPT_EPB_FLAGS, &flags, 4);
	put_opt(cap, OPT_COMMENT, comment, clen);
	put32(cap, OPT_END);
	put32(cap, block);
	if (ts - cap->flushed_ns >= FLUSH_NS) {
		flush_locked(cap);
		cap->flushed_ns = ts;
	}
}

/*
 * The next frame at the cursor, made standard and recorded; the cursor moves past it.
 * Returns false when the iovecs hold no whole frame header.
 */
static bool record_frame(struct pcap_capture *cap, enum pcap_direction dir,
			 const struct endpoints *ep, struct cursor *c)
{
	uint8_t hdr[4 + WIRE_MAX_HDR];
	char note[48] = "";
	struct copy_to to = { hdr };
	unsigned int base, hdr_len;
	uint32_t frame_len;
	uint64_t payload_len;
	struct cursor payload;

	if (cursor_left(c) < 4 + sizeof(struct wire_bth))
		return false;
	cursor_take(c, 4 + sizeof(struct wire_bth), copy_bytes, &to);
	memcpy(&frame_len, hdr, 4);
	frame_len = ntohl(frame_len);
	base = wire_header_len(hdr[4]);
	hdr_len = wire_frame_header_len(hdr + 4);
	if (!base || hdr[4] == OP_PEER_MEMORY || frame_len < hdr_len ||
	    cursor_left(c) < hdr_len - sizeof(struct wire_bth)) {
		/* not an IBA packet of ours: skipped whole */
		cursor_take(c, frame_len > sizeof(struct wire_bth) ?
			       frame_len - sizeof(struct wire_bth) : 0, NULL, NULL);
		return true;
	}
	cursor_take(c, hdr_len - sizeof(struct wire_bth), copy_bytes, &to);
	if (hdr[4 + 8] & (BTH_ACKED >> 24)) {
		uint32_t psn;

		memcpy(&psn, hdr + 4 + base, 4);
		snprintf(note, sizeof(note), " acketh psn 0x%06x",
			 ntohl(psn) & BTH_PSN_MASK);
		hdr[4 + 8] &= (uint8_t)~(BTH_ACKED >> 24);
	}
	if (hdr[4 + 8] & (BTH_BY_REF >> 24))
		strncat(note, " by reference", sizeof(note) - strlen(note) - 1);
	payload_len = frame_len - hdr_len;
	payload = *c;
	pthread_mutex_lock(&cap->lock);
	if (pcap_active)
		record(cap, dir, ep, hdr + 4, base, &payload, payload_len, note);
	pthread_mutex_unlock(&cap->lock);
	cursor_take(c, payload_len, NULL, NULL);
	return true;
}

static void record_frames(enum pcap_direction dir, const struct endpoints *ep,
			  const struct iovec *iov, int niov)
{
	struct pcap_capture *cap = pcap_active;
	struct cursor c = { .iov = iov, .niov = niov };

	if (!cap)
		return;
	while (record_frame(cap, dir, ep, &c))
		;
}

void pcap_stream_batch(const struct sockaddr_in6 *local, const struct sockaddr_in6 *peer,
		       uint32_t qpn, const struct tx_batch *b)
{
	struct endpoints ep = { local->sin6_addr.s6_addr, peer->sin6_addr.s6_addr,
				ntohs(local->sin6_port), ntohs(peer->sin6_port), "stream", qpn };
	uint32_t magic;

	/* The hello goes alone, first: a connection, not a packet. */
	if (b->niov && b->iov[0].iov_len == sizeof(struct wire_hello)) {
		memcpy(&magic, b->iov[0].iov_base, 4);
		if (ntohl(magic) == WIRE_MAGIC)
			return;
	}
	record_frames(PCAP_OUT, &ep, b->iov, b->niov);
}

void pcap_stream_frame(const struct sockaddr_in6 *from, const struct sockaddr_in6 *to,
		       uint32_t qpn, const uint8_t *frame, uint64_t have)
{
	struct endpoints ep = { from->sin6_addr.s6_addr, to->sin6_addr.s6_addr,
				ntohs(from->sin6_port), ntohs(to->sin6_port), "stream", qpn };
	struct iovec iov = { (void *)frame, (size_t)have };

	record_frames(PCAP_IN, &ep, &iov, 1);
}

void pcap_datagram(enum pcap_direction dir, const uint8_t from_gid[16], uint16_t from_port,
		   const uint8_t to_gid[16], uint16_t to_port, const struct iovec *iov, int niov)
{
	struct endpoints ep = { from_gid, to_gid, from_port, to_port, "datagram", 0 };
	uint8_t bth[4 + sizeof(struct wire_bth)];
	struct cursor c = { .iov = iov, .niov = niov };
	struct copy_to t = { bth };
	uint32_t qpn;

	if (cursor_left(&c) < sizeof(bth))
		return;
	cursor_take(&c, sizeof(bth), copy_bytes, &t);
	memcpy(&qpn, bth + 4 + 4, 4);
	ep.qpn = ntohl(qpn) & BTH_QPN_MASK;
	record_frames(dir, &ep, iov, niov);
}
