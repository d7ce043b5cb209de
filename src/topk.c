/*
 * topk: see topk.h.
 */
#include "topk.h"

#include <sodium.h>

void
topk_begin(struct topk *t)
{
	memset(t->hist, 0, sizeof(t->hist));
}

void
topk_threshold(struct topk *t, size_t k)
{
	size_t above = 0;
	unsigned b = TOPK_BINS;

	while (b > 0 && above + t->hist[b - 1] < k)
		above += t->hist[--b];
	t->bin = b > 0 ? b - 1 : 0;
	t->take = k - above;
	t->left = t->hist[t->bin];
	t->k = k;
	rng_init(&t->ties, randombytes_random(), "topk-ties", 0, 0);
}

int
topk_take(struct topk *t, float v)
{
	unsigned b = topk_bin(v);

	if (t->k == 0 || b < t->bin)
		return 0;
	if (b == t->bin) {
		/* selection sampling: each with the chance still needed over
		 * still to come */
		int pick = t->take > 0 && rng_below(&t->ties, t->left > 0 ? t->left : 1) < t->take;

		t->left -= t->left > 0;
		if (!pick)
			return 0;
		t->take--;
	}
	t->k--;
	return 1;
}

void
topk_end(struct topk *t)
{
	rng_clear(&t->ties);
}
