/*
 * share: mode share (gossipd(8), SHARE). Every `interval` steps, at its own
 * step boundary, a peer sends every live member the coordinates it moved
 * most since its last round, and each member adds them to its model at
 * 1/n; a peer adds its own share at 1/n as well. Without loss every peer
 * so takes every share once at the same weight, and the members' models
 * stay one model plus each one's steps since its last round: DiLoCo's
 * outer step on the mean of the members' moves (outer lr 1, no momentum),
 * sparse, with no round, no barrier and no all-reduce. Pairwise exchanges
 * (modes saps, dense, delta) average two models; the mean of every
 * member's moves learns more per step (contrib/bench/cnn_mix.py: 1.1-1.2x
 * DDP's steps to 0.90 against delta's 1.3x at equal bytes).
 *
 * The state, d floats each: the anchor A, the job's model as this peer
 * knows it (every share it applied), and the residual e, what its own
 * steps moved that no share has carried yet (error feedback, as drift's
 * anchor is for delta). A round: e += x - A; the top density of |e|, in
 * the value format as sent, is the share s (with the ranges an attached
 * process named whole, share_set_whole: its vectors, which a top of the
 * whole model starves); e -= s; A += s/n; and the
 * model goes to A, by an increment queued like a mix (model_add_in), so
 * that an attached process sees it at its next boundary and a step the
 * trainer takes meanwhile is kept. A received share s: A += s/n and the
 * model += s/n. With an outer lr (share_set_weight) every share goes in
 * times it, its own too: DiLoCo's outer SGD on the mean of the members'
 * moves. An adaptive optimizer (Adam, AdamW, Adadelta, RMSprop) divides
 * each step by the gradient's running size; DDP's mean of n gradients
 * has up to 1/sqrt(n) of one's noise, so its steps run up to sqrt(n)
 * times a lone process's where noise dominates, and the mean of the
 * members' moves falls short of them by as much: with adaptive a share
 * goes in at 1/sqrt(n), the mean times sqrt(n). The exact mean of 4
 * AdamW peers' moves every step then ends the transformer at 1.002
 * times DDP's loss (1.027 at 1/n; contrib/bench/charlm_mix.py --mix
 * all), and the PyTorch example's Adadelta loop, attached, at or above
 * DDP's accuracy (contrib/bench/plain.sh). SGD's step is its gradient
 * times lr, so the mean of the moves is DDP's step: 1/n (the CNN's
 * mixer at 1.5/n ended worse). n: the live members its sender knew,
 * itself included, as the share says: every member then adds a share at
 * the weight its sender gave it, where each member's own count would set
 * the anchors apart while the membership settles (16 peers on 2 cores: one knew 13 at step
 * 120). A sender's n below half the receiver's own counts as that half,
 * so that a member cannot weigh its shares up by claiming a small job.
 *
 * Received shares are vetted before they touch anything (finite, the
 * model's size, indices in bounds) and measured by their RMS against the
 * members' latest (trust.h, a trust of its own: a share's size is not an
 * exchange's distance): one beyond the radius is scaled down to it, and a
 * member whose shares keep lying beyond it is suspect, and its shares are
 * dropped, until they come back in. A share lost on the way or clipped
 * leaves the anchors apart by it; the closing phase's pairwise exchanges
 * bring the models together at the end.
 *
 * A share is sent as messages of at most `piece` coordinates, each whole
 * in itself (indices, values), so no message waits for another. Its RMS
 * is at most SHARE_GROWTH times the previous share's: what is over waits
 * in the residual, as what is not among the largest does.
 *
 * No I/O and no clock: rounds sends the messages and says when.
 * Memory: three floats per parameter (A, e and a read of the model).
 */
#ifndef GD_SHARE_H
#define GD_SHARE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "gossip.h"	/* gossip_tamper_fn */
#include "kinds.h"	/* enum gossip_values */
#include "model.h"
#include "proto.h"

struct errbuf;
struct trust;

/* The shares' trust clips at this times clip_factor x the median: honest
 * shares differ more than exchanged slices' distances do, since a share's
 * size follows its sender's learning rate, and near the end of a decaying
 * schedule a peer a little behind sends several times the others' (in
 * tests/share.sh's 2 epochs, up to 4x the median in a run whose slowest
 * peer ran at 0.7x the others' speed, and 7x once as the others ended). */
#define SHARE_CLIP_SCALE 4.0

/* A round sends at most this many times the RMS of this peer's previous
 * share; the rest stays in the residual for the next rounds. A peer whose
 * event loop stalled while its trainer ran on would otherwise send the
 * steps of many rounds at once, beyond its members' radius (seen in a
 * churn run on an overloaded machine: honest peers suspected). */
#define SHARE_GROWTH 2.0

/* Message type: in gossip's free range (gossip.h). */
#define SHARE_T_SHARE	84

/* The range and its names, for the transport (proto.h). */
extern const struct proto share_proto;

/* A sender's n counts as at least the receiver's own divided by this. */
#define SHARE_N_SLACK 2.0

#define SHARE_WIRE_VERSION 3
/*	0 version(u8)=3  1 values(u8)  2 n(u16, >= 1)  4 coding(u8: 0 the
 *	indices as varint gaps, mask_encode; k + 1: Rice-coded gaps,
 *	mask_encode_rice with parameter k, whichever is shorter)  5 0(3 bytes)
 *	8 d(u64)  16 count(u64)  24 ilen(u64)  32 indices (ilen bytes), then
 *	count values (gossip_wire.h's formats), little-endian. Version 2 had
 *	varint gaps only, and 0 at 4. */
#define SHARE_HEADER 32
/* Most bytes one coordinate takes in a message: a varint index (10) and
 * an fp32 value (4), or an int8 one with a block's scale to itself (5),
 * rounded up: a message of (max_message_size - SHARE_HEADER) /
 * SHARE_COORD_MAX coordinates always fits. */
#define SHARE_COORD_MAX 16

struct share_params {
	enum gossip_values values;
	double density;        /* the share of the coordinates a round sends */
	size_t piece;          /* most coordinates in one message */
};

/* Why a received share touched nothing (stats "share"."refused"). */
enum share_refusal {
	SHARE_REFUSE_MALFORMED,   /* the bytes do not decode */
	SHARE_REFUSE_SIZE,        /* another model size than this peer's */
	SHARE_REFUSE_NONFINITE,   /* a NaN or an infinity */
	SHARE_REFUSE_SUSPECT,     /* its sender is suspect (trust.h) */
	SHARE_REFUSE_UNANCHORED,  /* this peer holds no anchor: not in mode share, or
	                           * its model is not the job's yet */
	SHARE_REFUSE_N
};

struct share;

int share_new(struct share **out);
void share_free(struct share *s);
/* The model was replaced (pulled, restored, the job's start): the anchor
 * is taken afresh, the residual is emptied. */
void share_reset(struct share *s);
/* Anchor at m as it is, unless anchored: where the job's model starts. 0,
 * or a negative errno (the next round tries again). */
int share_anchor(struct share *s, struct model *m);
/* One round over m among n live members (this peer included); *count
 * messages are ready (share_message) until the next round. The first
 * round after a reset only anchors (0 messages). -EDOM: the model holds
 * values that are not finite, or the share would in its value format
 * (fp16's range); nothing changed. */
int share_round(struct share *s, struct model *m, const struct share_params *p, size_t n,
    size_t *count);
const uint8_t *share_message(const struct share *s, size_t i, size_t *len);
/* The anchor into out (d floats; NULL: only whether there is one): the
 * job's model as this peer knows it, what an attached process evaluates
 * (gossipd-attach(7), "evaluate"). -ENOENT before the first anchor or
 * for another d. */
int share_job_model(const struct share *s, float *out, size_t d);
/* Every share, own and received, goes in times lr / n (lr 1 when never
 * set), or with adaptive times lr / sqrt(n): see above. */
void share_set_weight(struct share *s, double lr, int adaptive);
/* Ranges r[0..n) of a model of d coordinates (sorted, apart, none empty;
 * n 0: none) that every round sends whole besides the top density of the
 * rest: an attached process's vectors, biases and norms' gains, which a
 * top of the whole model starves (gossipd(8), SHARE). -EINVAL with err
 * for ranges that are not so; the last ranges set stand. */
int share_set_whole(struct share *s, const struct model_range *r, size_t n, size_t d,
    struct errbuf *err);
/* What is left in the residual after a round is multiplied by decay (1
 * when never set): SparseLoCo's decaying error feedback, which forgets the
 * random walk an adaptive optimizer's steps make on a coordinate with no
 * steady gradient, and part of every slow move with it (gossipd(8),
 * SHARE: 0.9 helped AdamW's transformer, hurt SGD's CNN). */
void share_set_decay(struct share *s, double decay);
/* A message from addr: applied at the weight of its sender's n (at least
 * n / SHARE_N_SLACK, n as in share_round), scaled down
 * to trust's radius beyond it (0), or refused and counted (a negative
 * errno, *why and err say why; -ENOMEM from the model alone leaves *why
 * unset). trust may be NULL: nothing is clipped or suspected. */
int share_recv(struct share *s, struct model *m, struct trust *trust, const char *addr,
    double now, size_t n, const uint8_t *buf, size_t len, enum share_refusal *why,
    struct errbuf *err);
/* This peer's training is over: from now on received shares only go
 * through the suspicion they earned so far. At the end of a decaying
 * schedule the shares of members a few steps apart differ many times
 * over, and a peer that finished, its own latest share tiny, would come
 * to suspect honest members still training (a churn run: two of six). */
void share_trained(struct share *s);
/* The test build's fault (fault.h) on the model a round reads, for the
 * share only: the faulty peer's residual takes the faulty values, its
 * model still goes to its anchor. */
void share_set_tamper(struct share *s, gossip_tamper_fn fn, void *arg);
/* A message of the last round reached its member (status 0) or not. */
void share_sent(struct share *s, int status);
/* "share": {rounds, sent, send_failed, received, applied, clipped,
 * refused: {malformed, size, nonfinite, suspect, unanchored}} */
int share_stats_json(const struct share *s, json_t *obj);

#endif
