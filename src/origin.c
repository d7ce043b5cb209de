/*
 * origin: see origin.h.
 */
#include "origin.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

struct origin {
	float *x;                 /* d floats; NULL until taken */
	size_t d;
};

int
origin_new(struct origin **out)
{
	struct origin *o = calloc(1, sizeof(*o));

	if (o == NULL)
		return -ENOMEM;
	*out = o;
	return 0;
}

void
origin_free(struct origin *o)
{
	if (o == NULL)
		return;
	free(o->x);
	free(o);
}

void
origin_reset(struct origin *o)
{
	free(o->x);
	o->x = NULL;
	o->d = 0;
}

static int
origin_take(struct origin *o, struct model *m)
{
	struct model_range whole = { 0, m->d };
	int rc;

	if ((o->x = malloc((m->d ? m->d : 1) * sizeof(float))) == NULL)
		return -ENOMEM;
	o->d = m->d;
	if ((rc = model_gather(m, &whole, 1, o->x)) < 0)
		origin_reset(o);
	return rc;
}

int
origin_share(struct origin *o, struct model *m, const struct mask *mask,
    const float *mine, const float *theirs, double *share, double *way)
{
	double dot = 0, np = 0;
	size_t k = 0;

	*share = *way = 0;
	if (o->x != NULL && o->d != m->d)
		origin_reset(o);
	if (o->x == NULL)
		return origin_take(o, m);
	for (size_t r = 0; r < mask->n; r++) {
		for (size_t j = 0; j < mask->r[r].len && k < mask->count; j++, k++) {
			double x0 = (double)o->x[mask->r[r].off + j];
			double prog = (double)mine[k] - x0;

			dot += ((double)theirs[k] - x0) * prog;
			np += prog * prog;
		}
	}
	if (np > 0)
		*share = dot / np;
	*way = sqrt(np / (double)(k ? k : 1));
	return 0;
}
