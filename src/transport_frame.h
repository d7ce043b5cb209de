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
 */
#ifndef GD_TRANSPORT_FRAME_H
#define GD_TRANSPORT_FRAME_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "bufcache.h"
#include "util.h"
#include "wire.h"
#include "workers.h"

struct session;
struct transport;
struct tpeer;
struct tmsg;
struct txop;
struct rxbody;

struct tframe {
	struct workers		*workers;	/* seal and open body chunks */
	pthread_mutex_t		seal_mu;	/* a body's chunks being sealed */
	pthread_cond_t		seal_cv;	/* one more sealed */
	unsigned		jobs;	/* with a worker: each comes back
					 * (transport_close_step) */
	struct bufcache		bufs;	/* body buffers, both directions */
	uint8_t			scratch[WIRE_FRAME_MAX]; /* an inline payload opened */
};

/* threads as transport_params'. Returns 0 or a negative errno in err. */
int tframe_init(struct tframe *f, uv_loop_t *loop, uint64_t max_message_size,
    int threads, struct errbuf *err);
void tframe_free(struct tframe *f);
/* Close the workers; cb when they are. */
void tframe_close(struct tframe *f, void (*cb)(void *arg), void *arg);

/* m's body; a message that must wait copies its payload (src) there.
 * Returns 0 or -ENOMEM. */
int tframe_body_new(struct transport *t, struct tmsg *m, const uint8_t *src);
/* Seal m (src: its payload, NULL where it waited) and post it; what
 * fails leaves the peer failing at the next tick. */
void tframe_msg_post(struct transport *t, struct tmsg *m, const uint8_t *src);
/* m is finished: let go of its buffers, cancelling them unless it
 * succeeded, and wipe its plaintext. */
void tframe_msg_release(struct transport *t, struct tmsg *m, int status);
/* The header of a frame of ours in session s, with its next sequence. */
void tframe_header(const struct transport *t, struct session *s, uint8_t type,
    uint64_t len, struct wire_header *h);
/* Send a frame already laid out (no message attached). */
void tframe_send_frame(struct transport *t, struct tpeer *p, uint8_t type,
    const uint8_t *buf, size_t len);

/* An application frame (header checked): delivered, or its body posted. */
void tframe_recv(struct transport *t, const uint8_t *buf, size_t len,
    const struct wire_header *h);
/* Drop the bodies coming in from p. */
void tframe_abandon_bodies(struct transport *t, struct tpeer *p);
/* Has a body coming in from p run out of time? */
int tframe_bodies_late(const struct transport *t, const struct tpeer *p,
    double now);

#endif
