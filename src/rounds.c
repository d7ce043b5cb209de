/*
 * rounds: the exchange policy and the joiner's pull (rounds.h says what
 * each does). Every entry point may start or end an exchange, so each
 * ends by asking the owner for the nearest deadline (rounds_schedule):
 * gossip's and pull's, and the closing phase's next exchange or timeout;
 * the closing phase's rules are closing.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gossip.h"
#include "gossip_mode.h"
#include "log.h"
#include "pace.h"
#include "pull.h"
#include "outer.h"
#include "rounds.h"
#include "share.h"
#include "train.h"
#include "trust.h"

_Static_assert(GOSSIP_REFUSE_N <= SELECT_REASONS, "select counts every gossip refusal");

/* A set of member addresses, searched end to end: one round sends n - 1
 * shares of a density of the model each, beside which n comparisons of
 * addresses are nothing. */
struct rounds_addrs {
	char (*a)[WIRE_ADDR_MAX + 1];
	size_t n, cap;
};

struct rounds {
	const struct config *cfg;
	struct model *m;
	struct rounds_ops ops;
	struct gossip *gossip;
	struct select *select;
	struct pull *pull;
	struct pace *pace;
	struct outer *outer;      /* the outer step, when cfg enables it */
	struct trust *trust;      /* what gossip received, per member (trust.h) */
	struct share *share;      /* mode share's state (share.h) */
	struct trust *share_trust; /* the shares' sizes, per member */
	int share_wait;           /* a fresh job's first share waits (rounds_share_waits) */
	double share_wait_from;   /* when its first round came; < 0: not yet */
	/* share_sync: the members whose shares came since the last round's
	 * wait ended, those whose came in the round before (the ones waited
	 * for), when it ended, and until when the trainer is held (< 0: not
	 * held) */
	struct rounds_addrs shared, sharers;
	double share_went, share_until;
	uint64_t outer_step;      /* step of the last outer step */
	struct closing closing;
	double close_at;          /* the closing phase's next move; < 0: none */
	uint64_t round_step;      /* step at which the last round began */
	/* rounds_catch_up: armed, the partners that told their steps, and
	 * how far each was ahead of this peer then */
	int catching_up;
	struct rounds_addrs told;
	int64_t told_lead[ROUNDS_CATCH_UP_PARTNERS];
	int retries;              /* partners after the first this round */
	int joining;              /* the model must be pulled first */
	char (*names)[WIRE_ADDR_MAX + 1]; /* the live members, as last asked */
	const char **addrs;       /* pointers into names, for select and pull */
	size_t cap;
	int stopped;              /* leaving: no more exchanges of ours */
};

static void rounds_close_next(struct rounds *r, double now);

/* The live members other than this peer, into r->addrs; returns how many. */
static size_t
rounds_live(struct rounds *r)
{
	size_t n = r->ops.live(r->ops.arg, r->names, r->cap);

	if (n > r->cap) {
		r->cap = 2 * n;
		r->names = xrealloc(r->names, r->cap, sizeof(*r->names));
		r->addrs = xrealloc(r->addrs, r->cap, sizeof(*r->addrs));
		n = r->ops.live(r->ops.arg, r->names, r->cap);
	}
	for (size_t i = 0; i < n; i++)
		r->addrs[i] = r->names[i];
	return n;
}

/* The first n addrs with the members trust suspects moved behind the
 * rest; returns how many are not suspect, or n when all are (a peer whose
 * every partner looks bad is more likely the odd one out). */
static size_t
rounds_trusted(struct rounds *r, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (!trust_suspect(r->trust, r->addrs[i])) {
			const char *a = r->addrs[k];

			r->addrs[k++] = r->addrs[i];
			r->addrs[i] = a;
		}
	}
	return k > 0 ? k : n;
}

/* Ask the owner for the nearest exchange, pull or closing deadline. */
static void
rounds_schedule(struct rounds *r, double now)
{
	double next = gossip_tick(r->gossip, now), t;

	if ((t = pull_tick(r->pull, now)) >= 0 && (next < 0 || t < next))
		next = t;
	if (r->close_at >= 0 && (next < 0 || r->close_at < next))
		next = r->close_at;
	if (r->share_until >= 0 && (next < 0 || r->share_until < next))
		next = r->share_until;
	r->ops.schedule(r->ops.arg, next);
}

/* The exchanges pace waited for are over: the trainer thread wakes, an
 * external trainer's held step reply goes out. */
static void
rounds_let_go(struct rounds *r)
{
	pace_release(r->pace);
	r->ops.released(r->ops.arg);
}

static uint64_t
rounds_step_now(void *arg)
{
	struct rounds *r = arg;
	struct train_progress p;

	r->ops.progress(r->ops.arg, &p);
	return p.step;
}

static int
rounds_send(void *arg, const char *addr, uint8_t type, const void *buf, size_t len,
    proto_sent_cb cb, void *cbarg)
{
	struct rounds *r = arg;

	return r->ops.send(r->ops.arg, addr, type, buf, len, cb, cbarg);
}

/* The density of the next exchange (train_density_at). A trainer with no
 * step budget the daemon knows (an attached process) mixes at density
 * throughout. */
static double
rounds_density(struct rounds *r)
{
	struct train_progress p;

	r->ops.progress(r->ops.arg, &p);
	if (p.total_steps == 0)
		return r->cfg->density;
	return train_density_at(r->cfg, p.step, p.total_steps);
}

static void
rounds_gossip_params(struct rounds *r, struct gossip_params *gp)
{
	const struct config *c = r->cfg;

	/* Closing mixes as its mode's row says (delta: random slices, as
	 * what is left is disagreement with the others, which this peer's own
	 * drift does not show: there is no training any more). */
	*gp = (struct gossip_params){ c->mode, gossip_values_for_whole(c->values),
	    rounds_density(r), (size_t)c->mask_block, c->seed, c->exchange_timeout };
	if (r->closing.active) {
		gp->mode = gossip_mode_row(gp->mode)->closes_as;
		gp->density = c->close_density;
	}
}

double
rounds_patience(const struct select_link *l, double patience, double timeout)
{
	double wait;

	if (l == NULL || l->rtt <= 0 || patience <= 0)
		return timeout;
	wait = patience * l->rtt * ldexp(1, (int)(l->failures < 16 ? l->failures : 16));
	return fmin(timeout, fmax(ROUNDS_PATIENCE_MIN_S, wait));
}

/* Start an exchange with partner, waiting for it only as long as the link
 * needs (rounds_patience). A link never measured has no time of its own,
 * so the exchange may wait exchange_timeout: a partner frozen or killed
 * just then held it until the job's suspicion of it reached this peer
 * (~1 s at 32 peers, the soak's stalls). Membership probes such a partner
 * at once, and its suspicion ends the exchange (rounds_partner_gone)
 * within a probe period, while a live partner on a slow link answers the
 * probe and keeps the long deadline. The probe goes first, ahead of the
 * request on the link. */
static int
rounds_begin(struct rounds *r, double now, const char *partner)
{
	const struct select_link *l = select_link(r->select, partner);
	int rc;

	if ((l == NULL || l->rtt <= 0) && r->ops.probe != NULL)
		r->ops.probe(r->ops.arg, now, partner);
	if ((rc = gossip_start(r->gossip, now, partner)) == 0)
		gossip_set_deadline(r->gossip, now + rounds_patience(l,
		    r->cfg->exchange_patience, r->cfg->exchange_timeout));
	return rc;
}

/* One exchange with a partner chosen by the select policy. With lag, the
 * round holds the trainer from lag rounds after its first step until the
 * exchange ends, BUSY retries included; a round that starts nothing
 * releases it at once. */
static void
rounds_start(struct rounds *r, double now, const char *exclude)
{
	struct gossip_params gp;
	const char *partner;
	size_t n;
	int rc;

	if (r->stopped || gossip_active(r->gossip))
		return;
	n = rounds_live(r);
	/* the density may follow the step budget (rounds_density) */
	rounds_gossip_params(r, &gp);
	gossip_set_params(r->gossip, &gp);
	trust_set_params(r->trust, &(struct trust_params){ r->cfg->clip_factor });
	partner = select_pick(r->select, now, r->addrs, rounds_trusted(r, n), exclude);
	/* -EDOM: our own values are not finite; the partner is not to blame. */
	if (partner != NULL && (rc = rounds_begin(r, now, partner)) < 0 && rc != -EDOM)
		select_record(r->select, partner, now, 0, 0, 0);
	if (gossip_active(r->gossip) && r->cfg->lag > 0)
		pace_hold(r->pace, r->round_step +
		    (uint64_t)r->cfg->lag * (uint64_t)r->cfg->interval);
	else
		rounds_let_go(r);
	rounds_schedule(r, now);
}

/* An outer step (outer.h) every outer_interval steps. */
static void
rounds_outer(struct rounds *r, uint64_t step)
{
	const struct config *c = r->cfg;
	struct outer_params p = { c->outer_lr, c->outer_momentum, c->outer_interval };
	int rc;

	if (r->outer == NULL || (outer_anchored(r->outer) &&
	    step < r->outer_step + (uint64_t)c->outer_interval))
		return;
	r->outer_step = step;
	if ((rc = outer_step(r->outer, r->m, &p)) < 0 && rc != -EDOM)
		log_warn("outer step: %s", strerror(-rc));
}

static void
rounds_share_sent(void *arg, int status)
{
	struct rounds *r = arg;

	share_sent(r->share, status);
}

/* Whether a fresh job's first share waits: until as many members as
 * --peers names are live (this peer included), at most start_timeout. A
 * share goes to the members known when it is sent, and one that comes up
 * later never gets it: 16 built-in peers on 2 cores, started a second
 * apart, began sharing before they knew one another and ended apart (mean
 * distance to their average 0.039, against 0.006 at 4 and 8). Meanwhile a
 * peer trains on its own: its moves wait in the residual. */
static int
rounds_share_waits(struct rounds *r, size_t n, double now)
{
	size_t want = r->cfg->npeers;

	if (!r->share_wait)
		return 0;
	if (r->share_wait_from < 0) {
		r->share_wait_from = now;
		if (n + 1 < want)
			log_info("share: %zu of the %zu members of --peers live; the first share "
			    "waits for the others, %.0f s at most (start_timeout)", n + 1, want,
			    r->cfg->start_timeout);
	}
	if (n + 1 < want && now < r->share_wait_from + r->cfg->start_timeout)
		return 1;
	r->share_wait = 0;
	if (n + 1 < want)
		log_warn("share: %zu of the %zu members of --peers live after start_timeout; "
		    "sharing begins, and those that come later miss the shares before them",
		    n + 1, want);
	else if (now > r->share_wait_from)
		log_info("share: %zu members live after %.1f s; sharing begins", n + 1,
		    now - r->share_wait_from);
	return 0;
}

static int
rounds_addrs_has(const struct rounds_addrs *s, const char *addr)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->a[i], addr) == 0)
			return 1;
	return 0;
}

static void
rounds_addrs_add(struct rounds_addrs *s, const char *addr)
{
	if (rounds_addrs_has(s, addr))
		return;
	if (s->n == s->cap) {
		s->cap = 2 * s->cap + 8;
		s->a = xrealloc(s->a, s->cap, sizeof(*s->a));
	}
	snprintf(s->a[s->n++], sizeof(s->a[0]), "%s", addr);
}

/* A round's wait (share_sync) is over, or there was none: the shares that
 * came during it name the members the next round waits for. */
static void
rounds_share_next(struct rounds *r, double now)
{
	struct rounds_addrs t = r->sharers;

	r->sharers = r->shared;
	r->shared = t;
	r->shared.n = 0;
	r->share_went = now;
}

/* share_sync's wait is over: the trainer takes the next step. */
static void
rounds_share_go(struct rounds *r, double now)
{
	r->share_until = -1;
	rounds_share_next(r, now);
	rounds_let_go(r);
}

/* share_sync: the trainer goes on once a share came from every live
 * member it waits for (every one at the first round, then those whose
 * share came in the round before: one whose did not, gone, stalled or
 * done training, costs one round's wait, not every round's, until it
 * shares again); 1 while it waits. */
static int
rounds_share_held(struct rounds *r, double now)
{
	size_t n;

	if (r->share_until < 0)
		return 0;
	n = rounds_live(r);
	for (size_t i = 0; i < n; i++)
		if (!rounds_addrs_has(&r->shared, r->addrs[i]) &&
		    (r->share_went < 0 || rounds_addrs_has(&r->sharers, r->addrs[i])))
			return 1;
	rounds_share_go(r, now);
	return 0;
}

/* A share from addr came (whatever became of it: its sender's round is
 * done, and a refused one will not come again). */
static void
rounds_share_came(struct rounds *r, double now, const char *addr)
{
	if (r->cfg->share_sync <= 0)
		return;
	rounds_addrs_add(&r->shared, addr);
	(void)rounds_share_held(r, now);
}

/* share_sync: an attached process waits at its round's step until the
 * live members' shares of the round came (rounds_share_held says whose),
 * at most share_sync times the time it trained since its last round
 * (exchange_timeout at most, and for the first). Without the wait the
 * others' shares land a step late, as the processes step on while they
 * travel, and that cost the transformer of contrib/bench/charlm.sh more
 * than the rounds' own timing does (contrib/bench/charlm_mix.py --delay).
 * Peers that start together stay within a step of each other this way,
 * so the wait is short. The built-in trainer is not held: it is past the
 * step before the loop thread could hold it. */
static void
rounds_share_sync(struct rounds *r, double now, size_t n)
{
	const struct config *c = r->cfg;
	double wait = c->exchange_timeout;

	if (r->share_went >= 0)
		wait = fmin(wait, c->share_sync * (now - r->share_went));
	if (c->share_sync <= 0 || c->trainer != TRAINER_EXTERNAL || n == 0 || wait <= 0) {
		rounds_share_next(r, now);
		return;
	}
	r->share_until = now + wait;
	pace_hold(r->pace, r->round_step);
	(void)rounds_share_held(r, now);
}

/* Mode share's round: this peer's share to every live member, one message
 * after another (share.h); nothing to wait for but, with share_sync, the
 * others' shares of the round. */
static void
rounds_share(struct rounds *r, double now)
{
	const struct config *c = r->cfg;
	struct share_params p = { c->values, rounds_density(r),
	    (size_t)((c->max_message_size - SHARE_HEADER) / SHARE_COORD_MAX) };
	size_t n = rounds_live(r), count, len;
	int rc;

	if (r->stopped || rounds_share_waits(r, n, now))
		return;
	if ((rc = share_round(r->share, r->m, &p, n + 1, &count)) < 0) {
		log_warn("share: %s", strerror(-rc));
		return;
	}
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < count; j++) {
			const uint8_t *msg = share_message(r->share, j, &len);

			if ((rc = r->ops.send(r->ops.arg, r->addrs[i], SHARE_T_SHARE, msg, len,
			    rounds_share_sent, r)) < 0)
				share_sent(r->share, rc);
		}
	}
	rounds_share_sync(r, now, n);
	rounds_schedule(r, now);
}

/* Start a round if `interval` steps have passed since the last one began.
 * The trainer waits for it only with lag (pace), and never for a share.
 * The step is read once: an external trainer's can move between two
 * reads. */
void
rounds_on_step(struct rounds *r, double now)
{
	uint64_t step;

	if (r == NULL || r->joining)
		return;
	step = rounds_step_now(r);
	rounds_outer(r, step);
	if (gossip_active(r->gossip))
		return;
	if (step < r->round_step + (uint64_t)r->cfg->interval)
		return;
	r->round_step = step;
	r->retries = 0;
	if (gossip_mode_row(r->cfg->mode)->shares)
		rounds_share(r, now);
	else
		rounds_start(r, now, NULL);
}

void
rounds_start_at(struct rounds *r, uint64_t step)
{
	if (r == NULL)
		return;
	r->round_step = r->outer_step = step;
	/* The model is the job's from here: the outer step anchors at it,
	 * and mode share where it is ready (rounds_set_ready). */
	outer_reset(r->outer);
	share_reset(r->share);
	/* a joiner's or a resumed peer's job runs already */
	r->share_wait = step == 0;
	r->share_wait_from = -1;
	gossip_start_at(r->gossip, step);
}

int
rounds_set_origin(struct rounds *r, const float *x)
{
	return r != NULL ? gossip_set_origin(r->gossip, x) : -EINVAL;
}

const float *
rounds_origin(const struct rounds *r)
{
	return r != NULL ? gossip_origin(r->gossip) : NULL;
}

/* The closing phase ends when a rule of closing_check says so; 1 if it
 * ended. */
static int
rounds_close_over(struct rounds *r, double now, size_t n)
{
	enum closing_reason why;

	why = closing_check(&r->closing, now, r->ops.bytes_sent(r->ops.arg), n);
	if (why == CLOSING_NONE)
		return 0;
	rounds_close_end(r, now, why);
	return 1;
}

/* The closing phase: end it if a rule says so, else start its next
 * exchange; it comes back after a pause when it did not start, or at the
 * phase's timeout while it runs (its end brings it back sooner). */
static void
rounds_close_next(struct rounds *r, double now)
{
	const char *partner;
	size_t n;
	int rc;

	if (!r->closing.active || r->stopped || gossip_active(r->gossip))
		return;
	n = rounds_live(r);
	if (rounds_close_over(r, now, n))
		return;
	/* Every live member in turn rather than select's fastest: the phase
	 * is to agree with all of them (closing.h). */
	partner = r->addrs[closing_next_partner(&r->closing, n)];
	gossip_restart_relative_distance(r->gossip);
	rc = rounds_begin(r, now, partner);
	if (rc < 0 && rc != -EDOM)
		select_record(r->select, partner, now, 0, 0, 0);
	if (rc < 0)
		closing_exchange(&r->closing, 0, -1, 0);
	r->close_at = gossip_active(r->gossip) ? closing_deadline(&r->closing) :
	    now + CLOSING_PAUSE_S;
	rounds_schedule(r, now);
}

void
rounds_trained(struct rounds *r, double now)
{
	if (r == NULL)
		return;
	pull_set_done(r->pull, 1);
	gossip_set_trained(r->gossip);
	trust_freeze(r->trust, now);
	share_trained(r->share);
}

int
rounds_close_begin(struct rounds *r, double now)
{
	const struct config *c;
	struct closing_params cp;
	struct timespec wall;

	if (r == NULL || r->cfg->close_budget <= 0 || r->stopped)
		return 0;
	c = r->cfg;
	/* in model sizes at the format its exchanges send */
	cp.budget_bytes = (uint64_t)(c->close_budget *
	    (double)gossip_values_bytes(gossip_values_for_whole(c->values), r->m->d));
	cp.distance = c->close_distance;
	cp.timeout = c->close_timeout;
	clock_gettime(CLOCK_REALTIME, &wall);
	closing_begin(&r->closing, &cp, now, (double)wall.tv_sec + (double)wall.tv_nsec * 1e-9,
	    r->ops.bytes_sent(r->ops.arg));
	rounds_apply_params(r, now);
	/* The last steps, the final evaluation and checkpoint came since the
	 * last round: no wait on a partner, yet on a busy host often the
	 * longest gap of a peer's run (a soak's stalls). */
	gossip_gaps_restart(r->gossip, now);
	log_info("closing: exchanging back to back (density %g) until partners are within %g, "
	    "%.2f MB are sent or %g s pass",
	    gossip_mode_density(gossip_mode_row(c->mode)->closes_as, c->close_density),
	    c->close_distance, (double)cp.budget_bytes / 1e6, c->close_timeout);
	rounds_close_next(r, now);
	return 1;
}

void
rounds_close_end(struct rounds *r, double now, enum closing_reason why)
{
	if (r == NULL || !r->closing.active)
		return;
	closing_end(&r->closing, now, r->ops.bytes_sent(r->ops.arg), why);
	r->close_at = -1;
	r->ops.closed(r->ops.arg, why);
}

/* A closing exchange ended: the next one at once, or after a pause when
 * the partner was busy or failed. One that ends after the phase (a leave
 * cut it short) only feeds selection. */
static void
rounds_close_done(struct rounds *r, double now, enum gossip_result res)
{
	int training;

	if (!r->closing.active)
		return;
	training = res == GOSSIP_OK && gossip_partner_step(r->gossip) < rounds_step_now(r);
	closing_exchange(&r->closing, res == GOSSIP_OK,
	    res == GOSSIP_OK ? gossip_relative_distance(r->gossip) : -1, training);
	r->close_at = now + (res != GOSSIP_OK ? CLOSING_PAUSE_S :
	    training ? CLOSING_TRAINING_PAUSE_S : 0);
}

void
rounds_catch_up(struct rounds *r)
{
	if (r == NULL)
		return;
	r->catching_up = 1;
	r->told.n = 0;
}

/* addr mixed with this peer and told its step (rounds_catch_up): how far
 * it was ahead then counts, as this peer trained on between partners. A
 * job of fewer members than ROUNDS_CATCH_UP_PARTNERS waits for all. */
static void
rounds_catch_up_note(struct rounds *r, const char *addr)
{
	size_t n = r->told.n, live;
	uint64_t own = rounds_step_now(r);
	int64_t lead;
	int rc;

	if (!r->catching_up)
		return;
	rounds_addrs_add(&r->told, addr);
	if (r->told.n == n)
		return;
	r->told_lead[n] = (int64_t)(gossip_partner_step(r->gossip) - own);
	live = rounds_live(r);
	if (r->told.n < ROUNDS_CATCH_UP_PARTNERS && r->told.n < live)
		return;
	r->catching_up = 0;
	lead = util_median_low(r->told_lead, r->told.n);
	if (lead <= ROUNDS_CATCH_UP_ROUNDS * (int64_t)r->cfg->interval)
		return;
	rc = r->ops.catch_up != NULL ? r->ops.catch_up(r->ops.arg, own + (uint64_t)lead) :
	    -ENOTSUP;
	log_info("catch-up: the job is at step %" PRIu64 ", %" PRId64 " steps past this "
	    "resumed peer (the median of its first %zu partners): %s", own + (uint64_t)lead,
	    lead, r->told.n, rc == 0 ? "training goes on from there" :
	    "its attached process keeps its own step");
}

static void
rounds_done(void *arg, const char *addr, double now, enum gossip_result res,
    size_t bytes, double seconds)
{
	struct rounds *r = arg;

	/* BUSY says nothing about the link: neither a sample nor a failure. */
	if (res != GOSSIP_BUSY)
		select_record(r->select, addr, now, bytes, seconds, res == GOSSIP_OK);
	if (r->closing.active || r->closing.ended) {
		rounds_close_done(r, now, res);
		return;
	}
	if (res == GOSSIP_OK)
		rounds_catch_up_note(r, addr);
	/* A round that mixed nothing (its partner answered BUSY, or was
	 * killed, stopped or refused mid-exchange) goes on at once with
	 * another partner: given up, it would cost this peer the whole
	 * round, twice its usual time between rounds (the soak's bar on
	 * stalls). */
	if (res != GOSSIP_OK && r->retries++ < ROUNDS_RETRIES) {
		rounds_start(r, now, addr);
		return;
	}
	rounds_let_go(r);
	/* Paced, the trainer is likely waiting at the next round's first
	 * step: start that round now rather than one step later. */
	if (r->cfg->lag > 0)
		rounds_on_step(r, now);
}

/* Values from addr were refused: selection avoids it for a while. Not a
 * suspect's: trust alone keeps it out of choice and lets it back in once
 * it comes near, while a sit-out doubling with each refused slice would
 * keep out for minutes an honest member that ran ahead for a moment. */
static void
rounds_refused(void *arg, const char *addr, enum gossip_refusal why)
{
	struct rounds *r = arg;

	if (why == GOSSIP_REFUSE_SUSPECT)
		select_note_refusal(r->select, addr, (unsigned)why);
	else
		select_offence(r->select, addr, util_now(), (unsigned)why);
}

/* A joiner starts training once it holds the job's model: the pull picks
 * donors among the live members it is shown. */
static void
rounds_maybe_pull(struct rounds *r, double now)
{
	size_t n;

	/* An external trainer's vector exists once a process announced it. */
	if (!r->joining || r->stopped || r->m->d == 0)
		return;
	n = rounds_live(r);
	pull_members(r->pull, now, r->addrs, n);
	rounds_schedule(r, now);
}

void
rounds_members_changed(struct rounds *r, double now)
{
	if (r == NULL)
		return;
	rounds_maybe_pull(r, now);
	/* a member gone is not waited for */
	(void)rounds_share_held(r, now);
}

/* The pulled model is in: train from it, at the donors' step. */
static int
rounds_pulled(void *arg, const float *params, uint64_t step, const char *donors)
{
	struct rounds *r = arg;
	int rc;

	if ((rc = model_restore(r->m, params, NULL)) < 0) {
		log_error("bootstrap: cannot load the pulled model: %s", strerror(-rc));
		return rc;
	}
	log_info("bootstrap: model pulled from %s; continuing from the donors' step %" PRIu64,
	    donors, step);
	r->joining = 0;
	r->ops.pulled(r->ops.arg, step, 0);
	return 0;
}

/* Start agreement: no member's model to pull; this peer's own starts. */
static void
rounds_own(void *arg, const char *why)
{
	struct rounds *r = arg;

	log_info("start: %s: the job starts from this peer's own model", why);
	r->joining = 0;
	r->ops.pulled(r->ops.arg, 0, 1);
}

/* A joiner with nobody to pull from gave up (pull.h). */
static void
rounds_gave_up(void *arg, const char *why)
{
	struct rounds *r = arg;

	r->ops.gave_up(r->ops.arg, why);
}

void
rounds_start_digest(struct rounds *r, const uint8_t digest[PULL_DIGEST_BYTES])
{
	pull_set_digest(r->pull, digest);
}

void
rounds_agree(struct rounds *r, const char *self)
{
	pull_agree(r->pull, self, r->cfg->start_timeout);
	rounds_set_ready(r, 0);
	r->joining = 1;
}

/* A share from addr (share.h), applied at the weight its sender gave it. Values
 * refused as bad count against their sender in the exchanges' trust too,
 * so that the closing phase does not mix in a member the shares shunned:
 * its first slices would come before that trust has a radius. */
static void
rounds_share_recv(struct rounds *r, double now, const char *addr, const uint8_t *payload,
    size_t len)
{
	enum share_refusal why;
	struct errbuf err = { "" };

	if (share_recv(r->share, r->m, r->share_trust, addr, now, rounds_live(r) + 1, payload,
	    len, &why, &err) < 0) {
		log_debug("share from %s dropped: %s", addr, err.msg);
		if (why == SHARE_REFUSE_SUSPECT || why == SHARE_REFUSE_NONFINITE)
			trust_refused(r->trust, addr, now);
	}
	rounds_share_came(r, now, addr);
}

void
rounds_recv(struct rounds *r, double now, const char *addr, uint8_t type,
    const uint8_t *payload, size_t len)
{
	if (type >= pull_proto.first && type <= pull_proto.last)
		pull_recv(r->pull, now, addr, type, payload, len);
	else if (type == SHARE_T_SHARE)
		rounds_share_recv(r, now, addr, payload, len);
	else
		gossip_recv(r->gossip, now, addr, type, payload, len);
	/* Exchanges others start count against a closing peer's budget too:
	 * check it after each one, not only when an own exchange ends, or a
	 * peer that pauses (its partner still trains) or waits on a slow
	 * partner keeps serving past its budget. An own exchange in flight is
	 * left to finish; its end checks again. */
	if (r->closing.active && !r->stopped && !gossip_active(r->gossip))
		rounds_close_over(r, now, rounds_live(r));
	rounds_schedule(r, now);
}

void
rounds_partner_gone(struct rounds *r, double now, const char *addr)
{
	if (r == NULL)
		return;
	gossip_partner_down(r->gossip, now, addr);
	/* rounds_timer fails it, from the loop (and re-arms as it should). */
	r->ops.schedule(r->ops.arg, now);
}

void
rounds_resumed(struct rounds *r, double now)
{
	if (r != NULL)
		gossip_resumed(r->gossip, now);
}

void
rounds_peer_down(struct rounds *r, double now, const char *addr)
{
	if (r == NULL)
		return;
	pull_donor_down(r->pull, now, addr);
	rounds_partner_gone(r, now, addr);
	rounds_maybe_pull(r, now);
	rounds_schedule(r, now);
}

void
rounds_timer(struct rounds *r, double now)
{
	rounds_schedule(r, now);
	if (r->share_until >= 0 && r->share_until <= now) {
		log_debug("share: not every member's share of the round came in time; "
		    "training goes on");
		rounds_share_go(r, now);
	}
	if (r->close_at >= 0 && r->close_at <= now) {
		r->close_at = -1;
		rounds_close_next(r, now);
	}
	rounds_maybe_pull(r, now);
}

void
rounds_apply_params(struct rounds *r, double now)
{
	const struct config *c;
	struct gossip_params gp;
	struct select_params sp;

	if (r == NULL)
		return;
	c = r->cfg;
	rounds_gossip_params(r, &gp);
	sp = (struct select_params){ c->select, c->bw_ratio, c->stale_after };
	gossip_set_params(r->gossip, &gp);
	select_set_params(r->select, &sp);
	trust_set_params(r->share_trust,
	    &(struct trust_params){ SHARE_CLIP_SCALE * c->clip_factor });
	pull_set_timeout(r->pull, c->exchange_timeout);
	pull_set_values(r->pull, gossip_values_for_whole(c->values));
	/* Held for the others' shares (share_sync) is not held for lag. */
	if (r->share_until >= 0 && c->share_sync <= 0)
		rounds_share_go(r, now);
	else if (c->lag == 0 && r->share_until < 0)
		rounds_let_go(r);
	rounds_schedule(r, now);
}

void
rounds_set_ready(struct rounds *r, int ready)
{
	if (r == NULL)
		return;
	gossip_set_ready(r->gossip, ready);
	pull_set_ready(r->pull, ready);
	/* A failure (a model not finite) anchors at the first round. */
	if (ready && gossip_mode_row(r->cfg->mode)->shares)
		(void)share_anchor(r->share, r->m);
}

/* Mode share's weight for a process stepping by kind (SGD: it said
 * nothing); the optimizer key, unless auto, stands. Returns what is used. */
static int
rounds_share_weight(struct rounds *r, int kind)
{
	int use = r->cfg->optimizer != OPTIMIZER_AUTO ? (int)r->cfg->optimizer : kind;

	share_set_weight(r->share, r->cfg->outer_lr, use == OPTIMIZER_ADAPTIVE);
	return use;
}

int
rounds_set_whole(struct rounds *r, const struct model_range *w, size_t n, size_t d,
    struct errbuf *err)
{
	if (r == NULL)
		return 0;
	return share_set_whole(r->share, w, n, d, err);
}

int
rounds_job_model(const struct rounds *r, float *out, size_t d)
{
	if (r == NULL || !gossip_mode_row(r->cfg->mode)->shares || r->closing.active ||
	    r->closing.ended)
		return -ENOENT;
	return share_job_model(r->share, out, d);
}

void
rounds_set_optimizer(struct rounds *r, int kind)
{
	int use;

	if (r == NULL)
		return;
	use = rounds_share_weight(r, kind);
	if (!gossip_mode_row(r->cfg->mode)->shares)
		return;
	if (use != kind)
		log_warn("share: the attached process steps by an optimizer it calls %s; "
		    "optimizer %s stands", config_optimizer_names[kind],
		    config_optimizer_names[use]);
	else
		log_info("share: the attached process steps by an optimizer it calls %s: shares "
		    "go in at 1/%s", config_optimizer_names[kind],
		    kind == OPTIMIZER_ADAPTIVE ? "sqrt(n)" : "n");
}

void
rounds_stop(struct rounds *r)
{
	if (r == NULL)
		return;
	r->stopped = 1;
	pace_close(r->pace);
}

int
rounds_new(const struct config *cfg, struct model *m, int joining,
    const struct rounds_ops *ops, struct rounds **out, struct errbuf *err)
{
	struct rounds *r = xcalloc(1, sizeof(*r));
	struct gossip_ops gops = { rounds_send, rounds_done, rounds_step_now, rounds_refused, r };
	struct pull_ops pops = { rounds_send, rounds_step_now, rounds_pulled, rounds_own,
	    rounds_gave_up, r };
	struct gossip_params gp;
	struct select_params sp = { cfg->select, cfg->bw_ratio, cfg->stale_after };
	int rc;

	r->cfg = cfg;
	r->m = m;
	r->ops = *ops;
	r->joining = joining;
	r->close_at = -1;
	r->share_went = r->share_until = -1;
	rounds_gossip_params(r, &gp);
	/* mode share takes its outer lr on every share (share.h) */
	if (!gossip_mode_row(cfg->mode)->shares && outer_enabled(&(struct outer_params){
	    cfg->outer_lr, cfg->outer_momentum, cfg->outer_interval }))
		outer_new(&r->outer);
	if ((rc = gossip_new(&gp, m, &gops, &r->gossip)) < 0 ||
	    (rc = select_new(&sp, &r->select)) < 0 || (rc = pace_new(&r->pace)) < 0 ||
	    (rc = trust_new(&(struct trust_params){ cfg->clip_factor }, &r->trust)) < 0 ||
	    (rc = trust_new(&(struct trust_params){ SHARE_CLIP_SCALE * cfg->clip_factor },
	    &r->share_trust)) < 0 ||
	    (rc = share_new(&r->share)) < 0 ||
	    (rc = pull_new(m, cfg->exchange_timeout, joining, &pops, &r->pull)) < 0) {
		rounds_free(r);
		return errbuf_set(err, rc, "gossip: %s", strerror(-rc));
	}
	gossip_set_trust(r->gossip, r->trust);
	(void)rounds_share_weight(r, OPTIMIZER_SGD);
	share_set_decay(r->share, cfg->residual_decay);
	/* An external trainer's model exists once a process or a checkpoint
	 * filled the vector (attach's ready hook says when). */
	rounds_set_ready(r, !joining && m->d > 0);
	/* The same patience as a start agreement's for a member's model. */
	pull_set_wait(r->pull, cfg->start_timeout);
	/* A joiner's donors send the exchanges' format (pull.h: in int8 a
	 * quarter of fp32's bytes); a change through the control socket
	 * reaches it by rounds_apply_params, as it reaches the exchanges. */
	pull_set_values(r->pull, gossip_values_for_whole(cfg->values));
	*out = r;
	return 0;
}

void
rounds_free(struct rounds *r)
{
	if (r == NULL)
		return;
	pull_free(r->pull);
	outer_free(r->outer);
	gossip_free(r->gossip);
	trust_free(r->trust);
	trust_free(r->share_trust);
	share_free(r->share);
	select_free(r->select);
	pace_free(r->pace);
	free(r->names);
	free(r->addrs);
	free(r->shared.a);
	free(r->sharers.a);
	free(r->told.a);
	free(r);
}

struct pace *
rounds_pace(struct rounds *r)
{
	return r != NULL ? r->pace : NULL;
}

const struct closing *
rounds_closing(const struct rounds *r)
{
	return r != NULL ? &r->closing : NULL;
}

const struct select_link *
rounds_link(const struct rounds *r, const char *addr)
{
	return r != NULL ? select_link(r->select, addr) : NULL;
}

const struct trust_member *
rounds_trust(const struct rounds *r, const char *addr)
{
	return r != NULL ? trust_member(r->trust, addr) : NULL;
}

int
rounds_suspects_text(const struct rounds *r, char *buf, size_t size)
{
	if (r == NULL) {
		buf[0] = '\0';
		return -1;
	}
	return trust_suspects_text(r->trust, buf, size);
}

void
rounds_set_tamper(struct rounds *r, gossip_tamper_fn fn, void *arg)
{
	gossip_set_tamper(r->gossip, fn, arg);
	share_set_tamper(r->share, fn, arg);
}

int
rounds_stranded(const struct rounds *r)
{
	return r != NULL && pull_stranded(r->pull);
}

uint64_t
rounds_exchanges(const struct rounds *r)
{
	return r != NULL ? gossip_exchanges(r->gossip, GOSSIP_GAP_ANY) : 0;
}

void
rounds_status_json(const struct rounds *r, json_t *st)
{
	double dist, rel, waited;
	uint64_t waits;

	if (r == NULL)
		return;
	dist = gossip_consensus_distance(r->gossip);
	rel = gossip_relative_distance(r->gossip);
	pace_stats(r->pace, &waited, &waits);
	json_object_set_new(st, "lag_wait_s", json_real(waited));
	json_object_set_new(st, "lag_waits", json_integer((json_int_t)waits));
	json_object_set_new(st, "longest_gap_s",
	    util_json_real(gossip_longest_gap(r->gossip, GOSSIP_GAP_ANY)));
	json_object_set_new(st, "own_exchanges",
	    json_integer((json_int_t)gossip_exchanges(r->gossip, GOSSIP_GAP_OWN)));
	json_object_set_new(st, "longest_own_gap_s",
	    util_json_real(gossip_longest_gap(r->gossip, GOSSIP_GAP_OWN)));
	json_object_set_new(st, "consensus_distance", dist < 0 ? json_null() :
	    util_json_real(dist));
	json_object_set_new(st, "consensus_distance_relative", rel < 0 ? json_null() :
	    util_json_real(rel));
}

void
rounds_stats_json(const struct rounds *r, json_t *stats)
{
	if (r == NULL)
		return;
	gossip_stats_json(r->gossip, stats);
	select_stats_json(r->select, stats);
	trust_stats_json(r->trust, util_now(), stats);
	pull_stats_json(r->pull, stats);
	share_stats_json(r->share, stats);
	if (r->outer != NULL)
		outer_stats_json(r->outer, stats);
}
