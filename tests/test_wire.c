/*
 * test_wire: header encode/decode round trips and every bound the decoder
 * enforces, the chunk arithmetic, the handshake body codec, and random
 * input (which must only ever be rejected, never read out of bounds).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "wire.h"

static const struct wire_limits lim = { 0x1122334455667788ull, 1 << 24 };

static struct wire_header
good_header(uint64_t len, int inl)
{
	struct wire_header h;

	memset(&h, 0, sizeof(h));
	h.version = WIRE_VERSION;
	h.type = WIRE_TYPE_APP_MIN + 3;
	h.flags = inl ? WIRE_F_INLINE : 0;
	h.job = lim.job;
	h.sender = 0xa1a2a3a4a5a6a7a8ull;
	h.receiver = 42;
	h.seq = 0x0102030405060708ull;
	h.payload_len = len;
	h.chunk_count = inl ? 0 : wire_chunk_count(len);
	return h;
}

/* Decode buf[0..len) and return the reason (-1 if accepted). */
static int
why(const uint8_t *buf, size_t len)
{
	struct wire_header h;
	enum wire_reject r;
	int rc = wire_frame_decode(buf, len, &lim, &h, &r);

	if (rc == 0)
		return -1;
	CHECK(rc == -EBADMSG);
	return (int)r;
}

static int
why_header(const struct wire_header *h, size_t len)
{
	static uint8_t buf[WIRE_FRAME_MAX];

	memset(buf, 0, sizeof(buf));
	wire_header_encode(h, buf);
	return why(buf, len);
}

static void
test_roundtrip(void)
{
	uint8_t buf[WIRE_HEADER_SIZE + 100 + WIRE_MAC_SIZE];
	struct wire_header h = good_header(100, 1), d;
	enum wire_reject r;

	memset(buf, 0xee, sizeof(buf));
	wire_header_encode(&h, buf);
	CHECK(memcmp(buf, "GSPD", 4) == 0);
	CHECK(buf[40] == 100 && buf[41] == 0);	/* little-endian length */
	CHECK(wire_frame_decode(buf, sizeof(buf), &lim, &d, &r) == 0);
	CHECK(d.version == h.version && d.type == h.type);
	CHECK(d.flags == h.flags && d.job == h.job);
	CHECK(d.sender == h.sender && d.receiver == h.receiver);
	CHECK(d.seq == h.seq && d.payload_len == 100);
	CHECK(d.chunk_index == 0 && d.chunk_count == 0);
	CHECK(wire_get_u64(buf + 32) == h.seq);
}

static void
test_bounds(void)
{
	struct wire_header h;
	size_t inl = WIRE_HEADER_SIZE + WIRE_MAC_SIZE;
	uint8_t buf[WIRE_FRAME_MAX];
	size_t n;

	/* Length: nothing shorter than header + MAC is looked at. */
	for (n = 0; n < inl; n++) {
		h = good_header(0, 1);
		CHECK(why_header(&h, n) == WIRE_REJ_MALFORMED);
	}
	h = good_header(0, 1);
	CHECK(why_header(&h, inl) == -1);
	/* Inline payload length must match the bytes received exactly. */
	h = good_header(10, 1);
	CHECK(why_header(&h, inl + 10) == -1);
	CHECK(why_header(&h, inl + 9) == WIRE_REJ_MALFORMED);
	CHECK(why_header(&h, inl + 11) == WIRE_REJ_MALFORMED);
	h = good_header(UINT64_MAX, 1);
	CHECK(why_header(&h, inl) == WIRE_REJ_OVERSIZE);
	/* Magic, version, job. */
	h = good_header(0, 1);
	wire_header_encode(&h, buf);
	buf[0] ^= 1;
	CHECK(why(buf, inl) == WIRE_REJ_MALFORMED);
	h.version = WIRE_VERSION + 1;
	CHECK(why_header(&h, inl) == WIRE_REJ_VERSION);
	h.version = 0;
	CHECK(why_header(&h, inl) == WIRE_REJ_VERSION);
	h = good_header(0, 1);
	h.job++;
	CHECK(why_header(&h, inl) == WIRE_REJ_JOB);
	/* Types: 0 and the reserved transport range are malformed. */
	h = good_header(0, 1);
	h.type = 0;
	CHECK(why_header(&h, inl) == WIRE_REJ_MALFORMED);
	h.type = WIRE_T_ACK + 1;
	CHECK(why_header(&h, inl) == WIRE_REJ_MALFORMED);
	h.type = WIRE_TYPE_APP_MIN - 1;
	CHECK(why_header(&h, inl) == WIRE_REJ_MALFORMED);
	h.type = WIRE_T_HELLO;
	CHECK(why_header(&h, inl) == -1);
	h.type = WIRE_TYPE_APP_MAX;
	CHECK(why_header(&h, inl) == -1);
	/* Flags and chunk fields. */
	h = good_header(0, 1);
	h.flags |= 0x8000;
	CHECK(why_header(&h, inl) == WIRE_REJ_MALFORMED);
	h = good_header(0, 1);
	h.chunk_index = 1;
	CHECK(why_header(&h, inl) == WIRE_REJ_MALFORMED);
	h = good_header(0, 1);
	h.chunk_count = 1;
	CHECK(why_header(&h, inl) == WIRE_REJ_MALFORMED);
	/* max_message_size, and the hard ceiling. */
	h = good_header(lim.max_message_size, 0);
	CHECK(why_header(&h, inl) == -1);
	h = good_header(lim.max_message_size + 1, 0);
	CHECK(why_header(&h, inl) == WIRE_REJ_OVERSIZE);
	{
		struct wire_limits big = { lim.job, UINT64_MAX };
		struct wire_header d;
		enum wire_reject r;

		h = good_header(WIRE_MESSAGE_LIMIT + 1, 0);
		wire_header_encode(&h, buf);
		CHECK(wire_frame_decode(buf, inl, &big, &d, &r) == -EBADMSG &&
		    r == WIRE_REJ_OVERSIZE);
	}
	/* Body announcements: header + MAC only, right chunk count. */
	h = good_header(3 * WIRE_CHUNK_SIZE + 1, 0);
	CHECK(h.chunk_count == 4);
	CHECK(why_header(&h, inl) == -1);
	CHECK(why_header(&h, inl + 1) == WIRE_REJ_MALFORMED);
	h.chunk_count = 3;
	CHECK(why_header(&h, inl) == WIRE_REJ_MALFORMED);
	h.chunk_count = 5;
	CHECK(why_header(&h, inl) == WIRE_REJ_MALFORMED);
	h = good_header(0, 0);
	CHECK(why_header(&h, inl) == WIRE_REJ_MALFORMED);
	h = good_header(100, 0);
	h.type = WIRE_T_ACK;
	CHECK(why_header(&h, inl) == WIRE_REJ_MALFORMED);
}

static void
test_chunks(void)
{
	CHECK(wire_chunk_count(0) == 0);
	CHECK(wire_chunk_count(1) == 1);
	CHECK(wire_chunk_count(WIRE_CHUNK_SIZE) == 1);
	CHECK(wire_chunk_count(WIRE_CHUNK_SIZE + 1) == 2);
	CHECK(wire_chunk_count(64u << 20) == (64u << 20) / WIRE_CHUNK_SIZE);
	CHECK(wire_body_size(0) == 0);
	CHECK(wire_body_size(1) == 1 + WIRE_MAC_SIZE);
	CHECK(wire_body_size(WIRE_CHUNK_SIZE + 1) ==
	    WIRE_CHUNK_SIZE + 1 + 2 * WIRE_MAC_SIZE);
	CHECK(wire_chunk_len(WIRE_CHUNK_SIZE + 5, 0) == WIRE_CHUNK_SIZE);
	CHECK(wire_chunk_len(WIRE_CHUNK_SIZE + 5, 1) == 5);
	CHECK(wire_chunk_len(WIRE_CHUNK_SIZE + 5, 2) == 0);
	CHECK(wire_chunk_len(2 * WIRE_CHUNK_SIZE, 1) == WIRE_CHUNK_SIZE);
	CHECK(wire_chunk_len(WIRE_MESSAGE_LIMIT, wire_chunk_count(
	    WIRE_MESSAGE_LIMIT) - 1) == WIRE_CHUNK_SIZE);
}

static void
test_hello(void)
{
	struct wire_hello a, b;
	uint8_t buf[WIRE_HELLO_MAX + 8];
	size_t n;

	memset(&a, 0, sizeof(a));
	memset(a.pk, 0x5a, sizeof(a.pk));
	a.stamp = 0x1234567890abcdefull;
	a.held = 0x0fedcba987654321ull;
	a.suites = 3;
	strcpy(a.addr, "127.0.0.1:20001");
	n = wire_hello_size(&a);
	CHECK(n == WIRE_HELLO_MIN + strlen(a.addr));
	wire_hello_encode(&a, buf);
	CHECK(wire_hello_decode(buf, n, &b) == 0);
	CHECK(memcmp(a.pk, b.pk, sizeof(a.pk)) == 0 && b.stamp == a.stamp);
	CHECK(b.held == a.held && b.suites == a.suites);
	CHECK(strcmp(b.addr, a.addr) == 0);
	CHECK(wire_hello_decode(buf, n - 1, &b) == -EBADMSG);
	CHECK(wire_hello_decode(buf, n + 1, &b) == -EBADMSG);
	CHECK(wire_hello_decode(buf, WIRE_HELLO_MIN - 1, &b) == -EBADMSG);
	buf[WIRE_KX_PK_SIZE + 16] = 0;	/* the address length */
	CHECK(wire_hello_decode(buf, WIRE_HELLO_MIN, &b) == -EBADMSG);
	wire_hello_encode(&a, buf);
	buf[WIRE_HELLO_MIN + 3] = '\n';
	CHECK(wire_hello_decode(buf, n, &b) == -EBADMSG);
	/* The longest address fits, one more byte does not decode. */
	memset(a.addr, 'x', WIRE_ADDR_MAX);
	a.addr[WIRE_ADDR_MAX] = '\0';
	n = wire_hello_size(&a);
	CHECK(n == WIRE_HELLO_MAX);
	wire_hello_encode(&a, buf);
	CHECK(wire_hello_decode(buf, n, &b) == 0);
	CHECK(strlen(b.addr) == WIRE_ADDR_MAX);
	CHECK(wire_hello_decode(buf, n + 1, &b) == -EBADMSG);
}

static void
test_random(void)
{
	uint8_t *buf;
	uint64_t s = 88172645463325252ull;
	struct wire_header h;
	enum wire_reject r;
	int i, accepted = 0;
	size_t j, n;

	for (i = 0; i < 20000; i++) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		n = s % 300;
		/* Exactly sized heap buffers, so a stray read is caught. */
		buf = malloc(n ? n : 1);
		for (j = 0; j < n; j++) {
			s ^= s << 13, s ^= s >> 7, s ^= s << 17;
			buf[j] = (uint8_t)s;
		}
		/* Half of them get a valid prefix to go deeper. */
		if (i % 2 && n >= WIRE_HEADER_SIZE) {
			h = good_header(s % 400, s & 1);
			wire_header_encode(&h, buf);
		}
		if (wire_frame_decode(buf, n, &lim, &h, &r) == 0)
			accepted++;
		free(buf);
	}
	CHECK(accepted < 20000);
}

static void
test_names(void)
{
	CHECK(strcmp(wire_reject_name(WIRE_REJ_BAD_MAC), "bad_mac") == 0);
	CHECK(strcmp(wire_reject_name(WIRE_REJ_COUNT), "unknown") == 0);
	CHECK(strcmp(wire_type_name(WIRE_T_HELLO), "hello") == 0);
	CHECK(wire_type_name(WIRE_TYPE_APP_MIN) == NULL);
}

static const struct check_case cases[] = {
	{ "wire_names", test_names },
	{ "wire_roundtrip", test_roundtrip },
	{ "wire_bounds", test_bounds },
	{ "wire_chunks", test_chunks },
	{ "wire_hello", test_hello },
	{ "wire_random", test_random },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return check_main(argc, argv, cases, "test_wire");
}
