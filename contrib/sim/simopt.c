/*
 * simopt: see simopt.h.
 */
#include "simopt.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

const char *simopt_prog = "sim";

int
simopt_real(const char *name, const char *s, double min, double max, double *out)
{
	if (util_parse_double(s, min, max, out) == 0)
		return 0;
	fprintf(stderr, "%s: --%s: '%s' is not a number from %g to %g\n", simopt_prog, name, s,
	    min, max);
	return -EINVAL;
}

int
simopt_long(const char *name, const char *s, long min, long max, long *out)
{
	if (util_parse_long(s, min, max, out) == 0)
		return 0;
	fprintf(stderr, "%s: --%s: '%s' is not a whole number from %ld to %ld\n", simopt_prog,
	    name, s, min, max);
	return -EINVAL;
}

int
simopt_int(const char *name, const char *s, long min, long max, int *out)
{
	long v;
	int rc = simopt_long(name, s, min, max, &v);

	if (rc == 0)
		*out = (int)v;
	return rc;
}

int
simopt_u64(const char *name, const char *s, uint64_t *out)
{
	if (util_parse_u64(s, out) == 0)
		return 0;
	fprintf(stderr, "%s: --%s: '%s' is not a whole number of 0 or more\n", simopt_prog, name,
	    s);
	return -EINVAL;
}

int
simopt_choice(const char *name, const char *s, const char *const *names, int n, int *out)
{
	for (int i = 0; i < n; i++) {
		if (strcmp(s, names[i]) == 0) {
			*out = i;
			return 0;
		}
	}
	fprintf(stderr, "%s: --%s: '%s' is not one of", simopt_prog, name, s);
	for (int i = 0; i < n; i++)
		fprintf(stderr, " %s", names[i]);
	fprintf(stderr, "\n");
	return -EINVAL;
}

int
simopt_range_ms(const char *name, const char *s, double *lo, double *hi)
{
	double a, b;
	int end = 0;

	if (sscanf(s, "%lf,%lf%n", &a, &b, &end) == 2 && s[end] == '\0' && a >= 0 && b >= a &&
	    isfinite(b)) {
		*lo = a / 1000;
		*hi = b / 1000;
		return 0;
	}
	fprintf(stderr, "%s: --%s: '%s' is not A,B with 0 <= A <= B\n", simopt_prog, name, s);
	return -EINVAL;
}
