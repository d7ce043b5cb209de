/*
 * attach: the external trainer, the daemon's side of gossipd-attach(7). It
 * owns the vector shared with a training process (a sealed memfd, mapped
 * here for as long as the daemon lives), the one attached connection, the
 * step boundaries at which the model takes its queued mixes, the progress
 * the process reports, and the checkpoints of the vector.
 *
 * It stands where the trainer thread stands for the built-in trainer: the
 * daemon reads its progress in the same struct train_progress, asks it for
 * checkpoints by ticket, and tells it to stop; the rest of the peer
 * (membership, exchanges, the pull, control) does not know which trainer
 * is behind the model. Unlike the trainer thread it runs on the loop
 * thread, driven by the process's requests, and it never waits for the
 * process: a process that stops answering holds nothing but its own
 * progress.
 */
#ifndef GD_ATTACH_H
#define GD_ATTACH_H

#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "config.h"
#include "control.h"
#include "model.h"
#include "train.h"
#include "util.h"

/* A process that sends no step for this long is reported stalled. */
#define ATTACH_STALL_S 60.0
/* How long the daemon waits for an attached process to reach a boundary
 * it needs: on leave, the final checkpoint then takes the vector as it is;
 * a checkpoint asked meanwhile fails with the reason. */
#define ATTACH_BOUNDARY_WAIT_MS 10000
/* The most samples one step may report: beyond any batch, and small
 * enough that a rate summed over a second's steps stays finite. */
#define ATTACH_MAX_SAMPLES 1e9

/* Calls into the daemon, all on the loop thread. */
struct attach_hooks {
	void (*notify)(void *arg);                /* progress or state changed */
	/* The vector now exists with d values (first attach): a joiner may
	 * pull the model into it. Returns 1 when it will: the attach is
	 * answered once attach_start says the model is in. */
	int (*bound)(void *arg, size_t d);
	void (*ready)(void *arg);                 /* the vector holds the job's model */
	void (*step)(void *arg, uint64_t step);   /* a boundary passed */
	int (*held)(void *arg, uint64_t step);    /* must the process wait at step? */
	void (*waited)(void *arg, double seconds); /* a held step reply went out */
	void *arg;
};

struct attach;

/* Borrows cfg, the model (from model_new_shared), control and the loop. */
int attach_new(const struct config *cfg, struct model *m, struct control *ctl,
    uv_loop_t *loop, const struct attach_hooks *hooks, struct attach **out,
    struct errbuf *err);
/* Closes the timer; attach_free once the loop has run out. */
void attach_close(struct attach *a);
void attach_free(struct attach *a);

/* A resumed checkpoint: the vector is created holding x (d values). */
int attach_load(struct attach *a, const float *x, size_t d, uint64_t step,
    struct errbuf *err);
/* The vector holds the job's model at step (a joiner's pull is done):
 * the waiting attach is answered. */
void attach_start(struct attach *a, uint64_t step);
/* Pace let go: a step reply it held may go out. */
void attach_resume(struct attach *a);

/* The control requests of gossipd-attach(7); CONTROL_REPLIED or
 * CONTROL_DEFERRED as a control handler returns. */
int attach_on_attach(struct attach *a, uint64_t client, json_t *req, json_t **reply);
int attach_on_step(struct attach *a, uint64_t client, json_t *req, json_t **reply);
int attach_on_detach(struct attach *a, uint64_t client, json_t *req, json_t **reply);
/* The attached connection ended or shut its writing side: the process
 * is detached, and what it waited for (an attach, a held step) answered. */
void attach_gone(struct attach *a, uint64_t client);

void attach_get_progress(struct attach *a, struct train_progress *p);
int attach_attached(const struct attach *a);
/* The vector holds the job's model (a process stepped, a pull or a
 * checkpoint filled it). */
int attach_holds_model(const struct attach *a);
/* status's "attach" object. */
json_t *attach_status(struct attach *a);
/* As train_request_checkpoint: done when progress.ckpt_done >= ticket.
 * One that waits for the process's next boundary fails after
 * ATTACH_BOUNDARY_WAIT_MS, and is written at once if the process goes. */
uint64_t attach_request_checkpoint(struct attach *a);
/* Final checkpoint at the process's next boundary (or now, or after
 * ATTACH_BOUNDARY_WAIT_MS), then DONE. */
void attach_request_stop(struct attach *a);

#endif
