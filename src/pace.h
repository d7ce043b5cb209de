/*
 * pace: bounded staleness between the trainer and the exchanges its peer
 * starts (the `lag` setting), and in mode share its wait at a round for
 * the others' shares (`share_sync`, rounds.c).
 *
 * By default the trainer never waits for the network: an exchange runs on
 * the loop thread while steps go on, and a slow link only means fewer
 * exchanges. With lag N the trainer stops after the step N rounds past the
 * start of an exchange that has not ended, until it ends (done, failed or
 * timed out): the bounded staleness of AD-PSGD, and SAPS-PSGD's rounds
 * when N is 1. Model copies then cannot drift apart for want of bandwidth,
 * and the links sit on training's critical path, where a partner choice
 * that avoids slow links shows in wall time.
 *
 * The loop thread holds and releases; the trainer thread waits. A mutex
 * and a condition variable are all they share, so it is its own module
 * rather than a corner of gossip, which is single-threaded and I/O-free.
 */
#ifndef GD_PACE_H
#define GD_PACE_H

#include <stdint.h>

struct pace;

int pace_new(struct pace **out);
void pace_free(struct pace *p);

/* Loop thread. hold: an exchange is under way and the trainer must not
 * go past step `limit` before it ends; release: it ended; close: never
 * wait again (leaving or stopping: the trainer must reach its stop). */
void pace_hold(struct pace *p, uint64_t limit);
void pace_release(struct pace *p);
void pace_close(struct pace *p);

/* Trainer thread, after finishing `step`: returns at once unless an
 * exchange holds it at this step. */
void pace_wait(struct pace *p, uint64_t step);

/* Loop thread: whether pace_wait(step) would wait now (an external
 * trainer's step reply is held instead). */
int pace_holds(struct pace *p, uint64_t step);

/* Loop thread: an external trainer waited this long (its step reply was
 * held instead of its thread), counted as one wait. */
void pace_waited(struct pace *p, double seconds);

/* Seconds the trainer spent waiting, and how many times it waited. */
void pace_stats(struct pace *p, double *seconds, uint64_t *waits);

#endif
