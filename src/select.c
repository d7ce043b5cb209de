/*
 * select: see select.h. Links live in a small array searched linearly:
 * jobs have tens of peers, and a pick happens every few training steps.
 */
#include "select.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "util.h"

/* Weight of a new sample in the EWMAs. */
#define SELECT_ALPHA 0.3
#define SELECT_BACKOFF_MIN 0.5
#define SELECT_BACKOFF_MAX 30.0
/* Offences: the first shuns for SELECT_SHUN_MIN s, each one more while
 * the penalty has not decayed doubles it, up to SELECT_SHUN_MAX. */
#define SELECT_SHUN_MIN 2.0
#define SELECT_SHUN_MAX 120.0
#define SELECT_PENALTY_HALFLIFE 60.0

struct select {
	struct select_params p;
	struct select_link *links;
	size_t n, cap;
	uint64_t picks, none_eligible;
	size_t last_candidates;
	const char **cand;       /* scratch for select_pick */
	size_t cand_cap;
};

const char *
select_policy_name(enum select_policy p)
{
	return p == SELECT_ADAPTIVE ? "adaptive" : "random";
}

int
select_new(const struct select_params *p, struct select **out)
{
	struct select *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return -ENOMEM;
	s->p = *p;
	*out = s;
	return 0;
}

void
select_free(struct select *s)
{
	if (s == NULL)
		return;
	free(s->links);
	free(s->cand);
	free(s);
}

void
select_set_params(struct select *s, const struct select_params *p)
{
	s->p = *p;
}

static struct select_link *
select_find(const struct select *s, const char *addr)
{
	for (size_t i = 0; i < s->n; i++) {
		if (strcmp(s->links[i].addr, addr) == 0)
			return &s->links[i];
	}
	return NULL;
}

static struct select_link *
select_get(struct select *s, const char *addr)
{
	struct select_link *l = select_find(s, addr);

	if (l != NULL)
		return l;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		struct select_link *nl = realloc(s->links, cap * sizeof(*nl));

		if (nl == NULL)
			return NULL;
		s->links = nl;
		s->cap = cap;
	}
	l = &s->links[s->n++];
	memset(l, 0, sizeof(*l));
	snprintf(l->addr, sizeof(l->addr), "%s", addr);
	l->bandwidth = -1;
	l->rtt = -1;
	l->last_used = -1;
	return l;
}

const struct select_link *
select_link(const struct select *s, const char *addr)
{
	return select_find(s, addr);
}

const char *
select_pick(struct select *s, double now, const char *const *addrs, size_t n,
    const char *exclude)
{
	double max_bw = 0;
	size_t nc = 0;

	if (n > s->cand_cap) {
		const char **c = realloc(s->cand, n * sizeof(*c));

		if (c == NULL)
			return NULL;
		s->cand = c;
		s->cand_cap = n;
	}
	for (size_t i = 0; i < n; i++) {
		const struct select_link *l = select_find(s, addrs[i]);

		if (l != NULL && l->bandwidth > max_bw)
			max_bw = l->bandwidth;
	}
	for (size_t i = 0; i < n; i++) {
		const struct select_link *l = select_find(s, addrs[i]);

		if (exclude != NULL && strcmp(addrs[i], exclude) == 0)
			continue;
		if (l != NULL && ((l->failures > 0 && now < l->retry_at) ||
		    now < l->shun_until))
			continue;
		if (s->p.policy == SELECT_ADAPTIVE && l != NULL && l->bandwidth >= 0 &&
		    l->bandwidth < max_bw / s->p.bw_ratio &&
		    now - l->last_used < s->p.stale_after)
			continue;
		s->cand[nc++] = addrs[i];
	}
	s->last_candidates = nc;
	if (nc == 0) {
		s->none_eligible++;
		return NULL;
	}
	{
		const char *pick = s->cand[randombytes_uniform((uint32_t)nc)];
		struct select_link *l = select_get(s, pick);

		if (l != NULL) {
			l->selected++;
			l->last_used = now;
		}
		s->picks++;
		return pick;
	}
}

void
select_record(struct select *s, const char *addr, double now, size_t bytes, double seconds,
    int ok)
{
	struct select_link *l = select_get(s, addr);
	double bw, backoff;

	if (l == NULL)
		return;
	l->last_used = now;
	if (!ok) {
		l->failures++;
		backoff = SELECT_BACKOFF_MIN * pow(2.0, (double)(l->failures - 1));
		l->retry_at = now + (backoff > SELECT_BACKOFF_MAX ? SELECT_BACKOFF_MAX : backoff);
		return;
	}
	l->failures = 0;
	l->exchanges++;
	if (seconds <= 0)
		return;
	bw = (double)bytes / seconds;
	l->bandwidth = l->bandwidth < 0 ? bw : l->bandwidth + SELECT_ALPHA * (bw - l->bandwidth);
	l->rtt = l->rtt < 0 ? seconds : l->rtt + SELECT_ALPHA * (seconds - l->rtt);
}

void
select_note_refusal(struct select *s, const char *addr, unsigned reason)
{
	struct select_link *l = select_get(s, addr);

	if (l != NULL && reason < SELECT_REASONS)
		l->offences[reason]++;
}

void
select_offence(struct select *s, const char *addr, double now, unsigned reason)
{
	struct select_link *l = select_get(s, addr);
	double shun;

	if (l == NULL || reason >= SELECT_REASONS)
		return;
	l->offences[reason]++;
	if (l->penalty > 0)
		l->penalty *= pow(0.5, (now - l->penalty_at) / SELECT_PENALTY_HALFLIFE);
	l->penalty += 1;
	l->penalty_at = now;
	shun = SELECT_SHUN_MIN * pow(2.0, l->penalty - 1);
	l->shun_until = now + (shun > SELECT_SHUN_MAX ? SELECT_SHUN_MAX : shun);
}

int
select_stats_json(const struct select *s, json_t *obj)
{
	return json_object_set_new(obj, "select", json_pack("{s:s, s:f, s:f, s:I, s:I, s:I}",
	    "policy", select_policy_name(s->p.policy), "bw_ratio", s->p.bw_ratio,
	    "stale_after", s->p.stale_after, "picks", (json_int_t)s->picks,
	    "none_eligible", (json_int_t)s->none_eligible,
	    "candidates_last", (json_int_t)s->last_candidates));
}
