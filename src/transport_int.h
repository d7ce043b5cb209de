/*
 * transport_int: what the transport's layers share. The transport is cut
 * by layer, each file owning its own state, so that the handshake, the
 * byte layout and the queues can each be read and checked alone:
 *
 *   transport_session  the handshake and the keys of each peer (HELLO,
 *                      rehello, opening what comes in under a session);
 *                      its state is struct tsess, one per peer.
 *   transport_frame    a message's frame and its body's chunks, sealed
 *                      and opened by the workers, both directions; its
 *                      state is struct tframe and the buffers in flight.
 *   transport.c        the endpoint: the peer table, send queues and
 *                      ACKs, deadlines, the life cycle and the counters.
 *
 * Here are only the records more than one layer works on (struct
 * transport, struct tpeer, struct tmsg) and the endpoint's calls that the
 * other two make. Only transport*.c include it: transport.h is the API.
 */
#ifndef GD_TRANSPORT_INT_H
#define GD_TRANSPORT_INT_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "fabric.h"
#include "session.h"
#include "transport.h"
#include "transport_frame.h"
#include "transport_session.h"
#include "wire.h"

#define TICK_MS		100
#define RX_DEPTH	64
#define HOST_MAX	(WIRE_ADDR_MAX + 1)
#define PORT_MAX	8

/* One application send: queued, then in flight until its ACK. */
struct tmsg {
	struct tmsg		*next;
	struct tpeer		*peer;
	uint8_t			type;
	uint64_t		seq;
	uint8_t			*plain;	/* inline payload kept until sealed */
	size_t			len;
	double			start;
	struct txop		*frame, *body;	/* transport_frame.c's */
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
	fi_addr_t		fa;
	int			have_fa;
	uint64_t		id;
	unsigned		gen;
	int			error;	/* failure to act on at the next tick */

	struct tsess		sess;	/* transport_session.c's */
	struct tmsg		*queue, *queue_tail;	/* waiting for session */
	struct tmsg		*inflight;		/* waiting for ACK */
	double			tx_progress;	/* last ACK from it */
	double			rx_progress;	/* last message from it */
	struct rxbody		*bodies;	/* transport_frame.c's */
};

struct transport {
	uv_loop_t		*loop;
	struct fabric		*fabric;
	struct session_ctx	ctx;	/* identity, job key, limits */
	struct tframe		frame;	/* transport_frame.c's */
	transport_peer_down_cb	peer_down;
	void			*peer_down_arg;
	char			listen[WIRE_ADDR_MAX + 1];
	unsigned		timeout_ms;
	struct tpeer		*peers;

	uv_timer_t		tick;
	double			tick_due;	/* util_now() the tick is due at */
	double			stalled;	/* seconds the loop stood still */
	uv_timer_t		dispatch;
	struct tmsg		*done, *done_tail;
	int			dispatching;	/* on_dispatch drains what is added */
	int			closing;
	int			close_pending;
	void			(*close_cb)(void *);
	void			*close_arg;

	/* Counted by whichever layer sees the bytes. */
	uint64_t		rejected[WIRE_REJ_COUNT];
	uint64_t		bytes_sent[256];
	uint64_t		bytes_recv[256];
	uint64_t		msgs_sent, msgs_recv;
	struct transport_route {
		const struct proto *proto;	/* NULL: nobody registered */
		proto_recv_fn	recv;
		void		*arg;
	}			routes[256];
};

/* In transport.c, for the other layers. */
double transport_now(const struct transport *t);
double transport_deadline(const struct transport *t, double start,
    double progress, size_t len);
void transport_reject(struct transport *t, enum wire_reject r, const char *why);
void transport_arm_tick(struct transport *t, uint64_t first_ms);
uint64_t transport_body_budget(const struct transport *t);
int transport_post(struct transport *t, struct tpeer *p, uint8_t type,
    struct fabric_op *op);
void transport_sent(struct transport *t, struct tpeer *p, unsigned gen,
    int status);
void transport_peer_error(struct transport *t, struct tpeer *p, int error);
struct tpeer *transport_peer_get(struct transport *t, const char *addr);
int transport_peer_insert(struct transport *t, struct tpeer *p);
void transport_peer_reset_out(struct transport *t, struct tpeer *p, int status);
void transport_peer_drain(struct transport *t, struct tpeer *p);
void transport_deliver(struct transport *t, struct tpeer *p,
    const struct wire_header *h, const uint8_t *payload, size_t wire_bytes);
void transport_close_step(struct transport *t);

#endif
