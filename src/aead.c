/*
 * aead: see aead.h. Each suite is a row of the table below; libcrypto is
 * only reached through its EVP interface, one cipher context per call, so
 * nothing here holds state between calls (and any thread may call).
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include <openssl/evp.h>
#include <sodium.h>

#include "aead.h"
#include "util.h"
#include "wire.h"

/*
 * Below this many bytes libsodium's ChaCha20-Poly1305 is faster than
 * libcrypto's, whose per-call context setup costs about 0.4 us (measured:
 * 64 B 463 vs 872 ns, 1 KiB 979 vs 1001 ns, 4 KiB 3.1 vs 1.6 us).
 */
#define AEAD_EVP_MIN	1024

/* Nonces: seq (u64 LE) | part (u32 LE), then zeros to the suite's size. */
#define AEAD_NONCE_MAX	24

/* The order both ends search their common suites in: fastest first. */
static const enum aead_suite aead_preference[] = {
	AEAD_CHACHA20_POLY1305,
	AEAD_XCHACHA20_POLY1305,
};

typedef int (*aead_seal_fn)(const uint8_t *key, const uint8_t *n,
    const uint8_t *ad, size_t adlen, const uint8_t *m, size_t mlen,
    uint8_t *c);
typedef int (*aead_open_fn)(const uint8_t *key, const uint8_t *n,
    const uint8_t *ad, size_t adlen, const uint8_t *c, size_t clen,
    uint8_t *m);

static int
xchacha_seal(const uint8_t *key, const uint8_t *n, const uint8_t *ad,
    size_t adlen, const uint8_t *m, size_t mlen, uint8_t *c)
{
	crypto_aead_xchacha20poly1305_ietf_encrypt(c, NULL, m, mlen, ad, adlen,
	    NULL, n, key);
	return 0;
}

static int
xchacha_open(const uint8_t *key, const uint8_t *n, const uint8_t *ad,
    size_t adlen, const uint8_t *c, size_t clen, uint8_t *m)
{
	if (crypto_aead_xchacha20poly1305_ietf_decrypt(m, NULL, NULL, c, clen,
	    ad, adlen, n, key) != 0)
		return -EBADMSG;
	return 0;
}

/* One EVP update may take at most INT_MAX bytes. */
static int
evp_update(EVP_CIPHER_CTX *x, uint8_t *out, const uint8_t *in, size_t len)
{
	int n;

	while (len > 0) {
		int step = len > (size_t)INT_MAX ? INT_MAX : (int)len;

		if (!EVP_CipherUpdate(x, out, &n, in, step) || n != step)
			return -EBADMSG;
		if (out != NULL)
			out += step;
		in += step;
		len -= (size_t)step;
	}
	return 0;
}

/*
 * ChaCha20-Poly1305 (RFC 8439) through EVP. enc 1 seals m into c and
 * appends the tag; enc 0 checks the tag at c + len and opens into m.
 * EVP writes the plaintext before it checks the tag, so a failed open
 * wipes it: callers never see unauthenticated bytes.
 */
static int
evp_chacha(int enc, const uint8_t *key, const uint8_t *n, const uint8_t *ad,
    size_t adlen, const uint8_t *in, size_t len, uint8_t *out)
{
	EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
	uint8_t *tag = (uint8_t *)(enc ? out : in) + len;
	int rc = -EBADMSG, n2;

	if (x == NULL)
		return -ENOMEM;
	if (!EVP_CipherInit_ex(x, EVP_chacha20_poly1305(), NULL, key, n, enc))
		goto out;
	if (evp_update(x, NULL, ad, adlen) != 0 ||
	    evp_update(x, out, in, len) != 0)
		goto out;
	if (!enc && !EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG,
	    AEAD_TAG_SIZE, tag))
		goto out;
	if (!EVP_CipherFinal_ex(x, out + len, &n2))
		goto out;
	if (enc && !EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG,
	    AEAD_TAG_SIZE, tag))
		goto out;
	rc = 0;
out:
	if (rc != 0 && !enc)
		sodium_memzero(out, len);
	EVP_CIPHER_CTX_free(x);
	return rc;
}

static int
chacha_seal(const uint8_t *key, const uint8_t *n, const uint8_t *ad,
    size_t adlen, const uint8_t *m, size_t mlen, uint8_t *c)
{
	if (mlen >= AEAD_EVP_MIN)
		return evp_chacha(1, key, n, ad, adlen, m, mlen, c);
	crypto_aead_chacha20poly1305_ietf_encrypt(c, NULL, m, mlen, ad, adlen,
	    NULL, n, key);
	return 0;
}

static int
chacha_open(const uint8_t *key, const uint8_t *n, const uint8_t *ad,
    size_t adlen, const uint8_t *c, size_t clen, uint8_t *m)
{
	if (clen - AEAD_TAG_SIZE >= AEAD_EVP_MIN)
		return evp_chacha(0, key, n, ad, adlen, c, clen - AEAD_TAG_SIZE,
		    m);
	if (crypto_aead_chacha20poly1305_ietf_decrypt(m, NULL, NULL, c, clen,
	    ad, adlen, n, key) != 0)
		return -EBADMSG;
	return 0;
}

static const struct aead_impl {
	const char	*name;
	size_t		nonce_size;
	aead_seal_fn	seal;
	aead_open_fn	open;
} aead_impls[AEAD_SUITE_COUNT] = {
	[AEAD_XCHACHA20_POLY1305] = { "xchacha20-poly1305",
	    crypto_aead_xchacha20poly1305_ietf_NPUBBYTES, xchacha_seal,
	    xchacha_open },
	[AEAD_CHACHA20_POLY1305] = { "chacha20-poly1305",
	    crypto_aead_chacha20poly1305_ietf_NPUBBYTES, chacha_seal,
	    chacha_open },
};

uint8_t
aead_offer(void)
{
	return AEAD_BIT(AEAD_XCHACHA20_POLY1305) |
	    AEAD_BIT(AEAD_CHACHA20_POLY1305);
}

enum aead_suite
aead_pick(uint8_t ours, uint8_t theirs)
{
	size_t i;

	for (i = 0; i < GD_ARRAY_SIZE(aead_preference); i++)
		if (ours & theirs & AEAD_BIT(aead_preference[i]))
			return aead_preference[i];
	return AEAD_XCHACHA20_POLY1305;
}

const char *
aead_name(enum aead_suite s)
{
	if ((unsigned)s >= AEAD_SUITE_COUNT)
		return "unknown";
	return aead_impls[s].name;
}

static void
make_nonce(uint8_t n[AEAD_NONCE_MAX], uint64_t seq, uint32_t part)
{
	memset(n, 0, AEAD_NONCE_MAX);
	wire_put_u64(n, seq);
	wire_put_u32(n + 8, part);
}

int
aead_seal(enum aead_suite s, const uint8_t key[AEAD_KEY_SIZE],
    uint64_t seq, uint32_t part, const uint8_t *ad, size_t adlen,
    const uint8_t *m, size_t mlen, uint8_t *c)
{
	uint8_t n[AEAD_NONCE_MAX];

	if ((unsigned)s >= AEAD_SUITE_COUNT)
		return -EINVAL;
	make_nonce(n, seq, part);
	return aead_impls[s].seal(key, n, ad, adlen, m, mlen, c);
}

int
aead_open(enum aead_suite s, const uint8_t key[AEAD_KEY_SIZE],
    uint64_t seq, uint32_t part, const uint8_t *ad, size_t adlen,
    const uint8_t *c, size_t clen, uint8_t *m)
{
	uint8_t n[AEAD_NONCE_MAX];

	if ((unsigned)s >= AEAD_SUITE_COUNT)
		return -EINVAL;
	if (clen < AEAD_TAG_SIZE)
		return -EBADMSG;
	make_nonce(n, seq, part);
	return aead_impls[s].open(key, n, ad, adlen, c, clen, m);
}
