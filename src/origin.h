/*
 * origin: the job's start model kept beside the checkpoints, so that a peer
 * resumed from a checkpoint judges its members' ways from the job's start
 * as it did before it was stopped (trust.h: a member that has come no way
 * from the start, or went back, is behind). Without it a resumed peer has
 * no origin (its resumed model is where the job was, not where it came
 * from: gossip.c), and a job restarted whole, every peer resumed, judges no
 * ways at all: a member sending the start for ever, or its learning
 * negated, lies within the clipping radius and is mixed for good
 * (tests/behind.sh; contrib/bench/robust.sh measured 4.7 and 6.0 points
 * lost to such members when nothing judged ways).
 *
 * The file (ckpt.h's start.gdc) is written once a start, when this peer
 * trains from the job's start model, off the loop thread (libuv's pool, as
 * an attached process's checkpoints are), and removed when it trains from
 * a model that is not the job's start here (a joiner's pulled one): a start
 * left in the directory by an earlier job must not become this job's
 * origin. Costs one file of two model sizes (a checkpoint's format: its
 * momentum is zeros), written once.
 */
#ifndef GD_ORIGIN_H
#define GD_ORIGIN_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "model.h"
#include "util.h"

/* Keep x (d floats, copied) as dir's start model; the write runs on
 * loop's pool and logs its outcome. */
int origin_save(uv_loop_t *loop, const char *dir, const struct model_spec *spec, size_t d,
    uint64_t seed, const float *x, struct errbuf *err);
/* dir's start model into a new *x of d floats if it is of this model
 * (spec, d) and seed; -ENOENT when there is none, other errors with a
 * reason. */
int origin_load(const char *dir, const struct model_spec *spec, size_t d, uint64_t seed,
    float **x, struct errbuf *err);
/* This peer trains from a model that is not the job's start: no start
 * model in dir. */
void origin_drop(const char *dir);

#endif
