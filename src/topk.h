/*
 * topk: which coordinates of a vector have the k largest magnitudes, in
 * O(d) and without a d-sized scratch, for mode delta's drift (drift.h) and
 * mode share's residual (share.h). The caller reads its values twice: the
 * first pass counts each |v| by its float's top 16 bits (topk_count), which
 * gives the threshold bin (topk_threshold); the second takes every value
 * above that bin and, of the bin's own, as many as fill k, drawn uniformly
 * (topk_take): ties must not favour the model's first layers, as every
 * value is 0 right after an anchor is taken. The threshold is exact to
 * 1/128 of its value. The values may move a little between the passes (a
 * model that trains meanwhile): never more than k are taken, a few fewer
 * may be.
 */
#ifndef GD_TOPK_H
#define GD_TOPK_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rng.h"

/* The top 16 bits of a float whose sign is 0. */
#define TOPK_BINS 32768

struct topk {
	size_t hist[TOPK_BINS];
	unsigned bin;      /* the threshold bin */
	size_t take;       /* of its values still to take */
	size_t left;       /* of its values still to come */
	size_t k;          /* still to take in all */
	struct rng ties;
};

/* NaN's bits sort above every number: a value that is not finite is
 * taken first, and its sender sees it before anything leaves. */
static inline unsigned
topk_bin(float v)
{
	float u = fabsf(v);
	uint32_t bits;

	memcpy(&bits, &u, sizeof(bits));
	return (bits >> 16) & (TOPK_BINS - 1);
}

/* Start the first pass. */
void topk_begin(struct topk *t);

static inline void
topk_count(struct topk *t, float v)
{
	t->hist[topk_bin(v)]++;
}

/* End the first pass: k are to be taken in the second. */
void topk_threshold(struct topk *t, size_t k);
/* Second pass, in order: whether to take v. */
int topk_take(struct topk *t, float v);
/* Whether k are taken already (the second pass may stop). */
static inline int
topk_full(const struct topk *t)
{
	return t->k == 0;
}
void topk_end(struct topk *t);

#endif
