/* SPDX-License-Identifier: MIT */
/*
 * Tables of cases as cmocka tests. Where a file checks one shape many times, the shape is
 * one function and the cases are rows of a table; each row still becomes a test of its own,
 * under its own name, so the output lists every case as before. A row is a struct whose
 * first member is its name (const char *); the test receives the row as cmocka's initial
 * state (the rc fixture keeps it in env->param, for tests whose setup replaces the state).
 *
 *   struct case_list l = { 0 };
 *   case_add(&l, (struct CMUnitTest)cmocka_unit_test(test_single));
 *   CASE_TABLE(&l, run_row, setup, teardown, rows);
 *   CASE_TESTS(&l, tests);	(an array of single tests, all at once)
 *   return case_run(&l);
 *
 * Include after <cmocka.h>.
 */
#ifndef SOFTRDMA_TESTS_CASE_TABLE_H
#define SOFTRDMA_TESTS_CASE_TABLE_H

#include <stdio.h>
#include <stdlib.h>

#define CASES_MAX	128

struct case_list {
	struct CMUnitTest t[CASES_MAX];
	size_t n;
};

static inline void case_add(struct case_list *l, struct CMUnitTest t)
{
	if (l->n == CASES_MAX) {
		fprintf(stderr, "case_table.h: more than %d tests; raise CASES_MAX\n", CASES_MAX);
		exit(1);
	}
	l->t[l->n++] = t;
}

/* One test per row of rows[0, n), each row stride bytes and starting with its name. */
static inline void case_add_table(struct case_list *l, CMUnitTestFunction fn,
				  CMFixtureFunction setup, CMFixtureFunction teardown,
				  const void *rows, size_t n, size_t stride)
{
	for (size_t i = 0; i < n; i++) {
		const void *row = (const char *)rows + i * stride;

		case_add(l, (struct CMUnitTest){
			.name = *(const char *const *)row,
			.test_func = fn,
			.setup_func = setup,
			.teardown_func = teardown,
			.initial_state = (void *)(uintptr_t)row,
		});
	}
}

/* Every test of an array of them, in order: a file's single tests beside its tables. */
#define CASE_TESTS(l, tests)								\
	do {										\
		for (size_t i_ = 0; i_ < sizeof(tests) / sizeof((tests)[0]); i_++)	\
			case_add((l), (tests)[i_]);					\
	} while (0)

#define CASE_TABLE(l, fn, setup, teardown, rows)					\
	case_add_table((l), (fn), (setup), (teardown), (rows),				\
		       sizeof(rows) / sizeof((rows)[0]), sizeof((rows)[0]))

/* cmocka_run_group_tests() over the list, under the group name it always had here. */
static inline int case_run(const struct case_list *l)
{
	return _cmocka_run_group_tests("tests", l->t, l->n, NULL, NULL);
}

#endif
