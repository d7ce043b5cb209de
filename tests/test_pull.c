/*
 * test_pull: the model pull between in-memory peers with real models of
 * two chunks (784-100-10, 79510 parameters), wired through a fake send
 * into one queue and a fake clock. A joiner pulls from 1, 2 and 3 donors
 * (waiting for more members first when it knows fewer than 3) and ends
 * with the donors' average and lower median step (one donor's false step
 * moves nothing); a donor that goes down
 * mid-pull is made up for, and when every donor is gone the next members
 * are asked; deadlines fail silent donors and re-ask chunks nobody
 * answered; corrupt, short, misaddressed and misplaced chunks are dropped
 * and counted; a donor that sends a non-finite or far chunk is dropped for
 * the whole model; a model of more chunks than the window is asked a
 * window at a time, each chunk with its own deadline. The donor side serves exact slices, errors for what it
 * cannot serve, and nothing while it is itself still pulling. Values
 * travel in the format asked: a joiner into a running job asks for the
 * job's (int8: from three donors under 1.2 times the model in fp32, its
 * model the donors' average within int8's rounding), a start agreement
 * for fp32 (the starter's model bit for bit); a CHUNK whose length is not
 * its format's, or whose format is unknown, is malformed. A joiner
 * that knows no live member says so after a second and gives up after its
 * wait, unless a member appears first. Donors whose training is over
 * are dropped while members still training are left to pull from. A
 * start agreement's requests carry its process's digest, and a member
 * that started the job from that model, before its step
 * PULL_SAME_STEPS, answers so without values: the peer starts from its
 * own, having asked one chunk.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "check.h"
#include "gossip_wire.h"
#include "log.h"
#include "pull.h"
#include "rng.h"
#include "simnet.h"
#include "util.h"
#include "wire.h"

#define NPEER	8		/* the joiner (0) and up to seven donors */
#define QMAX	256
#define SPEC	"784-100-10"
#define SPEC_BIG "784-2800-10"	/* 2226010 parameters: 34 chunks */
#define TIMEOUT	2.0

struct peer {
	char addr[32];
	struct model *m;
	struct pull *p;
	float *x;		/* its model's values */
	int up;
};

struct msg {
	int from, to;
	uint8_t type;
	uint8_t *buf;
	size_t len;
};

static struct peer peers[NPEER];
static int npeers;
static size_t d;
static struct msg queue[QMAX], held[QMAX];
static int nq, nheld;
static double now;

/* What the joiner's ops->pulled was given, and what it answers. */
static int pulled, pulled_rc;
static float *pulled_x;
static uint64_t pulled_step;
static char pulled_donors[512];
/* The joiner's ops->gave_up: how often, and why the last time. */
static int gave_up;
static char gave_up_why[256];
/* ops->own: how often each peer started from its own model, and why the
 * last time. */
static int owned[NPEER];
static char owned_why[256];

static int
fake_send(void *arg, const char *addr, uint8_t type, const void *buf, size_t len,
    void (*cb)(void *, int), void *cbarg)
{
	struct peer *from = arg;
	struct msg *q;

	REQUIRE(cb == NULL && cbarg == NULL);
	REQUIRE(type == PULL_T_PULL || type == PULL_T_CHUNK);
	if (!from->up)
		return -ESHUTDOWN;
	REQUIRE(nq < QMAX);
	q = &queue[nq++];
	q->from = (int)(from - peers);
	q->to = SIMNET_BY_ADDR(peers, npeers, addr);
	q->type = type;
	q->buf = xmalloc(len);
	memcpy(q->buf, buf, len);
	q->len = len;
	return 0;
}

/* Added to every peer's step. */
static uint64_t step_base;

static uint64_t
fake_step(void *arg)
{
	return step_base + 10 + (uint64_t)((struct peer *)arg - peers);
}

static int
fake_pulled(void *arg, const float *params, uint64_t step, const char *donors)
{
	REQUIRE(arg == &peers[0]);
	pulled++;
	/* What the daemon does: the joiner serves this model from now on. */
	REQUIRE(model_restore(peers[0].m, params, NULL) == 0);
	memcpy(pulled_x, params, d * sizeof(float));
	pulled_step = step;
	snprintf(pulled_donors, sizeof(pulled_donors), "%s", donors);
	return pulled_rc;
}

static void
fake_own(void *arg, const char *why)
{
	owned[(struct peer *)arg - peers]++;
	snprintf(owned_why, sizeof(owned_why), "%s", why);
}

static void
fake_gave_up(void *arg, const char *why)
{
	REQUIRE(arg == &peers[0]);
	gave_up++;
	snprintf(gave_up_why, sizeof(gave_up_why), "%s", why);
}

/* The joiner and n donors, each donor's model its own (close enough to
 * the others' that none is far). */
static void
setup_spec(int n, const char *model)
{
	struct pull_ops ops = { fake_send, fake_step, fake_pulled, fake_own, fake_gave_up, NULL };
	struct model_spec spec;
	struct errbuf err;
	struct rng r;

	REQUIRE(model_spec_parse(model, &spec, &err) == 0);
	npeers = n + 1;
	for (int i = 0; i < npeers; i++) {
		struct peer *pe = &peers[i];

		snprintf(pe->addr, sizeof(pe->addr), "10.0.0.%d:%d", i, 7000 + i);
		REQUIRE(model_new(&spec, "cpu", 1, 8, 100 + (uint64_t)i, &pe->m, &err) == 0);
		d = pe->m->d;
		pe->x = xmalloc(d * sizeof(float));
		rng_init(&r, 1, "test_pull", (uint64_t)i, 0);
		for (size_t k = 0; k < d; k++)
			pe->x[k] = (float)rng_uniform(&r) - 0.5f + 0.1f * (float)i;
		REQUIRE(model_restore(pe->m, pe->x, NULL) == 0);
		ops.arg = pe;
		REQUIRE(pull_new(pe->m, TIMEOUT, i == 0, &ops, &pe->p) == 0);
		pe->up = 1;
	}
	pulled = pulled_rc = gave_up = 0;
	memset(owned, 0, sizeof(owned));
	pulled_x = xmalloc(d * sizeof(float));
	now = 0;
}

static void
setup(int n)
{
	setup_spec(n, SPEC);
}

static void
drop(struct msg *q)
{
	free(q->buf);
}

static void
teardown(void)
{
	for (int i = 0; i < nq; i++)
		drop(&queue[i]);
	for (int i = 0; i < nheld; i++)
		drop(&held[i]);
	nq = nheld = 0;
	for (int i = 0; i < npeers; i++) {
		pull_free(peers[i].p);
		model_free(peers[i].m);
		free(peers[i].x);
	}
	free(pulled_x);
}

static void
deliver(struct msg *q)
{
	if (q->to >= 0 && peers[q->to].up)
		pull_recv(peers[q->to].p, now, peers[q->from].addr, q->type, q->buf, q->len);
	drop(q);
}

/* Deliver the queue, and what that sends, in order; CHUNKs are put aside
 * in held[] when hold is set, or lost when they come from lose. */
static void
pump(int hold, int lose)
{
	while (nq > 0) {
		struct msg q = queue[0];

		memmove(queue, queue + 1, (size_t)(nq - 1) * sizeof(queue[0]));
		nq--;
		if (q.type == PULL_T_CHUNK && q.from == lose) {
			drop(&q);
		} else if (q.type == PULL_T_CHUNK && hold) {
			REQUIRE(nheld < QMAX);
			held[nheld++] = q;
		} else {
			deliver(&q);
		}
	}
}

/* Live donors' addresses, the first n of them. */
static size_t
live(const char **out, int n)
{
	size_t k = 0;

	for (int i = 1; i < npeers && (int)k < n; i++)
		if (peers[i].up)
			out[k++] = peers[i].addr;
	return k;
}

static void
members(int n)
{
	const char *addrs[NPEER];

	pull_members(peers[0].p, now, addrs, live(addrs, n));
}

/* A counter of peer i's stats section sect; -1 when absent. */
static long long
peer_stat(int i, const char *sect, const char *key)
{
	json_t *o = json_object(), *s;
	long long v = -1;

	REQUIRE(pull_stats_json(peers[i].p, o) == 0);
	if ((s = json_object_get(o, sect)) != NULL)
		v = json_integer_value(json_object_get(s, key));
	json_decref(o);
	return v;
}

/* The joiner's. */
static long long
jstat(const char *sect, const char *key)
{
	return peer_stat(0, sect, key);
}

/* The donors the running pull chose, as peer indices; returns how many. */
static int
chosen(int out[PULL_MAX_DONORS])
{
	json_t *o = json_object(), *a;
	int n = 0;

	REQUIRE(pull_stats_json(peers[0].p, o) == 0);
	a = json_object_get(json_object_get(o, "bootstrap"), "donors");
	for (size_t i = 0; i < json_array_size(a); i++)
		out[n++] = SIMNET_BY_ADDR(peers, npeers,
		    json_string_value(json_array_get(a, i)));
	json_decref(o);
	return n;
}

/* Does the pulled model equal on [off, off + len) the mean of the models
 * of donors who[0..n)? One donor's must come through bit for bit. */
static int
mean_of(size_t off, size_t len, const int *who, int n)
{
	for (size_t k = off; k < off + len; k++) {
		float sum = 0;

		for (int i = 0; i < n; i++)
			sum += peers[who[i]].x[k];
		if (n == 1 ? pulled_x[k] != sum : fabsf(pulled_x[k] - sum / (float)n) > 1e-5f) {
			fprintf(stderr, "parameter %zu: %g, want %g\n", k, pulled_x[k],
			    sum / (float)n);
			return 0;
		}
	}
	return 1;
}

/* Send request r to donor `to` as peer `from` and return its CHUNK,
 * decoded, left in queue[0]. */
static void
ask_req(int from, int to, const struct pull_req *r, struct pull_chunk *c)
{
	uint8_t buf[PULL_REQ_MAX];
	size_t len = pull_req_encode(buf, r);

	pull_recv(peers[to].p, 0, peers[from].addr, PULL_T_PULL, buf, len);
	REQUIRE(nq == 1 && queue[0].type == PULL_T_CHUNK && queue[0].to == from);
	REQUIRE(pull_chunk_decode(queue[0].buf, queue[0].len, c) == 0);
}

/* Ask donor `to` for [off, off+len) in fmt, as a joiner that takes no
 * done donor. */
static void
ask_in(int from, int to, uint64_t id, uint64_t off, uint64_t len, enum gossip_values fmt,
    struct pull_chunk *c)
{
	struct pull_req r = { id, off, len, fmt, 0, 0, { 0 } };

	ask_req(from, to, &r, c);
}

static void
ask(int from, int to, uint64_t id, uint64_t off, uint64_t len, struct pull_chunk *c)
{
	ask_in(from, to, id, off, len, GOSSIP_FP32, c);
}

static void
flush(void)
{
	for (int i = 0; i < nq; i++)
		drop(&queue[i]);
	nq = 0;
}

static void
test_codec_and_donor(void)
{
	uint8_t buf[PULL_CHUNK_HEADER + 8];
	struct pull_chunk c;
	struct pull_req r;
	json_t *o;
	float v[50];

	setup(1);
	/* An exact slice, with the donor's step. */
	ask(0, 1, 5, 100, 50, &c);
	CHECK(c.id == 5 && c.off == 100 && c.len == 50 && c.step == 11 && c.status == 0);
	memcpy(v, c.values, sizeof(v));
	CHECK(memcmp(v, peers[1].x + 100, sizeof(v)) == 0);
	CHECK(pull_chunk_decode(queue[0].buf, 5, &c) == -EBADMSG);
	CHECK(pull_chunk_decode(queue[0].buf, queue[0].len - 4, &c) == -EBADMSG);
	flush();
	/* The last chunk's length at the end of the model, then past it. */
	ask(0, 1, 6, d - PULL_CHUNK_FLOATS, PULL_CHUNK_FLOATS, &c);
	CHECK(c.status == 0 && c.len == PULL_CHUNK_FLOATS);
	flush();
	ask(0, 1, 7, d - 10, 50, &c);
	CHECK(c.status == -ERANGE && c.id == 7 && queue[0].len == PULL_CHUNK_HEADER);
	flush();
	ask(0, 1, 8, 0, PULL_CHUNK_FLOATS + 1, &c);
	CHECK(c.status == -ERANGE);
	/* An error CHUNK carries nothing more; statuses are never positive. */
	memset(buf, 0, sizeof(buf));
	memcpy(buf, queue[0].buf, PULL_CHUNK_HEADER);
	CHECK(pull_chunk_decode(buf, sizeof(buf), &c) == -EBADMSG);
	wire_put_u32(buf + 32, 1);
	CHECK(pull_chunk_decode(buf, PULL_CHUNK_HEADER, &c) == -EBADMSG);
	flush();
	/* The joiner serves nothing before its model is in. */
	ask(1, 0, 9, 0, 10, &c);
	CHECK(c.status == -EAGAIN);
	flush();
	/* A PULL of the wrong size goes unanswered, counted. */
	pull_recv(peers[1].p, 0, peers[0].addr, PULL_T_PULL, buf, PULL_REQ_SIZE - 1);
	CHECK(nq == 0 && pull_req_decode(buf, PULL_REQ_SIZE + 1, &r) == -EBADMSG);
	/* Own values not finite: an error, never the values. */
	peers[1].x[3] = NAN;
	REQUIRE(model_restore(peers[1].m, peers[1].x, NULL) == 0);
	ask(0, 1, 10, 0, 10, &c);
	CHECK(c.status == -EDOM);
	flush();
	o = json_object();
	CHECK(pull_stats_json(peers[1].p, o) == 0);
	CHECK(json_integer_value(json_object_get(json_object_get(o, "pull"),
	    "chunks_served")) == 2);
	CHECK(json_integer_value(json_object_get(json_object_get(o, "pull"), "malformed")) == 1);
	CHECK(json_integer_value(json_object_get(json_object_get(o, "pull"),
	    "own_nonfinite")) == 1);
	CHECK(json_object_get(o, "bootstrap") == NULL);
	json_decref(o);
	teardown();
}

/* A donor answers in the format asked, its values within that format's
 * rounding (values here within 0.6 of 0). A CHUNK of a byte more or less
 * than its format's length, one relabelled to a format of another
 * length, and one of an unknown format are malformed; so is a PULL that
 * asks for an unknown format, and it goes unanswered. int2 is a share's
 * format, never a model's: asked or answered, it is malformed too. */
static void
test_codec_formats(void)
{
	static const float tol[GOSSIP_VALUES_N] = {
		[GOSSIP_FP32] = 0, [GOSSIP_FP16] = 0.6f / 2048, [GOSSIP_INT8] = 0.6f / 254,
	};
	uint8_t req[PULL_REQ_MAX], buf[PULL_CHUNK_HEADER + 4 * 100 + 1];
	struct pull_chunk c;
	struct pull_req r;
	float v[100];
	json_t *o;

	setup(1);
	for (int f = 0; f < GOSSIP_VALUES_N; f++) {
		size_t len;

		if (!gossip_values_whole((unsigned)f))
			continue;
		ask_in(0, 1, 1, 64, 100, (enum gossip_values)f, &c);
		len = queue[0].len;
		CHECKF(c.status == 0 && c.fmt == (enum gossip_values)f && c.len == 100 &&
		    len == PULL_CHUNK_HEADER + gossip_values_bytes((enum gossip_values)f, 100),
		    "format %d: status %d, format %d, %zu bytes", f, c.status, c.fmt, len);
		gossip_values_get(v, c.values, 100, c.fmt);
		for (int k = 0; k < 100; k++)
			CHECKF(fabsf(v[k] - peers[1].x[64 + k]) <= tol[f], "format %d, value %d: "
			    "%g for %g", f, k, v[k], peers[1].x[64 + k]);
		memcpy(buf, queue[0].buf, len);
		buf[len] = 0;
		CHECK(pull_chunk_decode(buf, len - 1, &c) == -EBADMSG);
		CHECK(pull_chunk_decode(buf, len + 1, &c) == -EBADMSG);
		for (int g = 0; g < GOSSIP_VALUES_N; g++) {
			buf[36] = (uint8_t)g;
			CHECKF(pull_chunk_decode(buf, len, &c) == (g == f ? 0 : -EBADMSG),
			    "format %d relabelled %d", f, g);
		}
		buf[36] = GOSSIP_VALUES_N;
		CHECK(pull_chunk_decode(buf, len, &c) == -EBADMSG);
		buf[36] = 0xff;
		CHECK(pull_chunk_decode(buf, len, &c) == -EBADMSG);
		flush();
	}
	/* An error CHUNK says the format asked; an unknown one is malformed. */
	ask_in(0, 1, 2, d, 10, GOSSIP_INT8, &c);
	CHECK(c.status == -ERANGE && c.fmt == GOSSIP_INT8);
	queue[0].buf[36] = GOSSIP_VALUES_N;
	CHECK(pull_chunk_decode(queue[0].buf, queue[0].len, &c) == -EBADMSG);
	flush();
	r = (struct pull_req){ 3, 0, 10, GOSSIP_INT8, 0, 0, { 0 } };
	pull_req_encode(req, &r);
	req[24] = GOSSIP_VALUES_N | 0x80;
	CHECK(pull_req_decode(req, PULL_REQ_SIZE, &r) == -EBADMSG);
	req[24] = GOSSIP_INT2;
	CHECK(pull_req_decode(req, PULL_REQ_SIZE, &r) == -EBADMSG);
	pull_recv(peers[1].p, 0, peers[0].addr, PULL_T_PULL, req, PULL_REQ_SIZE);
	req[24] = GOSSIP_VALUES_N;
	CHECK(pull_req_decode(req, PULL_REQ_SIZE, &r) == -EBADMSG);
	pull_recv(peers[1].p, 0, peers[0].addr, PULL_T_PULL, req, PULL_REQ_SIZE);
	CHECK(nq == 0);
	o = json_object();
	CHECK(pull_stats_json(peers[1].p, o) == 0);
	CHECK(json_integer_value(json_object_get(json_object_get(o, "pull"), "malformed")) == 2);
	json_decref(o);
	teardown();
}

/* n live donors (more than PULL_MAX_DONORS: the pull picks three). */
static void
test_join(int n)
{
	int who[PULL_MAX_DONORS], k;
	struct pull_chunk c;
	uint64_t step = 0;

	setup(n);
	members(n);
	if (n < PULL_MAX_DONORS) {
		/* Fewer than three: the joiner waits for more first. */
		CHECK(nq == 0 && jstat("bootstrap", "chunks") == -1);
		CHECK(pull_tick(peers[0].p, 0.5) == PULL_DONOR_WAIT);
		now = PULL_DONOR_WAIT;
		members(n);
	}
	k = chosen(who);
	CHECKF(k == (n < PULL_MAX_DONORS ? n : PULL_MAX_DONORS), "%d donors of %d", k, n);
	CHECK(nq == 2 * k && jstat("bootstrap", "requests") == 2 * k);
	CHECK(jstat("bootstrap", "chunks") == 2);
	CHECK(pull_tick(peers[0].p, now) == now + TIMEOUT);
	/* Still pulling: a PULL to the joiner is refused. */
	pump(1, -1);
	ask(1, 0, 1, 0, 10, &c);
	CHECK(c.status == -EAGAIN);
	flush();
	/* Of three donors, the first tells a false step, as far on as a
	 * step can be: the others' steps make the joiner's. */
	for (int i = 0; k == PULL_MAX_DONORS && i < nheld; i++) {
		if (held[i].from == who[0])
			wire_put_u64(held[i].buf + 24, UINT64_MAX);
	}
	/* Every answer in: the average, the donors' lower median step (of
	 * three the middle, of two the lesser), the donors. */
	for (int i = 0; i < nheld; i++)
		deliver(&held[i]);
	nheld = 0;
	CHECKF(pulled == 1, "%d donors: pulled %d times", n, pulled);
	CHECK(mean_of(0, d, who, k));
	for (int i = 0; i < k; i++)
		CHECK(strstr(pulled_donors, peers[who[i]].addr) != NULL);
	if (k == 1)
		step = 10 + (uint64_t)who[0];
	else if (k == 2)
		step = 10 + (uint64_t)(who[0] < who[1] ? who[0] : who[1]);
	else
		step = 10 + (uint64_t)(who[1] > who[2] ? who[1] : who[2]);
	CHECKF(pulled_step == step, "%d donors: step %" PRIu64 ", want %" PRIu64, k,
	    pulled_step, step);
	CHECK(jstat("bootstrap", "chunks") == -1 && jstat("pull", "chunks_served") == 0);
	CHECK(pull_tick(peers[0].p, now + 10) < 0);
	/* Done: a donor now, and the member list moves it no more. */
	ask(1, 0, 2, 0, 10, &c);
	CHECK(c.status == 0 && memcmp(c.values, pulled_x, 10 * sizeof(float)) == 0);
	flush();
	members(n);
	CHECK(nq == 0 && pulled == 1);
	teardown();
}

/* Whether the pulled model is within int8's rounding of the mean of the
 * models of donors who[0..n): each donor's value within 1/254 of the
 * largest magnitude of its 64-value block (chunks start on a block). */
static int
near_mean(const int *who, int n)
{
	for (size_t b = 0; b < d; b += GOSSIP_Q_BLOCK) {
		size_t end = b + GOSSIP_Q_BLOCK < d ? b + GOSSIP_Q_BLOCK : d;
		double tol = 1e-6;

		for (int i = 0; i < n; i++) {
			float max = 0;

			for (size_t k = b; k < end; k++)
				max = fmaxf(max, fabsf(peers[who[i]].x[k]));
			tol += max / 254.0 / n;
		}
		for (size_t k = b; k < end; k++) {
			double sum = 0;

			for (int i = 0; i < n; i++)
				sum += peers[who[i]].x[k];
			if (fabs(pulled_x[k] - sum / n) > tol) {
				fprintf(stderr, "parameter %zu: %g, want %g within %g\n", k,
				    pulled_x[k], sum / n, tol);
				return 0;
			}
		}
	}
	return 1;
}

/* A joiner into a running job in int8 (issue 33): every request asks
 * for it, every answer comes in it, and all the CHUNKs from three donors,
 * headers included, take at most 1.2 times the model in fp32 (0.80
 * here); bootstrap.bytes counts the values' bytes taken; the model is the
 * donors' average within int8's rounding. */
static void
test_join_int8(void)
{
	int who[PULL_MAX_DONORS];
	size_t bytes = 0, values = 0, last;
	struct pull_chunk c;
	struct pull_req r;

	setup(3);
	pull_set_values(peers[0].p, GOSSIP_INT8);
	members(3);
	REQUIRE(chosen(who) == 3 && nq == 6);
	for (int i = 0; i < nq; i++) {
		REQUIRE(pull_req_decode(queue[i].buf, queue[i].len, &r) == 0);
		CHECK(r.fmt == GOSSIP_INT8);
	}
	pump(1, -1);
	REQUIRE(nheld == 6);
	for (int i = 0; i < nheld; i++) {
		REQUIRE(pull_chunk_decode(held[i].buf, held[i].len, &c) == 0);
		CHECK(c.status == 0 && c.fmt == GOSSIP_INT8);
		bytes += held[i].len;
		values += held[i].len - PULL_CHUNK_HEADER;
	}
	printf("test_pull: int8 join from 3 donors: %zu bytes of CHUNKs (%zu of values) for "
	    "a model of %zu bytes in fp32: %.3fx\n", bytes, values, 4 * d,
	    (double)bytes / (double)(4 * d));
	CHECKF(bytes <= 1.2 * 4 * (double)d, "%zu bytes for %zu parameters", bytes, d);
	last = held[nheld - 1].len - PULL_CHUNK_HEADER;
	for (int i = 0; i < nheld - 1; i++)
		deliver(&held[i]);
	CHECK(jstat("bootstrap", "bytes") == (long long)(values - last));
	deliver(&held[nheld - 1]);
	nheld = 0;
	CHECK(pulled == 1 && near_mean(who, 3));
	teardown();
}

/* A start agreement asks for fp32 whatever the job's format: three donors
 * holding the starter's model give it to the joiner bit for bit. */
static void
test_agree_exact(void)
{
	struct pull_req r;

	setup(3);
	for (int i = 2; i <= 3; i++) {
		memcpy(peers[i].x, peers[1].x, d * sizeof(float));
		REQUIRE(model_restore(peers[i].m, peers[i].x, NULL) == 0);
	}
	pull_set_values(peers[0].p, GOSSIP_INT8);
	pull_agree(peers[0].p, peers[0].addr, 10);
	members(3);
	REQUIRE(nq == 6);
	for (int i = 0; i < nq; i++) {
		REQUIRE(pull_req_decode(queue[i].buf, queue[i].len, &r) == 0);
		CHECK(r.fmt == GOSSIP_FP32);
	}
	pump(0, -1);
	CHECK(pulled == 1 && memcmp(pulled_x, peers[1].x, d * sizeof(float)) == 0);
	teardown();
}

/* Peer i starts a job from its own model, alone, its process's digest
 * dig (pull_set_digest). */
static void
start_own(int i, const uint8_t dig[PULL_DIGEST_BYTES])
{
	pull_agree(peers[i].p, peers[i].addr, 10);
	pull_set_digest(peers[i].p, dig);
	pull_members(peers[i].p, now, NULL, 0);
	pull_members(peers[i].p, now + PULL_DONOR_WAIT, NULL, 0);
	REQUIRE(owned[i] == 1);
	pull_set_ready(peers[i].p, 1);
}

/* A PULL's digest travels, its flag and length go together. Asked with
 * the digest of the model it started the job from, a donor answers
 * -EEXIST, without values, even before it is ready, and until its step
 * PULL_SAME_STEPS; with another, or none, or from that step, it serves
 * values. */
static void
test_digest_codec(void)
{
	struct pull_req r = { 3, 0, 10, GOSSIP_FP32, 1, 1, { 0 } }, back;
	uint8_t buf[PULL_REQ_MAX];
	struct pull_chunk c;

	setup(1);
	memset(r.digest, 0xab, sizeof(r.digest));
	CHECK(pull_req_encode(buf, &r) == PULL_REQ_MAX);
	CHECK(pull_req_decode(buf, PULL_REQ_MAX, &back) == 0 && back.has_digest &&
	    back.done_ok && back.fmt == GOSSIP_FP32 && back.id == 3 &&
	    memcmp(back.digest, r.digest, PULL_DIGEST_BYTES) == 0);
	CHECK(pull_req_decode(buf, PULL_REQ_SIZE, &back) == -EBADMSG);
	r.has_digest = 0;
	CHECK(pull_req_encode(buf, &r) == PULL_REQ_SIZE);
	CHECK(pull_req_decode(buf, PULL_REQ_MAX, &back) == -EBADMSG);
	/* Peer 1 started from its own, digest 0xab...: not ready yet. */
	pull_free(peers[1].p);
	REQUIRE(pull_new(peers[1].m, TIMEOUT, 0, &(struct pull_ops){ fake_send, fake_step,
	    fake_pulled, fake_own, fake_gave_up, &peers[1] }, &peers[1].p) == 0);
	start_own(1, r.digest);
	pull_set_ready(peers[1].p, 0);
	r.has_digest = 1;
	ask_req(0, 1, &r, &c);
	CHECK(c.status == -EEXIST && c.id == 3 && queue[0].len == PULL_CHUNK_HEADER);
	flush();
	r.digest[31] ^= 1;
	ask_req(0, 1, &r, &c);
	CHECK(c.status == -EAGAIN);
	flush();
	pull_set_ready(peers[1].p, 1);
	ask_req(0, 1, &r, &c);
	CHECK(c.status == 0 && c.len == 10);
	flush();
	/* At step PULL_SAME_STEPS the job's model is no longer its start. */
	r.digest[31] ^= 1;
	step_base = PULL_SAME_STEPS - 11;
	ask_req(0, 1, &r, &c);
	CHECK(c.status == 0 && c.len == 10);
	flush();
	step_base = PULL_SAME_STEPS - 12;
	ask_req(0, 1, &r, &c);
	CHECK(c.status == -EEXIST);
	flush();
	step_base = 0;
	CHECK(peer_stat(1, "pull", "same_start") == 2);
	teardown();
}

/* A start agreement whose process's model is the starter's (same digest):
 * one chunk asked of each donor, the starter answers that it is the same,
 * and the peer starts from its own model having received at most a chunk
 * from the other donors; it then tells a third peer the same. With a
 * digest of another model the pull goes on, one chunk first, then the
 * window, and brings the donors' model. */
static void
test_agree_same(void)
{
	uint8_t dig[PULL_DIGEST_BYTES], other[PULL_DIGEST_BYTES];
	struct pull_req r = { 9, 0, 10, GOSSIP_FP32, 1, 1, { 0 } };
	struct pull_chunk c;
	size_t values = 0;

	for (int same = 1; same >= 0; same--) {
		setup(3);
		memset(dig, 0x5a, sizeof(dig));
		memset(other, 0x33, sizeof(other));
		for (int i = 2; i <= 3; i++) {
			memcpy(peers[i].x, peers[1].x, d * sizeof(float));
			REQUIRE(model_restore(peers[i].m, peers[i].x, NULL) == 0);
		}
		pull_free(peers[1].p);
		REQUIRE(pull_new(peers[1].m, TIMEOUT, 0, &(struct pull_ops){ fake_send,
		    fake_step, fake_pulled, fake_own, fake_gave_up, &peers[1] },
		    &peers[1].p) == 0);
		start_own(1, dig);
		pull_agree(peers[0].p, peers[0].addr, 10);
		pull_set_digest(peers[0].p, same ? dig : other);
		members(3);
		CHECK(nq == 3);
		for (int i = 0; i < nq; i++)
			CHECK(pull_req_decode(queue[i].buf, queue[i].len, &r) == 0 &&
			    r.has_digest && r.off == 0);
		while (nq > 0) {
			struct msg q = queue[0];

			memmove(queue, queue + 1, (size_t)(nq - 1) * sizeof(queue[0]));
			nq--;
			if (q.type == PULL_T_CHUNK)
				values += q.len - PULL_CHUNK_HEADER;
			deliver(&q);
		}
		if (same) {
			CHECK(owned[0] == 1 && pulled == 0 && strstr(owned_why, "same digest"));
			CHECK(values <= 2 * PULL_CHUNK_FLOATS * sizeof(float));
			memcpy(r.digest, dig, sizeof(dig));
			ask_req(2, 0, &r, &c);
			CHECK(c.status == -EEXIST);
			flush();
		} else {
			CHECK(owned[0] == 0 && pulled == 1 &&
			    memcmp(pulled_x, peers[1].x, d * sizeof(float)) == 0);
		}
		teardown();
	}
}

/* A donor that goes down mid-pull: the others make up for it. All of them
 * gone: the next members shown are asked. */
static void
test_donor_down(void)
{
	int who[PULL_MAX_DONORS], rest[PULL_MAX_DONORS], nrest = 0, gone;

	setup(4);
	members(4);
	REQUIRE(chosen(who) == 3);
	/* The first chunk from everyone, then the first donor dies. */
	pump(1, -1);
	for (int i = 0; i < nheld; i++)
		if (wire_get_u64(held[i].buf + 8) == 0)
			deliver(&held[i]);
		else
			queue[nq++] = held[i];
	nheld = 0;
	gone = who[0];
	peers[gone].up = 0;
	pull_donor_down(peers[0].p, now, peers[gone].addr);
	CHECK(pulled == 0);
	pump(0, -1);
	CHECK(pulled == 1);
	for (int i = 1; i < 3; i++)
		rest[nrest++] = who[i];
	CHECK(mean_of(0, PULL_CHUNK_FLOATS, who, 3));
	CHECK(mean_of(PULL_CHUNK_FLOATS, d - PULL_CHUNK_FLOATS, rest, nrest));
	teardown();

	/* Three donors of four offered, all gone before answering. */
	setup(4);
	members(3);
	REQUIRE(chosen(who) == 3 && who[0] != 4 && who[1] != 4 && who[2] != 4);
	flush();
	for (int i = 0; i < 3; i++) {
		CHECK(jstat("bootstrap", "chunks") == 2);
		peers[who[i]].up = 0;
		pull_donor_down(peers[0].p, now, peers[who[i]].addr);
	}
	CHECK(pulled == 0 && jstat("bootstrap", "chunks") == -1);
	/* A down address that is no donor changes nothing. */
	pull_donor_down(peers[0].p, now, "10.9.9.9:1");
	/* The fourth is shown next: pulled from it alone, bit for bit. The
	 * first time the daemon refuses the result: asked again. */
	now = 5;
	pulled_rc = -EIO;
	members(4);
	CHECK(nq == 2);
	pump(0, -1);
	CHECK(pulled == 1 && jstat("bootstrap", "chunks") == -1);
	pulled_rc = 0;
	members(4);
	pump(0, -1);
	who[0] = 4;
	CHECK(pulled == 2 && mean_of(0, d, who, 1) && pulled_step == 14);
	CHECK(strcmp(pulled_donors, peers[4].addr) == 0);
	teardown();
}

/* Deadlines: a silent donor fails at the deadline and the others'
 * answers stand; a chunk nobody answered is asked again, and the late
 * answers to the first asking are dropped as stale. */
static void
test_deadline(void)
{
	int who[PULL_MAX_DONORS], rest[PULL_MAX_DONORS];

	setup(3);
	members(3);
	REQUIRE(chosen(who) == 3);
	pump(0, who[2]);
	CHECK(pulled == 0);
	CHECK(pull_tick(peers[0].p, TIMEOUT - 0.1) == TIMEOUT);
	CHECK(pull_tick(peers[0].p, TIMEOUT) < 0);
	CHECK(pulled == 1);
	rest[0] = who[0];
	rest[1] = who[1];
	CHECK(mean_of(0, d, rest, 2));
	teardown();

	setup(3);
	members(3);
	REQUIRE(chosen(who) == 3);
	pump(1, -1);
	CHECK(nheld == 6);
	now = TIMEOUT;
	CHECK(pull_tick(peers[0].p, now) == now + TIMEOUT);
	CHECK(jstat("bootstrap", "timeouts") == 6 && jstat("bootstrap", "reasked") == 2);
	CHECK(jstat("bootstrap", "requests") == 12 && nq == 6);
	for (int i = 0; i < nheld; i++)
		deliver(&held[i]);
	nheld = 0;
	CHECK(jstat("bootstrap", "stale") == 6 && pulled == 0);
	pump(0, -1);
	CHECK(pulled == 1 && mean_of(0, d, who, 3));
	teardown();
}

/* Chunk 0 of donor a (held[at]), altered by how and delivered. */
static void
deliver_altered(int at, int how, int as)
{
	struct msg q = held[at];
	uint8_t *buf = xmalloc(q.len);
	size_t len = q.len;

	memcpy(buf, q.buf, len);
	switch (how) {
	case 0: len = 5; break;                                 /* short header */
	case 1: len -= 4; break;                                /* a value short */
	case 2: wire_put_u32(buf + 32, 7); break;               /* bad status */
	case 3: wire_put_u64(buf, wire_get_u64(buf) | 7); break; /* no such chunk */
	case 4: break;                                          /* as another */
	case 5: wire_put_u64(buf + 8, 8); break;                /* misplaced */
	}
	pull_recv(peers[0].p, now, peers[as].addr, PULL_T_CHUNK, buf, len);
	free(buf);
}

static void
test_bad_chunks(void)
{
	int who[PULL_MAX_DONORS], a, at = -1;
	long long stale;

	setup(3);
	members(3);
	REQUIRE(chosen(who) == 3);
	a = who[0];
	pump(1, -1);
	for (int i = 0; i < nheld; i++)
		if (held[i].from == a && wire_get_u64(held[i].buf + 8) == 0)
			at = i;
	REQUIRE(at >= 0);
	for (int how = 0; how < 4; how++)
		deliver_altered(at, how, a);
	CHECK(jstat("bootstrap", "malformed") == 4);
	deliver_altered(at, 4, who[1]);
	CHECK(jstat("bootstrap", "stale") == 1);
	deliver_altered(at, 5, a);
	CHECK(jstat("bootstrap", "refused") == 1);
	/* The genuine one is too late now; the rest arrive last first. */
	for (int i = nheld - 1; i >= 0; i--)
		deliver(&held[i]);
	nheld = 0;
	CHECK(pulled == 1);
	CHECK(mean_of(0, PULL_CHUNK_FLOATS, who + 1, 2));
	CHECK(mean_of(PULL_CHUNK_FLOATS, d - PULL_CHUNK_FLOATS, who, 3));
	/* A chunk with no pull running is counted, not kept. */
	stale = jstat("pull", "stale");
	pull_recv(peers[0].p, now, peers[a].addr, PULL_T_CHUNK, (const uint8_t *)"x", 1);
	CHECK(jstat("pull", "stale") == stale + 1);
	teardown();
}

/* How many donors the running pull dropped for reason why. */
static long long
rejected(const char *why)
{
	json_t *o = json_object();
	long long v;

	REQUIRE(pull_stats_json(peers[0].p, o) == 0);
	v = json_integer_value(json_object_get(json_object_get(json_object_get(o,
	    "bootstrap"), "rejected"), why));
	json_decref(o);
	return v;
}

/* A donor whose first chunk holds a NaN (k = 0) or lies far from the
 * others' (k = 1) is dropped for the whole model, its second chunk, in
 * before the first was judged, included. */
static void
test_poison(void)
{
	static const char *const why[] = { "nonfinite", "far" };

	for (int k = 0; k < 2; k++) {
		int who[PULL_MAX_DONORS], bad;

		setup(3);
		members(3);
		REQUIRE(chosen(who) == 3);
		bad = who[2];
		pump(1, -1);
		/* The bad donor's chunks go first, the others after. */
		for (int i = 0; i < nheld; i++) {
			float *v = (float *)(held[i].buf + PULL_CHUNK_HEADER);

			if (held[i].from != bad)
				continue;
			if (wire_get_u64(held[i].buf + 8) == 0 && k == 0)
				v[7] = NAN;
			for (size_t j = 0; wire_get_u64(held[i].buf + 8) == 0 && k == 1 &&
			    j < PULL_CHUNK_FLOATS; j++)
				v[j] *= 1e5f;
			queue[nq++] = held[i];
		}
		for (int i = 0; i < nheld; i++)
			if (held[i].from != bad)
				queue[nq++] = held[i];
		nheld = 0;
		/* All but the last answer in: judged, not done. */
		while (nq > 1) {
			deliver(&queue[0]);
			memmove(queue, queue + 1, (size_t)--nq * sizeof(queue[0]));
		}
		CHECKF(pulled == 0 && rejected(why[k]) == 1 && rejected(why[1 - k]) == 0,
		    "case %d: pulled %d, rejected %lld", k, pulled, rejected(why[k]));
		pump(0, -1);
		CHECKF(pulled == 1, "case %d: not done", k);
		CHECK(mean_of(0, d, who, 2));
		/* The log names only the donors whose answers made the model. */
		CHECK(strstr(pulled_donors, peers[bad].addr) == NULL);
		CHECK(strstr(pulled_donors, peers[who[0]].addr) != NULL &&
		    strstr(pulled_donors, peers[who[1]].addr) != NULL);
		teardown();
	}
}

/* More chunks than the window: PULL_WINDOW asked at first, the next as
 * soon as one is averaged, due a timeout after it was asked (not after the
 * pull started, which a large model's last chunks would outlast). */
static void
test_window(void)
{
	int who[PULL_MAX_DONORS], n = 0;
	size_t nchunks;

	setup_spec(3, SPEC_BIG);
	nchunks = (d + PULL_CHUNK_FLOATS - 1) / PULL_CHUNK_FLOATS;
	REQUIRE(nchunks > PULL_WINDOW + 1 && 3 * PULL_WINDOW <= QMAX);
	members(3);
	REQUIRE(chosen(who) == 3);
	CHECK(nq == 3 * PULL_WINDOW && jstat("bootstrap", "requests") == 3 * PULL_WINDOW);
	/* Every donor answers the window late in its deadline; chunk 0's
	 * answers come in first. */
	now = 0.75 * TIMEOUT;
	pump(1, -1);
	for (int i = 0; i < nheld; i++)
		if (wire_get_u64(held[i].buf + 8) == 0)
			deliver(&held[i]);
		else
			held[n++] = held[i];
	nheld = n;
	CHECK(nq == 3 && jstat("bootstrap", "requests") == 3 * (PULL_WINDOW + 1));
	CHECK(pull_tick(peers[0].p, now) == TIMEOUT);
	/* The rest of the window: the last chunks are asked now, due then. */
	for (int i = 0; i < nheld; i++)
		deliver(&held[i]);
	nheld = 0;
	CHECK(nq == 3 * (int)(nchunks - PULL_WINDOW));
	CHECK(pull_tick(peers[0].p, now) == now + TIMEOUT);
	pump(0, -1);
	CHECK(pulled == 1 && mean_of(0, d, who, 3));
	CHECK(jstat("bootstrap", "chunks") == -1);
	teardown();
}

/* A chunk that waits for some of its answers keeps them while every other
 * chunk comes and goes through the remaining answer slots: one donor's
 * answer to chunk 1 first, then all the others' answers (the window's
 * last first), then chunk 1's other two. Exact means of all three. */
static void
test_slots(void)
{
	struct msg late[PULL_MAX_DONORS];
	int who[PULL_MAX_DONORS], nlate = 0, first = -1;
	uint64_t off1 = PULL_CHUNK_FLOATS;

	setup_spec(3, SPEC_BIG);
	members(3);
	REQUIRE(chosen(who) == 3);
	now = 0.5 * TIMEOUT;
	pump(1, -1);
	REQUIRE(nheld == 3 * PULL_WINDOW);
	for (int i = 0; i < nheld && first < 0; i++)
		if (wire_get_u64(held[i].buf + 8) == off1)
			first = i;
	REQUIRE(first >= 0);
	deliver(&held[first]);
	for (int i = nheld - 1; i >= 0; i--) {
		if (i == first)
			continue;
		if (wire_get_u64(held[i].buf + 8) == off1) {
			REQUIRE(nlate < PULL_MAX_DONORS);
			late[nlate++] = held[i];
			continue;
		}
		deliver(&held[i]);
		pump(0, -1);
	}
	nheld = 0;
	CHECK(nlate == 2 && pulled == 0);
	for (int i = 0; i < nlate; i++)
		deliver(&late[i]);
	pump(0, -1);
	CHECK(pulled == 1 && mean_of(0, d, who, 3));
	teardown();
}

/* A joiner with no live member (its seed gone, then its only donor):
 * stranded after PULL_DONOR_WAIT, each time; a member that appears ends
 * the wait; after the whole wait alone it gives up, once. */
static void
test_alone(void)
{
	setup(1);
	pull_set_wait(peers[0].p, 10);
	members(0);
	CHECK(!pull_stranded(peers[0].p) && pull_tick(peers[0].p, now) == PULL_DONOR_WAIT);
	now = PULL_DONOR_WAIT;
	members(0);
	CHECK(pull_stranded(peers[0].p) && pull_tick(peers[0].p, now) == 10);
	/* The donor appears: not stranded; the pull starts after the donor
	 * wait, and its only donor goes down before it answers. */
	now = 5;
	members(1);
	CHECK(!pull_stranded(peers[0].p) && gave_up == 0);
	now = 5 + PULL_DONOR_WAIT;
	members(1);
	CHECK(jstat("bootstrap", "chunks") == 2);
	peers[1].up = 0;
	pull_donor_down(peers[0].p, now, peers[1].addr);
	pump(0, -1);
	CHECK(jstat("bootstrap", "chunks") == -1 && pulled == 0);
	/* Alone again from the retry on: the wait starts over. */
	now += 2 * PULL_RETRY;
	members(0);
	CHECK(!pull_stranded(peers[0].p));
	now += PULL_DONOR_WAIT;
	members(0);
	CHECK(pull_stranded(peers[0].p));
	now += 10 - PULL_DONOR_WAIT - 0.01;
	members(0);
	CHECK(gave_up == 0 && pull_stranded(peers[0].p));
	now += 0.01;
	CHECK(fabs(pull_tick(peers[0].p, now - 0.001) - now) < 1e-6);
	members(0);
	CHECK(gave_up == 1 && strstr(gave_up_why, "no live member") != NULL);
	CHECK(!pull_stranded(peers[0].p) && pull_tick(peers[0].p, now) < 0);
	/* Over: neither more waiting nor a late member starts anything. */
	now += 100;
	members(0);
	peers[1].up = 1;
	members(1);
	CHECK(gave_up == 1 && nq == 0 && jstat("bootstrap", "chunks") == -1);
	teardown();

	/* Without a wait (pull_set_wait never called) it waits forever. */
	setup(1);
	members(0);
	now = 1e6;
	members(0);
	CHECK(pull_stranded(peers[0].p) && gave_up == 0 && pull_tick(peers[0].p, now) < 0);
	teardown();
}

/* A joiner whose only live member has no model to give (a joiner too,
 * the job's others gone): every attempt fails; after the wait, in a row,
 * it gives up, once, saying so. */
static void
test_donors_fail(void)
{
	double first = -1, end = -1;
	int tries = 0;

	setup(1);
	pull_set_wait(peers[0].p, 10);
	pull_set_ready(peers[1].p, 0);
	for (; gave_up == 0 && now < 30; now += PULL_RETRY) {
		members(1);
		if (nq > 0 && first < 0)
			first = now;
		tries += nq > 0;
		pump(0, -1);
		end = now;
	}
	CHECKF(gave_up == 1 && strstr(gave_up_why, "every donor failed") != NULL,
	    "gave up %d times: %s", gave_up, gave_up_why);
	CHECKF(first >= 0 && end >= first + 10 && end < first + 10 + 2 * PULL_RETRY &&
	    tries > 10, "first try at %g, gave up at %g after %d tries", first, end, tries);
	now += 100;
	members(1);
	CHECK(gave_up == 1 && nq == 0 && pulled == 0);
	teardown();
}

/* Is every donor the running pull chose among who[0..n)? */
static int
chosen_among(const int *who, int n)
{
	int got[PULL_MAX_DONORS], k = chosen(got);

	for (int i = 0; i < k; i++) {
		int in = 0;

		for (int w = 0; w < n; w++)
			in |= got[i] == who[w];
		if (!in)
			return 0;
	}
	return k;
}

/* Donors whose training is over refuse PULLs that do not take them; a
 * joiner drops them while members still training are left: when all it
 * drew are done the attempt fails and the next draws among the others
 * (case 0); one done donor among training ones is made up for (case 1);
 * when every live member is done it pulls from them (case 2); one found
 * done is replaced within the attempt by a member drawn after the donors
 * (case 3: four done of seven, and the three training are the donors of
 * the one attempt; without the spares one or two were, with a chance of
 * 1 in 35 to draw all three). The done donors' refusals carry no values
 * (no bytes pulled in vain). */
static void
test_done(void)
{
	static const int training[] = { 4, 5 }, both[] = { 1, 3 }, all[] = { 1, 2 },
	    late[] = { 5, 6, 7 };
	int who[PULL_MAX_DONORS];
	struct pull_chunk c;

	setup(5);
	for (int i = 1; i <= 3; i++)
		pull_set_done(peers[i].p, 1);
	/* A done donor serves only a PULL that takes one, the flag
	 * round-tripping through the codec. */
	ask(0, 1, 1, 0, 8, &c);
	CHECK(c.status == -ESTALE && c.len == 0);
	flush();
	ask_req(0, 1, &(struct pull_req){ 1, 0, 8, GOSSIP_FP32, 1, 0, { 0 } }, &c);
	CHECK(c.status == 0 && c.len == 8 && c.step == 11);
	flush();
	/* Case 0: only the done ones are live at first. */
	peers[4].up = peers[5].up = 0;
	members(3);
	CHECK(chosen(who) == 3);
	pump(0, -1);
	CHECK(peer_stat(1, "pull", "chunks_served") == 1 &&
	    peer_stat(2, "pull", "chunks_served") == 0 &&
	    peer_stat(3, "pull", "chunks_served") == 0);
	CHECK(pulled == 0 && jstat("bootstrap", "chunks") == -1);
	peers[4].up = peers[5].up = 1;
	now += PULL_RETRY;
	members(5);
	CHECK(chosen_among(training, 2) == 2);
	pump(0, -1);
	CHECK(pulled == 1 && mean_of(0, d, training, 2) && pulled_step == 14);
	teardown();

	/* Case 1: one done donor of three. */
	setup(3);
	pull_set_done(peers[2].p, 1);
	members(3);
	CHECK(chosen(who) == 3);
	pump(0, -1);
	CHECK(pulled == 1 && mean_of(0, d, both, 2));
	CHECK(strstr(pulled_donors, peers[2].addr) == NULL);
	teardown();

	/* Case 2: every live member is done (the job is over). */
	setup(2);
	pull_set_done(peers[1].p, 1);
	pull_set_done(peers[2].p, 1);
	members(2);
	now = PULL_DONOR_WAIT;
	members(2);
	pump(0, -1);
	CHECK(pulled == 0);
	now += PULL_RETRY;
	members(2);
	CHECK(jstat("bootstrap", "finished") == 0);
	pump(0, -1);
	CHECK(pulled == 1 && mean_of(0, d, all, 2));
	teardown();

	/* Case 3: four done of seven, replaced within the attempt. */
	setup(7);
	for (int i = 1; i <= 4; i++)
		pull_set_done(peers[i].p, 1);
	members(7);
	CHECK(chosen(who) == 3);
	pump(0, -1);
	CHECKF(pulled == 1 && mean_of(0, d, late, 3), "pulled %d from %s", pulled,
	    pulled_donors);
	teardown();
}

static void
test_joins(void)
{
	for (int n = 1; n <= 4; n++)
		test_join(n);
}

static const struct check_case cases[] = {
	{ "pull_codec_and_donor", test_codec_and_donor },
	{ "pull_codec_formats", test_codec_formats },
	{ "pull_join", test_joins },
	{ "pull_join_int8", test_join_int8 },
	{ "pull_agree_exact", test_agree_exact },
	{ "pull_digest_codec", test_digest_codec },
	{ "pull_agree_same", test_agree_same },
	{ "pull_donor_down", test_donor_down },
	{ "pull_deadline", test_deadline },
	{ "pull_bad_chunks", test_bad_chunks },
	{ "pull_poison", test_poison },
	{ "pull_window", test_window },
	{ "pull_slots", test_slots },
	{ "pull_alone", test_alone },
	{ "pull_donors_fail", test_donors_fail },
	{ "pull_done", test_done },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	if (sodium_init() < 0)
		return 99;
	log_set_level(LOG_ERROR);
	return check_main(argc, argv, cases, "test_pull");
}
