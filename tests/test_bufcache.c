/*
 * test_bufcache: a buffer given back comes back for the same size only,
 * small ones are never kept, the byte bound and the slot count hold, and
 * a new size pushes old ones out rather than being dropped.
 */
#include <stdint.h>
#include <stdlib.h>

#include "bufcache.h"
#include "check.h"

#define MB	((size_t)1 << 20)

static void
test_cache(void)
{
	struct bufcache c;
	void *a, *b, *p[BUFCACHE_SLOTS + 1];
	size_t i;

	bufcache_init(&c, 10 * MB);
	a = bufcache_get(&c, 4 * MB);
	CHECK(a != NULL && c.bytes == 0);
	bufcache_put(&c, a, 4 * MB);
	CHECK(c.bytes == 4 * MB);
	b = bufcache_get(&c, 4 * MB + 1);	/* exact sizes only */
	CHECK(b != NULL && b != a);
	free(b);
	b = bufcache_get(&c, 4 * MB);
	CHECK(b == a && c.bytes == 0);
	bufcache_put(&c, b, 4 * MB);
	/* Below BUFCACHE_MIN: straight to free. */
	bufcache_put(&c, malloc(1000), 1000);
	CHECK(c.bytes == 4 * MB);
	/* Over the bound: older ones go, the newest stays. */
	bufcache_put(&c, malloc(5 * MB), 5 * MB);
	CHECK(c.bytes == 9 * MB);
	bufcache_put(&c, malloc(3 * MB), 3 * MB);
	CHECK(c.bytes <= 10 * MB);
	a = bufcache_get(&c, 3 * MB);
	CHECK(a != NULL && c.bytes <= 7 * MB);
	free(a);
	/* Bigger than the bound: never kept. */
	bufcache_put(&c, malloc(11 * MB), 11 * MB);
	CHECK(c.bytes <= 10 * MB);
	bufcache_free(&c);
	CHECK(c.bytes == 0);
	/* More buffers than slots: the extra one still finds a place. */
	bufcache_init(&c, 100 * MB);
	for (i = 0; i < BUFCACHE_SLOTS + 1; i++)
		p[i] = bufcache_get(&c, BUFCACHE_MIN + i);
	for (i = 0; i < BUFCACHE_SLOTS + 1; i++)
		bufcache_put(&c, p[i], BUFCACHE_MIN + i);
	a = bufcache_get(&c, BUFCACHE_MIN + BUFCACHE_SLOTS);
	CHECK(a == p[BUFCACHE_SLOTS]);
	free(a);
	bufcache_free(&c);
}

static const struct check_case cases[] = {
	{ "bufcache_cache", test_cache },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return check_main(argc, argv, cases, "test_bufcache");
}
