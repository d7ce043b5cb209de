/*
 * transport_frame: see transport_frame.h. Every buffer here owns itself:
 * a txop (a frame or a body going out) or an rxbody (a body coming in)
 * can outlive its message, as a worker or the provider may still hold a
 * part of it after we gave up on it, so each frees itself once all of it
 * came back. The jobs the workers hold are counted (tframe.jobs) so that
 * closing waits for them; sealing one body from several threads at once
 * is the only place a lock is taken (seal_mu).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "log.h"
#include "transport_frame.h"

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
	int			sealed;	/* under tframe.seal_mu */
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
	struct tframe		*f;
	struct tframe_peer	*peer;
	struct tframe_msg	*msg;	/* NULL once the message is finished */
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
	struct tframe		*f;
	struct tframe_peer	*peer;
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

/* --- the layer's state -------------------------------------------------- */

int
tframe_init(struct tframe *f, uv_loop_t *loop, uint64_t max_message_size,
    int threads, struct errbuf *err)
{
	int rc;

	bufcache_init(&f->bufs, sizeof(struct txop) +
	    wire_body_size(max_message_size));
	pthread_mutex_init(&f->seal_mu, NULL);
	pthread_cond_init(&f->seal_cv, NULL);
	f->body_budget = 2 * wire_body_size(max_message_size);
	rc = workers_open(loop, threads < 0 ? 0 : threads > 0 ?
	    (unsigned)threads : workers_default_count(), &f->workers, err);
	if (rc != 0)
		tframe_free(f);
	return rc;
}

void
tframe_free(struct tframe *f)
{
	bufcache_free(&f->bufs);
	pthread_cond_destroy(&f->seal_cv);
	pthread_mutex_destroy(&f->seal_mu);
}

void
tframe_stop(struct tframe *f)
{
	f->closing = 1;
}

void
tframe_close(struct tframe *f, void (*cb)(void *arg), void *arg)
{
	workers_close(f->workers, cb, arg);
}

/* A job came back from a worker; the last thing it touches of f. */
static void
job_done(struct tframe *f)
{
	f->jobs--;
	if (f->closing)
		f->ops->job_back(f->arg);
}

static void
job_submit(struct tframe *f, struct workers_job *j, workers_fn work,
    workers_fn done)
{
	j->work = work;
	j->done = done;
	f->jobs++;
	workers_submit(f->workers, j);
}

/* --- buffers on their way out ------------------------------------------- */

/* The peer fails at the next tick for want of memory or a seal. */
static void
seal_failed(struct tframe *f, struct tframe_peer *p, size_t len, int rc)
{
	log_warn("transport: cannot seal %zu bytes: %s", len, strerror(-rc));
	f->ops->fail(f->arg, p, rc);
}

/* Bodies come from and go back to the buffer cache; plaintext that was
 * never sealed is wiped first, as any copy of a payload. */
static void
txop_free(struct tframe *f, struct txop *x)
{
	if (x->unsealed > 0)
		sodium_memzero(x->data, x->op.len);
	session_bodykey_wipe(&x->key);
	free(x->chunks);
	bufcache_put(&f->bufs, x, sizeof(*x) + x->op.len);
}

static void
on_tx_done(struct fabric_op *op, int status, size_t len)
{
	struct txop *x = (struct txop *)op;

	(void)len;
	if (x->msg != NULL)
		x->msg->frame = NULL;
	x->f->ops->sent(x->f->arg, x->peer, x->gen, status);
	txop_free(x->f, x);
}

/* A chunk of body x came back from a worker or fabric. */
static void
body_unhold(struct tframe *f, struct txop *x)
{
	if (--x->held > 0)
		return;
	if (x->msg != NULL)
		x->msg->body = NULL;
	txop_free(f, x);
}

static void
on_chunk_sent(struct fabric_op *op, int status, size_t len)
{
	struct txop *x = ((struct txchunk *)op)->x;

	(void)len;
	x->f->ops->sent(x->f->arg, x->peer, x->gen, status);
	body_unhold(x->f, x);
}

static struct txop *
txop_new(struct tframe *f, struct tframe_peer *p, uint8_t type, size_t size)
{
	struct txop *x = bufcache_get(&f->bufs, sizeof(*x) + size);

	if (x == NULL)
		return NULL;
	memset(x, 0, sizeof(*x));
	x->f = f;
	x->peer = p;
	x->gen = p->gen;
	x->type = type;
	x->op.cb = on_tx_done;
	x->op.buf = x->data;
	x->op.len = size;
	x->op.addr = p->fa;
	return x;
}

/* Post x, or note the failure for the next tick; x is gone either way
 * from the caller's point of view except through its message. */
static int
txop_post(struct tframe *f, struct txop *x)
{
	int rc = f->ops->post(f->arg, x->peer, x->type, &x->op);

	if (rc != 0) {
		if (x->msg != NULL)
			x->msg->frame = NULL;
		txop_free(f, x);
	}
	return rc;
}

/* Where chunk i of body x lies: its text, then its MAC. */
static uint8_t *
body_chunk(struct txop *x, uint32_t i)
{
	return x->data + (size_t)i * (WIRE_CHUNK_SIZE + WIRE_MAC_SIZE);
}

/*
 * A body for a message, each chunk's place followed by its MAC's. A
 * message that must wait gets a copy of its payload here (src), sealed in
 * place when its turn comes; one posted at once (src NULL) is sealed
 * straight from the caller's buffer.
 */
int
tframe_body_new(struct tframe *f, struct tframe_msg *m, const uint8_t *src)
{
	uint32_t i, n = wire_chunk_count(m->len);
	struct txop *x = txop_new(f, m->peer, m->type, wire_body_size(m->len));

	if (x == NULL)
		return -ENOMEM;
	if ((x->chunks = calloc(n, sizeof(*x->chunks))) == NULL) {
		txop_free(f, x);
		return -ENOMEM;
	}
	x->nchunks = x->unsealed = n;
	for (i = 0; src != NULL && i < n; i++)
		memcpy(body_chunk(x, i), src + (size_t)i * WIRE_CHUNK_SIZE,
		    wire_chunk_len(m->len, i));
	x->msg = m;
	m->body = x;
	return 0;
}

void
tframe_send_frame(struct tframe *f, struct tframe_peer *p, uint8_t type,
    const uint8_t *buf, size_t len)
{
	struct txop *x = txop_new(f, p, type, len);

	if (x == NULL) {
		log_warn("transport: out of memory sending to %s", p->addr);
		return;
	}
	memcpy(x->data, buf, len);
	x->op.kind = FABRIC_OP_SEND;
	txop_post(f, x);
}

/* Give up on what fabric still holds of body x; it frees itself once
 * fabric let go of all of it. */
static void
body_cancel(struct tframe *f, struct txop *x)
{
	uint32_t i;

	for (i = 0; i < x->nchunks; i++)
		if (fabric_cancel(f->fabric, &x->chunks[i].op) == 1)
			x->held--;
	if (x->held == 0)
		txop_free(f, x);
}

static void
msg_wipe_plain(struct tframe_msg *m)
{
	if (m->plain == NULL)
		return;
	sodium_memzero(m->plain, m->len);
	free(m->plain);
	m->plain = NULL;
}

void
tframe_msg_release(struct tframe *f, struct tframe_msg *m, int status)
{
	struct txop *x;

	if ((x = m->frame) != NULL) {
		x->msg = NULL;
		m->frame = NULL;
		if (status != 0 && !f->closing &&
		    fabric_cancel(f->fabric, &x->op) == 1)
			txop_free(f, x);
	}
	if ((x = m->body) != NULL) {
		x->msg = NULL;
		m->body = NULL;
		if (status != 0 && !f->closing)
			body_cancel(f, x);
	}
	msg_wipe_plain(m);
}

/* --- sealing a body ----------------------------------------------------- */

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
chunk_ready(struct tframe *f, struct txchunk *c, int rc)
{
	struct txop *x = c->x;

	c->posted = 1;
	x->nposted++;
	if (rc == 0)
		x->unsealed--;
	if (x->msg != NULL && !f->closing && x->gen == x->peer->gen) {
		if (rc != 0)
			seal_failed(f, x->peer, c->op.len, rc);
		else if (f->ops->post(f->arg, x->peer, x->type, &c->op) == 0)
			x->held++;
	}
	body_unhold(f, x);
}

/* Under seal_mu: the next chunk of x nobody took yet, or UINT32_MAX. */
static uint32_t
body_claim(struct tframe *f, struct txop *x)
{
	uint32_t i = UINT32_MAX;

	pthread_mutex_lock(&f->seal_mu);
	if (x->claimed < x->nchunks)
		i = x->claimed++;
	pthread_mutex_unlock(&f->seal_mu);
	return i;
}

/* A worker's job: seal chunks of x until none is left to take. It touches
 * nothing but the chunks it took, the body's key, sequence and src. */
static void
body_help(struct workers_job *j)
{
	struct txop *x = GD_CONTAINER_OF(j, struct txhelper, job)->x;
	struct tframe *f = x->f;
	uint32_t i;
	int rc;

	while ((i = body_claim(f, x)) != UINT32_MAX) {
		rc = chunk_seal(x, i);
		pthread_mutex_lock(&f->seal_mu);
		x->chunks[i].rc = rc;
		x->chunks[i].sealed = 1;
		pthread_cond_signal(&f->seal_cv);
		pthread_mutex_unlock(&f->seal_mu);
	}
}

static void
body_helped(struct workers_job *j)
{
	struct txop *x = GD_CONTAINER_OF(j, struct txhelper, job)->x;
	struct tframe *f = x->f;

	body_unhold(f, x);
	job_done(f);
}

/* Post the chunks of x the workers sealed; with wait, until all are. */
static void
body_post_sealed(struct tframe *f, struct txop *x, int wait)
{
	uint32_t i;

	pthread_mutex_lock(&f->seal_mu);
	for (;;) {
		for (i = 0; i < x->nchunks; i++)
			if (x->chunks[i].sealed && !x->chunks[i].posted)
				break;
		if (i < x->nchunks) {
			pthread_mutex_unlock(&f->seal_mu);
			chunk_ready(f, &x->chunks[i], x->chunks[i].rc);
			pthread_mutex_lock(&f->seal_mu);
		} else if (wait && x->nposted < x->nchunks)
			pthread_cond_wait(&f->seal_cv, &f->seal_mu);
		else
			break;
	}
	pthread_mutex_unlock(&f->seal_mu);
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
body_post(struct tframe *f, struct tframe_msg *m, struct txop *x,
    struct session *out, struct wire_header *h, const uint8_t *src)
{
	struct tframe_peer *p = m->peer;
	unsigned k, nhelp = workers_count(f->workers);
	uint32_t i;

	x->gen = p->gen;
	x->seq = h->seq;
	x->src = src;
	session_bodykey_get(out, 1, &x->key);
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
		c->op.tag = session_body_tag(out, h->seq, i, 1);
		x->held++;
	}
	if (nhelp > TX_HELPERS)
		nhelp = TX_HELPERS;
	for (k = 0; k < nhelp && k + 1 < x->nchunks; k++) {
		x->helpers[k].x = x;
		x->held++;
		job_submit(f, &x->helpers[k].job, body_help, body_helped);
	}
	while ((i = body_claim(f, x)) != UINT32_MAX) {
		chunk_ready(f, &x->chunks[i], chunk_seal(x, i));
		body_post_sealed(f, x, 0);
	}
	body_post_sealed(f, x, 1);
	x->src = NULL;
	body_unhold(f, x);
}

/* Seal m's frame under the outbound session and post it and its body. The
 * caller has put m in flight: from here a failure leaves the body to the
 * message, which the peer's failure at the next tick finishes. */
int
tframe_msg_post(struct tframe *f, struct tframe_msg *m, struct session *out,
    const uint8_t *src)
{
	struct tframe_peer *p = m->peer;
	struct wire_header h;
	struct txop *fr;
	uint32_t n = 0;
	int rc;

	tsess_header(f->sess, out, m->type, m->len, &h);
	m->seq = h.seq;
	if (m->len <= WIRE_INLINE_MAX) {
		h.flags = WIRE_F_INLINE;
		fr = txop_new(f, p, m->type, WIRE_HEADER_SIZE + m->len +
		    WIRE_MAC_SIZE);
	} else {
		n = h.chunk_count = m->body->nchunks;
		fr = txop_new(f, p, m->type, WIRE_HEADER_SIZE + WIRE_MAC_SIZE);
	}
	if (fr == NULL) {
		seal_failed(f, p, m->len, -ENOMEM);
		return -ENOMEM;
	}
	wire_header_encode(&h, fr->data);
	if ((rc = session_seal(out, fr->data, h.seq, 0, src,
	    n > 0 ? 0 : m->len, fr->data + WIRE_HEADER_SIZE)) != 0) {
		txop_free(f, fr);
		seal_failed(f, p, m->len, rc);
		return rc;
	}
	fr->op.kind = FABRIC_OP_SEND;
	fr->msg = m;
	m->frame = fr;
	if ((rc = txop_post(f, fr)) != 0)
		return rc;
	if (n > 0)
		body_post(f, m, m->body, out, &h, src);
	msg_wipe_plain(m);
	return 0;
}

/* --- bodies on their way in --------------------------------------------- */

/* Free b once fabric gave back every receive it was handed. */
static void
body_release(struct tframe *f, struct rxbody *b)
{
	if (b->held > 0)
		return;
	bufcache_put(&f->bufs, b->buf, (size_t)b->h.payload_len);
	session_bodykey_wipe(&b->key);
	free(b);
}

/* Give up on b: unlinked already, its receives cancelled, freed once
 * fabric let go of them. */
static void
body_abandon(struct tframe *f, struct rxbody *b)
{
	uint32_t i;

	b->next = NULL;
	b->abandoned = 1;
	for (i = 0; i < b->h.chunk_count; i++)
		if (fabric_cancel(f->fabric, &b->chunks[i].op) == 1)
			b->held--;
	body_release(f, b);
}

void
tframe_abandon_bodies(struct tframe *f, struct tframe_peer *p)
{
	struct rxbody *b;

	while ((b = p->bodies) != NULL) {
		p->bodies = b->next;
		body_abandon(f, b);
	}
}

int
tframe_bodies_late(const struct tframe *f, const struct tframe_peer *p,
    double now)
{
	const struct rxbody *b;

	for (b = p->bodies; b != NULL; b = b->next)
		if (now > tclock_deadline(f->clock, b->start, p->rx_progress,
		    b->size))
			return 1;
	return 0;
}

static void
body_unlink(struct rxbody *b)
{
	struct rxbody **pb;

	for (pb = &b->peer->bodies; *pb != NULL; pb = &(*pb)->next)
		if (*pb == b) {
			*pb = b->next;
			return;
		}
}

/* A worker's job: nothing but the chunk and its body's key. */
static void
chunk_open(struct workers_job *j)
{
	struct rxchunk *c = GD_CONTAINER_OF(j, struct rxchunk, job);
	struct rxbody *b = c->b;

	c->rc = session_bodykey_open(&b->key, c->ad, b->h.seq, c->index + 1,
	    c->op.buf, c->op.len, b->macs + (size_t)c->index * WIRE_MAC_SIZE);
}

/* Chunk c was opened (c->rc 0) or not: the last chunk opened delivers
 * the message; one that fails drops the whole body. */
static void
chunk_done(struct rxchunk *c)
{
	struct rxbody *b = c->b;
	struct tframe *f = b->f;
	struct tframe_peer *p = b->peer;

	b->held--;
	if (b->abandoned || f->closing) {
		body_release(f, b);
	} else if (c->rc != 0) {
		f->ops->reject(f->arg, WIRE_REJ_BAD_MAC, "body chunk");
		body_unlink(b);
		body_abandon(f, b);
	} else {
		p->rx_progress = tclock_now(f->clock);
		if (++b->opened == b->h.chunk_count) {
			body_unlink(b);
			f->ops->deliver(f->arg, p, &b->h, b->buf, WIRE_HEADER_SIZE +
			    WIRE_MAC_SIZE + b->size);
			body_release(f, b);
		}
	}
}

static void
chunk_opened(struct workers_job *j)
{
	struct rxchunk *c = GD_CONTAINER_OF(j, struct rxchunk, job);
	struct tframe *f = c->b->f;

	chunk_done(c);
	job_done(f);
}

/* Chunk c of its body landed: open it in place, on a worker when one is
 * idle (the loop thread goes on receiving meanwhile), else here. A chunk
 * that did not arrive whole drops the whole body. */
static void
on_chunk(struct fabric_op *op, int status, size_t len)
{
	struct rxchunk *c = (struct rxchunk *)op;
	struct rxbody *b = c->b;
	struct tframe *f = b->f;
	struct wire_header h = b->h;

	b->held--;
	if (b->abandoned || f->closing) {
		body_release(f, b);
		return;
	}
	if (status != 0 || len != op->len + WIRE_MAC_SIZE) {
		if (status == 0)
			f->ops->reject(f->arg, WIRE_REJ_MALFORMED, "truncated body chunk");
		else if (status != -ECANCELED)
			f->ops->reject(f->arg, status == -EMSGSIZE ? WIRE_REJ_OVERSIZE :
			    WIRE_REJ_MALFORMED, "body chunk did not arrive whole");
		body_unlink(b);
		body_abandon(f, b);
		return;
	}
	h.chunk_index = c->index + 1;
	wire_header_encode(&h, c->ad);
	b->held++;
	if (!workers_idle(f->workers)) {
		chunk_open(&c->job);
		chunk_done(c);
		return;
	}
	job_submit(f, &c->job, chunk_open, chunk_opened);
}

/* Post a receive for every chunk of b, each into its place. */
static int
body_post_chunks(struct tframe *f, struct rxbody *b, struct session *in)
{
	struct tframe_peer *p = b->peer;
	uint32_t i;
	int rc;

	for (i = 0; i < b->h.chunk_count; i++) {
		struct fabric_op *op = &b->chunks[i].op;

		b->chunks[i].b = b;
		b->chunks[i].index = i;
		op->cb = on_chunk;
		op->kind = FABRIC_OP_TRECV;
		/* The receive matches any source; addr tells fabric whose
		 * transfer it carries, so the peer's address outlives it
		 * (fabric_remove). */
		op->addr = p->have_fa ? p->fa : FI_ADDR_UNSPEC;
		op->buf = b->buf + (size_t)i * WIRE_CHUNK_SIZE;
		op->len = wire_chunk_len(b->h.payload_len, i);
		op->buf2 = b->macs + (size_t)i * WIRE_MAC_SIZE;
		op->len2 = WIRE_MAC_SIZE;
		op->tag = session_body_tag(in, b->h.seq, i, 0);
		if ((rc = fabric_post(f->fabric, op)) != 0)
			return rc;
		b->held++;
	}
	return 0;
}

void
tframe_recv(struct tframe *f, struct tframe_peer *p, struct session *in,
    size_t len, const struct wire_header *h)
{
	struct rxbody *b;
	uint64_t pending;
	int rc;

	p->rx_progress = tclock_now(f->clock);
	if (h->flags & WIRE_F_INLINE) {
		f->ops->deliver(f->arg, p, h, f->scratch, len);
		return;
	}
	pending = 0;
	for (b = p->bodies; b != NULL; b = b->next)
		pending += b->size;
	if (pending + wire_body_size(h->payload_len) > f->body_budget) {
		f->ops->reject(f->arg, WIRE_REJ_OVERSIZE, "bodies in flight over the budget");
		return;
	}
	b = xcalloc(1, sizeof(*b) + h->chunk_count * (sizeof(b->chunks[0]) +
	    WIRE_MAC_SIZE));
	b->macs = (uint8_t *)&b->chunks[h->chunk_count];
	b->size = (size_t)wire_body_size(h->payload_len);
	b->f = f;
	b->peer = p;
	b->h = *h;
	b->start = tclock_now(f->clock);
	if ((b->buf = bufcache_get(&f->bufs, (size_t)h->payload_len)) == NULL) {
		log_warn("transport: no memory for a %zu byte body from %s",
		    b->size, p->addr);
		free(b);
		return;
	}
	session_bodykey_get(in, 0, &b->key);
	if ((rc = body_post_chunks(f, b, in)) != 0) {
		log_warn("transport: cannot post a body receive: %s",
		    strerror(-rc));
		body_abandon(f, b);
		return;
	}
	b->next = p->bodies;
	p->bodies = b;
}
