/*
 * On-disk format of gossipd checkpoints, public so that other programs can
 * read them. All integers little-endian; floats IEEE-754 binary32, LE.
 *
 *   struct gd_ckpt_header    (GD_CKPT_HEADER_SIZE bytes)
 *   float x[d]               parameters, layout as in gossipd's model.h, or
 *                            with nlayers 0 (every size 0) the flat vector an
 *                            external trainer shares (gossipd-attach(7)), in
 *                            the training process's own layout
 *   float v[d]               SGD momentum (zero for an external trainer)
 *   uint8 checksum[32]       BLAKE2b-256 (crypto_generichash) of all the above
 */
#ifndef GOSSIPD_CKPT_FORMAT_H
#define GOSSIPD_CKPT_FORMAT_H

#include <stdint.h>

#define GD_CKPT_MAGIC "GDCKPT\r\n"   /* 8 bytes, no NUL */
#define GD_CKPT_VERSION 1
#define GD_CKPT_MAX_LAYERS 8
#define GD_CKPT_HEADER_SIZE 128
#define GD_CKPT_CHECKSUM_SIZE 32

struct gd_ckpt_header {
	char magic[8];
	uint32_t version;
	uint32_t header_size;        /* GD_CKPT_HEADER_SIZE */
	uint32_t nlayers;
	uint32_t sizes[GD_CKPT_MAX_LAYERS + 1];
	uint64_t d;
	uint64_t step;
	uint64_t seed;
	uint32_t epoch;
	uint32_t flags;              /* 0 */
	uint8_t reserved[GD_CKPT_HEADER_SIZE - 8 - 4 * 3 - 4 * (GD_CKPT_MAX_LAYERS + 1)
	    - 8 * 3 - 4 * 2];        /* zero */
};

#endif
