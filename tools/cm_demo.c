// SPDX-License-Identifier: MIT
/*
 * softrdma-cm-demo: the contract of rdma_reg_write(3), shown with two processes.
 *   softrdma-cm-demo server PORT        softrdma-cm-demo client HOST PORT
 * The server registers one buffer with rdma_reg_write() (the peer may write it) and one with
 * rdma_reg_msgs() (it may not), and hands out both addresses and keys in the private data
 * of its accept. The client RDMA-writes into the first, which the server checks byte for
 * byte, then into the second, which the device must refuse.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#define BUF_SIZE 4096

struct offer {			/* the server's accept private data, as the client reads it */
	uint64_t writable_addr;
	uint32_t writable_rkey;
	uint32_t pad;
	uint64_t protected_addr;
	uint32_t protected_rkey;
};

static const char *who = "demo";

#define say(...) do { printf("%-7s ", who); printf(__VA_ARGS__); putchar('\n'); fflush(stdout); } while (0)

static void die(const char *what)
{
	fprintf(stderr, "%s: %s failed: %s\n", who, what, strerror(errno));
	exit(1);
}

static struct ibv_qp_init_attr qp_attr(void)
{
	struct ibv_qp_init_attr a = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
	};

	return a;
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 7 + 1);
}

static int run_server(const char *port)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP };
	struct ibv_qp_init_attr attr = qp_attr();
	static uint8_t writable[BUF_SIZE], protected_buf[BUF_SIZE], msg[16];
	struct rdma_cm_id *listen_id, *id;
	struct ibv_mr *wmr, *pmr, *msg_mr;
	struct rdma_conn_param param = { 0 };
	struct rdma_addrinfo *res;
	struct ibv_wc wc;
	struct offer offer;
	size_t bad = 0;

	who = "server:";
	if (rdma_getaddrinfo("127.0.0.1", port, &hints, &res))
		die("rdma_getaddrinfo");
	if (rdma_create_ep(&listen_id, res, NULL, &attr) || rdma_listen(listen_id, 1))
		die("rdma_create_ep/rdma_listen");
	rdma_freeaddrinfo(res);
	say("listening on 127.0.0.1 port %s (rdma_cm, device %s)", port, "softrdma0");
	if (rdma_get_request(listen_id, &id))
		die("rdma_get_request");

	wmr = rdma_reg_write(id, writable, sizeof(writable));
	pmr = rdma_reg_msgs(id, protected_buf, sizeof(protected_buf));
	msg_mr = rdma_reg_msgs(id, msg, sizeof(msg));
	if (!wmr || !pmr || !msg_mr)
		die("memory registration");
	say("registered buffer A with rdma_reg_write: the peer may RDMA-write it (rkey 0x%08x)",
	    wmr->rkey);
	say("registered buffer B with rdma_reg_msgs:  local use only, no remote access (rkey 0x%08x)",
	    pmr->rkey);
	if (rdma_post_recv(id, NULL, msg, sizeof(msg), msg_mr))
		die("rdma_post_recv");
	offer = (struct offer){ (uintptr_t)writable, wmr->rkey, 0, (uintptr_t)protected_buf,
				pmr->rkey };
	param.private_data = &offer;
	param.private_data_len = sizeof(offer);
	param.responder_resources = 1;
	if (rdma_accept(id, &param))
		die("rdma_accept");
	say("accepted a connection; sent both addresses and rkeys in the accept's private data");

	if (rdma_get_recv_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
		die("waiting for the client's message");
	for (size_t i = 0; i < BUF_SIZE; i++)
		bad += writable[i] != pattern(i);
	if (bad) {
		say("FAILED: %zu bytes of buffer A differ from what the client wrote", bad);
		return 1;
	}
	say("buffer A holds exactly the %d bytes the client wrote: the write landed, no copy, "
	    "no action of mine", BUF_SIZE);

	/* The client's next write targets B: the device refuses it and our QP goes to error,
	 * which flushes this receive. */
	if (rdma_post_recv(id, NULL, msg, sizeof(msg), msg_mr))
		die("rdma_post_recv");
	if (rdma_get_recv_comp(id, &wc) <= 0)
		die("waiting for the connection to fail");
	for (size_t i = 0; i < BUF_SIZE; i++)
		bad += protected_buf[i] != 0;
	if (bad) {
		say("FAILED: buffer B was modified (%zu bytes)", bad);
		return 1;
	}
	say("buffer B is untouched: every byte still 0 (my QP went to error: %s)",
	    ibv_wc_status_str(wc.status));
	rdma_disconnect(id);
	rdma_dereg_mr(wmr);
	rdma_dereg_mr(pmr);
	rdma_dereg_mr(msg_mr);
	rdma_destroy_ep(id);
	rdma_destroy_ep(listen_id);
	return 0;
}

static int run_client(const char *host, const char *port)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP };
	struct ibv_qp_init_attr attr = qp_attr();
	static uint8_t src[BUF_SIZE], msg[16] = "done";
	struct rdma_conn_param param = { .initiator_depth = 1, .retry_count = 7,
					 .rnr_retry_count = 7 };
	struct ibv_mr *src_mr, *msg_mr;
	struct rdma_addrinfo *res;
	struct rdma_cm_id *id;
	struct offer offer;
	struct ibv_wc wc;

	who = "client:";
	for (size_t i = 0; i < BUF_SIZE; i++)
		src[i] = pattern(i);
	if (rdma_getaddrinfo(host, port, &hints, &res))
		die("rdma_getaddrinfo");
	if (rdma_create_ep(&id, res, NULL, &attr))
		die("rdma_create_ep");
	rdma_freeaddrinfo(res);
	src_mr = rdma_reg_msgs(id, src, sizeof(src));
	msg_mr = rdma_reg_msgs(id, msg, sizeof(msg));
	if (!src_mr || !msg_mr)
		die("rdma_reg_msgs");
	if (rdma_connect(id, &param))
		die("rdma_connect");
	memcpy(&offer, id->event->param.conn.private_data, sizeof(offer));
	say("connected to %s:%s; the server offers A at 0x%" PRIx64 " (rkey 0x%08x) and B at "
	    "0x%" PRIx64 " (rkey 0x%08x)", host, port, offer.writable_addr, offer.writable_rkey,
	    offer.protected_addr, offer.protected_rkey);

	if (rdma_post_write(id, NULL, src, sizeof(src), src_mr, IBV_SEND_SIGNALED,
			    offer.writable_addr, offer.writable_rkey))
		die("rdma_post_write");
	if (rdma_get_send_comp(id, &wc) <= 0)
		die("rdma_get_send_comp");
	say("rdma_post_write of %d bytes into A: %s", BUF_SIZE, ibv_wc_status_str(wc.status));
	if (wc.status != IBV_WC_SUCCESS)
		return 1;
	if (rdma_post_send(id, NULL, msg, sizeof(msg), msg_mr, IBV_SEND_SIGNALED) ||
	    rdma_get_send_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
		die("telling the server");

	if (rdma_post_write(id, NULL, src, sizeof(src), src_mr, IBV_SEND_SIGNALED,
			    offer.protected_addr, offer.protected_rkey))
		die("rdma_post_write");
	if (rdma_get_send_comp(id, &wc) <= 0)
		die("rdma_get_send_comp");
	say("rdma_post_write into B (registered without remote write): %s (%s)",
	    wc.status == IBV_WC_REM_ACCESS_ERR ? "IBV_WC_REM_ACCESS_ERR" : "unexpected",
	    ibv_wc_status_str(wc.status));
	if (wc.status != IBV_WC_REM_ACCESS_ERR)
		return 1;
	say("refused by the target's memory registration, as an RDMA NIC refuses it");
	rdma_disconnect(id);
	rdma_dereg_mr(src_mr);
	rdma_dereg_mr(msg_mr);
	rdma_destroy_ep(id);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server"))
		return run_server(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "client"))
		return run_client(argv[2], argv[3]);
	fprintf(stderr, "usage: softrdma-cm-demo server PORT | client HOST PORT\n");
	return 2;
}
