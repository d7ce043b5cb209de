/*
 * bufcache: see bufcache.h. 16 slots cover a window of 16 bodies in
 * flight; scanning them is cheaper than anything the cache saves us from
 * (one page fault per 4 KiB).
 */
#include <stdlib.h>
#include <string.h>

#include "bufcache.h"

void
bufcache_init(struct bufcache *c, size_t max_bytes)
{
	memset(c, 0, sizeof(*c));
	c->max_bytes = max_bytes;
}

void *
bufcache_get(struct bufcache *c, size_t size)
{
	size_t i;
	void *p;

	if (size < BUFCACHE_MIN)
		return malloc(size);
	for (i = 0; i < BUFCACHE_SLOTS; i++)
		if (c->slot[i].p != NULL && c->slot[i].size == size) {
			p = c->slot[i].p;
			c->slot[i].p = NULL;
			c->bytes -= size;
			return p;
		}
	return malloc(size);
}

void
bufcache_put(struct bufcache *c, void *p, size_t size)
{
	struct bufcache_slot *s = NULL;
	size_t i;

	if (p == NULL || size < BUFCACHE_MIN || size > c->max_bytes) {
		free(p);
		return;
	}
	for (i = 0; i < BUFCACHE_SLOTS && s == NULL; i++)
		if (c->slot[i].p == NULL)
			s = &c->slot[i];
	/* Push out slots in turn until the new one fits. */
	while (s == NULL || c->bytes + size > c->max_bytes) {
		struct bufcache_slot *old = &c->slot[c->next++ % BUFCACHE_SLOTS];

		if (old->p != NULL) {
			free(old->p);
			old->p = NULL;
			c->bytes -= old->size;
		}
		if (s == NULL)
			s = old;
	}
	s->p = p;
	s->size = size;
	c->bytes += size;
}

void
bufcache_free(struct bufcache *c)
{
	size_t i;

	for (i = 0; i < BUFCACHE_SLOTS; i++)
		free(c->slot[i].p);
	memset(c->slot, 0, sizeof(c->slot));
	c->bytes = 0;
}
