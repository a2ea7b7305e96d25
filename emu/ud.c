// SPDX-License-Identifier: MIT
/*
 * UD queue pairs: each message is one UDP datagram from the sender's listener port to the
 * port the destination QPN names, carrying BTH + DETH (+ ImmDt) behind the usual length
 * word. Nothing is acknowledged: a send completes once handed to the socket, and a
 * receiver drops silently what hardware drops (no receive posted, wrong Q_Key, too long).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <string.h>
#include <unistd.h>

#include "emu/counters.h"
#include "emu/internal.h"
#include "emu/limits.h"
#include "emu/pcap.h"

#define GRH_LEN 40
#define UD_MAX_DATAGRAM (4 + WIRE_MAX_HDR + EMU_PORT_MAX_MSG_UD)
#define UD_SOCKET_BUFFER (16 << 20)

static const uint8_t v4_prefix[12] = { [10] = 0xff, [11] = 0xff };

int ud_socket_open(const struct sockaddr_in6 *addr, bool shared)
{
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int off = 0, on = 1, rcvbuf = UD_SOCKET_BUFFER;

	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
	/* The receiver needs the address a datagram was sent to: it is the GRH's DGID. */
	setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof(on));
	setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof(on));
	/* And the IP header's traffic class and hop limit, which the GRH reports too. */
	setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &on, sizeof(on));
	setsockopt(fd, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, &on, sizeof(on));
	setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &on, sizeof(on));
	setsockopt(fd, IPPROTO_IP, IP_RECVTTL, &on, sizeof(on));
	/*
	 * A sender's datagrams are not flow controlled, as on a lossless RoCE fabric they need
	 * not be; what stands in for the fabric's buffering is this socket's. Ask for a deep
	 * one (beyond rmem_max where we may), so that a receiving engine that is briefly off
	 * the CPU loses nothing; drops it still sees are counted (SO_RXQ_OVFL).
	 */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &on, sizeof(on));
	/* A multicast group's port is every engine's on the host: each gets its own copy. */
	if (shared)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (bind(fd, (const struct sockaddr *)addr, sizeof(*addr))) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

uint16_t ipv4_header_checksum(const uint8_t *hdr)
{
	uint32_t sum = 0;

	for (int i = 0; i < 20; i += 2)
		sum += (uint32_t)hdr[i] << 8 | hdr[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/*
 * The L3 header a RoCE v2 packet came in, as an mlx5 CQE's RoCE packet type gives it and
 * rdma-core's mlx5 passes on in a UD receive's wc.sl (SL means nothing else on RoCE).
 * Readers of the GRH area need it to tell its two layouts apart: UCX's ud_verbs takes the
 * DGID from the last 4 bytes when wc.sl & 7 is IPv4, from the last 16 otherwise.
 */
enum roce_l3_header {
	ROCE_L3_IPV6 = 1,
	ROCE_L3_IPV4 = 2,
};

static enum roce_l3_header arrival_l3_header(const struct ud_arrival *a)
{
	/* Between two v4-mapped addresses the datagram travelled as IPv4. */
	return !memcmp(a->sgid, v4_prefix, 12) && !memcmp(a->dgid, v4_prefix, 12) ?
		       ROCE_L3_IPV4 : ROCE_L3_IPV6;
}

/*
 * The 40 bytes a RoCE v2 device puts before a UD payload: an IPv6 header, or for IPv4 the
 * IPv4 header in the last 20 bytes, which is where libibverbs' ibv_init_ah_from_wc() looks.
 */
static void build_grh(uint8_t grh[GRH_LEN], const struct ud_arrival *a, uint32_t payload_len)
{
	const uint8_t *sgid = a->sgid, *dgid = a->dgid;

	memset(grh, 0, GRH_LEN);
	if (arrival_l3_header(a) == ROCE_L3_IPV4) {
		uint8_t *ip = grh + 20;
		uint16_t total = (uint16_t)(20 + 8 + payload_len), csum;

		ip[0] = 0x45;
		ip[1] = a->traffic_class;
		ip[2] = total >> 8;
		ip[3] = total & 0xff;
		ip[8] = a->hop_limit;
		ip[9] = IPPROTO_UDP;
		memcpy(ip + 12, sgid + 12, 4);
		memcpy(ip + 16, dgid + 12, 4);
		csum = ipv4_header_checksum(ip);
		ip[10] = csum >> 8;
		ip[11] = csum & 0xff;
		return;
	}
	grh[0] = 0x60 | a->traffic_class >> 4;	/* version 6, then the traffic class */
	grh[1] = (uint8_t)(a->traffic_class << 4);
	grh[4] = (uint8_t)((payload_len + 8) >> 8);
	grh[5] = (uint8_t)(payload_len + 8);
	grh[6] = IPPROTO_UDP;
	grh[7] = a->hop_limit;
	memcpy(grh + 8, sgid, 16);
	memcpy(grh + 24, dgid, 16);
}

static void ud_receive(struct emu_qp *qp, const struct ud_datagram *d)
{
	const struct wire_packet *pkt = &d->pkt;
	const struct ud_arrival *arrival = &d->arrival;
	struct ibv_sge sge[EMU_MAX_SGE];
	struct recv_wqe rwqe = { .sge = sge };
	struct rx_sink sink = { .kind = SINK_LOCAL, .needed = IBV_ACCESS_LOCAL_WRITE };
	uint8_t grh[GRH_LEN];
	uint32_t qkey;
	struct ibv_wc wc = { 0 };

	if (qp->state != IBV_QPS_RTR && qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD &&
	    qp->state != IBV_QPS_SQE)
		return;
	/* A controlled Q_Key in the packet is only honoured as the QP's own (IBTA 10.2.5). */
	qkey = qp->attr.qkey;
	if (pkt->qkey != qkey) {
		qp_counter_add(&qp->counters, EMU_CNT_QKEY_VIOLATIONS, 1);
		return;
	}
	if (qp_take_recv(qp, 0, &rwqe) != RECV_TAKEN) {
		qp_counter_add(&qp->counters, EMU_CNT_OUT_OF_BUFFER, 1);
		return;
	}
	if (GRH_LEN + pkt->payload_len > sge_total_length(rwqe.sge, rwqe.num_sge)) {
		qp_complete_recv(qp, &rwqe, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, 0, 0, false);
		qp_to_error(qp);
		return;
	}
	build_grh(grh, arrival, (uint32_t)pkt->payload_len);
	sink.mem = qp->engine->mem;
	sink.pd_handle = rwqe.pd_handle;
	sink.sge = rwqe.sge;
	sink.num_sge = rwqe.num_sge;
	sink_place(&sink, grh, GRH_LEN);
	sink_place(&sink, d->payload, pkt->payload_len);
	if (sink.failure != MEM_ACCESS_OK) {
		qp_complete_recv(qp, &rwqe, mem_access_local_wc_status(sink.failure), IBV_WC_RECV,
				 0, 0, 0, false);
		qp_to_error(qp);
		return;
	}
	wc.wr_id = rwqe.wr_id;
	wc.status = IBV_WC_SUCCESS;
	wc.opcode = IBV_WC_RECV;
	wc.byte_len = (uint32_t)(GRH_LEN + pkt->payload_len);
	wc.qp_num = qp->qpn;
	wc.src_qp = pkt->src_qp;
	wc.wc_flags = IBV_WC_GRH;
	wc.sl = arrival_l3_header(arrival);
	if (pkt->opcode == OP_UD_SEND_ONLY_IMM) {
		wc.wc_flags |= IBV_WC_WITH_IMM;
		wc.imm_data = pkt->imm;
	}
	qp_counter_add(&qp->counters, EMU_CNT_RDMA_RECVS, 1);
	if (!emu_cq_push(qp->recv_cq, &wc, pkt->solicited) && qp->state != IBV_QPS_ERR)
		qp_fatal(qp, IBV_EVENT_QP_FATAL);
}

static uint8_t cmsg_byte(const struct cmsghdr *c)
{
	int v = 0;

	/* IP_TOS arrives as one byte; the others as an int. */
	if (c->cmsg_len == CMSG_LEN(1))
		return *CMSG_DATA(c);
	memcpy(&v, CMSG_DATA(c), sizeof(v));
	return (uint8_t)v;
}

/*
 * From a datagram's control messages: the address it was sent to, its traffic class and
 * hop limit, and the count of datagrams the socket has dropped for want of buffer space
 * (a running total).
 */
static void read_control(struct msghdr *msg, struct ud_arrival *a, uint32_t *overflows)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
			uint32_t total;

			memcpy(&total, CMSG_DATA(c), sizeof(total));
			counter_add(EMU_CNT_RCV_BUFFER_DROPS, total - *overflows);
			*overflows = total;
		} else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
			memcpy(a->dgid, &((struct in6_pktinfo *)CMSG_DATA(c))->ipi6_addr, 16);
		} else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
			memcpy(a->dgid, v4_prefix, 12);
			memcpy(a->dgid + 12, &((struct in_pktinfo *)CMSG_DATA(c))->ipi_addr, 4);
		} else if ((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) ||
			   (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS)) {
			a->traffic_class = cmsg_byte(c);
		} else if ((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL) ||
			   (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_HOPLIMIT)) {
			a->hop_limit = cmsg_byte(c);
		}
	}
}

/* The one receive buffer: datagrams are read on the engine thread only. */
static uint8_t rx_buf[UD_MAX_DATAGRAM + 1];

int ud_read_datagram(int fd, uint32_t *overflows, uint16_t local_port, struct ud_datagram *d)
{
	struct sockaddr_in6 from;
	struct iovec iov = { .iov_base = rx_buf, .iov_len = sizeof(rx_buf) };
	char control[256];
	struct msghdr msg = { .msg_name = &from, .msg_namelen = sizeof(from),
			      .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = control, .msg_controllen = sizeof(control) };
	uint32_t frame_len;
	ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);

	if (n < 0)
		return -1;
	memset(&d->arrival, 0, sizeof(d->arrival));
	d->arrival.hop_limit = 64;
	read_control(&msg, &d->arrival, overflows);
	memcpy(d->arrival.sgid, &from.sin6_addr, 16);
	d->src_port = ntohs(from.sin6_port);
	/* A datagram is one whole frame, or it is dropped, as a bad packet is. */
	if (n < 5 || (size_t)n > UD_MAX_DATAGRAM) {
		counter_add(EMU_CNT_RCV_ERRORS, 1);
		return 0;
	}
	memcpy(&frame_len, rx_buf, 4);
	frame_len = ntohl(frame_len);
	if (frame_len != (uint32_t)n - 4 || !(wire_opcodes[rx_buf[4]].flags & OPF_DATAGRAM) ||
	    wire_parse(rx_buf + 4, frame_len, &d->pkt)) {
		counter_add(EMU_CNT_RCV_ERRORS, 1);
		return 0;
	}
	if (pcap_active)
		pcap_datagram(PCAP_IN, d->arrival.sgid, d->src_port, d->arrival.dgid, local_port,
			      &(struct iovec){ rx_buf, (size_t)n }, 1);
	d->payload = rx_buf + 4 + wire_opcodes[d->pkt.opcode].hdr_len;
	return 1;
}

void ud_deliver(struct emu_qp *qp, const struct ud_datagram *d)
{
	pthread_mutex_lock(&qp->lock);
	ud_receive(qp, d);
	pthread_mutex_unlock(&qp->lock);
}

void ud_on_datagram(struct io_watch *w, uint32_t revents)
{
	struct listen_socket *sock = container_of(w, struct listen_socket, udp_watch);

	(void)revents;
	for (int i = 0; i < 64; i++) {
		struct ud_datagram d;
		struct emu_qp *qp;
		int got = ud_read_datagram(w->fd, &sock->udp_overflows, sock->owner->port, &d);

		if (got < 0)
			return;
		if (!got)
			continue;
		/* EMU_MULTICAST_QPN names no QP: multicast arrives on a group's socket only. */
		qp = engine_find_qp(sock->owner->engine, d.pkt.qpn);
		counter_packet(QP_COUNTERS(qp && qp->type == IBV_QPT_UD ? qp : NULL), EMU_CNT_RCV_DATA,
			       wire_opcodes[d.pkt.opcode].hdr_len, d.pkt.payload_len);
		if (!qp || qp->type != IBV_QPT_UD)
			continue;
		ud_deliver(qp, &d);
	}
}

/*
 * Control messages of a datagram: the source address (the AV's source GID), so that the
 * receiver's GRH names the right sender, and the AV's traffic class and hop limit, which a
 * RoCE v2 device puts in the IP header. The whole buffer is zeroed, padding included: the
 * kernel is handed every byte.
 */
union ud_control {
	struct cmsghdr align;
	char buf[CMSG_SPACE(sizeof(struct in6_pktinfo)) + 2 * CMSG_SPACE(sizeof(int))];
};

static struct cmsghdr *add_cmsg(struct msghdr *msg, struct cmsghdr *prev, int level, int type,
				size_t len)
{
	struct cmsghdr *c = prev ? CMSG_NXTHDR(msg, prev) : CMSG_FIRSTHDR(msg);

	c->cmsg_level = level;
	c->cmsg_type = type;
	c->cmsg_len = CMSG_LEN(len);
	return c;
}

static void add_int_cmsg(struct msghdr *msg, struct cmsghdr **at, int level, int type, int v)
{
	*at = add_cmsg(msg, *at, level, type, sizeof(v));
	memcpy(CMSG_DATA(*at), &v, sizeof(v));
}

static void set_control(struct msghdr *msg, union ud_control *control, const struct emu_av *av,
			unsigned int ifindex)
{
	bool v4 = !memcmp(av->dgid, v4_prefix, 12);
	struct cmsghdr *c;

	memset(control, 0, sizeof(*control));
	msg->msg_control = control->buf;
	msg->msg_controllen = sizeof(control->buf);
	c = add_cmsg(msg, NULL, IPPROTO_IPV6, IPV6_PKTINFO, sizeof(struct in6_pktinfo));
	memcpy(&((struct in6_pktinfo *)CMSG_DATA(c))->ipi6_addr, av->sgid, 16);
	((struct in6_pktinfo *)CMSG_DATA(c))->ipi6_ifindex = ifindex;
	/* A v4-mapped destination goes out as IPv4: its header takes IP_TOS and IP_TTL. */
	add_int_cmsg(msg, &c, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_TOS : IPV6_TCLASS,
		     av->traffic_class);
	if (av->hop_limit)
		add_int_cmsg(msg, &c, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_TTL : IPV6_HOPLIMIT,
			     av->hop_limit);
	msg->msg_controllen = (size_t)((char *)c + CMSG_SPACE(sizeof(int)) - control->buf);
}

/* The payload's iovecs, each local key checked and held in refs; a completion status. */
static enum ibv_wc_status gather(struct emu_qp *qp, const struct emu_send_wr *wr,
				 struct iovec *iov, int *niov, struct mem_region **refs, int *nrefs)
{
	for (int i = 0; i < wr->num_sge; i++) {
		const struct ibv_sge *sge = &wr->sg_list[i];
		enum mem_access_result r;
		void *host;

		if (wr->send_flags & IBV_SEND_INLINE) {
			iov[*niov].iov_base = (void *)(uintptr_t)sge->addr;
			iov[(*niov)++].iov_len = sge->length;
			continue;
		}
		if (!sge->length)
			continue;
		r = mr_check_local_access(qp->engine->mem, sge->lkey, qp->pd_handle, 0, sge->addr,
					  sge->length, &refs[*nrefs], &host);
		if (r != MEM_ACCESS_OK)
			return mem_access_local_wc_status(r);
		(*nrefs)++;
		iov[*niov].iov_base = host;
		iov[(*niov)++].iov_len = sge->length;
	}
	return IBV_WC_SUCCESS;
}

/* Sends one UD work request; qp->lock held. Returns the completion status. */
static enum ibv_wc_status send_datagram(struct emu_qp *qp, const struct emu_send_wr *wr)
{
	const struct emu_av *av = wr->ud.av;
	bool mcast = emu_gid_is_multicast(av->dgid);
	struct wire_packet pkt = {
		.opcode = wr->opcode == IBV_WR_SEND_WITH_IMM ? OP_UD_SEND_ONLY_IMM : OP_UD_SEND_ONLY,
		/* To a multicast DGID the BTH names the multicast QPN, whatever the WR says (rxe). */
		.qpn = mcast ? EMU_MULTICAST_QPN : wr->ud.remote_qpn & BTH_QPN_MASK,
		.psn = qp->req.psn,
		.solicited = wr->send_flags & IBV_SEND_SOLICITED,
		.imm = wr->imm_data,
		.src_qp = qp->qpn,
	};
	uint8_t hdr[4 + WIRE_MAX_HDR];
	struct iovec iov[1 + EMU_MAX_SGE];
	struct mem_region *refs[EMU_MAX_SGE];
	struct sockaddr_in6 to = { .sin6_family = AF_INET6 };
	union ud_control control;
	struct msghdr msg = { .msg_name = &to, .msg_namelen = sizeof(to), .msg_iov = iov };
	enum ibv_wc_status status;
	uint64_t length = sge_total_length(wr->sg_list, wr->num_sge);
	int niov = 1, nrefs = 0, fd = -1;
	unsigned int ifindex = 0;

	/* A controlled Q_Key in the WR means "use the QP's own" (IBTA 10.2.5). */
	pkt.qkey = (wr->ud.remote_qkey & 0x80000000u) ? qp->attr.qkey : wr->ud.remote_qkey;
	pkt.payload_len = length;
	qp->req.psn = (qp->req.psn + 1) & BTH_PSN_MASK;
	status = gather(qp, wr, iov, &niov, refs, &nrefs);
	/* Longer than the path MTU: like rxe, the packet is not sent and the WR succeeds. */
	if (status != IBV_WC_SUCCESS)
		goto out;
	if (length > EMU_PORT_MAX_MSG_UD) {
		qp_counter_add(&qp->counters, EMU_CNT_XMIT_DISCARDS, 1);
		goto out;
	}
	iov[0].iov_base = hdr;
	iov[0].iov_len = wire_build(hdr, &pkt);
	msg.msg_iovlen = (size_t)niov;
	memcpy(&to.sin6_addr, av->dgid, 16);
	/*
	 * A group's datagrams go to the RoCE v2 port, out of the source GID's interface only
	 * (never a route's choice: the device is attached to its interfaces and no others).
	 */
	to.sin6_port = htons(mcast ? EMU_MCAST_UDP_PORT : (uint16_t)(pkt.qpn >> 8));
	fd = listener_udp_socket(qp->listener, av->sgid, &ifindex);
	set_control(&msg, &control, av, mcast ? ifindex : 0);
	if (sendmsg(fd, &msg, MSG_DONTWAIT) < 0) {
		qp_counter_add(&qp->counters, EMU_CNT_XMIT_DISCARDS, 1);	/* lost, as UD may */
		goto out;
	}
	counter_packet(&qp->counters, EMU_CNT_XMIT_DATA, iov[0].iov_len - 4, length);
	if (mcast)
		qp_counter_add(&qp->counters, EMU_CNT_MCAST_XMIT_PACKETS, 1);
	if (pcap_active)
		pcap_datagram(PCAP_OUT, av->sgid, (uint16_t)(qp->qpn >> 8), av->dgid,
			      ntohs(to.sin6_port), iov, niov);
out:
	while (nrefs)
		mr_put(refs[--nrefs]);
	return status;
}

static bool ud_wr_valid(const struct emu_qp *qp, const struct emu_send_wr *w)
{
	bool inline_wr = w->send_flags & IBV_SEND_INLINE;

	return qp->state >= IBV_QPS_RTS &&
	       (w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM) && w->ud.av &&
	       w->num_sge >= 0 &&
	       (inline_wr || (uint32_t)w->num_sge <= qp->cap.max_send_sge) &&
	       (!inline_wr || sge_total_length(w->sg_list, w->num_sge) <= qp->cap.max_inline_data);
}

int ud_post_send(struct emu_qp *qp, const struct emu_send_wr *wr, unsigned int n,
		 unsigned int *bad)
{
	for (unsigned int i = 0; i < n; i++)
		if (!ud_wr_valid(qp, &wr[i])) {
			*bad = i;
			return EINVAL;
		}
	for (unsigned int i = 0; i < n; i++) {
		struct send_wqe wqe = { .wr = wr[i], .signaled = qp->sq_sig_all ||
							       (wr[i].send_flags & IBV_SEND_SIGNALED) };
		enum ibv_wc_status st = IBV_WC_WR_FLUSH_ERR;

		wqe.length = sge_total_length(wr[i].sg_list, wr[i].num_sge);
		if (qp->state != IBV_QPS_ERR)
			st = send_datagram(qp, &wr[i]);
		qp_complete_send(qp, &wqe, st);
		if (st != IBV_WC_SUCCESS && qp->state != IBV_QPS_ERR)
			qp_to_error(qp);
	}
	return 0;
}
