/*
 * rng: a counter-based random stream. Everything random that must be
 * reproducible (parameter initialisation, shard assignment, per-epoch
 * shuffles, gossip masks) draws from a stream keyed by (seed, purpose, a, b)
 * so the same inputs give the same numbers on every machine and in every
 * process, independent of any library RNG state or of what else was drawn
 * before. The stream is ChaCha20 keystream (libsodium) addressed by block
 * counter, so it costs one key derivation to open and ~1 GB/s to read.
 */
#ifndef GD_RNG_H
#define GD_RNG_H

#include <stddef.h>
#include <stdint.h>

struct rng {
	unsigned char key[32];
	uint32_t block;           /* next keystream block (64 bytes each) */
	size_t pos;               /* bytes of buf already used */
	unsigned char buf[1024];
	int have_spare;           /* rng_normal makes pairs */
	double spare;
};

/* purpose is a short label ("init", "shard", ...); a and b select a stream
 * within it (layer, epoch, peer index, nonce...). */
void rng_init(struct rng *r, uint64_t seed, const char *purpose, uint64_t a, uint64_t b);
void rng_bytes(struct rng *r, void *out, size_t n);
uint64_t rng_u64(struct rng *r);
/* Uniform in [0, n), without modulo bias; n > 0. */
uint64_t rng_below(struct rng *r, uint64_t n);
/* Uniform in [0, 1) with 53 random bits. */
double rng_uniform(struct rng *r);
/* Standard normal (Box-Muller). */
double rng_normal(struct rng *r);
/* In-place Fisher-Yates shuffle of n indices. */
void rng_shuffle(struct rng *r, size_t *v, size_t n);
/* Wipes the key. */
void rng_clear(struct rng *r);

#endif
