/*
 * transport: see transport.h; this file is the endpoint layer (the other
 * two are named in transport_int.h). It owns what outlives any one
 * message: the fabric endpoint and the peer table, the send queues and
 * the messages in flight until their ACKs, the deadlines, the life cycle
 * and the counters. Every frame fabric delivers comes in here and is sent
 * to its layer by type. Shaped so:
 *
 * - Send callbacks never run inline: finished messages go to a list that a
 *   zero timer drains, so callers can re-enter freely.
 * - Deadlines are checked by a 100 ms timer that runs only while something
 *   is pending, which keeps an idle endpoint asleep. A peer whose deadline
 *   passed, or whose post, send or seal failed in any layer, is failed
 *   whole at that tick (transport_peer_error), not inside the call that
 *   noticed, which may be deep in another layer's work on that peer.
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
#include "transport_int.h"

static void on_tick(uv_timer_t *h);

void
transport_reject(struct transport *t, enum wire_reject r, const char *why)
{
	t->rejected[r]++;
	log_debug("transport: rejected message (%s): %s", wire_reject_name(r),
	    why);
}

void
transport_arm_tick(struct transport *t, uint64_t first_ms)
{
	if (t->closing)
		return;
	if (first_ms == 0 || !uv_is_active((uv_handle_t *)&t->tick)) {
		t->tick_due = util_now() + first_ms / 1000.0;
		uv_timer_start(&t->tick, on_tick, first_ms, TICK_MS);
	}
}

/*
 * The clock of every deadline: util_now() less the time this loop stood
 * still (its own work, or the host's), seen as ticks coming late. A peer
 * is not to blame for that time, and what it sent meanwhile is still
 * waiting for the poll phase, which libuv runs after the timers: on the
 * real clock, the first tick after a stall would give up on peers whose
 * answers sit unread.
 */
double
transport_now(const struct transport *t)
{
	return util_now() - t->stalled;
}

/*
 * When an operation started at start on len bytes runs out of time. The
 * clock restarts whenever the peer makes progress, so a long backlog to a
 * live peer is fine while a silent one is given up after one timeout.
 */
double
transport_deadline(const struct transport *t, double start, double progress,
    size_t len)
{
	return (start > progress ? start : progress) + t->timeout_ms / 1000.0 +
	    (double)len / (double)TRANSPORT_MIN_RATE;
}

/*
 * Body bytes one peer may have in flight to another: what bounds the
 * memory an authenticated peer can make us hold, and what a sender keeps
 * to so it never trips that bound (two, so one big message can follow
 * another without a gap). A sender counts until the ACK, the receiver
 * until the body is in, so the receiver never sees more than was sent.
 */
uint64_t
transport_body_budget(const struct transport *t)
{
	return 2 * wire_body_size(t->ctx.lim.max_message_size);
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
		busy += msg_body_bytes(m->len);
	return busy + msg_body_bytes(len) <= transport_body_budget(t);
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
	tframe_msg_release(t, m, status);
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

/* --- fabric ops --------------------------------------------------------- */

/* Something went wrong with p: it fails at the next tick. */
void
transport_peer_error(struct transport *t, struct tpeer *p, int error)
{
	p->error = error;
	transport_arm_tick(t, 0);
}

/* Hand op to fabric for p, its bytes counted as type's; a failure leaves
 * the peer failing at the next tick. */
int
transport_post(struct transport *t, struct tpeer *p, uint8_t type,
    struct fabric_op *op)
{
	int rc = fabric_post(t->fabric, op);

	if (rc != 0) {
		log_info("transport: cannot post to %s: %s", p->addr,
		    strerror(-rc));
		transport_peer_error(t, p, -EHOSTUNREACH);
		return rc;
	}
	t->bytes_sent[type] += op->len;
	return 0;
}

/* A send to p in its generation gen came back with status: one the
 * provider failed fails the peer at the next tick. */
void
transport_sent(struct transport *t, struct tpeer *p, unsigned gen, int status)
{
	if (status == 0 || status == -ECANCELED || t->closing || gen != p->gen)
		return;
	log_info("transport: send to %s failed: %s", p->addr,
	    strerror(-status));
	transport_peer_error(t, p, -EHOSTUNREACH);
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

struct tpeer *
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
	p->next = t->peers;
	t->peers = p;
	return p;
}

int
transport_peer_insert(struct transport *t, struct tpeer *p)
{
	struct errbuf err;
	int rc;

	if (p->have_fa)
		return 0;
	rc = fabric_insert(t->fabric, p->host, p->port, &p->fa, &err);
	if (rc != 0) {
		log_info("transport: %s", err.msg);
		return rc;
	}
	p->have_fa = 1;
	return 0;
}

/* Forget the outbound session: fail what waits for ACKs. */
void
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
	tframe_abandon_bodies(t, p);
}

/* The peer stopped making progress (or failed): drop everything. */
static void
peer_fail(struct transport *t, struct tpeer *p, int status)
{
	uint64_t id = p->id;

	log_info("transport: peer %s (id %016llx) unreachable: %s", p->addr,
	    (unsigned long long)id, strerror(-status));
	p->gen++;
	p->error = 0;
	peer_drop(t, p, status);
	tsess_reset_in(&p->sess);
	if (p->have_fa) {
		fabric_remove(t->fabric, p->fa);
		p->have_fa = 0;
	}
	if (t->peer_down != NULL)
		t->peer_down(t->peer_down_arg, p->addr, id, status);
}

static int
peer_expired(const struct transport *t, const struct tpeer *p, double now)
{
	const struct tmsg *m;

	if (p->sess.out_state == OUT_HELLO && now > p->sess.hs_deadline)
		return 1;
	/* Once the session is up, a queued message waits for the window,
	 * which moves with every ACK. */
	for (m = p->queue; m != NULL; m = m->next)
		if (now > transport_deadline(t, m->start,
		    p->sess.out_state == OUT_READY ? p->tx_progress : 0, m->len))
			return 1;
	for (m = p->inflight; m != NULL; m = m->next)
		if (now > transport_deadline(t, m->start, p->tx_progress, m->len))
			return 1;
	return tframe_bodies_late(t, p, now);
}

static void
on_tick(uv_timer_t *h)
{
	struct transport *t = h->data;
	struct tpeer *p;
	double now = util_now(), late = now - t->tick_due;
	int busy = 0;

	if (late > TICK_MS / 1000.0)
		t->stalled += late;
	t->tick_due = now + TICK_MS / 1000.0;
	now = transport_now(t);
	for (p = t->peers; p != NULL; p = p->next) {
		if (p->error != 0)
			peer_fail(t, p, p->error);
		else if (peer_expired(t, p, now))
			peer_fail(t, p, -ETIMEDOUT);
		if (p->sess.out_state == OUT_HELLO || p->queue != NULL ||
		    p->inflight != NULL || p->bodies != NULL)
			busy = 1;
	}
	if (!busy)
		uv_timer_stop(&t->tick);
}

/* --- receiving ---------------------------------------------------------- */

static void
send_ack(struct transport *t, struct tpeer *p, uint64_t acked)
{
	struct wire_header h;
	uint8_t frame[WIRE_HEADER_SIZE + WIRE_ACK_SIZE + WIRE_MAC_SIZE];
	uint8_t pl[WIRE_ACK_SIZE];

	tframe_header(t, &p->sess.in, WIRE_T_ACK, WIRE_ACK_SIZE, &h);
	h.flags = WIRE_F_INLINE;
	wire_header_encode(&h, frame);
	wire_put_u64(pl, acked);
	if (session_seal(&p->sess.in, frame, h.seq, 0, pl, sizeof(pl),
	    frame + WIRE_HEADER_SIZE) != 0) {
		log_warn("transport: cannot seal an ack to %s", p->addr);
		return;
	}
	tframe_send_frame(t, p, WIRE_T_ACK, frame, sizeof(frame));
}

/* Hand a message that passed every check to its protocol, then ACK it. */
void
transport_deliver(struct transport *t, struct tpeer *p,
    const struct wire_header *h, const uint8_t *payload, size_t wire_bytes)
{
	const struct transport_route *r;

	t->bytes_recv[h->type] += wire_bytes;
	t->msgs_recv++;
	p->rx_progress = transport_now(t);
	/* The ACK goes after the handler: a reply it sends is on the wire
	 * first, so a request-reply round trip does not wait for an ACK's
	 * sealing and posting on either side (and a handler that closed the
	 * transport gets none sent). */
	r = &t->routes[h->type];
	if (r->recv == NULL)
		log_debug("message type %u of %" PRIu64 " bytes from %016" PRIx64
		    " at %s: no handler", h->type, h->payload_len, h->sender, p->addr);
	else
		r->recv(r->arg, h->sender, p->addr, h->type, payload,
		    (size_t)h->payload_len);
	if (!t->closing)
		send_ack(t, p, h->seq);
}

/* An ACK retires the message it names and lets the queue move on. */
static void
on_ack(struct transport *t, const uint8_t *buf, size_t len,
    const struct wire_header *h)
{
	uint8_t pl[WIRE_ACK_SIZE];
	struct tmsg *m, **pm;
	struct tpeer *p;
	uint64_t seq;

	if (tsess_open_ack(t, buf, h, pl, &p) != 0)
		return;
	p->tx_progress = transport_now(t);
	t->bytes_recv[WIRE_T_ACK] += len;
	seq = wire_get_u64(pl);
	for (pm = &p->inflight; (m = *pm) != NULL; pm = &m->next)
		if (m->seq == seq) {
			*pm = m->next;
			msg_finish(t, m, 0);
			transport_peer_drain(t, p);
			return;
		}
}

/* Frames by type; what is not named here is an application's. */
static const struct {
	uint8_t	type;
	void	(*on)(struct transport *t, const uint8_t *buf, size_t len,
		    const struct wire_header *h);
} frame_handlers[] = {
	{ WIRE_T_HELLO,		tsess_on_hello },
	{ WIRE_T_HELLO_ACK,	tsess_on_hello_ack },
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
	tframe_recv(t, buf, len, &h);
}

/* --- sending ------------------------------------------------------------ */

/* Put m in flight and hand it to the framing (src: its payload, NULL for
 * a body filled while m waited). */
static void
msg_post(struct transport *t, struct tmsg *m, const uint8_t *src)
{
	m->next = m->peer->inflight;
	m->peer->inflight = m;
	tframe_msg_post(t, m, src);
}

/* Post what the queue holds, in order, as far as the window allows. */
void
transport_peer_drain(struct transport *t, struct tpeer *p)
{
	struct tmsg *m;

	while ((m = p->queue) != NULL && p->sess.out_state == OUT_READY &&
	    peer_window_open(t, p, m->len)) {
		p->queue = m->next;
		if (p->queue == NULL)
			p->queue_tail = NULL;
		msg_post(t, m, m->plain);
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
	m->type = type;
	m->len = len;
	m->cb = cb;
	m->arg = arg;
	m->start = transport_now(t);
	now = p->sess.out_state == OUT_READY && p->queue == NULL &&
	    peer_window_open(t, p, len);
	if (len > WIRE_INLINE_MAX) {
		if (tframe_body_new(t, m, now ? NULL : payload) != 0) {
			free(m);
			return -ENOMEM;
		}
	} else if (!now && len > 0) {
		if ((m->plain = malloc(len)) == NULL) {
			free(m);
			return -ENOMEM;
		}
		memcpy(m->plain, payload, len);
	}
	transport_arm_tick(t, TICK_MS);
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
		tsess_start(t, p);
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
	t->timeout_ms = p->op_timeout_ms ? p->op_timeout_ms :
	    TRANSPORT_DEFAULT_TIMEOUT_MS;
	if (session_ctx_init(&t->ctx, p->key, p->job, p->self_id, maxsz) != 0) {
		rc = errbuf_set(err, -EIO, "libsodium failed to initialise");
		goto out_ctx;
	}
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
	uv_timer_init(loop, &t->tick);
	uv_timer_init(loop, &t->dispatch);
	t->tick.data = t->dispatch.data = t;
	transport_arm_tick(t, TICK_MS);
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
void
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
	t->close_cb = cb;
	t->close_arg = arg;
	on_dispatch(&t->dispatch);
	/* Every job a worker holds comes back (transport_close_step). */
	t->close_pending = 4 + t->frame.jobs;
	uv_close((uv_handle_t *)&t->tick, on_timer_closed);
	uv_close((uv_handle_t *)&t->dispatch, on_timer_closed);
	fabric_close(t->fabric, on_closed, t);
	tframe_close(&t->frame, on_closed, t);
}

/* --- counters ----------------------------------------------------------- */

int
transport_register(struct transport *t, const struct proto *p, proto_recv_fn recv,
    void *arg, struct errbuf *err)
{
	/* WIRE_TYPE_APP_MAX is the largest uint8_t */
	if (p->first < WIRE_TYPE_APP_MIN || p->first > p->last || recv == NULL)
		return errbuf_set(err, -EINVAL, "%s: types %u..%u are not application types",
		    p->name, p->first, p->last);
	for (unsigned i = p->first; i <= p->last; i++) {
		if (t->routes[i].proto != NULL)
			return errbuf_set(err, -EEXIST, "%s: type %u is %s's", p->name, i,
			    t->routes[i].proto->name);
	}
	for (unsigned i = p->first; i <= p->last; i++)
		t->routes[i] = (struct transport_route){ p, recv, arg };
	return 0;
}

static uint64_t
transport_sum(const uint64_t by_type[256])
{
	uint64_t n = 0;

	for (int i = 0; i < 256; i++)
		n += by_type[i];
	return n;
}

uint64_t
transport_bytes_sent(const struct transport *t)
{
	return transport_sum(t->bytes_sent);
}

uint64_t
transport_bytes_received(const struct transport *t)
{
	return transport_sum(t->bytes_recv);
}


static json_t *
bytes_json(const struct transport *t, const uint64_t *v)
{
	json_t *o = json_object();
	uint64_t total = 0;
	char name[16];
	const char *n;
	int i;

	if (o == NULL)
		return NULL;
	for (i = 1; i < 256; i++) {
		if (v[i] == 0)
			continue;
		if ((n = proto_type_name(t->routes[i].proto, (uint8_t)i)) == NULL &&
		    (n = wire_type_name((uint8_t)i)) == NULL) {
			snprintf(name, sizeof(name), "type_%u", (unsigned)(uint8_t)i);
			n = name;
		}
		json_object_set_new(o, n, json_integer((json_int_t)v[i]));
		total += v[i];
	}
	json_object_set_new(o, "total", json_integer((json_int_t)total));
	return o;
}

int
transport_stats_json(const struct transport *t, json_t *obj)
{
	json_t *rej = json_object(), *sent, *recv;
	uint64_t total = 0;
	int i;

	if (rej == NULL)
		return -ENOMEM;
	for (i = 0; i < WIRE_REJ_COUNT; i++) {
		json_object_set_new(rej, wire_reject_name(i),
		    json_integer((json_int_t)t->rejected[i]));
		total += t->rejected[i];
	}
	json_object_set_new(rej, "total", json_integer((json_int_t)total));
	sent = bytes_json(t, t->bytes_sent);
	recv = bytes_json(t, t->bytes_recv);
	if (sent == NULL || recv == NULL) {
		json_decref(rej);
		json_decref(sent);
		json_decref(recv);
		return -ENOMEM;
	}
	json_object_set_new(obj, "rejected", rej);
	json_object_set_new(obj, "bytes_sent", sent);
	json_object_set_new(obj, "bytes_received", recv);
	json_object_set_new(obj, "messages_sent",
	    json_integer((json_int_t)t->msgs_sent));
	json_object_set_new(obj, "messages_received",
	    json_integer((json_int_t)t->msgs_recv));
	return 0;
}
