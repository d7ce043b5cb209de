/*
 * train: the trainer thread. It owns the step budget (the same for every
 * peer of a job: train_budget), the passes over this peer's shard (the
 * per-pass shuffle, batching), the learning-rate schedule, periodic test-set
 * evaluation and checkpoints) and runs SGD steps back to back. It never
 * touches the network or the event loop: it publishes progress under a
 * mutex and pokes the loop through the notify callback (uv_async_send in
 * the daemon), and the loop asks it to checkpoint or stop through flags it
 * reads between steps.
 */
#ifndef GD_TRAIN_H
#define GD_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "data.h"
#include "model.h"
#include "util.h"

enum train_state { TRAIN_TRAINING, TRAIN_LEAVING, TRAIN_DONE, TRAIN_FAILED };

struct train_progress {
	enum train_state state;
	uint64_t step;            /* optimizer steps taken (resumed ones included) */
	uint64_t total_steps;
	uint32_t epoch;           /* current job epoch (train_budget), 0-based */
	double lr;
	double loss;              /* running mean of recent training losses */
	double test_loss;         /* last evaluation; < 0 before the first one */
	double accuracy;          /* last evaluation; < 0 before the first one */
	uint64_t eval_step;       /* step of the last evaluation */
	double samples_per_s;     /* recent training throughput */
	double elapsed;           /* seconds since the trainer started */
	uint64_t ckpt_done;       /* checkpoint requests completed so far */
	int ckpt_rc;              /* result of the last checkpoint */
	char ckpt_msg[256];       /* its path, or why it failed */
	char error[256];          /* why the trainer failed (TRAIN_FAILED) */
};

struct trainer;

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

/* The trainer borrows cfg, m and the data sets (they outlive it); idx is
 * this peer's shard. start_step > 0 continues mid-way (from a checkpoint
 * or a model pulled from donors) and evaluates before the first step. */
int train_new(const struct config *cfg, struct model *m, const struct data_set *train,
    const size_t *idx, size_t n, const struct data_set *test, uint64_t start_step,
    const struct train_hooks *hooks, struct trainer **out, struct errbuf *err);
int train_start(struct trainer *t, struct errbuf *err);
void train_get_progress(struct trainer *t, struct train_progress *p);
/* Returns the request's ticket: the checkpoint is done when
 * progress.ckpt_done >= ticket. */
uint64_t train_request_checkpoint(struct trainer *t);
/* Finish the current step, write a final checkpoint, stop. */
void train_request_stop(struct trainer *t);
/* Waits for the thread; call once it reported DONE or FAILED, or after
 * train_request_stop. */
void train_join(struct trainer *t);
/* Once the thread reported DONE and the model changed since (the closing
 * phase): write the final checkpoint again, at the same step (with
 * checkpoint_dir), and evaluate on the whole test set, on the caller's
 * thread. Failures are logged; the first is returned. */
int train_refresh_final(struct trainer *t);
void train_free(struct trainer *t);

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
