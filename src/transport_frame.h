/*
 * transport_frame: the transport's framing layer, how a message becomes
 * bytes for fabric and back. A message of up to WIRE_INLINE_MAX bytes
 * travels in its frame; a bigger one's frame announces a body of 1 MiB
 * chunks, each sealed and opened under the body's own key by the loop
 * thread and the transport's workers side by side. Both directions are
 * here because they are one layout, and because the buffers and threads
 * they share (the body cache, the workers, the seal lock) are this
 * layer's state alone: the other layers see a message posted, a frame
 * sent, a payload delivered.
 *
 * It sits on the session layer (headers and keys come from a peer's
 * sessions, which the caller names) and knows nothing of the endpoint:
 * its state is struct tframe, with a struct tframe_peer and a struct
 * tframe_msg that the endpoint embeds in its peer and its message, and
 * what it needs of the endpoint (posting to fabric with the bytes
 * counted, failing a peer, delivering a message) it asks through struct
 * tframe_ops; its bodies' deadlines run on the endpoint's clock.
 */
#ifndef GD_TRANSPORT_FRAME_H
#define GD_TRANSPORT_FRAME_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "bufcache.h"
#include "fabric.h"
#include "transport_clock.h"
#include "transport_session.h"
#include "util.h"
#include "wire.h"
#include "workers.h"

struct txop;
struct rxbody;

/* A peer as the framing sees it. The endpoint sets fa and have_fa (its
 * place in fabric) and bumps gen each time it fails the peer, so that
 * what comes back of an older generation fails nothing. */
struct tframe_peer {
	const char		*addr;	/* "HOST:PORT", for the log */
	fi_addr_t		fa;
	int			have_fa;
	unsigned		gen;
	double			rx_progress;	/* last message from it */
	struct rxbody		*bodies;	/* coming in */
};

/* A message on its way out, as the framing sees it. */
struct tframe_msg {
	struct tframe_peer	*peer;
	uint8_t			type;
	uint64_t		seq;
	uint8_t			*plain;	/* inline payload kept until sealed */
	size_t			len;
	struct txop		*frame, *body;
};

/* What the layer asks of the endpoint; arg is tframe.arg. */
struct tframe_ops {
	/* Hand op to fabric for p, its bytes counted as type's: 0, or a
	 * negative errno with p failing at the next tick. */
	int (*post)(void *arg, struct tframe_peer *p, uint8_t type,
	    struct fabric_op *op);
	/* A send to p in its generation gen came back with status. */
	void (*sent)(void *arg, struct tframe_peer *p, unsigned gen, int status);
	/* p is to fail at the next tick with error. */
	void (*fail)(void *arg, struct tframe_peer *p, int error);
	/* Count a frame rejected; why is for the log. */
	void (*reject)(void *arg, enum wire_reject r, const char *why);
	/* A message from p passed every check; payload is valid during the
	 * call only; wire_bytes its frame's and body's. */
	void (*deliver)(void *arg, struct tframe_peer *p,
	    const struct wire_header *h, const uint8_t *payload,
	    size_t wire_bytes);
	/* A worker gave back a job while closing (tframe_close). */
	void (*job_back)(void *arg);
};

struct tframe {
	const struct tsess_layer *sess;	/* headers: job and sender */
	const struct tclock	*clock;	/* the endpoint's, for bodies */
	struct fabric		*fabric;	/* set once it is open */
	const struct tframe_ops	*ops;
	void			*arg;
	/*
	 * Body bytes one peer may have in flight to another: what bounds the
	 * memory an authenticated peer can make us hold, and what a sender
	 * keeps to so it never trips that bound (two, so one big message can
	 * follow another without a gap). A sender counts until the ACK, the
	 * receiver until the body is in, so the receiver never sees more
	 * than was sent.
	 */
	uint64_t		body_budget;
	int			closing;	/* tframe_close: nothing posted,
						 * nothing cancelled */
	struct workers		*workers;	/* seal and open body chunks */
	pthread_mutex_t		seal_mu;	/* a body's chunks being sealed */
	pthread_cond_t		seal_cv;	/* one more sealed */
	unsigned		jobs;	/* with a worker: each comes back
					 * (ops->job_back) */
	struct bufcache		bufs;	/* body buffers, both directions */
	uint8_t			scratch[WIRE_FRAME_MAX]; /* an inline payload opened */
};

/* sess, clock, ops and arg are set by the caller first; threads as
 * transport_params'. Returns 0 or a negative errno in err. */
int tframe_init(struct tframe *f, uv_loop_t *loop, uint64_t max_message_size,
    int threads, struct errbuf *err);
void tframe_free(struct tframe *f);
/* From now on nothing is posted or cancelled: the endpoint is closing. */
void tframe_stop(struct tframe *f);
/* Close the workers; cb when they are. */
void tframe_close(struct tframe *f, void (*cb)(void *arg), void *arg);

/* m's body; a message that must wait copies its payload (src) there.
 * Returns 0 or -ENOMEM. */
int tframe_body_new(struct tframe *f, struct tframe_msg *m, const uint8_t *src);
/* Seal m in session out (src: its payload, NULL where it waited) and
 * post it. 0 once its frame is posted, or a negative errno; what fails
 * leaves the peer failing at the next tick. */
int tframe_msg_post(struct tframe *f, struct tframe_msg *m,
    struct session *out, const uint8_t *src);
/* m is finished: let go of its buffers, cancelling them unless it
 * succeeded, and wipe its plaintext. */
void tframe_msg_release(struct tframe *f, struct tframe_msg *m, int status);
/* Send a frame already laid out (no message attached). */
void tframe_send_frame(struct tframe *f, struct tframe_peer *p, uint8_t type,
    const uint8_t *buf, size_t len);

/* An application frame from p, opened already in its inbound session in
 * (an inline one's payload in f->scratch): delivered, or its body
 * posted. */
void tframe_recv(struct tframe *f, struct tframe_peer *p,
    struct session *in, size_t len, const struct wire_header *h);
/* Drop the bodies coming in from p. */
void tframe_abandon_bodies(struct tframe *f, struct tframe_peer *p);
/* Has a body coming in from p run out of time? */
int tframe_bodies_late(const struct tframe *f, const struct tframe_peer *p,
    double now);

#endif
