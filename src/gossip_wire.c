/*
 * gossip_wire: see gossip_wire.h.
 */
#include "gossip_wire.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "gossip_mode.h"
#include "mask.h"
#include "util.h"
#include "wire.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
    "values go on the wire as the host's floats: little-endian hosts only");

size_t
gossip_values_bytes(enum gossip_values fmt, size_t n)
{
	switch (fmt) {
	case GOSSIP_FP16:
		return 2 * n;
	case GOSSIP_INT8:
		return n + 4 * ((n + GOSSIP_Q_BLOCK - 1) / GOSSIP_Q_BLOCK);
	case GOSSIP_INT2:
		/* a block's codes fill whole bytes but the last block's */
		return (n + 3) / 4 + 8 * ((n + GOSSIP_Q_BLOCK - 1) / GOSSIP_Q_BLOCK);
	default:
		return 4 * n;
	}
}

int
gossip_values_whole(unsigned fmt)
{
	return fmt < GOSSIP_VALUES_N && fmt != GOSSIP_INT2;
}

enum gossip_values
gossip_values_for_whole(enum gossip_values fmt)
{
	return gossip_values_whole(fmt) ? fmt : GOSSIP_INT8;
}

static void
gossip_int8_put(uint8_t *out, const float *v, size_t n)
{
	for (size_t b = 0; b < n; b += GOSSIP_Q_BLOCK) {
		size_t len = n - b < GOSSIP_Q_BLOCK ? n - b : GOSSIP_Q_BLOCK;
		float max = 0, scale, inv;

		for (size_t i = 0; i < len; i++)
			max = fmaxf(max, fabsf(v[b + i]));
		scale = max / 127.0f;
		inv = scale > 0 ? 1.0f / scale : 0;
		memcpy(out, &scale, 4);
		for (size_t i = 0; i < len; i++) {
			float q = fminf(fmaxf(rintf(v[b + i] * inv), -127.0f), 127.0f);

			out[4 + i] = (uint8_t)(int8_t)q;
		}
		out += 4 + len;
	}
}

/* A block's two magnitudes are the means of the magnitudes up to and
 * above its mean one: a step of Lloyd's two-level quantizer, which suits a
 * share's top values (heavy-tailed, few near zero) better than a uniform
 * grid would; sums in double, so finite values give finite magnitudes. */
static void
gossip_int2_put(uint8_t *out, const float *v, size_t n)
{
	for (size_t b = 0; b < n; b += GOSSIP_Q_BLOCK) {
		size_t len = n - b < GOSSIP_Q_BLOCK ? n - b : GOSSIP_Q_BLOCK, nhi = 0;
		double sum = 0, lo = 0, hi = 0, cut;
		float mag[2];

		for (size_t i = 0; i < len; i++)
			sum += fabs((double)v[b + i]);
		cut = sum / (double)len;
		for (size_t i = 0; i < len; i++) {
			double a = fabs((double)v[b + i]);

			if (a > cut) {
				hi += a;
				nhi++;
			} else {
				lo += a;
			}
		}
		mag[0] = nhi < len ? (float)(lo / (double)(len - nhi)) : 0;
		mag[1] = nhi > 0 ? (float)(hi / (double)nhi) : 0;
		memcpy(out, mag, 8);
		memset(out + 8, 0, (len + 3) / 4);
		for (size_t i = 0; i < len; i++) {
			unsigned code = (signbit(v[b + i]) ? 1u : 0u) |
			    (fabs((double)v[b + i]) > cut ? 2u : 0u);

			out[8 + i / 4] |= (uint8_t)(code << (2 * (i % 4)));
		}
		out += 8 + (len + 3) / 4;
	}
}

static void
gossip_int2_get(float *v, const uint8_t *in, size_t n)
{
	for (size_t b = 0; b < n; b += GOSSIP_Q_BLOCK) {
		size_t len = n - b < GOSSIP_Q_BLOCK ? n - b : GOSSIP_Q_BLOCK;
		float mag[2];

		memcpy(mag, in, 8);
		for (size_t i = 0; i < len; i++) {
			unsigned code = (in[8 + i / 4] >> (2 * (i % 4))) & 3u;

			v[b + i] = code & 1u ? -mag[code >> 1] : mag[code >> 1];
		}
		in += 8 + (len + 3) / 4;
	}
}

static void
gossip_int8_get(float *v, const uint8_t *in, size_t n)
{
	for (size_t b = 0; b < n; b += GOSSIP_Q_BLOCK) {
		size_t len = n - b < GOSSIP_Q_BLOCK ? n - b : GOSSIP_Q_BLOCK;
		float scale;

		memcpy(&scale, in, 4);
		for (size_t i = 0; i < len; i++)
			v[b + i] = (float)(int8_t)in[4 + i] * scale;
		in += 4 + len;
	}
}

void
gossip_values_put(uint8_t *out, const float *v, size_t n, enum gossip_values fmt)
{
	switch (fmt) {
	case GOSSIP_FP16:
		for (size_t i = 0; i < n; i++) {
			_Float16 h = (_Float16)v[i];

			memcpy(out + 2 * i, &h, 2);
		}
		break;
	case GOSSIP_INT8:
		gossip_int8_put(out, v, n);
		break;
	case GOSSIP_INT2:
		gossip_int2_put(out, v, n);
		break;
	default:
		memcpy(out, v, n * sizeof(float));
		break;
	}
}

void
gossip_values_get(float *v, const uint8_t *in, size_t n, enum gossip_values fmt)
{
	switch (fmt) {
	case GOSSIP_FP16:
		for (size_t i = 0; i < n; i++) {
			_Float16 h;

			memcpy(&h, in + 2 * i, 2);
			v[i] = (float)h;
		}
		break;
	case GOSSIP_INT8:
		gossip_int8_get(v, in, n);
		break;
	case GOSSIP_INT2:
		gossip_int2_get(v, in, n);
		break;
	default:
		memcpy(v, in, n * sizeof(float));
		break;
	}
}

/* Indices travel only where the mode's initiator chooses the mask. */
static int
gossip_wire_listed(enum gossip_mode mode)
{
	return gossip_mode_row(mode)->build == NULL;
}

size_t
gossip_req_max(enum gossip_mode mode, enum gossip_values fmt, size_t count)
{
	return GOSSIP_REQ_HEADER + (gossip_wire_listed(mode) ? mask_wire_max(count) : 0) +
	    gossip_values_bytes(fmt, count);
}

int
gossip_req_encode(const struct gossip_req *q, const struct mask *listed, const float *v,
    uint8_t *buf, size_t cap, size_t *len)
{
	int list = gossip_wire_listed(q->mode);
	size_t ilen = 0;
	uint64_t bits;

	if (cap < gossip_req_max(q->mode, q->values, q->count))
		return -EMSGSIZE;
	memset(buf, 0, GOSSIP_REQ_HEADER);
	buf[0] = GOSSIP_WIRE_VERSION;
	buf[1] = gossip_mode_row(q->mode)->wire;
	buf[2] = (uint8_t)q->values;
	buf[3] = q->flags;
	wire_put_u32(buf + 4, list ? 0 : q->block);
	wire_put_u64(buf + 8, q->nonce);
	wire_put_u64(buf + 16, q->d);
	wire_put_u64(buf + 24, q->count);
	memcpy(&bits, &q->density, sizeof(bits));
	wire_put_u64(buf + 32, bits);
	wire_put_u64(buf + 40, q->step);
	if (list)
		ilen = mask_encode(listed, buf + GOSSIP_REQ_HEADER);
	gossip_values_put(buf + GOSSIP_REQ_HEADER + ilen, v, q->count, q->values);
	*len = GOSSIP_REQ_HEADER + ilen + gossip_values_bytes(q->values, q->count);
	return 0;
}

int
gossip_req_decode(const uint8_t *buf, size_t len, struct gossip_req *q, struct errbuf *err)
{
	uint64_t bits;
	size_t vlen;

	if (len < GOSSIP_REQ_HEADER)
		return errbuf_set(err, -EBADMSG, "%zu bytes, shorter than a header", len);
	if (buf[0] != GOSSIP_WIRE_VERSION)
		return errbuf_set(err, -EBADMSG, "version %u", buf[0]);
	if (gossip_mode_by_wire(buf[1], &q->mode) < 0 || gossip_mode_row(q->mode)->shares)
		return errbuf_set(err, -EBADMSG, "mode %u", buf[1]);
	if (!gossip_values_whole(buf[2]))
		return errbuf_set(err, -EBADMSG, "values %u", buf[2]);
	q->values = (enum gossip_values)buf[2];
	q->flags = buf[3];
	q->block = wire_get_u32(buf + 4);
	q->nonce = wire_get_u64(buf + 8);
	q->d = wire_get_u64(buf + 16);
	q->count = wire_get_u64(buf + 24);
	bits = wire_get_u64(buf + 32);
	memcpy(&q->density, &bits, sizeof(q->density));
	q->step = wire_get_u64(buf + 40);
	/* count <= d and count <= len bound the size arithmetic below. */
	if (q->count == 0 || q->count > q->d || q->count > len)
		return errbuf_set(err, -EBADMSG, "count %llu of d %llu in %zu bytes",
		    (unsigned long long)q->count, (unsigned long long)q->d, len);
	vlen = gossip_values_bytes(q->values, q->count);
	if (vlen > len - GOSSIP_REQ_HEADER)
		return errbuf_set(err, -EBADMSG, "%zu bytes of values in %zu", vlen,
		    len - GOSSIP_REQ_HEADER);
	q->ilen = len - GOSSIP_REQ_HEADER - vlen;
	if (q->ilen != 0 && !gossip_wire_listed(q->mode))
		return errbuf_set(err, -EBADMSG, "%zu bytes of indices in mode %s", q->ilen,
		    gossip_mode_name(q->mode));
	q->idx = buf + GOSSIP_REQ_HEADER;
	q->vals = q->idx + q->ilen;
	return 0;
}

size_t
gossip_reply_size(const struct gossip_reply *r)
{
	return GOSSIP_REPLY_HEADER + (r->status == GOSSIP_REPLY_OK ?
	    gossip_values_bytes((enum gossip_values)r->values, r->count) : 0);
}

int
gossip_reply_encode(const struct gossip_reply *r, const float *v, uint8_t *buf, size_t cap,
    size_t *len)
{
	*len = gossip_reply_size(r);
	if (cap < *len)
		return -EMSGSIZE;
	memset(buf, 0, GOSSIP_REPLY_HEADER);
	buf[0] = GOSSIP_WIRE_VERSION;
	buf[1] = (uint8_t)r->status;
	buf[2] = r->values;
	buf[3] = r->flags;
	wire_put_u64(buf + 8, r->nonce);
	wire_put_u64(buf + 16, r->count);
	wire_put_u64(buf + 24, r->step);
	if (r->status == GOSSIP_REPLY_OK)
		gossip_values_put(buf + GOSSIP_REPLY_HEADER, v, r->count,
		    (enum gossip_values)r->values);
	return 0;
}

int
gossip_reply_decode(const uint8_t *buf, size_t len, struct gossip_reply *r,
    struct errbuf *err)
{
	if (len < GOSSIP_REPLY_HEADER)
		return errbuf_set(err, -EBADMSG, "%zu bytes, shorter than a header", len);
	if (buf[0] != GOSSIP_WIRE_VERSION)
		return errbuf_set(err, -EBADMSG, "version %u", buf[0]);
	if (buf[1] > GOSSIP_REPLY_REFUSED)
		return errbuf_set(err, -EBADMSG, "status %u", buf[1]);
	r->status = (enum gossip_reply_status)buf[1];
	r->values = buf[2];
	r->flags = buf[3];
	r->nonce = wire_get_u64(buf + 8);
	r->count = wire_get_u64(buf + 16);
	r->step = wire_get_u64(buf + 24);
	r->vals = buf + GOSSIP_REPLY_HEADER;
	r->vlen = len - GOSSIP_REPLY_HEADER;
	return 0;
}

int
gossip_reply_check(const struct gossip_reply *r, enum gossip_values fmt, uint64_t count,
    struct errbuf *err)
{
	if (r->values != (uint8_t)fmt || r->count != count)
		return errbuf_set(err, -EBADMSG, "%llu values in format %u, not %llu in %u",
		    (unsigned long long)r->count, r->values, (unsigned long long)count, fmt);
	if (r->vlen != gossip_values_bytes(fmt, count))
		return errbuf_set(err, -EBADMSG, "%zu bytes of values, not %zu", r->vlen,
		    gossip_values_bytes(fmt, count));
	return 0;
}
