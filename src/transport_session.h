/*
 * transport_session: the transport's session layer, the keys it holds
 * for each peer and how it gets them: our HELLO and the peer's answer
 * (outbound), the peer's HELLO and our answer (inbound), the rule that
 * decides whether a peer's new HELLO kills our outbound session, and the
 * checks every frame passes before anything acts on it (sender, replay,
 * MAC). Apart from the endpoint and the framing because this is where a
 * peer proves who it is, and what it may make us believe is decided by
 * these few rules alone.
 */
#ifndef GD_TRANSPORT_SESSION_H
#define GD_TRANSPORT_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "session.h"
#include "wire.h"

struct transport;
struct tpeer;

enum out_state { OUT_NONE, OUT_HELLO, OUT_READY };

/* A peer's sessions, both directions. */
struct tsess {
	enum out_state		out_state;
	struct session_hs	hs;
	double			hs_deadline;
	struct session		out;
	uint64_t		out_hello;	/* stamps behind out: our HELLO's, */
	uint64_t		out_acked;	/* and the peer's HELLO_ACK's */

	int			in_ready;
	struct session		in;
	uint64_t		in_stamp;	/* newest HELLO accepted */
};

/* Send our HELLO to p; a failure leaves p failing at the next tick. */
void tsess_start(struct transport *t, struct tpeer *p);
/* Forget a direction's keys (and a handshake in progress). */
void tsess_reset_out(struct tsess *s);
void tsess_reset_in(struct tsess *s);

/* Frames of the handshake, their header decoded and checked. */
void tsess_on_hello(struct transport *t, const uint8_t *buf, size_t len,
    const struct wire_header *h);
void tsess_on_hello_ack(struct transport *t, const uint8_t *buf, size_t len,
    const struct wire_header *h);

/*
 * Find the peer whose outbound session an ACK frame came in, check it
 * and open its payload into pl. Returns 0 and the peer in *out, or a
 * negative errno once the rejection is counted.
 */
int tsess_open_ack(struct transport *t, const uint8_t *buf,
    const struct wire_header *h, uint8_t pl[WIRE_ACK_SIZE], struct tpeer **out);
/*
 * The same for an application frame in a peer's inbound session: an
 * inline one's payload is opened into plain, a body announcement's MAC
 * is checked.
 */
int tsess_open_frame(struct transport *t, const uint8_t *buf,
    const struct wire_header *h, uint8_t *plain, struct tpeer **out);

#endif
