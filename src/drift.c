/*
 * drift: see drift.h for what the anchor is and why there is one.
 */
#include "drift.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "topk.h"

/* Coordinates read per model_gather: the model lock is taken per chunk,
 * so training is never held off for a whole pass. */
#define DRIFT_CHUNK 65536

struct drift {
	float *anchor;            /* d floats; NULL until the first selection */
	size_t d;
	float *chunk;             /* DRIFT_CHUNK floats */
	struct topk *topk;
};

int
drift_new(struct drift **out)
{
	struct drift *dr = calloc(1, sizeof(*dr));

	if (dr == NULL)
		return -ENOMEM;
	*out = dr;
	return 0;
}

void
drift_free(struct drift *dr)
{
	if (dr == NULL)
		return;
	free(dr->anchor);
	free(dr->chunk);
	free(dr->topk);
	free(dr);
}

void
drift_reset(struct drift *dr)
{
	free(dr->anchor);
	dr->anchor = NULL;
	dr->d = 0;
}

int
drift_anchor(struct drift *dr, struct model *m)
{
	struct model_range all = { 0, m->d };
	int rc;

	if (dr->anchor != NULL && dr->d == m->d)
		return 0;
	drift_reset(dr);
	if (dr->chunk == NULL && (dr->chunk = malloc(DRIFT_CHUNK * sizeof(float))) == NULL)
		return -ENOMEM;
	if (dr->topk == NULL && (dr->topk = malloc(sizeof(*dr->topk))) == NULL)
		return -ENOMEM;
	if ((dr->anchor = malloc(m->d * sizeof(float))) == NULL)
		return -ENOMEM;
	if ((rc = model_gather(m, &all, 1, dr->anchor)) < 0) {
		drift_reset(dr);
		return rc;
	}
	dr->d = m->d;
	return 0;
}

int
drift_select(struct drift *dr, struct model *m, size_t k, struct mask *out, float *values)
{
	struct topk *t;
	size_t n = 0;
	int rc;

	if ((rc = drift_anchor(dr, m)) < 0)
		return rc;
	t = dr->topk;
	if (k > dr->d)
		k = dr->d;
	topk_begin(t);
	for (size_t off = 0; off < dr->d; off += DRIFT_CHUNK) {
		struct model_range r = { off, dr->d - off < DRIFT_CHUNK ? dr->d - off : DRIFT_CHUNK };

		if ((rc = model_gather(m, &r, 1, dr->chunk)) < 0)
			return rc;
		for (size_t i = 0; i < r.len; i++)
			topk_count(t, dr->chunk[i] - dr->anchor[off + i]);
	}
	topk_threshold(t, k);
	/* Second pass: the model moved a little since the first; topk takes
	 * no more than k even if counts shifted. */
	mask_clear(out);
	for (size_t off = 0; off < dr->d && !topk_full(t); off += DRIFT_CHUNK) {
		struct model_range r = { off, dr->d - off < DRIFT_CHUNK ? dr->d - off : DRIFT_CHUNK };

		if ((rc = model_gather(m, &r, 1, dr->chunk)) < 0)
			goto out;
		for (size_t i = 0; i < r.len && !topk_full(t); i++) {
			if (!topk_take(t, dr->chunk[i] - dr->anchor[off + i]))
				continue;
			if ((rc = mask_add(out, off + i)) < 0)
				goto out;
			values[n++] = dr->chunk[i];
		}
	}
out:
	topk_end(t);
	return rc;
}

int
drift_anchored(const struct drift *dr)
{
	return dr != NULL && dr->anchor != NULL;
}

void
drift_mixed(struct drift *dr, const struct mask *mk, const float *mixed)
{
	size_t n = 0;

	if (!drift_anchored(dr))
		return;
	for (size_t i = 0; i < mk->n; i++) {
		if (mk->r[i].off + mk->r[i].len > dr->d)
			return;
		memcpy(dr->anchor + mk->r[i].off, mixed + n, mk->r[i].len * sizeof(float));
		n += mk->r[i].len;
	}
}
