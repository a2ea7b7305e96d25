// SPDX-License-Identifier: MIT
/*
 * The soft device through the system's libibverbs, as any application sees it.
 * Run under `softrdma run` (ctest does).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <cmocka.h>
#include <infiniband/verbs.h>

struct fixture {
	struct ibv_device **list;
	struct ibv_context *ctx;
};

static int open_softrdma(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	int n;

	assert_non_null(f);
	f->list = ibv_get_device_list(&n);
	assert_non_null(f->list);
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(f->list[i]), "softrdma0"))
			f->ctx = ibv_open_device(f->list[i]);
	assert_non_null(f->ctx);
	*state = f;
	return 0;
}

static int close_softrdma(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(ibv_close_device(f->ctx), 0);
	ibv_free_device_list(f->list);
	free(f);
	return 0;
}

static void test_query_device_reports_engine_limits(void **state)
{
	struct fixture *f = *state;
	struct ibv_device_attr attr;

	assert_int_equal(ibv_query_device(f->ctx, &attr), 0);
	assert_int_equal(attr.phys_port_cnt, 1);
	assert_true(attr.max_qp > 0 && attr.max_qp_wr > 0 && attr.max_cqe > 0);
	assert_true(attr.max_sge >= 1 && attr.max_mr > 0 && attr.max_pd > 0);
	assert_int_equal(attr.node_guid, ibv_get_device_guid(f->ctx->device));
	assert_true(attr.node_guid != 0);
}

static void test_query_device_ex_honours_attr_size(void **state)
{
	struct fixture *f = *state;
	struct verbs_context *vctx = verbs_get_ctx(f->ctx);
	unsigned char buf[sizeof(struct ibv_device_attr_ex) + 64];
	size_t legacy = sizeof(struct ibv_device_attr);

	/* An application built against older headers passes a smaller struct. */
	memset(buf, 0xa5, sizeof(buf));
	assert_int_equal(vctx->query_device_ex(f->ctx, NULL, (void *)buf, legacy), 0);
	for (size_t i = legacy; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0xa5);
	/* A newer one passes a larger struct: the tail it knows and we do not is zeroed. */
	assert_int_equal(vctx->query_device_ex(f->ctx, NULL, (void *)buf, sizeof(buf)), 0);
	for (size_t i = sizeof(struct ibv_device_attr_ex); i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0);
	assert_int_equal(((struct ibv_device_attr_ex *)buf)->phys_port_cnt_ex, 1);
	/* Too small to hold even the legacy attributes. */
	assert_int_equal(vctx->query_device_ex(f->ctx, NULL, (void *)buf, legacy - 1), EINVAL);
}

static void test_query_port_is_active_roce(void **state)
{
	struct fixture *f = *state;
	struct ibv_port_attr port;

	assert_int_equal(ibv_query_port(f->ctx, 1, &port), 0);
	assert_int_equal(port.state, IBV_PORT_ACTIVE);
	assert_int_equal(port.link_layer, IBV_LINK_LAYER_ETHERNET);
	assert_int_equal(port.active_mtu, IBV_MTU_4096);
	assert_true(port.gid_tbl_len >= 1);
	assert_int_equal(port.pkey_tbl_len, 1);
	assert_int_not_equal(ibv_query_port(f->ctx, 2, &port), 0);
}

static void test_gid0_is_ipv4_loopback(void **state)
{
	static const uint8_t loopback[16] = { [10] = 0xff, [11] = 0xff, 127, 0, 0, 1 };
	struct fixture *f = *state;
	struct ibv_port_attr port;
	union ibv_gid gid;

	assert_int_equal(ibv_query_gid(f->ctx, 1, 0, &gid), 0);
	assert_memory_equal(gid.raw, loopback, 16);
	assert_int_equal(ibv_query_port(f->ctx, 1, &port), 0);
	/* Every entry the port announces is readable, none past it. */
	for (int i = 0; i < port.gid_tbl_len; i++)
		assert_int_equal(ibv_query_gid(f->ctx, 1, i, &gid), 0);
	assert_int_not_equal(ibv_query_gid(f->ctx, 1, port.gid_tbl_len, &gid), 0);
}

static void test_pkey0_is_default(void **state)
{
	struct fixture *f = *state;
	__be16 pkey;

	assert_int_equal(ibv_query_pkey(f->ctx, 1, 0, &pkey), 0);
	assert_int_equal(be16toh(pkey), 0xffff);
}

static void test_pd_alloc_and_free(void **state)
{
	struct fixture *f = *state;
	struct ibv_pd *a = ibv_alloc_pd(f->ctx);
	struct ibv_pd *b = ibv_alloc_pd(f->ctx);

	assert_non_null(a);
	assert_non_null(b);
	assert_ptr_equal(a->context, f->ctx);
	assert_int_not_equal(a->handle, b->handle);
	assert_int_equal(ibv_dealloc_pd(a), 0);
	assert_int_equal(ibv_dealloc_pd(b), 0);
}

static void test_reg_mr_remote_rights_need_local_write(void **state)
{
	struct fixture *f = *state;
	struct ibv_pd *pd = ibv_alloc_pd(f->ctx);
	static char buf[4096];
	struct ibv_mr *mr;

	assert_non_null(pd);
	errno = 0;
	assert_null(ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_WRITE));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_ATOMIC));
	assert_int_equal(errno, EINVAL);
	/* REMOTE_READ alone is allowed: the peer only reads. */
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_READ);
	assert_non_null(mr);
	assert_int_equal(ibv_dereg_mr(mr), 0);
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	assert_non_null(mr);
	assert_ptr_equal(mr->addr, buf);
	assert_int_equal(mr->length, sizeof(buf));
	assert_int_equal(ibv_dereg_mr(mr), 0);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
}

static void test_comp_channel_is_a_pollable_fd(void **state)
{
	struct fixture *f = *state;
	struct ibv_comp_channel *ch = ibv_create_comp_channel(f->ctx);
	struct pollfd pfd;

	assert_non_null(ch);
	assert_ptr_equal(ch->context, f->ctx);
	assert_true(fcntl(ch->fd, F_GETFD) >= 0);
	pfd.fd = ch->fd;
	pfd.events = POLLIN;
	/* Nothing completed yet: not readable, and poll must not fail. */
	assert_int_equal(poll(&pfd, 1, 0), 0);
	/* Applications switch the fd to non-blocking mode, as ibv_get_cq_event(3) suggests. */
	assert_int_equal(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK), 0);
	assert_int_equal(ibv_destroy_comp_channel(ch), 0);
}

static void test_async_fd_is_open_and_quiet(void **state)
{
	struct fixture *f = *state;
	struct pollfd pfd = { .fd = f->ctx->async_fd, .events = POLLIN };

	assert_true(f->ctx->async_fd >= 0);
	assert_int_equal(poll(&pfd, 1, 0), 0);
}

/*
 * The last close stops the engine. The thread that closed the device then blocks in
 * epoll_wait for 300 ms undisturbed: no EINTR from the engine's io_uring going away
 * (emu/io_uring.c; libfabric opens and closes the device, then blocks).
 */
static void test_close_leaves_the_next_blocking_call_alone(void **state)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ep = epoll_create1(EPOLL_CLOEXEC), fds[2], n;
	void *f;

	(void)state;
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, fds[0], &ev), 0);
	for (int round = 0; round < 3; round++) {
		open_softrdma(&f);
		close_softrdma(&f);
		n = epoll_wait(ep, &ev, 1, 300);
		if (n < 0)
			fail_msg("epoll_wait after ibv_close_device: %s", strerror(errno));
		assert_int_equal(n, 0);
	}
	close(fds[0]);
	close(fds[1]);
	close(ep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_query_device_reports_engine_limits),
		cmocka_unit_test(test_query_device_ex_honours_attr_size),
		cmocka_unit_test(test_query_port_is_active_roce),
		cmocka_unit_test(test_gid0_is_ipv4_loopback),
		cmocka_unit_test(test_pkey0_is_default),
		cmocka_unit_test(test_pd_alloc_and_free),
		cmocka_unit_test(test_reg_mr_remote_rights_need_local_write),
		cmocka_unit_test(test_comp_channel_is_a_pollable_fd),
		cmocka_unit_test(test_async_fd_is_open_and_quiet),
	};

	const struct CMUnitTest alone[] = {
		cmocka_unit_test(test_close_leaves_the_next_blocking_call_alone),
	};

	/* The second group runs with the device closed, so each open starts the engine. */
	return cmocka_run_group_tests(tests, open_softrdma, close_softrdma) |
	       cmocka_run_group_tests(alone, NULL, NULL);
}
