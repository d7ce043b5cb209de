/*
 * rounds: when a peer exchanges and with whom, and how a joiner gets its
 * model. A round starts every `interval` trainer steps, with a partner the
 * select policy picks among the live members; a partner that answers BUSY
 * is replaced by another (twice at most) within the same round; with
 * `lag`, the trainer waits for the round begun lag rounds ago (pace). A
 * joiner without a checkpoint pulls the model from donors before it
 * trains. Once the trainer's budget is spent, the closing phase starts
 * exchanges back to back (closing.h). In mode share a round sends this
 * peer's share to every live member instead (share.h), waits for no
 * answer, and holds an attached process at the round's step until the
 * others' shares of the round came, a bounded time (share_sync). The
 * exchange itself is gossip's, the shares share's, the link
 * figures select's, the pull pull's: this module is the policy that joins
 * them, and it owns them.
 *
 * It does no I/O and keeps no clock or timer: every entry point takes
 * `now`, messages go out through its ops' send, and after every call that
 * may move a deadline it asks its owner, through ops' schedule, to call
 * rounds_timer at the earliest one. So the daemon drives it from one libuv
 * timer, and a unit test from a fake clock (tests/test_rounds.c).
 */
#ifndef GD_ROUNDS_H
#define GD_ROUNDS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "closing.h"
#include "config.h"
#include "gossip.h"
#include "model.h"
#include "proto.h"
#include "pull.h"	/* PULL_DIGEST_BYTES */
#include "select.h"
#include "trainer.h"
#include "trust.h"
#include "wire.h"

/* Partners tried after the first in one round when each answers BUSY or
 * fails (rounds_done). */
#define ROUNDS_RETRIES 2
/* The least patience with an exchange over a measured link. */
#define ROUNDS_PATIENCE_MIN_S 0.25
/* A resumed peer's partners whose steps say where the job is, and the
 * rounds' worth of steps it may lag them before it catches up
 * (rounds_catch_up). */
#define ROUNDS_CATCH_UP_PARTNERS 3
#define ROUNDS_CATCH_UP_ROUNDS 2

/* Calls into the owner, all from within a rounds_* call. */
struct rounds_ops {
	proto_send_fn send;
	/* The trainer's step and budget (total_steps 0: none known). */
	void (*progress)(void *arg, struct train_progress *p);
	/* Copy the addresses of up to max live members other than this peer
	 * into out; return how many there are (member_live). */
	size_t (*live)(void *arg, char (*out)[WIRE_ADDR_MAX + 1], size_t max);
	uint64_t (*bytes_sent)(void *arg);
	/* The exchanges pace waited for are over: a step held for them (an
	 * attached process's reply) may go on. */
	void (*released)(void *arg);
	/* The pulled model is in the model, at the donors' step: train. own:
	 * a start agreement chose this peer's own model; nothing was pulled,
	 * and the trainer brings its values (step 0). */
	void (*pulled)(void *arg, uint64_t step, int own);
	/* The closing phase ended for why. */
	void (*closed)(void *arg, enum closing_reason why);
	/* Call rounds_timer at this time (< 0: no deadline). */
	void (*schedule)(void *arg, double at);
	/* A joiner knew no live member for start_timeout (pull.h): it will
	 * never get the model; why is a sentence for the log. */
	void (*gave_up)(void *arg, const char *why);
	/* The job runs at step, ahead of this resumed peer: the trainer goes
	 * on from there (trainer_catch_up; -ENOTSUP when it cannot). */
	int (*catch_up)(void *arg, uint64_t step);
	/* An exchange is about to wait on addr over a link never measured:
	 * membership probes it now (member_probe). */
	void (*probe)(void *arg, double now, const char *addr);
	void *arg;
};

struct rounds;

/* Gossip, select, pace and the model pull over m, with the settings of
 * cfg (borrowed; rounds_apply_params after a change). joining: the model
 * must be pulled before this peer trains. */
int rounds_new(const struct config *cfg, struct model *m, int joining,
    const struct rounds_ops *ops, struct rounds **out, struct errbuf *err);
/* Instead of joining: a fresh job's one starting model is agreed with the
 * members before this peer trains (pull.h, start agreement); self is its
 * address as the members know it. Before the model has a size. */
void rounds_agree(struct rounds *r, const char *self);
/* The digest of the model the attached process starts from, for the
 * agreement (pull_set_digest). */
void rounds_start_digest(struct rounds *r, const uint8_t digest[PULL_DIGEST_BYTES]);
/* Gossip must outlive the transport's failing of the sends in flight that
 * point into it: free after the transport is closed. */
void rounds_free(struct rounds *r);

/* A message of gossip_proto's, pull_proto's or share_proto's range. */
void rounds_recv(struct rounds *r, double now, const char *addr, uint8_t type,
    const uint8_t *payload, size_t len);
/* The deadline the owner was asked for has come. */
void rounds_timer(struct rounds *r, double now);
/* Hand runtime-tunable gossip keys (cfg) to the running modules. */
void rounds_apply_params(struct rounds *r, double now);
/* The model holds the job's parameters: it may be exchanged. */
void rounds_set_ready(struct rounds *r, int ready);
/* The attached process steps by an optimizer of kind (enum
 * optimizer_kind, sgd or adaptive): mode share weighs shares by it unless
 * the optimizer key names one (share.h), and says so in the log. */
void rounds_set_optimizer(struct rounds *r, int kind);
/* The ranges of a model of d values that mode share's rounds send whole
 * (share_set_whole; n 0: none). */
int rounds_set_whole(struct rounds *r, const struct model_range *w, size_t n, size_t d,
    struct errbuf *err);
/* The job's model into out (d floats; NULL: only whether there is one),
 * in a mode whose members share one (share_job_model); -ENOENT in another
 * mode, before the job's model or once closing, whose pairwise mixes
 * leave no such model. */
int rounds_job_model(const struct rounds *r, float *out, size_t d);
/* The trainer took a step: start a round if one is due. */
void rounds_on_step(struct rounds *r, double now);
/* Training starts at step (rounds count from there). */
void rounds_start_at(struct rounds *r, uint64_t step);
/* The job's start model, for a peer that started later but kept it
 * (gossip_set_origin); after rounds_start_at. */
int rounds_set_origin(struct rounds *r, const float *x);
/* The job's start model trust judges ways from; NULL: none. */
const float *rounds_origin(const struct rounds *r);
/* This peer resumed its checkpoint, which may be far behind the job (a
 * restart after a kill: the checkpoint's age plus the downtime; a peer
 * killed often trained 1,400 steps behind the others in a soak, at five
 * times their learning rate late in a decaying schedule, and the job
 * suspected it). Once its first ROUNDS_CATCH_UP_PARTNERS partners of
 * exchanges that mixed told their steps (mode share's shares tell none),
 * if their median is more than ROUNDS_CATCH_UP_ROUNDS rounds ahead, the
 * trainer goes on from it (ops' catch_up), as a joiner trains on from its
 * donors' step. The median, so that one member's false step moves nothing
 * (of two, the lesser; a job of fewer members waits for all). Once per
 * start. */
void rounds_catch_up(struct rounds *r);
/* Membership moved: a joiner may now know enough donors. */
void rounds_members_changed(struct rounds *r, double now);
/* A peer became unreachable: a donor of the running pull, or the partner
 * of the exchange in flight, may be gone. */
void rounds_peer_down(struct rounds *r, double now, const char *addr);
/* Membership no longer holds addr alive: an exchange in flight with it
 * fails at once, from the rounds timer (gossip_partner_down); a pull
 * keeps its donor, which may still answer. */
void rounds_partner_gone(struct rounds *r, double now, const char *addr);
/* How long an exchange over link l may take: patience (exchange_patience)
 * times its usual time (select's EWMA), doubled per failure in a row on
 * it, at least ROUNDS_PATIENCE_MIN_S and at most timeout
 * (exchange_timeout), which a link never measured (l NULL) and patience 0
 * get. A partner killed or stopped
 * mid-exchange would otherwise hold this peer until membership suspects
 * it (gossip_partner_down), a second or more, where an exchange between
 * two processes of one host takes milliseconds. The doubling lets a link
 * that slowed down finish an exchange and be measured again (its EWMA
 * moves only with exchanges that finish). */
double rounds_patience(const struct select_link *l, double patience, double timeout);
/* The process ran again after a SIGSTOP (gossip_resumed). */
void rounds_resumed(struct rounds *r, double now);
/* The trainer's budget is spent: the model moves only by exchanges from
 * now on, the pull tells joiners so (pull.h), and trust judges slices by
 * the spread of the training (trust_freeze). */
void rounds_trained(struct rounds *r, double now);
/* The trainer's budget is spent: enter the closing phase (closing.h) and
 * return 1, or 0 when this peer has none (close_budget 0). It ends in
 * ops' closed. */
int rounds_close_begin(struct rounds *r, double now);
/* End the closing phase, if one runs, for why (a leave); ops' closed is
 * called. */
void rounds_close_end(struct rounds *r, double now, enum closing_reason why);
/* Leaving: start no exchange, and never hold the trainer again. */
void rounds_stop(struct rounds *r);

/* The pace the trainer thread waits on (pace.h), NULL without rounds. */
struct pace *rounds_pace(struct rounds *r);
const struct closing *rounds_closing(const struct rounds *r);
const struct select_link *rounds_link(const struct rounds *r, const char *addr);
/* NULL if gossip never received a slice from addr. */
const struct trust_member *rounds_trust(const struct rounds *r, const char *addr);
/* trust_suspects_text of what gossip received; -1 without rounds. */
int rounds_suspects_text(const struct rounds *r, char *buf, size_t size);
/* The test build's fault injection (gossip_set_tamper). */
void rounds_set_tamper(struct rounds *r, gossip_tamper_fn fn, void *arg);
uint64_t rounds_exchanges(const struct rounds *r);
/* A joiner that knows no live member to pull from (pull_stranded). */
int rounds_stranded(const struct rounds *r);
/* status's exchange fields, and stats' gossip, select and bootstrap. */
void rounds_status_json(const struct rounds *r, json_t *st);
void rounds_stats_json(const struct rounds *r, json_t *stats);

#endif
