/*
 * gossip: the pairwise exchange of model slices (gossipd(8), GOSSIP:
 * how masks are drawn, why neither side waits for the other's training,
 * and what mode delta keeps). A joiner's model pull is pull's (pull.h), in
 * this module's type range.
 *
 * Exchange, initiator i and responder j:
 *	i: nonce <- random; S <- mask(seed, nonce); send REQ{nonce, S's
 *	   parameters, x_i[S]}
 *	j: rebuild S from the REQ; v <- x_j[S]; x_j[S] <- (x_j[S] + x_i[S]) / 2;
 *	   send REPLY{nonce, v}
 *	i: x_i[S] <- (x_i[S] + v) / 2
 * Only values cross the wire: fp32, fp16, or int8 with one fp32 scale per
 * GOSSIP_Q_BLOCK values (max |v| / 127, rounded to nearest). Mode dense is
 * the same with S = every coordinate. Mode delta is the same with S chosen
 * by i: the k coordinates that moved most on i since they were last mixed
 * (drift.h: the residual that waits for its turn is the error feedback),
 * so S's coordinates travel too, as varint gaps (mask.h). A peer initiates one exchange at a time. While it
 * has one in flight it still serves sparse REQs (two random masks barely
 * overlap, and interleaved averages stay convex combinations) but answers
 * dense ones with BUSY, as does a peer that has no model yet. Each
 * exchange has a deadline.
 *
 * Like member, this module does no I/O and reads no clock: the caller
 * passes the time, sends through ops->send, feeds received messages to
 * gossip_recv and calls gossip_tick for deadlines. The model is touched
 * only through model_gather / model_average_in, which take its lock.
 *
 * Received values are vetted before they are mixed in (gossip_vet): a
 * slice with a non-finite value, or one whose RMS distance from ours
 * exceeds GOSSIP_FAR_GAMMA times max(the EWMA of accepted distances, the
 * RMS of our own slice), is refused whole: the responder answers REFUSED,
 * the initiator ends the exchange as failed, and ops->refused names the
 * sender. What passes goes to trust (trust.h), when one is set: a slice
 * farther than the members' median distance times the clip factor is
 * pulled in to that radius before it is mixed, and a member whose slices
 * keep lying far is suspect: its values are not mixed (reason suspect)
 * until they come back near, though its requests are still answered with
 * ours. Clipping alone would let a bad partner drag this peer by the
 * radius every exchange; the suspicion ends that after a few. A peer
 * never sends values of its own that are not finite (no REQ, or REFUSED
 * instead).
 */
#ifndef GD_GOSSIP_H
#define GD_GOSSIP_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "gossip_mode.h"	/* the modes, gossip_mode_name */
#include "gossip_wire.h"	/* gossip_values_bytes */
#include "kinds.h"	/* enum gossip_mode, enum gossip_values */
#include "model.h"
#include "proto.h"

/* Message types: gossip owns 80 and 81 of the application range; the
 * model pull 82 and 83 (pull.h); 84..95 are kept free for either. */
#define GOSSIP_T_REQ	80
#define GOSSIP_T_REPLY	81
#define GOSSIP_T_FIRST	GOSSIP_T_REQ
#define GOSSIP_T_LAST	GOSSIP_T_REPLY

/* The range and its names, for the transport (proto.h). */
extern const struct proto gossip_proto;

/* Received slices farther than this many times the scale are refused.
 * In tests/poison.sh (seeds 1-5, 1% masks) most accepted slices sat under
 * 0.6x the scale and none above 1.8x; a diverging peer's values are
 * orders of magnitude above. */
#define GOSSIP_FAR_GAMMA 8.0
/* Least scale of that bound: a slice of zeros (biases at the start) with
 * no accepted distance yet must not refuse every partner. */
#define GOSSIP_FAR_FLOOR 1e-2

/* Why received values were refused before touching the model (stats
 * "rejected", peers "refused"). */
enum gossip_refusal {
	GOSSIP_REFUSE_NONFINITE,  /* a NaN or an infinity */
	GOSSIP_REFUSE_FAR,        /* farther from ours than the bound allows */
	GOSSIP_REFUSE_SUSPECT,    /* from a member trust suspects */
	GOSSIP_REFUSE_N
};

/* How an exchange this peer initiated ended. */
enum gossip_result {
	GOSSIP_OK,
	GOSSIP_BUSY,       /* the partner was in an exchange of its own */
	GOSSIP_FAILED,     /* send failed, partner refused, or deadline */
};

struct gossip_params {
	enum gossip_mode mode;
	enum gossip_values values;
	double density;    /* saps, delta: fraction of coordinates per exchange */
	size_t block;      /* saps: coordinates per mask block */
	uint64_t seed;     /* job seed: masks derive from (seed, nonce) */
	double timeout;    /* seconds an exchange may take */
};

struct gossip_ops {
	proto_send_fn send;
	/* An exchange this peer initiated ended; bytes both ways. */
	void (*done)(void *arg, const char *addr, double now, enum gossip_result r,
	    size_t bytes, double seconds);
	/* The step this peer is at (sent along). */
	uint64_t (*step)(void *arg);
	/* addr sent values this peer refused (may be NULL). */
	void (*refused)(void *arg, const char *addr, enum gossip_refusal why);
	void *arg;
};

struct gossip;
struct mask;
struct trust;

/* Rewrites the count values of this peer's own about to be sent on mask
 * (distance: the consensus distance, < 0 unknown; origin: the whole model
 * as this peer started from it, NULL unknown): a fault injected by the
 * test build's --fault (fault.h), never set in the installed daemon. */
typedef void (*gossip_tamper_fn)(void *arg, const struct mask *mask, float *vals,
    size_t count, double distance, const float *origin);

const char *gossip_values_name(enum gossip_values v);
const char *gossip_refusal_name(enum gossip_refusal r);
/* 1 when every one of n values is finite. */
int gossip_finite(const float *v, size_t n);

int gossip_new(const struct gossip_params *p, struct model *m, const struct gossip_ops *ops,
    struct gossip **out);
/* Sends still in flight keep a pointer: free only after the transport
 * has closed (it fails them first). */
void gossip_free(struct gossip *g);
/* density, values, mode, timeout may change between exchanges. */
void gossip_set_params(struct gossip *g, const struct gossip_params *p);

/* Received slices go through t (borrowed; NULL: refused only when not
 * finite or far). */
void gossip_set_trust(struct gossip *g, struct trust *t);
void gossip_set_tamper(struct gossip *g, gossip_tamper_fn fn, void *arg);

/* A peer that has no model of the job yet (a joiner still pulling it)
 * answers every REQ with BUSY. New: ready. */
void gossip_set_ready(struct gossip *g, int ready);
/* This peer's training is over: its slices say so on the wire, and the
 * members that receive them judge them as any, but keep as its vote on
 * their trust's radius no less than the one it cast while it trained
 * (trust.h). NULL-safe. */
void gossip_set_trained(struct gossip *g);
/* Training starts at step: past 0 the model was resumed or pulled, not
 * the job's start, and trust judges no ways from it (gossip.c). */
void gossip_start_at(struct gossip *g, uint64_t step);
/* The job's start model, d floats (copied), when this peer knows it
 * although it started later (origin.h): trust judges ways from it again.
 * After gossip_start_at. 0, -EINVAL for a model of no size yet, or
 * -ENOMEM. */
int gossip_set_origin(struct gossip *g, const float *x);
/* The job's start model trust measures ways from, if this peer has it
 * for the model as it is now; NULL: none. */
const float *gossip_origin(const struct gossip *g);
/* Start an exchange with addr; -EBUSY if one is in flight. */
int gossip_start(struct gossip *g, double now, const char *addr);
/* Bring the deadline of the exchange in flight forward to `deadline`
 * (never back): the caller knows how long exchanges with this partner
 * take. Past it, the exchange times out as at exchange_timeout. */
void gossip_set_deadline(struct gossip *g, double deadline);
int gossip_active(const struct gossip *g);
/* A gossip message (GOSSIP_T_FIRST..LAST) passed the transport. */
void gossip_recv(struct gossip *g, double now, const char *from, uint8_t type,
    const uint8_t *buf, size_t len);
/* Fails an exchange past its deadline; returns the next deadline or
 * a negative number when none. */
double gossip_tick(struct gossip *g, double now);
/* The partner at addr is gone (its transport failed, or membership no
 * longer holds it alive): an exchange this peer started with it fails at
 * the next gossip_tick, whatever its deadline, so the peer goes on with
 * another partner instead of waiting out exchange_timeout (a SIGKILLed
 * peer's partners stalled for seconds). Only marked here, so that a
 * caller inside membership's state-change callback does not start the
 * next exchange from there (gossip_finish's done callback may). */
void gossip_partner_down(struct gossip *g, double now, const char *addr);

/* Which exchanges a count or a gap is over: every one finished (started
 * here or served for a partner), or only those this peer started. The
 * partners' rounds come at their whim; this peer's own come every
 * interval steps, so a gap between two of them is what a stall is
 * judged by. */
enum gossip_gap_kind {
	GOSSIP_GAP_ANY,
	GOSSIP_GAP_OWN,
	GOSSIP_GAP_N
};

/* The longest time between two exchanges of the kind from the first on;
 * 0 before the second. A soak's bar on stalls reads it. */
double gossip_longest_gap(const struct gossip *g, enum gossip_gap_kind kind);
/* The process ran again after a stop (SIGSTOP, then SIGCONT): the time it
 * was stopped is no gap between exchanges, so that a peer waiting on
 * others is told apart from one frozen. */
void gossip_resumed(struct gossip *g, double now);
/* Gaps between exchanges count from now on: what came since the last one
 * was no wait on a partner (a stop, or the final evaluation and checkpoint
 * before the closing phase's first exchange). */
void gossip_gaps_restart(struct gossip *g, double now);
/* Exchanges of the kind finished. */
uint64_t gossip_exchanges(const struct gossip *g, enum gossip_gap_kind kind);
/* Smoothed RMS difference of own and partner values on exchanged
 * coordinates; < 0 before the first exchange. */
double gossip_consensus_distance(const struct gossip *g);
/* The same, each sample divided by the RMS of own values on those
 * coordinates: a scale-free measure of disagreement (0.01 = 1%). */
double gossip_relative_distance(const struct gossip *g);
/* Add "gossip": {...counters} to obj. */
int gossip_stats_json(const struct gossip *g, json_t *obj);
/* The step the partner of the latest exchange this peer started and
 * finished said it was at. */
uint64_t gossip_partner_step(const struct gossip *g);
/* Forget the relative distance: the next exchange's is the first sample
 * again. The closing phase reads each of its exchanges' own this way,
 * undiluted by the training phase's larger ones. */
void gossip_restart_relative_distance(struct gossip *g);

#endif
