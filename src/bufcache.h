/*
 * bufcache: up to BUFCACHE_SLOTS freed large buffers kept for the next message of
 * the same size. A 4 MiB body that goes back to the kernel on free comes
 * back as 1024 fresh pages, each faulted and zeroed on first touch:
 * measured, clear_page took 29% of a receiver's CPU at 4 MiB messages.
 * Messages of one job mostly have a few sizes (the model, its masks), so
 * exact sizes are matched and nothing is ever split or merged; a new size
 * pushes out the slots in turn. Buffers below BUFCACHE_MIN are left to
 * malloc, whose heap already reuses them. Bounded by a slot count and a
 * byte total; one owner, one thread.
 */
#ifndef GD_BUFCACHE_H
#define GD_BUFCACHE_H

#include <stddef.h>

#define BUFCACHE_SLOTS	16
#define BUFCACHE_MIN	((size_t)128 << 10)	/* glibc's mmap threshold */

struct bufcache {
	struct bufcache_slot {
		void	*p;
		size_t	size;
	}		slot[BUFCACHE_SLOTS];
	size_t		bytes, max_bytes;
	unsigned	next;	/* slot to push out when all are taken */
};

/* An empty cache that will hold at most max_bytes. */
void bufcache_init(struct bufcache *c, size_t max_bytes);
/* A buffer of exactly size bytes, cached or new; NULL when out of memory. */
void *bufcache_get(struct bufcache *c, size_t size);
/* Give back p (from bufcache_get with this size, or malloc; NULL is
 * fine): kept if there is room, freed if not. */
void bufcache_put(struct bufcache *c, void *p, size_t size);
/* Free every cached buffer. */
void bufcache_free(struct bufcache *c);

#endif
