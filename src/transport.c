/*
 * transport: see transport.h. Shape of the code:
 *
 * - struct tpeer, one per "HOST:PORT", lives until transport_close, so
 *   pointers to it stay valid in any callback. It holds the outbound
 *   session (started by us: our messages, their ACKs) and the inbound one
 *   (started by them: their messages, our ACKs).
 * - struct tmsg is one application send; struct txop is one buffer handed
 *   to fabric: a frame, or a body, whose chunks the loop and idle
 *   workers seal together, each posted as soon as it is sealed. A txop
 *   can outlive its message (a worker or the provider may still hold a
 *   part of it after we gave up on it), so each owns itself and frees
 *   itself once everything came back. The transport counts the workers'
 *   jobs out so that closing waits for them.
 * - Send callbacks never run inline: finished messages go to a list that a
 *   zero timer drains, so callers can re-enter freely. Deadlines are
 *   checked by a 100 ms timer that runs only while something is pending,
 *   which keeps an idle endpoint asleep.
 * - What arrives is handled in transport_recv.c, which also holds the
 *   records above; this file is the peer table, the send path, the
 *   timers and the life cycle.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "addr.h"
#include "fabric.h"
#include "log.h"
#include "transport_recv.h"

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
static double
deadline_of(const struct transport *t, double start, double progress,
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

/* Give up on what fabric still holds of body x; it frees itself once
 * fabric let go of all of it. */
static void
body_cancel(struct transport *t, struct txop *x)
{
	uint32_t i;

	for (i = 0; i < x->nchunks; i++)
		if (fabric_cancel(t->fabric, &x->chunks[i].op) == 1)
			x->held--;
	if (x->held == 0)
		transport_txop_free(t, x);
}

/* Detach m from its fabric buffers, cancelling those still queued, and
 * hand it to the dispatcher. The caller has unlinked m from its peer. */
void
transport_msg_finish(struct transport *t, struct tmsg *m, int status)
{
	struct txop *x;

	if ((x = m->frame) != NULL) {
		x->msg = NULL;
		m->frame = NULL;
		if (status != 0 && !t->closing &&
		    fabric_cancel(t->fabric, &x->op) == 1)
			transport_txop_free(t, x);
	}
	if ((x = m->body) != NULL) {
		x->msg = NULL;
		m->body = NULL;
		if (status != 0 && !t->closing)
			body_cancel(t, x);
	}
	if (m->plain != NULL) {
		sodium_memzero(m->plain, m->len);
		free(m->plain);
		m->plain = NULL;
	}
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

/* --- fabric buffers ----------------------------------------------------- */

/* A send to p failed in the provider: the peer fails at the next tick. */
static void
tx_failed(struct transport *t, struct tpeer *p, unsigned gen, int status)
{
	if (status == 0 || status == -ECANCELED || t->closing || gen != p->gen)
		return;
	log_info("transport: send to %s failed: %s", p->addr,
	    strerror(-status));
	p->error = -EHOSTUNREACH;
	transport_arm_tick(t, 0);
}

static void
on_tx_done(struct fabric_op *op, int status, size_t len)
{
	struct txop *x = (struct txop *)op;

	(void)len;
	if (x->msg != NULL)
		x->msg->frame = NULL;
	tx_failed(x->t, x->peer, x->gen, status);
	transport_txop_free(x->t, x);
}

/* A chunk of body x came back from a worker or fabric. */
static void
body_unhold(struct transport *t, struct txop *x)
{
	if (--x->held > 0)
		return;
	if (x->msg != NULL)
		x->msg->body = NULL;
	transport_txop_free(t, x);
}

static void
on_chunk_sent(struct fabric_op *op, int status, size_t len)
{
	struct txop *x = ((struct txchunk *)op)->x;

	(void)len;
	tx_failed(x->t, x->peer, x->gen, status);
	body_unhold(x->t, x);
}

/* Bodies come from and go back to the buffer cache; plaintext that was
 * never sealed is wiped first, as any copy of a payload. */
void
transport_txop_free(struct transport *t, struct txop *x)
{
	if (x == NULL)
		return;
	if (x->unsealed > 0)
		sodium_memzero(x->data, x->op.len);
	session_bodykey_wipe(&x->key);
	free(x->chunks);
	bufcache_put(&t->bufs, x, sizeof(*x) + x->op.len);
}

static struct txop *
txop_new(struct transport *t, struct tpeer *p, uint8_t type, size_t size)
{
	struct txop *x = bufcache_get(&t->bufs, sizeof(*x) + size);

	if (x == NULL)
		return NULL;
	memset(x, 0, sizeof(*x));
	x->t = t;
	x->peer = p;
	x->gen = p->gen;
	x->type = type;
	x->op.cb = on_tx_done;
	x->op.buf = x->data;
	x->op.len = size;
	x->op.addr = p->fa;
	return x;
}

/* A post to p failed: the peer fails at the next tick. */
static void
post_failed(struct transport *t, struct tpeer *p, int rc)
{
	log_info("transport: cannot post to %s: %s", p->addr, strerror(-rc));
	p->error = -EHOSTUNREACH;
	transport_arm_tick(t, 0);
}

/* Post x, or note the failure for the next tick; x is gone either way
 * from the caller's point of view except through its message. */
static int
txop_post(struct transport *t, struct txop *x)
{
	int rc = fabric_post(t->fabric, &x->op);

	if (rc != 0) {
		post_failed(t, x->peer, rc);
		if (x->msg != NULL)
			x->msg->frame = NULL;
		transport_txop_free(t, x);
		return rc;
	}
	t->bytes_sent[x->type] += x->op.len;
	return 0;
}

/* Where chunk i of body x lies: its text, then its MAC. */
static uint8_t *
body_chunk(struct txop *x, uint32_t i)
{
	return x->data + (size_t)i * (WIRE_CHUNK_SIZE + WIRE_MAC_SIZE);
}

/*
 * A body for a message of len bytes, each chunk's place followed by its
 * MAC's. A message that must wait gets a copy of its payload here (src),
 * sealed in place when its turn comes; one posted at once (src NULL) is
 * sealed straight from the caller's buffer.
 */
static struct txop *
body_new(struct transport *t, struct tpeer *p, uint8_t type,
    const uint8_t *src, size_t len)
{
	uint32_t i, n = wire_chunk_count(len);
	struct txop *x = txop_new(t, p, type, wire_body_size(len));

	if (x == NULL)
		return NULL;
	if ((x->chunks = calloc(n, sizeof(*x->chunks))) == NULL) {
		transport_txop_free(t, x);
		return NULL;
	}
	x->nchunks = x->unsealed = n;
	for (i = 0; src != NULL && i < n; i++)
		memcpy(body_chunk(x, i), src + (size_t)i * WIRE_CHUNK_SIZE,
		    wire_chunk_len(len, i));
	return x;
}

/* Send a small frame already laid out in buf (no message attached). */
void
transport_send_frame(struct transport *t, struct tpeer *p, uint8_t type,
    const uint8_t *buf, size_t len)
{
	struct txop *x = txop_new(t, p, type, len);

	if (x == NULL) {
		log_warn("transport: out of memory sending to %s", p->addr);
		return;
	}
	memcpy(x->data, buf, len);
	x->op.kind = FABRIC_OP_SEND;
	txop_post(t, x);
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

/* Free b once fabric gave back every receive it was handed. */
void
transport_body_release(struct transport *t, struct rxbody *b)
{
	if (b->held > 0)
		return;
	bufcache_put(&t->bufs, b->buf, (size_t)b->h.payload_len);
	session_bodykey_wipe(&b->key);
	free(b);
}

/* Give up on b: unlinked already, its receives cancelled, freed once
 * fabric let go of them. */
void
transport_body_abandon(struct transport *t, struct rxbody *b)
{
	uint32_t i;

	b->next = NULL;
	b->abandoned = 1;
	for (i = 0; i < b->h.chunk_count; i++)
		if (fabric_cancel(t->fabric, &b->chunks[i].op) == 1)
			b->held--;
	transport_body_release(t, b);
}

void
transport_abandon_bodies(struct transport *t, struct tpeer *p)
{
	struct rxbody *b;

	while ((b = p->bodies) != NULL) {
		p->bodies = b->next;
		transport_body_abandon(t, b);
	}
}

/* Forget the outbound session: fail what waits for ACKs. */
void
transport_peer_reset_out(struct transport *t, struct tpeer *p, int status)
{
	struct tmsg *m;

	while ((m = p->inflight) != NULL) {
		p->inflight = m->next;
		transport_msg_finish(t, m, status);
	}
	session_wipe(&p->out);
	session_hs_wipe(&p->hs);
	p->out_state = OUT_NONE;
}

/* The peer stopped making progress (or failed): drop everything. */
static void
peer_fail(struct transport *t, struct tpeer *p, int status)
{
	struct tmsg *m;
	uint64_t id = p->id;

	log_info("transport: peer %s (id %016llx) unreachable: %s", p->addr,
	    (unsigned long long)id, strerror(-status));
	p->gen++;
	p->error = 0;
	transport_peer_reset_out(t, p, status);
	while ((m = p->queue) != NULL) {
		p->queue = m->next;
		transport_msg_finish(t, m, status);
	}
	p->queue_tail = NULL;
	transport_abandon_bodies(t, p);
	session_wipe(&p->in);
	p->in_ready = 0;
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
	const struct rxbody *b;

	if (p->out_state == OUT_HELLO && now > p->hs_deadline)
		return 1;
	/* Once the session is up, a queued message waits for the window,
	 * which moves with every ACK. */
	for (m = p->queue; m != NULL; m = m->next)
		if (now > deadline_of(t, m->start, p->out_state == OUT_READY ?
		    p->tx_progress : 0, m->len))
			return 1;
	for (m = p->inflight; m != NULL; m = m->next)
		if (now > deadline_of(t, m->start, p->tx_progress, m->len))
			return 1;
	for (b = p->bodies; b != NULL; b = b->next)
		if (now > deadline_of(t, b->start, p->rx_progress, b->size))
			return 1;
	return 0;
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
		if (p->out_state == OUT_HELLO || p->queue != NULL ||
		    p->inflight != NULL || p->bodies != NULL)
			busy = 1;
	}
	if (!busy)
		uv_timer_stop(&t->tick);
}

void
transport_peer_start_handshake(struct transport *t, struct tpeer *p)
{
	if (transport_peer_insert(t, p) != 0) {
		p->error = -EHOSTUNREACH;
		transport_arm_tick(t, 0);
		return;
	}
	if (session_hello_make(&t->ctx, &p->hs, t->listen,
	    p->in_ready ? p->in_stamp : 0) != 0) {
		p->error = -EINVAL;
		transport_arm_tick(t, 0);
		return;
	}
	p->out_state = OUT_HELLO;
	p->out_hello = p->hs.stamp;
	p->hs_deadline = deadline_of(t, transport_now(t), 0, 0);
	transport_send_frame(t, p, WIRE_T_HELLO, p->hs.hello, p->hs.hello_len);
	transport_arm_tick(t, TICK_MS);
}

/* --- sending ------------------------------------------------------------ */

/* The peer fails at the next tick for want of memory or a seal. */
static void
seal_failed(struct transport *t, struct tpeer *p, size_t len, int rc)
{
	log_warn("transport: cannot seal %zu bytes: %s", len, strerror(-rc));
	p->error = rc;
	transport_arm_tick(t, 0);
}

/* Seal chunk i of x from its plaintext: src's, or its own in place. */
static int
chunk_seal(struct txop *x, uint32_t i)
{
	struct txchunk *c = &x->chunks[i];

	return session_bodykey_seal(&x->key, c->ad, x->seq, i + 1,
	    x->src != NULL ? x->src + (size_t)i * WIRE_CHUNK_SIZE : c->op.buf,
	    c->op.len - WIRE_MAC_SIZE, c->op.buf);
}

/* Chunk c was sealed (rc 0) or not: post it, unless its message or its
 * peer's session is gone meanwhile, and let go of it. */
static void
chunk_ready(struct transport *t, struct txchunk *c, int rc)
{
	struct txop *x = c->x;

	c->posted = 1;
	x->nposted++;
	if (rc == 0)
		x->unsealed--;
	if (x->msg != NULL && !t->closing && x->gen == x->peer->gen) {
		if (rc != 0)
			seal_failed(t, x->peer, c->op.len, rc);
		else if ((rc = fabric_post(t->fabric, &c->op)) != 0)
			post_failed(t, x->peer, rc);
		else {
			t->bytes_sent[x->type] += c->op.len;
			x->held++;
		}
	}
	body_unhold(t, x);
}

/* Under seal_mu: the next chunk of x nobody took yet, or UINT32_MAX. */
static uint32_t
body_claim(struct transport *t, struct txop *x)
{
	uint32_t i = UINT32_MAX;

	pthread_mutex_lock(&t->seal_mu);
	if (x->claimed < x->nchunks)
		i = x->claimed++;
	pthread_mutex_unlock(&t->seal_mu);
	return i;
}

/* A worker's job: seal chunks of x until none is left to take. It touches
 * nothing but the chunks it took, the body's key, sequence and src. */
static void
body_help(struct workers_job *j)
{
	struct txop *x = GD_CONTAINER_OF(j, struct txhelper, job)->x;
	struct transport *t = x->t;
	uint32_t i;
	int rc;

	while ((i = body_claim(t, x)) != UINT32_MAX) {
		rc = chunk_seal(x, i);
		pthread_mutex_lock(&t->seal_mu);
		x->chunks[i].rc = rc;
		x->chunks[i].sealed = 1;
		pthread_cond_signal(&t->seal_cv);
		pthread_mutex_unlock(&t->seal_mu);
	}
}

static void
body_helped(struct workers_job *j)
{
	struct txop *x = GD_CONTAINER_OF(j, struct txhelper, job)->x;
	struct transport *t = x->t;

	body_unhold(t, x);
	transport_job_done(t);
}

/* Post the chunks of x the workers sealed; with wait, until all are. */
static void
body_post_sealed(struct transport *t, struct txop *x, int wait)
{
	uint32_t i;

	pthread_mutex_lock(&t->seal_mu);
	for (;;) {
		for (i = 0; i < x->nchunks; i++)
			if (x->chunks[i].sealed && !x->chunks[i].posted)
				break;
		if (i < x->nchunks) {
			pthread_mutex_unlock(&t->seal_mu);
			chunk_ready(t, &x->chunks[i], x->chunks[i].rc);
			pthread_mutex_lock(&t->seal_mu);
		} else if (wait && x->nposted < x->nchunks)
			pthread_cond_wait(&t->seal_cv, &t->seal_mu);
		else
			break;
	}
	pthread_mutex_unlock(&t->seal_mu);
}

/*
 * Seal every chunk of m's body under the outbound key as message h->seq
 * and post each as soon as it is sealed, so the first chunks are on the
 * wire and being opened while the next are sealed. The loop thread seals
 * chunks itself, and idle workers take chunks beside it; it returns once
 * every chunk is sealed and posted, so that src (the caller's buffer, or
 * NULL: the body's own copy, made while m waited) is read by nobody after
 * transport_send, and no copy is needed to keep that promise. It waits
 * only for chunks a worker has begun, never for one still queued: a busy
 * worker that comes to its job late finds nothing left to take. What
 * fails leaves the peer failing at the next tick, which cancels what was
 * posted.
 */
static void
body_post(struct transport *t, struct tmsg *m, struct txop *x,
    struct wire_header *h, const uint8_t *src)
{
	struct tpeer *p = m->peer;
	unsigned k, nhelp = workers_count(t->workers);
	uint32_t i;

	x->gen = p->gen;
	x->seq = h->seq;
	x->src = src;
	session_bodykey_get(&p->out, 1, &x->key);
	x->held++;	/* x stays while this runs */
	for (i = 0; i < x->nchunks; i++) {
		struct txchunk *c = &x->chunks[i];

		c->x = x;
		h->chunk_index = i + 1;
		wire_header_encode(h, c->ad);
		c->op.cb = on_chunk_sent;
		c->op.kind = FABRIC_OP_TSEND;
		c->op.buf = body_chunk(x, i);
		c->op.len = wire_chunk_len(m->len, i) + WIRE_MAC_SIZE;
		c->op.addr = p->fa;
		c->op.tag = session_body_tag(&p->out, h->seq, i, 1);
		x->held++;
	}
	if (nhelp > TX_HELPERS)
		nhelp = TX_HELPERS;
	for (k = 0; k < nhelp && k + 1 < x->nchunks; k++) {
		x->helpers[k].x = x;
		x->helpers[k].job.work = body_help;
		x->helpers[k].job.done = body_helped;
		x->held++;
		t->jobs++;
		workers_submit(t->workers, &x->helpers[k].job);
	}
	while ((i = body_claim(t, x)) != UINT32_MAX) {
		chunk_ready(t, &x->chunks[i], chunk_seal(x, i));
		body_post_sealed(t, x, 0);
	}
	body_post_sealed(t, x, 1);
	x->src = NULL;
	body_unhold(t, x);
}

/* Seal m's frame under the outbound session and post it and its body
 * (src: the payload, NULL for a body filled while m waited). */
static void
msg_post(struct transport *t, struct tmsg *m, const uint8_t *src)
{
	struct tpeer *p = m->peer;
	struct wire_header h;
	struct txop *fr;
	uint32_t n = 0;
	int rc;

	memset(&h, 0, sizeof(h));
	h.version = WIRE_VERSION;
	h.type = m->type;
	h.job = t->ctx.lim.job;
	h.sender = t->ctx.self_id;
	h.receiver = p->out.peer_id;
	h.seq = m->seq = session_next_seq(&p->out);
	h.payload_len = m->len;
	if (m->len <= WIRE_INLINE_MAX) {
		h.flags = WIRE_F_INLINE;
		fr = txop_new(t, p, m->type, WIRE_HEADER_SIZE + m->len +
		    WIRE_MAC_SIZE);
	} else {
		n = h.chunk_count = m->body->nchunks;
		fr = txop_new(t, p, m->type, WIRE_HEADER_SIZE + WIRE_MAC_SIZE);
	}
	/* From here a failure leaves the body to the message, which the
	 * peer's failure at the next tick finishes. */
	m->next = p->inflight;
	p->inflight = m;
	if (fr == NULL) {
		seal_failed(t, p, m->len, -ENOMEM);
		return;
	}
	wire_header_encode(&h, fr->data);
	if ((rc = session_seal(&p->out, fr->data, h.seq, 0, src,
	    n > 0 ? 0 : m->len, fr->data + WIRE_HEADER_SIZE)) != 0) {
		transport_txop_free(t, fr);
		seal_failed(t, p, m->len, rc);
		return;
	}
	fr->op.kind = FABRIC_OP_SEND;
	fr->msg = m;
	m->frame = fr;
	if (txop_post(t, fr) != 0)
		return;
	t->msgs_sent++;
	if (n > 0)
		body_post(t, m, m->body, &h, src);
	if (m->plain != NULL) {
		sodium_memzero(m->plain, m->len);
		free(m->plain);
		m->plain = NULL;
	}
}

/* Post what the queue holds, in order, as far as the window allows. */
void
transport_peer_drain(struct transport *t, struct tpeer *p)
{
	struct tmsg *m;

	while ((m = p->queue) != NULL && p->out_state == OUT_READY &&
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
	now = p->out_state == OUT_READY && p->queue == NULL &&
	    peer_window_open(t, p, len);
	if (len > WIRE_INLINE_MAX) {
		m->body = body_new(t, p, type, now ? NULL : payload, len);
		if (m->body == NULL) {
			free(m);
			return -ENOMEM;
		}
		m->body->msg = m;
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
	if (p->out_state == OUT_NONE)
		transport_peer_start_handshake(t, p);
	return 0;
}

/* --- life cycle --------------------------------------------------------- */

/* What transport_open made before the endpoint and the handles. */
static void
transport_free(struct transport *t)
{
	session_ctx_wipe(&t->ctx);
	bufcache_free(&t->bufs);
	pthread_cond_destroy(&t->seal_cv);
	pthread_mutex_destroy(&t->seal_mu);
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
	bufcache_init(&t->bufs, sizeof(struct txop) + wire_body_size(maxsz));
	pthread_mutex_init(&t->seal_mu, NULL);
	pthread_cond_init(&t->seal_cv, NULL);
	if (session_ctx_init(&t->ctx, p->key, p->job, p->self_id, maxsz) != 0) {
		transport_free(t);
		return errbuf_set(err, -EIO, "libsodium failed to initialise");
	}
	memset(&fp, 0, sizeof(fp));
	fp.provider = p->provider;
	fp.host = host;
	fp.port = port;
	fp.frame_size = WIRE_FRAME_MAX;
	fp.rx_depth = RX_DEPTH;
	if ((rc = workers_open(loop, p->threads < 0 ? 0 : p->threads > 0 ?
	    (unsigned)p->threads : workers_default_count(), &t->workers,
	    err)) != 0) {
		transport_free(t);
		return rc;
	}
	if ((rc = fabric_open(loop, &fp, transport_recv_frame, t, &t->fabric, err)) != 0) {
		workers_close(t->workers, NULL, NULL);
		transport_free(t);
		return rc;
	}
	uv_timer_init(loop, &t->tick);
	uv_timer_init(loop, &t->dispatch);
	t->tick.data = t->dispatch.data = t;
	transport_arm_tick(t, TICK_MS);
	*out = t;
	return 0;
}

static void
close_step(struct transport *t)
{
	struct tpeer *p;
	void (*cb)(void *) = t->close_cb;
	void *arg = t->close_arg;

	if (--t->close_pending > 0)
		return;
	while ((p = t->peers) != NULL) {
		t->peers = p->next;
		session_wipe(&p->in);
		session_wipe(&p->out);
		session_hs_wipe(&p->hs);
		free(p);
	}
	transport_free(t);
	if (cb != NULL)
		cb(arg);
}

/* A chunk came back from a worker; the last thing it touches of t. */
void
transport_job_done(struct transport *t)
{
	t->jobs--;
	if (t->closing)
		close_step(t);
}

static void
on_fabric_closed(void *arg)
{
	close_step(arg);
}

static void
on_timer_closed(uv_handle_t *h)
{
	close_step(h->data);
}

static void
on_workers_closed(void *arg)
{
	close_step(arg);
}

void
transport_close(struct transport *t, void (*cb)(void *arg), void *arg)
{
	struct tpeer *p;
	struct tmsg *m;

	if (t->closing)
		return;
	for (p = t->peers; p != NULL; p = p->next) {
		transport_peer_reset_out(t, p, -ECANCELED);
		while ((m = p->queue) != NULL) {
			p->queue = m->next;
			transport_msg_finish(t, m, -ECANCELED);
		}
		p->queue_tail = NULL;
		transport_abandon_bodies(t, p);
	}
	t->closing = 1;
	t->close_cb = cb;
	t->close_arg = arg;
	on_dispatch(&t->dispatch);
	/* Every chunk a worker holds comes back (transport_job_done). */
	t->close_pending = 4 + t->jobs;
	uv_close((uv_handle_t *)&t->tick, on_timer_closed);
	uv_close((uv_handle_t *)&t->dispatch, on_timer_closed);
	fabric_close(t->fabric, on_fabric_closed, t);
	workers_close(t->workers, on_workers_closed, t);
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
