/*
 * util: the few helpers every module shares: an error buffer that carries a
 * human-readable reason next to a negative errno return, checked numeric
 * parsing, and a monotonic clock. Kept tiny on purpose: anything with a
 * concept of its own gets its own module.
 */
#ifndef GD_UTIL_H
#define GD_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#define GD_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
/* The record of type that embeds *p as its member m. */
#define GD_CONTAINER_OF(p, type, m) \
	((type *)(void *)((char *)(p) - offsetof(type, m)))

/* Why an operation failed, in words for the user; the return code says what. */
struct errbuf {
	char msg[256];
};

/* Format into err (which may be NULL); always returns rc so callers can
 * write `return errbuf_set(err, -EINVAL, "...")`. */
int errbuf_set(struct errbuf *err, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Strict parsers: the whole string must be a number within [min, max].
 * Return 0 or -EINVAL / -ERANGE. */
int util_parse_long(const char *s, long min, long max, long *out);
int util_parse_u64(const char *s, uint64_t *out);
int util_parse_double(const char *s, double min, double max, double *out);

/* Make s valid UTF-8 in place: a sequence cut short at the end (by a
 * fixed-size snprintf) is dropped, any other invalid byte becomes '?'.
 * Text bound for JSON must be valid UTF-8, or jansson refuses it whole. */
void util_utf8_fix(char *s);

/* x as a JSON number for a reply, or null when it is not finite: JSON
 * cannot carry it, and jansson refuses the whole reply that holds it. */
json_t *util_json_real(double x);

/* The lower median of v[0..n) (the middle of three, the lesser of two),
 * n > 0; sorts v in place. Where members tell a step, one liar among
 * three moves it nothing. */
int64_t util_median_low(int64_t *v, size_t n);

/* Monotonic time in seconds. */
double util_now(void);

/* Arm a one-shot timer for the time `at` on util_now's clock; a time
 * already past fires on the next loop turn. Never for 0 ms: libuv 1.44
 * runs a timer re-armed for 0 ms from its own callback again without
 * leaving its timer phase, so a deadline that stays due would starve
 * I/O and async wake-ups for good. Every deadline timer goes through
 * here. */
void util_timer_at(uv_timer_t *t, uv_timer_cb cb, double at, double now);

/* Allocation that never returns NULL: out of memory aborts with a message.
 * Used for small bookkeeping only; big buffers (datasets, models) use plain
 * malloc and report -ENOMEM. */
void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
/* Resize to nmemb * size bytes, refusing a product that overflows. */
void *xrealloc(void *p, size_t nmemb, size_t size);
char *xstrdup(const char *s);

#endif
