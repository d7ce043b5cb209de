/*
 * check: the assertions of the C unit tests, and their named cases. A
 * failed check prints where and what, and is counted; the run goes on, so
 * one run reports every failure at once. Each test program lists its cases
 * in one table, and its main is check_main's: every case in turn, or the
 * one named on the command line, so that a failure can be rerun alone.
 */
#ifndef GD_TESTS_CHECK_H
#define GD_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* One case: <module>_<what>, and the function that checks it. A table of
 * them ends with { NULL, NULL }. */
struct check_case {
	const char *name;
	void (*run)(void);
};

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

static inline void
check_list(FILE *f, const struct check_case *cases)
{
	for (; cases->name != NULL; cases++)
		fprintf(f, "%s\n", cases->name);
}

/*
 * check_main(argc, argv, cases, "test_NAME"): with no argument every case
 * in the table's order, with a case's name that one alone, with --list the
 * names. Returns the automake exit status: 0 pass, 1 fail, and 2 (the
 * names on stderr) for a name the table does not have.
 */
static inline int
check_main(int argc, char **argv, const struct check_case *cases, const char *prog)
{
	const char *only = argc > 1 ? argv[1] : NULL;
	int ran = 0;

	if (argc > 2) {
		fprintf(stderr, "usage: %s [--list | CASE]\n", prog);
		return 2;
	}
	if (only != NULL && strcmp(only, "--list") == 0) {
		check_list(stdout, cases);
		return 0;
	}
	for (const struct check_case *c = cases; c->name != NULL; c++) {
		int before = check_failures;

		if (only != NULL && strcmp(only, c->name) != 0)
			continue;
		/* The log then shows a case's own lines, on either stream,
		 * next to its verdict. */
		fflush(stdout);
		c->run();
		if (check_failures > before)
			fprintf(stderr, "FAIL %s: %d check(s) failed\n", c->name,
			    check_failures - before);
		else
			printf("ok %s\n", c->name);
		fflush(stdout);
		ran++;
	}
	if (ran == 0) {
		fprintf(stderr, "%s: no case '%s'; its cases are:\n", prog, only);
		check_list(stderr, cases);
		return 2;
	}
	return check_exit(prog);
}

#endif
