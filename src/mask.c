/*
 * mask: see mask.h for the construction and why.
 */
#include "mask.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "rng.h"
#include "util.h"

static int
mask_reserve(struct mask *m, size_t n)
{
	struct model_range *r;

	if (n <= m->cap)
		return 0;
	r = realloc(m->r, n * sizeof(*r));
	if (r == NULL)
		return -ENOMEM;
	m->r = r;
	m->cap = n;
	return 0;
}

/* Append [off, off+len) of the rotated circle, unrotated, splitting at d. */
static void
mask_push(struct mask *m, size_t off, size_t len, size_t d)
{
	if (off >= d)
		off -= d;
	if (off + len <= d) {
		m->r[m->n++] = (struct model_range){ off, len };
	} else {
		m->r[m->n++] = (struct model_range){ off, d - off };
		m->r[m->n++] = (struct model_range){ 0, off + len - d };
	}
	m->count += len;
}

static int
mask_cmp(const void *a, const void *b)
{
	const struct model_range *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* The mask's shape: k coordinates in nb blocks of *block (the last one
 * shorter). Returns 0 when k >= d (the mask is the whole vector). */
static size_t
mask_shape(size_t d, double density, size_t *block, size_t *nb)
{
	size_t k = (size_t)llround(density * (double)d);

	if (k == 0)
		k = 1;
	if (k >= d)
		return 0;
	if (*block > k)
		*block = k;
	*nb = (k + *block - 1) / *block;
	return k;
}

int
mask_check(size_t d, double density, size_t block, struct errbuf *err)
{
	size_t nb = 0, b = block;

	if (d == 0)
		return errbuf_set(err, -EINVAL, "the model has no coordinates");
	if (!(density > 0.0 && density <= 1.0))
		return errbuf_set(err, -EINVAL, "density %g is not in (0, 1]", density);
	if (block == 0)
		return errbuf_set(err, -EINVAL, "mask_block is 0");
	/* Stratum i spans floor(d(i+1)/nb) - floor(di/nb) >= floor(d/nb). */
	if (mask_shape(d, density, &b, &nb) > 0 && b > d / nb)
		return errbuf_set(err, -EINVAL,
		    "density %g and mask_block %zu do not fit a model of %zu values: "
		    "%zu blocks of %zu need strata of at least %zu, and they have %zu",
		    density, block, d, nb, b, b, d / nb);
	return 0;
}

int
mask_build(struct mask *m, uint64_t seed, uint64_t nonce, size_t d, double density,
    size_t block)
{
	size_t k, nb = 0, rot;
	struct rng r;
	int rc;

	if (mask_check(d, density, block, NULL) < 0)
		return -EINVAL;
	if ((k = mask_shape(d, density, &block, &nb)) == 0)
		return mask_dense(m, d);
	/* One extra slot: the block that wraps past d splits in two. */
	if ((rc = mask_reserve(m, nb + 1)) < 0)
		return rc;
	m->n = 0;
	m->count = 0;
	rng_init(&r, seed, "mask", nonce, 0);
	rot = (size_t)rng_below(&r, d);
	for (size_t i = 0; i < nb; i++) {
		/* Stratum i spans [lo, hi) of the rotated circle; block i has
		 * len coordinates so the lengths add up to exactly k. */
		size_t lo = (size_t)((unsigned __int128)d * i / nb);
		size_t hi = (size_t)((unsigned __int128)d * (i + 1) / nb);
		size_t len = i + 1 < nb ? block : k - block * (nb - 1);
		size_t slack = hi - lo - len;

		mask_push(m, rot + lo + (size_t)rng_below(&r, slack + 1), len, d);
	}
	rng_clear(&r);
	qsort(m->r, m->n, sizeof(*m->r), mask_cmp);
	return 0;
}

int
mask_dense(struct mask *m, size_t d)
{
	int rc;

	if (d == 0)
		return -EINVAL;
	if ((rc = mask_reserve(m, 1)) < 0)
		return rc;
	m->r[0] = (struct model_range){ 0, d };
	m->n = 1;
	m->count = d;
	return 0;
}

void
mask_clear(struct mask *m)
{
	m->n = m->count = 0;
}

int
mask_add(struct mask *m, size_t i)
{
	struct model_range *last = m->n > 0 ? &m->r[m->n - 1] : NULL;
	int rc;

	m->count++;
	if (last != NULL && last->off + last->len == i) {
		last->len++;
		return 0;
	}
	/* Grown by half: a selection adds thousands of ranges one by one. */
	if (m->n == m->cap && (rc = mask_reserve(m, m->cap + m->cap / 2 + 16)) < 0) {
		m->count--;
		return rc;
	}
	m->r[m->n++] = (struct model_range){ i, 1 };
	return 0;
}

/* A u64 takes at most 10 varint bytes. */
#define MASK_VARINT_MAX 10

size_t
mask_wire_max(size_t count)
{
	return count * MASK_VARINT_MAX;
}

static size_t
mask_put_varint(uint8_t *out, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

size_t
mask_encode(const struct mask *m, uint8_t *out)
{
	uint64_t next = 0;	/* the smallest coordinate the next one may be */
	size_t n = 0;

	for (size_t i = 0; i < m->n; i++) {
		n += mask_put_varint(out + n, m->r[i].off - next);
		for (size_t j = 1; j < m->r[i].len; j++)
			out[n++] = 0;
		next = m->r[i].off + m->r[i].len;
	}
	return n;
}

int
mask_decode(struct mask *m, const uint8_t *in, size_t len, size_t count, size_t d)
{
	uint64_t next = 0;
	size_t pos = 0;
	int rc;

	mask_clear(m);
	for (size_t k = 0; k < count; k++) {
		uint64_t gap = 0;
		unsigned shift = 0;

		for (;;) {
			if (pos == len || shift > 63)
				return -EINVAL;
			gap |= (uint64_t)(in[pos] & 0x7f) << shift;
			shift += 7;
			if ((in[pos++] & 0x80) == 0)
				break;
		}
		if (next >= d || gap >= d - next)
			return -EINVAL;
		if ((rc = mask_add(m, next + gap)) < 0)
			return rc;
		next += gap + 1;
	}
	return pos == len ? 0 : -EINVAL;
}

/* Bits of m's gaps at parameter k: the first coordinate's gap is its
 * index, each next one's its distance less one, so a range's inner gaps
 * are 0. */
static uint64_t
mask_rice_bits(const struct mask *m, unsigned k)
{
	uint64_t next = 0, bits = 0;

	for (size_t i = 0; i < m->n; i++) {
		bits += ((m->r[i].off - next) >> k) + (uint64_t)(1 + k) * m->r[i].len;
		next = m->r[i].off + m->r[i].len;
	}
	return bits;
}

unsigned
mask_rice_best(const struct mask *m, size_t *bytes)
{
	uint64_t best = mask_rice_bits(m, 0), bits;
	unsigned kbest = 0;

	/* k + 1 costs a bit a gap and saves ceil(q / 2) of each gap's high
	 * part q at k, a saving that shrinks as k grows: the bits are convex
	 * in k, and the first k that saves nothing is past the least (a
	 * message at 4% stops after 6 passes of its ranges, not 32). */
	for (unsigned k = 1; k <= MASK_RICE_KMAX; k++) {
		if ((bits = mask_rice_bits(m, k)) >= best)
			break;
		best = bits;
		kbest = k;
	}
	*bytes = (size_t)((best + 7) / 8);
	return kbest;
}

struct mask_bits {
	uint8_t *p;
	uint64_t at;	/* bits written */
};

static void
mask_put_bit(struct mask_bits *w, unsigned bit)
{
	if ((w->at & 7) == 0)
		w->p[w->at >> 3] = 0;
	w->p[w->at >> 3] |= (uint8_t)(bit << (w->at & 7));
	w->at++;
}

static void
mask_put_rice(struct mask_bits *w, uint64_t gap, unsigned k)
{
	for (uint64_t q = gap >> k; q > 0; q--)
		mask_put_bit(w, 1);
	mask_put_bit(w, 0);
	for (unsigned b = 0; b < k; b++)
		mask_put_bit(w, (unsigned)(gap >> b) & 1u);
}

size_t
mask_encode_rice(const struct mask *m, unsigned k, uint8_t *out)
{
	struct mask_bits w = { out, 0 };
	uint64_t next = 0;

	for (size_t i = 0; i < m->n; i++) {
		mask_put_rice(&w, m->r[i].off - next, k);
		for (size_t j = 1; j < m->r[i].len; j++)
			mask_put_rice(&w, 0, k);
		next = m->r[i].off + m->r[i].len;
	}
	return (size_t)((w.at + 7) / 8);
}

int
mask_decode_rice(struct mask *m, unsigned k, const uint8_t *in, size_t len, size_t count,
    size_t d)
{
	uint64_t next = 0, at = 0, end = (uint64_t)len * 8;
	int rc;

	if (k > MASK_RICE_KMAX)
		return -EINVAL;
	mask_clear(m);
	for (size_t c = 0; c < count; c++) {
		uint64_t q = 0, gap = 0;

		if (next >= d)
			return -EINVAL;
		/* q << k must stay below what is left of d */
		for (;;) {
			if (at == end)
				return -EINVAL;
			if (((in[at >> 3] >> (at & 7)) & 1u) == 0)
				break;
			if (++q > (d - next - 1) >> k)
				return -EINVAL;
			at++;
		}
		at++;
		if (end - at < k)
			return -EINVAL;
		for (unsigned b = 0; b < k; b++, at++)
			gap |= (uint64_t)((in[at >> 3] >> (at & 7)) & 1u) << b;
		gap |= q << k;
		if (gap >= d - next)
			return -EINVAL;
		if ((rc = mask_add(m, next + gap)) < 0)
			return rc;
		next += gap + 1;
	}
	/* exactly len bytes, the padding zeros */
	if ((at + 7) / 8 != len || (at & 7 && in[len - 1] >> (at & 7) != 0))
		return -EINVAL;
	return 0;
}

void
mask_free(struct mask *m)
{
	free(m->r);
	m->r = NULL;
	m->n = m->cap = m->count = 0;
}
