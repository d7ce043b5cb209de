/*
 * transport_recv: see transport_recv.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "fabric.h"
#include "log.h"
#include "transport_recv.h"

static void
send_ack(struct transport *t, struct tpeer *p, uint64_t acked)
{
	struct wire_header h;
	uint8_t frame[WIRE_HEADER_SIZE + WIRE_ACK_SIZE + WIRE_MAC_SIZE];
	uint8_t pl[WIRE_ACK_SIZE];

	memset(&h, 0, sizeof(h));
	h.version = WIRE_VERSION;
	h.type = WIRE_T_ACK;
	h.flags = WIRE_F_INLINE;
	h.job = t->ctx.lim.job;
	h.sender = t->ctx.self_id;
	h.receiver = p->in.peer_id;
	h.seq = session_next_seq(&p->in);
	h.payload_len = WIRE_ACK_SIZE;
	wire_header_encode(&h, frame);
	wire_put_u64(pl, acked);
	if (session_seal(&p->in, frame, h.seq, 0, pl, sizeof(pl),
	    frame + WIRE_HEADER_SIZE) != 0) {
		log_warn("transport: cannot seal an ack to %s", p->addr);
		return;
	}
	transport_send_frame(t, p, WIRE_T_ACK, frame, sizeof(frame));
}

static void
deliver(struct transport *t, struct tpeer *p, const struct wire_header *h,
    const uint8_t *payload, size_t wire_bytes)
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

/*
 * A peer says hello again when it lost our session (it restarted, or gave
 * up on us): then what we sent it and never got acknowledged is lost and
 * our outbound keys are dead. But it also says hello when only its own
 * direction needs a new session (its handshake or messages to us timed
 * out while ours lived), and a copy of a HELLO it abandoned may arrive
 * late, after our handshake with it. Keep our outbound session when the
 * HELLO names it as held, or when the HELLO is older than the peer's
 * answer to ours (both stamps are the peer's clock, so no clock is
 * compared across hosts); a restarted peer names nothing and is newer.
 */
static int
hello_keeps_out(const struct tpeer *p, const struct wire_header *h,
    const struct wire_hello *hl)
{
	if (p->out_state != OUT_READY)
		return 1;
	if (p->id != h->sender)
		return 0;
	return hl->held == p->out_hello || hl->stamp < p->out_acked;
}

static void
on_hello(struct transport *t, const uint8_t *buf, size_t len,
    const struct wire_header *h)
{
	uint8_t ack[SESSION_HELLO_FRAME_MAX];
	struct wire_hello hl;
	struct session in;
	struct tpeer *p;
	size_t ack_len;

	if (session_hello_accept(&t->ctx, buf, len, h, t->listen, &hl, &in,
	    ack, &ack_len) != 0) {
		transport_reject(t, WIRE_REJ_HANDSHAKE, "hello failed authentication");
		return;
	}
	if ((p = transport_peer_get(t, hl.addr)) == NULL) {
		session_wipe(&in);
		transport_reject(t, WIRE_REJ_HANDSHAKE, "hello with a bad address");
		return;
	}
	if (hl.stamp <= p->in_stamp) {
		session_wipe(&in);
		transport_reject(t, WIRE_REJ_REPLAY, "old hello");
		return;
	}
	if (transport_peer_insert(t, p) != 0) {
		session_wipe(&in);
		transport_reject(t, WIRE_REJ_HANDSHAKE, "hello from an unreachable address");
		return;
	}
	if (!hello_keeps_out(p, h, &hl)) {
		log_debug("transport: %s said hello without our session: "
		    "resetting ours", p->addr);
		transport_peer_reset_out(t, p, -ECONNRESET);
		if (p->queue != NULL)
			transport_peer_start_handshake(t, p);
	}
	transport_abandon_bodies(t, p);
	p->in_stamp = hl.stamp;
	p->id = h->sender;
	p->in = in;
	p->in_ready = 1;
	session_wipe(&in);
	log_debug("transport: inbound session from %s: %s", p->addr,
	    aead_name(p->in.suite));
	t->bytes_recv[WIRE_T_HELLO] += len;
	transport_send_frame(t, p, WIRE_T_HELLO_ACK, ack, ack_len);
}

static void
on_hello_ack(struct transport *t, const uint8_t *buf, size_t len,
    const struct wire_header *h)
{
	struct wire_hello hl;
	struct session out;
	struct tpeer *p;

	for (p = t->peers; p != NULL; p = p->next)
		if (p->out_state == OUT_HELLO && session_hello_finish(&t->ctx,
		    &p->hs, buf, len, h, &hl, &out) == 0)
			break;
	if (p == NULL) {
		transport_reject(t, WIRE_REJ_HANDSHAKE, "hello_ack matches no hello");
		return;
	}
	if (p->id != 0 && p->id != h->sender && p->in_ready) {
		session_wipe(&p->in);
		p->in_ready = 0;
	}
	p->id = h->sender;
	p->out = out;
	session_wipe(&out);
	p->out_acked = hl.stamp;
	p->out_state = OUT_READY;
	log_debug("transport: outbound session to %s: %s", p->addr,
	    aead_name(p->out.suite));
	t->bytes_recv[WIRE_T_HELLO_ACK] += len;
	transport_peer_drain(t, p);
}

static void
on_ack(struct transport *t, const uint8_t *buf, size_t len,
    const struct wire_header *h)
{
	uint8_t pl[WIRE_ACK_SIZE];
	struct tmsg *m, **pm;
	struct tpeer *p;
	uint64_t seq;

	for (p = t->peers; p != NULL; p = p->next)
		if (p->out_state == OUT_READY && p->out.peer_id == h->sender)
			break;
	if (p == NULL) {
		transport_reject(t, WIRE_REJ_UNKNOWN_SENDER, "ack from no session");
		return;
	}
	if (h->payload_len != WIRE_ACK_SIZE) {
		transport_reject(t, WIRE_REJ_MALFORMED, "ack of the wrong size");
		return;
	}
	if (session_replay_check(&p->out, h->seq) != 0) {
		transport_reject(t, WIRE_REJ_REPLAY, "ack sequence seen");
		return;
	}
	if (session_open(&p->out, buf, h->seq, 0, buf + WIRE_HEADER_SIZE,
	    WIRE_ACK_SIZE + WIRE_MAC_SIZE, pl) != 0) {
		transport_reject(t, WIRE_REJ_BAD_MAC, "ack");
		return;
	}
	session_replay_update(&p->out, h->seq);
	p->tx_progress = transport_now(t);
	t->bytes_recv[WIRE_T_ACK] += len;
	seq = wire_get_u64(pl);
	for (pm = &p->inflight; (m = *pm) != NULL; pm = &m->next)
		if (m->seq == seq) {
			*pm = m->next;
			transport_msg_finish(t, m, 0);
			transport_peer_drain(t, p);
			return;
		}
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
	struct transport *t = b->t;
	struct tpeer *p = b->peer;

	b->held--;
	if (b->abandoned || t->closing) {
		transport_body_release(t, b);
	} else if (c->rc != 0) {
		transport_reject(t, WIRE_REJ_BAD_MAC, "body chunk");
		body_unlink(b);
		transport_body_abandon(t, b);
	} else {
		p->rx_progress = transport_now(t);
		if (++b->opened == b->h.chunk_count) {
			body_unlink(b);
			deliver(t, p, &b->h, b->buf, WIRE_HEADER_SIZE +
			    WIRE_MAC_SIZE + b->size);
			transport_body_release(t, b);
		}
	}
}

static void
chunk_opened(struct workers_job *j)
{
	struct rxchunk *c = GD_CONTAINER_OF(j, struct rxchunk, job);
	struct transport *t = c->b->t;

	chunk_done(c);
	transport_job_done(t);
}

/* Chunk c of its body landed: open it in place, on a worker when one is
 * idle (the loop thread goes on receiving meanwhile), else here. A chunk
 * that did not arrive whole drops the whole body. */
static void
on_chunk(struct fabric_op *op, int status, size_t len)
{
	struct rxchunk *c = (struct rxchunk *)op;
	struct rxbody *b = c->b;
	struct transport *t = b->t;
	struct wire_header h = b->h;

	b->held--;
	if (b->abandoned || t->closing) {
		transport_body_release(t, b);
		return;
	}
	if (status != 0 || len != op->len + WIRE_MAC_SIZE) {
		if (status == 0)
			transport_reject(t, WIRE_REJ_MALFORMED, "truncated body chunk");
		else if (status != -ECANCELED)
			transport_reject(t, status == -EMSGSIZE ? WIRE_REJ_OVERSIZE :
			    WIRE_REJ_MALFORMED, "body chunk did not arrive whole");
		body_unlink(b);
		transport_body_abandon(t, b);
		return;
	}
	h.chunk_index = c->index + 1;
	wire_header_encode(&h, c->ad);
	b->held++;
	if (!workers_idle(t->workers)) {
		chunk_open(&c->job);
		chunk_done(c);
		return;
	}
	c->job.work = chunk_open;
	c->job.done = chunk_opened;
	t->jobs++;
	workers_submit(t->workers, &c->job);
}

/* Post a receive for every chunk of b, each into its place. */
static int
body_post_chunks(struct transport *t, struct rxbody *b)
{
	struct tpeer *p = b->peer;
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
		op->tag = session_body_tag(&p->in, b->h.seq, i, 0);
		if ((rc = fabric_post(t->fabric, op)) != 0)
			return rc;
		b->held++;
	}
	return 0;
}

static void
on_app_frame(struct transport *t, const uint8_t *buf, size_t len,
    const struct wire_header *h)
{
	struct tpeer *p;
	struct rxbody *b;
	uint64_t pending;
	int rc;

	for (p = t->peers; p != NULL; p = p->next)
		if (p->in_ready && p->in.peer_id == h->sender)
			break;
	if (p == NULL) {
		transport_reject(t, WIRE_REJ_UNKNOWN_SENDER, "no session with sender");
		return;
	}
	if (session_replay_check(&p->in, h->seq) != 0) {
		transport_reject(t, WIRE_REJ_REPLAY, "sequence seen");
		return;
	}
	if (h->flags & WIRE_F_INLINE) {
		if (session_open(&p->in, buf, h->seq, 0, buf + WIRE_HEADER_SIZE,
		    h->payload_len + WIRE_MAC_SIZE, t->scratch) != 0) {
			transport_reject(t, WIRE_REJ_BAD_MAC, "frame");
			return;
		}
		session_replay_update(&p->in, h->seq);
		deliver(t, p, h, t->scratch, len);
		return;
	}
	if (session_open(&p->in, buf, h->seq, 0, buf + WIRE_HEADER_SIZE,
	    WIRE_MAC_SIZE, t->scratch) != 0) {
		transport_reject(t, WIRE_REJ_BAD_MAC, "body announcement");
		return;
	}
	session_replay_update(&p->in, h->seq);
	p->rx_progress = transport_now(t);
	pending = 0;
	for (b = p->bodies; b != NULL; b = b->next)
		pending += b->size;
	if (pending + wire_body_size(h->payload_len) > transport_body_budget(t)) {
		transport_reject(t, WIRE_REJ_OVERSIZE, "bodies in flight over the budget");
		return;
	}
	b = xcalloc(1, sizeof(*b) + h->chunk_count * (sizeof(b->chunks[0]) +
	    WIRE_MAC_SIZE));
	b->macs = (uint8_t *)&b->chunks[h->chunk_count];
	b->size = (size_t)wire_body_size(h->payload_len);
	b->t = t;
	b->peer = p;
	b->h = *h;
	b->start = transport_now(t);
	if ((b->buf = bufcache_get(&t->bufs, (size_t)h->payload_len)) == NULL) {
		log_warn("transport: no memory for a %zu byte body from %s",
		    b->size, p->addr);
		free(b);
		return;
	}
	session_bodykey_get(&p->in, 0, &b->key);
	if ((rc = body_post_chunks(t, b)) != 0) {
		log_warn("transport: cannot post a body receive: %s",
		    strerror(-rc));
		transport_body_abandon(t, b);
		return;
	}
	b->next = p->bodies;
	p->bodies = b;
	transport_arm_tick(t, TICK_MS);
}

void
transport_recv_frame(void *arg, const uint8_t *buf, size_t len, int status)
{
	struct transport *t = arg;
	struct wire_header h;
	enum wire_reject why;

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
	switch (h.type) {
	case WIRE_T_HELLO:
		on_hello(t, buf, len, &h);
		break;
	case WIRE_T_HELLO_ACK:
		on_hello_ack(t, buf, len, &h);
		break;
	case WIRE_T_ACK:
		on_ack(t, buf, len, &h);
		break;
	default:
		on_app_frame(t, buf, len, &h);
	}
}
