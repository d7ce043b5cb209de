/*
 * member_table: see member_table.h.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "member_table.h"

struct mentry *
member_table_find(struct member *m, const char *addr)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->e[i].addr, addr) == 0)
			return &m->e[i];
	return NULL;
}

int
member_table_live(const struct mentry *e)
{
	return e->state == MEMBER_ALIVE || e->state == MEMBER_SUSPECT;
}

unsigned
member_table_live_count(const struct member *m)
{
	unsigned n = 0;

	for (size_t i = 0; i < m->n; i++)
		n += member_table_live(&m->e[i]);
	return n;
}

/* How many times news about one record is sent: lambda * log2(n). */
static unsigned
retransmits(const struct member *m)
{
	unsigned n = member_table_live_count(m) + 1, bits = 0;

	while ((1u << bits) < n)
		bits++;
	return m->p.retransmit_mult * (bits ? bits : 1);
}

void
member_table_spread(struct member *m, struct mentry *e)
{
	e->transmits = retransmits(m);
}

static void
notify(struct member *m, const struct mentry *e, enum member_state old)
{
	if (m->ops.change != NULL)
		m->ops.change(m->ops.arg, e->addr, e->id, old, e->state);
}

void
member_table_set_state(struct member *m, struct mentry *e, enum member_state s, double now)
{
	enum member_state old = e->state;

	e->state = s;
	e->since = now;
	if (s == MEMBER_SUSPECT) {
		e->suspect_deadline = now + m->p.suspicion_ms / 1000.0;
		m->c.suspicions++;
	} else if (s == MEMBER_DEAD) {
		m->c.deaths++;
	} else if (s == MEMBER_LEFT) {
		m->c.lefts++;
	}
	member_table_spread(m, e);
	if (old != s)
		notify(m, e, old);
}

/* The probe order is rebuilt when a pass ends: a random permutation of
 * the live members, so every member is probed once per pass (SWIM's
 * bound on detection time) in an order nobody can predict. */
void
member_table_order_rebuild(struct member *m)
{
	m->norder = 0;
	m->pos = 0;
	for (size_t i = 1; i < m->n; i++)
		if (member_table_live(&m->e[i]))
			m->order[m->norder++] = i;
	rng_shuffle(&m->rng, m->order, m->norder);
}

/* SWIM: a newcomer goes to a random place in the current pass. A record
 * that died keeps its place until the pass ends (probe_start skips it), so
 * one that comes back within the pass is already there: inserting it again
 * would grow the order past the table, one index per revival. */
static void
order_insert(struct member *m, size_t idx)
{
	size_t at;

	for (size_t i = 0; i < m->norder; i++)
		if (m->order[i] == idx)
			return;
	at = m->pos + (size_t)rng_below(&m->rng, m->norder - m->pos + 1);

	memmove(&m->order[at + 1], &m->order[at],
	    (m->norder - at) * sizeof(*m->order));
	m->order[at] = idx;
	m->norder++;
}

static struct mentry *
add(struct member *m, const struct member_update *u, double now)
{
	struct mentry *e;

	if (m->n == m->cap) {
		size_t cap = m->cap * 2;
		struct mentry *ne = realloc(m->e, cap * sizeof(*ne));
		size_t *no = realloc(m->order, cap * sizeof(*no));

		if (ne != NULL)
			m->e = ne;
		if (no != NULL)
			m->order = no;
		if (ne == NULL || no == NULL) {
			log_warn("member: no memory for member %s", u->addr);
			return NULL;
		}
		m->cap = cap;
	}
	e = &m->e[m->n++];
	memset(e, 0, sizeof(*e));
	snprintf(e->addr, sizeof(e->addr), "%s", u->addr);
	e->id = u->id;
	e->inc = u->incarnation;
	e->state = u->state;
	e->since = now;
	e->last_contact = -1;
	e->rtt = -1;
	if (e->state == MEMBER_SUSPECT)
		e->suspect_deadline = now + m->p.suspicion_ms / 1000.0;
	if (member_table_live(e)) {
		order_insert(m, (size_t)(e - m->e));
		m->c.joins++;
		member_table_spread(m, e);
	}
	notify(m, e, e->state);
	return e;
}

void
member_table_reap(struct member *m, double now)
{
	size_t i = 1, removed = 0;

	while (i < m->n) {
		struct mentry *e = &m->e[i];

		if (!member_table_live(e) && now - e->since > MEMBER_REAP_S) {
			memmove(e, e + 1, (m->n - i - 1) * sizeof(*e));
			m->n--;
			removed++;
		} else {
			i++;
		}
	}
	if (removed)
		member_table_order_rebuild(m);
}

/* Does update u supersede record e? Incarnations order the records of one
 * address; at equal incarnation left > dead > suspect > alive. */
static int
newer(const struct mentry *e, const struct member_update *u)
{
	if (u->incarnation != e->inc)
		return u->incarnation > e->inc;
	if (u->id != e->id)
		return 0;
	switch (u->state) {
	case MEMBER_SUSPECT:
		return e->state == MEMBER_ALIVE;
	case MEMBER_DEAD:
		return e->state == MEMBER_ALIVE || e->state == MEMBER_SUSPECT;
	case MEMBER_LEFT:
		return e->state != MEMBER_LEFT;
	default:
		return 0;
	}
}

void
member_table_apply(struct member *m, const struct member_update *u, double now)
{
	struct mentry *self = &m->e[0], *e;
	enum member_state old;
	int was_live;

	m->c.updates_received++;
	if (strcmp(u->addr, self->addr) == 0) {
		if (m->leaving)
			return;
		if (u->state == MEMBER_ALIVE && u->id == self->id)
			return;
		/* Someone doubts us, or still speaks of an older process at
		 * our address: outrank it. */
		if (u->incarnation >= self->inc) {
			self->inc = u->incarnation + 1;
			member_table_spread(m, self);
			m->c.refutations++;
			if (m->lh < MEMBER_LH_MAX)
				m->lh++;
			log_info("member: refuting %s about us (incarnation now %" PRIu64 ")",
			    member_state_name(u->state), self->inc);
		}
		return;
	}
	if ((e = member_table_find(m, u->addr)) == NULL) {
		e = add(m, u, now);
		if (e != NULL && !member_table_live(e))
			e->transmits = 0;
		return;
	}
	if (!newer(e, u))
		return;
	old = e->state;
	was_live = member_table_live(e);
	e->inc = u->incarnation;
	if (e->id != u->id) {
		log_info("member: %s is now %016" PRIx64 " (was %016" PRIx64 ")",
		    e->addr, u->id, e->id);
		e->rtt = -1;
		e->last_contact = -1;
		e->id = u->id;
		if (old == u->state)
			notify(m, e, old);
	}
	member_table_set_state(m, e, u->state, now);
	if (!was_live && member_table_live(e)) {
		/* back from dead or left: into the current probe pass */
		order_insert(m, (size_t)(e - m->e));
		m->c.joins++;
	}
}
