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

#define GD_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

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

/* Monotonic time in seconds. */
double util_now(void);

/* Allocation that never returns NULL: out of memory aborts with a message.
 * Used for small bookkeeping only; big buffers (datasets, models) use plain
 * malloc and report -ENOMEM. */
void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
char *xstrdup(const char *s);

#endif
