/*
 * transport_session: the transport's session layer, the keys it holds
 * for each peer and how it gets them: our HELLO and the peer's answer
 * (outbound), the peer's HELLO and our answer (inbound), the rule that
 * decides whether a peer's new HELLO kills our outbound session, and the
 * checks every frame passes before anything acts on it (sender, replay,
 * MAC). Apart from the endpoint and the framing because this is where a
 * peer proves who it is, and what it may make us believe is decided by
 * these few rules alone.
 *
 * It is the bottom layer: it knows neither the endpoint nor the framing.
 * Its state is struct tsess_layer and a struct tsess per peer, which the
 * endpoint embeds in its peer and names to it once (tsess_add); what it
 * needs done outside itself (the peer table, fabric addresses, sending a
 * frame, counting a rejection, what a lost session does to the messages
 * in it) it asks through struct tsess_ops, as a protocol module asks the
 * transport through proto.h.
 */
#ifndef GD_TRANSPORT_SESSION_H
#define GD_TRANSPORT_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "session.h"
#include "wire.h"

enum out_state { OUT_NONE, OUT_HELLO, OUT_READY };

/* A peer's sessions, both directions. */
struct tsess {
	struct tsess		*next;	/* the layer's list */
	const char		*addr;	/* the peer's "HOST:PORT", for the log */
	uint64_t		id;	/* the peer's, from its last handshake */

	enum out_state		out_state;
	struct session_hs	hs;
	struct session_hs	hs_prev;	/* a HELLO sent again replaced it */
	struct session		out;
	uint64_t		out_hello;	/* stamps behind out: our HELLO's, */
	uint64_t		out_acked;	/* and the peer's HELLO_ACK's */

	int			in_ready;
	struct session		in;
	uint64_t		in_stamp;	/* newest HELLO accepted */
};

/* What the layer asks of the endpoint; arg is tsess_layer.arg. */
struct tsess_ops {
	/* The peer listening at addr, made if new; NULL for a bad address. */
	struct tsess *(*peer)(void *arg, const char *addr);
	/* Give s's peer its place in fabric: 0 or a negative errno. */
	int (*reach)(void *arg, struct tsess *s);
	/* Send a handshake frame to s's peer. */
	void (*send)(void *arg, struct tsess *s, uint8_t type,
	    const uint8_t *buf, size_t len);
	/* Count a frame rejected; why is for the log. */
	void (*reject)(void *arg, enum wire_reject r, const char *why);
	/* A HELLO killed our outbound session to s: fail what waits for
	 * its ACKs, and start a new one if messages wait for it. */
	void (*out_lost)(void *arg, struct tsess *s);
	/* A new inbound session from s: drop the bodies of the old one. */
	void (*in_new)(void *arg, struct tsess *s);
};

struct tsess_layer {
	const struct session_ctx *ctx;	/* identity, job key, limits */
	const char		*listen;	/* the address our HELLO names */
	const struct tsess_ops	*ops;
	void			*arg;
	struct tsess		*all;	/* every peer's, newest first */
};

/* A peer's sessions join the layer; addr must outlive them. */
void tsess_add(struct tsess_layer *l, struct tsess *s, const char *addr);
/* Send our HELLO to s's peer (a fresh one where one is unanswered: a
 * late answer to that one is then dropped, not counted as a rejection).
 * 0, or a negative errno (-EHOSTUNREACH, or -EINVAL: no HELLO made) for
 * which the peer is to fail. */
int tsess_start(struct tsess_layer *l, struct tsess *s);
/* Forget a direction's keys (and a handshake in progress). */
void tsess_reset_out(struct tsess *s);
void tsess_reset_in(struct tsess *s);

/* The header of a frame of ours in session s, with its next sequence. */
void tsess_header(const struct tsess_layer *l, struct session *s,
    uint8_t type, uint64_t len, struct wire_header *h);
/* The ACK of message acked in s's inbound session, sealed. 0 or a
 * negative errno. */
int tsess_seal_ack(const struct tsess_layer *l, struct tsess *s,
    uint64_t acked,
    uint8_t frame[WIRE_HEADER_SIZE + WIRE_ACK_SIZE + WIRE_MAC_SIZE]);

/* Frames of the handshake, their header decoded and checked. 0 once one
 * is taken (its answer sent), or a negative errno once it is counted as
 * rejected. A HELLO_ACK's peer, its outbound session up, is in *out. */
int tsess_on_hello(struct tsess_layer *l, const uint8_t *buf, size_t len,
    const struct wire_header *h);
int tsess_on_hello_ack(struct tsess_layer *l, const uint8_t *buf, size_t len,
    const struct wire_header *h, struct tsess **out);

/*
 * Find the peer whose outbound session an ACK frame came in, check it
 * and open its payload into pl. Returns 0 and the peer in *out, or a
 * negative errno once the rejection is counted.
 */
int tsess_open_ack(struct tsess_layer *l, const uint8_t *buf,
    const struct wire_header *h, uint8_t pl[WIRE_ACK_SIZE], struct tsess **out);
/*
 * The same for an application frame in a peer's inbound session: an
 * inline one's payload is opened into plain, a body announcement's MAC
 * is checked.
 */
int tsess_open_frame(struct tsess_layer *l, const uint8_t *buf,
    const struct wire_header *h, uint8_t *plain, struct tsess **out);

#endif
