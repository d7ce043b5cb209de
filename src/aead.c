/*
 * aead: see aead.h. Each suite is a row of the table below; libcrypto is
 * only reached through its EVP interface, one cipher context per call, so
 * nothing here holds state between calls (and any thread may call). The
 * ciphers are fetched from libcrypto once: an implicit fetch at every
 * call costs about a microsecond.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
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
	AEAD_AES256_GCM,
	AEAD_CHACHA20_POLY1305,
	AEAD_XCHACHA20_POLY1305,
};

/* libsodium's calls for all three suites share these signatures. */
typedef int (*sodium_seal_fn)(unsigned char *c, unsigned long long *clen,
    const unsigned char *m, unsigned long long mlen, const unsigned char *ad,
    unsigned long long adlen, const unsigned char *nsec,
    const unsigned char *npub, const unsigned char *k);
typedef int (*sodium_open_fn)(unsigned char *m, unsigned char *nsec,
    const unsigned char *c, unsigned long long clen, const unsigned char *mac,
    const unsigned char *ad, unsigned long long adlen,
    const unsigned char *npub, const unsigned char *k);

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

static EVP_CIPHER *evp_chacha20_poly1305, *evp_aes256_gcm;
static pthread_once_t evp_once = PTHREAD_ONCE_INIT;

static void
evp_fetch(void)
{
	evp_chacha20_poly1305 = EVP_CIPHER_fetch(NULL, "ChaCha20-Poly1305", NULL);
	evp_aes256_gcm = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
}

/*
 * An AEAD with a 12-byte nonce and a 16-byte tag through EVP. enc 1 seals
 * in into out and writes the tag to tag; enc 0 checks tag and opens in
 * into out. EVP writes the plaintext before it checks the tag, so a
 * failed open wipes it: callers never see unauthenticated bytes.
 */
static int
evp_aead(const EVP_CIPHER *cipher, int enc, const uint8_t *key,
    const uint8_t *n, const uint8_t *ad, size_t adlen, const uint8_t *in,
    size_t len, uint8_t *tag, uint8_t *out)
{
	EVP_CIPHER_CTX *x;
	int rc = -EBADMSG, n2;

	if (cipher == NULL || (x = EVP_CIPHER_CTX_new()) == NULL)
		return -ENOMEM;
	if (!EVP_CipherInit_ex(x, cipher, NULL, key, n, enc))
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

/*
 * A suite: libsodium's code, and libcrypto's (evp, NULL: none) for
 * messages of AEAD_EVP_MIN bytes or more, the same construction.
 */
static const struct aead_impl {
	const char	*name;
	int		message_key;	/* seals under aead_message_key() */
	EVP_CIPHER	**evp;
	sodium_seal_fn	seal;
	sodium_open_fn	open;
} aead_impls[AEAD_SUITE_COUNT] = {
	[AEAD_XCHACHA20_POLY1305] = { "xchacha20-poly1305", 0, NULL,
	    crypto_aead_xchacha20poly1305_ietf_encrypt,
	    crypto_aead_xchacha20poly1305_ietf_decrypt_detached },
	[AEAD_CHACHA20_POLY1305] = { "chacha20-poly1305", 0,
	    &evp_chacha20_poly1305, crypto_aead_chacha20poly1305_ietf_encrypt,
	    crypto_aead_chacha20poly1305_ietf_decrypt_detached },
	/* Offered only where the CPU has AES-NI and carry-less multiply. */
	[AEAD_AES256_GCM] = { "aes256-gcm", 1, &evp_aes256_gcm,
	    crypto_aead_aes256gcm_encrypt,
	    crypto_aead_aes256gcm_decrypt_detached },
};

/* Fetched here too, not only by aead_offer(): a caller may seal or open
 * without having asked what is offered (a test, a tool). */
static const EVP_CIPHER *
impl_evp(const struct aead_impl *a)
{
	pthread_once(&evp_once, evp_fetch);
	return *a->evp;
}

static int
impl_seal(const struct aead_impl *a, const uint8_t *key, const uint8_t *n,
    const uint8_t *ad, size_t adlen, const uint8_t *m, size_t mlen,
    uint8_t *c)
{
	if (a->evp != NULL && mlen >= AEAD_EVP_MIN)
		return evp_aead(impl_evp(a), 1, key, n, ad, adlen, m, mlen,
		    c + mlen, c);
	a->seal(c, NULL, m, mlen, ad, adlen, NULL, n, key);
	return 0;
}

static int
impl_open(const struct aead_impl *a, const uint8_t *key, const uint8_t *n,
    const uint8_t *ad, size_t adlen, const uint8_t *c, size_t len,
    const uint8_t *tag, uint8_t *m)
{
	if (a->evp != NULL && len >= AEAD_EVP_MIN)
		return evp_aead(impl_evp(a), 0, key, n, ad, adlen, c, len,
		    (uint8_t *)tag, m);
	if (a->open(m, NULL, c, len, tag, ad, adlen, n, key) != 0)
		return -EBADMSG;
	return 0;
}

uint8_t
aead_offer(void)
{
	uint8_t m = AEAD_BIT(AEAD_XCHACHA20_POLY1305);

	pthread_once(&evp_once, evp_fetch);
	if (evp_chacha20_poly1305 != NULL)
		m |= AEAD_BIT(AEAD_CHACHA20_POLY1305);
	if (evp_aes256_gcm != NULL && sodium_init() >= 0 &&
	    crypto_aead_aes256gcm_is_available())
		m |= AEAD_BIT(AEAD_AES256_GCM);
	return m;
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

/*
 * The key of message seq under the session key k: GCM's bound on what
 * one key may seal (about 2^38 bytes before the birthday bound bites,
 * RFC 8446 section 5.5) is then a bound on one message, which
 * WIRE_MESSAGE_LIMIT keeps far below it, and a session needs no rekeying
 * however long it lives. BLAKE2b, about 0.3 us a call.
 */
static void
aead_message_key(uint8_t out[AEAD_KEY_SIZE], const uint8_t k[AEAD_KEY_SIZE],
    uint64_t seq)
{
	crypto_kdf_derive_from_key(out, AEAD_KEY_SIZE, seq, "gdmsgkey", k);
}

/* The key suite s seals message seq with: k itself, or its own. */
static const uint8_t *
aead_key(enum aead_suite s, const uint8_t *k, uint64_t seq,
    uint8_t buf[AEAD_KEY_SIZE])
{
	if (!aead_impls[s].message_key)
		return k;
	aead_message_key(buf, k, seq);
	return buf;
}

int
aead_seal(enum aead_suite s, const uint8_t key[AEAD_KEY_SIZE],
    uint64_t seq, uint32_t part, const uint8_t *ad, size_t adlen,
    const uint8_t *m, size_t mlen, uint8_t *c)
{
	uint8_t n[AEAD_NONCE_MAX], mk[AEAD_KEY_SIZE];
	int rc;

	if ((unsigned)s >= AEAD_SUITE_COUNT)
		return -EINVAL;
	make_nonce(n, seq, part);
	rc = impl_seal(&aead_impls[s], aead_key(s, key, seq, mk), n, ad, adlen,
	    m, mlen, c);
	sodium_memzero(mk, sizeof(mk));
	return rc;
}

int
aead_open(enum aead_suite s, const uint8_t key[AEAD_KEY_SIZE],
    uint64_t seq, uint32_t part, const uint8_t *ad, size_t adlen,
    const uint8_t *c, size_t clen, uint8_t *m)
{
	if (clen < AEAD_TAG_SIZE)
		return -EBADMSG;
	return aead_open_detached(s, key, seq, part, ad, adlen, c,
	    clen - AEAD_TAG_SIZE, c + clen - AEAD_TAG_SIZE, m);
}

int
aead_open_detached(enum aead_suite s, const uint8_t key[AEAD_KEY_SIZE],
    uint64_t seq, uint32_t part, const uint8_t *ad, size_t adlen,
    const uint8_t *c, size_t len, const uint8_t tag[AEAD_TAG_SIZE],
    uint8_t *m)
{
	uint8_t n[AEAD_NONCE_MAX], mk[AEAD_KEY_SIZE];
	int rc;

	if ((unsigned)s >= AEAD_SUITE_COUNT)
		return -EINVAL;
	make_nonce(n, seq, part);
	rc = impl_open(&aead_impls[s], aead_key(s, key, seq, mk), n, ad, adlen,
	    c, len, tag, m);
	sodium_memzero(mk, sizeof(mk));
	return rc;
}
