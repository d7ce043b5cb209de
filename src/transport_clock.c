/*
 * transport_clock: see transport_clock.h.
 */
#include "transport_clock.h"
#include "util.h"

void
tclock_init(struct tclock *c, uv_loop_t *loop, unsigned timeout_ms,
    uint64_t min_rate, void *data)
{
	uv_timer_init(loop, &c->tick);
	c->tick.data = data;
	c->timeout_ms = timeout_ms;
	c->min_rate = min_rate;
}

void
tclock_arm(struct tclock *c, uv_timer_cb cb, uint64_t first_ms)
{
	if (first_ms == 0 || !uv_is_active((uv_handle_t *)&c->tick)) {
		c->tick_due = util_now() + first_ms / 1000.0;
		uv_timer_start(&c->tick, cb, first_ms, TCLOCK_TICK_MS);
	}
}

double
tclock_tick(struct tclock *c)
{
	double now = util_now(), late = now - c->tick_due;

	if (late > TCLOCK_TICK_MS / 1000.0)
		c->stalled += late;
	c->tick_due = now + TCLOCK_TICK_MS / 1000.0;
	return tclock_now(c);
}

double
tclock_now(const struct tclock *c)
{
	return util_now() - c->stalled;
}

double
tclock_deadline(const struct tclock *c, double start, double progress,
    size_t len)
{
	return (start > progress ? start : progress) + c->timeout_ms / 1000.0 +
	    (double)len / (double)c->min_rate;
}
