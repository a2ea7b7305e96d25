/* SPDX-License-Identifier: MIT */
/*
 * rdma_cm tests (test_cm, test_cm_hostile, test_cm_stress): both sides in one process, on
 * asynchronous ids and event channels, through the drop-in librdmacm under `softrdma run`.
 * Failures are cmocka assertions.
 */
#ifndef SOFTRDMA_CM_FIXTURE_H
#define SOFTRDMA_CM_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

struct side {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
};

struct sockaddr_in loopback(int port);
/* A port nobody listens on: the kernel's pick, released at once. */
int closed_port(void);
/* The next event on ch within 5 s, which must be `want`; the caller acks it. */
struct rdma_cm_event *next_event(struct rdma_event_channel *ch, enum rdma_cm_event_type want);
void expect_event(struct rdma_event_channel *ch, enum rdma_cm_event_type want);
/* Nothing arrives on ch for ms milliseconds. */
void expect_no_event(struct rdma_event_channel *ch, int ms);
/* A listener on 127.0.0.1 and a port the system picks; returns that port. */
int start_listener(struct side *s, int backlog);
/* A client id resolved to 127.0.0.1:port with a QP (its own default CQs). */
void start_client(struct side *c, int port);
/* The server side of one connection: the request, a QP, and accept. */
struct rdma_cm_id *accept_one(struct side *srv, const void *pdata, uint8_t len);
void stop(struct side *s);
/* A whole connection to srv's listener on port: connect, establish on both sides, one SEND
 * each way, disconnect, destroy. The legitimate pair every hostile test checks. */
void legit_connection(struct side *srv, int port);

#endif
