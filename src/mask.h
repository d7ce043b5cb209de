/*
 * mask: which coordinates of the model one gossip exchange mixes. Both
 * partners build the same mask from (job seed, exchange nonce) alone, so
 * only values cross the wire, never indices.
 *
 * A mask of density p over d coordinates holds exactly k = round(p*d)
 * coordinates (at least 1), in blocks of `block` consecutive coordinates
 * (cache-friendly gathers, few ranges). Construction is stratified: the
 * coordinate circle is rotated by a random offset and cut into
 * ceil(k/block) equal strata, and each stratum holds one block at a random
 * position. That costs O(k/block) random draws and no pass over d, gives
 * the exact density every time, spreads blocks over the whole model, and
 * the random rotation makes every coordinate equally likely to be picked.
 * Ranges come out sorted and disjoint (a block that wraps past d becomes
 * two ranges).
 */
#ifndef GD_MASK_H
#define GD_MASK_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

struct mask {
	struct model_range *r;
	size_t n;          /* ranges */
	size_t cap;
	size_t count;      /* coordinates, = sum of lengths */
};

struct errbuf;

/* 0 if mask_build can build a mask of these parameters, else -EINVAL and
 * why: density in (0, 1], block >= 1, and a block no longer than the
 * shortest stratum (floor(d / strata)). Parameters that come from a peer
 * or an operator go through here before any arithmetic on them. */
int mask_check(size_t d, double density, size_t block, struct errbuf *err);
/* Reuses m's array when it can; -EINVAL where mask_check refuses. */
int mask_build(struct mask *m, uint64_t seed, uint64_t nonce, size_t d, double density,
    size_t block);
/* The whole vector: one range [0, d). */
int mask_dense(struct mask *m, size_t d);

/*
 * Explicit masks (mode delta, drift.h): coordinates the sender chose, so
 * they travel. On the wire each coordinate is the gap to the previous one
 * (the first: its index) as an unsigned LEB128 varint: a 1% mask costs
 * about one byte per coordinate rather than a u32 or u64.
 */
void mask_clear(struct mask *m);
/* Append coordinate i, above every coordinate already in m. */
int mask_add(struct mask *m, size_t i);
/* Bytes mask_encode may write for count coordinates. */
size_t mask_wire_max(size_t count);
/* Returns the bytes written. */
size_t mask_encode(const struct mask *m, uint8_t *out);
/* Exactly count coordinates in exactly len bytes, each below d, or
 * -EINVAL: nothing a peer sends reaches the model unchecked. */
int mask_decode(struct mask *m, const uint8_t *in, size_t len, size_t count, size_t d);

/*
 * The same gaps Rice-coded (mode share's indices): gap g as g >> k in
 * unary (that many 1 bits, then a 0) and its k low bits, least significant
 * bit first, packed from each byte's low bit up, the last byte padded with
 * zeros. Top-k gaps at density p are near geometric with mean 1/p, whose
 * entropy a Rice code of k near log2(0.69/p) comes within a few percent
 * of: 6.1 bits a coordinate at 4% against the varint's 8.
 */
#define MASK_RICE_KMAX 31
/* The k up to MASK_RICE_KMAX that codes m in the fewest bytes, and them. */
unsigned mask_rice_best(const struct mask *m, size_t *bytes);
/* Returns the bytes written (those mask_rice_best gave for k). */
size_t mask_encode_rice(const struct mask *m, unsigned k, uint8_t *out);
/* As mask_decode, for Rice-coded gaps with parameter k. */
int mask_decode_rice(struct mask *m, unsigned k, const uint8_t *in, size_t len, size_t count,
    size_t d);
void mask_free(struct mask *m);

#endif
