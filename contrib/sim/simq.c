/*
 * simq: see simq.h.
 */
#include <stdlib.h>
#include <string.h>

#include "simq.h"
#include "util.h"

#define AT(q, i)	((q)->a + (i) * (q)->size)

void
simq_init(struct simq *q, size_t size, int (*before)(const void *, const void *))
{
	*q = (struct simq){ NULL, 0, 0, size, before };
}

void
simq_free(struct simq *q)
{
	if (q == NULL)
		return;
	free(q->a);
	q->a = NULL;
	q->n = q->cap = 0;
}

void
simq_push(struct simq *q, const void *elem)
{
	size_t i;

	if (q->n == q->cap) {
		q->cap = q->cap ? q->cap * 2 : 1024;
		q->a = xrealloc(q->a, q->cap, q->size);
	}
	i = q->n++;
	while (i > 0 && q->before(elem, AT(q, (i - 1) / 2))) {
		memcpy(AT(q, i), AT(q, (i - 1) / 2), q->size);
		i = (i - 1) / 2;
	}
	memcpy(AT(q, i), elem, q->size);
}

void
simq_pop(struct simq *q, void *out)
{
	size_t i = 0, c, last = --q->n;

	memcpy(out, AT(q, 0), q->size);
	while ((c = 2 * i + 1) < q->n) {
		if (c + 1 < q->n && q->before(AT(q, c + 1), AT(q, c)))
			c++;
		if (!q->before(AT(q, c), AT(q, last)))
			break;
		memcpy(AT(q, i), AT(q, c), q->size);
		i = c;
	}
	memmove(AT(q, i), AT(q, last), q->size);
}

const void *
simq_peek(const struct simq *q)
{
	return q->n > 0 ? q->a : NULL;
}
