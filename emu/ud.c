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

#define GRH_LEN 40
#define UD_MAX_DATAGRAM (4 + WIRE_MAX_HDR + EMU_PORT_MAX_MSG_UD)
#define UD_SOCKET_BUFFER (16 << 20)

static const uint8_t v4_prefix[12] = { [10] = 0xff, [11] = 0xff };

int ud_socket_open(uint16_t port)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT,
				   .sin6_port = htons(port) };
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int off = 0, on = 1, rcvbuf = UD_SOCKET_BUFFER;

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
	/* The receiver needs the address a datagram was sent to: it is the GRH's DGID. */
	setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof(on));
	setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof(on));
	/*
	 * A sender's datagrams are not flow controlled, as on a lossless RoCE fabric they need
	 * not be; what stands in for the fabric's buffering is this socket's. Ask for a deep
	 * one (beyond rmem_max where we may), so that a receiving engine that is briefly off
	 * the CPU loses nothing; drops it still sees are counted (SO_RXQ_OVFL).
	 */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &on, sizeof(on));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -1;
	}
	return fd;
}

static uint16_t ipv4_checksum(const uint8_t *hdr)
{
	uint32_t sum = 0;

	for (int i = 0; i < 20; i += 2)
		sum += (uint32_t)hdr[i] << 8 | hdr[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/*
 * The 40 bytes a RoCE v2 device puts before a UD payload: an IPv6 header, or for IPv4 the
 * IPv4 header in the last 20 bytes, which is where libibverbs' ibv_init_ah_from_wc() looks.
 */
static void build_grh(uint8_t grh[GRH_LEN], const uint8_t sgid[16], const uint8_t dgid[16],
		      uint32_t payload_len)
{
	memset(grh, 0, GRH_LEN);
	if (!memcmp(sgid, v4_prefix, 12) && !memcmp(dgid, v4_prefix, 12)) {
		uint8_t *ip = grh + 20;
		uint16_t total = (uint16_t)(20 + 8 + payload_len), csum;

		ip[0] = 0x45;
		ip[2] = total >> 8;
		ip[3] = total & 0xff;
		ip[8] = 64;	/* TTL */
		ip[9] = IPPROTO_UDP;
		memcpy(ip + 12, sgid + 12, 4);
		memcpy(ip + 16, dgid + 12, 4);
		csum = ipv4_checksum(ip);
		ip[10] = csum >> 8;
		ip[11] = csum & 0xff;
		return;
	}
	grh[0] = 0x60;	/* version 6 */
	grh[4] = (uint8_t)((payload_len + 8) >> 8);
	grh[5] = (uint8_t)(payload_len + 8);
	grh[6] = IPPROTO_UDP;
	grh[7] = 64;	/* hop limit */
	memcpy(grh + 8, sgid, 16);
	memcpy(grh + 24, dgid, 16);
}

static void ud_receive(struct emu_qp *qp, const struct wire_packet *pkt, const uint8_t *payload,
		       const uint8_t sgid[16], const uint8_t dgid[16])
{
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
		qp_error(qp, (enum ibv_event_type)-1);
		return;
	}
	build_grh(grh, sgid, dgid, (uint32_t)pkt->payload_len);
	sink.pd_handle = rwqe.pd_handle;
	sink.sge = rwqe.sge;
	sink.num_sge = rwqe.num_sge;
	sink_place(&sink, grh, GRH_LEN);
	sink_place(&sink, payload, pkt->payload_len);
	if (sink.failure != MEM_ACCESS_OK) {
		qp_complete_recv(qp, &rwqe, mem_access_local_wc_status(sink.failure), IBV_WC_RECV,
				 0, 0, 0, false);
		qp_error(qp, (enum ibv_event_type)-1);
		return;
	}
	wc.wr_id = rwqe.wr_id;
	wc.status = IBV_WC_SUCCESS;
	wc.opcode = IBV_WC_RECV;
	wc.byte_len = (uint32_t)(GRH_LEN + pkt->payload_len);
	wc.qp_num = qp->qpn;
	wc.src_qp = pkt->src_qp;
	wc.wc_flags = IBV_WC_GRH;
	if (pkt->opcode == OP_UD_SEND_ONLY_IMM) {
		wc.wc_flags |= IBV_WC_WITH_IMM;
		wc.imm_data = pkt->imm;
	}
	qp_counter_add(&qp->counters, EMU_CNT_RDMA_RECVS, 1);
	if (!emu_cq_push(qp->recv_cq, &wc, pkt->solicited) && qp->state != IBV_QPS_ERR)
		qp_error(qp, IBV_EVENT_QP_FATAL);
}

/*
 * From a datagram's control messages: the address it was sent to, and the count of
 * datagrams the socket has dropped for want of buffer space (a running total).
 */
static void read_control(struct msghdr *msg, uint8_t dgid[16], struct emu_listener *l)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
			uint32_t total;

			memcpy(&total, CMSG_DATA(c), sizeof(total));
			counter_add(EMU_CNT_RCV_BUFFER_DROPS, total - l->udp_overflows);
			l->udp_overflows = total;
			continue;
		}
		if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
			memcpy(dgid, &((struct in6_pktinfo *)CMSG_DATA(c))->ipi6_addr, 16);
			continue;
		}
		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
			memcpy(dgid, v4_prefix, 12);
			memcpy(dgid + 12, &((struct in_pktinfo *)CMSG_DATA(c))->ipi_addr, 4);
			continue;
		}
	}
}

void ud_on_datagram(struct io_watch *w, uint32_t revents)
{
	struct emu_listener *l = container_of(w, struct emu_listener, udp_watch);
	static uint8_t buf[UD_MAX_DATAGRAM + 1];
	char control[128];

	(void)revents;
	for (int i = 0; i < 64; i++) {
		struct sockaddr_in6 from;
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr msg = { .msg_name = &from, .msg_namelen = sizeof(from),
				      .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = control, .msg_controllen = sizeof(control) };
		uint8_t dgid[16] = { 0 };
		struct wire_packet pkt;
		struct emu_qp *qp;
		uint32_t frame_len;
		ssize_t n = recvmsg(w->fd, &msg, MSG_DONTWAIT);

		if (n < 0)
			return;
		read_control(&msg, dgid, l);
		/* A datagram is one whole frame, or it is dropped, as a bad packet is. */
		if (n < 5 || (size_t)n > UD_MAX_DATAGRAM) {
			counter_add(EMU_CNT_RCV_ERRORS, 1);
			continue;
		}
		memcpy(&frame_len, buf, 4);
		frame_len = ntohl(frame_len);
		if (frame_len != (uint32_t)n - 4 || !(wire_opcodes[buf[4]].flags & OPF_DATAGRAM) ||
		    wire_parse(buf + 4, frame_len, &pkt)) {
			counter_add(EMU_CNT_RCV_ERRORS, 1);
			continue;
		}
		qp = engine_find_qp(the_engine_of_watch(w), pkt.qpn);
		counter_packet(QP_COUNTERS(qp && qp->type == IBV_QPT_UD ? qp : NULL), EMU_CNT_RCV_DATA,
			       wire_opcodes[pkt.opcode].hdr_len, pkt.payload_len);
		if (!qp || qp->type != IBV_QPT_UD)
			continue;
		pthread_mutex_lock(&qp->lock);
		ud_receive(qp, &pkt, buf + 4 + wire_opcodes[pkt.opcode].hdr_len,
			   (const uint8_t *)&from.sin6_addr, dgid);
		pthread_mutex_unlock(&qp->lock);
	}
}

/* Sends one UD work request; qp->lock held. Returns the completion status. */
static enum ibv_wc_status send_datagram(struct emu_qp *qp, const struct ibv_send_wr *wr)
{
	const struct emu_ah *ah = (const struct emu_ah *)wr->wr.ud.ah;
	struct wire_packet pkt = {
		.opcode = wr->opcode == IBV_WR_SEND_WITH_IMM ? OP_UD_SEND_ONLY_IMM : OP_UD_SEND_ONLY,
		.qpn = wr->wr.ud.remote_qpn & BTH_QPN_MASK,
		.psn = qp->next_psn,
		.solicited = wr->send_flags & IBV_SEND_SOLICITED,
		.imm = wr->imm_data,
		.src_qp = qp->qpn,
	};
	uint8_t hdr[4 + WIRE_MAX_HDR];
	struct iovec iov[1 + EMU_MAX_SGE];
	struct mem_region *refs[EMU_MAX_SGE];
	struct sockaddr_in6 to = { .sin6_family = AF_INET6 };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
	} control;
	struct msghdr msg = { .msg_name = &to, .msg_namelen = sizeof(to), .msg_iov = iov,
			      .msg_control = control.buf, .msg_controllen = sizeof(control.buf) };
	struct cmsghdr *cmsg;
	enum ibv_wc_status status = IBV_WC_SUCCESS;
	uint64_t length = sge_total_length(wr->sg_list, wr->num_sge);
	int niov = 1, nrefs = 0;

	/* A controlled Q_Key in the WR means "use the QP's own" (IBTA 10.2.5). */
	pkt.qkey = (wr->wr.ud.remote_qkey & 0x80000000u) ? qp->attr.qkey : wr->wr.ud.remote_qkey;
	pkt.payload_len = length;
	qp->next_psn = (qp->next_psn + 1) & BTH_PSN_MASK;
	if (wr->send_flags & IBV_SEND_INLINE) {
		for (int i = 0; i < wr->num_sge; i++) {
			iov[niov].iov_base = (void *)(uintptr_t)wr->sg_list[i].addr;
			iov[niov++].iov_len = wr->sg_list[i].length;
		}
	} else {
		for (int i = 0; i < wr->num_sge; i++) {
			const struct ibv_sge *sge = &wr->sg_list[i];
			enum mem_access_result r;
			void *host;

			if (!sge->length)
				continue;
			r = mr_check_local_access(the_mem_table(), sge->lkey, qp->pd_handle, 0,
						  sge->addr, sge->length, &refs[nrefs], &host);
			if (r != MEM_ACCESS_OK) {
				status = mem_access_local_wc_status(r);
				goto out;
			}
			nrefs++;
			iov[niov].iov_base = host;
			iov[niov++].iov_len = sge->length;
		}
	}
	/* Longer than the path MTU: like rxe, the packet is not sent and the WR succeeds. */
	if (length > EMU_PORT_MAX_MSG_UD) {
		qp_counter_add(&qp->counters, EMU_CNT_XMIT_DISCARDS, 1);
		goto out;
	}
	iov[0].iov_base = hdr;
	iov[0].iov_len = wire_build(hdr, &pkt);
	msg.msg_iovlen = (size_t)niov;
	memcpy(&to.sin6_addr, ah->dgid, 16);
	to.sin6_port = htons((uint16_t)(pkt.qpn >> 8));
	/*
	 * From the AH's source GID, so the receiver's GRH names the right sender. The whole
	 * control buffer is zeroed, padding included: the kernel is handed every byte.
	 */
	memset(&control, 0, sizeof(control));
	cmsg = CMSG_FIRSTHDR(&msg);
	cmsg->cmsg_level = IPPROTO_IPV6;
	cmsg->cmsg_type = IPV6_PKTINFO;
	cmsg->cmsg_len = CMSG_LEN(sizeof(struct in6_pktinfo));
	memcpy(&((struct in6_pktinfo *)CMSG_DATA(cmsg))->ipi6_addr, ah->sgid, 16);
	if (sendmsg(qp->udp_fd, &msg, MSG_DONTWAIT) < 0)	/* lost, as a datagram may be */
		qp_counter_add(&qp->counters, EMU_CNT_XMIT_DISCARDS, 1);
	else
		counter_packet(&qp->counters, EMU_CNT_XMIT_DATA, iov[0].iov_len - 4, length);
out:
	while (nrefs)
		mr_put(refs[--nrefs]);
	return status;
}

int ud_post_send(struct emu_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	for (struct ibv_send_wr *w = wr; w; w = w->next) {
		bool inline_wr = w->send_flags & IBV_SEND_INLINE;

		if (qp->state < IBV_QPS_RTS || (w->opcode != IBV_WR_SEND &&
						w->opcode != IBV_WR_SEND_WITH_IMM) ||
		    !w->wr.ud.ah || w->num_sge < 0 ||
		    (!inline_wr && (uint32_t)w->num_sge > qp->cap.max_send_sge) ||
		    (inline_wr && sge_total_length(w->sg_list, w->num_sge) >
				  qp->cap.max_inline_data)) {
			*bad_wr = w;
			return EINVAL;
		}
	}
	for (; wr; wr = wr->next) {
		struct send_wqe wqe = { .wr = *wr, .signaled = qp->sq_sig_all ||
							      (wr->send_flags & IBV_SEND_SIGNALED) };
		enum ibv_wc_status st = IBV_WC_WR_FLUSH_ERR;

		wqe.length = sge_total_length(wr->sg_list, wr->num_sge);
		if (qp->state != IBV_QPS_ERR)
			st = send_datagram(qp, wr);
		qp_complete_send(qp, &wqe, st);
		if (st != IBV_WC_SUCCESS && qp->state != IBV_QPS_ERR)
			qp_error(qp, (enum ibv_event_type)-1);
	}
	return 0;
}
