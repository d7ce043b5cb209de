/*
 * drift: see drift.h for what the anchor is and why there is one.
 */
#include "drift.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "rng.h"

/* Coordinates read per model_gather: the model lock is taken per chunk,
 * so training is never held off for a whole pass. */
#define DRIFT_CHUNK 65536
/* Histogram bins: the top 16 bits of |drift|'s float (sign always 0). */
#define DRIFT_BINS 32768

struct drift {
	float *anchor;            /* d floats; NULL until the first selection */
	size_t d;
	float *chunk;             /* DRIFT_CHUNK floats */
	size_t *hist;             /* DRIFT_BINS counts */
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
	free(dr->hist);
	free(dr);
}

void
drift_reset(struct drift *dr)
{
	free(dr->anchor);
	dr->anchor = NULL;
	dr->d = 0;
}

static unsigned
drift_bin(float x, float a)
{
	float u = fabsf(x - a);
	uint32_t bits;

	memcpy(&bits, &u, sizeof(bits));
	/* NaN's bits sort above every number: a non-finite coordinate is
	 * picked first and the exchange refused before anything is sent. */
	return (bits >> 16) & (DRIFT_BINS - 1);
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
	if (dr->hist == NULL && (dr->hist = malloc(DRIFT_BINS * sizeof(size_t))) == NULL)
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

/* The bin holding the k-th largest drift, and how many of it to take
 * (those above it are all taken). */
static void
drift_threshold(const struct drift *dr, size_t k, unsigned *bin, size_t *take)
{
	size_t above = 0;
	unsigned b = DRIFT_BINS;

	while (b > 0 && above + dr->hist[b - 1] < k)
		above += dr->hist[--b];
	*bin = b > 0 ? b - 1 : 0;
	*take = k - above;
}

int
drift_select(struct drift *dr, struct model *m, size_t k, struct mask *out, float *values)
{
	size_t take, left, n = 0;
	unsigned tbin;
	struct rng ties;
	int rc;

	if ((rc = drift_anchor(dr, m)) < 0)
		return rc;
	if (k > dr->d)
		k = dr->d;
	memset(dr->hist, 0, DRIFT_BINS * sizeof(size_t));
	for (size_t off = 0; off < dr->d; off += DRIFT_CHUNK) {
		struct model_range r = { off, dr->d - off < DRIFT_CHUNK ? dr->d - off : DRIFT_CHUNK };

		if ((rc = model_gather(m, &r, 1, dr->chunk)) < 0)
			return rc;
		for (size_t i = 0; i < r.len; i++)
			dr->hist[drift_bin(dr->chunk[i], dr->anchor[off + i])]++;
	}
	drift_threshold(dr, k, &tbin, &take);
	/* The threshold bin's coordinates are ties: take of them are drawn
	 * uniformly (selection sampling: each with probability still needed /
	 * still to come), so no part of the model is favoured when many are
	 * equal, as every drift is 0 right after anchoring. */
	left = dr->hist[tbin];
	rng_init(&ties, randombytes_random(), "drift-ties", 0, 0);
	/* Second pass: the model moved a little since the first; the bins are
	 * re-read, so at most k are taken even if counts shifted. */
	mask_clear(out);
	for (size_t off = 0; off < dr->d && n < k; off += DRIFT_CHUNK) {
		struct model_range r = { off, dr->d - off < DRIFT_CHUNK ? dr->d - off : DRIFT_CHUNK };

		if ((rc = model_gather(m, &r, 1, dr->chunk)) < 0)
			goto out;
		for (size_t i = 0; i < r.len && n < k; i++) {
			unsigned b = drift_bin(dr->chunk[i], dr->anchor[off + i]);

			if (b < tbin)
				continue;
			if (b == tbin) {
				int pick = take > 0 && rng_below(&ties, left > 0 ? left : 1) < take;

				left -= left > 0;
				if (!pick)
					continue;
				take--;
			}
			if ((rc = mask_add(out, off + i)) < 0)
				goto out;
			values[n++] = dr->chunk[i];
		}
	}
out:
	rng_clear(&ties);
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
