/*
 * simq: the simulators' event queue, a binary min-heap of fixed-size
 * elements ordered by the caller's `before`. Both simulators in
 * contrib/sim keep one: membership_sim of pointers to its variable-size
 * messages, exchange_sim of small events by value, so the element is a
 * size and a comparison rather than a type; ties are the caller's to
 * break (both order by time, then by a sequence number of scheduling, so
 * a run is the same for a seed).
 */
#ifndef GD_SIMQ_H
#define GD_SIMQ_H

#include <stddef.h>

struct simq {
	unsigned char	*a;
	size_t		n, cap, size;
	int		(*before)(const void *x, const void *y);
};

void simq_init(struct simq *q, size_t size, int (*before)(const void *, const void *));
void simq_free(struct simq *q);
void simq_push(struct simq *q, const void *elem);
/* The first element into out; the queue must not be empty. */
void simq_pop(struct simq *q, void *out);
/* The first element, in place; NULL when empty. */
const void *simq_peek(const struct simq *q);

#endif
