/*
 * check: the assertions of the C unit tests. A failed check prints where
 * and what, and is counted; check_exit() turns the count into the automake
 * exit status (0 pass, 1 fail) so one run reports every failure at once.
 */
#ifndef GD_TESTS_CHECK_H
#define GD_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int check_failures;

/* CHECK(cond); CHECKF(cond, "format", args...) explains a failure. */
#define CHECK(cond) CHECKF(cond, "%s", "")
#define CHECKF(cond, ...) do {                                             \
	if (!(cond)) {                                                      \
		fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
		fprintf(stderr, __VA_ARGS__);                               \
		fprintf(stderr, "\n");                                      \
		check_failures++;                                           \
	}                                                                   \
} while (0)

/* REQUIRE(cond): stop at the first failure, for scenarios whose later
 * steps make no sense once an earlier one failed. */
#define REQUIRE(cond) do {                                                 \
	if (!(cond)) {                                                      \
		fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
		exit(1);                                                    \
	}                                                                   \
} while (0)

static inline int
check_exit(const char *name)
{
	if (check_failures) {
		fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures);
		return 1;
	}
	printf("%s: all checks passed\n", name);
	return 0;
}

#endif
