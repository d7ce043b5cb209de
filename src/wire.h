/*
 * wire: the byte layout of every message gossipd peers exchange, and the
 * bounds-checked decoders for it. Nothing here knows about keys or sockets:
 * the header is plain data that session authenticates as AEAD additional
 * data, so it must be fully validated (lengths against the bytes received
 * and against max_message_size) before anything else looks at the message.
 *
 * A frame travels as one untagged libfabric message:
 *
 *	header (WIRE_HEADER_SIZE) | sealed payload | MAC (WIRE_MAC_SIZE)
 *
 * Small messages ride inline (flag WIRE_F_INLINE, chunk_count 0). Big ones
 * send a header-only frame (its MAC covers the header) followed by a body:
 * chunk_count chunks of up to WIRE_CHUNK_SIZE plaintext bytes, each
 * sealed on its own (additional data: the header with its chunk index)
 * and sent as a tagged message of its own, its MAC last. A sender posts
 * each chunk as soon as it is sealed and a receiver opens each as it
 * lands, so sealing, the transfer and opening overlap within a message.
 *
 * Header, little-endian, 56 bytes:
 *	0 magic "GSPD"  4 version  5 type  6 flags(u16)  8 job id(u64)
 *	16 sender id  24 receiver id  32 sequence  40 payload length (u64)
 *	48 chunk index (u32)  52 chunk count (u32)
 */
#ifndef GD_WIRE_H
#define GD_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define WIRE_MAGIC		0x44505347u	/* "GSPD" read as LE u32 */
#define WIRE_VERSION		5	/* 2: HELLOs offer AEAD suites; 3: and
				 * name the session they hold; 4: a body
				 * is a tagged message per chunk; 5: of
				 * 1 MiB */
#define WIRE_HEADER_SIZE	56
#define WIRE_MAC_SIZE		16
/* Chosen by bench_transport on 2 cores, 4 MiB messages, one in flight,
 * chunks sealed by the loop and one worker per end: 1 MiB chunks 2.00-
 * 2.13 GB/s, 2 MiB 1.87-1.96, 4 MiB (the loop alone) 1.65-1.72. A
 * message's chunks overlap only when it has several; but each chunk is
 * its own rendezvous, whose control messages and wake-ups cost about 6%
 * at 4 in flight against 4 MiB chunks, and more further down (256 KiB
 * lost at every window when the loop thread did all the sealing). */
#define WIRE_CHUNK_SIZE		(1u << 20)
/* Largest frame a receiver posts a buffer for; bigger payloads use a body. */
#define WIRE_FRAME_MAX		16384
#define WIRE_INLINE_MAX		(WIRE_FRAME_MAX - WIRE_HEADER_SIZE - WIRE_MAC_SIZE)
/* Hard ceiling for max_message_size, so body sizes never overflow. */
#define WIRE_MESSAGE_LIMIT	((uint64_t)1 << 36)
/* Longest "HOST:PORT" a peer may announce. */
#define WIRE_ADDR_MAX		96
#define WIRE_KX_PK_SIZE		32

/*
 * Message types. 1..63 belong to the transport itself; the upper layers
 * (membership, gossip, ...) own WIRE_TYPE_APP_MIN..WIRE_TYPE_APP_MAX and
 * the wire treats those as opaque bytes.
 */
enum wire_type {
	WIRE_T_HELLO = 1,	/* handshake request, MACed under the job key */
	WIRE_T_HELLO_ACK = 2,	/* handshake answer, MAC covers the request too */
	WIRE_T_ACK = 3,		/* receipt of one sealed message */
};
#define WIRE_TYPE_APP_MIN	64
#define WIRE_TYPE_APP_MAX	255

#define WIRE_F_INLINE		0x0001u
#define WIRE_F_KNOWN		WIRE_F_INLINE

/* Why a message was refused; the transport counts each reason. */
enum wire_reject {
	WIRE_REJ_BAD_MAC,
	WIRE_REJ_REPLAY,
	WIRE_REJ_MALFORMED,
	WIRE_REJ_VERSION,
	WIRE_REJ_JOB,
	WIRE_REJ_OVERSIZE,
	WIRE_REJ_UNKNOWN_SENDER,
	WIRE_REJ_HANDSHAKE,
	WIRE_REJ_COUNT
};

struct wire_header {
	uint8_t		version;
	uint8_t		type;
	uint16_t	flags;
	uint64_t	job;
	uint64_t	sender;
	uint64_t	receiver;
	uint64_t	seq;
	uint64_t	payload_len;
	uint32_t	chunk_index;
	uint32_t	chunk_count;
};

/* What a decoder checks a header against. */
struct wire_limits {
	uint64_t	job;
	uint64_t	max_message_size;
};

/* Handshake body (HELLO and HELLO_ACK): ephemeral kx key, a stamp that
 * only grows across the sender's restarts, the stamp of the receiver's
 * HELLO whose session the sender holds (0: none; a HELLO_ACK sends 0),
 * the AEAD suites the sender offers (a bitmask, see aead.h; bits it does
 * not know a receiver ignores) and its listen address:
 *	0 kx pk  32 stamp (u64)  40 held (u64)  48 address length (u8)
 *	49 suites (u8)  50 address */
struct wire_hello {
	uint8_t		pk[WIRE_KX_PK_SIZE];
	uint64_t	stamp;
	uint64_t	held;
	uint8_t		suites;
	char		addr[WIRE_ADDR_MAX + 1];
};
#define WIRE_HELLO_MIN		(WIRE_KX_PK_SIZE + 8 + 8 + 1 + 1)
#define WIRE_HELLO_MAX		(WIRE_HELLO_MIN + WIRE_ADDR_MAX)

/* Payload of an ACK: the acknowledged sequence number. */
#define WIRE_ACK_SIZE		8

const char *wire_reject_name(enum wire_reject r);
/* "hello", "hello_ack", "ack", or NULL for other types. */
const char *wire_type_name(uint8_t type);

void wire_header_encode(const struct wire_header *h,
    uint8_t out[WIRE_HEADER_SIZE]);

/*
 * Decode and validate the frame in buf[0..len): magic, version, job,
 * flags, payload length against the limit and against len. Returns 0, or
 * -EBADMSG with *why set. The frame's sealed payload then starts at
 * buf + WIRE_HEADER_SIZE and is h->payload_len + WIRE_MAC_SIZE bytes long
 * for an inline frame, WIRE_MAC_SIZE otherwise.
 */
int wire_frame_decode(const uint8_t *buf, size_t len,
    const struct wire_limits *lim, struct wire_header *h,
    enum wire_reject *why);

/* Chunks a body of payload_len bytes is cut into (0 for 0 bytes). */
uint32_t wire_chunk_count(uint64_t payload_len);
/* Bytes of the sealed body: payload plus one MAC per chunk. */
uint64_t wire_body_size(uint64_t payload_len);
/* Plaintext bytes in chunk i (0-based) of a body. */
size_t wire_chunk_len(uint64_t payload_len, uint32_t i);

/* Bytes a handshake body takes; encode writes exactly that many. */
size_t wire_hello_size(const struct wire_hello *hl);
void wire_hello_encode(const struct wire_hello *hl, uint8_t *out);
/* Returns 0 or -EBADMSG (wrong length, address not printable). */
int wire_hello_decode(const uint8_t *buf, size_t len, struct wire_hello *hl);

/* Little-endian integers, for every byte layout of the daemon: messages,
 * checkpoints, and the random stream (rng_u64). */
void wire_put_u16(uint8_t *p, uint16_t v);
void wire_put_u32(uint8_t *p, uint32_t v);
void wire_put_u64(uint8_t *p, uint64_t v);
uint16_t wire_get_u16(const uint8_t *p);
uint32_t wire_get_u32(const uint8_t *p);
uint64_t wire_get_u64(const uint8_t *p);

#endif
