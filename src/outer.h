/*
 * outer: an outer optimizer over what a peer's own steps and its exchanges
 * changed, DiLoCo's outer Nesterov step as NoLoCo applies it without an
 * all-reduce. Every `outer_interval` trainer steps the peer takes the
 * pseudo-gradient g = anchor - x (its steps since the last outer step, and
 * the pull toward its partners that the mixes made), keeps the momentum
 * m = mu m + g, and moves to anchor - lr (g + mu m), the next anchor. With
 * lr 1 and mu 0 that is x itself: the step is off (outer_enabled).
 *
 * It lives in the daemon, not in a trainer, so that the built-in trainer
 * and an attached process get the same one; the process's own optimizer
 * (its momentum, Adam's moments) stays with the process. The move goes
 * into the model as an increment through model_add_in, queued and applied
 * like a mix: a step the trainer takes between the read and the write is
 * kept, and an attached process sees the move at its next boundary, as it
 * sees mixes. No I/O, no clock: the caller says when.
 *
 * Memory: three floats per parameter (anchor, momentum, and the read of
 * the model the increment is computed in), allocated at the first step.
 * The state is not in checkpoints: after a resume or a pull the anchor is
 * taken afresh and the momentum starts at zero.
 */
#ifndef GD_OUTER_H
#define GD_OUTER_H

#include <stdint.h>

#include <jansson.h>

#include "model.h"

struct outer_params {
	double lr;           /* outer learning rate */
	double momentum;     /* Nesterov momentum; 0: none */
	int interval;        /* trainer steps between outer steps */
};

struct outer;

/* Whether p makes the outer step anything but x itself. */
int outer_enabled(const struct outer_params *p);
int outer_new(struct outer **out);
void outer_free(struct outer *o);
/* The model was replaced (pulled, the job's start): the next step only
 * anchors, and the momentum restarts at zero. */
void outer_reset(struct outer *o);
/* Whether the anchor is taken (a step since the last reset). */
int outer_anchored(const struct outer *o);
/* One outer step on m: the first after a reset anchors at m. 0, or a
 * negative errno (-EDOM: m holds non-finite values; nothing changed). */
int outer_step(struct outer *o, struct model *m, const struct outer_params *p);
/* "outer": {steps, skipped} */
int outer_stats_json(const struct outer *o, json_t *obj);

#endif
