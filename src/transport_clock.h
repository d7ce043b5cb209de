/*
 * transport_clock: the clock every deadline of the transport runs on and
 * the tick that checks them. It is util_now() less the time the loop
 * stood still (its own work, or the host's), seen as ticks coming late:
 * a peer is not to blame for that time, and what it sent meanwhile is
 * still waiting for the poll phase, which libuv runs after the timers, so
 * on the real clock the first tick after a stall would give up on peers
 * whose answers sit unread. Apart from the endpoint so that the framing,
 * whose bodies have deadlines too, reads the same clock without knowing
 * the endpoint.
 */
#ifndef GD_TRANSPORT_CLOCK_H
#define GD_TRANSPORT_CLOCK_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#define TCLOCK_TICK_MS	100

struct tclock {
	uv_timer_t		tick;	/* tick.data is the owner's */
	double			tick_due;	/* util_now() the tick is due at */
	double			stalled;	/* seconds the loop stood still */
	unsigned		timeout_ms;
	uint64_t		min_rate;	/* bytes a second */
};

void tclock_init(struct tclock *c, uv_loop_t *loop, unsigned timeout_ms,
    uint64_t min_rate, void *data);
/* Run cb every tick, the first in first_ms; a tick already running is
 * left as it is unless first_ms is 0. */
void tclock_arm(struct tclock *c, uv_timer_cb cb, uint64_t first_ms);
/* At each tick: count its lateness as the loop's stall; returns now. */
double tclock_tick(struct tclock *c);
double tclock_now(const struct tclock *c);
/*
 * When an operation started at start on len bytes runs out of time: the
 * timeout plus len at min_rate, counted from the later of start
 * and the peer's last progress, so a long backlog to a live peer is fine
 * while a silent one is given up after one timeout.
 */
double tclock_deadline(const struct tclock *c, double start, double progress,
    size_t len);

#endif
