/*
 * session: the cryptography between two peers, with libsodium. It owns the
 * job key file, the per-pair handshake and the per-message AEAD, and knows
 * nothing about sockets or queues, so every rule can be tested offline.
 *
 * Handshake (one per direction of traffic: the peer that wants to send
 * starts it, so two peers may hold two sessions, one started by each):
 *	I -> R  HELLO      header | I's ephemeral kx pk, stamp, held, listen addr | MAC
 *	R -> I  HELLO_ACK  header | R's ephemeral kx pk, stamp, listen addr | MAC
 * (held: the stamp of R's HELLO whose session I holds, for transport to
 * tell a peer that lost R's session from one that only renews its own.)
 * The MACs are keyed BLAKE2b under a crypto_kdf subkey of the job key; the
 * HELLO_ACK's MAC also covers the whole HELLO, binding the answer to it.
 * Both sides then run crypto_kx (I as client), giving one key per direction:
 * I seals its messages with its tx key, R its ACKs with its own.
 *
 * Each HELLO body also carries the mask of AEAD suites its sender offers
 * (aead.h); both ends pick the same suite from the two masks, which the
 * MACs protect like everything else, so no one in between can downgrade
 * it. Each direction's AEAD key is a crypto_kdf subkey of its crypto_kx
 * key for that suite, so a key is only ever used with one cipher.
 *
 * Messages: the agreed AEAD; nonce = sequence (u64) | part (u32) (and
 * zeros to 24 bytes for XChaCha20), where part 0 is the frame and part
 * i >= 1 the i-th body chunk; the encoded header is the additional data.
 * Sequences start at 1 per session and direction and only grow, so no
 * nonce repeats under a key; the receiver keeps a sliding window of
 * SESSION_WINDOW sequences, updated only after a successful open. Every
 * key is wiped with sodium_memzero when its holder is wiped.
 */
#ifndef GD_SESSION_H
#define GD_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "aead.h"
#include "util.h"
#include "wire.h"

#define SESSION_KEY_SIZE	32
#define SESSION_WINDOW		1024
#define SESSION_HELLO_FRAME_MAX	(WIRE_HEADER_SIZE + WIRE_HELLO_MAX + WIRE_MAC_SIZE)

/* Write 32 random bytes to a new file of mode 0600; never overwrites. */
int session_key_generate(const char *path, struct errbuf *err);
/* Read a key file: a regular file of exactly 32 bytes that neither group
 * nor others may access. */
int session_key_load(const char *path, uint8_t key[SESSION_KEY_SIZE],
    struct errbuf *err);

/* The header's job id: a hash of the job name. */
uint64_t session_job_id(const char *job);

/* What one endpoint needs for every handshake. */
struct session_ctx {
	uint8_t			hs_key[SESSION_KEY_SIZE];
	uint64_t		self_id;
	struct wire_limits	lim;
	uint8_t			suites;	/* AEAD_BIT()s offered: aead_offer() */
};

int session_ctx_init(struct session_ctx *c, const uint8_t key[SESSION_KEY_SIZE],
    const char *job, uint64_t self_id, uint64_t max_message_size);
void session_ctx_wipe(struct session_ctx *c);

/* One direction pair of keys with a peer, and the receive window. */
struct session {
	uint8_t		tx[SESSION_KEY_SIZE];	/* AEAD keys for suite */
	uint8_t		rx[SESSION_KEY_SIZE];
	enum aead_suite	suite;
	uint8_t		tx_tag[16];	/* shorthash keys for body tags */
	uint8_t		rx_tag[16];
	uint64_t	peer_id;
	uint64_t	tx_seq;		/* last sequence sealed */
	uint64_t	rx_top;		/* highest sequence opened */
	uint64_t	window[SESSION_WINDOW / 64];
};

/* The initiator's side of a handshake in progress. */
struct session_hs {
	uint8_t		pk[WIRE_KX_PK_SIZE];
	uint8_t		sk[32];
	uint8_t		hello[SESSION_HELLO_FRAME_MAX];
	size_t		hello_len;
	uint64_t	stamp;		/* the HELLO's */
};

/* A stamp that grows strictly, also across restarts (wall clock, ns). */
uint64_t session_stamp(void);

/* Fill hs with a fresh ephemeral key pair and the HELLO frame; held is
 * the stamp of the receiver's HELLO whose session we hold, or 0. */
int session_hello_make(const struct session_ctx *c, struct session_hs *hs,
    const char *self_addr, uint64_t held);

/*
 * Responder: check a decoded HELLO (h, frame[0..len)), derive the session
 * in *in and write the HELLO_ACK into ack (SESSION_HELLO_FRAME_MAX bytes).
 * *peer gets the initiator's stamp and address; replay of the stamp is the
 * caller's business. Returns 0 or -EBADMSG (handshake failure).
 */
int session_hello_accept(const struct session_ctx *c, const uint8_t *frame,
    size_t len, const struct wire_header *h, const char *self_addr,
    struct wire_hello *peer, struct session *in, uint8_t *ack,
    size_t *ack_len);

/* Initiator: check a HELLO_ACK against hs, derive *out. 0 or -EBADMSG. */
int session_hello_finish(const struct session_ctx *c, struct session_hs *hs,
    const uint8_t *frame, size_t len, const struct wire_header *h,
    struct wire_hello *peer, struct session *out);

/* Take the next sequence number to seal with. */
uint64_t session_next_seq(struct session *s);

/* c gets mlen + WIRE_MAC_SIZE bytes. 0, or -ENOMEM (see aead_seal). */
int session_seal(const struct session *s, const uint8_t ad[WIRE_HEADER_SIZE],
    uint64_t seq, uint32_t part, const uint8_t *m, size_t mlen, uint8_t *c);
/* m gets clen - WIRE_MAC_SIZE bytes; 0, -EBADMSG or -ENOMEM. Leaves the
 * window. */
int session_open(const struct session *s, const uint8_t ad[WIRE_HEADER_SIZE],
    uint64_t seq, uint32_t part, const uint8_t *c, size_t clen, uint8_t *m);

/*
 * One direction's key, copied out of a session for a body's chunks: they
 * are sealed and opened on worker threads while the loop thread moves
 * the session on (sequences, replay window, a new handshake), and a body
 * keeps the key it started under. Wipe it with session_bodykey_wipe.
 */
struct session_bodykey {
	enum aead_suite	suite;
	uint8_t		key[SESSION_KEY_SIZE];
};

/* k gets s's sealing key (tx nonzero) or its opening key. */
void session_bodykey_get(const struct session *s, int tx,
    struct session_bodykey *k);
void session_bodykey_wipe(struct session_bodykey *k);
/* Seal the len bytes at m into c (c may equal m), the MAC right after
 * them (a body chunk as it goes out). 0, or -ENOMEM (see aead_seal). */
int session_bodykey_seal(const struct session_bodykey *k,
    const uint8_t ad[WIRE_HEADER_SIZE], uint64_t seq, uint32_t part,
    const uint8_t *m, size_t len, uint8_t *c);
/* Open the len bytes at c in place, their MAC apart (a body chunk). */
int session_bodykey_open(const struct session_bodykey *k,
    const uint8_t ad[WIRE_HEADER_SIZE], uint64_t seq, uint32_t part,
    uint8_t *c, size_t len, const uint8_t mac[WIRE_MAC_SIZE]);

/* 0 if seq was never opened and is inside the window, else -EALREADY. */
int session_replay_check(const struct session *s, uint64_t seq);
/* Record seq as opened; call only after session_open succeeded. */
void session_replay_update(struct session *s, uint64_t seq);

/* The tag of chunk chunk (0-based) of message seq's body: tx side for the
 * sender, rx side for the receiver; unguessable without the session keys. */
uint64_t session_body_tag(const struct session *s, uint64_t seq,
    uint32_t chunk, int tx);

void session_wipe(struct session *s);
void session_hs_wipe(struct session_hs *hs);

#endif
