/*
 * transport_recv: the receive path of the transport: every frame fabric
 * delivers is decoded and checked here (header, sender, replay, MAC)
 * before anything acts on it; handshakes are answered, ACKs retire sent
 * messages, and bodies are posted, opened and delivered. Apart from the
 * send path and the peer table (transport.c) because this is where
 * untrusted bytes come in, and it reads best alone.
 *
 * The header also holds the transport's private records, which both
 * halves work on, and the calls the receive path makes into transport.c.
 * Only transport*.c include it: transport.h is the API.
 */
#ifndef GD_TRANSPORT_RECV_H
#define GD_TRANSPORT_RECV_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "bufcache.h"
#include "fabric.h"
#include "session.h"
#include "transport.h"
#include "wire.h"
#include "workers.h"

#define TICK_MS		100
#define RX_DEPTH	64
#define HOST_MAX	(WIRE_ADDR_MAX + 1)
#define PORT_MAX	8

enum out_state { OUT_NONE, OUT_HELLO, OUT_READY };

struct tpeer;
struct tmsg;
struct txop;

/* Workers that help the loop thread seal one body, at most. */
#define TX_HELPERS	4

/*
 * One chunk of a body on its way out: sealed (by the loop thread or a
 * worker) into op's buffer, then posted from the loop.
 */
struct txchunk {
	struct fabric_op	op;	/* first: fabric hands it back */
	struct txop		*x;
	uint8_t			ad[WIRE_HEADER_SIZE];
	int			rc;	/* its seal's */
	int			sealed;	/* under transport.seal_mu */
	int			posted;
};

/* A worker's job of helping to seal a body. */
struct txhelper {
	struct workers_job	job;
	struct txop		*x;
};

/*
 * A buffer handed to fabric: a frame (its one op), or a body whose chunks
 * are sealed by the loop thread and idle workers side by side, each posted
 * as soon as it is sealed (nchunks ops in chunks[]). A body holds a copy
 * of the plaintext only when its message had to wait (it is sealed in
 * place then); otherwise it is sealed straight from the caller's buffer
 * (src) before transport_send returns. It frees itself once every op it
 * handed to fabric and every helper came back (held 0).
 */
struct txop {
	struct fabric_op	op;	/* first: fabric hands it back */
	struct transport	*t;
	struct tpeer		*peer;
	struct tmsg		*msg;	/* NULL once the message is finished */
	unsigned		gen;	/* peer generation it was sent in */
	uint8_t			type;
	uint32_t		nchunks;	/* 0: a frame */
	uint32_t		held;	/* chunks with a worker or fabric */
	uint32_t		unsealed;	/* chunks still plaintext */
	uint64_t		seq;
	struct session_bodykey	key;
	const uint8_t		*src;	/* plaintext while it is being sealed */
	uint32_t		claimed;	/* chunks taken to seal: seal_mu */
	uint32_t		nposted;
	struct txchunk		*chunks;
	struct txhelper		helpers[TX_HELPERS];
	uint8_t			data[];
};

struct tmsg {
	struct tmsg		*next;
	struct tpeer		*peer;
	uint8_t			type;
	uint64_t		seq;
	uint8_t			*plain;	/* inline payload kept until sealed */
	size_t			len;
	double			start;
	struct txop		*frame, *body;
	proto_sent_cb		cb;
	void			*arg;
	int			status;
};

struct rxbody;

/* One chunk of a body on its way in: text in place, MAC apart; opened
 * in place by a worker (job) once it landed. */
struct rxchunk {
	struct fabric_op	op;	/* first */
	struct rxbody		*b;
	struct workers_job	job;
	uint8_t			ad[WIRE_HEADER_SIZE];
	uint32_t		index;
	int			rc;	/* the worker's open */
};

/*
 * A body being received: the plaintext buffer its chunks land in and are
 * opened in, the MACs beside it, one posted receive per chunk, and the
 * key of the session it came in (which a new handshake may replace
 * meanwhile). Freed once fabric and the workers gave back every chunk
 * (held 0) and it is done with.
 */
struct rxbody {
	struct transport	*t;
	struct tpeer		*peer;
	struct rxbody		*next;
	struct wire_header	h;
	struct session_bodykey	key;
	double			start;
	int			abandoned;
	size_t			size;	/* wire bytes: payload and MACs */
	uint8_t			*buf;	/* payload_len bytes */
	uint8_t			*macs;	/* WIRE_MAC_SIZE per chunk */
	uint32_t		held;	/* chunks with fabric or a worker */
	uint32_t		opened;
	struct rxchunk		chunks[];
};

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

	enum out_state		out_state;
	struct session_hs	hs;
	double			hs_deadline;
	struct session		out;
	uint64_t		out_hello;	/* stamps behind out: our HELLO's, */
	uint64_t		out_acked;	/* and the peer's HELLO_ACK's */
	struct tmsg		*queue, *queue_tail;	/* waiting for session */
	struct tmsg		*inflight;		/* waiting for ACK */
	double			tx_progress;	/* last ACK from it */
	double			rx_progress;	/* last message from it */

	int			in_ready;
	struct session		in;
	uint64_t		in_stamp;	/* newest HELLO accepted */
	struct rxbody		*bodies;
};

struct transport {
	uv_loop_t		*loop;
	struct fabric		*fabric;
	struct workers		*workers;	/* seal and open body chunks */
	pthread_mutex_t		seal_mu;	/* a body's chunks being sealed */
	pthread_cond_t		seal_cv;	/* one more sealed */
	struct session_ctx	ctx;
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
	unsigned		jobs;	/* chunks with a worker */
	void			(*close_cb)(void *);
	void			*close_arg;

	struct bufcache		bufs;	/* body buffers, both directions */
	uint8_t			scratch[WIRE_FRAME_MAX];
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

/* fabric's frame callback (arg is the transport). */
void transport_recv_frame(void *arg, const uint8_t *buf, size_t len, int status);

/* In transport.c, for the receive path. */
double transport_now(const struct transport *t);
void transport_reject(struct transport *t, enum wire_reject r, const char *why);
void transport_arm_tick(struct transport *t, uint64_t first_ms);
uint64_t transport_body_budget(const struct transport *t);
void transport_msg_finish(struct transport *t, struct tmsg *m, int status);
void transport_txop_free(struct transport *t, struct txop *x);
void transport_send_frame(struct transport *t, struct tpeer *p, uint8_t type,
    const uint8_t *buf, size_t len);
struct tpeer *transport_peer_get(struct transport *t, const char *addr);
int transport_peer_insert(struct transport *t, struct tpeer *p);
void transport_abandon_bodies(struct transport *t, struct tpeer *p);
void transport_body_abandon(struct transport *t, struct rxbody *b);
void transport_body_release(struct transport *t, struct rxbody *b);
void transport_peer_reset_out(struct transport *t, struct tpeer *p, int status);
void transport_peer_start_handshake(struct transport *t, struct tpeer *p);
void transport_peer_drain(struct transport *t, struct tpeer *p);
void transport_job_done(struct transport *t);

#endif
