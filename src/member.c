/*
 * member: see member.h. Shape of the code:
 *
 * - The table is an array of records, this peer first, indexed by address
 *   (member_table.h). Nothing done per message or per tick looks at every
 *   record, but while some member is suspect (its deadline), when a pass
 *   of probes ends and when a random member is drawn while few are live:
 *   the simulator runs jobs of thousands.
 * - A record with transmits > 0 has news to spread; outgoing messages
 *   carry the sender's own record first, then the receiver's record when
 *   we do not think it alive (so a peer wrongly marked suspect or dead
 *   learns of it from whoever talks to it and refutes), then the records
 *   with the most transmissions left, within MEMBER_PIGGY_BYTES: the
 *   first that does not fit ends the message (addresses are of much the
 *   same length, and the table's news lists are walked, not searched).
 * - Probes and relayed probes are matched by sequence number only.
 * - If the clock jumped by several periods between two ticks, this
 *   process was not scheduled (SIGSTOP, swap, an overloaded machine): the
 *   probe in flight proves nothing about its target and suspicions may
 *   have expired without a chance to hear refutations, so both restart.
 *
 * The record table and its merge rules are in member_table.c, the message
 * codec in member_wire.c; this file is the protocol: probes, sends, ticks,
 * leave, and the queries.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "member.h"
#include "member_table.h"

static const char *const member_type_names[MEMBER_T_LAST - MEMBER_T_FIRST + 1] = {
	[MEMBER_T_PING - MEMBER_T_FIRST] = "ping",
	[MEMBER_T_ACK - MEMBER_T_FIRST] = "ping_ack",
	[MEMBER_T_PING_REQ - MEMBER_T_FIRST] = "ping_req",
	[MEMBER_T_SYNC - MEMBER_T_FIRST] = "sync",
	[MEMBER_T_GOSSIP - MEMBER_T_FIRST] = "member_gossip",
};

const struct proto member_proto = {
	"membership", MEMBER_T_FIRST, MEMBER_T_LAST, member_type_names
};

static double
eff(const struct member *m, unsigned ms)
{
	return ms / 1000.0 * (1 + m->lh);
}

/* --- sending ------------------------------------------------------------- */

static void
fill(struct member_update *u, const struct mentry *e)
{
	u->state = (uint8_t)e->state;
	u->id = e->id;
	u->incarnation = e->inc;
	snprintf(u->addr, sizeof(u->addr), "%s", e->addr);
}

static size_t
upd_size(const struct mentry *e)
{
	return MEMBER_UPD_HDR + strlen(e->addr);
}

/* Is e in slice s (from 0) of k slices of the addresses' hash space? */
static int
in_slice(const struct mentry *e, uint32_t k, uint32_t s)
{
	return (uint32_t)(((member_table_hash(e->addr) >> 32) * k) >> 32) == s;
}

/* A slice as a SYNC request's seq names it (member_wire.h), or 0. */
static uint32_t
slice_valid(uint32_t seq)
{
	uint32_t k = seq >> 16, s = seq & 0xffff;

	return k > 0 && s > 0 && s <= k ? seq : 0;
}

/* Gather the updates for one message to addr (see the top comment): for
 * a SYNC the whole table, in turns, or the records of one slice. */
static uint16_t
piggyback(struct member *m, const char *to, int whole_table, uint32_t slice)
{
	struct mentry *dest = to ? member_table_find(m, to) : NULL;
	size_t budget = MEMBER_PIGGY_BYTES, t;
	uint32_t picked[MEMBER_MSG_MAX_UPDATES], i;
	uint16_t n = 0, npicked = 0, p;

	fill(&m->ubuf[n++], &m->e[0]);
	if (m->e[0].transmits > 0)
		member_table_set_transmits(m, &m->e[0], m->e[0].transmits - 1u);
	if (whole_table && slice != 0) {
		for (size_t r = 1; r < m->n && n < MEMBER_MSG_MAX_UPDATES; r++)
			if (in_slice(&m->e[r], slice >> 16, (slice & 0xffff) - 1))
				fill(&m->ubuf[n++], &m->e[r]);
		return n;
	}
	if (whole_table) {
		/* A table larger than one message goes in turns, each SYNC
		 * from where the last one stopped: always from the first
		 * record, the ones past MEMBER_MSG_MAX_UPDATES would never be
		 * sent, and a joiner would learn of them only as each
		 * happened to probe it. */
		size_t others = m->n - 1, k;

		for (k = 0; k < others && n < MEMBER_MSG_MAX_UPDATES; k++)
			fill(&m->ubuf[n++], &m->e[1 + (m->sync_pos + k) % others]);
		m->sync_pos = others ? (m->sync_pos + k) % others : 0;
		return n;
	}
	if (dest != NULL && dest->state != MEMBER_ALIVE) {
		fill(&m->ubuf[n++], dest);
		budget -= upd_size(dest);
	}
	/* Picked first, counted down after: counting down moves a record
	 * to the next list, the one walked next. */
	for (t = m->nnews; t-- > 1 && budget > 0;) {
		for (i = m->news[t].first; i != NEWS_NONE && n < MEMBER_MSG_MAX_UPDATES;
		    i = m->e[i].news_next) {
			struct mentry *e = &m->e[i];

			if (i == 0 || e == dest)
				continue;
			if (upd_size(e) > budget) {
				budget = 0;
				break;
			}
			fill(&m->ubuf[n++], e);
			picked[npicked++] = i;
			budget -= upd_size(e);
		}
	}
	for (p = 0; p < npicked; p++) {
		struct mentry *e = &m->e[picked[p]];

		member_table_set_transmits(m, e, e->transmits - 1u);
	}
	return n;
}

/* slice: what a SYNC answer holds (piggyback) */
static int
send_with(struct member *m, const char *to, uint8_t type, uint32_t seq,
    const char *target, uint8_t flags, uint32_t slice, proto_sent_cb cb, void *cbarg)
{
	struct member_msg msg;
	int len, rc;

	memset(&msg, 0, sizeof(msg));
	msg.flags = flags;
	msg.seq = seq;
	msg.u = m->ubuf;
	if (target != NULL)
		snprintf(msg.target, sizeof(msg.target), "%s", target);
	msg.n = piggyback(m, to, type == MEMBER_T_SYNC, slice);
	len = member_msg_encode(type, &msg, m->tx, MEMBER_TX_CAP);
	if (len < 0)
		return len;
	m->c.updates_sent += msg.n - 1u;
	rc = m->ops.send(m->ops.arg, to, type, m->tx, (size_t)len, cb, cbarg);
	if (rc < 0) {
		m->c.send_errors++;
		log_debug("member: send to %s failed: %s", to, strerror(-rc));
	}
	return rc;
}

static int
send_msg(struct member *m, const char *to, uint8_t type, uint32_t seq,
    const char *target, uint8_t flags, proto_sent_cb cb, void *cbarg)
{
	return send_with(m, to, type, seq, target, flags, 0, cb, cbarg);
}

/* A SYNC request asks for our next turn's answer, or for one slice; an
 * answer says how many records its sender holds (member_wire.h). */
static void
send_sync(struct member *m, const char *to, int request, uint32_t slice)
{
	size_t count = m->n - 1;

	m->c.syncs_sent++;
	if (request)
		send_with(m, to, MEMBER_T_SYNC, slice, NULL, MEMBER_F_REPLY, 0, NULL, NULL);
	else
		send_with(m, to, MEMBER_T_SYNC, count > UINT32_MAX ? UINT32_MAX :
		    (uint32_t)count, NULL, slice ? MEMBER_F_SLICE : 0, slice, NULL, NULL);
}

/* A SYNC answer that is not a slice: its sender holds count records and
 * taught us added. Far behind, walk the table (member.h); behind, ask for
 * the next turn one period later. */
static void
synced(struct member *m, uint32_t count, int added, double now)
{
	double soon = now + m->p.period_ms / 1000.0;

	if (m->walk_next == m->walk_k && count >= m->n - 1 + MEMBER_WALK_SLICE) {
		m->walk_k = count / MEMBER_WALK_SLICE >= UINT16_MAX ? UINT16_MAX :
		    (uint16_t)((count + MEMBER_WALK_SLICE - 1) / MEMBER_WALK_SLICE);
		m->walk_next = 0;
		m->walk_idle = 0;
		log_debug("member: %" PRIu32 " records known to a member, %zu here: "
		    "asking for them in %u slices", count, m->n - 1, (unsigned)m->walk_k);
	} else if (added == 0) {
		return;
	}
	if (m->next_sync > soon)
		m->next_sync = soon;
}

static int
candidate(const struct mentry *e, const char *except, int alive_only)
{
	return (alive_only ? e->state == MEMBER_ALIVE : member_table_live(e)) &&
	    (except == NULL || strcmp(e->addr, except) != 0);
}

/* A random live member other than this peer and except; NULL if none.
 * Records are drawn until one fits, which is uniform over those that do
 * and takes a draw or two when most are live; when few are, a count and
 * a second pass, as uniform. */
static struct mentry *
random_live(struct member *m, const char *except, int alive_only)
{
	size_t cand = 0, pick, i;

	for (i = 0; i < 32 && m->n > 1; i++) {
		struct mentry *e = &m->e[1 + rng_below(&m->rng, m->n - 1)];

		if (candidate(e, except, alive_only))
			return e;
	}
	for (i = 1; i < m->n; i++)
		cand += candidate(&m->e[i], except, alive_only);
	if (cand == 0)
		return NULL;
	pick = (size_t)rng_below(&m->rng, cand);
	for (i = 1; i < m->n; i++)
		if (candidate(&m->e[i], except, alive_only) && pick-- == 0)
			return &m->e[i];
	return NULL;
}

/* Up to k (at most cap) distinct members as random_live draws them, their
 * addresses into out; returns how many. Draws stop after 4k, so a job of
 * fewer members than k does not spin on repeats. */
static unsigned
random_distinct(struct member *m, const char *except, int alive_only, const char **out,
    size_t cap, unsigned k)
{
	unsigned n = 0, tries = 0, j;

	if (k > cap)
		k = (unsigned)cap;
	while (n < k && tries++ < 4 * k) {
		struct mentry *e = random_live(m, except, alive_only);

		if (e == NULL)
			break;
		for (j = 0; j < n && out[j] != e->addr; j++)
			;
		if (j == n)
			out[n++] = e->addr;
	}
	return n;
}

/* --- life cycle ---------------------------------------------------------- */

static unsigned
dflt(unsigned v, unsigned d)
{
	return v ? v : d;
}

int
member_new(const struct member_params *p, const struct member_ops *ops,
    double now, struct member **out, struct errbuf *err)
{
	struct member *m;

	if (p->self_addr == NULL || !member_addr_ok((const uint8_t *)p->self_addr,
	    strlen(p->self_addr)))
		return errbuf_set(err, -EINVAL, "member: bad own address");
	if (p->self_id == 0 || ops == NULL || ops->send == NULL)
		return errbuf_set(err, -EINVAL, "member: an id and a send function are required");
	m = xcalloc(1, sizeof(*m));
	m->p = *p;
	m->p.period_ms = dflt(p->period_ms, MEMBER_DEFAULT_PERIOD_MS);
	m->p.ping_timeout_ms = dflt(p->ping_timeout_ms, MEMBER_DEFAULT_PING_TIMEOUT_MS);
	m->p.suspicion_ms = dflt(p->suspicion_ms, MEMBER_DEFAULT_SUSPICION_MS);
	m->p.indirect_checks = dflt(p->indirect_checks, MEMBER_DEFAULT_INDIRECT);
	m->p.retransmit_mult = dflt(p->retransmit_mult, MEMBER_DEFAULT_RETRANSMIT);
	m->p.gossip_ms = dflt(p->gossip_ms, MEMBER_DEFAULT_GOSSIP_MS);
	m->p.gossip_fanout = dflt(p->gossip_fanout, MEMBER_DEFAULT_FANOUT);
	m->p.sync_ms = dflt(p->sync_ms, MEMBER_DEFAULT_SYNC_MS);
	m->p.leave_ms = dflt(p->leave_ms, MEMBER_DEFAULT_LEAVE_MS);
	m->p.retry_ms = dflt(p->retry_ms, MEMBER_DEFAULT_RETRY_MS);
	m->p.self_addr = NULL;
	m->ops = *ops;
	rng_init(&m->rng, p->self_id, "member", 0, 0);
	member_table_init(m, p->self_addr, now);
	m->tx = xmalloc(MEMBER_TX_CAP);
	m->ubuf = xcalloc(MEMBER_MSG_MAX_UPDATES, sizeof(*m->ubuf));
	m->e[0].id = p->self_id;
	m->e[0].inc = p->incarnation;
	m->next_seq = (uint32_t)rng_u64(&m->rng);
	m->joined = 1;		/* until a seed says otherwise */
	m->last_tick = now;
	m->next_probe = now + m->p.period_ms / 1000.0;
	m->next_gossip = now;
	m->next_sync = now + m->p.sync_ms / 1000.0;
	m->next_reap = now + MEMBER_REAP_S;
	*out = m;
	return 0;
}

void
member_free(struct member *m)
{
	if (m == NULL)
		return;
	rng_clear(&m->rng);
	member_table_free(m);
	free(m->tx);
	free(m->ubuf);
	free(m);
}

int
member_add_seed(struct member *m, const char *addr, double now)
{
	struct seed *s;

	if (!member_addr_ok((const uint8_t *)addr, strlen(addr)))
		return -EINVAL;
	if (strcmp(addr, m->e[0].addr) == 0)
		return 0;
	for (size_t i = 0; i < m->nseeds; i++)
		if (strcmp(m->seeds[i].addr, addr) == 0)
			return 0;
	if (m->nseeds == MEMBER_MAX_SEEDS)
		return -ENOSPC;
	s = &m->seeds[m->nseeds++];
	snprintf(s->addr, sizeof(s->addr), "%s", addr);
	s->next = now;
	s->backoff_ms = m->p.retry_ms;
	if (member_table_live_count(m) <= 1)
		m->joined = 0;
	return 0;
}

/* --- protocol ------------------------------------------------------------ */

/* Ping e now; without an ack by the ping timeout others are asked to
 * ping it, and without any by the period's end it is suspect. */
static void
probe_member(struct member *m, const struct mentry *e, double now)
{
	m->probe.active = 1;
	m->probe.indirect_sent = 0;
	snprintf(m->probe.target, sizeof(m->probe.target), "%s", e->addr);
	m->probe.seq = m->next_seq++;
	m->probe.sent = now;
	m->probe.direct_deadline = now + eff(m, m->p.ping_timeout_ms);
	m->probe.end = now + eff(m, m->p.period_ms);
	m->c.probes++;
	m->c.pings_sent++;
	send_msg(m, e->addr, MEMBER_T_PING, m->probe.seq, NULL, 0, NULL, NULL);
}

/* The next live member in the probe order. */
static void
probe_start(struct member *m, double now)
{
	struct mentry *e = NULL;

	while (e == NULL) {
		if (m->pos >= m->norder) {
			member_table_order_rebuild(m);
			if (m->norder == 0)
				return;
		}
		e = &m->e[m->order[m->pos++]];
		if (!member_table_live(e))
			e = NULL;
	}
	probe_member(m, e, now);
}

/* The member asked for out of turn while another probe was in flight, if
 * it is still alive: 1 if its probe started. */
static int
probe_asked(struct member *m, double now)
{
	struct mentry *e;

	if (m->asked[0] == '\0')
		return 0;
	e = member_table_find(m, m->asked);
	m->asked[0] = '\0';
	if (e == NULL || e->state != MEMBER_ALIVE)
		return 0;
	probe_member(m, e, now);
	return 1;
}

static void
probe_indirect(struct member *m)
{
	const char *to[MEMBER_DEFAULT_INDIRECT * 4];
	unsigned n, i;

	m->probe.indirect_sent = 1;
	n = random_distinct(m, m->probe.target, 1, to, GD_ARRAY_SIZE(to),
	    m->p.indirect_checks);
	for (i = 0; i < n; i++) {
		m->c.ping_reqs_sent++;
		send_msg(m, to[i], MEMBER_T_PING_REQ, m->probe.seq, m->probe.target, 0,
		    NULL, NULL);
	}
}

static void
probe_failed(struct member *m, double now)
{
	struct mentry *e = member_table_find(m, m->probe.target);

	m->probe.active = 0;
	m->c.probe_failures++;
	if (m->lh < MEMBER_LH_MAX)
		m->lh++;
	if (e != NULL && e->state == MEMBER_ALIVE) {
		log_info("member: %s (%016" PRIx64 ") does not answer: suspect",
		    e->addr, e->id);
		member_table_set_state(m, e, MEMBER_SUSPECT, now);
	}
}

static void
on_ack(struct member *m, const char *from, uint32_t seq, double now)
{
	size_t i;

	m->c.acks_received++;
	if (m->probe.active && seq == m->probe.seq) {
		struct mentry *e = member_table_find(m, m->probe.target);

		if (strcmp(from, m->probe.target) == 0) {
			double rtt = now - m->probe.sent;

			if (e != NULL)
				e->rtt = e->rtt < 0 ? rtt : e->rtt +
				    MEMBER_RTT_ALPHA * (rtt - e->rtt);
		} else {
			m->c.indirect_successes++;
		}
		if (e != NULL)
			e->last_contact = now;
		m->probe.active = 0;
		if (m->lh > 0)
			m->lh--;
		probe_asked(m, now);
		return;
	}
	for (i = 0; i < MEMBER_MAX_RELAYS; i++) {
		struct relay *r = &m->relays[i];

		if (r->expires > 0 && r->my_seq == seq) {
			m->c.relayed_acks++;
			send_msg(m, r->requester, MEMBER_T_ACK, r->their_seq, NULL,
			    0, NULL, NULL);
			r->expires = 0;
			return;
		}
	}
}

static void
on_ping_req(struct member *m, const char *from, const struct member_msg *msg,
    double now)
{
	struct relay *r = &m->relays[0];
	size_t i;

	m->c.ping_reqs_received++;
	if (strcmp(msg->target, m->e[0].addr) == 0) {
		/* asked to check on ourselves: we are evidently up */
		send_msg(m, from, MEMBER_T_ACK, msg->seq, NULL, 0, NULL, NULL);
		return;
	}
	for (i = 0; i < MEMBER_MAX_RELAYS; i++) {
		if (m->relays[i].expires < now) {
			r = &m->relays[i];
			break;
		}
		if (m->relays[i].expires < r->expires)
			r = &m->relays[i];
	}
	r->my_seq = m->next_seq++;
	r->their_seq = msg->seq;
	snprintf(r->requester, sizeof(r->requester), "%s", from);
	r->expires = now + eff(m, m->p.period_ms);
	m->c.pings_sent++;
	send_msg(m, msg->target, MEMBER_T_PING, r->my_seq, NULL, 0, NULL, NULL);
}

void
member_recv(struct member *m, double now, uint64_t sender,
    const char *sender_addr, uint8_t type, const uint8_t *buf, size_t len)
{
	struct member_msg msg;
	struct errbuf err = { "" };
	struct mentry *e;
	uint16_t i;
	int added = 0;

	memset(&msg, 0, sizeof(msg));
	msg.u = m->ubuf;
	if (member_msg_decode(type, buf, len, &msg, MEMBER_MSG_MAX_UPDATES,
	    &err) < 0) {
		m->c.malformed++;
		log_debug("member: dropped a message from %s: %s", sender_addr,
		    err.msg);
		return;
	}
	for (i = 0; i < msg.n; i++) {
		struct member_update u = msg.u[i];

		added += member_table_apply(m, &u, now);
	}
	if ((e = member_table_find(m, sender_addr)) != NULL && e != &m->e[0] &&
	    e->id == sender)
		e->last_contact = now;
	if (!m->joined && member_table_live_count(m) > 1) {
		m->joined = 1;
		log_info("member: joined the job through %s (%u members)",
		    sender_addr, member_table_live_count(m));
	}
	switch (type) {
	case MEMBER_T_PING:
		m->c.pings_received++;
		m->c.acks_sent++;
		send_msg(m, sender_addr, MEMBER_T_ACK, msg.seq, NULL, 0, NULL, NULL);
		break;
	case MEMBER_T_ACK:
		on_ack(m, sender_addr, msg.seq, now);
		break;
	case MEMBER_T_PING_REQ:
		on_ping_req(m, sender_addr, &msg, now);
		break;
	case MEMBER_T_SYNC:
		m->c.syncs_received++;
		if (msg.flags & MEMBER_F_REPLY)
			send_sync(m, sender_addr, 0, slice_valid(msg.seq));
		else if (!(msg.flags & MEMBER_F_SLICE))
			synced(m, msg.seq, added, now);
		else if (added > 0)
			m->walk_idle = 0;
		else if (++m->walk_idle >= MEMBER_WALK_IDLE)
			m->walk_next = m->walk_k;	/* nothing more to learn */
		break;
	default:
		break;
	}
}

void
member_peer_down(struct member *m, double now, const char *addr)
{
	struct mentry *e = member_table_find(m, addr);

	if (e == NULL || e == &m->e[0] || e->state != MEMBER_ALIVE || m->leaving)
		return;
	log_info("member: transport lost %s: suspect", addr);
	member_table_set_state(m, e, MEMBER_SUSPECT, now);
}

int
member_probe(struct member *m, double now, const char *addr)
{
	struct mentry *e = member_table_find(m, addr);

	if (e == NULL || e == &m->e[0] || e->state != MEMBER_ALIVE || m->leaving)
		return -ENOENT;
	m->c.probes_asked++;
	if (!m->probe.active)
		probe_member(m, e, now);
	else if (strcmp(m->probe.target, addr) != 0)
		snprintf(m->asked, sizeof(m->asked), "%s", addr);
	return 0;
}

static void
leave_sent(void *arg, int status)
{
	struct member *m = arg;

	(void)status;
	if (m->leave_pending > 0)
		m->leave_pending--;
}

void
member_leave(struct member *m, double now)
{
	size_t i;

	if (m->leaving)
		return;
	m->leaving = 1;
	m->probe.active = 0;
	member_table_state(m, &m->e[0], MEMBER_LEFT);
	m->e[0].since = now;
	m->leave_deadline = now + m->p.leave_ms / 1000.0;
	member_table_spread(m, &m->e[0]);
	for (i = 1; i < m->n; i++) {
		if (!member_table_live(&m->e[i]))
			continue;
		m->c.gossip_sent++;
		if (send_msg(m, m->e[i].addr, MEMBER_T_GOSSIP, 0, NULL, 0,
		    leave_sent, m) == 0)
			m->leave_pending++;
	}
	log_info("member: leaving; told %u members", m->leave_pending);
}

int
member_leave_done(struct member *m, double now)
{
	return m->leaving && (m->leave_pending == 0 || now >= m->leave_deadline);
}

/* Alone (member.h): it heard of members, and none but itself is live. */
static int
alone(const struct member *m)
{
	return !m->leaving && member_table_live_count(m) <= 1 && m->n > 1;
}

/* While alone, ask the records in turn for their tables (the answer, or
 * our own record in the request, brings a live one back); after each pass
 * over all of them the pause between two doubles. rescue_pos 0: not
 * alone at the last tick. */
static void
rescue(struct member *m, double now)
{
	if (!alone(m)) {
		if (m->rescue_pos != 0)
			log_info("member: in touch with the job again (%u live members)",
			    member_table_live_count(m));
		m->rescue_pos = 0;
		return;
	}
	if (m->rescue_pos == 0) {
		log_warn("member: no live member; asking the %zu members heard of, in turn",
		    m->n - 1);
		m->rescue_pos = 1;
		m->rescue_ms = m->p.retry_ms;
		m->next_rescue = now;
	}
	if (now < m->next_rescue)
		return;
	if (m->rescue_pos >= m->n) {
		m->rescue_pos = 1;
		m->rescue_ms = m->rescue_ms * 2 > MEMBER_RETRY_MAX_MS ? MEMBER_RETRY_MAX_MS :
		    m->rescue_ms * 2;
	}
	send_sync(m, m->e[m->rescue_pos].addr, 1, 0);
	m->rescue_pos++;
	m->next_rescue = now + m->rescue_ms / 1000.0;
}

/* The process was not scheduled for a while: see the top comment. */
static void
paused(struct member *m, double gap, double now)
{
	m->c.pauses++;
	log_warn("member: no tick for %.1f s (process stopped or starved); "
	    "restarting probes and suspicion timers", gap);
	m->probe.active = 0;
	for (size_t i = 1; i < m->n; i++)
		if (m->e[i].state == MEMBER_SUSPECT)
			m->e[i].suspect_deadline = now + m->p.suspicion_ms / 1000.0;
	m->next_probe = now;
}

double
member_tick(struct member *m, double now)
{
	double gap = now - m->last_tick;
	size_t i;

	if (gap > 1.0 && gap > 3 * eff(m, m->p.period_ms))
		paused(m, gap, now);
	m->last_tick = now;
	for (i = 0; i < m->nseeds; i++) {
		struct seed *s = &m->seeds[i];

		if (m->leaving || s->next > now || member_table_find(m, s->addr) != NULL)
			continue;
		send_sync(m, s->addr, 1, 0);
		s->next = now + s->backoff_ms / 1000.0;
		s->backoff_ms = s->backoff_ms * 2 > MEMBER_RETRY_MAX_MS ?
		    MEMBER_RETRY_MAX_MS : s->backoff_ms * 2;
	}
	if (!m->leaving) {
		if (m->probe.active && !m->probe.indirect_sent &&
		    now >= m->probe.direct_deadline)
			probe_indirect(m);
		if (m->probe.active && now >= m->probe.end)
			probe_failed(m, now);
		if (!m->probe.active && !probe_asked(m, now) && now >= m->next_probe) {
			probe_start(m, now);
			m->next_probe = now + eff(m, m->p.period_ms);
		}
	}
	for (i = 1; i < m->n && m->count[MEMBER_SUSPECT] > 0; i++) {
		struct mentry *e = &m->e[i];

		if (e->state == MEMBER_SUSPECT && now >= e->suspect_deadline) {
			log_info("member: %s (%016" PRIx64 ") suspected for %.1f s: dead",
			    e->addr, e->id, now - e->since);
			m->c.deaths_declared++;
			member_table_set_state(m, e, MEMBER_DEAD, now);
		}
	}
	if (now >= m->next_gossip) {
		if (m->pending > 0) {
			const char *to[16];
			unsigned n = random_distinct(m, NULL, 0, to, GD_ARRAY_SIZE(to),
			    m->p.gossip_fanout), j;

			for (j = 0; j < n; j++) {
				m->c.gossip_sent++;
				send_msg(m, to[j], MEMBER_T_GOSSIP, 0, NULL, 0, NULL, NULL);
			}
			if (n == 0)	/* nobody to tell */
				member_table_hush(m);
		}
		m->next_gossip = now + m->p.gossip_ms / 1000.0;
	}
	rescue(m, now);
	if (!m->leaving && now >= m->next_sync) {
		struct mentry *e = random_live(m, NULL, 1);
		uint32_t slice = 0;

		if (e != NULL && m->walk_next < m->walk_k)
			slice = (uint32_t)m->walk_k << 16 | ++m->walk_next;
		if (e != NULL)
			send_sync(m, e->addr, 1, slice);
		/* after a walk's last slice, one turn more: the job may
		 * have grown meanwhile (synced) */
		m->next_sync = now + (slice != 0 ? m->p.period_ms : m->p.sync_ms) / 1000.0;
	}
	if (now >= m->next_reap) {
		/* Alone, the records are whom rescue asks: kept. */
		if (!alone(m))
			member_table_reap(m, now);
		m->next_reap = now + MEMBER_REAP_S / 10;
	}
	return member_next_deadline(m);
}

/* Only deadlines that member_tick moves on once they pass: the caller
 * re-arms its timer for the result, and a deadline left in the past
 * would fire it again at once, forever (the livelock of a leaving peer,
 * which stops syncing and whose leave deadline never moves). */
double
member_next_deadline(struct member *m)
{
	double t = m->next_reap;
	size_t i;

#define EARLIER(x) do { if ((x) < t) t = (x); } while (0)
	if (m->leaving) {
		if (m->leave_pending > 0 && m->leave_deadline > m->last_tick)
			EARLIER(m->leave_deadline);
	} else {
		EARLIER(m->next_sync);
		if (!m->probe.active)
			EARLIER(m->next_probe);
		else if (!m->probe.indirect_sent)
			EARLIER(m->probe.direct_deadline);
		if (m->probe.active)
			EARLIER(m->probe.end);
	}
	for (i = 1; i < m->n && m->count[MEMBER_SUSPECT] > 0; i++)
		if (m->e[i].state == MEMBER_SUSPECT)
			EARLIER(m->e[i].suspect_deadline);
	if (m->pending > 0)
		EARLIER(m->next_gossip);
	for (i = 0; i < m->nseeds; i++)
		if (!m->leaving && member_table_find(m, m->seeds[i].addr) == NULL)
			EARLIER(m->seeds[i].next);
	/* Alone since a message, not a tick: the next tick begins a pass. */
	if (alone(m))
		EARLIER(m->rescue_pos != 0 ? m->next_rescue : m->last_tick);
#undef EARLIER
	return t;
}

/* --- queries ------------------------------------------------------------- */

int
member_joined(const struct member *m)
{
	return m->joined;
}

unsigned
member_count(const struct member *m, enum member_state s)
{
	return (unsigned)s <= MEMBER_LEFT ? m->count[s] : 0;
}

uint64_t
member_incarnation(const struct member *m)
{
	return m->e[0].inc;
}

int
member_check(const struct member *m, struct errbuf *err)
{
	return member_table_check(m, err);
}

size_t
member_list(const struct member *m, struct member_info *out, size_t max)
{
	for (size_t i = 0; i < m->n && i < max; i++) {
		const struct mentry *e = &m->e[i];
		struct member_info *o = &out[i];

		snprintf(o->addr, sizeof(o->addr), "%s", e->addr);
		o->id = e->id;
		o->incarnation = e->inc;
		o->state = e->state;
		o->self = i == 0;
		o->rtt = e->rtt;
		o->last_contact = e->last_contact;
		o->since = e->since;
	}
	return m->n;
}

size_t
member_live(const struct member *m, char (*out)[WIRE_ADDR_MAX + 1], size_t max)
{
	size_t k = 0;

	for (size_t i = 1; i < m->n; i++) {
		if (m->e[i].state != MEMBER_ALIVE)
			continue;
		if (k < max)
			snprintf(out[k], sizeof(out[k]), "%s", m->e[i].addr);
		k++;
	}
	return k;
}

void
member_set_timing(struct member *m, unsigned period_ms, unsigned ping_timeout_ms,
    unsigned suspicion_ms)
{
	m->p.period_ms = dflt(period_ms, MEMBER_DEFAULT_PERIOD_MS);
	m->p.ping_timeout_ms = dflt(ping_timeout_ms, MEMBER_DEFAULT_PING_TIMEOUT_MS);
	m->p.suspicion_ms = dflt(suspicion_ms, MEMBER_DEFAULT_SUSPICION_MS);
}

int
member_stats_json(const struct member *m, json_t *obj)
{
	const struct member_counters *c = &m->c;
	json_t *o;

	o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I,"
	    " s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
	    "pings_sent", (json_int_t)c->pings_sent,
	    "pings_received", (json_int_t)c->pings_received,
	    "acks_sent", (json_int_t)c->acks_sent,
	    "acks_received", (json_int_t)c->acks_received,
	    "ping_reqs_sent", (json_int_t)c->ping_reqs_sent,
	    "ping_reqs_received", (json_int_t)c->ping_reqs_received,
	    "relayed_acks", (json_int_t)c->relayed_acks,
	    "probes", (json_int_t)c->probes,
	    "probe_failures", (json_int_t)c->probe_failures,
	    "indirect_successes", (json_int_t)c->indirect_successes,
	    "probes_asked", (json_int_t)c->probes_asked,
	    "suspicions", (json_int_t)c->suspicions,
	    "deaths", (json_int_t)c->deaths,
	    "deaths_declared", (json_int_t)c->deaths_declared,
	    "lefts", (json_int_t)c->lefts,
	    "joins", (json_int_t)c->joins,
	    "refutations", (json_int_t)c->refutations,
	    "updates_received", (json_int_t)c->updates_received,
	    "updates_sent", (json_int_t)c->updates_sent,
	    "syncs_sent", (json_int_t)c->syncs_sent,
	    "syncs_received", (json_int_t)c->syncs_received,
	    "gossip_sent", (json_int_t)c->gossip_sent,
	    "malformed", (json_int_t)c->malformed,
	    "send_errors", (json_int_t)c->send_errors,
	    "pauses", (json_int_t)c->pauses);
	if (o == NULL)
		return -ENOMEM;
	json_object_set_new(o, "alive", json_integer(member_count(m, MEMBER_ALIVE)));
	json_object_set_new(o, "suspect", json_integer(member_count(m, MEMBER_SUSPECT)));
	json_object_set_new(o, "dead", json_integer(member_count(m, MEMBER_DEAD)));
	json_object_set_new(o, "left", json_integer(member_count(m, MEMBER_LEFT)));
	json_object_set_new(o, "incarnation", json_integer((json_int_t)m->e[0].inc));
	json_object_set_new(o, "local_health", json_integer(m->lh));
	json_object_set_new(obj, "membership", o);
	return 0;
}
