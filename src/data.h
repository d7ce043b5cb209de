/*
 * data: Fashion-MNIST (any IDX image/label pair, gzip'd or plain) loaded into
 * memory as normalised floats, and the split of a training set into one
 * peer's shard. Every field of the files is validated before use: magic,
 * dimensions, counts, sizes, label range.
 */
#ifndef GD_DATA_H
#define GD_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "kinds.h"	/* struct data_partition */
#include "util.h"

struct data_set {
	size_t n;        /* samples */
	size_t dim;      /* features per sample (rows*cols) */
	int nclasses;    /* max label + 1, always 10 for Fashion-MNIST */
	float *x;        /* n*dim, normalised */
	uint8_t *y;      /* n labels */
};

/* Loads DIR/PREFIX-images-idx3-ubyte[.gz] and DIR/PREFIX-labels-idx1-ubyte[.gz];
 * prefix is "train" or "t10k". */
int data_load(const char *dir, const char *prefix, struct data_set *out, struct errbuf *err);
void data_free(struct data_set *s);

/* "iid" or "dirichlet:ALPHA" */
int data_partition_parse(const char *s, struct data_partition *p, struct errbuf *err);

/* Indices (into s) of shard `index` of `count`, deterministic from seed;
 * the shards of all peers are disjoint and cover the set. *idx is malloc'd. */
int data_shard(const struct data_set *s, unsigned index, unsigned count,
    const struct data_partition *p, uint64_t seed, size_t **idx, size_t *n,
    struct errbuf *err);

#endif
