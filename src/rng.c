/*
 * rng: see rng.h. The key is BLAKE2b over (seed, purpose, a, b) with fixed
 * little-endian encoding, and the keystream is read in 1 KiB refills through
 * crypto_stream_chacha20_ietf_xor_ic, whose block counter makes the stream
 * seekable and avoids any hidden state.
 */
#include <math.h>
#include <string.h>

#include <sodium.h>

#include "rng.h"
#include "wire.h"

void
rng_init(struct rng *r, uint64_t seed, const char *purpose, uint64_t a, uint64_t b)
{
	crypto_generichash_state st;
	uint8_t num[24];

	memset(r, 0, sizeof(*r));
	wire_put_u64(num, seed);
	wire_put_u64(num + 8, a);
	wire_put_u64(num + 16, b);
	crypto_generichash_init(&st, NULL, 0, sizeof(r->key));
	crypto_generichash_update(&st, (const unsigned char *)"gossipd-rng-v1", 14);
	crypto_generichash_update(&st, num, sizeof(num));
	crypto_generichash_update(&st, (const unsigned char *)purpose, strlen(purpose));
	crypto_generichash_final(&st, r->key, sizeof(r->key));
	r->pos = sizeof(r->buf);
}

static void
rng_refill(struct rng *r)
{
	static const unsigned char nonce[crypto_stream_chacha20_ietf_NONCEBYTES];

	memset(r->buf, 0, sizeof(r->buf));
	crypto_stream_chacha20_ietf_xor_ic(r->buf, r->buf, sizeof(r->buf), nonce,
	    r->block, r->key);
	r->block += sizeof(r->buf) / 64;
	r->pos = 0;
}

void
rng_bytes(struct rng *r, void *out, size_t n)
{
	unsigned char *p = out;

	while (n > 0) {
		size_t k;

		if (r->pos == sizeof(r->buf))
			rng_refill(r);
		k = sizeof(r->buf) - r->pos;
		if (k > n)
			k = n;
		memcpy(p, r->buf + r->pos, k);
		r->pos += k;
		p += k;
		n -= k;
	}
}

uint64_t
rng_u64(struct rng *r)
{
	uint8_t b[8];

	rng_bytes(r, b, sizeof(b));
	return wire_get_u64(b);
}

uint64_t
rng_below(struct rng *r, uint64_t n)
{
	/* Reject the top partial bucket so every value is equally likely. */
	uint64_t limit = UINT64_MAX - UINT64_MAX % n;
	uint64_t v;

	do
		v = rng_u64(r);
	while (v >= limit);
	return v % n;
}

double
rng_uniform(struct rng *r)
{
	return (double)(rng_u64(r) >> 11) * 0x1.0p-53;
}

double
rng_normal(struct rng *r)
{
	double u1, u2, m;

	if (r->have_spare) {
		r->have_spare = 0;
		return r->spare;
	}
	do
		u1 = rng_uniform(r);
	while (u1 <= 0.0);
	u2 = rng_uniform(r);
	m = sqrt(-2.0 * log(u1));
	r->spare = m * sin(2.0 * M_PI * u2);
	r->have_spare = 1;
	return m * cos(2.0 * M_PI * u2);
}

void
rng_shuffle(struct rng *r, size_t *v, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)rng_below(r, i);
		size_t t = v[i - 1];

		v[i - 1] = v[j];
		v[j] = t;
	}
}

void
rng_clear(struct rng *r)
{
	sodium_memzero(r, sizeof(*r));
}
