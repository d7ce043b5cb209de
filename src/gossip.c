/*
 * gossip: see gossip.h for the protocol, gossip_wire.h for the bytes and
 * gossip_mode.h for what differs between modes.
 *
 * The responder rebuilds the mask from the REQ's own parameters, so the
 * two sides agree even while `gossipctl set density` is changing one of
 * them. Each role (the exchange this peer started, and answering others)
 * has its own scratch buffers, grown to the largest exchange and reused:
 * no allocation per exchange once warm, and serving a REQ while an own
 * exchange is in flight cannot clobber the mask that exchange will need.
 * The job's start model (its origin, d floats; for a peer that resumed
 * or joined later the one kept beside its checkpoints, origin.h, or the
 * built-in trainer's made again, server.c; else none) stays too, for
 * trust to measure the ways from it of both sides of a slice (trust.h).
 */
#include "gossip.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "drift.h"
#include "log.h"
#include "mask.h"
#include "trust.h"
#include "wire.h"

/* Weight of a new sample in the consensus-distance EWMA. */
#define GOSSIP_DIST_ALPHA 0.1
/* How soon after an exchange a SIGCONT's handler may run and the gap that
 * exchange ended still be the stop's (gossip_resumed). */
#define GOSSIP_RESUME_SLACK_S 0.1
/* Own rounds that give a mean time between them worth judging a gap by. */
#define GOSSIP_STALL_ROUNDS 3
/* A wait shorter than this is no stall to log, however far above the
 * mean: a closing phase exchanges back to back, milliseconds apart, while
 * a stall worth a line keeps a round waiting on a partner for a good part
 * of a second or more. */
#define GOSSIP_STALL_MIN_S 0.25

/* Time between two exchanges: the last one's end (< 0 before the first:
 * a joiner's pull is no gap), the longest, when it ended and the longest
 * before it (gossip_resumed); the sum of the gaps and how many, for their
 * mean. */
struct gossip_gap {
	double from, longest, longest_end, longest_was, sum;
	uint64_t n;
};

/* Buffers of one role; they grow to the largest exchange and stay. */
struct gossip_scratch {
	struct mask mask;
	float *mine, *theirs;     /* count floats each */
	size_t vcap;
	uint8_t *wire;            /* an encoded message */
	size_t wcap;
};

struct gossip {
	struct gossip_params p;
	struct model *m;
	struct gossip_ops ops;

	int ready;                /* holds the job's model */
	int trained;              /* training over: slices go out flagged so */
	/* The exchange this peer initiated, if any. */
	int active;
	char addr[WIRE_ADDR_MAX + 1];
	uint64_t nonce;
	double start, deadline;
	size_t req_bytes;

	struct gossip_scratch own;    /* the exchange this peer initiated */
	struct gossip_scratch serve;  /* answering someone else's */
	struct drift *drift;          /* mode delta's anchor (drift.h) */
	struct trust *trust;          /* borrowed; may be NULL */
	float *origin;                /* the job's start model; d floats */
	size_t origin_d;
	int late;                     /* training started past step 0: no origin */
	gossip_tamper_fn tamper;      /* test builds only */
	void *tamper_arg;

	double distance, distance_rel;
	uint64_t partner_step;    /* the step of the latest OK REPLY */
	uint64_t initiated, ok, busy_in, failed, timeouts, served, busy_out, refused;
	uint64_t gone;            /* failed by gossip_partner_down */
	int partner_gone;         /* this exchange's partner is known gone */
	int unsent;               /* its request could not be delivered */
	uint64_t bad_mask;	/* requests whose mask parameters cannot build */
	uint64_t malformed;
	uint64_t rejected[GOSSIP_REFUSE_N];
	uint64_t own_nonfinite;   /* own values withheld: not finite */
	double far_ratio_max;     /* largest accepted distance / scale */
	/* Between two exchanges of any kind, and between two this peer
	 * started that finished: the first counts the partners' rounds too,
	 * the second only this peer's own cadence (gossip.h). */
	struct gossip_gap gap[GOSSIP_GAP_N];
	/* Since the last own exchange that mixed: when the first try began
	 * (< 0 none yet) and the tries that mixed nothing, what a stall's
	 * log line (gossip_note_round) is made of. */
	double round_start;
	unsigned round_busy, round_failed;
};

static const char *const gossip_type_names[GOSSIP_T_LAST - GOSSIP_T_FIRST + 1] = {
	[GOSSIP_T_REQ - GOSSIP_T_FIRST] = "gossip_req",
	[GOSSIP_T_REPLY - GOSSIP_T_FIRST] = "gossip_reply",
};

const struct proto gossip_proto = {
	"gossip", GOSSIP_T_FIRST, GOSSIP_T_LAST, gossip_type_names
};

static const char *const gossip_refusal_names[GOSSIP_REFUSE_N] = {
	[GOSSIP_REFUSE_NONFINITE] = "nonfinite",
	[GOSSIP_REFUSE_FAR] = "far",
	[GOSSIP_REFUSE_SUSPECT] = "suspect",
};

struct gossip_send_ctx {
	struct gossip *g;
	uint64_t nonce;
};

static const char *const gossip_values_names[GOSSIP_VALUES_N] = {
	[GOSSIP_FP32] = "fp32", [GOSSIP_FP16] = "fp16", [GOSSIP_INT8] = "int8",
	[GOSSIP_INT2] = "int2",
};

const char *
gossip_values_name(enum gossip_values v)
{
	return v < GOSSIP_VALUES_N ? gossip_values_names[v] : "unknown";
}

const char *
gossip_refusal_name(enum gossip_refusal r)
{
	return r < GOSSIP_REFUSE_N ? gossip_refusal_names[r] : "unknown";
}

int
gossip_finite(const float *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(v[i]))
			return 0;
	}
	return 1;
}

/* May own values go out in fmt? fp16 turns what exceeds its range into
 * infinities. */
static int
gossip_sendable(const float *v, size_t n, enum gossip_values fmt)
{
	if (fmt != GOSSIP_FP16)
		return gossip_finite(v, n);
	for (size_t i = 0; i < n; i++) {
		if (!(fabsf(v[i]) <= 65504.0f))
			return 0;
	}
	return 1;
}

int
gossip_new(const struct gossip_params *p, struct model *m, const struct gossip_ops *ops,
    struct gossip **out)
{
	struct gossip *g = calloc(1, sizeof(*g));

	if (g == NULL)
		return -ENOMEM;
	g->p = *p;
	g->m = m;
	g->ops = *ops;
	g->distance = -1;
	for (int i = 0; i < GOSSIP_GAP_N; i++)
		g->gap[i].from = -1;
	g->round_start = -1;
	g->distance_rel = -1;
	g->ready = 1;
	if (drift_new(&g->drift) < 0) {
		free(g);
		return -ENOMEM;
	}
	*out = g;
	return 0;
}

static void
gossip_scratch_free(struct gossip_scratch *sc)
{
	mask_free(&sc->mask);
	free(sc->mine);
	free(sc->theirs);
	free(sc->wire);
}

void
gossip_free(struct gossip *g)
{
	if (g == NULL)
		return;
	gossip_scratch_free(&g->own);
	gossip_scratch_free(&g->serve);
	drift_free(g->drift);
	free(g->origin);
	free(g);
}

void
gossip_set_params(struct gossip *g, const struct gossip_params *p)
{
	g->p = *p;
}

void
gossip_set_trust(struct gossip *g, struct trust *t)
{
	g->trust = t;
}

void
gossip_set_tamper(struct gossip *g, gossip_tamper_fn fn, void *arg)
{
	g->tamper = fn;
	g->tamper_arg = arg;
}

const float *
gossip_origin(const struct gossip *g)
{
	return g->origin != NULL && g->origin_d == g->m->d ? g->origin : NULL;
}

/* The test build's fault on values about to leave; the peer's own
 * bookkeeping of the exchange sees them too, as it is the faulty one. */
static void
gossip_tamper(struct gossip *g, struct gossip_scratch *sc)
{
	if (g->tamper != NULL)
		g->tamper(g->tamper_arg, &sc->mask, sc->mine, sc->mask.count, g->distance,
		    gossip_origin(g));
}

static void
gossip_drop_origin(struct gossip *g)
{
	free(g->origin);
	g->origin = NULL;
	g->origin_d = 0;
}

/* The model as it is now becomes the origin trust measures ways from;
 * without memory for it, none (trust then judges by distance alone). */
static void
gossip_take_origin(struct gossip *g)
{
	struct model_range whole = { 0, g->m->d };
	float *x;

	if (g->m->d == 0 || (x = realloc(g->origin, g->m->d * sizeof(float))) == NULL) {
		gossip_drop_origin(g);
		return;
	}
	g->origin = x;
	g->origin_d = g->m->d;
	if (model_gather(g->m, &whole, 1, g->origin) != 0)
		gossip_drop_origin(g);
}

/*
 * Only the job's start is an origin. A model this peer trains on from a
 * later step, resumed from its checkpoint or pulled by a joiner, is where
 * the job was, not where it came from: this peer's way from there is its
 * own steps, as large as the members' spread, and on the coordinates its
 * steps moved most (delta's masks) an honest member, who mixed where this
 * peer trained alone, lies the other way. Soaks of 32 peers saw such a
 * peer suspect nearly the whole job as behind within 30 s and stop
 * choosing partners for up to 83 s.
 */
static void
gossip_origin_at_ready(struct gossip *g)
{
	if (!g->late)
		gossip_take_origin(g);
}

int
gossip_set_origin(struct gossip *g, const float *x)
{
	float *o;

	if (g->m->d == 0)
		return -EINVAL;
	if ((o = malloc(g->m->d * sizeof(float))) == NULL)
		return -ENOMEM;
	memcpy(o, x, g->m->d * sizeof(float));
	free(g->origin);
	g->origin = o;
	g->origin_d = g->m->d;
	return 0;
}

void
gossip_start_at(struct gossip *g, uint64_t step)
{
	if (step == 0)
		return;
	g->late = 1;
	gossip_drop_origin(g);
}

void
gossip_set_trained(struct gossip *g)
{
	if (g != NULL)
		g->trained = 1;
}

/* The flags of this peer's slices on the wire. */
static uint8_t
gossip_flags(const struct gossip *g)
{
	return g->trained ? GOSSIP_WIRE_TRAINED : 0;
}

void
gossip_set_ready(struct gossip *g, int ready)
{
	/* The model was replaced (pulled from donors): its drift is not
	 * this peer's learning. */
	if (ready && !g->ready)
		drift_reset(g->drift);
	if (ready && (!g->ready || g->origin == NULL))
		gossip_origin_at_ready(g);
	/* A mode that chooses its masks (delta) sends what moved since
	 * here, the first steps' large moves included (drift_anchor); on
	 * failure the first selection anchors. */
	if (ready && gossip_mode_row(g->p.mode)->select != NULL && g->m->d > 0)
		(void)drift_anchor(g->drift, g->m);
	g->ready = ready;
}

int
gossip_active(const struct gossip *g)
{
	return g->active;
}

void
gossip_resumed(struct gossip *g, double now)
{
	for (int i = 0; i < GOSSIP_GAP_N; i++) {
		struct gossip_gap *gap = &g->gap[i];

		if (gap->from < 0)
			continue;
		/* An exchange noted in the loop's turn that ran before
		 * SIGCONT's handler (the two come in together) ended a gap
		 * that holds the stop. */
		if (now - gap->longest_end < GOSSIP_RESUME_SLACK_S)
			gap->longest = gap->longest_was;
	}
	gossip_gaps_restart(g, now);
}

void
gossip_gaps_restart(struct gossip *g, double now)
{
	for (int i = 0; i < GOSSIP_GAP_N; i++) {
		if (g->gap[i].from >= 0)
			g->gap[i].from = now;
	}
}

double
gossip_longest_gap(const struct gossip *g, enum gossip_gap_kind kind)
{
	return g->gap[kind].longest;
}

uint64_t
gossip_exchanges(const struct gossip *g, enum gossip_gap_kind kind)
{
	return kind == GOSSIP_GAP_OWN ? g->ok : g->ok + g->served;
}

double
gossip_consensus_distance(const struct gossip *g)
{
	return g->distance;
}

double
gossip_relative_distance(const struct gossip *g)
{
	return g->distance_rel;
}

static int
gossip_reserve(struct gossip_scratch *sc, size_t count, size_t wire_bytes)
{
	if (count > sc->vcap) {
		float *a = realloc(sc->mine, count * sizeof(float));
		float *b;

		if (a == NULL)
			return -ENOMEM;
		sc->mine = a;
		b = realloc(sc->theirs, count * sizeof(float));
		if (b == NULL)
			return -ENOMEM;
		sc->theirs = b;
		sc->vcap = count;
	}
	if (wire_bytes > sc->wcap) {
		uint8_t *w = realloc(sc->wire, wire_bytes);

		if (w == NULL)
			return -ENOMEM;
		sc->wire = w;
		sc->wcap = wire_bytes;
	}
	return 0;
}

/* One exchange more: the time since the last is a gap between them. */
static void
gossip_note_gap(struct gossip_gap *gap, double now)
{
	if (gap->from >= 0 && now - gap->from > gap->longest) {
		gap->longest_was = gap->longest;
		gap->longest = now - gap->from;
		gap->longest_end = now;
	}
	if (gap->from >= 0) {
		gap->sum += now - gap->from;
		gap->n++;
	}
	gap->from = now;
}

/* An own exchange with partner mixed: one round more. A round that set a
 * new longest gap above twice the mean says in the log what the wait was
 * made of (the round starting late, tries that mixed nothing, or a slow
 * partner), so that a stall in a soak or a job has its cause on record. */
static void
gossip_note_round(struct gossip *g, double now, const char *partner)
{
	struct gossip_gap *gap = &g->gap[GOSSIP_GAP_OWN];
	double wait = now - gap->from, mean = gap->n > 0 ? gap->sum / (double)gap->n : 0;
	char tries[96] = "";

	if (gap->from >= 0 && gap->n >= GOSSIP_STALL_ROUNDS && wait > gap->longest &&
	    wait > 2 * mean && wait >= GOSSIP_STALL_MIN_S) {
		if (g->round_busy + g->round_failed > 0)
			snprintf(tries, sizeof(tries), ", %u tries that mixed nothing (%u busy, "
			    "%u failed)", g->round_busy + g->round_failed, g->round_busy,
			    g->round_failed);
		log_info("gossip: %.2f s between own rounds, %.1fx their mean %.2f s: the first try "
		    "began %.2f s after the last round%s; the exchange that mixed, with %s, took %.2f s",
		    wait, wait / mean, mean, fmax(0, g->round_start - gap->from), tries, partner,
		    now - g->start);
	}
	gossip_note_gap(gap, now);
	g->round_start = -1;
	g->round_busy = g->round_failed = 0;
}

/* Both sides now hold (mine + theirs) / 2 on sc's mask: mode delta's
 * anchor moves there (drift.h). theirs is spent after the mix. */
static void
gossip_note_mixed(struct gossip *g, struct gossip_scratch *sc)
{
	if (!drift_anchored(g->drift))
		return;
	for (size_t i = 0; i < sc->mask.count; i++)
		sc->theirs[i] = 0.5f * (sc->mine[i] + sc->theirs[i]);
	drift_mixed(g->drift, &sc->mask, sc->theirs);
}

/* Pull sc->theirs in to radius of sc->mine: the move of a mix shrinks
 * by the same factor, its direction kept. */
static void
gossip_clip(struct gossip_scratch *sc, size_t n, double keep)
{
	for (size_t i = 0; i < n; i++)
		sc->theirs[i] = sc->mine[i] + (float)keep * (sc->theirs[i] - sc->mine[i]);
}

/* Counts and reports a refusal of values from `from`. */
static enum gossip_refusal
gossip_refuse(struct gossip *g, const char *from, double now, enum gossip_refusal why)
{
	g->rejected[why]++;
	if (why != GOSSIP_REFUSE_SUSPECT) {
		log_warn("gossip: refused values from %s: %s", from, gossip_refusal_name(why));
		if (g->trust != NULL)
			trust_refused(g->trust, from, now);
	}
	if (g->ops.refused != NULL)
		g->ops.refused(g->ops.arg, from, why);
	return why;
}

/* How far each side has come from this peer's origin on sc's mask
 * (trust.h, struct trust_slice); way 0 without an origin. */
static void
gossip_ways(const struct gossip *g, const struct gossip_scratch *sc, size_t n,
    struct trust_slice *sl)
{
	const float *x0 = gossip_origin(g);
	double mm = 0, tt = 0, mt = 0;
	size_t k = 0;

	sl->way = sl->ratio = sl->cos = 0;
	if (x0 == NULL)
		return;
	for (size_t r = 0; r < sc->mask.n; r++) {
		for (size_t j = 0; j < sc->mask.r[r].len && k < n; j++, k++) {
			double o = (double)x0[sc->mask.r[r].off + j];
			double a = (double)sc->mine[k] - o, b = (double)sc->theirs[k] - o;

			mm += a * a;
			tt += b * b;
			mt += a * b;
		}
	}
	if (k == 0 || mm <= 0)
		return;
	sl->way = sqrt(mm / (double)k);
	sl->ratio = sqrt(tt / mm);
	sl->cos = tt > 0 ? mt / sqrt(mm * tt) : 0;
}

/* What trust (trust.h) says of a slice that passed the bounds (flags and
 * step: its message's, GOSSIP_WIRE_*): pulled in to its radius and
 * weighed by its sender's trust, in place (*rms with it), or refused as a
 * suspect's. */
static enum gossip_refusal
gossip_trust(struct gossip *g, struct gossip_scratch *sc, size_t n, const char *from,
    unsigned flags, uint64_t step, double now, double *rms)
{
	struct trust_slice sl = { .rms = *rms, .trained = !!(flags & GOSSIP_WIRE_TRAINED),
	    .step = step, .own_step = g->ops.step(g->ops.arg) };
	double keep;
	int was, is;

	if (g->trust == NULL)
		return GOSSIP_REFUSE_N;
	sl.radius = trust_radius(g->trust, now);
	gossip_ways(g, sc, n, &sl);
	was = trust_suspect(g->trust, from);
	is = trust_observe(g->trust, from, now, &sl);
	if (is != was)
		log_warn("gossip: %s is %s", from, is ? "suspect: its values are no longer mixed" :
		    "no longer suspect");
	if (is)
		return gossip_refuse(g, from, now, GOSSIP_REFUSE_SUSPECT);
	keep = trust_weight(g->trust, from);
	if (sl.radius > 0 && *rms > sl.radius)
		keep *= sl.radius / *rms;
	if (keep < 1) {
		gossip_clip(sc, n, keep);
		*rms *= keep;
	}
	return GOSSIP_REFUSE_N;
}

/* May sc->theirs be mixed into sc->mine? Returns GOSSIP_REFUSE_N when it
 * may, with its RMS distance in *rms (after any clipping); else the
 * reason, counted and reported. The scale is this peer's own recent
 * state: the EWMA of the distances it accepted, and the RMS of its own
 * slice (which early in a job, when peers still agree, is far above their
 * distance). */
static enum gossip_refusal
gossip_vet(struct gossip *g, struct gossip_scratch *sc, size_t n, const char *from,
    unsigned flags, uint64_t step, double now, double *rms, double *own_rms)
{
	double sum = 0, own = 0, scale;

	if (!gossip_finite(sc->theirs, n))
		return gossip_refuse(g, from, now, GOSSIP_REFUSE_NONFINITE);
	for (size_t i = 0; i < n; i++) {
		double e = (double)sc->mine[i] - (double)sc->theirs[i];

		sum += e * e;
		own += (double)sc->mine[i] * (double)sc->mine[i];
	}
	*rms = sqrt(sum / (double)(n ? n : 1));
	*own_rms = sqrt(own / (double)(n ? n : 1));
	scale = fmax(fmax(g->distance, *own_rms), GOSSIP_FAR_FLOOR);
	if (!(*rms <= GOSSIP_FAR_GAMMA * scale))
		return gossip_refuse(g, from, now, GOSSIP_REFUSE_FAR);
	if (*rms / scale > g->far_ratio_max)
		g->far_ratio_max = *rms / scale;
	return gossip_trust(g, sc, n, from, flags, step, now, rms);
}

static double
gossip_ewma(double avg, double x)
{
	return avg < 0 ? x : avg + GOSSIP_DIST_ALPHA * (x - avg);
}

static void
gossip_note_distance(struct gossip *g, double rms, double own_rms)
{
	g->distance = gossip_ewma(g->distance, rms);
	if (own_rms > 0)
		g->distance_rel = gossip_ewma(g->distance_rel, rms / own_rms);
}

static void
gossip_finish(struct gossip *g, double now, enum gossip_result r, size_t bytes)
{
	char addr[sizeof(g->addr)];

	g->active = 0;
	if (r == GOSSIP_BUSY)
		g->round_busy++;
	else if (r == GOSSIP_FAILED)
		g->round_failed++;
	memcpy(addr, g->addr, sizeof(addr));
	if (g->ops.done != NULL)
		g->ops.done(g->ops.arg, addr, now, r, bytes, now - g->start);
}

static void
gossip_req_sent(void *arg, int status)
{
	struct gossip_send_ctx *ctx = arg;
	struct gossip *g = ctx->g;

	/* Ended by the next gossip_tick, which knows the time: the done
	 * callback may start the next exchange, whose deadline would
	 * otherwise count from this one's start. The transport fails a
	 * request when its peer is unreachable, and says so first
	 * (rounds_peer_down), which ticks at once. */
	if (status < 0 && g->active && g->nonce == ctx->nonce) {
		log_debug("gossip: request to %s failed: %s", g->addr, strerror(-status));
		g->unsent = 1;
		g->deadline = g->start;
	}
	free(ctx);
}

/* The initiator's slice: the mask and its values in g->own. A mode that
 * chooses its mask sends round(density * d) coordinates (at least one). */
static int
gossip_slice(struct gossip *g, const struct gossip_mode_row *row, uint64_t nonce)
{
	struct gossip_scratch *sc = &g->own;
	size_t k;
	int rc;

	if (row->build != NULL) {
		if ((rc = row->build(&sc->mask, g->p.seed, nonce, g->m->d, g->p.density,
		    g->p.block)) < 0 ||
		    (rc = gossip_reserve(sc, sc->mask.count, gossip_req_max(g->p.mode, g->p.values,
		    sc->mask.count))) < 0)
			return rc;
		return model_gather(g->m, sc->mask.r, sc->mask.n, sc->mine);
	}
	k = (size_t)llround(g->p.density * (double)g->m->d);
	k = k == 0 ? 1 : k > g->m->d ? g->m->d : k;
	if ((rc = gossip_reserve(sc, k, gossip_req_max(g->p.mode, g->p.values, k))) < 0 ||
	    (rc = row->select(g->drift, g->m, k, &sc->mask, sc->mine)) < 0)
		return rc;
	return sc->mask.count == 0 ? -EAGAIN : 0;
}

int
gossip_start(struct gossip *g, double now, const char *addr)
{
	const struct gossip_mode_row *row = gossip_mode_row(g->p.mode);
	struct gossip_send_ctx *ctx;
	struct gossip_req q;
	uint64_t nonce;
	size_t len;
	int rc;

	if (g->active || !g->ready)
		return -EBUSY;
	randombytes_buf(&nonce, sizeof(nonce));
	if ((rc = gossip_slice(g, row, nonce)) < 0)
		return rc;
	if (!gossip_sendable(g->own.mine, g->own.mask.count, g->p.values)) {
		g->own_nonfinite++;
		return -EDOM;
	}
	gossip_tamper(g, &g->own);
	q = (struct gossip_req){ .mode = g->p.mode, .values = g->p.values,
	    .flags = gossip_flags(g), .block = (uint32_t)g->p.block, .nonce = nonce,
	    .d = g->m->d, .count = g->own.mask.count, .step = g->ops.step(g->ops.arg),
	    .density = g->p.density };
	if ((rc = gossip_req_encode(&q, &g->own.mask, g->own.mine, g->own.wire, g->own.wcap,
	    &len)) < 0)
		return rc;

	ctx = malloc(sizeof(*ctx));
	if (ctx == NULL)
		return -ENOMEM;
	ctx->g = g;
	ctx->nonce = nonce;
	snprintf(g->addr, sizeof(g->addr), "%s", addr);
	g->nonce = nonce;
	g->start = now;
	if (g->round_start < 0)
		g->round_start = now;
	g->deadline = now + g->p.timeout;
	g->partner_gone = 0;
	g->unsent = 0;
	g->req_bytes = len;
	g->active = 1;
	g->initiated++;
	rc = g->ops.send(g->ops.arg, addr, GOSSIP_T_REQ, g->own.wire, len, gossip_req_sent, ctx);
	if (rc < 0) {
		free(ctx);
		g->active = 0;
		g->failed++;
		return rc;
	}
	return 0;
}

void
gossip_set_deadline(struct gossip *g, double deadline)
{
	if (g->active && deadline < g->deadline)
		g->deadline = deadline;
}

/* A REPLY without values: BUSY or REFUSED. */
static void
gossip_reply_status(struct gossip *g, const char *to, uint64_t nonce,
    enum gossip_reply_status status)
{
	struct gossip_reply r = { .status = status, .nonce = nonce,
	    .step = g->ops.step(g->ops.arg) };
	uint8_t w[GOSSIP_REPLY_HEADER];
	size_t len;

	if (gossip_reply_encode(&r, NULL, w, sizeof(w), &len) == 0)
		g->ops.send(g->ops.arg, to, GOSSIP_T_REPLY, w, len, NULL, NULL);
}

/* The responder's slice for q in g->serve: the mask, decoded from the REQ
 * where the initiator chose it, else rebuilt from its parameters, and our
 * values on it. Returns 0, -EBADMSG when the REQ's indices are malformed
 * (mask_decode's -EINVAL: nothing else here says EBADMSG), or another
 * negative errno when this peer refuses it. */
static int
gossip_serve_slice(struct gossip *g, const struct gossip_mode_row *row,
    const struct gossip_req *q)
{
	struct gossip_scratch *sc = &g->serve;
	int rc;

	if (row->build == NULL) {
		if ((rc = mask_decode(&sc->mask, q->idx, q->ilen, q->count, q->d)) < 0)
			return rc == -EINVAL ? -EBADMSG : rc;
	} else if ((rc = row->build(&sc->mask, g->p.seed, q->nonce, q->d, q->density,
	    q->block)) < 0) {
		return rc;
	} else if (sc->mask.count != q->count) {
		return -ERANGE;
	}
	if ((rc = gossip_reserve(sc, q->count, GOSSIP_REPLY_HEADER +
	    gossip_values_bytes(q->values, q->count))) < 0)
		return rc;
	return model_gather(g->m, sc->mask.r, sc->mask.n, sc->mine);
}

/* Responder: mix the initiator's values in and answer with ours. */
static void
gossip_on_req(struct gossip *g, double now, const char *from, const uint8_t *buf,
    size_t len)
{
	const struct gossip_mode_row *row;
	struct gossip_reply r = { .status = GOSSIP_REPLY_OK };
	struct gossip_req q;
	struct errbuf why;
	enum gossip_refusal mix;
	double rms = 0, own_rms = 0;
	size_t rlen;
	int rc;

	if (gossip_req_decode(buf, len, &q, &why) < 0) {
		log_debug("gossip: malformed request from %s: %s", from, why.msg);
		g->malformed++;
		return;
	}
	row = gossip_mode_row(q.mode);
	/* A mask nobody could build: refused before any arithmetic on it. */
	if (row->check != NULL && row->check(q.d, q.density, q.block, &why) < 0) {
		g->bad_mask++;
		log_debug("gossip: refused a request from %s: %s", from, why.msg);
		gossip_reply_status(g, from, q.nonce, GOSSIP_REPLY_REFUSED);
		return;
	}
	/* A sparse request is served even while our own exchange is in
	 * flight: two random masks share ~density of their coordinates, and
	 * an interleaved average is still a convex combination. Refusing
	 * them cost ~80% of all exchanges with 8 peers. Exchanges that
	 * overlap entirely wait their turn. */
	if ((g->active && (row->exclusive || gossip_mode_row(g->p.mode)->exclusive)) ||
	    !g->ready) {
		g->busy_out++;
		gossip_reply_status(g, from, q.nonce, GOSSIP_REPLY_BUSY);
		return;
	}
	/* Another model, or a mask we would not rebuild identically. */
	if (q.d != g->m->d) {
		g->refused++;
		gossip_reply_status(g, from, q.nonce, GOSSIP_REPLY_REFUSED);
		return;
	}
	if ((rc = gossip_serve_slice(g, row, &q)) == -EBADMSG) {
		g->malformed++;
		return;
	}
	if (rc < 0) {
		g->refused++;
		gossip_reply_status(g, from, q.nonce, GOSSIP_REPLY_REFUSED);
		return;
	}
	if (!gossip_sendable(g->serve.mine, q.count, q.values)) {
		g->own_nonfinite++;
		gossip_reply_status(g, from, q.nonce, GOSSIP_REPLY_REFUSED);
		return;
	}
	gossip_values_get(g->serve.theirs, q.vals, q.count, q.values);
	/* A suspect is still answered, its values left out: an honest member
	 * that lies far only for a while (it started first, or ran ahead) is
	 * pulled back by our values and comes back near, where a refusal
	 * would leave it training alone, ever farther and ever suspect. */
	mix = gossip_vet(g, &g->serve, q.count, from, q.flags, q.step, now, &rms, &own_rms);
	if (mix != GOSSIP_REFUSE_N && mix != GOSSIP_REFUSE_SUSPECT) {
		gossip_reply_status(g, from, q.nonce, GOSSIP_REPLY_REFUSED);
		return;
	}
	/* -EBUSY: an external trainer holds the model and its queue of
	 * mixes is full; the partner may try another peer. */
	if (mix == GOSSIP_REFUSE_N && (rc = model_average_in(g->m, g->serve.mask.r,
	    g->serve.mask.n, g->serve.theirs)) < 0) {
		if (rc == -EBUSY)
			g->busy_out++;
		else
			g->refused++;
		gossip_reply_status(g, from, q.nonce, rc == -EBUSY ? GOSSIP_REPLY_BUSY :
		    GOSSIP_REPLY_REFUSED);
		return;
	}
	r.values = (uint8_t)q.values;
	r.flags = gossip_flags(g);
	r.nonce = q.nonce;
	r.count = q.count;
	r.step = g->ops.step(g->ops.arg);
	gossip_tamper(g, &g->serve);
	if (gossip_reply_encode(&r, g->serve.mine, g->serve.wire, g->serve.wcap, &rlen) == 0)
		g->ops.send(g->ops.arg, from, GOSSIP_T_REPLY, g->serve.wire, rlen, NULL, NULL);
	/* A suspect's answer is no exchange: nothing was mixed here. */
	if (mix != GOSSIP_REFUSE_N)
		return;
	g->served++;
	gossip_note_gap(&g->gap[GOSSIP_GAP_ANY], now);
	gossip_note_distance(g, rms, own_rms);
	gossip_note_mixed(g, &g->serve);
}

/* Initiator: the partner's answer to our REQ. */
static void
gossip_on_reply(struct gossip *g, double now, const char *from, const uint8_t *buf,
    size_t len)
{
	struct gossip_reply r;
	struct errbuf why;
	double rms = 0, own_rms = 0;

	if (gossip_reply_decode(buf, len, &r, &why) < 0) {
		log_debug("gossip: malformed reply from %s: %s", from, why.msg);
		g->malformed++;
		return;
	}
	/* A late answer to an exchange that already timed out, or a forgery
	 * by another member: not ours to apply. */
	if (!g->active || r.nonce != g->nonce || strcmp(from, g->addr) != 0)
		return;
	if (r.status == GOSSIP_REPLY_BUSY) {
		g->busy_in++;
		gossip_finish(g, now, GOSSIP_BUSY, g->req_bytes + len);
		return;
	}
	if (r.status == GOSSIP_REPLY_REFUSED ||
	    gossip_reply_check(&r, g->p.values, g->own.mask.count, &why) < 0) {
		if (r.status != GOSSIP_REPLY_REFUSED)
			g->malformed++;
		g->failed++;
		gossip_finish(g, now, GOSSIP_FAILED, g->req_bytes + len);
		return;
	}
	gossip_values_get(g->own.theirs, r.vals, r.count, g->p.values);
	if (gossip_vet(g, &g->own, r.count, from, r.flags, r.step, now, &rms, &own_rms) !=
	    GOSSIP_REFUSE_N ||
	    model_average_in(g->m, g->own.mask.r, g->own.mask.n, g->own.theirs) < 0) {
		g->failed++;
		gossip_finish(g, now, GOSSIP_FAILED, g->req_bytes + len);
		return;
	}
	gossip_note_distance(g, rms, own_rms);
	gossip_note_mixed(g, &g->own);
	g->partner_step = r.step;
	g->ok++;
	gossip_note_gap(&g->gap[GOSSIP_GAP_ANY], now);
	gossip_note_round(g, now, from);
	gossip_finish(g, now, GOSSIP_OK, g->req_bytes + len);
}

void
gossip_recv(struct gossip *g, double now, const char *from, uint8_t type, const uint8_t *buf,
    size_t len)
{
	switch (type) {
	case GOSSIP_T_REQ:
		gossip_on_req(g, now, from, buf, len);
		break;
	case GOSSIP_T_REPLY:
		gossip_on_reply(g, now, from, buf, len);
		break;
	default:
		g->malformed++;
		break;
	}
}

double
gossip_tick(struct gossip *g, double now)
{
	if (!g->active)
		return -1;
	if (now >= g->deadline) {
		log_debug("gossip: exchange with %s %s", g->addr, g->unsent ?
		    "failed: its request was not delivered" : g->partner_gone ?
		    "failed: the partner is gone" : "timed out");
		if (g->partner_gone)
			g->gone++;
		else if (!g->unsent)
			g->timeouts++;
		g->failed++;
		gossip_finish(g, now, GOSSIP_FAILED, g->req_bytes);
	}
	/* The done callback may have started the next exchange already. */
	return g->active ? g->deadline : -1;
}

void
gossip_partner_down(struct gossip *g, double now, const char *addr)
{
	if (!g->active || strcmp(g->addr, addr) != 0)
		return;
	g->partner_gone = 1;
	if (g->deadline > now)
		g->deadline = now;
}

int
gossip_stats_json(const struct gossip *g, json_t *obj)
{
	json_t *rej = json_object(), *o;

	for (int i = 0; i < GOSSIP_REFUSE_N; i++)
		json_object_set_new(rej, gossip_refusal_names[i], json_integer((json_int_t)
		    g->rejected[i]));
	o = json_pack(
	    "{s:s, s:s, s:f, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}",
	    "mode", gossip_mode_name(g->p.mode), "values", gossip_values_name(g->p.values),
	    "density", g->p.density, "block", (int)g->p.block,
	    "initiated", (json_int_t)g->initiated, "completed", (json_int_t)g->ok,
	    "served", (json_int_t)g->served, "busy_received", (json_int_t)g->busy_in,
	    "busy_sent", (json_int_t)g->busy_out, "failed", (json_int_t)g->failed,
	    "timeouts", (json_int_t)g->timeouts, "partner_gone", (json_int_t)g->gone,
	    "refused", (json_int_t)g->refused,
	    "malformed", (json_int_t)g->malformed, "bad_mask", (json_int_t)g->bad_mask,
	    "consensus_distance", util_json_real(g->distance));
	if (o == NULL) {
		json_decref(rej);
		return -ENOMEM;
	}
	json_object_set_new(o, "rejected", rej);
	json_object_set_new(o, "own_nonfinite", json_integer((json_int_t)g->own_nonfinite));
	json_object_set_new(o, "far_ratio_max", util_json_real(g->far_ratio_max));
	return json_object_set_new(obj, "gossip", o);
}

uint64_t
gossip_partner_step(const struct gossip *g)
{
	return g->partner_step;
}

void
gossip_restart_relative_distance(struct gossip *g)
{
	g->distance_rel = -1;
}
