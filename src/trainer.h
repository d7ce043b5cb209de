/*
 * trainer: what a peer asks of whatever trains its model, the built-in
 * trainer thread (train.c) or a training process attached over the
 * control socket (attach.c). Each fills one ops table; the daemon holds
 * one struct trainer and never asks which kind it is, except where the
 * kind is chosen (server.c). The rest of the peer (membership, exchanges,
 * the pull, control) reaches the model through model.h, never through the
 * trainer.
 *
 * Every call is on the loop thread. A trainer reports progress in one
 * record (struct train_progress) and finishes asynchronously: checkpoints
 * by ticket (done when progress.ckpt_done reaches it), a stop by the
 * state TRAIN_DONE; the daemon's notify hook, given to the trainer where
 * it is made, tells the loop when to look.
 */
#ifndef GD_TRAINER_H
#define GD_TRAINER_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "util.h"

enum train_state { TRAIN_TRAINING, TRAIN_LEAVING, TRAIN_DONE, TRAIN_FAILED };

struct train_progress {
	enum train_state state;
	uint64_t step;            /* optimizer steps taken (resumed ones included) */
	uint64_t total_steps;     /* the step budget; 0 when the daemon knows none */
	size_t shard_samples;     /* training samples of this peer; 0: unknown */
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

struct ckpt_state;

/* Optional ops may be NULL. impl is the kind's own object. */
struct trainer_ops {
	const char *name;         /* status's "trainer" */
	/* A checkpoint --resume found: -EINVAL with the reason when it was
	 * written by another kind or model. */
	int (*load)(void *impl, const struct ckpt_state *st, struct errbuf *err);
	/* The model holds the job's parameters at step (resumed or pulled),
	 * or fresh: nothing was loaded into it, and the trainer's own initial
	 * values start the job: go. what gets a sentence for the log and the
	 * service status, e.g. "training fmnist on cpu from step 0". */
	int (*start)(void *impl, uint64_t step, int fresh, char *what, size_t n,
	    struct errbuf *err);
	/* It has progress of its own (before: zeros). */
	int (*active)(void *impl);
	/* Something trains right now (an attached process may be away). */
	int (*present)(void *impl);
	void (*progress)(void *impl, struct train_progress *p);
	/* NULL when the model holds the job's parameters (a checkpoint can be
	 * made), else why not. */
	const char *(*no_model)(void *impl);
	uint64_t (*checkpoint)(void *impl);
	/* Final checkpoint, then TRAIN_DONE; -ENOENT when nothing runs. */
	int (*stop)(void *impl);
	/* After closing changed the model: the final checkpoint and
	 * evaluation again (optional). */
	int (*refresh_final)(void *impl);
	/* Pace let go: a step it held may go on (optional). */
	void (*resume)(void *impl);
	/* The job runs at step, ahead of this trainer (a resumed peer's
	 * first partners say so, rounds.h): train on from there, the
	 * schedule and the sample order of that step (optional: an
	 * attached process keeps its own step). */
	void (*catch_up)(void *impl, uint64_t step);
	/* Its part of status (optional). */
	void (*status)(void *impl, json_t *st);
	/* A control request of its own (optional): CONTROL_REPLIED or
	 * CONTROL_DEFERRED; -ENOENT when cmd is not one of them. */
	int (*command)(void *impl, uint64_t client, const char *cmd, json_t *req,
	    json_t **reply);
	/* A control client it pinned went away (optional). */
	void (*gone)(void *impl, uint64_t client);
	/* Stop its threads and handles; free once the loop ran out. */
	void (*close)(void *impl);
	void (*free)(void *impl);
};

struct trainer;

/* Takes impl. */
struct trainer *trainer_new(const struct trainer_ops *ops, void *impl);
void trainer_free(struct trainer *t);

const char *trainer_name(const struct trainer *t);
int trainer_load(struct trainer *t, const struct ckpt_state *st, struct errbuf *err);
int trainer_start(struct trainer *t, uint64_t step, int fresh, char *what, size_t n,
    struct errbuf *err);
int trainer_active(const struct trainer *t);
int trainer_present(const struct trainer *t);
/* Zeros (accuracy and test_loss -1) before it is active. */
void trainer_progress(const struct trainer *t, struct train_progress *p);
const char *trainer_no_model(const struct trainer *t);
uint64_t trainer_checkpoint(struct trainer *t);
int trainer_stop(struct trainer *t);
int trainer_refresh_final(struct trainer *t);
void trainer_resume(struct trainer *t);
/* -ENOTSUP when the kind has no catch_up. */
int trainer_catch_up(struct trainer *t, uint64_t step);
void trainer_status(const struct trainer *t, json_t *st);
int trainer_command(struct trainer *t, uint64_t client, const char *cmd, json_t *req,
    json_t **reply);
void trainer_gone(struct trainer *t, uint64_t client);
void trainer_close(struct trainer *t);

#endif
