/*
 * rounds: the exchange policy and the joiner's pull (rounds.h says what
 * each does). Every entry point may start or end an exchange, so each
 * ends by re-arming the one timer for the nearest exchange or pull
 * deadline (rounds_schedule); no deadline, no timer. The closing phase
 * has a timer of its own (close_timer) for its next exchange and its
 * timeout; its rules are closing.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "attach.h"
#include "closing.h"
#include "gossip.h"
#include "log.h"
#include "member.h"
#include "model.h"
#include "pace.h"
#include "pull.h"
#include "rounds.h"
#include "select.h"
#include "service.h"
#include "transport.h"

/* Partners tried in one round when each answers BUSY. */
#define ROUNDS_BUSY_RETRIES 2

_Static_assert(GOSSIP_REFUSE_N <= SELECT_REASONS, "select counts every gossip refusal");

static void rounds_timer(uv_timer_t *h);
static void rounds_close_timer(uv_timer_t *h);

/* The exchanges pace waited for are over: the trainer thread wakes, an
 * external trainer's held step reply goes out. */
static void
rounds_let_go(struct daemon *d)
{
	pace_release(d->pace);
	attach_resume(d->attach);
}

/* Arm the timer for the nearest exchange or pull deadline. */
static void
rounds_schedule(struct daemon *d)
{
	double now = util_now(), next = -1, t;

	if (d->gossip == NULL || d->stopping)
		return;
	next = gossip_tick(d->gossip, now);
	if (d->pull != NULL && (t = pull_tick(d->pull, now)) >= 0 &&
	    (next < 0 || t < next))
		next = t;
	if (next < 0) {
		uv_timer_stop(&d->gossip_timer);
		return;
	}
	util_timer_at(&d->gossip_timer, rounds_timer, next, now);
}

/* Live members other than this peer, into d->addrs; returns how many. */
static size_t
rounds_live_peers(struct daemon *d)
{
	size_t n = member_list(d->member, NULL, 0), k = 0;

	if (n > d->info_cap) {
		free(d->info);
		free(d->addrs);
		d->info_cap = 2 * n;
		d->info = xcalloc(d->info_cap, sizeof(*d->info));
		d->addrs = xcalloc(d->info_cap, sizeof(*d->addrs));
	}
	n = member_list(d->member, d->info, d->info_cap);
	for (size_t i = 0; i < n && i < d->info_cap; i++) {
		if (!d->info[i].self && d->info[i].state == MEMBER_ALIVE)
			d->addrs[k++] = d->info[i].addr;
	}
	return k;
}

static uint64_t
rounds_step_now(void *arg)
{
	struct train_progress p;

	daemon_progress(arg, &p);
	return p.step;
}

/* The density of the next exchange (train_density_at). An attached
 * process has no step budget the daemon knows: its peer mixes at density
 * throughout. */
static double
rounds_density(struct daemon *d)
{
	struct train_progress p;

	if (d->trainer == NULL)
		return d->cfg.density;
	daemon_progress(d, &p);
	return train_density_at(&d->cfg, p.step, p.total_steps);
}

static void
rounds_gossip_params(struct daemon *d, struct gossip_params *gp)
{
	const struct config *c = &d->cfg;

	*gp = (struct gossip_params){ c->mode, c->values, rounds_density(d), (size_t)c->mask_block,
	    c->seed, c->exchange_timeout };
	if (d->closing.active) {
		gp->mode = gossip_mode_row(gp->mode)->closes_as;
		gp->density = c->close_density;
	}
}

static void
rounds_params(struct daemon *d, struct gossip_params *gp, struct select_params *sp)
{
	const struct config *c = &d->cfg;

	rounds_gossip_params(d, gp);
	*sp = (struct select_params){ c->select, c->bw_ratio, c->stale_after };
}

/* One exchange with a partner chosen by the select policy. With lag, the
 * round holds the trainer from lag rounds after its first step until the
 * exchange ends, BUSY retries included; a round that starts nothing
 * releases it at once. */
static void
rounds_start(struct daemon *d, const char *exclude)
{
	double now = util_now();
	struct gossip_params gp;
	const char *partner;
	size_t n;
	int rc;

	if (d->gossip == NULL || d->leaving || d->stopping || gossip_active(d->gossip))
		return;
	n = rounds_live_peers(d);
	/* the density may follow the step budget (rounds_density) */
	rounds_gossip_params(d, &gp);
	gossip_set_params(d->gossip, &gp);
	partner = select_pick(d->select, now, d->addrs, n, exclude);
	/* -EDOM: our own values are not finite; the partner is not to blame. */
	if (partner != NULL && (rc = gossip_start(d->gossip, now, partner)) < 0 && rc != -EDOM)
		select_record(d->select, partner, now, 0, 0, 0);
	if (gossip_active(d->gossip) && d->cfg.lag > 0)
		pace_hold(d->pace, d->round_step +
		    (uint64_t)d->cfg.lag * (uint64_t)d->cfg.interval);
	else
		rounds_let_go(d);
	rounds_schedule(d);
}

/* Start a round if `interval` steps have passed since the last one began.
 * The trainer waits for it only with lag (daemon_notify_step). */
void
rounds_on_step(struct daemon *d)
{
	uint64_t step;

	if (d->gossip == NULL || (d->trainer == NULL && d->attach == NULL) ||
	    gossip_active(d->gossip))
		return;
	step = rounds_step_now(d);
	if (step < d->round_step + (uint64_t)d->cfg.interval)
		return;
	d->round_step = step;
	d->busy_retries = 0;
	rounds_start(d, NULL);
}

/* The closing phase ends when a rule of closing_check says so; 1 if it
 * ended. */
static int
rounds_close_over(struct daemon *d, double now, size_t n)
{
	enum closing_reason why;

	why = closing_check(&d->closing, now, transport_bytes_sent(d->transport), n);
	if (why == CLOSING_NONE)
		return 0;
	daemon_end_closing(d, why);
	return 1;
}

/* The closing phase: end it if a rule says so, else start its next
 * exchange; the timer comes back after a pause when it did not start, or
 * at the phase's timeout while it runs (its end re-arms it sooner). */
static void
rounds_close_next(struct daemon *d)
{
	double now = util_now(), at;
	const char *partner;
	size_t n;
	int rc;

	if (!d->closing.active || d->stopping || gossip_active(d->gossip))
		return;
	n = rounds_live_peers(d);
	if (rounds_close_over(d, now, n))
		return;
	/* Every live member in turn rather than select's fastest: the phase
	 * is to agree with all of them (closing.h). */
	partner = d->addrs[closing_next_partner(&d->closing, n)];
	gossip_restart_relative_distance(d->gossip);
	rc = gossip_start(d->gossip, now, partner);
	if (rc < 0 && rc != -EDOM)
		select_record(d->select, partner, now, 0, 0, 0);
	if (rc < 0)
		closing_exchange(&d->closing, 0, -1, 0);
	at = gossip_active(d->gossip) ? closing_deadline(&d->closing) : now + CLOSING_PAUSE_S;
	util_timer_at(&d->close_timer, rounds_close_timer, at, now);
	rounds_schedule(d);
}

static void
rounds_close_timer(uv_timer_t *h)
{
	rounds_close_next(h->data);
}

int
rounds_close_begin(struct daemon *d)
{
	const struct config *c = &d->cfg;
	struct closing_params cp;
	struct timespec wall;

	if (d->gossip == NULL || d->trainer == NULL || c->close_budget <= 0 || d->leaving ||
	    d->stopping)
		return 0;
	/* in model sizes at the configured value format */
	cp.budget_bytes = (uint64_t)(c->close_budget *
	    (double)gossip_values_bytes(c->values, d->model->d));
	cp.distance = c->close_distance;
	cp.timeout = c->close_timeout;
	clock_gettime(CLOCK_REALTIME, &wall);
	closing_begin(&d->closing, &cp, util_now(),
	    (double)wall.tv_sec + (double)wall.tv_nsec * 1e-9, transport_bytes_sent(d->transport));
	rounds_apply_params(d);
	log_info("closing: exchanging back to back (density %g) until partners are within %g, "
	    "%.2f MB are sent or %g s pass",
	    gossip_mode_density(gossip_mode_row(c->mode)->closes_as, c->close_density),
	    c->close_distance, (double)cp.budget_bytes / 1e6, c->close_timeout);
	service_status("closing: exchanging with the job's members before leaving");
	rounds_close_next(d);
	return 1;
}

/* A closing exchange ended: the next one at once, or after a pause when
 * the partner was busy or failed. One that ends after the phase (a leave
 * cut it short) only feeds selection. */
static void
rounds_close_done(struct daemon *d, double now, enum gossip_result r)
{
	int training;

	if (!d->closing.active)
		return;
	training = r == GOSSIP_OK && gossip_partner_step(d->gossip) < rounds_step_now(d);
	closing_exchange(&d->closing, r == GOSSIP_OK,
	    r == GOSSIP_OK ? gossip_relative_distance(d->gossip) : -1, training);
	util_timer_at(&d->close_timer, rounds_close_timer, now + (r != GOSSIP_OK ?
	    CLOSING_PAUSE_S : training ? CLOSING_TRAINING_PAUSE_S : 0), now);
}

static void
rounds_done(void *arg, const char *addr, double now, enum gossip_result r,
    size_t bytes, double seconds)
{
	struct daemon *d = arg;

	/* BUSY says nothing about the link: neither a sample nor a failure. */
	if (r != GOSSIP_BUSY)
		select_record(d->select, addr, now, bytes, seconds, r == GOSSIP_OK);
	if (d->closing.active || d->closing.ended) {
		rounds_close_done(d, now, r);
		return;
	}
	if (r == GOSSIP_BUSY && d->busy_retries++ < ROUNDS_BUSY_RETRIES) {
		rounds_start(d, addr);
		return;
	}
	rounds_let_go(d);
	/* Paced, the trainer is likely waiting at the next round's first
	 * step: start that round now rather than one step later. */
	if (d->cfg.lag > 0)
		rounds_on_step(d);
}

/* Values from addr were refused: selection avoids it for a while. */
static void
rounds_refused(void *arg, const char *addr, enum gossip_refusal why)
{
	struct daemon *d = arg;

	select_offence(d->select, addr, util_now(), (unsigned)why);
}

/* A joiner starts training once it holds the job's model: the pull picks
 * donors among the live members it is shown. */
void
rounds_maybe_pull(struct daemon *d)
{
	size_t n = 0;

	/* An external trainer's vector exists once a process announced it. */
	if (!d->must_pull || d->leaving || d->stopping || d->member == NULL || d->pull == NULL ||
	    d->model->d == 0)
		return;
	if (member_joined(d->member))
		n = rounds_live_peers(d);
	pull_members(d->pull, util_now(), d->addrs, n);
	rounds_schedule(d);
}

/* The pulled model is in: train from it, at the donors' step. */
static int
rounds_pulled(void *arg, const float *params, uint64_t step, const char *donors)
{
	struct daemon *d = arg;
	int rc;

	if ((rc = model_restore(d->model, params, NULL)) < 0) {
		log_error("bootstrap: cannot load the pulled model: %s", strerror(-rc));
		return rc;
	}
	log_info("bootstrap: model pulled from %s; continuing from the donors' step %" PRIu64,
	    donors, step);
	d->must_pull = 0;
	daemon_start_training(d, step);
	return 0;
}

/* Messages of the two protocols rounds runs: gossip_proto's and
 * pull_proto's. Registered once both modules exist, which outlive the
 * transport; either may move a deadline. */
static void
rounds_recv(void *arg, uint64_t sender, const char *addr, uint8_t type,
    const uint8_t *payload, size_t len)
{
	struct daemon *d = arg;

	(void)sender;
	if (type >= pull_proto.first && type <= pull_proto.last)
		pull_recv(d->pull, util_now(), addr, type, payload, len);
	else
		gossip_recv(d->gossip, util_now(), addr, type, payload, len);
	/* Exchanges others start count against a closing peer's budget too:
	 * check it after each one, not only when an own exchange ends, or a
	 * peer that pauses (its partner still trains) or waits on a slow
	 * partner keeps serving past its budget. An own exchange in flight is
	 * left to finish; its end checks again. */
	if (d->closing.active && !d->stopping && !gossip_active(d->gossip))
		rounds_close_over(d, util_now(), rounds_live_peers(d));
	rounds_schedule(d);
}

void
rounds_peer_down(struct daemon *d, const char *addr)
{
	if (d->pull == NULL)
		return;
	pull_donor_down(d->pull, util_now(), addr);
	rounds_maybe_pull(d);
	rounds_schedule(d);
}

static void
rounds_timer(uv_timer_t *h)
{
	struct daemon *d = h->data;

	rounds_schedule(d);
	rounds_maybe_pull(d);
}

void
rounds_apply_params(struct daemon *d)
{
	struct gossip_params gp;
	struct select_params sp;

	if (d->gossip == NULL)
		return;
	rounds_params(d, &gp, &sp);
	gossip_set_params(d->gossip, &gp);
	select_set_params(d->select, &sp);
	pull_set_timeout(d->pull, d->cfg.exchange_timeout);
	if (d->cfg.lag == 0)
		rounds_let_go(d);
}

int
rounds_open(struct daemon *d, struct errbuf *err)
{
	struct gossip_ops ops = { daemon_send, rounds_done, rounds_step_now, rounds_refused, d };
	struct pull_ops pops = { daemon_send, rounds_step_now, rounds_pulled, d };
	struct gossip_params gp;
	struct select_params sp;
	int rc;

	rounds_params(d, &gp, &sp);
	if ((rc = gossip_new(&gp, d->model, &ops, &d->gossip)) < 0 ||
	    (rc = select_new(&sp, &d->select)) < 0 || (rc = pace_new(&d->pace)) < 0 ||
	    (rc = pull_new(d->model, d->cfg.exchange_timeout, d->must_pull, &pops,
	    &d->pull)) < 0)
		return errbuf_set(err, rc, "gossip: %s", strerror(-rc));
	/* An external trainer's model exists once a process or a checkpoint
	 * filled the vector (attach's ready hook says when). */
	gossip_set_ready(d->gossip, !d->must_pull && d->model->d > 0);
	if ((rc = transport_register(d->transport, &gossip_proto, rounds_recv, d, err)) < 0)
		return rc;
	return transport_register(d->transport, &pull_proto, rounds_recv, d, err);
}

void
rounds_free(struct daemon *d)
{
	pull_free(d->pull);
	gossip_free(d->gossip);
	select_free(d->select);
	pace_free(d->pace);
}
