/*
 * transport_session: see transport_session.h. Each peer has two sessions,
 * each started by one side's HELLO: the outbound one (ours: our messages,
 * their ACKs) and the inbound one (theirs: their messages, our ACKs), so
 * either side can start over without the other losing what it sent. The
 * handshake's cryptography is session.c's; this file decides when to run
 * it and what a HELLO does to the sessions already held. The peers it
 * scans for the session a frame came in are its own list, so that it
 * needs nothing of the endpoint's peer table but the ops.
 */
#include <errno.h>
#include <string.h>

#include "log.h"
#include "transport_session.h"

void
tsess_add(struct tsess_layer *l, struct tsess *s, const char *addr)
{
	s->addr = addr;
	s->next = l->all;
	l->all = s;
}

int
tsess_start(struct tsess_layer *l, struct tsess *s)
{
	if (l->ops->reach(l->arg, s) != 0)
		return -EHOSTUNREACH;
	session_hs_wipe(&s->hs_prev);
	if (s->out_state == OUT_HELLO)
		s->hs_prev = s->hs;
	if (session_hello_make(l->ctx, &s->hs, l->listen,
	    s->in_ready ? s->in_stamp : 0) != 0)
		return -EINVAL;
	s->out_state = OUT_HELLO;
	s->out_hello = s->hs.stamp;
	l->ops->send(l->arg, s, WIRE_T_HELLO, s->hs.hello, s->hs.hello_len);
	return 0;
}

void
tsess_reset_out(struct tsess *s)
{
	session_wipe(&s->out);
	session_hs_wipe(&s->hs);
	session_hs_wipe(&s->hs_prev);
	s->out_state = OUT_NONE;
}

void
tsess_reset_in(struct tsess *s)
{
	session_wipe(&s->in);
	s->in_ready = 0;
}

/*
 * A peer says hello again when it lost our session (it restarted, or gave
 * up on us): then what we sent it and never got acknowledged is lost and
 * our outbound keys are dead. But it also says hello when only its own
 * direction needs a new session (its handshake or messages to us timed
 * out while ours lived), and a copy of a HELLO it abandoned may arrive
 * late, after our handshake with it. Keep our outbound session when the
 * HELLO names it as held, or when the HELLO is older than the peer's
 * answer to ours (both stamps are the peer's clock, so no clock is
 * compared across hosts); a restarted peer names nothing and is newer.
 */
static int
hello_keeps_out(const struct tsess *s, const struct wire_header *h,
    const struct wire_hello *hl)
{
	if (s->out_state != OUT_READY)
		return 1;
	if (s->id != h->sender)
		return 0;
	return hl->held == s->out_hello || hl->stamp < s->out_acked;
}

int
tsess_on_hello(struct tsess_layer *l, const uint8_t *buf, size_t len,
    const struct wire_header *h)
{
	uint8_t ack[SESSION_HELLO_FRAME_MAX];
	struct wire_hello hl;
	struct session in;
	struct tsess *s;
	size_t ack_len;
	int rc;

	if (session_hello_accept(l->ctx, buf, len, h, l->listen, &hl, &in,
	    ack, &ack_len) != 0) {
		l->ops->reject(l->arg, WIRE_REJ_HANDSHAKE, "hello failed authentication");
		return -EBADMSG;
	}
	if ((s = l->ops->peer(l->arg, hl.addr)) == NULL) {
		l->ops->reject(l->arg, WIRE_REJ_HANDSHAKE, "hello with a bad address");
		rc = -EINVAL;
		goto out;
	}
	if (hl.stamp <= s->in_stamp) {
		l->ops->reject(l->arg, WIRE_REJ_REPLAY, "old hello");
		rc = -EALREADY;
		goto out;
	}
	if ((rc = l->ops->reach(l->arg, s)) != 0) {
		l->ops->reject(l->arg, WIRE_REJ_HANDSHAKE, "hello from an unreachable address");
		goto out;
	}
	if (!hello_keeps_out(s, h, &hl)) {
		log_debug("transport: %s said hello without our session: "
		    "resetting ours", s->addr);
		l->ops->out_lost(l->arg, s);
	}
	l->ops->in_new(l->arg, s);
	s->in_stamp = hl.stamp;
	s->id = h->sender;
	s->in = in;
	s->in_ready = 1;
	log_debug("transport: inbound session from %s: %s", s->addr,
	    aead_name(s->in.suite));
	l->ops->send(l->arg, s, WIRE_T_HELLO_ACK, ack, ack_len);
out:
	session_wipe(&in);
	return rc;
}

/* Is a HELLO_ACK the answer to a HELLO we since sent again? The peer
 * takes the newer one too, so this answer's keys are of no use. */
static int
hello_ack_stale(struct tsess_layer *l, const uint8_t *buf, size_t len,
    const struct wire_header *h)
{
	struct wire_hello hl;
	struct session sess;
	struct tsess *s;

	for (s = l->all; s != NULL; s = s->next)
		if (s->out_state == OUT_HELLO && session_hello_finish(l->ctx,
		    &s->hs_prev, buf, len, h, &hl, &sess) == 0) {
			session_wipe(&sess);
			log_debug("transport: %s answered a hello sent since "
			    "again", s->addr);
			return 1;
		}
	return 0;
}

int
tsess_on_hello_ack(struct tsess_layer *l, const uint8_t *buf, size_t len,
    const struct wire_header *h, struct tsess **out)
{
	struct wire_hello hl;
	struct session sess;
	struct tsess *s;

	for (s = l->all; s != NULL; s = s->next)
		if (s->out_state == OUT_HELLO && session_hello_finish(l->ctx,
		    &s->hs, buf, len, h, &hl, &sess) == 0)
			break;
	if (s == NULL && hello_ack_stale(l, buf, len, h))
		return -EALREADY;
	if (s == NULL) {
		l->ops->reject(l->arg, WIRE_REJ_HANDSHAKE, "hello_ack matches no hello");
		return -ENOTCONN;
	}
	session_hs_wipe(&s->hs_prev);
	if (s->id != 0 && s->id != h->sender && s->in_ready)
		tsess_reset_in(s);
	s->id = h->sender;
	s->out = sess;
	session_wipe(&sess);
	s->out_acked = hl.stamp;
	s->out_state = OUT_READY;
	log_debug("transport: outbound session to %s: %s", s->addr,
	    aead_name(s->out.suite));
	*out = s;
	return 0;
}

void
tsess_header(const struct tsess_layer *l, struct session *s, uint8_t type,
    uint64_t len, struct wire_header *h)
{
	memset(h, 0, sizeof(*h));
	h->version = WIRE_VERSION;
	h->type = type;
	h->job = l->ctx->lim.job;
	h->sender = l->ctx->self_id;
	h->receiver = s->peer_id;
	h->seq = session_next_seq(s);
	h->payload_len = len;
}

int
tsess_seal_ack(const struct tsess_layer *l, struct tsess *s, uint64_t acked,
    uint8_t frame[WIRE_HEADER_SIZE + WIRE_ACK_SIZE + WIRE_MAC_SIZE])
{
	struct wire_header h;
	uint8_t pl[WIRE_ACK_SIZE];

	tsess_header(l, &s->in, WIRE_T_ACK, WIRE_ACK_SIZE, &h);
	h.flags = WIRE_F_INLINE;
	wire_header_encode(&h, frame);
	wire_put_u64(pl, acked);
	return session_seal(&s->in, frame, h.seq, 0, pl, sizeof(pl),
	    frame + WIRE_HEADER_SIZE);
}

/*
 * Open a frame of text_len bytes that came in session s into plain,
 * unless its sequence was seen or its MAC is wrong; what counts it as
 * rejected is the reason's, why names it in the log.
 */
static int
frame_open(struct tsess_layer *l, struct session *s, const uint8_t *buf,
    const struct wire_header *h, size_t text_len, uint8_t *plain,
    const char *why_replay, const char *why_mac)
{
	if (session_replay_check(s, h->seq) != 0) {
		l->ops->reject(l->arg, WIRE_REJ_REPLAY, why_replay);
		return -EALREADY;
	}
	if (session_open(s, buf, h->seq, 0, buf + WIRE_HEADER_SIZE,
	    text_len + WIRE_MAC_SIZE, plain) != 0) {
		l->ops->reject(l->arg, WIRE_REJ_BAD_MAC, why_mac);
		return -EBADMSG;
	}
	session_replay_update(s, h->seq);
	return 0;
}

int
tsess_open_ack(struct tsess_layer *l, const uint8_t *buf,
    const struct wire_header *h, uint8_t pl[WIRE_ACK_SIZE], struct tsess **out)
{
	struct tsess *s;

	for (s = l->all; s != NULL; s = s->next)
		if (s->out_state == OUT_READY && s->out.peer_id == h->sender)
			break;
	if (s == NULL) {
		l->ops->reject(l->arg, WIRE_REJ_UNKNOWN_SENDER, "ack from no session");
		return -ENOTCONN;
	}
	if (h->payload_len != WIRE_ACK_SIZE) {
		l->ops->reject(l->arg, WIRE_REJ_MALFORMED, "ack of the wrong size");
		return -EBADMSG;
	}
	*out = s;
	return frame_open(l, &s->out, buf, h, WIRE_ACK_SIZE, pl,
	    "ack sequence seen", "ack");
}

int
tsess_open_frame(struct tsess_layer *l, const uint8_t *buf,
    const struct wire_header *h, uint8_t *plain, struct tsess **out)
{
	int inl = (h->flags & WIRE_F_INLINE) != 0;
	struct tsess *s;

	for (s = l->all; s != NULL; s = s->next)
		if (s->in_ready && s->in.peer_id == h->sender)
			break;
	if (s == NULL) {
		l->ops->reject(l->arg, WIRE_REJ_UNKNOWN_SENDER, "no session with sender");
		return -ENOTCONN;
	}
	*out = s;
	/* A body announcement carries no text: its MAC covers the header. */
	return frame_open(l, &s->in, buf, h, inl ? h->payload_len : 0,
	    plain, "sequence seen", inl ? "frame" : "body announcement");
}
