/*
 * bootstrap: see bootstrap.h. A request id names the chunk (low 24 bits),
 * the donor (next 8) and the generation of that chunk's requests (high
 * 32), so a late answer to a request already given up on is recognised
 * and dropped. Answers are kept per donor as they arrive and averaged when
 * the chunk's last donor has answered, failed or timed out.
 *
 * A donor is dropped (the others make up for it, as for one that is gone)
 * when a chunk of its holds a non-finite value, or lies far from the
 * others': farther from the chunk of the donor with the smallest RMS than
 * GOSSIP_FAR_GAMMA times that RMS. The smallest is the reference because
 * a diverging model grows; honest donors differ by ~40% of the RMS.
 */
#include "bootstrap.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "gossip.h"
#include "log.h"
#include "wire.h"

/* Per chunk and donor: where that request stands. */
enum { ASK_NONE, ASK_PENDING, ASK_ANSWERED, ASK_FAILED };

struct bootstrap_chunk {
	size_t off, len;
	uint32_t gen;             /* bumps when the chunk is asked again */
	uint8_t ask[BOOTSTRAP_MAX_DONORS];
	double deadline;
	unsigned answers;         /* values summed so far */
	int have;                 /* averaged and final */
};

struct bootstrap_donor {
	char addr[WIRE_ADDR_MAX + 1];
	int failed;
};

struct bootstrap {
	size_t d;
	double timeout;
	struct bootstrap_ops ops;
	float *x;                 /* averages */
	float *dx;                /* donor i's answers at dx + i * d */
	struct bootstrap_chunk *chunks;
	size_t nchunks, have;
	struct bootstrap_donor donors[BOOTSTRAP_MAX_DONORS];
	int ndonors;
	uint64_t step;
	int failed;
	uint64_t requests, reasks, refused, timeouts, stale, malformed;
	uint64_t rejected[GOSSIP_REFUSE_N];
};

int
bootstrap_new(size_t d, double timeout, const struct bootstrap_ops *ops, struct bootstrap **out)
{
	struct bootstrap *b = calloc(1, sizeof(*b));

	if (b == NULL)
		return -ENOMEM;
	b->d = d;
	b->timeout = timeout;
	b->ops = *ops;
	b->nchunks = (d + GOSSIP_CHUNK_FLOATS - 1) / GOSSIP_CHUNK_FLOATS;
	b->x = calloc(d, sizeof(float));
	b->dx = malloc(BOOTSTRAP_MAX_DONORS * d * sizeof(float));
	b->chunks = calloc(b->nchunks, sizeof(*b->chunks));
	if (b->x == NULL || b->dx == NULL || b->chunks == NULL || b->nchunks >= 1u << 24) {
		bootstrap_free(b);
		return -ENOMEM;
	}
	for (size_t i = 0; i < b->nchunks; i++) {
		b->chunks[i].off = i * GOSSIP_CHUNK_FLOATS;
		b->chunks[i].len = i + 1 < b->nchunks ? GOSSIP_CHUNK_FLOATS :
		    d - i * GOSSIP_CHUNK_FLOATS;
	}
	*out = b;
	return 0;
}

void
bootstrap_free(struct bootstrap *b)
{
	if (b == NULL)
		return;
	free(b->x);
	free(b->dx);
	free(b->chunks);
	free(b);
}

/* Ask every donor still standing for chunk ci, under a new generation. */
static void
bootstrap_ask(struct bootstrap *b, size_t ci, double now)
{
	struct bootstrap_chunk *c = &b->chunks[ci];
	uint8_t req[GOSSIP_PULL_SIZE];
	int asked = 0;

	c->gen++;
	c->deadline = now + b->timeout;
	for (int di = 0; di < b->ndonors; di++) {
		c->ask[di] = ASK_NONE;
		if (b->donors[di].failed)
			continue;
		gossip_pull_encode(req, (uint64_t)c->gen << 32 | (uint64_t)di << 24 | ci, c->off,
		    c->len);
		b->requests++;
		if (b->ops.send(b->ops.arg, b->donors[di].addr, GOSSIP_T_PULL, req, sizeof(req),
		    NULL, NULL) < 0) {
			c->ask[di] = ASK_FAILED;
			continue;
		}
		c->ask[di] = ASK_PENDING;
		asked++;
	}
	if (asked == 0)
		b->failed = 1;
}

static void bootstrap_settle(struct bootstrap *b, size_t ci, double now);

/* Donor di is out: its pending chunks go to the others. */
static void
bootstrap_donor_fail(struct bootstrap *b, int di, double now)
{
	b->donors[di].failed = 1;
	for (size_t ci = 0; ci < b->nchunks && !b->failed; ci++) {
		if (b->chunks[ci].have || b->chunks[ci].ask[di] != ASK_PENDING)
			continue;
		b->chunks[ci].ask[di] = ASK_FAILED;
		bootstrap_settle(b, ci, now);
	}
}

static void
bootstrap_reject(struct bootstrap *b, int di, double now, enum gossip_refusal why)
{
	b->rejected[why]++;
	log_warn("bootstrap: donor %s sent %s values; the others make up for it",
	    b->donors[di].addr, gossip_refusal_name(why));
	bootstrap_donor_fail(b, di, now);
}

static double
bootstrap_rms(const float *a, const float *ref, size_t n)
{
	double sum = 0;

	for (size_t i = 0; i < n; i++) {
		double e = (double)a[i] - (ref ? (double)ref[i] : 0);

		sum += e * e;
	}
	return sqrt(sum / (double)(n ? n : 1));
}

/* Answers of chunk c far from the reference (see top) are failed and
 * their donors returned in far[]; returns how many. */
static int
bootstrap_vet(struct bootstrap *b, struct bootstrap_chunk *c, int far[BOOTSTRAP_MAX_DONORS])
{
	double norm, best = -1;
	const float *ref = NULL;
	int nfar = 0;

	for (int di = 0; di < b->ndonors; di++) {
		if (c->ask[di] != ASK_ANSWERED)
			continue;
		norm = bootstrap_rms(b->dx + di * b->d + c->off, NULL, c->len);
		if (best < 0 || norm < best) {
			best = norm;
			ref = b->dx + di * b->d + c->off;
		}
	}
	for (int di = 0; di < b->ndonors; di++) {
		const float *v = b->dx + di * b->d + c->off;

		if (c->ask[di] != ASK_ANSWERED || v == ref || bootstrap_rms(v, ref, c->len) <=
		    GOSSIP_FAR_GAMMA * fmax(best, GOSSIP_FAR_FLOOR))
			continue;
		c->ask[di] = ASK_FAILED;
		c->answers--;
		far[nfar++] = di;
	}
	return nfar;
}

/* The chunk is settled when no request of it is pending: average what
 * came, or ask again if nothing did. */
static void
bootstrap_settle(struct bootstrap *b, size_t ci, double now)
{
	struct bootstrap_chunk *c = &b->chunks[ci];
	int far[BOOTSTRAP_MAX_DONORS], nfar;
	float inv;

	for (int di = 0; di < b->ndonors; di++) {
		if (c->ask[di] == ASK_PENDING)
			return;
	}
	if (c->answers == 0) {
		b->reasks++;
		bootstrap_ask(b, ci, now);
		return;
	}
	nfar = bootstrap_vet(b, c, far);
	inv = 1.0f / (float)c->answers;
	memset(b->x + c->off, 0, c->len * sizeof(float));
	for (int di = 0; di < b->ndonors; di++) {
		const float *v = b->dx + di * b->d + c->off;

		if (c->ask[di] != ASK_ANSWERED)
			continue;
		for (size_t i = 0; i < c->len; i++)
			b->x[c->off + i] += v[i] * inv;
	}
	c->have = 1;
	b->have++;
	for (int i = 0; i < nfar; i++)
		bootstrap_reject(b, far[i], now, GOSSIP_REFUSE_FAR);
}

int
bootstrap_start(struct bootstrap *b, double now, const char *const *members, size_t n)
{
	size_t *order;

	if (n == 0)
		return -EAGAIN;
	order = malloc(n * sizeof(*order));
	if (order == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	/* A random choice of donors, so that joiners spread the load. */
	for (size_t i = n; i > 1; i--) {
		size_t j = randombytes_uniform((uint32_t)i), t = order[i - 1];

		order[i - 1] = order[j];
		order[j] = t;
	}
	b->ndonors = 0;
	for (size_t i = 0; i < n && b->ndonors < BOOTSTRAP_MAX_DONORS; i++) {
		snprintf(b->donors[b->ndonors].addr, sizeof(b->donors[0].addr), "%s",
		    members[order[i]]);
		b->donors[b->ndonors++].failed = 0;
	}
	free(order);
	for (size_t i = 0; i < b->nchunks; i++)
		bootstrap_ask(b, i, now);
	return 0;
}

void
bootstrap_recv(struct bootstrap *b, double now, const char *from, const uint8_t *buf,
    size_t len)
{
	struct gossip_chunk gc;
	struct bootstrap_chunk *c;
	size_t ci;
	int di;

	if (gossip_chunk_decode(buf, len, &gc) < 0) {
		b->malformed++;
		return;
	}
	ci = (size_t)(gc.id & 0xffffff);
	di = (int)((gc.id >> 24) & 0xff);
	if (ci >= b->nchunks || di >= b->ndonors) {
		b->malformed++;
		return;
	}
	c = &b->chunks[ci];
	if (c->have || (uint32_t)(gc.id >> 32) != c->gen || c->ask[di] != ASK_PENDING ||
	    strcmp(from, b->donors[di].addr) != 0) {
		b->stale++;
		return;
	}
	if (gc.status < 0 || gc.off != c->off || gc.len != c->len) {
		b->refused++;
		c->ask[di] = ASK_FAILED;
	} else {
		float *v = b->dx + (size_t)di * b->d + c->off;

		memcpy(v, gc.values, c->len * sizeof(float));
		if (!gossip_finite(v, c->len)) {
			/* Out first, so that asking the chunk again skips it. */
			c->ask[di] = ASK_FAILED;
			bootstrap_reject(b, di, now, GOSSIP_REFUSE_NONFINITE);
			bootstrap_settle(b, ci, now);
			return;
		}
		c->answers++;
		c->ask[di] = ASK_ANSWERED;
		if (gc.step > b->step)
			b->step = gc.step;
	}
	bootstrap_settle(b, ci, now);
}

void
bootstrap_donor_down(struct bootstrap *b, double now, const char *addr)
{
	for (int di = 0; di < b->ndonors; di++) {
		if (strcmp(b->donors[di].addr, addr) != 0 || b->donors[di].failed)
			continue;
		log_info("bootstrap: donor %s is gone; the others make up for it", addr);
		bootstrap_donor_fail(b, di, now);
	}
}

double
bootstrap_tick(struct bootstrap *b, double now)
{
	double next = -1;

	for (size_t ci = 0; ci < b->nchunks && !b->failed; ci++) {
		struct bootstrap_chunk *c = &b->chunks[ci];

		if (c->have)
			continue;
		if (now >= c->deadline) {
			for (int di = 0; di < b->ndonors; di++) {
				if (c->ask[di] == ASK_PENDING) {
					c->ask[di] = ASK_FAILED;
					b->timeouts++;
				}
			}
			bootstrap_settle(b, ci, now);
		}
		if (!c->have && (next < 0 || c->deadline < next))
			next = c->deadline;
	}
	return b->failed ? -1 : next;
}

int
bootstrap_done(const struct bootstrap *b)
{
	return b->have == b->nchunks;
}

int
bootstrap_failed(const struct bootstrap *b)
{
	return b->failed;
}

const float *
bootstrap_params(const struct bootstrap *b)
{
	return b->x;
}

uint64_t
bootstrap_step(const struct bootstrap *b)
{
	return b->step;
}

const char *
bootstrap_donor(const struct bootstrap *b, int i)
{
	return i >= 0 && i < b->ndonors ? b->donors[i].addr : NULL;
}

int
bootstrap_stats_json(const struct bootstrap *b, json_t *obj)
{
	json_t *donors = json_array(), *rej = json_object();

	for (int i = 0; i < b->ndonors; i++)
		json_array_append_new(donors, json_string(b->donors[i].addr));
	for (int i = 0; i < GOSSIP_REFUSE_N; i++)
		json_object_set_new(rej, gossip_refusal_name((enum gossip_refusal)i),
		    json_integer((json_int_t)b->rejected[i]));
	return json_object_set_new(obj, "bootstrap", json_pack(
	    "{s:o, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b}", "donors", donors,
	    "rejected", rej,
	    "chunks", (json_int_t)b->nchunks, "received", (json_int_t)b->have,
	    "requests", (json_int_t)b->requests, "reasked", (json_int_t)b->reasks,
	    "refused", (json_int_t)b->refused, "timeouts", (json_int_t)b->timeouts,
	    "stale", (json_int_t)b->stale, "step", (json_int_t)b->step, "failed", b->failed));
}
