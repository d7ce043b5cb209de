/*
 * trust: see trust.h. The table is a flat array searched by address: it
 * holds at most TRUST_CAP members, and an exchange, which moves a slice
 * of the model, costs far more than a scan of it.
 */
#include "trust.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define TRUST_CAP 256
/* Members whose latest slice is older than this (seconds) have no vote on
 * the radius: their distance describes a model that has moved since. */
#define TRUST_FRESH 60.0
/* Votes the median needs before it is trusted: with fewer, one bad
 * member would be half of them. */
#define TRUST_QUORUM 3
/* A vote cast at step s has lapsed once this peer's step passes
 * TRUST_VOTE_SPAN x s, and counts at no less than the newer votes' median
 * (trust.h: models walk apart over a fresh job's first steps, and older
 * votes measured less of it). */
#define TRUST_VOTE_SPAN 2
/* A slice whose sender's step and this peer's differ by more than 1 /
 * TRUST_STAGGER_GAP of the larger may lie where a start seconds apart
 * puts it (trust.h), for TRUST_STAGGER seconds after its sender's first:
 * within this peer's way, or the sender's where it came farther, up to
 * TRUST_STAGGER_AHEAD times this peer's. A zeroed model lies at the
 * weights' magnitude, several times the way of a job's first steps
 * (tests/robust.sh: 2.4-7x). Behind, it must have come a quarter of the
 * way its steps give (lo / hi of this peer's) at least: a stale model
 * comes none (ratios 0.01-0.04), and a late starter honestly 0.19 at
 * steps 10 to 24. */
#define TRUST_STAGGER_GAP 4
#define TRUST_STAGGER 30.0
#define TRUST_STAGGER_AHEAD 2.0
/* Weight of a new slice in the suspicion EWMA: a member that sends only
 * bad slices is suspect after three, one good slice in four keeps an
 * honest member well below TRUST_SUSPECT. */
#define TRUST_ALPHA 0.25
/* A slice's way (trust.h) is judged when this peer has come at least
 * rms / TRUST_WAY_GATE from its origin: a joiner that has just pulled has
 * come nowhere, and every honest slice would look stale to it. A stale
 * slice lies rms = way off, a negated one about 2 way. */
#define TRUST_WAY_GATE 4.0
/* Badness of a way: 0 at a ratio of TRUST_RATIO_OK and above, 1 at
 * TRUST_RATIO_BAD and below, and 0 at a cosine of TRUST_COS_OK and above,
 * 1 at TRUST_COS_BAD and below. Measured (gossipd(8) FAULTS): honest
 * members' least ratio and cosine 0.64 and 0.59 on iid shards, 0.24 and
 * 0.27 on skewed ones (tests/closing.sh); a stale model's ratio 0.01 to
 * 0.04 (int8's rounding), a negated one's cosine -0.43 or less in 95% of
 * its slices. */
#define TRUST_RATIO_OK 0.3
#define TRUST_RATIO_BAD 0.1
#define TRUST_COS_OK 0.0
#define TRUST_COS_BAD -0.3

struct trust {
	struct trust_params p;
	struct trust_member m[TRUST_CAP];
	size_t n;
	uint64_t step;            /* this peer's, as its latest slice told */
	uint64_t clipped;
	int frozen;               /* training over (trust_freeze): median holds */
	double median;            /* the votes' median then; < 0 no quorum */
};

int
trust_new(const struct trust_params *p, struct trust **out)
{
	struct trust *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return -ENOMEM;
	t->p = *p;
	*out = t;
	return 0;
}

void
trust_free(struct trust *t)
{
	free(t);
}

void
trust_set_params(struct trust *t, const struct trust_params *p)
{
	t->p = *p;
}

static struct trust_member *
trust_find(const struct trust *t, const char *addr)
{
	for (size_t i = 0; i < t->n; i++) {
		if (strcmp(t->m[i].addr, addr) == 0)
			return (struct trust_member *)&t->m[i];
	}
	return NULL;
}

/* addr's record, made on first sight; a full table gives up its least
 * suspicious record, the longest unseen among equals. */
static struct trust_member *
trust_get(struct trust *t, const char *addr, double now)
{
	struct trust_member *e = trust_find(t, addr);

	if (e != NULL)
		return e;
	if (t->n < TRUST_CAP) {
		e = &t->m[t->n++];
	} else {
		e = &t->m[0];
		for (size_t i = 1; i < t->n; i++) {
			const struct trust_member *c = &t->m[i];

			if (c->suspicion < e->suspicion ||
			    (c->suspicion == e->suspicion && c->seen < e->seen))
				e = &t->m[i];
		}
	}
	*e = (struct trust_member){ .distance = -1, .last_trained = -1, .seen = -1,
	    .first = now };
	snprintf(e->addr, sizeof(e->addr), "%s", addr);
	return e;
}

static int
trust_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of v[0..k), sorted in place. */
static double
trust_median_of(double *v, size_t k)
{
	qsort(v, k, sizeof(*v), trust_cmp);
	return k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
}

/* Has e a vote at now (a distance heard within TRUST_FRESH)? */
static int
trust_voting(const struct trust_member *e, double now)
{
	return e->distance >= 0 && now - e->seen <= TRUST_FRESH;
}

/* Was e's vote cast before this peer's step was half what it is now? */
static int
trust_lapsed(const struct trust *t, const struct trust_member *e)
{
	return e->voted_at < t->step / TRUST_VOTE_SPAN;
}

/* The median of the fresh votes at now; < 0 without a quorum. A lapsed
 * vote counts at no less than the median of the others (trust.h). */
static double
trust_median(const struct trust *t, double now)
{
	double v[TRUST_CAP], cur = -1;
	size_t k = 0, lapsed = 0;

	for (size_t i = 0; i < t->n; i++) {
		const struct trust_member *e = &t->m[i];

		if (trust_voting(e, now) && !trust_lapsed(t, e))
			v[k++] = e->distance;
	}
	if (k > 0)
		cur = trust_median_of(v, k);
	for (size_t i = 0; i < t->n; i++) {
		const struct trust_member *e = &t->m[i];

		if (trust_voting(e, now) && trust_lapsed(t, e)) {
			v[k++] = fmax(e->distance, cur);
			lapsed++;
		}
	}
	if (k < TRUST_QUORUM)
		return -1;
	return lapsed > 0 ? trust_median_of(v, k) : cur;
}

double
trust_radius(const struct trust *t, double now)
{
	double median;

	if (t->p.factor <= 0)
		return -1;
	median = t->frozen ? t->median : trust_median(t, now);
	return median < 0 ? -1 : t->p.factor * median;
}

double
trust_factor(const struct trust *t)
{
	return t->p.factor > 0 ? t->p.factor : 0;
}

void
trust_freeze(struct trust *t, double now)
{
	if (t == NULL || t->frozen)
		return;
	t->median = trust_median(t, now);
	t->frozen = 1;
}

static int
trust_note(struct trust_member *e, double badness)
{
	e->suspicion += TRUST_ALPHA * (badness - e->suspicion);
	return e->suspicion >= TRUST_SUSPECT;
}

/* The badness of slice s's distance (trust.h); < 0 without a quorum,
 * when there is no median to judge it by. Squared: an honest member's
 * spread above the median costs little (1.5x the median at factor 2:
 * 0.25), the radius all. */
static double
trust_far(const struct trust *t, const struct trust_slice *s)
{
	double median;

	if (s->radius <= 0)
		return -1;
	median = s->radius / t->p.factor;
	return s->rms <= median ? 0 : s->rms >= s->radius ? 1 :
	    pow((s->rms / median - 1) / (t->p.factor - 1), 2);
}

/* 0 at ok, 1 at bad, linear between (bad < ok). */
static double
trust_ramp(double x, double ok, double bad)
{
	return x >= ok ? 0 : x <= bad ? 1 : (ok - x) / (ok - bad);
}

/* May slice s from e lie where a start seconds apart puts it (trust.h)? */
static int
trust_staggered(const struct trust_member *e, double now, const struct trust_slice *s)
{
	uint64_t lo = s->step < s->own_step ? s->step : s->own_step;
	uint64_t hi = s->step < s->own_step ? s->own_step : s->step;

	return now - e->first < TRUST_STAGGER && hi - lo > hi / TRUST_STAGGER_GAP &&
	    s->way > 0 && s->rms <= s->way * fmin(TRUST_STAGGER_AHEAD, fmax(1, s->ratio)) &&
	    s->ratio * (double)hi * TRUST_STAGGER_GAP >= (double)lo;
}

/* The badness of slice s's way (trust.h): < 0 when it is not judged. */
static double
trust_behind(const struct trust_slice *s)
{
	if (!(s->way > 0) || s->way * TRUST_WAY_GATE < s->rms)
		return -1;
	return fmax(trust_ramp(s->ratio, TRUST_RATIO_OK, TRUST_RATIO_BAD),
	    trust_ramp(s->cos, TRUST_COS_OK, TRUST_COS_BAD));
}

int
trust_observe(struct trust *t, const char *addr, double now, const struct trust_slice *s)
{
	struct trust_member *e;
	double bad, behind;

	if (t->p.factor <= 0)
		return 0;
	e = trust_get(t, addr, now);
	if (!s->trained)
		e->last_trained = s->rms;
	e->distance = fmax(s->rms, e->last_trained);
	e->seen = now;
	e->voted_at = s->own_step;
	if (s->own_step > t->step)
		t->step = s->own_step;
	e->slices++;
	if (s->radius > 0 && s->rms > s->radius) {
		e->clipped++;
		t->clipped++;
	}
	if (trust_staggered(e, now, s))
		return e->suspicion >= TRUST_SUSPECT;
	behind = trust_behind(s);
	if (behind >= 0.5)
		e->behind++;
	bad = fmax(trust_far(t, s), behind);
	return bad < 0 ? e->suspicion >= TRUST_SUSPECT : trust_note(e, bad);
}

void
trust_refused(struct trust *t, const char *addr, double now)
{
	struct trust_member *e;

	if (t->p.factor <= 0)
		return;
	e = trust_get(t, addr, now);
	e->seen = now;
	e->refused++;
	trust_note(e, 1);
}

double
trust_weight(const struct trust *t, const char *addr)
{
	const struct trust_member *e = trust_find(t, addr);

	if (t->p.factor <= 0 || e == NULL)
		return 1;
	return fmax(0, 1 - e->suspicion / TRUST_SUSPECT);
}

int
trust_suspect(const struct trust *t, const char *addr)
{
	const struct trust_member *e = trust_find(t, addr);

	return t->p.factor > 0 && e != NULL && e->suspicion >= TRUST_SUSPECT;
}

const struct trust_member *
trust_member(const struct trust *t, const char *addr)
{
	return trust_find(t, addr);
}

int
trust_suspects_text(const struct trust *t, char *buf, size_t size)
{
	size_t used = 0;
	int n = 0, w;

	buf[0] = '\0';
	if (t->p.factor <= 0)
		return -1;
	for (size_t i = 0; i < t->n; i++) {
		const struct trust_member *e = &t->m[i];

		if (e->suspicion < TRUST_SUSPECT)
			continue;
		w = used < size ? snprintf(buf + used, size - used,
		    "%s%s suspicion %.2f (%" PRIu64 " slices, %" PRIu64 " clipped, %" PRIu64
		    " behind, %" PRIu64 " refused)", n > 0 ? "; " : "", e->addr, e->suspicion,
		    e->slices, e->clipped, e->behind, e->refused) : 0;
		n++;
		used += w > 0 ? (size_t)w : 0;
	}
	if (used >= size && size >= 4)
		memcpy(buf + size - 4, "...", 4);
	return n;
}

int
trust_stats_json(const struct trust *t, double now, json_t *obj)
{
	double radius = trust_radius(t, now);
	json_int_t suspects = 0;
	json_t *o;

	for (size_t i = 0; i < t->n; i++)
		suspects += t->p.factor > 0 && t->m[i].suspicion >= TRUST_SUSPECT;
	o = json_pack("{s:f, s:o, s:I, s:I, s:I}", "factor", t->p.factor,
	    "radius", radius < 0 ? json_null() : util_json_real(radius),
	    "members", (json_int_t)t->n, "suspects", suspects, "clipped", (json_int_t)t->clipped);
	if (o == NULL)
		return -ENOMEM;
	return json_object_set_new(obj, "trust", o);
}
