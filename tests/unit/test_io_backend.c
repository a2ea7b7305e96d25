// SPDX-License-Identifier: MIT
/*
 * The I/O backends (emu/io_epoll.c, emu/io_uring.c) on pipes: a watch removed while a
 * batch is dispatched is never called from that batch, even when its memory is at once a
 * new watch's, and the rest of the batch is still dispatched (epoll: in the same call).
 * Each test runs on both backends; io_uring is skipped where the kernel refuses it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "emu/io.h"

#define PAIRS_FEW	4	/* fewer removals than a batch remembers */
#define PAIRS_MANY	24	/* more */
#define WATCHES_MAX	(2 * PAIRS_MANY)

struct test_watch {
	struct io_watch w;
	int rfd, wfd;
	int calls;
	struct test_watch *partner;	/* removed by this one's first call, if not called yet */
	bool removed;
	bool reuse;			/* the partner's memory becomes a watch on its idle pipe */
	int idle_rfd, idle_wfd;		/* with reuse: a pipe with nothing in it, never ready */
};

struct fixture {
	const struct io_backend_ops *ops;
	struct io_backend *b;
	struct test_watch tw[WATCHES_MAX];
	int n;
};

static struct fixture *current;

static void must_not_run(struct io_watch *w, uint32_t revents)
{
	(void)w;
	(void)revents;
	fail_msg("a watch removed in this batch was called (%s)", current->ops->name);
}

static void on_ready(struct io_watch *w, uint32_t revents)
{
	struct test_watch *t = (struct test_watch *)w;
	struct test_watch *p = t->partner;

	(void)revents;
	t->calls++;
	if (!p || p->removed || p->calls)
		return;
	current->ops->remove(current->b, &p->w);
	p->removed = true;
	p->w.added = false;
	/* What engine.c's callers do: free it. Here its memory is poisoned, or reused. */
	p->w.ready = must_not_run;
	if (t->reuse) {
		p->w.fd = p->idle_rfd;
		p->w.events = IO_IN;
		assert_int_equal(current->ops->add(current->b, &p->w), 0);
		p->w.added = true;
	}
}

static int setup(void **state)
{
	static struct fixture fx;

	memset(&fx, 0, sizeof(fx));
	fx.ops = *state;
	if (fx.ops->create(&fx.b)) {
		print_message("%s backend refused here: skipped\n", fx.ops->name);
		skip();
	}
	current = &fx;
	*state = &fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	for (int i = 0; i < fx->n; i++) {
		if (fx->tw[i].w.added)
			fx->ops->remove(fx->b, &fx->tw[i].w);
		close(fx->tw[i].rfd);
		close(fx->tw[i].wfd);
		if (fx->tw[i].reuse) {
			close(fx->tw[i].idle_rfd);
			close(fx->tw[i].idle_wfd);
		}
	}
	fx->ops->destroy(fx->b);
	return 0;
}

/* pairs pairs of readable watches, each member the other's partner. */
static void add_pairs(struct fixture *fx, int pairs, bool reuse)
{
	for (int i = 0; i < 2 * pairs; i++) {
		struct test_watch *t = &fx->tw[i];
		int fds[2];

		assert_int_equal(pipe(fds), 0);
		assert_int_equal(write(fds[1], "x", 1), 1);
		t->rfd = fds[0];
		t->wfd = fds[1];
		t->w.fd = t->rfd;
		t->w.events = IO_IN;
		t->w.ready = on_ready;
		t->partner = &fx->tw[i ^ 1];
		t->reuse = reuse;
		if (reuse) {
			assert_int_equal(pipe(fds), 0);
			t->idle_rfd = fds[0];
			t->idle_wfd = fds[1];
		}
		assert_int_equal(fx->ops->add(fx->b, &t->w), 0);
		t->w.added = true;
	}
	fx->n = 2 * pairs;
}

/* Dispatches until `want` watches were called at least once; the number of dispatches. */
static int dispatch_until(struct fixture *fx, int want)
{
	int first_calls = 0, dispatches = 0;

	for (int round = 0; round < 2 * WATCHES_MAX && first_calls < want; round++) {
		fx->ops->flush(fx->b);
		fx->ops->wait(fx->b, 100);
		fx->ops->dispatch(fx->b, true);
		dispatches++;
		first_calls = 0;
		for (int i = 0; i < fx->n; i++)
			first_calls += fx->tw[i].calls > 0;
	}
	return dispatches;
}

static void expect_one_of_each_pair(const struct fixture *fx, int pairs)
{
	for (int i = 0; i < pairs; i++) {
		const struct test_watch *a = &fx->tw[2 * i], *b = &fx->tw[2 * i + 1];

		if (!!a->calls == !!b->calls)
			fail_msg("pair %d: calls %d and %d, want exactly one called (%s)", i,
				 a->calls, b->calls, fx->ops->name);
		assert_true(a->removed != b->removed);
	}
}

static void test_removed_watch_skipped_rest_dispatched(void **state)
{
	struct fixture *fx = *state;
	int dispatches;

	add_pairs(fx, PAIRS_FEW, false);
	dispatches = dispatch_until(fx, PAIRS_FEW);
	expect_one_of_each_pair(fx, PAIRS_FEW);
	/* epoll fetches all eight at once: the survivors are called in that same dispatch,
	 * not one batch per removal (thousands of handshakes made that a scale problem). */
	if (fx->ops == &io_epoll_backend)
		assert_int_equal(dispatches, 1);
}

static void test_more_removals_than_remembered(void **state)
{
	struct fixture *fx = *state;

	add_pairs(fx, PAIRS_MANY, false);
	dispatch_until(fx, PAIRS_MANY);
	expect_one_of_each_pair(fx, PAIRS_MANY);
}

static void test_reused_memory_not_called_for_old_event(void **state)
{
	struct fixture *fx = *state;

	add_pairs(fx, PAIRS_FEW, true);
	dispatch_until(fx, PAIRS_FEW);
	expect_one_of_each_pair(fx, PAIRS_FEW);
	/* The new watches are on an empty pipe: a later dispatch must not call them either. */
	dispatch_until(fx, 2 * PAIRS_FEW);
	expect_one_of_each_pair(fx, PAIRS_FEW);
}

#define BOTH(test)									\
	cmocka_unit_test_prestate_setup_teardown(test, setup, teardown,			\
						 (void *)&io_epoll_backend),		\
	cmocka_unit_test_prestate_setup_teardown(test, setup, teardown,			\
						 (void *)&io_uring_backend)

int main(void)
{
	const struct CMUnitTest tests[] = {
		BOTH(test_removed_watch_skipped_rest_dispatched),
		BOTH(test_more_removals_than_remembered),
		BOTH(test_reused_memory_not_called_for_old_event),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
