/*
 * bootstrap: how a joiner gets the model of a running job. It picks up to
 * BOOTSTRAP_MAX_DONORS donors at random among the live members (so joiners
 * arriving together spread over the job rather than all pulling from one
 * peer), asks every donor for every chunk of at most GOSSIP_CHUNK_FLOATS
 * at once, and averages the answers chunk by chunk. A donor that fails,
 * refuses or misses the deadline simply contributes nothing to a chunk;
 * a chunk nobody answered is asked again from the donors still standing.
 * When every chunk is in, the joiner adopts the highest step any donor
 * reported, and with it the learning-rate position.
 *
 * Why average rather than pull disjoint ranges from each donor: peers'
 * models differ (at 1% density by ~40% of the weights' RMS), and a model
 * stitched from disjoint pieces of three of them scored ~3 points below
 * its donors, while their average scores within half a point. It costs
 * the donors' count times the model in traffic, once per join.
 *
 * Like gossip and member it does no I/O and reads no clock.
 */
#ifndef GD_BOOTSTRAP_H
#define GD_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define BOOTSTRAP_MAX_DONORS 3

struct bootstrap_ops {
	int (*send)(void *arg, const char *addr, uint8_t type, const void *buf, size_t len,
	    void (*cb)(void *cbarg, int status), void *cbarg);
	void *arg;
};

struct bootstrap;

/* d floats to fetch; timeout per chunk request in seconds. */
int bootstrap_new(size_t d, double timeout, const struct bootstrap_ops *ops,
    struct bootstrap **out);
void bootstrap_free(struct bootstrap *b);
/* Pick donors among members (self excluded) and ask for every chunk.
 * -EAGAIN when there is no member to ask. */
int bootstrap_start(struct bootstrap *b, double now, const char *const *members, size_t n);
/* A GOSSIP_T_CHUNK message. */
void bootstrap_recv(struct bootstrap *b, double now, const char *from, const uint8_t *buf,
    size_t len);
/* A donor became unreachable: its chunks go to the others now. */
void bootstrap_donor_down(struct bootstrap *b, double now, const char *addr);
/* Re-asks overdue chunks; returns the next deadline, < 0 when none.
 * Fails (bootstrap_failed) when no donor is left. */
double bootstrap_tick(struct bootstrap *b, double now);
int bootstrap_done(const struct bootstrap *b);
int bootstrap_failed(const struct bootstrap *b);
/* Valid once done: the pulled parameters (d floats) and the step. */
const float *bootstrap_params(const struct bootstrap *b);
uint64_t bootstrap_step(const struct bootstrap *b);
/* Donor i's address, NULL past the last one. */
const char *bootstrap_donor(const struct bootstrap *b, int i);
int bootstrap_stats_json(const struct bootstrap *b, json_t *obj);

#endif
