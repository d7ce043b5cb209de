/*
 * gossip_wire: the byte layout of the exchange's REQ and REPLY, their
 * encoders and bounds-checked decoders, and the value formats. Kept apart
 * from the exchange (gossip.c) so the one place that reads a partner's
 * bytes is small and checks every length against the bytes received
 * before anything is read; the exchange sees only the decoded fields.
 *
 * Layout, little-endian:
 *	REQ    0 version(u8)=1  1 mode(u8, the row's wire byte)  2 values(u8)
 *	       3 flags(u8)  4 block(u32; 0 when indices travel)  8 nonce(u64)
 *	       16 d(u64)  24 count(u64)  32 density(f64)  40 step(u64)
 *	       48 indices (mask_encode) when the mode's mask is chosen, then
 *	       count values
 *	REPLY  0 version(u8)=1  1 status(u8)  2 values(u8)  3 flags(u8)  4 0(u32)
 *	       8 nonce(u64)  16 count(u64)  24 step(u64)  32 count values when
 *	       status is OK
 *	values fp32 or fp16: count of them; int8: per GOSSIP_Q_BLOCK values
 *	       (the last block shorter) an f32 scale, then that many int8;
 *	       int2 (shares only): per block two f32 magnitudes, low and
 *	       high, then 2 bits a value, 4 to a byte from the low bits up
 *	       (bit 0 the sign, bit 1 the high magnitude), the last byte
 *	       padded with zeros
 *	flags  GOSSIP_WIRE_TRAINED; bits this version does not know are ignored
 *	       (a peer that knew no flags sent 0 and ignored the byte)
 */
#ifndef GD_GOSSIP_WIRE_H
#define GD_GOSSIP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "kinds.h"	/* enum gossip_mode, enum gossip_values */

struct errbuf;
struct mask;

#define GOSSIP_WIRE_VERSION 1
#define GOSSIP_REQ_HEADER 48
#define GOSSIP_REPLY_HEADER 32
/* int8 values per scale (int2's per pair of magnitudes): 64 keeps the
 * scale's cost at 1/16 of a byte per value, and a block's largest value
 * near its typical ones. */
#define GOSSIP_Q_BLOCK 64

enum gossip_reply_status { GOSSIP_REPLY_OK, GOSSIP_REPLY_BUSY, GOSSIP_REPLY_REFUSED };

/* The sender's training is over (it closes, or lingers after): its values
 * are where the job ended up, which says nothing of the spread the job
 * trains with (trust.h, struct trust_slice). */
#define GOSSIP_WIRE_TRAINED 0x01

struct gossip_req {
	enum gossip_mode mode;
	enum gossip_values values;
	uint8_t flags;         /* GOSSIP_WIRE_* */
	uint32_t block;
	uint64_t nonce, d, count, step;
	double density;
	/* Decoded: where the indices (ilen bytes, 0 when the mode's mask is
	 * rebuilt) and the count values lie in the buffer. */
	const uint8_t *idx;
	size_t ilen;
	const uint8_t *vals;
};

struct gossip_reply {
	enum gossip_reply_status status;
	uint8_t values;        /* as received: checked by gossip_reply_check */
	uint8_t flags;         /* GOSSIP_WIRE_* */
	uint64_t nonce, count, step;
	const uint8_t *vals;   /* decoded: the bytes after the header */
	size_t vlen;
};

/* Bytes n values take in fmt. */
size_t gossip_values_bytes(enum gossip_values fmt, size_t n);
/* Whether a model's own values (an exchange's, a pull's) may travel in
 * fmt, a byte off the wire: int2 keeps two magnitudes a block, which only
 * a share's moves bear (their residual keeps what the rounding loses). */
int gossip_values_whole(unsigned fmt);
/* The format a model's own values travel in when fmt is configured:
 * int8 in place of int2, else fmt. */
enum gossip_values gossip_values_for_whole(enum gossip_values fmt);
void gossip_values_put(uint8_t *out, const float *v, size_t n, enum gossip_values fmt);
/* Reads gossip_values_bytes(fmt, n) bytes of in. A scale that is not
 * finite gives values that are not: the caller vets them. */
void gossip_values_get(float *v, const uint8_t *in, size_t n, enum gossip_values fmt);

/* Most bytes a REQ of count values takes (indices at their longest when
 * the mode's mask is chosen). */
size_t gossip_req_max(enum gossip_mode mode, enum gossip_values fmt, size_t count);
/* Encodes q with values v (q->count of them) and, when q's mode chooses
 * its mask, listed's indices (q->count of them). Returns 0 with the size
 * in *len, or -EMSGSIZE when cap is below gossip_req_max. */
int gossip_req_encode(const struct gossip_req *q, const struct mask *listed, const float *v,
    uint8_t *buf, size_t cap, size_t *len);
/* Returns 0 or -EBADMSG (reason in err): a known version, mode and value
 * format; 0 < count <= d; exactly the values' bytes after the header and
 * the indices, and indices only where the mode chooses its mask. */
int gossip_req_decode(const uint8_t *buf, size_t len, struct gossip_req *q,
    struct errbuf *err);

/* Bytes a REPLY takes: its values only when status is OK. */
size_t gossip_reply_size(const struct gossip_reply *r);
/* Encodes r, with r->count values v in fmt r->values when its status is
 * OK. Returns 0 with the size in *len, or -EMSGSIZE. */
int gossip_reply_encode(const struct gossip_reply *r, const float *v, uint8_t *buf,
    size_t cap, size_t *len);
/* The header only: 0 or -EBADMSG (short, version, status). The values
 * wait for gossip_reply_check: only the REPLY to our REQ is worth it. */
int gossip_reply_decode(const uint8_t *buf, size_t len, struct gossip_reply *r,
    struct errbuf *err);
/* 0 when an OK REPLY carries exactly count values in fmt, else -EBADMSG. */
int gossip_reply_check(const struct gossip_reply *r, enum gossip_values fmt, uint64_t count,
    struct errbuf *err);

#endif
