/*
 * transport: see transport.h. This file is the endpoint, the top of the
 * transport's layers (transport_int.h names them all); it owns what
 * outlives any one message: the fabric endpoint and the peer table, the
 * send queues and the messages in flight until their ACKs, the
 * deadlines, the life cycle and the counters. Every frame fabric delivers
 * comes in here and is sent to its layer by type; the layers below call
 * back only through their ops tables (sess_ops, frame_ops). Shaped so:
 *
 * - Send callbacks never run inline: finished messages go to a list that a
 *   zero timer drains, so callers can re-enter freely.
 * - Deadlines are checked by a 100 ms timer that runs only while something
 *   is pending, which keeps an idle endpoint asleep. A peer whose deadline
 *   passed, or whose post, send or seal failed in any layer, is failed
 *   whole at that tick (peer_error), not inside the call that noticed,
 *   which may be deep in another layer's work on that peer.
 * - Closing waits for the timers, fabric, the workers and every job a
 *   worker still holds (transport_close_step counts them down).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"
#include "fabric.h"
#include "log.h"
#include "transport.h"
#include "transport_int.h"

static void on_tick(uv_timer_t *h);
static void transport_peer_drain(struct transport *t, struct tpeer *p);
static void transport_close_step(struct transport *t);
static void on_closed(void *arg);
static void peer_hello_again(struct transport *t, struct tpeer *p, double now);

/* Either layer's rejection, counted with the endpoint's own. */
static void
transport_reject(void *arg, enum wire_reject r, const char *why)
{
	struct transport *t = arg;

	tstats_reject(&t->stats, r, why);
}

static void
transport_arm_tick(struct transport *t, uint64_t first_ms)
{
	if (!t->closing)
		tclock_arm(&t->clock, on_tick, first_ms);
}

static uint64_t
msg_body_bytes(size_t len)
{
	return len <= WIRE_INLINE_MAX ? 0 : wire_body_size(len);
}

/* May a message of len bytes go out to p now, or wait its turn? */
static int
peer_window_open(const struct transport *t, const struct tpeer *p, size_t len)
{
	const struct tmsg *m;
	uint64_t busy = 0;

	if (msg_body_bytes(len) == 0)
		return 1;
	for (m = p->inflight; m != NULL; m = m->next)
		busy += msg_body_bytes(m->fm.len);
	return busy + msg_body_bytes(len) <= t->frame.body_budget;
}

/* --- finishing messages ------------------------------------------------ */

static void
on_dispatch(uv_timer_t *h)
{
	struct transport *t = h->data;
	struct tmsg *m;

	/* A callback may finish more messages; they are run by this loop
	 * rather than by re-arming the timer from inside itself (see
	 * util_timer_at). */
	t->dispatching = 1;
	while ((m = t->done) != NULL) {
		t->done = m->next;
		if (t->done == NULL)
			t->done_tail = NULL;
		if (m->cb != NULL)
			m->cb(m->arg, m->status);
		free(m);
	}
	t->dispatching = 0;
}

/* Hand m, unlinked from its peer already, to the dispatcher: its
 * buffers let go of (cancelled where it failed) first. */
static void
msg_finish(struct transport *t, struct tmsg *m, int status)
{
	tframe_msg_release(&t->frame, &m->fm, status);
	m->status = status;
	m->next = NULL;
	if (t->done_tail != NULL)
		t->done_tail->next = m;
	else
		t->done = m;
	t->done_tail = m;
	if (!t->closing && !t->dispatching)
		uv_timer_start(&t->dispatch, on_dispatch, 0, 0);
}

/* --- fabric ops: the framing's calls ---------------------------------- */

/* Something went wrong with p: it fails at the next tick. */
static void
peer_error(struct transport *t, struct tpeer *p, int error)
{
	p->error = error;
	transport_arm_tick(t, 0);
}

static void
frame_fail(void *arg, struct tframe_peer *fp, int error)
{
	peer_error(arg, GD_CONTAINER_OF(fp, struct tpeer, frame), error);
}

/* Hand op to fabric for p, its bytes counted as type's; a failure leaves
 * the peer failing at the next tick. */
static int
frame_post(void *arg, struct tframe_peer *fp, uint8_t type,
    struct fabric_op *op)
{
	struct transport *t = arg;
	int rc = fabric_post(t->fabric, op);

	if (rc != 0) {
		log_info("transport: cannot post to %s: %s", fp->addr,
		    strerror(-rc));
		frame_fail(t, fp, -EHOSTUNREACH);
		return rc;
	}
	t->stats.bytes_sent[type] += op->len;
	return 0;
}

/* A send to p in its generation gen came back with status: one the
 * provider failed fails the peer at the next tick. */
static void
frame_sent(void *arg, struct tframe_peer *fp, unsigned gen, int status)
{
	struct transport *t = arg;

	if (status == 0 || status == -ECANCELED || t->closing || gen != fp->gen)
		return;
	log_info("transport: send to %s failed: %s", fp->addr,
	    strerror(-status));
	frame_fail(t, fp, -EHOSTUNREACH);
}

/* --- peers -------------------------------------------------------------- */

static struct tpeer *
peer_by_addr(struct transport *t, const char *addr)
{
	struct tpeer *p;

	for (p = t->peers; p != NULL; p = p->next)
		if (strcmp(p->addr, addr) == 0)
			return p;
	return NULL;
}

static struct tpeer *
transport_peer_get(struct transport *t, const char *addr)
{
	char host[HOST_MAX], port[PORT_MAX];
	struct tpeer *p;

	if ((p = peer_by_addr(t, addr)) != NULL)
		return p;
	if (strlen(addr) > WIRE_ADDR_MAX ||
	    addr_split(addr, host, sizeof(host), port) != 0)
		return NULL;
	p = xcalloc(1, sizeof(*p));
	strcpy(p->addr, addr);
	strcpy(p->host, host);
	strcpy(p->port, port);
	p->frame.addr = p->addr;
	tsess_add(&t->sess, &p->sess, p->addr);
	p->next = t->peers;
	t->peers = p;
	return p;
}

static int
transport_peer_insert(struct transport *t, struct tpeer *p)
{
	struct errbuf err;
	int rc;

	if (p->frame.have_fa)
		return 0;
	rc = fabric_insert(t->fabric, p->host, p->port, &p->frame.fa, &err);
	if (rc != 0) {
		log_info("transport: %s", err.msg);
		return rc;
	}
	p->frame.have_fa = 1;
	return 0;
}

/* Forget the outbound session: fail what waits for ACKs. */
static void
transport_peer_reset_out(struct transport *t, struct tpeer *p, int status)
{
	struct tmsg *m;

	while ((m = p->inflight) != NULL) {
		p->inflight = m->next;
		msg_finish(t, m, status);
	}
	tsess_reset_out(&p->sess);
}

/* Fail everything p has going, both ways, with status. */
static void
peer_drop(struct transport *t, struct tpeer *p, int status)
{
	struct tmsg *m;

	transport_peer_reset_out(t, p, status);
	while ((m = p->queue) != NULL) {
		p->queue = m->next;
		msg_finish(t, m, status);
	}
	p->queue_tail = NULL;
	tframe_abandon_bodies(&t->frame, &p->frame);
}

/* The peer stopped making progress (or failed): drop everything. */
static void
peer_fail(struct transport *t, struct tpeer *p, int status)
{
	uint64_t id = p->sess.id;

	log_info("transport: peer %s (id %016llx) unreachable: %s", p->addr,
	    (unsigned long long)id, strerror(-status));
	p->frame.gen++;
	p->error = 0;
	peer_drop(t, p, status);
	tsess_reset_in(&p->sess);
	if (p->frame.have_fa) {
		fabric_remove(t->fabric, p->frame.fa);
		p->frame.have_fa = 0;
	}
	if (t->peer_down != NULL)
		t->peer_down(t->peer_down_arg, p->addr, id, status);
}

static int
peer_expired(struct transport *t, const struct tpeer *p, double now)
{
	const struct tmsg *m;

	if (p->sess.out_state == OUT_HELLO && now > p->hs_deadline)
		return 1;
	/* Once the session is up, a queued message waits for the window,
	 * which moves with every ACK. */
	for (m = p->queue; m != NULL; m = m->next)
		if (now > tclock_deadline(&t->clock, m->start,
		    p->sess.out_state == OUT_READY ? p->tx_progress : 0, m->fm.len))
			return 1;
	for (m = p->inflight; m != NULL; m = m->next)
		if (now > tclock_deadline(&t->clock, m->start, p->tx_progress, m->fm.len))
			return 1;
	return tframe_bodies_late(&t->frame, &p->frame, now);
}

static void
on_tick(uv_timer_t *h)
{
	struct transport *t = h->data;
	double now = tclock_tick(&t->clock);
	struct tpeer *p;
	int busy = 0;

	for (p = t->peers; p != NULL; p = p->next) {
		if (p->error != 0)
			peer_fail(t, p, p->error);
		else if (peer_expired(t, p, now))
			peer_fail(t, p, -ETIMEDOUT);
		else if (p->sess.out_state == OUT_HELLO && now > p->hs_resend)
			peer_hello_again(t, p, now);
		if (p->sess.out_state == OUT_HELLO || p->queue != NULL ||
		    p->inflight != NULL || p->frame.bodies != NULL)
			busy = 1;
	}
	if (!busy)
		uv_timer_stop(&t->clock.tick);
}

/* --- the session layer's calls ----------------------------------------- */

#define SESS_PEER(s) GD_CONTAINER_OF(s, struct tpeer, sess)

/* Send p a fresh HELLO; what fails fails p at the next tick. */
static void
peer_hello_send(struct transport *t, struct tpeer *p, double now)
{
	int rc;

	p->hs_resend = now + p->hs_wait;
	if ((rc = tsess_start(&t->sess, &p->sess)) != 0) {
		peer_error(t, p, rc);
		return;
	}
	transport_arm_tick(t, TCLOCK_TICK_MS);
}

/* Start the handshake with p. */
static void
peer_hello(struct transport *t, struct tpeer *p)
{
	double now = tclock_now(&t->clock);

	p->hs_deadline = tclock_deadline(&t->clock, now, 0, 0);
	p->hs_wait = TRANSPORT_HELLO_RESEND_S;
	peer_hello_send(t, p, now);
}

/*
 * A HELLO can be lost with nothing failing: a peer restarting where a
 * process we were failing lived has its first HELLO dropped with the
 * connection our failure of the old one tears down (fi_av_remove), and
 * the new peer would wait its whole deadline while we already talk to it.
 * So an unanswered HELLO goes again, fresh (a copy would be refused as
 * old), at 1, 3, 7 s... until the deadline; the newest one's answer is
 * the one taken, and a late answer to the one before is dropped
 * uncounted (transport_session keeps that HELLO to know its answer).
 */
static void
peer_hello_again(struct transport *t, struct tpeer *p, double now)
{
	log_debug("transport: no answer from %s to our hello in %.1f s: "
	    "sending another", p->addr, p->hs_wait);
	p->hs_wait *= 2;
	peer_hello_send(t, p, now);
}

static struct tsess *
sess_peer(void *arg, const char *addr)
{
	struct tpeer *p = transport_peer_get(arg, addr);

	return p != NULL ? &p->sess : NULL;
}

static int
sess_reach(void *arg, struct tsess *s)
{
	return transport_peer_insert(arg, SESS_PEER(s));
}

static void
sess_send(void *arg, struct tsess *s, uint8_t type, const uint8_t *buf,
    size_t len)
{
	struct transport *t = arg;

	tframe_send_frame(&t->frame, &SESS_PEER(s)->frame, type, buf, len);
}

static void
sess_out_lost(void *arg, struct tsess *s)
{
	struct tpeer *p = SESS_PEER(s);

	transport_peer_reset_out(arg, p, -ECONNRESET);
	if (p->queue != NULL)
		peer_hello(arg, p);
}

static void
sess_in_new(void *arg, struct tsess *s)
{
	struct transport *t = arg;

	tframe_abandon_bodies(&t->frame, &SESS_PEER(s)->frame);
}

static const struct tsess_ops sess_ops = {
	.peer = sess_peer,
	.reach = sess_reach,
	.send = sess_send,
	.reject = transport_reject,
	.out_lost = sess_out_lost,
	.in_new = sess_in_new,
};

/* --- receiving ---------------------------------------------------------- */

static void
send_ack(struct transport *t, struct tpeer *p, uint64_t acked)
{
	uint8_t frame[WIRE_HEADER_SIZE + WIRE_ACK_SIZE + WIRE_MAC_SIZE];

	if (tsess_seal_ack(&t->sess, &p->sess, acked, frame) != 0) {
		log_warn("transport: cannot seal an ack to %s", p->addr);
		return;
	}
	tframe_send_frame(&t->frame, &p->frame, WIRE_T_ACK, frame, sizeof(frame));
}

/* Hand a message that passed every check to its protocol, then ACK it. */
static void
frame_deliver(void *arg, struct tframe_peer *fp, const struct wire_header *h,
    const uint8_t *payload, size_t wire_bytes)
{
	struct tpeer *p = GD_CONTAINER_OF(fp, struct tpeer, frame);
	struct transport *t = arg;
	const struct tstats_route *r;

	t->stats.bytes_recv[h->type] += wire_bytes;
	t->stats.msgs_recv++;
	/* The ACK goes after the handler: a reply it sends is on the wire
	 * first, so a request-reply round trip does not wait for an ACK's
	 * sealing and posting on either side (and a handler that closed the
	 * transport gets none sent). */
	r = &t->stats.routes[h->type];
	if (r->recv == NULL)
		log_debug("message type %u of %" PRIu64 " bytes from %016" PRIx64
		    " at %s: no handler", h->type, h->payload_len, h->sender, p->addr);
	else
		r->recv(r->arg, h->sender, p->addr, h->type, payload,
		    (size_t)h->payload_len);
	if (!t->closing)
		send_ack(t, p, h->seq);
}

static const struct tframe_ops frame_ops = {
	.post = frame_post,
	.sent = frame_sent,
	.fail = frame_fail,
	.reject = transport_reject,
	.deliver = frame_deliver,
	.job_back = on_closed,
};

static void
on_hello(struct transport *t, const uint8_t *buf, size_t len,
    const struct wire_header *h)
{
	if (tsess_on_hello(&t->sess, buf, len, h) == 0)
		t->stats.bytes_recv[WIRE_T_HELLO] += len;
}

/* Our outbound session is up: what waited for it goes out. */
static void
on_hello_ack(struct transport *t, const uint8_t *buf, size_t len,
    const struct wire_header *h)
{
	struct tsess *s;

	if (tsess_on_hello_ack(&t->sess, buf, len, h, &s) != 0)
		return;
	t->stats.bytes_recv[WIRE_T_HELLO_ACK] += len;
	transport_peer_drain(t, SESS_PEER(s));
}

/* An ACK retires the message it names and lets the queue move on. */
static void
on_ack(struct transport *t, const uint8_t *buf, size_t len,
    const struct wire_header *h)
{
	uint8_t pl[WIRE_ACK_SIZE];
	struct tmsg *m, **pm;
	struct tsess *s;
	struct tpeer *p;
	uint64_t seq;

	if (tsess_open_ack(&t->sess, buf, h, pl, &s) != 0)
		return;
	p = SESS_PEER(s);
	p->tx_progress = tclock_now(&t->clock);
	t->stats.bytes_recv[WIRE_T_ACK] += len;
	seq = wire_get_u64(pl);
	for (pm = &p->inflight; (m = *pm) != NULL; pm = &m->next)
		if (m->fm.seq == seq) {
			*pm = m->next;
			msg_finish(t, m, 0);
			transport_peer_drain(t, p);
			return;
		}
}

/* An application's frame, opened in its sender's inbound session: a body
 * it announces has a deadline to watch. */
static void
on_app(struct transport *t, size_t len, const struct wire_header *h,
    const uint8_t *buf)
{
	struct tsess *s;
	struct tpeer *p;

	if (tsess_open_frame(&t->sess, buf, h, t->frame.scratch, &s) != 0)
		return;
	p = SESS_PEER(s);
	tframe_recv(&t->frame, &p->frame, &p->sess.in, len, h);
	if (p->frame.bodies != NULL)
		transport_arm_tick(t, TCLOCK_TICK_MS);
}

/* Frames by type; what is not named here is an application's. */
static const struct {
	uint8_t	type;
	void	(*on)(struct transport *t, const uint8_t *buf, size_t len,
		    const struct wire_header *h);
} frame_handlers[] = {
	{ WIRE_T_HELLO,		on_hello },
	{ WIRE_T_HELLO_ACK,	on_hello_ack },
	{ WIRE_T_ACK,		on_ack },
};

/* fabric's frame callback: every frame is decoded and checked (header,
 * receiver) before its layer sees it. */
static void
on_frame(void *arg, const uint8_t *buf, size_t len, int status)
{
	struct transport *t = arg;
	struct wire_header h;
	enum wire_reject why;
	size_t i;

	if (t->closing)
		return;
	if (status != 0) {
		if (status == -EMSGSIZE)
			transport_reject(t, WIRE_REJ_OVERSIZE, "frame larger than a buffer");
		else if (status != -ECANCELED)
			log_debug("transport: receive failed: %s",
			    strerror(-status));
		return;
	}
	if (wire_frame_decode(buf, len, &t->ctx.lim, &h, &why) != 0) {
		transport_reject(t, why, "header");
		return;
	}
	if (h.type != WIRE_T_HELLO && h.receiver != t->ctx.self_id) {
		transport_reject(t, WIRE_REJ_MALFORMED, "addressed to another peer");
		return;
	}
	for (i = 0; i < GD_ARRAY_SIZE(frame_handlers); i++)
		if (frame_handlers[i].type == h.type) {
			frame_handlers[i].on(t, buf, len, &h);
			return;
		}
	on_app(t, len, &h, buf);
}

/* --- sending ------------------------------------------------------------ */

/* Put m in flight and hand it to the framing (src: its payload, NULL for
 * a body filled while m waited). */
static void
msg_post(struct transport *t, struct tmsg *m, const uint8_t *src)
{
	struct tpeer *p = m->peer;

	m->next = p->inflight;
	p->inflight = m;
	if (tframe_msg_post(&t->frame, &m->fm, &p->sess.out, src) == 0)
		t->stats.msgs_sent++;
}

/* Post what the queue holds, in order, as far as the window allows. */
static void
transport_peer_drain(struct transport *t, struct tpeer *p)
{
	struct tmsg *m;

	while ((m = p->queue) != NULL && p->sess.out_state == OUT_READY &&
	    peer_window_open(t, p, m->fm.len)) {
		p->queue = m->next;
		if (p->queue == NULL)
			p->queue_tail = NULL;
		msg_post(t, m, m->fm.plain);
	}
}

int
transport_send(struct transport *t, const char *peer, uint8_t type,
    const void *payload, size_t len, proto_sent_cb cb, void *arg)
{
	struct tpeer *p;
	struct tmsg *m;
	int now;

	if (t->closing)
		return -ESHUTDOWN;
	if (type < WIRE_TYPE_APP_MIN || peer == NULL ||
	    strcmp(peer, t->listen) == 0 || (payload == NULL && len > 0))
		return -EINVAL;
	if (len > t->ctx.lim.max_message_size)
		return -EMSGSIZE;
	if ((p = transport_peer_get(t, peer)) == NULL)
		return -EINVAL;
	m = xcalloc(1, sizeof(*m));
	m->peer = p;
	m->fm.peer = &p->frame;
	m->fm.type = type;
	m->fm.len = len;
	m->cb = cb;
	m->arg = arg;
	m->start = tclock_now(&t->clock);
	now = p->sess.out_state == OUT_READY && p->queue == NULL &&
	    peer_window_open(t, p, len);
	if (len > WIRE_INLINE_MAX) {
		if (tframe_body_new(&t->frame, &m->fm, now ? NULL : payload) != 0) {
			free(m);
			return -ENOMEM;
		}
	} else if (!now && len > 0) {
		if ((m->fm.plain = malloc(len)) == NULL) {
			free(m);
			return -ENOMEM;
		}
		memcpy(m->fm.plain, payload, len);
	}
	transport_arm_tick(t, TCLOCK_TICK_MS);
	if (now) {
		msg_post(t, m, payload);
		return 0;
	}
	if (p->queue_tail != NULL)
		p->queue_tail->next = m;
	else
		p->queue = m;
	p->queue_tail = m;
	if (p->sess.out_state == OUT_NONE)
		peer_hello(t, p);
	return 0;
}

/* --- life cycle --------------------------------------------------------- */

/* What transport_open made before the endpoint and the handles. */
static void
transport_free(struct transport *t)
{
	session_ctx_wipe(&t->ctx);
	tframe_free(&t->frame);
	free(t);
}

int
transport_open(uv_loop_t *loop, const struct transport_params *p,
    transport_peer_down_cb peer_down, void *arg, struct transport **out,
    struct errbuf *err)
{
	struct fabric_params fp;
	char host[HOST_MAX], port[PORT_MAX];
	struct transport *t;
	uint64_t maxsz;
	int rc;

	if (p->listen == NULL || strlen(p->listen) > WIRE_ADDR_MAX ||
	    addr_split(p->listen, host, sizeof(host), port) != 0)
		return errbuf_set(err, -EINVAL, "bad listen address \"%s\" "
		    "(want HOST:PORT)", p->listen ? p->listen : "");
	if (p->key == NULL || p->job == NULL || p->self_id == 0)
		return errbuf_set(err, -EINVAL, "transport: key, job and a "
		    "nonzero id are required");
	maxsz = p->max_message_size ? p->max_message_size :
	    TRANSPORT_DEFAULT_MAX_MESSAGE;
	if (maxsz > WIRE_MESSAGE_LIMIT)
		return errbuf_set(err, -EINVAL, "max_message_size above %llu",
		    (unsigned long long)WIRE_MESSAGE_LIMIT);
	t = xcalloc(1, sizeof(*t));
	t->loop = loop;
	t->peer_down = peer_down;
	t->peer_down_arg = arg;
	strcpy(t->listen, p->listen);
	if (session_ctx_init(&t->ctx, p->key, p->job, p->self_id, maxsz) != 0) {
		rc = errbuf_set(err, -EIO, "libsodium failed to initialise");
		goto out_ctx;
	}
	t->sess = (struct tsess_layer){ .ctx = &t->ctx, .listen = t->listen,
	    .ops = &sess_ops, .arg = t };
	t->frame.sess = &t->sess;
	t->frame.ops = &frame_ops;
	t->frame.arg = t;
	t->frame.clock = &t->clock;
	if ((rc = tframe_init(&t->frame, loop, maxsz, p->threads, err)) != 0)
		goto out_ctx;
	memset(&fp, 0, sizeof(fp));
	fp.provider = p->provider;
	fp.host = host;
	fp.port = port;
	fp.frame_size = WIRE_FRAME_MAX;
	fp.rx_depth = RX_DEPTH;
	if ((rc = fabric_open(loop, &fp, on_frame, t, &t->fabric, err)) != 0)
		goto out_frame;
	t->frame.fabric = t->fabric;
	tclock_init(&t->clock, loop, p->op_timeout_ms ? p->op_timeout_ms :
	    TRANSPORT_DEFAULT_TIMEOUT_MS, TRANSPORT_MIN_RATE, t);
	uv_timer_init(loop, &t->dispatch);
	t->dispatch.data = t;
	transport_arm_tick(t, TCLOCK_TICK_MS);
	*out = t;
	return 0;
out_frame:
	tframe_close(&t->frame, NULL, NULL);
	tframe_free(&t->frame);
out_ctx:
	session_ctx_wipe(&t->ctx);
	free(t);
	return rc;
}

/* One thing transport_close waits for is done; the last frees t. */
static void
transport_close_step(struct transport *t)
{
	struct tpeer *p;
	void (*cb)(void *) = t->close_cb;
	void *arg = t->close_arg;

	if (--t->close_pending > 0)
		return;
	while ((p = t->peers) != NULL) {
		t->peers = p->next;
		tsess_reset_in(&p->sess);
		tsess_reset_out(&p->sess);
		free(p);
	}
	transport_free(t);
	if (cb != NULL)
		cb(arg);
}

static void
on_closed(void *arg)
{
	transport_close_step(arg);
}

static void
on_timer_closed(uv_handle_t *h)
{
	transport_close_step(h->data);
}

void
transport_close(struct transport *t, void (*cb)(void *arg), void *arg)
{
	struct tpeer *p;

	if (t->closing)
		return;
	for (p = t->peers; p != NULL; p = p->next)
		peer_drop(t, p, -ECANCELED);
	t->closing = 1;
	tframe_stop(&t->frame);
	t->close_cb = cb;
	t->close_arg = arg;
	on_dispatch(&t->dispatch);
	/* Every job a worker holds comes back (transport_close_step). */
	t->close_pending = 4 + t->frame.jobs;
	uv_close((uv_handle_t *)&t->clock.tick, on_timer_closed);
	uv_close((uv_handle_t *)&t->dispatch, on_timer_closed);
	fabric_close(t->fabric, on_closed, t);
	tframe_close(&t->frame, on_closed, t);
}

/* --- counters ----------------------------------------------------------- */

int
transport_register(struct transport *t, const struct proto *p, proto_recv_fn recv,
    void *arg, struct errbuf *err)
{
	return tstats_register(&t->stats, p, recv, arg, err);
}

uint64_t
transport_bytes_sent(const struct transport *t)
{
	return tstats_sum(t->stats.bytes_sent);
}

uint64_t
transport_bytes_received(const struct transport *t)
{
	return tstats_sum(t->stats.bytes_recv);
}

int
transport_stats_json(const struct transport *t, json_t *obj)
{
	return tstats_json(&t->stats, obj);
}
