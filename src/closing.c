/*
 * closing: see closing.h. The rules are checked in a fixed order, so that
 * a phase that meets two at once gives the same reason on every peer:
 * distance first (the one the phase is for), then the budget, then
 * alone, then the timeout.
 */
#include "closing.h"
#include "util.h"

#include <math.h>
#include <string.h>

static const char *const closing_reason_names[] = {
	[CLOSING_DISTANCE] = "distance", [CLOSING_BUDGET] = "budget",
	[CLOSING_TIMEOUT] = "timeout", [CLOSING_ALONE] = "alone",
	[CLOSING_LEAVE] = "leave", [CLOSING_NONE] = "none",
};

const char *
closing_reason_name(enum closing_reason r)
{
	return r <= CLOSING_NONE ? closing_reason_names[r] : "unknown";
}

void
closing_begin(struct closing *c, const struct closing_params *p, double now, double wall,
    uint64_t bytes_sent)
{
	memset(c, 0, sizeof(*c));
	c->p = *p;
	c->active = 1;
	c->reason = CLOSING_NONE;
	c->distance = -1;
	c->started = now;
	c->started_wall = wall;
	c->bytes0 = bytes_sent;
}

void
closing_exchange(struct closing *c, int ok, double relative_distance, int training)
{
	if (!ok) {
		c->failed++;
		return;
	}
	c->exchanges++;
	if (training)
		c->recent[c->measured++ % CLOSING_WINDOW] = INFINITY;
	else if (relative_distance >= 0)
		c->recent[c->measured++ % CLOSING_WINDOW] = relative_distance;
}

double
closing_distance(const struct closing *c, size_t live_peers)
{
	uint64_t window = live_peers > CLOSING_SAMPLES ? live_peers : CLOSING_SAMPLES;
	double worst = 0;

	if (window > CLOSING_WINDOW)
		window = CLOSING_WINDOW;
	if (c->measured < window)
		return -1;
	for (uint64_t i = c->measured - window; i < c->measured; i++)
		worst = fmax(worst, c->recent[i % CLOSING_WINDOW]);
	return worst;
}

size_t
closing_next_partner(struct closing *c, size_t n)
{
	return (size_t)(c->turn++ % n);
}

enum closing_reason
closing_check(struct closing *c, double now, uint64_t bytes_sent, size_t live_peers)
{
	c->bytes = bytes_sent - c->bytes0;
	c->distance = closing_distance(c, live_peers);
	if (c->distance >= 0 && c->distance <= c->p.distance)
		return CLOSING_DISTANCE;
	if (c->bytes >= c->p.budget_bytes)
		return CLOSING_BUDGET;
	if (live_peers == 0)
		return CLOSING_ALONE;
	if (now >= closing_deadline(c))
		return CLOSING_TIMEOUT;
	return CLOSING_NONE;
}

double
closing_deadline(const struct closing *c)
{
	return c->started + c->p.timeout;
}

void
closing_end(struct closing *c, double now, uint64_t bytes_sent, enum closing_reason why)
{
	c->bytes = bytes_sent - c->bytes0;
	c->active = 0;
	c->ended = 1;
	c->reason = why;
	c->ended_at = now;
}

json_t *
closing_json(const struct closing *c, double now)
{
	json_t *o;

	if (!c->active && !c->ended)
		return NULL;
	o = json_pack("{s:I, s:I, s:I, s:I, s:f, s:f, s:o}",
	    "exchanges", (json_int_t)c->exchanges, "failed", (json_int_t)c->failed,
	    "bytes", (json_int_t)c->bytes, "budget_bytes", (json_int_t)c->p.budget_bytes,
	    "started_at", c->started_wall,
	    "seconds", (c->active ? now : c->ended_at) - c->started,
	    "distance", c->distance < 0 ? json_null() : util_json_real(c->distance));
	if (o != NULL && c->ended)
		json_object_set_new(o, "reason", json_string(closing_reason_name(c->reason)));
	return o;
}
