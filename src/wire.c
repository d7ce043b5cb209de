/*
 * wire: see wire.h. Decoders read through explicit little-endian helpers
 * (never by casting the buffer) and compare every announced length with
 * the bytes that actually arrived before the caller may touch the payload.
 */
#include <errno.h>
#include <string.h>

#include "wire.h"

static const char *const reject_names[WIRE_REJ_COUNT] = {
	[WIRE_REJ_BAD_MAC] = "bad_mac",
	[WIRE_REJ_REPLAY] = "replay",
	[WIRE_REJ_MALFORMED] = "malformed",
	[WIRE_REJ_VERSION] = "wrong_version",
	[WIRE_REJ_JOB] = "wrong_job",
	[WIRE_REJ_OVERSIZE] = "oversize",
	[WIRE_REJ_UNKNOWN_SENDER] = "unknown_sender",
	[WIRE_REJ_HANDSHAKE] = "handshake_failure",
};

const char *
wire_reject_name(enum wire_reject r)
{
	if ((unsigned)r >= WIRE_REJ_COUNT)
		return "unknown";
	return reject_names[r];
}

const char *
wire_type_name(uint8_t type)
{
	switch (type) {
	case WIRE_T_HELLO:
		return "hello";
	case WIRE_T_HELLO_ACK:
		return "hello_ack";
	case WIRE_T_ACK:
		return "ack";
	default:
		return NULL;
	}
}

void
wire_put_u64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

uint64_t
wire_get_u64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

void
wire_put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

uint32_t
wire_get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

void
wire_put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

uint16_t
wire_get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

void
wire_header_encode(const struct wire_header *h, uint8_t out[WIRE_HEADER_SIZE])
{
	wire_put_u32(out, WIRE_MAGIC);
	out[4] = h->version;
	out[5] = h->type;
	out[6] = (uint8_t)h->flags;
	out[7] = (uint8_t)(h->flags >> 8);
	wire_put_u64(out + 8, h->job);
	wire_put_u64(out + 16, h->sender);
	wire_put_u64(out + 24, h->receiver);
	wire_put_u64(out + 32, h->seq);
	wire_put_u64(out + 40, h->payload_len);
	wire_put_u32(out + 48, h->chunk_index);
	wire_put_u32(out + 52, h->chunk_count);
}

uint32_t
wire_chunk_count(uint64_t payload_len)
{
	return (uint32_t)((payload_len + WIRE_CHUNK_SIZE - 1) / WIRE_CHUNK_SIZE);
}

uint64_t
wire_body_size(uint64_t payload_len)
{
	return payload_len + (uint64_t)wire_chunk_count(payload_len) *
	    WIRE_MAC_SIZE;
}

size_t
wire_chunk_len(uint64_t payload_len, uint32_t i)
{
	uint64_t off = (uint64_t)i * WIRE_CHUNK_SIZE;

	if (off >= payload_len)
		return 0;
	if (payload_len - off < WIRE_CHUNK_SIZE)
		return (size_t)(payload_len - off);
	return WIRE_CHUNK_SIZE;
}

static int
reject(enum wire_reject *why, enum wire_reject r)
{
	*why = r;
	return -EBADMSG;
}

int
wire_frame_decode(const uint8_t *buf, size_t len,
    const struct wire_limits *lim, struct wire_header *h,
    enum wire_reject *why)
{
	size_t room;

	if (len < WIRE_HEADER_SIZE + WIRE_MAC_SIZE)
		return reject(why, WIRE_REJ_MALFORMED);
	if (wire_get_u32(buf) != WIRE_MAGIC)
		return reject(why, WIRE_REJ_MALFORMED);
	memset(h, 0, sizeof(*h));
	h->version = buf[4];
	if (h->version != WIRE_VERSION)
		return reject(why, WIRE_REJ_VERSION);
	h->type = buf[5];
	h->flags = (uint16_t)(buf[6] | buf[7] << 8);
	h->job = wire_get_u64(buf + 8);
	h->sender = wire_get_u64(buf + 16);
	h->receiver = wire_get_u64(buf + 24);
	h->seq = wire_get_u64(buf + 32);
	h->payload_len = wire_get_u64(buf + 40);
	h->chunk_index = wire_get_u32(buf + 48);
	h->chunk_count = wire_get_u32(buf + 52);
	if (h->job != lim->job)
		return reject(why, WIRE_REJ_JOB);
	if (h->type == 0 || (h->type > WIRE_T_ACK && h->type < WIRE_TYPE_APP_MIN))
		return reject(why, WIRE_REJ_MALFORMED);
	if ((h->flags & ~WIRE_F_KNOWN) != 0 || h->chunk_index != 0)
		return reject(why, WIRE_REJ_MALFORMED);
	if (h->payload_len > lim->max_message_size ||
	    h->payload_len > WIRE_MESSAGE_LIMIT)
		return reject(why, WIRE_REJ_OVERSIZE);
	room = len - WIRE_HEADER_SIZE - WIRE_MAC_SIZE;
	if (h->flags & WIRE_F_INLINE) {
		if (h->chunk_count != 0 || h->payload_len != room)
			return reject(why, WIRE_REJ_MALFORMED);
		return 0;
	}
	/* Only application messages may carry a body. */
	if (h->type < WIRE_TYPE_APP_MIN || room != 0 || h->payload_len == 0 ||
	    h->chunk_count != wire_chunk_count(h->payload_len))
		return reject(why, WIRE_REJ_MALFORMED);
	return 0;
}

size_t
wire_hello_size(const struct wire_hello *hl)
{
	return WIRE_HELLO_MIN + strnlen(hl->addr, WIRE_ADDR_MAX);
}

void
wire_hello_encode(const struct wire_hello *hl, uint8_t *out)
{
	size_t alen = strnlen(hl->addr, WIRE_ADDR_MAX);

	memcpy(out, hl->pk, WIRE_KX_PK_SIZE);
	wire_put_u64(out + WIRE_KX_PK_SIZE, hl->stamp);
	wire_put_u64(out + WIRE_KX_PK_SIZE + 8, hl->held);
	out[WIRE_KX_PK_SIZE + 16] = (uint8_t)alen;
	out[WIRE_KX_PK_SIZE + 17] = hl->suites;
	memcpy(out + WIRE_HELLO_MIN, hl->addr, alen);
}

int
wire_hello_decode(const uint8_t *buf, size_t len, struct wire_hello *hl)
{
	size_t alen, i;

	if (len < WIRE_HELLO_MIN || len > WIRE_HELLO_MAX)
		return -EBADMSG;
	alen = buf[WIRE_KX_PK_SIZE + 16];
	if (alen == 0 || alen > WIRE_ADDR_MAX || len != WIRE_HELLO_MIN + alen)
		return -EBADMSG;
	for (i = 0; i < alen; i++) {
		uint8_t c = buf[WIRE_HELLO_MIN + i];

		if (c <= ' ' || c >= 0x7f)
			return -EBADMSG;
	}
	memcpy(hl->pk, buf, WIRE_KX_PK_SIZE);
	hl->stamp = wire_get_u64(buf + WIRE_KX_PK_SIZE);
	hl->held = wire_get_u64(buf + WIRE_KX_PK_SIZE + 8);
	hl->suites = buf[WIRE_KX_PK_SIZE + 17];
	memcpy(hl->addr, buf + WIRE_HELLO_MIN, alen);
	hl->addr[alen] = '\0';
	return 0;
}
