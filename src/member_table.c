/*
 * member_table: see member_table.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "member_table.h"

#define TABLE_CAP0	16

/* What 10,000 simulated peers' tables fit in (member_table.h). */
_Static_assert(sizeof(struct mentry) <= 64, "a table record grew past 64 bytes");

/* --- the index ----------------------------------------------------------- */

/* FNV-1a: addresses are short and come from peers, but a peer that wants
 * to slow us down can only lengthen its own probe chains in its own job.
 * Its high half also places a record in a table walk's slice (member.c). */
uint64_t
member_table_hash(const char *s)
{
	uint64_t h = 14695981039346656037ull;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ull;
	return h ^ (h >> 32);
}

static void
index_put(struct member *m, size_t i)
{
	size_t mask = m->index_cap - 1, h = member_table_hash(m->e[i].addr) & mask;

	while (m->index[h] != 0)
		h = (h + 1) & mask;
	m->index[h] = (uint32_t)(i + 1);
}

static void
index_build(struct member *m)
{
	memset(m->index, 0, m->index_cap * sizeof(*m->index));
	for (size_t i = 0; i < m->n; i++)
		index_put(m, i);
}

struct mentry *
member_table_find(struct member *m, const char *addr)
{
	size_t mask = m->index_cap - 1, h = member_table_hash(addr) & mask;

	for (; m->index[h] != 0; h = (h + 1) & mask)
		if (strcmp(m->e[m->index[h] - 1].addr, addr) == 0)
			return &m->e[m->index[h] - 1];
	return NULL;
}

/* --- records, counts, news ----------------------------------------------- */

void
member_table_init(struct member *m, const char *self_addr, double now)
{
	struct mentry *e;

	m->cap = TABLE_CAP0;
	m->index_cap = 2 * TABLE_CAP0;
	m->e = xcalloc(m->cap, sizeof(*m->e));
	m->order = xcalloc(m->cap, sizeof(*m->order));
	m->index = xcalloc(m->index_cap, sizeof(*m->index));
	m->n = 1;
	e = &m->e[0];
	e->addr = xstrdup(self_addr);
	e->state = MEMBER_ALIVE;
	e->since = now;
	e->last_contact = now;
	e->rtt = -1;
	m->count[MEMBER_ALIVE] = 1;
	index_put(m, 0);
}

void
member_table_free(struct member *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->e[i].addr);
	free(m->news);
	free(m->e);
	free(m->order);
	free(m->index);
}

int
member_table_live(const struct mentry *e)
{
	return e->state == MEMBER_ALIVE || e->state == MEMBER_SUSPECT;
}

unsigned
member_table_live_count(const struct member *m)
{
	return m->count[MEMBER_ALIVE] + m->count[MEMBER_SUSPECT];
}

void
member_table_state(struct member *m, struct mentry *e, enum member_state s)
{
	m->count[e->state]--;
	m->count[s]++;
	e->state = (uint8_t)s;
}

static void
news_clear(struct member *m)
{
	for (size_t t = 0; t < m->nnews; t++)
		m->news[t].first = m->news[t].last = NEWS_NONE;
	m->pending = 0;
}

void
member_table_set_transmits(struct member *m, struct mentry *e, unsigned t)
{
	uint32_t idx = (uint32_t)(e - m->e);
	struct news *l;

	if (t > UINT16_MAX)
		t = UINT16_MAX;
	if (e->transmits > 0) {
		l = &m->news[e->transmits];
		if (e->news_prev != NEWS_NONE)
			m->e[e->news_prev].news_next = e->news_next;
		else
			l->first = e->news_next;
		if (e->news_next != NEWS_NONE)
			m->e[e->news_next].news_prev = e->news_prev;
		else
			l->last = e->news_prev;
		m->pending--;
	}
	e->transmits = (uint16_t)t;
	if (t == 0)
		return;
	if (t >= m->nnews) {
		size_t old = m->nnews;

		m->news = xrealloc(m->news, t + 1, sizeof(*m->news));
		m->nnews = t + 1;
		for (; old < m->nnews; old++)
			m->news[old].first = m->news[old].last = NEWS_NONE;
	}
	l = &m->news[t];
	e->news_prev = l->last;
	e->news_next = NEWS_NONE;
	if (l->last != NEWS_NONE)
		m->e[l->last].news_next = idx;
	else
		l->first = idx;
	l->last = idx;
	m->pending++;
}

void
member_table_hush(struct member *m)
{
	for (size_t t = 1; t < m->nnews; t++)
		for (uint32_t i = m->news[t].first; i != NEWS_NONE; i = m->e[i].news_next)
			m->e[i].transmits = 0;
	news_clear(m);
}

/* Positions changed (reap): the lists are linked again. */
static void
news_build(struct member *m)
{
	news_clear(m);
	for (size_t i = 0; i < m->n; i++) {
		unsigned t = m->e[i].transmits;

		m->e[i].transmits = 0;
		member_table_set_transmits(m, &m->e[i], t);
	}
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
	member_table_set_transmits(m, e, retransmits(m));
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

	member_table_state(m, e, s);
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

/* --- the probe order ----------------------------------------------------- */

/* The probe order is rebuilt when a pass ends: a random permutation of
 * the live members, so every member is probed once per pass (SWIM's
 * bound on detection time) in an order nobody can predict. */
void
member_table_order_rebuild(struct member *m)
{
	m->norder = 0;
	m->pos = 0;
	m->e[0].ordered = 0;
	for (size_t i = 1; i < m->n; i++) {
		m->e[i].ordered = (uint8_t)member_table_live(&m->e[i]);
		if (m->e[i].ordered)
			m->order[m->norder++] = i;
	}
	rng_shuffle(&m->rng, m->order, m->norder);
}

/* SWIM: a newcomer goes to a random place in the current pass; the one
 * there goes to the end, still in the pass. A record that died keeps its
 * place until the pass ends (probe_start skips it), so one that comes
 * back within the pass is already there: inserting it again would grow
 * the order past the table, one index per revival. */
static void
order_insert(struct member *m, size_t idx)
{
	size_t at;

	if (m->e[idx].ordered)
		return;
	m->e[idx].ordered = 1;
	at = m->pos + (size_t)rng_below(&m->rng, m->norder - m->pos + 1);
	m->order[m->norder++] = m->order[at];
	m->order[at] = idx;
}

/* --- adding, reaping, merging -------------------------------------------- */

/* Room for one more record: the array and the probe order grow by half,
 * the index to twice the array. Nothing changes unless all succeed but
 * the larger blocks, which are kept. */
static int
grow(struct member *m)
{
	size_t cap = m->cap + m->cap / 2, icap = m->index_cap;
	struct mentry *ne;
	size_t *no;
	uint32_t *ni;

	while (icap < 2 * cap)
		icap *= 2;
	if ((ne = realloc(m->e, cap * sizeof(*ne))) == NULL)
		return -ENOMEM;
	m->e = ne;
	if ((no = realloc(m->order, cap * sizeof(*no))) == NULL)
		return -ENOMEM;
	m->order = no;
	if (icap != m->index_cap) {
		if ((ni = calloc(icap, sizeof(*ni))) == NULL)
			return -ENOMEM;
		free(m->index);
		m->index = ni;
		m->index_cap = icap;
		index_build(m);
	}
	m->cap = cap;
	return 0;
}

static struct mentry *
add(struct member *m, const struct member_update *u, double now)
{
	struct mentry *e;
	char *addr;

	if ((m->n == m->cap && grow(m) < 0) || (addr = strdup(u->addr)) == NULL) {
		log_warn("member: no memory for member %s", u->addr);
		return NULL;
	}
	e = &m->e[m->n];
	memset(e, 0, sizeof(*e));
	e->addr = addr;
	e->id = u->id;
	e->inc = u->incarnation;
	e->state = u->state;
	e->since = now;
	e->last_contact = -1;
	e->rtt = -1;
	m->count[e->state]++;
	index_put(m, m->n++);
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

/* One pass that keeps the records in their order, then the index, the
 * news lists and the probe order are built again: positions moved. */
void
member_table_reap(struct member *m, double now)
{
	size_t i, k = 1;

	for (i = 1; i < m->n; i++) {
		struct mentry *e = &m->e[i];

		if (!member_table_live(e) && now - e->since > MEMBER_REAP_S) {
			m->count[e->state]--;
			free(e->addr);
			continue;
		}
		if (k != i)
			m->e[k] = *e;
		k++;
	}
	if (k == m->n)
		return;
	m->n = k;
	index_build(m);
	news_build(m);
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

/* Is u a join this peer is still spreading, heard back from another
 * member (member_table.h)? */
static int
echo(const struct mentry *e, const struct member_update *u)
{
	return e->transmits > 0 && e->state == MEMBER_ALIVE &&
	    u->state == MEMBER_ALIVE && u->incarnation == e->inc && u->id == e->id;
}

int
member_table_apply(struct member *m, const struct member_update *u, double now)
{
	struct mentry *self = &m->e[0], *e;
	enum member_state old;
	int was_live;

	m->c.updates_received++;
	if (strcmp(u->addr, self->addr) == 0) {
		if (m->leaving)
			return 0;
		if (u->state == MEMBER_ALIVE && u->id == self->id)
			return 0;
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
		return 0;
	}
	if ((e = member_table_find(m, u->addr)) == NULL)
		return add(m, u, now) != NULL;
	if (!newer(e, u)) {
		if (echo(e, u))
			member_table_set_transmits(m, e, e->transmits - 1u);
		return 0;
	}
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
	return 0;
}

/* --- the consistency check ----------------------------------------------- */

static int
check_index(const struct member *m, struct errbuf *err)
{
	size_t used = 0;

	if (m->index_cap < 2 * m->cap || (m->index_cap & (m->index_cap - 1)) != 0)
		return errbuf_set(err, -EINVAL, "index of %zu slots for %zu records",
		    m->index_cap, m->cap);
	for (size_t h = 0; h < m->index_cap; h++) {
		if (m->index[h] > m->n)
			return errbuf_set(err, -EINVAL, "index slot %zu names record %u of %zu",
			    h, m->index[h] - 1, m->n);
		used += m->index[h] != 0;
	}
	if (used != m->n)
		return errbuf_set(err, -EINVAL, "index holds %zu records of %zu", used, m->n);
	/* Each record found at its own place: reachable, and no address twice. */
	for (size_t i = 0; i < m->n; i++)
		if (member_table_find((struct member *)m, m->e[i].addr) != &m->e[i])
			return errbuf_set(err, -EINVAL, "index does not find record %zu (%s)",
			    i, m->e[i].addr);
	return 0;
}

static int
check_counts(const struct member *m, struct errbuf *err)
{
	unsigned count[MEMBER_LEFT + 1] = { 0 };
	size_t pending = 0, listed = 0;

	for (size_t i = 0; i < m->n; i++) {
		if (m->e[i].state > MEMBER_LEFT)
			return errbuf_set(err, -EINVAL, "record %zu in state %u", i, m->e[i].state);
		count[m->e[i].state]++;
		pending += m->e[i].transmits > 0;
	}
	for (unsigned s = 0; s <= MEMBER_LEFT; s++)
		if (count[s] != m->count[s])
			return errbuf_set(err, -EINVAL, "%u records %s, counted %u", count[s],
			    member_state_name(s), m->count[s]);
	for (size_t t = 0; t < m->nnews; t++) {
		uint32_t prev = NEWS_NONE;

		for (uint32_t i = m->news[t].first; i != NEWS_NONE; i = m->e[i].news_next) {
			/* a cycle would go on past the records */
			if (i >= m->n || m->e[i].transmits != t || t == 0 ||
			    m->e[i].news_prev != prev || ++listed > m->n)
				return errbuf_set(err, -EINVAL, "news list %zu: record %u "
				    "out of place", t, i);
			prev = i;
		}
		if (m->news[t].last != prev)
			return errbuf_set(err, -EINVAL, "news list %zu ends at %u, not %u",
			    t, m->news[t].last, prev);
	}
	if (listed != pending || pending != m->pending)
		return errbuf_set(err, -EINVAL, "%zu records with news, %zu listed, %zu counted",
		    pending, listed, m->pending);
	return 0;
}

static int
check_order(const struct member *m, struct errbuf *err)
{
	size_t flagged = 0;
	uint8_t *seen;
	int rc = 0;

	if (m->norder >= m->n || m->pos > m->norder)
		return errbuf_set(err, -EINVAL, "probe order holds %zu entries (pos %zu) for %zu others",
		    m->norder, m->pos, m->n - 1);
	for (size_t i = 0; i < m->n; i++)
		flagged += m->e[i].ordered;
	if (flagged != m->norder)
		return errbuf_set(err, -EINVAL, "%zu records marked in the probe order of %zu",
		    flagged, m->norder);
	if ((seen = calloc(m->n, 1)) == NULL)
		return errbuf_set(err, -ENOMEM, "no memory to check the probe order");
	for (size_t i = 0; i < m->norder && rc == 0; i++) {
		size_t k = m->order[i];

		if (k == 0 || k >= m->n)
			rc = errbuf_set(err, -EINVAL, "probe order entry %zu is %zu, outside 1..%zu",
			    i, k, m->n - 1);
		else if (seen[k]++ || !m->e[k].ordered)
			rc = errbuf_set(err, -EINVAL, "probe order holds %zu twice or unmarked", k);
	}
	free(seen);
	return rc;
}

int
member_table_check(const struct member *m, struct errbuf *err)
{
	int rc;

	if ((rc = check_order(m, err)) < 0 || (rc = check_index(m, err)) < 0 ||
	    (rc = check_counts(m, err)) < 0)
		return rc;
	return 0;
}
