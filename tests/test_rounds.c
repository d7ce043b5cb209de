/*
 * test_rounds: the exchange policy between in-memory peers with real
 * models, gossip, select, pace, pull and closing inside each peer's
 * rounds, wired through a fake send into one queue and a fake clock (the
 * daemon's ops stand in for membership, the trainer and the transport).
 * A round starts every `interval` steps and not between; a partner that
 * answers BUSY or fails (frozen mid-exchange) is replaced at once, twice,
 * then the round gives up and lets the trainer go; an exchange waits for
 * its partner as long as the link's exchanges take, times a margin; with
 * lag the trainer is held lag rounds ahead until the exchange ends; the
 * closing phase exchanges back to back with no step until its byte
 * budget is spent (the final evaluation before it no gap between
 * exchanges), ends at once with no member left, and a
 * leave ends it; a joiner pulls from the live members and is told the
 * donors' step, then takes part in rounds. A fresh job's start agreement
 * (pull.h) ends with one model everywhere: the lowest address's when no
 * member holds one, a member's that does hold one otherwise, each its own
 * past the deadline, the next lowest's when the source goes down. In
 * mode share a fresh job's first share waits for as many members as
 * --peers names, start_timeout at most, then goes to every live one; an
 * attached process waits at each round for the others' shares of it
 * (share_sync). A resumed peer far behind goes on from the median of its
 * first partners' steps, once (rounds_catch_up).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "check.h"
#include "gossip.h"
#include "log.h"
#include "pace.h"
#include "pull.h"
#include "rounds.h"
#include "share.h"
#include "simnet.h"
#include "util.h"

#define NPEER	5
#define QMAX	512
#define SPEC	"784-8-10"

struct peer {
	char addr[32];
	struct model *m;
	struct rounds *r;
	uint64_t step, total;
	int up;
	uint64_t sent;          /* bytes it sent */
	int reqs;               /* exchange requests it sent */
	int released;
	int pulled, own;
	double first_step;      /* own start: when its process writes the model */
	uint64_t pulled_step;
	int caught;             /* catch_up calls */
	uint64_t caught_gap;    /* the last one's step past its own */
	int closed;
	enum closing_reason why;
	double at;              /* the deadline it asked for */
	int probes;             /* membership asked to probe a partner */
	char probed[32];        /* the last one */
};

struct msg {
	int from, to;
	uint8_t type;
	uint8_t *buf;
	size_t len;
};

static struct peer peers[NPEER];
static int npeers;
static struct config cfg;
static struct msg queue[QMAX];
static int nq;
static double now;

static int
fake_send(void *arg, const char *addr, uint8_t type, const void *buf, size_t len,
    proto_sent_cb cb, void *cbarg)
{
	struct peer *p = arg;
	struct msg *q;

	REQUIRE(nq < QMAX);
	q = &queue[nq++];
	q->from = (int)(p - peers);
	q->to = SIMNET_BY_ADDR(peers, npeers, addr);
	q->type = type;
	q->buf = xmalloc(len ? len : 1);
	memcpy(q->buf, buf, len);
	q->len = len;
	p->sent += len;
	p->reqs += type == GOSSIP_T_REQ;
	/* Delivered: the transport would acknowledge it later. */
	if (cb != NULL)
		cb(cbarg, 0);
	return 0;
}

static void
fake_progress(void *arg, struct train_progress *pr)
{
	struct peer *p = arg;

	memset(pr, 0, sizeof(*pr));
	pr->step = p->step;
	pr->total_steps = p->total;
}

static size_t
fake_live(void *arg, char (*out)[WIRE_ADDR_MAX + 1], size_t max)
{
	struct peer *p = arg;
	size_t k = 0;

	for (int i = 0; i < npeers; i++) {
		if (&peers[i] == p || !peers[i].up)
			continue;
		if (k < max)
			snprintf(out[k], sizeof(out[k]), "%.31s", peers[i].addr);
		k++;
	}
	return k;
}

static uint64_t
fake_bytes_sent(void *arg)
{
	return ((struct peer *)arg)->sent;
}

static void
fake_released(void *arg)
{
	((struct peer *)arg)->released++;
}

static void
fake_pulled(void *arg, uint64_t step, int own)
{
	struct peer *p = arg;

	p->pulled++;
	p->own += own;
	p->pulled_step = step;
	p->step = step;
	rounds_start_at(p->r, step);
	/* An attached process answered fresh writes its model, and the
	 * model is the job's at its first step; until then nothing of it
	 * may be served. */
	if (own)
		p->first_step = now + 1;
	else
		rounds_set_ready(p->r, 1);
}

/* The processes of own starts take their first step, writing their
 * values (other than the model held before). */
static void
first_steps(void)
{
	for (int i = 0; i < npeers; i++) {
		struct peer *p = &peers[i];
		float *x;

		if (p->first_step <= 0 || now < p->first_step)
			continue;
		p->first_step = 0;
		x = xmalloc(p->m->d * sizeof(float));
		for (size_t k = 0; k < p->m->d; k++)
			x[k] = (float)i + 1;
		REQUIRE(model_restore(p->m, x, NULL) == 0);
		free(x);
		rounds_set_ready(p->r, 1);
	}
}

static int
fake_catch_up(void *arg, uint64_t step)
{
	struct peer *p = arg;

	p->caught++;
	p->caught_gap = step - p->step;
	p->step = step;
	return 0;
}

static void
fake_closed(void *arg, enum closing_reason why)
{
	struct peer *p = arg;

	p->closed++;
	p->why = why;
}

static void
fake_schedule(void *arg, double at)
{
	((struct peer *)arg)->at = at;
}

static void
fake_probe(void *arg, double t, const char *addr)
{
	struct peer *p = arg;

	(void)t;
	p->probes++;
	snprintf(p->probed, sizeof(p->probed), "%.31s", addr);
}

/* n peers with models of their own; joiner (if >= 0) must pull. */
static void
setup(int n, int joiner)
{
	struct rounds_ops ops = { fake_send, fake_progress, fake_live, fake_bytes_sent,
	    fake_released, fake_pulled, fake_closed, fake_schedule, NULL, fake_catch_up,
	    fake_probe, NULL };
	char *argv[] = { (char *)"gossipd", NULL };
	struct model_spec spec;
	struct errbuf err = { "" };

	REQUIRE(config_load(&cfg, 1, argv, &err) == 0);
	cfg.interval = 4;
	cfg.lag = 0;
	cfg.mode = GOSSIP_SAPS;
	cfg.density = 0.25;
	REQUIRE(model_spec_parse(SPEC, &spec, &err) == 0);
	npeers = n;
	now = 100;
	for (int i = 0; i < n; i++) {
		struct peer *p = &peers[i];
		float *x;

		memset(p, 0, sizeof(*p));
		snprintf(p->addr, sizeof(p->addr), "10.0.0.%d:%d", i + 1, 7000 + i);
		REQUIRE(model_new(&spec, "cpu", 1, 8, 100 + (uint64_t)i, &p->m, &err) == 0);
		x = xmalloc(p->m->d * sizeof(float));
		for (size_t k = 0; k < p->m->d; k++)
			x[k] = (float)((k * 7919 + (size_t)i * 104729) % 1000) / 1000.0f - 0.5f;
		REQUIRE(model_restore(p->m, x, NULL) == 0);
		free(x);
		p->up = 1;
		p->at = -1;
		p->step = 10 + (uint64_t)i;
		ops.arg = p;
		REQUIRE(rounds_new(&cfg, p->m, i == joiner, &ops, &p->r, &err) == 0);
		rounds_start_at(p->r, p->step);
	}
}

static void
teardown(void)
{
	for (int i = 0; i < nq; i++)
		free(queue[i].buf);
	nq = 0;
	for (int i = 0; i < npeers; i++) {
		rounds_free(peers[i].r);
		model_free(peers[i].m);
	}
	config_free(&cfg);
}

/* Deliver the queue, and what that sends, in order. */
static void
pump(void)
{
	while (nq > 0) {
		struct msg q = queue[0];

		memmove(queue, queue + 1, (size_t)(nq - 1) * sizeof(queue[0]));
		nq--;
		if (q.to >= 0 && peers[q.to].up)
			rounds_recv(peers[q.to].r, now, peers[q.from].addr, q.type, q.buf, q.len);
		free(q.buf);
	}
}

/* Let time pass to t: every deadline asked for by then is run. */
static void
advance(double t)
{
	now = t;
	for (int i = 0; i < npeers; i++) {
		if (peers[i].up && peers[i].at >= 0 && peers[i].at <= now)
			rounds_timer(peers[i].r, now);
	}
}

static void
step(int i)
{
	peers[i].step++;
	rounds_on_step(peers[i].r, now);
}

/* A round every interval steps, counted from the start, and none between. */
static void
test_interval(void)
{
	setup(3, -1);
	for (int k = 1; k < 4; k++) {
		step(0);
		CHECKF(nq == 0 && peers[0].reqs == 0, "a round %d steps after the last", k);
	}
	step(0);
	CHECK(peers[0].reqs == 1);
	pump();
	CHECKF(rounds_exchanges(peers[0].r) == 1, "%llu exchanges",
	    (unsigned long long)rounds_exchanges(peers[0].r));
	CHECK(peers[0].released >= 1);
	for (int k = 1; k < 4; k++)
		step(0);
	CHECK(peers[0].reqs == 1);
	step(0);
	CHECK(peers[0].reqs == 2);
	pump();
	CHECK(rounds_exchanges(peers[0].r) == 2);
	teardown();
}

/* Every partner answers BUSY (no model yet): two more are tried in the
 * same round, then it gives up and lets the trainer go; the next round
 * tries afresh. */
static void
test_busy_retries(void)
{
	setup(5, -1);
	for (int i = 1; i < 5; i++)
		rounds_set_ready(peers[i].r, 0);
	for (int k = 0; k < 4; k++)
		step(0);
	pump();
	CHECKF(peers[0].reqs == 1 + ROUNDS_RETRIES, "%d requests in one round",
	    peers[0].reqs);
	CHECK(rounds_exchanges(peers[0].r) == 0);
	CHECK(peers[0].released >= 1);
	for (int k = 0; k < 4; k++)
		step(0);
	pump();
	CHECKF(peers[0].reqs == 2 * (1 + ROUNDS_RETRIES), "%d requests in two rounds",
	    peers[0].reqs);
	teardown();
}

/* Drop what is queued: a partner frozen mid-exchange. */
static void
lose_queue(void)
{
	for (int i = 0; i < nq; i++)
		free(queue[i].buf);
	nq = 0;
}

/* Exchanges of peer i that timed out. */
static int
timeouts(int i)
{
	json_t *st = json_object();
	int n;

	rounds_stats_json(peers[i].r, st);
	n = (int)json_integer_value(json_object_get(json_object_get(st, "gossip"), "timeouts"));
	json_decref(st);
	return n;
}

/* A round of p0's: interval steps, its REQ out. */
static void
round_of_p0(void)
{
	int reqs = peers[0].reqs;

	for (int k = 0; k < 4; k++)
		step(0);
	CHECK(peers[0].reqs == reqs + 1);
}

/* Partners frozen mid-exchange: each timeout gives way at once to
 * another partner in the same round, twice, then the round gives up; in
 * the next, the partner after a frozen one answers and the round ends
 * with an exchange. */
static void
test_fail_retries(void)
{
	int to;

	setup(5, -1);
	round_of_p0();
	for (int k = 1; k <= ROUNDS_RETRIES; k++) {
		REQUIRE(nq == 1);
		to = queue[0].to;
		lose_queue();
		advance(peers[0].at);
		CHECKF(peers[0].reqs == 1 + k, "%d requests after %d timeouts", peers[0].reqs, k);
		CHECK(nq == 1 && queue[0].to != to);
	}
	lose_queue();
	advance(peers[0].at);
	CHECKF(peers[0].reqs == 1 + ROUNDS_RETRIES, "%d requests in one round", peers[0].reqs);
	CHECK(timeouts(0) == 1 + ROUNDS_RETRIES);
	CHECK(rounds_exchanges(peers[0].r) == 0 && peers[0].released >= 1);
	round_of_p0();
	lose_queue();
	advance(peers[0].at);
	CHECK(peers[0].reqs == 3 + ROUNDS_RETRIES);
	pump();
	CHECK(rounds_exchanges(peers[0].r) == 1);
	teardown();
}

/* An unmeasured link gets exchange_timeout, and membership is asked to
 * probe the partner (only then); a measured one patience times its
 * exchange time, at least the floor, doubled per failure in a row; its
 * next exchange that finishes is patient again. */
static void
test_patience(void)
{
	setup(2, -1);
	round_of_p0();
	CHECKF(peers[0].at == now + cfg.exchange_timeout, "unmeasured: deadline in %g s",
	    peers[0].at - now);
	CHECKF(peers[0].probes == 1 && strcmp(peers[0].probed, peers[1].addr) == 0,
	    "unmeasured: %d probes asked, of %s", peers[0].probes, peers[0].probed);
	now += 0.02;
	pump();
	CHECK(rounds_exchanges(peers[0].r) == 1);
	/* 8 x 0.02 s is under the floor. */
	round_of_p0();
	CHECKF(fabs(peers[0].at - (now + ROUNDS_PATIENCE_MIN_S)) < 1e-9, "deadline in %g s",
	    peers[0].at - now);
	lose_queue();
	advance(peers[0].at);
	CHECKF(timeouts(0) == 1, "%d timeouts", timeouts(0));
	/* One failure: 2 x 8 x 0.02 s. */
	advance(now + 1);
	round_of_p0();
	CHECKF(fabs(peers[0].at - (now + 2 * cfg.exchange_patience * 0.02)) < 1e-9,
	    "after a failure: deadline in %g s", peers[0].at - now);
	now += 0.1;
	pump();
	CHECK(rounds_exchanges(peers[0].r) == 2);
	/* The EWMA took the slow one in, and the failures are forgiven. */
	round_of_p0();
	CHECKF(peers[0].at - now > ROUNDS_PATIENCE_MIN_S && peers[0].at - now < 2 *
	    cfg.exchange_patience * 0.1, "after a slow exchange: deadline in %g s",
	    peers[0].at - now);
	CHECKF(peers[0].probes == 1, "measured: %d probes asked", peers[0].probes);
	/* Patience 0: exchange_timeout, measured or not. */
	cfg.exchange_patience = 0;
	now += 0.1;
	pump();
	round_of_p0();
	CHECK(peers[0].at == now + cfg.exchange_timeout);
	teardown();
}

/* With lag 1 the trainer may not pass the next round's first step while
 * the exchange runs; its end lets go. */
static void
test_lag(void)
{
	uint64_t first;

	setup(3, -1);
	cfg.lag = 1;
	first = peers[0].step;
	for (int k = 0; k < 4; k++)
		step(0);
	CHECK(peers[0].reqs == 1);
	CHECKF(pace_holds(rounds_pace(peers[0].r), first + 8),
	    "not held at the next round's first step");
	CHECK(!pace_holds(rounds_pace(peers[0].r), first + 7));
	pump();
	CHECK(!pace_holds(rounds_pace(peers[0].r), first + 8));
	CHECK(peers[0].released >= 1);
	/* A leave never holds the trainer again. */
	for (int k = 0; k < 4; k++)
		step(0);
	rounds_stop(peers[0].r);
	CHECK(!pace_holds(rounds_pace(peers[0].r), first + 12));
	teardown();
}

static double
own_gap(int i)
{
	json_t *st = json_object();
	double gap;

	rounds_status_json(peers[i].r, st);
	gap = json_real_value(json_object_get(st, "longest_own_gap_s"));
	json_decref(st);
	return gap;
}

/* Back to back with no step until the byte budget is spent; the time
 * between the last round and the phase (the final evaluation) is no gap
 * between exchanges. */
static void
test_closing(void)
{
	const struct closing *c;

	setup(3, -1);
	cfg.close_budget = 2;
	cfg.close_distance = 1e-12;
	for (int r = 0; r < 2; r++) {
		for (int k = 0; k < 4; k++)
			step(0);
		pump();
		advance(now + 0.5);
	}
	CHECK(rounds_exchanges(peers[0].r) == 2);
	advance(now + 5);
	CHECK(rounds_close_begin(peers[0].r, now) == 1);
	c = rounds_closing(peers[0].r);
	CHECK(c->active);
	for (int k = 0; k < 200 && c->active; k++) {
		pump();
		advance(now + 0.01);
	}
	CHECKF(!c->active && peers[0].closed == 1 && peers[0].why == CLOSING_BUDGET,
	    "closing: active %d, closed %d, reason %s", c->active, peers[0].closed,
	    closing_reason_name(peers[0].why));
	CHECKF(c->exchanges >= 2, "%llu closing exchanges", (unsigned long long)c->exchanges);
	CHECK(peers[0].step == 18);
	CHECKF(own_gap(0) < 1, "longest own gap %g s", own_gap(0));
	teardown();

	/* No member left: over before rounds_close_begin returns. */
	setup(1, -1);
	CHECK(rounds_close_begin(peers[0].r, now) == 1);
	CHECK(peers[0].closed == 1 && peers[0].why == CLOSING_ALONE);
	CHECK(!rounds_closing(peers[0].r)->active);
	teardown();

	/* A leave ends it, once. */
	setup(3, -1);
	CHECK(rounds_close_begin(peers[0].r, now) == 1);
	rounds_stop(peers[0].r);
	rounds_close_end(peers[0].r, now, CLOSING_LEAVE);
	rounds_close_end(peers[0].r, now, CLOSING_LEAVE);
	CHECK(peers[0].closed == 1 && peers[0].why == CLOSING_LEAVE);
	pump();
	CHECK(peers[0].closed == 1);
	teardown();

	/* No budget: no phase. */
	setup(2, -1);
	cfg.close_budget = 0;
	CHECK(rounds_close_begin(peers[0].r, now) == 0);
	teardown();
}

/* A joiner pulls from the live members (at steps 11, 12 and 13), gets
 * the donors' median step, then exchanges; before that its steps start nothing. */
static void
test_pull(void)
{
	setup(4, 0);
	peers[0].step = 0;
	step(0);
	CHECK(peers[0].reqs == 0);
	rounds_members_changed(peers[0].r, now);
	CHECK(nq > 0);
	for (int k = 0; k < 50 && peers[0].pulled == 0; k++) {
		pump();
		advance(now + 0.01);
	}
	CHECKF(peers[0].pulled == 1, "pulled %d times", peers[0].pulled);
	CHECKF(peers[0].pulled_step == 12, "pulled at step %llu",
	    (unsigned long long)peers[0].pulled_step);
	for (int k = 0; k < 4; k++)
		step(0);
	CHECK(peers[0].reqs == 1);
	pump();
	CHECK(rounds_exchanges(peers[0].r) == 1);
	teardown();
}

/* Peers of list[] agree on a start (their processes attached): deliver
 * and let time pass until every one of them trains or limit passes. */
static void
agree_run(const int *list, int n, double limit)
{
	int done = 0;

	for (int i = 0; i < n; i++)
		rounds_members_changed(peers[list[i]].r, now);
	for (double end = now + limit; now < end && done < n;) {
		pump();
		advance(now + 0.05);
		first_steps();
		done = 0;
		for (int i = 0; i < n; i++)
			done += peers[list[i]].pulled && peers[list[i]].first_step == 0;
	}
}

/* Peer i holds peer src's model bit for bit: a start agreement pulls in
 * fp32 whatever the job's values (int8 here, the default), and averages
 * equal answers to exactly their value. */
static int
same_model(int i, int src)
{
	float *a = xmalloc(peers[i].m->d * sizeof(float));
	float *b = xmalloc(peers[i].m->d * sizeof(float));
	struct model_range all = { 0, peers[i].m->d };
	int same;

	REQUIRE(model_gather(peers[i].m, &all, 1, a) == 0);
	REQUIRE(model_gather(peers[src].m, &all, 1, b) == 0);
	same = memcmp(a, b, all.len * sizeof(float)) == 0;
	free(a);
	free(b);
	return same;
}

/* Every peer of a fresh job agrees: the lowest address starts from its
 * own, the others pull its model. */
static void
test_agree(void)
{
	int all[] = { 0, 1, 2, 3 };

	setup(4, -1);
	for (int i = 0; i < 4; i++)
		rounds_agree(peers[i].r, peers[i].addr);
	agree_run(all, 4, 5);
	CHECKF(peers[0].pulled == 1 && peers[0].own == 1, "lowest: started %d, own %d",
	    peers[0].pulled, peers[0].own);
	for (int i = 1; i < 4; i++) {
		CHECKF(peers[i].pulled == 1 && peers[i].own == 0, "peer %d: started %d, own %d",
		    i, peers[i].pulled, peers[i].own);
		CHECKF(same_model(i, 0), "peer %d holds another model than the lowest's", i);
	}
	teardown();
}

/* A member that holds a model already (it came first, alone) gives it
 * even to a lower address. */
static void
test_agree_first(void)
{
	int late[] = { 0, 1 };

	setup(3, -1);
	rounds_agree(peers[0].r, peers[0].addr);
	rounds_agree(peers[1].r, peers[1].addr);
	agree_run(late, 2, 5);
	CHECKF(peers[0].own == 0 && peers[1].own == 0, "own starts: %d %d", peers[0].own,
	    peers[1].own);
	CHECK(same_model(0, 2) && same_model(1, 2));
	teardown();
}

/* The lowest's process never attaches: past start_timeout the others
 * start from their own, and not before. */
static void
test_agree_deadline(void)
{
	int rest[] = { 1, 2 };
	double t0;

	setup(3, -1);
	cfg.start_timeout = 2;
	for (int i = 0; i < 3; i++)
		rounds_agree(peers[i].r, peers[i].addr);
	t0 = now;
	agree_run(rest, 2, 1.5);
	CHECK(peers[1].pulled == 0 && peers[2].pulled == 0);
	agree_run(rest, 2, 2);
	CHECKF(peers[1].own == 1 && peers[2].own == 1, "own starts: %d %d", peers[1].own,
	    peers[2].own);
	CHECKF(now >= t0 + 2, "started %.2f s after the attach", now - t0);
	teardown();

	/* Alone: its own, after the donor wait. */
	setup(1, -1);
	rounds_agree(peers[0].r, peers[0].addr);
	agree_run((int[]){ 0 }, 1, 3);
	CHECK(peers[0].own == 1);
	teardown();
}

/* The source goes down before anyone has its model: the next lowest
 * starts from its own and the rest take that one. */
static void
test_agree_source_down(void)
{
	int rest[] = { 1, 2, 3 };

	setup(4, -1);
	for (int i = 0; i < 4; i++)
		rounds_agree(peers[i].r, peers[i].addr);
	peers[0].up = 0;
	for (int i = 1; i < 4; i++)
		rounds_peer_down(peers[i].r, now, peers[0].addr);
	agree_run(rest, 3, 5);
	CHECKF(peers[1].own == 1, "next lowest: own %d", peers[1].own);
	CHECK(peers[2].own == 0 && peers[3].own == 0);
	CHECK(same_model(2, 1) && same_model(3, 1));
	teardown();
}

/* SHARE messages in the queue, which is then emptied. */
static int
shares_queued(void)
{
	int n = 0;

	for (int i = 0; i < nq; i++) {
		n += queue[i].type == SHARE_T_SHARE;
		free(queue[i].buf);
	}
	nq = 0;
	return n;
}

/* Peers 0 and 1 of a fresh job in mode share, --peers naming 3, peer 2
 * not up yet: no share until it is, then one to each; past start_timeout
 * without it a share goes to the one member there is. */
static void
test_share_wait(void)
{
	setup(3, -1);
	cfg.mode = GOSSIP_SHARE;
	cfg.npeers = 3;
	cfg.start_timeout = 2;
	peers[2].up = 0;
	for (int i = 0; i < 2; i++) {
		peers[i].step = 0;
		rounds_start_at(peers[i].r, 0);
		rounds_set_ready(peers[i].r, 1);
	}
	for (int k = 0; k < 8; k++)
		step(0);
	CHECKF(shares_queued() == 0, "a share before peer 2 is up");
	peers[2].up = 1;
	for (int k = 0; k < 4; k++)
		step(0);
	CHECK(shares_queued() == 2);
	peers[2].up = 0;
	for (int k = 0; k < 4; k++)
		step(1);
	CHECK(shares_queued() == 0);
	now += 3;
	for (int k = 0; k < 4; k++)
		step(1);
	CHECK(shares_queued() == 1);
	/* peer_list was never set: nothing to free */
	cfg.npeers = 0;
	teardown();
}

/* share_sync: an attached process waits at its round until every live
 * member's share of the round came (peer 0 for 1 and 2, peer 1 for 2,
 * peer 2 for none, as its own came last), or at most share_sync times
 * what it trained since its last round; then only for those whose share
 * came in the round before; the built-in trainer and share_sync 0 never
 * wait. */
static void
test_share_sync(void)
{
	struct pace *pc[3];

	setup(3, -1);
	cfg.mode = GOSSIP_SHARE;
	cfg.trainer = TRAINER_EXTERNAL;
	cfg.share_sync = 0.5;
	cfg.exchange_timeout = 5;
	for (int i = 0; i < 3; i++) {
		peers[i].step = 0;
		rounds_start_at(peers[i].r, 0);
		rounds_set_ready(peers[i].r, 1);
		pc[i] = rounds_pace(peers[i].r);
	}
	for (int i = 0; i < 3; i++) {
		for (int k = 0; k < 4; k++)
			step(i);
		CHECKF(i == 2 || pace_holds(pc[i], 4), "peer %d went on without the others' shares",
		    i);
		CHECKF(i < 2 || !pace_holds(pc[i], 4), "peer 2 waited for shares that came");
		pump();
	}
	CHECK(!pace_holds(pc[0], 4) && !pace_holds(pc[1], 4));
	CHECK(peers[0].released > 0 && peers[1].released > 0);
	/* Peer 0 trained 4 s since: it waits 2 s at most for the others. */
	now += 4;
	for (int k = 0; k < 4; k++)
		step(0);
	CHECK(pace_holds(pc[0], 8));
	CHECKF(fabs(peers[0].at - (now + 2)) < 1e-9, "deadline %.3f, now %.3f", peers[0].at, now);
	advance(now + 1.9);
	CHECK(pace_holds(pc[0], 8));
	advance(now + 0.2);
	CHECK(!pace_holds(pc[0], 8));
	pump();
	/* Neither shared in that round: the next does not wait for them;
	 * peer 1 shares again, and the round after the next waits for it
	 * alone. */
	now += 4;
	for (int k = 0; k < 4; k++)
		step(0);
	CHECKF(!pace_holds(pc[0], 12), "waited for members that missed the last round");
	pump();
	for (int k = 0; k < 4; k++)
		step(1);
	pump();
	now += 4;
	for (int k = 0; k < 4; k++)
		step(0);
	CHECK(!pace_holds(pc[0], 16));
	pump();
	now += 4;
	for (int k = 0; k < 4; k++)
		step(0);
	CHECKF(pace_holds(pc[0], 20), "did not wait for peer 1, back in the rounds");
	for (int k = 0; k < 4; k++)
		step(1);
	pump();
	CHECK(!pace_holds(pc[0], 20));
	/* share_sync 0, then the built-in trainer: no wait. */
	cfg.share_sync = 0;
	now += 4;
	for (int k = 0; k < 4; k++)
		step(0);
	CHECK(!pace_holds(pc[0], 24));
	pump();
	cfg.share_sync = 0.5;
	cfg.trainer = TRAINER_BUILTIN;
	now += 4;
	for (int k = 0; k < 8; k++)
		step(1);
	pump();
	for (int k = 0; k < 8; k++)
		step(0);
	CHECK(!pace_holds(pc[0], 32));
	teardown();
}

/* Peer 0 takes rounds until it has mixed with every other peer (the
 * partners are drawn at random), the others a step with each of its own
 * (they start no rounds). */
static void
meet_all(void)
{
	for (int k = 0; k < 200 && rounds_exchanges(peers[0].r) < 3 * (uint64_t)npeers; k++) {
		for (int j = 0; j < 4; j++) {
			for (int i = 1; i < npeers; i++)
				peers[i].step++;
			step(0);
		}
		pump();
	}
	CHECKF(rounds_exchanges(peers[0].r) >= 3 * (uint64_t)npeers, "%llu exchanges",
	    (unsigned long long)rounds_exchanges(peers[0].r));
}

/* Peers 1-4 ahead of peer 0 by lead[] steps; peer 0 resumed or not. */
static void
setup_ahead(const uint64_t lead[4], int resumed)
{
	setup(5, -1);
	for (int i = 1; i < 5; i++)
		peers[i].step = peers[0].step + lead[i - 1];
	if (resumed)
		rounds_catch_up(peers[0].r);
	meet_all();
}

/* A resumed peer far behind goes on from the median of its first three
 * partners' steps, once, whatever one of them claims; within two rounds
 * of them, or not resumed, it keeps its own step. */
static void
test_catch_up(void)
{
	static const uint64_t far[] = { 500, 510, 520, 100000 };
	static const uint64_t near[] = { 8, 8, 8, 8 }, past[] = { 9, 9, 9, 9 };

	setup_ahead(far, 1);
	CHECKF(peers[0].caught == 1 && peers[0].caught_gap >= 510 &&
	    peers[0].caught_gap <= 520, "%d catch-ups, %llu steps ahead", peers[0].caught,
	    (unsigned long long)peers[0].caught_gap);
	teardown();
	setup_ahead(near, 1);
	CHECKF(peers[0].caught == 0, "caught up with members two rounds ahead");
	teardown();
	setup_ahead(past, 1);
	CHECKF(peers[0].caught == 1 && peers[0].caught_gap == 9,
	    "%d catch-ups with members a step past two rounds ahead", peers[0].caught);
	teardown();
	setup_ahead(far, 0);
	CHECKF(peers[0].caught == 0, "caught up without a resume");
	teardown();
}

static const struct check_case cases[] = {
	{ "rounds_interval", test_interval },
	{ "rounds_busy_retries", test_busy_retries },
	{ "rounds_fail_retries", test_fail_retries },
	{ "rounds_patience", test_patience },
	{ "rounds_lag", test_lag },
	{ "rounds_closing", test_closing },
	{ "rounds_pull", test_pull },
	{ "rounds_agree", test_agree },
	{ "rounds_agree_first", test_agree_first },
	{ "rounds_agree_deadline", test_agree_deadline },
	{ "rounds_agree_source_down", test_agree_source_down },
	{ "rounds_share_wait", test_share_wait },
	{ "rounds_share_sync", test_share_sync },
	{ "rounds_catch_up", test_catch_up },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	if (sodium_init() < 0)
		return 99;
	log_set_level(LOG_ERROR);
	return check_main(argc, argv, cases, "test_rounds");
}
