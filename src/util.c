/*
 * util: see util.h. Only helpers with no better home live here.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

int
errbuf_set(struct errbuf *err, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL)
		return rc;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return rc;
}

int
util_parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	if (s == NULL || *s == '\0')
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (*end != '\0')
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int
util_parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (s == NULL || *s == '\0' || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (*end != '\0')
		return -EINVAL;
	if (errno == ERANGE)
		return -ERANGE;
	*out = v;
	return 0;
}

int
util_parse_double(const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	if (s == NULL || *s == '\0')
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (*end != '\0' || isnan(v))
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

double
util_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void
util_timer_at(uv_timer_t *t, uv_timer_cb cb, double at, double now)
{
	double ms = ceil((at - now) * 1000.0);

	uv_timer_start(t, cb, ms < 1 ? 1 : ms > 1e9 ? (uint64_t)1e9 : (uint64_t)ms, 0);
}

static void
util_oom(size_t n)
{
	fprintf(stderr, "gossipd: out of memory allocating %zu bytes\n", n);
	abort();
}

void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p == NULL)
		util_oom(n);
	return p;
}

void *
xcalloc(size_t nmemb, size_t size)
{
	void *p;

	if (size != 0 && nmemb > SIZE_MAX / size)
		util_oom(SIZE_MAX);
	p = calloc(nmemb ? nmemb : 1, size ? size : 1);
	if (p == NULL)
		util_oom(nmemb * size);
	return p;
}

void *
xrealloc(void *p, size_t nmemb, size_t size)
{
	size_t n;

	if (size != 0 && nmemb > SIZE_MAX / size)
		util_oom(SIZE_MAX);
	n = nmemb * size;
	if ((p = realloc(p, n ? n : 1)) == NULL)
		util_oom(n);
	return p;
}

char *
xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;

	return memcpy(xmalloc(n), s, n);
}
