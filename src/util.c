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

/* Length of the valid sequence at p (n bytes left), 0 if invalid, -1 if
 * cut short by the end of the string. */
static int
util_utf8_seq(const unsigned char *p, size_t n)
{
	static const struct { unsigned char lead_max; int len; uint32_t min; } forms[] = {
		{ 0x7f, 1, 0 }, { 0xbf, 0, 0 }, { 0xdf, 2, 0x80 }, { 0xef, 3, 0x800 },
		{ 0xf4, 4, 0x10000 },
	};
	uint32_t cp;
	int len = 0, i;

	for (i = 0; i < (int)GD_ARRAY_SIZE(forms); i++) {
		if (p[0] <= forms[i].lead_max) {
			len = forms[i].len;
			break;
		}
	}
	if (len <= 1)
		return len;
	cp = p[0] & (0x7f >> len);
	for (int k = 1; k < len; k++) {
		if ((size_t)k >= n)
			return -1;
		if ((p[k] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[k] & 0x3f);
	}
	if (cp < forms[i].min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

void
util_utf8_fix(char *s)
{
	unsigned char *p = (unsigned char *)s;
	size_t n = strlen(s);

	while (n > 0) {
		int len = util_utf8_seq(p, n);

		if (len < 0) {
			*p = '\0';
			return;
		}
		if (len == 0) {
			*p = '?';
			len = 1;
		}
		p += len;
		n -= (size_t)len;
	}
}

json_t *
util_json_real(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}

int64_t
util_median_low(int64_t *v, size_t n)
{
	int64_t x;
	size_t i, j;

	for (i = 1; i < n; i++) {
		x = v[i];
		for (j = i; j > 0 && v[j - 1] > x; j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
	return v[(n - 1) / 2];
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
