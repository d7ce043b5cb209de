/*
 * transport_int: the endpoint's records, for transport.c alone (no other
 * file includes it). The transport is cut by layer, each file owning its
 * own state, so that the handshake, the byte layout and the queues can
 * each be read and checked alone; each layer knows only those below it:
 *
 *   transport.c        the endpoint: the peer table, send queues and
 *                      ACKs, the life cycle; these records.
 *   transport_frame    a message's frame and its body's chunks, sealed
 *                      and opened by the workers, both directions; its
 *                      state is struct tframe and the buffers in flight.
 *   transport_session  the handshake and the keys of each peer (HELLO,
 *                      rehello, opening what comes in under a session);
 *                      its state is struct tsess, one per peer.
 *   transport_clock    the deadlines' clock, which the framing reads too.
 *   transport_stats    the routes and counters by message type.
 *
 * A peer and a message here embed the lower layers' parts of them, so
 * that each layer keeps its state where the endpoint's peer is, and gets
 * back from its own part to the endpoint's record only here.
 */
#ifndef GD_TRANSPORT_INT_H
#define GD_TRANSPORT_INT_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "proto.h"
#include "session.h"
#include "transport_clock.h"
#include "transport_frame.h"
#include "transport_session.h"
#include "transport_stats.h"
#include "wire.h"

#define RX_DEPTH	64
#define HOST_MAX	(WIRE_ADDR_MAX + 1)
#define PORT_MAX	8
/* An unanswered HELLO is sent again after this, then twice as long. */
#define TRANSPORT_HELLO_RESEND_S	1.0

/* One application send: queued, then in flight until its ACK. */
struct tmsg {
	struct tmsg		*next;
	struct tpeer		*peer;
	struct tframe_msg	fm;	/* the framing's: type, length, buffers */
	double			start;
	proto_sent_cb		cb;
	void			*arg;
	int			status;
};

/*
 * One per "HOST:PORT", kept until transport_close, so pointers to it stay
 * valid in any callback. It holds the outbound session (started by us:
 * our messages, their ACKs) and the inbound one (started by them: their
 * messages, our ACKs) in sess.
 */
struct tpeer {
	struct tpeer		*next;
	char			addr[WIRE_ADDR_MAX + 1];
	char			host[HOST_MAX];
	char			port[PORT_MAX];
	int			error;	/* failure to act on at the next tick */
	double			hs_deadline;	/* our HELLO's answer is due */
	double			hs_resend;	/* unanswered, it goes again */
	double			hs_wait;	/* before the next resend */

	struct tsess		sess;	/* keys, the peer's id */
	struct tframe_peer	frame;	/* fabric address, bodies coming in */
	struct tmsg		*queue, *queue_tail;	/* waiting for session */
	struct tmsg		*inflight;		/* waiting for ACK */
	double			tx_progress;	/* last ACK from it */
};

struct transport {
	uv_loop_t		*loop;
	struct fabric		*fabric;
	struct session_ctx	ctx;	/* identity, job key, limits */
	struct tsess_layer	sess;
	struct tframe		frame;
	/* transport_peer_down_cb: the API header stays above this one */
	void			(*peer_down)(void *, const char *, uint64_t, int);
	void			*peer_down_arg;
	char			listen[WIRE_ADDR_MAX + 1];
	struct tpeer		*peers;

	struct tclock		clock;	/* deadlines and the tick */
	uv_timer_t		dispatch;
	struct tmsg		*done, *done_tail;
	int			dispatching;	/* on_dispatch drains what is added */
	int			closing;
	int			close_pending;
	void			(*close_cb)(void *);
	void			*close_arg;

	struct tstats		stats;	/* routes, counted by the endpoint */
};

#endif
