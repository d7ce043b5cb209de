/*
 * closing: the stop rules of the closing phase, the state a peer is in
 * between the end of its training budget and its leave (gossipd(8),
 * CLOSING PHASE). Peers train on different data and end apart; the job's
 * average model is better than any of them. Rather than a coordinator that
 * gathers everyone's model at the end (which needs everyone), each peer
 * whose budget is spent keeps exchanging, denser and back to back, with
 * whoever is still there, and leaves on its own once the first of these
 * holds: its recent exchanges find its partners close (distance), it sent
 * its byte budget (budget), time is up (timeout), or no one else is left
 * (alone). Nobody waits for anybody: a dead partner costs failed exchanges.
 *
 * Like gossip and member, this module does no I/O and reads no clock:
 * rounds.c passes the time and the counters and starts the exchanges;
 * daemon.c writes the final checkpoint and leaves when it ends. All
 * defaults of the phase's keys are here, in one place.
 */
#ifndef GD_CLOSING_H
#define GD_CLOSING_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* Defaults of close_budget, close_distance, close_density, close_timeout
 * (config.c). A budget of 8 model sizes is about 16 exchanges at density
 * 0.5 initiated; in contrib/bench/gossip.sh (8 peers, 20 epochs, int8: 2
 * MB, a seventh of the training's traffic) it took the peers from 1-3% to
 * 0.4% from their average, on iid and on skewed shards; 1% relative
 * distance is well inside the spread of models that score the same; 60 s
 * bounds a phase whose partners are gone or slow. */
#define CLOSING_DEFAULT_BUDGET 8.0
#define CLOSING_DEFAULT_DISTANCE 0.01
#define CLOSING_DEFAULT_DENSITY 0.5
#define CLOSING_DEFAULT_TIMEOUT 60.0

/* Closing exchanges measured before their distance is trusted. The
 * distance is the largest of the last max(CLOSING_SAMPLES, live partners)
 * exchanges (CLOSING_WINDOW at most): partners are taken in turn, so it
 * covers every live partner, and a pair of peers that closed early cannot
 * call the job close while a third still trains far from them. */
#define CLOSING_SAMPLES 4
#define CLOSING_WINDOW 64
/* Pause after a BUSY or failed exchange, or with no partner to pick, so
 * that a phase among busy or dead partners never spins. */
#define CLOSING_PAUSE_S 0.02
/* Pause after an exchange with a partner that is still training (its step
 * below this peer's final one): peers end their budgets seconds apart on a
 * busy machine, and back to back an early one would spend its whole
 * budget on partners that are still moving, then leave before they end.
 * At this pace the default budget lasts a few seconds of their training. */
#define CLOSING_TRAINING_PAUSE_S 0.2

enum closing_reason {
	CLOSING_DISTANCE,  /* recent exchanges within close_distance */
	CLOSING_BUDGET,    /* close_budget model sizes sent */
	CLOSING_TIMEOUT,   /* close_timeout seconds passed */
	CLOSING_ALONE,     /* no live member but this peer */
	CLOSING_LEAVE,     /* told to leave (gossipctl leave, a signal) */
	CLOSING_NONE       /* not ended */
};

struct closing_params {
	uint64_t budget_bytes;   /* bytes this peer may send in the phase */
	double distance;         /* relative distance that ends it */
	double timeout;          /* seconds */
};

struct closing {
	struct closing_params p;
	int active;              /* in the phase now */
	int ended;               /* the phase ran and ended */
	enum closing_reason reason;
	double started, ended_at; /* the caller's clock */
	double started_wall;     /* Unix time, for status */
	uint64_t bytes0;         /* bytes sent before the phase */
	uint64_t bytes;          /* sent in the phase so far */
	uint64_t exchanges;      /* exchanges this peer started and finished */
	uint64_t failed;         /* started and BUSY, refused or failed */
	double recent[CLOSING_WINDOW]; /* relative distances, a ring */
	uint64_t measured;       /* samples taken */
	double distance;         /* at the latest check; < 0: not enough samples */
	uint64_t turn;           /* partners taken so far: the next is turn % live */
};

const char *closing_reason_name(enum closing_reason r);
/* Enter the phase; bytes_sent is the transport's counter now. */
void closing_begin(struct closing *c, const struct closing_params *p, double now,
    double wall, uint64_t bytes_sent);
/* An exchange this peer started ended: ok, and its relative distance
 * (< 0: not measured); training: the partner is still training, so
 * however close it is now it is no sign of agreement, and the distance
 * rule waits until the window has passed it. */
void closing_exchange(struct closing *c, int ok, double relative_distance, int training);
/* The recent relative distance with live_peers partners alive (see
 * CLOSING_SAMPLES); < 0 until enough were measured. */
double closing_distance(const struct closing *c, size_t live_peers);
/* Which of n live partners to exchange with next (each in turn). */
size_t closing_next_partner(struct closing *c, size_t n);
/* The reason the phase must end now, or CLOSING_NONE; live_peers counts
 * the live members other than this peer. Takes the bytes sent so far and
 * the distance for status. */
enum closing_reason closing_check(struct closing *c, double now, uint64_t bytes_sent,
    size_t live_peers);
/* When close_timeout runs out. */
double closing_deadline(const struct closing *c);
void closing_end(struct closing *c, double now, uint64_t bytes_sent,
    enum closing_reason why);
/* status's "closing" object; NULL before the phase began. */
json_t *closing_json(const struct closing *c, double now);

#endif
