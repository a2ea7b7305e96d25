// SPDX-License-Identifier: MIT
/*
 * Unit tests for provider/cq_ex.c: the start_poll/next_poll/end_poll iterator and the
 * ibv_wc_read_* accessors of ibv_create_cq_ex(3), against a fake classic poll_cq that serves
 * a scripted queue of completions.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "provider/cq_ex.h"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* Laid out as the provider's CQ must be: the poller right before a struct verbs_cq. */
struct fake_verbs_cq {
	union {
		struct ibv_cq cq;
		struct ibv_cq_ex cq_ex;
	};
};

struct fake_cq {
	struct cq_ex_poller poller;
	struct fake_verbs_cq vcq;
};

static_assert(CQ_EX_POLLER_PLACED_BEFORE(struct fake_cq, poller, vcq.cq_ex),
	      "poller must sit right before vcq");

#define MAX_QUEUED	4096

/* The fake CQ's contents, and what poll_cq was asked. */
static struct {
	pthread_mutex_t lock;		/* the concurrency test polls from two threads */
	struct ibv_wc entries[MAX_QUEUED];
	size_t head;
	size_t tail;
	int calls;
	int largest_request;
	struct ibv_cq *cq;
	int error;			/* negative errno to return instead of entries */
} queue = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int fake_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)
{
	int n = 0;

	pthread_mutex_lock(&queue.lock);
	queue.calls++;
	queue.cq = cq;
	if (num_entries > queue.largest_request)
		queue.largest_request = num_entries;
	if (queue.error) {
		pthread_mutex_unlock(&queue.lock);
		return queue.error;
	}
	while (n < num_entries && queue.head < queue.tail)
		wc[n++] = queue.entries[queue.head++];
	pthread_mutex_unlock(&queue.lock);
	return n;
}

static void enqueue(const struct ibv_wc *wc)
{
	assert_true(queue.tail < MAX_QUEUED);
	queue.entries[queue.tail++] = *wc;
}

static int setup_cq(void **state)
{
	struct fake_cq *cq = calloc(1, sizeof(*cq));

	assert_non_null(cq);
	queue.head = queue.tail = 0;
	queue.calls = queue.largest_request = queue.error = 0;
	queue.cq = NULL;
	assert_int_equal(cq_ex_init(&cq->vcq.cq_ex, CQ_EX_SUPPORTED_WC_FLAGS, fake_poll_cq), 0);
	*state = cq;
	return 0;
}

static int teardown_cq(void **state)
{
	struct fake_cq *cq = *state;

	cq_ex_destroy(&cq->vcq.cq_ex);
	free(cq);
	return 0;
}

static struct ibv_cq_ex *cqx_of(void **state)
{
	return &((struct fake_cq *)*state)->vcq.cq_ex;
}

/* The poller's lock is free exactly when no poll is in progress. */
static void assert_not_polling(void **state)
{
	pthread_mutex_t *lock = &((struct fake_cq *)*state)->poller.lock;

	assert_int_equal(pthread_mutex_trylock(lock), 0);
	pthread_mutex_unlock(lock);
}

static void assert_current_is(struct ibv_cq_ex *cqx, const struct ibv_wc *wc)
{
	assert_int_equal(cqx->wr_id, wc->wr_id);
	assert_int_equal(cqx->status, wc->status);
	assert_int_equal(ibv_wc_read_opcode(cqx), wc->opcode);
	assert_int_equal(ibv_wc_read_vendor_err(cqx), wc->vendor_err);
	assert_int_equal(ibv_wc_read_byte_len(cqx), wc->byte_len);
	assert_int_equal(ibv_wc_read_imm_data(cqx), wc->imm_data);
	assert_int_equal(ibv_wc_read_qp_num(cqx), wc->qp_num);
	assert_int_equal(ibv_wc_read_src_qp(cqx), wc->src_qp);
	assert_int_equal(ibv_wc_read_wc_flags(cqx), wc->wc_flags);
	assert_int_equal(ibv_wc_read_slid(cqx), wc->slid);
	assert_int_equal(ibv_wc_read_sl(cqx), wc->sl);
	assert_int_equal(ibv_wc_read_dlid_path_bits(cqx), wc->dlid_path_bits);
}

static void test_empty_cq_is_enoent(void **state)
{
	struct ibv_cq_ex *cqx = cqx_of(state);
	struct ibv_poll_cq_attr attr = { 0 };

	assert_int_equal(ibv_start_poll(cqx, &attr), ENOENT);
	/* The man page says no end_poll after a failed start_poll: nothing may stay held. */
	assert_not_polling(state);
	assert_ptr_equal(queue.cq, ibv_cq_ex_to_cq(cqx));
}

static const struct ibv_wc three_entries[] = {
	{
		.wr_id = 0x1111, .status = IBV_WC_SUCCESS, .opcode = IBV_WC_SEND,
		.byte_len = 100, .qp_num = 17,
	},
	{
		.wr_id = 0x2222, .status = IBV_WC_SUCCESS, .opcode = IBV_WC_RECV_RDMA_WITH_IMM,
		.byte_len = 4096, .imm_data = 0x78563412, .qp_num = 18, .src_qp = 0xabcdef,
		.wc_flags = IBV_WC_WITH_IMM | IBV_WC_GRH, .slid = 0x1234, .sl = 5,
		.dlid_path_bits = 3,
	},
	{
		.wr_id = 0x3333, .status = IBV_WC_REM_ACCESS_ERR, .opcode = IBV_WC_RDMA_WRITE,
		.vendor_err = 0x99, .qp_num = 19,
	},
};

static void test_entries_read_across_start_next_end(void **state)
{
	struct ibv_cq_ex *cqx = cqx_of(state);
	struct ibv_poll_cq_attr attr = { 0 };
	size_t i;

	for (i = 0; i < ARRAY_SIZE(three_entries); i++)
		enqueue(&three_entries[i]);

	assert_int_equal(ibv_start_poll(cqx, &attr), 0);
	assert_current_is(cqx, &three_entries[0]);
	assert_int_equal(ibv_next_poll(cqx), 0);
	assert_current_is(cqx, &three_entries[1]);
	assert_int_equal(ibv_next_poll(cqx), 0);
	assert_current_is(cqx, &three_entries[2]);
	assert_int_equal(ibv_next_poll(cqx), ENOENT);
	ibv_end_poll(cqx);
	assert_not_polling(state);
}

/* status and wr_id are plain fields: each start/next must overwrite both, errors included. */
static void test_status_and_wr_id_follow_each_entry(void **state)
{
	struct ibv_cq_ex *cqx = cqx_of(state);
	struct ibv_poll_cq_attr attr = { 0 };
	const struct ibv_wc failed = { .wr_id = 77, .status = IBV_WC_WR_FLUSH_ERR };
	const struct ibv_wc succeeded = { .wr_id = 78, .status = IBV_WC_SUCCESS };

	enqueue(&failed);
	enqueue(&succeeded);
	assert_int_equal(ibv_start_poll(cqx, &attr), 0);
	assert_int_equal(cqx->status, IBV_WC_WR_FLUSH_ERR);
	assert_int_equal(cqx->wr_id, 77);
	assert_int_equal(ibv_next_poll(cqx), 0);
	assert_int_equal(cqx->status, IBV_WC_SUCCESS);
	assert_int_equal(cqx->wr_id, 78);
	ibv_end_poll(cqx);
}

/* Polling one entry per call leaves the rest in the CQ for whoever polls next. */
static void test_end_poll_leaves_unread_entries_queued(void **state)
{
	struct ibv_cq_ex *cqx = cqx_of(state);
	struct ibv_poll_cq_attr attr = { 0 };
	struct ibv_wc wc;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(three_entries); i++)
		enqueue(&three_entries[i]);

	assert_int_equal(ibv_start_poll(cqx, &attr), 0);
	assert_current_is(cqx, &three_entries[0]);
	ibv_end_poll(cqx);
	assert_not_polling(state);

	assert_int_equal(ibv_start_poll(cqx, &attr), 0);
	assert_current_is(cqx, &three_entries[1]);
	ibv_end_poll(cqx);

	/* The classic poll on the same CQ sees the next one, in order. */
	assert_int_equal(fake_poll_cq(ibv_cq_ex_to_cq(cqx), 1, &wc), 1);
	assert_int_equal(wc.wr_id, three_entries[2].wr_id);
	assert_int_equal(queue.largest_request, 1);
}

static void test_poll_cq_error_returned(void **state)
{
	struct ibv_cq_ex *cqx = cqx_of(state);
	struct ibv_poll_cq_attr attr = { 0 };

	queue.error = -EIO;
	assert_int_equal(ibv_start_poll(cqx, &attr), EIO);
	assert_not_polling(state);

	queue.error = 0;
	enqueue(&three_entries[0]);
	enqueue(&three_entries[1]);
	assert_int_equal(ibv_start_poll(cqx, &attr), 0);
	queue.error = -EIO;
	assert_int_equal(ibv_next_poll(cqx), EIO);
	ibv_end_poll(cqx);
	assert_not_polling(state);
}

static void test_unknown_poll_attr_refused(void **state)
{
	struct ibv_cq_ex *cqx = cqx_of(state);
	struct ibv_poll_cq_attr attr = { .comp_mask = 1 };

	enqueue(&three_entries[0]);
	assert_int_equal(ibv_start_poll(cqx, &attr), EINVAL);
	assert_not_polling(state);
	assert_int_equal(queue.calls, 0);
}

static void test_unsupported_wc_flags_refused(void **state)
{
	static const uint64_t refused[] = {
		IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
		IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
		IBV_WC_EX_WITH_CVLAN,
		IBV_WC_EX_WITH_FLOW_TAG,
		IBV_WC_EX_WITH_TM_INFO,
		1ull << 12,
		1ull << 63,
	};
	struct fake_cq cq;
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(refused); i++) {
		memset(&cq, 0, sizeof(cq));
		assert_int_equal(cq_ex_init(&cq.vcq.cq_ex, IBV_WC_EX_WITH_BYTE_LEN | refused[i],
					    fake_poll_cq), EOPNOTSUPP);
		assert_null(cq.vcq.cq_ex.start_poll);
	}
}

static void test_supported_wc_flags_accepted(void **state)
{
	static const uint64_t accepted[] = {
		0, IBV_WC_EX_WITH_BYTE_LEN, IBV_WC_EX_WITH_IMM, IBV_WC_EX_WITH_QP_NUM,
		IBV_WC_EX_WITH_SRC_QP, IBV_WC_EX_WITH_SLID, IBV_WC_EX_WITH_SL,
		IBV_WC_EX_WITH_DLID_PATH_BITS, IBV_WC_STANDARD_FLAGS,
	};
	struct fake_cq cq;
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(accepted); i++) {
		struct ibv_cq_ex *cqx = &cq.vcq.cq_ex;

		memset(&cq, 0, sizeof(cq));
		assert_int_equal(cq_ex_init(cqx, accepted[i], fake_poll_cq), 0);
		assert_non_null(cqx->start_poll);
		assert_non_null(cqx->next_poll);
		assert_non_null(cqx->end_poll);
		assert_non_null(cqx->read_opcode);
		assert_non_null(cqx->read_vendor_err);
		assert_non_null(cqx->read_byte_len);
		assert_non_null(cqx->read_imm_data);
		assert_non_null(cqx->read_qp_num);
		assert_non_null(cqx->read_src_qp);
		assert_non_null(cqx->read_wc_flags);
		assert_non_null(cqx->read_slid);
		assert_non_null(cqx->read_sl);
		assert_non_null(cqx->read_dlid_path_bits);
		assert_null(cqx->read_completion_ts);
		assert_null(cqx->read_completion_wallclock_ns);
		cq_ex_destroy(cqx);
	}
}

/*
 * Two threads poll one CQ. The current entry is per CQ, so a poll in progress must keep the
 * other thread out until end_poll: every entry's fields must read back as one completion.
 */
#define CONCURRENT_ENTRIES	4000

struct consumer {
	struct ibv_cq_ex *cqx;
	int consumed;
	int torn;
};

static void *consume(void *arg)
{
	struct consumer *consumer = arg;
	struct ibv_poll_cq_attr attr = { 0 };

	while (ibv_start_poll(consumer->cqx, &attr) == 0) {
		uint64_t wr_id = consumer->cqx->wr_id;

		sched_yield();
		if (ibv_wc_read_byte_len(consumer->cqx) != (uint32_t)wr_id ||
		    consumer->cqx->wr_id != wr_id)
			consumer->torn++;
		consumer->consumed++;
		ibv_end_poll(consumer->cqx);
	}
	return NULL;
}

static void test_poll_is_a_critical_section(void **state)
{
	struct consumer consumers[2] = {
		{ .cqx = cqx_of(state) },
		{ .cqx = cqx_of(state) },
	};
	pthread_t threads[ARRAY_SIZE(consumers)];
	size_t i;

	for (i = 0; i < CONCURRENT_ENTRIES; i++) {
		const struct ibv_wc wc = { .wr_id = i, .byte_len = (uint32_t)i };

		enqueue(&wc);
	}
	for (i = 0; i < ARRAY_SIZE(consumers); i++)
		assert_int_equal(pthread_create(&threads[i], NULL, consume, &consumers[i]), 0);
	for (i = 0; i < ARRAY_SIZE(consumers); i++)
		assert_int_equal(pthread_join(threads[i], NULL), 0);
	assert_int_equal(consumers[0].torn + consumers[1].torn, 0);
	assert_int_equal(consumers[0].consumed + consumers[1].consumed, CONCURRENT_ENTRIES);
}

#define CQ_TEST(fn)	cmocka_unit_test_setup_teardown(fn, setup_cq, teardown_cq)

int main(void)
{
	const struct CMUnitTest tests[] = {
		CQ_TEST(test_empty_cq_is_enoent),
		CQ_TEST(test_entries_read_across_start_next_end),
		CQ_TEST(test_status_and_wr_id_follow_each_entry),
		CQ_TEST(test_end_poll_leaves_unread_entries_queued),
		CQ_TEST(test_poll_cq_error_returned),
		CQ_TEST(test_unknown_poll_attr_refused),
		CQ_TEST(test_poll_is_a_critical_section),
		cmocka_unit_test(test_unsupported_wc_flags_refused),
		cmocka_unit_test(test_supported_wc_flags_accepted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
