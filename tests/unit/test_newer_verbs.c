// SPDX-License-Identifier: MIT
/*
 * The verbs rdma-core added after 58, as the release this is built against has them
 * (docs/semantics.md, "Verbs of newer rdma-core releases"): ibv_reg_mr_ex registering a
 * range that RDMA then really reaches, its refusals, ibv_alloc_buf memory registered and
 * reached, ibv_query_port_speed agreeing with ibv_query_port, and EOPNOTSUPP for DMA handles
 * and completion counters. Built against rdma-core 58 or older it has nothing to test and
 * says so (skipped). tests/compat/matrix.sh runs it against 61, 64 and 65.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <infiniband/verbs.h>

#include "rc_fixture.h"

#define SEED 0x5a

#if SOFTRDMA_RDMA_CORE >= 59
/* A WRITE from env->a into [target, target + len), addressed as remote, lands there. */
static void expect_write_lands(struct rc_env *env, struct ibv_mr *target_mr, uint8_t *target,
			       uint64_t remote, size_t len)
{
	struct rc_buf *src = rc_alloc(env, len);
	struct ibv_mr *src_mr = rc_reg(env, env->pd, src->p, len, RC_ACCESS_ALL);

	rc_expect_write_lands(env, 1, src->p, src_mr, remote, target_mr->rkey, target,
			      (uint32_t)len, SEED, "bytes written through an ibv_reg_mr_ex MR");
}

static struct ibv_mr *reg_ex(struct ibv_pd *pd, uint64_t mask, void *addr, size_t len,
			     uint64_t iova)
{
	struct ibv_mr_init_attr attr = {
		.length = len,
		.access = RC_ACCESS_ALL,
		.comp_mask = mask,
		.addr = addr,
		.iova = iova,
	};

	return ibv_reg_mr_ex(pd, &attr);
}

static void test_reg_mr_ex_address_range(void **state)
{
	struct rc_env *env = *state;
	struct rc_buf *buf;
	struct ibv_mr *mr;

	rc_pair(env, NULL, NULL);
	buf = rc_alloc(env, env->page);
	mr = reg_ex(env->pd, IBV_REG_MR_MASK_ADDR, buf->p, env->page, 0);
	assert_non_null(mr);
	assert_ptr_equal(mr->addr, buf->p);
	assert_int_equal(mr->length, env->page);
	assert_ptr_equal(mr->pd, env->pd);
	expect_write_lands(env, mr, buf->p, (uintptr_t)buf->p, env->page);
	assert_int_equal(ibv_dereg_mr(mr), 0);
}

static void test_reg_mr_ex_own_iova(void **state)
{
	struct rc_env *env = *state;
	const uint64_t iova = 0x7f0000000000ull;	/* page aligned, as buf->p is */
	struct rc_buf *buf;
	struct ibv_mr *mr;

	rc_pair(env, NULL, NULL);
	buf = rc_alloc(env, env->page);
	mr = reg_ex(env->pd, IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_IOVA, buf->p, env->page,
		    iova);
	assert_non_null(mr);
	expect_write_lands(env, mr, buf->p, iova, env->page);
	assert_int_equal(ibv_dereg_mr(mr), 0);
}

static void expect_refused(struct ibv_mr *mr, int err, const char *what)
{
	if (mr) {
		ibv_dereg_mr(mr);
		fail_msg("%s: registered", what);
	}
	if (errno != err)
		fail_msg("%s: errno %d (%s), expected %d", what, errno, strerror(errno), err);
}

static void test_reg_mr_ex_refusals(void **state)
{
	struct rc_env *env = *state;
	struct rc_buf *buf = rc_alloc(env, env->page);

	expect_refused(reg_ex(env->pd, IBV_REG_MR_MASK_IOVA, NULL, env->page, 0), EINVAL,
		       "no address");
	expect_refused(reg_ex(env->pd, IBV_REG_MR_MASK_ADDR, buf->p, 0, 0), EINVAL,
		       "zero length, as ibv_reg_mr");
	expect_refused(reg_ex(env->pd, IBV_REG_MR_MASK_ADDR, NULL, env->page, 0), EFAULT,
		       "NULL address, as ibv_reg_mr");
	expect_refused(reg_ex(env->pd, IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_DMAH, buf->p,
			      env->page, 0), EOPNOTSUPP, "a DMA handle");
	expect_refused(reg_ex(env->pd, IBV_REG_MR_MASK_FD | IBV_REG_MR_MASK_FD_OFFSET |
			      IBV_REG_MR_MASK_IOVA, NULL, env->page, 0), EOPNOTSUPP, "a dma-buf");
}

static void test_dma_handles_not_supported(void **state)
{
	struct rc_env *env = *state;
	struct ibv_dmah_init_attr attr = { .comp_mask = IBV_DMAH_INIT_ATTR_MASK_CPU_ID };

	errno = 0;
	assert_null(ibv_alloc_dmah(env->ctx, &attr));
	assert_int_equal(errno, EOPNOTSUPP);
}
#endif

#if SOFTRDMA_RDMA_CORE >= 62
static void test_port_speed_is_the_advertised_rate(void **state)
{
	struct rc_env *env = *state;
	struct ibv_port_attr port;
	uint64_t speed = 0;

	assert_int_equal(ibv_query_port(env->ctx, 1, &port), 0);
	/* 1X EDR: one lane of 25 Gb/s, in units of 100 Mb/s. */
	assert_int_equal(port.active_width, 1);
	assert_int_equal(port.active_speed, 32);
	assert_int_equal(ibv_query_port_speed(env->ctx, 1, &speed), 0);
	assert_int_equal(speed, 250);
	assert_int_equal(ibv_query_port_speed(env->ctx, 2, &speed), EINVAL);
}
#endif

#if SOFTRDMA_RDMA_CORE >= 64
static void test_alloc_buf_registered_and_reached(void **state)
{
	struct rc_env *env = *state;
	struct ibv_buf *buf = NULL;
	struct ibv_mr *mr;
	uint8_t *p;

	rc_pair(env, NULL, NULL);
	p = ibv_alloc_buf(env->pd, 2 * env->page, &buf);
	assert_non_null(p);
	assert_non_null(buf);
	assert_int_equal((uintptr_t)p % env->page, 0);
#if SOFTRDMA_RDMA_CORE >= 65
	errno = 0;
	assert_int_equal(ibv_export_buf_dmabuf_fd(buf), -1);	/* plain memory, no dma-buf */
	assert_int_equal(errno, ENODATA);
#endif
	mr = ibv_reg_buf_mr(env->pd, buf, p + env->page, env->page, RC_ACCESS_ALL);
	assert_non_null(mr);
	expect_write_lands(env, mr, p + env->page, (uintptr_t)p + env->page, env->page);
	assert_int_equal(ibv_dereg_mr(mr), 0);
	ibv_free_buf(buf);
}
#endif

#if SOFTRDMA_RDMA_CORE >= 65
static void test_completion_counters_not_supported(void **state)
{
	struct rc_env *env = *state;
	struct ibv_comp_cntr_init_attr attr = { .type = IBV_COMP_CNTR_TYPE_WRS };
	struct ibv_comp_cntr_caps caps;

	assert_int_equal(ibv_query_comp_cntr_caps(env->ctx, &caps), EOPNOTSUPP);
	errno = 0;
	assert_null(ibv_create_comp_cntr(env->ctx, &attr));
	assert_int_equal(errno, EOPNOTSUPP);
}
#endif

#if SOFTRDMA_RDMA_CORE < 59
static void test_nothing_before_59(void **state)
{
	(void)state;
	print_message("built against rdma-core %d: it has none of these verbs\n",
		      SOFTRDMA_RDMA_CORE);
	skip();
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
#if SOFTRDMA_RDMA_CORE >= 59
		RC_TEST(reg_mr_ex_address_range),
		RC_TEST(reg_mr_ex_own_iova),
		RC_TEST(reg_mr_ex_refusals),
		RC_TEST(dma_handles_not_supported),
#endif
#if SOFTRDMA_RDMA_CORE >= 62
		RC_TEST(port_speed_is_the_advertised_rate),
#endif
#if SOFTRDMA_RDMA_CORE >= 64
		RC_TEST(alloc_buf_registered_and_reached),
#endif
#if SOFTRDMA_RDMA_CORE >= 65
		RC_TEST(completion_counters_not_supported),
#endif
#if SOFTRDMA_RDMA_CORE < 59
		cmocka_unit_test(test_nothing_before_59),
#endif
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
