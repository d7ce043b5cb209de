/*
 * attach: the external trainer, the daemon's side of gossipd-attach(7). It
 * owns the vector shared with a training process (a sealed memfd, mapped
 * here for as long as the daemon lives), the one attached connection, the
 * step boundaries at which the model takes its queued mixes, the progress
 * the process reports (checked and taken by attach_report), and the
 * checkpoints of the vector.
 *
 * It is the external kind of trainer.h, where the trainer thread is the
 * built-in one: the daemon reads its progress in the same struct
 * train_progress, asks it for checkpoints by ticket, and tells it to stop;
 * the rest of the peer (membership, exchanges, the pull, control) does not
 * know which trainer is behind the model. Unlike the trainer thread it runs on the loop
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
#include "trainer.h"
#include "util.h"

/* A process that sends no step for this long is reported stalled. */
#define ATTACH_STALL_S 60.0
/* How long the daemon waits for an attached process to reach a boundary
 * it needs: on leave, the final checkpoint then takes the vector as it is;
 * a checkpoint asked meanwhile fails with the reason. */
#define ATTACH_BOUNDARY_WAIT_MS 10000

/* An attach request's digest of the process's starting model: BLAKE2b-256
 * of its parameters as float32 (gossipd-attach(7)), for the start
 * agreement (pull.h). */
#define ATTACH_DIGEST_BYTES 32

/* Calls into the daemon, all on the loop thread. */
struct attach_hooks {
	void (*notify)(void *arg);                /* progress or state changed */
	/* The vector now exists with d values (first attach): a joiner may
	 * pull the model into it. Returns 1 when it will: the attach is
	 * answered once the start op says the model is in. digest: what the
	 * process said its starting model's is (NULL: nothing). */
	int (*bound)(void *arg, size_t d, const uint8_t *digest);
	void (*ready)(void *arg);                 /* the vector holds the job's model */
	void (*step)(void *arg, uint64_t step);   /* a boundary passed */
	int (*held)(void *arg, uint64_t step);    /* must the process wait at step? */
	void (*waited)(void *arg, double seconds); /* a held step reply went out */
	/* the process named its optimizer (enum optimizer_kind), or another */
	void (*optimizer)(void *arg, int kind);
	/* The ranges of the d values the process asked to go whole in every
	 * share (n 0: none), or a negative errno with err. */
	int (*whole)(void *arg, const struct model_range *w, size_t n, size_t d,
	    struct errbuf *err);
	/* The job's model into out (d floats; NULL: only whether there is
	 * one) for an evaluation, in a mode whose members share one; a
	 * negative errno where there is none. */
	int (*job_model)(void *arg, float *out, size_t d);
	void *arg;
};

struct attach;

/* Borrows cfg, the model (from model_new_shared), control and the loop. */
int attach_new(const struct config *cfg, struct model *m, struct control *ctl,
    uv_loop_t *loop, const struct attach_hooks *hooks, struct attach **out,
    struct errbuf *err);
/* The external trainer behind trainer.h (its impl is the struct attach):
 * its start op finds the vector holding the job's model at a step (a
 * joiner's pull is done, and the attach that waited for it is answered),
 * or waits for a first process to bring it; its command op serves
 * attach, step, evaluate, train and detach; its stop op takes the final checkpoint at the
 * process's next boundary (or now, or after ATTACH_BOUNDARY_WAIT_MS), then
 * reports DONE. A checkpoint that waits for the process's next boundary
 * fails after ATTACH_BOUNDARY_WAIT_MS, and is written at once if the
 * process goes; its gone op detaches a process whose connection ended or
 * shut its writing side and answers what it waited for (an attach, a held
 * step). */
extern const struct trainer_ops attach_ops;

#endif
