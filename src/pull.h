/*
 * pull: how a joiner gets the model of a running job, both sides of it.
 * Every peer is a donor: it answers a PULL for a slice of its model with a
 * CHUNK, gathered under the model lock. A joiner without a checkpoint is
 * also the puller: once it knows a live member it waits up to
 * PULL_DONOR_WAIT for the membership table to fill in (the first member to
 * answer sends its whole table a moment later), picks up to PULL_MAX_DONORS
 * donors at random among the live members (so joiners arriving together
 * spread over the job rather than all pulling from one peer), asks every
 * donor for each chunk of at most PULL_CHUNK_FLOATS, PULL_WINDOW chunks at
 * a time, in the job's value format (pull_set_values: the exchanges'
 * --values, int8 by default), and averages the answers chunk by chunk. A
 * donor that fails, refuses, goes down or misses the deadline contributes
 * nothing to a chunk; a chunk nobody answered is asked again from the
 * donors still standing; when every donor has failed, the next
 * pull_members call, PULL_RETRY later, picks others. When every chunk is
 * in, ops->pulled gets the average and the lower median of the steps
 * its donors reported (and with it the learning-rate position): one
 * donor's false step moves nothing.
 *
 * Why average rather than pull disjoint ranges from each donor: peers'
 * models differ (at 1% density by ~40% of the weights' RMS), and a model
 * stitched from disjoint pieces of three of them scored ~3 points below
 * its donors, while their average scores within half a point. It costs
 * the donors' count times the model in traffic, once per join, in the
 * job's value format: from three donors in int8 (one fp32 scale per 64
 * values) 0.80 times the model in fp32, rather than three times. The
 * quantisation error, ~1/254 of a 64-value block's largest magnitude and
 * averaged over the donors, is far below the donors' disagreement.
 *
 * A donor is dropped (the others make up for it, as for one that is gone)
 * when a chunk of its holds a non-finite value or lies far from the
 * others' (gossip's GOSSIP_FAR_GAMMA, see pull.c), and a donor never
 * serves values of its own that are not finite.
 *
 * A donor whose training is over (pull_set_done: it spent its budget and
 * lingers, or closes) answers -ESTALE unless the PULL says a done donor
 * will do: its model stopped where its budget ended, which may lie
 * thousands of steps behind a job that goes on (in a 30-minute soak a
 * joiner that drew three joiners with short budgets, done long before,
 * started at step 1,624 of a job near 10,000, nine times the job's
 * consensus distance away). A joiner remembers such a donor and asks in
 * its place, within the same attempt, the next of the members it drew
 * after its donors (up to 8 in all; past them it is dropped as a gone
 * one is), and draws later attempts' donors among members not known to
 * be done; when every live member it sees is done (the job is over), it
 * asks them, saying a done donor will do. So does a start agreement (no
 * member is done before the job starts).
 *
 * The same pull gives a fresh job one starting model (pull_agree: an
 * attached process's peer, start = agree in gossipd(8)), always in fp32:
 * every peer of the job must hold the very parameters of the peer that
 * started it, not a rounding of them (equal answers average to exactly
 * their value, see pull.c). No member is special beforehand and none
 * decides: a peer whose process attaches pulls from members that already
 * hold a model (they got it the same way, or trained from their own
 * because they came first), and when none of those it asked holds one,
 * the member lowest in address order, which is always among them, starts
 * from its own process's model; every peer reaches that rule on its own
 * from the members it sees live. A peer
 * alone after the donor wait starts from its own. The others ask again
 * every PULL_RETRY (the lowest's process may still be loading) until
 * the deadline, then start from their own with a warning.
 *
 * Most scripts seed every process alike, and then the pull would carry
 * the very values the asker holds (38 of the first peer's 65 MB in
 * contrib/bench/charlm.sh). So a process may say what it starts from
 * (pull_set_digest: the attach request's digest, BLAKE2b-256 of its
 * parameters as float32), and an agreement's PULLs carry it. A member
 * that started the job from a model of that digest (its own process's,
 * or one it skipped to the same way) answers -EEXIST without values, and
 * the asker starts from its own model: the same parameters, none sent.
 * It answers so only before its step PULL_SAME_STEPS: past it the job
 * has learnt something, and a peer that comes that late (a process
 * restarted without a checkpoint, with the seed of the first) must pull
 * the model the job holds, not start again from the job's first one.
 * A skipper starts that many steps behind the member at most; a process
 * of a small fast model may attach later than that, and then pulls.
 * Until its first chunk is settled such an asker keeps one chunk in
 * flight, not PULL_WINDOW, so that the answer costs at most a chunk from
 * each other donor. A member that pulled its start knows no digest (it
 * would have to hash the model) and serves values as before; the member
 * lowest in address order, asked first, is the one that knows. A donor
 * could lie that the models are equal: the asker then starts from its
 * own process's model, which it could have done anyway.
 *
 * A joiner that knows no live member at all (its seeds gone, every member
 * left) has nobody to pull from: once that lasts PULL_DONOR_WAIT it says
 * so (a warning, and pull_stranded for status), and once it lasts the
 * wait given by pull_set_wait it gives up (ops->gave_up) rather than wait
 * forever for a job that may be over. A member that comes back in time
 * ends the wait. So does a joiner whose attempts all fail for that long
 * (its live members are joiners without a model, the others gone).
 *
 * Both sides share one object because a peer is a donor exactly when it is
 * not pulling: a joiner refuses PULLs until its model is in, and so does a
 * peer whose model is not ready (an attached process has not taken its
 * first step: the vector holds zeros or half of its values). Like gossip
 * and member it does no I/O and reads no clock: the caller passes the
 * time, sends through ops->send and feeds events in. Joiner log lines keep
 * the "bootstrap:" prefix and its stats the "bootstrap" key that operators
 * and tests know.
 */
#ifndef GD_PULL_H
#define GD_PULL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kinds.h"	/* enum gossip_values */
#include "model.h"
#include "proto.h"

/* Message types: the numbers they had when gossip owned 80..95, so that
 * old and new peers agree. */
#define PULL_T_PULL	82
#define PULL_T_CHUNK	83
#define PULL_T_FIRST	PULL_T_PULL
#define PULL_T_LAST	PULL_T_CHUNK

/* The range and its names, for the transport (proto.h). */
extern const struct proto pull_proto;

#define PULL_MAX_DONORS	3
/* Seconds a joiner that knows fewer than PULL_MAX_DONORS live members
 * waits for more before it starts. */
#define PULL_DONOR_WAIT	1.0
/* Seconds from an attempt whose every donor failed (held no model yet,
 * went down, timed out) to the next. */
#define PULL_RETRY	0.25
/* Largest slice of a model one CHUNK carries (floats). */
#define PULL_CHUNK_FLOATS	(64 * 1024)
/* Chunks asked and not averaged yet, at most: 8 MiB from each donor keeps
 * its link busy, and a chunk's answers then come well within
 * exchange_timeout of its asking whatever the model's size. Asking for
 * every chunk at once made the deadlines of a large model's last chunks
 * pass while the donors still served the first: they were asked again,
 * and the late answers were wasted. */
#define PULL_WINDOW		32
#define PULL_REQ_SIZE		25
/* A start agreement's PULL may carry the digest of the model this peer's
 * process starts from (BLAKE2b-256 of its float32 values: see top). */
#define PULL_DIGEST_BYTES	32
#define PULL_REQ_MAX		(PULL_REQ_SIZE + PULL_DIGEST_BYTES)
/* A member answers that the asker holds the job's start only before this
 * step of its own (see top). */
#define PULL_SAME_STEPS		100
#define PULL_CHUNK_HEADER	40

struct pull_ops {
	proto_send_fn send;
	/* The step this peer is at, served with every chunk. */
	uint64_t (*step)(void *arg);
	/* The joiner's model is in: d averaged parameters, the donors'
	 * median step (see top), their addresses comma-separated. 0 ends the pull (the
	 * peer is a donor from now on); < 0 drops it, and the next
	 * pull_members starts another. */
	int (*pulled)(void *arg, const float *params, uint64_t step, const char *donors);
	/* Start agreement: this peer's own model starts the job (why: a
	 * sentence for the log); the peer is a donor from now on. */
	void (*own)(void *arg, const char *why);
	/* The joiner knew no live member for the whole wait (see top; why:
	 * a sentence for the log): it will never pull, and the pull does
	 * nothing more. */
	void (*gave_up)(void *arg, const char *why);
	void *arg;
};

struct pull;

/* Serves m's values; joining: this peer has no model yet and pulls m->d
 * floats first. timeout: seconds a chunk request may take. */
int pull_new(struct model *m, double timeout, int joining, const struct pull_ops *ops,
    struct pull **out);
/* Sends still in flight carry no pointer to it: free any time. */
void pull_free(struct pull *p);
/* Applies to chunk requests sent from now on. */
void pull_set_timeout(struct pull *p, double timeout);
/* The format a joiner into a running job asks its donors for, from its
 * next attempt on (an attempt's chunks all come in one); fp32, the
 * default, until set. A start agreement asks for fp32 whatever this says
 * (see top). */
void pull_set_values(struct pull *p, enum gossip_values fmt);
/* A joiner gives up after knowing no live member for secs (see top);
 * 0, the default, waits forever. */
void pull_set_wait(struct pull *p, double secs);
/* Whether this peer is a joiner that has known no live member for
 * PULL_DONOR_WAIT or longer and still waits. */
int pull_stranded(const struct pull *p);
/* Whether the model holds the job's values, which a donor serves only
 * then (at pull_new: when not joining). */
void pull_set_ready(struct pull *p, int ready);
/* This peer's training is over (its budget spent; it lingers or closes):
 * it serves only PULLs that take a done donor from now on (see top). */
void pull_set_done(struct pull *p, int done);
/* A start agreement (see top) instead of a joiner's pull: self is this
 * peer's address as the others know it; after timeout seconds from the
 * first pull_members it starts from its own model. */
void pull_agree(struct pull *p, const char *self, double timeout);
/* The digest of the model this peer's process starts from (see top), for
 * a start agreement: asked with it, a member that started the job from
 * the same model answers so, and this peer starts from its own. */
void pull_set_digest(struct pull *p, const uint8_t digest[PULL_DIGEST_BYTES]);

/* A PULL_T_FIRST..LAST message passed the transport. */
void pull_recv(struct pull *p, double now, const char *from, uint8_t type, const uint8_t *buf,
    size_t len);
/* The live members other than this peer, as known now: a joiner not yet
 * pulling picks its donors among them (after the donor wait). */
void pull_members(struct pull *p, double now, const char *const *live, size_t n);
/* addr became unreachable: if it is a donor, the others make up for it. */
void pull_donor_down(struct pull *p, double now, const char *addr);
/* Re-asks overdue chunks; returns the next deadline (the end of the donor
 * wait and of a joiner's wait alone included), < 0 when none. */
double pull_tick(struct pull *p, double now);
/* Add "pull": {donor counters} and, while a pull runs, "bootstrap". */
int pull_stats_json(const struct pull *p, json_t *obj);

/* The codec. A PULL asks for [off, off+len) in a value format under a
 * request id; a CHUNK answers with the values in that format
 * (gossip_values_get reads them, pointing into buf) or a negative errno.
 * Decoders return 0 or -EBADMSG, for an unknown format too. */
struct pull_req {
	uint64_t id, off, len;
	enum gossip_values fmt;
	int done_ok;              /* a donor whose training is over may answer */
	int has_digest;           /* digest: the asker's starting model's */
	uint8_t digest[PULL_DIGEST_BYTES];
};
struct pull_chunk {
	uint64_t id, off, len, step;
	int status;               /* 0 served, else a negative errno */
	enum gossip_values fmt;
	const uint8_t *values;    /* gossip_values_bytes(fmt, len) of them */
};
/* Returns the bytes written: PULL_REQ_SIZE, or PULL_REQ_MAX with a digest. */
size_t pull_req_encode(uint8_t out[PULL_REQ_MAX], const struct pull_req *r);
int pull_req_decode(const uint8_t *buf, size_t len, struct pull_req *r);
int pull_chunk_decode(const uint8_t *buf, size_t len, struct pull_chunk *c);

#endif
