/*
 * Unit test of gossip (and select): two peers with real models talk over an
 * in-memory queue. An exchange leaves both with the average on the mask
 * and untouched elsewhere; dense averages everything; fp16 and int8 are
 * close; delta mixes the coordinates that drifted most, the rest waits
 * for the next exchange, and its coded mask is checked; two
 * peers asking each other at once both succeed (sparse) or both get BUSY
 * (dense), and a peer with no model yet answers BUSY; a lost reply times out;
 * malformed and mismatched requests change nothing. Poison: a REQ or REPLY
 * carrying NaN or Inf, or absurd finite values, is refused, counted,
 * reported and leaves the model unchanged; a peer whose own values are not
 * finite never sends them. A member that trust suspects is still answered
 * with our values, and its own are left out; one that sends the model
 * this peer started from is behind, and suspect after three; a peer whose
 * training is over says so in its REQs and REPLYs, and its partners' trust
 * judges those slices without a vote. select: random and adaptive
 * picks, the bandwidth cut-off, the connectivity guard, the failure
 * backoff, the decaying shun of an offender and a refusal counted without
 * one. The codec: a REQ and a REPLY encode to
 * the documented bytes, decode back, and every shorter prefix is refused.
 * The longest gap between exchanges leaves a stop out.
 * The model pull is test_pull's.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "check.h"
#include "gossip.h"
#include "mask.h"
#include "select.h"
#include "trust.h"
#include "util.h"
#include "wire.h"

#define QMAX 16

struct msg {
	int to;
	char from[32];
	uint8_t type;
	uint8_t *buf;
	size_t len;
};

static struct msg queue[QMAX];
static int nq;

struct peer {
	int idx;
	char addr[32];
	struct model *m;
	struct gossip *g;
	enum gossip_result last;
	int done;
	int refused[GOSSIP_REFUSE_N];
	char refused_from[32];
};

static struct peer peers[2];
static int restart_on_done;
static int fail_next_send;      /* the transport fails the next message */

static int
fake_send(void *arg, const char *addr, uint8_t type, const void *buf, size_t len,
    void (*cb)(void *, int), void *cbarg)
{
	struct peer *p = arg;
	struct msg *q;

	if (nq == QMAX)
		return -ENOBUFS;
	q = &queue[nq++];
	q->to = strcmp(addr, peers[0].addr) == 0 ? 0 : 1;
	snprintf(q->from, sizeof(q->from), "%s", p->addr);
	q->type = type;
	q->buf = malloc(len ? len : 1);
	memcpy(q->buf, buf, len);
	q->len = len;
	/* Delivered: the transport would acknowledge it later. */
	if (cb != NULL)
		cb(cbarg, fail_next_send ? -ECONNREFUSED : 0);
	fail_next_send = 0;
	return 0;
}

static void
fake_done(void *arg, const char *addr, double now, enum gossip_result r, size_t bytes,
    double seconds)
{
	struct peer *p = arg;

	(void)addr;
	(void)bytes;
	(void)seconds;
	p->last = r;
	p->done++;
	if (restart_on_done && r == GOSSIP_FAILED)
		gossip_start(p->g, now, peers[1 - p->idx].addr);
}

static void
fake_refused(void *arg, const char *addr, enum gossip_refusal why)
{
	struct peer *p = arg;

	p->refused[why]++;
	snprintf(p->refused_from, sizeof(p->refused_from), "%s", addr);
}

static uint64_t
fake_step(void *arg)
{
	(void)arg;
	return 7;
}

/* Deliver everything queued (and what that causes) at now; drop == 1
 * loses REPLYs. */
static void
pump_at(double now, int drop_replies)
{
	while (nq > 0) {
		struct msg q = queue[0];

		memmove(queue, queue + 1, (size_t)(nq - 1) * sizeof(queue[0]));
		nq--;
		if (!(drop_replies && q.type == GOSSIP_T_REPLY))
			gossip_recv(peers[q.to].g, now, q.from, q.type, q.buf, q.len);
		free(q.buf);
	}
}

static void
pump(int drop_replies)
{
	pump_at(0.5, drop_replies);
}

/* Distinct values everywhere, so "changed" and "mixed" are the same. */
static void
randomize(struct model *m, uint32_t salt)
{
	float *x = malloc(m->d * sizeof(float));

	for (size_t i = 0; i < m->d; i++)
		x[i] = (float)randombytes_uniform(1000000) / 1e6f + (float)salt;
	CHECK(model_restore(m, x, NULL) == 0);
	free(x);
}

static void
setup(enum gossip_mode mode, enum gossip_values values, double density, const char *spec_a,
    const char *spec_b)
{
	struct gossip_params gp = { mode, values, density, 4, 99, 2.0 };
	struct model_spec sa, sb;
	struct errbuf err;

	for (int i = 0; i < 2; i++) {
		struct gossip_ops ops = { fake_send, fake_done, fake_step, fake_refused,
		    &peers[i] };

		memset(&peers[i], 0, sizeof(peers[i]));
		peers[i].idx = i;
		snprintf(peers[i].addr, sizeof(peers[i].addr), "127.0.0.1:%d", 20000 + i);
		CHECK(model_spec_parse(i == 0 ? spec_a : spec_b, i == 0 ? &sa : &sb, &err) == 0);
		CHECK(model_new(i == 0 ? &sa : &sb, "cpu", 1, 8, 100 + (uint64_t)i, &peers[i].m,
		    &err) == 0);
		CHECK(gossip_new(&gp, peers[i].m, &ops, &peers[i].g) == 0);
		randomize(peers[i].m, (uint32_t)i);
	}
}

static void
teardown(void)
{
	for (int i = 0; i < 2; i++) {
		gossip_free(peers[i].g);
		model_free(peers[i].m);
	}
}

static float *
snap(struct model *m)
{
	float *x = malloc(m->d * sizeof(float));

	model_snapshot(m, x, NULL);
	return x;
}

/* Coordinates an exchange of mode mixes: its rebuilt mask's (the count
 * does not depend on the nonce), or the k an initiator chooses. */
static size_t
mask_size(enum gossip_mode mode, double density, size_t d)
{
	const struct gossip_mode_row *row = gossip_mode_row(mode);
	struct mask mk = { 0 };
	size_t n;

	if (row->build == NULL)
		return (size_t)llround(density * (double)d);
	REQUIRE(row->build(&mk, 99, 0, d, density, 4) == 0);
	n = mk.count;
	mask_free(&mk);
	return n;
}

static void
test_exchange(enum gossip_mode mode, enum gossip_values values)
{
	float *a0, *b0, *a1, *b1;
	size_t mixed = 0, d;
	/* fp16 near 1: 2^-11; int8 of values below 2: (2 / 127) / 2 / 2 */
	double tol = values == GOSSIP_FP16 ? 2e-3 : values == GOSSIP_INT8 ? 4.5e-3 : 0;

	setup(mode, values, 0.1, "40-20-10", "40-20-10");
	d = peers[0].m->d;
	a0 = snap(peers[0].m);
	b0 = snap(peers[1].m);
	CHECK(gossip_start(peers[0].g, 0.0, peers[1].addr) == 0);
	CHECK(gossip_active(peers[0].g));
	CHECK(gossip_start(peers[0].g, 0.0, peers[1].addr) == -EBUSY);
	pump(0);
	CHECKF(peers[0].done == 1 && peers[0].last == GOSSIP_OK, "done %d last %d",
	    peers[0].done, peers[0].last);
	CHECK(!gossip_active(peers[0].g));
	a1 = snap(peers[0].m);
	b1 = snap(peers[1].m);
	for (size_t i = 0; i < d; i++) {
		float avg = (a0[i] + b0[i]) / 2;

		if (a1[i] != a0[i] || b1[i] != b0[i]) {
			mixed++;
			CHECKF(fabsf(a1[i] - avg) <= tol && fabsf(b1[i] - avg) <= tol,
			    "coordinate %zu: %g %g, average %g", i, a1[i], b1[i], avg);
		}
	}
	CHECKF(mixed == mask_size(mode, 0.1, d), "%s mixed %zu of %zu", gossip_mode_name(mode),
	    mixed, d);
	CHECK(gossip_exchanges(peers[0].g, GOSSIP_GAP_ANY) == 1 && gossip_exchanges(peers[1].g, GOSSIP_GAP_ANY) == 1);
	CHECK(gossip_consensus_distance(peers[0].g) > 0);
	free(a0);
	free(b0);
	free(a1);
	free(b1);
	teardown();
}

/* One exchange peer i starts at t with the other, answered at once. */
static void
exchange_at(int i, double t)
{
	CHECK(gossip_start(peers[i].g, t, peers[1 - i].addr) == 0);
	pump_at(t, 0);
	CHECK(peers[i].last == GOSSIP_OK);
}

/* The longest gap between exchanges, on both sides, and a stop's left
 * out: an exchange that comes in just before SIGCONT's handler ended a
 * gap that holds the stop. Between a peer's own exchanges, the ones it
 * served do not count. */
static void
test_gap(void)
{
	setup(GOSSIP_SAPS, GOSSIP_FP32, 0.1, "40-20-10", "40-20-10");
	exchange_at(0, 1);
	CHECK(gossip_longest_gap(peers[0].g, GOSSIP_GAP_ANY) == 0 && gossip_longest_gap(peers[1].g, GOSSIP_GAP_ANY) == 0);
	exchange_at(0, 2);
	exchange_at(0, 5);
	CHECKF(gossip_longest_gap(peers[0].g, GOSSIP_GAP_ANY) == 3 && gossip_longest_gap(peers[1].g, GOSSIP_GAP_ANY) == 3,
	    "%g %g", gossip_longest_gap(peers[0].g, GOSSIP_GAP_ANY), gossip_longest_gap(peers[1].g, GOSSIP_GAP_ANY));
	gossip_resumed(peers[0].g, 5.05);
	CHECKF(gossip_longest_gap(peers[0].g, GOSSIP_GAP_ANY) == 1, "%g", gossip_longest_gap(peers[0].g, GOSSIP_GAP_ANY));
	exchange_at(0, 5.5);
	CHECK(gossip_longest_gap(peers[0].g, GOSSIP_GAP_ANY) == 1);
	/* Long after the last exchange: the gap so far was the stop's. */
	gossip_resumed(peers[0].g, 20);
	exchange_at(0, 20.5);
	CHECK(gossip_longest_gap(peers[0].g, GOSSIP_GAP_ANY) == 1);
	CHECKF(gossip_longest_gap(peers[1].g, GOSSIP_GAP_ANY) == 15, "%g", gossip_longest_gap(peers[1].g, GOSSIP_GAP_ANY));
	CHECK(gossip_longest_gap(peers[0].g, GOSSIP_GAP_OWN) == 1);
	CHECK(gossip_exchanges(peers[1].g, GOSSIP_GAP_OWN) == 0);
	exchange_at(1, 21);
	exchange_at(1, 22);
	exchange_at(0, 23.5);
	CHECKF(gossip_longest_gap(peers[0].g, GOSSIP_GAP_ANY) == 1.5, "%g",
	    gossip_longest_gap(peers[0].g, GOSSIP_GAP_ANY));
	CHECKF(gossip_longest_gap(peers[0].g, GOSSIP_GAP_OWN) == 3, "%g",
	    gossip_longest_gap(peers[0].g, GOSSIP_GAP_OWN));
	CHECK(gossip_exchanges(peers[0].g, GOSSIP_GAP_OWN) == 6);
	CHECK(gossip_exchanges(peers[0].g, GOSSIP_GAP_ANY) == 8);
	CHECK(gossip_longest_gap(peers[1].g, GOSSIP_GAP_OWN) == 1);
	teardown();
}

static void
test_busy_timeout_malformed(void)
{
	float *a0, *a1;
	uint8_t junk[10] = { 1 };
	double next;

	/* Dense: both ask at once, each sees the other busy. */
	setup(GOSSIP_DENSE, GOSSIP_FP32, 1.0, "40-20-10", "40-20-10");
	CHECK(gossip_start(peers[0].g, 0.0, peers[1].addr) == 0);
	CHECK(gossip_start(peers[1].g, 0.0, peers[0].addr) == 0);
	pump(0);
	CHECK(peers[0].last == GOSSIP_BUSY && peers[1].last == GOSSIP_BUSY);
	teardown();

	/* Sparse: both ask at once and both exchanges go through. */
	setup(GOSSIP_SAPS, GOSSIP_FP32, 0.05, "40-20-10", "40-20-10");
	CHECK(gossip_start(peers[0].g, 0.0, peers[1].addr) == 0);
	CHECK(gossip_start(peers[1].g, 0.0, peers[0].addr) == 0);
	pump(0);
	CHECK(peers[0].last == GOSSIP_OK && peers[1].last == GOSSIP_OK);
	CHECK(gossip_exchanges(peers[0].g, GOSSIP_GAP_ANY) == 2 && gossip_exchanges(peers[1].g, GOSSIP_GAP_ANY) == 2);

	/* A peer without the job's model answers BUSY to everyone. */
	gossip_set_ready(peers[1].g, 0);
	CHECK(gossip_start(peers[0].g, 0.5, peers[1].addr) == 0);
	pump(0);
	CHECK(peers[0].last == GOSSIP_BUSY);
	gossip_set_ready(peers[1].g, 1);

	/* A lost reply: the initiator fails at its deadline, not before. */
	CHECK(gossip_start(peers[0].g, 1.0, peers[1].addr) == 0);
	pump(1);
	CHECK(gossip_tick(peers[0].g, 2.0) == 3.0);
	CHECK(gossip_active(peers[0].g));
	gossip_tick(peers[0].g, 3.0);
	CHECK(!gossip_active(peers[0].g) && peers[0].last == GOSSIP_FAILED);

	/* A partner known gone fails the exchange at once, not at the
	 * deadline; another peer's going changes nothing. */
	CHECK(gossip_start(peers[0].g, 3.5, peers[1].addr) == 0);
	pump(1);
	gossip_partner_down(peers[0].g, 3.6, "127.0.0.1:1");
	CHECK(gossip_active(peers[0].g));
	gossip_partner_down(peers[0].g, 3.6, peers[1].addr);
	CHECK(gossip_active(peers[0].g));
	CHECK(gossip_tick(peers[0].g, 3.6) < 0);
	CHECK(!gossip_active(peers[0].g) && peers[0].last == GOSSIP_FAILED);
	/* The next exchange with the same peer has its full deadline. */
	CHECK(gossip_start(peers[0].g, 3.7, peers[1].addr) == 0);
	pump(1);
	CHECK(gossip_tick(peers[0].g, 3.8) == 5.7);
	gossip_tick(peers[0].g, 5.7);

	/* An exchange the done callback starts at once keeps its deadline. */
	restart_on_done = 1;
	CHECK(gossip_start(peers[0].g, 4.0, peers[1].addr) == 0);
	pump(1);
	next = gossip_tick(peers[0].g, 6.5);
	CHECKF(next == 8.5, "next deadline %g, want 8.5", next);
	/* A request the transport fails ends at the next tick, which knows
	 * the time: an exchange the done callback starts counts its deadline
	 * from then, not from the failed one's start. */
	restart_on_done = 0;
	gossip_tick(peers[0].g, 9.0);
	pump(1);
	restart_on_done = 1;
	fail_next_send = 1;
	CHECK(gossip_start(peers[0].g, 10.0, peers[1].addr) == 0);
	CHECK(gossip_active(peers[0].g));
	pump(1);
	next = gossip_tick(peers[0].g, 10.5);
	CHECKF(next == 12.5, "next deadline %g, want 12.5", next);
	restart_on_done = 0;
	gossip_tick(peers[0].g, 13.0);
	pump(1);

	/* Garbage and truncated messages change nothing. */
	a0 = snap(peers[0].m);
	gossip_recv(peers[0].g, 4.0, peers[1].addr, GOSSIP_T_REQ, junk, sizeof(junk));
	gossip_recv(peers[0].g, 4.0, peers[1].addr, GOSSIP_T_REPLY, junk, sizeof(junk));
	CHECK(nq == 0);
	a1 = snap(peers[0].m);
	CHECK(memcmp(a0, a1, peers[0].m->d * sizeof(float)) == 0);
	free(a0);
	free(a1);
	teardown();

	/* Different models: refused, nothing mixed. */
	setup(GOSSIP_SAPS, GOSSIP_FP32, 0.05, "40-20-10", "40-21-10");
	a0 = snap(peers[1].m);
	CHECK(gossip_start(peers[0].g, 0.0, peers[1].addr) == 0);
	pump(0);
	CHECK(peers[0].last == GOSSIP_FAILED);
	a1 = snap(peers[1].m);
	CHECK(memcmp(a0, a1, peers[1].m->d * sizeof(float)) == 0);
	free(a0);
	free(a1);
	teardown();
}

/* Deliver the first queued message after poison(values, count) ran on
 * its payload (a REQ or an OK REPLY, fp32). */
static void
deliver_poisoned(void (*poison)(float *v, size_t n))
{
	struct msg q = queue[0];
	size_t hdr = q.type == GOSSIP_T_REQ ? 48 : 32;

	memmove(queue, queue + 1, (size_t)(nq - 1) * sizeof(queue[0]));
	nq--;
	if (poison != NULL)
		poison((float *)(q.buf + hdr), (q.len - hdr) / sizeof(float));
	gossip_recv(peers[q.to].g, 0.5, q.from, q.type, q.buf, q.len);
	free(q.buf);
}

static void
poison_nan(float *v, size_t n)
{
	v[n / 2] = NAN;
}

static void
poison_inf(float *v, size_t n)
{
	(void)n;
	v[0] = -INFINITY;
}

/* Finite, but what a diverging peer sends: far above anyone's weights. */
static void
poison_huge(float *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		v[i] *= 1e6f;
}

static uint64_t
rejected(struct gossip *g, const char *why)
{
	json_t *o = json_object();
	uint64_t n;

	CHECK(gossip_stats_json(g, o) == 0);
	n = (uint64_t)json_integer_value(json_object_get(json_object_get(json_object_get(o,
	    "gossip"), "rejected"), why));
	json_decref(o);
	return n;
}

static int
same(struct model *m, const float *x)
{
	float *y = snap(m);
	int eq = memcmp(x, y, m->d * sizeof(float)) == 0;

	free(y);
	return eq;
}

static void
test_poison(void)
{
	static void (*const poisons[])(float *, size_t) = { poison_nan, poison_inf, poison_huge };
	static const char *const why[] = { "nonfinite", "nonfinite", "far" };
	float *a0, *b0;

	for (size_t k = 0; k < GD_ARRAY_SIZE(poisons); k++) {
		enum gossip_refusal r = k < 2 ? GOSSIP_REFUSE_NONFINITE : GOSSIP_REFUSE_FAR;

		/* A poisoned REQ: the responder refuses it, unchanged, and
		 * answers REFUSED so the initiator's exchange ends now. */
		setup(k == 1 ? GOSSIP_DENSE : GOSSIP_SAPS, GOSSIP_FP32, 0.1, "40-20-10",
		    "40-20-10");
		a0 = snap(peers[0].m);
		b0 = snap(peers[1].m);
		CHECK(gossip_start(peers[0].g, 0.0, peers[1].addr) == 0);
		CHECK(nq == 1 && queue[0].type == GOSSIP_T_REQ);
		deliver_poisoned(poisons[k]);
		CHECKF(same(peers[1].m, b0), "poison %zu: responder's model changed", k);
		CHECK(rejected(peers[1].g, why[k]) == 1 && peers[1].refused[r] == 1);
		CHECK(strcmp(peers[1].refused_from, peers[0].addr) == 0);
		pump(0);
		CHECK(peers[0].done == 1 && peers[0].last == GOSSIP_FAILED);
		CHECK(!gossip_active(peers[0].g) && same(peers[0].m, a0));
		CHECK(rejected(peers[0].g, why[k]) == 0);

		/* A poisoned REPLY: the initiator refuses it, unchanged. */
		CHECK(gossip_start(peers[0].g, 1.0, peers[1].addr) == 0);
		deliver_poisoned(NULL);
		CHECK(nq == 1 && queue[0].type == GOSSIP_T_REPLY && queue[0].buf[1] == 0);
		deliver_poisoned(poisons[k]);
		CHECK(peers[0].done == 2 && peers[0].last == GOSSIP_FAILED);
		CHECKF(same(peers[0].m, a0), "poison %zu: initiator's model changed", k);
		CHECK(rejected(peers[0].g, why[k]) == 1 && peers[0].refused[r] == 1);
		CHECK(strcmp(peers[0].refused_from, peers[1].addr) == 0);
		free(a0);
		free(b0);
		teardown();
	}

	/* Own values not finite: no REQ, a REFUSED REPLY. */
	setup(GOSSIP_DENSE, GOSSIP_FP32, 1.0, "40-20-10", "40-20-10");
	a0 = snap(peers[0].m);
	a0[3] = NAN;
	CHECK(model_restore(peers[0].m, a0, NULL) == 0);
	CHECK(gossip_start(peers[0].g, 0.0, peers[1].addr) == -EDOM);
	CHECK(nq == 0 && !gossip_active(peers[0].g));
	CHECK(gossip_start(peers[1].g, 0.0, peers[0].addr) == 0);
	deliver_poisoned(NULL);
	CHECK(nq == 1 && queue[0].type == GOSSIP_T_REPLY && queue[0].len == 32 &&
	    queue[0].buf[1] != 0);
	pump(0);
	CHECK(peers[1].last == GOSSIP_FAILED);
	free(a0);
	teardown();
}

/* A suspect's request: answered with our values, so an honest member that
 * ran ahead is pulled back near; its values are not mixed. */
static void
test_suspect_served(void)
{
	struct trust *t;
	float *a0, *b0, *a1;

	setup(GOSSIP_DENSE, GOSSIP_FP32, 1.0, "40-20-10", "40-20-10");
	REQUIRE(trust_new(&(struct trust_params){ 2.0 }, &t) == 0);
	gossip_set_trust(peers[1].g, t);
	for (int i = 0; i < 3; i++)
		trust_refused(t, peers[0].addr, 0.0);
	REQUIRE(trust_suspect(t, peers[0].addr));
	a0 = snap(peers[0].m);
	b0 = snap(peers[1].m);
	CHECK(gossip_start(peers[0].g, 0.0, peers[1].addr) == 0);
	pump(0);
	CHECKF(peers[0].done == 1 && peers[0].last == GOSSIP_OK, "done %d last %d",
	    peers[0].done, peers[0].last);
	CHECK(same(peers[1].m, b0));
	CHECK(rejected(peers[1].g, "suspect") == 1 && peers[1].refused[GOSSIP_REFUSE_SUSPECT] == 1);
	CHECK(gossip_exchanges(peers[1].g, GOSSIP_GAP_ANY) == 0 && gossip_exchanges(peers[0].g, GOSSIP_GAP_ANY) == 1);
	a1 = snap(peers[0].m);
	for (size_t i = 0; i < peers[0].m->d; i++)
		CHECKF(a1[i] == (a0[i] + b0[i]) / 2, "coordinate %zu: %g, not the average", i, a1[i]);
	free(a0);
	free(b0);
	free(a1);
	teardown();
	trust_free(t);
}

/* Set m to x + shift on every coordinate. */
static void
shifted(struct model *m, const float *x, float shift)
{
	float *y = malloc(m->d * sizeof(float));

	for (size_t i = 0; i < m->d; i++)
		y[i] = x[i] + shift;
	CHECK(model_restore(m, y, NULL) == 0);
	free(y);
}

/* The responder measures ways from the job's start model, the one it
 * became ready with at step 0: a partner that has come the way this peer
 * came is not behind; one that sends that start model (stale) is, and is
 * suspect after three slices, before trust has a quorum to judge
 * distances by. A responder whose training starts later (at step 7:
 * resumed or joined) has no start to measure from and judges no ways,
 * unless it kept the job's start (origin.h) and is given it. */
static void
behind_from(uint64_t ready_step, int kept)
{
	const struct trust_member *e;
	struct trust *t;
	float *b0;
	int judged = ready_step == 0 || kept;

	setup(GOSSIP_DENSE, GOSSIP_FP32, 1.0, "40-20-10", "40-20-10");
	REQUIRE(trust_new(&(struct trust_params){ 2.0 }, &t) == 0);
	gossip_set_trust(peers[1].g, t);
	if (kept) {
		/* In the daemon's order: not ready, the step, the kept start,
		 * ready. */
		b0 = snap(peers[1].m);
		gossip_set_ready(peers[1].g, 0);
		gossip_start_at(peers[1].g, ready_step);
		CHECK(gossip_set_origin(peers[1].g, b0) == 0);
		gossip_set_ready(peers[1].g, 1);
		CHECK(gossip_origin(peers[1].g) != NULL);
	} else {
		/* As a resumed peer: ready with its model, then told the step
		 * its training starts at. */
		gossip_set_ready(peers[1].g, 1);
		gossip_start_at(peers[1].g, ready_step);
		b0 = snap(peers[1].m);
		CHECK((gossip_origin(peers[1].g) != NULL) == judged);
	}
	for (int k = 0; k < 6; k++) {
		shifted(peers[1].m, b0, 0.5f);
		shifted(peers[0].m, b0, k < 3 ? 0.6f : 0.0f);
		CHECK(gossip_start(peers[0].g, 0.0, peers[1].addr) == 0);
		pump(0);
		e = trust_member(t, peers[0].addr);
		REQUIRE(e != NULL);
		if (k == 2)
			CHECKF(e->suspicion == 0 && e->behind == 0, "suspicion %g behind %llu",
			    e->suspicion, (unsigned long long)e->behind);
	}
	CHECKF(trust_suspect(t, peers[0].addr) == judged && e->behind == (judged ? 3u : 0u),
	    "ready at step %llu: suspicion %g behind %llu", (unsigned long long)ready_step,
	    e->suspicion, (unsigned long long)e->behind);
	CHECK(rejected(peers[1].g, "suspect") == (uint64_t)judged);
	free(b0);
	teardown();
	trust_free(t);
}

static void
test_behind(void)
{
	behind_from(0, 0);
	behind_from(7, 0);
	behind_from(7, 1);
}

/* Peer 0's training is over: its slices, asked for (its REQ) or answered
 * (its REPLY), reach peer 1's trust flagged, and the vote they leave there
 * is the one peer 0 cast while it trained, however near they come; peer
 * 1's, still training, vote their distance at peer 0. */
static void
test_trained(void)
{
	struct trust *t0, *t1;
	const struct trust_member *e0, *e1;
	float *b0;
	double d = -1;

	setup(GOSSIP_DENSE, GOSSIP_FP32, 1.0, "40-20-10", "40-20-10");
	REQUIRE(trust_new(&(struct trust_params){ 2.0 }, &t0) == 0);
	REQUIRE(trust_new(&(struct trust_params){ 2.0 }, &t1) == 0);
	gossip_set_trust(peers[0].g, t0);
	gossip_set_trust(peers[1].g, t1);
	b0 = snap(peers[1].m);
	shifted(peers[0].m, b0, 0.5f);
	/* apart by 0.5, then equal: a dense exchange averages the whole model */
	for (int k = 0; k < 3; k++) {
		if (k == 1) {
			gossip_set_trained(NULL);
			gossip_set_trained(peers[0].g);
		}
		CHECK(gossip_start(peers[k % 2].g, 0.0, peers[1 - k % 2].addr) == 0);
		pump(0);
		CHECK(peers[k % 2].last == GOSSIP_OK);
		e1 = trust_member(t1, peers[0].addr);
		REQUIRE(e1 != NULL);
		if (k == 0)
			d = e1->distance;
	}
	e0 = trust_member(t0, peers[1].addr);
	REQUIRE(e0 != NULL);
	CHECKF(fabs(d - 0.5) < 1e-6 && e1->slices == 3 && e1->distance == d,
	    "peer 0 at peer 1: vote %g, first %g, %llu slices", e1->distance, d,
	    (unsigned long long)e1->slices);
	CHECKF(e0->slices == 3 && e0->distance == 0, "peer 1 at peer 0: vote %g, %llu slices",
	    e0->distance, (unsigned long long)e0->slices);
	free(b0);
	teardown();
	trust_free(t0);
	trust_free(t1);
}

static void
test_select(void)
{
	const char *addrs[] = { "a:1", "b:1", "c:1", "d:1" };
	struct select_params sp = { SELECT_ADAPTIVE, 4.0, 10.0 };
	struct select *s;
	int seen[4] = { 0 };
	uint64_t before;

	CHECK(select_new(&sp, &s) == 0);
	/* Unmeasured links are all candidates. */
	for (int i = 0; i < 400; i++) {
		const char *p = select_pick(s, 0, addrs, 4, NULL);

		for (int j = 0; j < 4; j++)
			seen[j] += p == addrs[j];
	}
	for (int j = 0; j < 4; j++)
		CHECKF(seen[j] > 50, "link %d picked %d times of 400", j, seen[j]);
	/* d is 10x slower than the rest: adaptive leaves it out ... */
	select_record(s, "a:1", 1, 1000000, 0.01, 1);
	select_record(s, "b:1", 1, 1000000, 0.01, 1);
	select_record(s, "c:1", 1, 1000000, 0.01, 1);
	select_record(s, "d:1", 1, 1000000, 0.1, 1);
	for (int i = 0; i < 200; i++)
		CHECK(strcmp(select_pick(s, 2, addrs, 4, NULL), "d:1") != 0);
	/* ... until the connectivity guard brings it back. */
	memset(seen, 0, sizeof(seen));
	before = select_link(s, "d:1")->selected;
	for (int i = 0; i < 50; i++) {
		const char *p = select_pick(s, 20, addrs, 4, NULL);

		seen[3] += strcmp(p, "d:1") == 0;
		if (strcmp(p, "d:1") == 0)
			break;
	}
	CHECK(seen[3] == 1);
	CHECK(select_link(s, "d:1")->selected == before + 1);
	/* Random ignores bandwidth. */
	sp.policy = SELECT_RANDOM;
	select_set_params(s, &sp);
	memset(seen, 0, sizeof(seen));
	for (int i = 0; i < 400; i++)
		seen[3] += strcmp(select_pick(s, 21, addrs, 4, NULL), "d:1") == 0;
	CHECKF(seen[3] > 50, "random picked the slow link %d times of 400", seen[3]);
	/* A failed link sits out its backoff; exclude skips the busy one. */
	select_record(s, "a:1", 30, 0, 0, 0);
	for (int i = 0; i < 100; i++) {
		const char *p = select_pick(s, 30.1, addrs, 4, "b:1");

		CHECK(strcmp(p, "a:1") != 0 && strcmp(p, "b:1") != 0);
	}
	CHECK(select_pick(s, 30.1, addrs, 1, NULL) == NULL);
	CHECK(select_pick(s, 40, addrs, 1, NULL) != NULL);
	/* An offender sits out 2 s, then 4 s if it offends again soon ... */
	select_offence(s, "b:1", 50, 0);
	CHECK(select_link(s, "b:1")->offences[0] == 1);
	CHECK(select_pick(s, 51.9, addrs + 1, 1, NULL) == NULL);
	CHECK(select_pick(s, 52.1, addrs + 1, 1, NULL) != NULL);
	select_offence(s, "b:1", 52.1, 1);
	CHECK(select_pick(s, 56.0, addrs + 1, 1, NULL) == NULL);
	CHECK(select_pick(s, 56.2, addrs + 1, 1, NULL) != NULL);
	/* ... and the penalty decays: much later, 2 s again. */
	select_offence(s, "b:1", 1000, 1);
	CHECK(select_link(s, "b:1")->offences[1] == 2);
	CHECK(select_pick(s, 1002.1, addrs + 1, 1, NULL) != NULL);
	/* A refusal noted without a sit-out (a suspect's) is counted only. */
	for (int i = 0; i < 5; i++)
		select_note_refusal(s, "b:1", 2);
	CHECK(select_link(s, "b:1")->offences[2] == 5);
	CHECK(select_pick(s, 1002.2, addrs + 1, 1, NULL) != NULL);
	select_free(s);
}
/* A REQ whose density and block no mask can hold (issue 18.2: a block
 * longer than its stratum once divided by zero): refused before any
 * arithmetic, counted as bad_mask, the model untouched, the peer fine. */
static void
test_bad_mask(void)
{
	json_t *st = json_object();
	float *a0, *a1;

	setup(GOSSIP_SAPS, GOSSIP_FP32, 0.9, "40-20-10", "40-20-10");
	a0 = snap(peers[1].m);
	CHECK(gossip_start(peers[0].g, 0.0, peers[1].addr) == 0);
	CHECK(nq == 1 && queue[0].type == GOSSIP_T_REQ);
	/* d = 1030, k = 927: blocks of 520 make 2 strata of 515 */
	wire_put_u32(queue[0].buf + 4, 520);
	pump(0);
	CHECK(peers[0].last == GOSSIP_FAILED);
	a1 = snap(peers[1].m);
	CHECK(memcmp(a0, a1, peers[1].m->d * sizeof(float)) == 0);
	CHECK(gossip_stats_json(peers[1].g, st) == 0);
	CHECK(json_integer_value(json_object_get(json_object_get(st, "gossip"), "bad_mask")) == 1);
	/* and the next, sound exchange goes through */
	CHECK(gossip_start(peers[0].g, 1.0, peers[1].addr) == 0);
	pump(0);
	CHECK(peers[0].last == GOSSIP_OK);
	json_decref(st);
	free(a0);
	free(a1);
	teardown();
}

/* Move coordinates of m by delta[i] at idx[i]. */
static void
nudge(struct model *m, const size_t *idx, const float *delta, size_t n)
{
	float *x = snap(m);

	for (size_t i = 0; i < n; i++)
		x[idx[i]] += delta[i];
	CHECK(model_restore(m, x, NULL) == 0);
	free(x);
}

/* Which coordinates of peer 0 an exchange changed, in order; returns how
 * many (at most max). */
static size_t
exchanged(size_t *out, size_t max)
{
	float *a0 = snap(peers[0].m), *a1;
	size_t n = 0;

	CHECK(gossip_start(peers[0].g, 0.0, peers[1].addr) == 0);
	pump(0);
	CHECK(peers[0].last == GOSSIP_OK);
	a1 = snap(peers[0].m);
	for (size_t i = 0; i < peers[0].m->d; i++)
		if (a1[i] != a0[i] && n < max)
			out[n++] = i;
	free(a0);
	free(a1);
	return n;
}

/* Delta: the coordinates that moved most go first, the ones left behind
 * (the residual) go in the next exchange; a mixed coordinate has no drift
 * left. A coded mask that does not decode changes nothing. */
static void
test_delta(void)
{
	static const size_t big[] = { 5, 300, 1020 }, mid[] = { 17, 600, 1029 };
	static const float bigd[] = { 9, -8, 7 }, midd[] = { 3, -2, 2.5f };
	size_t got[8], n;
	uint8_t *req;
	float *b0, *b1;
	size_t rlen;

	setup(GOSSIP_DELTA, GOSSIP_FP32, 0.5, "40-20-10", "40-20-10");
	CHECK(peers[0].m->d == 1030);
	/* The first exchange anchors peer 0 at its model, where every drift
	 * is 0: half the model, drawn at random (three random coordinates
	 * could be small enough for the partner's to look far). */
	CHECK(exchanged(got, 8) == 8);
	gossip_set_params(peers[0].g, &(struct gossip_params){ GOSSIP_DELTA, GOSSIP_FP32,
	    3.0 / 1030, 4, 99, 2.0 });
	nudge(peers[0].m, big, bigd, 3);
	nudge(peers[0].m, mid, midd, 3);
	n = exchanged(got, 8);
	CHECKF(n == 3 && got[0] == 5 && got[1] == 300 && got[2] == 1020,
	    "first pick %zu: %zu %zu %zu", n, got[0], got[1], got[2]);
	n = exchanged(got, 8);
	CHECKF(n == 3 && got[0] == 17 && got[1] == 600 && got[2] == 1029,
	    "second pick %zu: %zu %zu %zu", n, got[0], got[1], got[2]);

	/* a mask past d, and one byte short: dropped as malformed (coordinates
	 * 1, 2, 3 drifted most: the mask is the three bytes 1, 0, 0) */
	b0 = snap(peers[1].m);
	for (int t = 0; t < 2; t++) {
		static const size_t low[] = { 1, 2, 3 };
		static const float lowd[] = { 5, 5, 5 };
		json_t *st = json_object();

		nudge(peers[0].m, low, lowd, 3);
		CHECK(gossip_start(peers[0].g, 1.0, peers[1].addr) == 0);
		CHECK(nq == 1 && memcmp(queue[0].buf + 48, "\x01\x00\x00", 3) == 0);
		CHECK(nq == 1);
		req = queue[0].buf;
		rlen = queue[0].len;
		/* the three one-byte indices become one, 16384, or lose a byte */
		if (t == 0)
			memcpy(req + 48, "\x80\x80\x01", 3);
		else
			memmove(req + 48, req + 49, --rlen - 48);
		gossip_recv(peers[1].g, 1.0, peers[0].addr, GOSSIP_T_REQ, req, rlen);
		free(queue[0].buf);
		nq = 0;
		gossip_tick(peers[0].g, 10.0);
		CHECK(gossip_stats_json(peers[1].g, st) == 0);
		CHECKF(json_integer_value(json_object_get(json_object_get(st, "gossip"),
		    "malformed")) == t + 1, "case %d", t);
		json_decref(st);
	}
	b1 = snap(peers[1].m);
	CHECK(memcmp(b0, b1, peers[1].m->d * sizeof(float)) == 0);
	free(b0);
	free(b1);
	teardown();
}

/* Delta anchors where the job's model starts (gossip_set_ready), not at
 * the first selection: the steps before the first exchange are sent too. */
static void
test_delta_start(void)
{
	static const size_t big[] = { 5, 300, 1020 };
	static const float bigd[] = { 9, -8, 7 };
	size_t got[8], n;

	setup(GOSSIP_DELTA, GOSSIP_FP32, 3.0 / 1030, "40-20-10", "40-20-10");
	gossip_set_ready(peers[0].g, 1);
	nudge(peers[0].m, big, bigd, 3);
	n = exchanged(got, 8);
	CHECKF(n == 3 && got[0] == 5 && got[1] == 300 && got[2] == 1020,
	    "first pick %zu: %zu %zu %zu", n, got[0], got[1], got[2]);
	teardown();
}

/* The layout of gossip_wire.h, byte for byte: peers of older builds
 * read these. */
static void
test_codec(void)
{
	static const uint8_t want_req[] = {
		1, 2, 0, 0, 0, 0, 0, 0,                 /* version, delta, fp32, block 0 */
		8, 7, 6, 5, 4, 3, 2, 1,                 /* nonce */
		100, 0, 0, 0, 0, 0, 0, 0,               /* d */
		3, 0, 0, 0, 0, 0, 0, 0,                 /* count */
		0, 0, 0, 0, 0, 0, 0xd0, 0x3f,           /* density 0.25 */
		7, 0, 0, 0, 0, 0, 0, 0,                 /* step */
		3, 1, 3,                                /* 3, 5, 9: gaps past the last */
		0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0x40, 0x40, /* 1, 2, 3 */
	};
	const float v[3] = { 1, 2, 3 };
	struct gossip_req q = { .mode = GOSSIP_DELTA, .values = GOSSIP_FP32, .block = 64,
	    .nonce = 0x0102030405060708ull, .d = 100, .count = 3, .step = 7, .density = 0.25 };
	struct gossip_reply r = { .status = GOSSIP_REPLY_OK, .values = GOSSIP_INT8, .nonce = 9,
	    .count = 3, .step = 11 }, rd;
	struct gossip_req qd;
	struct errbuf err;
	struct mask mk = { 0 };
	uint8_t buf[128];
	size_t len, n;
	float back[3];

	REQUIRE(mask_add(&mk, 3) == 0 && mask_add(&mk, 5) == 0 && mask_add(&mk, 9) == 0);
	CHECK(gossip_req_encode(&q, &mk, v, buf, 60, &len) == -EMSGSIZE);
	REQUIRE(gossip_req_encode(&q, &mk, v, buf, sizeof(buf), &len) == 0);
	CHECKF(len == sizeof(want_req) && memcmp(buf, want_req, len) == 0, "%zu bytes", len);
	REQUIRE(gossip_req_decode(buf, len, &qd, &err) == 0);
	CHECK(qd.mode == GOSSIP_DELTA && qd.values == GOSSIP_FP32 && qd.block == 0 &&
	    qd.nonce == q.nonce && qd.d == 100 && qd.count == 3 && qd.step == 7 &&
	    qd.density == 0.25 && qd.ilen == 3 && qd.idx == buf + 48 && qd.vals == buf + 51);
	/* Short of the values: refused here; short of indices: by mask_decode. */
	for (n = 0; n < 48 + 12; n++)
		CHECKF(gossip_req_decode(buf, n, &qd, &err) == -EBADMSG, "%zu bytes", n);
	for (; n < len; n++)
		CHECKF(gossip_req_decode(buf, n, &qd, &err) == 0 && mask_decode(&mk, qd.idx,
		    qd.ilen, qd.count, qd.d) == -EINVAL, "%zu bytes", n);
	/* saps: the block travels, no index does, so a byte more is one too many */
	q.mode = GOSSIP_SAPS;
	REQUIRE(gossip_req_encode(&q, NULL, v, buf, sizeof(buf), &len) == 0);
	CHECK(len == 48 + 12 && buf[1] == 0 && wire_get_u32(buf + 4) == 64);
	CHECK(gossip_req_decode(buf, len, &qd, &err) == 0 && qd.ilen == 0 && qd.block == 64);
	CHECK(gossip_req_decode(buf, len + 1, &qd, &err) == -EBADMSG);
	/* the flags' byte: set ones read back, unknown ones are no error */
	q.flags = GOSSIP_WIRE_TRAINED;
	REQUIRE(gossip_req_encode(&q, NULL, v, buf, sizeof(buf), &len) == 0);
	CHECK(buf[3] == GOSSIP_WIRE_TRAINED && gossip_req_decode(buf, len, &qd, &err) == 0 &&
	    qd.flags == GOSSIP_WIRE_TRAINED);
	buf[3] = 0xfe;
	CHECK(gossip_req_decode(buf, len, &qd, &err) == 0 && !(qd.flags & GOSSIP_WIRE_TRAINED));
	buf[1] = GOSSIP_MODE_N;
	CHECK(gossip_req_decode(buf, len, &qd, &err) == -EBADMSG);
	/* mode share has no exchange: a REQ naming it is malformed */
	buf[1] = gossip_mode_row(GOSSIP_SHARE)->wire;
	CHECK(gossip_req_decode(buf, len, &qd, &err) == -EBADMSG);

	REQUIRE(gossip_reply_encode(&r, v, buf, sizeof(buf), &len) == 0);
	CHECK(len == 32 + 4 + 3 && buf[0] == 1 && buf[1] == 0 && buf[2] == GOSSIP_INT8 &&
	    wire_get_u64(buf + 8) == 9 && wire_get_u64(buf + 16) == 3 &&
	    wire_get_u64(buf + 24) == 11);
	for (n = 0; n < 32; n++)
		CHECKF(gossip_reply_decode(buf, n, &rd, &err) == -EBADMSG, "%zu bytes", n);
	for (; n < len; n++)
		CHECKF(gossip_reply_decode(buf, n, &rd, &err) == 0 &&
		    gossip_reply_check(&rd, GOSSIP_INT8, 3, &err) == -EBADMSG, "%zu bytes", n);
	REQUIRE(gossip_reply_decode(buf, len, &rd, &err) == 0);
	CHECK(rd.flags == 0 && buf[3] == 0);
	CHECK(gossip_reply_check(&rd, GOSSIP_INT8, 3, &err) == 0 &&
	    gossip_reply_check(&rd, GOSSIP_FP32, 3, &err) == -EBADMSG &&
	    gossip_reply_check(&rd, GOSSIP_INT8, 2, &err) == -EBADMSG);
	gossip_values_get(back, rd.vals, 3, GOSSIP_INT8);
	CHECK(fabsf(back[2] - 3) < 1e-6f && fabsf(back[0] - 1) < 0.02f);
	/* BUSY and REFUSED carry a header only */
	r.status = GOSSIP_REPLY_BUSY;
	CHECK(gossip_reply_encode(&r, NULL, buf, 32, &len) == 0 && len == 32);
	mask_free(&mk);
}

/* int2: per block of 64 the signs and two magnitudes, the means of the
 * magnitudes up to and above the block's mean, so a block of two sizes
 * comes back exact; the last block's codes end on a padded byte. A REQ
 * in int2 is malformed: an exchange sends a model's own values. */
static void
test_int2(void)
{
	static const float tail[6] = { 1, -2, 3, 6, -0.5f, 0.5f };
	float v[70], back[70];
	uint8_t buf[40], req[GOSSIP_REQ_HEADER + 4];
	struct gossip_req q = { .mode = GOSSIP_SAPS, .values = GOSSIP_FP32, .block = 1,
	    .nonce = 1, .d = 1, .count = 1, .density = 1 }, qd;
	struct errbuf err;
	size_t len;
	float one = 1;

	for (int i = 0; i < 64; i++)
		v[i] = (i % 2 ? -1.0f : 1.0f) * (i < 16 ? 4.0f : 1.0f);
	memcpy(v + 64, tail, sizeof(tail));
	CHECK(gossip_values_bytes(GOSSIP_INT2, 70) == 8 + 16 + 8 + 2);
	CHECK(gossip_values_bytes(GOSSIP_INT2, 64) == 24 && gossip_values_bytes(GOSSIP_INT2, 1) == 9);
	memset(buf, 0xff, sizeof(buf));
	gossip_values_put(buf, v, 70, GOSSIP_INT2);
	gossip_values_get(back, buf, 70, GOSSIP_INT2);
	CHECK(memcmp(back, v, 64 * sizeof(float)) == 0);
	/* the tail's mean magnitude is 13 / 6: 1, 2 and the halves go to
	 * their mean 1, 3 and 6 to 4.5 */
	CHECKF(back[64] == 1 && back[65] == -1 && back[66] == 4.5f && back[67] == 4.5f &&
	    back[68] == -1 && back[69] == 1, "%g %g %g %g %g %g", back[64], back[65], back[66],
	    back[67], back[68], back[69]);
	CHECKF(buf[33] >> 4 == 0, "padding %#x", buf[33]);
	REQUIRE(gossip_req_encode(&q, NULL, &one, req, sizeof(req), &len) == 0);
	CHECK(gossip_req_decode(req, len, &qd, &err) == 0);
	req[2] = GOSSIP_INT2;
	CHECK(gossip_req_decode(req, len, &qd, &err) == -EBADMSG);
	CHECK(gossip_values_for_whole(GOSSIP_INT2) == GOSSIP_INT8 &&
	    gossip_values_for_whole(GOSSIP_FP16) == GOSSIP_FP16);
}

static void
test_exchange_saps_fp32(void)
{
	test_exchange(GOSSIP_SAPS, GOSSIP_FP32);
}

static void
test_exchange_dense_fp32(void)
{
	test_exchange(GOSSIP_DENSE, GOSSIP_FP32);
}

static void
test_exchange_saps_fp16(void)
{
	test_exchange(GOSSIP_SAPS, GOSSIP_FP16);
}

static void
test_exchange_saps_int8(void)
{
	test_exchange(GOSSIP_SAPS, GOSSIP_INT8);
}

static void
test_exchange_delta_fp32(void)
{
	test_exchange(GOSSIP_DELTA, GOSSIP_FP32);
}

static void
test_exchange_delta_int8(void)
{
	test_exchange(GOSSIP_DELTA, GOSSIP_INT8);
}

/* What the log says of a stall, read back from stderr: own rounds at 1, 4,
 * 5, 6 and 7.5 s (the 3 s gap comes before there are rounds enough for a
 * mean, the 1.5 s one is within twice it: neither is logged), then a try
 * that meets a busy partner half a second on and a round that mixes only
 * at 13 s, over three times the mean; then a closing phase's pace, rounds
 * a tenth of a millisecond apart and one 0.2 s on, far above their mean
 * but too short a wait to tell of. */
static void
test_stall_log(void)
{
	char text[4096] = "";
	FILE *f = tmpfile();
	int saved = dup(STDERR_FILENO);
	size_t n;

	CHECK(f != NULL && saved >= 0);
	if (f == NULL || saved < 0) {
		if (f != NULL)
			fclose(f);
		if (saved >= 0)
			close(saved);
		return;
	}
	setup(GOSSIP_SAPS, GOSSIP_FP32, 0.1, "40-20-10", "40-20-10");
	CHECK(dup2(fileno(f), STDERR_FILENO) >= 0);
	exchange_at(0, 1);
	exchange_at(0, 4);
	exchange_at(0, 5);
	exchange_at(0, 6);
	exchange_at(0, 7.5);
	gossip_set_ready(peers[1].g, 0);
	CHECK(gossip_start(peers[0].g, 8, peers[1].addr) == 0);
	pump_at(8, 0);
	CHECK(peers[0].last == GOSSIP_BUSY);
	gossip_set_ready(peers[1].g, 1);
	exchange_at(0, 13);
	teardown();
	/* Back to back, as a closing phase goes: far above the mean, but a
	 * wait of 0.2 s. */
	setup(GOSSIP_SAPS, GOSSIP_FP32, 0.1, "40-20-10", "40-20-10");
	for (int i = 0; i <= 8; i++)
		exchange_at(0, 1 + 0.0001 * i);
	exchange_at(0, 1.2008);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	CHECKF(strstr(text, "5.50 s between own rounds, 3.4x their mean 1.62 s: the first try began "
	    "0.50 s after the last round, 1 tries that mixed nothing (1 busy, 0 failed); the "
	    "exchange that mixed, with 127.0.0.1:") != NULL, "%s", text);
	CHECKF(strstr(text, "3.00 s between") == NULL && strstr(text, "1.50 s between") == NULL &&
	    strstr(text, "0.20 s between") == NULL, "%s", text);
	teardown();
}

static const struct check_case cases[] = {
	{ "gossip_exchange_saps_fp32", test_exchange_saps_fp32 },
	{ "gossip_exchange_dense_fp32", test_exchange_dense_fp32 },
	{ "gossip_exchange_saps_fp16", test_exchange_saps_fp16 },
	{ "gossip_exchange_saps_int8", test_exchange_saps_int8 },
	{ "gossip_exchange_delta_fp32", test_exchange_delta_fp32 },
	{ "gossip_exchange_delta_int8", test_exchange_delta_int8 },
	{ "gossip_delta_residual", test_delta },
	{ "gossip_delta_start", test_delta_start },
	{ "gossip_busy_timeout_malformed", test_busy_timeout_malformed },
	{ "gossip_bad_mask", test_bad_mask },
	{ "gossip_poison", test_poison },
	{ "gossip_suspect_served", test_suspect_served },
	{ "gossip_behind", test_behind },
	{ "gossip_trained", test_trained },
	{ "gossip_select", test_select },
	{ "gossip_codec", test_codec },
	{ "gossip_int2", test_int2 },
	{ "gossip_gap", test_gap },
	{ "gossip_stall_log", test_stall_log },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	if (sodium_init() < 0)
		return 99;
	return check_main(argc, argv, cases, "test_gossip");
}
