/*
 * test_aead: the suites (RFC 8439's test vector; libcrypto and libsodium
 * give the same bytes on both sides of the size where aead switches
 * between them; AES-256-GCM seals each message under its own key, the
 * documented derivation; round trip, in place, every tampered byte, wrong key,
 * nonce or additional data refused; distinct nonces across messages and
 * parts) and the agreement (the same pick from either side, whatever the
 * masks, and sessions that end up on the same suite in a real handshake,
 * also with a peer that offers less or nothing).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "aead.h"
#include "check.h"
#include "session.h"
#include "wire.h"

static const enum aead_suite suites[] = {
	AEAD_XCHACHA20_POLY1305, AEAD_CHACHA20_POLY1305, AEAD_AES256_GCM,
};

/* AES-256-GCM is offered only on CPUs with AES-NI and carry-less
 * multiply; where it is, both ends of a handshake prefer it. */
static int
have_aes(void)
{
	return (aead_offer() & AEAD_BIT(AEAD_AES256_GCM)) != 0;
}

static enum aead_suite
best(void)
{
	return have_aes() ? AEAD_AES256_GCM : AEAD_CHACHA20_POLY1305;
}

static void
test_pick(void)
{
	unsigned a, b;

	CHECK(aead_offer() & AEAD_BIT(AEAD_XCHACHA20_POLY1305));
	CHECK(aead_offer() & AEAD_BIT(AEAD_CHACHA20_POLY1305));
	CHECK(have_aes() == crypto_aead_aes256gcm_is_available());
	CHECK(aead_pick(aead_offer(), aead_offer()) == best());
	/* A peer on a CPU without AES instructions gets ChaCha20. */
	CHECK(aead_pick(aead_offer(), AEAD_BIT(AEAD_XCHACHA20_POLY1305) |
	    AEAD_BIT(AEAD_CHACHA20_POLY1305)) == AEAD_CHACHA20_POLY1305);
	/* A peer that offers only the floor, or nothing, gets the floor. */
	CHECK(aead_pick(aead_offer(), AEAD_BIT(AEAD_XCHACHA20_POLY1305)) ==
	    AEAD_XCHACHA20_POLY1305);
	CHECK(aead_pick(aead_offer(), 0) == AEAD_XCHACHA20_POLY1305);
	/* Bits of suites this build does not know change nothing. */
	CHECK(aead_pick(aead_offer(), 0xf0 | aead_offer()) == best());
	CHECK(aead_pick(0xf0, 0xf0) == AEAD_XCHACHA20_POLY1305);
	/* Both ends agree whatever the two masks are. */
	for (a = 0; a < 256; a++)
		for (b = 0; b < 256; b++)
			CHECK(aead_pick((uint8_t)a, (uint8_t)b) ==
			    aead_pick((uint8_t)b, (uint8_t)a));
	CHECK(strcmp(aead_name(AEAD_CHACHA20_POLY1305), "chacha20-poly1305") == 0);
	CHECK(strcmp(aead_name(AEAD_AES256_GCM), "aes256-gcm") == 0);
	CHECK(strcmp(aead_name(AEAD_SUITE_COUNT), "unknown") == 0);
}

/* RFC 8439 section 2.8.2; its nonce 07000000 4041424344454647 is
 * sequence 0x4342414000000007, part 0x47464544 in our layout. */
static void
test_rfc8439(void)
{
	static const char pt[] = "Ladies and Gentlemen of the class of '99: "
	    "If I could offer you only one tip for the future, sunscreen "
	    "would be it.";
	static const uint8_t ad[] = { 0x50, 0x51, 0x52, 0x53, 0xc0, 0xc1,
	    0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7 };
	static const uint8_t tag[AEAD_TAG_SIZE] = { 0x1a, 0xe1, 0x0b, 0x59,
	    0x4f, 0x09, 0xe2, 0x6a, 0x7e, 0x90, 0x2e, 0xcb, 0xd0, 0x60, 0x06,
	    0x91 };
	static const uint8_t c0[4] = { 0xd3, 0x1a, 0x8d, 0x34 };
	uint8_t key[AEAD_KEY_SIZE], c[sizeof(pt) - 1 + AEAD_TAG_SIZE];
	size_t i, n = sizeof(pt) - 1;

	for (i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)(0x80 + i);
	CHECK(aead_seal(AEAD_CHACHA20_POLY1305, key, 0x4342414000000007ull,
	    0x47464544u, ad, sizeof(ad), (const uint8_t *)pt, n, c) == 0);
	CHECK(memcmp(c, c0, sizeof(c0)) == 0);
	CHECK(memcmp(c + n, tag, sizeof(tag)) == 0);
}

/* A known-answer check's inputs: a random key, header and 70001-byte
 * message, and the nonce of sequence 42, part 3. */
static void
kat_setup(uint8_t key[AEAD_KEY_SIZE], uint8_t ad[WIRE_HEADER_SIZE],
    uint8_t n[12], uint8_t *m)
{
	randombytes_buf(key, AEAD_KEY_SIZE);
	randombytes_buf(ad, WIRE_HEADER_SIZE);
	randombytes_buf(m, 70001);
	memset(n, 0, 12);
	wire_put_u64(n, 42);
	wire_put_u32(n + 8, 3);
}

/* libcrypto (large) and libsodium (small) agree byte for byte. */
static void
test_same_bytes(void)
{
	static const size_t sizes[] = { 1000, 1023, 1024, 1025, 4096, 70001 };
	uint8_t key[AEAD_KEY_SIZE], n[12], ad[WIRE_HEADER_SIZE];
	uint8_t *m = malloc(70001), *c = malloc(70001 + AEAD_TAG_SIZE);
	uint8_t *ref = malloc(70001 + AEAD_TAG_SIZE);
	size_t i;

	kat_setup(key, ad, n, m);
	for (i = 0; i < GD_ARRAY_SIZE(sizes); i++) {
		crypto_aead_chacha20poly1305_ietf_encrypt(ref, NULL, m,
		    sizes[i], ad, sizeof(ad), NULL, n, key);
		CHECK(aead_seal(AEAD_CHACHA20_POLY1305, key, 42, 3, ad,
		    sizeof(ad), m, sizes[i], c) == 0);
		CHECK(memcmp(c, ref, sizes[i] + AEAD_TAG_SIZE) == 0);
	}
	free(m);
	free(c);
	free(ref);
}

/*
 * AES-256-GCM seals message seq under BLAKE2b-KDF(session key, seq,
 * "gdmsgkey"), libcrypto and libsodium alike, so every message has a key
 * of its own: the layout two builds must share, pinned here against
 * libsodium's GCM with the key derived by hand.
 */
static void
test_aes_message_key(void)
{
	static const size_t sizes[] = { 0, 64, 1023, 1024, 1025, 70001 };
	uint8_t key[AEAD_KEY_SIZE], mk[AEAD_KEY_SIZE], n[12];
	uint8_t ad[WIRE_HEADER_SIZE];
	uint8_t *m = malloc(70001), *c = malloc(70001 + AEAD_TAG_SIZE);
	uint8_t *ref = malloc(70001 + AEAD_TAG_SIZE);
	size_t i;

	if (!have_aes()) {
		printf("# test_aead: no AES instructions, AES-256-GCM not offered\n");
		goto out;
	}
	kat_setup(key, ad, n, m);
	crypto_kdf_derive_from_key(mk, sizeof(mk), 42, "gdmsgkey", key);
	for (i = 0; i < GD_ARRAY_SIZE(sizes); i++) {
		crypto_aead_aes256gcm_encrypt(ref, NULL, m, sizes[i], ad,
		    sizeof(ad), NULL, n, mk);
		CHECK(aead_seal(AEAD_AES256_GCM, key, 42, 3, ad, sizeof(ad), m,
		    sizes[i], c) == 0);
		CHECK(memcmp(c, ref, sizes[i] + AEAD_TAG_SIZE) == 0);
		/* The session key itself seals nothing. */
		crypto_aead_aes256gcm_encrypt(ref, NULL, m, sizes[i], ad,
		    sizeof(ad), NULL, n, key);
		CHECK(memcmp(c, ref, sizes[i] + AEAD_TAG_SIZE) != 0);
	}
out:
	free(m);
	free(c);
	free(ref);
}

/* What a refused open leaves in its output: the 0xee it was filled with
 * (libsodium checks the tag first) or zeros (EVP's plaintext, wiped).
 * Comparing with the message instead failed whenever a 1-byte message
 * happened to be one of those two values (1 run in 128). */
static int
untouched_or_wiped(const uint8_t *d, size_t len)
{
	size_t i;

	for (i = 1; i < len; i++)
		if (d[i] != d[0])
			return 0;
	return len == 0 || d[0] == 0xee || d[0] == 0;
}

static void
check_suite(enum aead_suite s, size_t len)
{
	uint8_t key[AEAD_KEY_SIZE], other[AEAD_KEY_SIZE], ad[WIRE_HEADER_SIZE];
	uint8_t *m = malloc(len + 1), *c = malloc(len + AEAD_TAG_SIZE);
	uint8_t *d = malloc(len + AEAD_TAG_SIZE);
	size_t clen = len + AEAD_TAG_SIZE, i, step;

	randombytes_buf(key, sizeof(key));
	randombytes_buf(other, sizeof(other));
	randombytes_buf(ad, sizeof(ad));
	randombytes_buf(m, len + 1);
	CHECK(aead_seal(s, key, 9, 2, ad, sizeof(ad), m, len, c) == 0);
	CHECK(aead_open(s, key, 9, 2, ad, sizeof(ad), c, clen, d) == 0);
	CHECK(memcmp(d, m, len) == 0);
	/* Wrong key, sequence, part, additional data, length. */
	CHECK(aead_open(s, other, 9, 2, ad, sizeof(ad), c, clen, d) == -EBADMSG);
	CHECK(aead_open(s, key, 10, 2, ad, sizeof(ad), c, clen, d) == -EBADMSG);
	CHECK(aead_open(s, key, 9, 3, ad, sizeof(ad), c, clen, d) == -EBADMSG);
	CHECK(aead_open(s, key, 9, 2, ad, sizeof(ad) - 1, c, clen, d) ==
	    -EBADMSG);
	CHECK(aead_open(s, key, 9, 2, ad, sizeof(ad), c, clen - 1, d) ==
	    -EBADMSG);
	CHECK(aead_open(s, key, 9, 2, ad, sizeof(ad), c, AEAD_TAG_SIZE - 1,
	    d) == -EBADMSG);
	/* Tampered bytes (every one of small messages), and a refused
	 * open leaves no plaintext behind. */
	step = len > 4096 ? len / 61 + 1 : 1;
	for (i = 0; i < clen; i += step) {
		c[i] ^= 0x10;
		memset(d, 0xee, len);
		CHECK(aead_open(s, key, 9, 2, ad, sizeof(ad), c, clen, d) ==
		    -EBADMSG);
		CHECK(untouched_or_wiped(d, len));
		c[i] ^= 0x10;
	}
	ad[5] ^= 1;
	CHECK(aead_open(s, key, 9, 2, ad, sizeof(ad), c, clen, d) == -EBADMSG);
	ad[5] ^= 1;
	/* In place, both ways. */
	memcpy(d, m, len);
	CHECK(aead_seal(s, key, 9, 2, ad, sizeof(ad), d, len, d) == 0);
	CHECK(memcmp(d, c, clen) == 0);
	CHECK(aead_open(s, key, 9, 2, ad, sizeof(ad), d, clen, d) == 0);
	CHECK(memcmp(d, m, len) == 0);
	free(m);
	free(c);
	free(d);
}

static int
cmp16(const void *a, const void *b)
{
	return memcmp(a, b, 16);
}

/* No two (sequence, part) pairs share a keystream: the first 16 bytes of
 * sealed zeros differ across 4000 messages and 4 parts each. */
static void
check_nonces(enum aead_suite s)
{
	enum { N = 4000, P = 4 };
	uint8_t key[AEAD_KEY_SIZE], z[16] = { 0 }, c[16 + AEAD_TAG_SIZE];
	uint8_t (*seen)[16] = malloc(sizeof(*seen) * N * P);
	size_t i, j, k = 0;

	randombytes_buf(key, sizeof(key));
	for (i = 1; i <= N; i++)
		for (j = 0; j < P; j++) {
			CHECK(aead_seal(s, key, i, (uint32_t)j, NULL, 0, z,
			    sizeof(z), c) == 0);
			memcpy(seen[k++], c, 16);
		}
	qsort(seen, k, 16, cmp16);
	for (i = 1; i < k; i++)
		CHECK(memcmp(seen[i - 1], seen[i], 16) != 0);
	free(seen);
}

static void
test_suites(void)
{
	static const size_t sizes[] = { 0, 1, 100, 1023, 1024, 1025, 65536,
	    WIRE_CHUNK_SIZE + 3 };
	size_t i, j;

	for (i = 0; i < GD_ARRAY_SIZE(suites); i++) {
		if (!(aead_offer() & AEAD_BIT(suites[i])))
			continue;
		for (j = 0; j < GD_ARRAY_SIZE(sizes); j++)
			check_suite(suites[i], sizes[j]);
		check_nonces(suites[i]);
	}
	CHECK(aead_seal(AEAD_SUITE_COUNT, (uint8_t[32]){ 0 }, 1, 0, NULL, 0,
	    NULL, 0, (uint8_t[16]){ 0 }) == -EINVAL);
}

/* A handshake between two peers offering ci_suites and cr_suites: both
 * sessions on the expected suite, and traffic flows both ways. */
static void
check_agree(uint8_t ci_suites, uint8_t cr_suites, enum aead_suite want)
{
	struct session_ctx ci, cr;
	struct session out, in;
	struct session_hs hs;
	struct wire_header h;
	struct wire_hello peer;
	enum wire_reject why;
	uint8_t ack[SESSION_HELLO_FRAME_MAX], ad[WIRE_HEADER_SIZE];
	uint8_t m[2000], c[2000 + WIRE_MAC_SIZE], d[2000];
	size_t ack_len;

	CHECK(session_ctx_init(&ci, (uint8_t[32]){ 1 }, "job", 1, 1 << 20) == 0);
	CHECK(session_ctx_init(&cr, (uint8_t[32]){ 1 }, "job", 2, 1 << 20) == 0);
	ci.suites = ci_suites;
	cr.suites = cr_suites;
	CHECK(session_hello_make(&ci, &hs, "127.0.0.1:1", 0) == 0);
	CHECK(wire_frame_decode(hs.hello, hs.hello_len, &cr.lim, &h, &why) == 0);
	CHECK(session_hello_accept(&cr, hs.hello, hs.hello_len, &h,
	    "127.0.0.1:2", &peer, &in, ack, &ack_len) == 0);
	CHECK(peer.suites == ci_suites);
	CHECK(wire_frame_decode(ack, ack_len, &ci.lim, &h, &why) == 0);
	CHECK(session_hello_finish(&ci, &hs, ack, ack_len, &h, &peer, &out) == 0);
	CHECK(peer.suites == cr_suites);
	CHECK(out.suite == want && in.suite == want);
	randombytes_buf(m, sizeof(m));
	randombytes_buf(ad, sizeof(ad));
	CHECK(session_seal(&out, ad, 1, 0, m, sizeof(m), c) == 0);
	CHECK(session_open(&in, ad, 1, 0, c, sizeof(c), d) == 0);
	CHECK(memcmp(m, d, sizeof(m)) == 0);
	CHECK(session_seal(&in, ad, 1, 0, m, 10, c) == 0);
	CHECK(session_open(&out, ad, 1, 0, c, 10 + WIRE_MAC_SIZE, d) == 0);
	/* The other direction's key, or the other suite, does not open. */
	CHECK(session_seal(&out, ad, 2, 0, m, sizeof(m), c) == 0);
	CHECK(session_open(&out, ad, 2, 0, c, sizeof(c), d) == -EBADMSG);
	in.suite = want == AEAD_XCHACHA20_POLY1305 ? AEAD_CHACHA20_POLY1305 :
	    AEAD_XCHACHA20_POLY1305;
	CHECK(session_open(&in, ad, 2, 0, c, sizeof(c), d) == -EBADMSG);
	session_wipe(&out);
	session_wipe(&in);
	session_ctx_wipe(&ci);
	session_ctx_wipe(&cr);
}

static void
test_agree(void)
{
	uint8_t all = aead_offer(), floor = AEAD_BIT(AEAD_XCHACHA20_POLY1305);
	uint8_t no_aes = floor | AEAD_BIT(AEAD_CHACHA20_POLY1305);

	check_agree(all, all, best());
	check_agree(all, no_aes, AEAD_CHACHA20_POLY1305);
	check_agree(no_aes, all, AEAD_CHACHA20_POLY1305);
	check_agree(all, floor, AEAD_XCHACHA20_POLY1305);
	check_agree(floor, all, AEAD_XCHACHA20_POLY1305);
	check_agree(0, all, AEAD_XCHACHA20_POLY1305);
	check_agree(all | 0x80, all, best());
}

static const struct check_case cases[] = {
	{ "aead_pick", test_pick },
	{ "aead_rfc8439", test_rfc8439 },
	{ "aead_same_bytes", test_same_bytes },
	{ "aead_aes_message_key", test_aes_message_key },
	{ "aead_suites", test_suites },
	{ "aead_agree", test_agree },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	if (sodium_init() < 0) {
		fprintf(stderr, "libsodium failed to initialise\n");
		return 1;
	}
	return check_main(argc, argv, cases, "test_aead");
}
