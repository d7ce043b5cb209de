/*
 * exchange_sim: partner selection (src/select.c), the exchange's masks
 * (src/mask.c) and its averaging run as N peers on a simulated network,
 * to see how fast their models agree at sizes that cannot be started as
 * daemons on one machine (issue 33). It owns the simulated world: an
 * event queue, the peers' vectors and step clocks, the links, the
 * scenario and what is measured. select and mask are the daemon's own
 * code, linked from libgossip.a; gossip's exchange and rounds' policy are
 * rebuilt here from src/gossip.c and src/rounds.c, whose state machines
 * need the daemon's model, trust and transport.
 *
 * Modelled:
 * - the model is a vector of --dim floats per peer, so that averaging
 *   is exact and the consensus distance can be measured directly (RMS
 *   over peers of ||x_i - mean|| / sqrt(dim)). Peers start apart (every
 *   coordinate drawn N(0, --init-spread)), as after independent starts,
 *   so the distance falls from about --init-spread to a floor where
 *   mixing balances the steps;
 * - a local step adds --drift along one direction shared by every peer
 *   (the loss's descent direction: the mean moves, and peers that step
 *   faster get ahead of the others), --own-drift along one of each peer's
 *   own (its shard's pull: without mixing the peers part linearly in
 *   steps) plus --noise per coordinate drawn
 *   apart for every peer (stochastic gradients: without mixing the peers
 *   walk apart as sqrt(steps)), alike for every coordinate or scaled by
 *   --noise-profile (a real model's parameters move very unlike one
 *   another: contrib/bench/exchange_calib.sh measures one), and with
 *   --noise-growth g step k's noise has 1 + g k times the variance (the
 *   peers of a live job can walk apart faster as it trains, which
 *   exchange_calib.sh fits). Steps are
 *   applied lazily, in one go when a peer's vector is read or mixed: s
 *   steps add s times the drift and noise of their summed variance
 *   (uniform with unit variance, not normal: only the variance matters to
 *   a distance).
 *   With --momentum m a step adds a velocity instead, which keeps m of
 *   itself and takes 1 - m of the step's drift and noise (SGD's momentum
 *   at its scale: the walk over many steps is the same), and which no
 *   exchange mixes: the trainer's momentum buffer carries on where each
 *   peer was heading. Those steps go one at a time;
 * - each peer steps at its own rate, lognormal around --steps-per-s with
 *   --rate-spread, and starts a round every --interval steps, as
 *   rounds_on_step: when one is due while its exchange runs, at the first
 *   step after it ends. The partner comes from select_pick over every
 *   other peer, with the policy and parameters of the daemon;
 *   select_record gets what rounds_done gives it (BUSY: nothing; failure:
 *   a failure; success: bytes both ways and seconds); a BUSY or failed
 *   partner is replaced up to ROUNDS_RETRIES times in the same round;
 * - the exchange as gossip.c does it: the initiator's values on the mask
 *   are taken at the start and travel in a REQ; the responder mixes them
 *   in when the REQ arrives and answers with its own values as they were
 *   then; the initiator mixes those in when the REPLY arrives. Both sides
 *   average (mine + theirs) / 2 on the mask. Masks: saps from mask_build
 *   (seed, nonce), dense the whole vector, delta the top k of |x - anchor|
 *   with the anchor moved to (mine + theirs) / 2 on both sides (drift.h,
 *   gossip_note_mixed; exact top k here, where drift_select is exact to 1/128 and needs a
 *   struct model). Sparse REQs are served while the responder's own
 *   exchange runs; dense ones are answered BUSY then, as gossip_on_req.
 *   The default is saps, not the daemon's delta: delta sends only what
 *   moved since a coordinate was last mixed, so the spread of independent
 *   starts measured here would never travel (the daemon never has one:
 *   its peers agree on one starting model). Delta's figure is the floor
 *   from a common start: --mode delta --init-spread 0;
 * - wire sizes of a --wire-d model (the simulated vector is small; the
 *   bytes are those of the model the job would train): gossip_values_bytes
 *   of k = density * wire-d values, the REQ and REPLY headers, one frame
 *   header and MAC per message, and delta's indices at one varint of the
 *   mean gap (1 / density - 1) each, as mask_encode writes them;
 * - links: peers in --sites sites (round-robin by index), one latency per
 *   pair of sites drawn from a range, bandwidth --site-mbit within a site
 *   and --net-ratio times less across. A message takes latency + bytes /
 *   bandwidth; links are not shared (no queueing, no congestion). An
 *   exchange may take what rounds_patience gives its link (at most
 *   exchange_timeout); it is lost with --loss (it then fails at that
 *   deadline, its REQ never delivered) and fails at it when its REPLY
 *   would come later (a REQ that arrives after that is not mixed here,
 *   where the daemon would still mix it);
 * - what the daemon reports as consensus_distance: per peer, an EWMA
 *   (alpha 0.1, GOSSIP_DIST_ALPHA) of the RMS of (theirs - mine) over
 *   each slice it mixed, averaged here over peers;
 * - churn (--churn): at one moment a share of the peers crash (they stop;
 *   exchanges with them time out, and select backs off) and stay in every
 *   live list for --detect-s (membership_sim: about 3 s), while as many
 *   fresh peers pull the model: the average of up to PULL_MAX_DONORS
 *   running peers, the whole model in the job's value format (--values)
 *   from each over its link (pull.h), listed and training once the
 *   slowest donor is done.
 *
 * Not modelled: the membership protocol (every peer knows every other
 * from the start, and a change reaches every list at once; its timing is
 * membership_sim's), the pull's chunks, retries and vetting, trust and
 * the vetting of values, their int8/fp16 rounding without --start-model
 * (only their bytes: the vectors are then walks around 0, whose rounding
 * says nothing of a model's),
 * pace (--lag), the outer step, the closing phase, CPU time, shared
 * links.
 *
 * Cost: select_pick looks every live address up in a linear list of the
 * links it has used (select.c: jobs have tens of peers), so one pick
 * costs (peers x links used) string compares, as it does in the daemon:
 * a few ms per round there, but 10,000 simulated peers would take hours.
 * --view M hands each pick M others drawn afresh instead of all (at
 * 1,000 peers --view 200 gives the same figures as all, in a quarter of
 * the time). Memory: one vector of --dim floats per peer (two in delta,
 * its anchor), select's links, and the queue of two events per peer.
 *
 * Deterministic for a seed: libsodium's randombytes, which select_pick
 * draws from, is replaced by a stream of the seed.
 *
 * Prints "key value" lines; --series FILE writes the distance over time;
 * contrib/sim/exchange.py runs it for several sizes and prints tables.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <sodium.h>

#include "gossip_wire.h"
#include "kinds.h"
#include "mask.h"
#include "pull.h"
#include "rng.h"
#include "rounds.h"
#include "select.h"
#include "simopt.h"
#include "simq.h"
#include "util.h"
#include "wire.h"

#define SIM_MAX_SITES	16
#define SIM_ADDR	24
#define SIM_DIST_ALPHA	0.1	/* gossip.c's GOSSIP_DIST_ALPHA */
#define SIM_FRAME	(WIRE_HEADER_SIZE + WIRE_MAC_SIZE)

static struct {
	int		n;
	int		view;		/* 0: every other peer */
	int		dim;
	double		wire_d;
	enum gossip_mode mode;
	enum gossip_values values;
	double		density;
	int		block;
	long		interval;
	enum select_policy policy;
	double		bw_ratio, stale_after, timeout, patience;
	int		sites;
	double		site_bps, net_ratio;
	double		local_min_s, local_max_s, remote_min_s, remote_max_s;
	double		loss;
	double		rate, rate_spread;
	double		init_spread, drift, own_drift, noise, noise_growth, momentum;
	double		duration, sample, level;
	uint64_t	seed;
	const char	*series;
	double		churn, churn_at, detect_s;	/* churn_at < 0: duration / 2 */
	const char	*profile, *start;
} opt = { 100, 0, 1024, 1e8, GOSSIP_SAPS, GOSSIP_INT8, 0.04, 64, 4, SELECT_ADAPTIVE, 4, 10,
	5, 8, 3, 1e9 / 8, 10, 0.0001, 0.0005, 0.020, 0.050, 0, 8, 0.3, 1, 0.001, 0, 0.01, 0, 0, 60, 1,
	0.3, 1, NULL, 0, -1, 3, NULL, NULL };

enum sim_ekind { SIM_ROUND, SIM_REQ, SIM_REPLY, SIM_BUSY, SIM_FAIL, SIM_CHURN, SIM_FORGET,
	SIM_PULLED };

/* A joiner is off until its pull is in; a crashed peer is dead, listed by
 * the others until they notice (--detect-s). */
enum sim_pstate { SIM_OFF, SIM_UP, SIM_DEAD };

struct sim_ev {
	double		at;
	uint64_t	seq;		/* ties go in the order of scheduling */
	enum sim_ekind	kind;
	/* ROUND: the peer; PULLED: the joiner; CHURN, FORGET: -1; else the
	 * exchange's initiator */
	int		peer;
};

/* The exchange a peer initiated: one at a time, as gossip's `active`. */
struct sim_xchg {
	int		active;
	int		to;
	double		start, wait;	/* wait: rounds_patience */
	struct mask	mask;
	float		*mine, *theirs;	/* k values each */
	size_t		bytes;		/* both ways so far */
	int		retries;
};

struct sim_peer {
	float		*x, *anchor;
	float		*own;		/* --own-drift's direction; NULL without */
	float		*v;		/* --momentum's velocity; NULL without */
	double		rate, t0;	/* step j happens at t0 + j / rate */
	uint64_t	applied;	/* steps already in x */
	uint64_t	round_step;
	struct select	*sel;
	struct sim_xchg	ex;
	uint64_t	noise[4];	/* xoshiro256+: rng.h's ChaCha is too slow per value */
	double		distance;	/* the daemon's EWMA; < 0 none yet */
	enum sim_pstate	st;
	int		listed;		/* in the others' live lists */
	int		donors[PULL_MAX_DONORS], ndonors;
};

static struct sim_peer *peers;
static int ntotal;		/* --peers and the joiners of --churn */
static char (*names)[SIM_ADDR];
/* The listed peers, and their addresses twice over (2 nlive - 1): the
 * others of the peer at place pos[i] start at ring + pos[i] + 1. */
static int *live, *pos, nlive;
static const char **ring;
static const char **shown;	/* --view: the others one pick sees */
static float *dir;		/* the shared drift direction */
/* --noise-profile: each value's noise scale, mean square 1; NULL: all 1 */
static float *prof;
/* --start-model: the common start; NULL: 0. With it the values that
 * travel are rounded to --values (wire, rounded: one exchange's). */
static float *start;
static uint8_t *wire;
static float *rounded;
static double site_lat[SIM_MAX_SITES][SIM_MAX_SITES];
static struct rng srng;
static double now;
static size_t kval;		/* values per exchange on the simulated vector */

static struct simq evq;
static uint64_t ev_seq, events;

static struct {
	uint64_t ok, busy, failed, lost, same_site;
	uint64_t bytes, pull_bytes;
	int killed, joined;
	double pull_max_s;
	double idx_per_value;	/* delta: varint bytes per index */
} tally;

/* --- the event queue ----------------------------------------------------- */

static int
sim_ev_before(const void *x, const void *y)
{
	const struct sim_ev *a = x, *b = y;

	return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void
sim_ev_push(enum sim_ekind kind, double at, int peer)
{
	struct sim_ev e = { at, ev_seq++, kind, peer };

	simq_push(&evq, &e);
}

/* --- randomness ---------------------------------------------------------- */

/* select_pick draws from libsodium's randombytes: from the seed here. */
static const char *
sim_rb_name(void)
{
	return "exchange_sim";
}

static uint32_t
sim_rb_random(void)
{
	return (uint32_t)rng_u64(&srng);
}

static uint32_t
sim_rb_uniform(const uint32_t upper)
{
	return upper < 2 ? 0 : (uint32_t)rng_below(&srng, upper);
}

static void
sim_rb_buf(void *const buf, const size_t size)
{
	rng_bytes(&srng, buf, size);
}

static randombytes_implementation sim_rb = {
	sim_rb_name, sim_rb_random, NULL, sim_rb_uniform, sim_rb_buf, NULL
};

static uint64_t
sim_rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* Uniform in [0, 1) from p's own stream (xoshiro256+). */
static float
sim_noise(uint64_t *s)
{
	uint64_t r = s[0] + s[3], t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = sim_rotl(s[3], 45);
	return (float)(r >> 40) * (1.0f / 16777216.0f);
}

/* --- peers and links ----------------------------------------------------- */

static uint64_t
sim_steps_at(const struct sim_peer *p, double t)
{
	double s = (t - p->t0) * p->rate;

	return s > 0 ? (uint64_t)s : 0;
}

static double
sim_step_time(const struct sim_peer *p, uint64_t step)
{
	return p->t0 + (double)step / p->rate;
}

/* The noise's variance over steps from + 1 .. to, in units of
 * --noise squared: step k's is 1 + --noise-growth * k. */
static double
sim_noise_var(uint64_t from, uint64_t to)
{
	double a = (double)from, b = (double)to;

	return b - a + opt.noise_growth * (b * (b + 1) - a * (a + 1)) / 2;
}

/* n steps of --momentum, one at a time: each depends on the last. */
static void
sim_momentum_steps(struct sim_peer *p, uint64_t n)
{
	float m = (float)opt.momentum, k = 1.0f - m;
	float a = k * (float)opt.drift, c = k * (float)opt.own_drift, b;

	for (uint64_t t = 0; t < n; t++) {
		b = k * (float)(opt.noise * sqrt(3.0 * sim_noise_var(p->applied + t,
		    p->applied + t + 1)) * 2.0);
		for (int j = 0; j < opt.dim; j++) {
			p->v[j] = m * p->v[j] + a * dir[j] + (p->own != NULL ? c * p->own[j] : 0.0f) +
			    b * (prof != NULL ? prof[j] : 1.0f) * (sim_noise(p->noise) - 0.5f);
			p->x[j] += p->v[j];
		}
	}
}

/* Bring peer i's vector to the steps it has taken by now. */
static void
sim_catch_up(int i)
{
	struct sim_peer *p = &peers[i];
	uint64_t s = sim_steps_at(p, now);
	float a, b, c;

	if (s <= p->applied)
		return;
	if (p->v != NULL) {
		sim_momentum_steps(p, s - p->applied);
		p->applied = s;
		return;
	}
	a = (float)(opt.drift * (double)(s - p->applied));
	c = (float)(opt.own_drift * (double)(s - p->applied));
	/* uniform on [-sqrt 3, sqrt 3): unit variance, times sqrt(s) */
	b = (float)(opt.noise * sqrt(3.0 * sim_noise_var(p->applied, s)) * 2.0);
	for (int j = 0; j < opt.dim; j++)
		p->x[j] += a * dir[j] + (p->own != NULL ? c * p->own[j] : 0.0f) +
		    b * (prof != NULL ? prof[j] : 1.0f) * (sim_noise(p->noise) - 0.5f);
	p->applied = s;
}

static double
sim_latency(int a, int b)
{
	return site_lat[a % opt.sites][b % opt.sites];
}

static double
sim_bandwidth(int a, int b)
{
	return a % opt.sites == b % opt.sites ? opt.site_bps : opt.site_bps / opt.net_ratio;
}

/* Wire bytes of a REQ or REPLY of this mode over the --wire-d model. */
static size_t
sim_wire_bytes(int req)
{
	double k = fmax(1, round(gossip_mode_density(opt.mode, opt.density) * opt.wire_d));
	double b = (double)gossip_values_bytes(opt.values, (size_t)k) + SIM_FRAME;

	if (!req)
		return (size_t)b + GOSSIP_REPLY_HEADER;
	return (size_t)(b + GOSSIP_REQ_HEADER + k * tally.idx_per_value);
}

/* --- the exchange -------------------------------------------------------- */

static int
sim_by_index(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* Moves the k largest keys (and their idx) to the front: quickselect,
 * O(n) where a sort per exchange would dominate the run. */
static void
sim_topk(float *key, int *idx, long n, long k)
{
	long lo = 0, hi = n - 1;

	while (lo < hi) {
		float pivot = key[lo + (hi - lo) / 2], tk;
		long i = lo, j = hi;
		int ti;

		while (i <= j) {
			while (key[i] > pivot)
				i++;
			while (key[j] < pivot)
				j--;
			if (i <= j) {
				tk = key[i], key[i] = key[j], key[j] = tk;
				ti = idx[i], idx[i] = idx[j], idx[j] = ti;
				i++;
				j--;
			}
		}
		/* [lo, j] >= pivot >= [i, hi], and what lies between is pivot */
		if (k - 1 <= j)
			hi = j;
		else if (k - 1 >= i)
			lo = i;
		else
			break;
	}
}

/* Delta's mask: the k coordinates whose |x - anchor| is largest. */
static void
sim_delta_mask(struct sim_peer *p, struct mask *m)
{
	static int *order;
	static float *key;

	if (order == NULL) {
		order = xcalloc((size_t)opt.dim, sizeof(*order));
		key = xcalloc((size_t)opt.dim, sizeof(*key));
	}
	for (int j = 0; j < opt.dim; j++) {
		order[j] = j;
		key[j] = fabsf(p->x[j] - p->anchor[j]);
	}
	if (kval < (size_t)opt.dim)
		sim_topk(key, order, opt.dim, (long)kval);
	qsort(order, kval, sizeof(*order), sim_by_index);
	mask_clear(m);
	for (size_t j = 0; j < kval; j++)
		if (mask_add(m, (size_t)order[j]) < 0)
			abort();
}

static void
sim_gather(const struct sim_peer *p, const struct mask *m, float *out)
{
	size_t o = 0;

	for (size_t r = 0; r < m->n; r++)
		for (size_t j = 0; j < m->r[r].len; j++)
			out[o++] = p->x[m->r[r].off + j];
}

/* The values v (n of them) as they arrive: rounded to --values through
 * the daemon's encoding, with --start-model (the magnitudes the rounding
 * meets are a real model's only then); as they are without. */
static const float *
sim_travel(const float *v, size_t n)
{
	if (start == NULL)
		return v;
	gossip_values_put(wire, v, n, opt.values);
	gossip_values_get(rounded, wire, n, opt.values);
	return rounded;
}

/* p mixes theirs in on m, where its values were mine when it sent them:
 * x = (x + theirs) / 2 (model_average_in), delta's anchor at
 * (mine + theirs) / 2 (gossip_note_mixed), and the daemon's distance
 * EWMA takes the RMS of theirs - mine (gossip_vet). */
static void
sim_mix(struct sim_peer *p, const struct mask *m, const float *theirs, const float *mine)
{
	double sum = 0, rms;
	size_t o = 0;

	for (size_t r = 0; r < m->n; r++) {
		for (size_t j = 0; j < m->r[r].len; j++, o++) {
			size_t c = m->r[r].off + j;
			double e = (double)theirs[o] - mine[o];

			sum += e * e;
			p->x[c] = 0.5f * (p->x[c] + theirs[o]);
			if (p->anchor != NULL)
				p->anchor[c] = 0.5f * (mine[o] + theirs[o]);
		}
	}
	rms = sqrt(sum / (double)(o ? o : 1));
	p->distance = p->distance < 0 ? rms : p->distance + SIM_DIST_ALPHA * (rms - p->distance);
}

/* How many others one pick sees. */
static size_t
sim_shown(void)
{
	size_t others = (size_t)nlive - 1;

	return opt.view > 0 && (size_t)opt.view < others ? (size_t)opt.view : others;
}

/* The live lists changed: every peer's changed at once (membership's
 * spread, a fraction of a second in membership_sim, is left out). */
static void
sim_relist(void)
{
	nlive = 0;
	for (int i = 0; i < ntotal; i++)
		if (peers[i].listed) {
			pos[i] = nlive;
			live[nlive++] = i;
		}
	for (int t = 0; t < 2 * nlive - 1; t++)
		ring[t] = names[live[t % nlive]];
}

/* The addresses select_pick sees: every other peer, as the daemon
 * passes every live member; with --view, a window of that many at a
 * random offset of the others, drawn afresh for each pick (every other
 * peer is equally likely to be in it). */
static const char *const *
sim_view(int i)
{
	size_t others = (size_t)nlive - 1, off, base = (size_t)pos[i] + 1;

	if (sim_shown() == others)
		return ring + base;
	off = (size_t)rng_below(&srng, others);
	for (size_t t = 0; t < (size_t)opt.view; t++)
		shown[t] = ring[base + (off + t) % others];
	return shown;
}

/* Pick a partner and send the REQ; exclude: the one that answered BUSY. */
static void
sim_start(int i, const char *exclude)
{
	struct sim_peer *p = &peers[i];
	struct sim_xchg *x = &p->ex;
	const char *pick;
	double t_req;
	size_t req;
	int to;

	if (nlive < 2 || (pick = select_pick(p->sel, now, sim_view(i), sim_shown(),
	    exclude)) == NULL)
		return;
	to = (int)((pick - names[0]) / SIM_ADDR);
	sim_catch_up(i);
	if (opt.mode == GOSSIP_DELTA)
		sim_delta_mask(p, &x->mask);
	else if (opt.mode == GOSSIP_DENSE)
		mask_dense(&x->mask, (size_t)opt.dim);
	else if (mask_build(&x->mask, opt.seed, rng_u64(&srng), (size_t)opt.dim, opt.density,
	    (size_t)opt.block) < 0)
		abort();	/* mask_check passed at the start */
	sim_gather(p, &x->mask, x->mine);
	x->active = 1;
	x->to = to;
	x->start = now;
	x->wait = rounds_patience(select_link(p->sel, pick), opt.patience, opt.timeout);
	req = sim_wire_bytes(1);
	x->bytes = req;
	tally.bytes += req;
	t_req = now + sim_latency(i, to) + (double)req / sim_bandwidth(i, to);
	if (opt.loss > 0 && rng_uniform(&srng) < opt.loss) {
		tally.lost++;
		sim_ev_push(SIM_FAIL, now + x->wait, i);
	} else if (t_req < now + x->wait) {
		sim_ev_push(SIM_REQ, t_req, i);
	} else {
		sim_ev_push(SIM_FAIL, now + x->wait, i);
	}
}

/* The round that ended at now: the next one at the step it is due, or
 * at the first step from now when that has passed (rounds_on_step). */
static void
sim_next_round(int i)
{
	struct sim_peer *p = &peers[i];
	uint64_t due = p->round_step + (uint64_t)opt.interval, next = sim_steps_at(p, now) + 1;
	double at = sim_step_time(p, due > next ? due : next);

	if (at <= opt.duration)
		sim_ev_push(SIM_ROUND, at, i);
}

static void
sim_round(int i)
{
	struct sim_peer *p = &peers[i];

	p->round_step = sim_steps_at(p, now);
	p->ex.retries = 0;
	sim_start(i, NULL);
	if (!p->ex.active)
		sim_next_round(i);
}

/* The initiator's exchange ended: select hears of it as from rounds_done. */
static void
sim_done(int i, int ok, int busy)
{
	struct sim_peer *p = &peers[i];
	struct sim_xchg *x = &p->ex;

	x->active = 0;
	if (!busy)
		select_record(p->sel, names[x->to], now, x->bytes, now - x->start, ok);
	if (!ok && x->retries++ < ROUNDS_RETRIES) {
		sim_start(i, names[x->to]);
		if (x->active)
			return;
	}
	sim_next_round(i);
}

static void
sim_on_req(int i)
{
	struct sim_xchg *x = &peers[i].ex;
	struct sim_peer *r = &peers[x->to];
	size_t len;

	/* a crashed partner never answers: the initiator times out */
	if (r->st != SIM_UP) {
		if (peers[i].st == SIM_UP)
			sim_ev_push(SIM_FAIL, x->start + x->wait, i);
		return;
	}
	if (opt.mode == GOSSIP_DENSE && r->ex.active) {
		len = GOSSIP_REPLY_HEADER + SIM_FRAME;
		x->bytes += len;
		tally.bytes += len;
		sim_ev_push(SIM_BUSY, now + sim_latency(x->to, i) +
		    (double)len / sim_bandwidth(x->to, i), i);
		return;
	}
	sim_catch_up(x->to);
	sim_gather(r, &x->mask, x->theirs);
	sim_mix(r, &x->mask, sim_travel(x->mine, x->mask.count), x->theirs);
	len = sim_wire_bytes(0);
	x->bytes += len;
	tally.bytes += len;
	if (now + sim_latency(x->to, i) + (double)len / sim_bandwidth(x->to, i) <
	    x->start + x->wait)
		sim_ev_push(SIM_REPLY, now + sim_latency(x->to, i) +
		    (double)len / sim_bandwidth(x->to, i), i);
	else
		sim_ev_push(SIM_FAIL, x->start + x->wait, i);
}

static void
sim_on_reply(int i)
{
	struct sim_peer *p = &peers[i];

	sim_catch_up(i);
	sim_mix(p, &p->ex.mask, sim_travel(p->ex.theirs, p->ex.mask.count), p->ex.mine);
	tally.ok++;
	tally.same_site += i % opt.sites == p->ex.to % opt.sites;
	sim_done(i, 1, 0);
}

/* --churn: kill a share of the running peers, and as many joiners pull
 * the model from up to PULL_MAX_DONORS of the others: each donor sends
 * the whole --wire-d model in --values over its link, and the joiner takes
 * their average (pull.h); it starts training, listed by all, once the
 * slowest donor is done. Donors are drawn among the running peers (in
 * the daemon, a crashed one not yet noticed may be drawn too). */
static void
sim_churn(void)
{
	int kills = (int)llround(opt.churn * opt.n);

	for (int k = 0; k < kills; k++) {
		int v;

		do
			v = live[rng_below(&srng, (uint64_t)nlive)];
		while (peers[v].st != SIM_UP);
		peers[v].st = SIM_DEAD;
		tally.killed++;
	}
	double model = (double)gossip_values_bytes(opt.values, (size_t)opt.wire_d);

	for (int j = opt.n; j < opt.n + kills; j++) {
		struct sim_peer *p = &peers[j];
		double end = 0;

		while (p->ndonors < PULL_MAX_DONORS && p->ndonors < nlive - kills) {
			int d = live[rng_below(&srng, (uint64_t)nlive)], dup = 0;

			for (int k = 0; k < p->ndonors; k++)
				dup |= p->donors[k] == d;
			if (dup || peers[d].st != SIM_UP)
				continue;
			p->donors[p->ndonors++] = d;
			end = fmax(end, 2 * sim_latency(d, j) + model / sim_bandwidth(d, j));
			tally.pull_bytes += (uint64_t)model;
		}
		tally.pull_max_s = fmax(tally.pull_max_s, end);
		sim_ev_push(SIM_PULLED, now + end, j);
	}
	sim_ev_push(SIM_FORGET, now + opt.detect_s, -1);
}

/* The crashed peers leave the lists: membership noticed. */
static void
sim_forget(void)
{
	for (int i = 0; i < ntotal; i++)
		if (peers[i].st == SIM_DEAD)
			peers[i].listed = 0;
	sim_relist();
}

static void
sim_pulled(int j)
{
	struct sim_peer *p = &peers[j];

	memset(p->x, 0, (size_t)opt.dim * sizeof(*p->x));
	for (int k = 0; k < p->ndonors; k++) {
		sim_catch_up(p->donors[k]);
		for (int c = 0; c < opt.dim; c++)
			p->x[c] += peers[p->donors[k]].x[c] / (float)p->ndonors;
	}
	if (p->anchor != NULL)
		memcpy(p->anchor, p->x, (size_t)opt.dim * sizeof(*p->x));
	/* a fresh trainer: no velocity yet */
	if (p->v != NULL)
		memset(p->v, 0, (size_t)opt.dim * sizeof(*p->v));
	p->t0 = now;
	p->st = SIM_UP;
	p->listed = 1;
	tally.joined++;
	sim_relist();
	sim_next_round(j);
}

static void
sim_event(const struct sim_ev *e)
{
	/* a crashed peer starts nothing and hears nothing; its REQs in
	 * flight still arrive */
	if (e->kind <= SIM_FAIL && e->kind != SIM_REQ && peers[e->peer].st != SIM_UP)
		return;
	switch (e->kind) {
	case SIM_CHURN:
		sim_churn();
		break;
	case SIM_FORGET:
		sim_forget();
		break;
	case SIM_PULLED:
		sim_pulled(e->peer);
		break;
	case SIM_ROUND:
		sim_round(e->peer);
		break;
	case SIM_REQ:
		sim_on_req(e->peer);
		break;
	case SIM_REPLY:
		sim_on_reply(e->peer);
		break;
	case SIM_BUSY:
		tally.busy++;
		sim_done(e->peer, 0, 1);
		break;
	case SIM_FAIL:
		tally.failed++;
		sim_done(e->peer, 0, 0);
		break;
	}
}

/* --- what is measured ---------------------------------------------------- */

struct sim_sample {
	double t, cd, rel, xpp, daemon;
};

/* Every running peer caught up to now: the consensus distance, relative
 * to the RMS of the vectors, exchanges per peer and the daemon's figure. */
static struct sim_sample
sim_measure(double *mean)
{
	struct sim_sample s = { now, 0, 0, (double)tally.ok / opt.n, 0 };
	double ss = 0, sx = 0;
	int nd = 0, n = 0;

	memset(mean, 0, (size_t)opt.dim * sizeof(*mean));
	for (int i = 0; i < ntotal; i++) {
		if (peers[i].st != SIM_UP)
			continue;
		n++;
		sim_catch_up(i);
		for (int j = 0; j < opt.dim; j++)
			mean[j] += peers[i].x[j];
		if (peers[i].distance >= 0) {
			s.daemon += peers[i].distance;
			nd++;
		}
	}
	for (int j = 0; j < opt.dim; j++)
		mean[j] /= n;
	for (int i = 0; i < ntotal; i++) {
		if (peers[i].st != SIM_UP)
			continue;
		for (int j = 0; j < opt.dim; j++) {
			double d = peers[i].x[j] - mean[j];

			ss += d * d;
			sx += (double)peers[i].x[j] * peers[i].x[j];
		}
	}
	s.cd = sqrt(ss / n / opt.dim);
	s.rel = sx > 0 ? s.cd / sqrt(sx / n / opt.dim) : 0;
	s.daemon = nd ? s.daemon / nd : -1;
	return s;
}

static double
sim_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec +
	    ru.ru_stime.tv_usec) / 1e6;
}

static int
sim_run(void)
{
	struct sim_sample s0, s, before, at_level = { -1, 0, 0, 0, 0 };
	double *mean = xcalloc((size_t)opt.dim, sizeof(*mean)), tail = 0, next;
	int ntail = 0;
	FILE *f = NULL;
	struct rusage ru;

	if (opt.series != NULL && (f = fopen(opt.series, "w")) == NULL) {
		fprintf(stderr, "exchange_sim: --series: %s: %s\n", opt.series, strerror(errno));
		free(mean);
		return -errno;
	}
	for (int i = 0; i < opt.n; i++)
		sim_next_round(i);
	if (opt.churn > 0)
		sim_ev_push(SIM_CHURN, opt.churn_at, -1);
	before = s0 = s = sim_measure(mean);
	if (f != NULL)
		fprintf(f, "# t_s consensus_distance relative exchanges_per_peer"
		    " daemon_distance\n");
	for (next = 0;; next += opt.sample) {
		while (simq_peek(&evq) != NULL &&
		    ((const struct sim_ev *)simq_peek(&evq))->at <= next) {
			struct sim_ev e;

			simq_pop(&evq, &e);
			now = e.at;
			events++;
			sim_event(&e);
		}
		now = next;
		s = sim_measure(mean);
		if (f != NULL)
			fprintf(f, "%.3f %.6g %.6g %.4f %.6g\n", s.t, s.cd, s.rel, s.xpp, s.daemon);
		if (at_level.t < 0 && s.cd <= opt.level * s0.cd)
			at_level = s;
		if (next <= opt.churn_at)
			before = s;
		/* the last quarter's mean: the floor, once a run is long
		 * enough for the distance to settle */
		if (next >= 0.75 * opt.duration) {
			tail += s.cd;
			ntail++;
		}
		if (next + opt.sample > opt.duration + 1e-9)
			break;
	}
	if (f != NULL)
		fclose(f);
	printf("peers %d\ndim %d\nwire_d %.0f\nmode %s\nvalues %s\ndensity %g\n"
	    "select %s\ninterval %ld\nbw_ratio %g\nsites %d\nnet_ratio %g\nloss %g\n"
	    "seed %llu\nduration_s %g\n", opt.n, opt.dim, opt.wire_d,
	    gossip_mode_name(opt.mode), opt.values == GOSSIP_INT8 ? "int8" :
	    opt.values == GOSSIP_FP16 ? "fp16" : "fp32", opt.density,
	    select_policy_name(opt.policy), opt.interval, opt.bw_ratio, opt.sites,
	    opt.net_ratio, opt.loss, (unsigned long long)opt.seed, opt.duration);
	printf("req_bytes %zu\nreply_bytes %zu\n", sim_wire_bytes(1), sim_wire_bytes(0));
	printf("exchanges %llu\nbusy %llu\nfailed %llu\nlost %llu\nsame_site_share %.3f\n",
	    (unsigned long long)tally.ok, (unsigned long long)tally.busy,
	    (unsigned long long)tally.failed, (unsigned long long)tally.lost,
	    tally.ok ? (double)tally.same_site / tally.ok : 0);
	printf("exchanges_per_peer %.2f\nexchanges_per_s %.1f\nbytes_per_peer_s %.0f\n",
	    (double)tally.ok / opt.n, tally.ok / opt.duration,
	    tally.bytes / opt.duration / opt.n);
	printf("cd_start %.6g\ncd_end %.6g\ncd_rel_end %.6g\ncd_floor %.6g\n"
	    "daemon_distance_end %.6g\n", s0.cd, s.cd, s.rel, ntail ? tail / ntail : s.cd,
	    s.daemon);
	if (opt.churn > 0)
		printf("churn %g\nchurn_at_s %g\ndetect_s %g\nkilled %d\njoined %d\n"
		    "pull_max_s %.2f\npull_mb_per_joiner %.0f\ncd_before_churn %.6g\n",
		    opt.churn, opt.churn_at, opt.detect_s, tally.killed, tally.joined,
		    tally.pull_max_s, tally.killed ? tally.pull_bytes / 1e6 / tally.killed : 0,
		    before.cd);
	printf("level %g\ntime_to_level_s %.2f\nexchanges_per_peer_at_level %.2f\n",
	    opt.level, at_level.t, at_level.t < 0 ? -1 : at_level.xpp);
	getrusage(RUSAGE_SELF, &ru);
	printf("events %llu\ncpu_s %.2f\nmaxrss_mib %.1f\n", (unsigned long long)events,
	    sim_cpu_s(), ru.ru_maxrss / 1024.0);
	free(mean);
	return 0;
}

/* --- options ------------------------------------------------------------- */

static void
sim_usage(FILE *f)
{
	fprintf(f,
	    "Usage: exchange_sim [options]\n"
	    "Runs partner selection and the exchange of N peers on a simulated network;\n"
	    "their models are vectors that start apart and take noisy steps. Prints\n"
	    "\"key value\" lines (contrib/sim/exchange.py).\n"
	    "  -n, --peers N          peers (default 100)\n"
	    "      --view M           select_pick sees M others drawn afresh each pick, not\n"
	    "                         all (its cost is peers x links used); 0: all (default)\n"
	    "      --dim D            simulated values per peer (default 1024)\n"
	    "      --wire-d W         values of the model whose bytes travel (default 1e8)\n"
	    "      --mode M           saps|dense|delta (default saps; share has no exchange)\n"
	    "      --values V         fp32|fp16|int8 (default int8)\n"
	    "      --density P        share of the model one exchange mixes (default 0.04)\n"
	    "      --mask-block B     saps mask block (default 64)\n"
	    "      --interval S       steps between two rounds (default 4)\n"
	    "      --select P         adaptive|random (default adaptive)\n"
	    "      --bw-ratio X       select's bw_ratio (default 4)\n"
	    "      --stale-after S    select's stale_after, seconds (default 10)\n"
	    "      --timeout S        exchange_timeout, seconds (default 5)\n"
	    "      --patience X       exchange_patience (default 8; 0: timeout always)\n"
	    "      --sites S          sites, peers round-robin (default 3, at most %d)\n"
	    "      --site-mbit M      bandwidth within a site, Mbit/s (default 1000)\n"
	    "      --net-ratio R      within a site R times the bandwidth across (default 10)\n"
	    "      --local-ms A,B     latency within a site, drawn per site (default 0.1,0.5)\n"
	    "      --remote-ms A,B    latency across, drawn per pair of sites (default 20,50)\n"
	    "      --loss P           share of exchanges lost (default 0)\n"
	    "      --steps-per-s R    median step rate (default 8)\n"
	    "      --rate-spread S    sigma of the lognormal step rates (default 0.3)\n"
	    "      --init-spread X    start: every value N(0, X) apart per peer (default 1)\n"
	    "      --drift X          per step, along the shared direction (default 0.001)\n"
	    "      --own-drift X      per step, along a direction of each peer's own (its\n"
	    "                         shard's pull), scaled as the noise (default 0)\n"
	    "      --noise X          per step, per value, apart per peer (default 0.01)\n"
	    "      --noise-growth G   step k's noise has 1 + G k times the variance of\n"
	    "                         --noise (a walk that speeds up; default 0)\n"
	    "      --noise-profile F  each value's noise scale, --dim little-endian float32\n"
	    "                         (scaled to mean square 1; default: all alike)\n"
	    "      --momentum M       a step adds a velocity keeping M of itself, which\n"
	    "                         exchanges do not mix (SGD's; default 0: none)\n"
	    "      --start-model F    every peer starts at these --dim little-endian\n"
	    "                         float32 values (a checkpoint's), and the values\n"
	    "                         that travel are rounded to --values (default: 0,\n"
	    "                         not rounded)\n"
	    "      --duration S       simulated seconds (default 60)\n"
	    "      --sample S         seconds between two measurements (default 1)\n"
	    "      --level X          time_to_level: the distance falls to X times its\n"
	    "                         start (default 0.3)\n"
	    "      --seed X           the random seed (default 1)\n"
	    "      --series FILE      t, distance, relative, exchanges/peer, daemon's\n"
	    "      --churn F          at --churn-at, F of the peers crash and as many fresh\n"
	    "                         ones join, pulling the average of %d donors (default 0)\n"
	    "      --churn-at S       seconds (default: half of --duration)\n"
	    "      --detect-s S       the crashed leave the live lists S s later (default 3)\n"
	    "  -h, --help             this text\n", SIM_MAX_SITES, PULL_MAX_DONORS);
}

/* --noise-profile: --dim float32 scales from a measured model (e.g. each
 * parameter's spread across peers trained apart), so that the values that
 * move most are the few a real model's are, not every one alike: delta's
 * top k picks them. Scaled to mean square 1, --noise keeping its meaning. */
/* --dim little-endian float32 values of file path into *out, all finite
 * (and, with scale, not negative and not all 0: scaled to mean square 1). */
static int
sim_load_f32(const char *name, const char *path, int scale, float **out)
{
	size_t d = (size_t)opt.dim, got = 0;
	float *v = xmalloc(d * sizeof(*v));
	double ss = 0;
	int c = EOF;
	FILE *f;

	if ((f = fopen(path, "rb")) != NULL) {
		got = fread(v, sizeof(*v), d, f);
		c = fgetc(f);
		fclose(f);
	}
	for (size_t j = 0; j < got; j++) {
		uint32_t u = wire_get_u32((const uint8_t *)&v[j]);

		memcpy(&v[j], &u, sizeof(u));
		if (!isfinite(v[j]) || (scale && v[j] < 0))
			got = 0;
		else
			ss += (double)v[j] * v[j];
	}
	if (f == NULL || got != d || c != EOF || (scale && ss <= 0)) {
		fprintf(stderr, "exchange_sim: --%s: %s: %s\n", name, path, f == NULL ?
		    strerror(errno) : scale ? "not --dim finite, non-negative float32 values, not all 0" :
		    "not --dim finite float32 values");
		free(v);
		return -EINVAL;
	}
	for (size_t j = 0; scale && j < d; j++)
		v[j] = (float)(v[j] / sqrt(ss / (double)d));
	*out = v;
	return 0;
}

static int
sim_parse(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "peers", required_argument, NULL, 'n' },
		{ "view", required_argument, NULL, 'w' },
		{ "dim", required_argument, NULL, 'd' },
		{ "wire-d", required_argument, NULL, 'W' },
		{ "mode", required_argument, NULL, 'm' },
		{ "values", required_argument, NULL, 'v' },
		{ "density", required_argument, NULL, 'p' },
		{ "mask-block", required_argument, NULL, 'B' },
		{ "interval", required_argument, NULL, 'i' },
		{ "select", required_argument, NULL, 'S' },
		{ "bw-ratio", required_argument, NULL, 'r' },
		{ "stale-after", required_argument, NULL, 'a' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "patience", required_argument, NULL, 'P' },
		{ "sites", required_argument, NULL, 's' },
		{ "site-mbit", required_argument, NULL, 'b' },
		{ "net-ratio", required_argument, NULL, 'R' },
		{ "local-ms", required_argument, NULL, 'l' },
		{ "remote-ms", required_argument, NULL, 'L' },
		{ "loss", required_argument, NULL, 'o' },
		{ "steps-per-s", required_argument, NULL, 'k' },
		{ "rate-spread", required_argument, NULL, 'K' },
		{ "init-spread", required_argument, NULL, 'I' },
		{ "drift", required_argument, NULL, 'D' },
		{ "noise", required_argument, NULL, 'N' },
		{ "own-drift", required_argument, NULL, 'O' },
		{ "noise-growth", required_argument, NULL, 'G' },
		{ "noise-profile", required_argument, NULL, 'F' },
		{ "momentum", required_argument, NULL, 'M' },
		{ "start-model", required_argument, NULL, 'A' },
		{ "duration", required_argument, NULL, 't' },
		{ "sample", required_argument, NULL, 'e' },
		{ "level", required_argument, NULL, 'V' },
		{ "seed", required_argument, NULL, 'x' },
		{ "series", required_argument, NULL, 'f' },
		{ "churn", required_argument, NULL, 'c' },
		{ "churn-at", required_argument, NULL, 'C' },
		{ "detect-s", required_argument, NULL, 'E' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	/* The exchange's modes, in enum gossip_mode's order; share has no
	 * exchange to simulate. */
	static const char *const modes[] = { "saps", "dense", "delta" };
	static const char *const vals[GOSSIP_VALUES_N] = { "fp32", "fp16", "int8" };
	static const char *const pols[] = { "adaptive", "random" };
	struct errbuf why;
	double mbit = 1000;
	int c, rc = 0, e;

	while (rc == 0 && (c = getopt_long(argc, argv, "n:h", lo, NULL)) != -1) {
		switch (c) {
		case 'n': rc = simopt_int("peers", optarg, 2, 1 << 20, &opt.n); break;
		case 'w': rc = simopt_int("view", optarg, 0, 1 << 20, &opt.view); break;
		case 'd': rc = simopt_int("dim", optarg, 1, 1 << 20, &opt.dim); break;
		case 'W': rc = simopt_real("wire-d", optarg, 1, 1e12, &opt.wire_d); break;
		case 'm':
			rc = simopt_choice("mode", optarg, modes,
			    (int)GD_ARRAY_SIZE(modes), &e);
			opt.mode = (enum gossip_mode)e;
			break;
		case 'v':
			rc = simopt_choice("values", optarg, vals, GOSSIP_VALUES_N, &e);
			opt.values = (enum gossip_values)e;
			break;
		case 'p': rc = simopt_real("density", optarg, 1e-6, 1, &opt.density); break;
		case 'B': rc = simopt_int("mask-block", optarg, 1, 1 << 20, &opt.block); break;
		case 'i': rc = simopt_long("interval", optarg, 1, 1000000000L, &opt.interval); break;
		case 'S':
			rc = simopt_choice("select", optarg, pols, 2, &e);
			opt.policy = (enum select_policy)e;
			break;
		case 'r': rc = simopt_real("bw-ratio", optarg, 1, 1e6, &opt.bw_ratio); break;
		case 'a': rc = simopt_real("stale-after", optarg, 0, 1e6, &opt.stale_after); break;
		case 'T': rc = simopt_real("timeout", optarg, 0.01, 3600, &opt.timeout); break;
		case 'P': rc = simopt_real("patience", optarg, 0, 1e6, &opt.patience); break;
		case 's': rc = simopt_int("sites", optarg, 1, SIM_MAX_SITES, &opt.sites); break;
		case 'b': rc = simopt_real("site-mbit", optarg, 1e-3, 1e9, &mbit); break;
		case 'R': rc = simopt_real("net-ratio", optarg, 1, 1e6, &opt.net_ratio); break;
		case 'l': rc = simopt_range_ms("local-ms", optarg, &opt.local_min_s,
		    &opt.local_max_s); break;
		case 'L': rc = simopt_range_ms("remote-ms", optarg, &opt.remote_min_s,
		    &opt.remote_max_s); break;
		case 'o': rc = simopt_real("loss", optarg, 0, 0.999, &opt.loss); break;
		case 'k': rc = simopt_real("steps-per-s", optarg, 1e-3, 1e6, &opt.rate); break;
		case 'K': rc = simopt_real("rate-spread", optarg, 0, 3, &opt.rate_spread); break;
		case 'I': rc = simopt_real("init-spread", optarg, 0, 1e6, &opt.init_spread); break;
		case 'D': rc = simopt_real("drift", optarg, 0, 1e6, &opt.drift); break;
		case 'N': rc = simopt_real("noise", optarg, 0, 1e6, &opt.noise); break;
		case 'O': rc = simopt_real("own-drift", optarg, 0, 1e6, &opt.own_drift); break;
		case 'G': rc = simopt_real("noise-growth", optarg, 0, 1e6, &opt.noise_growth); break;
		case 'F': opt.profile = optarg; break;
		case 'M': rc = simopt_real("momentum", optarg, 0, 0.999, &opt.momentum); break;
		case 'A': opt.start = optarg; break;
		case 't': rc = simopt_real("duration", optarg, 1e-3, 1e7, &opt.duration); break;
		case 'e': rc = simopt_real("sample", optarg, 1e-3, 1e7, &opt.sample); break;
		case 'V': rc = simopt_real("level", optarg, 0, 1, &opt.level); break;
		case 'x': rc = simopt_u64("seed", optarg, &opt.seed); break;
		case 'f': opt.series = optarg; break;
		case 'c': rc = simopt_real("churn", optarg, 0, 0.9, &opt.churn); break;
		case 'C': rc = simopt_real("churn-at", optarg, 0, 1e7, &opt.churn_at); break;
		case 'E': rc = simopt_real("detect-s", optarg, 0, 1e6, &opt.detect_s); break;
		case 'h': sim_usage(stdout); exit(0);
		default: return -EINVAL;
		}
	}
	if (rc < 0)
		return rc;
	if (optind != argc) {
		fprintf(stderr, "exchange_sim: '%s' is not an option\n", argv[optind]);
		return -EINVAL;
	}
	opt.site_bps = mbit * 1e6 / 8;
	if (opt.churn_at < 0)
		opt.churn_at = opt.duration / 2;
	if (opt.view >= opt.n) {
		fprintf(stderr, "exchange_sim: --view: %d is not below --peers %d\n", opt.view,
		    opt.n);
		return -EINVAL;
	}
	if (opt.mode == GOSSIP_SAPS && mask_check((size_t)opt.dim, opt.density,
	    (size_t)opt.block, &why) < 0) {
		fprintf(stderr, "exchange_sim: --mask-block: %s\n", why.msg);
		return -EINVAL;
	}
	if (opt.profile != NULL && sim_load_f32("noise-profile", opt.profile, 1, &prof) < 0)
		return -EINVAL;
	return opt.start != NULL ? sim_load_f32("start-model", opt.start, 0, &start) : 0;
}

/* --- the world ----------------------------------------------------------- */

static void
sim_setup(void)
{
	struct select_params sp = { opt.policy, opt.bw_ratio, opt.stale_after };
	size_t d = (size_t)opt.dim, k;
	float *xs;

	for (int a = 0; a < opt.sites; a++)
		for (int b = 0; b <= a; b++)
			site_lat[a][b] = site_lat[b][a] = a == b ? opt.local_min_s +
			    rng_uniform(&srng) * (opt.local_max_s - opt.local_min_s) :
			    opt.remote_min_s + rng_uniform(&srng) *
			    (opt.remote_max_s - opt.remote_min_s);
	k = (size_t)llround(gossip_mode_density(opt.mode, opt.density) * (double)d);
	kval = k == 0 ? 1 : k > d ? d : k;
	if (start != NULL) {
		wire = xmalloc(gossip_values_bytes(opt.values, kval));
		rounded = xmalloc(kval * sizeof(*rounded));
	}
	dir = xcalloc(d, sizeof(*dir));
	for (size_t j = 0; j < d; j++)
		dir[j] = rng_uniform(&srng) < 0.5 ? -1.0f : 1.0f;
	ntotal = opt.n + (int)llround(opt.churn * opt.n);
	names = xcalloc((size_t)ntotal, sizeof(*names));
	ring = xcalloc(2 * (size_t)ntotal, sizeof(*ring));
	live = xcalloc((size_t)ntotal, sizeof(*live));
	pos = xcalloc((size_t)ntotal, sizeof(*pos));
	shown = xcalloc((size_t)opt.view + 1, sizeof(*shown));
	peers = xcalloc((size_t)ntotal, sizeof(*peers));
	xs = xcalloc((opt.mode == GOSSIP_DELTA ? 2 : 1) * (size_t)ntotal * d, sizeof(*xs));
	for (int i = 0; i < ntotal; i++) {
		struct sim_peer *p = &peers[i];

		snprintf(names[i], SIM_ADDR, "10.%d.%d.%d:7000", i >> 16 & 255, i >> 8 & 255,
		    i & 255);
		p->x = xs + (size_t)i * d;
		if (opt.mode == GOSSIP_DELTA)
			p->anchor = xs + ((size_t)ntotal + (size_t)i) * d;
		for (size_t j = 0; j < d; j++)
			p->x[j] = (start != NULL ? start[j] : 0.0f) +
			    (float)(opt.init_spread * rng_normal(&srng));
		/* anchored where the model starts (drift.h, gossip_set_ready) */
		if (p->anchor != NULL)
			memcpy(p->anchor, p->x, d * sizeof(*p->x));
		p->rate = opt.rate * exp(opt.rate_spread * rng_normal(&srng));
		p->t0 = -rng_uniform(&srng) / p->rate;	/* step phases apart */
		p->distance = -1;
		p->ex.mine = xcalloc(kval, sizeof(float));
		p->ex.theirs = xcalloc(kval, sizeof(float));
		for (int w = 0; w < 4; w++)
			p->noise[w] = rng_u64(&srng) | 1;
		if (opt.own_drift > 0) {
			p->own = xmalloc(d * sizeof(*p->own));
			for (size_t j = 0; j < d; j++)
				p->own[j] = (rng_uniform(&srng) < 0.5 ? -1.0f : 1.0f) *
				    (prof != NULL ? prof[j] : 1.0f);
		}
		if (opt.momentum > 0)
			p->v = xcalloc(d, sizeof(*p->v));
		if (select_new(&sp, &p->sel) < 0)
			abort();
		/* joiners: off until their pull is in */
		p->st = i < opt.n ? SIM_UP : SIM_OFF;
		p->listed = i < opt.n;
	}
	sim_relist();
	/* delta's indices: a varint of the mean gap each (mask_encode), which
	 * is 1/density - 1 on a model of any size */
	if (opt.mode == GOSSIP_DELTA)
		for (double g = 1 / opt.density - 1; ; g /= 128) {
			tally.idx_per_value++;
			if (g < 128)
				break;
		}
}

int
main(int argc, char **argv)
{
	int rc;

	simopt_prog = "exchange_sim";
	if (sim_parse(argc, argv) < 0) {
		sim_usage(stderr);
		return 2;
	}
	rng_init(&srng, opt.seed, "exchange_sim", 0, 0);
	simq_init(&evq, sizeof(struct sim_ev), sim_ev_before);
	randombytes_set_implementation(&sim_rb);
	sim_setup();
	rc = sim_run();
	for (int i = 0; i < ntotal; i++) {
		select_free(peers[i].sel);
		mask_free(&peers[i].ex.mask);
		free(peers[i].ex.mine);
		free(peers[i].ex.theirs);
		free(peers[i].own);
		free(peers[i].v);
	}
	free(peers[0].x);
	free(peers);
	free(names);
	free(ring);
	free(live);
	free(pos);
	free(shown);
	free(dir);
	free(prof);
	free(start);
	free(wire);
	free(rounded);
	simq_free(&evq);
	rng_clear(&srng);
	return rc < 0 ? 1 : 0;
}
