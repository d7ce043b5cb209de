/*
 * train: the trainer thread. It owns the step budget (the same for every
 * peer of a job: train_budget), the passes over this peer's shard (the
 * per-pass shuffle, batching), the learning-rate schedule, periodic test-set
 * evaluation and checkpoints) and runs SGD steps back to back. It never
 * touches the network or the event loop: it publishes progress under a
 * mutex and pokes the loop through the notify callback (uv_async_send in
 * the daemon), and the loop asks it to checkpoint or stop through flags it
 * reads between steps. It is the built-in kind of trainer.h (train_ops).
 */
#ifndef GD_TRAIN_H
#define GD_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "data.h"
#include "model.h"
#include "trainer.h"
#include "util.h"

struct train;

/* How many steps a peer takes. An epoch is a pass over the job's training
 * data, so every peer takes total_steps = epochs x job_steps_per_epoch
 * (capped by max_steps), whatever the size of its shard. */
struct train_budget {
	uint64_t job_steps_per_epoch;   /* floor(training set / shards / batch) */
	uint64_t shard_steps_per_pass;  /* full batches in one pass over the shard */
	uint64_t total_steps;
};

/* The budget of a peer whose shard holds shard_n of the training set's
 * train_n samples (cfg gives the shard count, batch, epochs, max_steps);
 * -EINVAL when a batch does not fit. */
int train_budget(const struct config *cfg, size_t train_n, size_t shard_n,
    struct train_budget *b, struct errbuf *err);

/* Calls from the trainer thread to its owner; each must be thread-safe
 * (the daemon's do uv_async_send). step may block, outside every lock of
 * the trainer and the model: that is how the daemon paces training to its
 * exchanges (pace.h). */
struct train_hooks {
	void (*notify)(void *arg);   /* progress worth showing (<= 4/s) */
	void (*step)(void *arg, uint64_t step); /* after every step (may be NULL) */
	void *arg;
};

/* The trainer takes the data sets and idx[0..n), this peer's shard (the
 * caller's records are cleared; they are freed with the trainer, or at
 * once on failure), and borrows cfg and m. Nothing runs before its start
 * op: a joiner's model arrives first. */
int train_new(const struct config *cfg, struct model *m, struct data_set *train,
    struct data_set *test, size_t *idx, size_t n, const struct train_hooks *hooks,
    struct train **out, struct errbuf *err);
/* The built-in trainer behind trainer.h. Its start op continues from the
 * step it is given (> 0: from a checkpoint or a model pulled from donors,
 * evaluating before the first step); its stop op finishes the current
 * step and writes a final checkpoint; its refresh_final op, once the
 * thread reported DONE and the closing phase changed the model, writes
 * the final checkpoint again at the same step (with checkpoint_dir) and
 * evaluates on the whole test set, on the caller's thread. */
extern const struct trainer_ops train_ops;
void train_free(struct train *t);

/* The density of an exchange at step s of total: density_start growing to
 * density as (s / total)^2, or density without density_start. */
double train_density_at(const struct config *cfg, uint64_t s, uint64_t total);
/* The offsets, one per class, that logit_adjust tau adds to the logits of
 * a shard idx[0..n) of the training labels (exposed for tests). */
int train_logit_offset(double tau, const uint8_t *labels, size_t train_n,
    const size_t *idx, size_t n, int classes, float *off);
/* The learning rate at step s of total (exposed for tests). */
double train_lr_at(const struct config *cfg, uint64_t s, uint64_t steps_per_epoch,
    uint64_t total);

#endif
