// SPDX-License-Identifier: MIT
/*
 * The engine thread's spin (emu/progress.c, SOFTRDMA_ENGINE_SPIN_US): it looks again at
 * once instead of sleeping only while arrivals are dense, no poller drives the engine and
 * no other thread of the process keeps a CPU busy; never on io_uring, never when off.
 * Times are given, not read, so nothing here depends on the machine's load.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "emu/internal.h"

#define SPIN_NS		50000ull
#define T0		1000000000ull	/* a wall time long after the engine's samples */

struct scene {
	struct emu_engine e;
	struct io_backend io;
};

/* An engine that spins up to SPIN_NS, on epoll, whose last two arrivals were 10 µs apart. */
static int setup(void **state)
{
	struct scene *s = calloc(1, sizeof(*s));

	if (!s)
		return -1;
	s->io.ops = &io_epoll_backend;
	s->e.io = &s->io;
	s->e.spin_ns = SPIN_NS;
	/* Its CPU sample is recent: others_busy() keeps its answer (false) until T0 + 1 ms. */
	s->e.cpu_sample.wall_ns = T0;
	engine_note_arrival(&s->e, T0 - 10000);
	engine_note_arrival(&s->e, T0);
	*state = s;
	return 0;
}

static int teardown(void **state)
{
	free(*state);
	return 0;
}

static void test_dense_arrivals_keep_it_awake(void **state)
{
	struct scene *s = *state;

	assert_true(engine_spins(&s->e, T0 + 1000));
	assert_true(engine_spins(&s->e, T0 + SPIN_NS - 1));
}

static void test_it_sleeps_once_nothing_came_for_the_spin(void **state)
{
	struct scene *s = *state;

	assert_false(engine_spins(&s->e, T0 + SPIN_NS));
}

/* One arrival after a long gap does not start a spin; the next one close behind it does. */
static void test_sparse_arrivals_do_not_start_it(void **state)
{
	struct scene *s = *state;

	engine_note_arrival(&s->e, T0 + 10 * SPIN_NS);
	assert_false(engine_spins(&s->e, T0 + 10 * SPIN_NS + 1000));
	engine_note_arrival(&s->e, T0 + 10 * SPIN_NS + 20000);
	assert_true(engine_spins(&s->e, T0 + 10 * SPIN_NS + 21000));
}

static void test_a_poller_stops_it(void **state)
{
	struct scene *s = *state;

	atomic_store(&s->e.poller_pass_ns, T0);
	assert_false(engine_spins(&s->e, T0 + 1000));
	/* A poller gone for the spin's length no longer counts. */
	engine_note_arrival(&s->e, T0 + SPIN_NS - 100);
	assert_true(engine_spins(&s->e, T0 + SPIN_NS));
}

static void test_a_busy_thread_stops_it(void **state)
{
	struct scene *s = *state;

	s->e.others_busy = true;
	assert_false(engine_spins(&s->e, T0 + 1000));
}

static void test_never_on_io_uring_nor_when_off(void **state)
{
	struct scene *s = *state;

	s->io.ops = &io_uring_backend;
	assert_false(engine_spins(&s->e, T0 + 1000));
	s->io.ops = &io_epoll_backend;
	s->e.spin_ns = 0;
	assert_false(engine_spins(&s->e, T0 + 1000));
}

/* Whether others are busy from (wall, process, engine thread) a to b, in ns. */
static bool busy(uint64_t wall_a, uint64_t process_a, uint64_t thread_a, uint64_t wall_b,
		 uint64_t process_b, uint64_t thread_b)
{
	struct cpu_sample a = { wall_a, process_a, thread_a }, b = { wall_b, process_b, thread_b };

	return cpu_others_busy(&a, &b);
}

/* "Busy": the other threads together used more than half of one CPU over the interval. */
static void test_others_busy_is_more_than_half_a_cpu(void **state)
{
	(void)state;
	assert_true(busy(0, 0, 0, 1000000, 600000, 0));
	assert_false(busy(0, 0, 0, 1000000, 400000, 0));
	/* The engine thread's own CPU is not another's. */
	assert_false(busy(0, 0, 0, 1000000, 1000000, 1000000));
	assert_true(busy(0, 0, 0, 1000000, 1600000, 1000000));
	/* Two threads at 0.3 each. */
	assert_true(busy(5, 100, 50, 1000005, 700100, 50));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_dense_arrivals_keep_it_awake, setup, teardown),
		cmocka_unit_test_setup_teardown(test_it_sleeps_once_nothing_came_for_the_spin,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sparse_arrivals_do_not_start_it, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_a_poller_stops_it, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_busy_thread_stops_it, setup, teardown),
		cmocka_unit_test_setup_teardown(test_never_on_io_uring_nor_when_off, setup,
						teardown),
		cmocka_unit_test(test_others_busy_is_more_than_half_a_cpu),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
