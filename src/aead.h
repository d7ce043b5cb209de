/*
 * aead: the authenticated ciphers that session seals messages with, and
 * the rule by which two peers agree on one in the handshake. It owns the
 * nonce layout, so that "a nonce is never used twice under one key" can
 * be checked in one place: the nonce is the message's sequence number
 * and the part's index within it, and session gives every direction of
 * every session its own key and strictly growing sequences.
 *
 * Suites (measured on the project's Xeon VM, one core, 256 KiB messages,
 * `openssl speed -evp`: libsodium 1.0.18 XChaCha20-Poly1305 1.4 GB/s,
 * OpenSSL 3.0 libcrypto ChaCha20-Poly1305 4.4 GB/s, AES-256-GCM 6.5 GB/s):
 *
 *	xchacha20-poly1305  libsodium, 24-byte nonce seq|part|zeros; the
 *	                    floor every peer has, what wire version 1 used
 *	chacha20-poly1305   RFC 8439 (IETF, 12-byte nonce seq|part): the
 *	                    same construction from libsodium for small
 *	                    messages (no per-call setup) and from libcrypto
 *	                    for large ones (its AVX-512 code, 3x faster)
 *	aes256-gcm          AES-256-GCM (12-byte nonce seq|part), libsodium
 *	                    small, libcrypto large, as above; offered only
 *	                    where the CPU has AES-NI and PCLMULQDQ (speed and
 *	                    constant time). Each message is sealed under a
 *	                    key of its own, BLAKE2b-KDF(suite key, seq), so
 *	                    GCM's per-key data limit (about 2^38 bytes, RFC
 *	                    8446 section 5.5), which line rate reaches in
 *	                    minutes, bounds one message instead of a session
 *	                    that has no rekeying.
 *
 * Agreement: each side sends the mask of suites it offers; both take the
 * first suite of AEAD_PREFERENCE present in both masks, falling back to
 * xchacha20-poly1305, so the two ends agree without another round trip.
 */
#ifndef GD_AEAD_H
#define GD_AEAD_H

#include <stddef.h>
#include <stdint.h>

#define AEAD_KEY_SIZE	32
#define AEAD_TAG_SIZE	16

enum aead_suite {
	AEAD_XCHACHA20_POLY1305 = 0,
	AEAD_CHACHA20_POLY1305 = 1,
	AEAD_AES256_GCM = 2,
	AEAD_SUITE_COUNT
};

#define AEAD_BIT(s)	((uint8_t)(1u << (s)))

/* The suites this build offers, as AEAD_BIT()s. */
uint8_t aead_offer(void);
/* The suite two offers agree on (the same whichever side asks). */
enum aead_suite aead_pick(uint8_t ours, uint8_t theirs);
const char *aead_name(enum aead_suite s);

/*
 * Seal m[0..mlen) into c (mlen + AEAD_TAG_SIZE bytes; c may equal m)
 * with nonce (seq, part) and additional data ad. 0, or -ENOMEM when
 * libcrypto could not get a cipher context.
 */
int aead_seal(enum aead_suite s, const uint8_t key[AEAD_KEY_SIZE],
    uint64_t seq, uint32_t part, const uint8_t *ad, size_t adlen,
    const uint8_t *m, size_t mlen, uint8_t *c);
/* Open c[0..clen) into m (clen - AEAD_TAG_SIZE bytes; m may equal c).
 * 0, -EBADMSG (forged, truncated, wrong key or nonce) or -ENOMEM. */
int aead_open(enum aead_suite s, const uint8_t key[AEAD_KEY_SIZE],
    uint64_t seq, uint32_t part, const uint8_t *ad, size_t adlen,
    const uint8_t *c, size_t clen, uint8_t *m);
/* The same with the tag apart from the len bytes of ciphertext c (a body
 * chunk received in place, its tag beside it). */
int aead_open_detached(enum aead_suite s, const uint8_t key[AEAD_KEY_SIZE],
    uint64_t seq, uint32_t part, const uint8_t *ad, size_t adlen,
    const uint8_t *c, size_t len, const uint8_t tag[AEAD_TAG_SIZE],
    uint8_t *m);

#endif
