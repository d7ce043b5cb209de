/*
 * session: see session.h. All secret material lives in caller-owned
 * structs so that whoever owns a session also owns wiping it.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "session.h"

#define KDF_ID_HANDSHAKE	1
#define KDF_ID_TAG		2
#define KDF_ID_AEAD		16	/* + the suite */

int
session_key_generate(const char *path, struct errbuf *err)
{
	uint8_t key[SESSION_KEY_SIZE];
	ssize_t n;
	int fd, rc = 0;

	if (sodium_init() < 0)
		return errbuf_set(err, -EIO, "libsodium failed to initialise");
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		if (rc == -EEXIST)
			return errbuf_set(err, rc, "%s already exists: "
			    "refusing to overwrite a key file", path);
		return errbuf_set(err, rc, "cannot create %s: %s", path,
		    strerror(errno));
	}
	randombytes_buf(key, sizeof(key));
	n = write(fd, key, sizeof(key));
	sodium_memzero(key, sizeof(key));
	if (n != (ssize_t)sizeof(key) || fsync(fd) != 0) {
		rc = errbuf_set(err, n < 0 ? -errno : -EIO,
		    "cannot write %s", path);
		close(fd);
		unlink(path);
		return rc;
	}
	if (close(fd) != 0)
		return errbuf_set(err, -errno, "cannot write %s", path);
	return 0;
}

int
session_key_load(const char *path, uint8_t key[SESSION_KEY_SIZE],
    struct errbuf *err)
{
	struct stat st;
	uint8_t extra;
	ssize_t n;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errbuf_set(err, -errno, "cannot open key file %s: %s",
		    path, strerror(errno));
	if (fstat(fd, &st) != 0) {
		rc = errbuf_set(err, -errno, "cannot stat key file %s", path);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = errbuf_set(err, -EINVAL, "key file %s is not a regular "
		    "file", path);
		goto out;
	}
	if ((st.st_mode & 077) != 0) {
		rc = errbuf_set(err, -EPERM, "key file %s has mode %04o: "
		    "group and others must have no access (chmod 600 %s)",
		    path, (unsigned)(st.st_mode & 07777), path);
		goto out;
	}
	if (st.st_size != SESSION_KEY_SIZE) {
		rc = errbuf_set(err, -EINVAL, "key file %s holds %lld bytes, "
		    "not %d (make one with gossipctl keygen)", path,
		    (long long)st.st_size, SESSION_KEY_SIZE);
		goto out;
	}
	n = read(fd, key, SESSION_KEY_SIZE);
	/* The size may change between fstat and read; insist on EOF. */
	if (n != SESSION_KEY_SIZE || read(fd, &extra, 1) != 0) {
		sodium_memzero(key, SESSION_KEY_SIZE);
		rc = errbuf_set(err, -EINVAL, "key file %s is not exactly %d "
		    "bytes", path, SESSION_KEY_SIZE);
	}
out:
	close(fd);
	return rc;
}

uint64_t
session_job_id(const char *job)
{
	uint8_t h[crypto_generichash_BYTES_MIN];

	crypto_generichash(h, sizeof(h), (const uint8_t *)job, strlen(job),
	    NULL, 0);
	return wire_get_u64(h);
}

int
session_ctx_init(struct session_ctx *c, const uint8_t key[SESSION_KEY_SIZE],
    const char *job, uint64_t self_id, uint64_t max_message_size)
{
	if (sodium_init() < 0)
		return -EIO;
	memset(c, 0, sizeof(*c));
	crypto_kdf_derive_from_key(c->hs_key, sizeof(c->hs_key),
	    KDF_ID_HANDSHAKE, "gdhshake", key);
	c->self_id = self_id;
	c->lim.job = session_job_id(job);
	c->lim.max_message_size = max_message_size;
	c->suites = aead_offer();
	return 0;
}

void
session_ctx_wipe(struct session_ctx *c)
{
	sodium_memzero(c, sizeof(*c));
}

uint64_t
session_stamp(void)
{
	static uint64_t last;
	struct timespec ts;
	uint64_t now;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (now <= last)
		now = last + 1;
	last = now;
	return now;
}

/* Build header | hello body | MAC, the MAC also covering prefix. */
static size_t
hello_frame(const struct session_ctx *c, uint8_t type, uint64_t receiver,
    const struct wire_hello *hl, const uint8_t *prefix, size_t prefix_len,
    uint8_t *out)
{
	crypto_generichash_state st;
	struct wire_header h;
	size_t blen = wire_hello_size(hl);

	memset(&h, 0, sizeof(h));
	h.version = WIRE_VERSION;
	h.type = type;
	h.flags = WIRE_F_INLINE;
	h.job = c->lim.job;
	h.sender = c->self_id;
	h.receiver = receiver;
	h.payload_len = blen;
	wire_header_encode(&h, out);
	wire_hello_encode(hl, out + WIRE_HEADER_SIZE);
	crypto_generichash_init(&st, c->hs_key, sizeof(c->hs_key),
	    WIRE_MAC_SIZE);
	if (prefix_len > 0)
		crypto_generichash_update(&st, prefix, prefix_len);
	crypto_generichash_update(&st, out, WIRE_HEADER_SIZE + blen);
	crypto_generichash_final(&st, out + WIRE_HEADER_SIZE + blen,
	    WIRE_MAC_SIZE);
	return WIRE_HEADER_SIZE + blen + WIRE_MAC_SIZE;
}

/* Check the MAC of a handshake frame and decode its body. */
static int
hello_check(const struct session_ctx *c, const uint8_t *prefix,
    size_t prefix_len, const uint8_t *frame, size_t len,
    const struct wire_header *h, struct wire_hello *hl)
{
	crypto_generichash_state st;
	uint8_t mac[WIRE_MAC_SIZE];
	size_t body = len - WIRE_HEADER_SIZE - WIRE_MAC_SIZE;
	int rc;

	if (!(h->flags & WIRE_F_INLINE) || len < WIRE_HEADER_SIZE +
	    WIRE_MAC_SIZE || h->payload_len != body)
		return -EBADMSG;
	crypto_generichash_init(&st, c->hs_key, sizeof(c->hs_key),
	    WIRE_MAC_SIZE);
	if (prefix_len > 0)
		crypto_generichash_update(&st, prefix, prefix_len);
	crypto_generichash_update(&st, frame, WIRE_HEADER_SIZE + body);
	crypto_generichash_final(&st, mac, sizeof(mac));
	rc = sodium_memcmp(mac, frame + WIRE_HEADER_SIZE + body, sizeof(mac));
	if (rc != 0)
		return -EBADMSG;
	return wire_hello_decode(frame + WIRE_HEADER_SIZE, body, hl);
}

/* From the crypto_kx keys in s->tx and s->rx: the body tag keys, then the
 * suite's AEAD keys in their place. */
static void
session_derive(struct session *s, enum aead_suite suite)
{
	uint8_t kx[SESSION_KEY_SIZE];

	crypto_kdf_derive_from_key(s->tx_tag, sizeof(s->tx_tag), KDF_ID_TAG,
	    "gdbodytg", s->tx);
	crypto_kdf_derive_from_key(s->rx_tag, sizeof(s->rx_tag), KDF_ID_TAG,
	    "gdbodytg", s->rx);
	s->suite = suite;
	memcpy(kx, s->tx, sizeof(kx));
	crypto_kdf_derive_from_key(s->tx, sizeof(s->tx), KDF_ID_AEAD + suite,
	    "gdaeadky", kx);
	memcpy(kx, s->rx, sizeof(kx));
	crypto_kdf_derive_from_key(s->rx, sizeof(s->rx), KDF_ID_AEAD + suite,
	    "gdaeadky", kx);
	sodium_memzero(kx, sizeof(kx));
}

int
session_hello_make(const struct session_ctx *c, struct session_hs *hs,
    const char *self_addr, uint64_t held)
{
	struct wire_hello hl;

	if (strlen(self_addr) > WIRE_ADDR_MAX || *self_addr == '\0')
		return -EINVAL;
	memset(&hl, 0, sizeof(hl));
	crypto_kx_keypair(hs->pk, hs->sk);
	memcpy(hl.pk, hs->pk, sizeof(hl.pk));
	hl.stamp = hs->stamp = session_stamp();
	hl.held = held;
	hl.suites = c->suites;
	strcpy(hl.addr, self_addr);
	hs->hello_len = hello_frame(c, WIRE_T_HELLO, 0, &hl, NULL, 0,
	    hs->hello);
	return 0;
}

int
session_hello_accept(const struct session_ctx *c, const uint8_t *frame,
    size_t len, const struct wire_header *h, const char *self_addr,
    struct wire_hello *peer, struct session *in, uint8_t *ack,
    size_t *ack_len)
{
	uint8_t pk[crypto_kx_PUBLICKEYBYTES], sk[crypto_kx_SECRETKEYBYTES];
	struct wire_hello hl;
	int rc;

	if (h->type != WIRE_T_HELLO || h->seq != 0 ||
	    (h->receiver != 0 && h->receiver != c->self_id) ||
	    h->sender == c->self_id || strlen(self_addr) > WIRE_ADDR_MAX)
		return -EBADMSG;
	if ((rc = hello_check(c, NULL, 0, frame, len, h, peer)) != 0)
		return rc;
	memset(in, 0, sizeof(*in));
	crypto_kx_keypair(pk, sk);
	rc = crypto_kx_server_session_keys(in->rx, in->tx, pk, sk, peer->pk);
	sodium_memzero(sk, sizeof(sk));
	if (rc != 0) {
		session_wipe(in);
		return -EBADMSG;
	}
	session_derive(in, aead_pick(c->suites, peer->suites));
	in->peer_id = h->sender;
	memset(&hl, 0, sizeof(hl));
	memcpy(hl.pk, pk, sizeof(pk));
	hl.stamp = session_stamp();
	hl.suites = c->suites;
	strcpy(hl.addr, self_addr);
	*ack_len = hello_frame(c, WIRE_T_HELLO_ACK, h->sender, &hl, frame, len,
	    ack);
	return 0;
}

int
session_hello_finish(const struct session_ctx *c, struct session_hs *hs,
    const uint8_t *frame, size_t len, const struct wire_header *h,
    struct wire_hello *peer, struct session *out)
{
	int rc;

	if (h->type != WIRE_T_HELLO_ACK || h->seq != 0 ||
	    h->receiver != c->self_id || h->sender == c->self_id ||
	    hs->hello_len == 0)
		return -EBADMSG;
	rc = hello_check(c, hs->hello, hs->hello_len, frame, len, h, peer);
	if (rc != 0)
		return rc;
	memset(out, 0, sizeof(*out));
	if (crypto_kx_client_session_keys(out->rx, out->tx, hs->pk, hs->sk,
	    peer->pk) != 0) {
		session_wipe(out);
		return -EBADMSG;
	}
	session_derive(out, aead_pick(c->suites, peer->suites));
	out->peer_id = h->sender;
	session_hs_wipe(hs);
	return 0;
}

uint64_t
session_next_seq(struct session *s)
{
	return ++s->tx_seq;
}

int
session_seal(const struct session *s, const uint8_t ad[WIRE_HEADER_SIZE],
    uint64_t seq, uint32_t part, const uint8_t *m, size_t mlen, uint8_t *c)
{
	return aead_seal(s->suite, s->tx, seq, part, ad, WIRE_HEADER_SIZE, m,
	    mlen, c);
}

void
session_bodykey_get(const struct session *s, int tx, struct session_bodykey *k)
{
	k->suite = s->suite;
	memcpy(k->key, tx ? s->tx : s->rx, sizeof(k->key));
}

void
session_bodykey_wipe(struct session_bodykey *k)
{
	sodium_memzero(k, sizeof(*k));
}

int
session_bodykey_seal(const struct session_bodykey *k,
    const uint8_t ad[WIRE_HEADER_SIZE], uint64_t seq, uint32_t part,
    const uint8_t *m, size_t len, uint8_t *c)
{
	return aead_seal(k->suite, k->key, seq, part, ad, WIRE_HEADER_SIZE, m,
	    len, c);
}

int
session_bodykey_open(const struct session_bodykey *k,
    const uint8_t ad[WIRE_HEADER_SIZE], uint64_t seq, uint32_t part,
    uint8_t *c, size_t len, const uint8_t mac[WIRE_MAC_SIZE])
{
	return aead_open_detached(k->suite, k->key, seq, part, ad,
	    WIRE_HEADER_SIZE, c, len, mac, c);
}

int
session_open(const struct session *s, const uint8_t ad[WIRE_HEADER_SIZE],
    uint64_t seq, uint32_t part, const uint8_t *c, size_t clen, uint8_t *m)
{
	return aead_open(s->suite, s->rx, seq, part, ad, WIRE_HEADER_SIZE, c,
	    clen, m);
}

#define WBIT(seq) ((seq) % SESSION_WINDOW)

int
session_replay_check(const struct session *s, uint64_t seq)
{
	uint64_t b;

	if (seq == 0)
		return -EALREADY;
	if (seq > s->rx_top)
		return 0;
	if (s->rx_top - seq >= SESSION_WINDOW)
		return -EALREADY;
	b = WBIT(seq);
	if (s->window[b / 64] & ((uint64_t)1 << (b % 64)))
		return -EALREADY;
	return 0;
}

void
session_replay_update(struct session *s, uint64_t seq)
{
	uint64_t q, b;

	if (seq > s->rx_top) {
		if (seq - s->rx_top >= SESSION_WINDOW)
			memset(s->window, 0, sizeof(s->window));
		else
			for (q = s->rx_top + 1; q < seq; q++) {
				b = WBIT(q);
				s->window[b / 64] &= ~((uint64_t)1 << (b % 64));
			}
		s->rx_top = seq;
	}
	b = WBIT(seq);
	s->window[b / 64] |= (uint64_t)1 << (b % 64);
}

uint64_t
session_body_tag(const struct session *s, uint64_t seq, uint32_t chunk,
    int tx)
{
	uint8_t in[12], out[crypto_shorthash_BYTES];

	wire_put_u64(in, seq);
	wire_put_u32(in + 8, chunk);
	crypto_shorthash(out, in, sizeof(in), tx ? s->tx_tag : s->rx_tag);
	return wire_get_u64(out);
}

void
session_wipe(struct session *s)
{
	sodium_memzero(s, sizeof(*s));
}

void
session_hs_wipe(struct session_hs *hs)
{
	sodium_memzero(hs, sizeof(*hs));
}
