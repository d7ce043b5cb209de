/*
 * fuzz_session: session_open on sealed frames and the handshake
 * (session_hello_accept, session_hello_finish), with a forgery oracle. The
 * job key is drawn at random per process, so no stored input can carry a
 * valid MAC: whatever the harness did not seal itself must be refused, and
 * abort() marks a forgery. The first input byte picks a mode:
 *	0  raw frame as HELLO to the responder and as HELLO_ACK to an initiator
 *	1  raw frame as a sealed message of an established session
 *	2  a real handshake; the rest of the input is (u16 pos, u8 xor) edits
 *	   applied to the HELLO and then to the HELLO_ACK
 *	3  a message the harness seals (type, length and bytes from the input),
 *	   then edits as in 2, and a second delivery that must be a replay
 * An edited frame that is still accepted is a forgery; an unedited one that
 * is refused is a bug too.
 */
#include <stdlib.h>

#include <sodium.h>

#include "fuzz.h"
#include "session.h"

#define FUZZ_SESSION_MAX_MSG 2048

static struct session_ctx ci, cr;
static struct session s_out, s_in;

static int
fuzz_decode(const struct session_ctx *c, const uint8_t *buf, size_t len, struct wire_header *h)
{
	enum wire_reject why;

	return wire_frame_decode(buf, len, &c->lim, h, &why);
}

static void
fuzz_handshake(struct session *out, struct session *in)
{
	struct session_hs hs;
	struct wire_header h;
	struct wire_hello peer;
	uint8_t ack[SESSION_HELLO_FRAME_MAX];
	size_t ack_len;

	if (session_hello_make(&ci, &hs, "10.0.0.1:1", 0) != 0 ||
	    fuzz_decode(&cr, hs.hello, hs.hello_len, &h) != 0 ||
	    session_hello_accept(&cr, hs.hello, hs.hello_len, &h, "10.0.0.2:2", &peer, in,
	    ack, &ack_len) != 0 ||
	    fuzz_decode(&ci, ack, ack_len, &h) != 0 ||
	    session_hello_finish(&ci, &hs, ack, ack_len, &h, &peer, out) != 0)
		abort();
	session_hs_wipe(&hs);
}

static void
fuzz_init(void)
{
	static int done;
	uint8_t key[SESSION_KEY_SIZE];

	if (done)
		return;
	done = 1;
	if (sodium_init() < 0)
		abort();
	randombytes_buf(key, sizeof(key));
	if (session_ctx_init(&ci, key, "fuzz", 1, 1 << 20) != 0 ||
	    session_ctx_init(&cr, key, "fuzz", 2, 1 << 20) != 0)
		abort();
	fuzz_handshake(&s_out, &s_in);
}

/* Apply the input's edits to buf; 1 if buf now differs from its copy. */
static int
fuzz_edit(struct fuzz_in *in, uint8_t *buf, size_t len, unsigned max)
{
	uint8_t *orig = malloc(len ? len : 1);
	int changed;

	memcpy(orig, buf, len);
	for (unsigned i = 0; i < max && in->n >= 3 && len > 0; i++) {
		uint16_t pos = fuzz_u16(in);

		buf[pos % len] ^= fuzz_u8(in);
	}
	changed = memcmp(orig, buf, len) != 0;
	free(orig);
	return changed;
}

static void
fuzz_raw_hello(const uint8_t *p, size_t n)
{
	struct session_hs hs;
	struct session s;
	struct wire_header h;
	struct wire_hello peer;
	uint8_t ack[SESSION_HELLO_FRAME_MAX];
	size_t ack_len;

	if (fuzz_decode(&cr, p, n, &h) == 0 &&
	    session_hello_accept(&cr, p, n, &h, "10.0.0.2:2", &peer, &s, ack, &ack_len) == 0)
		abort();	/* forged HELLO accepted */
	if (session_hello_make(&ci, &hs, "10.0.0.1:1", 0) != 0)
		abort();
	if (fuzz_decode(&ci, p, n, &h) == 0 &&
	    session_hello_finish(&ci, &hs, p, n, &h, &peer, &s) == 0)
		abort();	/* forged HELLO_ACK accepted */
	session_hs_wipe(&hs);
	session_wipe(&s);
}

static void
fuzz_raw_message(const uint8_t *p, size_t n)
{
	struct wire_header h;
	uint8_t *m;

	if (fuzz_decode(&cr, p, n, &h) != 0 || !(h.flags & WIRE_F_INLINE))
		return;
	m = malloc(h.payload_len + 1);
	if (session_replay_check(&s_in, h.seq) == 0 &&
	    session_open(&s_in, p, h.seq, 0, p + WIRE_HEADER_SIZE,
	    (size_t)h.payload_len + WIRE_MAC_SIZE, m) == 0)
		abort();	/* forged message accepted */
	free(m);
}

static void
fuzz_sealed_handshake(struct fuzz_in *in)
{
	struct session_hs hs;
	struct session a, b;
	struct wire_header h;
	struct wire_hello peer;
	uint8_t ack[SESSION_HELLO_FRAME_MAX];
	size_t ack_len;
	int edited, ok;

	if (session_hello_make(&ci, &hs, "10.0.0.1:1", 0) != 0)
		abort();
	edited = fuzz_edit(in, hs.hello, hs.hello_len, fuzz_u8(in) % 8);
	ok = fuzz_decode(&cr, hs.hello, hs.hello_len, &h) == 0 &&
	    session_hello_accept(&cr, hs.hello, hs.hello_len, &h, "10.0.0.2:2", &peer, &b,
	    ack, &ack_len) == 0;
	if (ok == edited)
		abort();	/* edited HELLO accepted, or the real one refused */
	if (!ok)
		goto out;
	edited = fuzz_edit(in, ack, ack_len, 8);
	ok = fuzz_decode(&ci, ack, ack_len, &h) == 0 &&
	    session_hello_finish(&ci, &hs, ack, ack_len, &h, &peer, &a) == 0;
	if (ok == edited)
		abort();	/* edited HELLO_ACK accepted, or the real one refused */
	session_wipe(&a);
	session_wipe(&b);
out:
	session_hs_wipe(&hs);
}

/* The receiver's path for one inline frame: decode, replay check, open,
 * and the window update on success. 1 if accepted. */
static int
fuzz_deliver(const uint8_t *frame, size_t flen, uint8_t *out)
{
	struct wire_header d;

	if (fuzz_decode(&cr, frame, flen, &d) != 0 || !(d.flags & WIRE_F_INLINE) ||
	    session_replay_check(&s_in, d.seq) != 0 ||
	    session_open(&s_in, frame, d.seq, 0, frame + WIRE_HEADER_SIZE,
	    (size_t)d.payload_len + WIRE_MAC_SIZE, out) != 0)
		return 0;
	session_replay_update(&s_in, d.seq);
	return 1;
}

static void
fuzz_sealed_message(struct fuzz_in *in)
{
	struct wire_header h = { .version = WIRE_VERSION, .flags = WIRE_F_INLINE,
	    .job = cr.lim.job, .sender = 1, .receiver = 2 };
	const uint8_t *m;
	uint8_t frame[WIRE_HEADER_SIZE + FUZZ_SESSION_MAX_MSG + WIRE_MAC_SIZE];
	uint8_t out[FUZZ_SESSION_MAX_MSG];
	size_t mlen, flen;
	int edited, ok;

	h.type = (uint8_t)(WIRE_TYPE_APP_MIN + fuzz_u8(in) % (WIRE_TYPE_APP_MAX -
	    WIRE_TYPE_APP_MIN + 1));
	mlen = fuzz_bytes(in, fuzz_u16(in) % FUZZ_SESSION_MAX_MSG, &m);
	h.payload_len = mlen;
	h.seq = session_next_seq(&s_out);
	wire_header_encode(&h, frame);
	session_seal(&s_out, frame, h.seq, 0, m, mlen, frame + WIRE_HEADER_SIZE);
	flen = WIRE_HEADER_SIZE + mlen + WIRE_MAC_SIZE;
	edited = fuzz_edit(in, frame, flen, 8);
	ok = fuzz_deliver(frame, flen, out);
	if (ok == edited)
		abort();	/* edited message accepted, or the real one refused */
	if (!ok)
		return;
	if (memcmp(out, m, mlen) != 0)
		abort();
	if (fuzz_deliver(frame, flen, out))
		abort();	/* replayed message accepted */
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };

	fuzz_init();
	switch (fuzz_u8(&in) % 4) {
	case 0:
		fuzz_raw_hello(in.p, in.n);
		break;
	case 1:
		fuzz_raw_message(in.p, in.n);
		break;
	case 2:
		fuzz_sealed_handshake(&in);
		break;
	default:
		fuzz_sealed_message(&in);
		break;
	}
	return 0;
}
