/*
 * trust: how far this peer lets any one member move its model, and how
 * much it suspects each member, from nothing but the slices it received.
 *
 * Per member (by address) it keeps the RMS distance of the member's latest
 * slice from this peer's values and a suspicion score in [0, 1]: an EWMA
 * of each slice's badness, 0 at or below the median distance, rising as
 * the square of the excess to 1 at the clipping radius and beyond, and 1
 * for a refused slice; or, if worse, how far the slice lies behind.
 *
 * Behind: the caller (gossip) keeps the job's start model and measures,
 * on the slice, the member's way from there against its own (none for a
 * peer that resumed or joined later without it: gossip.c says why): a
 * stale model (the start, never trained) has come no way, a negated one
 * (2 start - x) went back, and either lies within the radius while the
 * models have moved little against their spread, so distance cannot see
 * them. The test asks only that a member has come some way and not
 * backwards, not that it came this peer's way: an earlier measure, the
 * share of this peer's way a slice had come, judged bad below 0.45,
 * shunned honest members on skewed shards (tests/closing.sh).
 *
 * The clipping radius is factor x the median of the members' latest
 * distances, one vote per member seen lately: a minority sending far
 * values, or sending often, cannot widen it (self-centred clipping as in
 * ClippedGossip, arXiv 2202.01545, with the radius taken from the honest
 * spread); once this peer's training is over, the median of then
 * (trust_freeze). Lately is within TRUST_FRESH seconds; a vote cast
 * when this peer's step was less than half what it is now counts at no
 * less than the median of the newer ones. Models of a fresh job start
 * alike and walk apart over their first hundred steps or so, and votes
 * from step 4 put the radius of step 16 below an honest member's
 * distance; floored rather than dropped, so that a member heard from
 * rarely (a zeroed one the others no longer choose) still makes the
 * quorum. The floor is the price: while most votes have lapsed (a job's
 * first steps, a peer's step doubled by a catch-up), members heard from
 * since set it, a faulty one among few of them too, until the others are
 * heard from again. The vote of a member whose own training is over (its
 * slices say so: struct trust_slice's trained) is never below the one it
 * cast while it last trained: closers agree ever more closely, and their
 * closing distances, counted as they were, drew the radius in below an
 * honest member still training, on both sides (tests/closing.sh: a closer
 * that ended its training 0.2 s after two others froze a median of their
 * closing distances, and the straggler suspected the closers in turn).
 * Floored, not left out: a joiner among members that linger after their
 * training has only their votes, and its own drift from them is the
 * spread to judge them by.
 *
 * Peers of a fresh job start seconds apart, so in its first steps a
 * member that started earlier or later lies farther than the others and
 * has come more or less way, honestly. A slice whose sender's step (its
 * message tells it) differs from this peer's by more than a quarter of
 * the larger, and that lies within the ways the two models came from the
 * start (rms at most way x max(1, ratio), the ratio counted up to 2: a
 * zeroed model lies at the weights' magnitude, far outside), and that
 * has come at least a quarter of the way its steps give (a stale model
 * comes none), is not judged in the first TRUST_STAGGER seconds after
 * this peer first heard from its sender: a member that lies about its
 * step gains that much and no more, its slices voting and clipped
 * meanwhile as any. Both rules came from a 4-peer job's first second on a
 * busy host, where one run in six had a peer suspect an honest member
 * (gossipd(8), FAULTS).
 *
 * A received slice beyond the radius is pulled in to it before it is
 * mixed, so one exchange moves this peer at most radius / 2, and the move
 * shrinks further as its sender's suspicion grows.
 * Members whose suspicion reaches TRUST_SUSPECT are not chosen as
 * partners and their slices are not mixed; their slices are still
 * measured, so a member that behaves again is let back in.
 *
 * Records outlive their member (the least suspicious, longest unseen go
 * first when the table is full): a member that is penalised, leaves and
 * comes back on the same address, under a new id, keeps its score. One
 * that comes back on another address starts afresh: every member holds
 * the same job key, so nothing else tells a rejoiner from a newcomer.
 *
 * No I/O and no clock: callers pass the time.
 */
#ifndef GD_TRUST_H
#define GD_TRUST_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "wire.h"

/* The suspicion at which a member is shunned. */
#define TRUST_SUSPECT 0.5

struct trust_params {
	double factor;          /* radius / median distance; 0 turns trust off */
};

struct trust_member {
	char addr[WIRE_ADDR_MAX + 1];
	/* Its vote: the RMS distance of its latest slice, floored by
	 * last_trained; < 0 none */
	double distance;
	/* Its vote while it last trained, the floor of its votes once its
	 * training is over; < 0 none */
	double last_trained;
	double seen;            /* when that slice came */
	uint64_t voted_at;      /* this peer's step then */
	double first;           /* when its first slice came */
	double suspicion;       /* [0, 1] */
	/* slices received, beyond the radius, behind (the way's badness
	 * 0.5 or more), refused */
	uint64_t slices, clipped, behind, refused;
};

struct trust;

int trust_new(const struct trust_params *p, struct trust **out);
void trust_free(struct trust *t);
void trust_set_params(struct trust *t, const struct trust_params *p);

/* The clipping radius at now: factor x the median latest distance of the
 * members heard from within TRUST_FRESH seconds (a vote from before half
 * this peer's step floored, above); < 0 (no clipping) while fewer than
 * TRUST_QUORUM such members are known, or with trust off. */
double trust_radius(const struct trust *t, double now);
/* The radius's factor (trust_params); 0 with trust off. */
double trust_factor(const struct trust *t);
/* This peer's training is over: from now on the median is the one of the
 * votes at now (none without a quorum then). Peers that are done close
 * (closing.h) until they agree (close_distance), so their distances to
 * each other, the votes, fall towards 0, and an honest member still training (a
 * longer budget, a slower host, a restart behind) lies beyond any radius
 * they give: in a 4-peer job whose fourth peer trained 8 epochs to the
 * others' 3, two or all three of them suspected it within a second of
 * closing. The spread the job trained with is the one to judge it by.
 * NULL-safe; the first call counts. */
void trust_freeze(struct trust *t, double now);
/* What a peer measured of a received slice. */
struct trust_slice {
	double rms;             /* its RMS distance from this peer's values */
	double radius;          /* trust_radius before it came */
	/* The ways from this peer's origin on it: way the RMS of mine -
	 * origin (0: no origin), ratio the RMS of theirs - origin over way,
	 * cos the cosine of the two. */
	double way, ratio, cos;
	/* Its sender's training is over (gossip_wire's GOSSIP_WIRE_TRAINED):
	 * its vote is floored (trust.h). */
	int trained;
	/* The sender's step as its message told it, and this peer's; both 0
	 * where slices carry no step (shares) */
	uint64_t step, own_step;
};

/* Updates addr's record with slice s and returns 1 when addr is now
 * suspect (0 with trust off). */
int trust_observe(struct trust *t, const char *addr, double now,
    const struct trust_slice *s);
/* A slice from addr was refused outright (not finite, or far). */
void trust_refused(struct trust *t, const char *addr, double now);
/* How much of a mix with addr to keep, 1 - suspicion / TRUST_SUSPECT,
 * from 1 (never suspected, unknown, or trust off) down to 0 for a suspect:
 * a member that starts to send bad slices moves this peer less and less
 * before it is shunned, rather than fully until then. */
double trust_weight(const struct trust *t, const char *addr);
/* 1 when addr's suspicion is at least TRUST_SUSPECT and trust is on. */
int trust_suspect(const struct trust *t, const char *addr);
/* NULL if nothing was ever received from addr. */
const struct trust_member *trust_member(const struct trust *t, const char *addr);
/* The members suspect now, as "ADDR suspicion S (N slices, C clipped, B
 * behind, R refused)" joined by "; ", in buf (cut short with "..." if it is too
 * small). Returns how many, or -1 with trust off (buf then empty). */
int trust_suspects_text(const struct trust *t, char *buf, size_t size);
/* Add "trust": {factor, radius, members, suspects, clipped} to obj. */
int trust_stats_json(const struct trust *t, double now, json_t *obj);

#endif
