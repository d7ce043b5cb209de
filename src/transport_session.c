/*
 * transport_session: see transport_session.h. Each peer has two sessions,
 * each started by one side's HELLO: the outbound one (ours: our messages,
 * their ACKs) and the inbound one (theirs: their messages, our ACKs), so
 * either side can start over without the other losing what it sent. The
 * handshake's cryptography is session.c's; this file decides when to run
 * it and what a HELLO does to the sessions already held.
 */
#include <errno.h>

#include "log.h"
#include "transport_int.h"

void
tsess_start(struct transport *t, struct tpeer *p)
{
	struct tsess *s = &p->sess;

	if (transport_peer_insert(t, p) != 0) {
		transport_peer_error(t, p, -EHOSTUNREACH);
		return;
	}
	if (session_hello_make(&t->ctx, &s->hs, t->listen,
	    s->in_ready ? s->in_stamp : 0) != 0) {
		transport_peer_error(t, p, -EINVAL);
		return;
	}
	s->out_state = OUT_HELLO;
	s->out_hello = s->hs.stamp;
	s->hs_deadline = transport_deadline(t, transport_now(t), 0, 0);
	tframe_send_frame(t, p, WIRE_T_HELLO, s->hs.hello, s->hs.hello_len);
	transport_arm_tick(t, TICK_MS);
}

void
tsess_reset_out(struct tsess *s)
{
	session_wipe(&s->out);
	session_hs_wipe(&s->hs);
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
hello_keeps_out(const struct tpeer *p, const struct wire_header *h,
    const struct wire_hello *hl)
{
	if (p->sess.out_state != OUT_READY)
		return 1;
	if (p->id != h->sender)
		return 0;
	return hl->held == p->sess.out_hello || hl->stamp < p->sess.out_acked;
}

void
tsess_on_hello(struct transport *t, const uint8_t *buf, size_t len,
    const struct wire_header *h)
{
	uint8_t ack[SESSION_HELLO_FRAME_MAX];
	struct wire_hello hl;
	struct session in;
	struct tpeer *p;
	size_t ack_len;

	if (session_hello_accept(&t->ctx, buf, len, h, t->listen, &hl, &in,
	    ack, &ack_len) != 0) {
		transport_reject(t, WIRE_REJ_HANDSHAKE, "hello failed authentication");
		return;
	}
	if ((p = transport_peer_get(t, hl.addr)) == NULL) {
		transport_reject(t, WIRE_REJ_HANDSHAKE, "hello with a bad address");
		goto out;
	}
	if (hl.stamp <= p->sess.in_stamp) {
		transport_reject(t, WIRE_REJ_REPLAY, "old hello");
		goto out;
	}
	if (transport_peer_insert(t, p) != 0) {
		transport_reject(t, WIRE_REJ_HANDSHAKE, "hello from an unreachable address");
		goto out;
	}
	if (!hello_keeps_out(p, h, &hl)) {
		log_debug("transport: %s said hello without our session: "
		    "resetting ours", p->addr);
		transport_peer_reset_out(t, p, -ECONNRESET);
		if (p->queue != NULL)
			tsess_start(t, p);
	}
	tframe_abandon_bodies(t, p);
	p->sess.in_stamp = hl.stamp;
	p->id = h->sender;
	p->sess.in = in;
	p->sess.in_ready = 1;
	log_debug("transport: inbound session from %s: %s", p->addr,
	    aead_name(p->sess.in.suite));
	t->bytes_recv[WIRE_T_HELLO] += len;
	tframe_send_frame(t, p, WIRE_T_HELLO_ACK, ack, ack_len);
out:
	session_wipe(&in);
}

void
tsess_on_hello_ack(struct transport *t, const uint8_t *buf, size_t len,
    const struct wire_header *h)
{
	struct wire_hello hl;
	struct session out;
	struct tpeer *p;

	for (p = t->peers; p != NULL; p = p->next)
		if (p->sess.out_state == OUT_HELLO && session_hello_finish(&t->ctx,
		    &p->sess.hs, buf, len, h, &hl, &out) == 0)
			break;
	if (p == NULL) {
		transport_reject(t, WIRE_REJ_HANDSHAKE, "hello_ack matches no hello");
		return;
	}
	if (p->id != 0 && p->id != h->sender && p->sess.in_ready)
		tsess_reset_in(&p->sess);
	p->id = h->sender;
	p->sess.out = out;
	session_wipe(&out);
	p->sess.out_acked = hl.stamp;
	p->sess.out_state = OUT_READY;
	log_debug("transport: outbound session to %s: %s", p->addr,
	    aead_name(p->sess.out.suite));
	t->bytes_recv[WIRE_T_HELLO_ACK] += len;
	transport_peer_drain(t, p);
}

/*
 * Open a frame of text_len bytes that came in session s into plain,
 * unless its sequence was seen or its MAC is wrong; what counts it as
 * rejected is the reason's, why names it in the log.
 */
static int
frame_open(struct transport *t, struct session *s, const uint8_t *buf,
    const struct wire_header *h, size_t text_len, uint8_t *plain,
    const char *why_replay, const char *why_mac)
{
	if (session_replay_check(s, h->seq) != 0) {
		transport_reject(t, WIRE_REJ_REPLAY, why_replay);
		return -EALREADY;
	}
	if (session_open(s, buf, h->seq, 0, buf + WIRE_HEADER_SIZE,
	    text_len + WIRE_MAC_SIZE, plain) != 0) {
		transport_reject(t, WIRE_REJ_BAD_MAC, why_mac);
		return -EBADMSG;
	}
	session_replay_update(s, h->seq);
	return 0;
}

int
tsess_open_ack(struct transport *t, const uint8_t *buf,
    const struct wire_header *h, uint8_t pl[WIRE_ACK_SIZE], struct tpeer **out)
{
	struct tpeer *p;

	for (p = t->peers; p != NULL; p = p->next)
		if (p->sess.out_state == OUT_READY &&
		    p->sess.out.peer_id == h->sender)
			break;
	if (p == NULL) {
		transport_reject(t, WIRE_REJ_UNKNOWN_SENDER, "ack from no session");
		return -ENOTCONN;
	}
	if (h->payload_len != WIRE_ACK_SIZE) {
		transport_reject(t, WIRE_REJ_MALFORMED, "ack of the wrong size");
		return -EBADMSG;
	}
	*out = p;
	return frame_open(t, &p->sess.out, buf, h, WIRE_ACK_SIZE, pl,
	    "ack sequence seen", "ack");
}

int
tsess_open_frame(struct transport *t, const uint8_t *buf,
    const struct wire_header *h, uint8_t *plain, struct tpeer **out)
{
	int inl = (h->flags & WIRE_F_INLINE) != 0;
	struct tpeer *p;

	for (p = t->peers; p != NULL; p = p->next)
		if (p->sess.in_ready && p->sess.in.peer_id == h->sender)
			break;
	if (p == NULL) {
		transport_reject(t, WIRE_REJ_UNKNOWN_SENDER, "no session with sender");
		return -ENOTCONN;
	}
	*out = p;
	/* A body announcement carries no text: its MAC covers the header. */
	return frame_open(t, &p->sess.in, buf, h, inl ? h->payload_len : 0,
	    plain, "sequence seen", inl ? "frame" : "body announcement");
}
