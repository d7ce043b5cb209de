/*
 * outer: see outer.h. The arithmetic is in doubles per coordinate and the
 * buffers grow once to the model's size (an attached process announces it
 * after the daemon starts).
 */
#include "outer.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

struct outer {
	float *anchor, *mom, *x;
	size_t cap;
	int anchored;
	uint64_t steps, skipped;
};

int
outer_enabled(const struct outer_params *p)
{
	return p->lr != 1.0 || p->momentum > 0;
}

int
outer_new(struct outer **out)
{
	*out = xcalloc(1, sizeof(**out));
	return 0;
}

void
outer_free(struct outer *o)
{
	if (o == NULL)
		return;
	free(o->anchor);
	free(o->mom);
	free(o->x);
	free(o);
}

int
outer_anchored(const struct outer *o)
{
	return o->anchored;
}

void
outer_reset(struct outer *o)
{
	if (o != NULL)
		o->anchored = 0;
}

static void
outer_reserve(struct outer *o, size_t d)
{
	if (d <= o->cap)
		return;
	o->anchor = xrealloc(o->anchor, d, sizeof(float));
	o->mom = xrealloc(o->mom, d, sizeof(float));
	o->x = xrealloc(o->x, d, sizeof(float));
	o->cap = d;
	o->anchored = 0;
}

int
outer_step(struct outer *o, struct model *m, const struct outer_params *p)
{
	struct model_range all = { 0, m->d };
	double lr = p->lr, mu = p->momentum;
	int rc;

	if (m->d == 0)
		return 0;
	outer_reserve(o, m->d);
	if ((rc = model_gather(m, &all, 1, o->x)) < 0)
		return rc;
	for (size_t i = 0; i < m->d; i++) {
		if (!isfinite(o->x[i])) {
			o->skipped++;
			return -EDOM;
		}
	}
	if (!o->anchored) {
		memcpy(o->anchor, o->x, m->d * sizeof(float));
		memset(o->mom, 0, m->d * sizeof(float));
		o->anchored = 1;
		return 0;
	}
	/* x becomes the increment that takes the model to the new anchor. */
	for (size_t i = 0; i < m->d; i++) {
		double g = (double)o->anchor[i] - (double)o->x[i];
		double v = mu * (double)o->mom[i] + g;
		float next = (float)((double)o->anchor[i] - lr * (g + mu * v));

		o->mom[i] = (float)v;
		o->x[i] = next - o->x[i];
		o->anchor[i] = next;
	}
	if ((rc = model_add_in(m, &all, 1, o->x)) < 0)
		return rc;
	o->steps++;
	return 0;
}

int
outer_stats_json(const struct outer *o, json_t *obj)
{
	json_t *j = json_pack("{s:I, s:I}", "steps", (json_int_t)o->steps, "skipped",
	    (json_int_t)o->skipped);

	return j != NULL && json_object_set_new(obj, "outer", j) == 0 ? 0 : -ENOMEM;
}
